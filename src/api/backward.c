/* clattn_sdpa_backward: the gradients of attention (cl/backward.cl: D_i = dO_i·O_i, then dK/dV per key row
 * and dQ per query row, every weight recomputed from Q, K and the forward's log-sum-exp), and the sinks'
 * gradients on the host from D and the log-sum-exps. */
#include "backward.h"
#include "context.h"
#include "convert.h"
#include "error.h"
#include "fault.h"
#include "masks.h"
#include "mods.h"
#include "program.h"
#include "reproducible.h"
#include "scratch.h"
#include "sdpa.h"
#include "tuning.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* Head sizes are compiled in (the kernels' private accumulators), rounded up to a multiple of 16. */
static unsigned pad_head(size_t d) { return (unsigned)((d + 15) / 16 * 16); }

/* What the backward pass does not take yet, checked before anything runs (NULL: nothing). */
const char *sdpa_backward_not_yet(const sdpa_shape *s)
{
    if (dtype_kv_only(s->types.k) || dtype_kv_only(s->types.v))
        return "desc's storage types: a quantised K or V (int8, a block or FP8 format) has no gradient";
    if (s->desc.mods && mods_has_score(s->desc.mods) && !mods_has_score_grad(s->desc.mods))
        return "desc.mods defines score_mod but not score_mod_grad, its derivative: the gradient through it needs it";
    if (s->softmax_double)
        return "desc.softmax_precision: the backward pass computes in float32";
    if (s->qk_dim > 512 || s->v_dim > 512)
        return "head sizes above 512";
    return NULL;
}

/* (from D and the log-sum-exps read back) */
clattn_status backward_sink_gradients(clattn_context *ctx, const sdpa_shape *s, cl_mem delta, cl_mem lse,
                                      float *dsinks)
{
    const size_t rows = s->lse_elems;
    float *d = malloc(rows * sizeof *d), *l = malloc(rows * sizeof *l);
    cl_int err = d && l ? clEnqueueReadBuffer(ctx->queue, delta, CL_TRUE, 0, rows * sizeof *d, d, 0, NULL, NULL)
                        : CL_OUT_OF_HOST_MEMORY;
    if (err == CL_SUCCESS)
        err = clEnqueueReadBuffer(ctx->queue, lse, CL_TRUE, 0, rows * sizeof *l, l, 0, NULL, NULL);
    for (size_t h = 0; err == CL_SUCCESS && h < s->heads; h++) {
        double sum = 0.0;
        for (size_t b = 0; b < s->batch; b++)
            for (size_t i = 0; i < s->q_len; i++) {
                const size_t r = (b * s->heads + h) * s->q_len + i;
                if (l[r] > -INFINITY)
                    sum += exp((double)s->desc.sinks[h] - (double)l[r]) * (double)d[r];
            }
        dsinks[h] = (float)-sum;
    }
    free(d);
    free(l);
    return err == CL_SUCCESS ? CLATTN_SUCCESS : cl_error(ctx, err, "reading back D and the log-sum-exps");
}

/* dK, dV per key row and dQ per query row, a work-item each (GPUs, whose work-items are their lanes). */
static clattn_status row_by_row(clattn_context *ctx, const sdpa_shape *s, const family_build *fb, backward_params *p)
{
    kernel_args a = kernel_args_begin(fb->kernels[1]);
    params_bind(&a, &params_backward_dkdv, p, fb->features);
    const size_t keys_global[2] = {s->kv_len, s->batch * s->kv_heads};
    clattn_status st = kernel_launch_auto(ctx, &a, "backward dK dV", 2, keys_global);
    if (st != CLATTN_SUCCESS)
        return st;
    a = kernel_args_begin(fb->kernels[2]);
    params_bind(&a, &params_backward_dq, p, fb->features);
    const size_t queries_global[2] = {s->q_len, s->batch * s->heads};
    return kernel_launch_auto(ctx, &a, "backward dQ", 2, queries_global);
}

/* The staged variant (desc.algorithm CLATTN_ALGORITHM_STAGED; cl/backward_staged.cl): P and dS as
 * (B, H, L, S) matrices, then dQ, dK, dV from them, an element a work-item. */
static clattn_status staged(clattn_context *ctx, const sdpa_shape *s, const family_build *fb, backward_params *p)
{
    clattn_status st;
    if ((st = check_alloc(ctx, s->weight_elems, "the staged backward's weights")) != CLATTN_SUCCESS ||
        (st = scratch_get(ctx, SCRATCH_SCORES, s->weight_elems * sizeof(float), &p->probs)) != CLATTN_SUCCESS ||
        (st = scratch_get(ctx, SCRATCH_DSCORES, s->weight_elems * sizeof(float), &p->dscores)) != CLATTN_SUCCESS)
        return st;
    const kernel_params *tables[3] = {&params_backward_staged_weights, &params_backward_staged_dq,
                                      &params_backward_staged_dkdv};
    const char *names[3] = {"backward P dS (staged)", "backward dQ (staged)", "backward dK dV (staged)"};
    const size_t d_max = s->qk_dim > s->v_dim ? s->qk_dim : s->v_dim;
    const size_t grids[3][3] = {{s->kv_len, s->q_len, s->batch * s->heads},
                                {s->qk_dim, s->q_len, s->batch * s->heads},
                                {d_max, s->kv_len, s->batch * s->kv_heads}};
    for (int i = 0; i < 3 && st == CLATTN_SUCCESS; i++) {
        kernel_args a = kernel_args_begin(fb->kernels[4 + i]);
        params_bind(&a, tables[i], p, fb->features);
        st = kernel_launch_auto(ctx, &a, names[i], 3, grids[i]);
    }
    return st;
}

/* Tiles of keys in the SIMD lanes (cl/backward_lanes.cl), a work-item per chunk of keys of a (batch, K/V
 * head): the whole sequence where the pairs alone give each compute unit two work-items, else as many
 * chunks as do (each with its own copy of dQ, summed in chunk order afterwards) — one in reproducible
 * arithmetic (exact), whose dQ sums are one chain over the keys. */
static clattn_status keys_in_lanes(clattn_context *ctx, const sdpa_shape *s, const family_build *fb, unsigned vec,
                                   bool exact, backward_params *p)
{
    const size_t tile = 2 * (size_t)vec, pairs = s->batch * s->kv_heads, tiles = (s->kv_len + tile - 1) / tile;
    size_t chunks = exact ? 1 : (2 * (size_t)ctx->caps.compute_units + pairs - 1) / pairs;
    chunks = chunks < 1 ? 1 : chunks > tiles ? tiles : chunks;
    p->chunk_keys = (tiles + chunks - 1) / chunks * tile;
    chunks = (s->kv_len + p->chunk_keys - 1) / p->chunk_keys;
    cl_mem parts = NULL, grad_q = p->grad_q;
    clattn_status st;
    if (chunks > 1) {
        if (chunks > SIZE_MAX / sizeof(float) / s->q_elems)
            return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "clattn_sdpa_backward: dQ's copies overflow size_t");
        if ((st = scratch_get(ctx, SCRATCH_DQ_CHUNKS, chunks * s->q_elems * sizeof(float), &parts)) != CLATTN_SUCCESS)
            return st;
        p->grad_q = parts;
    }
    kernel_args a = kernel_args_begin(fb->kernels[9]);
    params_bind(&a, &params_backward_lanes, p, fb->features);
    const size_t global[2] = {chunks, pairs}, local[2] = {1, 1};
    if ((st = kernel_launch(ctx, &a, "backward, keys in lanes", 2, global, local)) != CLATTN_SUCCESS || chunks == 1)
        return st;
    backward_dq_sum_params sp = {.parts = parts, .grad_q = grad_q, .n = s->q_elems, .chunks = chunks};
    a = kernel_args_begin(fb->kernels[3]);
    params_bind(&a, &params_backward_dq_sum, &sp, fb->features);
    const size_t elems[1] = {s->q_elems};
    return kernel_launch_auto(ctx, &a, "backward dQ sum", 1, elems);
}

/* *buffer (n floats) with its entries below 2^-40 made +0 (cl/backward.cl's XCUT), into the scratch `slot` (in place
 * where *buffer is that already: a widened 16-bit tensor), then *buffer that copy: the exact lanes kernel's Q, dO. */
static clattn_status cut_small(clattn_context *ctx, const family_build *fb, scratch_slot slot, size_t n, cl_mem *buffer)
{
    cl_mem copy = NULL;
    clattn_status st = scratch_get(ctx, slot, n * sizeof(float), &copy);
    if (st != CLATTN_SUCCESS)
        return st;
    backward_cut_params cp = {.src = *buffer, .dst = copy, .n = n};
    kernel_args a = kernel_args_begin(fb->kernels[8]);
    params_bind(&a, &params_backward_cut, &cp, fb->features);
    const size_t global[1] = {n};
    if ((st = kernel_launch_auto(ctx, &a, "backward, small entries cut", 1, global)) == CLATTN_SUCCESS)
        *buffer = copy;
    return st;
}

/* Whether K, V, every D and every lse are finite (cl/backward.cl's clattn_backward_finite): the lanes
 * kernel's vector products multiply hidden pairs' zero weights by them, which only the finite allow. */
static clattn_status all_finite(clattn_context *ctx, const sdpa_shape *s, const family_build *fb, cl_mem k, cl_mem v,
                                cl_mem delta, cl_mem lse, bool *finite)
{
    const cl_int none = 0;
    cl_mem flag = NULL;
    clattn_status st = scratch_upload(ctx, SCRATCH_BACKWARD_FLAG, &none, sizeof none, "the finiteness check's flag",
                                      &flag);
    if (st != CLATTN_SUCCESS)
        return st;
    backward_finite_params fp = {.k = k, .v = v, .delta = delta, .lse = lse, .nonfinite = flag,
                                 .n_k = s->k_elems, .n_v = s->v_elems, .rows = s->lse_elems};
    kernel_args a = kernel_args_begin(fb->kernels[7]);
    params_bind(&a, &params_backward_finite, &fp, fb->features);
    size_t n = s->k_elems > s->v_elems ? s->k_elems : s->v_elems;
    n = n > s->lse_elems ? n : s->lse_elems;
    const size_t global[1] = {n};
    if ((st = kernel_launch_auto(ctx, &a, "backward finiteness check", 1, global)) != CLATTN_SUCCESS)
        return st;
    cl_int bad = none;
    cl_int err = INJECT_FAULT(CL_OUT_OF_RESOURCES);
    if (err == CL_SUCCESS)
        err = clEnqueueReadBuffer(ctx->queue, flag, CL_TRUE, 0, sizeof bad, &bad, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return cl_error(ctx, err, "reading the backward's finiteness check back");
    *finite = bad == none;
    return CLATTN_SUCCESS;
}

/* The pass on float32 tensors. */
static clattn_status backward_floats(clattn_context *ctx, const sdpa_shape *s, cl_mem mask, cl_mem q, cl_mem k,
                                     cl_mem v, cl_mem out, cl_mem lse, cl_mem dout, cl_mem dq, cl_mem dk, cl_mem dv,
                                     float *dsinks)
{
    clattn_status st;
    device_masks masks;
    cl_mem delta = NULL;
    if ((st = masks_upload(ctx, s, mask, &masks)) != CLATTN_SUCCESS ||
        (st = scratch_get(ctx, SCRATCH_DELTA, s->lse_elems * sizeof(float), &delta)) != CLATTN_SUCCESS)
        return st;
    /* The keys in the lanes where the forward puts its rows in them (CPUs), else a row a work-item; reproducible
     * arithmetic: both in their exact build, the same bits (cl/backward_lanes.cl) — but on llvmpipe, whose
     * 65535-iteration limit a lanes work-item's loops would pass, the row kernels. */
    tuning_values tiles;
    if ((st = tuning_lookup(ctx, TUNING_FUSED, &tiles, NULL)) != CLATTN_SUCCESS)
        return st;
    const bool exact = reproducible_call(ctx, s);
    const bool lanes_allowed = !exact || device_class_of(&ctx->caps) != DEVICE_CLASS_CPU_LANES;
    const unsigned vec = tiles.v[4] == 2 && tiles.v[3] > 1 && lanes_allowed ? tiles.v[3] : 1;
    char options[128];
    snprintf(options, sizeof options, "-DVEC=%u -DDK=%u -DDV=%u%s", vec, pad_head(s->qk_dim), pad_head(s->v_dim),
             exact ? " -DCLATTN_EXACT=1" : vec > 1 ? " -cl-denorms-are-zero" : "");
    const family_build *fb;
    if ((st = program_get(ctx, exact ? &family_backward_exact : &family_backward, options, 0, call_features(s),
                          call_mods(s), &fb)) != CLATTN_SUCCESS)
        return st;
    backward_delta_params dp = {.o = out, .dout = dout, .delta = delta, .rows = s->lse_elems, .dv = s->v_dim};
    kernel_args a = kernel_args_begin(fb->kernels[0]);
    params_bind(&a, &params_backward_delta, &dp, fb->features);
    const size_t rows_global[1] = {s->lse_elems};
    if ((st = kernel_launch_auto(ctx, &a, "backward D", 1, rows_global)) != CLATTN_SUCCESS)
        return st;
    backward_params p = {.q = q, .k = k, .v = v, .dout = dout, .lse = lse, .delta = delta, .grad_q = dq,
                         .grad_k = dk, .grad_v = dv, .batch = s->batch, .heads = s->heads, .group = s->group,
                         .q_len = s->q_len, .kv_len = s->kv_len, .dk = s->qk_dim, .dv = s->v_dim, .scale = s->scale};
    PARAMS_SET_MASKS(backward_params, &p, &masks);
    /* The keys-in-lanes kernel where it was built and every factor is finite; a NaN or inf anywhere in
     * Q, K, V or dO sends the call to the row kernels, which skip the pairs without weight one by one
     * (so that the non-finite value reaches only the gradients the math sends it to). */
    bool lanes = s->algorithm != CLATTN_ALGORITHM_STAGED && vec > 1 && fb->kernels[9];
    if (lanes && (st = all_finite(ctx, s, fb, k, v, delta, lse, &lanes)) != CLATTN_SUCCESS)
        return st;
    if (lanes && exact && ((st = cut_small(ctx, fb, SCRATCH_WIDE_Q, s->q_elems, &p.q)) != CLATTN_SUCCESS ||
                           (st = cut_small(ctx, fb, SCRATCH_WIDE_DOUT, s->out_elems, &p.dout)) != CLATTN_SUCCESS))
        return st;
    st = s->algorithm == CLATTN_ALGORITHM_STAGED && !exact ? staged(ctx, s, fb, &p)
         : lanes                               ? keys_in_lanes(ctx, s, fb, vec, exact, &p)
                                               : row_by_row(ctx, s, fb, &p);
    if (st != CLATTN_SUCCESS)
        return st;
    return dsinks && s->desc.sinks ? backward_sink_gradients(ctx, s, delta, lse, dsinks) : CLATTN_SUCCESS;
}

/* The dense pass (call: the mask), its tensors already widened. */
static clattn_status dense_pass(clattn_context *ctx, const sdpa_shape *s, const void *call, const backward_tensors *t,
                                float *dsinks)
{
    return backward_floats(ctx, s, *(const cl_mem *)call, t->q, t->k, t->v, t->out, t->lse, t->dout, t->dq, t->dk,
                           t->dv, dsinks);
}

clattn_status backward_in_floats(clattn_context *ctx, const sdpa_shape *s, backward_float_pass pass, const void *call,
                                 const backward_tensors *t, float *dsinks)
{
    /* Tensors stored in 16-bit types: widened to float temporaries (dO in the output's type), the pass
     * run on floats, and the gradients rounded into their inputs' types. */
    const cl_mem given[5] = {t->q, t->k, t->v, t->out, t->dout};
    cl_mem in[5] = {t->q, t->k, t->v, t->out, t->dout}, grad[3] = {t->dq, t->dk, t->dv};
    const clattn_dtype in_types[5] = {s->types.q, s->types.k, s->types.v, s->types.o, s->types.o};
    const size_t in_elems[5] = {s->q_elems, s->k_elems, s->v_elems, s->out_elems, s->out_elems};
    const scratch_slot in_slots[5] = {SCRATCH_WIDE_Q, SCRATCH_WIDE_K, SCRATCH_WIDE_V, SCRATCH_WIDE_O,
                                      SCRATCH_WIDE_DOUT};
    const scratch_slot grad_slots[3] = {SCRATCH_GRAD_Q, SCRATCH_GRAD_K, SCRATCH_GRAD_V};
    clattn_status st = CLATTN_SUCCESS;
    for (int i = 0; i < 5 && st == CLATTN_SUCCESS; i++)
        if (in_types[i] != CLATTN_FLOAT32 &&
            (st = scratch_get(ctx, in_slots[i], in_elems[i] * sizeof(float), &in[i])) == CLATTN_SUCCESS)
            st = convert_elements(ctx, given[i], in_types[i], NULL, 1, in[i], CLATTN_FLOAT32, in_elems[i]);
    for (int i = 0; i < 3 && st == CLATTN_SUCCESS; i++)
        if (in_types[i] != CLATTN_FLOAT32)
            st = scratch_get(ctx, grad_slots[i], in_elems[i] * sizeof(float), &grad[i]);
    const backward_tensors floats = {in[0], in[1], in[2], in[3], t->lse, in[4], grad[0], grad[1], grad[2]};
    if (st == CLATTN_SUCCESS)
        st = pass(ctx, s, call, &floats, dsinks);
    const cl_mem user_grad[3] = {t->dq, t->dk, t->dv};
    for (int i = 0; i < 3 && st == CLATTN_SUCCESS; i++)
        if (in_types[i] != CLATTN_FLOAT32)
            st = convert_elements(ctx, grad[i], CLATTN_FLOAT32, NULL, 1, user_grad[i], in_types[i], in_elems[i]);
    return st;
}

clattn_status sdpa_backward_run(clattn_context *ctx, const sdpa_shape *s, cl_mem mask, cl_mem q, cl_mem k, cl_mem v,
                                cl_mem out, cl_mem lse, cl_mem dout, cl_mem dq, cl_mem dk, cl_mem dv, float *dsinks)
{
    const backward_tensors t = {q, k, v, out, lse, dout, dq, dk, dv};
    return backward_in_floats(ctx, s, dense_pass, &mask, &t, dsinks);
}

clattn_status backward_buffers_check(clattn_context *ctx, const char *api, const sdpa_shape *s,
                                     const backward_tensors *t, cl_mem mask)
{
    const struct {
        cl_mem mem;
        size_t elems;
        clattn_dtype type;
        const char *name;
    } tensors[] = {{t->q, s->q_elems, s->types.q, "q"},           {t->k, s->k_elems, s->types.k, "k"},
                   {t->v, s->v_elems, s->types.v, "v"},           {t->out, s->out_elems, s->types.o, "out"},
                   {t->lse, s->lse_elems, CLATTN_FLOAT32, "lse"}, {t->dout, s->out_elems, s->types.o, "dout"},
                   {t->dq, s->q_elems, s->types.q, "dq"},         {t->dk, s->k_elems, s->types.k, "dk"},
                   {t->dv, s->v_elems, s->types.v, "dv"}};
    for (size_t i = 0; i < sizeof tensors / sizeof tensors[0]; i++) {
        if (!tensors[i].mem)
            return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "%s: %s is NULL%s", api, tensors[i].name,
                             i == 4 ? " (the forward's log-sum-exps)" : "");
        const clattn_status st = check_tensor(ctx, tensors[i].mem, tensors[i].elems, tensors[i].type, tensors[i].name);
        if (st != CLATTN_SUCCESS)
            return st;
    }
    clattn_status st;
    if (mask && (st = check_buffer(ctx, mask, s->mask_elems, s->mask_elem_size, "mask")) != CLATTN_SUCCESS)
        return st;
    const named_mem outputs[] = {{t->dq, "dq"}, {t->dk, "dk"}, {t->dv, "dv"}};
    const named_mem inputs[] = {{t->q, "q"},     {t->k, "k"},     {t->v, "v"},       {mask, "mask"},
                                {t->out, "out"}, {t->lse, "lse"}, {t->dout, "dout"}, {s->k_scales, "desc.k_scales"},
                                {s->v_scales, "desc.v_scales"}};
    return check_no_overlap(ctx, api, outputs, 3, inputs, sizeof inputs / sizeof inputs[0]);
}

clattn_status clattn_sdpa_backward(clattn_context *ctx, const clattn_sdpa_desc *desc, cl_mem q, cl_mem k, cl_mem v,
                                   cl_mem mask, cl_mem out, cl_mem lse, cl_mem dout, cl_mem dq, cl_mem dk, cl_mem dv,
                                   float *dsinks)
{
    sdpa_shape s;
    clattn_status st = check_context(ctx);
    if (st != CLATTN_SUCCESS || (st = sdpa_check(ctx, desc, mask != NULL, &s)) != CLATTN_SUCCESS)
        return st;
    const char *unsupported = sdpa_backward_not_yet(&s);
    if (unsupported)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "clattn_sdpa_backward: %s", unsupported);
    const backward_tensors t = {q, k, v, out, lse, dout, dq, dk, dv};
    if ((st = backward_buffers_check(ctx, "clattn_sdpa_backward", &s, &t, mask)) != CLATTN_SUCCESS)
        return st;
    return sdpa_backward_run(ctx, &s, mask, q, k, v, out, lse, dout, dq, dk, dv, dsinks);
}
