/* Scaled dot-product attention: the checks of a call, and the choice between the fused and the staged
 * path (with the fallback from one to the other). Shared by clattn_sdpa, clattn_mha and host.c. */
#ifndef CLATTN_SDPA_H
#define CLATTN_SDPA_H

#include "launch.h"
#include "validate.h"

#include <stdbool.h>

/* The caller's descriptor, its shape and masks (mask_given: an additive mask came with the call). */
clattn_status sdpa_check(clattn_context *ctx, const clattn_sdpa_desc *desc, bool mask_given, sdpa_shape *s);

/* CLATTN_ALGORITHM_FUSED can neither return weights nor serve head sizes above FUSED_MAX_HEAD; neither
 * it nor DECODE runs a double softmax, which needs a device with cl_khr_fp64. */
clattn_status sdpa_check_algorithm(clattn_context *ctx, const sdpa_shape *s, bool weights_wanted);

/* SDPA on validated shapes and views: the fused kernel or the staged path, as s->algorithm and the
 * request decide. weights and lse may be NULL. */
clattn_status sdpa_run(clattn_context *ctx, const sdpa_shape *s, tensor_view q, tensor_view k, tensor_view v,
                       cl_mem mask, tensor_view out, cl_mem weights, cl_mem lse);

/* SDPA with K/V (and Q/O) rows laid out as `lay` says (ragged batches, paged caches): AUTO takes the
 * fused kernel where the longest sequence has more than DECODE_AUTO_MAX_ROWS query rows (a prefill, a
 * chunk of one) and the head sizes allow, else the decode kernels, and falls back to them where the
 * fused kernel cannot run; FUSED and DECODE take theirs. lse is (rows, H) for a ragged batch. */
clattn_status sdpa_run_layout(clattn_context *ctx, const sdpa_shape *s, const kv_layout *lay, tensor_view q,
                              tensor_view k, tensor_view v, cl_mem mask, tensor_view out, cl_mem lse);

/* sdpa_run on dense (B,H,L,D) buffers that hold their tensors (checked by the caller). */
clattn_status sdpa_run_dense(clattn_context *ctx, const sdpa_shape *s, cl_mem q, cl_mem k, cl_mem v, cl_mem mask,
                             cl_mem out, cl_mem weights, cl_mem lse);

#endif
