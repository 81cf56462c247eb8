/* The partition primitive (partition.h): arithmetic on a call's shape only — no context, no device — so
 * that tests/test_partition.c compiles it alone, as it does the library's. Its public form,
 * clattn_partition_* (clattn.h), is partition_api.c. */
#include "partition.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

bool partition_part_init(partition_part *p, size_t batch)
{
    memset(p, 0, sizeof *p);
    p->batch = batch;
    p->key_lengths = malloc(batch * sizeof *p->key_lengths);
    p->offsets = malloc(batch * sizeof *p->offsets);
    return p->key_lengths && p->offsets;
}

void partition_part_release(partition_part *p)
{
    free(p->key_lengths);
    free(p->offsets);
    p->key_lengths = NULL;
    p->offsets = NULL;
}

long long partition_first_position(const sdpa_shape *s, size_t b)
{
    if (s->masks.query_offsets)
        return s->masks.query_offsets[b];
    return s->masks.causal == CLATTN_CAUSAL_BOTTOM_RIGHT ? (long long)s->kv_len - (long long)s->q_len : 0;
}

/* Whether the queries at positions [p0, p0 + rows) may see a key of [k0, k0 + keys) (keys: the run's
 * keys within the batch's length) under the causal mask and the window. Positions stay within ±2^62
 * (masks_resolve bounds offsets and window sides by 2^61): no sum here overflows. */
static bool block_may_see(const clattn_masks *m, long long p0, size_t rows, size_t k0, size_t keys)
{
    if (!keys)
        return false;
    const long long p1 = p0 + (long long)rows - 1, j0 = (long long)k0, j1 = j0 + (long long)keys - 1;
    if (m->causal != CLATTN_CAUSAL_NONE && j0 > p1)
        return false;
    if (m->window && m->window->right >= 0 && j0 > p1 + m->window->right)
        return false;
    if (m->window && m->window->left >= 0 && j1 < p0 - m->window->left)
        return false;
    return true;
}

bool partition_part_make(const sdpa_shape *s, const clattn_sdpa_desc *d, size_t q0, size_t q_rows, size_t k0,
                         size_t k_rows, partition_part *p)
{
    if (d) {
        p->desc = *d;
        p->desc.batch = s->batch;
        p->desc.q_len = q_rows;
        p->desc.kv_len = k_rows;
        p->desc.sinks = NULL; /* counted once, in the merge */
        p->desc.masks = &p->masks;
        /* Mods and block masks see the whole call's positions: the run's keys are numbered from k0 here. */
        p->desc.origin_position = d->origin_position + (long long)k0;
    }
    p->masks = s->masks;
    p->masks.struct_size = sizeof p->masks;
    if (s->masks.window) {
        p->window = *s->masks.window;
        p->masks.window = &p->window;
    }
    p->q0 = q0;
    p->q_rows = q_rows;
    p->k0 = k0;
    p->k_rows = k_rows;
    /* A narrower mask leaves the keys from its width on masked: the run keeps the columns it has. */
    const bool additive = s->masks.additive != CLATTN_MASK_NONE;
    p->mask_cols = !additive || s->mask_cols <= k0 ? 0 : s->mask_cols - k0 < k_rows ? s->mask_cols - k0 : k_rows;
    p->masks.mask_kv_len = p->mask_cols;
    bool visible = false;
    for (size_t b = 0; b < s->batch; b++) {
        const size_t len = s->masks.key_lengths ? s->masks.key_lengths[b] : s->kv_len;
        p->key_lengths[b] = len <= k0 ? 0 : len - k0 < k_rows ? len - k0 : k_rows;
        /* Positions move with the run: the block's first query sits first + q0 − k0 keys into it. */
        const long long first = partition_first_position(s, b) + (long long)q0;
        p->offsets[b] = first - (long long)k0;
        visible = visible || block_may_see(&s->masks, first, q_rows, k0, p->key_lengths[b]);
    }
    p->masks.key_lengths = p->key_lengths;
    p->masks.query_offsets = p->offsets;
    return visible && (!additive || p->mask_cols > 0);
}

void partition_row_bytes_host(bool take, size_t slices, size_t total, size_t row_bytes, size_t row0, size_t rows,
                              void *whole, void *part)
{
    const size_t bytes = rows * row_bytes;
    for (size_t i = 0; i < slices && bytes; i++) {
        char *w = (char *)whole + (i * total + row0) * row_bytes, *q = (char *)part + i * bytes;
        memcpy(take ? q : w, take ? w : q, bytes);
    }
}

void partition_rows_host(bool take, size_t slices, size_t total, size_t width, size_t row0, size_t rows, float *whole,
                         float *part)
{
    partition_row_bytes_host(take, slices, total, width * sizeof(float), row0, rows, whole, part);
}

/* The additive mask's (L, S) matrices (a (B,1,1,S) mask: its rows, one per batch, never sliced). */
static size_t mask_matrices(const sdpa_shape *s)
{
    switch (s->masks.additive) {
    case CLATTN_MASK_B_H_L_S: return s->batch * s->heads;
    case CLATTN_MASK_B_1_L_S: return s->batch;
    case CLATTN_MASK_1_H_L_S: return s->heads;
    case CLATTN_MASK_B_1_1_S: return s->batch;
    default: return 1;
    }
}

size_t partition_mask_elems(const sdpa_shape *s, const partition_part *p)
{
    const size_t rows = s->masks.additive == CLATTN_MASK_B_1_1_S ? 1 : p->q_rows;
    return mask_matrices(s) * rows * p->mask_cols;
}

void partition_mask_host(const sdpa_shape *s, const partition_part *p, const void *mask, void *out)
{
    const bool padding = s->masks.additive == CLATTN_MASK_B_1_1_S;
    const size_t rows = padding ? 1 : p->q_rows, total = padding ? 1 : s->q_len, row0 = padding ? 0 : p->q0;
    const size_t esz = s->mask_elem_size, n = mask_matrices(s);
    for (size_t t = 0; t < n; t++)
        for (size_t r = 0; r < rows; r++)
            memcpy((char *)out + ((t * rows + r) * p->mask_cols) * esz,
                   (const char *)mask + ((t * total + row0 + r) * s->mask_cols + p->k0) * esz, p->mask_cols * esz);
}

/* One pass of cl/merge.cl for one row: (la, a) ⊕ (lb, b) with the sink logit ls (−inf: none; b NULL: no
 * part b), into (lse, o) — o may be a. The same float operations in the same order as the kernel, so the
 * host and the device agree to the rounding of their exp and log (OpenCL's built-ins may differ from the
 * C library's by a few ulps; every other operation is exactly rounded on both, and fma is fused on both). */
static void merge_row(float la, const float *a, float lb, const float *b, float ls, size_t dim, float *o, float *lse)
{
    if (!b)
        lb = -INFINITY;
    float m = fmaxf(fmaxf(la, lb), ls);
    if (isnan(la) || isnan(lb))
        m = NAN; /* a NaN part poisons the row (fmax would skip it) */
    if (m == -INFINITY) { /* no part saw a key and there is no sink: the empty row */
        for (size_t e = 0; e < dim; e++)
            o[e] = 0.0f;
        *lse = -INFINITY;
        return;
    }
    /* A part with lse −inf has weight 0 and adds nothing, even if its output is not finite. */
    const float wa = la == -INFINITY ? 0.0f : expf(la - m), wb = lb == -INFINITY ? 0.0f : expf(lb - m);
    const float sum = wa + wb + (ls == -INFINITY ? 0.0f : expf(ls - m));
    for (size_t e = 0; e < dim; e++) {
        float v = wa == 0.0f ? 0.0f : wa * a[e];
        if (wb != 0.0f)
            v = fmaf(wb, b[e], v);
        o[e] = v / sum;
    }
    *lse = m + logf(sum);
}

void partition_merge_host(size_t rows, size_t heads, size_t q_len, size_t dim, const float *sinks, size_t parts,
                          const float *const *outs, const float *const *lses, float *out, float *lse)
{
    /* clattn_merge's chain (merge.c): out = part 0 ⊕ part 1, out ⊕= part p, the sinks in the last pass —
     * row by row here, which is the same, as every row is merged on its own. No part: the empty row. */
    for (size_t r = 0; r < rows; r++) {
        const float ls = sinks ? sinks[r / q_len % heads] : -INFINITY;
        float *o = out + r * dim;
        if (parts == 0) {
            merge_row(-INFINITY, o, -INFINITY, NULL, ls, dim, o, &lse[r]);
            continue;
        }
        for (size_t p = 1; p <= parts - 1 || p == 1; p++) {
            const bool first = p == 1, last = p >= parts - 1;
            merge_row(first ? lses[0][r] : lse[r], first ? outs[0] + r * dim : o, p < parts ? lses[p][r] : -INFINITY,
                      p < parts ? outs[p] + r * dim : NULL, last ? ls : -INFINITY, dim, o, &lse[r]);
        }
    }
}
