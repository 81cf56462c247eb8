/*
 * The variants in layers and masks (test_variants' second half; variants_test.h): layers with every
 * variant (grouped K/V projections, soft-capping, sinks, ALiBi, windows, offsets, cross-attention) against
 * ref_mha; masks read in place (every broadcast layout, bool and float, narrower than S) and their
 * refusals; the weights output at each of ONNX's qk_matmul_output_mode points; values the kernels cannot
 * compute with.
 */
#include "variants_test.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* Layers with the variants: W_K and W_V of kv_heads·D columns (and their biases), soft-capping,
 * sinks, ALiBi, a window and query offsets under a causal mask; cross-attention too; both paths
 * (staged with the attention weights) against ref_mha. */
typedef struct {
    const char *name;
    size_t B, L, S, dm, H, Hkv, hd;
    int cross, with_wo;
    float softcap;
    int sinks, alibi;
    clattn_causal causal;
    clattn_window window; /* used when window_on */
    int window_on, offsets;
} layer_case;

static const layer_case layer_cases[] = {
    {"GQA 6/2, W_O, softcap, sinks", 2, 11, 0, 24, 6, 2, 5, 0, 1, 20.0f, 1, 0, CLATTN_CAUSAL_NONE, {0, 0}, 0, 0},
    {"MQA 4/1, ALiBi, causal, window (3,-1)", 2, 13, 0, 16, 4, 1, 7, 0, 0, 0.0f, 0, 1, CLATTN_CAUSAL_TOP_LEFT,
     {3, -1}, 1, 0},
    {"cross-attention GQA 6/3, offsets, bottom-right, every term", 2, 7, 19, 12, 6, 3, 4, 1, 1, 5.0f, 1, 1,
     CLATTN_CAUSAL_BOTTOM_RIGHT, {4, 2}, 1, 1},
};
#define N_LAYER_CASES (sizeof layer_cases / sizeof layer_cases[0])

START_TEST(test_layers)
{
    const layer_case *c = &layer_cases[TU_CASE(_i)];
    const size_t dev = TU_DEVICE(_i);
    const size_t S = c->cross ? c->S : c->L, kvd = c->dm, cols = c->H * c->hd, kv_cols = c->Hkv * c->hd;
    const size_t ycols = c->with_wo ? c->dm : cols;
    float *x = tu_falloc(c->B * c->L * c->dm), *kv = c->cross ? tu_falloc(c->B * S * kvd) : NULL;
    tu_fill_uniform(x, c->B * c->L * c->dm, 1.0f, 700 + TU_CASE(_i));
    if (kv)
        tu_fill_uniform(kv, c->B * S * kvd, 1.0f, 710);
    float *wq = tu_falloc(c->dm * cols), *wk = tu_falloc(kvd * kv_cols), *wv = tu_falloc(kvd * kv_cols),
          *wo = tu_falloc(cols * c->dm), *bq = tu_falloc(cols), *bk = tu_falloc(kv_cols), *bv = tu_falloc(kv_cols);
    tu_fill_uniform(wq, c->dm * cols, 0.4f, 720);
    tu_fill_uniform(wk, kvd * kv_cols, 0.4f, 721);
    tu_fill_uniform(wv, kvd * kv_cols, 0.4f, 722);
    tu_fill_uniform(wo, cols * c->dm, 0.4f, 723);
    tu_fill_uniform(bq, cols, 0.3f, 724);
    tu_fill_uniform(bk, kv_cols, 0.3f, 725);
    tu_fill_uniform(bv, kv_cols, 0.3f, 726);
    float *sinks = tu_falloc(c->H), *slopes = tu_falloc(c->H);
    tu_fill_uniform(sinks, c->H, 1.5f, 727);
    for (size_t h = 0; h < c->H; h++)
        slopes[h] = 0.25f / (float)(h + 1);

    clattn_masks m = CLATTN_MASKS_INIT;
    m.causal = c->causal;
    m.window = c->window_on ? &c->window : NULL;
    long long offsets[2] = {(long long)S - (long long)c->L, 2};
    m.query_offsets = c->offsets ? offsets : NULL;
    clattn_mha_desc d = CLATTN_MHA_DESC_INIT;
    d.batch = c->B;
    d.q_len = c->L;
    d.kv_len = c->cross ? S : 0;
    d.model_dim = c->dm;
    d.heads = c->H;
    d.kv_heads = c->Hkv;
    d.qk_dim = c->hd;
    d.softcap = c->softcap;
    d.sinks = c->sinks ? sinks : NULL;
    d.alibi_slopes = c->alibi ? slopes : NULL;
    d.masks = &m;
    clattn_mha_host_weights w = CLATTN_MHA_HOST_WEIGHTS_INIT;
    w.w_q = wq;
    w.b_q = bq;
    w.w_k = wk;
    w.b_k = bk;
    w.w_v = wv;
    w.b_v = bv;
    w.w_o = c->with_wo ? wo : NULL;

    const size_t ny = c->B * c->L * ycols, nw = c->B * c->H * c->L * S;
    double *ry = tu_dalloc(ny), *rw = tu_dalloc(nw);
    ref_mha(&d, x, kv, &w, NULL, ry, rw);
    for (int a = 0; a < TU_NPATHS; a++) {
        tu_set_label("layer %s [%s] on %s", c->name, tu_algorithm_name(tu_paths[a]), tu_dev_spec[dev]);
        d.algorithm = tu_paths[a];
        float *y = tu_host_alloc(ny, NULL), *aw = tu_paths[a] == CLATTN_ALGORITHM_STAGED ? tu_host_alloc(nw, NULL) : NULL;
        clattn_status st = clattn_mha_host(tu_ctx[dev], &d, x, kv, &w, NULL, y, aw);
        TU_ASSERT_OK(st, tu_ctx[dev], "clattn_mha_host");
        tu_host_check_guard(y, ny, "out");
        check_close_named("out", y, ry, ny, NULL);
        if (aw) {
            tu_host_check_guard(aw, nw, "attn_weights");
            check_close_named("attn_weights", aw, rw, nw, NULL);
        }
    }
}
END_TEST

/* Masks read in place: every broadcast layout, float and bool entries, and masks narrower than S
 * (the keys past them masked), on both paths and through clattn_sdpa (cl_mem) as well, against the
 * reference given the same mask expanded on the host to a float (B, H, L, S) mask. */
typedef struct {
    clattn_mask_layout layout;
    clattn_mask_type type;
    size_t cols; /* mask_kv_len; 0: S */
    const char *name;
} compact_case;

static const compact_case compact_cases[] = {
    {CLATTN_MASK_L_S, CLATTN_MASK_BOOL, 0, "(L,S) bool"},
    {CLATTN_MASK_B_H_L_S, CLATTN_MASK_BOOL, 0, "(B,H,L,S) bool"},
    {CLATTN_MASK_B_1_L_S, CLATTN_MASK_FLOAT, 0, "(B,1,L,S) float"},
    {CLATTN_MASK_B_1_L_S, CLATTN_MASK_BOOL, 0, "(B,1,L,S) bool"},
    {CLATTN_MASK_1_H_L_S, CLATTN_MASK_FLOAT, 0, "(1,H,L,S) float"},
    {CLATTN_MASK_1_H_L_S, CLATTN_MASK_BOOL, 0, "(1,H,L,S) bool"},
    {CLATTN_MASK_B_1_1_S, CLATTN_MASK_FLOAT, 0, "(B,1,1,S) float"},
    {CLATTN_MASK_B_1_1_S, CLATTN_MASK_BOOL, 0, "(B,1,1,S) bool"},
    {CLATTN_MASK_L_S, CLATTN_MASK_FLOAT, 19, "(L,19) float, narrower than S"},
    {CLATTN_MASK_B_1_L_S, CLATTN_MASK_BOOL, 5, "(B,1,L,5) bool, narrower than S"},
    {CLATTN_MASK_B_1_1_S, CLATTN_MASK_BOOL, 1, "(B,1,1,1) bool"},
};
#define N_COMPACT (sizeof compact_cases / sizeof compact_cases[0])

START_TEST(test_compact_masks)
{
    const compact_case *c = &compact_cases[TU_CASE(_i)];
    const size_t dev = TU_DEVICE(_i);
    enum { B = 2, H = 3, L = 13, S = 29, D = 9 };
    const size_t cols = c->cols ? c->cols : S;
    const size_t mats = c->layout == CLATTN_MASK_B_H_L_S ? B * H
                        : c->layout == CLATTN_MASK_B_1_L_S || c->layout == CLATTN_MASK_B_1_1_S ? B
                        : c->layout == CLATTN_MASK_1_H_L_S ? H : 1;
    const size_t rows = c->layout == CLATTN_MASK_B_1_1_S ? 1 : L, n = mats * rows * cols;
    /* The compact mask: bools allow about 3 keys in 4 (some rows none), floats are noise with −inf. */
    unsigned char *bools = (unsigned char *)tu_falloc(n);
    float *floats = tu_falloc(n);
    tu_fill_uniform(floats, n, 1.0f, 800 + TU_CASE(_i));
    for (size_t t = 0; t < n; t++) {
        bools[t] = (unsigned char)((t * 7 + t / cols) % 4 != 0) * (unsigned char)(1 + t % 3);
        if (t % 11 == 5)
            floats[t] = -INFINITY;
    }
    if (rows > 1) /* a row that allows nothing: fully masked (bool) or all −inf (float) */
        for (size_t j = 0; j < cols; j++) {
            bools[2 * cols + j] = 0;
            floats[2 * cols + j] = -INFINITY;
        }
    /* The same mask as the reference takes it: float, (B, H, L, S), keys past `cols` masked. */
    float *full = tu_falloc((size_t)B * H * L * S);
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++)
            for (size_t i = 0; i < L; i++)
                for (size_t j = 0; j < S; j++) {
                    const size_t m = c->layout == CLATTN_MASK_B_H_L_S ? b * H + h
                                     : c->layout == CLATTN_MASK_B_1_L_S || c->layout == CLATTN_MASK_B_1_1_S ? b
                                     : c->layout == CLATTN_MASK_1_H_L_S ? h : 0;
                    const size_t at = (m * rows + (rows == 1 ? 0 : i)) * cols + j;
                    float value = -INFINITY;
                    if (j < cols)
                        value = c->type == CLATTN_MASK_BOOL ? (bools[at] ? 0.0f : -INFINITY) : floats[at];
                    full[((b * H + h) * L + i) * S + j] = value;
                }
    float *q = tu_falloc(B * H * L * D), *k = tu_falloc(B * H * S * D), *v = tu_falloc(B * H * S * D);
    tu_fill_uniform(q, B * H * L * D, 1.0f, 810);
    tu_fill_uniform(k, B * H * S * D, 1.0f, 811);
    tu_fill_uniform(v, B * H * S * D, 1.0f, 812);

    clattn_masks full_masks = CLATTN_MASKS_INIT;
    full_masks.additive = CLATTN_MASK_B_H_L_S;
    clattn_sdpa_desc d = tu_sdpa_desc(B, H, L, S, D, 0);
    d.masks = &full_masks;
    double *ro = tu_dalloc(B * H * L * D), *rw = tu_dalloc((size_t)B * H * L * S), *rl = tu_dalloc(B * H * L);
    ref_sdpa(&d, q, k, v, full, ro, rw, rl);

    clattn_masks m = CLATTN_MASKS_INIT;
    m.additive = c->layout;
    m.mask_type = c->type;
    m.mask_kv_len = c->cols;
    d.masks = &m;
    const void *mask = c->type == CLATTN_MASK_BOOL ? (const void *)bools : (const void *)floats;
    for (int a = 0; a < TU_NPATHS; a++) {
        tu_set_label("mask %s [%s] on %s", c->name, tu_algorithm_name(tu_paths[a]), tu_dev_spec[dev]);
        d.algorithm = tu_paths[a];
        float *o = tu_host_alloc(B * H * L * D, NULL), *l = tu_host_alloc(B * H * L, NULL);
        float *w = tu_paths[a] == CLATTN_ALGORITHM_STAGED ? tu_host_alloc((size_t)B * H * L * S, NULL) : NULL;
        TU_ASSERT_OK(clattn_sdpa_host(tu_ctx[dev], &d, q, k, v, mask, o, w, l), tu_ctx[dev], "clattn_sdpa_host");
        check_close_named("out", o, ro, B * H * L * D, NULL);
        check_close_named("lse", l, rl, B * H * L, NULL);
        if (w)
            check_close_named("weights", w, rw, (size_t)B * H * L * S, NULL);
    }
    /* cl_mem: a buffer of exactly the compact mask's bytes is enough; one byte less is too small. */
    tu_set_label("mask %s [cl_mem, auto] on %s", c->name, tu_dev_spec[dev]);
    d.algorithm = CLATTN_ALGORITHM_AUTO;
    const size_t bytes = n * (c->type == CLATTN_MASK_BOOL ? 1 : sizeof(float));
    cl_context cl = clattn_context_cl_context(tu_ctx[dev]);
    cl_int err;
    cl_mem bq = clCreateBuffer(cl, CL_MEM_COPY_HOST_PTR, B * H * L * D * sizeof(float), q, &err);
    cl_mem bk = clCreateBuffer(cl, CL_MEM_COPY_HOST_PTR, B * H * S * D * sizeof(float), k, &err);
    cl_mem bv = clCreateBuffer(cl, CL_MEM_COPY_HOST_PTR, B * H * S * D * sizeof(float), v, &err);
    cl_mem bm = clCreateBuffer(cl, CL_MEM_COPY_HOST_PTR, bytes, (void *)mask, &err);
    cl_mem small = bytes > 1 ? clCreateBuffer(cl, CL_MEM_READ_ONLY, bytes - 1, NULL, &err) : NULL;
    cl_mem bo = clCreateBuffer(cl, CL_MEM_READ_WRITE, B * H * L * D * sizeof(float), NULL, &err);
    ck_assert(bq && bk && bv && bm && bo);
    TU_ASSERT_OK(clattn_sdpa(tu_ctx[dev], &d, bq, bk, bv, bm, bo, NULL, NULL), tu_ctx[dev], "clattn_sdpa");
    float *o = tu_host_alloc(B * H * L * D, NULL);
    ck_assert_int_eq(clEnqueueReadBuffer(clattn_context_queue(tu_ctx[dev]), bo, CL_TRUE, 0,
                                         B * H * L * D * sizeof(float), o, 0, NULL, NULL),
                     CL_SUCCESS);
    check_close_named("out (cl_mem)", o, ro, B * H * L * D, NULL);
    if (small)
        ck_assert_int_eq(clattn_sdpa(tu_ctx[dev], &d, bq, bk, bv, small, bo, NULL, NULL),
                         CLATTN_ERROR_BUFFER_TOO_SMALL);
    cl_mem all[] = {bq, bk, bv, bm, small, bo};
    for (size_t t = 0; t < sizeof all / sizeof all[0]; t++)
        if (all[t])
            clReleaseMemObject(all[t]);
}
END_TEST

/* A mask wider than S, an unknown type or layout, a non-zero mask_reserved. */
START_TEST(test_compact_mask_errors)
{
    const size_t dev = _i;
    tu_set_label("mask errors on %s", tu_dev_spec[dev]);
    float q[2 * 3 * 4], mask[64];
    tu_fill_uniform(q, 24, 1.0f, 820);
    memset(mask, 0, sizeof mask);
    clattn_masks m = CLATTN_MASKS_INIT;
    m.additive = CLATTN_MASK_L_S;
    clattn_sdpa_desc d = tu_sdpa_desc(1, 2, 3, 3, 4, 0);
    d.masks = &m;
    const struct {
        size_t kv_len;
        int type, layout;
        unsigned reserved;
        clattn_status want;
        const char *field;
    } bad[] = {
        {4, CLATTN_MASK_FLOAT, CLATTN_MASK_L_S, 0, CLATTN_ERROR_INVALID_MASK, "mask_kv_len"},
        {0, 7, CLATTN_MASK_L_S, 0, CLATTN_ERROR_INVALID_VALUE, "mask_type"},
        {0, CLATTN_MASK_FLOAT, 6, 0, CLATTN_ERROR_INVALID_VALUE, "additive"},
        {0, CLATTN_MASK_FLOAT, CLATTN_MASK_L_S, 1, CLATTN_ERROR_INVALID_VALUE, "mask_reserved"},
    };
    for (size_t t = 0; t < sizeof bad / sizeof bad[0]; t++) {
        m.mask_kv_len = bad[t].kv_len;
        m.mask_type = (clattn_mask_type)bad[t].type;
        m.additive = (clattn_mask_layout)bad[t].layout;
        m.mask_reserved = bad[t].reserved;
        float *out = tu_host_alloc(24, NULL);
        clattn_status st = clattn_sdpa_host(tu_ctx[dev], &d, q, q, q, mask, out, NULL, NULL);
        ck_assert_msg(st == bad[t].want, "%s: %s: got %s", tu_label(), bad[t].field, clattn_status_string(st));
        ck_assert_msg(strstr(clattn_last_error(tu_ctx[dev]), bad[t].field) != NULL, "%s: detail \"%s\" names no %s",
                      tu_label(), clattn_last_error(tu_ctx[dev]), bad[t].field);
        ck_assert_msg(tu_host_all_sentinel(out, 24), "%s: %s: out written", tu_label(), bad[t].field);
    }
}
END_TEST

/* The weights output at each of ONNX's qk_matmul_output_mode points, on the staged path (which AUTO
 * picks when the weights are wanted) and through a layer: Q·Kᵀ·scale and its soft-capped form for
 * every key, masked or not; what the softmax takes (ALiBi, masks, −inf where hidden); the softmax.
 * The output and lse are the same in every mode. */
START_TEST(test_weights_output)
{
    const clattn_weights_output mode = (clattn_weights_output)TU_CASE(_i);
    const size_t dev = TU_DEVICE(_i);
    static const char *const names[] = {"softmax", "QK", "softcapped", "masked"};
    enum { B = 2, H = 4, KVH = 2, L = 9, S = 14, D = 6 };
    float *q = tu_falloc(B * H * L * D), *k = tu_falloc(B * KVH * S * D), *v = tu_falloc(B * KVH * S * D);
    float *mask = tu_falloc(L * S), slopes[H] = {0.5f, 0.25f, 0.125f, 0.0625f};
    tu_fill_uniform(q, B * H * L * D, 2.0f, 830);
    tu_fill_uniform(k, B * KVH * S * D, 2.0f, 831);
    tu_fill_uniform(v, B * KVH * S * D, 1.0f, 832);
    tu_fill_uniform(mask, L * S, 1.0f, 833);
    mask[3 * S + 4] = -INFINITY;
    const clattn_window window = {4, -1};
    clattn_masks m = CLATTN_MASKS_INIT;
    m.causal = CLATTN_CAUSAL_BOTTOM_RIGHT;
    m.window = &window;
    m.additive = CLATTN_MASK_L_S;
    clattn_sdpa_desc d = tu_sdpa_desc(B, H, L, S, D, 0);
    d.kv_heads = KVH;
    d.softcap = 1.5f;
    d.alibi_slopes = slopes;
    d.masks = &m;
    const size_t nw = (size_t)B * H * L * S;
    double *ro = tu_dalloc(B * H * L * D), *rw = tu_dalloc(nw), *rl = tu_dalloc(B * H * L), *want = tu_dalloc(nw);
    ref_sdpa(&d, q, k, v, mask, ro, rw, rl);
    if (mode == CLATTN_WEIGHTS_MASKED)
        ref_score(&d, q, k, mask, want);
    for (size_t bh = 0; bh < (size_t)B * H && (mode == CLATTN_WEIGHTS_QK || mode == CLATTN_WEIGHTS_SOFTCAPPED); bh++)
        for (size_t i = 0; i < L; i++)
            for (size_t j = 0; j < S; j++) {
                const size_t b = bh / H, hk = bh % H / (H / KVH);
                double dot = 0;
                for (size_t t = 0; t < D; t++)
                    dot += (double)q[(bh * L + i) * D + t] * k[((b * KVH + hk) * S + j) * D + t];
                dot /= sqrt((double)D);
                want[(bh * L + i) * S + j] = mode == CLATTN_WEIGHTS_QK ? dot : 1.5 * tanh(dot / 1.5);
            }
    if (mode == CLATTN_WEIGHTS_SOFTMAX)
        memcpy(want, rw, nw * sizeof *want);
    d.weights_output = mode;
    tu_set_label("weights output %s [sdpa, auto] on %s", names[mode], tu_dev_spec[dev]);
    float *o = tu_host_alloc(B * H * L * D, NULL), *w = tu_host_alloc(nw, NULL), *l = tu_host_alloc(B * H * L, NULL);
    TU_ASSERT_OK(clattn_sdpa_host(tu_ctx[dev], &d, q, k, v, mask, o, w, l), tu_ctx[dev], "clattn_sdpa_host");
    check_close_named("weights output", w, want, nw, NULL);
    check_close_named("out", o, ro, B * H * L * D, NULL);
    check_close_named("lse", l, rl, B * H * L, NULL);
    /* FUSED cannot give any of them. */
    d.algorithm = CLATTN_ALGORITHM_FUSED;
    ck_assert_int_eq(clattn_sdpa_host(tu_ctx[dev], &d, q, k, v, mask, o, w, l), CLATTN_ERROR_INVALID_VALUE);
}
END_TEST

/* Values the kernels could not compute with: a subnormal softcap (a flushed-zero divisor) and an ALiBi
 * slope whose bias passes 1e30 over the call's positions (offsets included) are refused, naming them. */
START_TEST(test_value_limits)
{
    const size_t dev = _i;
    tu_set_label("value limits on %s", tu_dev_spec[dev]);
    float q[1 * 2 * 3 * 4], slopes[2] = {0.5f, 0.5f};
    tu_fill_uniform(q, 24, 1.0f, 840);
    clattn_sdpa_desc d = tu_sdpa_desc(1, 2, 3, 3, 4, 0);
    float *out = tu_host_alloc(24, NULL);
    d.softcap = 1e-40f; /* subnormal */
    ck_assert_int_eq(clattn_sdpa_host(tu_ctx[dev], &d, q, q, q, NULL, out, NULL, NULL), CLATTN_ERROR_INVALID_VALUE);
    ck_assert_msg(strstr(clattn_last_error(tu_ctx[dev]), "softcap") != NULL, "%s", clattn_last_error(tu_ctx[dev]));
    d.softcap = FLT_MIN; /* the smallest normal cap works */
    TU_ASSERT_OK(clattn_sdpa_host(tu_ctx[dev], &d, q, q, q, NULL, out, NULL, NULL), tu_ctx[dev], "softcap FLT_MIN");
    d.softcap = 0.0f;
    d.alibi_slopes = slopes;
    slopes[1] = 2e29f; /* times up to 6 keys: beyond 1e30 */
    out = tu_host_alloc(24, NULL);
    ck_assert_int_eq(clattn_sdpa_host(tu_ctx[dev], &d, q, q, q, NULL, out, NULL, NULL), CLATTN_ERROR_INVALID_VALUE);
    ck_assert_msg(strstr(clattn_last_error(tu_ctx[dev]), "alibi_slopes[1]") != NULL, "%s",
                  clattn_last_error(tu_ctx[dev]));
    ck_assert_msg(tu_host_all_sentinel(out, 24), "%s: out written", tu_label());
    /* distances of 2^24 keys and more are not exact in float: refused whatever the slope */
    slopes[1] = 0.5f;
    long long offsets[1] = {(long long)1 << 60};
    clattn_masks m = CLATTN_MASKS_INIT;
    m.query_offsets = offsets;
    d.masks = &m;
    ck_assert_int_eq(clattn_sdpa_host(tu_ctx[dev], &d, q, q, q, NULL, out, NULL, NULL), CLATTN_ERROR_INVALID_VALUE);
    ck_assert_msg(strstr(clattn_last_error(tu_ctx[dev]), "2^24") != NULL, "%s", clattn_last_error(tu_ctx[dev]));
    offsets[0] = 5;
    TU_ASSERT_OK(clattn_sdpa_host(tu_ctx[dev], &d, q, q, q, NULL, out, NULL, NULL), tu_ctx[dev], "offset 5, slope 0.5");
}
END_TEST

void variants_add_mask_cases(Suite *s)
{
    tu_add_loop(s, "layers", test_layers, N_LAYER_CASES * tu_ndev);
    tu_add_loop(s, "compact_masks", test_compact_masks, N_COMPACT * tu_ndev);
    tu_add_loop(s, "compact_mask_errors", test_compact_mask_errors, tu_ndev);
    tu_add_loop(s, "weights_output", test_weights_output, 4 * tu_ndev);
    tu_add_loop(s, "value_limits", test_value_limits, tu_ndev);
}
