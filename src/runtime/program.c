/* Kernel sources (embedded at build time; a kernel folder from the context options replaces them for
 * development), programs built from them through the binary cache, and the context's kernel cache. */
#include "program.h"

#include "cache.h"
#include "clattn_kernels.h"
#include "context.h"
#include "error.h"
#include "hash.h"

#include <stdbool.h>
#include <stdint.h>
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

/* One source text: common.cl, formats.cl and params.h, then the named files in order, each behind a #line so that
 * build logs name the file. */
static clattn_status assemble_source(clattn_context *ctx, const char *const *files, size_t nfiles,
                                     const program_text *extra, char **out)
{
    const char *head = extra ? extra->head : NULL, *tail = extra ? extra->tail : NULL;
    const char *dir = ctx->options.kernel_dir;
    enum { FIRST = 3 }; /* the files every program starts with */
    const char *names[PROGRAM_FILES_MAX + FIRST] = {"common.cl", "formats.cl", "params.h"};
    char *texts[PROGRAM_FILES_MAX + FIRST] = {0};
    size_t lengths[PROGRAM_FILES_MAX + FIRST];
    const size_t n = nfiles + FIRST;
    for (size_t i = 0; i < nfiles; i++)
        names[i + FIRST] = files[i];
    size_t total = 1 + (head ? strlen(head) + 1 : 0) + (tail ? strlen(tail) + 1 : 0);
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
        const char *after[2] = {i + 1 == FIRST ? head : NULL, i + 1 == n ? tail : NULL};
        for (int a = 0; a < 2; a++)
            if (after[a]) { /* (each carries its own #line directives) */
                memcpy(source + used, after[a], strlen(after[a]));
                used += strlen(after[a]);
                source[used++] = '\n';
            }
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

/* The whole build options: PROGRAM_CL_STD, then the caller's (their leading blanks dropped), malloc'd. */
static char *full_options(clattn_context *ctx, const char *options)
{
    options += strspn(options, " ");
    const size_t size = sizeof PROGRAM_CL_STD + 1 + strlen(options);
    char *full = malloc(size);
    if (!full)
        set_error(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "assembling %zu bytes of build options", size);
    else
        snprintf(full, size, "%s%s%s", PROGRAM_CL_STD, options[0] ? " " : "", options);
    return full;
}

clattn_status program_build(clattn_context *ctx, const char *const *files, size_t nfiles, const program_text *extra,
                            const char *family_options, cl_program *out)
{
    *out = NULL;
    if (nfiles > PROGRAM_FILES_MAX)
        return set_error(ctx, CLATTN_ERROR_KERNEL_SOURCE, "too many kernel files in one program");
    char *source = NULL, *options = full_options(ctx, family_options);
    if (!options)
        return CLATTN_ERROR_OUT_OF_HOST_MEMORY;
    clattn_status st = assemble_source(ctx, files, nfiles, extra, &source);
    if (st != CLATTN_SUCCESS) {
        free(options);
        return st;
    }
    cl_program program = cache_load(ctx, source, options);
    if (program) {
        free(source);
        free(options);
        *out = program;
        return CLATTN_SUCCESS;
    }
    cl_int err;
    const char *text = source;
    program = clCreateProgramWithSource(ctx->context, 1, &text, NULL, &err);
    if (err != CL_SUCCESS) {
        free(source);
        free(options);
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
    free(options);
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
    clattn_status st = program_build(ctx, files, nfiles, NULL, options, program);
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

/* ---------------------------------------------------------------------------------------------- */
/* The kernel cache                                                                                */
/* ---------------------------------------------------------------------------------------------- */

/* Programs kept per context before the least recently used goes (the on-disk cache makes a rebuild
 * cheap); never one of the PROGRAM_CACHE_KEEP most recently asked for. */
#define PROGRAM_CACHE_MAX 96
#define PATH_STATES_MAX 8

typedef struct cache_entry {
    const kernel_family *family;
    char *options;           /* as the path gave them */
    unsigned asked_group;    /* the group asked for */
    uint64_t hash;           /* of the three above and the features, to find an entry fast */
    cl_program program;
    family_build build;
    clattn_status failure;   /* a build that failed on this device is not tried again */
    unsigned long last_use;
} cache_entry;

typedef struct path_state {
    const void *key;
    void *data;
    void (*release)(clattn_context *, void *);
} path_state;

struct program_cache {
    cache_entry *entries[PROGRAM_CACHE_MAX];
    size_t count;
    unsigned long clock; /* program_get calls so far */
    path_state states[PATH_STATES_MAX];
    size_t nstates;
};

static struct program_cache *cache_of(clattn_context *ctx)
{
    if (!ctx->programs && !(ctx->programs = calloc(1, sizeof *ctx->programs)))
        set_error(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "allocating the kernel cache");
    return ctx->programs;
}

static uint64_t entry_hash(const kernel_family *family, const char *options, unsigned group, feature_set features)
{
    uint64_t h = hash_fnv1a(HASH_FNV1A_BASIS, &family, sizeof family);
    h = hash_fnv1a(h, options, strlen(options));
    h = hash_fnv1a(h, &group, sizeof group);
    return hash_fnv1a(h, &features, sizeof features);
}

static void entry_free(cache_entry *e)
{
    program_release(&e->program, e->build.kernels, FAMILY_KERNELS_MAX);
    free(e->options);
    free(e);
}

void program_options(const kernel_family *family, const char *options, unsigned group, feature_set features,
                     char *buf, size_t size)
{
    const feature_set relevant = params_features(family->kernels, family->nkernels);
    size_t used = (size_t)snprintf(buf, size, "%s", options);
    if (family->group_define && used < size)
        used += (size_t)snprintf(buf + used, size - used, " -D%s=%u", family->group_define, group);
    for (int f = FEATURE_ALL + 1; f < FEATURE_COUNT && used < size; f++)
        if (relevant & (1u << f))
            used += (size_t)snprintf(buf + used, size - used, " -DHAS_%s=%d", feature_name((enum call_feature)f),
                                     (features >> f) & 1);
}

/* Whether `program` defines a kernel of this name (CL_PROGRAM_KERNEL_NAMES: asking clCreateKernel for
 * one it lacks would be an API error, which checking implementations such as oclgrind report). */
static bool program_defines(cl_program program, const char *name)
{
    size_t size = 0;
    char *names = NULL;
    bool found = false;
    if (clGetProgramInfo(program, CL_PROGRAM_KERNEL_NAMES, 0, NULL, &size) == CL_SUCCESS && (names = malloc(size + 1)) &&
        clGetProgramInfo(program, CL_PROGRAM_KERNEL_NAMES, size, names, NULL) == CL_SUCCESS) {
        names[size] = '\0';
        const size_t n = strlen(name);
        for (const char *t = names; t && !found; t = strchr(t, ';') ? strchr(t, ';') + 1 : NULL)
            found = strncmp(t, name, n) == 0 && (t[n] == ';' || t[n] == '\0');
    }
    free(names);
    return found;
}

/* Build e's program and kernels; with a group_define, halve the group until kernels[0] can launch. */
static clattn_status entry_build(clattn_context *ctx, cache_entry *e, const program_mods *mods)
{
    const kernel_family *f = e->family;
    unsigned group = e->asked_group;
    for (;;) {
        char options[2048];
        program_options(f, e->options, group, e->build.features, options, sizeof options);
        clattn_status st = program_build(ctx, f->files, f->nfiles,
                                         (e->build.features & FEATURE_BIT(MODS)) ? &mods->text : NULL, options,
                                         &e->program);
        for (size_t i = 0; i < f->nkernels && st == CLATTN_SUCCESS; i++)
            if (i < f->required || program_defines(e->program, f->kernels[i]->name))
                st = kernel_create(ctx, e->program, f->kernels[i]->name, &e->build.kernels[i]);
        if (st != CLATTN_SUCCESS || !f->group_define) {
            if (st != CLATTN_SUCCESS)
                program_release(&e->program, e->build.kernels, FAMILY_KERNELS_MAX);
            e->build.group = group;
            return st;
        }
        size_t launchable;
        if ((st = kernel_group_limit(ctx, e->build.kernels[0], &launchable)) != CLATTN_SUCCESS) {
            program_release(&e->program, e->build.kernels, FAMILY_KERNELS_MAX);
            return st;
        }
        if (launchable >= group) {
            e->build.group = group;
            return CLATTN_SUCCESS;
        }
        program_release(&e->program, e->build.kernels, FAMILY_KERNELS_MAX);
        if (launchable == 0)
            return set_error(ctx, CLATTN_ERROR_UNSUPPORTED_DEVICE, "the %s kernel cannot launch on %s", f->name,
                             ctx->caps.name);
        while (group > launchable)
            group /= 2;
    }
}

/* Room for one more entry: the least recently used goes, unless it is among the most recent (a call
 * may still hold those). */
static clattn_status make_room(clattn_context *ctx, struct program_cache *c)
{
    if (c->count < PROGRAM_CACHE_MAX)
        return CLATTN_SUCCESS;
    size_t oldest = 0;
    for (size_t i = 1; i < c->count; i++)
        if (c->entries[i]->last_use < c->entries[oldest]->last_use)
            oldest = i;
    if (c->clock - c->entries[oldest]->last_use < PROGRAM_CACHE_KEEP) /* cannot be: MAX > KEEP */
        return set_error(ctx, (clattn_status)CL_OUT_OF_RESOURCES, "the kernel cache is full");
    clFinish(ctx->queue); /* no launch of the kernels released here is still pending */
    entry_free(c->entries[oldest]);
    c->entries[oldest] = c->entries[--c->count];
    return CLATTN_SUCCESS;
}

clattn_status program_get(clattn_context *ctx, const kernel_family *family, const char *options, unsigned group,
                          feature_set features, const program_mods *mods, const family_build **out)
{
    *out = NULL;
    struct program_cache *c = cache_of(ctx);
    if (!c)
        return CLATTN_ERROR_OUT_OF_HOST_MEMORY;
    const feature_set relevant = params_features(family->kernels, family->nkernels);
    features = features_built(features | FEATURE_BIT(ALL)) & relevant;
    if (!family->group_define)
        group = 0;
    /* A build with mods is a build of their source: its digest joins the options (the key). */
    char keyed[2048];
    if (features & FEATURE_BIT(MODS)) {
        if (!mods || !mods->text.head || !mods->text.tail || !mods->id)
            return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "a %s build with mods, but no mods given", family->name);
        snprintf(keyed, sizeof keyed, "%s -DCLATTN_MODS_ID=%s", options, mods->id);
        options = keyed;
    }
    const uint64_t hash = entry_hash(family, options, group, features);
    c->clock++;
    for (size_t i = 0; i < c->count; i++) {
        cache_entry *e = c->entries[i];
        if (e->hash != hash || e->family != family || e->asked_group != group || e->build.features != features ||
            strcmp(e->options, options) != 0)
            continue;
        e->last_use = c->clock;
        if (e->failure != CLATTN_SUCCESS)
            return set_error(ctx, e->failure, "the %s kernels (%s) did not build on %s earlier", family->name,
                             options, ctx->caps.name);
        *out = &e->build;
        return CLATTN_SUCCESS;
    }
    clattn_status st = make_room(ctx, c);
    cache_entry *e = st == CLATTN_SUCCESS ? calloc(1, sizeof *e) : NULL;
    if (st == CLATTN_SUCCESS && (!e || !(e->options = malloc(strlen(options) + 1)))) {
        free(e);
        return set_error(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "allocating a kernel cache entry");
    }
    if (st != CLATTN_SUCCESS)
        return st;
    strcpy(e->options, options);
    e->family = family;
    e->asked_group = group;
    e->hash = hash;
    e->build.features = features;
    e->last_use = c->clock;
    st = entry_build(ctx, e, mods);
    if (st == CLATTN_ERROR_BUILD_FAILED) { /* remembered, so that later calls fall back at once */
        e->failure = st;
        c->entries[c->count++] = e;
        return st;
    }
    if (st != CLATTN_SUCCESS) {
        entry_free(e);
        return st;
    }
    c->entries[c->count++] = e;
    *out = &e->build;
    return CLATTN_SUCCESS;
}

void *program_path_state(clattn_context *ctx, const void *key, size_t size, void (*release)(clattn_context *, void *))
{
    struct program_cache *c = cache_of(ctx);
    if (!c)
        return NULL;
    for (size_t i = 0; i < c->nstates; i++)
        if (c->states[i].key == key)
            return c->states[i].data;
    void *data = c->nstates < PATH_STATES_MAX ? calloc(1, size) : NULL;
    if (!data) {
        set_error(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "allocating a path's state");
        return NULL;
    }
    c->states[c->nstates++] = (path_state){key, data, release};
    return data;
}

clattn_status program_cache_options(clattn_context *ctx, const kernel_family *family, size_t index, char *buf,
                                    size_t size, const family_build **build)
{
    if (build)
        *build = NULL;
    if (size)
        buf[0] = '\0';
    const struct program_cache *c = ctx->programs;
    size_t seen = 0;
    for (size_t i = 0; c && i < c->count; i++) {
        const cache_entry *e = c->entries[i];
        if (e->family != family || !e->program || seen++ < index)
            continue;
        size_t len = 0;
        cl_int err = clGetProgramBuildInfo(e->program, ctx->device, CL_PROGRAM_BUILD_OPTIONS, 0, NULL, &len);
        char *text = err == CL_SUCCESS ? malloc(len + 1) : NULL;
        if (err == CL_SUCCESS && !text)
            return set_error(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "reading %zu bytes of build options", len);
        if (err == CL_SUCCESS)
            err = clGetProgramBuildInfo(e->program, ctx->device, CL_PROGRAM_BUILD_OPTIONS, len, text, NULL);
        if (err != CL_SUCCESS) {
            free(text);
            return cl_error(ctx, err, "clGetProgramBuildInfo(CL_PROGRAM_BUILD_OPTIONS)");
        }
        text[len] = '\0';
        if (size)
            snprintf(buf, size, "%s", text);
        free(text);
        if (build)
            *build = &e->build;
        return CLATTN_SUCCESS;
    }
    return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "the kernel cache holds no program %zu of the %s kernels", index,
                     family->name);
}

void program_cache_free(clattn_context *ctx)
{
    struct program_cache *c = ctx->programs;
    if (!c)
        return;
    for (size_t i = 0; i < c->nstates; i++) {
        if (c->states[i].release)
            c->states[i].release(ctx, c->states[i].data);
        free(c->states[i].data);
    }
    for (size_t i = 0; i < c->count; i++)
        entry_free(c->entries[i]);
    free(c);
    ctx->programs = NULL;
}
