/* Storage-type conversions: one small program per (source, destination) pair, built on first use. */
#include "convert.h"

#include "context.h"
#include "dtype.h"
#include "error.h"
#include "launch.h"
#include "program.h"

#include <stdio.h>
#include <stdlib.h>


/* The kernels converting `from` (its chunks `from_chunk` where it is a token format) into `to`, a format
 * that is not (params.c: family_convert). */
static clattn_status kernels_get(clattn_context *ctx, clattn_dtype from, chunk_shape from_chunk, clattn_dtype to,
                                 const family_build **out)
{
    char options[TYPES_OPTIONS_MAX];
    tensor_types t = {.q = from, .k = CLATTN_FLOAT32, .v = CLATTN_FLOAT32, .o = to};
    t.q_chunk = from_chunk;
    tensor_types_options(t, options, sizeof options);
    return program_get(ctx, &family_convert, options, 0, 0, NULL, out);
}

static clattn_status convert_run(clattn_context *ctx, cl_mem src, clattn_dtype from, chunk_shape from_chunk,
                                 cl_mem scales, size_t row, cl_mem dst, clattn_dtype to, size_t n)
{
    const family_build *fb;
    clattn_status st = kernels_get(ctx, from, from_chunk, to, &fb);
    if (st != CLATTN_SUCCESS)
        return st;
    const convert_params p = {src, dtype_format_of(from)->scales != ROW_SCALES_NONE ? scales : NULL, row, dst, n};
    kernel_args a = kernel_args_begin(fb->kernels[0]);
    params_bind(&a, &params_convert, &p, fb->features);
    const size_t global[1] = {n};
    return kernel_launch_auto(ctx, &a, "storage conversion", 1, global);
}

clattn_status convert_elements(clattn_context *ctx, cl_mem src, clattn_dtype from, cl_mem scales, size_t row,
                               cl_mem dst, clattn_dtype to, size_t n)
{
    return convert_run(ctx, src, from, (chunk_shape){0, 0}, scales, row, dst, to, n);
}

clattn_status convert_widen(clattn_context *ctx, tensor_view *t, clattn_dtype type, chunk_shape chunk, cl_mem scales,
                            size_t row, size_t elems, scratch_slot slot)
{
    if (type == CLATTN_FLOAT32)
        return CLATTN_SUCCESS;
    cl_mem wide = NULL;
    clattn_status st = scratch_get(ctx, slot, elems * sizeof(float), &wide);
    if (st == CLATTN_SUCCESS)
        st = convert_run(ctx, t->buf, type, chunk, scales, row, wide, CLATTN_FLOAT32, elems);
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

/* The two launches of a token format's append (cl/append_tokens.cl): the groups it completes, then the
 * tail and the chunks' counts, in that order (the first reads tail rows the second may overwrite). */
static clattn_status append_tokens(clattn_context *ctx, const append_rows_params *p, clattn_dtype from,
                                   clattn_dtype to, chunk_shape chunk)
{
    const dtype_format *f = dtype_format_of(to);
    char options[TYPES_OPTIONS_MAX];
    tensor_types types = {.q = from, .k = CLATTN_FLOAT32, .v = CLATTN_FLOAT32, .o = to, .o_chunk = chunk};
    tensor_types_options(types, options, sizeof options);
    const family_build *fb;
    clattn_status st = program_get(ctx, &family_append_tokens, options, 0, 0, NULL, &fb);
    const size_t heads = p->batch * p->kv_heads, groups = p->new_len / f->tokens + 1;
    const size_t group_items[3] = {p->dim * f->bits / 8 + 1, groups, heads}, tail_items[3] = {p->dim, p->new_len, heads};
    for (int k = 0; k < 2 && st == CLATTN_SUCCESS; k++) {
        kernel_args a = kernel_args_begin(fb->kernels[k]);
        params_bind(&a, k ? &params_append_token_tail : &params_append_token_groups, p, fb->features);
        st = kernel_launch_auto(ctx, &a, k ? "cache append (tail)" : "cache append (groups)", 3,
                                k ? tail_items : group_items);
    }
    return st;
}

clattn_status append_rows(clattn_context *ctx, cl_mem rows, clattn_dtype from, size_t batch, size_t kv_heads,
                          size_t new_len, size_t dim, const append_target *t, cl_mem lengths)
{
    const chunk_shape chunk = {t->table ? (size_t)1 << t->shift : t->capacity, dim};
    const append_rows_params p = {rows,     new_len,  kv_heads, dim,    batch,   t->cache,
                                  t->scales, t->capacity, t->table, t->cols, t->shift, lengths};
    if (dtype_is_token(t->type))
        return append_tokens(ctx, &p, from, t->type, chunk);
    const family_build *fb;
    clattn_status st = kernels_get(ctx, from, (chunk_shape){0, 0}, t->type, &fb);
    if (st != CLATTN_SUCCESS)
        return st;
    kernel_args a = kernel_args_begin(fb->kernels[1]);
    params_bind(&a, &params_append_rows, &p, fb->features);
    const size_t global[2] = {new_len, batch * kv_heads}; /* (a row a work-item) */
    return kernel_launch_auto(ctx, &a, "cache append", 2, global);
}
