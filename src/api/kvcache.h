/* KV caches the application owns: appends in place (clattn_kv_append) and ONNX's past/present
 * concatenation (clattn_sdpa_with_past), shared with the host variants. */
#ifndef CLATTN_KVCACHE_H
#define CLATTN_KVCACHE_H

#include "validate.h"

#include <stdbool.h>

/* A call with past K/V: the shape over the present (kv_len = past_len + the new rows) and the sizes of
 * the past and new tensors in floats. */
typedef struct past_shape {
    sdpa_shape s; /* over the present */
    size_t past_len, new_len;
    size_t past_k_elems, past_v_elems, new_k_elems, new_v_elems;
} past_shape;

/* Check the descriptor and past_len (mask_given: a mask came with the call) and fill `p`. */
clattn_status past_check(clattn_context *ctx, const clattn_sdpa_desc *desc, size_t past_len, bool mask_given,
                         past_shape *p);

/* Write the present K/V (past rows, then the new ones) and run attention over them. */
clattn_status past_run(clattn_context *ctx, const past_shape *p, cl_mem past_k, cl_mem past_v, cl_mem q, cl_mem k,
                       cl_mem v, cl_mem mask, cl_mem present_k, cl_mem present_v, cl_mem out, cl_mem weights,
                       cl_mem lse);

#endif
