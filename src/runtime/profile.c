/* Kernel profiling: each launch of a profiling context hands its event here; the events are read
 * (START to END, the kernel's own time on the device, no host time between commands) when the
 * application asks, or when too many wait. */
#include "profile.h"

#include "context.h"
#include "error.h"
#include "validate.h"

#include <string.h>

cl_event *profile_event_slot(clattn_context *ctx, cl_event *slot)
{
    *slot = NULL;
    return ctx->profile.enabled ? slot : NULL;
}

/* The entry of `name`, added when new (NULL when the table is full, which the kernels' few names
 * never reach). Names are string literals, but compared by content so that equal labels merge. */
static clattn_profile_entry *entry_of(profile_log *log, const char *name)
{
    for (size_t i = 0; i < log->entry_count; i++)
        if (strcmp(log->entries[i].name, name) == 0)
            return &log->entries[i];
    if (log->entry_count == CLATTN_PROFILE_MAX_ENTRIES)
        return NULL;
    clattn_profile_entry *e = &log->entries[log->entry_count++];
    e->name = name;
    e->launches = 0;
    e->device_ns = 0;
    return e;
}

/* Wait for the pending kernels and add their times to the entries. */
static clattn_status fold_pending(clattn_context *ctx)
{
    profile_log *log = &ctx->profile;
    cl_int err = log->pending_count ? clWaitForEvents((cl_uint)log->pending_count, log->pending) : CL_SUCCESS;
    for (size_t i = 0; i < log->pending_count; i++) {
        cl_event since = log->pending_since[i];
        cl_ulong start = 0, end = 0;
        if (err == CL_SUCCESS)
            err = since ? clGetEventProfilingInfo(since, CL_PROFILING_COMMAND_END, sizeof start, &start, NULL)
                        : clGetEventProfilingInfo(log->pending[i], CL_PROFILING_COMMAND_START, sizeof start, &start,
                                                  NULL);
        if (err == CL_SUCCESS)
            err = clGetEventProfilingInfo(log->pending[i], CL_PROFILING_COMMAND_END, sizeof end, &end, NULL);
        clattn_profile_entry *e = err == CL_SUCCESS ? entry_of(log, log->pending_name[i]) : NULL;
        if (e) {
            e->launches++;
            e->device_ns += end > start ? end - start : 0;
        }
        clReleaseEvent(log->pending[i]);
        if (since)
            clReleaseEvent(since);
    }
    log->pending_count = 0;
    return err == CL_SUCCESS ? CLATTN_SUCCESS : cl_error(ctx, err, "reading the kernels' profiling events");
}

void profile_record_span(clattn_context *ctx, cl_event since, cl_event last, const char *name)
{
    profile_log *log = &ctx->profile;
    if (log->pending_count == PROFILE_PENDING_MAX)
        (void)fold_pending(ctx); /* a failure here shows again, as an error, in clattn_profile_read */
    log->pending[log->pending_count] = last;
    log->pending_since[log->pending_count] = since;
    log->pending_name[log->pending_count++] = name;
}

void profile_record(clattn_context *ctx, cl_event event, const char *name)
{
    profile_record_span(ctx, NULL, event, name);
}

void profile_release(profile_log *log)
{
    for (size_t i = 0; i < log->pending_count; i++) {
        clReleaseEvent(log->pending[i]);
        if (log->pending_since[i])
            clReleaseEvent(log->pending_since[i]);
    }
    log->pending_count = 0;
}

clattn_status clattn_profile_read(clattn_context *ctx, clattn_profile_entry *entries, size_t capacity, size_t *count)
{
    clattn_status st = check_context(ctx);
    if (st != CLATTN_SUCCESS)
        return st;
    if (!count)
        return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "clattn_profile_read: count is NULL");
    *count = 0;
    if (!entries && capacity)
        return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "clattn_profile_read: entries is NULL but capacity is %zu",
                         capacity);
    if (!ctx->profile.enabled)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                         "clattn_profile_read: the context was made without options.profile");
    if ((st = fold_pending(ctx)) != CLATTN_SUCCESS)
        return st;
    profile_log *log = &ctx->profile;
    *count = log->entry_count;
    if (log->entry_count > capacity)
        return set_error(ctx, CLATTN_ERROR_BUFFER_TOO_SMALL,
                         "clattn_profile_read: %zu kinds of kernel ran, room for %zu (CLATTN_PROFILE_MAX_ENTRIES "
                         "always suffices)",
                         log->entry_count, capacity);
    if (log->entry_count)
        memcpy(entries, log->entries, log->entry_count * sizeof *entries);
    log->entry_count = 0;
    return CLATTN_SUCCESS;
}
