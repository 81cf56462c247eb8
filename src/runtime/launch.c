/* Tensor views, kernel arguments set in order and launches, with one error report for the first
 * failure: shared by every kernel of every path. */
#include "launch.h"

#include <assert.h>

#include "context.h"
#include "error.h"
#include "fault.h"
#include "profile.h"
#include "validate.h"

tensor_view view_bhld(cl_mem buf, size_t heads, size_t rows, size_t cols)
{
    tensor_view v = {buf, heads * rows * cols, rows * cols, cols};
    return v;
}

tensor_view view_blhd(cl_mem buf, size_t heads, size_t rows, size_t cols)
{
    tensor_view v = {buf, rows * heads * cols, cols, heads * cols};
    return v;
}

kernel_args kernel_args_begin(cl_kernel kernel)
{
    kernel_args a = {kernel, 0, CL_SUCCESS, 0};
    return a;
}

void karg(kernel_args *a, size_t size, const void *value)
{
    if (a->err == CL_SUCCESS) {
        a->err = clSetKernelArg(a->kernel, a->next, size, value);
        if (a->err != CL_SUCCESS)
            a->failed_at = a->next;
    }
    a->next++;
}

void karg_mem(kernel_args *a, cl_mem m) { karg(a, sizeof m, &m); }
void karg_ulong(kernel_args *a, size_t v) { cl_ulong u = v; karg(a, sizeof u, &u); }
void karg_int(kernel_args *a, int v) { cl_int i = v; karg(a, sizeof i, &i); }
void karg_float(kernel_args *a, float v) { karg(a, sizeof v, &v); }

void karg_view(kernel_args *a, tensor_view t)
{
    karg_mem(a, t.buf);
    karg_ulong(a, t.batch_stride);
    karg_ulong(a, t.head_stride);
    karg_ulong(a, t.row_stride);
}

clattn_status kernel_launch(clattn_context *ctx, const kernel_args *a, const char *name, cl_uint dims,
                            const size_t *global, const size_t *local)
{
    if (a->err != CL_SUCCESS)
        return set_error(ctx, (clattn_status)a->err, "clSetKernelArg(%s, argument %u) failed: %s", name,
                         a->failed_at, clattn_status_string((clattn_status)a->err));
    assert(local && "kernel_launch needs a work-group size: see launch.h");
    cl_event event;
    cl_int err = INJECT_FAULT(CL_OUT_OF_RESOURCES);
    if (err == CL_SUCCESS)
        err = clEnqueueNDRangeKernel(ctx->queue, a->kernel, dims, NULL, global, local, 0, NULL,
                                     profile_event_slot(ctx, &event));
    if (err != CL_SUCCESS)
        return set_error(ctx, (clattn_status)err, "enqueueing the %s kernel failed: %s", name,
                         clattn_status_string((clattn_status)err));
    if (event)
        profile_record(ctx, event, name);
    return CLATTN_SUCCESS;
}

/* Largest power of two ≤ limit (≥ 1). */
static size_t pow2_floor(size_t limit)
{
    size_t p = 1;
    while (p * 2 <= limit)
        p *= 2;
    return p;
}

clattn_status kernel_launch_auto(clattn_context *ctx, const kernel_args *a, const char *name, cl_uint dims,
                                 const size_t *global)
{
    /* The runtime's own choice (a NULL local size) is not safe everywhere: PoCL 3.1 asserts on some
     * shapes when work groups are limited to a size like 3. So choose: up to 64 items along the
     * first dimension (16×16 for 2-D and 3-D grids), within what this kernel can launch. */
    size_t kernel_max = 0, item_max[3] = {1, 1, 1};
    cl_int err = clGetKernelWorkGroupInfo(a->kernel, ctx->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof kernel_max,
                                          &kernel_max, NULL);
    if (err == CL_SUCCESS)
        err = clGetDeviceInfo(ctx->device, CL_DEVICE_MAX_WORK_ITEM_SIZES, sizeof item_max, item_max, NULL);
    if (err != CL_SUCCESS)
        return cl_error(ctx, err, "querying work-group limits");
    if (kernel_max == 0)
        kernel_max = 1;
    size_t local[3] = {1, 1, 1}, rounded[3];
    local[0] = pow2_floor(dims == 1 ? 64 : 16);
    while (local[0] > kernel_max || local[0] > item_max[0])
        local[0] /= 2;
    if (dims > 1) {
        local[1] = 16;
        while (local[1] > 1 && (local[0] * local[1] > kernel_max || local[1] > item_max[1]))
            local[1] /= 2;
    }
    for (cl_uint d = 0; d < dims; d++)
        rounded[d] = (global[d] + local[d] - 1) / local[d] * local[d];
    return kernel_launch(ctx, a, name, dims, rounded, local);
}
