/* The bottom layer: the detail of the last failure (per context, or per thread outside any context),
 * the last warning and the last build log. Every other module reports through these functions. */
#ifndef CLATTN_ERROR_H
#define CLATTN_ERROR_H

#include "clattn/clattn.h"

#include <stdarg.h>

#define CLATTN_ERROR_MAX 2048

/* A context's error detail. It is the first member of struct clattn_context_s (context.h), so that
 * this layer reaches it from a context handle without knowing the rest of the context. */
typedef struct error_state {
    char last_error[CLATTN_ERROR_MAX];
    char last_warning[CLATTN_ERROR_MAX];
    char *build_log; /* malloc'ed, or NULL */
} error_state;

#if defined(__GNUC__)
#define CLATTN_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define CLATTN_PRINTF(fmt, args)
#endif

/* Record a detail message for ctx (or the calling thread when ctx is NULL) and return status. */
clattn_status set_error(clattn_context *ctx, clattn_status status, const char *fmt, ...) CLATTN_PRINTF(3, 4);

/* Record a failed OpenCL call ("clEnqueueNDRangeKernel: CL_OUT_OF_RESOURCES") and return its code,
 * which is a valid clattn_status. */
clattn_status cl_error(clattn_context *ctx, cl_int err, const char *what);

void clear_error(clattn_context *ctx);

/* Warnings never change a call's status; ctx must not be NULL. */
void set_warning(clattn_context *ctx, const char *fmt, ...) CLATTN_PRINTF(2, 3);
void clear_warning(clattn_context *ctx);

/* Keep `log` (malloc'ed, or NULL) as ctx's build log, freeing the previous one. */
void error_set_build_log(clattn_context *ctx, char *log);

/* Free what the error state owns (the build log); called once when the context is freed. */
void error_state_free(error_state *state);

#endif
