/* `clattn mha` end to end: self- and cross-attention layers in 3-D and 2-D, biases, W_O and b_O, every
 * mask flag (--mask float and bool, --causal, --causal-bottom-right, --key-lengths) and variant
 * (--kv-heads, --offset(s), --window, --softcap, --sinks, --alibi), --scores at its four points, and the
 * storage types' files and flags — each run's outputs against the fp64 reference on the inputs as the
 * tool holds them. The library's own numerics (variants crossed with each other) are its suites'. */
#include "cli_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------- */
/* mha against the reference                                                                       */
/* ---------------------------------------------------------------------------------------------- */

typedef struct mha_spec {
    size_t rank, B, L, S, d_model, d_kv, H, dk, dv, d_out;
    bool cross, biases, wo, bo;
    float scale;
    size_t kv_heads;           /* W_K and W_V of this many heads, passed as --kv-heads (0: H, no flag) */
    clattn_causal causal;      /* what the flags in extra ask for */
    const size_t *key_lengths;
    float softcap;
    const float *sinks, *alibi, *logit_scale;
    const long long *offsets;
    const clattn_window *window;
    const float *mask; /* what --mask in extra asks for, expanded to (B,H,L,S) */
    const char *const *extra;
    uint64_t seed;
} mha_spec;

static void mha_check(const mha_spec *s)
{
    ck_assert(s->rank == 3 || s->B == 1);
    rng.state = s->seed;
    const size_t B = s->B, L = s->L, S = s->cross ? s->S : s->L, dm = s->d_model, dkv = s->cross ? s->d_kv : dm;
    const size_t H = s->H, hk = H * s->dk, hv = H * s->dv, d_out = s->wo ? s->d_out : hv;
    const size_t N = s->kv_heads ? s->kv_heads : H, nk = N * s->dk, nv = N * s->dv; /* K/V heads, widths */
    const float *x = rand_floats(B * L * dm, 1.0f), *kv = s->cross ? rand_floats(B * S * dkv, 1.0f) : NULL;
    /* drawn in this order: w_q, b_q, w_k, b_k, w_v, b_v, w_o, b_o */
    clattn_mha_host_weights w = CLATTN_MHA_HOST_WEIGHTS_INIT;
    w.w_q = rand_floats(dm * hk, 0.6f);
    w.b_q = s->biases ? rand_floats(hk, 0.3f) : NULL;
    w.w_k = rand_floats(dkv * nk, 0.6f);
    w.b_k = s->biases ? rand_floats(nk, 0.3f) : NULL;
    w.w_v = rand_floats(dkv * nv, 0.6f);
    w.b_v = s->biases ? rand_floats(nv, 0.3f) : NULL;
    w.w_o = s->wo ? rand_floats(hv * d_out, 0.5f) : NULL;
    w.b_o = s->bo ? rand_floats(d_out, 0.3f) : NULL;
    argl a = {{0}, 0};
    add(&a, "mha", "--heads", fmt("%zu", H), "--out", P("y.npy"), "--weights", P("a.npy"), NULL);
    if (s->rank == 3) {
        add(&a, "--x", save_f32("x.npy", x, 3, (size_t[]){B, L, dm}), NULL);
        if (kv)
            add(&a, "--kv", save_f32("kv.npy", kv, 3, (size_t[]){B, S, dkv}), NULL);
    } else {
        add(&a, "--x", save_f32("x.npy", x, 2, (size_t[]){L, dm}), NULL);
        if (kv)
            add(&a, "--kv", save_f32("kv.npy", kv, 2, (size_t[]){S, dkv}), NULL);
    }
    add(&a, "--wq", save_f32("wq.npy", w.w_q, 2, (size_t[]){dm, hk}), "--wk",
        save_f32("wk.npy", w.w_k, 2, (size_t[]){dkv, nk}), "--wv", save_f32("wv.npy", w.w_v, 2, (size_t[]){dkv, nv}),
        NULL);
    if (s->biases)
        add(&a, "--bq", save_f32("bq.npy", w.b_q, 1, &hk), "--bk", save_f32("bk.npy", w.b_k, 1, &nk), "--bv",
            save_f32("bv.npy", w.b_v, 1, &nv), NULL);
    if (s->kv_heads)
        add(&a, "--kv-heads", fmt("%zu", N), NULL);
    if (s->wo)
        add(&a, "--wo", save_f32("wo.npy", w.w_o, 2, (size_t[]){hv, d_out}), NULL);
    if (s->bo)
        add(&a, "--bo", save_f32("bo.npy", w.b_o, 1, &d_out), NULL);
    if (s->scale != 0.0f)
        add(&a, "--scale", fmt("%.9g", s->scale), NULL);
    add_list(&a, s->extra);
    run_expect(&a, EXIT_OK);

    const float *y, *p;
    if (s->rank == 3) {
        y = load_f32(P("y.npy"), 3, (size_t[]){B, L, d_out});
        p = load_f32(P("a.npy"), 4, (size_t[]){B, H, L, S});
    } else {
        y = load_f32(P("y.npy"), 2, (size_t[]){L, d_out});
        p = load_f32(P("a.npy"), 3, (size_t[]){H, L, S});
    }
    const clattn_masks m = flag_masks(s->causal, s->key_lengths, s->offsets, s->window, s->mask != NULL);
    clattn_mha_desc d = CLATTN_MHA_DESC_INIT;
    d.batch = B;
    d.q_len = L;
    d.kv_len = S;
    d.model_dim = dm;
    d.kv_dim = dkv;
    d.heads = H;
    d.kv_heads = N;
    d.qk_dim = s->dk;
    d.v_dim = s->dv;
    d.out_dim = d_out;
    d.scale = s->scale != 0.0f ? s->scale : CLATTN_SCALE_DEFAULT;
    d.masks = &m;
    d.softcap = s->softcap;
    d.sinks = s->sinks;
    d.alibi_slopes = s->alibi;
    d.logit_scale = s->logit_scale;
    double *ry = xmalloc(B * L * d_out * sizeof *ry), *rp = xmalloc(B * H * L * S * sizeof *rp);
    ref_mha(&d, x, kv, &w, s->mask, ry, rp);
    expect_close("out", y, ry, B * L * d_out);
    expect_close("weights", p, rp, B * H * L * S);
}

/* ---------------------------------------------------------------------------------------------- */
/* Layers, masks, variants                                                                         */
/* ---------------------------------------------------------------------------------------------- */

START_TEST(test_mha_self_biases_wo)
{
    mha_check(&(mha_spec){.rank = 3, .B = 2, .L = 5, .d_model = 12, .H = 3, .dk = 4, .dv = 2, .d_out = 7,
                          .biases = true, .wo = true, .bo = true, .seed = 21});
    /* --wo without --bo */
    mha_check(&(mha_spec){.rank = 3, .B = 1, .L = 3, .d_model = 6, .H = 2, .dk = 3, .dv = 3, .d_out = 6,
                          .wo = true, .seed = 22});
}
END_TEST

START_TEST(test_mha_2d)
{
    const char *const extra[] = {"--causal", NULL};
    mha_check(&(mha_spec){.rank = 2, .B = 1, .L = 6, .d_model = 8, .H = 2, .dk = 4, .dv = 4,
                          .causal = CLATTN_CAUSAL_TOP_LEFT, .extra = extra, .seed = 23});
}
END_TEST

START_TEST(test_mha_cross)
{
    static const long long len[] = {9, 3};
    static const size_t len_z[] = {9, 3};
    const char *const extra[] = {"--key-lengths", save_i64("len.npy", len, 2), NULL};
    mha_check(&(mha_spec){.rank = 3, .B = 2, .L = 4, .S = 9, .d_model = 10, .d_kv = 6, .H = 3, .dk = 3, .dv = 4,
                          .cross = true, .scale = 0.25f, .key_lengths = len_z, .extra = extra, .seed = 24});
    mha_check(&(mha_spec){.rank = 2, .B = 1, .L = 3, .S = 7, .d_model = 4, .d_kv = 5, .H = 3, .dk = 2, .dv = 1,
                          .d_out = 2, .cross = true, .biases = true, .wo = true, .bo = true, .seed = 25});
}
END_TEST

/* --kv-heads N: W_K and W_V (and b_K, b_V) of N heads' columns. */
START_TEST(test_mha_kv_heads)
{
    mha_check(&(mha_spec){.rank = 3, .B = 2, .L = 5, .d_model = 8, .H = 4, .kv_heads = 2, .dk = 3, .dv = 2,
                          .d_out = 5, .biases = true, .wo = true, .bo = true, .seed = 60});
    mha_check(&(mha_spec){.rank = 2, .B = 1, .L = 3, .S = 6, .d_model = 4, .d_kv = 5, .H = 3, .kv_heads = 1, .dk = 2,
                          .dv = 3, .cross = true, .seed = 61});
}
END_TEST

START_TEST(test_mha_offsets)
{
    static const long long one[] = {2, 2};
    const char *const same[] = {"--causal", "--offset", "2", NULL};
    mha_check(&(mha_spec){.rank = 3, .B = 2, .L = 5, .d_model = 6, .H = 2, .dk = 3, .dv = 3,
                          .causal = CLATTN_CAUSAL_TOP_LEFT, .offsets = one, .extra = same, .seed = 62});
    static const long long per_batch[] = {-1, 4};
    const char *const file[] = {"--causal", "--offsets", save_i64("off.npy", per_batch, 2), NULL};
    mha_check(&(mha_spec){.rank = 3, .B = 2, .L = 3, .S = 7, .d_model = 4, .d_kv = 6, .H = 2, .dk = 2, .dv = 2,
                          .cross = true, .causal = CLATTN_CAUSAL_TOP_LEFT, .offsets = per_batch, .extra = file,
                          .seed = 63});
}
END_TEST

START_TEST(test_mha_window)
{
    static const clattn_window w = {1, 2};
    const char *const extra[] = {"--window", "1,2", NULL};
    mha_check(&(mha_spec){.rank = 3, .B = 2, .L = 6, .d_model = 8, .H = 2, .dk = 4, .dv = 4, .window = &w,
                          .extra = extra, .seed = 64});
}
END_TEST

START_TEST(test_mha_softcap)
{
    const char *const extra[] = {"--softcap", "0.75", NULL};
    mha_check(&(mha_spec){.rank = 3, .B = 1, .L = 5, .d_model = 8, .H = 2, .dk = 4, .dv = 4, .scale = 1.5f,
                          .softcap = 0.75f, .extra = extra, .seed = 65});
}
END_TEST

START_TEST(test_mha_sinks)
{
    const size_t H = 3;
    rng.state = 660;
    const float *sinks = rand_floats(H, 2.0f);
    const char *const extra[] = {"--sinks", save_f32("sinks.npy", sinks, 1, &H), NULL};
    mha_check(&(mha_spec){.rank = 3, .B = 2, .L = 4, .d_model = 6, .H = H, .dk = 2, .dv = 2, .sinks = sinks,
                          .extra = extra, .seed = 66});
}
END_TEST

/* --logit-scale reaches the layer (the variant flags are one set, src/base/call_options.def): with GQA and
 * soft-capping, against the reference layer. */
START_TEST(test_mha_logit_scale)
{
    const size_t H = 4;
    const float scales[4] = {2.0f, -0.5f, 0.0f, 1.25f};
    const char *const extra[] = {"--logit-scale", save_f32("ls.npy", scales, 1, &H), "--softcap", "1.5", NULL};
    mha_check(&(mha_spec){.rank = 3, .B = 2, .L = 5, .d_model = 8, .H = H, .dk = 2, .dv = 3, .kv_heads = 2,
                          .softcap = 1.5f, .logit_scale = scales, .extra = extra, .seed = 68});
}
END_TEST

START_TEST(test_mha_alibi)
{
    const size_t H = 2;
    rng.state = 670;
    const float *slopes = rand_floats(H, 0.8f);
    const char *const file[] = {"--alibi", save_f32("slopes.npy", slopes, 1, &H), NULL};
    mha_check(&(mha_spec){.rank = 3, .B = 2, .L = 6, .d_model = 4, .H = H, .dk = 2, .dv = 2, .alibi = slopes,
                          .extra = file, .seed = 67});
    const char *const auto_[] = {"--alibi", "auto", "--causal", NULL};
    mha_check(&(mha_spec){.rank = 2, .B = 1, .L = 7, .d_model = 10, .H = 5, .dk = 2, .dv = 2, .alibi = alibi_auto(5),
                          .causal = CLATTN_CAUSAL_TOP_LEFT, .extra = auto_, .seed = 68});
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* Masks, --causal-bottom-right, --scores                                                          */
/* ---------------------------------------------------------------------------------------------- */

/* --mask on a layer: a float (L,S) mask with −inf entries, and a boolean (B,1,1,S) one broadcast over
 * heads and rows (True = may attend) beside --key-lengths and --causal, each against the reference given
 * the same mask. */
START_TEST(test_mha_masks)
{
    const size_t B = 2, L = 5, H = 2;
    rng.state = 700;
    float *m = rand_mask(L * L);
    for (size_t i = 0; i < L; i++)
        m[i * L + i] = 0.5f; /* every row keeps a key */
    const char *const float_mask[] = {"--mask", save_f32("mask.npy", m, 2, (size_t[]){L, L}), NULL};
    mha_check(&(mha_spec){.rank = 3, .B = B, .L = L, .d_model = 6, .H = H, .dk = 3, .dv = 2,
                          .mask = broadcast_mask(m, 2, (size_t[]){L, L}, B, H, L, L), .extra = float_mask,
                          .seed = 71});

    const size_t S = 7;
    unsigned char bits[2 * 7];
    float add_mask[2 * 7];
    for (size_t i = 0; i < sizeof bits; i++) {
        bits[i] = i % 7 != 2 && i != 10; /* key 2 hidden in both batches, key 3 in the second */
        add_mask[i] = bits[i] ? 0.0f : -INFINITY;
    }
    static const long long len[] = {7, 5};
    static const size_t len_z[] = {7, 5};
    const char *const bool_mask[] = {"--mask", save_raw("bmask.npy", 1, "|b1", "False", "(2, 1, 1, 7)", bits, sizeof bits),
                                     "--key-lengths", save_i64("len.npy", len, 2), "--causal", NULL};
    mha_check(&(mha_spec){.rank = 3, .B = B, .L = 4, .S = S, .d_model = 6, .d_kv = 5, .H = H, .dk = 2, .dv = 3,
                          .cross = true, .key_lengths = len_z, .causal = CLATTN_CAUSAL_TOP_LEFT,
                          .mask = broadcast_mask(add_mask, 4, (size_t[]){2, 1, 1, 7}, B, H, 4, S),
                          .extra = bool_mask, .seed = 72});
}
END_TEST

/* --causal-bottom-right on a cross-attention layer (L < S: query i sees keys 0..i+S−L), in 3-D and 2-D. */
START_TEST(test_mha_causal_bottom_right)
{
    const char *const extra[] = {"--causal-bottom-right", NULL};
    mha_check(&(mha_spec){.rank = 3, .B = 2, .L = 3, .S = 8, .d_model = 6, .d_kv = 4, .H = 2, .dk = 3, .dv = 2,
                          .cross = true, .causal = CLATTN_CAUSAL_BOTTOM_RIGHT, .extra = extra, .seed = 73});
    mha_check(&(mha_spec){.rank = 2, .B = 1, .L = 4, .S = 6, .d_model = 5, .d_kv = 5, .H = 1, .dk = 4, .dv = 4,
                          .cross = true, .wo = true, .d_out = 3, .causal = CLATTN_CAUSAL_BOTTOM_RIGHT, .extra = extra,
                          .seed = 74});
}
END_TEST

/* rows×(heads·dim) projected rows, as (B, heads, rows, dim) floats: the layer's Q or K as the reference
 * takes them. */
static float *projected_heads(const float *x, size_t B, size_t rows, size_t in, const float *w, size_t heads,
                              size_t dim)
{
    double *y = xmalloc(B * rows * heads * dim * sizeof *y);
    ref_matmul(B * rows, in, heads * dim, x, w, NULL, y);
    float *out = xmalloc(B * heads * rows * dim * sizeof *out);
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < heads; h++)
            for (size_t i = 0; i < rows; i++)
                for (size_t t = 0; t < dim; t++)
                    out[((b * heads + h) * rows + i) * dim + t] = (float)y[(b * rows + i) * heads * dim + h * dim + t];
    return out;
}

/* mha --scores MODE:FILE: the layer's (B,H,L,S) scores at each of ONNX's points, on a cross-attention
 * layer with --softcap, --causal-bottom-right and a float mask: Q·Kᵀ·scale of the projected Q and K (qk),
 * soft-capped, with the masks (−inf where hidden) and the softmax — against the reference. */
START_TEST(test_mha_scores)
{
    enum { B = 2, L = 3, S = 6, DM = 8, DKV = 5, H = 2, DK = 4, DV = 3 };
    rng.state = 750;
    const float *x = rand_floats(B * L * DM, 1.0f), *kv = rand_floats(B * S * DKV, 1.0f);
    clattn_mha_host_weights w = CLATTN_MHA_HOST_WEIGHTS_INIT;
    w.w_q = rand_floats(DM * H * DK, 1.2f);
    w.w_k = rand_floats(DKV * H * DK, 1.2f);
    w.w_v = rand_floats(DKV * H * DV, 0.6f);
    float *mask = rand_mask(L * S);
    mask[S - 1] = 0.0f; /* row 0 keeps its last visible key */
    const char *args[] = {"--x", save_f32("x.npy", x, 3, (size_t[]){B, L, DM}), "--kv",
                          save_f32("kv.npy", kv, 3, (size_t[]){B, S, DKV}), "--wq",
                          save_f32("wq.npy", w.w_q, 2, (size_t[]){DM, H * DK}), "--wk",
                          save_f32("wk.npy", w.w_k, 2, (size_t[]){DKV, H * DK}), "--wv",
                          save_f32("wv.npy", w.w_v, 2, (size_t[]){DKV, H * DV}), "--mask",
                          save_f32("mask.npy", mask, 2, (size_t[]){L, S}), NULL};
    const float *full_mask = broadcast_mask(mask, 2, (size_t[]){L, S}, B, H, L, S);
    clattn_masks m = CLATTN_MASKS_INIT;
    m.causal = CLATTN_CAUSAL_BOTTOM_RIGHT;
    m.additive = CLATTN_MASK_B_H_L_S;
    clattn_sdpa_desc d = sdpa_desc(B, H, 0, L, S, DK, DV, &m);
    d.softcap = 1.25f;
    clattn_mha_desc md = CLATTN_MHA_DESC_INIT;
    md.batch = B;
    md.q_len = L;
    md.kv_len = S;
    md.model_dim = DM;
    md.kv_dim = DKV;
    md.heads = H;
    md.qk_dim = DK;
    md.v_dim = DV;
    md.softcap = 1.25f;
    md.masks = &m;
    const float *q = projected_heads(x, B, L, DM, w.w_q, H, DK), *k = projected_heads(kv, B, S, DKV, w.w_k, H, DK);
    double *want = xmalloc(B * H * L * S * sizeof *want), *y = xmalloc(B * L * H * DV * sizeof *y);
    static const char *const modes[] = {"qk", "softcapped", "masked", "softmax"};
    for (int mode = 0; mode < 4; mode++) {
        argl a = {{0}, 0};
        add(&a, "mha", "--heads", "2", "--out", P("y.npy"), "--softcap", "1.25", "--causal-bottom-right", "--scores",
            fmt("%s:%s", modes[mode], P("s.npy")), NULL);
        add_list(&a, args);
        run_expect(&a, EXIT_OK);
        if (mode == 2)
            ref_score(&d, q, k, full_mask, want);
        else if (mode == 3)
            ref_mha(&md, x, kv, &w, full_mask, y, want);
        else
            raw_scores(q, k, B * H, L, S, DK, mode == 0 ? 0.0 : 1.25, want);
        expect_file_close(modes[mode], P("s.npy"), 4, (size_t[]){B, H, L, S}, want);
    }
    expect_file_close("out", P("y.npy"), 3, (size_t[]){B, L, H * DV}, y);
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* Storage types                                                                                   */
/* ---------------------------------------------------------------------------------------------- */

/* A self-attention layer's reference (no W_O) on X and weights as given. */
static double *mha_ref(const float *x, const float *const *w, size_t L, size_t dm, size_t H, size_t dk)
{
    clattn_mha_host_weights hw = CLATTN_MHA_HOST_WEIGHTS_INIT;
    hw.w_q = w[0];
    hw.w_k = w[1];
    hw.w_v = w[2];
    clattn_mha_desc d = CLATTN_MHA_DESC_INIT;
    d.batch = 1;
    d.q_len = d.kv_len = L;
    d.model_dim = dm;
    d.heads = H;
    d.qk_dim = dk;
    d.out_dim = H * dk;
    double *y = xmalloc(L * H * dk * sizeof *y);
    ref_mha(&d, x, NULL, &hw, NULL, y, NULL);
    return y;
}

/* Layers in the storage types, each output against the fp64 reference on the values the files hold: half X
 * and weights with a float32 output (the float32 tolerance) and a bfloat16 one (plus half an ulp of
 * bfloat16); bfloat16 X and weights with --bf16 and a half output (plus half an ulp of half). Mixed weight
 * types, '<u2' without --bf16, --bf16 on half files and an int8 output are refused. */
START_TEST(test_mha_dtypes)
{
    enum { L = 4, DM = 8, H = 2, DK = 4 };
    const size_t xs[2] = {L, DM}, ws[2] = {DM, H * DK}, no = L * H * DK;
    rng.state = 51;
    const float *x = rand_floats(L * DM, 1.0f), *w[3];
    for (int i = 0; i < 3; i++)
        w[i] = rand_floats(DM * H * DK, 0.5f);
    const char *names[4] = {"xh.npy", "wqh.npy", "wkh.npy", "wvh.npy"}, *bnames[4] = {"xb.npy", "wqb.npy", "wkb.npy",
                                                                                     "wvb.npy"};
    const float *held[4], *bheld[4];
    for (int i = 0; i < 4; i++) {
        save_narrow(names[i], NPY_F2, i ? w[i - 1] : x, 2, i ? ws : xs, &held[i]);
        save_narrow(bnames[i], NPY_U2, i ? w[i - 1] : x, 2, i ? ws : xs, &bheld[i]);
    }
    npy_dtype dt;
    const double *r = mha_ref(held[0], held + 1, L, DM, H, DK);
    EXPECT(EXIT_OK, "mha", "--x", P(names[0]), "--wq", P(names[1]), "--wk", P(names[2]), "--wv", P(names[3]),
           "--heads", "2", "--out", P("oh.npy"));
    const float *oh = load_any(P("oh.npy"), no, &dt);
    ck_assert_msg(dt == NPY_F4, "a half layer without --out-dtype wrote %s", npy_dtype_name(dt));
    expect_close("half layer, float32 out", oh, r, no);
    EXPECT(EXIT_OK, "mha", "--x", P(names[0]), "--wq", P(names[1]), "--wk", P(names[2]), "--wv", P(names[3]),
           "--heads", "2", "--out", P("ob.npy"), "--out-dtype", "bfloat16");
    const float *ob = load_any(P("ob.npy"), no, &dt);
    ck_assert_msg(dt == NPY_U2, "--out-dtype bfloat16 wrote %s", npy_dtype_name(dt));
    expect_close_rounded("half layer, bfloat16 out", ob, r, no, 7, -126);
    EXPECT(EXIT_USAGE, "mha", "--x", P(names[0]), "--wq", P(names[1]), "--wk", save_f32("wk4.npy", w[1], 2, ws),
           "--wv", P(names[3]), "--heads", "2", "--out", P("x.npy"));
    expect_in("stderr", R.err, "share one type");

    EXPECT(EXIT_OK, "mha", "--bf16", "--x", P(bnames[0]), "--wq", P(bnames[1]), "--wk", P(bnames[2]), "--wv",
           P(bnames[3]), "--heads", "2", "--out", P("obb.npy"), "--out-dtype", "float16");
    const float *obb = load_any(P("obb.npy"), no, &dt);
    ck_assert_msg(dt == NPY_F2, "--out-dtype float16 wrote %s", npy_dtype_name(dt));
    expect_close_rounded("bfloat16 layer, half out", obb, mha_ref(bheld[0], bheld + 1, L, DM, H, DK), no, 10, -14);
    /* '<u2' without --bf16, --bf16 on half files, an int8 output: usage errors naming the cause. */
    EXPECT(EXIT_USAGE, "mha", "--x", P(bnames[0]), "--wq", P(bnames[1]), "--wk", P(bnames[2]), "--wv", P(bnames[3]),
           "--heads", "2", "--out", P("x.npy"));
    expect_in("stderr", R.err, "--bf16");
    EXPECT(EXIT_USAGE, "mha", "--bf16", "--x", P(names[0]), "--wq", P(names[1]), "--wk", P(names[2]), "--wv",
           P(names[3]), "--heads", "2", "--out", P("x.npy"));
    expect_in("stderr", R.err, "--bf16");
    expect_in("stderr", R.err, "xh.npy");
    EXPECT(EXIT_USAGE, "mha", "--x", P(names[0]), "--wq", P(names[1]), "--wk", P(names[2]), "--wv", P(names[3]),
           "--heads", "2", "--out", P("x.npy"), "--out-dtype", "int8");
    expect_in("stderr", R.err, "--out-dtype");
    ck_assert(!exists(P("x.npy")));
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */

static Suite *mha_suite(void)
{
    const cli_group groups[] = {
        {"mha", 1, {test_mha_self_biases_wo, test_mha_2d, test_mha_cross, test_mha_masks, test_mha_causal_bottom_right,
                    test_mha_scores}},
        {"mha-variants", 1, {test_mha_kv_heads, test_mha_offsets, test_mha_window, test_mha_softcap, test_mha_sinks,
                             test_mha_alibi, test_mha_logit_scale}},
        {"mha-dtypes", 1, {test_mha_dtypes}},
    };
    return cli_suite("clattn cli mha", groups, sizeof groups / sizeof groups[0]);
}

int main(void) { return cli_main("test_cli_mha", mha_suite, 120); }
