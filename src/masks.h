/* Every mask kind in one place: checks against the shape, element counts, uploads, and the kernel
 * arguments that carry them to every kernel that applies masks (cl/masks.cl holds the kernel side). */
#ifndef CLATTN_MASKS_H
#define CLATTN_MASKS_H

#include "launch.h"
#include "validate.h"

#include <stdbool.h>

/* Read the caller's masks (NULL: none) by the struct_size rule, check them against the shape
 * (mask_given: an additive mask buffer or array came with the call) and store them in s->masks, with
 * the additive mask's element count in s->mask_elems. */
clattn_status masks_resolve(clattn_context *ctx, const clattn_masks *masks, bool mask_given, sdpa_shape *s);

/* For the calls whose sequences have lengths of their own (ragged batches, paged caches), after
 * masks_resolve: the caller's masks.key_lengths must be NULL (`what` names where the lengths come
 * from); s->masks then takes key_lengths = keys and, under CLATTN_CAUSAL_BOTTOM_RIGHT without query
 * offsets, offsets[b] = keys[b] − queries[b] (queries NULL: q_len each) in the caller's array of B. */
clattn_status masks_per_sequence(clattn_context *ctx, sdpa_shape *s, const size_t *keys, const size_t *queries,
                                 long long *offsets, const char *what);

/* The masks and score terms of one call as the kernels take them. */
typedef struct device_masks {
    cl_int causal;
    cl_mem key_lengths;   /* (B) ulong, or NULL */
    cl_mem additive;      /* the caller's mask, or NULL */
    cl_int layout;
    cl_int type;          /* float or bool entries */
    size_t cols;          /* the mask's keys per row */
    cl_mem query_offsets; /* (B) long, or NULL */
    cl_long win_left, win_right; /* −1: unbounded */
    cl_float softcap;     /* 0: off */
    cl_mem alibi;         /* (H) float slopes, or NULL */
    cl_mem sinks;         /* (H) float logits, or NULL: the softmax's, not a score term */
} device_masks;

/* Upload what the kernels need (key lengths, query offsets, ALiBi slopes and sinks go to reused
 * temporaries; the copies block, so the caller's arrays may go as soon as this returns). */
clattn_status masks_upload(clattn_context *ctx, const sdpa_shape *s, cl_mem additive, device_masks *out);

/* The mask and score-term arguments of every attention kernel that makes scores, in their order:
 * causal, key lengths, mask, its layout, type and keys per row, query offsets, window left and right,
 * softcap, ALiBi slopes. (Sinks are passed by the kernels that take the softmax.) */
void masks_kernel_args(kernel_args *a, const device_masks *m);

#endif
