/* Projections Y = X·W (+ bias): CLBlast's GEMM where it runs, clattn's own matmul kernel elsewhere. */
#ifndef CLATTN_PROJECTION_H
#define CLATTN_PROJECTION_H

#include "clattn/clattn.h"

#include <stddef.h>

/* Build the projection kernels of ctx if they are not built yet (call before enqueuing anything, so
 * that a build failure leaves nothing half-done). */
clattn_status projection_prepare(clattn_context *ctx);

/* Y = X·W (+ bias) on validated sizes; projection_prepare must have succeeded. */
clattn_status projection_run(clattn_context *ctx, size_t rows, size_t in_dim, size_t out_dim, cl_mem x, cl_mem w,
                             cl_mem bias, cl_mem y);

void projection_release(clattn_context *ctx);

#endif
