/*
 * Numerical edge cases, second half (test_numerics' parts 3 to 6; numerics_test.h): ±inf and NaN in Q, K or
 * V reach only the rows that read them, and a weight that underflows to 0 adds nothing, not even an inf
 * value; scores far outside exp's range and dot products that overflow float; degenerate sizes; head sizes
 * around the fused kernel's limit of 256.
 */
#include "numerics_test.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

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

START_TEST(test_degenerate)
{
    size_t dev = (size_t)_i;
    clattn_context *ctx = tu_ctx[dev];
    const char *spec = tu_dev_spec[dev];
    prob p;

    /* S = 1: weight exactly 1 wherever the key is visible */
    prob_init(&p, 2, 3, 7, 1, 8, 5, 1.0f, 501);
    check_problem(ctx, &p, "S 1", spec, 1);
    prob_init(&p, 2, 3, 7, 1, 8, 5, 1.0f, 502);
    prob_key_lengths(&p, (size_t[]){0, 1});
    check_problem(ctx, &p, "S 1, key lengths 0 and 1", spec, 1);
    prob_init(&p, 1, 2, 5, 1, 8, 0, 1.0f, 503);
    prob_masks(&p)->causal = CLATTN_CAUSAL_BOTTOM_RIGHT; /* rows 0..3 see nothing, row 4 key 0 */
    check_problem(ctx, &p, "S 1, bottom-right causal L 5", spec, 1);

    /* D = 1 (and Dv 1, and D 1 with Dv 5) */
    prob_init(&p, 2, 2, 37, 41, 1, 0, 2.0f, 504);
    check_problem(ctx, &p, "D 1", spec, 0);
    prob_init(&p, 1, 2, 37, 41, 1, 5, 2.0f, 505);
    prob_masks(&p)->causal = CLATTN_CAUSAL_TOP_LEFT;
    check_problem(ctx, &p, "D 1 Dv 5, top-left causal", spec, 0);

    /* L = 1 decode step with S 267 and bottom-right causal: the one query sees every key, the
     * same as no mask */
    prob_init(&p, 2, 2, 1, 267, 8, 0, 1.0f, 506);
    prob_masks(&p)->causal = CLATTN_CAUSAL_BOTTOM_RIGHT;
    for (size_t j = 0; j < p.S; j++)
        ck_assert(sees(&p, 0, j));
    check_problem(ctx, &p, "decode L 1 S 267, bottom-right causal", spec, 0);
    prob_key_lengths(&p, (size_t[]){267, 100});
    check_problem(ctx, &p, "decode L 1 S 267, bottom-right causal, key lengths", spec, 0);

    /* many matrices of one query and one key: B 8 · H 300 with L = S = 1, Dv 1 */
    prob_init(&p, 8, 300, 1, 1, 3, 1, 1.0f, 507);
    check_problem(ctx, &p, "B 8 H 300 L S Dv 1", spec, 1);
    prob_key_lengths(&p, (size_t[]){1, 0, 1, 0, 0, 1, 1, 0});
    check_problem(ctx, &p, "B 8 H 300 L S Dv 1, key lengths", spec, 1);

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

void numerics_add_input_cases(Suite *s)
{
    tu_add_loop(s, "large_scores", test_large_scores, tu_ndev);
    tu_add_loop(s, "degenerate", test_degenerate, tu_ndev);
    tu_add_loop(s, "head_limit", test_head_limit, tu_ndev);
    tu_add_loop(s, "inf_nan", test_inf_nan, N_POISON * TU_NPATHS * tu_ndev);
    tu_add_loop(s, "underflowed_weight", test_underflowed_weight, 4 * tu_ndev);
}
