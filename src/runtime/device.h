/* Platform and device discovery, the device-spec grammar, and the facts about a device that the
 * kernels, the tiling choice and the cache key need. */
#ifndef CLATTN_DEVICE_H
#define CLATTN_DEVICE_H

#include "clattn/clattn.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct device_caps {
    char name[256];
    cl_device_type type;
    cl_ulong max_alloc;          /* CL_DEVICE_MAX_MEM_ALLOC_SIZE */
    cl_ulong local_mem;          /* CL_DEVICE_LOCAL_MEM_SIZE */
    cl_ulong global_mem;         /* CL_DEVICE_GLOBAL_MEM_SIZE */
    size_t max_work_group;       /* CL_DEVICE_MAX_WORK_GROUP_SIZE */
    cl_uint native_float_width;  /* CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT */
    cl_uint compute_units;       /* CL_DEVICE_MAX_COMPUTE_UNITS */
    bool fp64;                   /* cl_khr_fp64: double precision in kernels */
    bool host_unified;           /* CL_DEVICE_HOST_UNIFIED_MEMORY: it works in the host's memory */
    char platform[256], platform_version[256], driver[256];
} device_caps;

/* The one device-class rule: which row of the kernel families' parameter tables (tuning_tables.c) a
 * device gets by default.
 *  CPU        a CPU that is not also a GPU (PoCL, Intel's CPU runtime): kernels work SIMD-wide inside each
 *             work-item, whose vector code these runtimes run as written;
 *  CPU_LANES  Mesa's llvmpipe (rusticl's CPU device): a CPU that runs work-items as the lanes of its SIMD
 *             registers, as a GPU does (the fused and decode kernels take the GPU shape there: their CPU
 *             shapes were miscompiled by Mesa 22.3, wrong rows at head size 64, where PoCL and
 *             oclgrind's checks find the same kernels correct);
 *  GPU        everything else, oclgrind included (it says it is every type at once; the GPU shape is the
 *             one with shared local memory to check, and its checks run the CPU shapes through
 *             CLATTN_TUNING: tests/oclgrind_check.sh). */
typedef enum device_class { DEVICE_CLASS_CPU, DEVICE_CLASS_CPU_LANES, DEVICE_CLASS_GPU, DEVICE_CLASSES } device_class;
device_class device_class_of(const device_caps *caps);
/* How the CPU kernels prefetch rows ahead of their use (their PREFETCH option, cl/common.cl): nothing, OpenCL C's
 * prefetch(), or Clang's builtin where it was seen to compile and to help (PoCL). A compiler that does not know the
 * builtin may not fail cleanly (rusticl's SPIR-V translator exits the process), so it is chosen by the platform's
 * name, never tried. */
enum { PREFETCH_NONE, PREFETCH_CORE, PREFETCH_CLANG };
unsigned device_prefetch_mode(const device_caps *caps);
/* "cpu", "cpu-lanes" or "gpu". */
const char *device_class_name(device_class c);
/* The device's native float vector width as a width OpenCL C has, up to 16: what a table's VEC of 0
 * means. */
unsigned device_simd_width(const device_caps *caps);

/* Query every fact of `caps` for `device`; failures are recorded outside any context. */
clattn_status device_caps_query(cl_device_id device, device_caps *caps);

/* Resolve `spec` as clattn_device_select does, naming where it came from ("argument", "options.device")
 * in the error when it matches nothing. */
clattn_status device_select_from(const char *spec, const char *source, clattn_device_info *info);

#endif
