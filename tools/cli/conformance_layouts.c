/* `clattn devices --check`, the K/V layouts and the merge: a ragged batch and a paged cache at decode and at
 * prefill lengths (the decode kernels, and the fused kernel through the row starts or the block table),
 * with causal masks, grouped-query heads and logit scales, each sequence against the fp64 reference of its
 * own dense call; and clattn_merge of two halves of the keys against the whole. Small shapes: these run on
 * oclgrind's simulator too. */
#include "conformance.h"
#include "reference.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { H = 4, KVH = 2, D = 16, B = 2, MAX_ROWS = 12, MAX_KEYS = 40, BLOCK = 8 };

/* The cases' descriptor: B sequences (batch), H query heads over KVH K/V heads of D, L query rows. */
static clattn_sdpa_desc layout_desc(size_t batch, size_t L, const clattn_masks *m)
{
    clattn_sdpa_desc d = CLATTN_SDPA_DESC_INIT;
    d.batch = batch;
    d.heads = H;
    d.kv_heads = KVH;
    d.q_len = L;
    d.qk_dim = D;
    d.masks = m;
    return d;
}

/* Sequence b's rows gathered from packed (rows, heads, D) tensors into a dense (1, heads, n, D) one. */
static void gather_rows(const float *packed, size_t first, size_t n, size_t heads, float *dense)
{
    for (size_t i = 0; i < n; i++)
        for (size_t h = 0; h < heads; h++)
            memcpy(dense + (h * n + i) * D, packed + ((first + i) * heads + h) * D, D * sizeof(float));
}

/* The reference of one sequence (L queries over S keys, bottom-right causal, the logit scales): rows
 * (L, H, D) in out. */
static void sequence_reference(const float *q, const float *k, const float *v, size_t L, size_t S,
                               const float *logit_scale, double *out)
{
    clattn_masks m = CLATTN_MASKS_INIT;
    m.causal = CLATTN_CAUSAL_TOP_LEFT;
    long long offset = (long long)S - (long long)L;
    m.query_offsets = &offset;
    clattn_sdpa_desc d = layout_desc(1, L, &m);
    d.kv_len = S ? S : 1;
    d.logit_scale = logit_scale;
    double dense[H * MAX_ROWS * D];
    if (S == 0) { /* no keys: every row zero */
        memset(out, 0, L * H * D * sizeof *out);
        return;
    }
    ref_sdpa(&d, q, k, v, NULL, dense, NULL, NULL);
    for (size_t i = 0; i < L; i++)
        for (size_t h = 0; h < H; h++)
            for (size_t e = 0; e < D; e++)
                out[(i * H + h) * D + e] = dense[(h * L + i) * D + e];
}

/* Each sequence of out (rows, H, D) against its reference. */
static bool check_sequences(const char *what, const float *q, const float *k, const float *v, const size_t *q_starts,
                            const size_t *k_starts, const float *out, const float *logit_scale, conformance_result *r)
{
    for (size_t b = 0; b < B; b++) {
        const size_t L = q_starts[b + 1] - q_starts[b], S = k_starts[b + 1] - k_starts[b];
        float qd[H * MAX_ROWS * D], kd[KVH * MAX_KEYS * D], vd[KVH * MAX_KEYS * D];
        double want[MAX_ROWS * H * D];
        gather_rows(q, q_starts[b], L, H, qd);
        gather_rows(k, k_starts[b], S, KVH, kd);
        gather_rows(v, k_starts[b], S, KVH, vd);
        sequence_reference(qd, kd, vd, L, S, logit_scale, want);
        if (!conformance_compare(what, out + q_starts[b] * H * D, want, L * H * D, CLATTN_FLOAT32, &r->max_error, r))
            return false;
    }
    return true;
}

static bool failed(clattn_context *ctx, clattn_status st, const char *what, conformance_result *r)
{
    if (st == CLATTN_SUCCESS)
        return false;
    snprintf(r->message, sizeof r->message, "case %zu: %s: %s: %s", r->cases, what, clattn_status_string(st),
             clattn_last_error(ctx));
    return true;
}

static cl_mem buffer(clattn_context *ctx, size_t bytes, const void *data, cl_int *err)
{
    if (*err != CL_SUCCESS)
        return NULL;
    return clCreateBuffer(clattn_context_cl_context(ctx), CL_MEM_READ_WRITE | (data ? CL_MEM_COPY_HOST_PTR : 0),
                          bytes, (void *)data, err);
}

/* A ragged batch: decode rows (2 and 1 queries) and prefill rows (12 and 9), on the host variant. */
static bool ragged_case(clattn_context *ctx, size_t rows0, size_t rows1, uint64_t *seed, conformance_result *r)
{
    const size_t q_starts[B + 1] = {0, rows0, rows0 + rows1}, k_starts[B + 1] = {0, 29, 29 + 40};
    float q[2 * MAX_ROWS * H * D], k[(29 + 40) * KVH * D], v[(29 + 40) * KVH * D], out[2 * MAX_ROWS * H * D];
    const float scales[H] = {1.0f, 0.5f, 2.0f, -1.0f};
    conformance_fill(q, q_starts[B] * H * D, seed, false);
    conformance_fill(k, k_starts[B] * KVH * D, seed, false);
    conformance_fill(v, k_starts[B] * KVH * D, seed, false);
    clattn_masks m = CLATTN_MASKS_INIT;
    m.causal = CLATTN_CAUSAL_BOTTOM_RIGHT;
    clattn_sdpa_desc d = layout_desc(B, 0, &m);
    d.logit_scale = scales;
    clattn_ragged rg = CLATTN_RAGGED_INIT;
    rg.q_starts = q_starts;
    rg.k_starts = k_starts;
    r->cases++;
    return !failed(ctx, clattn_sdpa_ragged_host(ctx, &d, &rg, q, k, v, NULL, out, NULL), "ragged", r) &&
           check_sequences("ragged out", q, k, v, q_starts, k_starts, out, scales, r);
}

/* A paged cache of two sequences of 29 and 40 rows in shuffled blocks of 8, L query rows each (bottom-right
 * causal: a chunk of a prefill, or a decode step). */
static bool paged_case(clattn_context *ctx, size_t L, uint64_t *seed, conformance_result *r)
{
    enum { MAX_BLOCKS = MAX_KEYS / BLOCK, BLOCKS = B * MAX_BLOCKS + 1 };
    const size_t lengths[B] = {29, 40};
    const int table[B * MAX_BLOCKS] = {3, 9, 0, 7, 5, 1, 10, 4, 2, 6};
    float q[B * H * MAX_ROWS * D], pool_k[BLOCKS * KVH * BLOCK * D], pool_v[BLOCKS * KVH * BLOCK * D];
    float out[B * H * MAX_ROWS * D];
    conformance_fill(q, B * H * L * D, seed, false);
    conformance_fill(pool_k, sizeof pool_k / sizeof pool_k[0], seed, false);
    conformance_fill(pool_v, sizeof pool_v / sizeof pool_v[0], seed, false);
    cl_int err = CL_SUCCESS;
    cl_mem mq = buffer(ctx, B * H * L * D * sizeof(float), q, &err);
    cl_mem mo = buffer(ctx, B * H * L * D * sizeof(float), NULL, &err);
    clattn_paged_cache pc = CLATTN_PAGED_CACHE_INIT;
    pc.k_pool = buffer(ctx, sizeof pool_k, pool_k, &err);
    pc.v_pool = buffer(ctx, sizeof pool_v, pool_v, &err);
    pc.block_table = buffer(ctx, sizeof table, table, &err);
    pc.blocks = BLOCKS;
    pc.block_size = BLOCK;
    pc.max_blocks = MAX_BLOCKS;
    clattn_masks m = CLATTN_MASKS_INIT;
    m.causal = CLATTN_CAUSAL_BOTTOM_RIGHT;
    const clattn_sdpa_desc d = layout_desc(B, L, &m);
    r->cases++;
    clattn_status st = err != CL_SUCCESS ? (clattn_status)err : clattn_sdpa_paged(ctx, &d, &pc, lengths, mq, NULL, mo, NULL);
    if (st == CLATTN_SUCCESS)
        st = (clattn_status)clEnqueueReadBuffer(clattn_context_queue(ctx), mo, CL_TRUE, 0, B * H * L * D * sizeof(float),
                                                out, 0, NULL, NULL);
    cl_mem all[] = {mq, mo, pc.k_pool, pc.v_pool, pc.block_table};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i])
            clReleaseMemObject(all[i]);
    if (failed(ctx, st, "paged", r))
        return false;
    /* The reference: each sequence's rows gathered from its blocks, its queries at its end. */
    for (size_t b = 0; b < B; b++) {
        float kd[KVH * MAX_KEYS * D], vd[KVH * MAX_KEYS * D], qd[H * MAX_ROWS * D];
        for (size_t g = 0; g < KVH; g++)
            for (size_t j = 0; j < lengths[b]; j++) {
                const size_t block = (size_t)table[b * MAX_BLOCKS + j / BLOCK];
                const size_t at = ((block * KVH + g) * BLOCK + j % BLOCK) * D;
                memcpy(kd + (g * lengths[b] + j) * D, pool_k + at, D * sizeof(float));
                memcpy(vd + (g * lengths[b] + j) * D, pool_v + at, D * sizeof(float));
            }
        memcpy(qd, q + b * H * L * D, H * L * D * sizeof(float));
        double rows[MAX_ROWS * H * D], want[H * MAX_ROWS * D];
        sequence_reference(qd, kd, vd, L, lengths[b], NULL, rows);
        for (size_t i = 0; i < L; i++) /* (L, H, D) back to (H, L, D) */
            for (size_t h = 0; h < H; h++)
                for (size_t e = 0; e < D; e++)
                    want[(h * L + i) * D + e] = rows[(i * H + h) * D + e];
        if (!conformance_compare("paged out", out + b * H * L * D, want, H * L * D, CLATTN_FLOAT32, &r->max_error, r))
            return false;
    }
    return true;
}

/* clattn_merge: attention over keys [0, 17) and [17, 40) of one sequence, merged, against the whole. */
static bool merge_case(clattn_context *ctx, uint64_t *seed, conformance_result *r)
{
    enum { L = 5, S = 40, CUT = 17 };
    float q[H * L * D], k[H * S * D], v[H * S * D], part_k[2][H * S * D], part_v[2][H * S * D], out[H * L * D];
    float part_out[2][H * L * D], part_lse[2][H * L];
    conformance_fill(q, sizeof q / sizeof q[0], seed, false);
    conformance_fill(k, sizeof k / sizeof k[0], seed, false);
    conformance_fill(v, sizeof v / sizeof v[0], seed, false);
    const size_t keys[2] = {CUT, S - CUT}, first[2] = {0, CUT};
    r->cases++;
    for (int p = 0; p < 2; p++) {
        for (size_t h = 0; h < H; h++) {
            memcpy(part_k[p] + h * keys[p] * D, k + (h * S + first[p]) * D, keys[p] * D * sizeof(float));
            memcpy(part_v[p] + h * keys[p] * D, v + (h * S + first[p]) * D, keys[p] * D * sizeof(float));
        }
        clattn_sdpa_desc d = CLATTN_SDPA_DESC_INIT;
        d.batch = 1;
        d.heads = H;
        d.q_len = L;
        d.kv_len = keys[p];
        d.qk_dim = D;
        if (failed(ctx, clattn_sdpa_host(ctx, &d, q, part_k[p], part_v[p], NULL, part_out[p], NULL, part_lse[p]),
                   "merge's parts", r))
            return false;
    }
    cl_int err = CL_SUCCESS;
    cl_mem outs[2] = {buffer(ctx, sizeof part_out[0], part_out[0], &err), buffer(ctx, sizeof part_out[1], part_out[1], &err)};
    cl_mem lses[2] = {buffer(ctx, sizeof part_lse[0], part_lse[0], &err), buffer(ctx, sizeof part_lse[1], part_lse[1], &err)};
    cl_mem mo = buffer(ctx, sizeof out, NULL, &err), ml = buffer(ctx, sizeof part_lse[0], NULL, &err);
    clattn_sdpa_desc d = CLATTN_SDPA_DESC_INIT;
    d.batch = 1;
    d.heads = H;
    d.q_len = L;
    d.kv_len = S;
    d.qk_dim = D;
    clattn_status st = err != CL_SUCCESS ? (clattn_status)err : clattn_merge(ctx, &d, 2, outs, lses, mo, ml);
    if (st == CLATTN_SUCCESS)
        st = (clattn_status)clEnqueueReadBuffer(clattn_context_queue(ctx), mo, CL_TRUE, 0, sizeof out, out, 0, NULL,
                                                NULL);
    cl_mem all[] = {outs[0], outs[1], lses[0], lses[1], mo, ml};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i])
            clReleaseMemObject(all[i]);
    if (failed(ctx, st, "merge", r))
        return false;
    double want[H * L * D];
    ref_sdpa(&d, q, k, v, NULL, want, NULL, NULL);
    return conformance_compare("merged out", out, want, H * L * D, CLATTN_FLOAT32, &r->max_error, r);
}

bool conformance_run_layouts(clattn_context *ctx, uint64_t *seed, conformance_result *r)
{
    return ragged_case(ctx, 2, 1, seed, r) && ragged_case(ctx, MAX_ROWS, 9, seed, r) && paged_case(ctx, 2, seed, r) &&
           paged_case(ctx, 10, seed, r) && merge_case(ctx, seed, r);
}
