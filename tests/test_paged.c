/*
 * Paged KV caches (clattn_sdpa_paged, clattn_kv_append_paged) against the fp64 reference over the
 * same rows gathered into a contiguous cache, on every device:
 *  1. attention: block sizes 8 to 256, blocks handed out in a shuffled order (and shared by no two
 *     sequences), lengths that end mid-block, at a block's end and at 0; grouped-query heads; decode
 *     (L 1) and chunked prefill (L 5, bottom-right causal: each sequence's last query at its last key;
 *     L 12 and 37 on the fused kernel, a sequence with fewer keys than queries);
 *     long enough to split the keys; sinks and a window; an additive mask over the table's reach.
 *  2. append: new rows written through the table land exactly at rows lengths[b] … of each sequence
 *     (the rest of the pool untouched), and attention over the grown cache agrees with the reference.
 *  3. bad input: a reachable block id outside the pool (checked on the device: the status names the
 *     table entry and nothing is written), an unreachable one (ignored), lengths past the table's reach,
 *     block sizes that are not powers of two from 8 to 256, a short table, key_lengths in the masks.
 */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    const char *name;
    size_t B, H, KVH, L, D, Dv, block, max_blocks;
    size_t lengths[3];
    clattn_causal causal;
    int sinks;
    long long window; /* > 0: (window, 0) */
    int mask;         /* an (L, max_blocks·block) float mask with −inf entries */
} pcase;

static const pcase cases[] = {
    {"decode, blocks of 16, GQA 8/2", 3, 8, 2, 1, 32, 16, 16, 40, {613, 16, 0}, BR, 0, 0, 0},
    {"decode, blocks of 8, long enough to split", 1, 2, 1, 1, 64, 0, 8, 200, {1597}, BR, 0, 0, 0},
    {"chunked prefill L 5, blocks of 64", 2, 4, 4, 5, 32, 16, 64, 12, {700, 129}, BR, 1, 0, 0},
    {"decode, blocks of 256, sinks, window 100", 2, 4, 1, 1, 27, 9, 256, 4, {1024, 300}, BR, 1, 100, 0},
    {"an additive (L, S) mask, blocks of 32", 2, 3, 3, 2, 16, 16, 32, 6, {77, 192}, NONE, 0, 0, 1},
    /* 32 packed rows a K/V head: on CPUs the decode scores with the rows in the lanes (ROWS_T). */
    {"speculative decode L 4, GQA 16/2, blocks of 16, sinks", 2, 16, 2, 4, 64, 40, 16, 40, {613, 300}, BR, 1, 0, 0},
    /* Prefill lengths (more than 8 query rows): the fused kernel through the table (0.7). */
    {"chunked prefill L 37, blocks of 16, GQA 8/2, sinks", 2, 8, 2, 37, 64, 64, 16, 20, {300, 37}, BR, 1, 0, 0},
    {"prefill L 12 over fewer keys, (L, S) mask, window 9", 2, 3, 3, 12, 20, 12, 8, 8, {64, 9}, BR, 0, 9, 1},
};
#define NCASES (sizeof cases / sizeof cases[0])

/* A pool of `blocks` blocks and a table giving each sequence max_blocks distinct ones, shuffled. */
typedef struct {
    size_t blocks;
    int *table; /* (B, max_blocks) */
    float *k_pool, *v_pool;
} pool;

static void make_pool(const pcase *c, uint64_t seed, pool *p)
{
    p->blocks = c->B * c->max_blocks + 3; /* spare blocks no table names */
    p->table = tu_track_malloc(c->B * c->max_blocks * sizeof(int));
    int *order = tu_track_malloc(p->blocks * sizeof(int));
    for (size_t i = 0; i < p->blocks; i++)
        order[i] = (int)i;
    tu_rng rng;
    tu_rng_seed(&rng, seed);
    for (size_t i = p->blocks - 1; i > 0; i--) { /* Fisher–Yates */
        const size_t j = (size_t)(tu_rng_unit(&rng) * (double)(i + 1));
        const int t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    memcpy(p->table, order, c->B * c->max_blocks * sizeof(int));
    const size_t dv = c->Dv ? c->Dv : c->D;
    p->k_pool = tu_falloc(p->blocks * c->KVH * c->block * c->D);
    p->v_pool = tu_falloc(p->blocks * c->KVH * c->block * dv);
    tu_fill_uniform(p->k_pool, p->blocks * c->KVH * c->block * c->D, 1.0f, seed + 1);
    tu_fill_uniform(p->v_pool, p->blocks * c->KVH * c->block * dv, 1.0f, seed + 2);
}

/* Row j of head h of sequence b, gathered from the pool into a contiguous (B, KVH, cap, dim) cache. */
static float *gather(const pcase *c, const pool *p, const float *pool_data, size_t dim)
{
    const size_t cap = c->max_blocks * c->block;
    float *out = tu_falloc(c->B * c->KVH * cap * dim);
    for (size_t b = 0; b < c->B; b++)
        for (size_t h = 0; h < c->KVH; h++)
            for (size_t j = 0; j < cap; j++) {
                const size_t block = (size_t)p->table[b * c->max_blocks + j / c->block];
                memcpy(out + ((b * c->KVH + h) * cap + j) * dim,
                       pool_data + ((block * c->KVH + h) * c->block + j % c->block) * dim, dim * sizeof(float));
            }
    return out;
}

/* The device side of a pool. */
static clattn_paged_cache device_cache(clattn_context *ctx, const pcase *c, const pool *p)
{
    const size_t dv = c->Dv ? c->Dv : c->D;
    clattn_paged_cache pc = CLATTN_PAGED_CACHE_INIT;
    pc.k_pool = tu_dev_alloc(ctx, p->blocks * c->KVH * c->block * c->D, p->k_pool);
    pc.v_pool = tu_dev_alloc(ctx, p->blocks * c->KVH * c->block * dv, p->v_pool);
    pc.blocks = p->blocks;
    pc.block_size = c->block;
    pc.max_blocks = c->max_blocks;
    cl_int err;
    pc.block_table = clCreateBuffer(clattn_context_cl_context(ctx), CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                                    c->B * c->max_blocks * sizeof(int), p->table, &err);
    ck_assert_int_eq(err, CL_SUCCESS);
    tu_track_mem(pc.block_table);
    return pc;
}

/* Attention through the table against the reference over the gathered cache. */
static void check_attention(clattn_context *ctx, const pcase *c, const pool *p, const clattn_paged_cache *pc,
                            const size_t *lengths, uint64_t seed)
{
    const size_t dv = c->Dv ? c->Dv : c->D, cap = c->max_blocks * c->block;
    const size_t nq = c->B * c->H * c->L * c->D, no = c->B * c->H * c->L * dv, nl = c->B * c->H * c->L;
    float *q = tu_falloc(nq);
    tu_fill_uniform(q, nq, 1.0f, seed);
    float sinks[16]; /* (H ≤ 16 in every case) */
    for (size_t h = 0; h < c->H; h++)
        sinks[h] = 0.2f * (float)h - 0.5f;
    clattn_masks m = CLATTN_MASKS_INIT;
    m.causal = c->causal;
    const clattn_window w = {c->window, 0};
    if (c->window > 0)
        m.window = &w;
    clattn_sdpa_desc d = tu_sdpa_desc(c->B, c->H, c->L, 0, c->D, c->Dv);
    d.kv_heads = c->KVH;
    d.masks = &m;
    if (c->sinks)
        d.sinks = sinks;
    float *mask = NULL;
    if (c->mask) { /* (L, S) with S the table's reach */
        size_t nm;
        mask = tu_make_mask(MLS, c->B, c->H, c->L, cap, TU_MASKF_INF, seed + 7, &nm);
        m.additive = MLS;
    }
    cl_mem mq = tu_dev_alloc(ctx, nq, q), mo = tu_dev_alloc(ctx, no, NULL), ml = tu_dev_alloc(ctx, nl, NULL);
    cl_mem mm = mask ? tu_dev_alloc(ctx, c->L * cap, mask) : NULL;
    clattn_status st = clattn_sdpa_paged(ctx, &d, pc, lengths, mq, mm, mo, ml);
    TU_ASSERT_OK(st, ctx, "clattn_sdpa_paged");
    tu_finish(ctx);
    tu_dev_check_guard(ctx, mo, no, "out");
    /* The reference: the gathered cache with key lengths, and each sequence's queries at its end. */
    long long offsets[3];
    for (size_t b = 0; b < c->B; b++)
        offsets[b] = (long long)lengths[b] - (long long)c->L;
    clattn_masks rm = m;
    rm.key_lengths = lengths;
    if (c->causal == BR)
        rm.query_offsets = offsets;
    clattn_sdpa_desc r = d;
    r.kv_len = cap;
    r.masks = &rm;
    double *ro = tu_dalloc(no), *rl = tu_dalloc(nl);
    ref_sdpa(&r, q, gather(c, p, p->k_pool, c->D), gather(c, p, p->v_pool, dv), mask, ro, NULL, rl);
    check_close_named("out", tu_dev_read_checked(ctx, mo, no, "out"), ro, no, NULL);
    check_close_named("lse", tu_dev_read_checked(ctx, ml, nl, "lse"), rl, nl, NULL);
}

START_TEST(test_attention)
{
    const pcase *c = &cases[TU_CASE(_i)];
    const size_t dev = TU_DEVICE(_i);
    tu_set_label("paged \"%s\" on %s", c->name, tu_dev_spec[dev]);
    pool p;
    make_pool(c, 100 + TU_CASE(_i), &p);
    clattn_paged_cache pc = device_cache(tu_ctx[dev], c, &p);
    check_attention(tu_ctx[dev], c, &p, &pc, c->lengths, 200 + TU_CASE(_i));
}
END_TEST

START_TEST(test_append)
{
    const pcase *c = &cases[TU_CASE(_i)];
    const size_t dev = TU_DEVICE(_i);
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("paged append \"%s\" on %s", c->name, tu_dev_spec[dev]);
    pool p;
    make_pool(c, 300 + TU_CASE(_i), &p);
    clattn_paged_cache pc = device_cache(ctx, c, &p);
    const size_t dv = c->Dv ? c->Dv : c->D, n = 3;
    size_t lengths[3];
    for (size_t b = 0; b < c->B; b++) /* room for n more rows */
        lengths[b] = c->lengths[b] + n <= c->max_blocks * c->block ? c->lengths[b] : c->lengths[b] - n;
    float *kn = tu_falloc(c->B * c->KVH * n * c->D), *vn = tu_falloc(c->B * c->KVH * n * dv);
    tu_fill_uniform(kn, c->B * c->KVH * n * c->D, 1.0f, 400);
    tu_fill_uniform(vn, c->B * c->KVH * n * dv, 1.0f, 401);
    clattn_sdpa_desc d = tu_sdpa_desc(c->B, c->H, 1, 0, c->D, c->Dv);
    d.kv_heads = c->KVH;
    cl_mem mk = tu_dev_alloc(ctx, c->B * c->KVH * n * c->D, kn), mv = tu_dev_alloc(ctx, c->B * c->KVH * n * dv, vn);
    TU_ASSERT_OK(clattn_kv_append_paged(ctx, &d, &pc, lengths, n, mk, mv), ctx, "clattn_kv_append_paged");
    /* The host's pool grows the same way; then the device's must equal it, every other row untouched. */
    for (size_t b = 0; b < c->B; b++)
        for (size_t h = 0; h < c->KVH; h++)
            for (size_t r = 0; r < n; r++) {
                const size_t j = lengths[b] + r, block = (size_t)p.table[b * c->max_blocks + j / c->block];
                const size_t row = (block * c->KVH + h) * c->block + j % c->block;
                memcpy(p.k_pool + row * c->D, kn + ((b * c->KVH + h) * n + r) * c->D, c->D * sizeof(float));
                memcpy(p.v_pool + row * dv, vn + ((b * c->KVH + h) * n + r) * dv, dv * sizeof(float));
            }
    tu_dev_check_equal(ctx, pc.k_pool, p.k_pool, p.blocks * c->KVH * c->block * c->D, "k_pool");
    tu_dev_check_equal(ctx, pc.v_pool, p.v_pool, p.blocks * c->KVH * c->block * dv, "v_pool");
    for (size_t b = 0; b < c->B; b++)
        lengths[b] += n;
    check_attention(ctx, c, &p, &pc, lengths, 500 + TU_CASE(_i));
}
END_TEST

START_TEST(test_bad)
{
    const size_t dev = _i;
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("paged misuse on %s", tu_dev_spec[dev]);
    const pcase *c = &cases[0]; /* B 3, blocks of 16, 40 per sequence */
    pool p;
    make_pool(c, 600, &p);
    const size_t lengths[3] = {100, 16, 0}; /* blocks 0-6, 0, none */
    p.table[1 * c->max_blocks + 5] = -7;         /* unreachable: sequence 1 needs block 0 only */
    clattn_paged_cache pc = device_cache(ctx, c, &p);
    const size_t nq = c->B * c->H * c->D, no = c->B * c->H * c->Dv;
    cl_mem q = tu_dev_alloc(ctx, nq, NULL), o = tu_dev_alloc(ctx, no, NULL), l = tu_dev_alloc(ctx, c->B * c->H, NULL);
    clattn_sdpa_desc d = tu_sdpa_desc(c->B, c->H, 1, 0, c->D, c->Dv);
    d.kv_heads = c->KVH;
    TU_ASSERT_OK(clattn_sdpa_paged(ctx, &d, &pc, lengths, q, NULL, o, l), ctx, "an unreachable bad id");

    /* A reachable bad id: sequence 0's block 6 (rows 96-111). */
    int bad = (int)p.blocks;
    ck_assert_int_eq(clEnqueueWriteBuffer(clattn_context_queue(ctx), pc.block_table, CL_TRUE, 6 * sizeof(int),
                                          sizeof bad, &bad, 0, NULL, NULL),
                     CL_SUCCESS);
    cl_mem o2 = tu_dev_alloc(ctx, no, NULL);
    ck_assert_int_eq(clattn_sdpa_paged(ctx, &d, &pc, lengths, q, NULL, o2, NULL), CLATTN_ERROR_INVALID_VALUE);
    ck_assert_msg(strstr(clattn_last_error(ctx), "block_table[0][6]") != NULL, "%s", clattn_last_error(ctx));
    cl_mem kn = tu_dev_alloc(ctx, c->B * c->KVH * c->D, NULL), vn = tu_dev_alloc(ctx, c->B * c->KVH * c->Dv, NULL);
    const size_t at_end[3] = {96, 16, 0}; /* one new row at 96: block 6 again */
    ck_assert_int_eq(clattn_kv_append_paged(ctx, &d, &pc, at_end, 1, kn, vn), CLATTN_ERROR_INVALID_VALUE);
    ck_assert_msg(strstr(clattn_last_error(ctx), "block_table[0][6]") != NULL, "%s", clattn_last_error(ctx));
    tu_finish(ctx);
    ck_assert_msg(tu_dev_all_sentinel(ctx, o2, no), "%s: a refused call wrote out", tu_label());
    tu_dev_check_equal(ctx, pc.k_pool, p.k_pool, p.blocks * c->KVH * c->block * c->D, "k_pool after refused append");

    const size_t too_long[3] = {c->max_blocks * c->block + 1, 0, 0};
    ck_assert_int_eq(clattn_sdpa_paged(ctx, &d, &pc, too_long, q, NULL, o2, NULL), CLATTN_ERROR_INVALID_VALUE);
    ck_assert_msg(strstr(clattn_last_error(ctx), "lengths[0]") != NULL, "%s", clattn_last_error(ctx));
    const size_t full[3] = {c->max_blocks * c->block, 0, 0};
    ck_assert_int_eq(clattn_kv_append_paged(ctx, &d, &pc, full, 1, kn, vn), CLATTN_ERROR_INVALID_VALUE);
    ck_assert_int_eq(clattn_sdpa_paged(ctx, &d, &pc, NULL, q, NULL, o2, NULL), CLATTN_ERROR_NULL_ARGUMENT);
    static const size_t sizes[] = {4, 12, 512};
    for (size_t i = 0; i < 3; i++) {
        clattn_paged_cache odd = pc;
        odd.block_size = sizes[i];
        ck_assert_int_eq(clattn_sdpa_paged(ctx, &d, &odd, lengths, q, NULL, o2, NULL), CLATTN_ERROR_INVALID_VALUE);
        ck_assert_msg(strstr(clattn_last_error(ctx), "block_size") != NULL, "%s", clattn_last_error(ctx));
    }
    clattn_paged_cache wide = pc;
    wide.max_blocks = c->max_blocks * 2; /* the table buffer holds half of that */
    ck_assert_int_eq(clattn_sdpa_paged(ctx, &d, &wide, lengths, q, NULL, o2, NULL), CLATTN_ERROR_BUFFER_TOO_SMALL);
    ck_assert_msg(strstr(clattn_last_error(ctx), "block_table") != NULL, "%s", clattn_last_error(ctx));
    clattn_masks m = CLATTN_MASKS_INIT;
    m.key_lengths = lengths;
    d.masks = &m;
    ck_assert_int_eq(clattn_sdpa_paged(ctx, &d, &pc, lengths, q, NULL, o2, NULL), CLATTN_ERROR_INVALID_VALUE);
    ck_assert_msg(strstr(clattn_last_error(ctx), "key_lengths") != NULL, "%s", clattn_last_error(ctx));
    d.masks = NULL;
    d.kv_len = 17;
    ck_assert_int_eq(clattn_sdpa_paged(ctx, &d, &pc, lengths, q, NULL, o2, NULL), CLATTN_ERROR_SHAPE_MISMATCH);
    tu_finish(ctx);
    ck_assert_msg(tu_dev_all_sentinel(ctx, o2, no), "%s: a refused call wrote out", tu_label());
}
END_TEST

static Suite *paged_suite(void)
{
    Suite *s = suite_create("paged");
    tu_add_loop(s, "attention", test_attention, NCASES * tu_ndev);
    tu_add_loop(s, "append", test_append, NCASES * tu_ndev);
    tu_add_loop(s, "bad", test_bad, tu_ndev);
    return s;
}

int main(void) { return tu_main(paged_suite); }
