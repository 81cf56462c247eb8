/*
 * The one utility of clattn's test programs, in two parts:
 *
 *  - test_util_sys.c (no OpenCL, no clattn library): failure labels, a deterministic PRNG, the fp64
 *    tolerance checks, tracked host allocations, environment save/restore, scratch folders and whole
 *    files. The OpenCL-free tests (tools' .npy and heatmap tests, the command-line test, which only
 *    spawns the tool) define TU_NO_OPENCL before including this header and link only this part.
 *  - test_util.c (OpenCL): per-device contexts and tu_main(), guard-region buffers, device buffers,
 *    status assertions, descriptor and mask builders.
 *
 * Every OpenCL test program calls tu_main() from main(). tu_main creates one clattn context per
 * OpenCL device ("P:D" spec) before building the suite (kernel compilation is slow, so contexts live
 * for the whole process), exits 77 (meson's "skipped") when there is no device, runs the suite
 * without fork (OpenCL runtimes do not survive fork()), and prints the largest absolute error seen
 * against the fp64 references.
 *
 * Test cases made with tu_tcase() (or whose teardown calls tu_sys_teardown()) get back, after every
 * test, even one that failed part-way: tracked allocations freed, scratch folders removed, the
 * environment variables saved with tu_env_save() put back.
 */
#ifndef CLATTN_TEST_UTIL_H
#define CLATTN_TEST_UTIL_H

#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ============================================================================================== */
/* Part 1 (test_util_sys.c): no OpenCL                                                             */
/* ============================================================================================== */

/* ---------------------------------------------------------------------------------------------- */
/* Labels                                                                                          */
/* ---------------------------------------------------------------------------------------------- */

/* A label describing the current case, included in every failure message of check_close, the guard
 * checks and the status assertions. tu_tcase's fixture clears it before each test. */
void tu_set_label(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *tu_label(void);

/* ---------------------------------------------------------------------------------------------- */
/* Random numbers                                                                                  */
/* ---------------------------------------------------------------------------------------------- */

typedef struct tu_rng {
    uint64_t state; /* may be set directly: the next value is splitmix64 of state + the golden gamma */
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
extern double tu_max_ratio;   /* the largest |out − ref| / tolerance seen by check_close */

/* |out−ref| ≤ 2e-5 + 1e-4·|ref| for every element (infinities must match exactly, NaN never passes).
 * Fails the test at the first bad index. max_err (may be NULL) receives the largest |out−ref|. */
void check_close(const float *out, const double *ref, size_t n, double *max_err);
/* Floats in order: how many units in the last place apart a and b are (0 for equal values and for two
 * NaNs, INT64_MAX for one NaN). */
int64_t tu_ulps_apart(float a, float b);
/* The same, naming the tensor in the failure message. */
void check_close_named(const char *what, const float *out, const double *ref, size_t n,
                       double *max_err);
/* The same for a result rounded into a narrower type: the tolerance plus half a unit in the last place
 * of a type with `bits` mantissa bits and normal numbers from 2^min_exp (half: 10, −14; bfloat16: 7,
 * −126; bits 0: float32, nothing added). */
void check_close_rounded(const char *what, const float *out, const double *ref, size_t n, int bits, int min_exp,
                         double *max_err);

/* ---------------------------------------------------------------------------------------------- */
/* Tracked host allocations: freed by tu_release_host() (the fixtures), even when a test fails     */
/* ---------------------------------------------------------------------------------------------- */

/* Takes ownership of malloc'd p; fails the test when p is NULL ("out of memory"). Returns p. */
void *tu_track(void *p);
void *tu_track_malloc(size_t bytes); /* tracked, zeroed */
double *tu_dalloc(size_t n);         /* tracked, zeroed doubles */
float *tu_falloc(size_t n);          /* tracked, zeroed floats */
void tu_release_host(void);

/* ---------------------------------------------------------------------------------------------- */
/* Environment variables                                                                           */
/* ---------------------------------------------------------------------------------------------- */

/* Remember the current values (or absence) of these variables (at most 8); names must outlive the
 * restore. A second save first restores what the first one remembered. */
void tu_env_save(const char *const *names, size_t n);
/* Put every remembered variable back as it was, unsetting those that were absent. */
void tu_env_restore(void);

/* ---------------------------------------------------------------------------------------------- */
/* Scratch folders and files                                                                       */
/* ---------------------------------------------------------------------------------------------- */

#define TU_MAX_SCRATCH 16

/* A new empty folder $TMPDIR/<prefix>-XXXXXX ($TMPDIR unset or empty: /tmp), removed with all it
 * holds by tu_scratch_remove_all(). Returns its path, valid until then; NULL (errno set) when it
 * cannot be made. For use outside a test (main()). */
const char *tu_scratch_make(const char *prefix);
/* The same inside a test: fails the test when the folder cannot be made. */
const char *tu_scratch_dir(const char *prefix);
/* Removes every folder made by tu_scratch_make/tu_scratch_dir, with everything below it. */
void tu_scratch_remove_all(void);
/* Removes a folder and everything below it (symbolic links are removed, never followed). */
void tu_rm_rf(const char *path);
/* Entries of dir, "." and ".." not counted; fails the test when dir cannot be opened. */
size_t tu_dir_count(const char *dir);

/* The whole file as a malloc'd buffer with a NUL byte after its end; *len (when len is not NULL)
 * gets its size. NULL when it cannot be opened or read. The caller frees it (or tu_track()s it). */
char *tu_read_file(const char *path, size_t *len);
/* The source folder's cl/NAME (CLATTN_SOURCE_CL_DIR, which meson test sets), read as tu_read_file reads, tracked;
 * fails the test when it cannot be. */
char *tu_read_source_cl(const char *name, size_t *len);
/* FNV-1a over n bytes, continuing from h (TU_FNV_START to begin): a fingerprint of a result's bits. */
#define TU_FNV_START 0xcbf29ce484222325ull
uint64_t tu_fnv(const void *data, size_t n, uint64_t h);
/* The fingerprint tests/data/FILE records for `name` (lines "name|hex"), or 0 when it records none; fails the test
 * when the file cannot be read. */
uint64_t tu_golden(const char *file, const char *name);
/* A result's fingerprint h held to tests/data/FILE's line for `name` (the label says whose); under
 * CLATTN_TEST_WRITE_HASHES=PATH the line is appended to PATH instead (recording: tu_recording says so). */
void tu_expect_fingerprint(const char *file, const char *name, uint64_t h);
bool tu_recording(void);
/* Creates or truncates path and writes len bytes; fails the test on any error. */
void tu_write_file(const char *path, const void *data, size_t len);
/* Copies from to to, then appends `append` (NULL: nothing); fails the test on any error. */
void tu_copy_file(const char *from, const char *to, const char *append);
/* A scratch folder holding every file of CLATTN_SOURCE_CL_DIR (which meson test sets to the source
 * cl/), with a syntax error appended to `victim`; for CLATTN_KERNEL_DIR or options.kernel_dir. */
const char *tu_broken_kernel_dir(const char *victim);

/* ---------------------------------------------------------------------------------------------- */
/* Fixture                                                                                         */
/* ---------------------------------------------------------------------------------------------- */

/* The exit status of a suite that finds no OpenCL device: 77 (meson's SKIP) on a developer's machine,
 * but 1 (a failure) in CI (CI=true) or when CLATTN_REQUIRE_DEVICE=1 asks for a device — a missing
 * device must never pass for green there. Prints why. */
int tu_no_device_exit(const char *why);
/* Whether devices are required here (CI=true or 1, or CLATTN_REQUIRE_DEVICE=1): then a missing or
 * unsupported device fails a suite instead of skipping it. */
int tu_devices_required(void);

/* The exit status of a finished check run: 1 when a check failed, and 1 when no check ran at all (a
 * CK_RUN_SUITE or CK_RUN_CASE naming nothing, an empty suite): a run that checked nothing must not
 * pass for green. Prints why in that case. Every check program returns this (tu_main does). */
int tu_srunner_exit(SRunner *sr);

/* Frees the tracked host allocations, removes the scratch folders and restores the saved
 * environment. tu_tcase's teardown does this (and more); OpenCL-free suites add it themselves. */
void tu_sys_teardown(void);

#ifndef TU_NO_OPENCL

/* ============================================================================================== */
/* Part 2 (test_util.c): OpenCL                                                                    */
/* ============================================================================================== */

#include <clattn/clattn.h>

/* Short names for the cells of the test tables (causal kinds, mask layouts, the default scale). */
#define NONE CLATTN_CAUSAL_NONE
#define TL CLATTN_CAUSAL_TOP_LEFT
#define BR CLATTN_CAUSAL_BOTTOM_RIGHT
#define M0 CLATTN_MASK_NONE
#define MLS CLATTN_MASK_L_S
#define MBH CLATTN_MASK_B_H_L_S
#define SD CLATTN_SCALE_DEFAULT

/* ---------------------------------------------------------------------------------------------- */
/* Devices and contexts                                                                            */
/* ---------------------------------------------------------------------------------------------- */

#define TU_MAX_DEVICES 16

extern size_t tu_ndev;                                 /* devices with a context */
extern clattn_context *tu_ctx[TU_MAX_DEVICES];         /* one context per device */
extern clattn_device_info tu_dev[TU_MAX_DEVICES];      /* facts about device i */
extern char tu_dev_spec[TU_MAX_DEVICES][32];           /* "P:D" of device i */

/* Creates the contexts, builds the suite with make_suite(), runs it, prints the max error line and
 * returns the process exit status (0 pass, 1 fail or no check run, 77 no device). */
int tu_main(Suite *(*make_suite)(void));

/* In a sanitizer build, runs LeakSanitizer's check now instead of at exit (tu_main does this). */
void tu_leak_check_now(void);

/* A test case with the fixture that clears the label and, after the test, releases everything
 * tracked by tu_track*() and does tu_sys_teardown(). */
TCase *tu_tcase(const char *name);
/* A tu_tcase named `name` holding one loop test of n iterations, added to s. */
void tu_add_loop(Suite *s, const char *name, const TTest *fn, size_t n);

/* Loop index helpers for "table × devices" loop tests: index = case * tu_ndev + device. */
#define TU_CASE(i) ((size_t)(i) / tu_ndev)
#define TU_DEVICE(i) ((size_t)(i) % tu_ndev)

/* A new context on spec (NULL: the default selection); fails the test unless that succeeds. The
 * caller frees it. */
clattn_context *tu_context_new(const char *spec);
/* A new context on device `dev` that records its kernels' device time (options.profile), so that a
 * test can read which kernels ran; fails the test unless that succeeds. The caller frees it. */
clattn_context *tu_context_new_profiling(size_t dev);

/* Fails the test unless st (a clattn_status variable) is CLATTN_SUCCESS; the message gives the
 * label, `what`, the status and clattn_last_error(ctx) (ctx NULL: this thread's detail). A macro, so
 * that check reports the caller's line. */
#define TU_ASSERT_OK(st, ctx, what)                                                                  \
    ck_assert_msg((st) == CLATTN_SUCCESS, "%s: %s: %s: %s", tu_label(), (what),                        \
                  clattn_status_string(st), clattn_last_error(ctx))

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
/* One refused call: status st is `want`, the context's last error holds `words`, and the n floats of out
 * (NULL: none) are still sentinel after the queue has finished. */
void tu_refused(clattn_context *ctx, clattn_status st, clattn_status want, const char *words, cl_mem out,
                       size_t n);

/* Tracked OpenCL buffers, released by the fixture even when a test fails part-way. */
void tu_track_mem(cl_mem m);
/* Releases the tracked buffers and frees the tracked host allocations. */
void tu_release_all(void);

/* clattn_finish with an assertion. */
void tu_finish(clattn_context *ctx);

/* ---------------------------------------------------------------------------------------------- */
/* Paths                                                                                           */
/* ---------------------------------------------------------------------------------------------- */

/* The three paths the suites that cross every path run: fused, staged, decode. */
#define TU_NPATHS 3
extern const clattn_algorithm tu_paths[TU_NPATHS];
/* "fused", "staged", "decode" or (anything else) "auto". */
const char *tu_algorithm_name(clattn_algorithm a);

/* ---------------------------------------------------------------------------------------------- */
/* Descriptors and masks                                                                           */
/* ---------------------------------------------------------------------------------------------- */

#include "reference.h"

/* An SDPA descriptor with these sizes and everything else as CLATTN_SDPA_DESC_INIT sets it (no masks,
 * default scale, AUTO). */
clattn_sdpa_desc tu_sdpa_desc(size_t B, size_t H, size_t L, size_t S, size_t Dqk, size_t Dv);

/* Key lengths for batch B: TU_KL_NONE → NULL; FULL: all S; VARIED: even batches (S+1)/2, odd S;
 * ZERO: batch 0 gets 0 (every key masked), others S−1 (1 when S = 1). Writes out[0..B). */
enum { TU_KL_NONE = 0, TU_KL_FULL, TU_KL_VARIED, TU_KL_ZERO };
const size_t *tu_make_key_lengths(int mode, size_t B, size_t S, size_t *out);
/* The masks and variants of one row of the group and ring tables, kept together (the descriptor points
 * into it, so it must not move while d is used). */
typedef struct tu_variants {
    clattn_masks masks;
    clattn_window window;
    float sinks[16], slopes[16]; /* 0.3·h − 0.5 and 0.5 / (h + 1) */
} tu_variants;
/* d->masks = a causal mask of the given kind, key lengths and query offsets when not NULL, a window
 * (win_left, 0) unless win_left is −2; sinks and ALiBi slopes for d->heads (at most 16) when asked. */
void tu_variants_apply(clattn_sdpa_desc *d, tu_variants *v, clattn_causal causal, const size_t *key_lengths,
                       const long long *offsets, long long win_left, int sinks, int alibi);

/* Additive mask of `layout` (L,S) or (B,H,L,S): uniform [-1,1]; TU_MASKF_INF: about 1/6 of the
 * entries −inf; TU_MASKF_ROWINF: in matrix t, row t % L entirely −inf. Tracked; *n gets the count. */
#define TU_MASKF_INF 1
#define TU_MASKF_ROWINF 2
float *tu_make_mask(clattn_mask_layout layout, size_t B, size_t H, size_t L, size_t S, int flags,
                    uint64_t seed, size_t *n);

/* Convenience: Dv of an sdpa desc, element counts of its tensors. */
size_t tu_sdpa_dv(const clattn_sdpa_desc *d);

/* ---------------------------------------------------------------------------------------------- */
/* Tensors in a storage type (clattn_dtype)                                                        */
/* ---------------------------------------------------------------------------------------------- */

/* A tensor of n elements stored as `type`: its bytes, the floats they stand for (the reference's
 * input: the rounded values, or an int8 value times its row's scale), and for int8 the scales of its
 * rows of `row` elements. All tracked. */
typedef struct tu_typed {
    clattn_dtype type;
    size_t n, row;
    void *bytes;
    float *values;
    float *scales; /* int8, scaled FP8: n / row scales; else NULL */
} tu_typed;

/* src (n floats) stored as `type`: rounded to nearest even, for int8 quantised symmetrically per row
 * (scale = max |x| / 127), for the block formats and FP8 by formats_ref.c (no row scales). */
tu_typed tu_typed_make(clattn_dtype type, const float *src, size_t n, size_t row);
/* An FP8 type with a scale per row (max |x| / the format's largest value). */
tu_typed tu_typed_make_scaled(clattn_dtype type, const float *src, size_t n, size_t row);
/* Its bytes in a new (tracked) device buffer of exactly their size; tu_typed_scales the int8 scales
 * (NULL for other types). */
cl_mem tu_typed_upload(clattn_context *ctx, const tu_typed *t);
cl_mem tu_typed_scales(clattn_context *ctx, const tu_typed *t);
/* n elements of `type` read back from m and widened (tracked floats; int8 is not an output). */
float *tu_typed_read(clattn_context *ctx, cl_mem m, clattn_dtype type, size_t n);
/* The same from host bytes. */
float *tu_typed_widen(const void *bytes, clattn_dtype type, size_t n);
/* The quantisation-error cases' inputs: q (nq), k and v (nk, rows of D) uniform in [−1, 1] (seeds 71 to
 * 73), and with `outliers` K's channels 5, 37, 69, … 20× larger in every row, as keys have (tracked). */
void tu_error_inputs(size_t nq, size_t nk, size_t D, int outliers, float **q, float **k, float **v);
/* The relative RMS error of out against exact (‖out − exact‖ / ‖exact‖), asserted within (0, bound]: a
 * quantised cache's cost against the float32 one (0 would mean nothing was quantised). */
double tu_relative_rms_within(const float *out, const double *exact, size_t n, double bound);
/* Launches of the kernel kind `name` (a clattn_profile_entry name) since the context's profile was last
 * read (0 if none ran); reads, and so restarts, the profile. The context must profile. */
unsigned long long tu_launches_of(clattn_context *ctx, const char *name);

/* check_close_rounded with the output type's rounding. */
/* A context on device dev under `tuning` (clattn_context_options.tuning: "fused=…", "class=gpu" …); the caller frees
 * it. */
clattn_context *tu_tuned_context(size_t dev, const char *tuning);
/* A gradient against its fp64 reference: |got − ref| within floor + 16·2^-23·(max|ref| + |ref|), plus half a unit in
 * the last place of a 16-bit type at the value (type float32: none); the worst error and ratio recorded. */
void tu_check_gradient(const char *what, const float *got, const double *ref, size_t n, clattn_dtype type,
                       double floor);
void tu_check_typed(const char *what, const float *out, const double *ref, size_t n, clattn_dtype type,
                    double *max_err);

#endif /* TU_NO_OPENCL */

#endif /* CLATTN_TEST_UTIL_H */
