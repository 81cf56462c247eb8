/* SVG heatmap of attention weights. The picture is built in three steps: the grid of cell values
 * (block means when the map is larger than HEATMAP_MAX_CELLS a side), the layout (every size in whole
 * pixels, chosen from the grid and the label widths), then the SVG text itself, written to a temporary
 * file that is renamed into place only once complete. */

#include "heatmap.h"
#include "atomic_file.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__)
#define HM_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define HM_PRINTF(fmt, args)
#endif

/* Latin families first, then CJK ones so that Chinese token labels show, the generic family last. */
#define FONT_FAMILY "Arial, Helvetica, 'Noto Sans CJK SC', 'Noto Sans SC', 'Microsoft YaHei', 'PingFang SC', sans-serif"

/* Layout, in pixels. */
enum {
    MARGIN = 16,
    TITLE_FONT = 18,
    TITLE_H = 30,
    NOTE_FONT = 12,
    NOTE_H = 18,
    NOTES_GAP = 6, /* below the last note, so that it does not touch the panel titles */
    PANEL_TITLE_FONT = 13,
    PANEL_TITLE_H = 22,
    PANEL_GAP = 28,
    AXIS_FONT = 13,
    AXIS_TITLE_W = 20, /* "Query", written upwards left of the row labels */
    AXIS_TITLE_H = 22, /* "Key", below the column labels */
    TICK_FONT = 11,
    TICK_LEN = 4,
    LINE_PITCH = 14, /* closest two tick labels may be, centre to centre */
    ANNOT_FONT = 11,
    BAR_GAP = 24,
    BAR_W = 16,
    BAR_LABEL_W = 56,
    BAR_MIN_H = 160,
    MAX_LABEL_CHARS = 16, /* longer labels are cut, with an ellipsis */
};

static const char nan_fill[] = "#bdbdbd";

/* ---------------------------------------------------------------------------------------------- */
/* Errors and numbers                                                                              */
/* ---------------------------------------------------------------------------------------------- */

static int fail(char *err, size_t err_size, const char *fmt, ...) HM_PRINTF(3, 4);
static int fail(char *err, size_t err_size, const char *fmt, ...)
{
    if (err && err_size > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, err_size, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* printf's decimal point follows LC_NUMERIC, but SVG and its readers need '.', whatever the locale. */
static void fix_decimal_point(char *s)
{
    for (; *s; s++)
        if (*s == ',')
            *s = '.';
}

/* NaN and infinities, spelled the same on every libc; NULL for finite values. */
static const char *non_finite_name(double v)
{
    return isnan(v) ? "nan" : isinf(v) ? (v > 0 ? "inf" : "-inf") : NULL;
}

/* A value with fixed decimals, for annotations, tick labels and coordinates. */
static const char *format_fixed(char *buf, size_t cap, double v, int decimals)
{
    const char *name = non_finite_name(v);
    if (name)
        snprintf(buf, cap, "%s", name);
    else
        snprintf(buf, cap, "%.*f", decimals, v);
    fix_decimal_point(buf);
    return buf;
}

/* A value to six significant digits, for the cells' data-value attributes. */
static const char *format_general(char *buf, size_t cap, double v)
{
    const char *name = non_finite_name(v);
    if (name)
        snprintf(buf, cap, "%s", name);
    else
        snprintf(buf, cap, "%.6g", v);
    fix_decimal_point(buf);
    return buf;
}

/* ---------------------------------------------------------------------------------------------- */
/* Text: UTF-8 in, escaped XML out                                                                 */
/* ---------------------------------------------------------------------------------------------- */

/* Decode the code point at s (which is not at its NUL) and set *len to the bytes it takes. A malformed
 * byte decodes as U+FFFD, one byte long, so that broken labels still give valid UTF-8 and XML. */
static uint32_t utf8_decode(const unsigned char *s, size_t *len)
{
    const unsigned char c = s[0];
    size_t n;
    uint32_t cp, min;
    *len = 1;
    if (c < 0x80)
        return c;
    if ((c & 0xE0) == 0xC0) {
        n = 2, cp = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
        n = 3, cp = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
        n = 4, cp = c & 0x07, min = 0x10000;
    } else {
        return 0xFFFD;
    }
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) /* also stops at the NUL */
            return 0xFFFD;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0xFFFD;
    *len = n;
    return cp;
}

static size_t utf8_length(const char *s)
{
    size_t count = 0, len;
    for (const unsigned char *p = (const unsigned char *)s; *p; p += len, count++)
        utf8_decode(p, &len);
    return count;
}

static void put_utf8(FILE *fp, uint32_t cp)
{
    if (cp < 0x80) {
        fputc((int)cp, fp);
    } else if (cp < 0x800) {
        fputc((int)(0xC0 | cp >> 6), fp);
        fputc((int)(0x80 | (cp & 0x3F)), fp);
    } else if (cp < 0x10000) {
        fputc((int)(0xE0 | cp >> 12), fp);
        fputc((int)(0x80 | (cp >> 6 & 0x3F)), fp);
        fputc((int)(0x80 | (cp & 0x3F)), fp);
    } else {
        fputc((int)(0xF0 | cp >> 18), fp);
        fputc((int)(0x80 | (cp >> 12 & 0x3F)), fp);
        fputc((int)(0x80 | (cp >> 6 & 0x3F)), fp);
        fputc((int)(0x80 | (cp & 0x3F)), fp);
    }
}

/* Code points XML 1.0 allows in text; control characters must not reach the file. */
static bool xml_allowed(uint32_t cp)
{
    return cp == 0x9 || cp == 0xA || cp == 0xD || (cp >= 0x20 && cp <= 0xD7FF) || (cp >= 0xE000 && cp <= 0xFFFD) ||
           (cp >= 0x10000 && cp <= 0x10FFFF);
}

/* Write s as XML character data (also safe inside a quoted attribute), cut to max_chars code points
 * with a final ellipsis when longer. */
static void write_text(FILE *fp, const char *s, size_t max_chars)
{
    const bool cut = utf8_length(s) > max_chars;
    size_t len;
    size_t i = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p += len, i++) {
        if (cut && i + 1 == max_chars) {
            put_utf8(fp, 0x2026); /* … */
            return;
        }
        uint32_t cp = utf8_decode(p, &len);
        switch (cp) {
        case '&': fputs("&amp;", fp); break;
        case '<': fputs("&lt;", fp); break;
        case '>': fputs("&gt;", fp); break;
        case '"': fputs("&quot;", fp); break;
        case '\'': fputs("&apos;", fp); break;
        case '\t': case '\n': case '\r': fputc(' ', fp); break;
        default: put_utf8(fp, xml_allowed(cp) ? cp : 0xFFFD);
        }
    }
}

/* East Asian wide characters take about one em; everything else is taken as 0.55 em, a fair average
 * for a sans-serif face. Only used to reserve room, so estimates are fine. */
static bool is_wide(uint32_t cp)
{
    return (cp >= 0x1100 && cp <= 0x115F) || (cp >= 0x2E80 && cp <= 0xA4CF) || (cp >= 0xAC00 && cp <= 0xD7A3) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0xFE30 && cp <= 0xFE4F) || (cp >= 0xFF00 && cp <= 0xFF60) ||
           (cp >= 0xFFE0 && cp <= 0xFFE6) || (cp >= 0x1F300 && cp <= 0x1FAFF) || cp >= 0x20000;
}

static double text_width(const char *s, double font_size, size_t max_chars)
{
    double ems = 0;
    size_t len, i = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p && i < max_chars; p += len, i++)
        ems += is_wide(utf8_decode(p, &len)) ? 1.0 : 0.55;
    return ems * font_size;
}

/* ---------------------------------------------------------------------------------------------- */
/* Colours                                                                                         */
/* ---------------------------------------------------------------------------------------------- */

/* The nine anchor colours of ColorBrewer's YlGnBu, light to dark, as matplotlib uses them. */
static const unsigned char ylgnbu[9][3] = {
    {0xff, 0xff, 0xd9}, {0xed, 0xf8, 0xb1}, {0xc7, 0xe9, 0xb4}, {0x7f, 0xcd, 0xbb}, {0x41, 0xb6, 0xc4},
    {0x1d, 0x91, 0xc0}, {0x22, 0x5e, 0xa8}, {0x25, 0x34, 0x94}, {0x08, 0x1d, 0x58},
};

/* t in [0, 1] to a colour, linear between anchors (as SVG's gradient interpolates the colour bar). */
static void colour_at(double t, unsigned char rgb[3])
{
    t = !(t > 0) ? 0 : t > 1 ? 1 : t; /* NaN too: its cell is drawn grey anyway */
    const double x = t * 8;
    const size_t i = x >= 8 ? 7 : (size_t)x;
    const double f = x - (double)i;
    for (size_t c = 0; c < 3; c++)
        rgb[c] = (unsigned char)lround(ylgnbu[i][c] + f * (ylgnbu[i + 1][c] - ylgnbu[i][c]));
}

static double linear_channel(unsigned char c)
{
    const double s = c / 255.0;
    return s <= 0.03928 ? s / 12.92 : pow((s + 0.055) / 1.055, 2.4);
}

/* seaborn's rule for annotations: dark text where the cell's relative luminance is above 0.408, white
 * text on darker cells. */
static const char *text_colour_on(const unsigned char rgb[3])
{
    const double lum = 0.2126 * linear_channel(rgb[0]) + 0.7152 * linear_channel(rgb[1]) +
                       0.0722 * linear_channel(rgb[2]);
    return lum > 0.408 ? "#262626" : "#ffffff";
}

/* ---------------------------------------------------------------------------------------------- */
/* The grid of cell values                                                                         */
/* ---------------------------------------------------------------------------------------------- */

/* One axis of a panel: n data positions drawn as `cells` cells of `factor` positions each. */
typedef struct axis {
    size_t n, factor, cells;
    const char *const *labels; /* NULL: indices */
} axis;

typedef struct grid {
    size_t panels; /* heads drawn */
    axis rows, cols;
    float *values; /* panels × rows.cells × cols.cells: the mean of each block */
    double lo, hi; /* colour range */
} grid;

static void init_axis(axis *a, size_t n, const char *const *labels)
{
    memset(a, 0, sizeof *a);
    a->n = n;
    a->factor = (n + HEATMAP_MAX_CELLS - 1) / HEATMAP_MAX_CELLS;
    a->cells = (n + a->factor - 1) / a->factor;
    a->labels = labels;
}

/* The label of a cell: the token, or its index, or for averaged blocks the index range. */
static const char *axis_label(const axis *a, size_t cell, char *buf, size_t cap)
{
    const size_t first = cell * a->factor;
    if (a->factor > 1) {
        const size_t last = first + a->factor - 1 < a->n ? first + a->factor - 1 : a->n - 1;
        snprintf(buf, cap, "%zu\xe2\x80\x93%zu", first, last); /* en dash */
    } else if (a->labels && a->labels[first]) {
        return a->labels[first];
    } else {
        snprintf(buf, cap, "%zu", first);
    }
    return buf;
}

static int build_grid(grid *g, const float *weights, size_t heads, size_t q_len, size_t kv_len,
                      const heatmap_opts *opts, char *err, size_t err_size)
{
    memset(g, 0, sizeof *g);
    g->panels = heads < HEATMAP_MAX_PANELS ? heads : HEATMAP_MAX_PANELS;
    init_axis(&g->rows, q_len, opts && opts->n_query_labels ? opts->query_labels : NULL);
    init_axis(&g->cols, kv_len, opts && opts->n_key_labels ? opts->key_labels : NULL);
    const size_t per_panel = g->rows.cells * g->cols.cells; /* at most 64 × 64 */
    g->values = malloc(g->panels * per_panel * sizeof *g->values);
    if (!g->values)
        return fail(err, err_size, "out of memory");

    double lo = INFINITY, hi = -INFINITY;
    for (size_t p = 0; p < g->panels; p++) {
        const float *head = weights + p * q_len * kv_len;
        for (size_t r = 0; r < g->rows.cells; r++) {
            const size_t r0 = r * g->rows.factor, r1 = r0 + g->rows.factor < q_len ? r0 + g->rows.factor : q_len;
            for (size_t c = 0; c < g->cols.cells; c++) {
                const size_t c0 = c * g->cols.factor,
                             c1 = c0 + g->cols.factor < kv_len ? c0 + g->cols.factor : kv_len;
                double sum = 0; /* a NaN anywhere in the block makes the cell NaN: it is not hidden */
                for (size_t i = r0; i < r1; i++)
                    for (size_t j = c0; j < c1; j++)
                        sum += head[i * kv_len + j];
                const double mean = sum / (double)((r1 - r0) * (c1 - c0));
                g->values[(p * g->rows.cells + r) * g->cols.cells + c] = (float)mean;
                if (isfinite(mean)) {
                    lo = mean < lo ? mean : lo;
                    hi = mean > hi ? mean : hi;
                }
            }
        }
    }
    if (!(lo <= hi)) { /* no finite value at all */
        lo = 0;
        hi = 1;
    } else if (lo == hi) { /* one value everywhere: scale 0..max instead, or 0..1 for zeros */
        if (hi > 0)
            lo = 0;
        else if (hi < 0)
            hi = 0;
        else
            hi = 1;
    }
    g->lo = lo;
    g->hi = hi;
    return 0;
}

static double grid_value(const grid *g, size_t panel, size_t r, size_t c)
{
    return g->values[(panel * g->rows.cells + r) * g->cols.cells + c];
}

/* ---------------------------------------------------------------------------------------------- */
/* Layout                                                                                          */
/* ---------------------------------------------------------------------------------------------- */

typedef struct layout {
    size_t panel_cols, panel_rows;
    int cell;        /* pixels per cell side; even, so cell centres are whole pixels */
    int decimals;    /* of the annotations; 0: the cells are too small to annotate */
    bool rotate_keys; /* key labels written upwards, as they are wider than a cell */
    size_t row_step, col_step; /* label every n-th row / column, so that labels do not overlap */
    int ytick_w, xtick_h;
    int grid_w, grid_h, panel_w, panel_h;
    int top;         /* y of the first row of panels */
    int bar_x, bar_y, bar_h;
    int width, height;
} layout;

static double widest_label(const axis *a, double font_size)
{
    char buf[64];
    double w = 0;
    for (size_t i = 0; i < a->cells; i++) {
        const double lw = text_width(axis_label(a, i, buf, sizeof buf), font_size, MAX_LABEL_CHARS);
        w = lw > w ? lw : w;
    }
    return w;
}

/* How many annotation decimals fit in a cell (4 at most, 2 at least), or 0 for no annotations. */
static int annotation_decimals(const grid *g, int cell)
{
    if (cell < ANNOT_FONT + 5)
        return 0;
    const double biggest = fmax(fabs(g->lo), fabs(g->hi));
    const int int_digits = biggest >= 10 ? (int)log10(biggest) + 1 : 1;
    for (int d = 4; d >= 2; d--) {
        const int chars = int_digits + 1 + d + (g->lo < 0 ? 1 : 0);
        if (chars * 0.6 * ANNOT_FONT + 4 <= cell)
            return d;
    }
    return 0;
}

static size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

static void plan_layout(layout *L, const grid *g, double title_w, double notes_w, size_t n_notes)
{
    memset(L, 0, sizeof *L);
    L->panel_cols = g->panels < 4 ? g->panels : 4;
    L->panel_rows = ceil_div(g->panels, L->panel_cols);

    /* Cells as large as fit a panel of about `target` pixels, between 4 and 64 (48 with many panels). */
    const size_t target = g->panels == 1 ? 560 : g->panels <= 4 ? 400 : 280;
    const size_t longest = g->rows.cells > g->cols.cells ? g->rows.cells : g->cols.cells;
    size_t cell = target / longest;
    const size_t max_cell = g->panels <= 4 ? 64 : 48;
    cell = cell < 4 ? 4 : cell > max_cell ? max_cell : cell;
    L->cell = (int)(cell & ~(size_t)1);
    L->decimals = annotation_decimals(g, L->cell);

    const double row_label_w = widest_label(&g->rows, TICK_FONT), col_label_w = widest_label(&g->cols, TICK_FONT);
    L->row_step = ceil_div(LINE_PITCH, (size_t)L->cell);
    L->rotate_keys = col_label_w + 6 > L->cell;
    L->col_step = L->rotate_keys ? ceil_div(LINE_PITCH, (size_t)L->cell) : 1;

    L->ytick_w = (int)ceil(row_label_w) + TICK_LEN + 6;
    L->xtick_h = (L->rotate_keys ? (int)ceil(col_label_w) : TICK_FONT) + TICK_LEN + 8;
    L->grid_w = (int)g->cols.cells * L->cell;
    L->grid_h = (int)g->rows.cells * L->cell;
    L->panel_w = AXIS_TITLE_W + L->ytick_w + L->grid_w;
    L->panel_h = PANEL_TITLE_H + L->grid_h + L->xtick_h + AXIS_TITLE_H;

    L->top = MARGIN + TITLE_H + (n_notes > 0 ? (int)n_notes * NOTE_H + NOTES_GAP : 0);
    const int panels_w = (int)L->panel_cols * L->panel_w + ((int)L->panel_cols - 1) * PANEL_GAP;
    const int panels_h = (int)L->panel_rows * L->panel_h + ((int)L->panel_rows - 1) * PANEL_GAP;
    L->bar_x = MARGIN + panels_w + BAR_GAP;
    L->bar_y = L->top + PANEL_TITLE_H;
    L->bar_h = L->grid_h > BAR_MIN_H ? L->grid_h : BAR_MIN_H;

    L->width = L->bar_x + BAR_W + BAR_LABEL_W + MARGIN;
    const double text_w = fmax(title_w, notes_w) + 2 * MARGIN;
    if (text_w > L->width)
        L->width = (int)ceil(text_w);
    const int panels_bottom = L->top + panels_h, bar_bottom = L->bar_y + L->bar_h + TICK_FONT;
    L->height = (panels_bottom > bar_bottom ? panels_bottom : bar_bottom) + MARGIN;
}

/* ---------------------------------------------------------------------------------------------- */
/* SVG output                                                                                      */
/* ---------------------------------------------------------------------------------------------- */

static void write_cells(FILE *fp, const grid *g, const layout *L, size_t panel, int gx, int gy)
{
    char value[32];
    fputs("<g class=\"cells\" shape-rendering=\"crispEdges\">\n", fp);
    for (size_t r = 0; r < g->rows.cells; r++) {
        for (size_t c = 0; c < g->cols.cells; c++) {
            const double v = grid_value(g, panel, r, c);
            unsigned char rgb[3];
            colour_at((v - g->lo) / (g->hi - g->lo), rgb);
            char fill[8];
            snprintf(fill, sizeof fill, "#%02x%02x%02x", rgb[0], rgb[1], rgb[2]);
            fprintf(fp,
                    "<rect class=\"cell\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\" data-row=\"%zu\" "
                    "data-col=\"%zu\" data-value=\"%s\"/>\n",
                    gx + (int)c * L->cell, gy + (int)r * L->cell, L->cell, L->cell, isnan(v) ? nan_fill : fill,
                    r, c, format_general(value, sizeof value, v));
        }
    }
    fputs("</g>\n", fp);

    if (L->decimals == 0)
        return;
    fprintf(fp, "<g class=\"annotations\" font-size=\"%d\" text-anchor=\"middle\">\n", ANNOT_FONT);
    for (size_t r = 0; r < g->rows.cells; r++) {
        for (size_t c = 0; c < g->cols.cells; c++) {
            const double v = grid_value(g, panel, r, c);
            unsigned char rgb[3];
            colour_at((v - g->lo) / (g->hi - g->lo), rgb);
            fprintf(fp, "<text x=\"%d\" y=\"%d\" fill=\"%s\">%s</text>\n", gx + (int)c * L->cell + L->cell / 2,
                    gy + (int)r * L->cell + L->cell / 2 + ANNOT_FONT * 7 / 20, /* baseline: centre + 0.35 em */
                    isnan(v) ? "#262626" : text_colour_on(rgb), format_fixed(value, sizeof value, v, L->decimals));
        }
    }
    fputs("</g>\n", fp);
}

/* Row labels left of the grid, column labels below it (upwards when they are wider than a cell),
 * tick marks, and the axis titles. */
static void write_axes(FILE *fp, const grid *g, const layout *L, int px, int gx, int gy)
{
    char buf[64];
    fprintf(fp, "<g class=\"ticks\" font-size=\"%d\" fill=\"#262626\">\n<path stroke=\"#262626\" d=\"", TICK_FONT);
    for (size_t r = 0; r < g->rows.cells; r += L->row_step)
        fprintf(fp, "M%d %dh%d", gx, gy + (int)r * L->cell + L->cell / 2, -TICK_LEN);
    for (size_t c = 0; c < g->cols.cells; c += L->col_step)
        fprintf(fp, "M%d %dv%d", gx + (int)c * L->cell + L->cell / 2, gy + L->grid_h, TICK_LEN);
    fputs("\"/>\n", fp);

    for (size_t r = 0; r < g->rows.cells; r += L->row_step) {
        fprintf(fp, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">", gx - TICK_LEN - 3,
                gy + (int)r * L->cell + L->cell / 2 + TICK_FONT * 7 / 20);
        write_text(fp, axis_label(&g->rows, r, buf, sizeof buf), MAX_LABEL_CHARS);
        fputs("</text>\n", fp);
    }
    for (size_t c = 0; c < g->cols.cells; c += L->col_step) {
        const int cx = gx + (int)c * L->cell + L->cell / 2, top = gy + L->grid_h + TICK_LEN;
        if (L->rotate_keys)
            fprintf(fp, "<text transform=\"translate(%d %d) rotate(-90)\" text-anchor=\"end\">",
                    cx + TICK_FONT * 7 / 20, top + 3);
        else
            fprintf(fp, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">", cx, top + TICK_FONT + 2);
        write_text(fp, axis_label(&g->cols, c, buf, sizeof buf), MAX_LABEL_CHARS);
        fputs("</text>\n", fp);
    }
    fputs("</g>\n", fp);

    fprintf(fp, "<g class=\"axis-titles\" font-size=\"%d\" text-anchor=\"middle\">\n", AXIS_FONT);
    fprintf(fp, "<text x=\"%d\" y=\"%d\">Key</text>\n", gx + L->grid_w / 2, gy + L->grid_h + L->xtick_h + 15);
    fprintf(fp, "<text transform=\"translate(%d %d) rotate(-90)\">Query</text>\n", px + 14, gy + L->grid_h / 2);
    fputs("</g>\n", fp);
}

static void write_panel(FILE *fp, const grid *g, const layout *L, size_t panel)
{
    const int px = MARGIN + (int)(panel % L->panel_cols) * (L->panel_w + PANEL_GAP);
    const int py = L->top + (int)(panel / L->panel_cols) * (L->panel_h + PANEL_GAP);
    const int gx = px + AXIS_TITLE_W + L->ytick_w, gy = py + PANEL_TITLE_H;

    fprintf(fp, "<g class=\"panel\" data-head=\"%zu\">\n", panel);
    fprintf(fp, "<text x=\"%d\" y=\"%d\" font-size=\"%d\" text-anchor=\"middle\">head %zu</text>\n",
            gx + L->grid_w / 2, py + 15, PANEL_TITLE_FONT, panel);
    write_cells(fp, g, L, panel, gx, gy);
    write_axes(fp, g, L, px, gx, gy);
    fputs("</g>\n", fp);
}

/* "Nice" tick values (1, 2 or 5 times a power of ten) across lo..hi, labelled to the step's precision. */
static void write_colour_bar(FILE *fp, const grid *g, const layout *L)
{
    fputs("<defs><linearGradient id=\"ylgnbu\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">\n", fp);
    char num[32], y[32];
    for (size_t i = 0; i < 9; i++)
        fprintf(fp, "<stop offset=\"%s\" stop-color=\"#%02x%02x%02x\"/>\n", format_fixed(num, sizeof num, i / 8.0, 3),
                ylgnbu[i][0], ylgnbu[i][1], ylgnbu[i][2]);
    fputs("</linearGradient></defs>\n", fp);

    fprintf(fp, "<g class=\"colour-bar\" font-size=\"%d\" fill=\"#262626\">\n", TICK_FONT);
    fprintf(fp, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"url(#ylgnbu)\"/>\n", L->bar_x,
            L->bar_y, BAR_W, L->bar_h);

    const double range = g->hi - g->lo, raw = range / 5, magnitude = pow(10, floor(log10(raw)));
    const double norm = raw / magnitude;
    const double step = (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * magnitude;
    const int decimals = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
    const double first = ceil(g->lo / step - 1e-9);
    for (int k = 0; k <= 12 && (first + k) * step <= g->hi + step * 1e-9; k++) {
        const double tick = (first + k) * step, t = (tick - g->lo) / range;
        format_fixed(y, sizeof y, L->bar_y + L->bar_h * (1 - t), 1);
        fprintf(fp, "<path stroke=\"#262626\" d=\"M%d %sh%d\"/>\n", L->bar_x + BAR_W, y, TICK_LEN);
        format_fixed(y, sizeof y, L->bar_y + L->bar_h * (1 - t) + TICK_FONT * 0.35, 1);
        fprintf(fp, "<text x=\"%d\" y=\"%s\">%s</text>\n", L->bar_x + BAR_W + TICK_LEN + 3, y,
                format_fixed(num, sizeof num, tick, decimals));
    }
    fputs("</g>\n", fp);
}

static void write_svg(FILE *fp, const grid *g, const layout *L, const char *title, char notes[][96],
                      size_t n_notes)
{
    fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", fp);
    fprintf(fp,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"%s\">\n",
            L->width, L->height, L->width, L->height, FONT_FAMILY);
    fputs("<title>", fp);
    write_text(fp, title, SIZE_MAX);
    fputs("</title>\n", fp);
    fputs("<rect class=\"background\" width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n", fp);

    fprintf(fp, "<text class=\"title\" x=\"%d\" y=\"%d\" font-size=\"%d\" text-anchor=\"middle\">", L->width / 2,
            MARGIN + TITLE_FONT, TITLE_FONT);
    write_text(fp, title, SIZE_MAX);
    fputs("</text>\n", fp);
    for (size_t i = 0; i < n_notes; i++) {
        fprintf(fp, "<text class=\"note\" x=\"%d\" y=\"%d\" font-size=\"%d\" text-anchor=\"middle\" fill=\"#555555\">",
                L->width / 2, MARGIN + TITLE_H + (int)i * NOTE_H + NOTE_FONT, NOTE_FONT);
        write_text(fp, notes[i], SIZE_MAX);
        fputs("</text>\n", fp);
    }

    for (size_t p = 0; p < g->panels; p++)
        write_panel(fp, g, L, p);
    write_colour_bar(fp, g, L);
    fputs("</svg>\n", fp);
}

/* ---------------------------------------------------------------------------------------------- */
/* Arguments and the file                                                                          */
/* ---------------------------------------------------------------------------------------------- */

static int check_labels(const char *const *labels, size_t n_labels, size_t expected, const char *what,
                        char *err, size_t err_size)
{
    if (n_labels == 0)
        return 0;
    if (!labels)
        return fail(err, err_size, "%s labels: the count is %zu but the array is NULL", what, n_labels);
    if (n_labels != expected)
        return fail(err, err_size, "%zu %s labels given for %zu %ss", n_labels, what, expected, what);
    return 0;
}

/* The arguments' sizes and labels; 0, or -1 with a reason in err. */
static int check_args(const float *weights, size_t heads, size_t q_len, size_t kv_len, const heatmap_opts *opts,
                      char *err, size_t err_size)
{
    if (!weights)
        return fail(err, err_size, "heatmap_write_svg: weights is NULL");
    if (heads == 0 || q_len == 0 || kv_len == 0)
        return fail(err, err_size, "nothing to draw: heads %zu, q_len %zu, kv_len %zu", heads, q_len, kv_len);
    if (q_len > SIZE_MAX / kv_len || q_len * kv_len > SIZE_MAX / heads / sizeof(float))
        return fail(err, err_size, "heads × q_len × kv_len overflows");
    if (opts && (check_labels(opts->query_labels, opts->n_query_labels, q_len, "query", err, err_size) ||
                 check_labels(opts->key_labels, opts->n_key_labels, kv_len, "key", err, err_size)))
        return -1;
    return 0;
}

int heatmap_write_svg_to(FILE *fp, const float *weights, size_t heads, size_t q_len, size_t kv_len,
                         const heatmap_opts *opts, char *err, size_t err_size)
{
    if (check_args(weights, heads, q_len, kv_len, opts, err, err_size))
        return -1;
    grid g;
    if (build_grid(&g, weights, heads, q_len, kv_len, opts, err, err_size))
        return -1;

    const char *title = opts && opts->title ? opts->title : "Attention weights";
    char notes[2][96];
    size_t n_notes = 0;
    if (heads > g.panels)
        snprintf(notes[n_notes++], sizeof notes[0], "showing the first %zu of %zu heads", g.panels, heads);
    if (g.rows.factor > 1 || g.cols.factor > 1) {
        const bool ragged = q_len % g.rows.factor != 0 || kv_len % g.cols.factor != 0;
        snprintf(notes[n_notes++], sizeof notes[0], "each cell averages %zu×%zu weights%s", g.rows.factor,
                 g.cols.factor, ragged ? " (edge cells fewer)" : "");
    }
    double notes_w = 0;
    for (size_t i = 0; i < n_notes; i++)
        notes_w = fmax(notes_w, text_width(notes[i], NOTE_FONT, SIZE_MAX));
    layout L;
    plan_layout(&L, &g, text_width(title, TITLE_FONT, SIZE_MAX), notes_w, n_notes);

    write_svg(fp, &g, &L, title, notes, n_notes);
    free(g.values);
    return ferror(fp) ? fail(err, err_size, "cannot write: %s", strerror(errno ? errno : EIO)) : 0;
}

int heatmap_write_svg(const char *path, const float *weights, size_t heads, size_t q_len, size_t kv_len,
                      const heatmap_opts *opts, char *err, size_t err_size)
{
    if (!path)
        return fail(err, err_size, "heatmap_write_svg: path is NULL");
    if (check_args(weights, heads, q_len, kv_len, opts, err, err_size)) /* (before a stream is opened) */
        return -1;
    atomic_file t;
    if (atomic_open(&t, path, err, err_size))
        return -1;
    if (heatmap_write_svg_to(t.fp, weights, heads, q_len, kv_len, opts, err, err_size)) {
        atomic_abort(&t);
        return -1;
    }
    return atomic_commit(&t, err, err_size);
}
