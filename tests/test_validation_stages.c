/*
 * Argument validation of the stage entry points clattn_projection, clattn_softmax and
 * clattn_weighted_sum: every bad-case table and the positive controls with exactly-sized buffers.
 * See validation_util.h.
 */
#include "validation_util.h"

/* ---------------------------------------------------------------------------------------------- */
/* Projection                                                                                      */
/* ---------------------------------------------------------------------------------------------- */

enum proj_mut {
    P_CTX_NULL, P_X_NULL, P_W_NULL, P_Y_NULL, P_ROWS0, P_IN0, P_OUT0, P_OVF_ROWS, P_OVF_INOUT,
    P_X_SMALL, P_W_SMALL, P_BIAS_SMALL, P_Y_SMALL,
};
static const bad_case proj_bad[] = {
    {P_CTX_NULL, NA, 0, "ctx NULL"},
    {P_X_NULL, NA, 0, "x NULL"},
    {P_W_NULL, NA, 0, "w NULL"},
    {P_Y_NULL, NA, 0, "y NULL"},
    {P_ROWS0, ZS, 0, "rows 0"},
    {P_IN0, ZS, 0, "in_dim 0"},
    {P_OUT0, ZS, 0, "out_dim 0"},
    {P_OVF_ROWS, OV, 0, "rows SIZE_MAX/2 × in_dim 4 overflows"},
    {P_OVF_INOUT, OV, 0, "in_dim SIZE_MAX/2 × out_dim 4 overflows"},
    {P_X_SMALL, TS, 0, "x one float too small"},
    {P_W_SMALL, TS, 0, "w one float too small"},
    {P_BIAS_SMALL, TS, 0, "bias one float too small"},
    {P_Y_SMALL, TS, 0, "y one float too small"},
};
#define N_PROJ_BAD (sizeof proj_bad / sizeof proj_bad[0])
enum { PR = 3, PI = 4, PO = 5 };

START_TEST(test_projection_bad)
{
    const bad_case *bc = &proj_bad[TU_CASE(_i)];
    size_t dev = TU_DEVICE(_i);
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("clattn_projection: %s on %s", bc->name, tu_dev_spec[dev]);
    float hx[PR * PI], hw[PI * PO], hb[PO];
    tu_fill_uniform(hx, PR * PI, 1.0f, 1);
    tu_fill_uniform(hw, PI * PO, 1.0f, 2);
    tu_fill_uniform(hb, PO, 1.0f, 3);
    cl_mem x = tu_dev_alloc_exact(ctx, PR * PI, hx), w = tu_dev_alloc_exact(ctx, PI * PO, hw),
           b = tu_dev_alloc_exact(ctx, PO, hb), y = tu_dev_alloc_exact(ctx, PR * PO, NULL);
    cl_mem y_orig = y;
    clattn_context *call_ctx = ctx;
    size_t rows = PR, in = PI, out = PO;
    switch (bc->mut) {
    case P_CTX_NULL: call_ctx = NULL; break;
    case P_X_NULL: x = NULL; break;
    case P_W_NULL: w = NULL; break;
    case P_Y_NULL: y = NULL; break;
    case P_ROWS0: rows = 0; break;
    case P_IN0: in = 0; break;
    case P_OUT0: out = 0; break;
    case P_OVF_ROWS: rows = HALF_MAX; break;
    case P_OVF_INOUT: in = HALF_MAX; break;
    case P_X_SMALL: x = tu_dev_alloc_exact(ctx, PR * PI - 1, hx); break;
    case P_W_SMALL: w = tu_dev_alloc_exact(ctx, PI * PO - 1, hw); break;
    case P_BIAS_SMALL: b = tu_dev_alloc_exact(ctx, PO - 1, hb); break;
    case P_Y_SMALL: y = tu_dev_alloc_exact(ctx, PR * PO - 1, NULL); break;
    default: ck_abort_msg("unknown mutation");
    }
    clattn_status st = clattn_projection(call_ctx, rows, in, out, x, w, b, y);
    check_status(st, bc, call_ctx);
    check_dev_untouched(ctx, y_orig, PR * PO, "y");
    if (bc->mut == P_Y_SMALL)
        check_dev_untouched(ctx, y, PR * PO - 1, "y (small)");
}
END_TEST

START_TEST(test_projection_good)
{
    clattn_context *ctx = tu_ctx[_i];
    tu_set_label("good clattn_projection with exact-size buffers on %s", tu_dev_spec[_i]);
    float hx[PR * PI], hw[PI * PO], hb[PO];
    tu_fill_uniform(hx, PR * PI, 1.0f, 1);
    tu_fill_uniform(hw, PI * PO, 1.0f, 2);
    tu_fill_uniform(hb, PO, 1.0f, 3);
    double ref[PR * PO];
    ref_matmul(PR, PI, PO, hx, hw, hb, ref);
    cl_mem x = tu_dev_alloc_exact(ctx, PR * PI, hx), w = tu_dev_alloc_exact(ctx, PI * PO, hw),
           b = tu_dev_alloc_exact(ctx, PO, hb), y = tu_dev_alloc_exact(ctx, PR * PO, NULL);
    ck_assert(clattn_projection(ctx, 0, PI, PO, x, w, b, y) != CLATTN_SUCCESS);
    clattn_status st = clattn_projection(ctx, PR, PI, PO, x, w, b, y);
    TU_ASSERT_OK(st, ctx, "projection");
    tu_finish(ctx);
    check_close_named("y", tu_dev_read(ctx, y, PR * PO), ref, PR * PO, NULL);
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* Softmax                                                                                         */
/* ---------------------------------------------------------------------------------------------- */

enum softmax_mut {
    X_CTX_NULL, X_SCORES_NULL, X_WEIGHTS_NULL, X_ROWS0, X_COLS0, X_OVF, X_OVF_BYTES,
    X_SCORES_SMALL, X_WEIGHTS_SMALL, X_LSE_SMALL,
};
static const bad_case softmax_bad[] = {
    {X_CTX_NULL, NA, 0, "ctx NULL"},
    {X_SCORES_NULL, NA, 0, "scores NULL"},
    {X_WEIGHTS_NULL, NA, 0, "weights NULL"},
    {X_ROWS0, ZS, 0, "rows 0"},
    {X_COLS0, ZS, 0, "cols 0"},
    {X_OVF, OV, 0, "rows SIZE_MAX/2 × cols 4 overflows"},
    {X_OVF_BYTES, OV, 0, "2^62 elements × sizeof(float) overflows"},
    {X_SCORES_SMALL, TS, 0, "scores one float too small"},
    {X_WEIGHTS_SMALL, TS, 0, "weights one float too small"},
    {X_LSE_SMALL, TS, 0, "lse one float too small"},
};
#define N_SOFTMAX_BAD (sizeof softmax_bad / sizeof softmax_bad[0])
enum { XR = 6, XC = 5 };

START_TEST(test_softmax_bad)
{
    const bad_case *bc = &softmax_bad[TU_CASE(_i)];
    size_t dev = TU_DEVICE(_i);
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("clattn_softmax: %s on %s", bc->name, tu_dev_spec[dev]);
    float hs[XR * XC];
    tu_fill_uniform(hs, XR * XC, 2.0f, 5);
    cl_mem s = tu_dev_alloc_exact(ctx, XR * XC, hs), w = tu_dev_alloc_exact(ctx, XR * XC, NULL),
           l = tu_dev_alloc_exact(ctx, XR, NULL);
    cl_mem w_orig = w, l_orig = l, small = NULL;
    size_t small_n = 0;
    clattn_context *call_ctx = ctx;
    size_t rows = XR, cols = XC;
    switch (bc->mut) {
    case X_CTX_NULL: call_ctx = NULL; break;
    case X_SCORES_NULL: s = NULL; break;
    case X_WEIGHTS_NULL: w = NULL; break;
    case X_ROWS0: rows = 0; break;
    case X_COLS0: cols = 0; break;
    case X_OVF: rows = HALF_MAX; cols = 4; break;
    case X_OVF_BYTES: rows = BIG_POW2; cols = 1; break;
    case X_SCORES_SMALL: s = tu_dev_alloc_exact(ctx, XR * XC - 1, hs); break;
    case X_WEIGHTS_SMALL: small_n = XR * XC - 1; w = small = tu_dev_alloc_exact(ctx, small_n, NULL); break;
    case X_LSE_SMALL: small_n = XR - 1; l = small = tu_dev_alloc_exact(ctx, small_n, NULL); break;
    default: ck_abort_msg("unknown mutation");
    }
    clattn_status st = clattn_softmax(call_ctx, rows, cols, s, w, l);
    check_status(st, bc, call_ctx);
    check_dev_untouched(ctx, w_orig, XR * XC, "weights");
    check_dev_untouched(ctx, l_orig, XR, "lse");
    if (small)
        check_dev_untouched(ctx, small, small_n, "(small buffer)");
}
END_TEST

START_TEST(test_softmax_good)
{
    clattn_context *ctx = tu_ctx[_i];
    tu_set_label("good clattn_softmax with exact-size buffers on %s", tu_dev_spec[_i]);
    float hs[XR * XC];
    tu_fill_uniform(hs, XR * XC, 2.0f, 5);
    double rp[XR * XC], rl[XR];
    ref_softmax(XR, XC, hs, rp, rl);
    cl_mem s = tu_dev_alloc_exact(ctx, XR * XC, hs), w = tu_dev_alloc_exact(ctx, XR * XC, NULL),
           l = tu_dev_alloc_exact(ctx, XR, NULL);
    ck_assert(clattn_softmax(ctx, XR, 0, s, w, l) != CLATTN_SUCCESS);
    clattn_status st = clattn_softmax(ctx, XR, XC, s, w, l);
    TU_ASSERT_OK(st, ctx, "softmax");
    tu_finish(ctx);
    check_close_named("weights", tu_dev_read(ctx, w, XR * XC), rp, XR * XC, NULL);
    check_close_named("lse", tu_dev_read(ctx, l, XR), rl, XR, NULL);
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* Weighted sum                                                                                    */
/* ---------------------------------------------------------------------------------------------- */

enum wsum_mut {
    W_CTX_NULL, W_DESC_NULL, W_P_NULL, W_V_NULL, W_OUT_NULL, W_B0, W_H0, W_L0, W_S0, W_DV0,
    W_OVF, W_P_SMALL, W_V_SMALL, W_OUT_SMALL,
};
static const bad_case wsum_bad[] = {
    {W_CTX_NULL, NA, 0, "ctx NULL"},
    {W_DESC_NULL, NA, 0, "desc NULL"},
    {W_P_NULL, NA, 0, "weights NULL"},
    {W_V_NULL, NA, 0, "v NULL"},
    {W_OUT_NULL, NA, 0, "out NULL"},
    {W_B0, ZS, 0, "batch 0"},
    {W_H0, ZS, 0, "heads 0"},
    {W_L0, ZS, 0, "q_len 0"},
    {W_S0, ZS, 0, "kv_len 0"},
    {W_DV0, ZS, 0, "v_dim 0 and qk_dim 0"},
    {W_OVF, OV, 0, "batch SIZE_MAX/2 × heads 4 overflows"},
    {W_P_SMALL, TS, 0, "weights one float too small"},
    {W_V_SMALL, TS, 0, "v one float too small"},
    {W_OUT_SMALL, TS, 0, "out one float too small"},
};
#define N_WSUM_BAD (sizeof wsum_bad / sizeof wsum_bad[0])

START_TEST(test_wsum_bad)
{
    const bad_case *bc = &wsum_bad[TU_CASE(_i)];
    size_t dev = TU_DEVICE(_i);
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("clattn_weighted_sum: %s on %s", bc->name, tu_dev_spec[dev]);
    enum { NP = GB * GH * GL * GS, NV = GB * GH * GS * GDV, NO = GB * GH * GL * GDV };
    float hp[NP], hv[NV];
    tu_fill_uniform(hp, NP, 1.0f, 6);
    tu_fill_uniform(hv, NV, 1.0f, 7);
    clattn_sdpa_desc d = tu_sdpa_desc(GB, GH, GL, GS, GD, GDV); /* the sizes of the good SDPA call */
    cl_mem p = tu_dev_alloc_exact(ctx, NP, hp), v = tu_dev_alloc_exact(ctx, NV, hv),
           o = tu_dev_alloc_exact(ctx, NO, NULL);
    cl_mem o_orig = o;
    clattn_context *call_ctx = ctx;
    const clattn_sdpa_desc *dp = &d;
    switch (bc->mut) {
    case W_CTX_NULL: call_ctx = NULL; break;
    case W_DESC_NULL: dp = NULL; break;
    case W_P_NULL: p = NULL; break;
    case W_V_NULL: v = NULL; break;
    case W_OUT_NULL: o = NULL; break;
    case W_B0: d.batch = 0; break;
    case W_H0: d.heads = 0; break;
    case W_L0: d.q_len = 0; break;
    case W_S0: d.kv_len = 0; break;
    case W_DV0: d.v_dim = 0; d.qk_dim = 0; break;
    case W_OVF: d.batch = HALF_MAX; d.heads = 4; break;
    case W_P_SMALL: p = tu_dev_alloc_exact(ctx, NP - 1, hp); break;
    case W_V_SMALL: v = tu_dev_alloc_exact(ctx, NV - 1, hv); break;
    case W_OUT_SMALL: o = tu_dev_alloc_exact(ctx, NO - 1, NULL); break;
    default: ck_abort_msg("unknown mutation");
    }
    clattn_status st = clattn_weighted_sum(call_ctx, dp, p, v, o);
    check_status(st, bc, call_ctx);
    check_dev_untouched(ctx, o_orig, NO, "out");
    if (bc->mut == W_OUT_SMALL)
        check_dev_untouched(ctx, o, NO - 1, "out (small)");
}
END_TEST

START_TEST(test_wsum_good)
{
    clattn_context *ctx = tu_ctx[_i];
    tu_set_label("good clattn_weighted_sum with exact-size buffers on %s", tu_dev_spec[_i]);
    enum { NP = GB * GH * GL * GS, NV = GB * GH * GS * GDV, NO = GB * GH * GL * GDV };
    float hp[NP], hv[NV];
    tu_fill_uniform(hp, NP, 1.0f, 6);
    tu_fill_uniform(hv, NV, 1.0f, 7);
    clattn_sdpa_desc d = tu_sdpa_desc(GB, GH, GL, GS, GD, GDV); /* the sizes of the good SDPA call */
    double ref[NO];
    ref_weighted_sum(&d, hp, hv, ref);
    cl_mem p = tu_dev_alloc_exact(ctx, NP, hp), v = tu_dev_alloc_exact(ctx, NV, hv),
           o = tu_dev_alloc_exact(ctx, NO, NULL);
    clattn_status st = clattn_weighted_sum(ctx, &d, p, v, o);
    TU_ASSERT_OK(st, ctx, "weighted_sum");
    tu_finish(ctx);
    check_close_named("out", tu_dev_read(ctx, o, NO), ref, NO, NULL);
}
END_TEST
/* ---------------------------------------------------------------------------------------------- */

static Suite *make_suite(void)
{
    Suite *s = suite_create("validation_stages");
    tu_add_loop(s, "projection_bad", test_projection_bad, N_PROJ_BAD * tu_ndev);
    tu_add_loop(s, "softmax_bad", test_softmax_bad, N_SOFTMAX_BAD * tu_ndev);
    tu_add_loop(s, "weighted_sum_bad", test_wsum_bad, N_WSUM_BAD * tu_ndev);

    TCase *tc = tu_tcase("good_calls");
    tcase_add_loop_test(tc, test_projection_good, 0, (int)tu_ndev);
    tcase_add_loop_test(tc, test_softmax_good, 0, (int)tu_ndev);
    tcase_add_loop_test(tc, test_wsum_good, 0, (int)tu_ndev);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_main(make_suite); }
