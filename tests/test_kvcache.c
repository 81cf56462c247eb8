/*
 * A KV cache the application owns, grown in place by clattn_kv_append and attended over with
 * clattn_sdpa (key lengths = the new lengths, query offsets = the old ones, causal): a prefill of 3
 * rows, then 64 single-token decode steps (docs/kv-caches.md's worked loop), for sequences that start at
 * different lengths, with grouped query heads, on the fused, staged and decode paths; checked every
 * step against the fp64 reference over a host copy of the valid rows, and the cache rows past each
 * length must stay untouched. Appends past the capacity and
 * other misuse are refused before anything is written.
 *
 * ONNX's past and present (clattn_sdpa_with_past and its host variant): present = concat(past, new)
 * exactly, and attention over it as the reference over the concatenation says — with and without a
 * past, prefill and decode, both causal alignments, key lengths, and a mask narrower than the present
 * (ONNX pads it with −inf). Misuse (aliased present, missing past, short buffers) writes nothing.
 */
#include "test_util.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

enum { B = 3, H = 4, KVH = 2, CAP = 96, D = 8, DV = 5, STEPS = 64 };
#define KC (B * KVH * CAP * D)
#define VC (B * KVH * CAP * DV)

static clattn_sdpa_desc cache_desc(void)
{
    clattn_sdpa_desc d = tu_sdpa_desc(B, H, 1, CAP, D, DV);
    d.kv_heads = KVH;
    return d;
}

START_TEST(test_decode_loop)
{
    const size_t dev = TU_DEVICE(_i);
    static const clattn_algorithm algs[3] = {CLATTN_ALGORITHM_FUSED, CLATTN_ALGORITHM_STAGED, CLATTN_ALGORITHM_DECODE};
    static const char *const names[3] = {"fused", "staged", "decode"};
    const clattn_algorithm alg = algs[TU_CASE(_i)];
    clattn_context *ctx = tu_ctx[dev];
    size_t len[B] = {0, 5, 17};
    float *kc = tu_falloc(KC), *vc = tu_falloc(VC); /* the host's copy of the valid rows */
    tu_fill_uniform(kc, KC, 1.0f, 900);
    tu_fill_uniform(vc, VC, 1.0f, 901);
    cl_mem k_cache = tu_dev_alloc(ctx, KC, NULL), v_cache = tu_dev_alloc(ctx, VC, NULL);
    /* the initial rows, as a prefill would have left them */
    clattn_sdpa_desc d = cache_desc();
    for (size_t step = 0; step <= STEPS; step++) {
        const size_t n = step == 0 ? 3 : 1; /* new rows per sequence: a prefill, then decoding */
        tu_set_label("step %zu (%zu new rows) [%s] on %s", step, n, names[TU_CASE(_i)], tu_dev_spec[dev]);
        float *kn = tu_falloc(B * KVH * n * D), *vn = tu_falloc(B * KVH * n * DV), *q = tu_falloc(B * H * n * D);
        tu_fill_uniform(kn, B * KVH * n * D, 1.0f, 910 + step);
        tu_fill_uniform(vn, B * KVH * n * DV, 1.0f, 920 + step);
        tu_fill_uniform(q, B * H * n * D, 1.0f, 930 + step);
        if (step == 0) /* the rows already in the cache before the loop */
            for (size_t b = 0; b < B; b++)
                for (size_t h = 0; h < KVH; h++)
                    for (size_t r = 0; r < len[b]; r++) {
                        cl_mem m[2] = {k_cache, v_cache};
                        const size_t dims[2] = {D, DV};
                        const float *src[2] = {kc, vc};
                        for (int t = 0; t < 2; t++) {
                            const size_t at = ((b * KVH + h) * CAP + r) * dims[t];
                            ck_assert_int_eq(clEnqueueWriteBuffer(clattn_context_queue(ctx), m[t], CL_TRUE,
                                                                  at * sizeof(float), dims[t] * sizeof(float),
                                                                  src[t] + at, 0, NULL, NULL),
                                             CL_SUCCESS);
                        }
                    }
        cl_mem mk = tu_dev_alloc(ctx, B * KVH * n * D, kn), mv = tu_dev_alloc(ctx, B * KVH * n * DV, vn);
        TU_ASSERT_OK(clattn_kv_append(ctx, &d, len, n, mk, mv, k_cache, v_cache), ctx, "clattn_kv_append");
        /* the host copy grows the same way */
        for (size_t b = 0; b < B; b++)
            for (size_t h = 0; h < KVH; h++)
                for (size_t r = 0; r < n; r++) {
                    memcpy(kc + ((b * KVH + h) * CAP + len[b] + r) * D, kn + ((b * KVH + h) * n + r) * D,
                           D * sizeof(float));
                    memcpy(vc + ((b * KVH + h) * CAP + len[b] + r) * DV, vn + ((b * KVH + h) * n + r) * DV,
                           DV * sizeof(float));
                }
        long long offsets[B];
        size_t lengths[B];
        for (size_t b = 0; b < B; b++) {
            offsets[b] = (long long)len[b];
            lengths[b] = len[b] + n;
        }
        clattn_masks m = CLATTN_MASKS_INIT;
        m.causal = CLATTN_CAUSAL_TOP_LEFT;
        m.key_lengths = lengths;
        m.query_offsets = offsets;
        clattn_sdpa_desc a = cache_desc();
        a.q_len = n;
        a.masks = &m;
        a.algorithm = alg;
        cl_mem mq = tu_dev_alloc(ctx, B * H * n * D, q), mo = tu_dev_alloc(ctx, B * H * n * DV, NULL),
               ml = tu_dev_alloc(ctx, B * H * n, NULL);
        TU_ASSERT_OK(clattn_sdpa(ctx, &a, mq, k_cache, v_cache, NULL, mo, NULL, ml), ctx, "clattn_sdpa");
        tu_finish(ctx);
        double *ro = tu_dalloc(B * H * n * DV), *rl = tu_dalloc(B * H * n);
        ref_sdpa(&a, q, kc, vc, NULL, ro, NULL, rl);
        check_close_named("out", tu_dev_read_checked(ctx, mo, B * H * n * DV, "out"), ro, B * H * n * DV, NULL);
        check_close_named("lse", tu_dev_read_checked(ctx, ml, B * H * n, "lse"), rl, B * H * n, NULL);
        for (size_t b = 0; b < B; b++)
            len[b] += n;
    }
    /* The cache holds exactly the valid rows, and nothing was written past them. */
    const float *k = tu_dev_read_checked(ctx, k_cache, KC, "k_cache");
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < KVH; h++)
            for (size_t r = 0; r < CAP; r++)
                for (size_t t = 0; t < D; t++) {
                    const size_t at = ((b * KVH + h) * CAP + r) * D + t;
                    if (r < len[b])
                        ck_assert_msg(k[at] == kc[at], "%s: k_cache row %zu of (%zu,%zu) differs", tu_label(), r, b, h);
                    else
                        ck_assert_msg(tu_is_sentinel(k[at]), "%s: k_cache row %zu of (%zu,%zu), past length %zu, "
                                      "was written", tu_label(), r, b, h, len[b]);
                }
}
END_TEST

/* Past the capacity, NULL lengths, aliasing, short buffers: refused, the cache unchanged. */
START_TEST(test_append_errors)
{
    const size_t dev = _i;
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("clattn_kv_append misuse on %s", tu_dev_spec[dev]);
    cl_mem kc = tu_dev_alloc(ctx, KC, NULL), vc = tu_dev_alloc(ctx, VC, NULL);
    cl_mem kn = tu_dev_alloc_exact(ctx, B * KVH * 2 * D, NULL), vn = tu_dev_alloc_exact(ctx, B * KVH * 2 * DV, NULL);
    cl_mem short_k = tu_dev_alloc_exact(ctx, KC - 1, NULL);
    clattn_sdpa_desc d = cache_desc();
    size_t full[B] = {0, CAP - 1, 3}, ok[B] = {0, 1, 2};
    ck_assert_int_eq(clattn_kv_append(ctx, &d, full, 2, kn, vn, kc, vc), CLATTN_ERROR_INVALID_VALUE);
    ck_assert_msg(strstr(clattn_last_error(ctx), "lengths[1]") != NULL, "%s", clattn_last_error(ctx));
    ck_assert_int_eq(clattn_kv_append(ctx, &d, NULL, 2, kn, vn, kc, vc), CLATTN_ERROR_NULL_ARGUMENT);
    ck_assert_int_eq(clattn_kv_append(ctx, &d, ok, 0, kn, vn, kc, vc), CLATTN_ERROR_ZERO_SIZE);
    ck_assert_int_eq(clattn_kv_append(ctx, &d, ok, 2, kn, vn, kc, kc), CLATTN_ERROR_INVALID_VALUE); /* K = V */
    ck_assert_int_eq(clattn_kv_append(ctx, &d, ok, 2, kn, vn, short_k, vc), CLATTN_ERROR_BUFFER_TOO_SMALL);
    ck_assert_msg(strstr(clattn_last_error(ctx), "k_cache") != NULL, "%s", clattn_last_error(ctx));
    ck_assert_int_eq(clattn_kv_append(ctx, &d, ok, 3, kn, vn, kc, vc), CLATTN_ERROR_BUFFER_TOO_SMALL);
    ck_assert_msg(strstr(clattn_last_error(ctx), "k_new") != NULL, "%s", clattn_last_error(ctx));
    tu_finish(ctx);
    ck_assert_msg(tu_dev_all_sentinel(ctx, kc, KC) && tu_dev_all_sentinel(ctx, vc, VC), "%s: a refused append wrote",
                  tu_label());
}
END_TEST

/* ONNX's past/present: one case per (past_len, new rows, queries, masks). */
typedef struct {
    const char *name;
    size_t past, news, L;
    clattn_causal causal;
    int key_lengths; /* batch b sees past + news − b keys */
    int narrow_mask; /* an (L, past + news − 2) float mask */
} past_case;

static const past_case past_cases[] = {
    {"decode: 19 past rows, 1 new, bottom-right causal", 19, 1, 1, BR, 0, 0},
    {"prefill: no past, 6 new rows, top-left causal", 0, 6, 6, TL, 0, 0},
    {"chunked prefill: 11 past, 4 new, bottom-right, key lengths", 11, 4, 4, BR, 1, 0},
    {"speculative: 23 past, 3 new, narrow mask", 23, 3, 3, NONE, 0, 1},
};
#define NPAST (sizeof past_cases / sizeof past_cases[0])

/* Rows of (B, KVH, rows, dim) tensors: past then new, per (batch, head). */
static float *concat_rows(const float *past, size_t p, const float *news, size_t n, size_t dim)
{
    float *out = tu_falloc(B * KVH * (p + n) * dim + 1);
    for (size_t bh = 0; bh < B * KVH; bh++) {
        memcpy(out + bh * (p + n) * dim, past + bh * p * dim, p * dim * sizeof(float));
        memcpy(out + (bh * (p + n) + p) * dim, news + bh * n * dim, n * dim * sizeof(float));
    }
    return out;
}

START_TEST(test_past_present)
{
    const size_t dev = TU_DEVICE(_i), ci = TU_CASE(_i) / 2;
    const int host = TU_CASE(_i) % 2;
    const past_case *c = &past_cases[ci];
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("past/present \"%s\" [%s] on %s", c->name, host ? "host" : "cl_mem", tu_dev_spec[dev]);
    const size_t P = c->past, N = c->news, T = P + N, L = c->L;
    const size_t npk = B * KVH * P * D, npv = B * KVH * P * DV, nk = B * KVH * N * D, nv = B * KVH * N * DV;
    const size_t nq = B * H * L * D, no = B * H * L * DV, nl = B * H * L;
    float *pk = tu_falloc(npk + 1), *pv = tu_falloc(npv + 1), *k = tu_falloc(nk), *v = tu_falloc(nv),
          *q = tu_falloc(nq);
    tu_fill_uniform(pk, npk, 1.0f, 40 + ci);
    tu_fill_uniform(pv, npv, 1.0f, 41 + ci);
    tu_fill_uniform(k, nk, 1.0f, 42 + ci);
    tu_fill_uniform(v, nv, 1.0f, 43 + ci);
    tu_fill_uniform(q, nq, 1.0f, 44 + ci);
    clattn_masks m = CLATTN_MASKS_INIT;
    m.causal = c->causal;
    size_t lengths[B];
    for (size_t b = 0; b < B; b++)
        lengths[b] = T - b;
    if (c->key_lengths)
        m.key_lengths = lengths;
    float *mask = NULL, *ref_mask = NULL;
    if (c->narrow_mask) { /* (L, T − 2), and the reference's (L, T) with −inf in the last two columns */
        m.additive = CLATTN_MASK_L_S;
        m.mask_kv_len = T - 2;
        mask = tu_falloc(L * (T - 2));
        tu_fill_uniform(mask, L * (T - 2), 1.0f, 45);
        ref_mask = tu_falloc(L * T);
        for (size_t i = 0; i < L; i++)
            for (size_t j = 0; j < T; j++)
                ref_mask[i * T + j] = j < T - 2 ? mask[i * (T - 2) + j] : -INFINITY;
    }
    clattn_sdpa_desc d = tu_sdpa_desc(B, H, L, N, D, DV);
    d.kv_heads = KVH;
    d.masks = &m;
    float *present_k, *present_v, *o, *l;
    clattn_status st;
    if (host) {
        present_k = tu_host_alloc(B * KVH * T * D, NULL);
        present_v = tu_host_alloc(B * KVH * T * DV, NULL);
        o = tu_host_alloc(no, NULL);
        l = tu_host_alloc(nl, NULL);
        st = clattn_sdpa_with_past_host(ctx, &d, P, P ? pk : NULL, P ? pv : NULL, q, k, v, mask, present_k, present_v,
                                        o, NULL, l);
        TU_ASSERT_OK(st, ctx, "clattn_sdpa_with_past_host");
    } else {
        cl_mem mpk = P ? tu_dev_alloc(ctx, npk, pk) : NULL, mpv = P ? tu_dev_alloc(ctx, npv, pv) : NULL;
        cl_mem mk = tu_dev_alloc(ctx, nk, k), mv = tu_dev_alloc(ctx, nv, v), mq = tu_dev_alloc(ctx, nq, q);
        cl_mem mm = mask ? tu_dev_alloc(ctx, L * (T - 2), mask) : NULL;
        cl_mem mpres_k = tu_dev_alloc(ctx, B * KVH * T * D, NULL), mpres_v = tu_dev_alloc(ctx, B * KVH * T * DV, NULL);
        cl_mem mo = tu_dev_alloc(ctx, no, NULL), ml = tu_dev_alloc(ctx, nl, NULL);
        st = clattn_sdpa_with_past(ctx, &d, P, mpk, mpv, mq, mk, mv, mm, mpres_k, mpres_v, mo, NULL, ml);
        TU_ASSERT_OK(st, ctx, "clattn_sdpa_with_past");
        tu_finish(ctx);
        tu_dev_check_guard(ctx, mpres_k, B * KVH * T * D, "present_k");
        present_k = tu_dev_read_checked(ctx, mpres_k, B * KVH * T * D, "present_k");
        present_v = tu_dev_read_checked(ctx, mpres_v, B * KVH * T * DV, "present_v");
        o = tu_dev_read_checked(ctx, mo, no, "out");
        l = tu_dev_read_checked(ctx, ml, nl, "lse");
    }
    const float *want_k = concat_rows(pk, P, k, N, D), *want_v = concat_rows(pv, P, v, N, DV);
    ck_assert_msg(memcmp(present_k, want_k, B * KVH * T * D * sizeof(float)) == 0, "%s: present_k is not "
                  "concat(past_k, k)", tu_label());
    ck_assert_msg(memcmp(present_v, want_v, B * KVH * T * DV * sizeof(float)) == 0, "%s: present_v is not "
                  "concat(past_v, v)", tu_label());
    clattn_sdpa_desc r = d;
    clattn_masks rm = m;
    r.kv_len = T;
    rm.mask_kv_len = 0;
    r.masks = &rm;
    double *ro = tu_dalloc(no), *rl = tu_dalloc(nl);
    ref_sdpa(&r, q, want_k, want_v, ref_mask, ro, NULL, rl);
    check_close_named("out", o, ro, no, NULL);
    check_close_named("lse", l, rl, nl, NULL);
}
END_TEST

/* Misuse of clattn_sdpa_with_past: refused, nothing written. */
START_TEST(test_past_errors)
{
    const size_t dev = _i;
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("clattn_sdpa_with_past misuse on %s", tu_dev_spec[dev]);
    enum { P = 5, N = 2, T = P + N };
    clattn_sdpa_desc d = tu_sdpa_desc(B, H, 1, N, D, DV);
    d.kv_heads = KVH;
    cl_mem pk = tu_dev_alloc_exact(ctx, B * KVH * P * D, NULL), pv = tu_dev_alloc_exact(ctx, B * KVH * P * DV, NULL);
    cl_mem k = tu_dev_alloc(ctx, B * KVH * N * D, NULL), v = tu_dev_alloc(ctx, B * KVH * N * DV, NULL);
    cl_mem q = tu_dev_alloc(ctx, B * H * D, NULL);
    cl_mem prk = tu_dev_alloc(ctx, B * KVH * T * D, NULL), prv = tu_dev_alloc(ctx, B * KVH * T * DV, NULL);
    cl_mem short_prk = tu_dev_alloc_exact(ctx, B * KVH * T * D - 1, NULL);
    cl_mem o = tu_dev_alloc(ctx, B * H * DV, NULL);
    ck_assert_int_eq(clattn_sdpa_with_past(ctx, &d, P, prk, pv, q, k, v, NULL, prk, prv, o, NULL, NULL),
                     CLATTN_ERROR_INVALID_VALUE); /* present = past */
    ck_assert_msg(strstr(clattn_last_error(ctx), "present_k") != NULL, "%s", clattn_last_error(ctx));
    ck_assert_int_eq(clattn_sdpa_with_past(ctx, &d, P, pk, pv, q, k, v, NULL, prk, prk, o, NULL, NULL),
                     CLATTN_ERROR_INVALID_VALUE); /* present_k = present_v */
    ck_assert_int_eq(clattn_sdpa_with_past(ctx, &d, P, NULL, pv, q, k, v, NULL, prk, prv, o, NULL, NULL),
                     CLATTN_ERROR_NULL_ARGUMENT);
    ck_assert_msg(strstr(clattn_last_error(ctx), "past_k") != NULL, "%s", clattn_last_error(ctx));
    ck_assert_int_eq(clattn_sdpa_with_past(ctx, &d, P, pk, pv, q, k, v, NULL, short_prk, prv, o, NULL, NULL),
                     CLATTN_ERROR_BUFFER_TOO_SMALL);
    ck_assert_int_eq(clattn_sdpa_with_past(ctx, &d, P + 1, pk, pv, q, k, v, NULL, prk, prv, o, NULL, NULL),
                     CLATTN_ERROR_BUFFER_TOO_SMALL); /* the past holds P rows, not P + 1 */
    ck_assert_msg(strstr(clattn_last_error(ctx), "past_k") != NULL, "%s", clattn_last_error(ctx));
    ck_assert_int_eq(clattn_sdpa_with_past(ctx, &d, SIZE_MAX, pk, pv, q, k, v, NULL, prk, prv, o, NULL, NULL),
                     CLATTN_ERROR_SIZE_OVERFLOW);
    d.kv_len = 0;
    ck_assert_int_eq(clattn_sdpa_with_past(ctx, &d, P, pk, pv, q, k, v, NULL, prk, prv, o, NULL, NULL),
                     CLATTN_ERROR_ZERO_SIZE);
    tu_finish(ctx);
    ck_assert_msg(tu_dev_all_sentinel(ctx, prk, B * KVH * T * D) && tu_dev_all_sentinel(ctx, o, B * H * DV),
                  "%s: a refused call wrote", tu_label());
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("kvcache");
    tu_add_loop(s, "decode_loop", test_decode_loop, 3 * tu_ndev);
    tu_add_loop(s, "past_present", test_past_present, 2 * NPAST * tu_ndev);
    tu_add_loop(s, "past_errors", test_past_errors, tu_ndev);
    tu_add_loop(s, "append_errors", test_append_errors, tu_ndev);
    return s;
}

int main(void) { return tu_main(make_suite); }
