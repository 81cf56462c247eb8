/* What the files of the ring (ring attention over MPI, include/clattn/clattn_mpi.h) share: the ring's
 * fields, its MPI transport (transport.c: errors, waits with timeouts and notices, exchanges among all
 * ranks) and its collective checks (check.c). shard.c cuts rows into shards; ring.c runs the steps. */
#ifndef CLATTN_MPI_RING_H
#define CLATTN_MPI_RING_H

#include "clattn/clattn_mpi.h"

#include <stdbool.h>
#include <stddef.h>

enum { TAG_CHECK = 1, TAG_KEYS = 2, TAG_VALUES = 3, TAG_STATUS = 4, TAG_NOTICE = 5 };

/* A notice: what a rank that gave up on a wait tells every other, as text ("<rank it waited on> <what>",
 * readable by a rank of any platform). */
#define NOTICE_BYTES 160

struct clattn_ring_s {
    clattn_context *ctx;
    MPI_Comm comm; /* clattn's duplicate of the application's communicator */
    int rank, size;
    double timeout_s;
    bool broken; /* a wait timed out or MPI failed: messages may be in flight, the ring cannot go on */
    int failed_rank;
    char detail[512];
    void *host[2][2]; /* [buffer][K, V]: received slices, as bytes (kept, never freed, once broken) */
    size_t host_bytes[2][2];
    /* Notices (see give_up): one receive from any rank always posted, every rank's last notice kept
     * ("" none), and this rank's own, which abandoned sends may read after the call. */
    MPI_Request notice_req;
    char notice_in[NOTICE_BYTES];
    char (*notices)[NOTICE_BYTES];
    char notice_out[NOTICE_BYTES];
    bool notice_sent;
};

/* The caller's structs, read by the struct_size rule (versioned_rule.h, as libclattn reads them): an
 * older struct's missing fields take their defaults (0), a newer one's unknown fields must be 0. */
typedef struct ring_call {
    clattn_sdpa_desc desc; /* desc.masks points to `masks` when the caller gave masks */
    clattn_masks masks;
    clattn_partition *partition; /* the call, checked by libclattn: the pairs' sub-calls come from it */
} ring_call;

/* ---- transport.c ---------------------------------------------------------------------------- */

/* Records a failure (st, the rank it names, a message) in r; returns st. */
clattn_status ring_fail(clattn_ring *r, clattn_status st, int rank, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* An MPI call that failed: the ring is broken (CLATTN_ERROR_COMMUNICATION). */
clattn_status ring_mpi_failed(clattn_ring *r, int code, const char *call);
/* Seconds for the statistics (clattn_ring_stats); the timeouts run on deadline.h's monotonic clock. */
double ring_now_s(void);
/* Waits for n requests on other ranks (peer[i]: the rank request i waits on) and, when `device` is
 * given, the kernels before that event, up to the ring's timeout or another rank's notice (see the
 * definition); *device_done_at (when given) receives the time the device finished. */
clattn_status ring_wait_all(clattn_ring *r, int n, MPI_Request *reqs, const int *peer, cl_event device,
                            bool collective, const char *what, double *device_done_at);
/* Every rank sends `bytes` of `mine` to every other and receives theirs: all[i·bytes] is rank i's. */
clattn_status ring_exchange_all(clattn_ring *r, const void *mine, int bytes, void *all, int tag, const char *what);

/* ---- check.c --------------------------------------------------------------------------------- */

/* Every rank's own checks and the fingerprints of their calls exchanged, all ranks reaching the same
 * verdict; on success *call holds the caller's structs as read and the whole call's partition. */
clattn_status ring_collective_check(clattn_ring *r, const clattn_sdpa_desc *given, clattn_ring_layout layout,
                                    const float *q, const void *k, const void *v, const float *out,
                                    const clattn_ring_stats *stats, ring_call *call);
/* After the ring: every rank's status, the first failure everyone's answer. */
clattn_status ring_agree_on_status(clattn_ring *r, clattn_status st);

#endif
