/* mixed_bench: one call for a mixed batch (clattn_sdpa_paged_ragged) against the same work as separate calls,
 * on one device, in one run (issue 40): over one paged cache, 2 prefill chunks of 256 rows (after 2048 cached
 * rows each), 5 decode rows (after 4096 cached rows each) and a binary draft tree of 16 tokens (after 4096), H
 * query heads over KVH K/V heads, head size D, float32, blocks of 16.
 *   mixed     one clattn_sdpa_paged_ragged call: the chunks causal (a chain of parents), the decode rows, the tree
 *   separate  one clattn_sdpa_paged call a request (its own table row)
 *   grouped   one call per kind: the two chunks, the five decode rows, the tree (what a server without mixed
 *             batches does)
 * Each is run once to warm up (compiling its kernels), then RUNS times, the calls alternated; printed: the best
 * and the median of each, milliseconds, and the ratios of the bests.
 *
 *   mixed_bench [H KVH D RUNS [DEVICE]]     (default 32 8 128 7) */
#define _POSIX_C_SOURCE 200809L /* (clock_gettime) */
#include "bench_common.h"

#include <stdio.h>
#include <stdlib.h>

#define BLOCK 16
enum { B = 8, MAX_ROWS = 4096 + 256 };
static const size_t rows_of[B] = {256, 256, 1, 1, 1, 1, 1, 16};
static const size_t cached[B] = {2048, 2048, 4096, 4096, 4096, 4096, 4096, 4096};
/* The requests of each kind, for the grouped calls: [first, end) of rows_of. */
static const size_t kinds[3][2] = {{0, 2}, {2, 7}, {7, 8}};

/* The work, three ways (bench_method): one mixed call, a call a request, a call a kind of request. */
enum { MIXED, SEPARATE, GROUPED, N };
typedef struct mixed_work {
    clattn_sdpa_desc d; /* heads and head sizes */
    clattn_paged_cache cache;
    clattn_masks mixed, causal, tree;
    const size_t *lengths, *starts;
    cl_mem q, out, *q_one, *out_one, *table_one, *q_kind, *out_kind, *table_kind;
} mixed_work;

static void run_method(clattn_context *ctx, int m, void *work)
{
    const mixed_work *w = work;
    clattn_sdpa_desc d = w->d;
    if (m == MIXED) {
        d.batch = B, d.masks = &w->mixed;
        BENCH_CHECK(ctx, clattn_sdpa_paged_ragged(ctx, &d, &w->cache, w->lengths, w->starts, w->q, NULL, w->out, NULL));
    } else if (m == SEPARATE) {
        for (size_t b = 0; b < B; b++) {
            clattn_paged_cache one = w->cache;
            one.block_table = w->table_one[b];
            d.batch = 1, d.q_len = rows_of[b], d.masks = b == 7 ? &w->tree : &w->causal;
            BENCH_CHECK(ctx, clattn_sdpa_paged(ctx, &d, &one, &w->lengths[b], w->q_one[b], NULL, w->out_one[b], NULL));
        }
    } else {
        for (int k = 0; k < 3; k++) {
            clattn_paged_cache some = w->cache;
            some.block_table = w->table_kind[k];
            d.batch = kinds[k][1] - kinds[k][0], d.q_len = rows_of[kinds[k][0]], d.masks = k == 2 ? &w->tree : &w->causal;
            BENCH_CHECK(ctx, clattn_sdpa_paged(ctx, &d, &some, &w->lengths[kinds[k][0]], w->q_kind[k], NULL,
                                               w->out_kind[k], NULL));
        }
    }
}

int main(int argc, char **argv)
{
    size_t a[4] = {32, 8, 128, 7};
    for (int i = 1; i < argc && i <= 4; i++)
        a[i - 1] = strtoul(argv[i], NULL, 10);
    const size_t H = a[0], KVH = a[1], D = a[2], runs = a[3] ? a[3] : 1;
    const size_t per_seq = (MAX_ROWS + BLOCK - 1) / BLOCK, blocks = B * per_seq;
    clattn_context *ctx = NULL;
    BENCH_CHECK(ctx, clattn_context_create(&ctx, argc > 5 ? argv[5] : NULL));
    printf("mixed_bench on %s: 2 chunks of 256 rows (after 2048), 5 decode rows (after 4096), a draft tree of 16 "
           "(after 4096); H = %zu over %zu K/V heads, D = %zu, float32, blocks of %d\n",
           clattn_context_device_name(ctx), H, KVH, D, BLOCK);
    cl_int *table;
    const clattn_paged_cache cache = bench_paged_pool(ctx, blocks, per_seq, BLOCK, KVH, D, &table);
    size_t starts[B + 1] = {0}, lengths[B];
    int parents[B * 256];
    for (size_t b = 0; b < B; b++) {
        starts[b + 1] = starts[b] + rows_of[b];
        lengths[b] = cached[b] + rows_of[b];
        for (size_t i = 0; i < rows_of[b]; i++) /* a chunk a chain (causal), the draft a binary tree */
            parents[starts[b] + i] = b == 7 ? (i == 0 ? -1 : (int)(i - 1) / 2) : (int)i - 1;
    }
    const size_t rows = starts[B];
    float *q_host = bench_random_floats(rows * H * D, 3);
    cl_mem q = bench_buffer(ctx, rows * H * D * sizeof(float), q_host);
    cl_mem out = bench_buffer(ctx, rows * H * D * sizeof(float), NULL);
    /* Each request's own q and out (B, H, L, D) and table row, and each kind's grouped call's. */
    cl_mem q_one[B], out_one[B], table_one[B], q_kind[3], out_kind[3], table_kind[3];
    for (size_t b = 0; b < B; b++) {
        q_one[b] = bench_buffer(ctx, rows_of[b] * H * D * sizeof(float), q_host + starts[b] * H * D);
        out_one[b] = bench_buffer(ctx, rows_of[b] * H * D * sizeof(float), NULL);
        table_one[b] = bench_buffer(ctx, per_seq * sizeof(cl_int), table + b * per_seq);
    }
    for (int k = 0; k < 3; k++) {
        const size_t first = kinds[k][0], n = kinds[k][1] - first;
        q_kind[k] = bench_buffer(ctx, n * rows_of[first] * H * D * sizeof(float), q_host + starts[first] * H * D);
        out_kind[k] = bench_buffer(ctx, n * rows_of[first] * H * D * sizeof(float), NULL);
        table_kind[k] = bench_buffer(ctx, n * per_seq * sizeof(cl_int), table + first * per_seq);
    }
    clattn_masks mixed = CLATTN_MASKS_INIT, causal = CLATTN_MASKS_INIT, tree = CLATTN_MASKS_INIT;
    mixed.causal = causal.causal = tree.causal = CLATTN_CAUSAL_BOTTOM_RIGHT;
    mixed.tree_parents = parents;
    tree.tree_parents = parents + starts[7];
    mixed_work w = {{0}, cache, mixed, causal, tree, lengths, starts, q, out, q_one, out_one, table_one, q_kind,
                    out_kind, table_kind};
    w.d = (clattn_sdpa_desc)CLATTN_SDPA_DESC_INIT;
    w.d.heads = H, w.d.kv_heads = KVH, w.d.qk_dim = w.d.v_dim = D;
    static const char *const names[N] = {"mixed", "separate", "grouped"};
    double best[N];
    bench_alternate(ctx, N, runs, run_method, &w, names, best);
    printf("one mixed call: %.2fx the separate calls' time, %.2fx the calls grouped by kind\n", best[MIXED] / best[SEPARATE],
           best[MIXED] / best[GROUPED]);
    clattn_context_free(ctx);
    return 0;
}
