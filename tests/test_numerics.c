/*
 * Numerical edge cases of clattn_sdpa_host (and clattn_mha_host where it makes sense), every case on
 * both implementations: the fused kernel (CLATTN_ALGORITHM_FUSED, out + lse) and the staged path
 * (CLATTN_ALGORITHM_STAGED, out + weights + lse).
 *
 *  1. fully masked rows (key length 0, bottom-right causal with S < L, an additive row of −inf):
 *     exactly zero output and weights, lse −inf, no NaN anywhere (clattn.h promises this).
 *  2. finite, very negative additive masks (−FLT_MAX, −1e30), masking rows fully or in part.
 * test_numerics_inputs.c (the same program; numerics_test.h holds what the two share) has parts 3 to 6:
 *  3. ±inf and NaN in Q, K or V reach only the rows that read them; a weight that underflows to 0
 *     adds nothing, not even an inf value.
 *  4. scores far outside exp's range (|scores| ~ 1e9), and dot products that overflow float.
 *  5. degenerate sizes: S = 1, D = 1, L = 1 decode, B·H large with L = S = Dv = 1.
 *  6. head sizes around the fused kernel's limit of 256 on AUTO and FUSED.
 */
#include "numerics_test.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------- */
/* Problems, runs and row checks                                                                   */
/* ---------------------------------------------------------------------------------------------- */

/* Q, K, V uniform in [-a, a]; no masks; default scale. */
void prob_init(prob *p, size_t B, size_t H, size_t L, size_t S, size_t D, size_t Dv, float a,
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
clattn_masks *prob_masks(prob *p)
{
    p->d.masks = &p->m;
    return &p->m;
}

/* An additive mask of `layout`, uniform in [-1, 1]. */
void prob_mask(prob *p, clattn_mask_layout layout, uint64_t seed)
{
    prob_masks(p)->additive = layout;
    p->mask = tu_make_mask(layout, p->B, p->H, p->L, p->S, 0, seed, &p->nm);
}

void prob_key_lengths(prob *p, const size_t *kl)
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
int sees(const prob *p, size_t r, size_t j)
{
    size_t bh = r / p->L, i = r % p->L, b = bh / p->H;
    if (ref_key_masked(p->d.masks, p->L, p->S, b, i, j))
        return 0;
    return mask_at(p, bh, i, j) != -INFINITY;
}

void run_sdpa(clattn_context *ctx, const prob *p, clattn_algorithm alg, int want_weights,
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
void run_path(clattn_context *ctx, const prob *p, clattn_algorithm alg, result *r)
{
    run_sdpa(ctx, p, alg, alg == CLATTN_ALGORITHM_STAGED, r);
}

void ref_of(const prob *p, reference *r)
{
    r->o = tu_dalloc(p->no);
    r->w = tu_dalloc(p->np);
    r->l = tu_dalloc(p->nl);
    ref_sdpa(&p->d, p->q, p->k, p->v, p->mask, r->o, r->w, r->l);
}

/* Row r of out, weights and lse against the reference. */
void check_row(const prob *p, const result *g, const reference *ref, size_t r)
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

void check_all(const prob *p, const result *g, const reference *ref)
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

void check_finite_out(const prob *p, const result *g)
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

/* Both paths: no NaN anywhere, fully masked rows exactly zero / −inf, every row against ref_sdpa; with
 * `one_key`, every visible weight exactly 1 and the output row exactly that key's V row. Returns how many
 * fully masked rows there were. */
size_t check_problem(clattn_context *ctx, const prob *p, const char *name, const char *spec, int one_key)
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
        for (size_t r = 0; one_key && r < p->nl; r++) {
            if (!sees(p, r, 0))
                continue;
            if (g.w)
                ck_assert_msg(g.w[r] == 1.0f, "%s: row %zu: the only key's weight is %.9g, not 1", tu_label(), r,
                              (double)g.w[r]);
            size_t bh = r / p->L;
            for (size_t c = 0; c < p->Dv; c++)
                ck_assert_msg(g.o[r * p->Dv + c] == p->v[bh * p->Dv + c],
                              "%s: row %zu col %zu: %.9g, expected V's %.9g exactly", tu_label(), r, c,
                              (double)g.o[r * p->Dv + c], (double)p->v[bh * p->Dv + c]);
        }
    }
    return masked;
}

/* ---------------------------------------------------------------------------------------------- */
/* Multi-head layers                                                                               */
/* ---------------------------------------------------------------------------------------------- */

/* A layer of H heads of width hd on d_model dm; cross-attention when S ≠ 0 (kv width dm). */
void mprob_init(mprob *p, size_t B, size_t L, size_t S, size_t dm, size_t H, size_t hd,
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
clattn_masks *mprob_masks(mprob *p)
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
void check_mha_problem(clattn_context *ctx, const mprob *p, const char *name,
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
    ck_assert_uint_eq(check_problem(ctx, &p, "key length 0", spec, 0), 2 * 9);

    /* bottom-right causal with S < L: rows 0 .. L−S−1 see nothing */
    prob_init(&p, 2, 2, 11, 4, 8, 5, 1.0f, 102);
    prob_masks(&p)->causal = CLATTN_CAUSAL_BOTTOM_RIGHT;
    ck_assert_uint_eq(check_problem(ctx, &p, "bottom-right causal, S < L", spec, 0), 4 * 7);

    /* additive (L,S) mask with rows 2 and 7 entirely −inf (rows in different work-items of the
     * fused kernel, and one beside visible rows of the same work-item) */
    prob_init(&p, 2, 2, 9, 13, 8, 0, 1.0f, 103);
    prob_mask(&p, CLATTN_MASK_L_S, 104);
    for (size_t j = 0; j < p.S; j++)
        p.mask[2 * p.S + j] = p.mask[7 * p.S + j] = -INFINITY;
    ck_assert_uint_eq(check_problem(ctx, &p, "additive row of -inf (L,S)", spec, 0), 4 * 2);

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
    ck_assert_uint_eq(check_problem(ctx, &p, "all masks combined", spec, 0),
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
        check_problem(ctx, &p, name, spec, 0);

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

static Suite *make_suite(void)
{
    Suite *s = suite_create("numerics");
    tu_add_loop(s, "fully_masked", test_fully_masked, tu_ndev);
    tu_add_loop(s, "negative_masks", test_negative_masks, tu_ndev);
    numerics_add_input_cases(s);
    return s;
}

int main(void) { return tu_main(make_suite); }
