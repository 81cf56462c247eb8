/* clattn_partition_* (clattn.h): the partition primitive (partition.h) for the callers of the public API
 * (ring attention), with the whole call's checks as clattn_sdpa makes them. */
#include "partition.h"

#include "error.h"
#include "masks.h"
#include "sdpa.h"

#include <stdlib.h>

struct clattn_partition_s {
    clattn_context *ctx;
    clattn_sdpa_desc desc; /* the caller's, read by the struct_size rule */
    sdpa_shape shape;
    partition_part part; /* the last part asked for */
};

void clattn_partition_free(clattn_partition *p)
{
    if (!p)
        return;
    partition_part_release(&p->part);
    free(p);
}

clattn_status clattn_partition_create(clattn_context *ctx, const clattn_sdpa_desc *desc, int mask_given,
                                      clattn_partition **out)
{
    clattn_status st = check_context(ctx);
    if (st != CLATTN_SUCCESS)
        return st;
    if (!out)
        return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "clattn_partition_create: partition is NULL");
    *out = NULL;
    clattn_partition *p = calloc(1, sizeof *p);
    if (!p)
        return set_error(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "allocating a partition");
    /* The whole call's checks, as clattn_sdpa makes them (without a weights output): the parts' shifted
     * positions and clipped lengths could no longer show a bad value of the call's own. */
    if ((st = sdpa_check(ctx, desc, mask_given != 0, &p->shape)) == CLATTN_SUCCESS &&
        (st = sdpa_check_algorithm(ctx, &p->shape, false)) == CLATTN_SUCCESS &&
        (st = masks_whole_call_only(ctx, &p->shape, "clattn_partition_create")) == CLATTN_SUCCESS &&
        (st = sdpa_desc_read(ctx, desc, &p->desc)) == CLATTN_SUCCESS && !partition_part_init(&p->part, p->shape.batch))
        st = set_error(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "allocating a partition's per-batch arrays");
    if (st != CLATTN_SUCCESS) {
        clattn_partition_free(p);
        return st;
    }
    p->ctx = ctx;
    *out = p;
    return CLATTN_SUCCESS;
}

clattn_status clattn_partition_part(clattn_partition *p, size_t q0, size_t q_rows, size_t k0, size_t k_rows,
                                    const clattn_sdpa_desc **part)
{
    if (!p)
        return set_error(NULL, CLATTN_ERROR_NULL_ARGUMENT, "clattn_partition_part: the partition is NULL");
    clattn_status st = check_context(p->ctx);
    if (st != CLATTN_SUCCESS)
        return st;
    if (!part)
        return set_error(p->ctx, CLATTN_ERROR_NULL_ARGUMENT, "clattn_partition_part: part is NULL");
    *part = NULL;
    const sdpa_shape *s = &p->shape;
    if (!q_rows || !k_rows)
        return set_error(p->ctx, CLATTN_ERROR_ZERO_SIZE, "clattn_partition_part: %s is 0",
                         !q_rows ? "q_rows" : "k_rows");
    const bool rows_out = q0 > s->q_len || q_rows > s->q_len - q0;
    if (rows_out || k0 > s->kv_len || k_rows > s->kv_len - k0)
        return set_error(p->ctx, CLATTN_ERROR_INVALID_VALUE,
                         "clattn_partition_part: %s [%zu, %zu + %zu) pass the call's %zu",
                         rows_out ? "query rows" : "keys", rows_out ? q0 : k0, rows_out ? q0 : k0,
                         rows_out ? q_rows : k_rows, rows_out ? s->q_len : s->kv_len);
    if (partition_part_make(s, &p->desc, q0, q_rows, k0, k_rows, &p->part))
        *part = &p->part.desc;
    return CLATTN_SUCCESS;
}
