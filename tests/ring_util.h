/* What the MPI suites (test_ring.c, test_ring_options.c) share: their main. */
#ifndef CLATTN_TESTS_RING_UTIL_H
#define CLATTN_TESTS_RING_UTIL_H

#include "test_util.h"

#include <clattn/clattn_mpi.h>

/* MPI_Init; *rank and *ranks; a context on the first device and a ring over MPI_COMM_WORLD into *ctx and
 * *ring; the suite run without forking on every rank (rank 0 prints check's summary, a failing rank says
 * what failed); `after` (may be NULL; every rank calls it, so it may be collective) once the suite ran;
 * then everything freed and MPI_Finalize. Returns main's exit status: 1 on the ranks that failed. */
int ring_test_main(int argc, char **argv, const char *name, Suite *(*make_suite)(void), void (*after)(void), int *rank,
                   int *ranks, clattn_context **ctx, clattn_ring **ring);

/* A ring call failed on this rank (`rank`) with `want`, the ring naming rank `who` and `needle` in its detail. */
void ring_expect_failure(clattn_ring *r, int rank, clattn_status st, clattn_status want, int who, const char *needle);

#endif
