/*
 * One call for a mixed batch (clattn_sdpa_paged_ragged): prefill chunks, decode rows and draft trees of
 * different requests over one paged cache, their queries packed (rows, H, D), on every device:
 *  1. four requests — a chunk of 37 rows, a decode row, a draft tree of 9 tokens, a decode row over a short
 *     cache — with a bottom-right causal mask alone, and with masks.tree_parents making the chunk a chain and
 *     the draft a tree; GQA; the fused kernel (the longest sequence has 37 rows) and the decode kernels
 *     forced; out and lse against the fp64 reference of each request alone, given its visibility as an
 *     explicit mask;
 *  2. the same requests as separate clattn_sdpa_paged calls agree with the mixed call;
 *  3. refusals naming the argument, nothing written: NULL or decreasing q_starts, desc.q_len below the
 *     longest request's rows, q too small for the packed rows.
 */
#include "test_util.h"

#include <string.h>

enum { B = 4, H = 8, KVH = 2, D = 32, BLOCK = 16, MAX_BLOCKS = 12 };
static const size_t rows_of[B] = {37, 1, 9, 1}; /* each request's new rows (its queries) */
static const size_t cached[B] = {20, 149, 133, 4}; /* its rows before them (S past 2 tiles of 64) */
static const int draft[9] = {-1, 0, 0, 1, 1, 2, 5, -1, 7};

typedef struct {
    size_t q_starts[B + 1], lengths[B], rows;
    int parents[64];
    float *q, *k, *v; /* q packed (rows, H, D); k and v each request's rows, (B, KVH, cap, D) */
    clattn_paged_cache cache;
} mixed;

static const size_t cap = MAX_BLOCKS * BLOCK;

/* The requests' rows in a pool of shuffled blocks, each request's parents (a chain for the chunk, the draft's
 * tree, -1 for a decode row). */
static void make(clattn_context *ctx, mixed *m, uint64_t seed)
{
    m->q_starts[0] = 0;
    for (size_t b = 0; b < B; b++) {
        m->q_starts[b + 1] = m->q_starts[b] + rows_of[b];
        m->lengths[b] = cached[b] + rows_of[b];
        for (size_t i = 0; i < rows_of[b]; i++)
            m->parents[m->q_starts[b] + i] = b == 2 ? draft[i] : (int)i - 1;
    }
    m->rows = m->q_starts[B];
    m->q = tu_falloc(m->rows * H * D), m->k = tu_falloc(B * KVH * cap * D), m->v = tu_falloc(B * KVH * cap * D);
    tu_fill_uniform(m->q, m->rows * H * D, 1.0f, seed);
    tu_fill_uniform(m->k, B * KVH * cap * D, 1.0f, seed + 1);
    tu_fill_uniform(m->v, B * KVH * cap * D, 1.0f, seed + 2);
    const size_t blocks = B * MAX_BLOCKS, n = blocks * KVH * BLOCK * D;
    int *table = tu_track_malloc(blocks * sizeof(int));
    float *kp = tu_falloc(n), *vp = tu_falloc(n);
    for (size_t i = 0; i < blocks; i++)
        table[i] = (int)((i * 7 + 3) % blocks); /* (7 is prime to the 48 blocks) */
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < KVH; h++)
            for (size_t j = 0; j < cap; j++) {
                const size_t id = (size_t)table[b * MAX_BLOCKS + j / BLOCK];
                const size_t at = ((id * KVH + h) * BLOCK + j % BLOCK) * D, from = ((b * KVH + h) * cap + j) * D;
                memcpy(kp + at, m->k + from, D * sizeof(float));
                memcpy(vp + at, m->v + from, D * sizeof(float));
            }
    m->cache = (clattn_paged_cache)CLATTN_PAGED_CACHE_INIT;
    m->cache.k_pool = tu_dev_alloc(ctx, n, kp), m->cache.v_pool = tu_dev_alloc(ctx, n, vp);
    m->cache.blocks = blocks, m->cache.block_size = BLOCK, m->cache.max_blocks = MAX_BLOCKS;
    m->cache.block_table = tu_dev_alloc(ctx, blocks, (const float *)table);
}

/* Whether query i of request b sees key j: up to its own position, and with the tree only its ancestors of the
 * new rows. */
static int sees(const mixed *m, size_t b, size_t i, size_t j, int tree)
{
    const size_t first = cached[b], p = first + i;
    if (j > p)
        return 0;
    if (!tree || j < first)
        return 1;
    int a = (int)i;
    while (a >= 0 && (size_t)a != j - first)
        a = m->parents[m->q_starts[b] + (size_t)a];
    return a >= 0;
}

/* Each request alone against the fp64 reference: out (rows, H, D) and lse (rows, H) of the mixed call. */
static void check_against_reference(const mixed *m, const float *out, const float *lse, int tree)
{
    for (size_t b = 0; b < B; b++) {
        const size_t n = rows_of[b], S = m->lengths[b];
        float *qb = tu_falloc(H * n * D), *kb = tu_falloc(KVH * S * D), *vb = tu_falloc(KVH * S * D),
              *mask = tu_falloc(n * S), *got = tu_falloc(H * n * D), *got_lse = tu_falloc(H * n);
        for (size_t h = 0; h < H; h++)
            for (size_t i = 0; i < n; i++) {
                const size_t row = m->q_starts[b] + i;
                memcpy(qb + (h * n + i) * D, m->q + (row * H + h) * D, D * sizeof(float));
                memcpy(got + (h * n + i) * D, out + (row * H + h) * D, D * sizeof(float));
                got_lse[h * n + i] = lse[row * H + h];
            }
        for (size_t h = 0; h < KVH; h++) {
            memcpy(kb + h * S * D, m->k + (b * KVH + h) * cap * D, S * D * sizeof(float));
            memcpy(vb + h * S * D, m->v + (b * KVH + h) * cap * D, S * D * sizeof(float));
        }
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < S; j++)
                mask[i * S + j] = sees(m, b, i, j, tree) ? 0.0f : -INFINITY;
        clattn_masks rm = CLATTN_MASKS_INIT;
        rm.additive = CLATTN_MASK_L_S;
        clattn_sdpa_desc rd = tu_sdpa_desc(1, H, n, S, D, D);
        rd.kv_heads = KVH, rd.masks = &rm;
        double *ro = tu_dalloc(H * n * D), *rl = tu_dalloc(H * n);
        ref_sdpa(&rd, qb, kb, vb, mask, ro, NULL, rl);
        check_close_named("out", got, ro, H * n * D, NULL);
        check_close_named("lse", got_lse, rl, H * n, NULL);
    }
}

static const clattn_algorithm algorithms[2] = {CLATTN_ALGORITHM_AUTO, CLATTN_ALGORITHM_DECODE};

START_TEST(test_mixed)
{
    const size_t form = TU_CASE(_i), dev = TU_DEVICE(_i); /* form: bit 0 the tree, bit 1 decode forced */
    const int tree = (int)(form & 1);
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("mixed batch%s, %s, on %s", tree ? " with trees" : "", form & 2 ? "decode" : "auto",
                 tu_dev_spec[dev]);
    mixed m;
    make(ctx, &m, 700 + form);
    clattn_masks masks = CLATTN_MASKS_INIT;
    masks.causal = BR;
    masks.tree_parents = tree ? m.parents : NULL;
    clattn_sdpa_desc d = tu_sdpa_desc(B, H, 0, 0, D, D);
    d.kv_heads = KVH, d.masks = &masks, d.algorithm = algorithms[form >> 1];
    cl_mem q = tu_dev_alloc(ctx, m.rows * H * D, m.q), out = tu_dev_alloc(ctx, m.rows * H * D, NULL),
           lse = tu_dev_alloc(ctx, m.rows * H, NULL);
    TU_ASSERT_OK(clattn_sdpa_paged_ragged(ctx, &d, &m.cache, m.lengths, m.q_starts, q, NULL, out, lse), ctx,
                 "clattn_sdpa_paged_ragged");
    const float *got = tu_dev_read_checked(ctx, out, m.rows * H * D, "out");
    check_against_reference(&m, got, tu_dev_read_checked(ctx, lse, m.rows * H, "lse"), tree);
    if (tree)
        return;
    /* The same requests one call each (their tables: the request's row of the table). */
    for (size_t b = 0; b < B; b++) {
        const size_t n = rows_of[b];
        float *qb = tu_falloc(H * n * D);
        for (size_t h = 0; h < H; h++)
            for (size_t i = 0; i < n; i++)
                memcpy(qb + (h * n + i) * D, m.q + ((m.q_starts[b] + i) * H + h) * D, D * sizeof(float));
        int row[MAX_BLOCKS];
        cl_int err = clEnqueueReadBuffer(clattn_context_queue(ctx), m.cache.block_table, CL_TRUE,
                                         b * MAX_BLOCKS * sizeof(int), sizeof row, row, 0, NULL, NULL);
        ck_assert_int_eq(err, CL_SUCCESS);
        clattn_paged_cache one = m.cache;
        one.block_table = tu_dev_alloc(ctx, MAX_BLOCKS, (const float *)row);
        clattn_sdpa_desc od = tu_sdpa_desc(1, H, n, 0, D, D);
        od.kv_heads = KVH, od.masks = &masks;
        cl_mem ob = tu_dev_alloc(ctx, H * n * D, NULL);
        TU_ASSERT_OK(clattn_sdpa_paged(ctx, &od, &one, &m.lengths[b], tu_dev_alloc(ctx, H * n * D, qb), NULL, ob, NULL),
                     ctx, "clattn_sdpa_paged, one request");
        const float *alone = tu_dev_read_checked(ctx, ob, H * n * D, "out (alone)");
        double *as_ref = tu_dalloc(H * n * D);
        float *mixed_rows = tu_falloc(H * n * D);
        for (size_t h = 0; h < H; h++)
            for (size_t i = 0; i < n; i++) {
                memcpy(mixed_rows + (h * n + i) * D, got + ((m.q_starts[b] + i) * H + h) * D, D * sizeof(float));
                for (size_t e = 0; e < D; e++)
                    as_ref[(h * n + i) * D + e] = alone[(h * n + i) * D + e];
            }
        check_close_named("mixed against alone", mixed_rows, as_ref, H * n * D, NULL);
    }
}
END_TEST

START_TEST(test_bad)
{
    const size_t dev = _i;
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("mixed batch misuse on %s", tu_dev_spec[dev]);
    mixed m;
    make(ctx, &m, 800);
    clattn_masks masks = CLATTN_MASKS_INIT;
    masks.causal = BR;
    clattn_sdpa_desc d = tu_sdpa_desc(B, H, 0, 0, D, D);
    d.kv_heads = KVH, d.masks = &masks;
    const size_t n = m.rows * H * D;
    cl_mem q = tu_dev_alloc(ctx, n, m.q), out = tu_dev_alloc(ctx, n, NULL);
    tu_refused(ctx, clattn_sdpa_paged_ragged(ctx, &d, &m.cache, m.lengths, NULL, q, NULL, out, NULL),
            CLATTN_ERROR_NULL_ARGUMENT, "q_starts is NULL", out, n);
    size_t starts[B + 1];
    memcpy(starts, m.q_starts, sizeof starts);
    starts[2] = 0;
    tu_refused(ctx, clattn_sdpa_paged_ragged(ctx, &d, &m.cache, m.lengths, starts, q, NULL, out, NULL),
            CLATTN_ERROR_INVALID_VALUE, "q_starts decreases at 2", out, n);
    d.q_len = 9;
    tu_refused(ctx, clattn_sdpa_paged_ragged(ctx, &d, &m.cache, m.lengths, m.q_starts, q, NULL, out, NULL),
            CLATTN_ERROR_SHAPE_MISMATCH, "desc.q_len = 9", out, n);
    d.q_len = 0;
    cl_mem short_q = tu_dev_alloc_exact(ctx, n - 1, NULL);
    tu_refused(ctx, clattn_sdpa_paged_ragged(ctx, &d, &m.cache, m.lengths, m.q_starts, short_q, NULL, out, NULL),
            CLATTN_ERROR_BUFFER_TOO_SMALL, "q", out, n);
    TU_ASSERT_OK(clattn_sdpa_paged_ragged(ctx, &d, &m.cache, m.lengths, m.q_starts, q, NULL, out, NULL), ctx,
                 "the same call, well formed");
}
END_TEST

static Suite *mixed_suite(void)
{
    Suite *s = suite_create("mixed batch");
    tu_add_loop(s, "mixed", test_mixed, 4 * tu_ndev);
    tu_add_loop(s, "bad", test_bad, tu_ndev);
    return s;
}

int main(void) { return tu_main(mixed_suite); }
