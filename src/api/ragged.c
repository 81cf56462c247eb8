/* clattn_sdpa_ragged: sequences of different query and key lengths packed row after row ("varlen"),
 * run by the decode kernels with each sequence's rows found from its starts. */
#include "context.h"
#include "decode.h"
#include "error.h"
#include "masks.h"
#include "ragged.h"
#include "sdpa.h"
#include "validate.h"
#include "versioned.h"

#include <stdbool.h>
#include <stdlib.h>

clattn_status ragged_check_starts(clattn_context *ctx, const size_t *starts, size_t batch, const char *name,
                                  size_t *longest)
{
    *longest = 0;
    for (size_t b = 0; b < batch; b++) {
        if (starts[b + 1] < starts[b])
            return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "%s decreases at %zu: %zu after %zu", name, b + 1,
                             starts[b + 1], starts[b]);
        if (starts[b + 1] - starts[b] > *longest)
            *longest = starts[b + 1] - starts[b];
    }
    return CLATTN_SUCCESS;
}

clattn_status ragged_resolve_len(clattn_context *ctx, size_t *len, size_t longest, const char *name)
{
    if (*len == 0)
        *len = longest ? longest : 1;
    else if (*len < longest)
        return set_error(ctx, CLATTN_ERROR_SHAPE_MISMATCH, "desc.%s = %zu is shorter than a sequence's %zu rows", name,
                         *len, longest);
    return CLATTN_SUCCESS;
}

clattn_status ragged_check(clattn_context *ctx, const clattn_sdpa_desc *desc, const clattn_ragged *ragged, bool has_mask,
                           ragged_call *c)
{
    clattn_sdpa_desc d;
    clattn_ragged r = CLATTN_RAGGED_INIT;
    clattn_status st = sdpa_desc_read(ctx, desc, &d);
    if (st != CLATTN_SUCCESS)
        return st;
    if (!ragged)
        return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "clattn_sdpa_ragged: ragged is NULL");
    if ((st = versioned_copy(ctx, ragged, sizeof r, sizeof r, sizeof r, "clattn_ragged", "CLATTN_RAGGED_INIT", &r)) !=
        CLATTN_SUCCESS)
        return st;
    if ((unsigned)r.layout > CLATTN_RAGGED_HEADS_ROWS || r.reserved != 0)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, r.reserved ? "ragged.reserved is %u, not 0"
                                                                     : "ragged.layout has the unknown value %u",
                         r.reserved ? r.reserved : (unsigned)r.layout);
    if (!r.q_starts || !r.k_starts)
        return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "ragged.%s is NULL", !r.q_starts ? "q_starts" : "k_starts");
    if (d.batch == 0)
        return set_error(ctx, CLATTN_ERROR_ZERO_SIZE, "desc.batch is 0");
    size_t longest_q, longest_k;
    if ((st = ragged_check_starts(ctx, r.q_starts, d.batch, "ragged.q_starts", &longest_q)) != CLATTN_SUCCESS ||
        (st = ragged_check_starts(ctx, r.k_starts, d.batch, "ragged.k_starts", &longest_k)) != CLATTN_SUCCESS ||
        (st = ragged_resolve_len(ctx, &d.q_len, longest_q, "q_len")) != CLATTN_SUCCESS ||
        (st = ragged_resolve_len(ctx, &d.kv_len, longest_k, "kv_len")) != CLATTN_SUCCESS)
        return st;
    sdpa_shape *s = &c->s;
    if ((st = sdpa_shape_resolve(ctx, &d, s)) != CLATTN_SUCCESS)
        return st;
    s->q_starts = r.q_starts; /* (a tree's parents are indexed by packed row) */
    if ((st = masks_resolve(ctx, d.masks, has_mask, s)) != CLATTN_SUCCESS)
        return st;
    if ((st = decode_check_call(ctx, s, "clattn_sdpa_ragged")) != CLATTN_SUCCESS)
        return st;
    /* The packed tensors: rows × heads × head size. */
    c->r = r;
    c->rows_q = r.q_starts[s->batch];
    c->rows_k = r.k_starts[s->batch];
    if (!size_product(&c->q_elems, 3, c->rows_q, s->heads, s->qk_dim) ||
        !size_product(&c->k_elems, 3, c->rows_k, s->kv_heads, s->qk_dim) ||
        !size_product(&c->v_elems, 3, c->rows_k, s->kv_heads, s->v_dim) ||
        !size_product(&c->out_elems, 3, c->rows_q, s->heads, s->v_dim) ||
        !size_product(&c->lse_elems, 2, c->rows_q, s->heads))
        return set_error(ctx, CLATTN_ERROR_SIZE_OVERFLOW, "the ragged tensors of %zu query and %zu key rows overflow",
                         c->rows_q, c->rows_k);
    return CLATTN_SUCCESS;
}

clattn_status ragged_run(clattn_context *ctx, const ragged_call *c, cl_mem q, cl_mem k, cl_mem v, cl_mem mask,
                         cl_mem out, cl_mem lse)
{
    sdpa_shape s = c->s; /* (masks_per_sequence fills in the per-sequence lengths and offsets) */
    const clattn_ragged *r = &c->r;
    const size_t rows_q = c->rows_q, rows_k = c->rows_k;
    size_t *counts = malloc(2 * s.batch * sizeof *counts);
    long long *offsets = malloc(s.batch * sizeof *offsets);
    if (!counts || !offsets) {
        free(counts);
        free(offsets);
        return set_error(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "clattn_sdpa_ragged: %zu sequences", s.batch);
    }
    size_t *keys = counts, *queries = counts + s.batch;
    for (size_t b = 0; b < s.batch; b++) {
        keys[b] = r->k_starts[b + 1] - r->k_starts[b];
        queries[b] = r->q_starts[b + 1] - r->q_starts[b];
    }
    kv_layout lay = {NULL, NULL, NULL, 0, 0, r->q_starts, 0, 0};
    clattn_status st = masks_per_sequence(ctx, &s, keys, queries, offsets, "ragged.k_starts");
    if (st == CLATTN_SUCCESS)
        st = scratch_upload_integers(ctx, SCRATCH_Q_STARTS, r->q_starts, NULL, s.batch + 1, "ragged.q_starts",
                                     &lay.q_starts);
    if (st == CLATTN_SUCCESS)
        st = scratch_upload_integers(ctx, SCRATCH_K_STARTS, r->k_starts, NULL, s.batch + 1, "ragged.k_starts",
                                     &lay.k_starts);
    /* (rows, heads, dim) or (heads, rows, dim): head and row strides; the batch stride is unused. */
    const bool hr = r->layout == CLATTN_RAGGED_HEADS_ROWS;
    const tensor_view qv = {q, 0, hr ? rows_q * s.qk_dim : s.qk_dim, hr ? s.qk_dim : s.heads * s.qk_dim},
                      kv = {k, 0, hr ? rows_k * s.qk_dim : s.qk_dim, hr ? s.qk_dim : s.kv_heads * s.qk_dim},
                      vv = {v, 0, hr ? rows_k * s.v_dim : s.v_dim, hr ? s.v_dim : s.kv_heads * s.v_dim},
                      ov = {out, 0, hr ? rows_q * s.v_dim : s.v_dim, hr ? s.v_dim : s.heads * s.v_dim};
    if (st == CLATTN_SUCCESS)
        st = sdpa_run_layout(ctx, &s, &lay, qv, kv, vv, mask, ov, lse);
    free(counts);
    free(offsets);
    return st;
}

clattn_status clattn_sdpa_ragged(clattn_context *ctx, const clattn_sdpa_desc *desc, const clattn_ragged *ragged,
                                 cl_mem q, cl_mem k, cl_mem v, cl_mem mask, cl_mem out, cl_mem lse)
{
    clattn_status st = check_context(ctx);
    ragged_call c;
    if (st != CLATTN_SUCCESS || (st = ragged_check(ctx, desc, ragged, mask != NULL, &c)) != CLATTN_SUCCESS)
        return st;
    const sdpa_shape *s = &c.s;
    if ((st = check_tensor(ctx, q, c.q_elems, s->types.q, "q")) != CLATTN_SUCCESS ||
        (st = check_tensor(ctx, k, c.k_elems, s->types.k, "k")) != CLATTN_SUCCESS ||
        (st = check_tensor(ctx, v, c.v_elems, s->types.v, "v")) != CLATTN_SUCCESS ||
        (st = check_scales(ctx, s, c.k_elems / s->qk_dim, c.v_elems / s->v_dim)) != CLATTN_SUCCESS ||
        (mask && (st = check_buffer(ctx, mask, s->mask_elems, s->mask_elem_size, "mask")) != CLATTN_SUCCESS) ||
        (st = check_tensor(ctx, out, c.out_elems, s->types.o, "out")) != CLATTN_SUCCESS ||
        (lse && (st = check_buffer(ctx, lse, c.lse_elems, sizeof(float), "lse")) != CLATTN_SUCCESS))
        return st;
    return ragged_run(ctx, &c, q, k, v, mask, out, lse);
}
