/* The device's streaming-read bandwidth, measured by a plain read-and-sum kernel: the ceiling of every
 * bandwidth-bound case (decode reads its K/V cache once), reported by `clattn bench` beside them; and
 * the benchmark's timing helpers. */
#ifndef CLATTN_BENCH_STREAM_H
#define CLATTN_BENCH_STREAM_H

#include "clattn/clattn.h"

/* Monotonic seconds, and a qsort comparison of doubles: the benchmark's timing helpers. */
double bench_now_seconds(void);
int bench_compare_doubles(const void *a, const void *b);

/* Read-and-sum over a buffer of `bytes` (rounded down to 64-byte vectors) on ctx's device and queue:
 * GB/s of the median of several runs after a warm-up. An OpenCL error code on failure. */
cl_int bench_stream_gbps(clattn_context *ctx, size_t bytes, double *gbps);

#endif
