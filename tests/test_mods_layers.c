/*
 * Programmable attention in layers and block masks, and the refusals (test_mods' second half; mods_test.h):
 *   layers:   clattn_mha_host with causal.cl, with its block mask, and with sliding_window.cl, against the
 *             fp64 reference of the layer with the same mask_mod and against the built-in equivalent;
 *   blocks:   block masks from mask_mod (their counts) and from host layouts, on every path, reused; their
 *             refusals;
 *   refusals: sources that do not compile (the log names the user's line), functions missing or taking
 *             other arguments, bad defines and auxiliary tensors, tensors too short for a call, mods of
 *             another context, group calls — each a status and a message, nothing written.
 */
#include "mods_test.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The fp64 reference of a self-attention layer with mods (ref_mha has none: it is a layer of ref_sdpa):
 * X·W_Q, X·W_K, X·W_V (no biases) split into d's heads, ref_sdpa_mods_d with `rm` (and d's masks) per
 * head, the heads concatenated and ·W_O. out (B, L, model_dim). */
static void ref_layer_mods(const clattn_mha_desc *d, const ref_mods *rm, const float *x,
                           const clattn_mha_host_weights *w, double *out)
{
    const size_t B = d->batch, L = d->q_len, DM = d->model_dim, H = d->heads, D = d->qk_dim;
    const size_t DV = d->v_dim ? d->v_dim : D;
    ck_assert_msg(d->kv_heads == 0 && !w->b_q && !w->b_k && !w->b_v && !w->b_o && (d->out_dim == 0 || d->out_dim == DM),
                  "%s: ref_layer_mods covers self-attention without biases only", tu_label());
    double *proj[3], *heads[3];
    const float *wqkv[3] = {w->w_q, w->w_k, w->w_v};
    for (int t = 0; t < 3; t++) {
        const size_t dt = t == 2 ? DV : D;
        proj[t] = tu_dalloc(B * L * H * dt);
        heads[t] = tu_dalloc(B * H * L * dt);
        ref_matmul(B * L, DM, H * dt, x, wqkv[t], NULL, proj[t]);
        for (size_t b = 0; b < B; b++) /* (B, L, H·dt) → (B, H, L, dt) */
            for (size_t h = 0; h < H; h++)
                for (size_t i = 0; i < L; i++)
                    for (size_t c = 0; c < dt; c++)
                        heads[t][((b * H + h) * L + i) * dt + c] = proj[t][(b * L + i) * H * dt + h * dt + c];
    }
    clattn_sdpa_desc sd = tu_sdpa_desc(B, H, L, L, D, DV);
    sd.scale = d->scale;
    sd.masks = d->masks;
    double *o = tu_dalloc(B * H * L * DV), *cat = tu_dalloc(B * L * H * DV);
    ref_sdpa_mods_d(&sd, rm, heads[0], heads[1], heads[2], NULL, o, NULL, NULL);
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++)
            for (size_t i = 0; i < L; i++)
                for (size_t c = 0; c < DV; c++)
                    cat[(b * L + i) * H * DV + h * DV + c] = o[((b * H + h) * L + i) * DV + c];
    ref_matmul_d(B * L, H * DV, DM, cat, w->w_o, NULL, out);
}

/* A layer (clattn_mha_host) with tools/mods/causal.cl, then with its block mask too, and with
 * sliding_window.cl (WINDOW=5): each against the fp64 reference of the layer with the same mask_mod as a
 * C callback (ref_layer_mods), and against the same layer with the built-in equivalent (a causal mask,
 * with a window of 5 keys before). Head sizes 24 and 16, as the examples' fused calls: the same programs
 * serve (kernel builds are most of this suite's time on a CPU). */
START_TEST(test_mha)
{
    enum { B = 2, L = 19, DM = 24, H = 3, DK = 24, DV = 16 };
    const size_t dev = (size_t)_i;
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("mods in a layer (clattn_mha_host) on %s", tu_dev_spec[dev]);
    float *x = tu_falloc(B * L * DM), *wq = tu_falloc(DM * H * DK), *wk = tu_falloc(DM * H * DK),
          *wv = tu_falloc(DM * H * DV), *wo = tu_falloc(H * DV * DM);
    tu_fill_uniform(x, B * L * DM, 1.0f, 91);
    tu_fill_uniform(wq, DM * H * DK, 0.4f, 92);
    tu_fill_uniform(wk, DM * H * DK, 0.4f, 93);
    tu_fill_uniform(wv, DM * H * DV, 0.4f, 94);
    tu_fill_uniform(wo, H * DV * DM, 0.4f, 95);
    clattn_mha_host_weights w = CLATTN_MHA_HOST_WEIGHTS_INIT;
    w.w_q = wq, w.w_k = wk, w.w_v = wv, w.w_o = wo;
    clattn_mha_desc d = CLATTN_MHA_DESC_INIT;
    d.batch = B, d.q_len = L, d.model_dim = DM, d.heads = H, d.qk_dim = DK, d.v_dim = DV;
    const mod_data data = {NULL, NULL, NULL, 5, 0, 0};
    const ref_mods causal_ref = {NULL, ref_causal, &data}, window_ref = {NULL, ref_window, &data};
    double *ref = tu_dalloc(B * L * DM), *ref_window_out = tu_dalloc(B * L * DM), *plain = tu_dalloc(B * L * DM);
    ref_layer_mods(&d, &causal_ref, x, &w, ref);
    ref_layer_mods(&d, &window_ref, x, &w, ref_window_out);
    ref_mha(&d, x, NULL, &w, NULL, plain, NULL);
    /* The masks matter: without them, and with the window against causal alone, the references differ. */
    double causal_change = 0, window_change = 0;
    for (size_t i = 0; i < B * L * DM; i++) {
        causal_change = fmax(causal_change, fabs(plain[i] - ref[i]));
        window_change = fmax(window_change, fabs(ref_window_out[i] - ref[i]));
    }
    ck_assert_msg(causal_change > 1e-3 && window_change > 1e-3,
                  "%s: the masks change the reference little (causal %g, the window %g)", tu_label(), causal_change,
                  window_change);

    aux_set none = {0};
    clattn_mods *mods = make_mods(ctx, read_example("causal.cl"), NULL, 0, &none);
    d.mods = mods;
    float *with_mods = tu_host_alloc(B * L * DM, NULL), *built_in = tu_host_alloc(B * L * DM, NULL);
    TU_ASSERT_OK(clattn_mha_host(ctx, &d, x, NULL, &w, NULL, with_mods, NULL), ctx, "clattn_mha_host with causal.cl");
    check_close_named("layer with causal.cl against the fp64 reference", with_mods, ref, B * L * DM, NULL);
    clattn_masks m = CLATTN_MASKS_INIT;
    m.causal = CLATTN_CAUSAL_TOP_LEFT;
    d.masks = &m;
    d.mods = NULL;
    TU_ASSERT_OK(clattn_mha_host(ctx, &d, x, NULL, &w, NULL, built_in, NULL), ctx, "clattn_mha_host, causal");
    check_close_named("layer with the built-in causal mask against the fp64 reference", built_in, ref, B * L * DM,
                      NULL);
    double *as_double = tu_dalloc(B * L * DM);
    for (size_t i = 0; i < B * L * DM; i++)
        as_double[i] = (double)built_in[i];
    check_close_named("layer with causal.cl against the built-in causal mask", with_mods, as_double, B * L * DM, NULL);
    /* And with causal.cl's block mask (blocks of 4 × 8: empty above the diagonal, full below). */
    clattn_block_mask_desc bd = CLATTN_BLOCK_MASK_DESC_INIT;
    bd.q_len = bd.kv_len = L;
    bd.block_q = 4, bd.block_k = 8;
    bd.mods = mods;
    clattn_block_mask *bm = NULL;
    TU_ASSERT_OK(clattn_block_mask_create(ctx, &bd, &bm), ctx, "clattn_block_mask_create");
    d.masks = NULL;
    d.mods = mods;
    d.block_mask = bm;
    float *blocked = tu_host_alloc(B * L * DM, NULL);
    TU_ASSERT_OK(clattn_mha_host(ctx, &d, x, NULL, &w, NULL, blocked, NULL), ctx, "clattn_mha_host with a block mask");
    check_close_named("layer with causal.cl's block mask against the fp64 reference", blocked, ref, B * L * DM, NULL);
    check_close_named("layer with causal.cl's block mask against the built-in causal mask", blocked, as_double,
                      B * L * DM, NULL);
    clattn_block_mask_free(bm);
    clattn_mods_free(mods);
    d.block_mask = NULL;

    /* sliding_window.cl: each query sees itself and the 5 keys before it. */
    static const char *const window_defines[] = {"WINDOW=5"};
    mods = make_mods(ctx, read_example("sliding_window.cl"), window_defines, 1, &none);
    d.mods = mods;
    TU_ASSERT_OK(clattn_mha_host(ctx, &d, x, NULL, &w, NULL, with_mods, NULL), ctx,
                 "clattn_mha_host with sliding_window.cl");
    check_close_named("layer with sliding_window.cl against the fp64 reference", with_mods, ref_window_out, B * L * DM,
                      NULL);
    const clattn_window win = {5, 0};
    m.window = &win;
    d.masks = &m;
    d.mods = NULL;
    TU_ASSERT_OK(clattn_mha_host(ctx, &d, x, NULL, &w, NULL, built_in, NULL), ctx, "clattn_mha_host, causal window");
    check_close_named("layer with the built-in window against the fp64 reference", built_in, ref_window_out,
                      B * L * DM, NULL);
    for (size_t i = 0; i < B * L * DM; i++)
        as_double[i] = (double)built_in[i];
    check_close_named("layer with sliding_window.cl against the built-in window", with_mods, as_double, B * L * DM,
                      NULL);
    clattn_mods_free(mods);
}
END_TEST

/* Block masks. From document.cl's mask_mod over a grid of uneven blocks: the counts of empty, partial and
 * full blocks as the host finds them, then calls carrying it (fused, staged, decode: the fused kernels
 * skip the empty tiles) against the reference, the mask reused by a second call; from a host layout
 * (no mask_mod: the listed blocks are what each query block sees), with and without a built-in causal
 * mask. */
typedef struct layout_data {
    const size_t *starts, *blocks;
    size_t block_q, block_k;
} layout_data;
static int ref_layout(int b, int h, long long q, long long k, const void *u)
{
    (void)b, (void)h;
    const layout_data *l = u;
    const size_t r = (size_t)q / l->block_q;
    for (size_t i = l->starts[r]; i < l->starts[r + 1]; i++)
        if (l->blocks[i] == (size_t)k / l->block_k)
            return 1;
    return 0;
}

START_TEST(test_block_masks)
{
    const size_t path = TU_CASE(_i), dev = TU_DEVICE(_i);
    clattn_context *ctx = tu_ctx[dev];
    const call_shape *c = &shapes[path];
    enum { BQ = 8, BK = 16 };
    tu_set_label("block masks, %s path on %s", path_names[path], tu_dev_spec[dev]);
    aux_set a = {0};
    add_aux(ctx, &a, AUX_DOC, c->H, c->S);
    clattn_mods *mods = make_mods(ctx, read_example("document.cl"), NULL, 0, &a);
    clattn_block_mask_desc bd = CLATTN_BLOCK_MASK_DESC_INIT;
    bd.q_len = bd.kv_len = c->S;
    bd.block_q = BQ, bd.block_k = BK;
    bd.mods = mods;
    clattn_block_mask *bm = NULL;
    TU_ASSERT_OK(clattn_block_mask_create(ctx, &bd, &bm), ctx, "clattn_block_mask_create from mask_mod");
    size_t counts[3], want[3] = {0, 0, 0};
    const mod_data data = {NULL, a.doc, NULL, 0, 0, 0};
    for (size_t q0 = 0; q0 < c->S; q0 += BQ)
        for (size_t k0 = 0; k0 < c->S; k0 += BK) {
            size_t seen = 0, pairs = 0;
            for (size_t q = q0; q < q0 + BQ && q < c->S; q++)
                for (size_t k = k0; k < k0 + BK && k < c->S; k++, pairs++)
                    seen += (size_t)ref_document(0, 0, (long long)q, (long long)k, &data);
            want[seen == 0 ? 0 : seen == pairs ? 2 : 1]++;
        }
    TU_ASSERT_OK(clattn_block_mask_counts(bm, counts), NULL, "clattn_block_mask_counts");
    ck_assert_msg(counts[0] == want[0] && counts[1] == want[1] && counts[2] == want[2],
                  "%s: %zu empty, %zu partial, %zu full blocks; the host finds %zu, %zu, %zu", tu_label(), counts[0],
                  counts[1], counts[2], want[0], want[1], want[2]);
    /* (Documents of at most 9 positions leave no block of 8 × 16 pairs whole: the layout below has full ones.) */
    ck_assert_msg(want[0] > 0 && want[1] > 0, "%s: the grid lacks empty or partial blocks", tu_label());

    long long offsets[4];
    clattn_masks m;
    clattn_sdpa_desc d = shape_desc(c, path, &m, offsets);
    const size_t nq = c->B * c->H * c->L * c->D, nk = c->B * c->kvh * c->S * c->D, nv = c->B * c->kvh * c->S * c->Dv;
    const size_t no = c->B * c->H * c->L * c->Dv;
    float *q = tu_falloc(nq), *k = tu_falloc(nk), *v = tu_falloc(nv);
    tu_fill_uniform(k, nk, 1.5f, 102);
    tu_fill_uniform(v, nv, 1.0f, 103);
    double *ref = tu_dalloc(no);
    float *out = tu_host_alloc(no, NULL);
    const ref_mods rm = {NULL, ref_document, &data};
    for (int call = 0; call < 2; call++) { /* the same mask, two calls */
        tu_fill_uniform(q, nq, 1.5f, 101 + (uint64_t)call);
        ref_sdpa_mods(&d, &rm, q, k, v, NULL, ref, NULL, NULL);
        d.mods = mods;
        d.block_mask = bm;
        run(ctx, &d, q, k, v, NULL, out, NULL, NULL, "clattn_sdpa_host with a block mask");
        check_close_named("out with the block mask", out, ref, no, NULL);
        d.mods = NULL;
        d.block_mask = NULL;
    }

    /* A layout: query block r sees key blocks r, r - 2 and 0 (when they exist). */
    const size_t qblocks = (c->S + BQ - 1) / BQ, kblocks = (c->S + BK - 1) / BK;
    size_t *starts = tu_track_malloc((qblocks + 1) * sizeof *starts), *blocks = tu_track_malloc(3 * qblocks * sizeof *blocks);
    for (size_t r = 0; r < qblocks; r++) {
        size_t n = starts[r];
        const size_t kb = r * BQ / BK;
        blocks[n++] = 0;
        if (kb >= 2)
            blocks[n++] = kb - 2;
        if (kb > 0 && kb < kblocks)
            blocks[n++] = kb;
        starts[r + 1] = n;
    }
    clattn_block_mask_desc ld = CLATTN_BLOCK_MASK_DESC_INIT;
    ld.q_len = ld.kv_len = c->S;
    ld.block_q = BQ, ld.block_k = BK;
    ld.layout_starts = starts, ld.layout_blocks = blocks;
    clattn_block_mask *lm = NULL;
    TU_ASSERT_OK(clattn_block_mask_create(ctx, &ld, &lm), ctx, "clattn_block_mask_create from a layout");
    const layout_data layout = {starts, blocks, BQ, BK};
    const ref_mods lr = {NULL, ref_layout, &layout};
    for (int causal = 0; causal < 2; causal++) {
        m.causal = causal ? CLATTN_CAUSAL_TOP_LEFT : CLATTN_CAUSAL_NONE;
        d.block_mask = NULL;
        ref_sdpa_mods(&d, &lr, q, k, v, NULL, ref, NULL, NULL);
        d.block_mask = lm;
        run(ctx, &d, q, k, v, NULL, out, NULL, NULL, "clattn_sdpa_host with a layout");
        check_close_named("out with the layout", out, ref, no, NULL);
    }
    clattn_block_mask_free(lm);
    clattn_block_mask_free(bm);
    clattn_mods_free(mods);
}
END_TEST

/* What block masks refuse: at creation and at the calls that carry them. */
START_TEST(test_block_mask_refusals)
{
    const size_t dev = (size_t)_i;
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("block mask refusals on %s", tu_dev_spec[dev]);
    aux_set none = {0}, a = {0};
    clattn_mods *causal = make_mods(ctx, read_example("causal.cl"), NULL, 0, &none);
    clattn_mods *scores_only = make_mods(ctx, read_example("softcap.cl"), (const char *const[]){"CAP=2.0f"}, 1, &none);
    add_aux(ctx, &a, AUX_DOC, 1, 8);
    clattn_mods *doc = make_mods(ctx, read_example("document.cl"), NULL, 0, &a);
    clattn_block_mask_desc bd = CLATTN_BLOCK_MASK_DESC_INIT;
    clattn_block_mask *bm = (clattn_block_mask *)&bm;
    ck_assert(clattn_block_mask_create(ctx, NULL, &bm) == CLATTN_ERROR_NULL_ARGUMENT && bm == NULL);
    bd.q_len = 0, bd.kv_len = 8, bd.mods = causal;
    ck_assert(clattn_block_mask_create(ctx, &bd, &bm) == CLATTN_ERROR_ZERO_SIZE && bm == NULL);
    bd.q_len = 8, bd.mods = scores_only;
    ck_assert(clattn_block_mask_create(ctx, &bd, &bm) == CLATTN_ERROR_INVALID_VALUE);
    ck_assert(strstr(clattn_last_error(ctx), "no mask_mod") != NULL);
    bd.mods = doc, bd.q_len = bd.kv_len = 200; /* doc holds 8 positions (and a guard of 64) */
    ck_assert(clattn_block_mask_create(ctx, &bd, &bm) == CLATTN_ERROR_BUFFER_TOO_SMALL);
    bd.mods = NULL;
    ck_assert(clattn_block_mask_create(ctx, &bd, &bm) == CLATTN_ERROR_NULL_ARGUMENT);
    const size_t starts[3] = {0, 1, 2}, bad_blocks[2] = {0, 5}, blocks[2] = {0, 1};
    bd.q_len = bd.kv_len = 8, bd.block_q = bd.block_k = 4;
    bd.layout_starts = starts, bd.layout_blocks = bad_blocks;
    ck_assert(clattn_block_mask_create(ctx, &bd, &bm) == CLATTN_ERROR_INVALID_VALUE);
    ck_assert(strstr(clattn_last_error(ctx), "layout_blocks[1]") != NULL);
    bd.layout_blocks = blocks, bd.batch = 2;
    ck_assert(clattn_block_mask_create(ctx, &bd, &bm) == CLATTN_ERROR_INVALID_VALUE);
    bd.batch = 0;
    clattn_block_mask *layout = NULL;
    TU_ASSERT_OK(clattn_block_mask_create(ctx, &bd, &layout), ctx, "a layout");
    bd.layout_starts = NULL, bd.layout_blocks = NULL, bd.mods = causal, bd.batch = 2;
    clattn_block_mask *from_causal = NULL;
    TU_ASSERT_OK(clattn_block_mask_create(ctx, &bd, &from_causal), ctx, "from causal.cl");

    /* Calls: other mods, a layout with a mask_mod, another batch count, positions past the grid. */
    float q[2 * 8 * 4], kv[2 * 8 * 4];
    tu_fill_uniform(q, 64, 1.0f, 1);
    tu_fill_uniform(kv, 64, 1.0f, 2);
    float *out = tu_host_alloc(128, NULL);
    struct {
        const clattn_mods *mods;
        const clattn_block_mask *mask;
        size_t B, L;
        clattn_status want;
        const char *needle;
    } calls[] = {{doc, from_causal, 2, 8, CLATTN_ERROR_INVALID_VALUE, "other mods"},
                 {causal, layout, 2, 8, CLATTN_ERROR_INVALID_VALUE, "layout"},
                 {causal, from_causal, 3, 8, CLATTN_ERROR_SHAPE_MISMATCH, "batches"},
                 {NULL, layout, 1, 16, CLATTN_ERROR_SHAPE_MISMATCH, "covers"}};
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
        clattn_sdpa_desc d = tu_sdpa_desc(calls[i].B, 1, calls[i].L, calls[i].L > 8 ? 16 : 8, 4, 4);
        d.mods = calls[i].mods;
        d.block_mask = calls[i].mask;
        float *wide = calls[i].L > 8 || calls[i].B > 2 ? tu_falloc(16 * 4 * calls[i].B) : NULL;
        const clattn_status st = clattn_sdpa_host(ctx, &d, wide ? wide : q, wide ? wide : kv, wide ? wide : kv, NULL,
                                                  out, NULL, NULL);
        ck_assert_msg(st == calls[i].want && strstr(clattn_last_error(ctx), calls[i].needle), "%s: call %zu: %s (%s)",
                      tu_label(), i, clattn_status_string(st), clattn_last_error(ctx));
        ck_assert_msg(tu_host_all_sentinel(out, 32 * calls[i].B), "%s: call %zu wrote its output", tu_label(), i);
    }
    size_t counts[3];
    ck_assert(clattn_block_mask_counts(NULL, counts) == CLATTN_ERROR_NULL_ARGUMENT);
    clattn_block_mask_free(NULL);
    clattn_block_mask_free(layout);
    clattn_block_mask_free(from_causal);
    clattn_mods_free(causal);
    clattn_mods_free(scores_only);
    clattn_mods_free(doc);
}
END_TEST

/* clattn_mods_create's refusals: status, a message naming the problem, *out NULL. */
static void expect_refused(clattn_context *ctx, const clattn_mods_desc *md, clattn_status want, const char *needle)
{
    clattn_mods *mods = (clattn_mods *)&mods; /* not NULL before: a refusal must clear it */
    const clattn_status st = clattn_mods_create(ctx, md, &mods);
    ck_assert_msg(st == want, "%s: %s, expected %s (%s)", tu_label(), clattn_status_string(st),
                  clattn_status_string(want), clattn_last_error(ctx));
    ck_assert_msg(mods == NULL, "%s: *out is not NULL after a refusal", tu_label());
    ck_assert_msg(strstr(clattn_last_error(ctx), needle) != NULL, "%s: \"%s\" lacks \"%s\"", tu_label(),
                  clattn_last_error(ctx), needle);
}

START_TEST(test_refusals)
{
    const size_t dev = (size_t)_i;
    clattn_context *ctx = tu_ctx[dev];
    float zeros[64] = {0};
    cl_mem small = tu_dev_alloc_exact(ctx, 4, zeros), fine = tu_dev_alloc_exact(ctx, 64, zeros);
    clattn_mods_desc md = CLATTN_MODS_DESC_INIT;

    tu_set_label("a source that does not compile, on %s", tu_dev_spec[dev]);
    md.source = "bool mask_mod(int b, int h, long q, long k)\n{\n    return k <= q + undeclared;\n}\n";
    expect_refused(ctx, &md, CLATTN_ERROR_BUILD_FAILED, "does not compile");
    /* Line 3 of the source, where the compiler honours #line (PoCL and rusticl do; oclgrind names every
     * line of the whole program "input.cl"). */
    const char *log = clattn_build_log(ctx);
    ck_assert_msg(strstr(log, "mods:3:") != NULL || (strstr(log, "input.cl:") && strstr(log, "undeclared")),
                  "%s: the build log does not name line 3 of the source: %s", tu_label(), log);

    tu_set_label("neither function, on %s", tu_dev_spec[dev]);
    md.source = "// score_mod(...) only in a comment\nfloat helper(float x) { return x; }\n";
    expect_refused(ctx, &md, CLATTN_ERROR_INVALID_VALUE, "neither score_mod nor mask_mod");

    tu_set_label("a missing auxiliary tensor, on %s", tu_dev_spec[dev]);
    md.source = "bool mask_mod(int b, int h, long q, long k, __global const int *doc) { return doc[q] == doc[k]; }\n";
    expect_refused(ctx, &md, CLATTN_ERROR_BUILD_FAILED, "does not compile");

    tu_set_label("an auxiliary tensor of the wrong type, on %s", tu_dev_spec[dev]);
    clattn_mod_aux aux = {"doc", CLATTN_AUX_FLOAT, fine, CLATTN_AUX_BY_POSITION, 0};
    md.aux = &aux;
    md.aux_count = 1;
    expect_refused(ctx, &md, CLATTN_ERROR_BUILD_FAILED, "does not compile");

    tu_set_label("a wrong signature, on %s", tu_dev_spec[dev]);
    md.aux_count = 0;
    md.source = "float score_mod(float s, int b, int h) { return s; }\n";
    expect_refused(ctx, &md, CLATTN_ERROR_BUILD_FAILED, "does not compile");

    tu_set_label("bad auxiliary entries, on %s", tu_dev_spec[dev]);
    md.source = "bool mask_mod(int b, int h, long q, long k, __global const int *doc) { return doc[q] == doc[k]; }\n";
    md.aux_count = 1;
    aux = (clattn_mod_aux){"not a name", CLATTN_AUX_INT, fine, CLATTN_AUX_BY_POSITION, 0};
    expect_refused(ctx, &md, CLATTN_ERROR_INVALID_VALUE, "desc.aux[0].name");
    aux = (clattn_mod_aux){"doc", (clattn_aux_type)99, fine, CLATTN_AUX_BY_POSITION, 0};
    expect_refused(ctx, &md, CLATTN_ERROR_INVALID_VALUE, "unknown type");
    aux = (clattn_mod_aux){"doc", CLATTN_AUX_INT, NULL, CLATTN_AUX_BY_POSITION, 0};
    expect_refused(ctx, &md, CLATTN_ERROR_NULL_ARGUMENT, "desc.aux[0].buffer");
    aux = (clattn_mod_aux){"doc", CLATTN_AUX_INT, fine, CLATTN_AUX_BY_LENGTH, 0};
    expect_refused(ctx, &md, CLATTN_ERROR_INVALID_VALUE, "length 0");
    aux = (clattn_mod_aux){"doc", CLATTN_AUX_INT, small, CLATTN_AUX_BY_LENGTH, 5};
    expect_refused(ctx, &md, CLATTN_ERROR_BUFFER_TOO_SMALL, "desc.aux[0]");
    md.aux_count = CLATTN_MODS_MAX_AUX + 1;
    expect_refused(ctx, &md, CLATTN_ERROR_INVALID_VALUE, "at most");

    tu_set_label("bad defines, on %s", tu_dev_spec[dev]);
    md.aux_count = 0;
    md.source = "bool mask_mod(int b, int h, long q, long k) { return k <= q + W; }\n";
    const char *bad_define[] = {"1W=3"};
    md.defines = bad_define;
    md.define_count = 1;
    expect_refused(ctx, &md, CLATTN_ERROR_INVALID_VALUE, "desc.defines[0]");
    /* A value ending in a backslash would splice the generated source's next line into the macro. */
    const char *spliced[] = {"W=3 \\", "W=3\\  "};
    for (int i = 0; i < 2; i++) {
        md.defines = spliced + i;
        expect_refused(ctx, &md, CLATTN_ERROR_INVALID_VALUE, "backslash");
    }
    md.define_count = 0;
    expect_refused(ctx, &md, CLATTN_ERROR_BUILD_FAILED, "does not compile"); /* W undefined */

    tu_set_label("NULL arguments, on %s", tu_dev_spec[dev]);
    clattn_mods *mods = NULL;
    ck_assert(clattn_mods_create(ctx, NULL, &mods) == CLATTN_ERROR_NULL_ARGUMENT && mods == NULL);
    ck_assert(clattn_mods_create(NULL, &md, &mods) == CLATTN_ERROR_NULL_ARGUMENT);
    md.source = NULL;
    expect_refused(ctx, &md, CLATTN_ERROR_NULL_ARGUMENT, "desc.source");
    clattn_mods_free(NULL);

    /* A tensor too short for a call: refused at the call, its output untouched. */
    tu_set_label("an auxiliary tensor shorter than the call's positions, on %s", tu_dev_spec[dev]);
    md.source = "bool mask_mod(int b, int h, long q, long k, __global const int *doc) { return doc[q] == doc[k]; }\n";
    aux = (clattn_mod_aux){"doc", CLATTN_AUX_INT, small, CLATTN_AUX_BY_POSITION, 0};
    md.aux_count = 1;
    TU_ASSERT_OK(clattn_mods_create(ctx, &md, &mods), ctx, "clattn_mods_create");
    clattn_sdpa_desc d = tu_sdpa_desc(1, 1, 3, 5, 4, 4);
    d.mods = mods;
    float q[12], k[20], v[20];
    tu_fill_uniform(q, 12, 1.0f, 1);
    tu_fill_uniform(k, 20, 1.0f, 2);
    tu_fill_uniform(v, 20, 1.0f, 3);
    float *out = tu_host_alloc(12, NULL);
    clattn_status st = clattn_sdpa_host(ctx, &d, q, k, v, NULL, out, NULL, NULL);
    ck_assert_msg(st == CLATTN_ERROR_BUFFER_TOO_SMALL && strstr(clattn_last_error(ctx), "aux \"doc\""),
                  "%s: %s (%s)", tu_label(), clattn_status_string(st), clattn_last_error(ctx));
    ck_assert_msg(tu_host_all_sentinel(out, 12), "%s: a refused call wrote its output", tu_label());
    /* Negative query positions cannot index it. */
    long long offsets[1] = {-2};
    clattn_masks m = CLATTN_MASKS_INIT;
    m.query_offsets = offsets;
    d = tu_sdpa_desc(1, 1, 3, 4, 4, 4);
    d.masks = &m;
    d.mods = mods;
    st = clattn_sdpa_host(ctx, &d, q, k, v, NULL, out, NULL, NULL);
    ck_assert_msg(st == CLATTN_ERROR_INVALID_VALUE && strstr(clattn_last_error(ctx), "position -2"), "%s: %s (%s)",
                  tu_label(), clattn_status_string(st), clattn_last_error(ctx));
    ck_assert_msg(tu_host_all_sentinel(out, 12), "%s: a refused call wrote its output", tu_label());

    /* Mods of another context. */
    tu_set_label("mods of another context, on %s", tu_dev_spec[dev]);
    clattn_context *other = tu_context_new(tu_dev_spec[dev]);
    d = tu_sdpa_desc(1, 1, 3, 4, 4, 4);
    d.mods = mods;
    st = clattn_sdpa_host(other, &d, q, k, v, NULL, out, NULL, NULL);
    ck_assert_msg(st == CLATTN_ERROR_INVALID_VALUE && strstr(clattn_last_error(other), "another clattn context"),
                  "%s: %s (%s)", tu_label(), clattn_status_string(st), clattn_last_error(other));
    clattn_context_free(other);
    clattn_mods_free(mods);
}
END_TEST

void mods_add_layer_cases(Suite *s)
{
    tu_add_loop(s, "mha", test_mha, tu_ndev);
    tu_add_loop(s, "block_masks", test_block_masks, N_PATHS * tu_ndev);
    tu_add_loop(s, "block_mask_refusals", test_block_mask_refusals, tu_ndev);
    tu_add_loop(s, "refusals", test_refusals, tu_ndev);
}
