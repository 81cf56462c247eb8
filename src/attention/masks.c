/* Every mask kind: checks, element counts, uploads and kernel arguments. The kernel side of each kind
 * is in cl/masks.cl. */
#include "masks.h"

#include "context.h"
#include "error.h"
#include "block_mask.h"
#include "fault.h"
#include "mods.h"
#include "scratch.h"
#include "versioned.h"
#include "versioned_rule.h" /* MASKS_SIZE_0_2 */

#include <math.h>
#include <stdlib.h>

/* Query offsets and window sizes are kept within ±2^61, so that no position sum in cl/masks.cl (an
 * offset plus a row plus a window) overflows a long. */
#define POSITION_LIMIT ((long long)1 << 61)

static clattn_status check_positions(clattn_context *ctx, const clattn_masks *m, size_t batch)
{
    for (size_t b = 0; m->query_offsets && b < batch; b++)
        if (m->query_offsets[b] > POSITION_LIMIT || m->query_offsets[b] < -POSITION_LIMIT)
            return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "masks.query_offsets[%zu] = %lld is beyond +-2^61", b,
                             m->query_offsets[b]);
    if (m->window) {
        const long long sides[2] = {m->window->left, m->window->right};
        for (int i = 0; i < 2; i++)
            if (sides[i] < -1 || sides[i] > POSITION_LIMIT)
                return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                                 "masks.window->%s = %lld: a window side is -1 (unbounded) or 0..2^61",
                                 i ? "right" : "left", sides[i]);
    }
    return CLATTN_SUCCESS;
}

/* ALiBi's slope·(j − p) is computed in float: over every (query, key) pair of the call the distance
 * |j − p|, at most S + L + the largest |offset|, must be an exact float (below 2^24: beyond it
 * neighbouring keys would get the same bias), and the bias must stay far from float's range. */
static clattn_status check_alibi_reach(clattn_context *ctx, const clattn_masks *m, const sdpa_shape *s)
{
    if (!s->desc.alibi_slopes)
        return CLATTN_SUCCESS;
    double reach = (double)s->kv_len + (double)s->q_len, largest = 0;
    for (size_t b = 0; m->query_offsets && b < s->batch; b++)
        largest = fmax(largest, fabs((double)m->query_offsets[b]));
    reach += largest;
    if (reach > (double)(1 << 24))
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                         "desc.alibi_slopes with query positions up to %.0f keys away: ALiBi needs distances below "
                         "2^24 (float's exact integers)", reach);
    for (size_t h = 0; h < s->heads; h++)
        if (fabs((double)s->desc.alibi_slopes[h]) * reach > 1e30)
            return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                             "desc.alibi_slopes[%zu] = %g times a distance of up to %.0f keys passes 1e30: the bias "
                             "would overflow float",
                             h, (double)s->desc.alibi_slopes[h], reach);
    return CLATTN_SUCCESS;
}

clattn_status masks_resolve(clattn_context *ctx, const clattn_masks *given, bool mask_given, sdpa_shape *s)
{
    clattn_masks copy = CLATTN_MASKS_INIT;
    const clattn_masks *masks = &copy;
    clattn_status st;
    if (given && (st = versioned_copy(ctx, given, sizeof copy, sizeof copy, MASKS_SIZE_0_2, "clattn_masks",
                                      "CLATTN_MASKS_INIT", &copy)) != CLATTN_SUCCESS)
        return st;
    if (copy.reserved != 0 || copy.mask_reserved != 0)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "masks.%s is %u, not 0 (start from CLATTN_MASKS_INIT)",
                         copy.reserved ? "reserved" : "mask_reserved", copy.reserved ? copy.reserved : copy.mask_reserved);
    if ((st = check_positions(ctx, &copy, s->batch)) != CLATTN_SUCCESS ||
        (st = check_alibi_reach(ctx, &copy, s)) != CLATTN_SUCCESS)
        return st;
    if (masks->causal != CLATTN_CAUSAL_NONE && masks->causal != CLATTN_CAUSAL_TOP_LEFT &&
        masks->causal != CLATTN_CAUSAL_BOTTOM_RIGHT)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "masks.causal has the unknown value %d", (int)masks->causal);
    if ((unsigned)masks->additive > CLATTN_MASK_B_1_1_S)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "masks.additive has the unknown value %d",
                         (int)masks->additive);
    if ((unsigned)masks->mask_type > CLATTN_MASK_BFLOAT16)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "masks.mask_type has the unknown value %d",
                         (int)masks->mask_type);
    if (masks->mask_kv_len > s->kv_len)
        return set_error(ctx, CLATTN_ERROR_INVALID_MASK, "masks.mask_kv_len = %zu is wider than the key count %zu",
                         masks->mask_kv_len, s->kv_len);
    if (masks->additive == CLATTN_MASK_NONE && mask_given)
        return set_error(ctx, CLATTN_ERROR_INVALID_MASK, "a mask buffer was given but masks.additive is CLATTN_MASK_NONE");
    if (masks->additive != CLATTN_MASK_NONE && !mask_given)
        return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "masks.additive is set but the mask is NULL");
    if (masks->key_lengths)
        for (size_t b = 0; b < s->batch; b++)
            if (masks->key_lengths[b] > s->kv_len)
                return set_error(ctx, CLATTN_ERROR_INVALID_MASK, "masks.key_lengths[%zu] = %zu exceeds the key count %zu",
                                 b, masks->key_lengths[b], s->kv_len);
    s->masks = *masks;
    s->mask_cols = masks->mask_kv_len ? masks->mask_kv_len : s->kv_len;
    s->mask_elem_size = masks->mask_type == CLATTN_MASK_BOOL    ? 1
                        : masks->mask_type == CLATTN_MASK_FLOAT ? sizeof(float)
                                                                : 2; /* half, bfloat16 */
    /* Every layout is no larger than the (B, H, L, S) weights, whose size sdpa_shape_resolve checked. */
    const size_t matrix = s->q_len * s->mask_cols;
    switch (masks->additive) {
    case CLATTN_MASK_L_S: s->mask_elems = matrix; break;
    case CLATTN_MASK_B_H_L_S: s->mask_elems = s->batch * s->heads * matrix; break;
    case CLATTN_MASK_B_1_L_S: s->mask_elems = s->batch * matrix; break;
    case CLATTN_MASK_1_H_L_S: s->mask_elems = s->heads * matrix; break;
    case CLATTN_MASK_B_1_1_S: s->mask_elems = s->batch * s->mask_cols; break;
    default: s->mask_elems = 0; break;
    }
    return CLATTN_SUCCESS;
}

/* `bytes` of `data` into a reused temporary, blocking (so the caller's array, and ours, can go as soon
 * as this returns). */
clattn_status masks_per_sequence(clattn_context *ctx, sdpa_shape *s, const size_t *keys, const size_t *queries,
                                 long long *offsets, const char *what)
{
    if (s->masks.key_lengths)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "masks.key_lengths must be NULL here: %s give each "
                         "sequence's keys", what);
    s->masks.key_lengths = keys;
    if (s->masks.causal == CLATTN_CAUSAL_BOTTOM_RIGHT && !s->masks.query_offsets) {
        for (size_t b = 0; b < s->batch; b++) /* both below 2^61: sizes of tensors that exist */
            offsets[b] = (long long)keys[b] - (long long)(queries ? queries[b] : s->q_len);
        s->masks.query_offsets = offsets;
    }
    return CLATTN_SUCCESS;
}

/* The per-head arrays a call may upload, each in a temporary of its own (SCRATCH_PER_HEAD onwards). */
enum { HEAD_ALIBI, HEAD_SINKS, HEAD_LOGIT_SCALE, HEAD_ARRAYS };
_Static_assert(SCRATCH_PER_HEAD + HEAD_ARRAYS - 1 <= SCRATCH_PER_HEAD_LAST, "scratch.h: more per-head slots");

/* `heads` floats of the caller's (NULL: none, *out = NULL) into per-head slot `which`. */
static clattn_status upload_per_head(clattn_context *ctx, const sdpa_shape *s, int which, const float *values,
                                     const char *what, cl_mem *out)
{
    *out = NULL;
    return values ? scratch_upload(ctx, (scratch_slot)(SCRATCH_PER_HEAD + which), values, s->heads * sizeof(float),
                                   what, out)
                  : CLATTN_SUCCESS;
}

clattn_status masks_upload(clattn_context *ctx, const sdpa_shape *s, cl_mem additive, device_masks *out)
{
    const clattn_masks *m = &s->masks;
    *out = (device_masks){0};
    out->causal = (int)m->causal;
    out->mask = additive;
    out->mask_layout = additive ? (int)m->additive : CLATTN_MASK_NONE;
    out->mask_type = (int)m->mask_type;
    out->mask_cols = s->mask_cols;
    out->win_left = m->window ? m->window->left : -1;
    out->win_right = m->window ? m->window->right : -1;
    out->softcap = s->desc.softcap;
    out->origin_batch = s->desc.origin_batch;
    out->origin_position = s->desc.origin_position;
    clattn_status st = CLATTN_SUCCESS;
    if (m->key_lengths)
        st = scratch_upload_integers(ctx, SCRATCH_KEY_LENGTHS, m->key_lengths, NULL, s->batch, "key lengths", &out->key_lengths);
    if (st == CLATTN_SUCCESS && m->query_offsets)
        st = scratch_upload_integers(ctx, SCRATCH_QUERY_OFFSETS, NULL, m->query_offsets, s->batch, "query offsets",
                             &out->offsets);
    if (st == CLATTN_SUCCESS)
        st = upload_per_head(ctx, s, HEAD_ALIBI, s->desc.alibi_slopes, "ALiBi slopes", &out->alibi);
    if (st == CLATTN_SUCCESS)
        st = upload_per_head(ctx, s, HEAD_SINKS, s->desc.sinks, "sinks", &out->sinks);
    if (st == CLATTN_SUCCESS)
        st = upload_per_head(ctx, s, HEAD_LOGIT_SCALE, s->desc.logit_scale, "logit scales", &out->logit_scale);
    cl_mem aux[4];
    if (st == CLATTN_SUCCESS && (st = mods_bind(ctx, s->desc.mods, s, aux)) == CLATTN_SUCCESS) {
        out->mod_aux0 = aux[0];
        out->mod_aux1 = aux[1];
        out->mod_aux2 = aux[2];
        out->mod_aux3 = aux[3];
    }
    block_mask_args bm;
    if (st == CLATTN_SUCCESS && (st = block_mask_bind(ctx, s->desc.block_mask, s, &bm)) == CLATTN_SUCCESS) {
        out->bm_states = bm.states;
        out->bm_batch = bm.batch, out->bm_heads = bm.heads;
        out->bm_qblocks = bm.qblocks, out->bm_kblocks = bm.kblocks;
        out->bm_block_q = bm.block_q ? bm.block_q : 1, out->bm_block_k = bm.block_k ? bm.block_k : 1;
    }
    return st;
}

const program_mods *call_mods(const sdpa_shape *s) { return mods_program(s->desc.mods); }

feature_set call_features(const sdpa_shape *s)
{
    const clattn_masks *m = &s->masks;
    feature_set f = FEATURE_BIT(ALL);
    if (m->causal != CLATTN_CAUSAL_NONE)
        f |= FEATURE_BIT(CAUSAL);
    if (m->key_lengths)
        f |= FEATURE_BIT(KEY_LENGTHS);
    if (m->additive != CLATTN_MASK_NONE)
        f |= FEATURE_BIT(MASK);
    if (m->query_offsets)
        f |= FEATURE_BIT(OFFSETS);
    if (m->window)
        f |= FEATURE_BIT(WINDOW);
    if (s->desc.softcap > 0.0f)
        f |= FEATURE_BIT(SOFTCAP);
    if (s->desc.alibi_slopes)
        f |= FEATURE_BIT(ALIBI);
    if (s->desc.sinks)
        f |= FEATURE_BIT(SINKS);
    if (s->desc.logit_scale)
        f |= FEATURE_BIT(LOGIT_SCALE);
    if (s->desc.mods)
        f |= FEATURE_BIT(MODS);
    if (s->desc.block_mask)
        f |= FEATURE_BIT(BLOCK_MASK);
    if ((s->desc.mods || s->desc.block_mask) && (s->desc.origin_batch || s->desc.origin_position))
        f |= FEATURE_BIT(ORIGIN);
    /* (row scales: int8's, or an FP8 cache's when it has them; never a widened copy's) */
    if (s->k_scales && dtype_format_of(s->types.k)->scales != ROW_SCALES_NONE)
        f |= FEATURE_BIT(K_SCALES);
    if (s->v_scales && dtype_format_of(s->types.v)->scales != ROW_SCALES_NONE)
        f |= FEATURE_BIT(V_SCALES);
    return f;
}
