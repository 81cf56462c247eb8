/*
 * Conformance table for clattn_sdpa_host and clattn_sdpa (cl_mem): output O, weights P and
 * log-sum-exp against the fp64 reference, for a covering set of shapes, masks and scales, on every
 * device. Each table row × device is one check iteration, once for the host API and once for the
 * cl_mem API; each iteration also repeats the call with the optional outputs left out.
 */
#include "test_util.h"

#include <math.h>
#include <string.h>

enum { DATA_UNIFORM = 0, DATA_LARGE };

#define INF TU_MASKF_INF
#define ROWINF TU_MASKF_ROWINF
#define KL0 TU_KL_NONE
#define KLF TU_KL_FULL
#define KLV TU_KL_VARIED
#define KLZ TU_KL_ZERO
/* 2^-20: exact scaling of the integer-valued DATA_LARGE inputs */
#define SCALE_LARGE 9.5367431640625e-07f

typedef struct {
    size_t B, H, L, S, D, Dv; /* Dv 0: same as D (desc.v_dim = 0) */
    float scale;
    clattn_causal causal;
    int kl;
    clattn_mask_layout add;
    int addf;
    int data;
} sdpa_case;

static const sdpa_case cases[] = {
    /* square, no mask: every L/S and D value */
    {1, 1, 1, 1, 1, 0, SD, NONE, KL0, M0, 0, DATA_UNIFORM},
    {1, 1, 2, 2, 7, 0, SD, NONE, KL0, M0, 0, DATA_UNIFORM},
    {2, 3, 7, 7, 8, 0, SD, NONE, KL0, M0, 0, DATA_UNIFORM},
    {1, 3, 61, 61, 21, 0, SD, NONE, KL0, M0, 0, DATA_UNIFORM},
    {2, 1, 64, 64, 64, 0, SD, NONE, KL0, M0, 0, DATA_UNIFORM},
    {1, 1, 127, 127, 72, 0, SD, NONE, KL0, M0, 0, DATA_UNIFORM},
    {1, 3, 267, 267, 8, 0, SD, NONE, KL0, M0, 0, DATA_UNIFORM},
    {2, 3, 64, 64, 72, 0, SD, NONE, KL0, M0, 0, DATA_UNIFORM},
    /* L ≠ S (cross-attention shapes) */
    {1, 1, 1, 267, 64, 0, SD, NONE, KL0, M0, 0, DATA_UNIFORM},
    {2, 3, 7, 61, 21, 0, SD, NONE, KL0, M0, 0, DATA_UNIFORM},
    {1, 1, 267, 7, 7, 0, SD, NONE, KL0, M0, 0, DATA_UNIFORM},
    {2, 1, 61, 127, 8, 0, SD, NONE, KL0, M0, 0, DATA_UNIFORM},
    {1, 3, 64, 2, 72, 0, SD, NONE, KL0, M0, 0, DATA_UNIFORM},
    {2, 1, 2, 1, 1, 0, SD, NONE, KL0, M0, 0, DATA_UNIFORM},
    {1, 1, 127, 1, 8, 0, SD, NONE, KL0, M0, 0, DATA_UNIFORM},
    {2, 3, 1, 64, 7, 0, SD, NONE, KLF, M0, 0, DATA_UNIFORM},
    /* Dv ≠ Dqk */
    {1, 3, 7, 61, 8, 21, SD, NONE, KL0, M0, 0, DATA_UNIFORM},
    {2, 1, 61, 64, 64, 7, SD, NONE, KL0, M0, 0, DATA_UNIFORM},
    {1, 1, 127, 7, 1, 72, SD, NONE, KL0, M0, 0, DATA_UNIFORM},
    {2, 3, 2, 127, 72, 1, SD, NONE, KL0, M0, 0, DATA_UNIFORM},
    {1, 1, 267, 61, 21, 64, SD, NONE, KL0, M0, 0, DATA_UNIFORM},
    /* causal, top-left */
    {1, 1, 61, 61, 21, 0, SD, TL, KL0, M0, 0, DATA_UNIFORM},
    {2, 3, 7, 61, 8, 0, SD, TL, KL0, M0, 0, DATA_UNIFORM},
    {1, 1, 127, 64, 7, 0, SD, TL, KL0, M0, 0, DATA_UNIFORM},
    {1, 1, 1, 1, 1, 0, SD, TL, KL0, M0, 0, DATA_UNIFORM},
    /* causal, bottom-right (S < L fully masks the first L−S rows) */
    {1, 1, 61, 61, 21, 0, SD, BR, KL0, M0, 0, DATA_UNIFORM},
    {2, 3, 7, 61, 8, 0, SD, BR, KL0, M0, 0, DATA_UNIFORM},
    {1, 1, 127, 64, 7, 0, SD, BR, KL0, M0, 0, DATA_UNIFORM},
    {2, 1, 267, 2, 8, 0, SD, BR, KL0, M0, 0, DATA_UNIFORM},
    {1, 3, 1, 267, 64, 0, SD, BR, KL0, M0, 0, DATA_UNIFORM},
    /* key lengths (including a 0 length: a whole batch fully masked) */
    {2, 1, 61, 64, 8, 0, SD, NONE, KLV, M0, 0, DATA_UNIFORM},
    {2, 3, 7, 7, 21, 0, SD, NONE, KLZ, M0, 0, DATA_UNIFORM},
    {1, 1, 64, 127, 7, 0, SD, NONE, KLZ, M0, 0, DATA_UNIFORM},
    {2, 1, 127, 267, 1, 0, SD, NONE, KLV, M0, 0, DATA_UNIFORM},
    /* additive masks with −inf entries, and rows made fully −inf */
    {1, 1, 61, 61, 21, 0, SD, NONE, KL0, MLS, INF, DATA_UNIFORM},
    {2, 3, 7, 64, 8, 0, SD, NONE, KL0, MLS, INF | ROWINF, DATA_UNIFORM},
    {2, 3, 64, 7, 7, 0, SD, NONE, KL0, MBH, INF, DATA_UNIFORM},
    {1, 1, 127, 127, 64, 0, SD, NONE, KL0, MBH, INF | ROWINF, DATA_UNIFORM},
    {2, 1, 2, 2, 72, 0, SD, NONE, KL0, MLS, 0, DATA_UNIFORM},
    /* combinations */
    {2, 3, 61, 64, 8, 0, SD, TL, KLV, MLS, INF, DATA_UNIFORM},
    {2, 1, 127, 61, 21, 0, SD, BR, KLZ, MBH, INF, DATA_UNIFORM},
    {1, 3, 7, 2, 7, 0, SD, BR, KL0, MLS, 0, DATA_UNIFORM},
    {2, 1, 267, 267, 8, 0, SD, TL, KLV, M0, 0, DATA_UNIFORM},
    {2, 3, 64, 127, 64, 21, SD, BR, KL0, MBH, INF, DATA_UNIFORM},
    {2, 3, 7, 7, 7, 1, 0.5f, TL, KLZ, MBH, INF | ROWINF, DATA_UNIFORM},
    /* large-magnitude inputs (integers ×1000 up to ±1e4; scaled scores up to several hundred, so
     * an unstabilised exp overflows) with a custom small scale */
    {1, 1, 61, 61, 8, 0, SCALE_LARGE, NONE, KL0, M0, 0, DATA_LARGE},
    {2, 3, 7, 64, 7, 0, SCALE_LARGE, TL, KL0, M0, 0, DATA_LARGE},
    {1, 1, 64, 7, 1, 0, SCALE_LARGE, BR, KL0, M0, 0, DATA_LARGE},
    {2, 1, 127, 61, 8, 21, SCALE_LARGE, NONE, KLV, MLS, INF, DATA_LARGE},
    /* custom scales */
    {2, 3, 61, 61, 21, 0, 0.37f, NONE, KL0, M0, 0, DATA_UNIFORM},
    {1, 1, 7, 267, 64, 0, -0.125f, NONE, KL0, M0, 0, DATA_UNIFORM},
    {1, 3, 127, 2, 72, 0, 2.0f, NONE, KL0, MLS, INF, DATA_UNIFORM},
};
#define N_CASES (sizeof cases / sizeof cases[0])

typedef struct {
    clattn_sdpa_desc d;
    clattn_masks m; /* d.masks points here */
    size_t kl[2];
    size_t nq, nk, nv, nm, no, np, nl;
    float *q, *k, *v, *mask;
    double *ro, *rp, *rl;
} prepared;

static void prepare(size_t ci, prepared *p)
{
    const sdpa_case *c = &cases[ci];
    memset(p, 0, sizeof *p);
    p->d = tu_sdpa_desc(c->B, c->H, c->L, c->S, c->D, c->Dv);
    p->d.scale = c->scale;
    p->m = (clattn_masks)CLATTN_MASKS_INIT;
    p->m.causal = c->causal;
    p->m.key_lengths = tu_make_key_lengths(c->kl, c->B, c->S, p->kl);
    p->m.additive = c->add;
    p->d.masks = &p->m;
    size_t Dv = c->Dv ? c->Dv : c->D, BH = c->B * c->H;
    p->nq = BH * c->L * c->D;
    p->nk = BH * c->S * c->D;
    p->nv = BH * c->S * Dv;
    p->no = BH * c->L * Dv;
    p->np = BH * c->L * c->S;
    p->nl = BH * c->L;
    p->q = tu_falloc(p->nq);
    p->k = tu_falloc(p->nk);
    p->v = tu_falloc(p->nv);
    if (c->data == DATA_LARGE) {
        tu_fill_int_multiples(p->q, p->nq, 10, 1000.0f, 11 + ci);
        tu_fill_int_multiples(p->k, p->nk, 10, 1000.0f, 12 + ci);
    } else {
        tu_fill_uniform(p->q, p->nq, 1.0f, 11 + ci);
        tu_fill_uniform(p->k, p->nk, 1.0f, 12 + ci);
    }
    tu_fill_uniform(p->v, p->nv, 1.0f, 13 + ci);
    if (c->add != CLATTN_MASK_NONE)
        p->mask = tu_make_mask(c->add, c->B, c->H, c->L, c->S, c->addf, 14 + ci, &p->nm);
    p->ro = tu_dalloc(p->no);
    p->rp = tu_dalloc(p->np);
    p->rl = tu_dalloc(p->nl);
    ref_sdpa(&p->d, p->q, p->k, p->v, p->mask, p->ro, p->rp, p->rl);
}

static void label(size_t ci, size_t dev, const char *api, const char *variant)
{
    const sdpa_case *c = &cases[ci];
    tu_set_label("%s case %zu%s (B %zu H %zu L %zu S %zu Dqk %zu Dv %zu scale %g causal %d kl %d "
                 "additive %d/%d data %d) on %s",
                 api, ci, variant, c->B, c->H, c->L, c->S, c->D, c->Dv, (double)c->scale,
                 (int)c->causal, c->kl, (int)c->add, c->addf, c->data, tu_dev_spec[dev]);
}

/* ---------------------------------------------------------------------------------------------- */
/* Host API                                                                                        */
/* ---------------------------------------------------------------------------------------------- */

START_TEST(test_sdpa_host)
{
    size_t ci = TU_CASE(_i), dev = TU_DEVICE(_i);
    clattn_context *ctx = tu_ctx[dev];
    prepared p;
    prepare(ci, &p);

    /* all three outputs */
    label(ci, dev, "sdpa_host", "");
    float *o = tu_host_alloc(p.no, NULL), *w = tu_host_alloc(p.np, NULL),
          *l = tu_host_alloc(p.nl, NULL);
    clattn_status st = clattn_sdpa_host(ctx, &p.d, p.q, p.k, p.v, p.mask, o, w, l);
    TU_ASSERT_OK(st, ctx, "clattn_sdpa_host");
    tu_host_check_guard(o, p.no, "out");
    tu_host_check_guard(w, p.np, "weights");
    tu_host_check_guard(l, p.nl, "lse");
    check_close_named("out", o, p.ro, p.no, NULL);
    check_close_named("weights", w, p.rp, p.np, NULL);
    check_close_named("lse", l, p.rl, p.nl, NULL);

    /* the fused kernel: out and lse */
    label(ci, dev, "sdpa_host", " [fused, weights=NULL]");
    p.d.algorithm = CLATTN_ALGORITHM_FUSED;
    float *o2 = tu_host_alloc(p.no, NULL), *l2 = tu_host_alloc(p.nl, NULL);
    st = clattn_sdpa_host(ctx, &p.d, p.q, p.k, p.v, p.mask, o2, NULL, l2);
    TU_ASSERT_OK(st, ctx, "clattn_sdpa_host");
    tu_host_check_guard(o2, p.no, "out");
    tu_host_check_guard(l2, p.nl, "lse");
    check_close_named("out", o2, p.ro, p.no, NULL);
    check_close_named("lse", l2, p.rl, p.nl, NULL);

    /* the staged path without weights (scores in a temporary, worked through in chunks of heads) */
    label(ci, dev, "sdpa_host", " [staged, weights=NULL lse=NULL]");
    p.d.algorithm = CLATTN_ALGORITHM_STAGED;
    float *o3 = tu_host_alloc(p.no, NULL);
    st = clattn_sdpa_host(ctx, &p.d, p.q, p.k, p.v, p.mask, o3, NULL, NULL);
    TU_ASSERT_OK(st, ctx, "clattn_sdpa_host");
    tu_host_check_guard(o3, p.no, "out");
    check_close_named("out", o3, p.ro, p.no, NULL);
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* cl_mem API                                                                                      */
/* ---------------------------------------------------------------------------------------------- */

START_TEST(test_sdpa_mem)
{
    size_t ci = TU_CASE(_i), dev = TU_DEVICE(_i);
    clattn_context *ctx = tu_ctx[dev];
    prepared p;
    prepare(ci, &p);

    label(ci, dev, "sdpa", "");
    cl_mem mq = tu_dev_alloc(ctx, p.nq, p.q), mk = tu_dev_alloc(ctx, p.nk, p.k),
           mv = tu_dev_alloc(ctx, p.nv, p.v);
    cl_mem mm = p.mask ? tu_dev_alloc(ctx, p.nm, p.mask) : NULL;
    cl_mem mo = tu_dev_alloc(ctx, p.no, NULL), mw = tu_dev_alloc(ctx, p.np, NULL),
           ml = tu_dev_alloc(ctx, p.nl, NULL);
    clattn_status st = clattn_sdpa(ctx, &p.d, mq, mk, mv, mm, mo, mw, ml);
    TU_ASSERT_OK(st, ctx, "clattn_sdpa");
    tu_finish(ctx);
    check_close_named("out", tu_dev_read_checked(ctx, mo, p.no, "out"), p.ro, p.no, NULL);
    check_close_named("weights", tu_dev_read_checked(ctx, mw, p.np, "weights"), p.rp, p.np, NULL);
    check_close_named("lse", tu_dev_read_checked(ctx, ml, p.nl, "lse"), p.rl, p.nl, NULL);
    tu_dev_check_equal(ctx, mq, p.q, p.nq, "q");
    tu_dev_check_guard(ctx, mq, p.nq, "q");
    tu_dev_check_equal(ctx, mk, p.k, p.nk, "k");
    tu_dev_check_guard(ctx, mk, p.nk, "k");
    tu_dev_check_equal(ctx, mv, p.v, p.nv, "v");
    tu_dev_check_guard(ctx, mv, p.nv, "v");
    if (mm) {
        tu_dev_check_equal(ctx, mm, p.mask, p.nm, "mask");
        tu_dev_check_guard(ctx, mm, p.nm, "mask");
    }

    /* again with one or both optional outputs left out (alternating over the table); without weights
     * the default (AUTO) runs the fused kernel */
    int variant = (int)(ci % 3);
    static const char *const names[] = {" [auto: fused, weights=NULL lse=NULL]", " [auto: fused, weights=NULL]",
                                        " [lse=NULL]"};
    label(ci, dev, "sdpa", names[variant]);
    cl_mem mo2 = tu_dev_alloc(ctx, p.no, NULL);
    cl_mem mw2 = variant == 2 ? tu_dev_alloc(ctx, p.np, NULL) : NULL;
    cl_mem ml2 = variant == 1 ? tu_dev_alloc(ctx, p.nl, NULL) : NULL;
    st = clattn_sdpa(ctx, &p.d, mq, mk, mv, mm, mo2, mw2, ml2);
    TU_ASSERT_OK(st, ctx, "clattn_sdpa");
    tu_finish(ctx);
    check_close_named("out", tu_dev_read_checked(ctx, mo2, p.no, "out"), p.ro, p.no, NULL);
    if (mw2)
        check_close_named("weights", tu_dev_read_checked(ctx, mw2, p.np, "weights"), p.rp, p.np,
                          NULL);
    if (ml2)
        check_close_named("lse", tu_dev_read_checked(ctx, ml2, p.nl, "lse"), p.rl, p.nl, NULL);
}
END_TEST

/* The same call twice on one context gives bit-identical results (no state leaks between calls),
 * and a call with only weights requested after a full call still fills every row. */
START_TEST(test_sdpa_repeat)
{
    clattn_context *ctx = tu_ctx[_i];
    size_t ci = 0;
    for (size_t i = 0; i < N_CASES; i++) /* the first case with BR + a 0 key length + (B,H,L,S) mask */
        if (cases[i].causal == BR && cases[i].kl == KLZ && cases[i].add == MBH) {
            ci = i;
            break;
        }
    prepared p;
    prepare(ci, &p);
    label(ci, (size_t)_i, "sdpa_host", " [repeat]");
    float *o1 = tu_host_alloc(p.no, NULL), *o2 = tu_host_alloc(p.no, NULL);
    float *w1 = tu_host_alloc(p.np, NULL), *w2 = tu_host_alloc(p.np, NULL);
    clattn_status st = clattn_sdpa_host(ctx, &p.d, p.q, p.k, p.v, p.mask, o1, w1, NULL);
    TU_ASSERT_OK(st, ctx, "clattn_sdpa_host");
    st = clattn_sdpa_host(ctx, &p.d, p.q, p.k, p.v, p.mask, o2, w2, NULL);
    TU_ASSERT_OK(st, ctx, "clattn_sdpa_host");
    ck_assert_msg(memcmp(o1, o2, p.no * sizeof(float)) == 0, "%s: outputs differ between runs",
                  tu_label());
    ck_assert_msg(memcmp(w1, w2, p.np * sizeof(float)) == 0, "%s: weights differ between runs",
                  tu_label());
    check_close_named("out", o1, p.ro, p.no, NULL);
    check_close_named("weights", w1, p.rp, p.np, NULL);
}
END_TEST

/* A call whose (B,H,L,S) scores pass 256 MiB with the weights not requested: a library may work
 * through the heads in chunks; every head's output and lse must still be right. Checked against a
 * streaming fp64 reference (the full weight tensor would not fit the test's memory budget). */
enum { CH_B = 5, CH_H = 13, CH_L = 1024, CH_S = 1024, CH_D = 2, CH_DV = 1 };

START_TEST(test_sdpa_many_heads)
{
    size_t dev = (size_t)_i;
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("sdpa B %d H %d L %d S %d (272 MiB of scores, weights not requested) on %s", CH_B,
                 CH_H, CH_L, CH_S, tu_dev_spec[dev]);
    size_t kl[CH_B];
    clattn_masks masks = CLATTN_MASKS_INIT;
    masks.causal = CLATTN_CAUSAL_BOTTOM_RIGHT;
    masks.key_lengths = tu_make_key_lengths(TU_KL_ZERO, CH_B, CH_S, kl);
    kl[2] = 700;
    masks.additive = CLATTN_MASK_L_S;
    clattn_sdpa_desc d = tu_sdpa_desc(CH_B, CH_H, CH_L, CH_S, CH_D, CH_DV);
    d.masks = &masks;
    d.algorithm = CLATTN_ALGORITHM_STAGED; /* the fused kernel would need no scores at all */
    const size_t BH = CH_B * CH_H, nq = BH * CH_L * CH_D, nk = BH * CH_S * CH_D,
                 nv = BH * CH_S * CH_DV, no = BH * CH_L * CH_DV, nl = BH * CH_L, nm = CH_L * CH_S;
    float *q = tu_falloc(nq), *k = tu_falloc(nk), *v = tu_falloc(nv), *mask;
    tu_fill_uniform(q, nq, 2.0f, 91);
    tu_fill_uniform(k, nk, 2.0f, 92);
    tu_fill_uniform(v, nv, 1.0f, 93);
    mask = tu_make_mask(CLATTN_MASK_L_S, 1, 1, CH_L, CH_S, TU_MASKF_INF, 94, NULL);

    cl_mem mq = tu_dev_alloc(ctx, nq, q), mk = tu_dev_alloc(ctx, nk, k), mv = tu_dev_alloc(ctx, nv, v),
           mm = tu_dev_alloc(ctx, nm, mask), mo = tu_dev_alloc(ctx, no, NULL),
           ml = tu_dev_alloc(ctx, nl, NULL);
    clattn_status st = clattn_sdpa(ctx, &d, mq, mk, mv, mm, mo, NULL, ml);
    TU_ASSERT_OK(st, ctx, "clattn_sdpa");

    /* streaming fp64 reference while the device works */
    double *ro = tu_dalloc(no), *rl = tu_dalloc(nl), *row = tu_dalloc(CH_S);
    const double scale = ref_scale(d.scale, CH_D);
    for (size_t bh = 0; bh < BH; bh++) {
        size_t b = bh / CH_H;
        for (size_t i = 0; i < CH_L; i++) {
            double mx = -INFINITY;
            const float *qi = q + (bh * CH_L + i) * CH_D;
            for (size_t j = 0; j < CH_S; j++) {
                double sc = -INFINITY;
                if (!ref_key_masked(d.masks, CH_L, CH_S, b, i, j)) {
                    const float *kj = k + (bh * CH_S + j) * CH_D;
                    double dot = 0.0;
                    for (size_t t = 0; t < CH_D; t++)
                        dot += (double)qi[t] * (double)kj[t];
                    sc = dot * scale + (double)mask[i * CH_S + j];
                }
                row[j] = sc;
                if (sc > mx)
                    mx = sc;
            }
            size_t r = bh * CH_L + i;
            if (mx == -INFINITY) {
                rl[r] = -INFINITY;
                for (size_t t = 0; t < CH_DV; t++)
                    ro[r * CH_DV + t] = 0.0;
                continue;
            }
            double sum = 0.0, acc[CH_DV] = {0};
            for (size_t j = 0; j < CH_S; j++) {
                if (row[j] == -INFINITY)
                    continue;
                double e = exp(row[j] - mx);
                sum += e;
                for (size_t t = 0; t < CH_DV; t++)
                    acc[t] += e * (double)v[(bh * CH_S + j) * CH_DV + t];
            }
            rl[r] = mx + log(sum);
            for (size_t t = 0; t < CH_DV; t++)
                ro[r * CH_DV + t] = acc[t] / sum;
        }
    }
    tu_finish(ctx);
    check_close_named("out", tu_dev_read_checked(ctx, mo, no, "out"), ro, no, NULL);
    check_close_named("lse", tu_dev_read_checked(ctx, ml, nl, "lse"), rl, nl, NULL);
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("sdpa");
    TCase *tc = tu_tcase("sdpa_host");
    tcase_add_loop_test(tc, test_sdpa_host, 0, (int)(N_CASES * tu_ndev));
    suite_add_tcase(s, tc);
    tc = tu_tcase("sdpa_mem");
    tcase_add_loop_test(tc, test_sdpa_mem, 0, (int)(N_CASES * tu_ndev));
    suite_add_tcase(s, tc);
    tc = tu_tcase("repeat");
    tcase_add_loop_test(tc, test_sdpa_repeat, 0, (int)tu_ndev);
    suite_add_tcase(s, tc);
    tc = tu_tcase("many_heads");
    tcase_add_loop_test(tc, test_sdpa_many_heads, 0, (int)tu_ndev);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_main(make_suite); }
