/* The backward pass of attention on validated shapes (backward.c), for clattn_sdpa_backward and the
 * layer's backward (mha_backward.c). */
#ifndef CLATTN_BACKWARD_H
#define CLATTN_BACKWARD_H

#include "validate.h"

/* What the backward pass does not take yet for this shape (a phrase for the caller's message), or NULL. */
const char *sdpa_backward_not_yet(const sdpa_shape *s);

/* The tensors of a backward pass: the forward's inputs, output and log-sum-exps, dO, and the gradients. */
typedef struct backward_tensors {
    cl_mem q, k, v, out, lse, dout, dq, dk, dv;
} backward_tensors;

/* A backward pass on float32 tensors (t's, widened where they are stored in 16 bits); `call` is the pass's own. */
typedef clattn_status (*backward_float_pass)(clattn_context *ctx, const sdpa_shape *s, const void *call,
                                             const backward_tensors *t, float *dsinks);

/* Every tensor of t present and large enough for s, and no gradient sharing memory with an input (named in
 * messages as `api`'s); mask is the dense pass's (NULL: none). */
clattn_status backward_buffers_check(clattn_context *ctx, const char *api, const sdpa_shape *s,
                                     const backward_tensors *t, cl_mem mask);

/* Runs pass on t: 16-bit q, k, v, out and dout widened to float temporaries first, the gradients rounded into
 * their inputs' types after. */
clattn_status backward_in_floats(clattn_context *ctx, const sdpa_shape *s, backward_float_pass pass, const void *call,
                                 const backward_tensors *t, float *dsinks);

/* d(sink_h) = −Σ_{b,i} exp(sink_h − lse_bhi)·D_bhi into dsinks (heads floats), from D and the log-sum-exps. */
clattn_status backward_sink_gradients(clattn_context *ctx, const sdpa_shape *s, cl_mem delta, cl_mem lse,
                                      float *dsinks);

/* dq, dk, dv (and dsinks, NULL: not wanted) of SDPA on float32 tensors in (B,H,L,·) / (B,kv_heads,S,·),
 * with out and lse the forward's; buffers and shapes already checked. */
clattn_status sdpa_backward_run(clattn_context *ctx, const sdpa_shape *s, cl_mem mask, cl_mem q, cl_mem k, cl_mem v,
                                cl_mem out, cl_mem lse, cl_mem dout, cl_mem dq, cl_mem dk, cl_mem dv, float *dsinks);

#endif
