/* A ragged launch's work-groups, listed: one (sequence, tile of packed query rows) pair each, for the
 * sequences that have rows, so that no work-group of the launch is idle. (PoCL hands each of its threads a
 * contiguous range of a launch's work-groups: a grid of B × the longest sequence's tiles puts the idle ones
 * of short sequences on some threads only — two chunks of 256 rows beside one empty sequence took 1.47x
 * their time alone, 146 against 99 ms.) */
#ifndef CLATTN_TILES_H
#define CLATTN_TILES_H

#include "launch.h"
#include "validate.h"

/* The list of lay's launch (lay->host_q_starts; NULL: *tiles NULL, *count the dense grid's tiles) for tiles
 * of `per_tile` packed rows (a sequence's queries times s->group), uploaded as cl_uint pairs; *count 0:
 * nothing to launch. */
clattn_status tiles_list(clattn_context *ctx, const sdpa_shape *s, const kv_layout *lay, size_t per_tile,
                         cl_mem *tiles, size_t *count);

#endif
