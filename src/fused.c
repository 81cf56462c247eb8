/* The fused ("flash") attention kernel: which compiled variant serves a head size, how large its tiles
 * are on this device, and its launch. */
#include "fused.h"

#include "cache.h"
#include "context.h"
#include "error.h"
#include "masks.h"
#include "program.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One compiled variant of the fused kernel: head sizes and tiles are build options. */
typedef struct fused_variant {
    unsigned dk, dv;           /* padded head sizes */
    unsigned block_m, block_n; /* rows per work-group, keys per tile */
    unsigned vec;              /* float vector width inside a work-item */
    unsigned rows;             /* query rows per work-item */
    unsigned kv;               /* key vectors per step of a row's walk */
    tensor_types types;        /* storage types of Q, K, V and O */
    cl_program program;
    cl_kernel kernel;
    clattn_status failure; /* a variant that did not build on this device is not tried again */
} fused_variant;

#define FUSED_VARIANTS_MAX 16

struct fused_state {
    fused_variant variants[FUSED_VARIANTS_MAX];
    size_t count;
    /* Tiles measured by clattn_tune (its record, read at the first build) or set by fused_use_tiles;
     * tiles_read: looked for already. */
    bool tiles_read, tiles_set;
    unsigned tile_m, tile_n, tile_rows;
};

const char fused_record_name[] = "fused tile choice, format 1";

/* The record of clattn_tune's tiles for this device, read once per context. */
static void read_tile_record(clattn_context *ctx, struct fused_state *f)
{
    if (f->tiles_read)
        return;
    f->tiles_read = true;
    char *record = cache_record_load(ctx, fused_record_name);
    if (!record)
        return;
    f->tiles_set = options_parse_tile(record, &f->tile_m, &f->tile_n, &f->tile_rows);
    if (!f->tiles_set)
        set_warning(ctx, "the tuning record of the fused kernel's tiles for %s is damaged; run clattn tune again",
                    ctx->caps.name);
    free(record);
}

/* Head sizes are compiled in, rounded up to a multiple of 16: few variants, little padding. */
static unsigned pad_head(size_t d) { return (unsigned)((d + 15) / 16 * 16); }

/* Tiles from the device's limits: BLOCK_M work-items per work-group (ROWS query rows each), BLOCK_N keys
 * per local-memory tile, VEC keys (and value columns) per vector operation inside a work-item. CPUs
 * get their native SIMD width as VEC (PoCL runs a work-item's vector code as is, where spreading rows
 * over lanes would need its work-item vectoriser), 64 work-items of 4 rows (each key tile copied once
 * for 256 rows; measured on PoCL, AVX-512: 54 ms for L = S = 2048, H = 8 where 32 work-items took 59–65
 * ms, and 128 or tiles of 128 keys about 108) and tiles of 64 keys; GPUs get VEC = 1 (their lanes are
 * the work-items) and tiles of 32 keys, fewer when local memory is short. The context's tile
 * option (CLATTN_TILE) overrides the tiles, within the device's limits. */
/* Local memory of a tile of n keys: K and V rows, a flag per key (whether its value row is finite),
 * and room for the flags' alignment. */
static cl_ulong tile_local_bytes(unsigned n, unsigned dk, unsigned dv)
{
    return (cl_ulong)n * ((dk + dv) * sizeof(float) + 1) + 64;
}

static void choose_tiles(clattn_context *ctx, const struct fused_state *f, unsigned dk, unsigned dv,
                         fused_variant *v)
{
    const bool cpu = (ctx->caps.type & CL_DEVICE_TYPE_CPU) != 0 && !device_is_llvmpipe(&ctx->caps); /* (device.h) */
    unsigned vec = 1;
    if (cpu)
        while (vec < 16 && vec * 2 <= ctx->caps.native_float_width)
            vec *= 2;
    unsigned m = 64, n = cpu ? 64 : 32, rows = cpu ? 4 : 1;
    if (ctx->options.tile_set) {
        m = ctx->options.tile_m;
        n = ctx->options.tile_n;
        if (ctx->options.tile_rows)
            rows = ctx->options.tile_rows;
    } else if (f->tiles_set) {
        m = f->tile_m;
        n = f->tile_n;
        if (f->tile_rows)
            rows = f->tile_rows;
    }
    while (m > 1 && m > ctx->caps.max_work_group)
        m /= 2;
    while (n > vec && tile_local_bytes(n, dk, dv) > ctx->caps.local_mem)
        n /= 2;
    while (vec > 1 && (n % vec != 0 || tile_local_bytes(n, dk, dv) > ctx->caps.local_mem)) {
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

/* Release every variant, keeping the (empty) state. */
static void variants_release(struct fused_state *f)
{
    for (size_t i = 0; i < f->count; i++)
        variant_release(&f->variants[i]);
    f->count = 0;
}

clattn_status fused_use_tiles(clattn_context *ctx, unsigned m, unsigned n, unsigned rows)
{
    if (!ctx->fused && !(ctx->fused = calloc(1, sizeof *ctx->fused)))
        return set_error(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "allocating the fused path's state");
    struct fused_state *f = ctx->fused;
    clFinish(ctx->queue); /* no launch of the variants released here is still pending */
    variants_release(f);
    f->tiles_read = true;
    f->tiles_set = m != 0;
    f->tile_m = m;
    f->tile_n = n;
    f->tile_rows = rows;
    return CLATTN_SUCCESS;
}

void fused_release(clattn_context *ctx)
{
    if (!ctx->fused)
        return;
    variants_release(ctx->fused);
    free(ctx->fused);
    ctx->fused = NULL;
}

static clattn_status variant_build(clattn_context *ctx, fused_variant *v)
{
    static const char *const files[] = {"masks.cl", "vec.cl", "flash_attention.cl"};
    char options[224], types[64];
    tensor_types_options(v->types, types, sizeof types);
    snprintf(options, sizeof options, "-cl-std=CL1.2 -cl-denorms-are-zero -DBLOCK_M=%u -DBLOCK_N=%u -DVEC=%u -DKV=%u -DROWS=%u -DDK=%u -DDV=%u%s",
             v->block_m, v->block_n, v->vec, v->kv, v->rows, v->dk, v->dv, types);
    clattn_status st = program_build(ctx, files, 3, options, &v->program);
    if (st == CLATTN_SUCCESS)
        st = kernel_create(ctx, v->program, "clattn_flash_attention", &v->kernel);
    if (st != CLATTN_SUCCESS)
        variant_release(v);
    return st;
}

/* The kernel for head sizes (dk, dv) and storage types, built on first use. A device may not launch the group size we
 * asked for with this kernel's register and local-memory use (CL_KERNEL_WORK_GROUP_SIZE): then it is
 * rebuilt with fewer rows per group. */
static clattn_status fused_variant_get(clattn_context *ctx, size_t dk, size_t dv, tensor_types types,
                                       fused_variant **out)
{
    const unsigned pdk = pad_head(dk), pdv = pad_head(dv);
    if (!ctx->fused && !(ctx->fused = calloc(1, sizeof *ctx->fused)))
        return set_error(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "allocating the fused path's state");
    struct fused_state *f = ctx->fused;
    for (size_t i = 0; i < f->count; i++)
        if (f->variants[i].dk == pdk && f->variants[i].dv == pdv && tensor_types_equal(f->variants[i].types, types)) {
            *out = &f->variants[i];
            if (f->variants[i].failure != CLATTN_SUCCESS)
                return set_error(ctx, f->variants[i].failure, "the fused kernel for head sizes %u/%u did not build "
                                 "on this device earlier", pdk, pdv);
            return CLATTN_SUCCESS;
        }
    if (f->count == FUSED_VARIANTS_MAX) { /* many head sizes in one context: start over */
        clFinish(ctx->queue);
        variants_release(f);
    }
    fused_variant v = {pdk, pdv, 0, 0, 0, 0, 0, types, NULL, NULL, CLATTN_SUCCESS};
    if (!ctx->options.tile_set)
        read_tile_record(ctx, f);
    choose_tiles(ctx, f, pdk, pdv, &v);
    for (;;) {
        clattn_status st = variant_build(ctx, &v);
        if (st == CLATTN_ERROR_BUILD_FAILED) { /* remember, so that later calls fall back at once */
            v.failure = st;
            f->variants[f->count++] = v;
        }
        if (st != CLATTN_SUCCESS)
            return st;
        size_t launchable;
        if ((st = kernel_group_limit(ctx, v.kernel, &launchable)) != CLATTN_SUCCESS) {
            variant_release(&v);
            return st;
        }
        if (launchable >= v.block_m)
            break;
        variant_release(&v);
        if (launchable == 0)
            return set_error(ctx, CLATTN_ERROR_UNSUPPORTED_DEVICE, "the fused kernel cannot launch on %s",
                             ctx->caps.name);
        while (v.block_m > launchable)
            v.block_m /= 2;
    }
    f->variants[f->count] = v;
    *out = &f->variants[f->count++];
    return CLATTN_SUCCESS;
}

clattn_status fused_run(clattn_context *ctx, const sdpa_shape *s, tensor_view q, tensor_view k, tensor_view v,
                        cl_mem mask, tensor_view out, cl_mem lse)
{
    if (s->qk_dim > FUSED_MAX_HEAD || s->v_dim > FUSED_MAX_HEAD)
        return set_error(ctx, CLATTN_ERROR_UNSUPPORTED_DEVICE, "the fused kernel supports head sizes up to %d, not %zu",
                         FUSED_MAX_HEAD, s->qk_dim > s->v_dim ? s->qk_dim : s->v_dim);
    fused_variant *fv = NULL;
    device_masks masks;
    clattn_status st = fused_variant_get(ctx, s->qk_dim, s->v_dim, s->types, &fv);
    if (st != CLATTN_SUCCESS || (st = masks_upload(ctx, s, mask, &masks)) != CLATTN_SUCCESS)
        return st;
    kernel_args a = kernel_args_begin(fv->kernel);
    karg_view(&a, q);
    karg_view(&a, k);
    karg_view(&a, v);
    karg_view(&a, out);
    karg_mem(&a, lse);
    karg_sdpa_sizes(&a, s);
    masks_kernel_args(&a, &masks);
    karg_mem(&a, masks.sinks);
    karg_mem(&a, s->k_scales);
    karg_mem(&a, s->v_scales);
    /* One work-group per tile of packed rows (the queries of all the query heads that share a K/V head,
     * see cl/flash_attention.cl) and per (batch, K/V head). */
    const size_t rows_per_group = (size_t)fv->block_m * fv->rows, packed_rows = s->q_len * s->group;
    const size_t local[2] = {fv->block_m, 1};
    const size_t global[2] = {(packed_rows + rows_per_group - 1) / rows_per_group * fv->block_m,
                              s->batch * s->kv_heads};
    return kernel_launch(ctx, &a, "fused attention", 2, global, local);
}
