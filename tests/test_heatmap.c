/* Tests of the SVG heatmap writer (tools/heatmap.c): cell counts for one head, several heads, more
 * heads than are drawn, and maps large enough to be averaged down; the notes on the picture; label
 * escaping; and that every file is well-formed XML in valid UTF-8 (checked by a small parser here). */
#define TU_NO_OPENCL /* the OpenCL-free part of the test utility */
#include "test_util.h"
#include "heatmap.h"

#include <check.h>
#include <ctype.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---------------------------------------------------------------------------------------------- */
/* Helpers                                                                                         */
/* ---------------------------------------------------------------------------------------------- */

static const char *tmp_dir; /* this test's scratch folder, removed by tu_sys_teardown */
static char svg_path[1100];

static void make_tmp_dir(void)
{
    tmp_dir = tu_scratch_dir("test_heatmap");
    snprintf(svg_path, sizeof svg_path, "%s/map.svg", tmp_dir);
}

static char *read_text(const char *path)
{
    size_t len;
    char *text = tu_read_file(path, &len);
    ck_assert_msg(text != NULL, "cannot open %s", path);
    ck_assert_uint_eq(strlen(text), len); /* no NUL bytes inside */
    return text;
}

static size_t count_occurrences(const char *text, const char *needle)
{
    size_t n = 0;
    for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

static bool valid_utf8(const unsigned char *s)
{
    while (*s) {
        size_t n = *s < 0x80 ? 1 : (*s & 0xE0) == 0xC0 ? 2 : (*s & 0xF0) == 0xE0 ? 3 : (*s & 0xF8) == 0xF0 ? 4 : 0;
        if (n == 0 || (n == 2 && *s < 0xC2))
            return false;
        for (size_t i = 1; i < n; i++)
            if ((s[i] & 0xC0) != 0x80)
                return false;
        s += n;
    }
    return true;
}

/* Length of the entity or character reference at s ("&amp;", "&#x41;", ...), 0 if it is not one. */
static size_t reference_length(const char *s)
{
    static const char *const named[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"};
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
        if (strncmp(s, named[i], strlen(named[i])) == 0)
            return strlen(named[i]);
    if (s[1] != '#')
        return 0;
    const bool hex = s[2] == 'x';
    size_t i = hex ? 3 : 2;
    const size_t start = i;
    while (hex ? isxdigit((unsigned char)s[i]) : isdigit((unsigned char)s[i]))
        i++;
    return i > start && s[i] == ';' ? i + 1 : 0;
}

static size_t name_length(const char *s)
{
    size_t n = 0;
    while (isalnum((unsigned char)s[n]) || (s[n] != '\0' && strchr("-_:.", s[n])))
        n++;
    return n;
}

/* A small well-formedness check: declaration first, one root element, tags balanced and properly
 * nested, attributes quoted without '<', only valid references. NULL if fine, else the reason. */
static const char *xml_problem(const char *s)
{
    const char *stack[64];
    size_t lens[64], depth = 0;
    bool root_done = false;
    if (strncmp(s, "<?xml ", 6) != 0)
        return "no XML declaration";
    for (const char *p = s; *p;) {
        if (*p == '&') {
            if (!reference_length(p))
                return "bad reference";
            p += reference_length(p);
        } else if (*p != '<') {
            if (depth == 0 && !isspace((unsigned char)*p))
                return "text outside the root element";
            p++;
        } else if (p[1] == '?' || strncmp(p, "<!--", 4) == 0) {
            const char *end = strstr(p, p[1] == '?' ? "?>" : "-->");
            if (!end)
                return "unterminated declaration or comment";
            p = end + (p[1] == '?' ? 2 : 3);
        } else if (p[1] == '/') {
            const size_t n = name_length(p + 2);
            if (depth == 0 || n != lens[depth - 1] || strncmp(p + 2, stack[depth - 1], n) != 0)
                return "end tag does not match";
            depth--;
            p += 2 + n;
            if (*p++ != '>')
                return "bad end tag";
            root_done = depth == 0;
        } else {
            if (root_done)
                return "a second root element";
            const char *name = p + 1;
            const size_t n = name_length(name);
            if (n == 0)
                return "tag without a name";
            p = name + n;
            for (;;) {
                const bool spaced = isspace((unsigned char)*p);
                while (isspace((unsigned char)*p))
                    p++;
                if (*p == '>' || (p[0] == '/' && p[1] == '>')) {
                    if (*p == '>') {
                        if (depth == 64)
                            return "nested too deep";
                        stack[depth] = name;
                        lens[depth++] = n;
                    } else {
                        root_done = depth == 0;
                    }
                    p += *p == '>' ? 1 : 2;
                    break;
                }
                const size_t an = name_length(p);
                if (!spaced || an == 0 || p[an] != '=' || (p[an + 1] != '"' && p[an + 1] != '\''))
                    return "bad attribute";
                const char quote = p[an + 1];
                for (p += an + 2; *p != quote; ) {
                    if (*p == '\0' || *p == '<')
                        return "bad attribute value";
                    if (*p == '&' && !reference_length(p))
                        return "bad reference in an attribute";
                    p += *p == '&' ? reference_length(p) : 1;
                }
                p++;
            }
        }
    }
    if (depth != 0 || !root_done)
        return "unclosed elements";
    return NULL;
}

/* Write the map, check the file, and return its text (free it). */
static char *write_and_check(const float *w, size_t heads, size_t q_len, size_t kv_len, const heatmap_opts *opts,
                             size_t expected_cells)
{
    char err[256] = "";
    ck_assert_msg(heatmap_write_svg(svg_path, w, heads, q_len, kv_len, opts, err, sizeof err) == 0, "%s", err);
    char *svg = read_text(svg_path);
    ck_assert_msg(valid_utf8((const unsigned char *)svg), "not valid UTF-8");
    const char *problem = xml_problem(svg);
    ck_assert_msg(problem == NULL, "not well-formed XML: %s", problem);
    ck_assert_uint_eq(count_occurrences(svg, "class=\"cell\""), expected_cells);
    ck_assert_ptr_nonnull(strstr(svg, "encoding=\"UTF-8\""));
    ck_assert_ptr_nonnull(strstr(svg, ">Key</text>"));
    ck_assert_ptr_nonnull(strstr(svg, ">Query</text>"));
    ck_assert_ptr_nonnull(strstr(svg, "linearGradient")); /* the colour bar */
    ck_assert_uint_eq(tu_dir_count(tmp_dir), 1);     /* no temporary left */
    return svg;
}

/* Rows that look like softmax output: positive, each summing to 1. */
static float *softmax_rows(size_t heads, size_t q_len, size_t kv_len)
{
    float *w = malloc(heads * q_len * kv_len * sizeof *w);
    for (size_t r = 0; r < heads * q_len; r++) {
        double sum = 0;
        for (size_t j = 0; j < kv_len; j++)
            sum += w[r * kv_len + j] = (float)exp(sin((double)(r * 7 + j * 3)));
        for (size_t j = 0; j < kv_len; j++)
            w[r * kv_len + j] = (float)(w[r * kv_len + j] / sum);
    }
    return w;
}

/* ---------------------------------------------------------------------------------------------- */
/* Pictures                                                                                        */
/* ---------------------------------------------------------------------------------------------- */

/* The first tutorial's worked example: "我 爱 人工 智能". */
START_TEST(test_chinese_labels)
{
    const float w[16] = {0.2480f, 0.2509f, 0.2499f, 0.2512f, 0.2513f, 0.2499f, 0.2498f, 0.2490f,
                         0.2484f, 0.2506f, 0.2495f, 0.2515f, 0.2479f, 0.2516f, 0.2485f, 0.2520f};
    const char *const tokens[4] = {"我", "爱", "人工", "智能"};
    const heatmap_opts opts = {tokens, 4, tokens, 4, "Self-attention weights"};
    char *svg = write_and_check(w, 1, 4, 4, &opts, 16);
    ck_assert_ptr_nonnull(strstr(svg, "Noto Sans CJK SC"));
    ck_assert_ptr_nonnull(strstr(svg, ">Self-attention weights</text>"));
    ck_assert_ptr_nonnull(strstr(svg, ">head 0</text>"));
    for (size_t i = 0; i < 4; i++) {
        char tick[32];
        snprintf(tick, sizeof tick, ">%s</text>", tokens[i]);
        ck_assert_uint_eq(count_occurrences(svg, tick), 2); /* as a query and as a key */
    }
    ck_assert_ptr_nonnull(strstr(svg, ">0.2480</text>")); /* annotated, 4 decimals */
    ck_assert_ptr_nonnull(strstr(svg, ">0.2520</text>"));
    ck_assert_ptr_nonnull(strstr(svg, "data-row=\"3\" data-col=\"3\" data-value=\"0.252\""));
    /* Colours span min..max: the smallest value is the lightest anchor, the largest the darkest, and the
     * darkest carries white text. */
    ck_assert_ptr_nonnull(strstr(svg, "fill=\"#ffffd9\" data-row=\"3\" data-col=\"0\""));
    ck_assert_ptr_nonnull(strstr(svg, "fill=\"#081d58\" data-row=\"3\" data-col=\"3\""));
    ck_assert_ptr_nonnull(strstr(svg, "fill=\"#ffffff\">0.2520</text>"));
    ck_assert_ptr_nonnull(strstr(svg, "fill=\"#262626\">0.2479</text>"));
    free(svg);
}
END_TEST

START_TEST(test_three_heads)
{
    float *w = softmax_rows(3, 5, 7);
    char *svg = write_and_check(w, 3, 5, 7, NULL, 3 * 5 * 7);
    ck_assert_ptr_nonnull(strstr(svg, ">head 2</text>"));
    ck_assert_ptr_nonnull(strstr(svg, ">Attention weights</text>")); /* the default title */
    ck_assert_ptr_null(strstr(svg, "showing the first"));
    ck_assert_ptr_null(strstr(svg, "each cell averages"));
    ck_assert_ptr_nonnull(strstr(svg, ">6</text>")); /* index labels */
    free(svg);
    free(w);
}
END_TEST

START_TEST(test_twenty_heads)
{
    float *w = softmax_rows(20, 6, 6);
    char *svg = write_and_check(w, 20, 6, 6, NULL, 16 * 6 * 6);
    ck_assert_ptr_nonnull(strstr(svg, "showing the first 16 of 20 heads"));
    ck_assert_ptr_nonnull(strstr(svg, ">head 15</text>"));
    ck_assert_ptr_null(strstr(svg, ">head 16</text>"));
    free(svg);
    free(w);
}
END_TEST

/* 300 × 257: blocks of 5 × 5, so 60 × 52 cells, the last column of cells averaging 2 keys. */
START_TEST(test_downsampled)
{
    float *w = softmax_rows(1, 300, 257);
    char *svg = write_and_check(w, 1, 300, 257, NULL, 60 * 52);
    ck_assert_ptr_nonnull(strstr(svg, "each cell averages 5×5 weights"));
    ck_assert_ptr_nonnull(strstr(svg, ">0–4</text>")); /* index ranges as labels */
    ck_assert_ptr_nonnull(strstr(svg, "data-row=\"59\" data-col=\"51\""));
    ck_assert_ptr_null(strstr(svg, "data-row=\"60\""));
    free(svg);
    free(w);
}
END_TEST

START_TEST(test_downsample_edges)
{
    /* 64 a side needs no averaging; 128 × 64 halves the rows only; 65 × 1 halves them, one cell ragged. */
    float *w = softmax_rows(2, 128, 64);
    char *svg = write_and_check(w, 1, 64, 64, NULL, 64 * 64);
    ck_assert_ptr_null(strstr(svg, "each cell averages"));
    free(svg);
    svg = write_and_check(w, 2, 128, 64, NULL, 2 * 64 * 64);
    ck_assert_ptr_nonnull(strstr(svg, "each cell averages 2×1 weights<"));
    free(svg);
    free(w);

    float ones[65];
    for (size_t i = 0; i < 65; i++)
        ones[i] = 1.0f;
    svg = write_and_check(ones, 1, 65, 1, NULL, 33);
    ck_assert_ptr_nonnull(strstr(svg, "each cell averages 2×1 weights (edge cells fewer)"));
    ck_assert_ptr_nonnull(strstr(svg, "data-row=\"32\" data-col=\"0\" data-value=\"1\"")); /* a mean of one */
    free(svg);
}
END_TEST

/* Block means are means: a 128 × 128 map of row index parity averages to 0.5 everywhere. */
START_TEST(test_block_means)
{
    float *w = malloc(128 * 128 * sizeof *w);
    for (size_t i = 0; i < 128; i++)
        for (size_t j = 0; j < 128; j++)
            w[i * 128 + j] = (float)((i + j) % 2);
    char *svg = write_and_check(w, 1, 128, 128, NULL, 64 * 64);
    ck_assert_uint_eq(count_occurrences(svg, "data-value=\"0.5\""), 64 * 64);
    free(svg);
    free(w);
}
END_TEST

START_TEST(test_escaping)
{
    const float w[6] = {0.1f, 0.2f, 0.7f, 0.3f, 0.3f, 0.4f};
    const char *const queries[2] = {"a<b", "x & y"};
    const char *const keys[3] = {"\"q\"", "it's", "bad\xff\x01utf8"};
    const heatmap_opts opts = {queries, 2, keys, 3, "<b>T&C</b>"};
    char *svg = write_and_check(w, 1, 2, 3, &opts, 6);
    ck_assert_ptr_nonnull(strstr(svg, ">&lt;b&gt;T&amp;C&lt;/b&gt;</text>"));
    ck_assert_ptr_nonnull(strstr(svg, ">a&lt;b</text>"));
    ck_assert_ptr_nonnull(strstr(svg, ">x &amp; y</text>"));
    ck_assert_ptr_nonnull(strstr(svg, ">&quot;q&quot;</text>"));
    ck_assert_ptr_nonnull(strstr(svg, ">it&apos;s</text>"));
    ck_assert_ptr_nonnull(strstr(svg, ">bad\xef\xbf\xbd\xef\xbf\xbdutf8</text>")); /* U+FFFD twice */
    free(svg);
}
END_TEST

START_TEST(test_long_labels_cut)
{
    const float w[2] = {0.5f, 0.5f};
    const char *const keys[2] = {"a-very-long-token-label-indeed", NULL}; /* NULL: its index */
    const heatmap_opts opts = {NULL, 0, keys, 2, NULL};
    char *svg = write_and_check(w, 1, 1, 2, &opts, 2);
    ck_assert_ptr_nonnull(strstr(svg, ">a-very-long-tok…</text>"));
    ck_assert_ptr_nonnull(strstr(svg, ">1</text>"));
    free(svg);
}
END_TEST

START_TEST(test_non_finite)
{
    const float w[4] = {NAN, 0.5f, INFINITY, 0.25f};
    char *svg = write_and_check(w, 1, 2, 2, NULL, 4);
    ck_assert_ptr_nonnull(strstr(svg, "data-value=\"nan\""));
    ck_assert_ptr_nonnull(strstr(svg, "data-value=\"inf\""));
    ck_assert_ptr_nonnull(strstr(svg, ">nan</text>"));
    free(svg);

    const float all_nan[2] = {NAN, NAN}, constant[2] = {0.25f, 0.25f};
    free(write_and_check(all_nan, 1, 1, 2, NULL, 2));
    free(write_and_check(constant, 1, 1, 2, NULL, 2));
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* Errors and files                                                                                */
/* ---------------------------------------------------------------------------------------------- */

START_TEST(test_bad_arguments)
{
    const float w[4] = {0.25f, 0.25f, 0.25f, 0.25f};
    const char *const two[2] = {"a", "b"};
    char err[256] = "";
    ck_assert_int_ne(heatmap_write_svg(svg_path, NULL, 1, 2, 2, NULL, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "weights is NULL") != NULL, "%s", err);
    ck_assert_int_ne(heatmap_write_svg(svg_path, w, 0, 2, 2, NULL, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "heads 0") != NULL, "%s", err);
    ck_assert_int_ne(heatmap_write_svg(svg_path, w, 1, 2, 0, NULL, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "kv_len 0") != NULL, "%s", err);
    ck_assert_int_ne(heatmap_write_svg(svg_path, w, SIZE_MAX / 2, 2, 2, NULL, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "overflows") != NULL, "%s", err);
    const heatmap_opts opts = {two, 2, two, 2, NULL};
    ck_assert_int_ne(heatmap_write_svg(svg_path, w, 1, 1, 4, &opts, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "2 query labels given for 1 query") != NULL, "%s", err);
    ck_assert_uint_eq(tu_dir_count(tmp_dir), 0);
}
END_TEST

START_TEST(test_files)
{
    const float w[4] = {0.1f, 0.9f, 0.6f, 0.4f};
    char err[256] = "", path[160];
    snprintf(path, sizeof path, "%s/no-such-folder/map.svg", tmp_dir);
    ck_assert_int_ne(heatmap_write_svg(path, w, 1, 2, 2, NULL, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "cannot create a temporary file in its folder: No such file") != NULL, "%s", err);
    ck_assert_uint_eq(tu_dir_count(tmp_dir), 0);

    /* Writing over a bigger picture replaces it whole. */
    float *big = softmax_rows(3, 40, 40);
    free(write_and_check(big, 3, 40, 40, NULL, 3 * 40 * 40));
    free(big);
    char *svg = write_and_check(w, 1, 2, 2, NULL, 4);
    ck_assert_uint_eq(count_occurrences(svg, "</svg>"), 1);
    free(svg);
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */

static Suite *heatmap_suite(void)
{
    Suite *s = suite_create("heatmap");

    TCase *tc = tcase_create("pictures");
    tcase_add_checked_fixture(tc, make_tmp_dir, tu_sys_teardown);
    tcase_add_test(tc, test_chinese_labels);
    tcase_add_test(tc, test_three_heads);
    tcase_add_test(tc, test_twenty_heads);
    tcase_add_test(tc, test_downsampled);
    tcase_add_test(tc, test_downsample_edges);
    tcase_add_test(tc, test_block_means);
    tcase_add_test(tc, test_escaping);
    tcase_add_test(tc, test_long_labels_cut);
    tcase_add_test(tc, test_non_finite);
    suite_add_tcase(s, tc);

    tc = tcase_create("errors");
    tcase_add_checked_fixture(tc, make_tmp_dir, tu_sys_teardown);
    tcase_add_test(tc, test_bad_arguments);
    tcase_add_test(tc, test_files);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(heatmap_suite());
    srunner_run_all(sr, CK_NORMAL);
    const int rc = tu_srunner_exit(sr);
    srunner_free(sr);
    return rc;
}
