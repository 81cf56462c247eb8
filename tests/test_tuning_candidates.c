/*
 * Every candidate of the fused, decode and staged families, of the device's own class and of class gpu
 * (forced with "class=gpu": the GPU shapes must be right on any device), run through options.tuning on one
 * odd shape per family against the fp64 reference, the one program of the family that ran built with the
 * candidate's values (its -D options as the OpenCL runtime reports them, against values completed here);
 * every GEMM candidate of the device's class likewise through clattn_projection (the profile shows the GEMM
 * asked for ran). test_tuning's part 4 (tuning_test.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "tuning_test.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------- */
/* 4. Every candidate against the fp64 reference                                                    */
/* ---------------------------------------------------------------------------------------------- */

/* One candidate on one device: made at suite-building time from the tables. */
typedef struct candidate_case {
    size_t dev;
    tuning_family family;
    device_class cls;
    unsigned index;
} candidate_case;

#define MAX_CANDIDATE_CASES (TU_MAX_DEVICES * 128)
static candidate_case candidate_cases[MAX_CANDIDATE_CASES];
static size_t n_candidate_cases;

/* The launches of kernels `a` and `b` (their profile entries) since the profile was last read. */
static void launches_of(clattn_context *ctx, const char *a, unsigned long long *na, const char *b,
                        unsigned long long *nb)
{
    clattn_profile_entry e[CLATTN_PROFILE_MAX_ENTRIES];
    size_t n = 0;
    clattn_status st = clattn_profile_read(ctx, e, CLATTN_PROFILE_MAX_ENTRIES, &n);
    TU_ASSERT_OK(st, ctx, "clattn_profile_read");
    *na = *nb = 0;
    for (size_t i = 0; i < n; i++) {
        *na += strcmp(e[i].name, a) == 0 ? e[i].launches : 0;
        *nb += strcmp(e[i].name, b) == 0 ? e[i].launches : 0;
    }
}

/* Call `d` on uniform inputs (seeds seed+1..3) and check out and lse against the fp64 reference, with
 * `kernel` the one that ran (its profile entry); the launches of kernel `also` into *also_launches. */
static void check_sdpa_run(clattn_context *ctx, const clattn_sdpa_desc *d, const char *kernel, unsigned seed,
                           size_t nq, size_t nk, size_t nl, const char *also, unsigned long long *also_launches)
{
    float *q = tu_falloc(nq), *k = tu_falloc(nk), *v = tu_falloc(nk);
    tu_fill_uniform(q, nq, 1.0f, seed + 1);
    tu_fill_uniform(k, nk, 1.0f, seed + 2);
    tu_fill_uniform(v, nk, 1.0f, seed + 3);
    float *o = tu_host_alloc(nq, NULL), *l = tu_host_alloc(nl, NULL);
    clattn_status st = clattn_sdpa_host(ctx, d, q, k, v, NULL, o, NULL, l);
    TU_ASSERT_OK(st, ctx, "clattn_sdpa_host");
    tu_host_check_guard(o, nq, "out");
    tu_host_check_guard(l, nl, "lse");
    unsigned long long launches;
    launches_of(ctx, kernel, &launches, also, also_launches);
    ck_assert_msg(launches == 1, "%s: %s ran %llu times", tu_label(), kernel, launches);
    double *ro = tu_dalloc(nq), *rl = tu_dalloc(nl);
    ref_sdpa(d, q, k, v, NULL, ro, NULL, rl);
    check_close_named("out", o, ro, nq, NULL);
    check_close_named("lse", l, rl, nl, NULL);
}

/* The fused kernel: B 1, H 3 over one K/V head (111 packed rows), L 37, S 45, D 24, bottom-right causal;
 * out and lse (check_fused_build: what it was built with). */
static void check_fused(clattn_context *ctx)
{
    enum { B = 1, H = 3, KVH = 1, L = 37, S = 45, D = 24 };
    clattn_sdpa_desc d = tu_sdpa_desc(B, H, L, S, D, 0);
    d.kv_heads = KVH;
    d.algorithm = CLATTN_ALGORITHM_FUSED;
    clattn_masks masks = CLATTN_MASKS_INIT;
    masks.causal = BR;
    d.masks = &masks;
    const size_t nq = B * H * L * D, nk = B * KVH * S * D, nl = B * H * L;
    unsigned long long unused;
    check_sdpa_run(ctx, &d, "fused attention", 100, nq, nk, nl, "", &unused);
}

/* The decode kernels: B 2, H 6 over 3 K/V heads, L 3, S 700, D 40, a cache of 700 and 333 keys with the
 * queries at its end (query offsets len − L, top-left causal); out and lse. Returns the launches of the
 * combine pass (check_decode_build: what was built, and the splits). */
static unsigned long long check_decode(clattn_context *ctx)
{
    enum { B = 2, H = 6, KVH = 3, L = 3, S = 700, D = 40 };
    clattn_sdpa_desc d = tu_sdpa_desc(B, H, L, S, D, 0);
    d.kv_heads = KVH;
    d.algorithm = CLATTN_ALGORITHM_DECODE;
    static const size_t lengths[B] = {700, 333};
    static const long long offsets[B] = {700 - L, 333 - L};
    clattn_masks masks = CLATTN_MASKS_INIT;
    masks.causal = TL;
    masks.key_lengths = lengths;
    masks.query_offsets = offsets;
    d.masks = &masks;
    const size_t nq = B * H * L * D, nk = B * KVH * S * D, nl = B * H * L;
    unsigned long long combines;
    check_sdpa_run(ctx, &d, "decode partial", 200, nq, nk, nl, "decode combine", &combines);
    return combines;
}

/* The staged kernels: B 1, H 3, L 29, S 53, D 24, an additive (L,S) mask with −inf entries, causal;
 * out, weights and lse. */
static void check_staged(clattn_context *ctx)
{
    enum { B = 1, H = 3, L = 29, S = 53, D = 24 };
    clattn_sdpa_desc d = tu_sdpa_desc(B, H, L, S, D, 0);
    d.algorithm = CLATTN_ALGORITHM_STAGED;
    clattn_masks masks = CLATTN_MASKS_INIT;
    masks.causal = BR;
    masks.additive = MLS;
    d.masks = &masks;
    size_t nmask = 0;
    const float *mask = tu_make_mask(MLS, B, H, L, S, TU_MASKF_INF, 301, &nmask);
    const size_t nq = B * H * L * D, nk = B * H * S * D, nl = B * H * L, nw = B * H * L * S;
    float *q = tu_falloc(nq), *k = tu_falloc(nk), *v = tu_falloc(nk);
    tu_fill_uniform(q, nq, 1.0f, 302);
    tu_fill_uniform(k, nk, 1.0f, 303);
    tu_fill_uniform(v, nk, 1.0f, 304);
    float *o = tu_host_alloc(nq, NULL), *w = tu_host_alloc(nw, NULL), *l = tu_host_alloc(nl, NULL);
    clattn_status st = clattn_sdpa_host(ctx, &d, q, k, v, mask, o, w, l);
    TU_ASSERT_OK(st, ctx, "clattn_sdpa_host(STAGED)");
    tu_host_check_guard(o, nq, "out");
    tu_host_check_guard(w, nw, "weights");
    tu_host_check_guard(l, nl, "lse");
    ck_assert_msg(tu_launches_of(ctx, "softmax") >= 1, "%s: the staged path did not run", tu_label());
    double *ro = tu_dalloc(nq), *rw = tu_dalloc(nw), *rl = tu_dalloc(nl);
    ref_sdpa(&d, q, k, v, mask, ro, rw, rl);
    check_close_named("out", o, ro, nq, NULL);
    check_close_named("weights", w, rw, nw, NULL);
    check_close_named("lse", l, rl, nl, NULL);
}

/* The projection GEMM: 29 × 37 · 37 × 71 + bias; the profile must show the GEMM asked for. */
static void check_gemm(clattn_context *ctx, const tuning_values *v)
{
    enum { ROWS = 29, IN = 37, OUT = 71 };
    float *x = tu_falloc(ROWS * IN), *w = tu_falloc(IN * OUT), *b = tu_falloc(OUT);
    tu_fill_uniform(x, ROWS * IN, 1.0f, 401);
    tu_fill_uniform(w, IN * OUT, 1.0f, 402);
    tu_fill_uniform(b, OUT, 1.0f, 403);
    double *ref = tu_dalloc(ROWS * OUT);
    ref_matmul(ROWS, IN, OUT, x, w, b, ref);
    cl_mem mx = tu_dev_alloc(ctx, ROWS * IN, x), mw = tu_dev_alloc(ctx, IN * OUT, w), mb = tu_dev_alloc(ctx, OUT, b);
    cl_mem my = tu_dev_alloc(ctx, ROWS * OUT, NULL);
    clattn_status st = clattn_projection(ctx, ROWS, IN, OUT, mx, mw, mb, my);
    TU_ASSERT_OK(st, ctx, "clattn_projection");
    tu_finish(ctx);
    float *y = tu_dev_read_checked(ctx, my, ROWS * OUT, "y");
    check_close_named("y", y, ref, ROWS * OUT, NULL);
    /* CLBlast cannot launch where work groups are smaller than 64: clattn's kernel serves, warned. */
    const bool blas = v->v[0] == TUNING_GEMM_CLBLAST && ctx->caps.max_work_group >= 64;
    const char *kind = blas ? "projection GEMM (CLBlast)" : "projection GEMM (clattn)";
    ck_assert_msg(tu_launches_of(ctx, kind) >= 1, "%s: no \"%s\" ran", tu_label(), kind);
}

/* ---- what the kernels were built with ---------------------------------------------------------- */

/* The candidate's values as the kernels must get them, completed here from the device's own numbers
 * rather than by the library's tuning_complete: a VEC 0 is the device's native float width (the largest
 * power of two within it, at most 16); the fused row layout 0 is the rows in the lanes (2) where VEC > 1,
 * else along d (1); decode's "rows in lanes from" 0 is VEC; staged's blocked score vectors 0 are 3 with
 * VEC 16, else 2. Every other value is the candidate's own. */
static tuning_values complete_here(const device_caps *caps, tuning_family f, const tuning_values *raw)
{
    tuning_values v = *raw;
    unsigned simd = 1;
    while (simd < 16 && simd * 2 <= caps->native_float_width)
        simd *= 2;
    const unsigned vec_at = f == TUNING_FUSED ? 3 : 4; /* (fused, decode, staged) */
    if (v.v[vec_at] == 0)
        v.v[vec_at] = simd;
    const unsigned vec = v.v[vec_at];
    if (f == TUNING_FUSED && v.v[4] == 0)
        v.v[4] = vec > 1 ? 2 : 1;
    if (f == TUNING_DECODE && v.v[6] == 0)
        v.v[6] = vec;
    if (f == TUNING_STAGED && v.v[3] == 0)
        v.v[3] = vec >= 16 ? 3 : 2;
    return v;
}

/* The one program of `family` the context's cache holds: its build options (as the runtime reports
 * them) into opts, its build returned. Fails the test where there is none or more than one. */
static const family_build *built_program(clattn_context *ctx, const kernel_family *family, char *opts, size_t size)
{
    const family_build *fb = NULL;
    clattn_status st = program_cache_options(ctx, family, 0, opts, size, &fb);
    TU_ASSERT_OK(st, ctx, "program_cache_options");
    ck_assert_msg(fb != NULL && opts[0] != '\0', "%s: the %s program has no build options", tu_label(), family->name);
    char more[8];
    st = program_cache_options(ctx, family, 1, more, sizeof more, NULL);
    ck_assert_msg(st == CLATTN_ERROR_INVALID_VALUE, "%s: two %s programs built (\"%s\" and \"%s...\"): %s", tu_label(),
                  family->name, opts, more, clattn_status_string(st));
    return fb;
}

/* No program of `family` in the context's cache. */
static void assert_not_built(clattn_context *ctx, const kernel_family *family)
{
    char opts[512];
    clattn_status st = program_cache_options(ctx, family, 0, opts, sizeof opts, NULL);
    ck_assert_msg(st == CLATTN_ERROR_INVALID_VALUE, "%s: a %s program was built (\"%s\"): %s", tu_label(),
                  family->name, opts, clattn_status_string(st));
}

/* The value of -D<name>=, which the options must hold exactly once (a word of its own). */
static unsigned option_value(const char *opts, const char *name)
{
    char key[32];
    snprintf(key, sizeof key, "-D%s=", name);
    const size_t klen = strlen(key);
    const char *found = NULL;
    unsigned times = 0;
    for (const char *at = strstr(opts, key); at; at = strstr(at + 1, key))
        if (at == opts || at[-1] == ' ') {
            found = at;
            times++;
        }
    ck_assert_msg(times == 1, "%s: -D%s appears %u times in the build options \"%s\"", tu_label(), name, times, opts);
    char *end = NULL;
    const unsigned long v = strtoul(found + klen, &end, 10);
    ck_assert_msg(end != found + klen && (*end == ' ' || *end == '\0') && v <= 1u << 20,
                  "%s: -D%s is no number in the build options \"%s\"", tu_label(), name, opts);
    return (unsigned)v;
}

static void expect_option(const char *opts, const char *name, unsigned want)
{
    const unsigned got = option_value(opts, name);
    ck_assert_msg(got == want, "%s: built with -D%s=%u, expected %u (build options \"%s\")", tu_label(), name, got,
                  want, opts);
}

/* The work-group size of a family with a group define: the candidate's `asked`, halved while above the
 * device's largest work-group (fused.c and decode.c's legitimate clamp), which the test computes from the
 * device here; smaller only where the built kernel cannot launch that many (program.c halves it then), so
 * on a device whose kernels launch the candidate's groups (PoCL: 4096) exactly the candidate's. */
static void expect_group(clattn_context *ctx, const char *opts, const char *define, const family_build *fb,
                         unsigned asked)
{
    unsigned want = asked;
    while (want > 1 && want > ctx->caps.max_work_group)
        want /= 2;
    const unsigned got = option_value(opts, define);
    ck_assert_msg(fb->group == got, "%s: launched with groups of %u, built for %u (\"%s\")", tu_label(), fb->group,
                  got, opts);
    if (got == want)
        return;
    size_t limit = 0;
    cl_int err = clGetKernelWorkGroupInfo(fb->kernels[0], ctx->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof limit,
                                          &limit, NULL);
    ck_assert_msg(err == CL_SUCCESS, "%s: clGetKernelWorkGroupInfo: %d", tu_label(), (int)err);
    ck_assert_msg(got > 0 && got < want && want % got == 0 && ((want / got) & (want / got - 1)) == 0 && got <= limit &&
                      limit < want,
                  "%s: built with -D%s=%u where the candidate asks %u (%u on this device) and the kernel launches "
                  "up to %zu (\"%s\")",
                  tu_label(), define, got, asked, want, limit, opts);
}

/* The fused kernel of check_fused's shape (D 24: head sizes padded to 32) built with candidate v: groups
 * of M work-items, tiles of N keys, R rows a work-item, VEC; rows in the lanes (flash_lanes.cl, R vectors
 * of VEC rows: -DROWS=R·VEC, -DLANES=1) where the layout is 2, VEC > 1 and N a multiple of 8, else along
 * d; KV 2 key vectors a step where the tile holds two. Keys per tile shrink only where a tile's K and V
 * rows outrun local memory: N ≤ 64 keys of 32 + 32 floats is 16 KiB, within the 32 KiB OpenCL's full
 * profile guarantees (the premise asserted). */
static void check_fused_build(clattn_context *ctx, const tuning_values *v)
{
    enum { DK = 32, DV = 32 };
    const unsigned m = v->v[0], n = v->v[1], rows = v->v[2], vec = v->v[3];
    ck_assert_msg(ctx->caps.local_mem >= 32768 && n <= 64 && n % vec == 0,
                  "%s: the test's premise (no tile shrinks: 32 KiB of local memory, at most 64 keys a tile, whole "
                  "vectors) does not hold: %llu bytes, %u keys, VEC %u",
                  tu_label(), (unsigned long long)ctx->caps.local_mem, n, vec);
    const bool lanes = v->v[4] == 2 && vec > 1 && n % 8 == 0;
    const kernel_family *fam = lanes ? &family_fused_lanes : &family_fused;
    char opts[1024];
    const family_build *fb = built_program(ctx, fam, opts, sizeof opts);
    assert_not_built(ctx, lanes ? &family_fused : &family_fused_lanes);
    expect_group(ctx, opts, "BLOCK_M", fb, m);
    expect_option(opts, "BLOCK_N", n);
    expect_option(opts, "VEC", vec);
    expect_option(opts, "KV", vec > 1 && n % (2 * vec) == 0 ? 2 : 1);
    expect_option(opts, "ROWS", lanes ? rows * vec : rows);
    expect_option(opts, "DK", DK);
    expect_option(opts, "DV", DV);
    if (lanes)
        expect_option(opts, "LANES", 1);
    else
        ck_assert_msg(strstr(opts, "-DLANES=") == NULL, "%s: rows along d built with LANES (\"%s\")", tu_label(),
                      opts);
}

/* The decode kernels of check_decode's shape (D 40: head sizes padded to 48; 2 query heads a K/V head ×
 * L 3 = 6 packed rows; keys up to 700) built with candidate v: R_MAX rows a group, TILE keys a tile, WG
 * work-items (STAGE: the tiles staged in local memory where WG > 1), VEC, KQ = RB keys (rows) a step; the
 * scores with the rows in the lanes (ROWS_T) in place with VEC ≥ 4, tiles of whole steps of 8 and at least
 * `rows in lanes from` rows a group (min(6, R_MAX)); PREFETCH 0 where staged, else PoCL's Clang builtin (2)
 * or OpenCL C's (1), or none (0: the fallback where a compiler refuses it). Tiles and rows shrink only
 * where local memory cannot hold them: R_MAX rows (padded to a multiple of VEC ≤ 16) × (48 + 2·TILE) +
 * TILE × 96 floats, 19 KiB for R_MAX ≤ 16 and TILE ≤ 32, within the 32 KiB of OpenCL's full profile (the
 * premise asserted, with the padding bounded by 16). The splits per compute unit (values[0]) are no build
 * option: whether the combine pass ran shows them (decode.c's plan_splits: ⌈splits·compute units / groups⌉
 * splits of the 700 keys, at most 700 / 256 = 2, the outputs' copies far within an allocation). */
static void check_decode_build(clattn_context *ctx, const tuning_values *v, unsigned long long combines)
{
    enum { DK = 48, DV = 48, PACKED_ROWS = 6, KEYS = 700, GROUPS_PER_ROW_GROUP = 2 * 3 };
    const unsigned r_max = v->v[1], tile = v->v[2], wg = v->v[3], vec = v->v[4], kq = v->v[5];
    const unsigned long long r_pad = (r_max + 15) / 16 * 16;
    const unsigned long long most_local = 4 * (r_pad * (DK + 2ull * tile) + (unsigned long long)tile * (DK + DV));
    ck_assert_msg(ctx->caps.local_mem >= most_local,
                  "%s: the test's premise (no tile or row count shrinks) does not hold: %llu bytes of local memory, "
                  "up to %llu needed",
                  tu_label(), (unsigned long long)ctx->caps.local_mem, most_local);
    char opts[1024];
    const family_build *fb = built_program(ctx, &family_decode, opts, sizeof opts);
    const bool stage = wg > 1;
    const unsigned group_rows = PACKED_ROWS < r_max ? PACKED_ROWS : r_max;
    expect_group(ctx, opts, "WG", fb, wg);
    expect_option(opts, "DK", DK);
    expect_option(opts, "DV", DV);
    expect_option(opts, "VEC", vec);
    expect_option(opts, "KQ", kq);
    expect_option(opts, "RB", kq);
    expect_option(opts, "TILE", tile);
    expect_option(opts, "R_MAX", r_max);
    expect_option(opts, "STAGE", stage);
    expect_option(opts, "ROWS_T", !stage && vec >= 4 && tile % 8 == 0 && group_rows >= v->v[6]);
    const unsigned prefetch = option_value(opts, "PREFETCH");
    const unsigned mode = strstr(ctx->caps.platform, "Portable Computing Language") ? 2 : 1;
    ck_assert_msg(stage ? prefetch == 0 : prefetch == mode || prefetch == 0,
                  "%s: built with -DPREFETCH=%u (\"%s\")", tu_label(), prefetch, opts);
    /* the splits */
    const unsigned long long units = ctx->caps.compute_units ? ctx->caps.compute_units : 1;
    const unsigned long long groups = GROUPS_PER_ROW_GROUP * ((PACKED_ROWS + r_max - 1) / r_max);
    unsigned long long splits = (v->v[0] * units + groups - 1) / groups;
    if (splits > KEYS / 256)
        splits = KEYS / 256;
    ck_assert_msg(combines == (splits > 1 ? 1u : 0u),
                  "%s: %llu splits expected (%llu compute units), the combine pass ran %llu times", tu_label(), splits,
                  units, combines);
}

/* The staged kernels built with candidate v: KEYS scores a work-item, CHUNKS vectors of outputs, VEC;
 * the blocked score kernel's SR rows × SV vectors where VEC > 1, else 0 × 0 (none). No value is clamped. */
static void check_staged_build(clattn_context *ctx, const tuning_values *v)
{
    const unsigned vec = v->v[4];
    char opts[1024];
    built_program(ctx, &family_staged, opts, sizeof opts);
    expect_option(opts, "KEYS", v->v[0]);
    expect_option(opts, "CHUNKS", v->v[1]);
    expect_option(opts, "SR", vec > 1 ? v->v[2] : 0);
    expect_option(opts, "SV", vec > 1 ? v->v[3] : 0);
    expect_option(opts, "VEC", vec);
}

START_TEST(test_candidates)
{
    const candidate_case *c = &candidate_cases[_i];
    const tuning_family f = c->family;
    tuning_options forced;
    memset(&forced, 0, sizeof forced);
    forced.device_class = (int)c->cls;
    unsigned n = 0;
    const tuning_values *cand = tuning_candidates(&tu_ctx[c->dev]->caps, &forced, f, &n);
    ck_assert(c->index < n);
    char spelled[64], tuning[128];
    tuning_format(f, &cand[c->index], spelled, sizeof spelled);
    snprintf(tuning, sizeof tuning, "class=%s,%s=%s", device_class_name(c->cls), tuning_tables[f].name, spelled);
    tu_set_label("%s candidate %u of class %s (options.tuning \"%s\") on %s", tuning_tables[f].name, c->index,
                 device_class_name(c->cls), tuning, tu_dev_spec[c->dev]);
    clattn_context *ctx = context_with(c->dev, tuning, "", "", NULL);
    /* what runs is the candidate */
    const tuning_values got = lookup_from(ctx, f, TUNING_FROM_OPTIONS);
    const tuning_values want = completed(&ctx->caps, &ctx->tuning, f, &cand[c->index]);
    assert_values("the context's lookup", f, &got, &want);
    /* and is the candidate as completed here, which is what the kernels must be built with */
    tuning_values here = want;
    if (f != TUNING_GEMM) {
        here = complete_here(&ctx->caps, f, &cand[c->index]);
        assert_values("the context's lookup against the candidate completed by the test", f, &got, &here);
    }
    switch (f) {
    case TUNING_FUSED:
        check_fused(ctx);
        check_fused_build(ctx, &here);
        break;
    case TUNING_DECODE:
        check_decode_build(ctx, &here, check_decode(ctx));
        break;
    case TUNING_STAGED:
        check_staged(ctx);
        check_staged_build(ctx, &here);
        break;
    default: check_gemm(ctx, &want); break;
    }
    clattn_context_free(ctx);
}
END_TEST

static void add_candidate_cases(void)
{
    static const tuning_family families[] = {TUNING_FUSED, TUNING_DECODE, TUNING_STAGED, TUNING_GEMM};
    for (size_t dev = 0; dev < tu_ndev; dev++)
        for (size_t fi = 0; fi < sizeof families / sizeof families[0]; fi++) {
            device_class classes[2];
            /* the GEMM's candidates of the device's own class only */
            const size_t nc = families[fi] == TUNING_GEMM ? 1 : classes_of(dev, classes);
            classes[0] = device_class_of(&tu_ctx[dev]->caps);
            for (size_t ci = 0; ci < nc; ci++) {
                tuning_options forced;
                memset(&forced, 0, sizeof forced);
                forced.device_class = (int)classes[ci];
                unsigned n = 0;
                tuning_candidates(&tu_ctx[dev]->caps, &forced, families[fi], &n);
                for (unsigned i = 0; i < n && n_candidate_cases < MAX_CANDIDATE_CASES; i++)
                    candidate_cases[n_candidate_cases++] = (candidate_case){dev, families[fi], classes[ci], i};
            }
        }
}

void tuning_add_candidate_cases(Suite *s)
{
    add_candidate_cases();
    tu_add_loop(s, "candidates", test_candidates, n_candidate_cases);
}
