/*
 * Non-finite keys and values, and extreme scales, on every path that forms scores — the fused kernel,
 * the staged path and the decode kernels (over a dense cache, a paged cache and a ragged batch) — for
 * every storage type of K and V, on every device. K and V always reach the device through the
 * library's own appends (clattn_kv_append, clattn_kv_append_paged), so an int8 cache is quantised as an
 * application's would be: an all-zero row gets the scale 0, a row holding inf or NaN the scale NaN.
 * The reference (fp64) reads the stored values back: the rounded ones, int8 values times their scales.
 *
 *  1. hidden_keys: a key row of zeros, one holding +inf, one holding NaN, and the same in V, one kind
 *     per K/V head, at positions that some query rows see and others do not (hidden by the causal mask,
 *     by a window, and inside the decode kernels' first tile, whose start rounds down). A row that
 *     cannot see the key gets exactly what the reference gives without it (finite); a row that sees it
 *     gets what the reference says — NaN where it is NaN, ±inf where it is ±inf. All paths agree with
 *     each other as well.
 *  2. scales: scale from 2e-38 to 2e38 (1e-30 … 1e30 in decades of 10) with Q and K magnitudes that
 *     overflow a float if Q is scaled first (scale 1e30, q 1e10, k 1e-28: scores 1e12), that overflow it
 *     if the dot product is formed first (scale 1e-30, q and k 1e20: scores 1e10), and ordinary O(1)
 *     scores from unbalanced magnitudes; with and without a soft-cap. Wherever every scaled score is a
 *     finite float, every path matches the reference.
 *  3. nan_after_max: rows whose scores are one 0, one NaN after it and −inf everywhere else (K rows of
 *     −inf, q > 0), with no mask, so that the fused kernel's whole-tile path forms the row maximum
 *     without looking for NaN: the NaN must still make the row NaN (output and lse), on the fused, staged
 *     and decode paths, with the NaN in the first tile or a later one, before and after the 0 (a NaN
 *     maximum followed by masked tiles and then a finite one: found by this case in both fused kernels
 *     up to 0.8.1); without the NaN row the output is V's row of the 0 score and the lse 0.
 */
#include "test_util.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define F32 CLATTN_FLOAT32
#define F16 CLATTN_FLOAT16
#define BF16 CLATTN_BFLOAT16
#define I8 CLATTN_INT8

enum { P_FUSED, P_STAGED, P_DECODE, P_PAGED, P_RAGGED, NPATHS };
static const char *const path_names[NPATHS] = {"fused", "staged", "decode", "paged", "ragged"};

/* One attention problem in float32 (Q (B,H,L,D), K (B,KVH,S,D), V (B,KVH,S,DV)); the query rows sit at
 * the bottom right of the keys (p = i + S − L), with a window (win_left, 0) when win_left ≥ 0. */
typedef struct {
    size_t B, H, KVH, L, S, D, DV;
    float scale, softcap;
    long long win_left;
    const float *q, *k, *v;
} problem;

/* What a path returned, in the dense order: out (B,H,L,DV), lse (B,H,L). */
typedef struct {
    const float *o, *l;
} result;

/* The K and V a path reads, stored as `type` through an append, and the values they hold. */
typedef struct {
    clattn_dtype type;
    cl_mem k, v, k_scales, v_scales;
    float *k_now, *v_now; /* (B,KVH,S,·): the stored values as floats */
} stored_kv;

static clattn_sdpa_desc base_desc(const problem *p, clattn_dtype type, size_t B, size_t cap)
{
    clattn_sdpa_desc d = tu_sdpa_desc(B, p->H, p->L, cap, p->D, p->DV);
    d.kv_heads = p->KVH;
    d.k_dtype = d.v_dtype = type;
    d.scale = p->scale;
    d.softcap = p->softcap;
    return d;
}

/* An empty cache of n elements of `type` (rows of `row`), on the device, with its scales for int8. */
static cl_mem empty_cache(clattn_context *ctx, clattn_dtype type, size_t n, size_t row, cl_mem *scales)
{
    const tu_typed t = tu_typed_make(type, tu_falloc(n), n, row);
    *scales = tu_typed_scales(ctx, &t);
    return tu_typed_upload(ctx, &t);
}

/* K and V rows (B', KVH, rows, ·) appended through clattn_kv_append to an empty dense cache of
 * capacity `rows`. */
static stored_kv append_dense(clattn_context *ctx, const problem *p, clattn_dtype type, size_t B, size_t rows,
                              const float *k, const float *v)
{
    stored_kv s = {type, NULL, NULL, NULL, NULL, NULL, NULL};
    const size_t nk = B * p->KVH * rows * p->D, nv = B * p->KVH * rows * p->DV;
    s.k = empty_cache(ctx, type, nk, p->D, &s.k_scales);
    s.v = empty_cache(ctx, type, nv, p->DV, &s.v_scales);
    clattn_sdpa_desc d = base_desc(p, type, B, rows);
    d.k_scales = s.k_scales;
    d.v_scales = s.v_scales;
    size_t zero[8] = {0};
    ck_assert(B <= 8);
    TU_ASSERT_OK(clattn_kv_append(ctx, &d, zero, rows, tu_dev_alloc(ctx, nk, k), tu_dev_alloc(ctx, nv, v), s.k, s.v),
                 ctx, "clattn_kv_append");
    tu_finish(ctx);
    s.k_now = tu_typed_read(ctx, s.k, type, nk);
    s.v_now = tu_typed_read(ctx, s.v, type, nv);
    if (type == I8) {
        const float *ks = tu_dev_read(ctx, s.k_scales, nk / p->D), *vs = tu_dev_read(ctx, s.v_scales, nv / p->DV);
        for (size_t t = 0; t < nk; t++)
            s.k_now[t] *= ks[t / p->D];
        for (size_t t = 0; t < nv; t++)
            s.v_now[t] *= vs[t / p->DV];
    }
    return s;
}

static clattn_masks problem_masks(const problem *p, clattn_window *w)
{
    clattn_masks m = CLATTN_MASKS_INIT;
    m.causal = BR;
    if (p->win_left >= 0) {
        *w = (clattn_window){p->win_left, 0};
        m.window = w;
    }
    return m;
}

/* clattn_sdpa over the dense cache on the fused, staged or decode path. */
static result run_dense(clattn_context *ctx, const problem *p, const stored_kv *kv, clattn_algorithm alg)
{
    const size_t no = p->B * p->H * p->L * p->DV, nl = p->B * p->H * p->L;
    clattn_sdpa_desc d = base_desc(p, kv->type, p->B, p->S);
    d.k_scales = kv->k_scales;
    d.v_scales = kv->v_scales;
    d.algorithm = alg;
    clattn_window w;
    const clattn_masks m = problem_masks(p, &w);
    d.masks = &m;
    cl_mem o = tu_dev_alloc(ctx, no, NULL), l = tu_dev_alloc(ctx, nl, NULL);
    TU_ASSERT_OK(clattn_sdpa(ctx, &d, tu_dev_alloc(ctx, p->B * p->H * p->L * p->D, p->q), kv->k, kv->v, NULL, o, NULL,
                             l),
                 ctx, "clattn_sdpa");
    tu_finish(ctx);
    return (result){tu_dev_read_checked(ctx, o, no, "out"), tu_dev_read_checked(ctx, l, nl, "lse")};
}

static size_t gcd(size_t a, size_t b)
{
    while (b) {
        const size_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* The same rows appended through clattn_kv_append_paged to a pool of 8-row blocks, scattered by the
 * block table (two blocks never used), then clattn_sdpa_paged. */
static result run_paged(clattn_context *ctx, const problem *p, clattn_dtype type)
{
    enum { BS = 8 };
    const size_t per_seq = (p->S + BS - 1) / BS, blocks = p->B * per_seq + 2;
    clattn_paged_cache c = CLATTN_PAGED_CACHE_INIT;
    c.blocks = blocks;
    c.block_size = BS;
    c.max_blocks = per_seq;
    clattn_sdpa_desc d = base_desc(p, type, p->B, 0);
    d.q_len = p->L;
    c.k_pool = empty_cache(ctx, type, blocks * p->KVH * BS * p->D, p->D, &d.k_scales);
    c.v_pool = empty_cache(ctx, type, blocks * p->KVH * BS * p->DV, p->DV, &d.v_scales);
    size_t step = 3;
    while (gcd(step, blocks) != 1)
        step++;
    cl_int *table = tu_track_malloc(p->B * per_seq * sizeof *table);
    for (size_t t = 0; t < p->B * per_seq; t++)
        table[t] = (cl_int)((t * step + 1) % blocks);
    cl_int err;
    c.block_table = clCreateBuffer(clattn_context_cl_context(ctx), CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                                   p->B * per_seq * sizeof *table, table, &err);
    ck_assert(err == CL_SUCCESS);
    tu_track_mem(c.block_table);
    size_t zero[8] = {0}, lengths[8];
    ck_assert(p->B <= 8);
    for (size_t b = 0; b < p->B; b++)
        lengths[b] = p->S;
    const size_t nk = p->B * p->KVH * p->S * p->D, nv = p->B * p->KVH * p->S * p->DV;
    TU_ASSERT_OK(clattn_kv_append_paged(ctx, &d, &c, zero, p->S, tu_dev_alloc(ctx, nk, p->k), tu_dev_alloc(ctx, nv, p->v)),
                 ctx, "clattn_kv_append_paged");
    clattn_window w;
    const clattn_masks m = problem_masks(p, &w);
    d.masks = &m;
    const size_t no = p->B * p->H * p->L * p->DV, nl = p->B * p->H * p->L;
    cl_mem o = tu_dev_alloc(ctx, no, NULL), l = tu_dev_alloc(ctx, nl, NULL);
    TU_ASSERT_OK(clattn_sdpa_paged(ctx, &d, &c, lengths, tu_dev_alloc(ctx, p->B * p->H * p->L * p->D, p->q), NULL, o, l),
                 ctx, "clattn_sdpa_paged");
    tu_finish(ctx);
    return (result){tu_dev_read_checked(ctx, o, no, "out"), tu_dev_read_checked(ctx, l, nl, "lse")};
}

/* The B sequences as one ragged batch, heads first (K (KVH, B·S, D): a dense cache of one sequence
 * whose rows are the B sequences' in turn, appended as one), then back in the dense order. */
static result run_ragged(clattn_context *ctx, const problem *p, clattn_dtype type)
{
    const size_t B = p->B, H = p->H, KVH = p->KVH, L = p->L, S = p->S, D = p->D, DV = p->DV;
    float *k = tu_falloc(B * KVH * S * D), *v = tu_falloc(B * KVH * S * DV), *q = tu_falloc(B * H * L * D);
    for (size_t b = 0; b < B; b++)
        for (size_t g = 0; g < KVH; g++)
            for (size_t j = 0; j < S; j++) {
                memcpy(k + (g * B * S + b * S + j) * D, p->k + ((b * KVH + g) * S + j) * D, D * sizeof *k);
                memcpy(v + (g * B * S + b * S + j) * DV, p->v + ((b * KVH + g) * S + j) * DV, DV * sizeof *v);
            }
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++)
            for (size_t i = 0; i < L; i++)
                memcpy(q + (h * B * L + b * L + i) * D, p->q + ((b * H + h) * L + i) * D, D * sizeof *q);
    const stored_kv kv = append_dense(ctx, p, type, 1, B * S, k, v);
    size_t q_starts[9], k_starts[9];
    ck_assert(B <= 8);
    for (size_t b = 0; b <= B; b++) {
        q_starts[b] = b * L;
        k_starts[b] = b * S;
    }
    clattn_ragged r = CLATTN_RAGGED_INIT;
    r.q_starts = q_starts;
    r.k_starts = k_starts;
    r.layout = CLATTN_RAGGED_HEADS_ROWS;
    clattn_sdpa_desc d = base_desc(p, type, B, S);
    d.k_scales = kv.k_scales;
    d.v_scales = kv.v_scales;
    clattn_window w;
    const clattn_masks m = problem_masks(p, &w);
    d.masks = &m;
    const size_t no = B * H * L * DV, nl = B * H * L;
    cl_mem om = tu_dev_alloc(ctx, no, NULL), lm = tu_dev_alloc(ctx, nl, NULL);
    TU_ASSERT_OK(clattn_sdpa_ragged(ctx, &d, &r, tu_dev_alloc(ctx, B * H * L * D, q), kv.k, kv.v, NULL, om, lm), ctx,
                 "clattn_sdpa_ragged");
    tu_finish(ctx);
    const float *o = tu_dev_read_checked(ctx, om, no, "out"), *l = tu_dev_read_checked(ctx, lm, nl, "lse");
    float *od = tu_falloc(no), *ld = tu_falloc(nl);
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++)
            for (size_t i = 0; i < L; i++) {
                memcpy(od + ((b * H + h) * L + i) * DV, o + (h * B * L + b * L + i) * DV, DV * sizeof *od);
                ld[(b * H + h) * L + i] = l[(b * L + i) * H + h];
            }
    return (result){od, ld};
}

static result run_path(clattn_context *ctx, const problem *p, const stored_kv *dense, int path)
{
    switch (path) {
    case P_FUSED:
        return run_dense(ctx, p, dense, CLATTN_ALGORITHM_FUSED);
    case P_STAGED:
        return run_dense(ctx, p, dense, CLATTN_ALGORITHM_STAGED);
    case P_DECODE:
        return run_dense(ctx, p, dense, CLATTN_ALGORITHM_DECODE);
    case P_PAGED:
        return run_paged(ctx, p, dense->type);
    default:
        return run_ragged(ctx, p, dense->type);
    }
}

/* The fp64 reference over the stored values k_now, v_now: out (B,H,L,DV), lse (B,H,L). */
static void reference(const problem *p, const float *k_now, const float *v_now, double *o, double *l)
{
    clattn_sdpa_desc d = base_desc(p, F32, p->B, p->S);
    d.k_dtype = d.v_dtype = F32;
    clattn_window w;
    const clattn_masks m = problem_masks(p, &w);
    d.masks = &m;
    ref_sdpa(&d, p->q, k_now, v_now, NULL, o, NULL, l);
}

/* got matches want as the reference's kind says: NaN for NaN, the same infinity for ±inf, within
 * check_close's tolerance for a finite value. */
static bool matches(float got, double want)
{
    if (isnan(want))
        return isnan(got);
    if (isinf(want))
        return (double)got == want;
    return isfinite(got) && fabs((double)got - want) <= TU_ATOL + TU_RTOL * fabs(want);
}

static void check_row(const char *what, const float *got, const double *want, size_t n, size_t row)
{
    for (size_t e = 0; e < n; e++)
        ck_assert_msg(matches(got[e], want[e]), "%s: %s row %zu [%zu] = %g, expected %g", tu_label(), what, row, e,
                      (double)got[e], want[e]);
}

/* The same kinds, and finite values within twice the tolerance, between two paths. */
static void check_paths_agree(const char *what, const float *a, const float *b, size_t n)
{
    for (size_t e = 0; e < n; e++) {
        const bool same = isnan(a[e]) ? isnan(b[e])
                          : isinf(a[e]) ? a[e] == b[e]
                                        : isfinite(b[e]) && fabsf(a[e] - b[e]) <= 2 * (TU_ATOL + TU_RTOL * fabsf(a[e]));
        ck_assert_msg(same, "%s: %s[%zu] = %g here, %g on the fused path", tu_label(), what, e, (double)b[e],
                      (double)a[e]);
    }
}

/* ---------------------------------------------------------------------------------------------- */
/* 1. Keys and values that hold zeros, inf or NaN, seen by some rows and hidden from others          */
/* ---------------------------------------------------------------------------------------------- */

static const clattn_dtype types[] = {F32, F16, BF16, I8};
#define NTYPES (sizeof types / sizeof types[0])

/* One kind per K/V head: what its bad row holds, in K or in V. */
enum { BAD_K_ZERO, BAD_K_INF, BAD_K_NAN, BAD_V_ZERO, BAD_V_INF, BAD_V_NAN, NBAD };
static const char *const bad_names[NBAD] = {"K zeros", "K +inf", "K NaN", "V zeros", "V +inf", "V NaN"};

/* Batch b's bad row in every K/V head: with L 2, S 10, rows at positions 8 and 9. Under the window
 * (2, 0) row 0 sees keys 6-8 and row 1 keys 7-9: key 5 is hidden from both (but in the decode kernels'
 * first tile, which starts at a multiple of their key step), key 6 is seen by row 0 only (the window
 * hides it from row 1), key 9 by row 1 only (the causal mask hides it from row 0). Without the window
 * every row sees keys 0 to its position: only key 9 is hidden, from row 0. */
static const size_t bad_row[] = {5, 6, 9};

START_TEST(test_hidden_keys)
{
    const size_t dev = TU_DEVICE(_i);
    const clattn_dtype type = types[TU_CASE(_i)];
    clattn_context *ctx = tu_ctx[dev];
    enum { B = 3, H = 3 * NBAD, KVH = NBAD, L = 2, S = 10, D = 20, DV = 12 };
    const size_t nq = B * H * L * D, nk = B * KVH * S * D, nv = B * KVH * S * DV, no = B * H * L * DV, nl = B * H * L;
    float *q = tu_falloc(nq), *k = tu_falloc(nk), *v = tu_falloc(nv);
    tu_fill_uniform(q, nq, 1.0f, 2201);
    tu_fill_uniform(k, nk, 1.0f, 2202);
    tu_fill_uniform(v, nv, 1.0f, 2203);
    for (size_t t = 0; t < nq; t += D) /* q[0] > 0: a K row holding +inf in element 0 scores +inf */
        q[t] = 0.5f + fabsf(q[t]);
    for (size_t b = 0; b < B; b++)
        for (size_t g = 0; g < KVH; g++) {
            const size_t j = bad_row[b];
            float *kr = k + ((b * KVH + g) * S + j) * D, *vr = v + ((b * KVH + g) * S + j) * DV;
            switch (g) {
            case BAD_K_ZERO:
                memset(kr, 0, D * sizeof *kr);
                break;
            case BAD_K_INF:
                kr[0] = INFINITY;
                break;
            case BAD_K_NAN:
                kr[3] = NAN;
                break;
            case BAD_V_ZERO:
                memset(vr, 0, DV * sizeof *vr);
                break;
            case BAD_V_INF:
                vr[0] = INFINITY;
                break;
            default:
                vr[2] = NAN;
                break;
            }
        }
    for (int windowed = 0; windowed < 2; windowed++) {
        const problem p = {B, H, KVH, L, S, D, DV, NAN, 0.0f, windowed ? 2 : -1, q, k, v};
        tu_set_label("%s K/V, %s, storing on %s", clattn_dtype_name(type), windowed ? "window (2, 0)" : "causal",
                     tu_dev_spec[dev]);
        const stored_kv kv = append_dense(ctx, &p, type, B, S, k, v);
        /* The reference with the bad rows (for the rows that see them) and with zeros in their place (for
         * the rows that do not: what they must get is what they would get without that key). */
        double *ro = tu_dalloc(no), *rl = tu_dalloc(nl), *clean_o = tu_dalloc(no), *clean_l = tu_dalloc(nl);
        reference(&p, kv.k_now, kv.v_now, ro, rl);
        float *k_clean = tu_falloc(nk), *v_clean = tu_falloc(nv);
        memcpy(k_clean, kv.k_now, nk * sizeof *k_clean);
        memcpy(v_clean, kv.v_now, nv * sizeof *v_clean);
        for (size_t b = 0; b < B; b++)
            for (size_t g = 0; g < KVH; g++) {
                memset(k_clean + ((b * KVH + g) * S + bad_row[b]) * D, 0, D * sizeof *k_clean);
                memset(v_clean + ((b * KVH + g) * S + bad_row[b]) * DV, 0, DV * sizeof *v_clean);
            }
        reference(&p, k_clean, v_clean, clean_o, clean_l);
        result first = {NULL, NULL};
        for (int path = 0; path < NPATHS; path++) {
            tu_set_label("%s K/V, %s [%s] on %s", clattn_dtype_name(type), windowed ? "window (2, 0)" : "causal",
                         path_names[path], tu_dev_spec[dev]);
            const result r = run_path(ctx, &p, &kv, path);
            for (size_t b = 0; b < B; b++)
                for (size_t h = 0; h < H; h++)
                    for (size_t i = 0; i < L; i++) {
                        const size_t row = (b * H + h) * L + i, g = h / (H / KVH), j = bad_row[b];
                        const long long pos = (long long)(i + S - L);
                        const bool seen = (long long)j <= pos && (!windowed || (long long)j >= pos - 2);
                        tu_set_label("%s K/V, %s [%s], %s in key %zu %s row %zu (batch %zu, head %zu, query %zu) on %s",
                                     clattn_dtype_name(type), windowed ? "window (2, 0)" : "causal", path_names[path],
                                     bad_names[g], j, seen ? "seen by" : "hidden from", row, b, h, i, tu_dev_spec[dev]);
                        const double *want_o = seen ? ro : clean_o, *want_l = seen ? rl : clean_l;
                        if (!seen) /* (the reference without the key is finite: so must the row be) */
                            for (size_t e = 0; e < DV; e++)
                                ck_assert(isfinite(want_o[row * DV + e]) && isfinite(want_l[row]));
                        check_row("out", r.o + row * DV, want_o + row * DV, DV, row);
                        check_row("lse", r.l + row, want_l + row, 1, row);
                    }
            tu_set_label("%s K/V, %s [%s against fused] on %s", clattn_dtype_name(type),
                         windowed ? "window (2, 0)" : "causal", path_names[path], tu_dev_spec[dev]);
            if (path == P_FUSED)
                first = r;
            else {
                check_paths_agree("out", first.o, r.o, no);
                check_paths_agree("lse", first.l, r.l, nl);
            }
        }
    }
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* 2. Scales from 2e-38 to 2e38                                                                    */
/* ---------------------------------------------------------------------------------------------- */

/* Q of magnitude q_mag, K of k_mag. one_hot: q ≈ (q_mag, small), k_j ≈ (k_mag·(1 + j/8), small), so the
 * scores q_mag·k_mag·scale·(1 + j/8) grow by far more than exp's range from key to key and the last
 * visible key takes all the weight; else both uniform, scores O(1). */
typedef struct {
    float scale, q_mag, k_mag, softcap;
    bool one_hot;
} scale_case;

static const scale_case scale_cases[] = {
    /* one-hot, scores 1e10 … 1e30: q·scale overflows a float (the first two), or q·k does (the next two) */
    {1e30f, 1e10f, 1e-28f, 0, true},
    {1e20f, 1e25f, 1e-33f, 0, true},
    {1e-30f, 1e20f, 1e20f, 0, true},
    {1e-20f, 1e25f, 1e25f, 0, true},
    {1.0f, 1e19f, 1e-7f, 0, true},
    /* the same soft-capped: every visible score becomes the cap, the weights uniform */
    {1e30f, 1e10f, 1e-28f, 30.0f, true},
    {1e-30f, 1e20f, 1e20f, 30.0f, true},
    /* scores O(1) from balanced and unbalanced magnitudes (q_mag·k_mag·scale = 4) */
    {1e-30f, 2e15f, 2e15f, 0, false},
    {1e-30f, 2e23f, 2e7f, 0, false},
    {1e-20f, 2e10f, 2e10f, 0, false},
    {1e-10f, 2e5f, 2e5f, 0, false},
    {1e-10f, 2e-3f, 2e13f, 0, false},
    {1e-3f, 63.245553f, 63.245553f, 0, false},
    {1e3f, 6.3245553e-2f, 6.3245553e-2f, 0, false},
    {1e10f, 2e-5f, 2e-5f, 0, false},
    {1e10f, 2e3f, 2e-13f, 0, false},
    {1e20f, 2e-10f, 2e-10f, 0, false},
    {1e30f, 2e-15f, 2e-15f, 0, false},
    {1e30f, 2e-7f, 2e-23f, 0, false},
    {1e30f, 2e-23f, 2e-7f, 1.5f, false},
    /* beyond: q·k below float's normal range (2e38), above its largest value (2e-38) */
    {2e38f, 1.4142135e-19f, 1.4142135e-19f, 0, false},
    {2e-38f, 1.4142135e19f, 1.4142135e19f, 0, false},
};
#define NSCALE_CASES (sizeof scale_cases / sizeof scale_cases[0])

static const clattn_dtype scale_types[] = {F32, I8}; /* (half and bfloat16 cannot hold such K) */

START_TEST(test_scales)
{
    const size_t dev = TU_DEVICE(_i);
    const clattn_dtype type = scale_types[TU_CASE(_i)];
    clattn_context *ctx = tu_ctx[dev];
    enum { B = 1, H = 2, KVH = 1, L = 3, S = 37, D = 20, DV = 12 };
    const size_t nq = B * H * L * D, nk = B * KVH * S * D, nv = B * KVH * S * DV, no = B * H * L * DV, nl = B * H * L;
    for (size_t c_i = 0; c_i < NSCALE_CASES; c_i++) {
        const scale_case *c = &scale_cases[c_i];
        float *q = tu_falloc(nq), *k = tu_falloc(nk), *v = tu_falloc(nv);
        tu_fill_uniform(q, nq, 1.0f, 2300 + c_i);
        tu_fill_uniform(k, nk, 1.0f, 2400 + c_i);
        tu_fill_uniform(v, nv, 1.0f, 2500 + c_i);
        for (size_t t = 0; t < nq; t++)
            q[t] = c->one_hot ? (t % D == 0 ? 1.0f + 0.01f * q[t] : 1e-3f * q[t]) * c->q_mag : q[t] * c->q_mag;
        for (size_t t = 0; t < nk; t++)
            k[t] = c->one_hot ? (t % D == 0 ? 1.0f + (float)(t / D % S) / 8.0f : 1e-3f * k[t]) * c->k_mag
                              : k[t] * c->k_mag;
        const problem p = {B, H, KVH, L, S, D, DV, c->scale, c->softcap, -1, q, k, v};
        tu_set_label("scale %g, |q| %g, |k| %g, softcap %g, %s K/V on %s", (double)c->scale, (double)c->q_mag,
                     (double)c->k_mag, (double)c->softcap, clattn_dtype_name(type), tu_dev_spec[dev]);
        const stored_kv kv = append_dense(ctx, &p, type, B, S, k, v);
        double *ro = tu_dalloc(no), *rl = tu_dalloc(nl);
        reference(&p, kv.k_now, kv.v_now, ro, rl);
        for (size_t r = 0; r < nl; r++) /* (the case is one where every scaled score is finite) */
            ck_assert_msg(isfinite(rl[r]), "%s: the reference's lse %g", tu_label(), rl[r]);
        for (int path = 0; path < NPATHS; path++) {
            tu_set_label("scale %g, |q| %g, |k| %g, softcap %g, %s K/V [%s] on %s", (double)c->scale,
                         (double)c->q_mag, (double)c->k_mag, (double)c->softcap, clattn_dtype_name(type),
                         path_names[path], tu_dev_spec[dev]);
            const result r = run_path(ctx, &p, &kv, path);
            for (size_t row = 0; row < nl; row++) {
                check_row("out", r.o + row * DV, ro + row * DV, DV, row);
                check_row("lse", r.l + row, rl + row, 1, row);
            }
        }
        tu_release_all(); /* (the case's buffers: 22 cases × 5 paths of them otherwise live to the end) */
    }
}
END_TEST

START_TEST(test_nan_after_max)
{
    const size_t dev = TU_DEVICE(_i);
    clattn_context *ctx = tu_ctx[dev];
    enum { L = 37, S = 200, D = 16, DV = 8 };
    /* (zero row, NaN row): NaN after the 0 in the first tile, in a later tile, before the 0; none */
    static const long cases[][2] = {{0, 17}, {3, 130}, {150, 60}, {5, -1}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int path = 0; path < 3; path++) {
            const size_t rows = path == 2 ? 3 : L; /* (3 query rows: the decode kernels) */
            float *q = tu_falloc(L * D), *k = tu_falloc(S * D), *v = tu_falloc(S * DV);
            for (size_t t = 0; t < L * D; t++)
                q[t] = 0.25f + (float)(t % 7) * 0.125f;
            tu_fill_uniform(v, S * DV, 1.0f, 2301);
            const long zero = cases[c][0], nan_row = cases[c][1];
            for (size_t t = 0; t < S * D; t++)
                k[t] = t / D == (size_t)zero ? 0.0f : nan_row >= 0 && t / D == (size_t)nan_row ? NAN : -INFINITY;
            static const char *const names[] = {"fused", "staged", "decode"};
            static const clattn_algorithm algorithms[] = {CLATTN_ALGORITHM_FUSED, CLATTN_ALGORITHM_STAGED,
                                                          CLATTN_ALGORITHM_DECODE};
            tu_set_label("nan_after_max: 0 at key %ld, NaN at key %ld, %s path on %s", zero, nan_row, names[path],
                         tu_dev_spec[dev]);
            clattn_sdpa_desc d = tu_sdpa_desc(1, 1, rows, S, D, DV);
            d.algorithm = algorithms[path];
            cl_mem mq = tu_dev_alloc(ctx, L * D, q), mk = tu_dev_alloc(ctx, S * D, k), mv = tu_dev_alloc(ctx, S * DV, v);
            cl_mem mo = tu_dev_alloc(ctx, rows * DV, NULL), ml = tu_dev_alloc(ctx, rows, NULL);
            TU_ASSERT_OK(clattn_sdpa(ctx, &d, mq, mk, mv, NULL, mo, NULL, ml), ctx, "clattn_sdpa");
            tu_finish(ctx);
            const float *o = tu_dev_read_checked(ctx, mo, rows * DV, "out"),
                        *l = tu_dev_read_checked(ctx, ml, rows, "lse");
            for (size_t i = 0; i < rows; i++) {
                if (nan_row >= 0) {
                    ck_assert_msg(isnan(l[i]), "%s: row %zu: lse %g, expected NaN", tu_label(), i, (double)l[i]);
                    for (size_t e = 0; e < DV; e++)
                        ck_assert_msg(isnan(o[i * DV + e]), "%s: row %zu: out[%zu] = %g, expected NaN", tu_label(),
                                      i, e, (double)o[i * DV + e]);
                } else {
                    ck_assert_msg(l[i] == 0.0f, "%s: row %zu: lse %g, expected 0", tu_label(), i, (double)l[i]);
                    for (size_t e = 0; e < DV; e++)
                        ck_assert_msg(o[i * DV + e] == v[zero * DV + e], "%s: row %zu: out[%zu] = %g, expected %g",
                                      tu_label(), i, e, (double)o[i * DV + e], (double)v[zero * DV + e]);
                }
            }
            tu_release_all(); /* (q, k, v and the buffers) */
        }
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("nonfinite");
    tu_add_loop(s, "nan_after_max", test_nan_after_max, tu_ndev);
    tu_add_loop(s, "hidden_keys", test_hidden_keys, NTYPES * tu_ndev);
    tu_add_loop(s, "scales", test_scales, (sizeof scale_types / sizeof scale_types[0]) * tu_ndev);
    return s;
}

int main(void) { return tu_main(make_suite); }
