/* Every mask kind in one place: checks against the shape, element counts, uploads, and the kernel
 * arguments that carry them to every kernel that applies masks (cl/masks.cl holds the kernel side). */
#ifndef CLATTN_MASKS_H
#define CLATTN_MASKS_H

#include "launch.h"
#include "params.h"
#include "program.h"
#include "validate.h"

#include <stdbool.h>

/* Read the caller's masks (NULL: none) by the struct_size rule, check them against the shape
 * (mask_given: an additive mask buffer or array came with the call) and store them in s->masks, with
 * the additive mask's element count in s->mask_elems. */
clattn_status masks_resolve(clattn_context *ctx, const clattn_masks *masks, bool mask_given, sdpa_shape *s);

/* For the calls that cut a call into parts (partitions, device groups): a tree (whose parents are indexed by
 * the whole call's query rows) is refused, naming `who`. */
clattn_status masks_whole_call_only(clattn_context *ctx, const sdpa_shape *s, const char *who);

/* For the calls whose sequences have lengths of their own (ragged batches, paged caches), after
 * masks_resolve: the caller's masks.key_lengths must be NULL (`what` names where the lengths come
 * from); s->masks then takes key_lengths = keys and, under CLATTN_CAUSAL_BOTTOM_RIGHT without query
 * offsets, offsets[b] = keys[b] − queries[b] (queries NULL: q_len each) in the caller's array of B. */
clattn_status masks_per_sequence(clattn_context *ctx, sdpa_shape *s, const size_t *keys, const size_t *queries,
                                 long long *offsets, const char *what);

/* The masks and score terms of one call as the kernels take them: the fields of cl/params.h's
 * CLATTN_MASK_PARAMS (causal, key_lengths, mask, mask_layout, mask_type, mask_cols, offsets, win_left,
 * win_right, softcap, alibi: PARAMS_SET_MASKS copies them into a kernel's struct), and
 * the sinks, which the kernels that take the softmax pass. */
typedef struct device_masks {
    CLATTN_MASK_PARAMS(PARAM_FIELD)
    cl_mem sinks; /* (H) float logits, or NULL */
} device_masks;

/* Upload what the kernels need (key lengths, query offsets, ALiBi slopes and sinks go to reused
 * temporaries; the copies block, so the caller's arrays may go as soon as this returns). */
clattn_status masks_upload(clattn_context *ctx, const sdpa_shape *s, cl_mem additive, device_masks *out);

/* The call's features (cl/params.h), from its resolved shape: which masks and score terms it has,
 * sinks, and int8 K/V scales (the K/V layout's are the caller's to add). */
feature_set call_features(const sdpa_shape *s);

/* The call's mods as its kernels' builds take them (program_get), or NULL: every path passes them with
 * call_features(s), from the call's own descriptor. */
const program_mods *call_mods(const sdpa_shape *s);

#endif
