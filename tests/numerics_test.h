/*
 * What the two halves of test_numerics share (test_numerics.c: problems, runs and row checks, layers,
 * and parts 1 and 2, fully masked rows and very negative masks; test_numerics_inputs.c: parts 3 to 6).
 */
#ifndef CLATTN_NUMERICS_TEST_H
#define CLATTN_NUMERICS_TEST_H

#include "test_util.h"

#include <stddef.h>
#include <stdint.h>

#define MAXB 8

typedef struct {
    clattn_sdpa_desc d;
    clattn_masks m; /* d.masks points here once a mask is set (prob_masks), else NULL */
    size_t kl[MAXB];
    size_t B, H, L, S, D, Dv, BH;
    size_t nq, nk, nv, nm, no, np, nl;
    float *q, *k, *v, *mask;
} prob;

typedef struct {
    float *o, *w, *l; /* w is NULL for the fused path */
} result;

typedef struct {
    double *o, *w, *l;
} reference;

typedef struct {
    clattn_mha_desc d;
    clattn_masks m; /* d.masks points here once a mask is set (mprob_masks), else NULL */
    size_t kl[MAXB];
    size_t S, nx, nkv, ny, nw, nm, ycols;
    float *x, *kv, *mask;
    clattn_mha_host_weights hw;
} mprob;

/* Q, K, V uniform in [-a, a]; no masks; default scale. */
void prob_init(prob *p, size_t B, size_t H, size_t L, size_t S, size_t D, size_t Dv, float a, uint64_t seed);
/* p's masks, from now on in use by its descriptor. */
clattn_masks *prob_masks(prob *p);
/* An additive mask of `layout`, uniform in [-1, 1]. */
void prob_mask(prob *p, clattn_mask_layout layout, uint64_t seed);
/* Key lengths kl[0 .. B). */
void prob_key_lengths(prob *p, const size_t *kl);
/* 1 if query row r = bh·L + i can see key j (causal, key lengths, and an additive −inf). */
int sees(const prob *p, size_t r, size_t j);
/* clattn_sdpa_host on p by `alg`, the weights too when asked; guards checked. */
void run_sdpa(clattn_context *ctx, const prob *p, clattn_algorithm alg, int want_weights, result *r);
/* The path's natural outputs: FUSED out + lse, STAGED out + weights + lse. */
void run_path(clattn_context *ctx, const prob *p, clattn_algorithm alg, result *r);
/* ref_sdpa of p. */
void ref_of(const prob *p, reference *r);
/* Row r of out, weights and lse against the reference. */
void check_row(const prob *p, const result *g, const reference *ref, size_t r);
/* Every row. */
void check_all(const prob *p, const result *g, const reference *ref);
/* No output element inf or NaN. */
void check_finite_out(const prob *p, const result *g);
/* Both paths: no NaN anywhere, fully masked rows exactly zero / −inf, every row against ref_sdpa; with
 * `one_key`, every visible weight exactly 1 and the output row exactly that key's V row. Returns how many
 * fully masked rows there were. */
size_t check_problem(clattn_context *ctx, const prob *p, const char *name, const char *spec, int one_key);
/* A layer of H heads of width hd on d_model dm; cross-attention when S ≠ 0 (kv width dm). */
void mprob_init(mprob *p, size_t B, size_t L, size_t S, size_t dm, size_t H, size_t hd, int with_wo, uint64_t seed);
/* p's masks, from now on in use by its descriptor. */
clattn_masks *mprob_masks(mprob *p);
/* Runs the layer on both paths (FUSED without attention weights, STAGED with them) against ref_mha.
 * Rows of batches listed in zero_batches (key length 0) must be exactly zero without W_O, and their
 * attention weights exactly zero. */
void check_mha_problem(clattn_context *ctx, const mprob *p, const char *name, const char *spec);

/* test_numerics_inputs.c's test cases: inf_nan, underflowed_weight, large_scores, degenerate, head_limit. */
void numerics_add_input_cases(Suite *s);

#endif
