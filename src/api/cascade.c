/* clattn_sdpa_cascade: attention over paged caches whose sequences share prefixes (a system prompt, a
 * few-shot block, a forked beam), each prefix read once for every sequence that shares it.
 *
 * Per level, each group's prefix is one attention problem: the queries of all its sequences, gathered into
 * one row block per head (H, n·L, D), against the prefix's blocks through a one-row block table — the
 * prefix's K/V streamed once for all n sequences, a GEMM-shaped problem where n decode calls would each
 * read it. The results are scattered back into a part (B, H, L, Dv) with its log-sum-exp; each sequence's
 * own rows are one more part (clattn_sdpa_paged over the cache's table), and the parts are merged by their
 * log-sum-exps (clattn_merge, which also counts the sinks). The gathers and scatters are rectangular buffer
 * copies (one a sequence: a sequence's rows of every head at once). */

#include "context.h"
#include "error.h"
#include "validate.h"
#include "reproducible.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CASCADE_MAX_LEVELS 8

/* A call's temporaries, released together (the runtime keeps a buffer alive for the work queued on it). */
typedef struct cascade_buffers {
    cl_mem outs[CASCADE_MAX_LEVELS + 1], lses[CASCADE_MAX_LEVELS + 1];
    cl_mem gathered_q, group_out, group_lse, table, final_lse;
} cascade_buffers;

static void buffers_release(cascade_buffers *t)
{
    cl_mem *all = (cl_mem *)t;
    for (size_t i = 0; i < sizeof *t / sizeof(cl_mem); i++)
        if (all[i])
            clReleaseMemObject(all[i]);
}

static clattn_status make_buffer(clattn_context *ctx, size_t bytes, const char *what, cl_mem *out)
{
    cl_int err;
    *out = clCreateBuffer(ctx->context, CL_MEM_READ_WRITE, bytes ? bytes : 1, NULL, &err);
    return err == CL_SUCCESS ? CLATTN_SUCCESS : cl_error(ctx, err, what);
}

/* The options a cascade takes: the scale, soft-capping, logit scales, sinks (counted once, in the merge), a
 * bottom-right causal mask (within each sequence's own rows: every query sees all of its prefixes) and the
 * pools' storage types; float32 queries and outputs. Anything that needs a key's absolute position or a
 * per-call mask is refused, naming it. */
static clattn_status options_check(clattn_context *ctx, const clattn_sdpa_desc *d)
{
    const clattn_masks *m = d->masks;
    const char *bad = d->alibi_slopes ? "desc.alibi_slopes" : d->mods ? "desc.mods" : d->block_mask ? "desc.block_mask"
                      : d->weights_output != CLATTN_WEIGHTS_SOFTMAX ? "desc.weights_output"
                      : d->origin_batch || d->origin_position ? "desc.origin_batch / origin_position"
                      : !m ? NULL
                      : m->causal != CLATTN_CAUSAL_NONE && m->causal != CLATTN_CAUSAL_BOTTOM_RIGHT ? "masks.causal (top-left)"
                      : m->key_lengths ? "masks.key_lengths" : m->query_offsets ? "masks.query_offsets"
                      : m->window ? "masks.window" : m->additive != CLATTN_MASK_NONE ? "masks.additive"
                      : m->tree_parents ? "masks.tree_parents" : NULL;
    if (bad)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "clattn_sdpa_cascade does not take %s", bad);
    if (d->q_dtype != CLATTN_FLOAT32 || d->out_dtype != CLATTN_FLOAT32)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "clattn_sdpa_cascade: q and out are float32");
    return CLATTN_SUCCESS;
}

/* Each level's fields: groups, every sequence's group, each group's prefix within its blocks and the pool. */
static clattn_status levels_check(clattn_context *ctx, const clattn_cascade_level *levels, size_t n_levels,
                                  size_t batch, const clattn_paged_cache *cache)
{
    if (n_levels > CASCADE_MAX_LEVELS)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "clattn_sdpa_cascade: %zu levels (at most %d)", n_levels,
                         CASCADE_MAX_LEVELS);
    if (n_levels && !levels)
        return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "clattn_sdpa_cascade: levels is NULL");
    for (size_t l = 0; l < n_levels; l++) {
        const clattn_cascade_level *lv = &levels[l];
        if (!lv->group_of || !lv->blocks || !lv->lengths)
            return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "levels[%zu].%s is NULL", l,
                             !lv->group_of ? "group_of" : !lv->blocks ? "blocks" : "lengths");
        if (lv->groups == 0 || lv->max_blocks == 0)
            return set_error(ctx, CLATTN_ERROR_ZERO_SIZE, "levels[%zu].%s is 0", l, lv->groups ? "max_blocks" : "groups");
        for (size_t b = 0; b < batch; b++)
            if (lv->group_of[b] >= lv->groups)
                return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "levels[%zu].group_of[%zu] = %zu is not a group (0 … %zu)",
                                 l, b, lv->group_of[b], lv->groups - 1);
        for (size_t g = 0; g < lv->groups; g++) {
            if (lv->max_blocks > SIZE_MAX / cache->block_size || lv->lengths[g] > lv->max_blocks * cache->block_size)
                return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                                 "levels[%zu].lengths[%zu] = %zu passes its blocks' reach, max_blocks · block_size", l, g,
                                 lv->lengths[g]);
            for (size_t j = 0; j * cache->block_size < lv->lengths[g]; j++) {
                const cl_int id = lv->blocks[g * lv->max_blocks + j];
                if (id < 0 || (size_t)id >= cache->blocks)
                    return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                                     "levels[%zu].blocks[%zu][%zu] = %d is not a block of the pool (0 … %zu)", l, g, j,
                                     (int)id, cache->blocks - 1);
            }
        }
    }
    return CLATTN_SUCCESS;
}

/* Rows of sequence b (every head's L rows of `row` bytes) between its place in a (B, H, L, ·) tensor and
 * slot i of a group's (H, n·L, ·) block: gather (to_group) or scatter. */
static clattn_status move_rows(clattn_context *ctx, cl_mem batch_major, cl_mem group_major, size_t b, size_t i, size_t n,
                               size_t heads, size_t row_bytes, int to_group)
{
    const size_t batch_origin[3] = {b * heads * row_bytes, 0, 0}, group_origin[3] = {i * row_bytes, 0, 0};
    const size_t region[3] = {row_bytes, heads, 1};
    const cl_int err = to_group ? clEnqueueCopyBufferRect(ctx->queue, batch_major, group_major, batch_origin, group_origin,
                                                          region, row_bytes, 0, n * row_bytes, 0, 0, NULL, NULL)
                                : clEnqueueCopyBufferRect(ctx->queue, group_major, batch_major, group_origin, batch_origin,
                                                          region, n * row_bytes, 0, row_bytes, 0, 0, NULL, NULL);
    return err == CL_SUCCESS ? CLATTN_SUCCESS : cl_error(ctx, err, to_group ? "gathering a group's queries" : "scattering a group's results");
}

/* One group's prefix: its sequences' queries against the prefix's blocks, into part (out, lse). */
static clattn_status group_run(clattn_context *ctx, const clattn_sdpa_desc *d, const clattn_paged_cache *cache,
                               const clattn_cascade_level *lv, size_t g, cl_mem q, cl_mem out, cl_mem lse,
                               cascade_buffers *t)
{
    size_t n = 0;
    for (size_t b = 0; b < d->batch; b++)
        n += lv->group_of[b] == g;
    if (n == 0 || lv->lengths[g] == 0) /* (its part keeps lse −inf: nothing to add) */
        return CLATTN_SUCCESS;
    const size_t q_row = d->q_len * d->qk_dim * sizeof(float), o_row = d->q_len * d->v_dim * sizeof(float),
                 l_row = d->q_len * sizeof(float);
    clattn_status st = CLATTN_SUCCESS;
    for (size_t b = 0, i = 0; b < d->batch && st == CLATTN_SUCCESS; b++)
        if (lv->group_of[b] == g)
            st = move_rows(ctx, q, t->gathered_q, b, i++, n, d->heads, q_row, 1);
    cl_int err = st == CLATTN_SUCCESS ? clEnqueueWriteBuffer(ctx->queue, t->table, CL_TRUE, 0, lv->max_blocks * sizeof(cl_int),
                                                            lv->blocks + g * lv->max_blocks, 0, NULL, NULL)
                                      : CL_SUCCESS;
    if (err != CL_SUCCESS)
        return cl_error(ctx, err, "writing a prefix's block table");
    if (st != CLATTN_SUCCESS)
        return st;
    clattn_sdpa_desc gd = *d; /* one "sequence" of n·L query rows, which all see the whole prefix */
    gd.batch = 1, gd.q_len = n * d->q_len, gd.kv_len = 0, gd.masks = NULL, gd.sinks = NULL;
    clattn_paged_cache prefix = *cache;
    prefix.block_table = t->table, prefix.max_blocks = lv->max_blocks;
    if ((st = clattn_sdpa_paged(ctx, &gd, &prefix, &lv->lengths[g], t->gathered_q, NULL, t->group_out, t->group_lse)) !=
        CLATTN_SUCCESS)
        return st;
    for (size_t b = 0, i = 0; b < d->batch && st == CLATTN_SUCCESS; b++)
        if (lv->group_of[b] == g) {
            st = move_rows(ctx, out, t->group_out, b, i, n, d->heads, o_row, 0);
            if (st == CLATTN_SUCCESS)
                st = move_rows(ctx, lse, t->group_lse, b, i, n, d->heads, l_row, 0);
            i++;
        }
    return st;
}

/* Reproducible arithmetic: a cascade's result is defined as clattn_sdpa_paged's over each sequence's keys written
 * out whole, and is computed so — one paged call through a table that lists each sequence's prefixes' blocks, level
 * by level, then its own (the same bits as that call, whatever shares what; the sharing's savings are given up).
 * That table needs every prefix a sequence reads to be whole blocks. */
static clattn_status cascade_exact(clattn_context *ctx, const clattn_sdpa_desc *d, const clattn_paged_cache *cache,
                                   const clattn_cascade_level *levels, size_t n_levels, const size_t *lengths, cl_mem q,
                                   cl_mem out, cl_mem lse)
{
    const size_t bs = cache->block_size;
    size_t width = 0, *total = malloc(d->batch * sizeof *total);
    if (!total)
        return set_error(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "clattn_sdpa_cascade: the sequences' lengths");
    clattn_status st = CLATTN_SUCCESS;
    for (size_t b = 0; b < d->batch && st == CLATTN_SUCCESS; b++) {
        total[b] = lengths[b];
        for (size_t l = 0; l < n_levels && st == CLATTN_SUCCESS; l++) {
            const size_t g = levels[l].group_of[b], rows = levels[l].lengths[g];
            if (rows % bs != 0)
                st = set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                               "clattn_sdpa_cascade in reproducible arithmetic: levels[%zu].lengths[%zu] = %zu is not a "
                               "whole number of blocks of %zu rows (the sequences' keys are then read as one paged "
                               "table)", l, g, rows, bs);
            if (total[b] + rows < rows)
                st = set_error(ctx, CLATTN_ERROR_SIZE_OVERFLOW, "clattn_sdpa_cascade: sequence %zu's keys overflow", b);
            total[b] += rows;
        }
        const size_t blocks = (total[b] + bs - 1) / bs;
        width = blocks > width ? blocks : width;
    }
    if (st == CLATTN_SUCCESS && width > SIZE_MAX / sizeof(cl_int) / d->batch)
        st = set_error(ctx, CLATTN_ERROR_SIZE_OVERFLOW, "clattn_sdpa_cascade: the sequences' tables overflow");
    cl_mem table = NULL;
    if (st == CLATTN_SUCCESS)
        st = make_buffer(ctx, d->batch * width * sizeof(cl_int), "the sequences' whole block tables", &table);
    const cl_int zero = 0;
    cl_int err = st == CLATTN_SUCCESS ? clEnqueueFillBuffer(ctx->queue, table, &zero, sizeof zero, 0,
                                                            d->batch * width * sizeof(cl_int), 0, NULL, NULL)
                                      : CL_SUCCESS;
    for (size_t b = 0; b < d->batch && st == CLATTN_SUCCESS && err == CL_SUCCESS; b++) {
        size_t at = b * width;
        for (size_t l = 0; l < n_levels && err == CL_SUCCESS; l++) {
            const clattn_cascade_level *lv = &levels[l];
            const size_t g = lv->group_of[b], n = lv->lengths[g] / bs;
            if (n)
                err = clEnqueueWriteBuffer(ctx->queue, table, CL_TRUE, at * sizeof(cl_int), n * sizeof(cl_int),
                                           lv->blocks + g * lv->max_blocks, 0, NULL, NULL);
            at += n;
        }
        const size_t own = (lengths[b] + bs - 1) / bs;
        if (err == CL_SUCCESS && own)
            err = clEnqueueCopyBuffer(ctx->queue, cache->block_table, table, b * cache->max_blocks * sizeof(cl_int),
                                      at * sizeof(cl_int), own * sizeof(cl_int), 0, NULL, NULL);
    }
    if (st == CLATTN_SUCCESS && err != CL_SUCCESS)
        st = cl_error(ctx, err, "writing the sequences' whole block tables");
    if (st == CLATTN_SUCCESS) {
        clattn_paged_cache whole = *cache;
        whole.block_table = table, whole.max_blocks = width;
        clattn_sdpa_desc wd = *d;
        wd.kv_len = 0;
        st = clattn_sdpa_paged(ctx, &wd, &whole, total, q, NULL, out, lse);
    }
    if (table)
        clReleaseMemObject(table);
    free(total);
    return st;
}

clattn_status clattn_sdpa_cascade(clattn_context *ctx, const clattn_sdpa_desc *desc, const clattn_paged_cache *cache,
                                  const clattn_cascade_level *levels, size_t n_levels, const size_t *lengths, cl_mem q,
                                  cl_mem out, cl_mem lse)
{
    clattn_status st = check_context(ctx);
    clattn_sdpa_desc d;
    if (st != CLATTN_SUCCESS || (st = sdpa_desc_read(ctx, desc, &d)) != CLATTN_SUCCESS)
        return st;
    if (!cache || !q || !out)
        return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "clattn_sdpa_cascade: %s is NULL",
                         !cache ? "cache" : !q ? "q" : "out");
    if (d.batch == 0 || d.heads == 0 || d.q_len == 0 || d.qk_dim == 0)
        return set_error(ctx, CLATTN_ERROR_ZERO_SIZE, "clattn_sdpa_cascade: a dimension of desc is 0");
    if (cache->block_size == 0)
        return set_error(ctx, CLATTN_ERROR_ZERO_SIZE, "cache.block_size is 0");
    d.v_dim = d.v_dim ? d.v_dim : d.qk_dim;
    d.kv_heads = d.kv_heads ? d.kv_heads : d.heads;
    size_t q_elems, o_elems, rows, level_rows = 0;
    if (!size_product(&q_elems, 4, d.batch, d.heads, d.q_len, d.qk_dim) ||
        !size_product(&o_elems, 4, d.batch, d.heads, d.q_len, d.v_dim) || !size_product(&rows, 3, d.batch, d.heads, d.q_len) ||
        q_elems > SIZE_MAX / sizeof(float) || o_elems > SIZE_MAX / sizeof(float))
        return set_error(ctx, CLATTN_ERROR_SIZE_OVERFLOW, "clattn_sdpa_cascade: the tensors' sizes overflow");
    if ((st = options_check(ctx, &d)) != CLATTN_SUCCESS ||
        (st = levels_check(ctx, levels, n_levels, d.batch, cache)) != CLATTN_SUCCESS ||
        (st = check_buffer(ctx, q, q_elems, sizeof(float), "q")) != CLATTN_SUCCESS ||
        (st = check_buffer(ctx, out, o_elems, sizeof(float), "out")) != CLATTN_SUCCESS ||
        (lse && (st = check_buffer(ctx, lse, rows, sizeof(float), "lse")) != CLATTN_SUCCESS))
        return st;
    if (!lengths)
        return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "clattn_sdpa_cascade: lengths is NULL");
    for (size_t b = 0; d.masks && d.masks->causal != CLATTN_CAUSAL_NONE && b < d.batch; b++)
        if (lengths[b] < d.q_len) /* (else a query would lie inside a prefix, seeing only part of it) */
            return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                             "clattn_sdpa_cascade: lengths[%zu] = %zu, fewer own rows than the %zu causal queries", b,
                             lengths[b], d.q_len);
    if (reproducible_desc(ctx, &d))
        return cascade_exact(ctx, &d, cache, levels, n_levels, lengths, q, out, lse);
    for (size_t l = 0; l < n_levels; l++)
        if (levels[l].max_blocks > level_rows)
            level_rows = levels[l].max_blocks;
    /* The parts: one a level and the sequences' own rows (the last), each filled with lse −inf first. */
    cascade_buffers t;
    memset(&t, 0, sizeof t);
    const float minus_inf = -INFINITY;
    for (size_t p = 0; p <= n_levels && st == CLATTN_SUCCESS; p++) {
        if ((st = make_buffer(ctx, o_elems * sizeof(float), "a cascade part's output", &t.outs[p])) == CLATTN_SUCCESS &&
            (st = make_buffer(ctx, rows * sizeof(float), "a cascade part's lse", &t.lses[p])) == CLATTN_SUCCESS &&
            p < n_levels) {
            const cl_int err = clEnqueueFillBuffer(ctx->queue, t.lses[p], &minus_inf, sizeof minus_inf, 0, rows * sizeof(float),
                                                   0, NULL, NULL);
            st = err == CL_SUCCESS ? CLATTN_SUCCESS : cl_error(ctx, err, "clearing a cascade part's lse");
        }
    }
    if (st == CLATTN_SUCCESS && n_levels &&
        (st = make_buffer(ctx, q_elems * sizeof(float), "the gathered queries", &t.gathered_q)) == CLATTN_SUCCESS &&
        (st = make_buffer(ctx, o_elems * sizeof(float), "a group's output", &t.group_out)) == CLATTN_SUCCESS &&
        (st = make_buffer(ctx, rows * sizeof(float), "a group's lse", &t.group_lse)) == CLATTN_SUCCESS)
        st = make_buffer(ctx, level_rows * sizeof(cl_int), "a prefix's block table", &t.table);
    if (st == CLATTN_SUCCESS && !lse)
        st = make_buffer(ctx, rows * sizeof(float), "the merged lse", &t.final_lse);
    for (size_t l = 0; l < n_levels && st == CLATTN_SUCCESS; l++)
        for (size_t g = 0; g < levels[l].groups && st == CLATTN_SUCCESS; g++)
            st = group_run(ctx, &d, cache, &levels[l], g, q, t.outs[l], t.lses[l], &t);
    if (st == CLATTN_SUCCESS) { /* each sequence's own rows, its queries their last L */
        clattn_sdpa_desc own = d;
        own.sinks = NULL, own.kv_len = 0;
        st = clattn_sdpa_paged(ctx, &own, cache, lengths, q, NULL, t.outs[n_levels], t.lses[n_levels]);
    }
    if (st == CLATTN_SUCCESS) {
        clattn_sdpa_desc md = CLATTN_SDPA_DESC_INIT;
        md.batch = d.batch, md.heads = d.heads, md.q_len = d.q_len, md.qk_dim = md.v_dim = d.v_dim, md.sinks = d.sinks;
        st = clattn_merge(ctx, &md, n_levels + 1, t.outs, t.lses, out, lse ? lse : t.final_lse);
    }
    buffers_release(&t);
    return st;
}
