/*
 * Reproducible arithmetic (desc.arithmetic = CLATTN_ARITHMETIC_REPRODUCIBLE; issue 41) on every device:
 *  1. cases: odd shapes, GQA, both causal kinds, query offsets, key lengths, a window, float and bool masks,
 *     soft-capping, sinks, ALiBi, logit scales, float16/bfloat16 tensors, an int8 cache, rows that see no key —
 *     out and lse against the fp64 reference within the usual tolerance (reproducible is not less accurate),
 *     the same bits whatever desc.algorithm asks (auto, fused, staged, decode), and a fingerprint of the bits
 *     equal to tests/data/reproducible_hashes.txt's — written once on PoCL, so rusticl and oclgrind (and any
 *     device that runs the suite) must give PoCL's bits (CLATTN_TEST_WRITE_HASHES=FILE writes the file);
 *  2. tunings: contexts with other fused and decode tunings give the same bits;
 *  3. batch invariance: one row alone, in a batch of 8, in a prefill of 300 rows (causal) and as a decode
 *     step, in a ragged batch of 6 sequences, through a paged cache of shuffled blocks — the same bits;
 *  4. CLATTN_REPRODUCIBLE=1 makes a context's every call reproducible;
 *  5. the calls that do not take it yet refuse it, naming it.
 */
#define _POSIX_C_SOURCE 200809L /* (setenv) */
#include "test_util.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct rcase {
    const char *name;
    size_t B, H, KVH, L, S, D, DV;
    clattn_causal causal;
    int offsets, key_lengths, window, mask, softcap, sinks, alibi, logit;
    clattn_dtype qo, kv;
} rcase;

#define F32 CLATTN_FLOAT32
static const rcase cases[] = {
    {"plain B 2 H 3 L 17 S 29 D 24", 2, 3, 3, 17, 29, 24, 24, NONE, 0, 0, 0, 0, 0, 0, 0, 0, F32, F32},
    {"GQA 8/2 L 5 S 300 D 64 Dv 40", 1, 8, 2, 5, 300, 64, 40, NONE, 0, 0, 0, 0, 0, 0, 0, 0, F32, F32},
    {"causal top-left L = S = 70", 2, 2, 1, 70, 70, 32, 32, TL, 0, 0, 0, 0, 0, 0, 0, 0, F32, F32},
    {"causal bottom-right L 9 S 130", 1, 4, 2, 9, 130, 16, 16, BR, 0, 0, 0, 0, 0, 0, 0, 0, F32, F32},
    {"bottom-right L 40 > S 11 (rows without keys)", 2, 2, 2, 40, 11, 8, 8, BR, 0, 0, 0, 0, 0, 0, 0, 0, F32, F32},
    {"decode L 1 S 777, offsets and key lengths", 3, 4, 1, 1, 777, 64, 64, TL, 1, 1, 0, 0, 0, 0, 0, 0, F32, F32},
    {"window 13, causal, L = S = 90", 1, 2, 2, 90, 90, 16, 24, TL, 0, 0, 1, 0, 0, 0, 0, 0, F32, F32},
    {"float mask (B,H,L,S) with -inf", 2, 2, 2, 12, 33, 16, 16, NONE, 0, 0, 0, 1, 0, 0, 0, 0, F32, F32},
    {"bool mask", 1, 3, 3, 7, 45, 8, 16, NONE, 0, 0, 0, 2, 0, 0, 0, 0, F32, F32},
    {"soft-capping", 2, 2, 1, 11, 50, 32, 32, NONE, 0, 0, 0, 0, 1, 0, 0, 0, F32, F32},
    {"sinks", 1, 4, 4, 6, 20, 16, 16, TL, 0, 0, 0, 0, 0, 1, 0, 0, F32, F32},
    {"ALiBi and logit scales", 2, 4, 2, 13, 40, 16, 16, TL, 0, 0, 0, 0, 0, 0, 1, 1, F32, F32},
    {"everything", 2, 4, 2, 15, 61, 24, 16, TL, 1, 1, 1, 1, 1, 1, 1, 1, F32, F32},
    {"float16 Q/K/V/O", 1, 2, 2, 21, 37, 32, 32, NONE, 0, 0, 0, 0, 0, 0, 0, 0, CLATTN_FLOAT16, CLATTN_FLOAT16},
    {"bfloat16 Q/K/V/O, causal", 2, 2, 1, 19, 19, 16, 16, TL, 0, 0, 0, 0, 0, 0, 0, 0, CLATTN_BFLOAT16,
     CLATTN_BFLOAT16},
    {"int8 K/V cache, float16 Q/O, decode", 2, 8, 2, 1, 513, 64, 64, NONE, 0, 1, 0, 0, 0, 0, 0, 0, CLATTN_FLOAT16,
     CLATTN_INT8},
    {"head size 128, L 3, S 1000", 1, 2, 1, 3, 1000, 128, 128, BR, 0, 0, 0, 0, 0, 0, 0, 0, F32, F32},
    {"head size 1 and 200", 1, 1, 1, 5, 17, 1, 200, NONE, 0, 0, 0, 0, 0, 1, 0, 0, F32, F32},
};
#define N_CASES (sizeof cases / sizeof cases[0])

/* FNV-1a over bytes: a fingerprint of a result's bits (not a defence against anyone). */
static uint64_t fnv(const void *data, size_t n, uint64_t h)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* One case's inputs, on the host (the reference's values: the stored types' own) and on the device. */
typedef struct inputs {
    clattn_sdpa_desc d;
    tu_variants var;
    size_t lengths[8];
    long long offsets[8];
    float logit[16];
    const float *mask;
    tu_typed q, k, v;
    cl_mem qm, km, vm, mm, ks, vs;
    size_t nq, nk, nv, no, nl;
} inputs;

static void make(clattn_context *ctx, const rcase *c, inputs *in, uint64_t seed)
{
    memset(in, 0, sizeof *in);
    in->d = tu_sdpa_desc(c->B, c->H, c->L, c->S, c->D, c->DV);
    in->d.kv_heads = c->KVH;
    for (size_t b = 0; b < c->B; b++) {
        in->lengths[b] = c->S - (b * 7) % (c->S / 2 + 1);
        in->offsets[b] = (long long)(in->lengths[b] - c->L) - (long long)b;
    }
    tu_variants_apply(&in->d, &in->var, c->causal, c->key_lengths ? in->lengths : NULL,
                      c->offsets ? in->offsets : NULL, c->window ? 13 : -2, c->sinks, c->alibi);
    if (c->mask) {
        size_t n;
        in->var.masks.additive = CLATTN_MASK_B_H_L_S;
        float *m = tu_make_mask(CLATTN_MASK_B_H_L_S, c->B, c->H, c->L, c->S, TU_MASKF_INF, seed + 9, &n);
        in->var.masks.mask_type = c->mask == 2 ? CLATTN_MASK_BOOL : CLATTN_MASK_FLOAT;
        if (c->mask == 2) { /* bool entries, one byte each, and their float meaning for the reference */
            /* rounded up to whole floats: tu_dev_alloc copies (n + 3) / 4 of them */
            unsigned char *bytes = tu_track_malloc((n + 3) / 4 * sizeof(float));
            for (size_t e = 0; e < n; e++)
                bytes[e] = m[e] != -INFINITY, m[e] = bytes[e] ? 0.0f : -INFINITY;
            in->mm = tu_dev_alloc(ctx, (n + 3) / 4, (const float *)bytes);
        } else {
            in->mm = tu_dev_alloc(ctx, n, m);
        }
        in->mask = m;
    }
    for (size_t h = 0; h < c->H && c->logit; h++)
        in->logit[h] = 0.5f + 0.25f * (float)h;
    if (c->logit)
        in->d.logit_scale = in->logit;
    if (c->softcap)
        in->d.softcap = 2.5f;
    in->d.q_dtype = in->d.out_dtype = c->qo;
    in->d.k_dtype = in->d.v_dtype = c->kv;
    in->nq = c->B * c->H * c->L * c->D, in->nk = c->B * c->KVH * c->S * c->D, in->nv = c->B * c->KVH * c->S * c->DV;
    in->no = c->B * c->H * c->L * c->DV, in->nl = c->B * c->H * c->L;
    float *q = tu_falloc(in->nq), *k = tu_falloc(in->nk), *v = tu_falloc(in->nv);
    tu_fill_uniform(q, in->nq, 1.5f, seed + 1);
    tu_fill_uniform(k, in->nk, 1.0f, seed + 2);
    tu_fill_uniform(v, in->nv, 1.0f, seed + 3);
    in->q = tu_typed_make(c->qo, q, in->nq, c->D);
    in->k = tu_typed_make(c->kv, k, in->nk, c->D);
    in->v = tu_typed_make(c->kv, v, in->nv, c->DV);
    in->qm = tu_typed_upload(ctx, &in->q), in->km = tu_typed_upload(ctx, &in->k), in->vm = tu_typed_upload(ctx, &in->v);
    in->d.k_scales = tu_typed_scales(ctx, &in->k), in->d.v_scales = tu_typed_scales(ctx, &in->v);
    in->d.arithmetic = CLATTN_ARITHMETIC_REPRODUCIBLE;
}

static size_t out_bytes(const inputs *in) { return in->no * (in->d.out_dtype == F32 ? 4 : 2); }

/* The call's out (its type's bytes; *o its buffer) and lse, read back raw. */
static void run(clattn_context *ctx, const inputs *in, clattn_algorithm algo, cl_mem *o, unsigned char **out,
                float **lse)
{
    clattn_sdpa_desc d = in->d;
    d.algorithm = algo;
    *o = tu_dev_alloc(ctx, (out_bytes(in) + 3) / 4, NULL);
    cl_mem l = tu_dev_alloc(ctx, in->nl, NULL);
    TU_ASSERT_OK(clattn_sdpa(ctx, &d, in->qm, in->km, in->vm, in->mm, *o, NULL, l), ctx, "clattn_sdpa, reproducible");
    *out = (unsigned char *)tu_dev_read_checked(ctx, *o, (out_bytes(in) + 3) / 4, "out");
    *lse = tu_dev_read_checked(ctx, l, in->nl, "lse");
}

/* The fingerprint tests/data/reproducible_hashes.txt holds for a case, or 0 when it holds none. */
static uint64_t golden(const char *name)
{
    const char *dir = getenv("CLATTN_SOURCE_CL_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/../tests/data/reproducible_hashes.txt", dir ? dir : ".");
    char *text = tu_read_file(path, NULL);
    ck_assert_msg(text != NULL, "cannot read %s", path);
    uint64_t found = 0;
    for (char *line = strtok(text, "\n"); line && !found; line = strtok(NULL, "\n")) {
        char *bar = strrchr(line, '|');
        if (bar && (size_t)(bar - line) == strlen(name) && strncmp(line, name, strlen(name)) == 0)
            found = strtoull(bar + 1, NULL, 16);
    }
    free(text);
    return found;
}

START_TEST(test_cases)
{
    const rcase *c = &cases[TU_CASE(_i)];
    const size_t dev = TU_DEVICE(_i);
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("reproducible, %s, on %s", c->name, tu_dev_spec[dev]);
    inputs *in = tu_track_malloc(sizeof *in);
    make(ctx, c, in, 700 + TU_CASE(_i) * 10);
    /* Mesa's llvmpipe stops a work-item's loops after 65535 iterations: there, long rows are refused (never
     * wrong), and only there. */
    const bool llvmpipe_limit = (double)c->S * (double)(c->D + 2 * c->DV + 1) > 60000.0;
    if (llvmpipe_limit) {
        cl_mem probe = tu_dev_alloc(ctx, in->no, NULL);
        const clattn_status st = clattn_sdpa(ctx, &in->d, in->qm, in->km, in->vm, in->mm, probe, NULL, NULL);
        if (st == CLATTN_ERROR_UNSUPPORTED_DEVICE) {
            ck_assert_msg(strstr(clattn_last_error(ctx), "llvmpipe") && strstr(tu_dev_spec[dev], ":"),
                          "%s: refused: %s", tu_label(), clattn_last_error(ctx));
            return;
        }
        TU_ASSERT_OK(st, ctx, "clattn_sdpa, reproducible");
    }
    unsigned char *out;
    float *lse;
    cl_mem o;
    run(ctx, in, CLATTN_ALGORITHM_AUTO, &o, &out, &lse);
    /* As accurate as the default arithmetic: the fp64 reference on the stored values. */
    double *ro = tu_dalloc(in->no), *rl = tu_dalloc(in->nl);
    clattn_sdpa_desc rd = in->d;
    ref_sdpa(&rd, in->q.values, in->k.values, in->v.values, in->mask, ro, NULL, rl);
    const float *got = tu_typed_read(ctx, o, c->qo, in->no);
    tu_check_typed("out", got, ro, in->no, c->qo, NULL);
    check_close_named("lse", lse, rl, in->nl, NULL);
    /* Every algorithm: the same bits. */
    static const clattn_algorithm algos[3] = {CLATTN_ALGORITHM_FUSED, CLATTN_ALGORITHM_STAGED, CLATTN_ALGORITHM_DECODE};
    for (int a = 0; a < 3; a++) {
        unsigned char *o2;
        float *l2;
        cl_mem unused;
        run(ctx, in, algos[a], &unused, &o2, &l2);
        ck_assert_msg(memcmp(o2, out, out_bytes(in)) == 0 && memcmp(l2, lse, in->nl * 4) == 0,
                      "%s: desc.algorithm %s changed the bits", tu_label(), tu_algorithm_name(algos[a]));
    }
    /* The fingerprint: PoCL's, on every implementation. */
    const uint64_t h = fnv(lse, in->nl * 4, fnv(out, out_bytes(in), 0xcbf29ce484222325ull));
    const char *write = getenv("CLATTN_TEST_WRITE_HASHES");
    if (write && *write) {
        FILE *f = fopen(write, "a");
        ck_assert_msg(f != NULL, "cannot append to %s", write);
        fprintf(f, "%s|%016llx\n", c->name, (unsigned long long)h);
        fclose(f);
        return;
    }
    const uint64_t want = golden(c->name);
    ck_assert_msg(want != 0, "%s: tests/data/reproducible_hashes.txt has no line for this case", tu_label());
    ck_assert_msg(h == want, "%s: fingerprint %016llx, the recorded bits' %016llx", tu_label(),
                  (unsigned long long)h, (unsigned long long)want);
}
END_TEST

/* 2. Other tunings of the fused and decode kernels (and the CPU class): the same bits. */
START_TEST(test_tunings)
{
    const size_t dev = _i;
    static const char *const tunings[] = {"fused=8x64x2x0x2", "decode=1x4x32x1x0x4x0", "class=cpu",
                                          "fused=64x64x4x0x1,decode=16x16x32x1x0x4x1024"};
    for (size_t c = 0; c <= 12; c += 4) { /* (cases within llvmpipe's limit: see test_cases) */
        tu_set_label("reproducible, %s, tunings, on %s", cases[c].name, tu_dev_spec[dev]);
        inputs *in = tu_track_malloc(sizeof *in);
        make(tu_ctx[dev], &cases[c], in, 700 + c * 10);
        unsigned char *out;
        float *lse;
        cl_mem o;
        run(tu_ctx[dev], in, CLATTN_ALGORITHM_AUTO, &o, &out, &lse);
        for (size_t t = 0; t < sizeof tunings / sizeof tunings[0]; t++) {
            clattn_context_options opts = CLATTN_CONTEXT_OPTIONS_INIT;
            opts.device = tu_dev_spec[dev];
            opts.tuning = tunings[t];
            clattn_context *other = NULL;
            TU_ASSERT_OK(clattn_context_create_with_options(&other, &opts), NULL, "a context with another tuning");
            inputs *again = tu_track_malloc(sizeof *again);
            make(other, &cases[c], again, 700 + c * 10);
            unsigned char *o2;
            float *l2;
            cl_mem unused;
            run(other, again, CLATTN_ALGORITHM_AUTO, &unused, &o2, &l2);
            ck_assert_msg(memcmp(o2, out, out_bytes(in)) == 0 && memcmp(l2, lse, in->nl * 4) == 0,
                          "%s: tuning \"%s\" changed the bits", tu_label(), tunings[t]);
            clattn_context_free(other); /* (its buffers, tracked, go at the test's end) */
        }
    }
}
END_TEST

/* 3. One row — the last query of a sequence of 300 keys, H 4 over 2, D 32 — computed six ways. */
enum { BH = 4, BKV = 2, BD = 32, BS = 300, BBLOCK = 16 };

static void expect_row(const char *how, const float *out, const float *lse, const float *want_out,
                       const float *want_lse)
{
    ck_assert_msg(memcmp(out, want_out, BH * BD * sizeof(float)) == 0 && memcmp(lse, want_lse, BH * sizeof(float)) == 0,
                  "%s: the row %s differs from the row alone", tu_label(), how);
}

START_TEST(test_batch_invariance)
{
    const size_t dev = _i;
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("reproducible batch invariance on %s", tu_dev_spec[dev]);
    float *kv = tu_falloc(2 * BKV * BS * BD), *qs = tu_falloc(BH * BS * BD); /* K then V (BKV, BS, BD); Q of every row */
    tu_fill_uniform(kv, 2 * BKV * BS * BD, 1.0f, 81);
    tu_fill_uniform(qs, BH * BS * BD, 1.0f, 82);
    const float *k = kv, *v = kv + BKV * BS * BD;
    float *q_last = tu_falloc(BH * BD); /* (H, 1, D): the last query of each head */
    for (size_t h = 0; h < BH; h++)
        memcpy(q_last + h * BD, qs + (h * BS + BS - 1) * BD, BD * sizeof(float));
    clattn_masks m = CLATTN_MASKS_INIT;
    m.causal = CLATTN_CAUSAL_BOTTOM_RIGHT;
    clattn_sdpa_desc d = tu_sdpa_desc(1, BH, 1, BS, BD, BD);
    d.kv_heads = BKV, d.masks = &m, d.arithmetic = CLATTN_ARITHMETIC_REPRODUCIBLE;
    /* Alone: a decode step. */
    cl_mem o = tu_dev_alloc(ctx, BH * BD, NULL), l = tu_dev_alloc(ctx, BH, NULL);
    TU_ASSERT_OK(clattn_sdpa(ctx, &d, tu_dev_alloc(ctx, BH * BD, q_last), tu_dev_alloc(ctx, BKV * BS * BD, k),
                             tu_dev_alloc(ctx, BKV * BS * BD, v), NULL, o, NULL, l), ctx, "alone");
    const float *want_out = tu_dev_read_checked(ctx, o, BH * BD, "out"), *want_lse = tu_dev_read_checked(ctx, l, BH, "lse");
    /* In a prefill of all 300 rows (causal): its last row. */
    d.q_len = BS, m.causal = CLATTN_CAUSAL_TOP_LEFT;
    o = tu_dev_alloc(ctx, BH * BS * BD, NULL), l = tu_dev_alloc(ctx, BH * BS, NULL);
    TU_ASSERT_OK(clattn_sdpa(ctx, &d, tu_dev_alloc(ctx, BH * BS * BD, qs), tu_dev_alloc(ctx, BKV * BS * BD, k),
                             tu_dev_alloc(ctx, BKV * BS * BD, v), NULL, o, NULL, l), ctx, "prefill");
    const float *po = tu_dev_read_checked(ctx, o, BH * BS * BD, "out"), *pl = tu_dev_read_checked(ctx, l, BH * BS, "lse");
    float row[BH * BD], row_lse[BH];
    for (size_t h = 0; h < BH; h++) {
        memcpy(row + h * BD, po + (h * BS + BS - 1) * BD, BD * sizeof(float));
        row_lse[h] = pl[h * BS + BS - 1];
    }
    expect_row("as the last of a causal prefill of 300", row, row_lse, want_out, want_lse);
    /* Batch entry 5 of 8 decode rows over caches of 300 (the others' values random). */
    enum { NB = 8, AT = 5 };
    float *bq = tu_falloc(NB * BH * BD), *bk = tu_falloc(NB * BKV * BS * BD), *bv = tu_falloc(NB * BKV * BS * BD);
    tu_fill_uniform(bq, NB * BH * BD, 1.0f, 83);
    tu_fill_uniform(bk, NB * BKV * BS * BD, 1.0f, 84);
    tu_fill_uniform(bv, NB * BKV * BS * BD, 1.0f, 85);
    memcpy(bq + AT * BH * BD, q_last, BH * BD * sizeof(float));
    memcpy(bk + AT * BKV * BS * BD, k, BKV * BS * BD * sizeof(float));
    memcpy(bv + AT * BKV * BS * BD, v, BKV * BS * BD * sizeof(float));
    d.batch = NB, d.q_len = 1, m.causal = CLATTN_CAUSAL_BOTTOM_RIGHT;
    o = tu_dev_alloc(ctx, NB * BH * BD, NULL), l = tu_dev_alloc(ctx, NB * BH, NULL);
    TU_ASSERT_OK(clattn_sdpa(ctx, &d, tu_dev_alloc(ctx, NB * BH * BD, bq), tu_dev_alloc(ctx, NB * BKV * BS * BD, bk),
                             tu_dev_alloc(ctx, NB * BKV * BS * BD, bv), NULL, o, NULL, l), ctx, "a batch of 8");
    expect_row("in a batch of 8", tu_dev_read_checked(ctx, o, NB * BH * BD, "out") + AT * BH * BD,
               tu_dev_read_checked(ctx, l, NB * BH, "lse") + AT * BH, want_out, want_lse);
    /* Sequence 2 of a ragged batch of 6 (rows, heads, D): 1 to 40 query rows, 50 to 350 keys each. */
    enum { NR = 6, RAT = 2 };
    size_t qst[NR + 1] = {0}, kst[NR + 1] = {0};
    for (size_t b = 0; b < NR; b++) {
        qst[b + 1] = qst[b] + (b == RAT ? 1 : 1 + b * 7);
        kst[b + 1] = kst[b] + (b == RAT ? BS : 50 + b * 60);
    }
    float *rq = tu_falloc(qst[NR] * BH * BD), *rk = tu_falloc(kst[NR] * BKV * BD), *rv = tu_falloc(kst[NR] * BKV * BD);
    tu_fill_uniform(rq, qst[NR] * BH * BD, 1.0f, 86);
    tu_fill_uniform(rk, kst[NR] * BKV * BD, 1.0f, 87);
    tu_fill_uniform(rv, kst[NR] * BKV * BD, 1.0f, 88);
    for (size_t h = 0; h < BH; h++)
        memcpy(rq + (qst[RAT] * BH + h) * BD, q_last + h * BD, BD * sizeof(float));
    for (size_t j = 0; j < BS; j++)
        for (size_t g = 0; g < BKV; g++) {
            memcpy(rk + ((kst[RAT] + j) * BKV + g) * BD, k + (g * BS + j) * BD, BD * sizeof(float));
            memcpy(rv + ((kst[RAT] + j) * BKV + g) * BD, v + (g * BS + j) * BD, BD * sizeof(float));
        }
    clattn_ragged r = CLATTN_RAGGED_INIT;
    r.q_starts = qst, r.k_starts = kst;
    d.batch = NR, d.q_len = 0, d.kv_len = 0;
    o = tu_dev_alloc(ctx, qst[NR] * BH * BD, NULL), l = tu_dev_alloc(ctx, qst[NR] * BH, NULL);
    TU_ASSERT_OK(clattn_sdpa_ragged(ctx, &d, &r, tu_dev_alloc(ctx, qst[NR] * BH * BD, rq),
                                    tu_dev_alloc(ctx, kst[NR] * BKV * BD, rk), tu_dev_alloc(ctx, kst[NR] * BKV * BD, rv),
                                    NULL, o, l), ctx, "ragged");
    expect_row("in a ragged batch of 6", tu_dev_read_checked(ctx, o, qst[NR] * BH * BD, "out") + qst[RAT] * BH * BD,
               tu_dev_read_checked(ctx, l, qst[NR] * BH, "lse") + qst[RAT] * BH, want_out, want_lse);
    /* Through a paged cache: blocks of 16 rows in reverse order. */
    enum { NBLK = (BS + BBLOCK - 1) / BBLOCK };
    float *pk = tu_falloc(NBLK * BKV * BBLOCK * BD), *pv = tu_falloc(NBLK * BKV * BBLOCK * BD);
    int table[NBLK];
    for (size_t t = 0; t < NBLK; t++)
        table[t] = (int)(NBLK - 1 - t);
    for (size_t j = 0; j < BS; j++)
        for (size_t g = 0; g < BKV; g++) {
            const size_t at = (((size_t)table[j / BBLOCK] * BKV + g) * BBLOCK + j % BBLOCK) * BD;
            memcpy(pk + at, k + (g * BS + j) * BD, BD * sizeof(float));
            memcpy(pv + at, v + (g * BS + j) * BD, BD * sizeof(float));
        }
    clattn_paged_cache cache = CLATTN_PAGED_CACHE_INIT;
    cache.k_pool = tu_dev_alloc(ctx, NBLK * BKV * BBLOCK * BD, pk);
    cache.v_pool = tu_dev_alloc(ctx, NBLK * BKV * BBLOCK * BD, pv);
    cache.blocks = NBLK, cache.block_size = BBLOCK, cache.max_blocks = NBLK;
    cache.block_table = tu_dev_alloc(ctx, NBLK, (const float *)table);
    const size_t length[1] = {BS};
    d.batch = 1, d.q_len = 1, d.kv_len = 0;
    o = tu_dev_alloc(ctx, BH * BD, NULL), l = tu_dev_alloc(ctx, BH, NULL);
    TU_ASSERT_OK(clattn_sdpa_paged(ctx, &d, &cache, length, tu_dev_alloc(ctx, BH * BD, q_last), NULL, o, l), ctx,
                 "paged");
    expect_row("through a paged cache", tu_dev_read_checked(ctx, o, BH * BD, "out"), tu_dev_read_checked(ctx, l, BH, "lse"),
               want_out, want_lse);
}
END_TEST

/* 4. CLATTN_REPRODUCIBLE=1 when a context is made: its calls without desc.arithmetic are reproducible. */
START_TEST(test_environment)
{
    const size_t dev = _i;
    tu_set_label("CLATTN_REPRODUCIBLE=1 on %s", tu_dev_spec[dev]);
    inputs *in = tu_track_malloc(sizeof *in);
    make(tu_ctx[dev], &cases[12], in, 700 + 12 * 10);
    unsigned char *out;
    float *lse;
    cl_mem o;
    run(tu_ctx[dev], in, CLATTN_ALGORITHM_AUTO, &o, &out, &lse);
    static const char *const names[1] = {"CLATTN_REPRODUCIBLE"};
    tu_env_save(names, 1);
    setenv("CLATTN_REPRODUCIBLE", "1", 1);
    clattn_context *ctx = NULL;
    clattn_context_options opts = CLATTN_CONTEXT_OPTIONS_INIT;
    opts.device = tu_dev_spec[dev];
    TU_ASSERT_OK(clattn_context_create_with_options(&ctx, &opts), NULL, "a context under CLATTN_REPRODUCIBLE=1");
    tu_env_restore();
    inputs *again = tu_track_malloc(sizeof *again);
    make(ctx, &cases[12], again, 700 + 12 * 10);
    again->d.arithmetic = CLATTN_ARITHMETIC_DEFAULT;
    unsigned char *o2;
    float *l2;
    cl_mem unused;
    run(ctx, again, CLATTN_ALGORITHM_FUSED, &unused, &o2, &l2);
    ck_assert_msg(memcmp(o2, out, out_bytes(in)) == 0 && memcmp(l2, lse, in->nl * 4) == 0,
                  "%s: the context's call is not the reproducible one", tu_label());
    clattn_context_free(ctx);
}
END_TEST

/* 5. What does not take it yet refuses it. */
START_TEST(test_refusals)
{
    const size_t dev = _i;
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("reproducible refusals on %s", tu_dev_spec[dev]);
    inputs *in = tu_track_malloc(sizeof *in);
    make(ctx, &cases[0], in, 700);
    const rcase *c = &cases[0];
    cl_mem out = tu_dev_alloc(ctx, in->no, NULL), w = tu_dev_alloc(ctx, c->B * c->H * c->L * c->S, NULL);
    tu_refused(ctx, clattn_sdpa(ctx, &in->d, in->qm, in->km, in->vm, NULL, out, w, NULL), CLATTN_ERROR_INVALID_VALUE,
               "the weights output", out, in->no);
    cl_mem lse = tu_dev_alloc(ctx, in->nl, NULL), g[3] = {tu_dev_alloc(ctx, in->nq, NULL), tu_dev_alloc(ctx, in->nk, NULL),
                                                          tu_dev_alloc(ctx, in->nv, NULL)};
    tu_refused(ctx, clattn_sdpa_backward(ctx, &in->d, in->qm, in->km, in->vm, NULL, out, lse, out, g[0], g[1], g[2], NULL),
               CLATTN_ERROR_INVALID_VALUE, "the backward pass", g[1], in->nk);
    clattn_sdpa_desc dd = in->d;
    dd.softmax_precision = CLATTN_SOFTMAX_DOUBLE;
    tu_refused(ctx, clattn_sdpa(ctx, &dd, in->qm, in->km, in->vm, NULL, out, NULL, NULL), CLATTN_ERROR_INVALID_VALUE,
               "the double softmax", out, in->no);
    const int idx[2 * 17 * 4] = {0};
    in->d.masks = NULL; /* (the sparse call takes none) */
    tu_refused(ctx, clattn_sdpa_sparse(ctx, &in->d, 4, tu_dev_alloc(ctx, 2 * 17 * 4, (const float *)idx), in->qm, in->km,
                                       in->vm, NULL, NULL, out, NULL),
               CLATTN_ERROR_INVALID_VALUE, "top-k sparse attention", out, in->no);
}
END_TEST

static Suite *reproducible_suite(void)
{
    Suite *s = suite_create("reproducible");
    tu_add_loop(s, "cases", test_cases, N_CASES * tu_ndev);
    tu_add_loop(s, "tunings", test_tunings, tu_ndev);
    tu_add_loop(s, "batch_invariance", test_batch_invariance, tu_ndev);
    tu_add_loop(s, "environment", test_environment, tu_ndev);
    tu_add_loop(s, "refusals", test_refusals, tu_ndev);
    return s;
}

int main(void) { return tu_main(reproducible_suite); }
