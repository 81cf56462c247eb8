/* Shards of ring attention (clattn_ring_shard_*): which rows of n a rank holds, contiguous or zigzag, and
 * the copies of a shard's rows between a whole tensor and a rank's part. Arithmetic only: no MPI. */
#include "clattn/clattn_mpi.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* Run c of n rows cut into `runs` runs, the first n % runs one row longer. */
static void run_of(size_t n, size_t runs, size_t c, size_t *start, size_t *len)
{
    const size_t base = n / runs, extra = n % runs;
    *start = c * base + (c < extra ? c : extra);
    *len = base + (c < extra);
}

clattn_status clattn_ring_shard_of(size_t n, int ranks, int rank, clattn_ring_layout layout, clattn_ring_shard *shard)
{
    if (!shard)
        return CLATTN_ERROR_NULL_ARGUMENT;
    if (ranks < 1 || rank < 0 || rank >= ranks ||
        (layout != CLATTN_RING_CONTIGUOUS && layout != CLATTN_RING_ZIGZAG))
        return CLATTN_ERROR_INVALID_VALUE;
    memset(shard, 0, sizeof *shard);
    const size_t p = (size_t)ranks, r = (size_t)rank;
    if (layout == CLATTN_RING_CONTIGUOUS) {
        run_of(n, p, r, &shard->start[0], &shard->len[0]);
    } else {
        run_of(n, 2 * p, r, &shard->start[0], &shard->len[0]);
        run_of(n, 2 * p, 2 * p - 1 - r, &shard->start[1], &shard->len[1]);
    }
    shard->rows = shard->len[0] + shard->len[1];
    return CLATTN_SUCCESS;
}

/* Checks for _take and _put: the shard inside n rows, slices·n·width floats addressable. */
static clattn_status shard_copy_check(const clattn_ring_shard *sh, size_t slices, size_t n, size_t width,
                                      const float *a, const float *b)
{
    if (!sh || !a || !b)
        return CLATTN_ERROR_NULL_ARGUMENT;
    for (int c = 0; c < 2; c++)
        if (sh->start[c] > n || sh->len[c] > n - sh->start[c])
            return CLATTN_ERROR_INVALID_VALUE;
    if (sh->rows != sh->len[0] + sh->len[1])
        return CLATTN_ERROR_INVALID_VALUE;
    if ((width && n > SIZE_MAX / width) || (slices && n * width > SIZE_MAX / sizeof(float) / slices))
        return CLATTN_ERROR_SIZE_OVERFLOW;
    return CLATTN_SUCCESS;
}

/* Copies a shard's rows: whole → part (take) or part → whole. */
static void shard_copy(const clattn_ring_shard *sh, size_t slices, size_t n, size_t width, bool take, float *whole,
                       float *part)
{
    size_t o = 0;
    for (size_t s = 0; s < slices; s++)
        for (int c = 0; c < 2; c++) {
            float *w = whole + (s * n + sh->start[c]) * width, *p = part + o * width;
            const size_t bytes = sh->len[c] * width * sizeof(float);
            if (bytes)
                memcpy(take ? p : w, take ? w : p, bytes);
            o += sh->len[c];
        }
}

clattn_status clattn_ring_shard_take(const clattn_ring_shard *shard, size_t slices, size_t n, size_t width,
                                     const float *whole, float *part)
{
    const clattn_status st = shard_copy_check(shard, slices, n, width, whole, part);
    if (st == CLATTN_SUCCESS)
        shard_copy(shard, slices, n, width, true, (float *)whole, part);
    return st;
}

clattn_status clattn_ring_shard_put(const clattn_ring_shard *shard, size_t slices, size_t n, size_t width,
                                    const float *part, float *whole)
{
    const clattn_status st = shard_copy_check(shard, slices, n, width, whole, part);
    if (st == CLATTN_SUCCESS)
        shard_copy(shard, slices, n, width, false, whole, (float *)part);
    return st;
}
