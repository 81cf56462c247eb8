/* The machine's streaming read measured natively (no OpenCL): one pinned thread per core the process
 * may run on, each summing its share of one buffer. `clattn bench` sets its bandwidth-bound cases
 * against it, runs alternated, and prints the OpenCL read-and-sum kernel (bench_stream.h) beside it. */
#ifndef CLATTN_BENCH_NATIVE_H
#define CLATTN_BENCH_NATIVE_H

#include <stdbool.h>
#include <stddef.h>

typedef struct bench_native bench_native;

/* A buffer of `bytes` (rounded down to 256-byte blocks), every page touched, with transparent huge
 * pages advised (huge_pages) or refused, and its threads started and warmed up. 0, or -1 when memory or
 * a thread could not be had. */
int bench_native_open(size_t bytes, bool huge_pages, bench_native **out);

/* Seconds of one pass: every thread reads its share once. */
double bench_native_pass(bench_native *n);

unsigned bench_native_threads(const bench_native *n);
size_t bench_native_bytes(const bench_native *n);

/* Stops the threads and frees the buffer (NULL: nothing). */
void bench_native_close(bench_native *n);

#endif
