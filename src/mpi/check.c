/* The ring's collective checks (ring.h): each rank reads the caller's structs by the struct_size rule
 * (src/base/versioned_rule.h), checks the ring's own rules and libclattn's of the whole call, and every rank's
 * fingerprint (fingerprint.c) is exchanged so that all reach one verdict; after the ring, one status. */
#include "ring.h"

#include "../base/versioned_rule.h"
#include "fingerprint.h"

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* clattn_ring_stats as published in 0.6: the oldest struct_size read. */
#define RING_STATS_SIZE_0_6 (offsetof(clattn_ring_stats, wait_seconds) + sizeof(double))

static clattn_status read_versioned(const void *src, size_t ours, size_t oldest, const char *name, const char *init,
                                    void *dst, char *detail, size_t cap)
{
    size_t given = 0, byte = 0;
    switch (versioned_check(src, ours, ours, oldest, &given, &byte)) {
    case VERSIONED_BAD_SIZE:
        snprintf(detail, cap, "%s->struct_size is %zu, not the size of any version of it (start from %s)", name,
                 given, init);
        return CLATTN_ERROR_INVALID_VALUE;
    case VERSIONED_RESERVED_SET: /* (no reserved bytes are passed: fields_end is ours) */
    case VERSIONED_UNKNOWN_FIELD:
        snprintf(detail, cap, "%s sets a field at byte %zu that this clattn_mpi (%s, %zu bytes) does not know: the "
                 "program was built against a newer header", name, byte, CLATTN_VERSION_STRING, ours);
        return CLATTN_ERROR_INVALID_VALUE;
    case VERSIONED_OK:
        break;
    }
    if (dst)
        versioned_take(src, given, ours, dst);
    return CLATTN_SUCCESS;
}

static bool mul_ok(size_t a, size_t b, size_t *out)
{
    if (b && a > SIZE_MAX / b)
        return false;
    *out = a * b;
    return true;
}

/* This rank's own checks, before anything is exchanged: the caller's structs read into *call, the ring's
 * own rules, libclattn's checks of the whole call (clattn_partition_create: those of clattn_sdpa), then
 * what clattn_sdpa cannot see (the host arrays, the message sizes). */
static clattn_status local_checks(clattn_ring *r, const clattn_sdpa_desc *given, clattn_ring_layout layout,
                                  const float *q, const void *k, const void *v, const float *out,
                                  const clattn_ring_stats *stats, ring_call *call, char *detail, size_t cap)
{
    if (!given) {
        snprintf(detail, cap, "desc is NULL");
        return CLATTN_ERROR_NULL_ARGUMENT;
    }
    clattn_status st = read_versioned(given, sizeof call->desc, SDPA_DESC_SIZE_0_2, "desc", "CLATTN_SDPA_DESC_INIT",
                                      &call->desc, detail, cap);
    if (st == CLATTN_SUCCESS && call->desc.masks) {
        st = read_versioned(call->desc.masks, sizeof call->masks, MASKS_SIZE_0_2, "desc->masks", "CLATTN_MASKS_INIT",
                            &call->masks, detail, cap);
        call->desc.masks = &call->masks;
        call->masks.struct_size = sizeof call->masks;
    }
    if (st == CLATTN_SUCCESS && stats)
        st = read_versioned(stats, sizeof *stats, RING_STATS_SIZE_0_6, "stats", "CLATTN_RING_STATS_INIT", NULL, detail,
                            cap);
    if (st != CLATTN_SUCCESS)
        return st;
    call->desc.struct_size = sizeof call->desc; /* what clattn_sdpa is handed: this header's struct, whole */
    const clattn_sdpa_desc *d = &call->desc;
    if (layout != CLATTN_RING_CONTIGUOUS && layout != CLATTN_RING_ZIGZAG) {
        snprintf(detail, cap, "layout %d is not a clattn_ring_layout", (int)layout);
        return CLATTN_ERROR_INVALID_VALUE;
    }
    const size_t kv_heads = d->kv_heads ? d->kv_heads : d->heads, v_dim = d->v_dim ? d->v_dim : d->qk_dim;
    const clattn_masks *m = d->masks;
    /* The ring's own rules first: libclattn would word them as its own calls' (a NULL mask, int8 scales). */
    if (m && (m->additive != CLATTN_MASK_NONE || m->tree_parents)) {
        snprintf(detail, cap, "ring calls take no %s", m->tree_parents ? "tree (masks->tree_parents)"
                                                                       : "additive mask (masks->additive)");
        return CLATTN_ERROR_INVALID_VALUE;
    }
    /* K and V travel as their bytes in any format that needs no device buffer beside them (blocks carry
     * their own scales); Q and the results stay float32 (merged in float32 every step). */
    if (d->q_dtype || d->out_dtype) {
        snprintf(detail, cap, "ring calls take float32 Q and outputs (desc->%s)", d->q_dtype ? "q_dtype" : "out_dtype");
        return CLATTN_ERROR_INVALID_VALUE;
    }
    /* (scales given to a format without them are libclattn's own refusal, below) */
    const bool scaled_k = d->k_dtype == CLATTN_INT8 || d->k_scales, scaled_v = d->v_dtype == CLATTN_INT8 || d->v_scales;
    if (scaled_k || scaled_v) {
        snprintf(detail, cap, "desc->%s is %s with row scales, a device buffer: ring calls take K and V as host "
                 "arrays in any other format", scaled_k ? "k_dtype" : "v_dtype",
                 clattn_dtype_name(scaled_k ? d->k_dtype : d->v_dtype));
        return CLATTN_ERROR_INVALID_VALUE;
    }
    /* A token format's bytes are a head's rows together: the ring's slices of keys would cut its chunks. */
    const bool token_k = clattn_dtype_size(d->k_dtype) == 0 && clattn_dtype_block(d->k_dtype) == 1,
               token_v = clattn_dtype_size(d->v_dtype) == 0 && clattn_dtype_block(d->v_dtype) == 1;
    if (token_k || token_v) {
        snprintf(detail, cap, "desc->%s is %s, a token format: ring calls split the keys, which its chunks "
                 "cannot be", token_k ? "k_dtype" : "v_dtype", clattn_dtype_name(token_k ? d->k_dtype : d->v_dtype));
        return CLATTN_ERROR_INVALID_VALUE;
    }
    if (d->algorithm == CLATTN_ALGORITHM_STAGED && d->weights_output != CLATTN_WEIGHTS_SOFTMAX) {
        snprintf(detail, cap, "ring calls return no weights (desc->weights_output)");
        return CLATTN_ERROR_INVALID_VALUE;
    }
    /* The whole call, as clattn_sdpa checks it: the pairs' shifted positions and clipped lengths could no
     * longer show a bad value of the call's own (a key length beyond S, an offset beyond ±2^61). */
    if ((st = clattn_partition_create(r->ctx, d, 0, &call->partition)) != CLATTN_SUCCESS) {
        snprintf(detail, cap, "%s", clattn_last_error(r->ctx));
        return st;
    }
    if ((size_t)r->size > d->q_len || (size_t)r->size > d->kv_len) {
        const bool queries = (size_t)r->size > d->q_len;
        snprintf(detail, cap, "%d ranks for %zu %s: every rank needs at least one", r->size,
                 queries ? d->q_len : d->kv_len, queries ? "queries" : "keys");
        return CLATTN_ERROR_INVALID_VALUE;
    }
    if (!q || !k || !v || !out) {
        snprintf(detail, cap, "host array %s is NULL", !q ? "q" : !k ? "k" : !v ? "v" : "out");
        return CLATTN_ERROR_NULL_ARGUMENT;
    }
    /* Sizes must not overflow, and the longest K or V slice any rank sends (a run of ⌈S/P⌉ rows at
     * most), in floats (a row in any format is no wider than in float32), must fit an MPI count (an int:
     * ring.c counts 4-byte units where a row's bytes allow). */
    const size_t width = d->qk_dim > v_dim ? d->qk_dim : v_dim;
    size_t q_elems, slice_elems;
    if (!mul_ok(d->batch, d->heads, &q_elems) || !mul_ok(q_elems, d->q_len, &q_elems) ||
        !mul_ok(q_elems, width, &q_elems) || !mul_ok(d->batch, kv_heads, &slice_elems) ||
        !mul_ok(slice_elems, d->kv_len / (size_t)r->size + 1, &slice_elems) ||
        !mul_ok(slice_elems, width, &slice_elems) || slice_elems > INT_MAX) {
        snprintf(detail, cap, "the tensors' sizes overflow, or a rank's K or V slice passes an MPI message's %d "
                 "floats", INT_MAX);
        return CLATTN_ERROR_SIZE_OVERFLOW;
    }
    return CLATTN_SUCCESS;
}

/* (ring.h) The fingerprints (fingerprint.h) of every rank's call and its own checks' outcome. */
clattn_status ring_collective_check(clattn_ring *r, const clattn_sdpa_desc *given, clattn_ring_layout layout,
                                    const float *q, const void *k, const void *v, const float *out,
                                    const clattn_ring_stats *stats, ring_call *call)
{
    ring_fingerprint mine;
    memset(&mine, 0, sizeof mine);
    memset(call, 0, sizeof *call);
    mine.status = local_checks(r, given, layout, q, k, v, out, stats, call, mine.detail, sizeof mine.detail);
    ring_platform(mine.platform);
    if (mine.status == CLATTN_SUCCESS)
        ring_fingerprint_fill(&call->desc, layout, &mine);
    ring_fingerprint *all = malloc((size_t)r->size * sizeof *all);
    if (!all)
        return ring_fail(r, CLATTN_ERROR_OUT_OF_HOST_MEMORY, r->rank, "rank %d: the fingerprints", r->rank);
    clattn_status st = ring_exchange_all(r, &mine, (int)sizeof mine, all, TAG_CHECK, "the check of shapes and options");
    if (st == CLATTN_SUCCESS) {
        /* (0 when the descriptor could not be read: call is zeroed) */
        const size_t least_rows = call->desc.q_len < call->desc.kv_len ? call->desc.q_len : call->desc.kv_len;
        int who = -1;
        char detail[sizeof r->detail];
        st = ring_fingerprints_verdict(all, r->size, least_rows, &who, detail, sizeof detail);
        if (st != CLATTN_SUCCESS)
            ring_fail(r, st, who, "%s", detail);
    }
    if (!r->broken)
        free(all); /* else an abandoned receive may still write it */
    return st;
}

clattn_status ring_agree_on_status(clattn_ring *r, clattn_status st)
{
    typedef struct outcome {
        int32_t status, failed_rank;
        char detail[sizeof r->detail];
    } outcome;
    outcome mine = {(int32_t)st, r->failed_rank, {0}};
    if (st != CLATTN_SUCCESS)
        snprintf(mine.detail, sizeof mine.detail, "%s", r->detail);
    outcome *all = malloc((size_t)r->size * sizeof *all);
    if (!all)
        return ring_fail(r, CLATTN_ERROR_OUT_OF_HOST_MEMORY, r->rank, "rank %d: the statuses", r->rank);
    clattn_status agreed = ring_exchange_all(r, &mine, (int)sizeof mine, all, TAG_STATUS, "the statuses of the call");
    for (int i = 0; i < r->size && agreed == CLATTN_SUCCESS; i++)
        if (all[i].status != CLATTN_SUCCESS) {
            all[i].detail[sizeof all[i].detail - 1] = '\0';
            agreed = ring_fail(r, (clattn_status)all[i].status, all[i].failed_rank, "%s", all[i].detail);
        }
    if (!r->broken)
        free(all);
    return agreed;
}
