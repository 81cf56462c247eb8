/* Paged KV caches: K/V rows in blocks of a shared pool, found through a per-sequence block table
 * (clattn.h: clattn_paged_cache). Before anything reads or writes through the table, a kernel checks
 * every block id the call can reach and the call reads its verdict back; attention then runs the decode
 * kernels through the table, and appends write new rows through it (cl/convert.cl, in the pools' types). */

#include "context.h"
#include "convert.h"
#include "decode.h"
#include "error.h"
#include "fault.h"
#include "masks.h"
#include "paged.h"
#include "program.h"
#include "ragged.h"
#include "sdpa.h"
#include "validate.h"
#include "versioned.h"

#include <limits.h>
#include <stdlib.h>

/* The cache's fields against the shape s (batch, kv_heads, head sizes), without touching the device. */
clattn_status paged_cache_check(clattn_context *ctx, const clattn_paged_cache *given, const sdpa_shape *s,
                                 paged_shape *p)
{
    if (!given)
        return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "the paged cache is NULL");
    p->cache = (clattn_paged_cache)CLATTN_PAGED_CACHE_INIT;
    clattn_status st = versioned_copy(ctx, given, sizeof p->cache, sizeof p->cache, sizeof p->cache,
                                      "clattn_paged_cache", "CLATTN_PAGED_CACHE_INIT", &p->cache);
    if (st != CLATTN_SUCCESS)
        return st;
    const clattn_paged_cache *c = &p->cache;
    if (c->blocks == 0 || c->max_blocks == 0)
        return set_error(ctx, CLATTN_ERROR_ZERO_SIZE, "cache.%s is 0", c->blocks == 0 ? "blocks" : "max_blocks");
    if (c->block_size < 8 || c->block_size > 256 || (c->block_size & (c->block_size - 1)) != 0)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "cache.block_size = %zu is not a power of two from 8 to 256",
                         c->block_size);
    /* Ids are cl_int, and the check kernel names a bad entry by its index in the table. */
    if (c->blocks > INT_MAX || s->batch > (size_t)INT_MAX / c->max_blocks)
        return set_error(ctx, CLATTN_ERROR_EXCEEDS_DEVICE_LIMIT, "cache.%s: more than 2^31 − 1 %s",
                         c->blocks > INT_MAX ? "blocks" : "block_table", c->blocks > INT_MAX ? "blocks" : "entries");
    for (p->shift = 0; ((size_t)1 << p->shift) < c->block_size; p->shift++)
        ;
    if (!size_mul(c->max_blocks, c->block_size, &p->capacity) ||
        !size_product(&p->k_pool_elems, 4, c->blocks, s->kv_heads, c->block_size, s->qk_dim) ||
        !size_product(&p->v_pool_elems, 4, c->blocks, s->kv_heads, c->block_size, s->v_dim))
        return set_error(ctx, CLATTN_ERROR_SIZE_OVERFLOW, "the paged cache's sizes overflow");
    /* A token format's groups of 32 rows fit whole in a block (a smaller block would never quantise). */
    const dtype_format *fk = dtype_format_of(s->types.k), *fv = dtype_format_of(s->types.v);
    const unsigned tokens = fk->tokens > fv->tokens ? fk->tokens : fv->tokens;
    if (c->block_size < tokens)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                         "cache.block_size = %zu holds no whole group of %s (%u rows): blocks of %u rows or more", c->block_size,
                         clattn_dtype_name(fk->tokens ? s->types.k : s->types.v), tokens, tokens);
    /* The pools are in desc.k_dtype and v_dtype, a block's head a token format's chunk; an int8 pool's
     * scales have a row each. */
    const size_t pool_heads = c->blocks * s->kv_heads; /* (within p->k_pool_elems, checked above) */
    if ((st = check_kv_tensor(ctx, c->k_pool, s->types.k, pool_heads, c->block_size, s->qk_dim, "cache.k_pool")) !=
            CLATTN_SUCCESS ||
        (!s->v_in_k &&
         (st = check_kv_tensor(ctx, c->v_pool, s->types.v, pool_heads, c->block_size, s->v_dim, "cache.v_pool")) !=
             CLATTN_SUCCESS) ||
        (st = check_scales(ctx, s, p->k_pool_elems / s->qk_dim, p->v_pool_elems / s->v_dim)) != CLATTN_SUCCESS ||
        (st = check_buffer(ctx, c->block_table, s->batch * c->max_blocks, sizeof(cl_int), "cache.block_table")) !=
            CLATTN_SUCCESS)
        return st;
    return CLATTN_SUCCESS;
}

clattn_status paged_latent_resolve(clattn_context *ctx, const clattn_paged_cache *cache, sdpa_shape *s, const char *who)
{
    if (!cache)
        return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "the paged cache is NULL");
    /* (read before paged_cache_check's struct_size rule, which refuses a struct too small to hold v_pool) */
    return cache->struct_size < sizeof *cache || cache->v_pool ? CLATTN_SUCCESS : latent_resolve(ctx, s, who);
}

/* lengths[b] + extra must stay within the table's reach. */
clattn_status paged_lengths_check(clattn_context *ctx, const size_t *lengths, size_t batch, size_t extra,
                                   const paged_shape *p)
{
    if (!lengths)
        return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "lengths is NULL");
    for (size_t b = 0; b < batch; b++)
        if (lengths[b] > p->capacity || extra > p->capacity - lengths[b])
            return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                             "lengths[%zu] = %zu%s passes the table's reach, max_blocks · block_size = %zu", b,
                             lengths[b], extra ? " plus the new rows" : "", p->capacity);
    return CLATTN_SUCCESS;
}

/* Upload the lengths, and check on the device every block id that rows [0, lengths[b] + extra) of each
 * sequence reach; the verdict is read back (a blocking read) before anything else runs. */
clattn_status paged_ids_check(clattn_context *ctx, const paged_shape *p, size_t batch, const size_t *lengths,
                               size_t extra, cl_mem *lengths_buf)
{
    cl_mem flag;
    const cl_int none = INT_MAX;
    const family_build *fb;
    clattn_status st = program_get(ctx, &family_paged_check, "", 0, 0, NULL, &fb);
    if (st == CLATTN_SUCCESS)
        st = scratch_upload_integers(ctx, SCRATCH_PAGED_LENGTHS, lengths, NULL, batch, "lengths", lengths_buf);
    if (st == CLATTN_SUCCESS)
        st = scratch_upload(ctx, SCRATCH_PAGED_FLAG, &none, sizeof none, "the block-id check's flag", &flag);
    if (st != CLATTN_SUCCESS)
        return st;
    const paged_check_params params = {p->cache.block_table, p->cache.max_blocks, batch, *lengths_buf, extra,
                                       p->shift,             p->cache.blocks,     flag};
    kernel_args a = kernel_args_begin(fb->kernels[0]);
    params_bind(&a, &params_paged_check, &params, fb->features);
    const size_t global[2] = {p->cache.max_blocks, batch};
    if ((st = kernel_launch_auto(ctx, &a, "paged block-id check", 2, global)) != CLATTN_SUCCESS)
        return st;
    cl_int bad = none, id = 0;
    cl_int err = INJECT_FAULT(CL_OUT_OF_RESOURCES);
    if (err == CL_SUCCESS)
        err = clEnqueueReadBuffer(ctx->queue, flag, CL_TRUE, 0, sizeof bad, &bad, 0, NULL, NULL);
    if (err == CL_SUCCESS && bad != none) /* what the offending entry holds, for the message */
        err = clEnqueueReadBuffer(ctx->queue, p->cache.block_table, CL_TRUE, (size_t)bad * sizeof id, sizeof id, &id,
                                  0, NULL, NULL);
    if (err != CL_SUCCESS)
        return cl_error(ctx, err, "reading the block-id check back");
    if (bad != none)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                         "cache.block_table[%zu][%zu] = %d is not a block of the pool (0 … %zu)",
                         (size_t)bad / p->cache.max_blocks, (size_t)bad % p->cache.max_blocks, (int)id,
                         p->cache.blocks - 1);
    return CLATTN_SUCCESS;
}

/* Attention through the table: q (B, H, L, Dqk) and out (B, H, L, Dv), or with q_starts each sequence's own
 * rows, packed (rows, H, ·). `who` names the entry point in messages. */
static clattn_status paged_attend(clattn_context *ctx, const clattn_sdpa_desc *desc, const clattn_paged_cache *cache,
                                  const size_t *lengths, const size_t *q_starts, cl_mem q, cl_mem mask, cl_mem out,
                                  cl_mem lse, const char *who)
{
    clattn_status st = check_context(ctx);
    clattn_sdpa_desc d;
    sdpa_shape s;
    paged_shape p;
    if (st != CLATTN_SUCCESS || (st = sdpa_desc_read(ctx, desc, &d)) != CLATTN_SUCCESS)
        return st;
    size_t rows = 0, longest = 0; /* (q_starts: the packed rows, and the longest sequence's) */
    if (q_starts) {
        if (d.batch == 0)
            return set_error(ctx, CLATTN_ERROR_ZERO_SIZE, "desc.batch is 0");
        if ((st = ragged_check_starts(ctx, q_starts, d.batch, "q_starts", &longest)) != CLATTN_SUCCESS ||
            (st = ragged_resolve_len(ctx, &d.q_len, longest, "q_len")) != CLATTN_SUCCESS)
            return st;
        rows = q_starts[d.batch];
    }
    /* The shape before the table is known: kv_len 0 stands for the table's reach, checked below. */
    const size_t kv_len = d.kv_len;
    d.kv_len = 1;
    if ((st = sdpa_shape_resolve(ctx, &d, &s)) != CLATTN_SUCCESS ||
        (st = paged_latent_resolve(ctx, cache, &s, who)) != CLATTN_SUCCESS ||
        (st = paged_cache_check(ctx, cache, &s, &p)) != CLATTN_SUCCESS)
        return st;
    if (kv_len != 0 && kv_len != p.capacity)
        return set_error(ctx, CLATTN_ERROR_SHAPE_MISMATCH,
                         "desc.kv_len = %zu must be 0 or the table's reach, max_blocks · block_size = %zu", kv_len,
                         p.capacity);
    d.kv_len = p.capacity;
    if ((st = sdpa_shape_resolve(ctx, &d, &s)) == CLATTN_SUCCESS &&
        (st = paged_latent_resolve(ctx, cache, &s, who)) == CLATTN_SUCCESS) /* (a token format's chunk: a block's) */
        s.types.k_chunk.rows = s.types.v_chunk.rows = p.cache.block_size;
    s.q_starts = q_starts; /* (a tree's parents follow the packed rows) */
    if (st != CLATTN_SUCCESS ||
        (st = masks_resolve(ctx, d.masks, mask != NULL, &s)) != CLATTN_SUCCESS ||
        (st = paged_lengths_check(ctx, lengths, s.batch, 0, &p)) != CLATTN_SUCCESS)
        return st;
    if ((st = decode_check_call(ctx, &s, who)) != CLATTN_SUCCESS)
        return st;
    size_t q_elems = s.q_elems, out_elems = s.out_elems, lse_elems = s.lse_elems;
    if (q_starts && (!size_product(&q_elems, 3, rows, s.heads, s.qk_dim) ||
                     !size_product(&out_elems, 3, rows, s.heads, s.v_dim) || !size_product(&lse_elems, 2, rows, s.heads)))
        return set_error(ctx, CLATTN_ERROR_SIZE_OVERFLOW, "%s: %zu query rows overflow", who, rows);
    if ((st = check_tensor(ctx, q, q_elems, s.types.q, "q")) != CLATTN_SUCCESS ||
        (mask && (st = check_buffer(ctx, mask, s.mask_elems, s.mask_elem_size, "mask")) != CLATTN_SUCCESS) ||
        (st = check_tensor(ctx, out, out_elems, s.types.o, "out")) != CLATTN_SUCCESS ||
        (lse && (st = check_buffer(ctx, lse, lse_elems, sizeof(float), "lse")) != CLATTN_SUCCESS))
        return st;
    long long *offsets = malloc(s.batch * sizeof *offsets);
    size_t *queries = q_starts ? malloc(s.batch * sizeof *queries) : NULL;
    if (!offsets || (q_starts && !queries)) {
        free(offsets);
        return set_error(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "%s: %zu sequences", who, s.batch);
    }
    for (size_t b = 0; q_starts && b < s.batch; b++)
        queries[b] = q_starts[b + 1] - q_starts[b];
    cl_mem lengths_buf;
    kv_layout lay = {NULL, NULL, p.cache.block_table, p.cache.max_blocks, p.shift, q_starts, 0, 0};
    st = masks_per_sequence(ctx, &s, lengths, queries, offsets, "the lengths");
    if (st == CLATTN_SUCCESS && q_starts)
        st = scratch_upload_integers(ctx, SCRATCH_Q_STARTS, q_starts, NULL, s.batch + 1, "q_starts", &lay.q_starts);
    if (st == CLATTN_SUCCESS)
        st = paged_ids_check(ctx, &p, s.batch, lengths, 0, &lengths_buf);
    if (st == CLATTN_SUCCESS) {
        /* The pool as the decode kernels read it: the "batch" stride is a block's. Packed queries: (rows, H, ·),
         * their batch stride unused (the starts give each sequence's rows). */
        const size_t bs = p.cache.block_size;
        const tensor_view kv = {p.cache.k_pool, s.kv_heads * bs * s.qk_dim, bs * s.qk_dim, s.qk_dim};
        const tensor_view vv = s.v_in_k ? kv /* (MLA's latent form: K's rows) */
                                        : (tensor_view){p.cache.v_pool, s.kv_heads * bs * s.v_dim, bs * s.v_dim, s.v_dim};
        const tensor_view qv = q_starts ? (tensor_view){q, 0, s.qk_dim, s.heads * s.qk_dim}
                                        : view_bhld(q, s.heads, s.q_len, s.qk_dim);
        const tensor_view ov = q_starts ? (tensor_view){out, 0, s.v_dim, s.heads * s.v_dim}
                                        : view_bhld(out, s.heads, s.q_len, s.v_dim);
        st = sdpa_run_layout(ctx, &s, &lay, qv, kv, vv, mask, ov, lse);
    }
    free(offsets);
    free(queries);
    return st;
}

clattn_status clattn_sdpa_paged(clattn_context *ctx, const clattn_sdpa_desc *desc, const clattn_paged_cache *cache,
                                const size_t *lengths, cl_mem q, cl_mem mask, cl_mem out, cl_mem lse)
{
    return paged_attend(ctx, desc, cache, lengths, NULL, q, mask, out, lse, "clattn_sdpa_paged");
}

clattn_status clattn_sdpa_paged_ragged(clattn_context *ctx, const clattn_sdpa_desc *desc,
                                       const clattn_paged_cache *cache, const size_t *lengths, const size_t *q_starts,
                                       cl_mem q, cl_mem mask, cl_mem out, cl_mem lse)
{
    if (!q_starts)
        return set_error(check_context(ctx) == CLATTN_SUCCESS ? ctx : NULL, CLATTN_ERROR_NULL_ARGUMENT,
                         "clattn_sdpa_paged_ragged: q_starts is NULL");
    return paged_attend(ctx, desc, cache, lengths, q_starts, q, mask, out, lse, "clattn_sdpa_paged_ragged");
}

/* New rows (in q_dtype) through the table into a pool (in its type; int8 quantised with its scales). */
static clattn_status append_launch(clattn_context *ctx, const paged_shape *p, const sdpa_shape *s, size_t new_len,
                                   cl_mem rows, size_t dim, cl_mem pool, clattn_dtype type, cl_mem scales,
                                   cl_mem lengths_buf)
{
    const append_target t = {pool, scales, type, 0, p->cache.block_table, p->cache.max_blocks, p->shift};
    return append_rows(ctx, rows, s->types.q, s->batch, s->kv_heads, new_len, dim, &t, lengths_buf);
}

clattn_status clattn_kv_append_paged(clattn_context *ctx, const clattn_sdpa_desc *desc, const clattn_paged_cache *cache,
                                     const size_t *lengths, size_t new_len, cl_mem k_new, cl_mem v_new)
{
    clattn_status st = check_context(ctx);
    clattn_sdpa_desc d;
    sdpa_shape s;
    paged_shape p;
    if (st != CLATTN_SUCCESS || (st = sdpa_desc_read(ctx, desc, &d)) != CLATTN_SUCCESS)
        return st;
    if (new_len == 0)
        return set_error(ctx, CLATTN_ERROR_ZERO_SIZE, "clattn_kv_append_paged: new_len is 0");
    d.q_len = 1; /* no queries here; the new rows are the "keys" of the shape */
    d.kv_len = new_len;
    if ((st = sdpa_shape_resolve(ctx, &d, &s)) != CLATTN_SUCCESS ||
        (st = paged_latent_resolve(ctx, cache, &s, "clattn_kv_append_paged")) != CLATTN_SUCCESS ||
        (st = paged_cache_check(ctx, cache, &s, &p)) != CLATTN_SUCCESS ||
        (st = paged_lengths_check(ctx, lengths, s.batch, new_len, &p)) != CLATTN_SUCCESS ||
        (st = check_tensor(ctx, k_new, s.k_elems, s.types.q, "k_new")) != CLATTN_SUCCESS ||
        (!s.v_in_k && (st = check_tensor(ctx, v_new, s.v_elems, s.types.q, "v_new")) != CLATTN_SUCCESS))
        return st;
    if (s.v_in_k && v_new) /* (MLA's latent form: the new latent rows are k_new's, values included) */
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                         "clattn_kv_append_paged: a pool without v_pool (MLA's latent form) takes its new rows in "
                         "k_new alone: v_new must be NULL");
    if (k_new == p.cache.k_pool || (!s.v_in_k && (k_new == p.cache.v_pool || v_new == p.cache.k_pool ||
                                                  v_new == p.cache.v_pool || p.cache.k_pool == p.cache.v_pool)))
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                         "clattn_kv_append_paged: the new rows and the pools must be different buffers");
    cl_mem lengths_buf;
    if ((st = paged_ids_check(ctx, &p, s.batch, lengths, new_len, &lengths_buf)) != CLATTN_SUCCESS ||
        (st = append_launch(ctx, &p, &s, new_len, k_new, s.qk_dim, p.cache.k_pool, s.types.k, s.k_scales,
                            lengths_buf)) != CLATTN_SUCCESS || s.v_in_k)
        return st;
    return append_launch(ctx, &p, &s, new_len, v_new, s.v_dim, p.cache.v_pool, s.types.v, s.v_scales, lengths_buf);
}
