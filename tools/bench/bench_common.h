/* What the small benchmark programs of tools/bench/ share: a clock, a sort order, a check that stops the
 * program with the library's detail when a call fails, device buffers and random inputs. */
#ifndef CLATTN_BENCH_COMMON_H
#define CLATTN_BENCH_COMMON_H

#include <clattn/clattn.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* Milliseconds of a monotonic clock. */
static inline double bench_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* qsort's order for doubles, smallest first. */
static inline int bench_by_value(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A library call that must succeed: on failure the program ends (status 1) naming it. */
#define BENCH_CHECK(ctx, call)                                                                               \
    do {                                                                                                     \
        clattn_status st_ = (call);                                                                          \
        if (st_ != CLATTN_SUCCESS) {                                                                         \
            fprintf(stderr, "%s: %s (%s)\n", #call, clattn_status_string(st_), clattn_last_error(ctx));      \
            exit(1);                                                                                         \
        }                                                                                                    \
    } while (0)

/* A buffer of `bytes` on ctx's context, filled from data (NULL: not filled); the program ends on failure. */
static inline cl_mem bench_buffer(clattn_context *ctx, size_t bytes, const void *data)
{
    cl_int err;
    cl_mem m = clCreateBuffer(clattn_context_cl_context(ctx), CL_MEM_READ_WRITE | (data ? CL_MEM_COPY_HOST_PTR : 0),
                              bytes, (void *)data, &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateBuffer of %zu bytes: %d\n", bytes, (int)err);
        exit(1);
    }
    return m;
}

/* n floats uniform in [-0.5, 0.5) from a linear congruential sequence (malloc'd); the program ends on failure. */
static inline float *bench_random_floats(size_t n, unsigned seed)
{
    float *x = malloc(n * sizeof *x);
    if (!x) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)(seed >> 8) / 16777216.0f - 0.5f;
    }
    return x;
}

/* A paged cache of `blocks` blocks of `block` rows, KVH heads of D floats, K and V random (seeds 1 and 2), its
 * table the identity (sequence b's blocks b·max_blocks …), held too in *table_host (malloc'd) — or, with
 * table_host NULL, no table (the caller's own). */
static inline clattn_paged_cache bench_paged_pool(clattn_context *ctx, size_t blocks, size_t max_blocks, size_t block,
                                                  size_t KVH, size_t D, cl_int **table_host)
{
    const size_t floats = blocks * KVH * block * D;
    clattn_paged_cache cache = CLATTN_PAGED_CACHE_INIT;
    for (int which = 0; which < 2; which++) {
        float *pool = bench_random_floats(floats, (unsigned)which + 1);
        *(which ? &cache.v_pool : &cache.k_pool) = bench_buffer(ctx, floats * sizeof(float), pool);
        free(pool);
    }
    cache.blocks = blocks, cache.block_size = block, cache.max_blocks = max_blocks;
    if (!table_host)
        return cache;
    cl_int *table = malloc(blocks * sizeof *table);
    if (!table) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < blocks; i++)
        table[i] = (cl_int)i;
    cache.block_table = bench_buffer(ctx, blocks * sizeof(cl_int), table);
    *table_host = table;
    return cache;
}

/* One way of doing a benchmark's work (method `method`): its calls enqueued on ctx's queue. */
typedef void (*bench_method)(clattn_context *ctx, int method, void *work);

/* Methods 0 … n−1 alternated — a round each to warm up (compiling their kernels), then `runs` rounds — each
 * timed to the end of its work on the context's queue; prints each one's best and median (milliseconds) under
 * names[m] and returns the bests in best[m]. */
static inline void bench_alternate(clattn_context *ctx, int n, size_t runs, bench_method run, void *work,
                                   const char *const *names, double *best)
{
    double *times = malloc((size_t)n * runs * sizeof *times);
    if (!times) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (size_t r = 0; r <= runs; r++) /* (round 0: the warm-up) */
        for (int m = 0; m < n; m++) {
            const double t0 = bench_now_ms();
            run(ctx, m, work);
            BENCH_CHECK(ctx, (clattn_status)clFinish(clattn_context_queue(ctx)));
            if (r > 0)
                times[(size_t)m * runs + r - 1] = bench_now_ms() - t0;
        }
    for (int m = 0; m < n; m++) {
        double *mine = times + (size_t)m * runs;
        qsort(mine, runs, sizeof *mine, bench_by_value);
        best[m] = mine[0];
        printf("%-9s best %9.3f ms  median %9.3f ms\n", names[m], best[m], mine[runs / 2]);
    }
    free(times);
}

#endif
