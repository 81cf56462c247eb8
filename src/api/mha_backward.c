/* clattn_mha_backward: a layer's gradients. The forward is recomputed (Q, K, V split into heads, attention
 * with its log-sum-exps), then the output projection's gradients, attention's backward per head
 * (backward.c), and the input projections' gradients. Every matrix product is the projection GEMM's
 * (Y = X·W) on operands laid out for it by cl/layer_backward.cl's strided copies (a transpose, heads
 * merged into rows); bias gradients are its column sums. */
#include "backward.h"
#include "context.h"
#include "convert.h"
#include "error.h"
#include "launch.h"
#include "mha.h"
#include "params.h"
#include "program.h"
#include "projection.h"
#include "scratch.h"
#include "sdpa.h"
#include "versioned.h"
#include "reproducible.h"

#include <string.h>

#define MAX_TEMPS 48 /* the most a call makes: 21 copies of 16-bit tensors, 11, and 4 per input (two) */
#define INPUTS 11      /* x, kv, the eight weights and biases, d_out */
#define NTENSORS 21    /* and the ten gradients */

/* The call's state: its validated shape, the layout kernels, and its temporary buffers (released at the
 * end, whatever happened). */
typedef struct layer_call {
    clattn_context *ctx;
    const mha_shape *m;
    const family_build *fb;
    gemm_types gemm; /* float32, exact in reproducible arithmetic (every GEMM of the pass) */
    cl_mem temps[MAX_TEMPS];
    size_t ntemps;
} layer_call;

/* A float temporary of `elems` elements (uninitialised); `what` names it in an error. */
static clattn_status temp(layer_call *c, size_t elems, const char *what, cl_mem *out)
{
    if (c->ntemps == MAX_TEMPS)
        return set_error(c->ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "internal: too many temporaries, %s", what);
    cl_int err = CL_SUCCESS;
    *out = clCreateBuffer(c->ctx->context, CL_MEM_READ_WRITE, (elems ? elems : 1) * sizeof(float), NULL, &err);
    if (err != CL_SUCCESS)
        return cl_error(c->ctx, err, what);
    c->temps[c->ntemps++] = *out;
    return CLATTN_SUCCESS;
}

/* dst[dst_off + Σ i·d] = src[src_off + Σ i·s] over the index box n (four dimensions, outermost first). */
typedef struct box4 {
    size_t n[4], s[4], d[4];
} box4;

static clattn_status copy_box(layer_call *c, cl_mem src, size_t src_off, cl_mem dst, size_t dst_off, const box4 *b)
{
    strided_copy_params p = {.src = src, .src_offset = src_off, .dst = dst, .dst_offset = dst_off,
                             .n0 = b->n[0], .n1 = b->n[1], .n2 = b->n[2], .n3 = b->n[3],
                             .s0 = b->s[0], .s1 = b->s[1], .s2 = b->s[2], .s3 = b->s[3],
                             .d0 = b->d[0], .d1 = b->d[1], .d2 = b->d[2], .d3 = b->d[3]};
    kernel_args a = kernel_args_begin(c->fb->kernels[0]);
    params_bind(&a, &params_strided_copy, &p, c->fb->features);
    const size_t global[3] = {b->n[3], b->n[2], b->n[0] * b->n[1]};
    return kernel_launch_auto(c->ctx, &a, "layer backward copy", 3, global);
}

/* (rows × cols) at src → its transpose (cols × rows) at dst, from element dst_off on. */
static clattn_status transpose(layer_call *c, cl_mem src, size_t rows, size_t cols, cl_mem dst, size_t dst_off)
{
    const box4 b = {{1, 1, rows, cols}, {0, 0, cols, 1}, {0, 0, 1, rows}};
    return copy_box(c, src, 0, dst, dst_off, &b);
}

/* (B, heads, len, dim) → rows (B·len) of `ld` columns, the heads side by side from column col0 on. */
static clattn_status heads_to_rows(layer_call *c, cl_mem heads_t, size_t heads, size_t len, size_t dim, cl_mem rows,
                                   size_t ld, size_t col0)
{
    const size_t B = c->m->sdpa.batch;
    const box4 b = {{B, heads, len, dim}, {heads * len * dim, len * dim, dim, 1}, {len * ld, dim, ld, 1}};
    return copy_box(c, heads_t, 0, rows, col0, &b);
}

/* sums[k] = Σ_r src[r·ld + col0 + k], k < cols. */
static clattn_status column_sums(layer_call *c, cl_mem src, size_t ld, size_t col0, size_t rows, size_t cols,
                                 cl_mem sums)
{
    column_sums_params p = {.src = src, .ld = ld, .col0 = col0, .rows = rows, .cols = cols, .sums = sums};
    kernel_args a = kernel_args_begin(c->fb->kernels[1]);
    params_bind(&a, &params_column_sums, &p, c->fb->features);
    const size_t global[1] = {cols};
    return kernel_launch_auto(c->ctx, &a, "layer backward bias sums", 1, global);
}

/* One projection of an input: its gradient per head (B, heads, len, dim), its weights (in_dim × heads·dim)
 * and the gradients wanted of them. */
typedef struct projection_grad {
    cl_mem d_heads, w, d_w, d_b;
    size_t heads, dim;
} projection_grad;

/* An input (X or KV: rows × in_dim) and the projections that read it: G = its projections' gradients
 * side by side (rows × Σ widths), then d_input = G·[W…]ᵀ, [dW…] = inputᵀ·G, db = Σ_rows G. */
static clattn_status input_gradients(layer_call *c, cl_mem input, size_t rows, size_t len, size_t in_dim,
                                     const projection_grad *p, size_t np, cl_mem d_input)
{
    size_t width = 0, at[3];
    bool any_dw = false;
    for (size_t i = 0; i < np; i++) {
        at[i] = width;
        width += p[i].heads * p[i].dim;
        any_dw |= p[i].d_w != NULL;
    }
    cl_mem g = NULL, wt = NULL, xt = NULL, dw = NULL;
    clattn_status st = temp(c, rows * width, "creating the projections' gradients", &g);
    for (size_t i = 0; i < np && st == CLATTN_SUCCESS; i++)
        st = heads_to_rows(c, p[i].d_heads, p[i].heads, len, p[i].dim, g, width, at[i]);
    if (st == CLATTN_SUCCESS && d_input) {
        st = temp(c, width * in_dim, "creating the transposed weights", &wt);
        for (size_t i = 0; i < np && st == CLATTN_SUCCESS; i++)
            st = transpose(c, p[i].w, in_dim, p[i].heads * p[i].dim, wt, at[i] * in_dim);
        if (st == CLATTN_SUCCESS)
            st = projection_run(c->ctx, rows, width, in_dim, g, wt, NULL, d_input, NULL, &c->gemm);
    }
    if (st == CLATTN_SUCCESS && any_dw && (st = temp(c, in_dim * rows, "creating the transposed input", &xt)) == CLATTN_SUCCESS &&
        (st = temp(c, in_dim * width, "creating the weights' gradients", &dw)) == CLATTN_SUCCESS &&
        (st = transpose(c, input, rows, in_dim, xt, 0)) == CLATTN_SUCCESS &&
        (st = projection_run(c->ctx, in_dim, rows, width, xt, g, NULL, dw, NULL, &c->gemm)) == CLATTN_SUCCESS) {
        for (size_t i = 0; i < np && st == CLATTN_SUCCESS; i++) {
            const size_t w_i = p[i].heads * p[i].dim;
            const box4 b = {{1, 1, in_dim, w_i}, {0, 0, width, 1}, {0, 0, w_i, 1}};
            if (p[i].d_w)
                st = copy_box(c, dw, at[i], p[i].d_w, 0, &b);
        }
    }
    for (size_t i = 0; i < np && st == CLATTN_SUCCESS; i++)
        if (p[i].d_b)
            st = column_sums(c, g, width, at[i], rows, p[i].heads * p[i].dim, p[i].d_b);
    return st;
}

/* The whole pass on a validated call. */
static clattn_status layer_backward(layer_call *c, cl_mem x, cl_mem kv, const clattn_mha_weights *w, cl_mem mask,
                                    cl_mem d_out, const clattn_mha_grads *gr)
{
    clattn_context *ctx = c->ctx;
    const mha_shape *m = c->m;
    const sdpa_shape *s = &m->sdpa;
    const size_t B = s->batch, H = s->heads, N = s->kv_heads, L = s->q_len, S = s->kv_len;
    const size_t hk = H * s->qk_dim, hv = H * s->v_dim, q_rows = B * L, kv_rows = B * S;
    cl_mem q = NULL, k = NULL, v = NULL, o = NULL, lse = NULL, d_o = NULL, dq = NULL, dk = NULL, dv = NULL;
    clattn_status st;
    if ((st = temp(c, s->q_elems, "creating Q", &q)) != CLATTN_SUCCESS || (st = temp(c, s->k_elems, "creating K", &k)) != CLATTN_SUCCESS ||
        (st = temp(c, s->v_elems, "creating V", &v)) != CLATTN_SUCCESS ||
        (st = temp(c, s->out_elems, "creating attention's output", &o)) != CLATTN_SUCCESS ||
        (st = temp(c, s->lse_elems, "creating the log-sum-exps", &lse)) != CLATTN_SUCCESS ||
        (st = temp(c, s->out_elems, "creating dO", &d_o)) != CLATTN_SUCCESS || (st = temp(c, s->q_elems, "creating dQ", &dq)) != CLATTN_SUCCESS ||
        (st = temp(c, s->k_elems, "creating dK", &dk)) != CLATTN_SUCCESS || (st = temp(c, s->v_elems, "creating dV", &dv)) != CLATTN_SUCCESS)
        return st;

    /* The forward again, each head contiguous (the GEMM splits them as it writes). */
    const cl_mem kv_in = kv ? kv : x;
    const gemm_types *f32 = &c->gemm;
    const projection_heads q_heads = {L, s->qk_dim}, k_heads = {S, s->qk_dim}, v_heads = {S, s->v_dim},
                           o_heads = {L, s->v_dim};
    if ((st = projection_run(ctx, q_rows, m->model_dim, hk, x, w->w_q, w->b_q, q, &q_heads, f32)) != CLATTN_SUCCESS ||
        (st = projection_run(ctx, kv_rows, m->kv_dim, m->kv_k_width, kv_in, w->w_k, w->b_k, k, &k_heads, f32)) !=
            CLATTN_SUCCESS ||
        (st = projection_run(ctx, kv_rows, m->kv_dim, m->kv_v_width, kv_in, w->w_v, w->b_v, v, &v_heads, f32)) !=
            CLATTN_SUCCESS ||
        (st = sdpa_run_dense(ctx, s, q, k, v, mask, o, NULL, lse)) != CLATTN_SUCCESS)
        return st;

    /* The output projection: dC = d_out·W_Oᵀ (written as heads), dW_O = Cᵀ·d_out, db_O = Σ d_out. */
    if (m->has_out_proj) {
        cl_mem wo_t = NULL, c_t = NULL;
        if ((st = temp(c, hv * m->out_dim, "creating W_O transposed", &wo_t)) != CLATTN_SUCCESS ||
            (st = transpose(c, w->w_o, hv, m->out_dim, wo_t, 0)) != CLATTN_SUCCESS ||
            (st = projection_run(ctx, q_rows, m->out_dim, hv, d_out, wo_t, NULL, d_o, &o_heads, f32)) != CLATTN_SUCCESS)
            return st;
        if (gr->d_w_o) { /* Cᵀ (hv × B·L) straight from the heads: element (b, h, i, d) to row h·Dv + d */
            const box4 b = {{B, H, L, s->v_dim}, {H * L * s->v_dim, L * s->v_dim, s->v_dim, 1},
                            {L, s->v_dim * q_rows, 1, q_rows}};
            if ((st = temp(c, hv * q_rows, "creating the heads' concatenation transposed", &c_t)) != CLATTN_SUCCESS ||
                (st = copy_box(c, o, 0, c_t, 0, &b)) != CLATTN_SUCCESS ||
                (st = projection_run(ctx, hv, q_rows, m->out_dim, c_t, d_out, NULL, gr->d_w_o, NULL, f32)) !=
                    CLATTN_SUCCESS)
                return st;
        }
        if (gr->d_b_o && (st = column_sums(c, d_out, m->out_dim, 0, q_rows, m->out_dim, gr->d_b_o)) != CLATTN_SUCCESS)
            return st;
    } else { /* d_out is dC itself, (B, L, H·Dv): split into heads */
        const box4 b = {{B, L, H, s->v_dim}, {L * hv, hv, s->v_dim, 1}, {H * L * s->v_dim, s->v_dim, L * s->v_dim, 1}};
        if ((st = copy_box(c, d_out, 0, d_o, 0, &b)) != CLATTN_SUCCESS)
            return st;
    }

    if ((st = sdpa_backward_run(ctx, s, mask, q, k, v, o, lse, d_o, dq, dk, dv, NULL)) != CLATTN_SUCCESS)
        return st;

    /* The input projections: X's (and KV's for cross-attention). */
    const projection_grad pq = {dq, w->w_q, gr->d_w_q, gr->d_b_q, H, s->qk_dim},
                          pk = {dk, w->w_k, gr->d_w_k, gr->d_b_k, N, s->qk_dim},
                          pv = {dv, w->w_v, gr->d_w_v, gr->d_b_v, N, s->v_dim};
    if (!kv) {
        const projection_grad all[3] = {pq, pk, pv};
        return input_gradients(c, x, q_rows, L, m->model_dim, all, 3, gr->d_x);
    }
    const projection_grad kv_grads[2] = {pk, pv};
    if ((st = input_gradients(c, x, q_rows, L, m->model_dim, &pq, 1, gr->d_x)) != CLATTN_SUCCESS)
        return st;
    return input_gradients(c, kv, kv_rows, S, m->kv_dim, kv_grads, 2, gr->d_kv);
}

/* The first published layout of clattn_mha_grads (0.11) is the whole of it. */
#define MHA_GRADS_SIZE_0_11 sizeof(clattn_mha_grads)

clattn_status clattn_mha_backward(clattn_context *ctx, const clattn_mha_desc *desc, cl_mem x, cl_mem kv,
                                  const clattn_mha_weights *weights, cl_mem mask, cl_mem d_out,
                                  const clattn_mha_grads *grads)
{
    clattn_mha_weights w;
    clattn_mha_grads g;
    clattn_status st = check_context(ctx);
    if (st != CLATTN_SUCCESS || (st = mha_weights_read(ctx, weights, &w)) != CLATTN_SUCCESS)
        return st;
    if (!grads)
        return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "clattn_mha_backward: grads is NULL");
    if ((st = versioned_copy(ctx, grads, sizeof g, sizeof g, MHA_GRADS_SIZE_0_11, "clattn_mha_grads",
                             "CLATTN_MHA_GRADS_INIT", &g)) != CLATTN_SUCCESS)
        return st;
    mha_shape m;
    if ((st = mha_check(ctx, desc, kv != NULL, w.w_o != NULL, w.b_o != NULL, mask != NULL, &m)) != CLATTN_SUCCESS)
        return st;
    const sdpa_shape *s = &m.sdpa;
    const char *unsupported = sdpa_backward_not_yet(s);
    if (unsupported)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "clattn_mha_backward: %s", unsupported);
    if ((g.d_w_o || g.d_b_o) && !w.w_o)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "clattn_mha_backward: grads.%s is given but the layer has no W_O",
                         g.d_w_o ? "d_w_o" : "d_b_o");
    if (g.d_kv && !kv)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                         "clattn_mha_backward: grads.d_kv is given but the layer is self-attention (kv is NULL)");
    /* Every tensor: the inputs (x, kv and the weights in their types, d_out in the output's), then the
     * gradients, each in the type of what it is the gradient of. */
    const size_t hk = s->heads * s->qk_dim;
    const clattn_dtype xt = m.x_type, wt = m.w_type;
    cl_mem *const mems[NTENSORS] = {&x, &kv, &w.w_q, &w.b_q, &w.w_k, &w.b_k, &w.w_v, &w.b_v, &w.w_o, &w.b_o, &d_out,
                                    &g.d_x, &g.d_kv, &g.d_w_q, &g.d_b_q, &g.d_w_k, &g.d_b_k, &g.d_w_v, &g.d_b_v,
                                    &g.d_w_o, &g.d_b_o};
    const size_t elems[NTENSORS] = {m.x_elems,  m.kv_elems, m.wq_elems, hk,       m.wk_elems, m.kv_k_width, m.wv_elems,
                                    m.kv_v_width, m.wo_elems, m.out_dim,  m.result_elems, m.x_elems,  m.kv_elems,
                                    m.wq_elems, hk,       m.wk_elems, m.kv_k_width, m.wv_elems, m.kv_v_width,
                                    m.wo_elems, m.out_dim};
    const clattn_dtype types[NTENSORS] = {xt, xt, wt, wt, wt, wt, wt, wt, wt, wt, m.out_type,
                                          xt, xt, wt, wt, wt, wt, wt, wt, wt, wt};
    static const char *const names[NTENSORS] = {
        "x",          "kv",          "w_q",         "b_q",         "w_k",         "b_k",         "w_v",
        "b_v",        "w_o",         "b_o",         "d_out",       "grads.d_x",   "grads.d_kv",  "grads.d_w_q",
        "grads.d_b_q", "grads.d_w_k", "grads.d_b_k", "grads.d_w_v", "grads.d_b_v", "grads.d_w_o", "grads.d_b_o"};
    for (size_t i = 0; i < NTENSORS; i++) {
        const bool required = i == 0 || i == 2 || i == 4 || i == 6 || i == INPUTS - 1;
        if (!*mems[i] && required)
            return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "clattn_mha_backward: %s is NULL", names[i]);
        if (*mems[i] && (st = check_tensor(ctx, *mems[i], elems[i], types[i], names[i])) != CLATTN_SUCCESS)
            return st;
    }
    if (mask && (st = check_buffer(ctx, mask, s->mask_elems, s->mask_elem_size, "mask")) != CLATTN_SUCCESS)
        return st;
    named_mem inputs[INPUTS + 1], outputs[NTENSORS - INPUTS];
    for (size_t i = 0; i < NTENSORS; i++)
        *(i < INPUTS ? &inputs[i] : &outputs[i - INPUTS]) = (named_mem){*mems[i], names[i]};
    inputs[INPUTS] = (named_mem){mask, "mask"};
    if ((st = check_no_overlap(ctx, "clattn_mha_backward", outputs, NTENSORS - INPUTS, inputs, INPUTS + 1)) !=
        CLATTN_SUCCESS)
        return st;
    /* The pass runs on floats: attention's output inside is float whatever the layer's output type. */
    mha_shape floats = m;
    floats.sdpa.types.o = CLATTN_FLOAT32;
    const bool exact = reproducible_call(ctx, s);
    layer_call c = {.ctx = ctx, .m = &floats, .gemm = {CLATTN_FLOAT32, CLATTN_FLOAT32, CLATTN_FLOAT32, exact}};
    if ((st = projection_prepare(ctx)) != CLATTN_SUCCESS ||
        (st = program_get(ctx, &family_layer_backward, exact ? "-DCLATTN_EXACT=1" : "", 0, 0, NULL, &c.fb)) !=
            CLATTN_SUCCESS)
        return st;
    /* Tensors stored in 16-bit types: widened into float temporaries, the gradients computed into float
     * temporaries and rounded into the caller's buffers at the end. */
    cl_mem given[NTENSORS];
    for (size_t i = 0; i < NTENSORS; i++) {
        given[i] = *mems[i];
        if (st == CLATTN_SUCCESS && given[i] && types[i] != CLATTN_FLOAT32 &&
            (st = temp(&c, elems[i], "creating a float copy of a 16-bit tensor", mems[i])) == CLATTN_SUCCESS &&
            i < INPUTS)
            st = convert_elements(ctx, given[i], types[i], NULL, 1, *mems[i], CLATTN_FLOAT32, elems[i]);
    }
    if (st == CLATTN_SUCCESS)
        st = layer_backward(&c, x, kv, &w, mask, d_out, &g);
    for (size_t i = INPUTS; i < NTENSORS && st == CLATTN_SUCCESS; i++)
        if (given[i] && types[i] != CLATTN_FLOAT32)
            st = convert_elements(ctx, *mems[i], CLATTN_FLOAT32, NULL, 1, given[i], types[i], elems[i]);
    mems_release(c.temps, c.ntemps);
    return st;
}
