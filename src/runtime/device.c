/* Platform and device discovery, and the device-spec grammar shared by the API and CLATTN_DEVICE. */
#include "device.h"

#include "error.h"
#include "fault.h"
#include "options.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ocl-icd returns this when no vendor ICD is installed (cl_khr_icd); not in every header. */
#ifndef CL_PLATFORM_NOT_FOUND_KHR
#define CL_PLATFORM_NOT_FOUND_KHR -1001
#endif

typedef struct device_list {
    size_t count;
    clattn_device_info *items;
} device_list;

static const char no_platform_help[] =
    "no OpenCL platform found: install an OpenCL driver (on Debian/Ubuntu `apt-get install "
    "pocl-opencl-icd` gives a CPU device) and check that OCL_ICD_VENDORS, if set, names a folder "
    "of .icd files";

static const char *device_type_name(cl_device_type type)
{
    if (type & CL_DEVICE_TYPE_GPU) return "GPU";
    if (type & CL_DEVICE_TYPE_CPU) return "CPU";
    if (type & CL_DEVICE_TYPE_ACCELERATOR) return "accelerator";
    return "other";
}

static void get_string(cl_device_id dev, cl_device_info what, char *out, size_t size)
{
    if (clGetDeviceInfo(dev, what, size, out, NULL) != CL_SUCCESS)
        snprintf(out, size, "?");
    out[size - 1] = '\0';
}

static void device_list_free(device_list *list)
{
    free(list->items);
    list->items = NULL;
    list->count = 0;
}

static clattn_status device_list_load(device_list *list)
{
    list->count = 0;
    list->items = NULL;
    cl_uint nplat = 0;
    cl_int err = clGetPlatformIDs(0, NULL, &nplat);
    if (err == CL_PLATFORM_NOT_FOUND_KHR || (err == CL_SUCCESS && nplat == 0))
        return set_error(NULL, CLATTN_ERROR_NO_PLATFORM, "%s", no_platform_help);
    if (err != CL_SUCCESS)
        return cl_error(NULL, err, "clGetPlatformIDs");

    cl_platform_id *plats = calloc(nplat, sizeof *plats);
    if (!plats)
        return set_error(NULL, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "listing %u platforms", nplat);
    err = clGetPlatformIDs(nplat, plats, NULL);
    if (err != CL_SUCCESS) {
        free(plats);
        return cl_error(NULL, err, "clGetPlatformIDs");
    }

    clattn_status st = CLATTN_SUCCESS;
    for (cl_uint p = 0; p < nplat && st == CLATTN_SUCCESS; p++) {
        cl_uint ndev = 0;
        err = clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 0, NULL, &ndev);
        if (err == CL_DEVICE_NOT_FOUND || ndev == 0)
            continue; /* a platform without devices is not an error */
        if (err != CL_SUCCESS) {
            st = cl_error(NULL, err, "clGetDeviceIDs");
            break;
        }
        cl_device_id *devs = calloc(ndev, sizeof *devs);
        clattn_device_info *grown = realloc(list->items, (list->count + ndev) * sizeof *grown);
        if (!devs || !grown) {
            free(devs);
            if (grown) list->items = grown;
            st = set_error(NULL, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "listing %u devices", ndev);
            break;
        }
        list->items = grown;
        err = clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, ndev, devs, NULL);
        if (err != CL_SUCCESS) {
            free(devs);
            st = cl_error(NULL, err, "clGetDeviceIDs");
            break;
        }
        char platform_name[256];
        if (clGetPlatformInfo(plats[p], CL_PLATFORM_NAME, sizeof platform_name, platform_name, NULL) !=
            CL_SUCCESS)
            snprintf(platform_name, sizeof platform_name, "?");
        platform_name[sizeof platform_name - 1] = '\0';
        for (cl_uint d = 0; d < ndev; d++) {
            clattn_device_info *info = &list->items[list->count++];
            memset(info, 0, sizeof *info);
            info->platform_index = p;
            info->device_index = d;
            info->platform = plats[p];
            info->device = devs[d];
            if (clGetDeviceInfo(devs[d], CL_DEVICE_TYPE, sizeof info->type, &info->type, NULL) != CL_SUCCESS)
                info->type = CL_DEVICE_TYPE_DEFAULT;
            get_string(devs[d], CL_DEVICE_NAME, info->name, sizeof info->name);
            get_string(devs[d], CL_DEVICE_VENDOR, info->vendor, sizeof info->vendor);
            memcpy(info->platform_name, platform_name, sizeof platform_name);
        }
        free(devs);
    }
    free(plats);
    if (st != CLATTN_SUCCESS) {
        device_list_free(list);
        return st;
    }
    if (list->count == 0)
        return set_error(NULL, CLATTN_ERROR_NO_DEVICE,
                         "%u OpenCL platform(s) found but none exposes a device; for a CPU device "
                         "install pocl-opencl-icd",
                         nplat);
    return CLATTN_SUCCESS;
}

static void device_list_describe(const device_list *list, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < list->count && used + 1 < size; i++) {
        const clattn_device_info *d = &list->items[i];
        int n = snprintf(buf + used, size - used, "%s%u:%u %s (%s, %s)", i ? "; " : "", d->platform_index,
                         d->device_index, d->name, device_type_name(d->type), d->platform_name);
        if (n < 0) break;
        used += (size_t)n;
    }
}

clattn_status clattn_device_count(size_t *count)
{
    if (!count)
        return set_error(NULL, CLATTN_ERROR_NULL_ARGUMENT, "clattn_device_count: count is NULL");
    *count = 0;
    device_list list;
    clattn_status st = device_list_load(&list);
    if (st == CLATTN_ERROR_NO_PLATFORM || st == CLATTN_ERROR_NO_DEVICE)
        return st; /* count stays 0; the detail says how to get a device */
    if (st != CLATTN_SUCCESS)
        return st;
    *count = list.count;
    device_list_free(&list);
    return CLATTN_SUCCESS;
}

clattn_status clattn_device_get(size_t index, clattn_device_info *info)
{
    if (!info)
        return set_error(NULL, CLATTN_ERROR_NULL_ARGUMENT, "clattn_device_get: info is NULL");
    device_list list;
    clattn_status st = device_list_load(&list);
    if (st != CLATTN_SUCCESS)
        return st;
    if (index >= list.count) {
        st = set_error(NULL, CLATTN_ERROR_DEVICE_NOT_FOUND, "device index %zu out of range: %zu device(s)",
                       index, list.count);
    } else {
        *info = list.items[index];
    }
    device_list_free(&list);
    return st;
}

static bool contains_ignore_case(const char *haystack, const char *needle)
{
    size_t n = strlen(needle);
    for (const char *h = haystack; *h; h++) {
        size_t i = 0;
        while (i < n && h[i] && tolower((unsigned char)h[i]) == tolower((unsigned char)needle[i]))
            i++;
        if (i == n)
            return true;
    }
    return n == 0;
}

static bool equals_ignore_case(const char *a, const char *b)
{
    for (; *a && *b; a++, b++)
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b))
            return false;
    return *a == *b;
}

/* Parse "P:D" with both parts plain decimal numbers. */
static bool parse_index_pair(const char *spec, unsigned long *p, unsigned long *d)
{
    char *end;
    if (!isdigit((unsigned char)spec[0]))
        return false;
    *p = strtoul(spec, &end, 10);
    if (*end != ':' || !isdigit((unsigned char)end[1]))
        return false;
    *d = strtoul(end + 1, &end, 10);
    return *end == '\0';
}

enum { SPEC_NO_MATCH = -1, SPEC_AMBIGUOUS = -2, SPEC_BARE_NUMBER = -3 };

static bool all_digits(const char *s)
{
    for (; *s; s++)
        if (!isdigit((unsigned char)*s))
            return false;
    return true;
}

/* Index of the device `spec` names in list, or a SPEC_* reason why none. A bare number is refused
 * rather than matched against names ("1" is in "avx512"); a name part that fits several devices is
 * ambiguous rather than the first of them. Types (cpu, gpu, accelerator) take the first of the type. */
static long match_spec(const device_list *list, const char *spec)
{
    unsigned long p, d;
    if (parse_index_pair(spec, &p, &d)) {
        for (size_t i = 0; i < list->count; i++)
            if (list->items[i].platform_index == p && list->items[i].device_index == d)
                return (long)i;
        return SPEC_NO_MATCH;
    }
    if (all_digits(spec))
        return SPEC_BARE_NUMBER;
    cl_device_type want = 0;
    if (equals_ignore_case(spec, "cpu")) want = CL_DEVICE_TYPE_CPU;
    else if (equals_ignore_case(spec, "gpu")) want = CL_DEVICE_TYPE_GPU;
    else if (equals_ignore_case(spec, "accelerator")) want = CL_DEVICE_TYPE_ACCELERATOR;
    long found = SPEC_NO_MATCH;
    for (size_t i = 0; i < list->count; i++) {
        if (want ? (list->items[i].type & want) != 0 : contains_ignore_case(list->items[i].name, spec)) {
            if (want)
                return (long)i;
            if (found >= 0)
                return SPEC_AMBIGUOUS;
            found = (long)i;
        }
    }
    return found;
}

clattn_status device_select_from(const char *spec, const char *source, clattn_device_info *info)
{
    device_list list;
    clattn_status st = device_list_load(&list);
    if (st != CLATTN_SUCCESS)
        return st;
    if (!spec || !*spec) {
        spec = options_env("CLATTN_DEVICE");
        source = "CLATTN_DEVICE";
    }
    long found;
    if (spec && *spec) {
        found = match_spec(&list, spec);
        if (found < 0) {
            static const char *const why[] = {"matches no device", "matches several device names",
                                              "is a bare number (write P:D, e.g. 0:1)"};
            char devices[CLATTN_ERROR_MAX - 200];
            device_list_describe(&list, devices, sizeof devices);
            st = set_error(NULL, CLATTN_ERROR_DEVICE_NOT_FOUND,
                           "device spec \"%.64s\" (%s) %s; use P:D, cpu, gpu, accelerator or part of one "
                           "device's name. Devices: %s",
                           spec, source, why[-found - 1], devices);
        }
    } else {
        found = match_spec(&list, "gpu");
        if (found < 0)
            found = 0;
    }
    if (st == CLATTN_SUCCESS)
        *info = list.items[found];
    device_list_free(&list);
    return st;
}

clattn_status clattn_device_select(const char *spec, clattn_device_info *info)
{
    if (!info)
        return set_error(NULL, CLATTN_ERROR_NULL_ARGUMENT, "clattn_device_select: info is NULL");
    return device_select_from(spec, "argument", info);
}

/* Whether CL_DEVICE_EXTENSIONS names cl_khr_fp64 as a whole word (the list has no fixed length). A
 * fault-injection build can hide it, so that the refusal of double precision is tested on any device. */
static clattn_status device_query_fp64(cl_device_id device, bool *fp64)
{
    size_t size = 0;
    cl_int err = clGetDeviceInfo(device, CL_DEVICE_EXTENSIONS, 0, NULL, &size);
    char *list = err == CL_SUCCESS ? malloc(size + 1) : NULL;
    if (err != CL_SUCCESS)
        return cl_error(NULL, err, "querying the device's extensions");
    if (!list)
        return set_error(NULL, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "reading the device's extensions");
    if ((err = clGetDeviceInfo(device, CL_DEVICE_EXTENSIONS, size, list, NULL)) != CL_SUCCESS) {
        free(list);
        return cl_error(NULL, err, "querying the device's extensions");
    }
    list[size] = '\0';
    static const char name[] = "cl_khr_fp64";
    *fp64 = false;
    for (const char *p = list; (p = strstr(p, name)) != NULL; p += sizeof name - 1)
        if ((p == list || p[-1] == ' ') && (p[sizeof name - 1] == ' ' || p[sizeof name - 1] == '\0'))
            *fp64 = !FAULT_HIDES_FP64();
    free(list);
    return CLATTN_SUCCESS;
}

clattn_status device_caps_query(cl_device_id device, device_caps *c)
{
    cl_platform_id platform;
    cl_int err;
    if ((err = clGetDeviceInfo(device, CL_DEVICE_NAME, sizeof c->name, c->name, NULL)) != CL_SUCCESS ||
        (err = clGetDeviceInfo(device, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof c->max_alloc, &c->max_alloc, NULL)) !=
            CL_SUCCESS ||
        (err = clGetDeviceInfo(device, CL_DEVICE_TYPE, sizeof c->type, &c->type, NULL)) != CL_SUCCESS ||
        (err = clGetDeviceInfo(device, CL_DEVICE_LOCAL_MEM_SIZE, sizeof c->local_mem, &c->local_mem, NULL)) !=
            CL_SUCCESS ||
        (err = clGetDeviceInfo(device, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof c->global_mem, &c->global_mem, NULL)) !=
            CL_SUCCESS ||
        (err = clGetDeviceInfo(device, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof c->max_work_group, &c->max_work_group,
                               NULL)) != CL_SUCCESS ||
        (err = clGetDeviceInfo(device, CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT, sizeof c->native_float_width,
                               &c->native_float_width, NULL)) != CL_SUCCESS ||
        (err = clGetDeviceInfo(device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof c->compute_units, &c->compute_units,
                               NULL)) != CL_SUCCESS ||
        (err = clGetDeviceInfo(device, CL_DRIVER_VERSION, sizeof c->driver, c->driver, NULL)) != CL_SUCCESS ||
        (err = clGetDeviceInfo(device, CL_DEVICE_PLATFORM, sizeof platform, &platform, NULL)) != CL_SUCCESS ||
        (err = clGetPlatformInfo(platform, CL_PLATFORM_NAME, sizeof c->platform, c->platform, NULL)) != CL_SUCCESS ||
        (err = clGetPlatformInfo(platform, CL_PLATFORM_VERSION, sizeof c->platform_version, c->platform_version,
                                 NULL)) != CL_SUCCESS)
        return cl_error(NULL, err, "querying the device's limits");
    c->name[sizeof c->name - 1] = c->driver[sizeof c->driver - 1] = c->platform[sizeof c->platform - 1] = '\0';
    c->platform_version[sizeof c->platform_version - 1] = '\0';
    /* Whether host arrays can be the device's own memory (host calls then wrap their inputs: host.c). A
     * driver that cannot answer (the query is deprecated since OpenCL 2.0) is taken as a discrete device. */
    cl_bool unified = CL_FALSE;
    c->host_unified = clGetDeviceInfo(device, CL_DEVICE_HOST_UNIFIED_MEMORY, sizeof unified, &unified, NULL) ==
                          CL_SUCCESS && unified;
    return device_query_fp64(device, &c->fp64);
}

static bool is_llvmpipe(const device_caps *caps)
{
    return strstr(caps->platform, "rusticl") != NULL && strncmp(caps->name, "llvmpipe", 8) == 0;
}

unsigned device_prefetch_mode(const device_caps *caps)
{
    return strstr(caps->platform, "Portable Computing Language") ? PREFETCH_CLANG : PREFETCH_CORE;
}

device_class device_class_of(const device_caps *caps)
{
    if (is_llvmpipe(caps))
        return DEVICE_CLASS_CPU_LANES;
    if ((caps->type & CL_DEVICE_TYPE_CPU) != 0 && (caps->type & CL_DEVICE_TYPE_GPU) == 0)
        return DEVICE_CLASS_CPU;
    return DEVICE_CLASS_GPU;
}

const char *device_class_name(device_class c)
{
    static const char *const names[DEVICE_CLASSES] = {"cpu", "cpu-lanes", "gpu"};
    return c < DEVICE_CLASSES ? names[c] : "?";
}

unsigned device_simd_width(const device_caps *caps)
{
    unsigned vec = 1;
    while (vec < 16 && vec * 2 <= caps->native_float_width)
        vec *= 2;
    return vec;
}
