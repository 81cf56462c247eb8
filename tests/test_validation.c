/*
 * Argument validation of every entry point, and the library's non-numeric promises: status strings,
 * version, device selection (spec strings and CLATTN_DEVICE), contexts wrapping application OpenCL
 * objects, kernel-source and kernel-build failures.
 *
 * Each bad call must return the documented status, write no output (outputs keep their sentinel fill)
 * and leave a non-empty clattn_last_error(). Every bad case is one check iteration per device. Good
 * calls with exactly-sized buffers are run as positive controls, so a library that rejects everything
 * does not pass.
 */
#define _POSIX_C_SOURCE 200809L

#include "test_util.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ANY_ERROR 1 /* "expect": any status other than CLATTN_SUCCESS */
#define HALF_MAX (SIZE_MAX / 2)
#define BIG_POW2 ((size_t)1 << (sizeof(size_t) * 8 - 2)) /* × sizeof(float) overflows size_t */

typedef struct {
    int mut;
    int expect;
    int alt; /* a second accepted status, 0 for none */
    const char *name;
} bad_case;

static void check_status(clattn_status st, const bad_case *bc, const clattn_context *err_ctx)
{
    if (bc->expect == ANY_ERROR) {
        ck_assert_msg(st != CLATTN_SUCCESS, "%s: returned CLATTN_SUCCESS, expected an error",
                      tu_label());
    } else {
        ck_assert_msg(st == (clattn_status)bc->expect ||
                          (bc->alt != 0 && st == (clattn_status)bc->alt),
                      "%s: returned %s (%d), expected %s%s%s; last error: \"%s\"", tu_label(),
                      clattn_status_string(st), (int)st,
                      clattn_status_string((clattn_status)bc->expect), bc->alt ? " or " : "",
                      bc->alt ? clattn_status_string((clattn_status)bc->alt) : "",
                      clattn_last_error(err_ctx));
    }
    const char *e = clattn_last_error(err_ctx);
    ck_assert_msg(e != NULL && e[0] != '\0', "%s: clattn_last_error(%s) is empty after the failure",
                  tu_label(), err_ctx ? "ctx" : "NULL");
}

static void check_dev_untouched(clattn_context *ctx, cl_mem m, size_t n, const char *what)
{
    if (m)
        ck_assert_msg(tu_dev_all_sentinel(ctx, m, n), "%s: output %s was written by a failing call",
                      tu_label(), what);
}

static void check_host_untouched(const float *p, size_t n, const char *what)
{
    if (p)
        ck_assert_msg(tu_host_all_sentinel(p, n), "%s: output %s was written by a failing call",
                      tu_label(), what);
}

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
    S_SCALE_NAN,
    S_SCALE_INF,
    S_SCALE_NINF,
    S_EXCEEDS,
    S_ALGO_7,
    S_FUSED_WITH_WEIGHTS,
};

#define NA CLATTN_ERROR_NULL_ARGUMENT
#define ZS CLATTN_ERROR_ZERO_SIZE
#define OV CLATTN_ERROR_SIZE_OVERFLOW
#define TS CLATTN_ERROR_BUFFER_TOO_SMALL
#define SM CLATTN_ERROR_SHAPE_MISMATCH
#define IM CLATTN_ERROR_INVALID_MASK
#define IV CLATTN_ERROR_INVALID_VALUE
#define XL CLATTN_ERROR_EXCEEDS_DEVICE_LIMIT

static const bad_case sdpa_bad[] = {
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
    {S_SCALE_NAN, IV, 0, "scale NaN"},
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
    {S_SCALE_NAN, IV, 0, "scale NaN"},
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
    {S_SCALE_NAN, IV, 0, "scale NaN"},
    {S_SCALE_INF, IV, 0, "scale +inf"},
};
#define N_SCORE_BAD (sizeof score_bad / sizeof score_bad[0])

/* The good call: B 2, H 2, L 3, S 5, Dqk 4, Dv 6, causal top-left, key lengths {5, 2}, additive
 * (L,S) mask; every buffer exactly the size of its tensor. */
enum { GB = 2, GH = 2, GL = 3, GS = 5, GD = 4, GDV = 6 };

typedef struct {
    clattn_context *ctx;
    clattn_sdpa_desc d;
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
    f->d.batch = GB;
    f->d.heads = GH;
    f->d.q_len = GL;
    f->d.kv_len = GS;
    f->d.qk_dim = GD;
    f->d.v_dim = GDV;
    f->d.masks.causal = CLATTN_CAUSAL_TOP_LEFT;
    f->kl[0] = 5;
    f->kl[1] = 2;
    f->d.masks.key_lengths = f->kl;
    f->d.masks.additive = CLATTN_MASK_L_S;
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
        if (!host_mask_null && (host_mask_force || (d && d->masks.additive != CLATTN_MASK_NONE)))
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
        f.d.masks.key_lengths = NULL;
        f.d.masks.additive = CLATTN_MASK_NONE;
        f.d.masks.causal = CLATTN_CAUSAL_NONE;
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
        f.d.masks.additive = CLATTN_MASK_B_H_L_S;
        f.mask = tu_dev_alloc_exact(ctx, f.np - 1, f.hm);
        break;
    case S_DV_MISMATCH: f.d.v_dim = GDV + 1; break;
    case S_KEYLEN_GT_S: f.kl[1] = GS + 1; break;
    case S_MASK_NO_LAYOUT: f.d.masks.additive = CLATTN_MASK_NONE; host_mask_force = 1; break;
    case S_CAUSAL_7: f.d.masks.causal = (clattn_causal)7; break;
    case S_CAUSAL_NEG: f.d.masks.causal = (clattn_causal)-1; break;
    case S_ADD_9: f.d.masks.additive = (clattn_mask_layout)9; break;
    case S_SCALE_NAN: f.d.scale = NAN; break;
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
    bad.scale = NAN;
    ck_assert(clattn_sdpa(ctx, &bad, f.q, f.k, f.v, f.mask, f.out, f.w, f.lse) != CLATTN_SUCCESS);

    clattn_status st = clattn_sdpa(ctx, &f.d, f.q, f.k, f.v, f.mask, f.out, f.w, f.lse);
    ck_assert_msg(st == CLATTN_SUCCESS, "%s: sdpa: %s: %s", tu_label(), clattn_status_string(st),
                  clattn_last_error(ctx));
    st = clattn_score(ctx, &s.d, s.q, s.k, s.mask, s.out);
    ck_assert_msg(st == CLATTN_SUCCESS, "%s: score: %s: %s", tu_label(), clattn_status_string(st),
                  clattn_last_error(ctx));
    tu_finish(ctx);
    check_close_named("out", tu_dev_read(ctx, f.out, f.no), ro, f.no, NULL);
    check_close_named("weights", tu_dev_read(ctx, f.w, f.np), rp, f.np, NULL);
    check_close_named("lse", tu_dev_read(ctx, f.lse, f.nl), rl, f.nl, NULL);
    check_close_named("scores", tu_dev_read(ctx, s.out, s.np), rs, s.np, NULL);

    st = clattn_sdpa_host(ctx, &h.d, h.hq, h.hk, h.hv, h.hm, h.ho, h.hw, h.hl);
    ck_assert_msg(st == CLATTN_SUCCESS, "%s: sdpa_host: %s: %s", tu_label(),
                  clattn_status_string(st), clattn_last_error(ctx));
    check_close_named("host out", h.ho, ro, h.no, NULL);
    check_close_named("host weights", h.hw, rp, h.np, NULL);
    check_close_named("host lse", h.hl, rl, h.nl, NULL);
    tu_host_check_guard(h.ho, h.no, "host out");
    tu_host_check_guard(h.hw, h.np, "host weights");
    tu_host_check_guard(h.hl, h.nl, "host lse");
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* MHA and MHA host                                                                                */
/* ---------------------------------------------------------------------------------------------- */

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
    H_SCALE_NAN,
    H_SCALE_INF,
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
    {H_SCALE_NAN, IV, 0, "scale NaN"},
    {H_SCALE_INF, IV, 0, "scale +inf"},
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
    {H_SCALE_NAN, IV, 0, "scale NaN"},
    {H_SCALE_INF, IV, 0, "scale +inf"},
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
    size_t kl[MB];
    float *h[T_COUNT];  /* host data (inputs) or sentinel outputs (host API) */
    cl_mem m[T_COUNT];  /* device buffers (cl_mem API) */
    clattn_mha_weights mw;
    clattn_mha_host_weights hw;
} mha_fx;

static void mha_fx_init(mha_fx *f, clattn_context *ctx, int host)
{
    memset(f, 0, sizeof *f);
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
    f->d.masks.key_lengths = f->kl;
    f->d.masks.additive = CLATTN_MASK_L_S;
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
        f.d.masks.key_lengths = NULL;
        f.d.masks.additive = CLATTN_MASK_NONE;
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
    case H_MASK_NO_LAYOUT: f.d.masks.additive = CLATTN_MASK_NONE; break;
    case H_CAUSAL_7: f.d.masks.causal = (clattn_causal)7; break;
    case H_SCALE_NAN: f.d.scale = NAN; break;
    case H_SCALE_INF: f.d.scale = INFINITY; break;
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

    clattn_mha_desc bad = f.d;
    bad.masks.causal = (clattn_causal)7;
    ck_assert(clattn_mha(ctx, &bad, f.m[T_X], f.m[T_KV], &f.mw, f.m[T_MASK], f.m[T_OUT],
                         f.m[T_AW]) != CLATTN_SUCCESS);

    clattn_status st = clattn_mha(ctx, &f.d, f.m[T_X], f.m[T_KV], &f.mw, f.m[T_MASK], f.m[T_OUT],
                                  f.m[T_AW]);
    ck_assert_msg(st == CLATTN_SUCCESS, "%s: mha: %s: %s", tu_label(), clattn_status_string(st),
                  clattn_last_error(ctx));
    tu_finish(ctx);
    check_close_named("out", tu_dev_read(ctx, f.m[T_OUT], mha_n[T_OUT]), ry, mha_n[T_OUT], NULL);
    check_close_named("attn_weights", tu_dev_read(ctx, f.m[T_AW], mha_n[T_AW]), rw, mha_n[T_AW],
                      NULL);

    st = clattn_mha_host(ctx, &h.d, h.h[T_X], h.h[T_KV], &h.hw, h.h[T_MASK], h.h[T_OUT],
                         h.h[T_AW]);
    ck_assert_msg(st == CLATTN_SUCCESS, "%s: mha_host: %s: %s", tu_label(),
                  clattn_status_string(st), clattn_last_error(ctx));
    check_close_named("host out", h.h[T_OUT], ry, mha_n[T_OUT], NULL);
    check_close_named("host attn_weights", h.h[T_AW], rw, mha_n[T_AW], NULL);
    tu_host_check_guard(h.h[T_OUT], mha_n[T_OUT], "host out");
    tu_host_check_guard(h.h[T_AW], mha_n[T_AW], "host attn_weights");
}
END_TEST

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
    ck_assert_msg(st == CLATTN_SUCCESS, "%s: %s: %s", tu_label(), clattn_status_string(st),
                  clattn_last_error(ctx));
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
    ck_assert_msg(st == CLATTN_SUCCESS, "%s: %s: %s", tu_label(), clattn_status_string(st),
                  clattn_last_error(ctx));
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

static void wsum_desc(clattn_sdpa_desc *d)
{
    memset(d, 0, sizeof *d);
    d->batch = GB;
    d->heads = GH;
    d->q_len = GL;
    d->kv_len = GS;
    d->qk_dim = GD;
    d->v_dim = GDV;
}

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
    clattn_sdpa_desc d;
    wsum_desc(&d);
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
    clattn_sdpa_desc d;
    wsum_desc(&d);
    double ref[NO];
    ref_weighted_sum(&d, hp, hv, ref);
    cl_mem p = tu_dev_alloc_exact(ctx, NP, hp), v = tu_dev_alloc_exact(ctx, NV, hv),
           o = tu_dev_alloc_exact(ctx, NO, NULL);
    clattn_status st = clattn_weighted_sum(ctx, &d, p, v, o);
    ck_assert_msg(st == CLATTN_SUCCESS, "%s: %s: %s", tu_label(), clattn_status_string(st),
                  clattn_last_error(ctx));
    tu_finish(ctx);
    check_close_named("out", tu_dev_read(ctx, o, NO), ref, NO, NULL);
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* Status strings, version                                                                         */
/* ---------------------------------------------------------------------------------------------- */

#define ST(x) {x, #x}
static const struct {
    clattn_status s;
    const char *name;
} all_status[] = {
    ST(CLATTN_SUCCESS),
    ST(CLATTN_ERROR_NULL_ARGUMENT),
    ST(CLATTN_ERROR_ZERO_SIZE),
    ST(CLATTN_ERROR_SIZE_OVERFLOW),
    ST(CLATTN_ERROR_BUFFER_TOO_SMALL),
    ST(CLATTN_ERROR_SHAPE_MISMATCH),
    ST(CLATTN_ERROR_INVALID_MASK),
    ST(CLATTN_ERROR_INVALID_VALUE),
    ST(CLATTN_ERROR_EXCEEDS_DEVICE_LIMIT),
    ST(CLATTN_ERROR_NO_PLATFORM),
    ST(CLATTN_ERROR_NO_DEVICE),
    ST(CLATTN_ERROR_DEVICE_NOT_FOUND),
    ST(CLATTN_ERROR_KERNEL_SOURCE),
    ST(CLATTN_ERROR_BUILD_FAILED),
    ST(CLATTN_ERROR_BLAS),
    ST(CLATTN_ERROR_OUT_OF_HOST_MEMORY),
    ST(CLATTN_ERROR_UNSUPPORTED_DEVICE),
};
#define N_STATUS (sizeof all_status / sizeof all_status[0])

START_TEST(test_status_strings)
{
    for (size_t i = 0; i < N_STATUS; i++) {
        const char *s = clattn_status_string(all_status[i].s);
        ck_assert_msg(s != NULL, "status_string(%d) is NULL", (int)all_status[i].s);
        ck_assert_msg(strcmp(s, "CLATTN_UNKNOWN_STATUS") != 0, "status_string(%s) is unknown",
                      all_status[i].name);
        if (all_status[i].s != CLATTN_SUCCESS) /* 0 may also be spelled CL_SUCCESS */
            ck_assert_msg(strcmp(s, all_status[i].name) == 0, "status_string(%d) = \"%s\", want \"%s\"",
                          (int)all_status[i].s, s, all_status[i].name);
        for (size_t j = 0; j < i; j++)
            ck_assert_msg(strcmp(s, clattn_status_string(all_status[j].s)) != 0,
                          "status_string(%s) == status_string(%s) == \"%s\"", all_status[i].name,
                          all_status[j].name, s);
        const char *d = clattn_status_description(all_status[i].s);
        ck_assert_msg(d != NULL && d[0] != '\0', "status_description(%s) is empty",
                      all_status[i].name);
    }
    static const struct {
        cl_int code;
        const char *name;
    } cl_codes[] = {
        {CL_OUT_OF_RESOURCES, "CL_OUT_OF_RESOURCES"},
        {CL_MEM_OBJECT_ALLOCATION_FAILURE, "CL_MEM_OBJECT_ALLOCATION_FAILURE"},
        {CL_OUT_OF_HOST_MEMORY, "CL_OUT_OF_HOST_MEMORY"},
        {CL_BUILD_PROGRAM_FAILURE, "CL_BUILD_PROGRAM_FAILURE"},
        {CL_INVALID_VALUE, "CL_INVALID_VALUE"},
        {CL_INVALID_BUFFER_SIZE, "CL_INVALID_BUFFER_SIZE"},
        {CL_INVALID_KERNEL_ARGS, "CL_INVALID_KERNEL_ARGS"},
    };
    for (size_t i = 0; i < sizeof cl_codes / sizeof cl_codes[0]; i++) {
        const char *s = clattn_status_string((clattn_status)cl_codes[i].code);
        ck_assert_msg(s != NULL && strcmp(s, cl_codes[i].name) == 0,
                      "status_string(%d) = \"%s\", want \"%s\"", (int)cl_codes[i].code,
                      s ? s : "(null)", cl_codes[i].name);
        const char *d = clattn_status_description((clattn_status)cl_codes[i].code);
        ck_assert_msg(d != NULL && d[0] != '\0', "status_description(%s) is empty",
                      cl_codes[i].name);
    }
    static const int unknown[] = {1, 12345, -2999, -3100, -99999};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        const char *s = clattn_status_string((clattn_status)unknown[i]);
        ck_assert_msg(s != NULL && strcmp(s, "CLATTN_UNKNOWN_STATUS") == 0,
                      "status_string(%d) = \"%s\", want CLATTN_UNKNOWN_STATUS", unknown[i],
                      s ? s : "(null)");
        ck_assert(clattn_status_description((clattn_status)unknown[i]) != NULL);
    }
}
END_TEST

START_TEST(test_version)
{
    ck_assert_uint_eq(clattn_version_number(), CLATTN_VERSION_NUMBER);
    ck_assert_ptr_nonnull(clattn_version_string());
    ck_assert_str_eq(clattn_version_string(), CLATTN_VERSION_STRING);
    clattn_context_free(NULL); /* accepted */
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* Devices                                                                                         */
/* ---------------------------------------------------------------------------------------------- */

static int ci_contains(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (size_t i = 0; hay[i]; i++) {
        size_t k = 0;
        while (k < n && hay[i + k] &&
               tolower((unsigned char)hay[i + k]) == tolower((unsigned char)needle[k]))
            k++;
        if (k == n)
            return 1;
    }
    return n == 0;
}

static void fill_info_sentinel(clattn_device_info *info) { memset(info, 0xA5, sizeof *info); }

static int info_is_sentinel(const clattn_device_info *info)
{
    const unsigned char *p = (const unsigned char *)info;
    for (size_t i = 0; i < sizeof *info; i++)
        if (p[i] != 0xA5)
            return 0;
    return 1;
}

/* The CLATTN_DEVICE tests change the environment: restore it whatever happens. */
static char *saved_device_env = NULL;
static int saved_device_env_set = 0, env_saved = 0;

static void env_save(void)
{
    const char *v = getenv("CLATTN_DEVICE");
    env_saved = 1;
    saved_device_env_set = v != NULL;
    saved_device_env = v ? strdup(v) : NULL;
}

static void env_restore(void)
{
    if (!env_saved) {
        tu_release_all();
        return;
    }
    env_saved = 0;
    if (saved_device_env_set)
        setenv("CLATTN_DEVICE", saved_device_env, 1);
    else
        unsetenv("CLATTN_DEVICE");
    free(saved_device_env);
    saved_device_env = NULL;
    tu_release_all();
}

START_TEST(test_device_null_args)
{
    clattn_device_info info;
    clattn_status st = clattn_device_count(NULL);
    ck_assert_msg(st == CLATTN_ERROR_NULL_ARGUMENT, "device_count(NULL): %s", clattn_status_string(st));
    ck_assert_str_ne(clattn_last_error(NULL), "");
    st = clattn_device_get(0, NULL);
    ck_assert_msg(st == CLATTN_ERROR_NULL_ARGUMENT, "device_get(0, NULL): %s", clattn_status_string(st));
    ck_assert_str_ne(clattn_last_error(NULL), "");
    st = clattn_device_select("0:0", NULL);
    ck_assert_msg(st == CLATTN_ERROR_NULL_ARGUMENT, "device_select(\"0:0\", NULL): %s",
                  clattn_status_string(st));
    ck_assert_str_ne(clattn_last_error(NULL), "");

    size_t count = 0;
    ck_assert(clattn_device_count(&count) == CLATTN_SUCCESS);
    fill_info_sentinel(&info);
    st = clattn_device_get(count, &info);
    ck_assert_msg(st != CLATTN_SUCCESS, "device_get(count) succeeded");
    ck_assert_msg(info_is_sentinel(&info), "device_get(count) wrote its output");
    ck_assert_str_ne(clattn_last_error(NULL), "");
    st = clattn_device_get(SIZE_MAX, &info);
    ck_assert_msg(st != CLATTN_SUCCESS, "device_get(SIZE_MAX) succeeded");

    clattn_context *ctx = NULL;
    st = clattn_context_create(NULL, tu_dev_spec[0]);
    ck_assert_msg(st == CLATTN_ERROR_NULL_ARGUMENT, "context_create(NULL, ...): %s",
                  clattn_status_string(st));
    ck_assert_str_ne(clattn_last_error(NULL), "");
    st = clattn_context_create(&ctx, "99:99");
    ck_assert_msg(st == CLATTN_ERROR_DEVICE_NOT_FOUND, "context_create(\"99:99\"): %s",
                  clattn_status_string(st));
    ck_assert_msg(ctx == NULL, "context_create(\"99:99\") produced a context");
    ck_assert_str_ne(clattn_last_error(NULL), "");
}
END_TEST

START_TEST(test_device_not_found)
{
    static const char *const specs[] = {"99:99", "no-such-device-xyz", "0:99", "99:0"};
    const char *spec = specs[_i];
    tu_set_label("device_select(\"%s\")", spec);
    clattn_device_info info;
    fill_info_sentinel(&info);
    clattn_status st = clattn_device_select(spec, &info);
    ck_assert_msg(st == CLATTN_ERROR_DEVICE_NOT_FOUND, "%s: %s", tu_label(), clattn_status_string(st));
    ck_assert_msg(info_is_sentinel(&info), "%s wrote its output", tu_label());
    const char *e = clattn_last_error(NULL);
    ck_assert_msg(e && e[0], "%s: last_error empty", tu_label());
    /* the message lists the devices that do exist */
    ck_assert_msg(strstr(e, tu_dev[0].name) != NULL,
                  "%s: last_error does not list device \"%s\": \"%s\"", tu_label(), tu_dev[0].name, e);
}
END_TEST

START_TEST(test_device_select_specs)
{
    size_t dev = (size_t)_i;
    tu_set_label("device_select for device %s (%s)", tu_dev_spec[dev], tu_dev[dev].name);
    clattn_device_info info;
    memset(&info, 0, sizeof info);
    clattn_status st = clattn_device_select(tu_dev_spec[dev], &info);
    ck_assert_msg(st == CLATTN_SUCCESS, "%s: \"%s\": %s", tu_label(), tu_dev_spec[dev],
                  clattn_last_error(NULL));
    ck_assert_msg(info.device == tu_dev[dev].device && info.platform == tu_dev[dev].platform,
                  "%s: \"P:D\" picked another device", tu_label());
    ck_assert_uint_eq(info.platform_index, tu_dev[dev].platform_index);
    ck_assert_uint_eq(info.device_index, tu_dev[dev].device_index);
    ck_assert_str_eq(info.name, tu_dev[dev].name);

    /* case-insensitive name substring: the first alphanumeric run of ≥ 3 characters, upper-cased */
    char sub[64] = "";
    const char *nm = tu_dev[dev].name;
    for (size_t i = 0; nm[i] && !sub[0];) {
        size_t j = i;
        while (nm[j] && isalnum((unsigned char)nm[j]))
            j++;
        if (j - i >= 3) {
            size_t take = j - i < sizeof sub - 1 ? j - i : sizeof sub - 1;
            for (size_t t = 0; t < take; t++)
                sub[t] = (char)toupper((unsigned char)nm[i + t]);
            sub[take] = '\0';
        }
        i = nm[j] ? j + 1 : j;
    }
    if (sub[0] && strcmp(sub, "CPU") != 0 && strcmp(sub, "GPU") != 0) {
        memset(&info, 0, sizeof info);
        st = clattn_device_select(sub, &info);
        ck_assert_msg(st == CLATTN_SUCCESS, "%s: substring \"%s\": %s", tu_label(), sub,
                      clattn_last_error(NULL));
        ck_assert_msg(ci_contains(info.name, sub), "%s: substring \"%s\" picked \"%s\"", tu_label(),
                      sub, info.name);
    }

    /* type keywords */
    const char *kw = NULL;
    cl_device_type want = 0;
    if (tu_dev[dev].type & CL_DEVICE_TYPE_CPU) {
        kw = "cpu";
        want = CL_DEVICE_TYPE_CPU;
    } else if (tu_dev[dev].type & CL_DEVICE_TYPE_GPU) {
        kw = "gpu";
        want = CL_DEVICE_TYPE_GPU;
    } else if (tu_dev[dev].type & CL_DEVICE_TYPE_ACCELERATOR) {
        kw = "accelerator";
        want = CL_DEVICE_TYPE_ACCELERATOR;
    }
    if (kw) {
        memset(&info, 0, sizeof info);
        st = clattn_device_select(kw, &info);
        ck_assert_msg(st == CLATTN_SUCCESS, "%s: \"%s\": %s", tu_label(), kw, clattn_last_error(NULL));
        ck_assert_msg(info.type & want, "%s: \"%s\" picked a device of type 0x%lx", tu_label(), kw,
                      (unsigned long)info.type);
    }

    /* the context on this device reports it */
    clattn_context *ctx = tu_ctx[dev];
    ck_assert_msg(clattn_context_device(ctx) == tu_dev[dev].device, "%s: context_device", tu_label());
    ck_assert_ptr_nonnull(clattn_context_cl_context(ctx));
    ck_assert_ptr_nonnull(clattn_context_queue(ctx));
    ck_assert_ptr_nonnull(clattn_context_device_name(ctx));
    ck_assert_str_eq(clattn_context_device_name(ctx), tu_dev[dev].name);
    ck_assert_ptr_nonnull(clattn_last_error(ctx));
    ck_assert_ptr_nonnull(clattn_build_log(ctx));
}
END_TEST

START_TEST(test_device_env)
{
    env_save();
    clattn_device_info info;
    clattn_status st;

    /* default without CLATTN_DEVICE: first GPU, else first device */
    unsetenv("CLATTN_DEVICE");
    size_t first_gpu = SIZE_MAX;
    for (size_t i = 0; i < tu_ndev && first_gpu == SIZE_MAX; i++)
        if (tu_dev[i].type & CL_DEVICE_TYPE_GPU)
            first_gpu = i;
    size_t count = 0;
    ck_assert(clattn_device_count(&count) == CLATTN_SUCCESS);
    if (count == tu_ndev) { /* all devices usable: the indices match */
        size_t want = first_gpu != SIZE_MAX ? first_gpu : 0;
        memset(&info, 0, sizeof info);
        st = clattn_device_select(NULL, &info);
        ck_assert_msg(st == CLATTN_SUCCESS, "select(NULL): %s", clattn_last_error(NULL));
        ck_assert_msg(info.device == tu_dev[want].device, "select(NULL) picked \"%s\", want \"%s\"",
                      info.name, tu_dev[want].name);
        memset(&info, 0, sizeof info);
        st = clattn_device_select("", &info);
        ck_assert_msg(st == CLATTN_SUCCESS, "select(\"\"): %s", clattn_last_error(NULL));
        ck_assert_msg(info.device == tu_dev[want].device, "select(\"\") picked \"%s\"", info.name);
    }

    /* CLATTN_DEVICE=cpu picks a CPU device (when there is one) */
    int have_cpu = 0;
    for (size_t i = 0; i < tu_ndev; i++)
        if (tu_dev[i].type & CL_DEVICE_TYPE_CPU)
            have_cpu = 1;
    if (have_cpu) {
        setenv("CLATTN_DEVICE", "cpu", 1);
        memset(&info, 0, sizeof info);
        st = clattn_device_select(NULL, &info);
        ck_assert_msg(st == CLATTN_SUCCESS, "CLATTN_DEVICE=cpu: %s", clattn_last_error(NULL));
        ck_assert_msg(info.type & CL_DEVICE_TYPE_CPU, "CLATTN_DEVICE=cpu picked \"%s\"", info.name);
        clattn_context *ctx = NULL;
        st = clattn_context_create(&ctx, NULL);
        ck_assert_msg(st == CLATTN_SUCCESS && ctx, "CLATTN_DEVICE=cpu context_create: %s: %s",
                      clattn_status_string(st), clattn_last_error(NULL));
        cl_device_type type = 0;
        clGetDeviceInfo(clattn_context_device(ctx), CL_DEVICE_TYPE, sizeof type, &type, NULL);
        clattn_context_free(ctx);
        ck_assert_msg(type & CL_DEVICE_TYPE_CPU, "CLATTN_DEVICE=cpu context is not on a CPU");
    }

    /* an unusable value makes the default selection fail */
    setenv("CLATTN_DEVICE", "no-such-device-xyz", 1);
    clattn_context *ctx = NULL;
    st = clattn_context_create(&ctx, NULL);
    ck_assert_msg(st == CLATTN_ERROR_DEVICE_NOT_FOUND,
                  "CLATTN_DEVICE=no-such-device-xyz context_create(NULL): %s",
                  clattn_status_string(st));
    ck_assert_msg(ctx == NULL, "a context was produced");
    ck_assert_str_ne(clattn_last_error(NULL), "");
    st = clattn_context_create(&ctx, "");
    ck_assert_msg(st == CLATTN_ERROR_DEVICE_NOT_FOUND, "CLATTN_DEVICE bad, context_create(\"\"): %s",
                  clattn_status_string(st));
    fill_info_sentinel(&info);
    st = clattn_device_select(NULL, &info);
    ck_assert_msg(st == CLATTN_ERROR_DEVICE_NOT_FOUND, "CLATTN_DEVICE bad, select(NULL): %s",
                  clattn_status_string(st));
    ck_assert(info_is_sentinel(&info));

    /* an explicit spec wins over the variable */
    memset(&info, 0, sizeof info);
    st = clattn_device_select(tu_dev_spec[0], &info);
    ck_assert_msg(st == CLATTN_SUCCESS, "explicit spec with bad CLATTN_DEVICE: %s",
                  clattn_last_error(NULL));
    ck_assert(info.device == tu_dev[0].device);

    env_restore();
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* Contexts from the application's OpenCL objects                                                  */
/* ---------------------------------------------------------------------------------------------- */

START_TEST(test_context_from_cl_null)
{
    size_t dev = (size_t)_i;
    tu_set_label("context_create_from_cl NULL arguments on %s", tu_dev_spec[dev]);
    cl_context c = clattn_context_cl_context(tu_ctx[dev]);
    cl_device_id d = clattn_context_device(tu_ctx[dev]);
    cl_command_queue q = clattn_context_queue(tu_ctx[dev]);
    clattn_context *ctx = NULL;
    clattn_status st = clattn_context_create_from_cl(NULL, c, d, q);
    ck_assert_msg(st == CLATTN_ERROR_NULL_ARGUMENT, "ctx out NULL: %s", clattn_status_string(st));
    ck_assert_str_ne(clattn_last_error(NULL), "");
    st = clattn_context_create_from_cl(&ctx, NULL, d, q);
    ck_assert_msg(st == CLATTN_ERROR_NULL_ARGUMENT, "context NULL: %s", clattn_status_string(st));
    ck_assert_str_ne(clattn_last_error(NULL), "");
    st = clattn_context_create_from_cl(&ctx, c, NULL, q);
    ck_assert_msg(st == CLATTN_ERROR_NULL_ARGUMENT, "device NULL: %s", clattn_status_string(st));
    st = clattn_context_create_from_cl(&ctx, c, d, NULL);
    ck_assert_msg(st == CLATTN_ERROR_NULL_ARGUMENT, "queue NULL: %s", clattn_status_string(st));
    ck_assert(ctx == NULL);
}
END_TEST

START_TEST(test_context_from_cl)
{
    size_t dev = (size_t)_i;
    tu_set_label("context_create_from_cl + sdpa on %s", tu_dev_spec[dev]);
    cl_int err;
    cl_device_id d = tu_dev[dev].device;
    cl_context c = clCreateContext(NULL, 1, &d, NULL, NULL, &err);
    ck_assert_msg(err == CL_SUCCESS, "clCreateContext: %d", (int)err);
    cl_command_queue q = clCreateCommandQueue(c, d, 0, &err);
    ck_assert_msg(err == CL_SUCCESS, "clCreateCommandQueue: %d", (int)err);

    clattn_context *ctx = NULL;
    clattn_status st = clattn_context_create_from_cl(&ctx, c, d, q);
    ck_assert_msg(st == CLATTN_SUCCESS && ctx, "%s: %s", clattn_status_string(st),
                  clattn_last_error(NULL));
    ck_assert(clattn_context_cl_context(ctx) == c);
    ck_assert(clattn_context_device(ctx) == d);
    ck_assert(clattn_context_queue(ctx) == q);

    /* the application releases its references at once: clattn's own keep the objects alive */
    clReleaseCommandQueue(q);
    clReleaseContext(c);

    clattn_sdpa_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.batch = 2;
    desc.heads = 3;
    desc.q_len = 7;
    desc.kv_len = 61;
    desc.qk_dim = 8;
    desc.masks.causal = CLATTN_CAUSAL_BOTTOM_RIGHT;
    size_t nq = 2 * 3 * 7 * 8, nk = 2 * 3 * 61 * 8, no = nq, np = 2 * 3 * 7 * 61;
    float *hq = tu_falloc(nq), *hk = tu_falloc(nk), *hv = tu_falloc(nk);
    tu_fill_uniform(hq, nq, 1.0f, 21);
    tu_fill_uniform(hk, nk, 1.0f, 22);
    tu_fill_uniform(hv, nk, 1.0f, 23);
    double *ro = tu_dalloc(no), *rp = tu_dalloc(np);
    ref_sdpa(&desc, hq, hk, hv, NULL, ro, rp, NULL);
    cl_mem mq = tu_dev_alloc(ctx, nq, hq), mk = tu_dev_alloc(ctx, nk, hk),
           mv = tu_dev_alloc(ctx, nk, hv), mo = tu_dev_alloc(ctx, no, NULL),
           mp = tu_dev_alloc(ctx, np, NULL);
    st = clattn_sdpa(ctx, &desc, mq, mk, mv, NULL, mo, mp, NULL);
    ck_assert_msg(st == CLATTN_SUCCESS, "%s: sdpa: %s: %s", tu_label(), clattn_status_string(st),
                  clattn_last_error(ctx));
    tu_finish(ctx);
    check_close_named("out", tu_dev_read_checked(ctx, mo, no, "out"), ro, no, NULL);
    check_close_named("weights", tu_dev_read_checked(ctx, mp, np, "weights"), rp, np, NULL);
    /* the same call through the host variant */
    float *ho = tu_host_alloc(no, NULL);
    st = clattn_sdpa_host(ctx, &desc, hq, hk, hv, NULL, ho, NULL, NULL);
    ck_assert_msg(st == CLATTN_SUCCESS, "%s: sdpa_host: %s", tu_label(), clattn_last_error(ctx));
    check_close_named("host out", ho, ro, no, NULL);
    tu_release_all(); /* the buffers hold the cl_context too */
    clattn_context_free(ctx);
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* Kernel sources: unreadable, and failing to compile                                              */
/* ---------------------------------------------------------------------------------------------- */

static char tmpdir[256] = "";

static void remove_tmpdir(void)
{
    if (!tmpdir[0])
        return;
    DIR *dir = opendir(tmpdir);
    if (dir) {
        struct dirent *e;
        while ((e = readdir(dir)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            char p[1024];
            snprintf(p, sizeof p, "%s/%s", tmpdir, e->d_name);
            unlink(p);
        }
        closedir(dir);
    }
    rmdir(tmpdir);
    tmpdir[0] = '\0';
}

static void make_tmpdir(void)
{
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/clattn-test-XXXXXX", base && base[0] ? base : "/tmp");
    ck_assert_msg(mkdtemp(tmpdir) != NULL, "mkdtemp(%s): %s", tmpdir, strerror(errno));
}

static void copy_file(const char *from, const char *to, const char *append)
{
    FILE *in = fopen(from, "rb");
    ck_assert_msg(in != NULL, "open %s: %s", from, strerror(errno));
    FILE *out = fopen(to, "wb");
    ck_assert_msg(out != NULL, "create %s: %s", to, strerror(errno));
    char buf[8192];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        ck_assert(fwrite(buf, 1, n, out) == n);
    if (append)
        fputs(append, out);
    fclose(in);
    ck_assert(fclose(out) == 0);
}

static void kernel_fixture_teardown(void)
{
    unsetenv("CLATTN_KERNEL_DIR");
    remove_tmpdir();
}

/* A good small sdpa on a new context: returns its status; out stays sentinel on failure. */
/* A small SDPA on a fresh context; `algorithm` picks the path (AUTO runs the fused kernel: no weights
 * are asked for). */
static clattn_status fresh_sdpa_with(clattn_context *ctx, clattn_algorithm algorithm, float **out_host, size_t *no,
                                     double *ref)
{
    clattn_sdpa_desc d;
    memset(&d, 0, sizeof d);
    d.batch = 1;
    d.heads = 1;
    d.q_len = 3;
    d.kv_len = 4;
    d.qk_dim = 2;
    d.algorithm = algorithm;
    float q[6], k[8], v[8];
    tu_fill_uniform(q, 6, 1.0f, 1);
    tu_fill_uniform(k, 8, 1.0f, 2);
    tu_fill_uniform(v, 8, 1.0f, 3);
    if (ref)
        ref_sdpa(&d, q, k, v, NULL, ref, NULL, NULL);
    *no = 6;
    *out_host = tu_host_alloc(6, NULL);
    return clattn_sdpa_host(ctx, &d, q, k, v, NULL, *out_host, NULL, NULL);
}

static clattn_status fresh_sdpa(clattn_context *ctx, float **out_host, size_t *no)
{
    return fresh_sdpa_with(ctx, CLATTN_ALGORITHM_AUTO, out_host, no, NULL);
}

/* Copies every file of CLATTN_SOURCE_CL_DIR into tmpdir, appending a syntax error to `victim`.
 * Returns 0 when the variable is not set (the test is then skipped). */
static int make_broken_kernel_dir(const char *victim)
{
    const char *src = getenv("CLATTN_SOURCE_CL_DIR");
    if (!src || !src[0]) {
        fprintf(stderr, "note: CLATTN_SOURCE_CL_DIR not set, kernel build failure test skipped\n");
        return 0;
    }
    make_tmpdir();
    DIR *dir = opendir(src);
    ck_assert_msg(dir != NULL, "opendir(%s): %s", src, strerror(errno));
    static const char broken[] = "\n__kernel void clattn_broken_on_purpose( { this is not OpenCL C ;\n";
    int found = 0;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        char from[1024], to[1024];
        snprintf(from, sizeof from, "%s/%s", src, e->d_name);
        struct stat sb;
        if (stat(from, &sb) != 0 || !S_ISREG(sb.st_mode))
            continue;
        snprintf(to, sizeof to, "%s/%s", tmpdir, e->d_name);
        int breaks = strcmp(e->d_name, victim) == 0;
        found |= breaks;
        copy_file(from, to, breaks ? broken : NULL);
    }
    closedir(dir);
    ck_assert_msg(found, "%s not found in CLATTN_SOURCE_CL_DIR=%s", victim, src);
    return 1;
}

/* Runs fn with the OpenCL compiler's diagnostics (printed to stderr by some runtimes) silenced. */
static clattn_status quietly(clattn_status (*fn)(clattn_context *, clattn_algorithm, float **, size_t *, double *),
                             clattn_context *ctx, clattn_algorithm algorithm, float **out, size_t *no, double *ref)
{
    fflush(stderr);
    int saved_stderr = dup(2);
    int devnull = open("/dev/null", O_WRONLY);
    if (saved_stderr >= 0 && devnull >= 0)
        dup2(devnull, 2);
    clattn_status st = fn(ctx, algorithm, out, no, ref);
    fflush(stderr);
    if (saved_stderr >= 0 && devnull >= 0)
        dup2(saved_stderr, 2);
    if (saved_stderr >= 0)
        close(saved_stderr);
    if (devnull >= 0)
        close(devnull);
    return st;
}

/* common.cl is part of every program: nothing builds, the call fails with the log available. */
START_TEST(test_kernel_build_failure)
{
    size_t dev = (size_t)_i;
    tu_set_label("kernel build failure on %s", tu_dev_spec[dev]);
    if (!make_broken_kernel_dir("common.cl"))
        return;
    setenv("CLATTN_KERNEL_DIR", tmpdir, 1);
    clattn_context *ctx = NULL;
    clattn_status st = clattn_context_create(&ctx, tu_dev_spec[dev]);
    ck_assert_msg(st == CLATTN_SUCCESS && ctx, "context_create: %s: %s", clattn_status_string(st),
                  clattn_last_error(NULL));
    float *out;
    size_t no;
    st = quietly(fresh_sdpa_with, ctx, CLATTN_ALGORITHM_AUTO, &out, &no, NULL);
    unsetenv("CLATTN_KERNEL_DIR");
    const char *log = clattn_build_log(ctx);
    const char *err = clattn_last_error(ctx);
    int ok_status = st == CLATTN_ERROR_BUILD_FAILED;
    int ok_log = log != NULL && log[0] != '\0';
    int ok_err = err != NULL && err[0] != '\0';
    int untouched = tu_host_all_sentinel(out, no);
    char msg[512];
    snprintf(msg, sizeof msg, "status %s, build log %s, last error \"%.200s\"",
             clattn_status_string(st), ok_log ? "non-empty" : "EMPTY", err ? err : "(null)");
    clattn_context_free(ctx);
    ck_assert_msg(ok_status, "%s: expected CLATTN_ERROR_BUILD_FAILED: %s", tu_label(), msg);
    ck_assert_msg(ok_log, "%s: %s", tu_label(), msg);
    ck_assert_msg(ok_err, "%s: %s", tu_label(), msg);
    ck_assert_msg(untouched, "%s: out written by a failing call", tu_label());
}
END_TEST

/* Only the fused kernel fails to build: AUTO falls back to the staged path with a warning and the
 * right answer; asking for FUSED explicitly is an error. */
START_TEST(test_fused_build_failure_falls_back)
{
    size_t dev = (size_t)_i;
    tu_set_label("fused kernel build failure on %s", tu_dev_spec[dev]);
    if (!make_broken_kernel_dir("flash_attention.cl"))
        return;
    setenv("CLATTN_KERNEL_DIR", tmpdir, 1);
    clattn_context *ctx = NULL;
    clattn_status st = clattn_context_create(&ctx, tu_dev_spec[dev]);
    ck_assert_msg(st == CLATTN_SUCCESS && ctx, "context_create: %s: %s", clattn_status_string(st),
                  clattn_last_error(NULL));
    float *out, *out2;
    size_t no;
    double ref[6];
    clattn_status auto_st = quietly(fresh_sdpa_with, ctx, CLATTN_ALGORITHM_AUTO, &out, &no, ref);
    char warning[512];
    snprintf(warning, sizeof warning, "%s", clattn_last_warning(ctx));
    clattn_status fused_st = quietly(fresh_sdpa_with, ctx, CLATTN_ALGORITHM_FUSED, &out2, &no, NULL);
    unsetenv("CLATTN_KERNEL_DIR");
    int untouched = tu_host_all_sentinel(out2, no);
    clattn_context_free(ctx);
    ck_assert_msg(auto_st == CLATTN_SUCCESS, "%s: AUTO should fall back to the staged path, got %s", tu_label(),
                  clattn_status_string(auto_st));
    ck_assert_msg(warning[0] != '\0', "%s: the fallback left no warning", tu_label());
    check_close_named("out (staged fallback)", out, ref, no, NULL);
    ck_assert_msg(fused_st == CLATTN_ERROR_BUILD_FAILED, "%s: explicit FUSED: expected BUILD_FAILED, got %s",
                  tu_label(), clattn_status_string(fused_st));
    ck_assert_msg(untouched, "%s: out written by a failing call", tu_label());
}
END_TEST

START_TEST(test_kernel_source_missing)
{
    size_t dev = (size_t)_i;
    tu_set_label("CLATTN_KERNEL_DIR without kernel files on %s", tu_dev_spec[dev]);
    make_tmpdir(); /* exists, but empty */
    setenv("CLATTN_KERNEL_DIR", tmpdir, 1);
    clattn_context *ctx = NULL;
    clattn_status st = clattn_context_create(&ctx, tu_dev_spec[dev]);
    clattn_status st2 = CLATTN_SUCCESS;
    float *out = NULL;
    size_t no = 0;
    if (st == CLATTN_SUCCESS)
        st2 = fresh_sdpa(ctx, &out, &no);
    unsetenv("CLATTN_KERNEL_DIR");
    if (st == CLATTN_SUCCESS) {
        const char *err = clattn_last_error(ctx);
        int ok_err = err && err[0];
        int untouched = tu_host_all_sentinel(out, no);
        clattn_context_free(ctx);
        ck_assert_msg(st2 == CLATTN_ERROR_KERNEL_SOURCE, "%s: first call returned %s", tu_label(),
                      clattn_status_string(st2));
        ck_assert_msg(ok_err, "%s: last_error empty", tu_label());
        ck_assert_msg(untouched, "%s: out written by a failing call", tu_label());
    } else {
        /* reading the sources at context creation is acceptable too */
        ck_assert_msg(st == CLATTN_ERROR_KERNEL_SOURCE, "%s: context_create returned %s",
                      tu_label(), clattn_status_string(st));
        ck_assert_str_ne(clattn_last_error(NULL), "");
    }
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* Threads: distinct contexts may be used concurrently; clattn_last_error(NULL) is per thread       */
/* ---------------------------------------------------------------------------------------------- */

typedef struct {
    clattn_context *ctx;
    int seed;
    int ok;
    char msg[256];
} thread_job;

/* No check assertions off the main thread (check is not thread-safe): record the outcome instead. */
static void *thread_sdpa(void *arg)
{
    thread_job *job = arg;
    job->ok = 1;
    for (int it = 0; it < 6 && job->ok; it++) {
        size_t kl[2];
        clattn_sdpa_desc d;
        memset(&d, 0, sizeof d);
        d.batch = 2;
        d.heads = 3;
        d.q_len = 7 + (size_t)(it * 11);
        d.kv_len = 61;
        d.qk_dim = 8;
        d.v_dim = (size_t)(job->seed % 2 ? 21 : 7);
        d.masks.causal = (clattn_causal)(it % 3);
        d.masks.key_lengths = tu_make_key_lengths(it % 2 ? TU_KL_ZERO : TU_KL_VARIED, 2, 61, kl);
        size_t nq = 2 * 3 * d.q_len * 8, nk = 2 * 3 * 61 * 8, nv = 2 * 3 * 61 * d.v_dim,
               no = 2 * 3 * d.q_len * d.v_dim;
        float *q = malloc(nq * sizeof *q), *k = malloc(nk * sizeof *k), *v = malloc(nv * sizeof *v),
              *o = malloc(no * sizeof *o);
        double *ro = malloc(no * sizeof *ro);
        if (!q || !k || !v || !o || !ro) {
            job->ok = 0;
            snprintf(job->msg, sizeof job->msg, "out of memory");
        } else {
            uint64_t seed = (uint64_t)(job->seed * 100 + it);
            tu_fill_uniform(q, nq, 1.0f, seed + 1);
            tu_fill_uniform(k, nk, 1.0f, seed + 2);
            tu_fill_uniform(v, nv, 1.0f, seed + 3);
            clattn_status st = clattn_sdpa_host(job->ctx, &d, q, k, v, NULL, o, NULL, NULL);
            if (st != CLATTN_SUCCESS) {
                job->ok = 0;
                snprintf(job->msg, sizeof job->msg, "iteration %d: %s: %.150s", it,
                         clattn_status_string(st), clattn_last_error(job->ctx));
            } else {
                ref_sdpa(&d, q, k, v, NULL, ro, NULL, NULL);
                for (size_t i = 0; i < no && job->ok; i++)
                    if (!(fabs((double)o[i] - ro[i]) <= TU_ATOL + TU_RTOL * fabs(ro[i]))) {
                        job->ok = 0;
                        snprintf(job->msg, sizeof job->msg,
                                 "iteration %d: out[%zu] = %.9g, fp64 reference %.17g", it, i,
                                 (double)o[i], ro[i]);
                    }
            }
        }
        free(q);
        free(k);
        free(v);
        free(o);
        free(ro);
    }
    return NULL;
}

START_TEST(test_threads_contexts)
{
    size_t dev = (size_t)_i;
    tu_set_label("two contexts on %s used from two threads at once", tu_dev_spec[dev]);
    clattn_context *second = NULL;
    clattn_status st = clattn_context_create(&second, tu_dev_spec[dev]);
    ck_assert_msg(st == CLATTN_SUCCESS, "%s: context_create: %s", tu_label(), clattn_last_error(NULL));
    thread_job jobs[2] = {{tu_ctx[dev], 1, 0, ""}, {second, 2, 0, ""}};
    pthread_t th[2];
    int started[2] = {0, 0};
    for (int t = 0; t < 2; t++)
        started[t] = pthread_create(&th[t], NULL, thread_sdpa, &jobs[t]) == 0;
    for (int t = 0; t < 2; t++)
        if (started[t])
            pthread_join(th[t], NULL);
    clattn_context_free(second);
    for (int t = 0; t < 2; t++) {
        ck_assert_msg(started[t], "%s: pthread_create failed", tu_label());
        ck_assert_msg(jobs[t].ok, "%s: thread %d: %s", tu_label(), t, jobs[t].msg);
    }
}
END_TEST

static void *thread_last_error(void *arg)
{
    char *out = arg;
    const char *before = clattn_last_error(NULL);
    snprintf(out, 256, "%s", before ? before : "(null)");
    clattn_device_info info;
    (void)clattn_device_select("no-such-device-in-thread", &info); /* must not touch main's message */
    return NULL;
}

START_TEST(test_threads_last_error)
{
    clattn_device_info info;
    ck_assert(clattn_device_select("99:99", &info) == CLATTN_ERROR_DEVICE_NOT_FOUND);
    char main_msg[512];
    snprintf(main_msg, sizeof main_msg, "%s", clattn_last_error(NULL));
    ck_assert_msg(main_msg[0] != '\0', "last_error(NULL) empty after a failed device_select");
    char seen[256] = "unset";
    pthread_t th;
    ck_assert(pthread_create(&th, NULL, thread_last_error, seen) == 0);
    pthread_join(th, NULL);
    ck_assert_msg(seen[0] == '\0',
                  "a new thread's clattn_last_error(NULL) should be \"\" but is \"%s\"", seen);
    ck_assert_msg(strcmp(clattn_last_error(NULL), main_msg) == 0,
                  "another thread's failure replaced this thread's last error: \"%s\"",
                  clattn_last_error(NULL));
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */

static void add_loop(Suite *s, const char *name, const TTest *fn, size_t n)
{
    TCase *tc = tu_tcase(name);
    tcase_add_loop_test(tc, fn, 0, (int)n);
    suite_add_tcase(s, tc);
}

static Suite *make_suite(void)
{
    Suite *s = suite_create("validation");
    add_loop(s, "sdpa_bad", test_sdpa_bad, N_SDPA_BAD * tu_ndev);
    add_loop(s, "sdpa_host_bad", test_sdpa_host_bad, N_SDPA_HOST_BAD * tu_ndev);
    add_loop(s, "score_bad", test_score_bad, N_SCORE_BAD * tu_ndev);
    add_loop(s, "mha_bad", test_mha_bad, N_MHA_BAD * tu_ndev);
    add_loop(s, "mha_host_bad", test_mha_host_bad, N_MHA_HOST_BAD * tu_ndev);
    add_loop(s, "projection_bad", test_projection_bad, N_PROJ_BAD * tu_ndev);
    add_loop(s, "softmax_bad", test_softmax_bad, N_SOFTMAX_BAD * tu_ndev);
    add_loop(s, "weighted_sum_bad", test_wsum_bad, N_WSUM_BAD * tu_ndev);

    TCase *tc = tu_tcase("good_calls");
    tcase_add_loop_test(tc, test_sdpa_good, 0, (int)tu_ndev);
    tcase_add_loop_test(tc, test_mha_good, 0, (int)tu_ndev);
    tcase_add_loop_test(tc, test_projection_good, 0, (int)tu_ndev);
    tcase_add_loop_test(tc, test_softmax_good, 0, (int)tu_ndev);
    tcase_add_loop_test(tc, test_wsum_good, 0, (int)tu_ndev);
    suite_add_tcase(s, tc);

    tc = tu_tcase("status_version");
    tcase_add_test(tc, test_status_strings);
    tcase_add_test(tc, test_version);
    suite_add_tcase(s, tc);

    tc = tcase_create("devices");
    tcase_add_checked_fixture(tc, NULL, env_restore);
    tcase_add_test(tc, test_device_null_args);
    tcase_add_loop_test(tc, test_device_not_found, 0, 4);
    tcase_add_loop_test(tc, test_device_select_specs, 0, (int)tu_ndev);
    tcase_add_test(tc, test_device_env);
    suite_add_tcase(s, tc);

    tc = tu_tcase("context_from_cl");
    tcase_add_loop_test(tc, test_context_from_cl_null, 0, (int)tu_ndev);
    tcase_add_loop_test(tc, test_context_from_cl, 0, (int)tu_ndev);
    suite_add_tcase(s, tc);

    tc = tu_tcase("threads");
    tcase_add_loop_test(tc, test_threads_contexts, 0, (int)tu_ndev);
    tcase_add_test(tc, test_threads_last_error);
    suite_add_tcase(s, tc);

    tc = tu_tcase("kernel_sources");
    tcase_add_checked_fixture(tc, NULL, kernel_fixture_teardown);
    tcase_add_loop_test(tc, test_kernel_build_failure, 0, (int)tu_ndev);
    tcase_add_loop_test(tc, test_fused_build_failure_falls_back, 0, (int)tu_ndev);
    tcase_add_loop_test(tc, test_kernel_source_missing, 0, (int)tu_ndev);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_main(make_suite); }
