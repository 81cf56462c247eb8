/* Error detail, warnings and build logs: per context, and per thread for calls outside a context. */
#include "error.h"

#include <stdio.h>
#include <stdlib.h>

/* Detail of failures that happen outside any context (device listing, context creation). */
static _Thread_local char thread_error[CLATTN_ERROR_MAX];

/* The handle points at its context, whose first member is its error_state (see error.h). */
static error_state *state_of(const clattn_context *ctx) { return (error_state *)(void *)ctx; }

static char *error_slot(clattn_context *ctx) { return ctx ? state_of(ctx)->last_error : thread_error; }

clattn_status set_error(clattn_context *ctx, clattn_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error_slot(ctx), CLATTN_ERROR_MAX, fmt, ap);
    va_end(ap);
    return status;
}

clattn_status cl_error(clattn_context *ctx, cl_int err, const char *what)
{
    return set_error(ctx, (clattn_status)err, "%s failed: %s (%d)", what, clattn_status_string((clattn_status)err),
                     (int)err);
}

void clear_error(clattn_context *ctx) { error_slot(ctx)[0] = '\0'; }

void clear_warning(clattn_context *ctx) { state_of(ctx)->last_warning[0] = '\0'; }

void set_warning(clattn_context *ctx, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(state_of(ctx)->last_warning, CLATTN_ERROR_MAX, fmt, ap);
    va_end(ap);
}

void error_set_build_log(clattn_context *ctx, char *log)
{
    free(state_of(ctx)->build_log);
    state_of(ctx)->build_log = log;
}

void error_state_free(error_state *state)
{
    free(state->build_log);
    state->build_log = NULL;
}

const char *clattn_last_error(const clattn_context *ctx) { return ctx ? state_of(ctx)->last_error : thread_error; }

const char *clattn_last_warning(const clattn_context *ctx) { return ctx ? state_of(ctx)->last_warning : ""; }

const char *clattn_build_log(const clattn_context *ctx)
{
    return ctx && state_of(ctx)->build_log ? state_of(ctx)->build_log : "";
}
