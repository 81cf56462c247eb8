/*
 * clattn — scaled dot-product and multi-head attention on any OpenCL device.
 *
 * This header is the manual. Conventions used throughout:
 *
 *  - Tensors are row-major ("C order"), densely packed, starting at offset 0 of their buffer. A
 *    buffer may be larger than the tensor; bytes past the tensor are never touched. They are float32
 *    unless a descriptor gives another storage type (clattn_dtype, since 0.5): arithmetic is float32
 *    whatever the storage, and results are rounded to nearest even into their type.
 *  - SDPA layouts follow PyTorch's scaled_dot_product_attention:
 *      Q (B, H, L, Dqk)   K (B, H, S, Dqk)   V (B, H, S, Dv)   O (B, H, L, Dv)
 *      weights P (B, H, L, S)   log-sum-exp (B, H, L)
 *    L (queries) and S (keys) may differ: that is cross-attention.
 *  - Layer weights follow the tutorials' convention Q = X·W_Q: W_Q has shape (d_in, H·Dqk) and head h
 *    uses its columns [h·Dqk, (h+1)·Dqk). A PyTorch nn.Linear stores the transpose (out, in).
 *  - Masks combine: causal, key-padding lengths and an additive float mask may all be given at once.
 *    A query row whose every key is masked gets all-zero weights, a zero output row and a log-sum-exp
 *    of −inf (never NaN), as PyTorch ≥ 2.5 does.
 *  - Functions taking cl_mem enqueue on the context's in-order command queue and may return before
 *    the device finishes (call clattn_finish, or clFinish on clattn_context_queue). The *_host variants
 *    copy in, run, copy out and return when the results are in host memory.
 *  - Every entry point validates all arguments before enqueuing anything; on error it returns a status
 *    other than CLATTN_SUCCESS, writes no output, and clattn_last_error() says which argument and why.
 *    When several arguments are wrong, which one is reported is not specified. A call with ctx == NULL
 *    records its detail where clattn_last_error(NULL) finds it.
 *
 * Extensible structs: every struct the caller passes in (descriptors, masks, layer weights, context
 * options) starts with `size_t struct_size` and has an INIT macro that sets it to the struct's size in
 * the header the program was compiled with, plus every default:
 *      clattn_sdpa_desc desc = CLATTN_SDPA_DESC_INIT;
 *      desc.batch = 2; ...
 * New fields are only ever appended, and 0 is always a new field's default. So a newer library reads
 * an older program's struct (the fields it lacks count as 0), and an older library accepts a newer
 * program's struct as long as every field it does not know is 0; otherwise it returns
 * CLATTN_ERROR_INVALID_VALUE and says which byte. A struct not started from its INIT macro
 * (struct_size 0, or a size no version of the struct ever had) is CLATTN_ERROR_INVALID_VALUE too.
 * Members named `reserved` must stay 0: they fill what would be tail padding, so that no later
 * field can land in bytes an older program left uninitialised.
 *
 * Thread safety: a context may be used by one thread at a time. Distinct contexts are independent and
 * may be used concurrently from different threads (their CLBlast calls take turns internally, since
 * CLBlast's process-wide caches are not thread-safe).
 */
#ifndef CLATTN_CLATTN_H
#define CLATTN_CLATTN_H

/* No CL_TARGET_OPENCL_VERSION is forced here: an application that includes this header first still
 * sees the OpenCL version it chose (or its headers' default). The library itself is built for 1.2. */
#include <CL/cl.h>
#include <math.h> /* NAN, for CLATTN_SCALE_DEFAULT */
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(CLATTN_BUILDING) && defined(__GNUC__)
#define CLATTN_API __attribute__((visibility("default")))
#else
#define CLATTN_API
#endif

#define CLATTN_VERSION_MAJOR 0
#define CLATTN_VERSION_MINOR 26
#define CLATTN_VERSION_PATCH 0
#define CLATTN_VERSION_NUMBER (CLATTN_VERSION_MAJOR * 10000 + CLATTN_VERSION_MINOR * 100 + CLATTN_VERSION_PATCH)
#define CLATTN_VERSION_STRING "0.26.0"

/* Run-time version, CLATTN_VERSION_NUMBER of the library actually loaded. */
CLATTN_API unsigned clattn_version_number(void);
CLATTN_API const char *clattn_version_string(void);

/* ---------------------------------------------------------------------------------------------- */
/* Status codes                                                                                    */
/* ---------------------------------------------------------------------------------------------- */

/* Like CLBlast: 0 is success, OpenCL's own error codes (-1 … -72) are passed through unchanged,
 * and clattn's own codes live in a separate range from -3000. */
typedef enum clattn_status {
    CLATTN_SUCCESS = 0,
    /* OpenCL codes (CL_OUT_OF_RESOURCES, CL_MEM_OBJECT_ALLOCATION_FAILURE, ...) appear as themselves. */

    CLATTN_ERROR_NULL_ARGUMENT = -3000,    /* a required pointer or buffer was NULL */
    CLATTN_ERROR_ZERO_SIZE = -3001,        /* a dimension that must be ≥ 1 was 0 */
    CLATTN_ERROR_SIZE_OVERFLOW = -3002,    /* an element or byte count does not fit in size_t */
    CLATTN_ERROR_BUFFER_TOO_SMALL = -3003, /* a cl_mem is smaller than its tensor's shape needs */
    CLATTN_ERROR_SHAPE_MISMATCH = -3004,   /* dimensions that must agree do not (e.g. head sizes) */
    CLATTN_ERROR_INVALID_MASK = -3005,     /* mask buffer without a layout, or a key length > S */
    CLATTN_ERROR_INVALID_VALUE = -3006,    /* a parameter outside its domain (infinite scale,
                                               unknown enum, bad struct_size or reserved field) */
    CLATTN_ERROR_EXCEEDS_DEVICE_LIMIT = -3007, /* a buffer larger than CL_DEVICE_MAX_MEM_ALLOC_SIZE */
    CLATTN_ERROR_NO_PLATFORM = -3008,      /* no OpenCL platform is installed */
    CLATTN_ERROR_NO_DEVICE = -3009,        /* platforms exist but expose no device */
    CLATTN_ERROR_DEVICE_NOT_FOUND = -3010, /* the device spec (argument or CLATTN_DEVICE) matches none */
    CLATTN_ERROR_KERNEL_SOURCE = -3011,    /* a kernel file under CLATTN_KERNEL_DIR could not be read */
    CLATTN_ERROR_BUILD_FAILED = -3012,     /* the OpenCL C compiler rejected the kernels: see build log */
    CLATTN_ERROR_BLAS = -3013,             /* CLBlast returned an error (its code is in the detail) */
    CLATTN_ERROR_OUT_OF_HOST_MEMORY = -3014, /* malloc failed on the host */
    CLATTN_ERROR_UNSUPPORTED_DEVICE = -3015, /* the device lacks something clattn needs */
    CLATTN_ERROR_COMMUNICATION = -3016,    /* since 0.6: an MPI call failed (clattn_mpi.h) */
    CLATTN_ERROR_TIMEOUT = -3017,          /* since 0.6: another rank did not answer in time */

    /* Not statuses: they make every 32-bit value part of the enum's range, so that any OpenCL or
     * extension code (CL_PLATFORM_NOT_FOUND_KHR is -1001) is a valid clattn_status in C and C++. */
    CLATTN_STATUS_RANGE_MIN_ = -2147483647 - 1,
    CLATTN_STATUS_RANGE_MAX_ = 2147483647
} clattn_status;

/* Short name of any status, clattn's or OpenCL's ("CLATTN_ERROR_ZERO_SIZE", "CL_OUT_OF_RESOURCES").
 * Never NULL: unknown values give "CLATTN_UNKNOWN_STATUS". */
CLATTN_API const char *clattn_status_string(clattn_status status);

/* One sentence describing what a status means. Never NULL. */
CLATTN_API const char *clattn_status_description(clattn_status status);

/* ---------------------------------------------------------------------------------------------- */
/* Devices                                                                                         */
/* ---------------------------------------------------------------------------------------------- */

typedef struct clattn_device_info {
    unsigned platform_index; /* P in a "P:D" device spec */
    unsigned device_index;   /* D in a "P:D" device spec, counted within its platform */
    cl_platform_id platform;
    cl_device_id device;
    cl_device_type type;
    char name[256];
    char vendor[256];
    char platform_name[256];
} clattn_device_info;

/* Number of OpenCL devices over all platforms (0 when none; then the status says why and
 * clattn_last_error() says how to get one). */
CLATTN_API clattn_status clattn_device_count(size_t *count);

/* Facts about device number `index` (0 ≤ index < count), in platform-then-device order; an index out
 * of range gives CLATTN_ERROR_DEVICE_NOT_FOUND. */
CLATTN_API clattn_status clattn_device_get(size_t index, clattn_device_info *info);

/* Resolve a device spec to a device, as clattn_context_create does. spec: "P:D" (platform and device
 * index), "cpu", "gpu", "accelerator", or a case-insensitive substring of the device name. NULL or ""
 * means: the CLATTN_DEVICE environment variable if set, else the first GPU, else the first device. */
CLATTN_API clattn_status clattn_device_select(const char *spec, clattn_device_info *info);

/* ---------------------------------------------------------------------------------------------- */
/* Context                                                                                         */
/* ---------------------------------------------------------------------------------------------- */

typedef struct clattn_context_s clattn_context;

/* How a context is configured. Zero-initialising is not enough: start from CLATTN_CONTEXT_OPTIONS_INIT,
 * which sets struct_size (see "Extensible structs" above) and the defaults, then set what you need.
 * Every field left at its default falls back to the environment variable named beside it, read once
 * when the context is created (with secure_getenv where it exists), then to the built-in default. */
typedef enum clattn_cache_mode {
    CLATTN_CACHE_DEFAULT = 0, /* CLATTN_CACHE: "0" turns the cache off; anything else, or unset, on */
    CLATTN_CACHE_ON = 1,
    CLATTN_CACHE_OFF = 2
} clattn_cache_mode;

typedef struct clattn_context_options {
    size_t struct_size; /* sizeof(clattn_context_options), set by CLATTN_CONTEXT_OPTIONS_INIT */
    /* Device spec (see clattn_device_select); NULL or "": CLATTN_DEVICE, else the first GPU, else the
     * first device. Ignored when opencl_context is set. */
    const char *device;
    /* An application's own OpenCL objects, all three or none (see clattn_context_create_from_cl). */
    cl_context opencl_context;
    cl_device_id opencl_device;
    cl_command_queue opencl_queue;
    /* The on-disk cache of compiled programs, keyed by kernel source, build options, platform, device,
     * driver and library version; a damaged or mismatched entry is rebuilt from source. */
    clattn_cache_mode cache;
    /* The cache's folder; NULL: $XDG_CACHE_HOME/clattn, else $HOME/.cache/clattn; "": no folder, so
     * no cache. */
    const char *cache_dir;
    /* For kernel development: a folder whose .cl files replace the embedded ones (read at the first
     * compile; a missing file gives CLATTN_ERROR_KERNEL_SOURCE). NULL: CLATTN_KERNEL_DIR; "": the
     * embedded kernels. */
    const char *kernel_dir;
    /* For experiments: the fused kernel's tiles as "MxN" or "MxNxR" (M rows per work-group, 1–1024;
     * N keys per tile, 1–256; R rows per work-item, 1–8), within the device's limits. NULL: CLATTN_TILE
     * (a malformed value there is ignored with a warning); "": the device's defaults. A malformed value
     * here is CLATTN_ERROR_INVALID_VALUE. */
    const char *tile;
    /* Non-zero: record the device time of every kernel clattn enqueues, read with clattn_profile_read.
     * clattn's own queue is then made with CL_QUEUE_PROFILING_ENABLE; an application's queue
     * (opencl_queue) must have it. (Since 0.2.1.) */
    int profile;
    int reserved; /* 0 */
    /* Since 0.4. The GEMM of the projections: "clblast" (CLBlast's SGEMM and a bias pass), "clattn"
     * (clattn's own register-blocked kernel, bias included) or "clattn:RxV" (that kernel with tiles of
     * R rows × V vectors of the device's SIMD width; 1 ≤ R ≤ 16, 1 ≤ V ≤ 8). NULL: CLATTN_GEMM (a
     * malformed value there is ignored with a warning), else what clattn_tune measured for this device,
     * driver and library version, else the device's default: clattn's kernel on CPUs, CLBlast elsewhere.
     * "": that measured choice or default. A malformed value here is CLATTN_ERROR_INVALID_VALUE. */
    const char *gemm;
    /* Since 0.8. The kernel families' parameters, each family's otherwise what clattn_tune recorded for
     * this device, else its device class's defaults (docs/devices-and-tuning.md lists every
     * family, value and default): entries "family=values" joined by commas, e.g.
     * "decode=8x16,staged=8x4". Families: gemm (options.gemm's syntax), fused (MxNxR as options.tile, then
     * VEC), decode (splits per compute unit x rows per group x keys per tile x work-items per group x VEC
     * x keys per step), staged (scores per work-item x output vectors per work-item x blocked score rows x
     * blocked score vectors x VEC); a prefix of a family's values may be given, the rest are its
     * defaults; VEC 0 is the device's native width. "class=cpu", "class=cpu-lanes" or "class=gpu" takes
     * that device class's defaults instead of the device's own (for checking kernels in another shape).
     * options.tile and options.gemm win over the fused and gemm entries. NULL: CLATTN_TUNING (a malformed
     * value there is ignored with a warning); "": none. A malformed value here is
     * CLATTN_ERROR_INVALID_VALUE. */
    const char *tuning;
} clattn_context_options;

#define CLATTN_CONTEXT_OPTIONS_INIT \
    { sizeof(clattn_context_options), NULL, NULL, NULL, NULL, CLATTN_CACHE_DEFAULT, NULL, NULL, NULL, 0, 0, NULL, NULL }

/* Create a context as `options` say (NULL: every default). Kernels are compiled on the first call that
 * needs them and reused for the life of the context, in one kernel cache per context: since 0.7 each
 * kernel is built for the features of the call that runs it (which masks and score terms it has, int8
 * K/V, a ragged or paged K/V layout) beside its storage types, head sizes and tiles, so a call with no
 * mask or score term runs a kernel without their arguments or branches (features build in groups:
 * docs/internals.md, "Kernels and the program cache"); a first call with new features compiles (seconds on PoCL,
 * then the on-disk cache). */
CLATTN_API clattn_status clattn_context_create_with_options(clattn_context **ctx,
                                                            const clattn_context_options *options);

/* Create a context on the device chosen by `spec` (see clattn_device_select), every other option at
 * its default: clattn_context_create_with_options with options.device = spec. */
CLATTN_API clattn_status clattn_context_create(clattn_context **ctx, const char *spec);

/* Wrap an application's own OpenCL objects. The queue must be in-order and belong to `context` and
 * `device`. clattn retains all three and releases them in clattn_context_free. */
CLATTN_API clattn_status clattn_context_create_from_cl(clattn_context **ctx, cl_context context,
                                                       cl_device_id device, cl_command_queue queue);

/* Free a context and everything it owns. Accepts NULL. */
CLATTN_API void clattn_context_free(clattn_context *ctx);

/* The context's OpenCL objects (NULL for a NULL ctx), for an application's own work on the same queue,
 * and its device's name ("" for a NULL ctx). They belong to the context: do not release them. */
CLATTN_API cl_context clattn_context_cl_context(const clattn_context *ctx);
CLATTN_API cl_device_id clattn_context_device(const clattn_context *ctx);
CLATTN_API cl_command_queue clattn_context_queue(const clattn_context *ctx);
CLATTN_API const char *clattn_context_device_name(const clattn_context *ctx);

/* Device memory of clattn's own temporaries (score chunks, projected Q/K/V): the most held at once
 * since the context was created or since clattn_context_release_temporaries. */
CLATTN_API size_t clattn_context_temp_peak_bytes(const clattn_context *ctx);

/* Free the temporaries the context keeps for reuse (after a large call, say) and reset the peak. */
CLATTN_API void clattn_context_release_temporaries(clattn_context *ctx);

/* Device time of one kind of kernel, from the kernels' own profiling events (START to END): time the
 * device spent running them, without the host's time between commands. */
typedef struct clattn_profile_entry {
    /* "fused attention", "score", "softmax", "weighted-sum", "projection GEMM (CLBlast)" (one
     * entry per GEMM call, however many kernels CLBlast runs for it: timed from a marker enqueued
     * just before the call to the end of its last kernel, so on an idle queue CLBlast's own
     * launch time is counted too), "projection bias", "projection GEMM (clattn)" (clattn's own
     * GEMM kernel, bias included); static strings. */
    const char *name;
    cl_ulong launches;  /* kernels of this kind that ran */
    cl_ulong device_ns; /* their device time, summed, in nanoseconds */
} clattn_profile_entry;

/* More kinds of kernel than clattn has: an array this long always suffices. */
#define CLATTN_PROFILE_MAX_ENTRIES 16

/* Waits for the kernels enqueued since the last read and gives their device time per kind, in the
 * order each kind first ran; *count says how many entries were written. Then starts afresh. Needs a
 * context made with options.profile (else CLATTN_ERROR_INVALID_VALUE). When more kinds ran than
 * `capacity` holds: CLATTN_ERROR_BUFFER_TOO_SMALL, *count the number needed, nothing reset. */
CLATTN_API clattn_status clattn_profile_read(clattn_context *ctx, clattn_profile_entry *entries, size_t capacity,
                                             size_t *count);

/* What clattn_tune measured and chose (since 0.4). */
typedef struct clattn_tune_result {
    char gemm[32];         /* the projection GEMM now in use, in options.gemm's syntax ("clattn:6x3") */
    double gemm_gflops;    /* its speed on the tuning shape (X 512×768 · W 768×2304) */
    double clblast_gflops; /* CLBlast's speed there (0: it could not run on this device) */
    double clattn_gflops;  /* the speed of clattn's fastest tile there (0: its kernel did not build) */
    /* The fused kernel's tiles now in use, in options.tile's syntax ("64x64x4"); "" when options.tile
     * fixes them (nothing measured) or no tile ran. Since 0.8.2 a tile may also have the rows in the
     * SIMD lanes, R then counting vectors of rows: clattn_tune_report's fused family says which (its
     * fifth value, options.tuning's syntax). */
    char fused_tile[32];
    double fused_gflops;         /* their speed on the tuning SDPA (B=1, H=8, L=S=1024, D=64) */
    double fused_default_gflops; /* the device's default tiles' speed there */
    unsigned candidates;   /* GEMMs and fused tiles measured */
    double seconds;        /* wall time of the whole tuning, compiles included */
} clattn_tune_result;

/* Measure every kernel family's candidates on ctx's device — the projection GEMM (CLBlast's SGEMM and
 * clattn's own kernel with several tiles), the fused kernel's tiles and, since 0.8, the decode kernels'
 * splits and rows per group and the staged kernels' shape — each compiled, warmed up and timed at its
 * best of three runs, and use the fastest from now on. The choices are stored with the program cache as
 * records keyed by device, driver and library version, so later contexts on the same device start with
 * them (unless options.gemm, options.tile or options.tuning say otherwise: a family they fix is not
 * measured); a record from another driver or version is never found, and a damaged one is ignored with
 * a warning (the device's default is used until clattn_tune runs again). Takes seconds (every candidate
 * is compiled, CLBlast's kernels included); nothing tunes implicitly. Blocks until done; result may be
 * NULL (clattn_tune_report gives every family's figures). Fails only when no projection GEMM runs at
 * all (a family none of whose candidates runs keeps its defaults, unrecorded). */
CLATTN_API clattn_status clattn_tune(clattn_context *ctx, clattn_tune_result *result);

/* One kernel family's tuning, as clattn_tune_report gives it (since 0.8). */
typedef struct clattn_tune_family {
    const char *family;      /* "gemm", "fused", "decode" or "staged" (options.tuning's names); static */
    const char *shape;       /* what was measured, in words; static */
    const char *unit;        /* of the speeds: "GFLOP/s", or "GB/s" of K and V read (decode); static */
    char chosen[48];         /* the values now in use, in options.tuning's syntax for the family */
    char device_default[48]; /* the device class's defaults, in the same syntax */
    double speed;            /* the chosen values' speed (0: the options fix them, nothing measured) */
    double default_speed;    /* the defaults' speed (0: they did not run, or nothing measured) */
    unsigned candidates;     /* values measured (0 when the options fix the family's) */
    int fixed;               /* 1: the options fix this family's values */
} clattn_tune_family;

/* More families than clattn has: an array this long always suffices. */
#define CLATTN_TUNE_MAX_FAMILIES 8

/* The figures of the last clattn_tune on ctx, one entry per kernel family: families[0..*count). Before
 * any clattn_tune on ctx: CLATTN_ERROR_INVALID_VALUE. When `capacity` is smaller than the number of
 * families: CLATTN_ERROR_BUFFER_TOO_SMALL with *count that number (families may then be NULL). */
CLATTN_API clattn_status clattn_tune_report(clattn_context *ctx, clattn_tune_family *families, size_t capacity,
                                            size_t *count);

/* Block until all work clattn enqueued on the context's queue has finished. */
CLATTN_API clattn_status clattn_finish(clattn_context *ctx);

/* The detail of the last failure: which argument and which size, the OpenCL call that failed, the
 * device list when a spec matched nothing. Every call on a context clears it first, so read it right
 * after the call that failed. With ctx == NULL: the calling thread's last failure outside any context
 * (device queries, clattn_context_create). Never NULL; "" when there is nothing to say. */
CLATTN_API const char *clattn_last_error(const clattn_context *ctx);

/* The warning of the last call on this context ("" if none): e.g. that the fused kernel did not build
 * on this device and the staged path ran instead, or that CLBlast could not run a projection. Every
 * call on a context clears it first, as it clears the last error, so a warning never outlives the
 * call that raised it (those of clattn_context_create stay until the first call). Warnings do not
 * change a call's status. */
CLATTN_API const char *clattn_last_warning(const clattn_context *ctx);

/* The OpenCL C compiler's full log from the last kernel build in this context ("" if none). After
 * CLATTN_ERROR_BUILD_FAILED it says why the kernels did not compile. */
CLATTN_API const char *clattn_build_log(const clattn_context *ctx);

/* ---------------------------------------------------------------------------------------------- */
/* Attention descriptors                                                                           */
/* ---------------------------------------------------------------------------------------------- */

/* Storage types of tensors (since 0.5). Every device runs all of them: half is read and written with
 * OpenCL 1.2's core vload_half/vstore_half (no cl_khr_fp16 needed), bfloat16 is a float's upper 16 bits.
 * Arithmetic is float32 whatever the storage; a result is rounded to nearest even into its type (a
 * value beyond half's range becomes ±inf, NaN stays NaN). */
typedef enum clattn_dtype {
    CLATTN_FLOAT32 = 0,
    CLATTN_FLOAT16 = 1,  /* IEEE 754 binary16, 2 bytes */
    CLATTN_BFLOAT16 = 2, /* bfloat16, 2 bytes: the upper half of a float32's bits */
    /* Signed 8-bit with a float scale per row (per token and K/V head): value = q·scale, the symmetric
     * per-token quantisation serving engines keep KV caches in. For K and V (and the caches) only; the
     * scales travel in the descriptor (clattn_sdpa_desc.k_scales, v_scales). */
    CLATTN_INT8 = 3,
    /* Since 0.14: quantised K/V formats, for K and V (the caches) only, read inside every kernel that
     * reads K or V (docs/kv-formats.md has each one's bytes). Block formats hold D/block whole blocks per
     * row (D a multiple of the block), each with its own scale (and zero point) inside: */
    CLATTN_Q8_0 = 4,    /* llama.cpp's GGUF q8_0: 32 values per 34-byte block (fp16 d, 32 int8 q; q·d) */
    CLATTN_Q4_0 = 5,    /* llama.cpp's GGUF q4_0: 32 values per 18-byte block (fp16 d, 16 bytes; (q−8)·d) */
    CLATTN_U8_G32 = 6,  /* asymmetric 8-bit groups of 32 (fp16 scale s, fp16 zero point z; (q−z)·s) */
    CLATTN_U8_G64 = 7,  /* … groups of 64 */
    CLATTN_U8_G128 = 8, /* … groups of 128 */
    CLATTN_U4_G32 = 9,  /* asymmetric 4-bit groups of 32 (fp16 s, fp16 z, two values a byte, low nibble first) */
    CLATTN_U4_G64 = 10, /* … groups of 64 */
    CLATTN_U4_G128 = 11, /* … groups of 128 */
    /* OCP 8-bit floats, one byte a value, decoded without any extension; optionally times a float32
     * scale per row (k_scales/v_scales as int8's; NULL: none). */
    CLATTN_FP8_E4M3 = 12, /* 4 exponent bits, 3 mantissa bits: ±448 at most, no infinity */
    CLATTN_FP8_E5M2 = 13, /* 5 exponent bits, 2 mantissa bits: half's upper byte (±57344, inf, NaN) */
    /* Since 0.16. KIVI's keys: 4-bit (2-bit) values with an fp16 scale and zero point per channel over
     * groups of 32 rows (tokens), the rows of a group not yet full kept in float16. Their bytes belong to
     * a head's rows together, not to each row: a dense cache's head, or a paged block's head, is one
     * chunk of clattn_dtype_head_bytes(dtype, rows, dim) bytes (docs/kv-formats.md has the layout).
     * Dense caches (clattn_kv_append, clattn_sdpa, the decode and fused paths), paged pools (block
     * sizes of 32 or more), clattn_sdpa_host and device groups by batches take them; ragged batches,
     * key splits, ring attention and the other *_host calls refuse them. */
    CLATTN_U4_T32 = 14,
    CLATTN_U2_T32 = 15
} clattn_dtype;

/* Bytes of one element of a storage type; 0 for a value outside the enum and for the block formats
 * (their values have no whole size: see clattn_dtype_bytes). */
CLATTN_API size_t clattn_dtype_size(clattn_dtype dtype);
/* Since 0.14. Values per block (1 for the formats stored value by value); 0 outside the enum. */
CLATTN_API size_t clattn_dtype_block(clattn_dtype dtype);
/* Since 0.14. Bytes of `count` values stored in the type; 0 outside the enum, where count is not a
 * multiple of the type's block, or where the bytes overflow size_t. */
CLATTN_API size_t clattn_dtype_bytes(clattn_dtype dtype, size_t count);
/* Since 0.16. Bytes of one head's `rows` rows of `dim` values — a dense K/V tensor or cache is batch ·
 * kv_heads of them, a paged pool blocks · kv_heads (rows = block_size) — in every format: rows ·
 * clattn_dtype_bytes(dtype, dim) for the formats stored row by row, the chunk for the token formats
 * (u4_t32, u2_t32). 0 outside the enum, for a dim the format cannot hold, or where the bytes overflow. */
CLATTN_API size_t clattn_dtype_head_bytes(clattn_dtype dtype, size_t rows, size_t dim);
/* "float32", "float16", "bfloat16", "int8", "q8_0", "q4_0", "u8_g32", …, "fp8_e5m2" (the enum's names,
 * lower case); "unknown" outside the enum. */
CLATTN_API const char *clattn_dtype_name(clattn_dtype dtype);
/* Since 0.14. The type of that name (clattn_dtype_name's), or -1 for an unknown one or NULL. */
CLATTN_API int clattn_dtype_from_name(const char *name);

typedef enum clattn_causal {
    CLATTN_CAUSAL_NONE = 0,
    CLATTN_CAUSAL_TOP_LEFT = 1,     /* query i sees keys 0..i (PyTorch's is_causal) */
    CLATTN_CAUSAL_BOTTOM_RIGHT = 2  /* query i sees keys 0..i+S−L (decoding with a KV cache) */
} clattn_causal;

/* Which implementation runs attention. */
typedef enum clattn_algorithm {
    /* Without a weights output: the decode kernels for 1 to 8 query rows (since 0.3) with head sizes up to
     * 576 (since 0.20; 256 before), the fused kernel for more with head sizes up to 256; otherwise, or if
     * the chosen kernel does not build on this device, the staged path (a fallback that is recorded in
     * clattn_last_warning). */
    CLATTN_ALGORITHM_AUTO = 0,
    /* One fused "flash" kernel with an online softmax: memory O(L·D), never L×S. Cannot return the
     * weights (asking for them is CLATTN_ERROR_INVALID_VALUE). */
    CLATTN_ALGORITHM_FUSED = 1,
    /* Score, softmax and weighted-sum as separate launches through an L×S score matrix (worked
     * through in chunks of heads when the weights are not wanted). */
    CLATTN_ALGORITHM_STAGED = 2,
    /* Since 0.3. Decoding ("flash-decoding", split-K): for few query rows against many keys, as when a
     * model generates one token at a time from a KV cache. The keys are split over work-groups (more
     * splits on devices with more compute units, at least 256 keys each), every group computes a
     * partial output and log-sum-exp over its slice for all query heads that share a K/V head, and a
     * second pass merges them (as clattn_merge does). Any q_len works; AUTO picks it up to 8 rows.
     * Cannot return the weights. */
    CLATTN_ALGORITHM_DECODE = 3
} clattn_algorithm;

/* The shape of the mask passed beside a descriptor, broadcast over the dimensions it lacks (ONNX and
 * PyTorch broadcasting). Its last dimension is masks.mask_kv_len (default S). */
typedef enum clattn_mask_layout {
    CLATTN_MASK_NONE = 0,
    CLATTN_MASK_L_S = 1,     /* (L, S), also (1, 1, L, S): one for every batch and head */
    CLATTN_MASK_B_H_L_S = 2, /* (B, H, L, S): one per batch and head */
    CLATTN_MASK_B_1_L_S = 3, /* (B, 1, L, S): one per batch, shared by its heads (since 0.3) */
    CLATTN_MASK_1_H_L_S = 4, /* (1, H, L, S): one per head, shared by the batches (since 0.3) */
    CLATTN_MASK_B_1_1_S = 5  /* (B, 1, 1, S): one row per batch, a padding mask (since 0.3) */
} clattn_mask_layout;

/* What the mask's entries are. */
typedef enum clattn_mask_type {
    CLATTN_MASK_FLOAT = 0, /* float, added to the scores (−inf allowed) */
    CLATTN_MASK_BOOL = 1,  /* one byte per entry, nonzero = may attend, 0 = masked (as PyTorch's bool) */
    CLATTN_MASK_FLOAT16 = 2, /* since 0.5: IEEE half entries, added (its −inf, and values to ±65504) */
    CLATTN_MASK_BFLOAT16 = 3 /* since 0.5: bfloat16 entries (a float's upper 16 bits), added */
} clattn_mask_type;

/* A sliding window around each query's absolute position p: key j is visible iff
 * p − left ≤ j ≤ p + right; −1 leaves that side unbounded. It combines with every other mask. */
typedef struct clattn_window {
    long long left;
    long long right;
} clattn_window;

/* The masks of one attention call; start from CLATTN_MASKS_INIT (no mask).
 *
 * Positions: query i of batch b sits at absolute key position p = query_offsets[b] + i when
 * query_offsets is given, else p = i + S − L under CLATTN_CAUSAL_BOTTOM_RIGHT, else p = i. The causal
 * masks show key j iff j ≤ p; windows and ALiBi (clattn_sdpa_desc) measure from p too. */
typedef struct clattn_masks {
    size_t struct_size; /* sizeof(clattn_masks), set by CLATTN_MASKS_INIT */
    clattn_causal causal;
    /* Key-padding: NULL, or `batch` lengths on the host; in batch b keys j ≥ key_lengths[b] are
     * masked. Each length must be ≤ S; 0 masks every key of that batch. */
    const size_t *key_lengths;
    /* Layout of the mask passed beside the descriptor (see clattn_mask_type: float entries are added
     * to the scores after soft-capping, with ALiBi; −inf allowed). */
    clattn_mask_layout additive;
    unsigned reserved; /* must be 0 */
    /* Since 0.3. NULL, or `batch` absolute positions of each batch's first query on the host (may be
     * negative: a query before every key sees none under a causal mask). With a causal mask of either
     * kind, key j is visible iff j ≤ query_offsets[b] + i — a KV cache whose batch b holds len[b]
     * valid keys passes len[b] − L (ONNX's nonpad_kv_seqlen, together with key_lengths = len). */
    const long long *query_offsets;
    /* Since 0.3. NULL, or a sliding window (left, right ≥ −1). */
    const clattn_window *window;
    /* Since 0.3. The mask's last dimension: 0 means S. A narrower mask (as ONNX allows) leaves the
     * keys from mask_kv_len on masked (−inf, False); wider than S is an error. */
    size_t mask_kv_len;
    /* Since 0.3. Float (added) or bool (bytes) entries; the mask is read in place by the kernels,
     * never expanded or converted on the host. */
    clattn_mask_type mask_type;
    unsigned mask_reserved; /* must be 0 */
    /* Since 0.19. Tree attention (speculative decoding's draft trees): NULL, or each query's parent among
     * the queries of its sequence — an index below its own, or −1 for a root (a child of the keys before
     * the tree) — in the order of the queries: query i of batch b at b·L + i (a ragged batch's at its
     * packed row, ragged.q_starts[b] + i). The tree's n tokens are the sequence's queries, their keys at
     * consecutive positions in the same order: query i at position p (as the offsets or a bottom-right
     * causal mask place it: the draft's rows appended last) finds token t's key at p − i + t. Of the n keys
     * p − i … p − i + n − 1 it sees only its ancestors' and its own; the keys before them (the cache) and
     * after are left to the other masks. Every path takes it (fused, decode, paged, ragged, staged, the
     * backward, the layer); device groups, partitions, ring attention and cascades refuse it. */
    const int *tree_parents;
} clattn_masks;

#define CLATTN_MASKS_INIT \
    { sizeof(clattn_masks), CLATTN_CAUSAL_NONE, NULL, CLATTN_MASK_NONE, 0, NULL, NULL, 0, CLATTN_MASK_FLOAT, 0, NULL }

/* The scale's "not given" value (what the INIT macros set): 1/√Dqk is used. Every finite value,
 * 0 included (uniform weights), is used as given; ±inf is CLATTN_ERROR_INVALID_VALUE. */
#define CLATTN_SCALE_DEFAULT NAN

/* What the `weights` output of clattn_sdpa and clattn_mha holds, when it is asked for: by default the
 * attention weights, or one of the earlier points of ONNX's qk_matmul_output_mode (since 0.3). Asking
 * for the weights selects the staged path, the one that materialises the (B, H, L, S) matrix;
 * without a weights output the mode has no effect. */
typedef enum clattn_weights_output {
    CLATTN_WEIGHTS_SOFTMAX = 0,    /* the attention weights, after the softmax (ONNX mode 3) */
    CLATTN_WEIGHTS_QK = 1,         /* Q·Kᵀ·scale of every key, masked or not (ONNX mode 0) */
    CLATTN_WEIGHTS_SOFTCAPPED = 2, /* the same after soft-capping (ONNX mode 1) */
    CLATTN_WEIGHTS_MASKED = 3      /* after ALiBi and the masks, what the softmax takes (ONNX mode 2) */
} clattn_weights_output;

/* The precision of the staged path's softmax (since 0.6.2; ONNX's softmax_precision). The scores it
 * takes — Q·Kᵀ·scale, soft-capped, with ALiBi and the masks — are float32 either way, as ONNX computes
 * them in the inputs' type before casting them to softmax_precision. */
typedef enum clattn_softmax_precision {
    CLATTN_SOFTMAX_FLOAT = 0, /* float32 (default): every path */
    /* double: the row maximum, the exponentials, their sum, the normalisation and the log-sum-exp in
     * double precision, each weight and log-sum-exp then rounded to float32 once (ONNX's Cast back to
     * the inputs' type); the weighted sum P·V accumulates in float32 over those weights. A device
     * without cl_khr_fp64 runs the same kernel in float-float arithmetic (pairs of floats, about 48
     * significant bits): its float32 results are double's, but one unit off where the exact value lies
     * within about 2^-44 of a rounding boundary (and subnormal weights 0 where the device flushes them).
     * Runs on the staged path only: AUTO chooses it, CLATTN_ALGORITHM_FUSED and _DECODE are
     * CLATTN_ERROR_INVALID_VALUE, as are clattn_sdpa_ragged, clattn_sdpa_paged and
     * clattn_group_sdpa_host (decode kernels and split-K merges, all float32). */
    CLATTN_SOFTMAX_DOUBLE = 1
} clattn_softmax_precision;

/* The arithmetic of a call (since 0.21; issue 41). CLATTN_ARITHMETIC_REPRODUCIBLE: the output and log-sum-exp
 * (and the backward pass's gradients) are a function of the inputs alone — the same bits on every conforming OpenCL
 * implementation (PoCL, Mesa's rusticl, oclgrind checked), under every tuning, algorithm and work-group size, and
 * for a row whatever else its batch holds (other sequences, other rows of a prefill, a decode of the same row, a
 * device group's other batches). Since 0.22 the fused kernel's exact build: each row takes its keys 16 a step from
 * key 0, every sum in one order, exp, log, tanh and 1/x from exactly rounded operations, contraction off,
 * subnormals kept from the hardware (docs/reproducible.md). Calls whose K/V are float32, float16, bfloat16, int8 or
 * (since 0.23) a block or FP8 format — not KIVI's token formats — dense, ragged, paged, device groups (by batches; since 0.23 a batch too small to divide by query rows, not
 * keys), clattn_sdpa_backward, the layer and its backward pass (since 0.23: clattn's GEMM in an exact build, never
 * CLBlast), cascades of whole-block prefixes (since 0.23: the plain paged call's bits), ring attention over MPI
 * (since 0.24: each rank's rows one device's bits; clattn_mpi.h), the weights output in all four modes (since
 * 0.24: each pair's score as the fused kernel forms it; the softmax's weights exp(score − lse)); not yet the
 * double softmax or sparse attention (those refuse it). CLATTN_REPRODUCIBLE=1, read when a context is
 * created, makes it every call's. */
typedef enum clattn_arithmetic {
    CLATTN_ARITHMETIC_DEFAULT = 0,     /* the fastest kernels for the device (bits may differ across them) */
    CLATTN_ARITHMETIC_REPRODUCIBLE = 1 /* the same bits everywhere (above) */
} clattn_arithmetic;

/* Shape and options of scaled dot-product attention; start from CLATTN_SDPA_DESC_INIT. */
/* ---- Programmable attention (since 0.9): score and mask functions in OpenCL C ------------------------
 * A mods object holds OpenCL C source that defines one or both of
 *     float score_mod(float score, int b, int h, long q, long k, AUX...);
 *     bool  mask_mod(int b, int h, long q, long k, AUX...);
 * (FlexAttention's semantics): b the batch, h the query head, q the query's absolute position (its
 * offset plus its row, as causal masks, windows and ALiBi measure it: see clattn_masks), k the key's
 * position, and AUX the mod's auxiliary tensors, one `__global const T *NAME` argument each, in the
 * order given. A descriptor's `mods` applies them to every score of the call, in this order:
 *     s = Q·Kᵀ·scale → score_mod(s, …) → × logit_scale[h] → soft-capping → + ALiBi + additive mask;
 *     a key hidden by a built-in mask (causal, window, key length) or by mask_mod (false) is −inf
 * — so score_mod sees the scaled score before the built-in terms, and mask_mod hides a pair as a built-in
 * mask does (a row with every key hidden gets a zero output and an lse of −inf). The functions run only
 * for keys the built-in masks leave visible. For the backward pass (clattn_sdpa_backward) a source with a
 * score_mod also defines its derivative, float score_mod_grad(float score, int b, int h, long q, long k,
 * AUX...) = d score_mod / d score (since 0.10; alone it is CLATTN_ERROR_INVALID_VALUE). A mods object
 * belongs to the context it was made on and may
 * be used by any number of calls (its source is compiled once per kernel shape and cached with the
 * other kernels, on disk too); it is read, never changed, by calls. */
typedef struct clattn_mods_s clattn_mods;

/* The element type of an auxiliary tensor (its T in the functions' parameter list). */
typedef enum clattn_aux_type {
    CLATTN_AUX_FLOAT = 0, /* float */
    CLATTN_AUX_HALF,      /* half: read it with vload_half(i, NAME) (OpenCL C has no half arithmetic) */
    CLATTN_AUX_INT,       /* int */
    CLATTN_AUX_UINT,      /* uint */
    CLATTN_AUX_LONG,      /* long */
    CLATTN_AUX_ULONG,     /* ulong */
    CLATTN_AUX_SHORT,     /* short */
    CLATTN_AUX_USHORT,    /* ushort */
    CLATTN_AUX_CHAR,      /* char */
    CLATTN_AUX_UCHAR      /* uchar */
} clattn_aux_type;

/* Which index the functions read an auxiliary tensor at, so that each call checks its length against
 * the call's sizes and positions (a tensor too short is CLATTN_ERROR_BUFFER_TOO_SMALL, naming it). */
typedef enum clattn_aux_index {
    CLATTN_AUX_BY_LENGTH = 0, /* elements [0, length): the caller's bound (a bucket table, say) */
    CLATTN_AUX_BY_QUERY,      /* NAME[q] for every query position q of the call */
    CLATTN_AUX_BY_KEY,        /* NAME[k] for every key position k < S */
    CLATTN_AUX_BY_POSITION,   /* both: NAME[q] and NAME[k] (a document id per position) */
    CLATTN_AUX_BY_HEAD,       /* NAME[h], h < H */
    CLATTN_AUX_BY_BATCH       /* NAME[b], b < B */
} clattn_aux_index;

typedef struct clattn_mod_aux {
    const char *name;      /* its parameter name in the functions: a C identifier */
    clattn_aux_type type;
    cl_mem buffer;         /* on the mods' context; retained by the mods object until clattn_mods_free */
    clattn_aux_index index;
    size_t length;         /* CLATTN_AUX_BY_LENGTH: the elements the functions may read (≥ 1); else 0 */
} clattn_mod_aux;

#define CLATTN_MODS_MAX_AUX 4

typedef struct clattn_mods_desc {
    size_t struct_size;          /* sizeof(clattn_mods_desc), set by CLATTN_MODS_DESC_INIT */
    const char *source;          /* OpenCL C defining score_mod, mask_mod or both (and helpers of its own) */
    const char *const *defines;  /* "NAME=VALUE" or "NAME": compile-time constants (#define NAME VALUE) */
    size_t define_count;
    const clattn_mod_aux *aux;   /* the auxiliary tensors, in the functions' argument order */
    size_t aux_count;            /* at most CLATTN_MODS_MAX_AUX */
} clattn_mods_desc;

#define CLATTN_MODS_DESC_INIT { sizeof(clattn_mods_desc), NULL, NULL, 0, NULL, 0 }

/* Check and compile the functions on ctx's device (a probe kernel calls each with the declared
 * auxiliary types, compiled with -Werror). A source that does not compile, or whose functions do not
 * take the declared arguments, is CLATTN_ERROR_BUILD_FAILED with the compiler's log in
 * clattn_build_log(ctx), its line numbers those of `source` (file "mods"); a source defining neither
 * function, a malformed define or aux entry, a buffer of another context, is CLATTN_ERROR_INVALID_VALUE
 * naming it. *out is NULL on failure. */
CLATTN_API clattn_status clattn_mods_create(clattn_context *ctx, const clattn_mods_desc *desc, clattn_mods **out);

/* Since 0.13. What names the mods' functions: 16 hexadecimal digits, the first 64 bits of the SHA-256 of
 * their source, defines and auxiliary declarations (names and types) — equal for mods made from
 * equal descriptions on any context and in any process (ring attention's ranks compare them). NULL for
 * NULL. The text lives as long as the mods. */
CLATTN_API const char *clattn_mods_id(const clattn_mods *mods);

/* NULL is a no-op. Calls enqueued with the mods must have completed (clattn_finish) or be on the
 * context's queue: the auxiliary buffers are released here, with the copies device groups made on
 * their other members (free the mods before or after the group: the copies hold no group object). */
CLATTN_API void clattn_mods_free(clattn_mods *mods);

/* ---- Block masks (since 0.9): which blocks of (query positions × keys) a mask leaves empty ---------
 * A block mask divides query positions 0..q_len-1 and keys 0..kv_len-1 into blocks of block_q × block_k
 * and marks each, per batch and head (or once for all), EMPTY (no pair visible), FULL (every pair) or
 * PARTIAL. Given to calls through desc.block_mask, the kernels skip the key tiles whose blocks are
 * empty for all their rows and do not call mask_mod in full blocks: built once (say per sequence
 * layout), reused by every call and layer over those positions. Made from a mods object's mask_mod
 * (evaluated on the device over the whole grid, at b < batch and h < heads), or from a host block-sparse
 * layout without any mask_mod (the blocks it lists are full, every other block empty). */
typedef struct clattn_block_mask_s clattn_block_mask;

typedef struct clattn_block_mask_desc {
    size_t struct_size;       /* sizeof(clattn_block_mask_desc), set by CLATTN_BLOCK_MASK_DESC_INIT */
    size_t batch, heads;      /* the calls' B and H, or 0 (or 1): the same blocks for every batch (head) */
    size_t q_len, kv_len;     /* the query positions and keys covered (the calls' must lie inside) */
    size_t block_q, block_k;  /* positions and keys per block; 0: 128 */
    const clattn_mods *mods;  /* its mask_mod made into blocks; calls must then carry these same mods */
    /* Or a host layout (mods NULL; batch and heads 0): query block r sees key blocks layout_blocks[
     * layout_starts[r] … layout_starts[r + 1]), for r < ceil(q_len / block_q); layout_starts has one
     * entry more. Calls with a layout-made mask must carry no mask_mod. */
    const size_t *layout_starts, *layout_blocks;
} clattn_block_mask_desc;

#define CLATTN_BLOCK_MASK_DESC_INIT { sizeof(clattn_block_mask_desc), 0, 0, 0, 0, 0, 0, NULL, NULL, NULL }

/* Make a block mask (from desc->mods' mask_mod, evaluated on the device now, or from the layout): a
 * mods object without mask_mod, both or neither source, a layout with batch or heads, a block index
 * past the key blocks are CLATTN_ERROR_INVALID_VALUE; an auxiliary tensor too short for the grid
 * CLATTN_ERROR_BUFFER_TOO_SMALL. *out is NULL on failure. */
CLATTN_API clattn_status clattn_block_mask_create(clattn_context *ctx, const clattn_block_mask_desc *desc,
                                                  clattn_block_mask **out);

/* How many blocks are empty, partial and full (counts[0], [1], [2]), over every batch and head it holds. */
CLATTN_API clattn_status clattn_block_mask_counts(const clattn_block_mask *mask, size_t counts[3]);

/* NULL is a no-op. Calls enqueued with the mask must have completed or be on the context's queue. */
CLATTN_API void clattn_block_mask_free(clattn_block_mask *mask);

typedef struct clattn_sdpa_desc {
    size_t struct_size; /* sizeof(clattn_sdpa_desc), set by CLATTN_SDPA_DESC_INIT */
    size_t batch;    /* B */
    size_t heads;    /* H */
    size_t q_len;    /* L */
    size_t kv_len;   /* S */
    size_t qk_dim;   /* Dqk: head size of Q and K */
    size_t v_dim;    /* Dv: head size of V and O; 0 means "same as qk_dim" */
    float scale;     /* multiplies Q·Kᵀ; CLATTN_SCALE_DEFAULT means 1/√Dqk */
    const clattn_masks *masks;  /* NULL: no masks */
    clattn_algorithm algorithm; /* default CLATTN_ALGORITHM_AUTO */
    /* Logit soft-capping (Gemma 2, ONNX's softcap): when > 0, every score s = Q·Kᵀ·scale becomes
     * softcap·tanh(s / softcap) before ALiBi and the masks are added (a masked key stays masked).
     * 0: off; otherwise at least FLT_MIN (a subnormal cap would divide by a flushed zero). Since 0.3;
     * this was `reserved` (which had to be 0) before. */
    float softcap;
    /* Since 0.3. Grouped-query / multi-query attention: K and V carry kv_heads heads, Q and O `heads`,
     * heads % kv_heads == 0, and query head h reads K/V head h / (heads / kv_heads) (ONNX's and
     * PyTorch's enable_gqa order). 0: kv_heads = heads. */
    size_t kv_heads;
    /* Since 0.3. NULL, or `heads` attention-sink logits on the host (gpt-oss): one extra logit per query
     * head that joins every row's softmax denominator without a value. Weights then sum to less than
     * 1, and the log-sum-exp includes it. */
    const float *sinks;
    /* Since 0.3. NULL, or `heads` ALiBi slopes on the host: slope[h]·(j − p) is added to the score of
     * key j for the query at position p (after soft-capping, with the masks), in float: distances
     * |j − p| must stay below 2^24 and |slope·(j − p)| below 1e30 over the call's positions, else
     * CLATTN_ERROR_INVALID_VALUE. */
    const float *alibi_slopes;
    /* Since 0.3. What the weights output holds (see clattn_weights_output). */
    clattn_weights_output weights_output;
    clattn_arithmetic arithmetic; /* since 0.21 (was weights_reserved, which had to be 0): see clattn_arithmetic */
    /* Since 0.5. Storage types of Q, K, V and the output (and of whatever plays their part: the new rows
     * of an append are in q_dtype, a cache in k_dtype and v_dtype, merged parts in out_dtype). The
     * weights, log-sum-exps, masks and scales stay float32. CLATTN_INT8 is for K and V only. */
    clattn_dtype q_dtype, k_dtype, v_dtype, out_dtype;
    /* Since 0.5. With an int8 K (V): its scales, float32, one per row, in K's (V's) shape without its last
     * dimension — (B, kv_heads, S) for a dense K, (blocks, kv_heads, block_size) for a paged pool,
     * (rows, kv_heads) or (kv_heads, rows) for a ragged batch. NULL otherwise. */
    cl_mem k_scales, v_scales;
    /* Since 0.6.2. The softmax's precision (see clattn_softmax_precision). */
    clattn_softmax_precision softmax_precision;
    unsigned softmax_reserved; /* must be 0 */
    /* Since 0.7. NULL, or `heads` finite logit scales on the host (a temperature per head): the score
     * s = Q·Kᵀ·scale of head h becomes s·logit_scale[h] before soft-capping, ALiBi and the masks, in
     * float. CLATTN_WEIGHTS_QK outputs s without it; CLATTN_WEIGHTS_SOFTCAPPED with it. */
    const float *logit_scale;
    /* Since 0.9. NULL, or the score and mask functions of clattn_mods_create (see there for the order):
     * every path (fused, staged — its weights and score outputs too —, decode, paged, ragged), every
     * storage type, device groups (clattn_group_sdpa_host) and ring attention apply them. */
    const clattn_mods *mods;
    /* Since 0.9. NULL, or a block mask over the call's positions (see clattn_block_mask_create). */
    const clattn_block_mask *block_mask;
    /* Since 0.10. Where this call sits in a larger one whose part it is, for the mods and the block mask
     * only: they see batch b + origin_batch and positions (queries' and keys') + origin_position, so a
     * part computes the pairs of the whole call it stands for. clattn_partition_part and device groups
     * set them for their parts; 0 for a whole call. Each at most 2^61. */
    size_t origin_batch;
    long long origin_position;
} clattn_sdpa_desc;

#define CLATTN_SDPA_DESC_INIT                                                                               \
    { sizeof(clattn_sdpa_desc), 0, 0, 0, 0, 0, 0, CLATTN_SCALE_DEFAULT, NULL, CLATTN_ALGORITHM_AUTO, 0.0f, 0, NULL, NULL, \
      CLATTN_WEIGHTS_SOFTMAX, CLATTN_ARITHMETIC_DEFAULT, CLATTN_FLOAT32, CLATTN_FLOAT32, CLATTN_FLOAT32, CLATTN_FLOAT32, NULL, NULL,          \
      CLATTN_SOFTMAX_FLOAT, 0, NULL, NULL, NULL, 0, 0 }

/* O = softmax(softcap(Q·Kᵀ·scale·logit_scale) + ALiBi + masks)·V, in that order (ONNX's Attention: scaling,
 * soft-capping, then every bias and mask added, then the softmax), with sinks in the denominator.
 * Q and O are (B,H,L,·), K and V (B,kv_heads,S,·).
 * mask: the additive mask buffer when desc->masks->additive is not NONE, else NULL.
 * weights (B,H,L,S) and lse (B,H,L) are optional outputs (NULL to skip).
 * v NULL (since 0.20): MLA's latent form (DeepSeek-V2/V3 multi-head latent attention, absorbed) — each value
 * row is the first Dv columns of its key row, so one cache (B,kv_heads,S,Dqk) holds both and is read once:
 * Dv < Dqk (with equal head sizes v NULL stays CLATTN_ERROR_NULL_ARGUMENT: a V forgotten), v_dtype = k_dtype
 * (float32, float16, bfloat16, or int8 with v_scales the same buffer as k_scales).
 * MLA's decode is Dqk 576 (512 latent + 64 rotary), Dv 512, kv_heads 1, scale 1/√192 (docs/kv-caches.md). */
CLATTN_API clattn_status clattn_sdpa(clattn_context *ctx, const clattn_sdpa_desc *desc, cl_mem q,
                                     cl_mem k, cl_mem v, cl_mem mask, cl_mem out, cl_mem weights,
                                     cl_mem lse);

/* Merge partial attention results computed over disjoint sets of keys into the exact result over
 * their union (since 0.3): parts[p] is an output outs[p] (B,H,L,Dv) with its log-sum-exp lses[p]
 * (B,H,L), as clattn_sdpa returns them for one slice of the keys (a slice that saw no key has lse −inf
 * and adds nothing, whatever its output holds). out and lse receive
 *     lse = log Σ_p exp(lses[p]) (+ exp(sink)),   out = Σ_p exp(lses[p] − lse)·outs[p].
 * The building block for split-K decoding (slices of one cache on several work-groups), several
 * devices or machines (each holding part of the keys), and cascade attention (a shared prefix computed
 * once, merged with each sequence's own suffix). desc gives batch, heads, q_len and v_dim (0: qk_dim);
 * desc->sinks, if given, are counted once here (compute the parts without them); the other fields are
 * not used. out and lse may be the buffers of part 0 (in place), never those of a later part. */
CLATTN_API clattn_status clattn_merge(clattn_context *ctx, const clattn_sdpa_desc *desc, size_t parts,
                                      const cl_mem *outs, const cl_mem *lses, cl_mem out, cl_mem lse);

/* One call kept for cutting into parts (since 0.7; see below). */
typedef struct clattn_partition_s clattn_partition;

/* A call cut into parts: the partition primitive that device groups and ring attention
 * (clattn_mpi.h) schedule. Part (q0, q_rows, k0, k_rows) is the sub-call that attends exactly the pairs of
 * query rows [q0, q0 + q_rows) and keys [k0, k0 + k_rows) of the call: its Q, O and lse are the block's
 * rows of every (batch, head), its K and V the run's rows, and its descriptor carries the call's options
 * with q_len = q_rows, kv_len = k_rows, the positions moved to the run (query_offsets[b] = the block's
 * first absolute position − k0, so that causal masks, windows and ALiBi distances are the call's), the key
 * lengths clipped to the run, no sinks, and (since 0.10) origin_position = the call's + k0 (mods and block
 * masks see the call's positions). With an additive mask the part takes its sub-view: rows
 * [q0, q0 + q_rows) of each (L, S) matrix (a (B,1,1,S) mask: its rows whole) and columns
 * [k0, k0 + masks->mask_kv_len) of the part's descriptor, in the call's layout. Parts over disjoint keys
 * merge with clattn_merge (the call's sinks given there, once) into the call's rows exactly.
 *
 * clattn_partition_create checks the whole call as clattn_sdpa does (mask_given: an additive mask comes
 * with it; no weights output) and keeps it: desc and the host arrays it points to must stay unchanged
 * until clattn_partition_free (which accepts NULL). clattn_partition_part sets *part to the part's
 * descriptor, valid until the next clattn_partition_part or free of this partition — or to NULL when the
 * masks (causal, window, key lengths, a narrower additive mask) hide every key of the run from every query
 * of the block in every batch: that part is the empty row (out 0, lse −inf) and may be skipped. Rows or
 * keys outside the call are CLATTN_ERROR_INVALID_VALUE, none CLATTN_ERROR_ZERO_SIZE. */
CLATTN_API clattn_status clattn_partition_create(clattn_context *ctx, const clattn_sdpa_desc *desc, int mask_given,
                                                 clattn_partition **partition);
CLATTN_API clattn_status clattn_partition_part(clattn_partition *partition, size_t q0, size_t q_rows, size_t k0,
                                               size_t k_rows, const clattn_sdpa_desc **part);
CLATTN_API void clattn_partition_free(clattn_partition *partition);

/* A KV cache the application owns (since 0.3): K (B, kv_heads, capacity, Dqk) and V (B, kv_heads,
 * capacity, Dv) buffers, described by desc (batch, heads and kv_heads, kv_len = the capacity, qk_dim,
 * v_dim; q_len is not used), and per-sequence lengths on the host. clattn_kv_append writes new_len new
 * rows per sequence — k_new (B, kv_heads, new_len, Dqk), v_new (B, kv_heads, new_len, Dv) — at rows
 * lengths[b] … lengths[b] + new_len − 1 of each K/V head, and touches nothing else of the cache. A
 * length plus new_len beyond the capacity is CLATTN_ERROR_INVALID_VALUE before anything is written.
 * The caller keeps the lengths (lengths[b] += new_len afterwards) and attends over the valid prefix with
 * clattn_sdpa on the whole cache: masks.key_lengths = the new lengths, masks.query_offsets = the old
 * ones, a causal mask (each new query sees the cache and the new rows up to itself). v_new and v_cache
 * both NULL (since 0.20): MLA's latent cache, whose new rows are k_new's alone (see clattn_sdpa). */
CLATTN_API clattn_status clattn_kv_append(clattn_context *ctx, const clattn_sdpa_desc *desc, const size_t *lengths,
                                          size_t new_len, cl_mem k_new, cl_mem v_new, cl_mem k_cache,
                                          cl_mem v_cache);

/* How a ragged batch's packed rows hold their heads. */
typedef enum clattn_ragged_layout {
    CLATTN_RAGGED_ROWS_HEADS = 0, /* (rows, heads, D): FlashAttention's varlen layout, as a layer's
                                   * projections produce it */
    CLATTN_RAGGED_HEADS_ROWS = 1  /* (heads, rows, D): each head's rows together, as a decode cache is
                                   * best kept (a head's keys are then read as one stream) */
} clattn_ragged_layout;

/* Ragged ("varlen") batches (since 0.3): B sequences of different query and key lengths in one call,
 * packed row after row as FlashAttention's varlen interface takes them. Sequence b's queries are rows
 * q_starts[b] … q_starts[b+1]−1 of q (rows, H, Dqk) and out (rows, H, Dv), its keys rows k_starts[b] …
 * k_starts[b+1]−1 of k (rows, kv_heads, Dqk) and v (rows, kv_heads, Dv); lse is (rows, H). With
 * CLATTN_RAGGED_HEADS_ROWS the heads come first instead: q (H, rows, Dqk), k (kv_heads, rows, Dqk), …;
 * lse stays (rows, H). Both start arrays hold B+1 non-decreasing row indices on the host (a sequence
 * may have no queries or no keys). */
typedef struct clattn_ragged {
    size_t struct_size;     /* sizeof(clattn_ragged), set by CLATTN_RAGGED_INIT */
    const size_t *q_starts; /* B+1 */
    const size_t *k_starts; /* B+1 */
    clattn_ragged_layout layout;
    unsigned reserved; /* must be 0 */
} clattn_ragged;

#define CLATTN_RAGGED_INIT { sizeof(clattn_ragged), NULL, NULL, CLATTN_RAGGED_ROWS_HEADS, 0 }

/* Attention over a ragged batch (since 0.3), at a cost in proportion to the rows and keys present, not to
 * B × the longest. desc gives batch (B), the heads, head sizes, scale and variants; q_len and kv_len are
 * 0 or at least the longest sequence's queries and keys (they set the additive mask's layout, which is
 * read as for clattn_sdpa with those sizes). In the masks, key_lengths must be NULL (the starts give
 * them); CLATTN_CAUSAL_BOTTOM_RIGHT aligns each sequence's last query with its last key (query i of
 * sequence b sits at i + S_b − L_b), TOP_LEFT puts it at i, and query_offsets override both. Runs the
 * decode kernels (split over the keys for few rows) or, where the longest sequence has more than 8
 * query rows (since 0.7; desc.algorithm AUTO or FUSED), the fused kernel over the packed rows; DECODE
 * forces the decode kernels, STAGED is refused. Never returns the weights. */
CLATTN_API clattn_status clattn_sdpa_ragged(clattn_context *ctx, const clattn_sdpa_desc *desc,
                                            const clattn_ragged *ragged, cl_mem q, cl_mem k, cl_mem v, cl_mem mask,
                                            cl_mem out, cl_mem lse);

/* A paged KV cache (since 0.3), laid out as serving engines such as vLLM keep one: K and V rows in
 * blocks of block_size rows of a shared pool, and per sequence a row of a block table listing its
 * blocks in order (row j of sequence b is row j % block_size of block block_table[b][j / block_size]). */
typedef struct clattn_paged_cache {
    size_t struct_size; /* sizeof(clattn_paged_cache), set by CLATTN_PAGED_CACHE_INIT */
    cl_mem k_pool;      /* (blocks, kv_heads, block_size, Dqk) floats */
    cl_mem v_pool;      /* (blocks, kv_heads, block_size, Dv) floats; NULL (since 0.20): MLA's latent form, the
                         * values the first Dv columns of k_pool's rows (see clattn_sdpa) */
    size_t blocks;      /* blocks in the pool */
    size_t block_size;  /* rows per block: a power of two from 8 to 256 */
    cl_mem block_table; /* (B, max_blocks) cl_int block ids, on the device */
    size_t max_blocks;  /* the table's columns */
} clattn_paged_cache;

#define CLATTN_PAGED_CACHE_INIT { sizeof(clattn_paged_cache), NULL, NULL, 0, 0, NULL, 0 }

/* Attention over a paged cache (since 0.3): q (B,H,L,Dqk) against the lengths[b] valid rows of each
 * sequence (lengths on the host, each at most max_blocks·block_size), out (B,H,L,Dv), lse (B,H,L) or
 * NULL. desc.kv_len is 0 or max_blocks·block_size (the additive mask's last dimension); masks'
 * key_lengths must be NULL; CLATTN_CAUSAL_BOTTOM_RIGHT aligns each sequence's last query with its last
 * key (the usual decode and chunked-prefill setting). The block ids a call can reach are checked on
 * the device before anything runs: an id outside the pool is CLATTN_ERROR_INVALID_VALUE naming the table
 * entry, and nothing is written. Runs the decode kernels for up to 8 query rows and, since 0.7, the fused
 * kernel through the table for more (a chunked prefill; desc.algorithm AUTO or FUSED; DECODE forces the
 * decode kernels for any L, STAGED is refused). */
CLATTN_API clattn_status clattn_sdpa_paged(clattn_context *ctx, const clattn_sdpa_desc *desc,
                                           const clattn_paged_cache *cache, const size_t *lengths, cl_mem q,
                                           cl_mem mask, cl_mem out, cl_mem lse);

/* A mixed batch over a paged cache (since 0.19): clattn_sdpa_paged with each sequence's own number of query
 * rows — prefill chunks, decode rows and draft trees of different requests in one call. q_starts (B+1
 * non-decreasing row indices, on the host) put sequence b's queries at rows q_starts[b] … q_starts[b+1]−1 of
 * q (rows, H, Dqk) and out (rows, H, Dv) (FlashAttention's varlen layout); lse is (rows, H) or NULL. desc.q_len
 * is 0 or at least the longest sequence's rows (an additive mask's rows, read as clattn_sdpa_ragged reads
 * it). CLATTN_CAUSAL_BOTTOM_RIGHT puts each sequence's last query at its last key (lengths[b], which count
 * its new rows, appended first); masks.tree_parents, one per packed row, makes a sequence's rows a draft tree
 * (a chain of parents is a causal chunk, a lone −1 a decode row). Runs the decode kernels where the longest
 * sequence has up to 8 rows, else the fused kernel through the table, as clattn_sdpa_paged does. */
CLATTN_API clattn_status clattn_sdpa_paged_ragged(clattn_context *ctx, const clattn_sdpa_desc *desc,
                                                  const clattn_paged_cache *cache, const size_t *lengths,
                                                  const size_t *q_starts, cl_mem q, cl_mem mask, cl_mem out,
                                                  cl_mem lse);

/* The top_k highest-scoring keys of each query row (since 0.20): DeepSeek's sparse attention chooses its keys by
 * an indexer's scores, and this gives clattn_sdpa_sparse that choice. scores (B, L, S) float32 on the device;
 * lengths NULL, or B lengths on the host (each ≤ S: sequence b's keys from lengths[b] on are never chosen);
 * indices (B, L, top_k) cl_int: each row's chosen positions in ascending order, then −1 where a row has fewer
 * than top_k keys to choose from. −inf and NaN scores are never chosen; of equal scores at the threshold the
 * lower positions are — one exact selection, the same on every device. */
CLATTN_API clattn_status clattn_topk(clattn_context *ctx, size_t batch, size_t q_len, size_t kv_len, size_t top_k,
                                     cl_mem scores, const size_t *lengths, cl_mem indices);

/* Top-k sparse attention (since 0.19; DeepSeek's sparse attention, NSA's token selection): query i of batch b
 * (every head of it) attends only to the top_k keys its indices select — indices (B, L, top_k) cl_int on the
 * device, positions of the sequence's keys in any order; −1, another negative value or a position at or past
 * the sequence's key count selects nothing (a row with fewer keys pads with −1); a position given twice counts
 * twice. K and V: dense (B, kv_heads, S, ·), desc.kv_len = S, cache NULL; or a paged pool (cache given, k and
 * v NULL, desc.kv_len 0 or the table's reach). lengths (host, B): the keys each sequence holds (NULL: S;
 * required with a cache). q (B,H,L,Dqk), out (B,H,L,Dv), lse (B,H,L) or NULL; q, k, v and out in float32,
 * float16 or bfloat16. Options: scale, softcap, sinks, kv_heads (at most 32 query heads a K/V head, and
 * Dqk × that at most 4096); masks, ALiBi, logit scales, mods, block masks, weights and the double softmax
 * are refused (the indices are the mask). A call costs the selected keys' reads, not S's. clattn_topk chooses
 * the indices from an indexer's scores. */
CLATTN_API clattn_status clattn_sdpa_sparse(clattn_context *ctx, const clattn_sdpa_desc *desc, size_t top_k,
                                            cl_mem indices, cl_mem q, cl_mem k, cl_mem v,
                                            const clattn_paged_cache *cache, const size_t *lengths, cl_mem out,
                                            cl_mem lse);

/* The gradients of clattn_sdpa_sparse over a dense K/V (since 0.21): for the loss's gradient dout (B,H,L,Dv), dq
 * (B,H,L,Dqk), dk (B,kv_heads,S,Dqk) and dv (B,kv_heads,S,Dv) — a key's summed over every query row (and every
 * head of its group) that selected it, a row that selected a key twice counting twice; keys nobody selected get
 * 0. desc, top_k, indices, lengths, q, k and v are the forward's, out and lse its results (lse is required).
 * Every weight is recomputed from Q, K and lse (FlashAttention-2's way, on the selected pairs only: the cost is
 * B·H·L·top_k pairs, not L·S, and memory O(B·L·top_k) for each key's list of the rows that selected it, built
 * from the indices read back to the host — the call blocks on that read). Each gradient row is written by one
 * work-item in a fixed order: the same inputs give the same bits. Soft-capping is differentiated; with
 * desc.sinks, dsinks (heads floats on the host; NULL: not wanted) receives each sink's gradient. Storage types
 * as the forward's (q, k, v and their gradients in desc's q/k/v_dtype, out and dout in out_dtype); head sizes up
 * to 512. No gradient may share memory with an input or another gradient. */
CLATTN_API clattn_status clattn_sdpa_sparse_backward(clattn_context *ctx, const clattn_sdpa_desc *desc, size_t top_k,
                                                     cl_mem indices, const size_t *lengths, cl_mem q, cl_mem k,
                                                     cl_mem v, cl_mem out, cl_mem lse, cl_mem dout, cl_mem dq,
                                                     cl_mem dk, cl_mem dv, float *dsinks);

/* One level of a cascade (since 0.18): prefixes that groups of sequences share, held in the paged pool.
 * Sequence b reads prefix group_of[b] at this level: lengths[g] rows in the blocks blocks[g · max_blocks …]
 * (host arrays: a server keeps its prefix tree there). */
typedef struct clattn_cascade_level {
    size_t groups;           /* the level's prefixes */
    const size_t *group_of;  /* batch entries, each < groups */
    const cl_int *blocks;    /* groups × max_blocks block ids of the pool, each prefix's blocks in order */
    size_t max_blocks;
    const size_t *lengths;   /* groups: each prefix's rows (≤ max_blocks · block_size; 0: none at this level) */
} clattn_cascade_level;

/* Shared-prefix (cascade) attention over a paged cache (since 0.18): sequence b's keys are its prefix at
 * each of the n_levels levels (at most 8, in order: a prefix shared by all, then sub-prefixes shared by
 * groups…) followed by its own lengths[b] rows (cache's table row b), and q (B,H,L,Dqk) holds its last L
 * queries. Each group's prefix is read once for all of its sequences — their queries gathered into one
 * problem of n·L rows — and the parts are merged by their log-sum-exps; the result equals clattn_sdpa_paged
 * over the concatenated keys. out (B,H,L,Dv), lse (B,H,L) or NULL; q and out float32, the pools in any
 * type clattn_sdpa_paged reads. Options: scale, softcap, logit_scale, sinks, kv_heads, and a
 * CLATTN_CAUSAL_BOTTOM_RIGHT mask (within each sequence's own rows: every query sees all its prefixes);
 * key lengths, offsets, windows, additive masks, ALiBi, mods, block masks and weights are refused. In reproducible
 * arithmetic (since 0.23) the call is clattn_sdpa_paged over a table of each sequence's prefixes' blocks and then its
 * own — the bits of the plain call over the concatenated keys, the sharing given up — which needs every prefix a
 * whole number of blocks (else CLATTN_ERROR_INVALID_VALUE, naming it). */
CLATTN_API clattn_status clattn_sdpa_cascade(clattn_context *ctx, const clattn_sdpa_desc *desc,
                                             const clattn_paged_cache *cache, const clattn_cascade_level *levels,
                                             size_t n_levels, const size_t *lengths, cl_mem q, cl_mem out,
                                             cl_mem lse);

/* Append new_len rows per sequence to a paged cache (since 0.3): k_new (B, kv_heads, new_len, Dqk) and
 * v_new (…, Dv) go to rows lengths[b] … lengths[b] + new_len − 1 of sequence b, through its block table
 * (the application allocates the blocks and fills the table first). desc gives batch, the heads and head
 * sizes. A length that would pass max_blocks·block_size, or a reachable block id outside the pool, is
 * refused before anything is written. The caller keeps the lengths (lengths[b] += new_len after). A cache
 * without v_pool (MLA's latent form, since 0.20) takes its new rows in k_new alone: v_new NULL. */
CLATTN_API clattn_status clattn_kv_append_paged(clattn_context *ctx, const clattn_sdpa_desc *desc,
                                                const clattn_paged_cache *cache, const size_t *lengths,
                                                size_t new_len, cl_mem k_new, cl_mem v_new);

/* ONNX Attention's past and present K/V (since 0.3), in one call: the present K/V are the past ones with
 * the new rows appended along the sequence,
 *     present_k = concat(past_k, k),  present_v = concat(past_v, v)   (per batch and K/V head),
 * and attention runs over the present. past_k (B, kv_heads, past_len, Dqk) and past_v (…, Dv) hold
 * past_len rows (0: no past, past_k and past_v may be NULL); k and v hold the desc->kv_len new rows;
 * present_k and present_v receive past_len + kv_len rows and must be buffers of their own (not the
 * past, the new rows or each other). Everything else is as in clattn_sdpa over kv_len' = past_len +
 * kv_len keys: the masks, the mask's last dimension, key lengths and offsets refer to the present
 * (ONNX pads a shorter mask with −inf: masks.mask_kv_len). Nothing is written when a check fails. */
CLATTN_API clattn_status clattn_sdpa_with_past(clattn_context *ctx, const clattn_sdpa_desc *desc, size_t past_len,
                                               cl_mem past_k, cl_mem past_v, cl_mem q, cl_mem k, cl_mem v,
                                               cl_mem mask, cl_mem present_k, cl_mem present_v, cl_mem out,
                                               cl_mem weights, cl_mem lse);

/* Host-memory variant of clattn_sdpa_with_past: same shapes, host pointers, blocking; present_k and
 * present_v may be NULL when the caller does not want them back. */
CLATTN_API clattn_status clattn_sdpa_with_past_host(clattn_context *ctx, const clattn_sdpa_desc *desc,
                                                    size_t past_len, const void *past_k, const void *past_v,
                                                    const void *q, const void *k, const void *v,
                                                    const void *mask, void *present_k, void *present_v,
                                                    void *out, float *weights, float *lse);

/* Host-memory variant of clattn_sdpa: same shapes, host pointers, blocking. The tensors are in the
 * descriptor's storage types (float arrays by default; since 0.5 the pointers are void * so that half
 * and bfloat16 arrays pass as uint16_t). Since 0.15 K and V may be in any format of clattn_dtype whose
 * bytes hold everything (float16, bfloat16, the block formats q8_0 … u4_g128 as their raw blocks, FP8
 * without scales); int8 K/V and FP8 with scales are for the cl_mem calls only (their row scales are a
 * device buffer): CLATTN_ERROR_INVALID_VALUE here. The other *_host variants take no quantised K/V. */
CLATTN_API clattn_status clattn_sdpa_host(clattn_context *ctx, const clattn_sdpa_desc *desc,
                                          const void *q, const void *k, const void *v,
                                          const void *mask, void *out, float *weights, float *lse);

/* The backward pass (since 0.10; issue 27's first steps): the gradients of O = clattn_sdpa(Q, K, V) for
 * the loss's gradient dout (B,H,L,Dv) — dq (B,H,L,Dqk), dk (B,kv_heads,S,Dqk) and dv (B,kv_heads,S,Dv), a
 * K/V head's summed over the query heads that read it — FlashAttention-2's way: every weight recomputed
 * from Q, K and the forward's log-sum-exp `lse` (B,H,L) (no L×S matrix; memory O((L + S)·D)),
 * D_i = dout_i·out_i first, then dK/dV per key row and dQ per query row, each written by one work-item
 * in a fixed order (the same inputs give the same bits). out and lse are the forward's, with the same
 * desc and mask. Every mask, window, key length, ALiBi slope and mask_mod acts as in the forward (no
 * gradient of its own); soft-capping, logit scales and a score_mod (through its score_mod_grad) are
 * differentiated; with desc.sinks, dsinks (heads floats on the host; NULL: not wanted) receives each
 * sink logit's gradient. Storage types (since 0.11): q, k, v and their gradients in desc's q/k/v_dtype,
 * out and dout in out_dtype (float32, float16 or bfloat16; accumulation in float32); lse float32.
 * Accuracy with 16-bit Q/K/V: D_i is formed from `out` as given, so an output rounded to 16 bits puts
 * its rounding into every gradient (about 2x PyTorch's error in bfloat16); run the forward with
 * out_dtype float32 and pass that output (and dout widened to float32) for gradients as accurate as
 * PyTorch's math backend — the Python package does. A pair whose weight is 0 (hidden, or too small to
 * count) gives no gradient, so a NaN or inf in dout, q, k or v reaches only the gradients of the pairs
 * that carry weight, the same on every kernel (since 0.12). No gradient buffer may share memory with
 * an input or another gradient (the same cl_mem, or overlapping sub-buffers): CLATTN_ERROR_INVALID_VALUE,
 * naming both (since 0.12).
 * Refused (CLATTN_ERROR_INVALID_VALUE): an int8 K or V, a score_mod without score_mod_grad, the double
 * softmax, head sizes above 512. */
CLATTN_API clattn_status clattn_sdpa_backward(clattn_context *ctx, const clattn_sdpa_desc *desc, cl_mem q, cl_mem k,
                                              cl_mem v, cl_mem mask, cl_mem out, cl_mem lse, cl_mem dout, cl_mem dq,
                                              cl_mem dk, cl_mem dv, float *dsinks);
/* Host-memory variant of clattn_sdpa_backward: host arrays in desc's storage types (float arrays by
 * default; void * since 0.11), blocking, all or nothing. */
CLATTN_API clattn_status clattn_sdpa_backward_host(clattn_context *ctx, const clattn_sdpa_desc *desc, const void *q,
                                                   const void *k, const void *v, const void *mask, const void *out,
                                                   const float *lse, const void *dout, void *dq, void *dk, void *dv,
                                                   float *dsinks);

/* Host-memory variant of clattn_sdpa_ragged (since 0.6.2): the packed q, k, v, mask, out and lse as host
 * arrays of the sizes the ragged call gives (q: q_starts[B] rows × H × Dqk, …), blocking, all or nothing.
 * For an application that batches sequences of different lengths without keeping them on the device
 * (a prefill of prompts of several lengths, as FlashAttention's varlen call takes them).
 *
 * Paged caches have no host variant, by design: a paged pool is the device-resident state a serving
 * engine appends to and attends over call after call; a host variant would copy the whole pool (and
 * every block no sequence uses) to the device and back on each call, which is exactly what a paged
 * cache exists to avoid. Keep the pool in cl_mem buffers and call clattn_kv_append_paged and
 * clattn_sdpa_paged. */
CLATTN_API clattn_status clattn_sdpa_ragged_host(clattn_context *ctx, const clattn_sdpa_desc *desc,
                                                 const clattn_ragged *ragged, const void *q, const void *k,
                                                 const void *v, const void *mask, void *out, float *lse);

/* Shape and options of a multi-head attention layer (start from CLATTN_MHA_DESC_INIT):
 *   Q = X·W_Q + b_Q,  K = KV·W_K + b_K,  V = KV·W_V + b_V            (KV = X for self-attention)
 *   O_h = sdpa(Q_h, K_h, V_h) for each head h, concatenated to (B, L, H·Dv)
 *   Y = concat·W_O + b_O   when W_O is given, else Y = concat. */
typedef struct clattn_mha_desc {
    size_t struct_size; /* sizeof(clattn_mha_desc), set by CLATTN_MHA_DESC_INIT */
    size_t batch;     /* B */
    size_t q_len;     /* L: rows of X per batch */
    size_t kv_len;    /* S: rows of KV per batch; for self-attention 0 or L */
    size_t model_dim; /* width of X (d_model) */
    size_t kv_dim;    /* width of KV; 0 means model_dim. Self-attention: 0 or model_dim, else
                         CLATTN_ERROR_SHAPE_MISMATCH (as is kv_len other than 0 or q_len) */
    size_t heads;     /* H */
    size_t qk_dim;    /* Dqk per head */
    size_t v_dim;     /* Dv per head; 0 means qk_dim */
    size_t out_dim;   /* columns of W_O; 0 means model_dim. Ignored without W_O. */
    float scale;      /* CLATTN_SCALE_DEFAULT means 1/√Dqk */
    const clattn_masks *masks;  /* NULL: no masks */
    clattn_algorithm algorithm; /* default CLATTN_ALGORITHM_AUTO */
    /* As in clattn_sdpa_desc (since 0.3; `softcap` was `reserved`, which had to be 0). With kv_heads,
     * W_K and W_V are (kv_dim, kv_heads·Dqk) and (kv_dim, kv_heads·Dv), b_K and b_V likewise: the
     * layer projects K and V once per K/V head, never repeated. */
    float softcap;
    size_t kv_heads;
    const float *sinks;
    const float *alibi_slopes;
    clattn_weights_output weights_output; /* what attn_weights holds */
    clattn_arithmetic arithmetic;         /* since 0.21: as clattn_sdpa_desc's */
    /* Since 0.5. Storage types (no CLATTN_INT8): x_dtype of X and KV, weight_dtype of the weights and
     * biases, out_dtype of the output. The projected Q, K, V and the heads' outputs are float32
     * temporaries; the projections then run clattn's own GEMM (CLBlast's needs cl_khr_fp16 for half,
     * and has no bfloat16). attn_weights stays float32. */
    clattn_dtype x_dtype, weight_dtype, out_dtype;
    unsigned dtype_reserved; /* must be 0 */
    /* Since 0.6.2. As in clattn_sdpa_desc (see clattn_softmax_precision); the projections stay float32. */
    clattn_softmax_precision softmax_precision;
    unsigned softmax_reserved; /* must be 0 */
    /* Since 0.9. As in clattn_sdpa_desc: score and mask functions for the layer's attention (positions
     * as its masks count them) and a block mask over them. */
    const clattn_mods *mods;
    const clattn_block_mask *block_mask;
    /* Since 0.10. As in clattn_sdpa_desc. */
    size_t origin_batch;
    long long origin_position;
    /* Since 0.13. As in clattn_sdpa_desc: NULL, or `heads` finite logit scales on the host. */
    const float *logit_scale;
} clattn_mha_desc;

#define CLATTN_MHA_DESC_INIT                                                                                \
    { sizeof(clattn_mha_desc), 0, 0, 0, 0, 0, 0, 0, 0, 0, CLATTN_SCALE_DEFAULT, NULL, CLATTN_ALGORITHM_AUTO, 0.0f, 0, NULL, \
      NULL, CLATTN_WEIGHTS_SOFTMAX, CLATTN_ARITHMETIC_DEFAULT, CLATTN_FLOAT32, CLATTN_FLOAT32, CLATTN_FLOAT32, 0, CLATTN_SOFTMAX_FLOAT, 0,  \
      NULL, NULL, 0, 0, NULL }

/* The weights of a layer as device buffers; start from CLATTN_MHA_WEIGHTS_INIT. Biases and W_O/b_O
 * may be NULL; b_O without W_O is CLATTN_ERROR_NULL_ARGUMENT (w_o missing). */
typedef struct clattn_mha_weights {
    size_t struct_size; /* sizeof(clattn_mha_weights), set by CLATTN_MHA_WEIGHTS_INIT */
    cl_mem w_q, b_q; /* (model_dim, H·Dqk), (H·Dqk) */
    cl_mem w_k, b_k; /* (kv_dim, H·Dqk),    (H·Dqk) */
    cl_mem w_v, b_v; /* (kv_dim, H·Dv),     (H·Dv)  */
    cl_mem w_o, b_o; /* (H·Dv, out_dim),    (out_dim) */
} clattn_mha_weights;

#define CLATTN_MHA_WEIGHTS_INIT { sizeof(clattn_mha_weights), NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL }

/* The same in host memory, in desc.weight_dtype (void * since 0.5; float arrays by default); start from
 * CLATTN_MHA_HOST_WEIGHTS_INIT. */
typedef struct clattn_mha_host_weights {
    size_t struct_size; /* sizeof(clattn_mha_host_weights), set by CLATTN_MHA_HOST_WEIGHTS_INIT */
    const void *w_q, *b_q;
    const void *w_k, *b_k;
    const void *w_v, *b_v;
    const void *w_o, *b_o;
} clattn_mha_host_weights;

#define CLATTN_MHA_HOST_WEIGHTS_INIT \
    { sizeof(clattn_mha_host_weights), NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL }

/* x (B,L,model_dim); kv (B,S,kv_dim) or NULL for self-attention; mask as for clattn_sdpa;
 * out (B,L,out_dim) with W_O, else (B,L,H·Dv); weights (B,H,L,S) optional. */
CLATTN_API clattn_status clattn_mha(clattn_context *ctx, const clattn_mha_desc *desc, cl_mem x,
                                    cl_mem kv, const clattn_mha_weights *weights, cl_mem mask,
                                    cl_mem out, cl_mem attn_weights);

/* Host-memory variant of clattn_mha: same shapes, host pointers (x and kv in desc.x_dtype, out in
 * desc.out_dtype), blocking; all or nothing. */
CLATTN_API clattn_status clattn_mha_host(clattn_context *ctx, const clattn_mha_desc *desc,
                                         const void *x, const void *kv,
                                         const clattn_mha_host_weights *weights, const void *mask,
                                         void *out, float *attn_weights);

/* The gradients of a layer (since 0.11; start from CLATTN_MHA_GRADS_INIT): device buffers in the shapes
 * of what they are gradients of — d_x (B,L,model_dim), d_kv (B,S,kv_dim; cross-attention only), d_w_q …
 * d_b_o as the weights and biases (a bias's gradient whether or not the layer has the bias). NULL: not
 * wanted (d_w_o and d_b_o need W_O; d_kv needs a kv input). */
typedef struct clattn_mha_grads {
    size_t struct_size; /* sizeof(clattn_mha_grads), set by CLATTN_MHA_GRADS_INIT */
    cl_mem d_x, d_kv;
    cl_mem d_w_q, d_b_q;
    cl_mem d_w_k, d_b_k;
    cl_mem d_w_v, d_b_v;
    cl_mem d_w_o, d_b_o;
} clattn_mha_grads;

#define CLATTN_MHA_GRADS_INIT { sizeof(clattn_mha_grads), NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL }

/* The same in host memory, each in the type of what it is the gradient of (d_x and d_kv in x_dtype, the
 * rest in weight_dtype; float arrays by default). */
typedef struct clattn_mha_host_grads {
    size_t struct_size; /* sizeof(clattn_mha_host_grads), set by CLATTN_MHA_HOST_GRADS_INIT */
    void *d_x, *d_kv;
    void *d_w_q, *d_b_q;
    void *d_w_k, *d_b_k;
    void *d_w_v, *d_b_v;
    void *d_w_o, *d_b_o;
} clattn_mha_host_grads;

#define CLATTN_MHA_HOST_GRADS_INIT { sizeof(clattn_mha_host_grads), NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL }

/* The layer's backward pass (since 0.11): given the forward's inputs (the same desc, x, kv, weights and
 * mask as clattn_mha) and d_out, the loss's gradient with respect to its output (B,L,out_dim) — or
 * (B,L,H·Dv) without W_O — the gradients `grads` asks for. The forward is recomputed inside (its
 * projections and attention with the log-sum-exps, kept as temporaries), then
 *   dC = d_out·W_Oᵀ, dW_O = Cᵀ·d_out, db_O = Σ_rows d_out          (C the heads' concatenation)
 *   dQ, dK, dV = clattn_sdpa_backward(Q, K, V, C, lse, dC)          (per head)
 *   dW_Q = Xᵀ·dQ, db_Q = Σ_rows dQ, dX = dQ·W_Qᵀ (+ dK·W_Kᵀ + dV·W_Vᵀ for self-attention; else into dKV)
 * — every sum in a fixed order (the same inputs give the same bits). Storage types as clattn_mha's: x, kv
 * and d_x, d_kv in desc.x_dtype, the weights and their gradients in weight_dtype, d_out in out_dtype (16-bit
 * tensors are widened to float on the device, the gradients rounded back); the attention's limits are
 * clattn_sdpa_backward's. No gradient may share memory with an input (x, kv, a weight, a bias, d_out,
 * the mask) or another gradient: CLATTN_ERROR_INVALID_VALUE, naming both (since 0.12). */
CLATTN_API clattn_status clattn_mha_backward(clattn_context *ctx, const clattn_mha_desc *desc, cl_mem x, cl_mem kv,
                                             const clattn_mha_weights *weights, cl_mem mask, cl_mem d_out,
                                             const clattn_mha_grads *grads);
/* Host-memory variant of clattn_mha_backward: host arrays in the descriptor's types, blocking, all or
 * nothing. */
CLATTN_API clattn_status clattn_mha_backward_host(clattn_context *ctx, const clattn_mha_desc *desc, const void *x,
                                                  const void *kv, const clattn_mha_host_weights *weights,
                                                  const void *mask, const void *d_out,
                                                  const clattn_mha_host_grads *grads);

/* ---------------------------------------------------------------------------------------------- */
/* The four stages, each callable alone (what clattn_sdpa and clattn_mha are made of)              */
/* ---------------------------------------------------------------------------------------------- */

/* Projection: Y = X·W (+ bias). X (rows, in_dim), W (in_dim, out_dim), bias (out_dim) or NULL,
 * Y (rows, out_dim). The matrix product runs through CLBlast. */
CLATTN_API clattn_status clattn_projection(clattn_context *ctx, size_t rows, size_t in_dim,
                                           size_t out_dim, cl_mem x, cl_mem w, cl_mem bias,
                                           cl_mem y);

/* Score: the scores as clattn_sdpa's softmax takes them: Q·Kᵀ·scale, soft-capped, plus ALiBi and the
 * masks (hidden keys −inf; offsets and windows apply). Q (B,H,L,Dqk), K (B,kv_heads,S,Dqk), scores
 * (B,H,L,S). desc->v_dim is not used; the sinks belong to the softmax and weights_output to
 * clattn_sdpa, so both are ignored here (clattn_softmax has no sinks: with sinks, use clattn_sdpa).
 * Q and K may be stored in any type of q_dtype and k_dtype (since 0.6.1; widened to float first, an int8
 * K by desc->k_scales); the scores are float32. The descriptor's types and scales are checked whole, as
 * clattn_sdpa checks them (an int8 v_dtype needs its v_scales here too). */
CLATTN_API clattn_status clattn_score(clattn_context *ctx, const clattn_sdpa_desc *desc, cl_mem q,
                                      cl_mem k, cl_mem mask, cl_mem scores);

/* Row softmax over `cols` of each of `rows` rows, stabilised by the row maximum. A row that is all
 * −inf gives zeros. scores and weights may be the same buffer (in place). lse (rows) is optional:
 * the natural log of each row's sum of exponentials, −inf for an all-masked row. */
CLATTN_API clattn_status clattn_softmax(clattn_context *ctx, size_t rows, size_t cols, cl_mem scores,
                                        cl_mem weights, cl_mem lse);

/* Weighted sum: O = P·V. P (B,H,L,S), V (B,kv_heads,S,Dv), O (B,H,L,Dv). Uses desc's batch, heads,
 * kv_heads, q_len, kv_len and v_dim, and (since 0.6.1) v_dtype with v_scales and out_dtype: V in any type
 * (widened to float first), O rounded into its type; the weights are float32. The descriptor's types and
 * scales are checked whole, as clattn_sdpa checks them. */
CLATTN_API clattn_status clattn_weighted_sum(clattn_context *ctx, const clattn_sdpa_desc *desc,
                                             cl_mem weights, cl_mem v, cl_mem out);

/* ---------------------------------------------------------------------------------------------- */
/* Device groups (since 0.5)                                                                       */
/* ---------------------------------------------------------------------------------------------- */

/* Contexts on several devices of one process, for one attention call spread over them. */
typedef struct clattn_group_s clattn_group;

/* A group over the devices of `specs`: "all" (every device of every platform), or device specs as
 * clattn_device_select takes them, separated by commas ("0:0,0:1", "cpu,gpu"); a device named twice is
 * CLATTN_ERROR_INVALID_VALUE. Each device's speed is measured once (a fused SDPA, B=1, H=8, L=S=512,
 * D=64) and kept with the program cache, so later groups start without measuring; it sets the device's
 * share of every call. Failures are detailed in clattn_last_error(NULL). At most 16 devices. */
CLATTN_API clattn_status clattn_group_create(clattn_group **group, const char *specs);

/* Free a group and its contexts. Accepts NULL. */
CLATTN_API void clattn_group_free(clattn_group *group);

/* The group's devices (0 for NULL), the context of device i (NULL out of range; it belongs to the
 * group), and device i's share of the work (its measured speed over the sum; 0 out of range). */
CLATTN_API size_t clattn_group_size(const clattn_group *group);
CLATTN_API clattn_context *clattn_group_context(const clattn_group *group, size_t i);
/* (Each group call clears every member context's last error and warning first, as a call on a context
 * does: after it, clattn_last_warning of a member is that call's, failed or not, never an earlier one's.) */
CLATTN_API double clattn_group_share(const clattn_group *group, size_t i);
/* Set device i's speed (its share's weight, GFLOP/s as measured; since 0.23): a known split for known hardware, or a
 * test's pinned one. Not kept with the cache. CLATTN_ERROR_NULL_ARGUMENT, or CLATTN_ERROR_INVALID_VALUE for i out of
 * range or a speed that is not positive and finite (detail in clattn_last_error(NULL)). */
CLATTN_API clattn_status clattn_group_set_speed(clattn_group *group, size_t i, double gflops);

/* clattn_sdpa_host spread over the group, the devices working concurrently (a thread each): with at
 * least as many batches as devices, each device takes a run of whole batches; otherwise each takes a
 * run of the keys — its K/V rows, the mask's columns, key lengths and positions shifted to the slice —
 * and the partial results are merged through their log-sum-exps (the sinks counted once), exactly, as
 * clattn_merge does (in reproducible arithmetic, since 0.23, a run of the query rows instead: one device's bits).
 * Shares follow clattn_group_share; a device whose share rounds to nothing sits the
 * call out. Float32 Q, outputs and masks; K and V (since 0.15) in desc's k_dtype and v_dtype — any format
 * clattn_sdpa_host takes, blocks copied whole, so a quantised cache is split and sent as its bytes, never
 * widened; no weights output; lse may be NULL. Since 0.10 desc.mods and
 * desc.block_mask may be set, made on any one context (say member 0's): each other member uses a copy
 * made there on its first call and kept with the object (the auxiliary tensors copied from the
 * caller's buffers at every call), and each part sees the whole call's batches and positions
 * (clattn_sdpa_desc.origin_*). A failure names the device in clattn_last_error(NULL). */
CLATTN_API clattn_status clattn_group_sdpa_host(clattn_group *group, const clattn_sdpa_desc *desc, const float *q,
                                                const void *k, const void *v, const void *mask, float *out,
                                                float *lse);

/* clattn_mha_host spread over the group: with at least as many batches as devices, by runs of whole
 * batches; otherwise by runs of query rows, each device projecting every key and value row (computed
 * again on each device: the price of splitting one sequence) and its own query rows, their positions
 * kept (causal masks, windows, ALiBi) and the mask's rows sliced. Float32 tensors and float masks; no
 * attention weights output; mods and block masks as in clattn_group_sdpa_host (since 0.10). A failure
 * names the device in clattn_last_error(NULL). */
CLATTN_API clattn_status clattn_group_mha_host(clattn_group *group, const clattn_mha_desc *desc, const float *x,
                                               const float *kv, const clattn_mha_host_weights *weights,
                                               const void *mask, float *out);

#ifdef __cplusplus
}
#endif

#endif /* CLATTN_CLATTN_H */
