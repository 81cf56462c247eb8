/* The host-memory variants: validate everything (without re-entering the public calls), copy the
 * inputs in, run, and copy the outputs out, all or nothing. */
#include "context.h"
#include "dtype.h"
#include "error.h"
#include "fault.h"
#include "kvcache.h"
#include "mha.h"
#include "ragged.h"
#include "scratch.h"
#include "sdpa.h"
#include "validate.h"
#include "versioned.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* One tensor of a host call: copied in from `in` and/or read back into `out` (either may be NULL;
 * both NULL means the tensor is not part of this call). Its entries are elem_size bytes (0 means a
 * float; a bool mask's are bytes, a half tensor's 2). */
typedef struct host_tensor {
    const void *in;
    void *out;
    size_t elems;
    const char *name;
    cl_mem mem;
    size_t elem_size;
} host_tensor;

static size_t tensor_bytes(const host_tensor *t) { return t->elems * (t->elem_size ? t->elem_size : sizeof(float)); }

/* A tensor's buffer, filled from `host` (NULL: not filled). An input (never written by the call) of a
 * device that works in the host's memory, its entries aligned, is wrapped instead of copied
 * (CL_MEM_USE_HOST_PTR: the kernels read the caller's array in place — a blocking host call neither writes
 * it nor outlives it; the kernels read tensors with vloadN, which needs only the entries' alignment);
 * outputs stay buffers of their own, read back only when the call succeeded (all or nothing). Measured on
 * PoCL's CPU device (docs/python.md, "No copy in"): K and V of 64 MiB each, copied 85 ms, wrapped 7 ms. */
static clattn_status buffer_from_host(clattn_context *ctx, const void *host, bool input_only, size_t elem_size,
                                      size_t bytes, const char *name, cl_mem *out)
{
    const bool wrap = host && input_only && ctx->caps.host_unified && (uintptr_t)host % elem_size == 0;
    cl_mem_flags flags = wrap ? CL_MEM_READ_ONLY | CL_MEM_USE_HOST_PTR
                              : CL_MEM_READ_WRITE | (host ? CL_MEM_COPY_HOST_PTR : 0);
    cl_int err = INJECT_FAULT(CL_MEM_OBJECT_ALLOCATION_FAILURE);
    *out = err == CL_SUCCESS ? clCreateBuffer(ctx->context, flags, bytes, (void *)host, &err) : NULL;
    if (err != CL_SUCCESS) {
        *out = NULL;
        return set_error(ctx, (clattn_status)err, "clCreateBuffer(%s, %zu bytes) failed: %s", name, bytes,
                         clattn_status_string((clattn_status)err));
    }
    return CLATTN_SUCCESS;
}

static clattn_status buffer_to_host(clattn_context *ctx, cl_mem buf, void *host, size_t bytes, const char *name)
{
    cl_int err = INJECT_FAULT(CL_OUT_OF_RESOURCES);
    if (err == CL_SUCCESS)
        err = clEnqueueReadBuffer(ctx->queue, buf, CL_TRUE, 0, bytes, host, 0, NULL, NULL);
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
        const size_t bytes = tensor_bytes(&t[i]); /* no larger than the floats sdpa_shape_resolve checked */
        clattn_status st = check_alloc(ctx, (bytes + sizeof(float) - 1) / sizeof(float), t[i].name);
        if (st != CLATTN_SUCCESS)
            return st;
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
        clattn_status st = buffer_from_host(ctx, t[i].in, !t[i].out, t[i].elem_size ? t[i].elem_size : sizeof(float),
                                            tensor_bytes(&t[i]), t[i].name, &t[i].mem);
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
        if (t[i].out && (largest == n || tensor_bytes(&t[i]) > tensor_bytes(&t[largest])))
            largest = i;
    void *staged[24] = {0}; /* (the most a call has: the layer's backward, 22) */
    if (n > sizeof staged / sizeof staged[0]) {
        st = set_error(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "internal: too many host tensors");
        n = sizeof staged / sizeof staged[0]; /* (only to release what there is: nothing is staged) */
    }
    for (size_t i = 0; i < n && st == CLATTN_SUCCESS; i++) {
        if (!t[i].out || i == largest)
            continue;
        staged[i] = malloc(tensor_bytes(&t[i]));
        if (!staged[i])
            st = set_error(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "staging %s (%zu bytes)", t[i].name,
                           tensor_bytes(&t[i]));
        else
            st = buffer_to_host(ctx, t[i].mem, staged[i], tensor_bytes(&t[i]), t[i].name);
    }
    if (st == CLATTN_SUCCESS && largest < n)
        st = buffer_to_host(ctx, t[largest].mem, t[largest].out, tensor_bytes(&t[largest]), t[largest].name);
    for (size_t i = 0; i < n; i++) {
        if (staged[i] && st == CLATTN_SUCCESS)
            memcpy(t[i].out, staged[i], tensor_bytes(&t[i]));
        free(staged[i]);
    }
    if (st != CLATTN_SUCCESS)
        clFinish(ctx->queue); /* nothing may still use the buffers we are about to release */
    for (size_t i = 0; i < n; i++)
        mems_release(&t[i].mem, 1);
    return st;
}

/* The host variants' K/V types, checked before the descriptor's other checks (see row_scaled_kv_field):
 * clattn_sdpa_host takes K and V in any format whose bytes say all (blocks carry their own scales; int8's
 * row scales, and FP8's when given, are device buffers); the backward and ragged host calls take no
 * quantised K/V at all. */
static clattn_status no_device_only_kv(clattn_context *ctx, const clattn_sdpa_desc *desc, bool no_quantised,
                                       const char *call)
{
    clattn_sdpa_desc d;
    clattn_status st = sdpa_desc_read(ctx, desc, &d);
    return st != CLATTN_SUCCESS ? st : check_host_kv_types(ctx, &d, no_quantised, call);
}

/* A K or V host tensor's element count and size for host_tensor: a block format's bytes as 16-bit units
 * (every block holds an even number of bytes, and its fp16 scale is read where 2-byte alignment holds), a
 * token format's chunks (batch · kv_heads of kv_len rows of dim) as 32-bit ones (their uint32 counts). */
static void kv_host_size(const sdpa_shape *s, clattn_dtype dtype, size_t values, size_t dim, size_t *elems,
                         size_t *elem_size)
{
    size_t bytes = 0;
    if (dtype_is_token(dtype) && dtype_tensor_bytes(dtype, s->batch * s->kv_heads, s->kv_len, dim, &bytes)) {
        *elems = bytes / 4;
        *elem_size = 4;
    } else if (dtype_block(dtype) > 1 && dtype_span_bytes(dtype, values, &bytes)) {
        *elems = bytes / 2;
        *elem_size = 2;
    } else {
        *elems = values;
        *elem_size = dtype_bytes(dtype);
    }
}

clattn_status clattn_sdpa_host(clattn_context *ctx, const clattn_sdpa_desc *desc, const void *q, const void *k,
                               const void *v, const void *mask, void *out, float *weights, float *lse)
{
    clattn_status st = check_context(ctx);
    sdpa_shape s;
    if (st != CLATTN_SUCCESS || (st = no_device_only_kv(ctx, desc, false, "clattn_sdpa_host")) != CLATTN_SUCCESS ||
        (st = sdpa_check(ctx, desc, mask != NULL, &s)) != CLATTN_SUCCESS)
        return st;
    const size_t qb = dtype_bytes(s.types.q), ob = dtype_bytes(s.types.o);
    size_t kn, kb, vn, vb;
    kv_host_size(&s, s.types.k, s.k_elems, s.qk_dim, &kn, &kb);
    kv_host_size(&s, s.types.v, s.v_elems, s.v_dim, &vn, &vb);
    if (!q || !k || !v || !out)
        return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "host array %s is NULL",
                         !q ? "q" : !k ? "k" : !v ? "v" : "out");
    if ((st = sdpa_check_algorithm(ctx, &s, weights != NULL)) != CLATTN_SUCCESS)
        return st;
    host_tensor t[] = {
        {q, NULL, s.q_elems, "q", NULL, qb},        {k, NULL, kn, "k", NULL, kb},
        {v, NULL, vn, "v", NULL, vb},               {mask, NULL, s.mask_elems, "mask", NULL, s.mask_elem_size},
        {NULL, out, s.out_elems, "out", NULL, ob},  {NULL, weights, s.weight_elems, "weights", NULL, 0},
        {NULL, lse, s.lse_elems, "lse", NULL, 0},
    };
    const size_t n = sizeof t / sizeof t[0];
    if ((st = host_tensors_check(ctx, t, n)) != CLATTN_SUCCESS)
        return st;
    if ((st = host_tensors_create(ctx, t, n)) == CLATTN_SUCCESS)
        st = sdpa_run_dense(ctx, &s, t[0].mem, t[1].mem, t[2].mem, t[3].mem, t[4].mem, t[5].mem, t[6].mem);
    return host_tensors_finish(ctx, t, n, st);
}

clattn_status clattn_sdpa_backward_host(clattn_context *ctx, const clattn_sdpa_desc *desc, const void *q, const void *k,
                                        const void *v, const void *mask, const void *out, const float *lse,
                                        const void *dout, void *dq, void *dk, void *dv, float *dsinks)
{
    clattn_status st = check_context(ctx);
    sdpa_shape s;
    if (st != CLATTN_SUCCESS || (st = no_device_only_kv(ctx, desc, true, "clattn_sdpa_backward_host")) != CLATTN_SUCCESS ||
        (st = sdpa_check(ctx, desc, mask != NULL, &s)) != CLATTN_SUCCESS)
        return st;
    const char *missing = !q ? "q" : !k ? "k" : !v ? "v" : !out ? "out" : !lse ? "lse (the forward's log-sum-exps)"
                        : !dout ? "dout" : !dq ? "dq" : !dk ? "dk" : !dv ? "dv" : NULL;
    if (missing)
        return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "host array %s is NULL", missing);
    const size_t qb = dtype_bytes(s.types.q), kb = dtype_bytes(s.types.k), vb = dtype_bytes(s.types.v),
                 ob = dtype_bytes(s.types.o);
    host_tensor t[] = {
        {q, NULL, s.q_elems, "q", NULL, qb},         {k, NULL, s.k_elems, "k", NULL, kb},
        {v, NULL, s.v_elems, "v", NULL, vb},         {mask, NULL, s.mask_elems, "mask", NULL, s.mask_elem_size},
        {out, NULL, s.out_elems, "out", NULL, ob},   {lse, NULL, s.lse_elems, "lse", NULL, 0},
        {dout, NULL, s.out_elems, "dout", NULL, ob}, {NULL, dq, s.q_elems, "dq", NULL, qb},
        {NULL, dk, s.k_elems, "dk", NULL, kb},       {NULL, dv, s.v_elems, "dv", NULL, vb},
    };
    const size_t n = sizeof t / sizeof t[0];
    float *sinks = dsinks && s.desc.sinks ? malloc(s.heads * sizeof *sinks) : NULL; /* (written only on success) */
    if (dsinks && s.desc.sinks && !sinks)
        return set_error(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "the sinks' gradients");
    if ((st = host_tensors_check(ctx, t, n)) == CLATTN_SUCCESS &&
        (st = host_tensors_create(ctx, t, n)) == CLATTN_SUCCESS)
        st = clattn_sdpa_backward(ctx, desc, t[0].mem, t[1].mem, t[2].mem, t[3].mem, t[4].mem, t[5].mem, t[6].mem,
                                  t[7].mem, t[8].mem, t[9].mem, sinks);
    st = host_tensors_finish(ctx, t, n, st);
    if (st == CLATTN_SUCCESS && sinks)
        memcpy(dsinks, sinks, s.heads * sizeof *sinks);
    free(sinks);
    return st;
}

clattn_status clattn_mha_backward_host(clattn_context *ctx, const clattn_mha_desc *desc, const void *x,
                                       const void *kv, const clattn_mha_host_weights *weights, const void *mask,
                                       const void *d_out, const clattn_mha_host_grads *grads)
{
    clattn_mha_host_weights w;
    clattn_mha_host_grads g;
    clattn_status st = check_context(ctx);
    if (st != CLATTN_SUCCESS || (st = mha_host_weights_read(ctx, weights, &w)) != CLATTN_SUCCESS)
        return st;
    if (!grads)
        return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "clattn_mha_backward_host: grads is NULL");
    if ((st = versioned_copy(ctx, grads, sizeof g, sizeof g, sizeof g, "clattn_mha_host_grads",
                             "CLATTN_MHA_HOST_GRADS_INIT", &g)) != CLATTN_SUCCESS)
        return st;
    mha_shape m;
    if ((st = mha_check(ctx, desc, kv != NULL, w.w_o != NULL, w.b_o != NULL, mask != NULL, &m)) != CLATTN_SUCCESS)
        return st;
    if (!x || !w.w_q || !w.w_k || !w.w_v || !d_out)
        return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "host array %s is NULL",
                         !x ? "x" : !w.w_q ? "w_q" : !w.w_k ? "w_k" : !w.w_v ? "w_v" : "d_out");
    const sdpa_shape *s = &m.sdpa;
    const size_t hk = s->heads * s->qk_dim;
    const size_t xb = dtype_bytes(m.x_type), wb = dtype_bytes(m.w_type), ob = dtype_bytes(m.out_type);
    host_tensor t[] = {
        {x, NULL, m.x_elems, "x", NULL, xb},            {kv, NULL, m.kv_elems, "kv", NULL, xb},
        {w.w_q, NULL, m.wq_elems, "w_q", NULL, wb},     {w.b_q, NULL, hk, "b_q", NULL, wb},
        {w.w_k, NULL, m.wk_elems, "w_k", NULL, wb},     {w.b_k, NULL, m.kv_k_width, "b_k", NULL, wb},
        {w.w_v, NULL, m.wv_elems, "w_v", NULL, wb},     {w.b_v, NULL, m.kv_v_width, "b_v", NULL, wb},
        {w.w_o, NULL, m.wo_elems, "w_o", NULL, wb},     {w.b_o, NULL, m.out_dim, "b_o", NULL, wb},
        {mask, NULL, s->mask_elems, "mask", NULL, s->mask_elem_size}, {d_out, NULL, m.result_elems, "d_out", NULL, ob},
        {NULL, g.d_x, m.x_elems, "d_x", NULL, xb},      {NULL, g.d_kv, m.kv_elems, "d_kv", NULL, xb},
        {NULL, g.d_w_q, m.wq_elems, "d_w_q", NULL, wb}, {NULL, g.d_b_q, hk, "d_b_q", NULL, wb},
        {NULL, g.d_w_k, m.wk_elems, "d_w_k", NULL, wb}, {NULL, g.d_b_k, m.kv_k_width, "d_b_k", NULL, wb},
        {NULL, g.d_w_v, m.wv_elems, "d_w_v", NULL, wb}, {NULL, g.d_b_v, m.kv_v_width, "d_b_v", NULL, wb},
        {NULL, g.d_w_o, m.wo_elems, "d_w_o", NULL, wb}, {NULL, g.d_b_o, m.out_dim, "d_b_o", NULL, wb},
    };
    const size_t n = sizeof t / sizeof t[0];
    if ((st = host_tensors_check(ctx, t, n)) != CLATTN_SUCCESS)
        return st;
    if ((st = host_tensors_create(ctx, t, n)) == CLATTN_SUCCESS) {
        const clattn_mha_weights dw = {sizeof dw, t[2].mem, t[3].mem, t[4].mem, t[5].mem, t[6].mem, t[7].mem, t[8].mem,
                                       t[9].mem};
        const clattn_mha_grads dg = {sizeof dg, t[12].mem, t[13].mem, t[14].mem, t[15].mem, t[16].mem, t[17].mem,
                                     t[18].mem, t[19].mem, t[20].mem, t[21].mem};
        st = clattn_mha_backward(ctx, desc, t[0].mem, t[1].mem, &dw, t[10].mem, t[11].mem, &dg);
    }
    return host_tensors_finish(ctx, t, n, st);
}

clattn_status clattn_sdpa_ragged_host(clattn_context *ctx, const clattn_sdpa_desc *desc, const clattn_ragged *ragged,
                                      const void *q, const void *k, const void *v, const void *mask, void *out,
                                      float *lse)
{
    clattn_status st = check_context(ctx);
    ragged_call c;
    if (st != CLATTN_SUCCESS || (st = no_device_only_kv(ctx, desc, true, "clattn_sdpa_ragged_host")) != CLATTN_SUCCESS ||
        (st = ragged_check(ctx, desc, ragged, mask != NULL, &c)) != CLATTN_SUCCESS)
        return st;
    const sdpa_shape *s = &c.s;
    if (!q || !k || !v || !out)
        return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "host array %s is NULL",
                         !q ? "q" : !k ? "k" : !v ? "v" : "out");
    /* A batch whose sequences hold no rows at all has nothing to copy: an empty array is no buffer. */
    host_tensor t[] = {
        {c.q_elems ? q : NULL, NULL, c.q_elems, "q", NULL, dtype_bytes(s->types.q)},
        {c.k_elems ? k : NULL, NULL, c.k_elems, "k", NULL, dtype_bytes(s->types.k)},
        {c.v_elems ? v : NULL, NULL, c.v_elems, "v", NULL, dtype_bytes(s->types.v)},
        {mask, NULL, s->mask_elems, "mask", NULL, s->mask_elem_size},
        {NULL, c.out_elems ? out : NULL, c.out_elems, "out", NULL, dtype_bytes(s->types.o)},
        {NULL, c.lse_elems ? lse : NULL, c.lse_elems, "lse", NULL, 0},
    };
    const size_t n = sizeof t / sizeof t[0];
    if (c.q_elems == 0) /* no query row anywhere: nothing to compute or write */
        return CLATTN_SUCCESS;
    if ((st = host_tensors_check(ctx, t, n)) != CLATTN_SUCCESS)
        return st;
    /* No key row anywhere (every row then zero, its lse −inf): the kernels still take a K and a V. */
    cl_mem kb = NULL, vb = NULL;
    if ((st = host_tensors_create(ctx, t, n)) == CLATTN_SUCCESS && !(kb = t[1].mem))
        st = scratch_get(ctx, SCRATCH_K, sizeof(float), &kb);
    if (st == CLATTN_SUCCESS && !(vb = t[2].mem))
        st = scratch_get(ctx, SCRATCH_V, sizeof(float), &vb);
    if (st == CLATTN_SUCCESS)
        st = ragged_run(ctx, &c, t[0].mem, kb, vb, t[3].mem, t[4].mem, t[5].mem);
    return host_tensors_finish(ctx, t, n, st);
}

clattn_status clattn_sdpa_with_past_host(clattn_context *ctx, const clattn_sdpa_desc *desc, size_t past_len,
                                         const void *past_k, const void *past_v, const void *q, const void *k,
                                         const void *v, const void *mask, void *present_k, void *present_v,
                                         void *out, float *weights, float *lse)
{
    clattn_status st = check_context(ctx);
    past_shape p;
    if (st != CLATTN_SUCCESS || (st = past_check(ctx, desc, past_len, mask != NULL, &p)) != CLATTN_SUCCESS)
        return st;
    const sdpa_shape *s = &p.s; /* (past_check refused int8) */
    if ((past_len > 0 && (!past_k || !past_v)) || !q || !k || !v || !out)
        return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "host array %s is NULL",
                         past_len > 0 && !past_k ? "past_k" : past_len > 0 && !past_v ? "past_v" : !q ? "q" : !k ? "k"
                         : !v ? "v" : "out");
    if ((st = sdpa_check_algorithm(ctx, s, weights != NULL)) != CLATTN_SUCCESS)
        return st;
    /* The present is always made on the device: in the caller's arrays' buffers, or in temporaries. */
    const size_t qb = dtype_bytes(s->types.q), kb = dtype_bytes(s->types.k), vb = dtype_bytes(s->types.v),
                 ob = dtype_bytes(s->types.o);
    host_tensor t[] = {
        {past_len ? past_k : NULL, NULL, p.past_k_elems, "past_k", NULL, kb},
        {past_len ? past_v : NULL, NULL, p.past_v_elems, "past_v", NULL, vb},
        {q, NULL, s->q_elems, "q", NULL, qb},
        {k, NULL, p.new_k_elems, "k", NULL, kb},
        {v, NULL, p.new_v_elems, "v", NULL, vb},
        {mask, NULL, s->mask_elems, "mask", NULL, s->mask_elem_size},
        {NULL, present_k, s->k_elems, "present_k", NULL, kb},
        {NULL, present_v, s->v_elems, "present_v", NULL, vb},
        {NULL, out, s->out_elems, "out", NULL, ob},
        {NULL, weights, s->weight_elems, "weights", NULL, 0},
        {NULL, lse, s->lse_elems, "lse", NULL, 0},
    };
    const size_t n = sizeof t / sizeof t[0];
    if ((st = host_tensors_check(ctx, t, n)) != CLATTN_SUCCESS)
        return st;
    cl_mem pk = NULL, pv = NULL;
    if ((st = host_tensors_create(ctx, t, n)) == CLATTN_SUCCESS && !(pk = t[6].mem))
        st = scratch_get(ctx, SCRATCH_K, s->k_elems * kb, &pk);
    if (st == CLATTN_SUCCESS && !(pv = t[7].mem))
        st = scratch_get(ctx, SCRATCH_V, s->v_elems * vb, &pv);
    if (st == CLATTN_SUCCESS)
        st = past_run(ctx, &p, t[0].mem, t[1].mem, t[2].mem, t[3].mem, t[4].mem, t[5].mem, pk, pv, t[8].mem,
                      t[9].mem, t[10].mem);
    return host_tensors_finish(ctx, t, n, st);
}

clattn_status clattn_mha_host(clattn_context *ctx, const clattn_mha_desc *desc, const void *x, const void *kv,
                              const clattn_mha_host_weights *weights, const void *mask, void *out,
                              float *attn_weights)
{
    clattn_mha_host_weights copy;
    const clattn_mha_host_weights *w = &copy;
    clattn_status st = check_context(ctx);
    if (st != CLATTN_SUCCESS || (st = mha_host_weights_read(ctx, weights, &copy)) != CLATTN_SUCCESS)
        return st;
    mha_shape m;
    if ((st = mha_check(ctx, desc, kv != NULL, w->w_o != NULL, w->b_o != NULL, mask != NULL, &m)) != CLATTN_SUCCESS)
        return st;
    if (!x || !w->w_q || !w->w_k || !w->w_v || !out)
        return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "host array %s is NULL",
                         !x ? "x" : !w->w_q ? "w_q" : !w->w_k ? "w_k" : !w->w_v ? "w_v" : "out");
    const sdpa_shape *s = &m.sdpa;
    if ((st = sdpa_check_algorithm(ctx, s, attn_weights != NULL)) != CLATTN_SUCCESS)
        return st;
    const size_t hk = s->heads * s->qk_dim;
    const size_t xb = dtype_bytes(m.x_type), wb = dtype_bytes(m.w_type), ob = dtype_bytes(m.out_type);
    host_tensor t[] = {
        {x, NULL, m.x_elems, "x", NULL, xb},          {kv, NULL, m.kv_elems, "kv", NULL, xb},
        {w->w_q, NULL, m.wq_elems, "w_q", NULL, wb},  {w->b_q, NULL, hk, "b_q", NULL, wb},
        {w->w_k, NULL, m.wk_elems, "w_k", NULL, wb},  {w->b_k, NULL, m.kv_k_width, "b_k", NULL, wb},
        {w->w_v, NULL, m.wv_elems, "w_v", NULL, wb},  {w->b_v, NULL, m.kv_v_width, "b_v", NULL, wb},
        {w->w_o, NULL, m.wo_elems, "w_o", NULL, wb},  {w->b_o, NULL, m.out_dim, "b_o", NULL, wb},
        {mask, NULL, s->mask_elems, "mask", NULL, s->mask_elem_size}, {NULL, out, m.result_elems, "out", NULL, ob},
        {NULL, attn_weights, s->weight_elems, "attn_weights", NULL, 0},
    };
    const size_t n = sizeof t / sizeof t[0];
    if ((st = host_tensors_check(ctx, t, n)) != CLATTN_SUCCESS)
        return st;
    if ((st = host_tensors_create(ctx, t, n)) == CLATTN_SUCCESS) {
        clattn_mha_weights dw = {sizeof dw, t[2].mem, t[3].mem, t[4].mem, t[5].mem, t[6].mem, t[7].mem, t[8].mem,
                                 t[9].mem};
        st = mha_run(ctx, &m, t[0].mem, t[1].mem, &dw, t[10].mem, t[11].mem, t[12].mem);
    }
    return host_tensors_finish(ctx, t, n, st);
}
