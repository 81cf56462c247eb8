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
/* Reproducible arithmetic's weights output of a dense call (cl/exact_weights.cl): the point `mode` names, of each
 * pair's score as the fused kernel's exact build forms it; the softmax's weights from lse, the call's
 * log-sum-exps (fused_run_exact's). */
clattn_status fused_exact_weights(clattn_context *ctx, const sdpa_shape *s, tensor_view q, tensor_view k,
                                  tensor_view v, cl_mem mask, cl_mem lse, cl_mem weights, clattn_weights_output mode);
clattn_status fused_run_exact(clattn_context *ctx, const sdpa_shape *s, const kv_layout *lay, tensor_view q,
                              tensor_view k, tensor_view v, cl_mem mask, tensor_view out, cl_mem lse);

#endif
