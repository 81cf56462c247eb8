/* The backward pass's fp64 reference (tools/reference: ref_sdpa_backward, issue 27) against central finite
 * differences of the fp64 forward (ref_sdpa_mods_d), no OpenCL: for the loss Σ dout·out, every element
 * of dQ, dK and dV (and d(sink) per head) equals (loss(x + ε) − loss(x − ε)) / 2ε over odd shapes and every
 * variant the forward has — causal of both kinds, query offsets, key lengths, windows, additive masks with
 * hidden entries, grouped-query heads (a K/V head's gradient summed over its query heads), soft-capping,
 * logit scales, ALiBi, sinks, a scale, a mask_mod (documents), a non-linear score_mod with its derivative,
 * rows that see no key (zero gradient). */
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

static Suite *make_suite(void)
{
    Suite *s = suite_create("reference backward");
    TCase *tc = tcase_create("finite differences");
    tcase_add_checked_fixture(tc, NULL, tu_sys_teardown);
    tcase_add_loop_test(tc, test_finite_differences, 0, NCASES);
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
