/* The deadlines of the ring's waits (ring.c): on CLOCK_MONOTONIC (never set back, never slewed by a
 * change of the wall clock), in whole seconds and nanoseconds (no floating point in the comparison), the
 * end rounded up to the clock's nanosecond, and reached when the clock reads the end or later. A wait
 * that gives up when deadline_reached() says so has therefore waited its whole timeout, however the
 * clock and the comparison round. Header-only: tests/test_ring.c unit-tests it with the same code. */
#ifndef CLATTN_MPI_DEADLINE_H
#define CLATTN_MPI_DEADLINE_H

#include <math.h>
#include <stdbool.h>
#include <time.h>

typedef struct ring_deadline {
    struct timespec end; /* tv_nsec in [0, 1e9) */
} ring_deadline;

/* Longer timeouts are taken as this (about 31 years): the sum stays far from time_t's end. */
#define RING_DEADLINE_MAX_S 1e9

/* CLOCK_MONOTONIC now (POSIX guarantees it; should the call fail anyway, time 0, which reaches every
 * deadline no sooner than a working clock would from the same start). */
static inline struct timespec ring_clock_now(void)
{
    struct timespec t;
    if (clock_gettime(CLOCK_MONOTONIC, &t) != 0)
        t.tv_sec = 0, t.tv_nsec = 0;
    return t;
}

/* `seconds` (≥ 0; NaN counts as 0) after `start`, rounded up to the next nanosecond. */
static inline ring_deadline ring_deadline_after(struct timespec start, double seconds)
{
    if (!(seconds > 0.0))
        seconds = 0.0;
    if (seconds > RING_DEADLINE_MAX_S)
        seconds = RING_DEADLINE_MAX_S;
    const double whole = floor(seconds);
    /* The fraction's nanoseconds, up (seconds − whole is exact; the product's rounding, under 1e-7 ns,
     * is far below the clock's unit). */
    const double ns = ceil((seconds - whole) * 1e9);
    ring_deadline d;
    d.end.tv_sec = start.tv_sec + (time_t)whole;
    long nsec = start.tv_nsec + (long)ns; /* < 2e9 + 1: fits a long */
    while (nsec >= 1000000000L) {
        nsec -= 1000000000L;
        d.end.tv_sec++;
    }
    d.end.tv_nsec = nsec;
    return d;
}

/* Whether the clock reading `now` is at or past the deadline. */
static inline bool ring_deadline_reached(const ring_deadline *d, struct timespec now)
{
    return now.tv_sec > d->end.tv_sec || (now.tv_sec == d->end.tv_sec && now.tv_nsec >= d->end.tv_nsec);
}

/* Seconds from `start` to `now` (for messages and tests). */
static inline double ring_clock_seconds(struct timespec start, struct timespec now)
{
    return (double)(now.tv_sec - start.tv_sec) + (double)(now.tv_nsec - start.tv_nsec) * 1e-9;
}

#endif
