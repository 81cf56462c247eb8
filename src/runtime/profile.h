/* Device time of the kernels a context enqueues, read from their own profiling events when the
 * context was made with options.profile: per kind of kernel, since the last clattn_profile_read. */
#ifndef CLATTN_PROFILE_H
#define CLATTN_PROFILE_H

#include "clattn/clattn.h"

#include <stdbool.h>
#include <stddef.h>

/* Events not yet read; a full list is folded into the totals (after waiting for its kernels). */
#define PROFILE_PENDING_MAX 256

typedef struct profile_log {
    bool enabled;
    size_t pending_count;
    cl_event pending[PROFILE_PENDING_MAX];
    cl_event pending_since[PROFILE_PENDING_MAX];   /* NULL, or a marker whose end starts the span */
    const char *pending_name[PROFILE_PENDING_MAX]; /* string literals: the kernels' names */
    size_t entry_count;
    clattn_profile_entry entries[CLATTN_PROFILE_MAX_ENTRIES];
} profile_log;

/* Where a launch should ask for its event: NULL when the context does not profile. */
cl_event *profile_event_slot(clattn_context *ctx, cl_event *slot);

/* Keep `event` (from a successful enqueue through profile_event_slot) as one run of kernel `name`. */
void profile_record(clattn_context *ctx, cl_event event, const char *name);

/* The same for work that enqueues several kernels but hands back the event of its last one only
 * (CLBlast): `since`, a marker enqueued just before that work, starts the span at its end. */
void profile_record_span(clattn_context *ctx, cl_event since, cl_event last, const char *name);

/* Release the events still held (the queue is finished); called when the context is freed. */
void profile_release(profile_log *log);

#endif
