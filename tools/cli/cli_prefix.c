/* `clattn sdpa --prefix-k/--prefix-v`: the shared prefix and each batch entry's own rows laid into one
 * paged pool (the prefix's blocks first, each entry's after them), then clattn_sdpa_cascade. */
#include "cli_prefix.h"

#include <stdlib.h>
#include <string.h>

#define PREFIX_BLOCK 16

/* rows (N, n, dim) of one sequence into the pool (blocks, N, PREFIX_BLOCK, dim) from block `first` on. */
static void lay_rows(float *pool, const float *rows, size_t heads, size_t n, size_t dim, size_t first)
{
    for (size_t h = 0; h < heads; h++)
        for (size_t j = 0; j < n; j++)
            memcpy(pool + (((first + j / PREFIX_BLOCK) * heads + h) * PREFIX_BLOCK + j % PREFIX_BLOCK) * dim,
                   rows + (h * n + j) * dim, dim * sizeof(float));
}

/* A device buffer of `bytes` from host (NULL: uninitialised); *st set on failure. */
static cl_mem buffer(clattn_context *ctx, const void *host, size_t bytes, clattn_status *st)
{
    cl_int err;
    cl_mem m = clCreateBuffer(clattn_context_cl_context(ctx), CL_MEM_READ_WRITE | (host ? CL_MEM_COPY_HOST_PTR : 0),
                              bytes, (void *)host, &err);
    if (err != CL_SUCCESS && *st == CLATTN_SUCCESS)
        *st = (clattn_status)err;
    return err == CL_SUCCESS ? m : NULL;
}

clattn_status cli_prefix_attention(clattn_context *ctx, const clattn_sdpa_desc *d, const float *pk, const float *pv,
                                   size_t prefix_rows, const float *q, const float *k, const float *v, float *out,
                                   float *lse)
{
    const size_t B = d->batch, N = d->kv_heads, S = d->kv_len, D = d->qk_dim, Dv = d->v_dim ? d->v_dim : d->qk_dim;
    const size_t prefix_blocks = (prefix_rows + PREFIX_BLOCK - 1) / PREFIX_BLOCK;
    const size_t own_blocks = S ? (S + PREFIX_BLOCK - 1) / PREFIX_BLOCK : 1, blocks = prefix_blocks + B * own_blocks;
    const size_t slots = blocks * N * PREFIX_BLOCK, rows = B * d->heads * d->q_len;
    float *k_pool = calloc(slots * D, sizeof(float)), *v_pool = calloc(slots * Dv, sizeof(float));
    cl_int *prefix = malloc((prefix_blocks ? prefix_blocks : 1) * sizeof *prefix),
           *table = malloc(B * own_blocks * sizeof *table);
    size_t *lengths = malloc(B * sizeof *lengths), *group_of = calloc(B, sizeof *group_of);
    clattn_status st = k_pool && v_pool && prefix && table && lengths && group_of ? CLATTN_SUCCESS
                                                                                   : CLATTN_ERROR_OUT_OF_HOST_MEMORY;
    cl_mem m[7] = {NULL}; /* k pool, v pool, table, q, out, lse */
    if (st == CLATTN_SUCCESS) {
        lay_rows(k_pool, pk, N, prefix_rows, D, 0);
        lay_rows(v_pool, pv, N, prefix_rows, Dv, 0);
        for (size_t j = 0; j < prefix_blocks; j++)
            prefix[j] = (cl_int)j;
        for (size_t b = 0; b < B; b++) {
            const size_t first = prefix_blocks + b * own_blocks;
            lay_rows(k_pool, k + b * N * S * D, N, S, D, first);
            lay_rows(v_pool, v + b * N * S * Dv, N, S, Dv, first);
            for (size_t j = 0; j < own_blocks; j++)
                table[b * own_blocks + j] = (cl_int)(first + j);
            lengths[b] = S;
        }
        m[0] = buffer(ctx, k_pool, slots * D * sizeof(float), &st);
        m[1] = buffer(ctx, v_pool, slots * Dv * sizeof(float), &st);
        m[2] = buffer(ctx, table, B * own_blocks * sizeof(cl_int), &st);
        m[3] = buffer(ctx, q, rows * D * sizeof(float), &st);
        m[4] = buffer(ctx, NULL, rows * Dv * sizeof(float), &st);
        m[5] = lse ? buffer(ctx, NULL, rows * sizeof(float), &st) : NULL;
    }
    if (st == CLATTN_SUCCESS) {
        clattn_paged_cache cache = CLATTN_PAGED_CACHE_INIT;
        cache.k_pool = m[0], cache.v_pool = m[1], cache.blocks = blocks, cache.block_size = PREFIX_BLOCK;
        cache.block_table = m[2], cache.max_blocks = own_blocks;
        const size_t prefix_len[1] = {prefix_rows};
        const clattn_cascade_level level = {1, group_of, prefix, prefix_blocks ? prefix_blocks : 1, prefix_len};
        clattn_sdpa_desc cd = *d;
        cd.kv_len = 0;
        st = clattn_sdpa_cascade(ctx, &cd, &cache, &level, prefix_rows ? 1 : 0, lengths, m[3], m[4], m[5]);
    }
    const cl_command_queue queue = clattn_context_queue(ctx);
    if (st == CLATTN_SUCCESS)
        st = (clattn_status)clEnqueueReadBuffer(queue, m[4], CL_TRUE, 0, rows * Dv * sizeof(float), out, 0, NULL, NULL);
    if (st == CLATTN_SUCCESS && lse)
        st = (clattn_status)clEnqueueReadBuffer(queue, m[5], CL_TRUE, 0, rows * sizeof(float), lse, 0, NULL, NULL);
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
        if (m[i])
            clReleaseMemObject(m[i]);
    free(k_pool), free(v_pool), free(prefix), free(table), free(lengths), free(group_of);
    return st;
}
