/*
 * The backward pass in reproducible arithmetic (clattn_sdpa_backward with desc.arithmetic =
 * CLATTN_ARITHMETIC_REPRODUCIBLE; issue 41) on every device: for each case, the reproducible forward's out and lse,
 * then dQ, dK, dV (and the sinks' gradient) —
 *  1. against the fp64 reference backward within test_backward.c's tolerance (16 float32 ulps of the tensor's
 *     largest entry, plus half a unit of a 16-bit type), the same bits on a second run and whatever desc.algorithm
 *     asks, and a fingerprint of the bits equal to tests/data/reproducible_backward_hashes.txt's (recorded on PoCL:
 *     rusticl and oclgrind must give its bits; CLATTN_TEST_WRITE_HASHES=FILE writes the lines);
 *  2. under five other tunings: the same fingerprints.
 */
#include "test_util.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct bcase {
    const char *name;
    size_t B, H, KVH, L, S, D, DV;
    clattn_causal causal;
    int key_lengths, window, softcap, sinks, alibi;
    clattn_dtype type; /* Q, K, V, O and the gradients */
    int tiny;          /* peaked rows (weights and dS below 2^-40) and entries below 2^-40, near FLT_MIN, subnormal */
} bcase;

static const bcase cases[] = {
    {"plain B 2 H 3 L 13 S 21 D 24", 2, 3, 3, 13, 21, 24, 24, NONE, 0, 0, 0, 0, 0, CLATTN_FLOAT32, 0},
    {"GQA 6/2 L 9 S 40 D 32 Dv 16", 1, 6, 2, 9, 40, 32, 16, NONE, 0, 0, 0, 0, 0, CLATTN_FLOAT32, 0},
    {"causal top-left L = S = 33", 1, 2, 1, 33, 33, 16, 16, TL, 0, 0, 0, 0, 0, CLATTN_FLOAT32, 0},
    {"causal bottom-right L 7 S 50, key lengths", 2, 2, 2, 7, 50, 16, 16, BR, 1, 0, 0, 0, 0, CLATTN_FLOAT32, 0},
    {"window 9, causal", 1, 2, 2, 30, 30, 16, 16, TL, 0, 1, 0, 0, 0, CLATTN_FLOAT32, 0},
    {"soft-capping and sinks", 1, 3, 3, 8, 25, 16, 16, NONE, 0, 0, 1, 1, 0, CLATTN_FLOAT32, 0},
    {"ALiBi, GQA 4/2", 1, 4, 2, 10, 20, 8, 8, BR, 0, 0, 0, 0, 1, CLATTN_FLOAT32, 0},
    {"decode L 1 S 90", 2, 4, 1, 1, 90, 32, 32, NONE, 1, 0, 0, 0, 0, CLATTN_FLOAT32, 0},
    {"float16", 1, 2, 2, 11, 19, 16, 16, TL, 0, 0, 0, 0, 0, CLATTN_FLOAT16, 0},
    {"bfloat16, sinks", 1, 2, 1, 6, 23, 16, 16, NONE, 0, 0, 0, 1, 0, CLATTN_BFLOAT16, 0},
    {"tiny entries and weights, causal", 1, 2, 1, 37, 45, 24, 24, BR, 0, 0, 0, 0, 0, CLATTN_FLOAT32, 1},
};
#define N_CASES (sizeof cases / sizeof cases[0])

/* (…x2: the keys-in-lanes kernel, VEC 4 and 8; …x1 and the GPU class: the row kernels) */
static const char *const tunings[] = {"fused=64x64x4x0x1", "fused=16x32x2x4x2", "fused=32x16x1x1x1",
                                      "fused=8x128x3x8x2", "class=gpu"};
#define N_TUNINGS (sizeof tunings / sizeof tunings[0])
/* CLATTN_TEST_REPRODUCIBLE_SUBSET=1 (the work-group-limited reruns of .ci/run): two of the tunings. */
static size_t tunings_run = N_TUNINGS;

/* One case's host arrays (in its type) and results. */
typedef struct run_state {
    clattn_sdpa_desc d;
    tu_variants var;
    size_t lengths[4];
    tu_typed q, k, v, dout;
    size_t nq, nk, nv, no, nl, bytes;
    void *out, *dq, *dk, *dv;
    float *lse, dsinks[8];
} run_state;

static void make(const bcase *c, run_state *r, uint64_t seed)
{
    memset(r, 0, sizeof *r);
    r->d = tu_sdpa_desc(c->B, c->H, c->L, c->S, c->D, c->DV);
    r->d.kv_heads = c->KVH;
    for (size_t b = 0; b < c->B; b++)
        r->lengths[b] = c->S - (b * 5) % (c->S / 2 + 1);
    tu_variants_apply(&r->d, &r->var, c->causal, c->key_lengths ? r->lengths : NULL, NULL, c->window ? 9 : -2,
                      c->sinks, c->alibi);
    if (c->softcap)
        r->d.softcap = 3.0f;
    r->d.q_dtype = r->d.k_dtype = r->d.v_dtype = r->d.out_dtype = c->type;
    r->d.arithmetic = CLATTN_ARITHMETIC_REPRODUCIBLE;
    r->nq = c->B * c->H * c->L * c->D, r->nk = c->B * c->KVH * c->S * c->D, r->nv = c->B * c->KVH * c->S * c->DV;
    r->no = c->B * c->H * c->L * c->DV, r->nl = c->B * c->H * c->L;
    r->bytes = c->type == CLATTN_FLOAT32 ? 4 : 2;
    float *q = tu_falloc(r->nq), *k = tu_falloc(r->nk), *v = tu_falloc(r->nv), *dout = tu_falloc(r->no);
    tu_fill_uniform(q, r->nq, 1.5f, seed + 1);
    tu_fill_uniform(k, r->nk, 1.0f, seed + 2);
    tu_fill_uniform(v, r->nv, 1.0f, seed + 3);
    tu_fill_uniform(dout, r->no, 1.0f, seed + 4);
    if (c->tiny) { /* (the cut below 2^-40, the flushes, and the sums' grid: cl/backward.cl) */
        for (size_t e = 0; e < r->nq; e++)
            q[e] *= 12.0f;
        for (size_t e = 0; e < r->nk; e += 7)
            k[e] = e % 2 ? 1e-13f : -2e-38f;
        for (size_t e = 3; e < r->nv; e += 11)
            v[e] = e % 2 ? 1e-39f : 5e-13f;
        for (size_t e = 0; e < r->no; e += 5)
            dout[e] = -3e-13f;
    }
    r->q = tu_typed_make(c->type, q, r->nq, c->D);
    r->k = tu_typed_make(c->type, k, r->nk, c->D);
    r->v = tu_typed_make(c->type, v, r->nv, c->DV);
    r->dout = tu_typed_make(c->type, dout, r->no, c->DV);
}

/* The reproducible forward, then the backward, on ctx. */
static void run(clattn_context *ctx, run_state *r, clattn_algorithm algo)
{
    clattn_sdpa_desc d = r->d;
    d.algorithm = algo;
    r->out = tu_track_malloc(r->no * r->bytes), r->lse = tu_falloc(r->nl);
    r->dq = tu_track_malloc(r->nq * r->bytes), r->dk = tu_track_malloc(r->nk * r->bytes);
    r->dv = tu_track_malloc(r->nv * r->bytes);
    TU_ASSERT_OK(clattn_sdpa_host(ctx, &d, r->q.bytes, r->k.bytes, r->v.bytes, NULL, r->out, NULL, r->lse), ctx,
                 "the reproducible forward");
    TU_ASSERT_OK(clattn_sdpa_backward_host(ctx, &d, r->q.bytes, r->k.bytes, r->v.bytes, NULL, r->out, r->lse,
                                           r->dout.bytes, r->dq, r->dk, r->dv, r->d.sinks ? r->dsinks : NULL),
                 ctx, "the reproducible backward");
}

static uint64_t fingerprint(const run_state *r)
{
    uint64_t h = tu_fnv(r->dq, r->nq * r->bytes, TU_FNV_START);
    h = tu_fnv(r->dk, r->nk * r->bytes, h);
    h = tu_fnv(r->dv, r->nv * r->bytes, h);
    return tu_fnv(r->dsinks, sizeof r->dsinks, h);
}

START_TEST(test_cases)
{
    const bcase *c = &cases[TU_CASE(_i)];
    const size_t dev = TU_DEVICE(_i);
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("reproducible backward, %s, on %s", c->name, tu_dev_spec[dev]);
    run_state *r = tu_track_malloc(sizeof *r);
    make(c, r, 900 + TU_CASE(_i) * 10);
    run(ctx, r, CLATTN_ALGORITHM_AUTO);
    /* As accurate as the default arithmetic: the fp64 reference from the stored values and the output given. */
    double *rq = tu_dalloc(r->nq), *rk = tu_dalloc(r->nk), *rv = tu_dalloc(r->nv);
    ref_sdpa_backward_given_out(&r->d, r->q.values, r->k.values, r->v.values, NULL,
                                tu_typed_widen(r->out, c->type, r->no), r->dout.values, rq, rk, rv);
    tu_check_gradient("dq", tu_typed_widen(r->dq, c->type, r->nq), rq, r->nq, c->type, 0.0);
    tu_check_gradient("dk", tu_typed_widen(r->dk, c->type, r->nk), rk, r->nk, c->type, 0.0);
    tu_check_gradient("dv", tu_typed_widen(r->dv, c->type, r->nv), rv, r->nv, c->type, 0.0);
    /* The same bits on a second run and whatever desc.algorithm asks. */
    const uint64_t h = fingerprint(r);
    static const clattn_algorithm algos[2] = {CLATTN_ALGORITHM_FUSED, CLATTN_ALGORITHM_STAGED};
    for (int a = 0; a < 2; a++) {
        run_state *again = tu_track_malloc(sizeof *again);
        make(c, again, 900 + TU_CASE(_i) * 10);
        run(ctx, again, algos[a]);
        ck_assert_msg(fingerprint(again) == h, "%s: desc.algorithm %s changed the bits", tu_label(),
                      tu_algorithm_name(algos[a]));
    }
    tu_expect_fingerprint("reproducible_backward_hashes.txt", c->name, h);
}
END_TEST

/* 2. Each tuning in a context of its own, over every case: the recorded fingerprints. */
START_TEST(test_tunings)
{
    const size_t t = (size_t)_i % tunings_run, dev = (size_t)_i / tunings_run;
    if (tu_recording())
        return; /* (recording the fingerprints: test_cases' run is the one recorded) */
    clattn_context *other = tu_tuned_context(dev, tunings[t]);
    for (size_t c = 0; c < N_CASES; c++) {
        tu_set_label("reproducible backward, %s, tuning \"%s\", on %s", cases[c].name, tunings[t], tu_dev_spec[dev]);
        run_state *r = tu_track_malloc(sizeof *r);
        make(&cases[c], r, 900 + c * 10);
        run(other, r, CLATTN_ALGORITHM_AUTO);
        tu_expect_fingerprint("reproducible_backward_hashes.txt", cases[c].name, fingerprint(r));
    }
    clattn_context_free(other);
}
END_TEST

static Suite *reproducible_backward_suite(void)
{
    const char *subset = getenv("CLATTN_TEST_REPRODUCIBLE_SUBSET");
    if (subset && strcmp(subset, "1") == 0)
        tunings_run = 2;
    Suite *s = suite_create("reproducible_backward");
    tu_add_loop(s, "cases", test_cases, N_CASES * tu_ndev);
    tu_add_loop(s, "tunings", test_tunings, tunings_run * tu_ndev);
    return s;
}

int main(void) { return tu_main(reproducible_backward_suite); }
