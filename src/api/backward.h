/* The backward pass of attention on validated shapes (backward.c), for clattn_sdpa_backward and the
 * layer's backward (mha_backward.c). */
#ifndef CLATTN_BACKWARD_H
#define CLATTN_BACKWARD_H

#include "validate.h"

/* What the backward pass does not take yet for this shape (a phrase for the caller's message), or NULL. */
const char *sdpa_backward_not_yet(const sdpa_shape *s);

/* dq, dk, dv (and dsinks, NULL: not wanted) of SDPA on float32 tensors in (B,H,L,·) / (B,kv_heads,S,·),
 * with out and lse the forward's; buffers and shapes already checked. */
clattn_status sdpa_backward_run(clattn_context *ctx, const sdpa_shape *s, cl_mem mask, cl_mem q, cl_mem k, cl_mem v,
                                cl_mem out, cl_mem lse, cl_mem dout, cl_mem dq, cl_mem dk, cl_mem dv, float *dsinks);

#endif
