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

/* The block mask as a call on ctx takes it: itself on its own context; on another (a device group's
 * member) its copy there, made on first use and kept with it, `mods` (the call's mods call_mods as ctx
 * takes them: mods_on_context) standing for the mods it was made from. ctx's last error on failure. */
clattn_status block_mask_on_context(const clattn_block_mask *mask, clattn_context *ctx, const clattn_mods *call_mods,
                                    const clattn_mods *mods, const clattn_block_mask **out);

#endif
