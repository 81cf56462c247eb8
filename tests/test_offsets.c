/*
 * Indices past 2^31: every kernel computes its element offsets with the ulong helpers of cl/common.cl
 * (clattn_view_offset, clattn_matrix_offset). This test compiles those helpers on each device with a
 * probe kernel and checks them against 64-bit host arithmetic for offsets far beyond 2^31 and 2^32 —
 * the sizes of a (B,H,L,S) weight tensor of more than 2^31 elements, which no CI machine can allocate.
 */
#define _POSIX_C_SOURCE 200809L
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char probe_source[] =
    "__kernel void offsets_probe(__global const ulong *in, __global ulong *out, ulong n)\n"
    "{\n"
    "    const ulong t = get_global_id(0);\n"
    "    if (t >= n)\n"
    "        return;\n"
    "    __global const ulong *a = in + t * 6;\n"
    "    out[2 * t] = clattn_view_offset(a[0], a[1], a[2], a[3], a[4], a[5]);\n"
    "    out[2 * t + 1] = clattn_matrix_offset(a[0], a[1], a[2], a[3], a[4]);\n"
    "}\n";

/* {b, h, i, bs, hs, rs}, read as {m, i, j, rows, cols} by the matrix probe. */
static const cl_ulong cases[][6] = {
    {0, 0, 0, 0, 0, 0},
    {1, 0, 0, 1, 1, 1},
    /* a strided view of a layer whose batch stride passes 2^31 */
    {3, 7, 123456, ((cl_ulong)1 << 31) + 12345, ((cl_ulong)1 << 30) + 7, 4099},
    /* the last score of B·H = 64 heads of L = S = 65536: offset ≈ 2^38 */
    {63, 65535, 65535, 65536, 65536, 1},
    /* the last weight of a (B,H,L,S) tensor just past 2^31 elements, and just past 2^32 */
    {0, 32767, 65535, 32768, 65536, 7},
    {1, 65535, 65535, 65536, 65536, 9},
    /* mixed large strides */
    {5, 11, 1 << 20, (cl_ulong)3 << 32, (cl_ulong)5 << 28, (cl_ulong)1 << 21},
};
#define N_CASES (sizeof cases / sizeof cases[0])

static char *read_common_cl(void)
{
    size_t n;
    const char *common = tu_read_source_cl("common.cl", &n);
    char *text = tu_track_malloc(n + sizeof probe_source + 2);
    memcpy(text, common, n);
    text[n] = '\n';
    memcpy(text + n + 1, probe_source, sizeof probe_source);
    return text;
}

START_TEST(test_offsets_on_device)
{
    const size_t dev = (size_t)_i;
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("kernel offset arithmetic on %s", tu_dev_spec[dev]);
    const char *source = read_common_cl();
    cl_int err;
    cl_context cl = clattn_context_cl_context(ctx);
    cl_device_id device = clattn_context_device(ctx);
    cl_program program = clCreateProgramWithSource(cl, 1, &source, NULL, &err);
    ck_assert_msg(err == CL_SUCCESS, "clCreateProgramWithSource: %d", err);
    err = clBuildProgram(program, 1, &device, "-cl-std=CL1.2", NULL, NULL);
    if (err != CL_SUCCESS) {
        char log[4096] = "";
        clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, sizeof log, log, NULL);
        ck_abort_msg("building the probe failed (%d): %s", err, log);
    }
    cl_kernel kernel = clCreateKernel(program, "offsets_probe", &err);
    ck_assert_int_eq(err, CL_SUCCESS);
    cl_mem in = clCreateBuffer(cl, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof cases, (void *)cases, &err);
    ck_assert_int_eq(err, CL_SUCCESS);
    cl_mem out = clCreateBuffer(cl, CL_MEM_WRITE_ONLY, N_CASES * 2 * sizeof(cl_ulong), NULL, &err);
    ck_assert_int_eq(err, CL_SUCCESS);
    cl_ulong n = N_CASES;
    clSetKernelArg(kernel, 0, sizeof in, &in);
    clSetKernelArg(kernel, 1, sizeof out, &out);
    clSetKernelArg(kernel, 2, sizeof n, &n);
    size_t global = N_CASES, local = 1;
    err = clEnqueueNDRangeKernel(clattn_context_queue(ctx), kernel, 1, NULL, &global, &local, 0, NULL, NULL);
    ck_assert_int_eq(err, CL_SUCCESS);
    cl_ulong got[N_CASES * 2];
    err = clEnqueueReadBuffer(clattn_context_queue(ctx), out, CL_TRUE, 0, sizeof got, got, 0, NULL, NULL);
    ck_assert_int_eq(err, CL_SUCCESS);
    clReleaseMemObject(in);
    clReleaseMemObject(out);
    clReleaseKernel(kernel);
    clReleaseProgram(program);

    for (size_t t = 0; t < N_CASES; t++) {
        const cl_ulong *a = cases[t];
        const cl_ulong view = a[0] * a[3] + a[1] * a[4] + a[2] * a[5];
        const cl_ulong matrix = (a[0] * a[3] + a[1]) * a[4] + a[2];
        ck_assert_msg(got[2 * t] == view, "%s: view offset case %zu: device %llu, host %llu", tu_label(), t,
                      (unsigned long long)got[2 * t], (unsigned long long)view);
        ck_assert_msg(got[2 * t + 1] == matrix, "%s: matrix offset case %zu: device %llu, host %llu", tu_label(), t,
                      (unsigned long long)got[2 * t + 1], (unsigned long long)matrix);
    }
    /* The cases do reach past 2^32, as they should. */
    ck_assert(got[2 * 5 + 1] > ((cl_ulong)1 << 32));
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("offsets");
    TCase *tc = tu_tcase("offsets");
    tcase_add_loop_test(tc, test_offsets_on_device, 0, (int)tu_ndev);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_main(make_suite); }
