/*
 * Each of the four stages alone (clattn_projection, clattn_score, clattn_softmax,
 * clattn_weighted_sum) against the fp64 reference, on every device. Every tensor lives in a buffer
 * with a sentinel-filled guard after it; inputs must come back unchanged and guards untouched.
 */
#include "test_util.h"

#include <math.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------- */
/* Projection                                                                                      */
/* ---------------------------------------------------------------------------------------------- */

typedef struct {
    size_t rows, in, out;
    int bias;
} proj_case;

static const proj_case proj_cases[] = {
    {1, 1, 1, 0},    {1, 7, 21, 1},   {7, 72, 64, 0},  {7, 1, 21, 1},   {61, 72, 1, 1},
    {61, 7, 64, 0},  {267, 72, 64, 1}, {267, 1, 1, 0}, {267, 7, 21, 1}, {61, 1, 64, 1},
    {1, 72, 64, 1},  {267, 72, 21, 0},
};
#define N_PROJ (sizeof proj_cases / sizeof proj_cases[0])

START_TEST(test_projection)
{
    const proj_case *c = &proj_cases[TU_CASE(_i)];
    clattn_context *ctx = tu_ctx[TU_DEVICE(_i)];
    tu_set_label("projection case %zu (rows %zu, in %zu, out %zu, bias %d) on %s", TU_CASE(_i),
                 c->rows, c->in, c->out, c->bias, tu_dev_spec[TU_DEVICE(_i)]);
    size_t nx = c->rows * c->in, nw = c->in * c->out, ny = c->rows * c->out;
    float *x = tu_falloc(nx), *w = tu_falloc(nw), *bias = tu_falloc(c->out);
    tu_fill_uniform(x, nx, 1.0f, 100 + TU_CASE(_i));
    tu_fill_uniform(w, nw, 1.0f, 200 + TU_CASE(_i));
    tu_fill_uniform(bias, c->out, 1.0f, 300 + TU_CASE(_i));
    double *ref = tu_dalloc(ny);
    ref_matmul(c->rows, c->in, c->out, x, w, c->bias ? bias : NULL, ref);

    cl_mem mx = tu_dev_alloc(ctx, nx, x), mw = tu_dev_alloc(ctx, nw, w);
    cl_mem mb = c->bias ? tu_dev_alloc(ctx, c->out, bias) : NULL;
    cl_mem my = tu_dev_alloc(ctx, ny, NULL);
    clattn_status st = clattn_projection(ctx, c->rows, c->in, c->out, mx, mw, mb, my);
    TU_ASSERT_OK(st, ctx, "clattn_projection");
    tu_finish(ctx);
    float *y = tu_dev_read_checked(ctx, my, ny, "y");
    check_close_named("y", y, ref, ny, NULL);
    tu_dev_check_equal(ctx, mx, x, nx, "x");
    tu_dev_check_guard(ctx, mx, nx, "x");
    tu_dev_check_equal(ctx, mw, w, nw, "w");
    tu_dev_check_guard(ctx, mw, nw, "w");
    if (mb) {
        tu_dev_check_equal(ctx, mb, bias, c->out, "bias");
        tu_dev_check_guard(ctx, mb, c->out, "bias");
    }
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* Score                                                                                           */
/* ---------------------------------------------------------------------------------------------- */

typedef struct {
    size_t B, H, L, S, D;
    float scale;
    clattn_causal causal;
    int kl;
    clattn_mask_layout add;
    int addf;
    size_t v_dim; /* "not used" by clattn_score: arbitrary values must not matter */
} score_case;

static const score_case score_cases[] = {
    {1, 1, 1, 1, 1, CLATTN_SCALE_DEFAULT, CLATTN_CAUSAL_NONE, TU_KL_NONE, CLATTN_MASK_NONE, 0, 0},
    {2, 3, 7, 61, 8, 0.5f, CLATTN_CAUSAL_NONE, TU_KL_NONE, CLATTN_MASK_NONE, 0, 999},
    {1, 1, 61, 61, 21, CLATTN_SCALE_DEFAULT, CLATTN_CAUSAL_TOP_LEFT, TU_KL_NONE, CLATTN_MASK_NONE, 0, 0},
    {2, 1, 61, 7, 7, CLATTN_SCALE_DEFAULT, CLATTN_CAUSAL_TOP_LEFT, TU_KL_NONE, CLATTN_MASK_NONE, 0, 3},
    {1, 3, 7, 61, 8, CLATTN_SCALE_DEFAULT, CLATTN_CAUSAL_BOTTOM_RIGHT, TU_KL_NONE, CLATTN_MASK_NONE, 0, 0},
    {2, 1, 127, 64, 21, CLATTN_SCALE_DEFAULT, CLATTN_CAUSAL_BOTTOM_RIGHT, TU_KL_NONE, CLATTN_MASK_NONE, 0, 0},
    {2, 3, 61, 64, 7, CLATTN_SCALE_DEFAULT, CLATTN_CAUSAL_NONE, TU_KL_VARIED, CLATTN_MASK_NONE, 0, 0},
    {2, 1, 7, 7, 8, -0.7f, CLATTN_CAUSAL_NONE, TU_KL_ZERO, CLATTN_MASK_NONE, 0, 0},
    {1, 3, 61, 127, 64, CLATTN_SCALE_DEFAULT, CLATTN_CAUSAL_NONE, TU_KL_NONE, CLATTN_MASK_L_S, TU_MASKF_INF, 0},
    {2, 3, 7, 61, 72, CLATTN_SCALE_DEFAULT, CLATTN_CAUSAL_NONE, TU_KL_NONE, CLATTN_MASK_B_H_L_S,
     TU_MASKF_INF | TU_MASKF_ROWINF, 0},
    {2, 3, 64, 61, 8, 0.25f, CLATTN_CAUSAL_TOP_LEFT, TU_KL_VARIED, CLATTN_MASK_L_S, TU_MASKF_INF,
     0},
    {1, 1, 267, 267, 1, CLATTN_SCALE_DEFAULT, CLATTN_CAUSAL_BOTTOM_RIGHT, TU_KL_NONE, CLATTN_MASK_B_H_L_S, 0, 0},
    {2, 1, 2, 267, 64, CLATTN_SCALE_DEFAULT, CLATTN_CAUSAL_BOTTOM_RIGHT, TU_KL_ZERO, CLATTN_MASK_L_S,
     TU_MASKF_INF, 0},
};
#define N_SCORE (sizeof score_cases / sizeof score_cases[0])

START_TEST(test_score)
{
    size_t ci = TU_CASE(_i);
    const score_case *c = &score_cases[ci];
    clattn_context *ctx = tu_ctx[TU_DEVICE(_i)];
    tu_set_label("score case %zu (B %zu H %zu L %zu S %zu D %zu causal %d kl %d add %d) on %s", ci,
                 c->B, c->H, c->L, c->S, c->D, (int)c->causal, c->kl, (int)c->add,
                 tu_dev_spec[TU_DEVICE(_i)]);
    size_t kl[2];
    clattn_sdpa_desc d = tu_sdpa_desc(c->B, c->H, c->L, c->S, c->D, c->v_dim);
    d.scale = c->scale;
    clattn_masks masks = CLATTN_MASKS_INIT;
    masks.causal = c->causal;
    masks.key_lengths = tu_make_key_lengths(c->kl, c->B, c->S, kl);
    masks.additive = c->add;
    d.masks = &masks;

    size_t nq = c->B * c->H * c->L * c->D, nk = c->B * c->H * c->S * c->D;
    size_t ns = c->B * c->H * c->L * c->S, nm = 0;
    float *q = tu_falloc(nq), *k = tu_falloc(nk), *mask = NULL;
    tu_fill_uniform(q, nq, 1.0f, 1000 + ci);
    tu_fill_uniform(k, nk, 1.0f, 2000 + ci);
    if (c->add != CLATTN_MASK_NONE)
        mask = tu_make_mask(c->add, c->B, c->H, c->L, c->S, c->addf, 3000 + ci, &nm);
    double *ref = tu_dalloc(ns);
    ref_score(&d, q, k, mask, ref);

    cl_mem mq = tu_dev_alloc(ctx, nq, q), mk = tu_dev_alloc(ctx, nk, k);
    cl_mem mm = mask ? tu_dev_alloc(ctx, nm, mask) : NULL;
    cl_mem ms = tu_dev_alloc(ctx, ns, NULL);
    clattn_status st = clattn_score(ctx, &d, mq, mk, mm, ms);
    TU_ASSERT_OK(st, ctx, "clattn_score");
    tu_finish(ctx);
    float *s = tu_dev_read_checked(ctx, ms, ns, "scores");
    check_close_named("scores", s, ref, ns, NULL);
    tu_dev_check_equal(ctx, mq, q, nq, "q");
    tu_dev_check_guard(ctx, mq, nq, "q");
    tu_dev_check_equal(ctx, mk, k, nk, "k");
    tu_dev_check_guard(ctx, mk, nk, "k");
    if (mm) {
        tu_dev_check_equal(ctx, mm, mask, nm, "mask");
        tu_dev_check_guard(ctx, mm, nm, "mask");
    }
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* Softmax                                                                                         */
/* ---------------------------------------------------------------------------------------------- */

enum {
    SM_UNIFORM = 0, /* uniform [-4, 4] */
    SM_PARTIAL_INF, /* some entries −inf */
    SM_ROWS_INF,    /* every third row entirely −inf, others partially */
    SM_ALL_INF,     /* every row entirely −inf */
    SM_LARGE,       /* rows around ±1e4 (naive exp overflows) */
    SM_HUGE         /* values up to ±1e30 */
};

typedef struct {
    size_t rows, cols;
    int kind;
    int inplace;
    int lse; /* 1: request lse */
} softmax_case;

static const softmax_case softmax_cases[] = {
    {1, 1, SM_UNIFORM, 0, 1},       {7, 1, SM_UNIFORM, 1, 1},      {61, 7, SM_UNIFORM, 0, 1},
    {267, 61, SM_UNIFORM, 1, 1},    {3, 267, SM_UNIFORM, 0, 0},    {64, 64, SM_UNIFORM, 1, 0},
    {61, 127, SM_PARTIAL_INF, 0, 1}, {21, 7, SM_ROWS_INF, 1, 1},   {127, 2, SM_ROWS_INF, 0, 1},
    {5, 33, SM_ALL_INF, 0, 1},      {2, 1, SM_ALL_INF, 1, 1},      {61, 64, SM_LARGE, 0, 1},
    {7, 267, SM_LARGE, 1, 1},       {33, 9, SM_HUGE, 0, 1},        {1, 1024, SM_UNIFORM, 0, 1},
    {1, 4099, SM_PARTIAL_INF, 1, 1},
};
#define N_SOFTMAX (sizeof softmax_cases / sizeof softmax_cases[0])

static void softmax_fill(const softmax_case *c, float *s, uint64_t seed)
{
    tu_rng r;
    tu_rng_seed(&r, seed);
    for (size_t i = 0; i < c->rows; i++) {
        float *row = s + i * c->cols;
        float base = 0.0f;
        if (c->kind == SM_LARGE)
            base = (i % 2 ? 1e4f : -1e4f) + tu_rng_uniform(&r, 100.0f);
        for (size_t j = 0; j < c->cols; j++) {
            switch (c->kind) {
            case SM_LARGE:
                row[j] = base + tu_rng_uniform(&r, 8.0f);
                break;
            case SM_HUGE:
                row[j] = tu_rng_uniform(&r, 1.0f) * 1e30f;
                break;
            default:
                row[j] = tu_rng_uniform(&r, 4.0f);
                break;
            }
            if ((c->kind == SM_PARTIAL_INF || c->kind == SM_ROWS_INF) && tu_rng_next(&r) % 4 == 0)
                row[j] = -INFINITY;
            if (c->kind == SM_ALL_INF || (c->kind == SM_ROWS_INF && i % 3 == 0))
                row[j] = -INFINITY;
        }
    }
    if (c->kind == SM_HUGE && c->rows > 2) {
        /* exact ties at huge magnitude and a row holding ±FLT_MAX */
        for (size_t j = 0; j < c->cols; j++)
            s[j] = (j % 2) ? 3e38f : -3e38f;
        for (size_t j = 0; j < c->cols; j++)
            s[c->cols + j] = 1e30f;
    }
}

START_TEST(test_softmax)
{
    size_t ci = TU_CASE(_i);
    const softmax_case *c = &softmax_cases[ci];
    clattn_context *ctx = tu_ctx[TU_DEVICE(_i)];
    tu_set_label("softmax case %zu (rows %zu cols %zu kind %d in-place %d lse %d) on %s", ci,
                 c->rows, c->cols, c->kind, c->inplace, c->lse, tu_dev_spec[TU_DEVICE(_i)]);
    size_t n = c->rows * c->cols;
    float *s = tu_falloc(n);
    softmax_fill(c, s, 4000 + ci);
    double *rp = tu_dalloc(n), *rl = tu_dalloc(c->rows);
    ref_softmax(c->rows, c->cols, s, rp, rl);

    cl_mem ms = tu_dev_alloc(ctx, n, s);
    cl_mem mw = c->inplace ? ms : tu_dev_alloc(ctx, n, NULL);
    cl_mem ml = c->lse ? tu_dev_alloc(ctx, c->rows, NULL) : NULL;
    clattn_status st = clattn_softmax(ctx, c->rows, c->cols, ms, mw, ml);
    TU_ASSERT_OK(st, ctx, "clattn_softmax");
    tu_finish(ctx);
    float *w = tu_dev_read_checked(ctx, mw, n, "weights");
    check_close_named("weights", w, rp, n, NULL);
    if (ml) {
        float *l = tu_dev_read_checked(ctx, ml, c->rows, "lse");
        if (c->kind == SM_HUGE) {
            /* lse ≈ 1e30..3e38: compare relative to the magnitude (absolute error is meaningless) */
            for (size_t i = 0; i < c->rows; i++) {
                if (isinf(rl[i])) {
                    ck_assert_msg(isinf(l[i]) && l[i] < 0, "%s: lse[%zu] = %g, expected -inf",
                                  tu_label(), i, (double)l[i]);
                    continue;
                }
                ck_assert_msg(isfinite(l[i]) && fabs(l[i] - rl[i]) <= 1e-5 * fabs(rl[i]) + TU_ATOL,
                              "%s: lse[%zu] = %.9g, fp64 reference %.17g", tu_label(), i,
                              (double)l[i], rl[i]);
            }
        } else {
            check_close_named("lse", l, rl, c->rows, NULL);
        }
    }
    if (!c->inplace) {
        tu_dev_check_equal(ctx, ms, s, n, "scores");
        tu_dev_check_guard(ctx, ms, n, "scores");
    }
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* Weighted sum                                                                                    */
/* ---------------------------------------------------------------------------------------------- */

typedef struct {
    size_t B, H, L, S, qk_dim, v_dim; /* v_dim 0 → qk_dim is the head size of V */
} wsum_case;

static const wsum_case wsum_cases[] = {
    {1, 1, 1, 1, 1, 0},    {2, 3, 7, 61, 5, 8},   {1, 1, 61, 7, 3, 21},  {2, 1, 64, 64, 64, 0},
    {1, 3, 127, 2, 1, 72}, {2, 3, 2, 127, 7, 1},  {1, 1, 267, 267, 72, 0}, {2, 1, 61, 267, 8, 7},
};
#define N_WSUM (sizeof wsum_cases / sizeof wsum_cases[0])

START_TEST(test_weighted_sum)
{
    size_t ci = TU_CASE(_i);
    const wsum_case *c = &wsum_cases[ci];
    clattn_context *ctx = tu_ctx[TU_DEVICE(_i)];
    tu_set_label("weighted_sum case %zu (B %zu H %zu L %zu S %zu Dqk %zu Dv %zu) on %s", ci, c->B,
                 c->H, c->L, c->S, c->qk_dim, c->v_dim, tu_dev_spec[TU_DEVICE(_i)]);
    clattn_sdpa_desc d = tu_sdpa_desc(c->B, c->H, c->L, c->S, c->qk_dim, c->v_dim);
    size_t Dv = tu_sdpa_dv(&d);
    size_t np = c->B * c->H * c->L * c->S, nv = c->B * c->H * c->S * Dv;
    size_t no = c->B * c->H * c->L * Dv;
    float *p = tu_falloc(np), *v = tu_falloc(nv);
    tu_fill_uniform(p, np, 1.0f, 5000 + ci);
    for (size_t i = 0; i < np; i++)
        p[i] = fabsf(p[i]) / (float)c->S; /* weight-like: non-negative, rows sum ≲ 1 */
    tu_fill_uniform(v, nv, 1.0f, 6000 + ci);
    double *ref = tu_dalloc(no);
    ref_weighted_sum(&d, p, v, ref);

    cl_mem mp = tu_dev_alloc(ctx, np, p), mv = tu_dev_alloc(ctx, nv, v);
    cl_mem mo = tu_dev_alloc(ctx, no, NULL);
    clattn_status st = clattn_weighted_sum(ctx, &d, mp, mv, mo);
    TU_ASSERT_OK(st, ctx, "clattn_weighted_sum");
    tu_finish(ctx);
    float *o = tu_dev_read_checked(ctx, mo, no, "out");
    check_close_named("out", o, ref, no, NULL);
    tu_dev_check_equal(ctx, mp, p, np, "weights");
    tu_dev_check_guard(ctx, mp, np, "weights");
    tu_dev_check_equal(ctx, mv, v, nv, "v");
    tu_dev_check_guard(ctx, mv, nv, "v");
}
END_TEST

/* A full pipeline built from the stages equals the fp64 sdpa (stages compose). */
START_TEST(test_stages_compose)
{
    clattn_context *ctx = tu_ctx[_i];
    tu_set_label("stages composed into sdpa on %s", tu_dev_spec[_i]);
    size_t kl[2];
    clattn_masks masks = CLATTN_MASKS_INIT;
    masks.causal = CLATTN_CAUSAL_BOTTOM_RIGHT;
    masks.key_lengths = tu_make_key_lengths(TU_KL_ZERO, 2, 64, kl);
    clattn_sdpa_desc d = tu_sdpa_desc(2, 3, 61, 64, 21, 7);
    d.masks = &masks;
    size_t nq = 2 * 3 * 61 * 21, nk = 2 * 3 * 64 * 21, nv = 2 * 3 * 64 * 7, np = 2 * 3 * 61 * 64,
           no = 2 * 3 * 61 * 7, nl = 2 * 3 * 61;
    float *q = tu_falloc(nq), *k = tu_falloc(nk), *v = tu_falloc(nv);
    tu_fill_uniform(q, nq, 1.0f, 71);
    tu_fill_uniform(k, nk, 1.0f, 72);
    tu_fill_uniform(v, nv, 1.0f, 73);
    double *ro = tu_dalloc(no), *rp = tu_dalloc(np), *rl = tu_dalloc(nl);
    ref_sdpa(&d, q, k, v, NULL, ro, rp, rl);

    cl_mem mq = tu_dev_alloc(ctx, nq, q), mk = tu_dev_alloc(ctx, nk, k), mv = tu_dev_alloc(ctx, nv, v);
    cl_mem ms = tu_dev_alloc(ctx, np, NULL), ml = tu_dev_alloc(ctx, nl, NULL);
    cl_mem mo = tu_dev_alloc(ctx, no, NULL);
    clattn_status st = clattn_score(ctx, &d, mq, mk, NULL, ms);
    TU_ASSERT_OK(st, ctx, "clattn_score");
    st = clattn_softmax(ctx, 2 * 3 * 61, 64, ms, ms, ml);
    TU_ASSERT_OK(st, ctx, "clattn_softmax");
    st = clattn_weighted_sum(ctx, &d, ms, mv, mo);
    TU_ASSERT_OK(st, ctx, "clattn_weighted_sum");
    tu_finish(ctx);
    check_close_named("out", tu_dev_read_checked(ctx, mo, no, "out"), ro, no, NULL);
    check_close_named("weights", tu_dev_read_checked(ctx, ms, np, "weights"), rp, np, NULL);
    check_close_named("lse", tu_dev_read_checked(ctx, ml, nl, "lse"), rl, nl, NULL);
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("stages");
    TCase *tc = tu_tcase("projection");
    tcase_add_loop_test(tc, test_projection, 0, (int)(N_PROJ * tu_ndev));
    suite_add_tcase(s, tc);
    tc = tu_tcase("score");
    tcase_add_loop_test(tc, test_score, 0, (int)(N_SCORE * tu_ndev));
    suite_add_tcase(s, tc);
    tc = tu_tcase("softmax");
    tcase_add_loop_test(tc, test_softmax, 0, (int)(N_SOFTMAX * tu_ndev));
    suite_add_tcase(s, tc);
    tc = tu_tcase("weighted_sum");
    tcase_add_loop_test(tc, test_weighted_sum, 0, (int)(N_WSUM * tu_ndev));
    suite_add_tcase(s, tc);
    tc = tu_tcase("compose");
    tcase_add_loop_test(tc, test_stages_compose, 0, (int)tu_ndev);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_main(make_suite); }
