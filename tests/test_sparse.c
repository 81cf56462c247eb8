/*
 * Top-k sparse attention (clattn_sdpa_sparse) on every device, against the fp64 reference given the same
 * selection as an explicit float mask:
 *  1. dense K/V: each query row's own keys (distinct, in shuffled order) with −1 padding and positions past the
 *     sequence's length (selecting nothing), key lengths, a row that selects no key (zeros, lse −inf); GQA;
 *     with sinks and soft-capping; bfloat16 K and V (against the reference on their rounded values);
 *  2. a paged pool holding the same rows in shuffled blocks, through its table;
 *  3. refusals naming the argument, nothing written: masks, ALiBi, top_k 0, K given with a paged cache, no
 *     lengths with one, an int8 cache, indices too small;
 *  4. clattn_topk, the selection from an indexer's scores: against a host selection (every valid position
 *     ranked by score, then position) on scores with many ties, −inf, NaN and key lengths, top_k below and above
 *     the keys a row can choose from; then the sparse call on its indices equal, bit for bit, to the call on the
 *     host's; its refusals.
 */
#include "test_util.h"

#include <math.h>
#include <string.h>

enum { B = 2, H = 8, KVH = 2, L = 3, S = 300, D = 32, DV = 24, TOP = 280, BLOCK = 16 }; /* (TOP > 2 x 128: three slices) */
static const size_t lengths[B] = {300, 211};

typedef struct {
    int indices[B * L * TOP];
    float q[B * H * L * D], k[B * KVH * S * D], v[B * KVH * S * DV];
    float mask[B * H * L * S]; /* the selection as the reference takes it: 0 or −inf */
} sparse_data;

/* Each row's keys: TOP distinct positions, shuffled, some −1 and some past the length; row (1, 2) none. */
static void make(sparse_data *x, uint64_t seed)
{
    tu_rng r;
    tu_rng_seed(&r, seed);
    tu_fill_uniform(x->q, sizeof x->q / sizeof x->q[0], 1.0f, seed + 1);
    tu_fill_uniform(x->k, sizeof x->k / sizeof x->k[0], 1.0f, seed + 2);
    tu_fill_uniform(x->v, sizeof x->v / sizeof x->v[0], 1.0f, seed + 3);
    for (size_t e = 0; e < sizeof x->mask / sizeof x->mask[0]; e++)
        x->mask[e] = -INFINITY;
    for (size_t b = 0; b < B; b++)
        for (size_t i = 0; i < L; i++) {
            int *row = x->indices + (b * L + i) * TOP;
            unsigned char taken[S] = {0};
            for (size_t t = 0; t < TOP; t++) {
                int j;
                do
                    j = (int)(tu_rng_unit(&r) * S);
                while (taken[j]);
                taken[j] = 1;
                row[t] = t % 9 == 4 ? -1 : t % 11 == 7 ? S + (int)t : j; /* (padding, out of range, a key) */
                if (b == 1 && i == 2)
                    row[t] = t % 2 ? -1 : (int)lengths[1] + (int)t; /* (nothing this row can see) */
                if (row[t] >= 0 && (size_t)row[t] < lengths[b])
                    for (size_t h = 0; h < H; h++)
                        x->mask[((b * H + h) * L + i) * S + (size_t)row[t]] = 0.0f;
            }
        }
}

static void reference(const sparse_data *x, const clattn_sdpa_desc *d, double *out, double *lse)
{
    clattn_masks rm = CLATTN_MASKS_INIT;
    rm.additive = CLATTN_MASK_B_H_L_S;
    clattn_sdpa_desc rd = *d;
    rd.masks = &rm, rd.kv_len = S;
    ref_sdpa(&rd, x->q, x->k, x->v, x->mask, out, NULL, lse);
}

static const char *const variants[3] = {"plain", "sinks and softcap", "bfloat16 K and V"};

/* bfloat16 bits of n floats (truncated), and the floats they hold written back into x. */
static float *to_bf16(float *x, size_t n)
{
    float *bits = tu_falloc((n + 1) / 2);
    uint16_t *h = (uint16_t *)bits;
    for (size_t e = 0; e < n; e++) {
        uint32_t u;
        memcpy(&u, &x[e], 4);
        h[e] = (uint16_t)(u >> 16);
        u &= 0xffff0000u;
        memcpy(&x[e], &u, 4);
    }
    return bits;
}

START_TEST(test_dense_and_paged)
{
    const size_t variant = TU_CASE(_i) % 3, paged = TU_CASE(_i) / 3, dev = TU_DEVICE(_i);
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("sparse, %s, %s, on %s", variants[variant], paged ? "paged" : "dense", tu_dev_spec[dev]);
    sparse_data *x = tu_track_malloc(sizeof *x);
    make(x, 900 + TU_CASE(_i));
    static const float sinks[H] = {0.5f, -1.0f, 1.5f, 0.0f, 0.25f, -0.5f, 1.0f, 2.0f};
    clattn_sdpa_desc d = tu_sdpa_desc(B, H, L, S, D, DV);
    d.kv_heads = KVH;
    if (variant == 1)
        d.sinks = sinks, d.softcap = 1.5f;
    const float *k_dev = x->k, *v_dev = x->v;
    size_t k_floats = B * KVH * S * D, v_floats = B * KVH * S * DV;
    if (variant == 2) {
        d.k_dtype = d.v_dtype = CLATTN_BFLOAT16;
        k_dev = to_bf16(x->k, k_floats), v_dev = to_bf16(x->v, v_floats);
        k_floats = (k_floats + 1) / 2, v_floats = (v_floats + 1) / 2;
    }
    const size_t no = B * H * L * DV, nl = B * H * L;
    double *ro = tu_dalloc(no), *rl = tu_dalloc(nl);
    reference(x, &d, ro, rl);
    cl_mem idx = tu_dev_alloc(ctx, B * L * TOP, (const float *)x->indices), q = tu_dev_alloc(ctx, B * H * L * D, x->q);
    cl_mem out = tu_dev_alloc(ctx, no, NULL), lse = tu_dev_alloc(ctx, nl, NULL);
    if (!paged) {
        TU_ASSERT_OK(clattn_sdpa_sparse(ctx, &d, TOP, idx, q, tu_dev_alloc(ctx, k_floats, k_dev),
                                        tu_dev_alloc(ctx, v_floats, v_dev), NULL, lengths, out, lse),
                     ctx, "clattn_sdpa_sparse");
    } else { /* the rows in a pool of blocks, the last first */
        const size_t per = (S + BLOCK - 1) / BLOCK, blocks = B * per, esize = variant == 2 ? 2 : 4;
        unsigned char *kp = tu_track_malloc(blocks * KVH * BLOCK * D * esize), *vp = tu_track_malloc(blocks * KVH * BLOCK * DV * esize);
        int *table = tu_track_malloc(blocks * sizeof(int));
        for (size_t t = 0; t < blocks; t++)
            table[t] = (int)(blocks - 1 - t);
        for (size_t b = 0; b < B; b++)
            for (size_t h = 0; h < KVH; h++)
                for (size_t j = 0; j < S; j++) {
                    const size_t row = ((size_t)table[b * per + j / BLOCK] * KVH + h) * BLOCK + j % BLOCK;
                    memcpy(kp + row * D * esize, (const unsigned char *)k_dev + ((b * KVH + h) * S + j) * D * esize, D * esize);
                    memcpy(vp + row * DV * esize, (const unsigned char *)v_dev + ((b * KVH + h) * S + j) * DV * esize, DV * esize);
                }
        clattn_paged_cache cache = CLATTN_PAGED_CACHE_INIT;
        cache.k_pool = tu_dev_alloc(ctx, blocks * KVH * BLOCK * D * esize / 4, (const float *)kp);
        cache.v_pool = tu_dev_alloc(ctx, blocks * KVH * BLOCK * DV * esize / 4, (const float *)vp);
        cache.blocks = blocks, cache.block_size = BLOCK, cache.max_blocks = per;
        cache.block_table = tu_dev_alloc(ctx, blocks, (const float *)table);
        d.kv_len = 0;
        TU_ASSERT_OK(clattn_sdpa_sparse(ctx, &d, TOP, idx, q, NULL, NULL, &cache, lengths, out, lse), ctx,
                     "clattn_sdpa_sparse, paged");
    }
    check_close_named("out", tu_dev_read_checked(ctx, out, no, "out"), ro, no, NULL);
    check_close_named("lse", tu_dev_read_checked(ctx, lse, nl, "lse"), rl, nl, NULL);
}
END_TEST

START_TEST(test_bad)
{
    const size_t dev = _i;
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("sparse misuse on %s", tu_dev_spec[dev]);
    sparse_data *x = tu_track_malloc(sizeof *x);
    make(x, 990);
    clattn_sdpa_desc d = tu_sdpa_desc(B, H, L, S, D, DV);
    d.kv_heads = KVH;
    const size_t no = B * H * L * DV;
    cl_mem idx = tu_dev_alloc(ctx, B * L * TOP, (const float *)x->indices), q = tu_dev_alloc(ctx, B * H * L * D, x->q);
    cl_mem k = tu_dev_alloc(ctx, B * KVH * S * D, x->k), v = tu_dev_alloc(ctx, B * KVH * S * DV, x->v);
    cl_mem out = tu_dev_alloc(ctx, no, NULL);
    clattn_masks m = CLATTN_MASKS_INIT;
    d.masks = &m;
    tu_refused(ctx, clattn_sdpa_sparse(ctx, &d, TOP, idx, q, k, v, NULL, NULL, out, NULL), CLATTN_ERROR_INVALID_VALUE,
               "desc.masks", out, no);
    d.masks = NULL;
    const float slopes[H] = {0};
    d.alibi_slopes = slopes;
    tu_refused(ctx, clattn_sdpa_sparse(ctx, &d, TOP, idx, q, k, v, NULL, NULL, out, NULL), CLATTN_ERROR_INVALID_VALUE,
               "desc.alibi_slopes", out, no);
    d.alibi_slopes = NULL;
    tu_refused(ctx, clattn_sdpa_sparse(ctx, &d, 0, idx, q, k, v, NULL, NULL, out, NULL), CLATTN_ERROR_ZERO_SIZE,
               "top_k is 0", out, no);
    tu_refused(ctx, clattn_sdpa_sparse(ctx, &d, 2 * TOP, idx, q, k, v, NULL, NULL, out, NULL),
               CLATTN_ERROR_BUFFER_TOO_SMALL, "indices", out, no);
    clattn_paged_cache cache = CLATTN_PAGED_CACHE_INIT;
    cache.k_pool = k, cache.v_pool = v, cache.blocks = 1, cache.block_size = BLOCK, cache.max_blocks = 1;
    cache.block_table = idx;
    d.kv_len = 0;
    tu_refused(ctx, clattn_sdpa_sparse(ctx, &d, TOP, idx, q, k, v, &cache, lengths, out, NULL),
               CLATTN_ERROR_INVALID_VALUE, "k and v are NULL", out, no);
    d.kv_len = S;
    const size_t long_lengths[B] = {S + 1, 3};
    tu_refused(ctx, clattn_sdpa_sparse(ctx, &d, TOP, idx, q, k, v, NULL, long_lengths, out, NULL),
               CLATTN_ERROR_INVALID_VALUE, "lengths[0]", out, no);
    d.k_dtype = CLATTN_INT8;
    tu_refused(ctx, clattn_sdpa_sparse(ctx, &d, TOP, idx, q, k, v, NULL, NULL, out, NULL), CLATTN_ERROR_INVALID_VALUE,
               "k_dtype", out, no);
    d.k_dtype = CLATTN_FLOAT32;
    TU_ASSERT_OK(clattn_sdpa_sparse(ctx, &d, TOP, idx, q, k, v, NULL, NULL, out, NULL), ctx, "the same call, well formed");
}
END_TEST

/* 4. Top-k selection. */
enum { SB = 2, SL = 3, SS = 700 };
static const size_t topk_lengths[SB] = {700, 413};

/* The host's selection: the valid positions (score neither −inf nor NaN, below the length) ranked by score, then
 * position; the first k, in ascending position, then −1. */
static void host_topk(const float *scores, size_t len, size_t k, int *out)
{
    int *order = tu_track_malloc(SS * sizeof *order);
    size_t n = 0;
    for (size_t j = 0; j < len; j++)
        if (!isnan(scores[j]) && scores[j] != -INFINITY)
            order[n++] = (int)j;
    for (size_t a = 1; a < n; a++) /* (insertion sort: by score, descending, then position) */
        for (size_t b = a; b > 0 && (scores[order[b]] > scores[order[b - 1]] ||
                                     (scores[order[b]] == scores[order[b - 1]] && order[b] < order[b - 1])); b--) {
            const int t = order[b];
            order[b] = order[b - 1], order[b - 1] = t;
        }
    const size_t take = n < k ? n : k;
    unsigned char *chosen = tu_track_malloc(SS);
    for (size_t t = 0; t < take; t++)
        chosen[order[t]] = 1;
    size_t w = 0;
    for (size_t j = 0; j < SS; j++)
        if (chosen[j])
            out[w++] = (int)j;
    for (; w < k; w++)
        out[w] = -1;
}

START_TEST(test_topk)
{
    const size_t dev = TU_DEVICE(_i), k = TU_CASE(_i) == 0 ? 37 : TU_CASE(_i) == 1 ? 300 : 690;
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("top-k selection, k %zu, on %s", k, tu_dev_spec[dev]);
    /* Scores: small integers (ties everywhere), negative ones, −inf and NaN, a row of equal scores, and a row whose
     * top k stand alone above the rest (the threshold's bin holds exactly k). */
    float *scores = tu_falloc(SB * SL * SS);
    tu_rng r;
    tu_rng_seed(&r, 31 + k);
    for (size_t e = 0; e < SB * SL * SS; e++) {
        const double u = tu_rng_unit(&r);
        scores[e] = u < 0.05 ? -INFINITY : u < 0.08 ? NAN : (float)((int)(tu_rng_unit(&r) * 40) - 20) * 0.5f;
        if (scores[e] == 0.0f && e % 2) /* (−0 ties with +0) */
            scores[e] = -0.0f;
        if (e / SS == 4)
            scores[e] = 1.0f;
    }
    for (size_t j = 0, n = 0; j < SS && n < k; j += 7, n++) /* (row 5: exactly k scores above the rest) */
        scores[5 * SS + j] = 20.0f;
    int *want = tu_track_malloc(SB * SL * k * sizeof *want);
    for (size_t row = 0; row < SB * SL; row++)
        host_topk(scores + row * SS, topk_lengths[row / SL], k, want + row * k);
    cl_mem sd = tu_dev_alloc(ctx, SB * SL * SS, scores), idx = tu_dev_alloc(ctx, SB * SL * k, NULL);
    TU_ASSERT_OK(clattn_topk(ctx, SB, SL, SS, k, sd, topk_lengths, idx), ctx, "clattn_topk");
    const int *got = (const int *)tu_dev_read_checked(ctx, idx, SB * SL * k, "indices");
    for (size_t e = 0; e < SB * SL * k; e++)
        ck_assert_msg(got[e] == want[e], "%s: indices[%zu] (row %zu, entry %zu) = %d, the host's %d", tu_label(), e,
                      e / k, e % k, got[e], want[e]);
    /* The sparse call on the device's selection, bit for bit the call on the host's. */
    clattn_sdpa_desc d = tu_sdpa_desc(SB, 4, SL, SS, 16, 16);
    d.kv_heads = 2;
    float *x = tu_falloc(SB * 2 * SS * 16);
    tu_fill_uniform(x, SB * 2 * SS * 16, 1.0f, 5);
    cl_mem kv = tu_dev_alloc(ctx, SB * 2 * SS * 16, x), q = tu_dev_alloc(ctx, SB * 4 * SL * 16, x);
    cl_mem o1 = tu_dev_alloc(ctx, SB * 4 * SL * 16, NULL), o2 = tu_dev_alloc(ctx, SB * 4 * SL * 16, NULL);
    TU_ASSERT_OK(clattn_sdpa_sparse(ctx, &d, k, idx, q, kv, kv, NULL, topk_lengths, o1, NULL), ctx, "sparse, device's");
    TU_ASSERT_OK(clattn_sdpa_sparse(ctx, &d, k, tu_dev_alloc(ctx, SB * SL * k, (const float *)want), q, kv, kv, NULL,
                                    topk_lengths, o2, NULL), ctx, "sparse, host's");
    ck_assert_msg(memcmp(tu_dev_read_checked(ctx, o1, SB * 4 * SL * 16, "out"),
                         tu_dev_read_checked(ctx, o2, SB * 4 * SL * 16, "out"), SB * 4 * SL * 16 * sizeof(float)) == 0,
                  "%s: the sparse call differs between the two selections", tu_label());
    if (k != 37)
        return;
    const size_t long_lengths[SB] = {SS + 1, 3};
    idx = tu_dev_alloc(ctx, SB * SL * k, NULL); /* (a fresh one: nothing may be written) */
    tu_refused(ctx, clattn_topk(ctx, SB, SL, SS, 0, sd, NULL, idx), CLATTN_ERROR_ZERO_SIZE, "top_k is 0", idx, SB * SL * k);
    tu_refused(ctx, clattn_topk(ctx, SB, SL, SS, k, sd, long_lengths, idx), CLATTN_ERROR_INVALID_VALUE,
               "lengths[0] = 701", idx, SB * SL * k);
    tu_refused(ctx, clattn_topk(ctx, SB, SL, SS, 2 * k, sd, NULL, idx), CLATTN_ERROR_BUFFER_TOO_SMALL, "indices", idx,
               SB * SL * k);
    tu_refused(ctx, clattn_topk(ctx, SB, SL, 2 * SS, k, sd, NULL, idx), CLATTN_ERROR_BUFFER_TOO_SMALL, "scores", idx,
               SB * SL * k);
}
END_TEST

static Suite *sparse_suite(void)
{
    Suite *s = suite_create("sparse");
    tu_add_loop(s, "attention", test_dense_and_paged, 6 * tu_ndev);
    tu_add_loop(s, "bad", test_bad, tu_ndev);
    tu_add_loop(s, "topk", test_topk, 3 * tu_ndev);
    return s;
}

int main(void) { return tu_main(sparse_suite); }
