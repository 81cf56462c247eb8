/* clattn_tune: measure the projection GEMMs and the fused kernel's tiles on the context's device and
 * keep the fastest, in the context and as records with the program cache for later contexts. */
#define _POSIX_C_SOURCE 200809L
#include "cache.h"
#include "context.h"
#include "device.h"
#include "error.h"
#include "fused.h"
#include "options.h"
#include "projection.h"
#include "validate.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

/* The shape measured: a BERT-base layer's Q, K and V projections in one (X 512×768 · W 768×2304). */
#define TUNE_ROWS 512
#define TUNE_IN 768
#define TUNE_OUT 2304
/* Timed runs per candidate, after one untimed warm-up; the best counts (the least disturbed). */
#define TUNE_RUNS 3

static double seconds_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* One run of what is being tuned on its four buffers (GEMM: X, W, bias, Y; SDPA: Q, K, V, O). */
typedef clattn_status (*tune_run)(clattn_context *ctx, const cl_mem buffers[4]);

/* GFLOP/s of `run` (flops each) at its best of TUNE_RUNS after one untimed warm-up, or 0 when it fails. */
static double timed_gflops(clattn_context *ctx, tune_run run, const cl_mem buffers[4], double flops)
{
    double best = 0;
    for (int i = 0; i <= TUNE_RUNS; i++) {
        const double start = seconds_now();
        if (run(ctx, buffers) != CLATTN_SUCCESS || clFinish(ctx->queue) != CL_SUCCESS)
            return 0;
        const double gflops = flops / (seconds_now() - start) * 1e-9;
        if (i > 0 && gflops > best)
            best = gflops;
    }
    return best;
}

/* The context's current projection GEMM on the tuning shape. */
static clattn_status run_gemm(clattn_context *ctx, const cl_mem b[4])
{
    return projection_run(ctx, TUNE_ROWS, TUNE_IN, TUNE_OUT, b[0], b[1], b[2], b[3], NULL, NULL);
}

/* clattn's tiles worth trying: rows × vectors whose accumulators fit a register file. On CPUs the
 * vectors are SIMD-wide (so 18 and 24 accumulators suit 32 registers, 8–12 suit 16); on GPUs a
 * work-item's tile is a few scalars. */
static const unsigned cpu_tiles[][2] = {{4, 2}, {6, 2}, {8, 2}, {4, 3}, {6, 3}, {8, 3}, {4, 4}};
static const unsigned gpu_tiles[][2] = {{2, 2}, {4, 2}, {4, 4}, {8, 4}, {8, 8}};

/* The fused kernel's tiles worth trying (work-items per group × keys per tile × rows per work-item),
 * the device's default first, then its neighbours: on CPUs half the group (each variant is a compile of
 * 10–15 s on PoCL, so few; halving the keys per tile measured no faster), on GPUs groups of 32–128
 * work-items and tiles of 16–64 keys. The device's limits still apply (local memory, group size), as
 * for CLATTN_TILE. */
static const unsigned cpu_fused_tiles[][3] = {{64, 64, 4}, {32, 64, 4}};
static const unsigned gpu_fused_tiles[][3] = {{64, 32, 1}, {128, 32, 1}, {32, 32, 1}, {64, 16, 1}, {64, 64, 1}};
/* The SDPA measured: B = 1, H = 8, L = S = 1024, D = 64 (1.1 GFLOP). */
#define TUNE_HEADS 8
#define TUNE_LEN 1024
#define TUNE_HEAD_DIM 64

/* The fused kernel with the context's current tiles on the tuning SDPA. */
static clattn_status run_fused(clattn_context *ctx, const cl_mem b[4])
{
    clattn_sdpa_desc d = CLATTN_SDPA_DESC_INIT;
    d.batch = 1;
    d.heads = TUNE_HEADS;
    d.q_len = d.kv_len = TUNE_LEN;
    d.qk_dim = TUNE_HEAD_DIM;
    d.algorithm = CLATTN_ALGORITHM_FUSED;
    return clattn_sdpa(ctx, &d, b[0], b[1], b[2], NULL, b[3], NULL, NULL);
}

/* Every candidate tile of the fused kernel measured; the fastest kept and recorded. Skipped (tiles
 * empty) when the context's tile option fixes them. */
static clattn_status tune_fused(clattn_context *ctx, cl_mem buffer, clattn_tune_result *r)
{
    if (ctx->options.tile_set)
        return CLATTN_SUCCESS;
    const bool cpu = device_is_cpu(&ctx->caps);
    const unsigned(*tiles)[3] = cpu ? cpu_fused_tiles : gpu_fused_tiles;
    const size_t ntiles = cpu ? sizeof cpu_fused_tiles / sizeof cpu_fused_tiles[0]
                              : sizeof gpu_fused_tiles / sizeof gpu_fused_tiles[0];
    const size_t elems = (size_t)TUNE_HEADS * TUNE_LEN * TUNE_HEAD_DIM;
    cl_mem views[4];
    clattn_status st = CLATTN_SUCCESS;
    for (int i = 0; i < 4; i++) { /* Q, K, V and O: four regions of one buffer */
        const cl_buffer_region region = {i * elems * sizeof(float), elems * sizeof(float)};
        cl_int err;
        views[i] = clCreateSubBuffer(buffer, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &region, &err);
        if (err != CL_SUCCESS) {
            while (i-- > 0)
                clReleaseMemObject(views[i]);
            return cl_error(ctx, err, "making the tuning SDPA's views");
        }
    }
    size_t best = ntiles;
    for (size_t i = 0; i < ntiles && st == CLATTN_SUCCESS; i++) {
        st = fused_use_tiles(ctx, tiles[i][0], tiles[i][1], tiles[i][2]);
        const double gflops =
            st == CLATTN_SUCCESS
                ? timed_gflops(ctx, run_fused, views, 4.0 * TUNE_HEADS * TUNE_LEN * TUNE_LEN * TUNE_HEAD_DIM)
                : 0;
        clear_error(ctx); /* a tile that cannot run is just not chosen */
        r->candidates++;
        if (i == 0)
            r->fused_default_gflops = gflops;
        if (gflops > r->fused_gflops) {
            r->fused_gflops = gflops;
            best = i;
        }
    }
    for (int i = 0; i < 4; i++)
        clReleaseMemObject(views[i]);
    if (st != CLATTN_SUCCESS)
        return st;
    if (best == ntiles) /* nothing ran: the defaults stay, nothing is recorded */
        return fused_use_tiles(ctx, 0, 0, 0);
    snprintf(r->fused_tile, sizeof r->fused_tile, "%ux%ux%u", tiles[best][0], tiles[best][1], tiles[best][2]);
    char line[40];
    snprintf(line, sizeof line, "%s\n", r->fused_tile);
    cache_record_store(ctx, fused_record_name, line);
    return fused_use_tiles(ctx, tiles[best][0], tiles[best][1], tiles[best][2]);
}

clattn_status clattn_tune(clattn_context *ctx, clattn_tune_result *result)
{
    clattn_status st = check_context(ctx);
    if (st != CLATTN_SUCCESS)
        return st;
    const double start = seconds_now();
    clattn_tune_result r;
    memset(&r, 0, sizeof r);
    cl_int err;
    cl_mem buffers[4] = {NULL, NULL, NULL, NULL};
    /* X, W, bias and Y of the GEMM; the last also holds the tuning SDPA's Q, K, V and O. */
    const size_t sdpa_elems = 4 * (size_t)TUNE_HEADS * TUNE_LEN * TUNE_HEAD_DIM;
    const size_t elems[4] = {TUNE_ROWS * TUNE_IN, TUNE_IN * TUNE_OUT, TUNE_OUT,
                             TUNE_ROWS * TUNE_OUT > sdpa_elems ? TUNE_ROWS * TUNE_OUT : sdpa_elems};
    for (int i = 0; i < 4; i++) {
        buffers[i] = clCreateBuffer(ctx->context, CL_MEM_READ_WRITE, elems[i] * sizeof(float), NULL, &err);
        if (err != CL_SUCCESS) {
            st = cl_error(ctx, err, "allocating the tuning buffers");
            goto done;
        }
        /* Small values, the same everywhere: no denormals or overflow to slow a run down. */
        const float value = 1.0f / 64;
        if ((err = clEnqueueFillBuffer(ctx->queue, buffers[i], &value, sizeof value, 0, elems[i] * sizeof(float), 0,
                                       NULL, NULL)) != CL_SUCCESS) {
            st = cl_error(ctx, err, "filling the tuning buffers");
            goto done;
        }
    }

    const bool cpu = device_is_cpu(&ctx->caps);
    const size_t ntiles = cpu ? sizeof cpu_tiles / sizeof cpu_tiles[0] : sizeof gpu_tiles / sizeof gpu_tiles[0];
    gemm_choice best = {GEMM_DEFAULT, 0, 0};
    double best_gflops = 0;
    for (size_t i = 0; i <= ntiles; i++) { /* candidate 0 is CLBlast */
        gemm_choice c = {GEMM_CLBLAST, 0, 0};
        if (i > 0)
            c = (gemm_choice){GEMM_CLATTN, cpu ? cpu_tiles[i - 1][0] : gpu_tiles[i - 1][0],
                              cpu ? cpu_tiles[i - 1][1] : gpu_tiles[i - 1][1]};
        double gflops = 0;
        if (projection_use(ctx, c) == CLATTN_SUCCESS)
            gflops = timed_gflops(ctx, run_gemm, buffers, 2.0 * TUNE_ROWS * TUNE_IN * TUNE_OUT);
        clear_error(ctx); /* a candidate that cannot run is just not chosen */
        r.candidates++;
        if (i == 0)
            r.clblast_gflops = gflops;
        else if (gflops > r.clattn_gflops)
            r.clattn_gflops = gflops;
        if (gflops > best_gflops) {
            best_gflops = gflops;
            best = c;
        }
    }
    if (best.impl == GEMM_DEFAULT) {
        projection_reset(ctx); /* the next call prepares the default again */
        st = set_error(ctx, CLATTN_ERROR_BLAS, "clattn_tune: no projection GEMM ran on %s", ctx->caps.name);
        goto done;
    }
    if ((st = projection_use(ctx, best)) != CLATTN_SUCCESS)
        goto done;
    options_format_gemm(&best, r.gemm, sizeof r.gemm);
    char line[40];
    snprintf(line, sizeof line, "%s\n", r.gemm);
    cache_record_store(ctx, projection_record_name, line);
    r.gemm_gflops = best_gflops;
    if ((st = tune_fused(ctx, buffers[3], &r)) != CLATTN_SUCCESS)
        goto done;
    r.seconds = seconds_now() - start;
    if (result)
        *result = r;
done:
    for (int i = 0; i < 4; i++)
        if (buffers[i])
            clReleaseMemObject(buffers[i]);
    return st;
}
