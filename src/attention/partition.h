/* The partition primitive: one attention call cut into parts, each a block of query rows × a run of keys,
 * and the parts' results merged back. A part is the exact sub-call over its pairs (positions, key lengths,
 * window, ALiBi distances and the additive mask's sub-view moved to it; no sinks — the merge counts them
 * once; desc.origin_position moved by the run's first key, so that mods and block masks see the call's
 * positions); the merge is clattn_merge's (cl/merge.cl) chain of two-way merges, on the host. Device groups
 * and ring attention (through clattn_partition_*, clattn.h) only schedule the parts. */
#ifndef CLATTN_PARTITION_H
#define CLATTN_PARTITION_H

#include "validate.h"

#include <stdbool.h>

/* One part: the sub-call of query rows [q0, q0 + q_rows) and keys [k0, k0 + k_rows) of a call. */
typedef struct partition_part {
    clattn_sdpa_desc desc; /* the sub-call; desc.masks points to `masks`, desc.sinks is NULL */
    clattn_masks masks;    /* its window, key lengths and query offsets point into this struct */
    clattn_window window;
    size_t *key_lengths;   /* (B) the keys' lengths clipped to the run */
    long long *offsets;    /* (B) each batch's first query of the block, relative to the run's first key */
    size_t batch, q0, q_rows, k0, k_rows;
    size_t mask_cols;      /* the additive mask's columns in the run (its masks.mask_kv_len), else 0 */
} partition_part;

/* A part's arrays for `batch` batches (false: out of memory); partition_part_release frees them (a
 * zeroed part too). */
bool partition_part_init(partition_part *p, size_t batch);
void partition_part_release(partition_part *p);

/* The absolute position of batch b's first query (clattn_masks): its query offset, else S − L under a
 * bottom-right causal mask, else 0. The one place a host file applies the rule. */
long long partition_first_position(const sdpa_shape *s, size_t b);

/* Fill p with the sub-call of rows [q0, q0 + q_rows) × keys [k0, k0 + k_rows) (both within the call and
 * not empty) of the call `d` (read by sdpa_desc_read) whose shape and masks s holds (masks_resolve).
 * Returns whether any pair of the part may be visible: false when, in every batch, the causal mask, the
 * window, the key lengths or a narrower additive mask hide every key of the run from every query of the
 * block — the part's result is then the empty row (out 0, lse −inf) and it may be skipped. p is filled
 * either way. d may be NULL (a layer's rows, whose descriptor is a clattn_mha_desc): p->desc is then left
 * alone, the masks made all the same. */
bool partition_part_make(const sdpa_shape *s, const clattn_sdpa_desc *d, size_t q0, size_t q_rows, size_t k0,
                         size_t k_rows, partition_part *p);

/* Rows [row0, row0 + rows) of each of `slices` slices of `total` rows of `row_bytes` bytes (a row of K or V
 * in its storage format: a quantised row's blocks are its own): copied out of `whole` into `part` (take) or
 * back (!take). */
void partition_row_bytes_host(bool take, size_t slices, size_t total, size_t row_bytes, size_t row0, size_t rows,
                              void *whole, void *part);
/* Rows [row0, row0 + rows) of each of `slices` slices of `total` rows of `width` floats: copied out of
 * `whole` into `part` (take) or back (!take). */
void partition_rows_host(bool take, size_t slices, size_t total, size_t width, size_t row0, size_t rows, float *whole,
                         float *part);

/* The additive mask's entries of part p (s->masks.additive set, p->mask_cols > 0): rows [q0, q0 + q_rows)
 * of every (L, S) matrix it holds (a (B,1,1,S) padding row stays whole) and columns [k0, k0 + mask_cols),
 * from `mask` (elements of s->mask_elem_size bytes) into `out`, which holds partition_mask_elems. */
size_t partition_mask_elems(const sdpa_shape *s, const partition_part *p);
void partition_mask_host(const sdpa_shape *s, const partition_part *p, const void *mask, void *out);

/* Merge partial results over disjoint key sets as clattn_merge does on the device: rows of `dim` floats,
 * out, lse = part 0 ⊕ part 1, then ⊕= part p, the sinks (heads logits, row r's is sinks[r / q_len % heads];
 * NULL: none) in the last pass. Each pass is cl/merge.cl's formula in float, in its order. parts may be 0
 * (every part skipped: the empty row, then the sinks). out and lse may be the arrays of part 0. */
void partition_merge_host(size_t rows, size_t heads, size_t q_len, size_t dim, const float *sinks, size_t parts,
                          const float *const *outs, const float *const *lses, float *out, float *lse);

#endif
