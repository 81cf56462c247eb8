/* Definitions shared by the library's source files; nothing here is public. */
#ifndef CLATTN_INTERNAL_H
#define CLATTN_INTERNAL_H

#include "clattn/clattn.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#define CLATTN_ERROR_MAX 2048

/* Reusable device temporaries, one slot per role so that one call never aliases two of them. */
typedef enum scratch_slot {
    SCRATCH_SCORES,     /* score/weight matrix when the caller does not want the weights */
    SCRATCH_Q,          /* projected Q, K, V and concatenated heads of clattn_mha */
    SCRATCH_K,
    SCRATCH_V,
    SCRATCH_CONCAT,
    SCRATCH_KEY_LENGTHS,
    SCRATCH_COUNT
} scratch_slot;

typedef struct kernel_set {
    cl_program program;
    cl_kernel score;
    cl_kernel softmax;
    cl_kernel weighted_sum;
    cl_kernel add_bias;
    cl_kernel matmul; /* the projection's fallback when CLBlast cannot run on the device */
} kernel_set;

/* One compiled variant of the fused kernel: head sizes and tiles are build options. */
typedef struct fused_variant {
    unsigned dk, dv;          /* padded head sizes */
    unsigned block_m, block_n; /* rows per work-group, keys per tile */
    unsigned vec;              /* float vector width inside a work-item */
    unsigned rows;             /* query rows per work-item */
    unsigned kv;               /* key vectors per step of a row's walk */
    cl_program program;
    cl_kernel kernel;
    clattn_status failure; /* a variant that did not build on this device is not tried again */
} fused_variant;

#define FUSED_VARIANTS_MAX 16

/* What the kernels and the tiling choice need to know about the device. */
typedef struct device_caps {
    cl_device_type type;
    cl_ulong max_alloc;     /* CL_DEVICE_MAX_MEM_ALLOC_SIZE */
    cl_ulong local_mem;     /* CL_DEVICE_LOCAL_MEM_SIZE */
    cl_ulong global_mem;    /* CL_DEVICE_GLOBAL_MEM_SIZE */
    size_t max_work_group;  /* CL_DEVICE_MAX_WORK_GROUP_SIZE */
    cl_uint native_float_width; /* CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT */
    char platform[256], platform_version[256], driver[256];
} device_caps;

struct clattn_context_s {
    cl_context context;
    cl_device_id device;
    cl_command_queue queue;
    char device_name[256];
    cl_ulong max_alloc; /* CL_DEVICE_MAX_MEM_ALLOC_SIZE */
    device_caps caps;
    kernel_set kernels; /* the staged path's kernels, built on first use */
    fused_variant fused[FUSED_VARIANTS_MAX];
    size_t fused_count;
    char *build_log;
    cl_mem scratch[SCRATCH_COUNT];
    size_t scratch_bytes[SCRATCH_COUNT];
    size_t scratch_peak; /* most bytes of temporaries held at once: the benchmark reports it */
    bool blas_unusable;  /* CLBlast failed to launch here once: projections use clattn_matmul */
    char last_error[CLATTN_ERROR_MAX];
    char last_warning[CLATTN_ERROR_MAX];
};

/* ---- errors (status.c / context.c) ---- */

/* Record a detail message for ctx (or the calling thread when ctx is NULL) and return status. */
clattn_status set_error(clattn_context *ctx, clattn_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Record a failed OpenCL call ("clEnqueueNDRangeKernel(score): CL_OUT_OF_RESOURCES") and return
 * its code, which is a valid clattn_status. */
clattn_status cl_error(clattn_context *ctx, cl_int err, const char *what);

void clear_error(clattn_context *ctx);

/* ---- failure injection (fault.c; test builds only) ---- */

/* INJECT_FAULT(code): CL_SUCCESS, or `code` at the point a test armed. Placed before every OpenCL
 * allocation and enqueue, so a test can make each of them fail in turn. */
#ifdef CLATTN_FAULT_INJECTION
bool fault_point_fails(void);
#define INJECT_FAULT(code) (fault_point_fails() ? (code) : CL_SUCCESS)
#else
#define INJECT_FAULT(code) CL_SUCCESS
#endif

/* ---- devices (device.c) ---- */

typedef struct device_list {
    size_t count;
    clattn_device_info *items;
} device_list;

clattn_status device_list_load(device_list *list);
void device_list_free(device_list *list);
/* "P:D name (type)" lines for error messages; writes into buf. */
void device_list_describe(const device_list *list, char *buf, size_t size);
const char *device_type_name(cl_device_type type);

void set_warning(clattn_context *ctx, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* ---- programs (program.c) and their on-disk cache (cache.c) ---- */

/* Build a program from the named files of cl/ (common.cl is always first) with these options,
 * through the binary cache. On a compile error: CLATTN_ERROR_BUILD_FAILED and the log in ctx. */
clattn_status program_build(clattn_context *ctx, const char *const *files, size_t nfiles, const char *options,
                            cl_program *out);
clattn_status kernel_create(clattn_context *ctx, cl_program program, const char *name, cl_kernel *out);

/* Build the staged path's kernels of ctx if they are not built yet. */
clattn_status kernels_ensure(clattn_context *ctx);
void kernels_release(kernel_set *set);

/* A program built from `source` with `options`, loaded from the cache, or NULL (not cached, cache
 * off, or an entry that is damaged or does not load: such an entry is never trusted). */
cl_program cache_load(clattn_context *ctx, const char *source, const char *options);
/* Store a built program's binary; failures (read-only or full disk) are ignored. */
void cache_store(clattn_context *ctx, const char *source, const char *options, cl_program program);



/* ---- validation (validate.c) ---- */

bool size_mul(size_t a, size_t b, size_t *out);
/* Product of n sizes, false on overflow. */
bool size_product(size_t *out, size_t n, ...);

clattn_status check_context(clattn_context *ctx);
/* Buffer `buf` must be non-NULL and hold at least `elems` floats (or elements of elem_size). */
clattn_status check_buffer(clattn_context *ctx, cl_mem buf, size_t elems, size_t elem_size,
                           const char *name);
/* A tensor of `elems` floats must fit in one device allocation. */
clattn_status check_alloc(clattn_context *ctx, size_t elems, const char *name);

/* A validated SDPA shape with its defaults resolved and its tensor sizes in elements. */
typedef struct sdpa_shape {
    size_t batch, heads, q_len, kv_len, qk_dim, v_dim;
    float scale;
    clattn_masks masks;
    clattn_algorithm algorithm;
    size_t q_elems, k_elems, v_elems, out_elems, weight_elems, lse_elems, mask_elems;
} sdpa_shape;

clattn_status sdpa_shape_resolve(clattn_context *ctx, const clattn_sdpa_desc *desc, sdpa_shape *shape);
clattn_status check_masks(clattn_context *ctx, const clattn_masks *masks, size_t batch,
                          size_t kv_len, bool mask_given);

/* ---- stages (stages.c) ---- */

/* Where a (B, H, rows, cols) tensor lives: element strides for batch, head and row; columns are
 * contiguous. Lets the same kernels read SDPA's (B,H,L,D) and MHA's (B,L,H·D) layouts. */
typedef struct tensor_view {
    cl_mem buf;
    size_t batch_stride, head_stride, row_stride;
} tensor_view;

tensor_view view_bhld(cl_mem buf, size_t heads, size_t rows, size_t cols);
tensor_view view_blhd(cl_mem buf, size_t heads, size_t rows, size_t cols);

clattn_status scratch_get(clattn_context *ctx, scratch_slot slot, size_t bytes, cl_mem *out);

/* Kernel arguments set in order (kernel_args.c); the first failure is kept and reported by
 * kernel_launch, which then enqueues nothing. Start with {kernel, 0, CL_SUCCESS, 0}. */
typedef struct kernel_args {
    cl_kernel kernel;
    cl_uint next;
    cl_int err;
    cl_uint failed_at; /* index of the argument that failed */
} kernel_args;

void karg(kernel_args *a, size_t size, const void *value);
void karg_mem(kernel_args *a, cl_mem m);
void karg_ulong(kernel_args *a, size_t v);
void karg_int(kernel_args *a, int v);
void karg_float(kernel_args *a, float v);
void karg_view(kernel_args *a, tensor_view t); /* buffer and its three strides */
clattn_status kernel_launch(clattn_context *ctx, const kernel_args *a, const char *name, cl_uint dims,
                            const size_t *global, const size_t *local);
/* Launch with a work-group size chosen from the kernel's and device's limits (kernels that use no
 * local memory and bound-check their ids); the global size is rounded up to whole groups. */
clattn_status kernel_launch_auto(clattn_context *ctx, const kernel_args *a, const char *name, cl_uint dims,
                                 const size_t *global);

clattn_status stage_projection(clattn_context *ctx, size_t rows, size_t in_dim, size_t out_dim,
                               cl_mem x, cl_mem w, cl_mem bias, cl_mem y);
/* Scores of heads [bh_begin, bh_begin + bh_count) of the flattened (batch, head) index into
 * `scores`, which holds just those heads. key_lengths: device copy or NULL. */
clattn_status stage_score(clattn_context *ctx, const sdpa_shape *s, tensor_view q, tensor_view k,
                          cl_mem key_lengths, cl_mem mask, size_t bh_begin, size_t bh_count,
                          cl_mem scores);
clattn_status stage_softmax(clattn_context *ctx, size_t rows, size_t cols, cl_mem scores,
                            cl_mem weights, cl_mem lse, size_t lse_offset);
clattn_status stage_weighted_sum(clattn_context *ctx, const sdpa_shape *s, cl_mem weights,
                                 tensor_view v, tensor_view out, size_t bh_begin, size_t bh_count);
clattn_status upload_key_lengths(clattn_context *ctx, const sdpa_shape *s, cl_mem *out);

/* ---- attention (attention.c) ---- */

/* CLATTN_ALGORITHM_FUSED cannot return weights nor serve head sizes above FUSED_MAX_HEAD. */
clattn_status check_algorithm(clattn_context *ctx, const sdpa_shape *s, bool weights_wanted);

/* SDPA on validated shapes and views (shared by clattn_sdpa and clattn_mha): the fused kernel or the
 * staged path, as s->algorithm and the request decide. */
clattn_status sdpa_run(clattn_context *ctx, const sdpa_shape *s, tensor_view q, tensor_view k,
                       tensor_view v, cl_mem mask, tensor_view out, cl_mem weights, cl_mem lse);

/* Host helpers: a device buffer initialised from host memory (or uninitialised when host is NULL). */
clattn_status buffer_from_host(clattn_context *ctx, const float *host, size_t elems, const char *name,
                               cl_mem *out);
clattn_status buffer_to_host(clattn_context *ctx, cl_mem buf, float *host, size_t elems,
                             const char *name);
void release_mems(cl_mem *mems, size_t n);

/* ---- fused kernel (fused.c) ---- */

/* Largest head size the fused kernel compiles for; larger ones take the staged path. */
#define FUSED_MAX_HEAD 256

clattn_status fused_run(clattn_context *ctx, const sdpa_shape *s, tensor_view q, tensor_view k, tensor_view v,
                        cl_mem mask, tensor_view out, cl_mem lse);
void fused_release(clattn_context *ctx);

#endif
