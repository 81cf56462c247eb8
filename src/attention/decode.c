/* The decode path (cl/decode.cl): the kernels' shape for a call's head sizes on this device, how the
 * keys are split over work-groups, and the two launches (partial results per split, then their merge). */
#include "decode.h"
#include "tiles.h"

#include "context.h"
#include "error.h"
#include "masks.h"
#include "program.h"
#include "scratch.h"
#include "tuning.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The kernels' shape for one call: head sizes and the work-group's shape are build options. */
typedef struct decode_shape {
    unsigned dk, dv;   /* padded head sizes */
    unsigned wg;       /* work-items per group */
    unsigned vec;      /* float vector width inside a work-item */
    unsigned kq;       /* keys per step of a work-item's scores */
    unsigned rb;       /* rows per step of the scores (1: none blocked) */
    unsigned tile;     /* keys per tile */
    unsigned r_max;    /* packed query rows per group */
    bool stage;        /* K/V tiles copied to local memory (else read in place) */
    bool rows_t;       /* the scores with the rows in the lanes (ROWS_T, cl/decode.cl) */
    unsigned prefetch; /* the next tile asked for: PREFETCH_NONE, _CORE or _CLANG (see cl/decode.cl) */
} decode_shape;

/* Fewest keys per split: below this a split's fixed cost (its queries, its partial row) dominates. */
#define DECODE_MIN_SLICE 256
#define DECODE_MAX_SPLITS 64

static unsigned pad_head(size_t d) { return (unsigned)((d + 15) / 16 * 16); }

/* Local memory of a shape: the queries, the tile's scores and weights, and the staged K and V. */
static cl_ulong local_bytes(const decode_shape *v)
{
    const cl_ulong r_pad = v->rows_t ? (v->r_max + v->vec - 1) / v->vec * v->vec : v->r_max;
    return sizeof(float) * (r_pad * (v->dk + 2 * v->tile) +
                            (v->stage ? (cl_ulong)v->tile * (v->dk + v->dv) : 0));
}

/* The kernels' shape (tuning_tables.c: the values and why): one work-item per group streams its keys
 * in place at VEC lanes, `keys per step` rows × keys of dot products at a time, the next tile
 * prefetched (CPUs); or a group of work-items stages each tile in local memory with coalesced reads,
 * shares its scores and spreads the output columns over its lanes (GPUs). Tiles, then rows per group,
 * shrink until local memory holds them. */
static void choose_shape(const clattn_context *ctx, const sdpa_shape *s, const tuning_values *t, decode_shape *v)
{
    v->r_max = t->v[1];
    /* Mesa's rusticl (llvmpipe, LLVM 15) computes wrong rows where a work-item holds many rows of wide
     * accumulators (measured: 6 rows of 256 values wrong, 5 right; 2 of 512 wrong in a causal pair, 1 right;
     * oclgrind and PoCL right on the same shapes): there, values wider than 128 get at most 512 accumulators'
     * worth of rows. */
    if (strstr(ctx->caps.platform, "rusticl") && s->v_dim > 128 && v->r_max * pad_head(s->v_dim) > 512)
        v->r_max = 512 / pad_head(s->v_dim) > 1 ? 512 / pad_head(s->v_dim) : 1;
    v->tile = t->v[2];
    v->wg = t->v[3];
    v->vec = t->v[4];
    v->kq = v->rb = t->v[5];
    /* The staging shape, even where the device's groups are smaller (then halved); and on one work-item
     * for a cache in a block or FP8 format: each tile's rows dequantised once, block by block, where in
     * place every row pair and every vector would decode them again (2.5-5x slower on PoCL). */
    const bool quantised = (dtype_kv_only(s->types.k) && s->types.k != CLATTN_INT8) ||
                           (dtype_kv_only(s->types.v) && s->types.v != CLATTN_INT8);
    v->stage = v->wg > 1 || quantised;
    while (v->wg > 1 && v->wg > ctx->caps.max_work_group)
        v->wg /= 2;
    v->prefetch = v->stage ? PREFETCH_NONE : device_prefetch_mode(&ctx->caps);
    /* Rows in the lanes from `rows in lanes from` packed rows a group (by default, once they fill the
     * lanes), in place with vectors of 4 or more (ROWS_T steps 8 keys at a time). */
    const size_t group_rows = s->q_len * s->group < v->r_max ? s->q_len * s->group : v->r_max;
    v->rows_t = !v->stage && v->vec >= 4 && v->tile % 8 == 0 && group_rows >= t->v[6];
    const unsigned smallest_tile = v->vec > v->kq ? v->vec : v->kq;
    while (v->tile > smallest_tile && local_bytes(v) > ctx->caps.local_mem)
        v->tile /= 2;
    while (v->r_max > 1 && local_bytes(v) > ctx->caps.local_mem)
        v->r_max /= 2;
    if (v->tile % 8 != 0) /* (a tile shrunk below ROWS_T's step: the rows along d) */
        v->rows_t = false;
}

/* The kernels for this shape and the call's features; a compiler, or a runtime, that refuses the
 * prefetch gets them without. */
static clattn_status decode_kernels(clattn_context *ctx, const sdpa_shape *s, decode_shape *v, feature_set features,
                                    const family_build **out)
{
    for (;;) {
        char options[TYPES_OPTIONS_MAX + 256], types[TYPES_OPTIONS_MAX];
        tensor_types_options(s->types, types, sizeof types);
        snprintf(options, sizeof options,
                 "-cl-denorms-are-zero -DDK=%u -DDV=%u -DVEC=%u -DKQ=%u -DRB=%u -DTILE=%u -DR_MAX=%u -DSTAGE=%d -DPREFETCH=%u -DROWS_T=%d%s",
                 v->dk, v->dv, v->vec, v->kq, v->rb, v->tile, v->r_max, v->stage, v->prefetch, v->rows_t, types);
        clattn_status st = program_get(ctx, &family_decode, options, v->wg, features, call_mods(s), out);
        if (st == CLATTN_SUCCESS || st == CLATTN_ERROR_OUT_OF_HOST_MEMORY || v->prefetch == PREFETCH_NONE)
            return st;
        clear_error(ctx);
        v->prefetch = PREFETCH_NONE;
    }
}

/* Splits of the keys: enough work-groups to keep every compute unit busy (`per_unit` per unit, so
 * uneven slices even out), but at least DECODE_MIN_SLICE keys each. The keys are those any batch can see:
 * up to the longest key length when lengths are given (a cache's capacity beyond it is never read). */
static void plan_splits(const clattn_context *ctx, const sdpa_shape *s, const decode_shape *v, unsigned per_unit,
                        size_t *splits, size_t *slice)
{
    size_t keys = s->kv_len;
    if (s->masks.key_lengths) {
        keys = 0;
        for (size_t b = 0; b < s->batch; b++)
            if (s->masks.key_lengths[b] > keys)
                keys = s->masks.key_lengths[b];
    }
    const size_t row_groups = (s->q_len * s->group + v->r_max - 1) / v->r_max;
    const size_t groups = s->batch * s->kv_heads * row_groups;
    const size_t target = per_unit * (size_t)(ctx->caps.compute_units ? ctx->caps.compute_units : 1);
    size_t n = (target + groups - 1) / groups;
    const size_t most = keys / DECODE_MIN_SLICE;
    if (n > most)
        n = most;
    if (n > DECODE_MAX_SPLITS)
        n = DECODE_MAX_SPLITS;
    /* Every split holds a copy of the output: together they must fit in one allocation (one does). */
    while (n > 1 && n * s->out_elems > ctx->caps.max_alloc / sizeof(float))
        n--;
    if (n < 1)
        n = 1;
    /* Whole tiles per split; the last split takes what is left. */
    const size_t per = (keys + n - 1) / n;
    *slice = n == 1 ? s->kv_len : (per + v->tile - 1) / v->tile * v->tile;
    *splits = n == 1 ? 1 : (keys + *slice - 1) / *slice;
}

/* Where the partial kernel writes: the final output (with its lse and the sinks), or one split's slot
 * of the temporaries. */
typedef struct partial_target {
    tensor_view out;
    size_t out_split_stride;
    cl_mem lse;
    size_t lse_split_stride;
    cl_mem sinks;
    cl_mem o_starts; /* ragged final output: the rows of each sequence */
} partial_target;

static clattn_status launch_partial(clattn_context *ctx, const sdpa_shape *s, const decode_shape *dv,
                                    const family_build *fb, const device_masks *masks, const kv_layout *lay,
                                    tensor_view q, tensor_view k, tensor_view v, const partial_target *t,
                                    size_t splits, size_t slice)
{
    decode_partial_params p = {.q = q, .k = k, .v = v, .o = t->out, .o_split_stride = t->out_split_stride,
                               .lse = t->lse, .lse_split_stride = t->lse_split_stride, .heads = s->heads,
                               .group = s->group, .q_len = s->q_len, .kv_len = s->kv_len, .dk = s->qk_dim,
                               .dv = s->v_dim, .scale = s->scale, .slice = slice, .sinks = t->sinks,
                               .q_starts = lay->q_starts, .k_starts = lay->k_starts, .o_starts = t->o_starts,
                               .block_table = lay->block_table, .table_cols = lay->table_cols,
                               .block_shift = lay->block_shift, .k_scales = s->k_scales, .v_scales = s->v_scales,
                               .v_scale_row = s->v_in_k ? s->qk_dim : s->v_dim};
    /* Every row group of every (sequence, K/V head), or a ragged launch's listed ones per K/V head. */
    size_t row_groups;
    clattn_status st = tiles_list(ctx, s, lay, dv->r_max, &p.tiles, &row_groups);
    if (st != CLATTN_SUCCESS || row_groups == 0)
        return st;
    p.tile_count = row_groups;
    PARAMS_SET_MASKS(decode_partial_params, &p, masks);
    kernel_args a = kernel_args_begin(fb->kernels[0]);
    params_bind(&a, &params_decode_partial, &p, fb->features);
    const size_t local[2] = {fb->group, 1};
    const size_t global[2] = {splits * row_groups * fb->group, p.tiles ? s->kv_heads : s->batch * s->kv_heads};
    return kernel_launch(ctx, &a, "decode partial", 2, global, local);
}

static clattn_status launch_combine(clattn_context *ctx, const sdpa_shape *s, const family_build *fb,
                                    cl_mem part_out, cl_mem part_lse, size_t splits, cl_mem sinks, tensor_view out,
                                    cl_mem lse, cl_mem o_starts)
{
    const decode_combine_params p = {part_out, part_lse, splits, s->lse_elems, s->v_dim, s->heads, s->q_len,
                                     sinks,    out,      lse,    o_starts};
    kernel_args a = kernel_args_begin(fb->kernels[1]);
    params_bind(&a, &params_decode_combine, &p, fb->features);
    const size_t global[2] = {s->v_dim, s->lse_elems};
    return kernel_launch_auto(ctx, &a, "decode combine", 2, global);
}

clattn_status decode_check_call(clattn_context *ctx, const sdpa_shape *s, const char *entry)
{
    if (s->algorithm != CLATTN_ALGORITHM_AUTO && s->algorithm != CLATTN_ALGORITHM_DECODE &&
        s->algorithm != CLATTN_ALGORITHM_FUSED)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                         "%s runs the decode or the fused kernel: desc.algorithm must be AUTO, DECODE or FUSED", entry);
    if (s->qk_dim > DECODE_MAX_HEAD || s->v_dim > DECODE_MAX_HEAD)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "%s takes head sizes up to %d", entry, DECODE_MAX_HEAD);
    if (s->softmax_double)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                         "%s runs the decode kernels, whose softmax is float32: desc.softmax_precision must be "
                         "CLATTN_SOFTMAX_FLOAT (the double softmax is the staged path's, through clattn_sdpa)",
                         entry);
    return CLATTN_SUCCESS;
}

clattn_status decode_run_layout(clattn_context *ctx, const sdpa_shape *s, const kv_layout *lay, tensor_view q,
                                tensor_view k, tensor_view v, cl_mem mask, tensor_view out, cl_mem lse)
{
    if (s->qk_dim > DECODE_MAX_HEAD || s->v_dim > DECODE_MAX_HEAD)
        return set_error(ctx, CLATTN_ERROR_UNSUPPORTED_DEVICE,
                         "the decode kernels support head sizes up to %d, not %zu", DECODE_MAX_HEAD,
                         s->qk_dim > s->v_dim ? s->qk_dim : s->v_dim);
    tuning_values t;
    clattn_status st = tuning_lookup(ctx, TUNING_DECODE, &t, NULL);
    if (st != CLATTN_SUCCESS)
        return st;
    decode_shape dv = {pad_head(s->qk_dim), pad_head(s->v_dim), 0, 0, 0, 0, 0, 0, false, false, PREFETCH_NONE};
    choose_shape(ctx, s, &t, &dv);
    device_masks masks;
    const family_build *fb;
    st = masks_upload(ctx, s, mask, &masks);
    const feature_set features = call_features(s) | layout_features(lay);
    if (st != CLATTN_SUCCESS || (st = decode_kernels(ctx, s, &dv, features, &fb)) != CLATTN_SUCCESS)
        return st;
    size_t splits, slice;
    plan_splits(ctx, s, &dv, t.v[0], &splits, &slice);
    /* One pass writes the final rows, when they are floats (the partial kernel writes floats; another
     * output type goes through the combine pass, which rounds into it). */
    if (splits == 1 && s->types.o == CLATTN_FLOAT32) {
        const partial_target final = {out, 0, lse, 0, masks.sinks, lay->q_starts};
        return launch_partial(ctx, s, &dv, fb, &masks, lay, q, k, v, &final, 1, slice);
    }
    /* Partial rows per split in dense temporaries (B,H,L,Dv) and (B,H,L) (plan_splits kept them within
     * one allocation), then their merge into the output. */
    cl_mem part_out, part_lse;
    if ((st = scratch_get(ctx, SCRATCH_PARTIAL_OUT, splits * s->out_elems * sizeof(float), &part_out)) !=
            CLATTN_SUCCESS ||
        (st = scratch_get(ctx, SCRATCH_PARTIAL_LSE, splits * s->lse_elems * sizeof(float), &part_lse)) !=
            CLATTN_SUCCESS)
        return st;
    const partial_target parts = {view_bhld(part_out, s->heads, s->q_len, s->v_dim), s->out_elems, part_lse,
                                  s->lse_elems, NULL, NULL};
    st = launch_partial(ctx, s, &dv, fb, &masks, lay, q, k, v, &parts, splits, slice);
    return st != CLATTN_SUCCESS ? st
                                : launch_combine(ctx, s, fb, part_out, part_lse, splits, masks.sinks, out, lse,
                                                 lay->q_starts);
}

clattn_status decode_run(clattn_context *ctx, const sdpa_shape *s, tensor_view q, tensor_view k, tensor_view v,
                         cl_mem mask, tensor_view out, cl_mem lse)
{
    const kv_layout dense = {NULL, NULL, NULL, 0, 0, NULL, 0, 0};
    return decode_run_layout(ctx, s, &dense, q, k, v, mask, out, lse);
}
