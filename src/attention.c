/* clattn_sdpa and clattn_mha: validate, then run the stages over batches and heads (in chunks when the
 * score matrix would not fit one allocation), and the host-memory variants around them. */
#include "internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The score matrix of all heads at once can be huge; when the caller does not keep the weights we
 * work through the (batch, head) pairs in chunks whose scores fit this budget. */
#define SCORE_SCRATCH_BUDGET ((size_t)256 << 20)

/* Failures of the fused kernel that the staged path can work around: it did not build, or the
 * device cannot run it. */
static bool fused_can_fall_back(clattn_status st)
{
    return st == CLATTN_ERROR_BUILD_FAILED || st == CLATTN_ERROR_UNSUPPORTED_DEVICE ||
           st == (clattn_status)CL_INVALID_WORK_GROUP_SIZE || st == (clattn_status)CL_OUT_OF_RESOURCES;
}

static clattn_status staged_run(clattn_context *ctx, const sdpa_shape *s, tensor_view q, tensor_view k,
                                tensor_view v, cl_mem mask, tensor_view out, cl_mem weights, cl_mem lse);

clattn_status check_algorithm(clattn_context *ctx, const sdpa_shape *s, bool weights_wanted)
{
    if (s->algorithm == CLATTN_ALGORITHM_FUSED && weights_wanted)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                         "CLATTN_ALGORITHM_FUSED never materialises the weights; ask for AUTO or STAGED to get them");
    if (s->algorithm == CLATTN_ALGORITHM_FUSED && (s->qk_dim > FUSED_MAX_HEAD || s->v_dim > FUSED_MAX_HEAD))
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "CLATTN_ALGORITHM_FUSED supports head sizes up to %d",
                         FUSED_MAX_HEAD);
    return CLATTN_SUCCESS;
}

clattn_status sdpa_run(clattn_context *ctx, const sdpa_shape *s, tensor_view q, tensor_view k, tensor_view v,
                       cl_mem mask, tensor_view out, cl_mem weights, cl_mem lse)
{
    const bool fused = s->algorithm == CLATTN_ALGORITHM_FUSED ||
                       (s->algorithm == CLATTN_ALGORITHM_AUTO && !weights && s->qk_dim <= FUSED_MAX_HEAD &&
                        s->v_dim <= FUSED_MAX_HEAD);
    if (fused) {
        clattn_status st = fused_run(ctx, s, q, k, v, mask, out, lse);
        if (st == CLATTN_SUCCESS || s->algorithm == CLATTN_ALGORITHM_FUSED || !fused_can_fall_back(st))
            return st;
        set_warning(ctx, "the fused kernel is not available on %s (%s: %.1500s); the staged path ran instead",
                    ctx->device_name, clattn_status_string(st), ctx->last_error);
        clear_error(ctx);
    }
    return staged_run(ctx, s, q, k, v, mask, out, weights, lse);
}

static clattn_status staged_run(clattn_context *ctx, const sdpa_shape *s, tensor_view q, tensor_view k,
                                tensor_view v, cl_mem mask, tensor_view out, cl_mem weights, cl_mem lse)
{
    const size_t bh_total = s->batch * s->heads;
    const size_t head_bytes = s->q_len * s->kv_len * sizeof(float);
    size_t chunk = bh_total;
    cl_mem scores = weights;
    clattn_status st = kernels_ensure(ctx);
    if (st != CLATTN_SUCCESS)
        return st;
    if (!scores) {
        size_t budget = SCORE_SCRATCH_BUDGET < ctx->max_alloc ? SCORE_SCRATCH_BUDGET : (size_t)ctx->max_alloc;
        if (head_bytes > ctx->max_alloc)
            return set_error(ctx, CLATTN_ERROR_EXCEEDS_DEVICE_LIMIT,
                             "the score matrix of one head (L=%zu x S=%zu) needs %zu bytes, more than the "
                             "device's maximum allocation of %llu bytes",
                             s->q_len, s->kv_len, head_bytes, (unsigned long long)ctx->max_alloc);
        chunk = budget / head_bytes;
        if (chunk == 0)
            chunk = 1;
        if (chunk > bh_total)
            chunk = bh_total;
        if ((st = scratch_get(ctx, SCRATCH_SCORES, chunk * head_bytes, &scores)) != CLATTN_SUCCESS)
            return st;
    }
    cl_mem key_lengths;
    if ((st = upload_key_lengths(ctx, s, &key_lengths)) != CLATTN_SUCCESS)
        return st;
    for (size_t begin = 0; begin < bh_total && st == CLATTN_SUCCESS; begin += chunk) {
        size_t count = bh_total - begin < chunk ? bh_total - begin : chunk;
        st = stage_score(ctx, s, q, k, key_lengths, mask, begin, count, scores);
        if (st == CLATTN_SUCCESS)
            st = stage_softmax(ctx, count * s->q_len, s->kv_len, scores, scores, lse, begin * s->q_len);
        if (st == CLATTN_SUCCESS)
            st = stage_weighted_sum(ctx, s, scores, v, out, begin, count);
    }
    return st;
}

clattn_status clattn_sdpa(clattn_context *ctx, const clattn_sdpa_desc *desc, cl_mem q, cl_mem k, cl_mem v,
                          cl_mem mask, cl_mem out, cl_mem weights, cl_mem lse)
{
    clattn_status st = check_context(ctx);
    sdpa_shape s;
    if (st != CLATTN_SUCCESS || (st = sdpa_shape_resolve(ctx, desc, &s)) != CLATTN_SUCCESS ||
        (st = check_masks(ctx, &s.masks, s.batch, s.kv_len, mask != NULL)) != CLATTN_SUCCESS ||
        (st = check_buffer(ctx, q, s.q_elems, sizeof(float), "q")) != CLATTN_SUCCESS ||
        (st = check_buffer(ctx, k, s.k_elems, sizeof(float), "k")) != CLATTN_SUCCESS ||
        (st = check_buffer(ctx, v, s.v_elems, sizeof(float), "v")) != CLATTN_SUCCESS ||
        (mask && (st = check_buffer(ctx, mask, s.mask_elems, sizeof(float), "mask")) != CLATTN_SUCCESS) ||
        (st = check_buffer(ctx, out, s.out_elems, sizeof(float), "out")) != CLATTN_SUCCESS ||
        (weights && (st = check_buffer(ctx, weights, s.weight_elems, sizeof(float), "weights")) != CLATTN_SUCCESS) ||
        (lse && (st = check_buffer(ctx, lse, s.lse_elems, sizeof(float), "lse")) != CLATTN_SUCCESS) ||
        (st = check_algorithm(ctx, &s, weights != NULL)) != CLATTN_SUCCESS)
        return st;
    return sdpa_run(ctx, &s, view_bhld(q, s.heads, s.q_len, s.qk_dim), view_bhld(k, s.heads, s.kv_len, s.qk_dim),
                    view_bhld(v, s.heads, s.kv_len, s.v_dim), mask, view_bhld(out, s.heads, s.q_len, s.v_dim),
                    weights, lse);
}

/* ---- host-memory variants ---- */

/* One tensor of a host call: copied in from `in` and/or read back into `out` (either may be NULL;
 * both NULL means the tensor is not part of this call). */
typedef struct host_tensor {
    const float *in;
    float *out;
    size_t elems;
    const char *name;
    cl_mem mem;
} host_tensor;

clattn_status buffer_from_host(clattn_context *ctx, const float *host, size_t elems, const char *name, cl_mem *out)
{
    cl_mem_flags flags = CL_MEM_READ_WRITE | (host ? CL_MEM_COPY_HOST_PTR : 0);
    cl_int err = INJECT_FAULT(CL_MEM_OBJECT_ALLOCATION_FAILURE);
    *out = err == CL_SUCCESS ? clCreateBuffer(ctx->context, flags, elems * sizeof(float), (void *)host, &err) : NULL;
    if (err != CL_SUCCESS) {
        *out = NULL;
        return set_error(ctx, (clattn_status)err, "clCreateBuffer(%s, %zu bytes) failed: %s", name,
                         elems * sizeof(float), clattn_status_string((clattn_status)err));
    }
    return CLATTN_SUCCESS;
}

clattn_status buffer_to_host(clattn_context *ctx, cl_mem buf, float *host, size_t elems, const char *name)
{
    cl_int err = INJECT_FAULT(CL_OUT_OF_RESOURCES);
    if (err == CL_SUCCESS)
        err = clEnqueueReadBuffer(ctx->queue, buf, CL_TRUE, 0, elems * sizeof(float), host, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return set_error(ctx, (clattn_status)err, "reading %s back failed: %s", name,
                         clattn_status_string((clattn_status)err));
    return CLATTN_SUCCESS;
}

/* Before anything is allocated: every tensor must fit one device allocation, and all of them together
 * the device's memory (a request that cannot fit fails here, not half-way through). */
static clattn_status host_tensors_check(clattn_context *ctx, const host_tensor *t, size_t n)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (!t[i].in && !t[i].out)
            continue;
        clattn_status st = check_alloc(ctx, t[i].elems, t[i].name);
        if (st != CLATTN_SUCCESS)
            return st;
        const size_t bytes = t[i].elems * sizeof(float); /* check_alloc proved this fits */
        total = total > SIZE_MAX - bytes ? SIZE_MAX : total + bytes;
    }
    if (total > ctx->caps.global_mem)
        return set_error(ctx, CLATTN_ERROR_EXCEEDS_DEVICE_LIMIT,
                         "the call's tensors need %zu bytes of device memory together, more than the device's %llu",
                         total, (unsigned long long)ctx->caps.global_mem);
    return CLATTN_SUCCESS;
}

static clattn_status host_tensors_create(clattn_context *ctx, host_tensor *t, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!t[i].in && !t[i].out)
            continue;
        clattn_status st = buffer_from_host(ctx, t[i].in, t[i].elems, t[i].name, &t[i].mem);
        if (st != CLATTN_SUCCESS)
            return st;
    }
    return CLATTN_SUCCESS;
}

/* Wait for the work, then copy the outputs back so that a call that fails writes none of the caller's
 * arrays: every output but the largest is read into a host temporary first; the largest is read
 * straight into place last, and only when it arrived are the others copied over. (Staging just the
 * smaller outputs keeps the extra host memory small when the weights are wanted.) */
static clattn_status host_tensors_finish(clattn_context *ctx, host_tensor *t, size_t n, clattn_status st)
{
    if (st == CLATTN_SUCCESS) {
        cl_int err = clFinish(ctx->queue);
        if (err != CL_SUCCESS)
            st = cl_error(ctx, err, "clFinish");
    }
    size_t largest = n;
    for (size_t i = 0; i < n; i++)
        if (t[i].out && (largest == n || t[i].elems > t[largest].elems))
            largest = i;
    float *staged[16] = {0};
    if (n > sizeof staged / sizeof staged[0])
        st = set_error(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "internal: too many host tensors");
    for (size_t i = 0; i < n && st == CLATTN_SUCCESS; i++) {
        if (!t[i].out || i == largest)
            continue;
        staged[i] = malloc(t[i].elems * sizeof(float));
        if (!staged[i])
            st = set_error(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "staging %s (%zu floats)", t[i].name, t[i].elems);
        else
            st = buffer_to_host(ctx, t[i].mem, staged[i], t[i].elems, t[i].name);
    }
    if (st == CLATTN_SUCCESS && largest < n)
        st = buffer_to_host(ctx, t[largest].mem, t[largest].out, t[largest].elems, t[largest].name);
    for (size_t i = 0; i < n; i++) {
        if (staged[i] && st == CLATTN_SUCCESS)
            memcpy(t[i].out, staged[i], t[i].elems * sizeof(float));
        free(staged[i]);
    }
    if (st != CLATTN_SUCCESS)
        clFinish(ctx->queue); /* nothing may still use the buffers we are about to release */
    for (size_t i = 0; i < n; i++)
        release_mems(&t[i].mem, 1);
    return st;
}

clattn_status clattn_sdpa_host(clattn_context *ctx, const clattn_sdpa_desc *desc, const float *q, const float *k,
                               const float *v, const float *mask, float *out, float *weights, float *lse)
{
    clattn_status st = check_context(ctx);
    sdpa_shape s;
    if (st != CLATTN_SUCCESS || (st = sdpa_shape_resolve(ctx, desc, &s)) != CLATTN_SUCCESS ||
        (st = check_masks(ctx, &s.masks, s.batch, s.kv_len, mask != NULL)) != CLATTN_SUCCESS)
        return st;
    if (!q || !k || !v || !out)
        return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "host array %s is NULL",
                         !q ? "q" : !k ? "k" : !v ? "v" : "out");
    host_tensor t[] = {
        {q, NULL, s.q_elems, "q", NULL},         {k, NULL, s.k_elems, "k", NULL},
        {v, NULL, s.v_elems, "v", NULL},         {mask, NULL, s.mask_elems, "mask", NULL},
        {NULL, out, s.out_elems, "out", NULL},   {NULL, weights, s.weight_elems, "weights", NULL},
        {NULL, lse, s.lse_elems, "lse", NULL},
    };
    const size_t n = sizeof t / sizeof t[0];
    if ((st = host_tensors_check(ctx, t, n)) != CLATTN_SUCCESS)
        return st;
    if ((st = host_tensors_create(ctx, t, n)) == CLATTN_SUCCESS)
        st = clattn_sdpa(ctx, desc, t[0].mem, t[1].mem, t[2].mem, t[3].mem, t[4].mem,
                         t[5].mem, t[6].mem);
    return host_tensors_finish(ctx, t, n, st);
}

/* ---- multi-head attention layer ---- */

/* A validated layer shape: the per-head SDPA shape plus the layer's own widths and element counts. */
typedef struct mha_shape {
    sdpa_shape sdpa;
    size_t model_dim, kv_dim, out_dim;
    bool self_attention, has_out_proj;
    size_t x_elems, kv_elems, wq_elems, wk_elems, wv_elems, wo_elems, result_elems;
} mha_shape;

static clattn_status mha_shape_resolve(clattn_context *ctx, const clattn_mha_desc *desc, bool kv_given,
                                       bool out_proj, mha_shape *m)
{
    if (!desc)
        return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "the descriptor is NULL");
    if (desc->model_dim == 0)
        return set_error(ctx, CLATTN_ERROR_ZERO_SIZE, "desc.model_dim is 0");
    memset(m, 0, sizeof *m);
    m->self_attention = !kv_given;
    m->has_out_proj = out_proj;
    m->model_dim = desc->model_dim;
    if (m->self_attention) {
        if (desc->kv_len != 0 && desc->kv_len != desc->q_len)
            return set_error(ctx, CLATTN_ERROR_SHAPE_MISMATCH,
                             "self-attention (kv is NULL) needs kv_len 0 or q_len=%zu, got %zu", desc->q_len,
                             desc->kv_len);
        if (desc->kv_dim != 0 && desc->kv_dim != desc->model_dim)
            return set_error(ctx, CLATTN_ERROR_SHAPE_MISMATCH,
                             "self-attention (kv is NULL) needs kv_dim 0 or model_dim=%zu, got %zu",
                             desc->model_dim, desc->kv_dim);
    } else if (desc->kv_len == 0) {
        return set_error(ctx, CLATTN_ERROR_ZERO_SIZE, "desc.kv_len is 0 but a kv input was given");
    }
    m->kv_dim = desc->kv_dim ? desc->kv_dim : desc->model_dim;
    m->out_dim = desc->out_dim ? desc->out_dim : desc->model_dim;

    clattn_sdpa_desc sd = {desc->batch, desc->heads, desc->q_len, m->self_attention ? desc->q_len : desc->kv_len,
                           desc->qk_dim, desc->v_dim, desc->scale, desc->masks, desc->algorithm};
    clattn_status st = sdpa_shape_resolve(ctx, &sd, &m->sdpa);
    if (st != CLATTN_SUCCESS)
        return st;
    const sdpa_shape *s = &m->sdpa;
    size_t hk = s->heads * s->qk_dim, hv = s->heads * s->v_dim; /* fit: q_elems and v_elems did */
    bool ok = size_product(&m->x_elems, 3, s->batch, s->q_len, m->model_dim) &&
              size_product(&m->kv_elems, 3, s->batch, s->kv_len, m->kv_dim) &&
              size_mul(m->model_dim, hk, &m->wq_elems) && size_mul(m->kv_dim, hk, &m->wk_elems) &&
              size_mul(m->kv_dim, hv, &m->wv_elems) && size_mul(hv, m->out_dim, &m->wo_elems) &&
              size_product(&m->result_elems, 3, s->batch, s->q_len, out_proj ? m->out_dim : hv);
    size_t bytes;
    ok = ok && size_mul(m->x_elems, sizeof(float), &bytes) && size_mul(m->kv_elems, sizeof(float), &bytes) &&
         size_mul(m->wq_elems, sizeof(float), &bytes) && size_mul(m->wk_elems, sizeof(float), &bytes) &&
         size_mul(m->wv_elems, sizeof(float), &bytes) && size_mul(m->wo_elems, sizeof(float), &bytes) &&
         size_mul(m->result_elems, sizeof(float), &bytes);
    if (!ok)
        return set_error(ctx, CLATTN_ERROR_SIZE_OVERFLOW, "layer shape: a tensor size overflows size_t");
    return CLATTN_SUCCESS;
}

clattn_status clattn_mha(clattn_context *ctx, const clattn_mha_desc *desc, cl_mem x, cl_mem kv,
                         const clattn_mha_weights *w, cl_mem mask, cl_mem out, cl_mem attn_weights)
{
    clattn_status st = check_context(ctx);
    if (st != CLATTN_SUCCESS)
        return st;
    if (!w)
        return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "the weights struct is NULL");
    if (w->b_o && !w->w_o)
        return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "weights.b_o is given but weights.w_o is NULL");
    mha_shape m;
    if ((st = mha_shape_resolve(ctx, desc, kv != NULL, w->w_o != NULL, &m)) != CLATTN_SUCCESS)
        return st;
    const sdpa_shape *s = &m.sdpa;
    const size_t hk = s->heads * s->qk_dim, hv = s->heads * s->v_dim;
    if ((st = check_masks(ctx, &s->masks, s->batch, s->kv_len, mask != NULL)) != CLATTN_SUCCESS ||
        (st = check_buffer(ctx, x, m.x_elems, sizeof(float), "x")) != CLATTN_SUCCESS ||
        (kv && (st = check_buffer(ctx, kv, m.kv_elems, sizeof(float), "kv")) != CLATTN_SUCCESS) ||
        (st = check_buffer(ctx, w->w_q, m.wq_elems, sizeof(float), "w_q")) != CLATTN_SUCCESS ||
        (st = check_buffer(ctx, w->w_k, m.wk_elems, sizeof(float), "w_k")) != CLATTN_SUCCESS ||
        (st = check_buffer(ctx, w->w_v, m.wv_elems, sizeof(float), "w_v")) != CLATTN_SUCCESS ||
        (w->b_q && (st = check_buffer(ctx, w->b_q, hk, sizeof(float), "b_q")) != CLATTN_SUCCESS) ||
        (w->b_k && (st = check_buffer(ctx, w->b_k, hk, sizeof(float), "b_k")) != CLATTN_SUCCESS) ||
        (w->b_v && (st = check_buffer(ctx, w->b_v, hv, sizeof(float), "b_v")) != CLATTN_SUCCESS) ||
        (w->w_o && (st = check_buffer(ctx, w->w_o, m.wo_elems, sizeof(float), "w_o")) != CLATTN_SUCCESS) ||
        (w->b_o && (st = check_buffer(ctx, w->b_o, m.out_dim, sizeof(float), "b_o")) != CLATTN_SUCCESS) ||
        (mask && (st = check_buffer(ctx, mask, s->mask_elems, sizeof(float), "mask")) != CLATTN_SUCCESS) ||
        (st = check_buffer(ctx, out, m.result_elems, sizeof(float), "out")) != CLATTN_SUCCESS ||
        (attn_weights &&
         (st = check_buffer(ctx, attn_weights, s->weight_elems, sizeof(float), "attn_weights")) != CLATTN_SUCCESS) ||
        (st = check_algorithm(ctx, s, attn_weights != NULL)) != CLATTN_SUCCESS)
        return st;

    /* All temporaries first, so that a failure leaves nothing enqueued. */
    cl_mem q_all, k_all, v_all, concat = out;
    if ((st = scratch_get(ctx, SCRATCH_Q, s->q_elems * sizeof(float), &q_all)) != CLATTN_SUCCESS ||
        (st = scratch_get(ctx, SCRATCH_K, s->k_elems * sizeof(float), &k_all)) != CLATTN_SUCCESS ||
        (st = scratch_get(ctx, SCRATCH_V, s->v_elems * sizeof(float), &v_all)) != CLATTN_SUCCESS ||
        (m.has_out_proj &&
         (st = scratch_get(ctx, SCRATCH_CONCAT, s->out_elems * sizeof(float), &concat)) != CLATTN_SUCCESS) ||
        (st = kernels_ensure(ctx)) != CLATTN_SUCCESS)
        return st;

    cl_mem kv_in = kv ? kv : x;
    const size_t q_rows = s->batch * s->q_len, kv_rows = s->batch * s->kv_len;
    if ((st = stage_projection(ctx, q_rows, m.model_dim, hk, x, w->w_q, w->b_q, q_all)) != CLATTN_SUCCESS ||
        (st = stage_projection(ctx, kv_rows, m.kv_dim, hk, kv_in, w->w_k, w->b_k, k_all)) != CLATTN_SUCCESS ||
        (st = stage_projection(ctx, kv_rows, m.kv_dim, hv, kv_in, w->w_v, w->b_v, v_all)) != CLATTN_SUCCESS)
        return st;
    /* Heads are read from and written to the (B, L, H·D) layouts in place: no transposes. */
    st = sdpa_run(ctx, s, view_blhd(q_all, s->heads, s->q_len, s->qk_dim),
                  view_blhd(k_all, s->heads, s->kv_len, s->qk_dim), view_blhd(v_all, s->heads, s->kv_len, s->v_dim),
                  mask, view_blhd(concat, s->heads, s->q_len, s->v_dim), attn_weights, NULL);
    if (st == CLATTN_SUCCESS && m.has_out_proj)
        st = stage_projection(ctx, q_rows, hv, m.out_dim, concat, w->w_o, w->b_o, out);
    return st;
}

clattn_status clattn_mha_host(clattn_context *ctx, const clattn_mha_desc *desc, const float *x, const float *kv,
                              const clattn_mha_host_weights *w, const float *mask, float *out, float *attn_weights)
{
    clattn_status st = check_context(ctx);
    if (st != CLATTN_SUCCESS)
        return st;
    if (!w)
        return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "the weights struct is NULL");
    if (w->b_o && !w->w_o)
        return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "weights.b_o is given but weights.w_o is NULL");
    mha_shape m;
    if ((st = mha_shape_resolve(ctx, desc, kv != NULL, w->w_o != NULL, &m)) != CLATTN_SUCCESS ||
        (st = check_masks(ctx, &m.sdpa.masks, m.sdpa.batch, m.sdpa.kv_len, mask != NULL)) != CLATTN_SUCCESS)
        return st;
    if (!x || !w->w_q || !w->w_k || !w->w_v || !out)
        return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "host array %s is NULL",
                         !x ? "x" : !w->w_q ? "w_q" : !w->w_k ? "w_k" : !w->w_v ? "w_v" : "out");
    const sdpa_shape *s = &m.sdpa;
    const size_t hk = s->heads * s->qk_dim, hv = s->heads * s->v_dim;
    host_tensor t[] = {
        {x, NULL, m.x_elems, "x", NULL},          {kv, NULL, m.kv_elems, "kv", NULL},
        {w->w_q, NULL, m.wq_elems, "w_q", NULL},  {w->b_q, NULL, hk, "b_q", NULL},
        {w->w_k, NULL, m.wk_elems, "w_k", NULL},  {w->b_k, NULL, hk, "b_k", NULL},
        {w->w_v, NULL, m.wv_elems, "w_v", NULL},  {w->b_v, NULL, hv, "b_v", NULL},
        {w->w_o, NULL, m.wo_elems, "w_o", NULL},  {w->b_o, NULL, m.out_dim, "b_o", NULL},
        {mask, NULL, s->mask_elems, "mask", NULL}, {NULL, out, m.result_elems, "out", NULL},
        {NULL, attn_weights, s->weight_elems, "attn_weights", NULL},
    };
    const size_t n = sizeof t / sizeof t[0];
    if ((st = host_tensors_check(ctx, t, n)) != CLATTN_SUCCESS)
        return st;
    if ((st = host_tensors_create(ctx, t, n)) == CLATTN_SUCCESS) {
        clattn_mha_weights dw = {t[2].mem, t[3].mem, t[4].mem, t[5].mem, t[6].mem, t[7].mem, t[8].mem, t[9].mem};
        st = clattn_mha(ctx, desc, t[0].mem, t[1].mem, &dw, t[10].mem, t[11].mem, t[12].mem);
    }
    return host_tensors_finish(ctx, t, n, st);
}
