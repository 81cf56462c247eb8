/*
 * Failure injection (built only with -Dfault_injection=true): every OpenCL allocation, enqueue and
 * CLBlast call inside an SDPA or MHA call is made to fail in turn, as a device out of memory or
 * resources would. Each such call must either report an error with the caller's outputs untouched, or
 * recover (the fused kernel falls back to the staged path) with a correct result; and the next call on
 * the same context must succeed. Run in the sanitizer build, it also proves that no failure leaks.
 */
#include "test_util.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Test-only hooks of the library (src/base/fault.c). */
void clattn__fault_arm(unsigned long n);
void clattn__fault_arm_code(unsigned long n, int code);
unsigned long clattn__fault_points(void);
long clattn__fault_live_objects(int kind);

/* The OpenCL objects the library holds, per kind (src/base/fault.c counts its creates and releases). */
enum { OBJ_KINDS = 5 };
static const char *const object_kinds[OBJ_KINDS] = {"cl_mem", "cl_program", "cl_kernel", "cl_context",
                                                    "cl_command_queue"};
typedef struct live_objects {
    long n[OBJ_KINDS];
} live_objects;

static live_objects live_now(void)
{
    live_objects l;
    for (int k = 0; k < OBJ_KINDS; k++)
        l.n[k] = clattn__fault_live_objects(k);
    return l;
}

/* Every kind back at `base` after `when`: a failed or a successful call keeps nothing it made, beyond
 * what the context caches (its programs, kernels and, until released, scratch buffers). */
static void check_live(const live_objects *base, const char *when)
{
    const live_objects now = live_now();
    for (int k = 0; k < OBJ_KINDS; k++)
        ck_assert_msg(now.n[k] == base->n[k], "%s: %s: %ld live %s objects of the library, %ld before", tu_label(),
                      when, now.n[k], object_kinds[k], base->n[k]);
}

typedef enum {
    SC_SDPA_FUSED,
    SC_SDPA_STAGED_WEIGHTS,
    SC_SDPA_MEM_STAGED,
    SC_SDPA_DECODE,
    SC_SDPA_PAST,
    SC_SDPA_RAGGED_HOST, /* batch 0 of the fixture as a ragged batch of one sequence, (heads, rows, D) */
    SC_SDPA_PAGED,       /* both sequences appended to a paged pool, then attended over through it */
    SC_MHA_WEIGHTS, /* (the layers come last: out_count and weight_count tell them by this order) */
    SC_MHA_FUSED,
    SC_COUNT
} scenario;
static const char *const scenario_names[SC_COUNT] = {
    "sdpa_host fused (mask, key lengths, lse)", "sdpa_host staged with weights", "sdpa cl_mem staged",
    "sdpa_host decode (mask, key lengths, lse)", "sdpa_with_past_host (7 past rows, 16 new)",
    "sdpa_ragged_host (one sequence, mask, lse)", "kv_append_paged then sdpa_paged (blocks of 8, mask, lse)",
    "mha_host with W_O, biases and weights (staged)", "mha_host without weights (fused)"};

enum { B = 2, H = 3, L = 19, S = 23, D = 8, DM = 12, OD = 10, PAST = 7 };

typedef struct fixture {
    clattn_sdpa_desc d;
    clattn_mha_desc md;
    clattn_masks dm, mdm; /* d.masks and md.masks point here */
    size_t kl[B];
    float q[B * H * L * D], k[B * H * S * D], v[B * H * S * D], mask[L * S];
    float past_k[B * H * PAST * D], past_v[B * H * PAST * D], new_k[B * H * (S - PAST) * D], new_v[B * H * (S - PAST) * D];
    float x[B * L * DM], wq[DM * H * D], wk[DM * H * D], wv[DM * H * D], wo[H * D * OD], bq[H * D], bo[OD];
    double ref_out[B * L * OD > B * H * L * D ? B * L * OD : B * H * L * D], ref_w[B * H * L * S], ref_lse[B * H * L];
} fixture;

static fixture fx;
static size_t points_walked;

static void fixture_prepare(scenario sc)
{
    memset(&fx, 0, sizeof fx);
    tu_fill_uniform(fx.q, sizeof fx.q / sizeof fx.q[0], 1.0f, 1);
    tu_fill_uniform(fx.k, sizeof fx.k / sizeof fx.k[0], 1.0f, 2);
    tu_fill_uniform(fx.v, sizeof fx.v / sizeof fx.v[0], 1.0f, 3);
    tu_fill_uniform(fx.mask, L * S, 1.0f, 4);
    tu_fill_uniform(fx.x, sizeof fx.x / sizeof fx.x[0], 1.0f, 5);
    tu_fill_uniform(fx.wq, sizeof fx.wq / sizeof fx.wq[0], 0.5f, 6);
    tu_fill_uniform(fx.wk, sizeof fx.wk / sizeof fx.wk[0], 0.5f, 7);
    tu_fill_uniform(fx.wv, sizeof fx.wv / sizeof fx.wv[0], 0.5f, 8);
    tu_fill_uniform(fx.wo, sizeof fx.wo / sizeof fx.wo[0], 0.5f, 9);
    tu_fill_uniform(fx.bq, H * D, 0.5f, 10);
    tu_fill_uniform(fx.bo, OD, 0.5f, 11);
    fx.kl[0] = S;
    fx.kl[1] = S / 2;
    fx.dm = (clattn_masks)CLATTN_MASKS_INIT;
    fx.dm.causal = CLATTN_CAUSAL_BOTTOM_RIGHT;
    fx.dm.key_lengths = fx.kl;
    fx.dm.additive = CLATTN_MASK_L_S;
    fx.d = tu_sdpa_desc(B, H, L, S, D, 0);
    fx.d.masks = &fx.dm;
    fx.d.algorithm = CLATTN_ALGORITHM_AUTO;
    if (sc == SC_SDPA_STAGED_WEIGHTS || sc == SC_SDPA_MEM_STAGED)
        fx.d.algorithm = CLATTN_ALGORITHM_STAGED;
    if (sc == SC_SDPA_DECODE)
        fx.d.algorithm = CLATTN_ALGORITHM_DECODE;
    if (sc == SC_SDPA_PAGED) /* a cache's positions: query i of sequence b at lengths[b] − L + i */
        fx.kl[1] = S;
    for (size_t bh = 0; bh < B * H; bh++) { /* K and V cut into a past and new rows */
        memcpy(fx.past_k + bh * PAST * D, fx.k + bh * S * D, PAST * D * sizeof(float));
        memcpy(fx.past_v + bh * PAST * D, fx.v + bh * S * D, PAST * D * sizeof(float));
        memcpy(fx.new_k + bh * (S - PAST) * D, fx.k + (bh * S + PAST) * D, (S - PAST) * D * sizeof(float));
        memcpy(fx.new_v + bh * (S - PAST) * D, fx.v + (bh * S + PAST) * D, (S - PAST) * D * sizeof(float));
    }
    fx.mdm = (clattn_masks)CLATTN_MASKS_INIT;
    fx.mdm.causal = CLATTN_CAUSAL_TOP_LEFT;
    fx.mdm.key_lengths = fx.kl;
    fx.md = (clattn_mha_desc)CLATTN_MHA_DESC_INIT;
    fx.md.batch = B;
    fx.md.q_len = L;
    fx.md.model_dim = DM;
    fx.md.heads = H;
    fx.md.qk_dim = D;
    fx.md.out_dim = OD;
    fx.md.masks = &fx.mdm;
    if (sc == SC_MHA_WEIGHTS || sc == SC_MHA_FUSED) {
        fx.kl[0] = L; /* self-attention: L keys */
        fx.kl[1] = L / 2;
        clattn_mha_host_weights w = CLATTN_MHA_HOST_WEIGHTS_INIT;
        w.w_q = fx.wq;
        w.b_q = fx.bq;
        w.w_k = fx.wk;
        w.w_v = fx.wv;
        w.w_o = fx.wo;
        w.b_o = fx.bo;
        ref_mha(&fx.md, fx.x, NULL, &w, NULL, fx.ref_out, fx.ref_w);
    } else {
        ref_sdpa(&fx.d, fx.q, fx.k, fx.v, fx.mask, fx.ref_out, fx.ref_w, fx.ref_lse);
    }
}

/* One call of the scenario; outputs are sentinel-filled host arrays (with guards). For the cl_mem
 * scenario the outputs are read back only after a successful call. */
static clattn_status run_scenario(clattn_context *ctx, scenario sc, float *out, float *w, float *lse)
{
    clattn_mha_host_weights hw = CLATTN_MHA_HOST_WEIGHTS_INIT;
    hw.w_q = fx.wq;
    hw.b_q = fx.bq;
    hw.w_k = fx.wk;
    hw.w_v = fx.wv;
    hw.w_o = fx.wo;
    hw.b_o = fx.bo;
    switch (sc) {
    case SC_SDPA_FUSED:
        return clattn_sdpa_host(ctx, &fx.d, fx.q, fx.k, fx.v, fx.mask, out, NULL, lse);
    case SC_SDPA_STAGED_WEIGHTS:
        return clattn_sdpa_host(ctx, &fx.d, fx.q, fx.k, fx.v, fx.mask, out, w, lse);
    case SC_SDPA_MEM_STAGED: {
        cl_int err;
        cl_context cl = clattn_context_cl_context(ctx);
        cl_mem m[5] = {
            clCreateBuffer(cl, CL_MEM_COPY_HOST_PTR, sizeof fx.q, fx.q, &err),
            clCreateBuffer(cl, CL_MEM_COPY_HOST_PTR, sizeof fx.k, fx.k, &err),
            clCreateBuffer(cl, CL_MEM_COPY_HOST_PTR, sizeof fx.v, fx.v, &err),
            clCreateBuffer(cl, CL_MEM_COPY_HOST_PTR, sizeof fx.mask, fx.mask, &err),
            clCreateBuffer(cl, CL_MEM_READ_WRITE, B * H * L * D * sizeof(float), NULL, &err),
        };
        clattn_status st = clattn_sdpa(ctx, &fx.d, m[0], m[1], m[2], m[3], m[4], NULL, NULL);
        if (st == CLATTN_SUCCESS)
            st = clattn_finish(ctx);
        if (st == CLATTN_SUCCESS)
            st = (clattn_status)clEnqueueReadBuffer(clattn_context_queue(ctx), m[4], CL_TRUE, 0,
                                                    B * H * L * D * sizeof(float), out, 0, NULL, NULL);
        for (int i = 0; i < 5; i++)
            clReleaseMemObject(m[i]);
        return st;
    }
    case SC_SDPA_DECODE:
        return clattn_sdpa_host(ctx, &fx.d, fx.q, fx.k, fx.v, fx.mask, out, NULL, lse);
    case SC_SDPA_PAST: {
        clattn_sdpa_desc d = fx.d; /* the same attention, its keys given as a past and new rows */
        d.kv_len = S - PAST;
        return clattn_sdpa_with_past_host(ctx, &d, PAST, fx.past_k, fx.past_v, fx.q, fx.new_k, fx.new_v, fx.mask,
                                          NULL, NULL, out, NULL, lse);
    }
    case SC_SDPA_RAGGED_HOST: {
        /* Batch 0's (H, L, D) and (H, S, D) are a one-sequence batch in the (heads, rows, D) layout; its
         * key length is S, so the dense masks hold without key_lengths. */
        static const size_t q_starts[2] = {0, L}, k_starts[2] = {0, S};
        clattn_ragged r = CLATTN_RAGGED_INIT;
        r.q_starts = q_starts;
        r.k_starts = k_starts;
        r.layout = CLATTN_RAGGED_HEADS_ROWS;
        clattn_masks m = fx.dm;
        m.key_lengths = NULL;
        clattn_sdpa_desc d = fx.d;
        d.batch = 1;
        d.masks = &m;
        return clattn_sdpa_ragged_host(ctx, &d, &r, fx.q, fx.k, fx.v, fx.mask, out, lse);
    }
    case SC_SDPA_PAGED: {
        /* Blocks of 8 rows, the two sequences' blocks interleaved in a pool of 6 (ids 0 2 4 and 1 3 5). */
        enum { BS = 8, MAXB = (S + BS - 1) / BS };
        static const cl_int table[B * MAXB] = {0, 2, 4, 1, 3, 5};
        const size_t pool_bytes = (size_t)B * MAXB * H * BS * D * sizeof(float);
        cl_int err;
        cl_context cl = clattn_context_cl_context(ctx);
        cl_mem m[6] = {
            clCreateBuffer(cl, CL_MEM_READ_WRITE, pool_bytes, NULL, &err),
            clCreateBuffer(cl, CL_MEM_READ_WRITE, pool_bytes, NULL, &err),
            clCreateBuffer(cl, CL_MEM_COPY_HOST_PTR, sizeof table, (void *)table, &err),
            clCreateBuffer(cl, CL_MEM_COPY_HOST_PTR, sizeof fx.q, fx.q, &err),
            clCreateBuffer(cl, CL_MEM_COPY_HOST_PTR, sizeof fx.k, fx.k, &err),
            clCreateBuffer(cl, CL_MEM_COPY_HOST_PTR, sizeof fx.v, fx.v, &err),
        };
        cl_mem mo = clCreateBuffer(cl, CL_MEM_READ_WRITE, B * H * L * D * sizeof(float), NULL, &err),
               ml = clCreateBuffer(cl, CL_MEM_READ_WRITE, B * H * L * sizeof(float), NULL, &err);
        clattn_paged_cache cache = CLATTN_PAGED_CACHE_INIT;
        cache.k_pool = m[0];
        cache.v_pool = m[1];
        cache.blocks = B * MAXB;
        cache.block_size = BS;
        cache.block_table = m[2];
        cache.max_blocks = MAXB;
        /* The mask's last dimension is the table's reach (max_blocks·block_size): the fixture's (L, S)
         * columns, then columns no key reaches. */
        float wide[L * BS * MAXB];
        for (size_t i = 0; i < L; i++)
            for (size_t j = 0; j < BS * MAXB; j++)
                wide[i * BS * MAXB + j] = j < S ? fx.mask[i * S + j] : 0.0f;
        cl_mem mask = clCreateBuffer(cl, CL_MEM_COPY_HOST_PTR, sizeof wide, wide, &err);
        const size_t empty[B] = {0, 0};
        clattn_sdpa_desc d = fx.d;
        clattn_masks dm = fx.dm;
        dm.key_lengths = NULL;
        d.masks = &dm;
        d.kv_len = S;
        clattn_status st = clattn_kv_append_paged(ctx, &d, &cache, empty, S, m[4], m[5]);
        d.kv_len = BS * MAXB;
        if (st == CLATTN_SUCCESS)
            st = clattn_sdpa_paged(ctx, &d, &cache, fx.kl, m[3], mask, mo, ml);
        if (st == CLATTN_SUCCESS)
            st = clattn_finish(ctx);
        if (st == CLATTN_SUCCESS)
            st = (clattn_status)clEnqueueReadBuffer(clattn_context_queue(ctx), mo, CL_TRUE, 0,
                                                    B * H * L * D * sizeof(float), out, 0, NULL, NULL);
        if (st == CLATTN_SUCCESS)
            st = (clattn_status)clEnqueueReadBuffer(clattn_context_queue(ctx), ml, CL_TRUE, 0,
                                                    B * H * L * sizeof(float), lse, 0, NULL, NULL);
        for (int i = 0; i < 6; i++)
            clReleaseMemObject(m[i]);
        clReleaseMemObject(mask);
        clReleaseMemObject(mo);
        clReleaseMemObject(ml);
        return st;
    }
    case SC_MHA_WEIGHTS:
        return clattn_mha_host(ctx, &fx.md, fx.x, NULL, &hw, NULL, out, w);
    case SC_MHA_FUSED:
    default:
        return clattn_mha_host(ctx, &fx.md, fx.x, NULL, &hw, NULL, out, NULL);
    }
}

static size_t out_count(scenario sc) { return sc >= SC_MHA_WEIGHTS ? (size_t)B * L * OD : (size_t)B * H * L * D; }
/* The layer is self-attention: its weights are (B,H,L,L). */
static size_t weight_count(scenario sc) { return sc >= SC_MHA_WEIGHTS ? (size_t)B * H * L * L : (size_t)B * H * L * S; }

static void check_success(clattn_context *ctx, scenario sc, const char *when)
{
    float *out = tu_host_alloc(out_count(sc), NULL), *w = tu_host_alloc(weight_count(sc), NULL),
          *lse = tu_host_alloc(B * H * L, NULL);
    clattn_status st = run_scenario(ctx, sc, out, w, lse);
    TU_ASSERT_OK(st, ctx, when);
    if (sc == SC_SDPA_RAGGED_HOST) { /* batch 0; a ragged lse is (rows, heads) */
        check_close_named("out", out, fx.ref_out, (size_t)H * L * D, NULL);
        float by_head[H * L];
        for (size_t i = 0; i < L; i++)
            for (size_t h = 0; h < H; h++)
                by_head[h * L + i] = lse[i * H + h];
        check_close_named("lse", by_head, fx.ref_lse, (size_t)H * L, NULL);
        return;
    }
    check_close_named("out", out, fx.ref_out, out_count(sc), NULL);
    if (sc == SC_SDPA_STAGED_WEIGHTS || sc == SC_MHA_WEIGHTS)
        check_close_named("weights", w, fx.ref_w, weight_count(sc), NULL);
    if (sc == SC_SDPA_FUSED || sc == SC_SDPA_STAGED_WEIGHTS || sc == SC_SDPA_DECODE || sc == SC_SDPA_PAST ||
        sc == SC_SDPA_PAGED)
        check_close_named("lse", lse, fx.ref_lse, B * H * L, NULL);
}

/* Builds every program a call may reach — fused, decode, staged (their fallback), projections — so
 * that a failure walk compares live objects with a context that has compiled all it ever will. */
static void warm_all_paths(clattn_context *ctx)
{
    enum { WB = 1, WH = 1, WL = 3, WD = 4, WM = 4 };
    float q[WB * WH * WL * WD], o[WB * WH * WL * WD], p[WB * WH * WL * WL], x[WL * WM], y[WL * WM], w[WM * WM];
    tu_fill_uniform(q, sizeof q / sizeof q[0], 1.0f, 31);
    tu_fill_uniform(x, sizeof x / sizeof x[0], 1.0f, 32);
    tu_fill_uniform(w, sizeof w / sizeof w[0], 1.0f, 33);
    clattn_sdpa_desc d = tu_sdpa_desc(WB, WH, WL, WL, WD, 0);
    d.algorithm = CLATTN_ALGORITHM_FUSED;
    TU_ASSERT_OK(clattn_sdpa_host(ctx, &d, q, q, q, NULL, o, NULL, NULL), ctx, "warm-up: fused");
    d.algorithm = CLATTN_ALGORITHM_STAGED;
    TU_ASSERT_OK(clattn_sdpa_host(ctx, &d, q, q, q, NULL, o, p, NULL), ctx, "warm-up: staged");
    d.algorithm = CLATTN_ALGORITHM_DECODE;
    TU_ASSERT_OK(clattn_sdpa_host(ctx, &d, q, q, q, NULL, o, NULL, NULL), ctx, "warm-up: decode");
    clattn_mha_desc md = CLATTN_MHA_DESC_INIT;
    md.batch = 1;
    md.q_len = WL;
    md.model_dim = WM;
    md.heads = 1;
    md.qk_dim = WM;
    clattn_mha_host_weights hw = CLATTN_MHA_HOST_WEIGHTS_INIT;
    hw.w_q = hw.w_k = hw.w_v = hw.w_o = hw.b_q = w;
    TU_ASSERT_OK(clattn_mha_host(ctx, &md, x, NULL, &hw, NULL, y, NULL), ctx, "warm-up: layer");
}

/* Since 0.7 a call's features (its masks and terms, a ragged or paged layout) are build options of its
 * kernels: the programs a failure may fall back to are those of this scenario's features on every path,
 * so the scenario itself runs once on each (a path that refuses it builds nothing). */
static void warm_scenario_paths(clattn_context *ctx, scenario sc)
{
    static const clattn_algorithm algorithms[] = {CLATTN_ALGORITHM_FUSED, CLATTN_ALGORITHM_STAGED,
                                                  CLATTN_ALGORITHM_DECODE};
    const clattn_algorithm sdpa_was = fx.d.algorithm, mha_was = fx.md.algorithm;
    for (size_t a = 0; a < sizeof algorithms / sizeof algorithms[0]; a++) {
        float *out = tu_host_alloc(out_count(sc), NULL), *w = tu_host_alloc(weight_count(sc), NULL),
              *lse = tu_host_alloc(B * H * L, NULL);
        fx.d.algorithm = fx.md.algorithm = algorithms[a];
        (void)run_scenario(ctx, sc, out, w, lse);
    }
    fx.d.algorithm = sdpa_was;
    fx.md.algorithm = mha_was;
    clattn_finish(ctx);
}

START_TEST(test_fault_walk)
{
    const scenario sc = (scenario)TU_CASE(_i);
    const size_t dev = TU_DEVICE(_i);
    clattn_context *ctx = tu_ctx[dev];
    fixture_prepare(sc);
    tu_set_label("%s on %s", scenario_names[sc], tu_dev_spec[dev]);

    /* Unarmed: builds the kernels and counts this call's failure points. The objects the context
     * keeps after it (programs, kernels; no scratch once released) are the baseline of every call. */
    clattn__fault_arm(0);
    check_success(ctx, sc, "unarmed");
    const unsigned long points = clattn__fault_points();
    ck_assert_msg(points > 0, "%s: no failure points were passed", tu_label());
    warm_all_paths(ctx);
    warm_scenario_paths(ctx, sc);
    clattn_context_release_temporaries(ctx);
    const live_objects base = live_now();
    check_success(ctx, sc, "unarmed, again");
    clattn_context_release_temporaries(ctx);
    check_live(&base, "after a successful call");

    for (unsigned long n = 1; n <= points; n++) {
        tu_set_label("%s, failure at point %lu of %lu, on %s", scenario_names[sc], n, points, tu_dev_spec[dev]);
        float *out = tu_host_alloc(out_count(sc), NULL), *w = tu_host_alloc(weight_count(sc), NULL),
              *lse = tu_host_alloc(B * H * L, NULL);
        clattn__fault_arm(n);
        clattn_status st = run_scenario(ctx, sc, out, w, lse);
        clattn__fault_arm(0);
        const bool has_detail = clattn_last_error(ctx)[0] != '\0';
        clattn_finish(ctx); /* nothing of the failed call may still run */
        if (st != CLATTN_SUCCESS) {
            ck_assert_msg(has_detail, "%s: %s without a detail", tu_label(), clattn_status_string(st));
            if (sc != SC_SDPA_MEM_STAGED && sc != SC_SDPA_PAGED) { /* host variants write nothing on failure */
                ck_assert_msg(tu_host_all_sentinel(out, out_count(sc)), "%s: out written by a failed call", tu_label());
                ck_assert_msg(tu_host_all_sentinel(w, weight_count(sc)), "%s: weights written by a failed call",
                              tu_label());
                ck_assert_msg(tu_host_all_sentinel(lse, B * H * L), "%s: lse written by a failed call", tu_label());
            }
        } else {
            /* recovered (the fused kernel fell back to the staged path): the answer must be right */
            check_close_named("out (recovered)", out, fx.ref_out,
                              sc == SC_SDPA_RAGGED_HOST ? (size_t)H * L * D : out_count(sc), NULL);
        }
        clattn_context_release_temporaries(ctx);
        check_live(&base, "after the failed call");
        check_success(ctx, sc, "the call after a failure");
        clattn_context_release_temporaries(ctx);
        check_live(&base, "after the call after a failure");
        points_walked++;
    }
}
END_TEST

/* A whole context's life — create, every scenario, free — leaves no object of the library alive: the
 * context, its queue, programs, kernels and buffers are all released (CLBlast's cache included, which
 * holds programs, and through them the cl_context, of every context that ran a projection). */
START_TEST(test_context_lifetime)
{
    const size_t dev = TU_DEVICE(_i);
    tu_set_label("create, run every scenario, free on %s", tu_dev_spec[dev]);
    const live_objects base = live_now();
    for (int cycle = 0; cycle < 2; cycle++) {
        clattn_context *ctx = NULL;
        TU_ASSERT_OK(clattn_context_create(&ctx, tu_dev_spec[dev]), NULL, "clattn_context_create");
        for (int sc = 0; sc < SC_COUNT; sc++) {
            fixture_prepare((scenario)sc);
            check_success(ctx, (scenario)sc, scenario_names[sc]);
        }
        clattn_context_free(ctx);
        check_live(&base, "after clattn_context_free");
    }
}
END_TEST

/* Y = X·W through clattn_projection (one CLBlast GEMM: failure point 1), against the host product. */
enum { PR = 37, PI = 29, PO = 19 };
static void check_projection(clattn_context *ctx, cl_mem x, cl_mem w, cl_mem y, const float *hx, const float *hw,
                             const char *when)
{
    clattn_status st = clattn_projection(ctx, PR, PI, PO, x, w, NULL, y);
    TU_ASSERT_OK(st, ctx, when);
    float got[PR * PO];
    double want[PR * PO];
    TU_ASSERT_OK((clattn_status)clEnqueueReadBuffer(clattn_context_queue(ctx), y, CL_TRUE, 0, sizeof got, got, 0,
                                                    NULL, NULL),
                 ctx, "reading Y");
    for (size_t r = 0; r < PR; r++)
        for (size_t o = 0; o < PO; o++) {
            double acc = 0;
            for (size_t i = 0; i < PI; i++)
                acc += (double)hx[r * PI + i] * hw[i * PO + o];
            want[r * PO + o] = acc;
        }
    check_close_named(when, got, want, PR * PO, NULL);
}

static bool warned(clattn_context *ctx, const char *what) { return strstr(clattn_last_warning(ctx), what) != NULL; }

/* CL_OUT_OF_RESOURCES from CLBlast may pass: the call falls back to clattn's GEMM kernel with a
 * warning, and the next call uses CLBlast again; only BLAS_TRANSIENT_LIMIT (3) such failures in a row
 * switch the context to clattn's kernel for good. Whether CLBlast or clattn's kernel ran is seen by
 * failing point 1 again: it is CLBlast's (the call recovers) until the switch, the kernel's launch
 * after it (the call fails). Needs a device CLBlast can launch on (work groups of 64). */
START_TEST(test_blas_transient)
{
    const size_t dev = TU_DEVICE(_i);
    tu_set_label("CLBlast out of resources, on %s", tu_dev_spec[dev]);
    clattn_context *ctx = NULL;
    clattn_context_options o = CLATTN_CONTEXT_OPTIONS_INIT;
    o.device = tu_dev_spec[dev];
    o.gemm = "clblast"; /* CPUs default to clattn's kernel */
    TU_ASSERT_OK(clattn_context_create_with_options(&ctx, &o), NULL, "clattn_context_create_with_options");
    size_t max_wg = 0;
    clGetDeviceInfo(clattn_context_device(ctx), CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof max_wg, &max_wg, NULL);
    static float hx[PR * PI], hw[PI * PO];
    tu_fill_uniform(hx, PR * PI, 1.0f, 21);
    tu_fill_uniform(hw, PI * PO, 1.0f, 22);
    cl_int err;
    cl_context cl = clattn_context_cl_context(ctx);
    cl_mem x = clCreateBuffer(cl, CL_MEM_COPY_HOST_PTR, sizeof hx, hx, &err);
    cl_mem w = clCreateBuffer(cl, CL_MEM_COPY_HOST_PTR, sizeof hw, hw, &err);
    cl_mem y = clCreateBuffer(cl, CL_MEM_READ_WRITE, PR * PO * sizeof(float), NULL, &err);
    ck_assert(x && w && y);

    clattn__fault_arm(0);
    check_projection(ctx, x, w, y, hx, hw, "unarmed");
    ck_assert_msg(clattn__fault_points() == 1, "%s: %lu failure points in one projection, expected 1", tu_label(),
                  clattn__fault_points());
    /* With work groups under 64 items CLBlast is never called: only clattn's kernel, from the start. */
    for (int call = 1; call <= 4 && max_wg >= 64; call++) {
        clattn__fault_arm_code(1, CL_OUT_OF_RESOURCES);
        check_projection(ctx, x, w, y, hx, hw, "CLBlast out of resources");
        clattn__fault_arm(0);
        /* calls 2, 3 and 4 fail in a row: the third of them switches to clattn's kernel for good */
        const char *expected = call < 4 ? "ran out of resources" : "cannot run";
        ck_assert_msg(warned(ctx, expected), "%s: call %d: no warning \"%s\": \"%s\"", tu_label(), call, expected,
                      clattn_last_warning(ctx));
        if (call == 1) {
            /* a success in between: the next failure counts from one again, and no stale warning */
            check_projection(ctx, x, w, y, hx, hw, "unarmed after a transient failure");
            ck_assert_msg(clattn_last_warning(ctx)[0] == '\0', "%s: a stale warning after a good call: \"%s\"",
                          tu_label(), clattn_last_warning(ctx));
        }
    }
    clattn__fault_arm_code(1, CL_OUT_OF_RESOURCES);
    clattn_status st = clattn_projection(ctx, PR, PI, PO, x, w, NULL, y);
    clattn__fault_arm(0);
    ck_assert_msg(st == (clattn_status)CL_OUT_OF_RESOURCES,
                  "%s: after the switch, point 1 should be the kernel's launch (error), got %s", tu_label(),
                  clattn_status_string(st));
    check_projection(ctx, x, w, y, hx, hw, "clattn's kernel after the switch");
    clReleaseMemObject(x);
    clReleaseMemObject(w);
    clReleaseMemObject(y);
    clattn_context_free(ctx);
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("faults");
    tu_add_loop(s, "walk", test_fault_walk, SC_COUNT * tu_ndev);
    tu_add_loop(s, "context_lifetime", test_context_lifetime, tu_ndev);
    tu_add_loop(s, "blas_transient", test_blas_transient, tu_ndev);
    return s;
}

int main(void)
{
    int rc = tu_main(make_suite);
    printf("failure points walked: %zu\n", points_walked);
    return rc;
}
