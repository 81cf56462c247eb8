/* A short conformance run of clattn_sdpa on one device against the fp64 host reference: a handful of
 * shapes and masks chosen to touch every code path (used by `clattn devices --check`). */
#ifndef CLATTN_CONFORMANCE_H
#define CLATTN_CONFORMANCE_H

#include <stdbool.h>
#include <stddef.h>

typedef struct conformance_result {
    bool passed;
    size_t cases;
    double max_error;  /* largest |out − ref| over outputs, weights and log-sum-exps */
    char message[512]; /* why it failed */
} conformance_result;

void conformance_run(const char *device_spec, conformance_result *result);

#endif
