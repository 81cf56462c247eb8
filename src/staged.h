/* The staged path: score, softmax and weighted-sum as separate launches through an L×S score matrix,
 * worked through in chunks of heads when the caller does not keep the weights. */
#ifndef CLATTN_STAGED_H
#define CLATTN_STAGED_H

#include "launch.h"
#include "validate.h"

/* Build the staged kernels of ctx if they are not built yet: callers that enqueue other work first
 * (clattn_mha's projections) call it up front, so that a build failure leaves nothing enqueued. */
clattn_status staged_prepare(clattn_context *ctx);

/* SDPA on a validated shape and views; weights (B,H,L,S) and lse (B,H,L) may be NULL. */
clattn_status staged_run(clattn_context *ctx, const sdpa_shape *s, tensor_view q, tensor_view k, tensor_view v,
                         cl_mem mask, tensor_view out, cl_mem weights, cl_mem lse);

void staged_release(clattn_context *ctx);

#endif
