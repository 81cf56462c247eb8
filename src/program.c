/* Kernel sources (embedded at build time; a kernel folder from the context options replaces them for
 * development), and programs built from them through the binary cache. */
#include "program.h"

#include "cache.h"
#include "clattn_kernels.h"
#include "context.h"
#include "error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EMBEDDED_COUNT (sizeof embedded_kernels / sizeof embedded_kernels[0])
#define PROGRAM_FILES_MAX 8

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

static const char *embedded_source(const char *name)
{
    for (size_t i = 0; i < EMBEDDED_COUNT; i++)
        if (strcmp(embedded_kernels[i].name, name) == 0)
            return embedded_kernels[i].source;
    return NULL;
}

/* One source text: common.cl, then the named files in order, each behind a #line so that build logs
 * name the file. */
static clattn_status assemble_source(clattn_context *ctx, const char *const *files, size_t nfiles, char **out)
{
    const char *dir = ctx->options.kernel_dir;
    const char *names[PROGRAM_FILES_MAX + 1] = {"common.cl"};
    char *texts[PROGRAM_FILES_MAX + 1] = {0};
    size_t lengths[PROGRAM_FILES_MAX + 1];
    const size_t n = nfiles + 1;
    for (size_t i = 0; i < nfiles; i++)
        names[i + 1] = files[i];
    size_t total = 1;
    clattn_status st = CLATTN_SUCCESS;
    for (size_t i = 0; i < n; i++) {
        if (dir) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", dir, names[i]);
            texts[i] = read_file(path, &lengths[i]);
            if (!texts[i]) {
                st = set_error(ctx, CLATTN_ERROR_KERNEL_SOURCE, "the kernel folder is set (options.kernel_dir or CLATTN_KERNEL_DIR) but %s could not be read",
                               path);
                goto done;
            }
        } else {
            const char *src = embedded_source(names[i]);
            if (!src) { /* a file missing from meson.build's kernel list: a packaging bug */
                st = set_error(ctx, CLATTN_ERROR_KERNEL_SOURCE, "kernel file %s is not embedded", names[i]);
                goto done;
            }
            lengths[i] = strlen(src);
        }
        total += lengths[i] + strlen(names[i]) + 32;
    }
    char *source = malloc(total);
    if (!source) {
        st = set_error(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "assembling %zu bytes of kernel source", total);
        goto done;
    }
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        used += (size_t)snprintf(source + used, total - used, "#line 1 \"%s\"\n", names[i]);
        memcpy(source + used, texts[i] ? texts[i] : embedded_source(names[i]), lengths[i]);
        used += lengths[i];
        source[used++] = '\n';
    }
    source[used] = '\0';
    *out = source;
done:
    for (size_t i = 0; i < n; i++)
        free(texts[i]);
    return st;
}

/* Keep the compiler's log on the context, whether the build worked or not. */
static void capture_build_log(clattn_context *ctx, cl_program program)
{
    size_t size = 0;
    char *log = NULL;
    if (clGetProgramBuildInfo(program, ctx->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &size) == CL_SUCCESS &&
        (log = calloc(size + 1, 1)) != NULL &&
        clGetProgramBuildInfo(program, ctx->device, CL_PROGRAM_BUILD_LOG, size, log, NULL) != CL_SUCCESS)
        log[0] = '\0';
    error_set_build_log(ctx, log);
}

clattn_status program_build(clattn_context *ctx, const char *const *files, size_t nfiles, const char *options,
                            cl_program *out)
{
    *out = NULL;
    if (nfiles > PROGRAM_FILES_MAX)
        return set_error(ctx, CLATTN_ERROR_KERNEL_SOURCE, "too many kernel files in one program");
    char *source = NULL;
    clattn_status st = assemble_source(ctx, files, nfiles, &source);
    if (st != CLATTN_SUCCESS)
        return st;
    cl_program program = cache_load(ctx, source, options);
    if (program) {
        free(source);
        *out = program;
        return CLATTN_SUCCESS;
    }
    cl_int err;
    const char *text = source;
    program = clCreateProgramWithSource(ctx->context, 1, &text, NULL, &err);
    if (err != CL_SUCCESS) {
        free(source);
        return cl_error(ctx, err, "clCreateProgramWithSource");
    }
    err = clBuildProgram(program, 1, &ctx->device, options, NULL, NULL);
    capture_build_log(ctx, program);
    if (err == CL_BUILD_PROGRAM_FAILURE || err == CL_INVALID_BUILD_OPTIONS)
        st = set_error(ctx, CLATTN_ERROR_BUILD_FAILED, "kernel build failed on %s (options \"%s\"): %.1200s",
                       ctx->caps.name, options, clattn_build_log(ctx)[0] ? clattn_build_log(ctx) : "(no build log)");
    else if (err != CL_SUCCESS)
        st = cl_error(ctx, err, "clBuildProgram");
    if (st == CLATTN_SUCCESS) {
        cache_store(ctx, source, options, program);
        *out = program;
    } else {
        clReleaseProgram(program);
    }
    free(source);
    return st;
}

clattn_status kernel_create(clattn_context *ctx, cl_program program, const char *name, cl_kernel *out)
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

void program_release(cl_program *program, cl_kernel *kernels, size_t nkernels)
{
    for (size_t i = 0; i < nkernels; i++) {
        if (kernels[i])
            clReleaseKernel(kernels[i]);
        kernels[i] = NULL;
    }
    if (*program)
        clReleaseProgram(*program);
    *program = NULL;
}

clattn_status program_build_kernels(clattn_context *ctx, const char *const *files, size_t nfiles,
                                    const char *options, const char *const *names, size_t nkernels,
                                    cl_program *program, cl_kernel *kernels)
{
    for (size_t i = 0; i < nkernels; i++)
        kernels[i] = NULL;
    clattn_status st = program_build(ctx, files, nfiles, options, program);
    for (size_t i = 0; i < nkernels && st == CLATTN_SUCCESS; i++)
        st = kernel_create(ctx, *program, names[i], &kernels[i]);
    if (st != CLATTN_SUCCESS)
        program_release(program, kernels, nkernels);
    return st;
}

clattn_status kernel_group_limit(clattn_context *ctx, cl_kernel kernel, size_t *limit)
{
    *limit = 0;
    cl_int err = clGetKernelWorkGroupInfo(kernel, ctx->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof *limit, limit, NULL);
    return err == CL_SUCCESS ? CLATTN_SUCCESS : cl_error(ctx, err, "clGetKernelWorkGroupInfo(CL_KERNEL_WORK_GROUP_SIZE)");
}
