/*
 * `clattn sdpa` end to end, the variants (test_cli_sdpa's second half; cli_sdpa_test.h): --kv-heads,
 * --past/--present, the backward pass (--grad-out, --dq/--dk/--dv, in every storage type), --offset(s),
 * --window, --softcap, --sinks, --alibi (a file and auto), --logit-scale, --mods, --scores and --heads, each
 * run's outputs against the fp64 reference.
 */
#include "cli_sdpa_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------- */
/* The variants, --scores, past and present, --heads                                               */
/* ---------------------------------------------------------------------------------------------- */

/* --kv-heads: grouped-query (6 query heads on 2 K/V heads) and multi-query (1) attention. */
START_TEST(test_sdpa_kv_heads)
{
    sdpa_check(&(sdpa_spec){.rank = 4, .B = 2, .H = 6, .L = 5, .S = 9, .D = 4, .Dv = 3, .kv_heads = 2, .seed = 40});
    sdpa_check(&(sdpa_spec){.rank = 3, .B = 1, .H = 4, .L = 3, .S = 7, .D = 8, .Dv = 8, .kv_heads = 1, .seed = 41});
}
END_TEST

/* --past-k/--past-v/--present-k/--present-v (ONNX's past and present): the present files hold exactly
 * concat(past, new) along the sequence, in K's layout (4-D, and (B,S,N·D) with --heads), and the
 * output is attention over it; misuse is a usage error naming the flag. */
START_TEST(test_sdpa_past_present)
{
    enum { B = 2, H = 4, N = 2, L = 2, S = 2, PAST = 7, T = PAST + S, D = 8, DV = 4 };
    rng.state = 60;
    float *q = rand_floats(B * H * L * D, 1.0f), *k = rand_floats(B * N * S * D, 1.0f);
    float *v = rand_floats(B * N * S * DV, 1.0f), *pk = rand_floats(B * N * PAST * D, 1.0f);
    float *pv = rand_floats(B * N * PAST * DV, 1.0f);
    /* the concatenation the files must hold */
    const float *kk = concat_rows(pk, PAST, k, S, B * N, D), *vv = concat_rows(pv, PAST, v, S, B * N, DV);
    clattn_masks m = CLATTN_MASKS_INIT;
    m.causal = CLATTN_CAUSAL_BOTTOM_RIGHT;
    const clattn_sdpa_desc d = sdpa_desc(B, H, N, L, T, D, DV, &m);
    double *ro = xmalloc(B * H * L * DV * sizeof *ro), *rl = xmalloc(B * H * L * sizeof *rl);
    ref_sdpa(&d, q, kk, vv, NULL, ro, NULL, rl);
    for (int packed = 0; packed < 2; packed++) {
        const size_t r = packed ? 3 : 4;
        size_t qs[4], ks[4], vs[4], pks[4], pvs[4], prk[4], prv[4], os[4], ls[4];
        tensor_shape(r, packed, B, H, L, D, qs);
        tensor_shape(r, packed, B, N, S, D, ks);
        tensor_shape(r, packed, B, N, S, DV, vs);
        tensor_shape(r, packed, B, N, PAST, D, pks);
        tensor_shape(r, packed, B, N, PAST, DV, pvs);
        tensor_shape(r, packed, B, N, T, D, prk);
        tensor_shape(r, packed, B, N, T, DV, prv);
        tensor_shape(r, packed, B, H, L, DV, os);
        const size_t lr = tensor_shape(4, false, B, H, L, 0, ls);
#define LAYOUT(x, X, Y, Z) (packed ? swap_middle((x), sizeof(float), B, (X), (Y), (Z)) : (void *)(x))
        argl a = {{0}, 0};
        add(&a, "sdpa", "--q", save_f32("q.npy", LAYOUT(q, H, L, D), r, qs), "--k",
            save_f32("k.npy", LAYOUT(k, N, S, D), r, ks), "--v", save_f32("v.npy", LAYOUT(v, N, S, DV), r, vs),
            "--past-k", save_f32("pk.npy", LAYOUT(pk, N, PAST, D), r, pks), "--past-v",
            save_f32("pv.npy", LAYOUT(pv, N, PAST, DV), r, pvs), "--present-k", P("prk.npy"), "--present-v",
            P("prv.npy"), "--out", P("out.npy"), "--lse", P("lse.npy"), "--kv-heads", "2", "--causal-bottom-right",
            NULL);
        if (packed)
            add(&a, "--heads", "4", NULL);
        run_expect(&a, EXIT_OK);
        const float *got_k = load_f32(P("prk.npy"), r, prk), *got_v = load_f32(P("prv.npy"), r, prv);
        const float *want_k = LAYOUT(kk, N, T, D), *want_v = LAYOUT(vv, N, T, DV);
        ck_assert_msg(memcmp(got_k, want_k, B * N * T * D * sizeof *kk) == 0, "`%s`: present_k is not concat(past_k, k)",
                      R.cmd);
        ck_assert_msg(memcmp(got_v, want_v, B * N * T * DV * sizeof *vv) == 0, "`%s`: present_v is not concat(past_v, v)",
                      R.cmd);
        expect_file_close("out", P("out.npy"), r, os, packed ? swap_middle(ro, sizeof *ro, B, H, L, DV) : ro);
        expect_file_close("lse", P("lse.npy"), lr, ls, rl);
#undef LAYOUT
    }
    EXPECT(EXIT_USAGE, "sdpa", "--q", P("q.npy"), "--k", P("k.npy"), "--v", P("v.npy"), "--past-k", P("pk.npy"),
           "--out", P("o2.npy"), "--kv-heads", "2", "--heads", "4");
    expect_in("stderr", R.err, "--past-v");
    EXPECT(EXIT_USAGE, "sdpa", "--q", P("q.npy"), "--k", P("k.npy"), "--v", P("v.npy"), "--past-k", P("pk.npy"),
           "--past-v", P("v.npy"), "--out", P("o2.npy"), "--kv-heads", "2", "--heads", "4");
    expect_in("stderr", R.err, "rows");
}
END_TEST

/* --grad-out with --dq/--dk/--dv: the backward pass after the forward, the gradients in their inputs'
 * layouts (4-D, and (B,L,H·D) with --heads) against the fp64 reference backward; misuse names the flag. */
START_TEST(test_sdpa_backward)
{
    enum { B = 2, H = 4, N = 2, L = 5, S = 9, D = 8, DV = 4 };
    rng.state = 61;
    float *q = rand_floats(B * H * L * D, 1.0f), *k = rand_floats(B * N * S * D, 1.0f);
    float *v = rand_floats(B * N * S * DV, 1.0f), *g = rand_floats(B * H * L * DV, 1.0f);
    clattn_masks m = CLATTN_MASKS_INIT;
    m.causal = CLATTN_CAUSAL_BOTTOM_RIGHT;
    const clattn_sdpa_desc d = sdpa_desc(B, H, N, L, S, D, DV, &m);
    double *rq = xmalloc(B * H * L * D * sizeof *rq), *rk = xmalloc(B * N * S * D * sizeof *rk);
    double *rv = xmalloc(B * N * S * DV * sizeof *rv);
    ref_sdpa_backward(&d, NULL, NULL, q, k, v, NULL, g, rq, rk, rv, NULL);
    for (int packed = 0; packed < 2; packed++) {
        const size_t r = packed ? 3 : 4;
        size_t qs[4], ks[4], vs[4], os[4];
        tensor_shape(r, packed, B, H, L, D, qs);
        tensor_shape(r, packed, B, N, S, D, ks);
        tensor_shape(r, packed, B, N, S, DV, vs);
        tensor_shape(r, packed, B, H, L, DV, os);
#define LAYOUT(x, size, X, Y, Z) (packed ? swap_middle((x), (size), B, (X), (Y), (Z)) : (void *)(x))
        argl a = {{0}, 0};
        add(&a, "sdpa", "--q", save_f32("q.npy", LAYOUT(q, sizeof *q, H, L, D), r, qs), "--k",
            save_f32("k.npy", LAYOUT(k, sizeof *k, N, S, D), r, ks), "--v",
            save_f32("v.npy", LAYOUT(v, sizeof *v, N, S, DV), r, vs), "--grad-out",
            save_f32("g.npy", LAYOUT(g, sizeof *g, H, L, DV), r, os), "--out", P("out.npy"), "--dq", P("dq.npy"),
            "--dk", P("dk.npy"), "--dv", P("dv.npy"), "--kv-heads", "2", "--causal-bottom-right", NULL);
        if (packed)
            add(&a, "--heads", "4", NULL);
        run_expect(&a, EXIT_OK);
        expect_file_close("dq", P("dq.npy"), r, qs, LAYOUT(rq, sizeof *rq, H, L, D));
        expect_file_close("dk", P("dk.npy"), r, ks, LAYOUT(rk, sizeof *rk, N, S, D));
        expect_file_close("dv", P("dv.npy"), r, vs, LAYOUT(rv, sizeof *rv, N, S, DV));
#undef LAYOUT
    }
    /* (the last files are the packed ones) */
    EXPECT(EXIT_USAGE, "sdpa", "--q", P("q.npy"), "--k", P("k.npy"), "--v", P("v.npy"), "--out", P("o2.npy"),
           "--dq", P("dq2.npy"), "--kv-heads", "2", "--heads", "4");
    expect_in("stderr", R.err, "--grad-out");
    EXPECT(EXIT_USAGE, "sdpa", "--q", P("q.npy"), "--k", P("k.npy"), "--v", P("v.npy"), "--out", P("o2.npy"),
           "--grad-out", P("q.npy"), "--dq", P("dq2.npy"), "--kv-heads", "2", "--heads", "4");
    expect_in("stderr", R.err, "the output's shape");
    EXPECT(EXIT_USAGE, "sdpa", "--q", P("q.npy"), "--k", P("k.npy"), "--v", P("v.npy"), "--out", P("o2.npy"),
           "--grad-out", P("g.npy"), "--kv-heads", "2", "--heads", "4");
    expect_in("stderr", R.err, "--dq");
    ck_assert_msg(!exists(P("dq2.npy")) && !exists(P("o2.npy")), "a refused call wrote its outputs");
}
END_TEST

/* The backward pass in every storage type the tool reads (issue 36, item 1): Q, K and V as '<f4', '<f2'
 * (mixed with '<f4'), or '<u2' bfloat16 with --bf16; dO as '<f4' or '<f2' (or '<u2' with --bf16), each
 * dO type with every --out-dtype. The library reads dO in the output's type, so the tool must convert it
 * (rounded to nearest even) and save each gradient in its input's type with that type's descr. Each run
 * against the fp64 reference backward on the values the tool holds: Q, K, V as their files hold them, dO
 * rounded to --out-dtype, and D = dO·O taken with the O the forward rounded to --out-dtype (the file
 * --out wrote: the backward reads that O). Gradients in float32 within expect_close's bound, 16-bit ones
 * within it plus half a unit in the last place of their type. A dO value that overflows --out-dtype is
 * refused naming --grad-out. */
static float round_to(float x, npy_dtype t)
{
    return t == NPY_F2 ? npy_half_to_float(npy_float_to_half(x))
           : t == NPY_U2 ? npy_bf16_to_float_value(npy_float_to_bf16(x))
                         : x;
}

static const char *save_typed(const char *name, npy_dtype t, const float *src, size_t ndim, const size_t *shape,
                              const float **held)
{
    if (t != NPY_F4)
        return save_narrow(name, t, src, ndim, shape, held);
    *held = src;
    return save_f32(name, src, ndim, shape);
}

static void expect_typed_close(const char *what, const float *got, npy_dtype t, const double *ref, size_t n)
{
    if (t == NPY_F4)
        expect_close(what, got, ref, n);
    else
        expect_close_rounded(what, got, ref, n, t == NPY_F2 ? 10 : 7, t == NPY_F2 ? -14 : -126);
}

START_TEST(test_sdpa_backward_dtypes)
{
    enum { H = 2, L = 5, S = 7, D = 8, DV = 4 };
    const size_t qs[3] = {H, L, D}, ks[3] = {H, S, D}, vs[3] = {H, S, DV}, os[3] = {H, L, DV};
    const size_t nq = H * L * D, nk = H * S * D, nv = H * S * DV, no = H * L * DV;
    rng.state = 67;
    const float *q = rand_floats(nq, 1.5f), *k = rand_floats(nk, 1.5f), *v = rand_floats(nv, 1.0f);
    const float *g = rand_floats(no, 1.0f);
    const clattn_sdpa_desc d = sdpa_desc(1, H, 0, L, S, D, DV, NULL);
    const double scale = 1.0 / sqrt((double)D);
    /* Every dO file type converted to every output type ('<f4' and '<f2' dO to float32 and bfloat16 beside
     * float32 Q/K/V, to float16 beside a mix of '<f2' and '<f4' ones; bfloat16 dO with --bf16 to all
     * three), and gradients saved in each storage type (float32, float16, bfloat16, and a mix: each
     * gradient in its own input's type). Each new combination of the Q/K/V and output types builds the
     * forward's and the backward's kernels once more (seconds each while PoCL's cache is cold): these
     * six cover every conversion and every gradient type without the whole cross product. */
    static const struct {
        npy_dtype q, k, v, g;
        int outs; /* --out-dtype: bit 0 none (float32), 1 float16, 2 bfloat16 */
    } inputs[] = {
        {NPY_F4, NPY_F4, NPY_F4, NPY_F4, 5}, {NPY_F4, NPY_F4, NPY_F4, NPY_F2, 5}, {NPY_F2, NPY_F4, NPY_F2, NPY_F4, 2},
        {NPY_F2, NPY_F4, NPY_F2, NPY_F2, 2}, {NPY_U2, NPY_U2, NPY_U2, NPY_U2, 7}, /* --bf16: every input array */
    };
    static const npy_dtype out_types[3] = {NPY_F4, NPY_F2, NPY_U2};
    static const char *const out_names[3] = {NULL, "float16", "bfloat16"};
    double *ro = xmalloc(no * sizeof *ro), *rp = xmalloc(H * L * S * sizeof *rp);
    double *rq = xmalloc(nq * sizeof *rq), *rk = xmalloc(nk * sizeof *rk), *rv = xmalloc(nv * sizeof *rv);
    float *g_used = xmalloc(no * sizeof *g_used);
    for (size_t c = 0; c < sizeof inputs / sizeof inputs[0]; c++)
        for (size_t o = 0; o < 3; o++) {
            if (!(inputs[c].outs >> o & 1))
                continue;
            const bool bf16 = inputs[c].q == NPY_U2;
            const float *qh, *kh, *vh, *gh;
            argl a = {{0}, 0};
            add(&a, "sdpa", "--q", save_typed("q.npy", inputs[c].q, q, 3, qs, &qh), "--k",
                save_typed("k.npy", inputs[c].k, k, 3, ks, &kh), "--v", save_typed("v.npy", inputs[c].v, v, 3, vs, &vh),
                "--grad-out", save_typed("g.npy", inputs[c].g, g, 3, os, &gh), "--out", P("o.npy"), "--dq",
                P("dq.npy"), "--dk", P("dk.npy"), "--dv", P("dv.npy"), NULL);
            if (out_names[o])
                add(&a, "--out-dtype", out_names[o], NULL);
            if (bf16)
                add(&a, "--bf16", NULL);
            run_expect(&a, EXIT_OK);
            npy_dtype t;
            const float *oh = load_any(P("o.npy"), no, &t);
            ck_assert_msg(t == out_types[o], "`%s`: O written as %s", R.cmd, npy_dtype_name(t));
            const npy_dtype want[3] = {inputs[c].q, inputs[c].k, inputs[c].v};
            const char *const names[3] = {"dq", "dk", "dv"};
            const float *grad[3];
            const size_t counts[3] = {nq, nk, nv};
            for (size_t i = 0; i < 3; i++) {
                grad[i] = load_any(P(fmt("%s.npy", names[i])), counts[i], &t);
                ck_assert_msg(t == want[i], "`%s`: %s written as %s, its input is %s", R.cmd, names[i],
                              npy_dtype_name(t), npy_dtype_name(want[i]));
            }
            /* The reference: dO as the library reads it (in the output's type), then D's share of the
             * rounded O: D̂_i − D_i = Σ_t dO_it·(Ô_it − O_it), which moves dQ_i by −scale·ΔD_i·Σ_j P_ij·K_j
             * and dK_j by −scale·Σ_i P_ij·ΔD_i·Q_i (dV does not read D). */
            for (size_t i = 0; i < no; i++)
                g_used[i] = round_to(gh[i], out_types[o]);
            ref_sdpa(&d, qh, kh, vh, NULL, ro, rp, NULL);
            ref_sdpa_backward(&d, NULL, NULL, qh, kh, vh, NULL, g_used, rq, rk, rv, NULL);
            for (size_t h = 0; h < H; h++)
                for (size_t i = 0; i < L; i++) {
                    double delta = 0.0;
                    for (size_t x = 0; x < DV; x++) {
                        const size_t at = (h * L + i) * DV + x;
                        delta += (double)g_used[at] * ((double)oh[at] - ro[at]);
                    }
                    for (size_t j = 0; j < S; j++) {
                        const double w = rp[(h * L + i) * S + j] * scale * delta;
                        for (size_t x = 0; x < D; x++) {
                            rq[(h * L + i) * D + x] -= w * kh[(h * S + j) * D + x];
                            rk[(h * S + j) * D + x] -= w * qh[(h * L + i) * D + x];
                        }
                    }
                }
            expect_typed_close("dq", grad[0], want[0], rq, nq);
            expect_typed_close("dk", grad[1], want[1], rk, nk);
            expect_typed_close("dv", grad[2], want[2], rv, nv);
        }
    /* A float32 dO value that float16 cannot hold: refused, naming the flag; nothing written. */
    float *big = xmalloc(no * sizeof *big);
    memcpy(big, g, no * sizeof *big);
    big[3] = 1e5f;
    EXPECT(EXIT_USAGE, "sdpa", "--q", save_f32("q4.npy", q, 3, qs), "--k", save_f32("k4.npy", k, 3, ks), "--v",
           save_f32("v4.npy", v, 3, vs), "--grad-out", save_f32("big.npy", big, 3, os), "--out", P("x.npy"), "--dq",
           P("dx.npy"), "--out-dtype", "float16");
    expect_in("stderr", R.err, "--grad-out");
    expect_in("stderr", R.err, "float16");
    /* Under --bf16 dO is an input array like the others: a '<f4' dO is refused naming the flag. */
    const float *held;
    EXPECT(EXIT_USAGE, "sdpa", "--bf16", "--q", save_narrow("qb.npy", NPY_U2, q, 3, qs, &held), "--k",
           save_narrow("kb.npy", NPY_U2, k, 3, ks, &held), "--v", save_narrow("vb.npy", NPY_U2, v, 3, vs, &held),
           "--grad-out", save_f32("g4.npy", g, 3, os), "--out", P("x.npy"), "--dq", P("dx.npy"));
    expect_in("stderr", R.err, "--bf16");
    expect_in("stderr", R.err, "g4.npy");
    ck_assert_msg(!exists(P("x.npy")) && !exists(P("dx.npy")), "a refused call wrote its outputs");
}
END_TEST

/* --offset N puts query i at key position N + i in every batch (negative: a causal mask hides every
 * key from the first rows); --offsets OFF.npy gives one per batch, '<i8' or '<i4'. */
START_TEST(test_sdpa_offsets)
{
    static const long long minus2[] = {-2, -2};
    const char *const one[] = {"--causal", "--offset", "-2", NULL};
    sdpa_check(&(sdpa_spec){.rank = 4, .B = 2, .H = 2, .L = 5, .S = 8, .D = 4, .Dv = 4,
                            .causal = CLATTN_CAUSAL_TOP_LEFT, .offsets = minus2, .extra = one, .seed = 42});
    static const long long per_batch[] = {3, 0, 6};
    const char *const i8[] = {"--causal-bottom-right", "--offsets", save_i64("off.npy", per_batch, 3), NULL};
    sdpa_check(&(sdpa_spec){.rank = 4, .B = 3, .H = 2, .L = 4, .S = 9, .D = 4, .Dv = 3,
                            .causal = CLATTN_CAUSAL_BOTTOM_RIGHT, .offsets = per_batch, .extra = i8, .seed = 43});
    static const long long small[] = {-1, 2};
    const char *const i4[] = {"--causal", "--offsets", save_i32("off4.npy", small, 2), NULL};
    sdpa_check(&(sdpa_spec){.rank = 4, .B = 2, .H = 1, .L = 3, .S = 5, .D = 8, .Dv = 2,
                            .causal = CLATTN_CAUSAL_TOP_LEFT, .offsets = small, .extra = i4, .seed = 44});
}
END_TEST

/* --window L,R: keys p-L..p+R; -1 leaves a side unbounded. */
START_TEST(test_sdpa_window)
{
    static const clattn_window w21 = {2, 1}, left_open = {-1, 0}, right_open = {1, -1};
    const char *const both[] = {"--window", "2,1", NULL};
    sdpa_check(&(sdpa_spec){.rank = 4, .B = 2, .H = 2, .L = 6, .S = 8, .D = 4, .Dv = 4, .window = &w21,
                            .extra = both, .seed = 45});
    const char *const left[] = {"--window=-1,0", NULL};
    sdpa_check(&(sdpa_spec){.rank = 3, .B = 1, .H = 2, .L = 5, .S = 5, .D = 4, .Dv = 3, .window = &left_open,
                            .extra = left, .seed = 46});
    static const long long two[] = {2};
    const char *const right[] = {"--window", "1,-1", "--offset", "2", NULL};
    sdpa_check(&(sdpa_spec){.rank = 2, .B = 1, .H = 1, .L = 4, .S = 9, .D = 4, .Dv = 4, .window = &right_open,
                            .offsets = two, .extra = right, .seed = 47});
}
END_TEST

/* --softcap C: C·tanh(s/C) on the scaled scores (a large scale, so that the cap matters); 0 is off. */
START_TEST(test_sdpa_softcap)
{
    const char *const cap[] = {"--softcap", "1.5", NULL};
    sdpa_check(&(sdpa_spec){.rank = 4, .B = 2, .H = 2, .L = 4, .S = 7, .D = 4, .Dv = 4, .scale = 2.0f,
                            .softcap = 1.5f, .extra = cap, .seed = 48});
    const char *const off[] = {"--softcap=0", NULL};
    sdpa_check(&(sdpa_spec){.rank = 3, .B = 1, .H = 2, .L = 4, .S = 7, .D = 4, .Dv = 4, .extra = off, .seed = 49});
}
END_TEST

/* --sinks SINKS.npy: one logit per head in each row's denominator; a row whose keys are all masked
 * (key length 0) keeps zero weights, with the sink as its log-sum-exp. */
START_TEST(test_sdpa_sinks)
{
    const size_t H = 3;
    rng.state = 500;
    float *sinks = rand_floats(H, 2.0f);
    sinks[1] = 4.0f; /* a sink that takes most of the weight */
    static const long long len[] = {6, 0};
    static const size_t len_z[] = {6, 0};
    const char *const extra[] = {"--sinks", save_f32("sinks.npy", sinks, 1, &H), "--key-lengths",
                                 save_i64("len.npy", len, 2), NULL};
    sdpa_check(&(sdpa_spec){.rank = 4, .B = 2, .H = H, .L = 4, .S = 6, .D = 4, .Dv = 3, .sinks = sinks,
                            .key_lengths = len_z, .extra = extra, .seed = 50});
}
END_TEST

/* --alibi SLOPES.npy: slope[h]·(j − p) added to the scores. */
START_TEST(test_sdpa_alibi_file)
{
    const size_t H = 3;
    rng.state = 510;
    const float *slopes = rand_floats(H, 0.8f);
    const char *const extra[] = {"--alibi", save_f32("slopes.npy", slopes, 1, &H), NULL};
    sdpa_check(&(sdpa_spec){.rank = 4, .B = 2, .H = H, .L = 5, .S = 9, .D = 4, .Dv = 4, .alibi = slopes,
                            .extra = extra, .seed = 51});
}
END_TEST

/* --logit-scale SCALES.npy: each head's scaled scores times its scale, before --softcap. */
START_TEST(test_sdpa_logit_scale)
{
    const size_t H = 4;
    rng.state = 520;
    const float *scales = rand_floats(H, 2.0f);
    const char *const extra[] = {"--logit-scale", save_f32("scales.npy", scales, 1, &H), "--softcap", "1.75",
                                 "--causal", NULL};
    sdpa_check(&(sdpa_spec){.rank = 4, .B = 2, .H = H, .L = 6, .S = 11, .D = 5, .Dv = 3, .causal = CLATTN_CAUSAL_TOP_LEFT,
                            .softcap = 1.75f, .logit_scale = scales, .extra = extra, .seed = 52});
}
END_TEST

/* --mods, --aux, --define: docs/cli.md's document masking of a packed batch (ids.npy, a mods file), with
 * a define and with --causal alongside; then what the tool refuses. */
static int ref_doc_mask(int b, int h, long long q, long long k, const void *u)
{
    (void)b, (void)h;
    const long long *doc = u;
    return doc[q] == doc[k] && k <= q + 1; /* (STEP = 1: one key ahead) */
}

/* A (4, 5) layout of blocks of 4 positions × 3 keys (test_sdpa_mods'): pair (q, k) visible where its
 * block is listed. */
static int ref_layout_4x3(int b, int h, long long q, long long k, const void *u)
{
    (void)b, (void)h;
    return ((const long long *)u)[(q / 4) * 5 + k / 3] != 0;
}

/* A 2-D int64 .npy of rows × cols. */
static const char *save_raw_i64_2d(const char *name, const long long *v, size_t rows, size_t cols)
{
    return save_raw(name, 1, "<i8", "False", fmt("(%zu, %zu)", rows, cols), v, rows * cols * sizeof *v);
}

START_TEST(test_sdpa_mods)
{
    enum { L = 13 };
    static const long long ids[L] = {0, 0, 0, 1, 1, 2, 2, 2, 2, 2, 3, 4, 4};
    FILE *f = fopen(P("doc.cl"), "w");
    ck_assert(f != NULL);
    fputs("bool mask_mod(int b, int h, long q, long k, __global const int *doc)\n"
          "{\n    return doc[q] == doc[k] && k <= q + STEP;\n}\n", f);
    fclose(f);
    const ref_mods rm = {NULL, ref_doc_mask, ids};
    const char *const extra[] = {"--mods", P("doc.cl"), "--aux", fmt("doc=%s:position", save_i32("ids.npy", ids, L)),
                                 "--define", "STEP=1", NULL};
    sdpa_check(&(sdpa_spec){.rank = 4, .B = 2, .H = 2, .L = L, .S = L, .D = 8, .Dv = 4, .mods = &rm, .extra = extra,
                            .seed = 61});
    const char *const causal[] = {"--causal", "--mods", /* (and the --flag=value spellings) */ P("doc.cl"), fmt("--aux=doc=%s", P("ids.npy")),
                                  "--define=STEP=1", NULL};
    sdpa_check(&(sdpa_spec){.rank = 3, .B = 1, .H = 3, .L = L, .S = L, .D = 4, .Dv = 4,
                            .causal = CLATTN_CAUSAL_TOP_LEFT, .mods = &rm, .extra = causal, .seed = 62});

    /* The same with its block mask (blocks of 4 positions × 3 keys), and a block-sparse layout alone. */
    const char *const blocks[] = {"--mods", P("doc.cl"), "--aux", fmt("doc=%s:position", P("ids.npy")), "--define",
                                  "STEP=1", "--block-mask", "--block-size", "4,3", NULL};
    sdpa_check(&(sdpa_spec){.rank = 4, .B = 1, .H = 2, .L = L, .S = L, .D = 8, .Dv = 4, .mods = &rm, .extra = blocks,
                            .seed = 63});
    static const long long layout[4 * 5] = {1, 0, 0, 0, 0, /* (4, 5) blocks of 4 x 3 over 13 x 13 */
                                            1, 1, 0, 0, 0, 0, 0, 1, 1, 0, 1, 0, 0, 0, 1};
    const char *const sparse[] = {"--block-sparse", save_raw_i64_2d("layout.npy", layout, 4, 5), "--block-size", "4,3",
                                  NULL};
    const ref_mods lr = {NULL, ref_layout_4x3, layout};
    sdpa_check(&(sdpa_spec){.rank = 3, .B = 1, .H = 2, .L = L, .S = L, .D = 8, .Dv = 4, .mods = &lr, .extra = sparse,
                            .seed = 64});

    /* Refusals: --aux without --mods, a source that does not compile (the log names its line), an --aux
     * that is not NAME=FILE, an index shorter than the call's positions. */
    const char *q = f32_file("q.npy", 3, (const size_t[]){1, L, 4});
    EXPECT(EXIT_USAGE, "sdpa", "--q", q, "--k", q, "--v", q, "--out", P("o.npy"), "--aux", "doc=ids.npy");
    expect_in("stderr", R.err, "--aux needs --mods");
    f = fopen(P("bad.cl"), "w");
    ck_assert(f != NULL);
    fputs("bool mask_mod(int b, int h, long q, long k)\n{\n    return k <= q + STEP\n}\n", f);
    fclose(f);
    EXPECT(EXIT_USAGE, "sdpa", "--q", q, "--k", q, "--v", q, "--out", P("o.npy"), "--mods", P("bad.cl"), "--define",
           "STEP=2");
    expect_in("stderr", R.err, "CLATTN_ERROR_BUILD_FAILED");
    expect_in("stderr", R.err, "mods:3:");
    EXPECT(EXIT_USAGE, "sdpa", "--q", q, "--k", q, "--v", q, "--out", P("o.npy"), "--mods", P("doc.cl"), "--aux",
           "ids.npy");
    expect_in("stderr", R.err, "is not NAME=FILE.npy");
    static const long long short_ids[3] = {0, 0, 1};
    EXPECT(EXIT_USAGE, "sdpa", "--q", q, "--k", q, "--v", q, "--out", P("o.npy"), "--mods", P("doc.cl"), "--define",
           "STEP=0", "--aux", fmt("doc=%s:position", save_i32("short.npy", short_ids, 3)));
    expect_in("stderr", R.err, "CLATTN_ERROR_BUFFER_TOO_SMALL");
    ck_assert_msg(!exists(P("o.npy")), "a refused run wrote its output");
}
END_TEST

/* --alibi auto: Press et al.'s slopes, for H a power of two (8) and not (6, 12). */
START_TEST(test_sdpa_alibi_auto)
{
    /* The test's own get_slopes against values worked by hand: 2^(-8(h+1)/H) for H = 8; for H = 6 the
     * four of H = 4, then 2^-1 and 2^-3, every other one of H = 8. */
    double s8[8], s6[6];
    alibi_get_slopes(8, s8);
    alibi_get_slopes(6, s6);
    static const double want6[6] = {0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125};
    for (size_t h = 0; h < 8; h++)
        ck_assert_msg(fabs(s8[h] - ldexp(1.0, -(int)h - 1)) < 1e-15, "slope %zu of 8: %.17g", h, s8[h]);
    for (size_t h = 0; h < 6; h++)
        ck_assert_msg(fabs(s6[h] - want6[h]) < 1e-15, "slope %zu of 6: %.17g", h, s6[h]);

    const char *const extra[] = {"--alibi", "auto", NULL};
    static const size_t heads[] = {8, 6, 12};
    for (size_t c = 0; c < 3; c++)
        sdpa_check(&(sdpa_spec){.rank = 4, .B = 1, .H = heads[c], .L = 4, .S = 9, .D = 4, .Dv = 2,
                                .alibi = alibi_auto(heads[c]), .extra = extra, .seed = 52 + c});
}
END_TEST

/* Everything at once: grouped K/V heads, a window, soft-capping, sinks, ALiBi auto, per-batch offsets
 * and a causal mask, with an explicit scale. */
/* --scores MODE:FILE: the (B,H,L,S) scores at each of ONNX's qk_matmul_output_mode points, against the
 * reference: Q·Kᵀ·scale of every key (qk), soft-capped, with the masks (−inf where hidden). */
START_TEST(test_sdpa_scores)
{
    enum { B = 1, H = 2, L = 4, S = 6, D = 3 };
    rng.state = 560;
    const size_t qs[4] = {B, H, L, D}, ks[4] = {B, H, S, D}, ws[4] = {B, H, L, S};
    float *q = rand_floats(B * H * L * D, 2.0f), *k = rand_floats(B * H * S * D, 2.0f),
          *v = rand_floats(B * H * S * D, 1.0f);
    save_f32("q.npy", q, 4, qs);
    save_f32("k.npy", k, 4, ks);
    save_f32("v.npy", v, 4, ks);
    static const char *const modes[] = {"qk", "softcapped", "masked", "softmax"};
    clattn_masks m = CLATTN_MASKS_INIT;
    m.causal = CLATTN_CAUSAL_TOP_LEFT;
    clattn_sdpa_desc d = sdpa_desc(B, H, 0, L, S, D, 0, &m);
    d.softcap = 1.25f;
    double *want = xmalloc(B * H * L * S * sizeof *want), *o = xmalloc(B * H * L * D * sizeof *o);
    for (int mode = 0; mode < 4; mode++) {
        const char *arg = fmt("%s:%s", modes[mode], P("s.npy"));
        EXPECT(EXIT_OK, "sdpa", "--q", P("q.npy"), "--k", P("k.npy"), "--v", P("v.npy"), "--out", P("o.npy"),
               "--softcap", "1.25", "--causal", "--scores", arg);
        if (mode == 2)
            ref_score(&d, q, k, NULL, want);
        else if (mode == 3)
            ref_sdpa(&d, q, k, v, NULL, o, want, NULL);
        else
            raw_scores(q, k, B * H, L, S, D, mode == 0 ? 0.0 : 1.25, want);
        expect_file_close(modes[mode], P("s.npy"), 4, ws, want);
    }
}
END_TEST

/* --heads H: 3-D arrays (B,L,H·D), as ONNX and PyTorch layers hold them, give the numbers of the 4-D
 * (B,H,L,D) run on the same data; O is written back as (B,L,H·Dv), the weights (B,H,L,S) and the
 * log-sum-exp (B,H,L) keep their heads. */
START_TEST(test_sdpa_heads_layout)
{
    const size_t B = 2, H = 4, L = 5, S = 7, Dv = 3;
    const char *const causal[] = {"--causal", NULL};
    sdpa_spec s = {.rank = 4, .B = B, .H = H, .L = L, .S = S, .D = 6, .Dv = Dv, .kv_heads = 2,
                   .causal = CLATTN_CAUSAL_TOP_LEFT, .extra = causal, .seed = 57};
    const sdpa_result four = sdpa_check(&s);
    s.rank = 3;
    s.heads_layout = true;
    const sdpa_result three = sdpa_check(&s);
    const float *rows = swap_middle(four.out, sizeof *four.out, B, H, L, Dv);
    ck_assert_msg(memcmp(three.out, rows, B * L * H * Dv * sizeof *rows) == 0,
                  "O of the (B,L,H·D) run is not the 4-D run's O as (B,L,H·Dv)");
    ck_assert_msg(memcmp(three.w, four.w, B * H * L * S * sizeof *four.w) == 0, "the weights differ from the 4-D run's");
    ck_assert_msg(memcmp(three.lse, four.lse, B * H * L * sizeof *four.lse) == 0, "the lse differs from the 4-D run's");
    /* Without --kv-heads, K and V hold the H heads too. */
    sdpa_check(&(sdpa_spec){.rank = 3, .heads_layout = true, .B = 3, .H = 2, .L = 4, .S = 4, .D = 5, .Dv = 5,
                            .seed = 58});
}
END_TEST

cli_group sdpa_variants_group(void)
{
    return (cli_group){"sdpa-variants", 1,
                       {test_sdpa_kv_heads, test_sdpa_past_present, test_sdpa_backward, test_sdpa_offsets,
                        test_sdpa_window, test_sdpa_softcap, test_sdpa_sinks, test_sdpa_alibi_file,
                        test_sdpa_logit_scale, test_sdpa_alibi_auto, test_sdpa_heads_layout, test_sdpa_scores,
                        test_sdpa_mods}};
}

cli_group sdpa_backward_dtypes_group(void) { return (cli_group){"sdpa-backward-dtypes", 1, {test_sdpa_backward_dtypes}}; }
