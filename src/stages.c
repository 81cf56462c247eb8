/* The four stages of attention as separate launches: projection (CLBlast GEMM + bias kernel), score,
 * softmax and weighted-sum; plus their public, validating entry points. These kernels use no local
 * memory and bound-check their ids, so any work-group size a device accepts is correct, including
 * devices limited to tiny work groups. */
#include "internal.h"

#include <clblast_c.h>
#include <pthread.h>
#include <stdlib.h>

static pthread_mutex_t blas_lock = PTHREAD_MUTEX_INITIALIZER;

tensor_view view_bhld(cl_mem buf, size_t heads, size_t rows, size_t cols)
{
    tensor_view v = {buf, heads * rows * cols, rows * cols, cols};
    return v;
}

tensor_view view_blhd(cl_mem buf, size_t heads, size_t rows, size_t cols)
{
    tensor_view v = {buf, rows * heads * cols, cols, heads * cols};
    return v;
}

static clattn_status blas_status(clattn_context *ctx, CLBlastStatusCode code, const char *what)
{
    if (code == CLBlastSuccess)
        return CLATTN_SUCCESS;
    if (code < 0 && code >= -72) /* CLBlast passes OpenCL's own codes through */
        return set_error(ctx, (clattn_status)code, "%s: %s", what, clattn_status_string((clattn_status)code));
    return set_error(ctx, CLATTN_ERROR_BLAS, "%s: CLBlast error %d", what, (int)code);
}

/* CLBlast failures that mean "its kernels cannot run on this device" rather than "bad input". */
static bool blas_cannot_launch(clattn_status st)
{
    return st == (clattn_status)CL_INVALID_WORK_ITEM_SIZE || st == (clattn_status)CL_INVALID_WORK_GROUP_SIZE ||
           st == (clattn_status)CL_OUT_OF_RESOURCES || st == (clattn_status)CL_BUILD_PROGRAM_FAILURE ||
           st == CLATTN_ERROR_BLAS;
}

/* Y = X·W (+ bias) with clattn's own kernel, for devices CLBlast cannot serve. */
static clattn_status projection_fallback(clattn_context *ctx, size_t rows, size_t in_dim, size_t out_dim, cl_mem x,
                                         cl_mem w, cl_mem bias, cl_mem y)
{
    kernel_args a = {ctx->kernels.matmul, 0, CL_SUCCESS, 0};
    karg_mem(&a, x);
    karg_mem(&a, w);
    karg_mem(&a, bias);
    karg_mem(&a, y);
    karg_ulong(&a, rows);
    karg_ulong(&a, in_dim);
    karg_ulong(&a, out_dim);
    const size_t global[2] = {out_dim, rows};
    return kernel_launch_auto(ctx, &a, "projection (fallback matmul)", 2, global);
}

/* CLBlast's GEMM kernels launch work groups of 64 items (8×8 and larger tiles): on a device that
 * allows fewer they fail at launch — and print to stderr — so such devices go to clattn's kernel
 * straight away. */
#define BLAS_MIN_WORK_GROUP 64

clattn_status stage_projection(clattn_context *ctx, size_t rows, size_t in_dim, size_t out_dim, cl_mem x,
                               cl_mem w, cl_mem bias, cl_mem y)
{
    if (!ctx->blas_unusable && ctx->caps.max_work_group < BLAS_MIN_WORK_GROUP) {
        set_warning(ctx, "%s allows work groups of at most %zu items, fewer than CLBlast needs; projections use "
                    "clattn's own matmul kernel", ctx->device_name, ctx->caps.max_work_group);
        ctx->blas_unusable = true;
    }
    if (ctx->blas_unusable)
        return projection_fallback(ctx, rows, in_dim, out_dim, x, w, bias, y);
    CLBlastStatusCode code = (CLBlastStatusCode)INJECT_FAULT(CL_MEM_OBJECT_ALLOCATION_FAILURE);
    if (code == CLBlastSuccess) {
        /* CLBlast keeps process-wide caches (its tuning database, compiled programs) that are not safe
         * to fill from two threads at once (seen as a crash under AddressSanitizer): contexts used from
         * different threads take turns here. */
        pthread_mutex_lock(&blas_lock);
        code = CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeNo, rows, out_dim, in_dim,
                            1.0f, x, 0, in_dim, w, 0, out_dim, 0.0f, y, 0, out_dim, &ctx->queue, NULL);
        pthread_mutex_unlock(&blas_lock);
    }
    clattn_status st = blas_status(ctx, code, "projection GEMM (CLBlastSgemm)");
    if (blas_cannot_launch(st)) {
        set_warning(ctx, "CLBlast cannot run on %s (%s); projections use clattn's own matmul kernel", ctx->device_name,
                    ctx->last_error);
        clear_error(ctx);
        ctx->blas_unusable = true;
        return projection_fallback(ctx, rows, in_dim, out_dim, x, w, bias, y);
    }
    if (st != CLATTN_SUCCESS || !bias)
        return st;
    kernel_args a = {ctx->kernels.add_bias, 0, CL_SUCCESS, 0};
    karg_mem(&a, y);
    karg_mem(&a, bias);
    karg_ulong(&a, rows);
    karg_ulong(&a, out_dim);
    const size_t global[2] = {out_dim, rows};
    return kernel_launch_auto(ctx, &a, "projection bias", 2, global);
}

clattn_status upload_key_lengths(clattn_context *ctx, const sdpa_shape *s, cl_mem *out)
{
    *out = NULL;
    if (!s->masks.key_lengths)
        return CLATTN_SUCCESS;
    cl_ulong *lengths = malloc(s->batch * sizeof *lengths);
    if (!lengths)
        return set_error(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "copying %zu key lengths", s->batch);
    for (size_t b = 0; b < s->batch; b++)
        lengths[b] = s->masks.key_lengths[b];
    cl_mem buf;
    clattn_status st = scratch_get(ctx, SCRATCH_KEY_LENGTHS, s->batch * sizeof *lengths, &buf);
    if (st == CLATTN_SUCCESS) {
        /* Blocking, so the caller's array (and ours) can go as soon as this returns. */
        cl_int err = INJECT_FAULT(CL_OUT_OF_RESOURCES);
        if (err == CL_SUCCESS)
            err = clEnqueueWriteBuffer(ctx->queue, buf, CL_TRUE, 0, s->batch * sizeof *lengths, lengths, 0, NULL,
                                       NULL);
        if (err != CL_SUCCESS)
            st = cl_error(ctx, err, "clEnqueueWriteBuffer(key lengths)");
        else
            *out = buf;
    }
    free(lengths);
    return st;
}

clattn_status stage_score(clattn_context *ctx, const sdpa_shape *s, tensor_view q, tensor_view k,
                          cl_mem key_lengths, cl_mem mask, size_t bh_begin, size_t bh_count, cl_mem scores)
{
    kernel_args a = {ctx->kernels.score, 0, CL_SUCCESS, 0};
    karg_view(&a, q);
    karg_view(&a, k);
    karg_mem(&a, scores);
    karg_ulong(&a, s->heads);
    karg_ulong(&a, s->q_len);
    karg_ulong(&a, s->kv_len);
    karg_ulong(&a, s->qk_dim);
    karg_float(&a, s->scale);
    karg_int(&a, (int)s->masks.causal);
    karg_mem(&a, key_lengths);
    karg_mem(&a, mask);
    karg_int(&a, mask ? (int)s->masks.additive : 0);
    karg_ulong(&a, bh_begin);
    const size_t global[3] = {s->kv_len, s->q_len, bh_count};
    return kernel_launch_auto(ctx, &a, "score", 3, global);
}

clattn_status stage_softmax(clattn_context *ctx, size_t rows, size_t cols, cl_mem scores, cl_mem weights,
                            cl_mem lse, size_t lse_offset)
{
    kernel_args a = {ctx->kernels.softmax, 0, CL_SUCCESS, 0};
    karg_mem(&a, scores);
    karg_mem(&a, weights);
    karg_mem(&a, lse);
    karg_ulong(&a, lse_offset);
    karg_ulong(&a, rows);
    karg_ulong(&a, cols);
    const size_t global[1] = {rows};
    return kernel_launch_auto(ctx, &a, "softmax", 1, global);
}

clattn_status stage_weighted_sum(clattn_context *ctx, const sdpa_shape *s, cl_mem weights, tensor_view v,
                                 tensor_view out, size_t bh_begin, size_t bh_count)
{
    kernel_args a = {ctx->kernels.weighted_sum, 0, CL_SUCCESS, 0};
    karg_mem(&a, weights);
    karg_view(&a, v);
    karg_view(&a, out);
    karg_ulong(&a, s->heads);
    karg_ulong(&a, s->q_len);
    karg_ulong(&a, s->kv_len);
    karg_ulong(&a, s->v_dim);
    karg_ulong(&a, bh_begin);
    const size_t global[3] = {s->v_dim, s->q_len, bh_count};
    return kernel_launch_auto(ctx, &a, "weighted-sum", 3, global);
}

/* ---- public entry points: validate everything, then enqueue ---- */

clattn_status clattn_projection(clattn_context *ctx, size_t rows, size_t in_dim, size_t out_dim, cl_mem x,
                                cl_mem w, cl_mem bias, cl_mem y)
{
    clattn_status st = check_context(ctx);
    if (st != CLATTN_SUCCESS)
        return st;
    if (rows == 0 || in_dim == 0 || out_dim == 0)
        return set_error(ctx, CLATTN_ERROR_ZERO_SIZE, "projection: %s is 0",
                         rows == 0 ? "rows" : in_dim == 0 ? "in_dim" : "out_dim");
    size_t x_elems, w_elems, y_elems;
    if (!size_mul(rows, in_dim, &x_elems) || !size_mul(in_dim, out_dim, &w_elems) ||
        !size_mul(rows, out_dim, &y_elems))
        return set_error(ctx, CLATTN_ERROR_SIZE_OVERFLOW, "projection: rows=%zu in_dim=%zu out_dim=%zu overflows",
                         rows, in_dim, out_dim);
    if ((st = check_buffer(ctx, x, x_elems, sizeof(float), "x")) != CLATTN_SUCCESS ||
        (st = check_buffer(ctx, w, w_elems, sizeof(float), "w")) != CLATTN_SUCCESS ||
        (bias && (st = check_buffer(ctx, bias, out_dim, sizeof(float), "bias")) != CLATTN_SUCCESS) ||
        (st = check_buffer(ctx, y, y_elems, sizeof(float), "y")) != CLATTN_SUCCESS ||
        (st = kernels_ensure(ctx)) != CLATTN_SUCCESS)
        return st;
    return stage_projection(ctx, rows, in_dim, out_dim, x, w, bias, y);
}

clattn_status clattn_score(clattn_context *ctx, const clattn_sdpa_desc *desc, cl_mem q, cl_mem k, cl_mem mask,
                           cl_mem scores)
{
    clattn_status st = check_context(ctx);
    sdpa_shape s;
    cl_mem key_lengths;
    if (st != CLATTN_SUCCESS || (st = sdpa_shape_resolve(ctx, desc, &s)) != CLATTN_SUCCESS ||
        (st = check_masks(ctx, &s.masks, s.batch, s.kv_len, mask != NULL)) != CLATTN_SUCCESS ||
        (st = check_buffer(ctx, q, s.q_elems, sizeof(float), "q")) != CLATTN_SUCCESS ||
        (st = check_buffer(ctx, k, s.k_elems, sizeof(float), "k")) != CLATTN_SUCCESS ||
        (mask && (st = check_buffer(ctx, mask, s.mask_elems, sizeof(float), "mask")) != CLATTN_SUCCESS) ||
        (st = check_buffer(ctx, scores, s.weight_elems, sizeof(float), "scores")) != CLATTN_SUCCESS ||
        (st = kernels_ensure(ctx)) != CLATTN_SUCCESS ||
        (st = upload_key_lengths(ctx, &s, &key_lengths)) != CLATTN_SUCCESS)
        return st;
    return stage_score(ctx, &s, view_bhld(q, s.heads, s.q_len, s.qk_dim), view_bhld(k, s.heads, s.kv_len, s.qk_dim),
                       key_lengths, mask, 0, s.batch * s.heads, scores);
}

clattn_status clattn_softmax(clattn_context *ctx, size_t rows, size_t cols, cl_mem scores, cl_mem weights,
                             cl_mem lse)
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
        (lse && (st = check_buffer(ctx, lse, rows, sizeof(float), "lse")) != CLATTN_SUCCESS) ||
        (st = kernels_ensure(ctx)) != CLATTN_SUCCESS)
        return st;
    return stage_softmax(ctx, rows, cols, scores, weights, lse, 0);
}

clattn_status clattn_weighted_sum(clattn_context *ctx, const clattn_sdpa_desc *desc, cl_mem weights, cl_mem v,
                                  cl_mem out)
{
    clattn_status st = check_context(ctx);
    if (st != CLATTN_SUCCESS)
        return st;
    if (!desc)
        return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "the descriptor is NULL");
    /* This stage has no Q or K: let v_dim stand in for an unset qk_dim. */
    clattn_sdpa_desc d = *desc;
    if (d.qk_dim == 0)
        d.qk_dim = d.v_dim;
    d.masks = (clattn_masks){0};
    sdpa_shape s;
    if ((st = sdpa_shape_resolve(ctx, &d, &s)) != CLATTN_SUCCESS ||
        (st = check_buffer(ctx, weights, s.weight_elems, sizeof(float), "weights")) != CLATTN_SUCCESS ||
        (st = check_buffer(ctx, v, s.v_elems, sizeof(float), "v")) != CLATTN_SUCCESS ||
        (st = check_buffer(ctx, out, s.out_elems, sizeof(float), "out")) != CLATTN_SUCCESS ||
        (st = kernels_ensure(ctx)) != CLATTN_SUCCESS)
        return st;
    return stage_weighted_sum(ctx, &s, weights, view_bhld(v, s.heads, s.kv_len, s.v_dim),
                              view_bhld(out, s.heads, s.q_len, s.v_dim), 0, s.batch * s.heads);
}
