/* clattn_tune: every kernel family's candidates (tuning_tables.c) measured on the context's device on
 * one shape each, the fastest kept, in the context and as the family's tuning record for later
 * contexts. A family the options fix is not measured. */
#define _POSIX_C_SOURCE 200809L
#include "context.h"
#include "error.h"
#include "program.h"
#include "projection.h"
#include "tuning.h"
#include "validate.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

/* Timed runs per candidate, after one untimed warm-up; the best counts (the least disturbed). */
#define TUNE_RUNS 3
/* Rounds over a family's candidates. */
#define TUNE_ROUNDS 2
/* More candidates than any family's table holds. */
#define TUNE_MAX_CANDIDATES 16

static double seconds_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- the shapes measured ------------------------------------------------------------------------ */

/* The projection GEMM: a BERT-base layer's Q, K and V projections in one (X 512×768 · W 768×2304). */
#define GEMM_ROWS 512
#define GEMM_IN 768
#define GEMM_OUT 2304
static clattn_status run_gemm(clattn_context *ctx, const cl_mem b[4])
{
    return projection_run(ctx, GEMM_ROWS, GEMM_IN, GEMM_OUT, b[0], b[1], b[2], b[3], NULL, NULL);
}

/* An SDPA on buffers Q, K, V and O of one call's sizes. */
static clattn_status run_sdpa(clattn_context *ctx, const cl_mem b[4], size_t heads, size_t kv_heads, size_t q_len,
                              size_t kv_len, size_t dim, clattn_algorithm algorithm)
{
    clattn_sdpa_desc d = CLATTN_SDPA_DESC_INIT;
    d.batch = 1;
    d.heads = heads;
    d.kv_heads = kv_heads;
    d.q_len = q_len;
    d.kv_len = kv_len;
    d.qk_dim = dim;
    d.algorithm = algorithm;
    return clattn_sdpa(ctx, &d, b[0], b[1], b[2], NULL, b[3], NULL, NULL);
}

/* The fused kernel: B = 1, H = 8, L = S = 1024, D = 64 (1.1 GFLOP). */
static clattn_status run_fused(clattn_context *ctx, const cl_mem b[4])
{
    return run_sdpa(ctx, b, 8, 8, 1024, 1024, 64, CLATTN_ALGORITHM_FUSED);
}

/* The decode kernels: a step of speculative decoding with grouped queries (L = 4; 32 query heads over
 * 8 K/V heads, so 16 packed rows a K/V head) over 4096 cached rows of D = 128: 32 MiB of K and V. */
static clattn_status run_decode(clattn_context *ctx, const cl_mem b[4])
{
    return run_sdpa(ctx, b, 32, 8, 4, 4096, 128, CLATTN_ALGORITHM_DECODE);
}

/* The staged kernels: B = 1, H = 8, L = S = 512, D = 64. */
static clattn_status run_staged(clattn_context *ctx, const cl_mem b[4])
{
    return run_sdpa(ctx, b, 8, 8, 512, 512, 64, CLATTN_ALGORITHM_STAGED);
}

/* Make family f's candidate `v` (completed) the one that runs: strictly, for the GEMM (a candidate that
 * does not build must fail, not fall back to the other GEMM). */
static clattn_status apply_values(clattn_context *ctx, tuning_family f, const tuning_values *v)
{
    return f == TUNING_GEMM ? projection_use(ctx, v) : tuning_use(ctx, f, v);
}

typedef struct tune_probe {
    const char *shape, *unit;
    size_t elems[4]; /* floats of the four buffers */
    double work;     /* flops, or bytes read, per run */
    clattn_status (*run)(clattn_context *ctx, const cl_mem buffers[4]);
} tune_probe;

static const tune_probe probes[TUNING_FAMILIES] = {
    [TUNING_GEMM] = {"X 512x768 . W 768x2304", "GFLOP/s",
                     {GEMM_ROWS * GEMM_IN, GEMM_IN * GEMM_OUT, GEMM_OUT, GEMM_ROWS * GEMM_OUT},
                     2.0 * GEMM_ROWS * GEMM_IN * GEMM_OUT, run_gemm},
    [TUNING_FUSED] = {"SDPA B=1 H=8 L=S=1024 D=64", "GFLOP/s",
                      {8 * 1024 * 64, 8 * 1024 * 64, 8 * 1024 * 64, 8 * 1024 * 64},
                      4.0 * 8 * 1024 * 1024 * 64, run_fused},
    [TUNING_DECODE] = {"decode B=1 H=32 over 8 K/V heads, L=4, S=4096, D=128", "GB/s",
                       {32 * 4 * 128, 8 * 4096 * 128, 8 * 4096 * 128, 32 * 4 * 128},
                       2.0 * 8 * 4096 * 128 * sizeof(float), run_decode},
    [TUNING_STAGED] = {"SDPA B=1 H=8 L=S=512 D=64, staged", "GFLOP/s",
                       {8 * 512 * 64, 8 * 512 * 64, 8 * 512 * 64, 8 * 512 * 64},
                       4.0 * 8 * 512 * 512 * 64, run_staged},
};

/* Speed of the probe (work per run over its best time, in G units), or 0 when it fails. */
static double timed_speed(clattn_context *ctx, const tune_probe *p, const cl_mem buffers[4])
{
    double best = 0;
    for (int i = 0; i <= TUNE_RUNS; i++) {
        const double start = seconds_now();
        if (p->run(ctx, buffers) != CLATTN_SUCCESS || clFinish(ctx->queue) != CL_SUCCESS)
            return 0;
        const double speed = p->work / (seconds_now() - start) * 1e-9;
        if (i > 0 && speed > best)
            best = speed;
    }
    return best;
}

/* The probe's buffers, filled with small values, the same everywhere (no denormals or overflow to slow
 * a run down). */
static clattn_status make_buffers(clattn_context *ctx, const tune_probe *p, cl_mem b[4])
{
    for (int i = 0; i < 4; i++) {
        cl_int err;
        b[i] = clCreateBuffer(ctx->context, CL_MEM_READ_WRITE, p->elems[i] * sizeof(float), NULL, &err);
        if (err != CL_SUCCESS)
            return cl_error(ctx, err, "allocating the tuning buffers");
        const float value = 1.0f / 64;
        if ((err = clEnqueueFillBuffer(ctx->queue, b[i], &value, sizeof value, 0, p->elems[i] * sizeof(float), 0,
                                       NULL, NULL)) != CL_SUCCESS)
            return cl_error(ctx, err, "filling the tuning buffers");
    }
    return CLATTN_SUCCESS;
}

/* What one family's tuning measured. */
typedef struct family_outcome {
    clattn_tune_family report;
    unsigned count;                           /* candidates */
    tuning_values values[TUNE_MAX_CANDIDATES]; /* completed */
    double speed[TUNE_MAX_CANDIDATES];        /* 0: did not run */
} family_outcome;

static bool same_values(const tuning_values *a, const tuning_values *b) { return memcmp(a, b, sizeof *a) == 0; }

/* Every candidate of family f measured; the fastest in use and recorded. Nothing ran: the family's
 * lookup is left as it was (and for the GEMM, CLATTN_ERROR_BLAS). */
static clattn_status tune_family(clattn_context *ctx, tuning_family f, family_outcome *o)
{
    const tune_probe *p = &probes[f];
    memset(o, 0, sizeof *o);
    o->report.family = tuning_tables[f].name;
    o->report.shape = p->shape;
    o->report.unit = p->unit;
    tuning_values dflt = tuning_defaults(&ctx->caps, &ctx->tuning, f), now;
    tuning_complete(&ctx->caps, &ctx->tuning, f, &dflt);
    tuning_format(f, &dflt, o->report.device_default, sizeof o->report.device_default);
    clattn_status st = tuning_lookup(ctx, f, &now, NULL);
    if (st != CLATTN_SUCCESS)
        return st;
    if (tuning_fixed(ctx, f)) {
        o->report.fixed = 1;
        tuning_format(f, &now, o->report.chosen, sizeof o->report.chosen);
        return CLATTN_SUCCESS;
    }
    const tuning_values *candidates = tuning_candidates(&ctx->caps, &ctx->tuning, f, &o->count);
    cl_mem buffers[4] = {NULL, NULL, NULL, NULL};
    st = make_buffers(ctx, p, buffers);
    for (unsigned i = 0; i < o->count; i++) {
        o->values[i] = candidates[i];
        tuning_complete(&ctx->caps, &ctx->tuning, f, &o->values[i]);
    }
    /* Rounds over all candidates, each candidate's best counting: measured once each, the first one
     * ran on a machine still waking up (its threads, its caches) and came out up to 1.4× slower. */
    bool runs[TUNE_MAX_CANDIDATES];
    for (unsigned i = 0; i < o->count; i++)
        runs[i] = true;
    for (int round = 0; round < TUNE_ROUNDS; round++)
        for (unsigned i = 0; i < o->count && st == CLATTN_SUCCESS; i++) {
            if (!runs[i])
                continue;
            double speed = 0;
            if ((st = apply_values(ctx, f, &o->values[i])) == CLATTN_SUCCESS)
                speed = timed_speed(ctx, p, buffers);
            else if (st != CLATTN_ERROR_OUT_OF_HOST_MEMORY)
                st = CLATTN_SUCCESS; /* a candidate that cannot run is just not chosen */
            clear_error(ctx);
            runs[i] = speed > 0;
            if (speed > o->speed[i])
                o->speed[i] = speed;
        }
    unsigned best = o->count;
    for (unsigned i = 0; i < o->count; i++) {
        if (same_values(&o->values[i], &dflt))
            o->report.default_speed = o->speed[i];
        if (o->speed[i] > 0 && (best == o->count || o->speed[i] > o->speed[best]))
            best = i;
    }
    for (int i = 0; i < 4; i++)
        if (buffers[i])
            clReleaseMemObject(buffers[i]);
    o->report.candidates = o->count;
    if (st == CLATTN_SUCCESS && best == o->count) { /* nothing ran: the lookup's values stay, unrecorded */
        if (f == TUNING_GEMM) {
            projection_reset(ctx); /* the next call prepares the default again */
            return set_error(ctx, CLATTN_ERROR_BLAS, "clattn_tune: no projection GEMM ran on %s", ctx->caps.name);
        }
        st = tuning_use(ctx, f, NULL);
        tuning_format(f, &now, o->report.chosen, sizeof o->report.chosen);
        return st;
    }
    if (st != CLATTN_SUCCESS || (st = apply_values(ctx, f, &o->values[best])) != CLATTN_SUCCESS ||
        (st = tuning_use(ctx, f, &o->values[best])) != CLATTN_SUCCESS)
        return st;
    tuning_record(ctx, f, &o->values[best]);
    tuning_format(f, &o->values[best], o->report.chosen, sizeof o->report.chosen);
    o->report.speed = o->speed[best];
    return CLATTN_SUCCESS;
}

static clattn_status tune_all(clattn_context *ctx, family_outcome out[TUNING_FAMILIES])
{
    for (int f = 0; f < TUNING_FAMILIES; f++) {
        clattn_status st = tune_family(ctx, (tuning_family)f, &out[f]);
        if (st != CLATTN_SUCCESS)
            return st;
    }
    return CLATTN_SUCCESS;
}

/* The last tuning's figures, kept beside the context's programs for clattn_tune_report. */
typedef struct tune_reports {
    bool done;
    clattn_tune_family families[TUNING_FAMILIES];
} tune_reports;

static tune_reports *reports_of(clattn_context *ctx)
{
    static const char key = 0;
    return program_path_state(ctx, &key, sizeof(tune_reports), NULL);
}

clattn_status clattn_tune_report(clattn_context *ctx, clattn_tune_family *families, size_t capacity, size_t *count)
{
    clattn_status st = check_context(ctx);
    if (st != CLATTN_SUCCESS)
        return st;
    if (!count || (!families && capacity))
        return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "clattn_tune_report: %s is NULL",
                         !count ? "count" : "families");
    const tune_reports *r = reports_of(ctx);
    if (!r)
        return CLATTN_ERROR_OUT_OF_HOST_MEMORY;
    if (!r->done)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "clattn_tune_report: clattn_tune has not run on this context");
    *count = TUNING_FAMILIES;
    if (capacity < TUNING_FAMILIES)
        return set_error(ctx, CLATTN_ERROR_BUFFER_TOO_SMALL,
                         "clattn_tune_report: capacity %zu, but clattn has %d kernel families", capacity,
                         TUNING_FAMILIES);
    memcpy(families, r->families, sizeof r->families);
    return CLATTN_SUCCESS;
}

clattn_status clattn_tune(clattn_context *ctx, clattn_tune_result *result)
{
    clattn_status st = check_context(ctx);
    if (st != CLATTN_SUCCESS)
        return st;
    const double start = seconds_now();
    tune_reports *reports = reports_of(ctx);
    if (!reports)
        return CLATTN_ERROR_OUT_OF_HOST_MEMORY;
    family_outcome out[TUNING_FAMILIES];
    if ((st = tune_all(ctx, out)) != CLATTN_SUCCESS)
        return st;
    reports->done = true;
    for (int f = 0; f < TUNING_FAMILIES; f++)
        reports->families[f] = out[f].report;
    clattn_tune_result r;
    memset(&r, 0, sizeof r);
    /* The 0.4 figures: the GEMMs (CLBlast's, clattn's fastest tile) and the fused tiles. */
    const family_outcome *g = &out[TUNING_GEMM], *fu = &out[TUNING_FUSED];
    snprintf(r.gemm, sizeof r.gemm, "%.31s", g->report.chosen); /* "clattn:16x8" at the longest */
    r.gemm_gflops = g->report.speed;
    for (unsigned i = 0; i < g->count; i++) {
        double *slot = g->values[i].v[0] == TUNING_GEMM_CLBLAST ? &r.clblast_gflops : &r.clattn_gflops;
        if (g->speed[i] > *slot)
            *slot = g->speed[i];
    }
    if (fu->report.speed > 0) { /* options.tile's syntax: MxNxR */
        tuning_values t;
        if ((st = tuning_lookup(ctx, TUNING_FUSED, &t, NULL)) != CLATTN_SUCCESS)
            return st;
        snprintf(r.fused_tile, sizeof r.fused_tile, "%ux%ux%u", t.v[0], t.v[1], t.v[2]);
    }
    r.fused_gflops = fu->report.speed;
    r.fused_default_gflops = fu->report.default_speed;
    r.candidates = g->count + fu->count;
    r.seconds = seconds_now() - start;
    if (result)
        *result = r;
    return CLATTN_SUCCESS;
}
