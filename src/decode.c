/* The decode path (cl/decode.cl): which compiled variant serves a head size, how the keys are split
 * over work-groups on this device, and the two launches (partial results per split, then their merge). */
#include "decode.h"

#include "context.h"
#include "error.h"
#include "masks.h"
#include "program.h"
#include "scratch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One compiled variant: head sizes and the work-group's shape are build options. */
typedef struct decode_variant {
    unsigned dk, dv;   /* padded head sizes */
    unsigned wg;       /* work-items per group */
    unsigned vec;      /* float vector width inside a work-item */
    unsigned kq;       /* keys per step of a work-item's scores */
    unsigned rb;       /* rows per step of the scores (1: none blocked) */
    unsigned tile;     /* keys per tile */
    unsigned r_max;    /* packed query rows per group */
    bool stage;        /* K/V tiles copied to local memory (else read in place) */
    unsigned prefetch; /* the next tile asked for: PREFETCH_NONE, _CORE or _CLANG (see cl/decode.cl) */
    tensor_types types; /* storage types of Q, K, V and O (the partial kernel writes floats) */
    cl_program program;
    cl_kernel kernels[2]; /* partial, combine */
    clattn_status failure; /* a variant that did not build on this device is not tried again */
} decode_variant;

#define DECODE_VARIANTS_MAX 16
/* Fewest keys per split: below this a split's fixed cost (its queries, its partial row) dominates. */
#define DECODE_MIN_SLICE 256
#define DECODE_MAX_SPLITS 64

struct decode_state {
    decode_variant variants[DECODE_VARIANTS_MAX];
    size_t count;
};

static unsigned pad_head(size_t d) { return (unsigned)((d + 15) / 16 * 16); }

/* Local memory of a variant: the queries, the tile's scores and weights, and the staged K and V. */
static cl_ulong local_bytes(const decode_variant *v)
{
    return sizeof(float) * ((cl_ulong)v->r_max * (v->dk + 2 * v->tile) +
                            (v->stage ? (cl_ulong)v->tile * (v->dk + v->dv) : 0));
}

/* CPUs: one work-item per group streams its keys in place, vectorised over the head dimension at the
 * native SIMD width (PoCL runs a work-item's vector code as written), 4 rows × 4 keys of dot products
 * at a time, the next tile prefetched (measured on PoCL, decode L=1..8: in place with prefetching
 * beat staging the tiles in local memory by 20–40%, and without prefetching the cores waited on each
 * row). GPUs: 64 work-items stage each tile with coalesced reads, share its scores and spread the
 * output columns over their lanes. Tiles, then rows per group, shrink until local memory holds them. */
enum { PREFETCH_NONE, PREFETCH_CORE, PREFETCH_CLANG };

/* How the CPU kernels prefetch on this implementation: Clang's builtin where it was seen to compile and
 * to help (PoCL: see choose_shape), OpenCL C's prefetch() anywhere else. A compiler that does not know
 * the builtin may not fail cleanly (rusticl's SPIR-V translator exits the process), so it is chosen by
 * name, never tried. */
static unsigned prefetch_mode(const device_caps *caps)
{
    return strstr(caps->platform, "Portable Computing Language") ? PREFETCH_CLANG : PREFETCH_CORE;
}

static void choose_shape(const clattn_context *ctx, decode_variant *v)
{
    const bool cpu = device_is_cpu(&ctx->caps) && !device_is_llvmpipe(&ctx->caps); /* (see device.h) */
    v->vec = device_vector_width(&ctx->caps);
    v->wg = cpu ? 1 : 64;
    while (v->wg > 1 && v->wg > ctx->caps.max_work_group)
        v->wg /= 2;
    v->kq = cpu ? 4 : 1;
    v->rb = cpu ? 4 : 1;
    v->stage = !cpu;
    v->prefetch = cpu ? prefetch_mode(&ctx->caps) : PREFETCH_NONE;
    v->tile = 32;
    v->r_max = 16;
    const unsigned smallest_tile = v->vec > v->kq ? v->vec : v->kq;
    while (v->tile > smallest_tile && local_bytes(v) > ctx->caps.local_mem)
        v->tile /= 2;
    while (v->r_max > 1 && local_bytes(v) > ctx->caps.local_mem)
        v->r_max /= 2;
}

static void variants_release(struct decode_state *d)
{
    for (size_t i = 0; i < d->count; i++)
        program_release(&d->variants[i].program, d->variants[i].kernels, 2);
    d->count = 0;
}

void decode_release(clattn_context *ctx)
{
    if (!ctx->decode)
        return;
    variants_release(ctx->decode);
    free(ctx->decode);
    ctx->decode = NULL;
}

static clattn_status variant_build(clattn_context *ctx, decode_variant *v)
{
    static const char *const files[] = {"masks.cl", "vec.cl", "decode.cl"};
    static const char *const names[] = {"clattn_decode_partial", "clattn_decode_combine"};
    char options[256], types[64];
    tensor_types_options(v->types, types, sizeof types);
    snprintf(options, sizeof options,
             "-cl-std=CL1.2 -cl-denorms-are-zero -DDK=%u -DDV=%u -DWG=%u -DVEC=%u -DKQ=%u -DRB=%u -DTILE=%u -DR_MAX=%u -DSTAGE=%d -DPREFETCH=%u%s",
             v->dk, v->dv, v->wg, v->vec, v->kq, v->rb, v->tile, v->r_max, v->stage, v->prefetch, types);
    return program_build_kernels(ctx, files, 3, options, names, 2, &v->program, v->kernels);
}

/* The kernels for head sizes (dk, dv), built on first use; a group size the device cannot launch
 * with this kernel (CL_KERNEL_WORK_GROUP_SIZE) makes it rebuild with a smaller one. */
static clattn_status decode_variant_get(clattn_context *ctx, size_t dk, size_t dv, tensor_types types,
                                        decode_variant **out)
{
    const unsigned pdk = pad_head(dk), pdv = pad_head(dv);
    if (!ctx->decode && !(ctx->decode = calloc(1, sizeof *ctx->decode)))
        return set_error(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "allocating the decode path's state");
    struct decode_state *d = ctx->decode;
    for (size_t i = 0; i < d->count; i++)
        if (d->variants[i].dk == pdk && d->variants[i].dv == pdv && tensor_types_equal(d->variants[i].types, types)) {
            *out = &d->variants[i];
            if (d->variants[i].failure != CLATTN_SUCCESS)
                return set_error(ctx, d->variants[i].failure,
                                 "the decode kernels for head sizes %u/%u did not build on this device earlier", pdk,
                                 pdv);
            return CLATTN_SUCCESS;
        }
    if (d->count == DECODE_VARIANTS_MAX) { /* many head sizes in one context: start over */
        clFinish(ctx->queue);
        variants_release(d);
    }
    decode_variant v = {pdk, pdv, 0, 0, 0, 0, 0, 0, false, PREFETCH_NONE, types, NULL, {NULL, NULL}, CLATTN_SUCCESS};
    choose_shape(ctx, &v);
    for (;;) {
        clattn_status st = variant_build(ctx, &v);
        if (st != CLATTN_SUCCESS && st != CLATTN_ERROR_OUT_OF_HOST_MEMORY && v.prefetch != PREFETCH_NONE) {
            /* a compiler, or a runtime, that refused the prefetch: build it without */
            clear_error(ctx);
            v.prefetch = PREFETCH_NONE;
            continue;
        }
        if (st == CLATTN_ERROR_BUILD_FAILED) { /* remember, so that later calls fall back at once */
            v.failure = st;
            d->variants[d->count++] = v;
        }
        if (st != CLATTN_SUCCESS)
            return st;
        size_t launchable;
        if ((st = kernel_group_limit(ctx, v.kernels[0], &launchable)) != CLATTN_SUCCESS) {
            program_release(&v.program, v.kernels, 2);
            return st;
        }
        if (launchable >= v.wg)
            break;
        program_release(&v.program, v.kernels, 2);
        if (launchable == 0)
            return set_error(ctx, CLATTN_ERROR_UNSUPPORTED_DEVICE, "the decode kernel cannot launch on %s",
                             ctx->caps.name);
        while (v.wg > launchable)
            v.wg /= 2;
    }
    d->variants[d->count] = v;
    *out = &d->variants[d->count++];
    return CLATTN_SUCCESS;
}

/* Splits of the keys: enough work-groups to keep every compute unit busy (four per unit, so uneven
 * slices even out), but at least DECODE_MIN_SLICE keys each. The keys are those any batch can see:
 * up to the longest key length when lengths are given (a cache's capacity beyond it is never read). */
static void plan_splits(const clattn_context *ctx, const sdpa_shape *s, const decode_variant *v, size_t *splits,
                        size_t *slice)
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
    const size_t target = 4 * (size_t)(ctx->caps.compute_units ? ctx->caps.compute_units : 1);
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

static clattn_status launch_partial(clattn_context *ctx, const sdpa_shape *s, const decode_variant *dv,
                                    const device_masks *masks, const decode_layout *lay, tensor_view q, tensor_view k,
                                    tensor_view v, const partial_target *t, size_t splits, size_t slice)
{
    kernel_args a = kernel_args_begin(dv->kernels[0]);
    karg_view(&a, q);
    karg_view(&a, k);
    karg_view(&a, v);
    karg_view(&a, t->out);
    karg_ulong(&a, t->out_split_stride);
    karg_mem(&a, t->lse);
    karg_ulong(&a, t->lse_split_stride);
    karg_sdpa_sizes(&a, s);
    karg_ulong(&a, slice);
    masks_kernel_args(&a, masks);
    karg_mem(&a, t->sinks);
    karg_mem(&a, lay->q_starts);
    karg_mem(&a, lay->k_starts);
    karg_mem(&a, t->o_starts);
    karg_mem(&a, lay->block_table);
    karg_ulong(&a, lay->table_cols);
    cl_uint shift = lay->block_shift;
    karg(&a, sizeof shift, &shift);
    karg_mem(&a, s->k_scales);
    karg_mem(&a, s->v_scales);
    const size_t row_groups = (s->q_len * s->group + dv->r_max - 1) / dv->r_max;
    const size_t local[2] = {dv->wg, 1};
    const size_t global[2] = {splits * row_groups * dv->wg, s->batch * s->kv_heads};
    return kernel_launch(ctx, &a, "decode partial", 2, global, local);
}

static clattn_status launch_combine(clattn_context *ctx, const sdpa_shape *s, const decode_variant *dv,
                                    cl_mem part_out, cl_mem part_lse, size_t splits, cl_mem sinks, tensor_view out,
                                    cl_mem lse, cl_mem o_starts)
{
    kernel_args a = kernel_args_begin(dv->kernels[1]);
    karg_mem(&a, part_out);
    karg_mem(&a, part_lse);
    karg_ulong(&a, splits);
    karg_ulong(&a, s->lse_elems);
    karg_ulong(&a, s->v_dim);
    karg_ulong(&a, s->heads);
    karg_ulong(&a, s->q_len);
    karg_mem(&a, sinks);
    karg_view(&a, out);
    karg_mem(&a, lse);
    karg_mem(&a, o_starts);
    const size_t global[2] = {s->v_dim, s->lse_elems};
    return kernel_launch_auto(ctx, &a, "decode combine", 2, global);
}

clattn_status decode_check_call(clattn_context *ctx, const sdpa_shape *s, const char *entry)
{
    if (s->algorithm != CLATTN_ALGORITHM_AUTO && s->algorithm != CLATTN_ALGORITHM_DECODE)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                         "%s runs the decode kernels: desc.algorithm must be AUTO or DECODE", entry);
    if (s->qk_dim > DECODE_MAX_HEAD || s->v_dim > DECODE_MAX_HEAD)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "%s takes head sizes up to %d", entry, DECODE_MAX_HEAD);
    if (s->softmax_double)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                         "%s runs the decode kernels, whose softmax is float32: desc.softmax_precision must be "
                         "CLATTN_SOFTMAX_FLOAT (the double softmax is the staged path's, through clattn_sdpa)",
                         entry);
    return CLATTN_SUCCESS;
}

clattn_status decode_run_layout(clattn_context *ctx, const sdpa_shape *s, const decode_layout *lay, tensor_view q,
                                tensor_view k, tensor_view v, cl_mem mask, tensor_view out, cl_mem lse)
{
    if (s->qk_dim > DECODE_MAX_HEAD || s->v_dim > DECODE_MAX_HEAD)
        return set_error(ctx, CLATTN_ERROR_UNSUPPORTED_DEVICE,
                         "the decode kernels support head sizes up to %d, not %zu", DECODE_MAX_HEAD,
                         s->qk_dim > s->v_dim ? s->qk_dim : s->v_dim);
    decode_variant *dv = NULL;
    device_masks masks;
    clattn_status st = decode_variant_get(ctx, s->qk_dim, s->v_dim, s->types, &dv);
    if (st != CLATTN_SUCCESS || (st = masks_upload(ctx, s, mask, &masks)) != CLATTN_SUCCESS)
        return st;
    size_t splits, slice;
    plan_splits(ctx, s, dv, &splits, &slice);
    /* One pass writes the final rows, when they are floats (the partial kernel writes floats; another
     * output type goes through the combine pass, which rounds into it). */
    if (splits == 1 && s->types.o == CLATTN_FLOAT32) {
        const partial_target final = {out, 0, lse, 0, masks.sinks, lay->q_starts};
        return launch_partial(ctx, s, dv, &masks, lay, q, k, v, &final, 1, slice);
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
    st = launch_partial(ctx, s, dv, &masks, lay, q, k, v, &parts, splits, slice);
    return st != CLATTN_SUCCESS ? st
                                : launch_combine(ctx, s, dv, part_out, part_lse, splits, masks.sinks, out, lse,
                                                 lay->q_starts);
}

clattn_status decode_run(clattn_context *ctx, const sdpa_shape *s, tensor_view q, tensor_view k, tensor_view v,
                         cl_mem mask, tensor_view out, cl_mem lse)
{
    const decode_layout dense = {NULL, NULL, NULL, 0, 0};
    return decode_run_layout(ctx, s, &dense, q, k, v, mask, out, lse);
}
