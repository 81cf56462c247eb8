/*
 * desc.logit_scale (0.7): a scale per head multiplying the scaled score before soft-capping, ALiBi and
 * the masks. Against the fp64 reference on every path (fused, staged, decode) and device, alone and with
 * the other score terms and masks, at odd sizes and with grouped-query heads; the staged path's score
 * outputs (QK without it, SOFTCAPPED and MASKED with it); a ragged batch (the decode kernels in their
 * ragged build) against the reference of each sequence; and its refusals.
 */
#include "test_util.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define MAXH 12

typedef struct ls_case {
    const char *name;
    size_t B, H, kv_heads, L, S, D, Dv;
    float softcap;
    bool alibi, causal, mask, key_lengths;
} ls_case;

static const ls_case cases[] = {
    {"alone", 2, 3, 0, 13, 29, 21, 7, 0.0f, false, false, false, false},
    {"softcap", 1, 4, 2, 17, 33, 16, 16, 2.5f, false, false, false, false},
    {"alibi causal", 2, 6, 3, 11, 40, 24, 9, 0.0f, true, true, false, false},
    {"everything", 2, 8, 2, 9, 37, 32, 20, 4.0f, true, true, true, true},
    {"decode rows", 3, 12, 4, 3, 301, 64, 64, 0.0f, false, true, false, true},
};
#define N_CASES (sizeof cases / sizeof cases[0])

static const clattn_algorithm paths[] = {CLATTN_ALGORITHM_FUSED, CLATTN_ALGORITHM_STAGED, CLATTN_ALGORITHM_DECODE};
static const char *const path_names[] = {"fused", "staged", "decode"};
#define N_PATHS 3

/* Scales per head: below and above 1, negative, and one of 0 (uniform weights over the visible keys). */
static void fill_scales(float *s, size_t H)
{
    for (size_t h = 0; h < H; h++)
        s[h] = h % 4 == 3 ? 0.0f : (float)(0.4 + 0.7 * (double)h) * (h % 2 ? -1.0f : 1.0f);
}

START_TEST(test_paths)
{
    const ls_case *c = &cases[TU_CASE(_i) / N_PATHS];
    const size_t path = TU_CASE(_i) % N_PATHS, dev = TU_DEVICE(_i);
    tu_set_label("logit_scale %s, %s path on %s", c->name, path_names[path], tu_dev_spec[dev]);
    clattn_sdpa_desc d = tu_sdpa_desc(c->B, c->H, c->L, c->S, c->D, c->Dv);
    d.kv_heads = c->kv_heads;
    d.softcap = c->softcap;
    d.algorithm = paths[path];
    float scales[MAXH], slopes[MAXH];
    fill_scales(scales, c->H);
    for (size_t h = 0; h < c->H; h++)
        slopes[h] = -0.05f * (float)(h + 1);
    d.logit_scale = scales;
    d.alibi_slopes = c->alibi ? slopes : NULL;
    size_t lengths[4];
    for (size_t b = 0; b < c->B; b++)
        lengths[b] = c->S - 3 * b;
    clattn_masks m = CLATTN_MASKS_INIT;
    m.causal = c->causal ? CLATTN_CAUSAL_BOTTOM_RIGHT : CLATTN_CAUSAL_NONE;
    m.key_lengths = c->key_lengths ? lengths : NULL;
    m.additive = c->mask ? CLATTN_MASK_L_S : CLATTN_MASK_NONE;
    d.masks = &m;
    const size_t kvh = c->kv_heads ? c->kv_heads : c->H;
    const size_t nq = c->B * c->H * c->L * c->D, nk = c->B * kvh * c->S * c->D, nv = c->B * kvh * c->S * c->Dv;
    const size_t no = c->B * c->H * c->L * c->Dv, nl = c->B * c->H * c->L;
    float *q = tu_falloc(nq), *k = tu_falloc(nk), *v = tu_falloc(nv), *mask = tu_falloc(c->L * c->S);
    tu_fill_uniform(q, nq, 1.5f, 11 + _i);
    tu_fill_uniform(k, nk, 1.5f, 12 + _i);
    tu_fill_uniform(v, nv, 1.0f, 13 + _i);
    tu_fill_uniform(mask, c->L * c->S, 1.0f, 14 + _i);
    double *ref = tu_dalloc(no), *ref_lse = tu_dalloc(nl);
    ref_sdpa(&d, q, k, v, c->mask ? mask : NULL, ref, NULL, ref_lse);
    float *out = tu_host_alloc(no, NULL), *lse = tu_host_alloc(nl, NULL);
    clattn_status st = clattn_sdpa_host(tu_ctx[dev], &d, q, k, v, c->mask ? mask : NULL, out, NULL, lse);
    TU_ASSERT_OK(st, tu_ctx[dev], "clattn_sdpa_host");
    check_close_named("out", out, ref, no, NULL);
    check_close_named("lse", lse, ref_lse, nl, NULL);
    /* The scale matters: the same call without it differs from the reference. */
    d.logit_scale = NULL;
    float *plain = tu_host_alloc(no, NULL);
    TU_ASSERT_OK(clattn_sdpa_host(tu_ctx[dev], &d, q, k, v, c->mask ? mask : NULL, plain, NULL, NULL), tu_ctx[dev],
                 "without logit_scale");
    double largest = 0;
    for (size_t i = 0; i < no; i++)
        largest = fmax(largest, fabs((double)plain[i] - ref[i]));
    ck_assert_msg(largest > 1e-3, "%s: the logit scales changed nothing (%g)", tu_label(), largest);
}
END_TEST

/* The staged path's score outputs: QK is Q·Kᵀ·scale as before, SOFTCAPPED and MASKED carry the scale. */
START_TEST(test_weights_outputs)
{
    const size_t dev = (size_t)_i;
    enum { B = 1, H = 3, L = 7, S = 11, D = 5 };
    static const clattn_weights_output modes[] = {CLATTN_WEIGHTS_QK, CLATTN_WEIGHTS_SOFTCAPPED, CLATTN_WEIGHTS_MASKED};
    float q[B * H * L * D], k[B * H * S * D], v[B * H * S * D], scales[H] = {0.5f, 2.0f, -1.25f};
    tu_fill_uniform(q, sizeof q / sizeof q[0], 1.0f, 1);
    tu_fill_uniform(k, sizeof k / sizeof k[0], 1.0f, 2);
    tu_fill_uniform(v, sizeof v / sizeof v[0], 1.0f, 3);
    for (size_t mi = 0; mi < 3; mi++) {
        tu_set_label("logit_scale, weights output mode %d on %s", (int)modes[mi], tu_dev_spec[dev]);
        clattn_sdpa_desc d = tu_sdpa_desc(B, H, L, S, D, D);
        d.softcap = 1.5f;
        d.logit_scale = scales;
        d.weights_output = modes[mi];
        clattn_masks m = CLATTN_MASKS_INIT;
        m.causal = CLATTN_CAUSAL_TOP_LEFT;
        d.masks = &m;
        float out[B * H * L * D], w[B * H * L * S];
        TU_ASSERT_OK(clattn_sdpa_host(tu_ctx[dev], &d, q, k, v, NULL, out, w, NULL), tu_ctx[dev], "clattn_sdpa_host");
        double want[B * H * L * S];
        const double scale = 1.0 / sqrt((double)D);
        for (size_t h = 0; h < H; h++)
            for (size_t i = 0; i < L; i++)
                for (size_t j = 0; j < S; j++) {
                    double dot = 0;
                    for (size_t t = 0; t < D; t++)
                        dot += (double)q[(h * L + i) * D + t] * (double)k[(h * S + j) * D + t];
                    const double s = dot * scale, capped = 1.5 * tanh(s * scales[h] / 1.5);
                    want[(h * L + i) * S + j] = modes[mi] == CLATTN_WEIGHTS_QK          ? s
                                                : modes[mi] == CLATTN_WEIGHTS_SOFTCAPPED ? capped
                                                : j <= i                                 ? capped
                                                                                         : -INFINITY;
                }
        check_close_named("weights", w, want, B * H * L * S, NULL);
    }
}
END_TEST

/* A ragged batch reads K/V through the decode kernels' ragged build: each sequence as the reference of
 * its dense call with the same logit scales says. */
START_TEST(test_layouts)
{
    const size_t dev = (size_t)_i;
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("logit_scale through ragged and paged layouts on %s", tu_dev_spec[dev]);
    enum { H = 4, KVH = 2, D = 16, L = 2 };
    static const size_t keys[2] = {37, 90};
    float scales[H] = {1.5f, 0.25f, -0.75f, 3.0f};
    const size_t rows_k = keys[0] + keys[1];
    float q[2 * L * H * D], k[(37 + 90) * KVH * D], v[(37 + 90) * KVH * D];
    tu_fill_uniform(q, sizeof q / sizeof q[0], 1.0f, 21);
    tu_fill_uniform(k, sizeof k / sizeof k[0], 1.0f, 22);
    tu_fill_uniform(v, sizeof v / sizeof v[0], 1.0f, 23);
    /* Ragged: rows (token, head, d), as clattn_sdpa_ragged_host takes them. */
    clattn_sdpa_desc d = tu_sdpa_desc(2, H, L, keys[1], D, D);
    d.kv_heads = KVH;
    d.logit_scale = scales;
    const size_t q_starts[3] = {0, L, 2 * L}, k_starts[3] = {0, keys[0], rows_k};
    clattn_ragged r = CLATTN_RAGGED_INIT;
    r.q_starts = q_starts;
    r.k_starts = k_starts;
    float out[2 * L * H * D];
    TU_ASSERT_OK(clattn_sdpa_ragged_host(ctx, &d, &r, q, k, v, NULL, out, NULL), ctx, "clattn_sdpa_ragged_host");
    for (size_t b = 0; b < 2; b++) {
        /* the dense reference of sequence b: (1, H, L, D) and (1, KVH, S_b, D) */
        clattn_sdpa_desc one = tu_sdpa_desc(1, H, L, keys[b], D, D);
        one.kv_heads = KVH;
        one.logit_scale = scales;
        float qd[H * L * D], kd[KVH * 90 * D], vd[KVH * 90 * D];
        for (size_t i = 0; i < L; i++)
            for (size_t h = 0; h < H; h++)
                memcpy(qd + (h * L + i) * D, q + ((q_starts[b] + i) * H + h) * D, D * sizeof(float));
        for (size_t j = 0; j < keys[b]; j++)
            for (size_t g = 0; g < KVH; g++) {
                memcpy(kd + (g * keys[b] + j) * D, k + ((k_starts[b] + j) * KVH + g) * D, D * sizeof(float));
                memcpy(vd + (g * keys[b] + j) * D, v + ((k_starts[b] + j) * KVH + g) * D, D * sizeof(float));
            }
        double ref[H * L * D], want[L * H * D];
        ref_sdpa(&one, qd, kd, vd, NULL, ref, NULL, NULL);
        for (size_t i = 0; i < L; i++)
            for (size_t h = 0; h < H; h++)
                for (size_t e = 0; e < D; e++)
                    want[(i * H + h) * D + e] = ref[(h * L + i) * D + e];
        check_close_named("ragged out", out + q_starts[b] * H * D, want, L * H * D, NULL);
    }
}
END_TEST

/* Non-finite scales are refused, naming the field and head, and nothing is written. */
START_TEST(test_refusals)
{
    const size_t dev = (size_t)_i;
    clattn_context *ctx = tu_ctx[dev];
    const float bad[3] = {NAN, INFINITY, -INFINITY};
    for (int t = 0; t < 3; t++) {
        tu_set_label("logit_scale[1] = %g refused on %s", (double)bad[t], tu_dev_spec[dev]);
        clattn_sdpa_desc d = tu_sdpa_desc(1, 2, 3, 5, 4, 4);
        float scales[2] = {1.0f, bad[t]}, q[24], k[40], v[40];
        tu_fill_uniform(q, 24, 1.0f, 1);
        tu_fill_uniform(k, 40, 1.0f, 2);
        tu_fill_uniform(v, 40, 1.0f, 3);
        d.logit_scale = scales;
        float *out = tu_host_alloc(24, NULL);
        const clattn_status st = clattn_sdpa_host(ctx, &d, q, k, v, NULL, out, NULL, NULL);
        ck_assert_msg(st == CLATTN_ERROR_INVALID_VALUE, "%s: %s", tu_label(), clattn_status_string(st));
        ck_assert_msg(strstr(clattn_last_error(ctx), "logit_scale[1]"), "%s: detail \"%s\"", tu_label(),
                      clattn_last_error(ctx));
        ck_assert_msg(tu_host_all_sentinel(out, 24), "%s: output written", tu_label());
    }
}
END_TEST

/* A 0.6 descriptor (struct_size ending before logit_scale) is read without it: whatever lies in the
 * field's place is never read, and the call is the one without logit scales. */
START_TEST(test_older_descriptor)
{
    const size_t dev = (size_t)_i;
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("a 0.6 descriptor on %s", tu_dev_spec[dev]);
    clattn_sdpa_desc d = tu_sdpa_desc(1, 2, 3, 5, 4, 4);
    float q[24], k[40], v[40], plain[24], old[24];
    tu_fill_uniform(q, 24, 1.0f, 4);
    tu_fill_uniform(k, 40, 1.0f, 5);
    tu_fill_uniform(v, 40, 1.0f, 6);
    TU_ASSERT_OK(clattn_sdpa_host(ctx, &d, q, k, v, NULL, plain, NULL, NULL), ctx, "the current descriptor");
    d.struct_size = offsetof(clattn_sdpa_desc, logit_scale);
    d.logit_scale = (const float *)(uintptr_t)0x10; /* past the 0.6 layout: must not be read */
    TU_ASSERT_OK(clattn_sdpa_host(ctx, &d, q, k, v, NULL, old, NULL, NULL), ctx, "a 0.6 descriptor");
    ck_assert_msg(memcmp(plain, old, sizeof plain) == 0, "%s: the outputs differ", tu_label());
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("logit_scale");
    tu_add_loop(s, "paths", test_paths, N_CASES * N_PATHS * tu_ndev);
    tu_add_loop(s, "weights_outputs", test_weights_outputs, tu_ndev);
    tu_add_loop(s, "layouts", test_layouts, tu_ndev);
    tu_add_loop(s, "refusals", test_refusals, tu_ndev);
    tu_add_loop(s, "older_descriptor", test_older_descriptor, tu_ndev);
    return s;
}

int main(void) { return tu_main(make_suite); }
