/* A short conformance run of clattn_sdpa on one device against the fp64 host reference: a handful of
 * shapes and masks chosen to touch every code path (used by `clattn devices --check`). */
#ifndef CLATTN_CONFORMANCE_H
#define CLATTN_CONFORMANCE_H

#include <clattn/clattn.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct conformance_result {
    bool passed;
    size_t cases;          /* every case run, the storage types' included */
    double max_error;      /* float32 cases: largest |out − ref| over outputs, weights and log-sum-exps */
    size_t typed_cases;    /* of them, cases with float16, bfloat16 or int8 tensors */
    double typed_max_error; /* their largest |out − ref| (an output's tolerance grows by half its ulp) */
    char message[512];     /* why it failed */
} conformance_result;

void conformance_run(const char *device_spec, conformance_result *result);

/* n uniform values in [−1, 1) from a splitmix64 state (some −inf when some_inf: additive masks). */
void conformance_fill(float *p, size_t n, uint64_t *state, bool some_inf);

/* n outputs of `type` (rounded to it) against the reference: |out − ref| ≤ 2e-5 + 1e-4·|ref| plus half a
 * unit in the last place of `type` at ref. False, with r->message, at the first one outside; the
 * largest error goes to *max_error. */
bool conformance_compare(const char *what, const float *out, const double *ref, size_t n, clattn_dtype type,
                         double *max_error, conformance_result *r);

/* conformance_types.c: the storage types' cases on ctx; counts into r, false at the first failure. */
bool conformance_run_types(clattn_context *ctx, uint64_t *seed, conformance_result *r);

/* conformance_layouts.c: ragged batches and paged caches at decode and prefill lengths, and the merge. */
bool conformance_run_layouts(clattn_context *ctx, uint64_t *seed, conformance_result *r);

#endif
