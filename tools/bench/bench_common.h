/* What the small benchmark programs of tools/bench/ share: a clock, a sort order, and a check that stops the
 * program with the library's detail when a call fails. */
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

#endif
