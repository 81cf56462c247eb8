/* cascade_bench: shared-prefix (cascade) attention against the plain ways of decoding the same batch, on one
 * device, in one run (issue 40's case): B sequences, one query token each, a prefix of P rows that they all
 * share in the paged pool and S own rows each, H query heads over KVH K/V heads, head size D, blocks of 16.
 *   cascade    clattn_sdpa_cascade (the prefix read once for all B sequences)
 *   batched    one clattn_sdpa_paged call over the B sequences, each table row its prefix blocks then its own
 *   separate   B clattn_sdpa_paged calls, one a sequence (the independent decode calls a server makes)
 * Each is run once to warm up (compiling its kernels), then RUNS times, the calls alternated; printed: the
 * best and the median of each, milliseconds, and the ratios of the bests.
 *
 *   cascade_bench [B P S H KVH D RUNS [DEVICE]]     (default 64 8192 256 32 8 128 5) */
#define _POSIX_C_SOURCE 200809L /* (clock_gettime) */
#include "bench_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BLOCK 16

/* The work, three ways (bench_method). */
typedef struct cascade_work {
    clattn_sdpa_desc d;
    clattn_paged_cache own, whole;
    clattn_cascade_level level;
    size_t B, *own_len, *full_len;
    cl_mem q, out, *q_one, *out_one, *table_one;
} cascade_work;

static void run_method(clattn_context *ctx, int m, void *work)
{
    const cascade_work *w = work;
    if (m == 0) {
        BENCH_CHECK(ctx, clattn_sdpa_cascade(ctx, &w->d, &w->own, &w->level, 1, w->own_len, w->q, w->out, NULL));
    } else if (m == 1) {
        BENCH_CHECK(ctx, clattn_sdpa_paged(ctx, &w->d, &w->whole, w->full_len, w->q, NULL, w->out, NULL));
    } else {
        clattn_sdpa_desc one = w->d;
        one.batch = 1;
        clattn_paged_cache c1 = w->whole;
        for (size_t b = 0; b < w->B; b++) {
            c1.block_table = w->table_one[b];
            BENCH_CHECK(ctx, clattn_sdpa_paged(ctx, &one, &c1, &w->full_len[b], w->q_one[b], NULL, w->out_one[b], NULL));
        }
    }
}

int main(int argc, char **argv)
{
    size_t a[7] = {64, 8192, 256, 32, 8, 128, 5};
    for (int i = 1; i < argc && i <= 7; i++)
        a[i - 1] = strtoul(argv[i], NULL, 10);
    const size_t B = a[0], P = a[1], S = a[2], H = a[3], KVH = a[4], D = a[5], runs = a[6] ? a[6] : 1;
    const size_t prefix_blocks = (P + BLOCK - 1) / BLOCK, own_blocks = (S + BLOCK - 1) / BLOCK;
    const size_t blocks = prefix_blocks + B * own_blocks;
    clattn_context *ctx = NULL;
    BENCH_CHECK(ctx, clattn_context_create(&ctx, argc > 8 ? argv[8] : NULL));
    printf("cascade_bench on %s: B = %zu sequences, one query each, a shared prefix of %zu rows and %zu own rows each, "
           "H = %zu over %zu K/V heads, D = %zu, float32, blocks of %d\n",
           clattn_context_device_name(ctx), B, P, S, H, KVH, D, BLOCK);
    clattn_paged_cache own = bench_paged_pool(ctx, blocks, own_blocks, BLOCK, KVH, D, NULL);
    /* Tables: the prefix's blocks (0 …), each sequence's own after them; the whole-sequence table for the
     * plain calls lists both. */
    cl_int *prefix = malloc(prefix_blocks * sizeof *prefix), *own_table = malloc(B * own_blocks * sizeof *own_table);
    cl_int *full = malloc(B * (prefix_blocks + own_blocks) * sizeof *full);
    size_t *own_len = malloc(B * sizeof *own_len), *full_len = malloc(B * sizeof *full_len);
    size_t *group_of = calloc(B, sizeof *group_of);
    if (!prefix || !own_table || !full || !own_len || !full_len || !group_of)
        return 1;
    for (size_t j = 0; j < prefix_blocks; j++)
        prefix[j] = (cl_int)j;
    for (size_t b = 0; b < B; b++) {
        own_len[b] = S, full_len[b] = P + S;
        for (size_t j = 0; j < own_blocks; j++)
            own_table[b * own_blocks + j] = (cl_int)(prefix_blocks + b * own_blocks + j);
        for (size_t j = 0; j < prefix_blocks + own_blocks; j++) /* (P a multiple of the block: rows line up) */
            full[b * (prefix_blocks + own_blocks) + j] = j < prefix_blocks ? prefix[j] : own_table[b * own_blocks + j - prefix_blocks];
    }
    if (P % BLOCK) {
        fprintf(stderr, "cascade_bench: P must be a multiple of %d (the plain calls' tables)\n", BLOCK);
        return 2;
    }
    own.block_table = bench_buffer(ctx, B * own_blocks * sizeof(cl_int), own_table);
    clattn_paged_cache whole = own;
    whole.block_table = bench_buffer(ctx, B * (prefix_blocks + own_blocks) * sizeof(cl_int), full);
    whole.max_blocks = prefix_blocks + own_blocks;
    float *q_host = bench_random_floats(B * H * D, 3);
    cl_mem q = bench_buffer(ctx, B * H * D * sizeof(float), q_host), out = bench_buffer(ctx, B * H * D * sizeof(float), NULL);
    cl_mem *q_one = malloc(B * sizeof *q_one), *out_one = malloc(B * sizeof *out_one), *table_one = malloc(B * sizeof *table_one);
    for (size_t b = 0; b < B; b++) {
        q_one[b] = bench_buffer(ctx, H * D * sizeof(float), q_host + b * H * D);
        out_one[b] = bench_buffer(ctx, H * D * sizeof(float), NULL);
        table_one[b] = bench_buffer(ctx, (prefix_blocks + own_blocks) * sizeof(cl_int), full + b * (prefix_blocks + own_blocks));
    }
    cascade_work w = {CLATTN_SDPA_DESC_INIT, own, whole, {0}, B, own_len, full_len, q, out, q_one, out_one,
                      table_one};
    w.d.batch = B, w.d.heads = H, w.d.kv_heads = KVH, w.d.q_len = 1, w.d.qk_dim = w.d.v_dim = D;
    const size_t prefix_len[1] = {P};
    w.level = (clattn_cascade_level){1, group_of, prefix, prefix_blocks, prefix_len};
    static const char *const names[3] = {"cascade", "batched", "separate"};
    double best[3];
    bench_alternate(ctx, 3, runs, run_method, &w, names, best);
    printf("cascade is %.1fx faster than %zu separate decode calls and %.1fx faster than one batched paged call\n",
           best[2] / best[0], B, best[1] / best[0]);
    clattn_context_free(ctx);
    return 0;
}
