/* The staged path (score, softmax, weighted-sum) and the three public stage calls. These kernels use
 * no local memory and bound-check their ids, so any work-group size a device accepts is correct,
 * including devices limited to tiny work groups. */
#include "staged.h"

#include "context.h"
#include "convert.h"
#include "error.h"
#include "masks.h"
#include "options.h"
#include "program.h"
#include "scratch.h"
#include "tuning.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The score matrix of all heads at once can be huge; when the caller does not keep the weights we
 * work through the (batch, head) pairs in chunks whose scores fit this budget. */
#define SCORE_SCRATCH_BUDGET ((size_t)256 << 20)

/* The family's kernels (params.c: family_staged); the last two exist on CPUs only (VEC > 1): K
 * transposed, then scores blocked like a GEMM. */
enum { KERNEL_SCORE, KERNEL_SOFTMAX, KERNEL_WEIGHTED_SUM, KERNEL_TRANSPOSE_K, KERNEL_SCORE_TILED };

/* The staged kernels of one call, and their shape on this device. */
typedef struct staged_kernels {
    const family_build *fb;
    unsigned vec;  /* the kernels' VEC */
    unsigned keys;   /* scores per work-item of the score kernel */
    unsigned chunks; /* vectors of outputs per work-item of the weighted sum */
    unsigned tile_rows, tile_vectors; /* the blocked score kernel's tile (CPUs), 0 where it is not built */
} staged_kernels;

clattn_status staged_prepare(clattn_context *ctx, const sdpa_shape *s, staged_kernels *out)
{
    /* The shape (tuning_tables.c: the values and why): VEC lanes inside each work-item (VEC > 1, with the
     * blocked score kernel) or one element per work-item. */
    tuning_values t;
    clattn_status st = tuning_lookup(ctx, TUNING_STAGED, &t, NULL);
    if (st != CLATTN_SUCCESS)
        return st;
    staged_kernels k = {NULL, t.v[4], t.v[0], t.v[1], 0, 0};
    if (k.vec > 1) {
        k.tile_rows = t.v[2];
        k.tile_vectors = t.v[3];
    }
    char options[160];
    snprintf(options, sizeof options, "-cl-denorms-are-zero -DVEC=%u -DKEYS=%u -DCHUNKS=%u -DSR=%u -DSV=%u",
             k.vec, k.keys, k.chunks, k.tile_rows, k.tile_vectors);
    st = program_get(ctx, &family_staged, options, 0, s ? call_features(s) : 0, s ? call_mods(s) : NULL, &k.fb);
    if (st == CLATTN_SUCCESS && k.vec > 1 && (!k.fb->kernels[KERNEL_TRANSPOSE_K] || !k.fb->kernels[KERNEL_SCORE_TILED]))
        st = set_error(ctx, CLATTN_ERROR_KERNEL_SOURCE, "the staged program of VEC %u lacks its blocked score kernels",
                       k.vec);
    if (out)
        *out = k;
    return st;
}

/* Where the blocked score kernel runs (CPUs), K of every (batch, K/V head) transposed into the
 * SCRATCH_KEYS_T slot for it; elsewhere *kt = NULL. Before the first score_launch of a call. */
static clattn_status score_prepare_keys(clattn_context *ctx, const staged_kernels *sk, const sdpa_shape *s,
                                        tensor_view k, cl_mem *kt)
{
    *kt = NULL;
    if (!sk->tile_rows)
        return CLATTN_SUCCESS;
    clattn_status st = scratch_get(ctx, SCRATCH_KEYS_T, s->k_elems * sizeof(float), kt);
    if (st != CLATTN_SUCCESS)
        return st;
    const transpose_k_params p = {k, *kt, s->batch, s->kv_heads, s->kv_len, s->qk_dim};
    kernel_args a = kernel_args_begin(sk->fb->kernels[KERNEL_TRANSPOSE_K]);
    params_bind(&a, &params_transpose_k, &p, sk->fb->features);
    const size_t global[2] = {s->kv_len, s->batch * s->kv_heads};
    return kernel_launch_auto(ctx, &a, "score", 2, global); /* part of the score stage's time */
}

/* Scores of heads [bh_begin, bh_begin + bh_count) of the flattened (batch, head) index into `scores`,
 * which holds just those heads; kt: from score_prepare_keys. */
static clattn_status score_launch(clattn_context *ctx, const staged_kernels *st, const sdpa_shape *s, tensor_view q,
                                  tensor_view k, cl_mem kt, const device_masks *masks, size_t bh_begin, size_t bh_count,
                                  cl_mem scores, cl_mem extra)
{
    kernel_args a = kernel_args_begin(st->fb->kernels[kt ? KERNEL_SCORE_TILED : KERNEL_SCORE]);
    if (kt) {
        score_tiled_params p = {.q = q, .kt = kt, .scores = scores, .heads = s->heads, .group = s->group,
                                .q_len = s->q_len, .kv_len = s->kv_len, .dim = s->qk_dim, .scale = s->scale,
                                .bh_begin = bh_begin, .extra = extra, .extra_mode = (int)s->weights_output};
        PARAMS_SET_MASKS(score_tiled_params, &p, masks);
        params_bind(&a, &params_score_tiled, &p, st->fb->features);
    } else {
        score_params p = {.q = q, .k = k, .scores = scores, .heads = s->heads, .group = s->group,
                          .q_len = s->q_len, .kv_len = s->kv_len, .dim = s->qk_dim, .scale = s->scale,
                          .bh_begin = bh_begin, .extra = extra, .extra_mode = (int)s->weights_output};
        PARAMS_SET_MASKS(score_params, &p, masks);
        params_bind(&a, &params_score, &p, st->fb->features);
    }
    if (kt) { /* a work-group per tile, its vector code the work-item's; row tiles along dimension 0 */
        const size_t keys = (size_t)st->tile_vectors * st->vec, local[3] = {1, 1, 1};
        const size_t global[3] = {(s->q_len + st->tile_rows - 1) / st->tile_rows, (s->kv_len + keys - 1) / keys,
                                  bh_count};
        return kernel_launch(ctx, &a, "score", 3, global, local);
    }
    const size_t keys = st->keys, global[3] = {(s->kv_len + keys - 1) / keys, s->q_len, bh_count};
    return kernel_launch_auto(ctx, &a, "score", 3, global);
}

/* The double softmax's program, a family of its own: double arithmetic (cl_khr_fp64, which the rest of
 * the staged path must not need) or its float-float emulation. No -cl-denorms-are-zero: the fp64 build
 * has no float arithmetic but its final rounding, and the float-float one rounds subnormal weights
 * itself. */
static clattn_status softmax_double_kernel(clattn_context *ctx, feature_set features, const family_build **out)
{
    /* Float-float where the device has no cl_khr_fp64, or where CLATTN_SOFTMAX_DOUBLE=float-float asks. */
    const bool float_float = ctx->options.softmax_float_float || !ctx->caps.fp64;
    return program_get(ctx, &family_softmax_double,
                       float_float ? SOFTMAX_DOUBLE_FF_OPTIONS : SOFTMAX_DOUBLE_FP64_OPTIONS, 0, features, NULL, out);
}

/* Softmax of `rows` rows of `cols` scores with `fb`'s kernel `index` (the staged family's softmax or
 * the double one); the rows are rows row_base.. of the (B·H·L) whole, whose log-sum-exps go to
 * lse[row_base..]. sinks: NULL, or one logit per head of `heads` heads of q_len rows. */
static clattn_status softmax_launch(clattn_context *ctx, const family_build *fb, size_t index, size_t rows, size_t cols,
                                    cl_mem scores, cl_mem weights, cl_mem lse, size_t row_base, cl_mem sinks,
                                    size_t heads, size_t q_len)
{
    const softmax_params p = {scores, weights, lse, row_base, rows, cols, sinks, heads, q_len};
    kernel_args a = kernel_args_begin(fb->kernels[index]);
    params_bind(&a, &params_softmax, &p, fb->features);
    const size_t global[1] = {rows};
    return kernel_launch_auto(ctx, &a, "softmax", 1, global);
}

static clattn_status weighted_sum_launch(clattn_context *ctx, const staged_kernels *sk, const sdpa_shape *s,
                                         cl_mem weights, tensor_view v, tensor_view out, size_t bh_begin,
                                         size_t bh_count)
{
    const weighted_sum_params p = {weights, v, out, s->heads, s->group, s->q_len, s->kv_len, s->v_dim, bh_begin};
    kernel_args a = kernel_args_begin(sk->fb->kernels[KERNEL_WEIGHTED_SUM]);
    params_bind(&a, &params_weighted_sum, &p, sk->fb->features);
    const size_t cols = (size_t)sk->vec * sk->chunks;
    const size_t global[3] = {(s->v_dim + cols - 1) / cols, s->q_len, bh_count};
    return kernel_launch_auto(ctx, &a, "weighted-sum", 3, global);
}

clattn_status staged_run(clattn_context *ctx, const sdpa_shape *s, tensor_view q, tensor_view k, tensor_view v,
                         cl_mem mask, tensor_view out, cl_mem weights, cl_mem lse)
{
    const size_t bh_total = s->batch * s->heads;
    const size_t head_bytes = s->q_len * s->kv_len * sizeof(float);
    size_t chunk = bh_total;
    /* Scores at an earlier point than the softmax go to the weights output on the side; the softmax
     * then works in a temporary, as when no weights are wanted. */
    cl_mem extra = s->weights_output != CLATTN_WEIGHTS_SOFTMAX ? weights : NULL;
    cl_mem scores = extra ? NULL : weights;
    staged_kernels sk;
    const family_build *softmax_fb = NULL;
    clattn_status st = staged_prepare(ctx, s, &sk);
    if (st == CLATTN_SUCCESS)
        st = s->softmax_double ? softmax_double_kernel(ctx, call_features(s), &softmax_fb) : CLATTN_SUCCESS;
    if (st != CLATTN_SUCCESS)
        return st;
    if (!softmax_fb)
        softmax_fb = sk.fb;
    if (!scores) {
        size_t budget = SCORE_SCRATCH_BUDGET < ctx->caps.max_alloc ? SCORE_SCRATCH_BUDGET : (size_t)ctx->caps.max_alloc;
        if (head_bytes > ctx->caps.max_alloc)
            return set_error(ctx, CLATTN_ERROR_EXCEEDS_DEVICE_LIMIT,
                             "the score matrix of one head (L=%zu x S=%zu) needs %zu bytes, more than the "
                             "device's maximum allocation of %llu bytes",
                             s->q_len, s->kv_len, head_bytes, (unsigned long long)ctx->caps.max_alloc);
        /* The transposed K of the blocked score kernel comes out of the same budget, so the temporaries
         * together stay within it (and within one allocation's size) where a head's scores leave room. */
        const size_t kt_bytes = sk.tile_rows ? s->k_elems * sizeof(float) : 0;
        if (budget >= kt_bytes + head_bytes)
            budget -= kt_bytes;
        chunk = budget / head_bytes;
        if (chunk == 0)
            chunk = 1;
        if (chunk > bh_total)
            chunk = bh_total;
        if ((st = scratch_get(ctx, SCRATCH_SCORES, chunk * head_bytes, &scores)) != CLATTN_SUCCESS)
            return st;
    }
    device_masks masks;
    cl_mem kt;
    if ((st = masks_upload(ctx, s, mask, &masks)) != CLATTN_SUCCESS ||
        (st = score_prepare_keys(ctx, &sk, s, k, &kt)) != CLATTN_SUCCESS)
        return st;
    const size_t softmax_index = s->softmax_double ? 0 : KERNEL_SOFTMAX;
    for (size_t begin = 0; begin < bh_total && st == CLATTN_SUCCESS; begin += chunk) {
        size_t count = bh_total - begin < chunk ? bh_total - begin : chunk;
        st = score_launch(ctx, &sk, s, q, k, kt, &masks, begin, count, scores, extra);
        if (st == CLATTN_SUCCESS)
            st = softmax_launch(ctx, softmax_fb, softmax_index, count * s->q_len, s->kv_len, scores, scores, lse,
                                begin * s->q_len, masks.sinks, s->heads, s->q_len);
        if (st == CLATTN_SUCCESS)
            st = weighted_sum_launch(ctx, &sk, s, scores, v, out, begin, count);
    }
    return st;
}

/* ---- the public stage calls: validate everything, then enqueue ---- */

clattn_status clattn_score(clattn_context *ctx, const clattn_sdpa_desc *desc, cl_mem q, cl_mem k, cl_mem mask,
                           cl_mem scores)
{
    clattn_status st = check_context(ctx);
    clattn_sdpa_desc d;
    sdpa_shape s;
    device_masks masks;
    if (st != CLATTN_SUCCESS || (st = sdpa_desc_read(ctx, desc, &d)) != CLATTN_SUCCESS ||
        (st = sdpa_shape_resolve(ctx, &d, &s)) != CLATTN_SUCCESS ||
        (st = masks_resolve(ctx, d.masks, mask != NULL, &s)) != CLATTN_SUCCESS ||
        (st = check_tensor(ctx, q, s.q_elems, s.types.q, "q")) != CLATTN_SUCCESS ||
        (st = check_tensor(ctx, k, s.k_elems, s.types.k, "k")) != CLATTN_SUCCESS ||
        (st = check_scales(ctx, &s, s.k_elems / s.qk_dim, s.v_elems / s.v_dim)) != CLATTN_SUCCESS ||
        (mask && (st = check_buffer(ctx, mask, s.mask_elems, s.mask_elem_size, "mask")) != CLATTN_SUCCESS) ||
        (st = check_buffer(ctx, scores, s.weight_elems, sizeof(float), "scores")) != CLATTN_SUCCESS ||
        (st = masks_upload(ctx, &s, mask, &masks)) != CLATTN_SUCCESS)
        return st;
    /* This stage computes on floats: Q and K of other types are widened first (int8 by its scales). */
    tensor_view qv = view_bhld(q, s.heads, s.q_len, s.qk_dim), kv = view_bhld(k, s.kv_heads, s.kv_len, s.qk_dim);
    cl_mem kt;
    staged_kernels sk;
    if ((st = staged_prepare(ctx, &s, &sk)) != CLATTN_SUCCESS ||
        (st = convert_widen(ctx, &qv, s.types.q, s.types.q_chunk, NULL, s.qk_dim, s.q_elems, SCRATCH_WIDE_Q)) != CLATTN_SUCCESS ||
        (st = convert_widen(ctx, &kv, s.types.k, s.types.k_chunk, s.k_scales, s.qk_dim, s.k_elems, SCRATCH_WIDE_K)) != CLATTN_SUCCESS ||
        (st = score_prepare_keys(ctx, &sk, &s, kv, &kt)) != CLATTN_SUCCESS)
        return st;
    return score_launch(ctx, &sk, &s, qv, kv, kt, &masks, 0, s.batch * s.heads, scores, NULL);
}

clattn_status clattn_softmax(clattn_context *ctx, size_t rows, size_t cols, cl_mem scores, cl_mem weights, cl_mem lse)
{
    clattn_status st = check_context(ctx);
    if (st != CLATTN_SUCCESS)
        return st;
    if (rows == 0 || cols == 0)
        return set_error(ctx, CLATTN_ERROR_ZERO_SIZE, "softmax: %s is 0", rows == 0 ? "rows" : "cols");
    size_t elems;
    if (!size_mul(rows, cols, &elems))
        return set_error(ctx, CLATTN_ERROR_SIZE_OVERFLOW, "softmax: rows=%zu cols=%zu overflows", rows, cols);
    if ((st = check_buffer(ctx, scores, elems, sizeof(float), "scores")) != CLATTN_SUCCESS ||
        (st = check_buffer(ctx, weights, elems, sizeof(float), "weights")) != CLATTN_SUCCESS ||
        (lse && (st = check_buffer(ctx, lse, rows, sizeof(float), "lse")) != CLATTN_SUCCESS))
        return st;
    staged_kernels sk;
    if ((st = staged_prepare(ctx, NULL, &sk)) != CLATTN_SUCCESS)
        return st;
    return softmax_launch(ctx, sk.fb, KERNEL_SOFTMAX, rows, cols, scores, weights, lse, 0, NULL, 1, rows);
}

clattn_status clattn_weighted_sum(clattn_context *ctx, const clattn_sdpa_desc *desc, cl_mem weights, cl_mem v,
                                  cl_mem out)
{
    clattn_status st = check_context(ctx);
    if (st != CLATTN_SUCCESS)
        return st;
    /* This stage has no Q or K: let v_dim stand in for an unset qk_dim. Masks do not apply. */
    clattn_sdpa_desc d;
    if ((st = sdpa_desc_read(ctx, desc, &d)) != CLATTN_SUCCESS)
        return st;
    if (d.qk_dim == 0)
        d.qk_dim = d.v_dim;
    sdpa_shape s;
    if ((st = sdpa_shape_resolve(ctx, &d, &s)) != CLATTN_SUCCESS ||
        (st = check_buffer(ctx, weights, s.weight_elems, sizeof(float), "weights")) != CLATTN_SUCCESS ||
        (st = check_tensor(ctx, v, s.v_elems, s.types.v, "v")) != CLATTN_SUCCESS ||
        (st = check_scales(ctx, &s, s.k_elems / s.qk_dim, s.v_elems / s.v_dim)) != CLATTN_SUCCESS ||
        (st = check_tensor(ctx, out, s.out_elems, s.types.o, "out")) != CLATTN_SUCCESS)
        return st;
    staged_kernels sk;
    if ((st = staged_prepare(ctx, NULL, &sk)) != CLATTN_SUCCESS)
        return st;
    /* On floats: V of another type widened first, an output of another type rounded from a float one. */
    tensor_view vv = view_bhld(v, s.kv_heads, s.kv_len, s.v_dim), ov = view_bhld(out, s.heads, s.q_len, s.v_dim);
    if ((st = convert_widen(ctx, &vv, s.types.v, s.types.v_chunk, s.v_scales, s.v_dim, s.v_elems, SCRATCH_WIDE_V)) != CLATTN_SUCCESS ||
        (st = convert_float_target(ctx, &ov, s.types.o, s.out_elems)) != CLATTN_SUCCESS ||
        (st = weighted_sum_launch(ctx, &sk, &s, weights, vv, ov, 0, s.batch * s.heads)) != CLATTN_SUCCESS)
        return st;
    return convert_narrow(ctx, ov.buf, out, s.types.o, s.out_elems);
}
