/*
 * cl/exact_math.cl (issue 41's reproducible arithmetic) on every device against the same algorithms in C on the
 * host, bit for bit — so every OpenCL implementation the suite runs on (PoCL, Mesa's rusticl, oclgrind; a GPU
 * when one is lent) gives the host's bits, and therefore each other's:
 *   exp over [−100, 100] and every threshold, log over every binade of the positive floats (subnormals too),
 *   1/x over every binade of both signs, tanh over [−12, 12] and tiny values; ±0, ±inf, NaN;
 * then each against the correctly rounded value (libm in double): exp and log within 2 ulp, 1/x within 1,
 * tanh within 3 — and no result subnormal.
 */
#include "test_util.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* (No contraction: GCC in ISO C mode, -std=c11, compiles with -ffp-contract=off, and x86-64 rounds each float
 * operation to float.) */

/* ---- The host's copy of cl/exact_math.cl, operation for operation ---- */
static uint32_t bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}
static float from_bits(uint32_t u)
{
    float x;
    memcpy(&x, &u, 4);
    return x;
}
static float h_flush(float x) { return (bits(x) & 0x7f800000u) == 0 ? from_bits(bits(x) & 0x80000000u) : x; }

static float h_exp(float x)
{
    x = h_flush(x);
    if (isnan(x))
        return x;
    if (x > 88.72283935546875f)
        return INFINITY;
    if (x < -87.33f)
        return 0.0f;
    if (fabsf(x) < 0x1p-26f)
        return 1.0f;
    const float n = rintf(x * 1.44269504088896341f);
    float r = fmaf(-n, 0.693359375f, x);
    r = fmaf(-n, -2.12194440e-4f, r);
    float p = 1.9875691500e-4f;
    p = fmaf(p, r, 1.3981999507e-3f);
    p = fmaf(p, r, 8.3334519073e-3f);
    p = fmaf(p, r, 4.1665795894e-2f);
    p = fmaf(p, r, 1.6666665459e-1f);
    p = fmaf(p, r, 5.0000001201e-1f);
    const float r2 = r * r;
    const float y = fmaf(p, r2, r) + 1.0f;
    const int e = (int)n, e1 = e / 2;
    return y * from_bits((uint32_t)(e1 + 127) << 23) * from_bits((uint32_t)(e - e1 + 127) << 23);
}

static float h_log(float x)
{
    if (isnan(x) || x < 0.0f)
        return NAN;
    if (x == INFINITY)
        return x;
    if ((bits(x) & 0x7f800000u) == 0)
        return -INFINITY;
    int e = (int)((bits(x) >> 23) & 0xffu) - 127;
    float m = from_bits((bits(x) & 0x007fffffu) | 0x3f800000u);
    if (m > 1.41421356237f) {
        m = m * 0.5f;
        e = e + 1;
    }
    const float f = m - 1.0f, z = f * f, fe = (float)e;
    float p = 7.0376836292e-2f;
    p = fmaf(p, f, -1.1514610310e-1f);
    p = fmaf(p, f, 1.1676998740e-1f);
    p = fmaf(p, f, -1.2420140846e-1f);
    p = fmaf(p, f, 1.4249322787e-1f);
    p = fmaf(p, f, -1.6668057665e-1f);
    p = fmaf(p, f, 2.0000714765e-1f);
    p = fmaf(p, f, -2.4999993993e-1f);
    p = fmaf(p, f, 3.3333331174e-1f);
    float y = p * f * z;
    y = fmaf(fe, -2.12194440e-4f, y);
    y = fmaf(z, -0.5f, y);
    return fmaf(fe, 0.693359375f, f + y);
}

static float h_recip(float x)
{
    if (isnan(x))
        return x;
    if ((bits(x) & 0x7f800000u) == 0)
        return copysignf(INFINITY, x);
    const float a = fabsf(x);
    if (a > 0x1p126f)
        return copysignf(0.0f, x);
    const float s = a >= 0x1p125f ? 0.25f : 1.0f, as = a * s; /* (else the first guess would be subnormal) */
    float y = from_bits(0x7ef311c3u - bits(as));
    for (int i = 0; i < 4; i++)
        y = fmaf(y, fmaf(-as, y, 1.0f), y);
    return copysignf(y * s, x);
}

static float h_tanh(float x)
{
    x = h_flush(x);
    if (isnan(x))
        return x;
    const float a = fabsf(x);
    if (a < 0x1p-12f)
        return x;
    if (a > 9.0f)
        return copysignf(1.0f, x);
    if (a < 0.625f) {
        const float z = x * x;
        float p = -5.70498872745e-3f;
        p = fmaf(p, z, 2.06390887954e-2f);
        p = fmaf(p, z, -5.37397155531e-2f);
        p = fmaf(p, z, 1.33314422036e-1f);
        p = fmaf(p, z, -3.33332819422e-1f);
        return fmaf(p * z, x, x);
    }
    const float t = 1.0f - 2.0f * h_recip(h_exp(2.0f * a) + 1.0f);
    return copysignf(t, x);
}

/* ---- The inputs ---- */
enum { OP_EXP, OP_LOG, OP_RECIP, OP_TANH, N_OPS };
static const char *const op_names[N_OPS] = {"exp", "log", "recip", "tanh"};
static float (*const host_ops[N_OPS])(float) = {h_exp, h_log, h_recip, h_tanh};

/* n inputs for op: a sweep of its range, random bit patterns of its domain, and the special values. */
static float *inputs(int op, size_t n)
{
    float *x = tu_falloc(n);
    static const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 0x1p-149f, -0x1p-149f, 0x1p-127f,
                                     0x1p-126f, -0x1p-126f, 1.0f, -1.0f, 88.72283935546875f, 88.7228394f,
                                     -87.33f, -87.3300018f, 0x1p-26f, -0x1p-26f, 0x1p-12f, 0.625f, -0.625f, 9.0f,
                                     0x1p125f, 0x1.fffffep125f, 0x1p126f, 0x1.000002p126f, 0x1p127f, 3.4028235e38f,
                                     1.41421356237f};
    const size_t ns = sizeof specials / sizeof specials[0];
    tu_rng r;
    tu_rng_seed(&r, 4100 + (uint64_t)op);
    for (size_t i = 0; i < n; i++) {
        const double u = (double)i / (double)n;
        if (i < ns) {
            x[i] = specials[i];
        } else if (i % 2 == 0) { /* the sweep */
            x[i] = op == OP_EXP ? (float)(-100.0 + 200.0 * u) : op == OP_TANH ? (float)(-12.0 + 24.0 * u)
                   : op == OP_LOG ? (float)(1e-3 + 10.0 * u) : (float)(-4.0 + 8.0 * u);
        } else { /* random bits: positive floats for log, any finite sign for 1/x, small for tanh and exp */
            const uint32_t w = (uint32_t)(tu_rng_unit(&r) * 4294967296.0);
            const float f = from_bits(w & 0x7f7fffffu); /* (finite, positive) */
            x[i] = op == OP_LOG ? f : op == OP_RECIP ? (w & 1 ? -f : f)
                   : from_bits((w & 0x80000000u) | (0x30000000u + (w & 0x0fffffffu) % 0x0f000000u));
        }
    }
    return x;
}

/* ulps between a float and a double, in the float's spacing at the double. */
static double ulps(float got, double want)
{
    if (want == 0.0)
        return got == 0.0f ? 0.0 : INFINITY;
    int e;
    frexp(want, &e);
    return fabs((double)got - want) / ldexp(1.0, (e - 24 < -149 ? -149 : e - 24));
}

static double exact(int op, float x)
{
    const double d = x;
    return op == OP_EXP ? exp(d) : op == OP_LOG ? log(d) : op == OP_RECIP ? 1.0 / d : tanh(d);
}

static const char kernel_source[] =
    "__kernel void eval(__global const float *x, __global float *y, uint op, uint n)\n"
    "{\n"
    "    const uint i = get_global_id(0);\n"
    "    if (i >= n) return;\n"
    "    const float v = x[i];\n"
    "    y[i] = op == 0 ? clattn_x_exp(v) : op == 1 ? clattn_x_log(v) : op == 2 ? clattn_x_recip(v)\n"
    "                   : clattn_x_tanh(v);\n"
    "}\n";

/* The test kernel built on the context's device from the source folder's cl/exact_math.cl (no options: the
 * reproducible builds take no relaxed-math flag). */
static cl_kernel build(clattn_context *ctx)
{
    const char *math = tu_read_source_cl("exact_math.cl", NULL);
    const char *parts[2] = {math, kernel_source};
    const cl_context cl = clattn_context_cl_context(ctx);
    cl_device_id device;
    cl_int err = clGetContextInfo(cl, CL_CONTEXT_DEVICES, sizeof device, &device, NULL);
    cl_program program = err == CL_SUCCESS ? clCreateProgramWithSource(cl, 2, parts, NULL, &err) : NULL;
    if (err == CL_SUCCESS)
        err = clBuildProgram(program, 1, &device, "", NULL, NULL);
    if (err != CL_SUCCESS && program) {
        char log[8192] = "";
        clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, sizeof log, log, NULL);
        ck_abort_msg("%s: building exact_math.cl: %d\n%s", tu_label(), err, log);
    }
    cl_kernel kernel = clCreateKernel(program, "eval", &err);
    ck_assert_msg(err == CL_SUCCESS, "%s: clCreateKernel: %d", tu_label(), err);
    clReleaseProgram(program);
    return kernel;
}

START_TEST(test_device_equals_host)
{
    const size_t dev = TU_DEVICE(_i);
    const int op = (int)TU_CASE(_i);
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("exact %s on %s", op_names[op], tu_dev_spec[dev]);
    const size_t n = getenv("CLATTN_TEST_EXACT_SMALL") ? 4096 : 200003;
    const float *x = inputs(op, n);
    cl_kernel kernel = build(ctx);
    cl_mem xd = tu_dev_alloc(ctx, n, x), yd = tu_dev_alloc(ctx, n, NULL);
    const cl_uint op_arg = (cl_uint)op, n_arg = (cl_uint)n;
    cl_int err = clSetKernelArg(kernel, 0, sizeof xd, &xd);
    err |= clSetKernelArg(kernel, 1, sizeof yd, &yd);
    err |= clSetKernelArg(kernel, 2, sizeof op_arg, &op_arg);
    err |= clSetKernelArg(kernel, 3, sizeof n_arg, &n_arg);
    const size_t global = n;
    if (err == CL_SUCCESS)
        err = clEnqueueNDRangeKernel(clattn_context_queue(ctx), kernel, 1, NULL, &global, NULL, 0, NULL, NULL);
    ck_assert_msg(err == CL_SUCCESS, "%s: launch: %d", tu_label(), err);
    const float *y = tu_dev_read_checked(ctx, yd, n, "results");
    clReleaseKernel(kernel);
    double worst = 0.0;
    const double bound = op == OP_RECIP ? 1.0 : op == OP_TANH ? 3.0 : 2.0;
    for (size_t i = 0; i < n; i++) {
        const float want = host_ops[op](x[i]);
        ck_assert_msg(bits(y[i]) == bits(want) || (isnan(y[i]) && isnan(want)),
                      "%s: %s(%a) = %a on the device, %a on the host", tu_label(), op_names[op], (double)x[i],
                      (double)y[i], (double)want);
        ck_assert_msg(y[i] == 0.0f || isnan(y[i]) || (bits(y[i]) & 0x7f800000u) != 0, "%s: %s(%a) = %a, subnormal",
                      tu_label(), op_names[op], (double)x[i], (double)y[i]);
        /* Accuracy where the true value is a normal float (elsewhere the result is the explicit 0, ±inf or ±1). */
        const double e = exact(op, h_flush(x[i]));
        const bool zero_region = op == OP_EXP && x[i] < -87.33f; /* (exp's documented 0: e^x within 1% of FLT_MIN) */
        if (isfinite(e) && fabs(e) >= 0x1p-126 && fabs(e) <= 3.4e38 && (bits(x[i]) & 0x7f800000u) != 0 &&
            !zero_region) {
            const double u = ulps(y[i], e);
            ck_assert_msg(u <= bound, "%s: %s(%a) = %a, correctly rounded %a: %.2f ulp", tu_label(), op_names[op],
                          (double)x[i], (double)y[i], e, u);
            worst = u > worst ? u : worst;
        }
    }
    printf("%s: %zu inputs, the host's bits on every one, worst %.2f ulp\n", tu_label(), n, worst);
}
END_TEST

static Suite *exact_math_suite(void)
{
    Suite *s = suite_create("exact_math");
    tu_add_loop(s, "device_equals_host", test_device_equals_host, N_OPS * tu_ndev);
    return s;
}

int main(void) { return tu_main(exact_math_suite); }
