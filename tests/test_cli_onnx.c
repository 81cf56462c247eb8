/* End-to-end tests of the clattn tool for what ONNX's Attention operator says and the tool used to refuse:
 *
 *  - --mask narrower than the keys (ONNX pads attn_mask with −inf / False): `clattn sdpa` with a float
 *    (B,H,L,C) mask, a boolean (L,C) one and a (B,1,L,C) one under --causal; with a past (the keys are
 *    past + new, the mask narrower than both together; causal at --offset P, as ONNX aligns it); `clattn
 *    mha` with an (L,C) mask. Outputs and weights against the fp64 reference given the mask padded with
 *    −inf by this test; a mask wider than the keys is a usage error that says so.
 *  - --softmax-double (ONNX's softmax_precision = DOUBLE), for sdpa, sdpa with a past and mha: on a
 *    default device, with cl_khr_fp64 or without it (the float-float build), the weights and lse are the
 *    fp64 softmax of the float32 scores the tool's --scores masked:FILE gives, rounded once (within half
 *    a unit in the last place: the float32 softmax is many units off on these rows), the output the
 *    reference P·V over those weights.
 *
 * Like the other cli tests, this process only spawns the tool (CLATTN_EXE) and never calls OpenCL; what
 * they share is in cli_util.h. */
#include "cli_util.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* (mats, L, C) padded to (mats, L, S) with −inf: ONNX's reading of a narrower mask. */
static float *pad_mask(const float *m, size_t mats, size_t L, size_t C, size_t S)
{
    float *out = tu_falloc(mats * L * S);
    for (size_t r = 0; r < mats * L; r++)
        for (size_t j = 0; j < S; j++)
            out[r * S + j] = j < C ? m[r * C + j] : -INFINITY;
    return out;
}

/* ---------------------------------------------------------------------------------------------- */
/* --mask narrower than the keys                                                                   */
/* ---------------------------------------------------------------------------------------------- */

/* The three masks of sdpa's narrower-mask case: float (B,H,L,C) with −inf entries, boolean (L,C), and
 * float (B,1,L,C) under --causal. */
enum { MASK_BHLC, MASK_BOOL_LC, MASK_B1LC_CAUSAL, N_MASK_KINDS };

START_TEST(test_sdpa_narrow_mask)
{
    enum { B = 2, H = 3, L = 4, S = 7, C = 5, D = 8 };
    rng.state = 7100 + (uint64_t)_i;
    const float *q = rand_floats(B * H * L * D, 1.0f), *k = rand_floats(B * H * S * D, 1.0f);
    const float *v = rand_floats(B * H * S * D, 1.0f);
    const size_t qs[4] = {B, H, L, D}, ks[4] = {B, H, S, D};
    argl a = {{0}, 0};
    add(&a, "sdpa", "--q", save_f32("q.npy", q, 4, qs), "--k", save_f32("k.npy", k, 4, ks), "--v",
        save_f32("v.npy", v, 4, ks), "--out", P("o.npy"), "--weights", P("w.npy"), "--lse", P("l.npy"), NULL);
    clattn_masks m = CLATTN_MASKS_INIT;
    const size_t mats = _i == MASK_BHLC ? B * H : _i == MASK_BOOL_LC ? 1 : B;
    float *mask = rand_floats(mats * L * C, 1.0f);
    if (_i == MASK_BOOL_LC) {
        unsigned char bits[L * C];
        for (size_t e = 0; e < L * C; e++) {
            bits[e] = (e % 3) != 1; /* False (masked) on a third of the entries */
            mask[e] = bits[e] ? 0.0f : -INFINITY;
        }
        add(&a, "--mask", save_raw("m.npy", 1, "|b1", "False", shape_text(2, (size_t[]){L, C}), bits, sizeof bits),
            NULL);
    } else {
        mask[3] = mask[C + 4] = -INFINITY;
        const size_t shape[4] = {B, _i == MASK_BHLC ? H : 1, L, C};
        add(&a, "--mask", save_f32("m.npy", mask, 4, shape), NULL);
    }
    if (_i == MASK_B1LC_CAUSAL) {
        m.causal = CLATTN_CAUSAL_TOP_LEFT;
        add(&a, "--causal", NULL);
        mask = broadcast_mask(mask, 4, (size_t[]){B, 1, L, C}, B, H, L, C); /* (B,H,L,C) for the reference */
    }
    m.additive = _i == MASK_BOOL_LC ? CLATTN_MASK_L_S : CLATTN_MASK_B_H_L_S;
    const float *padded = pad_mask(mask, _i == MASK_BOOL_LC ? 1 : B * H, L, C, S);
    const clattn_sdpa_desc d = sdpa_desc(B, H, 0, L, S, D, 0, &m);
    double *ro = tu_dalloc(B * H * L * D), *rw = tu_dalloc(B * H * L * S), *rl = tu_dalloc(B * H * L);
    ref_sdpa(&d, q, k, v, padded, ro, rw, rl);
    run_expect(&a, EXIT_OK);
    expect_file_close("out", P("o.npy"), 4, qs, ro);
    expect_file_close("weights", P("w.npy"), 4, (size_t[]){B, H, L, S}, rw);
    expect_file_close("lse", P("l.npy"), 3, qs, rl);
}
END_TEST

/* With a past: the keys are P past + S new, the mask narrower than the P + S; causal from query
 * position P + i (--offset P), as ONNX aligns it after a past. */
START_TEST(test_sdpa_narrow_mask_past)
{
    enum { B = 2, H = 2, L = 3, S = 3, PAST = 5, T = PAST + S, C = 6, D = 4 };
    rng.state = 7200;
    const float *q = rand_floats(B * H * L * D, 1.0f), *k = rand_floats(B * H * S * D, 1.0f);
    const float *v = rand_floats(B * H * S * D, 1.0f), *pk = rand_floats(B * H * PAST * D, 1.0f);
    const float *pv = rand_floats(B * H * PAST * D, 1.0f);
    float *mask = rand_floats(B * L * C, 1.0f);
    mask[2] = -INFINITY;
    const size_t qs[4] = {B, H, L, D}, ks[4] = {B, H, S, D}, ps[4] = {B, H, PAST, D}, ms[4] = {B, 1, L, C};
    argl a = {{0}, 0};
    add(&a, "sdpa", "--q", save_f32("q.npy", q, 4, qs), "--k", save_f32("k.npy", k, 4, ks), "--v",
        save_f32("v.npy", v, 4, ks), "--past-k", save_f32("pk.npy", pk, 4, ps), "--past-v",
        save_f32("pv.npy", pv, 4, ps), "--mask", save_f32("m.npy", mask, 4, ms), "--causal", "--offset", "5",
        "--out", P("o.npy"), "--weights", P("w.npy"), "--present-k", P("prk.npy"), NULL);
    const float *wide = broadcast_mask(mask, 4, ms, B, H, L, C);
    const float *kk = concat_rows(pk, PAST, k, S, B * H, D), *vv = concat_rows(pv, PAST, v, S, B * H, D);
    static const long long offsets[B] = {PAST, PAST};
    const clattn_masks m = flag_masks(CLATTN_CAUSAL_TOP_LEFT, NULL, offsets, NULL, true);
    const clattn_sdpa_desc d = sdpa_desc(B, H, 0, L, T, D, 0, &m);
    double *ro = tu_dalloc(B * H * L * D), *rw = tu_dalloc(B * H * L * T);
    ref_sdpa(&d, q, kk, vv, pad_mask(wide, B * H, L, C, T), ro, rw, NULL);
    run_expect(&a, EXIT_OK);
    expect_file_close("out", P("o.npy"), 4, qs, ro);
    expect_file_close("weights", P("w.npy"), 4, (size_t[]){B, H, L, T}, rw);
    ck_assert_msg(memcmp(load_f32(P("prk.npy"), 4, (size_t[]){B, H, T, D}), kk, B * H * T * D * sizeof *kk) == 0,
                  "`%s`: present_k is not concat(past_k, k)", R.cmd);
}
END_TEST

/* A layer's (L, C) mask over its S = L keys (self-attention). */
START_TEST(test_mha_narrow_mask)
{
    enum { B = 2, L = 5, C = 3, DM = 6, H = 2, DK = 3 };
    rng.state = 7300;
    const float *x = rand_floats(B * L * DM, 1.0f), *wq = rand_floats(DM * H * DK, 1.0f);
    const float *wk = rand_floats(DM * H * DK, 1.0f), *wv = rand_floats(DM * H * DK, 1.0f);
    float *mask = rand_floats(L * C, 1.0f);
    mask[4] = -INFINITY;
    const size_t xs[3] = {B, L, DM}, ws[2] = {DM, H * DK}, ms[2] = {L, C};
    argl a = {{0}, 0};
    add(&a, "mha", "--x", save_f32("x.npy", x, 3, xs), "--wq", save_f32("wq.npy", wq, 2, ws), "--wk",
        save_f32("wk.npy", wk, 2, ws), "--wv", save_f32("wv.npy", wv, 2, ws), "--heads", "2", "--mask",
        save_f32("m.npy", mask, 2, ms), "--out", P("o.npy"), "--weights", P("w.npy"), NULL);
    clattn_masks m = CLATTN_MASKS_INIT;
    m.additive = CLATTN_MASK_L_S;
    clattn_mha_desc d = CLATTN_MHA_DESC_INIT;
    d.batch = B;
    d.q_len = L;
    d.model_dim = DM;
    d.heads = H;
    d.qk_dim = DK;
    d.masks = &m;
    clattn_mha_host_weights w = CLATTN_MHA_HOST_WEIGHTS_INIT;
    w.w_q = wq;
    w.w_k = wk;
    w.w_v = wv;
    double *ro = tu_dalloc(B * L * H * DK), *rw = tu_dalloc(B * H * L * L);
    ref_mha(&d, x, NULL, &w, pad_mask(mask, 1, L, C, L), ro, rw);
    run_expect(&a, EXIT_OK);
    expect_file_close("out", P("o.npy"), 3, (size_t[]){B, L, H * DK}, ro);
    expect_file_close("weights", P("w.npy"), 4, (size_t[]){B, H, L, L}, rw);
}
END_TEST

/* Wider than the keys: a usage error that says so. */
START_TEST(test_mask_wider)
{
    enum { L = 3, S = 4, D = 2 };
    rng.state = 7400;
    const size_t qs[2] = {L, D}, ks[2] = {S, D}, ms[2] = {L, S + 2};
    argl a = {{0}, 0};
    add(&a, "sdpa", "--q", save_f32("q.npy", rand_floats(L * D, 1.0f), 2, qs), "--k",
        save_f32("k.npy", rand_floats(S * D, 1.0f), 2, ks), "--v", P("k.npy"), "--mask",
        save_f32("m.npy", rand_floats(L * (S + 2), 1.0f), 2, ms), "--out", P("o.npy"), NULL);
    run_expect(&a, EXIT_USAGE);
    expect_in("stderr", R.err, "dimension 3 is 6, more than the S keys");
    ck_assert_msg(!exists(P("o.npy")), "`%s`: wrote o.npy", R.cmd);
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* --softmax-double                                                                                */
/* ---------------------------------------------------------------------------------------------- */

/* Within half a float32 unit in the last place of ref (plus a hair, and FLT_MIN for flushed subnormal
 * weights); infinities must match. */
static void expect_rounded_once(const char *what, const float *got, const double *ref, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (isinf(ref[i]) || isinf(got[i])) {
            ck_assert_msg((double)got[i] == ref[i], "`%s`: %s[%zu] = %g, reference %g", R.cmd, what, i, (double)got[i],
                          ref[i]);
            continue;
        }
        const float f = fabsf((float)ref[i]);
        const double half_ulp = 0.5 * ((double)nextafterf(f, INFINITY) - (double)f);
        const double err = fabs((double)got[i] - ref[i]);
        ck_assert_msg(err <= half_ulp * (1.0 + 1e-9) + 1e-12 * fabs(ref[i]) + FLT_MIN,
                      "`%s`: %s[%zu] = %.9g, reference %.17g: %.3g units in the last place off (at most 0.5)", R.cmd,
                      what, i, (double)got[i], ref[i], err / (2.0 * half_ulp));
    }
}

/* The three commands of the double-softmax case: sdpa, sdpa with a past, mha. */
enum { DOUBLE_SDPA, DOUBLE_PAST, DOUBLE_MHA, N_DOUBLE };

START_TEST(test_softmax_double)
{
    enum { B = 2, H = 2, L = 5, S = 37, PAST = 4, D = 16, DM = 12 };
    rng.state = 7500 + (uint64_t)_i;
    const size_t keys = _i == DOUBLE_PAST ? PAST + S : _i == DOUBLE_MHA ? L : S, nw = (size_t)B * H * L * keys;
    argl a = {{0}, 0};
    const float *v = NULL;
    if (_i == DOUBLE_MHA) {
        const size_t xs[3] = {B, L, DM}, ws[2] = {DM, H * D};
        add(&a, "mha", "--x", save_f32("x.npy", rand_floats(B * L * DM, 1.5f), 3, xs), "--wq",
            save_f32("wq.npy", rand_floats(DM * H * D, 1.0f), 2, ws), "--wk",
            save_f32("wk.npy", rand_floats(DM * H * D, 1.0f), 2, ws), "--wv",
            save_f32("wv.npy", rand_floats(DM * H * D, 1.0f), 2, ws), "--heads", "2", "--scale", "1", NULL);
    } else {
        const size_t qs[4] = {B, H, L, D}, ks[4] = {B, H, S, D}, ps[4] = {B, H, PAST, D};
        const float *k = rand_floats(B * H * S * D, 2.0f);
        v = rand_floats(B * H * S * D, 1.0f);
        add(&a, "sdpa", "--q", save_f32("q.npy", rand_floats(B * H * L * D, 2.0f), 4, qs), "--k",
            save_f32("k.npy", k, 4, ks), "--v", save_f32("v.npy", v, 4, ks), "--scale", "1", "--causal-bottom-right",
            NULL);
        if (_i == DOUBLE_PAST) {
            const float *pv = rand_floats(B * H * PAST * D, 1.0f);
            add(&a, "--past-k", save_f32("pk.npy", rand_floats(B * H * PAST * D, 2.0f), 4, ps), "--past-v",
                save_f32("pv.npy", pv, 4, ps), NULL);
            v = concat_rows(pv, PAST, v, S, B * H, D);
        }
    }
    argl scores = a, dbl = a;
    add(&dbl, "--softmax-double", "--out", P("o.npy"), "--weights", P("w.npy"), NULL);
    if (_i != DOUBLE_MHA)
        add(&dbl, "--lse", P("l.npy"), NULL);
    /* The float32 scores the softmax takes, from the same score kernel. */
    add(&scores, "--out", P("o_scores.npy"), "--scores", fmt("masked:%s", P("s.npy")), NULL);
    run_expect(&scores, EXIT_OK);
    const float *s = load_f32(P("s.npy"), 4, (size_t[]){B, H, L, keys});
    double *rw = tu_dalloc(nw), *rl = tu_dalloc(nw / keys);
    ref_softmax(nw / keys, keys, s, rw, rl);
    run_expect(&dbl, EXIT_OK);
    const float *w = load_f32(P("w.npy"), 4, (size_t[]){B, H, L, keys});
    expect_rounded_once("weights", w, rw, nw);
    if (_i == DOUBLE_MHA)
        return; /* (its output is P·V through projections: the layer tests' business) */
    expect_rounded_once("lse", load_f32(P("l.npy"), 3, (size_t[]){B, H, L}), rl, nw / keys);
    const clattn_sdpa_desc d = sdpa_desc(B, H, 0, L, keys, D, 0, NULL);
    double *ro = tu_dalloc(B * H * L * D);
    ref_weighted_sum(&d, w, v, ro);
    expect_file_close("out", P("o.npy"), 4, (size_t[]){B, H, L, D}, ro);
}
END_TEST

static Suite *onnx_suite(void)
{
    const cli_group groups[] = {
        {"sdpa_narrow_mask", N_MASK_KINDS, {test_sdpa_narrow_mask}},
        {"sdpa_narrow_mask_past", 1, {test_sdpa_narrow_mask_past}},
        {"mha_narrow_mask", 1, {test_mha_narrow_mask}},
        {"mask_wider", 1, {test_mask_wider}},
        {"softmax_double", N_DOUBLE, {test_softmax_double}},
    };
    return cli_suite("cli_onnx", groups, sizeof groups / sizeof groups[0]);
}

int main(void) { return cli_main("test_cli_onnx", onnx_suite, 240); }
