/*
 * Failure injection (built only with -Dfault_injection=true): every OpenCL allocation, enqueue and
 * CLBlast call inside an SDPA or MHA call is made to fail in turn, as a device out of memory or
 * resources would. Each such call must either report an error with the caller's outputs untouched, or
 * recover (the fused kernel falls back to the staged path) with a correct result; and the next call on
 * the same context must succeed. Run in the sanitizer build, it also proves that no failure leaks.
 */
#include "test_util.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Test-only hooks of the library (src/fault.c). */
void clattn__fault_arm(unsigned long n);
unsigned long clattn__fault_points(void);

typedef enum { SC_SDPA_FUSED, SC_SDPA_STAGED_WEIGHTS, SC_SDPA_MEM_STAGED, SC_MHA_WEIGHTS, SC_MHA_FUSED, SC_COUNT } scenario;
static const char *const scenario_names[SC_COUNT] = {
    "sdpa_host fused (mask, key lengths, lse)", "sdpa_host staged with weights", "sdpa cl_mem staged",
    "mha_host with W_O, biases and weights (staged)", "mha_host without weights (fused)"};

enum { B = 2, H = 3, L = 19, S = 23, D = 8, DM = 12, OD = 10 };

typedef struct fixture {
    clattn_sdpa_desc d;
    clattn_mha_desc md;
    clattn_masks dm, mdm; /* d.masks and md.masks point here */
    size_t kl[B];
    float q[B * H * L * D], k[B * H * S * D], v[B * H * S * D], mask[L * S];
    float x[B * L * DM], wq[DM * H * D], wk[DM * H * D], wv[DM * H * D], wo[H * D * OD], bq[H * D], bo[OD];
    double ref_out[B * L * OD > B * H * L * D ? B * L * OD : B * H * L * D], ref_w[B * H * L * S], ref_lse[B * H * L];
} fixture;

static fixture fx;
static size_t points_walked;

static void fixture_prepare(scenario sc)
{
    memset(&fx, 0, sizeof fx);
    tu_fill_uniform(fx.q, sizeof fx.q / sizeof fx.q[0], 1.0f, 1);
    tu_fill_uniform(fx.k, sizeof fx.k / sizeof fx.k[0], 1.0f, 2);
    tu_fill_uniform(fx.v, sizeof fx.v / sizeof fx.v[0], 1.0f, 3);
    tu_fill_uniform(fx.mask, L * S, 1.0f, 4);
    tu_fill_uniform(fx.x, sizeof fx.x / sizeof fx.x[0], 1.0f, 5);
    tu_fill_uniform(fx.wq, sizeof fx.wq / sizeof fx.wq[0], 0.5f, 6);
    tu_fill_uniform(fx.wk, sizeof fx.wk / sizeof fx.wk[0], 0.5f, 7);
    tu_fill_uniform(fx.wv, sizeof fx.wv / sizeof fx.wv[0], 0.5f, 8);
    tu_fill_uniform(fx.wo, sizeof fx.wo / sizeof fx.wo[0], 0.5f, 9);
    tu_fill_uniform(fx.bq, H * D, 0.5f, 10);
    tu_fill_uniform(fx.bo, OD, 0.5f, 11);
    fx.kl[0] = S;
    fx.kl[1] = S / 2;
    fx.dm = (clattn_masks)CLATTN_MASKS_INIT;
    fx.dm.causal = CLATTN_CAUSAL_BOTTOM_RIGHT;
    fx.dm.key_lengths = fx.kl;
    fx.dm.additive = CLATTN_MASK_L_S;
    fx.d = tu_sdpa_desc(B, H, L, S, D, 0);
    fx.d.masks = &fx.dm;
    fx.d.algorithm = CLATTN_ALGORITHM_AUTO;
    if (sc == SC_SDPA_STAGED_WEIGHTS || sc == SC_SDPA_MEM_STAGED)
        fx.d.algorithm = CLATTN_ALGORITHM_STAGED;
    fx.mdm = (clattn_masks)CLATTN_MASKS_INIT;
    fx.mdm.causal = CLATTN_CAUSAL_TOP_LEFT;
    fx.mdm.key_lengths = fx.kl;
    fx.md = (clattn_mha_desc)CLATTN_MHA_DESC_INIT;
    fx.md.batch = B;
    fx.md.q_len = L;
    fx.md.model_dim = DM;
    fx.md.heads = H;
    fx.md.qk_dim = D;
    fx.md.out_dim = OD;
    fx.md.masks = &fx.mdm;
    if (sc == SC_MHA_WEIGHTS || sc == SC_MHA_FUSED) {
        fx.kl[0] = L; /* self-attention: L keys */
        fx.kl[1] = L / 2;
        clattn_mha_host_weights w = CLATTN_MHA_HOST_WEIGHTS_INIT;
        w.w_q = fx.wq;
        w.b_q = fx.bq;
        w.w_k = fx.wk;
        w.w_v = fx.wv;
        w.w_o = fx.wo;
        w.b_o = fx.bo;
        ref_mha(&fx.md, fx.x, NULL, &w, NULL, fx.ref_out, fx.ref_w);
    } else {
        ref_sdpa(&fx.d, fx.q, fx.k, fx.v, fx.mask, fx.ref_out, fx.ref_w, fx.ref_lse);
    }
}

/* One call of the scenario; outputs are sentinel-filled host arrays (with guards). For the cl_mem
 * scenario the outputs are read back only after a successful call. */
static clattn_status run_scenario(clattn_context *ctx, scenario sc, float *out, float *w, float *lse)
{
    clattn_mha_host_weights hw = CLATTN_MHA_HOST_WEIGHTS_INIT;
    hw.w_q = fx.wq;
    hw.b_q = fx.bq;
    hw.w_k = fx.wk;
    hw.w_v = fx.wv;
    hw.w_o = fx.wo;
    hw.b_o = fx.bo;
    switch (sc) {
    case SC_SDPA_FUSED:
        return clattn_sdpa_host(ctx, &fx.d, fx.q, fx.k, fx.v, fx.mask, out, NULL, lse);
    case SC_SDPA_STAGED_WEIGHTS:
        return clattn_sdpa_host(ctx, &fx.d, fx.q, fx.k, fx.v, fx.mask, out, w, lse);
    case SC_SDPA_MEM_STAGED: {
        cl_int err;
        cl_context cl = clattn_context_cl_context(ctx);
        cl_mem m[5] = {
            clCreateBuffer(cl, CL_MEM_COPY_HOST_PTR, sizeof fx.q, fx.q, &err),
            clCreateBuffer(cl, CL_MEM_COPY_HOST_PTR, sizeof fx.k, fx.k, &err),
            clCreateBuffer(cl, CL_MEM_COPY_HOST_PTR, sizeof fx.v, fx.v, &err),
            clCreateBuffer(cl, CL_MEM_COPY_HOST_PTR, sizeof fx.mask, fx.mask, &err),
            clCreateBuffer(cl, CL_MEM_READ_WRITE, B * H * L * D * sizeof(float), NULL, &err),
        };
        clattn_status st = clattn_sdpa(ctx, &fx.d, m[0], m[1], m[2], m[3], m[4], NULL, NULL);
        if (st == CLATTN_SUCCESS)
            st = clattn_finish(ctx);
        if (st == CLATTN_SUCCESS)
            st = (clattn_status)clEnqueueReadBuffer(clattn_context_queue(ctx), m[4], CL_TRUE, 0,
                                                    B * H * L * D * sizeof(float), out, 0, NULL, NULL);
        for (int i = 0; i < 5; i++)
            clReleaseMemObject(m[i]);
        return st;
    }
    case SC_MHA_WEIGHTS:
        return clattn_mha_host(ctx, &fx.md, fx.x, NULL, &hw, NULL, out, w);
    case SC_MHA_FUSED:
    default:
        return clattn_mha_host(ctx, &fx.md, fx.x, NULL, &hw, NULL, out, NULL);
    }
}

static size_t out_count(scenario sc) { return sc >= SC_MHA_WEIGHTS ? (size_t)B * L * OD : (size_t)B * H * L * D; }
/* The layer is self-attention: its weights are (B,H,L,L). */
static size_t weight_count(scenario sc) { return sc >= SC_MHA_WEIGHTS ? (size_t)B * H * L * L : (size_t)B * H * L * S; }

static void check_success(clattn_context *ctx, scenario sc, const char *when)
{
    float *out = tu_host_alloc(out_count(sc), NULL), *w = tu_host_alloc(weight_count(sc), NULL),
          *lse = tu_host_alloc(B * H * L, NULL);
    clattn_status st = run_scenario(ctx, sc, out, w, lse);
    TU_ASSERT_OK(st, ctx, when);
    check_close_named("out", out, fx.ref_out, out_count(sc), NULL);
    if (sc == SC_SDPA_STAGED_WEIGHTS || sc == SC_MHA_WEIGHTS)
        check_close_named("weights", w, fx.ref_w, weight_count(sc), NULL);
    if (sc == SC_SDPA_FUSED || sc == SC_SDPA_STAGED_WEIGHTS)
        check_close_named("lse", lse, fx.ref_lse, B * H * L, NULL);
}

START_TEST(test_fault_walk)
{
    const scenario sc = (scenario)TU_CASE(_i);
    const size_t dev = TU_DEVICE(_i);
    clattn_context *ctx = tu_ctx[dev];
    fixture_prepare(sc);
    tu_set_label("%s on %s", scenario_names[sc], tu_dev_spec[dev]);

    /* Unarmed: builds the kernels and counts this call's failure points. */
    clattn__fault_arm(0);
    check_success(ctx, sc, "unarmed");
    const unsigned long points = clattn__fault_points();
    ck_assert_msg(points > 0, "%s: no failure points were passed", tu_label());

    for (unsigned long n = 1; n <= points; n++) {
        tu_set_label("%s, failure at point %lu of %lu, on %s", scenario_names[sc], n, points, tu_dev_spec[dev]);
        float *out = tu_host_alloc(out_count(sc), NULL), *w = tu_host_alloc(weight_count(sc), NULL),
              *lse = tu_host_alloc(B * H * L, NULL);
        clattn__fault_arm(n);
        clattn_status st = run_scenario(ctx, sc, out, w, lse);
        clattn__fault_arm(0);
        const bool has_detail = clattn_last_error(ctx)[0] != '\0';
        clattn_finish(ctx); /* nothing of the failed call may still run */
        if (st != CLATTN_SUCCESS) {
            ck_assert_msg(has_detail, "%s: %s without a detail", tu_label(), clattn_status_string(st));
            if (sc != SC_SDPA_MEM_STAGED) { /* host variants write nothing on failure */
                ck_assert_msg(tu_host_all_sentinel(out, out_count(sc)), "%s: out written by a failed call", tu_label());
                ck_assert_msg(tu_host_all_sentinel(w, weight_count(sc)), "%s: weights written by a failed call",
                              tu_label());
                ck_assert_msg(tu_host_all_sentinel(lse, B * H * L), "%s: lse written by a failed call", tu_label());
            }
        } else {
            /* recovered (the fused kernel fell back to the staged path): the answer must be right */
            check_close_named("out (recovered)", out, fx.ref_out, out_count(sc), NULL);
        }
        check_success(ctx, sc, "the call after a failure");
        points_walked++;
    }
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("faults");
    TCase *tc = tu_tcase("walk");
    tcase_add_loop_test(tc, test_fault_walk, 0, (int)(SC_COUNT * tu_ndev));
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    int rc = tu_main(make_suite);
    printf("failure points walked: %zu\n", points_walked);
    return rc;
}
