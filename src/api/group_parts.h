/* What the device-group files share (src/api/group.c: the group, its SDPA calls; src/api/group_mha.c: its layers):
 * the group itself, a part's common head, and the scheduling helpers. */
#ifndef CLATTN_GROUP_PARTS_H
#define CLATTN_GROUP_PARTS_H

#include "validate.h"

#include <clattn/clattn.h>

#define GROUP_MAX 16

struct clattn_group_s {
    size_t count;
    clattn_context *ctx[GROUP_MAX];
    double speed[GROUP_MAX]; /* GFLOP/s of the measuring SDPA: the shares' weights */
};

/* What every part of a group call starts with: its device (NULL: it sits the call out) and outcome. */
typedef struct part_head {
    clattn_context *ctx;
    clattn_status status;
    char error[512];
} part_head;

/* What every group call starts with: each member context's last error and warning cleared (as a call on one context
 * clears its own); returns the first context's check. */
clattn_status group_begin_call(clattn_group *g);

/* [begin[d], begin[d+1]) of n items for each device, in proportion to the shares (every item placed). */
void group_divide(const clattn_group *g, size_t n, size_t *begin);

/* Run fn on the n parts (each `size` bytes, its part_head first) that have a device, concurrently, a thread each;
 * the first failure names its device. */
clattn_status group_run_parts(void *parts, size_t size, size_t n, void *(*fn)(void *));

/* The additive mask's rows per batch, by layout (0: shared by the batches). */
size_t group_mask_batch_rows(const sdpa_shape *s);

/* The call's masks for one device's part (the window copied beside them), per-batch arrays advanced to b0. */
void group_part_masks(const sdpa_shape *s, clattn_masks *m, clattn_window *w, size_t b0);

/* A part's mods and block mask as its device takes them (copies made there once). Run before the parts start. */
clattn_status group_part_mods(clattn_context *ctx, size_t device, const clattn_mods **mods,
                              const clattn_block_mask **mask);

#endif
