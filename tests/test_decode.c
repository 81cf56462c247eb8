/*
 * The decode path (CLATTN_ALGORITHM_DECODE: keys split over work-groups, partial results merged on the
 * device) against the fp64 reference, on every device.
 *
 *  1. table: 1 to 8 query rows (and 11, more than AUTO sends here) against 300 to 3001 keys, so that
 *     the keys are split (every case with one (batch, K/V head) of ≤ 16 packed rows and S ≥ 512 must
 *     split on any device: the profile must show the merge pass), with grouped-query heads (32/8, 8/1,
 *     6/2), caches (key lengths with query offsets len − L, one batch empty), windows, sinks (rows that
 *     see no key give lse = the sink), ALiBi, soft-capping, additive and boolean masks, odd head sizes
 *     (Dqk 37 / Dv 19, 13, 16 to 256, and MLA's 576 / 512; few distinct sizes, as each is a kernel build).
 *  2. auto: AUTO takes the decode kernels for 1 to 8 query rows and the fused kernel from 9 on (the
 *     kernels that ran, read from the profile), without a weights output only.
 *  3. nan: a NaN in one key of a long cache poisons exactly the rows that see it, in whichever split
 *     it falls; the other heads are as the reference says.
 *  4. bad: the decode path never returns the weights and takes head sizes up to 576
 *     (CLATTN_ERROR_INVALID_VALUE, nothing written).
 */
#include "test_util.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Key-length modes of the table (beyond test_util's): a cache whose batches hold len[b] keys, with the
 * queries at the end (query offsets len − L): batch 0 S−5, batch 1 S/3, batch 2 0. */
enum { K_NONE = 0, K_CACHE };

typedef struct {
    const char *name;
    size_t B, H, KVH, L, S, D, Dv;
    clattn_causal causal;
    int keys;
    long long win_left, win_right; /* −2: no window */
    int sinks, alibi;
    float softcap;
    clattn_mask_layout mask;
    clattn_mask_type mask_type;
    int must_split; /* the profile must show the merge pass */
} dcase;

static const dcase cases[] = {
    {"L 1, S 3001, D 128", 1, 1, 1, 1, 3001, 128, 0, NONE, K_NONE, -2, -2, 0, 0, 0, M0, 0, 1},
    {"L 1, GQA 8/1, S 2048, odd heads 37/19", 1, 8, 1, 1, 2048, 37, 19, NONE, K_NONE, -2, -2, 0, 0, 0, M0, 0, 1},
    {"L 4, GQA 8/1 (32 packed rows), S 1500", 1, 8, 1, 4, 1500, 64, 0, BR, K_NONE, -2, -2, 0, 0, 0, M0, 0, 0},
    {"L 2, GQA 32/8, S 700, bottom-right", 1, 32, 8, 2, 700, 64, 0, BR, K_NONE, -2, -2, 0, 0, 0, M0, 0, 0},
    {"L 8, S 1200, bottom-right", 1, 1, 1, 8, 1200, 64, 0, BR, K_NONE, -2, -2, 0, 0, 0, M0, 0, 1},
    {"L 3, B 3, cache (lengths S-5, S/3, 0), GQA 6/2", 3, 6, 2, 3, 1800, 37, 19, TL, K_CACHE, -2, -2, 0, 0, 0, M0,
     0, 0},
    {"L 1, cache, sinks (an empty batch gives lse = sink)", 3, 4, 1, 1, 1300, 64, 0, TL, K_CACHE, -2, -2, 1, 0, 0,
     M0, 0, 0},
    {"L 5, window (100, 0), sinks", 1, 2, 1, 5, 2500, 64, 0, NONE, K_NONE, 100, 0, 1, 0, 0, M0, 0, 1},
    {"L 2, window (600, 3) across splits", 1, 1, 1, 2, 2600, 16, 0, BR, K_NONE, 600, 3, 0, 0, 0, M0, 0, 1},
    {"L 1, ALiBi, softcap", 1, 4, 1, 1, 1100, 64, 0, NONE, K_NONE, -2, -2, 0, 1, 2.5f, M0, 0, 1},
    {"L 3, additive (B,H,L,S) mask with -inf", 2, 2, 2, 3, 900, 16, 0, NONE, K_NONE, -2, -2, 0, 0, 0, MBH, 0, 0},
    {"L 6, boolean (L,S) mask, sinks, ALiBi", 1, 3, 1, 6, 800, 37, 19, BR, K_NONE, -2, -2, 1, 1, 0, MLS, 1, 0},
    {"L 1, D 256, S 600", 1, 2, 1, 1, 600, 256, 0, NONE, K_NONE, -2, -2, 0, 0, 0, M0, 0, 1},
    /* (wide rows, many a group: rusticl computed these wrong before its rows per group were capped) */
    {"L 1, GQA 8/1, D 256, S 300", 1, 8, 1, 1, 300, 256, 0, NONE, K_NONE, -2, -2, 0, 0, 0, M0, 0, 0},
    {"L 2, GQA 8/1, D 576 / Dv 512 (MLA's), S 200", 1, 8, 1, 2, 200, 576, 512, BR, K_NONE, -2, -2, 0, 0, 0, M0, 0, 0},
    {"L 11 (beyond AUTO's 8), GQA 4/1, cache", 2, 4, 1, 11, 1000, 16, 0, TL, K_CACHE, -2, -2, 0, 0, 0, M0, 0, 0},
    {"L 1, S 300 (one split)", 2, 3, 3, 1, 300, 13, 0, NONE, K_NONE, -2, -2, 0, 0, 0, M0, 0, 0},
};
#define NCASES (sizeof cases / sizeof cases[0])

START_TEST(test_table)
{
    const dcase *c = &cases[TU_CASE(_i)];
    const size_t dev = TU_DEVICE(_i);
    tu_set_label("decode \"%s\" on %s", c->name, tu_dev_spec[dev]);
    clattn_context *ctx = tu_context_new_profiling(dev);
    clattn_sdpa_desc d = tu_sdpa_desc(c->B, c->H, c->L, c->S, c->D, c->Dv);
    d.kv_heads = c->KVH;
    d.softcap = c->softcap;
    d.algorithm = CLATTN_ALGORITHM_DECODE;
    clattn_masks masks = CLATTN_MASKS_INIT;
    masks.causal = c->causal;
    size_t lengths[3];
    long long offsets[3];
    if (c->keys == K_CACHE) {
        const size_t len[3] = {c->S - 5, c->S / 3, 0};
        for (size_t b = 0; b < c->B; b++) {
            lengths[b] = len[b];
            offsets[b] = (long long)len[b] - (long long)c->L;
        }
        masks.key_lengths = lengths;
        masks.query_offsets = offsets;
    }
    clattn_window window = {c->win_left, c->win_right};
    if (c->win_left != -2)
        masks.window = &window;
    size_t nmask = 0;
    const void *mask = NULL;
    const float *ref_mask = NULL; /* what the reference adds: the float mask, or 0 / −inf for bool */
    if (c->mask != M0) {
        masks.additive = c->mask;
        masks.mask_type = c->mask_type;
        float *f = tu_make_mask(c->mask, c->B, c->H, c->L, c->S, TU_MASKF_INF, 77, &nmask);
        if (c->mask_type == CLATTN_MASK_BOOL) { /* allowed where the float mask is finite */
            unsigned char *bytes = tu_track_malloc(nmask);
            for (size_t i = 0; i < nmask; i++) {
                bytes[i] = f[i] != -INFINITY;
                f[i] = bytes[i] ? 0.0f : -INFINITY;
            }
            mask = bytes;
        } else {
            mask = f;
        }
        ref_mask = f;
    }
    d.masks = &masks;
    float sinks[32], slopes[32];
    for (size_t h = 0; h < c->H; h++) {
        sinks[h] = 0.5f - 0.3f * (float)h;
        slopes[h] = 0.25f / (float)(h + 1);
    }
    if (c->sinks)
        d.sinks = sinks;
    if (c->alibi)
        d.alibi_slopes = slopes;

    const size_t dv = c->Dv ? c->Dv : c->D;
    const size_t nq = c->B * c->H * c->L * c->D, nk = c->B * c->KVH * c->S * c->D, nv = c->B * c->KVH * c->S * dv;
    const size_t no = c->B * c->H * c->L * dv, nl = c->B * c->H * c->L;
    float *q = tu_falloc(nq), *k = tu_falloc(nk), *v = tu_falloc(nv);
    tu_fill_uniform(q, nq, 1.0f, 11 + TU_CASE(_i));
    tu_fill_uniform(k, nk, 1.0f, 12 + TU_CASE(_i));
    tu_fill_uniform(v, nv, 1.0f, 13 + TU_CASE(_i));
    float *o = tu_host_alloc(no, NULL), *l = tu_host_alloc(nl, NULL);
    clattn_status st = clattn_sdpa_host(ctx, &d, q, k, v, mask, o, NULL, l);
    TU_ASSERT_OK(st, ctx, "clattn_sdpa_host(DECODE)");
    tu_host_check_guard(o, no, "out");
    tu_host_check_guard(l, nl, "lse");
    const unsigned long long partial = tu_launches_of(ctx, "decode partial");
    ck_assert_msg(partial == 1, "%s: %llu decode partial launches, expected 1", tu_label(), partial);
    /* rereading the profile reset it: run again to see the merge pass */
    st = clattn_sdpa_host(ctx, &d, q, k, v, mask, o, NULL, l);
    TU_ASSERT_OK(st, ctx, "clattn_sdpa_host(DECODE) again");
    if (c->must_split)
        ck_assert_msg(tu_launches_of(ctx, "decode combine") == 1, "%s: the keys were not split", tu_label());

    double *ro = tu_dalloc(no), *rl = tu_dalloc(nl);
    ref_sdpa(&d, q, k, v, ref_mask, ro, NULL, rl);
    check_close_named("out", o, ro, no, NULL);
    check_close_named("lse", l, rl, nl, NULL);
    clattn_context_free(ctx);
}
END_TEST

START_TEST(test_auto)
{
    const size_t dev = TU_DEVICE(_i), L = TU_CASE(_i) + 1; /* 1 … 10 query rows */
    tu_set_label("AUTO with L %zu on %s", L, tu_dev_spec[dev]);
    clattn_context *ctx = tu_context_new_profiling(dev);
    clattn_sdpa_desc d = tu_sdpa_desc(1, 2, L, 40, 16, 0);
    const size_t nq = 2 * L * 16, nk = 2 * 40 * 16, no = nq, nw = 2 * L * 40;
    float *q = tu_falloc(nq), *k = tu_falloc(nk), *v = tu_falloc(nk);
    tu_fill_uniform(q, nq, 1.0f, 5);
    tu_fill_uniform(k, nk, 1.0f, 6);
    tu_fill_uniform(v, nk, 1.0f, 7);
    float *o = tu_host_alloc(no, NULL), *w = tu_host_alloc(nw, NULL);
    clattn_status st = clattn_sdpa_host(ctx, &d, q, k, v, NULL, o, NULL, NULL);
    TU_ASSERT_OK(st, ctx, "clattn_sdpa_host(AUTO)");
    const bool decode = L <= 8;
    ck_assert_msg(tu_launches_of(ctx, decode ? "decode partial" : "fused attention") == 1,
                  "%s: AUTO did not take the %s path", tu_label(), decode ? "decode" : "fused");
    /* Asking for the weights takes the staged path whatever L is. */
    st = clattn_sdpa_host(ctx, &d, q, k, v, NULL, o, w, NULL);
    TU_ASSERT_OK(st, ctx, "clattn_sdpa_host(AUTO, weights)");
    ck_assert_msg(tu_launches_of(ctx, "softmax") >= 1, "%s: AUTO with weights did not take the staged path",
                  tu_label());
    double *ro = tu_dalloc(no);
    ref_sdpa(&d, q, k, v, NULL, ro, NULL, NULL);
    check_close_named("out", o, ro, no, NULL);
    clattn_context_free(ctx);
}
END_TEST

START_TEST(test_nan)
{
    const size_t dev = TU_DEVICE(_i), at = TU_CASE(_i) == 0 ? 7 : 1999; /* in the first or the last split */
    tu_set_label("NaN at key %zu on %s", at, tu_dev_spec[dev]);
    enum { H = 4, KVH = 2, S = 2048, D = 32 };
    clattn_sdpa_desc d = tu_sdpa_desc(1, H, 1, S, D, 0);
    d.kv_heads = KVH;
    d.algorithm = CLATTN_ALGORITHM_DECODE;
    float *q = tu_falloc(H * D), *k = tu_falloc(KVH * S * D), *v = tu_falloc(KVH * S * D);
    tu_fill_uniform(q, H * D, 1.0f, 21);
    tu_fill_uniform(k, KVH * S * D, 1.0f, 22);
    tu_fill_uniform(v, KVH * S * D, 1.0f, 23);
    k[(size_t)1 * S * D + at * D + 3] = NAN; /* K/V head 1: query heads 2 and 3 see it */
    float *o = tu_host_alloc(H * D, NULL), *l = tu_host_alloc(H, NULL);
    clattn_status st = clattn_sdpa_host(tu_ctx[dev], &d, q, k, v, NULL, o, NULL, l);
    TU_ASSERT_OK(st, tu_ctx[dev], "clattn_sdpa_host(DECODE)");
    double *ro = tu_dalloc(H * D), *rl = tu_dalloc(H);
    ref_sdpa(&d, q, k, v, NULL, ro, NULL, rl);
    check_close_named("out of heads 0-1", o, ro, 2 * D, NULL);
    check_close_named("lse of heads 0-1", l, rl, 2, NULL);
    for (size_t i = 2 * D; i < H * D; i++)
        ck_assert_msg(isnan(o[i]), "%s: out[%zu] = %g, expected NaN", tu_label(), i, o[i]);
    ck_assert_msg(isnan(l[2]) && isnan(l[3]), "%s: lse of heads 2-3 not NaN", tu_label());
}
END_TEST

START_TEST(test_bad)
{
    const size_t dev = TU_DEVICE(_i);
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("bad decode calls on %s", tu_dev_spec[dev]);
    for (int t = 0; t < 2; t++) {
        const size_t D = t == 0 ? 8 : 577; /* (past DECODE_MAX_HEAD, MLA's 576) */
        clattn_sdpa_desc d = tu_sdpa_desc(1, 1, 1, 5, D, 0);
        d.algorithm = CLATTN_ALGORITHM_DECODE;
        float *q = tu_falloc(D), *k = tu_falloc(5 * D), *v = tu_falloc(5 * D);
        float *o = tu_host_alloc(D, NULL), *w = tu_host_alloc(5, NULL);
        clattn_status st = clattn_sdpa_host(ctx, &d, q, k, v, NULL, o, t == 0 ? w : NULL, NULL);
        ck_assert_msg(st == CLATTN_ERROR_INVALID_VALUE, "%s: %s returned %s", tu_label(),
                      t == 0 ? "weights" : "head size 577", clattn_status_string(st));
        ck_assert_msg(strstr(clattn_last_error(ctx), "CLATTN_ALGORITHM_DECODE") != NULL,
                      "%s: the error \"%s\" does not name the algorithm", tu_label(), clattn_last_error(ctx));
        ck_assert_msg(tu_host_all_sentinel(o, D), "%s: a rejected call wrote out", tu_label());
    }
}
END_TEST

static Suite *decode_suite(void)
{
    Suite *s = suite_create("decode");
    tu_add_loop(s, "table", test_table, NCASES * tu_ndev);
    tu_add_loop(s, "auto", test_auto, 10 * tu_ndev);
    tu_add_loop(s, "nan", test_nan, 2 * tu_ndev);
    tu_add_loop(s, "bad", test_bad, tu_ndev);
    return s;
}

int main(void) { return tu_main(decode_suite); }
