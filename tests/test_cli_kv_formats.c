/* `clattn sdpa --k-dtype NAME --v-dtype NAME` end to end, in every storage format of the library: raw
 * bytes ('|u1' files: blocks and values as another program wrote them, random and valid, with their row
 * scales) attended over as they are; float files quantised on the device (the cache append) and written
 * back with --present-k/--present-v (the bytes) and --present-k-scales/--present-v-scales; each output
 * against the fp64 reference on the bytes dequantised here, from the formats' definitions (ggml's
 * block_q8_0 and block_q4_0, the asymmetric u8/u4 groups, OCP FP8), not from the kernels. Then K and V
 * of different formats (one raw, one quantised), --kv-int8 as --k-dtype int8 --v-dtype int8, the token
 * formats (KIVI's keys: float files quantised on the device, the output against the reference on the
 * chunks formats_ref.c writes), and every refusal naming its flag or file. */
#include "cli_util.h"
#include "formats_ref.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { B = 2, H = 4, N = 2, L = 3, S = 20 };

/* ---------------------------------------------------------------------------------------------- */
/* The formats' bytes, on the host                                                                 */
/* ---------------------------------------------------------------------------------------------- */

static bool is_group(clattn_dtype t) { return t >= CLATTN_U8_G32 && t <= CLATTN_U4_G128; }
static bool is_fp8(clattn_dtype t) { return t == CLATTN_FP8_E4M3 || t == CLATTN_FP8_E5M2; }
static size_t head_dim(clattn_dtype t) { return clattn_dtype_block(t) > 32 ? clattn_dtype_block(t) : 32; }

static double half_at(const unsigned char *p) { return npy_half_to_float((unsigned short)(p[0] | p[1] << 8)); }

static void put_half(unsigned char *p, float x)
{
    const unsigned short h = npy_float_to_half(x);
    p[0] = (unsigned char)(h & 0xff), p[1] = (unsigned char)(h >> 8);
}

/* An OCP 8-bit float's value: mbits mantissa bits, the exponent's bias; ieee: the top exponent is inf/NaN
 * (E5M2), else only its all-ones mantissa is NaN (E4M3). */
static double fp8_value(unsigned b, unsigned mbits, int bias, bool ieee)
{
    const unsigned e = (b & 0x7f) >> mbits, m = b & ((1u << mbits) - 1), top = 0x7fu >> mbits;
    double mag;
    if (e == 0)
        mag = ldexp(m, 1 - bias - (int)mbits);
    else if (ieee && e == top)
        mag = m ? NAN : INFINITY;
    else if (!ieee && e == top && m == (1u << mbits) - 1)
        mag = NAN;
    else
        mag = ldexp(1.0 + m / (double)(1u << mbits), (int)e - bias);
    return b & 0x80 ? -mag : mag;
}

/* Value i of a row of bytes in format t (a row scale not applied). */
static double value_of(clattn_dtype t, const unsigned char *row, size_t i)
{
    const size_t n = clattn_dtype_block(t), bb = clattn_dtype_bytes(t, n);
    const unsigned char *b = row + i / n * bb;
    const size_t j = i % n;
    float f;
    switch (t) {
    case CLATTN_FLOAT32: memcpy(&f, row + 4 * i, 4); return f; /* (little-endian, as .npy files are) */
    case CLATTN_FLOAT16: return half_at(row + 2 * i);
    case CLATTN_BFLOAT16: return npy_bf16_to_float_value((unsigned short)(row[2 * i] | row[2 * i + 1] << 8));
    case CLATTN_INT8: return (signed char)row[i];
    case CLATTN_FP8_E4M3: return fp8_value(row[i], 3, 7, false);
    case CLATTN_FP8_E5M2: return fp8_value(row[i], 2, 15, true);
    case CLATTN_Q8_0: return half_at(b) * (signed char)b[2 + j];
    case CLATTN_Q4_0: /* value j < 16: byte j's low nibble; j ≥ 16: byte j − 16's high nibble */
        return half_at(b) * (((b[2 + j % 16] >> (j / 16 * 4)) & 15) - 8.0);
    default: { /* u8/u4 groups: fp16 s, fp16 z, values (u4: value 2t in byte t's low nibble) */
        const unsigned q = t <= CLATTN_U8_G128 ? b[4 + j] : (b[4 + j / 2] >> (j % 2 * 4)) & 15u;
        return (q - half_at(b + 2)) * half_at(b);
    }
    }
}

/* rows × dim values of bytes in t, times the row scales when given, as doubles (tracked). */
static double *dequantise(clattn_dtype t, const unsigned char *bytes, size_t rows, size_t dim, const float *scales)
{
    const size_t row = clattn_dtype_bytes(t, dim);
    double *x = xmalloc(rows * dim * sizeof *x);
    for (size_t r = 0; r < rows; r++)
        for (size_t i = 0; i < dim; i++)
            x[r * dim + i] = value_of(t, bytes + r * row, i) * (scales ? scales[r] : 1.0);
    return x;
}

/* Valid bytes of t as another program could write them: random scales, zero points and values, no NaN or
 * infinity (FP8 exponents kept to |x| ≤ 4); *scales gets random row scales where t takes them. Tracked. */
static unsigned char *random_bytes(clattn_dtype t, size_t rows, size_t dim, float **scales)
{
    const size_t n = clattn_dtype_block(t), bb = clattn_dtype_bytes(t, n), row = clattn_dtype_bytes(t, dim);
    unsigned char *p = xmalloc(rows * row);
    for (size_t i = 0; i < rows * row; i++)
        p[i] = (unsigned char)(rng_unit() * 256);
    if (scales) {
        *scales = xmalloc(rows * sizeof **scales);
        for (size_t r = 0; r < rows; r++)
            (*scales)[r] = 0.05f + 0.5f * (float)rng_unit();
    }
    for (size_t v = 0; v < rows * dim; v++) {
        const float x = tu_rng_uniform(&rng, 1.0f);
        if (t == CLATTN_FLOAT32)
            memcpy(p + 4 * v, &x, 4);
        else if (t == CLATTN_FLOAT16)
            put_half(p + 2 * v, x);
        else if (t == CLATTN_BFLOAT16) {
            const unsigned short h = npy_float_to_bf16(x);
            p[2 * v] = (unsigned char)(h & 0xff), p[2 * v + 1] = (unsigned char)(h >> 8);
        } else if (is_fp8(t)) {
            const unsigned mbits = t == CLATTN_FP8_E4M3 ? 3 : 2, top_e = t == CLATTN_FP8_E4M3 ? 9 : 17;
            const unsigned e = (unsigned)(rng_unit() * (top_e + 1)), m = (unsigned)(rng_unit() * (1u << mbits));
            p[v] = (unsigned char)((rng_unit() < 0.5 ? 0x80 : 0) | e << mbits | m);
        }
    }
    for (size_t b = 0; n > 1 && b < rows * dim / n; b++) { /* a block's scale (and zero point) */
        put_half(p + b * bb, 0.001f + 0.03f * (float)rng_unit());
        if (is_group(t))
            put_half(p + b * bb + 2, (float)(int)(rng_unit() * (t <= CLATTN_U8_G128 ? 256 : 16)));
    }
    return p;
}

/* How far the device's quantisation of x (rows of dim) may be from x at value i: half a step of the format
 * there, with margin for a block scale's fp16 rounding and a clamped end. */
static double quantisation_bound(clattn_dtype t, const float *x, size_t dim, size_t i)
{
    const size_t n = t == CLATTN_INT8 || is_fp8(t) ? dim : clattn_dtype_block(t), first = i / n * n;
    double top = 0, lo = 0, hi = 0;
    for (size_t j = first; j < first + n; j++) {
        top = fmax(top, fabs(x[j]));
        lo = fmin(lo, x[j]);
        hi = fmax(hi, x[j]);
    }
    switch (t) {
    case CLATTN_FLOAT32: return 0;
    case CLATTN_FLOAT16: return fabs(x[i]) * 0x1p-11 + 1e-7;
    case CLATTN_BFLOAT16: return fabs(x[i]) * 0x1p-8 + 1e-7;
    case CLATTN_INT8: return 0.51 * top / 127;
    case CLATTN_FP8_E4M3: return fabs(x[i]) * 0x1p-4 + 0x1p-9 * top / 448;
    case CLATTN_FP8_E5M2: return fabs(x[i]) * 0x1p-3 + 0x1p-16 * top / 57344;
    case CLATTN_Q8_0: return 1.1 * top / 127 + 1e-6;
    case CLATTN_Q4_0: return 1.1 * top / 8 + 1e-6;
    default: return 1.1 * (hi - lo) / (t <= CLATTN_U8_G128 ? 255 : 15) + 1e-6;
    }
}

/* The bytes of a '|u1' .npy the tool wrote, of this shape. */
static const unsigned char *load_u1(const char *path, size_t ndim, const size_t *shape)
{
    FILE *fp = fopen(path, "rb");
    ck_assert_msg(fp != NULL, "%s: not written", path);
    static unsigned char img[1 << 20];
    const size_t len = fread(img, 1, sizeof img, fp), count = product(ndim, shape);
    fclose(fp);
    ck_assert_msg(len > 10 + count && len < sizeof img, "%s: %zu bytes", path, len);
    const size_t header = (size_t)img[8] | (size_t)img[9] << 8;
    ck_assert_msg(10 + header + count == len, "%s: %zu bytes of data after the header, expected %zu", path,
                  len - 10 - header, count);
    img[10 + header - 1] = '\0';
    expect_in(path, (const char *)img + 10, "'descr': '|u1'");
    expect_in(path, (const char *)img + 10, shape_text(ndim, shape));
    unsigned char *data = xmalloc(count);
    memcpy(data, img + 10 + header, count);
    return data;
}

static const char *save_u1(const char *name, const unsigned char *bytes, size_t ndim, const size_t *shape)
{
    return save_raw(name, 1, "|u1", "False", shape_text(ndim, shape), bytes, product(ndim, shape));
}

/* ---------------------------------------------------------------------------------------------- */
/* Runs                                                                                            */
/* ---------------------------------------------------------------------------------------------- */

/* Q (B,H,L,D) random, saved; its floats in *q. */
static const char *query_file(const char *name, size_t D, const float **q)
{
    const size_t qs[4] = {B, H, L, D};
    *q = rand_floats(B * H * L * D, 1.0f);
    return save_f32(name, *q, 4, qs);
}

/* The tool's O.npy against the reference over K and V (doubles). */
static void expect_out(const char *what, const char *path, const float *q, const double *k, const double *v,
                       size_t D, size_t Dv)
{
    const clattn_sdpa_desc d = sdpa_desc(B, H, N, L, S, D, Dv, NULL);
    double *qd = xmalloc(B * H * L * D * sizeof *qd), *ro = xmalloc(B * H * L * Dv * sizeof *ro);
    for (size_t i = 0; i < B * H * L * D; i++)
        qd[i] = q[i];
    ref_sdpa_d(&d, qd, k, v, NULL, ro, NULL, NULL);
    expect_file_close(what, path, 4, (size_t[]){B, H, L, Dv}, ro);
}

/* Raw bytes of every format (K and V in it, their row scales where it takes them: int8's, and FP8 E4M3's —
 * optional, given here — while E5M2 goes without) read as they are. */
START_TEST(test_raw_every_format)
{
    rng.state = 3801;
    for (int i = 0; strcmp(clattn_dtype_name((clattn_dtype)i), "unknown") != 0; i++) {
        const clattn_dtype t = (clattn_dtype)i;
        const char *name = clattn_dtype_name(t);
        if (fref_is_token(t)) /* (their bytes are chunks: test_token_formats) */
            continue;
        const size_t D = head_dim(t), row = clattn_dtype_bytes(t, D), rows = B * N * S;
        const bool scaled = t == CLATTN_INT8 || t == CLATTN_FP8_E4M3;
        float *ks = NULL, *vs = NULL;
        const unsigned char *kb = random_bytes(t, rows, D, scaled ? &ks : NULL);
        const unsigned char *vb = random_bytes(t, rows, D, scaled ? &vs : NULL);
        const float *q;
        const size_t bs[4] = {B, N, S, row}, ss[3] = {B, N, S};
        argl a = {{0}, 0};
        add(&a, "sdpa", "--q", query_file(fmt("q_%s.npy", name), D, &q), "--k", save_u1(fmt("k_%s.npy", name), kb, 4, bs),
            "--v", save_u1(fmt("v_%s.npy", name), vb, 4, bs), "--out", P(fmt("o_%s.npy", name)), "--kv-heads", "2",
            "--k-dtype", name, "--v-dtype", name, NULL);
        if (scaled)
            add(&a, "--k-scales", save_f32(fmt("ks_%s.npy", name), ks, 3, ss), "--v-scales",
                save_f32(fmt("vs_%s.npy", name), vs, 3, ss), NULL);
        run_expect(&a, EXIT_OK);
        expect_out(fmt("%s raw out", name), P(fmt("o_%s.npy", name)), q, dequantise(t, kb, rows, D, ks),
                   dequantise(t, vb, rows, D, vs), D, D);
    }
}
END_TEST

/* Float K and V quantised on the device into every format: the bytes written back (--present-k/-v, and
 * the row scales of int8 and FP8, which the device computes) hold the floats within the format's step, and
 * the output is attention over exactly those bytes. */
START_TEST(test_quantised_every_format)
{
    rng.state = 3802;
    for (int i = 0; strcmp(clattn_dtype_name((clattn_dtype)i), "unknown") != 0; i++) {
        const clattn_dtype t = (clattn_dtype)i;
        const char *name = clattn_dtype_name(t);
        if (fref_is_token(t)) /* (their bytes are chunks: test_token_formats) */
            continue;
        const size_t D = head_dim(t), row = clattn_dtype_bytes(t, D), rows = B * N * S;
        const bool scaled = t == CLATTN_INT8 || is_fp8(t), quantised = t > CLATTN_BFLOAT16;
        const size_t fs[4] = {B, N, S, D}, bs[4] = {B, N, S, row}, ss[3] = {B, N, S};
        const float *q, *k = rand_floats(rows * D, 1.0f), *v = rand_floats(rows * D, 1.0f);
        argl a = {{0}, 0};
        add(&a, "sdpa", "--q", query_file(fmt("q_%s.npy", name), D, &q), "--k", save_f32(fmt("k_%s.npy", name), k, 4, fs),
            "--v", save_f32(fmt("v_%s.npy", name), v, 4, fs), "--out", P(fmt("o_%s.npy", name)), "--kv-heads", "2",
            "--k-dtype", name, "--v-dtype", name, "--present-k", P(fmt("pk_%s.npy", name)), "--present-v",
            P(fmt("pv_%s.npy", name)), NULL);
        if (scaled)
            add(&a, "--present-k-scales", P(fmt("pks_%s.npy", name)), "--present-v-scales", P(fmt("pvs_%s.npy", name)),
                NULL);
        run_expect(&a, EXIT_OK);
        if (quantised)
            expect_in("stdout", R.out, fmt("%s bytes ('|u1')", name));
        const float *scales[2] = {NULL, NULL};
        double *held[2];
        for (int s = 0; s < 2; s++) {
            const char *present = P(fmt("%s_%s.npy", s ? "pv" : "pk", name));
            if (scaled)
                scales[s] = load_f32(P(fmt("%s_%s.npy", s ? "pvs" : "pks", name)), 3, ss);
            if (quantised) {
                held[s] = dequantise(t, load_u1(present, 4, bs), rows, D, scales[s]);
            } else { /* (a float format's present is its values, as floats) */
                npy_dtype dt;
                const float *f = load_any(present, rows * D, &dt);
                held[s] = xmalloc(rows * D * sizeof *held[s]);
                for (size_t j = 0; j < rows * D; j++)
                    held[s][j] = f[j];
            }
            const float *x = s ? v : k;
            for (size_t j = 0; j < rows * D; j++)
                ck_assert_msg(fabs(held[s][j] - x[j]) <= quantisation_bound(t, x + j / D * D, D, j % D),
                              "%s %c[%zu]: %g held for %g", name, "KV"[s], j, held[s][j], (double)x[j]);
        }
        expect_out(fmt("%s quantised out", name), P(fmt("o_%s.npy", name)), q, held[0], held[1], D, D);
    }
}
END_TEST

/* K and V of different formats and ranks: raw q4_0 K with a V quantised from floats into u8_g32 (the
 * append then writes K's side into a scratch cache), 3-D (N,S,·) arrays, a V head size of its own; raw
 * FP8 E5M2 K without scales beside int8 V; --kv-int8 with the present written as int8 bytes. */
START_TEST(test_mixed_formats)
{
    rng.state = 3803;
    enum { D = 64, DV = 32 };
    const size_t rows = N * S, kr = clattn_dtype_bytes(CLATTN_Q4_0, D);
    const unsigned char *kb = random_bytes(CLATTN_Q4_0, rows, D, NULL);
    const float *q = rand_floats(N * 2 * L * D, 1.0f), *v = rand_floats(rows * DV, 1.0f);
    const size_t qs[3] = {N * 2, L, D}, ks[3] = {N, S, kr}, vs[3] = {N, S, DV};
    const char *qf = save_f32("q.npy", q, 3, qs), *vf = save_f32("v.npy", v, 3, vs), *kf = save_u1("k.npy", kb, 3, ks);
    EXPECT(EXIT_OK, "sdpa", "--q", qf, "--k", kf, "--v", vf, "--out", P("o.npy"), "--kv-heads", "2", "--k-dtype",
           "q4_0", "--v-dtype", "u8_g32", "--present-v", P("pv.npy"), "--present-k", P("pk.npy"));
    const size_t pvs[3] = {N, S, clattn_dtype_bytes(CLATTN_U8_G32, DV)};
    ck_assert_msg(memcmp(load_u1(P("pk.npy"), 3, ks), kb, rows * kr) == 0, "raw K's bytes changed on the way");
    const double *vh = dequantise(CLATTN_U8_G32, load_u1(P("pv.npy"), 3, pvs), rows, DV, NULL);
    const clattn_sdpa_desc d = sdpa_desc(1, N * 2, N, L, S, D, DV, NULL);
    double *qd = xmalloc(N * 2 * L * D * sizeof *qd), *ro = xmalloc(N * 2 * L * DV * sizeof *ro);
    for (size_t i = 0; i < N * 2 * L * D; i++)
        qd[i] = q[i];
    ref_sdpa_d(&d, qd, dequantise(CLATTN_Q4_0, kb, rows, D, NULL), vh, NULL, ro, NULL, NULL);
    expect_file_close("q4_0 K, u8_g32 V", P("o.npy"), 3, (size_t[]){N * 2, L, DV}, ro);

    /* fp8_e5m2 K bytes (no scales) with int8 V bytes and their scales */
    float *v8s;
    const unsigned char *k8 = random_bytes(CLATTN_FP8_E5M2, rows, D, NULL), *v8 = random_bytes(CLATTN_INT8, rows, DV, &v8s);
    const size_t k8s[3] = {N, S, D}, v8sh[3] = {N, S, DV}, ss[2] = {N, S};
    EXPECT(EXIT_OK, "sdpa", "--q", qf, "--k", save_u1("k8.npy", k8, 3, k8s), "--v", save_u1("v8.npy", v8, 3, v8sh),
           "--out", P("o8.npy"), "--kv-heads", "2", "--k-dtype", "fp8_e5m2", "--v-dtype", "int8", "--v-scales",
           save_f32("v8s.npy", v8s, 2, ss));
    ref_sdpa_d(&d, qd, dequantise(CLATTN_FP8_E5M2, k8, rows, D, NULL), dequantise(CLATTN_INT8, v8, rows, DV, v8s), NULL,
               ro, NULL, NULL);
    expect_file_close("fp8_e5m2 K, int8 V", P("o8.npy"), 3, (size_t[]){N * 2, L, DV}, ro);

    /* --kv-int8 is --k-dtype int8 --v-dtype int8: the same output, the present int8 bytes */
    const float *k = rand_floats(rows * D, 1.0f);
    const char *kff = save_f32("kf.npy", k, 3, (size_t[]){N, S, D});
    EXPECT(EXIT_OK, "sdpa", "--q", qf, "--k", kff, "--v", vf, "--out", P("oi.npy"), "--kv-heads", "2", "--kv-int8",
           "--present-k", P("pki.npy"));
    expect_in("stdout", R.out, "int8 bytes ('|u1')");
    EXPECT(EXIT_OK, "sdpa", "--q", qf, "--k", kff, "--v", vf, "--out", P("oj.npy"), "--kv-heads", "2", "--k-dtype",
           "int8", "--v-dtype", "int8");
    const size_t os[3] = {N * 2, L, DV};
    ck_assert_msg(memcmp(load_f32(P("oi.npy"), 3, os), load_f32(P("oj.npy"), 3, os), N * 2 * L * DV * 4) == 0,
                  "--kv-int8 and --k-dtype int8 --v-dtype int8 differ");
    load_u1(P("pki.npy"), 3, (size_t[]){N, S, D});
}
END_TEST

/* Every refusal: exit 2, a line naming the flag or the file, no output left. */
START_TEST(test_refusals)
{
    rng.state = 3804;
    const size_t rows = N * S;
    const float *q;
    const char *qf = query_file("q.npy", 32, &q);
    const size_t fs[4] = {B, N, S, 32}, b18[4] = {B, N, S, 18}, b20[4] = {B, N, S, 20}, ss[3] = {B, N, S};
    const char *kf = save_f32("k.npy", rand_floats(B * rows * 32, 1.0f), 4, fs);
    const char *k18 = save_u1("k18.npy", random_bytes(CLATTN_Q4_0, B * rows, 32, NULL), 4, b18);
    const char *k20 = save_u1("k20.npy", random_bytes(CLATTN_U4_G32, B * rows, 32, NULL), 4, b20);
    const char *k32 = save_u1("k32.npy", random_bytes(CLATTN_INT8, B * rows, 32, NULL), 4, fs);
    const char *sc = save_f32("s.npy", rand_floats(B * rows, 1.0f), 3, ss);
    const char *bad_sc = save_f32("s2.npy", rand_floats(B * rows, 1.0f), 2, (size_t[]){B * N, S});
    const char *o = P("o.npy");
    static const struct {
        const char *args[10];
        const char *needle[2];
    } cases[] = {
        {{"--k-dtype", "q5_1"}, {"--k-dtype", "q4_0"}},                    /* an unknown format, the list given */
        {{"--k", "K18"}, {"k18.npy", "|u1"}},                              /* raw bytes without a format */
        {{"--k", "K18", "--k-dtype", "q8_0"}, {"k18.npy", "34 bytes"}},    /* K's rows not Q's head size */
        {{"--k", "K20", "--k-dtype", "q4_0"}, {"k20.npy", "18 bytes"}},
        {{"--v", "K20", "--v-dtype", "q4_0"}, {"k20.npy", "whole q4_0 blocks"}}, /* V's rows not whole blocks */
        {{"--k", "K32", "--k-dtype", "int8"}, {"--k-scales", "int8"}},     /* int8 bytes without their scales */
        {{"--k", "K18", "--k-dtype", "q4_0", "--k-scales", "S"}, {"--k-scales", "q4_0"}},
        {{"--k-dtype", "int8", "--k-scales", "S"}, {"--k-scales", "raw"}}, /* scales for float rows */
        {{"--k", "K32", "--k-dtype", "int8", "--k-scales", "S2"}, {"--k-scales", "s2.npy"}},
        {{"--k-dtype", "u8_g64"}, {"k.npy", "block of 64"}},              /* head size 32, block 64 */
        {{"--k-dtype", "q4_0", "--past-k", "K", "--past-v", "K"}, {"--k-dtype", "past"}},
        {{"--kv-int8", "--k-dtype", "q4_0"}, {"--kv-int8", "disagree"}},
        {{"--k-dtype", "q4_0", "--present-k-scales", "P"}, {"--present-k-scales", "--present-k"}},
        {{"--k-dtype", "q4_0", "--present-k", "P", "--present-k-scales", "P2"}, {"--present-k-scales", "no scales"}},
        {{"--k-dtype", "float16", "--present-k", "P", "--present-k-scales", "P2"}, {"--present-k-scales", "quantised"}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        argl a = {{0}, 0};
        add(&a, "sdpa", "--q", qf, "--out", o, "--kv-heads", "2", NULL);
        bool k_given = false, v_given = false;
        for (size_t i = 0; cases[c].args[i]; i++) {
            const char *x = cases[c].args[i];
            k_given = k_given || strcmp(x, "--k") == 0;
            v_given = v_given || strcmp(x, "--v") == 0;
            x = strcmp(x, "K18") == 0 ? k18 : strcmp(x, "K20") == 0 ? k20 : strcmp(x, "K32") == 0 ? k32
                : strcmp(x, "K") == 0 ? kf : strcmp(x, "S") == 0 ? sc : strcmp(x, "S2") == 0 ? bad_sc
                : strcmp(x, "P") == 0 ? P("p.npy") : strcmp(x, "P2") == 0 ? P("p2.npy") : x;
            add(&a, x, NULL);
        }
        if (!k_given)
            add(&a, "--k", kf, NULL);
        if (!v_given)
            add(&a, "--v", kf, NULL);
        run_expect(&a, EXIT_USAGE);
        ck_assert_msg(count_lines(R.err) == 1, "case %zu: %s", c, R.err);
        for (int n = 0; n < 2; n++)
            expect_in(fmt("case %zu stderr", c), R.err, cases[c].needle[n]);
        ck_assert(!exists(o) && !exists(P("p.npy")) && !exists(P("p2.npy")));
    }
    /* --heads takes no raw bytes */
    const size_t packed[3] = {B, L, H * 32}, kp[3] = {B, S, N * 18};
    EXPECT(EXIT_USAGE, "sdpa", "--q", save_f32("qp.npy", rand_floats(B * L * H * 32, 1.0f), 3, packed), "--k",
           save_u1("kp.npy", random_bytes(CLATTN_Q4_0, B * S * N, 32, NULL), 3, kp), "--v", kf, "--out", o, "--heads",
           "4", "--kv-heads", "2", "--k-dtype", "q4_0");
    expect_in("stderr", R.err, "--heads");
    /* --help lists the flags */
    EXPECT(EXIT_OK, "sdpa", "--help");
    for (size_t i = 0; i < 6; i++)
        expect_in("--help", R.out, (const char *[]){"--k-dtype", "--v-dtype", "--k-scales", "--v-scales",
                                                    "--present-k-scales", "--present-v-scales"}[i]);
}
END_TEST

/* The token formats (u4_t32, u2_t32): float K and V quantised on the device (a chunk a head of S = 20
 * rows: all of them in the float16 tail) and, over 70 rows (two whole groups and a tail), K in u2_t32
 * beside V in u4_t32 — the output against the reference on the values the host's chunks (formats_ref.c,
 * the same appends) hold; raw token bytes and --present-k refused. */
START_TEST(test_token_formats)
{
    rng.state = 3805;
    const size_t D = 32, rows_of[2] = {S, 70};
    const clattn_dtype kt[2] = {CLATTN_U4_T32, CLATTN_U2_T32}, vt[2] = {CLATTN_U4_T32, CLATTN_U4_T32};
    for (int c = 0; c < 2; c++) {
        const size_t s_rows = rows_of[c], n = B * N * s_rows * D;
        const float *q, *k = rand_floats(n, 1.0f), *v = rand_floats(n, 1.0f);
        const size_t fs[4] = {B, N, s_rows, D};
        argl a = {{0}, 0};
        add(&a, "sdpa", "--q", query_file(fmt("q_t%d.npy", c), D, &q), "--k", save_f32(fmt("k_t%d.npy", c), k, 4, fs),
            "--v", save_f32(fmt("v_t%d.npy", c), v, 4, fs), "--out", P(fmt("o_t%d.npy", c)), "--kv-heads", "2",
            "--k-dtype", clattn_dtype_name(kt[c]), "--v-dtype", clattn_dtype_name(vt[c]), "--causal-bottom-right", NULL);
        run_expect(&a, EXIT_OK);
        double *held[2];
        for (int s = 0; s < 2; s++) {
            const clattn_dtype t = s ? vt[c] : kt[c];
            const size_t head = clattn_dtype_head_bytes(t, s_rows, D);
            unsigned char *chunk = xmalloc(head);
            held[s] = xmalloc(n * sizeof *held[s]);
            for (size_t h = 0; h < B * N; h++) {
                memset(chunk, 0, head);
                fref_token_append(t, chunk, s_rows, D, 0, (s ? v : k) + h * s_rows * D, s_rows);
                for (size_t r = 0; r < s_rows; r++)
                    for (size_t e = 0; e < D; e++)
                        held[s][(h * s_rows + r) * D + e] = fref_token_value(t, chunk, s_rows, D, r, e);
            }
        }
        clattn_masks m = CLATTN_MASKS_INIT;
        m.causal = CLATTN_CAUSAL_BOTTOM_RIGHT;
        const clattn_sdpa_desc d = sdpa_desc(B, H, N, L, s_rows, D, D, &m);
        double *qd = xmalloc(B * H * L * D * sizeof *qd), *ro = xmalloc(B * H * L * D * sizeof *ro);
        for (size_t i = 0; i < B * H * L * D; i++)
            qd[i] = q[i];
        ref_sdpa_d(&d, qd, held[0], held[1], NULL, ro, NULL, NULL);
        expect_file_close(fmt("token formats %d out", c), P(fmt("o_t%d.npy", c)), 4, (size_t[]){B, H, L, D}, ro);
    }
    const size_t bs[4] = {B, N, S, 16};
    unsigned char *bytes = xmalloc(B * N * S * 16);
    memset(bytes, 0, B * N * S * 16);
    const float *q;
    argl a = {{0}, 0};
    add(&a, "sdpa", "--q", query_file("q_traw.npy", D, &q), "--k", save_u1("k_traw.npy", bytes, 4, bs), "--v",
        save_u1("v_traw.npy", bytes, 4, bs), "--out", P("o_traw.npy"), "--kv-heads", "2", "--k-dtype", "u4_t32",
        "--v-dtype", "u4_t32", NULL);
    run_expect(&a, EXIT_USAGE);
    expect_in("stderr", R.err, "raw u4_t32 bytes are not read");
    argl p = {{0}, 0};
    add(&p, "sdpa", "--q", P("q_t0.npy"), "--k", P("k_t0.npy"), "--v", P("v_t0.npy"), "--out", P("o_tp.npy"),
        "--kv-heads", "2", "--k-dtype", "u2_t32", "--present-k", P("pk_t.npy"), NULL);
    run_expect(&p, EXIT_USAGE);
    expect_in("stderr", R.err, "a head's chunk");
}
END_TEST

static Suite *kv_formats_suite(void)
{
    const cli_group groups[] = {
        {"kv-formats", 1, {test_raw_every_format, test_quantised_every_format, test_mixed_formats, test_refusals,
                           test_token_formats}},
    };
    return cli_suite("clattn cli kv formats", groups, sizeof groups / sizeof groups[0]);
}

/* (Each format compiles its kernels and its append's: minutes when cold.) */
int main(void) { return cli_main("test_cli_kv_formats", kv_formats_suite, 240); }
