/*
 * What the two halves of test_cli_sdpa share (test_cli_sdpa.c: one `clattn sdpa` run checked against the
 * reference, layouts, masks, scales, storage types; test_cli_sdpa_variants.c: the variants).
 */
#ifndef CLATTN_CLI_SDPA_TEST_H
#define CLATTN_CLI_SDPA_TEST_H

#include "cli_util.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One `clattn sdpa` run: its sizes, its flags, and what they ask for (for the reference). */
typedef struct sdpa_spec {
    size_t rank, B, H, L, S, D, Dv;
    float scale;               /* passed as --scale when not 0 (or when scale_zero) */
    bool scale_eq;             /* spelled --scale=VALUE */
    bool scale_zero;           /* pass --scale 0 (scale must be 0): uniform weights */
    clattn_causal causal;      /* what the flags in extra ask for, for the reference */
    const size_t *key_lengths; /* likewise (B entries) */
    const float *mask;         /* likewise: the additive mask expanded to (B,H,L,S) */
    bool f8;                   /* Q and V written as '<f8' */
    size_t kv_heads;           /* K and V have this many heads, passed as --kv-heads (0: H, no flag) */
    bool heads_layout;         /* rank 3 as (B,L,H·D), passed with --heads H (else (H,L,D)) */
    float softcap;             /* what the flags in extra ask for, for the reference: */
    const float *sinks;        /* H values */
    const float *alibi;        /* H values */
    const float *logit_scale;  /* H values */
    const long long *offsets;  /* B values */
    const clattn_window *window;
    const char *const *extra;  /* the mask and variant flags */
    const ref_mods *mods;      /* what --mods in extra computes, for the reference */
    uint64_t seed;
} sdpa_spec;

/* What a check read back from the tool's files, in their layout. */
typedef struct sdpa_result {
    const float *out, *w, *lse;
} sdpa_result;

/* Shape of a tensor of rank `rank` whose last two dimensions are (a, b), or (a) when b = 0. With
 * heads_layout (rank 3 as (B,L,H·D)): (B, a, H·b). */
size_t tensor_shape(size_t rank, bool heads_layout, size_t B, size_t H, size_t a, size_t b, size_t *shape);
/* f saved as name (float32, or with f8 float64 values near them, whose doubles go to *as_double). */
const char *save_input(const char *name, const float *f, size_t ndim, const size_t *shape, bool f8,
                       double **as_double);
/* Runs `clattn sdpa` as s says and checks its outputs against the fp64 reference. */
sdpa_result sdpa_check(const sdpa_spec *s);

/* test_cli_sdpa_variants.c's groups: the variants, and the backward pass in every storage type. */
cli_group sdpa_variants_group(void);
cli_group sdpa_backward_dtypes_group(void);

#endif
