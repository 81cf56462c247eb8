/* The decode path: few query rows against many keys, the keys split over work-groups and merged
 * (cl/decode.cl). */
#ifndef CLATTN_DECODE_H
#define CLATTN_DECODE_H

#include "device.h"
#include "launch.h"
#include "validate.h"

#include <stdbool.h>

/* Query rows per sequence up to which CLATTN_ALGORITHM_AUTO takes the decode path. */
#define DECODE_AUTO_MAX_ROWS 8
/* Largest head size the decode kernels compile for. */
#define DECODE_MAX_HEAD 576 /* (MLA's absorbed keys: 512 latent + 64 rotary) */

/* The entry points with a K/V layout (ragged batches, paged caches; `entry` names the call): desc.algorithm
 * AUTO, DECODE or FUSED (not STAGED), head sizes up to DECODE_MAX_HEAD, a float32 softmax. */
clattn_status decode_check_call(clattn_context *ctx, const sdpa_shape *s, const char *entry);

/* decode_run with K/V (and Q/O) rows laid out as `lay` says; lse is (rows, H) for a ragged batch. */
clattn_status decode_run_layout(clattn_context *ctx, const sdpa_shape *s, const kv_layout *lay, tensor_view q,
                                tensor_view k, tensor_view v, cl_mem mask, tensor_view out, cl_mem lse);

/* SDPA on a validated shape and views, as fused_run; lse (B,H,L) may be NULL. */
clattn_status decode_run(clattn_context *ctx, const sdpa_shape *s, tensor_view q, tensor_view k, tensor_view v,
                         cl_mem mask, tensor_view out, cl_mem lse);

#endif
