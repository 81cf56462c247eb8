#include "test_util.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

void tu_leak_check_now(void)
{
#if defined(__SANITIZE_ADDRESS__)
    /* LeakSanitizer's own check at exit stops the world while the OpenCL runtime's worker threads
     * are being torn down, and its tracer then sometimes crashes ("Tracer caught signal 11") — a
     * false failure. Checking here, while those threads sit idle, is the same check without the
     * race; LeakSanitizer does not check again at exit. */
    __lsan_do_leak_check();
#endif
}

/* ---------------------------------------------------------------------------------------------- */
/* Devices and contexts                                                                            */
/* ---------------------------------------------------------------------------------------------- */

size_t tu_ndev = 0;
clattn_context *tu_ctx[TU_MAX_DEVICES];
clattn_device_info tu_dev[TU_MAX_DEVICES];
char tu_dev_spec[TU_MAX_DEVICES][32];

double tu_max_abs_err = 0.0;
static double tu_max_ratio = 0.0; /* worst |out−ref| / tolerance */

static char tu_label_buf[512] = "";

void tu_set_label(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tu_label_buf, sizeof tu_label_buf, fmt, ap);
    va_end(ap);
}

const char *tu_label(void) { return tu_label_buf; }

static void tu_fixture_setup(void) { tu_label_buf[0] = '\0'; }

static void tu_fixture_teardown(void) { tu_release_all(); }

TCase *tu_tcase(const char *name)
{
    TCase *tc = tcase_create(name);
    tcase_add_checked_fixture(tc, tu_fixture_setup, tu_fixture_teardown);
    tcase_set_timeout(tc, 600); /* only effective with fork; meson's timeout is the real one */
    return tc;
}

int tu_main(Suite *(*make_suite)(void))
{
    size_t count = 0;
    clattn_status st = clattn_device_count(&count);
    if (st != CLATTN_SUCCESS || count == 0) {
        printf("SKIP: no OpenCL device (%s): %s\n", clattn_status_string(st),
               clattn_last_error(NULL));
        return 77;
    }
    for (size_t i = 0; i < count && tu_ndev < TU_MAX_DEVICES; i++) {
        clattn_device_info info;
        memset(&info, 0, sizeof info);
        st = clattn_device_get(i, &info);
        if (st != CLATTN_SUCCESS) {
            fprintf(stderr, "clattn_device_get(%zu) failed: %s: %s\n", i,
                    clattn_status_string(st), clattn_last_error(NULL));
            return 1;
        }
        char spec[32];
        snprintf(spec, sizeof spec, "%u:%u", info.platform_index, info.device_index);
        clattn_context *ctx = NULL;
        st = clattn_context_create(&ctx, spec);
        if (st == CLATTN_ERROR_UNSUPPORTED_DEVICE) {
            fprintf(stderr, "note: device %s (%s) is not supported by clattn, skipped: %s\n", spec,
                    info.name, clattn_last_error(NULL));
            continue;
        }
        if (st != CLATTN_SUCCESS || ctx == NULL) {
            fprintf(stderr, "clattn_context_create(\"%s\") failed: %s: %s\n", spec,
                    clattn_status_string(st), clattn_last_error(NULL));
            return 1;
        }
        tu_ctx[tu_ndev] = ctx;
        tu_dev[tu_ndev] = info;
        memcpy(tu_dev_spec[tu_ndev], spec, sizeof spec);
        tu_ndev++;
    }
    if (tu_ndev == 0) {
        printf("SKIP: no OpenCL device usable by clattn\n");
        return 77;
    }

    Suite *s = make_suite();
    SRunner *sr = srunner_create(s);
    /* OpenCL runtimes (PoCL's worker threads, GPU drivers) do not survive fork(): run in-process. */
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    tu_release_all();

    printf("max abs error vs fp64: %.3g (worst error/tolerance: %.3g)\n", tu_max_abs_err,
           tu_max_ratio);
    for (size_t i = 0; i < tu_ndev; i++) {
        clattn_context_free(tu_ctx[i]);
        tu_ctx[i] = NULL;
    }
    /* Let the runtimes free their compilers, so that leak checkers see only what is really left. */
    for (size_t i = 0; i < tu_ndev; i++)
        clUnloadPlatformCompiler(tu_dev[i].platform);
    tu_leak_check_now();
    return failed ? 1 : 0;
}

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

void check_close_named(const char *what, const float *out, const double *ref, size_t n,
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
        double tol = TU_ATOL + TU_RTOL * fabs(r);
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

void check_close(const float *out, const double *ref, size_t n, double *max_err)
{
    check_close_named("out", out, ref, n, max_err);
}

/* ---------------------------------------------------------------------------------------------- */
/* Tracked allocations                                                                             */
/* ---------------------------------------------------------------------------------------------- */

static void **tu_ptrs = NULL;
static size_t tu_nptrs = 0, tu_capptrs = 0;
static cl_mem *tu_mems = NULL;
static size_t tu_nmems = 0, tu_capmems = 0;

void *tu_track_malloc(size_t bytes)
{
    void *p = calloc(1, bytes ? bytes : 1);
    ck_assert_msg(p != NULL, "out of host memory (%zu bytes)", bytes);
    if (tu_nptrs == tu_capptrs) {
        size_t cap = tu_capptrs ? 2 * tu_capptrs : 64;
        void **np = realloc(tu_ptrs, cap * sizeof *np);
        ck_assert(np != NULL);
        tu_ptrs = np;
        tu_capptrs = cap;
    }
    tu_ptrs[tu_nptrs++] = p;
    return p;
}

double *tu_dalloc(size_t n) { return tu_track_malloc(n * sizeof(double)); }
float *tu_falloc(size_t n) { return tu_track_malloc(n * sizeof(float)); }

void tu_track_mem(cl_mem m)
{
    if (tu_nmems == tu_capmems) {
        size_t cap = tu_capmems ? 2 * tu_capmems : 64;
        cl_mem *nm = realloc(tu_mems, cap * sizeof *nm);
        ck_assert(nm != NULL);
        tu_mems = nm;
        tu_capmems = cap;
    }
    tu_mems[tu_nmems++] = m;
}

void tu_release_all(void)
{
    for (size_t i = 0; i < tu_nmems; i++)
        if (tu_mems[i])
            clReleaseMemObject(tu_mems[i]);
    tu_nmems = 0;
    for (size_t i = 0; i < tu_nptrs; i++)
        free(tu_ptrs[i]);
    tu_nptrs = 0;
}

void tu_finish(clattn_context *ctx)
{
    clattn_status st = clattn_finish(ctx);
    ck_assert_msg(st == CLATTN_SUCCESS, "%s: clattn_finish: %s: %s", tu_label(),
                  clattn_status_string(st), clattn_last_error(ctx));
}

/* ---------------------------------------------------------------------------------------------- */
/* Guard regions                                                                                   */
/* ---------------------------------------------------------------------------------------------- */

float tu_sentinel(void)
{
    uint32_t bits = TU_SENTINEL_BITS;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

int tu_is_sentinel(float f)
{
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    return bits == TU_SENTINEL_BITS;
}

static void tu_fill_sentinel(float *p, size_t n)
{
    uint32_t bits = TU_SENTINEL_BITS;
    for (size_t i = 0; i < n; i++)
        memcpy(&p[i], &bits, sizeof bits);
}

float *tu_host_alloc(size_t n, const float *init)
{
    float *p = tu_track_malloc((n + TU_GUARD) * sizeof(float));
    if (init)
        memcpy(p, init, n * sizeof(float));
    else
        tu_fill_sentinel(p, n);
    tu_fill_sentinel(p + n, TU_GUARD);
    return p;
}

void tu_host_check_guard(const float *p, size_t n, const char *what)
{
    for (size_t i = 0; i < TU_GUARD; i++)
        ck_assert_msg(tu_is_sentinel(p[n + i]),
                      "%s: %s: guard float %zu past the end of the %zu-float tensor was overwritten "
                      "(now %.9g)",
                      tu_label(), what, i, n, (double)p[n + i]);
}

int tu_host_all_sentinel(const float *p, size_t n)
{
    for (size_t i = 0; i < n + TU_GUARD; i++)
        if (!tu_is_sentinel(p[i]))
            return 0;
    return 1;
}

static cl_mem tu_create(clattn_context *ctx, size_t total, size_t n_init, const float *init)
{
    float *tmp = malloc(total * sizeof(float));
    ck_assert(tmp != NULL);
    tu_fill_sentinel(tmp, total);
    if (init)
        memcpy(tmp, init, n_init * sizeof(float));
    cl_int err = CL_SUCCESS;
    cl_mem m = clCreateBuffer(clattn_context_cl_context(ctx), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                              total * sizeof(float), tmp, &err);
    free(tmp);
    ck_assert_msg(err == CL_SUCCESS && m != NULL, "clCreateBuffer(%zu floats) failed: %d", total,
                  (int)err);
    tu_track_mem(m);
    return m;
}

cl_mem tu_dev_alloc(clattn_context *ctx, size_t n, const float *init)
{
    return tu_create(ctx, n + TU_GUARD, n, init);
}

cl_mem tu_dev_alloc_exact(clattn_context *ctx, size_t nfloats, const float *init)
{
    ck_assert(nfloats >= 1);
    return tu_create(ctx, nfloats, nfloats, init);
}

float *tu_dev_read(clattn_context *ctx, cl_mem m, size_t nfloats)
{
    float *p = tu_falloc(nfloats);
    cl_int err = clEnqueueReadBuffer(clattn_context_queue(ctx), m, CL_TRUE, 0,
                                     nfloats * sizeof(float), p, 0, NULL, NULL);
    ck_assert_msg(err == CL_SUCCESS, "%s: clEnqueueReadBuffer failed: %d", tu_label(), (int)err);
    return p;
}

float *tu_dev_read_checked(clattn_context *ctx, cl_mem m, size_t n, const char *what)
{
    float *p = tu_dev_read(ctx, m, n + TU_GUARD);
    tu_host_check_guard(p, n, what);
    return p;
}

void tu_dev_check_guard(clattn_context *ctx, cl_mem m, size_t n, const char *what)
{
    (void)tu_dev_read_checked(ctx, m, n, what);
}

void tu_dev_check_equal(clattn_context *ctx, cl_mem m, const float *expect, size_t n,
                        const char *what)
{
    float *p = tu_dev_read(ctx, m, n);
    ck_assert_msg(memcmp(p, expect, n * sizeof(float)) == 0,
                  "%s: input %s was modified by the call", tu_label(), what);
}

int tu_dev_all_sentinel(clattn_context *ctx, cl_mem m, size_t nfloats)
{
    float *p = tu_dev_read(ctx, m, nfloats);
    for (size_t i = 0; i < nfloats; i++)
        if (!tu_is_sentinel(p[i]))
            return 0;
    return 1;
}

/* ---------------------------------------------------------------------------------------------- */
/* fp64 references                                                                                 */
/* ---------------------------------------------------------------------------------------------- */

size_t tu_sdpa_dv(const clattn_sdpa_desc *d) { return ref_v_dim(d); }

const size_t *tu_make_key_lengths(int mode, size_t B, size_t S, size_t *out)
{
    if (mode == TU_KL_NONE)
        return NULL;
    for (size_t b = 0; b < B; b++) {
        switch (mode) {
        case TU_KL_FULL:
            out[b] = S;
            break;
        case TU_KL_VARIED:
            out[b] = (b % 2 == 0) ? (S + 1) / 2 : S;
            break;
        default: /* TU_KL_ZERO */
            out[b] = (b == 0) ? 0 : (S > 1 ? S - 1 : 1);
            break;
        }
    }
    return out;
}

float *tu_make_mask(clattn_mask_layout layout, size_t B, size_t H, size_t L, size_t S, int flags,
                    uint64_t seed, size_t *n)
{
    size_t mats = layout == CLATTN_MASK_B_H_L_S ? B * H : 1;
    size_t count = mats * L * S;
    float *m = tu_falloc(count);
    tu_rng r;
    tu_rng_seed(&r, seed);
    for (size_t i = 0; i < count; i++) {
        m[i] = tu_rng_uniform(&r, 1.0f);
        if ((flags & TU_MASKF_INF) && tu_rng_next(&r) % 6 == 0)
            m[i] = -INFINITY;
    }
    if (flags & TU_MASKF_ROWINF)
        for (size_t t = 0; t < mats; t++) {
            size_t row = t % L;
            for (size_t j = 0; j < S; j++)
                m[(t * L + row) * S + j] = -INFINITY;
        }
    if (n)
        *n = count;
    return m;
}
