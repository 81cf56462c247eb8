/* Projections Y = X·W (+ bias): clattn's own GEMM kernel or CLBlast's, per device (see projection.c). */
#ifndef CLATTN_PROJECTION_H
#define CLATTN_PROJECTION_H

#include "clattn/clattn.h"
#include "options.h"

#include <stddef.h>

/* Build the projection kernels of ctx if they are not built yet (call before enqueuing anything, so
 * that a build failure leaves nothing half-done). */
clattn_status projection_prepare(clattn_context *ctx);

/* Y = X·W (+ bias) on validated sizes; projection_prepare must have succeeded. */
clattn_status projection_run(clattn_context *ctx, size_t rows, size_t in_dim, size_t out_dim, cl_mem x, cl_mem w,
                             cl_mem bias, cl_mem y);

void projection_release(clattn_context *ctx);

/* For tuning: replace ctx's projection state with one built for `choice` exactly (no fallback; on
 * failure the old state stays), and read back what a state runs (its tile completed). */
clattn_status projection_use(clattn_context *ctx, gemm_choice choice);
gemm_choice projection_choice(const clattn_context *ctx);

/* The name of the tuning record that holds a device's choice (options.gemm's syntax, one line). */
extern const char projection_record_name[];

#endif
