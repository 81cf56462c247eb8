/* The backward pass's fp64 reference (tools/reference: ref_sdpa_backward, issue 27) against central finite
 * differences of the fp64 forward (ref_sdpa_mods_d), no OpenCL: for the loss Σ dout·out, every element
 * of dQ, dK and dV (and d(sink) per head) equals (loss(x + ε) − loss(x − ε)) / 2ε over odd shapes and every
 * variant the forward has — causal of both kinds, query offsets, key lengths, windows, additive masks with
 * hidden entries, grouped-query heads (a K/V head's gradient summed over its query heads), soft-capping,
 * logit scales, ALiBi, sinks, a scale, a mask_mod (documents), a non-linear score_mod with its derivative,
 * rows that see no key (zero gradient). And the layer's (ref_mha_backward) against central differences of
 * ref_mha: dX, dKV, every weight and bias, self- and cross-attention. */
#define TU_NO_OPENCL /* the OpenCL-free part of the test utility */
#include "test_util.h"

#include "reference.h"
#include "smooth_mod.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct bcase {
    const char *name;
    size_t B, H, KVH, L, S, D, Dv;
    clattn_causal causal;
    int offsets, key_lengths, window, mask, softcap, logit_scale, alibi, sinks, scale, documents, score_mod;
} bcase;

static const bcase cases[] = {
    {"plain, B 2, H 2, L 5, S 7", 2, 2, 2, 5, 7, 4, 3, CLATTN_CAUSAL_NONE, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"causal top-left, GQA 4/2", 1, 4, 2, 6, 6, 3, 5, CLATTN_CAUSAL_TOP_LEFT, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"bottom-right L 7 > S 4 (rows seeing no key)", 2, 1, 1, 7, 4, 4, 4, CLATTN_CAUSAL_BOTTOM_RIGHT, 0, 0, 0, 0, 0, 0,
     0, 0, 0, 0, 0},
    {"offsets, key lengths, window", 2, 2, 1, 4, 9, 5, 2, CLATTN_CAUSAL_TOP_LEFT, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0},
    {"additive mask with hidden entries, scale 0.7", 1, 2, 2, 5, 6, 3, 3, CLATTN_CAUSAL_NONE, 0, 0, 0, 1, 0, 0, 0, 0,
     1, 0, 0},
    {"soft-capping 1.5 and logit scales", 2, 3, 3, 3, 5, 4, 4, CLATTN_CAUSAL_NONE, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0},
    {"ALiBi and sinks, GQA 3/1", 1, 3, 1, 5, 8, 2, 3, CLATTN_CAUSAL_TOP_LEFT, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0},
    {"everything", 2, 4, 2, 4, 7, 3, 2, CLATTN_CAUSAL_TOP_LEFT, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0},
    {"mask_mod: documents", 1, 2, 2, 8, 8, 3, 3, CLATTN_CAUSAL_NONE, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0},
    {"score_mod s + 0.3·sin(s)·(h + 1) with its derivative, soft-capping, causal", 2, 2, 1, 5, 6, 3, 4,
     CLATTN_CAUSAL_TOP_LEFT, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 1},
};
#define NCASES (sizeof cases / sizeof cases[0])

static const int document_of[8] = {0, 0, 0, 1, 1, 2, 2, 2};
static int documents(int b, int h, long long q, long long k, const void *u)
{
    (void)b, (void)h, (void)u;
    return q < 8 && k < 8 && document_of[q] == document_of[k];
}

/* A uniform deterministic value in [-1, 1) (no state: each case seeds its own). */
static double uniform(unsigned long long *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*s >> 11) / (double)(1ull << 52) - 1.0;
}

/* Σ dout·out of the forward at (q, k, v). */
static double loss(const clattn_sdpa_desc *d, const ref_mods *mods, const double *q, const double *k, const double *v,
                   const float *mask, const double *dout, double *out)
{
    ref_sdpa_mods_d(d, mods, q, k, v, mask, out, NULL, NULL);
    double sum = 0.0;
    const size_t n = d->batch * d->heads * d->q_len * ref_v_dim(d);
    for (size_t i = 0; i < n; i++)
        sum += dout[i] * out[i];
    return sum;
}

/* Every element of x: the analytic gradient g against the central difference of the loss. */
static double check_fd(const char *what, const clattn_sdpa_desc *d, const ref_mods *mods, double *q, double *k,
                       double *v, const float *mask, const double *dout, double *out, double *x, size_t n,
                       const double *g)
{
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double keep = x[i], eps = 1e-5 * fmax(1.0, fabs(keep));
        x[i] = keep + eps;
        const double up = loss(d, mods, q, k, v, mask, dout, out);
        x[i] = keep - eps;
        const double down = loss(d, mods, q, k, v, mask, dout, out);
        x[i] = keep;
        const double fd = (up - down) / (2.0 * eps), err = fabs(fd - g[i]);
        ck_assert_msg(err <= 1e-7 + 1e-6 * fabs(fd), "%s: %s[%zu] analytic %.10g, finite difference %.10g",
                      tu_label(), what, i, g[i], fd);
        worst = fmax(worst, err);
    }
    return worst;
}

static double worst_error;

START_TEST(test_finite_differences)
{
    const bcase *c = &cases[_i];
    tu_set_label("reference backward \"%s\"", c->name);
    clattn_sdpa_desc d = CLATTN_SDPA_DESC_INIT;
    d.batch = c->B, d.heads = c->H, d.kv_heads = c->KVH, d.q_len = c->L, d.kv_len = c->S;
    d.qk_dim = c->D, d.v_dim = c->Dv;
    d.scale = c->scale ? 0.7f : CLATTN_SCALE_DEFAULT;
    d.softcap = c->softcap ? 1.5f : 0.0f;
    float logit_scale[4] = {0.5f, 1.25f, 2.0f, 0.75f}, slopes[4] = {-0.25f, -0.5f, -0.125f, -1.0f};
    float sinks[4] = {0.5f, -1.0f, 1.5f, 0.0f};
    d.logit_scale = c->logit_scale ? logit_scale : NULL;
    d.alibi_slopes = c->alibi ? slopes : NULL;
    d.sinks = c->sinks ? sinks : NULL;
    clattn_masks m = CLATTN_MASKS_INIT;
    size_t lengths[2] = {c->S - 2, c->S};
    long long offsets[2] = {(long long)c->S - (long long)c->L, 1};
    clattn_window w = {2, 1};
    m.causal = c->causal;
    m.key_lengths = c->key_lengths ? lengths : NULL;
    m.query_offsets = c->offsets ? offsets : NULL;
    m.window = c->window ? &w : NULL;
    const size_t nq = c->B * c->H * c->L * c->D, nk = c->B * c->KVH * c->S * c->D, nv = c->B * c->KVH * c->S * c->Dv;
    const size_t no = c->B * c->H * c->L * c->Dv;
    unsigned long long seed = 1000 + _i;
    float *mask = NULL;
    if (c->mask) {
        m.additive = CLATTN_MASK_B_H_L_S;
        mask = tu_falloc(c->B * c->H * c->L * c->S);
        for (size_t i = 0; i < c->B * c->H * c->L * c->S; i++)
            mask[i] = i % 5 == 3 ? -INFINITY : (float)(0.5 * uniform(&seed));
    }
    d.masks = &m;
    double *q = tu_dalloc(nq), *k = tu_dalloc(nk), *v = tu_dalloc(nv), *dout = tu_dalloc(no), *out = tu_dalloc(no);
    for (size_t i = 0; i < nq; i++)
        q[i] = 1.5 * uniform(&seed);
    for (size_t i = 0; i < nk; i++)
        k[i] = 1.5 * uniform(&seed);
    for (size_t i = 0; i < nv; i++)
        v[i] = uniform(&seed);
    for (size_t i = 0; i < no; i++)
        dout[i] = uniform(&seed);
    const ref_mods mm = {c->score_mod ? ref_smooth : NULL, c->documents ? documents : NULL, NULL};
    const ref_mods *mods = c->documents || c->score_mod ? &mm : NULL;
    double *dq = tu_dalloc(nq), *dk = tu_dalloc(nk), *dv = tu_dalloc(nv), dsinks[4];
    ref_sdpa_backward_d(&d, mods, c->score_mod ? ref_smooth_grad : NULL, q, k, v, mask, dout, dq, dk, dv, dsinks);
    double worst = check_fd("dq", &d, mods, q, k, v, mask, dout, out, q, nq, dq);
    worst = fmax(worst, check_fd("dk", &d, mods, q, k, v, mask, dout, out, k, nk, dk));
    worst = fmax(worst, check_fd("dv", &d, mods, q, k, v, mask, dout, out, v, nv, dv));
    double largest = 0.0; /* the gradients are not all zero: the check compared something */
    for (size_t i = 0; i < nq; i++)
        largest = fmax(largest, fabs(dq[i]));
    ck_assert_msg(largest > 1e-3, "%s: dq is zero", tu_label());
    for (size_t h = 0; c->sinks && h < c->H; h++) { /* a sink is a float: steps of 2^-8, exact */
        const float keep = sinks[h], eps = 1.0f / 256.0f;
        sinks[h] = keep + eps;
        const double up = loss(&d, mods, q, k, v, mask, dout, out);
        sinks[h] = keep - eps;
        const double down = loss(&d, mods, q, k, v, mask, dout, out);
        sinks[h] = keep;
        const double fd = (up - down) / (2.0 * (double)eps);
        ck_assert_msg(fabs(fd - dsinks[h]) <= 1e-5 + 1e-4 * fabs(fd), "%s: dsinks[%zu] analytic %.10g, finite "
                      "difference %.10g", tu_label(), h, dsinks[h], fd);
    }
    /* Rows that see no key (bottom-right with L > S: the first L − S rows) get no gradient. */
    for (size_t b = 0; c->causal == CLATTN_CAUSAL_BOTTOM_RIGHT && b < c->B; b++)
        for (size_t h = 0; h < c->H; h++)
            for (size_t i = 0; i + c->S < c->L; i++)
                for (size_t t = 0; t < c->D; t++)
                    ck_assert(dq[((b * c->H + h) * c->L + i) * c->D + t] == 0.0);
    worst_error = fmax(worst_error, worst);
}
END_TEST

/* The layer's reference backward (ref_mha_backward) against central differences of ref_mha: for the loss
 * Σ d_out·out, every element of dX, dKV and every weight and bias. The inputs are floats, so a step is
 * taken in float and divided by the step the rounding left. */
typedef struct lcase {
    const char *name;
    size_t B, L, S, model, kv_dim, H, KVH, D, Dv, out_dim;
    int cross, w_o, biases;
    clattn_causal causal;
    int key_lengths;
} lcase;

static const lcase layer_cases[] = {
    {"self-attention, W_O to 5 columns, every bias, causal", 1, 4, 0, 6, 0, 2, 2, 3, 2, 5, 0, 1, 1,
     CLATTN_CAUSAL_TOP_LEFT, 0},
    {"cross-attention, GQA 2/1, no W_O, b_q only, key lengths", 2, 3, 5, 4, 3, 2, 1, 2, 3, 0, 1, 0, 0,
     CLATTN_CAUSAL_NONE, 1},
};

static double layer_loss(const clattn_mha_desc *d, const float *x, const float *kv, const clattn_mha_host_weights *w,
                         const float *d_out, size_t n_out)
{
    double *out = malloc(n_out * sizeof *out), sum = 0.0;
    ck_assert(out != NULL);
    ref_mha(d, x, kv, w, NULL, out, NULL);
    for (size_t i = 0; i < n_out; i++)
        sum += (double)d_out[i] * out[i];
    free(out);
    return sum;
}

START_TEST(test_layer_finite_differences)
{
    const lcase *c = &layer_cases[_i];
    tu_set_label("reference layer backward \"%s\"", c->name);
    const size_t S = c->cross ? c->S : c->L, kv_dim = c->cross ? c->kv_dim : c->model;
    const size_t hk = c->H * c->D, hv = c->H * c->Dv, nk = c->KVH * c->D, nv = c->KVH * c->Dv;
    const size_t od = c->out_dim ? c->out_dim : c->model, n_out = c->B * c->L * (c->w_o ? od : hv);
    clattn_masks m = CLATTN_MASKS_INIT;
    size_t lengths[2] = {S - 2, S};
    m.causal = c->causal;
    m.key_lengths = c->key_lengths ? lengths : NULL;
    clattn_mha_desc d = CLATTN_MHA_DESC_INIT;
    d.batch = c->B, d.q_len = c->L, d.kv_len = c->cross ? S : 0, d.model_dim = c->model, d.kv_dim = c->cross ? kv_dim : 0;
    d.heads = c->H, d.kv_heads = c->KVH, d.qk_dim = c->D, d.v_dim = c->Dv, d.out_dim = c->out_dim, d.masks = &m;
    /* x, kv, w_q, b_q, w_k, b_k, w_v, b_v, w_o, b_o, d_out */
    const size_t sizes[11] = {c->B * c->L * c->model, c->B * S * kv_dim, c->model * hk, hk, kv_dim * nk, nk,
                              kv_dim * nv, nv, hv * od, od, n_out};
    unsigned long long seed = 2000 + _i;
    float *a[11];
    for (int i = 0; i < 11; i++) {
        a[i] = tu_falloc(sizes[i]);
        for (size_t e = 0; e < sizes[i]; e++)
            a[i][e] = (float)((i >= 2 && i < 10 ? 0.6 : 1.0) * uniform(&seed));
    }
    clattn_mha_host_weights w = CLATTN_MHA_HOST_WEIGHTS_INIT;
    w.w_q = a[2], w.w_k = a[4], w.w_v = a[6];
    w.b_q = c->biases || c->cross ? a[3] : NULL;
    w.b_k = c->biases ? a[5] : NULL, w.b_v = c->biases ? a[7] : NULL;
    w.w_o = c->w_o ? a[8] : NULL, w.b_o = c->w_o && c->biases ? a[9] : NULL;
    double *g[10];
    for (int i = 0; i < 10; i++)
        g[i] = tu_dalloc(sizes[i]);
    const ref_mha_grads rg = {g[0], c->cross ? g[1] : NULL, g[2], g[3], g[4], g[5], g[6], g[7],
                              c->w_o ? g[8] : NULL, c->w_o ? g[9] : NULL};
    const float *kv = c->cross ? a[1] : NULL;
    ref_mha_backward(&d, a[0], kv, &w, NULL, a[10], &rg);
    static const char *const names[10] = {"d_x", "d_kv", "d_w_q", "d_b_q", "d_w_k", "d_b_k", "d_w_v", "d_b_v", "d_w_o",
                                          "d_b_o"};
    double worst = 0.0, largest = 0.0;
    for (int i = 0; i < 10; i++) {
        if ((i == 1 && !c->cross) || (i >= 8 && !c->w_o))
            continue;
        /* (a bias the layer lacks has a gradient all the same; only those it has can be stepped here) */
        const int present = !((i == 3 && !w.b_q) || (i == 5 && !w.b_k) || (i == 7 && !w.b_v) || (i == 9 && !w.b_o));
        for (size_t e = 0; present && e < sizes[i]; e++) {
            const float keep = a[i][e], up_x = keep + 0x1p-10f, down_x = keep - 0x1p-10f;
            a[i][e] = up_x;
            const double up = layer_loss(&d, a[0], kv, &w, a[10], n_out);
            a[i][e] = down_x;
            const double down = layer_loss(&d, a[0], kv, &w, a[10], n_out);
            a[i][e] = keep;
            const double fd = (up - down) / ((double)up_x - (double)down_x), err = fabs(fd - g[i][e]);
            ck_assert_msg(err <= 1e-5 + 1e-4 * fabs(fd), "%s: %s[%zu] analytic %.10g, finite difference %.10g",
                          tu_label(), names[i], e, g[i][e], fd);
            worst = fmax(worst, err);
            largest = fmax(largest, fabs(fd));
        }
    }
    ck_assert_msg(largest > 1e-2, "%s: every gradient is zero", tu_label());
    worst_error = fmax(worst_error, worst);
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("reference backward");
    TCase *tc = tcase_create("finite differences");
    tcase_add_checked_fixture(tc, NULL, tu_sys_teardown);
    tcase_add_loop_test(tc, test_finite_differences, 0, NCASES);
    tcase_add_loop_test(tc, test_layer_finite_differences, 0, sizeof layer_cases / sizeof layer_cases[0]);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(make_suite());
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    printf("largest |analytic - finite difference| of the gradients: %.3g\n", worst_error);
    const int rc = tu_srunner_exit(sr);
    srunner_free(sr);
    return rc;
}
