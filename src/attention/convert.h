/* Storage-type conversions on the device (cl/convert.cl): whole tensors widened to float or rounded
 * into their type, and new K/V rows written into a dense or paged cache in the cache's type (int8
 * quantised, a scale per row). */
#ifndef CLATTN_CONVERT_H
#define CLATTN_CONVERT_H

#include "clattn/clattn.h"
#include "dtype.h"
#include "launch.h"
#include "scratch.h"

#include <stddef.h>

/* The first n elements of src (type `from`; an int8 source's rows of `row` elements scaled by `scales`)
 * into dst (type `to`, not int8): a view's strides are kept, since its whole extent is converted. */
clattn_status convert_elements(clattn_context *ctx, cl_mem src, clattn_dtype from, cl_mem scales, size_t row,
                               cl_mem dst, clattn_dtype to, size_t n);

/* A view's tensor as floats, for code that computes on floats only: the view itself when `type` is
 * float32 (`chunk`: its chunks where it is a token format), else its first `elems` elements widened into the scratch slot `slot` (an int8 tensor's rows of
 * `row` elements scaled by `scales`), the view's strides kept. */
clattn_status convert_widen(clattn_context *ctx, tensor_view *t, clattn_dtype type, chunk_shape chunk, cl_mem scales,
                            size_t row, size_t elems, scratch_slot slot);

/* The other way, for an output: where code computing on floats writes an output stored as `type` — the
 * view itself when float32, else a float temporary of `elems` (the scratch slot SCRATCH_WIDE_O), which
 * convert_narrow then rounds into the output `out` (nothing to do for float32). */
clattn_status convert_float_target(clattn_context *ctx, tensor_view *t, clattn_dtype type, size_t elems);
clattn_status convert_narrow(clattn_context *ctx, cl_mem wide, cl_mem out, clattn_dtype type, size_t elems);

/* Where clattn_append_rows writes: a dense cache of `capacity` rows per head (table NULL), or a paged
 * pool through a block table of `cols` columns and blocks of 2^shift rows. */
typedef struct append_target {
    cl_mem cache, scales; /* scales: an int8 cache's, else NULL */
    clattn_dtype type;
    size_t capacity;
    cl_mem table;
    size_t cols;
    unsigned shift;
} append_target;

/* rows (batch, kv_heads, new_len, dim) of type `from` appended at rows lengths[b] … of each head
 * (lengths: a device buffer of `batch` cl_ulong). */
clattn_status append_rows(clattn_context *ctx, cl_mem rows, clattn_dtype from, size_t batch, size_t kv_heads,
                          size_t new_len, size_t dim, const append_target *t, cl_mem lengths);

#endif
