/* A read-and-sum kernel over one buffer: what the device streams from memory at best, for the
 * bandwidth-bound benchmark cases to be measured against. */
#define _POSIX_C_SOURCE 200809L
#include "bench_stream.h"

#include <stdlib.h>
#include <time.h>

/* CPUs: each work-item sums one contiguous chunk, four 16-float vectors per step (independent sums, so
 * the adds keep up with the loads). GPUs: neighbouring work-items read neighbouring vectors. */
static const char stream_source[] =
    "__kernel void clattn_bench_stream(__global const float16 *x, ulong n, ulong per_item, int interleave,\n"
    "                                  __global float *out)\n"
    "{\n"
    "    const ulong g = get_global_id(0), items = get_global_size(0);\n"
    "    float16 s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;\n"
    "    if (interleave) {\n"
    "        for (ulong i = g; i < n; i += items)\n"
    "            s0 += x[i];\n"
    "    } else {\n"
    "        const ulong begin = g * per_item, end = min(begin + per_item, n);\n"
    "        ulong i = begin;\n"
    "        for (; i + 4 <= end; i += 4) {\n"
    "            s0 += x[i]; s1 += x[i + 1]; s2 += x[i + 2]; s3 += x[i + 3];\n"
    "        }\n"
    "        for (; i < end; i++)\n"
    "            s0 += x[i];\n"
    "    }\n"
    "    const float16 s = (s0 + s1) + (s2 + s3);\n"
    "    const float8 h8 = s.lo + s.hi;\n"
    "    const float4 h4 = h8.lo + h8.hi;\n"
    "    out[g] = (h4.x + h4.y) + (h4.z + h4.w);\n"
    "}\n";

double bench_now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int bench_compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

cl_int bench_stream_gbps(clattn_context *ctx, size_t bytes, double *gbps)
{
    cl_context context = clattn_context_cl_context(ctx);
    cl_device_id device = clattn_context_device(ctx);
    cl_command_queue queue = clattn_context_queue(ctx);
    cl_device_type type = 0;
    cl_uint units = 1;
    cl_int err = clGetDeviceInfo(device, CL_DEVICE_TYPE, sizeof type, &type, NULL);
    if (err == CL_SUCCESS)
        err = clGetDeviceInfo(device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof units, &units, NULL);
    if (err != CL_SUCCESS)
        return err;
    const int interleave = (type & CL_DEVICE_TYPE_CPU) == 0;
    const size_t n = bytes / 64, items = interleave ? (size_t)units * 1024 : 4 * (size_t)units;
    const size_t local = interleave ? 64 : 1;
    const cl_ulong n_arg = n, per_item = (n + items - 1) / items;
    const float zero = 0.0f;
    const char *src = stream_source;
    cl_mem x = clCreateBuffer(context, CL_MEM_READ_ONLY, n * 64, NULL, &err), out = NULL;
    cl_program program = NULL;
    cl_kernel kernel = NULL;
    if (err == CL_SUCCESS)
        out = clCreateBuffer(context, CL_MEM_WRITE_ONLY, items * sizeof(float), NULL, &err);
    if (err == CL_SUCCESS) /* touch every page before timing */
        err = clEnqueueFillBuffer(queue, x, &zero, sizeof zero, 0, n * 64, 0, NULL, NULL);
    if (err == CL_SUCCESS)
        program = clCreateProgramWithSource(context, 1, &src, NULL, &err);
    if (err == CL_SUCCESS)
        err = clBuildProgram(program, 1, &device, "-cl-std=CL1.2", NULL, NULL);
    if (err == CL_SUCCESS)
        kernel = clCreateKernel(program, "clattn_bench_stream", &err);
    if (err == CL_SUCCESS)
        err = clSetKernelArg(kernel, 0, sizeof x, &x);
    if (err == CL_SUCCESS)
        err = clSetKernelArg(kernel, 1, sizeof n_arg, &n_arg);
    if (err == CL_SUCCESS)
        err = clSetKernelArg(kernel, 2, sizeof per_item, &per_item);
    if (err == CL_SUCCESS)
        err = clSetKernelArg(kernel, 3, sizeof interleave, &interleave);
    if (err == CL_SUCCESS)
        err = clSetKernelArg(kernel, 4, sizeof out, &out);
    double times[9];
    for (int run = 0; run < 10 && err == CL_SUCCESS; run++) { /* run 0 is the warm-up */
        const double t0 = bench_now_seconds();
        err = clEnqueueNDRangeKernel(queue, kernel, 1, NULL, &items, &local, 0, NULL, NULL);
        if (err == CL_SUCCESS)
            err = clFinish(queue);
        if (run > 0)
            times[run - 1] = bench_now_seconds() - t0;
    }
    if (err == CL_SUCCESS) {
        qsort(times, 9, sizeof times[0], bench_compare_doubles);
        *gbps = (double)(n * 64) / times[4] * 1e-9;
    }
    if (kernel)
        clReleaseKernel(kernel);
    if (program)
        clReleaseProgram(program);
    if (out)
        clReleaseMemObject(out);
    if (x)
        clReleaseMemObject(x);
    return err;
}
