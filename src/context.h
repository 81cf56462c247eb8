/* The fields of a clattn_context. context.c, the owner at the top of the library, creates and frees
 * them; every module reads the ones it needs. A path's own state (compiled kernels, tiles) is an
 * opaque pointer owned by that path's file, created on first use and released through it. */
#ifndef CLATTN_CONTEXT_H
#define CLATTN_CONTEXT_H

#include "device.h"
#include "error.h"
#include "options.h"
#include "profile.h"
#include "scratch.h"

struct projection_state; /* projection.c */
struct staged_state;     /* staged.c */
struct fused_state;      /* fused.c */
struct decode_state;     /* decode.c */
struct merge_state;      /* merge.c */
struct paged_state;      /* paged.c */
struct convert_state;    /* convert.c */

struct clattn_context_s {
    error_state errors; /* first: error.c reaches it from the handle (see error.h) */
    cl_context context;
    cl_device_id device;
    cl_command_queue queue;
    device_caps caps;
    context_options options;
    scratch_pool scratch;
    profile_log profile; /* kernels' device time, when options.profile */
    struct projection_state *projection;
    struct staged_state *staged;
    struct fused_state *fused;
    struct decode_state *decode;
    struct merge_state *merge;
    struct paged_state *paged;
    struct convert_state *convert;
};

#endif
