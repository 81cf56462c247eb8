/* End-to-end tests of the clattn tool for what ONNX's Attention operator says and the tool used to refuse:
 *
 *  - --mask narrower than the keys (ONNX pads attn_mask with −inf / False): `clattn sdpa` with a float
 *    (B,H,L,C) mask, a boolean (L,C) one and a (B,1,L,C) one under --causal; with a past (the keys are
 *    past + new, the mask narrower than both together; causal at --offset P, as ONNX aligns it); `clattn
 *    mha` with an (L,C) mask. Outputs and weights against the fp64 reference given the mask padded with
 *    −inf by this test; a mask wider than the keys is a usage error that says so.
 *  - --softmax-double (ONNX's softmax_precision = DOUBLE), for sdpa, sdpa with a past and mha: on a
 *    default device with cl_khr_fp64, the weights and lse are the fp64 softmax of the float32 scores the
 *    tool's --scores masked:FILE gives, rounded once (within half a unit in the last place: the float32
 *    softmax is many units off on these rows), the output the reference P·V over those weights; on a
 *    device without it, exit status 1 and a message naming cl_khr_fp64.
 *
 * Like the 'cli' test, this process only spawns the tool (CLATTN_EXE) and never calls OpenCL. Exit
 * status 77 (meson's SKIP) when `clattn devices` finds no OpenCL platform. */
#define _POSIX_C_SOURCE 200809L /* posix_spawn */

#define TU_NO_OPENCL
#include "test_util.h"
#include "npy.h"
#include "reference.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2, EXIT_NO_PLATFORM = 3 };

static const char *exe, *root;
static char dir[1100];
static unsigned case_no;
static bool default_fp64; /* the default device lists cl_khr_fp64 (`clattn devices --json`) */

static struct {
    int status;
    char *out, *err;
    char cmd[4096];
} R;

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    const int n = vsnprintf(NULL, 0, f, ap);
    va_end(ap);
    char *s = tu_track_malloc((size_t)n + 1);
    va_start(ap, f);
    vsnprintf(s, (size_t)n + 1, f, ap);
    va_end(ap);
    return s;
}

static const char *P(const char *name) { return fmt("%s/%s", dir, name); }

static void case_setup(void)
{
    snprintf(dir, sizeof dir, "%s/case%03u", root, ++case_no);
    ck_assert_msg(mkdir(dir, 0700) == 0, "mkdir %s: %s", dir, strerror(errno));
}

/* Runs argv (argv[0] = the tool), stdout and stderr captured into R; 0, or -1 with why. */
static int spawn_capture(const char *const *argv, char *why, size_t why_size)
{
    char out_path[600], err_path[600]; /* (not fmt's tracked memory: main() runs this outside any test) */
    snprintf(out_path, sizeof out_path, "%s/.stdout", root);
    snprintf(err_path, sizeof err_path, "%s/.stderr", root);
    size_t used = 0;
    for (size_t i = 0; argv[i] && used + 1 < sizeof R.cmd; i++)
        used += (size_t)snprintf(R.cmd + used, sizeof R.cmd - used, i ? " %s" : "%s", i ? argv[i] : "clattn");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    pid_t pid;
    const int rc = posix_spawn(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        snprintf(why, why_size, "cannot start %s: %s", argv[0], strerror(rc));
        return -1;
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) {
            snprintf(why, why_size, "waitpid: %s", strerror(errno));
            return -1;
        }
    R.status = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 255;
    free(R.out);
    free(R.err);
    R.out = tu_read_file(out_path, NULL);
    R.err = tu_read_file(err_path, NULL);
    if (!R.out || !R.err) {
        snprintf(why, why_size, "cannot read the captured output of `%.900s`", R.cmd);
        return -1;
    }
    return 0;
}

/* An argument list: the tool, then what add() appends. */
typedef struct argl {
    const char *v[96];
    size_t n;
} argl;

static void add(argl *a, ...)
{
    if (a->n == 0)
        a->v[a->n++] = exe;
    va_list ap;
    va_start(ap, a);
    for (const char *s; (s = va_arg(ap, const char *)) != NULL;) {
        ck_assert(a->n + 2 < sizeof a->v / sizeof a->v[0]);
        a->v[a->n++] = s;
    }
    va_end(ap);
    a->v[a->n] = NULL;
}

/* Runs the list; the status must be `want`. */
static void run_expect(const argl *a, int want)
{
    char why[1024];
    ck_assert_msg(spawn_capture(a->v, why, sizeof why) == 0, "%s", why);
    ck_assert_msg(R.status == want, "`%s` exited %d, expected %d\n--- stderr:\n%.3000s", R.cmd, R.status, want, R.err);
}

static const char *save_f32(const char *name, const float *data, size_t ndim, const size_t *shape)
{
    const char *path = P(name);
    char err[512];
    ck_assert_msg(npy_save_f32(path, data, ndim, shape, err, sizeof err) == 0, "%s: %s", path, err);
    return path;
}

/* A boolean (rows, cols) mask as numpy writes one ('|b1', version 1.0). */
static const char *save_bool(const char *name, const unsigned char *data, size_t rows, size_t cols)
{
    char header[128];
    size_t len = (size_t)snprintf(header, sizeof header, "{'descr': '|b1', 'fortran_order': False, 'shape': (%zu, %zu), }",
                                  rows, cols);
    const size_t pad = (64 - (10 + len + 1) % 64) % 64;
    memset(header + len, ' ', pad);
    len += pad;
    header[len++] = '\n';
    unsigned char *img = tu_track_malloc(10 + len + rows * cols);
    memcpy(img, "\x93NUMPY\x01\x00", 8);
    img[8] = (unsigned char)len;
    img[9] = (unsigned char)(len >> 8);
    memcpy(img + 10, header, len);
    memcpy(img + 10 + len, data, rows * cols);
    const char *path = P(name);
    tu_write_file(path, img, 10 + len + rows * cols);
    return path;
}

/* A float32 .npy of exactly n elements. */
static float *load_f32(const char *path, size_t n)
{
    npy_array a;
    char err[512];
    ck_assert_msg(npy_load(path, &a, err, sizeof err) == 0, "`%s`: reading %s: %s", R.cmd, path, err);
    tu_track(a.data);
    ck_assert_msg(a.dtype == NPY_F4 && a.count == n, "`%s`: %s holds %zu %s, expected %zu float32", R.cmd, path,
                  a.count, npy_dtype_name(a.dtype), n);
    return a.data;
}

static float *rand_floats(tu_rng *r, size_t n, float a)
{
    float *p = tu_falloc(n);
    for (size_t i = 0; i < n; i++)
        p[i] = tu_rng_uniform(r, a);
    return p;
}

/* (mats, L, C) padded to (mats, L, S) with −inf: ONNX's reading of a narrower mask. */
static float *pad_mask(const float *m, size_t mats, size_t L, size_t C, size_t S)
{
    float *out = tu_falloc(mats * L * S);
    for (size_t r = 0; r < mats * L; r++)
        for (size_t j = 0; j < S; j++)
            out[r * S + j] = j < C ? m[r * C + j] : -INFINITY;
    return out;
}

/* (A, X, Y, Z) → (A, X, Y + Y2, Z): each (a, x) block of `first` followed by that of `second`. */
static float *concat_rows(const float *first, size_t Y, const float *second, size_t Y2, size_t AX, size_t Z)
{
    float *out = tu_falloc(AX * (Y + Y2) * Z);
    for (size_t i = 0; i < AX; i++) {
        memcpy(out + i * (Y + Y2) * Z, first + i * Y * Z, Y * Z * sizeof *out);
        memcpy(out + (i * (Y + Y2) + Y) * Z, second + i * Y2 * Z, Y2 * Z * sizeof *out);
    }
    return out;
}

static void expect_close(const char *what, const float *got, const double *ref, size_t n)
{
    tu_set_label("`%s`", R.cmd);
    check_close_named(what, got, ref, n, NULL);
}

/* ---------------------------------------------------------------------------------------------- */
/* --mask narrower than the keys                                                                   */
/* ---------------------------------------------------------------------------------------------- */

/* The three masks of sdpa's narrower-mask case: float (B,H,L,C) with −inf entries, boolean (L,C), and
 * float (B,1,L,C) under --causal. */
enum { MASK_BHLC, MASK_BOOL_LC, MASK_B1LC_CAUSAL, N_MASK_KINDS };

START_TEST(test_sdpa_narrow_mask)
{
    enum { B = 2, H = 3, L = 4, S = 7, C = 5, D = 8 };
    tu_rng r = {7100 + (uint64_t)_i};
    const float *q = rand_floats(&r, B * H * L * D, 1.0f), *k = rand_floats(&r, B * H * S * D, 1.0f);
    const float *v = rand_floats(&r, B * H * S * D, 1.0f);
    const size_t qs[4] = {B, H, L, D}, ks[4] = {B, H, S, D};
    argl a = {{0}, 0};
    add(&a, "sdpa", "--q", save_f32("q.npy", q, 4, qs), "--k", save_f32("k.npy", k, 4, ks), "--v",
        save_f32("v.npy", v, 4, ks), "--out", P("o.npy"), "--weights", P("w.npy"), "--lse", P("l.npy"), NULL);
    clattn_masks m = CLATTN_MASKS_INIT;
    const size_t mats = _i == MASK_BHLC ? B * H : _i == MASK_BOOL_LC ? 1 : B;
    float *mask = rand_floats(&r, mats * L * C, 1.0f);
    if (_i == MASK_BOOL_LC) {
        unsigned char bits[L * C];
        for (size_t e = 0; e < L * C; e++) {
            bits[e] = (e % 3) != 1; /* False (masked) on a third of the entries */
            mask[e] = bits[e] ? 0.0f : -INFINITY;
        }
        add(&a, "--mask", save_bool("m.npy", bits, L, C), NULL);
    } else {
        mask[3] = mask[C + 4] = -INFINITY;
        const size_t shape[4] = {B, _i == MASK_BHLC ? H : 1, L, C};
        add(&a, "--mask", save_f32("m.npy", mask, 4, shape), NULL);
    }
    if (_i == MASK_B1LC_CAUSAL) {
        m.causal = CLATTN_CAUSAL_TOP_LEFT;
        add(&a, "--causal", NULL);
        /* (B,1,L,C) → (B,H,L,C) for the reference */
        float *wide = tu_falloc(B * H * L * C);
        for (size_t b = 0; b < B; b++)
            for (size_t h = 0; h < H; h++)
                memcpy(wide + (b * H + h) * L * C, mask + b * L * C, L * C * sizeof *wide);
        mask = wide;
    }
    m.additive = _i == MASK_BOOL_LC ? CLATTN_MASK_L_S : CLATTN_MASK_B_H_L_S;
    const float *padded = pad_mask(mask, _i == MASK_BOOL_LC ? 1 : B * H, L, C, S);
    clattn_sdpa_desc d = CLATTN_SDPA_DESC_INIT;
    d.batch = B;
    d.heads = H;
    d.q_len = L;
    d.kv_len = S;
    d.qk_dim = D;
    d.masks = &m;
    double *ro = tu_dalloc(B * H * L * D), *rw = tu_dalloc(B * H * L * S), *rl = tu_dalloc(B * H * L);
    ref_sdpa(&d, q, k, v, padded, ro, rw, rl);
    run_expect(&a, EXIT_OK);
    expect_close("out", load_f32(P("o.npy"), B * H * L * D), ro, B * H * L * D);
    expect_close("weights", load_f32(P("w.npy"), B * H * L * S), rw, B * H * L * S);
    expect_close("lse", load_f32(P("l.npy"), B * H * L), rl, B * H * L);
}
END_TEST

/* With a past: the keys are P past + S new, the mask narrower than the P + S; causal from query
 * position P + i (--offset P), as ONNX aligns it after a past. */
START_TEST(test_sdpa_narrow_mask_past)
{
    enum { B = 2, H = 2, L = 3, S = 3, PAST = 5, T = PAST + S, C = 6, D = 4 };
    tu_rng r = {7200};
    const float *q = rand_floats(&r, B * H * L * D, 1.0f), *k = rand_floats(&r, B * H * S * D, 1.0f);
    const float *v = rand_floats(&r, B * H * S * D, 1.0f), *pk = rand_floats(&r, B * H * PAST * D, 1.0f);
    const float *pv = rand_floats(&r, B * H * PAST * D, 1.0f);
    float *mask = rand_floats(&r, B * L * C, 1.0f);
    mask[2] = -INFINITY;
    const size_t qs[4] = {B, H, L, D}, ks[4] = {B, H, S, D}, ps[4] = {B, H, PAST, D}, ms[4] = {B, 1, L, C};
    argl a = {{0}, 0};
    add(&a, "sdpa", "--q", save_f32("q.npy", q, 4, qs), "--k", save_f32("k.npy", k, 4, ks), "--v",
        save_f32("v.npy", v, 4, ks), "--past-k", save_f32("pk.npy", pk, 4, ps), "--past-v",
        save_f32("pv.npy", pv, 4, ps), "--mask", save_f32("m.npy", mask, 4, ms), "--causal", "--offset", "5",
        "--out", P("o.npy"), "--weights", P("w.npy"), "--present-k", P("prk.npy"), NULL);
    float *wide = tu_falloc(B * H * L * C);
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++)
            memcpy(wide + (b * H + h) * L * C, mask + b * L * C, L * C * sizeof *wide);
    const float *kk = concat_rows(pk, PAST, k, S, B * H, D), *vv = concat_rows(pv, PAST, v, S, B * H, D);
    long long offsets[B] = {PAST, PAST};
    clattn_masks m = CLATTN_MASKS_INIT;
    m.causal = CLATTN_CAUSAL_TOP_LEFT;
    m.query_offsets = offsets;
    m.additive = CLATTN_MASK_B_H_L_S;
    clattn_sdpa_desc d = CLATTN_SDPA_DESC_INIT;
    d.batch = B;
    d.heads = H;
    d.q_len = L;
    d.kv_len = T;
    d.qk_dim = D;
    d.masks = &m;
    double *ro = tu_dalloc(B * H * L * D), *rw = tu_dalloc(B * H * L * T);
    ref_sdpa(&d, q, kk, vv, pad_mask(wide, B * H, L, C, T), ro, rw, NULL);
    run_expect(&a, EXIT_OK);
    expect_close("out", load_f32(P("o.npy"), B * H * L * D), ro, B * H * L * D);
    expect_close("weights", load_f32(P("w.npy"), B * H * L * T), rw, B * H * L * T);
    ck_assert_msg(memcmp(load_f32(P("prk.npy"), B * H * T * D), kk, B * H * T * D * sizeof *kk) == 0,
                  "`%s`: present_k is not concat(past_k, k)", R.cmd);
}
END_TEST

/* A layer's (L, C) mask over its S = L keys (self-attention). */
START_TEST(test_mha_narrow_mask)
{
    enum { B = 2, L = 5, C = 3, DM = 6, H = 2, DK = 3 };
    tu_rng r = {7300};
    const float *x = rand_floats(&r, B * L * DM, 1.0f), *wq = rand_floats(&r, DM * H * DK, 1.0f);
    const float *wk = rand_floats(&r, DM * H * DK, 1.0f), *wv = rand_floats(&r, DM * H * DK, 1.0f);
    float *mask = rand_floats(&r, L * C, 1.0f);
    mask[4] = -INFINITY;
    const size_t xs[3] = {B, L, DM}, ws[2] = {DM, H * DK}, ms[2] = {L, C};
    argl a = {{0}, 0};
    add(&a, "mha", "--x", save_f32("x.npy", x, 3, xs), "--wq", save_f32("wq.npy", wq, 2, ws), "--wk",
        save_f32("wk.npy", wk, 2, ws), "--wv", save_f32("wv.npy", wv, 2, ws), "--heads", "2", "--mask",
        save_f32("m.npy", mask, 2, ms), "--out", P("o.npy"), "--weights", P("w.npy"), NULL);
    clattn_masks m = CLATTN_MASKS_INIT;
    m.additive = CLATTN_MASK_L_S;
    clattn_mha_desc d = CLATTN_MHA_DESC_INIT;
    d.batch = B;
    d.q_len = L;
    d.model_dim = DM;
    d.heads = H;
    d.qk_dim = DK;
    d.masks = &m;
    clattn_mha_host_weights w = CLATTN_MHA_HOST_WEIGHTS_INIT;
    w.w_q = wq;
    w.w_k = wk;
    w.w_v = wv;
    double *ro = tu_dalloc(B * L * H * DK), *rw = tu_dalloc(B * H * L * L);
    ref_mha(&d, x, NULL, &w, pad_mask(mask, 1, L, C, L), ro, rw);
    run_expect(&a, EXIT_OK);
    expect_close("out", load_f32(P("o.npy"), B * L * H * DK), ro, B * L * H * DK);
    expect_close("weights", load_f32(P("w.npy"), B * H * L * L), rw, B * H * L * L);
}
END_TEST

/* Wider than the keys: a usage error that says so. */
START_TEST(test_mask_wider)
{
    enum { L = 3, S = 4, D = 2 };
    tu_rng r = {7400};
    const size_t qs[2] = {L, D}, ks[2] = {S, D}, ms[2] = {L, S + 2};
    argl a = {{0}, 0};
    add(&a, "sdpa", "--q", save_f32("q.npy", rand_floats(&r, L * D, 1.0f), 2, qs), "--k",
        save_f32("k.npy", rand_floats(&r, S * D, 1.0f), 2, ks), "--v", P("k.npy"), "--mask",
        save_f32("m.npy", rand_floats(&r, L * (S + 2), 1.0f), 2, ms), "--out", P("o.npy"), NULL);
    run_expect(&a, EXIT_USAGE);
    ck_assert_msg(strstr(R.err, "dimension 3 is 6, more than the S keys"), "`%s`: stderr %s", R.cmd, R.err);
    ck_assert_msg(access(P("o.npy"), F_OK) != 0, "`%s`: wrote o.npy", R.cmd);
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* --softmax-double                                                                                */
/* ---------------------------------------------------------------------------------------------- */

/* Within half a float32 unit in the last place of ref (plus a hair, and FLT_MIN for flushed subnormal
 * weights); infinities must match. */
static void expect_rounded_once(const char *what, const float *got, const double *ref, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (isinf(ref[i]) || isinf(got[i])) {
            ck_assert_msg((double)got[i] == ref[i], "`%s`: %s[%zu] = %g, reference %g", R.cmd, what, i, (double)got[i],
                          ref[i]);
            continue;
        }
        const float f = fabsf((float)ref[i]);
        const double half_ulp = 0.5 * ((double)nextafterf(f, INFINITY) - (double)f);
        const double err = fabs((double)got[i] - ref[i]);
        ck_assert_msg(err <= half_ulp * (1.0 + 1e-9) + 1e-12 * fabs(ref[i]) + FLT_MIN,
                      "`%s`: %s[%zu] = %.9g, reference %.17g: %.3g units in the last place off (at most 0.5)", R.cmd,
                      what, i, (double)got[i], ref[i], err / (2.0 * half_ulp));
    }
}

/* The three commands of the double-softmax case: sdpa, sdpa with a past, mha. */
enum { DOUBLE_SDPA, DOUBLE_PAST, DOUBLE_MHA, N_DOUBLE };

START_TEST(test_softmax_double)
{
    enum { B = 2, H = 2, L = 5, S = 37, PAST = 4, D = 16, DM = 12 };
    tu_rng r = {7500 + (uint64_t)_i};
    const size_t keys = _i == DOUBLE_PAST ? PAST + S : _i == DOUBLE_MHA ? L : S, nw = (size_t)B * H * L * keys;
    argl a = {{0}, 0};
    const float *v = NULL;
    if (_i == DOUBLE_MHA) {
        const size_t xs[3] = {B, L, DM}, ws[2] = {DM, H * D};
        add(&a, "mha", "--x", save_f32("x.npy", rand_floats(&r, B * L * DM, 1.5f), 3, xs), "--wq",
            save_f32("wq.npy", rand_floats(&r, DM * H * D, 1.0f), 2, ws), "--wk",
            save_f32("wk.npy", rand_floats(&r, DM * H * D, 1.0f), 2, ws), "--wv",
            save_f32("wv.npy", rand_floats(&r, DM * H * D, 1.0f), 2, ws), "--heads", "2", "--scale", "1", NULL);
    } else {
        const size_t qs[4] = {B, H, L, D}, ks[4] = {B, H, S, D}, ps[4] = {B, H, PAST, D};
        const float *k = rand_floats(&r, B * H * S * D, 2.0f);
        v = rand_floats(&r, B * H * S * D, 1.0f);
        add(&a, "sdpa", "--q", save_f32("q.npy", rand_floats(&r, B * H * L * D, 2.0f), 4, qs), "--k",
            save_f32("k.npy", k, 4, ks), "--v", save_f32("v.npy", v, 4, ks), "--scale", "1", "--causal-bottom-right",
            NULL);
        if (_i == DOUBLE_PAST) {
            const float *pv = rand_floats(&r, B * H * PAST * D, 1.0f);
            add(&a, "--past-k", save_f32("pk.npy", rand_floats(&r, B * H * PAST * D, 2.0f), 4, ps), "--past-v",
                save_f32("pv.npy", pv, 4, ps), NULL);
            v = concat_rows(pv, PAST, v, S, B * H, D);
        }
    }
    argl scores = a, dbl = a;
    add(&dbl, "--softmax-double", "--out", P("o.npy"), "--weights", P("w.npy"), NULL);
    if (_i != DOUBLE_MHA)
        add(&dbl, "--lse", P("l.npy"), NULL);
    if (!default_fp64) {
        run_expect(&dbl, EXIT_RUNTIME);
        ck_assert_msg(strstr(R.err, "cl_khr_fp64"), "`%s`: stderr does not name cl_khr_fp64: %s", R.cmd, R.err);
        ck_assert_msg(access(P("o.npy"), F_OK) != 0, "`%s`: wrote o.npy", R.cmd);
        return;
    }
    /* The float32 scores the softmax takes, from the same score kernel. */
    add(&scores, "--out", P("o_scores.npy"), "--scores", fmt("masked:%s", P("s.npy")), NULL);
    run_expect(&scores, EXIT_OK);
    const float *s = load_f32(P("s.npy"), nw);
    double *rw = tu_dalloc(nw), *rl = tu_dalloc(nw / keys);
    ref_softmax(nw / keys, keys, s, rw, rl);
    run_expect(&dbl, EXIT_OK);
    const float *w = load_f32(P("w.npy"), nw);
    expect_rounded_once("weights", w, rw, nw);
    if (_i == DOUBLE_MHA)
        return; /* (its output is P·V through projections: the layer tests' business) */
    expect_rounded_once("lse", load_f32(P("l.npy"), nw / keys), rl, nw / keys);
    clattn_sdpa_desc d = CLATTN_SDPA_DESC_INIT;
    d.batch = B;
    d.heads = H;
    d.q_len = L;
    d.kv_len = keys;
    d.qk_dim = D;
    double *ro = tu_dalloc(B * H * L * D);
    ref_weighted_sum(&d, w, v, ro);
    expect_close("out", load_f32(P("o.npy"), B * H * L * D), ro, B * H * L * D);
}
END_TEST

static Suite *onnx_suite(void)
{
    Suite *s = suite_create("cli_onnx");
    struct {
        const char *name;
        const TTest *test;
        int n;
    } loops[] = {{"sdpa_narrow_mask", test_sdpa_narrow_mask, N_MASK_KINDS},
                 {"sdpa_narrow_mask_past", test_sdpa_narrow_mask_past, 1},
                 {"mha_narrow_mask", test_mha_narrow_mask, 1},
                 {"mask_wider", test_mask_wider, 1},
                 {"softmax_double", test_softmax_double, N_DOUBLE}};
    for (size_t i = 0; i < sizeof loops / sizeof loops[0]; i++) {
        TCase *tc = tcase_create(loops[i].name);
        tcase_add_checked_fixture(tc, case_setup, tu_release_host); /* (the scratch root stays until main ends) */
        tcase_set_timeout(tc, 240);
        tcase_add_loop_test(tc, loops[i].test, 0, loops[i].n);
        suite_add_tcase(s, tc);
    }
    return s;
}

/* Whether `clattn devices --json` says the default device has cl_khr_fp64. */
static bool default_device_fp64(const char *json)
{
    const char *def = strstr(json, "\"default\": true");
    const char *fp64 = NULL;
    for (const char *p = json; def && (p = strstr(p, "\"fp64\": ")) != NULL && p < def; p++)
        fp64 = p;
    return fp64 && strncmp(fp64 + 8, "true", 4) == 0;
}

int main(void)
{
    exe = getenv("CLATTN_EXE");
    if (!exe || !*exe) {
        fprintf(stderr, "test_cli_onnx: CLATTN_EXE must name the clattn binary (set by tests/meson.build)\n");
        return 1;
    }
    if (!(root = tu_scratch_make("test_cli_onnx"))) {
        fprintf(stderr, "test_cli_onnx: cannot make a scratch folder: %s\n", strerror(errno));
        return 1;
    }
    char why[1024];
    const char *const probe[] = {exe, "devices", "--json", NULL};
    if (spawn_capture(probe, why, sizeof why) != 0) {
        fprintf(stderr, "test_cli_onnx: %s\n", why);
        tu_scratch_remove_all();
        return 1;
    }
    if (R.status == EXIT_NO_PLATFORM) {
        tu_scratch_remove_all();
        return tu_no_device_exit("clattn devices found none");
    }
    default_fp64 = default_device_fp64(R.out);
    printf("test_cli_onnx: the default device %s cl_khr_fp64\n", default_fp64 ? "has" : "lacks");
    SRunner *sr = srunner_create(onnx_suite());
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    const int rc = tu_srunner_exit(sr); /* (no check run is a failure too) */
    srunner_free(sr);
    free(R.out);
    free(R.err);
    tu_scratch_remove_all();
    return rc;
}
