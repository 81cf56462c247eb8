/* The shared part of the clattn tool's end-to-end tests (see cli_util.h). */
#define _POSIX_C_SOURCE 200809L /* posix_spawn, nanosleep, clock_gettime */

#include "cli_util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

const char *exe;
const char *root;
char dir[1100];
int cli_run_timeout_s = 120;
cli_result R;
tu_rng rng;
static unsigned case_no;

/* ---------------------------------------------------------------------------------------------- */
/* Folders, tracked allocations                                                                    */
/* ---------------------------------------------------------------------------------------------- */

void *track(void *p) { return tu_track(p); }
void *xmalloc(size_t n) { return tu_track_malloc(n); }

char *fmt(const char *f, ...)
{
    /* (f is never NULL; saying so keeps GCC 12's -Wformat-truncation from warning, in the sanitizer
     * build, about the null path UBSan's checks add) */
    if (!f)
        f = "";
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

const char *P(const char *name) { return fmt("%s/%s", dir, name); }

static void case_setup(void)
{
    snprintf(dir, sizeof dir, "%s/case%03u", root, ++case_no);
    ck_assert_msg(mkdir(dir, 0700) == 0, "mkdir %s: %s", dir, strerror(errno));
}

/* The case's folder stays (root is removed at the end); its allocations are freed. */
static void case_teardown(void) { tu_release_host(); }

TCase *cli_tcase(const char *name)
{
    TCase *tc = tcase_create(name);
    tcase_add_checked_fixture(tc, case_setup, case_teardown);
    return tc;
}

Suite *cli_suite(const char *title, const cli_group *groups, size_t n_groups)
{
    Suite *s = suite_create(title);
    for (size_t g = 0; g < n_groups; g++) {
        TCase *tc = cli_tcase(groups[g].name);
        for (size_t t = 0; groups[g].tests[t]; t++)
            tcase_add_loop_test(tc, groups[g].tests[t], 0, groups[g].loops);
        suite_add_tcase(s, tc);
    }
    return s;
}

bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static int by_name(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

const char *list_dir(const char *path)
{
    DIR *d = opendir(path);
    ck_assert_msg(d != NULL, "opendir %s: %s", path, strerror(errno));
    size_t n = 0;
    while (readdir(d) != NULL)
        n++;
    rewinddir(d);
    const char **names = xmalloc((n + 1) * sizeof *names);
    size_t k = 0;
    for (struct dirent *e; k < n && (e = readdir(d)) != NULL;)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            names[k++] = fmt("%s", e->d_name);
    closedir(d);
    qsort(names, k, sizeof *names, by_name);
    char *joined = fmt("%s", "");
    for (size_t i = 0; i < k; i++)
        joined = fmt("%s%s\n", joined, names[i]);
    return joined;
}

/* ---------------------------------------------------------------------------------------------- */
/* Running processes                                                                               */
/* ---------------------------------------------------------------------------------------------- */

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

int wait_deadline(pid_t pid, int seconds)
{
    struct timespec start, now, nap = {0, 1000000};
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (int st = 0;;) {
        const pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 255;
        if (w < 0 && errno != EINTR)
            return -2;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - start.tv_sec > seconds) {
            /* (a group whose id is pid's can only be the one pid leads: pid is ours and alive) */
            if (kill(-pid, SIGKILL) != 0)
                kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return -1;
        }
        nanosleep(&nap, NULL);
    }
}

/* spawn_capture with stdout sent to stdout_path when not NULL (R.out is then "").
 * The child leads a process group of its own, so that a run past the time limit is killed with everything
 * it started (mpiexec's ranks). */
static int spawn_into(const char *const *argv, const char *const *env_extra, const char *stdin_path,
                      const char *stdout_path, char *why, size_t why_size)
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
    posix_spawn_file_actions_addopen(&fa, 1, stdout_path ? stdout_path : out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
    pid_t pid;
    const int rc = posix_spawnp(&pid, argv[0], &fa, &attr, (char *const *)argv, envp);
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&fa);
    free(envp);
    if (rc != 0) {
        snprintf(why, why_size, "cannot start %s: %s", argv[0], strerror(rc));
        return -1;
    }

    R.status = wait_deadline(pid, cli_run_timeout_s);
    if (R.status < 0) {
        if (R.status == -1)
            snprintf(why, why_size, "`%s` did not finish within %d s (killed)", R.cmd, cli_run_timeout_s);
        else
            snprintf(why, why_size, "waitpid: %s", strerror(errno));
        return -1;
    }
    free(R.out);
    free(R.err);
    R.out = stdout_path ? calloc(1, 1) : tu_read_file(out_path, NULL);
    R.err = tu_read_file(err_path, NULL);
    if (!R.out || !R.err) {
        snprintf(why, why_size, "cannot read the captured output of `%s`", R.cmd);
        return -1;
    }
    return 0;
}

int spawn_capture(const char *const *argv, const char *const *env_extra, const char *stdin_path, char *why,
                  size_t why_size)
{
    return spawn_into(argv, env_extra, stdin_path, NULL, why, why_size);
}

int run(const char *const *argv, const char *const *env_extra, const char *stdin_path)
{
    char why[1024];
    ck_assert_msg(spawn_capture(argv, env_extra, stdin_path, why, sizeof why) == 0, "%s", why);
    split_warnings();
    return R.status;
}

int run_to(const char *const *argv, const char *const *env_extra, const char *stdout_path)
{
    char why[1024];
    ck_assert_msg(spawn_into(argv, env_extra, NULL, stdout_path, why, sizeof why) == 0, "%s", why);
    split_warnings();
    return R.status;
}

int run_within(int seconds, const char *const *argv, const char *const *env_extra)
{
    const int limit = cli_run_timeout_s;
    char why[1024];
    cli_run_timeout_s = seconds;
    const int rc = spawn_capture(argv, env_extra, NULL, why, sizeof why);
    cli_run_timeout_s = limit; /* (before the assertion: a failed one leaves the test at once) */
    ck_assert_msg(rc == 0, "%s", why);
    split_warnings();
    return R.status;
}

void add_v(argl *a, va_list ap)
{
    for (const char *s; (s = va_arg(ap, const char *)) != NULL;) {
        ck_assert(a->n + 2 < sizeof a->v / sizeof a->v[0]);
        a->v[a->n++] = s;
    }
    a->v[a->n] = NULL;
}

void add(argl *a, ...)
{
    if (a->n == 0)
        a->v[a->n++] = exe;
    va_list ap;
    va_start(ap, a);
    add_v(a, ap);
    va_end(ap);
}

void add_list(argl *a, const char *const *list)
{
    for (size_t i = 0; list && list[i]; i++)
        add(a, list[i], NULL);
}

int run_args(const argl *a, const char *const *env_extra) { return run(a->v, env_extra, NULL); }

void run_expect(const argl *a, int want)
{
    run(a->v, NULL, NULL);
    expect_status(want);
}

int clattn_env(const char *const *env_extra, ...)
{
    argl a = {{0}, 0};
    a.v[a.n++] = exe;
    va_list ap;
    va_start(ap, env_extra);
    add_v(&a, ap);
    va_end(ap);
    return run(a.v, env_extra, NULL);
}

void expect_status(int want)
{
    ck_assert_msg(R.status == want, "`%s` exited %d, expected %d\n--- stderr:\n%.3000s--- stdout:\n%.1500s", R.cmd,
                  R.status, want, R.err, R.out);
}

void expect_in(const char *what, const char *text, const char *needle)
{
    ck_assert_msg(strstr(text, needle) != NULL, "`%s`: %s does not mention \"%s\":\n%.3000s", R.cmd, what, needle,
                  text);
}

/* Whether the n bytes at s contain needle. */
bool contains_n(const char *s, size_t n, const char *needle)
{
    const size_t m = strlen(needle);
    for (size_t i = 0; i + m <= n; i++)
        if (memcmp(s + i, needle, m) == 0)
            return true;
    return false;
}

size_t count_lines(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* Runs python3 -c script args... with stdin from stdin_path; it must exit 0. */
void python_check(const char *script, const char *stdin_path, const char *const *args)
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
void python_check_stdout(const char *name, const char *script)
{
    const char *path = P(name);
    tu_write_file(path, R.out, strlen(R.out));
    python_check(script, path, NULL);
}


/* ---------------------------------------------------------------------------------------------- */
/* .npy files, data, comparisons                                                                   */
/* ---------------------------------------------------------------------------------------------- */

double rng_unit(void) { return tu_rng_unit(&rng); }

float *rand_floats(size_t n, float a)
{
    float *p = xmalloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++)
        p[i] = tu_rng_uniform(&rng, a);
    return p;
}

size_t product(size_t ndim, const size_t *shape)
{
    size_t n = 1;
    for (size_t i = 0; i < ndim; i++)
        n *= shape[i];
    return n;
}

const char *shape_text(size_t ndim, const size_t *shape)
{
    char *s = fmt("(");
    for (size_t i = 0; i < ndim; i++)
        s = fmt("%s%zu%s", s, shape[i], i + 1 < ndim ? ", " : ndim == 1 ? "," : "");
    return fmt("%s)", s);
}

const char *save_f32(const char *name, const float *data, size_t ndim, const size_t *shape)
{
    const char *path = P(name);
    char err[512];
    ck_assert_msg(npy_save_f32(path, data, ndim, shape, err, sizeof err) == 0, "%s: %s", path, err);
    return path;
}

const char *save_raw(const char *name, unsigned major, const char *descr, const char *fortran, const char *shape,
                     const void *data, size_t bytes)
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

const char *save_i64(const char *name, const long long *v, size_t n)
{
    int64_t *d = xmalloc(n * sizeof *d);
    for (size_t i = 0; i < n; i++)
        d[i] = v[i];
    return save_raw(name, 1, "<i8", "False", fmt("(%zu,)", n), d, n * sizeof *d);
}

const char *save_i32(const char *name, const long long *v, size_t n)
{
    int32_t *d = xmalloc(n * sizeof *d);
    for (size_t i = 0; i < n; i++)
        d[i] = (int32_t)v[i];
    return save_raw(name, 1, "<i4", "False", fmt("(%zu,)", n), d, n * sizeof *d);
}

const char *save_narrow(const char *name, npy_dtype dtype, const float *src, size_t ndim, const size_t *shape,
                        const float **held)
{
    ck_assert(dtype == NPY_F2 || dtype == NPY_U2);
    const char *path = P(name);
    char err[512];
    ck_assert_msg(npy_save_floats_as(path, dtype, src, ndim, shape, err, sizeof err) == 0, "%s: %s", path, err);
    const size_t n = product(ndim, shape);
    float *v = xmalloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++)
        v[i] = dtype == NPY_F2 ? npy_half_to_float(npy_float_to_half(src[i]))
                               : npy_bf16_to_float_value(npy_float_to_bf16(src[i]));
    *held = v;
    return path;
}

const char *f32_file(const char *name, size_t ndim, const size_t *shape)
{
    return save_f32(name, rand_floats(product(ndim, shape), 1), ndim, shape);
}

float *load_f32(const char *path, size_t ndim, const size_t *shape)
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

const float *expect_file_close(const char *what, const char *path, size_t ndim, const size_t *shape,
                               const double *ref)
{
    const float *got = load_f32(path, ndim, shape);
    expect_close(what, got, ref, product(ndim, shape));
    return got;
}

float *load_any(const char *path, size_t n, npy_dtype *dtype)
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

void expect_close(const char *what, const float *got, const double *ref, size_t n)
{
    tu_set_label("`%s`", R.cmd);
    check_close_named(what, got, ref, n, NULL);
}

void expect_close_rounded(const char *what, const float *got, const double *ref, size_t n, int bits, int min_exp)
{
    tu_set_label("`%s`", R.cmd);
    check_close_rounded(what, got, ref, n, bits, min_exp, NULL);
}

clattn_sdpa_desc sdpa_desc(size_t B, size_t H, size_t N, size_t L, size_t S, size_t D, size_t Dv,
                           const clattn_masks *m)
{
    clattn_sdpa_desc d = CLATTN_SDPA_DESC_INIT;
    d.batch = B;
    d.heads = H;
    d.kv_heads = N;
    d.q_len = L;
    d.kv_len = S;
    d.qk_dim = D;
    d.v_dim = Dv;
    d.masks = m;
    return d;
}

clattn_masks flag_masks(clattn_causal causal, const size_t *key_lengths, const long long *offsets,
                        const clattn_window *window, bool additive)
{
    clattn_masks m = CLATTN_MASKS_INIT;
    m.causal = causal;
    m.key_lengths = key_lengths;
    m.query_offsets = offsets;
    m.window = window;
    m.additive = additive ? CLATTN_MASK_B_H_L_S : CLATTN_MASK_NONE;
    return m;
}

void raw_scores(const float *q, const float *k, size_t mats, size_t rows, size_t keys, size_t D, double cap,
                double *out)
{
    for (size_t mat = 0; mat < mats; mat++)
        for (size_t i = 0; i < rows; i++)
            for (size_t j = 0; j < keys; j++) {
                double dot = 0;
                for (size_t t = 0; t < D; t++)
                    dot += (double)q[(mat * rows + i) * D + t] * k[(mat * keys + j) * D + t];
                dot /= sqrt((double)D);
                out[(mat * rows + i) * keys + j] = cap > 0 ? cap * tanh(dot / cap) : dot;
            }
}

float *broadcast_mask(const float *m, size_t ndim, const size_t *mshape, size_t B, size_t H, size_t L, size_t S)
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

float *rand_mask(size_t n)
{
    float *m = rand_floats(n, 1.0f);
    for (size_t i = 0; i < n; i++)
        if (rng_unit() < 0.2)
            m[i] = -INFINITY;
    return m;
}

float *concat_rows(const float *first, size_t Y, const float *second, size_t Y2, size_t AX, size_t Z)
{
    float *out = xmalloc(AX * (Y + Y2) * Z * sizeof *out);
    for (size_t i = 0; i < AX; i++) {
        memcpy(out + i * (Y + Y2) * Z, first + i * Y * Z, Y * Z * sizeof *out);
        memcpy(out + (i * (Y + Y2) + Y) * Z, second + i * Y2 * Z, Y2 * Z * sizeof *out);
    }
    return out;
}

void *swap_middle(const void *in, size_t size, size_t A, size_t X, size_t Y, size_t Z)
{
    const char *src = in;
    char *out = xmalloc(A * X * Y * Z * size);
    for (size_t a = 0; a < A; a++)
        for (size_t x = 0; x < X; x++)
            for (size_t y = 0; y < Y; y++)
                memcpy(out + ((a * Y + y) * X + x) * Z * size, src + ((a * X + x) * Y + y) * Z * size, Z * size);
    return out;
}

/* As Press et al.'s reference code get_slopes computes them:
 *   def get_slopes_power_of_2(n): start = 2**(-2**-(math.log2(n)-3)); return [start*start**i for i in range(n)]
 *   closest = 2**floor(log2(n)); get_slopes_power_of_2(closest) + get_slopes(2*closest)[0::2][:n-closest]. */
void alibi_get_slopes(size_t n, double *slopes)
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

const float *alibi_auto(size_t n)
{
    double *d = xmalloc(n * sizeof *d);
    float *f = xmalloc(n * sizeof *f);
    alibi_get_slopes(n, d);
    for (size_t i = 0; i < n; i++)
        f[i] = (float)d[i];
    return f;
}

/* ---------------------------------------------------------------------------------------------- */
/* main                                                                                            */
/* ---------------------------------------------------------------------------------------------- */

int cli_main(const char *name, Suite *(*make_suite)(void), int run_timeout_s)
{
    /* Each binary's limit is what a run takes with the machine to itself; three times that, for a machine
     * other work keeps busy (as tests/meson.build's `busy`). */
    cli_run_timeout_s = 3 * run_timeout_s;
    exe = getenv("CLATTN_EXE");
    if (!exe || !*exe) {
        fprintf(stderr, "%s: CLATTN_EXE must name the clattn binary (set by tests/meson.build)\n", name);
        return 1;
    }
    root = tu_scratch_make(name);
    if (!root) {
        fprintf(stderr, "%s: cannot make a folder %s-XXXXXX under $TMPDIR or /tmp: %s\n", name, name,
                strerror(errno));
        return 1;
    }

    /* No OpenCL platform or device: skip (meson shows SKIP). */
    char why[1024];
    const char *const probe[] = {exe, "devices", NULL};
    if (spawn_capture(probe, NULL, NULL, why, sizeof why) != 0) {
        fprintf(stderr, "%s: %s\n", name, why);
        tu_scratch_remove_all();
        return 1;
    }
    if (R.status == EXIT_NO_PLATFORM) {
        printf("%s: `clattn devices` exited 3\n%s", name, R.err);
        tu_scratch_remove_all();
        return tu_no_device_exit("clattn devices found none");
    }

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    SRunner *sr = srunner_create(make_suite());
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    const int ran = srunner_ntests_run(sr), failed = srunner_ntests_failed(sr);
    const int rc = tu_srunner_exit(sr); /* (no check run is a failure too) */
    srunner_free(sr);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("%s: %d check cases, %d failed, %.1f s\n", name, ran, failed,
           (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9);
    free(R.out);
    free(R.err);
    tu_scratch_remove_all();
    return rc;
}
