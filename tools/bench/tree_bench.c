/* tree_bench: tree attention (speculative decoding's verification step) against one decode step over the same
 * paged cache, on one device, in one run (issue 40's case): a draft tree of T tokens (each token's parent
 * (i − 1) / 2: a binary tree, -1 its root) whose rows follow C cached rows, H query heads over KVH K/V heads,
 * head size D, float32, blocks of 16.
 *   tree      clattn_sdpa_paged, T queries, masks.tree_parents (each sees the cache and its ancestors)
 *   mask      the same through an explicit bool mask (B, 1, T, S) built on the host (uploaded once)
 *   chunk     the same T queries with a bottom-right causal mask only (a chunked prefill: no tree)
 *   decode    clattn_sdpa_paged, one query over the C cached rows
 * Each is run once to warm up (compiling its kernels), then RUNS times, the calls alternated; printed: the
 * best and the median of each, milliseconds, and the ratios of the bests.
 *
 *   tree_bench [B C T H KVH D RUNS [DEVICE]]     (default 1 8192 64 32 8 128 7) */
#define _POSIX_C_SOURCE 200809L /* (clock_gettime) */
#include "bench_common.h"

#include <stdio.h>
#include <stdlib.h>

#define BLOCK 16

/* The work, four ways (bench_method): through the tree, an explicit mask, no tree, and one decode step. */
enum { TREE, MASK, CHUNK, DECODE, N };
typedef struct tree_work {
    clattn_sdpa_desc d;
    clattn_paged_cache cache;
    clattn_masks masks[3]; /* TREE, MASK, CHUNK's */
    cl_mem mask, q, out;
    const size_t *cached, *with_draft;
} tree_work;

static void run_method(clattn_context *ctx, int m, void *work)
{
    const tree_work *w = work;
    clattn_sdpa_desc call = w->d;
    call.masks = m == DECODE ? NULL : &w->masks[m];
    call.q_len = m == DECODE ? 1 : w->d.q_len;
    BENCH_CHECK(ctx, clattn_sdpa_paged(ctx, &call, &w->cache, m == DECODE ? w->cached : w->with_draft, w->q,
                                       m == MASK ? w->mask : NULL, w->out, NULL));
}

int main(int argc, char **argv)
{
    size_t a[7] = {1, 8192, 64, 32, 8, 128, 7};
    for (int i = 1; i < argc && i <= 7; i++)
        a[i - 1] = strtoul(argv[i], NULL, 10);
    const size_t B = a[0], C = a[1], T = a[2], H = a[3], KVH = a[4], D = a[5], runs = a[6] ? a[6] : 1;
    const size_t per_seq = (C + T + BLOCK - 1) / BLOCK, blocks = B * per_seq;
    const size_t S = per_seq * BLOCK; /* (the table's reach: the bool mask's columns) */
    clattn_context *ctx = NULL;
    BENCH_CHECK(ctx, clattn_context_create(&ctx, argc > 8 ? argv[8] : NULL));
    printf("tree_bench on %s: B = %zu, a draft tree of T = %zu tokens after C = %zu cached rows, H = %zu over %zu K/V "
           "heads, D = %zu, float32, blocks of %d\n",
           clattn_context_device_name(ctx), B, T, C, H, KVH, D, BLOCK);
    cl_int *table;
    const clattn_paged_cache cache = bench_paged_pool(ctx, blocks, per_seq, BLOCK, KVH, D, &table);
    int *parents = malloc(B * T * sizeof *parents);
    unsigned char *allowed = malloc(B * T * S);
    size_t *with_draft = malloc(B * sizeof *with_draft), *cached = malloc(B * sizeof *cached);
    if (!parents || !allowed || !with_draft || !cached)
        return 1;
    for (size_t b = 0; b < B; b++) {
        with_draft[b] = C + T, cached[b] = C;
        for (size_t i = 0; i < T; i++) {
            parents[b * T + i] = i == 0 ? -1 : (int)(i - 1) / 2;
            for (size_t j = 0; j < S; j++) /* the cache, then of the draft only the ancestors */
                allowed[(b * T + i) * S + j] = j < C;
            for (int t = (int)i; t >= 0; t = parents[b * T + (size_t)t])
                allowed[(b * T + i) * S + C + (size_t)t] = 1;
        }
    }
    cl_mem mask = bench_buffer(ctx, B * T * S, allowed);
    float *q_host = bench_random_floats(B * H * T * D, 3);
    cl_mem q = bench_buffer(ctx, B * H * T * D * sizeof(float), q_host), out = bench_buffer(ctx, B * H * T * D * sizeof(float), NULL);
    clattn_sdpa_desc d = CLATTN_SDPA_DESC_INIT;
    d.batch = B, d.heads = H, d.kv_heads = KVH, d.q_len = T, d.qk_dim = d.v_dim = D;
    clattn_masks tree = CLATTN_MASKS_INIT, bools = CLATTN_MASKS_INIT, chunk = CLATTN_MASKS_INIT;
    tree.causal = chunk.causal = bools.causal = CLATTN_CAUSAL_BOTTOM_RIGHT;
    tree.tree_parents = parents;
    bools.additive = CLATTN_MASK_B_1_L_S, bools.mask_type = CLATTN_MASK_BOOL;
    tree_work w = {d, cache, {tree, bools, chunk}, mask, q, out, cached, with_draft};
    static const char *const names[N] = {"tree", "mask", "chunk", "decode"};
    double best[N];
    bench_alternate(ctx, N, runs, run_method, &w, names, best);
    printf("tree: %.2fx one decode step, %.2fx the chunk without a tree; the explicit mask %.2fx the tree\n",
           best[TREE] / best[DECODE], best[TREE] / best[CHUNK], best[MASK] / best[TREE]);
    clattn_context_free(ctx);
    return 0;
}
