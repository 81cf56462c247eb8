/*
 * The layer in reproducible arithmetic (clattn_mha and clattn_mha_backward with desc.arithmetic =
 * CLATTN_ARITHMETIC_REPRODUCIBLE; issue 41) on every device: its projections run clattn's GEMM in its exact build
 * (cl/gemm.cl), whatever the tuning asks (CLBlast included), its attention and the attention's backward the
 * reproducible kernels. For each case —
 *  1. the output and every gradient against the fp64 reference layer (ref_mha, ref_mha_backward) within
 *     test_backward.c's bound (16 float32 ulps of the array's largest entry), the same bits whatever desc.algorithm
 *     asks, and fingerprints equal to tests/data/reproducible_layer_hashes.txt's (recorded on PoCL; rusticl and
 *     oclgrind must give their bits; CLATTN_TEST_WRITE_HASHES=FILE writes the lines);
 *  2. under five other tunings (GEMM tiles, CLBlast asked for, attention tiles, the GPU class): the same bits;
 *  3. where there are two devices or more (reproducible_layer-group: PoCL's and rusticl's), a device group's layer —
 *     whole batches a device, then one batch's query rows split — gives each device alone's bits.
 */
#include "test_util.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct lcase {
    const char *name;
    size_t B, L, S, dm, dkv, H, KVH, D, od;
    int cross, causal, bias, wo;
    int tiny; /* weights' entries below 2^-40, X's subnormal and near FLT_MIN, biases below 2^-103 */
} lcase;

static const lcase cases[] = {
    {"self, biases, W_O, causal", 2, 13, 13, 24, 0, 3, 3, 8, 0, 0, 1, 1, 1, 0},
    {"cross, GQA 4/2, kv_dim 20, out_dim 10", 1, 9, 30, 16, 20, 4, 2, 8, 10, 1, 0, 1, 1, 0},
    {"self, no biases, no W_O, 70 rows", 1, 70, 70, 32, 0, 2, 2, 16, 0, 0, 1, 0, 0, 0},
    {"tiny entries, biases, W_O", 1, 11, 11, 24, 0, 2, 2, 12, 0, 0, 0, 1, 1, 1},
};
#define N_CASES (sizeof cases / sizeof cases[0])

static const char *const tunings[] = {"gemm=clattn:6x3", "gemm=clblast", "gemm=clattn:1x1,fused=16x32x2x4x2",
                                      "gemm=clattn:4x2,fused=8x128x3x8x2", "class=gpu"};
#define N_TUNINGS (sizeof tunings / sizeof tunings[0])
static size_t tunings_run = N_TUNINGS; /* CLATTN_TEST_REPRODUCIBLE_SUBSET=1: two */

#define N_ARRAYS 14 /* x, kv, the eight weights and biases, d_out; out; the gradients are their own */
enum { X, KV, WQ, BQ, WK, BK, WV, BV, WO, BO, DOUT, OUT };

typedef struct layer_state {
    clattn_mha_desc d;
    clattn_masks m;
    float *a[N_ARRAYS]; /* inputs (NULL where the case has none), then out */
    size_t n[N_ARRAYS];
    float *g[BO + 1]; /* the gradients of x … b_o (NULL where none) */
    size_t gn[BO + 1]; /* their sizes (a bias's gradient whether or not the layer has the bias) */
} layer_state;

static void make(const lcase *c, layer_state *r, uint64_t seed)
{
    memset(r, 0, sizeof *r);
    r->d = (clattn_mha_desc)CLATTN_MHA_DESC_INIT;
    r->d.batch = c->B, r->d.q_len = c->L, r->d.kv_len = c->cross ? c->S : 0, r->d.model_dim = c->dm;
    r->d.kv_dim = c->dkv, r->d.heads = c->H, r->d.kv_heads = c->KVH, r->d.qk_dim = c->D, r->d.out_dim = c->od;
    r->d.arithmetic = CLATTN_ARITHMETIC_REPRODUCIBLE;
    r->m = (clattn_masks)CLATTN_MASKS_INIT;
    r->m.causal = c->causal ? CLATTN_CAUSAL_TOP_LEFT : CLATTN_CAUSAL_NONE;
    r->d.masks = &r->m;
    const size_t S = c->cross ? c->S : c->L, dkv = c->cross && c->dkv ? c->dkv : c->dm, od = c->od ? c->od : c->dm;
    const size_t ycols = c->wo ? od : c->H * c->D;
    r->n[X] = c->B * c->L * c->dm, r->n[KV] = c->cross ? c->B * S * dkv : 0;
    r->n[WQ] = c->dm * c->H * c->D, r->n[BQ] = c->bias ? c->H * c->D : 0;
    r->n[WK] = r->n[WV] = dkv * c->KVH * c->D, r->n[BK] = r->n[BV] = c->bias ? c->KVH * c->D : 0;
    r->n[WO] = c->wo ? c->H * c->D * od : 0, r->n[BO] = c->wo && c->bias ? od : 0;
    r->n[DOUT] = r->n[OUT] = c->B * c->L * ycols;
    const float spread[OUT] = {1.0f, 1.0f, 0.3f, 0.5f, 0.3f, 0.5f, 0.3f, 0.5f, 0.3f, 0.5f, 1.0f};
    for (int i = 0; i < OUT; i++)
        if (r->n[i]) {
            r->a[i] = tu_falloc(r->n[i]);
            tu_fill_uniform(r->a[i], r->n[i], spread[i], seed + (uint64_t)i);
        }
    if (c->tiny) { /* (the GEMM's cuts and its sums' grid: cl/gemm.cl) */
        for (size_t e = 0; e < r->n[X]; e += 7)
            r->a[X][e] = e % 2 ? 1e-39f : -2e-38f;
        for (size_t e = c->dm; e < 2 * c->dm; e++) /* (a row of X wholly cut: column 0 of its Q is then +0) */
            r->a[X][e] = 1e-20f;
        for (int i = WQ; i <= WO; i += 2)
            for (size_t e = 1; e < r->n[i]; e += 5)
                r->a[i][e] = e % 2 ? 3e-13f : -1e-20f;
        for (int i = BQ; i <= BO; i += 2)
            if (r->a[i])
                r->a[i][0] = 1e-35f;
    }
    r->a[OUT] = tu_falloc(r->n[OUT]);
    for (int i = X; i <= BO; i++)
        r->gn[i] = r->n[i];
    r->gn[BQ] = c->H * c->D, r->gn[BK] = r->gn[BV] = c->KVH * c->D, r->gn[BO] = c->wo ? od : 0;
    for (int i = X; i <= BO; i++)
        r->g[i] = r->gn[i] ? tu_falloc(r->gn[i]) : NULL;
}

static clattn_mha_host_weights weights_of(const layer_state *r)
{
    clattn_mha_host_weights w = CLATTN_MHA_HOST_WEIGHTS_INIT;
    w.w_q = r->a[WQ], w.b_q = r->a[BQ], w.w_k = r->a[WK], w.b_k = r->a[BK], w.w_v = r->a[WV], w.b_v = r->a[BV];
    w.w_o = r->a[WO], w.b_o = r->a[BO];
    return w;
}

static void run(clattn_context *ctx, layer_state *r, clattn_algorithm algo)
{
    clattn_mha_desc d = r->d;
    d.algorithm = algo;
    const clattn_mha_host_weights w = weights_of(r);
    TU_ASSERT_OK(clattn_mha_host(ctx, &d, r->a[X], r->a[KV], &w, NULL, r->a[OUT], NULL), ctx,
                 "the reproducible layer");
    clattn_mha_host_grads g = CLATTN_MHA_HOST_GRADS_INIT;
    g.d_x = r->g[X], g.d_kv = r->g[KV], g.d_w_q = r->g[WQ], g.d_b_q = r->g[BQ], g.d_w_k = r->g[WK];
    g.d_b_k = r->g[BK], g.d_w_v = r->g[WV], g.d_b_v = r->g[BV], g.d_w_o = r->g[WO], g.d_b_o = r->g[BO];
    TU_ASSERT_OK(clattn_mha_backward_host(ctx, &d, r->a[X], r->a[KV], &w, NULL, r->a[DOUT], &g), ctx,
                 "the reproducible layer's backward");
}

static uint64_t forward_print(const layer_state *r) { return tu_fnv(r->a[OUT], r->n[OUT] * 4, TU_FNV_START); }

static uint64_t backward_print(const layer_state *r)
{
    uint64_t h = TU_FNV_START;
    for (int i = X; i <= BO; i++)
        if (r->g[i])
            h = tu_fnv(r->g[i], r->gn[i] * 4, h);
    return h;
}

static void fingerprints_expected(const lcase *c, const layer_state *r)
{
    char name[160];
    snprintf(name, sizeof name, "%s, forward", c->name);
    tu_expect_fingerprint("reproducible_layer_hashes.txt", name, forward_print(r));
    snprintf(name, sizeof name, "%s, backward", c->name);
    tu_expect_fingerprint("reproducible_layer_hashes.txt", name, backward_print(r));
}

START_TEST(test_cases)
{
    const lcase *c = &cases[TU_CASE(_i)];
    const size_t dev = TU_DEVICE(_i);
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("reproducible layer, %s, on %s", c->name, tu_dev_spec[dev]);
    layer_state *r = tu_track_malloc(sizeof *r);
    make(c, r, 700 + TU_CASE(_i) * 20);
    run(ctx, r, CLATTN_ALGORITHM_AUTO);
    const clattn_mha_host_weights w = weights_of(r);
    double *ref_out = tu_dalloc(r->n[OUT]), *rg[BO + 1] = {NULL};
    ref_mha(&r->d, r->a[X], r->a[KV], &w, NULL, ref_out, NULL);
    tu_check_gradient("out", r->a[OUT], ref_out, r->n[OUT], CLATTN_FLOAT32, 0.0);
    for (int i = X; i <= BO; i++)
        rg[i] = r->gn[i] ? tu_dalloc(r->gn[i]) : NULL;
    const ref_mha_grads g = {rg[X], rg[KV], rg[WQ], rg[BQ], rg[WK], rg[BK], rg[WV], rg[BV], rg[WO], rg[BO]};
    ref_mha_backward(&r->d, r->a[X], r->a[KV], &w, NULL, r->a[DOUT], &g);
    static const char *const names[BO + 1] = {"d_x", "d_kv", "d_w_q", "d_b_q", "d_w_k", "d_b_k", "d_w_v",
                                              "d_b_v", "d_w_o", "d_b_o"};
    /* (a floor of 16 units of the largest gradient's last place: the key bias's gradient is exactly 0, a sum of dK
     * rows whose rounding errors are of the other gradients' size) */
    double scale = 0.0;
    for (int i = X; i <= BO; i++)
        for (size_t e = 0; r->g[i] && e < r->gn[i]; e++)
            scale = fmax(scale, fabs(rg[i][e]));
    for (int i = X; i <= BO; i++)
        if (r->g[i])
            tu_check_gradient(names[i], r->g[i], rg[i], r->gn[i], CLATTN_FLOAT32, 16 * 0x1p-23 * scale);
    /* The same bits whatever desc.algorithm asks, and the recorded ones. */
    static const clattn_algorithm algos[2] = {CLATTN_ALGORITHM_FUSED, CLATTN_ALGORITHM_STAGED};
    for (int a = 0; a < 2; a++) {
        layer_state *again = tu_track_malloc(sizeof *again);
        make(c, again, 700 + TU_CASE(_i) * 20);
        run(ctx, again, algos[a]);
        ck_assert_msg(forward_print(again) == forward_print(r) && backward_print(again) == backward_print(r),
                      "%s: desc.algorithm %s changed the bits", tu_label(), tu_algorithm_name(algos[a]));
    }
    fingerprints_expected(c, r);
}
END_TEST

/* 2. Each tuning in a context of its own, over every case: the recorded fingerprints. */
START_TEST(test_tunings)
{
    const size_t t = (size_t)_i % tunings_run, dev = (size_t)_i / tunings_run;
    if (tu_recording())
        return; /* (recording: test_cases' runs are the ones recorded) */
    clattn_context *other = tu_tuned_context(dev, tunings[t]);
    for (size_t c = 0; c < N_CASES; c++) {
        tu_set_label("reproducible layer, %s, tuning \"%s\", on %s", cases[c].name, tunings[t], tu_dev_spec[dev]);
        layer_state *r = tu_track_malloc(sizeof *r);
        make(&cases[c], r, 700 + c * 20);
        run(other, r, CLATTN_ALGORITHM_AUTO);
        fingerprints_expected(&cases[c], r);
    }
    clattn_context_free(other);
}
END_TEST

/* 3. A device group's layer, every device given the same speed (so that each takes a share). */
START_TEST(test_group)
{
    char specs[256] = "";
    size_t used = 0;
    for (size_t i = 0; i < tu_ndev && i < 4; i++)
        used += (size_t)snprintf(specs + used, sizeof specs - used, "%s%.31s", i ? "," : "", tu_dev_spec[i]);
    const lcase *c = &cases[0]; /* (2 batches; its causal mask moves with a query-row split) */
    for (size_t batches = c->B; batches >= 1; batches--) {
        tu_set_label("reproducible group layer of %s, %zu batches", specs, batches);
        layer_state *r = tu_track_malloc(sizeof *r);
        make(c, r, 990);
        r->d.batch = batches;
        clattn_group *g = NULL;
        TU_ASSERT_OK(clattn_group_create(&g, specs), NULL, "clattn_group_create");
        for (size_t i = 0; i < clattn_group_size(g); i++)
            TU_ASSERT_OK(clattn_group_set_speed(g, i, 1.0), NULL, "clattn_group_set_speed");
        const clattn_mha_host_weights w = weights_of(r);
        float *out = tu_falloc(r->n[OUT]), *alone = tu_falloc(r->n[OUT]);
        const clattn_status st = clattn_group_mha_host(g, &r->d, r->a[X], r->a[KV], &w, NULL, out);
        clattn_group_free(g);
        TU_ASSERT_OK(st, NULL, "clattn_group_mha_host, reproducible");
        const size_t n = r->n[OUT] / c->B * batches;
        for (size_t i = 0; i < tu_ndev; i++) {
            TU_ASSERT_OK(clattn_mha_host(tu_ctx[i], &r->d, r->a[X], r->a[KV], &w, NULL, alone, NULL), tu_ctx[i],
                         "clattn_mha_host, reproducible");
            ck_assert_msg(memcmp(out, alone, n * sizeof(float)) == 0, "%s: the group's bits differ from %s alone",
                          tu_label(), tu_dev_spec[i]);
        }
    }
}
END_TEST

static Suite *reproducible_layer_suite(void)
{
    const char *subset = getenv("CLATTN_TEST_REPRODUCIBLE_SUBSET");
    if (subset && strcmp(subset, "1") == 0)
        tunings_run = 2;
    Suite *s = suite_create("reproducible_layer");
    tu_add_loop(s, "cases", test_cases, N_CASES * tu_ndev);
    tu_add_loop(s, "tunings", test_tunings, tunings_run * tu_ndev);
    if (tu_ndev > 1) /* (a group of one device splits nothing) */
        tu_add_loop(s, "group", test_group, 1);
    return s;
}

int main(void) { return tu_main(reproducible_layer_suite); }
