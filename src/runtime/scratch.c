/* Reused device temporaries: grown on demand, kept for the next call, freed with the context or by
 * clattn_context_release_temporaries. */
#include "scratch.h"

#include "context.h"
#include "error.h"
#include "fault.h"

#include <stdlib.h>
#include <string.h>

clattn_status scratch_get(clattn_context *ctx, scratch_slot slot, size_t bytes, cl_mem *out)
{
    scratch_pool *pool = &ctx->scratch;
    if (bytes == 0)
        bytes = 4;
    if (pool->mem[slot] && pool->bytes[slot] >= bytes) {
        *out = pool->mem[slot];
        return CLATTN_SUCCESS;
    }
    if (bytes > ctx->caps.max_alloc)
        return set_error(ctx, CLATTN_ERROR_EXCEEDS_DEVICE_LIMIT,
                         "a temporary of %zu bytes exceeds the device's maximum allocation of %llu bytes", bytes,
                         (unsigned long long)ctx->caps.max_alloc);
    /* Releasing a buffer that enqueued commands still use is safe: OpenCL frees it after them. */
    mems_release(&pool->mem[slot], 1);
    pool->bytes[slot] = 0;
    static const char *const slot_names[] = {
        "scores", "projected Q", "projected K", "projected V", "concatenated heads", "key lengths", "query offsets",
        "per-head values", "per-head values", "per-head values", "per-head values", "per-head values",
        "per-head values", "partial outputs", "partial log-sum-exps", "query row starts",
        "key row starts", "paged lengths", "block-id check flag", "transposed K", "widened Q", "widened K",
        "widened V", "float output", "backward D", "backward dQ per chunk of keys",
        "widened dO", "float dQ", "float dK", "float dV", "backward dS", "backward finiteness flag",
        "tree ancestors", "ragged work-groups", "sparse key lists", "sparse key rows", "cut GEMM input",
        "cut GEMM weights"};
    _Static_assert(sizeof slot_names / sizeof slot_names[0] == SCRATCH_COUNT, "a name for every scratch slot");
    cl_int err = INJECT_FAULT(CL_MEM_OBJECT_ALLOCATION_FAILURE);
    cl_mem mem = err == CL_SUCCESS ? clCreateBuffer(ctx->context, CL_MEM_READ_WRITE, bytes, NULL, &err) : NULL;
    if (err != CL_SUCCESS)
        return set_error(ctx, (clattn_status)err, "allocating the temporary %s (%zu bytes) failed: %s",
                         slot_names[slot], bytes, clattn_status_string((clattn_status)err));
    pool->mem[slot] = mem;
    pool->bytes[slot] = bytes;
    size_t held = 0;
    for (int i = 0; i < SCRATCH_COUNT; i++)
        held += pool->bytes[i];
    if (held > pool->peak)
        pool->peak = held;
    *out = mem;
    return CLATTN_SUCCESS;
}

void scratch_release(scratch_pool *pool)
{
    mems_release(pool->mem, SCRATCH_COUNT);
    for (int i = 0; i < SCRATCH_COUNT; i++) {
        pool->bytes[i] = 0;
        if (pool->written[i])
            clReleaseEvent(pool->written[i]);
        pool->written[i] = NULL;
        free(pool->shadow[i]);
        pool->shadow[i] = NULL;
        pool->shadow_bytes[i] = 0;
    }
    pool->peak = 0;
}

void mems_release(cl_mem *mems, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (mems[i])
            clReleaseMemObject(mems[i]);
        mems[i] = NULL;
    }
}

clattn_status scratch_upload(clattn_context *ctx, scratch_slot slot, const void *data, size_t bytes, const char *what,
                             cl_mem *out)
{
    scratch_pool *pool = &ctx->scratch;
    cl_mem buf;
    clattn_status st = scratch_get(ctx, slot, bytes, &buf);
    if (st != CLATTN_SUCCESS)
        return st;
    /* The slot's previous write must have read the host copy before it changes (in a loop of calls that
     * each read a result back, it has long been done). */
    cl_int err = pool->written[slot] ? clWaitForEvents(1, &pool->written[slot]) : CL_SUCCESS;
    if (pool->written[slot]) {
        clReleaseEvent(pool->written[slot]);
        pool->written[slot] = NULL;
    }
    if (err != CL_SUCCESS)
        return set_error(ctx, (clattn_status)err, "waiting for the last write of %s failed: %s", what,
                         clattn_status_string((clattn_status)err));
    if (pool->shadow_bytes[slot] < bytes) {
        void *grown = realloc(pool->shadow[slot], bytes);
        if (!grown)
            return set_error(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "a host copy of %s (%zu bytes)", what, bytes);
        pool->shadow[slot] = grown;
        pool->shadow_bytes[slot] = bytes;
    }
    memcpy(pool->shadow[slot], data, bytes);
    err = INJECT_FAULT(CL_OUT_OF_RESOURCES);
    if (err == CL_SUCCESS)
        err = clEnqueueWriteBuffer(ctx->queue, buf, CL_FALSE, 0, bytes, pool->shadow[slot], 0, NULL,
                                   &pool->written[slot]);
    if (err != CL_SUCCESS) {
        pool->written[slot] = NULL;
        return set_error(ctx, (clattn_status)err, "clEnqueueWriteBuffer(%s) failed: %s", what,
                         clattn_status_string((clattn_status)err));
    }
    *out = buf;
    return CLATTN_SUCCESS;
}

clattn_status scratch_upload_integers(clattn_context *ctx, scratch_slot slot, const size_t *sizes,
                                      const long long *offsets, size_t n, const char *what, cl_mem *out)
{
    cl_long *values = malloc(n * sizeof *values);
    if (!values)
        return set_error(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "copying %zu %s", n, what);
    for (size_t i = 0; i < n; i++)
        values[i] = sizes ? (cl_long)sizes[i] : (cl_long)offsets[i];
    clattn_status st = scratch_upload(ctx, slot, values, n * sizeof *values, what, out);
    free(values);
    return st;
}
