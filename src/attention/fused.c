/* The fused ("flash") attention kernel: its shape for a call's head sizes on this device (how large its
 * tiles are), and its launch. */
#include "fused.h"
#include "tiles.h"

#include "context.h"
#include "error.h"
#include "masks.h"
#include "program.h"
#include "tuning.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* The fused kernel's shape for one call: head sizes and tiles are build options. */
typedef struct fused_shape {
    unsigned dk, dv;           /* padded head sizes */
    unsigned block_m, block_n; /* rows per work-group, keys per tile */
    unsigned vec;              /* float vector width inside a work-item */
    unsigned rows;             /* query rows per work-item */
    unsigned kv;               /* key vectors per step of a row's walk */
    bool lanes;                /* cl/flash_lanes.cl: the rows in the SIMD lanes */
    unsigned prefetch;         /* the next tile asked for (PREFETCH_*: device.h), the exact build on CPUs */
    bool in_place;             /* the exact CPU decode: K and V rows read where they lie, nothing staged */
} fused_shape;

/* Head sizes are compiled in, rounded up to a multiple of 16: few programs, little padding. */
static unsigned pad_head(size_t d) { return (unsigned)((d + 15) / 16 * 16); }

/* Local memory of a tile of n keys: K and V rows, a flag per key (whether its value row is finite),
 * and room for the flags' alignment. */
static cl_ulong tile_local_bytes(unsigned n, unsigned dk, unsigned dv)
{
    return (cl_ulong)n * ((dk + dv) * sizeof(float) + 1) + 64;
}

/* Tiles (tuning_tables.c: the values and why): BLOCK_M work-items per work-group, ROWS query rows each,
 * BLOCK_N keys per local-memory tile, VEC keys (and value columns) per vector operation inside a
 * work-item; here fitted to the device's limits (group size, local memory), as for options.tile.
 * Reproducible arithmetic (exact) takes 16 keys a step whatever the tiles: a tile holds whole steps. */
static void choose_tiles(const clattn_context *ctx, const tuning_values *t, unsigned dk, unsigned dv, bool exact,
                         size_t packed_rows, fused_shape *v)
{
    unsigned m = t->v[0], n = t->v[1], rows = t->v[2], vec = t->v[3], layout = t->v[4];
    if (exact)
        n = n < 16 ? 16 : n / 16 * 16;
    /* Reproducible decode on a CPU (at most 4 packed rows a K/V head; a CPU by the tuning's class, so class=cpu
     * runs this kernel under oclgrind's checks too): one work-item walks the keys with its rows,
     * in tiles of 128 keys, the keys in the lanes — a group of work-items, or the rows in the lanes, would stage for
     * rows it does not have (measured in 0.24, staged: L = 1, S = 8192, H = 32, D = 128, 1.6x the default call
     * against 2.5x with the CPU tuning's 16 work-items and 4.1x with its rows in the lanes). */
    const bool exact_decode = exact && packed_rows <= 4 && tuning_class(&ctx->caps, &ctx->tuning) == DEVICE_CLASS_CPU;
    if (exact_decode) {
        /* (8 keys a vector, even with AVX-512: K rows are read 8 entries at a time, the lanes of the dot product's
         * 8 chains, cl/exact_tiles.cl's EXACT_KEY_CHAINS.) */
        if (vec > 8)
            vec = 8;
        m = 1;
        n = 128;
        rows = packed_rows <= 1 ? 1 : packed_rows <= 2 ? 2 : 4;
        layout = 1;
    }
    /* llvmpipe stops a work-item's loops after 65535 iterations in all (reproducible.c refuses the rows that would
     * pass it, measured on this shape): there the exact build keeps a row a work-item, VEC 1, and groups of at
     * least 32 whatever the tuning, whose loops (left rolled there) would reach the limit sooner. */
    if (exact && device_class_of(&ctx->caps) == DEVICE_CLASS_CPU_LANES) {
        vec = rows = 1;
        m = m < 32 ? 32 : m;
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
    v->kv = vec > 1 && n % (2 * vec) == 0 ? 2 : 1; /* two key vectors per step when the tile holds them */
    /* Rows in the lanes: `rows` vectors of VEC rows a work-item, the tile's keys 8 a step. */
    v->lanes = layout == 2 && vec > 1 && n % 8 == 0;
    if (v->lanes)
        v->rows = rows * vec;
    if (exact && !v->lanes) { /* (the step: KV vectors of VEC, 16 keys; with the rows in lanes, 16 keys a step too) */
        v->kv = 16 / vec;
        v->rows = rows;
    }
    /* A decode's one work-item reads its keys' rows in place, the same bits as from a staged tile: a staged tile
     * was written and read back (measured on the shape above, alternated in one run: 17.3-17.6 ms staged, 15.4-16.0
     * ms in place). In place, the rows are read in order, key by key, and the core's own prefetcher keeps up:
     * asking for lines ahead made it slower (0.26: 12.7-13.8 ms with lines asked for two steps ahead, 9.9-10.6 ms
     * without, alternated); 0.25's in-place reading, which transposed 8 x 8 blocks of K, needed them (without: 2.1-2.6x
     * the default call), and the staged kernel keeps them. */
    v->in_place = exact_decode && vec == 8 && !v->lanes;
    v->prefetch = exact && vec > 1 && !v->lanes && !v->in_place ? device_prefetch_mode(&ctx->caps) : PREFETCH_NONE;
}

/* The kernel's parameters for a call, but for its masks (PARAMS_SET_MASKS) and work list (tiles). */
static flash_params fused_params(const sdpa_shape *s, const kv_layout *lay, tensor_view q, tensor_view k,
                                 tensor_view v, tensor_view out, cl_mem lse, cl_mem sinks)
{
    flash_params p = {.q = q, .k = k, .v = v, .o = out, .lse = lse, .heads = s->heads, .group = s->group,
                      .q_len = s->q_len, .kv_len = s->kv_len, .dk = s->qk_dim, .dv = s->v_dim, .scale = s->scale,
                      .sinks = sinks, .q_starts = lay->q_starts, .k_starts = lay->k_starts,
                      .block_table = lay->block_table, .table_cols = lay->table_cols, .block_shift = lay->block_shift,
                      .k_scales = s->k_scales, .v_scales = s->v_scales,
                      .v_scale_row = s->v_in_k ? s->qk_dim : s->v_dim};
    return p;
}

/* fused_run, in the default arithmetic or (exact) in the reproducible one: -DCLATTN_EXACT=1, no
 * -cl-denorms-are-zero (the kernel keeps subnormals away itself), family_reproducible. */
static clattn_status fused_launch(clattn_context *ctx, const sdpa_shape *s, const kv_layout *lay, tensor_view q,
                                  tensor_view k, tensor_view v, cl_mem mask, tensor_view out, cl_mem lse, bool exact)
{
    static const kv_layout dense = {NULL, NULL, NULL, 0, 0, NULL, 0, 0};
    if (!lay)
        lay = &dense;
    if (s->qk_dim > FUSED_MAX_HEAD || s->v_dim > FUSED_MAX_HEAD)
        return set_error(ctx, CLATTN_ERROR_UNSUPPORTED_DEVICE, "the fused kernel supports head sizes up to %d, not %zu",
                         FUSED_MAX_HEAD, s->qk_dim > s->v_dim ? s->qk_dim : s->v_dim);
    tuning_values tiles;
    clattn_status st = tuning_lookup(ctx, TUNING_FUSED, &tiles, NULL);
    if (st != CLATTN_SUCCESS)
        return st;
    fused_shape sh = {pad_head(s->qk_dim), pad_head(s->v_dim), 0, 0, 0, 0, 0, false, PREFETCH_NONE, false};
    choose_tiles(ctx, &tiles, sh.dk, sh.dv, exact, s->q_len * s->group, &sh);
    device_masks masks;
    st = masks_upload(ctx, s, mask, &masks);
    if (st != CLATTN_SUCCESS)
        return st;
    char options[TYPES_OPTIONS_MAX + 256], types[TYPES_OPTIONS_MAX];
    tensor_types_options(s->types, types, sizeof types);
    /* (-DLANES=1 names the rows-in-lanes kernel in the program cache's key, where tests read it.) */
    snprintf(options, sizeof options, "%s -DBLOCK_N=%u -DVEC=%u -DKV=%u -DROWS=%u -DDK=%u -DDV=%u -DPREFETCH=%u%s%s%s",
             exact ? "-DCLATTN_EXACT=1" : "-cl-denorms-are-zero", sh.block_n, sh.vec, sh.kv, sh.rows, sh.dk, sh.dv,
             sh.prefetch, sh.lanes ? " -DLANES=1" : "", sh.in_place ? " -DEXACT_IN_PLACE=1" : "", types);
    const kernel_family *family = exact ? (sh.lanes ? &family_reproducible_lanes : &family_reproducible)
                                  : sh.lanes ? &family_fused_lanes
                                             : &family_fused;
    const family_build *fb;
    if ((st = program_get(ctx, family, options, sh.block_m,
                          call_features(s) | layout_features(lay), call_mods(s), &fb)) != CLATTN_SUCCESS)
        return st;
    flash_params p = fused_params(s, lay, q, k, v, out, lse, masks.sinks);
    /* One work-group per tile of packed rows (the queries of all the query heads that share a K/V head,
     * see cl/flash_attention.cl) and per (batch, K/V head); a ragged launch's listed tiles per K/V head. */
    const size_t rows_per_group = (size_t)fb->group * sh.rows;
    size_t groups;
    if ((st = tiles_list(ctx, s, lay, rows_per_group, &p.tiles, &groups)) != CLATTN_SUCCESS || groups == 0)
        return st;
    p.tile_count = groups;
    PARAMS_SET_MASKS(flash_params, &p, &masks);
    kernel_args a = kernel_args_begin(fb->kernels[0]);
    params_bind(&a, sh.lanes ? &params_flash_lanes : &params_flash, &p, fb->features);
    const size_t local[2] = {fb->group, 1};
    const size_t global[2] = {groups * fb->group, p.tiles ? s->kv_heads : s->batch * s->kv_heads};
    return kernel_launch(ctx, &a, exact ? "reproducible attention" : "fused attention", 2, global, local);
}

clattn_status fused_run(clattn_context *ctx, const sdpa_shape *s, const kv_layout *lay, tensor_view q, tensor_view k,
                        tensor_view v, cl_mem mask, tensor_view out, cl_mem lse)
{
    return fused_launch(ctx, s, lay, q, k, v, mask, out, lse, false);
}

clattn_status fused_exact_weights(clattn_context *ctx, const sdpa_shape *s, tensor_view q, tensor_view k,
                                  tensor_view v, cl_mem mask, cl_mem lse, cl_mem weights, clattn_weights_output mode)
{
    static const kv_layout dense = {NULL, NULL, NULL, 0, 0, NULL, 0, 0};
    device_masks masks;
    clattn_status st = masks_upload(ctx, s, mask, &masks);
    if (st != CLATTN_SUCCESS)
        return st;
    char options[TYPES_OPTIONS_MAX + 64], types[TYPES_OPTIONS_MAX];
    tensor_types_options(s->types, types, sizeof types);
    snprintf(options, sizeof options, "-DCLATTN_EXACT=1 -DVEC=1 -DDK=%u -DDV=%u%s", pad_head(s->qk_dim),
             pad_head(s->v_dim), types);
    const family_build *fb;
    if ((st = program_get(ctx, &family_reproducible_weights, options, 0, call_features(s), call_mods(s), &fb)) !=
        CLATTN_SUCCESS)
        return st;
    exact_weights_params p;
    memset(&p, 0, sizeof p);
    const flash_params f = fused_params(s, &dense, q, k, v, (tensor_view){0}, lse, masks.sinks);
#define COPY_FLASH_FIELD(feature, kind, type, name, absent) p.name = f.name;
    CLATTN_FLASH_PARAMS(COPY_FLASH_FIELD) /* (the weights kernel's parameters begin with the fused kernel's) */
#undef COPY_FLASH_FIELD
    PARAMS_SET_MASKS(exact_weights_params, &p, &masks);
    p.weights = weights;
    p.weights_mode = (int)mode;
    kernel_args a = kernel_args_begin(fb->kernels[0]);
    params_bind(&a, &params_exact_weights, &p, fb->features);
    const size_t global[3] = {s->kv_len, s->q_len, s->batch * s->heads};
    return kernel_launch_auto(ctx, &a, "reproducible weights", 3, global);
}

clattn_status fused_run_exact(clattn_context *ctx, const sdpa_shape *s, const kv_layout *lay, tensor_view q,
                              tensor_view k, tensor_view v, cl_mem mask, tensor_view out, cl_mem lse)
{
    return fused_launch(ctx, s, lay, q, k, v, mask, out, lse, true);
}
