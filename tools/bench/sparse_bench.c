/* sparse_bench: top-k sparse attention (clattn_sdpa_sparse) against dense decode over every key, on one device,
 * in one run (issue 40's case): one query row a sequence, K rows selected of a dense cache of S rows (random
 * distinct positions), H query heads over KVH K/V heads, head size D, float32.
 *   sparse    clattn_sdpa_sparse over the selected keys
 *   select    clattn_topk choosing the K keys from an indexer's scores (random, one a key), then the same
 *   dense     clattn_sdpa (the decode kernels) over all S keys
 * Each is run once to warm up, then RUNS times, alternated; printed: the best and the median of each,
 * milliseconds, the ratio of the bests, and the bytes each reads per millisecond.
 *
 *   sparse_bench [B S K H KVH D RUNS [DEVICE]]     (default 1 65536 2048 32 8 128 7) */
#define _POSIX_C_SOURCE 200809L /* (clock_gettime) */
#include "bench_common.h"

#include <stdio.h>
#include <stdlib.h>

enum { SPARSE, SELECT, DENSE, N };
typedef struct sparse_work {
    clattn_sdpa_desc d;
    size_t top_k;
    cl_mem indices, q, k, v, out;
    cl_mem scores, chosen; /* the indexer's scores (B, 1, S) and clattn_topk's choice of them */
} sparse_work;

static void run_method(clattn_context *ctx, int m, void *work)
{
    const sparse_work *w = work;
    if (m == SPARSE)
        BENCH_CHECK(ctx, clattn_sdpa_sparse(ctx, &w->d, w->top_k, w->indices, w->q, w->k, w->v, NULL, NULL, w->out, NULL));
    else if (m == SELECT) {
        BENCH_CHECK(ctx, clattn_topk(ctx, w->d.batch, 1, w->d.kv_len, w->top_k, w->scores, NULL, w->chosen));
        BENCH_CHECK(ctx, clattn_sdpa_sparse(ctx, &w->d, w->top_k, w->chosen, w->q, w->k, w->v, NULL, NULL, w->out, NULL));
    } else
        BENCH_CHECK(ctx, clattn_sdpa(ctx, &w->d, w->q, w->k, w->v, NULL, w->out, NULL, NULL));
}

int main(int argc, char **argv)
{
    size_t a[7] = {1, 65536, 2048, 32, 8, 128, 7};
    for (int i = 1; i < argc && i <= 7; i++)
        a[i - 1] = strtoul(argv[i], NULL, 10);
    const size_t B = a[0], S = a[1], K = a[2], H = a[3], KVH = a[4], D = a[5], runs = a[6] ? a[6] : 1;
    if (K > S) {
        fprintf(stderr, "sparse_bench: K must be at most S\n");
        return 2;
    }
    clattn_context *ctx = NULL;
    BENCH_CHECK(ctx, clattn_context_create(&ctx, argc > 8 ? argv[8] : NULL));
    printf("sparse_bench on %s: B = %zu, one query row each, %zu of %zu keys, H = %zu over %zu K/V heads, D = %zu, "
           "float32\n", clattn_context_device_name(ctx), B, K, S, H, KVH, D);
    const size_t kv_floats = B * KVH * S * D;
    sparse_work w = {CLATTN_SDPA_DESC_INIT, K, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    float *scores = bench_random_floats(B * S, 9);
    w.scores = bench_buffer(ctx, B * S * sizeof(float), scores);
    w.chosen = bench_buffer(ctx, B * K * sizeof(cl_int), NULL);
    free(scores);
    for (int which = 0; which < 2; which++) {
        float *x = bench_random_floats(kv_floats, (unsigned)which + 1);
        *(which ? &w.v : &w.k) = bench_buffer(ctx, kv_floats * sizeof(float), x);
        free(x);
    }
    float *q = bench_random_floats(B * H * D, 3);
    w.q = bench_buffer(ctx, B * H * D * sizeof(float), q);
    w.out = bench_buffer(ctx, B * H * D * sizeof(float), NULL);
    /* Each row's K distinct positions: a random permutation's first K (a linear congruential shuffle). */
    cl_int *indices = malloc(B * K * sizeof *indices), *perm = malloc(S * sizeof *perm);
    if (!indices || !perm)
        return 1;
    unsigned seed = 7;
    for (size_t b = 0; b < B; b++) {
        for (size_t j = 0; j < S; j++)
            perm[j] = (cl_int)j;
        for (size_t j = 0; j < K; j++) {
            seed = seed * 1664525u + 1013904223u;
            const size_t t = j + (size_t)seed % (S - j);
            const cl_int swap = perm[j];
            perm[j] = perm[t], perm[t] = swap;
            indices[b * K + j] = perm[j];
        }
    }
    w.indices = bench_buffer(ctx, B * K * sizeof(cl_int), indices);
    w.d.batch = B, w.d.heads = H, w.d.kv_heads = KVH, w.d.q_len = 1, w.d.kv_len = S, w.d.qk_dim = w.d.v_dim = D;
    static const char *const names[N] = {"sparse", "select", "dense"};
    double best[N];
    bench_alternate(ctx, N, runs, run_method, &w, names, best);
    const double bytes_sparse = (double)B * KVH * K * 2 * D * 4, bytes_dense = (double)B * KVH * S * 2 * D * 4;
    printf("sparse is %.1fx faster than dense decode over all %zu keys (K/V read: sparse %.1f GB/s, dense %.1f GB/s)\n",
           best[DENSE] / best[SPARSE], S, bytes_sparse / best[SPARSE] / 1e6, bytes_dense / best[DENSE] / 1e6);
    /* (clattn_topk gives the positions in ascending order, which the sparse call reads faster than random ones) */
    printf("choosing the %zu keys in the call (clattn_topk, then the sparse call on its ascending positions): "
           "%.1fx faster than dense decode\n", K, best[DENSE] / best[SELECT]);
    clattn_context_free(ctx);
    return 0;
}
