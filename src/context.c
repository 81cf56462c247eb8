/* clattn_context: the OpenCL context, queue and device facts, its kernels, scratch buffers and the
 * detail of its last error. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Detail of failures that happen outside any context (device listing, context creation). */
static _Thread_local char thread_error[CLATTN_ERROR_MAX];

static char *error_slot(clattn_context *ctx) { return ctx ? ctx->last_error : thread_error; }

clattn_status set_error(clattn_context *ctx, clattn_status status, const char *fmt, ...)
{
    char *slot = error_slot(ctx);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(slot, CLATTN_ERROR_MAX, fmt, ap);
    va_end(ap);
    return status;
}

clattn_status cl_error(clattn_context *ctx, cl_int err, const char *what)
{
    return set_error(ctx, (clattn_status)err, "%s failed: %s (%d)", what,
                     clattn_status_string((clattn_status)err), (int)err);
}

void clear_error(clattn_context *ctx) { error_slot(ctx)[0] = '\0'; }

void set_warning(clattn_context *ctx, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->last_warning, sizeof ctx->last_warning, fmt, ap);
    va_end(ap);
}

const char *clattn_last_warning(const clattn_context *ctx) { return ctx ? ctx->last_warning : ""; }

const char *clattn_last_error(const clattn_context *ctx) { return ctx ? ctx->last_error : thread_error; }

const char *clattn_build_log(const clattn_context *ctx)
{
    return ctx && ctx->build_log ? ctx->build_log : "";
}

/* Fill in the device facts clattn needs; the cl objects are already set and retained. */
static clattn_status context_query_device(clattn_context *ctx)
{
    cl_int err = clGetDeviceInfo(ctx->device, CL_DEVICE_NAME, sizeof ctx->device_name, ctx->device_name, NULL);
    if (err != CL_SUCCESS)
        return cl_error(NULL, err, "clGetDeviceInfo(CL_DEVICE_NAME)");
    ctx->device_name[sizeof ctx->device_name - 1] = '\0';
    device_caps *c = &ctx->caps;
    cl_platform_id platform;
    if ((err = clGetDeviceInfo(ctx->device, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof c->max_alloc, &c->max_alloc,
                               NULL)) != CL_SUCCESS ||
        (err = clGetDeviceInfo(ctx->device, CL_DEVICE_TYPE, sizeof c->type, &c->type, NULL)) != CL_SUCCESS ||
        (err = clGetDeviceInfo(ctx->device, CL_DEVICE_LOCAL_MEM_SIZE, sizeof c->local_mem, &c->local_mem, NULL)) !=
            CL_SUCCESS ||
        (err = clGetDeviceInfo(ctx->device, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof c->global_mem, &c->global_mem, NULL)) !=
            CL_SUCCESS ||
        (err = clGetDeviceInfo(ctx->device, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof c->max_work_group,
                               &c->max_work_group, NULL)) != CL_SUCCESS ||
        (err = clGetDeviceInfo(ctx->device, CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT, sizeof c->native_float_width,
                               &c->native_float_width, NULL)) != CL_SUCCESS ||
        (err = clGetDeviceInfo(ctx->device, CL_DRIVER_VERSION, sizeof c->driver, c->driver, NULL)) != CL_SUCCESS ||
        (err = clGetDeviceInfo(ctx->device, CL_DEVICE_PLATFORM, sizeof platform, &platform, NULL)) != CL_SUCCESS ||
        (err = clGetPlatformInfo(platform, CL_PLATFORM_NAME, sizeof c->platform, c->platform, NULL)) != CL_SUCCESS ||
        (err = clGetPlatformInfo(platform, CL_PLATFORM_VERSION, sizeof c->platform_version, c->platform_version,
                                 NULL)) != CL_SUCCESS)
        return cl_error(NULL, err, "querying the device's limits");
    c->driver[sizeof c->driver - 1] = c->platform[sizeof c->platform - 1] = '\0';
    c->platform_version[sizeof c->platform_version - 1] = '\0';
    ctx->max_alloc = c->max_alloc;
    return CLATTN_SUCCESS;
}

static clattn_context *context_alloc(void)
{
    clattn_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        set_error(NULL, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "allocating a clattn_context");
    return ctx;
}

clattn_status clattn_context_create(clattn_context **out, const char *spec)
{
    if (!out)
        return set_error(NULL, CLATTN_ERROR_NULL_ARGUMENT, "clattn_context_create: ctx is NULL");
    *out = NULL;
    clattn_device_info info;
    clattn_status st = clattn_device_select(spec, &info);
    if (st != CLATTN_SUCCESS)
        return st;

    clattn_context *ctx = context_alloc();
    if (!ctx)
        return CLATTN_ERROR_OUT_OF_HOST_MEMORY;
    cl_int err;
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)info.platform, 0};
    ctx->device = info.device;
    ctx->context = clCreateContext(props, 1, &info.device, NULL, NULL, &err);
    if (err != CL_SUCCESS) {
        ctx->context = NULL;
        st = cl_error(NULL, err, "clCreateContext");
        goto fail;
    }
    ctx->queue = clCreateCommandQueue(ctx->context, info.device, 0, &err);
    if (err != CL_SUCCESS) {
        ctx->queue = NULL;
        st = cl_error(NULL, err, "clCreateCommandQueue");
        goto fail;
    }
    st = context_query_device(ctx);
    if (st != CLATTN_SUCCESS)
        goto fail;
    *out = ctx;
    clear_error(NULL);
    return CLATTN_SUCCESS;
fail:
    ctx->device = NULL; /* device ids from clGetDeviceIDs are not retained for root devices */
    clattn_context_free(ctx);
    return st;
}

clattn_status clattn_context_create_from_cl(clattn_context **out, cl_context context, cl_device_id device,
                                            cl_command_queue queue)
{
    if (!out)
        return set_error(NULL, CLATTN_ERROR_NULL_ARGUMENT, "clattn_context_create_from_cl: ctx is NULL");
    *out = NULL;
    if (!context || !device || !queue)
        return set_error(NULL, CLATTN_ERROR_NULL_ARGUMENT,
                         "clattn_context_create_from_cl: %s is NULL",
                         !context ? "context" : !device ? "device" : "queue");

    /* The queue must be in order and must belong to the given context and device: every stage relies
     * on commands running in the order they were enqueued. */
    cl_context queue_context;
    cl_device_id queue_device;
    cl_command_queue_properties props;
    cl_int err = clGetCommandQueueInfo(queue, CL_QUEUE_CONTEXT, sizeof queue_context, &queue_context, NULL);
    if (err == CL_SUCCESS)
        err = clGetCommandQueueInfo(queue, CL_QUEUE_DEVICE, sizeof queue_device, &queue_device, NULL);
    if (err == CL_SUCCESS)
        err = clGetCommandQueueInfo(queue, CL_QUEUE_PROPERTIES, sizeof props, &props, NULL);
    if (err != CL_SUCCESS)
        return cl_error(NULL, err, "clGetCommandQueueInfo");
    if (queue_context != context || queue_device != device)
        return set_error(NULL, CLATTN_ERROR_INVALID_VALUE,
                         "clattn_context_create_from_cl: the queue belongs to another %s",
                         queue_context != context ? "context" : "device");
    if (props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE)
        return set_error(NULL, CLATTN_ERROR_INVALID_VALUE,
                         "clattn_context_create_from_cl: the queue must be in-order");

    clattn_context *ctx = context_alloc();
    if (!ctx)
        return CLATTN_ERROR_OUT_OF_HOST_MEMORY;
    clattn_status st = CLATTN_SUCCESS;
    if ((err = clRetainContext(context)) != CL_SUCCESS) {
        st = cl_error(NULL, err, "clRetainContext");
        goto fail;
    }
    ctx->context = context;
    if ((err = clRetainDevice(device)) != CL_SUCCESS) {
        st = cl_error(NULL, err, "clRetainDevice");
        goto fail;
    }
    ctx->device = device;
    if ((err = clRetainCommandQueue(queue)) != CL_SUCCESS) {
        st = cl_error(NULL, err, "clRetainCommandQueue");
        goto fail;
    }
    ctx->queue = queue;
    st = context_query_device(ctx);
    if (st != CLATTN_SUCCESS)
        goto fail;
    *out = ctx;
    clear_error(NULL);
    return CLATTN_SUCCESS;
fail:
    clattn_context_free(ctx);
    return st;
}

void clattn_context_free(clattn_context *ctx)
{
    if (!ctx)
        return;
    if (ctx->queue)
        clFinish(ctx->queue); /* scratch buffers may still be in use by enqueued work */
    release_mems(ctx->scratch, SCRATCH_COUNT);
    kernels_release(&ctx->kernels);
    fused_release(ctx);
    if (ctx->queue)
        clReleaseCommandQueue(ctx->queue);
    if (ctx->device)
        clReleaseDevice(ctx->device); /* a no-op for root devices */
    if (ctx->context)
        clReleaseContext(ctx->context);
    free(ctx->build_log);
    free(ctx);
}

cl_context clattn_context_cl_context(const clattn_context *ctx) { return ctx ? ctx->context : NULL; }
cl_device_id clattn_context_device(const clattn_context *ctx) { return ctx ? ctx->device : NULL; }
cl_command_queue clattn_context_queue(const clattn_context *ctx) { return ctx ? ctx->queue : NULL; }
const char *clattn_context_device_name(const clattn_context *ctx) { return ctx ? ctx->device_name : ""; }

clattn_status clattn_finish(clattn_context *ctx)
{
    clattn_status st = check_context(ctx);
    if (st != CLATTN_SUCCESS)
        return st;
    cl_int err = clFinish(ctx->queue);
    return err == CL_SUCCESS ? CLATTN_SUCCESS : cl_error(ctx, err, "clFinish");
}

size_t clattn_context_temp_peak_bytes(const clattn_context *ctx) { return ctx ? ctx->scratch_peak : 0; }

void clattn_context_release_temporaries(clattn_context *ctx)
{
    if (!ctx)
        return;
    clFinish(ctx->queue); /* enqueued work may still use them */
    release_mems(ctx->scratch, SCRATCH_COUNT);
    for (int i = 0; i < SCRATCH_COUNT; i++)
        ctx->scratch_bytes[i] = 0;
    ctx->scratch_peak = 0;
}

clattn_status scratch_get(clattn_context *ctx, scratch_slot slot, size_t bytes, cl_mem *out)
{
    if (bytes == 0)
        bytes = 4;
    if (ctx->scratch[slot] && ctx->scratch_bytes[slot] >= bytes) {
        *out = ctx->scratch[slot];
        return CLATTN_SUCCESS;
    }
    if (bytes > ctx->max_alloc)
        return set_error(ctx, CLATTN_ERROR_EXCEEDS_DEVICE_LIMIT,
                         "a temporary of %zu bytes exceeds the device's maximum allocation of %llu bytes",
                         bytes, (unsigned long long)ctx->max_alloc);
    /* Releasing a buffer that enqueued commands still use is safe: OpenCL frees it after them. */
    if (ctx->scratch[slot])
        clReleaseMemObject(ctx->scratch[slot]);
    ctx->scratch[slot] = NULL;
    ctx->scratch_bytes[slot] = 0;
    static const char *const slot_names[SCRATCH_COUNT] = {"scores", "projected Q", "projected K", "projected V",
                                                          "concatenated heads", "key lengths"};
    cl_int err = INJECT_FAULT(CL_MEM_OBJECT_ALLOCATION_FAILURE);
    cl_mem mem = err == CL_SUCCESS ? clCreateBuffer(ctx->context, CL_MEM_READ_WRITE, bytes, NULL, &err) : NULL;
    if (err != CL_SUCCESS)
        return set_error(ctx, (clattn_status)err, "allocating the temporary %s (%zu bytes) failed: %s",
                         slot_names[slot], bytes, clattn_status_string((clattn_status)err));
    ctx->scratch[slot] = mem;
    ctx->scratch_bytes[slot] = bytes;
    size_t held = 0;
    for (int i = 0; i < SCRATCH_COUNT; i++)
        held += ctx->scratch_bytes[i];
    if (held > ctx->scratch_peak)
        ctx->scratch_peak = held;
    *out = mem;
    return CLATTN_SUCCESS;
}

void release_mems(cl_mem *mems, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (mems[i])
            clReleaseMemObject(mems[i]);
        mems[i] = NULL;
    }
}
