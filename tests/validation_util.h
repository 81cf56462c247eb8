/*
 * The bad-call machinery shared by the argument-validation suites (test_validation_sdpa.c,
 * test_validation_mha.c, test_validation_stages.c).
 *
 * Each bad call must return the documented status, write no output (outputs keep their sentinel
 * fill) and leave a non-empty clattn_last_error(). Every bad case is one check iteration per device.
 * Good calls with exactly-sized buffers are run as positive controls, so a library that rejects
 * everything does not pass.
 */
#ifndef CLATTN_VALIDATION_UTIL_H
#define CLATTN_VALIDATION_UTIL_H

#include "test_util.h"

#include <stdint.h>

#define ANY_ERROR 1 /* "expect": any status other than CLATTN_SUCCESS */
#define HALF_MAX (SIZE_MAX / 2)
#define BIG_POW2 ((size_t)1 << (sizeof(size_t) * 8 - 2)) /* × sizeof(float) overflows size_t */

/* Shorthands of the expected statuses in the bad-case tables. */
#define NA CLATTN_ERROR_NULL_ARGUMENT
#define ZS CLATTN_ERROR_ZERO_SIZE
#define OV CLATTN_ERROR_SIZE_OVERFLOW
#define TS CLATTN_ERROR_BUFFER_TOO_SMALL
#define SM CLATTN_ERROR_SHAPE_MISMATCH
#define IM CLATTN_ERROR_INVALID_MASK
#define IV CLATTN_ERROR_INVALID_VALUE
#define XL CLATTN_ERROR_EXCEEDS_DEVICE_LIMIT

typedef struct {
    int mut;
    int expect;
    int alt; /* a second accepted status, 0 for none */
    const char *name;
} bad_case;

/* The sizes of the good SDPA call (test_validation_sdpa.c), also those of the weighted-sum cases. */
enum { GB = 2, GH = 2, GL = 3, GS = 5, GD = 4, GDV = 6 };

/* st is bc's expected status (or its alternative; any error for ANY_ERROR), and
 * clattn_last_error(err_ctx) is not empty. */
void check_status(clattn_status st, const bad_case *bc, const clattn_context *err_ctx);
/* The first n floats of m (when m is not NULL) are still sentinel: a failing call wrote nothing. */
void check_dev_untouched(clattn_context *ctx, cl_mem m, size_t n, const char *what);
/* The same for a tu_host_alloc array (when p is not NULL), guard included. */
void check_host_untouched(const float *p, size_t n, const char *what);

#endif
