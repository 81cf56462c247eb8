/* A ragged launch's list of work-groups (tiles.h). */
#include "tiles.h"

#include "error.h"
#include "scratch.h"

#include <stdlib.h>

/* Whether sequence b belongs to the launch: its rows within the layout's bounds. */
static size_t rows_of(const kv_layout *lay, size_t b)
{
    const size_t n = lay->host_q_starts[b + 1] - lay->host_q_starts[b];
    return n < lay->q_rows_min || (lay->q_rows_max && n > lay->q_rows_max) ? 0 : n;
}

clattn_status tiles_list(clattn_context *ctx, const sdpa_shape *s, const kv_layout *lay, size_t per_tile,
                         cl_mem *tiles, size_t *count)
{
    *tiles = NULL;
    if (!lay->host_q_starts) {
        *count = (s->q_len * s->group + per_tile - 1) / per_tile;
        return CLATTN_SUCCESS;
    }
    size_t n = 0;
    for (size_t b = 0; b < s->batch; b++) /* (rows · group within the q tensor's size: no overflow) */
        n += (rows_of(lay, b) * s->group + per_tile - 1) / per_tile;
    *count = n;
    if (n == 0)
        return CLATTN_SUCCESS;
    if (n > SIZE_MAX / (2 * sizeof(cl_uint)) || s->batch > CL_UINT_MAX)
        return set_error(ctx, CLATTN_ERROR_SIZE_OVERFLOW, "a ragged launch of %zu work-groups", n);
    cl_uint *list = malloc(2 * n * sizeof *list);
    if (!list)
        return set_error(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "a ragged launch's list of %zu work-groups", n);
    size_t at = 0;
    for (size_t b = 0; b < s->batch; b++)
        for (size_t t = 0; t * per_tile < rows_of(lay, b) * s->group; t++) {
            list[at++] = (cl_uint)b;
            list[at++] = (cl_uint)t;
        }
    const clattn_status st = scratch_upload(ctx, SCRATCH_TILES, list, 2 * n * sizeof *list, "a ragged launch's work-groups",
                                            tiles);
    free(list);
    return st;
}
