/* Projections: CLBlast SGEMM plus a bias kernel, or clattn's own matmul kernel (bias included) on
 * devices where CLBlast cannot launch; and the public clattn_projection. */
#include "projection.h"

#include "context.h"
#include "error.h"
#include "fault.h"
#include "launch.h"
#include "profile.h"
#include "program.h"
#include "validate.h"

#include <clblast_c.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

enum { KERNEL_ADD_BIAS, KERNEL_MATMUL, KERNEL_COUNT };

struct projection_state {
    cl_program program;
    cl_kernel kernels[KERNEL_COUNT];
    bool blas_unusable; /* CLBlast cannot launch here: projections use the matmul kernel from now on */
    unsigned blas_transient_failures; /* CLBlast calls in a row that ran out of resources */
    bool blas_used;     /* CLBlast holds programs built for this context in its process-wide cache */
};

/* CLBlast keeps process-wide caches (its tuning database, compiled programs) that are not safe to fill
 * from two threads at once (seen as a crash under AddressSanitizer): contexts used from different
 * threads take turns here. */
static pthread_mutex_t blas_lock = PTHREAD_MUTEX_INITIALIZER;

/* CLBlast's GEMM kernels launch work groups of 64 items (8×8 and larger tiles): on a device that
 * allows fewer they fail at launch — and print to stderr — so such devices go to clattn's kernel
 * straight away. */
#define BLAS_MIN_WORK_GROUP 64

clattn_status projection_prepare(clattn_context *ctx)
{
    if (ctx->projection)
        return CLATTN_SUCCESS;
    struct projection_state *p = calloc(1, sizeof *p);
    if (!p)
        return set_error(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "allocating the projection state");
    static const char *const files[] = {"projection.cl"};
    static const char *const names[KERNEL_COUNT] = {"clattn_add_bias", "clattn_matmul"};
    clattn_status st = program_build_kernels(ctx, files, 1, "-cl-std=CL1.2", names, KERNEL_COUNT, &p->program,
                                             p->kernels);
    if (st != CLATTN_SUCCESS) {
        free(p);
        return st;
    }
    ctx->projection = p;
    return CLATTN_SUCCESS;
}

void projection_release(clattn_context *ctx)
{
    if (!ctx->projection)
        return;
    if (ctx->projection->blas_used) {
        /* CLBlast's cache keeps a reference to every cl_context it built programs for: without this a
         * freed context stays alive (megabytes per create/project/free cycle, and a crash in CLBlast's
         * exit-time destructor under some runtimes). Its C API can only clear the whole cache, so
         * other live contexts rebuild their GEMM programs on next use (from the OpenCL runtime's own
         * binary cache where it has one). */
        pthread_mutex_lock(&blas_lock);
        CLBlastClearCache();
        pthread_mutex_unlock(&blas_lock);
    }
    program_release(&ctx->projection->program, ctx->projection->kernels, KERNEL_COUNT);
    free(ctx->projection);
    ctx->projection = NULL;
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
           st == (clattn_status)CL_BUILD_PROGRAM_FAILURE || st == CLATTN_ERROR_BLAS;
}

/* CL_OUT_OF_RESOURCES may pass (another program held the device) or may be how a device says that
 * CLBlast's kernels never fit: each such call falls back on its own, and only this many in a row
 * switch the context to the matmul kernel for good. */
#define BLAS_TRANSIENT_LIMIT 3

/* Y = X·W (+ bias) with clattn's own kernel, for devices CLBlast cannot serve. */
static clattn_status matmul_kernel(clattn_context *ctx, size_t rows, size_t in_dim, size_t out_dim, cl_mem x,
                                   cl_mem w, cl_mem bias, cl_mem y)
{
    kernel_args a = kernel_args_begin(ctx->projection->kernels[KERNEL_MATMUL]);
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

clattn_status projection_run(clattn_context *ctx, size_t rows, size_t in_dim, size_t out_dim, cl_mem x, cl_mem w,
                             cl_mem bias, cl_mem y)
{
    struct projection_state *p = ctx->projection;
    if (!p->blas_unusable && ctx->caps.max_work_group < BLAS_MIN_WORK_GROUP) {
        set_warning(ctx, "%s allows work groups of at most %zu items, fewer than CLBlast needs; projections use "
                    "clattn's own matmul kernel", ctx->caps.name, ctx->caps.max_work_group);
        p->blas_unusable = true;
    }
    if (p->blas_unusable)
        return matmul_kernel(ctx, rows, in_dim, out_dim, x, w, bias, y);
    /* CLBlast hands back the event of its last kernel only (a GEMM may pad and transpose first): a
     * marker before it starts the profiled span. */
    cl_event since = NULL, event = NULL;
    CLBlastStatusCode code = (CLBlastStatusCode)INJECT_FAULT(CL_MEM_OBJECT_ALLOCATION_FAILURE);
    if (code == CLBlastSuccess && ctx->profile.enabled)
        code = (CLBlastStatusCode)clEnqueueMarkerWithWaitList(ctx->queue, 0, NULL, &since);
    if (code == CLBlastSuccess) {
        pthread_mutex_lock(&blas_lock);
        p->blas_used = true;
        code = CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeNo, rows, out_dim, in_dim,
                            1.0f, x, 0, in_dim, w, 0, out_dim, 0.0f, y, 0, out_dim, &ctx->queue,
                            profile_event_slot(ctx, &event));
        pthread_mutex_unlock(&blas_lock);
    }
    if (code == CLBlastSuccess && event) {
        profile_record_span(ctx, since, event, "projection GEMM (CLBlast)");
    } else {
        if (event)
            clReleaseEvent(event);
        if (since)
            clReleaseEvent(since);
    }
    clattn_status st = blas_status(ctx, code, "projection GEMM (CLBlastSgemm)");
    const bool transient = st == (clattn_status)CL_OUT_OF_RESOURCES;
    p->blas_transient_failures = transient ? p->blas_transient_failures + 1 : 0;
    if (transient && p->blas_transient_failures < BLAS_TRANSIENT_LIMIT) {
        set_warning(ctx, "CLBlast ran out of resources on %s (%s); this projection uses clattn's own matmul kernel",
                    ctx->caps.name, clattn_last_error(ctx));
        clear_error(ctx);
        return matmul_kernel(ctx, rows, in_dim, out_dim, x, w, bias, y);
    }
    if (transient || blas_cannot_launch(st)) {
        set_warning(ctx, "CLBlast cannot run on %s (%s); projections use clattn's own matmul kernel", ctx->caps.name,
                    clattn_last_error(ctx));
        clear_error(ctx);
        p->blas_unusable = true;
        return matmul_kernel(ctx, rows, in_dim, out_dim, x, w, bias, y);
    }
    if (st != CLATTN_SUCCESS || !bias)
        return st;
    kernel_args a = kernel_args_begin(p->kernels[KERNEL_ADD_BIAS]);
    karg_mem(&a, y);
    karg_mem(&a, bias);
    karg_ulong(&a, rows);
    karg_ulong(&a, out_dim);
    const size_t global[2] = {out_dim, rows};
    return kernel_launch_auto(ctx, &a, "projection bias", 2, global);
}

clattn_status clattn_projection(clattn_context *ctx, size_t rows, size_t in_dim, size_t out_dim, cl_mem x, cl_mem w,
                                cl_mem bias, cl_mem y)
{
    clattn_status st = check_context(ctx);
    if (st != CLATTN_SUCCESS)
        return st;
    if (rows == 0 || in_dim == 0 || out_dim == 0)
        return set_error(ctx, CLATTN_ERROR_ZERO_SIZE, "projection: %s is 0",
                         rows == 0 ? "rows" : in_dim == 0 ? "in_dim" : "out_dim");
    size_t x_elems, w_elems, y_elems;
    if (!size_mul(rows, in_dim, &x_elems) || !size_mul(in_dim, out_dim, &w_elems) || !size_mul(rows, out_dim, &y_elems))
        return set_error(ctx, CLATTN_ERROR_SIZE_OVERFLOW, "projection: rows=%zu in_dim=%zu out_dim=%zu overflows", rows,
                         in_dim, out_dim);
    if ((st = check_buffer(ctx, x, x_elems, sizeof(float), "x")) != CLATTN_SUCCESS ||
        (st = check_buffer(ctx, w, w_elems, sizeof(float), "w")) != CLATTN_SUCCESS ||
        (bias && (st = check_buffer(ctx, bias, out_dim, sizeof(float), "bias")) != CLATTN_SUCCESS) ||
        (st = check_buffer(ctx, y, y_elems, sizeof(float), "y")) != CLATTN_SUCCESS ||
        (st = projection_prepare(ctx)) != CLATTN_SUCCESS)
        return st;
    return projection_run(ctx, rows, in_dim, out_dim, x, w, bias, y);
}
