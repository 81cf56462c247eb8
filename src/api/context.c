/* clattn_context, the owner at the top of the library: it creates the OpenCL objects, resolves the
 * options once, and frees every part (the kernel cache, with what the paths keep in it, in one call). */
#include "context.h"

#include "program.h"
#include "validate.h"
#include "versioned.h"

#include <stdlib.h>

_Static_assert(offsetof(struct clattn_context_s, errors) == 0,
               "error.c finds a context's error state at the start of the context");

/* The first published layout of clattn_context_options (0.2.0) ends with `tile`. */
#define OPTIONS_SIZE_0_2 (offsetof(clattn_context_options, tile) + sizeof(const char *))

static clattn_context *context_alloc(void)
{
    clattn_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        set_error(NULL, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "allocating a clattn_context");
    return ctx;
}

/* The application's queue must be in order and belong to its context and device: every stage relies
 * on commands running in the order they were enqueued. */
static clattn_status check_app_queue(const char *caller, cl_context context, cl_device_id device,
                                     cl_command_queue queue, bool profile)
{
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
        return set_error(NULL, CLATTN_ERROR_INVALID_VALUE, "%s: the queue belongs to another %s",
                         caller, queue_context != context ? "context" : "device");
    if (props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE)
        return set_error(NULL, CLATTN_ERROR_INVALID_VALUE, "%s: the queue must be in-order", caller);
    if (profile && !(props & CL_QUEUE_PROFILING_ENABLE))
        return set_error(NULL, CLATTN_ERROR_INVALID_VALUE,
                         "%s: options.profile needs a queue made with CL_QUEUE_PROFILING_ENABLE", caller);
    return CLATTN_SUCCESS;
}

/* Retain the application's objects into ctx. */
static clattn_status adopt_app_objects(clattn_context *ctx, cl_context context, cl_device_id device,
                                       cl_command_queue queue)
{
    cl_int err;
    if ((err = clRetainContext(context)) != CL_SUCCESS)
        return cl_error(NULL, err, "clRetainContext");
    ctx->context = context;
    if ((err = clRetainDevice(device)) != CL_SUCCESS)
        return cl_error(NULL, err, "clRetainDevice");
    ctx->device = device;
    if ((err = clRetainCommandQueue(queue)) != CL_SUCCESS)
        return cl_error(NULL, err, "clRetainCommandQueue");
    ctx->queue = queue;
    return CLATTN_SUCCESS;
}

/* A context and queue of our own on the device the spec selects. */
static clattn_status create_own_objects(clattn_context *ctx, const char *spec, const char *source, bool profile)
{
    clattn_device_info info;
    clattn_status st = device_select_from(spec, source, &info);
    if (st != CLATTN_SUCCESS)
        return st;
    cl_int err;
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)info.platform, 0};
    ctx->context = clCreateContext(props, 1, &info.device, NULL, NULL, &err);
    if (err != CL_SUCCESS) {
        ctx->context = NULL;
        return cl_error(NULL, err, "clCreateContext");
    }
    /* Device ids from clGetDeviceIDs are root devices: retaining them is a no-op, done so that
     * clattn_context_free releases every context's device alike. */
    if ((err = clRetainDevice(info.device)) != CL_SUCCESS)
        return cl_error(NULL, err, "clRetainDevice");
    ctx->device = info.device;
    ctx->queue = clCreateCommandQueue(ctx->context, info.device, profile ? CL_QUEUE_PROFILING_ENABLE : 0, &err);
    if (err != CL_SUCCESS) {
        ctx->queue = NULL;
        return cl_error(NULL, err, "clCreateCommandQueue");
    }
    return CLATTN_SUCCESS;
}

/* Every way of creating a context ends here. `caller` names the public function in errors, and
 * `device_source` where a device spec came from when it matches nothing. */
static clattn_status context_create(clattn_context **out, const clattn_context_options *options, const char *caller,
                                    const char *device_source)
{
    *out = NULL;
    clattn_context_options opts = CLATTN_CONTEXT_OPTIONS_INIT;
    clattn_status st;
    if (options && (st = versioned_copy(NULL, options, sizeof opts, sizeof opts, OPTIONS_SIZE_0_2,
                                        "clattn_context_options", "CLATTN_CONTEXT_OPTIONS_INIT", &opts)) != CLATTN_SUCCESS)
        return st;
    if (opts.reserved != 0) /* a field in the middle since 0.4 appended `gemm` */
        return set_error(NULL, CLATTN_ERROR_INVALID_VALUE,
                         "clattn_context_options sets its reserved bytes (byte %zu), which must be 0",
                         offsetof(clattn_context_options, reserved));
    const int app_objects = (opts.opencl_context != NULL) + (opts.opencl_device != NULL) + (opts.opencl_queue != NULL);
    if (app_objects != 0 && app_objects != 3)
        return set_error(NULL, CLATTN_ERROR_NULL_ARGUMENT, "%s: options.opencl_%s is NULL (give all three or none)",
                         caller, !opts.opencl_context ? "context" : !opts.opencl_device ? "device" : "queue");
    if (app_objects == 3 &&
        (st = check_app_queue(caller, opts.opencl_context, opts.opencl_device, opts.opencl_queue, opts.profile != 0)) !=
            CLATTN_SUCCESS)
        return st;

    clattn_context *ctx = context_alloc();
    if (!ctx)
        return CLATTN_ERROR_OUT_OF_HOST_MEMORY;
    st = app_objects == 3 ? adopt_app_objects(ctx, opts.opencl_context, opts.opencl_device, opts.opencl_queue)
                          : create_own_objects(ctx, opts.device, device_source, opts.profile != 0);
    ctx->profile.enabled = opts.profile != 0;
    if (st == CLATTN_SUCCESS)
        st = device_caps_query(ctx->device, &ctx->caps);
    if (st == CLATTN_SUCCESS && ((st = options_resolve(ctx, &opts, &ctx->options)) != CLATTN_SUCCESS ||
                                 (st = tuning_options_resolve(ctx, &ctx->caps, &ctx->options, &ctx->tuning)) !=
                                     CLATTN_SUCCESS))
        set_error(NULL, st, "%s", clattn_last_error(ctx)); /* the caller gets no context to ask */
    if (st != CLATTN_SUCCESS) {
        clattn_context_free(ctx);
        return st;
    }
    *out = ctx;
    clear_error(NULL);
    return CLATTN_SUCCESS;
}

clattn_status clattn_context_create_with_options(clattn_context **out, const clattn_context_options *options)
{
    if (!out)
        return set_error(NULL, CLATTN_ERROR_NULL_ARGUMENT, "clattn_context_create_with_options: ctx is NULL");
    return context_create(out, options, "clattn_context_create_with_options", "options.device");
}

clattn_status clattn_context_create(clattn_context **out, const char *spec)
{
    if (!out)
        return set_error(NULL, CLATTN_ERROR_NULL_ARGUMENT, "clattn_context_create: ctx is NULL");
    clattn_context_options opts = CLATTN_CONTEXT_OPTIONS_INIT;
    opts.device = spec;
    return context_create(out, &opts, "clattn_context_create", "argument");
}

clattn_status clattn_context_create_from_cl(clattn_context **out, cl_context context, cl_device_id device,
                                            cl_command_queue queue)
{
    if (!out)
        return set_error(NULL, CLATTN_ERROR_NULL_ARGUMENT, "clattn_context_create_from_cl: ctx is NULL");
    if (!context || !device || !queue) {
        *out = NULL;
        return set_error(NULL, CLATTN_ERROR_NULL_ARGUMENT, "clattn_context_create_from_cl: %s is NULL",
                         !context ? "context" : !device ? "device" : "queue");
    }
    clattn_context_options opts = CLATTN_CONTEXT_OPTIONS_INIT;
    opts.opencl_context = context;
    opts.opencl_device = device;
    opts.opencl_queue = queue;
    return context_create(out, &opts, "clattn_context_create_from_cl", "argument");
}

void clattn_context_free(clattn_context *ctx)
{
    if (!ctx)
        return;
    if (ctx->queue)
        clFinish(ctx->queue); /* temporaries may still be in use by enqueued work */
    scratch_release(&ctx->scratch);
    profile_release(&ctx->profile);
    program_cache_free(ctx);
    if (ctx->queue)
        clReleaseCommandQueue(ctx->queue);
    if (ctx->device)
        clReleaseDevice(ctx->device);
    if (ctx->context)
        clReleaseContext(ctx->context);
    options_free(&ctx->options);
    error_state_free(&ctx->errors);
    free(ctx);
}

cl_context clattn_context_cl_context(const clattn_context *ctx) { return ctx ? ctx->context : NULL; }
cl_device_id clattn_context_device(const clattn_context *ctx) { return ctx ? ctx->device : NULL; }
cl_command_queue clattn_context_queue(const clattn_context *ctx) { return ctx ? ctx->queue : NULL; }
const char *clattn_context_device_name(const clattn_context *ctx) { return ctx ? ctx->caps.name : ""; }

clattn_status clattn_finish(clattn_context *ctx)
{
    clattn_status st = check_context(ctx);
    if (st != CLATTN_SUCCESS)
        return st;
    cl_int err = clFinish(ctx->queue);
    return err == CL_SUCCESS ? CLATTN_SUCCESS : cl_error(ctx, err, "clFinish");
}

size_t clattn_context_temp_peak_bytes(const clattn_context *ctx) { return ctx ? ctx->scratch.peak : 0; }

void clattn_context_release_temporaries(clattn_context *ctx)
{
    if (!ctx)
        return;
    clFinish(ctx->queue); /* enqueued work may still use them */
    scratch_release(&ctx->scratch);
}
