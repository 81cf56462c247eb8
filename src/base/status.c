/* Status codes → names and one-line descriptions, for clattn's own codes and OpenCL's. */
#include "clattn/clattn.h"

typedef struct status_entry {
    int code;
    const char *name;
    const char *description;
} status_entry;

#define CL_ENTRY(code, text) {code, #code, text}

static const status_entry status_table[] = {
    {CLATTN_SUCCESS, "CLATTN_SUCCESS", "success"},
    {CLATTN_ERROR_NULL_ARGUMENT, "CLATTN_ERROR_NULL_ARGUMENT", "a required pointer or buffer was NULL"},
    {CLATTN_ERROR_ZERO_SIZE, "CLATTN_ERROR_ZERO_SIZE", "a dimension that must be at least 1 was 0"},
    {CLATTN_ERROR_SIZE_OVERFLOW, "CLATTN_ERROR_SIZE_OVERFLOW", "a size product does not fit in size_t"},
    {CLATTN_ERROR_BUFFER_TOO_SMALL, "CLATTN_ERROR_BUFFER_TOO_SMALL",
     "a buffer is smaller than its tensor's shape needs"},
    {CLATTN_ERROR_SHAPE_MISMATCH, "CLATTN_ERROR_SHAPE_MISMATCH", "dimensions that must agree do not"},
    {CLATTN_ERROR_INVALID_MASK, "CLATTN_ERROR_INVALID_MASK",
     "a mask has the wrong shape or kind, or a key length exceeds the key count"},
    {CLATTN_ERROR_INVALID_VALUE, "CLATTN_ERROR_INVALID_VALUE", "a parameter is outside its domain"},
    {CLATTN_ERROR_EXCEEDS_DEVICE_LIMIT, "CLATTN_ERROR_EXCEEDS_DEVICE_LIMIT",
     "a buffer would exceed the device's maximum allocation size"},
    {CLATTN_ERROR_NO_PLATFORM, "CLATTN_ERROR_NO_PLATFORM",
     "no OpenCL platform is installed (on Debian: apt-get install pocl-opencl-icd)"},
    {CLATTN_ERROR_NO_DEVICE, "CLATTN_ERROR_NO_DEVICE", "the OpenCL platforms expose no device"},
    {CLATTN_ERROR_DEVICE_NOT_FOUND, "CLATTN_ERROR_DEVICE_NOT_FOUND",
     "no device matches the requested device spec"},
    {CLATTN_ERROR_KERNEL_SOURCE, "CLATTN_ERROR_KERNEL_SOURCE",
     "a kernel source file under CLATTN_KERNEL_DIR could not be read"},
    {CLATTN_ERROR_BUILD_FAILED, "CLATTN_ERROR_BUILD_FAILED",
     "the OpenCL C compiler rejected the kernels (see the build log)"},
    {CLATTN_ERROR_BLAS, "CLATTN_ERROR_BLAS", "CLBlast reported an error"},
    {CLATTN_ERROR_OUT_OF_HOST_MEMORY, "CLATTN_ERROR_OUT_OF_HOST_MEMORY", "a host allocation failed"},
    {CLATTN_ERROR_UNSUPPORTED_DEVICE, "CLATTN_ERROR_UNSUPPORTED_DEVICE",
     "the device lacks a feature clattn needs"},
    {CLATTN_ERROR_COMMUNICATION, "CLATTN_ERROR_COMMUNICATION", "an MPI call failed"},
    {CLATTN_ERROR_TIMEOUT, "CLATTN_ERROR_TIMEOUT", "another rank did not answer within the timeout"},
    CL_ENTRY(CL_DEVICE_NOT_FOUND, "OpenCL: no device of the requested type"),
    CL_ENTRY(CL_DEVICE_NOT_AVAILABLE, "OpenCL: the device is not available"),
    CL_ENTRY(CL_COMPILER_NOT_AVAILABLE, "OpenCL: no compiler is available"),
    CL_ENTRY(CL_MEM_OBJECT_ALLOCATION_FAILURE, "OpenCL: device memory for a buffer could not be allocated"),
    CL_ENTRY(CL_OUT_OF_RESOURCES, "OpenCL: the device ran out of resources"),
    CL_ENTRY(CL_OUT_OF_HOST_MEMORY, "OpenCL: the runtime ran out of host memory"),
    CL_ENTRY(CL_PROFILING_INFO_NOT_AVAILABLE, "OpenCL: profiling information is not available"),
    CL_ENTRY(CL_MEM_COPY_OVERLAP, "OpenCL: source and destination of a copy overlap"),
    CL_ENTRY(CL_IMAGE_FORMAT_MISMATCH, "OpenCL: image formats differ"),
    CL_ENTRY(CL_IMAGE_FORMAT_NOT_SUPPORTED, "OpenCL: image format not supported"),
    CL_ENTRY(CL_BUILD_PROGRAM_FAILURE, "OpenCL: program build failed"),
    CL_ENTRY(CL_MAP_FAILURE, "OpenCL: mapping a buffer failed"),
    CL_ENTRY(CL_MISALIGNED_SUB_BUFFER_OFFSET, "OpenCL: sub-buffer offset is misaligned"),
    CL_ENTRY(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST, "OpenCL: an event in the wait list failed"),
    CL_ENTRY(CL_COMPILE_PROGRAM_FAILURE, "OpenCL: program compilation failed"),
    CL_ENTRY(CL_LINKER_NOT_AVAILABLE, "OpenCL: no linker is available"),
    CL_ENTRY(CL_LINK_PROGRAM_FAILURE, "OpenCL: program link failed"),
    CL_ENTRY(CL_DEVICE_PARTITION_FAILED, "OpenCL: device partition failed"),
    CL_ENTRY(CL_KERNEL_ARG_INFO_NOT_AVAILABLE, "OpenCL: kernel argument info is not available"),
    CL_ENTRY(CL_INVALID_VALUE, "OpenCL: an argument has an invalid value"),
    CL_ENTRY(CL_INVALID_DEVICE_TYPE, "OpenCL: invalid device type"),
    CL_ENTRY(CL_INVALID_PLATFORM, "OpenCL: invalid platform"),
    CL_ENTRY(CL_INVALID_DEVICE, "OpenCL: invalid device"),
    CL_ENTRY(CL_INVALID_CONTEXT, "OpenCL: invalid context"),
    CL_ENTRY(CL_INVALID_QUEUE_PROPERTIES, "OpenCL: invalid queue properties"),
    CL_ENTRY(CL_INVALID_COMMAND_QUEUE, "OpenCL: invalid command queue"),
    CL_ENTRY(CL_INVALID_HOST_PTR, "OpenCL: invalid host pointer"),
    CL_ENTRY(CL_INVALID_MEM_OBJECT, "OpenCL: invalid memory object"),
    CL_ENTRY(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR, "OpenCL: invalid image format descriptor"),
    CL_ENTRY(CL_INVALID_IMAGE_SIZE, "OpenCL: invalid image size"),
    CL_ENTRY(CL_INVALID_SAMPLER, "OpenCL: invalid sampler"),
    CL_ENTRY(CL_INVALID_BINARY, "OpenCL: invalid program binary"),
    CL_ENTRY(CL_INVALID_BUILD_OPTIONS, "OpenCL: invalid build options"),
    CL_ENTRY(CL_INVALID_PROGRAM, "OpenCL: invalid program"),
    CL_ENTRY(CL_INVALID_PROGRAM_EXECUTABLE, "OpenCL: program not built for the device"),
    CL_ENTRY(CL_INVALID_KERNEL_NAME, "OpenCL: no kernel of that name"),
    CL_ENTRY(CL_INVALID_KERNEL_DEFINITION, "OpenCL: invalid kernel definition"),
    CL_ENTRY(CL_INVALID_KERNEL, "OpenCL: invalid kernel"),
    CL_ENTRY(CL_INVALID_ARG_INDEX, "OpenCL: invalid kernel argument index"),
    CL_ENTRY(CL_INVALID_ARG_VALUE, "OpenCL: invalid kernel argument value"),
    CL_ENTRY(CL_INVALID_ARG_SIZE, "OpenCL: invalid kernel argument size"),
    CL_ENTRY(CL_INVALID_KERNEL_ARGS, "OpenCL: kernel arguments not all set"),
    CL_ENTRY(CL_INVALID_WORK_DIMENSION, "OpenCL: invalid work dimension"),
    CL_ENTRY(CL_INVALID_WORK_GROUP_SIZE, "OpenCL: invalid work-group size"),
    CL_ENTRY(CL_INVALID_WORK_ITEM_SIZE, "OpenCL: invalid work-item size"),
    CL_ENTRY(CL_INVALID_GLOBAL_OFFSET, "OpenCL: invalid global offset"),
    CL_ENTRY(CL_INVALID_EVENT_WAIT_LIST, "OpenCL: invalid event wait list"),
    CL_ENTRY(CL_INVALID_EVENT, "OpenCL: invalid event"),
    CL_ENTRY(CL_INVALID_OPERATION, "OpenCL: invalid operation"),
    CL_ENTRY(CL_INVALID_GL_OBJECT, "OpenCL: invalid GL object"),
    CL_ENTRY(CL_INVALID_BUFFER_SIZE, "OpenCL: invalid buffer size"),
    CL_ENTRY(CL_INVALID_MIP_LEVEL, "OpenCL: invalid mip level"),
    CL_ENTRY(CL_INVALID_GLOBAL_WORK_SIZE, "OpenCL: invalid global work size"),
    CL_ENTRY(CL_INVALID_PROPERTY, "OpenCL: invalid property"),
    CL_ENTRY(CL_INVALID_IMAGE_DESCRIPTOR, "OpenCL: invalid image descriptor"),
    CL_ENTRY(CL_INVALID_COMPILER_OPTIONS, "OpenCL: invalid compiler options"),
    CL_ENTRY(CL_INVALID_LINKER_OPTIONS, "OpenCL: invalid linker options"),
    CL_ENTRY(CL_INVALID_DEVICE_PARTITION_COUNT, "OpenCL: invalid device partition count"),
    /* OpenCL 2.x and 3.0 codes, and extension codes, by value: the library is built for 1.2 headers. */
    {-69, "CL_INVALID_PIPE_SIZE", "OpenCL: invalid pipe size"},
    {-70, "CL_INVALID_DEVICE_QUEUE", "OpenCL: invalid device queue"},
    {-71, "CL_INVALID_SPEC_ID", "OpenCL: invalid specialization constant id"},
    {-72, "CL_MAX_SIZE_RESTRICTION_EXCEEDED", "OpenCL: a size restriction was exceeded"},
    {-1000, "CL_INVALID_GL_SHAREGROUP_REFERENCE_KHR", "OpenCL: invalid GL share group reference"},
    {-1001, "CL_PLATFORM_NOT_FOUND_KHR", "OpenCL: no platform found (the ICD loader finds no driver)"},
    {-1057, "CL_DEVICE_PARTITION_FAILED_EXT", "OpenCL: device partition failed"},
    {-1058, "CL_INVALID_PARTITION_COUNT_EXT", "OpenCL: invalid partition count"},
    {-1059, "CL_INVALID_PARTITION_NAME_EXT", "OpenCL: invalid partition name"},
};

static const status_entry *find_status(clattn_status status)
{
    for (size_t i = 0; i < sizeof status_table / sizeof status_table[0]; i++)
        if (status_table[i].code == (int)status)
            return &status_table[i];
    return NULL;
}

const char *clattn_status_string(clattn_status status)
{
    const status_entry *e = find_status(status);
    return e ? e->name : "CLATTN_UNKNOWN_STATUS";
}

const char *clattn_status_description(clattn_status status)
{
    const status_entry *e = find_status(status);
    return e ? e->description : "unknown status code";
}

unsigned clattn_version_number(void) { return CLATTN_VERSION_NUMBER; }

const char *clattn_version_string(void) { return CLATTN_VERSION_STRING; }
