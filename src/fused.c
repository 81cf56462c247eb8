/* The fused ("flash") attention kernel: which compiled variant serves a head size, how large its tiles
 * are on this device, and its launch. */
#include "internal.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Head sizes are compiled in, rounded up to a multiple of 16: few variants, little padding. */
static unsigned pad_head(size_t d) { return (unsigned)((d + 15) / 16 * 16); }

/* "MxN" or "MxNxR", plain decimal numbers and nothing else; returns how many parts (0: malformed). */
static size_t parse_tile(const char *text, unsigned long *parts)
{
    size_t n = 0;
    const char *p = text;
    for (;;) {
        if (n == 3 || !isdigit((unsigned char)*p))
            return 0;
        unsigned long v = 0;
        while (isdigit((unsigned char)*p) && v < 100000)
            v = v * 10 + (unsigned long)(*p++ - '0');
        parts[n++] = v;
        if (*p == '\0')
            return n;
        if (*p++ != 'x')
            return 0;
    }
}

/* Tiles from the device's limits: BLOCK_M query rows per work-group (one per work-item), BLOCK_N keys
 * per local-memory tile, VEC keys (and value columns) per vector operation inside a work-item. CPUs
 * get their native SIMD width as VEC (PoCL runs a work-item's vector code as is, where spreading rows
 * over lanes would need its work-item vectoriser) and tiles of 64 keys; GPUs get VEC = 1 (their lanes
 * are the work-items) and tiles of 32 keys, fewer when local memory is short. CLATTN_TILE=MxN
 * overrides the tiles, within the device's limits. */
static void choose_tiles(clattn_context *ctx, unsigned dk, unsigned dv, fused_variant *v)
{
    const bool cpu = (ctx->caps.type & CL_DEVICE_TYPE_CPU) != 0;
    unsigned vec = 1;
    if (cpu)
        while (vec < 16 && vec * 2 <= ctx->caps.native_float_width)
            vec *= 2;
    unsigned m = cpu ? 32 : 64, n = cpu ? 64 : 32, rows = cpu ? 4 : 1;
    const char *env = getenv("CLATTN_TILE");
    if (env && *env) {
        unsigned long parts[3] = {0, 0, rows};
        size_t nparts = parse_tile(env, parts);
        if (nparts >= 2 && parts[0] >= 1 && parts[0] <= 1024 && parts[1] >= 1 && parts[1] <= 256 && parts[2] >= 1 &&
            parts[2] <= 8) {
            m = (unsigned)parts[0];
            n = (unsigned)parts[1];
            rows = (unsigned)parts[2];
        } else {
            set_warning(ctx, "CLATTN_TILE=\"%.32s\" is not MxN or MxNxR (1 ≤ M ≤ 1024, 1 ≤ N ≤ 256, 1 ≤ R ≤ 8); "
                        "using the defaults", env);
        }
    }
    while (m > 1 && m > ctx->caps.max_work_group)
        m /= 2;
    while (n > vec && (cl_ulong)n * (dk + dv) * sizeof(float) > ctx->caps.local_mem)
        n /= 2;
    while (vec > 1 && (n % vec != 0 || (cl_ulong)n * (dk + dv) * sizeof(float) > ctx->caps.local_mem)) {
        vec /= 2; /* a tile must hold whole vectors */
        if (n < vec)
            n = vec;
    }
    v->block_m = m;
    v->block_n = n;
    v->vec = vec;
    v->rows = rows;
    v->kv = cpu && n % (2 * vec) == 0 ? 2 : 1; /* two key vectors per step when the tile holds them */
}

static void variant_release(fused_variant *v)
{
    if (v->kernel)
        clReleaseKernel(v->kernel);
    if (v->program)
        clReleaseProgram(v->program);
    v->kernel = NULL;
    v->program = NULL;
}

void fused_release(clattn_context *ctx)
{
    for (size_t i = 0; i < ctx->fused_count; i++)
        variant_release(&ctx->fused[i]);
    ctx->fused_count = 0;
}

static clattn_status variant_build(clattn_context *ctx, fused_variant *v)
{
    static const char *const files[] = {"flash_attention.cl"};
    char options[160];
    snprintf(options, sizeof options, "-cl-std=CL1.2 -DBLOCK_M=%u -DBLOCK_N=%u -DVEC=%u -DKV=%u -DROWS=%u -DDK=%u -DDV=%u",
             v->block_m, v->block_n, v->vec, v->kv, v->rows, v->dk, v->dv);
    clattn_status st = program_build(ctx, files, 1, options, &v->program);
    if (st == CLATTN_SUCCESS)
        st = kernel_create(ctx, v->program, "clattn_flash_attention", &v->kernel);
    if (st != CLATTN_SUCCESS)
        variant_release(v);
    return st;
}

/* The kernel for head sizes (dk, dv), built on first use. A device may not launch the group size we
 * asked for with this kernel's register and local-memory use (CL_KERNEL_WORK_GROUP_SIZE): then it is
 * rebuilt with fewer rows per group. */
static clattn_status fused_variant_get(clattn_context *ctx, size_t dk, size_t dv, fused_variant **out)
{
    const unsigned pdk = pad_head(dk), pdv = pad_head(dv);
    for (size_t i = 0; i < ctx->fused_count; i++)
        if (ctx->fused[i].dk == pdk && ctx->fused[i].dv == pdv) {
            *out = &ctx->fused[i];
            if (ctx->fused[i].failure != CLATTN_SUCCESS)
                return set_error(ctx, ctx->fused[i].failure, "the fused kernel for head sizes %u/%u did not build "
                                 "on this device earlier", pdk, pdv);
            return CLATTN_SUCCESS;
        }
    if (ctx->fused_count == FUSED_VARIANTS_MAX) { /* many head sizes in one context: start over */
        clFinish(ctx->queue);
        fused_release(ctx);
    }
    fused_variant v = {pdk, pdv, 0, 0, 0, 0, 0, NULL, NULL, CLATTN_SUCCESS};
    choose_tiles(ctx, pdk, pdv, &v);
    for (;;) {
        clattn_status st = variant_build(ctx, &v);
        if (st == CLATTN_ERROR_BUILD_FAILED) { /* remember, so that later calls fall back at once */
            v.failure = st;
            ctx->fused[ctx->fused_count++] = v;
        }
        if (st != CLATTN_SUCCESS)
            return st;
        size_t launchable = 0;
        cl_int err = clGetKernelWorkGroupInfo(v.kernel, ctx->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof launchable,
                                              &launchable, NULL);
        if (err != CL_SUCCESS) {
            variant_release(&v);
            return cl_error(ctx, err, "clGetKernelWorkGroupInfo(CL_KERNEL_WORK_GROUP_SIZE)");
        }
        if (launchable >= v.block_m)
            break;
        variant_release(&v);
        if (launchable == 0)
            return set_error(ctx, CLATTN_ERROR_UNSUPPORTED_DEVICE, "the fused kernel cannot launch on %s",
                             ctx->device_name);
        while (v.block_m > launchable)
            v.block_m /= 2;
    }
    ctx->fused[ctx->fused_count] = v;
    *out = &ctx->fused[ctx->fused_count++];
    return CLATTN_SUCCESS;
}

clattn_status fused_run(clattn_context *ctx, const sdpa_shape *s, tensor_view q, tensor_view k, tensor_view v,
                        cl_mem mask, tensor_view out, cl_mem lse)
{
    if (s->qk_dim > FUSED_MAX_HEAD || s->v_dim > FUSED_MAX_HEAD)
        return set_error(ctx, CLATTN_ERROR_UNSUPPORTED_DEVICE, "the fused kernel supports head sizes up to %d, not %zu",
                         FUSED_MAX_HEAD, s->qk_dim > s->v_dim ? s->qk_dim : s->v_dim);
    fused_variant *fv = NULL;
    cl_mem key_lengths = NULL;
    clattn_status st = fused_variant_get(ctx, s->qk_dim, s->v_dim, &fv);
    if (st != CLATTN_SUCCESS || (st = upload_key_lengths(ctx, s, &key_lengths)) != CLATTN_SUCCESS)
        return st;
    kernel_args a = {fv->kernel, 0, CL_SUCCESS, 0};
    karg_view(&a, q);
    karg_view(&a, k);
    karg_view(&a, v);
    karg_view(&a, out);
    karg_mem(&a, lse);
    karg_ulong(&a, s->heads);
    karg_ulong(&a, s->q_len);
    karg_ulong(&a, s->kv_len);
    karg_ulong(&a, s->qk_dim);
    karg_ulong(&a, s->v_dim);
    karg(&a, sizeof s->scale, &s->scale);
    cl_int causal = (cl_int)s->masks.causal, layout = mask ? (cl_int)s->masks.additive : 0;
    karg(&a, sizeof causal, &causal);
    karg_mem(&a, key_lengths);
    karg_mem(&a, mask);
    karg(&a, sizeof layout, &layout);
    const size_t rows_per_group = (size_t)fv->block_m * fv->rows;
    const size_t local[2] = {fv->block_m, 1};
    const size_t global[2] = {(s->q_len + rows_per_group - 1) / rows_per_group * fv->block_m, s->batch * s->heads};
    return kernel_launch(ctx, &a, "fused attention", 2, global, local);
}
