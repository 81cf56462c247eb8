/*
 * Token formats (u4_t32, u2_t32: KIVI's keys, since 0.16) on every device, against the fp64 reference
 * computed on the dequantised cache (tests/formats_ref.c reads and writes the chunks by their layout):
 *
 *  1. append: clattn_kv_append into a dense cache in several calls (from float32, float16 and bfloat16
 *     rows) that fill groups, leave rows in the tail and end past the last whole group; the chunks' bytes
 *     equal the host's after every call, and attention over the cache matches the reference on those
 *     bytes through the decode kernels (1 and 4 query rows, both kernel shapes), the fused kernel
 *     (causal prefill) and the staged path (weights).
 *  2. paged: clattn_kv_append_paged across blocks of 32 and 64 rows, bytes and decoding as above.
 *  3. special: a row holding NaN or inf reads as NaN in that row only (a query that cannot see it stays
 *     finite though its group's other rows are read), a constant channel is exact, and a cache rolled
 *     back to a whole group refills it.
 *  4. error: attention over each token format's cache against the float32 cache, on random keys and on
 *     keys with outlier channels (where per-channel groups beat per-token ones), printed for the README.
 *  5. bad: the calls that take no token format (ragged, host arrays, ONNX's past/present), a row size
 *     not a multiple of 4, paged blocks below 32 rows, a cache a byte too small; clattn_dtype_head_bytes.
 */
#include "test_util.h"

#include "formats_ref.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    clattn_dtype k, v;
    size_t dim;
} token_pair;

/* KIVI's own pairing (keys per channel, values per token), both token formats, a token V. */
static const token_pair pairs[] = {
    {CLATTN_U2_T32, CLATTN_U4_G32, 64},
    {CLATTN_U4_T32, CLATTN_U2_T32, 20},
    {CLATTN_FLOAT16, CLATTN_U4_T32, 48},
};
#define NPAIRS (sizeof pairs / sizeof pairs[0])

/* A K or V cache (`heads` heads of `rows` rows) kept on the host beside the device's: its bytes as the
 * reference writes them (a token format's chunks by formats_ref.c; other formats row by row, their
 * values kept as tu_typed gives them). */
typedef struct {
    clattn_dtype type;
    size_t heads, rows, dim, head_bytes;
    unsigned char *bytes;
    float *values; /* formats stored row by row: the values of the rows written */
    cl_mem mem;
} cache_side;

static cache_side side_make(clattn_context *ctx, clattn_dtype type, size_t heads, size_t rows, size_t dim)
{
    cache_side c = {type, heads, rows, dim, clattn_dtype_head_bytes(type, rows, dim), NULL, NULL, NULL};
    ck_assert(c.head_bytes > 0);
    c.bytes = tu_track_malloc(heads * c.head_bytes);
    c.values = tu_falloc(heads * rows * dim);
    cl_int err;
    c.mem = clCreateBuffer(clattn_context_cl_context(ctx), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                           heads * c.head_bytes, c.bytes, &err);
    ck_assert(err == CL_SUCCESS);
    tu_track_mem(c.mem);
    return c;
}

/* Rows src (n of them, in the values the new rows' type holds) appended at row `start` of head `head`
 * (for a paged pool: of the block's head, `start` within the block). */
static void side_append(cache_side *c, size_t head, size_t start, const float *src, size_t n)
{
    unsigned char *chunk = c->bytes + head * c->head_bytes;
    if (fref_is_token(c->type)) {
        fref_token_append(c->type, chunk, c->rows, c->dim, start, src, n);
        return;
    }
    const tu_typed t = tu_typed_make(c->type, src, n * c->dim, c->dim);
    const size_t row = clattn_dtype_bytes(c->type, c->dim);
    memcpy(chunk + start * row, t.bytes, n * row);
    memcpy(c->values + (head * c->rows + start) * c->dim, t.values, n * c->dim * sizeof(float));
}

static float side_value(const cache_side *c, size_t head, size_t r, size_t d)
{
    if (fref_is_token(c->type))
        return (float)fref_token_value(c->type, c->bytes + head * c->head_bytes, c->rows, c->dim, r, d);
    return c->values[(head * c->rows + r) * c->dim + d];
}

/* The device's bytes equal the host's. */
static void side_check_bytes(clattn_context *ctx, const cache_side *c, const char *when)
{
    const size_t n = c->heads * c->head_bytes;
    unsigned char *dev = tu_track_malloc(n);
    cl_int err = clEnqueueReadBuffer(clattn_context_queue(ctx), c->mem, CL_TRUE, 0, n, dev, 0, NULL, NULL);
    ck_assert(err == CL_SUCCESS);
    size_t differ = 0, first = n;
    for (size_t i = 0; i < n; i++)
        if (dev[i] != c->bytes[i]) {
            differ++;
            first = first < i ? first : i;
        }
    ck_assert_msg(differ == 0, "%s: %s %s: %zu of %zu bytes differ from the host's (first at %zu: head %zu, byte %zu)",
                  tu_label(), clattn_dtype_name(c->type), when, differ, n, first, first / c->head_bytes,
                  first % c->head_bytes);
}

static const clattn_dtype sources[] = {CLATTN_FLOAT32, CLATTN_FLOAT16, CLATTN_BFLOAT16};

/* New rows: values uniform in ±amp, with channel 3 of every row (keys' outlier channel) ×8 where `outlier`. */
static float *rows_make(size_t n, size_t dim, float amp, bool outlier, uint64_t seed)
{
    float *x = tu_falloc(n);
    tu_fill_uniform(x, n, amp, seed);
    for (size_t i = 3; outlier && i < n; i += dim)
        x[i] *= 8.0f;
    return x;
}

/* Attention over the caches (dense: kc, vc (B·KVH heads of CAP rows); paged: through `cache`) against
 * the fp64 reference on the values the host's bytes hold, keys [0, lengths[b]). */
typedef struct {
    size_t B, H, KVH, L, CAP;
    const size_t *lengths;
    clattn_algorithm algorithm;
    clattn_causal causal;
    bool weights;
    const char *tuning; /* options.tuning, or NULL: the context's own */
    const long long *offsets; /* masks.query_offsets, or NULL */
    const clattn_window *window; /* masks.window, or NULL */
    bool nan_expected; /* every output NaN (a key that held NaN in sight), not the reference */
} attend_case;

static void attend_check(size_t dev, const attend_case *a, const cache_side *k, const cache_side *v,
                         const clattn_paged_cache *paged, const int *table, size_t cols, uint64_t seed)
{
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("K %s V %s (D %zu): %s, L %zu%s%s on %s", clattn_dtype_name(k->type), clattn_dtype_name(v->type),
                 k->dim, tu_algorithm_name(a->algorithm), a->L, paged ? ", paged" : "", a->tuning ? ", other shapes" : "",
                 tu_dev_spec[dev]);
    if (a->tuning) {
        clattn_context_options o = CLATTN_CONTEXT_OPTIONS_INIT; /* (on the same OpenCL objects: the caches' buffers) */
        o.opencl_context = clattn_context_cl_context(ctx);
        o.opencl_device = clattn_context_device(ctx);
        o.opencl_queue = clattn_context_queue(ctx);
        o.tuning = a->tuning;
        TU_ASSERT_OK(clattn_context_create_with_options(&ctx, &o), NULL, "clattn_context_create_with_options");
    }
    const size_t D = k->dim, Dv = v->dim, bs = paged ? paged->block_size : a->CAP;
    clattn_sdpa_desc d = tu_sdpa_desc(a->B, a->H, a->L, a->CAP, D, Dv);
    d.kv_heads = a->KVH;
    d.k_dtype = k->type;
    d.v_dtype = v->type;
    d.algorithm = a->algorithm;
    clattn_masks masks = CLATTN_MASKS_INIT;
    masks.causal = a->causal;
    masks.key_lengths = paged ? NULL : a->lengths;
    masks.query_offsets = a->offsets;
    masks.window = a->window;
    d.masks = &masks;
    const size_t nq = a->B * a->H * a->L * D, no = a->B * a->H * a->L * Dv, nw = a->B * a->H * a->L * a->CAP;
    float *q = tu_falloc(nq);
    tu_fill_uniform(q, nq, 1.0f, seed);
    cl_mem qm = tu_dev_alloc(ctx, nq, q), om = tu_dev_alloc(ctx, no, NULL);
    cl_mem wm = a->weights ? tu_dev_alloc(ctx, nw, NULL) : NULL;
    clattn_status st = paged ? clattn_sdpa_paged(ctx, &d, paged, a->lengths, qm, NULL, om, NULL)
                             : clattn_sdpa(ctx, &d, qm, k->mem, v->mem, NULL, om, wm, NULL);
    TU_ASSERT_OK(st, ctx, "attention over the cache");
    float *o = tu_dev_read_checked(ctx, om, no, "out");
    for (size_t i = 0; a->nan_expected && i < no; i++)
        ck_assert_msg(isnan(o[i]), "%s: out[%zu] = %g where a NaN key is in sight", tu_label(), i, o[i]);
    /* the reference over the dense view of the values the bytes hold */
    float *kd = tu_falloc(a->B * a->KVH * a->CAP * D), *vd = tu_falloc(a->B * a->KVH * a->CAP * Dv);
    for (size_t b = 0; b < a->B; b++)
        for (size_t h = 0; h < a->KVH; h++)
            for (size_t j = 0; j < a->lengths[b]; j++) {
                const size_t head = paged ? (size_t)table[b * cols + j / bs] * a->KVH + h : b * a->KVH + h;
                const size_t r = paged ? j % bs : j, at = (b * a->KVH + h) * a->CAP + j;
                for (size_t e = 0; e < D; e++)
                    kd[at * D + e] = side_value(k, head, r, e);
                for (size_t e = 0; e < Dv; e++)
                    vd[at * Dv + e] = side_value(v, head, r, e);
            }
    masks.key_lengths = a->lengths;
    long long *at = tu_track_malloc(a->B * sizeof *at); /* a paged call's queries end at each sequence's length */
    for (size_t b = 0; paged && b < a->B; b++)
        at[b] = (long long)(a->lengths[b] - a->L);
    if (paged)
        masks.query_offsets = at;
    double *ro = tu_dalloc(no), *rw = tu_dalloc(nw);
    ref_sdpa(&d, q, kd, vd, NULL, ro, rw, NULL);
    if (!a->nan_expected)
        check_close_named("out", o, ro, no, NULL);
    if (a->weights)
        check_close_named("weights", tu_dev_read_checked(ctx, wm, nw, "weights"), rw, nw, NULL);
    if (a->tuning)
        clattn_context_free(ctx);
}

/* ---- 1. append (dense) ---- */

/* Appends of these many rows, in order: a few, to one short of a group's end, on across two group ends
 * (the first completed by one new row), and up to the capacity (CAP = 100: three whole groups, the
 * last 4 rows forever in the tail). */
static const size_t steps[] = {5, 26, 44, 25};
#define NSTEPS (sizeof steps / sizeof steps[0])

START_TEST(test_append)
{
    const size_t dev = TU_DEVICE(_i), idx = TU_CASE(_i);
    const token_pair *p = &pairs[idx / 3];
    const clattn_dtype from = sources[idx % 3];
    tu_set_label("append %s rows to K %s V %s (D %zu) on %s", clattn_dtype_name(from), clattn_dtype_name(p->k),
                 clattn_dtype_name(p->v), p->dim, tu_dev_spec[dev]);
    clattn_context *ctx = tu_ctx[dev];
    const size_t B = 2, KVH = 2, H = 4, CAP = 100, D = p->dim;
    size_t lengths[2] = {0, 0};
    cache_side k = side_make(ctx, p->k, B * KVH, CAP, D), v = side_make(ctx, p->v, B * KVH, CAP, D);
    clattn_sdpa_desc d = tu_sdpa_desc(B, H, 1, CAP, D, 0);
    d.kv_heads = KVH;
    d.q_dtype = from;
    d.k_dtype = p->k;
    d.v_dtype = p->v;
    for (size_t s = 0; s < NSTEPS; s++) {
        const size_t n = steps[s] - (s == NSTEPS - 1); /* (99 rows in all: 3 past the last whole group) */
        const size_t nnew = B * KVH * n * D;
        float *kn = rows_make(nnew, D, 2.0f, true, 100 + s + 10 * idx), *vn = rows_make(nnew, D, 1.0f, false, 200 + s);
        const tu_typed kt = tu_typed_make(from, kn, nnew, D), vt = tu_typed_make(from, vn, nnew, D);
        TU_ASSERT_OK(clattn_kv_append(ctx, &d, lengths, n, tu_typed_upload(ctx, &kt), tu_typed_upload(ctx, &vt),
                                      k.mem, v.mem),
                     ctx, "clattn_kv_append");
        for (size_t b = 0; b < B; b++)
            for (size_t h = 0; h < KVH; h++) {
                side_append(&k, b * KVH + h, lengths[b], kt.values + (b * KVH + h) * n * D, n);
                side_append(&v, b * KVH + h, lengths[b], vt.values + (b * KVH + h) * n * D, n);
            }
        lengths[0] += n;
        lengths[1] += n;
        side_check_bytes(ctx, &k, "after an append");
        side_check_bytes(ctx, &v, "after an append");
    }
    /* Decoding (1 and 4 query rows; both kernel shapes), a causal prefill (fused) and the staged path. */
    const bool cpu = tu_dev[dev].type == CL_DEVICE_TYPE_CPU;
    const attend_case cases[] = {
        {B, H, KVH, 1, CAP, lengths, CLATTN_ALGORITHM_DECODE, NONE, false, NULL, NULL, NULL, false},
        {B, H, KVH, 4, CAP, lengths, CLATTN_ALGORITHM_DECODE, BR, false, cpu ? "class=gpu" : "class=cpu", NULL, NULL, false},
        {B, H, KVH, 37, CAP, lengths, CLATTN_ALGORITHM_FUSED, BR, false, NULL, NULL, NULL, false},
        {B, H, KVH, 3, CAP, lengths, CLATTN_ALGORITHM_STAGED, NONE, true, NULL, NULL, NULL, false},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        attend_check(dev, &cases[c], &k, &v, NULL, NULL, 0, 300 + c);
}
END_TEST

/* ---- 2. paged ---- */

START_TEST(test_paged)
{
    const size_t dev = TU_DEVICE(_i), idx = TU_CASE(_i);
    const token_pair *p = &pairs[idx / 2];
    const size_t BS = idx % 2 ? 64 : 32, COLS = 160 / BS + 1, B = 2, KVH = 2, H = 4, D = p->dim;
    const size_t blocks = B * COLS + 1;
    tu_set_label("paged K %s V %s (D %zu), blocks of %zu on %s", clattn_dtype_name(p->k), clattn_dtype_name(p->v), D,
                 BS, tu_dev_spec[dev]);
    clattn_context *ctx = tu_ctx[dev];
    /* sequence b's block c is block (b + 2c + 1) mod blocks: scattered, no two alike */
    int *table = tu_track_malloc(B * COLS * sizeof *table);
    for (size_t b = 0; b < B; b++)
        for (size_t c = 0; c < COLS; c++)
            table[b * COLS + c] = (int)((b + 2 * c + 1) % blocks);
    cl_mem tm = tu_dev_alloc_exact(ctx, B * COLS, NULL);
    ck_assert(clEnqueueWriteBuffer(clattn_context_queue(ctx), tm, CL_TRUE, 0, B * COLS * sizeof *table, table, 0, NULL,
                                   NULL) == CL_SUCCESS);
    cache_side k = side_make(ctx, p->k, blocks * KVH, BS, D), v = side_make(ctx, p->v, blocks * KVH, BS, D);
    clattn_paged_cache cache = CLATTN_PAGED_CACHE_INIT;
    cache.k_pool = k.mem;
    cache.v_pool = v.mem;
    cache.blocks = blocks;
    cache.block_size = BS;
    cache.block_table = tm;
    cache.max_blocks = COLS;
    clattn_sdpa_desc d = tu_sdpa_desc(B, H, 1, 0, D, 0);
    d.kv_heads = KVH;
    d.k_dtype = p->k;
    d.v_dtype = p->v;
    size_t lengths[2] = {0, 3}; /* (sequence 1's first 3 rows: the pool's zeros, on both sides) */
    const size_t news[] = {1, 70, 33, 50};
    for (size_t s = 0; s < sizeof news / sizeof news[0]; s++) {
        const size_t n = news[s], nnew = B * KVH * n * D;
        float *kn = rows_make(nnew, D, 2.0f, true, 400 + s), *vn = rows_make(nnew, D, 1.0f, false, 500 + s);
        cl_mem km = tu_dev_alloc(ctx, nnew, kn), vm = tu_dev_alloc(ctx, nnew, vn);
        TU_ASSERT_OK(clattn_kv_append_paged(ctx, &d, &cache, lengths, n, km, vm), ctx, "clattn_kv_append_paged");
        for (size_t b = 0; b < B; b++)
            for (size_t h = 0; h < KVH; h++)
                for (size_t r = 0; r < n; r++) { /* row by row: rows cross blocks */
                    const size_t j = lengths[b] + r, head = (size_t)table[b * COLS + j / BS] * KVH + h;
                    side_append(&k, head, j % BS, kn + ((b * KVH + h) * n + r) * D, 1);
                    side_append(&v, head, j % BS, vn + ((b * KVH + h) * n + r) * D, 1);
                }
        lengths[0] += n;
        lengths[1] += n;
        side_check_bytes(ctx, &k, "after a paged append");
        side_check_bytes(ctx, &v, "after a paged append");
    }
    const attend_case a = {B, H, KVH, 2, COLS * BS, lengths, CLATTN_ALGORITHM_AUTO, BR, false, NULL, NULL, NULL, false};
    attend_check(dev, &a, &k, &v, &cache, table, COLS, 600 + idx);
}
END_TEST

/* ---- 3. special values ---- */

/* K row 10 holds NaN (channel 5) and V row 12 inf; K's channel 7 is 0 throughout; 40 rows, so rows 0 … 31
 * are a whole group. A query at position 9 reads rows 0 … 9 of that group and stays finite (the
 * reference over the same values); one at 39 sees the NaN and is NaN. Then the cache is rolled back to
 * 32 rows and refilled: the group below stays, the tail takes the new rows. */
START_TEST(test_special)
{
    const size_t dev = TU_DEVICE(_i);
    const clattn_dtype kt = _i / tu_ndev ? CLATTN_U2_T32 : CLATTN_U4_T32;
    tu_set_label("special values, K %s on %s", clattn_dtype_name(kt), tu_dev_spec[dev]);
    clattn_context *ctx = tu_ctx[dev];
    const size_t CAP = 64, D = 16, N = 40;
    cache_side k = side_make(ctx, kt, 1, CAP, D), v = side_make(ctx, CLATTN_U2_T32, 1, CAP, D);
    float *kn = rows_make(N * D, D, 1.5f, false, 700), *vn = rows_make(N * D, D, 1.0f, false, 701);
    for (size_t j = 0; j < N; j++)
        kn[j * D + 7] = 0.0f;
    kn[10 * D + 5] = NAN;
    vn[12 * D + 2] = INFINITY;
    clattn_sdpa_desc d = tu_sdpa_desc(1, 2, 1, CAP, D, 0);
    d.kv_heads = 1;
    d.k_dtype = kt;
    d.v_dtype = CLATTN_U2_T32;
    size_t length = 0;
    TU_ASSERT_OK(clattn_kv_append(ctx, &d, &length, N, tu_dev_alloc(ctx, N * D, kn), tu_dev_alloc(ctx, N * D, vn), k.mem,
                                  v.mem),
                 ctx, "clattn_kv_append");
    side_append(&k, 0, 0, kn, N);
    side_append(&v, 0, 0, vn, N);
    side_check_bytes(ctx, &k, "with NaN");
    side_check_bytes(ctx, &v, "with inf");
    for (size_t j = 0; j < N; j++)
        ck_assert_msg(j == 10 ? isnan(side_value(&k, 0, j, 0)) && isnan(side_value(&k, 0, j, 7))
                              : side_value(&k, 0, j, 7) == 0.0f && !isnan(side_value(&k, 0, j, 5)),
                      "%s: row %zu reads %g in its zero channel, %g in channel 5", tu_label(), j,
                      side_value(&k, 0, j, 7), side_value(&k, 0, j, 5));
    size_t len = N;
    const long long early = 9, late = 39; /* (9: the row beside the NaN one, in sight and finite) */
    /* in both kernel shapes: a row at a time (CPUs), and value by value (GPUs' staging) */
    const char *other = tu_dev[dev].type == CL_DEVICE_TYPE_CPU ? "class=gpu" : "class=cpu";
    for (int shape = 0; shape < 2; shape++) {
        const attend_case before = {1, 2, 1, 1, CAP, &len, CLATTN_ALGORITHM_DECODE, CLATTN_CAUSAL_TOP_LEFT, false,
                                    shape ? other : NULL, &early, NULL, false};
        const attend_case after = {1, 2, 1, 1, CAP, &len, CLATTN_ALGORITHM_DECODE, CLATTN_CAUSAL_TOP_LEFT, false,
                                   shape ? other : NULL, &late, NULL, true};
        attend_check(dev, &before, &k, &v, NULL, NULL, 0, 702);
        attend_check(dev, &after, &k, &v, NULL, NULL, 0, 703);
    }
    /* Rolled back to 32 rows (the group below kept), 20 new finite rows. */
    length = 32;
    float *kr = rows_make(20 * D, D, 1.0f, true, 704), *vr = rows_make(20 * D, D, 1.0f, false, 705);
    TU_ASSERT_OK(clattn_kv_append(ctx, &d, &length, 20, tu_dev_alloc(ctx, 20 * D, kr), tu_dev_alloc(ctx, 20 * D, vr),
                                  k.mem, v.mem),
                 ctx, "clattn_kv_append after a rollback");
    side_append(&k, 0, 32, kr, 20);
    side_append(&v, 0, 32, vr, 20);
    side_check_bytes(ctx, &k, "after a rollback");
    len = 52;
    const long long last = 51;
    const clattn_window past_nan = {30, 0}; /* keys 21 … 51: the group's rows after the NaN, and the tail */
    const attend_case refilled = {1, 2, 1, 1, CAP, &len, CLATTN_ALGORITHM_DECODE, CLATTN_CAUSAL_TOP_LEFT, false, NULL,
                                  &last, &past_nan, false};
    attend_check(dev, &refilled, &k, &v, NULL, NULL, 0, 706);
}
END_TEST

/* ---- 4. quantisation error ---- */

typedef struct {
    clattn_dtype k, v;
    double bound_random, bound_outliers;
} error_case;

/* Both tensors in a token format (beside kv_formats' table, where K and V share a format), and KIVI's
 * pairing: keys per channel, values per token. */
static const error_case errors[] = {
    {CLATTN_U4_T32, CLATTN_U4_T32, 0.15, 0.3},
    {CLATTN_U2_T32, CLATTN_U2_T32, 0.6, 1.0},
    {CLATTN_U4_T32, CLATTN_U4_G32, 0.15, 0.3},
    {CLATTN_U2_T32, CLATTN_U4_G32, 0.5, 1.0},
};
#define NERRORS (sizeof errors / sizeof errors[0])

/* As kv_formats' error case: decode, 8 heads over 2 K/V heads, S = 512 appended from float32, D = 128,
 * K and V uniform in [−1, 1], "outliers": 4 of the 128 K channels 20× larger; the relative RMS of the
 * output against attention over the float32 cache. */
START_TEST(test_error)
{
    const size_t idx = TU_CASE(_i), dev = TU_DEVICE(_i);
    const error_case *c = &errors[idx];
    enum { H = 8, KVH = 2, S = 512, D = 128 };
    double rel[2] = {0, 0};
    for (int outliers = 0; outliers < 2; outliers++) {
        tu_set_label("error of K %s V %s, %s on %s", clattn_dtype_name(c->k), clattn_dtype_name(c->v),
                     outliers ? "outlier channels" : "random", tu_dev_spec[dev]);
        clattn_context *ctx = tu_ctx[dev];
        const size_t nk = (size_t)KVH * S * D, nq = (size_t)H * D;
        float *q, *k, *v;
        tu_error_inputs(nq, nk, D, outliers, &q, &k, &v);
        cache_side kc = side_make(ctx, c->k, KVH, S, D), vc = side_make(ctx, c->v, KVH, S, D);
        clattn_sdpa_desc d = tu_sdpa_desc(1, H, 1, S, D, 0);
        d.kv_heads = KVH;
        d.k_dtype = c->k;
        d.v_dtype = c->v;
        size_t length = 0;
        TU_ASSERT_OK(clattn_kv_append(ctx, &d, &length, S, tu_dev_alloc(ctx, nk, k), tu_dev_alloc(ctx, nk, v), kc.mem,
                                      vc.mem),
                     ctx, "clattn_kv_append");
        for (size_t h = 0; h < KVH; h++) {
            side_append(&kc, h, 0, k + h * S * D, S);
            side_append(&vc, h, 0, v + h * S * D, S);
        }
        cl_mem qm = tu_dev_alloc(ctx, nq, q), om = tu_dev_alloc(ctx, nq, NULL);
        TU_ASSERT_OK(clattn_sdpa(ctx, &d, qm, kc.mem, vc.mem, NULL, om, NULL, NULL), ctx, "clattn_sdpa");
        float *o = tu_dev_read_checked(ctx, om, nq, "out");
        float *kd = tu_falloc(nk), *vd = tu_falloc(nk);
        for (size_t h = 0; h < KVH; h++)
            for (size_t j = 0; j < S; j++)
                for (size_t e = 0; e < D; e++) {
                    kd[(h * S + j) * D + e] = side_value(&kc, h, j, e);
                    vd[(h * S + j) * D + e] = side_value(&vc, h, j, e);
                }
        clattn_sdpa_desc rd = tu_sdpa_desc(1, H, 1, S, D, 0);
        rd.kv_heads = KVH;
        double *exact = tu_dalloc(nq), *dequantised = tu_dalloc(nq);
        ref_sdpa(&rd, q, k, v, NULL, exact, NULL, NULL);
        ref_sdpa(&rd, q, kd, vd, NULL, dequantised, NULL, NULL);
        check_close_named("out against the dequantised cache", o, dequantised, nq, NULL);
        rel[outliers] = tu_relative_rms_within(o, exact, nq, outliers ? c->bound_outliers : c->bound_random);
    }
    if (dev == 0)
        printf("quantisation error K %-7s V %-7s: relative RMS of the output %.2e (random), %.2e (outlier channels)\n",
               clattn_dtype_name(c->k), clattn_dtype_name(c->v), rel[0], rel[1]);
}
END_TEST

/* ---- 5. bad arguments ---- */

START_TEST(test_bad)
{
    const size_t dev = TU_DEVICE(_i);
    tu_set_label("bad token-format arguments on %s", tu_dev_spec[dev]);
    clattn_context *ctx = tu_ctx[dev];
    /* the chunk's bytes: header, groups (mask, D scales, D zeros, 32 packed rows), a float16 tail */
    ck_assert_uint_eq(clattn_dtype_head_bytes(CLATTN_U4_T32, 100, 16), 4 + 3 * (4 + 64 + 256) + 32 * 32);
    ck_assert_uint_eq(clattn_dtype_head_bytes(CLATTN_U2_T32, 31, 16), 4 + 0 + 32 * 32);
    ck_assert_uint_eq(clattn_dtype_head_bytes(CLATTN_U2_T32, 64, 18), 0); /* (a row not a multiple of 4) */
    ck_assert_uint_eq(clattn_dtype_head_bytes(CLATTN_Q4_0, 10, 64), 10 * 36);
    ck_assert_uint_eq(clattn_dtype_bytes(CLATTN_U4_T32, 64), 0); /* (no bytes of its own per row) */
    ck_assert_uint_eq(clattn_dtype_size(CLATTN_U4_T32), 0);
    ck_assert_int_eq(clattn_dtype_from_name("u2_t32"), CLATTN_U2_T32);
    const size_t B = 1, H = 2, S = 40, D = 16, head = clattn_dtype_head_bytes(CLATTN_U4_T32, S, D);
    cl_mem q = tu_dev_alloc(ctx, H * D, NULL), out = tu_dev_alloc(ctx, H * D, NULL);
    cl_mem refused = tu_dev_alloc(ctx, H * D, NULL); /* (the refused calls' output: never written) */
    cl_mem k = tu_dev_alloc_exact(ctx, (2 * head + 3) / 4, NULL), v = tu_dev_alloc(ctx, 2 * S * D, NULL);
    cl_mem small = tu_dev_alloc_exact(ctx, (2 * head - 4) / 4, NULL);
    clattn_sdpa_desc d = tu_sdpa_desc(B, H, 1, S, D, 0);
    d.k_dtype = CLATTN_U4_T32;
    TU_ASSERT_OK(clattn_sdpa(ctx, &d, q, k, v, NULL, out, NULL, NULL), ctx, "clattn_sdpa over a zeroed chunk");
    ck_assert_int_eq(clattn_sdpa(ctx, &d, q, small, v, NULL, refused, NULL, NULL), CLATTN_ERROR_BUFFER_TOO_SMALL);
    ck_assert_ptr_nonnull(strstr(clattn_last_error(ctx), "buffer k"));
    /* the host-array call takes the chunks' bytes (the same as the device buffer's), the ragged one none */
    float *qh = tu_falloc(H * D), *vh = tu_falloc(2 * S * D), *oh = tu_host_alloc(H * D, NULL);
    uint32_t *kh = tu_track_malloc(2 * head); /* (zero chunks: every row in the tail, all 0) */
    cl_mem kz = tu_dev_alloc_exact(ctx, 2 * head / 4, (const float *)kh), om = tu_dev_alloc(ctx, H * D, NULL);
    TU_ASSERT_OK(clattn_sdpa_host(ctx, &d, qh, kh, vh, NULL, oh, NULL, NULL), ctx, "clattn_sdpa_host, a u4_t32 K");
    TU_ASSERT_OK(clattn_sdpa(ctx, &d, tu_dev_alloc(ctx, H * D, qh), kz, tu_dev_alloc(ctx, 2 * S * D, vh), NULL, om, NULL,
                             NULL),
                 ctx, "clattn_sdpa, the same bytes");
    const float *od = tu_dev_read(ctx, om, H * D);
    for (size_t i = 0; i < H * D; i++)
        ck_assert_msg(oh[i] == od[i], "%s: host arrays' out[%zu] %g, the device buffers' %g", tu_label(), i, oh[i], od[i]);
    clattn_ragged rh = CLATTN_RAGGED_INIT;
    rh.q_starts = (const size_t[]){0, 1};
    rh.k_starts = (const size_t[]){0, S};
    float *oh2 = tu_host_alloc(H * D, NULL);
    ck_assert_int_eq(clattn_sdpa_ragged_host(ctx, &d, &rh, qh, kh, vh, NULL, oh2, NULL), CLATTN_ERROR_INVALID_VALUE);
    ck_assert_msg(strstr(clattn_last_error(ctx), "token format"), "%s: %s", tu_label(), clattn_last_error(ctx));
    ck_assert(tu_host_all_sentinel(oh2, H * D));
    /* a ragged batch */
    const size_t starts[2] = {0, S};
    clattn_ragged r = CLATTN_RAGGED_INIT;
    r.q_starts = (const size_t[]){0, 1};
    r.k_starts = starts;
    ck_assert_int_eq(clattn_sdpa_ragged(ctx, &d, &r, q, k, v, NULL, refused, NULL), CLATTN_ERROR_INVALID_VALUE);
    ck_assert_msg(strstr(clattn_last_error(ctx), "token format"), "%s: %s", tu_label(), clattn_last_error(ctx));
    /* a row size not a multiple of 4 */
    clattn_sdpa_desc odd = tu_sdpa_desc(B, H, 1, S, 18, 0);
    odd.v_dtype = CLATTN_U2_T32;
    ck_assert_int_eq(clattn_sdpa(ctx, &odd, q, v, k, NULL, refused, NULL, NULL), CLATTN_ERROR_INVALID_VALUE);
    ck_assert_ptr_nonnull(strstr(clattn_last_error(ctx), "multiple of 4"));
    /* paged blocks of 16 rows hold no group */
    clattn_paged_cache cache = CLATTN_PAGED_CACHE_INIT;
    cache.k_pool = k;
    cache.v_pool = v;
    cache.blocks = 1;
    cache.block_size = 16;
    cache.block_table = tu_dev_alloc(ctx, 1, NULL);
    cache.max_blocks = 1;
    const size_t one = 1;
    d.kv_len = 0;
    ck_assert_int_eq(clattn_sdpa_paged(ctx, &d, &cache, &one, q, NULL, refused, NULL), CLATTN_ERROR_INVALID_VALUE);
    ck_assert_ptr_nonnull(strstr(clattn_last_error(ctx), "no whole group"));
    ck_assert_msg(tu_dev_all_sentinel(ctx, refused, H * D), "%s: a refused call wrote its output", tu_label());
}
END_TEST

static Suite *make_suite(void)
{
    const char *subset = getenv("CLATTN_TEST_KV_FORMATS_SUBSET");
    const bool small = subset && strcmp(subset, "1") == 0;
    Suite *s = suite_create("kv_tokens");
    tu_add_loop(s, "append", test_append, (small ? 1 : NPAIRS * 3) * tu_ndev);
    tu_add_loop(s, "paged", test_paged, (small ? 1 : NPAIRS * 2) * tu_ndev);
    tu_add_loop(s, "special", test_special, 2 * tu_ndev);
    tu_add_loop(s, "error", test_error, (small ? 1 : NERRORS) * tu_ndev);
    tu_add_loop(s, "bad", test_bad, tu_ndev);
    return s;
}

int main(void) { return tu_main(make_suite); }
