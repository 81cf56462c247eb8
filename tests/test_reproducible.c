/*
 * Reproducible arithmetic (desc.arithmetic = CLATTN_ARITHMETIC_REPRODUCIBLE; issue 41) on every device:
 *  1. cases: odd shapes, GQA, both causal kinds, query offsets, key lengths, a window, float and bool masks,
 *     soft-capping, sinks, ALiBi, logit scales, float16/bfloat16 tensors, an int8 cache, rows that see no key —
 *     out and lse against the fp64 reference within the usual tolerance (reproducible is not less accurate),
 *     the same bits whatever desc.algorithm asks (auto, fused, staged, decode), and a fingerprint of the bits
 *     equal to tests/data/reproducible_hashes.txt's — written once on PoCL, so rusticl and oclgrind (and any
 *     device that runs the suite) must give PoCL's bits (CLATTN_TEST_WRITE_HASHES=FILE writes the file);
 *  2. tunings: contexts with other fused and decode tunings give the same bits;
 *  3. batch invariance: one row alone, in a batch of 8, in a prefill of 300 rows (causal) and as a decode
 *     step, in a ragged batch of 6 sequences, through a paged cache of shuffled blocks — the same bits;
 *  4. CLATTN_REPRODUCIBLE=1 makes a context's every call reproducible;
 *  5. the calls that do not take it yet refuse it, naming it.
 */
#define _POSIX_C_SOURCE 200809L /* (setenv) */
#include "test_util.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct rcase {
    const char *name;
    size_t B, H, KVH, L, S, D, DV;
    clattn_causal causal;
    int offsets, key_lengths, window, mask, softcap, sinks, alibi, logit;
    clattn_dtype qo, kv;
    int special; /* values that reach the arithmetic's edges (enum special) */
    float scale; /* desc.scale (0: 1/√D) */
} rcase;

/* Inputs at the edges: K rows with entries under 2^-40 and V entries under 2^-30 (the kernel's careful steps), K
 * and V rows near FLT_MIN (partial sums that would be subnormal: what a flushing device and one that keeps them
 * would compute differently without the cuts), subnormal Q/K/V entries (cut to 0 on every device), large values
 * (peaked rows: most weights underflow), ±inf V rows at the keys an (L,S) mask hides from every row (weights of 0
 * that must add nothing), every K row near FLT_MIN (under a scale of 1e30 every score ~2^-23: each partial sum's cut
 * shows), K rows whose dot product's chains 0 and 4 cancel to 2^-149 in the tree's first sum (Q all 1, halved by
 * the score's split under a scale of 1e38), which the careful path cuts to 0: the next sum is chain 2, just above
 * FLT_MIN, where without that cut it would be a unit more — which scores of ~2.35 show. */
enum special { PLAIN, SMALL_K, SMALL_V, SUBNORMAL, LARGE, SMALL_ALL, TINY_ROWS, INF_HIDDEN, TINY_K, TREE_CANCEL };

#define F32 CLATTN_FLOAT32
#define F16 CLATTN_FLOAT16
#define BF16 CLATTN_BFLOAT16
#define I8 CLATTN_INT8
/* (Every case keeps keys × (1.5·(D + Dv) + 16) within 60000: Mesa llvmpipe runs them all — see test_cases.) */
static const rcase cases[] = {
    {"plain B 2 H 3 L 17 S 29 D 24", 2, 3, 3, 17, 29, 24, 24, NONE, 0, 0, 0, 0, 0, 0, 0, 0, F32, F32, PLAIN, 0},
    {"GQA 8/2 L 5 S 300 D 64 Dv 40", 1, 8, 2, 5, 300, 64, 40, NONE, 0, 0, 0, 0, 0, 0, 0, 0, F32, F32, PLAIN, 0},
    {"causal top-left L = S = 70", 2, 2, 1, 70, 70, 32, 32, TL, 0, 0, 0, 0, 0, 0, 0, 0, F32, F32, PLAIN, 0},
    {"causal bottom-right L 9 S 130", 1, 4, 2, 9, 130, 16, 16, BR, 0, 0, 0, 0, 0, 0, 0, 0, F32, F32, PLAIN, 0},
    {"bottom-right L 40 > S 11 (rows without keys)", 2, 2, 2, 40, 11, 8, 8, BR, 0, 0, 0, 0, 0, 0, 0, 0, F32, F32, PLAIN, 0},
    {"decode L 1 S 250, offsets and key lengths", 3, 4, 1, 1, 250, 64, 64, TL, 1, 1, 0, 0, 0, 0, 0, 0, F32, F32, PLAIN, 0},
    {"window 13, causal, L = S = 90", 1, 2, 2, 90, 90, 16, 24, TL, 0, 0, 1, 0, 0, 0, 0, 0, F32, F32, PLAIN, 0},
    {"float mask (B,H,L,S) with -inf", 2, 2, 2, 12, 33, 16, 16, NONE, 0, 0, 0, 1, 0, 0, 0, 0, F32, F32, PLAIN, 0},
    {"bool mask", 1, 3, 3, 7, 45, 8, 16, NONE, 0, 0, 0, 2, 0, 0, 0, 0, F32, F32, PLAIN, 0},
    {"soft-capping", 2, 2, 1, 11, 50, 32, 32, NONE, 0, 0, 0, 0, 1, 0, 0, 0, F32, F32, PLAIN, 0},
    {"sinks", 1, 4, 4, 6, 20, 16, 16, TL, 0, 0, 0, 0, 0, 1, 0, 0, F32, F32, PLAIN, 0},
    {"ALiBi and logit scales", 2, 4, 2, 13, 40, 16, 16, TL, 0, 0, 0, 0, 0, 0, 1, 1, F32, F32, PLAIN, 0},
    {"everything", 2, 4, 2, 15, 61, 24, 16, TL, 1, 1, 1, 1, 1, 1, 1, 1, F32, F32, PLAIN, 0},
    {"float16 Q/K/V/O", 1, 2, 2, 21, 37, 32, 32, NONE, 0, 0, 0, 0, 0, 0, 0, 0, F16, F16, PLAIN, 0},
    {"bfloat16 Q/K/V/O, causal", 2, 2, 1, 19, 19, 16, 16, TL, 0, 0, 0, 0, 0, 0, 0, 0, BF16, BF16, PLAIN, 0},
    {"int8 K/V cache, float16 Q/O, decode", 2, 8, 2, 1, 280, 64, 64, NONE, 0, 1, 0, 0, 0, 0, 0, 0, F16, I8, PLAIN, 0},
    {"head size 128, L 3, S 140", 1, 2, 1, 3, 140, 128, 128, BR, 0, 0, 0, 0, 0, 0, 0, 0, F32, F32, PLAIN, 0},
    {"head size 1 and 200", 1, 1, 1, 5, 17, 1, 200, NONE, 0, 0, 0, 0, 0, 1, 0, 0, F32, F32, PLAIN, 0},
    /* shapes */
    {"L 1 S 1", 1, 1, 1, 1, 1, 16, 16, NONE, 0, 0, 0, 0, 0, 0, 0, 0, F32, F32, PLAIN, 0},
    {"L 2 S 3 D 5 Dv 3", 3, 1, 1, 2, 3, 5, 3, NONE, 0, 0, 0, 0, 0, 0, 0, 0, F32, F32, PLAIN, 0},
    {"L 33 S 15 D 40", 1, 2, 2, 33, 15, 40, 40, NONE, 0, 0, 0, 0, 0, 0, 0, 0, F32, F32, PLAIN, 0},
    {"L 16 S 16 D 16 (one step)", 1, 2, 2, 16, 16, 16, 16, NONE, 0, 0, 0, 0, 0, 0, 0, 0, F32, F32, PLAIN, 0},
    {"L 17 S 17 (a step and one key)", 1, 2, 2, 17, 17, 16, 16, TL, 0, 0, 0, 0, 0, 0, 0, 0, F32, F32, PLAIN, 0},
    {"L 65 S 129 D 48 Dv 56", 1, 2, 1, 65, 129, 48, 56, NONE, 0, 0, 0, 0, 0, 0, 0, 0, F32, F32, PLAIN, 0},
    {"D 80 Dv 96", 1, 2, 2, 9, 100, 80, 96, NONE, 0, 0, 0, 0, 0, 0, 0, 0, F32, F32, PLAIN, 0},
    {"D 256 Dv 8", 1, 1, 1, 3, 60, 256, 8, NONE, 0, 0, 0, 0, 0, 0, 0, 0, F32, F32, PLAIN, 0},
    {"MQA 6/1 L 7 S 77", 2, 6, 1, 7, 77, 32, 32, NONE, 0, 0, 0, 0, 0, 0, 0, 0, F32, F32, PLAIN, 0},
    {"GQA 12/4 causal L = S = 48", 1, 12, 4, 48, 48, 24, 24, TL, 0, 0, 0, 0, 0, 0, 0, 0, F32, F32, PLAIN, 0},
    {"GQA 16/2 decode S 333", 2, 16, 2, 1, 333, 32, 32, NONE, 0, 1, 0, 0, 0, 0, 0, 0, F32, F32, PLAIN, 0},
    {"B 5 L 4 S 50, speculative rows", 5, 2, 2, 4, 50, 16, 16, BR, 0, 1, 0, 0, 0, 0, 0, 0, F32, F32, PLAIN, 0},
    {"scale 0.05", 1, 2, 2, 10, 40, 32, 32, NONE, 0, 0, 0, 0, 0, 0, 0, 0, F32, F32, PLAIN, 0.05f},
    {"scale 3 (peaked rows)", 1, 2, 2, 10, 40, 32, 32, NONE, 0, 0, 0, 0, 0, 0, 0, 0, F32, F32, PLAIN, 3.0f},
    /* masks */
    {"causal top-left L 30 S 50", 2, 2, 2, 30, 50, 16, 16, TL, 0, 0, 0, 0, 0, 0, 0, 0, F32, F32, PLAIN, 0},
    {"causal bottom-right L 50 S 30", 1, 3, 3, 50, 30, 16, 16, BR, 0, 0, 0, 0, 0, 0, 0, 0, F32, F32, PLAIN, 0},
    {"key lengths", 3, 2, 2, 8, 70, 24, 24, NONE, 0, 1, 0, 0, 0, 0, 0, 0, F32, F32, PLAIN, 0},
    {"offsets, causal", 3, 2, 1, 6, 60, 16, 16, TL, 1, 0, 0, 0, 0, 0, 0, 0, F32, F32, PLAIN, 0},
    {"window 13 without causal", 1, 2, 2, 40, 40, 16, 16, NONE, 0, 0, 1, 0, 0, 0, 0, 0, F32, F32, PLAIN, 0},
    {"window, key lengths, bottom-right", 2, 2, 2, 20, 64, 16, 16, BR, 0, 1, 1, 0, 0, 0, 0, 0, F32, F32, PLAIN, 0},
    {"float mask (L,S)", 2, 3, 3, 9, 31, 16, 16, NONE, 0, 0, 0, 3, 0, 0, 0, 0, F32, F32, PLAIN, 0},
    {"rows fully masked (float mask)", 2, 2, 2, 6, 25, 16, 16, NONE, 0, 0, 0, 4, 0, 0, 0, 0, F32, F32, PLAIN, 0},
    {"bool mask, causal, GQA", 1, 4, 2, 12, 36, 16, 16, TL, 0, 0, 0, 2, 0, 0, 0, 0, F32, F32, PLAIN, 0},
    {"float mask and key lengths", 2, 2, 1, 10, 45, 16, 16, NONE, 0, 1, 0, 1, 0, 0, 0, 0, F32, F32, PLAIN, 0},
    /* variants */
    {"soft-capping, causal, GQA", 1, 4, 2, 20, 20, 16, 16, TL, 0, 0, 0, 0, 1, 0, 0, 0, F32, F32, PLAIN, 0},
    {"sinks, decode", 2, 4, 2, 1, 90, 32, 32, NONE, 0, 1, 0, 0, 0, 1, 0, 0, F32, F32, PLAIN, 0},
    {"sinks and soft-capping", 1, 3, 3, 8, 30, 16, 16, NONE, 0, 0, 0, 0, 1, 1, 0, 0, F32, F32, PLAIN, 0},
    {"ALiBi alone", 1, 4, 4, 10, 50, 16, 16, BR, 0, 0, 0, 0, 0, 0, 1, 0, F32, F32, PLAIN, 0},
    {"logit scales alone", 1, 4, 4, 10, 50, 16, 16, NONE, 0, 0, 0, 0, 0, 0, 0, 1, F32, F32, PLAIN, 0},
    {"ALiBi, window, soft-capping", 1, 2, 2, 30, 30, 16, 16, TL, 0, 0, 1, 0, 1, 0, 1, 0, F32, F32, PLAIN, 0},
    {"sinks on rows without keys", 2, 2, 2, 12, 5, 8, 8, BR, 0, 0, 0, 0, 0, 1, 0, 0, F32, F32, PLAIN, 0},
    /* storage types */
    {"float16 Q/O, float32 K/V", 1, 2, 2, 9, 40, 32, 32, NONE, 0, 0, 0, 0, 0, 0, 0, 0, F16, F32, PLAIN, 0},
    {"float32 Q/O, float16 K/V, GQA", 1, 4, 2, 9, 40, 32, 32, TL, 0, 0, 0, 0, 0, 0, 0, 0, F32, F16, PLAIN, 0},
    {"bfloat16 K/V, float32 Q/O", 1, 2, 2, 9, 40, 32, 32, NONE, 0, 0, 0, 0, 0, 0, 0, 0, F32, BF16, PLAIN, 0},
    {"int8 K/V, float32 Q/O, causal", 1, 2, 2, 20, 40, 32, 32, TL, 0, 0, 0, 0, 0, 0, 0, 0, F32, I8, PLAIN, 0},
    {"int8 K/V, bfloat16 Q/O, sinks", 2, 4, 2, 3, 70, 32, 32, NONE, 0, 1, 0, 0, 0, 1, 0, 0, BF16, I8, PLAIN, 0},
    {"float16 everything and a mask", 1, 2, 2, 10, 30, 16, 16, TL, 0, 0, 0, 1, 1, 0, 0, 0, F16, F16, PLAIN, 0},
    {"bfloat16, D 40 Dv 24, key lengths", 2, 2, 2, 7, 50, 40, 24, NONE, 0, 1, 0, 0, 0, 0, 0, 0, BF16, BF16, PLAIN, 0},
    /* values at the arithmetic's edges */
    {"K entries under 2^-40", 1, 2, 2, 10, 64, 32, 32, NONE, 0, 0, 0, 0, 0, 0, 0, 0, F32, F32, SMALL_K, 0},
    {"V entries under 2^-30", 1, 2, 2, 10, 64, 32, 32, NONE, 0, 0, 0, 0, 0, 0, 0, 0, F32, F32, SMALL_V, 0},
    {"small K and V entries, causal", 2, 2, 1, 20, 40, 16, 16, TL, 0, 0, 0, 0, 0, 0, 0, 0, F32, F32, SMALL_ALL, 0},
    {"subnormal Q/K/V entries", 1, 2, 2, 10, 50, 16, 16, NONE, 0, 0, 0, 0, 0, 0, 0, 0, F32, F32, SUBNORMAL, 0},
    {"subnormal entries, sinks, soft-capping", 1, 2, 2, 6, 33, 16, 16, TL, 0, 0, 0, 0, 1, 1, 0, 0, F32, F32, SUBNORMAL, 0},
    {"large values (weights underflow)", 1, 2, 2, 10, 60, 32, 32, NONE, 0, 0, 0, 0, 0, 0, 0, 0, F32, F32, LARGE, 0},
    {"large values, float16", 1, 2, 2, 10, 60, 32, 32, TL, 0, 0, 0, 0, 0, 0, 0, 0, F16, F16, LARGE, 0},
    {"small K entries, int8 cache", 1, 2, 2, 4, 50, 32, 32, NONE, 0, 0, 0, 0, 0, 0, 0, 0, F32, I8, SMALL_ALL, 0},
    {"K and V rows near FLT_MIN, scale 1e30", 1, 2, 2, 12, 48, 16, 16, NONE, 0, 0, 0, 0, 0, 0, 0, 0, F32, F32, TINY_ROWS,
     1e30f},
    {"K and V rows near FLT_MIN, causal, sinks", 2, 2, 1, 9, 40, 32, 32, TL, 0, 0, 0, 0, 0, 1, 0, 0, F32, F32, TINY_ROWS,
     0},
    /* block and FP8 formats (since 0.23; appended: a case's data follows from its place in the list) */
    {"q8_0 K/V, float32 Q/O", 1, 2, 2, 9, 70, 32, 32, NONE, 0, 0, 0, 0, 0, 0, 0, 0, F32, CLATTN_Q8_0, PLAIN, 0},
    {"q4_0 K/V, causal, GQA", 1, 4, 2, 20, 64, 64, 64, TL, 0, 0, 0, 0, 0, 0, 0, 0, F32, CLATTN_Q4_0, PLAIN, 0},
    {"FP8 e4m3 K/V, float16 Q/O, decode", 2, 4, 2, 1, 90, 32, 32, NONE, 0, 1, 0, 0, 0, 0, 0, 0, F16, CLATTN_FP8_E4M3,
     PLAIN, 0},
    {"4-bit groups of 32 K/V, sinks", 1, 2, 1, 6, 50, 32, 32, NONE, 0, 0, 0, 0, 0, 1, 0, 0, F32, CLATTN_U4_G32, PLAIN, 0},
    /* the edges again in decode shapes (since 0.25: at most 4 packed rows a K/V head read K and V in place) */
    {"K entries under 2^-40, decode, GQA", 2, 4, 2, 1, 90, 32, 32, NONE, 0, 0, 0, 0, 0, 0, 0, 0, F32, F32, SMALL_K, 0},
    {"V entries under 2^-30, decode", 1, 2, 2, 1, 70, 32, 24, NONE, 0, 0, 0, 0, 0, 0, 0, 0, F32, F32, SMALL_V, 0},
    {"small K and V entries, L 3, causal", 1, 2, 2, 3, 50, 16, 16, BR, 0, 0, 0, 0, 0, 0, 0, 0, F32, F32, SMALL_ALL, 0},
    {"inf values at hidden keys, decode", 2, 2, 2, 1, 60, 16, 16, NONE, 0, 0, 0, 3, 0, 0, 0, 0, F32, F32, INF_HIDDEN, 0},
    {"K and V rows near FLT_MIN, decode, scale 1e30", 1, 2, 1, 1, 48, 16, 16, NONE, 0, 0, 0, 0, 0, 0, 0, 0, F32, F32,
     TINY_ROWS, 1e30f},
    {"K and V rows near FLT_MIN, L 2, sinks", 2, 2, 2, 2, 40, 32, 32, NONE, 0, 0, 0, 0, 0, 1, 0, 0, F32, F32, TINY_ROWS, 0},
    {"every K row near FLT_MIN, decode, scale 1e30", 2, 2, 1, 1, 40, 16, 16, NONE, 0, 0, 0, 0, 0, 0, 0, 0, F32, F32,
     TINY_K, 1e30f},
    /* the dot product's tree (since 0.26: 8 chains over d, cl/exact_tiles.cl's EXACT_DOT_TREE), its careful sums */
    {"chains cancelling under FLT_MIN, decode, scale 1e38", 1, 2, 1, 1, 40, 16, 16, NONE, 0, 0, 0, 0, 0, 0, 0, 0, F32,
     F32, TREE_CANCEL, 1e38f},
    {"chains cancelling under FLT_MIN, L 7, scale 1e38", 1, 2, 2, 7, 45, 16, 16, NONE, 0, 0, 0, 0, 0, 0, 0, 0, F32, F32,
     TREE_CANCEL, 1e38f},
};
#define N_CASES (sizeof cases / sizeof cases[0])
/* CLATTN_TEST_REPRODUCIBLE_SUBSET=1 (the work-group-limited reruns of .ci/run): every 4th case, two tunings. */
static size_t case_stride = 1, tunings_run = 5;

/* One case's inputs, on the host (the reference's values: the stored types' own) and on the device. */
typedef struct inputs {
    clattn_sdpa_desc d;
    tu_variants var;
    size_t lengths[8];
    long long offsets[8];
    float logit[16];
    const float *mask;
    tu_typed q, k, v;
    cl_mem qm, km, vm, mm, ks, vs;
    size_t nq, nk, nv, no, nl;
} inputs;

/* enum special's values, written over the uniform ones. */
static void edge_values(const rcase *c, float *q, float *k, float *v, size_t nq, size_t nk, size_t nv)
{
    const bool small_k = c->special == SMALL_K || c->special == SMALL_ALL;
    const bool small_v = c->special == SMALL_V || c->special == SMALL_ALL;
    for (size_t row = 0; row < nk / c->D; row++) {
        if (small_k && row % 5 == 1) /* whole rows under 2^-40 */
            for (size_t e = 0; e < c->D; e++)
                k[row * c->D + e] *= 0x1p-42f;
        if (small_k && row % 7 == 3) /* one entry */
            k[row * c->D + row % c->D] = 3e-13f;
    }
    for (size_t row = 0; row < nv / c->DV; row++) {
        if (small_v && row % 4 == 2)
            for (size_t e = 0; e < c->DV; e++)
                v[row * c->DV + e] *= 0x1p-33f;
        if (small_v && row % 6 == 5)
            v[row * c->DV + row % c->DV] = -2e-10f;
    }
    if (c->special == SUBNORMAL)
        for (size_t i = 0; i < nq + nk + nv; i += 11) {
            float *x = i < nq ? q + i : i < nq + nk ? k + (i - nq) : v + (i - nq - nk);
            *x = (i % 2 ? 1.0f : -1.0f) * 3e-39f * (float)(1 + i % 5);
        }
    if (c->special == LARGE)
        for (size_t i = 0; i < nk; i++)
            k[i] *= 300.0f;
    for (size_t i = 0; c->special == TINY_K && i < nk; i++)
        k[i] *= 0x1p-125f;
    for (size_t i = 0; c->special == TREE_CANCEL && i < nq; i++)
        q[i] = 1.0f;
    for (size_t row = 0; c->special == TREE_CANCEL && row < nk / c->D; row++) { /* (q·k: halves of these) */
        float *kr = k + row * c->D;
        for (size_t e = 0; e < c->D; e++)
            kr[e] = 0.0f;
        kr[0] = 0x1.8p-125f;
        kr[4] = -(0x1.8p-125f - 0x1p-148f);
        kr[2] = 0x1p-125f + (float)(row % 7 + 1) * 0x1p-148f; /* (chain 2 above FLT_MIN: not itself cut) */
    }
    for (size_t row = 0; c->special == TINY_ROWS && row < nk / c->D; row++) /* (every third K row, V rows 1 of 3) */
        for (size_t e = 0; e < c->D; e++)
            k[row * c->D + e] *= row % 3 == 0 ? 0x1p-125f : 1.0f;
    for (size_t row = 0; c->special == TINY_ROWS && row < nv / c->DV; row++)
        for (size_t e = 0; e < c->DV; e++)
            v[row * c->DV + e] *= row % 3 == 1 ? 0x1p-124f : 1.0f;
}

/* INF_HIDDEN: V rows of ±inf at the keys the (L,S) mask m hides from every query row. */
static void hide_infinite_values(const rcase *c, const float *m, float *v)
{
    for (size_t j = 0; j < c->S; j++) {
        bool hidden = true;
        for (size_t i = 0; i < c->L; i++)
            hidden = hidden && m[i * c->S + j] == -INFINITY;
        for (size_t row = 0; hidden && row < c->B * c->KVH; row++)
            for (size_t e = 0; e < c->DV; e++)
                v[(row * c->S + j) * c->DV + e] = e % 2 ? -INFINITY : INFINITY;
    }
}

static void make(clattn_context *ctx, const rcase *c, inputs *in, uint64_t seed)
{
    memset(in, 0, sizeof *in);
    in->d = tu_sdpa_desc(c->B, c->H, c->L, c->S, c->D, c->DV);
    in->d.kv_heads = c->KVH;
    for (size_t b = 0; b < c->B; b++) {
        in->lengths[b] = c->S - (b * 7) % (c->S / 2 + 1);
        in->offsets[b] = (long long)(in->lengths[b] - c->L) - (long long)b;
    }
    tu_variants_apply(&in->d, &in->var, c->causal, c->key_lengths ? in->lengths : NULL,
                      c->offsets ? in->offsets : NULL, c->window ? 13 : -2, c->sinks, c->alibi);
    if (c->mask) { /* 1 float (B,H,L,S) with −inf entries, 2 bool, 3 float (L,S), 4 float with rows all −inf */
        size_t n;
        const clattn_mask_layout layout = c->mask == 3 ? CLATTN_MASK_L_S : CLATTN_MASK_B_H_L_S;
        in->var.masks.additive = layout;
        float *m = tu_make_mask(layout, c->B, c->H, c->L, c->S, c->mask == 4 ? TU_MASKF_ROWINF : TU_MASKF_INF,
                                seed + 9, &n);
        in->var.masks.mask_type = c->mask == 2 ? CLATTN_MASK_BOOL : CLATTN_MASK_FLOAT;
        if (c->mask == 2) { /* bool entries, one byte each, and their float meaning for the reference */
            /* rounded up to whole floats: tu_dev_alloc copies (n + 3) / 4 of them */
            unsigned char *bytes = tu_track_malloc((n + 3) / 4 * sizeof(float));
            for (size_t e = 0; e < n; e++)
                bytes[e] = m[e] != -INFINITY, m[e] = bytes[e] ? 0.0f : -INFINITY;
            in->mm = tu_dev_alloc(ctx, (n + 3) / 4, (const float *)bytes);
        } else {
            in->mm = tu_dev_alloc(ctx, n, m);
        }
        in->mask = m;
    }
    for (size_t h = 0; h < c->H && c->logit; h++)
        in->logit[h] = 0.5f + 0.25f * (float)h;
    if (c->logit)
        in->d.logit_scale = in->logit;
    if (c->softcap)
        in->d.softcap = 2.5f;
    in->d.q_dtype = in->d.out_dtype = c->qo;
    in->d.k_dtype = in->d.v_dtype = c->kv;
    in->nq = c->B * c->H * c->L * c->D, in->nk = c->B * c->KVH * c->S * c->D, in->nv = c->B * c->KVH * c->S * c->DV;
    in->no = c->B * c->H * c->L * c->DV, in->nl = c->B * c->H * c->L;
    float *q = tu_falloc(in->nq), *k = tu_falloc(in->nk), *v = tu_falloc(in->nv);
    tu_fill_uniform(q, in->nq, 1.5f, seed + 1);
    tu_fill_uniform(k, in->nk, 1.0f, seed + 2);
    tu_fill_uniform(v, in->nv, 1.0f, seed + 3);
    if (c->scale != 0.0f)
        in->d.scale = c->scale;
    edge_values(c, q, k, v, in->nq, in->nk, in->nv);
    if (c->special == INF_HIDDEN)
        hide_infinite_values(c, in->mask, v);
    in->q = tu_typed_make(c->qo, q, in->nq, c->D);
    in->k = tu_typed_make(c->kv, k, in->nk, c->D);
    in->v = tu_typed_make(c->kv, v, in->nv, c->DV);
    in->qm = tu_typed_upload(ctx, &in->q), in->km = tu_typed_upload(ctx, &in->k), in->vm = tu_typed_upload(ctx, &in->v);
    in->d.k_scales = tu_typed_scales(ctx, &in->k), in->d.v_scales = tu_typed_scales(ctx, &in->v);
    in->d.arithmetic = CLATTN_ARITHMETIC_REPRODUCIBLE;
}

static size_t out_bytes(const inputs *in) { return in->no * (in->d.out_dtype == F32 ? 4 : 2); }

/* The call's out (its type's bytes; *o its buffer) and lse, read back raw. */
static void run(clattn_context *ctx, const inputs *in, clattn_algorithm algo, cl_mem *o, unsigned char **out,
                float **lse)
{
    clattn_sdpa_desc d = in->d;
    d.algorithm = algo;
    *o = tu_dev_alloc(ctx, (out_bytes(in) + 3) / 4, NULL);
    cl_mem l = tu_dev_alloc(ctx, in->nl, NULL);
    TU_ASSERT_OK(clattn_sdpa(ctx, &d, in->qm, in->km, in->vm, in->mm, *o, NULL, l), ctx, "clattn_sdpa, reproducible");
    *out = (unsigned char *)tu_dev_read_checked(ctx, *o, (out_bytes(in) + 3) / 4, "out");
    *lse = tu_dev_read_checked(ctx, l, in->nl, "lse");
}

/* A case's fingerprint: FNV-1a over its out's bytes, then its lse's. */
static uint64_t fingerprint(const inputs *in, const unsigned char *out, const float *lse)
{
    return tu_fnv(lse, in->nl * 4, tu_fnv(out, out_bytes(in), TU_FNV_START));
}

START_TEST(test_cases)
{
    const size_t index = TU_CASE(_i) * case_stride;
    const rcase *c = &cases[index];
    const size_t dev = TU_DEVICE(_i);
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("reproducible, %s, on %s", c->name, tu_dev_spec[dev]);
    inputs *in = tu_track_malloc(sizeof *in);
    make(ctx, c, in, 700 + index * 10);
    /* Mesa's llvmpipe stops a work-item's loops after 65535 iterations, and longer rows are refused there
     * (test_refusals): every case stays within, so that every implementation runs every case. */
    ck_assert_msg((double)c->S * (1.5 * (double)(c->D + c->DV) + 16.0) <= 60000.0, "%s: too long for llvmpipe", c->name);
    unsigned char *out;
    float *lse;
    cl_mem o;
    run(ctx, in, CLATTN_ALGORITHM_AUTO, &o, &out, &lse);
    /* As accurate as the default arithmetic: the fp64 reference on the stored values. */
    double *ro = tu_dalloc(in->no), *rl = tu_dalloc(in->nl);
    clattn_sdpa_desc rd = in->d;
    ref_sdpa(&rd, in->q.values, in->k.values, in->v.values, in->mask, ro, NULL, rl);
    const float *got = tu_typed_read(ctx, o, c->qo, in->no);
    tu_check_typed("out", got, ro, in->no, c->qo, NULL);
    check_close_named("lse", lse, rl, in->nl, NULL);
    /* Every algorithm: the same bits. */
    static const clattn_algorithm algos[3] = {CLATTN_ALGORITHM_FUSED, CLATTN_ALGORITHM_STAGED, CLATTN_ALGORITHM_DECODE};
    for (int a = 0; a < 3; a++) {
        unsigned char *o2;
        float *l2;
        cl_mem unused;
        run(ctx, in, algos[a], &unused, &o2, &l2);
        ck_assert_msg(memcmp(o2, out, out_bytes(in)) == 0 && memcmp(l2, lse, in->nl * 4) == 0,
                      "%s: desc.algorithm %s changed the bits", tu_label(), tu_algorithm_name(algos[a]));
    }
    /* The fingerprint: PoCL's, on every implementation. */
    const uint64_t h = fingerprint(in, out, lse);
    tu_expect_fingerprint("reproducible_hashes.txt", c->name, h);
}
END_TEST

/* 2. Five other tunings of the fused kernel — tile sizes, work-group sizes, rows a work-item, VEC from 1 to 16, the
 * GPU class — each in a context of its own, over the cases c with c % 5 = the tuning's index (every case under two
 * tunings, its device's and one of these; CLATTN_TEST_TUNINGS=all: every case under every tuning, 5x the time):
 * the recorded fingerprints. */
static const char *const tunings[] = {"fused=64x64x4x0x1", "fused=16x32x2x4x2", "fused=32x16x1x1x1",
                                      "fused=8x128x3x8x1,decode=1x4x32x1x0x4x0", "class=gpu"};
#define N_TUNINGS (sizeof tunings / sizeof tunings[0])

START_TEST(test_tunings)
{
    const size_t t = (size_t)_i % tunings_run, dev = (size_t)_i / tunings_run;
    const char *subset = getenv("CLATTN_TEST_TUNINGS");
    if (tu_recording())
        return; /* (recording the fingerprints: test_cases' run is the one recorded) */
    const bool rotate = !subset || strcmp(subset, "all") != 0;
    clattn_context *other = tu_tuned_context(dev, tunings[t]);
    for (size_t c = rotate ? t : 0; c < N_CASES; c += rotate ? N_TUNINGS : 1) {
        tu_set_label("reproducible, %s, tuning \"%s\", on %s", cases[c].name, tunings[t], tu_dev_spec[dev]);
        inputs *in = tu_track_malloc(sizeof *in);
        make(other, &cases[c], in, 700 + c * 10);
        unsigned char *out;
        float *lse;
        cl_mem o;
        run(other, in, CLATTN_ALGORITHM_AUTO, &o, &out, &lse);
        tu_expect_fingerprint("reproducible_hashes.txt", cases[c].name, fingerprint(in, out, lse));
    }
    clattn_context_free(other); /* (its buffers, tracked, go at the test's end) */
}
END_TEST

/* 3. One row — the last query of a sequence of 300 keys, H 4 over 2, D 32 — computed six ways. */
enum { BH = 4, BKV = 2, BD = 32, BS = 300, BBLOCK = 16 };

static void expect_row(const char *how, const float *out, const float *lse, const float *want_out,
                       const float *want_lse)
{
    ck_assert_msg(memcmp(out, want_out, BH * BD * sizeof(float)) == 0 && memcmp(lse, want_lse, BH * sizeof(float)) == 0,
                  "%s: the row %s differs from the row alone", tu_label(), how);
}

START_TEST(test_batch_invariance)
{
    const size_t dev = _i;
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("reproducible batch invariance on %s", tu_dev_spec[dev]);
    float *kv = tu_falloc(2 * BKV * BS * BD), *qs = tu_falloc(BH * BS * BD); /* K then V (BKV, BS, BD); Q of every row */
    tu_fill_uniform(kv, 2 * BKV * BS * BD, 1.0f, 81);
    tu_fill_uniform(qs, BH * BS * BD, 1.0f, 82);
    const float *k = kv, *v = kv + BKV * BS * BD;
    float *q_last = tu_falloc(BH * BD); /* (H, 1, D): the last query of each head */
    for (size_t h = 0; h < BH; h++)
        memcpy(q_last + h * BD, qs + (h * BS + BS - 1) * BD, BD * sizeof(float));
    clattn_masks m = CLATTN_MASKS_INIT;
    m.causal = CLATTN_CAUSAL_BOTTOM_RIGHT;
    clattn_sdpa_desc d = tu_sdpa_desc(1, BH, 1, BS, BD, BD);
    d.kv_heads = BKV, d.masks = &m, d.arithmetic = CLATTN_ARITHMETIC_REPRODUCIBLE;
    /* Alone: a decode step. */
    cl_mem o = tu_dev_alloc(ctx, BH * BD, NULL), l = tu_dev_alloc(ctx, BH, NULL);
    TU_ASSERT_OK(clattn_sdpa(ctx, &d, tu_dev_alloc(ctx, BH * BD, q_last), tu_dev_alloc(ctx, BKV * BS * BD, k),
                             tu_dev_alloc(ctx, BKV * BS * BD, v), NULL, o, NULL, l), ctx, "alone");
    const float *want_out = tu_dev_read_checked(ctx, o, BH * BD, "out"), *want_lse = tu_dev_read_checked(ctx, l, BH, "lse");
    /* In a prefill of all 300 rows (causal): its last row. */
    d.q_len = BS, m.causal = CLATTN_CAUSAL_TOP_LEFT;
    o = tu_dev_alloc(ctx, BH * BS * BD, NULL), l = tu_dev_alloc(ctx, BH * BS, NULL);
    TU_ASSERT_OK(clattn_sdpa(ctx, &d, tu_dev_alloc(ctx, BH * BS * BD, qs), tu_dev_alloc(ctx, BKV * BS * BD, k),
                             tu_dev_alloc(ctx, BKV * BS * BD, v), NULL, o, NULL, l), ctx, "prefill");
    const float *po = tu_dev_read_checked(ctx, o, BH * BS * BD, "out"), *pl = tu_dev_read_checked(ctx, l, BH * BS, "lse");
    float row[BH * BD], row_lse[BH];
    for (size_t h = 0; h < BH; h++) {
        memcpy(row + h * BD, po + (h * BS + BS - 1) * BD, BD * sizeof(float));
        row_lse[h] = pl[h * BS + BS - 1];
    }
    expect_row("as the last of a causal prefill of 300", row, row_lse, want_out, want_lse);
    /* Batch entry 5 of 8 decode rows over caches of 300 (the others' values random). */
    enum { NB = 8, AT = 5 };
    float *bq = tu_falloc(NB * BH * BD), *bk = tu_falloc(NB * BKV * BS * BD), *bv = tu_falloc(NB * BKV * BS * BD);
    tu_fill_uniform(bq, NB * BH * BD, 1.0f, 83);
    tu_fill_uniform(bk, NB * BKV * BS * BD, 1.0f, 84);
    tu_fill_uniform(bv, NB * BKV * BS * BD, 1.0f, 85);
    memcpy(bq + AT * BH * BD, q_last, BH * BD * sizeof(float));
    memcpy(bk + AT * BKV * BS * BD, k, BKV * BS * BD * sizeof(float));
    memcpy(bv + AT * BKV * BS * BD, v, BKV * BS * BD * sizeof(float));
    d.batch = NB, d.q_len = 1, m.causal = CLATTN_CAUSAL_BOTTOM_RIGHT;
    o = tu_dev_alloc(ctx, NB * BH * BD, NULL), l = tu_dev_alloc(ctx, NB * BH, NULL);
    TU_ASSERT_OK(clattn_sdpa(ctx, &d, tu_dev_alloc(ctx, NB * BH * BD, bq), tu_dev_alloc(ctx, NB * BKV * BS * BD, bk),
                             tu_dev_alloc(ctx, NB * BKV * BS * BD, bv), NULL, o, NULL, l), ctx, "a batch of 8");
    expect_row("in a batch of 8", tu_dev_read_checked(ctx, o, NB * BH * BD, "out") + AT * BH * BD,
               tu_dev_read_checked(ctx, l, NB * BH, "lse") + AT * BH, want_out, want_lse);
    /* Sequence 2 of a ragged batch of 6 (rows, heads, D): 1 to 40 query rows, 50 to 350 keys each. */
    enum { NR = 6, RAT = 2 };
    size_t qst[NR + 1] = {0}, kst[NR + 1] = {0};
    for (size_t b = 0; b < NR; b++) {
        qst[b + 1] = qst[b] + (b == RAT ? 1 : 1 + b * 7);
        kst[b + 1] = kst[b] + (b == RAT ? BS : 50 + b * 60);
    }
    float *rq = tu_falloc(qst[NR] * BH * BD), *rk = tu_falloc(kst[NR] * BKV * BD), *rv = tu_falloc(kst[NR] * BKV * BD);
    tu_fill_uniform(rq, qst[NR] * BH * BD, 1.0f, 86);
    tu_fill_uniform(rk, kst[NR] * BKV * BD, 1.0f, 87);
    tu_fill_uniform(rv, kst[NR] * BKV * BD, 1.0f, 88);
    for (size_t h = 0; h < BH; h++)
        memcpy(rq + (qst[RAT] * BH + h) * BD, q_last + h * BD, BD * sizeof(float));
    for (size_t j = 0; j < BS; j++)
        for (size_t g = 0; g < BKV; g++) {
            memcpy(rk + ((kst[RAT] + j) * BKV + g) * BD, k + (g * BS + j) * BD, BD * sizeof(float));
            memcpy(rv + ((kst[RAT] + j) * BKV + g) * BD, v + (g * BS + j) * BD, BD * sizeof(float));
        }
    clattn_ragged r = CLATTN_RAGGED_INIT;
    r.q_starts = qst, r.k_starts = kst;
    d.batch = NR, d.q_len = 0, d.kv_len = 0;
    o = tu_dev_alloc(ctx, qst[NR] * BH * BD, NULL), l = tu_dev_alloc(ctx, qst[NR] * BH, NULL);
    TU_ASSERT_OK(clattn_sdpa_ragged(ctx, &d, &r, tu_dev_alloc(ctx, qst[NR] * BH * BD, rq),
                                    tu_dev_alloc(ctx, kst[NR] * BKV * BD, rk), tu_dev_alloc(ctx, kst[NR] * BKV * BD, rv),
                                    NULL, o, l), ctx, "ragged");
    expect_row("in a ragged batch of 6", tu_dev_read_checked(ctx, o, qst[NR] * BH * BD, "out") + qst[RAT] * BH * BD,
               tu_dev_read_checked(ctx, l, qst[NR] * BH, "lse") + qst[RAT] * BH, want_out, want_lse);
    /* Through a paged cache: blocks of 16 rows in reverse order. */
    enum { NBLK = (BS + BBLOCK - 1) / BBLOCK };
    float *pk = tu_falloc(NBLK * BKV * BBLOCK * BD), *pv = tu_falloc(NBLK * BKV * BBLOCK * BD);
    int table[NBLK];
    for (size_t t = 0; t < NBLK; t++)
        table[t] = (int)(NBLK - 1 - t);
    for (size_t j = 0; j < BS; j++)
        for (size_t g = 0; g < BKV; g++) {
            const size_t at = (((size_t)table[j / BBLOCK] * BKV + g) * BBLOCK + j % BBLOCK) * BD;
            memcpy(pk + at, k + (g * BS + j) * BD, BD * sizeof(float));
            memcpy(pv + at, v + (g * BS + j) * BD, BD * sizeof(float));
        }
    clattn_paged_cache cache = CLATTN_PAGED_CACHE_INIT;
    cache.k_pool = tu_dev_alloc(ctx, NBLK * BKV * BBLOCK * BD, pk);
    cache.v_pool = tu_dev_alloc(ctx, NBLK * BKV * BBLOCK * BD, pv);
    cache.blocks = NBLK, cache.block_size = BBLOCK, cache.max_blocks = NBLK;
    cache.block_table = tu_dev_alloc(ctx, NBLK, (const float *)table);
    const size_t length[1] = {BS};
    d.batch = 1, d.q_len = 1, d.kv_len = 0;
    o = tu_dev_alloc(ctx, BH * BD, NULL), l = tu_dev_alloc(ctx, BH, NULL);
    TU_ASSERT_OK(clattn_sdpa_paged(ctx, &d, &cache, length, tu_dev_alloc(ctx, BH * BD, q_last), NULL, o, l), ctx,
                 "paged");
    expect_row("through a paged cache", tu_dev_read_checked(ctx, o, BH * BD, "out"), tu_dev_read_checked(ctx, l, BH, "lse"),
               want_out, want_lse);
}
END_TEST

/* 3b. A device group's call (clattn_group_sdpa_host) over the machine's devices (two or more), whole batches a
 * device, then one batch split along its query rows: every row's bits are those of the call on one device alone,
 * on each of them — across implementations where the devices are of two (tests/meson.build's reproducible-group
 * runs PoCL and rusticl together). */
/* Every device of g given the same speed, so that each takes a share of the work. */
static void equal_speeds(clattn_group *g)
{
    for (size_t i = 0; i < clattn_group_size(g); i++)
        TU_ASSERT_OK(clattn_group_set_speed(g, i, 1.0), NULL, "clattn_group_set_speed");
}

START_TEST(test_group)
{
    enum { GB = 4, GH = 4, GKV = 2, GL = 9, GS = 70, GD = 32 };
    char specs[256] = "";
    size_t used = 0;
    for (size_t i = 0; i < tu_ndev && i < 4; i++)
        used += (size_t)snprintf(specs + used, sizeof specs - used, "%s%.31s", i ? "," : "", tu_dev_spec[i]);
    tu_set_label("reproducible group of %s", specs);
    float *q = tu_falloc(GB * GH * GL * GD), *k = tu_falloc(GB * GKV * GS * GD), *v = tu_falloc(GB * GKV * GS * GD);
    tu_fill_uniform(q, GB * GH * GL * GD, 1.0f, 91);
    tu_fill_uniform(k, GB * GKV * GS * GD, 1.0f, 92);
    tu_fill_uniform(v, GB * GKV * GS * GD, 1.0f, 93);
    clattn_masks m = CLATTN_MASKS_INIT;
    m.causal = CLATTN_CAUSAL_BOTTOM_RIGHT;
    clattn_sdpa_desc d = tu_sdpa_desc(GB, GH, GL, GS, GD, GD);
    d.kv_heads = GKV, d.masks = &m, d.arithmetic = CLATTN_ARITHMETIC_REPRODUCIBLE;
    clattn_group *g = NULL;
    TU_ASSERT_OK(clattn_group_create(&g, specs), NULL, "clattn_group_create");
    equal_speeds(g); /* (measured, llvmpipe's share would round to nothing) */
    float *out = tu_falloc(GB * GH * GL * GD), *lse = tu_falloc(GB * GH * GL);
    const clattn_status st = clattn_group_sdpa_host(g, &d, q, k, v, NULL, out, lse);
    clattn_group_free(g);
    TU_ASSERT_OK(st, NULL, "clattn_group_sdpa_host, reproducible");
    for (size_t i = 0; i < tu_ndev; i++) {
        float *alone = tu_falloc(GB * GH * GL * GD), *alone_lse = tu_falloc(GB * GH * GL);
        TU_ASSERT_OK(clattn_sdpa_host(tu_ctx[i], &d, q, k, v, NULL, alone, NULL, alone_lse), tu_ctx[i],
                     "clattn_sdpa_host, reproducible");
        ck_assert_msg(memcmp(out, alone, GB * GH * GL * GD * sizeof(float)) == 0 &&
                          memcmp(lse, alone_lse, GB * GH * GL * sizeof(float)) == 0,
                      "%s: the group's bits differ from %s's alone", tu_label(), tu_dev_spec[i]);
    }
    /* A batch smaller than the group: split along the query rows (not the keys, whose merge would change the bits):
     * each device alone's bits again. */
    d.batch = 1;
    TU_ASSERT_OK(clattn_group_create(&g, specs), NULL, "clattn_group_create");
    equal_speeds(g);
    const clattn_status split = clattn_group_sdpa_host(g, &d, q, k, v, NULL, out, lse);
    clattn_group_free(g);
    TU_ASSERT_OK(split, NULL, "clattn_group_sdpa_host, reproducible, one batch");
    for (size_t i = 0; i < tu_ndev; i++) {
        float *alone = tu_falloc(GH * GL * GD), *alone_lse = tu_falloc(GH * GL);
        TU_ASSERT_OK(clattn_sdpa_host(tu_ctx[i], &d, q, k, v, NULL, alone, NULL, alone_lse), tu_ctx[i],
                     "clattn_sdpa_host, reproducible, one batch");
        ck_assert_msg(memcmp(out, alone, GH * GL * GD * sizeof(float)) == 0 &&
                          memcmp(lse, alone_lse, GH * GL * sizeof(float)) == 0,
                      "%s: the group's query-row split differs from %s alone", tu_label(), tu_dev_spec[i]);
    }
}
END_TEST

/* 4. CLATTN_REPRODUCIBLE=1 when a context is made: its calls without desc.arithmetic are reproducible. */
START_TEST(test_environment)
{
    const size_t dev = _i;
    tu_set_label("CLATTN_REPRODUCIBLE=1 on %s", tu_dev_spec[dev]);
    inputs *in = tu_track_malloc(sizeof *in);
    make(tu_ctx[dev], &cases[12], in, 700 + 12 * 10);
    unsigned char *out;
    float *lse;
    cl_mem o;
    run(tu_ctx[dev], in, CLATTN_ALGORITHM_AUTO, &o, &out, &lse);
    static const char *const names[1] = {"CLATTN_REPRODUCIBLE"};
    tu_env_save(names, 1);
    setenv("CLATTN_REPRODUCIBLE", "1", 1);
    clattn_context *ctx = NULL;
    clattn_context_options opts = CLATTN_CONTEXT_OPTIONS_INIT;
    opts.device = tu_dev_spec[dev];
    TU_ASSERT_OK(clattn_context_create_with_options(&ctx, &opts), NULL, "a context under CLATTN_REPRODUCIBLE=1");
    tu_env_restore();
    inputs *again = tu_track_malloc(sizeof *again);
    make(ctx, &cases[12], again, 700 + 12 * 10);
    again->d.arithmetic = CLATTN_ARITHMETIC_DEFAULT;
    unsigned char *o2;
    float *l2;
    cl_mem unused;
    run(ctx, again, CLATTN_ALGORITHM_FUSED, &unused, &o2, &l2);
    ck_assert_msg(memcmp(o2, out, out_bytes(in)) == 0 && memcmp(l2, lse, in->nl * 4) == 0,
                  "%s: the context's call is not the reproducible one", tu_label());
    clattn_context_free(ctx);
}
END_TEST

/* 5. What does not take it yet refuses it. */
START_TEST(test_refusals)
{
    const size_t dev = _i;
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("reproducible refusals on %s", tu_dev_spec[dev]);
    inputs *in = tu_track_malloc(sizeof *in);
    make(ctx, &cases[0], in, 700);
    cl_mem out = tu_dev_alloc(ctx, in->no, NULL);
    cl_mem lse = tu_dev_alloc(ctx, in->nl, NULL), g[3] = {tu_dev_alloc(ctx, in->nq, NULL), tu_dev_alloc(ctx, in->nk, NULL),
                                                          tu_dev_alloc(ctx, in->nv, NULL)};
    clattn_sdpa_desc dd = in->d;
    dd.softmax_precision = CLATTN_SOFTMAX_DOUBLE;
    tu_refused(ctx, clattn_sdpa(ctx, &dd, in->qm, in->km, in->vm, NULL, out, NULL, NULL), CLATTN_ERROR_INVALID_VALUE,
               "the double softmax", out, in->no);
    const int idx[2 * 17 * 4] = {0};
    in->d.masks = NULL; /* (the sparse call takes none) */
    tu_refused(ctx, clattn_sdpa_sparse(ctx, &in->d, 4, tu_dev_alloc(ctx, 2 * 17 * 4, (const float *)idx), in->qm, in->km,
                                       in->vm, NULL, NULL, out, NULL),
               CLATTN_ERROR_INVALID_VALUE, "top-k sparse attention", out, in->no);
    tu_refused(ctx, clattn_sdpa_sparse_backward(ctx, &in->d, 4, tu_dev_alloc(ctx, 2 * 17 * 4, (const float *)idx), NULL,
                                                in->qm, in->km, in->vm, out, lse, out, g[0], g[1], g[2], NULL),
               CLATTN_ERROR_INVALID_VALUE, "top-k sparse attention", g[1], in->nk);
    /* Mesa's llvmpipe: rows past its loop limit (see test_cases) refused, not wrong; computed elsewhere. */
    const size_t S = 2000, D = 64;
    clattn_sdpa_desc ld = tu_sdpa_desc(1, 1, 1, S, D, D);
    ld.arithmetic = CLATTN_ARITHMETIC_REPRODUCIBLE;
    cl_mem lq = tu_dev_alloc(ctx, D, NULL), lk = tu_dev_alloc(ctx, S * D, NULL), lo = tu_dev_alloc(ctx, D, NULL);
    if (strstr(clattn_context_device_name(ctx), "llvmpipe"))
        tu_refused(ctx, clattn_sdpa(ctx, &ld, lq, lk, lk, NULL, lo, NULL, NULL), CLATTN_ERROR_UNSUPPORTED_DEVICE,
                   "llvmpipe", lo, D);
    else
        TU_ASSERT_OK(clattn_sdpa(ctx, &ld, lq, lk, lk, NULL, lo, NULL, NULL), ctx, "a long row");
}
END_TEST

static Suite *reproducible_suite(void)
{
    const char *subset = getenv("CLATTN_TEST_REPRODUCIBLE_SUBSET");
    if (subset && strcmp(subset, "1") == 0)
        case_stride = 4, tunings_run = 2;
    Suite *s = suite_create("reproducible");
    tu_add_loop(s, "cases", test_cases, (N_CASES + case_stride - 1) / case_stride * tu_ndev);
    tu_add_loop(s, "tunings", test_tunings, tunings_run * tu_ndev);
    tu_add_loop(s, "batch_invariance", test_batch_invariance, tu_ndev);
    if (tu_ndev > 1) /* (a group of one device splits nothing; on a simulator its speed probe alone takes minutes) */
        tu_add_loop(s, "group", test_group, 1);
    tu_add_loop(s, "environment", test_environment, tu_ndev);
    tu_add_loop(s, "refusals", test_refusals, tu_ndev);
    return s;
}

int main(void) { return tu_main(reproducible_suite); }
