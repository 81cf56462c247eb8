/*
 * Shared helpers of clattn's test programs: fp64 host references, a deterministic PRNG, tolerance
 * checks, guard-region buffers and per-device contexts.
 *
 * Every test program calls tu_main() from main(). tu_main creates one clattn context per OpenCL
 * device ("P:D" spec) before building the suite (kernel compilation is slow, so contexts live for the
 * whole process), exits 77 (meson's "skipped") when there is no device, runs the suite without fork
 * (OpenCL runtimes do not survive fork()), and prints the largest absolute error seen against the fp64
 * references.
 */
#ifndef CLATTN_TEST_UTIL_H
#define CLATTN_TEST_UTIL_H

#include <check.h>
#include <clattn/clattn.h>
#include <stddef.h>
#include <stdint.h>

/* ---------------------------------------------------------------------------------------------- */
/* Devices and contexts                                                                            */
/* ---------------------------------------------------------------------------------------------- */

#define TU_MAX_DEVICES 16

extern size_t tu_ndev;                                 /* devices with a context */
extern clattn_context *tu_ctx[TU_MAX_DEVICES];         /* one context per device */
extern clattn_device_info tu_dev[TU_MAX_DEVICES];      /* facts about device i */
extern char tu_dev_spec[TU_MAX_DEVICES][32];           /* "P:D" of device i */

/* Creates the contexts, builds the suite with make_suite(), runs it, prints the max error line and
 * returns the process exit status (0 pass, 1 fail, 77 no device). */
int tu_main(Suite *(*make_suite)(void));

/* In a sanitizer build, runs LeakSanitizer's check now instead of at exit (tu_main does this). */
void tu_leak_check_now(void);

/* A test case with the fixture that releases everything tracked by tu_track_*(). */
TCase *tu_tcase(const char *name);

/* Loop index helpers for "table × devices" loop tests: index = case * tu_ndev + device. */
#define TU_CASE(i) ((size_t)(i) / tu_ndev)
#define TU_DEVICE(i) ((size_t)(i) % tu_ndev)

/* A label describing the current case, included in every failure message of check_close and the
 * guard checks. */
void tu_set_label(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *tu_label(void);

/* ---------------------------------------------------------------------------------------------- */
/* Random numbers                                                                                  */
/* ---------------------------------------------------------------------------------------------- */

typedef struct tu_rng {
    uint64_t state;
} tu_rng;

void tu_rng_seed(tu_rng *r, uint64_t seed);
uint64_t tu_rng_next(tu_rng *r);               /* splitmix64 */
double tu_rng_unit(tu_rng *r);                 /* uniform in [0, 1) */
float tu_rng_uniform(tu_rng *r, float a);      /* uniform in [-a, a] */
void tu_fill_uniform(float *p, size_t n, float a, uint64_t seed);
/* Fill with integer multiples of `step` in [-kmax*step, kmax*step] (exactly representable). */
void tu_fill_int_multiples(float *p, size_t n, int kmax, float step, uint64_t seed);

/* ---------------------------------------------------------------------------------------------- */
/* Tolerance checks                                                                                */
/* ---------------------------------------------------------------------------------------------- */

#define TU_ATOL 2e-5
#define TU_RTOL 1e-4

extern double tu_max_abs_err; /* the largest finite |out − ref| seen by check_close in this process */

/* |out−ref| ≤ 2e-5 + 1e-4·|ref| for every element (infinities must match exactly, NaN never passes).
 * Fails the test at the first bad index. max_err (may be NULL) receives the largest |out−ref|. */
void check_close(const float *out, const double *ref, size_t n, double *max_err);
/* The same, naming the tensor in the failure message. */
void check_close_named(const char *what, const float *out, const double *ref, size_t n,
                       double *max_err);

/* ---------------------------------------------------------------------------------------------- */
/* Guard regions                                                                                   */
/* ---------------------------------------------------------------------------------------------- */

#define TU_GUARD 64              /* floats of guard after every tensor */
#define TU_SENTINEL_BITS 0x7fc5a5a5u /* a quiet NaN with a payload: poisons any result that reads it */

float tu_sentinel(void);
int tu_is_sentinel(float f);

/* Host arrays of n + TU_GUARD floats. init (n floats) or NULL for all-sentinel; the guard is always
 * sentinel. Freed by the test case's fixture. */
float *tu_host_alloc(size_t n, const float *init);
/* Fails the test if any of the TU_GUARD floats after p[n-1] changed. */
void tu_host_check_guard(const float *p, size_t n, const char *what);
/* 1 if p[0 .. n+TU_GUARD) is all sentinel. */
int tu_host_all_sentinel(const float *p, size_t n);

/* Device buffers of n + TU_GUARD floats in ctx's OpenCL context (guard and, when init is NULL, the
 * tensor too are filled with the sentinel). Released by the test case's fixture. */
cl_mem tu_dev_alloc(clattn_context *ctx, size_t n, const float *init);
/* A buffer of exactly nfloats floats (no guard), all sentinel or init. nfloats ≥ 1. */
cl_mem tu_dev_alloc_exact(clattn_context *ctx, size_t nfloats, const float *init);
/* Reads nfloats floats (blocking, after clattn_finish). Returns a tracked host array. */
float *tu_dev_read(clattn_context *ctx, cl_mem m, size_t nfloats);
/* Reads n + TU_GUARD floats of a tu_dev_alloc buffer, checks its guard and returns the n floats
 * (tracked host array). */
float *tu_dev_read_checked(clattn_context *ctx, cl_mem m, size_t n, const char *what);
/* Fails unless the guard after n floats of m is intact. */
void tu_dev_check_guard(clattn_context *ctx, cl_mem m, size_t n, const char *what);
/* Fails unless the first n floats of m equal `expect` bit for bit (inputs must stay unchanged). */
void tu_dev_check_equal(clattn_context *ctx, cl_mem m, const float *expect, size_t n,
                        const char *what);
/* 1 if the first nfloats floats of m are all sentinel. */
int tu_dev_all_sentinel(clattn_context *ctx, cl_mem m, size_t nfloats);

/* Tracked allocations, released by the fixture even when a test fails part-way. */
void *tu_track_malloc(size_t bytes);
double *tu_dalloc(size_t n); /* tracked, zeroed doubles */
float *tu_falloc(size_t n);  /* tracked, zeroed floats */
void tu_track_mem(cl_mem m);
void tu_release_all(void);

/* clattn_finish with an assertion. */
void tu_finish(clattn_context *ctx);

#include "reference.h"

/* Key lengths for batch B: TU_KL_NONE → NULL; FULL: all S; VARIED: even batches (S+1)/2, odd S;
 * ZERO: batch 0 gets 0 (every key masked), others S−1 (1 when S = 1). Writes out[0..B). */
enum { TU_KL_NONE = 0, TU_KL_FULL, TU_KL_VARIED, TU_KL_ZERO };
const size_t *tu_make_key_lengths(int mode, size_t B, size_t S, size_t *out);

/* Additive mask of `layout` (L,S) or (B,H,L,S): uniform [-1,1]; TU_MASKF_INF: about 1/6 of the
 * entries −inf; TU_MASKF_ROWINF: in matrix t, row t % L entirely −inf. Tracked; *n gets the count. */
#define TU_MASKF_INF 1
#define TU_MASKF_ROWINF 2
float *tu_make_mask(clattn_mask_layout layout, size_t B, size_t H, size_t L, size_t S, int flags,
                    uint64_t seed, size_t *n);

/* Convenience: Dv of an sdpa desc, element counts of its tensors. */
size_t tu_sdpa_dv(const clattn_sdpa_desc *d);

#endif /* CLATTN_TEST_UTIL_H */
