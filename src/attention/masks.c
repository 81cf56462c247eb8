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
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

/* Batch b's tree rows (its queries) and where its parents begin in masks.tree_parents. */
static size_t tree_rows_of(const sdpa_shape *s, size_t b, size_t *first)
{
    *first = s->q_starts ? s->q_starts[b] : b * s->q_len;
    return s->q_starts ? s->q_starts[b + 1] - s->q_starts[b] : s->q_len;
}

/* Each parent an earlier query of the same sequence or −1 (so that a token's ancestors come before it, as
 * their keys do), and the ancestors' bits within size_t and the device's reach. */
static clattn_status check_tree(clattn_context *ctx, const clattn_masks *m, const sdpa_shape *s)
{
    if (!m->tree_parents)
        return CLATTN_SUCCESS;
    for (size_t b = 0; b < s->batch; b++) {
        size_t first;
        const size_t n = tree_rows_of(s, b, &first);
        for (size_t i = 0; i < n; i++)
            if (m->tree_parents[first + i] < -1 || m->tree_parents[first + i] >= (long long)i)
                return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                                 "masks.tree_parents[%zu] = %d: the parent of query %zu of batch %zu is -1 (a root) "
                                 "or one of the queries before it",
                                 first + i, m->tree_parents[first + i], i, b);
    }
    size_t words;
    if (!size_product(&words, 3, s->batch, s->q_len, (s->q_len + 31) / 32) || words > SIZE_MAX / sizeof(cl_uint))
        return set_error(ctx, CLATTN_ERROR_SIZE_OVERFLOW, "masks.tree_parents: the ancestors of %zu x %zu queries "
                         "overflow", s->batch, s->q_len);
    return CLATTN_SUCCESS;
}

/* The ancestors of every query as bits, (batch, q_len, words) words — a row's are its parent's and its own —
 * into a temporary. The kernels hide the keys of the q_len positions from a row's tree's first whose bit is
 * clear; a sequence with fewer queries (ragged) has its bits past them set: those keys are not its tree's. */
static clattn_status upload_tree(clattn_context *ctx, const sdpa_shape *s, device_masks *out)
{
    const size_t words = (s->q_len + 31) / 32, row_words = s->q_len * words; /* (check_tree: no overflow) */
    cl_uint *bits = calloc(s->batch * row_words, sizeof *bits);
    if (!bits)
        return set_error(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "tree attention's ancestors: %zu words",
                         s->batch * row_words);
    for (size_t b = 0; b < s->batch; b++) {
        size_t first;
        const size_t n = tree_rows_of(s, b, &first);
        cl_uint *plane = bits + b * row_words;
        for (size_t i = 0; i < n; i++) {
            const int parent = s->masks.tree_parents[first + i];
            if (parent >= 0)
                memcpy(plane + i * words, plane + (size_t)parent * words, words * sizeof *bits);
            plane[i * words + i / 32] |= 1u << (i % 32);
            for (size_t t = n; t < s->q_len; t++)
                plane[i * words + t / 32] |= 1u << (t % 32);
        }
    }
    clattn_status st = scratch_upload(ctx, SCRATCH_TREE, bits, s->batch * row_words * sizeof *bits,
                                      "tree attention's ancestors", &out->tree_bits);
    free(bits);
    out->tree_rows = s->q_len;
    out->tree_words = words;
    return st;
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
        (st = check_alibi_reach(ctx, &copy, s)) != CLATTN_SUCCESS || (st = check_tree(ctx, &copy, s)) != CLATTN_SUCCESS)
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

clattn_status masks_whole_call_only(clattn_context *ctx, const sdpa_shape *s, const char *who)
{
    return s->masks.tree_parents ? set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "%s does not take masks.tree_parents "
                                             "(tree attention runs as one call)", who)
                                 : CLATTN_SUCCESS;
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
    if (st == CLATTN_SUCCESS && m->tree_parents)
        st = upload_tree(ctx, s, out);
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
    if (m->tree_parents)
        f |= FEATURE_BIT(TREE);
    if ((s->desc.mods || s->desc.block_mask) && (s->desc.origin_batch || s->desc.origin_position))
        f |= FEATURE_BIT(ORIGIN);
    /* (row scales: int8's, or an FP8 cache's when it has them; never a widened copy's) */
    if (s->k_scales && dtype_format_of(s->types.k)->scales != ROW_SCALES_NONE)
        f |= FEATURE_BIT(K_SCALES);
    if (s->v_scales && dtype_format_of(s->types.v)->scales != ROW_SCALES_NONE)
        f |= FEATURE_BIT(V_SCALES);
    return f;
}
