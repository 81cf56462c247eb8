/* End-to-end tests of the clattn command-line tool, run as a user runs it: every case spawns the built
 * binary (CLATTN_EXE), captures its stdout and stderr, and checks the exit status exactly (0 ok, 1 OpenCL
 * or library failure, 2 usage or input-file error, 3 no platform), the messages, and the .npy/.svg files
 * it writes, which are compared with the fp64 reference of tests/reference.c.
 *
 * This process never touches OpenCL itself (it only spawns the tool), so check's CK_NOFORK mode is
 * used for speed rather than necessity. Exit status 77 (meson's SKIP) when `clattn devices` finds no
 * OpenCL platform. Everything is written under one scratch folder (tu_scratch_make), removed at the end. */
#define _POSIX_C_SOURCE 200809L /* posix_spawn, nanosleep, clock_gettime */

#define TU_NO_OPENCL /* this process never calls OpenCL: the OpenCL-free part of the test utility */
#include "test_util.h"
#include "npy.h"
#include "reference.h"
#include "tutorial_example.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2, EXIT_NO_PLATFORM = 3 };

/* One process; a warm PoCL cache makes each take well under a second, but `devices --check` compiles every
 * path's kernels cold, and under the sanitizer build beside another suite's compiles that passed 120 s. */
#define RUN_TIMEOUT_S 240 /* (within the test case's 300 s) */

/* ---------------------------------------------------------------------------------------------- */
/* Folders, tracked allocations                                                                    */
/* ---------------------------------------------------------------------------------------------- */

static const char *exe;    /* the clattn binary */
static const char *root;   /* scratch folder: captures and one sub-folder per test case */
static char dir[1100];     /* the current case's folder */
static unsigned case_no;

/* Allocations freed after each case (test_util's tracked host memory). */
static void *track(void *p) { return tu_track(p); }
static void *xmalloc(size_t n) { return tu_track_malloc(n); }

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    const int n = vsnprintf(NULL, 0, f, ap);
    va_end(ap);
    char *s = xmalloc((size_t)n + 1);
    va_start(ap, f);
    vsnprintf(s, (size_t)n + 1, f, ap);
    va_end(ap);
    return s;
}

/* A path inside the current case's folder. */
static const char *P(const char *name) { return fmt("%s/%s", dir, name); }

static void case_setup(void)
{
    snprintf(dir, sizeof dir, "%s/case%03u", root, ++case_no);
    ck_assert_msg(mkdir(dir, 0700) == 0, "mkdir %s: %s", dir, strerror(errno));
}

/* The case's folder stays (root is removed at the end); its allocations are freed. */
static void case_teardown(void) { tu_release_host(); }

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* Names of the entries of a folder, one per line ("" when empty). */
static const char *list_dir(const char *path)
{
    DIR *d = opendir(path);
    ck_assert_msg(d != NULL, "opendir %s: %s", path, strerror(errno));
    char *names = fmt("%s", "");
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            names = fmt("%s%s\n", names, e->d_name);
    closedir(d);
    return names;
}

/* ---------------------------------------------------------------------------------------------- */
/* Running processes                                                                               */
/* ---------------------------------------------------------------------------------------------- */

/* The last process run: its exit status (128 + signal when killed), stdout, stderr, command line. */
static struct {
    int status;
    char *out, *err;
    char warn[4096]; /* the lines "clattn CMD: warning: ..." taken out of err */
    char cmd[4096];
} R;

/* The library's warnings (printed by the tool as "clattn CMD: warning: ...") depend on the device —
 * a device limited to small work groups warns that CLBlast cannot run there — so they are moved from
 * R.err to R.warn, and every check of stderr sees the same text on every device. */
static void split_warnings(void)
{
    R.warn[0] = '\0';
    char *read = R.err, *write = R.err;
    while (*read) {
        const size_t len = strcspn(read, "\n") + (read[strcspn(read, "\n")] == '\n');
        const char *colon = strstr(read, ": warning: ");
        if (strncmp(read, "clattn ", 7) == 0 && colon && colon < read + len) {
            const size_t room = sizeof R.warn - strlen(R.warn) - 1;
            strncat(R.warn, read, len < room ? len : room);
        } else {
            memmove(write, read, len);
            write += len;
        }
        read += len;
    }
    *write = '\0';
}

/* Spawns argv (argv[0] looked up in PATH unless it has a '/'), stdin from stdin_path (or /dev/null),
 * stdout and stderr captured into R. env_extra: "NAME=value" entries set and "NAME" entries removed
 * in the child's environment only. Returns 0, or -1 with a reason in why. */
static int spawn_capture(const char *const *argv, const char *const *env_extra, const char *stdin_path,
                         char *why, size_t why_size)
{
    char out_path[600], err_path[600];
    snprintf(out_path, sizeof out_path, "%s/.stdout", root);
    snprintf(err_path, sizeof err_path, "%s/.stderr", root);

    size_t used = 0;
    R.cmd[0] = '\0';
    for (size_t i = 0; argv[i] && used + 1 < sizeof R.cmd; i++)
        used += (size_t)snprintf(R.cmd + used, sizeof R.cmd - used, i ? " %s" : "%s",
                                 i == 0 && strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[i]);
    if (used >= sizeof R.cmd)
        used = sizeof R.cmd - 1;
    for (size_t i = 0; env_extra && env_extra[i] && used + 1 < sizeof R.cmd; i++)
        used += (size_t)snprintf(R.cmd + used, sizeof R.cmd - used, "%s[env %s]", i ? " " : "  ", env_extra[i]);

    size_t n_env = 0, n_extra = 0;
    while (environ[n_env])
        n_env++;
    while (env_extra && env_extra[n_extra])
        n_extra++;
    char **envp = calloc(n_env + n_extra + 1, sizeof *envp);
    if (!envp) {
        snprintf(why, why_size, "out of memory");
        return -1;
    }
    size_t k = 0;
    for (size_t i = 0; i < n_env; i++) {
        bool overridden = false;
        for (size_t j = 0; j < n_extra && !overridden; j++) {
            const size_t name_len = strcspn(env_extra[j], "=");
            overridden = strncmp(environ[i], env_extra[j], name_len) == 0 && environ[i][name_len] == '=';
        }
        if (!overridden)
            envp[k++] = environ[i];
    }
    for (size_t j = 0; j < n_extra; j++)
        if (strchr(env_extra[j], '='))
            envp[k++] = (char *)env_extra[j];
    envp[k] = NULL;

    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, stdin_path ? stdin_path : "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    pid_t pid;
    const int rc = posix_spawnp(&pid, argv[0], &fa, NULL, (char *const *)argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    free(envp);
    if (rc != 0) {
        snprintf(why, why_size, "cannot start %s: %s", argv[0], strerror(rc));
        return -1;
    }

    struct timespec start, now, nap = {0, 1000000};
    clock_gettime(CLOCK_MONOTONIC, &start);
    int st = 0;
    for (;;) {
        const pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid)
            break;
        if (w < 0 && errno != EINTR) {
            snprintf(why, why_size, "waitpid: %s", strerror(errno));
            return -1;
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - start.tv_sec > RUN_TIMEOUT_S) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            snprintf(why, why_size, "`%s` did not finish within %d s (killed)", R.cmd, RUN_TIMEOUT_S);
            return -1;
        }
        nanosleep(&nap, NULL);
    }
    R.status = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 255;
    free(R.out);
    free(R.err);
    R.out = tu_read_file(out_path, NULL);
    R.err = tu_read_file(err_path, NULL);
    if (!R.out || !R.err) {
        snprintf(why, why_size, "cannot read the captured output of `%s`", R.cmd);
        return -1;
    }
    return 0;
}

static int run(const char *const *argv, const char *const *env_extra, const char *stdin_path)
{
    char why[1024];
    ck_assert_msg(spawn_capture(argv, env_extra, stdin_path, why, sizeof why) == 0, "%s", why);
    split_warnings();
    return R.status;
}

/* An argument list under construction (argv[0] = the tool). */
typedef struct argl {
    const char *v[128];
    size_t n;
} argl;

static void add_v(argl *a, va_list ap)
{
    for (const char *s; (s = va_arg(ap, const char *)) != NULL;) {
        ck_assert(a->n + 2 < sizeof a->v / sizeof a->v[0]);
        a->v[a->n++] = s;
    }
    a->v[a->n] = NULL;
}

static void add(argl *a, ...)
{
    if (a->n == 0)
        a->v[a->n++] = exe;
    va_list ap;
    va_start(ap, a);
    add_v(a, ap);
    va_end(ap);
}

static void add_list(argl *a, const char *const *list)
{
    for (size_t i = 0; list && list[i]; i++)
        add(a, list[i], NULL);
}

static int run_args(const argl *a, const char *const *env_extra) { return run(a->v, env_extra, NULL); }

static int clattn_env(const char *const *env_extra, ...)
{
    argl a = {{0}, 0};
    a.v[a.n++] = exe;
    va_list ap;
    va_start(ap, env_extra);
    add_v(&a, ap);
    va_end(ap);
    return run(a.v, env_extra, NULL);
}

/* clattn ARGS... with the test's own environment. */
#define CLATTN(...) clattn_env(NULL, __VA_ARGS__, (const char *)NULL)

static void expect_status(int want)
{
    ck_assert_msg(R.status == want, "`%s` exited %d, expected %d\n--- stderr:\n%.3000s--- stdout:\n%.1500s", R.cmd,
                  R.status, want, R.err, R.out);
}

#define EXPECT(code, ...)                                                                                     \
    do {                                                                                                      \
        CLATTN(__VA_ARGS__);                                                                                  \
        expect_status(code);                                                                                  \
    } while (0)

static void expect_in(const char *what, const char *text, const char *needle)
{
    ck_assert_msg(strstr(text, needle) != NULL, "`%s`: %s does not mention \"%s\":\n%.3000s", R.cmd, what, needle,
                  text);
}

/* Whether the n bytes at s contain needle. */
static bool contains_n(const char *s, size_t n, const char *needle)
{
    const size_t m = strlen(needle);
    for (size_t i = 0; i + m <= n; i++)
        if (memcmp(s + i, needle, m) == 0)
            return true;
    return false;
}

static size_t count_lines(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* Runs python3 -c script args... with stdin from stdin_path; it must exit 0. */
static void python_check(const char *script, const char *stdin_path, const char *const *args)
{
    argl a = {{0}, 0};
    a.v[a.n++] = "python3";
    a.v[a.n++] = "-c";
    a.v[a.n++] = script;
    for (size_t i = 0; args && args[i]; i++)
        a.v[a.n++] = args[i];
    a.v[a.n] = NULL;
    run(a.v, NULL, stdin_path);
    ck_assert_msg(R.status == 0, "python check failed (exit %d):\n%.3000s", R.status, R.err);
}

/* Saves the last command's stdout as `name` in the test's folder and runs python3 -c script on it
 * (its stdin); it must exit 0. */
static void python_check_stdout(const char *name, const char *script)
{
    const char *path = P(name);
    tu_write_file(path, R.out, strlen(R.out));
    python_check(script, path, NULL);
}

/* ---------------------------------------------------------------------------------------------- */
/* .npy files, data, comparisons                                                                   */
/* ---------------------------------------------------------------------------------------------- */

static tu_rng rng; /* each test sets rng.state to its seed */

static double rng_unit(void) { return tu_rng_unit(&rng); } /* uniform in [0, 1) */

static float *rand_floats(size_t n, float a)
{
    float *p = xmalloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++)
        p[i] = tu_rng_uniform(&rng, a);
    return p;
}

static size_t product(size_t ndim, const size_t *shape)
{
    size_t n = 1;
    for (size_t i = 0; i < ndim; i++)
        n *= shape[i];
    return n;
}

static const char *shape_text(size_t ndim, const size_t *shape)
{
    char *s = fmt("(");
    for (size_t i = 0; i < ndim; i++)
        s = fmt("%s%zu%s", s, shape[i], i + 1 < ndim ? ", " : ndim == 1 ? "," : "");
    return fmt("%s)", s);
}

/* A float32 .npy written with the library's writer; returns its path. */
static const char *save_f32(const char *name, const float *data, size_t ndim, const size_t *shape)
{
    const char *path = P(name);
    char err[512];
    ck_assert_msg(npy_save_f32(path, data, ndim, shape, err, sizeof err) == 0, "%s: %s", path, err);
    return path;
}

/* A hand-made .npy: version `major` header {'descr': DESCR, 'fortran_order': FORTRAN, 'shape': SHAPE, }
 * padded as numpy pads it, then `bytes` bytes of data. Returns its path. */
static const char *save_raw(const char *name, unsigned major, const char *descr, const char *fortran,
                            const char *shape, const void *data, size_t bytes)
{
    char header[512];
    size_t len = (size_t)snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }",
                                  descr, fortran, shape);
    const size_t prefix = major == 1 ? 10 : 12;
    const size_t pad = (64 - (prefix + len + 1) % 64) % 64;
    memset(header + len, ' ', pad);
    len += pad;
    header[len++] = '\n';
    unsigned char *img = xmalloc(prefix + len + bytes);
    memcpy(img, "\x93NUMPY", 6);
    img[6] = (unsigned char)major;
    img[7] = 0;
    for (size_t i = 0; i < prefix - 8; i++)
        img[8 + i] = (unsigned char)(len >> (8 * i));
    memcpy(img + prefix, header, len);
    if (bytes)
        memcpy(img + prefix + len, data, bytes);
    const char *path = P(name);
    tu_write_file(path, img, prefix + len + bytes);
    return path;
}

static const char *save_i64(const char *name, const long long *v, size_t n)
{
    int64_t *d = xmalloc(n * sizeof *d);
    for (size_t i = 0; i < n; i++)
        d[i] = v[i];
    return save_raw(name, 1, "<i8", "False", fmt("(%zu,)", n), d, n * sizeof *d);
}

static const char *save_i32(const char *name, const long long *v, size_t n)
{
    int32_t *d = xmalloc(n * sizeof *d);
    for (size_t i = 0; i < n; i++)
        d[i] = (int32_t)v[i];
    return save_raw(name, 1, "<i4", "False", fmt("(%zu,)", n), d, n * sizeof *d);
}

/* Loads a float32 .npy that must have exactly the given shape. */
static float *load_f32(const char *path, size_t ndim, const size_t *shape)
{
    npy_array a;
    char err[512];
    ck_assert_msg(npy_load(path, &a, err, sizeof err) == 0, "`%s`: reading %s: %s", R.cmd, path, err);
    track(a.data);
    ck_assert_msg(a.dtype == NPY_F4, "%s: dtype %s, expected <f4", path, npy_dtype_name(a.dtype));
    ck_assert_msg(a.ndim == ndim && memcmp(a.shape, shape, ndim * sizeof *shape) == 0,
                  "`%s`: %s has shape %s, expected %s", R.cmd, path, shape_text(a.ndim, a.shape),
                  shape_text(ndim, shape));
    return a.data;
}

/* |got − ref| ≤ 2e-5 + 1e-4·|ref| everywhere; infinities must match exactly; NaN never passes. */
static void expect_close(const char *what, const float *got, const double *ref, size_t n)
{
    tu_set_label("`%s`", R.cmd);
    check_close_named(what, got, ref, n, NULL);
}

/* Expands an additive mask of shape mshape (rank ≤ 4, NumPy broadcasting) to (B,H,L,S). */
static float *broadcast_mask(const float *m, size_t ndim, const size_t *mshape, size_t B, size_t H, size_t L,
                             size_t S)
{
    size_t sh[4] = {1, 1, 1, 1};
    for (size_t d = 0; d < ndim; d++)
        sh[4 - ndim + d] = mshape[d];
    float *full = xmalloc(B * H * L * S * sizeof *full);
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++)
            for (size_t i = 0; i < L; i++)
                for (size_t j = 0; j < S; j++)
                    full[((b * H + h) * L + i) * S + j] =
                        m[(((sh[0] > 1 ? b : 0) * sh[1] + (sh[1] > 1 ? h : 0)) * sh[2] + (sh[2] > 1 ? i : 0)) * sh[3] +
                          (sh[3] > 1 ? j : 0)];
    return full;
}

/* A mask of n entries, uniform in [-1, 1] with about one in five entries −inf. */
static float *rand_mask(size_t n)
{
    float *m = rand_floats(n, 1.0f);
    for (size_t i = 0; i < n; i++)
        if (rng_unit() < 0.2)
            m[i] = -INFINITY;
    return m;
}

/* ---------------------------------------------------------------------------------------------- */
/* sdpa and mha against the reference                                                              */
/* ---------------------------------------------------------------------------------------------- */

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
    const long long *offsets;  /* B values */
    const clattn_window *window;
    const char *const *extra;  /* the mask and variant flags */
    uint64_t seed;
} sdpa_spec;

/* What a check read back from the tool's files, in their layout. */
typedef struct sdpa_result {
    const float *out, *w, *lse;
} sdpa_result;

/* Shape of a tensor of rank `rank` whose last two dimensions are (a, b), or (a) when b = 0. With
 * heads_layout (rank 3 as (B,L,H·D)): (B, a, H·b). */
static size_t tensor_shape(size_t rank, bool heads_layout, size_t B, size_t H, size_t a, size_t b, size_t *shape)
{
    size_t n = 0;
    if (heads_layout) {
        shape[n++] = B;
        shape[n++] = a;
        shape[n++] = H * b;
        return n;
    }
    if (rank == 4)
        shape[n++] = B;
    if (rank >= 3)
        shape[n++] = H;
    shape[n++] = a;
    if (b)
        shape[n++] = b;
    return n;
}

/* (A,X,Y,Z) → (A,Y,X,Z) of elements of `size` bytes: (B,H,L,D) to (B,L,H,D) and back. */
static void *swap_middle(const void *in, size_t size, size_t A, size_t X, size_t Y, size_t Z)
{
    const char *src = in;
    char *out = xmalloc(A * X * Y * Z * size);
    for (size_t a = 0; a < A; a++)
        for (size_t x = 0; x < X; x++)
            for (size_t y = 0; y < Y; y++)
                memcpy(out + ((a * Y + y) * X + x) * Z * size, src + ((a * X + x) * Y + y) * Z * size, Z * size);
    return out;
}

/* The ALiBi slopes of Press et al. for n heads, as their reference code get_slopes computes them:
 *   def get_slopes_power_of_2(n): start = 2**(-2**-(math.log2(n)-3)); return [start*start**i for i in range(n)]
 *   closest = 2**floor(log2(n)); get_slopes_power_of_2(closest) + get_slopes(2*closest)[0::2][:n-closest]. */
static void alibi_get_slopes(size_t n, double *slopes)
{
    if ((n & (n - 1)) == 0) {
        const double start = pow(2.0, -pow(2.0, -(log2((double)n) - 3.0)));
        for (size_t i = 0; i < n; i++)
            slopes[i] = start * pow(start, (double)i);
        return;
    }
    const size_t closest = (size_t)1 << (size_t)floor(log2((double)n));
    double *twice = xmalloc(2 * closest * sizeof *twice);
    alibi_get_slopes(closest, slopes);
    alibi_get_slopes(2 * closest, twice);
    for (size_t i = 0; i < n - closest; i++)
        slopes[closest + i] = twice[2 * i];
}

/* alibi_get_slopes rounded to float, as `--alibi auto` must give them. */
static const float *alibi_auto(size_t n)
{
    double *d = xmalloc(n * sizeof *d);
    float *f = xmalloc(n * sizeof *f);
    alibi_get_slopes(n, d);
    for (size_t i = 0; i < n; i++)
        f[i] = (float)d[i];
    return f;
}

static const char *save_input(const char *name, const float *f, size_t ndim, const size_t *shape, bool f8,
                              double **as_double)
{
    if (!f8)
        return save_f32(name, f, ndim, shape);
    /* Doubles that are not floats: the tool must round them to the nearest float, as the reference's
     * inputs are (the caller replaces its floats with the rounded values). */
    const size_t n = product(ndim, shape);
    double *d = xmalloc(n * sizeof *d);
    for (size_t i = 0; i < n; i++)
        d[i] = (double)f[i] + (2 * rng_unit() - 1) * 1e-9;
    *as_double = d;
    return save_raw(name, 1, "<f8", "False", shape_text(ndim, shape), d, n * sizeof *d);
}

static sdpa_result sdpa_check(const sdpa_spec *s)
{
    ck_assert(s->rank == 4 || (s->rank == 3 && s->heads_layout) || (s->B == 1 && (s->rank == 3 || s->H == 1)));
    ck_assert(!(s->heads_layout && (s->rank != 3 || s->f8)));
    rng.state = s->seed;
    const size_t B = s->B, H = s->H, L = s->L, S = s->S, D = s->D, Dv = s->Dv, N = s->kv_heads ? s->kv_heads : H;
    const bool hl = s->heads_layout;
    float *q = rand_floats(B * H * L * D, 1.5f), *k = rand_floats(B * N * S * D, 1.5f);
    float *v = rand_floats(B * N * S * Dv, 1.0f);
    size_t qs[4], ks[4], vs[4], os[4], ws[4], ls[4];
    const size_t r = tensor_shape(s->rank, hl, B, H, L, D, qs);
    tensor_shape(s->rank, hl, B, N, S, D, ks);
    tensor_shape(s->rank, hl, B, N, S, Dv, vs);
    tensor_shape(s->rank, hl, B, H, L, Dv, os);
    const size_t wr = tensor_shape(hl ? 4 : s->rank, false, B, H, L, S, ws);
    const size_t lr = tensor_shape(hl ? 4 : s->rank, false, B, H, L, 0, ls);

    double *qd = NULL, *vd = NULL;
    const char *qp, *kp, *vp;
    if (hl) { /* the heads side by side in each row: (B,L,H·D) */
        qp = save_f32("q.npy", swap_middle(q, sizeof *q, B, H, L, D), r, qs);
        kp = save_f32("k.npy", swap_middle(k, sizeof *k, B, N, S, D), r, ks);
        vp = save_f32("v.npy", swap_middle(v, sizeof *v, B, N, S, Dv), r, vs);
    } else {
        qp = save_input("q.npy", q, r, qs, s->f8, &qd);
        kp = save_f32("k.npy", k, r, ks);
        vp = save_input("v.npy", v, r, vs, s->f8, &vd);
    }
    for (size_t i = 0; qd && i < B * H * L * D; i++)
        q[i] = (float)qd[i];
    for (size_t i = 0; vd && i < B * N * S * Dv; i++)
        v[i] = (float)vd[i];

    argl a = {{0}, 0};
    add(&a, "sdpa", "--q", qp, "--k", kp, "--v", vp, "--out", P("out.npy"), "--weights", P("w.npy"), "--lse",
        P("lse.npy"), NULL);
    const bool pass_scale = s->scale != 0.0f || s->scale_zero;
    if (pass_scale && s->scale_eq)
        add(&a, fmt("--scale=%.9g", s->scale), NULL);
    else if (pass_scale)
        add(&a, "--scale", fmt("%.9g", s->scale), NULL);
    if (hl)
        add(&a, "--heads", fmt("%zu", H), NULL);
    if (s->kv_heads)
        add(&a, "--kv-heads", fmt("%zu", N), NULL);
    add_list(&a, s->extra);
    run_args(&a, NULL);
    expect_status(EXIT_OK);

    sdpa_result got = {load_f32(P("out.npy"), r, os), load_f32(P("w.npy"), wr, ws), load_f32(P("lse.npy"), lr, ls)};
    clattn_masks m = CLATTN_MASKS_INIT;
    m.causal = s->causal;
    m.key_lengths = s->key_lengths;
    m.additive = s->mask ? CLATTN_MASK_B_H_L_S : CLATTN_MASK_NONE;
    m.query_offsets = s->offsets;
    m.window = s->window;
    clattn_sdpa_desc d = CLATTN_SDPA_DESC_INIT;
    d.batch = B;
    d.heads = H;
    d.kv_heads = N;
    d.q_len = L;
    d.kv_len = S;
    d.qk_dim = D;
    d.v_dim = Dv;
    d.scale = pass_scale ? s->scale : CLATTN_SCALE_DEFAULT;
    d.masks = &m;
    d.softcap = s->softcap;
    d.sinks = s->sinks;
    d.alibi_slopes = s->alibi;
    double *ro = xmalloc(B * H * L * Dv * sizeof *ro), *rw = xmalloc(B * H * L * S * sizeof *rw);
    double *rl = xmalloc(B * H * L * sizeof *rl);
    ref_sdpa(&d, q, k, v, s->mask, ro, rw, rl);
    expect_close("out", got.out, hl ? swap_middle(ro, sizeof *ro, B, H, L, Dv) : ro, B * H * L * Dv);
    expect_close("weights", got.w, rw, B * H * L * S);
    expect_close("lse", got.lse, rl, B * H * L);
    return got;
}

typedef struct mha_spec {
    size_t rank, B, L, S, d_model, d_kv, H, dk, dv, d_out;
    bool cross, biases, wo, bo;
    float scale;
    size_t kv_heads;           /* W_K and W_V of this many heads, passed as --kv-heads (0: H, no flag) */
    clattn_causal causal;      /* what the flags in extra ask for */
    const size_t *key_lengths;
    float softcap;
    const float *sinks, *alibi;
    const long long *offsets;
    const clattn_window *window;
    const char *const *extra;
    uint64_t seed;
} mha_spec;

static void mha_check(const mha_spec *s)
{
    ck_assert(s->rank == 3 || s->B == 1);
    rng.state = s->seed;
    const size_t B = s->B, L = s->L, S = s->cross ? s->S : s->L, dm = s->d_model, dkv = s->cross ? s->d_kv : dm;
    const size_t H = s->H, hk = H * s->dk, hv = H * s->dv, d_out = s->wo ? s->d_out : hv;
    const size_t N = s->kv_heads ? s->kv_heads : H, nk = N * s->dk, nv = N * s->dv; /* K/V heads, widths */
    const float *x = rand_floats(B * L * dm, 1.0f), *kv = s->cross ? rand_floats(B * S * dkv, 1.0f) : NULL;
    /* drawn in this order: w_q, b_q, w_k, b_k, w_v, b_v, w_o, b_o */
    clattn_mha_host_weights w = CLATTN_MHA_HOST_WEIGHTS_INIT;
    w.w_q = rand_floats(dm * hk, 0.6f);
    w.b_q = s->biases ? rand_floats(hk, 0.3f) : NULL;
    w.w_k = rand_floats(dkv * nk, 0.6f);
    w.b_k = s->biases ? rand_floats(nk, 0.3f) : NULL;
    w.w_v = rand_floats(dkv * nv, 0.6f);
    w.b_v = s->biases ? rand_floats(nv, 0.3f) : NULL;
    w.w_o = s->wo ? rand_floats(hv * d_out, 0.5f) : NULL;
    w.b_o = s->bo ? rand_floats(d_out, 0.3f) : NULL;
    argl a = {{0}, 0};
    add(&a, "mha", "--heads", fmt("%zu", H), "--out", P("y.npy"), "--weights", P("a.npy"), NULL);
    if (s->rank == 3) {
        add(&a, "--x", save_f32("x.npy", x, 3, (size_t[]){B, L, dm}), NULL);
        if (kv)
            add(&a, "--kv", save_f32("kv.npy", kv, 3, (size_t[]){B, S, dkv}), NULL);
    } else {
        add(&a, "--x", save_f32("x.npy", x, 2, (size_t[]){L, dm}), NULL);
        if (kv)
            add(&a, "--kv", save_f32("kv.npy", kv, 2, (size_t[]){S, dkv}), NULL);
    }
    add(&a, "--wq", save_f32("wq.npy", w.w_q, 2, (size_t[]){dm, hk}), "--wk",
        save_f32("wk.npy", w.w_k, 2, (size_t[]){dkv, nk}), "--wv", save_f32("wv.npy", w.w_v, 2, (size_t[]){dkv, nv}),
        NULL);
    if (s->biases)
        add(&a, "--bq", save_f32("bq.npy", w.b_q, 1, &hk), "--bk", save_f32("bk.npy", w.b_k, 1, &nk), "--bv",
            save_f32("bv.npy", w.b_v, 1, &nv), NULL);
    if (s->kv_heads)
        add(&a, "--kv-heads", fmt("%zu", N), NULL);
    if (s->wo)
        add(&a, "--wo", save_f32("wo.npy", w.w_o, 2, (size_t[]){hv, d_out}), NULL);
    if (s->bo)
        add(&a, "--bo", save_f32("bo.npy", w.b_o, 1, &d_out), NULL);
    if (s->scale != 0.0f)
        add(&a, "--scale", fmt("%.9g", s->scale), NULL);
    add_list(&a, s->extra);
    run_args(&a, NULL);
    expect_status(EXIT_OK);

    const float *y, *p;
    if (s->rank == 3) {
        y = load_f32(P("y.npy"), 3, (size_t[]){B, L, d_out});
        p = load_f32(P("a.npy"), 4, (size_t[]){B, H, L, S});
    } else {
        y = load_f32(P("y.npy"), 2, (size_t[]){L, d_out});
        p = load_f32(P("a.npy"), 3, (size_t[]){H, L, S});
    }
    clattn_masks m = CLATTN_MASKS_INIT;
    m.causal = s->causal;
    m.key_lengths = s->key_lengths;
    m.query_offsets = s->offsets;
    m.window = s->window;
    clattn_mha_desc d = CLATTN_MHA_DESC_INIT;
    d.batch = B;
    d.q_len = L;
    d.kv_len = S;
    d.model_dim = dm;
    d.kv_dim = dkv;
    d.heads = H;
    d.kv_heads = N;
    d.qk_dim = s->dk;
    d.v_dim = s->dv;
    d.out_dim = d_out;
    d.scale = s->scale != 0.0f ? s->scale : CLATTN_SCALE_DEFAULT;
    d.masks = &m;
    d.softcap = s->softcap;
    d.sinks = s->sinks;
    d.alibi_slopes = s->alibi;
    double *ry = xmalloc(B * L * d_out * sizeof *ry), *rp = xmalloc(B * H * L * S * sizeof *rp);
    ref_mha(&d, x, kv, &w, NULL, ry, rp);
    expect_close("out", y, ry, B * L * d_out);
    expect_close("weights", p, rp, B * H * L * S);
}

/* ---------------------------------------------------------------------------------------------- */
/* 1. Version, help, usage errors                                                                  */
/* ---------------------------------------------------------------------------------------------- */

START_TEST(test_version_and_help)
{
    EXPECT(EXIT_OK, "--version");
    expect_in("stdout", R.out, fmt("clattn %s (library %s)", CLATTN_VERSION_STRING, CLATTN_VERSION_STRING));
    ck_assert_msg(count_lines(R.out) == 1, "--version prints one line:\n%s", R.out);

    static const char *const help_spellings[] = {"--help", "-h", "help"};
    for (size_t i = 0; i < 3; i++) {
        EXPECT(EXIT_OK, help_spellings[i]);
        ck_assert_str_eq(R.err, "");
        static const char *const words[] = {"usage: clattn", "devices", "sdpa", "mha", "demo", "--device",
                                            "Exit status"};
        for (size_t w = 0; w < sizeof words / sizeof words[0]; w++)
            expect_in("stdout", R.out, words[w]);
    }

    static const struct {
        const char *command;
        const char *flags[32];
    } commands[] = {
        {"devices", {"--json", "--check"}},
        {"sdpa", {"--q", "--k", "--v", "--out", "--weights", "--lse", "--scale", "--causal", "--causal-bottom-right",
                  "--mask", "--key-lengths", "--heatmap", "--tokens", "--key-tokens", "--device", "--heads",
                  "--kv-heads", "--offset", "--offsets", "--window", "--softcap", "--sinks", "--alibi", "auto",
                  "--past-k", "--past-v", "--present-k", "--present-v"}},
        {"mha", {"--x", "--kv", "--wq", "--wk", "--wv", "--bq", "--bk", "--bv", "--wo", "--bo", "--heads", "--out",
                 "--weights", "--scale", "--causal", "--causal-bottom-right", "--mask", "--key-lengths", "--heatmap",
                 "--tokens", "--key-tokens", "--device", "--kv-heads", "--offset", "--offsets", "--window",
                 "--softcap", "--sinks", "--alibi", "auto"}},
        {"demo", {"--save", "--heatmap", "--device"}},
    };
    for (size_t c = 0; c < sizeof commands / sizeof commands[0]; c++) {
        static const char *const spellings[] = {"--help", "-h"};
        for (size_t s = 0; s < 2; s++) {
            EXPECT(EXIT_OK, commands[c].command, spellings[s]);
            ck_assert_msg(R.err[0] == '\0', "`%s` wrote to stderr:\n%s", R.cmd, R.err);
            expect_in("stdout", R.out, fmt("usage: clattn %s", commands[c].command));
            for (size_t f = 0; commands[c].flags[f]; f++)
                expect_in("stdout", R.out, commands[c].flags[f]);
        }
    }
}
END_TEST

START_TEST(test_usage_errors)
{
    clattn_env(NULL, (const char *)NULL); /* no arguments at all */
    expect_status(EXIT_USAGE);
    expect_in("stderr", R.err, "usage: clattn");
    ck_assert_str_eq(R.out, "");

    EXPECT(EXIT_USAGE, "frobnicate");
    expect_in("stderr", R.err, "frobnicate");
    expect_in("stderr", R.err, "usage: clattn");
    ck_assert_str_eq(R.out, "");

    EXPECT(EXIT_USAGE, "--frobnicate");
    expect_in("stderr", R.err, "--frobnicate");

    /* A subcommand's flag error: the flag named on the first line, then that command's usage. */
    EXPECT(EXIT_USAGE, "devices", "--jsn");
    ck_assert_msg(strncmp(R.err, "clattn devices: ", 16) == 0, "first line: %s", R.err);
    expect_in("stderr", R.err, "--jsn");
    expect_in("stderr", R.err, "usage: clattn devices");
    ck_assert_str_eq(R.out, "");

    EXPECT(EXIT_USAGE, "demo", "--save");
    expect_in("stderr", R.err, "--save");
    EXPECT(EXIT_USAGE, "demo", "extra");
    expect_in("stderr", R.err, "extra");
    EXPECT(EXIT_USAGE, "devices", "--json=yes");
    expect_in("stderr", R.err, "--json");
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* 2. devices                                                                                      */
/* ---------------------------------------------------------------------------------------------- */

START_TEST(test_devices_table)
{
    EXPECT(EXIT_OK, "devices");
    expect_in("stdout", R.out, "Platform 0: ");
    expect_in("stdout", R.out, "0:0");
    expect_in("stdout", R.out, "[default]");
    const char *first = strstr(R.out, "[default]");
    ck_assert_msg(strstr(first + 1, "[default]") == NULL, "two defaults:\n%s", R.out);
}
END_TEST

START_TEST(test_devices_json)
{
    static const char *const no_env_device[] = {"CLATTN_DEVICE", NULL};
    clattn_env(no_env_device, "devices", "--json", (const char *)NULL);
    expect_status(EXIT_OK);
    ck_assert_str_eq(R.err, "");
    python_check_stdout(
        "devices.json",
        "import json, sys\n"
        "d = json.load(sys.stdin)\n"
        "assert d['devices'] and 'name' in d['devices'][0], d\n"
        "keys = {'spec': str, 'platform': str, 'name': str, 'vendor': str, 'type': str,\n"
        "        'opencl_version': str, 'opencl_c_version': str, 'driver_version': str,\n"
        "        'compute_units': int, 'clock_mhz': int, 'global_mem_bytes': int, 'local_mem_bytes': int,\n"
        "        'max_alloc_bytes': int, 'max_work_group_size': int,\n"
        "        'fp16': bool, 'fp64': bool, 'subgroups': bool, 'default': bool,\n"
        "        'fp16_arithmetic_native': bool, 'storage_types': list, 'arithmetic': str}\n"
        "for dev in d['devices']:\n"
        "    for k, t in keys.items():\n"
        "        assert k in dev, ('missing key', k, dev)\n"
        "        assert isinstance(dev[k], t), ('wrong type', k, dev[k])\n"
        "    assert dev['storage_types'] == ['float32', 'float16', 'bfloat16', 'int8'], dev['storage_types']\n"
        "    assert dev['arithmetic'] == 'float32', dev['arithmetic']\n"
        "    assert dev['fp16_arithmetic_native'] == dev['fp16'], 'native half arithmetic is cl_khr_fp16'\n"
        "    assert dev['type'] in ('cpu', 'gpu', 'accelerator', 'other'), dev['type']\n"
        "    p, _, i = dev['spec'].partition(':')\n"
        "    assert p.isdigit() and i.isdigit(), dev['spec']\n"
        "assert d['devices'][0]['spec'] == '0:0', d['devices'][0]['spec']\n"
        "assert sum(dev['default'] for dev in d['devices']) == 1, 'exactly one default'\n"
        "assert len({dev['spec'] for dev in d['devices']}) == len(d['devices']), 'specs are unique'\n");
}
END_TEST

START_TEST(test_devices_check)
{
    EXPECT(EXIT_OK, "devices", "--check");
    expect_in("stdout", R.out, "PASS");
    expect_in("stdout", R.out, "0:0");
    expect_in("stdout", R.out, "of them 12 with storage types"); /* float16, bfloat16, int8 on 3 paths */
    ck_assert_msg(strstr(R.out, "FAIL") == NULL, "a device failed its check:\n%s", R.out);

    EXPECT(EXIT_USAGE, "devices", "--json", "--check");
    expect_in("stderr", R.err, "--json");
    ck_assert_str_eq(R.out, "");
    EXPECT(EXIT_USAGE, "devices", "--check", "--json");
}
END_TEST

/* With no OpenCL platform at all (OCL_ICD_VENDORS naming an empty folder, in the child only). */
START_TEST(test_no_platform)
{
    const char *vendors = P("no-icds");
    ck_assert(mkdir(vendors, 0700) == 0);
    const char *const env[] = {fmt("OCL_ICD_VENDORS=%s", vendors), NULL};

    clattn_env(env, "devices", (const char *)NULL);
    expect_status(EXIT_NO_PLATFORM);
    expect_in("stderr", R.err, "pocl-opencl-icd");
    ck_assert_msg(strncmp(R.err, "clattn devices: ", 16) == 0, "stderr: %s", R.err);

    clattn_env(env, "devices", "--json", (const char *)NULL);
    expect_status(EXIT_NO_PLATFORM);
    clattn_env(env, "devices", "--check", (const char *)NULL);
    expect_status(EXIT_NO_PLATFORM);
    clattn_env(env, "demo", (const char *)NULL);
    expect_status(EXIT_NO_PLATFORM);
    expect_in("stderr", R.err, "pocl-opencl-icd");

    /* Valid inputs: the inputs are fine, the missing platform is what fails; no output appears. */
    rng.state = 7;
    const size_t sh[2] = {3, 4};
    const char *q = save_f32("q.npy", rand_floats(12, 1), 2, sh);
    clattn_env(env, "sdpa", "--q", q, "--k", q, "--v", q, "--out", P("o.npy"), (const char *)NULL);
    expect_status(EXIT_NO_PLATFORM);
    ck_assert(!exists(P("o.npy")));
    clattn_env(env, "mha", "--x", q, "--wq", save_f32("w.npy", rand_floats(16, 1), 2, (size_t[]){4, 4}), "--wk",
               P("w.npy"), "--wv", P("w.npy"), "--heads", "2", "--out", P("o.npy"), (const char *)NULL);
    expect_status(EXIT_NO_PLATFORM);
    ck_assert(!exists(P("o.npy")));
}
END_TEST

/* --device and CLATTN_DEVICE choose the device; a spec matching nothing is a usage error. */
START_TEST(test_device_selection)
{
    EXPECT(EXIT_OK, "demo", "--device", "0:0");
    EXPECT(EXIT_OK, "demo", "--device=0:0");
    static const char *const env_ok[] = {"CLATTN_DEVICE=0:0", NULL};
    clattn_env(env_ok, "demo", (const char *)NULL);
    expect_status(EXIT_OK);

    static const char *const env_bad[] = {"CLATTN_DEVICE=no-such-device-anywhere", NULL};
    clattn_env(env_bad, "demo", (const char *)NULL);
    expect_status(EXIT_USAGE);
    expect_in("stderr", R.err, "no-such-device-anywhere");
    expect_in("stderr", R.err, "0:0");
    /* --device wins over CLATTN_DEVICE. */
    clattn_env(env_bad, "demo", "--device", "0:0", (const char *)NULL);
    expect_status(EXIT_OK);

    EXPECT(EXIT_USAGE, "demo", "--device", "9:9");
    expect_in("stderr", R.err, "9:9");
    expect_in("stderr", R.err, "0:0"); /* the devices that do exist */
    ck_assert_msg(count_lines(R.err) == 1, "one line:\n%s", R.err);
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* 3. sdpa                                                                                         */
/* ---------------------------------------------------------------------------------------------- */

START_TEST(test_sdpa_4d)
{
    sdpa_check(&(sdpa_spec){.rank = 4, .B = 2, .H = 3, .L = 7, .S = 61, .D = 8, .Dv = 5, .seed = 1});
}
END_TEST

START_TEST(test_sdpa_3d)
{
    sdpa_check(&(sdpa_spec){.rank = 3, .B = 1, .H = 3, .L = 5, .S = 9, .D = 4, .Dv = 6, .seed = 2});
}
END_TEST

START_TEST(test_sdpa_2d)
{
    sdpa_check(&(sdpa_spec){.rank = 2, .B = 1, .H = 1, .L = 6, .S = 11, .D = 8, .Dv = 3, .seed = 3});
}
END_TEST

/* '<f2' inputs are widened exactly on load: the same output, bit for bit, as '<f4' files of the same
 * (half-representable) values. */
START_TEST(test_sdpa_half_inputs)
{
    enum { L = 5, S = 7, D = 4 };
    const size_t qs[2] = {L, D}, ks[2] = {S, D};
    float q[L * D], k[S * D], v[S * D];
    tu_fill_uniform(q, L * D, 2.0f, 31);
    tu_fill_uniform(k, S * D, 2.0f, 32);
    tu_fill_uniform(v, S * D, 2.0f, 33);
    float *all[3] = {q, k, v};
    const size_t counts[3] = {L * D, S * D, S * D};
    for (int t = 0; t < 3; t++)
        for (size_t i = 0; i < counts[t]; i++)
            all[t][i] = npy_half_to_float(npy_float_to_half(all[t][i]));
    char err[512];
    const char *names[3] = {"q2.npy", "k2.npy", "v2.npy"};
    for (int t = 0; t < 3; t++)
        ck_assert_msg(npy_save_floats_as(P(names[t]), NPY_F2, all[t], 2, t ? ks : qs, err, sizeof err) == 0, "%s", err);
    EXPECT(EXIT_OK, "sdpa", "--q", P("q2.npy"), "--k", P("k2.npy"), "--v", P("v2.npy"), "--out", P("o2.npy"));
    EXPECT(EXIT_OK, "sdpa", "--q", save_f32("q4.npy", q, 2, qs), "--k", save_f32("k4.npy", k, 2, ks), "--v",
           save_f32("v4.npy", v, 2, ks), "--out", P("o4.npy"));
    const float *o2 = load_f32(P("o2.npy"), 2, qs), *o4 = load_f32(P("o4.npy"), 2, qs);
    ck_assert_msg(memcmp(o2, o4, sizeof(float) * L * D) == 0, "half inputs gave another output than their floats");
}
END_TEST

START_TEST(test_sdpa_causal)
{
    const char *const top_left[] = {"--causal", NULL};
    sdpa_check(&(sdpa_spec){.rank = 4, .B = 2, .H = 2, .L = 6, .S = 9, .D = 4, .Dv = 4,
                            .causal = CLATTN_CAUSAL_TOP_LEFT, .extra = top_left, .seed = 4});
    sdpa_check(&(sdpa_spec){.rank = 2, .B = 1, .H = 1, .L = 5, .S = 5, .D = 8, .Dv = 8,
                            .causal = CLATTN_CAUSAL_TOP_LEFT, .extra = top_left, .seed = 5});
}
END_TEST

START_TEST(test_sdpa_causal_bottom_right)
{
    const char *const bottom_right[] = {"--causal-bottom-right", NULL};
    sdpa_check(&(sdpa_spec){.rank = 3, .B = 1, .H = 2, .L = 4, .S = 9, .D = 4, .Dv = 3,
                            .causal = CLATTN_CAUSAL_BOTTOM_RIGHT, .extra = bottom_right, .seed = 6});
}
END_TEST

/* An additive float mask (L,S) with −inf entries and one row entirely −inf (zero weights and output,
 * log-sum-exp −inf). */
START_TEST(test_sdpa_mask_float)
{
    const size_t B = 2, H = 2, L = 6, S = 10;
    rng.state = 70;
    float *m = rand_mask(L * S);
    for (size_t j = 0; j < S; j++)
        m[2 * S + j] = -INFINITY;
    m[0] = 0.0f; /* row 0 keeps at least one key */
    const char *const extra[] = {"--mask", save_f32("mask.npy", m, 2, (size_t[]){L, S}), NULL};
    sdpa_check(&(sdpa_spec){.rank = 4, .B = B, .H = H, .L = L, .S = S, .D = 4, .Dv = 3,
                            .mask = broadcast_mask(m, 2, (size_t[]){L, S}, B, H, L, S), .extra = extra, .seed = 7});
}
END_TEST

/* A boolean '|b1' mask: True = may attend (adds 0), False adds −inf, as PyTorch's SDPA. */
START_TEST(test_sdpa_mask_bool)
{
    const size_t B = 2, H = 2, L = 5, S = 8;
    rng.state = 80;
    unsigned char bits[5 * 8];
    float add_mask[5 * 8];
    for (size_t i = 0; i < L * S; i++) {
        bits[i] = rng_unit() < 0.7;
        if (i / S == 1)
            bits[i] = 1; /* a row that sees everything */
        if (i / S == 3)
            bits[i] = i % S == 5; /* a row that sees only key 5 */
        add_mask[i] = bits[i] ? 0.0f : -INFINITY;
    }
    const char *const extra[] = {"--mask", save_raw("mask.npy", 1, "|b1", "False", "(5, 8)", bits, sizeof bits), NULL};
    sdpa_check(&(sdpa_spec){.rank = 4, .B = B, .H = H, .L = L, .S = S, .D = 4, .Dv = 4,
                            .mask = broadcast_mask(add_mask, 2, (size_t[]){L, S}, B, H, L, S), .extra = extra,
                            .seed = 8});
}
END_TEST

/* A full (B,H,L,S) mask, and float64 on disk. */
START_TEST(test_sdpa_mask_bhls)
{
    const size_t B = 2, H = 3, L = 4, S = 7, n = B * H * L * S;
    rng.state = 90;
    float *m = rand_mask(n);
    double *md = xmalloc(n * sizeof *md);
    for (size_t i = 0; i < n; i++)
        md[i] = m[i];
    const char *const extra[] = {"--mask", save_raw("mask.npy", 1, "<f8", "False", "(2, 3, 4, 7)", md, n * 8), NULL};
    sdpa_check(&(sdpa_spec){.rank = 4, .B = B, .H = H, .L = L, .S = S, .D = 4, .Dv = 2, .mask = m,
                            .extra = extra, .seed = 9});
}
END_TEST

/* Masks with dimensions of 1 broadcast NumPy-style: (1,H,L,S), (H,1,S) and (B,1,1,S). */
START_TEST(test_sdpa_mask_broadcast)
{
    const size_t B = 2, H = 3, L = 4, S = 6;
    static const size_t shapes[][4] = {{1, 3, 4, 6}, {3, 1, 6, 0}, {2, 1, 1, 6}, {1, 6, 0, 0}};
    static const size_t ranks[] = {4, 3, 4, 2};
    for (size_t c = 0; c < sizeof ranks / sizeof ranks[0]; c++) {
        rng.state = 100 + c;
        const size_t n = product(ranks[c], shapes[c]);
        float *m = rand_mask(n);
        const char *const extra[] = {"--mask", save_f32(fmt("mask%zu.npy", c), m, ranks[c], shapes[c]), NULL};
        sdpa_check(&(sdpa_spec){.rank = 4, .B = B, .H = H, .L = L, .S = S, .D = 4, .Dv = 4,
                                .mask = broadcast_mask(m, ranks[c], shapes[c], B, H, L, S), .extra = extra,
                                .seed = 10 + c});
    }
}
END_TEST

/* Key lengths as numpy writes them by default ('<i8'), including 0 (every key masked) and S. */
START_TEST(test_sdpa_key_lengths_i8)
{
    static const long long len[] = {5, 0, 9};
    static const size_t len_z[] = {5, 0, 9};
    const char *const extra[] = {"--key-lengths", save_i64("len.npy", len, 3), NULL};
    sdpa_check(&(sdpa_spec){.rank = 4, .B = 3, .H = 2, .L = 4, .S = 9, .D = 4, .Dv = 3, .key_lengths = len_z,
                            .extra = extra, .seed = 11});
}
END_TEST

START_TEST(test_sdpa_key_lengths_i4)
{
    static const long long len[] = {1, 7};
    static const size_t len_z[] = {1, 7};
    const char *const extra[] = {"--key-lengths", save_i32("len.npy", len, 2), NULL};
    sdpa_check(&(sdpa_spec){.rank = 4, .B = 2, .H = 1, .L = 3, .S = 7, .D = 8, .Dv = 8, .key_lengths = len_z,
                            .extra = extra, .seed = 12});
}
END_TEST

/* Every mask kind at once: causal, key lengths and a boolean mask, with an explicit scale. */
START_TEST(test_sdpa_masks_combined)
{
    const size_t B = 2, H = 2, L = 5, S = 7;
    static const long long len[] = {6, 3};
    static const size_t len_z[] = {6, 3};
    rng.state = 130;
    unsigned char bits[2 * 1 * 7];
    float add_mask[2 * 1 * 7];
    for (size_t i = 0; i < sizeof bits; i++) {
        bits[i] = rng_unit() < 0.75;
        add_mask[i] = bits[i] ? 0.0f : -INFINITY;
    }
    const char *const extra[] = {"--causal-bottom-right", "--key-lengths", save_i64("len.npy", len, 2), "--mask",
                                 save_raw("mask.npy", 1, "|b1", "False", "(2, 1, 1, 7)", bits, sizeof bits), NULL};
    sdpa_check(&(sdpa_spec){.rank = 4, .B = B, .H = H, .L = L, .S = S, .D = 4, .Dv = 4, .scale = 0.7f,
                            .causal = CLATTN_CAUSAL_BOTTOM_RIGHT, .key_lengths = len_z,
                            .mask = broadcast_mask(add_mask, 4, (size_t[]){2, 1, 1, 7}, B, H, L, S), .extra = extra,
                            .seed = 13});
}
END_TEST

START_TEST(test_sdpa_scale)
{
    sdpa_check(&(sdpa_spec){.rank = 3, .B = 1, .H = 2, .L = 4, .S = 5, .D = 4, .Dv = 4, .scale = 0.3f, .seed = 14});
    sdpa_check(&(sdpa_spec){.rank = 2, .B = 1, .H = 1, .L = 4, .S = 5, .D = 4, .Dv = 4, .scale = -1.25f, .seed = 15});
    sdpa_check(&(sdpa_spec){.rank = 4, .B = 2, .H = 1, .L = 3, .S = 3, .D = 2, .Dv = 2, .scale = 2.5f,
                            .scale_eq = true, .seed = 16});

    /* --scale 0 is a real scale, not "the default": every score is 0, so each row's weights are
     * uniform over the keys it sees — 1/S without masks, 1/(i+1) on row i under top-left causal. */
    enum { H0 = 2, L0 = 4, S0 = 5 };
    sdpa_check(&(sdpa_spec){.rank = 3, .B = 1, .H = H0, .L = L0, .S = S0, .D = 4, .Dv = 3, .scale_zero = true,
                            .seed = 18});
    const float *w = load_f32(P("w.npy"), 3, (size_t[]){H0, L0, S0});
    for (size_t i = 0; i < H0 * L0 * S0; i++)
        ck_assert_msg(fabsf(w[i] - 1.0f / S0) <= 1e-6f, "`%s`: weights[%zu] = %.9g, expected 1/S = %.9g", R.cmd, i,
                      (double)w[i], 1.0 / S0);
    const char *const causal[] = {"--causal", NULL};
    sdpa_check(&(sdpa_spec){.rank = 3, .B = 1, .H = H0, .L = L0, .S = S0, .D = 4, .Dv = 3, .scale_zero = true,
                            .causal = CLATTN_CAUSAL_TOP_LEFT, .extra = causal, .seed = 19});
    w = load_f32(P("w.npy"), 3, (size_t[]){H0, L0, S0});
    for (size_t h = 0; h < H0; h++)
        for (size_t i = 0; i < L0; i++)
            for (size_t j = 0; j < S0; j++) {
                const float want = j <= i ? 1.0f / (float)(i + 1) : 0.0f, got = w[(h * L0 + i) * S0 + j];
                ck_assert_msg(fabsf(got - want) <= 1e-6f, "`%s`: weights[%zu][%zu][%zu] = %.9g, expected %.9g",
                              R.cmd, h, i, j, (double)got, (double)want);
            }
}
END_TEST

/* float64 inputs are rounded to float32 on load and work. */
START_TEST(test_sdpa_f8_input)
{
    sdpa_check(&(sdpa_spec){.rank = 4, .B = 2, .H = 2, .L = 5, .S = 6, .D = 4, .Dv = 3, .f8 = true, .seed = 17});
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* 3b. sdpa: the 0.3 variants                                                                      */
/* ---------------------------------------------------------------------------------------------- */

/* --kv-heads: grouped-query (6 query heads on 2 K/V heads) and multi-query (1) attention. */
START_TEST(test_sdpa_kv_heads)
{
    sdpa_check(&(sdpa_spec){.rank = 4, .B = 2, .H = 6, .L = 5, .S = 9, .D = 4, .Dv = 3, .kv_heads = 2, .seed = 40});
    sdpa_check(&(sdpa_spec){.rank = 3, .B = 1, .H = 4, .L = 3, .S = 7, .D = 8, .Dv = 8, .kv_heads = 1, .seed = 41});
}
END_TEST

/* --past-k/--past-v/--present-k/--present-v (ONNX's past and present): the present files hold exactly
 * concat(past, new) along the sequence, in K's layout (4-D, and (B,S,N·D) with --heads), and the
 * output is attention over it; misuse is a usage error naming the flag. */
START_TEST(test_sdpa_past_present)
{
    enum { B = 2, H = 4, N = 2, L = 2, S = 2, PAST = 7, T = PAST + S, D = 8, DV = 4 };
    rng.state = 60;
    float *q = rand_floats(B * H * L * D, 1.0f), *k = rand_floats(B * N * S * D, 1.0f);
    float *v = rand_floats(B * N * S * DV, 1.0f), *pk = rand_floats(B * N * PAST * D, 1.0f);
    float *pv = rand_floats(B * N * PAST * DV, 1.0f);
    float *kk = xmalloc(B * N * T * D * sizeof *kk), *vv = xmalloc(B * N * T * DV * sizeof *vv);
    for (size_t bh = 0; bh < B * N; bh++) { /* the concatenation the files must hold */
        memcpy(kk + bh * T * D, pk + bh * PAST * D, PAST * D * sizeof *kk);
        memcpy(kk + (bh * T + PAST) * D, k + bh * S * D, S * D * sizeof *kk);
        memcpy(vv + bh * T * DV, pv + bh * PAST * DV, PAST * DV * sizeof *vv);
        memcpy(vv + (bh * T + PAST) * DV, v + bh * S * DV, S * DV * sizeof *vv);
    }
    clattn_masks m = CLATTN_MASKS_INIT;
    m.causal = CLATTN_CAUSAL_BOTTOM_RIGHT;
    clattn_sdpa_desc d = CLATTN_SDPA_DESC_INIT;
    d.batch = B;
    d.heads = H;
    d.kv_heads = N;
    d.q_len = L;
    d.kv_len = T;
    d.qk_dim = D;
    d.v_dim = DV;
    d.masks = &m;
    double *ro = xmalloc(B * H * L * DV * sizeof *ro), *rl = xmalloc(B * H * L * sizeof *rl);
    ref_sdpa(&d, q, kk, vv, NULL, ro, NULL, rl);
    for (int packed = 0; packed < 2; packed++) {
        const size_t r = packed ? 3 : 4;
        size_t qs[4], ks[4], vs[4], pks[4], pvs[4], prk[4], prv[4], os[4], ls[4];
        tensor_shape(r, packed, B, H, L, D, qs);
        tensor_shape(r, packed, B, N, S, D, ks);
        tensor_shape(r, packed, B, N, S, DV, vs);
        tensor_shape(r, packed, B, N, PAST, D, pks);
        tensor_shape(r, packed, B, N, PAST, DV, pvs);
        tensor_shape(r, packed, B, N, T, D, prk);
        tensor_shape(r, packed, B, N, T, DV, prv);
        tensor_shape(r, packed, B, H, L, DV, os);
        const size_t lr = tensor_shape(4, false, B, H, L, 0, ls);
#define LAYOUT(x, X, Y, Z) (packed ? swap_middle((x), sizeof(float), B, (X), (Y), (Z)) : (void *)(x))
        argl a = {{0}, 0};
        add(&a, "sdpa", "--q", save_f32("q.npy", LAYOUT(q, H, L, D), r, qs), "--k",
            save_f32("k.npy", LAYOUT(k, N, S, D), r, ks), "--v", save_f32("v.npy", LAYOUT(v, N, S, DV), r, vs),
            "--past-k", save_f32("pk.npy", LAYOUT(pk, N, PAST, D), r, pks), "--past-v",
            save_f32("pv.npy", LAYOUT(pv, N, PAST, DV), r, pvs), "--present-k", P("prk.npy"), "--present-v",
            P("prv.npy"), "--out", P("out.npy"), "--lse", P("lse.npy"), "--kv-heads", "2", "--causal-bottom-right",
            NULL);
        if (packed)
            add(&a, "--heads", "4", NULL);
        run_args(&a, NULL);
        expect_status(EXIT_OK);
        const float *got_k = load_f32(P("prk.npy"), r, prk), *got_v = load_f32(P("prv.npy"), r, prv);
        const float *want_k = LAYOUT(kk, N, T, D), *want_v = LAYOUT(vv, N, T, DV);
        ck_assert_msg(memcmp(got_k, want_k, B * N * T * D * sizeof *kk) == 0, "`%s`: present_k is not concat(past_k, k)",
                      R.cmd);
        ck_assert_msg(memcmp(got_v, want_v, B * N * T * DV * sizeof *vv) == 0, "`%s`: present_v is not concat(past_v, v)",
                      R.cmd);
        expect_close("out", load_f32(P("out.npy"), r, os), packed ? swap_middle(ro, sizeof *ro, B, H, L, DV) : ro,
                     B * H * L * DV);
        expect_close("lse", load_f32(P("lse.npy"), lr, ls), rl, B * H * L);
#undef LAYOUT
    }
    EXPECT(EXIT_USAGE, "sdpa", "--q", P("q.npy"), "--k", P("k.npy"), "--v", P("v.npy"), "--past-k", P("pk.npy"),
           "--out", P("o2.npy"), "--kv-heads", "2", "--heads", "4");
    expect_in("stderr", R.err, "--past-v");
    EXPECT(EXIT_USAGE, "sdpa", "--q", P("q.npy"), "--k", P("k.npy"), "--v", P("v.npy"), "--past-k", P("pk.npy"),
           "--past-v", P("v.npy"), "--out", P("o2.npy"), "--kv-heads", "2", "--heads", "4");
    expect_in("stderr", R.err, "rows");
}
END_TEST

/* --offset N puts query i at key position N + i in every batch (negative: a causal mask hides every
 * key from the first rows); --offsets OFF.npy gives one per batch, '<i8' or '<i4'. */
START_TEST(test_sdpa_offsets)
{
    static const long long minus2[] = {-2, -2};
    const char *const one[] = {"--causal", "--offset", "-2", NULL};
    sdpa_check(&(sdpa_spec){.rank = 4, .B = 2, .H = 2, .L = 5, .S = 8, .D = 4, .Dv = 4,
                            .causal = CLATTN_CAUSAL_TOP_LEFT, .offsets = minus2, .extra = one, .seed = 42});
    static const long long per_batch[] = {3, 0, 6};
    const char *const i8[] = {"--causal-bottom-right", "--offsets", save_i64("off.npy", per_batch, 3), NULL};
    sdpa_check(&(sdpa_spec){.rank = 4, .B = 3, .H = 2, .L = 4, .S = 9, .D = 4, .Dv = 3,
                            .causal = CLATTN_CAUSAL_BOTTOM_RIGHT, .offsets = per_batch, .extra = i8, .seed = 43});
    static const long long small[] = {-1, 2};
    const char *const i4[] = {"--causal", "--offsets", save_i32("off4.npy", small, 2), NULL};
    sdpa_check(&(sdpa_spec){.rank = 4, .B = 2, .H = 1, .L = 3, .S = 5, .D = 8, .Dv = 2,
                            .causal = CLATTN_CAUSAL_TOP_LEFT, .offsets = small, .extra = i4, .seed = 44});
}
END_TEST

/* --window L,R: keys p-L..p+R; -1 leaves a side unbounded. */
START_TEST(test_sdpa_window)
{
    static const clattn_window w21 = {2, 1}, left_open = {-1, 0}, right_open = {1, -1};
    const char *const both[] = {"--window", "2,1", NULL};
    sdpa_check(&(sdpa_spec){.rank = 4, .B = 2, .H = 2, .L = 6, .S = 8, .D = 4, .Dv = 4, .window = &w21,
                            .extra = both, .seed = 45});
    const char *const left[] = {"--window=-1,0", NULL};
    sdpa_check(&(sdpa_spec){.rank = 3, .B = 1, .H = 2, .L = 5, .S = 5, .D = 4, .Dv = 3, .window = &left_open,
                            .extra = left, .seed = 46});
    static const long long two[] = {2};
    const char *const right[] = {"--window", "1,-1", "--offset", "2", NULL};
    sdpa_check(&(sdpa_spec){.rank = 2, .B = 1, .H = 1, .L = 4, .S = 9, .D = 4, .Dv = 4, .window = &right_open,
                            .offsets = two, .extra = right, .seed = 47});
}
END_TEST

/* --softcap C: C·tanh(s/C) on the scaled scores (a large scale, so that the cap matters); 0 is off. */
START_TEST(test_sdpa_softcap)
{
    const char *const cap[] = {"--softcap", "1.5", NULL};
    sdpa_check(&(sdpa_spec){.rank = 4, .B = 2, .H = 2, .L = 4, .S = 7, .D = 4, .Dv = 4, .scale = 2.0f,
                            .softcap = 1.5f, .extra = cap, .seed = 48});
    const char *const off[] = {"--softcap=0", NULL};
    sdpa_check(&(sdpa_spec){.rank = 3, .B = 1, .H = 2, .L = 4, .S = 7, .D = 4, .Dv = 4, .extra = off, .seed = 49});
}
END_TEST

/* --sinks SINKS.npy: one logit per head in each row's denominator; a row whose keys are all masked
 * (key length 0) keeps zero weights, with the sink as its log-sum-exp. */
START_TEST(test_sdpa_sinks)
{
    const size_t H = 3;
    rng.state = 500;
    float *sinks = rand_floats(H, 2.0f);
    sinks[1] = 4.0f; /* a sink that takes most of the weight */
    static const long long len[] = {6, 0};
    static const size_t len_z[] = {6, 0};
    const char *const extra[] = {"--sinks", save_f32("sinks.npy", sinks, 1, &H), "--key-lengths",
                                 save_i64("len.npy", len, 2), NULL};
    sdpa_check(&(sdpa_spec){.rank = 4, .B = 2, .H = H, .L = 4, .S = 6, .D = 4, .Dv = 3, .sinks = sinks,
                            .key_lengths = len_z, .extra = extra, .seed = 50});
}
END_TEST

/* --alibi SLOPES.npy: slope[h]·(j − p) added to the scores. */
START_TEST(test_sdpa_alibi_file)
{
    const size_t H = 3;
    rng.state = 510;
    const float *slopes = rand_floats(H, 0.8f);
    const char *const extra[] = {"--alibi", save_f32("slopes.npy", slopes, 1, &H), NULL};
    sdpa_check(&(sdpa_spec){.rank = 4, .B = 2, .H = H, .L = 5, .S = 9, .D = 4, .Dv = 4, .alibi = slopes,
                            .extra = extra, .seed = 51});
}
END_TEST

/* --alibi auto: Press et al.'s slopes, for H a power of two (8) and not (6, 12). */
START_TEST(test_sdpa_alibi_auto)
{
    /* The test's own get_slopes against values worked by hand: 2^(-8(h+1)/H) for H = 8; for H = 6 the
     * four of H = 4, then 2^-1 and 2^-3, every other one of H = 8. */
    double s8[8], s6[6];
    alibi_get_slopes(8, s8);
    alibi_get_slopes(6, s6);
    static const double want6[6] = {0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125};
    for (size_t h = 0; h < 8; h++)
        ck_assert_msg(fabs(s8[h] - ldexp(1.0, -(int)h - 1)) < 1e-15, "slope %zu of 8: %.17g", h, s8[h]);
    for (size_t h = 0; h < 6; h++)
        ck_assert_msg(fabs(s6[h] - want6[h]) < 1e-15, "slope %zu of 6: %.17g", h, s6[h]);

    const char *const extra[] = {"--alibi", "auto", NULL};
    static const size_t heads[] = {8, 6, 12};
    for (size_t c = 0; c < 3; c++)
        sdpa_check(&(sdpa_spec){.rank = 4, .B = 1, .H = heads[c], .L = 4, .S = 9, .D = 4, .Dv = 2,
                                .alibi = alibi_auto(heads[c]), .extra = extra, .seed = 52 + c});
}
END_TEST

/* Everything at once: grouped K/V heads, a window, soft-capping, sinks, ALiBi auto, per-batch offsets
 * and a causal mask, with an explicit scale. */
/* --scores MODE:FILE: the (B,H,L,S) scores at each of ONNX's qk_matmul_output_mode points, against the
 * reference: Q·Kᵀ·scale of every key (qk), soft-capped, with the masks (−inf where hidden). */
START_TEST(test_sdpa_scores)
{
    enum { B = 1, H = 2, L = 4, S = 6, D = 3 };
    rng.state = 560;
    const size_t qs[4] = {B, H, L, D}, ks[4] = {B, H, S, D}, ws[4] = {B, H, L, S};
    float *q = rand_floats(B * H * L * D, 2.0f), *k = rand_floats(B * H * S * D, 2.0f),
          *v = rand_floats(B * H * S * D, 1.0f);
    save_f32("q.npy", q, 4, qs);
    save_f32("k.npy", k, 4, ks);
    save_f32("v.npy", v, 4, ks);
    static const char *const modes[] = {"qk", "softcapped", "masked", "softmax"};
    clattn_masks m = CLATTN_MASKS_INIT;
    m.causal = CLATTN_CAUSAL_TOP_LEFT;
    clattn_sdpa_desc d = CLATTN_SDPA_DESC_INIT;
    d.batch = B;
    d.heads = H;
    d.q_len = L;
    d.kv_len = S;
    d.qk_dim = D;
    d.softcap = 1.25f;
    d.masks = &m;
    double *want = xmalloc(B * H * L * S * sizeof *want), *o = xmalloc(B * H * L * D * sizeof *o);
    for (int mode = 0; mode < 4; mode++) {
        const char *arg = fmt("%s:%s", modes[mode], P("s.npy"));
        EXPECT(EXIT_OK, "sdpa", "--q", P("q.npy"), "--k", P("k.npy"), "--v", P("v.npy"), "--out", P("o.npy"),
               "--softcap", "1.25", "--causal", "--scores", arg);
        if (mode == 2)
            ref_score(&d, q, k, NULL, want);
        else if (mode == 3)
            ref_sdpa(&d, q, k, v, NULL, o, want, NULL);
        else
            for (size_t bh = 0; bh < B * H; bh++)
                for (size_t i = 0; i < L; i++)
                    for (size_t j = 0; j < S; j++) {
                        double dot = 0;
                        for (size_t t = 0; t < D; t++)
                            dot += (double)q[(bh * L + i) * D + t] * k[(bh * S + j) * D + t];
                        dot /= sqrt((double)D);
                        want[(bh * L + i) * S + j] = mode == 0 ? dot : 1.25 * tanh(dot / 1.25);
                    }
        expect_close(modes[mode], load_f32(P("s.npy"), 4, ws), want, B * H * L * S);
    }
}
END_TEST

START_TEST(test_sdpa_variants_combined)
{
    const size_t H = 6;
    rng.state = 560;
    float *sinks = rand_floats(H, 1.0f);
    static const long long off[] = {5, -1};
    static const clattn_window win = {4, 1};
    const char *const extra[] = {"--window", "4,1", "--softcap", "3", "--sinks", save_f32("sinks.npy", sinks, 1, &H),
                                 "--alibi", "auto", "--offsets", save_i64("off.npy", off, 2), "--causal", NULL};
    sdpa_check(&(sdpa_spec){.rank = 4, .B = 2, .H = H, .L = 5, .S = 11, .D = 8, .Dv = 4, .scale = 1.3f,
                            .kv_heads = 3, .causal = CLATTN_CAUSAL_TOP_LEFT, .offsets = off, .window = &win,
                            .softcap = 3.0f, .sinks = sinks, .alibi = alibi_auto(H), .extra = extra, .seed = 56});
}
END_TEST

/* --heads H: 3-D arrays (B,L,H·D), as ONNX and PyTorch layers hold them, give the numbers of the 4-D
 * (B,H,L,D) run on the same data; O is written back as (B,L,H·Dv), the weights (B,H,L,S) and the
 * log-sum-exp (B,H,L) keep their heads. */
START_TEST(test_sdpa_heads_layout)
{
    const size_t B = 2, H = 4, L = 5, S = 7, Dv = 3;
    const char *const causal[] = {"--causal", NULL};
    sdpa_spec s = {.rank = 4, .B = B, .H = H, .L = L, .S = S, .D = 6, .Dv = Dv, .kv_heads = 2,
                   .causal = CLATTN_CAUSAL_TOP_LEFT, .extra = causal, .seed = 57};
    const sdpa_result four = sdpa_check(&s);
    s.rank = 3;
    s.heads_layout = true;
    const sdpa_result three = sdpa_check(&s);
    const float *rows = swap_middle(four.out, sizeof *four.out, B, H, L, Dv);
    ck_assert_msg(memcmp(three.out, rows, B * L * H * Dv * sizeof *rows) == 0,
                  "O of the (B,L,H·D) run is not the 4-D run's O as (B,L,H·Dv)");
    ck_assert_msg(memcmp(three.w, four.w, B * H * L * S * sizeof *four.w) == 0, "the weights differ from the 4-D run's");
    ck_assert_msg(memcmp(three.lse, four.lse, B * H * L * sizeof *four.lse) == 0, "the lse differs from the 4-D run's");
    /* Without --kv-heads, K and V hold the H heads too. */
    sdpa_check(&(sdpa_spec){.rank = 3, .heads_layout = true, .B = 3, .H = 2, .L = 4, .S = 4, .D = 5, .Dv = 5,
                            .seed = 58});
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* 4. mha                                                                                          */
/* ---------------------------------------------------------------------------------------------- */

START_TEST(test_mha_self_biases_wo)
{
    mha_check(&(mha_spec){.rank = 3, .B = 2, .L = 5, .d_model = 12, .H = 3, .dk = 4, .dv = 2, .d_out = 7,
                          .biases = true, .wo = true, .bo = true, .seed = 21});
    /* --wo without --bo */
    mha_check(&(mha_spec){.rank = 3, .B = 1, .L = 3, .d_model = 6, .H = 2, .dk = 3, .dv = 3, .d_out = 6,
                          .wo = true, .seed = 22});
}
END_TEST

START_TEST(test_mha_2d)
{
    const char *const extra[] = {"--causal", NULL};
    mha_check(&(mha_spec){.rank = 2, .B = 1, .L = 6, .d_model = 8, .H = 2, .dk = 4, .dv = 4,
                          .causal = CLATTN_CAUSAL_TOP_LEFT, .extra = extra, .seed = 23});
}
END_TEST

START_TEST(test_mha_cross)
{
    static const long long len[] = {9, 3};
    static const size_t len_z[] = {9, 3};
    const char *const extra[] = {"--key-lengths", save_i64("len.npy", len, 2), NULL};
    mha_check(&(mha_spec){.rank = 3, .B = 2, .L = 4, .S = 9, .d_model = 10, .d_kv = 6, .H = 3, .dk = 3, .dv = 4,
                          .cross = true, .scale = 0.25f, .key_lengths = len_z, .extra = extra, .seed = 24});
    mha_check(&(mha_spec){.rank = 2, .B = 1, .L = 3, .S = 7, .d_model = 4, .d_kv = 5, .H = 3, .dk = 2, .dv = 1,
                          .d_out = 2, .cross = true, .biases = true, .wo = true, .bo = true, .seed = 25});
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* 4b. mha: the 0.3 variants                                                                       */
/* ---------------------------------------------------------------------------------------------- */

/* --kv-heads N: W_K and W_V (and b_K, b_V) of N heads' columns. */
START_TEST(test_mha_kv_heads)
{
    mha_check(&(mha_spec){.rank = 3, .B = 2, .L = 5, .d_model = 8, .H = 4, .kv_heads = 2, .dk = 3, .dv = 2,
                          .d_out = 5, .biases = true, .wo = true, .bo = true, .seed = 60});
    mha_check(&(mha_spec){.rank = 2, .B = 1, .L = 3, .S = 6, .d_model = 4, .d_kv = 5, .H = 3, .kv_heads = 1, .dk = 2,
                          .dv = 3, .cross = true, .seed = 61});
}
END_TEST

START_TEST(test_mha_offsets)
{
    static const long long one[] = {2, 2};
    const char *const same[] = {"--causal", "--offset", "2", NULL};
    mha_check(&(mha_spec){.rank = 3, .B = 2, .L = 5, .d_model = 6, .H = 2, .dk = 3, .dv = 3,
                          .causal = CLATTN_CAUSAL_TOP_LEFT, .offsets = one, .extra = same, .seed = 62});
    static const long long per_batch[] = {-1, 4};
    const char *const file[] = {"--causal", "--offsets", save_i64("off.npy", per_batch, 2), NULL};
    mha_check(&(mha_spec){.rank = 3, .B = 2, .L = 3, .S = 7, .d_model = 4, .d_kv = 6, .H = 2, .dk = 2, .dv = 2,
                          .cross = true, .causal = CLATTN_CAUSAL_TOP_LEFT, .offsets = per_batch, .extra = file,
                          .seed = 63});
}
END_TEST

START_TEST(test_mha_window)
{
    static const clattn_window w = {1, 2};
    const char *const extra[] = {"--window", "1,2", NULL};
    mha_check(&(mha_spec){.rank = 3, .B = 2, .L = 6, .d_model = 8, .H = 2, .dk = 4, .dv = 4, .window = &w,
                          .extra = extra, .seed = 64});
}
END_TEST

START_TEST(test_mha_softcap)
{
    const char *const extra[] = {"--softcap", "0.75", NULL};
    mha_check(&(mha_spec){.rank = 3, .B = 1, .L = 5, .d_model = 8, .H = 2, .dk = 4, .dv = 4, .scale = 1.5f,
                          .softcap = 0.75f, .extra = extra, .seed = 65});
}
END_TEST

START_TEST(test_mha_sinks)
{
    const size_t H = 3;
    rng.state = 660;
    const float *sinks = rand_floats(H, 2.0f);
    const char *const extra[] = {"--sinks", save_f32("sinks.npy", sinks, 1, &H), NULL};
    mha_check(&(mha_spec){.rank = 3, .B = 2, .L = 4, .d_model = 6, .H = H, .dk = 2, .dv = 2, .sinks = sinks,
                          .extra = extra, .seed = 66});
}
END_TEST

START_TEST(test_mha_alibi)
{
    const size_t H = 2;
    rng.state = 670;
    const float *slopes = rand_floats(H, 0.8f);
    const char *const file[] = {"--alibi", save_f32("slopes.npy", slopes, 1, &H), NULL};
    mha_check(&(mha_spec){.rank = 3, .B = 2, .L = 6, .d_model = 4, .H = H, .dk = 2, .dv = 2, .alibi = slopes,
                          .extra = file, .seed = 67});
    const char *const auto_[] = {"--alibi", "auto", "--causal", NULL};
    mha_check(&(mha_spec){.rank = 2, .B = 1, .L = 7, .d_model = 10, .H = 5, .dk = 2, .dv = 2, .alibi = alibi_auto(5),
                          .causal = CLATTN_CAUSAL_TOP_LEFT, .extra = auto_, .seed = 68});
}
END_TEST

START_TEST(test_mha_variants_combined)
{
    const size_t H = 4;
    rng.state = 690;
    const float *sinks = rand_floats(H, 1.0f);
    static const long long off[] = {3, 0};
    static const clattn_window win = {2, 0};
    const char *const extra[] = {"--window", "2,0", "--softcap", "2.5", "--sinks",
                                 save_f32("sinks.npy", sinks, 1, &H), "--alibi", "auto", "--offsets",
                                 save_i64("off.npy", off, 2), "--causal", NULL};
    mha_check(&(mha_spec){.rank = 3, .B = 2, .L = 4, .S = 8, .d_model = 8, .d_kv = 6, .H = H, .dk = 3, .dv = 2,
                          .d_out = 5, .cross = true, .biases = true, .wo = true, .kv_heads = 2,
                          .causal = CLATTN_CAUSAL_TOP_LEFT, .offsets = off, .window = &win, .softcap = 2.5f,
                          .sinks = sinks, .alibi = alibi_auto(H), .extra = extra, .seed = 69});
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* 5. Errors: exit 2, one line naming the culprit, no output file                                 */
/* ---------------------------------------------------------------------------------------------- */

/* Every case runs in a fresh folder with valid inputs; outputs go to "o/", which must stay empty. */
static void valid_inputs(void)
{
    rng.state = 500;
    save_f32("q.npy", rand_floats(2 * 3 * 4 * 8, 1), 4, (size_t[]){2, 3, 4, 8});
    save_f32("k.npy", rand_floats(2 * 3 * 6 * 8, 1), 4, (size_t[]){2, 3, 6, 8});
    save_f32("v.npy", rand_floats(2 * 3 * 6 * 5, 1), 4, (size_t[]){2, 3, 6, 5});
    save_f32("x.npy", rand_floats(2 * 4 * 8, 1), 3, (size_t[]){2, 4, 8});
    save_f32("wq.npy", rand_floats(8 * 6, 1), 2, (size_t[]){8, 6});
    save_f32("wk.npy", rand_floats(8 * 6, 1), 2, (size_t[]){8, 6});
    save_f32("wv.npy", rand_floats(8 * 6, 1), 2, (size_t[]){8, 6});
    ck_assert(mkdir(P("o"), 0700) == 0);
}

/* sdpa with the valid inputs, Q, K or V replaced when given, outputs in o/. */
static void sdpa_args(argl *a, const char *q, const char *k, const char *v)
{
    add(a, "sdpa", "--q", q ? q : P("q.npy"), "--k", k ? k : P("k.npy"), "--v", v ? v : P("v.npy"), "--out",
        P("o/out.npy"), "--weights", P("o/w.npy"), "--lse", P("o/lse.npy"), NULL);
}

static void mha_args(argl *a, const char *heads)
{
    add(a, "mha", "--x", P("x.npy"), "--wq", P("wq.npy"), "--wk", P("wk.npy"), "--wv", P("wv.npy"), "--heads",
        heads, "--out", P("o/y.npy"), "--weights", P("o/a.npy"), NULL);
}

static const char *f32_file(const char *name, size_t ndim, const size_t *shape)
{
    return save_f32(name, rand_floats(product(ndim, shape), 1), ndim, shape);
}

/* Each make() fills the arguments and returns what the first line of stderr must contain. */
typedef struct err_case {
    const char *name;
    const char *(*make)(argl *a);
    bool usage_follows; /* flag-parsing errors print the command's usage after the message */
    const char *also;   /* NULL, or more that stderr must contain */
} err_case;

static const char *e_unknown_flag(argl *a) { sdpa_args(a, 0, 0, 0); add(a, "--bogus", NULL); return "--bogus"; }
static const char *e_missing_value(argl *a) { sdpa_args(a, 0, 0, 0); add(a, "--scale", NULL); return "--scale"; }
static const char *e_flag_with_value(argl *a)
{
    sdpa_args(a, 0, 0, 0);
    add(a, "--causal=yes", NULL);
    return "--causal";
}
static const char *e_positional(argl *a) { sdpa_args(a, 0, 0, 0); add(a, "stray.npy", NULL); return "stray.npy"; }
static const char *e_scale_text(argl *a) { sdpa_args(a, 0, 0, 0); add(a, "--scale", "abc", NULL); return "abc"; }
static const char *e_scale_suffix(argl *a) { sdpa_args(a, 0, 0, 0); add(a, "--scale", "0.5x", NULL); return "0.5x"; }
static const char *e_scale_inf(argl *a) { sdpa_args(a, 0, 0, 0); add(a, "--scale", "inf", NULL); return "inf"; }
static const char *e_scale_nan(argl *a) { sdpa_args(a, 0, 0, 0); add(a, "--scale", "nan", NULL); return "nan"; }
static const char *e_heads_zero(argl *a) { mha_args(a, "0"); return "--heads"; }
static const char *e_heads_negative(argl *a) { mha_args(a, "-2"); return "-2"; }
static const char *e_heads_text(argl *a) { mha_args(a, "two"); return "two"; }
static const char *e_mha_scale(argl *a) { mha_args(a, "2"); add(a, "--scale", "fast", NULL); return "fast"; }
static const char *e_missing_v(argl *a)
{
    add(a, "sdpa", "--q", P("q.npy"), "--k", P("k.npy"), "--out", P("o/out.npy"), NULL);
    return "--v";
}
static const char *e_missing_out(argl *a)
{
    add(a, "sdpa", "--q", P("q.npy"), "--k", P("k.npy"), "--v", P("v.npy"), "--weights", P("o/w.npy"), NULL);
    return "--out";
}
static const char *e_missing_heads(argl *a)
{
    add(a, "mha", "--x", P("x.npy"), "--wq", P("wq.npy"), "--wk", P("wk.npy"), "--wv", P("wv.npy"), "--out",
        P("o/y.npy"), NULL);
    return "--heads";
}
static const char *e_no_file(argl *a) { sdpa_args(a, P("missing.npy"), 0, 0); return P("missing.npy"); }
static const char *e_directory(argl *a)
{
    ck_assert(mkdir(P("adir"), 0700) == 0);
    sdpa_args(a, 0, P("adir"), 0);
    return P("adir");
}
static const char *e_truncated(argl *a)
{
    size_t len;
    char *img = track(tu_read_file(P("q.npy"), &len));
    tu_write_file(P("trunc.npy"), img, len - 7);
    sdpa_args(a, P("trunc.npy"), 0, 0);
    return P("trunc.npy");
}
static const char *e_header_cut(argl *a)
{
    size_t len;
    char *img = track(tu_read_file(P("k.npy"), &len));
    tu_write_file(P("cut.npy"), img, 40);
    sdpa_args(a, 0, P("cut.npy"), 0);
    return P("cut.npy");
}
static const char *e_fortran(argl *a)
{
    float d[2 * 3 * 6 * 5] = {0};
    sdpa_args(a, 0, 0, save_raw("fortran.npy", 1, "<f4", "True", "(2, 3, 6, 5)", d, sizeof d));
    return P("fortran.npy");
}
static const char *e_big_endian(argl *a)
{
    float d[2 * 3 * 4 * 8] = {0};
    sdpa_args(a, save_raw("be.npy", 1, ">f4", "False", "(2, 3, 4, 8)", d, sizeof d), 0, 0);
    return P("be.npy");
}
static const char *e_dtype_i2(argl *a)
{
    int16_t d[2 * 3 * 4 * 8] = {0};
    sdpa_args(a, save_raw("i2.npy", 1, "<i2", "False", "(2, 3, 4, 8)", d, sizeof d), 0, 0);
    return P("i2.npy");
}
static const char *e_dtype_int_tensor(argl *a)
{
    int32_t d[2 * 3 * 6 * 8] = {0};
    sdpa_args(a, 0, save_raw("i4.npy", 1, "<i4", "False", "(2, 3, 6, 8)", d, sizeof d), 0);
    return P("i4.npy");
}
static const char *e_bad_magic(argl *a)
{
    size_t len;
    char *img = track(tu_read_file(P("q.npy"), &len));
    img[1] = 'M';
    tu_write_file(P("magic.npy"), img, len);
    sdpa_args(a, P("magic.npy"), 0, 0);
    return P("magic.npy");
}
static const char *e_not_npy(argl *a)
{
    tu_write_file(P("text.npy"), "1 2 3\n4 5 6\n", 12);
    sdpa_args(a, 0, 0, P("text.npy"));
    return P("text.npy");
}
/* /dev/zero never ends: it is refused after its first bytes, not read to an end. */
static const char *e_dev_zero(argl *a)
{
    sdpa_args(a, "/dev/zero", 0, 0);
    return "/dev/zero: not a .npy file";
}
static const char *e_v2_huge_header(argl *a)
{
    static const unsigned char img[12] = {0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0, 0xF0, 0xFF, 0xFF, 0xFF};
    tu_write_file(P("huge.npy"), img, sizeof img);
    sdpa_args(a, P("huge.npy"), 0, 0);
    return P("huge.npy");
}
static const char *e_shape_overflow(argl *a)
{
    float d[16] = {0};
    sdpa_args(a, 0, save_raw("overflow.npy", 1, "<f4", "False", "(4294967296, 4294967296, 16)", d, sizeof d), 0);
    return P("overflow.npy");
}
static const char *e_rank_1(argl *a)
{
    sdpa_args(a, f32_file("q1.npy", 1, (size_t[]){8}), 0, 0);
    return P("q1.npy");
}
static const char *e_empty(argl *a)
{
    sdpa_args(a, f32_file("empty.npy", 4, (size_t[]){2, 3, 0, 8}), 0, 0);
    return P("empty.npy");
}
static const char *e_kv_disagree(argl *a)
{
    sdpa_args(a, 0, 0, f32_file("v5.npy", 4, (size_t[]){2, 3, 5, 5}));
    return P("v5.npy");
}
static const char *e_head_size(argl *a)
{
    sdpa_args(a, 0, f32_file("k7.npy", 4, (size_t[]){2, 3, 6, 7}), 0);
    return P("k7.npy");
}
static const char *e_batch_differs(argl *a)
{
    sdpa_args(a, 0, f32_file("k1.npy", 4, (size_t[]){1, 3, 6, 8}), 0);
    return P("k1.npy");
}
static const char *e_rank_differs(argl *a)
{
    sdpa_args(a, 0, 0, f32_file("v3.npy", 3, (size_t[]){3, 6, 5}));
    return "rank";
}
static const char *e_wq_rows(argl *a)
{
    add(a, "mha", "--x", P("x.npy"), "--wq", f32_file("wq7.npy", 2, (size_t[]){7, 6}), "--wk", P("wk.npy"), "--wv",
        P("wv.npy"), "--heads", "2", "--out", P("o/y.npy"), NULL);
    return P("wq7.npy");
}
static const char *e_wk_shape(argl *a)
{
    add(a, "mha", "--x", P("x.npy"), "--wq", P("wq.npy"), "--wk", f32_file("wk9.npy", 2, (size_t[]){8, 9}), "--wv",
        P("wv.npy"), "--heads", "3", "--out", P("o/y.npy"), NULL);
    return P("wk9.npy");
}
static const char *e_heads_divide(argl *a) { mha_args(a, "4"); return P("wq.npy"); }
static const char *e_heads_divide_wv(argl *a)
{
    add(a, "mha", "--x", P("x.npy"), "--wq", P("wq.npy"), "--wk", P("wk.npy"), "--wv",
        f32_file("wv4.npy", 2, (size_t[]){8, 4}), "--heads", "3", "--out", P("o/y.npy"), NULL);
    return P("wv4.npy");
}
static const char *e_bias_length(argl *a)
{
    mha_args(a, "2");
    add(a, "--bq", f32_file("bq5.npy", 1, (size_t[]){5}), NULL);
    return P("bq5.npy");
}
static const char *e_wo_rows(argl *a)
{
    mha_args(a, "2");
    add(a, "--wo", f32_file("wo.npy", 2, (size_t[]){5, 8}), NULL);
    return P("wo.npy");
}
static const char *e_bo_without_wo(argl *a)
{
    mha_args(a, "2");
    add(a, "--bo", f32_file("bo.npy", 1, (size_t[]){6}), NULL);
    return "--bo";
}
static const char *e_kv_batch(argl *a)
{
    mha_args(a, "2");
    add(a, "--kv", f32_file("kv.npy", 3, (size_t[]){3, 5, 8}), NULL);
    return P("kv.npy");
}
static const char *e_kv_rank(argl *a)
{
    mha_args(a, "2");
    add(a, "--kv", f32_file("kv2.npy", 2, (size_t[]){5, 8}), NULL);
    return P("kv2.npy");
}
static const char *e_key_length_gt_s(argl *a)
{
    sdpa_args(a, 0, 0, 0);
    add(a, "--key-lengths", save_i64("len.npy", (const long long[]){6, 7}, 2), NULL);
    return P("len.npy");
}
static const char *e_key_length_negative(argl *a)
{
    sdpa_args(a, 0, 0, 0);
    add(a, "--key-lengths", save_i32("lenneg.npy", (const long long[]){-1, 3}, 2), NULL);
    return P("lenneg.npy");
}
static const char *e_key_lengths_count(argl *a)
{
    sdpa_args(a, 0, 0, 0);
    add(a, "--key-lengths", save_i64("len3.npy", (const long long[]){1, 2, 3}, 3), NULL);
    return P("len3.npy");
}
static const char *e_key_lengths_float(argl *a)
{
    sdpa_args(a, 0, 0, 0);
    add(a, "--key-lengths", f32_file("lenf.npy", 1, (size_t[]){2}), NULL);
    return P("lenf.npy");
}
static const char *e_mask_shape(argl *a)
{
    sdpa_args(a, 0, 0, 0);
    add(a, "--mask", f32_file("mask45.npy", 2, (size_t[]){4, 5}), NULL);
    return P("mask45.npy");
}
static const char *e_mask_heads(argl *a)
{
    sdpa_args(a, 0, 0, 0);
    add(a, "--mask", f32_file("mask2h.npy", 3, (size_t[]){2, 4, 6}), NULL);
    return P("mask2h.npy");
}
static const char *e_mask_rank(argl *a)
{
    sdpa_args(a, 0, 0, 0);
    add(a, "--mask", f32_file("mask1.npy", 1, (size_t[]){6}), NULL);
    return P("mask1.npy");
}
static const char *e_mask_mha(argl *a)
{
    mha_args(a, "2");
    add(a, "--mask", f32_file("maskm.npy", 2, (size_t[]){4, 5}), NULL);
    return P("maskm.npy");
}
static const char *e_both_causal(argl *a)
{
    sdpa_args(a, 0, 0, 0);
    add(a, "--causal", "--causal-bottom-right", NULL);
    return "--causal";
}
static const char *e_tokens_count(argl *a)
{
    sdpa_args(a, 0, 0, 0);
    add(a, "--heatmap", P("o/h.svg"), "--tokens", "a,b,c", NULL);
    return "--tokens";
}
static const char *e_key_tokens_count(argl *a)
{
    mha_args(a, "2");
    add(a, "--heatmap", P("o/h.svg"), "--tokens", "我,爱,人工,智能", "--key-tokens", "x,y", NULL);
    return "--tokens";
}
static const char *e_bad_device(argl *a)
{
    sdpa_args(a, 0, 0, 0);
    add(a, "--device", "7:0", NULL);
    return "7:0";
}
static const char *e_bad_device_name(argl *a)
{
    mha_args(a, "2");
    add(a, "--device", "no-such-gpu", NULL);
    return "no-such-gpu";
}
/* A later output in a missing folder: the earlier ones must be taken back. */
static const char *e_weights_dir_missing(argl *a)
{
    add(a, "sdpa", "--q", P("q.npy"), "--k", P("k.npy"), "--v", P("v.npy"), "--out", P("o/ok.npy"), "--weights",
        P("nonexistent/dir/w.npy"), NULL);
    return P("nonexistent/dir/w.npy");
}
static const char *e_lse_dir_missing(argl *a)
{
    add(a, "sdpa", "--q", P("q.npy"), "--k", P("k.npy"), "--v", P("v.npy"), "--out", P("o/ok.npy"), "--weights",
        P("o/w.npy"), "--lse", P("nonexistent/lse.npy"), NULL);
    return P("nonexistent/lse.npy");
}
static const char *e_out_dir_missing_heatmap(argl *a)
{
    add(a, "sdpa", "--q", P("q.npy"), "--k", P("k.npy"), "--v", P("v.npy"), "--heatmap", P("o/h.svg"), "--out",
        P("nonexistent/o.npy"), NULL);
    return P("nonexistent/o.npy");
}
static const char *e_mha_weights_dir_missing(argl *a)
{
    add(a, "mha", "--x", P("x.npy"), "--wq", P("wq.npy"), "--wk", P("wk.npy"), "--wv", P("wv.npy"), "--heads", "3",
        "--heatmap", P("o/h.svg"), "--out", P("o/y.npy"), "--weights", P("nonexistent/a.npy"), NULL);
    return P("nonexistent/a.npy");
}
static const char *e_heatmap_dir_missing(argl *a)
{
    sdpa_args(a, 0, 0, 0);
    add(a, "--heatmap", P("nonexistent/h.svg"), NULL);
    return P("nonexistent/h.svg");
}

/* Outputs, option values and numbers (the tool refuses what it would otherwise misread). */
static const char *e_same_output(argl *a)
{
    sdpa_args(a, 0, 0, 0);
    a->v[11] = P("o/out.npy"); /* --weights (a->v[10]) now names --out's file */
    return "--out and --weights name the same file";
}
static const char *e_same_output_spelled(argl *a)
{
    add(a, "sdpa", "--q", P("q.npy"), "--k", P("k.npy"), "--v", P("v.npy"), "--out", P("o/x.npy"), "--lse",
        fmt("%s/o/../o/x.npy", dir), NULL);
    return "--out and --lse name the same file";
}
static const char *e_value_is_option(argl *a)
{
    add(a, "sdpa", "--q", P("q.npy"), "--k", P("k.npy"), "--v", P("v.npy"), "--out", "--causal", NULL);
    return "needs a value, not the option '--causal'";
}
static const char *e_repeated(argl *a) { sdpa_args(a, 0, 0, 0); add(a, "--scale", "1", "--scale", "2", NULL); return "given twice"; }
static const char *e_scale_blank(argl *a) { sdpa_args(a, 0, 0, 0); add(a, "--scale", " 1", NULL); return "' 1'"; }
static const char *e_scale_plus(argl *a) { sdpa_args(a, 0, 0, 0); add(a, "--scale", "+1", NULL); return "'+1'"; }
static const char *e_heads_blank(argl *a) { mha_args(a, " 2"); return "' 2'"; }

/* The 0.3 variants' flags. valid_inputs has H = 3 (sdpa) and W_Q of width 6 (mha). */
static const char *e_kv_heads_zero(argl *a) { sdpa_args(a, 0, 0, 0); add(a, "--kv-heads", "0", NULL); return "--kv-heads"; }
/* K and V of as many heads as --kv-heads says, which does not divide Q's 3. */
static const char *e_kv_heads_not_dividing(argl *a, const char *n)
{
    const size_t heads = strtoul(n, NULL, 10);
    sdpa_args(a, 0, f32_file(fmt("k%zuh.npy", heads), 4, (size_t[]){2, heads, 6, 8}),
              f32_file(fmt("v%zuh.npy", heads), 4, (size_t[]){2, heads, 6, 5}));
    add(a, "--kv-heads", n, NULL);
    return "--kv-heads";
}
static const char *e_kv_heads_divide(argl *a) { return e_kv_heads_not_dividing(a, "2"); }
static const char *e_kv_heads_above(argl *a) { return e_kv_heads_not_dividing(a, "6"); }
static const char *e_kv_heads_divide_mha(argl *a) { mha_args(a, "3"); add(a, "--kv-heads", "2", NULL); return "--kv-heads"; }
static const char *e_kv_heads_k_differs(argl *a) { sdpa_args(a, 0, 0, 0); add(a, "--kv-heads", "1", NULL); return "--kv-heads"; }
static const char *e_k_heads_without_flag(argl *a)
{
    sdpa_args(a, 0, f32_file("k1h.npy", 4, (size_t[]){2, 1, 6, 8}), f32_file("v1h.npy", 4, (size_t[]){2, 1, 6, 5}));
    return "--kv-heads";
}
static const char *e_window_one(argl *a) { sdpa_args(a, 0, 0, 0); add(a, "--window", "3", NULL); return "--window"; }
static const char *e_window_below(argl *a) { sdpa_args(a, 0, 0, 0); add(a, "--window", "1,-2", NULL); return "--window"; }
static const char *e_window_three(argl *a) { mha_args(a, "2"); add(a, "--window", "1,2,3", NULL); return "--window"; }
static const char *e_window_text(argl *a) { sdpa_args(a, 0, 0, 0); add(a, "--window", "1,x", NULL); return "--window"; }
static const char *e_scores_mode(argl *a) { sdpa_args(a, 0, 0, 0); add(a, "--scores", "raw:s.npy", NULL); return "--scores"; }
static const char *e_scores_and_weights(argl *a)
{
    sdpa_args(a, 0, 0, 0); /* which gives --weights */
    add(a, "--scores", fmt("qk:%s", P("s.npy")), NULL);
    return "--scores";
}
static const char *e_softcap_negative(argl *a) { sdpa_args(a, 0, 0, 0); add(a, "--softcap", "-1", NULL); return "--softcap"; }
static const char *e_softcap_nan(argl *a) { sdpa_args(a, 0, 0, 0); add(a, "--softcap", "nan", NULL); return "--softcap"; }
static const char *e_softcap_inf(argl *a) { mha_args(a, "2"); add(a, "--softcap", "inf", NULL); return "--softcap"; }
static const char *e_sinks_length(argl *a)
{
    sdpa_args(a, 0, 0, 0);
    add(a, "--sinks", f32_file("sinks2.npy", 1, (size_t[]){2}), NULL);
    return "--sinks";
}
static const char *e_sinks_not_finite(argl *a)
{
    sdpa_args(a, 0, 0, 0);
    add(a, "--sinks", save_f32("sinksinf.npy", (const float[]){0, INFINITY, 1}, 1, (size_t[]){3}), NULL);
    return "--sinks";
}
static const char *e_sinks_length_mha(argl *a)
{
    mha_args(a, "2");
    add(a, "--sinks", f32_file("sinks3.npy", 1, (size_t[]){3}), NULL);
    return "--sinks";
}
static const char *e_alibi_length(argl *a)
{
    mha_args(a, "3");
    add(a, "--alibi", f32_file("alibi2.npy", 1, (size_t[]){2}), NULL);
    return "--alibi";
}
static const char *e_alibi_rank(argl *a)
{
    sdpa_args(a, 0, 0, 0);
    add(a, "--alibi", f32_file("alibi31.npy", 2, (size_t[]){3, 1}), NULL);
    return "--alibi";
}
static const char *e_offsets_length(argl *a)
{
    sdpa_args(a, 0, 0, 0);
    add(a, "--offsets", save_i64("off3.npy", (const long long[]){1, 2, 3}, 3), NULL);
    return "--offsets";
}
static const char *e_offsets_length_mha(argl *a)
{
    mha_args(a, "2");
    add(a, "--offsets", save_i32("off1.npy", (const long long[]){1}, 1), NULL);
    return "--offsets";
}
static const char *e_offset_and_offsets(argl *a)
{
    sdpa_args(a, 0, 0, 0);
    add(a, "--offset", "1", "--offsets", save_i64("off2.npy", (const long long[]){1, 2}, 2), NULL);
    return "--offset and --offsets";
}
static const char *e_offset_text(argl *a) { sdpa_args(a, 0, 0, 0); add(a, "--offset", "2.5", NULL); return "--offset"; }
/* Beyond what the library takes (±2^61): its refusal of a user's value is a usage error too. */
static const char *e_offset_beyond(argl *a)
{
    sdpa_args(a, 0, 0, 0);
    add(a, "--offset", "4000000000000000000", NULL);
    return "query_offsets";
}
static const char *e_heads_on_4d(argl *a) { sdpa_args(a, 0, 0, 0); add(a, "--heads", "3", NULL); return "--heads"; }
static const char *e_heads_layout_width(argl *a)
{
    sdpa_args(a, f32_file("q3.npy", 3, (size_t[]){2, 4, 8}), f32_file("k3.npy", 3, (size_t[]){2, 6, 8}),
              f32_file("v3.npy", 3, (size_t[]){2, 6, 6}));
    add(a, "--heads", "3", NULL);
    return P("q3.npy");
}
static const char *e_heads_layout_k_width(argl *a)
{
    sdpa_args(a, f32_file("q3.npy", 3, (size_t[]){2, 4, 8}), f32_file("k3.npy", 3, (size_t[]){2, 6, 6}),
              f32_file("v3.npy", 3, (size_t[]){2, 6, 6}));
    add(a, "--heads", "2", NULL);
    return P("k3.npy");
}

static const err_case err_cases[] = {
    {"--out and --weights the same file", e_same_output, false, NULL},
    {"--out and --lse the same file, spelled differently", e_same_output_spelled, false, NULL},
    {"--out followed by an option", e_value_is_option, true, NULL},
    {"--scale twice", e_repeated, true, NULL},
    {"--scale with a leading blank", e_scale_blank, false, NULL},
    {"--scale with a plus sign", e_scale_plus, false, NULL},
    {"--heads with a leading blank", e_heads_blank, false, NULL},
    {"unknown flag", e_unknown_flag, true, NULL},
    {"flag missing its value", e_missing_value, true, NULL},
    {"flag given a value", e_flag_with_value, true, NULL},
    {"stray argument", e_positional, true, NULL},
    {"--scale abc", e_scale_text, false, NULL},
    {"--scale 0.5x", e_scale_suffix, false, NULL},
    {"--scale inf", e_scale_inf, false, NULL},
    {"--scale nan", e_scale_nan, false, NULL},
    {"--heads 0", e_heads_zero, false, NULL},
    {"--heads -2", e_heads_negative, false, NULL},
    {"--heads two", e_heads_text, false, NULL},
    {"mha --scale fast", e_mha_scale, false, NULL},
    {"missing --v", e_missing_v, false, NULL},
    {"missing --out", e_missing_out, false, NULL},
    {"missing --heads", e_missing_heads, false, NULL},
    {"nonexistent input", e_no_file, false, NULL},
    {"input is a folder", e_directory, false, NULL},
    {"truncated data", e_truncated, false, NULL},
    {"truncated header", e_header_cut, false, NULL},
    {"Fortran order", e_fortran, false, NULL},
    {"big-endian >f4", e_big_endian, false, NULL},
    {"dtype <i2", e_dtype_i2, false, NULL},
    {"integer tensor <i4", e_dtype_int_tensor, false, NULL},
    {"bad magic", e_bad_magic, false, NULL},
    {"text file", e_not_npy, false, NULL},
    {"/dev/zero", e_dev_zero, false, NULL},
    {"v2 header length 0xFFFFFFF0", e_v2_huge_header, false, NULL},
    {"shape product overflows", e_shape_overflow, false, NULL},
    {"1-D Q", e_rank_1, false, NULL},
    {"empty Q", e_empty, false, NULL},
    {"K and V disagree in S", e_kv_disagree, false, NULL},
    {"head size Q vs K", e_head_size, false, NULL},
    {"batch differs", e_batch_differs, false, NULL},
    {"rank differs", e_rank_differs, false, NULL},
    {"W_Q rows != d_model", e_wq_rows, false, NULL},
    {"W_K shape", e_wk_shape, false, NULL},
    {"heads do not divide W_Q", e_heads_divide, false, NULL},
    {"heads do not divide W_V", e_heads_divide_wv, false, NULL},
    {"bias length", e_bias_length, false, NULL},
    {"W_O rows", e_wo_rows, false, NULL},
    {"--bo without --wo", e_bo_without_wo, false, NULL},
    {"KV batch", e_kv_batch, false, NULL},
    {"KV rank", e_kv_rank, false, NULL},
    {"key length > S", e_key_length_gt_s, false, NULL},
    {"key length < 0", e_key_length_negative, false, NULL},
    {"key lengths count", e_key_lengths_count, false, NULL},
    {"key lengths float", e_key_lengths_float, false, NULL},
    {"mask shape", e_mask_shape, false, NULL},
    {"mask heads", e_mask_heads, false, NULL},
    {"mask rank 1", e_mask_rank, false, NULL},
    {"mha mask shape", e_mask_mha, false, NULL},
    {"--causal with --causal-bottom-right", e_both_causal, false, NULL},
    {"--tokens count", e_tokens_count, false, NULL},
    {"--key-tokens count", e_key_tokens_count, false, NULL},
    {"--device 7:0", e_bad_device, false, "0:0"}, /* and lists the devices that exist */
    {"--device no-such-gpu", e_bad_device_name, false, "0:0"},
    {"--weights in a missing folder", e_weights_dir_missing, false, NULL},
    {"--lse in a missing folder", e_lse_dir_missing, false, NULL},
    {"--out in a missing folder after --heatmap", e_out_dir_missing_heatmap, false, NULL},
    {"mha --weights in a missing folder", e_mha_weights_dir_missing, false, NULL},
    {"--heatmap in a missing folder", e_heatmap_dir_missing, false, NULL},
    {"--kv-heads 0", e_kv_heads_zero, false, NULL},
    {"--kv-heads not dividing H", e_kv_heads_divide, false, NULL},
    {"--kv-heads above H", e_kv_heads_above, false, NULL},
    {"mha --kv-heads not dividing H", e_kv_heads_divide_mha, false, NULL},
    {"--kv-heads other than K's heads", e_kv_heads_k_differs, false, NULL},
    {"K of fewer heads without --kv-heads", e_k_heads_without_flag, false, NULL},
    {"--window with one number", e_window_one, false, NULL},
    {"--window side below -1", e_window_below, false, NULL},
    {"mha --window with three numbers", e_window_three, false, NULL},
    {"--window not a number", e_window_text, false, NULL},
    {"--scores with an unknown mode", e_scores_mode, false, NULL},
    {"--scores with --weights", e_scores_and_weights, false, NULL},
    {"--softcap negative", e_softcap_negative, false, NULL},
    {"--softcap nan", e_softcap_nan, false, NULL},
    {"mha --softcap inf", e_softcap_inf, false, NULL},
    {"--sinks of the wrong length", e_sinks_length, false, NULL},
    {"--sinks not finite", e_sinks_not_finite, false, NULL},
    {"mha --sinks of the wrong length", e_sinks_length_mha, false, NULL},
    {"mha --alibi of the wrong length", e_alibi_length, false, NULL},
    {"--alibi of rank 2", e_alibi_rank, false, NULL},
    {"--offsets of the wrong length", e_offsets_length, false, NULL},
    {"mha --offsets of the wrong length", e_offsets_length_mha, false, NULL},
    {"--offset with --offsets", e_offset_and_offsets, false, NULL},
    {"--offset 2.5", e_offset_text, false, NULL},
    {"--offset beyond the library's range", e_offset_beyond, false, NULL},
    {"--heads with 4-D inputs", e_heads_on_4d, false, NULL},
    {"--heads not dividing Q's width", e_heads_layout_width, false, NULL},
    {"--heads: K's width not kv_heads·D", e_heads_layout_k_width, false, NULL},
};
#define N_ERR_CASES (sizeof err_cases / sizeof err_cases[0])

START_TEST(test_errors)
{
    const err_case *c = &err_cases[_i];
    valid_inputs();
    argl a = {{0}, 0};
    const char *needle = c->make(&a);
    run_args(&a, NULL);
    ck_assert_msg(R.status == EXIT_USAGE, "%s: `%s` exited %d, expected 2\n--- stderr:\n%.3000s", c->name, R.cmd,
                  R.status, R.err);
    const char *prefix = fmt("clattn %s: ", a.v[1]);
    ck_assert_msg(strncmp(R.err, prefix, strlen(prefix)) == 0, "%s: stderr does not start with \"%s\":\n%.3000s",
                  c->name, prefix, R.err);
    const size_t first_len = strcspn(R.err, "\n");
    ck_assert_msg(contains_n(R.err, first_len, needle),
                  "%s: the first line of stderr does not name \"%s\":\n%.3000s", c->name, needle, R.err);
    if (c->usage_follows)
        expect_in("stderr", R.err, fmt("usage: clattn %s", a.v[1]));
    else
        ck_assert_msg(count_lines(R.err) == 1 && R.err[first_len] == '\n',
                      "%s: stderr is not exactly one line:\n%.3000s", c->name, R.err);
    if (c->also)
        expect_in("stderr", R.err, c->also);
    const char *left = list_dir(P("o"));
    ck_assert_msg(left[0] == '\0', "%s: `%s` failed but left files behind:\n%s", c->name, R.cmd, left);
    ck_assert_msg(!exists(P("nonexistent")), "%s: a missing output folder was created", c->name);
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* Regressions: bugs these tests found in the tool, fixed since */
/* ---------------------------------------------------------------------------------------------- */

/* --scale 1e39 is a finite double but not a finite float: a usage error (2), not a library failure. */
START_TEST(test_regression_scale_beyond_float)
{
    valid_inputs();
    EXPECT(EXIT_USAGE, "sdpa", "--q", P("q.npy"), "--k", P("k.npy"), "--v", P("v.npy"), "--out", P("o/out.npy"),
           "--scale", "1e39");
    expect_in("stderr", R.err, "1e39");
    EXPECT(EXIT_USAGE, "mha", "--x", P("x.npy"), "--wq", P("wq.npy"), "--wk", P("wk.npy"), "--wv", P("wv.npy"),
           "--heads", "2", "--out", P("o/y.npy"), "--scale", "-1e39");
    expect_in("stderr", R.err, "-1e39");
    ck_assert_str_eq(list_dir(P("o")), "");
}
END_TEST

/* A --mask of an unsupported dtype: the message must name the file, like every other input error. */
START_TEST(test_regression_mask_dtype_message)
{
    valid_inputs();
    int32_t d[4 * 6] = {0};
    const char *m = save_raw("mask_i4.npy", 1, "<i4", "False", "(4, 6)", d, sizeof d);
    EXPECT(EXIT_USAGE, "sdpa", "--q", P("q.npy"), "--k", P("k.npy"), "--v", P("v.npy"), "--out", P("o/out.npy"),
           "--mask", m);
    ck_assert_msg(count_lines(R.err) == 1, "one line: %s", R.err);
    expect_in("stderr", R.err, m);
    ck_assert_str_eq(list_dir(P("o")), "");
}
END_TEST

/* demo: a failed run leaves no output behind; here --heatmap cannot be written, so --save must not
 * leave its nine .npy files either. */
START_TEST(test_regression_demo_partial_outputs)
{
    const char *save = P("saved");
    EXPECT(EXIT_USAGE, "demo", "--save", save, "--heatmap", P("nonexistent/h.svg"));
    expect_in("stderr", R.err, P("nonexistent/h.svg"));
    ck_assert_msg(!exists(save) || list_dir(save)[0] == '\0', "`%s` failed (exit 2) but left in %s:\n%s", R.cmd,
                  save, list_dir(save));
}
END_TEST

/* A failed run must not destroy a file that was already at an output path before it started: the
 * all-or-nothing clean-up should take back only what this run created (npy_save_f32 itself promises
 * "on failure path is left as it was"). */
START_TEST(test_regression_failed_run_deletes_existing_output)
{
    valid_inputs();
    const char *old = P("o/old.npy");
    tu_write_file(old, "previous results", 16);
    EXPECT(EXIT_USAGE, "sdpa", "--q", P("q.npy"), "--k", P("k.npy"), "--v", P("v.npy"), "--out", old, "--weights",
           P("nonexistent/w.npy"));
    char *content = tu_read_file(old, NULL);
    track(content ? content : malloc(1));
    ck_assert_msg(content && strcmp(content, "previous results") == 0,
                  "`%s` failed (exit 2) and %s, which existed before the run, is %s", R.cmd, old,
                  content ? "overwritten" : "gone");
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* 6. demo                                                                                         */
/* ---------------------------------------------------------------------------------------------- */

static const double tutorial_table[4][4] = {
    {0.2480, 0.2509, 0.2499, 0.2512},
    {0.2513, 0.2499, 0.2498, 0.2490},
    {0.2484, 0.2506, 0.2495, 0.2515},
    {0.2479, 0.2516, 0.2485, 0.2520},
};

START_TEST(test_demo_table)
{
    EXPECT(EXIT_OK, "demo");
    static const char *const rows[] = {"0.2480  0.2509  0.2499  0.2512", "0.2513  0.2499  0.2498  0.2490",
                                       "0.2484  0.2506  0.2495  0.2515", "0.2479  0.2516  0.2485  0.2520"};
    for (size_t i = 0; i < 4; i++) {
        const char *row = strstr(R.out, rows[i]);
        ck_assert_msg(row != NULL, "demo output lacks the weights row \"%s\":\n%s", rows[i], R.out);
        /* the row is labelled with its token */
        const char *line = row;
        while (line > R.out && line[-1] != '\n')
            line--;
        ck_assert_msg(contains_n(line, (size_t)(row - line), tutorial_words[i]),
                      "row \"%s\" is not labelled %s", rows[i], tutorial_words[i]);
    }
    expect_in("stdout", R.out, "Attention weights");
    for (size_t i = 0; i < 4; i++)
        expect_in("stdout", R.out, tutorial_words[i]);
    ck_assert_str_eq(R.err, "");
}
END_TEST

START_TEST(test_demo_save)
{
    const char *save = P("saved");
    EXPECT(EXIT_OK, "demo", "--save", save);
    enum { N = TUTORIAL_TOKENS, DM = TUTORIAL_D_MODEL, DK = TUTORIAL_D_K };
    const float *x = load_f32(fmt("%s/x.npy", save), 2, (size_t[]){N, DM});
    const float *wq = load_f32(fmt("%s/wq.npy", save), 2, (size_t[]){DM, DK});
    const float *wk = load_f32(fmt("%s/wk.npy", save), 2, (size_t[]){DM, DK});
    const float *wv = load_f32(fmt("%s/wv.npy", save), 2, (size_t[]){DM, DK});
    const float *q = load_f32(fmt("%s/q.npy", save), 2, (size_t[]){N, DK});
    const float *k = load_f32(fmt("%s/k.npy", save), 2, (size_t[]){N, DK});
    const float *v = load_f32(fmt("%s/v.npy", save), 2, (size_t[]){N, DK});
    const float *w = load_f32(fmt("%s/weights.npy", save), 2, (size_t[]){N, N});
    const float *out = load_f32(fmt("%s/out.npy", save), 2, (size_t[]){N, DK});
    const char *names = list_dir(save);
    ck_assert_msg(count_lines(names) == 9, "demo --save wrote:\n%s", names);

    /* The inputs are the tutorial's, rounded to float. */
    for (size_t i = 0; i < N * DM; i++)
        ck_assert_msg(x[i] == (float)tutorial_x[i / DM][i % DM], "x[%zu] = %g", i, x[i]);
    for (size_t i = 0; i < DM * DK; i++) {
        ck_assert_msg(wq[i] == (float)tutorial_w_q[i / DK][i % DK], "wq[%zu] = %g", i, wq[i]);
        ck_assert_msg(wk[i] == (float)tutorial_w_k[i / DK][i % DK], "wk[%zu] = %g", i, wk[i]);
        ck_assert_msg(wv[i] == (float)tutorial_w_v[i / DK][i % DK], "wv[%zu] = %g", i, wv[i]);
    }
    /* The weights round to the tutorial's table. */
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < N; j++)
            ck_assert_msg(lround(w[i * N + j] * 1e4) == lround(tutorial_table[i][j] * 1e4),
                          "weights[%zu][%zu] = %.6f, the tutorial prints %.4f", i, j, w[i * N + j],
                          tutorial_table[i][j]);
    /* Each stage agrees with the fp64 reference on its saved inputs. */
    double ref[N * DK], rw[N * N];
    ref_matmul(N, DM, DK, x, wq, NULL, ref);
    expect_close("q = x·wq", q, ref, N * DK);
    ref_matmul(N, DM, DK, x, wk, NULL, ref);
    expect_close("k = x·wk", k, ref, N * DK);
    ref_matmul(N, DM, DK, x, wv, NULL, ref);
    expect_close("v = x·wv", v, ref, N * DK);
    clattn_sdpa_desc d = CLATTN_SDPA_DESC_INIT;
    d.batch = 1;
    d.heads = 1;
    d.q_len = N;
    d.kv_len = N;
    d.qk_dim = DK;
    ref_sdpa(&d, q, k, v, NULL, ref, rw, NULL);
    expect_close("weights", w, rw, N * N);
    expect_close("out", out, ref, N * DK);

    /* Saving into an existing folder works too; a folder that cannot be made is an error (2). */
    EXPECT(EXIT_OK, "demo", "--save", save);
    EXPECT(EXIT_USAGE, "demo", "--save", P("nonexistent/sub"));
    expect_in("stderr", R.err, P("nonexistent/sub"));
    ck_assert(!exists(P("nonexistent")));
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* 7. Heatmaps                                                                                     */
/* ---------------------------------------------------------------------------------------------- */

/* Parses the SVG as XML and checks one <rect class="cell"> per expected weight (listed in a file as
 * "head row col value"), each inside its head's panel with its value, and that every label given
 * appears in the text. */
static const char svg_check_py[] =
    "import sys, xml.dom.minidom as minidom\n"
    "doc = minidom.parse(sys.argv[1])\n"
    "want = {}\n"
    "for line in open(sys.argv[2]):\n"
    "    h, r, c, v = line.split()\n"
    "    want[(int(h), int(r), int(c))] = float(v)\n"
    "seen = set()\n"
    "for g in doc.getElementsByTagName('g'):\n"
    "    if g.getAttribute('class') != 'panel':\n"
    "        continue\n"
    "    h = int(g.getAttribute('data-head'))\n"
    "    for e in g.getElementsByTagName('rect'):\n"
    "        if e.getAttribute('class') != 'cell':\n"
    "            continue\n"
    "        key = (h, int(e.getAttribute('data-row')), int(e.getAttribute('data-col')))\n"
    "        assert key in want, ('unexpected cell', key)\n"
    "        assert key not in seen, ('cell drawn twice', key)\n"
    "        seen.add(key)\n"
    "        v = float(e.getAttribute('data-value'))\n"
    "        assert abs(v - want[key]) <= 1e-6 + 1e-5 * abs(want[key]), ('value', key, v, want[key])\n"
    "cells = [e for e in doc.getElementsByTagName('rect') if e.getAttribute('class') == 'cell']\n"
    "assert len(cells) == len(want) == len(seen), \\\n"
    "    ('cells', len(cells), 'expected', len(want), 'in panels', len(seen))\n"
    "def texts(n):\n"
    "    for c in n.childNodes:\n"
    "        if c.nodeType == c.TEXT_NODE:\n"
    "            yield c.data\n"
    "        else:\n"
    "            yield from texts(c)\n"
    "text = '\\n'.join(texts(doc))\n"
    "for label in sys.argv[3:]:\n"
    "    assert label in text, ('label missing', label)\n";

/* Writes the expected cells of weights (B,H,L,S): the first batch's first `heads` heads. */
static const char *expected_cells(const float *w, size_t heads, size_t L, size_t S)
{
    char *lines = fmt("%s", "");
    for (size_t h = 0; h < heads; h++)
        for (size_t i = 0; i < L; i++)
            for (size_t j = 0; j < S; j++)
                lines = fmt("%s%zu %zu %zu %.9g\n", lines, h, i, j, w[(h * L + i) * S + j]);
    static unsigned cells_files;
    const char *path = P(fmt("cells-%u.txt", ++cells_files));
    tu_write_file(path, lines, strlen(lines));
    return path;
}

START_TEST(test_heatmap_demo)
{
    const char *svg = P("demo.svg"), *save = P("saved");
    EXPECT(EXIT_OK, "demo", "--heatmap", svg, "--save", save);
    const float *w = load_f32(fmt("%s/weights.npy", save), 2, (size_t[]){4, 4});
    python_check(svg_check_py, NULL,
                 (const char *const[]){svg, expected_cells(w, 1, 4, 4), tutorial_words[0], tutorial_words[1],
                                       tutorial_words[2], tutorial_words[3], NULL});
    char *text = track(tu_read_file(svg, NULL));
    ck_assert(text != NULL);
    for (size_t i = 0; i < 4; i++)
        expect_in(svg, text, tutorial_words[i]);
}
END_TEST

START_TEST(test_heatmap_sdpa)
{
    /* B = 2, H = 3: the first batch's three heads, 3·4·5 cells; Chinese and XML-special labels. */
    const size_t B = 2, H = 3, L = 4, S = 5;
    rng.state = 300;
    const char *q = f32_file("q.npy", 4, (size_t[]){B, H, L, 8}), *k = f32_file("k.npy", 4, (size_t[]){B, H, S, 8});
    const char *v = f32_file("v.npy", 4, (size_t[]){B, H, S, 3});
    const char *svg = P("map.svg");
    EXPECT(EXIT_OK, "sdpa", "--q", q, "--k", k, "--v", v, "--out", P("o.npy"), "--heatmap", svg, "--tokens",
           "我,爱,人工,智能", "--key-tokens", "今天,天气,a<b,&c,\"d'");
    ck_assert_msg(!exists(P("w.npy")), "no --weights, no weights file");
    /* The same run with --weights, to know the values. */
    const char *svg2 = P("map2.svg");
    EXPECT(EXIT_OK, "sdpa", "--q", q, "--k", k, "--v", v, "--out", P("o.npy"), "--weights", P("w.npy"), "--heatmap",
           svg2, "--tokens", "我,爱,人工,智能", "--key-tokens", "今天,天气,a<b,&c,\"d'");
    const float *w = load_f32(P("w.npy"), 4, (size_t[]){B, H, L, S});
    const char *cells = expected_cells(w, H, L, S);
    python_check(svg_check_py, NULL,
                 (const char *const[]){svg, cells, "我", "爱", "人工", "智能", "今天", "天气", "a<b", "&c", "\"d'",
                                       NULL});
    python_check(svg_check_py, NULL, (const char *const[]){svg2, cells, NULL});

    /* L = S: --tokens labels the keys too. */
    const char *sq = f32_file("sq.npy", 3, (size_t[]){2, 3, 4});
    const char *svg3 = P("self.svg");
    EXPECT(EXIT_OK, "sdpa", "--q", sq, "--k", sq, "--v", sq, "--out", P("o3.npy"), "--weights", P("w3.npy"),
           "--heatmap", svg3, "--tokens", "猫,坐,垫");
    const float *w3 = load_f32(P("w3.npy"), 3, (size_t[]){2, 3, 3});
    python_check(svg_check_py, NULL,
                 (const char *const[]){svg3, expected_cells(w3, 2, 3, 3), "猫", "坐", "垫", NULL});
    char *text = track(tu_read_file(svg3, NULL));
    const char *first = strstr(text, "垫");
    ck_assert_msg(first && strstr(first + 1, "垫"), "a token labels both its query row and its key column");

    /* More than 16 heads: the first 16 are drawn. */
    const char *mq = f32_file("mq.npy", 3, (size_t[]){18, 2, 4});
    const char *svg4 = P("many.svg");
    EXPECT(EXIT_OK, "sdpa", "--q", mq, "--k", mq, "--v", mq, "--out", P("o4.npy"), "--weights", P("w4.npy"),
           "--heatmap", svg4);
    const float *w4 = load_f32(P("w4.npy"), 3, (size_t[]){18, 2, 2});
    python_check(svg_check_py, NULL, (const char *const[]){svg4, expected_cells(w4, 16, 2, 2), NULL});
}
END_TEST

START_TEST(test_heatmap_mha)
{
    /* Cross-attention (L ≠ S): --tokens labels the queries, --key-tokens the keys. */
    rng.state = 310;
    const char *x = f32_file("x.npy", 3, (size_t[]){1, 3, 4}), *kv = f32_file("kv.npy", 3, (size_t[]){1, 5, 6});
    const char *wq = f32_file("wq.npy", 2, (size_t[]){4, 4}), *wk = f32_file("wk.npy", 2, (size_t[]){6, 4});
    const char *wv = f32_file("wv.npy", 2, (size_t[]){6, 4}), *svg = P("mha.svg");
    EXPECT(EXIT_OK, "mha", "--x", x, "--kv", kv, "--wq", wq, "--wk", wk, "--wv", wv, "--heads", "2", "--out",
           P("y.npy"), "--weights", P("a.npy"), "--heatmap", svg, "--tokens", "我,爱,你", "--key-tokens",
           "I,love,you,very,much");
    const float *w = load_f32(P("a.npy"), 4, (size_t[]){1, 2, 3, 5});
    python_check(svg_check_py, NULL,
                 (const char *const[]){svg, expected_cells(w, 2, 3, 5), "我", "爱", "你", "love", "much", NULL});
}
END_TEST

/* The library's warnings reach the user on stderr, once, and change nothing else. */
START_TEST(test_warnings_reach_user)
{
    rng.state = 330;
    const char *q = f32_file("q.npy", 3, (size_t[]){2, 3, 4}), *k = f32_file("k.npy", 3, (size_t[]){2, 5, 4});
    const char *v = f32_file("v.npy", 3, (size_t[]){2, 5, 4});
    const char *const bad_tile[] = {"CLATTN_TILE=8by8", NULL};
    clattn_env(bad_tile, "sdpa", "--q", q, "--k", k, "--v", v, "--out", P("o.npy"), (const char *)NULL);
    expect_status(EXIT_OK);
    expect_in("stderr's warnings", R.warn, "clattn sdpa: warning: CLATTN_TILE=\"8by8\"");
    ck_assert_msg(strstr(strstr(R.warn, "CLATTN_TILE") + 1, "CLATTN_TILE") == NULL, "the warning was printed twice:\n%s",
                  R.warn);
    const char *const bad_cache[] = {"CLATTN_CACHE=maybe", NULL};
    clattn_env(bad_cache, "demo", (const char *)NULL);
    expect_status(EXIT_OK);
    expect_in("stderr's warnings", R.warn, "clattn demo: warning: CLATTN_CACHE=\"maybe\"");
    CLATTN("sdpa", "--q", q, "--k", k, "--v", v, "--out", P("o.npy"));
    expect_status(EXIT_OK);
    ck_assert_msg(strstr(R.warn, "CLATTN_") == NULL, "a warning without cause:\n%s", R.warn);
}
END_TEST

/* Outputs: an existing file keeps its permissions; a symbolic link is written through (the link
 * stays, its target gets the result); a link to nothing is refused and left alone. */
START_TEST(test_outputs_links_and_modes)
{
    valid_inputs();
    struct stat st;
    const char *kept = P("kept.npy");
    tu_write_file(kept, "x", 1);
    ck_assert_int_eq(chmod(kept, 0640), 0);
    EXPECT(EXIT_OK, "sdpa", "--q", P("q.npy"), "--k", P("k.npy"), "--v", P("v.npy"), "--out", kept);
    ck_assert_int_eq(stat(kept, &st), 0);
    ck_assert_msg((st.st_mode & 0777) == 0640 && st.st_size > 1, "kept.npy: mode %o, %lld bytes", (unsigned)st.st_mode,
                  (long long)st.st_size);

    const char *target = P("target.npy"), *link = P("link.npy");
    tu_write_file(target, "x", 1);
    ck_assert_int_eq(symlink(target, link), 0);
    EXPECT(EXIT_OK, "sdpa", "--q", P("q.npy"), "--k", P("k.npy"), "--v", P("v.npy"), "--out", link);
    ck_assert_int_eq(lstat(link, &st), 0);
    ck_assert_msg(S_ISLNK(st.st_mode), "the link was replaced by a file");
    ck_assert_int_eq(stat(target, &st), 0);
    ck_assert_msg(st.st_size > 1, "the link's target was not written");

    const char *dangling = P("dangling.npy");
    ck_assert_int_eq(symlink(P("nowhere/x.npy"), dangling), 0);
    CLATTN("sdpa", "--q", P("q.npy"), "--k", P("k.npy"), "--v", P("v.npy"), "--out", dangling);
    ck_assert_msg(R.status != EXIT_OK, "a link to nothing was written through:\n%s", R.err);
    expect_in("stderr", R.err, "symbolic link to a missing file");
    ck_assert_int_eq(lstat(dangling, &st), 0);
    ck_assert_msg(S_ISLNK(st.st_mode), "the dangling link was replaced");
}
END_TEST

/* `clattn bench --quick --json`: every case on its paths (fused and staged; decode and fused; decode alone
 * for paged and ragged; the device's GEMM and CLBlast for the projection), the decode cases' bandwidth
 * rows, and each run's device time is its kernels' own (the per-kernel times add up to it, and it fits
 * inside the wall time of the same run). */
/* --ring-model: the table and the figure, with a speed given (so the numbers are the model's alone): at
 * 1000 GFLOP/s over 12.5 GB/s, 8 of 32 heads for K/V and half the pairs visible, communication hides from
 * 2·(8/32)·(1000/12.5)/0.5 = 80 rows per rank. */
START_TEST(test_bench_ring_model)
{
    EXPECT(EXIT_OK, "bench", "--quick", "--only", "ring", "--ring-model", P("ring.svg"), "--ring-gflops", "1000");
    expect_in("stdout", R.out, "1000.0 GFLOP/s (given by --ring-gflops)");
    expect_in("stdout", R.out, "(12.5 GB/s): communication hides while each rank holds at least 80 rows");
    const char *svg = tu_read_file(P("ring.svg"), NULL);
    ck_assert_msg(svg && strncmp(svg, "<svg", 4) == 0 && strstr(svg, "</svg>") && strstr(svg, "polyline"),
                  "ring.svg is not a drawing: %.200s", svg ? svg : "(missing)");
    free((void *)svg);
    EXPECT(EXIT_USAGE, "bench", "--ring-gflops", "1000");
    expect_in("stderr", R.err, "--ring-gflops goes with --ring-model");
    EXPECT(EXIT_USAGE, "bench", "--json", "--ring-model", P("x.svg"));
    EXPECT(EXIT_USAGE, "bench", "--ring-model", P("x.svg"), "--ring-gflops", "-3"); /* refused before any case */
    ck_assert(!exists(P("x.svg")));
}
END_TEST

START_TEST(test_bench_quick_json)
{
    EXPECT(EXIT_OK, "bench", "--quick", "--json");
    python_check_stdout(
        "bench.json",
        "import json, sys\n"
        "d = json.load(sys.stdin)\n"
        "rows = [r for r in d['cases'] if r['kind'] not in ('bandwidth', 'versus')]\n"
        "bandwidth = [r for r in d['cases'] if r['kind'] == 'bandwidth']\n"
        "versus = [r for r in d['cases'] if r['kind'] == 'versus']\n"
        "assert [r['versus'] for r in versus] == ['decode L=1 S=512 H=4 D=64'] * 2, versus\n"
        "assert all(r['pairs'] >= 9 and 0 < r['low'] <= r['time_ratio'] <= r['high'] for r in versus), versus\n"
        "assert len(rows) == 16, len(rows)\n"
        "assert [r['kv_dtype'] for r in rows if 'int8' in r['name']] == ['int8', 'int8'], rows\n"
        "assert sorted(r['name'] for r in bandwidth) == sorted(r['name'] for r in rows if r['path'] == 'decode'), d\n"
        "assert all(r['kv_gbps'] > 0 and r['stream_gbps'] > 0 for r in bandwidth), bandwidth\n"
        "staged = {'score', 'softmax', 'weighted-sum'}\n"
        "for r in rows:\n"
        "    k = r['kernels']\n"
        "    assert r['runs'] >= 3 and r['ms'] > 0 and r['gflops'] >= 0, r\n"
        "    assert 0 < r['device_ms'] <= r['ms'] * 1.001 + 1e-3, ('device time beyond the run', r)\n"
        "    assert abs(sum(k.values()) - r['device_ms']) <= 1e-3 + 1e-3 * r['device_ms'], ('kernels', r)\n"
        "    if r['path'] == 'fused':\n"
        "        assert 'fused attention' in k and not staged & set(k), r\n"
        "    elif r['path'] == 'decode':\n"
        "        assert 'decode partial' in k and 'fused attention' not in k and not staged & set(k), r\n"
        "        assert ('paged block-id check' in k) == (r['kind'] == 'paged'), r\n"
        "    elif r['kind'] == 'gemm':\n"
        "        blas = {'projection GEMM (CLBlast)', 'projection bias'}\n"
        "        assert set(k) in ({'projection GEMM (clattn)'}, blas), r\n"  /* CLBlast falls back where it cannot launch */
        "    else:\n"
        "        assert staged <= set(k) and 'fused attention' not in k, r\n"
        "    if r['kind'] == 'mha':\n"
        "        assert any(n.startswith('projection') for n in k), r\n");
    EXPECT(EXIT_OK, "bench", "--quick");
    expect_in("stdout", R.out, "device ms");
    expect_in("stdout", R.out, "staged/fused time");
    expect_in("stdout", R.out, "fused/decode time");
    expect_in("stdout", R.out, "CLBlast/gemm time");
    expect_in("stdout", R.out, "% of streaming");
    expect_in("stdout", R.out, "time against \"decode L=1 S=512 H=4 D=64\"");
}
END_TEST

/* Any float .npy output ('<f4', '<f2', or '<u2' bfloat16 bit patterns) as floats, with its dtype. */
static float *load_any(const char *path, size_t n, npy_dtype *dtype)
{
    npy_array a;
    char err[512];
    ck_assert_msg(npy_load(path, &a, err, sizeof err) == 0, "`%s`: reading %s: %s", R.cmd, path, err);
    track(a.data);
    ck_assert_msg(a.count == n, "%s: %zu elements, expected %zu", path, a.count, n);
    *dtype = a.dtype;
    float *f = NULL;
    const int rc = a.dtype == NPY_U2 ? npy_bf16_to_float(&a, &f, err, sizeof err) : npy_to_float(&a, &f, err, sizeof err);
    ck_assert_msg(rc == 0, "%s: %s", path, err);
    return track(f);
}

/* Storage types on the command line: '<f2' inputs run as half on the device, --out-dtype writes '<f2'
 * or '<u2', --bf16 reads '<u2' bit patterns, --kv-int8 quantises K and V; each output against the float32
 * run's, within its type's rounding (int8: 3% of the largest output); and the flags' usage errors. */
START_TEST(test_sdpa_dtypes)
{
    enum { H = 2, L = 5, S = 40, D = 8 };
    const size_t qs[3] = {H, L, D}, ks[3] = {H, S, D}, no = H * L * D;
    float q[H * L * D], k[H * S * D], v[H * S * D];
    tu_fill_uniform(q, H * L * D, 2.0f, 41);
    tu_fill_uniform(k, H * S * D, 2.0f, 42);
    tu_fill_uniform(v, H * S * D, 2.0f, 43);
    float *all[3] = {q, k, v};
    const size_t counts[3] = {H * L * D, H * S * D, H * S * D};
    for (int t = 0; t < 3; t++) /* values that half and bfloat16 both hold exactly */
        for (size_t i = 0; i < counts[t]; i++)
            all[t][i] = npy_bf16_to_float_value(npy_float_to_bf16(npy_half_to_float(npy_float_to_half(all[t][i]))));
    char err[512];
    const char *half[3] = {"qh.npy", "kh.npy", "vh.npy"}, *bf[3] = {"qb.npy", "kb.npy", "vb.npy"};
    for (int t = 0; t < 3; t++) {
        ck_assert_msg(npy_save_floats_as(P(half[t]), NPY_F2, all[t], 3, t ? ks : qs, err, sizeof err) == 0, "%s", err);
        ck_assert_msg(npy_save_floats_as(P(bf[t]), NPY_U2, all[t], 3, t ? ks : qs, err, sizeof err) == 0, "%s", err);
    }
    EXPECT(EXIT_OK, "sdpa", "--q", save_f32("q4.npy", q, 3, qs), "--k", save_f32("k4.npy", k, 3, ks), "--v",
           save_f32("v4.npy", v, 3, ks), "--out", P("o4.npy"));
    const float *ref = load_f32(P("o4.npy"), 3, qs);
    double *r = tu_dalloc(no);
    float top = 0.0f;
    for (size_t i = 0; i < no; i++) {
        r[i] = ref[i];
        top = fmaxf(top, fabsf(ref[i]));
    }
    npy_dtype dt;
    EXPECT(EXIT_OK, "sdpa", "--q", P(half[0]), "--k", P(half[1]), "--v", P(half[2]), "--out", P("oh.npy"),
           "--out-dtype", "float16");
    expect_in("stdout", R.out, "float16");
    const float *oh = load_any(P("oh.npy"), no, &dt);
    ck_assert_msg(dt == NPY_F2, "--out-dtype float16 wrote %s", npy_dtype_name(dt));
    check_close_rounded("half out", oh, r, no, 10, -14, NULL);
    EXPECT(EXIT_OK, "sdpa", "--bf16", "--q", P(bf[0]), "--k", P(bf[1]), "--v", P(bf[2]), "--out", P("ob.npy"),
           "--out-dtype", "bfloat16");
    const float *ob = load_any(P("ob.npy"), no, &dt);
    ck_assert_msg(dt == NPY_U2, "--out-dtype bfloat16 wrote %s", npy_dtype_name(dt));
    check_close_rounded("bfloat16 out", ob, r, no, 7, -126, NULL);
    EXPECT(EXIT_OK, "sdpa", "--q", P(half[0]), "--k", P(half[1]), "--v", P(half[2]), "--out", P("o8.npy"), "--kv-int8");
    const float *o8 = load_any(P("o8.npy"), no, &dt);
    for (size_t i = 0; i < no; i++)
        ck_assert_msg(fabsf(o8[i] - ref[i]) <= 0.03f * top, "--kv-int8: out[%zu] = %g, float32 run %g", i, o8[i],
                      ref[i]);
    /* Usage errors, each naming what is wrong. */
    EXPECT(EXIT_USAGE, "sdpa", "--bf16", "--q", P(half[0]), "--k", P(bf[1]), "--v", P(bf[2]), "--out", P("x.npy"));
    expect_in("stderr", R.err, "--bf16");
    EXPECT(EXIT_USAGE, "sdpa", "--q", P(bf[0]), "--k", P(bf[1]), "--v", P(bf[2]), "--out", P("x.npy"));
    expect_in("stderr", R.err, "--bf16");
    EXPECT(EXIT_USAGE, "sdpa", "--q", P(half[0]), "--k", P(half[1]), "--v", P(half[2]), "--out", P("x.npy"),
           "--out-dtype", "int8");
    expect_in("stderr", R.err, "--out-dtype");
    EXPECT(EXIT_USAGE, "sdpa", "--q", P(half[0]), "--k", P(half[1]), "--v", P(half[2]), "--out", P("x.npy"),
           "--kv-int8", "--past-k", P(half[1]), "--past-v", P(half[2]));
    expect_in("stderr", R.err, "--kv-int8");
    /* --bf16 on float32 files; big-endian half; a dtype no path takes (complex): each names its file. */
    EXPECT(EXIT_USAGE, "sdpa", "--bf16", "--q", P("q4.npy"), "--k", P("k4.npy"), "--v", P("v4.npy"), "--out",
           P("x.npy"));
    expect_in("stderr", R.err, "--bf16");
    expect_in("stderr", R.err, "q4.npy");
    uint16_t be[H * L * D];
    memset(be, 0, sizeof be);
    const char *big = save_raw("qbe.npy", 1, ">f2", "False", "(2, 5, 8)", be, sizeof be);
    EXPECT(EXIT_USAGE, "sdpa", "--q", big, "--k", P(half[1]), "--v", P(half[2]), "--out", P("x.npy"));
    expect_in("stderr", R.err, "qbe.npy");
    expect_in("stderr", R.err, "big-endian");
    float c8[2 * H * L * D];
    memset(c8, 0, sizeof c8);
    const char *complex = save_raw("qc8.npy", 1, "<c8", "False", "(2, 5, 8)", c8, sizeof c8);
    EXPECT(EXIT_USAGE, "sdpa", "--q", complex, "--k", P(half[1]), "--v", P(half[2]), "--out", P("x.npy"));
    expect_in("stderr", R.err, "qc8.npy");
    expect_in("stderr", R.err, "'<f2'"); /* the list of what is supported names the 16-bit types */
    ck_assert(!exists(P("x.npy")));
    /* A half additive mask gives the same output, bit for bit, as the same mask in float32. */
    float mask[L * S];
    tu_fill_uniform(mask, L * S, 1.0f, 44);
    for (size_t i = 0; i < L * S; i++)
        mask[i] = i % 7 == 3 ? -INFINITY : npy_half_to_float(npy_float_to_half(mask[i]));
    const size_t ms[2] = {L, S};
    ck_assert(npy_save_floats_as(P("mh.npy"), NPY_F2, mask, 2, ms, err, sizeof err) == 0);
    EXPECT(EXIT_OK, "sdpa", "--q", P("q4.npy"), "--k", P("k4.npy"), "--v", P("v4.npy"), "--out", P("om4.npy"),
           "--mask", save_f32("m4.npy", mask, 2, ms));
    EXPECT(EXIT_OK, "sdpa", "--q", P("q4.npy"), "--k", P("k4.npy"), "--v", P("v4.npy"), "--out", P("omh.npy"),
           "--mask", P("mh.npy"));
    ck_assert_msg(memcmp(load_f32(P("om4.npy"), 3, qs), load_f32(P("omh.npy"), 3, qs), no * sizeof(float)) == 0,
                  "a '<f2' mask and its '<f4' copy gave different outputs");
}
END_TEST

/* mha with half X and weights and a bfloat16 output; mixed weight types are refused. */
START_TEST(test_mha_dtypes)
{
    enum { L = 4, DM = 8, H = 2, DK = 4 };
    const size_t xs[2] = {L, DM}, ws[2] = {DM, H * DK};
    float x[L * DM], w[3][DM * H * DK];
    tu_fill_uniform(x, L * DM, 1.0f, 51);
    for (int i = 0; i < 3; i++)
        tu_fill_uniform(w[i], DM * H * DK, 0.5f, 52 + i);
    char err[512];
    ck_assert(npy_save_floats_as(P("xh.npy"), NPY_F2, x, 2, xs, err, sizeof err) == 0);
    const char *names[3] = {"wqh.npy", "wkh.npy", "wvh.npy"};
    for (int i = 0; i < 3; i++)
        ck_assert(npy_save_floats_as(P(names[i]), NPY_F2, w[i], 2, ws, err, sizeof err) == 0);
    EXPECT(EXIT_OK, "mha", "--x", P("xh.npy"), "--wq", P(names[0]), "--wk", P(names[1]), "--wv", P(names[2]),
           "--heads", "2", "--out", P("oh.npy"));
    npy_dtype dt;
    const float *oh = load_any(P("oh.npy"), L * H * DK, &dt);
    EXPECT(EXIT_OK, "mha", "--x", P("xh.npy"), "--wq", P(names[0]), "--wk", P(names[1]), "--wv", P(names[2]),
           "--heads", "2", "--out", P("ob.npy"), "--out-dtype", "bfloat16");
    const float *ob = load_any(P("ob.npy"), L * H * DK, &dt);
    ck_assert_msg(dt == NPY_U2, "--out-dtype bfloat16 wrote %s", npy_dtype_name(dt));
    double *r = tu_dalloc(L * H * DK);
    for (size_t i = 0; i < L * H * DK; i++)
        r[i] = oh[i];
    check_close_rounded("bfloat16 layer out", ob, r, L * H * DK, 7, -126, NULL);
    EXPECT(EXIT_USAGE, "mha", "--x", P("xh.npy"), "--wq", P(names[0]), "--wk", save_f32("wk4.npy", w[1], 2, ws),
           "--wv", P(names[2]), "--heads", "2", "--out", P("x.npy"));
    expect_in("stderr", R.err, "share one type");

    /* bfloat16 X and weights with --bf16 and a half output, against a float32 run on the values the
     * bfloat16 files hold (float arithmetic in both: only the output's rounding differs). */
    const char *bnames[4] = {"xb.npy", "wqb.npy", "wkb.npy", "wvb.npy"};
    const float *src[4] = {x, w[0], w[1], w[2]};
    float *held[4];
    for (int i = 0; i < 4; i++) {
        const size_t n = i ? DM * H * DK : L * DM;
        held[i] = tu_falloc(n);
        for (size_t j = 0; j < n; j++)
            held[i][j] = npy_bf16_to_float_value(npy_float_to_bf16(src[i][j]));
        ck_assert(npy_save_floats_as(P(bnames[i]), NPY_U2, src[i], 2, i ? ws : xs, err, sizeof err) == 0);
    }
    EXPECT(EXIT_OK, "mha", "--bf16", "--x", P(bnames[0]), "--wq", P(bnames[1]), "--wk", P(bnames[2]), "--wv",
           P(bnames[3]), "--heads", "2", "--out", P("obb.npy"), "--out-dtype", "float16");
    const float *obb = load_any(P("obb.npy"), L * H * DK, &dt);
    ck_assert_msg(dt == NPY_F2, "--out-dtype float16 wrote %s", npy_dtype_name(dt));
    EXPECT(EXIT_OK, "mha", "--x", save_f32("xf.npy", held[0], 2, xs), "--wq", save_f32("wqf.npy", held[1], 2, ws),
           "--wk", save_f32("wkf.npy", held[2], 2, ws), "--wv", save_f32("wvf.npy", held[3], 2, ws), "--heads", "2",
           "--out", P("of.npy"));
    const float *of = load_f32(P("of.npy"), 2, (size_t[]){L, H * DK});
    for (size_t i = 0; i < L * H * DK; i++)
        r[i] = of[i];
    check_close_rounded("bfloat16 layer, half out", obb, r, L * H * DK, 10, -14, NULL);
    /* '<u2' without --bf16, --bf16 on half files, an int8 output: usage errors naming the cause. */
    EXPECT(EXIT_USAGE, "mha", "--x", P(bnames[0]), "--wq", P(bnames[1]), "--wk", P(bnames[2]), "--wv", P(bnames[3]),
           "--heads", "2", "--out", P("x.npy"));
    expect_in("stderr", R.err, "--bf16");
    EXPECT(EXIT_USAGE, "mha", "--bf16", "--x", P("xh.npy"), "--wq", P(names[0]), "--wk", P(names[1]), "--wv",
           P(names[2]), "--heads", "2", "--out", P("x.npy"));
    expect_in("stderr", R.err, "--bf16");
    expect_in("stderr", R.err, "xh.npy");
    EXPECT(EXIT_USAGE, "mha", "--x", P("xh.npy"), "--wq", P(names[0]), "--wk", P(names[1]), "--wv", P(names[2]),
           "--heads", "2", "--out", P("x.npy"), "--out-dtype", "int8");
    expect_in("stderr", R.err, "--out-dtype");
    ck_assert(!exists(P("x.npy")));
}
END_TEST

#if defined(CLATTN_TEST_MPIEXEC)
/* `mpiexec -n NP clattn ring ARGS...` (the build found MPI). */
static int ring_run(const char *np, ...)
{
    argl a = {{CLATTN_TEST_MPIEXEC, "-n", np, exe, "ring"}, 5};
    va_list ap;
    va_start(ap, np);
    add_v(&a, ap);
    va_end(ap);
    static const char *const one_thread[] = {"POCL_MAX_PTHREAD_COUNT=1", NULL}; /* ranks share the cores */
    return run(a.v, one_thread, NULL);
}
#define RING(np, ...) ring_run(np, __VA_ARGS__, (const char *)NULL)

/* Rows [r0, r0 + n) of each of `slices` slices of a tensor of `rows` rows of `width`. */
static float *rows_of(const float *t, size_t slices, size_t rows, size_t width, size_t r0, size_t n)
{
    float *out = tu_falloc(slices * n * width);
    for (size_t s = 0; s < slices; s++)
        memcpy(out + s * n * width, t + (s * rows + r0) * width, n * width * sizeof *out);
    return out;
}

/* clattn ring under mpiexec: whole inputs gathered (3 ranks, zigzag, causal, GQA, log-sum-exps), sharded
 * files in and out (2 ranks, contiguous), each against the fp64 reference; and the usage errors every rank
 * agrees on. */
START_TEST(test_ring_cli)
{
    enum { B = 1, H = 4, N = 2, L = 37, D = 16, DV = 8 };
    const size_t qs[4] = {B, H, L, D}, ks[4] = {B, N, L, D}, vs[4] = {B, N, L, DV}, os[4] = {B, H, L, DV};
    float *q = rand_floats(B * H * L * D, 1.0f), *k = rand_floats(B * N * L * D, 1.0f), *v = rand_floats(B * N * L * DV, 1.0f);
    clattn_sdpa_desc d = CLATTN_SDPA_DESC_INIT;
    d.batch = B;
    d.heads = H;
    d.kv_heads = N;
    d.q_len = d.kv_len = L;
    d.qk_dim = D;
    d.v_dim = DV;
    clattn_masks m = CLATTN_MASKS_INIT;
    m.causal = CLATTN_CAUSAL_TOP_LEFT;
    d.masks = &m;
    double *ro = tu_dalloc(B * H * L * DV), *rl = tu_dalloc(B * H * L);
    ref_sdpa(&d, q, k, v, NULL, ro, NULL, rl);
    const char *qp = save_f32("q.npy", q, 4, qs), *kp = save_f32("k.npy", k, 4, ks), *vp = save_f32("v.npy", v, 4, vs);
    RING("3", "--q", qp, "--k", kp, "--v", vp, "--out", P("o.npy"), "--lse", P("l.npy"), "--gather", "--causal");
    expect_status(EXIT_OK);
    expect_in("stdout", R.out, "3 ranks, L 37, S 37, zigzag layout");
    expect_in("stdout", R.out, "rank 2:");
    expect_close("gathered out", load_f32(P("o.npy"), 4, os), ro, B * H * L * DV);
    expect_close("gathered lse", load_f32(P("l.npy"), 3, os), rl, B * H * L);
    /* Sharded files: contiguous runs of 19 and 18 rows. */
    const size_t first = (L + 1) / 2, n[2] = {first, L - first}, r0[2] = {0, first};
    for (int r = 0; r < 2; r++) {
        char name[3][32];
        snprintf(name[0], sizeof name[0], "q.%d.npy", r);
        snprintf(name[1], sizeof name[1], "k.%d.npy", r);
        snprintf(name[2], sizeof name[2], "v.%d.npy", r);
        save_f32(name[0], rows_of(q, B * H, L, D, r0[r], n[r]), 4, (size_t[]){B, H, n[r], D});
        save_f32(name[1], rows_of(k, B * N, L, D, r0[r], n[r]), 4, (size_t[]){B, N, n[r], D});
        save_f32(name[2], rows_of(v, B * N, L, DV, r0[r], n[r]), 4, (size_t[]){B, N, n[r], DV});
    }
    RING("2", "--q", P("q.{rank}.npy"), "--k", P("k.{rank}.npy"), "--v", P("v.{rank}.npy"), "--out",
         P("o.{rank}.npy"), "--layout", "contiguous", "--causal");
    expect_status(EXIT_OK);
    for (int r = 0; r < 2; r++) {
        const float *got = load_f32(fmt("%s/o.%d.npy", dir, r), 4, (size_t[]){B, H, n[r], DV});
        double *want = tu_dalloc(B * H * n[r] * DV);
        for (size_t s = 0; s < B * H; s++)
            for (size_t e = 0; e < n[r] * DV; e++)
                want[s * n[r] * DV + e] = ro[(s * L + r0[r]) * DV + e];
        expect_close(r ? "rank 1's slice" : "rank 0's slice", got, want, B * H * n[r] * DV);
    }
    /* Sharded files of other lengths than the shards (10 and 27 rows of 37), an output for one rank only,
     * more ranks than keys. */
    save_f32("bad.0.npy", rows_of(q, B * H, L, D, 0, 10), 4, (size_t[]){B, H, 10, D});
    save_f32("bad.1.npy", rows_of(q, B * H, L, D, 10, 27), 4, (size_t[]){B, H, 27, D});
    RING("2", "--q", P("bad.{rank}.npy"), "--k", kp, "--v", vp, "--out", P("o.{rank}.npy"));
    expect_status(EXIT_USAGE);
    expect_in("stderr", R.err, "its shard of 37 has");
    RING("2", "--q", qp, "--k", kp, "--v", vp, "--out", P("x.npy"));
    expect_status(EXIT_USAGE);
    expect_in("stderr", R.err, "give --gather");
    const size_t one[4] = {1, 1, 1, 4};
    const char *tiny = save_f32("tiny.npy", q, 4, one);
    RING("2", "--q", tiny, "--k", tiny, "--v", tiny, "--out", P("x.npy"), "--gather");
    expect_status(EXIT_USAGE);
    expect_in("stderr", R.err, "every rank needs at least one");
    ck_assert_msg(!exists(P("x.npy")), "a failed run wrote x.npy");
    /* A device some ranks cannot open (0:4 on a platform of fewer devices): every rank stops, none hangs. */
    RING("5", "--q", qp, "--k", kp, "--v", vp, "--out", P("x.npy"), "--gather", "--device", "0:{rank}");
    ck_assert_msg(R.status != EXIT_OK, "`%s` exited 0", R.cmd);
    expect_in("stderr", R.err, "matches no device");
    ck_assert_msg(!exists(P("x.npy")), "a failed run wrote x.npy");
}
END_TEST
#endif

/* ---------------------------------------------------------------------------------------------- */

static Suite *cli_suite(void)
{
    Suite *s = suite_create("clattn cli");
    struct {
        const char *name;
        const TTest *tests[16];
    } groups[] = {
        {"usage", {test_version_and_help, test_usage_errors}},
        {"devices", {test_devices_table, test_devices_json, test_devices_check, test_no_platform,
                     test_device_selection}},
        {"sdpa", {test_sdpa_4d, test_sdpa_3d, test_sdpa_2d, test_sdpa_half_inputs, test_sdpa_causal,
                  test_sdpa_causal_bottom_right, test_sdpa_mask_float, test_sdpa_mask_bool, test_sdpa_mask_bhls, test_sdpa_mask_broadcast,
                  test_sdpa_key_lengths_i8, test_sdpa_key_lengths_i4, test_sdpa_masks_combined, test_sdpa_scale,
                  test_sdpa_f8_input}},
        {"dtypes", {test_sdpa_dtypes, test_mha_dtypes}},
        {"mha", {test_mha_self_biases_wo, test_mha_2d, test_mha_cross}},
        {"sdpa-variants", {test_sdpa_kv_heads, test_sdpa_past_present, test_sdpa_offsets, test_sdpa_window, test_sdpa_softcap,
                           test_sdpa_sinks, test_sdpa_alibi_file, test_sdpa_alibi_auto, test_sdpa_variants_combined,
                           test_sdpa_heads_layout, test_sdpa_scores}},
        {"mha-variants", {test_mha_kv_heads, test_mha_offsets, test_mha_window, test_mha_softcap, test_mha_sinks,
                          test_mha_alibi, test_mha_variants_combined}},
        {"demo", {test_demo_table, test_demo_save}},
        {"bench", {test_bench_quick_json, test_bench_ring_model}},
#if defined(CLATTN_TEST_MPIEXEC)
        {"ring", {test_ring_cli}},
#endif
        {"warnings", {test_warnings_reach_user}},
        {"outputs", {test_outputs_links_and_modes}},
        {"heatmap", {test_heatmap_demo, test_heatmap_sdpa, test_heatmap_mha}},
        {"regressions", {test_regression_scale_beyond_float, test_regression_mask_dtype_message, test_regression_demo_partial_outputs,
                             test_regression_failed_run_deletes_existing_output}},
    };
    for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++) {
        TCase *tc = tcase_create(groups[g].name);
        tcase_add_checked_fixture(tc, case_setup, case_teardown);
        tcase_set_timeout(tc, 300);
        for (size_t t = 0; groups[g].tests[t]; t++)
            tcase_add_test(tc, groups[g].tests[t]);
        suite_add_tcase(s, tc);
    }
    TCase *tc = tcase_create("errors");
    tcase_add_checked_fixture(tc, case_setup, case_teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, test_errors, 0, (int)N_ERR_CASES);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    exe = getenv("CLATTN_EXE");
    if (!exe || !*exe) {
        fprintf(stderr, "test_cli: CLATTN_EXE must name the clattn binary (set by tests/meson.build)\n");
        return 1;
    }
    root = tu_scratch_make("test_cli");
    if (!root) {
        fprintf(stderr, "test_cli: cannot make a folder test_cli-XXXXXX under $TMPDIR or /tmp: %s\n",
                strerror(errno));
        return 1;
    }

    /* No OpenCL platform or device: skip (meson shows SKIP). */
    char why[1024];
    const char *const probe[] = {exe, "devices", NULL};
    if (spawn_capture(probe, NULL, NULL, why, sizeof why) != 0) {
        fprintf(stderr, "test_cli: %s\n", why);
        tu_scratch_remove_all();
        return 1;
    }
    if (R.status == EXIT_NO_PLATFORM) {
        printf("test_cli: `clattn devices` exited 3\n%s", R.err);
        tu_scratch_remove_all();
        return tu_no_device_exit("clattn devices found none");
    }

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    SRunner *sr = srunner_create(cli_suite());
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    const int run = srunner_ntests_run(sr), failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("test_cli: %d check cases, %d failed, %.1f s\n", run, failed,
           (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9);
    free(R.out);
    free(R.err);
    tu_scratch_remove_all();
    return failed == 0 ? 0 : 1;
}
