/* Kernel sources (embedded at build time, or a folder of .cl files from the context options), programs
 * built from them through the binary cache, and the build log of the last build. */
#ifndef CLATTN_PROGRAM_H
#define CLATTN_PROGRAM_H

#include "clattn/clattn.h"

#include <stddef.h>

/* Build a program from cl/common.cl followed by the named files of cl/, with these build options,
 * through the binary cache. On a compile error: CLATTN_ERROR_BUILD_FAILED and the log in ctx. */
clattn_status program_build(clattn_context *ctx, const char *const *files, size_t nfiles, const char *options,
                            cl_program *out);

clattn_status kernel_create(clattn_context *ctx, cl_program program, const char *name, cl_kernel *out);

/* A program and the kernels it defines under `names`, all or nothing: on failure nothing is left. */
clattn_status program_build_kernels(clattn_context *ctx, const char *const *files, size_t nfiles,
                                    const char *options, const char *const *names, size_t nkernels,
                                    cl_program *program, cl_kernel *kernels);

/* The largest work-group `kernel` can be launched with on ctx's device (CL_KERNEL_WORK_GROUP_SIZE: a
 * kernel's registers and local memory may allow less than the device's maximum). */
clattn_status kernel_group_limit(clattn_context *ctx, cl_kernel kernel, size_t *limit);

/* Release kernels (NULL entries skipped) and their program, and set them all to NULL. */
void program_release(cl_program *program, cl_kernel *kernels, size_t nkernels);

#endif
