/*
 * Quantised K/V formats (src/base/formats.def, since 0.14) on every device, against the fp64 reference
 * computed on the dequantised cache (tests/formats_ref.c reads the bytes by the formats' definitions):
 *
 *  1. paths: each format (q8_0, q4_0, u8/u4 groups of 32/64/128, FP8 E4M3 and E5M2 with and without row
 *     scales) and K/V pairs of different formats, host-written caches, through the decode kernels (1 and
 *     4 query rows, grouped heads), the fused kernel (causal prefill) and the staged path, each in both
 *     kernel shapes (the device's own tuning, and the other class's: rows along d or in the lanes, tiles
 *     staged in local memory or read in place); a paged pool and a ragged batch.
 *  2. append: clattn_kv_append (dense, from float32, float16 and bfloat16 rows) and clattn_kv_append_paged
 *     quantise on the device: the bytes equal the host quantiser's (the same algorithm, to nearest even),
 *     and decoding over the appended cache matches the reference on those bytes.
 *  3. special: a block holding NaN or inf reads as NaN in its own row only (queries that cannot see that
 *     key stay finite); all-zero blocks read as 0; values past the fp16 scale's range saturate.
 *  4. error: the quantisation error itself — attention over each format's cache against attention over
 *     the float32 cache — on random data and with outlier channels, printed (the README's table), with
 *     bounds that a broken quantiser or reader would pass.
 *  5. bad: rows not a multiple of the block, a quantised Q or output, scales with a block format,
 *     buffers too small in the format's bytes, host arrays for quantised K/V: each a status naming the
 *     argument, nothing written; the public size and name helpers.
 *  6. memory: a paged q4_0 cache's bytes against float16's, and decoding over one without a dequantised
 *     copy (the context's peak temporaries).
 */
#include "test_util.h"

#include "formats_ref.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    clattn_dtype k, v;
    bool scaled; /* FP8 with row scales */
} kv_pair;

/* K and V in different formats first (between them: every kind of format — 8- and 4-bit blocks with and
 * without zero points, both FP8s, with and without row scales, int8), then each format as both. The
 * first SUBSET_PAIRS are the subset that the slow simulators (oclgrind) run: CLATTN_TEST_KV_FORMATS_SUBSET=1. */
static const kv_pair pairs[] = {
    {CLATTN_Q8_0, CLATTN_Q4_0, false},         {CLATTN_U8_G64, CLATTN_FP8_E5M2, false},
    {CLATTN_FP8_E4M3, CLATTN_U4_G128, true},   {CLATTN_INT8, CLATTN_U4_G32, false},
    {CLATTN_FP8_E4M3, CLATTN_FP8_E5M2, true},  {CLATTN_Q8_0, CLATTN_Q8_0, false},
    {CLATTN_Q4_0, CLATTN_Q4_0, false},         {CLATTN_U8_G32, CLATTN_U8_G32, false},
    {CLATTN_U8_G64, CLATTN_U8_G64, false},     {CLATTN_U8_G128, CLATTN_U8_G128, false},
    {CLATTN_U4_G32, CLATTN_U4_G32, false},     {CLATTN_U4_G64, CLATTN_U4_G64, false},
    {CLATTN_U4_G128, CLATTN_U4_G128, false},   {CLATTN_FP8_E4M3, CLATTN_FP8_E4M3, false},
    {CLATTN_FP8_E5M2, CLATTN_FP8_E5M2, false},
};
#define SUBSET_PAIRS 3
static size_t npairs = sizeof pairs / sizeof pairs[0];
#define NPAIRS npairs

/* The other class's kernel shapes for this device (options.tuning "class=…"), or "" for its own. */
static const char *shape_tuning(size_t dev, int other)
{
    if (!other)
        return "";
    return tu_dev[dev].type == CL_DEVICE_TYPE_CPU ? "class=gpu" : "class=cpu";
}

static clattn_context *context_tuned(size_t dev, const char *tuning)
{
    clattn_context_options o = CLATTN_CONTEXT_OPTIONS_INIT;
    o.device = tu_dev_spec[dev];
    o.tuning = tuning;
    clattn_context *ctx = NULL;
    clattn_status st = clattn_context_create_with_options(&ctx, &o);
    TU_ASSERT_OK(st, NULL, "clattn_context_create_with_options");
    return ctx;
}

/* Whether a tensor of this type has a scale per row: int8 always, FP8 when the pair says so. */
static bool has_row_scales(clattn_dtype type, bool scaled)
{
    return type == CLATTN_INT8 || (scaled && (type == CLATTN_FP8_E4M3 || type == CLATTN_FP8_E5M2));
}

/* A K or V tensor of n values (rows of `row`) in `type`: host-quantised, uploaded, its scales too. */
typedef struct {
    tu_typed t;
    cl_mem mem, scales;
} kv_tensor;

static kv_tensor kv_make(clattn_context *ctx, clattn_dtype type, bool scaled, const float *src, size_t n,
                         size_t row)
{
    kv_tensor x;
    x.t = has_row_scales(type, scaled) && type != CLATTN_INT8 ? tu_typed_make_scaled(type, src, n, row)
              : tu_typed_make(type, src, n, row);
    x.mem = tu_typed_upload(ctx, &x.t);
    x.scales = x.t.scales ? tu_typed_scales(ctx, &x.t) : NULL;
    return x;
}

/* The head size a pair allows: 128 for groups of 128, else 64. */
static size_t pair_dim(const kv_pair *p)
{
    const size_t b = clattn_dtype_block(p->k) > clattn_dtype_block(p->v) ? clattn_dtype_block(p->k)
                                                                             : clattn_dtype_block(p->v);
    return b > 64 ? 128 : 64;
}

/* ---- 1. paths ---- */

typedef struct {
    const char *name;
    clattn_algorithm algorithm;
    size_t B, H, KVH, L, S;
    clattn_causal causal;
    bool weights;
} path_case;

static const path_case paths[] = {
    {"decode L 1", CLATTN_ALGORITHM_DECODE, 2, 6, 3, 1, 301, NONE, false},
    {"decode L 4 (speculative), grouped 8/2", CLATTN_ALGORITHM_DECODE, 1, 8, 2, 4, 190, BR, false},
    {"fused causal prefill (several key tiles)", CLATTN_ALGORITHM_FUSED, 2, 4, 2, 37, 161, BR, false},
    {"staged with weights", CLATTN_ALGORITHM_STAGED, 1, 3, 3, 5, 133, NONE, true},
};
#define NPATHS (sizeof paths / sizeof paths[0])

START_TEST(test_paths)
{
    const size_t dev = TU_DEVICE(_i), idx = TU_CASE(_i);
    const kv_pair *p = &pairs[idx / (2 * NPATHS)];
    const path_case *c = &paths[idx % NPATHS];
    const int other = (int)(idx / NPATHS % 2);
    tu_set_label("%s K %s V %s%s, %s shapes, on %s", c->name, clattn_dtype_name(p->k), clattn_dtype_name(p->v),
                 p->scaled ? " (scaled)" : "", other ? "the other class's" : "its own", tu_dev_spec[dev]);
    clattn_context *ctx = context_tuned(dev, shape_tuning(dev, other));
    const size_t D = pair_dim(p);
    clattn_sdpa_desc d = tu_sdpa_desc(c->B, c->H, c->L, c->S, D, 0);
    d.kv_heads = c->KVH;
    d.algorithm = c->algorithm;
    d.k_dtype = p->k;
    d.v_dtype = p->v;
    clattn_masks masks = CLATTN_MASKS_INIT;
    masks.causal = c->causal;
    d.masks = &masks;
    if (c->weights)
        d.weights_output = CLATTN_WEIGHTS_SOFTMAX;
    const size_t nq = c->B * c->H * c->L * D, nk = c->B * c->KVH * c->S * D, no = nq, nw = c->B * c->H * c->L * c->S;
    float *q = tu_falloc(nq), *k = tu_falloc(nk), *v = tu_falloc(nk);
    tu_fill_uniform(q, nq, 1.0f, 31 + idx);
    tu_fill_uniform(k, nk, 1.5f, 32 + idx);
    tu_fill_uniform(v, nk, 1.0f, 33 + idx);
    kv_tensor kt = kv_make(ctx, p->k, p->scaled, k, nk, D), vt = kv_make(ctx, p->v, p->scaled, v, nk, D);
    d.k_scales = kt.scales;
    d.v_scales = vt.scales;
    cl_mem qm = tu_dev_alloc(ctx, nq, q), om = tu_dev_alloc(ctx, no, NULL);
    cl_mem wm = c->weights ? tu_dev_alloc(ctx, nw, NULL) : NULL;
    clattn_status st = clattn_sdpa(ctx, &d, qm, kt.mem, vt.mem, NULL, om, wm, NULL);
    TU_ASSERT_OK(st, ctx, "clattn_sdpa");
    float *o = tu_dev_read_checked(ctx, om, no, "out");
    double *ro = tu_dalloc(no), *rw = c->weights ? tu_dalloc(nw) : NULL;
    clattn_sdpa_desc rd = d;
    rd.k_dtype = rd.v_dtype = CLATTN_FLOAT32;
    ref_sdpa(&rd, q, kt.t.values, vt.t.values, NULL, ro, rw, NULL);
    check_close_named("out", o, ro, no, NULL);
    if (c->weights)
        check_close_named("weights", tu_dev_read_checked(ctx, wm, nw, "weights"), rw, nw, NULL);
    clattn_context_free(ctx);
}
END_TEST

/* A block table on the device (tracked). */
static cl_mem table_upload(clattn_context *ctx, const int *table, size_t n)
{
    cl_int err;
    cl_mem m = clCreateBuffer(clattn_context_cl_context(ctx), CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, n * sizeof(int),
                              (void *)table, &err);
    ck_assert_msg(err == CL_SUCCESS, "%s: clCreateBuffer(block table) failed: %d", tu_label(), (int)err);
    tu_track_mem(m);
    return m;
}

/* The dense reference's K and V (B, kv_heads, 45, D): row j of head h of sequence b is row rows[(b·kv_heads
 * + h)·45 + j] of the dequantised values, for j below the sequence's length. */
static void gather_rows(const kv_tensor *kt, const kv_tensor *vt, const size_t *rows, const size_t *lengths, size_t B,
                        size_t kv_heads, size_t D, float *kd, float *vd)
{
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < kv_heads; h++)
            for (size_t j = 0; j < lengths[b]; j++) {
                const size_t to = ((b * kv_heads + h) * 45 + j) * D, from = rows[(b * kv_heads + h) * 45 + j] * D;
                memcpy(kd + to, kt->t.values + from, D * sizeof(float));
                memcpy(vd + to, vt->t.values + from, D * sizeof(float));
            }
}

/* A paged pool and a ragged batch in each format (the pages and the packed rows are whole rows, so a
 * block format's blocks never straddle them). */
START_TEST(test_layouts)
{
    const size_t dev = TU_DEVICE(_i), idx = TU_CASE(_i);
    const kv_pair *p = &pairs[idx / 2];
    const bool paged = idx % 2 == 0;
    tu_set_label("%s K %s V %s on %s", paged ? "paged" : "ragged", clattn_dtype_name(p->k), clattn_dtype_name(p->v),
                 tu_dev_spec[dev]);
    clattn_context *ctx = tu_ctx[dev];
    const size_t D = pair_dim(p), B = 2, H = 4, KVH = 2, L = 3;
    const size_t lengths[2] = {45, 17}; /* keys per sequence */
    clattn_sdpa_desc d = tu_sdpa_desc(B, H, L, 45, D, 0);
    d.kv_heads = KVH;
    d.k_dtype = p->k;
    d.v_dtype = p->v;
    const size_t nq = B * H * L * D, no = nq;
    float *q = tu_falloc(nq);
    tu_fill_uniform(q, nq, 1.0f, 41 + idx);
    cl_mem qm = tu_dev_alloc(ctx, nq, q), om = tu_dev_alloc(ctx, no, NULL);
    /* The dense reference's K/V (B, KVH, 45, D), zero past each length (hidden by the key lengths). */
    float *kd = tu_falloc(B * KVH * 45 * D), *vd = tu_falloc(B * KVH * 45 * D);
    clattn_status st;
    if (paged) {
        enum { BS = 16, BLOCKS = 6, COLS = 3 };
        const int table[2 * COLS] = {4, 0, 2, 5, 1, -1};
        const size_t npool = (size_t)BLOCKS * KVH * BS * D;
        float *kp = tu_falloc(npool), *vp = tu_falloc(npool);
        tu_fill_uniform(kp, npool, 1.5f, 42 + idx);
        tu_fill_uniform(vp, npool, 1.0f, 43 + idx);
        kv_tensor kt = kv_make(ctx, p->k, p->scaled, kp, npool, D), vt = kv_make(ctx, p->v, p->scaled, vp, npool, D);
        size_t *rows = tu_track_malloc(B * KVH * 45 * sizeof(size_t));
        for (size_t b = 0; b < B; b++)
            for (size_t h = 0; h < KVH; h++)
                for (size_t j = 0; j < lengths[b]; j++)
                    rows[(b * KVH + h) * 45 + j] = ((size_t)table[b * COLS + j / BS] * KVH + h) * BS + j % BS;
        gather_rows(&kt, &vt, rows, lengths, B, KVH, D, kd, vd);
        cl_mem tm = table_upload(ctx, table, sizeof table / sizeof table[0]);
        clattn_paged_cache cache = CLATTN_PAGED_CACHE_INIT;
        cache.k_pool = kt.mem;
        cache.v_pool = vt.mem;
        cache.blocks = BLOCKS;
        cache.block_size = BS;
        cache.block_table = tm;
        cache.max_blocks = COLS;
        d.k_scales = kt.scales;
        d.v_scales = vt.scales;
        d.kv_len = 0; /* (the table's reach) */
        st = clattn_sdpa_paged(ctx, &d, &cache, lengths, qm, NULL, om, NULL);
        TU_ASSERT_OK(st, ctx, "clattn_sdpa_paged");
    } else {
        /* (heads, rows, D) packed: sequence b's keys from row k_starts[b] */
        const size_t k_starts[3] = {0, 45, 62}, q_starts[3] = {0, 3, 6}, rows = 62;
        const size_t nk = KVH * rows * D;
        float *kr = tu_falloc(nk), *vr = tu_falloc(nk), *qr = tu_falloc(H * 6 * D);
        tu_fill_uniform(kr, nk, 1.5f, 44 + idx);
        tu_fill_uniform(vr, nk, 1.0f, 45 + idx);
        kv_tensor kt = kv_make(ctx, p->k, p->scaled, kr, nk, D), vt = kv_make(ctx, p->v, p->scaled, vr, nk, D);
        size_t *at = tu_track_malloc(B * KVH * 45 * sizeof(size_t));
        for (size_t b = 0; b < B; b++)
            for (size_t h = 0; h < KVH; h++)
                for (size_t j = 0; j < lengths[b]; j++)
                    at[(b * KVH + h) * 45 + j] = h * rows + k_starts[b] + j;
        gather_rows(&kt, &vt, at, lengths, B, KVH, D, kd, vd);
        for (size_t b = 0; b < B; b++) /* the queries, (heads, rows, D) from the dense (B, H, L, D) */
            for (size_t h = 0; h < H; h++)
                for (size_t i = 0; i < L; i++)
                    memcpy(qr + (h * 6 + q_starts[b] + i) * D, q + ((b * H + h) * L + i) * D, D * sizeof(float));
        clattn_ragged rg = CLATTN_RAGGED_INIT;
        rg.q_starts = q_starts;
        rg.k_starts = k_starts;
        rg.layout = CLATTN_RAGGED_HEADS_ROWS;
        d.k_scales = kt.scales;
        d.v_scales = vt.scales;
        cl_mem qrm = tu_dev_alloc(ctx, H * 6 * D, qr), orm = tu_dev_alloc(ctx, H * 6 * D, NULL);
        st = clattn_sdpa_ragged(ctx, &d, &rg, qrm, kt.mem, vt.mem, NULL, orm, NULL);
        TU_ASSERT_OK(st, ctx, "clattn_sdpa_ragged");
        float *orr = tu_dev_read_checked(ctx, orm, H * 6 * D, "out");
        float *o = tu_falloc(no);
        for (size_t b = 0; b < B; b++)
            for (size_t h = 0; h < H; h++)
                for (size_t i = 0; i < L; i++)
                    memcpy(o + ((b * H + h) * L + i) * D, orr + (h * 6 + q_starts[b] + i) * D, D * sizeof(float));
        cl_int err = clEnqueueWriteBuffer(clattn_context_queue(ctx), om, CL_TRUE, 0, no * sizeof(float), o, 0, NULL,
                                          NULL);
        ck_assert(err == CL_SUCCESS);
    }
    float *o = tu_dev_read_checked(ctx, om, no, "out");
    clattn_sdpa_desc rd = tu_sdpa_desc(B, H, L, 45, D, 0);
    rd.kv_heads = KVH;
    clattn_masks rm = CLATTN_MASKS_INIT;
    const size_t key_lengths[2] = {lengths[0], lengths[1]};
    rm.key_lengths = key_lengths;
    rd.masks = &rm;
    double *ro = tu_dalloc(no);
    ref_sdpa(&rd, q, kd, vd, NULL, ro, NULL, NULL);
    check_close_named("out", o, ro, no, NULL);
}
END_TEST

/* ---- 2. append ---- */

/* How many bytes differ between the device's and the host's quantisation (0 expected: the same
 * algorithm in float, to nearest even). */
static size_t bytes_differing(const unsigned char *a, const unsigned char *b, size_t n)
{
    size_t differ = 0;
    for (size_t i = 0; i < n; i++)
        differ += a[i] != b[i];
    return differ;
}

static const clattn_dtype sources[] = {CLATTN_FLOAT32, CLATTN_FLOAT16, CLATTN_BFLOAT16};

START_TEST(test_append)
{
    const size_t dev = TU_DEVICE(_i), idx = TU_CASE(_i);
    const kv_pair *p = &pairs[idx / 4];
    const bool paged = idx % 4 == 3;
    const clattn_dtype from = sources[idx % 4 % 3];
    tu_set_label("append %s rows to %s K %s V %s%s on %s", clattn_dtype_name(from), paged ? "a paged" : "a dense",
                 clattn_dtype_name(p->k), clattn_dtype_name(p->v), p->scaled ? " (scaled)" : "", tu_dev_spec[dev]);
    clattn_context *ctx = tu_ctx[dev];
    const size_t D = pair_dim(p), B = 2, H = 4, KVH = 2, CAP = 32, NEW = 5;
    const size_t lengths[2] = {0, 9};
    clattn_sdpa_desc d = tu_sdpa_desc(B, H, 1, CAP, D, 0);
    d.kv_heads = KVH;
    d.q_dtype = from;
    d.k_dtype = p->k;
    d.v_dtype = p->v;
    const size_t nnew = B * KVH * NEW * D, ncache = B * KVH * CAP * D;
    float *kn = tu_falloc(nnew), *vn = tu_falloc(nnew);
    tu_fill_uniform(kn, nnew, 2.0f, 51 + idx);
    tu_fill_uniform(vn, nnew, 1.0f, 52 + idx);
    /* the new rows in their type: the values the cache's quantiser sees */
    tu_typed kt_new = tu_typed_make(from, kn, nnew, D), vt_new = tu_typed_make(from, vn, nnew, D);
    const bool k_rows = has_row_scales(p->k, p->scaled), v_rows = has_row_scales(p->v, p->scaled);
    /* Dense: (B, KVH, CAP, D); paged: blocks of 8 rows, sequence b's rows j in block table[b][j / 8]. */
    enum { BS = 8, COLS = 4 };
    const int table[2 * COLS] = {3, 1, 6, 0, 2, 7, 4, 5};
    const size_t rows = B * KVH * CAP; /* both layouts: 8 blocks × KVH × 8 rows = B × KVH × CAP */
    float *zero = tu_falloc(ncache);
    tu_typed kz = tu_typed_make(p->k, zero, ncache, D), vz = tu_typed_make(p->v, zero, ncache, D);
    cl_mem kc = tu_typed_upload(ctx, &kz), vc = tu_typed_upload(ctx, &vz);
    cl_mem ks = k_rows ? tu_dev_alloc(ctx, rows, zero) : NULL, vs = v_rows ? tu_dev_alloc(ctx, rows, zero) : NULL;
    d.k_scales = ks;
    d.v_scales = vs;
    cl_mem knm = tu_typed_upload(ctx, &kt_new), vnm = tu_typed_upload(ctx, &vt_new);
    clattn_paged_cache cache = CLATTN_PAGED_CACHE_INIT;
    clattn_status st;
    if (paged) {
        cl_mem tm = table_upload(ctx, table, sizeof table / sizeof table[0]);
        cache.k_pool = kc;
        cache.v_pool = vc;
        cache.blocks = 8;
        cache.block_size = BS;
        cache.block_table = tm;
        cache.max_blocks = COLS;
        st = clattn_kv_append_paged(ctx, &d, &cache, lengths, NEW, knm, vnm);
        TU_ASSERT_OK(st, ctx, "clattn_kv_append_paged");
    } else {
        st = clattn_kv_append(ctx, &d, lengths, NEW, knm, vnm, kc, vc);
        TU_ASSERT_OK(st, ctx, "clattn_kv_append");
    }
    tu_finish(ctx);
    /* The host's quantisation of each new row, where the device put it. */
    const clattn_dtype types[2] = {p->k, p->v};
    const cl_mem caches[2] = {kc, vc}, scales[2] = {ks, vs};
    const tu_typed *news[2] = {&kt_new, &vt_new};
    float *values[2];
    for (int t = 0; t < 2; t++) {
        const size_t row_bytes = clattn_dtype_bytes(types[t], D), total = clattn_dtype_bytes(types[t], ncache);
        unsigned char *dev_bytes = tu_track_malloc(total), *host_row = tu_track_malloc(row_bytes);
        cl_int err = clEnqueueReadBuffer(clattn_context_queue(ctx), caches[t], CL_TRUE, 0, total, dev_bytes, 0, NULL,
                                         NULL);
        ck_assert(err == CL_SUCCESS);
        float *dev_scales = scales[t] ? tu_dev_read(ctx, scales[t], rows) : NULL;
        size_t differ = 0;
        values[t] = tu_falloc(ncache);
        for (size_t b = 0; b < B; b++)
            for (size_t h = 0; h < KVH; h++)
                for (size_t r = 0; r < NEW; r++) {
                    const size_t j = lengths[b] + r;
                    const size_t row = paged ? ((size_t)table[b * COLS + j / BS] * KVH + h) * BS + j % BS
                                             : (b * KVH + h) * CAP + j;
                    const float *src = news[t]->values + ((b * KVH + h) * NEW + r) * D;
                    tu_typed host = has_row_scales(types[t], p->scaled) && types[t] != CLATTN_INT8
                                        ? tu_typed_make_scaled(types[t], src, D, D)
                                        : tu_typed_make(types[t], src, D, D);
                    differ += bytes_differing(dev_bytes + row * row_bytes, host.bytes, row_bytes);
                    if (host.scales)
                        ck_assert_msg(dev_scales[row] == host.scales[0] ||
                                          (isnan(dev_scales[row]) && isnan(host.scales[0])),
                                      "%s: row %zu's scale %g, the host's %g", tu_label(), row, dev_scales[row],
                                      host.scales[0]);
                    (void)host_row;
                }
        ck_assert_msg(differ == 0, "%s: %zu bytes of %s's appended rows differ from the host's quantisation",
                      tu_label(), differ, t ? "V" : "K");
        /* the whole cache as the reference reads it (the dense view: paged rows gathered) */
        for (size_t b = 0; b < B; b++)
            for (size_t h = 0; h < KVH; h++)
                for (size_t j = 0; j < lengths[b] + NEW; j++) {
                    const size_t row = paged ? ((size_t)table[b * COLS + j / BS] * KVH + h) * BS + j % BS
                                             : (b * KVH + h) * CAP + j;
                    for (size_t e = 0; e < D; e++) {
                        const size_t i = row * D + e;
                        const float x = fref_handles(types[t]) ? fref_value(types[t], dev_bytes, i)
                                        : (float)((signed char *)dev_bytes)[i];
                        values[t][((b * KVH + h) * CAP + j) * D + e] = x * (dev_scales ? dev_scales[row] : 1.0f);
                    }
                }
    }
    /* Decoding over what was appended. */
    const size_t total[2] = {lengths[0] + NEW, lengths[1] + NEW};
    clattn_masks masks = CLATTN_MASKS_INIT;
    masks.key_lengths = total;
    d.masks = &masks;
    d.q_dtype = CLATTN_FLOAT32;
    const size_t nq = B * H * D;
    float *q = tu_falloc(nq);
    tu_fill_uniform(q, nq, 1.0f, 53 + idx);
    cl_mem qm = tu_dev_alloc(ctx, nq, q), om = tu_dev_alloc(ctx, nq, NULL);
    if (paged) {
        d.masks = NULL;
        st = clattn_sdpa_paged(ctx, &d, &cache, total, qm, NULL, om, NULL);
    } else {
        st = clattn_sdpa(ctx, &d, qm, kc, vc, NULL, om, NULL, NULL);
    }
    TU_ASSERT_OK(st, ctx, "attention over the appended cache");
    float *o = tu_dev_read_checked(ctx, om, nq, "out");
    clattn_sdpa_desc rd = tu_sdpa_desc(B, H, 1, CAP, D, 0);
    rd.kv_heads = KVH;
    rd.masks = &masks;
    double *ro = tu_dalloc(nq);
    ref_sdpa(&rd, q, values[0], values[1], NULL, ro, NULL, NULL);
    check_close_named("out", o, ro, nq, NULL);
}
END_TEST

/* ---- 3. special values ---- */

/* Key 4 of K/V head 1 holds NaN (in K) and inf (in V); key 2 of head 0 is all zero; key 1 of head 0 holds
 * a value past what a half scale can carry. Decoding two query rows per head at positions 3 and 4
 * (causal): the first cannot see key 4, and stays finite; the second is NaN; K/V head 0's heads match
 * the reference throughout, the saturated value read as the format's largest. */
START_TEST(test_special)
{
    const size_t dev = TU_DEVICE(_i), idx = TU_CASE(_i);
    const kv_pair *p = &pairs[idx];
    tu_set_label("special values, K %s V %s%s on %s", clattn_dtype_name(p->k), clattn_dtype_name(p->v),
                 p->scaled ? " (scaled)" : "", tu_dev_spec[dev]);
    clattn_context *ctx = tu_ctx[dev];
    const size_t D = pair_dim(p), H = 4, KVH = 2, L = 2, S = 12;
    clattn_sdpa_desc d = tu_sdpa_desc(1, H, L, S, D, 0);
    d.kv_heads = KVH;
    d.k_dtype = p->k;
    d.v_dtype = p->v;
    d.algorithm = CLATTN_ALGORITHM_DECODE;
    clattn_masks masks = CLATTN_MASKS_INIT;
    const long long offsets[1] = {3}; /* row i at position 3 + i: row 0 sees keys 0…3 under causal */
    masks.causal = TL;
    masks.query_offsets = offsets;
    d.masks = &masks;
    const size_t nk = KVH * S * D;
    float *q = tu_falloc(H * L * D), *k = tu_falloc(nk), *v = tu_falloc(nk);
    tu_fill_uniform(q, H * L * D, 1.0f, 61);
    tu_fill_uniform(k, nk, 1.0f, 62);
    tu_fill_uniform(v, nk, 1.0f, 63);
    for (size_t e = 0; e < D; e++) {
        k[(0 * S + 2) * D + e] = 0.0f; /* head 0, key 2: all zero */
        v[(0 * S + 2) * D + e] = 0.0f;
    }
    k[(0 * S + 1) * D + 3] = 3e7f; /* head 0, key 1: a scale past half's range (saturates) */
    k[(1 * S + 4) * D + 1] = NAN; /* head 1, key 4: only row 1 (position 4) sees it */
    v[(1 * S + 4) * D + 2] = INFINITY;
    kv_tensor kt = kv_make(ctx, p->k, p->scaled, k, nk, D), vt = kv_make(ctx, p->v, p->scaled, v, nk, D);
    d.k_scales = kt.scales;
    d.v_scales = vt.scales;
    cl_mem qm = tu_dev_alloc(ctx, H * L * D, q), om = tu_dev_alloc(ctx, H * L * D, NULL);
    clattn_status st = clattn_sdpa(ctx, &d, qm, kt.mem, vt.mem, NULL, om, NULL, NULL);
    TU_ASSERT_OK(st, ctx, "clattn_sdpa");
    float *o = tu_dev_read_checked(ctx, om, H * L * D, "out");
    /* heads 0, 1 read K/V head 0; heads 2, 3 head 1 */
    for (size_t h = 2; h < 4; h++) {
        for (size_t e = 0; e < D; e++) {
            ck_assert_msg(isfinite(o[(h * L + 0) * D + e]), "%s: head %zu row 0 (which cannot see the bad key) [%zu] = %g",
                          tu_label(), h, e, o[(h * L + 0) * D + e]);
            ck_assert_msg(isnan(o[(h * L + 1) * D + e]), "%s: head %zu row 1 (which sees it) [%zu] = %g, not NaN",
                          tu_label(), h, e, o[(h * L + 1) * D + e]);
        }
    }
    double *ro = tu_dalloc(H * L * D);
    clattn_sdpa_desc rd = d;
    rd.k_dtype = rd.v_dtype = CLATTN_FLOAT32;
    ref_sdpa(&rd, q, kt.t.values, vt.t.values, NULL, ro, NULL, NULL);
    check_close_named("out of heads 0-1 and of the rows that cannot see the bad key", o, ro, 2 * L * D, NULL);
    for (size_t h = 2; h < 4; h++)
        check_close_named("row 0 of heads 2-3", o + h * L * D, ro + h * L * D, D, NULL);
    /* the saturated block: its value is finite (the largest half scale times its largest step) */
    const float big = kt.t.values[(0 * S + 1) * D + 3];
    const bool fp8 = p->k == CLATTN_FP8_E4M3 || p->k == CLATTN_FP8_E5M2;
    const float expect_least = fp8 && !p->scaled ? (p->k == CLATTN_FP8_E4M3 ? 448.0f : 57344.0f) : 1e5f;
    ck_assert_msg(isfinite(big) && big >= expect_least, "%s: the saturated value reads %g", tu_label(), big);
}
END_TEST

/* ---- 4. the quantisation error ---- */

/* Attention over each format's cache against attention over the float32 cache it was quantised from:
 * random K/V, and K/V with outlier channels (4 of 128 channels 20× larger, as keys have). Printed; the
 * bounds are 2.4–4× what was measured on PoCL (a quantiser or reader wrong by a step fails them). */
typedef struct {
    clattn_dtype type;
    bool scaled;
    double bound_random, bound_outliers;
} error_case;

static const error_case errors[] = {
    {CLATTN_INT8, false, 0.01, 0.05},      {CLATTN_Q8_0, false, 0.01, 0.05},
    {CLATTN_U8_G32, false, 0.01, 0.05},    {CLATTN_U8_G64, false, 0.01, 0.05},
    {CLATTN_U8_G128, false, 0.01, 0.05},   {CLATTN_Q4_0, false, 0.15, 0.6},
    {CLATTN_U4_G32, false, 0.15, 0.6},     {CLATTN_U4_G64, false, 0.15, 0.6},
    {CLATTN_U4_G128, false, 0.15, 0.6},    {CLATTN_FP8_E4M3, false, 0.07, 0.1},
    {CLATTN_FP8_E5M2, false, 0.14, 0.2},   {CLATTN_FP8_E4M3, true, 0.07, 0.1},
    {CLATTN_FP8_E5M2, true, 0.14, 0.2},
};
#define NERRORS (sizeof errors / sizeof errors[0])

START_TEST(test_error)
{
    const size_t idx = TU_CASE(_i), dev = TU_DEVICE(_i);
    const error_case *c = &errors[idx];
    enum { H = 8, KVH = 2, S = 512, D = 128 };
    double rel[2] = {0, 0};
    for (int outliers = 0; outliers < 2; outliers++) {
        tu_set_label("error of %s%s, %s on %s", clattn_dtype_name(c->type), c->scaled ? " (scaled)" : "",
                     outliers ? "outlier channels" : "random", tu_dev_spec[dev]);
        clattn_context *ctx = tu_ctx[dev];
        const size_t nk = (size_t)KVH * S * D, nq = (size_t)H * D;
        float *q, *k, *v;
        tu_error_inputs(nq, nk, D, outliers, &q, &k, &v);
        clattn_sdpa_desc d = tu_sdpa_desc(1, H, 1, S, D, 0);
        d.kv_heads = KVH;
        d.k_dtype = d.v_dtype = c->type;
        kv_tensor kt = kv_make(ctx, c->type, c->scaled, k, nk, D), vt = kv_make(ctx, c->type, c->scaled, v, nk, D);
        d.k_scales = kt.scales;
        d.v_scales = vt.scales;
        cl_mem qm = tu_dev_alloc(ctx, nq, q), om = tu_dev_alloc(ctx, nq, NULL);
        clattn_status st = clattn_sdpa(ctx, &d, qm, kt.mem, vt.mem, NULL, om, NULL, NULL);
        TU_ASSERT_OK(st, ctx, "clattn_sdpa");
        float *o = tu_dev_read_checked(ctx, om, nq, "out");
        clattn_sdpa_desc rd = tu_sdpa_desc(1, H, 1, S, D, 0);
        rd.kv_heads = KVH;
        double *exact = tu_dalloc(nq), *dequantised = tu_dalloc(nq);
        ref_sdpa(&rd, q, k, v, NULL, exact, NULL, NULL);
        ref_sdpa(&rd, q, kt.t.values, vt.t.values, NULL, dequantised, NULL, NULL);
        check_close_named("out against the dequantised cache", o, dequantised, nq, NULL);
        rel[outliers] = tu_relative_rms_within(o, exact, nq, outliers ? c->bound_outliers : c->bound_random);
    }
    if (dev == 0)
        printf("quantisation error %-9s%s: relative RMS of the output %.2e (random), %.2e (outlier channels)\n",
               clattn_dtype_name(c->type), c->scaled ? " (row scales)" : "             ", rel[0], rel[1]);
}
END_TEST

/* ---- 5. bad arguments ---- */

START_TEST(test_bad)
{
    const size_t dev = TU_DEVICE(_i);
    tu_set_label("bad arguments on %s", tu_dev_spec[dev]);
    clattn_context *ctx = tu_ctx[dev];
    enum { S = 8, D = 64 };
    const size_t nk = S * D;
    float *k = tu_falloc(nk);
    tu_fill_uniform(k, nk, 1.0f, 81);
    tu_typed q4 = tu_typed_make(CLATTN_Q4_0, k, nk, D);
    cl_mem q4m = tu_typed_upload(ctx, &q4), fm = tu_dev_alloc(ctx, nk, k), om = tu_dev_alloc(ctx, D, NULL);
    cl_mem small = tu_dev_alloc_exact(ctx, (clattn_dtype_bytes(CLATTN_Q4_0, nk) - 2) / 4, NULL);
    const struct {
        const char *what, *names;
        clattn_dtype q, k, v, o;
        size_t d;
        bool scales, small_k;
        clattn_status expect;
    } bad[] = {
        {"q4_0 rows of 48 values", "k_dtype", CLATTN_FLOAT32, CLATTN_Q4_0, CLATTN_FLOAT32, CLATTN_FLOAT32, 48, false,
         false, CLATTN_ERROR_INVALID_VALUE},
        {"u8_g128 rows of 64", "v_dtype", CLATTN_FLOAT32, CLATTN_FLOAT32, CLATTN_U8_G128, CLATTN_FLOAT32, 64, false,
         false, CLATTN_ERROR_INVALID_VALUE},
        {"a q8_0 Q", "q_dtype", CLATTN_Q8_0, CLATTN_FLOAT32, CLATTN_FLOAT32, CLATTN_FLOAT32, 64, false, false,
         CLATTN_ERROR_INVALID_VALUE},
        {"an fp8 output", "out_dtype", CLATTN_FLOAT32, CLATTN_FLOAT32, CLATTN_FLOAT32, CLATTN_FP8_E4M3, 64, false,
         false, CLATTN_ERROR_INVALID_VALUE},
        {"scales with q4_0", "k_scales", CLATTN_FLOAT32, CLATTN_Q4_0, CLATTN_FLOAT32, CLATTN_FLOAT32, 64, true, false,
         CLATTN_ERROR_INVALID_VALUE},
        {"a q4_0 K two bytes short", "k", CLATTN_FLOAT32, CLATTN_Q4_0, CLATTN_FLOAT32, CLATTN_FLOAT32, 64, false,
         true, CLATTN_ERROR_BUFFER_TOO_SMALL},
        {"a type past the enum", "k_dtype", CLATTN_FLOAT32, (clattn_dtype)(CLATTN_U2_T32 + 1), CLATTN_FLOAT32, CLATTN_FLOAT32, 64,
         false, false, CLATTN_ERROR_INVALID_VALUE},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tu_set_label("%s on %s", bad[i].what, tu_dev_spec[dev]);
        clattn_sdpa_desc d = tu_sdpa_desc(1, 1, 1, S, bad[i].d, 0);
        d.q_dtype = bad[i].q;
        d.k_dtype = bad[i].k;
        d.v_dtype = bad[i].v;
        d.out_dtype = bad[i].o;
        d.k_scales = bad[i].scales ? fm : NULL;
        cl_mem km = bad[i].small_k ? small : bad[i].k == CLATTN_Q4_0 ? q4m : fm;
        clattn_status st = clattn_sdpa(ctx, &d, fm, km, fm, NULL, om, NULL, NULL);
        ck_assert_msg(st == bad[i].expect, "%s: %s, expected %s (%s)", tu_label(), clattn_status_string(st),
                      clattn_status_string(bad[i].expect), clattn_last_error(ctx));
        ck_assert_msg(strstr(clattn_last_error(ctx), bad[i].names) != NULL, "%s: the error \"%s\" does not name %s",
                      tu_label(), clattn_last_error(ctx), bad[i].names);
        ck_assert_msg(tu_dev_all_sentinel(ctx, om, D + TU_GUARD), "%s: the output was written", tu_label());
    }
    /* Host arrays take a block format's bytes (since 0.15), the same call as its device buffer, but no row
     * scales (a device buffer): an FP8 K given them is refused. */
    tu_set_label("host arrays with a q4_0 K on %s", tu_dev_spec[dev]);
    clattn_sdpa_desc d = tu_sdpa_desc(1, 1, 1, S, D, 0);
    d.k_dtype = CLATTN_Q4_0;
    float out[D];
    clattn_status st = clattn_sdpa_host(ctx, &d, k, q4.bytes, k, NULL, out, NULL, NULL);
    TU_ASSERT_OK(st, ctx, "clattn_sdpa_host with a q4_0 K");
    TU_ASSERT_OK(clattn_sdpa(ctx, &d, fm, q4m, fm, NULL, om, NULL, NULL), ctx, "clattn_sdpa with a q4_0 K");
    const float *dev_out = tu_dev_read(ctx, om, D);
    for (size_t i = 0; i < D; i++)
        ck_assert_msg(out[i] == dev_out[i], "%s: out[%zu] %.9g, the device buffers' %.9g", tu_label(), i,
                      (double)out[i], (double)dev_out[i]);
    d.k_dtype = CLATTN_FP8_E4M3;
    d.k_scales = fm;
    st = clattn_sdpa_host(ctx, &d, k, q4.bytes, k, NULL, out, NULL, NULL);
    ck_assert_msg(st == CLATTN_ERROR_INVALID_VALUE && strstr(clattn_last_error(ctx), "fp8_e4m3 with row scales"),
                  "%s: %s (%s)", tu_label(), clattn_status_string(st), clattn_last_error(ctx));
    /* The ragged host call takes no quantised K/V at all, and says which call refused. */
    d.k_scales = NULL;
    d.k_dtype = CLATTN_Q4_0;
    st = clattn_sdpa_ragged_host(ctx, &d, NULL, k, q4.bytes, k, NULL, out, NULL);
    ck_assert_msg(st == CLATTN_ERROR_INVALID_VALUE && strstr(clattn_last_error(ctx), "clattn_sdpa_ragged_host takes no "
                  "quantised"), "%s: ragged: %s (%s)", tu_label(), clattn_status_string(st), clattn_last_error(ctx));
    /* The sizes and names of the public helpers. */
    ck_assert_uint_eq(clattn_dtype_bytes(CLATTN_Q4_0, 64), 36);
    ck_assert_uint_eq(clattn_dtype_bytes(CLATTN_Q8_0, 96), 102);
    ck_assert_uint_eq(clattn_dtype_bytes(CLATTN_U4_G128, 256), 136);
    ck_assert_uint_eq(clattn_dtype_bytes(CLATTN_Q4_0, 48), 0);
    ck_assert_uint_eq(clattn_dtype_bytes(CLATTN_Q8_0, (size_t)-1 / 32 * 32), 0); /* overflow */
    ck_assert_uint_eq(clattn_dtype_size(CLATTN_Q4_0), 0);
    ck_assert_uint_eq(clattn_dtype_size(CLATTN_FP8_E5M2), 1);
    ck_assert_uint_eq(clattn_dtype_block(CLATTN_U8_G64), 64);
    ck_assert_int_eq(clattn_dtype_from_name("u4_g64"), CLATTN_U4_G64);
    ck_assert_int_eq(clattn_dtype_from_name("q5_0"), -1);
    ck_assert_int_eq(clattn_dtype_from_name(NULL), -1);
    for (int t = 0; t <= CLATTN_U2_T32; t++)
        ck_assert_int_eq(clattn_dtype_from_name(clattn_dtype_name((clattn_dtype)t)), t);
}
END_TEST

/* ---- 6. memory ---- */

/* A paged q4_0 cache takes 18/64 of float16's bytes (0.28: 131072 tokens × 8 K/V heads × 128 in 72 MiB
 * against 256 MiB), and decoding over one allocates no dequantised copy of it: the context's temporaries
 * stay far below a float copy of K alone. */
START_TEST(test_memory)
{
    const size_t dev = TU_DEVICE(_i);
    tu_set_label("temporaries of a paged q4_0 decode on %s", tu_dev_spec[dev]);
    const size_t tokens = 131072, heads = 8, dim = 128;
    const double ratio = (double)clattn_dtype_bytes(CLATTN_Q4_0, tokens * heads * dim) /
                         (double)(tokens * heads * dim * clattn_dtype_size(CLATTN_FLOAT16));
    ck_assert_msg(ratio <= 0.29, "q4_0 takes %.4f of float16's bytes", ratio);
    clattn_context *ctx = tu_ctx[dev];
    enum { BS = 64, BLOCKS = 64, KVH = 2, H = 8, D = 128 };
    const size_t npool = (size_t)BLOCKS * KVH * BS * D, lengths[1] = {BLOCKS * BS - 5};
    float *kp = tu_falloc(npool), *q = tu_falloc(H * D);
    tu_fill_uniform(kp, npool, 1.0f, 91);
    tu_fill_uniform(q, H * D, 1.0f, 92);
    tu_typed kt = tu_typed_make(CLATTN_Q4_0, kp, npool, D);
    int table[BLOCKS];
    for (int i = 0; i < BLOCKS; i++)
        table[i] = (i * 37) % BLOCKS;
    cl_mem tm = table_upload(ctx, table, sizeof table / sizeof table[0]);
    clattn_paged_cache cache = CLATTN_PAGED_CACHE_INIT;
    cache.k_pool = cache.v_pool = tu_typed_upload(ctx, &kt);
    cache.blocks = BLOCKS;
    cache.block_size = BS;
    cache.block_table = tm;
    cache.max_blocks = BLOCKS;
    clattn_sdpa_desc d = tu_sdpa_desc(1, H, 1, 0, D, 0);
    d.kv_heads = KVH;
    d.k_dtype = d.v_dtype = CLATTN_Q4_0;
    cl_mem qm = tu_dev_alloc(ctx, H * D, q), om = tu_dev_alloc(ctx, H * D, NULL);
    clattn_context_release_temporaries(ctx);
    clattn_status st = clattn_sdpa_paged(ctx, &d, &cache, lengths, qm, NULL, om, NULL);
    TU_ASSERT_OK(st, ctx, "clattn_sdpa_paged");
    tu_finish(ctx);
    const size_t peak = clattn_context_temp_peak_bytes(ctx), float_k = npool * sizeof(float);
    ck_assert_msg(peak < float_k / 16, "%s: %zu bytes of temporaries; a float copy of K alone is %zu", tu_label(), peak,
                  float_k);
    if (dev == 0)
        printf("paged q4_0 decode over %zu tokens: %zu bytes of temporaries (a float copy of K: %zu); q4_0 takes %.4f "
               "of float16's bytes\n", lengths[0], peak, float_k, ratio);
}
END_TEST

static Suite *make_suite(void)
{
    const char *subset = getenv("CLATTN_TEST_KV_FORMATS_SUBSET");
    const bool small = subset && strcmp(subset, "1") == 0;
    if (small)
        npairs = SUBSET_PAIRS;
    Suite *s = suite_create("kv_formats");
    tu_add_loop(s, "paths", test_paths, NPAIRS * 2 * NPATHS * tu_ndev);
    tu_add_loop(s, "layouts", test_layouts, NPAIRS * 2 * tu_ndev);
    tu_add_loop(s, "append", test_append, NPAIRS * 4 * tu_ndev);
    tu_add_loop(s, "special", test_special, NPAIRS * tu_ndev);
    tu_add_loop(s, "error", test_error, (small ? 2 : NERRORS) * tu_ndev);
    tu_add_loop(s, "bad", test_bad, tu_ndev);
    if (!small) /* (the host's side of the memory; the simulators' time is for the kernels) */
        tu_add_loop(s, "memory", test_memory, tu_ndev);
    return s;
}

int main(void) { return tu_main(make_suite); }
