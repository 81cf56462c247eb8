/*
 * Device groups (clattn_group_*), run with PoCL showing two devices (POCL_DEVICES="pthread basic"; in the
 * group suite, which the sanitizer build runs too, "pthread pthread"), against the fp64 reference:
 *
 *  0. devices: at least two (a group of one device tests nothing of the split), and exactly as many PoCL
 *     devices as POCL_DEVICES names: a device dropped on the way must fail here, not pass on the other.
 *  1. create: "all", spec lists, the shares (positive, summing to 1, kept in the cache: a second group
 *     reads them), and the refusals (empty specs, an empty entry, a device twice, an unknown device).
 *  2. table: batch splits (B ≥ devices) and key splits (B = 1: decode, long rows) with GQA, causal masks
 *     of both kinds, key lengths, query offsets, windows, sinks, ALiBi, soft-capping, additive masks
 *     (shared, per batch and head, narrower than S), fully masked rows and a head size of 520 — each equal to the reference
 *     within the conformance tolerance, out and log-sum-exp.
 *  3. layers: clattn_group_mha_host by batches and by query rows (self- and cross-attention, causal of
 *     both kinds, GQA, additive masks, with and without W_O) against the fp64 layer reference.
 *  3b. formats: K and V in block formats and FP8 (q4_0, u4_g32, q8_0, fp8_e5m2, u8_g64, fp8_e4m3, u4_g128)
 *     split as bytes by batches and by keys, against the reference over the dequantised values.
 *  4. bad: NULL group or arrays, a float16 Q, row-scaled K/V (int8, FP8 with scales), a token format split
 *     over keys, a block format whose
 *     rows hold no whole block, a bad descriptor (its detail reaches the caller).
 *  5. mods: programmable attention over the group — mods and a block mask made on the first member, used by
 *     every member (their copies), by batches and by keys (the functions must see the whole call's
 *     batches and positions: a score_mod reading a per-batch tensor, a mask_mod a per-position one)
 *     against the fp64 reference, layers by batches and by rows against one context's call, a block mask
 *     of other mods refused.
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "formats_ref.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

START_TEST(test_devices)
{
    tu_set_label("the devices of the group test");
    const char *pocl_devices = getenv("POCL_DEVICES");
    size_t named = 0, pocl = 0;
    for (const char *p = pocl_devices ? pocl_devices : ""; *p;) {
        while (*p == ' ')
            p++;
        if (*p)
            named++;
        while (*p && *p != ' ')
            p++;
    }
    for (size_t i = 0; i < tu_ndev; i++) {
        printf("device %s: %s (%s)\n", tu_dev_spec[i], tu_dev[i].name, tu_dev[i].platform_name);
        pocl += strstr(tu_dev[i].platform_name, "Portable Computing Language") != NULL;
    }
    ck_assert_msg(tu_ndev >= 2, "%zu device(s) with a context: a group needs two (meson runs this test with "
                  "POCL_DEVICES=\"%s\")", tu_ndev, pocl_devices ? pocl_devices : "");
    ck_assert_msg(named == 0 || pocl == named, "POCL_DEVICES=\"%s\" names %zu devices, %zu PoCL devices have a context",
                  pocl_devices, named, pocl);
}
END_TEST

START_TEST(test_create)
{
    tu_set_label("clattn_group_create");
    clattn_group *g = NULL;
    clattn_status st = clattn_group_create(&g, "all");
    TU_ASSERT_OK(st, NULL, "clattn_group_create(all)");
    ck_assert_msg(clattn_group_size(g) == tu_ndev, "all: %zu devices, expected %zu", clattn_group_size(g), tu_ndev);
    double total = 0.0;
    for (size_t i = 0; i < clattn_group_size(g); i++) {
        const double share = clattn_group_share(g, i);
        ck_assert_msg(share > 0.0 && share <= 1.0, "share %zu = %g", i, share);
        total += share;
        ck_assert(clattn_group_context(g, i) != NULL);
    }
    ck_assert_msg(fabs(total - 1.0) < 1e-9, "shares sum to %g", total);
    ck_assert(clattn_group_context(g, tu_ndev) == NULL && clattn_group_share(g, tu_ndev) == 0.0);
    const double first = clattn_group_share(g, 0);
    clattn_group_free(g);
    /* The same devices by list: the measured speeds come back from the cache, so the shares agree. */
    char list[256] = "";
    size_t used = 0;
    for (size_t i = 0; i < tu_ndev && i < 4; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%.31s", i ? "," : "", tu_dev_spec[i]);
    st = clattn_group_create(&g, list);
    TU_ASSERT_OK(st, NULL, "clattn_group_create(list)");
    ck_assert_msg(clattn_group_share(g, 0) == first, "shares differ between groups: %g and %g",
                  clattn_group_share(g, 0), first);
    /* Speeds set: the shares follow them; a device out of range, a speed not positive and finite, refused. */
    for (size_t i = 0; i < clattn_group_size(g); i++)
        TU_ASSERT_OK(clattn_group_set_speed(g, i, (double)(i + 1)), NULL, "clattn_group_set_speed");
    const double n = (double)clattn_group_size(g);
    ck_assert_msg(fabs(clattn_group_share(g, 0) - 2.0 / (n * (n + 1))) < 1e-12, "share 0 after set_speed: %g",
                  clattn_group_share(g, 0));
    ck_assert(clattn_group_set_speed(g, clattn_group_size(g), 1.0) == CLATTN_ERROR_INVALID_VALUE);
    ck_assert(clattn_group_set_speed(g, 0, 0.0) == CLATTN_ERROR_INVALID_VALUE);
    ck_assert(clattn_group_set_speed(g, 0, NAN) == CLATTN_ERROR_INVALID_VALUE);
    ck_assert(clattn_group_set_speed(NULL, 0, 1.0) == CLATTN_ERROR_NULL_ARGUMENT);
    clattn_group_free(g);
    const struct {
        const char *specs;
        clattn_status want;
    } bad[] = {
        {"", CLATTN_ERROR_INVALID_VALUE},
        {"0:0,,0:0", CLATTN_ERROR_INVALID_VALUE},
        {"0:0,0:0", CLATTN_ERROR_INVALID_VALUE},
        {"0:0,9:9", CLATTN_ERROR_DEVICE_NOT_FOUND},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        g = (clattn_group *)&list; /* must be set to NULL on failure */
        st = clattn_group_create(&g, bad[i].specs);
        ck_assert_msg(st == bad[i].want && g == NULL, "\"%s\": %s (%s)", bad[i].specs, clattn_status_string(st),
                      clattn_last_error(NULL));
    }
    ck_assert(clattn_group_create(&g, NULL) == CLATTN_ERROR_INVALID_VALUE);
    ck_assert(clattn_group_create(NULL, "all") == CLATTN_ERROR_NULL_ARGUMENT);
    clattn_group_free(NULL);
}
END_TEST

typedef struct {
    const char *name;
    size_t B, H, KVH, L, S, D;
    clattn_causal causal;
    int key_lengths, offsets, sinks, alibi;
    long long win_left; /* −2: none */
    float softcap;
    clattn_mask_layout mask;
    size_t mask_kv_len;
} gcase;

static const gcase cases[] = {
    {"batches: B 3, GQA 4/2, causal, key lengths, sinks, window", 3, 4, 2, 37, 53, 24, TL, 1, 0, 1, 0, 20, 0, M0, 0},
    {"keys: decode L 1, S 3001, GQA 8/2, bottom-right, key lengths, sinks, ALiBi", 1, 8, 2, 1, 3001, 64, BR, 1, 0, 1,
     1, -2, 0, M0, 0},
    {"keys: L 20, S 301, (B,H,L,S) mask narrower than S, softcap", 1, 3, 3, 20, 301, 16, TL, 0, 0, 0, 0, -2, 4.0f, MBH,
     250},
    {"keys: L 5 at offset 800 of S 900, window (100, 0)", 1, 2, 1, 5, 900, 32, TL, 0, 1, 0, 0, 100, 0, M0, 0},
    {"keys: S < L bottom-right (fully masked rows), (L,S) mask", 1, 2, 2, 40, 17, 8, BR, 0, 0, 0, 0, -2, 0, MLS, 0},
    {"keys: head size 520 (past the 512 of the old host merge), L 3, S 77, bottom-right, key lengths, sinks", 1, 2, 1,
     3, 77, 520, BR, 1, 0, 1, 0, -2, 0, M0, 0},
};
#define NCASES (sizeof cases / sizeof cases[0])

static clattn_group *group;

/* Q of nq values and K, V of nk, uniform in [−1, 1], from seeds seed, seed + 1, seed + 2. */
static void random_qkv(size_t nq, size_t nk, uint64_t seed, float **q, float **k, float **v)
{
    *q = tu_falloc(nq), *k = tu_falloc(nk), *v = tu_falloc(nk);
    tu_fill_uniform(*q, nq, 1.0f, seed);
    tu_fill_uniform(*k, nk, 1.0f, seed + 1);
    tu_fill_uniform(*v, nk, 1.0f, seed + 2);
}

START_TEST(test_table)
{
    const gcase *c = &cases[_i];
    tu_set_label("group \"%s\"", c->name);
    clattn_sdpa_desc d = tu_sdpa_desc(c->B, c->H, c->L, c->S, c->D, 0);
    d.kv_heads = c->KVH;
    d.softcap = c->softcap;
    size_t lengths[4];
    long long offsets[4];
    for (size_t b = 0; b < c->B; b++) {
        lengths[b] = b == 1 ? c->S / 3 : c->S - 7;
        offsets[b] = 800;
    }
    tu_variants var;
    tu_variants_apply(&d, &var, c->causal, c->key_lengths ? lengths : NULL, c->offsets ? offsets : NULL, c->win_left,
                      c->sinks, c->alibi);
    clattn_masks m = var.masks; /* (the additive mask joins below) */
    float *mask = NULL, *ref_mask = NULL;
    if (c->mask != M0) {
        m.additive = c->mask;
        m.mask_kv_len = c->mask_kv_len;
        const size_t cols = c->mask_kv_len ? c->mask_kv_len : c->S;
        size_t n;
        mask = ref_mask = tu_make_mask(c->mask, c->B, c->H, c->L, cols, TU_MASKF_INF, 5, &n);
        if (cols < c->S) { /* the reference takes masks S wide: the columns past a narrower one are −inf */
            const size_t rows = n / cols;
            ref_mask = tu_falloc(rows * c->S);
            for (size_t r = 0; r < rows; r++)
                for (size_t j = 0; j < c->S; j++)
                    ref_mask[r * c->S + j] = j < cols ? mask[r * cols + j] : -INFINITY;
        }
    }
    d.masks = &m;
    const size_t nq = c->B * c->H * c->L * c->D, nk = c->B * c->KVH * c->S * c->D, nl = c->B * c->H * c->L;
    float *q, *k, *v;
    random_qkv(nq, nk, 1 + _i, &q, &k, &v);
    float *o = tu_host_alloc(nq, NULL), *l = tu_host_alloc(nl, NULL);
    clattn_status st = clattn_group_sdpa_host(group, &d, q, k, v, mask, o, l);
    TU_ASSERT_OK(st, NULL, "clattn_group_sdpa_host");
    tu_host_check_guard(o, nq, "out");
    tu_host_check_guard(l, nl, "lse");
    double *ro = tu_dalloc(nq), *rl = tu_dalloc(nl);
    clattn_masks rm = m;
    rm.mask_kv_len = 0;
    clattn_sdpa_desc rd = d;
    rd.masks = &rm;
    ref_sdpa(&rd, q, k, v, ref_mask, ro, NULL, rl);
    check_close_named("out", o, ro, nq, NULL);
    check_close_named("lse", l, rl, nl, NULL);
}
END_TEST

/* K and V in the storage formats (since 0.15): their bytes split by batches and by keys as they are (a
 * block format's rows whole), never widened on the host, each part a clattn_sdpa_host over its bytes —
 * against the fp64 reference over the dequantised values, and one context's clattn_sdpa_host. */
typedef struct {
    const char *name;
    size_t B, H, KVH, L, S, D;
    clattn_dtype k, v;
    clattn_causal causal;
} fcase;

static const fcase format_cases[] = {
    {"formats, batches: B 3, q4_0 K, u4_g32 V, GQA 4/2, causal", 3, 4, 2, 19, 45, 64, CLATTN_Q4_0, CLATTN_U4_G32, TL},
    {"formats, keys: decode L 1, S 1001, q8_0 K, fp8_e5m2 V, GQA 8/2", 1, 8, 2, 1, 1001, 64, CLATTN_Q8_0,
     CLATTN_FP8_E5M2, BR},
    {"formats, keys: L 20, S 301, u8_g64 K, q4_0 V", 1, 3, 3, 20, 301, 64, CLATTN_U8_G64, CLATTN_Q4_0, NONE},
    {"formats, keys: L 7, S 133, fp8_e4m3 K, u4_g128 V, D 128", 1, 2, 1, 7, 133, 128, CLATTN_FP8_E4M3, CLATTN_U4_G128,
     BR},
    {"formats, batches: B 3, S 70, u2_t32 K, u4_t32 V (KIVI's chunks)", 3, 4, 2, 5, 70, 32, CLATTN_U2_T32, CLATTN_U4_T32,
     BR},
};
#define NFORMATS (sizeof format_cases / sizeof format_cases[0])

/* x (n values, rows of `row`, heads of `rows` rows) quantised into new bytes — a token format's as the
 * chunks an append of every row writes — and x replaced by the values those bytes hold. */
static void *quantised_copy(clattn_dtype type, float *x, size_t n, size_t row, size_t rows)
{
    const size_t heads = n / (row * rows), head = clattn_dtype_head_bytes(type, rows, row), bytes = heads * head;
    ck_assert(bytes > 0);
    unsigned char *q = (unsigned char *)tu_falloc((bytes + sizeof(float) - 1) / sizeof(float));
    if (!fref_is_token(type)) {
        fref_quantise(type, x, n, row, q, NULL);
        for (size_t i = 0; i < n; i++)
            x[i] = fref_value(type, q, i);
        return q;
    }
    for (size_t h = 0; h < heads; h++) {
        fref_token_append(type, q + h * head, rows, row, 0, x + h * rows * row, rows);
        for (size_t i = 0; i < rows * row; i++)
            x[h * rows * row + i] = (float)fref_token_value(type, q + h * head, rows, row, i / row, i % row);
    }
    return q;
}

START_TEST(test_formats)
{
    const fcase *c = &format_cases[_i];
    tu_set_label("group \"%s\"", c->name);
    clattn_sdpa_desc d = tu_sdpa_desc(c->B, c->H, c->L, c->S, c->D, 0);
    d.kv_heads = c->KVH;
    clattn_masks m = CLATTN_MASKS_INIT;
    m.causal = c->causal;
    d.masks = &m;
    const size_t nq = c->B * c->H * c->L * c->D, nk = c->B * c->KVH * c->S * c->D, nl = c->B * c->H * c->L;
    float *q, *k, *v;
    random_qkv(nq, nk, 41 + _i, &q, &k, &v);
    const void *kq = quantised_copy(c->k, k, nk, c->D, c->S), *vq = quantised_copy(c->v, v, nk, c->D, c->S);
    double *ro = tu_dalloc(nq), *rl = tu_dalloc(nl);
    ref_sdpa(&d, q, k, v, NULL, ro, NULL, rl); /* (d's types still float32: the dequantised values) */
    d.k_dtype = c->k;
    d.v_dtype = c->v;
    float *o = tu_host_alloc(nq, NULL), *l = tu_host_alloc(nl, NULL);
    TU_ASSERT_OK(clattn_group_sdpa_host(group, &d, q, kq, vq, NULL, o, l), NULL, "clattn_group_sdpa_host");
    tu_host_check_guard(o, nq, "out");
    tu_host_check_guard(l, nl, "lse");
    check_close_named("out", o, ro, nq, NULL);
    check_close_named("lse", l, rl, nl, NULL);
    clattn_context *first = clattn_group_context(group, 0);
    TU_ASSERT_OK(clattn_sdpa_host(first, &d, q, kq, vq, NULL, o, NULL, l), first, "clattn_sdpa_host");
    check_close_named("one context's out", o, ro, nq, NULL);
    check_close_named("one context's lse", l, rl, nl, NULL);
}
END_TEST

/* Layers on the group: runs of batches (B ≥ devices), and runs of query rows of one sequence (self- and
 * cross-attention, causal, GQA, an additive (B,H,L,S) mask, biases, with and without W_O). */
typedef struct {
    const char *name;
    size_t B, L, S, DM, DKV, H, KVH, DK, DOUT;
    int cross, wo;
    clattn_causal causal;
    clattn_mask_layout mask;
} lcase;

static const lcase layer_cases[] = {
    {"layer batches: B 3, causal, W_O", 3, 11, 0, 24, 0, 4, 0, 6, 20, 0, 1, TL, M0},
    {"layer rows: L 37, causal, GQA 4/2, (B,H,L,S) mask, W_O", 1, 37, 0, 24, 0, 4, 2, 6, 24, 0, 1, TL, MBH},
    {"layer rows: cross-attention S 29, (L,S) mask, no W_O", 1, 21, 29, 16, 12, 2, 0, 8, 0, 1, 0, NONE, MLS},
    {"layer rows: bottom-right causal, no W_O", 1, 33, 0, 16, 0, 2, 1, 8, 0, 0, 0, BR, M0},
};
#define NLAYERS (sizeof layer_cases / sizeof layer_cases[0])

START_TEST(test_layers)
{
    const lcase *c = &layer_cases[_i];
    tu_set_label("group \"%s\"", c->name);
    const size_t S = c->cross ? c->S : c->L, DKV = c->cross ? c->DKV : c->DM, KVH = c->KVH ? c->KVH : c->H;
    clattn_mha_desc d = CLATTN_MHA_DESC_INIT;
    d.batch = c->B;
    d.q_len = c->L;
    d.kv_len = c->cross ? S : 0;
    d.model_dim = c->DM;
    d.kv_dim = c->cross ? DKV : 0;
    d.heads = c->H;
    d.kv_heads = c->KVH;
    d.qk_dim = c->DK;
    d.out_dim = c->DOUT;
    clattn_masks m = CLATTN_MASKS_INIT;
    m.causal = c->causal;
    float *mask = NULL;
    if (c->mask != M0) {
        size_t n;
        m.additive = c->mask;
        mask = tu_make_mask(c->mask, c->B, c->H, c->L, S, TU_MASKF_INF, 9, &n);
    }
    d.masks = &m;
    const size_t hk = c->H * c->DK, kk = KVH * c->DK, dout = c->wo ? c->DOUT : hk;
    const size_t sizes[10] = {c->B * c->L * c->DM, c->B * S * DKV, c->DM * hk, hk, DKV * kk, kk, DKV * kk, kk,
                              hk * c->DOUT, c->DOUT};
    const float *t[10];
    for (int i = 0; i < 10; i++) {
        float *f = tu_falloc(sizes[i]);
        tu_fill_uniform(f, sizes[i], 0.5f, 30 + i);
        t[i] = f;
    }
    clattn_mha_host_weights w = CLATTN_MHA_HOST_WEIGHTS_INIT;
    w.w_q = t[2]; w.b_q = t[3]; w.w_k = t[4]; w.b_k = t[5]; w.w_v = t[6]; w.b_v = t[7];
    if (c->wo) {
        w.w_o = t[8];
        w.b_o = t[9];
    }
    const size_t no = c->B * c->L * dout;
    float *o = tu_host_alloc(no, NULL);
    clattn_status st = clattn_group_mha_host(group, &d, t[0], c->cross ? t[1] : NULL, &w, mask, o);
    TU_ASSERT_OK(st, NULL, "clattn_group_mha_host");
    tu_host_check_guard(o, no, "out");
    double *ro = tu_dalloc(no);
    ref_mha(&d, t[0], c->cross ? t[1] : NULL, &w, mask, ro, NULL);
    check_close_named("out", o, ro, no, NULL);
}
END_TEST

/* Programmable attention over the group: documents (per-position ids) hiding keys causally, scores scaled
 * per batch — so a part that saw its own batches or keys numbered from 0 would read the wrong entries. */
static const char group_mods_source[] =
    "float score_mod(float s, int b, int h, long q, long k, __global const int *doc, __global const float *bs)\n"
    "{ return s * bs[b] + 0.01f * (float)h; }\n"
    "bool mask_mod(int b, int h, long q, long k, __global const int *doc, __global const float *bs)\n"
    "{ return doc[q] == doc[k] && k <= q; }\n";

typedef struct group_mod_data {
    int doc[512];
    float batch_scale[8];
} group_mod_data;

static double ref_group_score(double s, int b, int h, long long q, long long k, const void *u)
{
    (void)q, (void)k;
    return s * (double)((const group_mod_data *)u)->batch_scale[b] + 0.01 * (double)(float)h;
}
static int ref_group_mask(int b, int h, long long q, long long k, const void *u)
{
    (void)b, (void)h;
    const int *doc = ((const group_mod_data *)u)->doc;
    return doc[q] == doc[k] && k <= q;
}

typedef struct {
    const char *name;
    size_t B, H, L, S; /* L < S: the queries are the last L positions (query offsets S − L) */
    int block_mask, layer;
} mcase;

static const mcase mod_cases[] = {
    {"mods, batches: B 3, L = S = 29", 3, 2, 29, 29, 0, 0},
    {"mods and block mask, batches: B 4, L = S = 45", 4, 2, 45, 45, 1, 0},
    {"mods and block mask, keys: B 1, L 13 at the end of S 301", 1, 2, 13, 301, 1, 0},
    {"mods, keys: B 1, L = S = 150", 1, 3, 150, 150, 0, 0},
    {"layer, mods and block mask, batches: B 3, L 21", 3, 2, 21, 21, 1, 1},
    {"layer, mods and block mask, rows: B 1, L 57", 1, 2, 57, 57, 1, 1},
};
#define NMODS (sizeof mod_cases / sizeof mod_cases[0])

START_TEST(test_mods)
{
    const mcase *c = &mod_cases[_i];
    tu_set_label("group \"%s\"", c->name);
    clattn_context *first = clattn_group_context(group, 0);
    static group_mod_data data;
    for (size_t i = 0, id = 0; i < c->S;) /* documents of 1 to 23 positions */
        for (size_t n = 1 + (id++ * 11 + 5) % 23; n-- && i < c->S;)
            data.doc[i++] = (int)id;
    for (size_t b = 0; b < c->B; b++)
        data.batch_scale[b] = 0.5f + 0.4f * (float)b;
    clattn_mod_aux aux[2] = {
        {"doc", CLATTN_AUX_INT, tu_dev_alloc(first, c->S, (const float *)data.doc), CLATTN_AUX_BY_POSITION, 0},
        {"bs", CLATTN_AUX_FLOAT, tu_dev_alloc(first, c->B, data.batch_scale), CLATTN_AUX_BY_BATCH, 0}};
    clattn_mods_desc md = CLATTN_MODS_DESC_INIT;
    md.source = group_mods_source;
    md.aux = aux;
    md.aux_count = 2;
    clattn_mods *mods = NULL, *other = NULL;
    TU_ASSERT_OK(clattn_mods_create(first, &md, &mods), first, "clattn_mods_create");
    clattn_block_mask *blocks = NULL;
    if (c->block_mask) {
        clattn_block_mask_desc bd = CLATTN_BLOCK_MASK_DESC_INIT;
        bd.batch = c->B;
        bd.q_len = c->S, bd.kv_len = c->S;
        bd.block_q = bd.block_k = 16;
        bd.mods = mods;
        TU_ASSERT_OK(clattn_block_mask_create(first, &bd, &blocks), first, "clattn_block_mask_create");
    }
    const ref_mods rm = {ref_group_score, ref_group_mask, &data};
    long long offsets[8];
    for (size_t b = 0; b < c->B; b++)
        offsets[b] = (long long)(c->S - c->L);
    clattn_masks m = CLATTN_MASKS_INIT;
    m.query_offsets = c->L < c->S ? offsets : NULL;
    if (!c->layer) {
        clattn_sdpa_desc d = tu_sdpa_desc(c->B, c->H, c->L, c->S, 16, 0);
        d.masks = &m;
        const size_t nq = c->B * c->H * c->L * 16, nk = c->B * c->H * c->S * 16, nl = c->B * c->H * c->L;
        float *q = tu_falloc(nq), *k = tu_falloc(nk), *v = tu_falloc(nk);
        tu_fill_uniform(q, nq, 1.5f, 11 + _i);
        tu_fill_uniform(k, nk, 1.5f, 12 + _i);
        tu_fill_uniform(v, nk, 1.0f, 13 + _i);
        double *ro = tu_dalloc(nq), *rl = tu_dalloc(nl);
        ref_sdpa_mods(&d, &rm, q, k, v, NULL, ro, NULL, rl);
        d.mods = mods;
        d.block_mask = blocks;
        float *o = tu_host_alloc(nq, NULL), *l = tu_host_alloc(nl, NULL);
        for (int twice = 0; twice < 2; twice++) { /* the second call reuses the members' copies */
            TU_ASSERT_OK(clattn_group_sdpa_host(group, &d, q, k, v, NULL, o, l), NULL, "clattn_group_sdpa_host");
            tu_host_check_guard(o, nq, "out");
            check_close_named("out", o, ro, nq, NULL);
            check_close_named("lse", l, rl, nl, NULL);
        }
        if (blocks) { /* a block mask of other mods than the call's: refused, nothing written */
            TU_ASSERT_OK(clattn_mods_create(first, &md, &other), first, "clattn_mods_create (other)");
            d.mods = other;
            float *untouched = tu_host_alloc(nq, NULL);
            const clattn_status st = clattn_group_sdpa_host(group, &d, q, k, v, NULL, untouched, NULL);
            ck_assert_msg(st == CLATTN_ERROR_INVALID_VALUE && strstr(clattn_last_error(NULL), "other mods"),
                          "%s: %s (%s)", tu_label(), clattn_status_string(st), clattn_last_error(NULL));
            ck_assert_msg(tu_host_all_sentinel(untouched, nq), "%s: a refused call wrote its output", tu_label());
        }
    } else { /* a layer: the group's result against one context's (the mods on the layer: test_mods) */
        clattn_mha_desc d = CLATTN_MHA_DESC_INIT;
        d.batch = c->B;
        d.q_len = c->L;
        d.model_dim = 24;
        d.heads = c->H;
        d.qk_dim = 8;
        d.masks = &m;
        d.mods = mods;
        d.block_mask = blocks;
        const size_t hk = c->H * 8, nx = c->B * c->L * 24, no = c->B * c->L * hk;
        float *x = tu_falloc(nx), *wq = tu_falloc(24 * hk), *wk = tu_falloc(24 * hk), *wv = tu_falloc(24 * hk);
        tu_fill_uniform(x, nx, 1.0f, 21 + _i);
        tu_fill_uniform(wq, 24 * hk, 0.5f, 22);
        tu_fill_uniform(wk, 24 * hk, 0.5f, 23);
        tu_fill_uniform(wv, 24 * hk, 0.5f, 24);
        clattn_mha_host_weights w = CLATTN_MHA_HOST_WEIGHTS_INIT;
        w.w_q = wq, w.w_k = wk, w.w_v = wv;
        float *o = tu_host_alloc(no, NULL), *one = tu_host_alloc(no, NULL);
        TU_ASSERT_OK(clattn_group_mha_host(group, &d, x, NULL, &w, NULL, o), NULL, "clattn_group_mha_host");
        TU_ASSERT_OK(clattn_mha_host(first, &d, x, NULL, &w, NULL, one, NULL), first, "clattn_mha_host");
        double *as_double = tu_dalloc(no);
        for (size_t i = 0; i < no; i++)
            as_double[i] = (double)one[i];
        check_close_named("out against one context", o, as_double, no, NULL);
        /* ... and the mods matter: without them the layer differs. */
        d.mods = NULL, d.block_mask = NULL;
        TU_ASSERT_OK(clattn_mha_host(first, &d, x, NULL, &w, NULL, one, NULL), first, "clattn_mha_host");
        double largest = 0;
        for (size_t i = 0; i < no; i++)
            largest = fmax(largest, fabs((double)one[i] - as_double[i]));
        ck_assert_msg(largest > 1e-3, "%s: the mods change nothing (%g)", tu_label(), largest);
    }
    clattn_block_mask_free(blocks);
    clattn_mods_free(other);
    clattn_mods_free(mods); /* (the aux buffers go with the test's other allocations) */
}
END_TEST

/* A group whose kernels do not build (common.cl broken, so every program fails, on every device): the
 * call that first runs them fails, naming the device — creation when it measures the devices (cache off),
 * else the first attention call (the speeds read back from the cache). The device is not dropped. */
START_TEST(test_broken_kernels)
{
    tu_set_label("group whose kernels do not build");
    static const char *const names[] = {"CLATTN_KERNEL_DIR", "CLATTN_CACHE"};
    tu_env_save(names, 2);
    setenv("CLATTN_KERNEL_DIR", tu_broken_kernel_dir("common.cl"), 1);
    setenv("CLATTN_CACHE", "0", 1);
    clattn_group *g = NULL;
    clattn_status st = clattn_group_create(&g, "all");
    ck_assert_msg(st == CLATTN_ERROR_BUILD_FAILED && g == NULL, "create: %s (%s)", clattn_status_string(st),
                  clattn_last_error(NULL));
    ck_assert_msg(strstr(clattn_last_error(NULL), "device 0 of the group (") &&
                      strstr(clattn_last_error(NULL), "cannot run attention"),
                  "create's detail: %s", clattn_last_error(NULL));
    unsetenv("CLATTN_CACHE"); /* the speeds measured by test_create come back from the cache */
    st = clattn_group_create(&g, "all");
    TU_ASSERT_OK(st, NULL, "clattn_group_create with the speeds cached");
    clattn_sdpa_desc d = tu_sdpa_desc(2 * clattn_group_size(g), 2, 5, 9, 8, 0);
    const size_t n = d.batch * 2 * 9 * 8;
    float *x = tu_falloc(n), *o = tu_host_alloc(n, NULL);
    st = clattn_group_sdpa_host(g, &d, x, x, x, NULL, o, NULL);
    ck_assert_msg(st == CLATTN_ERROR_BUILD_FAILED, "call: %s (%s)", clattn_status_string(st), clattn_last_error(NULL));
    ck_assert_msg(strstr(clattn_last_error(NULL), " of the group ("), "call's detail: %s", clattn_last_error(NULL));
    clattn_group_free(g);
    tu_env_restore();
}
END_TEST

START_TEST(test_bad)
{
    tu_set_label("bad group calls");
    clattn_sdpa_desc d = tu_sdpa_desc(1, 2, 3, 10, 8, 0);
    float *x = tu_falloc(2 * 10 * 8), *o = tu_host_alloc(2 * 3 * 8, NULL);
    ck_assert(clattn_group_sdpa_host(NULL, &d, x, x, x, NULL, o, NULL) == CLATTN_ERROR_NULL_ARGUMENT);
    ck_assert(clattn_group_sdpa_host(group, &d, NULL, x, x, NULL, o, NULL) == CLATTN_ERROR_NULL_ARGUMENT);
    ck_assert(clattn_group_sdpa_host(group, NULL, x, x, x, NULL, o, NULL) == CLATTN_ERROR_NULL_ARGUMENT);
    d.q_dtype = CLATTN_FLOAT16; /* (Q and the outputs merge in float32) */
    clattn_status st = clattn_group_sdpa_host(group, &d, x, x, x, NULL, o, NULL);
    ck_assert_msg(st == CLATTN_ERROR_INVALID_VALUE && strstr(clattn_last_error(NULL), "float32"), "%s: %s",
                  clattn_status_string(st), clattn_last_error(NULL));
    d.q_dtype = CLATTN_FLOAT32;
    /* Row scales are a device buffer: int8, and FP8 given scales, stay with the cl_mem calls. */
    d.qk_dim = 32;
    d.v_dtype = CLATTN_INT8;
    st = clattn_group_sdpa_host(group, &d, x, x, x, NULL, o, NULL);
    ck_assert_msg(st == CLATTN_ERROR_INVALID_VALUE && strstr(clattn_last_error(NULL), "desc.v_dtype is int8 with row "
                  "scales"), "int8 V: %s: %s", clattn_status_string(st), clattn_last_error(NULL));
    d.v_dtype = CLATTN_FLOAT32;
    d.k_dtype = CLATTN_FP8_E4M3;
    d.k_scales = tu_dev_alloc(clattn_group_context(group, 0), 2 * 10, NULL);
    st = clattn_group_sdpa_host(group, &d, x, x, x, NULL, o, NULL);
    ck_assert_msg(st == CLATTN_ERROR_INVALID_VALUE && strstr(clattn_last_error(NULL), "fp8_e4m3 with row scales"),
                  "scaled FP8 K: %s: %s", clattn_status_string(st), clattn_last_error(NULL));
    d.k_scales = NULL;
    /* A block format's rows must hold whole blocks (libclattn's own check, reached through the group). */
    d.k_dtype = CLATTN_Q4_0;
    d.qk_dim = 8;
    st = clattn_group_sdpa_host(group, &d, x, x, x, NULL, o, NULL);
    ck_assert_msg(st == CLATTN_ERROR_INVALID_VALUE && strstr(clattn_last_error(NULL), "q4_0"), "q4_0 of 8: %s: %s",
                  clattn_status_string(st), clattn_last_error(NULL));
    /* A token format's chunks hold whole heads: a split of one batch's keys is refused. */
    d.k_dtype = CLATTN_U4_T32;
    st = clattn_group_sdpa_host(group, &d, x, x, x, NULL, o, NULL);
    ck_assert_msg(st == CLATTN_ERROR_INVALID_VALUE && strstr(clattn_last_error(NULL), "by batches only"),
                  "u4_t32 over keys: %s: %s", clattn_status_string(st), clattn_last_error(NULL));
    d.k_dtype = CLATTN_FLOAT32;
    d.heads = 0;
    st = clattn_group_sdpa_host(group, &d, x, x, x, NULL, o, NULL);
    ck_assert_msg(st == CLATTN_ERROR_ZERO_SIZE && strstr(clattn_last_error(NULL), "heads"), "%s: %s",
                  clattn_status_string(st), clattn_last_error(NULL));
    ck_assert_msg(tu_host_all_sentinel(o, 2 * 3 * 8), "a failed call wrote its output");
}
END_TEST

/* A member's creation warning (a malformed CLATTN_TILE) is gone after the next group call, failed or
 * good: every member's last warning is that call's own. */
START_TEST(test_warnings_scoped)
{
    tu_set_label("group calls clear every member's warning");
    static const char *const names[] = {"CLATTN_TILE"};
    tu_env_save(names, 1);
    setenv("CLATTN_TILE", "not-a-tile", 1);
    clattn_group *g = NULL;
    clattn_status st = clattn_group_create(&g, "all");
    tu_env_restore();
    TU_ASSERT_OK(st, NULL, "clattn_group_create with a malformed CLATTN_TILE");
    for (size_t i = 0; i < clattn_group_size(g); i++)
        ck_assert_msg(strstr(clattn_last_warning(clattn_group_context(g, i)), "CLATTN_TILE"),
                      "member %zu: no creation warning (\"%s\")", i, clattn_last_warning(clattn_group_context(g, i)));
    clattn_sdpa_desc d = tu_sdpa_desc(1, 2, 3, 10, 8, 0);
    d.heads = 0; /* a call that fails its checks */
    float *x = tu_falloc(2 * 10 * 8), *o = tu_host_alloc(2 * 3 * 8, NULL);
    st = clattn_group_sdpa_host(g, &d, x, x, x, NULL, o, NULL);
    ck_assert_msg(st == CLATTN_ERROR_ZERO_SIZE, "%s: %s", clattn_status_string(st), clattn_last_error(NULL));
    for (size_t i = 0; i < clattn_group_size(g); i++)
        ck_assert_msg(!*clattn_last_warning(clattn_group_context(g, i)),
                      "member %zu after a failed group call still warns \"%s\"", i,
                      clattn_last_warning(clattn_group_context(g, i)));
    clattn_group_free(g);
}
END_TEST

static Suite *make_suite(void)
{
    clattn_status st = clattn_group_create(&group, "all");
    if (st != CLATTN_SUCCESS) /* (the cases then fail on the NULL group) */
        fprintf(stderr, "clattn_group_create(all): %s: %s\n", clattn_status_string(st), clattn_last_error(NULL));
    for (size_t i = 0; i < clattn_group_size(group); i++)
        printf("device %zu (%s): share %.3f\n", i, clattn_context_device_name(clattn_group_context(group, i)),
               clattn_group_share(group, i));
    Suite *s = suite_create("group");
    TCase *tc = tu_tcase("create");
    tcase_add_test(tc, test_devices);
    tcase_add_test(tc, test_create);
    suite_add_tcase(s, tc);
    tu_add_loop(s, "table", test_table, NCASES);
    tu_add_loop(s, "formats", test_formats, NFORMATS);
    tu_add_loop(s, "layers", test_layers, NLAYERS);
    tu_add_loop(s, "mods", test_mods, NMODS);
    tc = tu_tcase("bad");
    tcase_add_test(tc, test_bad);
    tcase_add_test(tc, test_broken_kernels);
    tcase_add_test(tc, test_warnings_scoped);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    const int rc = tu_main(make_suite);
    clattn_group_free(group);
    return rc;
}
