/* The fused ("flash") attention kernel: its shape for a call's head sizes on this device (how large its
 * tiles are), and its launch. */
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

/* The fused kernel's shape for one call: head sizes and tiles are build options. */
typedef struct fused_shape {
    unsigned dk, dv;           /* padded head sizes */
    unsigned block_m, block_n; /* rows per work-group, keys per tile */
    unsigned vec;              /* float vector width inside a work-item */
    unsigned rows;             /* query rows per work-item */
    unsigned kv;               /* key vectors per step of a row's walk */
} fused_shape;

/* Tiles measured by clattn_tune (its record, read at the first call) or set by fused_use_tiles, kept
 * for the context's life; read: looked for already. */
typedef struct fused_tiles {
    bool read, set;
    unsigned m, n, rows;
} fused_tiles;

const char fused_record_name[] = "fused tile choice, format 1";

/* The record of clattn_tune's tiles for this device, read once per context. */
static void read_tile_record(clattn_context *ctx, fused_tiles *f)
{
    if (f->read)
        return;
    f->read = true;
    char *record = cache_record_load(ctx, fused_record_name);
    if (!record)
        return;
    f->set = options_parse_tile(record, &f->m, &f->n, &f->rows);
    if (!f->set)
        set_warning(ctx, "the tuning record of the fused kernel's tiles for %s is damaged; run clattn tune again",
                    ctx->caps.name);
    free(record);
}

/* Head sizes are compiled in, rounded up to a multiple of 16: few programs, little padding. */
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

static void choose_tiles(clattn_context *ctx, const fused_tiles *f, unsigned dk, unsigned dv, fused_shape *v)
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
    } else if (f->set) {
        m = f->m;
        n = f->n;
        if (f->rows)
            rows = f->rows;
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

/* The context's tiles: its record's, or fused_use_tiles's. */
static fused_tiles *tiles_of(clattn_context *ctx)
{
    return program_path_state(ctx, fused_record_name, sizeof(fused_tiles), NULL);
}

clattn_status fused_use_tiles(clattn_context *ctx, unsigned m, unsigned n, unsigned rows)
{
    fused_tiles *f = tiles_of(ctx);
    if (!f)
        return CLATTN_ERROR_OUT_OF_HOST_MEMORY;
    *f = (fused_tiles){true, m != 0, m, n, rows}; /* the cache keeps the programs of other tiles apart */
    return CLATTN_SUCCESS;
}

clattn_status fused_run(clattn_context *ctx, const sdpa_shape *s, const kv_layout *lay, tensor_view q, tensor_view k,
                        tensor_view v, cl_mem mask, tensor_view out, cl_mem lse)
{
    static const kv_layout dense = {NULL, NULL, NULL, 0, 0};
    if (!lay)
        lay = &dense;
    if (s->qk_dim > FUSED_MAX_HEAD || s->v_dim > FUSED_MAX_HEAD)
        return set_error(ctx, CLATTN_ERROR_UNSUPPORTED_DEVICE, "the fused kernel supports head sizes up to %d, not %zu",
                         FUSED_MAX_HEAD, s->qk_dim > s->v_dim ? s->qk_dim : s->v_dim);
    fused_tiles *tiles = tiles_of(ctx);
    if (!tiles)
        return CLATTN_ERROR_OUT_OF_HOST_MEMORY;
    if (!ctx->options.tile_set)
        read_tile_record(ctx, tiles);
    fused_shape sh = {pad_head(s->qk_dim), pad_head(s->v_dim), 0, 0, 0, 0, 0};
    choose_tiles(ctx, tiles, sh.dk, sh.dv, &sh);
    device_masks masks;
    clattn_status st = masks_upload(ctx, s, mask, &masks);
    if (st != CLATTN_SUCCESS)
        return st;
    char options[256], types[64];
    tensor_types_options(s->types, types, sizeof types);
    snprintf(options, sizeof options, "-cl-std=CL1.2 -cl-denorms-are-zero -DBLOCK_N=%u -DVEC=%u -DKV=%u -DROWS=%u -DDK=%u -DDV=%u%s",
             sh.block_n, sh.vec, sh.kv, sh.rows, sh.dk, sh.dv, types);
    const family_build *fb;
    if ((st = program_get(ctx, &family_fused, options, sh.block_m, call_features(s) | layout_features(lay), &fb)) !=
        CLATTN_SUCCESS)
        return st;
    flash_params p = {.q = q, .k = k, .v = v, .o = out, .lse = lse, .heads = s->heads, .group = s->group,
                      .q_len = s->q_len, .kv_len = s->kv_len, .dk = s->qk_dim, .dv = s->v_dim, .scale = s->scale,
                      .sinks = masks.sinks, .q_starts = lay->q_starts, .k_starts = lay->k_starts,
                      .block_table = lay->block_table, .table_cols = lay->table_cols, .block_shift = lay->block_shift,
                      .k_scales = s->k_scales, .v_scales = s->v_scales};
    PARAMS_SET_MASKS(flash_params, &p, &masks);
    kernel_args a = kernel_args_begin(fb->kernels[0]);
    params_bind(&a, &params_flash, &p, fb->features);
    /* One work-group per tile of packed rows (the queries of all the query heads that share a K/V head,
     * see cl/flash_attention.cl) and per (batch, K/V head). */
    const size_t rows_per_group = (size_t)fb->group * sh.rows, packed_rows = s->q_len * s->group;
    const size_t local[2] = {fb->group, 1};
    const size_t global[2] = {(packed_rows + rows_per_group - 1) / rows_per_group * fb->group,
                              s->batch * s->kv_heads};
    return kernel_launch(ctx, &a, "fused attention", 2, global, local);
}
