/*
 * Argument validation of the storage types (clattn_dtype, since 0.5) on every entry point that takes
 * typed tensors: clattn_sdpa, clattn_score, clattn_weighted_sum, clattn_merge, clattn_kv_append,
 * clattn_kv_append_paged, clattn_sdpa_paged, clattn_sdpa_ragged, clattn_sdpa_with_past (and _host),
 * clattn_sdpa_host, clattn_mha (and _host) and the group calls. Each case — a type outside the enum,
 * int8 where only K and V may be, int8 K/V without their scales or with too few, scales beside a type
 * that is not int8, int8 in the past/present form and the host variants, non-float32 types in the
 * group calls — must return its status, name the offending field in clattn_last_error and write no
 * output (outputs keep their sentinel fill); then the same call with that argument corrected (an int8
 * type together with its scales) must succeed, so that the refusal was for the reason named. See
 * validation_util.h.
 */
#include "validation_util.h"

#include <string.h>

#define F32 CLATTN_FLOAT32
#define F16 CLATTN_FLOAT16
#define BF16 CLATTN_BFLOAT16
#define I8 CLATTN_INT8
#define OUTSIDE_HIGH ((clattn_dtype)7)  /* values outside the enum */
#define OUTSIDE_LOW ((clattn_dtype)-1)

/* One shape for every call: B=1, H=2, L=3, S=10, D=8 (the K/V rows, kv_heads = H, have one scale each). */
enum {
    BATCH = 1, HEADS = 2, QLEN = 3, KVLEN = 10, HDIM = 8,
    N_Q = BATCH * HEADS * QLEN * HDIM, N_K = BATCH * HEADS * KVLEN * HDIM, N_O = N_Q,
    N_LSE = BATCH * HEADS * QLEN, N_W = BATCH * HEADS * QLEN * KVLEN, K_ROWS = BATCH * HEADS * KVLEN,
};

/* A bad case (validation_util.h) and the field its detail must name. */
typedef struct {
    bad_case bc;
    const char *field;
} type_case;

static void set_label(const char *api, const type_case *tc, int fixed, size_t dev)
{
    tu_set_label("%s: %s%s on %s", api, tc->bc.name, fixed ? " (corrected)" : "", tu_dev_spec[dev]);
}

/* The bad call (fixed 0) must be refused as tc says, with a detail in clattn_last_error(err_ctx) that
 * names tc->field; its corrected twin (fixed 1) must succeed, and its work finish on ctx (when given). */
static void expect(clattn_status st, const type_case *tc, int fixed, clattn_context *ctx,
                   const clattn_context *err_ctx)
{
    if (fixed) {
        TU_ASSERT_OK(st, err_ctx, "the corrected call");
        if (ctx)
            tu_finish(ctx);
        return;
    }
    check_status(st, &tc->bc, err_ctx);
    const char *e = clattn_last_error(err_ctx);
    ck_assert_msg(strstr(e, tc->field) != NULL, "%s: the detail \"%s\" does not name %s", tu_label(), e, tc->field);
}

/* The type a tensor's buffer is made in: float32 for a type outside the enum. */
static clattn_dtype stored(clattn_dtype t) { return clattn_dtype_size(t) ? t : F32; }

/* n uniform values in rows of `row`, stored as `type` in a new device buffer of exactly their bytes;
 * *scales (when scales is not NULL) gets an int8 tensor's row scales, NULL for the other types. */
static cl_mem input(clattn_context *ctx, clattn_dtype type, size_t n, size_t row, uint64_t seed, cl_mem *scales)
{
    float *src = tu_falloc(n);
    tu_fill_uniform(src, n, 1.0f, seed);
    const tu_typed t = tu_typed_make(stored(type), src, n, row);
    if (scales)
        *scales = tu_typed_scales(ctx, &t);
    return tu_typed_upload(ctx, &t);
}

/* Floats that hold `rows` rows of HDIM elements of `type` (rounded up). */
static size_t cache_floats(clattn_dtype type, size_t rows)
{
    return (rows * HDIM * clattn_dtype_size(stored(type)) + sizeof(float) - 1) / sizeof(float);
}

/* A cache (an output) of `rows` rows of HDIM elements of `type`, all sentinel; an int8 one's scales,
 * sentinel too, in *scales (else NULL). */
static cl_mem output_cache(clattn_context *ctx, clattn_dtype type, size_t rows, cl_mem *scales)
{
    *scales = stored(type) == I8 ? tu_dev_alloc_exact(ctx, rows, NULL) : NULL;
    return tu_dev_alloc_exact(ctx, cache_floats(type, rows), NULL);
}

/* A scales buffer of `rows` floats (sentinel): beside a type that is not int8, or for an int8 type that
 * the call refuses whatever its scales. */
static cl_mem stray_scales(clattn_context *ctx, size_t rows) { return tu_dev_alloc_exact(ctx, rows, NULL); }

static float *host_input(size_t n, uint64_t seed)
{
    float *p = tu_falloc(n);
    tu_fill_uniform(p, n, 1.0f, seed);
    return p;
}

/* ---------------------------------------------------------------------------------------------- */
/* clattn_sdpa                                                                                     */
/* ---------------------------------------------------------------------------------------------- */

/* (The int8 V cases keep an int8 K with its scales, so that the corrected call runs the types
 * float32 Q and output, int8 K and V, as test_dtypes does.) */
enum sdpa_mut { SD_K_ENUM, SD_V_ENUM, SD_V_INT8_NO_SCALES, SD_V_SCALES_SHORT, SD_K_SCALES_NOT_INT8 };
static const type_case sdpa_cases[] = {
    {{SD_K_ENUM, IV, 0, "k_dtype 7 (outside the enum)"}, "k_dtype"},
    {{SD_V_ENUM, IV, 0, "v_dtype -1 (outside the enum)"}, "v_dtype"},
    {{SD_V_INT8_NO_SCALES, NA, 0, "int8 V without v_scales"}, "v_scales"},
    {{SD_V_SCALES_SHORT, TS, 0, "int8 V with v_scales one float short"}, "v_scales"},
    {{SD_K_SCALES_NOT_INT8, IV, 0, "k_scales given for a float32 K"}, "k_scales"},
};
#define N_SDPA (sizeof sdpa_cases / sizeof sdpa_cases[0])

START_TEST(test_sdpa)
{
    const type_case *tc = &sdpa_cases[TU_CASE(_i)];
    const size_t dev = TU_DEVICE(_i);
    clattn_context *ctx = tu_ctx[dev];
    for (int fixed = 0; fixed < 2; fixed++) {
        set_label("clattn_sdpa", tc, fixed, dev);
        clattn_sdpa_desc d = tu_sdpa_desc(BATCH, HEADS, QLEN, KVLEN, HDIM, 0);
        switch (tc->bc.mut) {
        case SD_K_ENUM: d.k_dtype = fixed ? F32 : OUTSIDE_HIGH; break;
        case SD_V_ENUM: d.v_dtype = fixed ? F32 : OUTSIDE_LOW; break;
        case SD_V_INT8_NO_SCALES:
        case SD_V_SCALES_SHORT: d.k_dtype = d.v_dtype = I8; break;
        case SD_K_SCALES_NOT_INT8: break;
        default: ck_abort_msg("unknown case");
        }
        cl_mem ks, vs;
        cl_mem q = input(ctx, F32, N_Q, HDIM, 1, NULL), k = input(ctx, d.k_dtype, N_K, HDIM, 2, &ks),
               v = input(ctx, d.v_dtype, N_K, HDIM, 3, &vs);
        d.k_scales = ks;
        d.v_scales = vs;
        if (!fixed && tc->bc.mut == SD_V_INT8_NO_SCALES)
            d.v_scales = NULL;
        if (!fixed && tc->bc.mut == SD_V_SCALES_SHORT)
            d.v_scales = tu_dev_alloc_exact(ctx, K_ROWS - 1, NULL);
        if (!fixed && tc->bc.mut == SD_K_SCALES_NOT_INT8)
            d.k_scales = stray_scales(ctx, K_ROWS);
        cl_mem out = tu_dev_alloc(ctx, N_O, NULL), lse = tu_dev_alloc(ctx, N_LSE, NULL);
        expect(clattn_sdpa(ctx, &d, q, k, v, NULL, out, NULL, lse), tc, fixed, ctx, ctx);
        if (!fixed) {
            check_dev_untouched(ctx, out, N_O + TU_GUARD, "out");
            check_dev_untouched(ctx, lse, N_LSE + TU_GUARD, "lse");
        }
    }
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* clattn_score and clattn_weighted_sum (typed since 0.6.1)                                        */
/* ---------------------------------------------------------------------------------------------- */

enum stage_mut { SC_K_ENUM, SC_K_INT8_NO_SCALES, SC_Q_INT8, WS_V_ENUM, WS_V_INT8_NO_SCALES, WS_OUT_INT8 };
static const type_case stage_cases[] = {
    {{SC_K_ENUM, IV, 0, "clattn_score: k_dtype 7 (outside the enum)"}, "k_dtype"},
    {{SC_K_INT8_NO_SCALES, NA, 0, "clattn_score: int8 K without k_scales"}, "k_scales"},
    {{SC_Q_INT8, IV, 0, "clattn_score: int8 Q"}, "q_dtype"},
    {{WS_V_ENUM, IV, 0, "clattn_weighted_sum: v_dtype -1 (outside the enum)"}, "v_dtype"},
    {{WS_V_INT8_NO_SCALES, NA, 0, "clattn_weighted_sum: int8 V without v_scales"}, "v_scales"},
    {{WS_OUT_INT8, IV, 0, "clattn_weighted_sum: int8 output"}, "out_dtype"},
};
#define N_STAGE (sizeof stage_cases / sizeof stage_cases[0])

START_TEST(test_stages)
{
    const type_case *tc = &stage_cases[TU_CASE(_i)];
    const size_t dev = TU_DEVICE(_i);
    clattn_context *ctx = tu_ctx[dev];
    const int mut = tc->bc.mut;
    for (int fixed = 0; fixed < 2; fixed++) {
        set_label(mut < WS_V_ENUM ? "clattn_score" : "clattn_weighted_sum", tc, fixed, dev);
        clattn_sdpa_desc d = tu_sdpa_desc(BATCH, HEADS, QLEN, KVLEN, HDIM, 0);
        switch (mut) {
        case SC_K_ENUM: d.k_dtype = fixed ? F32 : OUTSIDE_HIGH; break;
        case SC_K_INT8_NO_SCALES: d.k_dtype = I8; break;
        case SC_Q_INT8: d.q_dtype = fixed ? F32 : I8; break;
        case WS_V_ENUM: d.v_dtype = fixed ? F32 : OUTSIDE_LOW; break;
        case WS_V_INT8_NO_SCALES: d.v_dtype = I8; break;
        case WS_OUT_INT8: d.out_dtype = fixed ? F32 : I8; break;
        default: ck_abort_msg("unknown case");
        }
        cl_mem scales;
        if (mut < WS_V_ENUM) {
            cl_mem q = input(ctx, F32, N_Q, HDIM, 11, NULL), k = input(ctx, d.k_dtype, N_K, HDIM, 12, &scales);
            d.k_scales = fixed || mut != SC_K_INT8_NO_SCALES ? scales : NULL;
            cl_mem scores = tu_dev_alloc(ctx, N_W, NULL);
            expect(clattn_score(ctx, &d, q, k, NULL, scores), tc, fixed, ctx, ctx);
            if (!fixed)
                check_dev_untouched(ctx, scores, N_W + TU_GUARD, "scores");
        } else {
            float p[N_W];
            tu_fill_uniform(p, N_W, 0.5f, 13);
            cl_mem w = tu_dev_alloc_exact(ctx, N_W, p), v = input(ctx, d.v_dtype, N_K, HDIM, 14, &scales);
            d.v_scales = fixed || mut != WS_V_INT8_NO_SCALES ? scales : NULL;
            cl_mem out = tu_dev_alloc(ctx, N_O, NULL);
            expect(clattn_weighted_sum(ctx, &d, w, v, out), tc, fixed, ctx, ctx);
            if (!fixed)
                check_dev_untouched(ctx, out, N_O + TU_GUARD, "out");
        }
    }
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* clattn_merge                                                                                    */
/* ---------------------------------------------------------------------------------------------- */

enum merge_mut { M_OUT_ENUM, M_OUT_INT8 };
static const type_case merge_cases[] = {
    {{M_OUT_ENUM, IV, 0, "out_dtype 9 (outside the enum)"}, "out_dtype"},
    {{M_OUT_INT8, IV, 0, "int8 out_dtype"}, "out_dtype"},
};
#define N_MERGE (sizeof merge_cases / sizeof merge_cases[0])

START_TEST(test_merge)
{
    const type_case *tc = &merge_cases[TU_CASE(_i)];
    const size_t dev = TU_DEVICE(_i);
    clattn_context *ctx = tu_ctx[dev];
    for (int fixed = 0; fixed < 2; fixed++) {
        set_label("clattn_merge", tc, fixed, dev);
        clattn_sdpa_desc d = tu_sdpa_desc(BATCH, HEADS, QLEN, 0, 0, HDIM);
        d.out_dtype = fixed ? F32 : tc->bc.mut == M_OUT_ENUM ? (clattn_dtype)9 : I8;
        const cl_mem outs[2] = {input(ctx, F32, N_O, HDIM, 21, NULL), input(ctx, F32, N_O, HDIM, 22, NULL)};
        const cl_mem lses[2] = {input(ctx, F32, N_LSE, 1, 23, NULL), input(ctx, F32, N_LSE, 1, 24, NULL)};
        cl_mem out = tu_dev_alloc(ctx, N_O, NULL), lse = tu_dev_alloc(ctx, N_LSE, NULL);
        expect(clattn_merge(ctx, &d, 2, outs, lses, out, lse), tc, fixed, ctx, ctx);
        if (!fixed) {
            check_dev_untouched(ctx, out, N_O + TU_GUARD, "out");
            check_dev_untouched(ctx, lse, N_LSE + TU_GUARD, "lse");
        }
    }
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* clattn_kv_append and clattn_kv_append_paged                                                     */
/* ---------------------------------------------------------------------------------------------- */

/* A paged cache: PAGE_BLOCKS blocks of PAGE_SIZE rows, PAGE_MAX blocks per sequence. */
enum { PAGE_BLOCKS = 3, PAGE_SIZE = 8, PAGE_MAX = 2, PAGE_ROWS = PAGE_BLOCKS * HEADS * PAGE_SIZE };
enum { NEW_LEN = 2, N_NEW = BATCH * HEADS * NEW_LEN * HDIM };

enum append_api { API_APPEND, API_APPEND_PAGED };
static const char *const append_names[] = {"clattn_kv_append", "clattn_kv_append_paged"};

/* (The int8 case has int8 K and V caches, V's scales given.) */
enum append_mut { A_K_ENUM, A_K_INT8_NO_SCALES, A_Q_INT8 };
static const type_case append_cases[] = {
    {{A_K_ENUM, IV, 0, "k_dtype 7 (outside the enum)"}, "k_dtype"},
    {{A_K_INT8_NO_SCALES, NA, 0, "int8 cache without k_scales"}, "k_scales"},
    {{A_Q_INT8, IV, 0, "int8 new rows (q_dtype)"}, "q_dtype"},
};
#define N_APPEND (sizeof append_cases / sizeof append_cases[0])

/* A block table of PAGE_MAX ids per sequence, on the device. */
/* The paged cache of these cases: pools k and v, the sequence's blocks 2 and 0. */
static clattn_paged_cache paged_cache(clattn_context *ctx, cl_mem k, cl_mem v)
{
    const cl_int table[BATCH * PAGE_MAX] = {2, 0};
    cl_int err;
    cl_mem m = clCreateBuffer(clattn_context_cl_context(ctx), CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof table,
                              (void *)table, &err);
    ck_assert_msg(err == CL_SUCCESS, "%s: clCreateBuffer(block table): %d", tu_label(), (int)err);
    tu_track_mem(m);
    clattn_paged_cache c = CLATTN_PAGED_CACHE_INIT;
    c.k_pool = k;
    c.v_pool = v;
    c.blocks = PAGE_BLOCKS;
    c.block_size = PAGE_SIZE;
    c.max_blocks = PAGE_MAX;
    c.block_table = m;
    return c;
}

START_TEST(test_append)
{
    const size_t api = TU_CASE(_i) / N_APPEND;
    const type_case *tc = &append_cases[TU_CASE(_i) % N_APPEND];
    const size_t dev = TU_DEVICE(_i);
    clattn_context *ctx = tu_ctx[dev];
    for (int fixed = 0; fixed < 2; fixed++) {
        set_label(append_names[api], tc, fixed, dev);
        clattn_sdpa_desc d = tu_sdpa_desc(BATCH, HEADS, 1, KVLEN, HDIM, 0); /* kv_len: the dense capacity */
        switch (tc->bc.mut) {
        case A_K_ENUM: d.k_dtype = fixed ? F32 : OUTSIDE_HIGH; break;
        case A_K_INT8_NO_SCALES: d.k_dtype = d.v_dtype = I8; break;
        case A_Q_INT8: d.q_dtype = fixed ? F32 : I8; break;
        default: ck_abort_msg("unknown case");
        }
        const size_t rows = api == API_APPEND ? K_ROWS : PAGE_ROWS;
        cl_mem ks, vs;
        cl_mem kc = output_cache(ctx, d.k_dtype, rows, &ks), vc = output_cache(ctx, d.v_dtype, rows, &vs);
        d.k_scales = fixed || tc->bc.mut != A_K_INT8_NO_SCALES ? ks : NULL;
        d.v_scales = vs;
        cl_mem k_new = input(ctx, F32, N_NEW, HDIM, 31, NULL), v_new = input(ctx, F32, N_NEW, HDIM, 32, NULL);
        clattn_status st;
        if (api == API_APPEND) {
            const size_t lengths[BATCH] = {3};
            st = clattn_kv_append(ctx, &d, lengths, NEW_LEN, k_new, v_new, kc, vc);
        } else {
            const clattn_paged_cache c = paged_cache(ctx, kc, vc);
            const size_t lengths[BATCH] = {5};
            st = clattn_kv_append_paged(ctx, &d, &c, lengths, NEW_LEN, k_new, v_new);
        }
        expect(st, tc, fixed, ctx, ctx);
        if (!fixed) {
            check_dev_untouched(ctx, kc, cache_floats(d.k_dtype, rows), "the K cache");
            check_dev_untouched(ctx, vc, cache_floats(d.v_dtype, rows), "the V cache");
            check_dev_untouched(ctx, ks, rows, "k_scales");
            check_dev_untouched(ctx, vs, rows, "v_scales");
        }
    }
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* clattn_sdpa_paged and clattn_sdpa_ragged                                                        */
/* ---------------------------------------------------------------------------------------------- */

enum decode_api { API_PAGED, API_RAGGED };
static const char *const decode_names[] = {"clattn_sdpa_paged", "clattn_sdpa_ragged"};

/* (The int8 case has int8 K and V, V's scales given.) */
enum decode_mut { P_K_INT8_NO_SCALES, P_OUT_ENUM };
static const type_case decode_cases[] = {
    {{P_K_INT8_NO_SCALES, NA, 0, "int8 K without k_scales"}, "k_scales"},
    {{P_OUT_ENUM, IV, 0, "out_dtype 7 (outside the enum)"}, "out_dtype"},
};
#define N_DECODE (sizeof decode_cases / sizeof decode_cases[0])

START_TEST(test_decode)
{
    const size_t api = TU_CASE(_i) / N_DECODE;
    const type_case *tc = &decode_cases[TU_CASE(_i) % N_DECODE];
    const size_t dev = TU_DEVICE(_i);
    clattn_context *ctx = tu_ctx[dev];
    for (int fixed = 0; fixed < 2; fixed++) {
        set_label(decode_names[api], tc, fixed, dev);
        /* Ragged: two sequences of 1 and 2 queries, 4 and 6 keys, packed into the dense call's sizes. */
        clattn_sdpa_desc d = api == API_PAGED ? tu_sdpa_desc(BATCH, HEADS, QLEN, 0, HDIM, 0)
                                              : tu_sdpa_desc(2, HEADS, 0, 0, HDIM, 0);
        switch (tc->bc.mut) {
        case P_K_INT8_NO_SCALES: d.k_dtype = d.v_dtype = I8; break;
        case P_OUT_ENUM: d.out_dtype = fixed ? F32 : OUTSIDE_HIGH; break;
        default: ck_abort_msg("unknown case");
        }
        const size_t kn = (api == API_PAGED ? PAGE_ROWS : K_ROWS) * HDIM;
        cl_mem ks, vs;
        cl_mem q = input(ctx, F32, N_Q, HDIM, 41, NULL), k = input(ctx, d.k_dtype, kn, HDIM, 42, &ks),
               v = input(ctx, d.v_dtype, kn, HDIM, 43, &vs);
        d.k_scales = fixed || tc->bc.mut != P_K_INT8_NO_SCALES ? ks : NULL;
        d.v_scales = vs;
        cl_mem out = tu_dev_alloc(ctx, N_O, NULL), lse = tu_dev_alloc(ctx, N_LSE, NULL);
        clattn_status st;
        if (api == API_PAGED) {
            const clattn_paged_cache c = paged_cache(ctx, k, v);
            const size_t lengths[BATCH] = {KVLEN};
            st = clattn_sdpa_paged(ctx, &d, &c, lengths, q, NULL, out, lse);
        } else {
            const size_t q_starts[3] = {0, 1, QLEN}, k_starts[3] = {0, 4, KVLEN};
            clattn_ragged r = CLATTN_RAGGED_INIT;
            r.q_starts = q_starts;
            r.k_starts = k_starts;
            st = clattn_sdpa_ragged(ctx, &d, &r, q, k, v, NULL, out, lse);
        }
        expect(st, tc, fixed, ctx, ctx);
        if (!fixed) {
            check_dev_untouched(ctx, out, N_O + TU_GUARD, "out");
            check_dev_untouched(ctx, lse, N_LSE + TU_GUARD, "lse");
        }
    }
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* clattn_sdpa_with_past and clattn_sdpa_with_past_host: no int8 K/V                               */
/* ---------------------------------------------------------------------------------------------- */

enum { PAST = 4, NEW_KV = KVLEN - PAST, N_PAST = BATCH * HEADS * PAST * HDIM, N_NEW_KV = N_K - N_PAST };

enum past_api { API_PAST, API_PAST_HOST };
static const char *const past_names[] = {"clattn_sdpa_with_past", "clattn_sdpa_with_past_host"};

/* The past/present form refuses int8 itself, with its scales or without them. */
enum past_mut { W_K_INT8, W_V_INT8, W_V_INT8_NO_SCALES };
static const type_case past_cases[] = {
    {{W_K_INT8, IV, 0, "int8 K (with k_scales)"}, "k_dtype"},
    {{W_V_INT8, IV, 0, "int8 V (with v_scales)"}, "v_dtype"},
    {{W_V_INT8_NO_SCALES, IV, 0, "int8 V without v_scales"}, "v_dtype"},
};
#define N_PAST_CASES (sizeof past_cases / sizeof past_cases[0])

START_TEST(test_past)
{
    const size_t api = TU_CASE(_i) / N_PAST_CASES;
    const type_case *tc = &past_cases[TU_CASE(_i) % N_PAST_CASES];
    const size_t dev = TU_DEVICE(_i);
    clattn_context *ctx = tu_ctx[dev];
    for (int fixed = 0; fixed < 2; fixed++) {
        set_label(past_names[api], tc, fixed, dev);
        clattn_sdpa_desc d = tu_sdpa_desc(BATCH, HEADS, QLEN, NEW_KV, HDIM, 0);
        if (!fixed && tc->bc.mut == W_K_INT8) {
            d.k_dtype = I8;
            d.k_scales = stray_scales(ctx, K_ROWS);
        }
        if (!fixed && tc->bc.mut == W_V_INT8) {
            d.v_dtype = I8;
            d.v_scales = stray_scales(ctx, K_ROWS);
        }
        if (!fixed && tc->bc.mut == W_V_INT8_NO_SCALES)
            d.v_dtype = I8;
        const float *hq = host_input(N_Q, 51), *hpk = host_input(N_PAST, 52), *hpv = host_input(N_PAST, 53),
                    *hk = host_input(N_NEW_KV, 54), *hv = host_input(N_NEW_KV, 55);
        clattn_status st;
        if (api == API_PAST) {
            cl_mem pk = tu_dev_alloc(ctx, N_K, NULL), pv = tu_dev_alloc(ctx, N_K, NULL),
                   out = tu_dev_alloc(ctx, N_O, NULL), lse = tu_dev_alloc(ctx, N_LSE, NULL);
            st = clattn_sdpa_with_past(ctx, &d, PAST, tu_dev_alloc_exact(ctx, N_PAST, hpk),
                                       tu_dev_alloc_exact(ctx, N_PAST, hpv), tu_dev_alloc_exact(ctx, N_Q, hq),
                                       tu_dev_alloc_exact(ctx, N_NEW_KV, hk), tu_dev_alloc_exact(ctx, N_NEW_KV, hv),
                                       NULL, pk, pv, out, NULL, lse);
            expect(st, tc, fixed, ctx, ctx);
            if (!fixed) {
                check_dev_untouched(ctx, pk, N_K + TU_GUARD, "present_k");
                check_dev_untouched(ctx, pv, N_K + TU_GUARD, "present_v");
                check_dev_untouched(ctx, out, N_O + TU_GUARD, "out");
                check_dev_untouched(ctx, lse, N_LSE + TU_GUARD, "lse");
            }
        } else {
            float *pk = tu_host_alloc(N_K, NULL), *pv = tu_host_alloc(N_K, NULL), *out = tu_host_alloc(N_O, NULL),
                  *lse = tu_host_alloc(N_LSE, NULL);
            st = clattn_sdpa_with_past_host(ctx, &d, PAST, hpk, hpv, hq, hk, hv, NULL, pk, pv, out, NULL, lse);
            expect(st, tc, fixed, NULL, ctx);
            if (!fixed) {
                check_host_untouched(pk, N_K, "present_k");
                check_host_untouched(pv, N_K, "present_v");
                check_host_untouched(out, N_O, "out");
                check_host_untouched(lse, N_LSE, "lse");
            }
        }
    }
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* clattn_sdpa_host: no int8 K/V                                                                   */
/* ---------------------------------------------------------------------------------------------- */

/* An int8 K or V is refused by the host variant itself (INVALID_VALUE naming the type), with its scales
 * or without them (the host check comes first: it does not ask for scales it would refuse). */
enum host_mut { HO_K_INT8, HO_V_INT8, HO_K_INT8_NO_SCALES };
static const type_case host_cases[] = {
    {{HO_K_INT8, IV, 0, "int8 K (with k_scales)"}, "k_dtype"},
    {{HO_V_INT8, IV, 0, "int8 V (with v_scales)"}, "v_dtype"},
    {{HO_K_INT8_NO_SCALES, IV, 0, "int8 K without k_scales"}, "k_dtype"},
};
#define N_HOST (sizeof host_cases / sizeof host_cases[0])

START_TEST(test_host)
{
    const type_case *tc = &host_cases[TU_CASE(_i)];
    const size_t dev = TU_DEVICE(_i);
    clattn_context *ctx = tu_ctx[dev];
    for (int fixed = 0; fixed < 2; fixed++) {
        set_label("clattn_sdpa_host", tc, fixed, dev);
        clattn_sdpa_desc d = tu_sdpa_desc(BATCH, HEADS, QLEN, KVLEN, HDIM, 0);
        if (!fixed) {
            switch (tc->bc.mut) {
            case HO_K_INT8: d.k_dtype = I8; d.k_scales = stray_scales(ctx, K_ROWS); break;
            case HO_V_INT8: d.v_dtype = I8; d.v_scales = stray_scales(ctx, K_ROWS); break;
            case HO_K_INT8_NO_SCALES: d.k_dtype = I8; break;
            default: ck_abort_msg("unknown case");
            }
        }
        float *out = tu_host_alloc(N_O, NULL), *lse = tu_host_alloc(N_LSE, NULL);
        clattn_status st = clattn_sdpa_host(ctx, &d, host_input(N_Q, 61), host_input(N_K, 62), host_input(N_K, 63),
                                            NULL, out, NULL, lse);
        expect(st, tc, fixed, NULL, ctx);
        if (!fixed) {
            check_host_untouched(out, N_O, "out");
            check_host_untouched(lse, N_LSE, "lse");
        }
    }
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* clattn_mha and clattn_mha_host                                                                  */
/* ---------------------------------------------------------------------------------------------- */

/* Self-attention, model_dim 8, two heads of 4, no W_O: out (B, L, 8), attention weights (B, H, L, L). */
enum {
    MODEL = 8, MQK = 4, N_X = BATCH * QLEN * MODEL, N_WQ = MODEL * HEADS * MQK, N_Y = BATCH * QLEN * HEADS * MQK,
    N_ATT = BATCH * HEADS * QLEN * QLEN,
};

enum mha_api { API_MHA, API_MHA_HOST };
static const char *const mha_names[] = {"clattn_mha", "clattn_mha_host"};

enum mha_mut { MH_X_ENUM, MH_W_ENUM, MH_O_ENUM, MH_X_INT8, MH_W_INT8, MH_O_INT8, MH_RESERVED };
static const type_case mha_cases[] = {
    {{MH_X_ENUM, IV, 0, "x_dtype 7 (outside the enum)"}, "x_dtype"},
    {{MH_W_ENUM, IV, 0, "weight_dtype -1 (outside the enum)"}, "weight_dtype"},
    {{MH_O_ENUM, IV, 0, "out_dtype 4 (outside the enum)"}, "out_dtype"},
    {{MH_X_INT8, IV, 0, "int8 x_dtype"}, "x_dtype"},
    {{MH_W_INT8, IV, 0, "int8 weight_dtype"}, "weight_dtype"},
    {{MH_O_INT8, IV, 0, "int8 out_dtype"}, "out_dtype"},
    {{MH_RESERVED, IV, 0, "dtype_reserved 1"}, "dtype_reserved"},
};
#define N_MHA (sizeof mha_cases / sizeof mha_cases[0])

/* The layer's descriptor, all float32. */
static clattn_mha_desc mha_desc(void)
{
    clattn_mha_desc d = CLATTN_MHA_DESC_INIT;
    d.batch = BATCH;
    d.q_len = QLEN;
    d.model_dim = MODEL;
    d.heads = HEADS;
    d.qk_dim = MQK;
    return d;
}

START_TEST(test_mha)
{
    const size_t api = TU_CASE(_i) / N_MHA;
    const type_case *tc = &mha_cases[TU_CASE(_i) % N_MHA];
    const size_t dev = TU_DEVICE(_i);
    clattn_context *ctx = tu_ctx[dev];
    for (int fixed = 0; fixed < 2; fixed++) {
        set_label(mha_names[api], tc, fixed, dev);
        clattn_mha_desc d = mha_desc();
        switch (tc->bc.mut) {
        case MH_X_ENUM: d.x_dtype = fixed ? F32 : OUTSIDE_HIGH; break;
        case MH_W_ENUM: d.weight_dtype = fixed ? F32 : OUTSIDE_LOW; break;
        case MH_O_ENUM: d.out_dtype = fixed ? F32 : (clattn_dtype)4; break;
        case MH_X_INT8: d.x_dtype = fixed ? F32 : I8; break;
        case MH_W_INT8: d.weight_dtype = fixed ? F32 : I8; break;
        case MH_O_INT8: d.out_dtype = fixed ? F32 : I8; break;
        case MH_RESERVED: d.dtype_reserved = fixed ? 0 : 1; break;
        default: ck_abort_msg("unknown case");
        }
        const float *hx = host_input(N_X, 71), *hwq = host_input(N_WQ, 72), *hwk = host_input(N_WQ, 73),
                    *hwv = host_input(N_WQ, 74);
        if (api == API_MHA) {
            clattn_mha_weights w = CLATTN_MHA_WEIGHTS_INIT;
            w.w_q = tu_dev_alloc_exact(ctx, N_WQ, hwq);
            w.w_k = tu_dev_alloc_exact(ctx, N_WQ, hwk);
            w.w_v = tu_dev_alloc_exact(ctx, N_WQ, hwv);
            cl_mem out = tu_dev_alloc(ctx, N_Y, NULL), att = tu_dev_alloc(ctx, N_ATT, NULL);
            expect(clattn_mha(ctx, &d, tu_dev_alloc_exact(ctx, N_X, hx), NULL, &w, NULL, out, att), tc, fixed, ctx,
                   ctx);
            if (!fixed) {
                check_dev_untouched(ctx, out, N_Y + TU_GUARD, "out");
                check_dev_untouched(ctx, att, N_ATT + TU_GUARD, "attn_weights");
            }
        } else {
            clattn_mha_host_weights w = CLATTN_MHA_HOST_WEIGHTS_INIT;
            w.w_q = hwq;
            w.w_k = hwk;
            w.w_v = hwv;
            float *out = tu_host_alloc(N_Y, NULL), *att = tu_host_alloc(N_ATT, NULL);
            expect(clattn_mha_host(ctx, &d, hx, NULL, &w, NULL, out, att), tc, fixed, NULL, ctx);
            if (!fixed) {
                check_host_untouched(out, N_Y, "out");
                check_host_untouched(att, N_ATT, "attn_weights");
            }
        }
    }
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* clattn_group_sdpa_host and clattn_group_mha_host: float32 tensors only                          */
/* ---------------------------------------------------------------------------------------------- */

/* One group per device (the group's own context), made at first use and freed by main. */
static clattn_group *groups[TU_MAX_DEVICES];

static clattn_group *group_on(size_t dev)
{
    if (!groups[dev]) {
        clattn_status st = clattn_group_create(&groups[dev], tu_dev_spec[dev]);
        TU_ASSERT_OK(st, NULL, "clattn_group_create");
    }
    return groups[dev];
}

/* group.c refuses every type but float32, naming the first such field. Details of group calls are
 * clattn_last_error(NULL)'s. */
enum group_mut { G_SDPA_Q_F16, G_SDPA_K_INT8, G_SDPA_V_INT8_NO_SCALES, G_MHA_X_F16, G_MHA_W_BF16, G_MHA_O_F16 };
static const type_case group_cases[] = {
    {{G_SDPA_Q_F16, IV, 0, "clattn_group_sdpa_host: float16 q_dtype"}, "q_dtype"},
    {{G_SDPA_K_INT8, IV, 0, "clattn_group_sdpa_host: int8 K (with k_scales)"}, "k_dtype"},
    {{G_SDPA_V_INT8_NO_SCALES, IV, 0, "clattn_group_sdpa_host: int8 V without v_scales"}, "v_dtype"},
    {{G_MHA_X_F16, IV, 0, "clattn_group_mha_host: float16 x_dtype"}, "x_dtype"},
    {{G_MHA_W_BF16, IV, 0, "clattn_group_mha_host: bfloat16 weight_dtype"}, "weight_dtype"},
    {{G_MHA_O_F16, IV, 0, "clattn_group_mha_host: float16 out_dtype"}, "out_dtype"},
};
#define N_GROUP (sizeof group_cases / sizeof group_cases[0])

START_TEST(test_group)
{
    const type_case *tc = &group_cases[TU_CASE(_i)];
    const size_t dev = TU_DEVICE(_i);
    const int mut = tc->bc.mut;
    for (int fixed = 0; fixed < 2; fixed++) {
        set_label(mut < G_MHA_X_F16 ? "clattn_group_sdpa_host" : "clattn_group_mha_host", tc, fixed, dev);
        clattn_group *g = group_on(dev);
        clattn_status st;
        if (mut < G_MHA_X_F16) {
            clattn_sdpa_desc d = tu_sdpa_desc(BATCH, HEADS, QLEN, KVLEN, HDIM, 0);
            if (!fixed && mut == G_SDPA_Q_F16)
                d.q_dtype = F16;
            if (!fixed && mut == G_SDPA_K_INT8) {
                d.k_dtype = I8;
                d.k_scales = stray_scales(clattn_group_context(g, 0), K_ROWS);
            }
            if (!fixed && mut == G_SDPA_V_INT8_NO_SCALES)
                d.v_dtype = I8;
            float *out = tu_host_alloc(N_O, NULL), *lse = tu_host_alloc(N_LSE, NULL);
            st = clattn_group_sdpa_host(g, &d, host_input(N_Q, 81), host_input(N_K, 82), host_input(N_K, 83), NULL,
                                        out, lse);
            expect(st, tc, fixed, NULL, NULL);
            if (!fixed) {
                check_host_untouched(out, N_O, "out");
                check_host_untouched(lse, N_LSE, "lse");
            }
        } else {
            clattn_mha_desc d = mha_desc();
            if (!fixed && mut == G_MHA_X_F16)
                d.x_dtype = F16;
            if (!fixed && mut == G_MHA_W_BF16)
                d.weight_dtype = BF16;
            if (!fixed && mut == G_MHA_O_F16)
                d.out_dtype = F16;
            clattn_mha_host_weights w = CLATTN_MHA_HOST_WEIGHTS_INIT;
            w.w_q = host_input(N_WQ, 84);
            w.w_k = host_input(N_WQ, 85);
            w.w_v = host_input(N_WQ, 86);
            float *out = tu_host_alloc(N_Y, NULL);
            st = clattn_group_mha_host(g, &d, host_input(N_X, 87), NULL, &w, NULL, out);
            expect(st, tc, fixed, NULL, NULL);
            if (!fixed)
                check_host_untouched(out, N_Y, "out");
        }
    }
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */

static Suite *make_suite(void)
{
    Suite *s = suite_create("validation_dtypes");
    tu_add_loop(s, "sdpa", test_sdpa, N_SDPA * tu_ndev);
    tu_add_loop(s, "stages", test_stages, N_STAGE * tu_ndev);
    tu_add_loop(s, "merge", test_merge, N_MERGE * tu_ndev);
    tu_add_loop(s, "append", test_append, 2 * N_APPEND * tu_ndev);
    tu_add_loop(s, "paged_ragged", test_decode, 2 * N_DECODE * tu_ndev);
    tu_add_loop(s, "with_past", test_past, 2 * N_PAST_CASES * tu_ndev);
    tu_add_loop(s, "sdpa_host", test_host, N_HOST * tu_ndev);
    tu_add_loop(s, "mha", test_mha, 2 * N_MHA * tu_ndev);
    tu_add_loop(s, "group", test_group, N_GROUP * tu_ndev);
    return s;
}

int main(void)
{
    const int rc = tu_main(make_suite);
    for (size_t i = 0; i < TU_MAX_DEVICES; i++)
        clattn_group_free(groups[i]);
    return rc;
}
