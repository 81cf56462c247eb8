/* Every mask kind: checks, element counts, uploads and kernel arguments. The kernel side of each kind
 * is in cl/masks.cl. */
#include "masks.h"

#include "context.h"
#include "error.h"
#include "fault.h"
#include "scratch.h"
#include "versioned.h"

#include <stdlib.h>

/* The first published layout (0.2.0) ends with `reserved`. */
#define MASKS_SIZE_0_2 (offsetof(clattn_masks, reserved) + sizeof(unsigned))

clattn_status masks_resolve(clattn_context *ctx, const clattn_masks *given, bool mask_given, sdpa_shape *s)
{
    clattn_masks copy = CLATTN_MASKS_INIT;
    const clattn_masks *masks = &copy;
    clattn_status st;
    if (given && (st = versioned_copy(ctx, given, sizeof copy, offsetof(clattn_masks, reserved), MASKS_SIZE_0_2, "clattn_masks",
                                      "CLATTN_MASKS_INIT",
                                      &copy)) != CLATTN_SUCCESS)
        return st;
    if (masks->causal != CLATTN_CAUSAL_NONE && masks->causal != CLATTN_CAUSAL_TOP_LEFT &&
        masks->causal != CLATTN_CAUSAL_BOTTOM_RIGHT)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "masks.causal has the unknown value %d", (int)masks->causal);
    if (masks->additive != CLATTN_MASK_NONE && masks->additive != CLATTN_MASK_L_S &&
        masks->additive != CLATTN_MASK_B_H_L_S)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "masks.additive has the unknown value %d",
                         (int)masks->additive);
    if (masks->additive == CLATTN_MASK_NONE && mask_given)
        return set_error(ctx, CLATTN_ERROR_INVALID_MASK, "a mask buffer was given but masks.additive is CLATTN_MASK_NONE");
    if (masks->additive != CLATTN_MASK_NONE && !mask_given)
        return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "masks.additive is set but the mask is NULL");
    if (masks->key_lengths)
        for (size_t b = 0; b < s->batch; b++)
            if (masks->key_lengths[b] > s->kv_len)
                return set_error(ctx, CLATTN_ERROR_INVALID_MASK, "masks.key_lengths[%zu] = %zu exceeds the key count %zu",
                                 b, masks->key_lengths[b], s->kv_len);
    /* (L, S) and (B, H, L, S) are no larger than the weights, whose size sdpa_shape_resolve checked. */
    s->masks = *masks;
    s->mask_elems = masks->additive == CLATTN_MASK_L_S      ? s->q_len * s->kv_len
                    : masks->additive == CLATTN_MASK_B_H_L_S ? s->weight_elems
                                                              : 0;
    return CLATTN_SUCCESS;
}

static clattn_status upload_key_lengths(clattn_context *ctx, const sdpa_shape *s, cl_mem *out)
{
    *out = NULL;
    if (!s->masks.key_lengths)
        return CLATTN_SUCCESS;
    cl_ulong *lengths = malloc(s->batch * sizeof *lengths);
    if (!lengths)
        return set_error(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "copying %zu key lengths", s->batch);
    for (size_t b = 0; b < s->batch; b++)
        lengths[b] = s->masks.key_lengths[b];
    cl_mem buf;
    clattn_status st = scratch_get(ctx, SCRATCH_KEY_LENGTHS, s->batch * sizeof *lengths, &buf);
    if (st == CLATTN_SUCCESS) {
        /* Blocking, so the caller's array (and ours) can go as soon as this returns. */
        cl_int err = INJECT_FAULT(CL_OUT_OF_RESOURCES);
        if (err == CL_SUCCESS)
            err = clEnqueueWriteBuffer(ctx->queue, buf, CL_TRUE, 0, s->batch * sizeof *lengths, lengths, 0, NULL,
                                       NULL);
        if (err != CL_SUCCESS)
            st = cl_error(ctx, err, "clEnqueueWriteBuffer(key lengths)");
        else
            *out = buf;
    }
    free(lengths);
    return st;
}

clattn_status masks_upload(clattn_context *ctx, const sdpa_shape *s, cl_mem additive, device_masks *out)
{
    out->causal = (cl_int)s->masks.causal;
    out->additive = additive;
    out->layout = additive ? (cl_int)s->masks.additive : CLATTN_MASK_NONE;
    return upload_key_lengths(ctx, s, &out->key_lengths);
}

void masks_kernel_args(kernel_args *a, const device_masks *m)
{
    karg(a, sizeof m->causal, &m->causal);
    karg_mem(a, m->key_lengths);
    karg_mem(a, m->additive);
    karg(a, sizeof m->layout, &m->layout);
}
