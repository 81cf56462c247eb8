/* The OpenCL part of the test utility (tests/test_util.h); test_util_sys.c holds the rest. */
#include "test_util.h"

#include "formats_ref.h"
#include "npy.h"

#include <math.h>
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

static void tu_fixture_setup(void) { tu_set_label("%s", ""); }

static void tu_fixture_teardown(void)
{
    tu_release_all();
    tu_sys_teardown();
}

TCase *tu_tcase(const char *name)
{
    TCase *tc = tcase_create(name);
    tcase_add_checked_fixture(tc, tu_fixture_setup, tu_fixture_teardown);
    tcase_set_timeout(tc, 600); /* only effective with fork; meson's timeout is the real one */
    return tc;
}

void tu_add_loop(Suite *s, const char *name, const TTest *fn, size_t n)
{
    TCase *tc = tu_tcase(name);
    tcase_add_loop_test(tc, fn, 0, (int)n);
    suite_add_tcase(s, tc);
}

clattn_context *tu_context_new(const char *spec)
{
    clattn_context *ctx = NULL;
    clattn_status st = clattn_context_create(&ctx, spec);
    ck_assert_msg(st == CLATTN_SUCCESS && ctx != NULL, "%s: clattn_context_create(%s): %s: %s", tu_label(),
                  spec ? spec : "NULL", clattn_status_string(st), clattn_last_error(NULL));
    return ctx;
}

clattn_context *tu_context_new_profiling(size_t dev)
{
    clattn_context_options o = CLATTN_CONTEXT_OPTIONS_INIT;
    o.device = tu_dev_spec[dev];
    o.profile = 1;
    clattn_context *ctx = NULL;
    clattn_status st = clattn_context_create_with_options(&ctx, &o);
    TU_ASSERT_OK(st, NULL, "clattn_context_create_with_options(profile)");
    return ctx;
}

int tu_main(Suite *(*make_suite)(void))
{
    size_t count = 0;
    clattn_status st = clattn_device_count(&count);
    if (st != CLATTN_SUCCESS || count == 0) {
        char why[2200];
        snprintf(why, sizeof why, "%s: %s", clattn_status_string(st), clattn_last_error(NULL));
        return tu_no_device_exit(why);
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
            /* Where devices are required (CI), every device the machine lists must be tested: one the
             * library turns away fails the run rather than shrinking it unnoticed. */
            const int required = tu_devices_required();
            fprintf(stderr, "%s: device %s (%s) is not supported by clattn%s: %s\n", required ? "FAIL" : "note", spec,
                    info.name, required ? " (CI=true or CLATTN_REQUIRE_DEVICE=1: every device must run)" : ", skipped",
                    clattn_last_error(NULL));
            if (required)
                return 1;
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
    if (tu_ndev == 0)
        return tu_no_device_exit("none usable by clattn");

    Suite *s = make_suite();
    SRunner *sr = srunner_create(s);
    /* OpenCL runtimes (PoCL's worker threads, GPU drivers) do not survive fork(): run in-process. */
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_ENV);
    const int rc = tu_srunner_exit(sr);
    srunner_free(sr);
    tu_release_all();
    tu_sys_teardown();

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
    return rc;
}

/* ---------------------------------------------------------------------------------------------- */
/* Tracked OpenCL buffers                                                                          */
/* ---------------------------------------------------------------------------------------------- */

static cl_mem *tu_mems = NULL;
static size_t tu_nmems = 0, tu_capmems = 0;

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
    tu_release_host();
}

void tu_finish(clattn_context *ctx)
{
    clattn_status st = clattn_finish(ctx);
    TU_ASSERT_OK(st, ctx, "clattn_finish");
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

void tu_refused(clattn_context *ctx, clattn_status st, clattn_status want, const char *words, cl_mem out,
                       size_t n)
{
    ck_assert_msg(st == want, "%s: %s, expected %s (%s)", tu_label(), clattn_status_string(st),
                  clattn_status_string(want), clattn_last_error(ctx));
    ck_assert_msg(strstr(clattn_last_error(ctx), words) != NULL, "%s: \"%s\" lacks \"%s\"", tu_label(),
                  clattn_last_error(ctx), words);
    tu_finish(ctx);
    ck_assert_msg(!out || tu_dev_all_sentinel(ctx, out, n), "%s: a refused call wrote out", tu_label());
}

/* ---------------------------------------------------------------------------------------------- */
/* fp64 references                                                                                 */
/* ---------------------------------------------------------------------------------------------- */

size_t tu_sdpa_dv(const clattn_sdpa_desc *d) { return ref_v_dim(d); }

const clattn_algorithm tu_paths[TU_NPATHS] = {CLATTN_ALGORITHM_FUSED, CLATTN_ALGORITHM_STAGED,
                                                CLATTN_ALGORITHM_DECODE};

const char *tu_algorithm_name(clattn_algorithm a)
{
    return a == CLATTN_ALGORITHM_FUSED    ? "fused"
           : a == CLATTN_ALGORITHM_STAGED ? "staged"
           : a == CLATTN_ALGORITHM_DECODE ? "decode"
                                          : "auto";
}

clattn_sdpa_desc tu_sdpa_desc(size_t B, size_t H, size_t L, size_t S, size_t Dqk, size_t Dv)
{
    clattn_sdpa_desc d = CLATTN_SDPA_DESC_INIT;
    d.batch = B;
    d.heads = H;
    d.q_len = L;
    d.kv_len = S;
    d.qk_dim = Dqk;
    d.v_dim = Dv;
    return d;
}

void tu_variants_apply(clattn_sdpa_desc *d, tu_variants *v, clattn_causal causal, const size_t *key_lengths,
                       const long long *offsets, long long win_left, int sinks, int alibi)
{
    ck_assert(d->heads <= 16);
    v->masks = (clattn_masks)CLATTN_MASKS_INIT;
    v->masks.causal = causal;
    v->masks.key_lengths = key_lengths;
    v->masks.query_offsets = offsets;
    v->window = (clattn_window){win_left, 0};
    if (win_left != -2)
        v->masks.window = &v->window;
    for (size_t h = 0; h < d->heads; h++) {
        v->sinks[h] = 0.3f * (float)h - 0.5f;
        v->slopes[h] = 0.5f / (float)(h + 1);
    }
    d->sinks = sinks ? v->sinks : NULL;
    d->alibi_slopes = alibi ? v->slopes : NULL;
    d->masks = &v->masks;
}

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

/* ---------------------------------------------------------------------------------------------- */
/* Tensors in a storage type                                                                       */
/* ---------------------------------------------------------------------------------------------- */

/* The block formats and FP8 (formats_ref.c); FP8 with row scales when `scaled`. */
static tu_typed typed_quantised(clattn_dtype type, const float *src, size_t n, size_t row, bool scaled)
{
    tu_typed t = {type, n, row, NULL, tu_falloc(n), NULL};
    ck_assert(row > 0 && n % row == 0);
    t.bytes = tu_track_malloc(clattn_dtype_bytes(type, n));
    if (scaled)
        t.scales = tu_falloc(n / row);
    fref_quantise(type, src, n, row, t.bytes, t.scales);
    for (size_t i = 0; i < n; i++)
        t.values[i] = fref_value(type, t.bytes, i) * (t.scales ? t.scales[i / row] : 1.0f);
    return t;
}

tu_typed tu_typed_make_scaled(clattn_dtype type, const float *src, size_t n, size_t row)
{
    ck_assert(type == CLATTN_FP8_E4M3 || type == CLATTN_FP8_E5M2);
    return typed_quantised(type, src, n, row, true);
}

tu_typed tu_typed_make(clattn_dtype type, const float *src, size_t n, size_t row)
{
    if (fref_handles(type))
        return typed_quantised(type, src, n, row, false);
    tu_typed t = {type, n, row, NULL, tu_falloc(n), NULL};
    const size_t size = clattn_dtype_size(type);
    ck_assert_msg(size != 0, "%s: tu_typed_make: type %d", tu_label(), (int)type);
    t.bytes = tu_track_malloc(n * size);
    for (size_t i = 0; i < n; i++) {
        if (type == CLATTN_FLOAT32) {
            ((float *)t.bytes)[i] = t.values[i] = src[i];
        } else if (type == CLATTN_FLOAT16) {
            const unsigned short h = npy_float_to_half(src[i]);
            ((unsigned short *)t.bytes)[i] = h;
            t.values[i] = npy_half_to_float(h);
        } else if (type == CLATTN_BFLOAT16) {
            const unsigned short b = npy_float_to_bf16(src[i]);
            ((unsigned short *)t.bytes)[i] = b;
            t.values[i] = npy_bf16_to_float_value(b);
        }
    }
    if (type == CLATTN_INT8) {
        ck_assert(row > 0 && n % row == 0);
        t.scales = tu_falloc(n / row);
        signed char *q = t.bytes;
        for (size_t r = 0; r < n / row; r++) {
            float top = 0.0f;
            bool finite = true;
            for (size_t d = 0; d < row; d++) {
                top = fmaxf(top, fabsf(src[r * row + d]));
                finite = finite && isfinite(src[r * row + d]);
            }
            /* (a row holding NaN or inf: a NaN scale and zero values, as clattn_kv_append writes it) */
            const float scale = finite ? top / 127.0f : NAN, inv = finite && top > 0.0f ? 127.0f / top : 0.0f;
            t.scales[r] = scale;
            for (size_t d = 0; d < row; d++) {
                q[r * row + d] = (signed char)lrintf(src[r * row + d] * inv);
                t.values[r * row + d] = (float)q[r * row + d] * scale;
            }
        }
    }
    return t;
}

/* A tracked device buffer holding `bytes` bytes of data. */
static cl_mem bytes_upload(clattn_context *ctx, const void *data, size_t bytes)
{
    cl_int err;
    cl_mem m = clCreateBuffer(clattn_context_cl_context(ctx), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, bytes,
                              (void *)data, &err);
    ck_assert_msg(err == CL_SUCCESS, "%s: clCreateBuffer(%zu bytes) failed: %d", tu_label(), bytes, (int)err);
    tu_track_mem(m);
    return m;
}

cl_mem tu_typed_upload(clattn_context *ctx, const tu_typed *t)
{
    return bytes_upload(ctx, t->bytes, clattn_dtype_bytes(t->type, t->n));
}

cl_mem tu_typed_scales(clattn_context *ctx, const tu_typed *t)
{
    return t->scales ? bytes_upload(ctx, t->scales, t->n / t->row * sizeof(float)) : NULL;
}

float *tu_typed_read(clattn_context *ctx, cl_mem m, clattn_dtype type, size_t n)
{
    const size_t size = clattn_dtype_size(type);
    unsigned char *raw = tu_track_malloc(n * size);
    cl_int err = clEnqueueReadBuffer(clattn_context_queue(ctx), m, CL_TRUE, 0, n * size, raw, 0, NULL, NULL);
    ck_assert_msg(err == CL_SUCCESS, "%s: clEnqueueReadBuffer failed: %d", tu_label(), (int)err);
    return tu_typed_widen(raw, type, n);
}

float *tu_typed_widen(const void *bytes, clattn_dtype type, size_t n)
{
    const unsigned char *raw = bytes;
    float *out = tu_falloc(n);
    for (size_t i = 0; i < n; i++) {
        unsigned short u;
        switch (type) {
        case CLATTN_FLOAT32: memcpy(&out[i], raw + 4 * i, 4); break;
        case CLATTN_FLOAT16: memcpy(&u, raw + 2 * i, 2); out[i] = npy_half_to_float(u); break;
        case CLATTN_BFLOAT16: memcpy(&u, raw + 2 * i, 2); out[i] = npy_bf16_to_float_value(u); break;
        default: out[i] = (float)((signed char *)raw)[i]; break;
        }
    }
    return out;
}

void tu_check_typed(const char *what, const float *out, const double *ref, size_t n, clattn_dtype type,
                    double *max_err)
{
    const int bits = type == CLATTN_FLOAT16 ? 10 : type == CLATTN_BFLOAT16 ? 7 : 0;
    const int min_exp = type == CLATTN_FLOAT16 ? -14 : -126;
    check_close_rounded(what, out, ref, n, bits, min_exp, max_err);
}

unsigned long long tu_launches_of(clattn_context *ctx, const char *name)
{
    clattn_profile_entry e[CLATTN_PROFILE_MAX_ENTRIES];
    size_t n = 0;
    clattn_status st = clattn_profile_read(ctx, e, CLATTN_PROFILE_MAX_ENTRIES, &n);
    TU_ASSERT_OK(st, ctx, "clattn_profile_read");
    unsigned long long count = 0;
    for (size_t i = 0; i < n; i++)
        if (strcmp(e[i].name, name) == 0)
            count += e[i].launches;
    return count;
}

double tu_relative_rms_within(const float *out, const double *exact, size_t n, double bound)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += (out[i] - exact[i]) * (out[i] - exact[i]);
        den += exact[i] * exact[i];
    }
    const double rel = sqrt(num / den);
    ck_assert_msg(rel <= bound && rel > 0, "%s: relative RMS error %.3g against the float32 cache (bound %.3g)",
                  tu_label(), rel, bound);
    return rel;
}

void tu_error_inputs(size_t nq, size_t nk, size_t D, int outliers, float **q, float **k, float **v)
{
    *q = tu_falloc(nq), *k = tu_falloc(nk), *v = tu_falloc(nk);
    tu_fill_uniform(*q, nq, 1.0f, 71);
    tu_fill_uniform(*k, nk, 1.0f, 72);
    tu_fill_uniform(*v, nk, 1.0f, 73);
    for (size_t r = 0; outliers && r < nk / D; r++)
        for (size_t e = 5; e < D; e += 32)
            (*k)[r * D + e] *= 20.0f;
}

/* Half a unit in the last place of a 16-bit type at |r| (normal range; float32: 0). */
static double half_ulp16(double r, clattn_dtype type)
{
    if (type != CLATTN_FLOAT16 && type != CLATTN_BFLOAT16)
        return 0.0;
    int e;
    frexp(fabs(r), &e); /* |r| in [2^(e−1), 2^e) */
    const int bits = type == CLATTN_FLOAT16 ? 10 : 7, min_exp = type == CLATTN_FLOAT16 ? -14 : -126;
    if (e - 1 < min_exp || r == 0.0)
        e = min_exp + 1;
    return 0.5 * ldexp(1.0, e - 1 - bits);
}

/* The gradients' tolerance, from what the arithmetic allows: each is a sum over up to L (or S) pairs of
 * float32 products, whose rounding errors stay within a few units of float32's last place of the
 * tensor's largest entry (16·2^-23·(max|ref| + |ref|): the table's worst is under 5), plus, stored in a
 * 16-bit type, half a unit in that type's last place at the value (rounding to nearest; the reference
 * is given the rounded inputs and output). `floor` is an absolute term for gradients whose exact value
 * is 0 (the layer's key bias). A dV 1.00025 times too large, or a store that truncates, fails. */
void tu_check_gradient(const char *what, const float *got, const double *ref, size_t n, clattn_dtype type,
                       double floor)
{
    double largest = 0.0, worst = 0.0;
    for (size_t i = 0; i < n; i++)
        largest = fmax(largest, fabs(ref[i]));
    for (size_t i = 0; i < n; i++) {
        const double err = fabs((double)got[i] - ref[i]),
                     bound = floor + 16 * 0x1p-23 * (largest + fabs(ref[i])) + half_ulp16(ref[i], type);
        ck_assert_msg(isfinite(got[i]) && err <= bound, "%s: %s[%zu] = %.9g, fp64 reference %.12g (|err| %.3g > %.3g)",
                      tu_label(), what, i, (double)got[i], ref[i], err, bound);
        worst = fmax(worst, err);
        if (err / bound > tu_max_ratio)
            tu_max_ratio = err / bound;
    }
    if (worst > tu_max_abs_err)
        tu_max_abs_err = worst;
}

clattn_context *tu_tuned_context(size_t dev, const char *tuning)
{
    clattn_context_options opts = CLATTN_CONTEXT_OPTIONS_INIT;
    opts.device = tu_dev_spec[dev];
    opts.tuning = tuning;
    clattn_context *ctx = NULL;
    TU_ASSERT_OK(clattn_context_create_with_options(&ctx, &opts), NULL, "a context with another tuning");
    return ctx;
}
