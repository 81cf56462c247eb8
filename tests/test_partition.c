/*
 * The partition primitive (src/attention/partition.c, compiled into this test as it is into the library): for odd
 * shapes and every mask kind — causal top-left and bottom-right, key lengths (a batch of none included),
 * query offsets (negative too), windows, ALiBi, sinks, soft-capping, additive masks of every layout (and
 * narrower than S), GQA, a head size of 520 — a call is cut at seeded points into query blocks × key runs,
 * each part's sub-call (partition_part_make) run by clattn_sdpa_host on its own rows of Q, K, V and the
 * mask, skipped when the primitive says the masks hide it, and each block's parts merged on the host
 * (partition_merge_host, the sinks once). The rows must equal the fp64 reference of the whole call and the
 * whole call itself (out and lse), on every device. Beside that:
 *  - the library's clattn_partition_part gives the same sub-calls (positions, lengths, window, mask width,
 *    no sinks) and skips the same parts;
 *  - the host merge agrees with clattn_merge on the device (cl/merge.cl) to a few ulps: the same formula
 *    in the same order, the only difference the rounding of exp and log;
 *  - clattn_partition_* refuse bad arguments, the whole call's bad values included.
 */
#include "test_util.h"

#include "partition.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define MB1 CLATTN_MASK_B_1_L_S
#define M1H CLATTN_MASK_1_H_L_S
#define MPAD CLATTN_MASK_B_1_1_S

typedef struct pcase {
    const char *name;
    size_t B, H, KVH, L, S, D, DV;
    clattn_causal causal;
    int key_lengths;           /* TU_KL_* */
    int offsets;               /* query offsets −3, 9, 2, … */
    long long win_left, win_right; /* −2: no window */
    int sinks, alibi;
    float softcap;
    clattn_mask_layout mask;
    size_t mask_kv_len;        /* 0: S */
    size_t blocks, runs;       /* query blocks, key runs */
} pcase;

static const pcase cases[] = {
    {"no masks", 2, 3, 3, 7, 13, 5, 3, NONE, TU_KL_NONE, 0, -2, -2, 0, 0, 0, M0, 0, 3, 4},
    {"causal top-left", 1, 2, 1, 11, 17, 8, 8, TL, TU_KL_NONE, 0, -2, -2, 0, 0, 0, M0, 0, 3, 3},
    {"causal bottom-right, S < L (rows that see nothing)", 2, 2, 2, 13, 9, 6, 4, BR, TU_KL_NONE, 0, -2, -2, 0, 0, 0,
     M0, 0, 4, 3},
    {"bottom-right, varied key lengths", 3, 2, 2, 5, 23, 4, 7, BR, TU_KL_VARIED, 0, -2, -2, 0, 0, 0, M0, 0, 2, 5},
    {"key lengths, a batch with none", 2, 3, 1, 6, 15, 9, 5, NONE, TU_KL_ZERO, 0, -2, -2, 0, 0, 0, M0, 0, 2, 3},
    {"causal, query offsets −3 and 9", 2, 2, 1, 6, 19, 7, 7, TL, TU_KL_NONE, 1, -2, -2, 0, 0, 0, M0, 0, 3, 4},
    {"window (4, 2), no causal mask", 1, 3, 3, 15, 21, 5, 6, NONE, TU_KL_NONE, 0, 4, 2, 0, 0, 0, M0, 0, 3, 5},
    {"window (3, unbounded), causal, offsets", 2, 2, 2, 8, 25, 6, 6, TL, TU_KL_NONE, 1, 3, -1, 0, 0, 0, M0, 0, 3, 6},
    {"ALiBi, bottom-right, GQA 4/2", 2, 4, 2, 9, 27, 8, 5, BR, TU_KL_NONE, 0, -2, -2, 0, 1, 0, M0, 0, 3, 4},
    {"sinks, causal, key lengths", 2, 3, 3, 7, 11, 4, 4, TL, TU_KL_VARIED, 0, -2, -2, 1, 0, 0, M0, 0, 2, 3},
    {"softcap, sinks, ALiBi, window, offsets", 2, 2, 1, 10, 31, 6, 3, TL, TU_KL_NONE, 1, 5, 0, 1, 1, 2.5f, M0, 0, 4, 5},
    {"(L,S) mask narrower than S (runs past it skipped)", 1, 2, 2, 9, 19, 5, 5, NONE, TU_KL_NONE, 0, -2, -2, 0, 0, 0,
     MLS, 6, 3, 5},
    {"(B,H,L,S) mask, causal", 2, 3, 3, 7, 14, 4, 6, TL, TU_KL_NONE, 0, -2, -2, 0, 0, 0, MBH, 0, 2, 3},
    {"(B,1,L,S) mask, sinks", 3, 2, 1, 5, 12, 6, 6, NONE, TU_KL_NONE, 0, -2, -2, 1, 0, 0, MB1, 0, 3, 2},
    {"(1,H,L,S) mask narrower, bottom-right", 2, 3, 1, 6, 17, 5, 4, BR, TU_KL_NONE, 0, -2, -2, 0, 0, 0, M1H, 11, 2, 4},
    {"(B,1,1,S) padding mask narrower, key lengths", 3, 2, 2, 7, 13, 7, 7, NONE, TU_KL_VARIED, 0, -2, -2, 0, 0, 0,
     MPAD, 10, 3, 3},
    {"head size 520, bottom-right, sinks", 1, 2, 1, 5, 9, 520, 520, BR, TU_KL_NONE, 0, -2, -2, 1, 0, 0, M0, 0, 2, 3},
    {"everything: GQA 6/2, D 7, Dv 9, (B,H,L,S) mask, window, offsets, ALiBi, sinks, softcap", 2, 6, 2, 11, 29, 7, 9,
     TL, TU_KL_VARIED, 1, 6, 1, 1, 1, 3.0f, MBH, 0, 4, 4},
};
#define NCASES (sizeof cases / sizeof cases[0])

/* [0, n) cut into `parts` non-empty runs at seeded points (Knuth's selection sampling: sorted, distinct). */
static size_t cut(size_t n, size_t parts, uint64_t seed, size_t *bounds)
{
    if (parts > n)
        parts = n;
    tu_rng rng;
    tu_rng_seed(&rng, seed);
    size_t chosen = 0;
    bounds[0] = 0;
    for (size_t j = 1; j < n && chosen < parts - 1; j++)
        if (tu_rng_unit(&rng) * (double)(n - j) < (double)(parts - 1 - chosen))
            bounds[++chosen] = j;
    bounds[parts] = n;
    return parts;
}

/* The additive mask's (L, S) matrices and rows per matrix in its layout. */
static size_t mask_matrices(const pcase *c)
{
    switch (c->mask) {
    case CLATTN_MASK_B_H_L_S: return c->B * c->H;
    case CLATTN_MASK_B_1_L_S: case CLATTN_MASK_B_1_1_S: return c->B;
    case CLATTN_MASK_1_H_L_S: return c->H;
    default: return 1;
    }
}

/* The mask as the reference takes it: (B,H,L,S), the columns past a narrower one −inf. */
static float *expand_mask(const pcase *c, const float *mask, size_t cols)
{
    float *full = tu_falloc(c->B * c->H * c->L * c->S);
    for (size_t b = 0; b < c->B; b++)
        for (size_t h = 0; h < c->H; h++)
            for (size_t i = 0; i < c->L; i++) {
                const size_t t = c->mask == MBH ? b * c->H + h : c->mask == MB1 || c->mask == MPAD ? b
                                 : c->mask == M1H ? h : 0;
                const size_t row = c->mask == MPAD ? t : t * c->L + i;
                for (size_t j = 0; j < c->S; j++)
                    full[((b * c->H + h) * c->L + i) * c->S + j] = j < cols ? mask[row * cols + j] : -INFINITY;
            }
    return full;
}

/* The whole call's shape as partition.c reads it (what sdpa_check resolves; clattn_partition_part, the
 * library's, is compared with the parts made from it). */
static sdpa_shape shape_of(const clattn_sdpa_desc *d)
{
    sdpa_shape s;
    memset(&s, 0, sizeof s);
    s.batch = d->batch;
    s.heads = d->heads;
    s.q_len = d->q_len;
    s.kv_len = d->kv_len;
    s.qk_dim = d->qk_dim;
    s.v_dim = tu_sdpa_dv(d);
    s.kv_heads = ref_kv_heads(d);
    s.desc = *d; /* (the score terms: read from the descriptor, as sdpa_shape_resolve leaves them) */
    s.masks = *ref_masks(d->masks);
    s.mask_cols = s.masks.mask_kv_len ? s.masks.mask_kv_len : d->kv_len;
    s.mask_elem_size = sizeof(float);
    s.lse_elems = d->batch * d->heads * d->q_len;
    s.out_elems = s.lse_elems * s.v_dim;
    return s;
}

/* The library's part equals the test's: same positions, lengths, window, mask width, no sinks. */
static void check_same_part(const clattn_sdpa_desc *lib, const partition_part *p, size_t B)
{
    ck_assert_msg(lib->q_len == p->q_rows && lib->kv_len == p->k_rows && !lib->sinks && lib->masks,
                  "%s: part (%zu, %zu, %zu, %zu): the library's sub-call has L %zu S %zu", tu_label(), p->q0, p->q_rows,
                  p->k0, p->k_rows, lib->q_len, lib->kv_len);
    const clattn_masks *m = lib->masks;
    ck_assert(m->causal == p->masks.causal && m->additive == p->masks.additive);
    ck_assert_msg(m->mask_kv_len == p->mask_cols, "%s: mask width %zu, expected %zu", tu_label(), m->mask_kv_len,
                  p->mask_cols);
    ck_assert(!m->window == !p->masks.window);
    if (m->window)
        ck_assert(m->window->left == p->window.left && m->window->right == p->window.right);
    for (size_t b = 0; b < B; b++)
        ck_assert_msg(m->key_lengths[b] == p->key_lengths[b] && m->query_offsets[b] == p->offsets[b],
                      "%s: batch %zu: the library's length %zu offset %lld, the test's %zu %lld", tu_label(), b,
                      m->key_lengths[b], m->query_offsets[b], p->key_lengths[b], p->offsets[b]);
    ck_assert(lib->alibi_slopes == p->desc.alibi_slopes && lib->softcap == p->desc.softcap);
    ck_assert_msg(lib->origin_position == (long long)p->k0 && lib->origin_batch == 0,
                  "%s: origin (%zu, %lld), expected (0, %zu): mods would see the run's keys from 0", tu_label(),
                  lib->origin_batch, lib->origin_position, p->k0);
}

/* |host − device| of the merge: the same arithmetic, exp and log rounded by each side's own library. */
static double merge_gap;

static void check_device_merge(clattn_context *ctx, const clattn_sdpa_desc *d, size_t qn, size_t parts,
                               float *const *outs, float *const *lses, const float *out, const float *lse)
{
    const size_t rows = d->batch * d->heads * qn, dv = tu_sdpa_dv(d);
    cl_mem mo[8], ml[8];
    for (size_t p = 0; p < parts; p++) {
        mo[p] = tu_dev_alloc(ctx, rows * dv, outs[p]);
        ml[p] = tu_dev_alloc(ctx, rows, lses[p]);
    }
    cl_mem o = tu_dev_alloc(ctx, rows * dv, NULL), l = tu_dev_alloc(ctx, rows, NULL);
    clattn_sdpa_desc md = *d;
    md.q_len = qn;
    md.masks = NULL;
    TU_ASSERT_OK(clattn_merge(ctx, &md, parts, mo, ml, o, l), ctx, "clattn_merge");
    const float *dev_o = tu_dev_read_checked(ctx, o, rows * dv, "merged out");
    const float *dev_l = tu_dev_read_checked(ctx, l, rows, "merged lse");
    for (size_t i = 0; i < rows * dv + rows; i++) { /* the outputs, then the log-sum-exps */
        const bool is_out = i < rows * dv;
        const float a = is_out ? out[i] : lse[i - rows * dv], b = is_out ? dev_o[i] : dev_l[i - rows * dv];
        if (a == b || (isnan(a) && isnan(b)))
            continue;
        const double gap = fabs((double)a - (double)b), bound = 8 * (double)FLT_EPSILON * (1.0 + fabs((double)b));
        ck_assert_msg(gap <= bound, "%s: host merge %.9g, device %.9g at %zu", tu_label(), (double)a, (double)b, i);
        if (gap > merge_gap)
            merge_gap = gap;
    }
}

static double largest_ref_err;

START_TEST(test_table)
{
    const pcase *c = &cases[TU_CASE(_i)];
    const size_t dev = TU_DEVICE(_i);
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("partition \"%s\" (device %zu)", c->name, dev);
    clattn_sdpa_desc d = tu_sdpa_desc(c->B, c->H, c->L, c->S, c->D, c->DV);
    d.kv_heads = c->KVH;
    d.softcap = c->softcap;
    clattn_masks m = CLATTN_MASKS_INIT;
    m.causal = c->causal;
    size_t lengths[8];
    long long offsets[8];
    m.key_lengths = tu_make_key_lengths(c->key_lengths, c->B, c->S, lengths);
    for (size_t b = 0; b < c->B; b++)
        offsets[b] = b % 2 ? 9 : b ? 2 : -3;
    m.query_offsets = c->offsets ? offsets : NULL;
    clattn_window w = {c->win_left, c->win_right};
    m.window = c->win_left != -2 ? &w : NULL;
    float sinks[8], slopes[8];
    for (size_t h = 0; h < c->H; h++) {
        sinks[h] = 0.3f * (float)h - 0.5f;
        slopes[h] = 0.5f / (float)(h + 1);
    }
    d.sinks = c->sinks ? sinks : NULL;
    d.alibi_slopes = c->alibi ? slopes : NULL;
    const size_t cols = c->mask_kv_len ? c->mask_kv_len : c->S;
    float *mask = NULL, *ref_mask = NULL;
    if (c->mask != M0) {
        m.additive = c->mask;
        m.mask_kv_len = c->mask_kv_len;
        const size_t n = mask_matrices(c) * (c->mask == MPAD ? 1 : c->L) * cols;
        mask = tu_falloc(n);
        tu_rng rng;
        tu_rng_seed(&rng, 7 + TU_CASE(_i));
        for (size_t i = 0; i < n; i++)
            mask[i] = tu_rng_next(&rng) % 6 == 0 ? -INFINITY : tu_rng_uniform(&rng, 1.0f);
        ref_mask = expand_mask(c, mask, cols);
    }
    d.masks = &m;
    const size_t nq = c->B * c->H * c->L * c->D, nk = c->B * c->KVH * c->S * c->D, nv = c->B * c->KVH * c->S * c->DV;
    const size_t no = c->B * c->H * c->L * c->DV, nl = c->B * c->H * c->L;
    float *q = tu_falloc(nq), *k = tu_falloc(nk), *v = tu_falloc(nv);
    tu_fill_uniform(q, nq, 1.0f, 11 + TU_CASE(_i));
    tu_fill_uniform(k, nk, 1.0f, 12 + TU_CASE(_i));
    tu_fill_uniform(v, nv, 1.0f, 13 + TU_CASE(_i));

    const sdpa_shape s = shape_of(&d);
    clattn_partition *lib = NULL;
    TU_ASSERT_OK(clattn_partition_create(ctx, &d, mask != NULL, &lib), ctx, "clattn_partition_create");
    partition_part part;
    ck_assert(partition_part_init(&part, c->B));
    size_t qb[16], kb[16];
    const size_t blocks = cut(c->L, c->blocks, 100 + TU_CASE(_i), qb), runs = cut(c->S, c->runs, 200 + TU_CASE(_i), kb);
    float *o = tu_falloc(no), *l = tu_falloc(nl);
    size_t ran = 0, skipped = 0;
    for (size_t bi = 0; bi < blocks; bi++) {
        const size_t q0 = qb[bi], qn = qb[bi + 1] - q0, rows = c->B * c->H * qn;
        float *qs = tu_falloc(c->B * c->H * qn * c->D), *outs[8], *lses[8];
        partition_rows_host(true, c->B * c->H, c->L, c->D, q0, qn, q, qs);
        size_t parts = 0;
        for (size_t ri = 0; ri < runs; ri++) {
            const size_t k0 = kb[ri], kn = kb[ri + 1] - k0;
            const bool visible = partition_part_make(&s, &d, q0, qn, k0, kn, &part);
            const clattn_sdpa_desc *ld = NULL;
            TU_ASSERT_OK(clattn_partition_part(lib, q0, qn, k0, kn, &ld), ctx, "clattn_partition_part");
            ck_assert_msg(!ld == !visible, "%s: part (%zu, %zu, %zu, %zu): the library %s it, the test %s it",
                          tu_label(), q0, qn, k0, kn, ld ? "runs" : "skips", visible ? "runs" : "skips");
            if (!visible) {
                skipped++;
                continue;
            }
            check_same_part(ld, &part, c->B);
            float *ks = tu_falloc(c->B * c->KVH * kn * c->D), *vs = tu_falloc(c->B * c->KVH * kn * c->DV);
            partition_rows_host(true, c->B * c->KVH, c->S, c->D, k0, kn, k, ks);
            partition_rows_host(true, c->B * c->KVH, c->S, c->DV, k0, kn, v, vs);
            float *ms = mask ? tu_falloc(partition_mask_elems(&s, &part)) : NULL;
            if (mask)
                partition_mask_host(&s, &part, mask, ms);
            outs[parts] = tu_falloc(rows * c->DV);
            lses[parts] = tu_falloc(rows);
            TU_ASSERT_OK(clattn_sdpa_host(ctx, &part.desc, qs, ks, vs, ms, outs[parts], NULL, lses[parts]), ctx,
                         "clattn_sdpa_host of a part");
            parts++;
            ran++;
        }
        float *bo = tu_falloc(rows * c->DV), *bl = tu_falloc(rows);
        partition_merge_host(rows, c->H, qn, c->DV, d.sinks, parts, (const float *const *)outs,
                             (const float *const *)lses, bo, bl);
        if (parts)
            check_device_merge(ctx, &d, qn, parts, outs, lses, bo, bl);
        partition_rows_host(false, c->B * c->H, c->L, c->DV, q0, qn, o, bo);
        partition_rows_host(false, c->B * c->H, c->L, 1, q0, qn, l, bl);
    }
    partition_part_release(&part);
    clattn_partition_free(lib);

    double *ro = tu_dalloc(no), *rl = tu_dalloc(nl), err_o = 0, err_l = 0;
    clattn_masks rm = m;
    rm.mask_kv_len = 0;
    rm.additive = mask ? MBH : M0;
    clattn_sdpa_desc rd = d;
    rd.masks = &rm;
    ref_sdpa(&rd, q, k, v, ref_mask, ro, NULL, rl);
    check_close_named("partitioned out vs reference", o, ro, no, &err_o);
    check_close_named("partitioned lse vs reference", l, rl, nl, &err_l);
    if (err_o > largest_ref_err)
        largest_ref_err = err_o;
    if (err_l > largest_ref_err)
        largest_ref_err = err_l;
    /* The whole call in one piece: the parts add up to it. */
    float *wo = tu_falloc(no), *wl = tu_falloc(nl);
    TU_ASSERT_OK(clattn_sdpa_host(ctx, &d, q, k, v, mask, wo, NULL, wl), ctx, "clattn_sdpa_host of the whole call");
    double *dwo = tu_dalloc(no), *dwl = tu_dalloc(nl);
    for (size_t i = 0; i < no; i++)
        dwo[i] = wo[i];
    for (size_t i = 0; i < nl; i++)
        dwl[i] = wl[i];
    check_close_named("partitioned out vs the whole call", o, dwo, no, NULL);
    check_close_named("partitioned lse vs the whole call", l, dwl, nl, NULL);
    printf("%s: %zu x %zu parts (%zu run, %zu skipped), max |err| vs fp64: out %.3g, lse %.3g\n", tu_label(), blocks,
           runs, ran, skipped, err_o, err_l);
}
END_TEST

START_TEST(test_bad)
{
    clattn_context *ctx = tu_ctx[0];
    tu_set_label("clattn_partition_* refusals");
    clattn_sdpa_desc d = tu_sdpa_desc(2, 2, 5, 9, 4, 0);
    clattn_partition *p = (clattn_partition *)&d;
    ck_assert(clattn_partition_create(NULL, &d, 0, &p) == CLATTN_ERROR_NULL_ARGUMENT);
    ck_assert(clattn_partition_create(ctx, &d, 0, NULL) == CLATTN_ERROR_NULL_ARGUMENT);
    ck_assert(clattn_partition_create(ctx, NULL, 0, &p) == CLATTN_ERROR_NULL_ARGUMENT && p == NULL);
    /* The whole call's own values, which no part could show once moved or clipped. */
    const size_t too_long[2] = {9, 10};
    clattn_masks m = CLATTN_MASKS_INIT;
    m.key_lengths = too_long;
    d.masks = &m;
    clattn_status st = clattn_partition_create(ctx, &d, 0, &p);
    ck_assert_msg(st == CLATTN_ERROR_INVALID_MASK && p == NULL && strstr(clattn_last_error(ctx), "key_lengths[1]"),
                  "%s: %s", clattn_status_string(st), clattn_last_error(ctx));
    const long long far[2] = {0, (1LL << 61) + 1};
    m.key_lengths = NULL;
    m.query_offsets = far;
    st = clattn_partition_create(ctx, &d, 0, &p);
    ck_assert_msg(st == CLATTN_ERROR_INVALID_VALUE && strstr(clattn_last_error(ctx), "query_offsets[1]"), "%s: %s",
                  clattn_status_string(st), clattn_last_error(ctx));
    m.query_offsets = NULL;
    m.additive = CLATTN_MASK_L_S;
    ck_assert(clattn_partition_create(ctx, &d, 0, &p) == CLATTN_ERROR_NULL_ARGUMENT); /* a mask, but none comes */
    m.additive = CLATTN_MASK_NONE;
    d.heads = 0;
    ck_assert(clattn_partition_create(ctx, &d, 0, &p) == CLATTN_ERROR_ZERO_SIZE);
    d.heads = 2;
    TU_ASSERT_OK(clattn_partition_create(ctx, &d, 0, &p), ctx, "clattn_partition_create");
    const clattn_sdpa_desc *part = &d;
    ck_assert(clattn_partition_part(NULL, 0, 1, 0, 1, &part) == CLATTN_ERROR_NULL_ARGUMENT);
    ck_assert(clattn_partition_part(p, 0, 1, 0, 1, NULL) == CLATTN_ERROR_NULL_ARGUMENT);
    ck_assert(clattn_partition_part(p, 0, 0, 0, 1, &part) == CLATTN_ERROR_ZERO_SIZE && part == NULL);
    ck_assert(clattn_partition_part(p, 0, 1, 0, 0, &part) == CLATTN_ERROR_ZERO_SIZE);
    ck_assert(clattn_partition_part(p, 4, 2, 0, 1, &part) == CLATTN_ERROR_INVALID_VALUE);
    ck_assert(clattn_partition_part(p, 0, 1, 9, 1, &part) == CLATTN_ERROR_INVALID_VALUE);
    ck_assert(clattn_partition_part(p, 0, 1, (size_t)-1, 2, &part) == CLATTN_ERROR_INVALID_VALUE);
    ck_assert(strstr(clattn_last_error(ctx), "keys"));
    TU_ASSERT_OK(clattn_partition_part(p, 1, 4, 3, 6, &part), ctx, "clattn_partition_part");
    ck_assert(part && part->q_len == 4 && part->kv_len == 6 && part->masks->query_offsets[0] == 1 - 3);
    clattn_partition_free(p);
    clattn_partition_free(NULL);
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("partition");
    tu_add_loop(s, "table", test_table, NCASES * tu_ndev);
    TCase *tc = tu_tcase("bad");
    tcase_add_test(tc, test_bad);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    const int rc = tu_main(make_suite);
    printf("partition: largest |error| against the fp64 reference %.3g; largest |host merge - device merge| %.3g\n",
           largest_ref_err, merge_gap);
    return rc;
}
