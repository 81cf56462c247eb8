/*
 * Shared-prefix (cascade) attention, clattn_sdpa_cascade, against the fp64 reference over each sequence's
 * keys written out whole (its prefixes, level by level, then its own rows), on every device:
 *  1. attention: one prefix shared by every sequence; two levels (a prefix for all, sub-prefixes for
 *     groups, one of them empty); prefixes that end mid-block; decode (L 1) and chunks (L 3, L 7: the group's
 *     n·L query rows on the fused kernel) with a bottom-right causal mask inside each sequence's own rows;
 *     grouped-query heads, sinks, soft-capping; out and lse.
 *  2. reproducible arithmetic (issue 41): on prefixes of whole blocks, the same bits as the reproducible dense call
 *     over each sequence's keys written out whole (within tolerance of fp64), whatever shares what; a prefix that
 *     ends mid-block refused, naming it;
 *  3. bad input, refused naming it with nothing written: a group index past the level's groups, a prefix
 *     block outside the pool, a prefix longer than its blocks, more than 8 levels, fewer own rows than
 *     causal queries, ALiBi, key lengths, float16 queries, NULL arguments.
 */
#include "test_util.h"

#include <math.h>
#include <string.h>

#define MAX_B 6
#define MAX_LEVELS 2
#define MAX_GROUPS 3

typedef struct {
    const char *name;
    size_t B, H, KVH, L, D, block;
    size_t levels, groups[MAX_LEVELS];
    size_t group_of[MAX_LEVELS][MAX_B];
    size_t prefix[MAX_LEVELS][MAX_GROUPS]; /* each group's prefix rows */
    size_t own[MAX_B];                     /* each sequence's own rows */
    clattn_causal causal;
    int sinks, softcap;
} ccase;

static const ccase cases[] = {
    {"one prefix of 40 rows for 4 sequences, decode, GQA 8/2, blocks of 16", 4, 8, 2, 1, 32, 16, 1, {1},
     {{0, 0, 0, 0}}, {{40}}, {5, 17, 1, 33}, BR, 0, 0},
    {"two levels: 48 rows for all, 33 / 0 / 20 rows for three groups, L 3, sinks, softcap", 5, 4, 4, 3, 16, 8, 2,
     {1, 3}, {{0, 0, 0, 0, 0}, {0, 1, 0, 2, 1}}, {{48}, {33, 0, 20}}, {3, 9, 30, 4, 3}, BR, 1, 1},
    {"chunks of 7 without a causal mask, a prefix of 130 rows, GQA 6/3, blocks of 32", 3, 6, 3, 7, 24, 32, 1, {1},
     {{0, 0, 0}}, {{130}}, {0, 41, 7}, NONE, 0, 0},
    {"whole blocks: 32 rows for all, 16 / 0 / 24 for three groups, L 2, GQA 4/2, sinks", 5, 4, 2, 2, 16, 8, 2,
     {1, 3}, {{0, 0, 0, 0, 0}, {0, 1, 2, 1, 0}}, {{32}, {16, 0, 24}}, {3, 10, 2, 17, 8}, BR, 1, 0},
};
#define ALIGNED_CASE 3 /* (every prefix whole blocks: the one reproducible arithmetic takes) */
#define NCASES (sizeof cases / sizeof cases[0])

/* The pool: every prefix's blocks, then each sequence's own, all distinct; the rows as the reference
 * reads them (per sequence: its prefixes' rows, then its own). */
typedef struct {
    size_t blocks, max_own, max_prefix[MAX_LEVELS];
    int *own_table;                       /* (B, max_own) */
    cl_int *prefix_blocks[MAX_LEVELS];    /* (groups, max_prefix) */
    float *k_pool, *v_pool;
} pool;

static size_t blocks_for(size_t rows, size_t block) { return (rows + block - 1) / block; }

static void make_pool(const ccase *c, pool *p, uint64_t seed)
{
    memset(p, 0, sizeof *p);
    p->max_own = 1;
    for (size_t b = 0; b < c->B; b++)
        if (blocks_for(c->own[b], c->block) > p->max_own)
            p->max_own = blocks_for(c->own[b], c->block);
    size_t next = 0;
    for (size_t l = 0; l < c->levels; l++) {
        p->max_prefix[l] = 1;
        for (size_t g = 0; g < c->groups[l]; g++)
            if (blocks_for(c->prefix[l][g], c->block) > p->max_prefix[l])
                p->max_prefix[l] = blocks_for(c->prefix[l][g], c->block);
        p->prefix_blocks[l] = tu_track_malloc(c->groups[l] * p->max_prefix[l] * sizeof(cl_int));
        for (size_t i = 0; i < c->groups[l] * p->max_prefix[l]; i++)
            p->prefix_blocks[l][i] = (cl_int)(next + (i * 7) % (c->groups[l] * p->max_prefix[l])); /* (shuffled) */
        next += c->groups[l] * p->max_prefix[l];
    }
    p->own_table = tu_track_malloc(c->B * p->max_own * sizeof(int));
    for (size_t i = 0; i < c->B * p->max_own; i++)
        p->own_table[i] = (int)(next + c->B * p->max_own - 1 - i);
    p->blocks = next + c->B * p->max_own + 2; /* (spare blocks no table names) */
    const size_t n = p->blocks * c->KVH * c->block * c->D;
    p->k_pool = tu_falloc(n), p->v_pool = tu_falloc(n);
    tu_fill_uniform(p->k_pool, n, 1.0f, seed), tu_fill_uniform(p->v_pool, n, 1.0f, seed + 1);
}

/* Row j of K/V head h in block `block` of the pool. */
static const float *pool_row(const ccase *c, const float *pool_data, size_t block, size_t h, size_t j)
{
    return pool_data + ((block * c->KVH + h) * c->block + j) * c->D;
}

/* Each sequence's keys: its prefixes' rows and its own. */
static size_t keys_of(const ccase *c, size_t b)
{
    size_t n = c->own[b];
    for (size_t l = 0; l < c->levels; l++)
        n += c->prefix[l][c->group_of[l][b]];
    return n;
}

/* Each sequence's keys written out whole, (B, KVH, cap, D), and their counts. */
static float *whole(const ccase *c, const pool *p, const float *pool_data, size_t cap, size_t *total)
{
    float *out = tu_falloc(c->B * c->KVH * cap * c->D);
    for (size_t b = 0; b < c->B; b++) {
        size_t at = 0;
        for (size_t l = 0; l <= c->levels; l++) {
            const int own = l == c->levels;
            const size_t g = own ? 0 : c->group_of[l][b], rows = own ? c->own[b] : c->prefix[l][g];
            for (size_t j = 0; j < rows; j++, at++) {
                const size_t block = own ? (size_t)p->own_table[b * p->max_own + j / c->block]
                                         : (size_t)p->prefix_blocks[l][g * p->max_prefix[l] + j / c->block];
                for (size_t h = 0; h < c->KVH; h++)
                    memcpy(out + ((b * c->KVH + h) * cap + at) * c->D, pool_row(c, pool_data, block, h, j % c->block),
                           c->D * sizeof(float));
            }
        }
        total[b] = at;
    }
    return out;
}

typedef struct {
    clattn_paged_cache cache;
    clattn_cascade_level levels[MAX_LEVELS];
} device_side;

static void make_device(clattn_context *ctx, const ccase *c, const pool *p, device_side *s)
{
    const size_t n = p->blocks * c->KVH * c->block * c->D;
    s->cache = (clattn_paged_cache)CLATTN_PAGED_CACHE_INIT;
    s->cache.k_pool = tu_dev_alloc(ctx, n, p->k_pool), s->cache.v_pool = tu_dev_alloc(ctx, n, p->v_pool);
    s->cache.blocks = p->blocks, s->cache.block_size = c->block, s->cache.max_blocks = p->max_own;
    cl_int err;
    s->cache.block_table = clCreateBuffer(clattn_context_cl_context(ctx), CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                                          c->B * p->max_own * sizeof(int), p->own_table, &err);
    ck_assert_int_eq(err, CL_SUCCESS);
    tu_track_mem(s->cache.block_table);
    for (size_t l = 0; l < c->levels; l++)
        s->levels[l] = (clattn_cascade_level){c->groups[l], c->group_of[l], p->prefix_blocks[l], p->max_prefix[l],
                                              c->prefix[l]};
}

/* A case's call on ctx: its pool on the device, the descriptor (masks and sinks in `keep`), Q. */
typedef struct {
    pool p;
    device_side s;
    clattn_masks m, whole_m;
    clattn_sdpa_desc d, whole_d; /* the cascade's, and the dense call's over each sequence's keys written out whole */
    size_t nq, nl, cap, total[MAX_B];
    long long offsets[MAX_B];
    float *q, *k_whole, *v_whole;
    cl_mem mq;
} call_state;

static const float sinks[8] = {0.5f, -1.0f, 1.5f, 0.0f, 0.25f, -0.5f, 1.0f, 2.0f};

static void call_make(clattn_context *ctx, size_t ci, call_state *t)
{
    const ccase *c = &cases[ci];
    make_pool(c, &t->p, 40 + ci);
    make_device(ctx, c, &t->p, &t->s);
    t->nq = c->B * c->H * c->L * c->D, t->nl = c->B * c->H * c->L;
    t->q = tu_falloc(t->nq);
    tu_fill_uniform(t->q, t->nq, 1.0f, 50 + ci);
    t->m = (clattn_masks)CLATTN_MASKS_INIT;
    t->m.causal = c->causal;
    t->d = tu_sdpa_desc(c->B, c->H, c->L, 0, c->D, c->D);
    t->d.kv_heads = c->KVH, t->d.masks = &t->m;
    t->d.sinks = c->sinks ? sinks : NULL;
    t->d.softcap = c->softcap ? 2.0f : 0.0f;
    t->mq = tu_dev_alloc(ctx, t->nq, t->q);
    /* Each sequence's keys whole, its queries its last L rows. */
    t->cap = 0;
    for (size_t b = 0; b < c->B; b++) {
        t->total[b] = keys_of(c, b);
        t->cap = t->total[b] > t->cap ? t->total[b] : t->cap;
        t->offsets[b] = (long long)t->total[b] - (long long)c->L;
    }
    t->whole_m = t->m;
    t->whole_m.key_lengths = t->total;
    t->whole_m.query_offsets = c->causal == BR ? t->offsets : NULL;
    t->whole_d = t->d;
    t->whole_d.kv_len = t->cap, t->whole_d.masks = &t->whole_m;
    t->k_whole = whole(c, &t->p, t->p.k_pool, t->cap, t->total);
    t->v_whole = whole(c, &t->p, t->p.v_pool, t->cap, t->total);
}

START_TEST(test_attention)
{
    const ccase *c = &cases[TU_CASE(_i)];
    const size_t dev = TU_DEVICE(_i);
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("cascade \"%s\" on %s", c->name, tu_dev_spec[dev]);
    call_state *t = tu_track_malloc(sizeof *t);
    call_make(ctx, TU_CASE(_i), t);
    const size_t nq = t->nq, nl = t->nl;
    cl_mem mo = tu_dev_alloc(ctx, nq, NULL), ml = tu_dev_alloc(ctx, nl, NULL);
    TU_ASSERT_OK(clattn_sdpa_cascade(ctx, &t->d, &t->s.cache, t->s.levels, c->levels, c->own, t->mq, mo, ml), ctx,
                 "clattn_sdpa_cascade");
    tu_finish(ctx);
    double *ro = tu_dalloc(nq), *rl = tu_dalloc(nl);
    ref_sdpa(&t->whole_d, t->q, t->k_whole, t->v_whole, NULL, ro, NULL, rl);
    check_close_named("out", tu_dev_read_checked(ctx, mo, nq, "out"), ro, nq, NULL);
    check_close_named("lse", tu_dev_read_checked(ctx, ml, nl, "lse"), rl, nl, NULL);
    /* Without lse: the same out. */
    cl_mem mo2 = tu_dev_alloc(ctx, nq, NULL);
    TU_ASSERT_OK(clattn_sdpa_cascade(ctx, &t->d, &t->s.cache, t->s.levels, c->levels, c->own, t->mq, mo2, NULL), ctx,
                 "clattn_sdpa_cascade without lse");
    check_close_named("out (no lse)", tu_dev_read_checked(ctx, mo2, nq, "out"), ro, nq, NULL);
}
END_TEST

/* 2. Reproducible arithmetic: the dense call's bits over the keys written out whole; mid-block prefixes refused. */
START_TEST(test_reproducible)
{
    const size_t dev = _i;
    clattn_context *ctx = tu_ctx[dev];
    const ccase *c = &cases[ALIGNED_CASE];
    tu_set_label("reproducible cascade \"%s\" on %s", c->name, tu_dev_spec[dev]);
    call_state *t = tu_track_malloc(sizeof *t);
    call_make(ctx, ALIGNED_CASE, t);
    t->d.arithmetic = t->whole_d.arithmetic = CLATTN_ARITHMETIC_REPRODUCIBLE;
    float *want_out = tu_falloc(t->nq), *want_lse = tu_falloc(t->nl);
    cl_mem mo = tu_dev_alloc(ctx, t->nq, NULL), ml = tu_dev_alloc(ctx, t->nl, NULL);
    TU_ASSERT_OK(clattn_sdpa_cascade(ctx, &t->d, &t->s.cache, t->s.levels, c->levels, c->own, t->mq, mo, ml), ctx,
                 "the reproducible cascade");
    const float *out = tu_dev_read(ctx, mo, t->nq), *lse = tu_dev_read(ctx, ml, t->nl);
    TU_ASSERT_OK(clattn_sdpa_host(ctx, &t->whole_d, t->q, t->k_whole, t->v_whole, NULL, want_out, NULL, want_lse), ctx,
                 "the reproducible dense call over the keys written out whole");
    ck_assert_msg(memcmp(out, want_out, t->nq * sizeof(float)) == 0 && memcmp(lse, want_lse, t->nl * sizeof(float)) == 0,
                  "%s: not the dense call's bits", tu_label());
    double *ro = tu_dalloc(t->nq), *rl = tu_dalloc(t->nl);
    ref_sdpa(&t->whole_d, t->q, t->k_whole, t->v_whole, NULL, ro, NULL, rl);
    check_close_named("out", out, ro, t->nq, NULL);
    check_close_named("lse", lse, rl, t->nl, NULL);
    /* A prefix that ends mid-block (case 1's 33 rows in blocks of 8): refused, nothing written. */
    call_state *mid = tu_track_malloc(sizeof *mid);
    call_make(ctx, 1, mid);
    mid->d.arithmetic = CLATTN_ARITHMETIC_REPRODUCIBLE;
    cl_mem o = tu_dev_alloc(ctx, mid->nq, NULL);
    tu_refused(ctx, clattn_sdpa_cascade(ctx, &mid->d, &mid->s.cache, mid->s.levels, cases[1].levels, cases[1].own,
                                        mid->mq, o, NULL),
               CLATTN_ERROR_INVALID_VALUE, "levels[1].lengths[0] = 33 is not a whole number of blocks", o, mid->nq);
}
END_TEST

START_TEST(test_bad)
{
    const size_t dev = _i;
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("cascade misuse on %s", tu_dev_spec[dev]);
    const ccase *c = &cases[1];
    pool p;
    make_pool(c, &p, 70);
    device_side s;
    make_device(ctx, c, &p, &s);
    const size_t nq = c->B * c->H * c->L * c->D;
    cl_mem q = tu_dev_alloc(ctx, nq, NULL), o = tu_dev_alloc(ctx, nq, NULL);
    clattn_masks m = CLATTN_MASKS_INIT;
    m.causal = BR;
    clattn_sdpa_desc d = tu_sdpa_desc(c->B, c->H, c->L, 0, c->D, c->D);
    d.kv_heads = c->KVH, d.masks = &m;
    clattn_cascade_level lv[9];
    memcpy(lv, s.levels, sizeof s.levels);
    size_t group_of[MAX_B];
    memcpy(group_of, c->group_of[1], sizeof group_of);
    group_of[2] = 3;
    lv[1].group_of = group_of;
    tu_refused(ctx, clattn_sdpa_cascade(ctx, &d, &s.cache, lv, 2, c->own, q, o, NULL), CLATTN_ERROR_INVALID_VALUE,
            "levels[1].group_of[2] = 3", o, nq);
    lv[1] = s.levels[1];
    cl_int blocks[3 * 8];
    memcpy(blocks, p.prefix_blocks[1], c->groups[1] * p.max_prefix[1] * sizeof(cl_int));
    blocks[1] = (cl_int)p.blocks;
    lv[1].blocks = blocks;
    tu_refused(ctx, clattn_sdpa_cascade(ctx, &d, &s.cache, lv, 2, c->own, q, o, NULL), CLATTN_ERROR_INVALID_VALUE,
            "levels[1].blocks[0][1]", o, nq);
    lv[1] = s.levels[1];
    size_t long_prefix[3] = {p.max_prefix[1] * c->block + 1, 0, 0};
    lv[1].lengths = long_prefix;
    tu_refused(ctx, clattn_sdpa_cascade(ctx, &d, &s.cache, lv, 2, c->own, q, o, NULL), CLATTN_ERROR_INVALID_VALUE,
            "levels[1].lengths[0]", o, nq);
    lv[1] = s.levels[1];
    for (size_t l = 2; l < 9; l++)
        lv[l] = s.levels[0];
    tu_refused(ctx, clattn_sdpa_cascade(ctx, &d, &s.cache, lv, 9, c->own, q, o, NULL), CLATTN_ERROR_INVALID_VALUE,
            "9 levels", o, nq);
    const size_t short_own[MAX_B] = {3, 2, 30, 4, 3};
    tu_refused(ctx, clattn_sdpa_cascade(ctx, &d, &s.cache, lv, 2, short_own, q, o, NULL), CLATTN_ERROR_INVALID_VALUE,
            "lengths[1] = 2", o, nq);
    const float slopes[4] = {0.1f, 0.2f, 0.3f, 0.4f};
    d.alibi_slopes = slopes;
    tu_refused(ctx, clattn_sdpa_cascade(ctx, &d, &s.cache, lv, 2, c->own, q, o, NULL), CLATTN_ERROR_INVALID_VALUE,
            "alibi", o, nq);
    d.alibi_slopes = NULL;
    m.key_lengths = c->own;
    tu_refused(ctx, clattn_sdpa_cascade(ctx, &d, &s.cache, lv, 2, c->own, q, o, NULL), CLATTN_ERROR_INVALID_VALUE,
            "key_lengths", o, nq);
    m.key_lengths = NULL;
    d.q_dtype = CLATTN_FLOAT16;
    tu_refused(ctx, clattn_sdpa_cascade(ctx, &d, &s.cache, lv, 2, c->own, q, o, NULL), CLATTN_ERROR_INVALID_VALUE,
            "float32", o, nq);
    d.q_dtype = CLATTN_FLOAT32;
    tu_refused(ctx, clattn_sdpa_cascade(ctx, &d, &s.cache, lv, 2, NULL, q, o, NULL), CLATTN_ERROR_NULL_ARGUMENT,
            "lengths", o, nq);
    tu_refused(ctx, clattn_sdpa_cascade(ctx, &d, &s.cache, NULL, 2, c->own, q, o, NULL), CLATTN_ERROR_NULL_ARGUMENT,
            "levels", o, nq);
    tu_refused(ctx, clattn_sdpa_cascade(ctx, &d, NULL, lv, 2, c->own, q, o, NULL), CLATTN_ERROR_NULL_ARGUMENT, "cache",
            o, nq);
    TU_ASSERT_OK(clattn_sdpa_cascade(ctx, &d, &s.cache, lv, 2, c->own, q, o, NULL), ctx, "the same call, well formed");
}
END_TEST

static Suite *cascade_suite(void)
{
    Suite *s = suite_create("cascade");
    tu_add_loop(s, "attention", test_attention, NCASES * tu_ndev);
    tu_add_loop(s, "reproducible", test_reproducible, tu_ndev);
    tu_add_loop(s, "bad", test_bad, tu_ndev);
    return s;
}

int main(void) { return tu_main(cascade_suite); }
