/* Block masks (clattn_block_mask): per (batch, head, block of query positions, block of keys) whether
 * no pair, every pair or some pairs are visible — made from mask_mod on the device or from a host
 * block-sparse layout — and their binding to a call (cl/masks.cl reads them; the fused kernels skip
 * empty tiles). */
#ifndef CLATTN_BLOCK_MASK_H
#define CLATTN_BLOCK_MASK_H

#include "validate.h"

/* The kernel arguments of a call's block mask (cl/params.h's bm_* parameters). */
typedef struct block_mask_args {
    cl_mem states;
    unsigned long long batch, heads, qblocks, kblocks, block_q, block_k;
} block_mask_args;

/* For one call (its shape resolved, per-sequence offsets included): the mask belongs to ctx, was made
 * from the call's own mods (or from a layout, with a call that has no mask_mod), has the call's batch
 * and heads (or one for all), and covers every query position and key of it; then its arguments. mask
 * NULL: a call without, *out zeroed. */
clattn_status block_mask_bind(clattn_context *ctx, const clattn_block_mask *mask, const sdpa_shape *s,
                              block_mask_args *out);

#endif
