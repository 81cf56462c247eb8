/* clattn_sdpa: validate, then the fused kernel or the staged path. */
#include "sdpa.h"

#include "context.h"
#include "convert.h"
#include "decode.h"
#include "error.h"
#include "fused.h"
#include "masks.h"
#include "reproducible.h"
#include "staged.h"

/* Failures of the fused or decode kernels that the staged path can work around: it did not build, or the
 * device cannot run it. */
static bool kernel_can_fall_back(clattn_status st)
{
    return st == CLATTN_ERROR_BUILD_FAILED || st == CLATTN_ERROR_UNSUPPORTED_DEVICE ||
           st == (clattn_status)CL_INVALID_WORK_GROUP_SIZE || st == (clattn_status)CL_OUT_OF_RESOURCES;
}

clattn_status sdpa_check(clattn_context *ctx, const clattn_sdpa_desc *desc, bool mask_given, sdpa_shape *s)
{
    clattn_sdpa_desc d;
    clattn_status st = sdpa_desc_read(ctx, desc, &d);
    if (st == CLATTN_SUCCESS)
        st = sdpa_shape_resolve(ctx, &d, s);
    return st != CLATTN_SUCCESS ? st : masks_resolve(ctx, d.masks, mask_given, s);
}

/* A double softmax needs the staged path — float_only names the float32-only path asked for, which
 * refuses it; NULL when the staged path will run. (A device without cl_khr_fp64 runs it in float-float
 * arithmetic: src/attention/staged.c.) */
static clattn_status check_softmax_double(clattn_context *ctx, const sdpa_shape *s, const char *float_only)
{
    if (!s->softmax_double)
        return CLATTN_SUCCESS;
    if (float_only)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                         "desc.softmax_precision is CLATTN_SOFTMAX_DOUBLE, but %s computes its softmax in float32: "
                         "the double softmax runs on the staged path (CLATTN_ALGORITHM_AUTO or _STAGED)",
                         float_only);
    return CLATTN_SUCCESS;
}

clattn_status sdpa_check_algorithm(clattn_context *ctx, const sdpa_shape *s, bool weights_wanted)
{
    const bool fused = s->algorithm == CLATTN_ALGORITHM_FUSED, decode = s->algorithm == CLATTN_ALGORITHM_DECODE;
    const char *name = fused ? "CLATTN_ALGORITHM_FUSED" : "CLATTN_ALGORITHM_DECODE";
    if ((fused || decode) && weights_wanted)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                         "%s never materialises the weights; ask for AUTO or STAGED to get them", name);
    const size_t most = fused ? FUSED_MAX_HEAD : DECODE_MAX_HEAD;
    if ((fused || decode) && (s->qk_dim > most || s->v_dim > most))
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "%s supports head sizes up to %zu", name, most);
    return check_softmax_double(ctx, s, fused || decode ? name : NULL);
}

/* The path AUTO takes without a weights output or a double softmax: decode for few query rows, else
 * fused, when the head sizes allow; staged otherwise. */
static clattn_algorithm auto_algorithm(const sdpa_shape *s, bool weights_wanted)
{
    if (weights_wanted || s->softmax_double)
        return CLATTN_ALGORITHM_STAGED;
    if (s->q_len <= DECODE_AUTO_MAX_ROWS && s->qk_dim <= DECODE_MAX_HEAD && s->v_dim <= DECODE_MAX_HEAD)
        return CLATTN_ALGORITHM_DECODE;
    if (s->qk_dim <= FUSED_MAX_HEAD && s->v_dim <= FUSED_MAX_HEAD)
        return CLATTN_ALGORITHM_FUSED;
    return CLATTN_ALGORITHM_STAGED;
}

/* The staged path computes on floats: tensors of other types are widened into temporaries first, and the
 * output rounded into its type after (the cost: a float copy of each, and a pass over each). */
static clattn_status staged_run_widened(clattn_context *ctx, const sdpa_shape *s, tensor_view q, tensor_view k,
                                        tensor_view v, cl_mem mask, tensor_view out, cl_mem weights, cl_mem lse)
{
    sdpa_shape floats = *s;
    floats.types = (tensor_types){.q = CLATTN_FLOAT32, .k = CLATTN_FLOAT32, .v = CLATTN_FLOAT32, .o = CLATTN_FLOAT32};
    floats.k_scales = floats.v_scales = NULL;
    tensor_view wide_out = out;
    clattn_status st = convert_widen(ctx, &q, s->types.q, s->types.q_chunk, NULL, s->qk_dim, s->q_elems, SCRATCH_WIDE_Q);
    if (st == CLATTN_SUCCESS)
        st = convert_widen(ctx, &k, s->types.k, s->types.k_chunk, s->k_scales, s->qk_dim, s->k_elems, SCRATCH_WIDE_K);
    if (st == CLATTN_SUCCESS && s->v_in_k) /* (MLA's latent form: the values are the widened keys' first columns) */
        v = k;
    else if (st == CLATTN_SUCCESS)
        st = convert_widen(ctx, &v, s->types.v, s->types.v_chunk, s->v_scales, s->v_dim, s->v_elems, SCRATCH_WIDE_V);
    if (st == CLATTN_SUCCESS)
        st = convert_float_target(ctx, &wide_out, s->types.o, s->out_elems);
    if (st == CLATTN_SUCCESS)
        st = staged_run(ctx, &floats, q, k, v, mask, wide_out, weights, lse);
    if (st == CLATTN_SUCCESS)
        st = convert_narrow(ctx, wide_out.buf, out.buf, s->types.o, s->out_elems);
    return st;
}

/* Reproducible arithmetic, where the call asks for it: one kernel for every algorithm and layout. */
static clattn_status run_reproducible(clattn_context *ctx, const sdpa_shape *s, const kv_layout *lay, tensor_view q,
                                      tensor_view k, tensor_view v, cl_mem mask, tensor_view out, cl_mem weights,
                                      cl_mem lse)
{
    if (s->softmax_double)
        return reproducible_refused(ctx, "the double softmax");
    if (!weights)
        return reproducible_run(ctx, s, lay, q, k, v, mask, out, lse);
    /* The weights (a dense call's): the output first, with its log-sum-exps, which the weights are formed from. */
    cl_mem row_lse = lse;
    clattn_status st = lse ? CLATTN_SUCCESS : scratch_get(ctx, SCRATCH_PARTIAL_LSE, s->lse_elems * sizeof(float), &row_lse);
    if (st == CLATTN_SUCCESS)
        st = reproducible_run(ctx, s, lay, q, k, v, mask, out, row_lse);
    return st == CLATTN_SUCCESS ? fused_exact_weights(ctx, s, q, k, v, mask, row_lse, weights, s->weights_output) : st;
}

clattn_status sdpa_run(clattn_context *ctx, const sdpa_shape *s, tensor_view q, tensor_view k, tensor_view v,
                       cl_mem mask, tensor_view out, cl_mem weights, cl_mem lse)
{
    if (reproducible_call(ctx, s))
        return run_reproducible(ctx, s, NULL, q, k, v, mask, out, weights, lse);
    const clattn_algorithm path = s->algorithm == CLATTN_ALGORITHM_AUTO ? auto_algorithm(s, weights != NULL)
                                                                         : s->algorithm;
    if (path == CLATTN_ALGORITHM_FUSED || path == CLATTN_ALGORITHM_DECODE) {
        clattn_status st = path == CLATTN_ALGORITHM_FUSED ? fused_run(ctx, s, NULL, q, k, v, mask, out, lse)
                                                          : decode_run(ctx, s, q, k, v, mask, out, lse);
        if (st == CLATTN_SUCCESS || s->algorithm != CLATTN_ALGORITHM_AUTO || !kernel_can_fall_back(st))
            return st;
        set_warning(ctx, "the %s kernel is not available on %s (%s: %.1500s); the staged path ran instead",
                    path == CLATTN_ALGORITHM_FUSED ? "fused" : "decode", ctx->caps.name, clattn_status_string(st),
                    clattn_last_error(ctx));
        clear_error(ctx);
    }
    return tensor_types_all_float(s->types) ? staged_run(ctx, s, q, k, v, mask, out, weights, lse)
                                            : staged_run_widened(ctx, s, q, k, v, mask, out, weights, lse);
}

clattn_status sdpa_run_dense(clattn_context *ctx, const sdpa_shape *s, cl_mem q, cl_mem k, cl_mem v, cl_mem mask,
                             cl_mem out, cl_mem weights, cl_mem lse)
{
    const tensor_view kv = view_bhld(k, s->kv_heads, s->kv_len, s->qk_dim);
    return sdpa_run(ctx, s, view_bhld(q, s->heads, s->q_len, s->qk_dim), kv,
                    s->v_in_k ? kv : view_bhld(v, s->kv_heads, s->kv_len, s->v_dim), mask,
                    view_bhld(out, s->heads, s->q_len, s->v_dim), weights, lse);
}

clattn_status clattn_sdpa(clattn_context *ctx, const clattn_sdpa_desc *desc, cl_mem q, cl_mem k, cl_mem v,
                          cl_mem mask, cl_mem out, cl_mem weights, cl_mem lse)
{
    clattn_status st = check_context(ctx);
    sdpa_shape s;
    if (st != CLATTN_SUCCESS || (st = sdpa_check(ctx, desc, mask != NULL, &s)) != CLATTN_SUCCESS ||
        (st = check_tensor(ctx, q, s.q_elems, s.types.q, "q")) != CLATTN_SUCCESS ||
        (st = check_kv_tensor(ctx, k, s.types.k, s.batch * s.kv_heads, s.kv_len, s.qk_dim, "k")) != CLATTN_SUCCESS ||
        (!v && (st = latent_resolve(ctx, &s, "clattn_sdpa")) != CLATTN_SUCCESS) ||
        (v && (st = check_kv_tensor(ctx, v, s.types.v, s.batch * s.kv_heads, s.kv_len, s.v_dim, "v")) !=
                  CLATTN_SUCCESS) ||
        (st = check_scales(ctx, &s, s.k_elems / s.qk_dim, s.v_elems / s.v_dim)) != CLATTN_SUCCESS ||
        (mask && (st = check_buffer(ctx, mask, s.mask_elems, s.mask_elem_size, "mask")) != CLATTN_SUCCESS) ||
        (st = check_tensor(ctx, out, s.out_elems, s.types.o, "out")) != CLATTN_SUCCESS ||
        (weights && (st = check_buffer(ctx, weights, s.weight_elems, sizeof(float), "weights")) != CLATTN_SUCCESS) ||
        (lse && (st = check_buffer(ctx, lse, s.lse_elems, sizeof(float), "lse")) != CLATTN_SUCCESS) ||
        (st = sdpa_check_algorithm(ctx, &s, weights != NULL)) != CLATTN_SUCCESS)
        return st;
    return sdpa_run_dense(ctx, &s, q, k, v, mask, out, weights, lse);
}

/* Whether a ragged call has sequences of 1 … DECODE_AUTO_MAX_ROWS query rows (a mixed batch's decode rows). */
static bool has_few_row_sequences(const sdpa_shape *s, const kv_layout *lay)
{
    for (size_t b = 0; lay->host_q_starts && b < s->batch; b++) {
        const size_t n = lay->host_q_starts[b + 1] - lay->host_q_starts[b];
        if (n >= 1 && n <= DECODE_AUTO_MAX_ROWS)
            return true;
    }
    return false;
}

clattn_status sdpa_run_layout(clattn_context *ctx, const sdpa_shape *s, const kv_layout *lay, tensor_view q,
                              tensor_view k, tensor_view v, cl_mem mask, tensor_view out, cl_mem lse)
{
    if (reproducible_call(ctx, s))
        return run_reproducible(ctx, s, lay, q, k, v, mask, out, NULL, lse);
    const bool fused_fits = s->qk_dim <= FUSED_MAX_HEAD && s->v_dim <= FUSED_MAX_HEAD;
    const bool fused = s->algorithm == CLATTN_ALGORITHM_FUSED ||
                       (s->algorithm == CLATTN_ALGORITHM_AUTO && s->q_len > DECODE_AUTO_MAX_ROWS && fused_fits);
    if (!fused)
        return decode_run_layout(ctx, s, lay, q, k, v, mask, out, lse);
    /* A ragged call whose longest sequence takes the fused kernel (AUTO): its sequences of few rows run on the
     * decode kernels first — a fused work-group computes a whole tile of rows, however few are its sequence's
     * (a mixed batch ran 1.86x its separate calls so) — and the rest fused, each launch listing only its own
     * sequences' work-groups. (The decode launch goes first: its combine pass, where it splits the keys,
     * writes rows of every sequence, which the fused launch then writes over with its own.) */
    kv_layout large = *lay;
    clattn_status st;
    if (s->algorithm == CLATTN_ALGORITHM_AUTO && has_few_row_sequences(s, lay)) {
        kv_layout small = *lay;
        small.q_rows_max = DECODE_AUTO_MAX_ROWS;
        large.q_rows_min = DECODE_AUTO_MAX_ROWS + 1;
        if ((st = decode_run_layout(ctx, s, &small, q, k, v, mask, out, lse)) != CLATTN_SUCCESS)
            return st;
    }
    st = fused_run(ctx, s, &large, q, k, v, mask, out, lse);
    if (st == CLATTN_SUCCESS || s->algorithm != CLATTN_ALGORITHM_AUTO || !kernel_can_fall_back(st))
        return st;
    set_warning(ctx, "the fused kernel is not available on %s (%s: %.1500s); the decode kernels ran instead",
                ctx->caps.name, clattn_status_string(st), clattn_last_error(ctx));
    clear_error(ctx);
    return decode_run_layout(ctx, s, lay, q, k, v, mask, out, lse);
}
