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

/* What one call on device `dev` leaves to check: the outputs a refused call must leave as they were (device buffers of
 * ctx, or tu_host_alloc arrays, with the floats to look at), the context whose work the corrected call
 * finishes (NULL: a host call) and the one whose clattn_last_error names the field (NULL: this thread's). */
typedef struct outputs {
    struct {
        cl_mem dev;
        const float *host;
        size_t n;
        const char *name;
    } o[4];
    size_t count, dev;
    clattn_context *ctx, *finish;
    const clattn_context *err;
} outputs;

static void keep(outputs *o, cl_mem dev, const float *host, size_t n, const char *name)
{
    ck_assert(o->count < sizeof o->o / sizeof o->o[0]);
    o->o[o->count].dev = dev;
    o->o[o->count].host = host;
    o->o[o->count].n = n;
    o->o[o->count++].name = name;
}

/* A device output of n floats and the guard, all sentinel, kept for the check. */
static cl_mem dev_out(outputs *o, size_t n, const char *name)
{
    cl_mem m = tu_dev_alloc(o->ctx, n, NULL);
    keep(o, m, NULL, n + TU_GUARD, name);
    return m;
}

/* A host output of n floats (tu_host_alloc: sentinel, the guard after), kept for the check. */
static float *host_out(outputs *o, size_t n, const char *name)
{
    float *p = tu_host_alloc(n, NULL);
    keep(o, NULL, p, n, name);
    return p;
}

/* The bad call (fixed 0) must be refused as tc says, with a detail in clattn_last_error(o->err) that
 * names tc->field, and write none of o's outputs; its corrected twin (fixed 1) must succeed, and its work
 * finish on o->finish (when given). */
static void expect(clattn_status st, const type_case *tc, int fixed, const outputs *o)
{
    if (fixed) {
        TU_ASSERT_OK(st, o->err, "the corrected call");
        if (o->finish)
            tu_finish(o->finish);
        return;
    }
    check_status(st, &tc->bc, o->err);
    const char *e = clattn_last_error(o->err);
    ck_assert_msg(strstr(e, tc->field) != NULL, "%s: the detail \"%s\" does not name %s", tu_label(), e, tc->field);
    for (size_t i = 0; i < o->count; i++)
        if (o->o[i].host)
            check_host_untouched(o->o[i].host, o->o[i].n, o->o[i].name);
        else
            check_dev_untouched(o->ctx, o->o[i].dev, o->o[i].n, o->o[i].name);
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

/* A cache (an output) of `rows` rows of HDIM elements of `type`, all sentinel, kept for the check; an
 * int8 one's scales, sentinel too and kept, in *scales (else NULL). */
static cl_mem output_cache(outputs *o, clattn_dtype type, size_t rows, cl_mem *scales, const char *name,
                           const char *scales_name)
{
    *scales = stored(type) == I8 ? tu_dev_alloc_exact(o->ctx, rows, NULL) : NULL;
    cl_mem m = tu_dev_alloc_exact(o->ctx, cache_floats(type, rows), NULL);
    keep(o, m, NULL, cache_floats(type, rows), name);
    keep(o, *scales, NULL, rows, scales_name);
    return m;
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

static clattn_status call_sdpa(size_t api, int mut, int fixed, outputs *o)
{
    (void)api;
    clattn_context *ctx = o->ctx;
    clattn_sdpa_desc d = tu_sdpa_desc(BATCH, HEADS, QLEN, KVLEN, HDIM, 0);
    switch (mut) {
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
    if (!fixed && mut == SD_V_INT8_NO_SCALES)
        d.v_scales = NULL;
    if (!fixed && mut == SD_V_SCALES_SHORT)
        d.v_scales = tu_dev_alloc_exact(ctx, K_ROWS - 1, NULL);
    if (!fixed && mut == SD_K_SCALES_NOT_INT8)
        d.k_scales = stray_scales(ctx, K_ROWS);
    cl_mem out = dev_out(o, N_O, "out"), lse = dev_out(o, N_LSE, "lse");
    return clattn_sdpa(ctx, &d, q, k, v, NULL, out, NULL, lse);
}

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

static clattn_status call_stages(size_t api, int mut, int fixed, outputs *o)
{
    (void)api;
    clattn_context *ctx = o->ctx;
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
        return clattn_score(ctx, &d, q, k, NULL, dev_out(o, N_W, "scores"));
    }
    float p[N_W];
    tu_fill_uniform(p, N_W, 0.5f, 13);
    cl_mem w = tu_dev_alloc_exact(ctx, N_W, p), v = input(ctx, d.v_dtype, N_K, HDIM, 14, &scales);
    d.v_scales = fixed || mut != WS_V_INT8_NO_SCALES ? scales : NULL;
    return clattn_weighted_sum(ctx, &d, w, v, dev_out(o, N_O, "out"));
}

/* ---------------------------------------------------------------------------------------------- */
/* clattn_merge                                                                                    */
/* ---------------------------------------------------------------------------------------------- */

enum merge_mut { M_OUT_ENUM, M_OUT_INT8 };
static const type_case merge_cases[] = {
    {{M_OUT_ENUM, IV, 0, "out_dtype 9 (outside the enum)"}, "out_dtype"},
    {{M_OUT_INT8, IV, 0, "int8 out_dtype"}, "out_dtype"},
};

static clattn_status call_merge(size_t api, int mut, int fixed, outputs *o)
{
    (void)api;
    clattn_context *ctx = o->ctx;
    clattn_sdpa_desc d = tu_sdpa_desc(BATCH, HEADS, QLEN, 0, 0, HDIM);
    d.out_dtype = fixed ? F32 : mut == M_OUT_ENUM ? (clattn_dtype)9 : I8;
    const cl_mem outs[2] = {input(ctx, F32, N_O, HDIM, 21, NULL), input(ctx, F32, N_O, HDIM, 22, NULL)};
    const cl_mem lses[2] = {input(ctx, F32, N_LSE, 1, 23, NULL), input(ctx, F32, N_LSE, 1, 24, NULL)};
    cl_mem out = dev_out(o, N_O, "out"), lse = dev_out(o, N_LSE, "lse");
    return clattn_merge(ctx, &d, 2, outs, lses, out, lse);
}

/* ---------------------------------------------------------------------------------------------- */
/* clattn_kv_append and clattn_kv_append_paged                                                     */
/* ---------------------------------------------------------------------------------------------- */

/* A paged cache: PAGE_BLOCKS blocks of PAGE_SIZE rows, PAGE_MAX blocks per sequence. */
enum { PAGE_BLOCKS = 3, PAGE_SIZE = 8, PAGE_MAX = 2, PAGE_ROWS = PAGE_BLOCKS * HEADS * PAGE_SIZE };
enum { NEW_LEN = 2, N_NEW = BATCH * HEADS * NEW_LEN * HDIM };

enum append_api { API_APPEND, API_APPEND_PAGED };

/* (The int8 case has int8 K and V caches, V's scales given.) */
enum append_mut { A_K_ENUM, A_K_INT8_NO_SCALES, A_Q_INT8 };
static const type_case append_cases[] = {
    {{A_K_ENUM, IV, 0, "k_dtype 7 (outside the enum)"}, "k_dtype"},
    {{A_K_INT8_NO_SCALES, NA, 0, "int8 cache without k_scales"}, "k_scales"},
    {{A_Q_INT8, IV, 0, "int8 new rows (q_dtype)"}, "q_dtype"},
};

/* The paged cache of these cases: pools k and v, the sequence's blocks 2 and 0 (a block table of PAGE_MAX
 * ids per sequence, on the device). */
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

static clattn_status call_append(size_t api, int mut, int fixed, outputs *o)
{
    clattn_context *ctx = o->ctx;
    clattn_sdpa_desc d = tu_sdpa_desc(BATCH, HEADS, 1, KVLEN, HDIM, 0); /* kv_len: the dense capacity */
    switch (mut) {
    case A_K_ENUM: d.k_dtype = fixed ? F32 : OUTSIDE_HIGH; break;
    case A_K_INT8_NO_SCALES: d.k_dtype = d.v_dtype = I8; break;
    case A_Q_INT8: d.q_dtype = fixed ? F32 : I8; break;
    default: ck_abort_msg("unknown case");
    }
    const size_t rows = api == API_APPEND ? K_ROWS : PAGE_ROWS;
    cl_mem ks, vs;
    cl_mem kc = output_cache(o, d.k_dtype, rows, &ks, "the K cache", "k_scales"),
           vc = output_cache(o, d.v_dtype, rows, &vs, "the V cache", "v_scales");
    d.k_scales = fixed || mut != A_K_INT8_NO_SCALES ? ks : NULL;
    d.v_scales = vs;
    cl_mem k_new = input(ctx, F32, N_NEW, HDIM, 31, NULL), v_new = input(ctx, F32, N_NEW, HDIM, 32, NULL);
    if (api == API_APPEND) {
        const size_t lengths[BATCH] = {3};
        return clattn_kv_append(ctx, &d, lengths, NEW_LEN, k_new, v_new, kc, vc);
    }
    const clattn_paged_cache c = paged_cache(ctx, kc, vc);
    const size_t lengths[BATCH] = {5};
    return clattn_kv_append_paged(ctx, &d, &c, lengths, NEW_LEN, k_new, v_new);
}

/* ---------------------------------------------------------------------------------------------- */
/* clattn_sdpa_paged and clattn_sdpa_ragged                                                        */
/* ---------------------------------------------------------------------------------------------- */

enum decode_api { API_PAGED, API_RAGGED };

/* (The int8 case has int8 K and V, V's scales given.) */
enum decode_mut { P_K_INT8_NO_SCALES, P_OUT_ENUM };
static const type_case decode_cases[] = {
    {{P_K_INT8_NO_SCALES, NA, 0, "int8 K without k_scales"}, "k_scales"},
    {{P_OUT_ENUM, IV, 0, "out_dtype 7 (outside the enum)"}, "out_dtype"},
};

static clattn_status call_decode(size_t api, int mut, int fixed, outputs *o)
{
    clattn_context *ctx = o->ctx;
    /* Ragged: two sequences of 1 and 2 queries, 4 and 6 keys, packed into the dense call's sizes. */
    clattn_sdpa_desc d = api == API_PAGED ? tu_sdpa_desc(BATCH, HEADS, QLEN, 0, HDIM, 0)
                                          : tu_sdpa_desc(2, HEADS, 0, 0, HDIM, 0);
    switch (mut) {
    case P_K_INT8_NO_SCALES: d.k_dtype = d.v_dtype = I8; break;
    case P_OUT_ENUM: d.out_dtype = fixed ? F32 : OUTSIDE_HIGH; break;
    default: ck_abort_msg("unknown case");
    }
    const size_t kn = (api == API_PAGED ? PAGE_ROWS : K_ROWS) * HDIM;
    cl_mem ks, vs;
    cl_mem q = input(ctx, F32, N_Q, HDIM, 41, NULL), k = input(ctx, d.k_dtype, kn, HDIM, 42, &ks),
           v = input(ctx, d.v_dtype, kn, HDIM, 43, &vs);
    d.k_scales = fixed || mut != P_K_INT8_NO_SCALES ? ks : NULL;
    d.v_scales = vs;
    cl_mem out = dev_out(o, N_O, "out"), lse = dev_out(o, N_LSE, "lse");
    if (api == API_PAGED) {
        const clattn_paged_cache c = paged_cache(ctx, k, v);
        const size_t lengths[BATCH] = {KVLEN};
        return clattn_sdpa_paged(ctx, &d, &c, lengths, q, NULL, out, lse);
    }
    const size_t q_starts[3] = {0, 1, QLEN}, k_starts[3] = {0, 4, KVLEN};
    clattn_ragged r = CLATTN_RAGGED_INIT;
    r.q_starts = q_starts;
    r.k_starts = k_starts;
    return clattn_sdpa_ragged(ctx, &d, &r, q, k, v, NULL, out, lse);
}

/* ---------------------------------------------------------------------------------------------- */
/* clattn_sdpa_with_past and clattn_sdpa_with_past_host: no int8 K/V                               */
/* ---------------------------------------------------------------------------------------------- */

enum { PAST = 4, NEW_KV = KVLEN - PAST, N_PAST = BATCH * HEADS * PAST * HDIM, N_NEW_KV = N_K - N_PAST };

enum past_api { API_PAST, API_PAST_HOST };

/* The past/present form refuses int8 itself, with its scales or without them. */
enum past_mut { W_K_INT8, W_V_INT8, W_V_INT8_NO_SCALES };
static const type_case past_cases[] = {
    {{W_K_INT8, IV, 0, "int8 K (with k_scales)"}, "k_dtype"},
    {{W_V_INT8, IV, 0, "int8 V (with v_scales)"}, "v_dtype"},
    {{W_V_INT8_NO_SCALES, IV, 0, "int8 V without v_scales"}, "v_dtype"},
};

/* An int8 K or V (`k`: K), with stray scales or (`scales` 0) without them. */
static void make_int8(clattn_context *ctx, clattn_sdpa_desc *d, int k, int scales)
{
    if (k)
        d->k_dtype = I8;
    else
        d->v_dtype = I8;
    if (scales)
        *(k ? &d->k_scales : &d->v_scales) = stray_scales(ctx, K_ROWS);
}

static clattn_status call_past(size_t api, int mut, int fixed, outputs *o)
{
    clattn_context *ctx = o->ctx;
    clattn_sdpa_desc d = tu_sdpa_desc(BATCH, HEADS, QLEN, NEW_KV, HDIM, 0);
    if (!fixed)
        make_int8(ctx, &d, mut == W_K_INT8, mut != W_V_INT8_NO_SCALES);
    const float *hq = host_input(N_Q, 51), *hpk = host_input(N_PAST, 52), *hpv = host_input(N_PAST, 53),
                *hk = host_input(N_NEW_KV, 54), *hv = host_input(N_NEW_KV, 55);
    if (api == API_PAST) {
        cl_mem pk = dev_out(o, N_K, "present_k"), pv = dev_out(o, N_K, "present_v"), out = dev_out(o, N_O, "out"),
               lse = dev_out(o, N_LSE, "lse");
        return clattn_sdpa_with_past(ctx, &d, PAST, tu_dev_alloc_exact(ctx, N_PAST, hpk),
                                     tu_dev_alloc_exact(ctx, N_PAST, hpv), tu_dev_alloc_exact(ctx, N_Q, hq),
                                     tu_dev_alloc_exact(ctx, N_NEW_KV, hk), tu_dev_alloc_exact(ctx, N_NEW_KV, hv), NULL,
                                     pk, pv, out, NULL, lse);
    }
    o->finish = NULL;
    float *pk = host_out(o, N_K, "present_k"), *pv = host_out(o, N_K, "present_v"), *out = host_out(o, N_O, "out"),
          *lse = host_out(o, N_LSE, "lse");
    return clattn_sdpa_with_past_host(ctx, &d, PAST, hpk, hpv, hq, hk, hv, NULL, pk, pv, out, NULL, lse);
}

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

static clattn_status call_host(size_t api, int mut, int fixed, outputs *o)
{
    (void)api;
    clattn_context *ctx = o->ctx;
    clattn_sdpa_desc d = tu_sdpa_desc(BATCH, HEADS, QLEN, KVLEN, HDIM, 0);
    if (!fixed)
        make_int8(ctx, &d, mut != HO_V_INT8, mut != HO_K_INT8_NO_SCALES);
    o->finish = NULL;
    float *out = host_out(o, N_O, "out"), *lse = host_out(o, N_LSE, "lse");
    return clattn_sdpa_host(ctx, &d, host_input(N_Q, 61), host_input(N_K, 62), host_input(N_K, 63), NULL, out, NULL,
                            lse);
}

/* ---------------------------------------------------------------------------------------------- */
/* clattn_mha and clattn_mha_host                                                                  */
/* ---------------------------------------------------------------------------------------------- */

/* Self-attention, model_dim 8, two heads of 4, no W_O: out (B, L, 8), attention weights (B, H, L, L). */
enum {
    MODEL = 8, MQK = 4, N_X = BATCH * QLEN * MODEL, N_WQ = MODEL * HEADS * MQK, N_Y = BATCH * QLEN * HEADS * MQK,
    N_ATT = BATCH * HEADS * QLEN * QLEN,
};

enum mha_api { API_MHA, API_MHA_HOST };

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

/* The host weights W_Q, W_K, W_V (no W_O) from seeds seed, seed + 1, seed + 2. */
static clattn_mha_host_weights host_weights(uint64_t seed)
{
    clattn_mha_host_weights w = CLATTN_MHA_HOST_WEIGHTS_INIT;
    w.w_q = host_input(N_WQ, seed);
    w.w_k = host_input(N_WQ, seed + 1);
    w.w_v = host_input(N_WQ, seed + 2);
    return w;
}

static clattn_status call_mha(size_t api, int mut, int fixed, outputs *o)
{
    clattn_context *ctx = o->ctx;
    clattn_mha_desc d = mha_desc();
    switch (mut) {
    case MH_X_ENUM: d.x_dtype = fixed ? F32 : OUTSIDE_HIGH; break;
    case MH_W_ENUM: d.weight_dtype = fixed ? F32 : OUTSIDE_LOW; break;
    case MH_O_ENUM: d.out_dtype = fixed ? F32 : (clattn_dtype)4; break;
    case MH_X_INT8: d.x_dtype = fixed ? F32 : I8; break;
    case MH_W_INT8: d.weight_dtype = fixed ? F32 : I8; break;
    case MH_O_INT8: d.out_dtype = fixed ? F32 : I8; break;
    case MH_RESERVED: d.dtype_reserved = fixed ? 0 : 1; break;
    default: ck_abort_msg("unknown case");
    }
    const float *hx = host_input(N_X, 71);
    const clattn_mha_host_weights hw = host_weights(72);
    if (api == API_MHA) {
        clattn_mha_weights w = CLATTN_MHA_WEIGHTS_INIT;
        w.w_q = tu_dev_alloc_exact(ctx, N_WQ, hw.w_q);
        w.w_k = tu_dev_alloc_exact(ctx, N_WQ, hw.w_k);
        w.w_v = tu_dev_alloc_exact(ctx, N_WQ, hw.w_v);
        cl_mem out = dev_out(o, N_Y, "out"), att = dev_out(o, N_ATT, "attn_weights");
        return clattn_mha(ctx, &d, tu_dev_alloc_exact(ctx, N_X, hx), NULL, &w, NULL, out, att);
    }
    o->finish = NULL;
    float *out = host_out(o, N_Y, "out"), *att = host_out(o, N_ATT, "attn_weights");
    return clattn_mha_host(ctx, &d, hx, NULL, &hw, NULL, out, att);
}

/* ---------------------------------------------------------------------------------------------- */
/* clattn_group_sdpa_host and clattn_group_mha_host: float32 Q and outputs, no row-scaled K/V       */
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

static clattn_status call_group(size_t api, int mut, int fixed, outputs *o)
{
    (void)api;
    clattn_group *g = group_on(o->dev);
    o->finish = NULL;
    o->err = NULL;
    if (mut < G_MHA_X_F16) {
        clattn_sdpa_desc d = tu_sdpa_desc(BATCH, HEADS, QLEN, KVLEN, HDIM, 0);
        if (!fixed && mut == G_SDPA_Q_F16)
            d.q_dtype = F16;
        if (!fixed && mut != G_SDPA_Q_F16)
            make_int8(clattn_group_context(g, 0), &d, mut == G_SDPA_K_INT8, mut == G_SDPA_K_INT8);
        float *out = host_out(o, N_O, "out"), *lse = host_out(o, N_LSE, "lse");
        return clattn_group_sdpa_host(g, &d, host_input(N_Q, 81), host_input(N_K, 82), host_input(N_K, 83), NULL, out,
                                      lse);
    }
    clattn_mha_desc d = mha_desc();
    if (!fixed && mut == G_MHA_X_F16)
        d.x_dtype = F16;
    if (!fixed && mut == G_MHA_W_BF16)
        d.weight_dtype = BF16;
    if (!fixed && mut == G_MHA_O_F16)
        d.out_dtype = F16;
    const clattn_mha_host_weights w = host_weights(84);
    return clattn_group_mha_host(g, &d, host_input(N_X, 87), NULL, &w, NULL, host_out(o, N_Y, "out"));
}

/* ---------------------------------------------------------------------------------------------- */
/* The entry points' tables, one check test case each                                              */
/* ---------------------------------------------------------------------------------------------- */

/* One test case: its cases, run on each of `apis` entry points (names[api]; with one, a case from
 * `second_from` on is named names[1]), through `call`. */
typedef struct entry {
    const char *tcase, *names[2];
    const type_case *cases;
    size_t n, apis;
    int second_from;
    clattn_status (*call)(size_t api, int mut, int fixed, outputs *o);
} entry;

#define CASES(t) t, sizeof t / sizeof t[0]
static const entry entries[] = {
    {"sdpa", {"clattn_sdpa", NULL}, CASES(sdpa_cases), 1, 0, call_sdpa},
    {"stages", {"clattn_score", "clattn_weighted_sum"}, CASES(stage_cases), 1, WS_V_ENUM, call_stages},
    {"merge", {"clattn_merge", NULL}, CASES(merge_cases), 1, 0, call_merge},
    {"append", {"clattn_kv_append", "clattn_kv_append_paged"}, CASES(append_cases), 2, 0, call_append},
    {"paged_ragged", {"clattn_sdpa_paged", "clattn_sdpa_ragged"}, CASES(decode_cases), 2, 0, call_decode},
    {"with_past", {"clattn_sdpa_with_past", "clattn_sdpa_with_past_host"}, CASES(past_cases), 2, 0, call_past},
    {"sdpa_host", {"clattn_sdpa_host", NULL}, CASES(host_cases), 1, 0, call_host},
    {"mha", {"clattn_mha", "clattn_mha_host"}, CASES(mha_cases), 2, 0, call_mha},
    {"group", {"clattn_group_sdpa_host", "clattn_group_mha_host"}, CASES(group_cases), 1, G_MHA_X_F16, call_group},
};
#define N_ENTRIES (sizeof entries / sizeof entries[0])

/* Iterations of entry e: every case on every entry point and device. */
static size_t iterations(const entry *e) { return e->n * e->apis * tu_ndev; }

/* Iteration _i of the whole table (the test cases' loops cover consecutive ranges): the bad call and its
 * corrected twin. */
START_TEST(test_entry)
{
    size_t i = (size_t)_i, k = 0;
    while (i >= iterations(&entries[k]))
        i -= iterations(&entries[k++]);
    const entry *e = &entries[k];
    const size_t api = TU_CASE(i) / e->n, dev = TU_DEVICE(i);
    const type_case *tc = &e->cases[TU_CASE(i) % e->n];
    const int mut = tc->bc.mut;
    const char *name = e->names[e->apis > 1 ? api : (e->second_from && mut >= e->second_from)];
    for (int fixed = 0; fixed < 2; fixed++) {
        tu_set_label("%s: %s%s on %s", name, tc->bc.name, fixed ? " (corrected)" : "", tu_dev_spec[dev]);
        outputs o = {.ctx = tu_ctx[dev], .finish = tu_ctx[dev], .err = tu_ctx[dev], .dev = dev};
        const clattn_status st = e->call(api, mut, fixed, &o);
        expect(st, tc, fixed, &o);
    }
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("validation_dtypes");
    size_t start = 0;
    for (size_t k = 0; k < N_ENTRIES; k++) {
        TCase *tc = tu_tcase(entries[k].tcase);
        tcase_add_loop_test(tc, test_entry, (int)start, (int)(start + iterations(&entries[k])));
        suite_add_tcase(s, tc);
        start += iterations(&entries[k]);
    }
    return s;
}

int main(void)
{
    const int rc = tu_main(make_suite);
    for (size_t i = 0; i < TU_MAX_DEVICES; i++)
        clattn_group_free(groups[i]);
    return rc;
}
