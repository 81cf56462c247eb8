/* Device groups' layers (clattn_group_mha_host): independent batches divided between the devices, or, for a batch
 * too small to divide, its query rows — each device projecting all keys and values and its own rows, whose masks the
 * partition primitive moves to them. In reproducible arithmetic both give the bits of one device alone (each row's
 * result is a function of its own inputs). */
#include "context.h"
#include "error.h"
#include "group_parts.h"
#include "masks.h"
#include "mha.h"
#include "partition.h"
#include "sdpa.h"
#include "versioned.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One device's part of a group layer, run on a thread of its own. */
typedef struct layer_part {
    part_head head; /* first: run_parts reaches it */
    clattn_mha_desc desc;
    clattn_masks masks; /* a run of batches' */
    clattn_window window;
    partition_part rows; /* a run of query rows' masks (the partition primitive's, over every key) */
    const float *x, *kv, *mask;
    const clattn_mha_host_weights *w;
    float *out;
    float *x_copy, *mask_copy, *out_copy; /* a query split's own rows */
} layer_part;

static void *layer_part_run(void *arg)
{
    layer_part *p = arg;
    p->head.status = clattn_mha_host(p->head.ctx, &p->desc, p->x, p->kv, p->w, p->mask, p->out, NULL);
    if (p->head.status != CLATTN_SUCCESS)
        snprintf(p->head.error, sizeof p->head.error, "%s", clattn_last_error(p->head.ctx));
    return NULL;
}

/* Query rows [i0, i1) of every batch on one device, as cross-attention from those rows to all of the
 * layer's keys (self-attention: X itself), their masks the partition primitive's for that block (its
 * rows of X, of the mask and of the output copied). */
static clattn_status layer_rows_part(layer_part *p, const mha_shape *m, const clattn_mha_desc *d, const float *x,
                                     const float *kv, const float *mask, size_t i0, size_t i1)
{
    const sdpa_shape *s = &m->sdpa;
    const size_t n = i1 - i0, width = m->has_out_proj ? m->out_dim : s->heads * s->v_dim;
    p->desc = *d;
    p->desc.q_len = n;
    p->desc.kv_len = s->kv_len;
    p->desc.kv_dim = m->kv_dim;
    p->desc.masks = &p->rows.masks;
    const bool made = partition_part_init(&p->rows, s->batch);
    p->x_copy = malloc(s->batch * n * m->model_dim * sizeof *p->x_copy);
    p->out_copy = malloc(s->batch * n * width * sizeof *p->out_copy);
    if (made) /* (a hidden block still runs: a layer's empty rows are its biases) */
        (void)partition_part_make(s, NULL, i0, n, 0, s->kv_len, &p->rows);
    p->mask_copy = mask && made ? malloc(partition_mask_elems(s, &p->rows) * sizeof *p->mask_copy) : NULL;
    if (!made || !p->x_copy || !p->out_copy || (mask && !p->mask_copy))
        return set_error(NULL, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "a device's query rows");
    partition_rows_host(true, s->batch, s->q_len, m->model_dim, i0, n, (float *)x, p->x_copy);
    if (mask)
        partition_mask_host(s, &p->rows, mask, p->mask_copy);
    p->x = p->x_copy;
    p->kv = kv ? kv : x; /* self-attention: every row of X gives keys and values */
    p->mask = p->mask_copy;
    p->out = p->out_copy;
    return CLATTN_SUCCESS;
}

clattn_status clattn_group_mha_host(clattn_group *g, const clattn_mha_desc *desc, const float *x, const float *kv,
                                    const clattn_mha_host_weights *weights, const void *mask, float *out)
{
    if (!g)
        return set_error(NULL, CLATTN_ERROR_NULL_ARGUMENT, "the group is NULL");
    clattn_context *first = g->ctx[0];
    clattn_mha_host_weights w;
    mha_shape m;
    clattn_mha_desc full;
    clattn_status st = group_begin_call(g);
    if (st == CLATTN_SUCCESS)
        st = mha_host_weights_read(first, weights, &w);
    if (st == CLATTN_SUCCESS)
        st = mha_check(first, desc, kv != NULL, w.w_o != NULL, w.b_o != NULL, mask != NULL, &m);
    if (st == CLATTN_SUCCESS)
        st = versioned_copy(first, desc, sizeof full, sizeof full, sizeof(size_t), "clattn_mha_desc",
                            "CLATTN_MHA_DESC_INIT", &full);
    if (st == CLATTN_SUCCESS && (st = sdpa_check_algorithm(first, &m.sdpa, false)) == CLATTN_SUCCESS)
        st = masks_whole_call_only(first, &m.sdpa, "clattn_group_mha_host");
    if (st != CLATTN_SUCCESS)
        return set_error(NULL, st, "%s", clattn_last_error(first));
    const sdpa_shape *s = &m.sdpa;
    if (!x || !w.w_q || !w.w_k || !w.w_v || !out)
        return set_error(NULL, CLATTN_ERROR_NULL_ARGUMENT, "host array %s is NULL",
                         !x ? "x" : !w.w_q ? "w_q" : !w.w_k ? "w_k" : !w.w_v ? "w_v" : "out");
    const char *typed = m.x_type != CLATTN_FLOAT32     ? "desc.x_dtype"
                        : m.w_type != CLATTN_FLOAT32   ? "desc.weight_dtype"
                        : m.out_type != CLATTN_FLOAT32 ? "desc.out_dtype"
                        : mask && s->masks.mask_type != CLATTN_MASK_FLOAT ? "masks.mask_type"
                                                                          : NULL;
    if (typed)
        return set_error(NULL, CLATTN_ERROR_INVALID_VALUE,
                         "%s: group calls take float32 tensors and float masks", typed);
    layer_part parts[GROUP_MAX];
    memset(parts, 0, sizeof parts);
    size_t begin[GROUP_MAX + 1];
    const bool by_batch = s->batch >= g->count;
    const size_t width = m.has_out_proj ? m.out_dim : s->heads * s->v_dim;
    group_divide(g, by_batch ? s->batch : s->q_len, begin);
    for (size_t d = 0; d < g->count && st == CLATTN_SUCCESS; d++) {
        if (begin[d + 1] == begin[d])
            continue;
        layer_part *p = &parts[d];
        p->head.ctx = g->ctx[d];
        p->w = &w;
        if (by_batch) {
            const size_t b0 = begin[d], b1 = begin[d + 1], rows = group_mask_batch_rows(s);
            p->desc = full;
            p->desc.batch = b1 - b0;
            p->desc.origin_batch = full.origin_batch + b0;
            p->desc.masks = &p->masks;
            group_part_masks(s, &p->masks, &p->window, b0);
            p->x = x + b0 * s->q_len * m.model_dim;
            p->kv = kv ? kv + b0 * s->kv_len * m.kv_dim : NULL;
            p->mask = mask ? (const float *)mask + (rows ? b0 * rows * s->mask_cols : 0) : NULL;
            p->out = out + b0 * s->q_len * width;
        } else {
            st = layer_rows_part(p, &m, &full, x, kv, mask, begin[d], begin[d + 1]);
        }
        if (st == CLATTN_SUCCESS)
            st = group_part_mods(g->ctx[d], d, &p->desc.mods, &p->desc.block_mask);
    }
    if (st == CLATTN_SUCCESS)
        st = group_run_parts(parts, sizeof parts[0], g->count, layer_part_run);
    /* A query split's rows back into place, all or nothing. */
    for (size_t d = 0; d < g->count && st == CLATTN_SUCCESS && !by_batch; d++) {
        if (parts[d].head.ctx)
            partition_rows_host(false, s->batch, s->q_len, width, begin[d], begin[d + 1] - begin[d], out,
                                parts[d].out_copy);
    }
    for (size_t d = 0; d < g->count; d++) {
        partition_part_release(&parts[d].rows);
        free(parts[d].x_copy);
        free(parts[d].mask_copy);
        free(parts[d].out_copy);
    }
    return st;
}
