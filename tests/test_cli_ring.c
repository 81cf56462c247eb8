/* `clattn ring` under mpiexec (2 ranks, small shapes): whole inputs gathered and sharded files in and out,
 * every option of the command against the fp64 reference (--kv-heads, --softcap, --sinks, --alibi,
 * --window, --offset and --offsets, --key-lengths, --causal and --causal-bottom-right, --scale, --layout),
 * --timeout reaching the ring (a rank that is still compiling its kernels when its peer's short timeout
 * runs out), K and V in other formats (--k-dtype q4_0 raw bytes, --v-dtype float16), --reproducible (one process's
 * bits), and the usage errors every rank agrees on. Built only when Meson found MPI. */
#include "cli_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *const one_thread[] = {"POCL_MAX_PTHREAD_COUNT=1", NULL}; /* the ranks share the cores */

/* `mpiexec -n NP clattn ring ARGS...` (NULL-terminated). */
static int ring_run(const char *np, ...)
{
    argl a = {{CLATTN_TEST_MPIEXEC, "-n", np, exe, "ring"}, 5};
    va_list ap;
    va_start(ap, np);
    add_v(&a, ap);
    va_end(ap);
    return run(a.v, one_thread, NULL);
}
#define RING(np, ...) ring_run(np, __VA_ARGS__, (const char *)NULL)

/* Rows [r0, r0 + n) of each of `slices` slices of a tensor of `rows` rows of `width`. */
static float *rows_of(const float *t, size_t slices, size_t rows, size_t width, size_t r0, size_t n)
{
    float *out = tu_falloc(slices * n * width);
    for (size_t s = 0; s < slices; s++)
        memcpy(out + s * n * width, t + (s * rows + r0) * width, n * width * sizeof *out);
    return out;
}

/* clattn ring: whole inputs gathered (zigzag, causal, GQA, log-sum-exps), sharded files in and out
 * (contiguous), each against the fp64 reference; and the usage errors every rank agrees on. */
START_TEST(test_ring_cli)
{
    enum { B = 1, H = 4, N = 2, L = 37, D = 16, DV = 8 };
    const size_t qs[4] = {B, H, L, D}, ks[4] = {B, N, L, D}, vs[4] = {B, N, L, DV}, os[4] = {B, H, L, DV};
    rng.state = 900;
    float *q = rand_floats(B * H * L * D, 1.0f), *k = rand_floats(B * N * L * D, 1.0f), *v = rand_floats(B * N * L * DV, 1.0f);
    clattn_masks m = CLATTN_MASKS_INIT;
    m.causal = CLATTN_CAUSAL_TOP_LEFT;
    const clattn_sdpa_desc d = sdpa_desc(B, H, N, L, L, D, DV, &m);
    double *ro = tu_dalloc(B * H * L * DV), *rl = tu_dalloc(B * H * L);
    ref_sdpa(&d, q, k, v, NULL, ro, NULL, rl);
    const char *qp = save_f32("q.npy", q, 4, qs), *kp = save_f32("k.npy", k, 4, ks), *vp = save_f32("v.npy", v, 4, vs);
    RING("2", "--q", qp, "--k", kp, "--v", vp, "--out", P("o.npy"), "--lse", P("l.npy"), "--gather", "--causal");
    expect_status(EXIT_OK);
    expect_in("stdout", R.out, "2 ranks, L 37, S 37, zigzag layout");
    expect_in("stdout", R.out, "rank 1:");
    expect_file_close("gathered out", P("o.npy"), 4, os, ro);
    expect_file_close("gathered lse", P("l.npy"), 3, os, rl);
    /* Sharded files: contiguous runs of 19 and 18 rows. */
    const size_t first = (L + 1) / 2, n[2] = {first, L - first}, r0[2] = {0, first};
    for (int r = 0; r < 2; r++) {
        save_f32(fmt("q.%d.npy", r), rows_of(q, B * H, L, D, r0[r], n[r]), 4, (size_t[]){B, H, n[r], D});
        save_f32(fmt("k.%d.npy", r), rows_of(k, B * N, L, D, r0[r], n[r]), 4, (size_t[]){B, N, n[r], D});
        save_f32(fmt("v.%d.npy", r), rows_of(v, B * N, L, DV, r0[r], n[r]), 4, (size_t[]){B, N, n[r], DV});
    }
    RING("2", "--q", P("q.{rank}.npy"), "--k", P("k.{rank}.npy"), "--v", P("v.{rank}.npy"), "--out",
         P("o.{rank}.npy"), "--lse", P("l.{rank}.npy"), "--layout", "contiguous", "--causal");
    expect_status(EXIT_OK);
    expect_in("stdout", R.out, "contiguous layout");
    for (int r = 0; r < 2; r++) {
        double *want = tu_dalloc(B * H * n[r] * DV), *want_l = tu_dalloc(B * H * n[r]);
        for (size_t s = 0; s < B * H; s++) {
            for (size_t e = 0; e < n[r] * DV; e++)
                want[s * n[r] * DV + e] = ro[(s * L + r0[r]) * DV + e];
            for (size_t e = 0; e < n[r]; e++)
                want_l[s * n[r] + e] = rl[s * L + r0[r] + e];
        }
        expect_file_close(fmt("rank %d's slice", r), P(fmt("o.%d.npy", r)), 4, (size_t[]){B, H, n[r], DV}, want);
        expect_file_close(fmt("rank %d's lse", r), P(fmt("l.%d.npy", r)), 3, (size_t[]){B, H, n[r]}, want_l);
    }
    /* Sharded files of other lengths than the shards (10 and 27 rows of 37), an output for one rank only,
     * more ranks than keys. */
    save_f32("bad.0.npy", rows_of(q, B * H, L, D, 0, 10), 4, (size_t[]){B, H, 10, D});
    save_f32("bad.1.npy", rows_of(q, B * H, L, D, 10, 27), 4, (size_t[]){B, H, 27, D});
    RING("2", "--q", P("bad.{rank}.npy"), "--k", kp, "--v", vp, "--out", P("o.{rank}.npy"));
    expect_status(EXIT_USAGE);
    expect_in("stderr", R.err, "its shard of 37 has");
    RING("2", "--q", qp, "--k", kp, "--v", vp, "--out", P("x.npy"));
    expect_status(EXIT_USAGE);
    expect_in("stderr", R.err, "give --gather");
    const size_t one[4] = {1, 1, 1, 4};
    const char *tiny = save_f32("tiny.npy", q, 4, one);
    RING("2", "--q", tiny, "--k", tiny, "--v", tiny, "--out", P("x.npy"), "--gather");
    expect_status(EXIT_USAGE);
    expect_in("stderr", R.err, "every rank needs at least one");
    ck_assert_msg(!exists(P("x.npy")), "a failed run wrote x.npy");
    /* A device rank 1 cannot open ("0:10"; rank 0 opens "0:00"): every rank stops, none hangs. */
    RING("2", "--q", qp, "--k", kp, "--v", vp, "--out", P("x.npy"), "--gather", "--device", "0:{rank}0");
    ck_assert_msg(R.status != EXIT_OK, "`%s` exited 0", R.cmd);
    expect_in("stderr", R.err, "matches no device");
    ck_assert_msg(!exists(P("x.npy")), "a failed run wrote x.npy");
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* The options against the reference                                                               */
/* ---------------------------------------------------------------------------------------------- */

typedef struct ring_spec {
    size_t B, H, N, L, S, D, Dv;
    bool kv_heads_flag; /* pass --kv-heads N */
    /* What the flags in extra ask for, for the reference: */
    float scale; /* 0: the default */
    clattn_causal causal;
    const size_t *key_lengths;
    const long long *offsets;
    const clattn_window *window;
    float softcap;
    const float *sinks, *alibi;
    const char *const *extra;
    uint64_t seed;
} ring_spec;

/* Random Q (B,H,L,D), K (B,N,S,D), V (B,N,S,Dv) through `mpiexec -n 2 clattn ring --gather`: the gathered
 * output and log-sum-exps against the reference given what the flags ask for. */
static void ring_check(const ring_spec *s)
{
    rng.state = s->seed;
    const size_t B = s->B, H = s->H, N = s->N, L = s->L, S = s->S, D = s->D, Dv = s->Dv;
    const float *q = rand_floats(B * H * L * D, 1.5f), *k = rand_floats(B * N * S * D, 1.5f);
    const float *v = rand_floats(B * N * S * Dv, 1.0f);
    argl a = {{CLATTN_TEST_MPIEXEC, "-n", "2", exe, "ring"}, 5};
    add(&a, "--q", save_f32("q.npy", q, 4, (size_t[]){B, H, L, D}), "--k", save_f32("k.npy", k, 4, (size_t[]){B, N, S, D}),
        "--v", save_f32("v.npy", v, 4, (size_t[]){B, N, S, Dv}), "--out", P("o.npy"), "--lse", P("l.npy"), "--gather",
        NULL);
    if (s->kv_heads_flag)
        add(&a, "--kv-heads", fmt("%zu", N), NULL);
    add_list(&a, s->extra);
    run(a.v, one_thread, NULL);
    expect_status(EXIT_OK);
    expect_in("stdout", R.out, fmt("2 ranks, L %zu, S %zu", L, S));

    const clattn_masks m = flag_masks(s->causal, s->key_lengths, s->offsets, s->window, false);
    clattn_sdpa_desc d = sdpa_desc(B, H, N, L, S, D, Dv, &m);
    d.scale = s->scale != 0.0f ? s->scale : CLATTN_SCALE_DEFAULT;
    d.softcap = s->softcap;
    d.sinks = s->sinks;
    d.alibi_slopes = s->alibi;
    double *ro = tu_dalloc(B * H * L * Dv), *rl = tu_dalloc(B * H * L);
    ref_sdpa(&d, q, k, v, NULL, ro, NULL, rl);
    expect_file_close("out", P("o.npy"), 4, (size_t[]){B, H, L, Dv}, ro);
    expect_file_close("lse", P("l.npy"), 3, (size_t[]){B, H, L}, rl);
}

/* --kv-heads (grouped-query: 4 query heads on 2 K/V heads) with --scale; K of other heads than
 * --kv-heads says is refused on every rank. */
START_TEST(test_ring_kv_heads_scale)
{
    const char *const scale[] = {"--scale", "0.3", NULL};
    ring_check(&(ring_spec){.B = 2, .H = 4, .N = 2, .L = 9, .S = 9, .D = 8, .Dv = 5, .kv_heads_flag = true,
                            .scale = 0.3f, .extra = scale, .seed = 910});
    RING("2", "--q", P("q.npy"), "--k", P("k.npy"), "--v", P("v.npy"), "--out", P("x.npy"), "--gather", "--kv-heads",
         "1");
    expect_status(EXIT_USAGE);
    expect_in("stderr", R.err, "--kv-heads 1, but K has 2 heads");
    ck_assert(!exists(P("x.npy")));
}
END_TEST

/* --softcap with a large --scale (so that the cap matters), --key-lengths and --causal-bottom-right on
 * L < S. */
START_TEST(test_ring_softcap_lengths_bottom_right)
{
    static const long long len[] = {12, 8};
    static const size_t len_z[] = {12, 8};
    const char *const extra[] = {"--softcap", "1.5", "--scale", "2", "--key-lengths", save_i64("len.npy", len, 2),
                                 "--causal-bottom-right", NULL};
    ring_check(&(ring_spec){.B = 2, .H = 3, .N = 3, .L = 7, .S = 12, .D = 4, .Dv = 4, .scale = 2.0f,
                            .softcap = 1.5f, .key_lengths = len_z, .causal = CLATTN_CAUSAL_BOTTOM_RIGHT,
                            .extra = extra, .seed = 920});
}
END_TEST

/* --window with --causal and per-batch --offsets ('<i4'); then --offset for every batch with --sinks and
 * --alibi auto. */
START_TEST(test_ring_window_offsets_sinks_alibi)
{
    static const long long off[] = {3, -1};
    static const clattn_window win = {3, 1};
    const char *const windowed[] = {"--window", "3,1", "--causal", "--offsets", save_i32("off.npy", off, 2), NULL};
    ring_check(&(ring_spec){.B = 2, .H = 2, .N = 1, .L = 10, .S = 10, .D = 8, .Dv = 3, .kv_heads_flag = true,
                            .causal = CLATTN_CAUSAL_TOP_LEFT, .offsets = off, .window = &win, .extra = windowed,
                            .seed = 930});
    const size_t H = 3;
    rng.state = 931;
    const float *sinks = rand_floats(H, 2.0f);
    static const long long two[] = {2};
    const char *const sunk[] = {"--sinks", save_f32("sinks.npy", sinks, 1, &H), "--alibi", "auto", "--offset", "2",
                                "--causal", NULL};
    ring_check(&(ring_spec){.B = 1, .H = H, .N = H, .L = 9, .S = 11, .D = 4, .Dv = 6, .sinks = sinks,
                            .alibi = alibi_auto(H), .offsets = two, .causal = CLATTN_CAUSAL_TOP_LEFT, .extra = sunk,
                            .seed = 932});
}
END_TEST

/* --alibi SLOPES.npy with the contiguous layout. */
START_TEST(test_ring_alibi_file)
{
    const size_t H = 2;
    rng.state = 940;
    const float *slopes = rand_floats(H, 0.8f);
    const char *const extra[] = {"--alibi", save_f32("slopes.npy", slopes, 1, &H), "--layout", "contiguous", NULL};
    ring_check(&(ring_spec){.B = 1, .H = H, .N = H, .L = 6, .S = 10, .D = 4, .Dv = 4, .alibi = slopes,
                            .extra = extra, .seed = 941});
}
END_TEST

/* --timeout reaches the ring: rank 1 starts with its driver's program caches empty or off (PoCL's folder,
 * NVIDIA's CUDA_CACHE_DISABLE, clattn's CLATTN_CACHE=0), so it is still compiling its kernels — the library
 * builds them on first use, after the ranks have met — long after rank 0, whose kernels are cached, waits
 * for it: 0.01 s is too long to wait, and the job ends with the timeout naming 0.01 s (the default of
 * 60 s would have waited and succeeded). Bad --timeout values are refused before MPI starts. */
START_TEST(test_ring_timeout)
{
    enum { B = 1, H = 2, L = 16, D = 8 };
    rng.state = 950;
    const size_t shape[4] = {B, H, L, D};
    const char *qp = save_f32("q.npy", rand_floats(B * H * L * D, 1.0f), 4, shape);
    /* Rank 0's kernels compiled and cached first (the default timeout). */
    RING("2", "--q", qp, "--k", qp, "--v", qp, "--out", P("o.npy"), "--gather", "--timeout", "60");
    expect_status(EXIT_OK);
    const char *cold = P("cold-pocl-cache");
    ck_assert(mkdir(cold, 0700) == 0);
    const char *const args[] = {"ring", "--q", qp, "--k", qp, "--v", qp, "--out", P("x.npy"), "--gather", "--timeout",
                                "0.01", NULL};
    argl a = {{CLATTN_TEST_MPIEXEC, "-n", "1", exe}, 4};
    add_list(&a, args);
    add(&a, ":", "-n", "1", "env", fmt("POCL_CACHE_DIR=%s", cold), "CUDA_CACHE_DISABLE=1", "CLATTN_CACHE=0", exe, NULL);
    add_list(&a, args);
    run(a.v, one_thread, NULL);
    ck_assert_msg(R.status != EXIT_OK, "`%s` exited 0: the 0.01 s timeout did not apply", R.cmd);
    expect_in("stderr", R.err, "CLATTN_ERROR_TIMEOUT");
    expect_in("stderr", R.err, "within 0.01 s");
    ck_assert_msg(!exists(P("x.npy")), "a failed run wrote x.npy");

    static const char *const bad[] = {"0", "-1", "abc", "nan"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        EXPECT(EXIT_USAGE, "ring", "--q", qp, "--k", qp, "--v", qp, "--out", P("x.npy"), "--gather", "--timeout",
               bad[i]);
        expect_in("stderr", R.err, "--timeout");
        ck_assert_msg(count_lines(R.err) == 1, "one line:\n%s", R.err);
    }
}
END_TEST

/* --k-dtype q4_0 with raw bytes ('|u1', random valid blocks: the scale 2^-5, any nibbles) and --v-dtype
 * float16 from a float file (values k/64, which half holds): the ring sends them as their bytes; against
 * the fp64 reference over the values the bytes hold. A float file for q4_0, and int8, are refused. */
START_TEST(test_ring_formats)
{
    enum { B = 1, H = 4, N = 2, L = 29, D = 64, DV = 32, BLOCKS = D / 32, ROW = BLOCKS * 18 };
    rng.state = 970;
    float *q = rand_floats(B * H * L * D, 1.0f), *k = tu_falloc(B * N * L * D), *v = rand_floats(B * N * L * DV, 1.0f);
    unsigned char *kb = (unsigned char *)tu_falloc(B * N * L * ROW / 4 + 1);
    for (size_t r = 0; r < B * N * L; r++)
        for (size_t blk = 0; blk < BLOCKS; blk++) {
            unsigned char *b = kb + r * ROW + blk * 18;
            b[0] = 0x00, b[1] = 0x28; /* fp16 2^-5, little-endian */
            for (size_t i = 0; i < 16; i++) {
                b[2 + i] = (unsigned char)((r * 7 + blk * 5 + i * 13 + (tu_rng_next(&rng) & 255)) & 255);
                k[r * D + blk * 32 + i] = (float)((b[2 + i] & 15) - 8) / 32.0f; /* low nibbles: values 0–15 */
                k[r * D + blk * 32 + i + 16] = (float)((b[2 + i] >> 4) - 8) / 32.0f;
            }
        }
    for (size_t i = 0; i < B * N * L * DV; i++)
        v[i] = roundf(v[i] * 64.0f) / 64.0f;
    clattn_masks m = CLATTN_MASKS_INIT;
    m.causal = CLATTN_CAUSAL_TOP_LEFT;
    const clattn_sdpa_desc d = sdpa_desc(B, H, N, L, L, D, DV, &m);
    double *ro = tu_dalloc(B * H * L * DV);
    ref_sdpa(&d, q, k, v, NULL, ro, NULL, NULL);
    const size_t qs[4] = {B, H, L, D}, ks[4] = {B, N, L, ROW}, vs[4] = {B, N, L, DV}, os[4] = {B, H, L, DV};
    const char *qp = save_f32("q.npy", q, 4, qs), *vp = save_f32("v.npy", v, 4, vs);
    const char *kp = save_raw("k.npy", 1, "|u1", "False", shape_text(4, ks), kb, product(4, ks));
    RING("2", "--q", qp, "--k", kp, "--v", vp, "--k-dtype", "q4_0", "--v-dtype", "float16", "--out", P("o.npy"),
         "--gather", "--causal");
    expect_status(EXIT_OK);
    expect_file_close("q4_0 K, float16 V", P("o.npy"), 4, os, ro);
    RING("2", "--q", qp, "--k", vp, "--v", vp, "--k-dtype", "q4_0", "--out", P("x.npy"), "--gather");
    expect_status(EXIT_USAGE);
    expect_in("stderr", R.err, "takes the raw bytes");
    EXPECT(EXIT_USAGE, "ring", "--q", qp, "--k", kp, "--v", vp, "--k-dtype", "int8", "--out", P("x.npy"), "--gather");
    expect_in("stderr", R.err, "row scales");
    ck_assert(!exists(P("x.npy")));
}
END_TEST

/* Flags ring attention does not take, refused (exit 2, one line naming them) before MPI starts. */
START_TEST(test_ring_usage_errors)
{
    rng.state = 960;
    const char *qp = f32_file("q.npy", 4, (size_t[]){1, 2, 4, 4});
    EXPECT(EXIT_USAGE, "ring", "--q", qp, "--k", qp, "--v", qp, "--out", P("x.npy"), "--gather", "--mask", qp);
    expect_in("stderr", R.err, "takes no --mask");
    EXPECT(EXIT_USAGE, "ring", "--q", qp, "--k", qp, "--v", qp, "--out", P("x.npy"), "--gather", "--scores",
           fmt("qk:%s", P("s.npy")));
    expect_in("stderr", R.err, "--scores");
    EXPECT(EXIT_USAGE, "ring", "--q", qp, "--k", qp, "--v", qp, "--out", P("x.npy"), "--gather", "--layout", "diagonal");
    expect_in("stderr", R.err, "--layout");
    EXPECT(EXIT_USAGE, "ring", "--q", qp, "--k", qp, "--v", qp, "--out", P("x.npy"), "--gather", "--softcap", "-1");
    expect_in("stderr", R.err, "--softcap");
    EXPECT(EXIT_USAGE, "ring", "--q", qp, "--k", qp, "--v", qp, "--out", P("x.npy"), "--gather", "--scale", "fast");
    expect_in("stderr", R.err, "fast");
    EXPECT(EXIT_USAGE, "ring", "--q", qp, "--k", qp, "--v", qp, "--gather");
    expect_in("stderr", R.err, "--out");
    ck_assert_str_eq(list_dir(dir), "q.npy\n");
}
END_TEST

/* --reproducible: the gathered output and log-sum-exps, bit for bit, those of `clattn sdpa --reproducible` in one
 * process (causal zigzag, GQA, sinks). */
START_TEST(test_ring_reproducible)
{
    enum { B = 1, H = 4, N = 2, L = 29, D = 16 };
    const size_t qs[4] = {B, H, L, D}, ks[4] = {B, N, L, D}, os[4] = {B, H, L, D}, ls[3] = {B, H, L};
    rng.state = 940;
    const char *qp = save_f32("q.npy", rand_floats(B * H * L * D, 1.5f), 4, qs);
    const char *kp = save_f32("k.npy", rand_floats(B * N * L * D, 1.5f), 4, ks);
    const char *vp = save_f32("v.npy", rand_floats(B * N * L * D, 1.0f), 4, ks);
    const char *sp = save_f32("sinks.npy", (const float[]){0.5f, -1.0f, 2.0f, 0.0f}, 1, (size_t[]){H});
    RING("2", "--q", qp, "--k", kp, "--v", vp, "--out", P("o.npy"), "--lse", P("l.npy"), "--gather", "--causal",
         "--kv-heads", "2", "--sinks", sp, "--reproducible");
    expect_status(EXIT_OK);
    CLATTN("sdpa", "--q", qp, "--k", kp, "--v", vp, "--out", P("o1.npy"), "--lse", P("l1.npy"), "--causal",
           "--kv-heads", "2", "--sinks", sp, "--reproducible");
    expect_status(EXIT_OK);
    const float *o = load_f32(P("o.npy"), 4, os), *o1 = load_f32(P("o1.npy"), 4, os);
    const float *l = load_f32(P("l.npy"), 3, ls), *l1 = load_f32(P("l1.npy"), 3, ls);
    ck_assert_msg(memcmp(o, o1, sizeof(float) * B * H * L * D) == 0, "ring --reproducible: out differs from sdpa's");
    ck_assert_msg(memcmp(l, l1, sizeof(float) * B * H * L) == 0, "ring --reproducible: lse differs from sdpa's");
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */

static Suite *ring_suite(void)
{
    Suite *s = suite_create("clattn cli ring");
    TCase *tc = cli_tcase("ring");
    tcase_add_test(tc, test_ring_cli);
    tcase_add_test(tc, test_ring_usage_errors);
    suite_add_tcase(s, tc);
    tc = cli_tcase("ring-options");
    tcase_add_test(tc, test_ring_kv_heads_scale);
    tcase_add_test(tc, test_ring_softcap_lengths_bottom_right);
    tcase_add_test(tc, test_ring_window_offsets_sinks_alibi);
    tcase_add_test(tc, test_ring_alibi_file);
    tcase_add_test(tc, test_ring_formats);
    tcase_add_test(tc, test_ring_timeout);
    tcase_add_test(tc, test_ring_reproducible);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return cli_main("test_cli_ring", ring_suite, 120); }
