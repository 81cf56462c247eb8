/* What the ranks of one ring call must agree on (src/mpi/ring.c), and the verdict over every rank's.
 * A fingerprint travels as raw bytes, so it opens with a text that says what makes raw bytes
 * comparable — architecture, byte order, the widths of pointers and integers, the fingerprint's own
 * size —, compared before anything else: a rank of another kind is refused, never misread. */
#ifndef CLATTN_MPI_FINGERPRINT_H
#define CLATTN_MPI_FINGERPRINT_H

#include "clattn/clattn_mpi.h"

#include <stdint.h>

#define RING_PLATFORM_BYTES 96
/* The fields: every option of src/base/call_options.def whose `result` is 1, and the layout. */
#define RING_NAME_IF_0(name)
#define RING_NAME_IF_1(name) name,
#define RING_COUNT_IF_0 0
#define RING_COUNT_IF_1 1
enum {
    RING_FIELDS = 1 /* the layout */
#define CLATTN_OPTION(name, kind, type, def, limit, range, calls, result, ...) +RING_COUNT_IF_##result
#define CLATTN_SDPA_OPTION CLATTN_OPTION
#define CLATTN_MASKS_OPTION CLATTN_OPTION
#include "call_options.def"
#undef CLATTN_OPTION
#undef CLATTN_SDPA_OPTION
#undef CLATTN_MASKS_OPTION
};

typedef struct ring_fingerprint {
    char platform[RING_PLATFORM_BYTES]; /* text: readable whatever the other rank's byte order */
    int32_t status;                     /* this rank's own checks */
    int32_t pad;
    uint64_t field[RING_FIELDS];
    char detail[256];
} ring_fingerprint;

/* This process's platform text (NUL-terminated). */
void ring_platform(char out[RING_PLATFORM_BYTES]);

/* A fingerprint of a valid (already read and checked) descriptor: the platform and every field that must
 * agree, arrays by a hash of their contents. */
void ring_fingerprint_fill(const clattn_sdpa_desc *d, clattn_ring_layout layout, ring_fingerprint *f);

/* The verdict over every rank's fingerprint (all[i] is rank i's): first a rank of another platform than
 * rank 0 (CLATTN_ERROR_COMMUNICATION), then the first rank that failed its own checks (its status), then
 * the first field any rank has otherwise than rank 0 (CLATTN_ERROR_SHAPE_MISMATCH). On a failure,
 * *failed_rank and detail (cap bytes) say who and why. `least_rows` is min(L, S) of this rank's
 * descriptor, or 0 when it had none: P > L or S fails every rank alike, and the rank named is then the
 * first left without rows. The fingerprints' texts are NUL-terminated in place. */
clattn_status ring_fingerprints_verdict(ring_fingerprint *all, int ranks, size_t least_rows, int *failed_rank,
                                        char *detail, size_t cap);

#endif
