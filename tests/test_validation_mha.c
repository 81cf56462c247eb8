/*
 * Argument validation of clattn_mha and clattn_mha_host: every bad-case table (null arguments and
 * weights, zero and overflowing sizes, buffers one float too small, mismatched dimensions, bad masks
 * and scales, tensors beyond the device limit) and the positive control with exactly-sized buffers.
 * See validation_util.h.
 */
#include "validation_util.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

enum mha_mut {
    H_CTX_NULL,
    H_DESC_NULL,
    H_X_NULL,
    H_WEIGHTS_NULL,
    H_WQ_NULL,
    H_WK_NULL,
    H_WV_NULL,
    H_OUT_NULL,
    H_MASK_NULL,
    H_BO_WITHOUT_WO,
    H_B0,
    H_L0,
    H_DM0,
    H_H0,
    H_DQK0,
    H_S0_CROSS,
    H_OVF_B,
    H_OVF_H,
    H_X_SMALL,
    H_KV_SMALL,
    H_WQ_SMALL,
    H_BQ_SMALL,
    H_WK_SMALL,
    H_BK_SMALL,
    H_WV_SMALL,
    H_BV_SMALL,
    H_WO_SMALL,
    H_BO_SMALL,
    H_OUT_SMALL,
    H_AW_SMALL,
    H_MASK_SMALL,
    H_OUTDIM_MISMATCH,
    H_VDIM_MISMATCH,
    H_SELF_KVLEN,
    H_KEYLEN_GT_S,
    H_MASK_NO_LAYOUT,
    H_CAUSAL_7,
    H_SCALE_INF,
    H_SCALE_NINF,
    H_EXCEEDS,
};

static const bad_case mha_bad[] = {
    {H_CTX_NULL, NA, 0, "ctx NULL"},
    {H_DESC_NULL, NA, 0, "desc NULL"},
    {H_X_NULL, NA, 0, "x NULL"},
    {H_WEIGHTS_NULL, NA, 0, "weights struct NULL"},
    {H_WQ_NULL, NA, 0, "w_q NULL"},
    {H_WK_NULL, NA, 0, "w_k NULL"},
    {H_WV_NULL, NA, 0, "w_v NULL"},
    {H_OUT_NULL, NA, 0, "out NULL"},
    {H_MASK_NULL, NA, 0, "additive (L,S) but mask NULL"},
    {H_BO_WITHOUT_WO, ANY_ERROR, 0, "b_o given without w_o"},
    {H_B0, ZS, 0, "batch 0"},
    {H_L0, ZS, 0, "q_len 0"},
    {H_DM0, ZS, 0, "model_dim 0"},
    {H_H0, ZS, 0, "heads 0"},
    {H_DQK0, ZS, 0, "qk_dim 0"},
    {H_S0_CROSS, ZS, 0, "kv_len 0 with a kv input"},
    {H_OVF_B, OV, 0, "batch SIZE_MAX/2 overflows"},
    {H_OVF_H, OV, 0, "heads SIZE_MAX/2 × qk_dim 4 overflows"},
    {H_X_SMALL, TS, 0, "x one float too small"},
    {H_KV_SMALL, TS, 0, "kv one float too small"},
    {H_WQ_SMALL, TS, 0, "w_q one float too small"},
    {H_BQ_SMALL, TS, 0, "b_q one float too small"},
    {H_WK_SMALL, TS, 0, "w_k one float too small"},
    {H_BK_SMALL, TS, 0, "b_k one float too small"},
    {H_WV_SMALL, TS, 0, "w_v one float too small"},
    {H_BV_SMALL, TS, 0, "b_v one float too small"},
    {H_WO_SMALL, TS, 0, "w_o one float too small"},
    {H_BO_SMALL, TS, 0, "b_o one float too small"},
    {H_OUT_SMALL, TS, 0, "out one float too small"},
    {H_AW_SMALL, TS, 0, "attn_weights one float too small"},
    {H_MASK_SMALL, TS, 0, "(L,S) mask one float too small"},
    {H_OUTDIM_MISMATCH, TS, 0, "out_dim larger than w_o/b_o/out hold"},
    {H_VDIM_MISMATCH, TS, 0, "v_dim larger than w_v/b_v/w_o hold"},
    {H_SELF_KVLEN, SM, 0, "self-attention (kv NULL) with kv_len != q_len"},
    {H_KEYLEN_GT_S, IM, 0, "key length S+1"},
    {H_MASK_NO_LAYOUT, IM, 0, "mask given with layout NONE"},
    {H_CAUSAL_7, IV, 0, "causal = 7"},
    {H_SCALE_INF, IV, 0, "scale +inf"},
    {H_SCALE_NINF, IV, 0, "scale -inf"},
};
#define N_MHA_BAD (sizeof mha_bad / sizeof mha_bad[0])

static const bad_case mha_host_bad[] = {
    {H_CTX_NULL, NA, 0, "ctx NULL"},
    {H_DESC_NULL, NA, 0, "desc NULL"},
    {H_X_NULL, NA, 0, "x NULL"},
    {H_WEIGHTS_NULL, NA, 0, "weights struct NULL"},
    {H_WQ_NULL, NA, 0, "w_q NULL"},
    {H_WK_NULL, NA, 0, "w_k NULL"},
    {H_WV_NULL, NA, 0, "w_v NULL"},
    {H_OUT_NULL, NA, 0, "out NULL"},
    {H_MASK_NULL, NA, 0, "additive (L,S) but mask NULL"},
    {H_BO_WITHOUT_WO, ANY_ERROR, 0, "b_o given without w_o"},
    {H_B0, ZS, 0, "batch 0"},
    {H_L0, ZS, 0, "q_len 0"},
    {H_DM0, ZS, 0, "model_dim 0"},
    {H_H0, ZS, 0, "heads 0"},
    {H_DQK0, ZS, 0, "qk_dim 0"},
    {H_S0_CROSS, ZS, 0, "kv_len 0 with a kv input"},
    {H_OVF_B, OV, 0, "batch SIZE_MAX/2 overflows"},
    {H_OVF_H, OV, 0, "heads SIZE_MAX/2 × qk_dim 4 overflows"},
    {H_SELF_KVLEN, SM, 0, "self-attention (kv NULL) with kv_len != q_len"},
    {H_KEYLEN_GT_S, IM, 0, "key length S+1"},
    {H_MASK_NO_LAYOUT, IM, 0, "mask given with layout NONE"},
    {H_CAUSAL_7, IV, 0, "causal = 7"},
    {H_SCALE_INF, IV, 0, "scale +inf"},
    {H_SCALE_NINF, IV, 0, "scale -inf"},
    {H_EXCEEDS, XL, 0, "B=H=64, L=2^20 self-attention with weights: larger than the device limit"},
};
#define N_MHA_HOST_BAD (sizeof mha_host_bad / sizeof mha_host_bad[0])

/* The good layer: cross-attention B 2, L 3, S 5, model_dim 4, kv_dim 6, H 2, Dqk 3, Dv 2,
 * out_dim 7, every bias, W_O and b_O, key lengths {5, 2}, additive (L,S) mask, weights output. */
enum { MB = 2, ML = 3, MS = 5, MDM = 4, MDKV = 6, MH = 2, MDQK = 3, MDV = 2, MOD = 7 };
enum {
    T_X, T_KV, T_WQ, T_BQ, T_WK, T_BK, T_WV, T_BV, T_WO, T_BO, T_MASK, T_OUT, T_AW, T_COUNT
};
static const size_t mha_n[T_COUNT] = {
    MB * ML * MDM,      MB * MS * MDKV,    MDM * MH * MDQK, MH * MDQK, MDKV * MH * MDQK,
    MH * MDQK,          MDKV * MH * MDV,   MH * MDV,        MH * MDV * MOD, MOD,
    ML * MS,            MB * ML * MOD,     MB * MH * ML * MS,
};

typedef struct {
    clattn_mha_desc d;
    clattn_masks masks; /* d.masks points here */
    size_t kl[MB];
    float *h[T_COUNT];  /* host data (inputs) or sentinel outputs (host API) */
    cl_mem m[T_COUNT];  /* device buffers (cl_mem API) */
    clattn_mha_weights mw;
    clattn_mha_host_weights hw;
} mha_fx;

static void mha_fx_init(mha_fx *f, clattn_context *ctx, int host)
{
    memset(f, 0, sizeof *f);
    f->d = (clattn_mha_desc)CLATTN_MHA_DESC_INIT;
    f->masks = (clattn_masks)CLATTN_MASKS_INIT;
    f->mw = (clattn_mha_weights)CLATTN_MHA_WEIGHTS_INIT;
    f->hw = (clattn_mha_host_weights)CLATTN_MHA_HOST_WEIGHTS_INIT;
    f->d.batch = MB;
    f->d.q_len = ML;
    f->d.kv_len = MS;
    f->d.model_dim = MDM;
    f->d.kv_dim = MDKV;
    f->d.heads = MH;
    f->d.qk_dim = MDQK;
    f->d.v_dim = MDV;
    f->d.out_dim = MOD;
    f->kl[0] = 5;
    f->kl[1] = 2;
    f->masks.key_lengths = f->kl;
    f->masks.additive = CLATTN_MASK_L_S;
    f->d.masks = &f->masks;
    for (int t = 0; t < T_COUNT; t++) {
        if (t == T_OUT || t == T_AW) {
            f->h[t] = tu_host_alloc(mha_n[t], NULL);
        } else {
            f->h[t] = tu_host_alloc(mha_n[t], NULL);
            tu_fill_uniform(f->h[t], mha_n[t], 0.5f, 100 + (uint64_t)t);
        }
        if (!host)
            f->m[t] = tu_dev_alloc_exact(ctx, mha_n[t], t == T_OUT || t == T_AW ? NULL : f->h[t]);
    }
}

static void mha_fx_weights(mha_fx *f)
{
    f->mw.w_q = f->m[T_WQ];
    f->mw.b_q = f->m[T_BQ];
    f->mw.w_k = f->m[T_WK];
    f->mw.b_k = f->m[T_BK];
    f->mw.w_v = f->m[T_WV];
    f->mw.b_v = f->m[T_BV];
    f->mw.w_o = f->m[T_WO];
    f->mw.b_o = f->m[T_BO];
    f->hw.w_q = f->h[T_WQ];
    f->hw.b_q = f->h[T_BQ];
    f->hw.w_k = f->h[T_WK];
    f->hw.b_k = f->h[T_BK];
    f->hw.w_v = f->h[T_WV];
    f->hw.b_v = f->h[T_BV];
    f->hw.w_o = f->h[T_WO];
    f->hw.b_o = f->h[T_BO];
}

static void run_mha_bad(int host, const bad_case *bc, size_t dev)
{
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("%s: %s on %s", host ? "clattn_mha_host" : "clattn_mha", bc->name,
                 tu_dev_spec[dev]);
    mha_fx f;
    mha_fx_init(&f, ctx, host);
    clattn_context *call_ctx = ctx;
    const clattn_mha_desc *dp = &f.d;
    int weights_null = 0;
    int small = -1; /* tensor given a buffer one float too small */
    int out_small = 0;
    float *dummy = NULL;

    switch (bc->mut) {
    case H_B0: case H_L0: case H_DM0: case H_H0: case H_DQK0: case H_S0_CROSS:
    case H_OVF_B: case H_OVF_H: case H_SELF_KVLEN: case H_EXCEEDS:
    case H_OUTDIM_MISMATCH: case H_VDIM_MISMATCH:
        f.masks.key_lengths = NULL;
        f.masks.additive = CLATTN_MASK_NONE;
        f.h[T_MASK] = NULL;
        f.m[T_MASK] = NULL;
        break;
    default:
        break;
    }

    switch (bc->mut) {
    case H_CTX_NULL: call_ctx = NULL; break;
    case H_DESC_NULL: dp = NULL; break;
    case H_X_NULL: f.h[T_X] = NULL; f.m[T_X] = NULL; break;
    case H_WEIGHTS_NULL: weights_null = 1; break;
    case H_WQ_NULL: f.h[T_WQ] = NULL; f.m[T_WQ] = NULL; break;
    case H_WK_NULL: f.h[T_WK] = NULL; f.m[T_WK] = NULL; break;
    case H_WV_NULL: f.h[T_WV] = NULL; f.m[T_WV] = NULL; break;
    case H_OUT_NULL: f.h[T_OUT] = NULL; f.m[T_OUT] = NULL; break;
    case H_MASK_NULL: f.h[T_MASK] = NULL; f.m[T_MASK] = NULL; break;
    case H_BO_WITHOUT_WO: f.h[T_WO] = NULL; f.m[T_WO] = NULL; break;
    case H_B0: f.d.batch = 0; break;
    case H_L0: f.d.q_len = 0; break;
    case H_DM0: f.d.model_dim = 0; break;
    case H_H0: f.d.heads = 0; break;
    case H_DQK0: f.d.qk_dim = 0; break;
    case H_S0_CROSS: f.d.kv_len = 0; break;
    case H_OVF_B: f.d.batch = HALF_MAX; break;
    case H_OVF_H: f.d.heads = HALF_MAX; f.d.qk_dim = 4; break;
    case H_X_SMALL: small = T_X; break;
    case H_KV_SMALL: small = T_KV; break;
    case H_WQ_SMALL: small = T_WQ; break;
    case H_BQ_SMALL: small = T_BQ; break;
    case H_WK_SMALL: small = T_WK; break;
    case H_BK_SMALL: small = T_BK; break;
    case H_WV_SMALL: small = T_WV; break;
    case H_BV_SMALL: small = T_BV; break;
    case H_WO_SMALL: small = T_WO; break;
    case H_BO_SMALL: small = T_BO; break;
    case H_OUT_SMALL: small = T_OUT; out_small = 1; break;
    case H_AW_SMALL: small = T_AW; out_small = 1; break;
    case H_MASK_SMALL: small = T_MASK; break;
    case H_OUTDIM_MISMATCH: f.d.out_dim = MOD + 1; break;
    case H_VDIM_MISMATCH: f.d.v_dim = MDV + 1; break;
    case H_SELF_KVLEN:
        f.h[T_KV] = NULL;
        f.m[T_KV] = NULL;
        f.d.kv_dim = 0;
        f.d.kv_len = ML + 2;
        break;
    case H_KEYLEN_GT_S: f.kl[1] = MS + 1; break;
    case H_MASK_NO_LAYOUT: f.masks.additive = CLATTN_MASK_NONE; break;
    case H_CAUSAL_7: f.masks.causal = (clattn_causal)7; break;
    case H_SCALE_INF: f.d.scale = INFINITY; break;
    case H_SCALE_NINF: f.d.scale = -INFINITY; break;
    case H_EXCEEDS:
        /* self-attention B 64, L 2^20, H 64, d 1: (B,H,L,L) weights are 2^54 bytes */
        f.d.batch = 64;
        f.d.q_len = (size_t)1 << 20;
        f.d.kv_len = 0;
        f.d.model_dim = 1;
        f.d.kv_dim = 0;
        f.d.heads = 64;
        f.d.qk_dim = 1;
        f.d.v_dim = 0;
        f.d.out_dim = 0;
        dummy = tu_host_alloc(64, NULL);
        f.h[T_X] = dummy;
        f.h[T_KV] = NULL;
        for (int t = T_WQ; t <= T_BO; t++)
            f.h[t] = dummy;
        break;
    default:
        ck_abort_msg("unknown mutation %d", bc->mut);
    }
    cl_mem orig = small >= 0 ? f.m[small] : NULL;
    if (small >= 0)
        f.m[small] = tu_dev_alloc_exact(ctx, mha_n[small] - 1, out_small ? NULL : f.h[small]);
    mha_fx_weights(&f);

    clattn_status st;
    if (host)
        st = clattn_mha_host(call_ctx, dp, f.h[T_X], f.h[T_KV], weights_null ? NULL : &f.hw,
                             f.h[T_MASK], f.h[T_OUT], f.h[T_AW]);
    else
        st = clattn_mha(call_ctx, dp, f.m[T_X], f.m[T_KV], weights_null ? NULL : &f.mw,
                        f.m[T_MASK], f.m[T_OUT], f.m[T_AW]);
    check_status(st, bc, call_ctx);

    if (host) {
        check_host_untouched(dummy, 64, "dummy arrays");
        check_host_untouched(f.h[T_OUT], mha_n[T_OUT], "out");
        check_host_untouched(f.h[T_AW], mha_n[T_AW], "attn_weights");
    } else {
        for (int t = T_OUT; t <= T_AW; t++) {
            if (small == t) {
                check_dev_untouched(ctx, f.m[t], mha_n[t] - 1, "(small buffer)");
                check_dev_untouched(ctx, orig, mha_n[t], "(original buffer)");
            } else {
                check_dev_untouched(ctx, f.m[t], mha_n[t], t == T_OUT ? "out" : "attn_weights");
            }
        }
    }
}

START_TEST(test_mha_bad) { run_mha_bad(0, &mha_bad[TU_CASE(_i)], TU_DEVICE(_i)); }
END_TEST

START_TEST(test_mha_host_bad) { run_mha_bad(1, &mha_host_bad[TU_CASE(_i)], TU_DEVICE(_i)); }
END_TEST

START_TEST(test_mha_good)
{
    size_t dev = (size_t)_i;
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("good clattn_mha / clattn_mha_host with exact-size buffers on %s", tu_dev_spec[dev]);
    mha_fx f, h;
    mha_fx_init(&f, ctx, 0);
    mha_fx_init(&h, ctx, 1);
    mha_fx_weights(&f);
    mha_fx_weights(&h);
    double *ry = tu_dalloc(mha_n[T_OUT]), *rw = tu_dalloc(mha_n[T_AW]);
    ref_mha(&f.d, f.h[T_X], f.h[T_KV], &f.hw, f.h[T_MASK], ry, rw);

    clattn_masks bad_masks = f.masks;
    bad_masks.causal = (clattn_causal)7;
    clattn_mha_desc bad = f.d;
    bad.masks = &bad_masks;
    ck_assert(clattn_mha(ctx, &bad, f.m[T_X], f.m[T_KV], &f.mw, f.m[T_MASK], f.m[T_OUT],
                         f.m[T_AW]) != CLATTN_SUCCESS);

    clattn_status st = clattn_mha(ctx, &f.d, f.m[T_X], f.m[T_KV], &f.mw, f.m[T_MASK], f.m[T_OUT],
                                  f.m[T_AW]);
    TU_ASSERT_OK(st, ctx, "mha");
    tu_finish(ctx);
    check_close_named("out", tu_dev_read(ctx, f.m[T_OUT], mha_n[T_OUT]), ry, mha_n[T_OUT], NULL);
    check_close_named("attn_weights", tu_dev_read(ctx, f.m[T_AW], mha_n[T_AW]), rw, mha_n[T_AW],
                      NULL);

    st = clattn_mha_host(ctx, &h.d, h.h[T_X], h.h[T_KV], &h.hw, h.h[T_MASK], h.h[T_OUT],
                         h.h[T_AW]);
    TU_ASSERT_OK(st, ctx, "mha_host");
    check_close_named("host out", h.h[T_OUT], ry, mha_n[T_OUT], NULL);
    check_close_named("host attn_weights", h.h[T_AW], rw, mha_n[T_AW], NULL);
    tu_host_check_guard(h.h[T_OUT], mha_n[T_OUT], "host out");
    tu_host_check_guard(h.h[T_AW], mha_n[T_AW], "host attn_weights");
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */

static Suite *make_suite(void)
{
    Suite *s = suite_create("validation_mha");
    tu_add_loop(s, "mha_bad", test_mha_bad, N_MHA_BAD * tu_ndev);
    tu_add_loop(s, "mha_host_bad", test_mha_host_bad, N_MHA_HOST_BAD * tu_ndev);
    tu_add_loop(s, "good_calls", test_mha_good, tu_ndev);
    return s;
}

int main(void) { return tu_main(make_suite); }
