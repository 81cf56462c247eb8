/* The OpenCL-free part of the test utility (tests/test_util.h): labels, PRNG, tolerance checks,
 * tracked host allocations, environment save/restore, scratch folders and whole files. */
#define _XOPEN_SOURCE 700 /* setenv, strdup, mkdtemp, nftw */
#define TU_NO_OPENCL
#include "test_util.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---------------------------------------------------------------------------------------------- */
/* Labels                                                                                          */
/* ---------------------------------------------------------------------------------------------- */

static char tu_label_buf[512] = "";

void tu_set_label(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tu_label_buf, sizeof tu_label_buf, fmt, ap);
    va_end(ap);
}

const char *tu_label(void) { return tu_label_buf; }

/* ---------------------------------------------------------------------------------------------- */
/* Random numbers                                                                                  */
/* ---------------------------------------------------------------------------------------------- */

void tu_rng_seed(tu_rng *r, uint64_t seed) { r->state = seed * 0x9E3779B97F4A7C15ull + 1; }

uint64_t tu_rng_next(tu_rng *r)
{
    uint64_t z = (r->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double tu_rng_unit(tu_rng *r) { return (double)(tu_rng_next(r) >> 11) * (1.0 / 9007199254740992.0); }

float tu_rng_uniform(tu_rng *r, float a) { return (float)((2.0 * tu_rng_unit(r) - 1.0) * a); }

void tu_fill_uniform(float *p, size_t n, float a, uint64_t seed)
{
    tu_rng r;
    tu_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++)
        p[i] = tu_rng_uniform(&r, a);
}

void tu_fill_int_multiples(float *p, size_t n, int kmax, float step, uint64_t seed)
{
    tu_rng r;
    tu_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) {
        int k = (int)(tu_rng_next(&r) % (uint64_t)(2 * kmax + 1)) - kmax;
        p[i] = (float)k * step;
    }
}

/* ---------------------------------------------------------------------------------------------- */
/* Tolerance checks                                                                                */
/* ---------------------------------------------------------------------------------------------- */

double tu_max_abs_err = 0.0;
double tu_max_ratio = 0.0;

/* Half a unit in the last place, at |r|, of a type with `bits` stored mantissa bits whose normal
 * numbers start at 2^min_exp (float32: 0, nothing added). */
static double half_ulp(double r, int bits, int min_exp)
{
    if (bits == 0)
        return 0.0;
    int e;
    frexp(fabs(r), &e); /* |r| in [2^(e−1), 2^e) */
    if (e - 1 < min_exp || r == 0.0)
        e = min_exp + 1;
    return 0.5 * ldexp(1.0, e - 1 - bits);
}

void check_close_named(const char *what, const float *out, const double *ref, size_t n,
                       double *max_err)
{
    check_close_rounded(what, out, ref, n, 0, 0, max_err);
}

void check_close_rounded(const char *what, const float *out, const double *ref, size_t n, int bits, int min_exp,
                         double *max_err)
{
    double local = 0.0;
    for (size_t i = 0; i < n; i++) {
        double o = (double)out[i], r = ref[i];
        if (isinf(r) || isinf(o)) {
            ck_assert_msg(isinf(r) && isinf(o) && (signbit(r) != 0) == (signbit(o) != 0),
                          "%s: %s[%zu] = %.9g, fp64 reference %.17g", tu_label(), what, i, o, r);
            continue;
        }
        ck_assert_msg(!isnan(o) && !isnan(r), "%s: %s[%zu] = %.9g, fp64 reference %.17g",
                      tu_label(), what, i, o, r);
        double e = fabs(o - r);
        double tol = TU_ATOL + TU_RTOL * fabs(r) + half_ulp(r, bits, min_exp);
        if (e > local)
            local = e;
        if (e > tu_max_abs_err)
            tu_max_abs_err = e;
        if (e / tol > tu_max_ratio)
            tu_max_ratio = e / tol;
        ck_assert_msg(e <= tol, "%s: %s[%zu] = %.9g, fp64 reference %.17g (|err| %.3g > tol %.3g)",
                      tu_label(), what, i, o, r, e, tol);
    }
    if (max_err)
        *max_err = local;
}

int64_t tu_ulps_apart(float a, float b)
{
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b) ? 0 : INT64_MAX;
    if (a == b)
        return 0;
    int32_t ia, ib;
    memcpy(&ia, &a, sizeof ia);
    memcpy(&ib, &b, sizeof ib);
    const int64_t oa = ia < 0 ? -(int64_t)(ia & 0x7fffffff) : ia, ob = ib < 0 ? -(int64_t)(ib & 0x7fffffff) : ib;
    return oa > ob ? oa - ob : ob - oa;
}

void check_close(const float *out, const double *ref, size_t n, double *max_err)
{
    check_close_named("out", out, ref, n, max_err);
}

/* ---------------------------------------------------------------------------------------------- */
/* Tracked host allocations                                                                        */
/* ---------------------------------------------------------------------------------------------- */

static void **tu_ptrs = NULL;
static size_t tu_nptrs = 0, tu_capptrs = 0;

void *tu_track(void *p)
{
    ck_assert_msg(p != NULL, "out of memory");
    if (tu_nptrs == tu_capptrs) {
        size_t cap = tu_capptrs ? 2 * tu_capptrs : 64;
        void **np = realloc(tu_ptrs, cap * sizeof *np);
        if (!np)
            free(p);
        ck_assert_msg(np != NULL, "out of memory");
        tu_ptrs = np;
        tu_capptrs = cap;
    }
    tu_ptrs[tu_nptrs++] = p;
    return p;
}

void *tu_track_malloc(size_t bytes)
{
    void *p = calloc(1, bytes ? bytes : 1);
    ck_assert_msg(p != NULL, "out of host memory (%zu bytes)", bytes);
    return tu_track(p);
}

double *tu_dalloc(size_t n) { return tu_track_malloc(n * sizeof(double)); }
float *tu_falloc(size_t n) { return tu_track_malloc(n * sizeof(float)); }

void tu_release_host(void)
{
    for (size_t i = 0; i < tu_nptrs; i++)
        free(tu_ptrs[i]);
    tu_nptrs = 0;
}

/* ---------------------------------------------------------------------------------------------- */
/* Environment variables                                                                           */
/* ---------------------------------------------------------------------------------------------- */

#define SAVED_MAX 8

static const char *saved_names[SAVED_MAX];
static char *saved_values[SAVED_MAX];
static size_t saved_count;

void tu_env_save(const char *const *names, size_t n)
{
    tu_env_restore();
    for (size_t i = 0; i < n && i < SAVED_MAX; i++) {
        const char *v = getenv(names[i]);
        saved_names[i] = names[i];
        saved_values[i] = v ? strdup(v) : NULL;
        saved_count = i + 1;
    }
}

void tu_env_restore(void)
{
    for (size_t i = 0; i < saved_count; i++) {
        if (saved_values[i])
            setenv(saved_names[i], saved_values[i], 1);
        else
            unsetenv(saved_names[i]);
        free(saved_values[i]);
        saved_values[i] = NULL;
    }
    saved_count = 0;
}

/* ---------------------------------------------------------------------------------------------- */
/* Scratch folders and files                                                                       */
/* ---------------------------------------------------------------------------------------------- */

static char scratch[TU_MAX_SCRATCH][1024];
static size_t n_scratch;

const char *tu_scratch_make(const char *prefix)
{
    if (n_scratch == TU_MAX_SCRATCH) {
        errno = EMFILE;
        return NULL;
    }
    const char *base = getenv("TMPDIR");
    if (!base || !*base)
        base = "/tmp";
    char *dir = scratch[n_scratch];
    snprintf(dir, sizeof scratch[0], "%s/%s-XXXXXX", base, prefix);
    if (!mkdtemp(dir))
        return NULL;
    n_scratch++;
    return dir;
}

const char *tu_scratch_dir(const char *prefix)
{
    const char *dir = tu_scratch_make(prefix);
    ck_assert_msg(dir != NULL, "cannot make a scratch folder %s-XXXXXX under $TMPDIR or /tmp: %s", prefix,
                  strerror(errno));
    return dir;
}

void tu_scratch_remove_all(void)
{
    for (size_t i = 0; i < n_scratch; i++)
        tu_rm_rf(scratch[i]);
    n_scratch = 0;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

void tu_rm_rf(const char *path)
{
    if (path && path[0])
        nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

size_t tu_dir_count(const char *dir)
{
    DIR *d = opendir(dir);
    ck_assert_msg(d != NULL, "cannot open %s", dir);
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

char *tu_read_source_cl(const char *name, size_t *len)
{
    const char *dir = getenv("CLATTN_SOURCE_CL_DIR");
    ck_assert_msg(dir && dir[0], "CLATTN_SOURCE_CL_DIR is not set (meson sets it)");
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *text = tu_read_file(path, len);
    ck_assert_msg(text != NULL, "cannot read %s", path);
    return tu_track(text);
}

uint64_t tu_fnv(const void *data, size_t n, uint64_t h)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

uint64_t tu_golden(const char *file, const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "../tests/data/%s", file); /* (beside cl/, from CLATTN_SOURCE_CL_DIR) */
    char *text = tu_read_source_cl(path, NULL);
    uint64_t found = 0;
    for (char *line = strtok(text, "\n"); line && !found; line = strtok(NULL, "\n")) {
        char *bar = strrchr(line, '|');
        if (bar && (size_t)(bar - line) == strlen(name) && strncmp(line, name, strlen(name)) == 0)
            found = strtoull(bar + 1, NULL, 16);
    }
    return found;
}

bool tu_recording(void)
{
    const char *write = getenv("CLATTN_TEST_WRITE_HASHES");
    return write && *write;
}

void tu_expect_fingerprint(const char *file, const char *name, uint64_t h)
{
    if (tu_recording()) {
        FILE *f = fopen(getenv("CLATTN_TEST_WRITE_HASHES"), "a");
        ck_assert_msg(f != NULL, "cannot append to %s", getenv("CLATTN_TEST_WRITE_HASHES"));
        fprintf(f, "%s|%016llx\n", name, (unsigned long long)h);
        fclose(f);
        return;
    }
    const uint64_t want = tu_golden(file, name);
    ck_assert_msg(want != 0, "%s: tests/data/%s has no line for this case", tu_label(), file);
    ck_assert_msg(h == want, "%s: fingerprint %016llx, the recorded bits' %016llx", tu_label(), (unsigned long long)h,
                  (unsigned long long)want);
}

char *tu_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += got;
        if (n == cap) {
            char *bigger = realloc(buf, 2 * cap + 1);
            if (!bigger) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = bigger;
            cap *= 2;
        }
    }
    if (buf && ferror(f)) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf)
        buf[n] = '\0';
    if (len)
        *len = buf ? n : 0;
    return buf;
}

void tu_write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "%s: cannot write %s: %s", tu_label(), path, strerror(errno));
    ck_assert(len == 0 || fwrite(data, 1, len, f) == len);
    ck_assert(fclose(f) == 0);
}

void tu_copy_file(const char *from, const char *to, const char *append)
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

const char *tu_broken_kernel_dir(const char *victim)
{
    const char *src = getenv("CLATTN_SOURCE_CL_DIR");
    /* meson test sets it; run by hand without it, the test fails rather than passing untested. */
    ck_assert_msg(src && src[0], "CLATTN_SOURCE_CL_DIR is not set (meson test sets it to the source cl/)");
    const char *tmpdir = tu_scratch_dir("clattn-test");
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
        tu_copy_file(from, to, breaks ? broken : NULL);
    }
    closedir(dir);
    ck_assert_msg(found, "%s not found in CLATTN_SOURCE_CL_DIR=%s", victim, src);
    return tmpdir;
}

/* ---------------------------------------------------------------------------------------------- */
/* Fixture                                                                                         */
/* ---------------------------------------------------------------------------------------------- */

int tu_srunner_exit(SRunner *sr)
{
    if (srunner_ntests_run(sr) == 0) {
        const char *suite = getenv("CK_RUN_SUITE"), *tcase = getenv("CK_RUN_CASE");
        printf("FAIL: no check ran (CK_RUN_SUITE=%s, CK_RUN_CASE=%s): nothing was tested\n",
               suite ? suite : "(unset)", tcase ? tcase : "(unset)");
        return 1;
    }
    return srunner_ntests_failed(sr) == 0 ? 0 : 1;
}

void tu_sys_teardown(void)
{
    tu_release_host();
    tu_scratch_remove_all();
    tu_env_restore();
}

int tu_devices_required(void)
{
    const char *ci = getenv("CI"), *require = getenv("CLATTN_REQUIRE_DEVICE");
    return (ci && (strcmp(ci, "true") == 0 || strcmp(ci, "1") == 0)) || (require && strcmp(require, "1") == 0);
}

int tu_no_device_exit(const char *why)
{
    const int required = tu_devices_required();
    printf("%s: no OpenCL device: %s\n", required ? "FAIL" : "SKIP", why);
    if (required)
        printf("(CI=true or CLATTN_REQUIRE_DEVICE=1: a device is required; on Debian apt-get install "
               "pocl-opencl-icd)\n");
    return required ? 1 : 77;
}
