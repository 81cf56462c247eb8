/* decode_loop: the C side of tools/scripts/bench_pyopencl_decode.py — a decode loop as an application
 * written in C runs it, to measure what the Python package adds to each step.
 *
 *   decode_loop STEPS BATCH HEADS KV_HEADS DIM PREFILL [DEVICE]
 *
 * A dense float32 KV cache of PREFILL + STEPS rows a sequence, filled to PREFILL rows; then each step
 * appends one row per sequence (clattn_kv_append) and attends one query per head over the cache
 * (clattn_sdpa: key_lengths the new lengths, query_offsets the old ones, causal), and waits for the
 * queue (clFinish): the same calls, in the same order, as clattn.KVCache's append and attend on pyopencl
 * arrays followed by queue.finish(). Prints one line: "steps N p10_us X median_us Y enqueue_p10_us Z
 * enqueue_median_us W", the step's wall time and the part of it before clFinish (the calls' own). */
#define _POSIX_C_SOURCE 200809L /* (clock_gettime) */
#include "bench_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static cl_mem buffer(clattn_context *ctx, size_t floats, float value)
{
    float *host = malloc(floats * sizeof *host);
    for (size_t i = 0; host && i < floats; i++)
        host[i] = value * (float)(i % 7);
    cl_int err;
    cl_mem m = host ? clCreateBuffer(clattn_context_cl_context(ctx), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                                     floats * sizeof(float), host, &err)
                    : NULL;
    free(host);
    return host && err == CL_SUCCESS ? m : NULL;
}

static double bench_now_us(void) { return bench_now_ms() * 1e3; }

int main(int argc, char **argv)
{
    if (argc < 7) {
        fprintf(stderr, "usage: decode_loop STEPS BATCH HEADS KV_HEADS DIM PREFILL [DEVICE]\n");
        return 2;
    }
    const size_t steps = strtoul(argv[1], NULL, 10), B = strtoul(argv[2], NULL, 10), H = strtoul(argv[3], NULL, 10);
    const size_t KVH = strtoul(argv[4], NULL, 10), D = strtoul(argv[5], NULL, 10), prefill = strtoul(argv[6], NULL, 10);
    const size_t capacity = prefill + steps;
    clattn_context *ctx = NULL;
    BENCH_CHECK(ctx, clattn_context_create(&ctx, argc > 7 ? argv[7] : NULL));
    cl_mem k = buffer(ctx, B * KVH * capacity * D, 0.01f), v = buffer(ctx, B * KVH * capacity * D, 0.02f);
    cl_mem k_new = buffer(ctx, B * KVH * D, 0.03f), v_new = buffer(ctx, B * KVH * D, 0.04f);
    cl_mem q = buffer(ctx, B * H * D, 0.05f), out = buffer(ctx, B * H * D, 0.0f);
    size_t *lengths = calloc(B, sizeof *lengths);
    long long *offsets = calloc(B, sizeof *offsets);
    double *times = calloc(steps, sizeof *times), *enqueue = calloc(steps, sizeof *enqueue);
    if (!k || !v || !k_new || !v_new || !q || !out || !lengths || !offsets || !times || !enqueue) {
        fprintf(stderr, "decode_loop: out of memory\n");
        return 1;
    }
    for (size_t b = 0; b < B; b++)
        lengths[b] = prefill;
    clattn_sdpa_desc d = CLATTN_SDPA_DESC_INIT;
    d.batch = B, d.heads = H, d.kv_heads = KVH, d.kv_len = capacity, d.qk_dim = d.v_dim = D;
    clattn_masks masks = CLATTN_MASKS_INIT;
    masks.causal = CLATTN_CAUSAL_TOP_LEFT, masks.key_lengths = lengths, masks.query_offsets = offsets;
    const cl_command_queue queue = clattn_context_queue(ctx);
    for (size_t s = 0; s < steps; s++) {
        const double t0 = bench_now_us();
        clattn_sdpa_desc append = d;
        append.heads = KVH;
        BENCH_CHECK(ctx, clattn_kv_append(ctx, &append, lengths, 1, k_new, v_new, k, v));
        for (size_t b = 0; b < B; b++)
            offsets[b] = (long long)lengths[b], lengths[b] += 1;
        d.q_len = 1, d.masks = &masks;
        BENCH_CHECK(ctx, clattn_sdpa(ctx, &d, q, k, v, NULL, out, NULL, NULL));
        enqueue[s] = bench_now_us() - t0;
        BENCH_CHECK(ctx, (clattn_status)clFinish(queue));
        times[s] = bench_now_us() - t0;
    }
    const size_t warm = steps / 10; /* (the first steps compile and allocate) */
    qsort(times + warm, steps - warm, sizeof *times, bench_by_value);
    qsort(enqueue + warm, steps - warm, sizeof *enqueue, bench_by_value);
    const size_t n = steps - warm;
    printf("steps %zu p10_us %.1f median_us %.1f enqueue_p10_us %.1f enqueue_median_us %.1f\n", n, times[warm + n / 10],
           times[warm + n / 2], enqueue[warm + n / 10], enqueue[warm + n / 2]);
    cl_mem all[6] = {k, v, k_new, v_new, q, out};
    for (int i = 0; i < 6; i++)
        clReleaseMemObject(all[i]);
    free(lengths), free(offsets), free(times), free(enqueue);
    clattn_context_free(ctx);
    return 0;
}
