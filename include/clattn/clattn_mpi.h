/* clattn_mpi: ring attention across MPI processes (since 0.6), a library of its own (libclattn_mpi,
 * pkg-config clattn_mpi) built when Meson finds MPI (-Dmpi=auto).
 *
 * Sequence (context) parallelism: each of the P ranks of a communicator holds a slice of the queries and
 * a slice of the keys and values; the K/V slices travel around the ring (rank r sends to r+1 and receives
 * from r−1, non-blocking, while its device computes on the slice it holds), and each rank merges the
 * partial results of its queries through their log-sum-exps — exactly, as clattn_merge does. After P − 1
 * steps every rank has attended its queries over every key, holding only O((L + S)/P · D) of device
 * memory. Under a causal mask the zigzag layout gives each rank one early and one late run of the
 * sequence, so that every rank has the same work at every step and none idles.
 *
 * The application keeps its communicator and its MPI_Init: clattn works on a duplicate of it. Every wait
 * on another rank is bounded by the ring's timeout: a rank that died or stopped calling, before the call
 * or in the middle of it, makes the others return CLATTN_ERROR_TIMEOUT (naming it) instead of hanging. A
 * rank that gives up tells every other whom it was waiting on, which ends their waits too, and each rank
 * names the rank at the end of that chain of waits (the one that stopped), not the neighbour that gave
 * up before it.
 *
 * The structs passed in (clattn_sdpa_desc, its clattn_masks, clattn_ring_stats) follow clattn.h's
 * "Extensible structs" rule: an older program's smaller struct is read (the fields it lacks take their
 * defaults), a newer one's is accepted while the fields unknown here are 0. */
#ifndef CLATTN_CLATTN_MPI_H
#define CLATTN_CLATTN_MPI_H

#include <mpi.h>

#include "clattn/clattn.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(CLATTN_MPI_BUILDING) && defined(__GNUC__)
#define CLATTN_MPI_API __attribute__((visibility("default")))
#else
#define CLATTN_MPI_API
#endif

/* How a sequence of n rows is dealt to P ranks. */
typedef enum clattn_ring_layout {
    /* Rank r holds the r-th of P runs of consecutive rows (the first n % P runs one row longer). */
    CLATTN_RING_CONTIGUOUS = 0,
    /* The rows cut into 2P runs (the first n % 2P one row longer); rank r holds runs r and 2P − 1 − r, in
     * that order. Under a causal mask every rank then has the same number of visible (query, key) pairs,
     * give or take a run's rounding. */
    CLATTN_RING_ZIGZAG = 1
} clattn_ring_layout;

/* The rows of a sequence that one rank holds: up to two runs, stored one after the other. */
typedef struct clattn_ring_shard {
    size_t start[2]; /* first row of each run in the whole sequence */
    size_t len[2];   /* rows of each run (the second is 0 under CLATTN_RING_CONTIGUOUS) */
    size_t rows;     /* len[0] + len[1]: the rank's rows */
} clattn_ring_shard;

/* The rows rank `rank` of `ranks` holds of a sequence of n rows. CLATTN_ERROR_INVALID_VALUE for a rank
 * outside [0, ranks), ranks < 1 or an unknown layout; NULL shard is CLATTN_ERROR_NULL_ARGUMENT. */
CLATTN_MPI_API clattn_status clattn_ring_shard_of(size_t n, int ranks, int rank, clattn_ring_layout layout,
                                                  clattn_ring_shard *shard);

/* A shard's rows between a whole tensor and a rank's array: `slices` slices (B·heads) of n rows of
 * `width` floats each; the rank's array holds the shard's rows, run after run, in each slice. _take
 * copies them out of the whole tensor, _put back into it (the whole tensor's other rows untouched).
 * NULL pointers are CLATTN_ERROR_NULL_ARGUMENT; a shard that does not fit n rows, or sizes that
 * overflow, CLATTN_ERROR_INVALID_VALUE / CLATTN_ERROR_SIZE_OVERFLOW; nothing is copied then. */
CLATTN_MPI_API clattn_status clattn_ring_shard_take(const clattn_ring_shard *shard, size_t slices, size_t n,
                                                    size_t width, const float *whole, float *part);
CLATTN_MPI_API clattn_status clattn_ring_shard_put(const clattn_ring_shard *shard, size_t slices, size_t n,
                                                   size_t width, const float *part, float *whole);

typedef struct clattn_ring_s clattn_ring;

/* Collective over comm: a ring over comm's ranks (a duplicate of comm, so clattn's messages never meet
 * the application's) whose attention runs on ctx, each rank with its own context (its own device). The
 * context stays the caller's and must outlive the ring. timeout_s bounds every wait for another rank,
 * from here on (0: 60 s; negative or NaN: CLATTN_ERROR_INVALID_VALUE); a rank that gave up then waits at
 * most min(timeout_s, 2 s) more for the others' word of whom they waited on. */
CLATTN_MPI_API clattn_status clattn_ring_create(clattn_ring **ring, clattn_context *ctx, MPI_Comm comm,
                                                double timeout_s);

/* Free a ring (not collective). Accepts NULL. After a timeout the ring gives up its duplicate communicator
 * and the host buffers an unfinished send may still read without freeing them: the application is
 * expected to end (MPI_Abort) after a rank died. */
CLATTN_MPI_API void clattn_ring_free(clattn_ring *ring);

/* What one ring call did on this rank; start from CLATTN_RING_STATS_INIT. */
typedef struct clattn_ring_stats {
    size_t struct_size; /* sizeof(clattn_ring_stats), set by CLATTN_RING_STATS_INIT */
    /* Device memory: the call's own buffers (queries, the K/V slice held, outputs and one partial result)
     * plus the context's temporaries' peak (clattn_context_temp_peak_bytes; release the temporaries
     * before the call to count this call's alone). */
    size_t device_peak_bytes;
    size_t host_bytes; /* the two host buffers K/V slices are received into */
    size_t bytes_sent; /* K/V bytes this rank sent around the ring */
    unsigned steps;    /* ring steps: P */
    unsigned pairs;    /* (query run, key run) pairs attended; pairs a causal mask hides whole are skipped */
    double seconds;    /* the whole call */
    /* Time this rank's device was done before the slice it needed next had arrived: communication that
     * did not hide behind the kernels (0 when it all did). */
    double wait_seconds;
} clattn_ring_stats;

#define CLATTN_RING_STATS_INIT { sizeof(clattn_ring_stats), 0, 0, 0, 0, 0, 0.0, 0.0 }

/* Collective: attention of this rank's queries over every rank's keys. desc describes the whole call —
 * q_len = L and kv_len = S of the full sequences, the other fields as for clattn_sdpa, and checked as
 * clattn_sdpa checks them (clattn_partition_create) — and must be the same on every rank (checked before
 * any work, every field that changes the result: arrays by their contents, mods by clattn_mods_id, a block
 * mask by its counts (since 0.13 logit_scale, softmax_precision, the mods, the block mask, the origins
 * and the masks' layout fields too); a rank that differs makes every rank return
 * CLATTN_ERROR_SHAPE_MISMATCH naming it and the field; a rank of another platform than rank 0's —
 * architecture, byte order, pointer or integer widths: the ranks exchange raw bytes — makes every rank
 * return CLATTN_ERROR_COMMUNICATION naming it, before any of its numbers is read). Queries are dealt by `layout` over L, keys and
 * values over S (clattn_ring_shard_of says which rows): q (B, H, rows_q, Dqk), k (B, kv_heads, rows_k,
 * Dqk), v (B, kv_heads, rows_k, Dv), out (B, H, rows_q, Dv) and lse (B, H, rows_q, may be NULL) hold the
 * rank's rows in shard order, host arrays: q, out and lse float32, k and v (since 0.15) in desc's k_dtype
 * and v_dtype — any format clattn_sdpa_host takes (float16, bfloat16, the block formats as their raw
 * blocks, FP8 without scales; not int8 or scaled FP8, whose scales are device buffers), sent around the
 * ring as those bytes (a q4_0 cache sends 0.28× float16's). Masks: causal (either kind), key lengths and query
 * offsets (of the whole sequences), windows; no additive mask, no weights output. Sinks, ALiBi,
 * soft-capping and grouped heads work as in clattn_sdpa. P larger than L or S is CLATTN_ERROR_INVALID_VALUE.
 * Reproducible arithmetic (desc->arithmetic or CLATTN_REPRODUCIBLE=1; since 0.24): the slices travel as always,
 * each rank keeps them and, once all have passed, attends its query rows over every key in one call — each
 * rank's rows are one device's bits for the whole call (docs/reproducible.md); every rank then holds all of K
 * and V, on the host and on its device (the ring's memory saving given up).
 * A failure on any rank is returned by every rank (clattn_ring_failed_rank names the first);
 * stats may be NULL (else started from CLATTN_RING_STATS_INIT; written on success only). */
CLATTN_MPI_API clattn_status clattn_ring_sdpa_host(clattn_ring *ring, const clattn_sdpa_desc *desc,
                                                   clattn_ring_layout layout, const float *q, const void *k,
                                                   const void *v, float *out, float *lse,
                                                   clattn_ring_stats *stats);

/* The ring's rank and size in its communicator (−1 / 0 for NULL). */
CLATTN_MPI_API int clattn_ring_rank(const clattn_ring *ring);
CLATTN_MPI_API int clattn_ring_size(const clattn_ring *ring);

/* After a failed call: the rank that failed first (or that did not answer in time), −1 if none, and the
 * detail ("rank 2: kv_len is 100, rank 0's is 128"). Never NULL; "" when there is nothing to say. For a
 * NULL ring (clattn_ring_create's own failures): the calling thread's last failure. */
CLATTN_MPI_API int clattn_ring_failed_rank(const clattn_ring *ring);
CLATTN_MPI_API const char *clattn_ring_last_error(const clattn_ring *ring);

#ifdef __cplusplus
}
#endif

#endif /* CLATTN_CLATTN_MPI_H */
