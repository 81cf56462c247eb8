/* clattn_topk: each query row's top_k highest-scoring keys (cl/topk.cl), the selection clattn_sdpa_sparse takes
 * — DeepSeek's sparse attention chooses its keys by an indexer's scores this way. */
#include "context.h"
#include "error.h"
#include "launch.h"
#include "program.h"
#include "scratch.h"
#include "validate.h"

#include <stdint.h>

clattn_status clattn_topk(clattn_context *ctx, size_t batch, size_t q_len, size_t kv_len, size_t top_k, cl_mem scores,
                          const size_t *lengths, cl_mem indices)
{
    clattn_status st = check_context(ctx);
    if (st != CLATTN_SUCCESS)
        return st;
    const char *zero = !batch ? "batch" : !q_len ? "q_len" : !kv_len ? "kv_len" : !top_k ? "top_k" : NULL;
    if (zero)
        return set_error(ctx, CLATTN_ERROR_ZERO_SIZE, "clattn_topk: %s is 0", zero);
    size_t rows, score_elems, index_elems;
    if (!size_mul(batch, q_len, &rows) || !size_mul(rows, kv_len, &score_elems) || !size_mul(rows, top_k, &index_elems))
        return set_error(ctx, CLATTN_ERROR_SIZE_OVERFLOW, "clattn_topk: %zu × %zu rows of %zu scores overflow", batch,
                         q_len, kv_len);
    /* (positions are cl_int) */
    if (kv_len > (size_t)INT32_MAX)
        return set_error(ctx, CLATTN_ERROR_EXCEEDS_DEVICE_LIMIT, "clattn_topk: kv_len %zu passes 2^31 − 1", kv_len);
    for (size_t b = 0; lengths && b < batch; b++)
        if (lengths[b] > kv_len)
            return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "clattn_topk: lengths[%zu] = %zu passes kv_len %zu", b,
                             lengths[b], kv_len);
    if ((st = check_buffer(ctx, scores, score_elems, sizeof(float), "scores")) != CLATTN_SUCCESS ||
        (st = check_buffer(ctx, indices, index_elems, sizeof(cl_int), "indices")) != CLATTN_SUCCESS)
        return st;
    const family_build *fb;
    topk_params p = {scores, NULL, indices, rows, q_len, kv_len, top_k};
    if ((st = program_get(ctx, &family_topk, "", 0, 0, NULL, &fb)) != CLATTN_SUCCESS ||
        (lengths && (st = scratch_upload_integers(ctx, SCRATCH_PAGED_LENGTHS, lengths, NULL, batch, "lengths",
                                                  &p.lengths)) != CLATTN_SUCCESS))
        return st;
    kernel_args a = kernel_args_begin(fb->kernels[0]);
    params_bind(&a, &params_topk, &p, fb->features);
    const size_t global[1] = {rows};
    return kernel_launch_auto(ctx, &a, "top-k selection", 1, global);
}
