/* Kernel sources (embedded at build time, or a folder of .cl files from the context options), programs
 * built from them through the binary cache, the build log of the last build, and THE kernel cache: every
 * program a context builds, keyed by (family, build options, features), owned by the context. */
#ifndef CLATTN_PROGRAM_H
#define CLATTN_PROGRAM_H

#include "clattn/clattn.h"
#include "params.h"

#include <stddef.h>

/* Text a program takes beyond clattn's files (the mods of programmable attention): `head` after
 * cl/common.cl and cl/params.h, before the named files (declarations they call), `tail` after them (the
 * caller's definitions, whose macros then cannot reach clattn's code). Either may be NULL. */
typedef struct program_text {
    const char *head, *tail;
} program_text;

/* The mods of one call (programmable attention, mods.h's mods_program) as a family's build takes them:
 * their text, and `id`, the digest that keys the build in the kernel cache. A call passes them to
 * program_get itself: the context keeps no call's state. */
typedef struct program_mods {
    program_text text;
    const char *id;
} program_mods;

/* The OpenCL C version every kernel is written in. program_build, which every program goes through,
 * puts it first in the build options: no family, path or test writes it in its own. */
#define PROGRAM_CL_STD "-cl-std=CL1.2"

/* Build a program from cl/common.cl and cl/params.h, extra->head, the named files of cl/, extra->tail
 * (extra may be NULL), with PROGRAM_CL_STD and then these build options (a family's own: tiles, types,
 * features; "" for none), through the binary cache. On a compile error: CLATTN_ERROR_BUILD_FAILED and
 * the log in ctx. */
clattn_status program_build(clattn_context *ctx, const char *const *files, size_t nfiles, const program_text *extra,
                            const char *options, cl_program *out);

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

/* A family built for one call: its kernels (NULL past family->required where the build has none),
 * the work-group size of kernels[0] it launches with, and the features it was built for. */
typedef struct family_build {
    cl_kernel kernels[FAMILY_KERNELS_MAX];
    unsigned group;        /* the value of family->group_define (0: the family has none) */
    feature_set features;  /* the call's features that the family's kernels take */
} family_build;

/* `family` built with `options` (the path's tiles and types) and the call's `features` (only those
 * its kernels name become -DHAS_x options: the rest cannot change its program), from the context's
 * cache, built on first use. `mods` (NULL: none) are the call's, which a build with FEATURE_MODS
 * needs (their text joins the program, their id the cache's key) and any other build ignores. With a group_define, `group` work-items is asked for (-D<define>=group)
 * and, where the device cannot launch kernels[0] with that many (CL_KERNEL_WORK_GROUP_SIZE), halved
 * until it can; a build that failed is remembered and fails again at once. The pointer stays valid
 * until PROGRAM_CACHE_KEEP more programs have been asked for: a call uses what it got before that. */
#define PROGRAM_CACHE_KEEP 16
clattn_status program_get(clattn_context *ctx, const kernel_family *family, const char *options, unsigned group,
                          feature_set features, const program_mods *mods, const family_build **out);

/* The build options program_get builds `family` with: `options`, -D<group_define>=group, and
 * -DHAS_x=0/1 for each feature the family's kernels name. */
void program_options(const kernel_family *family, const char *options, unsigned group, feature_set features,
                     char *buf, size_t size);

/* State a path keeps beside its programs for the context's life (a tuning choice, a fallback taken
 * once): zeroed memory of `size` bytes under `key` (the address of something of the path's), made on
 * first use; `release` (may be NULL) runs on it when the context goes. NULL when out of memory (an
 * error is set). */
void *program_path_state(clattn_context *ctx, const void *key, size_t size, void (*release)(clattn_context *, void *));

/* For tests (what a path built, not what it meant to): the build options of the `index`-th program of
 * `family` that the context's cache holds (counting the programs built, in the order they were first
 * asked for while none has been evicted: a context's first PROGRAM_CACHE_MAX programs) as the OpenCL
 * runtime reports them (CL_PROGRAM_BUILD_OPTIONS) into buf (truncated to `size`), and their build
 * (`build` may be NULL). CLATTN_ERROR_INVALID_VALUE when the cache holds `index` or fewer. */
clattn_status program_cache_options(clattn_context *ctx, const kernel_family *family, size_t index, char *buf,
                                    size_t size, const family_build **build);

/* Everything the context's cache holds (clattn_context_free). */
void program_cache_free(clattn_context *ctx);

#endif
