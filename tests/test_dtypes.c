/*
 * Storage types (clattn_dtype, since 0.5) against the fp64 reference computed on the rounded inputs
 * (int8: on the dequantised K/V), on every device: the fp32 tolerance plus half a unit in the last place
 * of the output type.
 *
 *  1. table: the fused, decode and staged paths × 16 combinations of Q, K, V and output types in which
 *     every two roles meet in every pair of types they may take (Q and O: float32, float16, bfloat16;
 *     K and V: those and int8) — or all 144 with CLATTN_TEST_DTYPES_ALL=1 — with grouped-query heads,
 *     causal masks, odd head sizes (40 / 24), split keys and 6 or 16 packed rows (decode) and the
 *     weights output (staged).
 *     Prints the largest error per output type.
 *  2. special: NaN and ±inf in half and bfloat16 inputs reach only the rows that read them, and a
 *     result beyond half's range is ±inf.
 *     Additive masks stored as half and bfloat16, on each path.
 *  3. append: clattn_kv_append into float16, bfloat16 and int8 caches (the int8 one quantised per row:
 *     |q·scale − x| ≤ scale/2, scale = max |x| / 127, a NaN row with a NaN scale), then decoding over
 *     them; and the end-to-end error of int8 caches against float32 ones on random and on
 *     outlier-heavy data (printed).
 *  4. entries: the other entry points with typed tensors — a paged cache (half and int8 pools, appended
 *     through the table from float rows), a ragged batch (all half), clattn_merge of three
 *     half parts, clattn_mha (half X, bfloat16 weights, half or bfloat16 out, with and without W_O), and
 *     clattn_sdpa_host with uint16_t arrays.
 *  5. bad: a type outside the enum, int8 queries or outputs, int8 without its scales, scales with
 *     another type or too small, buffers too small for their type (the size counts in the type's
 *     bytes): each a status naming the argument, nothing written.
 */
#include "test_util.h"

#include <math.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define F32 CLATTN_FLOAT32
#define F16 CLATTN_FLOAT16
#define BF16 CLATTN_BFLOAT16
#define I8 CLATTN_INT8

typedef struct {
    clattn_dtype q, k, v, o;
} combo;

/* The table's combinations: every pair of roles meets in every pair of types it may take (a covering
 * array of strength 2 over Q, O ∈ {float32, float16, bfloat16} and K, V ∈ those and int8: 16 rows, the
 * fewest there can be, as K × V alone has 16 pairs). The first five are the ones the other cases share
 * kernels with: special values and typed masks (A, B), appends (A, B, C), paged, ragged and host calls
 * (A, B, C), int8's error (C). CLATTN_TEST_DTYPES_ALL=1 runs the whole product instead (3·4·4·3 = 144
 * combinations, each compiling its own fused and decode programs: about half an hour on PoCL, cold). */
static const combo pairwise[] = {
    {F16, F16, F16, F16},    /* A */
    {BF16, BF16, BF16, F16}, /* B */
    {F32, I8, I8, F32},      /* C */
    {F16, I8, F16, BF16},    /* D */
    {BF16, F32, F16, F32},   /* E */
    {F16, BF16, F32, F32},   {F32, BF16, I8, BF16}, {BF16, I8, BF16, BF16}, {F32, BF16, F16, F16},
    {BF16, F16, I8, F32},    {F32, F16, F32, BF16}, {F32, F32, F32, F16},   {F16, F16, BF16, F32},
    {F32, F32, BF16, BF16},  {BF16, I8, F32, F16},  {F16, F32, I8, F16},
};
#define NPAIRWISE (sizeof pairwise / sizeof pairwise[0])

static combo combos[3 * 4 * 4 * 3];
static size_t ncombos;

/* The table's rows: the covering array, or every combination when asked. */
static void choose_combos(void)
{
    const char *all = getenv("CLATTN_TEST_DTYPES_ALL");
    if (!all || strcmp(all, "1") != 0) {
        memcpy(combos, pairwise, sizeof pairwise);
        ncombos = NPAIRWISE;
        return;
    }
    static const clattn_dtype io[] = {F32, F16, BF16}, kv[] = {F32, F16, BF16, I8};
    ncombos = 0;
    for (size_t q = 0; q < 3; q++)
        for (size_t k = 0; k < 4; k++)
            for (size_t v = 0; v < 4; v++)
                for (size_t o = 0; o < 3; o++)
                    combos[ncombos++] = (combo){io[q], kv[k], kv[v], io[o]};
}

static const clattn_algorithm paths[] = {CLATTN_ALGORITHM_FUSED, CLATTN_ALGORITHM_DECODE, CLATTN_ALGORITHM_STAGED};
#define NPATHS (sizeof paths / sizeof paths[0])

static double worst[4]; /* the largest error per output type, over the table */

static const char *path_name(clattn_algorithm a)
{
    return a == CLATTN_ALGORITHM_FUSED ? "fused" : a == CLATTN_ALGORITHM_DECODE ? "decode" : "staged";
}

START_TEST(test_table)
{
    const size_t dev = TU_DEVICE(_i), c_i = TU_CASE(_i) % ncombos;
    const clattn_algorithm path = paths[TU_CASE(_i) / ncombos];
    const combo *c = &combos[c_i];
    tu_set_label("%s q %s k %s v %s out %s on %s", path_name(path), clattn_dtype_name(c->q), clattn_dtype_name(c->k),
                 clattn_dtype_name(c->v), clattn_dtype_name(c->o), tu_dev_spec[dev]);
    clattn_context *ctx = tu_ctx[dev];
    const size_t B = 2, H = 4, KVH = 2, D = 40, DV = 24;
    /* (decode: 3 or 8 query rows over 2 heads a K/V head, 6 or 16 packed rows: the rows along d, or in
     * the lanes on CPUs, cl/decode.cl's ROWS_T) */
    const size_t L = path == CLATTN_ALGORITHM_FUSED ? 37 : path == CLATTN_ALGORITHM_DECODE ? (c_i % 2 ? 8 : 3) : 19;
    const size_t S = path == CLATTN_ALGORITHM_DECODE ? 1100 : 301;
    clattn_sdpa_desc d = tu_sdpa_desc(B, H, L, S, D, DV);
    d.kv_heads = KVH;
    d.algorithm = path;
    clattn_masks masks = CLATTN_MASKS_INIT;
    masks.causal = path == CLATTN_ALGORITHM_STAGED ? NONE : path == CLATTN_ALGORITHM_DECODE ? BR : TL;
    d.masks = &masks;
    d.q_dtype = c->q;
    d.k_dtype = c->k;
    d.v_dtype = c->v;
    d.out_dtype = c->o;
    const size_t nq = B * H * L * D, nk = B * KVH * S * D, nv = B * KVH * S * DV, no = B * H * L * DV;
    const size_t nw = B * H * L * S, nl = B * H * L;
    float *src = tu_falloc(nq + nk + nv);
    tu_fill_uniform(src, nq + nk + nv, 2.0f, 100 + c_i);
    const tu_typed q = tu_typed_make(c->q, src, nq, D), k = tu_typed_make(c->k, src + nq, nk, D),
                   v = tu_typed_make(c->v, src + nq + nk, nv, DV);
    cl_mem qm = tu_typed_upload(ctx, &q), km = tu_typed_upload(ctx, &k), vm = tu_typed_upload(ctx, &v);
    d.k_scales = tu_typed_scales(ctx, &k);
    d.v_scales = tu_typed_scales(ctx, &v);
    const tu_typed zero = tu_typed_make(c->o, tu_falloc(no), no, DV);
    cl_mem om = tu_typed_upload(ctx, &zero);
    const int staged = path == CLATTN_ALGORITHM_STAGED;
    cl_mem wm = staged ? tu_dev_alloc(ctx, nw, NULL) : NULL, lm = tu_dev_alloc(ctx, nl, NULL);
    clattn_status st = clattn_sdpa(ctx, &d, qm, km, vm, NULL, om, wm, lm);
    TU_ASSERT_OK(st, ctx, "clattn_sdpa");
    tu_finish(ctx);
    const float *out = tu_typed_read(ctx, om, c->o, no);
    const float *lse = tu_dev_read_checked(ctx, lm, nl, "lse");
    double *ro = tu_dalloc(no), *rw = tu_dalloc(nw), *rl = tu_dalloc(nl);
    ref_sdpa(&d, q.values, k.values, v.values, NULL, ro, rw, rl);
    double err;
    tu_check_typed("out", out, ro, no, c->o, &err);
    if (err > worst[c->o])
        worst[c->o] = err;
    check_close_named("lse", lse, rl, nl, NULL);
    if (staged)
        check_close_named("weights", tu_dev_read_checked(ctx, wm, nw, "weights"), rw, nw, NULL);
}
END_TEST

/* NaN and ±inf in half and bfloat16 inputs, and results beyond half's range. */
START_TEST(test_special)
{
    const size_t dev = TU_DEVICE(_i);
    const clattn_algorithm path = paths[TU_CASE(_i) % NPATHS];
    const clattn_dtype type = TU_CASE(_i) / NPATHS ? BF16 : F16;
    tu_set_label("special values, %s %s on %s", path_name(path), clattn_dtype_name(type), tu_dev_spec[dev]);
    clattn_context *ctx = tu_ctx[dev];
    enum { H = 4, L = 2, S = 40, D = 16 };
    clattn_sdpa_desc d = tu_sdpa_desc(1, H, L, S, D, 0);
    d.algorithm = path;
    d.q_dtype = d.k_dtype = d.v_dtype = type;
    d.out_dtype = F16;
    float *src = tu_falloc(H * L * D + 2 * H * S * D);
    tu_fill_uniform(src, H * L * D + 2 * H * S * D, 1.0f, 5);
    float *qf = src, *kf = src + H * L * D, *vf = kf + H * S * D;
    kf[1 * S * D + 7 * D + 3] = NAN;          /* head 1: NaN key, both rows NaN */
    vf[2 * S * D + 9 * D + 0] = INFINITY;     /* head 2: an inf value, column 0 inf */
    for (size_t i = 0; i < S * D; i++)        /* head 3: values of 1e5, beyond half's 65504 */
        vf[3 * S * D + i] = i % D == 1 ? -1e5f : 1e5f;
    const tu_typed q = tu_typed_make(type, qf, H * L * D, D), k = tu_typed_make(type, kf, H * S * D, D),
                   v = tu_typed_make(type, vf, H * S * D, D);
    cl_mem om = tu_dev_alloc(ctx, H * L * D, NULL);
    clattn_status st = clattn_sdpa(ctx, &d, tu_typed_upload(ctx, &q), tu_typed_upload(ctx, &k),
                                   tu_typed_upload(ctx, &v), NULL, om, NULL, NULL);
    TU_ASSERT_OK(st, ctx, "clattn_sdpa");
    tu_finish(ctx);
    const float *o = tu_typed_read(ctx, om, F16, H * L * D);
    double *ro = tu_dalloc(H * L * D);
    ref_sdpa(&d, q.values, k.values, v.values, NULL, ro, NULL, NULL);
    tu_check_typed("head 0", o, ro, L * D, F16, NULL);
    for (size_t i = 0; i < L * D; i++)
        ck_assert_msg(isnan(o[L * D + i]), "%s: head 1 out[%zu] = %g, expected NaN", tu_label(), i, o[L * D + i]);
    for (size_t i = 0; i < L; i++) {
        ck_assert_msg(isinf(o[2 * L * D + i * D]) && o[2 * L * D + i * D] > 0, "%s: head 2 row %zu column 0 = %g",
                      tu_label(), i, o[2 * L * D + i * D]);
        tu_check_typed("head 2, other columns", o + 2 * L * D + i * D + 1, ro + 2 * L * D + i * D + 1, D - 1, F16,
                       NULL);
        for (size_t c = 0; c < D; c++) {
            const float x = o[3 * L * D + i * D + c];
            ck_assert_msg(isinf(x) && (x < 0) == (c == 1), "%s: head 3 [%zu][%zu] = %g, expected %sinf", tu_label(),
                          i, c, x, c == 1 ? "-" : "+");
        }
    }
}
END_TEST

/* Additive masks stored as half and bfloat16 (CLATTN_MASK_FLOAT16, CLATTN_MASK_BFLOAT16), −inf entries and
 * a fully masked row included, on each path. */
START_TEST(test_typed_masks)
{
    const size_t dev = TU_DEVICE(_i);
    const clattn_algorithm path = paths[TU_CASE(_i) % NPATHS];
    const int bf = (int)(TU_CASE(_i) / NPATHS);
    const clattn_dtype type = bf ? BF16 : F16;
    tu_set_label("%s mask, %s on %s", clattn_dtype_name(type), path_name(path), tu_dev_spec[dev]);
    clattn_context *ctx = tu_ctx[dev];
    enum { B = 2, H = 3, L = 6, S = 45, D = 16 };
    clattn_sdpa_desc d = tu_sdpa_desc(B, H, L, S, D, 0);
    d.algorithm = path;
    clattn_masks masks = CLATTN_MASKS_INIT;
    masks.additive = CLATTN_MASK_B_H_L_S;
    masks.mask_type = bf ? CLATTN_MASK_BFLOAT16 : CLATTN_MASK_FLOAT16;
    d.masks = &masks;
    size_t nm;
    float *mf = tu_make_mask(CLATTN_MASK_B_H_L_S, B, H, L, S, TU_MASKF_INF | TU_MASKF_ROWINF, 17, &nm);
    const tu_typed mask = tu_typed_make(type, mf, nm, S);
    float *src = tu_falloc(B * H * (L + 2 * S) * D);
    tu_fill_uniform(src, B * H * (L + 2 * S) * D, 1.0f, 18);
    const float *q = src, *k = src + B * H * L * D, *v = k + B * H * S * D;
    float *o = tu_host_alloc(B * H * L * D, NULL), *l = tu_host_alloc(B * H * L, NULL);
    clattn_status st = clattn_sdpa_host(ctx, &d, q, k, v, mask.bytes, o, NULL, l);
    TU_ASSERT_OK(st, ctx, "clattn_sdpa_host with a typed mask");
    double *ro = tu_dalloc(B * H * L * D), *rl = tu_dalloc(B * H * L);
    ref_sdpa(&d, q, k, v, mask.values, ro, NULL, rl);
    check_close_named("out", o, ro, B * H * L * D, NULL);
    check_close_named("lse", l, rl, B * H * L, NULL);
    tu_host_check_guard(o, B * H * L * D, "out");
}
END_TEST

/* Appends into typed caches, then decoding over them. */
START_TEST(test_append)
{
    const size_t dev = TU_DEVICE(_i);
    const clattn_dtype type = (clattn_dtype[]){F16, BF16, I8}[TU_CASE(_i) % 3];
    const clattn_dtype rows_type = TU_CASE(_i) / 3 ? F16 : F32;
    tu_set_label("append %s rows to a %s cache on %s", clattn_dtype_name(rows_type), clattn_dtype_name(type),
                 tu_dev_spec[dev]);
    clattn_context *ctx = tu_ctx[dev];
    enum { B = 2, H = 4, KVH = 2, CAP = 600, D = 40, DV = 24, NEW = 5 };
    const size_t lengths[B] = {300, 17};
    clattn_sdpa_desc d = tu_sdpa_desc(B, H, 1, CAP, D, DV);
    d.kv_heads = KVH;
    d.q_dtype = rows_type;
    d.k_dtype = d.v_dtype = type;
    /* A cache holding its first rows already (as stored values), the new rows appended after them. */
    float *old = tu_falloc(B * KVH * CAP * (D + DV));
    tu_fill_uniform(old, B * KVH * CAP * (D + DV), 1.0f, 9);
    const tu_typed kc = tu_typed_make(type, old, B * KVH * CAP * D, D);
    const tu_typed vc = tu_typed_make(type, old + B * KVH * CAP * D, B * KVH * CAP * DV, DV);
    cl_mem kcm = tu_typed_upload(ctx, &kc), vcm = tu_typed_upload(ctx, &vc);
    d.k_scales = tu_typed_scales(ctx, &kc);
    d.v_scales = tu_typed_scales(ctx, &vc);
    float *fresh = tu_falloc(B * KVH * NEW * (D + DV));
    tu_fill_uniform(fresh, B * KVH * NEW * (D + DV), 3.0f, 10);
    fresh[5] = 40.0f; /* an outlier sets its row's scale */
    if (type == I8)
        fresh[B * KVH * NEW * D + 2 * DV + 1] = NAN; /* V row 2 (batch 0, head 0, row 2) */
    const tu_typed kn = tu_typed_make(rows_type, fresh, B * KVH * NEW * D, D);
    const tu_typed vn = tu_typed_make(rows_type, fresh + B * KVH * NEW * D, B * KVH * NEW * DV, DV);
    clattn_status st = clattn_kv_append(ctx, &d, lengths, NEW, tu_typed_upload(ctx, &kn), tu_typed_upload(ctx, &vn),
                                        kcm, vcm);
    TU_ASSERT_OK(st, ctx, "clattn_kv_append");
    tu_finish(ctx);
    /* Every cache row: the old ones untouched, the new ones the rows' values in the cache's type. */
    for (int which = 0; which < 2; which++) {
        const size_t dim = which ? DV : D, rows = B * KVH * CAP;
        const tu_typed *cache = which ? &vc : &kc, *add = which ? &vn : &kn;
        cl_mem m = which ? vcm : kcm;
        const float *got = tu_typed_read(ctx, m, type, rows * dim);
        const float *scales = type == I8 ? tu_dev_read(ctx, which ? d.v_scales : d.k_scales, rows) : NULL;
        for (size_t row = 0; row < rows; row++) {
            const size_t bh = row / CAP, j = row % CAP, b = bh / KVH;
            const bool fresh_row = j >= lengths[b] && j < lengths[b] + NEW;
            const float *want = fresh_row ? add->values + (bh * NEW + j - lengths[b]) * dim : cache->values + row * dim;
            if (type != I8 || !fresh_row) {
                for (size_t e = 0; e < dim; e++) {
                    const float x = type == I8 ? got[row * dim + e] * scales[row] : got[row * dim + e];
                    const float w = type == I8 || !fresh_row ? want[e]
                                    : type == F16 ? tu_typed_make(F16, &want[e], 1, 1).values[0]
                                                  : tu_typed_make(BF16, &want[e], 1, 1).values[0];
                    ck_assert_msg(x == w || (isnan(x) && isnan(w)), "%s: %s row %zu [%zu] = %g, expected %g",
                                  tu_label(), which ? "V" : "K", row, e, x, w);
                }
                continue;
            }
            float top = 0.0f;
            bool finite = true;
            for (size_t e = 0; e < dim; e++) {
                top = fmaxf(top, fabsf(want[e]));
                finite = finite && isfinite(want[e]);
            }
            if (!finite) {
                ck_assert_msg(isnan(scales[row]), "%s: a row holding NaN has scale %g", tu_label(), scales[row]);
                continue;
            }
            ck_assert_msg(fabsf(scales[row] - top / 127.0f) <= 1e-6f * top, "%s: row %zu scale %g, max|x|/127 = %g",
                          tu_label(), row, scales[row], top / 127.0f);
            for (size_t e = 0; e < dim; e++)
                ck_assert_msg(fabsf(got[row * dim + e] * scales[row] - want[e]) <= 0.5f * scales[row] * (1 + 1e-5f),
                              "%s: row %zu [%zu]: %g·%g is not within half a step of %g", tu_label(), row, e,
                              got[row * dim + e], scales[row], want[e]);
        }
    }
    /* Decoding the next token over the grown caches (their stored values are the reference's input). */
    size_t grown[B];
    long long offsets[B];
    for (size_t b = 0; b < B; b++) {
        grown[b] = lengths[b] + NEW;
        offsets[b] = (long long)grown[b] - 1;
    }
    clattn_masks masks = CLATTN_MASKS_INIT;
    masks.key_lengths = grown;
    masks.query_offsets = offsets;
    masks.causal = TL;
    d.masks = &masks;
    /* The table's combinations A, B and C (kernels built once): half and bfloat16 caches with queries of
     * their type and a half output, an int8 one with float32 queries and output. */
    d.q_dtype = type == I8 ? F32 : type;
    d.out_dtype = type == I8 ? F32 : F16;
    float *qsrc = tu_falloc(B * H * D);
    tu_fill_uniform(qsrc, B * H * D, 1.0f, 11);
    const tu_typed qt = tu_typed_make(d.q_dtype, qsrc, B * H * D, D);
    const float *qf = qt.values;
    const tu_typed zo = tu_typed_make(d.out_dtype, tu_falloc(B * H * DV), B * H * DV, DV);
    cl_mem om = tu_typed_upload(ctx, &zo);
    st = clattn_sdpa(ctx, &d, tu_typed_upload(ctx, &qt), kcm, vcm, NULL, om, NULL, NULL);
    TU_ASSERT_OK(st, ctx, "clattn_sdpa over the appended cache");
    const float *o = tu_typed_read(ctx, om, d.out_dtype, B * H * DV);
    float *kv_now = tu_falloc(B * KVH * CAP * (D + DV));
    float *k_now = kv_now, *v_now = kv_now + B * KVH * CAP * D;
    const float *kg = tu_typed_read(ctx, kcm, type, B * KVH * CAP * D);
    const float *vg = tu_typed_read(ctx, vcm, type, B * KVH * CAP * DV);
    const float *ks = type == I8 ? tu_dev_read(ctx, d.k_scales, B * KVH * CAP) : NULL;
    const float *vs = type == I8 ? tu_dev_read(ctx, d.v_scales, B * KVH * CAP) : NULL;
    for (size_t i = 0; i < B * KVH * CAP * D; i++)
        k_now[i] = ks ? kg[i] * ks[i / D] : kg[i];
    for (size_t i = 0; i < B * KVH * CAP * DV; i++)
        v_now[i] = vs ? vg[i] * vs[i / DV] : vg[i];
    double *ro = tu_dalloc(B * H * DV);
    ref_sdpa(&d, qf, k_now, v_now, NULL, ro, NULL, NULL);
    if (type == I8) { /* batch 0's heads 0-1 read V head 0, whose row 2 holds the NaN: all NaN */
        for (size_t i = 0; i < 2 * DV; i++)
            ck_assert_msg(isnan(o[i]), "%s: out[%zu] = %g, expected NaN", tu_label(), i, o[i]);
        check_close_named("out", o + 2 * DV, ro + 2 * DV, (B * H - 2) * DV, NULL);
    } else {
        tu_check_typed("out", o, ro, B * H * DV, d.out_dtype, NULL);
    }
}
END_TEST

/* The end-to-end error of an int8 cache against the float32 one, on random and on outlier-heavy data
 * (a few channels 20× larger, as in real K caches): printed for docs/storage-types.md, checked loosely. */
START_TEST(test_int8_error)
{
    const size_t dev = TU_DEVICE(_i);
    const int outliers = (int)TU_CASE(_i);
    tu_set_label("int8 cache error, %s data on %s", outliers ? "outlier-heavy" : "random", tu_dev_spec[dev]);
    clattn_context *ctx = tu_ctx[dev];
    enum { H = 8, KVH = 2, S = 1024, D = 64 };
    float *qf = tu_falloc(H * D), *kf = tu_falloc(KVH * S * D), *vf = tu_falloc(KVH * S * D);
    tu_fill_uniform(qf, H * D, 1.0f, 31);
    tu_fill_uniform(kf, KVH * S * D, 1.0f, 32);
    tu_fill_uniform(vf, KVH * S * D, 1.0f, 33);
    if (outliers)
        for (size_t i = 0; i < KVH * S * D; i++)
            if (i % D == 3 || i % D == 41)
                kf[i] *= 20.0f, vf[i] *= 20.0f;
    clattn_sdpa_desc d = tu_sdpa_desc(1, H, 1, S, D, 0);
    d.kv_heads = KVH;
    d.scale = 1.0f; /* sharp weights: the scores' errors matter */
    cl_mem qm = tu_dev_alloc(ctx, H * D, qf), of = tu_dev_alloc(ctx, H * D, NULL), oq = tu_dev_alloc(ctx, H * D, NULL);
    clattn_status st = clattn_sdpa(ctx, &d, qm, tu_dev_alloc(ctx, KVH * S * D, kf), tu_dev_alloc(ctx, KVH * S * D, vf),
                                   NULL, of, NULL, NULL);
    TU_ASSERT_OK(st, ctx, "clattn_sdpa, float32 cache");
    const tu_typed k8 = tu_typed_make(I8, kf, KVH * S * D, D), v8 = tu_typed_make(I8, vf, KVH * S * D, D);
    d.k_dtype = d.v_dtype = I8;
    d.k_scales = tu_typed_scales(ctx, &k8);
    d.v_scales = tu_typed_scales(ctx, &v8);
    st = clattn_sdpa(ctx, &d, qm, tu_typed_upload(ctx, &k8), tu_typed_upload(ctx, &v8), NULL, oq, NULL, NULL);
    TU_ASSERT_OK(st, ctx, "clattn_sdpa, int8 cache");
    const float *a = tu_dev_read_checked(ctx, of, H * D, "float32 out");
    const float *b = tu_dev_read_checked(ctx, oq, H * D, "int8 out");
    double max_err = 0.0, max_ref = 0.0, sq = 0.0, sq_ref = 0.0;
    for (size_t i = 0; i < H * D; i++) {
        max_err = fmax(max_err, fabs((double)a[i] - b[i]));
        max_ref = fmax(max_ref, fabs((double)a[i]));
        sq += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        sq_ref += (double)a[i] * a[i];
    }
    printf("int8 KV cache vs float32 (%s data, H %d, S %d, D %d) on %s: max |err| %.3g (max |out| %.3g), "
           "relative RMS error %.3g\n",
           outliers ? "outlier-heavy" : "random", H, S, D, tu_dev_spec[dev], max_err, max_ref, sqrt(sq / sq_ref));
    /* Per-token scales follow a row's largest entry: channels 20× larger leave the others few levels. */
    const double bound = outliers ? 0.15 : 0.02;
    ck_assert_msg(sqrt(sq / sq_ref) < bound, "%s: relative RMS error %g", tu_label(), sqrt(sq / sq_ref));
}
END_TEST

/* A paged cache of `type`, filled by clattn_kv_append_paged from float rows, read by clattn_sdpa_paged. */
static void paged_case(clattn_context *ctx, clattn_dtype type)
{
    enum { B = 2, H = 4, KVH = 2, D = 40, DV = 24, BS = 16, NEW = 300, MAXB = 20, BLOCKS = 41 };
    clattn_sdpa_desc d = tu_sdpa_desc(B, H, 1, 0, D, DV);
    d.kv_heads = KVH;
    d.k_dtype = d.v_dtype = type;
    const clattn_dtype qo = type == I8 ? F32 : type; /* (the table's A and C) */
    clattn_paged_cache c = CLATTN_PAGED_CACHE_INIT;
    c.blocks = BLOCKS;
    c.block_size = BS;
    c.max_blocks = MAXB;
    const size_t pk = (size_t)BLOCKS * KVH * BS * D, pv = (size_t)BLOCKS * KVH * BS * DV;
    const tu_typed zk = tu_typed_make(type, tu_falloc(pk), pk, D), zv = tu_typed_make(type, tu_falloc(pv), pv, DV);
    c.k_pool = tu_typed_upload(ctx, &zk);
    c.v_pool = tu_typed_upload(ctx, &zv);
    d.k_scales = tu_typed_scales(ctx, &zk);
    d.v_scales = tu_typed_scales(ctx, &zv);
    cl_int table[B * MAXB];
    for (int i = 0; i < B * MAXB; i++)
        table[i] = (i * 7 + 3) % BLOCKS; /* scattered, each block once */
    cl_int err;
    c.block_table = clCreateBuffer(clattn_context_cl_context(ctx), CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                                   sizeof table, table, &err);
    ck_assert(err == CL_SUCCESS);
    tu_track_mem(c.block_table);
    float *kf = tu_falloc(B * KVH * NEW * D), *vf = tu_falloc(B * KVH * NEW * DV), *qf = tu_falloc(B * H * D);
    tu_fill_uniform(kf, B * KVH * NEW * D, 1.5f, 41);
    tu_fill_uniform(vf, B * KVH * NEW * DV, 1.5f, 42);
    tu_fill_uniform(qf, B * H * D, 1.0f, 43);
    const size_t zero[B] = {0, 0}, lengths[B] = {NEW, NEW};
    clattn_status st = clattn_kv_append_paged(ctx, &d, &c, zero, NEW, tu_dev_alloc(ctx, B * KVH * NEW * D, kf),
                                              tu_dev_alloc(ctx, B * KVH * NEW * DV, vf));
    TU_ASSERT_OK(st, ctx, "clattn_kv_append_paged");
    const tu_typed ok = tu_typed_make(type, kf, B * KVH * NEW * D, D), ov = tu_typed_make(type, vf, B * KVH * NEW * DV, DV);
    clattn_masks masks = CLATTN_MASKS_INIT;
    masks.causal = BR;
    d.masks = &masks;
    d.q_dtype = d.out_dtype = qo;
    const tu_typed zo = tu_typed_make(qo, tu_falloc(B * H * DV), B * H * DV, DV), qt = tu_typed_make(qo, qf, B * H * D, D);
    cl_mem om = tu_typed_upload(ctx, &zo);
    st = clattn_sdpa_paged(ctx, &d, &c, lengths, tu_typed_upload(ctx, &qt), NULL, om, NULL);
    TU_ASSERT_OK(st, ctx, "clattn_sdpa_paged");
    clattn_sdpa_desc rd = d;
    rd.kv_len = NEW;
    double *ro = tu_dalloc(B * H * DV);
    ref_sdpa(&rd, qt.values, ok.values, ov.values, NULL, ro, NULL, NULL);
    tu_check_typed("paged out", tu_typed_read(ctx, om, qo, B * H * DV), ro, B * H * DV, qo, NULL);
}

/* A ragged batch, (rows, heads, D) layout, all half; reference per sequence. */
static void ragged_case(clattn_context *ctx)
{
    enum { B = 2, H = 2, D = 24 };
    const size_t qs[B + 1] = {0, 3, 8}, ks[B + 1] = {0, 200, 277};
    const size_t nq = qs[B] * H * D, nk = ks[B] * H * D;
    float *src = tu_falloc(nq + 2 * nk);
    tu_fill_uniform(src, nq + 2 * nk, 1.5f, 51);
    const tu_typed q = tu_typed_make(F16, src, nq, D), k = tu_typed_make(F16, src + nq, nk, D),
                   v = tu_typed_make(F16, src + nq + nk, nk, D);
    clattn_sdpa_desc d = tu_sdpa_desc(B, H, 0, 0, D, 0);
    d.q_dtype = d.k_dtype = d.v_dtype = d.out_dtype = F16; /* (the table's A) */
    clattn_ragged r = CLATTN_RAGGED_INIT;
    r.q_starts = qs;
    r.k_starts = ks;
    const tu_typed zo = tu_typed_make(F16, tu_falloc(nq), nq, D);
    cl_mem om = tu_typed_upload(ctx, &zo);
    clattn_status st = clattn_sdpa_ragged(ctx, &d, &r, tu_typed_upload(ctx, &q), tu_typed_upload(ctx, &k),
                                          tu_typed_upload(ctx, &v), NULL, om, NULL);
    TU_ASSERT_OK(st, ctx, "clattn_sdpa_ragged");
    const float *o = tu_typed_read(ctx, om, F16, nq);
    for (size_t b = 0; b < B; b++) {
        const size_t L = qs[b + 1] - qs[b], S = ks[b + 1] - ks[b];
        clattn_sdpa_desc sd = tu_sdpa_desc(1, H, L, S, D, 0);
        float *sq = tu_falloc(H * L * D), *sk = tu_falloc(H * S * D), *sv = tu_falloc(H * S * D), *so = tu_falloc(H * L * D);
        for (size_t h = 0; h < H; h++)
            for (size_t e = 0; e < D; e++) {
                for (size_t i = 0; i < L; i++) {
                    sq[(h * L + i) * D + e] = q.values[((qs[b] + i) * H + h) * D + e];
                    so[(h * L + i) * D + e] = o[((qs[b] + i) * H + h) * D + e];
                }
                for (size_t j = 0; j < S; j++) {
                    sk[(h * S + j) * D + e] = k.values[((ks[b] + j) * H + h) * D + e];
                    sv[(h * S + j) * D + e] = v.values[((ks[b] + j) * H + h) * D + e];
                }
            }
        double *ro = tu_dalloc(H * L * D);
        ref_sdpa(&sd, sq, sk, sv, NULL, ro, NULL, NULL);
        tu_check_typed("ragged out", so, ro, H * L * D, F16, NULL);
    }
}

/* Three half parts merged: the exact combination of the parts' (rounded) values. */
static void merge_case(clattn_context *ctx)
{
    enum { H = 3, L = 4, DV = 20, P = 3 };
    const size_t no = H * L * DV, nl = H * L;
    clattn_sdpa_desc d = tu_sdpa_desc(1, H, L, 0, 0, DV);
    d.out_dtype = F16;
    cl_mem outs[P], lses[P];
    tu_typed parts[P];
    float *lse_values[P];
    for (size_t p = 0; p < P; p++) {
        float *f = tu_falloc(no);
        tu_fill_uniform(f, no, 2.0f, 60 + p);
        parts[p] = tu_typed_make(F16, f, no, DV);
        outs[p] = tu_typed_upload(ctx, &parts[p]);
        lse_values[p] = tu_falloc(nl);
        tu_fill_uniform(lse_values[p], nl, 3.0f, 70 + p);
        lses[p] = tu_dev_alloc(ctx, nl, lse_values[p]);
    }
    const tu_typed zo = tu_typed_make(F16, tu_falloc(no), no, DV);
    cl_mem om = tu_typed_upload(ctx, &zo), lm = tu_dev_alloc(ctx, nl, NULL);
    clattn_status st = clattn_merge(ctx, &d, P, outs, lses, om, lm);
    TU_ASSERT_OK(st, ctx, "clattn_merge");
    double *ro = tu_dalloc(no), *rl = tu_dalloc(nl);
    for (size_t r = 0; r < nl; r++) {
        double top = -INFINITY, sum = 0.0;
        for (size_t p = 0; p < P; p++)
            top = fmax(top, lse_values[p][r]);
        for (size_t p = 0; p < P; p++)
            sum += exp(lse_values[p][r] - top);
        rl[r] = top + log(sum);
        for (size_t e = 0; e < DV; e++)
            for (size_t p = 0; p < P; p++)
                ro[r * DV + e] += exp(lse_values[p][r] - rl[r]) * parts[p].values[r * DV + e];
    }
    tu_check_typed("merged out", tu_typed_read(ctx, om, F16, no), ro, no, F16, NULL);
    check_close_named("merged lse", tu_dev_read_checked(ctx, lm, nl, "lse"), rl, nl, NULL);
}

/* A layer: half X, bfloat16 weights and biases, the result in `out_type`, with or without W_O. */
static void mha_case(clattn_context *ctx, int with_wo, clattn_dtype out_type)
{
    enum { B = 2, L = 9, DM = 48, H = 4, DK = 12, DOUT = 40 };
    clattn_mha_desc d = CLATTN_MHA_DESC_INIT;
    d.batch = B;
    d.q_len = L;
    d.model_dim = DM;
    d.heads = H;
    d.qk_dim = DK;
    d.out_dim = with_wo ? DOUT : 0;
    d.x_dtype = F16;
    d.weight_dtype = BF16;
    d.out_dtype = out_type;
    const size_t nx = B * L * DM, nw = DM * H * DK, nwo = H * DK * DOUT, nr = B * L * (with_wo ? DOUT : H * DK);
    float *f = tu_falloc(nx + 3 * nw + nwo + 3 * H * DK + DOUT);
    tu_fill_uniform(f, nx + 3 * nw + nwo + 3 * H * DK + DOUT, 0.5f, 81);
    const tu_typed x = tu_typed_make(F16, f, nx, DM);
    tu_typed w[8];
    const size_t sizes[8] = {nw, H * DK, nw, H * DK, nw, H * DK, nwo, DOUT};
    size_t at = nx;
    for (int i = 0; i < 8; i++) {
        w[i] = tu_typed_make(BF16, f + at, sizes[i], 1);
        at += sizes[i];
    }
    clattn_mha_weights dw = CLATTN_MHA_WEIGHTS_INIT;
    cl_mem *slots[8] = {&dw.w_q, &dw.b_q, &dw.w_k, &dw.b_k, &dw.w_v, &dw.b_v, &dw.w_o, &dw.b_o};
    for (int i = 0; i < (with_wo ? 8 : 6); i++)
        *slots[i] = tu_typed_upload(ctx, &w[i]);
    const tu_typed zo = tu_typed_make(out_type, tu_falloc(nr), nr, 1);
    cl_mem om = tu_typed_upload(ctx, &zo);
    clattn_status st = clattn_mha(ctx, &d, tu_typed_upload(ctx, &x), NULL, &dw, NULL, om, NULL);
    TU_ASSERT_OK(st, ctx, "clattn_mha");
    clattn_mha_host_weights hw = CLATTN_MHA_HOST_WEIGHTS_INIT;
    const void **host_slots[8] = {&hw.w_q, &hw.b_q, &hw.w_k, &hw.b_k, &hw.w_v, &hw.b_v, &hw.w_o, &hw.b_o};
    for (int i = 0; i < (with_wo ? 8 : 6); i++)
        *host_slots[i] = w[i].values;
    double *ro = tu_dalloc(nr);
    ref_mha(&d, x.values, NULL, &hw, NULL, ro, NULL);
    tu_check_typed("layer out", tu_typed_read(ctx, om, out_type, nr), ro, nr, out_type, NULL);
    /* The host variant with the same arrays as bit patterns. */
    void *host_out = tu_track_malloc(nr * clattn_dtype_size(out_type));
    for (int i = 0; i < (with_wo ? 8 : 6); i++)
        *host_slots[i] = w[i].bytes;
    st = clattn_mha_host(ctx, &d, x.bytes, NULL, &hw, NULL, host_out, NULL);
    TU_ASSERT_OK(st, ctx, "clattn_mha_host");
    const tu_typed echo = {out_type, nr, 1, host_out, NULL, NULL};
    tu_check_typed("layer out (host)", tu_typed_read(ctx, tu_typed_upload(ctx, &echo), out_type, nr), ro, nr,
                   out_type, NULL);
}

/* clattn_sdpa_host with bfloat16 Q, K, V and a half output (the table's B), as uint16_t arrays. */
static void host_case(clattn_context *ctx)
{
    enum { H = 2, L = 7, S = 50, D = 16 };
    clattn_sdpa_desc d = tu_sdpa_desc(1, H, L, S, D, 0);
    d.q_dtype = d.k_dtype = d.v_dtype = BF16;
    d.out_dtype = F16;
    float *f = tu_falloc(H * (L + 2 * S) * D);
    tu_fill_uniform(f, H * (L + 2 * S) * D, 1.0f, 91);
    const tu_typed q = tu_typed_make(BF16, f, H * L * D, D), k = tu_typed_make(BF16, f + H * L * D, H * S * D, D),
                   v = tu_typed_make(BF16, f + H * (L + S) * D, H * S * D, D);
    unsigned short *out = tu_track_malloc(H * L * D * 2);
    clattn_status st = clattn_sdpa_host(ctx, &d, q.bytes, k.bytes, v.bytes, NULL, out, NULL, NULL);
    TU_ASSERT_OK(st, ctx, "clattn_sdpa_host");
    const tu_typed echo = {F16, H * L * D, D, out, NULL, NULL};
    double *ro = tu_dalloc(H * L * D);
    ref_sdpa(&d, q.values, k.values, v.values, NULL, ro, NULL, NULL);
    tu_check_typed("host out", tu_typed_read(ctx, tu_typed_upload(ctx, &echo), F16, H * L * D), ro, H * L * D, F16,
                   NULL);
}

START_TEST(test_entries)
{
    const size_t dev = TU_DEVICE(_i), which = TU_CASE(_i);
    static const char *const names[] = {"paged half", "paged int8", "ragged", "merge", "mha with W_O",
                                        "mha without W_O", "sdpa_host"};
    tu_set_label("%s on %s", names[which], tu_dev_spec[dev]);
    clattn_context *ctx = tu_ctx[dev];
    switch (which) {
    case 0: paged_case(ctx, F16); break;
    case 1: paged_case(ctx, I8); break;
    case 2: ragged_case(ctx); break;
    case 3: merge_case(ctx); break;
    case 4: mha_case(ctx, 1, F16); break;
    case 5: mha_case(ctx, 0, BF16); break;
    default: host_case(ctx); break;
    }
}
END_TEST

/* The public stage calls with typed tensors: clattn_score over half Q and int8 K (or bfloat16 Q and half
 * K), clattn_weighted_sum over bfloat16 V into a half output (or int8 V into bfloat16), grouped heads. */
START_TEST(test_stages)
{
    const size_t dev = TU_DEVICE(_i);
    const int second = (int)TU_CASE(_i);
    const clattn_dtype qt = second ? BF16 : F16, kt = second ? F16 : I8, vt = second ? I8 : BF16,
                       ot = second ? BF16 : F16;
    tu_set_label("stages q %s k %s v %s out %s on %s", clattn_dtype_name(qt), clattn_dtype_name(kt),
                 clattn_dtype_name(vt), clattn_dtype_name(ot), tu_dev_spec[dev]);
    clattn_context *ctx = tu_ctx[dev];
    enum { B = 2, H = 4, KVH = 2, L = 5, S = 37, D = 24, DV = 20 };
    const size_t nq = B * H * L * D, nk = B * KVH * S * D, nv = B * KVH * S * DV, nw = B * H * L * S;
    const size_t no = B * H * L * DV;
    clattn_sdpa_desc d = tu_sdpa_desc(B, H, L, S, D, DV);
    d.kv_heads = KVH;
    clattn_masks masks = CLATTN_MASKS_INIT;
    masks.causal = BR;
    d.masks = &masks;
    d.q_dtype = qt;
    d.k_dtype = kt;
    d.v_dtype = vt;
    d.out_dtype = ot;
    float *src = tu_falloc(nq + nk + nv + nw);
    tu_fill_uniform(src, nq + nk + nv + nw, 2.0f, 31 + second);
    const tu_typed q = tu_typed_make(qt, src, nq, D), k = tu_typed_make(kt, src + nq, nk, D),
                   v = tu_typed_make(vt, src + nq + nk, nv, DV);
    d.k_scales = tu_typed_scales(ctx, &k);
    d.v_scales = tu_typed_scales(ctx, &v);
    cl_mem scores = tu_dev_alloc(ctx, nw, NULL);
    clattn_status st = clattn_score(ctx, &d, tu_typed_upload(ctx, &q), tu_typed_upload(ctx, &k), NULL, scores);
    TU_ASSERT_OK(st, ctx, "clattn_score");
    double *rs = tu_dalloc(nw);
    ref_score(&d, q.values, k.values, NULL, rs);
    check_close_named("scores", tu_dev_read_checked(ctx, scores, nw, "scores"), rs, nw, NULL);

    /* Weights: any floats will do (the stage is a plain product); positive, rows not normalised. */
    float *p = src + nq + nk + nv;
    for (size_t i = 0; i < nw; i++)
        p[i] = fabsf(p[i]);
    const tu_typed zero = tu_typed_make(ot, tu_falloc(no), no, DV);
    cl_mem om = tu_typed_upload(ctx, &zero);
    st = clattn_weighted_sum(ctx, &d, tu_dev_alloc(ctx, nw, p), tu_typed_upload(ctx, &v), om);
    TU_ASSERT_OK(st, ctx, "clattn_weighted_sum");
    double *ro = tu_dalloc(no);
    ref_weighted_sum(&d, p, v.values, ro);
    tu_check_typed("weighted sum", tu_typed_read(ctx, om, ot, no), ro, no, ot, NULL);
}
END_TEST

/* A call that must fail with `want`, naming `needle` in its detail, and write nothing. */
static void expect_bad(clattn_context *ctx, const clattn_sdpa_desc *d, cl_mem q, cl_mem k, cl_mem v, cl_mem out,
                       clattn_status want, const char *needle, size_t no)
{
    clattn_status st = clattn_sdpa(ctx, d, q, k, v, NULL, out, NULL, NULL);
    ck_assert_msg(st == want, "%s (%s): got %s, expected %s (%s)", tu_label(), needle, clattn_status_string(st),
                  clattn_status_string(want), clattn_last_error(ctx));
    ck_assert_msg(strstr(clattn_last_error(ctx), needle) != NULL, "%s: the detail \"%s\" does not name %s",
                  tu_label(), clattn_last_error(ctx), needle);
    ck_assert_msg(tu_dev_all_sentinel(ctx, out, no), "%s (%s): the output was written", tu_label(), needle);
}

START_TEST(test_bad)
{
    const size_t dev = TU_DEVICE(_i);
    tu_set_label("bad storage types on %s", tu_dev_spec[dev]);
    clattn_context *ctx = tu_ctx[dev];
    enum { H = 2, L = 3, S = 10, D = 8 };
    const size_t nq = H * L * D, nk = H * S * D;
    clattn_sdpa_desc good = tu_sdpa_desc(1, H, L, S, D, 0);
    good.q_dtype = good.k_dtype = good.v_dtype = F16;
    cl_mem q16 = tu_dev_alloc_exact(ctx, nq / 2, NULL), k16 = tu_dev_alloc_exact(ctx, nk / 2, NULL);
    cl_mem v16 = tu_dev_alloc_exact(ctx, nk / 2, NULL), out = tu_dev_alloc(ctx, nq, NULL);
    cl_mem k_short = tu_dev_alloc_exact(ctx, nk / 2 - 1, NULL); /* one half-pair short */
    cl_mem k8 = tu_dev_alloc_exact(ctx, nk / 4, NULL), scales = tu_dev_alloc_exact(ctx, H * S, NULL);
    cl_mem scales_short = tu_dev_alloc_exact(ctx, H * S - 1, NULL);
    clattn_sdpa_desc d = good;
    d.q_dtype = (clattn_dtype)7;
    expect_bad(ctx, &d, q16, k16, v16, out, CLATTN_ERROR_INVALID_VALUE, "q_dtype", nq);
    d = good;
    d.out_dtype = (clattn_dtype)-1;
    expect_bad(ctx, &d, q16, k16, v16, out, CLATTN_ERROR_INVALID_VALUE, "out_dtype", nq);
    d = good;
    d.q_dtype = I8;
    expect_bad(ctx, &d, q16, k16, v16, out, CLATTN_ERROR_INVALID_VALUE, "q_dtype", nq);
    d = good;
    d.out_dtype = I8;
    expect_bad(ctx, &d, q16, k16, v16, out, CLATTN_ERROR_INVALID_VALUE, "out_dtype", nq);
    d = good;
    d.k_dtype = I8;
    expect_bad(ctx, &d, q16, k8, v16, out, CLATTN_ERROR_NULL_ARGUMENT, "k_scales", nq);
    d.k_scales = scales_short;
    expect_bad(ctx, &d, q16, k8, v16, out, CLATTN_ERROR_BUFFER_TOO_SMALL, "k_scales", nq);
    d = good;
    d.v_scales = scales;
    expect_bad(ctx, &d, q16, k16, v16, out, CLATTN_ERROR_INVALID_VALUE, "v_scales", nq);
    d = good;
    expect_bad(ctx, &d, q16, k_short, v16, out, CLATTN_ERROR_BUFFER_TOO_SMALL, "k", nq);
    d.k_dtype = F32; /* float K needs twice the bytes */
    expect_bad(ctx, &d, q16, k16, v16, out, CLATTN_ERROR_BUFFER_TOO_SMALL, "k", nq);
    d = good;
    d.k_dtype = I8;
    d.k_scales = scales;
    /* the same buffers pass with their types right: the checks count each type's bytes */
    clattn_status st = clattn_sdpa(ctx, &d, q16, k8, v16, NULL, out, NULL, NULL);
    TU_ASSERT_OK(st, ctx, "clattn_sdpa with int8 K");
    st = clattn_sdpa(ctx, &good, q16, k16, v16, NULL, out, NULL, NULL);
    TU_ASSERT_OK(st, ctx, "clattn_sdpa with half Q, K, V");
    /* A 0.4 program's descriptor ends before the types: whatever lies beyond it is never read, and its
     * tensors are float32. */
    d = tu_sdpa_desc(1, H, L, S, D, 0);
    d.struct_size = offsetof(clattn_sdpa_desc, q_dtype);
    d.q_dtype = (clattn_dtype)7;
    d.k_scales = scales;
    st = clattn_sdpa(ctx, &d, tu_dev_alloc(ctx, nq, NULL), tu_dev_alloc(ctx, nk, NULL), tu_dev_alloc(ctx, nk, NULL),
                     NULL, tu_dev_alloc(ctx, nq, NULL), NULL, NULL);
    ck_assert_msg(st == CLATTN_SUCCESS,
                  "%s: a 0.4-sized descriptor: %s (%s)", tu_label(), clattn_status_string(st), clattn_last_error(ctx));
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("dtypes");
    /* The sanitizer build keeps the cases with host code of their own — appends (conversions, quantised
     * writes) and bad input; typed host arrays and layers also run there through test_cli's storage-type
     * cases — and leaves out the table, special values, typed masks, the other entry points and int8's
     * error report, which add mostly kernel builds (the kernels run uninstrumented inside the OpenCL
     * runtime), minutes of them. */
    const char *host_only = getenv("CLATTN_TEST_DTYPES_HOST_ONLY");
    const bool kernels_too = !host_only || strcmp(host_only, "1") != 0;
    if (kernels_too) {
        choose_combos();
        tu_add_loop(s, "table", test_table, ncombos * NPATHS * tu_ndev);
        tu_add_loop(s, "special", test_special, 2 * NPATHS * tu_ndev);
        tu_add_loop(s, "masks", test_typed_masks, 2 * NPATHS * tu_ndev);
    }
    tu_add_loop(s, "append", test_append, 6 * tu_ndev);
    if (kernels_too) {
        tu_add_loop(s, "int8_error", test_int8_error, 2 * tu_ndev);
        tu_add_loop(s, "entries", test_entries, 7 * tu_ndev);
        tu_add_loop(s, "stages", test_stages, 2 * tu_ndev);
    }
    tu_add_loop(s, "bad", test_bad, tu_ndev);
    return s;
}

int main(void)
{
    int rc = tu_main(make_suite);
    printf("largest error of the table per output type: float32 %.3g, float16 %.3g, bfloat16 %.3g\n", worst[F32],
           worst[F16], worst[BF16]);
    return rc;
}
