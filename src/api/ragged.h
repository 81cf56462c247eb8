/* Ragged ("varlen") batches: the checks of a call and its run, shared by clattn_sdpa_ragged and its host
 * variant. */
#ifndef CLATTN_RAGGED_H
#define CLATTN_RAGGED_H

#include "sdpa.h"

#include <stdbool.h>

/* A checked ragged call: its shape (q_len and kv_len resolved to at least the longest sequence's), the
 * caller's ragged struct at this version's size, and the packed tensors' element counts. */
typedef struct ragged_call {
    sdpa_shape s;
    clattn_ragged r;
    size_t rows_q, rows_k;
    size_t q_elems, k_elems, v_elems, out_elems, lse_elems;
} ragged_call;

/* starts (B+1, named `name` in messages) must not decrease; the longest step goes to *longest. */
clattn_status ragged_check_starts(clattn_context *ctx, const size_t *starts, size_t batch, const char *name,
                                  size_t *longest);

/* desc.q_len or kv_len (`name`): 0 means the longest sequence's; else at least that. */
clattn_status ragged_resolve_len(clattn_context *ctx, size_t *len, size_t longest, const char *name);

/* Every check of clattn_sdpa_ragged but the buffers' (has_mask: a mask is given). */
clattn_status ragged_check(clattn_context *ctx, const clattn_sdpa_desc *desc, const clattn_ragged *ragged, bool has_mask,
                           ragged_call *c);

/* Run a checked call on buffers of the sizes ragged_call gives (lse may be NULL). */
clattn_status ragged_run(clattn_context *ctx, const ragged_call *c, cl_mem q, cl_mem k, cl_mem v, cl_mem mask,
                         cl_mem out, cl_mem lse);

#endif
