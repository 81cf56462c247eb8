/*
 * The attention variants of clattn 0.3 (clattn.h: clattn_sdpa_desc's kv_heads, softcap, sinks and
 * alibi_slopes; clattn_masks' query_offsets and window) against the fp64 reference, every case on both
 * implementations: the fused kernel (CLATTN_ALGORITHM_FUSED, out + lse) and the staged path
 * (CLATTN_ALGORITHM_STAGED, out + weights + lse), on every device.
 *
 *  1. variants: a table crossing each variant with the others, with both causal kinds, key lengths
 *     and additive masks, at odd sizes (L 13, S 29, Dqk 21, Dv 7, and others not multiples of 8),
 *     heads/kv_heads 8/1, 12/4, 6/6, 3/1, 8/2. Rows with no visible key (negative offsets under a
 *     causal mask, windows that exclude every key, key length 0, −inf mask rows) must be exactly zero
 *     with lse −inf, or lse = the head's sink; no NaN anywhere; every row as ref_sdpa says.
 *  2. bad variants: kv_heads that does not divide heads or exceeds it (CLATTN_ERROR_SHAPE_MISMATCH),
 *     a window side below −1, a negative, NaN or infinite softcap (CLATTN_ERROR_INVALID_VALUE): the
 *     status, clattn_last_error naming the field, and no output written.
 *  3. kv buffers: clattn_sdpa (cl_mem) with K and V buffers holding exactly kv_heads heads (fewer than
 *     `heads` would need: no repeated K/V is required), and BUFFER_TOO_SMALL one float below that.
 *  4. (test_variants_masks.c, the same program) layers, masks read in place, the weights output, value
 *     limits.
 */
#include "variants_test.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define MAXB 3
#define MAXH 12

/* ---------------------------------------------------------------------------------------------- */
/* The table                                                                                       */
/* ---------------------------------------------------------------------------------------------- */

/* Key lengths: none, tu's VARIED ((S+1)/2 and S), tu's ZERO (batch 0 gets 0). */
enum { K0 = TU_KL_NONE, KV = TU_KL_VARIED, KZ = TU_KL_ZERO };

/* Additive mask contents: uniform [-1, 1] (A_PLAIN); with ~1/6 −inf entries (A_INF); with rows 0
 * (every key) and 2 (all but the last key) of every matrix set to −inf (A_ROWINF) or −1e30 (A_1E30). */
enum { A_PLAIN = 0, A_INF, A_ROWINF, A_1E30 };

/* Query offsets, batch b of B:
 *   O_LEN   key length − L (S − L without key lengths): a KV cache, ONNX's nonpad_kv_seqlen;
 *   O_NEG   −(L+3) (every query before key 0), −L/2, −1;
 *   O_BEYOND S+4 (every query after the last key), −(L+S), 1000;
 *   O_MID   −3, 4, 11. */
enum { O_NONE = 0, O_LEN, O_NEG, O_BEYOND, O_MID };

/* Windows (left, right). */
enum { W_NONE = 0, W_00, W_3M, W_M2, W_55, W_MM, W_80, W_84 };
static const clattn_window windows[] = {{0, 0}, {0, 0}, {3, -1}, {-1, 2}, {5, 5}, {-1, -1}, {8, 0}, {8, 4}};
static const char *const window_names[] = {"none", "(0,0)", "(3,-1)", "(-1,2)", "(5,5)", "(-1,-1)", "(8,0)", "(8,4)"};
static const char *const offset_names[] = {"none", "len-L", "negative", "beyond both ends", "-3,4,11"};
static const char *const kl_names[] = {"none", "full", "varied", "zero"};
static const char *const causal_names[] = {"none", "top-left", "bottom-right"};
static const char *const add_names[] = {"none", "(L,S)", "(B,H,L,S)"};
static const char *const addf_names[] = {" uniform", " with -inf", " with -inf rows", " with -1e30 rows"};

typedef struct {
    const char *name;
    size_t B, H, KVH, L, S, D, Dv; /* Dv 0: same as D */
    float scale, softcap;
    clattn_causal causal;
    int kl;
    clattn_mask_layout add;
    int addf;
    int off, win;
    int sinks, alibi;
} vcase;

static const vcase cases[] = {
    /* grouped-query attention alone and with causal masks */
    {"gqa 8/1", 2, 8, 1, 13, 29, 21, 7, SD, 0, NONE, K0, M0, 0, O_NONE, W_NONE, 0, 0},
    {"gqa 12/4", 2, 12, 4, 13, 29, 21, 7, SD, 0, NONE, K0, M0, 0, O_NONE, W_NONE, 0, 0},
    {"gqa 6/6 (kv_heads = heads)", 2, 6, 6, 13, 29, 21, 7, SD, 0, TL, K0, M0, 0, O_NONE, W_NONE, 0, 0},
    {"gqa 3/1, S < L, bottom-right", 3, 3, 1, 29, 13, 9, 0, SD, 0, BR, K0, M0, 0, O_NONE, W_NONE, 0, 0},
    {"gqa 8/2 decode (L 1)", 2, 8, 2, 1, 29, 21, 7, SD, 0, BR, KV, M0, 0, O_NONE, W_NONE, 0, 0},
    {"gqa 12/4, custom scale", 1, 12, 4, 13, 29, 21, 7, 0.37f, 0, NONE, K0, MLS, A_PLAIN, O_NONE, W_NONE, 0, 0},
    /* soft-capping, with −inf and very negative masks */
    {"softcap", 2, 8, 2, 13, 29, 21, 7, SD, 1.5f, NONE, K0, M0, 0, O_NONE, W_NONE, 0, 0},
    {"softcap, top-left", 2, 12, 4, 13, 29, 21, 7, SD, 0.7f, TL, K0, M0, 0, O_NONE, W_NONE, 0, 0},
    {"softcap, -inf mask rows", 2, 3, 1, 13, 29, 21, 7, SD, 5.0f, NONE, K0, MLS, A_ROWINF, O_NONE, W_NONE, 0, 0},
    {"softcap, -1e30 mask rows", 2, 8, 1, 13, 29, 21, 7, SD, 1.5f, NONE, K0, MBH, A_1E30, O_NONE, W_NONE, 0, 0},
    {"softcap, -inf entries, key length 0, bottom-right", 2, 6, 6, 13, 29, 21, 7, SD, 1.5f, BR, KZ, MBH, A_INF,
     O_NONE, W_NONE, 0, 0},
    /* ALiBi */
    {"alibi", 2, 8, 2, 13, 29, 21, 7, SD, 0, NONE, K0, M0, 0, O_NONE, W_NONE, 0, 1},
    {"alibi, top-left", 2, 12, 4, 13, 29, 21, 7, SD, 0, TL, K0, M0, 0, O_NONE, W_NONE, 0, 1},
    {"alibi, bottom-right", 2, 8, 1, 13, 29, 21, 7, SD, 0, BR, K0, M0, 0, O_NONE, W_NONE, 0, 1},
    {"alibi, offsets, top-left, key lengths", 3, 6, 2, 13, 29, 21, 7, SD, 0, TL, KV, M0, 0, O_MID, W_NONE, 0, 1},
    {"alibi, softcap, -inf entries", 2, 3, 1, 13, 29, 21, 7, SD, 1.5f, NONE, K0, MLS, A_INF, O_NONE, W_NONE, 0, 1},
    {"alibi, window (5,5)", 2, 12, 4, 13, 29, 21, 7, SD, 0, NONE, K0, M0, 0, O_NONE, W_55, 0, 1},
    /* attention sinks, with rows that see no key */
    {"sinks", 2, 8, 1, 13, 29, 21, 7, SD, 0, NONE, K0, M0, 0, O_NONE, W_NONE, 1, 0},
    {"sinks, top-left, key length 0", 2, 8, 2, 13, 29, 21, 7, SD, 0, TL, KZ, M0, 0, O_NONE, W_NONE, 1, 0},
    {"sinks, negative offsets, top-left", 3, 12, 4, 13, 29, 21, 7, SD, 0, TL, K0, M0, 0, O_NEG, W_NONE, 1, 0},
    {"sinks, window (0,0) excluding every key", 3, 6, 6, 13, 29, 21, 7, SD, 0, NONE, K0, M0, 0, O_BEYOND, W_00,
     1, 0},
    {"sinks, softcap, alibi, -inf entries", 2, 12, 4, 13, 29, 21, 7, SD, 1.5f, NONE, K0, MBH, A_INF, O_NONE,
     W_NONE, 1, 1},
    {"sinks, -1e30 mask rows, window (3,-1)", 2, 3, 1, 13, 29, 21, 7, SD, 0, NONE, K0, MLS, A_1E30, O_NONE, W_3M,
     1, 0},
    /* query offsets */
    {"offsets len-L, top-left, key lengths (ONNX nonpad)", 2, 8, 2, 13, 29, 21, 7, SD, 0, TL, KV, M0, 0, O_LEN,
     W_NONE, 0, 0},
    {"offsets len-L, bottom-right, key length 0", 2, 12, 4, 13, 29, 21, 7, SD, 0, BR, KZ, M0, 0, O_LEN, W_NONE, 0,
     0},
    {"offsets negative, top-left", 3, 3, 1, 13, 29, 21, 7, SD, 0, TL, K0, M0, 0, O_NEG, W_NONE, 0, 0},
    {"offsets negative, bottom-right, window (3,-1)", 3, 6, 6, 13, 29, 21, 7, SD, 0, BR, K0, M0, 0, O_NEG, W_3M, 0,
     0},
    {"offsets beyond both ends, top-left", 3, 8, 1, 13, 29, 21, 7, SD, 0, TL, K0, M0, 0, O_BEYOND, W_NONE, 0, 0},
    {"offsets beyond both ends, window (-1,2)", 3, 8, 2, 13, 29, 21, 7, SD, 0, NONE, K0, MLS, A_PLAIN, O_BEYOND,
     W_M2, 0, 0},
    {"offsets, no causal, alibi", 3, 12, 4, 13, 29, 21, 7, SD, 0, NONE, K0, M0, 0, O_MID, W_NONE, 0, 1},
    /* sliding windows */
    {"window (0,0)", 2, 8, 2, 13, 29, 21, 7, SD, 0, NONE, K0, M0, 0, O_NONE, W_00, 0, 0},
    {"window (3,-1)", 2, 12, 4, 13, 29, 21, 7, SD, 0, NONE, K0, M0, 0, O_NONE, W_3M, 0, 0},
    {"window (-1,2), top-left", 2, 6, 6, 13, 29, 21, 7, SD, 0, TL, K0, M0, 0, O_NONE, W_M2, 0, 0},
    {"window (5,5), bottom-right, key lengths", 2, 3, 1, 13, 29, 21, 7, SD, 0, BR, KV, M0, 0, O_NONE, W_55, 0, 0},
    {"window (-1,-1), -inf entries", 2, 8, 1, 13, 29, 21, 7, SD, 0, NONE, K0, MLS, A_INF, O_NONE, W_MM, 0, 0},
    {"window (3,-1), top-left, -inf rows, key length 0", 2, 3, 1, 13, 29, 21, 7, SD, 0, TL, KZ, MBH, A_ROWINF,
     O_NONE, W_3M, 0, 0},
    {"window (0,0), offsets beyond both ends (no key)", 3, 8, 2, 13, 29, 21, 7, SD, 0, TL, K0, M0, 0, O_BEYOND,
     W_00, 0, 0},
    {"window (3,-1), bottom-right, S < L", 2, 12, 4, 29, 13, 21, 7, SD, 0, BR, K0, M0, 0, O_NONE, W_3M, 0, 0},
    /* everything at once, and sizes off the usual tiles */
    {"all: softcap, sinks, alibi, offsets, window (5,5), bottom-right, keys, mask", 3, 12, 4, 13, 29, 21, 7, SD,
     1.5f, BR, KV, MLS, A_INF, O_MID, W_55, 1, 1},
    {"all: softcap, sinks, alibi, offsets len-L, window (3,-1), top-left, keys, mask", 2, 8, 2, 13, 29, 21, 7,
     0.25f, 5.0f, TL, KZ, MBH, A_ROWINF, O_LEN, W_3M, 1, 1},
    {"L 1 S 1 Dqk 1 Dv 1, softcap, sinks, alibi", 2, 8, 2, 1, 1, 1, 1, SD, 0.7f, NONE, K0, M0, 0, O_NONE, W_NONE,
     1, 1},
    {"L 70 S 150, window (5,5), top-left, softcap, alibi", 1, 6, 2, 70, 150, 21, 7, SD, 1.5f, TL, K0, M0, 0,
     O_NONE, W_55, 0, 1},
    /* Windows over several 64-key tiles: a work-item's rows see different key ranges, so no tile is
     * wholly visible to all of them (the fused kernels' fast path for such tiles must not take these). */
    {"L S 200, window (8,0), Dqk 32 Dv 16", 1, 4, 2, 200, 200, 32, 16, SD, 0, NONE, K0, M0, 0, O_NONE, W_80, 0, 0},
    {"L S 200, window (8,4), GQA 8/2", 2, 8, 2, 200, 200, 21, 7, SD, 0, NONE, K0, M0, 0, O_NONE, W_84, 0, 0},
    {"L 150 S 260, window (8,4), bottom-right, key lengths", 1, 3, 1, 150, 260, 32, 16, SD, 0, BR, KV, M0, 0, O_NONE,
     W_84, 0, 0},
    {"Dqk 64 Dv 13, offsets len-L, top-left, keys, sinks", 2, 8, 1, 13, 29, 64, 13, SD, 0, TL, KV, M0, 0, O_LEN,
     W_NONE, 1, 0},
};
#define N_CASES (sizeof cases / sizeof cases[0])

/* ---------------------------------------------------------------------------------------------- */
/* Problems                                                                                        */
/* ---------------------------------------------------------------------------------------------- */

typedef struct {
    clattn_sdpa_desc d;
    clattn_masks m;
    clattn_window win;
    size_t kl[MAXB];
    long long off[MAXB];
    float sinks[MAXH], slopes[MAXH];
    size_t B, H, KVH, L, S, D, Dv;
    size_t nq, nk, nv, nm, no, np, nl;
    float *q, *k, *v, *mask;
    double *ro, *rw, *rl, *rs; /* reference out, weights, lse, scores */
} prob;

/* The offsets of mode `off` for batch b (see O_*). */
static long long offset_of(int off, const prob *p, size_t b)
{
    long long L = (long long)p->L, S = (long long)p->S;
    switch (off) {
    case O_LEN:
        return (p->m.key_lengths ? (long long)p->kl[b] : S) - L;
    case O_NEG:
        return b % 3 == 0 ? -(L + 3) : b % 3 == 1 ? -(L / 2) : -1;
    case O_BEYOND:
        return b % 3 == 0 ? S + 4 : b % 3 == 1 ? -(L + S) : 1000;
    default: /* O_MID */
        return 7 * (long long)b - 3;
    }
}

static void prepare(const vcase *c, uint64_t seed, prob *p)
{
    memset(p, 0, sizeof *p);
    ck_assert(c->B <= MAXB && c->H <= MAXH);
    p->B = c->B;
    p->H = c->H;
    p->KVH = c->KVH;
    p->L = c->L;
    p->S = c->S;
    p->D = c->D;
    p->Dv = c->Dv ? c->Dv : c->D;
    p->d = tu_sdpa_desc(c->B, c->H, c->L, c->S, c->D, c->Dv);
    p->d.scale = c->scale;
    p->d.softcap = c->softcap;
    p->d.kv_heads = c->KVH;
    p->m = (clattn_masks)CLATTN_MASKS_INIT;
    p->m.causal = c->causal;
    p->m.key_lengths = tu_make_key_lengths(c->kl, c->B, c->S, p->kl);
    p->m.additive = c->add;
    if (c->off != O_NONE) {
        for (size_t b = 0; b < c->B; b++)
            p->off[b] = offset_of(c->off, p, b);
        p->m.query_offsets = p->off;
    }
    if (c->win != W_NONE) {
        p->win = windows[c->win];
        p->m.window = &p->win;
    }
    p->d.masks = &p->m;
    if (c->sinks) {
        tu_fill_uniform(p->sinks, c->H, 2.0f, seed + 5);
        p->sinks[0] = 6.0f; /* one head whose sink outweighs every key */
        p->d.sinks = p->sinks;
    }
    if (c->alibi) {
        for (size_t h = 0; h < c->H; h++) /* the ALiBi paper's geometric slopes 2^(−8(h+1)/H) */
            p->slopes[h] = (float)exp2(-8.0 * (double)(h + 1) / (double)c->H);
        p->d.alibi_slopes = p->slopes;
    }

    size_t BH = c->B * c->H, BKV = c->B * c->KVH;
    p->nq = BH * c->L * c->D;
    p->nk = BKV * c->S * c->D;
    p->nv = BKV * c->S * p->Dv;
    p->no = BH * c->L * p->Dv;
    p->np = BH * c->L * c->S;
    p->nl = BH * c->L;
    p->q = tu_falloc(p->nq);
    p->k = tu_falloc(p->nk);
    p->v = tu_falloc(p->nv);
    tu_fill_uniform(p->q, p->nq, 1.5f, seed + 1);
    tu_fill_uniform(p->k, p->nk, 1.5f, seed + 2);
    tu_fill_uniform(p->v, p->nv, 1.0f, seed + 3);
    if (c->add != M0) {
        p->mask = tu_make_mask(c->add, c->B, c->H, c->L, c->S, c->addf == A_INF ? TU_MASKF_INF : 0, seed + 4,
                               &p->nm);
        if (c->addf == A_ROWINF || c->addf == A_1E30) {
            float big = c->addf == A_ROWINF ? -INFINITY : -1e30f;
            for (size_t t = 0; t < p->nm / (c->L * c->S); t++)
                for (size_t j = 0; j < c->S; j++) {
                    p->mask[(t * c->L + 0) * c->S + j] = big;
                    if (c->L > 2 && j + 1 < c->S)
                        p->mask[(t * c->L + 2) * c->S + j] = big;
                }
        }
    }
    p->ro = tu_dalloc(p->no);
    p->rw = tu_dalloc(p->np);
    p->rl = tu_dalloc(p->nl);
    p->rs = tu_dalloc(p->np);
    ref_sdpa(&p->d, p->q, p->k, p->v, p->mask, p->ro, p->rw, p->rl);
    ref_score(&p->d, p->q, p->k, p->mask, p->rs);
}

/* Row r = (b·H + h)·L + i sees no key: every score −inf (masked, or an additive −inf). */
static int row_fully_masked(const prob *p, size_t r)
{
    for (size_t j = 0; j < p->S; j++)
        if (p->rs[r * p->S + j] != -INFINITY)
            return 0;
    return 1;
}

static void label(size_t ci, const char *path, size_t dev)
{
    const vcase *c = &cases[ci];
    tu_set_label("variants case %zu \"%s\" (B %zu H %zu kv_heads %zu L %zu S %zu Dqk %zu Dv %zu scale %g "
                 "softcap %g causal %s key lengths %s additive %s%s offsets %s window %s sinks %s alibi %s) "
                 "[%s] on %s",
                 ci, c->name, c->B, c->H, c->KVH, c->L, c->S, c->D, c->Dv ? c->Dv : c->D, (double)c->scale,
                 (double)c->softcap, causal_names[c->causal], kl_names[c->kl], add_names[c->add],
                 c->add ? addf_names[c->addf] : "", offset_names[c->off], window_names[c->win],
                 c->sinks ? "yes" : "no", c->alibi ? "yes" : "no", path, tu_dev_spec[dev]);
}

typedef struct {
    float *o, *w, *l; /* w NULL on the fused path */
} result;

/* Every output against the reference, row by row; fully masked rows exactly zero with lse −inf (or
 * the sink); no NaN anywhere. Returns the number of fully masked rows. */
static size_t check_result(const prob *p, const result *g)
{
    for (size_t t = 0; t < p->no; t++)
        ck_assert_msg(!isnan(g->o[t]), "%s: out[%zu] (row %zu) is NaN", tu_label(), t, t / p->Dv);
    for (size_t t = 0; t < p->nl; t++)
        ck_assert_msg(!isnan(g->l[t]), "%s: lse[%zu] is NaN", tu_label(), t);
    if (g->w)
        for (size_t t = 0; t < p->np; t++)
            ck_assert_msg(!isnan(g->w[t]), "%s: weights[%zu] (row %zu) is NaN", tu_label(), t, t / p->S);
    size_t masked = 0;
    for (size_t r = 0; r < p->nl; r++) {
        size_t b = r / (p->H * p->L), h = r / p->L % p->H, i = r % p->L;
        char what[128];
        if (row_fully_masked(p, r)) {
            masked++;
            for (size_t t = 0; t < p->Dv; t++)
                ck_assert_msg(g->o[r * p->Dv + t] == 0.0f,
                              "%s: row %zu (b %zu h %zu i %zu) sees no key: out[%zu] = %.9g, expected exactly 0",
                              tu_label(), r, b, h, i, t, (double)g->o[r * p->Dv + t]);
            if (g->w)
                for (size_t j = 0; j < p->S; j++)
                    ck_assert_msg(g->w[r * p->S + j] == 0.0f,
                                  "%s: row %zu (b %zu h %zu i %zu) sees no key: weight[%zu] = %.9g, expected "
                                  "exactly 0",
                                  tu_label(), r, b, h, i, j, (double)g->w[r * p->S + j]);
            if (!p->d.sinks)
                ck_assert_msg(g->l[r] == -INFINITY,
                              "%s: row %zu (b %zu h %zu i %zu) sees no key: lse = %.9g, expected -inf", tu_label(),
                              r, b, h, i, (double)g->l[r]);
        }
        snprintf(what, sizeof what, "out row %zu (b %zu h %zu i %zu)", r, b, h, i);
        check_close_named(what, g->o + r * p->Dv, p->ro + r * p->Dv, p->Dv, NULL);
        snprintf(what, sizeof what, "lse row %zu (b %zu h %zu i %zu)", r, b, h, i);
        check_close_named(what, g->l + r, p->rl + r, 1, NULL);
        if (g->w) {
            snprintf(what, sizeof what, "weights row %zu (b %zu h %zu i %zu)", r, b, h, i);
            check_close_named(what, g->w + r * p->S, p->rw + r * p->S, p->S, NULL);
        }
    }
    return masked;
}

static void run_host(clattn_context *ctx, const prob *p, clattn_algorithm alg, result *g)
{
    clattn_sdpa_desc d = p->d;
    d.algorithm = alg;
    g->o = tu_host_alloc(p->no, NULL);
    g->l = tu_host_alloc(p->nl, NULL);
    g->w = alg == CLATTN_ALGORITHM_STAGED ? tu_host_alloc(p->np, NULL) : NULL;
    clattn_status st = clattn_sdpa_host(ctx, &d, p->q, p->k, p->v, p->mask, g->o, g->w, g->l);
    TU_ASSERT_OK(st, ctx, "clattn_sdpa_host");
    tu_host_check_guard(g->o, p->no, "out");
    tu_host_check_guard(g->l, p->nl, "lse");
    if (g->w)
        tu_host_check_guard(g->w, p->np, "weights");
}

/* ---------------------------------------------------------------------------------------------- */
/* 1. The table, on both paths                                                                     */
/* ---------------------------------------------------------------------------------------------- */

START_TEST(test_variants)
{
    size_t ci = TU_CASE(_i), dev = TU_DEVICE(_i);
    prob p;
    prepare(&cases[ci], 1000 + 10 * ci, &p);
    for (int a = 0; a < TU_NPATHS; a++) {
        label(ci, tu_algorithm_name(tu_paths[a]), dev);
        result g;
        run_host(tu_ctx[dev], &p, tu_paths[a], &g);
        check_result(&p, &g);
    }
}
END_TEST

/* The table itself: the cases meant to have rows that see no key have them (else the table would
 * silently stop testing them), and the reference gives those rows zeros and lse −inf or the sink.
 * Runs without a device. */
START_TEST(test_table)
{
    static const char *const want_masked[] = {
        "softcap, -inf mask rows",
        "softcap, -inf entries, key length 0, bottom-right",
        "sinks, top-left, key length 0",
        "sinks, negative offsets, top-left",
        "sinks, window (0,0) excluding every key",
        "offsets len-L, bottom-right, key length 0",
        "offsets negative, top-left",
        "offsets negative, bottom-right, window (3,-1)",
        "offsets beyond both ends, top-left",
        "window (3,-1), top-left, -inf rows, key length 0",
        "window (0,0), offsets beyond both ends (no key)",
        "window (3,-1), bottom-right, S < L",
    };
    size_t with_masked = 0;
    for (size_t ci = 0; ci < N_CASES; ci++) {
        tu_set_label("variants case %zu \"%s\" (reference)", ci, cases[ci].name);
        prob p;
        prepare(&cases[ci], 1000 + 10 * ci, &p);
        size_t masked = 0;
        for (size_t r = 0; r < p.nl; r++) {
            if (!row_fully_masked(&p, r))
                continue;
            masked++;
            double sink = p.d.sinks ? (double)p.d.sinks[r / p.L % p.H] : -INFINITY;
            ck_assert_msg(p.rl[r] == sink, "%s: row %zu sees no key but the reference lse is %g, not %g",
                          tu_label(), r, p.rl[r], sink);
            for (size_t t = 0; t < p.Dv; t++)
                ck_assert_msg(p.ro[r * p.Dv + t] == 0.0, "%s: row %zu: reference out not 0", tu_label(), r);
            for (size_t j = 0; j < p.S; j++)
                ck_assert_msg(p.rw[r * p.S + j] == 0.0, "%s: row %zu: reference weight not 0", tu_label(), r);
        }
        int want = 0;
        for (size_t t = 0; t < sizeof want_masked / sizeof want_masked[0]; t++)
            want |= strcmp(want_masked[t], cases[ci].name) == 0;
        if (want)
            ck_assert_msg(masked > 0, "%s: expected rows that see no key, found none", tu_label());
        with_masked += masked > 0;
        tu_release_host();
    }
    ck_assert_uint_ge(with_masked, sizeof want_masked / sizeof want_masked[0]);
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* 2. Bad variants                                                                                 */
/* ---------------------------------------------------------------------------------------------- */

enum { BAD_NONE, BAD_KV_3_OF_4, BAD_KV_8_OF_4, BAD_KV_5_OF_12, BAD_LEFT_M2, BAD_RIGHT_M5, BAD_LEFT_MIN,
       BAD_SOFTCAP_NEG, BAD_SOFTCAP_NAN, BAD_SOFTCAP_INF, BAD_SOFTCAP_NINF };

typedef struct {
    int mut;
    clattn_status expect;
    const char *field; /* clattn_last_error must mention it */
    const char *name;
} bad_variant;

static const bad_variant bad[] = {
    {BAD_NONE, CLATTN_SUCCESS, NULL, "control: kv_heads 2 of 4, window (1,1), softcap 2, sinks, alibi"},
    {BAD_KV_3_OF_4, CLATTN_ERROR_SHAPE_MISMATCH, "kv_heads", "kv_heads 3 does not divide heads 4"},
    {BAD_KV_8_OF_4, CLATTN_ERROR_SHAPE_MISMATCH, "kv_heads", "kv_heads 8 > heads 4"},
    {BAD_KV_5_OF_12, CLATTN_ERROR_SHAPE_MISMATCH, "kv_heads", "kv_heads 5 does not divide heads 12"},
    {BAD_LEFT_M2, CLATTN_ERROR_INVALID_VALUE, "window", "window left -2"},
    {BAD_RIGHT_M5, CLATTN_ERROR_INVALID_VALUE, "window", "window right -5"},
    {BAD_LEFT_MIN, CLATTN_ERROR_INVALID_VALUE, "window", "window left LLONG_MIN"},
    {BAD_SOFTCAP_NEG, CLATTN_ERROR_INVALID_VALUE, "softcap", "softcap -1"},
    {BAD_SOFTCAP_NAN, CLATTN_ERROR_INVALID_VALUE, "softcap", "softcap NaN"},
    {BAD_SOFTCAP_INF, CLATTN_ERROR_INVALID_VALUE, "softcap", "softcap +inf"},
    {BAD_SOFTCAP_NINF, CLATTN_ERROR_INVALID_VALUE, "softcap", "softcap -inf"},
};
#define N_BAD (sizeof bad / sizeof bad[0])

/* The bad-variant calls: B 2, H 4 (12 for kv_heads 5), L 3, S 5, Dqk 4, Dv 6. */
enum { XB = 2, XL = 3, XS = 5, XD = 4, XDV = 6, XKV_MAX = 12 };

START_TEST(test_bad_variants)
{
    const bad_variant *bc = &bad[TU_CASE(_i)];
    size_t dev = TU_DEVICE(_i);
    clattn_context *ctx = tu_ctx[dev];
    size_t H = bc->mut == BAD_KV_5_OF_12 ? 12 : 4;
    clattn_sdpa_desc d = tu_sdpa_desc(XB, H, XL, XS, XD, XDV);
    clattn_masks m = CLATTN_MASKS_INIT;
    clattn_window win = {1, 1};
    float sinks[MAXH], slopes[MAXH];
    tu_fill_uniform(sinks, MAXH, 1.0f, 71);
    tu_fill_uniform(slopes, MAXH, 0.5f, 72);
    m.causal = CLATTN_CAUSAL_TOP_LEFT;
    m.window = &win;
    d.masks = &m;
    d.kv_heads = 2;
    d.softcap = 2.0f;
    d.sinks = sinks;
    d.alibi_slopes = slopes;
    switch (bc->mut) {
    case BAD_KV_3_OF_4: d.kv_heads = 3; break;
    case BAD_KV_8_OF_4: d.kv_heads = 8; break;
    case BAD_KV_5_OF_12: d.kv_heads = 5; break;
    case BAD_LEFT_M2: win.left = -2; break;
    case BAD_RIGHT_M5: win.right = -5; break;
    case BAD_LEFT_MIN: win.left = LLONG_MIN; break;
    case BAD_SOFTCAP_NEG: d.softcap = -1.0f; break;
    case BAD_SOFTCAP_NAN: d.softcap = NAN; break;
    case BAD_SOFTCAP_INF: d.softcap = INFINITY; break;
    case BAD_SOFTCAP_NINF: d.softcap = -INFINITY; break;
    default: break;
    }
    /* inputs large enough for the largest kv_heads of the table, so that a library that read K/V by
     * the bad kv_heads would still read only memory it was given */
    const size_t nq = XB * H * XL * XD, nk = XB * XKV_MAX * XS * XD, nv = XB * XKV_MAX * XS * XDV,
                 no = XB * H * XL * XDV, np = XB * H * XL * XS, nl = XB * H * XL;
    float *q = tu_falloc(nq), *k = tu_falloc(nk), *v = tu_falloc(nv);
    tu_fill_uniform(q, nq, 1.0f, 73);
    tu_fill_uniform(k, nk, 1.0f, 74);
    tu_fill_uniform(v, nv, 1.0f, 75);

    for (int a = 0; a < 3; a++) { /* fused host, staged host, auto cl_mem */
        const char *api = a == 0 ? "clattn_sdpa_host fused" : a == 1 ? "clattn_sdpa_host staged" : "clattn_sdpa";
        tu_set_label("bad variant \"%s\" [%s] on %s", bc->name, api, tu_dev_spec[dev]);
        clattn_sdpa_desc dd = d;
        clattn_status st;
        float *o, *w = NULL, *l;
        cl_mem mo = NULL, ml = NULL;
        if (a < 2) {
            dd.algorithm = tu_paths[a];
            o = tu_host_alloc(no, NULL);
            l = tu_host_alloc(nl, NULL);
            w = a == 1 ? tu_host_alloc(np, NULL) : NULL;
            st = clattn_sdpa_host(ctx, &dd, q, k, v, NULL, o, w, l);
        } else {
            cl_mem mq = tu_dev_alloc(ctx, nq, q), mk = tu_dev_alloc(ctx, nk, k), mv = tu_dev_alloc(ctx, nv, v);
            mo = tu_dev_alloc(ctx, no, NULL);
            ml = tu_dev_alloc(ctx, nl, NULL);
            st = clattn_sdpa(ctx, &dd, mq, mk, mv, NULL, mo, NULL, ml);
            o = l = NULL;
        }
        const char *err = clattn_last_error(ctx);
        if (bc->expect == CLATTN_SUCCESS) {
            TU_ASSERT_OK(st, ctx, api);
            double *ro = tu_dalloc(no), *rl = tu_dalloc(nl), *rw = tu_dalloc(np);
            ref_sdpa(&d, q, k, v, NULL, ro, rw, rl);
            if (a == 2) {
                tu_finish(ctx);
                o = tu_dev_read_checked(ctx, mo, no, "out");
                l = tu_dev_read_checked(ctx, ml, nl, "lse");
            }
            check_close_named("out", o, ro, no, NULL);
            check_close_named("lse", l, rl, nl, NULL);
            if (w)
                check_close_named("weights", w, rw, np, NULL);
            continue;
        }
        ck_assert_msg(st == bc->expect, "%s: returned %s (%d), expected %s; last error: \"%s\"", tu_label(),
                      clattn_status_string(st), (int)st, clattn_status_string(bc->expect), err);
        ck_assert_msg(strstr(err, bc->field) != NULL, "%s: clattn_last_error \"%s\" does not mention \"%s\"",
                      tu_label(), err, bc->field);
        if (a < 2) {
            ck_assert_msg(tu_host_all_sentinel(o, no), "%s: a rejected call wrote out", tu_label());
            ck_assert_msg(tu_host_all_sentinel(l, nl), "%s: a rejected call wrote lse", tu_label());
            if (w)
                ck_assert_msg(tu_host_all_sentinel(w, np), "%s: a rejected call wrote weights", tu_label());
        } else {
            ck_assert_msg(tu_dev_all_sentinel(ctx, mo, no + TU_GUARD), "%s: a rejected call wrote out",
                          tu_label());
            ck_assert_msg(tu_dev_all_sentinel(ctx, ml, nl + TU_GUARD), "%s: a rejected call wrote lse",
                          tu_label());
        }
    }
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* 3. K and V buffers of kv_heads heads (cl_mem)                                                    */
/* ---------------------------------------------------------------------------------------------- */

START_TEST(test_kv_buffers)
{
    size_t dev = (size_t)_i;
    clattn_context *ctx = tu_ctx[dev];
    const vcase c = {"kv buffers", 2, 8, 2, 13, 29, 21, 7, SD, 1.5f, BR, KV, MLS, A_INF, O_NONE, W_3M, 1, 1};
    prob p;
    prepare(&c, 4242, &p);
    /* K and V exactly as large as kv_heads needs: a quarter of what `heads` heads would take */
    cl_mem mq = tu_dev_alloc(ctx, p.nq, p.q), mk = tu_dev_alloc_exact(ctx, p.nk, p.k),
           mv = tu_dev_alloc_exact(ctx, p.nv, p.v), mm = tu_dev_alloc(ctx, p.nm, p.mask);
    for (int a = 0; a < TU_NPATHS; a++) {
        tu_set_label("cl_mem K %zu and V %zu floats (kv_heads %zu of heads %zu) [%s] on %s", p.nk, p.nv, p.KVH,
                     p.H, tu_algorithm_name(tu_paths[a]), tu_dev_spec[dev]);
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
        check_result(&p, &g);
    }
    tu_dev_check_equal(ctx, mq, p.q, p.nq, "q");
    tu_dev_check_equal(ctx, mk, p.k, p.nk, "k");
    tu_dev_check_equal(ctx, mv, p.v, p.nv, "v");
    tu_dev_check_equal(ctx, mm, p.mask, p.nm, "mask");

    /* one float less than kv_heads needs: BUFFER_TOO_SMALL, nothing written */
    for (int t = 0; t < 2; t++) {
        const char *which = t == 0 ? "k" : "v";
        tu_set_label("cl_mem %s one float smaller than kv_heads %zu needs on %s", which, p.KVH, tu_dev_spec[dev]);
        cl_mem small = tu_dev_alloc_exact(ctx, (t == 0 ? p.nk : p.nv) - 1, NULL);
        cl_mem mo = tu_dev_alloc(ctx, p.no, NULL), ml = tu_dev_alloc(ctx, p.nl, NULL);
        clattn_status st = clattn_sdpa(ctx, &p.d, mq, t == 0 ? small : mk, t == 1 ? small : mv, mm, mo, NULL, ml);
        const char *err = clattn_last_error(ctx);
        ck_assert_msg(st == CLATTN_ERROR_BUFFER_TOO_SMALL, "%s: returned %s (%d), expected %s; last error: \"%s\"",
                      tu_label(), clattn_status_string(st), (int)st,
                      clattn_status_string(CLATTN_ERROR_BUFFER_TOO_SMALL), err);
        ck_assert_msg(err[0] != '\0', "%s: clattn_last_error is empty", tu_label());
        ck_assert_msg(tu_dev_all_sentinel(ctx, mo, p.no + TU_GUARD), "%s: a rejected call wrote out", tu_label());
        ck_assert_msg(tu_dev_all_sentinel(ctx, ml, p.nl + TU_GUARD), "%s: a rejected call wrote lse", tu_label());
    }
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("variants");
    TCase *tc = tu_tcase("table"); /* the reference's own check, once */
    tcase_add_test(tc, test_table);
    suite_add_tcase(s, tc);
    tu_add_loop(s, "variants", test_variants, N_CASES * tu_ndev);
    tu_add_loop(s, "bad_variants", test_bad_variants, N_BAD * tu_ndev);
    variants_add_mask_cases(s);
    tu_add_loop(s, "kv_buffers", test_kv_buffers, tu_ndev);
    return s;
}

int main(void) { return tu_main(make_suite); }
