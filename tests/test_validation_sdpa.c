/*
 * Argument validation of clattn_sdpa, clattn_sdpa_host and clattn_score: every bad-case table (null
 * arguments, zero and overflowing sizes, buffers one float too small, bad masks, scales and
 * algorithms) and the positive control with exactly-sized buffers. See validation_util.h.
 */
#include "validation_util.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------- */
/* SDPA, SDPA host, score                                                                          */
/* ---------------------------------------------------------------------------------------------- */

enum api { API_SDPA = 0, API_SDPA_HOST, API_SCORE };
static const char *const api_names[] = {"clattn_sdpa", "clattn_sdpa_host", "clattn_score"};

enum sdpa_mut {
    S_CTX_NULL,
    S_DESC_NULL,
    S_Q_NULL,
    S_K_NULL,
    S_V_NULL,
    S_OUT_NULL,
    S_MASK_NULL,
    S_B0,
    S_H0,
    S_L0,
    S_S0,
    S_D0,
    S_OVF_BH,
    S_OVF_LD,
    S_OVF_BYTES,
    S_Q_SMALL,
    S_K_SMALL,
    S_V_SMALL,
    S_OUT_SMALL,
    S_W_SMALL,
    S_LSE_SMALL,
    S_MASK_LS_SMALL,
    S_MASK_BHLS_SMALL,
    S_DV_MISMATCH,
    S_KEYLEN_GT_S,
    S_MASK_NO_LAYOUT,
    S_CAUSAL_7,
    S_CAUSAL_NEG,
    S_ADD_9,
    S_SCALE_INF,
    S_SCALE_NINF,
    S_EXCEEDS,
    S_ALGO_7,
    S_FUSED_WITH_WEIGHTS,
};

static const bad_case sdpa_bad[] = {
    {S_CTX_NULL, NA, 0, "ctx NULL"},
    {S_DESC_NULL, NA, 0, "desc NULL"},
    {S_Q_NULL, NA, 0, "q NULL"},
    {S_K_NULL, NA, 0, "k NULL"},
    {S_V_NULL, NA, 0, "v NULL (MLA's latent form needs v_dim below qk_dim: 6 and 4)"},
    {S_OUT_NULL, NA, 0, "out NULL"},
    {S_MASK_NULL, NA, 0, "additive (L,S) but mask NULL"},
    {S_B0, ZS, 0, "batch 0"},
    {S_H0, ZS, 0, "heads 0"},
    {S_L0, ZS, 0, "q_len 0"},
    {S_S0, ZS, 0, "kv_len 0"},
    {S_D0, ZS, 0, "qk_dim 0"},
    {S_OVF_BH, OV, 0, "batch SIZE_MAX/2 × heads 4 overflows"},
    {S_OVF_LD, OV, 0, "q_len SIZE_MAX/8 × qk_dim 16 overflows"},
    {S_OVF_BYTES, OV, 0, "2^62 elements × sizeof(float) overflows"},
    {S_Q_SMALL, TS, 0, "q one float too small"},
    {S_K_SMALL, TS, 0, "k one float too small"},
    {S_V_SMALL, TS, 0, "v one float too small"},
    {S_OUT_SMALL, TS, 0, "out one float too small"},
    {S_W_SMALL, TS, 0, "weights one float too small"},
    {S_LSE_SMALL, TS, 0, "lse one float too small"},
    {S_MASK_LS_SMALL, TS, 0, "(L,S) mask one float too small"},
    {S_MASK_BHLS_SMALL, TS, 0, "(B,H,L,S) mask one float too small"},
    {S_DV_MISMATCH, TS, 0, "v_dim larger than the V/out buffers hold"},
    {S_KEYLEN_GT_S, IM, 0, "key length S+1"},
    {S_MASK_NO_LAYOUT, IM, 0, "mask buffer given with layout NONE"},
    {S_CAUSAL_7, IV, 0, "causal = 7"},
    {S_CAUSAL_NEG, IV, 0, "causal = -1"},
    {S_ADD_9, IM, IV, "additive layout = 9"},
    {S_SCALE_INF, IV, 0, "scale +inf"},
    {S_SCALE_NINF, IV, 0, "scale -inf"},
    {S_ALGO_7, IV, 0, "algorithm = 7"},
    {S_FUSED_WITH_WEIGHTS, IV, 0, "CLATTN_ALGORITHM_FUSED with a weights output"},
};
#define N_SDPA_BAD (sizeof sdpa_bad / sizeof sdpa_bad[0])

static const bad_case sdpa_host_bad[] = {
    {S_CTX_NULL, NA, 0, "ctx NULL"},
    {S_DESC_NULL, NA, 0, "desc NULL"},
    {S_Q_NULL, NA, 0, "q NULL"},
    {S_K_NULL, NA, 0, "k NULL"},
    {S_V_NULL, NA, 0, "v NULL"},
    {S_OUT_NULL, NA, 0, "out NULL"},
    {S_MASK_NULL, NA, 0, "additive (L,S) but mask NULL"},
    {S_B0, ZS, 0, "batch 0"},
    {S_H0, ZS, 0, "heads 0"},
    {S_L0, ZS, 0, "q_len 0"},
    {S_S0, ZS, 0, "kv_len 0"},
    {S_D0, ZS, 0, "qk_dim 0"},
    {S_OVF_BH, OV, 0, "batch SIZE_MAX/2 × heads 4 overflows"},
    {S_OVF_LD, OV, 0, "q_len SIZE_MAX/8 × qk_dim 16 overflows"},
    {S_OVF_BYTES, OV, 0, "2^62 elements × sizeof(float) overflows"},
    {S_KEYLEN_GT_S, IM, 0, "key length S+1"},
    {S_MASK_NO_LAYOUT, IM, 0, "mask given with layout NONE"},
    {S_CAUSAL_7, IV, 0, "causal = 7"},
    {S_CAUSAL_NEG, IV, 0, "causal = -1"},
    {S_ADD_9, IM, IV, "additive layout = 9"},
    {S_SCALE_INF, IV, 0, "scale +inf"},
    {S_SCALE_NINF, IV, 0, "scale -inf"},
    {S_EXCEEDS, XL, 0, "B=H=64, L=S=2^20 with weights: larger than CL_DEVICE_MAX_MEM_ALLOC_SIZE"},
    {S_ALGO_7, IV, 0, "algorithm = 7"},
    {S_FUSED_WITH_WEIGHTS, IV, 0, "CLATTN_ALGORITHM_FUSED with a weights output"},
};
#define N_SDPA_HOST_BAD (sizeof sdpa_host_bad / sizeof sdpa_host_bad[0])

static const bad_case score_bad[] = {
    {S_CTX_NULL, NA, 0, "ctx NULL"},
    {S_DESC_NULL, NA, 0, "desc NULL"},
    {S_Q_NULL, NA, 0, "q NULL"},
    {S_K_NULL, NA, 0, "k NULL"},
    {S_OUT_NULL, NA, 0, "scores NULL"},
    {S_MASK_NULL, NA, 0, "additive (L,S) but mask NULL"},
    {S_B0, ZS, 0, "batch 0"},
    {S_H0, ZS, 0, "heads 0"},
    {S_L0, ZS, 0, "q_len 0"},
    {S_S0, ZS, 0, "kv_len 0"},
    {S_D0, ZS, 0, "qk_dim 0"},
    {S_OVF_BH, OV, 0, "batch SIZE_MAX/2 × heads 4 overflows"},
    {S_OVF_LD, OV, 0, "q_len SIZE_MAX/8 × qk_dim 16 overflows"},
    {S_OVF_BYTES, OV, 0, "2^62 elements × sizeof(float) overflows"},
    {S_Q_SMALL, TS, 0, "q one float too small"},
    {S_K_SMALL, TS, 0, "k one float too small"},
    {S_OUT_SMALL, TS, 0, "scores one float too small"},
    {S_MASK_LS_SMALL, TS, 0, "(L,S) mask one float too small"},
    {S_MASK_BHLS_SMALL, TS, 0, "(B,H,L,S) mask one float too small"},
    {S_KEYLEN_GT_S, IM, 0, "key length S+1"},
    {S_MASK_NO_LAYOUT, IM, 0, "mask buffer given with layout NONE"},
    {S_CAUSAL_7, IV, 0, "causal = 7"},
    {S_ADD_9, IM, IV, "additive layout = 9"},
    {S_SCALE_INF, IV, 0, "scale +inf"},
    {S_SCALE_NINF, IV, 0, "scale -inf"},
};
#define N_SCORE_BAD (sizeof score_bad / sizeof score_bad[0])

/* The good call: B 2, H 2, L 3, S 5, Dqk 4, Dv 6 (GB … GDV of validation_util.h), causal top-left,
 * key lengths {5, 2}, additive (L,S) mask; every buffer exactly the size of its tensor. */
typedef struct {
    clattn_context *ctx;
    clattn_sdpa_desc d;
    clattn_masks m; /* d.masks points here */
    size_t kl[GB];
    size_t nq, nk, nv, nm, no, np, nl;
    float *hq, *hk, *hv, *hm;
    /* cl_mem API */
    cl_mem q, k, v, mask, out, w, lse;
    /* host API */
    float *ho, *hw, *hl;
} sdpa_fx;

static void sdpa_fx_init(sdpa_fx *f, clattn_context *ctx, int api)
{
    memset(f, 0, sizeof *f);
    f->ctx = ctx;
    f->d = tu_sdpa_desc(GB, GH, GL, GS, GD, GDV);
    f->m = (clattn_masks)CLATTN_MASKS_INIT;
    f->m.causal = CLATTN_CAUSAL_TOP_LEFT;
    f->kl[0] = 5;
    f->kl[1] = 2;
    f->m.key_lengths = f->kl;
    f->m.additive = CLATTN_MASK_L_S;
    f->d.masks = &f->m;
    f->nq = GB * GH * GL * GD;
    f->nk = GB * GH * GS * GD;
    f->nv = GB * GH * GS * GDV;
    f->nm = GL * GS;
    f->no = GB * GH * GL * GDV;
    f->np = GB * GH * GL * GS;
    f->nl = GB * GH * GL;
    f->hq = tu_falloc(f->nq);
    f->hk = tu_falloc(f->nk);
    f->hv = tu_falloc(f->nv);
    f->hm = tu_falloc(f->np); /* large enough for either layout */
    tu_fill_uniform(f->hq, f->nq, 1.0f, 1);
    tu_fill_uniform(f->hk, f->nk, 1.0f, 2);
    tu_fill_uniform(f->hv, f->nv, 1.0f, 3);
    tu_fill_uniform(f->hm, f->np, 1.0f, 4);
    if (api == API_SDPA_HOST) {
        f->ho = tu_host_alloc(f->no, NULL);
        f->hw = tu_host_alloc(f->np, NULL);
        f->hl = tu_host_alloc(f->nl, NULL);
    } else {
        f->q = tu_dev_alloc_exact(ctx, f->nq, f->hq);
        f->k = tu_dev_alloc_exact(ctx, f->nk, f->hk);
        f->v = tu_dev_alloc_exact(ctx, f->nv, f->hv);
        f->mask = tu_dev_alloc_exact(ctx, f->nm, f->hm);
        f->out = tu_dev_alloc_exact(ctx, api == API_SCORE ? f->np : f->no, NULL);
        if (api == API_SDPA) {
            f->w = tu_dev_alloc_exact(ctx, f->np, NULL);
            f->lse = tu_dev_alloc_exact(ctx, f->nl, NULL);
        }
    }
}

static clattn_status sdpa_fx_call(int api, clattn_context *ctx, const clattn_sdpa_desc *d,
                                  const sdpa_fx *f, int host_mask_null, int host_mask_force)
{
    switch (api) {
    case API_SDPA:
        return clattn_sdpa(ctx, d, f->q, f->k, f->v, f->mask, f->out, f->w, f->lse);
    case API_SCORE:
        return clattn_score(ctx, d, f->q, f->k, f->mask, f->out);
    default: {
        const float *m = NULL;
        if (!host_mask_null &&
            (host_mask_force || (d && d->masks && d->masks->additive != CLATTN_MASK_NONE)))
            m = f->hm;
        return clattn_sdpa_host(ctx, d, f->hq, f->hk, f->hv, m, f->ho, f->hw, f->hl);
    }
    }
}

static void run_sdpa_bad(int api, const bad_case *bc, size_t dev)
{
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("%s: %s on %s", api_names[api], bc->name, tu_dev_spec[dev]);
    sdpa_fx f;
    sdpa_fx_init(&f, ctx, api);
    clattn_context *call_ctx = ctx;
    const clattn_sdpa_desc *dp = &f.d;
    int host_mask_null = 0, host_mask_force = 0;
    cl_mem small_out = NULL;
    size_t small_n = 0;
    float *dummy = NULL;

    /* size mutations drop the masks so that the size is the only thing wrong */
    switch (bc->mut) {
    case S_B0: case S_H0: case S_L0: case S_S0: case S_D0:
    case S_OVF_BH: case S_OVF_LD: case S_OVF_BYTES: case S_EXCEEDS: case S_DV_MISMATCH:
        f.m.key_lengths = NULL;
        f.m.additive = CLATTN_MASK_NONE;
        f.m.causal = CLATTN_CAUSAL_NONE;
        f.mask = NULL;
        break;
    default:
        break;
    }

    switch (bc->mut) {
    case S_CTX_NULL: call_ctx = NULL; break;
    case S_DESC_NULL: dp = NULL; break;
    case S_Q_NULL: f.q = NULL; f.hq = NULL; break;
    case S_K_NULL: f.k = NULL; f.hk = NULL; break;
    case S_V_NULL: f.v = NULL; f.hv = NULL; break;
    case S_OUT_NULL: f.out = NULL; f.ho = NULL; break;
    case S_MASK_NULL: f.mask = NULL; host_mask_null = 1; break;
    case S_B0: f.d.batch = 0; break;
    case S_H0: f.d.heads = 0; break;
    case S_L0: f.d.q_len = 0; break;
    case S_S0: f.d.kv_len = 0; break;
    case S_D0: f.d.qk_dim = 0; break;
    case S_OVF_BH: f.d.batch = HALF_MAX; f.d.heads = 4; break;
    case S_OVF_LD: f.d.q_len = SIZE_MAX / 8; f.d.qk_dim = 16; break;
    case S_OVF_BYTES:
        f.d.batch = BIG_POW2;
        f.d.heads = f.d.q_len = f.d.kv_len = f.d.qk_dim = 1;
        f.d.v_dim = 0;
        break;
    case S_Q_SMALL: f.q = tu_dev_alloc_exact(ctx, f.nq - 1, f.hq); break;
    case S_K_SMALL: f.k = tu_dev_alloc_exact(ctx, f.nk - 1, f.hk); break;
    case S_V_SMALL: f.v = tu_dev_alloc_exact(ctx, f.nv - 1, f.hv); break;
    case S_OUT_SMALL:
        small_n = (api == API_SCORE ? f.np : f.no) - 1;
        f.out = small_out = tu_dev_alloc_exact(ctx, small_n, NULL);
        break;
    case S_W_SMALL: small_n = f.np - 1; f.w = small_out = tu_dev_alloc_exact(ctx, small_n, NULL); break;
    case S_LSE_SMALL: small_n = f.nl - 1; f.lse = small_out = tu_dev_alloc_exact(ctx, small_n, NULL); break;
    case S_MASK_LS_SMALL: f.mask = tu_dev_alloc_exact(ctx, f.nm - 1, f.hm); break;
    case S_MASK_BHLS_SMALL:
        f.m.additive = CLATTN_MASK_B_H_L_S;
        f.mask = tu_dev_alloc_exact(ctx, f.np - 1, f.hm);
        break;
    case S_DV_MISMATCH: f.d.v_dim = GDV + 1; break;
    case S_KEYLEN_GT_S: f.kl[1] = GS + 1; break;
    case S_MASK_NO_LAYOUT: f.m.additive = CLATTN_MASK_NONE; host_mask_force = 1; break;
    case S_CAUSAL_7: f.m.causal = (clattn_causal)7; break;
    case S_CAUSAL_NEG: f.m.causal = (clattn_causal)-1; break;
    case S_ADD_9: f.m.additive = (clattn_mask_layout)9; break;
    case S_SCALE_INF: f.d.scale = INFINITY; break;
    case S_SCALE_NINF: f.d.scale = -INFINITY; break;
    case S_ALGO_7: f.d.algorithm = (clattn_algorithm)7; break;
    case S_FUSED_WITH_WEIGHTS: f.d.algorithm = CLATTN_ALGORITHM_FUSED; break; /* the fixture asks for weights */
    case S_EXCEEDS:
        /* sizes fit in size_t but the weights are 2^54 bytes; small dummy arrays must not be touched */
        f.d.batch = 64;
        f.d.heads = 64;
        f.d.q_len = f.d.kv_len = (size_t)1 << 20;
        f.d.qk_dim = 1;
        f.d.v_dim = 0;
        dummy = tu_host_alloc(64, NULL);
        f.hq = f.hk = f.hv = dummy;
        break;
    default:
        ck_abort_msg("unknown mutation %d", bc->mut);
    }

    clattn_status st = sdpa_fx_call(api, call_ctx, dp, &f, host_mask_null, host_mask_force);
    check_status(st, bc, call_ctx);

    /* no output written */
    if (api == API_SDPA_HOST) {
        check_host_untouched(f.ho, f.no, "out");
        check_host_untouched(f.hw, f.np, "weights");
        check_host_untouched(f.hl, f.nl, "lse");
        check_host_untouched(dummy, 64, "dummy input");
    } else {
        if (small_out)
            check_dev_untouched(ctx, small_out, small_n, "(small buffer)");
        if (f.out != small_out)
            check_dev_untouched(ctx, f.out, api == API_SCORE ? f.np : f.no, "out");
        if (f.w != small_out)
            check_dev_untouched(ctx, f.w, f.np, "weights");
        if (f.lse != small_out)
            check_dev_untouched(ctx, f.lse, f.nl, "lse");
    }
}

START_TEST(test_sdpa_bad) { run_sdpa_bad(API_SDPA, &sdpa_bad[TU_CASE(_i)], TU_DEVICE(_i)); }
END_TEST

START_TEST(test_sdpa_host_bad)
{
    run_sdpa_bad(API_SDPA_HOST, &sdpa_host_bad[TU_CASE(_i)], TU_DEVICE(_i));
}
END_TEST

START_TEST(test_score_bad) { run_sdpa_bad(API_SCORE, &score_bad[TU_CASE(_i)], TU_DEVICE(_i)); }
END_TEST

/* Positive controls: the fixtures' good calls succeed with exactly-sized buffers and are correct. */
START_TEST(test_sdpa_good)
{
    size_t dev = (size_t)_i;
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("good clattn_sdpa / clattn_sdpa_host / clattn_score with exact-size buffers on %s",
                 tu_dev_spec[dev]);
    sdpa_fx f, h, s;
    sdpa_fx_init(&f, ctx, API_SDPA);
    sdpa_fx_init(&h, ctx, API_SDPA_HOST);
    sdpa_fx_init(&s, ctx, API_SCORE);
    double *ro = tu_dalloc(f.no), *rp = tu_dalloc(f.np), *rl = tu_dalloc(f.nl),
           *rs = tu_dalloc(f.np);
    ref_sdpa(&f.d, f.hq, f.hk, f.hv, f.hm, ro, rp, rl);
    ref_score(&f.d, f.hq, f.hk, f.hm, rs);

    /* a failing call first: it must not spoil the context for the good call that follows */
    clattn_sdpa_desc bad = f.d;
    bad.scale = INFINITY; /* NaN would be CLATTN_SCALE_DEFAULT, a good scale */
    ck_assert(clattn_sdpa(ctx, &bad, f.q, f.k, f.v, f.mask, f.out, f.w, f.lse) != CLATTN_SUCCESS);

    clattn_status st = clattn_sdpa(ctx, &f.d, f.q, f.k, f.v, f.mask, f.out, f.w, f.lse);
    TU_ASSERT_OK(st, ctx, "sdpa");
    st = clattn_score(ctx, &s.d, s.q, s.k, s.mask, s.out);
    TU_ASSERT_OK(st, ctx, "score");
    tu_finish(ctx);
    check_close_named("out", tu_dev_read(ctx, f.out, f.no), ro, f.no, NULL);
    check_close_named("weights", tu_dev_read(ctx, f.w, f.np), rp, f.np, NULL);
    check_close_named("lse", tu_dev_read(ctx, f.lse, f.nl), rl, f.nl, NULL);
    check_close_named("scores", tu_dev_read(ctx, s.out, s.np), rs, s.np, NULL);

    st = clattn_sdpa_host(ctx, &h.d, h.hq, h.hk, h.hv, h.hm, h.ho, h.hw, h.hl);
    TU_ASSERT_OK(st, ctx, "sdpa_host");
    check_close_named("host out", h.ho, ro, h.no, NULL);
    check_close_named("host weights", h.hw, rp, h.np, NULL);
    check_close_named("host lse", h.hl, rl, h.nl, NULL);
    tu_host_check_guard(h.ho, h.no, "host out");
    tu_host_check_guard(h.hw, h.np, "host weights");
    tu_host_check_guard(h.hl, h.nl, "host lse");
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */

static Suite *make_suite(void)
{
    Suite *s = suite_create("validation_sdpa");
    tu_add_loop(s, "sdpa_bad", test_sdpa_bad, N_SDPA_BAD * tu_ndev);
    tu_add_loop(s, "sdpa_host_bad", test_sdpa_host_bad, N_SDPA_HOST_BAD * tu_ndev);
    tu_add_loop(s, "score_bad", test_score_bad, N_SCORE_BAD * tu_ndev);
    tu_add_loop(s, "good_calls", test_sdpa_good, tu_ndev);
    return s;
}

int main(void) { return tu_main(make_suite); }
