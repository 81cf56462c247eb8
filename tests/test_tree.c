/*
 * Tree attention (masks.tree_parents: speculative decoding's draft trees) on every device, each result
 * against the fp64 reference given the same visibility as an explicit float mask (built here by walking
 * the parents, independently of the library's bits and of the reference's own tree rule):
 *  1. dense calls, a different tree per batch (random, a chain, a star) over caches of different lengths
 *     (query offsets, key lengths; trees beginning just before a tile's end, where the kernels' path
 *     without terms for the tiles before every row's tree must stop), GQA, on every algorithm (fused,
 *     staged, decode, auto), equal too to the
 *     same call through an explicit bool mask and through a mask_mod that walks the parents;
 *  2. paged caches: a chunk of 12 draft tokens (the fused kernel through the table) and of 5 (the decode
 *     kernels), a bottom-right causal mask placing the draft last;
 *  3. a ragged batch of three requests with trees of 7, 1 and 12 tokens, parents indexed by packed row;
 *  4. the backward pass: the gradients equal those of the same call through an explicit bool mask;
 *  5. refusals: a parent that is not an earlier query, partitions and cascades (which cut the call).
 */
#include "test_util.h"

#include <stdio.h>
#include <string.h>

#define MAX_B 3
#define MAX_L 12

/* A tree per batch: kind 0 random, 1 a chain, 2 a star (every token a root's child), 3 all roots. */
static void make_tree(int *parents, size_t n, int kind, uint64_t seed)
{
    tu_rng r;
    tu_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++)
        parents[i] = i == 0 || kind == 3 ? -1
                     : kind == 1         ? (int)i - 1
                     : kind == 2         ? 0
                                         : (int)(tu_rng_unit(&r) * (double)(i + 1)) - 1;
}

/* Whether token t is query i's ancestor or itself, by walking its parents. */
static int is_ancestor(const int *parents, size_t i, size_t t)
{
    int a = (int)i;
    while (a >= 0 && (size_t)a != t)
        a = parents[a];
    return a >= 0;
}

/* The visibility of the tree alone for one sequence whose draft's n keys begin at `first`, as row i of a
 * (n, S) matrix: 1 where the tree lets query i see key j. */
static int tree_sees(const int *parents, size_t first, size_t n, size_t i, size_t j)
{
    return j < first || j >= first + n || is_ancestor(parents, i, j - first);
}

typedef struct {
    size_t B, H, KVH, L, D, cache[MAX_B];
    int kinds[MAX_B];
} dcase;

static const dcase dense_cases[] = {
    {2, 4, 2, 11, 24, {37, 5}, {0, 1}},
    {3, 2, 2, 9, 16, {0, 64, 20}, {2, 0, 3}},
    /* Stars whose trees begin 2 keys before a tile's end (of 16, 32, 64 or 128 keys): a tile with the
     * first tokens, whole for every row past the first, must still take the tree (token 1 is no one's but
     * its own ancestor). */
    {3, 4, 2, 12, 16, {62, 30, 126}, {2, 2, 2}},
};
static const clattn_algorithm algorithms[] = {CLATTN_ALGORITHM_FUSED, CLATTN_ALGORITHM_STAGED,
                                              CLATTN_ALGORITHM_DECODE, CLATTN_ALGORITHM_AUTO};
#define NALG (sizeof algorithms / sizeof algorithms[0])
#define NDENSE (sizeof dense_cases / sizeof dense_cases[0])

typedef struct {
    size_t S, nq, nk, nv;
    int parents[MAX_B * MAX_L];
    size_t lengths[MAX_B];
    long long offsets[MAX_B];
    float *q, *k, *v, *additive; /* additive: the tree as a float mask (B,H,L,S), 0 / -inf (the reference's) */
    unsigned char *allowed;      /* the same as bytes, (B,1,L,S) */
} dense_data;

static void dense_make(const dcase *c, dense_data *x, uint64_t seed)
{
    x->S = 0;
    for (size_t b = 0; b < c->B; b++) {
        make_tree(x->parents + b * c->L, c->L, c->kinds[b], seed + b);
        x->lengths[b] = c->cache[b] + c->L;
        x->offsets[b] = (long long)c->cache[b];
        x->S = x->lengths[b] > x->S ? x->lengths[b] : x->S;
    }
    x->S += 3; /* (keys past every length: masked by the lengths) */
    x->nq = c->B * c->H * c->L * c->D, x->nk = c->B * c->KVH * x->S * c->D, x->nv = x->nk;
    x->q = tu_falloc(x->nq), x->k = tu_falloc(x->nk), x->v = tu_falloc(x->nv);
    tu_fill_uniform(x->q, x->nq, 1.0f, seed + 10);
    tu_fill_uniform(x->k, x->nk, 1.0f, seed + 11);
    tu_fill_uniform(x->v, x->nv, 1.0f, seed + 12);
    const size_t nm = c->B * c->L * x->S;
    x->additive = tu_falloc(nm * c->H);
    x->allowed = tu_track_malloc((nm + 3) / 4 * 4);
    for (size_t b = 0; b < c->B; b++)
        for (size_t i = 0; i < c->L; i++)
            for (size_t j = 0; j < x->S; j++) {
                const int seen = tree_sees(x->parents + b * c->L, c->cache[b], c->L, i, j);
                for (size_t h = 0; h < c->H; h++)
                    x->additive[((b * c->H + h) * c->L + i) * x->S + j] = seen ? 0.0f : -INFINITY;
                x->allowed[(b * c->L + i) * x->S + j] = (unsigned char)seen;
            }
}

/* The mask_mod formulation: walk the parents from query q's token to key k's. */
static const char walk_source[] =
    "bool mask_mod(int b, int h, long q, long k, __global const int *parents, __global const long *first)\n"
    "{\n"
    "    const long t = k - first[b], i = q - first[b];\n"
    "    if (t < 0 || t >= TREE_LEN)\n"
    "        return true;\n"
    "    long a = i;\n"
    "    while (a >= 0 && a != t)\n"
    "        a = parents[b * TREE_LEN + a];\n"
    "    return a == t;\n"
    "}\n";

START_TEST(test_dense)
{
    const dcase *c = &dense_cases[TU_CASE(_i)];
    const size_t dev = TU_DEVICE(_i);
    clattn_context *ctx = tu_ctx[dev];
    dense_data x;
    dense_make(c, &x, 100 + 10 * TU_CASE(_i));
    const size_t no = x.nq, nl = c->B * c->H * c->L;
    /* The reference: the tree as an explicit float mask (and no tree), and the reference's own tree rule. */
    clattn_masks rm = CLATTN_MASKS_INIT;
    rm.key_lengths = x.lengths, rm.query_offsets = x.offsets, rm.additive = CLATTN_MASK_B_H_L_S;
    clattn_sdpa_desc rd = tu_sdpa_desc(c->B, c->H, c->L, x.S, c->D, c->D);
    rd.kv_heads = c->KVH, rd.masks = &rm;
    double *ro = tu_dalloc(no), *rl = tu_dalloc(nl), *ro2 = tu_dalloc(no);
    ref_sdpa(&rd, x.q, x.k, x.v, x.additive, ro, NULL, rl);
    clattn_masks m = CLATTN_MASKS_INIT;
    m.key_lengths = x.lengths, m.query_offsets = x.offsets, m.tree_parents = x.parents;
    clattn_sdpa_desc d = rd;
    d.masks = &m;
    ref_sdpa(&d, x.q, x.k, x.v, NULL, ro2, NULL, NULL);
    for (size_t e = 0; e < no; e++)
        ck_assert_msg(ro[e] == ro2[e], "the reference's tree differs from its explicit mask at %zu: %.17g %.17g", e,
                      ro[e], ro2[e]);
    cl_mem mq = tu_dev_alloc(ctx, x.nq, x.q), mk = tu_dev_alloc(ctx, x.nk, x.k), mv = tu_dev_alloc(ctx, x.nv, x.v);
    float *first_tree = NULL;
    for (size_t a = 0; a < NALG; a++) {
        tu_set_label("tree, dense case %zu, algorithm %d on %s", TU_CASE(_i), (int)algorithms[a], tu_dev_spec[dev]);
        d.algorithm = algorithms[a];
        cl_mem mo = tu_dev_alloc(ctx, no, NULL), ml = tu_dev_alloc(ctx, nl, NULL);
        TU_ASSERT_OK(clattn_sdpa(ctx, &d, mq, mk, mv, NULL, mo, NULL, ml), ctx, "clattn_sdpa with a tree");
        float *out = tu_dev_read_checked(ctx, mo, no, "out");
        check_close_named("out", out, ro, no, NULL);
        check_close_named("lse", tu_dev_read_checked(ctx, ml, nl, "lse"), rl, nl, NULL);
        if (a == 0)
            first_tree = out;
        /* The same call through an explicit bool mask: the same numbers (the same kernels, other masks). */
        clattn_masks bm = CLATTN_MASKS_INIT;
        bm.key_lengths = x.lengths, bm.query_offsets = x.offsets;
        bm.additive = CLATTN_MASK_B_1_L_S, bm.mask_type = CLATTN_MASK_BOOL;
        clattn_sdpa_desc bd = d;
        bd.masks = &bm;
        cl_mem mm = tu_dev_alloc(ctx, (c->B * c->L * x.S + 3) / 4, (const float *)x.allowed);
        cl_mem mo2 = tu_dev_alloc(ctx, no, NULL);
        TU_ASSERT_OK(clattn_sdpa(ctx, &bd, mq, mk, mv, mm, mo2, NULL, NULL), ctx, "clattn_sdpa with a bool mask");
        float *out2 = tu_dev_read_checked(ctx, mo2, no, "out (bool mask)");
        double *as_ref = tu_dalloc(no);
        for (size_t e = 0; e < no; e++)
            as_ref[e] = out2[e];
        check_close_named("tree against bool mask", out, as_ref, no, NULL);
    }
    /* Through mask_mod: the parents and each batch's first draft position as auxiliary tensors. */
    tu_set_label("tree against mask_mod, dense case %zu on %s", TU_CASE(_i), tu_dev_spec[dev]);
    char define[32];
    snprintf(define, sizeof define, "TREE_LEN=%zu", c->L);
    const char *defines[1] = {define};
    long long firsts[MAX_B];
    memcpy(firsts, x.offsets, sizeof firsts);
    clattn_mod_aux aux[2] = {
        {"parents", CLATTN_AUX_INT, tu_dev_alloc(ctx, c->B * c->L, (const float *)x.parents), CLATTN_AUX_BY_LENGTH,
         c->B * c->L},
        {"first", CLATTN_AUX_LONG, tu_dev_alloc(ctx, 2 * c->B, (const float *)firsts), CLATTN_AUX_BY_BATCH, 0}};
    clattn_mods_desc md = CLATTN_MODS_DESC_INIT;
    md.source = walk_source, md.defines = defines, md.define_count = 1, md.aux = aux, md.aux_count = 2;
    clattn_mods *mods = NULL;
    TU_ASSERT_OK(clattn_mods_create(ctx, &md, &mods), ctx, "mods");
    clattn_masks mm2 = CLATTN_MASKS_INIT;
    mm2.key_lengths = x.lengths, mm2.query_offsets = x.offsets;
    clattn_sdpa_desc md2 = d;
    md2.masks = &mm2, md2.mods = mods, md2.algorithm = CLATTN_ALGORITHM_FUSED;
    cl_mem mo3 = tu_dev_alloc(ctx, no, NULL);
    TU_ASSERT_OK(clattn_sdpa(ctx, &md2, mq, mk, mv, NULL, mo3, NULL, NULL), ctx, "clattn_sdpa with mask_mod");
    float *out3 = tu_dev_read_checked(ctx, mo3, no, "out (mask_mod)");
    double *as_ref = tu_dalloc(no);
    for (size_t e = 0; e < no; e++)
        as_ref[e] = out3[e];
    check_close_named("tree against mask_mod", first_tree, as_ref, no, NULL);
    tu_finish(ctx);
    clattn_mods_free(mods);
}
END_TEST

/* A paged pool holding each sequence's rows of a dense K/V (B, KVH, S, D) in shuffled blocks. */
typedef struct {
    clattn_paged_cache cache;
    size_t max_blocks;
} paged_side;

static void make_paged(clattn_context *ctx, const float *k, const float *v, size_t B, size_t KVH, size_t S, size_t D,
                       size_t block, paged_side *p)
{
    p->max_blocks = (S + block - 1) / block;
    const size_t blocks = B * p->max_blocks, n = blocks * KVH * block * D;
    int *table = tu_track_malloc(blocks * sizeof(int));
    float *kp = tu_falloc(n), *vp = tu_falloc(n);
    for (size_t i = 0; i < blocks; i++)
        table[i] = (int)(blocks - 1 - i); /* (the last block first: no sequence in order) */
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < KVH; h++)
            for (size_t j = 0; j < S; j++) {
                const size_t id = (size_t)table[b * p->max_blocks + j / block];
                const size_t at = ((id * KVH + h) * block + j % block) * D, from = ((b * KVH + h) * S + j) * D;
                memcpy(kp + at, k + from, D * sizeof(float));
                memcpy(vp + at, v + from, D * sizeof(float));
            }
    p->cache = (clattn_paged_cache)CLATTN_PAGED_CACHE_INIT;
    p->cache.k_pool = tu_dev_alloc(ctx, n, kp), p->cache.v_pool = tu_dev_alloc(ctx, n, vp);
    p->cache.blocks = blocks, p->cache.block_size = block, p->cache.max_blocks = p->max_blocks;
    p->cache.block_table = tu_dev_alloc(ctx, blocks, (const float *)table);
}

static const size_t paged_lens[] = {12, 5};

START_TEST(test_paged)
{
    const size_t L = paged_lens[TU_CASE(_i)], dev = TU_DEVICE(_i);
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("tree over a paged cache, %zu draft tokens, on %s", L, tu_dev_spec[dev]);
    const dcase c = {3, 8, 2, L, 32, {40, 5, 70}, {0, 2, 1}};
    dense_data x;
    dense_make(&c, &x, 300 + L);
    paged_side p;
    make_paged(ctx, x.k, x.v, c.B, c.KVH, x.S, c.D, 16, &p);
    const size_t nl = c.B * c.H * L;
    clattn_masks rm = CLATTN_MASKS_INIT;
    rm.key_lengths = x.lengths, rm.query_offsets = x.offsets, rm.additive = CLATTN_MASK_B_H_L_S;
    clattn_sdpa_desc rd = tu_sdpa_desc(c.B, c.H, L, x.S, c.D, c.D);
    rd.kv_heads = c.KVH, rd.masks = &rm;
    double *ro = tu_dalloc(x.nq), *rl = tu_dalloc(nl);
    ref_sdpa(&rd, x.q, x.k, x.v, x.additive, ro, NULL, rl);
    clattn_masks m = CLATTN_MASKS_INIT;
    m.causal = BR, m.tree_parents = x.parents;
    clattn_sdpa_desc d = tu_sdpa_desc(c.B, c.H, L, 0, c.D, c.D);
    d.kv_heads = c.KVH, d.masks = &m;
    cl_mem mq = tu_dev_alloc(ctx, x.nq, x.q), mo = tu_dev_alloc(ctx, x.nq, NULL), ml = tu_dev_alloc(ctx, nl, NULL);
    TU_ASSERT_OK(clattn_sdpa_paged(ctx, &d, &p.cache, x.lengths, mq, NULL, mo, ml), ctx, "clattn_sdpa_paged, tree");
    check_close_named("out", tu_dev_read_checked(ctx, mo, x.nq, "out"), ro, x.nq, NULL);
    check_close_named("lse", tu_dev_read_checked(ctx, ml, nl, "lse"), rl, nl, NULL);
}
END_TEST

/* Three requests of 7, 1 and 12 draft tokens over caches of 30, 9 and 3 rows, packed (rows, heads, D). */
START_TEST(test_ragged)
{
    const size_t dev = _i, B = 3, H = 4, KVH = 2, D = 16;
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("tree, ragged batch, on %s", tu_dev_spec[dev]);
    const size_t rows[3] = {7, 1, 12}, cache[3] = {30, 9, 3};
    size_t q_starts[4] = {0}, k_starts[4] = {0};
    for (size_t b = 0; b < B; b++)
        q_starts[b + 1] = q_starts[b] + rows[b], k_starts[b + 1] = k_starts[b] + cache[b] + rows[b];
    const size_t rq = q_starts[B], rk = k_starts[B];
    int parents[20];
    for (size_t b = 0; b < B; b++)
        make_tree(parents + q_starts[b], rows[b], (int)b, 400 + b);
    float *q = tu_falloc(rq * H * D), *k = tu_falloc(rk * KVH * D), *v = tu_falloc(rk * KVH * D);
    tu_fill_uniform(q, rq * H * D, 1.0f, 410), tu_fill_uniform(k, rk * KVH * D, 1.0f, 411);
    tu_fill_uniform(v, rk * KVH * D, 1.0f, 412);
    clattn_masks m = CLATTN_MASKS_INIT;
    m.causal = BR, m.tree_parents = parents;
    clattn_sdpa_desc d = tu_sdpa_desc(B, H, 0, 0, D, D);
    d.kv_heads = KVH, d.masks = &m;
    clattn_ragged r = CLATTN_RAGGED_INIT;
    r.q_starts = q_starts, r.k_starts = k_starts;
    cl_mem mo = tu_dev_alloc(ctx, rq * H * D, NULL);
    TU_ASSERT_OK(clattn_sdpa_ragged(ctx, &d, &r, tu_dev_alloc(ctx, rq * H * D, q), tu_dev_alloc(ctx, rk * KVH * D, k),
                                    tu_dev_alloc(ctx, rk * KVH * D, v), NULL, mo, NULL),
                 ctx, "clattn_sdpa_ragged, tree");
    float *out = tu_dev_read_checked(ctx, mo, rq * H * D, "out");
    for (size_t b = 0; b < B; b++) { /* each request alone, (1, H, n, D), against its explicit mask */
        const size_t n = rows[b], S = cache[b] + n;
        float *qb = tu_falloc(H * n * D), *kb = tu_falloc(KVH * S * D), *vb = tu_falloc(KVH * S * D),
              *mask = tu_falloc(n * S), *got = tu_falloc(H * n * D);
        for (size_t h = 0; h < H; h++)
            for (size_t i = 0; i < n; i++) {
                memcpy(qb + (h * n + i) * D, q + ((q_starts[b] + i) * H + h) * D, D * sizeof(float));
                memcpy(got + (h * n + i) * D, out + ((q_starts[b] + i) * H + h) * D, D * sizeof(float));
            }
        for (size_t h = 0; h < KVH; h++)
            for (size_t j = 0; j < S; j++) {
                memcpy(kb + (h * S + j) * D, k + ((k_starts[b] + j) * KVH + h) * D, D * sizeof(float));
                memcpy(vb + (h * S + j) * D, v + ((k_starts[b] + j) * KVH + h) * D, D * sizeof(float));
            }
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < S; j++)
                mask[i * S + j] = tree_sees(parents + q_starts[b], cache[b], n, i, j) && j <= cache[b] + i ? 0.0f
                                                                                                         : -INFINITY;
        clattn_masks rm = CLATTN_MASKS_INIT;
        rm.additive = CLATTN_MASK_L_S;
        clattn_sdpa_desc rd = tu_sdpa_desc(1, H, n, S, D, D);
        rd.kv_heads = KVH, rd.masks = &rm;
        double *ro = tu_dalloc(H * n * D);
        ref_sdpa(&rd, qb, kb, vb, mask, ro, NULL, NULL);
        check_close_named("out", got, ro, H * n * D, NULL);
    }
}
END_TEST

/* The tree call of case c over x: its offsets, key lengths and tree in m, and its descriptor. */
static clattn_sdpa_desc tree_desc(const dcase *c, dense_data *x, clattn_masks *m)
{
    *m = (clattn_masks)CLATTN_MASKS_INIT;
    m->key_lengths = x->lengths, m->query_offsets = x->offsets, m->tree_parents = x->parents;
    clattn_sdpa_desc d = tu_sdpa_desc(c->B, c->H, c->L, x->S, c->D, c->D);
    d.kv_heads = c->KVH, d.masks = m;
    return d;
}

/* The backward pass through a tree: the gradients against the fp64 reference's with the explicit mask. */
START_TEST(test_backward)
{
    const size_t dev = _i;
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("tree, backward, on %s", tu_dev_spec[dev]);
    const dcase *c = &dense_cases[0];
    dense_data x;
    dense_make(c, &x, 500);
    const size_t nl = c->B * c->H * c->L;
    float *dout = tu_falloc(x.nq);
    tu_fill_uniform(dout, x.nq, 1.0f, 510);
    clattn_masks m;
    clattn_sdpa_desc d = tree_desc(c, &x, &m);
    cl_mem mq = tu_dev_alloc(ctx, x.nq, x.q), mk = tu_dev_alloc(ctx, x.nk, x.k), mv = tu_dev_alloc(ctx, x.nv, x.v);
    cl_mem mo = tu_dev_alloc(ctx, x.nq, NULL), ml = tu_dev_alloc(ctx, nl, NULL);
    TU_ASSERT_OK(clattn_sdpa(ctx, &d, mq, mk, mv, NULL, mo, NULL, ml), ctx, "forward");
    cl_mem dq = tu_dev_alloc(ctx, x.nq, NULL), dk = tu_dev_alloc(ctx, x.nk, NULL), dv = tu_dev_alloc(ctx, x.nv, NULL);
    TU_ASSERT_OK(clattn_sdpa_backward(ctx, &d, mq, mk, mv, NULL, mo, ml, tu_dev_alloc(ctx, x.nq, dout), dq, dk, dv,
                                      NULL),
                 ctx, "clattn_sdpa_backward, tree");
    clattn_masks rm = CLATTN_MASKS_INIT;
    rm.key_lengths = x.lengths, rm.query_offsets = x.offsets, rm.additive = CLATTN_MASK_B_H_L_S;
    clattn_sdpa_desc rd = d;
    rd.masks = &rm;
    double *rq = tu_dalloc(x.nq), *rk = tu_dalloc(x.nk), *rv = tu_dalloc(x.nv);
    ref_sdpa_backward(&rd, NULL, NULL, x.q, x.k, x.v, x.additive, dout, rq, rk, rv, NULL);
    check_close_named("dq", tu_dev_read_checked(ctx, dq, x.nq, "dq"), rq, x.nq, NULL);
    check_close_named("dk", tu_dev_read_checked(ctx, dk, x.nk, "dk"), rk, x.nk, NULL);
    check_close_named("dv", tu_dev_read_checked(ctx, dv, x.nv, "dv"), rv, x.nv, NULL);
}
END_TEST

/* A call refused as an invalid value (tu_refused). */
static void refused(clattn_context *ctx, clattn_status st, const char *words, cl_mem out, size_t n)
{
    tu_refused(ctx, st, CLATTN_ERROR_INVALID_VALUE, words, out, n);
}

START_TEST(test_bad)
{
    const size_t dev = _i;
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("tree misuse on %s", tu_dev_spec[dev]);
    const dcase *c = &dense_cases[0];
    dense_data x;
    dense_make(c, &x, 600);
    clattn_masks m;
    clattn_sdpa_desc d = tree_desc(c, &x, &m);
    cl_mem mq = tu_dev_alloc(ctx, x.nq, x.q), mk = tu_dev_alloc(ctx, x.nk, x.k), mv = tu_dev_alloc(ctx, x.nv, x.v);
    cl_mem mo = tu_dev_alloc(ctx, x.nq, NULL);
    x.parents[c->L + 4] = 4; /* (batch 1's query 4 its own parent) */
    refused(ctx, clattn_sdpa(ctx, &d, mq, mk, mv, NULL, mo, NULL, NULL), "masks.tree_parents[15] = 4", mo, x.nq);
    x.parents[c->L + 4] = -2;
    refused(ctx, clattn_sdpa(ctx, &d, mq, mk, mv, NULL, mo, NULL, NULL), "masks.tree_parents[15] = -2", mo, x.nq);
    x.parents[c->L + 4] = 3;
    clattn_partition *part = NULL;
    refused(ctx, clattn_partition_create(ctx, &d, 0, &part), "clattn_partition_create does not take masks.tree_parents",
            NULL, 0);
    ck_assert(part == NULL);
    /* A cascade: one level, one prefix of the first block. */
    paged_side p;
    make_paged(ctx, x.k, x.v, c->B, c->KVH, x.S, c->D, 16, &p);
    const size_t group_of[2] = {0, 0}, prefix_len[1] = {16};
    const cl_int prefix_blocks[1] = {0};
    const clattn_cascade_level level = {1, group_of, prefix_blocks, 1, prefix_len};
    clattn_sdpa_desc cd = tu_sdpa_desc(c->B, c->H, c->L, 0, c->D, c->D);
    clattn_masks cm = CLATTN_MASKS_INIT;
    cm.causal = BR, cm.tree_parents = x.parents;
    cd.kv_heads = c->KVH, cd.masks = &cm;
    refused(ctx, clattn_sdpa_cascade(ctx, &cd, &p.cache, &level, 1, x.lengths, mq, mo, NULL), "masks.tree_parents", mo,
            x.nq);
    TU_ASSERT_OK(clattn_sdpa(ctx, &d, mq, mk, mv, NULL, mo, NULL, NULL), ctx, "the same call, well formed");
}
END_TEST

static Suite *tree_suite(void)
{
    Suite *s = suite_create("tree");
    tu_add_loop(s, "dense", test_dense, NDENSE * tu_ndev);
    tu_add_loop(s, "paged", test_paged, 2 * tu_ndev);
    tu_add_loop(s, "ragged", test_ragged, tu_ndev);
    tu_add_loop(s, "backward", test_backward, tu_ndev);
    tu_add_loop(s, "bad", test_bad, tu_ndev);
    return s;
}

int main(void) { return tu_main(tree_suite); }
