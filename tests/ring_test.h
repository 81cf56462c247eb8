/*
 * What the parts of test_ring share (test_ring.c: rank and size, shards, the table, memory, and the
 * program's main; test_ring_failures.c: fingerprints, bad calls, failing ranks, deadlines;
 * test_ring_reproducible.c: reproducible arithmetic).
 */
#ifndef CLATTN_RING_TEST_H
#define CLATTN_RING_TEST_H

#include "ring_util.h"

#define CONTIG CLATTN_RING_CONTIGUOUS
#define ZIGZAG CLATTN_RING_ZIGZAG

extern int rank, ranks;      /* this process's rank in MPI_COMM_WORLD, and its size */
extern clattn_context *ctx;  /* every rank's context on the first device */
extern clattn_ring *ring;    /* the suite's ring over MPI_COMM_WORLD */

/* test_ring_failures.c's tests, in the order every rank runs them: the fingerprints' verdict and the
 * deadlines (unit tests); the bad calls, older structs, a failing, a stalled and (last) a dead rank. */
void ring_add_unit_tests(TCase *tc);
void ring_add_failure_tests(TCase *tc);
/* test_ring_reproducible.c: the ring in reproducible arithmetic, each rank's rows one process's bits. */
void ring_add_reproducible_tests(TCase *tc);

#endif
