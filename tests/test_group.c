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
 *  4. bad: NULL group or arrays, typed tensors, a bad descriptor (its detail reaches the caller).
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
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
    float *q = tu_falloc(nq), *k = tu_falloc(nk), *v = tu_falloc(nk);
    tu_fill_uniform(q, nq, 1.0f, 1 + _i);
    tu_fill_uniform(k, nk, 1.0f, 2 + _i);
    tu_fill_uniform(v, nk, 1.0f, 3 + _i);
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
    d.k_dtype = CLATTN_FLOAT16;
    clattn_status st = clattn_group_sdpa_host(group, &d, x, x, x, NULL, o, NULL);
    ck_assert_msg(st == CLATTN_ERROR_INVALID_VALUE && strstr(clattn_last_error(NULL), "float32"), "%s: %s",
                  clattn_status_string(st), clattn_last_error(NULL));
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
    tu_add_loop(s, "layers", test_layers, NLAYERS);
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
