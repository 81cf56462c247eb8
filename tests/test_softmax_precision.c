/*
 * desc.softmax_precision = CLATTN_SOFTMAX_DOUBLE (ONNX's softmax_precision = DOUBLE), on every device:
 *
 *  1. double: the staged path's weights and log-sum-exp are the fp64 reference's softmax of the very
 *     float32 scores the softmax took (read back through the CLATTN_WEIGHTS_MASKED output, the same
 *     score kernel), rounded once: within half a unit in the last place of float32 (the float32
 *     softmax is tens of units off on these rows); the output is the reference P·V over those weights;
 *     AUTO without a weights output gives the same output and lse bit for bit (it takes the staged
 *     path); a layer (clattn_mha_host) likewise against its own scores. Cases cross grouped-query
 *     heads, large scores, scores spread to hundreds (subnormal and vanishing weights), soft-capping,
 *     causal masks, key lengths that hide whole rows, an additive mask with −inf and sinks. With
 *     cl_khr_fp64 that is the double kernel; without it (rusticl) its float-float build.
 *  2. float-float: the same cases on a context of each device that runs the float-float build however
 *     the device is (CLATTN_SOFTMAX_DOUBLE=float-float while it makes its first double softmax): within
 *     half a unit of the reference as above, and within one unit of the default context's results (the
 *     fp64 kernel where the device has it), how many differ at all printed and bounded.
 *  3. refused: CLATTN_ALGORITHM_FUSED and _DECODE, clattn_sdpa_ragged, clattn_group_sdpa_host, an
 *     unknown precision and a set softmax_reserved are CLATTN_ERROR_INVALID_VALUE naming the field or
 *     the path, nothing written.
 *  4. no fp64 (fault-injection builds only, whose library has clattn__fault_hide_fp64): a context made
 *     while the hook hides cl_khr_fp64 runs the double softmax (the float-float build), within half a
 *     unit of the reference.
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "test_util.h"

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The fault-injection build's hook; weak, so that it is NULL against a release library. */
void clattn__fault_hide_fp64(int hide) __attribute__((weak));

/* Whether the device lists cl_khr_fp64, asked of OpenCL directly (not of the library under test). */
static bool device_has_fp64(clattn_context *ctx)
{
    char ext[8192] = "";
    size_t size = 0;
    cl_device_id dev = clattn_context_device(ctx);
    ck_assert_int_eq(clGetDeviceInfo(dev, CL_DEVICE_EXTENSIONS, 0, NULL, &size), CL_SUCCESS);
    char *list = tu_track_malloc(size + 1);
    ck_assert_int_eq(clGetDeviceInfo(dev, CL_DEVICE_EXTENSIONS, size, list, NULL), CL_SUCCESS);
    snprintf(ext, sizeof ext, " %s ", list);
    return strstr(ext, " cl_khr_fp64 ") != NULL;
}

/* |w − ref| within half a float32 unit in the last place of ref (the one rounding of a double result),
 * a hair for the double arithmetic before it, and FLT_MIN for a device that flushes subnormal weights;
 * infinities must match. */
static void check_rounded_once(const char *what, const float *w, const double *ref, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (isinf(ref[i]) || isinf(w[i])) {
            ck_assert_msg((double)w[i] == ref[i], "%s: %s[%zu] = %g, reference %g", tu_label(), what, i, (double)w[i],
                          ref[i]);
            continue;
        }
        const float f = fabsf((float)ref[i]);
        const double half_ulp = 0.5 * ((double)nextafterf(f, INFINITY) - (double)f);
        const double err = fabs((double)w[i] - ref[i]);
        ck_assert_msg(err <= half_ulp * (1.0 + 1e-9) + 1e-12 * fabs(ref[i]) + FLT_MIN,
                      "%s: %s[%zu] = %.9g, reference %.17g: off by %.3g units in the last place (at most 0.5)",
                      tu_label(), what, i, (double)w[i], ref[i], err / (2.0 * half_ulp));
    }
}

/* A refused call's status and detail, its host output (n floats and a guard, or NULL) untouched. */
static void check_refused(clattn_context *ctx, clattn_status st, clattn_status want, const char *detail,
                          const float *out, size_t n)
{
    ck_assert_msg(st == want, "%s: status %s, expected %s (%s)", tu_label(), clattn_status_string(st),
                  clattn_status_string(want), clattn_last_error(ctx));
    ck_assert_msg(strstr(clattn_last_error(ctx), detail) != NULL, "%s: the detail \"%s\" does not say \"%s\"",
                  tu_label(), clattn_last_error(ctx), detail);
    ck_assert_msg(!out || tu_host_all_sentinel(out, n), "%s: an output was written", tu_label());
}

typedef struct {
    const char *name;
    size_t B, H, KVH, L, S, D;
    float scale, softcap;
    clattn_causal causal;
    int key_lengths; /* TU_KL_* */
    clattn_mask_layout additive;
    int sinks;
} pcase;

static const pcase cases[] = {
    /* Scores up to about ±40: float32's exp(x − max) is many units off, double's is not. */
    {"large scores, GQA", 2, 4, 2, 7, 45, 24, 1.0f, 0.0f, NONE, TU_KL_NONE, M0, 0},
    {"softcap, causal, a batch with no key, -inf mask, sinks", 2, 3, 3, 9, 33, 16, 0.9f, 5.0f, TL, TU_KL_ZERO, MLS, 1},
    {"long rows, bottom-right, (B,H,L,S) mask", 1, 2, 1, 5, 301, 8, 2.0f, 0.0f, BR, TU_KL_VARIED, MBH, 0},
    /* Scores spread over hundreds: weights down to the subnormals (0 on a device that flushes them). */
    {"scale 20: subnormal and vanishing weights, sinks", 1, 2, 2, 6, 120, 16, 20.0f, 0.0f, NONE, TU_KL_NONE, M0, 1},
};
#define N_CASES (sizeof cases / sizeof cases[0])

/* Case `ci` on ctx, every check of item 1; the weights and log-sum-exp it gave (tracked), their counts. */
static void double_case(clattn_context *ctx, size_t ci, const char *on, float **w_out, float **l_out, size_t *nw_out,
                        size_t *nl_out)
{
    const pcase *c = &cases[ci];
    const size_t nq = c->B * c->H * c->L * c->D, nk = c->B * c->KVH * c->S * c->D, nl = c->B * c->H * c->L;
    const size_t nw = nl * c->S;
    float *q = tu_falloc(nq), *k = tu_falloc(nk), *v = tu_falloc(nk), sinks[4] = {0.5f, -1.0f, 2.0f, 0.0f};
    tu_fill_uniform(q, nq, 2.0f, 900 + ci);
    tu_fill_uniform(k, nk, 2.0f, 910 + ci);
    tu_fill_uniform(v, nk, 1.0f, 920 + ci);
    size_t lengths[4], nm = 0;
    const float *mask = c->additive ? tu_make_mask(c->additive, c->B, c->H, c->L, c->S, TU_MASKF_INF, 930, &nm) : NULL;
    clattn_masks m = CLATTN_MASKS_INIT;
    m.causal = c->causal;
    m.key_lengths = tu_make_key_lengths(c->key_lengths, c->B, c->S, lengths);
    m.additive = c->additive;
    clattn_sdpa_desc d = tu_sdpa_desc(c->B, c->H, c->L, c->S, c->D, 0);
    d.kv_heads = c->KVH;
    d.scale = c->scale;
    d.softcap = c->softcap;
    d.sinks = c->sinks ? sinks : NULL;
    d.masks = &m;
    d.algorithm = CLATTN_ALGORITHM_STAGED;
    tu_set_label("double softmax, %s, on %s", c->name, on);
    float *o = tu_host_alloc(nq, NULL), *w = tu_host_alloc(nw, NULL), *l = tu_host_alloc(nl, NULL);
    d.softmax_precision = CLATTN_SOFTMAX_DOUBLE;
    /* The float32 scores the softmax takes: the same score kernel, its CLATTN_WEIGHTS_MASKED output. */
    float *scores = tu_host_alloc(nw, NULL);
    d.weights_output = CLATTN_WEIGHTS_MASKED;
    TU_ASSERT_OK(clattn_sdpa_host(ctx, &d, q, k, v, mask, o, scores, NULL), ctx, "the scores");
    d.weights_output = CLATTN_WEIGHTS_SOFTMAX;
    double *sd = tu_dalloc(nw), *rw = tu_dalloc(nw), *rl = tu_dalloc(nl), *ro = tu_dalloc(nq);
    for (size_t i = 0; i < nw; i++)
        sd[i] = scores[i];
    ref_sdpa_softmax(&d, sd, rw, rl);

    TU_ASSERT_OK(clattn_sdpa_host(ctx, &d, q, k, v, mask, o, w, l), ctx, "clattn_sdpa_host, double");
    tu_host_check_guard(w, nw, "weights");
    check_rounded_once("weights", w, rw, nw);
    check_rounded_once("lse", l, rl, nl);
    ref_weighted_sum(&d, w, v, ro);
    check_close_named("out", o, ro, nq, NULL);

    /* AUTO without weights: the staged path again (not the float32 fused or decode kernels). */
    d.algorithm = CLATTN_ALGORITHM_AUTO;
    float *o2 = tu_host_alloc(nq, NULL), *l2 = tu_host_alloc(nl, NULL);
    TU_ASSERT_OK(clattn_sdpa_host(ctx, &d, q, k, v, mask, o2, NULL, l2), ctx, "clattn_sdpa_host, double, auto");
    ck_assert_msg(memcmp(o, o2, nq * sizeof *o) == 0 && memcmp(l, l2, nl * sizeof *l) == 0,
                  "%s: AUTO's output or lse differs from the staged double softmax's", tu_label());
    *w_out = w;
    *l_out = l;
    *nw_out = nw;
    *nl_out = nl;
}

START_TEST(test_double)
{
    float *w, *l;
    size_t nw, nl;
    double_case(tu_ctx[TU_DEVICE(_i)], TU_CASE(_i), tu_dev_spec[TU_DEVICE(_i)], &w, &l, &nw, &nl);
}
END_TEST

/* A context on device `dev` whose double softmax is the float-float build whatever the device has: the
 * library reads CLATTN_SOFTMAX_DOUBLE when a context is made. */
static clattn_context *float_float_context(size_t dev)
{
    ck_assert_int_eq(setenv("CLATTN_SOFTMAX_DOUBLE", "float-float", 1), 0);
    clattn_context *ctx = NULL;
    const clattn_status st = clattn_context_create(&ctx, tu_dev_spec[dev]);
    ck_assert_int_eq(unsetenv("CLATTN_SOFTMAX_DOUBLE"), 0);
    TU_ASSERT_OK(st, ctx, "a context with CLATTN_SOFTMAX_DOUBLE=float-float");
    return ctx;
}

/* got against the default context's `want`: within one unit each (or both below FLT_MIN: a device that
 * flushes subnormals); how many differ. */
static size_t count_apart(const char *what, const float *got, const float *want, size_t n)
{
    size_t differ = 0;
    for (size_t i = 0; i < n; i++) {
        const int64_t d = tu_ulps_apart(got[i], want[i]);
        ck_assert_msg(d <= 1 || (fabsf(got[i]) < FLT_MIN && fabsf(want[i]) < FLT_MIN),
                      "%s: %s[%zu] = %.9g, the default context's %.9g: %lld units apart", tu_label(), what, i,
                      (double)got[i], (double)want[i], (long long)d);
        differ += d != 0;
    }
    return differ;
}

/* Item 2: the float-float build on every device, against the reference and the default context's. */
START_TEST(test_float_float)
{
    const size_t dev = TU_DEVICE(_i), ci = TU_CASE(_i);
    clattn_context *ff_ctx = float_float_context(dev);
    char on[96];
    snprintf(on, sizeof on, "%s, float-float", tu_dev_spec[dev]);
    float *w, *l, *w0, *l0;
    size_t nw, nl;
    double_case(ff_ctx, ci, on, &w, &l, &nw, &nl);
    clattn_context_free(ff_ctx);
    double_case(tu_ctx[dev], ci, tu_dev_spec[dev], &w0, &l0, &nw, &nl);
    tu_set_label("float-float double softmax, %s, on %s", cases[ci].name, tu_dev_spec[dev]);
    const size_t differ = count_apart("weights", w, w0, nw) + count_apart("lse", l, l0, nl);
    /* Float-float carries about 2^-44 of each value: it rounds to another float32 than double only where
     * the exact value lies about that close to a rounding boundary. */
    const size_t most = 1 + (nw + nl) / 4096;
    ck_assert_msg(differ <= most, "%s: %zu of %zu results differ from the default context's (at most %zu)",
                  tu_label(), differ, nw + nl, most);
    printf("%s: %zu of %zu weights and log-sum-exps differ by one unit from the %s kernel's\n", tu_label(), differ,
           nw + nl, device_has_fp64(tu_ctx[dev]) ? "fp64" : "(float-float: no cl_khr_fp64) default");
}
END_TEST

/* A layer: its attention weights against the double softmax of its own scores (the same projections,
 * through attn_weights at CLATTN_WEIGHTS_MASKED). */
START_TEST(test_double_layer)
{
    const size_t dev = _i;
    clattn_context *ctx = tu_ctx[dev];
    enum { B = 2, L = 6, S = 11, DM = 10, H = 4, KVH = 2, DK = 5 };
    float *x = tu_falloc(B * L * DM), *kv = tu_falloc(B * S * DM), *wq = tu_falloc(DM * H * DK);
    float *wk = tu_falloc(DM * KVH * DK), *wv = tu_falloc(DM * KVH * DK);
    tu_fill_uniform(x, B * L * DM, 2.0f, 940);
    tu_fill_uniform(kv, B * S * DM, 2.0f, 941);
    tu_fill_uniform(wq, DM * H * DK, 1.0f, 942);
    tu_fill_uniform(wk, DM * KVH * DK, 1.0f, 943);
    tu_fill_uniform(wv, DM * KVH * DK, 1.0f, 944);
    clattn_mha_desc d = CLATTN_MHA_DESC_INIT;
    d.batch = B;
    d.q_len = L;
    d.kv_len = S;
    d.model_dim = DM;
    d.heads = H;
    d.kv_heads = KVH;
    d.qk_dim = DK;
    d.scale = 1.0f;
    d.softmax_precision = CLATTN_SOFTMAX_DOUBLE;
    clattn_mha_host_weights w = CLATTN_MHA_HOST_WEIGHTS_INIT;
    w.w_q = wq;
    w.w_k = wk;
    w.w_v = wv;
    const size_t no = B * L * H * DK, nw = (size_t)B * H * L * S;
    float *out = tu_host_alloc(no, NULL), *p = tu_host_alloc(nw, NULL), *scores = tu_host_alloc(nw, NULL);
    tu_set_label("double softmax, layer, on %s", tu_dev_spec[dev]);
    d.weights_output = CLATTN_WEIGHTS_MASKED;
    TU_ASSERT_OK(clattn_mha_host(ctx, &d, x, kv, &w, NULL, out, scores), ctx, "the layer's scores");
    d.weights_output = CLATTN_WEIGHTS_SOFTMAX;
    TU_ASSERT_OK(clattn_mha_host(ctx, &d, x, kv, &w, NULL, out, p), ctx, "clattn_mha_host, double");
    clattn_sdpa_desc sd = tu_sdpa_desc(B, H, L, S, DK, 0);
    double *s64 = tu_dalloc(nw), *rw = tu_dalloc(nw);
    for (size_t i = 0; i < nw; i++)
        s64[i] = scores[i];
    ref_sdpa_softmax(&sd, s64, rw, NULL);
    check_rounded_once("attention weights", p, rw, nw);
}
END_TEST

/* Paths whose softmax is float32 refuse the double one; unknown values are refused. */
START_TEST(test_refused)
{
    const size_t dev = _i;
    clattn_context *ctx = tu_ctx[dev];
    enum { B = 1, H = 2, L = 3, S = 5, D = 4 };
    float q[B * H * L * D], k[B * H * S * D];
    tu_fill_uniform(q, B * H * L * D, 1.0f, 950);
    tu_fill_uniform(k, B * H * S * D, 1.0f, 951);
    float *o = tu_host_alloc(B * H * L * D, NULL);
    clattn_sdpa_desc d = tu_sdpa_desc(B, H, L, S, D, 0);
    d.softmax_precision = CLATTN_SOFTMAX_DOUBLE;
    static const struct {
        clattn_algorithm algorithm;
        const char *name;
    } float_paths[] = {{CLATTN_ALGORITHM_FUSED, "CLATTN_ALGORITHM_FUSED"},
                       {CLATTN_ALGORITHM_DECODE, "CLATTN_ALGORITHM_DECODE"}};
    for (size_t i = 0; i < 2; i++) {
        tu_set_label("double softmax on %s, on %s", float_paths[i].name, tu_dev_spec[dev]);
        d.algorithm = float_paths[i].algorithm;
        check_refused(ctx, clattn_sdpa_host(ctx, &d, q, k, k, NULL, o, NULL, NULL), CLATTN_ERROR_INVALID_VALUE,
                      float_paths[i].name, o, B * H * L * D);
        ck_assert_msg(strstr(clattn_last_error(ctx), "staged path"), "%s: %s", tu_label(), clattn_last_error(ctx));
    }
    d.algorithm = CLATTN_ALGORITHM_AUTO;

    tu_set_label("double softmax through clattn_sdpa_ragged, on %s", tu_dev_spec[dev]);
    const size_t q_starts[2] = {0, L}, k_starts[2] = {0, S};
    clattn_ragged r = CLATTN_RAGGED_INIT;
    r.q_starts = q_starts;
    r.k_starts = k_starts;
    cl_mem mq = tu_dev_alloc(ctx, L * H * D, q), mk = tu_dev_alloc(ctx, S * H * D, k);
    cl_mem mo = tu_dev_alloc(ctx, L * H * D, NULL);
    d.q_len = d.kv_len = 0;
    clattn_status st = clattn_sdpa_ragged(ctx, &d, &r, mq, mk, mk, NULL, mo, NULL);
    check_refused(ctx, st, CLATTN_ERROR_INVALID_VALUE, "clattn_sdpa_ragged", NULL, 0);
    ck_assert_msg(tu_dev_all_sentinel(ctx, mo, L * H * D + TU_GUARD), "%s: out written", tu_label());
    ck_assert_msg(strstr(clattn_last_error(ctx), "softmax_precision"), "%s: %s", tu_label(), clattn_last_error(ctx));
    d.q_len = L;
    d.kv_len = S;

    /* A group call (one device here): its split over the keys would merge in float32. */
    tu_set_label("double softmax through clattn_group_sdpa_host, on %s", tu_dev_spec[dev]);
    clattn_group *g = NULL;
    TU_ASSERT_OK(clattn_group_create(&g, tu_dev_spec[dev]), NULL, "clattn_group_create");
    d.softmax_precision = CLATTN_SOFTMAX_DOUBLE;
    st = clattn_group_sdpa_host(g, &d, q, k, k, NULL, o, NULL);
    char detail[1024];
    snprintf(detail, sizeof detail, "%s", clattn_last_error(NULL));
    clattn_group_free(g);
    ck_assert_msg(st == CLATTN_ERROR_INVALID_VALUE, "%s: status %s (%s)", tu_label(), clattn_status_string(st),
                  detail);
    ck_assert_msg(strstr(detail, "clattn_group_sdpa_host"), "%s: the detail \"%s\"", tu_label(), detail);
    ck_assert_msg(tu_host_all_sentinel(o, B * H * L * D), "%s: out written", tu_label());

    tu_set_label("softmax_precision 2, on %s", tu_dev_spec[dev]);
    d.softmax_precision = (clattn_softmax_precision)2;
    check_refused(ctx, clattn_sdpa_host(ctx, &d, q, k, k, NULL, o, NULL, NULL), CLATTN_ERROR_INVALID_VALUE,
                  "desc.softmax_precision", o, B * H * L * D);
    tu_set_label("softmax_reserved set, on %s", tu_dev_spec[dev]);
    d.softmax_precision = CLATTN_SOFTMAX_FLOAT;
    d.softmax_reserved = 1;
    check_refused(ctx, clattn_sdpa_host(ctx, &d, q, k, k, NULL, o, NULL, NULL), CLATTN_ERROR_INVALID_VALUE,
                  "desc.softmax_reserved", o, B * H * L * D);
}
END_TEST

/* A device without cl_khr_fp64, forced through the fault-injection build's hook: the float-float build
 * runs, as on such a device. */
START_TEST(test_no_fp64)
{
    const size_t dev = _i;
    ck_assert_ptr_nonnull(clattn__fault_hide_fp64);
    clattn__fault_hide_fp64(1);
    clattn_context *ctx = NULL;
    clattn_status st = clattn_context_create(&ctx, tu_dev_spec[dev]);
    clattn__fault_hide_fp64(0);
    TU_ASSERT_OK(st, NULL, "clattn_context_create");
    char on[96];
    snprintf(on, sizeof on, "%s taken for a device without cl_khr_fp64", tu_dev_spec[dev]);
    float *w, *l;
    size_t nw, nl;
    double_case(ctx, 0, on, &w, &l, &nw, &nl);
    clattn_context_free(ctx);
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("softmax_precision");
    tu_add_loop(s, "double", test_double, N_CASES * tu_ndev);
    tu_add_loop(s, "double_layer", test_double_layer, tu_ndev);
    tu_add_loop(s, "float_float", test_float_float, N_CASES * tu_ndev);
    tu_add_loop(s, "refused", test_refused, tu_ndev);
    if (clattn__fault_hide_fp64) /* (a fault-injection build) */
        tu_add_loop(s, "no_fp64", test_no_fp64, tu_ndev);
    return s;
}

int main(void) { return tu_main(make_suite); }
