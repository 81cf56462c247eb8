/*
 * The weights output in reproducible arithmetic (clattn_sdpa's `weights` with desc.arithmetic =
 * CLATTN_ARITHMETIC_REPRODUCIBLE; cl/exact_weights.cl; issue 41) on every device, in each of its four modes
 * (the softmax's weights, Q·Kᵀ·scale, after soft-capping, what the softmax takes). For each case and mode:
 *  1. the weights against the fp64 reference within the usual tolerance; the output and log-sum-exp the same bits
 *     as the reproducible call without weights; the same bits with desc.algorithm STAGED; fingerprints equal to
 *     tests/data/reproducible_weights_hashes.txt's (recorded on PoCL; rusticl and oclgrind must give their bits;
 *     CLATTN_TEST_WRITE_HASHES=FILE writes the lines);
 *  2. under three other tunings (rows in the lanes, a VEC of 8, the GPU class): the same bits;
 *  3. the layer's attention weights (clattn_mha_host): rows summing to 1, the output unchanged, the same bits with
 *     STAGED and under the GPU class.
 * Cases: masks of both kinds with windows, soft-capping, ALiBi and sinks; GQA; key lengths; K entries under the
 * fast path's limit (the careful path) and subnormal Q entries; q8_0 K with FP8 V.
 */
#include "formats_ref.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct wcase {
    const char *name;
    size_t B, H, KVH, L, S, D;
    clattn_causal causal;
    clattn_mask_layout mask;
    long long win_left; /* −2: none */
    float softcap;
    int alibi, sinks, key_lengths, tiny;
    clattn_dtype kt, vt;
} wcase;

static const wcase cases[] = {
    {"bottom-right causal, window 4, (L,S) mask, soft-capping, ALiBi, GQA 4/2", 2, 4, 2, 9, 14, 6,
     CLATTN_CAUSAL_BOTTOM_RIGHT, CLATTN_MASK_L_S, 4, 1.5f, 1, 0, 0, 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"top-left causal, sinks, key lengths, (B,H,L,S) mask with masked rows", 2, 2, 2, 20, 37, 40, CLATTN_CAUSAL_TOP_LEFT,
     CLATTN_MASK_B_H_L_S, -2, 0.0f, 0, 1, 1, 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"K entries under 2^-40 and near FLT_MIN, subnormal Q entries, no mask, L 5, S 70", 1, 3, 3, 5, 70, 64, CLATTN_CAUSAL_NONE,
     CLATTN_MASK_NONE, -2, 0.0f, 0, 0, 0, 1, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"q8_0 K, fp8_e4m3 V, GQA 2/1, causal, soft-capping", 1, 2, 1, 17, 33, 32, CLATTN_CAUSAL_TOP_LEFT, CLATTN_MASK_NONE,
     -2, 4.0f, 0, 0, 0, 0, CLATTN_Q8_0, CLATTN_FP8_E4M3},
};
#define N_CASES (sizeof cases / sizeof cases[0])
#define N_MODES 4
static const char *const mode_names[N_MODES] = {"softmax", "QK", "softcapped", "masked"};

static const char *const tunings[] = {"fused=16x32x2x4x2", "fused=8x64x1x8x1", "class=gpu"};
#define N_TUNINGS (sizeof tunings / sizeof tunings[0])

/* A case's inputs: the values (q, k, v floats: what K and V hold) and K and V as stored. */
typedef struct inputs {
    clattn_sdpa_desc d;
    tu_variants var;
    size_t lengths[2];
    float *q, *k, *v, *mask;
    void *kb, *vb;
    size_t nq, nk, nv, no, nl, nw;
} inputs;

static void *stored(clattn_dtype type, float *x, size_t n, size_t row)
{
    if (type == CLATTN_FLOAT32)
        return x;
    void *bytes = tu_falloc((clattn_dtype_bytes(type, n) + sizeof(float) - 1) / sizeof(float));
    fref_quantise(type, x, n, row, bytes, NULL);
    for (size_t i = 0; i < n; i++) /* (the reference reads the values the bytes hold) */
        x[i] = fref_value(type, bytes, i);
    return bytes;
}

static void make(const wcase *c, inputs *in, uint64_t seed)
{
    memset(in, 0, sizeof *in);
    in->d = tu_sdpa_desc(c->B, c->H, c->L, c->S, c->D, c->D);
    in->d.kv_heads = c->KVH;
    in->d.softcap = c->softcap;
    in->d.arithmetic = CLATTN_ARITHMETIC_REPRODUCIBLE;
    in->d.k_dtype = c->kt;
    in->d.v_dtype = c->vt;
    in->lengths[0] = c->S - 3, in->lengths[1] = c->S / 4;
    tu_variants_apply(&in->d, &in->var, c->causal, c->key_lengths ? in->lengths : NULL, NULL, c->win_left, c->sinks,
                      c->alibi);
    in->var.masks.additive = c->mask;
    in->nq = c->B * c->H * c->L * c->D, in->nk = in->nv = c->B * c->KVH * c->S * c->D;
    in->no = in->nq, in->nl = c->B * c->H * c->L, in->nw = in->nl * c->S;
    in->q = tu_falloc(in->nq), in->k = tu_falloc(in->nk), in->v = tu_falloc(in->nv);
    tu_fill_uniform(in->q, in->nq, 2.0f, seed);
    tu_fill_uniform(in->k, in->nk, 2.0f, seed + 1);
    tu_fill_uniform(in->v, in->nv, 1.0f, seed + 2);
    if (c->tiny) {
        for (size_t e = 3; e < in->nk; e += 11) /* (a K row with such an entry takes the careful path) */
            in->k[e] = e % 2 ? 3e-13f : -7e-14f;
        for (size_t e = 0; e < in->nq; e += 13)
            in->q[e] = e % 2 ? 1e-39f : -3e-40f;
        for (size_t e = 5 * c->D; e < 6 * c->D; e++) /* (key 5 of head 0: products and partial sums below FLT_MIN) */
            in->k[e] = (float)((int)(e % 5) - 2) * 1e-37f;
    }
    size_t n = 0;
    if (c->mask != CLATTN_MASK_NONE)
        in->mask = tu_make_mask(c->mask, c->B, c->H, c->L, c->S, TU_MASKF_ROWINF, seed + 3, &n);
    in->kb = stored(c->kt, in->k, in->nk, c->D);
    in->vb = stored(c->vt, in->v, in->nv, c->D);
}

/* The reproducible call with the weights in `mode`: out, weights and lse into the given arrays. */
static void run(clattn_context *ctx, inputs *in, clattn_weights_output mode, clattn_algorithm algo, float *o, float *w,
                float *l)
{
    clattn_sdpa_desc d = in->d;
    d.weights_output = mode;
    d.algorithm = algo;
    TU_ASSERT_OK(clattn_sdpa_host(ctx, &d, in->q, in->kb, in->vb, in->mask, o, w, l), ctx,
                 "clattn_sdpa_host, reproducible, with weights");
}

/* The fp64 weights of `mode` (test_variants_masks.c's: the reference's softmax or scores, and the raw and capped
 * dot products of every key). */
static void reference(const wcase *c, inputs *in, clattn_weights_output mode, double *want)
{
    double *ro = tu_dalloc(in->no), *rl = tu_dalloc(in->nl);
    clattn_sdpa_desc d = in->d;
    d.k_dtype = d.v_dtype = CLATTN_FLOAT32; /* (the values the bytes hold) */
    if (mode == CLATTN_WEIGHTS_SOFTMAX)
        ref_sdpa(&d, in->q, in->k, in->v, in->mask, ro, want, rl);
    else if (mode == CLATTN_WEIGHTS_MASKED)
        ref_score(&d, in->q, in->k, in->mask, want);
    else
        for (size_t bh = 0; bh < c->B * c->H; bh++)
            for (size_t i = 0; i < c->L; i++)
                for (size_t j = 0; j < c->S; j++) {
                    const size_t b = bh / c->H, hk = bh % c->H / (c->H / c->KVH);
                    double dot = 0;
                    for (size_t t = 0; t < c->D; t++)
                        dot += (double)in->q[(bh * c->L + i) * c->D + t] * in->k[((b * c->KVH + hk) * c->S + j) * c->D + t];
                    dot /= sqrt((double)c->D);
                    want[(bh * c->L + i) * c->S + j] =
                        mode == CLATTN_WEIGHTS_QK || c->softcap == 0.0f ? dot : c->softcap * tanh(dot / c->softcap);
                }
}

static void fingerprint_expected(const wcase *c, clattn_weights_output mode, const float *w, size_t n)
{
    char name[200];
    snprintf(name, sizeof name, "%s, %s", c->name, mode_names[mode]);
    tu_expect_fingerprint("reproducible_weights_hashes.txt", name, tu_fnv(w, n * sizeof *w, TU_FNV_START));
}

/* 1. Each case in each mode against the fp64 reference, the output unchanged, every algorithm's bits equal. */
START_TEST(test_cases)
{
    const size_t ci = TU_CASE(_i) / N_MODES, dev = TU_DEVICE(_i);
    const clattn_weights_output mode = (clattn_weights_output)(TU_CASE(_i) % N_MODES);
    const wcase *c = &cases[ci];
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("reproducible weights (%s), %s, on %s", mode_names[mode], c->name, tu_dev_spec[dev]);
    inputs *in = tu_track_malloc(sizeof *in);
    make(c, in, 500 + ci * 10);
    float *o = tu_host_alloc(in->no, NULL), *w = tu_host_alloc(in->nw, NULL), *l = tu_host_alloc(in->nl, NULL);
    run(ctx, in, mode, CLATTN_ALGORITHM_AUTO, o, w, l);
    tu_host_check_guard(w, in->nw, "weights");
    double *want = tu_dalloc(in->nw);
    reference(c, in, mode, want);
    check_close_named("weights", w, want, in->nw, NULL);
    /* The output and lse: the reproducible call's without weights. */
    float *o1 = tu_falloc(in->no), *l1 = tu_falloc(in->nl);
    TU_ASSERT_OK(clattn_sdpa_host(ctx, &in->d, in->q, in->kb, in->vb, in->mask, o1, NULL, l1), ctx,
                 "clattn_sdpa_host, reproducible");
    ck_assert_msg(memcmp(o, o1, in->no * sizeof *o) == 0 && memcmp(l, l1, in->nl * sizeof *l) == 0,
                  "%s: asking for the weights changed the output", tu_label());
    float *w2 = tu_falloc(in->nw); /* (FUSED refuses a weights output) */
    run(ctx, in, mode, CLATTN_ALGORITHM_STAGED, o1, w2, l1);
    ck_assert_msg(memcmp(w, w2, in->nw * sizeof *w) == 0, "%s: desc.algorithm STAGED changed the weights' bits",
                  tu_label());
    fingerprint_expected(c, mode, w, in->nw);
}
END_TEST

/* 2. Each tuning in a context of its own, every case and mode: the recorded fingerprints. */
START_TEST(test_tunings)
{
    const size_t t = (size_t)_i % N_TUNINGS, dev = (size_t)_i / N_TUNINGS;
    if (tu_recording())
        return; /* (test_cases' runs are the ones recorded) */
    clattn_context *other = tu_tuned_context(dev, tunings[t]);
    for (size_t ci = 0; ci < N_CASES; ci++)
        for (int mode = 0; mode < N_MODES; mode++) {
            tu_set_label("reproducible weights (%s), %s, tuning \"%s\", on %s", mode_names[mode], cases[ci].name,
                         tunings[t], tu_dev_spec[dev]);
            inputs *in = tu_track_malloc(sizeof *in);
            make(&cases[ci], in, 500 + ci * 10);
            float *o = tu_falloc(in->no), *w = tu_falloc(in->nw), *l = tu_falloc(in->nl);
            run(other, in, (clattn_weights_output)mode, CLATTN_ALGORITHM_AUTO, o, w, l);
            fingerprint_expected(&cases[ci], (clattn_weights_output)mode, w, in->nw);
        }
    clattn_context_free(other);
}
END_TEST

/* 3. The layer's attention weights (clattn_mha_host's attn_weights): rows that sum to 1 (to float32's rounding), the
 * output the layer's without them, the same bits with desc.algorithm STAGED and under the GPU class's tuning. */
START_TEST(test_layer)
{
    const size_t dev = _i;
    enum { B = 2, L = 11, DM = 24, H = 3, D = 8 };
    tu_set_label("reproducible layer weights on %s", tu_dev_spec[dev]);
    clattn_mha_desc d = CLATTN_MHA_DESC_INIT;
    d.batch = B, d.q_len = L, d.model_dim = DM, d.heads = H, d.qk_dim = D;
    d.arithmetic = CLATTN_ARITHMETIC_REPRODUCIBLE;
    clattn_masks m = CLATTN_MASKS_INIT;
    m.causal = CLATTN_CAUSAL_TOP_LEFT;
    d.masks = &m;
    float *x = tu_falloc(B * L * DM), *w[4];
    tu_fill_uniform(x, B * L * DM, 1.0f, 880);
    for (int i = 0; i < 4; i++) {
        w[i] = tu_falloc(DM * DM);
        tu_fill_uniform(w[i], DM * DM, 0.3f, 881 + (uint64_t)i);
    }
    clattn_mha_host_weights hw = CLATTN_MHA_HOST_WEIGHTS_INIT;
    hw.w_q = w[0], hw.w_k = w[1], hw.w_v = w[2], hw.w_o = w[3];
    const size_t nw = (size_t)B * H * L * L, no = (size_t)B * L * DM;
    float *o = tu_falloc(no), *aw = tu_host_alloc(nw, NULL), *o2 = tu_falloc(no), *aw2 = tu_falloc(nw);
    TU_ASSERT_OK(clattn_mha_host(tu_ctx[dev], &d, x, NULL, &hw, NULL, o, aw), tu_ctx[dev], "the layer with weights");
    tu_host_check_guard(aw, nw, "attn_weights");
    for (size_t r = 0; r < nw / L; r++) {
        double sum = 0.0;
        for (size_t j = 0; j < L; j++)
            sum += aw[r * L + j];
        ck_assert_msg(fabs(sum - 1.0) < 1e-5, "%s: row %zu of the weights sums to %.9g", tu_label(), r, sum);
    }
    TU_ASSERT_OK(clattn_mha_host(tu_ctx[dev], &d, x, NULL, &hw, NULL, o2, NULL), tu_ctx[dev], "the layer");
    ck_assert_msg(memcmp(o, o2, no * sizeof *o) == 0, "%s: asking for the weights changed the output", tu_label());
    d.algorithm = CLATTN_ALGORITHM_STAGED;
    TU_ASSERT_OK(clattn_mha_host(tu_ctx[dev], &d, x, NULL, &hw, NULL, o2, aw2), tu_ctx[dev], "the layer, STAGED");
    ck_assert_msg(memcmp(aw, aw2, nw * sizeof *aw) == 0, "%s: STAGED changed the weights' bits", tu_label());
    d.algorithm = CLATTN_ALGORITHM_AUTO;
    clattn_context *gpu = tu_tuned_context(dev, "class=gpu");
    TU_ASSERT_OK(clattn_mha_host(gpu, &d, x, NULL, &hw, NULL, o2, aw2), gpu, "the layer, GPU class");
    clattn_context_free(gpu);
    ck_assert_msg(memcmp(aw, aw2, nw * sizeof *aw) == 0, "%s: the GPU class changed the weights' bits", tu_label());
}
END_TEST

static Suite *reproducible_weights_suite(void)
{
    Suite *s = suite_create("reproducible_weights");
    tu_add_loop(s, "cases", test_cases, N_CASES * N_MODES * tu_ndev);
    tu_add_loop(s, "tunings", test_tunings, N_TUNINGS * tu_ndev);
    tu_add_loop(s, "layer", test_layer, tu_ndev);
    return s;
}

int main(void) { return tu_main(reproducible_weights_suite); }
