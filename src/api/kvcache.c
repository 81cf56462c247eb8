/* KV caches the application owns:
 *  - clattn_kv_append: a cache (B, kv_heads, capacity, D) grows in place, each sequence's new rows
 *    copied to rows lengths[b].. of every K/V head (rectangular copies when the rows are already in the
 *    cache's type, else a kernel that converts them, quantising into an int8 cache); the rest of the
 *    cache is not touched;
 *  - clattn_sdpa_with_past: ONNX's present = concat(past, new) along the sequence, then attention. */
#include "kvcache.h"

#include "context.h"
#include "convert.h"
#include "error.h"
#include "fault.h"
#include "masks.h"
#include "sdpa.h"
#include "validate.h"

#include <stdint.h>
#include <stdio.h>

/* Rows [length, length + rows) of every head of sequence b, from `src` (B, heads, rows, dim) into
 * `cache` (B, heads, capacity, dim), elements of elem_size bytes. */
static clattn_status copy_rows(clattn_context *ctx, cl_mem src, cl_mem cache, size_t b, size_t heads, size_t rows,
                               size_t capacity, size_t dim, size_t elem_size, size_t length, const char *what)
{
    const size_t row = dim * elem_size;
    const size_t src_origin[3] = {b * heads * rows * row, 0, 0};
    const size_t dst_origin[3] = {(b * heads * capacity + length) * row, 0, 0};
    const size_t region[3] = {rows * row, heads, 1};
    cl_int err = INJECT_FAULT(CL_OUT_OF_RESOURCES);
    if (err == CL_SUCCESS)
        err = clEnqueueCopyBufferRect(ctx->queue, src, cache, src_origin, dst_origin, region, rows * row, 0,
                                      capacity * row, 0, 0, NULL, NULL);
    return err == CL_SUCCESS ? CLATTN_SUCCESS : cl_error(ctx, err, what);
}

/* One cache's append: rectangular copies when the new rows are in its type, else the conversion kernel
 * (which quantises into an int8 cache, with its scales). */
static clattn_status append_to(clattn_context *ctx, const sdpa_shape *s, const size_t *lengths, size_t new_len,
                               cl_mem rows, size_t dim, cl_mem cache, clattn_dtype type, cl_mem scales,
                               const char *which)
{
    clattn_status st = CLATTN_SUCCESS;
    if (type == s->types.q) {
        char what[64];
        snprintf(what, sizeof what, "appending %s rows (clEnqueueCopyBufferRect)", which);
        for (size_t b = 0; b < s->batch && st == CLATTN_SUCCESS; b++)
            st = copy_rows(ctx, rows, cache, b, s->kv_heads, new_len, s->kv_len, dim, dtype_bytes(type), lengths[b],
                           what);
        return st;
    }
    cl_mem lengths_buf;
    const append_target t = {cache, scales, type, s->kv_len, NULL, 0, 0};
    st = scratch_upload_integers(ctx, SCRATCH_KEY_LENGTHS, lengths, NULL, s->batch, "the cache lengths", &lengths_buf);
    return st != CLATTN_SUCCESS ? st : append_rows(ctx, rows, s->types.q, s->batch, s->kv_heads, new_len, dim, &t,
                                                   lengths_buf);
}

clattn_status clattn_kv_append(clattn_context *ctx, const clattn_sdpa_desc *desc, const size_t *lengths,
                               size_t new_len, cl_mem k_new, cl_mem v_new, cl_mem k_cache, cl_mem v_cache)
{
    clattn_status st = check_context(ctx);
    clattn_sdpa_desc d;
    sdpa_shape s;
    if (st != CLATTN_SUCCESS || (st = sdpa_desc_read(ctx, desc, &d)) != CLATTN_SUCCESS)
        return st;
    if (new_len == 0)
        return set_error(ctx, CLATTN_ERROR_ZERO_SIZE, "clattn_kv_append: new_len is 0");
    /* The cache's shape: kv_len is its capacity; there are no queries, so q_len stands at 1. */
    d.q_len = 1;
    if ((st = sdpa_shape_resolve(ctx, &d, &s)) != CLATTN_SUCCESS)
        return st;
    /* MLA's latent form: no V cache, the new latent rows in k_new alone. */
    if (!v_cache && !v_new && (st = latent_resolve(ctx, &s, "clattn_kv_append")) != CLATTN_SUCCESS)
        return st;
    if (!lengths)
        return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "clattn_kv_append: lengths is NULL");
    for (size_t b = 0; b < s.batch; b++)
        if (lengths[b] > s.kv_len || new_len > s.kv_len - lengths[b])
            return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                             "clattn_kv_append: lengths[%zu] = %zu plus new_len %zu passes the capacity desc.kv_len = %zu",
                             b, lengths[b], new_len, s.kv_len);
    size_t new_k, new_v, bytes;
    if (!size_product(&new_k, 4, s.batch, s.kv_heads, new_len, s.qk_dim) ||
        !size_product(&new_v, 4, s.batch, s.kv_heads, new_len, s.v_dim) || !size_mul(new_k, sizeof(float), &bytes) ||
        !size_mul(new_v, sizeof(float), &bytes))
        return set_error(ctx, CLATTN_ERROR_SIZE_OVERFLOW, "clattn_kv_append: new_len %zu overflows the new rows' size",
                         new_len);
    /* The new rows are in q_dtype (they come from the projection that makes the queries). */
    if ((st = check_tensor(ctx, k_new, new_k, s.types.q, "k_new")) != CLATTN_SUCCESS ||
        (!s.v_in_k && (st = check_tensor(ctx, v_new, new_v, s.types.q, "v_new")) != CLATTN_SUCCESS) ||
        (st = check_kv_tensor(ctx, k_cache, s.types.k, s.batch * s.kv_heads, s.kv_len, s.qk_dim, "k_cache")) !=
            CLATTN_SUCCESS ||
        (!s.v_in_k &&
         (st = check_kv_tensor(ctx, v_cache, s.types.v, s.batch * s.kv_heads, s.kv_len, s.v_dim, "v_cache")) !=
             CLATTN_SUCCESS) ||
        (st = check_scales(ctx, &s, s.k_elems / s.qk_dim, s.v_elems / s.v_dim)) != CLATTN_SUCCESS)
        return st;
    if (k_new == k_cache ||
        (!s.v_in_k && (k_new == v_cache || v_new == k_cache || v_new == v_cache || k_cache == v_cache)))
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                         "clattn_kv_append: the new rows and the caches must be different buffers");
    st = append_to(ctx, &s, lengths, new_len, k_new, s.qk_dim, k_cache, s.types.k, s.k_scales, "K");
    if (st != CLATTN_SUCCESS || s.v_in_k)
        return st;
    return append_to(ctx, &s, lengths, new_len, v_new, s.v_dim, v_cache, s.types.v, s.v_scales, "V");
}

clattn_status past_check(clattn_context *ctx, const clattn_sdpa_desc *desc, size_t past_len, bool mask_given,
                         past_shape *p)
{
    clattn_sdpa_desc d;
    clattn_status st = sdpa_desc_read(ctx, desc, &d);
    if (st != CLATTN_SUCCESS)
        return st;
    const char *quantised = quantised_kv_field(&d); /* (before the type checks: see quantised_kv_field) */
    if (quantised)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                         "desc.%s is quantised: the past/present form takes no quantised K/V (append to a quantised "
                         "cache with clattn_kv_append instead)", quantised);
    if (d.kv_len == 0)
        return set_error(ctx, CLATTN_ERROR_ZERO_SIZE, "desc.kv_len (the new rows) is 0");
    if (past_len > SIZE_MAX - d.kv_len)
        return set_error(ctx, CLATTN_ERROR_SIZE_OVERFLOW, "past_len %zu plus desc.kv_len %zu overflows", past_len,
                         d.kv_len);
    p->past_len = past_len;
    p->new_len = d.kv_len;
    d.kv_len += past_len;
    sdpa_shape *s = &p->s;
    if ((st = sdpa_shape_resolve(ctx, &d, s)) != CLATTN_SUCCESS ||
        (st = masks_resolve(ctx, d.masks, mask_given, s)) != CLATTN_SUCCESS)
        return st;
    /* Parts of the present's sizes, which sdpa_shape_resolve checked: no overflow. */
    p->past_k_elems = s->batch * s->kv_heads * past_len * s->qk_dim;
    p->past_v_elems = s->batch * s->kv_heads * past_len * s->v_dim;
    p->new_k_elems = s->k_elems - p->past_k_elems;
    p->new_v_elems = s->v_elems - p->past_v_elems;
    return CLATTN_SUCCESS;
}

clattn_status past_run(clattn_context *ctx, const past_shape *p, cl_mem past_k, cl_mem past_v, cl_mem q, cl_mem k,
                       cl_mem v, cl_mem mask, cl_mem present_k, cl_mem present_v, cl_mem out, cl_mem weights,
                       cl_mem lse)
{
    const sdpa_shape *s = &p->s;
    const size_t kb = dtype_bytes(s->types.k), vb = dtype_bytes(s->types.v);
    clattn_status st = CLATTN_SUCCESS;
    for (size_t b = 0; b < s->batch && st == CLATTN_SUCCESS; b++) {
        if (p->past_len > 0) {
            st = copy_rows(ctx, past_k, present_k, b, s->kv_heads, p->past_len, s->kv_len, s->qk_dim, kb, 0,
                           "copying past K rows (clEnqueueCopyBufferRect)");
            if (st == CLATTN_SUCCESS)
                st = copy_rows(ctx, past_v, present_v, b, s->kv_heads, p->past_len, s->kv_len, s->v_dim, vb, 0,
                               "copying past V rows (clEnqueueCopyBufferRect)");
        }
        if (st == CLATTN_SUCCESS)
            st = copy_rows(ctx, k, present_k, b, s->kv_heads, p->new_len, s->kv_len, s->qk_dim, kb, p->past_len,
                           "copying new K rows (clEnqueueCopyBufferRect)");
        if (st == CLATTN_SUCCESS)
            st = copy_rows(ctx, v, present_v, b, s->kv_heads, p->new_len, s->kv_len, s->v_dim, vb, p->past_len,
                           "copying new V rows (clEnqueueCopyBufferRect)");
    }
    return st != CLATTN_SUCCESS ? st : sdpa_run_dense(ctx, s, q, present_k, present_v, mask, out, weights, lse);
}

clattn_status clattn_sdpa_with_past(clattn_context *ctx, const clattn_sdpa_desc *desc, size_t past_len,
                                    cl_mem past_k, cl_mem past_v, cl_mem q, cl_mem k, cl_mem v, cl_mem mask,
                                    cl_mem present_k, cl_mem present_v, cl_mem out, cl_mem weights, cl_mem lse)
{
    clattn_status st = check_context(ctx);
    past_shape p;
    if (st != CLATTN_SUCCESS || (st = past_check(ctx, desc, past_len, mask != NULL, &p)) != CLATTN_SUCCESS)
        return st;
    const sdpa_shape *s = &p.s;
    const tensor_types t = s->types;
    if ((past_len > 0 && (st = check_tensor(ctx, past_k, p.past_k_elems, t.k, "past_k")) != CLATTN_SUCCESS) ||
        (past_len > 0 && (st = check_tensor(ctx, past_v, p.past_v_elems, t.v, "past_v")) != CLATTN_SUCCESS) ||
        (st = check_tensor(ctx, q, s->q_elems, t.q, "q")) != CLATTN_SUCCESS ||
        (st = check_tensor(ctx, k, p.new_k_elems, t.k, "k")) != CLATTN_SUCCESS ||
        (st = check_tensor(ctx, v, p.new_v_elems, t.v, "v")) != CLATTN_SUCCESS ||
        (mask && (st = check_buffer(ctx, mask, s->mask_elems, s->mask_elem_size, "mask")) != CLATTN_SUCCESS) ||
        (st = check_tensor(ctx, present_k, s->k_elems, t.k, "present_k")) != CLATTN_SUCCESS ||
        (st = check_tensor(ctx, present_v, s->v_elems, t.v, "present_v")) != CLATTN_SUCCESS ||
        (st = check_tensor(ctx, out, s->out_elems, t.o, "out")) != CLATTN_SUCCESS ||
        (weights && (st = check_buffer(ctx, weights, s->weight_elems, sizeof(float), "weights")) != CLATTN_SUCCESS) ||
        (lse && (st = check_buffer(ctx, lse, s->lse_elems, sizeof(float), "lse")) != CLATTN_SUCCESS) ||
        (st = sdpa_check_algorithm(ctx, s, weights != NULL)) != CLATTN_SUCCESS)
        return st;
    /* The present is written while the past and new rows are read: they must not be the same buffers. */
    const cl_mem inputs[] = {past_len > 0 ? past_k : NULL, past_len > 0 ? past_v : NULL, k, v, q};
    for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++)
        if (inputs[i] && (inputs[i] == present_k || inputs[i] == present_v))
            return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                             "clattn_sdpa_with_past: present_k and present_v must be buffers of their own, not the "
                             "past, the new rows or q");
    if (present_k == present_v)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                         "clattn_sdpa_with_past: present_k and present_v are the same buffer");
    return past_run(ctx, &p, past_k, past_v, q, k, v, mask, present_k, present_v, out, weights, lse);
}
