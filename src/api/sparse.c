/* clattn_sdpa_sparse: top-k sparse attention, each query row over the keys its indices select, on a dense
 * K/V or a paged pool (cl/sparse.cl: one work-group per query row and K/V head, the cost the selected keys'). */
#include "context.h"
#include "decode.h"
#include "error.h"
#include "launch.h"
#include "masks.h"
#include "paged.h"
#include "program.h"
#include "reproducible.h"
#include "scratch.h"
#include "sparse.h"
#include "tuning.h"
#include "validate.h"

#include <limits.h>
#include <stdio.h>

#define SPARSE_MAX_GROUP 32     /* query heads a K/V head */
#define SPARSE_SLICE 128        /* selected keys a work-item walks (at most; more slices for longer selections) */
#define SPARSE_MAX_SPLITS 64
#define SPARSE_MAX_PRIVATE 4096 /* floats of a work-item's query rows (and as many of its sums) */

/* What a sparse call takes besides the shape: the indices are its mask, so none of the others. */
static clattn_status options_check(clattn_context *ctx, const char *api, const clattn_sdpa_desc *d)
{
    const char *bad = d->masks ? "desc.masks" : d->alibi_slopes ? "desc.alibi_slopes"
                      : d->logit_scale ? "desc.logit_scale" : d->mods ? "desc.mods"
                      : d->block_mask ? "desc.block_mask"
                      : d->weights_output != CLATTN_WEIGHTS_SOFTMAX ? "desc.weights_output"
                      : d->softmax_precision != CLATTN_SOFTMAX_FLOAT ? "desc.softmax_precision"
                      : d->origin_batch || d->origin_position ? "desc.origin_batch / origin_position" : NULL;
    if (bad)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "%s does not take %s (the indices are its mask)", api,
                         bad);
    const clattn_dtype types[4] = {d->q_dtype, d->k_dtype, d->v_dtype, d->out_dtype};
    static const char *const names[4] = {"q_dtype", "k_dtype", "v_dtype", "out_dtype"};
    for (int t = 0; t < 4; t++)
        if (types[t] != CLATTN_FLOAT32 && types[t] != CLATTN_FLOAT16 && types[t] != CLATTN_BFLOAT16)
            return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "%s: desc.%s is %s; it takes float32, "
                             "float16 and bfloat16", api, names[t], clattn_dtype_name(types[t]));
    return CLATTN_SUCCESS;
}

static unsigned round16(size_t d) { return (unsigned)((d + 15) / 16 * 16); }

clattn_status sparse_vector_width(clattn_context *ctx, const sdpa_shape *s, unsigned *vec)
{
    tuning_values t;
    const clattn_status st = tuning_lookup(ctx, TUNING_DECODE, &t, NULL);
    *vec = st == CLATTN_SUCCESS ? t.v[4] : 1;
    while (*vec > 1 && (s->qk_dim % *vec != 0 || s->v_dim % *vec != 0))
        *vec /= 2;
    return st;
}

/* The call's shape, with a paged cache's facts in *p (NULL cache: dense, p untouched). */
static clattn_status shape_check(clattn_context *ctx, const char *api, const clattn_sdpa_desc *desc,
                                 const clattn_paged_cache *cache, cl_mem k, cl_mem v, sdpa_shape *s, paged_shape *p)
{
    clattn_sdpa_desc d;
    clattn_status st = sdpa_desc_read(ctx, desc, &d);
    if (st != CLATTN_SUCCESS || (st = options_check(ctx, api, &d)) != CLATTN_SUCCESS)
        return st;
    if (cache) {
        if (k || v)
            return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "%s: k and v are NULL with a paged cache (its pools "
                             "hold them)", api);
        const size_t kv_len = d.kv_len;
        d.kv_len = 1; /* (the table's reach, known once the cache is read) */
        if ((st = sdpa_shape_resolve(ctx, &d, s)) != CLATTN_SUCCESS || (st = paged_cache_check(ctx, cache, s, p)) != CLATTN_SUCCESS)
            return st;
        if (kv_len != 0 && kv_len != p->capacity)
            return set_error(ctx, CLATTN_ERROR_SHAPE_MISMATCH, "desc.kv_len = %zu must be 0 or the table's reach, "
                             "max_blocks · block_size = %zu", kv_len, p->capacity);
        d.kv_len = p->capacity;
    }
    if ((st = sdpa_shape_resolve(ctx, &d, s)) != CLATTN_SUCCESS)
        return st;
    if (s->group > SPARSE_MAX_GROUP || s->group * round16(s->qk_dim) > SPARSE_MAX_PRIVATE ||
        s->group * round16(s->v_dim) > SPARSE_MAX_PRIVATE)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "%s: %zu query heads a K/V head of %zu values each; it "
                         "takes up to %d heads and %d values in all", api, s->group, s->qk_dim,
                         SPARSE_MAX_GROUP, SPARSE_MAX_PRIVATE);
    if (reproducible_call(ctx, s))
        return reproducible_refused(ctx, "top-k sparse attention");
    return masks_resolve(ctx, NULL, false, s);
}

clattn_status sparse_call_check(clattn_context *ctx, const char *api, const clattn_sdpa_desc *desc, size_t top_k,
                                cl_mem indices, const clattn_paged_cache *cache, cl_mem k, cl_mem v,
                                const size_t *lengths, sdpa_shape *s, paged_shape *p)
{
    clattn_status st = shape_check(ctx, api, desc, cache, k, v, s, p);
    if (st != CLATTN_SUCCESS)
        return st;
    if (top_k == 0)
        return set_error(ctx, CLATTN_ERROR_ZERO_SIZE, "%s: top_k is 0", api);
    size_t n_indices;
    if (!size_product(&n_indices, 3, s->batch, s->q_len, top_k) || top_k > (size_t)INT_MAX)
        return set_error(ctx, CLATTN_ERROR_SIZE_OVERFLOW, "%s: %zu x %zu rows of %zu indices", api, s->batch,
                         s->q_len, top_k);
    if (cache && !lengths)
        return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "%s: lengths is NULL (a paged cache needs them)", api);
    for (size_t b = 0; !cache && lengths && b < s->batch; b++)
        if (lengths[b] > s->kv_len)
            return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "lengths[%zu] = %zu passes desc.kv_len = %zu", b,
                             lengths[b], s->kv_len);
    return check_buffer(ctx, indices, n_indices, sizeof(cl_int), "indices");
}

clattn_status clattn_sdpa_sparse(clattn_context *ctx, const clattn_sdpa_desc *desc, size_t top_k, cl_mem indices,
                                 cl_mem q, cl_mem k, cl_mem v, const clattn_paged_cache *cache, const size_t *lengths,
                                 cl_mem out, cl_mem lse)
{
    clattn_status st = check_context(ctx);
    sdpa_shape s;
    paged_shape p;
    if (st != CLATTN_SUCCESS ||
        (st = sparse_call_check(ctx, "clattn_sdpa_sparse", desc, top_k, indices, cache, k, v, lengths, &s, &p)) !=
            CLATTN_SUCCESS)
        return st;
    if ((st = check_tensor(ctx, q, s.q_elems, s.types.q, "q")) != CLATTN_SUCCESS ||
        (!cache && (st = check_tensor(ctx, k, s.k_elems, s.types.k, "k")) != CLATTN_SUCCESS) ||
        (!cache && (st = check_tensor(ctx, v, s.v_elems, s.types.v, "v")) != CLATTN_SUCCESS) ||
        (st = check_tensor(ctx, out, s.out_elems, s.types.o, "out")) != CLATTN_SUCCESS ||
        (lse && (st = check_buffer(ctx, lse, s.lse_elems, sizeof(float), "lse")) != CLATTN_SUCCESS) ||
        (cache && (st = paged_lengths_check(ctx, lengths, s.batch, 0, &p)) != CLATTN_SUCCESS))
        return st;
    /* The lengths (a paged call's after its block ids are checked) and the sinks, then the kernel. */
    cl_mem lengths_buf = NULL;
    device_masks masks;
    if (cache)
        st = paged_ids_check(ctx, &p, s.batch, lengths, 0, &lengths_buf);
    else if (lengths)
        st = scratch_upload_integers(ctx, SCRATCH_KEY_LENGTHS, lengths, NULL, s.batch, "lengths", &lengths_buf);
    if (st != CLATTN_SUCCESS || (st = masks_upload(ctx, &s, NULL, &masks)) != CLATTN_SUCCESS)
        return st;
    unsigned vec;
    if ((st = sparse_vector_width(ctx, &s, &vec)) != CLATTN_SUCCESS)
        return st;
    char options[TYPES_OPTIONS_MAX + 128], types[TYPES_OPTIONS_MAX];
    tensor_types_options(s.types, types, sizeof types);
    snprintf(options, sizeof options, "-DROWS=%zu -DVEC=%u -DDK=%zu -DDV=%zu -DPREFETCH=%u%s", s.group, vec, s.qk_dim,
             s.v_dim, device_prefetch_mode(&ctx->caps), types);
    const family_build *fb;
    if ((st = program_get(ctx, &family_sparse, options, 0, 0, NULL, &fb)) != CLATTN_SUCCESS)
        return st;
    /* The selected keys in slices of SPARSE_SLICE, each walked by a work-item of its own, then merged. */
    size_t splits = (top_k + SPARSE_SLICE - 1) / SPARSE_SLICE;
    splits = splits > SPARSE_MAX_SPLITS ? SPARSE_MAX_SPLITS : splits;
    cl_mem part_out = NULL, part_lse = NULL;
    if (splits > 1 &&
        ((st = scratch_get(ctx, SCRATCH_PARTIAL_OUT, splits * s.out_elems * sizeof(float), &part_out)) != CLATTN_SUCCESS ||
         (st = scratch_get(ctx, SCRATCH_PARTIAL_LSE, splits * s.lse_elems * sizeof(float), &part_lse)) != CLATTN_SUCCESS))
        return st;
    const sparse_params params = {q, cache ? p.cache.k_pool : k, cache ? p.cache.v_pool : v, indices, out, lse,
                                  masks.sinks, lengths_buf, cache ? p.cache.block_table : NULL,
                                  cache ? p.cache.max_blocks : 0, cache ? p.shift : 0, s.batch, s.heads, s.q_len,
                                  s.kv_len, top_k, s.qk_dim, s.v_dim, s.scale, s.desc.softcap, splits, part_out,
                                  part_lse};
    kernel_args a = kernel_args_begin(fb->kernels[0]);
    params_bind(&a, &params_sparse, &params, fb->features);
    const size_t global[1] = {splits * s.batch * s.q_len * s.kv_heads}; /* (a slice of a query row and K/V head) */
    if ((st = kernel_launch_auto(ctx, &a, "sparse attention", 1, global)) != CLATTN_SUCCESS || splits == 1)
        return st;
    const sparse_combine_params merge = {part_out, part_lse, splits, s.lse_elems, s.v_dim, s.heads, s.q_len,
                                         masks.sinks, out, lse};
    kernel_args c = kernel_args_begin(fb->kernels[1]);
    params_bind(&c, &params_sparse_combine, &merge, fb->features);
    const size_t rows[2] = {s.v_dim, s.lse_elems};
    return kernel_launch_auto(ctx, &c, "sparse combine", 2, rows);
}
