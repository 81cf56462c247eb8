/* Ring attention in reproducible arithmetic (docs/reproducible.md). The default ring merges each rank's
 * partial results over the slices of keys as they pass, and a merge's roundings depend on where the slices
 * begin; reproducible arithmetic fixes a row's order over its keys from key 0 on, so here the slices pass
 * around the ring as always (the same messages) but each rank keeps them, in their places among all the keys,
 * and once every slice has passed attends each of its query runs over every key in one call: a row's bits are
 * then those of one device's call over the whole tensors. The price is the ring's memory saving: each rank holds
 * every key (on the host and on its device) at the end, and no kernel runs while the slices travel. */
#include "ring.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

bool ring_reproducible(const clattn_sdpa_desc *d)
{
    const char *env = getenv("CLATTN_REPRODUCIBLE");
    return d->arithmetic == CLATTN_ARITHMETIC_REPRODUCIBLE || (env && strcmp(env, "1") == 0);
}

clattn_status ring_exact_reserve(clattn_ring *r, const ring_shape *s)
{
    const size_t bkv = s->batch * s->kv_heads, need[2] = {bkv * s->kv_len * s->k_row, bkv * s->kv_len * s->v_row};
    for (int t = 0; t < 2; t++) {
        if (r->whole_bytes[t] >= need[t])
            continue;
        void *grown = realloc(r->whole[t], need[t] ? need[t] : 1);
        if (!grown)
            return ring_fail(r, CLATTN_ERROR_OUT_OF_HOST_MEMORY, r->rank, "rank %d: the gathered keys' host buffer",
                             r->rank);
        r->whole[t] = grown;
        r->whole_bytes[t] = need[t];
    }
    return CLATTN_SUCCESS;
}

void ring_exact_place(clattn_ring *r, const ring_shape *s, const clattn_ring_shard *held, const void *k,
                      const void *v)
{
    const void *from[2] = {k, v};
    const size_t row_bytes[2] = {s->k_row, s->v_row};
    for (int t = 0; t < 2; t++)
        for (size_t slice = 0; slice < s->batch * s->kv_heads; slice++)
            for (int c = 0; c < 2; c++) { /* the slice's runs, one after the other */
                const size_t first = c ? held->len[0] : 0;
                if (held->len[c])
                    memcpy((char *)r->whole[t] + (slice * s->kv_len + held->start[c]) * row_bytes[t],
                           (const char *)from[t] + (slice * held->rows + first) * row_bytes[t],
                           held->len[c] * row_bytes[t]);
            }
}

/* Query run c's rows when the masks hide every key from all of them (the partition's part is NULL): what the
 * call computes for such rows — out +0, lse the head's sink (−inf without). */
static clattn_status empty_rows(clattn_ring *r, const clattn_sdpa_desc *d, const ring_shape *s, ring_buffers *b,
                                int c)
{
    const size_t n = s->qs.len[c], slices = s->batch * s->heads;
    float *lse = malloc(slices * n * sizeof *lse);
    if (!lse)
        return ring_fail(r, CLATTN_ERROR_OUT_OF_HOST_MEMORY, r->rank, "rank %d: empty rows", r->rank);
    for (size_t slice = 0; slice < slices; slice++)
        for (size_t i = 0; i < n; i++)
            lse[slice * n + i] = d->sinks ? d->sinks[slice % s->heads] : -INFINITY;
    cl_command_queue queue = clattn_context_queue(r->ctx);
    const float zero = 0.0f;
    cl_int err = clEnqueueWriteBuffer(queue, b->lse[c], CL_TRUE, 0, slices * n * sizeof *lse, lse, 0, NULL, NULL);
    free(lse);
    if (err == CL_SUCCESS)
        err = clEnqueueFillBuffer(queue, b->out[c], &zero, sizeof zero, 0, slices * n * s->v_dim * sizeof(float), 0,
                                  NULL, NULL);
    return err == CL_SUCCESS ? CLATTN_SUCCESS : ring_cl_failed(r, err, "writing rows that see no key");
}

clattn_status ring_exact_attend(clattn_ring *r, const clattn_sdpa_desc *d, clattn_partition *partition,
                                const ring_shape *s, ring_buffers *b, unsigned *pairs)
{
    cl_command_queue queue = clattn_context_queue(r->ctx);
    const size_t bkv = s->batch * s->kv_heads;
    cl_int err = clEnqueueWriteBuffer(queue, b->k[0], CL_FALSE, 0, bkv * s->kv_len * s->k_row, r->whole[0], 0, NULL,
                                      NULL);
    if (err == CL_SUCCESS)
        err = clEnqueueWriteBuffer(queue, b->v[0], CL_FALSE, 0, bkv * s->kv_len * s->v_row, r->whole[1], 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return ring_cl_failed(r, err, "uploading the gathered keys");
    for (int c = 0; c < 2; c++) {
        if (!s->qs.len[c])
            continue;
        const clattn_sdpa_desc *pd = NULL;
        clattn_status st = clattn_partition_part(partition, s->qs.start[c], s->qs.len[c], 0, s->kv_len, &pd);
        if (st == CLATTN_SUCCESS && !pd) {
            if ((st = empty_rows(r, d, s, b, c)) != CLATTN_SUCCESS)
                return st; /* (its failure recorded) */
            continue;
        }
        if (st == CLATTN_SUCCESS) {
            clattn_sdpa_desc whole_keys = *pd; /* the part over every key: the call's rows, its sinks kept */
            whole_keys.sinks = d->sinks;
            whole_keys.arithmetic = CLATTN_ARITHMETIC_REPRODUCIBLE;
            st = clattn_sdpa(r->ctx, &whole_keys, b->q[c], b->k[0], b->v[0], NULL, b->out[c], NULL, b->lse[c]);
            ++*pairs;
        }
        if (st != CLATTN_SUCCESS)
            return ring_fail(r, st, r->rank, "rank %d: attention over the gathered keys: %s", r->rank,
                             clattn_last_error(r->ctx));
    }
    return CLATTN_SUCCESS;
}
