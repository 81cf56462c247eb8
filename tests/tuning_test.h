/*
 * What the two halves of test_tuning share (test_tuning.c: contexts with options, the lookup's helpers,
 * and the cases tables, options, lookup, tune_report; test_tuning_candidates.c: every candidate).
 */
#ifndef CLATTN_TUNING_TEST_H
#define CLATTN_TUNING_TEST_H

#include "test_util.h"

#include "context.h" /* internal: ctx->caps, ctx->tuning */
#include "params.h"  /* internal: the kernel families */
#include "program.h" /* internal: program_cache_options, the options a program was built with */
#include "tuning.h"

#include <stddef.h>

/* A context on device `dev`: options.tuning, options.tile and options.gemm as given (NULL: the
 * environment's; every test passes "" where it means none, so that CLATTN_TUNING, CLATTN_TILE and
 * CLATTN_GEMM in the caller's environment change nothing), the program cache in `cache_dir` (NULL: the
 * default folder), kernel times recorded. Fails the test unless it is made. */
clattn_context *context_with(size_t dev, const char *tuning, const char *tile, const char *gemm,
                             const char *cache_dir);
/* Family f's values for a class, completed for this device. */
tuning_values completed(const device_caps *caps, const tuning_options *o, tuning_family f, const tuning_values *v);
/* tuning_lookup on ctx, with an assertion on its status and the source expected. */
tuning_values lookup_from(clattn_context *ctx, tuning_family f, tuning_source expected);
/* got equals want, or the test fails naming both. */
void assert_values(const char *what, tuning_family f, const tuning_values *got, const tuning_values *want);
/* The device classes to check on device `dev`: its own, then gpu when that is another. */
size_t classes_of(size_t dev, device_class out[2]);

/* test_tuning_candidates.c's test case "candidates" (one iteration per candidate and device). */
void tuning_add_candidate_cases(Suite *s);

#endif
