/* Kernel sources (embedded at build time; CLATTN_KERNEL_DIR overrides them for development), one
 * program per context compiled on first use, with its build log kept for the caller. */
#include "internal.h"
#include "clattn_kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KERNEL_COUNT (sizeof embedded_kernels / sizeof embedded_kernels[0])

/* Read a whole file; NULL on failure. */
static char *read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *data = NULL;
    long n;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
        data = malloc((size_t)n + 1);
        if (data && fread(data, 1, (size_t)n, f) != (size_t)n) {
            free(data);
            data = NULL;
        }
        if (data) {
            data[n] = '\0';
            *size = (size_t)n;
        }
    }
    fclose(f);
    return data;
}

/* One source text: every kernel file in order, each behind a #line so build logs name the file. */
static clattn_status assemble_source(clattn_context *ctx, char **out)
{
    const char *dir = getenv("CLATTN_KERNEL_DIR");
    if (dir && !*dir)
        dir = NULL;
    char *texts[KERNEL_COUNT] = {0};
    size_t lengths[KERNEL_COUNT];
    size_t total = 1;
    clattn_status st = CLATTN_SUCCESS;
    for (size_t i = 0; i < KERNEL_COUNT; i++) {
        if (dir) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", dir, embedded_kernels[i].name);
            texts[i] = read_file(path, &lengths[i]);
            if (!texts[i]) {
                st = set_error(ctx, CLATTN_ERROR_KERNEL_SOURCE,
                               "CLATTN_KERNEL_DIR is set but %s could not be read", path);
                goto done;
            }
        } else {
            lengths[i] = strlen(embedded_kernels[i].source);
        }
        total += lengths[i] + strlen(embedded_kernels[i].name) + 32;
    }
    char *source = malloc(total);
    if (!source) {
        st = set_error(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "assembling %zu bytes of kernel source", total);
        goto done;
    }
    size_t used = 0;
    for (size_t i = 0; i < KERNEL_COUNT; i++) {
        used += (size_t)snprintf(source + used, total - used, "#line 1 \"%s\"\n", embedded_kernels[i].name);
        memcpy(source + used, texts[i] ? texts[i] : embedded_kernels[i].source, lengths[i]);
        used += lengths[i];
        source[used++] = '\n';
    }
    source[used] = '\0';
    *out = source;
done:
    for (size_t i = 0; i < KERNEL_COUNT; i++)
        free(texts[i]);
    return st;
}

/* Keep the compiler's log on the context, whether the build worked or not. */
static void capture_build_log(clattn_context *ctx, cl_program program)
{
    size_t size = 0;
    free(ctx->build_log);
    ctx->build_log = NULL;
    if (clGetProgramBuildInfo(program, ctx->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &size) != CL_SUCCESS)
        return;
    ctx->build_log = calloc(size + 1, 1);
    if (ctx->build_log &&
        clGetProgramBuildInfo(program, ctx->device, CL_PROGRAM_BUILD_LOG, size, ctx->build_log, NULL) != CL_SUCCESS)
        ctx->build_log[0] = '\0';
}

static clattn_status create_kernel(clattn_context *ctx, cl_program program, const char *name, cl_kernel *out)
{
    cl_int err;
    *out = clCreateKernel(program, name, &err);
    if (err != CL_SUCCESS) {
        *out = NULL;
        return set_error(ctx, (clattn_status)err, "clCreateKernel(%s) failed: %s", name,
                         clattn_status_string((clattn_status)err));
    }
    return CLATTN_SUCCESS;
}

void kernels_release(kernel_set *set)
{
    cl_kernel *kernels[] = {&set->score, &set->softmax, &set->weighted_sum, &set->add_bias};
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++) {
        if (*kernels[i])
            clReleaseKernel(*kernels[i]);
        *kernels[i] = NULL;
    }
    if (set->program)
        clReleaseProgram(set->program);
    set->program = NULL;
}

clattn_status kernels_ensure(clattn_context *ctx)
{
    if (ctx->kernels.program)
        return CLATTN_SUCCESS;
    char *source = NULL;
    clattn_status st = assemble_source(ctx, &source);
    if (st != CLATTN_SUCCESS)
        return st;
    cl_int err;
    const char *text = source;
    kernel_set set = {0};
    set.program = clCreateProgramWithSource(ctx->context, 1, &text, NULL, &err);
    free(source);
    if (err != CL_SUCCESS)
        return cl_error(ctx, err, "clCreateProgramWithSource");

    err = clBuildProgram(set.program, 1, &ctx->device, "-cl-std=CL1.2", NULL, NULL);
    capture_build_log(ctx, set.program);
    if (err == CL_BUILD_PROGRAM_FAILURE || err == CL_INVALID_BUILD_OPTIONS) {
        st = set_error(ctx, CLATTN_ERROR_BUILD_FAILED, "kernel build failed on %s: %.1500s", ctx->device_name,
                       ctx->build_log ? ctx->build_log : "(no build log)");
    } else if (err != CL_SUCCESS) {
        st = cl_error(ctx, err, "clBuildProgram");
    }
    if (st == CLATTN_SUCCESS) st = create_kernel(ctx, set.program, "clattn_score", &set.score);
    if (st == CLATTN_SUCCESS) st = create_kernel(ctx, set.program, "clattn_softmax", &set.softmax);
    if (st == CLATTN_SUCCESS) st = create_kernel(ctx, set.program, "clattn_weighted_sum", &set.weighted_sum);
    if (st == CLATTN_SUCCESS) st = create_kernel(ctx, set.program, "clattn_add_bias", &set.add_bias);
    if (st != CLATTN_SUCCESS) {
        kernels_release(&set);
        return st;
    }
    ctx->kernels = set;
    return CLATTN_SUCCESS;
}
