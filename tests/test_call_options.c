/*
 * The call options' table (src/base/call_options.def, issue 37) on the C side:
 *  - every option the table checks generically is refused, naming it, with a bad value of its kind — in
 *    an SDPA descriptor and, for every option both descriptors carry, in a layer's (the layer forwards
 *    them by the table, so its refusals are SDPA's);
 *  - the layer's logit_scale (0.13) against the fp64 reference layer (self- and cross-attention, grouped
 *    heads, with soft-capping and a causal mask), and a 0.12 layer descriptor read without it.
 * The other surfaces are walked by tools/scripts/check_options.py (suite `options`), the ring's
 * fingerprint by tests/test_ring_options.c.
 */
#include "test_util.h"
#include "../src/base/call_options.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

enum { B = 2, H = 4, L = 5, S = 7, D = 4, DM = 8 };

/* A bad value of each kind the library checks itself (validate.c's check_options), else none (0): the
 * masks, mods, block masks and buffers are checked where the call binds them, by their own suites. */
static const float nan_heads[H] = {0.5f, NAN, 1.0f, 2.0f};
#define BAD_OPT_DIM(f, limit) ((f) = 0, 1)
#define BAD_OPT_DIM0(f, limit) 0
#define BAD_OPT_SIZE(f, limit) 0
#define BAD_OPT_KV_HEADS(f, limit) ((f) = 3, 1) /* (does not divide H = 4) */
#define BAD_OPT_SCALE(f, limit) ((f) = INFINITY, 1)
#define BAD_OPT_CAP(f, limit) ((f) = -1.0f, 1)
#define BAD_OPT_PER_HEAD(f, limit) ((f) = nan_heads, 1)
#define BAD_OPT_ENUM(f, limit) ((f) = (limit) + 1, 1)
#define BAD_OPT_RESERVED(f, limit) ((f) = 1, 1)
#define BAD_OPT_DTYPE(f, limit) ((f) = 99, 1)
#define BAD_OPT_ORIGIN(f, limit) ((f) = (1ll << 62), 1)
#define BAD_OPT_BUFFER(f, limit) 0
#define BAD_OPT_MASKS(f, limit) 0
#define BAD_OPT_MODS(f, limit) 0
#define BAD_OPT_BLOCK_MASK(f, limit) 0

static float q[B * H * L * D], k[B * H * S * D], v[B * H * S * D], out[B * H * L * D];
static float x[B * L * DM], w[DM * H * D], y[B * L * H * D];

/* The call was refused (not CLATTN_SUCCESS) and its detail names desc.<name>. */
static void expect_named(clattn_context *ctx, clattn_status st, const char *call, const char *name, size_t *checked)
{
    char want[64];
    snprintf(want, sizeof want, "desc.%s", name);
    ck_assert_msg(st != CLATTN_SUCCESS, "%s: %s with a bad %s succeeded", tu_label(), call, name);
    ck_assert_msg(strstr(clattn_last_error(ctx), want) != NULL, "%s: %s's detail \"%s\" does not name %s", tu_label(),
                  call, clattn_last_error(ctx), want);
    ++*checked;
}

START_TEST(test_generic_checks)
{
    const size_t dev = (size_t)_i;
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("the table's generic checks on %s", tu_dev_spec[dev]);
    const clattn_sdpa_desc base = tu_sdpa_desc(B, H, L, S, D, D);
    clattn_mha_desc layer = CLATTN_MHA_DESC_INIT;
    layer.batch = B, layer.q_len = L, layer.model_dim = DM, layer.heads = H, layer.qk_dim = D;
    clattn_mha_host_weights hw = CLATTN_MHA_HOST_WEIGHTS_INIT;
    hw.w_q = hw.w_k = hw.w_v = w;
    /* Both good as they are. */
    TU_ASSERT_OK(clattn_sdpa_host(ctx, &base, q, k, v, NULL, out, NULL, NULL), ctx, "the good SDPA call");
    TU_ASSERT_OK(clattn_mha_host(ctx, &layer, x, NULL, &hw, NULL, y, NULL), ctx, "the good layer");
    size_t checked = 0, layer_checked = 0;
#define BAD_SDPA(name, kind, limit)                                                                                  \
    {                                                                                                                \
        clattn_sdpa_desc d = base;                                                                                   \
        if (BAD_##kind(d.name, limit))                                                                               \
            expect_named(ctx, clattn_sdpa_host(ctx, &d, q, k, v, NULL, out, NULL, NULL), "clattn_sdpa_host", #name,  \
                         &checked);                                                                                  \
    }
#define CLATTN_OPTION(name, kind, type, def, limit, range, calls, result, py, cli, doc)                               \
    BAD_SDPA(name, kind, limit)                                                                                      \
    {                                                                                                                \
        clattn_mha_desc m = layer;                                                                                   \
        /* (A layer's kv_len 0 is self-attention's: good.) */                                                        \
        if (strcmp(#name, "kv_len") != 0 && BAD_##kind(m.name, limit))                                               \
            expect_named(ctx, clattn_mha_host(ctx, &m, x, NULL, &hw, NULL, y, NULL), "clattn_mha_host", #name,       \
                         &layer_checked);                                                                            \
    }
#define CLATTN_SDPA_OPTION(name, kind, type, def, limit, range, calls, result, py, cli, doc) BAD_SDPA(name, kind, limit)
#include "../src/base/call_options.def"
#undef CLATTN_OPTION
#undef CLATTN_SDPA_OPTION
    /* batch, heads, q_len, kv_len, qk_dim, kv_heads, scale, algorithm, softcap, sinks, alibi_slopes,
     * weights_output, weights_reserved, softmax_precision, softmax_reserved, logit_scale, the origins and
     * the four storage types at least. */
    ck_assert_msg(checked >= 22 && layer_checked + 1 >= checked - 4, "%s: %zu SDPA and %zu layer checks", tu_label(),
                  checked, layer_checked);
}
END_TEST

/* The layer's logit_scale against the reference layer (ref_mha, which forwards by the same table). */
START_TEST(test_layer_logit_scale)
{
    const size_t dev = TU_DEVICE(_i), which = TU_CASE(_i);
    clattn_context *ctx = tu_ctx[dev];
    const bool cross = which & 1, gqa = which & 2;
    tu_set_label("a layer with logit_scale (%s, %s heads) on %s", cross ? "cross" : "self", gqa ? "grouped" : "all",
                 tu_dev_spec[dev]);
    enum { LB = 2, LH = 4, LL = 6, LS = 9, LD = 8, LM = 12, LKV = 10 };
    const size_t N = gqa ? 2 : LH, Sx = cross ? LS : LL, dkv = cross ? LKV : LM;
    float *xx = tu_falloc(LB * LL * LM), *kv = tu_falloc(LB * LS * LKV), *wq = tu_falloc(LM * LH * LD);
    float *wk = tu_falloc(dkv * N * LD), *wv = tu_falloc(dkv * N * LD), *wo = tu_falloc(LH * LD * LM);
    tu_fill_uniform(xx, LB * LL * LM, 1.0f, 31 + which);
    tu_fill_uniform(kv, LB * LS * LKV, 1.0f, 32 + which);
    tu_fill_uniform(wq, LM * LH * LD, 0.6f, 33 + which);
    tu_fill_uniform(wk, dkv * N * LD, 0.6f, 34 + which);
    tu_fill_uniform(wv, dkv * N * LD, 0.6f, 35 + which);
    tu_fill_uniform(wo, LH * LD * LM, 0.4f, 36 + which);
    const float scales[LH] = {2.5f, -1.5f, 0.0f, 0.75f};
    clattn_masks m = CLATTN_MASKS_INIT;
    m.causal = CLATTN_CAUSAL_BOTTOM_RIGHT;
    clattn_mha_desc d = CLATTN_MHA_DESC_INIT;
    d.batch = LB, d.q_len = LL, d.kv_len = cross ? LS : 0, d.model_dim = LM, d.kv_dim = cross ? LKV : 0;
    d.heads = LH, d.kv_heads = N, d.qk_dim = LD, d.softcap = 3.0f, d.masks = &m;
    d.logit_scale = scales;
    clattn_mha_host_weights hw = CLATTN_MHA_HOST_WEIGHTS_INIT;
    hw.w_q = wq, hw.w_k = wk, hw.w_v = wv, hw.w_o = wo;
    const size_t ny = LB * LL * LM, nw = LB * LH * LL * Sx;
    double *ry = tu_dalloc(ny), *rw = tu_dalloc(nw);
    ref_mha(&d, xx, cross ? kv : NULL, &hw, NULL, ry, rw);
    float *got = tu_host_alloc(ny, NULL), *gw = tu_host_alloc(nw, NULL);
    TU_ASSERT_OK(clattn_mha_host(ctx, &d, xx, cross ? kv : NULL, &hw, NULL, got, gw), ctx, "clattn_mha_host");
    check_close_named("out", got, ry, ny, NULL);
    check_close_named("attn_weights", gw, rw, nw, NULL);
    /* The scales reach the layer: without them the output is another. */
    d.logit_scale = NULL;
    float *plain = tu_host_alloc(ny, NULL);
    TU_ASSERT_OK(clattn_mha_host(ctx, &d, xx, cross ? kv : NULL, &hw, NULL, plain, NULL), ctx, "without logit_scale");
    double largest = 0;
    for (size_t i = 0; i < ny; i++)
        largest = fmax(largest, fabs((double)plain[i] - ry[i]));
    ck_assert_msg(largest > 1e-3, "%s: logit_scale changed nothing (%g)", tu_label(), largest);
    /* A 0.12 layer descriptor ends before logit_scale: whatever lies in its place is not read. */
    d.struct_size = offsetof(clattn_mha_desc, logit_scale);
    d.logit_scale = (const float *)(uintptr_t)0x10;
    float *old = tu_host_alloc(ny, NULL);
    TU_ASSERT_OK(clattn_mha_host(ctx, &d, xx, cross ? kv : NULL, &hw, NULL, old, NULL), ctx, "a 0.12 descriptor");
    ck_assert_msg(memcmp(plain, old, ny * sizeof *old) == 0, "%s: a 0.12 descriptor's output differs", tu_label());
}
END_TEST

/* The layer's copy carries every option both descriptors hold, in both directions. */
START_TEST(test_copy_both_ways)
{
    tu_set_label("call_options_mha_to_sdpa and back");
    static const float a[2] = {1.0f, 2.0f};
    clattn_mha_desc m = CLATTN_MHA_DESC_INIT;
    m.batch = 3, m.heads = 2, m.q_len = 5, m.kv_len = 6, m.qk_dim = 7, m.v_dim = 8, m.kv_heads = 1;
    m.scale = 0.5f, m.algorithm = CLATTN_ALGORITHM_STAGED, m.softcap = 2.0f, m.sinks = a, m.alibi_slopes = a;
    m.weights_output = CLATTN_WEIGHTS_QK, m.softmax_precision = CLATTN_SOFTMAX_DOUBLE, m.logit_scale = a;
    m.origin_batch = 4, m.origin_position = 9;
    clattn_sdpa_desc s = CLATTN_SDPA_DESC_INIT;
    call_options_mha_to_sdpa(&s, &m);
    clattn_mha_desc back = CLATTN_MHA_DESC_INIT;
    call_options_sdpa_to_mha(&back, &s);
    ck_assert(memcmp(&back, &m, sizeof m) == 0);
    ck_assert(s.logit_scale == a && s.origin_position == 9 && s.softcap == 2.0f && s.kv_len == 6);
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("call_options");
    tu_add_loop(s, "generic_checks", test_generic_checks, tu_ndev);
    tu_add_loop(s, "layer_logit_scale", test_layer_logit_scale, 4 * tu_ndev);
    tu_add_loop(s, "copy", test_copy_both_ways, 1);
    return s;
}

int main(void) { return tu_main(make_suite); }
