/* reproducible_bench: reproducible arithmetic (desc.arithmetic = CLATTN_ARITHMETIC_REPRODUCIBLE) against the
 * default arithmetic on the same call, on one device, in one run (issue 41's cost): SDPA forward of B sequences,
 * H query heads over KVH K/V heads, L query rows over S keys, head size D, float32, bottom-right causal where
 * CAUSAL is 1 — or, with WHAT 1, its backward pass (clattn_sdpa_backward after one untimed forward of each mode for
 * its out and lse); WHAT 2 and 3: a self-attention layer over the same heads (clattn_mha: model_dim = H·D, biases
 * and W_O; S is L) and its backward pass (clattn_mha_backward, every gradient). Each mode runs once to warm up,
 * then RUNS times, alternated; printed: the best and the median of each, milliseconds, and the ratio of the bests.
 *
 *   reproducible_bench [B H KVH L S D CAUSAL RUNS WHAT [DEVICE]]     (default 1 8 8 2048 2048 64 0 5 0) */
#define _POSIX_C_SOURCE 200809L /* (clock_gettime) */
#include "bench_common.h"

#include <stdio.h>
#include <stdlib.h>

enum { DEFAULT, REPRODUCIBLE, N };
typedef struct mode_work {
    clattn_sdpa_desc d;
    cl_mem q, k, v, out, dout, grads[3];
    cl_mem outs[N], lses[N]; /* the backward's: each mode's forward out and lse */
    int backward;
    clattn_mha_desc md; /* the layer's (WHAT 2 and 3) */
    clattn_mha_weights weights;
    clattn_mha_grads grads_layer;
} mode_work;

static void run_mode(clattn_context *ctx, int m, void *work)
{
    const mode_work *w = work;
    clattn_sdpa_desc d = w->d;
    d.arithmetic = m == REPRODUCIBLE ? CLATTN_ARITHMETIC_REPRODUCIBLE : CLATTN_ARITHMETIC_DEFAULT;
    clattn_mha_desc md = w->md;
    md.arithmetic = d.arithmetic;
    if (w->backward == 2)
        BENCH_CHECK(ctx, clattn_mha(ctx, &md, w->q, NULL, &w->weights, NULL, w->out, NULL));
    else if (w->backward == 3)
        BENCH_CHECK(ctx, clattn_mha_backward(ctx, &md, w->q, NULL, &w->weights, NULL, w->dout, &w->grads_layer));
    else if (w->backward)
        BENCH_CHECK(ctx, clattn_sdpa_backward(ctx, &d, w->q, w->k, w->v, NULL, w->outs[m], w->lses[m], w->dout,
                                              w->grads[0], w->grads[1], w->grads[2], NULL));
    else
        BENCH_CHECK(ctx, clattn_sdpa(ctx, &d, w->q, w->k, w->v, NULL, w->out, NULL, NULL));
}

/* The layer's call (WHAT 2 and 3): X (B, L, H·D) in w->q's place, the weights, d_out in w->dout's, the gradients. */
static void layer_setup(clattn_context *ctx, mode_work *w, size_t B, size_t H, size_t KVH, size_t L, size_t D, int causal)
{
    static clattn_masks masks = CLATTN_MASKS_INIT;
    masks.causal = CLATTN_CAUSAL_TOP_LEFT;
    const size_t dm = H * D, kvw = KVH * D, rows = B * L;
    w->md.batch = B, w->md.q_len = L, w->md.model_dim = dm, w->md.heads = H, w->md.kv_heads = KVH, w->md.qk_dim = D;
    w->md.masks = causal ? &masks : NULL;
    const size_t sizes[8] = {dm * dm, dm, dm * kvw, kvw, dm * kvw, kvw, dm * dm, dm};
    cl_mem *weights[8] = {&w->weights.w_q, &w->weights.b_q, &w->weights.w_k, &w->weights.b_k,
                          &w->weights.w_v, &w->weights.b_v, &w->weights.w_o, &w->weights.b_o};
    cl_mem *grads[8] = {&w->grads_layer.d_w_q, &w->grads_layer.d_b_q, &w->grads_layer.d_w_k, &w->grads_layer.d_b_k,
                        &w->grads_layer.d_w_v, &w->grads_layer.d_b_v, &w->grads_layer.d_w_o, &w->grads_layer.d_b_o};
    for (int i = 0; i < 8; i++) {
        float *x = bench_random_floats(sizes[i], 10u + (unsigned)i);
        for (size_t e = 0; e < sizes[i]; e++)
            x[e] /= 8.0f; /* (scores of order 1) */
        *weights[i] = bench_buffer(ctx, sizes[i] * sizeof(float), x);
        free(x);
        *grads[i] = bench_buffer(ctx, sizes[i] * sizeof(float), NULL);
    }
    float *x = bench_random_floats(rows * dm, 5);
    w->dout = bench_buffer(ctx, rows * dm * sizeof(float), x);
    free(x);
    w->grads_layer.d_x = bench_buffer(ctx, rows * dm * sizeof(float), NULL);
}

int main(int argc, char **argv)
{
    size_t a[9] = {1, 8, 8, 2048, 2048, 64, 0, 5, 0};
    for (int i = 1; i < argc && i <= 9; i++)
        a[i - 1] = strtoul(argv[i], NULL, 10);
    const size_t B = a[0], H = a[1], KVH = a[2], L = a[3], S = a[4], D = a[5], runs = a[7] ? a[7] : 1;
    clattn_context *ctx = NULL;
    BENCH_CHECK(ctx, clattn_context_create(&ctx, argc > 10 ? argv[10] : NULL));
    static const char *const what[4] = {"", ", backward", ", the layer", ", the layer's backward"};
    printf("reproducible_bench on %s: B = %zu, H = %zu over %zu K/V heads, L = %zu, S = %zu, D = %zu, float32%s%s\n",
           clattn_context_device_name(ctx), B, H, KVH, L, S, D, a[6] ? ", causal" : "", what[a[8] % 4]);
    mode_work w = {CLATTN_SDPA_DESC_INIT, NULL, NULL, NULL, NULL, NULL, {NULL}, {NULL}, {NULL}, (int)(a[8] % 4),
                   CLATTN_MHA_DESC_INIT, CLATTN_MHA_WEIGHTS_INIT, CLATTN_MHA_GRADS_INIT};
    if (w.backward >= 2)
        layer_setup(ctx, &w, B, H, KVH, L, D, a[6]);
    const size_t q_floats = B * H * L * D, kv_floats = B * KVH * S * D;
    float *x = bench_random_floats(q_floats, 1);
    w.q = bench_buffer(ctx, q_floats * sizeof(float), x);
    free(x);
    for (int which = 0; which < 2; which++) {
        x = bench_random_floats(kv_floats, (unsigned)which + 2);
        *(which ? &w.v : &w.k) = bench_buffer(ctx, kv_floats * sizeof(float), x);
        free(x);
    }
    w.out = bench_buffer(ctx, q_floats * sizeof(float), NULL);
    static clattn_masks causal = CLATTN_MASKS_INIT;
    causal.causal = CLATTN_CAUSAL_BOTTOM_RIGHT;
    w.d.batch = B, w.d.heads = H, w.d.kv_heads = KVH, w.d.q_len = L, w.d.kv_len = S, w.d.qk_dim = w.d.v_dim = D;
    w.d.masks = a[6] ? &causal : NULL;
    if (w.backward == 1) { /* each mode's forward, once: the out and lse its backward takes */
        x = bench_random_floats(q_floats, 5);
        w.dout = bench_buffer(ctx, q_floats * sizeof(float), x);
        free(x);
        w.grads[0] = bench_buffer(ctx, q_floats * sizeof(float), NULL);
        w.grads[1] = bench_buffer(ctx, kv_floats * sizeof(float), NULL);
        w.grads[2] = bench_buffer(ctx, kv_floats * sizeof(float), NULL);
        for (int m = 0; m < N; m++) {
            clattn_sdpa_desc d = w.d;
            d.arithmetic = m == REPRODUCIBLE ? CLATTN_ARITHMETIC_REPRODUCIBLE : CLATTN_ARITHMETIC_DEFAULT;
            w.outs[m] = bench_buffer(ctx, q_floats * sizeof(float), NULL);
            w.lses[m] = bench_buffer(ctx, B * H * L * sizeof(float), NULL);
            BENCH_CHECK(ctx, clattn_sdpa(ctx, &d, w.q, w.k, w.v, NULL, w.outs[m], NULL, w.lses[m]));
        }
    }
    static const char *const names[N] = {"default", "reproducible"};
    double best[N];
    bench_alternate(ctx, N, runs, run_mode, &w, names, best);
    printf("reproducible takes %.2fx the default arithmetic's time\n", best[REPRODUCIBLE] / best[DEFAULT]);
    clattn_context_free(ctx);
    return 0;
}
