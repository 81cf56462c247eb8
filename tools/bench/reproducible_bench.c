/* reproducible_bench: reproducible arithmetic (desc.arithmetic = CLATTN_ARITHMETIC_REPRODUCIBLE) against the
 * default arithmetic on the same call, on one device, in one run (issue 41's cost): SDPA forward of B sequences,
 * H query heads over KVH K/V heads, L query rows over S keys, head size D, float32, bottom-right causal where
 * CAUSAL is 1 — or, with BACKWARD 1, its backward pass (clattn_sdpa_backward after one untimed forward of each
 * mode for its out and lse). Each mode runs once to warm up, then RUNS times, alternated; printed: the best and
 * the median of each, milliseconds, and the ratio of the bests.
 *
 *   reproducible_bench [B H KVH L S D CAUSAL RUNS BACKWARD [DEVICE]]     (default 1 8 8 2048 2048 64 0 5 0) */
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
} mode_work;

static void run_mode(clattn_context *ctx, int m, void *work)
{
    const mode_work *w = work;
    clattn_sdpa_desc d = w->d;
    d.arithmetic = m == REPRODUCIBLE ? CLATTN_ARITHMETIC_REPRODUCIBLE : CLATTN_ARITHMETIC_DEFAULT;
    if (w->backward)
        BENCH_CHECK(ctx, clattn_sdpa_backward(ctx, &d, w->q, w->k, w->v, NULL, w->outs[m], w->lses[m], w->dout,
                                              w->grads[0], w->grads[1], w->grads[2], NULL));
    else
        BENCH_CHECK(ctx, clattn_sdpa(ctx, &d, w->q, w->k, w->v, NULL, w->out, NULL, NULL));
}

int main(int argc, char **argv)
{
    size_t a[9] = {1, 8, 8, 2048, 2048, 64, 0, 5, 0};
    for (int i = 1; i < argc && i <= 9; i++)
        a[i - 1] = strtoul(argv[i], NULL, 10);
    const size_t B = a[0], H = a[1], KVH = a[2], L = a[3], S = a[4], D = a[5], runs = a[7] ? a[7] : 1;
    clattn_context *ctx = NULL;
    BENCH_CHECK(ctx, clattn_context_create(&ctx, argc > 10 ? argv[10] : NULL));
    printf("reproducible_bench on %s: B = %zu, H = %zu over %zu K/V heads, L = %zu, S = %zu, D = %zu, float32%s%s\n",
           clattn_context_device_name(ctx), B, H, KVH, L, S, D, a[6] ? ", causal" : "", a[8] ? ", backward" : "");
    mode_work w = {CLATTN_SDPA_DESC_INIT, NULL, NULL, NULL, NULL, NULL, {NULL}, {NULL}, {NULL}, (int)a[8]};
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
    if (w.backward) { /* each mode's forward, once: the out and lse its backward takes */
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
