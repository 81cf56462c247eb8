/*
 * Ragged ("varlen") batches (clattn_sdpa_ragged): sequences of different query and key lengths packed
 * row after row, each against the fp64 reference of its own dense attention, on every device:
 * in both layouts ((rows, heads, D) and (heads, rows, D)): sequences with no queries, with no keys (their rows zero, lse −inf or the sink), one long enough to
 * split its keys; prefill lengths (the fused kernel, 0.7); grouped-query heads; no mask, top-left and
 * bottom-right (per sequence) causal masks,
 * sinks, a window; odd head sizes. Bad input: starts that decrease, buffers short of the last start,
 * key_lengths in the masks, desc.q_len shorter than a sequence: refused before anything is written.
 * The host variant (clattn_sdpa_ragged_host) runs every case too, (rows, heads, D), a batch without any
 * key row included, and is refused NULL arrays and int8 K/V without writing.
 */
#include "test_util.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#define MAXB 6

typedef struct {
    const char *name;
    size_t B, H, KVH, D, Dv;
    size_t q_counts[MAXB], k_counts[MAXB];
    clattn_causal causal;
    int sinks;
    long long window; /* > 0: (window, 0) */
    int mask;         /* a (B,H,L,S) float mask with −inf entries, padded to the longest sequence */
} rcase;

static const rcase cases[] = {
    {"decode: one query each, 5 lengths", 5, 4, 2, 32, 16, {1, 1, 1, 1, 1}, {300, 7, 1200, 64, 1}, BR, 0, 0, 0},
    {"mixed prefill and decode, odd heads", 4, 3, 1, 19, 11, {6, 1, 0, 9}, {6, 40, 13, 9}, BR, 0, 0, 0},
    {"a sequence without keys, sinks", 3, 4, 4, 16, 16, {2, 3, 1}, {0, 25, 9}, TL, 1, 0, 0},
    {"no mask, long keys split, GQA 8/2", 2, 8, 2, 64, 64, {2, 1}, {1700, 600}, NONE, 0, 0, 0},
    {"window (4, 0), bottom-right", 3, 2, 1, 29, 8, {5, 2, 7}, {30, 2, 19}, BR, 1, 4, 0},
    {"an additive (B,H,L,S) mask padded to the longest", 3, 2, 1, 16, 16, {3, 1, 4}, {9, 20, 5}, NONE, 0, 0, 1},
    {"no key row in the whole batch, sinks", 2, 2, 2, 8, 8, {2, 1}, {0, 0}, TL, 1, 0, 0},
    /* Prefill lengths (more than 8 query rows): the fused kernel over the packed rows (0.7). */
    {"prefill: 40 and 17 queries, GQA 6/2", 2, 6, 2, 32, 24, {40, 17}, {40, 90}, BR, 0, 0, 0},
    {"prefill with sinks, a window, a mask, no queries", 3, 2, 1, 24, 20, {12, 0, 30}, {12, 5, 64}, BR, 1, 6, 1},
};
#define NCASES (sizeof cases / sizeof cases[0])

/* (rows, heads, dim) → (heads, rows, dim), or back when `back`. */
static float *swap_rows_heads(const float *in, size_t rows, size_t heads, size_t dim, bool back)
{
    float *out = tu_falloc(rows * heads * dim + 1);
    for (size_t r = 0; r < rows; r++)
        for (size_t h = 0; h < heads; h++) {
            const size_t rows_first = (r * heads + h) * dim, heads_first = (h * rows + r) * dim;
            memcpy(out + (back ? rows_first : heads_first), in + (back ? heads_first : rows_first),
                   dim * sizeof(float));
        }
    return out;
}

START_TEST(test_table)
{
    const rcase *c = &cases[TU_CASE(_i) / 3];
    /* each case in both layouts on device buffers, then (rows, heads, D) through the host variant */
    const bool heads_rows = TU_CASE(_i) % 3 == 1, host = TU_CASE(_i) % 3 == 2;
    const size_t dev = TU_DEVICE(_i), dv = c->Dv;
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("ragged%s \"%s\" %s on %s", host ? " (host arrays)" : "", c->name,
                 heads_rows ? "(heads, rows, D)" : "(rows, heads, D)", tu_dev_spec[dev]);
    size_t qs[MAXB + 1] = {0}, ks[MAXB + 1] = {0};
    for (size_t b = 0; b < c->B; b++) {
        qs[b + 1] = qs[b] + c->q_counts[b];
        ks[b + 1] = ks[b] + c->k_counts[b];
    }
    const size_t RQ = qs[c->B], RK = ks[c->B];
    const size_t nq = RQ * c->H * c->D, nk = RK * c->KVH * c->D, nv = RK * c->KVH * dv, no = RQ * c->H * dv,
                 nl = RQ * c->H;
    float *q = tu_falloc(nq + 1), *k = tu_falloc(nk + 1), *v = tu_falloc(nv + 1);
    tu_fill_uniform(q, nq, 1.0f, 70 + TU_CASE(_i));
    tu_fill_uniform(k, nk, 1.0f, 71 + TU_CASE(_i));
    tu_fill_uniform(v, nv, 1.0f, 72 + TU_CASE(_i));
    float sinks[8];
    for (size_t h = 0; h < c->H; h++)
        sinks[h] = 0.3f - 0.25f * (float)h;
    clattn_masks m = CLATTN_MASKS_INIT;
    m.causal = c->causal;
    const clattn_window w = {c->window, 0};
    if (c->window > 0)
        m.window = &w;
    clattn_sdpa_desc d = tu_sdpa_desc(c->B, c->H, 0, 0, c->D, c->Dv);
    d.q_len = d.kv_len = 0; /* the longest sequence's */
    d.kv_heads = c->KVH;
    float *mask = NULL;
    size_t Lmax = 0, Smax = 0;
    for (size_t b = 0; b < c->B; b++) {
        Lmax = c->q_counts[b] > Lmax ? c->q_counts[b] : Lmax;
        Smax = c->k_counts[b] > Smax ? c->k_counts[b] : Smax;
    }
    if (c->mask) { /* read as (B, H, Lmax, Smax): q_len and kv_len 0 mean the longest */
        size_t nm;
        mask = tu_make_mask(MBH, c->B, c->H, Lmax, Smax, TU_MASKF_INF, 79, &nm);
        m.additive = MBH;
    }
    d.masks = &m;
    if (c->sinks)
        d.sinks = sinks;
    clattn_ragged r = CLATTN_RAGGED_INIT;
    r.q_starts = qs;
    r.k_starts = ks;
    r.layout = heads_rows ? CLATTN_RAGGED_HEADS_ROWS : CLATTN_RAGGED_ROWS_HEADS;
    const float *o, *l;
    if (host) {
        float *ho = tu_host_alloc(no, NULL), *hl = tu_host_alloc(nl, NULL);
        TU_ASSERT_OK(clattn_sdpa_ragged_host(ctx, &d, &r, q, k, v, mask, ho, hl), ctx, "clattn_sdpa_ragged_host");
        o = ho;
        l = hl;
    } else {
        cl_mem mq = tu_dev_alloc(ctx, nq, heads_rows ? swap_rows_heads(q, RQ, c->H, c->D, false) : q),
               mk = tu_dev_alloc(ctx, nk, heads_rows ? swap_rows_heads(k, RK, c->KVH, c->D, false) : k),
               mv = tu_dev_alloc(ctx, nv, heads_rows ? swap_rows_heads(v, RK, c->KVH, dv, false) : v);
        cl_mem mo = tu_dev_alloc(ctx, no, NULL), ml = tu_dev_alloc(ctx, nl, NULL);
        cl_mem mm = mask ? tu_dev_alloc(ctx, c->B * c->H * Lmax * Smax, mask) : NULL;
        clattn_status st = clattn_sdpa_ragged(ctx, &d, &r, mq, mk, mv, mm, mo, ml);
        TU_ASSERT_OK(st, ctx, "clattn_sdpa_ragged");
        tu_finish(ctx);
        tu_dev_check_guard(ctx, mo, no, "out");
        tu_dev_check_guard(ctx, ml, nl, "lse");
        o = tu_dev_read_checked(ctx, mo, no, "out");
        l = tu_dev_read_checked(ctx, ml, nl, "lse");
    }
    if (heads_rows) /* back to (rows, heads, dv) for the checks */
        o = swap_rows_heads(o, RQ, c->H, dv, true);
    for (size_t b = 0; b < c->B; b++) {
        const size_t L = c->q_counts[b], S = c->k_counts[b];
        if (L == 0)
            continue;
        tu_set_label("ragged \"%s\" sequence %zu (L %zu, S %zu) on %s", c->name, b, L, S, tu_dev_spec[dev]);
        if (S == 0) { /* nothing to see: zero rows, lse the sink or −inf */
            for (size_t i = 0; i < L; i++)
                for (size_t h = 0; h < c->H; h++) {
                    const size_t row = (qs[b] + i) * c->H + h;
                    for (size_t e = 0; e < dv; e++)
                        ck_assert_msg(o[row * dv + e] == 0.0f, "%s: out row %zu not zero", tu_label(), row);
                    ck_assert_msg(l[row] == (c->sinks ? sinks[h] : -INFINITY), "%s: lse %g", tu_label(), l[row]);
                }
            continue;
        }
        /* Sequence b as a dense (1, H, L, D) problem: gather its rows, heads first. */
        float *dq = tu_falloc(c->H * L * c->D), *dk = tu_falloc(c->KVH * S * c->D), *dvv = tu_falloc(c->KVH * S * dv);
        for (size_t i = 0; i < L; i++)
            for (size_t h = 0; h < c->H; h++)
                memcpy(dq + (h * L + i) * c->D, q + ((qs[b] + i) * c->H + h) * c->D, c->D * sizeof(float));
        for (size_t j = 0; j < S; j++)
            for (size_t h = 0; h < c->KVH; h++) {
                memcpy(dk + (h * S + j) * c->D, k + ((ks[b] + j) * c->KVH + h) * c->D, c->D * sizeof(float));
                memcpy(dvv + (h * S + j) * dv, v + ((ks[b] + j) * c->KVH + h) * dv, dv * sizeof(float));
            }
        clattn_sdpa_desc rd = tu_sdpa_desc(1, c->H, L, S, c->D, c->Dv);
        rd.kv_heads = c->KVH;
        rd.masks = &m; /* bottom-right of the dense problem is the sequence's own alignment */
        float *seq_mask = NULL;
        if (mask) { /* the sequence's corner of its (H, Lmax, Smax) block */
            seq_mask = tu_falloc(c->H * L * S);
            for (size_t h = 0; h < c->H; h++)
                for (size_t i = 0; i < L; i++)
                    memcpy(seq_mask + (h * L + i) * S, mask + ((b * c->H + h) * Lmax + i) * Smax, S * sizeof(float));
        }
        rd.sinks = d.sinks;
        double *ro = tu_dalloc(c->H * L * dv), *rl = tu_dalloc(c->H * L);
        ref_sdpa(&rd, dq, dk, dvv, seq_mask, ro, NULL, rl);
        float *got_o = tu_falloc(c->H * L * dv), *got_l = tu_falloc(c->H * L);
        for (size_t i = 0; i < L; i++)
            for (size_t h = 0; h < c->H; h++) {
                memcpy(got_o + (h * L + i) * dv, o + ((qs[b] + i) * c->H + h) * dv, dv * sizeof(float));
                got_l[h * L + i] = l[(qs[b] + i) * c->H + h];
            }
        check_close_named("out", got_o, ro, c->H * L * dv, NULL);
        check_close_named("lse", got_l, rl, c->H * L, NULL);
    }
}
END_TEST

START_TEST(test_bad)
{
    const size_t dev = _i;
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("ragged misuse on %s", tu_dev_spec[dev]);
    enum { B = 3, H = 2, D = 8 };
    size_t qs[B + 1] = {0, 2, 3, 5}, ks[B + 1] = {0, 10, 12, 20};
    clattn_sdpa_desc d = tu_sdpa_desc(B, H, 0, 0, D, 0);
    d.q_len = d.kv_len = 0;
    clattn_ragged r = CLATTN_RAGGED_INIT;
    r.q_starts = qs;
    r.k_starts = ks;
    cl_mem q = tu_dev_alloc_exact(ctx, 5 * H * D, NULL), k = tu_dev_alloc_exact(ctx, 20 * H * D, NULL);
    cl_mem v = tu_dev_alloc_exact(ctx, 20 * H * D, NULL), o = tu_dev_alloc(ctx, 5 * H * D, NULL);
    TU_ASSERT_OK(clattn_sdpa_ragged(ctx, &d, &r, q, k, v, NULL, o, NULL), ctx, "a good call");
    tu_finish(ctx);
    cl_mem o2 = tu_dev_alloc(ctx, 5 * H * D, NULL);
    ks[2] = 9; /* decreases */
    ck_assert_int_eq(clattn_sdpa_ragged(ctx, &d, &r, q, k, v, NULL, o2, NULL), CLATTN_ERROR_INVALID_VALUE);
    ck_assert_msg(strstr(clattn_last_error(ctx), "k_starts") != NULL, "%s", clattn_last_error(ctx));
    ks[2] = 12;
    ks[3] = 21; /* one row past k and v */
    ck_assert_int_eq(clattn_sdpa_ragged(ctx, &d, &r, q, k, v, NULL, o2, NULL), CLATTN_ERROR_BUFFER_TOO_SMALL);
    ck_assert_msg(strstr(clattn_last_error(ctx), "\"k\"") != NULL || strstr(clattn_last_error(ctx), "k ") != NULL,
                  "%s", clattn_last_error(ctx));
    ks[3] = 20;
    d.q_len = 1; /* sequence 0 has 2 queries */
    ck_assert_int_eq(clattn_sdpa_ragged(ctx, &d, &r, q, k, v, NULL, o2, NULL), CLATTN_ERROR_SHAPE_MISMATCH);
    d.q_len = 0;
    const size_t lengths[B] = {1, 1, 1};
    clattn_masks m = CLATTN_MASKS_INIT;
    m.key_lengths = lengths;
    d.masks = &m;
    ck_assert_int_eq(clattn_sdpa_ragged(ctx, &d, &r, q, k, v, NULL, o2, NULL), CLATTN_ERROR_INVALID_VALUE);
    ck_assert_msg(strstr(clattn_last_error(ctx), "key_lengths") != NULL, "%s", clattn_last_error(ctx));
    d.masks = NULL;
    ck_assert_int_eq(clattn_sdpa_ragged(ctx, &d, NULL, q, k, v, NULL, o2, NULL), CLATTN_ERROR_NULL_ARGUMENT);
    d.algorithm = CLATTN_ALGORITHM_STAGED;
    ck_assert_int_eq(clattn_sdpa_ragged(ctx, &d, &r, q, k, v, NULL, o2, NULL), CLATTN_ERROR_INVALID_VALUE);
    d.algorithm = CLATTN_ALGORITHM_AUTO;
    r.layout = (clattn_ragged_layout)7;
    ck_assert_int_eq(clattn_sdpa_ragged(ctx, &d, &r, q, k, v, NULL, o2, NULL), CLATTN_ERROR_INVALID_VALUE);
    ck_assert_msg(strstr(clattn_last_error(ctx), "layout") != NULL, "%s", clattn_last_error(ctx));
    tu_finish(ctx);
    ck_assert_msg(tu_dev_all_sentinel(ctx, o2, 5 * H * D), "%s: a refused call wrote out", tu_label());
    /* The host variant: the same checks, and what only it refuses. */
    r.layout = CLATTN_RAGGED_ROWS_HEADS;
    float *hq = tu_falloc(5 * H * D), *hk = tu_falloc(20 * H * D), *ho = tu_host_alloc(5 * H * D, NULL);
    ck_assert_int_eq(clattn_sdpa_ragged_host(ctx, &d, &r, NULL, hk, hk, NULL, ho, NULL), CLATTN_ERROR_NULL_ARGUMENT);
    ck_assert_msg(strstr(clattn_last_error(ctx), "q") != NULL, "%s", clattn_last_error(ctx));
    ck_assert_int_eq(clattn_sdpa_ragged_host(ctx, &d, &r, hq, hk, hk, NULL, NULL, NULL), CLATTN_ERROR_NULL_ARGUMENT);
    ck_assert_int_eq(clattn_sdpa_ragged_host(ctx, &d, NULL, hq, hk, hk, NULL, ho, NULL), CLATTN_ERROR_NULL_ARGUMENT);
    ks[2] = 9;
    ck_assert_int_eq(clattn_sdpa_ragged_host(ctx, &d, &r, hq, hk, hk, NULL, ho, NULL), CLATTN_ERROR_INVALID_VALUE);
    ks[2] = 12;
    d.k_dtype = CLATTN_INT8;
    ck_assert_int_eq(clattn_sdpa_ragged_host(ctx, &d, &r, hq, hk, hk, NULL, ho, NULL), CLATTN_ERROR_INVALID_VALUE);
    ck_assert_msg(strstr(clattn_last_error(ctx), "k_dtype") != NULL, "%s", clattn_last_error(ctx));
    d.k_dtype = CLATTN_FLOAT32;
    ck_assert_msg(tu_host_all_sentinel(ho, 5 * H * D), "%s: a refused host call wrote out", tu_label());
    TU_ASSERT_OK(clattn_sdpa_ragged_host(ctx, &d, &r, hq, hk, hk, NULL, ho, NULL), ctx, "a good host call");
}
END_TEST

static Suite *ragged_suite(void)
{
    Suite *s = suite_create("ragged");
    tu_add_loop(s, "table", test_table, 3 * NCASES * tu_ndev);
    tu_add_loop(s, "bad", test_bad, tu_ndev);
    return s;
}

int main(void) { return tu_main(ragged_suite); }
