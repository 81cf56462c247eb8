/* Projections Y = X·W (+ bias): clattn's own GEMM kernel or CLBlast's, per device (see projection.c). */
#ifndef CLATTN_PROJECTION_H
#define CLATTN_PROJECTION_H

#include "clattn/clattn.h"
#include "options.h"
#include "tuning_tables.h"

#include <stdbool.h>
#include <stddef.h>

/* Build the projection kernels of ctx if they are not built yet (call before enqueuing anything, so
 * that a build failure leaves nothing half-done). */
clattn_status projection_prepare(clattn_context *ctx);

/* Y split into heads as it is written: row b·seq_len + i, column h·head_dim + d of Y lands at
 * (b, h, i, d) of a (B, out_dim / head_dim, seq_len, head_dim) tensor. */
typedef struct projection_heads {
    size_t seq_len, head_dim;
} projection_heads;

/* Storage types of X, of W and its bias, and of Y (no int8). */
typedef struct gemm_types {
    clattn_dtype x, w, y;
    bool exact; /* reproducible arithmetic: clattn's kernel in its exact build (cl/gemm.cl), never CLBlast */
} gemm_types;

/* Y = X·W (+ bias) on validated sizes; projection_prepare must have succeeded. heads: NULL for Y as
 * (rows, out_dim), else the split above — only where projection_splits_heads says so, or where types
 * are given: tensors in other types than float32 always run clattn's kernel. types NULL: all float. */
clattn_status projection_run(clattn_context *ctx, size_t rows, size_t in_dim, size_t out_dim, cl_mem x, cl_mem w,
                             cl_mem bias, cl_mem y, const projection_heads *heads, const gemm_types *types);

/* Whether the context's GEMM writes heads split in the same pass (clattn's kernel; CLBlast's would
 * need a pass of its own, so layers leave its output as it is and read heads strided). */
bool projection_splits_heads(clattn_context *ctx);

/* For tuning: replace ctx's projection choice with the gemm family's completed values `v` exactly, its
 * kernels built (no fallback; on failure the old choice stays); and forget the choice, so that the next
 * projection_prepare looks the family's values up again. */
clattn_status projection_use(clattn_context *ctx, const tuning_values *v);
void projection_reset(clattn_context *ctx);

#endif
