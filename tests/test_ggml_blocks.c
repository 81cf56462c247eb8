/*
 * llama.cpp's own q8_0 and q4_0 blocks (CLATTN_Q8_0, CLATTN_Q4_0) read as they are and written as ggml
 * writes them, on every device. The blocks are tests/data/ggml_blocks.h: 4 float32 rows of 64 values,
 * their bytes from gguf.quants (llama.cpp's Python package, checked there against ggml-quants.c's
 * quantize_row_q8_0_ref / quantize_row_q4_0_ref), ggml's dequantised values and the x·id that ggml
 * rounds. tools/scripts/make_ggml_fixture.py writes that header; it is a maintainer's script, run by
 * hand (`.venv-bench/bin/pip install gguf`, then `.venv-bench/bin/python
 * tools/scripts/make_ggml_fixture.py`) and in no test or CI job: the header is committed.
 *
 *  1. read_v: ggml's bytes as the V cache (4 keys), float K with one key far above the others for each
 *     query (softmax exactly one-hot): the output must be ggml's dequantised rows to the bit (at most one
 *     float32 ulp is allowed), on the fused (4 query rows), decode (4 query heads over one K/V head,
 *     q_len 1) and staged paths — the profile shows which kernels ran.
 *  2. read_k: ggml's bytes as K. (a) each row alone (4 batches of one key) under 64 one-hot queries: the
 *     log-sum-exp of query j is K[j]·scale, value by value; (b) the 4 rows as 4 keys under random queries
 *     with V the identity (Dv 4), so that the output is the weights: output and lse against the fp64
 *     reference over ggml's dequantised values. Same three paths.
 *  3. write: clattn_kv_append of the float rows (q_dtype float32) into a q8_0 K and a q4_0 V cache, and
 *     the other way round, in two appends (1 row, then 3): every block's fp16 scale must be ggml's byte
 *     for byte, every quant ggml's but where ggml's x·id lies within 1e-6 of k + ½ (ggml rounds those
 *     halves away from zero (q8_0's roundf) or up ((int)(x·id + 8.5f), where the float addition also
 *     rounds a hair below a half up); clattn to even), and then by one step only; the row past the
 *     appended ones untouched. The differing quants and bytes are counted and printed.
 */
#include "test_util.h"

#include "data/ggml_blocks.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NV (GGML_ROWS * GGML_D) /* values in the fixture */

/* One format of the fixture: ggml's bytes, values and x·id. */
typedef struct {
    clattn_dtype type;
    const char *name;
    size_t block_bytes;
    const unsigned char *bytes;
    const float *values, *t;
} gformat;

static const gformat formats[] = {
    {CLATTN_Q8_0, "q8_0", 34, ggml_q8_0, ggml_q8_0_values, ggml_q8_0_t},
    {CLATTN_Q4_0, "q4_0", 18, ggml_q4_0, ggml_q4_0_values, ggml_q4_0_t},
};
#define NFORMATS (sizeof formats / sizeof formats[0])
#define NBLOCKS (NV / 32)

/* The kernel whose launch shows that a path ran (its profile name). */
static const char *path_kernel(clattn_algorithm a)
{
    return a == CLATTN_ALGORITHM_FUSED    ? "fused attention"
           : a == CLATTN_ALGORITHM_DECODE ? "decode partial"
                                          : "softmax";
}

/* A tracked device buffer holding these bytes. */
static cl_mem upload_bytes(clattn_context *ctx, const void *data, size_t bytes)
{
    cl_int err;
    cl_mem m = clCreateBuffer(clattn_context_cl_context(ctx), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, bytes,
                              (void *)data, &err);
    ck_assert_msg(err == CL_SUCCESS && m != NULL, "%s: clCreateBuffer(%zu bytes) failed: %d", tu_label(), bytes,
                  (int)err);
    tu_track_mem(m);
    return m;
}

static void read_bytes(clattn_context *ctx, cl_mem m, void *out, size_t bytes)
{
    tu_finish(ctx);
    cl_int err = clEnqueueReadBuffer(clattn_context_queue(ctx), m, CL_TRUE, 0, bytes, out, 0, NULL, NULL);
    ck_assert_msg(err == CL_SUCCESS, "%s: clEnqueueReadBuffer failed: %d", tu_label(), (int)err);
}

/* Runs d on device buffers (q, k, v given as host arrays; k or v in d's quantised type as bytes),
 * checks that the path's kernel ran, and returns out (n_out floats) and lse (n_lse) as tracked arrays. */
static void run_sdpa(clattn_context *ctx, const clattn_sdpa_desc *d, const float *q, size_t nq, const void *k,
                     size_t k_bytes, const void *v, size_t v_bytes, size_t n_out, size_t n_lse, float **out,
                     float **lse)
{
    cl_mem qm = tu_dev_alloc(ctx, nq, q);
    cl_mem km = upload_bytes(ctx, k, k_bytes), vm = upload_bytes(ctx, v, v_bytes);
    cl_mem om = tu_dev_alloc(ctx, n_out, NULL), lm = tu_dev_alloc(ctx, n_lse, NULL);
    clattn_status st = clattn_sdpa(ctx, d, qm, km, vm, NULL, om, NULL, lm);
    TU_ASSERT_OK(st, ctx, "clattn_sdpa");
    tu_finish(ctx);
    const char *kernel = path_kernel(d->algorithm);
    ck_assert_msg(tu_launches_of(ctx, kernel) >= 1, "%s: no \"%s\" launch: the path did not run", tu_label(), kernel);
    *out = tu_dev_read_checked(ctx, om, n_out, "out");
    *lse = tu_dev_read_checked(ctx, lm, n_lse, "lse");
}

/* Fails unless out[i] is ref[i] within `ulps` float32 units in the last place (and NaN-free); returns the
 * largest |out − ref| and counts the exact ones. */
static double check_ulps(const char *what, const float *out, const float *ref, size_t n, int64_t ulps,
                         size_t *exact)
{
    double max_err = 0.0;
    *exact = 0;
    for (size_t i = 0; i < n; i++) {
        const int64_t apart = tu_ulps_apart(out[i], ref[i]);
        ck_assert_msg(apart <= ulps, "%s: %s[%zu] = %a (%.9g), ggml's is %a (%.9g): %lld ulps apart", tu_label(),
                      what, i, (double)out[i], (double)out[i], (double)ref[i], (double)ref[i], (long long)apart);
        *exact += out[i] == ref[i];
        max_err = fmax(max_err, fabs((double)out[i] - (double)ref[i]));
    }
    return max_err;
}

/* ---------------------------------------------------------------------------------------------- */
/* 1. ggml's bytes as V                                                                            */
/* ---------------------------------------------------------------------------------------------- */

START_TEST(test_read_v)
{
    const size_t dev = TU_DEVICE(_i), c = TU_CASE(_i);
    const gformat *f = &formats[c % NFORMATS];
    const clattn_algorithm path = tu_paths[c / NFORMATS];
    tu_set_label("ggml %s as V, %s path, on %s", f->name, tu_algorithm_name(path), tu_dev_spec[dev]);
    clattn_context *ctx = tu_context_new_profiling(dev);
    enum { S = GGML_ROWS, D = GGML_D };
    /* Query r (a query row, or on the decode path a query head over the one K/V head) is e_r and key s is
     * 1000·e_s: query r scores 125 on key r and 0 on the others, whose weights exp(−125) are 0 in float. */
    const bool decode = path == CLATTN_ALGORITHM_DECODE;
    clattn_sdpa_desc d = tu_sdpa_desc(1, decode ? S : 1, decode ? 1 : S, S, D, D);
    d.kv_heads = 1;
    d.v_dtype = f->type;
    d.algorithm = path;
    float *q = tu_falloc(S * D), *k = tu_falloc(S * D);
    for (size_t r = 0; r < S; r++) {
        q[r * D + r] = 1.0f;
        k[r * D + r] = 1000.0f;
    }
    float *out, *lse;
    run_sdpa(ctx, &d, q, S * D, k, S * D * sizeof(float), f->bytes, NBLOCKS * f->block_bytes, S * D, S, &out, &lse);
    size_t exact;
    const double err = check_ulps("out", out, f->values, NV, 1, &exact);
    for (size_t r = 0; r < S; r++)
        ck_assert_msg(fabs(lse[r] - 125.0) <= 1e-4, "%s: lse[%zu] = %.9g, expected 125", tu_label(), r, lse[r]);
    printf("ggml_blocks: %s as V, %s, %s: %zu of %d values exact, max |err| %.3g\n", f->name,
           tu_algorithm_name(path), tu_dev_spec[dev], exact, NV, err);
    clattn_context_free(ctx);
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* 2. ggml's bytes as K                                                                            */
/* ---------------------------------------------------------------------------------------------- */

START_TEST(test_read_k)
{
    const size_t dev = TU_DEVICE(_i), c = TU_CASE(_i);
    const gformat *f = &formats[c % NFORMATS];
    const clattn_algorithm path = tu_paths[c / NFORMATS];
    const bool decode = path == CLATTN_ALGORITHM_DECODE;
    tu_set_label("ggml %s as K, %s path, on %s", f->name, tu_algorithm_name(path), tu_dev_spec[dev]);
    clattn_context *ctx = tu_context_new_profiling(dev);
    enum { R = GGML_ROWS, D = GGML_D, DV = 4 };

    /* (a) Batch b holds row b as its one key; query j is e_j (64 query rows, or 64 query heads over one
     * K/V head on the decode path), so its one score is K[b][j]·scale and its lse that score. */
    clattn_sdpa_desc d = tu_sdpa_desc(R, decode ? D : 1, decode ? 1 : D, 1, D, DV);
    d.kv_heads = 1;
    d.k_dtype = f->type;
    d.algorithm = path;
    float *q = tu_falloc(R * D * D), *v = tu_falloc(R * DV);
    for (size_t b = 0; b < R; b++)
        for (size_t j = 0; j < D; j++)
            q[(b * D + j) * D + j] = 1.0f;
    tu_fill_uniform(v, R * DV, 1.0f, 41);
    float *out, *lse;
    run_sdpa(ctx, &d, q, R * D * D, f->bytes, NBLOCKS * f->block_bytes, v, R * DV * sizeof(float), R * D * DV,
             R * D, &out, &lse);
    float *want = tu_falloc(NV), *want_out = tu_falloc(R * D * DV);
    for (size_t i = 0; i < NV; i++)
        want[i] = f->values[i] * 0.125f; /* scale 1/√64: exact */
    for (size_t b = 0; b < R; b++)
        for (size_t j = 0; j < D; j++)
            memcpy(want_out + (b * D + j) * DV, v + b * DV, DV * sizeof(float));
    size_t exact, exact_out;
    const double err_a = check_ulps("lse (= K·scale)", lse, want, NV, 4, &exact);
    (void)check_ulps("out (= V)", out, want_out, R * D * DV, 1, &exact_out);

    /* (b) The 4 rows as 4 keys of one sequence, 5 random queries (decode: 4 query heads, q_len 1), V the
     * identity: the output is the weights. Against the fp64 reference over ggml's dequantised K. */
    const size_t H = decode ? 4 : 1, L = decode ? 1 : 5;
    clattn_sdpa_desc e = tu_sdpa_desc(1, H, L, R, D, DV);
    e.kv_heads = 1;
    e.k_dtype = f->type;
    e.algorithm = path;
    float *q2 = tu_falloc(H * L * D), *eye = tu_falloc(R * DV);
    tu_fill_uniform(q2, H * L * D, 1.0f, 42 + c);
    for (size_t s = 0; s < R; s++)
        eye[s * DV + s] = 1.0f;
    float *w, *lse2;
    run_sdpa(ctx, &e, q2, H * L * D, f->bytes, NBLOCKS * f->block_bytes, eye, R * DV * sizeof(float), H * L * DV,
             H * L, &w, &lse2);
    clattn_sdpa_desc ef = e; /* the reference's inputs are floats */
    ef.k_dtype = CLATTN_FLOAT32;
    double *rw = tu_dalloc(H * L * DV), *rl = tu_dalloc(H * L), err_w = 0.0, err_l = 0.0;
    ref_sdpa(&ef, q2, f->values, eye, NULL, rw, NULL, rl);
    check_close_named("weights (out)", w, rw, H * L * DV, &err_w);
    check_close_named("lse", lse2, rl, H * L, &err_l);
    printf("ggml_blocks: %s as K, %s, %s: lse = K·scale %zu of %d exact (max |err| %.3g); weights max |err| %.3g, "
           "lse %.3g\n",
           f->name, tu_algorithm_name(path), tu_dev_spec[dev], exact, NV, err_a, err_w, err_l);
    clattn_context_free(ctx);
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* 3. Appends against ggml's bytes                                                                 */
/* ---------------------------------------------------------------------------------------------- */

/* Counts of one cache's comparison. */
typedef struct {
    size_t quants, bytes;    /* quants and bytes that differ from ggml's */
    size_t exact, near;      /* of the quants: ggml's x·id exactly on a half, or within 1e-6 of one */
    size_t ties, near_ties;  /* the fixture's values of each kind (whether they differ or not) */
} wcount;

/* Quant j of a block (q8_0: the int8; q4_0: the nibble, 0 … 15). */
static int quant_of(const gformat *f, const unsigned char *block, size_t j)
{
    if (f->type == CLATTN_Q8_0)
        return (signed char)block[2 + j];
    return (block[2 + j % 16] >> (j / 16 * 4)) & 15;
}

/* got (the cache's first GGML_ROWS rows) against ggml's bytes. */
static wcount compare_blocks(const gformat *f, const unsigned char *got, const char *which)
{
    wcount n = {0, 0, 0, 0, 0, 0};
    for (size_t b = 0; b < NBLOCKS; b++) {
        const unsigned char *g = f->bytes + b * f->block_bytes, *m = got + b * f->block_bytes;
        const size_t row = b / (GGML_D / 32), v0 = b % (GGML_D / 32) * 32;
        ck_assert_msg(m[0] == g[0] && m[1] == g[1],
                      "%s: %s block %zu (row %zu, values %zu-%zu): fp16 scale 0x%02x%02x, ggml's 0x%02x%02x",
                      tu_label(), which, b, row, v0, v0 + 31, m[1], m[0], g[1], g[0]);
        for (size_t j = 2; j < f->block_bytes; j++)
            n.bytes += m[j] != g[j];
        for (size_t j = 0; j < 32; j++) {
            const float t = f->t[b * 32 + j];
            const double off = fabs((double)t - (floor((double)t) + 0.5));
            n.ties += off == 0.0;
            n.near_ties += off != 0.0 && off <= 1e-6;
            const int qm = quant_of(f, m, j), qg = quant_of(f, g, j);
            if (qm == qg)
                continue;
            n.quants++;
            ck_assert_msg(off <= 1e-6 && abs(qm - qg) == 1,
                          "%s: %s block %zu value %zu (x = %a): quant %d, ggml's %d, where ggml's x·id = %.9g is no "
                          "half", tu_label(), which, b, j, (double)ggml_src[b * 32 + j], qm, qg, (double)t);
            if (off == 0.0)
                n.exact++;
            else
                n.near++;
        }
    }
    return n;
}

START_TEST(test_write)
{
    const size_t dev = TU_DEVICE(_i), c = TU_CASE(_i);
    const gformat *fk = &formats[c], *fv = &formats[1 - c];
    tu_set_label("append into %s K and %s V on %s", fk->name, fv->name, tu_dev_spec[dev]);
    clattn_context *ctx = tu_context_new_profiling(dev);
    enum { R = GGML_ROWS, D = GGML_D, CAP = R + 1 };
    clattn_sdpa_desc d = tu_sdpa_desc(1, 1, 1, CAP, D, D);
    d.k_dtype = fk->type;
    d.v_dtype = fv->type;
    /* Caches of CAP rows, all the sentinel's bytes (a5 a5 c5 7f); every row's bytes are a whole number
     * of floats (q8_0 68 bytes, q4_0 36). */
    const size_t krow = D / 32 * fk->block_bytes, vrow = D / 32 * fv->block_bytes;
    cl_mem kc = tu_dev_alloc_exact(ctx, CAP * krow / 4, NULL), vc = tu_dev_alloc_exact(ctx, CAP * vrow / 4, NULL);
    /* Row 0, then rows 1-3: an append at a length > 0. */
    const size_t first[2] = {0, 1}, count[2] = {1, R - 1};
    for (int a = 0; a < 2; a++) {
        const float *rows = ggml_src + first[a] * D;
        cl_mem kn = tu_dev_alloc(ctx, count[a] * D, rows), vn = tu_dev_alloc(ctx, count[a] * D, rows);
        clattn_status st = clattn_kv_append(ctx, &d, &first[a], count[a], kn, vn, kc, vc);
        TU_ASSERT_OK(st, ctx, "clattn_kv_append");
    }
    tu_finish(ctx);
    ck_assert_msg(tu_launches_of(ctx, "cache append") >= 2, "%s: the appends did not quantise on the device",
                  tu_label());
    unsigned char *kb = tu_track_malloc(CAP * krow), *vb = tu_track_malloc(CAP * vrow);
    read_bytes(ctx, kc, kb, CAP * krow);
    read_bytes(ctx, vc, vb, CAP * vrow);
    const unsigned char sentinel[4] = {0xa5, 0xa5, 0xc5, 0x7f};
    for (size_t i = R * krow; i < CAP * krow; i++)
        ck_assert_msg(kb[i] == sentinel[i % 4], "%s: K's row %d (past the appended ones) written", tu_label(), R);
    for (size_t i = R * vrow; i < CAP * vrow; i++)
        ck_assert_msg(vb[i] == sentinel[i % 4], "%s: V's row %d (past the appended ones) written", tu_label(), R);
    const wcount nk = compare_blocks(fk, kb, "K"), nv = compare_blocks(fv, vb, "V");
    const wcount *n[2] = {&nk, &nv};
    const gformat *f[2] = {fk, fv};
    for (int i = 0; i < 2; i++)
        printf("ggml_blocks: append into %s (%s) on %s: %d fp16 scales identical; %zu of %d quants differ (%zu at "
               "exact halves of the fixture's %zu, %zu at near halves of its %zu), %zu of %d quant bytes differ\n",
               f[i]->name, i ? "V" : "K", tu_dev_spec[dev], (int)NBLOCKS, n[i]->quants, NV, n[i]->exact, n[i]->ties,
               n[i]->near, n[i]->near_ties, n[i]->bytes, (int)(NBLOCKS * (f[i]->block_bytes - 2)));
    clattn_context_free(ctx);
}
END_TEST

static Suite *ggml_suite(void)
{
    Suite *s = suite_create("ggml_blocks");
    tu_add_loop(s, "read_v", test_read_v, NFORMATS * TU_NPATHS * tu_ndev);
    tu_add_loop(s, "read_k", test_read_k, NFORMATS * TU_NPATHS * tu_ndev);
    tu_add_loop(s, "write", test_write, NFORMATS * tu_ndev);
    return s;
}

int main(void) { return tu_main(ggml_suite); }
