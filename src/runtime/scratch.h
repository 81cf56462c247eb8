/* Device temporaries that a context keeps for reuse between calls: one slot per role, so that one call
 * never aliases two of them, and a record of the most bytes held at once. */
#ifndef CLATTN_SCRATCH_H
#define CLATTN_SCRATCH_H

#include "clattn/clattn.h"

#include <stddef.h>

typedef enum scratch_slot {
    SCRATCH_SCORES,     /* score/weight matrix when the caller does not want the weights */
    SCRATCH_Q,          /* projected Q, K, V and concatenated heads of clattn_mha */
    SCRATCH_K,
    SCRATCH_V,
    SCRATCH_CONCAT,
    SCRATCH_KEY_LENGTHS,
    SCRATCH_QUERY_OFFSETS,
    SCRATCH_PER_HEAD,    /* the masks' and score terms' arrays of one value per head (sinks, ALiBi …): */
    SCRATCH_PER_HEAD_LAST = SCRATCH_PER_HEAD + 5, /* six slots, numbered by masks.c */
    SCRATCH_PARTIAL_OUT, /* the decode path's per-split outputs and log-sum-exps */
    SCRATCH_PARTIAL_LSE,
    SCRATCH_Q_STARTS,    /* a ragged batch's row starts */
    SCRATCH_K_STARTS,
    SCRATCH_PAGED_LENGTHS, /* a paged cache's lengths, and the flag of its block-id check */
    SCRATCH_PAGED_FLAG,
    SCRATCH_KEYS_T,      /* K transposed for the staged path's blocked score kernel (CPUs) */
    SCRATCH_WIDE_Q,      /* Q, K, V and O as floats, for a path that computes on floats only (the */
    SCRATCH_WIDE_K,      /* staged path) when they are stored in another type */
    SCRATCH_WIDE_V,
    SCRATCH_WIDE_O,
    SCRATCH_DELTA,       /* the backward pass's D_i = dO_i·O_i per query row */
    SCRATCH_DQ_CHUNKS,   /* its keys-in-lanes kernel's dQ, one copy per chunk of keys */
    SCRATCH_WIDE_DOUT,   /* its dO as floats, and its gradients as floats, where they are stored in */
    SCRATCH_GRAD_Q,      /* another type */
    SCRATCH_GRAD_K,
    SCRATCH_GRAD_V,
    SCRATCH_DSCORES,     /* the staged backward's dS (its P: SCRATCH_SCORES) */
    SCRATCH_BACKWARD_FLAG, /* the backward's check that what the lanes kernel multiplies is finite */
    SCRATCH_TREE,        /* tree attention's ancestor bits per query row */
    SCRATCH_TILES,       /* a ragged launch's list of its work-groups' (sequence, tile) */
    SCRATCH_SPARSE_STARTS, /* the sparse backward's keys' lists of the query rows that selected them */
    SCRATCH_SPARSE_ROWS,
    SCRATCH_CUT_X,       /* a reproducible GEMM's X and W with their small entries cut (projection.c) */
    SCRATCH_CUT_W,
    SCRATCH_COUNT
} scratch_slot;

typedef struct scratch_pool {
    cl_mem mem[SCRATCH_COUNT];
    size_t bytes[SCRATCH_COUNT];
    size_t peak; /* most bytes held at once: the benchmark reports it */
    /* scratch_upload's host copies, which its non-blocking writes read from, and each slot's last write
     * (NULL once it is known done): the copy is overwritten only after it. */
    void *shadow[SCRATCH_COUNT];
    size_t shadow_bytes[SCRATCH_COUNT];
    cl_event written[SCRATCH_COUNT];
} scratch_pool;

/* The slot's buffer, grown to at least `bytes` (a new buffer's contents are undefined). */
clattn_status scratch_get(clattn_context *ctx, scratch_slot slot, size_t bytes, cl_mem *out);

/* The slot's buffer, grown to `bytes`, filled from `data` — a write enqueued without waiting, from the
 * slot's own host copy of `data` (the caller's array may go as soon as this returns): the queue runs in
 * order, so the kernels enqueued next read the values, and a call no longer waits for the device before
 * its kernels start (two such waits a decode call, for its key lengths and query offsets). */
clattn_status scratch_upload(clattn_context *ctx, scratch_slot slot, const void *data, size_t bytes, const char *what,
                             cl_mem *out);
/* The same for n integers as cl_long: sizes (when not NULL) or else offsets. */
clattn_status scratch_upload_integers(clattn_context *ctx, scratch_slot slot, const size_t *sizes,
                                      const long long *offsets, size_t n, const char *what, cl_mem *out);

/* Release every slot (and its host copy) and reset the peak; the caller makes sure no enqueued work
 * still needs them (clFinish). */
void scratch_release(scratch_pool *pool);

/* Release n buffers (NULL entries are skipped) and set them to NULL. */
void mems_release(cl_mem *mems, size_t n);

#endif
