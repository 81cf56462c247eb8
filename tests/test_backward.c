/*
 * The backward pass on every device against the fp64 reference backward (tools/reference:
 * ref_sdpa_backward, itself checked against finite differences by test_reference_backward):
 *   table:       clattn_sdpa_backward(_host) on odd shapes and every variant of the forward — causal of
 *                both kinds (rows that see no key: zero gradient), query offsets, key lengths, a window,
 *                additive float and bool masks, grouped-query heads (dK, dV summed over a group),
 *                soft-capping, logit scales, ALiBi, sinks (their gradients), a scale, a document mask_mod
 *                and its block mask, a non-linear score_mod with its derivative score_mod_grad, several
 *                key tiles and chunks, float16 and bfloat16 storage — the forward run first (out, lse),
 *                then dQ, dK, dV within the gradients' tolerance;
 *   determinism: two runs give the same bits;
 *   buffers:     the cl_mem entry point, a buffer too small refused naming it;
 *   refusals:    a missing lse, an int8 K, a score_mod without score_mod_grad — each a status naming
 *                it, nothing written;
 *   nonfinite:   a NaN or inf in dO, Q, K or V reaches only the gradients of pairs with weight (the
 *                reference's rule), on the default and the staged kernels;
 *   aliasing:    a gradient sharing memory with an input or another gradient (the same buffer, or
 *                overlapping sub-buffers), refused naming both; disjoint sub-buffers accepted;
 *   layer:       clattn_mha_backward_host (self- and cross-attention, GQA, with and without W_O and the
 *                biases, causal, key lengths, a float mask) against ref_mha_backward, every gradient,
 *                twice with the same bits; its refusals.
 */
#include "test_util.h"

#include "npy.h"
#include "smooth_mod.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

typedef struct bcase {
    const char *name;
    size_t B, H, KVH, L, S, D, Dv;
    clattn_causal causal;
    int offsets, key_lengths, window, mask, softcap, logit_scale, alibi, sinks, scale, documents, score_mod;
    clattn_dtype type; /* Q, K, V, O, dO and the gradients stored as (0: float32) */
} bcase;

static const bcase cases[] = {
    {"plain, B 2, H 2, L 37, S 41", 2, 2, 2, 37, 41, 24, 16, NONE, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"causal top-left, GQA 4/2, D 64", 1, 4, 2, 33, 33, 64, 64, TL, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"bottom-right L 19 > S 11 (rows seeing no key)", 2, 1, 1, 19, 11, 8, 8, BR, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"decode rows: L 3 at offsets, key lengths, window", 2, 2, 1, 3, 70, 32, 16, TL, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"float mask with hidden entries, scale 0.3", 1, 3, 3, 17, 23, 16, 24, NONE, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0},
    {"bool mask", 2, 2, 2, 9, 14, 8, 8, NONE, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0},
    {"soft-capping and logit scales", 2, 3, 3, 13, 29, 16, 16, NONE, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0},
    {"ALiBi and sinks, GQA 3/1", 1, 3, 1, 21, 21, 16, 8, TL, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0},
    {"everything", 2, 4, 2, 11, 31, 24, 16, TL, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0},
    {"document mask_mod and its block mask", 1, 2, 2, 45, 45, 16, 16, NONE, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0},
    /* Documents of 20 to 60 keys in blocks of 16: EMPTY, FULL and PARTIAL blocks, each skipped or taken
     * plainly or pair by pair by the backward's steps. */
    {"long documents: EMPTY, FULL and PARTIAL blocks, GQA 2/1, L = S = 150", 1, 2, 1, 150, 150, 32, 16, NONE, 0, 0, 0,
     0, 0, 0, 0, 0, 0, 2, 0, 0},
    /* Several key tiles and chunks, a row step's tail, head sizes below their padding. */
    {"tiles: bottom-right L 67 < S 100, GQA 2/1, D 64", 1, 2, 1, 67, 100, 64, 64, BR, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"tiles: B 3, L 45, S 77, D 40, Dv 24, key lengths", 3, 1, 1, 45, 77, 40, 24, NONE, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    /* A window over several key tiles: no tile is wholly visible to a step's rows. */
    {"tiles: window (9,2), L = S = 150, GQA 2/1", 1, 2, 1, 150, 150, 32, 16, NONE, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    /* Storage types: every tensor but lse in the type, the gradients written in it. */
    {"float16, causal, GQA 2/1, several tiles", 1, 2, 1, 40, 71, 32, 16, TL, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
     CLATTN_FLOAT16},
    {"bfloat16, key lengths, soft-capping", 2, 2, 2, 17, 23, 16, 16, NONE, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0,
     CLATTN_BFLOAT16},
    {"score_mod s + 0.3·sin(s)·(h + 1) with score_mod_grad, soft-capping, GQA 4/2, causal", 2, 4, 2, 15, 19, 16, 8, TL,
     0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 1, 0},
};
#define NCASES (sizeof cases / sizeof cases[0])

static const char document_source[] =
    "bool mask_mod(int b, int h, long q, long k, __global const int *doc) { return doc[q] == doc[k] && k <= q; }\n";
static int document_ids[160]; /* (the longest case's keys) */
static int ref_documents(int b, int h, long long q, long long k, const void *u)
{
    (void)b, (void)h, (void)u;
    return document_ids[q] == document_ids[k] && k <= q;
}

static void check_gradient_typed(const char *what, const float *got, const double *ref, size_t n, clattn_dtype type)
{
    tu_check_gradient(what, got, ref, n, type, 0.0);
}

static void check_gradient(const char *what, const float *got, const double *ref, size_t n)
{
    check_gradient_typed(what, got, ref, n, CLATTN_FLOAT32);
}

/* One case's call: the descriptor with its masks and terms (arrays kept in `keep`). */
typedef struct call {
    clattn_sdpa_desc d;
    clattn_masks m;
    clattn_window w;
    size_t lengths[3];
    long long offsets[3];
    float logit_scale[4], slopes[4], sinks[4];
    float *mask;
    clattn_mods *mods;
    clattn_block_mask *blocks;
} call;

static void make_call(clattn_context *ctx, const bcase *c, call *x, size_t seed)
{
    memset(x, 0, sizeof *x);
    x->d = tu_sdpa_desc(c->B, c->H, c->L, c->S, c->D, c->Dv);
    x->d.kv_heads = c->KVH;
    x->d.scale = c->scale ? 0.3f : CLATTN_SCALE_DEFAULT;
    x->d.softcap = c->softcap ? 1.5f : 0.0f;
    const float ls[4] = {0.5f, 1.25f, 2.0f, 0.75f}, sl[4] = {-0.25f, -0.5f, -0.125f, -1.0f},
                sk[4] = {0.5f, -1.0f, 1.5f, 0.0f};
    memcpy(x->logit_scale, ls, sizeof ls), memcpy(x->slopes, sl, sizeof sl), memcpy(x->sinks, sk, sizeof sk);
    x->d.logit_scale = c->logit_scale ? x->logit_scale : NULL;
    x->d.alibi_slopes = c->alibi ? x->slopes : NULL;
    x->d.sinks = c->sinks ? x->sinks : NULL;
    x->m = (clattn_masks)CLATTN_MASKS_INIT;
    x->lengths[0] = c->S - 5, x->lengths[1] = c->S / 2, x->lengths[2] = c->S - 31;
    x->offsets[0] = (long long)c->S - (long long)c->L, x->offsets[1] = (long long)c->S / 3,
    x->offsets[2] = 1;
    x->w = (clattn_window){9, 2};
    x->m.causal = c->causal;
    x->m.key_lengths = c->key_lengths ? x->lengths : NULL;
    x->m.query_offsets = c->offsets ? x->offsets : NULL;
    x->m.window = c->window ? &x->w : NULL;
    if (c->mask) {
        const size_t n = c->B * c->H * c->L * c->S;
        x->m.additive = CLATTN_MASK_B_H_L_S;
        x->mask = tu_falloc(n);
        tu_fill_uniform(x->mask, n, 1.0f, seed);
        for (size_t i = 0; i < n; i++)
            if (i % 7 == 3)
                x->mask[i] = -INFINITY;
    }
    x->d.masks = &x->m;
    if (c->documents) {
        for (size_t i = 0, id = 0; i < c->S;)
            for (size_t len = c->documents == 2 ? 20 + (id++ * 17) % 41 : 2 + (id++ * 5) % 11; len-- && i < c->S;)
                document_ids[i++] = (int)id;
        clattn_mod_aux aux = {"doc", CLATTN_AUX_INT, tu_dev_alloc(ctx, c->S, (const float *)document_ids),
                              CLATTN_AUX_BY_POSITION, 0};
        clattn_mods_desc md = CLATTN_MODS_DESC_INIT;
        md.source = document_source;
        md.aux = &aux;
        md.aux_count = 1;
        TU_ASSERT_OK(clattn_mods_create(ctx, &md, &x->mods), ctx, "clattn_mods_create");
        clattn_block_mask_desc bd = CLATTN_BLOCK_MASK_DESC_INIT;
        bd.q_len = bd.kv_len = c->S;
        bd.block_q = bd.block_k = 16;
        bd.mods = x->mods;
        TU_ASSERT_OK(clattn_block_mask_create(ctx, &bd, &x->blocks), ctx, "clattn_block_mask_create");
        x->d.mods = x->mods;
        x->d.block_mask = x->blocks;
    }
}

static void add_smooth_mods(clattn_context *ctx, call *x)
{
    clattn_mods_desc md = CLATTN_MODS_DESC_INIT;
    md.source = smooth_source;
    TU_ASSERT_OK(clattn_mods_create(ctx, &md, &x->mods), ctx, "clattn_mods_create (score_mod_grad)");
    x->d.mods = x->mods;
}

static void free_call(call *x)
{
    clattn_block_mask_free(x->blocks);
    clattn_mods_free(x->mods);
}

/* A bool mask: the float mask's hidden entries as 0, the rest 1 (the reference reads the float one). */
static unsigned char *bool_of(const float *mask, size_t n)
{
    unsigned char *b = (unsigned char *)tu_falloc((n + 3) / 4);
    for (size_t i = 0; i < n; i++)
        b[i] = mask[i] == -INFINITY ? 0 : 1;
    return b;
}

/* A case in a 16-bit storage type, on device buffers of exactly the typed tensors' sizes: the forward
 * (out in the type, lse float32), then the backward, its gradients read back in the type and widened. */
static void test_typed(clattn_context *ctx, const bcase *c, call *x, const float *q, const float *k, const float *v,
                       const float *dout, const void *mask, const float *ref_mask)
{
    const size_t nq = c->B * c->H * c->L * c->D, nk = c->B * c->KVH * c->S * c->D, nv = c->B * c->KVH * c->S * c->Dv;
    const size_t no = c->B * c->H * c->L * c->Dv, nl = c->B * c->H * c->L;
    x->d.q_dtype = x->d.k_dtype = x->d.v_dtype = x->d.out_dtype = c->type;
    const tu_typed tq = tu_typed_make(c->type, q, nq, c->D), tk = tu_typed_make(c->type, k, nk, c->D),
                   tv = tu_typed_make(c->type, v, nv, c->Dv), tdo = tu_typed_make(c->type, dout, no, c->Dv);
    const size_t bytes = c->type == CLATTN_FLOAT32 ? 4 : 2;
    cl_mem bq = tu_typed_upload(ctx, &tq), bk = tu_typed_upload(ctx, &tk), bv = tu_typed_upload(ctx, &tv);
    cl_mem bdo = tu_typed_upload(ctx, &tdo), bo = tu_dev_alloc_exact(ctx, (no * bytes + 3) / 4, NULL);
    cl_mem bl = tu_dev_alloc_exact(ctx, nl, NULL), bmask = mask ? tu_dev_alloc(ctx, c->B * c->H * c->L * c->S, mask) : NULL;
    cl_mem g[3] = {tu_dev_alloc_exact(ctx, (nq * bytes + 3) / 4, NULL), tu_dev_alloc_exact(ctx, (nk * bytes + 3) / 4, NULL),
                   tu_dev_alloc_exact(ctx, (nv * bytes + 3) / 4, NULL)};
    TU_ASSERT_OK(clattn_sdpa(ctx, &x->d, bq, bk, bv, bmask, bo, NULL, bl), ctx, "the typed forward");
    TU_ASSERT_OK(clattn_sdpa_backward(ctx, &x->d, bq, bk, bv, bmask, bo, bl, bdo, g[0], g[1], g[2], NULL), ctx,
                 "the typed backward");
    double *rq = tu_dalloc(nq), *rk = tu_dalloc(nk), *rv = tu_dalloc(nv);
    clattn_sdpa_desc rd = x->d;
    clattn_masks rmasks = x->m;
    rmasks.mask_type = CLATTN_MASK_FLOAT;
    rd.masks = &rmasks;
    rd.q_dtype = rd.k_dtype = rd.v_dtype = rd.out_dtype = CLATTN_FLOAT32;
    ref_sdpa_backward_given_out(&rd, tq.values, tk.values, tv.values, ref_mask, tu_typed_read(ctx, bo, c->type, no),
                                tdo.values, rq, rk, rv);
    const size_t sizes[3] = {nq, nk, nv};
    const double *refs[3] = {rq, rk, rv};
    const char *names[3][2] = {{"dq", "dq (staged)"}, {"dk", "dk (staged)"}, {"dv", "dv (staged)"}};
    const float *first[3];
    for (int i = 0; i < 3; i++) {
        first[i] = tu_typed_read(ctx, g[i], c->type, sizes[i]);
        check_gradient_typed(names[i][0], first[i], refs[i], sizes[i], c->type);
    }
    /* The same bits on a second run; the staged variant within the same bounds. */
    TU_ASSERT_OK(clattn_sdpa_backward(ctx, &x->d, bq, bk, bv, bmask, bo, bl, bdo, g[0], g[1], g[2], NULL), ctx,
                 "the typed backward, again");
    for (int i = 0; i < 3; i++)
        ck_assert_msg(!memcmp(first[i], tu_typed_read(ctx, g[i], c->type, sizes[i]), sizes[i] * sizeof(float)),
                      "%s: %s differs between two runs", tu_label(), names[i][0]);
    x->d.algorithm = CLATTN_ALGORITHM_STAGED;
    TU_ASSERT_OK(clattn_sdpa_backward(ctx, &x->d, bq, bk, bv, bmask, bo, bl, bdo, g[0], g[1], g[2], NULL), ctx,
                 "the typed staged backward");
    for (int i = 0; i < 3; i++)
        check_gradient_typed(names[i][1], tu_typed_read(ctx, g[i], c->type, sizes[i]), refs[i], sizes[i], c->type);
    free_call(x);
}

START_TEST(test_table)
{
    const size_t ci = TU_CASE(_i), dev = TU_DEVICE(_i);
    const bcase *c = &cases[ci];
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("backward \"%s\" on %s", c->name, tu_dev_spec[dev]);
    call x;
    make_call(ctx, c, &x, 40 + ci);
    if (c->score_mod)
        add_smooth_mods(ctx, &x);
    const size_t nq = c->B * c->H * c->L * c->D, nk = c->B * c->KVH * c->S * c->D, nv = c->B * c->KVH * c->S * c->Dv;
    const size_t no = c->B * c->H * c->L * c->Dv, nl = c->B * c->H * c->L;
    float *q = tu_falloc(nq), *k = tu_falloc(nk), *v = tu_falloc(nv), *dout = tu_falloc(no);
    tu_fill_uniform(q, nq, 1.5f, 11 + ci);
    tu_fill_uniform(k, nk, 1.5f, 12 + ci);
    tu_fill_uniform(v, nv, 1.0f, 13 + ci);
    tu_fill_uniform(dout, no, 1.0f, 14 + ci);
    const void *mask = x.mask;
    float *ref_mask = x.mask;
    if (c->mask == 2) { /* bool entries on the device; the reference adds 0 / −inf */
        mask = bool_of(x.mask, c->B * c->H * c->L * c->S);
        for (size_t i = 0; i < c->B * c->H * c->L * c->S; i++)
            ref_mask[i] = ref_mask[i] == -INFINITY ? -INFINITY : 0.0f;
        x.m.mask_type = CLATTN_MASK_BOOL;
    }
    if (c->type) /* 16-bit tensors: the reference reads their rounded values */
        return test_typed(ctx, c, &x, q, k, v, dout, mask, ref_mask);
    float *out = tu_host_alloc(no, NULL), *lse = tu_host_alloc(nl, NULL);
    TU_ASSERT_OK(clattn_sdpa_host(ctx, &x.d, q, k, v, mask, out, NULL, lse), ctx, "the forward");
    float *dq = tu_host_alloc(nq, NULL), *dk = tu_host_alloc(nk, NULL), *dv = tu_host_alloc(nv, NULL), dsinks[4];
    TU_ASSERT_OK(clattn_sdpa_backward_host(ctx, &x.d, q, k, v, mask, out, lse, dout, dq, dk, dv, dsinks), ctx,
                 "clattn_sdpa_backward_host");
    tu_host_check_guard(dq, nq, "dq");
    tu_host_check_guard(dk, nk, "dk");
    tu_host_check_guard(dv, nv, "dv");
    double *rq = tu_dalloc(nq), *rk = tu_dalloc(nk), *rv = tu_dalloc(nv), rs[4];
    const ref_mods rm = {c->score_mod ? ref_smooth : NULL, c->documents ? ref_documents : NULL, NULL};
    clattn_sdpa_desc rd = x.d;
    clattn_masks rmasks = x.m;
    rmasks.mask_type = CLATTN_MASK_FLOAT;
    rd.masks = &rmasks;
    rd.mods = NULL, rd.block_mask = NULL;
    ref_sdpa_backward(&rd, c->documents || c->score_mod ? &rm : NULL, c->score_mod ? ref_smooth_grad : NULL, q, k, v,
                      ref_mask, dout, rq, rk, rv, rs);
    check_gradient("dq", dq, rq, nq);
    check_gradient("dk", dk, rk, nk);
    check_gradient("dv", dv, rv, nv);
    for (size_t h = 0; c->sinks && h < c->H; h++)
        ck_assert_msg(fabs(dsinks[h] - rs[h]) <= 1e-5 + 1e-4 * fabs(rs[h]), "%s: dsinks[%zu] = %g, reference %g",
                      tu_label(), h, (double)dsinks[h], rs[h]);
    /* Deterministic: a second run gives the same bits. */
    float *dq2 = tu_host_alloc(nq, NULL), *dk2 = tu_host_alloc(nk, NULL), *dv2 = tu_host_alloc(nv, NULL);
    TU_ASSERT_OK(clattn_sdpa_backward_host(ctx, &x.d, q, k, v, mask, out, lse, dout, dq2, dk2, dv2, NULL), ctx,
                 "the second run");
    ck_assert_msg(!memcmp(dq, dq2, nq * sizeof *dq) && !memcmp(dk, dk2, nk * sizeof *dk) &&
                      !memcmp(dv, dv2, nv * sizeof *dv),
                  "%s: two runs differ", tu_label());
    /* The staged variant: P and dS materialised, the same gradients. */
    clattn_sdpa_desc staged = x.d;
    staged.algorithm = CLATTN_ALGORITHM_STAGED;
    TU_ASSERT_OK(clattn_sdpa_backward_host(ctx, &staged, q, k, v, mask, out, lse, dout, dq2, dk2, dv2, NULL), ctx,
                 "the staged backward");
    check_gradient("dq (staged)", dq2, rq, nq);
    check_gradient("dk (staged)", dk2, rk, nk);
    check_gradient("dv (staged)", dv2, rv, nv);
    free_call(&x);
}
END_TEST

START_TEST(test_buffers_and_refusals)
{
    clattn_context *ctx = tu_ctx[TU_DEVICE(_i)];
    tu_set_label("backward refusals on %s", tu_dev_spec[TU_DEVICE(_i)]);
    clattn_sdpa_desc d = tu_sdpa_desc(1, 2, 5, 6, 8, 8);
    const size_t nq = 2 * 5 * 8, nk = 2 * 6 * 8, nl = 2 * 5;
    float *x = tu_falloc(nk), *lse = tu_falloc(nl);
    float *dq = tu_host_alloc(nq, NULL), *dk = tu_host_alloc(nk, NULL), *dv = tu_host_alloc(nk, NULL);
    clattn_status st = clattn_sdpa_backward_host(ctx, &d, x, x, x, NULL, x, NULL, x, dq, dk, dv, NULL);
    ck_assert_msg(st == CLATTN_ERROR_NULL_ARGUMENT && strstr(clattn_last_error(ctx), "lse"), "%s: %s",
                  clattn_status_string(st), clattn_last_error(ctx));
    d.k_dtype = CLATTN_INT8; /* a quantised cache: no gradient */
    st = clattn_sdpa_backward_host(ctx, &d, x, x, x, NULL, x, lse, x, dq, dk, dv, NULL);
    ck_assert_msg(st == CLATTN_ERROR_INVALID_VALUE && strstr(clattn_last_error(ctx), "int8"), "%s: %s",
                  clattn_status_string(st), clattn_last_error(ctx));
    d.k_dtype = CLATTN_FLOAT32;
    clattn_mods_desc md = CLATTN_MODS_DESC_INIT;
    md.source = "float score_mod(float s, int b, int h, long q, long k) { return 2.0f * s; }\n";
    clattn_mods *mods = NULL;
    TU_ASSERT_OK(clattn_mods_create(ctx, &md, &mods), ctx, "clattn_mods_create");
    d.mods = mods;
    st = clattn_sdpa_backward_host(ctx, &d, x, x, x, NULL, x, lse, x, dq, dk, dv, NULL);
    ck_assert_msg(st == CLATTN_ERROR_INVALID_VALUE && strstr(clattn_last_error(ctx), "score_mod"), "%s: %s",
                  clattn_status_string(st), clattn_last_error(ctx));
    d.mods = NULL;
    clattn_mods_free(mods);
    md.source = "float score_mod_grad(float s, int b, int h, long q, long k) { return 1.0f; }\n";
    st = clattn_mods_create(ctx, &md, &mods);
    ck_assert_msg(st == CLATTN_ERROR_INVALID_VALUE && mods == NULL && strstr(clattn_last_error(ctx), "score_mod_grad"),
                  "a derivative alone: %s: %s", clattn_status_string(st), clattn_last_error(ctx));
    ck_assert_msg(tu_host_all_sentinel(dq, nq) && tu_host_all_sentinel(dk, nk) && tu_host_all_sentinel(dv, nk),
                  "%s: a refused call wrote", tu_label());
    /* The device entry point: a gradient buffer too small is refused naming it. */
    cl_mem b[9];
    for (int i = 0; i < 9; i++)
        b[i] = tu_dev_alloc_exact(ctx, i == 4 ? nl : i == 7 ? nq - 1 : nk, NULL);
    st = clattn_sdpa_backward(ctx, &d, b[0], b[1], b[2], NULL, b[3], b[4], b[5], b[6], b[7], b[8], NULL);
    ck_assert_msg(st == CLATTN_ERROR_BUFFER_TOO_SMALL && strstr(clattn_last_error(ctx), "dk"), "%s: %s",
                  clattn_status_string(st), clattn_last_error(ctx));
}
END_TEST

/* Non-finite values travel only where the math sends them, on every kernel: a pair whose weight is 0
 * (hidden, or too small to count) gives no gradient, as in the reference, so a NaN or inf in dO, Q, K or V
 * reaches just the gradients of the pairs that carry weight. */
typedef struct nfcase {
    const char *name;
    size_t H, KVH, L, S, D;
    clattn_causal causal;
    int key_lengths;
    char tensor; /* 'o' (dO), 'q', 'k', 'v' */
    size_t row, col;
    float value;
} nfcase;

static const nfcase nf_cases[] = {
    {"NaN in dO row 1, causal L 4 < S 6 (keys 4, 5 seen by no row)", 1, 1, 4, 6, 8, TL, 0, 'o', 1, 3, NAN},
    {"inf in dO row 3, bottom-right, key lengths, GQA 2/1, tiles", 2, 1, 37, 41, 16, BR, 1, 'o', 3, 0, INFINITY},
    {"NaN in K row 30, causal L = S = 40 (rows before it do not see it)", 1, 1, 40, 40, 16, TL, 0, 'k', 30, 5, NAN},
    {"inf in V row 5, causal, GQA 2/1", 2, 1, 20, 20, 8, TL, 0, 'v', 5, 2, INFINITY},
    {"NaN in Q row 2, causal", 1, 1, 9, 9, 8, TL, 0, 'q', 2, 0, NAN},
};
#define NNF (sizeof nf_cases / sizeof nf_cases[0])

/* NaN where the reference has NaN, the same infinity where it has one, else within the table's bound. */
static void check_nonfinite_gradient(const char *what, const float *got, const double *ref, size_t n)
{
    double largest = 0.0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(ref[i]))
            largest = fmax(largest, fabs(ref[i]));
    for (size_t i = 0; i < n; i++) {
        const bool same = isnan(ref[i])   ? isnan(got[i])
                          : isinf(ref[i]) ? (double)got[i] == ref[i]
                                          : isfinite(got[i]) && fabs((double)got[i] - ref[i]) <=
                                                                    1e-5 + 2e-4 * largest + 1e-4 * fabs(ref[i]);
        ck_assert_msg(same, "%s: %s[%zu] = %.9g, fp64 reference %.12g", tu_label(), what, i, (double)got[i], ref[i]);
    }
}

START_TEST(test_nonfinite)
{
    const size_t ci = TU_CASE(_i), dev = TU_DEVICE(_i);
    const nfcase *c = &nf_cases[ci];
    clattn_context *ctx = tu_ctx[dev];
    clattn_masks m = CLATTN_MASKS_INIT;
    const size_t lengths[2] = {c->S - 3, c->S / 2};
    m.causal = c->causal;
    m.key_lengths = c->key_lengths ? lengths : NULL;
    clattn_sdpa_desc d = tu_sdpa_desc(2, c->H, c->L, c->S, c->D, c->D);
    d.kv_heads = c->KVH;
    d.masks = &m;
    const size_t nq = 2 * c->H * c->L * c->D, nk = 2 * c->KVH * c->S * c->D, nl = 2 * c->H * c->L;
    float *q = tu_falloc(nq), *k = tu_falloc(nk), *v = tu_falloc(nk), *dout = tu_falloc(nq);
    tu_fill_uniform(q, nq, 1.5f, 90 + ci);
    tu_fill_uniform(k, nk, 1.5f, 91 + ci);
    tu_fill_uniform(v, nk, 1.0f, 92 + ci);
    tu_fill_uniform(dout, nq, 1.0f, 93 + ci);
    float *target = c->tensor == 'o' ? dout : c->tensor == 'q' ? q : c->tensor == 'k' ? k : v;
    target[c->row * c->D + c->col] = c->value; /* batch 0, head 0 */
    double *rq = tu_dalloc(nq), *rk = tu_dalloc(nk), *rv = tu_dalloc(nk);
    ref_sdpa_backward(&d, NULL, NULL, q, k, v, NULL, dout, rq, rk, rv, NULL);
    float *out = tu_host_alloc(nq, NULL), *lse = tu_host_alloc(nl, NULL);
    TU_ASSERT_OK(clattn_sdpa_host(ctx, &d, q, k, v, NULL, out, NULL, lse), ctx, "the forward");
    for (int staged = 0; staged < 2; staged++) {
        tu_set_label("backward \"%s\"%s on %s", c->name, staged ? " (staged)" : "", tu_dev_spec[dev]);
        d.algorithm = staged ? CLATTN_ALGORITHM_STAGED : CLATTN_ALGORITHM_AUTO;
        float *dq = tu_host_alloc(nq, NULL), *dk = tu_host_alloc(nk, NULL), *dv = tu_host_alloc(nk, NULL);
        TU_ASSERT_OK(clattn_sdpa_backward_host(ctx, &d, q, k, v, NULL, out, lse, dout, dq, dk, dv, NULL), ctx,
                     "clattn_sdpa_backward_host");
        check_nonfinite_gradient("dq", dq, rq, nq);
        check_nonfinite_gradient("dk", dk, rk, nk);
        check_nonfinite_gradient("dv", dv, rv, nk);
    }
}
END_TEST

/* Outputs that share memory with an input or with each other are refused naming both (the kernels read
 * Q, K, V, dO while writing the gradients): the same cl_mem, and sub-buffers whose ranges overlap. */
START_TEST(test_aliasing)
{
    clattn_context *ctx = tu_ctx[_i];
    tu_set_label("backward aliasing on %s", tu_dev_spec[_i]);
    clattn_sdpa_desc d = tu_sdpa_desc(1, 2, 6, 6, 8, 8); /* every tensor 96 floats but lse (12) */
    cl_mem b[9];
    for (int i = 0; i < 9; i++)
        b[i] = tu_dev_alloc_exact(ctx, i == 4 ? 12 : 96, NULL);
    enum { Q, K, V, O, LSE, DO, DQ, DK, DV };
    static const struct {
        int slot, alias; /* gradient `slot` replaced by input or gradient `alias` */
        const char *first, *second;
    } cases[] = {{DQ, Q, "dq", "q"},   {DQ, DO, "dq", "dout"}, {DK, K, "dk", "k"},     {DV, V, "dv", "v"},
                 {DK, DQ, "dq", "dk"}, {DV, O, "dv", "out"},   {DV, DK, "dk", "dv"}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        cl_mem a[9];
        memcpy(a, b, sizeof a);
        a[cases[c].slot] = b[cases[c].alias];
        const clattn_status st =
            clattn_sdpa_backward(ctx, &d, a[Q], a[K], a[V], NULL, a[O], a[LSE], a[DO], a[DQ], a[DK], a[DV], NULL);
        ck_assert_msg(st == CLATTN_ERROR_INVALID_VALUE && strstr(clattn_last_error(ctx), cases[c].first) &&
                          strstr(clattn_last_error(ctx), cases[c].second),
                      "%s: %s = %s: %s: %s", tu_label(), cases[c].first, cases[c].second, clattn_status_string(st),
                      clattn_last_error(ctx));
    }
    /* Sub-buffers of one allocation: overlapping ranges refused, disjoint ones accepted. */
    cl_uint align_bits = 0;
    cl_device_id dev = NULL;
    ck_assert(clGetCommandQueueInfo(clattn_context_queue(ctx), CL_QUEUE_DEVICE, sizeof dev, &dev, NULL) == CL_SUCCESS);
    ck_assert(clGetDeviceInfo(dev, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof align_bits, &align_bits, NULL) == CL_SUCCESS);
    const size_t align = align_bits / 8, part = (96 * sizeof(float) + align - 1) / align * align;
    cl_mem whole = tu_dev_alloc_exact(ctx, 3 * part / sizeof(float), NULL), sub[3];
    const size_t origins[3] = {0, part, part}; /* the third overlaps the second */
    for (int i = 0; i < 3; i++) {
        cl_buffer_region r = {origins[i], 96 * sizeof(float)};
        cl_int err;
        sub[i] = clCreateSubBuffer(whole, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &r, &err);
        ck_assert_msg(err == CL_SUCCESS, "clCreateSubBuffer: %d", err);
    }
    clattn_status st = clattn_sdpa_backward(ctx, &d, b[Q], b[K], b[V], NULL, b[O], b[LSE], b[DO], sub[0], sub[1],
                                            sub[2], NULL);
    ck_assert_msg(st == CLATTN_ERROR_INVALID_VALUE && strstr(clattn_last_error(ctx), "dk") &&
                      strstr(clattn_last_error(ctx), "dv"),
                  "%s: overlapping sub-buffers: %s: %s", tu_label(), clattn_status_string(st), clattn_last_error(ctx));
    st = clattn_sdpa_backward(ctx, &d, b[Q], whole, b[V], NULL, b[O], b[LSE], b[DO], b[DQ], sub[1], b[DV], NULL);
    ck_assert_msg(st == CLATTN_ERROR_INVALID_VALUE && strstr(clattn_last_error(ctx), "dk") &&
                      strstr(clattn_last_error(ctx), "k"),
                  "%s: a gradient inside k's buffer: %s: %s", tu_label(), clattn_status_string(st),
                  clattn_last_error(ctx));
    TU_ASSERT_OK(clattn_sdpa(ctx, &d, b[Q], b[K], b[V], NULL, b[O], NULL, b[LSE]), ctx, "the forward");
    TU_ASSERT_OK(clattn_sdpa_backward(ctx, &d, b[Q], b[K], b[V], NULL, b[O], b[LSE], b[DO], sub[0], sub[1], b[DV], NULL),
                 ctx, "disjoint sub-buffers");
    for (int i = 0; i < 3; i++)
        clReleaseMemObject(sub[i]);
    /* The layer: a weight's gradient in the weight's own buffer. */
    clattn_mha_desc md = CLATTN_MHA_DESC_INIT;
    md.batch = 1, md.q_len = 4, md.model_dim = 8, md.heads = 2, md.qk_dim = 4;
    clattn_mha_weights w = CLATTN_MHA_WEIGHTS_INIT;
    w.w_q = b[Q], w.w_k = b[K], w.w_v = b[V];
    clattn_mha_grads g = CLATTN_MHA_GRADS_INIT;
    g.d_x = b[DQ], g.d_w_k = b[K];
    st = clattn_mha_backward(ctx, &md, b[O], NULL, &w, NULL, b[DO], &g);
    ck_assert_msg(st == CLATTN_ERROR_INVALID_VALUE && strstr(clattn_last_error(ctx), "grads.d_w_k") &&
                      strstr(clattn_last_error(ctx), "w_k"),
                  "%s: layer: %s: %s", tu_label(), clattn_status_string(st), clattn_last_error(ctx));
}
END_TEST

/* The layer's backward pass (clattn_mha_backward_host) against the fp64 reference (ref_mha_backward). */
typedef struct lcase {
    const char *name;
    size_t B, L, S, model, kv_dim, H, KVH, D, Dv, out_dim;
    int cross, w_o, biases;
    clattn_causal causal;
    int key_lengths, mask;
    clattn_dtype type; /* X, KV, the weights, d_out and every gradient stored as (0: float32) */
} lcase;

static const lcase layer_cases[] = {
    {"self-attention, W_O and every bias, causal", 2, 13, 0, 24, 0, 3, 3, 8, 8, 0, 0, 1, 1, TL, 0, 0, 0},
    {"cross-attention, GQA 4/2, no W_O, no bias, key lengths", 2, 9, 14, 16, 12, 4, 2, 8, 6, 0, 1, 0, 0, NONE, 1, 0, 0},
    {"self-attention, W_O to 10 columns, float mask, GQA 2/1", 1, 11, 0, 20, 0, 2, 1, 16, 8, 10, 0, 1, 0, NONE, 0, 1, 0},
    {"bfloat16 cross-attention, W_O and every bias, causal", 2, 7, 10, 16, 8, 2, 2, 8, 8, 0, 1, 1, 1, TL, 0, 0,
     CLATTN_BFLOAT16},
    {"float16 self-attention, W_O, no bias", 1, 9, 0, 12, 0, 3, 3, 4, 4, 0, 0, 1, 0, NONE, 0, 0, CLATTN_FLOAT16},
};
#define NLAYER (sizeof layer_cases / sizeof layer_cases[0])

/* n elements of `type` at p as floats (float32: p itself). */
static const float *widened(clattn_dtype type, const float *p, size_t n)
{
    if (!type || type == CLATTN_FLOAT32)
        return p;
    float *out = tu_falloc(n);
    const unsigned short *u = (const unsigned short *)p;
    for (size_t i = 0; i < n; i++)
        out[i] = type == CLATTN_FLOAT16 ? npy_half_to_float(u[i]) : npy_bf16_to_float_value(u[i]);
    return out;
}

START_TEST(test_layer)
{
    const size_t ci = TU_CASE(_i), dev = TU_DEVICE(_i);
    const lcase *c = &layer_cases[ci];
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("layer backward \"%s\" on %s", c->name, tu_dev_spec[dev]);
    const size_t S = c->cross ? c->S : c->L, kv_dim = c->cross ? c->kv_dim : c->model;
    const size_t hk = c->H * c->D, hv = c->H * c->Dv, nk = c->KVH * c->D, nv = c->KVH * c->Dv;
    const size_t od = c->out_dim ? c->out_dim : c->model, y_cols = c->w_o ? od : hv;
    clattn_masks m = CLATTN_MASKS_INIT;
    size_t lengths[2] = {S - 3, S / 2};
    m.causal = c->causal;
    m.key_lengths = c->key_lengths ? lengths : NULL;
    float *mask = NULL;
    if (c->mask) {
        mask = tu_falloc(c->L * S);
        tu_fill_uniform(mask, c->L * S, 1.0f, 70 + ci);
        for (size_t i = 0; i < c->L * S; i++)
            if (i % 5 == 2)
                mask[i] = -INFINITY;
        m.additive = CLATTN_MASK_L_S;
    }
    clattn_mha_desc d = CLATTN_MHA_DESC_INIT;
    d.batch = c->B, d.q_len = c->L, d.kv_len = c->cross ? S : 0, d.model_dim = c->model, d.kv_dim = c->cross ? kv_dim : 0;
    d.heads = c->H, d.kv_heads = c->KVH, d.qk_dim = c->D, d.v_dim = c->Dv, d.out_dim = c->out_dim, d.masks = &m;
    /* inputs and weights, each of its own size */
    const size_t sizes[11] = {c->B * c->L * c->model, c->B * S * kv_dim, c->model * hk, hk, kv_dim * nk, nk,
                              kv_dim * nv, nv, hv * od, od, c->B * c->L * y_cols};
    /* in[]: what the reference reads (a 16-bit tensor's rounded values); bits[]: what the call is given */
    float *in[11];
    const void *bits[11];
    for (int i = 0; i < 11; i++) {
        in[i] = tu_falloc(sizes[i]);
        tu_fill_uniform(in[i], sizes[i], i == 0 || i == 1 || i == 10 ? 1.0f : 0.4f, 80 + ci * 11 + (size_t)i);
        bits[i] = in[i];
        if (c->type) {
            const tu_typed typed = tu_typed_make(c->type, in[i], sizes[i], 1);
            in[i] = typed.values, bits[i] = typed.bytes;
        }
    }
    d.x_dtype = d.weight_dtype = d.out_dtype = c->type ? c->type : CLATTN_FLOAT32;
    clattn_mha_host_weights w = CLATTN_MHA_HOST_WEIGHTS_INIT, wb = CLATTN_MHA_HOST_WEIGHTS_INIT;
    w.w_q = in[2], w.w_k = in[4], w.w_v = in[6];
    wb.w_q = bits[2], wb.w_k = bits[4], wb.w_v = bits[6];
    if (c->biases)
        w.b_q = in[3], w.b_k = in[5], w.b_v = in[7], wb.b_q = bits[3], wb.b_k = bits[5], wb.b_v = bits[7];
    if (c->w_o)
        w.w_o = in[8], w.b_o = c->biases ? in[9] : NULL, wb.w_o = bits[8], wb.b_o = c->biases ? bits[9] : NULL;
    /* gradients: d_x, d_kv, d_w_q, d_b_q, d_w_k, d_b_k, d_w_v, d_b_v, d_w_o, d_b_o */
    const size_t gsizes[10] = {sizes[0], sizes[1], sizes[2], sizes[3], sizes[4], sizes[5], sizes[6], sizes[7], sizes[8], sizes[9]};
    const char *const gnames[10] = {"d_x", "d_kv", "d_w_q", "d_b_q", "d_w_k", "d_b_k", "d_w_v", "d_b_v", "d_w_o", "d_b_o"};
    float *got[10], *again[10]; /* (room for float32; a 16-bit type fills the first half, widened below) */
    double *ref[10];
    for (int i = 0; i < 10; i++) {
        const int wanted = (i != 1 || c->cross) && (i < 8 || c->w_o);
        got[i] = wanted ? tu_host_alloc(gsizes[i], NULL) : NULL;
        again[i] = wanted ? tu_host_alloc(gsizes[i], NULL) : NULL;
        ref[i] = wanted ? tu_dalloc(gsizes[i]) : NULL;
    }
    clattn_mha_host_grads g = CLATTN_MHA_HOST_GRADS_INIT, g2 = CLATTN_MHA_HOST_GRADS_INIT;
    void **gp[10] = {&g.d_x, &g.d_kv, &g.d_w_q, &g.d_b_q, &g.d_w_k, &g.d_b_k, &g.d_w_v, &g.d_b_v, &g.d_w_o, &g.d_b_o};
    void **gp2[10] = {&g2.d_x, &g2.d_kv, &g2.d_w_q, &g2.d_b_q, &g2.d_w_k, &g2.d_b_k, &g2.d_w_v, &g2.d_b_v, &g2.d_w_o,
                       &g2.d_b_o};
    for (int i = 0; i < 10; i++)
        *gp[i] = got[i], *gp2[i] = again[i];
    const float *kv = c->cross ? in[1] : NULL;
    TU_ASSERT_OK(clattn_mha_backward_host(ctx, &d, bits[0], c->cross ? bits[1] : NULL, &wb, mask, bits[10], &g), ctx,
                 "clattn_mha_backward_host");
    const ref_mha_grads rg = {ref[0], ref[1], ref[2], ref[3], ref[4], ref[5], ref[6], ref[7], ref[8], ref[9]};
    clattn_mha_desc rd = d;
    rd.x_dtype = rd.weight_dtype = rd.out_dtype = CLATTN_FLOAT32;
    ref_mha_backward(&rd, in[0], kv, &w, mask, in[10], &rg);
    /* The floor: a few units of float32's last place of the largest gradient (the key bias's gradient is
     * exactly 0, a sum of dK rows whose rounding errors are of the other gradients' size). */
    double scale = 0.0;
    for (int i = 0; i < 10; i++)
        for (size_t e = 0; got[i] && e < gsizes[i]; e++)
            scale = fmax(scale, fabs(ref[i][e]));
    for (int i = 0; i < 10; i++)
        if (got[i]) {
            tu_host_check_guard(got[i], gsizes[i], gnames[i]);
            tu_check_gradient(gnames[i], widened(c->type, got[i], gsizes[i]), ref[i], gsizes[i],
                                 c->type ? c->type : CLATTN_FLOAT32, 16 * 0x1p-23 * scale);
        }
    TU_ASSERT_OK(clattn_mha_backward_host(ctx, &d, bits[0], c->cross ? bits[1] : NULL, &wb, mask, bits[10], &g2), ctx,
                 "the second run");
    for (int i = 0; i < 10; i++)
        ck_assert_msg(!got[i] || !memcmp(got[i], again[i], gsizes[i] * sizeof(float)), "%s: %s differs between two runs",
                      tu_label(), gnames[i]);
}
END_TEST

/* The layer's refusals: an int8 input, gradients the layer has nothing for, a missing d_out, a buffer
 * too small — each naming it, nothing written. */
START_TEST(test_layer_refusals)
{
    clattn_context *ctx = tu_ctx[_i];
    tu_set_label("layer backward refusals on %s", tu_dev_spec[_i]);
    clattn_mha_desc d = CLATTN_MHA_DESC_INIT;
    d.batch = 1, d.q_len = 4, d.model_dim = 8, d.heads = 2, d.qk_dim = 4;
    float *x = tu_falloc(64), *dx = tu_host_alloc(32, NULL), *dw = tu_host_alloc(64, NULL);
    clattn_mha_host_weights w = CLATTN_MHA_HOST_WEIGHTS_INIT;
    w.w_q = w.w_k = w.w_v = x;
    clattn_mha_host_grads g = CLATTN_MHA_HOST_GRADS_INIT;
    g.d_x = dx;
    struct {
        const char *what, *needle;
        clattn_status want;
    } expect[] = {{"int8 x", "x_dtype", CLATTN_ERROR_INVALID_VALUE},
                  {"d_w_o without W_O", "d_w_o", CLATTN_ERROR_INVALID_VALUE},
                  {"d_kv for self-attention", "d_kv", CLATTN_ERROR_INVALID_VALUE},
                  {"no d_out", "d_out", CLATTN_ERROR_NULL_ARGUMENT}};
    for (int i = 0; i < 4; i++) {
        clattn_mha_desc di = d;
        clattn_mha_host_grads gi = g;
        di.x_dtype = i == 0 ? CLATTN_INT8 : CLATTN_FLOAT32;
        gi.d_w_o = i == 1 ? dw : NULL;
        gi.d_kv = i == 2 ? dw : NULL;
        const clattn_status st = clattn_mha_backward_host(ctx, &di, x, NULL, &w, NULL, i == 3 ? NULL : x, &gi);
        ck_assert_msg(st == expect[i].want && strstr(clattn_last_error(ctx), expect[i].needle), "%s: %s: %s: %s",
                      tu_label(), expect[i].what, clattn_status_string(st), clattn_last_error(ctx));
    }
    ck_assert_msg(tu_host_all_sentinel(dx, 32) && tu_host_all_sentinel(dw, 64), "%s: a refused call wrote", tu_label());
    cl_mem b[6];
    for (int i = 0; i < 6; i++)
        b[i] = tu_dev_alloc_exact(ctx, i == 5 ? 31 : 64, NULL);
    clattn_mha_weights dwts = CLATTN_MHA_WEIGHTS_INIT;
    dwts.w_q = dwts.w_k = dwts.w_v = b[1];
    clattn_mha_grads dg = CLATTN_MHA_GRADS_INIT;
    dg.d_x = b[5];
    const clattn_status st = clattn_mha_backward(ctx, &d, b[0], NULL, &dwts, NULL, b[2], &dg);
    ck_assert_msg(st == CLATTN_ERROR_BUFFER_TOO_SMALL && strstr(clattn_last_error(ctx), "d_x"), "%s: %s: %s", tu_label(),
                  clattn_status_string(st), clattn_last_error(ctx));
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("backward");
    tu_add_loop(s, "table", test_table, NCASES * tu_ndev);
    tu_add_loop(s, "refusals", test_buffers_and_refusals, tu_ndev);
    tu_add_loop(s, "layer", test_layer, NLAYER * tu_ndev);
    tu_add_loop(s, "layer refusals", test_layer_refusals, tu_ndev);
    tu_add_loop(s, "aliasing", test_aliasing, tu_ndev);
    tu_add_loop(s, "nonfinite", test_nonfinite, NNF * tu_ndev);
    return s;
}

int main(void) { return tu_main(make_suite); }
