/* clattn_kv_append: the KV cache the application owns, (B, kv_heads, capacity, D) for K and likewise for
 * V, grows in place: each sequence's new rows are copied to rows lengths[b].. of every K/V head, by one
 * rectangular copy per sequence and tensor (no kernel; the rest of the cache is not touched). */
#include "context.h"
#include "error.h"
#include "fault.h"
#include "validate.h"

/* Rows [length, length + rows) of every head of sequence b, from `src` (B, heads, rows, dim) into
 * `cache` (B, heads, capacity, dim). */
static clattn_status copy_rows(clattn_context *ctx, cl_mem src, cl_mem cache, size_t b, size_t heads, size_t rows,
                               size_t capacity, size_t dim, size_t length, const char *what)
{
    const size_t row = dim * sizeof(float);
    const size_t src_origin[3] = {b * heads * rows * row, 0, 0};
    const size_t dst_origin[3] = {(b * heads * capacity + length) * row, 0, 0};
    const size_t region[3] = {rows * row, heads, 1};
    cl_int err = INJECT_FAULT(CL_OUT_OF_RESOURCES);
    if (err == CL_SUCCESS)
        err = clEnqueueCopyBufferRect(ctx->queue, src, cache, src_origin, dst_origin, region, rows * row, 0,
                                      capacity * row, 0, 0, NULL, NULL);
    return err == CL_SUCCESS ? CLATTN_SUCCESS : cl_error(ctx, err, what);
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
    if (!lengths)
        return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "clattn_kv_append: lengths is NULL");
    for (size_t b = 0; b < s.batch; b++)
        if (lengths[b] > s.kv_len || new_len > s.kv_len - lengths[b])
            return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                             "clattn_kv_append: lengths[%zu] = %zu plus new_len %zu passes the capacity desc.kv_len = %zu",
                             b, lengths[b], new_len, s.kv_len);
    size_t new_k, new_v;
    if (!size_product(&new_k, 4, s.batch, s.kv_heads, new_len, s.qk_dim) ||
        !size_product(&new_v, 4, s.batch, s.kv_heads, new_len, s.v_dim) || !size_mul(new_k, sizeof(float), &new_k) ||
        !size_mul(new_v, sizeof(float), &new_v))
        return set_error(ctx, CLATTN_ERROR_SIZE_OVERFLOW, "clattn_kv_append: new_len %zu overflows the new rows' size",
                         new_len);
    if ((st = check_buffer(ctx, k_new, new_k / sizeof(float), sizeof(float), "k_new")) != CLATTN_SUCCESS ||
        (st = check_buffer(ctx, v_new, new_v / sizeof(float), sizeof(float), "v_new")) != CLATTN_SUCCESS ||
        (st = check_buffer(ctx, k_cache, s.k_elems, sizeof(float), "k_cache")) != CLATTN_SUCCESS ||
        (st = check_buffer(ctx, v_cache, s.v_elems, sizeof(float), "v_cache")) != CLATTN_SUCCESS)
        return st;
    if (k_new == k_cache || k_new == v_cache || v_new == k_cache || v_new == v_cache || k_cache == v_cache)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                         "clattn_kv_append: the new rows and the caches must be four different buffers");
    for (size_t b = 0; b < s.batch && st == CLATTN_SUCCESS; b++) {
        st = copy_rows(ctx, k_new, k_cache, b, s.kv_heads, new_len, s.kv_len, s.qk_dim, lengths[b],
                       "appending K rows (clEnqueueCopyBufferRect)");
        if (st == CLATTN_SUCCESS)
            st = copy_rows(ctx, v_new, v_cache, b, s.kv_heads, new_len, s.kv_len, s.v_dim, lengths[b],
                           "appending V rows (clEnqueueCopyBufferRect)");
    }
    return st;
}
