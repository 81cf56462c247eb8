/* `clattn sdpa` end to end: every layout it reads (4-D, 3-D, 2-D, (B,L,H·D) with --heads), every mask
 * flag, scale, variant (--kv-heads, --offset(s), --window, --softcap, --sinks, --alibi), --scores,
 * --past/--present, float64 and the storage types' files and flags (--bf16, --out-dtype, --kv-int8) —
 * each run's outputs against the fp64 reference on the inputs as the tool holds them. The library's own
 * numerics (fully masked rows, variants crossed with each other, scale 0) are its suites' (docs/tests.md).
 * The variants are in test_cli_sdpa_variants.c (the same program; cli_sdpa_test.h holds what the two share). */
#include "cli_sdpa_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------- */
/* sdpa against the reference                                                                      */
/* ---------------------------------------------------------------------------------------------- */

/* Shape of a tensor of rank `rank` whose last two dimensions are (a, b), or (a) when b = 0. With
 * heads_layout (rank 3 as (B,L,H·D)): (B, a, H·b). */

size_t tensor_shape(size_t rank, bool heads_layout, size_t B, size_t H, size_t a, size_t b, size_t *shape)
{
    size_t n = 0;
    if (heads_layout) {
        shape[n++] = B;
        shape[n++] = a;
        shape[n++] = H * b;
        return n;
    }
    if (rank == 4)
        shape[n++] = B;
    if (rank >= 3)
        shape[n++] = H;
    shape[n++] = a;
    if (b)
        shape[n++] = b;
    return n;
}

/* (A,X,Y,Z) → (A,Y,X,Z) of elements of `size` bytes: (B,H,L,D) to (B,L,H,D) and back. */

const char *save_input(const char *name, const float *f, size_t ndim, const size_t *shape, bool f8,
                       double **as_double)
{
    if (!f8)
        return save_f32(name, f, ndim, shape);
    /* Doubles that are not floats: the tool must round them to the nearest float, as the reference's
     * inputs are (the caller replaces its floats with the rounded values). */
    const size_t n = product(ndim, shape);
    double *d = xmalloc(n * sizeof *d);
    for (size_t i = 0; i < n; i++)
        d[i] = (double)f[i] + (2 * rng_unit() - 1) * 1e-9;
    *as_double = d;
    return save_raw(name, 1, "<f8", "False", shape_text(ndim, shape), d, n * sizeof *d);
}

sdpa_result sdpa_check(const sdpa_spec *s)
{
    ck_assert(s->rank == 4 || (s->rank == 3 && s->heads_layout) || (s->B == 1 && (s->rank == 3 || s->H == 1)));
    ck_assert(!(s->heads_layout && (s->rank != 3 || s->f8)));
    rng.state = s->seed;
    const size_t B = s->B, H = s->H, L = s->L, S = s->S, D = s->D, Dv = s->Dv, N = s->kv_heads ? s->kv_heads : H;
    const bool hl = s->heads_layout;
    float *q = rand_floats(B * H * L * D, 1.5f), *k = rand_floats(B * N * S * D, 1.5f);
    float *v = rand_floats(B * N * S * Dv, 1.0f);
    size_t qs[4], ks[4], vs[4], os[4], ws[4], ls[4];
    const size_t r = tensor_shape(s->rank, hl, B, H, L, D, qs);
    tensor_shape(s->rank, hl, B, N, S, D, ks);
    tensor_shape(s->rank, hl, B, N, S, Dv, vs);
    tensor_shape(s->rank, hl, B, H, L, Dv, os);
    const size_t wr = tensor_shape(hl ? 4 : s->rank, false, B, H, L, S, ws);
    const size_t lr = tensor_shape(hl ? 4 : s->rank, false, B, H, L, 0, ls);

    double *qd = NULL, *vd = NULL;
    const char *qp, *kp, *vp;
    if (hl) { /* the heads side by side in each row: (B,L,H·D) */
        qp = save_f32("q.npy", swap_middle(q, sizeof *q, B, H, L, D), r, qs);
        kp = save_f32("k.npy", swap_middle(k, sizeof *k, B, N, S, D), r, ks);
        vp = save_f32("v.npy", swap_middle(v, sizeof *v, B, N, S, Dv), r, vs);
    } else {
        qp = save_input("q.npy", q, r, qs, s->f8, &qd);
        kp = save_f32("k.npy", k, r, ks);
        vp = save_input("v.npy", v, r, vs, s->f8, &vd);
    }
    for (size_t i = 0; qd && i < B * H * L * D; i++)
        q[i] = (float)qd[i];
    for (size_t i = 0; vd && i < B * N * S * Dv; i++)
        v[i] = (float)vd[i];

    argl a = {{0}, 0};
    add(&a, "sdpa", "--q", qp, "--k", kp, "--v", vp, "--out", P("out.npy"), "--weights", P("w.npy"), "--lse",
        P("lse.npy"), NULL);
    const bool pass_scale = s->scale != 0.0f || s->scale_zero;
    if (pass_scale && s->scale_eq)
        add(&a, fmt("--scale=%.9g", s->scale), NULL);
    else if (pass_scale)
        add(&a, "--scale", fmt("%.9g", s->scale), NULL);
    if (hl)
        add(&a, "--heads", fmt("%zu", H), NULL);
    if (s->kv_heads)
        add(&a, "--kv-heads", fmt("%zu", N), NULL);
    add_list(&a, s->extra);
    run_expect(&a, EXIT_OK);

    sdpa_result got = {load_f32(P("out.npy"), r, os), load_f32(P("w.npy"), wr, ws), load_f32(P("lse.npy"), lr, ls)};
    const clattn_masks m = flag_masks(s->causal, s->key_lengths, s->offsets, s->window, s->mask != NULL);
    clattn_sdpa_desc d = sdpa_desc(B, H, N, L, S, D, Dv, &m);
    d.scale = pass_scale ? s->scale : CLATTN_SCALE_DEFAULT;
    d.softcap = s->softcap;
    d.sinks = s->sinks;
    d.alibi_slopes = s->alibi;
    d.logit_scale = s->logit_scale;
    double *ro = xmalloc(B * H * L * Dv * sizeof *ro), *rw = xmalloc(B * H * L * S * sizeof *rw);
    double *rl = xmalloc(B * H * L * sizeof *rl);
    ref_sdpa_mods(&d, s->mods, q, k, v, s->mask, ro, rw, rl);
    expect_close("out", got.out, hl ? swap_middle(ro, sizeof *ro, B, H, L, Dv) : ro, B * H * L * Dv);
    expect_close("weights", got.w, rw, B * H * L * S);
    expect_close("lse", got.lse, rl, B * H * L);
    return got;
}

/* ---------------------------------------------------------------------------------------------- */
/* Layouts, masks, scales                                                                          */
/* ---------------------------------------------------------------------------------------------- */

START_TEST(test_sdpa_4d)
{
    sdpa_check(&(sdpa_spec){.rank = 4, .B = 2, .H = 3, .L = 7, .S = 61, .D = 8, .Dv = 5, .seed = 1});
}
END_TEST

START_TEST(test_sdpa_3d)
{
    sdpa_check(&(sdpa_spec){.rank = 3, .B = 1, .H = 3, .L = 5, .S = 9, .D = 4, .Dv = 6, .seed = 2});
}
END_TEST

START_TEST(test_sdpa_2d)
{
    sdpa_check(&(sdpa_spec){.rank = 2, .B = 1, .H = 1, .L = 6, .S = 11, .D = 8, .Dv = 3, .seed = 3});
}
END_TEST

START_TEST(test_sdpa_causal)
{
    const char *const top_left[] = {"--causal", NULL};
    sdpa_check(&(sdpa_spec){.rank = 4, .B = 2, .H = 2, .L = 6, .S = 9, .D = 4, .Dv = 4,
                            .causal = CLATTN_CAUSAL_TOP_LEFT, .extra = top_left, .seed = 4});
}
END_TEST

START_TEST(test_sdpa_causal_bottom_right)
{
    const char *const bottom_right[] = {"--causal-bottom-right", NULL};
    sdpa_check(&(sdpa_spec){.rank = 3, .B = 1, .H = 2, .L = 4, .S = 9, .D = 4, .Dv = 3,
                            .causal = CLATTN_CAUSAL_BOTTOM_RIGHT, .extra = bottom_right, .seed = 6});
}
END_TEST

/* An additive float mask (L,S) with −inf entries and one row entirely −inf (zero weights and output,
 * log-sum-exp −inf). */
START_TEST(test_sdpa_mask_float)
{
    const size_t B = 2, H = 2, L = 6, S = 10;
    rng.state = 70;
    float *m = rand_mask(L * S);
    for (size_t j = 0; j < S; j++)
        m[2 * S + j] = -INFINITY;
    m[0] = 0.0f; /* row 0 keeps at least one key */
    const char *const extra[] = {"--mask", save_f32("mask.npy", m, 2, (size_t[]){L, S}), NULL};
    sdpa_check(&(sdpa_spec){.rank = 4, .B = B, .H = H, .L = L, .S = S, .D = 4, .Dv = 3,
                            .mask = broadcast_mask(m, 2, (size_t[]){L, S}, B, H, L, S), .extra = extra, .seed = 7});
}
END_TEST

/* A boolean '|b1' mask: True = may attend (adds 0), False adds −inf, as PyTorch's SDPA. */
START_TEST(test_sdpa_mask_bool)
{
    const size_t B = 2, H = 2, L = 5, S = 8;
    rng.state = 80;
    unsigned char bits[5 * 8];
    float add_mask[5 * 8];
    for (size_t i = 0; i < L * S; i++) {
        bits[i] = rng_unit() < 0.7;
        if (i / S == 1)
            bits[i] = 1; /* a row that sees everything */
        if (i / S == 3)
            bits[i] = i % S == 5; /* a row that sees only key 5 */
        add_mask[i] = bits[i] ? 0.0f : -INFINITY;
    }
    const char *const extra[] = {"--mask", save_raw("mask.npy", 1, "|b1", "False", "(5, 8)", bits, sizeof bits), NULL};
    sdpa_check(&(sdpa_spec){.rank = 4, .B = B, .H = H, .L = L, .S = S, .D = 4, .Dv = 4,
                            .mask = broadcast_mask(add_mask, 2, (size_t[]){L, S}, B, H, L, S), .extra = extra,
                            .seed = 8});
}
END_TEST

/* A full (B,H,L,S) mask, and float64 on disk. */
START_TEST(test_sdpa_mask_bhls)
{
    const size_t B = 2, H = 3, L = 4, S = 7, n = B * H * L * S;
    rng.state = 90;
    float *m = rand_mask(n);
    double *md = xmalloc(n * sizeof *md);
    for (size_t i = 0; i < n; i++)
        md[i] = m[i];
    const char *const extra[] = {"--mask", save_raw("mask.npy", 1, "<f8", "False", "(2, 3, 4, 7)", md, n * 8), NULL};
    sdpa_check(&(sdpa_spec){.rank = 4, .B = B, .H = H, .L = L, .S = S, .D = 4, .Dv = 2, .mask = m,
                            .extra = extra, .seed = 9});
}
END_TEST

/* Masks with dimensions of 1 broadcast NumPy-style: (1,H,L,S), (H,1,S) and (B,1,1,S). */
START_TEST(test_sdpa_mask_broadcast)
{
    const size_t B = 2, H = 3, L = 4, S = 6;
    static const size_t shapes[][4] = {{1, 3, 4, 6}, {3, 1, 6, 0}, {2, 1, 1, 6}, {1, 6, 0, 0}};
    static const size_t ranks[] = {4, 3, 4, 2};
    for (size_t c = 0; c < sizeof ranks / sizeof ranks[0]; c++) {
        rng.state = 100 + c;
        const size_t n = product(ranks[c], shapes[c]);
        float *m = rand_mask(n);
        const char *const extra[] = {"--mask", save_f32(fmt("mask%zu.npy", c), m, ranks[c], shapes[c]), NULL};
        sdpa_check(&(sdpa_spec){.rank = 4, .B = B, .H = H, .L = L, .S = S, .D = 4, .Dv = 4,
                                .mask = broadcast_mask(m, ranks[c], shapes[c], B, H, L, S), .extra = extra,
                                .seed = 10 + c});
    }
}
END_TEST

/* Key lengths as numpy writes them by default ('<i8'), including 0 (every key masked) and S. */
START_TEST(test_sdpa_key_lengths_i8)
{
    static const long long len[] = {5, 0, 9};
    static const size_t len_z[] = {5, 0, 9};
    const char *const extra[] = {"--key-lengths", save_i64("len.npy", len, 3), NULL};
    sdpa_check(&(sdpa_spec){.rank = 4, .B = 3, .H = 2, .L = 4, .S = 9, .D = 4, .Dv = 3, .key_lengths = len_z,
                            .extra = extra, .seed = 11});
}
END_TEST

START_TEST(test_sdpa_key_lengths_i4)
{
    static const long long len[] = {1, 7};
    static const size_t len_z[] = {1, 7};
    const char *const extra[] = {"--key-lengths", save_i32("len.npy", len, 2), NULL};
    sdpa_check(&(sdpa_spec){.rank = 4, .B = 2, .H = 1, .L = 3, .S = 7, .D = 8, .Dv = 8, .key_lengths = len_z,
                            .extra = extra, .seed = 12});
}
END_TEST

/* Every mask kind at once: causal, key lengths and a boolean mask, with an explicit scale. */
START_TEST(test_sdpa_masks_combined)
{
    const size_t B = 2, H = 2, L = 5, S = 7;
    static const long long len[] = {6, 3};
    static const size_t len_z[] = {6, 3};
    rng.state = 130;
    unsigned char bits[2 * 1 * 7];
    float add_mask[2 * 1 * 7];
    for (size_t i = 0; i < sizeof bits; i++) {
        bits[i] = rng_unit() < 0.75;
        add_mask[i] = bits[i] ? 0.0f : -INFINITY;
    }
    const char *const extra[] = {"--causal-bottom-right", "--key-lengths", save_i64("len.npy", len, 2), "--mask",
                                 save_raw("mask.npy", 1, "|b1", "False", "(2, 1, 1, 7)", bits, sizeof bits), NULL};
    sdpa_check(&(sdpa_spec){.rank = 4, .B = B, .H = H, .L = L, .S = S, .D = 4, .Dv = 4, .scale = 0.7f,
                            .causal = CLATTN_CAUSAL_BOTTOM_RIGHT, .key_lengths = len_z,
                            .mask = broadcast_mask(add_mask, 4, (size_t[]){2, 1, 1, 7}, B, H, L, S), .extra = extra,
                            .seed = 13});
}
END_TEST

/* --scale VALUE and --scale=VALUE; --scale 0 is a scale (uniform weights: the abi suite checks those
 * numbers on the library's paths), not "the default". */
START_TEST(test_sdpa_scale)
{
    sdpa_check(&(sdpa_spec){.rank = 3, .B = 1, .H = 2, .L = 4, .S = 5, .D = 4, .Dv = 4, .scale = -1.25f, .seed = 14});
    sdpa_check(&(sdpa_spec){.rank = 4, .B = 2, .H = 1, .L = 3, .S = 3, .D = 2, .Dv = 2, .scale = 2.5f,
                            .scale_eq = true, .seed = 16});
    sdpa_check(&(sdpa_spec){.rank = 3, .B = 1, .H = 2, .L = 4, .S = 5, .D = 4, .Dv = 3, .scale_zero = true,
                            .seed = 18});
}
END_TEST

/* float64 inputs are rounded to float32 on load and work. */
START_TEST(test_sdpa_f8_input)
{
    sdpa_check(&(sdpa_spec){.rank = 4, .B = 2, .H = 2, .L = 5, .S = 6, .D = 4, .Dv = 3, .f8 = true, .seed = 17});
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* Storage types                                                                                   */
/* ---------------------------------------------------------------------------------------------- */

/* K or V (rows of `row` floats) as an int8 cache holds them after the library's quantising append
 * (cl/convert.cl, docs/storage-types.md): per row, scale = max |x| / 127 and q = x·(127 / max |x|) rounded
 * to nearest even; the values attention reads are q·scale. */
static float *int8_dequantised(const float *x, size_t n, size_t row)
{
    float *held = xmalloc(n * sizeof *held);
    for (size_t r = 0; r < n / row; r++) {
        float top = 0.0f;
        for (size_t d = 0; d < row; d++)
            top = fmaxf(top, fabsf(x[r * row + d]));
        const float scale = top / 127.0f, inv = top > 0.0f ? 127.0f / top : 0.0f;
        for (size_t d = 0; d < row; d++)
            held[r * row + d] = (float)lrintf(x[r * row + d] * inv) * scale;
    }
    return held;
}

/* Storage types on the command line, each output against the fp64 reference on the inputs as the tool
 * holds them: '<f2' Q/K/V (the values half holds) written back with --out-dtype float16, within the
 * float32 tolerance plus half an ulp of half; '<u2' with --bf16 and --out-dtype bfloat16, likewise with
 * bfloat16's; --kv-int8 on the half files, against the reference on K and V quantised per row as the
 * library's append does (dequantised), within the float32 tolerance — a tool that ignored the flag would
 * be off by the quantisation error. Then the flags' usage errors. */
START_TEST(test_sdpa_dtypes)
{
    enum { H = 2, L = 5, S = 40, D = 8, DV = 6 };
    const size_t qs[3] = {H, L, D}, ks[3] = {H, S, D}, vs[3] = {H, S, DV}, os[3] = {H, L, DV}, no = H * L * DV;
    rng.state = 41;
    const float *q = rand_floats(H * L * D, 2.0f), *k = rand_floats(H * S * D, 2.0f), *v = rand_floats(H * S * DV, 2.0f);
    const char *half[3], *bf[3];
    const float *qh, *kh, *vh, *qb, *kb, *vb;
    half[0] = save_narrow("qh.npy", NPY_F2, q, 3, qs, &qh);
    half[1] = save_narrow("kh.npy", NPY_F2, k, 3, ks, &kh);
    half[2] = save_narrow("vh.npy", NPY_F2, v, 3, vs, &vh);
    bf[0] = save_narrow("qb.npy", NPY_U2, q, 3, qs, &qb);
    bf[1] = save_narrow("kb.npy", NPY_U2, k, 3, ks, &kb);
    bf[2] = save_narrow("vb.npy", NPY_U2, v, 3, vs, &vb);
    const clattn_sdpa_desc d = sdpa_desc(1, H, 0, L, S, D, DV, NULL);
    double *ro = xmalloc(no * sizeof *ro), *rw = xmalloc(H * L * S * sizeof *rw), *rl = xmalloc(H * L * sizeof *rl);
    npy_dtype dt;

    EXPECT(EXIT_OK, "sdpa", "--q", half[0], "--k", half[1], "--v", half[2], "--out", P("oh.npy"), "--out-dtype",
           "float16");
    expect_in("stdout", R.out, "float16");
    const float *oh = load_any(P("oh.npy"), no, &dt);
    ck_assert_msg(dt == NPY_F2, "--out-dtype float16 wrote %s", npy_dtype_name(dt));
    ref_sdpa(&d, qh, kh, vh, NULL, ro, NULL, NULL);
    expect_close_rounded("half out", oh, ro, no, 10, -14);

    EXPECT(EXIT_OK, "sdpa", "--bf16", "--q", bf[0], "--k", bf[1], "--v", bf[2], "--out", P("ob.npy"), "--out-dtype",
           "bfloat16");
    const float *ob = load_any(P("ob.npy"), no, &dt);
    ck_assert_msg(dt == NPY_U2, "--out-dtype bfloat16 wrote %s", npy_dtype_name(dt));
    ref_sdpa(&d, qb, kb, vb, NULL, ro, NULL, NULL);
    expect_close_rounded("bfloat16 out", ob, ro, no, 7, -126);

    EXPECT(EXIT_OK, "sdpa", "--q", half[0], "--k", half[1], "--v", half[2], "--out", P("o8.npy"), "--weights",
           P("w8.npy"), "--lse", P("l8.npy"), "--kv-int8");
    const float *o8 = load_any(P("o8.npy"), no, &dt);
    ck_assert_msg(dt == NPY_F4, "--kv-int8 without --out-dtype wrote %s", npy_dtype_name(dt));
    ref_sdpa(&d, qh, int8_dequantised(kh, H * S * D, D), int8_dequantised(vh, H * S * DV, DV), NULL, ro, rw, rl);
    expect_close("--kv-int8 out", o8, ro, no);
    expect_file_close("--kv-int8 weights", P("w8.npy"), 3, (size_t[]){H, L, S}, rw);
    expect_file_close("--kv-int8 lse", P("l8.npy"), 2, (size_t[]){H, L}, rl);

    /* float32 copies of the half files' values, for the errors and the mask below */
    save_f32("q4.npy", qh, 3, qs);
    save_f32("k4.npy", kh, 3, ks);
    save_f32("v4.npy", vh, 3, vs);
    /* Usage errors, each naming what is wrong. */
    EXPECT(EXIT_USAGE, "sdpa", "--bf16", "--q", half[0], "--k", bf[1], "--v", bf[2], "--out", P("x.npy"));
    expect_in("stderr", R.err, "--bf16");
    EXPECT(EXIT_USAGE, "sdpa", "--q", bf[0], "--k", bf[1], "--v", bf[2], "--out", P("x.npy"));
    expect_in("stderr", R.err, "--bf16");
    EXPECT(EXIT_USAGE, "sdpa", "--q", half[0], "--k", half[1], "--v", half[2], "--out", P("x.npy"),
           "--out-dtype", "int8");
    expect_in("stderr", R.err, "--out-dtype");
    EXPECT(EXIT_USAGE, "sdpa", "--q", half[0], "--k", half[1], "--v", half[2], "--out", P("x.npy"),
           "--kv-int8", "--past-k", half[1], "--past-v", half[2]);
    expect_in("stderr", R.err, "--kv-int8");
    /* --bf16 on float32 files; big-endian half; a dtype no path takes (complex): each names its file. */
    EXPECT(EXIT_USAGE, "sdpa", "--bf16", "--q", P("q4.npy"), "--k", P("k4.npy"), "--v", P("v4.npy"), "--out",
           P("x.npy"));
    expect_in("stderr", R.err, "--bf16");
    expect_in("stderr", R.err, "q4.npy");
    uint16_t be[H * L * D];
    memset(be, 0, sizeof be);
    const char *big = save_raw("qbe.npy", 1, ">f2", "False", "(2, 5, 8)", be, sizeof be);
    EXPECT(EXIT_USAGE, "sdpa", "--q", big, "--k", half[1], "--v", half[2], "--out", P("x.npy"));
    expect_in("stderr", R.err, "qbe.npy");
    expect_in("stderr", R.err, "big-endian");
    float c8[2 * H * L * D];
    memset(c8, 0, sizeof c8);
    const char *complex = save_raw("qc8.npy", 1, "<c8", "False", "(2, 5, 8)", c8, sizeof c8);
    EXPECT(EXIT_USAGE, "sdpa", "--q", complex, "--k", half[1], "--v", half[2], "--out", P("x.npy"));
    expect_in("stderr", R.err, "qc8.npy");
    expect_in("stderr", R.err, "'<f2'"); /* the list of what is supported names the 16-bit types */
    ck_assert(!exists(P("x.npy")));
    /* A half additive mask gives the same output, bit for bit, as the same mask in float32. */
    float mask[L * S];
    tu_fill_uniform(mask, L * S, 1.0f, 44);
    for (size_t i = 0; i < L * S; i++)
        mask[i] = i % 7 == 3 ? -INFINITY : npy_half_to_float(npy_float_to_half(mask[i]));
    const size_t ms[2] = {L, S};
    const float *mask_held;
    save_narrow("mh.npy", NPY_F2, mask, 2, ms, &mask_held);
    EXPECT(EXIT_OK, "sdpa", "--q", P("q4.npy"), "--k", P("k4.npy"), "--v", P("v4.npy"), "--out", P("om4.npy"),
           "--mask", save_f32("m4.npy", mask, 2, ms));
    EXPECT(EXIT_OK, "sdpa", "--q", P("q4.npy"), "--k", P("k4.npy"), "--v", P("v4.npy"), "--out", P("omh.npy"),
           "--mask", P("mh.npy"));
    ck_assert_msg(memcmp(load_f32(P("om4.npy"), 3, os), load_f32(P("omh.npy"), 3, os), no * sizeof(float)) == 0,
                  "a '<f2' mask and its '<f4' copy gave different outputs");
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */

static Suite *sdpa_suite(void)
{
    const cli_group groups[] = {
        {"sdpa", 1, {test_sdpa_4d, test_sdpa_3d, test_sdpa_2d, test_sdpa_causal, test_sdpa_causal_bottom_right,
                     test_sdpa_mask_float, test_sdpa_mask_bool, test_sdpa_mask_bhls, test_sdpa_mask_broadcast,
                     test_sdpa_key_lengths_i8, test_sdpa_key_lengths_i4, test_sdpa_masks_combined, test_sdpa_scale,
                     test_sdpa_f8_input}},
        sdpa_variants_group(),
        {"sdpa-dtypes", 1, {test_sdpa_dtypes}},
        sdpa_backward_dtypes_group(),
    };
    return cli_suite("clattn cli sdpa", groups, sizeof groups / sizeof groups[0]);
}

/* (The typed runs compile the half, bfloat16 and int8 kernels: tens of seconds when cold.) */
int main(void) { return cli_main("test_cli_sdpa", sdpa_suite, 120); }
