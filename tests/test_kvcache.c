/*
 * A KV cache the application owns, grown in place by clattn_kv_append and attended over with
 * clattn_sdpa (key lengths = the new lengths, query offsets = the old ones, causal): a prefill of 3
 * rows, then single-token decode steps, for sequences that start at different lengths, with grouped
 * query heads, on both paths; checked every step against the fp64 reference over a host copy of the
 * valid rows, and the cache rows past each length must stay untouched. Appends past the capacity and
 * other misuse are refused before anything is written.
 */
#include "test_util.h"

#include <string.h>

enum { B = 3, H = 4, KVH = 2, CAP = 40, D = 8, DV = 5, STEPS = 7 };
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
    const clattn_algorithm alg = TU_CASE(_i) ? CLATTN_ALGORITHM_STAGED : CLATTN_ALGORITHM_FUSED;
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
        tu_set_label("step %zu (%zu new rows) [%s] on %s", step, n, alg == CLATTN_ALGORITHM_FUSED ? "fused" : "staged",
                     tu_dev_spec[dev]);
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

static Suite *make_suite(void)
{
    Suite *s = suite_create("kvcache");
    tu_add_loop(s, "decode_loop", test_decode_loop, 2 * tu_ndev);
    tu_add_loop(s, "append_errors", test_append_errors, tu_ndev);
    return s;
}

int main(void) { return tu_main(make_suite); }
