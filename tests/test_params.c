/*
 * Every kernel's signature against its host binder. The parameter lists of cl/params.h make both the
 * kernels' parameter lists and the host tables that bind them (src/runtime/params.c); this test builds every
 * kernel family on each device with -cl-kernel-arg-info, once with no call feature and once with every
 * feature its kernels name, and holds each kernel's arguments (clGetKernelArgInfo: count, names, address
 * space, scalar types) against the table entries of the features built in. Then it binds a zeroed
 * struct through params_bind onto the kernel: every argument must be set, with the size the kernel
 * expects (clSetKernelArg checks it).
 *
 * Then cl/softmax_double.cl's float-float build (SOFTMAX_DOUBLE_FF_OPTIONS: the double softmax of
 * devices without cl_khr_fp64) on every device, on rows made to be hard: scores spread from ±1 to ±400
 * (weights down to the subnormals and below), long rows, ties, ±FLT_MAX, neighbouring floats, NaN,
 * +inf, rows of −inf, sinks above every score — each weight and log-sum-exp within one float32 unit in
 * the last place of the same formula in double on the host and of the fp64 build's (where the device
 * has cl_khr_fp64), NaN where they are NaN; how many differ at all is printed.
 */
#define _POSIX_C_SOURCE 200809L
#include "test_util.h"

#include "context.h" /* internal: the families and programs of src/ */
#include "dtype.h"
#include "params.h"
#include "program.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Build options that give each family's sources a complete set of definitions (small tiles; the
 * blocked score kernel's VEC > 1 so that all five staged kernels exist). */
typedef struct family_case {
    const kernel_family *family;
    const char *options;
    unsigned group;
    bool needs_fp64;
    /* storage types whose options (tensor_types_options, as the library makes them) follow `options` */
    bool typed;
    tensor_types types;
} family_case;

static const family_case cases[] = {
    {&family_fused, "-DBLOCK_N=16 -DVEC=4 -DKV=2 -DROWS=2 -DDK=16 -DDV=32", 4, false, false, {0}},
    {&family_fused_lanes, "-DBLOCK_N=16 -DVEC=4 -DKV=2 -DROWS=8 -DDK=16 -DDV=32", 4, false, false, {0}},
    {&family_decode, "-DDK=16 -DDV=32 -DVEC=4 -DKQ=2 -DRB=2 -DTILE=16 -DR_MAX=4 -DSTAGE=0 -DPREFETCH=0", 1,
     false, false, {0}},
    {&family_decode, "-DDK=16 -DDV=16 -DVEC=1 -DKQ=1 -DRB=1 -DTILE=16 -DR_MAX=4 -DSTAGE=1 -DPREFETCH=0", 8,
     false, false, {0}},
    {&family_staged, "-DVEC=4 -DKEYS=4 -DCHUNKS=4 -DSR=6 -DSV=2", 0, false, false, {0}},
    {&family_softmax_double, SOFTMAX_DOUBLE_FP64_OPTIONS, 0, true, false, {0}},
    {&family_softmax_double, SOFTMAX_DOUBLE_FF_OPTIONS, 0, false, false, {0}}, /* (its float-float build: every device) */
    {&family_merge, "", 0, false, true, {.q = CLATTN_FLOAT16, .k = CLATTN_BFLOAT16, .v = CLATTN_FLOAT32, .o = CLATTN_FLOAT32}},
    {&family_sparse, "-DROWS=2 -DVEC=4 -DDK=16 -DDV=8", 0, false, true,
     {.q = CLATTN_FLOAT32, .k = CLATTN_FLOAT16, .v = CLATTN_BFLOAT16, .o = CLATTN_FLOAT16}},
    {&family_reproducible, "-DCLATTN_EXACT=1 -DBLOCK_N=16 -DVEC=4 -DKV=4 -DROWS=2 -DDK=16 -DDV=32", 4, false, false, {0}},
    {&family_reproducible_lanes, "-DCLATTN_EXACT=1 -DBLOCK_N=16 -DVEC=4 -DKV=1 -DROWS=8 -DDK=16 -DDV=32", 4, false, false, {0}},
    {&family_reproducible_weights, "-DCLATTN_EXACT=1 -DVEC=1 -DDK=16 -DDV=32", 0, false, true,
     {.q = CLATTN_FLOAT16, .k = CLATTN_Q4_0, .v = CLATTN_FLOAT32, .o = CLATTN_FLOAT32}},
    {&family_sparse_backward, "-DROWS=2 -DVEC=4 -DDK=16 -DDV=32", 0, false, false, {0}},
    {&family_convert, "", 0, false, true, {.q = CLATTN_INT8, .k = CLATTN_FLOAT32, .v = CLATTN_FLOAT32, .o = CLATTN_FLOAT16}},
    /* (a block format's quantiser and an FP8 store in the append kernel) */
    {&family_convert, "", 0, false, true, {.q = CLATTN_BFLOAT16, .k = CLATTN_FLOAT32, .v = CLATTN_FLOAT32, .o = CLATTN_Q4_0}},
    {&family_convert, "", 0, false, true, {.q = CLATTN_FLOAT16, .k = CLATTN_FLOAT32, .v = CLATTN_FLOAT32, .o = CLATTN_FP8_E4M3}},
    /* (a token format's append, and its loads and row dequantising in the staged decode build) */
    {&family_append_tokens, "", 0, false, true, {.q = CLATTN_FLOAT16, .k = CLATTN_FLOAT32, .v = CLATTN_FLOAT32,
                                                 .o = CLATTN_U2_T32, .o_chunk = {64, 16}}},
    {&family_append_tokens, "", 0, false, true, {.q = CLATTN_BFLOAT16, .k = CLATTN_FLOAT32, .v = CLATTN_FLOAT32,
                                                 .o = CLATTN_U4_T32, .o_chunk = {32, 8}}},
    {&family_decode, "-DDK=16 -DDV=16 -DVEC=4 -DKQ=1 -DRB=1 -DTILE=16 -DR_MAX=4 -DSTAGE=1 -DPREFETCH=0", 1,
     false, true, {.q = CLATTN_FLOAT32, .k = CLATTN_U4_T32, .v = CLATTN_U2_T32, .o = CLATTN_FLOAT32,
                   .k_chunk = {48, 16}, .v_chunk = {48, 16}}},
    {&family_decode, "-DDK=32 -DDV=32 -DVEC=16 -DKQ=1 -DRB=1 -DTILE=16 -DR_MAX=4 -DSTAGE=1 -DPREFETCH=0", 1,
     false, true, {.q = CLATTN_FLOAT32, .k = CLATTN_U2_T32, .v = CLATTN_U4_T32, .o = CLATTN_FLOAT32,
                   .k_chunk = {64, 32}, .v_chunk = {64, 32}}},
    {&family_decode, "-DDK=16 -DDV=16 -DVEC=2 -DKQ=1 -DRB=1 -DTILE=16 -DR_MAX=4 -DSTAGE=1 -DPREFETCH=0", 1,
     false, true, {.q = CLATTN_FLOAT32, .k = CLATTN_U2_T32, .v = CLATTN_U4_T32, .o = CLATTN_FLOAT32,
                   .k_chunk = {32, 16}, .v_chunk = {32, 16}}},
    {&family_paged_check, "", 0, false, false, {0}},
    {&family_topk, "", 0, false, false, {0}},
    {&family_gemm, "-DVEC=4 -DMR=4 -DNV=2 -DROW_DIM=0", 0, false, false, {0}},
    {&family_add_bias, "", 0, false, false, {0}},
    {&family_block_mask, "", 0, false, false, {0}},
    {&family_backward, "-DVEC=4 -DDK=16 -DDV=16", 0, false, false, {0}}, /* (VEC > 1: the lanes kernel too) */
    {&family_backward_exact, "-DCLATTN_EXACT=1 -DVEC=4 -DDK=16 -DDV=16", 0, false, false, {0}}, /* (the lanes kernel too) */
    {&family_layer_backward, "", 0, false, false, {0}},
};
#define N_CASES (sizeof cases / sizeof cases[0])

/* The OpenCL C type name clGetKernelArgInfo gives a scalar of this kind. */
static const char *scalar_type(param_kind kind)
{
    switch (kind) {
    case PARAM_ULONG: return "ulong";
    case PARAM_LONG: return "long";
    case PARAM_INT: return "int";
    case PARAM_UINT: return "uint";
    case PARAM_FLOAT: return "float";
    default: return NULL;
    }
}

static void arg_string(cl_kernel kernel, cl_uint i, cl_kernel_arg_info what, char *buf, size_t size)
{
    buf[0] = '\0';
    const cl_int err = clGetKernelArgInfo(kernel, i, what, size, buf, NULL);
    ck_assert_msg(err == CL_SUCCESS, "%s: clGetKernelArgInfo(%u): %d", tu_label(), i, err);
}

/* One expected argument of the kernel: an entry's buffer, or one of its scalars (a VIEW's strides). */
static void check_arg(cl_kernel kernel, cl_uint i, const char *name, param_kind kind)
{
    char got_name[128], got_type[128];
    arg_string(kernel, i, CL_KERNEL_ARG_NAME, got_name, sizeof got_name);
    arg_string(kernel, i, CL_KERNEL_ARG_TYPE_NAME, got_type, sizeof got_type);
    ck_assert_msg(strcmp(got_name, name) == 0, "%s: argument %u is \"%s\" in the kernel, \"%s\" in the table",
                  tu_label(), i, got_name, name);
    cl_kernel_arg_address_qualifier space;
    ck_assert_int_eq(clGetKernelArgInfo(kernel, i, CL_KERNEL_ARG_ADDRESS_QUALIFIER, sizeof space, &space, NULL),
                     CL_SUCCESS);
    if (kind == PARAM_MEM || kind == PARAM_VIEW) {
        ck_assert_msg(space == CL_KERNEL_ARG_ADDRESS_GLOBAL && strchr(got_type, '*'),
                      "%s: argument %u (%s) is a buffer in the table, \"%s\" in the kernel", tu_label(), i, name,
                      got_type);
        return;
    }
    ck_assert_msg(space == CL_KERNEL_ARG_ADDRESS_PRIVATE && strcmp(got_type, scalar_type(kind)) == 0,
                  "%s: argument %u (%s) is a %s in the table, \"%s\" in the kernel", tu_label(), i, name,
                  scalar_type(kind), got_type);
}

/* The kernel's arguments against the entries of `k` whose features are in `features`. */
static void check_signature(cl_kernel kernel, const kernel_params *k, feature_set features)
{
    cl_uint i = 0;
    for (size_t e = 0; e < k->count; e++) {
        const param_info *p = &k->params[e];
        if (!(features & (1u << p->feature)))
            continue;
        check_arg(kernel, i++, p->name, p->kind);
        if (p->kind == PARAM_VIEW) {
            static const char *const strides[] = {"_bs", "_hs", "_rs"};
            for (int s = 0; s < 3; s++) {
                char stride[128];
                snprintf(stride, sizeof stride, "%s%s", p->name, strides[s]);
                check_arg(kernel, i++, stride, PARAM_ULONG);
            }
        }
    }
    cl_uint args = 0;
    ck_assert_int_eq(clGetKernelInfo(kernel, CL_KERNEL_NUM_ARGS, sizeof args, &args, NULL), CL_SUCCESS);
    ck_assert_msg(args == i, "%s: the kernel has %u arguments, the table %u", tu_label(), args, i);

    /* The binder sets exactly these, each with the size the kernel takes. */
    unsigned char zeros[1024] = {0};
    kernel_args a = kernel_args_begin(kernel);
    params_bind(&a, k, zeros, features);
    ck_assert_msg(a.err == CL_SUCCESS, "%s: params_bind: argument %u: %s", tu_label(), a.failed_at,
                  clattn_status_string((clattn_status)a.err));
    ck_assert_msg(a.next == args, "%s: params_bind set %u arguments of %u", tu_label(), a.next, args);
}

static bool has_fp64(cl_device_id device)
{
    char ext[8192] = "";
    clGetDeviceInfo(device, CL_DEVICE_EXTENSIONS, sizeof ext, ext, NULL);
    return strstr(ext, "cl_khr_fp64") != NULL;
}

START_TEST(test_signatures)
{
    const family_case *fc = &cases[TU_CASE(_i)];
    const size_t dev = TU_DEVICE(_i);
    clattn_context *ctx = tu_ctx[dev];
    if (fc->needs_fp64 && !has_fp64(ctx->device))
        return; /* the double softmax never builds there (its refusal is test_softmax_precision's) */
    const kernel_family *f = fc->family;
    const feature_set every = params_features(f->kernels, f->nkernels);
    const feature_set sets[2] = {FEATURE_BIT(ALL), every};
    for (int s = 0; s < 2; s++) {
        tu_set_label("%s kernels (%s) on %s, %s", f->name, fc->options, tu_dev_spec[dev],
                     s ? "every feature" : "no feature");
        char options[1024], with_info[1100], given[TYPES_OPTIONS_MAX + 128];
        snprintf(given, sizeof given, "%s", fc->options);
        if (fc->typed)
            tensor_types_options(fc->types, given + strlen(given), sizeof given - strlen(given));
        program_options(f, given, fc->group, sets[s], options, sizeof options);
        snprintf(with_info, sizeof with_info, "%s -cl-kernel-arg-info", options);
        cl_program program;
        clattn_status st = program_build(ctx, f->files, f->nfiles, NULL, with_info, &program);
        TU_ASSERT_OK(st, ctx, "building the family");
        size_t built = 0;
        for (size_t k = 0; k < f->nkernels; k++) {
            cl_int err;
            cl_kernel kernel = clCreateKernel(program, f->kernels[k]->name, &err);
            if (err == CL_INVALID_KERNEL_NAME && k >= f->required)
                continue;
            ck_assert_msg(err == CL_SUCCESS, "%s: clCreateKernel(%s): %d", tu_label(), f->kernels[k]->name, err);
            tu_set_label("%s (%s) on %s, %s", f->kernels[k]->name, fc->options, tu_dev_spec[dev],
                         s ? "every feature" : "no feature");
            check_signature(kernel, f->kernels[k], sets[s]);
            clReleaseKernel(kernel);
            built++;
        }
        ck_assert_msg(built == f->nkernels, "%s: %zu of the family's %zu kernels exist in this build", tu_label(),
                      built, f->nkernels);
        clReleaseProgram(program);
    }
}
END_TEST

/* Every family is among the cases, so that a new one cannot go unchecked. */
START_TEST(test_every_family_checked)
{
    for (size_t f = 0; f < kernel_family_count; f++) {
        bool found = false;
        for (size_t c = 0; c < N_CASES; c++)
            found |= cases[c].family == kernel_families[f];
        ck_assert_msg(found, "the %s family has no case in tests/test_params.c", kernel_families[f]->name);
    }
}
END_TEST

/* ---- the float-float double softmax against double -------------------------------------------- */

/* One launch of the double softmax's kernel built with `options`: rows × cols scores, sinks (NULL or
 * one per head of q_len rows). */
static void softmax_run(clattn_context *ctx, const char *build, const float *in, size_t rows, size_t cols,
                        const float *sinks, size_t heads, size_t q_len, float *out, float *lse)
{
    char options[1024];
    program_options(&family_softmax_double, build, 0, FEATURE_BIT(ALL), options, sizeof options);
    cl_program program;
    TU_ASSERT_OK(program_build(ctx, family_softmax_double.files, family_softmax_double.nfiles, NULL, options,
                               &program),
                 ctx, "building the double softmax");
    cl_int err;
    cl_kernel kernel = clCreateKernel(program, params_softmax_double.name, &err);
    ck_assert_msg(err == CL_SUCCESS, "%s: clCreateKernel: %d", tu_label(), err);
    cl_mem bin = clCreateBuffer(ctx->context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, rows * cols * sizeof(float),
                                (void *)in, &err);
    ck_assert_msg(err == CL_SUCCESS, "%s: clCreateBuffer: %d", tu_label(), err);
    cl_mem bout = clCreateBuffer(ctx->context, CL_MEM_WRITE_ONLY, rows * cols * sizeof(float), NULL, &err);
    ck_assert_msg(err == CL_SUCCESS, "%s: clCreateBuffer: %d", tu_label(), err);
    cl_mem blse = clCreateBuffer(ctx->context, CL_MEM_WRITE_ONLY, rows * sizeof(float), NULL, &err);
    ck_assert_msg(err == CL_SUCCESS, "%s: clCreateBuffer: %d", tu_label(), err);
    cl_mem bsinks = NULL;
    if (sinks) {
        bsinks = clCreateBuffer(ctx->context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, heads * sizeof(float),
                                (void *)sinks, &err);
        ck_assert_msg(err == CL_SUCCESS, "%s: clCreateBuffer: %d", tu_label(), err);
    }
    const softmax_params p = {bin, bout, blse, 0, rows, cols, bsinks, heads, q_len};
    kernel_args a = kernel_args_begin(kernel);
    params_bind(&a, &params_softmax_double, &p, FEATURE_BIT(ALL));
    ck_assert_msg(a.err == CL_SUCCESS, "%s: params_bind: argument %u: %d", tu_label(), a.failed_at, a.err);
    /* Work groups of one item, which every device takes: PoCL left to pick its own size under a small
     * POCL_MAX_WORK_GROUP_SIZE (.ci/run's smallwg1 and smallwg3) fails an assertion of its own. */
    const size_t global = rows, local = 1;
    ck_assert_int_eq(clEnqueueNDRangeKernel(ctx->queue, kernel, 1, NULL, &global, &local, 0, NULL, NULL), CL_SUCCESS);
    ck_assert_int_eq(clEnqueueReadBuffer(ctx->queue, bout, CL_TRUE, 0, rows * cols * sizeof(float), out, 0, NULL, NULL),
                     CL_SUCCESS);
    ck_assert_int_eq(clEnqueueReadBuffer(ctx->queue, blse, CL_TRUE, 0, rows * sizeof(float), lse, 0, NULL, NULL),
                     CL_SUCCESS);
    if (bsinks)
        ck_assert_int_eq(clReleaseMemObject(bsinks), CL_SUCCESS);
    ck_assert_int_eq(clReleaseMemObject(blse), CL_SUCCESS);
    ck_assert_int_eq(clReleaseMemObject(bout), CL_SUCCESS);
    ck_assert_int_eq(clReleaseMemObject(bin), CL_SUCCESS);
    ck_assert_int_eq(clReleaseKernel(kernel), CL_SUCCESS);
    ck_assert_int_eq(clReleaseProgram(program), CL_SUCCESS);
}

/* The kernel's formula in double on the host (the fp64 build's arithmetic), each result rounded once. */
static void softmax_host(const float *in, size_t rows, size_t cols, const float *sinks, size_t heads, size_t q_len,
                         float *out, float *lse)
{
    for (size_t r = 0; r < rows; r++) {
        const float *x = in + r * cols;
        float *y = out + r * cols;
        const double sink = sinks ? sinks[r / q_len % heads] : -INFINITY;
        double m = -INFINITY;
        bool nan_seen = isnan(sink);
        for (size_t j = 0; j < cols; j++) {
            m = fmax(m, x[j]);
            nan_seen |= isnan(x[j]);
        }
        if (!nan_seen && m == -INFINITY) {
            for (size_t j = 0; j < cols; j++)
                y[j] = 0.0f;
            lse[r] = (float)sink;
            continue;
        }
        m = fmax(m, sink);
        if (nan_seen || m == INFINITY) {
            for (size_t j = 0; j < cols; j++)
                y[j] = NAN;
            lse[r] = NAN;
            continue;
        }
        double sum = sink == -INFINITY ? 0.0 : exp(sink - m);
        for (size_t j = 0; j < cols; j++)
            sum += exp((double)x[j] - m);
        for (size_t j = 0; j < cols; j++)
            y[j] = (float)(exp((double)x[j] - m) / sum);
        lse[r] = (float)(m + log(sum));
    }
}

/* got against want: every element within one unit, or both below FLT_MIN (a device that flushes
 * subnormal results gives 0 there); *differ counts the others that are not equal, *flushed those. */
static void check_within_ulp(const char *what, const float *got, const float *want, size_t n, size_t *differ,
                             size_t *flushed)
{
    for (size_t i = 0; i < n; i++) {
        const int64_t d = tu_ulps_apart(got[i], want[i]);
        const bool tiny = fabsf(want[i]) < FLT_MIN && fabsf(got[i]) < FLT_MIN;
        ck_assert_msg(d <= 1 || tiny, "%s: %s[%zu] = %.9g, expected %.9g (%lld units apart)", tu_label(), what, i,
                      (double)got[i], (double)want[i], (long long)d);
        *(tiny ? flushed : differ) += d != 0;
    }
}

typedef struct ff_case {
    const char *name;
    size_t rows, cols, heads, q_len;
    float spread; /* random rows: uniform in ±spread (0: the crafted rows) */
    bool sinks;
} ff_case;

static const ff_case ff_cases[] = {
    {"random rows, spreads 1 to 400", 60, 257, 1, 60, 0.0f, false},
    {"long rows", 4, 5000, 1, 4, 30.0f, false},
    {"crafted rows", 8, 12, 1, 8, -1.0f, false},
    {"crafted rows with sinks", 8, 12, 2, 4, -1.0f, true},
};
#define N_FF (sizeof ff_cases / sizeof ff_cases[0])

/* Rows that reach every branch: subnormal and vanishing weights, NaN, +inf, −inf, ties, extremes. */
static void crafted_rows(float *x, size_t cols)
{
    /* (Weights exp(−87) down to exp(−200): subnormal, then 0. The maximum is 5, not 0: with m = 0 the
     * log-sum-exp is log(1 + 3e-38), 3e-38, which float-float holds and double rounds to 0.) */
    static const float r0[12] = {5.0f, -82.0f, -82.5f, -83.0f, -85.0f, -90.0f, -95.0f, -98.0f, -98.9f, -99.0f,
                                 -105.0f, -195.0f};
    const float ulp = nextafterf(1.0f, 2.0f) - 1.0f;
    for (size_t j = 0; j < cols; j++) {
        x[0 * cols + j] = r0[j];
        x[1 * cols + j] = j == 5 ? NAN : (float)j;
        x[2 * cols + j] = j == 3 ? INFINITY : (float)j;
        x[3 * cols + j] = -INFINITY;
        x[4 * cols + j] = j % 3 == 0 ? -INFINITY : 3.0f;
        x[5 * cols + j] = j % 4 == 0 ? FLT_MAX : j % 4 == 1 ? -FLT_MAX : j % 4 == 2 ? 1e38f : -1e38f;
        x[6 * cols + j] = 1.0f + (float)j * ulp;
        x[7 * cols + j] = j == 0 ? -INFINITY : -2.5f + (float)j * 0.3f;
    }
}

START_TEST(test_softmax_float_float)
{
    const ff_case *c = &ff_cases[TU_CASE(_i)];
    const size_t dev = TU_DEVICE(_i), n = c->rows * c->cols;
    clattn_context *ctx = tu_ctx[dev];
    float *x = tu_falloc(n), *ff = tu_falloc(n), *host = tu_falloc(n), *dbl = tu_falloc(n);
    float *ff_l = tu_falloc(c->rows), *host_l = tu_falloc(c->rows), *dbl_l = tu_falloc(c->rows);
    const float sinks[2] = {0.5f, 40.0f};
    if (c->spread > 0.0f) {
        tu_fill_uniform(x, n, c->spread, 970);
    } else if (c->spread < 0.0f) {
        crafted_rows(x, c->cols);
    } else {
        static const float spreads[5] = {1.0f, 10.0f, 40.0f, 120.0f, 400.0f};
        for (size_t r = 0; r < c->rows; r++)
            tu_fill_uniform(x + r * c->cols, c->cols, spreads[r % 5], 971 + r);
    }
    tu_set_label("float-float double softmax, %s, on %s", c->name, tu_dev_spec[dev]);
    const float *s = c->sinks ? sinks : NULL;
    softmax_run(ctx, SOFTMAX_DOUBLE_FF_OPTIONS, x, c->rows, c->cols, s, c->heads, c->q_len, ff, ff_l);
    softmax_host(x, c->rows, c->cols, s, c->heads, c->q_len, host, host_l);
    size_t differ_host = 0, differ_dbl = 0, flushed = 0;
    check_within_ulp("weights against the host's double", ff, host, n, &differ_host, &flushed);
    check_within_ulp("lse against the host's double", ff_l, host_l, c->rows, &differ_host, &flushed);
    char against_dbl[128] = "no cl_khr_fp64";
    if (has_fp64(ctx->device)) {
        softmax_run(ctx, SOFTMAX_DOUBLE_FP64_OPTIONS, x, c->rows, c->cols, s, c->heads, c->q_len, dbl, dbl_l);
        check_within_ulp("weights against the fp64 build", ff, dbl, n, &differ_dbl, &flushed);
        check_within_ulp("lse against the fp64 build", ff_l, dbl_l, c->rows, &differ_dbl, &flushed);
        snprintf(against_dbl, sizeof against_dbl, "%zu from the fp64 build's", differ_dbl);
    }
    /* Float-float carries about 2^-44 of each value: a result differs from double's only where the exact
     * value lies that close to a float32 rounding boundary, about once in 2^20 results. */
    const size_t most = 1 + (n + c->rows) / 4096;
    ck_assert_msg(differ_host <= most && differ_dbl <= most, "%s: %zu and %zu results differ by a unit (at most %zu)",
                  tu_label(), differ_host, differ_dbl, most);
    printf("%s: of %zu weights and log-sum-exps, %zu differ (by one unit) from the host's double, %s; %zu "
           "subnormal results differ (a device that flushes them)\n",
           tu_label(), n + c->rows, differ_host, against_dbl, flushed);
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("params");
    tu_add_loop(s, "signatures", test_signatures, N_CASES * tu_ndev);
    tu_add_loop(s, "softmax_float_float", test_softmax_float_float, N_FF * tu_ndev);
    TCase *tc = tu_tcase("families");
    tcase_add_test(tc, test_every_family_checked);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_main(make_suite); }
