/* Setting a kernel's arguments in order and launching it, with one error report for the first
 * failure: shared by the staged kernels and the fused one. */
#include "internal.h"

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
    cl_int err = clEnqueueNDRangeKernel(ctx->queue, a->kernel, dims, NULL, global, local, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return set_error(ctx, (clattn_status)err, "enqueueing the %s kernel failed: %s", name,
                         clattn_status_string((clattn_status)err));
    return CLATTN_SUCCESS;
}
