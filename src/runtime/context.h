/* The fields of a clattn_context. context.c, the owner at the top of the library, creates and frees
 * them; every module reads the ones it needs. Every program the paths build, and what a path keeps
 * beside them (a tuning choice), lives in one kernel cache (program.c): a new path adds nothing here. */
#ifndef CLATTN_CONTEXT_H
#define CLATTN_CONTEXT_H

#include "device.h"
#include "error.h"
#include "options.h"
#include "profile.h"
#include "scratch.h"
#include "tuning_tables.h"

struct program_cache; /* program.c */

struct clattn_context_s {
    error_state errors; /* first: error.c reaches it from the handle (see error.h) */
    cl_context context;
    cl_device_id device;
    cl_command_queue queue;
    device_caps caps;
    context_options options;
    tuning_options tuning; /* the kernel families' parameters the options fix (tuning.c looks them up) */
    scratch_pool scratch;
    profile_log profile; /* kernels' device time, when options.profile */
    struct program_cache *programs; /* made on first use */
    /* Nothing of one call: what a call needs (its mods, its masks) it passes down as arguments. */
};

#endif
