/* The fused ("flash") path: one kernel with an online softmax, K/V tiles in local memory. */
#ifndef CLATTN_FUSED_H
#define CLATTN_FUSED_H

#include "launch.h"
#include "params.h"
#include "validate.h"

/* Largest head size the fused kernel compiles for; larger ones take the staged path. */
#define FUSED_MAX_HEAD 256

/* SDPA on a validated shape and views, K/V (and Q/O) rows laid out as `lay` says (NULL: dense); lse
 * (B,H,L), or (rows, H) for a ragged batch, may be NULL. */
clattn_status fused_run(clattn_context *ctx, const sdpa_shape *s, const kv_layout *lay, tensor_view q, tensor_view k,
                        tensor_view v, cl_mem mask, tensor_view out, cl_mem lse);

/* The same in reproducible arithmetic (cl/flash_attention.cl built with -DCLATTN_EXACT=1): a row's bits depend on
 * its inputs alone, whatever the tiles. The caller (reproducible.c) checks what the mode takes. */
clattn_status fused_run_exact(clattn_context *ctx, const sdpa_shape *s, const kv_layout *lay, tensor_view q,
                              tensor_view k, tensor_view v, cl_mem mask, tensor_view out, cl_mem lse);

#endif
