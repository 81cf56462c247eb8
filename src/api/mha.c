/* clattn_mha: a layer's projections, SDPA over its heads read in place, and its output projection. */
#include "mha.h"

#include "call_options.h"
#include "context.h"
#include "dtype.h"
#include "error.h"
#include "launch.h"
#include "masks.h"
#include "projection.h"
#include "reproducible.h"
#include "scratch.h"
#include "sdpa.h"
#include "staged.h"
#include "versioned.h"

#include <string.h>

/* The first published layouts (0.2.0) end with `softcap` (then `reserved`, 0) and `b_o`. */
#define MHA_DESC_SIZE_0_2 (offsetof(clattn_mha_desc, softcap) + sizeof(float))
#define MHA_WEIGHTS_SIZE_0_2 (offsetof(clattn_mha_weights, b_o) + sizeof(cl_mem))
#define MHA_HOST_WEIGHTS_SIZE_0_2 (offsetof(clattn_mha_host_weights, b_o) + sizeof(const float *))

clattn_status mha_weights_read(clattn_context *ctx, const clattn_mha_weights *w, clattn_mha_weights *out)
{
    if (!w)
        return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "the weights struct is NULL");
    return versioned_copy(ctx, w, sizeof *out, sizeof *out, MHA_WEIGHTS_SIZE_0_2, "clattn_mha_weights", "CLATTN_MHA_WEIGHTS_INIT",
                          out);
}

clattn_status mha_host_weights_read(clattn_context *ctx, const clattn_mha_host_weights *w,
                                    clattn_mha_host_weights *out)
{
    if (!w)
        return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "the weights struct is NULL");
    return versioned_copy(ctx, w, sizeof *out, sizeof *out, MHA_HOST_WEIGHTS_SIZE_0_2, "clattn_mha_host_weights",
                          "CLATTN_MHA_HOST_WEIGHTS_INIT", out);
}

/* desc: already read by the struct_size rule. */
static clattn_status mha_shape_resolve(clattn_context *ctx, const clattn_mha_desc *desc, bool kv_given,
                                       bool out_proj, mha_shape *m)
{
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
    const struct { clattn_dtype type; const char *name; } types[] = {
        {desc->x_dtype, "x_dtype"}, {desc->weight_dtype, "weight_dtype"}, {desc->out_dtype, "out_dtype"}};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (!dtype_valid(types[i].type) || dtype_kv_only(types[i].type))
            return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "desc.%s = %d is not float32, float16 or bfloat16",
                             types[i].name, (int)types[i].type);
    if (desc->dtype_reserved != 0)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "desc.dtype_reserved is %u, not 0", desc->dtype_reserved);
    m->x_type = desc->x_dtype;
    m->w_type = desc->weight_dtype;
    m->out_type = desc->out_dtype;

    clattn_sdpa_desc sd = CLATTN_SDPA_DESC_INIT;
    call_options_mha_to_sdpa(&sd, desc); /* every option both carry (call_options.def), the shape too */
    sd.masks = NULL;                       /* (read by masks_resolve, in mha_check) */
    sd.kv_len = m->self_attention ? desc->q_len : desc->kv_len;
    /* Attention reads the projected Q, K, V as floats and writes the heads' concatenation: the result
     * itself (in out_dtype) without W_O, else a float temporary. */
    sd.out_dtype = out_proj ? CLATTN_FLOAT32 : desc->out_dtype;
    clattn_status st = sdpa_shape_resolve(ctx, &sd, &m->sdpa);
    if (st != CLATTN_SUCCESS)
        return st;
    const sdpa_shape *s = &m->sdpa;
    /* (They fit: q_elems and v_elems did.) */
    const size_t hk = s->heads * s->qk_dim, hv = s->heads * s->v_dim;
    m->kv_k_width = s->kv_heads * s->qk_dim;
    m->kv_v_width = s->kv_heads * s->v_dim;
    bool ok = size_product(&m->x_elems, 3, s->batch, s->q_len, m->model_dim) &&
              size_product(&m->kv_elems, 3, s->batch, s->kv_len, m->kv_dim) &&
              size_mul(m->model_dim, hk, &m->wq_elems) && size_mul(m->kv_dim, m->kv_k_width, &m->wk_elems) &&
              size_mul(m->kv_dim, m->kv_v_width, &m->wv_elems) && size_mul(hv, m->out_dim, &m->wo_elems) &&
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

clattn_status mha_check(clattn_context *ctx, const clattn_mha_desc *desc, bool kv_given, bool has_w_o, bool has_b_o,
                        bool mask_given, mha_shape *m)
{
    if (has_b_o && !has_w_o)
        return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "weights.b_o is given but weights.w_o is NULL");
    if (!desc)
        return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "the descriptor is NULL");
    clattn_mha_desc d;
    clattn_status st = versioned_copy(ctx, desc, sizeof d, sizeof d, MHA_DESC_SIZE_0_2, "clattn_mha_desc",
                                      "CLATTN_MHA_DESC_INIT", &d);
    if (st == CLATTN_SUCCESS)
        st = mha_shape_resolve(ctx, &d, kv_given, has_w_o, m);
    return st != CLATTN_SUCCESS ? st : masks_resolve(ctx, d.masks, mask_given, &m->sdpa);
}

clattn_status mha_run(clattn_context *ctx, const mha_shape *m, cl_mem x, cl_mem kv, const clattn_mha_weights *w,
                      cl_mem mask, cl_mem out, cl_mem attn_weights)
{
    const sdpa_shape *s = &m->sdpa;
    const size_t hk = s->heads * s->qk_dim, hv = s->heads * s->v_dim;
    /* All temporaries first, so that a failure leaves nothing enqueued. */
    cl_mem q_all, k_all, v_all, concat = out;
    clattn_status st;
    if ((st = scratch_get(ctx, SCRATCH_Q, s->q_elems * sizeof(float), &q_all)) != CLATTN_SUCCESS ||
        (st = scratch_get(ctx, SCRATCH_K, s->k_elems * sizeof(float), &k_all)) != CLATTN_SUCCESS ||
        (st = scratch_get(ctx, SCRATCH_V, s->v_elems * sizeof(float), &v_all)) != CLATTN_SUCCESS ||
        (m->has_out_proj &&
         (st = scratch_get(ctx, SCRATCH_CONCAT, s->out_elems * sizeof(float), &concat)) != CLATTN_SUCCESS) ||
        (st = projection_prepare(ctx)) != CLATTN_SUCCESS || (st = staged_prepare(ctx, s, NULL)) != CLATTN_SUCCESS)
        return st;

    cl_mem kv_in = kv ? kv : x;
    const size_t q_rows = s->batch * s->q_len, kv_rows = s->batch * s->kv_len;
    /* Q, K and V split into heads (B, H, L, D) by the GEMM itself where it can: attention then reads
     * each head's rows contiguously (2.3× faster for a BERT layer's attention on a CPU than rows a
     * row of heads apart, which the hardware prefetchers do not follow across pages). Otherwise the
     * heads are read in place from the (B, L, H·D) outputs. The output is written straight into the
     * (B, L, H·D) concatenation W_O reads. */
    const bool exact = reproducible_call(ctx, s); /* (clattn's GEMM in its exact build: cl/gemm.cl) */
    const gemm_types in_types = {m->x_type, m->w_type, CLATTN_FLOAT32, exact},
                     out_types = {CLATTN_FLOAT32, m->w_type, m->out_type, exact};
    const bool typed = m->x_type != CLATTN_FLOAT32 || m->w_type != CLATTN_FLOAT32 || m->out_type != CLATTN_FLOAT32;
    const bool split = projection_splits_heads(ctx) || typed || exact; /* (typed tensors run clattn's kernel) */
    const projection_heads q_heads = {s->q_len, s->qk_dim}, k_heads = {s->kv_len, s->qk_dim},
                           v_heads = {s->kv_len, s->v_dim};
    if ((st = projection_run(ctx, q_rows, m->model_dim, hk, x, w->w_q, w->b_q, q_all, split ? &q_heads : NULL,
                             &in_types)) != CLATTN_SUCCESS ||
        (st = projection_run(ctx, kv_rows, m->kv_dim, m->kv_k_width, kv_in, w->w_k, w->b_k, k_all,
                             split ? &k_heads : NULL, &in_types)) != CLATTN_SUCCESS ||
        (st = projection_run(ctx, kv_rows, m->kv_dim, m->kv_v_width, kv_in, w->w_v, w->b_v, v_all,
                             split ? &v_heads : NULL, &in_types)) != CLATTN_SUCCESS)
        return st;
    tensor_view (*layout)(cl_mem, size_t, size_t, size_t) = split ? view_bhld : view_blhd;
    st = sdpa_run(ctx, s, layout(q_all, s->heads, s->q_len, s->qk_dim), layout(k_all, s->kv_heads, s->kv_len, s->qk_dim),
                  layout(v_all, s->kv_heads, s->kv_len, s->v_dim), mask,
                  view_blhd(concat, s->heads, s->q_len, s->v_dim), attn_weights, NULL);
    if (st == CLATTN_SUCCESS && m->has_out_proj)
        st = projection_run(ctx, q_rows, hv, m->out_dim, concat, w->w_o, w->b_o, out, NULL, &out_types);
    return st;
}

clattn_status clattn_mha(clattn_context *ctx, const clattn_mha_desc *desc, cl_mem x, cl_mem kv,
                         const clattn_mha_weights *weights, cl_mem mask, cl_mem out, cl_mem attn_weights)
{
    clattn_mha_weights copy;
    const clattn_mha_weights *w = &copy;
    clattn_status st = check_context(ctx);
    if (st != CLATTN_SUCCESS || (st = mha_weights_read(ctx, weights, &copy)) != CLATTN_SUCCESS)
        return st;
    mha_shape m;
    if ((st = mha_check(ctx, desc, kv != NULL, w->w_o != NULL, w->b_o != NULL, mask != NULL, &m)) != CLATTN_SUCCESS)
        return st;
    const sdpa_shape *s = &m.sdpa;
    const size_t hk = s->heads * s->qk_dim;
    const clattn_dtype xt = m.x_type, wt = m.w_type;
    if ((st = check_tensor(ctx, x, m.x_elems, xt, "x")) != CLATTN_SUCCESS ||
        (kv && (st = check_tensor(ctx, kv, m.kv_elems, xt, "kv")) != CLATTN_SUCCESS) ||
        (st = check_tensor(ctx, w->w_q, m.wq_elems, wt, "w_q")) != CLATTN_SUCCESS ||
        (st = check_tensor(ctx, w->w_k, m.wk_elems, wt, "w_k")) != CLATTN_SUCCESS ||
        (st = check_tensor(ctx, w->w_v, m.wv_elems, wt, "w_v")) != CLATTN_SUCCESS ||
        (w->b_q && (st = check_tensor(ctx, w->b_q, hk, wt, "b_q")) != CLATTN_SUCCESS) ||
        (w->b_k && (st = check_tensor(ctx, w->b_k, m.kv_k_width, wt, "b_k")) != CLATTN_SUCCESS) ||
        (w->b_v && (st = check_tensor(ctx, w->b_v, m.kv_v_width, wt, "b_v")) != CLATTN_SUCCESS) ||
        (w->w_o && (st = check_tensor(ctx, w->w_o, m.wo_elems, wt, "w_o")) != CLATTN_SUCCESS) ||
        (w->b_o && (st = check_tensor(ctx, w->b_o, m.out_dim, wt, "b_o")) != CLATTN_SUCCESS) ||
        (mask && (st = check_buffer(ctx, mask, s->mask_elems, s->mask_elem_size, "mask")) != CLATTN_SUCCESS) ||
        (st = check_tensor(ctx, out, m.result_elems, m.out_type, "out")) != CLATTN_SUCCESS ||
        (attn_weights &&
         (st = check_buffer(ctx, attn_weights, s->weight_elems, sizeof(float), "attn_weights")) != CLATTN_SUCCESS) ||
        (st = sdpa_check_algorithm(ctx, s, attn_weights != NULL)) != CLATTN_SUCCESS)
        return st;
    return mha_run(ctx, &m, x, kv, w, mask, out, attn_weights);
}
