/* The staged path: score, softmax and weighted-sum as separate launches through an L×S score matrix,
 * worked through in chunks of heads when the caller does not keep the weights. */
#ifndef CLATTN_STAGED_H
#define CLATTN_STAGED_H

#include "launch.h"
#include "validate.h"

/* The staged kernels for the features of shape `s` (NULL: none), built if they are not yet, and (out,
 * may be NULL) their shape: callers that enqueue other work first (clattn_mha's projections) call it
 * up front, so that a build failure leaves nothing enqueued. */
struct staged_kernels;
clattn_status staged_prepare(clattn_context *ctx, const sdpa_shape *s, struct staged_kernels *out);

/* SDPA on a validated shape and views; weights (B,H,L,S) and lse (B,H,L) may be NULL. */
clattn_status staged_run(clattn_context *ctx, const sdpa_shape *s, tensor_view q, tensor_view k, tensor_view v,
                         cl_mem mask, tensor_view out, cl_mem weights, cl_mem lse);

#endif
