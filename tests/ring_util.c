/* The MPI suites' main (ring_util.h). */
#include "ring_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ring_expect_failure(clattn_ring *r, int rank, clattn_status st, clattn_status want, int who, const char *needle)
{
    ck_assert_msg(st == want, "%s: rank %d: %s, expected %s (%s)", tu_label(), rank, clattn_status_string(st),
                  clattn_status_string(want), clattn_ring_last_error(r));
    ck_assert_msg(clattn_ring_failed_rank(r) == who, "%s: rank %d: failed rank %d, expected %d (%s)", tu_label(),
                  rank, clattn_ring_failed_rank(r), who, clattn_ring_last_error(r));
    ck_assert_msg(strstr(clattn_ring_last_error(r), needle), "%s: rank %d: detail \"%s\" lacks \"%s\"", tu_label(),
                  rank, clattn_ring_last_error(r), needle);
}

int ring_test_main(int argc, char **argv, const char *name, Suite *(*make_suite)(void), void (*after)(void), int *rank,
                   int *ranks, clattn_context **ctx, clattn_ring **ring)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, ranks);
    clattn_status st = clattn_context_create(ctx, NULL);
    int failed = 0;
    if (st != CLATTN_SUCCESS) {
        fprintf(stderr, "rank %d: no OpenCL device: %s (%s)\n", *rank, clattn_status_string(st), clattn_last_error(NULL));
        failed = 1;
    } else if ((st = clattn_ring_create(ring, *ctx, MPI_COMM_WORLD, 120.0)) != CLATTN_SUCCESS) {
        fprintf(stderr, "rank %d: clattn_ring_create: %s\n", *rank, clattn_ring_last_error(NULL));
        failed = 1;
    }
    MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (!failed) {
        SRunner *sr = srunner_create(make_suite());
        srunner_set_fork_status(sr, CK_NOFORK);
        srunner_run_all(sr, *rank == 0 ? CK_NORMAL : CK_SILENT);
        failed = tu_srunner_exit(sr) != 0; /* (a rank on which no check ran fails too) */
        if (failed) { /* (the other ranks run silent: say here what failed) */
            fprintf(stderr, "rank %d: %d check(s) failed\n", *rank, srunner_ntests_failed(sr));
            TestResult **results = srunner_failures(sr);
            for (int i = 0; results && i < srunner_ntests_failed(sr); i++)
                fprintf(stderr, "rank %d: %s:%d: %s\n", *rank, tr_lfile(results[i]), tr_lno(results[i]),
                        tr_msg(results[i]));
            free(results);
        }
        srunner_free(sr);
        tu_release_host();
        if (after)
            after();
    }
    clattn_ring_free(*ring);
    clattn_context_free(*ctx);
    int any = failed;
    MPI_Allreduce(MPI_IN_PLACE, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (*rank == 0 && any)
        printf("%s: P %d: a rank failed (see its messages)\n", name, *ranks);
    MPI_Finalize();
    return failed ? 1 : 0;
}
