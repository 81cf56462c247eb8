/*
 * Numerical edge cases of clattn_sdpa_host (and clattn_mha_host where it makes sense), every case on
 * both implementations: the fused kernel (CLATTN_ALGORITHM_FUSED, out + lse) and the staged path
 * (CLATTN_ALGORITHM_STAGED, out + weights + lse).
 *
 *  1. fully masked rows (key length 0, bottom-right causal with S < L, an additive row of −inf):
 *     exactly zero output and weights, lse −inf, no NaN anywhere (clattn.h promises this).
 *  2. finite, very negative additive masks (−FLT_MAX, −1e30), masking rows fully or in part.
 *  3. ±inf and NaN in Q, K or V reach only the rows that read them; a weight that underflows to 0
 *     adds nothing, not even an inf value.
 *  4. scores far outside exp's range (|scores| ~ 1e9), and dot products that overflow float.
 *  5. degenerate sizes: S = 1, D = 1, L = 1 decode, B·H large with L = S = Dv = 1.
 *  6. head sizes around the fused kernel's limit of 256 on AUTO and FUSED.
 */
#include "test_util.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define MAXB 8

/* ---------------------------------------------------------------------------------------------- */
/* Problems, runs and row checks                                                                   */
/* ---------------------------------------------------------------------------------------------- */

typedef struct {
    clattn_sdpa_desc d;
    clattn_masks m; /* d.masks points here once a mask is set (prob_masks), else NULL */
    size_t kl[MAXB];
    size_t B, H, L, S, D, Dv, BH;
    size_t nq, nk, nv, nm, no, np, nl;
    float *q, *k, *v, *mask;
} prob;

typedef struct {
    float *o, *w, *l; /* w is NULL for the fused path */
} result;

/* Q, K, V uniform in [-a, a]; no masks; default scale. */
static void prob_init(prob *p, size_t B, size_t H, size_t L, size_t S, size_t D, size_t Dv, float a,
                      uint64_t seed)
{
    memset(p, 0, sizeof *p);
    ck_assert(B <= MAXB);
    p->B = B;
    p->H = H;
    p->L = L;
    p->S = S;
    p->D = D;
    p->Dv = Dv ? Dv : D;
    p->BH = B * H;
    p->d = tu_sdpa_desc(B, H, L, S, D, Dv);
    p->m = (clattn_masks)CLATTN_MASKS_INIT;
    p->nq = p->BH * L * D;
    p->nk = p->BH * S * D;
    p->nv = p->BH * S * p->Dv;
    p->no = p->BH * L * p->Dv;
    p->np = p->BH * L * S;
    p->nl = p->BH * L;
    p->q = tu_falloc(p->nq);
    p->k = tu_falloc(p->nk);
    p->v = tu_falloc(p->nv);
    tu_fill_uniform(p->q, p->nq, a, seed + 1);
    tu_fill_uniform(p->k, p->nk, a, seed + 2);
    tu_fill_uniform(p->v, p->nv, 1.0f, seed + 3);
}

/* p's masks, from now on in use by its descriptor. */
static clattn_masks *prob_masks(prob *p)
{
    p->d.masks = &p->m;
    return &p->m;
}

/* An additive mask of `layout`, uniform in [-1, 1]. */
static void prob_mask(prob *p, clattn_mask_layout layout, uint64_t seed)
{
    prob_masks(p)->additive = layout;
    p->mask = tu_make_mask(layout, p->B, p->H, p->L, p->S, 0, seed, &p->nm);
}

static void prob_key_lengths(prob *p, const size_t *kl)
{
    memcpy(p->kl, kl, p->B * sizeof *kl);
    prob_masks(p)->key_lengths = p->kl;
}

/* Mask entry of (bh, i, j), 0 without a mask. */
static float mask_at(const prob *p, size_t bh, size_t i, size_t j)
{
    if (ref_masks(p->d.masks)->additive == CLATTN_MASK_L_S)
        return p->mask[i * p->S + j];
    if (ref_masks(p->d.masks)->additive == CLATTN_MASK_B_H_L_S)
        return p->mask[(bh * p->L + i) * p->S + j];
    return 0.0f;
}

/* 1 if query row r = bh·L + i can see key j (causal, key lengths, and an additive −inf). */
static int sees(const prob *p, size_t r, size_t j)
{
    size_t bh = r / p->L, i = r % p->L, b = bh / p->H;
    if (ref_key_masked(p->d.masks, p->L, p->S, b, i, j))
        return 0;
    return mask_at(p, bh, i, j) != -INFINITY;
}

static void run_sdpa(clattn_context *ctx, const prob *p, clattn_algorithm alg, int want_weights,
                     result *r)
{
    clattn_sdpa_desc d = p->d;
    d.algorithm = alg;
    r->o = tu_host_alloc(p->no, NULL);
    r->l = tu_host_alloc(p->nl, NULL);
    r->w = want_weights ? tu_host_alloc(p->np, NULL) : NULL;
    clattn_status st = clattn_sdpa_host(ctx, &d, p->q, p->k, p->v, p->mask, r->o, r->w, r->l);
    TU_ASSERT_OK(st, ctx, "clattn_sdpa_host");
    tu_host_check_guard(r->o, p->no, "out");
    tu_host_check_guard(r->l, p->nl, "lse");
    if (r->w)
        tu_host_check_guard(r->w, p->np, "weights");
}

/* The path's natural outputs: FUSED out + lse, STAGED out + weights + lse. */
static void run_path(clattn_context *ctx, const prob *p, clattn_algorithm alg, result *r)
{
    run_sdpa(ctx, p, alg, alg == CLATTN_ALGORITHM_STAGED, r);
}

typedef struct {
    double *o, *w, *l;
} reference;

static void ref_of(const prob *p, reference *r)
{
    r->o = tu_dalloc(p->no);
    r->w = tu_dalloc(p->np);
    r->l = tu_dalloc(p->nl);
    ref_sdpa(&p->d, p->q, p->k, p->v, p->mask, r->o, r->w, r->l);
}

/* Row r of out, weights and lse against the reference. */
static void check_row(const prob *p, const result *g, const reference *ref, size_t r)
{
    char what[64];
    snprintf(what, sizeof what, "out row %zu", r);
    check_close_named(what, g->o + r * p->Dv, ref->o + r * p->Dv, p->Dv, NULL);
    snprintf(what, sizeof what, "lse row %zu", r);
    check_close_named(what, g->l + r, ref->l + r, 1, NULL);
    if (g->w) {
        snprintf(what, sizeof what, "weights row %zu", r);
        check_close_named(what, g->w + r * p->S, ref->w + r * p->S, p->S, NULL);
    }
}

static void check_all(const prob *p, const result *g, const reference *ref)
{
    for (size_t r = 0; r < p->nl; r++)
        check_row(p, g, ref, r);
}

static void check_no_nan(const prob *p, const result *g)
{
    for (size_t t = 0; t < p->no; t++)
        ck_assert_msg(!isnan(g->o[t]), "%s: out[%zu] (row %zu) is NaN", tu_label(), t, t / p->Dv);
    for (size_t t = 0; t < p->nl; t++)
        ck_assert_msg(!isnan(g->l[t]), "%s: lse[%zu] is NaN", tu_label(), t);
    if (g->w)
        for (size_t t = 0; t < p->np; t++)
            ck_assert_msg(!isnan(g->w[t]), "%s: weights[%zu] (row %zu) is NaN", tu_label(), t,
                          t / p->S);
}

static void check_finite_out(const prob *p, const result *g)
{
    for (size_t t = 0; t < p->no; t++)
        ck_assert_msg(isfinite(g->o[t]), "%s: out[%zu] (row %zu) = %g is not finite", tu_label(), t,
                      t / p->Dv, (double)g->o[t]);
    if (g->w)
        for (size_t t = 0; t < p->np; t++)
            ck_assert_msg(isfinite(g->w[t]), "%s: weights[%zu] (row %zu) = %g is not finite",
                          tu_label(), t, t / p->S, (double)g->w[t]);
}

/* A fully masked row: exactly zero output and weights, lse −inf. */
static void check_masked_row(const prob *p, const result *g, size_t r)
{
    for (size_t t = 0; t < p->Dv; t++)
        ck_assert_msg(g->o[r * p->Dv + t] == 0.0f,
                      "%s: fully masked row %zu: out[%zu] = %.9g, expected exactly 0", tu_label(), r,
                      t, (double)g->o[r * p->Dv + t]);
    ck_assert_msg(g->l[r] == -INFINITY, "%s: fully masked row %zu: lse = %.9g, expected -inf",
                  tu_label(), r, (double)g->l[r]);
    if (g->w)
        for (size_t j = 0; j < p->S; j++)
            ck_assert_msg(g->w[r * p->S + j] == 0.0f,
                          "%s: fully masked row %zu: weight[%zu] = %.9g, expected exactly 0",
                          tu_label(), r, j, (double)g->w[r * p->S + j]);
}

static int row_fully_masked(const prob *p, size_t r)
{
    for (size_t j = 0; j < p->S; j++)
        if (sees(p, r, j))
            return 0;
    return 1;
}

/* Both paths: no NaN anywhere, fully masked rows exactly zero / −inf, every row against ref_sdpa.
 * Returns how many fully masked rows there were. */
static size_t check_masked_problem(clattn_context *ctx, const prob *p, const char *name,
                                   const char *spec)
{
    reference ref;
    ref_of(p, &ref);
    size_t masked = 0;
    for (size_t r = 0; r < p->nl; r++)
        masked += (size_t)row_fully_masked(p, r);
    for (int a = 0; a < TU_NPATHS; a++) {
        tu_set_label("%s [%s] on %s", name, tu_algorithm_name(tu_paths[a]), spec);
        result g;
        run_path(ctx, p, tu_paths[a], &g);
        check_no_nan(p, &g);
        for (size_t r = 0; r < p->nl; r++)
            if (row_fully_masked(p, r))
                check_masked_row(p, &g, r);
        check_all(p, &g, &ref);
    }
    return masked;
}

/* ---------------------------------------------------------------------------------------------- */
/* Multi-head layers                                                                               */
/* ---------------------------------------------------------------------------------------------- */

typedef struct {
    clattn_mha_desc d;
    clattn_masks m; /* d.masks points here once a mask is set (mprob_masks), else NULL */
    size_t kl[MAXB];
    size_t S, nx, nkv, ny, nw, nm, ycols;
    float *x, *kv, *mask;
    clattn_mha_host_weights hw;
} mprob;

/* A layer of H heads of width hd on d_model dm; cross-attention when S ≠ 0 (kv width dm). */
static void mprob_init(mprob *p, size_t B, size_t L, size_t S, size_t dm, size_t H, size_t hd,
                       int with_wo, uint64_t seed)
{
    memset(p, 0, sizeof *p);
    ck_assert(B <= MAXB);
    p->d = (clattn_mha_desc)CLATTN_MHA_DESC_INIT;
    p->m = (clattn_masks)CLATTN_MASKS_INIT;
    p->hw = (clattn_mha_host_weights)CLATTN_MHA_HOST_WEIGHTS_INIT;
    p->d.batch = B;
    p->d.q_len = L;
    p->d.kv_len = S;
    p->d.model_dim = dm;
    p->d.heads = H;
    p->d.qk_dim = hd;
    p->S = S ? S : L;
    p->ycols = with_wo ? dm : H * hd;
    p->nx = B * L * dm;
    p->ny = B * L * p->ycols;
    p->nw = B * H * L * p->S;
    p->x = tu_falloc(p->nx);
    tu_fill_uniform(p->x, p->nx, 1.0f, seed + 1);
    if (S) {
        p->nkv = B * S * dm;
        p->kv = tu_falloc(p->nkv);
        tu_fill_uniform(p->kv, p->nkv, 1.0f, seed + 2);
    }
    float *w[4], *bias[4];
    size_t cols = H * hd;
    for (int t = 0; t < 4; t++) {
        size_t rows = t == 3 ? cols : dm, c = t == 3 ? dm : cols;
        w[t] = tu_falloc(rows * c);
        tu_fill_uniform(w[t], rows * c, 1.0f / sqrtf((float)rows), seed + 3 + (uint64_t)t);
        bias[t] = tu_falloc(c);
        tu_fill_uniform(bias[t], c, 0.5f, seed + 7 + (uint64_t)t);
    }
    p->hw.w_q = w[0];
    p->hw.b_q = bias[0];
    p->hw.w_k = w[1];
    p->hw.b_k = bias[1];
    p->hw.w_v = w[2];
    p->hw.b_v = bias[2];
    if (with_wo) {
        p->hw.w_o = w[3];
        p->hw.b_o = bias[3];
    }
}

/* p's masks, from now on in use by its descriptor. */
static clattn_masks *mprob_masks(mprob *p)
{
    p->d.masks = &p->m;
    return &p->m;
}

static void mprob_mask(mprob *p, clattn_mask_layout layout, uint64_t seed)
{
    mprob_masks(p)->additive = layout;
    p->mask = tu_make_mask(layout, p->d.batch, p->d.heads, p->d.q_len, p->S, 0, seed, &p->nm);
}

/* Runs the layer on both paths (FUSED without attention weights, STAGED with them) against ref_mha.
 * Rows of batches listed in zero_batches (key length 0) must be exactly zero without W_O, and their
 * attention weights exactly zero. */
static void check_mha_problem(clattn_context *ctx, const mprob *p, const char *name,
                              const char *spec)
{
    double *ry = tu_dalloc(p->ny), *rw = tu_dalloc(p->nw);
    ref_mha(&p->d, p->x, p->kv, &p->hw, p->mask, ry, rw);
    size_t L = p->d.q_len, H = p->d.heads;
    for (int a = 0; a < TU_NPATHS; a++) {
        tu_set_label("%s [mha %s] on %s", name, tu_algorithm_name(tu_paths[a]), spec);
        clattn_mha_desc d = p->d;
        d.algorithm = tu_paths[a];
        float *y = tu_host_alloc(p->ny, NULL);
        float *w = tu_paths[a] == CLATTN_ALGORITHM_STAGED ? tu_host_alloc(p->nw, NULL) : NULL;
        clattn_status st = clattn_mha_host(ctx, &d, p->x, p->kv, &p->hw, p->mask, y, w);
        TU_ASSERT_OK(st, ctx, "clattn_mha_host");
        tu_host_check_guard(y, p->ny, "out");
        for (size_t t = 0; t < p->ny; t++)
            ck_assert_msg(!isnan(y[t]), "%s: out[%zu] is NaN", tu_label(), t);
        check_close_named("out", y, ry, p->ny, NULL);
        if (w) {
            tu_host_check_guard(w, p->nw, "attn_weights");
            check_close_named("attn_weights", w, rw, p->nw, NULL);
        }
        const size_t *kl = ref_masks(p->d.masks)->key_lengths;
        if (kl)
            for (size_t b = 0; b < p->d.batch; b++) {
                if (kl[b] != 0)
                    continue;
                if (!p->hw.w_o)
                    for (size_t t = 0; t < L * p->ycols; t++)
                        ck_assert_msg(y[b * L * p->ycols + t] == 0.0f,
                                      "%s: batch %zu (key length 0): out[%zu] = %.9g, expected 0",
                                      tu_label(), b, t, (double)y[b * L * p->ycols + t]);
                if (w)
                    for (size_t t = 0; t < H * L * p->S; t++)
                        ck_assert_msg(w[b * H * L * p->S + t] == 0.0f,
                                      "%s: batch %zu (key length 0): weight %zu = %.9g, expected 0",
                                      tu_label(), b, t, (double)w[b * H * L * p->S + t]);
            }
    }
}

/* ---------------------------------------------------------------------------------------------- */
/* 1. Fully masked rows                                                                            */
/* ---------------------------------------------------------------------------------------------- */

START_TEST(test_fully_masked)
{
    size_t dev = (size_t)_i;
    clattn_context *ctx = tu_ctx[dev];
    const char *spec = tu_dev_spec[dev];
    prob p;

    /* key length 0: a whole batch fully masked, the other partly */
    prob_init(&p, 3, 2, 9, 13, 8, 0, 1.0f, 101);
    prob_key_lengths(&p, (size_t[]){0, 5, 13});
    ck_assert_uint_eq(check_masked_problem(ctx, &p, "key length 0", spec), 2 * 9);

    /* bottom-right causal with S < L: rows 0 .. L−S−1 see nothing */
    prob_init(&p, 2, 2, 11, 4, 8, 5, 1.0f, 102);
    prob_masks(&p)->causal = CLATTN_CAUSAL_BOTTOM_RIGHT;
    ck_assert_uint_eq(check_masked_problem(ctx, &p, "bottom-right causal, S < L", spec), 4 * 7);

    /* additive (L,S) mask with rows 2 and 7 entirely −inf (rows in different work-items of the
     * fused kernel, and one beside visible rows of the same work-item) */
    prob_init(&p, 2, 2, 9, 13, 8, 0, 1.0f, 103);
    prob_mask(&p, CLATTN_MASK_L_S, 104);
    for (size_t j = 0; j < p.S; j++)
        p.mask[2 * p.S + j] = p.mask[7 * p.S + j] = -INFINITY;
    ck_assert_uint_eq(check_masked_problem(ctx, &p, "additive row of -inf (L,S)", spec), 4 * 2);

    /* (B,H,L,S) mask: one −inf row per matrix, plus a key length and causal that together mask
     * more rows; long enough for several fused work-groups (L 150 > 32·4 rows per group) */
    prob_init(&p, 2, 2, 150, 70, 8, 0, 1.0f, 105);
    prob_mask(&p, CLATTN_MASK_B_H_L_S, 106);
    for (size_t t = 0; t < p.BH; t++)
        for (size_t j = 0; j < p.S; j++)
            p.mask[(t * p.L + 3 + 37 * t) * p.S + j] = -INFINITY;
    prob_masks(&p)->causal = CLATTN_CAUSAL_BOTTOM_RIGHT;
    prob_key_lengths(&p, (size_t[]){0, 70});
    /* batch 0: every row; batch 1: rows 0..79 by causal, and row 3+37t when it is ≥ 80 */
    ck_assert_uint_eq(check_masked_problem(ctx, &p, "all masks combined", spec),
                      2 * 150 + 2 * 80 + 1 /* t=3: row 114 */);

    /* the same through the cl_mem API, with guard regions and inputs left unchanged */
    reference ref;
    ref_of(&p, &ref);
    cl_mem mq = tu_dev_alloc(ctx, p.nq, p.q), mk = tu_dev_alloc(ctx, p.nk, p.k),
           mv = tu_dev_alloc(ctx, p.nv, p.v), mm = tu_dev_alloc(ctx, p.nm, p.mask);
    for (int a = 0; a < TU_NPATHS; a++) {
        tu_set_label("all masks combined [cl_mem %s] on %s", tu_algorithm_name(tu_paths[a]), spec);
        clattn_sdpa_desc d = p.d;
        d.algorithm = tu_paths[a];
        cl_mem mo = tu_dev_alloc(ctx, p.no, NULL), ml = tu_dev_alloc(ctx, p.nl, NULL);
        cl_mem mw = tu_paths[a] == CLATTN_ALGORITHM_STAGED ? tu_dev_alloc(ctx, p.np, NULL) : NULL;
        clattn_status st = clattn_sdpa(ctx, &d, mq, mk, mv, mm, mo, mw, ml);
        TU_ASSERT_OK(st, ctx, "clattn_sdpa");
        tu_finish(ctx);
        result g;
        g.o = tu_dev_read_checked(ctx, mo, p.no, "out");
        g.l = tu_dev_read_checked(ctx, ml, p.nl, "lse");
        g.w = mw ? tu_dev_read_checked(ctx, mw, p.np, "weights") : NULL;
        check_no_nan(&p, &g);
        for (size_t r = 0; r < p.nl; r++)
            if (row_fully_masked(&p, r))
                check_masked_row(&p, &g, r);
        check_all(&p, &g, &ref);
    }
    tu_dev_check_equal(ctx, mq, p.q, p.nq, "q");
    tu_dev_check_equal(ctx, mk, p.k, p.nk, "k");
    tu_dev_check_equal(ctx, mv, p.v, p.nv, "v");
    tu_dev_check_equal(ctx, mm, p.mask, p.nm, "mask");

    /* multi-head layers: a batch with key length 0 (zero rows without W_O, b_O with it), and
     * bottom-right causal cross-attention with S < L */
    mprob m;
    for (int wo = 0; wo < 2; wo++) {
        mprob_init(&m, 3, 7, 0, 8, 2, 4, wo, 110 + (uint64_t)wo);
        memcpy(m.kl, (size_t[]){5, 0, 7}, sizeof(size_t) * 3);
        mprob_masks(&m)->key_lengths = m.kl;
        check_mha_problem(ctx, &m, wo ? "key length 0, W_O and b_O" : "key length 0, no W_O", spec);
    }
    mprob_init(&m, 2, 9, 4, 8, 2, 4, 1, 112);
    mprob_masks(&m)->causal = CLATTN_CAUSAL_BOTTOM_RIGHT;
    mprob_mask(&m, CLATTN_MASK_L_S, 113);
    for (size_t j = 0; j < m.S; j++)
        m.mask[8 * m.S + j] = -INFINITY;
    check_mha_problem(ctx, &m, "cross-attention, bottom-right causal S < L, a -inf row", spec);
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* 2. Finite, very negative masks                                                                  */
/* ---------------------------------------------------------------------------------------------- */

/*
 * What is the right answer for a row whose additive mask is −FLT_MAX (or −1e30) on every key?
 *
 * In exact arithmetic softmax is shift-invariant: softmax(s + c) = softmax(s), so the row should get
 * the weights of its unmasked scores. But no finite-precision evaluation can see that: the scores are
 * O(1) here, far below half an ulp of the mask (ulp(FLT_MAX) = 2^104 in float; even in double,
 * ulp(1e30) = 2^47 and ulp(FLT_MAX) = 2^75), so score + mask rounds to the mask itself, in the
 * library's float arithmetic and in the fp64 reference alike (and in PyTorch, which adds in the input
 * dtype). Every key then has the same score and the row is a uniform softmax over the keys it can
 * see: weights 1/n, output the mean of those V rows, lse = mask + log n, which rounds to the mask.
 * That is what ref_sdpa computes and what both paths must give: finite, no NaN, no inf. The same
 * value on every key is not "fully masked" (only −inf is), so these rows are not zero.
 *
 * Where a row is −FLT_MAX on some keys and O(1) on others, the −FLT_MAX keys get exp(−FLT_MAX − m) =
 * 0 exactly, the same as masking them, whether −FLT_MAX − m rounds to −FLT_MAX or (for a large
 * positive row maximum m, as in row 5 below, whose other keys carry +FLT_MAX) overflows to −inf. No
 * NaN can arise: no inf − inf is ever formed from finite masks and O(1) scores.
 */
static void fill_negative_rows(prob *p, float big, size_t bh_count)
{
    const size_t S = p->S;
    for (size_t t = 0; t < bh_count; t++) {
        float *m = p->mask + t * p->L * S;
        for (size_t j = 0; j < S; j++) {
            m[0 * S + j] = big;                               /* row 0: every key */
            m[1 * S + j] = j % 2 ? big : m[1 * S + j];        /* row 1: odd keys */
            m[2 * S + j] = j == S - 1 ? 0.0f : big;           /* row 2: all but the last key */
            m[3 * S + j] = j % 3 == 0 ? -INFINITY : big;      /* row 3: −inf and big, no finite key */
            m[5 * S + j] = j < S / 2 ? -big : big;            /* row 5: first half +|big| */
            m[6 * S + j] = j == 0 ? -INFINITY : m[6 * S + j]; /* row 6: one −inf */
        }
    }
}

START_TEST(test_negative_masks)
{
    size_t dev = (size_t)_i;
    clattn_context *ctx = tu_ctx[dev];
    const char *spec = tu_dev_spec[dev];
    static const float bigs[2] = {-FLT_MAX, -1e30f};
    for (int bi = 0; bi < 2; bi++) {
        const float big = bigs[bi];
        char name[128];
        prob p;

        /* (L,S) mask, no other masks */
        prob_init(&p, 2, 2, 9, 13, 8, 0, 1.0f, 201 + (uint64_t)bi);
        prob_mask(&p, CLATTN_MASK_L_S, 203);
        fill_negative_rows(&p, big, 1);
        reference ref;
        ref_of(&p, &ref);
        /* the reference is a uniform softmax on the rows that are `big` on every visible key */
        for (size_t bh = 0; bh < p.BH; bh++)
            for (size_t j = 0; j < p.S; j++) {
                ck_assert(fabs(ref.w[(bh * p.L + 0) * p.S + j] - 1.0 / (double)p.S) < 1e-12);
                double expect3 = j % 3 == 0 ? 0.0 : 1.0 / (double)(p.S - (p.S + 2) / 3);
                ck_assert(fabs(ref.w[(bh * p.L + 3) * p.S + j] - expect3) < 1e-12);
            }
        snprintf(name, sizeof name, "additive (L,S) rows of %g", (double)big);
        for (int a = 0; a < TU_NPATHS; a++) {
            tu_set_label("%s [%s] on %s", name, tu_algorithm_name(tu_paths[a]), spec);
            result g;
            run_path(ctx, &p, tu_paths[a], &g);
            check_finite_out(&p, &g);
            check_no_nan(&p, &g);
            check_all(&p, &g, &ref);
        }

        /* (B,H,L,S) mask with causal and key lengths on top: rows of `big` over fewer visible keys;
         * row 0 top-left causal sees only key 0 (weight 1) */
        prob_init(&p, 2, 2, 40, 37, 8, 0, 1.0f, 205 + (uint64_t)bi);
        prob_mask(&p, CLATTN_MASK_B_H_L_S, 207);
        fill_negative_rows(&p, big, p.BH);
        prob_masks(&p)->causal = CLATTN_CAUSAL_TOP_LEFT;
        prob_key_lengths(&p, (size_t[]){21, 37});
        snprintf(name, sizeof name, "additive (B,H,L,S) rows of %g, causal, key lengths",
                 (double)big);
        check_masked_problem(ctx, &p, name, spec);

        /* a multi-head layer with such a mask */
        mprob m;
        mprob_init(&m, 2, 9, 0, 8, 2, 4, 1, 210 + (uint64_t)bi);
        mprob_mask(&m, CLATTN_MASK_L_S, 212);
        for (size_t j = 0; j < m.S; j++) {
            m.mask[0 * m.S + j] = big;
            m.mask[4 * m.S + j] = j == 2 ? 0.0f : big;
        }
        snprintf(name, sizeof name, "layer with rows of %g", (double)big);
        check_mha_problem(ctx, &m, name, spec);
    }
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* 3. inf and NaN in the inputs                                                                    */
/* ---------------------------------------------------------------------------------------------- */

enum { POISON_Q, POISON_K, POISON_V };

typedef struct {
    const char *name;
    int tensor;   /* POISON_Q / K / V */
    float value;  /* NaN, +inf or −inf */
    size_t bh;    /* which matrix */
    size_t row;   /* row of Q (query i) or of K / V (key j) */
    size_t col;   /* element within the row */
} poison;

/*
 * Expectations, row by row (r = bh·L + i):
 *  - rows that do not read the poisoned element (another matrix; for K and V a row that cannot see
 *    key j) must equal the reference computed on clean inputs (the poisoned element replaced by 0);
 *  - NaN or ±inf in Q row i: every score of row i is NaN (or ±inf mixed, whose softmax is NaN) —
 *    the whole output row and its lse must be NaN (IEEE propagation, as PyTorch gives; an lse of
 *    −inf would claim a fully masked row, whose output clattn.h defines as zero);
 *  - NaN in K row j: every row that sees j has a NaN score, so its output row, its lse and its
 *    staged weights are NaN. "Sees" means not hidden by the causal rule or
 *    the key length, which replace the score by −inf: an additive mask is *added* (clattn.h), and
 *    NaN + (−inf) = NaN, so an additive −inf does not hide a NaN score (nor +inf: +inf − inf = NaN)
 *    — in the library's float arithmetic, in the fp64 reference and in PyTorch's float masks alike;
 *  - −inf in K row j: score(i, j) = −inf·q_i[c] + … is −inf where q_i[c] > 0 (key j then adds
 *    nothing: the row must equal the reference with key j masked, which ref_sdpa computes from the
 *    poisoned input) and +inf where q_i[c] < 0 (the row's softmax is inf − inf: non-finite);
 *  - +inf or NaN at V[j][c]: weights and lse do not depend on V and must equal the clean reference;
 *    the output of a row that sees j has column c non-finite (weight > 0 times inf) and every other
 *    column equal to the clean reference.
 */
static void check_poison(clattn_context *ctx, prob *p, const poison *ps, clattn_algorithm alg,
                         const char *spec)
{
    float *target = ps->tensor == POISON_Q ? p->q : ps->tensor == POISON_K ? p->k : p->v;
    size_t rows = ps->tensor == POISON_Q ? p->L : p->S;
    size_t width = ps->tensor == POISON_V ? p->Dv : p->D;
    size_t at = (ps->bh * rows + ps->row) * width + ps->col;
    ck_assert(ps->bh < p->BH && ps->row < rows && ps->col < width);

    target[at] = 0.0f;
    reference clean;
    ref_of(p, &clean);
    target[at] = ps->value;
    reference dirty;
    ref_of(p, &dirty);

    tu_set_label("%s [%s] on %s", ps->name, tu_algorithm_name(alg), spec);
    result g;
    run_path(ctx, p, alg, &g);
    /* reads[r]: 0 untouched, 1 reads the poison and must be NaN, 2 reads a −inf K score that
     * hides the key (compare with the poisoned reference), 3 reads a poisoned V element */
    unsigned char *reads = tu_track_malloc(p->nl);
    for (size_t r = 0; r < p->nl; r++) {
        size_t bh = r / p->L, i = r % p->L;
        int rd = bh == ps->bh &&
                 (ps->tensor == POISON_Q   ? i == ps->row
                  : ps->tensor == POISON_K ? !ref_key_masked(p->d.masks, p->L, p->S, bh / p->H, i,
                                                             ps->row)
                                           : sees(p, r, ps->row));
        if (rd && ps->tensor == POISON_V) {
            reads[r] = 3;
        } else if (rd && ps->tensor == POISON_K && ps->value == -INFINITY) {
            int fin = 1;
            for (size_t t = 0; t < p->Dv; t++)
                fin &= isfinite(dirty.o[r * p->Dv + t]) != 0;
            reads[r] = fin ? 2 : 1;
        } else {
            reads[r] = (unsigned char)rd;
        }
    }
    /* first the rows the poison must not reach, then the others' outputs, their lse last */
    for (size_t r = 0; r < p->nl; r++)
        if (reads[r] == 0)
            check_row(p, &g, &clean, r);
        else if (reads[r] == 2)
            check_row(p, &g, &dirty, r);
    for (size_t r = 0; r < p->nl; r++) {
        const float *o = g.o + r * p->Dv;
        const float *w = g.w ? g.w + r * p->S : NULL;
        if (reads[r] == 3) {
            ck_assert_msg(!isfinite(o[ps->col]),
                          "%s: row %zu sees key %zu whose V[%zu] = %g, but out[%zu] = %.9g is "
                          "finite",
                          tu_label(), r, ps->row, ps->col, (double)ps->value, ps->col,
                          (double)o[ps->col]);
            for (size_t c = 0; c < p->Dv; c++) {
                if (c == ps->col)
                    continue;
                char what[64];
                snprintf(what, sizeof what, "out row %zu col %zu", r, c);
                check_close_named(what, o + c, clean.o + r * p->Dv + c, 1, NULL);
            }
            check_close_named("lse", g.l + r, clean.l + r, 1, NULL);
            if (w)
                check_close_named("weights", w, clean.w + r * p->S, p->S, NULL);
        } else if (reads[r] == 1) {
            for (size_t c = 0; c < p->Dv; c++)
                ck_assert_msg(isnan(o[c]),
                              "%s: row %zu reads the poisoned %s element (%g) but out[%zu] = %.9g "
                              "(lse %.9g): expected NaN",
                              tu_label(), r, ps->tensor == POISON_Q ? "Q" : "K",
                              (double)ps->value, c, (double)o[c], (double)g.l[r]);
            if (w)
                for (size_t j = 0; j < p->S; j++)
                    ck_assert_msg(isnan(w[j]), "%s: row %zu: weight[%zu] = %.9g, expected NaN",
                                  tu_label(), r, j, (double)w[j]);
        }
    }
    /* −inf is clattn.h's mark of a fully masked row (zero output): a NaN row's lse is NaN */
    for (size_t r = 0; r < p->nl; r++)
        if (reads[r] == 1)
            ck_assert_msg(isnan(g.l[r]), "%s: row %zu (output NaN): lse = %.9g, expected NaN",
                          tu_label(), r, (double)g.l[r]);
    target[at] = 0.0f;
}

#define NOC CLATTN_CAUSAL_NONE

typedef struct {
    poison ps;
    size_t B, H, L, S;
    clattn_causal causal;
    size_t kl[2];   /* both 0: no key lengths */
    int even_key;   /* ≥ 0: an (L,S) mask, uniform, with −inf on this key for even rows */
} poison_case;

static const poison_case poison_cases[] = {
    /* Q: NaN, +inf, −inf in one element of row 5 of matrix 1 */
    {{"NaN in Q row 5", POISON_Q, NAN, 1, 5, 2}, 2, 2, 13, 17, NOC, {0, 0}, -1},
    {{"+inf in Q row 5", POISON_Q, INFINITY, 1, 5, 2}, 2, 2, 13, 17, NOC, {0, 0}, -1},
    {{"-inf in Q row 5", POISON_Q, -INFINITY, 1, 5, 2}, 2, 2, 13, 17, NOC, {0, 0}, -1},
    /* Q: NaN in row 5 under top-left causal (row 5 sees keys 0..5) */
    {{"NaN in Q row 5, top-left causal", POISON_Q, NAN, 0, 5, 0}, 1, 1, 13, 13, TL, {0, 0}, -1},
    /* K: NaN at key 6 under top-left causal: rows 0..5 cannot see it */
    {{"NaN in K row 6, top-left causal", POISON_K, NAN, 0, 6, 3}, 1, 2, 13, 13, TL, {0, 0}, -1},
    /* K: NaN at key 10 under bottom-right causal with L 5 < S 13: rows 0 and 1 cannot see it */
    {{"NaN in K row 10, bottom-right causal L 5 S 13", POISON_K, NAN, 0, 10, 0}, 1, 1, 5, 13, BR,
     {0, 0}, -1},
    /* K: NaN at key 6; batch 0's key length 6 hides it from all of batch 0 */
    {{"NaN in K row 6 (batch 0, key length 6)", POISON_K, NAN, 0, 6, 1}, 2, 1, 13, 13, NOC,
     {6, 13}, -1},
    {{"NaN in K row 6 (batch 1, key length 13)", POISON_K, NAN, 1, 6, 1}, 2, 1, 13, 13, NOC,
     {6, 13}, -1},
    /* K: NaN at key 6 with an additive −inf on key 6 for even rows (NaN + −inf is NaN: every row
     * reads it) */
    {{"NaN in K row 6, additive -inf on even rows", POISON_K, NAN, 0, 6, 1}, 1, 1, 13, 13, NOC,
     {0, 0}, 6},
    /* K: NaN at key 0 under top-left causal: row 0 sees only the NaN key */
    {{"NaN in K row 0, top-left causal (row 0 sees only key 0)", POISON_K, NAN, 0, 0, 0}, 1, 1, 9,
     9, TL, {0, 0}, -1},
    /* K: −inf at key 6 under top-left causal */
    {{"-inf in K row 6, top-left causal", POISON_K, -INFINITY, 1, 6, 4}, 1, 2, 13, 13, TL, {0, 0},
     -1},
    /* V: +inf at key 6 under top-left causal: rows 0..5 mask it; rows 4 and 5 share a fused
     * work-item (4 rows each on CPUs) with rows 6 and 7, which see it */
    {{"+inf in V row 6, top-left causal", POISON_V, INFINITY, 1, 6, 3}, 1, 2, 13, 13, TL, {0, 0},
     -1},
    /* V: +inf at key 8 under top-left causal: rows 0..7 mask it, rows 8.. see it (a work-item
     * boundary on CPUs) */
    {{"+inf in V row 8, top-left causal", POISON_V, INFINITY, 0, 8, 0}, 1, 2, 13, 13, TL, {0, 0},
     -1},
    /* V: NaN at key 6 in batch 0 with key length 6 (masked for the whole batch), +inf in batch 1 */
    {{"NaN in V row 6 (batch 0, key length 6)", POISON_V, NAN, 0, 6, 5}, 2, 1, 13, 13, NOC,
     {6, 13}, -1},
    {{"+inf in V row 6 (batch 1, key length 13)", POISON_V, INFINITY, 1, 6, 5}, 2, 1, 13, 13, NOC,
     {6, 13}, -1},
    /* V: +inf at key 6 with an additive (L,S) mask of −inf on key 6 for even rows only */
    {{"+inf in V row 6, additive -inf on even rows", POISON_V, INFINITY, 0, 6, 2}, 1, 1, 13, 13,
     NOC, {0, 0}, 6},
    /* V: −inf at key 20 under bottom-right causal, L 40 S 37 (rows 0..22 mask it) */
    {{"-inf in V row 20, bottom-right causal L 40 S 37", POISON_V, -INFINITY, 0, 20, 7}, 1, 1, 40,
     37, BR, {0, 0}, -1},
};
#define N_POISON (sizeof poison_cases / sizeof poison_cases[0])

/* One iteration per case × path × device, so that every case reports on both paths. */
START_TEST(test_inf_nan)
{
    size_t ci = TU_CASE(_i) / TU_NPATHS, dev = TU_DEVICE(_i);
    clattn_algorithm alg = tu_paths[TU_CASE(_i) % TU_NPATHS];
    const poison_case *c = &poison_cases[ci];
    prob p;
    prob_init(&p, c->B, c->H, c->L, c->S, 8, 0, 1.0f, 300 + ci);
    prob_masks(&p)->causal = c->causal;
    if (c->kl[0] || c->kl[1])
        prob_key_lengths(&p, c->kl);
    if (c->even_key >= 0) {
        prob_mask(&p, CLATTN_MASK_L_S, 350 + ci);
        for (size_t i = 0; i < p.L; i += 2)
            p.mask[i * p.S + (size_t)c->even_key] = -INFINITY;
    }
    check_poison(tu_ctx[dev], &p, &c->ps, alg, tu_dev_spec[dev]);
}
END_TEST

/* A key whose score lies ~200 below the row maximum has weight exp(−200) = 0 in float, on both paths
 * (the staged softmax rounds it to 0; the fused kernel's running factor does). Its value is ±inf:
 * a weight of exactly 0 adds nothing, so every row is finite and equals the reference computed with
 * that value replaced by 0. S ≥ 64 so that the key sits in a fully visible step of the fused walk;
 * key 0 also makes the first running maximum the one that is later scaled away (factor 0). */
START_TEST(test_underflowed_weight)
{
    static const size_t keys[] = {0, 1, 47, 95};
    const size_t dev = TU_DEVICE(_i);
    const size_t jz = keys[TU_CASE(_i)];
    prob p;
    prob_init(&p, 1, 2, 7, 96, 8, 0, 1.0f, 900 + jz);
    for (size_t t = 0; t < p.nq; t++)
        p.q[t] = 0.5f + 0.5f * fabsf(p.q[t]); /* positive queries: k = −100 gives scores ≤ −140 */
    for (size_t bh = 0; bh < p.BH; bh++)
        for (size_t d = 0; d < p.D; d++) {
            p.k[(bh * p.S + jz) * p.D + d] = -100.0f;
            p.v[(bh * p.S + jz) * p.Dv + d] = 0.0f;
        }
    reference ref;
    ref_of(&p, &ref);
    for (size_t bh = 0; bh < p.BH; bh++)
        for (size_t d = 0; d < p.Dv; d++)
            p.v[(bh * p.S + jz) * p.Dv + d] = d % 2 ? -INFINITY : INFINITY;
    for (int a = 0; a < TU_NPATHS; a++) {
        tu_set_label("weight exp(-200) = 0 on key %zu whose value is +-inf [%s] on %s", jz,
                     tu_algorithm_name(tu_paths[a]), tu_dev_spec[dev]);
        result g;
        run_path(tu_ctx[dev], &p, tu_paths[a], &g);
        check_finite_out(&p, &g);
        check_all(&p, &g, &ref);
    }
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* 4. Scores near the float range                                                                  */
/* ---------------------------------------------------------------------------------------------- */

static void count_kinds(const float *x, size_t n, size_t *fin, size_t *inf, size_t *nan)
{
    *fin = *inf = *nan = 0;
    for (size_t t = 0; t < n; t++) {
        if (isnan(x[t]))
            ++*nan;
        else if (isinf(x[t]))
            ++*inf;
        else
            ++*fin;
    }
}

START_TEST(test_large_scores)
{
    size_t dev = (size_t)_i;
    clattn_context *ctx = tu_ctx[dev];
    const char *spec = tu_dev_spec[dev];
    prob p;

    /* Integer multiples of 1000 up to ±1e4, scale 1, D 8: scores are multiples of 1e6 up to 8e8,
     * exact in float (k·1e6 = k·15625·2^6 with k·15625 < 2^24), so the float and fp64 scores agree
     * exactly, ties included; exp(s − max) is 0 or 1 and the weights one-hot (or split evenly over
     * exact ties). Finite outputs equal to the reference. */
    static const clattn_causal causals[2] = {CLATTN_CAUSAL_NONE, CLATTN_CAUSAL_TOP_LEFT};
    for (int c = 0; c < 2; c++) {
        prob_init(&p, 2, 2, 37, 45, 8, 0, 1.0f, 401 + (uint64_t)c);
        tu_fill_int_multiples(p.q, p.nq, 10, 1000.0f, 403);
        tu_fill_int_multiples(p.k, p.nk, 10, 1000.0f, 404);
        p.d.scale = 1.0f;
        prob_masks(&p)->causal = causals[c];
        reference ref;
        ref_of(&p, &ref);
        for (int a = 0; a < TU_NPATHS; a++) {
            tu_set_label("scores ~1e8·D, scale 1, causal %d [%s] on %s", (int)causals[c],
                         tu_algorithm_name(tu_paths[a]), spec);
            result g;
            run_path(ctx, &p, tu_paths[a], &g);
            check_finite_out(&p, &g);
            check_all(&p, &g, &ref);
        }
    }

    /* Inputs ~1e19, scale 1: products ~1e38 and their sums over D 8 overflow float to ±inf (and
     * +inf + −inf = NaN) while fp64 keeps them finite. Nothing in clattn.h promises a value for
     * such rows, so batch 0 (huge) is only reported; batch 1 (ordinary inputs in the same call)
     * must be unaffected. Three kinds of batch 0:
     *   every score +inf    Q and K all in [1e19, 2e19]: each product ≥ 1e38, each sum ≥ 8e38;
     *   scores ±inf         Q positive, K positive on even keys and negative on odd keys;
     *   mixed               Q and K uniform in ±4e19: some partial sums overflow, some do not. */
    static const char *const kinds[3] = {"every score +inf", "scores +inf/-inf by key",
                                         "uniform +-4e19"};
    for (int kind = 0; kind < 3; kind++) {
        prob_init(&p, 2, 1, 9, 11, 8, 0, 1.0f, 410 + (uint64_t)kind);
        p.d.scale = 1.0f;
        size_t hq = p.nq / 2, hk = p.nk / 2;
        for (size_t t = 0; t < hq; t++)
            p.q[t] = kind == 2 ? p.q[t] * 4e19f : (1.5f + 0.5f * p.q[t]) * 1e19f;
        for (size_t t = 0; t < hk; t++) {
            float mag = (1.5f + 0.5f * p.k[t]) * 1e19f;
            size_t j = t / p.D;
            p.k[t] = kind == 2 ? p.k[t] * 4e19f : (kind == 1 && j % 2) ? -mag : mag;
        }
        reference ref;
        ref_of(&p, &ref);
        size_t half_o = p.no / 2, half_l = p.nl / 2, half_w = p.np / 2;
        for (int a = 0; a < TU_NPATHS; a++) {
            tu_set_label("dot products overflowing float (%s, scale 1) [%s] on %s", kinds[kind],
                         tu_algorithm_name(tu_paths[a]), spec);
            result g;
            run_path(ctx, &p, tu_paths[a], &g);
            for (size_t r = half_l; r < p.nl; r++)
                check_row(&p, &g, &ref, r);
            size_t f, i, n, fw = 0, iw = 0, nw = 0, fl, il, nl, rows_finite = 0;
            count_kinds(g.o, half_o, &f, &i, &n);
            count_kinds(g.l, half_l, &fl, &il, &nl);
            if (g.w)
                count_kinds(g.w, half_w, &fw, &iw, &nw);
            for (size_t r = 0; r < half_l; r++) {
                size_t rf, ri, rn;
                count_kinds(g.o + r * p.Dv, p.Dv, &rf, &ri, &rn);
                rows_finite += rf == p.Dv;
            }
            printf("note: %s: batch 0: out %zu finite / %zu inf / %zu NaN (%zu of %zu rows "
                   "finite, row 0 col 0 = %g, fp64 %g); lse %zu / %zu / %zu (row 0 = %g, fp64 %g);"
                   " weights %zu / %zu / %zu\n",
                   tu_label(), f, i, n, rows_finite, half_l, (double)g.o[0], ref.o[0], fl, il, nl,
                   (double)g.l[0], ref.l[0], fw, iw, nw);
        }
    }
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* 5. Degenerate sizes                                                                             */
/* ---------------------------------------------------------------------------------------------- */

/* Both paths against the reference; with `one_key`, every visible weight must be exactly 1 and the
 * output row exactly that key's V row. */
static void check_plain(clattn_context *ctx, const prob *p, const char *name, const char *spec,
                        int one_key)
{
    reference ref;
    ref_of(p, &ref);
    for (int a = 0; a < TU_NPATHS; a++) {
        tu_set_label("%s [%s] on %s", name, tu_algorithm_name(tu_paths[a]), spec);
        result g;
        run_path(ctx, p, tu_paths[a], &g);
        check_no_nan(p, &g);
        for (size_t r = 0; r < p->nl; r++)
            if (row_fully_masked(p, r))
                check_masked_row(p, &g, r);
        check_all(p, &g, &ref);
        if (!one_key)
            continue;
        for (size_t r = 0; r < p->nl; r++) {
            if (!sees(p, r, 0))
                continue;
            if (g.w)
                ck_assert_msg(g.w[r] == 1.0f, "%s: row %zu: the only key's weight is %.9g, not 1",
                              tu_label(), r, (double)g.w[r]);
            size_t bh = r / p->L;
            for (size_t c = 0; c < p->Dv; c++)
                ck_assert_msg(g.o[r * p->Dv + c] == p->v[bh * p->Dv + c],
                              "%s: row %zu col %zu: %.9g, expected V's %.9g exactly", tu_label(), r,
                              c, (double)g.o[r * p->Dv + c], (double)p->v[bh * p->Dv + c]);
        }
    }
}

START_TEST(test_degenerate)
{
    size_t dev = (size_t)_i;
    clattn_context *ctx = tu_ctx[dev];
    const char *spec = tu_dev_spec[dev];
    prob p;

    /* S = 1: weight exactly 1 wherever the key is visible */
    prob_init(&p, 2, 3, 7, 1, 8, 5, 1.0f, 501);
    check_plain(ctx, &p, "S 1", spec, 1);
    prob_init(&p, 2, 3, 7, 1, 8, 5, 1.0f, 502);
    prob_key_lengths(&p, (size_t[]){0, 1});
    check_plain(ctx, &p, "S 1, key lengths 0 and 1", spec, 1);
    prob_init(&p, 1, 2, 5, 1, 8, 0, 1.0f, 503);
    prob_masks(&p)->causal = CLATTN_CAUSAL_BOTTOM_RIGHT; /* rows 0..3 see nothing, row 4 key 0 */
    check_plain(ctx, &p, "S 1, bottom-right causal L 5", spec, 1);

    /* D = 1 (and Dv 1, and D 1 with Dv 5) */
    prob_init(&p, 2, 2, 37, 41, 1, 0, 2.0f, 504);
    check_plain(ctx, &p, "D 1", spec, 0);
    prob_init(&p, 1, 2, 37, 41, 1, 5, 2.0f, 505);
    prob_masks(&p)->causal = CLATTN_CAUSAL_TOP_LEFT;
    check_plain(ctx, &p, "D 1 Dv 5, top-left causal", spec, 0);

    /* L = 1 decode step with S 267 and bottom-right causal: the one query sees every key, the
     * same as no mask */
    prob_init(&p, 2, 2, 1, 267, 8, 0, 1.0f, 506);
    prob_masks(&p)->causal = CLATTN_CAUSAL_BOTTOM_RIGHT;
    for (size_t j = 0; j < p.S; j++)
        ck_assert(sees(&p, 0, j));
    check_plain(ctx, &p, "decode L 1 S 267, bottom-right causal", spec, 0);
    prob_key_lengths(&p, (size_t[]){267, 100});
    check_plain(ctx, &p, "decode L 1 S 267, bottom-right causal, key lengths", spec, 0);

    /* many matrices of one query and one key: B 8 · H 300 with L = S = 1, Dv 1 */
    prob_init(&p, 8, 300, 1, 1, 3, 1, 1.0f, 507);
    check_plain(ctx, &p, "B 8 H 300 L S Dv 1", spec, 1);
    prob_key_lengths(&p, (size_t[]){1, 0, 1, 0, 0, 1, 1, 0});
    check_plain(ctx, &p, "B 8 H 300 L S Dv 1, key lengths", spec, 1);

    /* the layer: a decode step (L 1) over 267 keys of cross-attention, bottom-right causal */
    mprob m;
    mprob_init(&m, 2, 1, 267, 8, 2, 4, 1, 510);
    mprob_masks(&m)->causal = CLATTN_CAUSAL_BOTTOM_RIGHT;
    check_mha_problem(ctx, &m, "layer decode L 1 S 267", spec);
    /* the layer with head size 1 and one token */
    mprob_init(&m, 3, 1, 0, 2, 3, 1, 0, 511);
    check_mha_problem(ctx, &m, "layer L 1, head size 1", spec);
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* 6. Head sizes around the fused kernel's limit                                                   */
/* ---------------------------------------------------------------------------------------------- */

START_TEST(test_head_limit)
{
    size_t dev = (size_t)_i;
    clattn_context *ctx = tu_ctx[dev];
    const char *spec = tu_dev_spec[dev];
    prob p;
    reference ref;
    result g;

    /* D 300: AUTO (no weights requested) must take the staged path and be right */
    prob_init(&p, 1, 2, 9, 11, 300, 0, 0.2f, 601);
    prob_masks(&p)->causal = CLATTN_CAUSAL_TOP_LEFT;
    ref_of(&p, &ref);
    tu_set_label("D 300 [auto, out + lse] on %s", spec);
    run_sdpa(ctx, &p, CLATTN_ALGORITHM_AUTO, 0, &g);
    check_all(&p, &g, &ref);
    tu_set_label("D 300 [staged] on %s", spec);
    run_path(ctx, &p, CLATTN_ALGORITHM_STAGED, &g);
    check_all(&p, &g, &ref);

    /* FUSED with a head size over 256 (Dqk or Dv) is CLATTN_ERROR_INVALID_VALUE, outputs
     * untouched */
    static const size_t dims[3][2] = {{300, 0}, {8, 300}, {257, 256}};
    for (int t = 0; t < 3; t++) {
        prob_init(&p, 1, 1, 3, 4, dims[t][0], dims[t][1], 0.2f, 602);
        tu_set_label("Dqk %zu Dv %zu [fused] on %s", dims[t][0], p.Dv, spec);
        clattn_sdpa_desc d = p.d;
        d.algorithm = CLATTN_ALGORITHM_FUSED;
        float *o = tu_host_alloc(p.no, NULL), *l = tu_host_alloc(p.nl, NULL);
        clattn_status st = clattn_sdpa_host(ctx, &d, p.q, p.k, p.v, NULL, o, NULL, l);
        ck_assert_msg(st == CLATTN_ERROR_INVALID_VALUE, "%s: %s (%s), expected %s", tu_label(),
                      clattn_status_string(st), clattn_last_error(ctx),
                      clattn_status_string(CLATTN_ERROR_INVALID_VALUE));
        ck_assert_msg(tu_host_all_sentinel(o, p.no) && tu_host_all_sentinel(l, p.nl),
                      "%s: a rejected call wrote output", tu_label());
    }

    /* D 256 exactly on FUSED (and on STAGED), with masks; Dv 256 too */
    prob_init(&p, 1, 2, 21, 37, 256, 0, 0.25f, 603);
    prob_masks(&p)->causal = CLATTN_CAUSAL_BOTTOM_RIGHT;
    prob_mask(&p, CLATTN_MASK_L_S, 604);
    ref_of(&p, &ref);
    for (int a = 0; a < 2; a++) {
        tu_set_label("D 256 Dv 256 [%s] on %s", tu_algorithm_name(tu_paths[a]), spec);
        run_path(ctx, &p, tu_paths[a], &g);
        check_all(&p, &g, &ref);
    }
    tu_set_label("D 256 Dv 256 [auto, out + lse] on %s", spec);
    run_sdpa(ctx, &p, CLATTN_ALGORITHM_AUTO, 0, &g);
    check_all(&p, &g, &ref);
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("numerics");
    const struct {
        const char *name;
        const TTest *test;
    } tests[] = {
        {"fully_masked", test_fully_masked},   {"negative_masks", test_negative_masks},
        {"large_scores", test_large_scores},   {"degenerate", test_degenerate},
        {"head_limit", test_head_limit},
    };
    for (size_t t = 0; t < sizeof tests / sizeof tests[0]; t++) {
        TCase *tc = tu_tcase(tests[t].name);
        tcase_add_loop_test(tc, tests[t].test, 0, (int)tu_ndev);
        suite_add_tcase(s, tc);
    }
    TCase *tc = tu_tcase("inf_nan");
    tcase_add_loop_test(tc, test_inf_nan, 0, (int)(N_POISON * TU_NPATHS * tu_ndev));
    suite_add_tcase(s, tc);
    tc = tu_tcase("underflowed_weight");
    tcase_add_loop_test(tc, test_underflowed_weight, 0, (int)(4 * tu_ndev));
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_main(make_suite); }
