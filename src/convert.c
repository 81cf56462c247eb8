/* Storage-type conversions: one small program per (source, destination) pair, built on first use. */
#include "convert.h"

#include "context.h"
#include "dtype.h"
#include "error.h"
#include "launch.h"
#include "program.h"

#include <stdio.h>
#include <stdlib.h>


struct convert_state {
    cl_program programs[DTYPE_COUNT][DTYPE_COUNT];
    cl_kernel kernels[DTYPE_COUNT][DTYPE_COUNT][2]; /* convert, append rows */
};

void convert_release(clattn_context *ctx)
{
    if (!ctx->convert)
        return;
    for (int f = 0; f < DTYPE_COUNT; f++)
        for (int t = 0; t < DTYPE_COUNT; t++)
            program_release(&ctx->convert->programs[f][t], ctx->convert->kernels[f][t], 2);
    free(ctx->convert);
    ctx->convert = NULL;
}

/* The kernels converting `from` into `to`. */
static clattn_status kernels_get(clattn_context *ctx, clattn_dtype from, clattn_dtype to, cl_kernel **out)
{
    if (!ctx->convert && !(ctx->convert = calloc(1, sizeof *ctx->convert)))
        return set_error(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "allocating the conversions' state");
    struct convert_state *c = ctx->convert;
    if (!c->programs[from][to]) {
        static const char *const files[] = {"convert.cl"};
        static const char *const names[] = {"clattn_convert", "clattn_append_rows"};
        char options[64];
        snprintf(options, sizeof options, "-cl-std=CL1.2 -DQ_T=%d -DO_T=%d", (int)from, (int)to);
        clattn_status st = program_build_kernels(ctx, files, 1, options, names, 2, &c->programs[from][to],
                                                 c->kernels[from][to]);
        if (st != CLATTN_SUCCESS)
            return st;
    }
    *out = c->kernels[from][to];
    return CLATTN_SUCCESS;
}

clattn_status convert_elements(clattn_context *ctx, cl_mem src, clattn_dtype from, cl_mem scales, size_t row,
                               cl_mem dst, clattn_dtype to, size_t n)
{
    cl_kernel *k;
    clattn_status st = kernels_get(ctx, from, to, &k);
    if (st != CLATTN_SUCCESS)
        return st;
    kernel_args a = kernel_args_begin(k[0]);
    karg_mem(&a, src);
    karg_mem(&a, from == CLATTN_INT8 ? scales : NULL);
    karg_ulong(&a, row);
    karg_mem(&a, dst);
    karg_ulong(&a, n);
    const size_t global[1] = {n};
    return kernel_launch_auto(ctx, &a, "storage conversion", 1, global);
}

clattn_status convert_widen(clattn_context *ctx, tensor_view *t, clattn_dtype type, cl_mem scales, size_t row,
                            size_t elems, scratch_slot slot)
{
    if (type == CLATTN_FLOAT32)
        return CLATTN_SUCCESS;
    cl_mem wide = NULL;
    clattn_status st = scratch_get(ctx, slot, elems * sizeof(float), &wide);
    if (st == CLATTN_SUCCESS)
        st = convert_elements(ctx, t->buf, type, scales, row, wide, CLATTN_FLOAT32, elems);
    if (st == CLATTN_SUCCESS)
        t->buf = wide;
    return st;
}

clattn_status convert_float_target(clattn_context *ctx, tensor_view *t, clattn_dtype type, size_t elems)
{
    return type == CLATTN_FLOAT32 ? CLATTN_SUCCESS : scratch_get(ctx, SCRATCH_WIDE_O, elems * sizeof(float), &t->buf);
}

clattn_status convert_narrow(clattn_context *ctx, cl_mem wide, cl_mem out, clattn_dtype type, size_t elems)
{
    return type == CLATTN_FLOAT32 ? CLATTN_SUCCESS
                                  : convert_elements(ctx, wide, CLATTN_FLOAT32, NULL, 1, out, type, elems);
}

clattn_status append_rows(clattn_context *ctx, cl_mem rows, clattn_dtype from, size_t batch, size_t kv_heads,
                          size_t new_len, size_t dim, const append_target *t, cl_mem lengths)
{
    cl_kernel *k;
    clattn_status st = kernels_get(ctx, from, t->type, &k);
    if (st != CLATTN_SUCCESS)
        return st;
    kernel_args a = kernel_args_begin(k[1]);
    karg_mem(&a, rows);
    karg_ulong(&a, new_len);
    karg_ulong(&a, kv_heads);
    karg_ulong(&a, dim);
    karg_ulong(&a, batch);
    karg_mem(&a, t->cache);
    karg_mem(&a, t->scales);
    karg_ulong(&a, t->capacity);
    karg_mem(&a, t->table);
    karg_ulong(&a, t->cols);
    const cl_uint shift = t->shift;
    karg(&a, sizeof shift, &shift);
    karg_mem(&a, lengths);
    const size_t global[2] = {new_len, batch * kv_heads};
    return kernel_launch_auto(ctx, &a, "cache append", 2, global);
}
