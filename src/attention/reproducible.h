/* Reproducible attention (issue 41): the same bits on every OpenCL implementation, tuning and batch. */
#ifndef CLATTN_REPRODUCIBLE_H
#define CLATTN_REPRODUCIBLE_H

#include "launch.h"
#include "validate.h"

/* Whether a call runs in reproducible arithmetic: its descriptor asks for it, or CLATTN_REPRODUCIBLE=1 did when
 * the context was made. */
bool reproducible_call(const clattn_context *ctx, const sdpa_shape *s);

/* The same from a descriptor alone (the calls that refuse before they resolve a shape). */
bool reproducible_desc(const clattn_context *ctx, const clattn_sdpa_desc *d);

/* The phrase for a path that does not take reproducible arithmetic yet: CLATTN_ERROR_INVALID_VALUE naming it. */
clattn_status reproducible_refused(clattn_context *ctx, const char *what);

/* SDPA forward in reproducible arithmetic (fused_run_exact) on a validated shape and views, rows laid out as
 * `lay` says (NULL: dense); lse as fused_run's. Takes what the fused kernel takes, with K/V of float32, float16,
 * bfloat16 or int8; no weights output, no double softmax (the callers refuse them). */
clattn_status reproducible_run(clattn_context *ctx, const sdpa_shape *s, const kv_layout *lay, tensor_view q,
                               tensor_view k, tensor_view v, cl_mem mask, tensor_view out, cl_mem lse);

#endif
