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
    void *whole[2]; /* [K, V]: reproducible arithmetic's keys gathered whole (ring_exact.c), kept like host */
    size_t whole_bytes[2];
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

/* A call's shape, resolved (ring.c). */
typedef struct ring_shape {
    size_t batch, heads, kv_heads, qk_dim, v_dim;
    size_t k_row, v_row; /* bytes of a K and a V row in their formats */
    clattn_ring_shard qs; /* this rank's queries */
    size_t max_kv_rows;   /* the longest K/V slice of any rank */
    size_t max_kv_run;    /* the longest run of one */
    size_t max_q_run;
    size_t kv_len;        /* the call's keys */
    bool exact;           /* reproducible arithmetic: the keys gathered, one call a query run (ring_exact.c) */
} ring_shape;

/* The device side of one call: the rank's query runs, the K/V runs held, and the running results. */
typedef struct ring_buffers {
    cl_mem q[2], out[2], lse[2]; /* per query run */
    cl_mem k[2], v[2];           /* per run of the K/V slice held (reproducible: k[0], v[0] hold every key) */
    cl_mem part_out, part_lse;   /* one pair's result before it is merged */
    size_t bytes;
} ring_buffers;

/* ---- ring.c ---------------------------------------------------------------------------------- */

/* A device buffer of `bytes` (at least 4) into *out, counted in b->bytes. */
clattn_status ring_make_buffer(clattn_ring *r, ring_buffers *b, size_t bytes, cl_mem *out);
/* An OpenCL call that failed on this rank. */
clattn_status ring_cl_failed(clattn_ring *r, cl_int err, const char *what);
/* Rows [row0, row0 + rows) of each of `slices` slices of a host tensor with `total` rows of `row_bytes`
 * bytes, to (write) or from a device buffer holding just those rows. */
cl_int ring_copy_rows(cl_command_queue queue, bool write, cl_mem dev, void *host, size_t slices, size_t total,
                      size_t row0, size_t rows, size_t row_bytes);

/* ---- ring_exact.c: reproducible arithmetic (desc->arithmetic or CLATTN_REPRODUCIBLE) ----------- */

/* Whether the call asks for reproducible arithmetic: its descriptor, or CLATTN_REPRODUCIBLE=1 (what the
 * ranks' contexts read when they were made). */
bool ring_reproducible(const clattn_sdpa_desc *d);
/* The host buffers of the gathered keys, grown to the call's K and V (kept between calls). */
clattn_status ring_exact_reserve(clattn_ring *r, const ring_shape *s);
/* A held slice's rows (its runs) put in their places among the gathered keys. */
void ring_exact_place(clattn_ring *r, const ring_shape *s, const clattn_ring_shard *held, const void *k,
                      const void *v);
/* Once every slice has passed: each query run over every key in one call (no merge), into b->out and b->lse. */
clattn_status ring_exact_attend(clattn_ring *r, const clattn_sdpa_desc *d, clattn_partition *partition,
                                const ring_shape *s, ring_buffers *b, unsigned *pairs);

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
