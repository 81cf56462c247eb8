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
/* The fused kernel's parameters for a call, but for its masks (PARAMS_SET_MASKS) and work list (tiles): what
 * cl/reproducible.cl, which takes the same ones, shares. */
flash_params fused_params(const sdpa_shape *s, const kv_layout *lay, tensor_view q, tensor_view k, tensor_view v,
                          tensor_view out, cl_mem lse, cl_mem sinks);

clattn_status fused_run(clattn_context *ctx, const sdpa_shape *s, const kv_layout *lay, tensor_view q, tensor_view k,
                        tensor_view v, cl_mem mask, tensor_view out, cl_mem lse);

#endif
