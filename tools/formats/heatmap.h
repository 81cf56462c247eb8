/* SVG heatmaps of attention weights, drawn the way the tutorials draw them with seaborn
 * (sns.heatmap(weights, annot=True, cmap="YlGnBu", xticklabels=keys, yticklabels=queries)): one panel
 * per head, keys across, queries down, each cell coloured from YlGnBu and annotated with its value
 * when there is room, and a colour bar. Plain SVG 1.1, UTF-8, no scripts, so any browser shows it. */
#ifndef CLATTN_TOOLS_HEATMAP_H
#define CLATTN_TOOLS_HEATMAP_H

#include <stddef.h>
#include <stdio.h>

#define HEATMAP_MAX_PANELS 16 /* more heads: the first 16 are drawn and the picture says so */
#define HEATMAP_MAX_CELLS 64  /* per panel side; larger maps are averaged in blocks down to this */

typedef struct heatmap_opts {
    /* Token labels (UTF-8). NULL/0: the indices 0..L-1. Otherwise exactly q_len (kv_len) labels;
     * a NULL entry shows its index. */
    const char *const *query_labels;
    size_t n_query_labels;
    const char *const *key_labels;
    size_t n_key_labels;
    const char *title; /* NULL: "Attention weights" */
} heatmap_opts;

/* weights: (heads, q_len, kv_len) row-major, values normally in [0, 1]; opts may be NULL. Colours span
 * the shown data's min..max (0..max when all values are equal); NaN cells are grey. Every drawn cell is
 * one <rect class="cell" data-row data-col data-value>, inside its head's <g class="panel" data-head>;
 * maps over 64 a side are averaged in blocks, and the picture says so. The file is written as
 * atomic_file.h says (a regular file under a temporary name in the same folder, renamed over path; a
 * device, FIFO or the standard output written through). Returns 0, or non-zero with a one-line reason
 * in err (which does not name the file: callers prefix the path). */
int heatmap_write_svg(const char *path, const float *weights, size_t heads, size_t q_len, size_t kv_len,
                      const heatmap_opts *opts, char *err, size_t err_size);
/* The same SVG written to fp as it comes (the caller opened it and closes it). */
int heatmap_write_svg_to(FILE *fp, const float *weights, size_t heads, size_t q_len, size_t kv_len,
                         const heatmap_opts *opts, char *err, size_t err_size);

#endif
