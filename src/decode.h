/* The decode path: few query rows against many keys, the keys split over work-groups and merged
 * (cl/decode.cl). */
#ifndef CLATTN_DECODE_H
#define CLATTN_DECODE_H

#include "launch.h"
#include "validate.h"

#include <stdbool.h>

/* Query rows per sequence up to which CLATTN_ALGORITHM_AUTO takes the decode path. */
#define DECODE_AUTO_MAX_ROWS 8
/* Largest head size the decode kernels compile for. */
#define DECODE_MAX_HEAD 256

/* Where K/V rows (and Q/O rows) lie beyond a dense view: a ragged batch (sequences packed row after row)
 * or a paged cache (K/V rows in blocks of a pool, found through a block table). All NULL: dense. */
typedef struct decode_layout {
    cl_mem q_starts;    /* ragged: (B+1) ulong first rows of each sequence in q, out and lse, or NULL */
    cl_mem k_starts;    /* ragged: the same in k and v, or NULL */
    cl_mem block_table; /* paged: (B, table_cols) int block ids, all checked, or NULL; the K/V views'
                         * batch strides are then the pool's block strides */
    size_t table_cols;
    unsigned block_shift; /* log2 of the rows per block */
} decode_layout;

/* The entry points that only the decode kernels serve (ragged batches, paged caches; `entry` names the
 * call): desc.algorithm AUTO or DECODE, head sizes up to DECODE_MAX_HEAD. */
clattn_status decode_check_call(clattn_context *ctx, const sdpa_shape *s, const char *entry);

/* decode_run with K/V (and Q/O) rows laid out as `lay` says; lse is (rows, H) for a ragged batch. */
clattn_status decode_run_layout(clattn_context *ctx, const sdpa_shape *s, const decode_layout *lay, tensor_view q,
                                tensor_view k, tensor_view v, cl_mem mask, tensor_view out, cl_mem lse);

/* SDPA on a validated shape and views, as fused_run; lse (B,H,L) may be NULL. */
clattn_status decode_run(clattn_context *ctx, const sdpa_shape *s, tensor_view q, tensor_view k, tensor_view v,
                         cl_mem mask, tensor_view out, cl_mem lse);

#endif
