/* Projections Y = X·W (+ bias) and the public clattn_projection. Two GEMMs serve them: clattn's own
 * register-blocked kernel (cl/gemm.cl, the bias its accumulators' starting value) and CLBlast's SGEMM
 * followed by a bias pass. Which one a context uses, and clattn's tile, is the gemm family's parameters
 * (tuning.c: options.gemm, else clattn_tune's record for the device, else the device class's row of
 * tuning_tables.c). Either falls back to the other where it cannot build or launch, with a warning. */
#include "projection.h"

#include "context.h"
#include "device.h"
#include "dtype.h"
#include "error.h"
#include "fault.h"
#include "launch.h"
#include "profile.h"
#include "program.h"
#include "scratch.h"
#include "tuning.h"
#include "validate.h"

#include <clblast_c.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What the context's projections run, kept beside its programs (program_path_state): the programs
 * themselves (clattn's GEMM per storage types, the bias pass) are in the kernel cache. */
struct projection_state {
    bool ready;         /* choice resolved and its kernels built */
    gemm_choice choice; /* what runs: impl, and clattn's tile (resolved, never 0) */
    unsigned vec; /* the GEMM kernel's VEC */
    bool blas_unusable; /* CLBlast cannot launch here: projections use clattn's kernel from now on */
    unsigned blas_transient_failures; /* CLBlast calls in a row that ran out of resources */
    bool blas_used;     /* CLBlast holds programs built for this context in its process-wide cache */
};

/* CLBlast keeps process-wide caches (its tuning database, compiled programs) that are not safe to fill
 * from two threads at once (seen as a crash under AddressSanitizer): contexts used from different
 * threads take turns here. */
static pthread_mutex_t blas_lock = PTHREAD_MUTEX_INITIALIZER;

/* CLBlast's GEMM kernels launch work groups of 64 items (8×8 and larger tiles): on a device that
 * allows fewer they fail at launch — and print to stderr — so such devices use clattn's kernel. */
#define BLAS_MIN_WORK_GROUP 64

/* What tuned values say runs: the implementation and clattn's tile (completed: never 0). */
static gemm_choice choice_of(const tuning_values *v)
{
    return (gemm_choice){v->v[0] == TUNING_GEMM_CLBLAST ? GEMM_CLBLAST : GEMM_CLATTN, v->v[1], v->v[2]};
}

/* The key of the projection's path state in the kernel cache. */
static const char projection_state_key = 0;

static bool blas_fits(const clattn_context *ctx) { return ctx->caps.max_work_group >= BLAS_MIN_WORK_GROUP; }

/* clattn's GEMM kernel for these storage types (NULL: all float) with the state's tile. */
static clattn_status build_gemm_typed(clattn_context *ctx, const struct projection_state *p, const gemm_types *t,
                                      cl_kernel *out)
{
    const bool typed = t && (t->x != CLATTN_FLOAT32 || t->w != CLATTN_FLOAT32 || t->y != CLATTN_FLOAT32);
    char options[TYPES_OPTIONS_MAX + 96], types[TYPES_OPTIONS_MAX] = "";
    if (typed)
        tensor_types_options((tensor_types){.q = t->x, .k = t->w, .v = CLATTN_FLOAT32, .o = t->y}, types, sizeof types);
    snprintf(options, sizeof options, "-DVEC=%u -DMR=%u -DNV=%u -DROW_DIM=%d%s%s", p->vec, p->choice.rows,
             p->choice.vectors, p->vec > 1 ? 0 : 1, types, t && t->exact ? " -DCLATTN_EXACT=1" : "");
    const family_build *fb;
    clattn_status st = program_get(ctx, &family_gemm, options, 0, 0, NULL, &fb);
    if (st == CLATTN_SUCCESS && out)
        *out = fb->kernels[0];
    return st;
}

static clattn_status build_gemm(clattn_context *ctx, struct projection_state *p)
{
    return build_gemm_typed(ctx, p, NULL, NULL);
}

static clattn_status bias_kernel(clattn_context *ctx, cl_kernel *out)
{
    const family_build *fb;
    clattn_status st = program_get(ctx, &family_add_bias, "", 0, 0, NULL, &fb);
    if (st == CLATTN_SUCCESS && out)
        *out = fb->kernels[0];
    return st;
}

static clattn_status build_bias(clattn_context *ctx, struct projection_state *p)
{
    (void)p;
    return bias_kernel(ctx, NULL);
}

/* Build what `choice` needs; where clattn's kernel does not build but CLBlast can run, CLBlast instead
 * (with a warning), and CLBlast on a device whose work groups are too small for it is clattn's kernel. */
static clattn_status state_build(clattn_context *ctx, struct projection_state *p, bool allow_fallback)
{
    if (p->choice.impl == GEMM_CLBLAST && !blas_fits(ctx)) {
        if (!allow_fallback)
            return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                             "%s allows work groups of at most %zu items, fewer than CLBlast needs", ctx->caps.name,
                             ctx->caps.max_work_group);
        set_warning(ctx, "%s allows work groups of at most %zu items, fewer than CLBlast needs; projections use "
                    "clattn's own GEMM kernel", ctx->caps.name, ctx->caps.max_work_group);
        p->choice.impl = GEMM_CLATTN;
        p->blas_unusable = true;
    }
    if (p->choice.impl == GEMM_CLBLAST)
        return build_bias(ctx, p);
    clattn_status st = build_gemm(ctx, p);
    if (st != CLATTN_ERROR_BUILD_FAILED || !allow_fallback || !blas_fits(ctx))
        return st;
    set_warning(ctx, "clattn's GEMM kernel does not build on %s (%s); projections use CLBlast", ctx->caps.name,
                clattn_last_error(ctx));
    clear_error(ctx);
    p->choice.impl = GEMM_CLBLAST;
    return build_bias(ctx, p);
}

/* At the context's end: CLBlast's cache keeps a reference to every cl_context it built programs for;
 * without this a freed context stays alive (megabytes per create/project/free cycle, and a crash in
 * CLBlast's exit-time destructor under some runtimes). Its C API can only clear the whole cache, so
 * other live contexts rebuild their GEMM programs on next use (from the OpenCL runtime's own binary
 * cache where it has one). */
static void state_release(clattn_context *ctx, void *data)
{
    (void)ctx;
    const struct projection_state *p = data;
    if (p->blas_used) {
        pthread_mutex_lock(&blas_lock);
        CLBlastClearCache();
        pthread_mutex_unlock(&blas_lock);
    }
}

static struct projection_state *state_of(clattn_context *ctx)
{
    return program_path_state(ctx, &projection_state_key, sizeof(struct projection_state), state_release);
}

/* Build what the (completed) values `v` say into *p, which is left as it was on failure. */
static clattn_status state_make(clattn_context *ctx, const tuning_values *v, bool allow_fallback,
                                struct projection_state *p)
{
    struct projection_state next = *p;
    next.vec = v->v[3];
    next.choice = choice_of(v);
    next.blas_unusable = false;
    next.blas_transient_failures = 0;
    clattn_status st = state_build(ctx, &next, allow_fallback);
    if (st != CLATTN_SUCCESS)
        return st;
    next.ready = true;
    *p = next;
    return CLATTN_SUCCESS;
}

clattn_status projection_prepare(clattn_context *ctx)
{
    struct projection_state *p = state_of(ctx);
    if (!p)
        return CLATTN_ERROR_OUT_OF_HOST_MEMORY;
    if (p->ready)
        return CLATTN_SUCCESS;
    tuning_values v;
    clattn_status st = tuning_lookup(ctx, TUNING_GEMM, &v, NULL);
    return st != CLATTN_SUCCESS ? st : state_make(ctx, &v, true, p);
}

void projection_reset(clattn_context *ctx)
{
    struct projection_state *p = state_of(ctx);
    if (p)
        p->ready = false;
}

clattn_status projection_use(clattn_context *ctx, const tuning_values *v)
{
    struct projection_state *p = state_of(ctx);
    return p ? state_make(ctx, v, false, p) : CLATTN_ERROR_OUT_OF_HOST_MEMORY;
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
 * switch the context to clattn's kernel for good. */
#define BLAS_TRANSIENT_LIMIT 3

/* Y = X·W (+ bias) with clattn's kernel: one work-item per tile of rows × vectors·VEC columns. */
static clattn_status gemm_kernel(clattn_context *ctx, size_t rows, size_t in_dim, size_t out_dim, cl_mem x,
                                 cl_mem w, cl_mem bias, cl_mem y, const projection_heads *heads, const gemm_types *t)
{
    const struct projection_state *p = state_of(ctx); /* made by projection_prepare */
    cl_kernel kernel;
    clattn_status st = build_gemm_typed(ctx, p, t, &kernel); /* built already unless CLBlast is falling back */
    if (st != CLATTN_SUCCESS)
        return st;
    const gemm_params params = {x,       w,      bias,
                                y,       rows,   in_dim,
                                out_dim, heads ? heads->seq_len : 0, heads ? heads->head_dim : 0};
    kernel_args a = kernel_args_begin(kernel);
    params_bind(&a, &params_gemm, &params, 0);
    const size_t row_tiles = (rows + p->choice.rows - 1) / p->choice.rows;
    const size_t col_tiles = (out_dim + p->vec * p->choice.vectors - 1) / (p->vec * p->choice.vectors);
    if (p->vec == 1) { /* GPUs: columns along dimension 0, groups the device's size */
        const size_t global[2] = {col_tiles, row_tiles};
        return kernel_launch_auto(ctx, &a, "projection GEMM (clattn)", 2, global);
    }
    /* CPUs (VEC > 1): a work-group per tile (its vector code is the work-item's), rows along dimension 0. */
    const size_t global[2] = {row_tiles, col_tiles}, local[2] = {1, 1};
    return kernel_launch(ctx, &a, "projection GEMM (clattn)", 2, global, local);
}

/* Y = X·W with CLBlast, then the bias; a launch CLBlast cannot make falls back to clattn's kernel. */
static clattn_status blas_gemm(clattn_context *ctx, size_t rows, size_t in_dim, size_t out_dim, cl_mem x, cl_mem w,
                               cl_mem bias, cl_mem y)
{
    struct projection_state *p = state_of(ctx); /* made by projection_prepare */
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
        set_warning(ctx, "CLBlast ran out of resources on %s (%s); this projection uses clattn's GEMM kernel",
                    ctx->caps.name, clattn_last_error(ctx));
        clear_error(ctx);
        return gemm_kernel(ctx, rows, in_dim, out_dim, x, w, bias, y, NULL, NULL);
    }
    if (transient || blas_cannot_launch(st)) {
        set_warning(ctx, "CLBlast cannot run on %s (%s); projections use clattn's GEMM kernel", ctx->caps.name,
                    clattn_last_error(ctx));
        clear_error(ctx);
        p->blas_unusable = true;
        return gemm_kernel(ctx, rows, in_dim, out_dim, x, w, bias, y, NULL, NULL);
    }
    cl_kernel add_bias;
    if (st != CLATTN_SUCCESS || !bias || (st = bias_kernel(ctx, &add_bias)) != CLATTN_SUCCESS)
        return st;
    const add_bias_params params = {y, bias, rows, out_dim};
    kernel_args a = kernel_args_begin(add_bias);
    params_bind(&a, &params_add_bias, &params, 0);
    const size_t global[2] = {out_dim, rows};
    return kernel_launch_auto(ctx, &a, "projection bias", 2, global);
}

/* Reproducible arithmetic's inputs: *m (n entries of `type`) with its entries below 2^-40 cut (cl/projection.cl),
 * into the scratch `slot`, then *m that copy. float16 has none (its smallest is 2^-24): left as it is. */
static clattn_status cut_small(clattn_context *ctx, cl_mem *m, clattn_dtype type, size_t n, scratch_slot slot)
{
    if (type == CLATTN_FLOAT16)
        return CLATTN_SUCCESS;
    const family_build *fb;
    cl_mem copy = NULL;
    clattn_status st = program_get(ctx, &family_add_bias, "", 0, 0, NULL, &fb);
    if (st == CLATTN_SUCCESS)
        st = scratch_get(ctx, slot, n * dtype_bytes(type), &copy);
    if (st != CLATTN_SUCCESS)
        return st;
    const bool bf16 = type == CLATTN_BFLOAT16;
    const cut_small_params params = {.src = *m, .dst = copy, .n = n, .bfloat16 = bf16};
    kernel_args a = kernel_args_begin(fb->kernels[1]);
    params_bind(&a, &params_cut_small, &params, 0);
    const size_t global[1] = {bf16 ? (n + 1) / 2 : n};
    if ((st = kernel_launch_auto(ctx, &a, "projection input, small entries cut", 1, global)) == CLATTN_SUCCESS)
        *m = copy;
    return st;
}

bool projection_splits_heads(clattn_context *ctx)
{
    const struct projection_state *p = state_of(ctx); /* made by projection_prepare */
    return p->choice.impl == GEMM_CLATTN || p->blas_unusable;
}

clattn_status projection_run(clattn_context *ctx, size_t rows, size_t in_dim, size_t out_dim, cl_mem x, cl_mem w,
                             cl_mem bias, cl_mem y, const projection_heads *heads, const gemm_types *types)
{
    /* Other storage types: clattn's kernel, whatever the choice (CLBlast's half GEMM would need
     * cl_khr_fp16, and it has no bfloat16); reproducible arithmetic: its exact build. */
    clattn_status st;
    if (types && types->exact && ((st = cut_small(ctx, &x, types->x, rows * in_dim, SCRATCH_CUT_X)) != CLATTN_SUCCESS ||
                                  (st = cut_small(ctx, &w, types->w, in_dim * out_dim, SCRATCH_CUT_W)) != CLATTN_SUCCESS))
        return st;
    if (types &&
        (types->x != CLATTN_FLOAT32 || types->w != CLATTN_FLOAT32 || types->y != CLATTN_FLOAT32 || types->exact))
        return gemm_kernel(ctx, rows, in_dim, out_dim, x, w, bias, y, heads, types);
    const struct projection_state *p = state_of(ctx); /* made by projection_prepare */
    if (p->choice.impl == GEMM_CLBLAST && !p->blas_unusable && !heads)
        return blas_gemm(ctx, rows, in_dim, out_dim, x, w, bias, y);
    return gemm_kernel(ctx, rows, in_dim, out_dim, x, w, bias, y, heads, NULL);
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
    return projection_run(ctx, rows, in_dim, out_dim, x, w, bias, y, NULL, NULL);
}
