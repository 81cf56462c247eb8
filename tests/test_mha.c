/*
 * Multi-head attention layers (clattn_mha_host and clattn_mha) against the fp64 reference:
 * self- and cross-attention, with and without biases and W_O, masks, attention-weights output; plus
 * the tutorial's worked example (4 tokens, d_model 8, numpy seed 42 weights).
 */
#include "test_util.h"
#include "tutorial_example.h"

#include <math.h>
#include <string.h>


enum { WO_NONE = 0, WO_ONLY, WO_BIAS }; /* no W_O; W_O without b_O; W_O and b_O */

typedef struct {
    size_t B, L;
    int cross;     /* 1: kv input given */
    size_t S;      /* desc.kv_len (for self-attention 0 or L) */
    size_t dm;     /* model_dim */
    size_t dkv;    /* desc.kv_dim (0: model_dim) */
    size_t H, Dqk, Dv; /* Dv 0: Dqk */
    size_t od;     /* desc.out_dim (0: model_dim) */
    int bias;      /* b_Q, b_K, b_V */
    int wo;
    float scale;
    clattn_causal causal;
    int kl;
    clattn_mask_layout add;
    int addf;
    int want_weights;
} mha_case;

static const mha_case cases[] = {
    /* self-attention */
    {1, 7, 0, 0, 8, 0, 1, 4, 0, 0, 0, WO_NONE, SD, NONE, TU_KL_NONE, M0, 0, 1},
    {2, 7, 0, 0, 8, 0, 3, 4, 0, 0, 1, WO_BIAS, SD, NONE, TU_KL_NONE, M0, 0, 1},
    {2, 61, 0, 0, 21, 0, 3, 7, 5, 13, 1, WO_BIAS, SD, NONE, TU_KL_NONE, M0, 0, 1},
    {1, 64, 0, 64, 72, 0, 3, 8, 0, 0, 0, WO_ONLY, SD, NONE, TU_KL_NONE, M0, 0, 0},
    {2, 1, 0, 0, 1, 0, 1, 1, 0, 0, 1, WO_BIAS, SD, NONE, TU_KL_NONE, M0, 0, 1},
    {2, 13, 0, 0, 8, 0, 3, 4, 0, 0, 1, WO_ONLY, SD, TL, TU_KL_NONE, M0, 0, 1},
    {2, 13, 0, 13, 16, 0, 3, 5, 6, 0, 0, WO_NONE, SD, NONE, TU_KL_ZERO, MLS, TU_MASKF_INF, 1},
    {1, 9, 0, 0, 12, 0, 1, 12, 0, 12, 1, WO_BIAS, 0.3f, BR, TU_KL_NONE, M0, 0, 0},
    /* cross-attention: kv of a different length and width */
    {2, 7, 1, 11, 8, 5, 1, 4, 0, 0, 0, WO_NONE, SD, NONE, TU_KL_NONE, M0, 0, 1},
    {1, 61, 1, 7, 16, 24, 3, 8, 4, 10, 1, WO_BIAS, SD, NONE, TU_KL_NONE, M0, 0, 1},
    {2, 13, 1, 5, 8, 3, 3, 4, 0, 0, 1, WO_ONLY, SD, BR, TU_KL_VARIED, M0, 0, 1},
    {2, 7, 1, 19, 8, 0, 3, 4, 7, 5, 0, WO_BIAS, 0.3f, NONE, TU_KL_NONE, MBH,
     TU_MASKF_INF | TU_MASKF_ROWINF, 1},
    {2, 19, 1, 7, 6, 10, 1, 3, 2, 0, 1, WO_NONE, SD, TL, TU_KL_FULL, MLS, 0, 0},
    {1, 2, 1, 267, 8, 21, 3, 8, 0, 0, 1, WO_BIAS, SD, NONE, TU_KL_ZERO, M0, 0, 1},
};
#define N_CASES (sizeof cases / sizeof cases[0])

typedef struct {
    clattn_mha_desc d;
    clattn_masks m; /* d.masks points here */
    size_t kl[2];
    size_t S, dkv, Dv, od, ycols;
    size_t nx, nkv, nwq, nwk, nwv, nwo, nm, ny, nw;
    float *x, *kv, *wq, *bq, *wk, *bk, *wv, *bv, *wo, *bo, *mask;
    clattn_mha_host_weights hw;
    double *ry, *rw;
} prepared;

static void prepare(size_t ci, prepared *p)
{
    const mha_case *c = &cases[ci];
    memset(p, 0, sizeof *p);
    p->d = (clattn_mha_desc)CLATTN_MHA_DESC_INIT;
    p->d.batch = c->B;
    p->d.q_len = c->L;
    p->d.kv_len = c->S;
    p->d.model_dim = c->dm;
    p->d.kv_dim = c->dkv;
    p->d.heads = c->H;
    p->d.qk_dim = c->Dqk;
    p->d.v_dim = c->Dv;
    p->d.out_dim = c->od;
    p->d.scale = c->scale;
    p->m = (clattn_masks)CLATTN_MASKS_INIT;
    p->m.causal = c->causal;
    p->S = c->cross ? c->S : c->L;
    p->m.key_lengths = tu_make_key_lengths(c->kl, c->B, p->S, p->kl);
    p->m.additive = c->add;
    p->d.masks = &p->m;
    p->dkv = c->cross ? (c->dkv ? c->dkv : c->dm) : c->dm;
    p->Dv = c->Dv ? c->Dv : c->Dqk;
    p->od = c->od ? c->od : c->dm;
    p->ycols = c->wo ? p->od : c->H * p->Dv;

    p->nx = c->B * c->L * c->dm;
    p->nkv = c->cross ? c->B * p->S * p->dkv : 0;
    p->nwq = c->dm * c->H * c->Dqk;
    p->nwk = p->dkv * c->H * c->Dqk;
    p->nwv = p->dkv * c->H * p->Dv;
    p->nwo = c->H * p->Dv * p->od;
    p->ny = c->B * c->L * p->ycols;
    p->nw = c->B * c->H * c->L * p->S;

    uint64_t seed = 1000 * (ci + 1);
    p->x = tu_falloc(p->nx);
    tu_fill_uniform(p->x, p->nx, 1.0f, seed + 1);
    if (c->cross) {
        p->kv = tu_falloc(p->nkv);
        tu_fill_uniform(p->kv, p->nkv, 1.0f, seed + 2);
    }
    /* weights ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)) keep the scores O(1) */
    p->wq = tu_falloc(p->nwq);
    tu_fill_uniform(p->wq, p->nwq, 1.0f / sqrtf((float)c->dm), seed + 3);
    p->wk = tu_falloc(p->nwk);
    tu_fill_uniform(p->wk, p->nwk, 1.0f / sqrtf((float)p->dkv), seed + 4);
    p->wv = tu_falloc(p->nwv);
    tu_fill_uniform(p->wv, p->nwv, 1.0f / sqrtf((float)p->dkv), seed + 5);
    if (c->bias) {
        p->bq = tu_falloc(c->H * c->Dqk);
        tu_fill_uniform(p->bq, c->H * c->Dqk, 0.5f, seed + 6);
        p->bk = tu_falloc(c->H * c->Dqk);
        tu_fill_uniform(p->bk, c->H * c->Dqk, 0.5f, seed + 7);
        p->bv = tu_falloc(c->H * p->Dv);
        tu_fill_uniform(p->bv, c->H * p->Dv, 0.5f, seed + 8);
    }
    if (c->wo != WO_NONE) {
        p->wo = tu_falloc(p->nwo);
        tu_fill_uniform(p->wo, p->nwo, 1.0f / sqrtf((float)(c->H * p->Dv)), seed + 9);
    }
    if (c->wo == WO_BIAS) {
        p->bo = tu_falloc(p->od);
        tu_fill_uniform(p->bo, p->od, 0.5f, seed + 10);
    }
    if (c->add != CLATTN_MASK_NONE)
        p->mask = tu_make_mask(c->add, c->B, c->H, c->L, p->S, c->addf, seed + 11, &p->nm);
    p->hw = (clattn_mha_host_weights)CLATTN_MHA_HOST_WEIGHTS_INIT;
    p->hw.w_q = p->wq;
    p->hw.b_q = p->bq;
    p->hw.w_k = p->wk;
    p->hw.b_k = p->bk;
    p->hw.w_v = p->wv;
    p->hw.b_v = p->bv;
    p->hw.w_o = p->wo;
    p->hw.b_o = p->bo;
    p->ry = tu_dalloc(p->ny);
    p->rw = tu_dalloc(p->nw);
    ref_mha(&p->d, p->x, p->kv, &p->hw, p->mask, p->ry, p->rw);
}

static void label(size_t ci, size_t dev, const char *api)
{
    const mha_case *c = &cases[ci];
    tu_set_label("%s case %zu (B %zu L %zu %s S %zu dm %zu dkv %zu H %zu Dqk %zu Dv %zu od %zu "
                 "bias %d wo %d scale %g causal %d kl %d additive %d/%d) on %s",
                 api, ci, c->B, c->L, c->cross ? "cross" : "self", c->S, c->dm, c->dkv, c->H,
                 c->Dqk, c->Dv, c->od, c->bias, c->wo, (double)c->scale, (int)c->causal, c->kl,
                 (int)c->add, c->addf, tu_dev_spec[dev]);
}

START_TEST(test_mha_host)
{
    size_t ci = TU_CASE(_i), dev = TU_DEVICE(_i);
    clattn_context *ctx = tu_ctx[dev];
    prepared p;
    prepare(ci, &p);
    label(ci, dev, "mha_host");
    float *y = tu_host_alloc(p.ny, NULL);
    float *w = cases[ci].want_weights ? tu_host_alloc(p.nw, NULL) : NULL;
    clattn_status st = clattn_mha_host(ctx, &p.d, p.x, p.kv, &p.hw, p.mask, y, w);
    TU_ASSERT_OK(st, ctx, "clattn_mha_host");
    tu_host_check_guard(y, p.ny, "out");
    check_close_named("out", y, p.ry, p.ny, NULL);
    if (w) {
        tu_host_check_guard(w, p.nw, "attn_weights");
        check_close_named("attn_weights", w, p.rw, p.nw, NULL);
    }
}
END_TEST

START_TEST(test_mha_mem)
{
    size_t ci = TU_CASE(_i), dev = TU_DEVICE(_i);
    const mha_case *c = &cases[ci];
    clattn_context *ctx = tu_ctx[dev];
    prepared p;
    prepare(ci, &p);
    label(ci, dev, "mha");
    size_t nqb = c->H * c->Dqk, nvb = c->H * p.Dv;
    cl_mem mx = tu_dev_alloc(ctx, p.nx, p.x);
    cl_mem mkv = p.kv ? tu_dev_alloc(ctx, p.nkv, p.kv) : NULL;
    clattn_mha_weights mw = CLATTN_MHA_WEIGHTS_INIT;
    mw.w_q = tu_dev_alloc(ctx, p.nwq, p.wq);
    mw.w_k = tu_dev_alloc(ctx, p.nwk, p.wk);
    mw.w_v = tu_dev_alloc(ctx, p.nwv, p.wv);
    if (p.bq) {
        mw.b_q = tu_dev_alloc(ctx, nqb, p.bq);
        mw.b_k = tu_dev_alloc(ctx, nqb, p.bk);
        mw.b_v = tu_dev_alloc(ctx, nvb, p.bv);
    }
    if (p.wo)
        mw.w_o = tu_dev_alloc(ctx, p.nwo, p.wo);
    if (p.bo)
        mw.b_o = tu_dev_alloc(ctx, p.od, p.bo);
    cl_mem mm = p.mask ? tu_dev_alloc(ctx, p.nm, p.mask) : NULL;
    cl_mem my = tu_dev_alloc(ctx, p.ny, NULL);
    /* the cl_mem variant requests the weights where the host variant does not, and vice versa */
    cl_mem maw = c->want_weights ? NULL : tu_dev_alloc(ctx, p.nw, NULL);
    clattn_status st = clattn_mha(ctx, &p.d, mx, mkv, &mw, mm, my, maw);
    TU_ASSERT_OK(st, ctx, "clattn_mha");
    tu_finish(ctx);
    check_close_named("out", tu_dev_read_checked(ctx, my, p.ny, "out"), p.ry, p.ny, NULL);
    if (maw)
        check_close_named("attn_weights", tu_dev_read_checked(ctx, maw, p.nw, "attn_weights"),
                          p.rw, p.nw, NULL);
    /* inputs unchanged, guards intact */
    tu_dev_check_equal(ctx, mx, p.x, p.nx, "x");
    tu_dev_check_guard(ctx, mx, p.nx, "x");
    if (mkv) {
        tu_dev_check_equal(ctx, mkv, p.kv, p.nkv, "kv");
        tu_dev_check_guard(ctx, mkv, p.nkv, "kv");
    }
    tu_dev_check_equal(ctx, mw.w_q, p.wq, p.nwq, "w_q");
    tu_dev_check_guard(ctx, mw.w_q, p.nwq, "w_q");
    tu_dev_check_equal(ctx, mw.w_k, p.wk, p.nwk, "w_k");
    tu_dev_check_guard(ctx, mw.w_k, p.nwk, "w_k");
    tu_dev_check_equal(ctx, mw.w_v, p.wv, p.nwv, "w_v");
    tu_dev_check_guard(ctx, mw.w_v, p.nwv, "w_v");
    if (p.bq) {
        tu_dev_check_equal(ctx, mw.b_q, p.bq, nqb, "b_q");
        tu_dev_check_guard(ctx, mw.b_q, nqb, "b_q");
        tu_dev_check_equal(ctx, mw.b_k, p.bk, nqb, "b_k");
        tu_dev_check_guard(ctx, mw.b_k, nqb, "b_k");
        tu_dev_check_equal(ctx, mw.b_v, p.bv, nvb, "b_v");
        tu_dev_check_guard(ctx, mw.b_v, nvb, "b_v");
    }
    if (p.wo) {
        tu_dev_check_equal(ctx, mw.w_o, p.wo, p.nwo, "w_o");
        tu_dev_check_guard(ctx, mw.w_o, p.nwo, "w_o");
    }
    if (p.bo) {
        tu_dev_check_equal(ctx, mw.b_o, p.bo, p.od, "b_o");
        tu_dev_check_guard(ctx, mw.b_o, p.od, "b_o");
    }
    if (mm) {
        tu_dev_check_equal(ctx, mm, p.mask, p.nm, "mask");
        tu_dev_check_guard(ctx, mm, p.nm, "mask");
    }
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* The tutorial's worked example                                                                   */
/* ---------------------------------------------------------------------------------------------- */

/* X, W_Q, W_K, W_V of the worked example come from tools/reference/tutorial_example.h, shared with the
 * CLI. */

/* The tutorial's printed attention weights (4 decimals), in units of 1e-4. */
static const int tut_weights_e4[4][4] = {
    {2480, 2509, 2499, 2512},
    {2513, 2499, 2498, 2490},
    {2484, 2506, 2495, 2515},
    {2479, 2516, 2485, 2520},
};
/* The tutorial's output row 0 (float64 numpy). */
static const double tut_out0[4] = {-0.02532332, 0.07336365, -0.03918142, 0.00527216};

typedef struct {
    float x[32], wq[32], wk[32], wv[32];
    clattn_mha_desc d;
    double ry[16], rw[16];
} tutorial;

static void tutorial_prepare(tutorial *t)
{
    memset(t, 0, sizeof *t);
    t->d = (clattn_mha_desc)CLATTN_MHA_DESC_INIT;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 8; j++)
            t->x[i * 8 + j] = (float)tutorial_x[i][j];
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 4; j++) {
            t->wq[i * 4 + j] = (float)tutorial_w_q[i][j];
            t->wk[i * 4 + j] = (float)tutorial_w_k[i][j];
            t->wv[i * 4 + j] = (float)tutorial_w_v[i][j];
        }
    t->d.batch = 1;
    t->d.q_len = 4;
    t->d.model_dim = 8;
    t->d.heads = 1;
    t->d.qk_dim = 4;
    clattn_mha_host_weights hw = CLATTN_MHA_HOST_WEIGHTS_INIT;
    hw.w_q = t->wq;
    hw.w_k = t->wk;
    hw.w_v = t->wv;
    ref_mha(&t->d, t->x, NULL, &hw, NULL, t->ry, t->rw);
    /* the fp64 reference itself reproduces the tutorial (guards against typos in the data above) */
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            ck_assert_msg((int)floor(t->rw[i * 4 + j] * 1e4 + 0.5) == tut_weights_e4[i][j],
                          "reference weight [%d][%d] = %.6f does not round to the tutorial's", i, j,
                          t->rw[i * 4 + j]);
    for (int j = 0; j < 4; j++)
        ck_assert_msg(fabs(t->ry[j] - tut_out0[j]) < 2e-8, "reference out[0][%d] = %.9f", j,
                      t->ry[j]);
}

static void tutorial_check(const tutorial *t, const float *y, const float *w)
{
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            int r = (int)floor((double)w[i * 4 + j] * 1e4 + 0.5);
            ck_assert_msg(r == tut_weights_e4[i][j],
                          "%s: weight [%d][%d] = %.7f rounds to 0.%04d, the tutorial prints 0.%04d",
                          tu_label(), i, j, (double)w[i * 4 + j], r, tut_weights_e4[i][j]);
        }
    for (int j = 0; j < 4; j++)
        ck_assert_msg(fabs((double)y[j] - tut_out0[j]) <= 1e-6,
                      "%s: out[0][%d] = %.8f, the tutorial gives %.8f", tu_label(), j, (double)y[j],
                      tut_out0[j]);
    check_close_named("out", y, t->ry, 16, NULL);
    check_close_named("attn_weights", w, t->rw, 16, NULL);
}

START_TEST(test_tutorial_host)
{
    clattn_context *ctx = tu_ctx[_i];
    tu_set_label("tutorial example (mha_host) on %s", tu_dev_spec[_i]);
    tutorial t;
    tutorial_prepare(&t);
    clattn_mha_host_weights hw = CLATTN_MHA_HOST_WEIGHTS_INIT;
    hw.w_q = t.wq;
    hw.w_k = t.wk;
    hw.w_v = t.wv;
    float *y = tu_host_alloc(16, NULL), *w = tu_host_alloc(16, NULL);
    clattn_status st = clattn_mha_host(ctx, &t.d, t.x, NULL, &hw, NULL, y, w);
    TU_ASSERT_OK(st, ctx, "clattn_mha_host");
    tu_host_check_guard(y, 16, "out");
    tu_host_check_guard(w, 16, "attn_weights");
    tutorial_check(&t, y, w);
}
END_TEST

START_TEST(test_tutorial_mem)
{
    clattn_context *ctx = tu_ctx[_i];
    tu_set_label("tutorial example (mha) on %s", tu_dev_spec[_i]);
    tutorial t;
    tutorial_prepare(&t);
    clattn_mha_weights mw = CLATTN_MHA_WEIGHTS_INIT;
    mw.w_q = tu_dev_alloc(ctx, 32, t.wq);
    mw.w_k = tu_dev_alloc(ctx, 32, t.wk);
    mw.w_v = tu_dev_alloc(ctx, 32, t.wv);
    cl_mem mx = tu_dev_alloc(ctx, 32, t.x), my = tu_dev_alloc(ctx, 16, NULL),
           mw_out = tu_dev_alloc(ctx, 16, NULL);
    clattn_status st = clattn_mha(ctx, &t.d, mx, NULL, &mw, NULL, my, mw_out);
    TU_ASSERT_OK(st, ctx, "clattn_mha");
    tu_finish(ctx);
    float *y = tu_dev_read_checked(ctx, my, 16, "out");
    float *w = tu_dev_read_checked(ctx, mw_out, 16, "attn_weights");
    tutorial_check(&t, y, w);
}
END_TEST

/* The tutorial layer equals clattn_sdpa applied to the projections done by clattn_projection. */
START_TEST(test_tutorial_by_stages)
{
    clattn_context *ctx = tu_ctx[_i];
    tu_set_label("tutorial example by stages on %s", tu_dev_spec[_i]);
    tutorial t;
    tutorial_prepare(&t);
    cl_mem mx = tu_dev_alloc(ctx, 32, t.x);
    cl_mem wq = tu_dev_alloc(ctx, 32, t.wq), wk = tu_dev_alloc(ctx, 32, t.wk),
           wv = tu_dev_alloc(ctx, 32, t.wv);
    cl_mem q = tu_dev_alloc(ctx, 16, NULL), k = tu_dev_alloc(ctx, 16, NULL),
           v = tu_dev_alloc(ctx, 16, NULL), o = tu_dev_alloc(ctx, 16, NULL),
           w = tu_dev_alloc(ctx, 16, NULL);
    clattn_status st = clattn_projection(ctx, 4, 8, 4, mx, wq, NULL, q);
    TU_ASSERT_OK(st, ctx, "clattn_projection to q");
    st = clattn_projection(ctx, 4, 8, 4, mx, wk, NULL, k);
    TU_ASSERT_OK(st, ctx, "clattn_projection to k");
    st = clattn_projection(ctx, 4, 8, 4, mx, wv, NULL, v);
    TU_ASSERT_OK(st, ctx, "clattn_projection to v");
    clattn_sdpa_desc d = tu_sdpa_desc(1, 1, 4, 4, 4, 0);
    st = clattn_sdpa(ctx, &d, q, k, v, NULL, o, w, NULL);
    TU_ASSERT_OK(st, ctx, "clattn_sdpa");
    tu_finish(ctx);
    tutorial_check(&t, tu_dev_read_checked(ctx, o, 16, "out"),
                   tu_dev_read_checked(ctx, w, 16, "weights"));
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("mha");
    TCase *tc = tu_tcase("mha_host");
    tcase_add_loop_test(tc, test_mha_host, 0, (int)(N_CASES * tu_ndev));
    suite_add_tcase(s, tc);
    tc = tu_tcase("mha_mem");
    tcase_add_loop_test(tc, test_mha_mem, 0, (int)(N_CASES * tu_ndev));
    suite_add_tcase(s, tc);
    tc = tu_tcase("tutorial");
    tcase_add_loop_test(tc, test_tutorial_host, 0, (int)tu_ndev);
    tcase_add_loop_test(tc, test_tutorial_mem, 0, (int)tu_ndev);
    tcase_add_loop_test(tc, test_tutorial_by_stages, 0, (int)tu_ndev);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_main(make_suite); }
