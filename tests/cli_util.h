/* What the end-to-end tests of the clattn tool (tests/test_cli_*.c) share: spawning the built binary
 * (CLATTN_EXE) with its stdout and stderr captured, argument lists, the checks of exit statuses and
 * messages, .npy files written and read back, random data, and the comparison with the fp64 reference.
 *
 * These processes never touch OpenCL themselves (they only spawn the tool), so check's CK_NOFORK mode is
 * used for speed rather than necessity — and, since check enforces no timeout without fork, every spawned
 * process is killed after cli_run_timeout_s seconds instead (each binary's meson timeout sits above it).
 * Exit status 77 (meson's SKIP) when `clattn devices` finds no OpenCL platform. Everything is written under
 * one scratch folder, a sub-folder per test case, removed at the end. */
#ifndef CLATTN_CLI_UTIL_H
#define CLATTN_CLI_UTIL_H

#define TU_NO_OPENCL /* this process never calls OpenCL: the OpenCL-free part of the test utility */
#include "test_util.h"
#include "npy.h"
#include "reference.h"

#include <check.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h> /* pid_t */

enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2, EXIT_NO_PLATFORM = 3 };

/* ---------------------------------------------------------------------------------------------- */
/* Folders, tracked allocations                                                                    */
/* ---------------------------------------------------------------------------------------------- */

extern const char *exe;  /* the clattn binary */
extern const char *root; /* scratch folder: captures and one sub-folder per test case */
extern char dir[1100];   /* the current case's folder */
extern int cli_run_timeout_s; /* a spawned process is killed after this long (cli_main sets it) */

void *track(void *p);     /* tu_track */
void *xmalloc(size_t n);  /* tracked, zeroed */
char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2), returns_nonnull)); /* tracked */
const char *P(const char *name) __attribute__((returns_nonnull)); /* a path inside the current case's folder */
bool exists(const char *path);
const char *list_dir(const char *path); /* entry names, sorted, one per line ("" when empty) */

/* A test case whose fixture gives each test its own folder and frees its allocations. */
TCase *cli_tcase(const char *name);
/* One cli_tcase of a suite: its tests (NULL-terminated), each run `loops` times (_i = 0 … loops − 1). */
typedef struct cli_group {
    const char *name;
    int loops;
    const TTest *tests[16];
} cli_group;
Suite *cli_suite(const char *title, const cli_group *groups, size_t n_groups);

/* ---------------------------------------------------------------------------------------------- */
/* Running processes                                                                               */
/* ---------------------------------------------------------------------------------------------- */

/* The last process run: its exit status (128 + signal when killed), stdout, stderr, command line. */
typedef struct cli_result {
    int status;
    char *out, *err;
    char warn[4096]; /* the lines "clattn CMD: warning: ..." taken out of err (they depend on the device) */
    char cmd[4096];
} cli_result;
extern cli_result R;

/* Spawns argv (argv[0] looked up in PATH unless it has a '/'), stdin from stdin_path (or /dev/null), and
 * captures into R. env_extra: "NAME=value" entries set and "NAME" entries removed in the child only.
 * Returns 0, or -1 with a reason in why (not started, or killed after cli_run_timeout_s). */
int spawn_capture(const char *const *argv, const char *const *env_extra, const char *stdin_path, char *why,
                  size_t why_size);
/* spawn_capture that must succeed, with the warnings split off; returns R.status. */
int run(const char *const *argv, const char *const *env_extra, const char *stdin_path);
/* run (stdin from /dev/null) with the child's stdout going to stdout_path (R.out is then ""); NULL: captured. */
int run_to(const char *const *argv, const char *const *env_extra, const char *stdout_path);
/* run (stdin from /dev/null) with its own time limit. */
int run_within(int seconds, const char *const *argv, const char *const *env_extra);
/* Waits for pid at most `seconds`, then kills it (with its process group when it leads one). Its exit
 * status (128 + signal when killed by one), -1 when it was killed for time, -2 when waitpid failed. */
int wait_deadline(pid_t pid, int seconds);

/* An argument list under construction (argv[0] = the tool). */
typedef struct argl {
    const char *v[128];
    size_t n;
} argl;
void add(argl *a, ...);                            /* NULL-terminated */
void add_v(argl *a, va_list ap);                   /* the same, from a va_list (argv[0] not added) */
void add_list(argl *a, const char *const *list);   /* NULL-terminated list, or NULL */
int run_args(const argl *a, const char *const *env_extra);
void run_expect(const argl *a, int want);          /* run_args (own environment), then expect_status */
int clattn_env(const char *const *env_extra, ...); /* clattn ARGS... (NULL-terminated) */
/* clattn ARGS... with the test's own environment. */
#define CLATTN(...) clattn_env(NULL, __VA_ARGS__, (const char *)NULL)

void expect_status(int want);
#define EXPECT(code, ...)                                                                                     \
    do {                                                                                                      \
        CLATTN(__VA_ARGS__);                                                                                  \
        expect_status(code);                                                                                  \
    } while (0)
void expect_in(const char *what, const char *text, const char *needle);
bool contains_n(const char *s, size_t n, const char *needle); /* whether the n bytes at s hold needle */
size_t count_lines(const char *s);
/* python3 -c script args... with stdin from stdin_path; it must exit 0. */
void python_check(const char *script, const char *stdin_path, const char *const *args);
/* The last command's stdout saved as `name` and given to python3 -c script on its stdin. */
void python_check_stdout(const char *name, const char *script);

/* ---------------------------------------------------------------------------------------------- */
/* .npy files, data, comparisons                                                                   */
/* ---------------------------------------------------------------------------------------------- */

extern tu_rng rng; /* each test sets rng.state to its seed */
double rng_unit(void); /* uniform in [0, 1) */
float *rand_floats(size_t n, float a); /* uniform in [-a, a], tracked */
size_t product(size_t ndim, const size_t *shape);
const char *shape_text(size_t ndim, const size_t *shape);

const char *save_f32(const char *name, const float *data, size_t ndim, const size_t *shape); /* returns its path */
/* A hand-made .npy: version `major` header {'descr': DESCR, 'fortran_order': FORTRAN, 'shape': SHAPE, }
 * padded as numpy pads it, then `bytes` bytes of data. Returns its path. */
const char *save_raw(const char *name, unsigned major, const char *descr, const char *fortran, const char *shape,
                     const void *data, size_t bytes);
const char *save_i64(const char *name, const long long *v, size_t n);
const char *save_i32(const char *name, const long long *v, size_t n);
/* src rounded into a '<f2' or '<u2' (bfloat16) file; *held (tracked) gets the values the file holds. */
const char *save_narrow(const char *name, npy_dtype dtype, const float *src, size_t ndim, const size_t *shape,
                        const float **held);
const char *f32_file(const char *name, size_t ndim, const size_t *shape); /* random values in [-1, 1] */

/* A float32 .npy that must have exactly the given shape. */
float *load_f32(const char *path, size_t ndim, const size_t *shape);
/* load_f32, then expect_close against ref (as many values as the shape holds); returns what it read. */
const float *expect_file_close(const char *what, const char *path, size_t ndim, const size_t *shape,
                               const double *ref);
/* Any float .npy output ('<f4', '<f2', or '<u2' bfloat16 bit patterns) of n elements as floats. */
float *load_any(const char *path, size_t n, npy_dtype *dtype);

/* |got − ref| ≤ 2e-5 + 1e-4·|ref| everywhere; infinities must match exactly; NaN never passes. */
void expect_close(const char *what, const float *got, const double *ref, size_t n);
/* The same plus half an ulp of a type with `bits` mantissa bits (half: 10, −14; bfloat16: 7, −126). */
void expect_close_rounded(const char *what, const float *got, const double *ref, size_t n, int bits, int min_exp);

/* The reference's description of sdpa over Q (B,H,L,D), K (B,N,S,D), V (B,N,S,Dv) under masks m (NULL:
 * none); N = 0 means H, Dv = 0 means D; every other field at CLATTN_SDPA_DESC_INIT's value. */
clattn_sdpa_desc sdpa_desc(size_t B, size_t H, size_t N, size_t L, size_t S, size_t D, size_t Dv,
                           const clattn_masks *m);
/* The masks a run's flags ask for (additive: a (B,H,L,S) mask is passed to the reference beside them). */
clattn_masks flag_masks(clattn_causal causal, const size_t *key_lengths, const long long *offsets,
                        const clattn_window *window, bool additive);
/* Q·Kᵀ/√D of every key (rows × keys per matrix, `mats` matrices), soft-capped (cap·tanh(s/cap)) when
 * cap > 0, unmasked: --scores qk and softcapped, computed apart from the reference's own score path. */
void raw_scores(const float *q, const float *k, size_t mats, size_t rows, size_t keys, size_t D, double cap,
                double *out);

/* An additive mask of shape mshape (rank ≤ 4, NumPy broadcasting) expanded to (B,H,L,S). */
float *broadcast_mask(const float *m, size_t ndim, const size_t *mshape, size_t B, size_t H, size_t L, size_t S);
/* n entries uniform in [-1, 1], about one in five −inf. */
float *rand_mask(size_t n);
/* (A, X, Y, Z) → (A, X, Y + Y2, Z) floats, AX = A·X: each (a, x) block of `first` followed by that of
 * `second` (past and new rows: what --present-k and --present-v hold). */
float *concat_rows(const float *first, size_t Y, const float *second, size_t Y2, size_t AX, size_t Z);
/* (A,X,Y,Z) → (A,Y,X,Z) of elements of `size` bytes: (B,H,L,D) to (B,L,H,D) and back. */
void *swap_middle(const void *in, size_t size, size_t A, size_t X, size_t Y, size_t Z);
/* Press et al.'s ALiBi slopes for n heads (their get_slopes), and the same rounded to float. */
void alibi_get_slopes(size_t n, double *slopes);
const float *alibi_auto(size_t n);

/* ---------------------------------------------------------------------------------------------- */
/* main                                                                                            */
/* ---------------------------------------------------------------------------------------------- */

/* Reads CLATTN_EXE, makes the scratch folder, skips (77) without an OpenCL platform, runs the suite in
 * CK_NOFORK mode with each spawned process limited to run_timeout_s, prints the count and time. */
int cli_main(const char *name, Suite *(*make_suite)(void), int run_timeout_s);

#endif
