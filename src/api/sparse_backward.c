/* clattn_sdpa_sparse_backward: the gradients of top-k sparse attention over a dense K/V (cl/sparse_backward.cl:
 * dQ per query row over its selected keys; dK and dV per key over the rows that selected it, through each key's
 * list of those rows, built here on the host from the indices). */
#include "backward.h"
#include "context.h"
#include "error.h"
#include "launch.h"
#include "program.h"
#include "reproducible.h"
#include "scratch.h"
#include "sparse.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* What the float pass needs besides the tensors. */
typedef struct sparse_backward_call {
    size_t top_k;
    cl_mem indices;
    const size_t *lengths;
} sparse_backward_call;

/* Each sequence's keys' lists of the query rows that selected them, in ascending row order (a row once for
 * each time it selected the key): starts (B × (S + 1), the lists' bounds in rows) and rows, from the indices
 * read back. A counting sort on the host: the order is fixed (the sums per key are deterministic) and the read
 * back is small next to the pass (B·L·top_k integers against B·H·L·top_k pairs of dot products). */
static clattn_status key_lists(clattn_context *ctx, const sdpa_shape *s, const sparse_backward_call *c,
                               cl_mem *starts_buf, cl_mem *rows_buf)
{
    const size_t n = s->batch * s->q_len * c->top_k, cols = s->kv_len + 1; /* (products checked by the call) */
    cl_int *indices = malloc(n * sizeof *indices);
    cl_ulong *starts = calloc(s->batch * cols, sizeof *starts), *cursor = malloc(s->batch * cols * sizeof *cursor);
    cl_uint *rows = NULL;
    clattn_status st = indices && starts && cursor ? CLATTN_SUCCESS
                       : set_error(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "the sparse backward's key lists");
    if (st == CLATTN_SUCCESS) {
        const cl_int err = clEnqueueReadBuffer(ctx->queue, c->indices, CL_TRUE, 0, n * sizeof *indices, indices, 0,
                                               NULL, NULL);
        if (err != CL_SUCCESS)
            st = cl_error(ctx, err, "reading the indices back");
    }
    /* Count each key's selections (at its list's end), sum the counts into bounds, then place the rows. */
    for (size_t e = 0; st == CLATTN_SUCCESS && e < n; e++) {
        const size_t b = e / (s->q_len * c->top_k), len = c->lengths ? c->lengths[b] : s->kv_len;
        if (indices[e] >= 0 && (size_t)indices[e] < len)
            starts[b * cols + (size_t)indices[e] + 1]++;
    }
    for (size_t x = 1; st == CLATTN_SUCCESS && x < s->batch * cols; x++)
        starts[x] += starts[x - 1];
    const size_t total = st == CLATTN_SUCCESS ? (size_t)starts[s->batch * cols - 1] : 0;
    if (st == CLATTN_SUCCESS && !(rows = malloc((total ? total : 1) * sizeof *rows)))
        st = set_error(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "the sparse backward's key lists (%zu rows)", total);
    for (size_t x = 0; st == CLATTN_SUCCESS && x < s->batch * cols; x++)
        cursor[x] = starts[x];
    for (size_t e = 0; st == CLATTN_SUCCESS && e < n; e++) {
        const size_t b = e / (s->q_len * c->top_k), len = c->lengths ? c->lengths[b] : s->kv_len;
        if (indices[e] >= 0 && (size_t)indices[e] < len)
            rows[cursor[b * cols + (size_t)indices[e]]++] = (cl_uint)(e / c->top_k % s->q_len);
    }
    if (st == CLATTN_SUCCESS)
        st = scratch_upload(ctx, SCRATCH_SPARSE_STARTS, starts, s->batch * cols * sizeof *starts,
                            "the sparse backward's key lists", starts_buf);
    if (st == CLATTN_SUCCESS)
        st = scratch_upload(ctx, SCRATCH_SPARSE_ROWS, rows, (total ? total : 1) * sizeof *rows,
                            "the sparse backward's key lists", rows_buf);
    free(indices);
    free(starts);
    free(cursor);
    free(rows);
    return st;
}

/* The pass on float32 tensors: dQ and D, then dK and dV, then the sinks' gradients. */
static clattn_status sparse_pass(clattn_context *ctx, const sdpa_shape *s, const void *call, const backward_tensors *t,
                                 float *dsinks)
{
    const sparse_backward_call *c = call;
    cl_mem delta = NULL, lengths = NULL, starts = NULL, rows = NULL;
    clattn_status st = scratch_get(ctx, SCRATCH_DELTA, s->lse_elems * sizeof(float), &delta);
    if (st == CLATTN_SUCCESS && c->lengths)
        st = scratch_upload_integers(ctx, SCRATCH_KEY_LENGTHS, c->lengths, NULL, s->batch, "lengths", &lengths);
    if (st != CLATTN_SUCCESS || (st = key_lists(ctx, s, c, &starts, &rows)) != CLATTN_SUCCESS)
        return st;
    unsigned vec;
    if ((st = sparse_vector_width(ctx, s, &vec)) != CLATTN_SUCCESS)
        return st;
    char options[96];
    snprintf(options, sizeof options, "-DROWS=%zu -DVEC=%u -DDK=%zu -DDV=%zu", s->group, vec, s->qk_dim, s->v_dim);
    const family_build *fb;
    if ((st = program_get(ctx, &family_sparse_backward, options, 0, 0, NULL, &fb)) != CLATTN_SUCCESS)
        return st;
    const sparse_backward_params p = {t->q, t->k, t->v, t->out, t->dout, t->lse, delta, c->indices, lengths, starts,
                                      rows, t->dq, t->dk, t->dv, s->batch, s->heads, s->q_len, s->kv_len, c->top_k,
                                      s->scale, s->desc.softcap};
    kernel_args a = kernel_args_begin(fb->kernels[0]);
    params_bind(&a, &params_sparse_backward_dq, &p, fb->features);
    /* (a work-item a query row or key of a K/V head: its group's query heads together) */
    const size_t queries[1] = {s->batch * s->q_len * s->kv_heads}, keys[1] = {s->batch * s->kv_heads * s->kv_len};
    if ((st = kernel_launch_auto(ctx, &a, "sparse backward dQ", 1, queries)) != CLATTN_SUCCESS)
        return st;
    a = kernel_args_begin(fb->kernels[1]);
    params_bind(&a, &params_sparse_backward_dkdv, &p, fb->features);
    if ((st = kernel_launch_auto(ctx, &a, "sparse backward dK dV", 1, keys)) != CLATTN_SUCCESS)
        return st;
    return dsinks && s->desc.sinks ? backward_sink_gradients(ctx, s, delta, t->lse, dsinks) : CLATTN_SUCCESS;
}

clattn_status clattn_sdpa_sparse_backward(clattn_context *ctx, const clattn_sdpa_desc *desc, size_t top_k,
                                          cl_mem indices, const size_t *lengths, cl_mem q, cl_mem k, cl_mem v,
                                          cl_mem out, cl_mem lse, cl_mem dout, cl_mem dq, cl_mem dk, cl_mem dv,
                                          float *dsinks)
{
    static const char api[] = "clattn_sdpa_sparse_backward";
    sdpa_shape s;
    paged_shape unused;
    clattn_status st = check_context(ctx);
    if (st != CLATTN_SUCCESS ||
        (st = sparse_call_check(ctx, api, desc, top_k, indices, NULL, k, v, lengths, &s, &unused)) != CLATTN_SUCCESS)
        return st;
    const char *unsupported = sdpa_backward_not_yet(&s);
    if (unsupported)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "%s: %s", api, unsupported);
    if (reproducible_call(ctx, &s))
        return reproducible_refused(ctx, "top-k sparse attention's backward pass");
    if (s.q_len > UINT32_MAX)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "%s: %zu query rows; it takes up to 2^32 − 1", api, s.q_len);
    const backward_tensors t = {q, k, v, out, lse, dout, dq, dk, dv};
    const named_mem outputs[] = {{dq, "dq"}, {dk, "dk"}, {dv, "dv"}}, selection[] = {{indices, "indices"}};
    if ((st = backward_buffers_check(ctx, api, &s, &t, NULL)) != CLATTN_SUCCESS ||
        (st = check_no_overlap(ctx, api, outputs, 3, selection, 1)) != CLATTN_SUCCESS)
        return st;
    const sparse_backward_call call = {top_k, indices, lengths};
    return backward_in_floats(ctx, &s, sparse_pass, &call, &t, dsinks);
}
