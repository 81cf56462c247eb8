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

#endif
