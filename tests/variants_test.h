/*
 * The two halves of test_variants (test_variants.c: the variants table, bad variants, kv buffers;
 * test_variants_masks.c: layers, masks read in place, the weights output, value limits).
 */
#ifndef CLATTN_VARIANTS_TEST_H
#define CLATTN_VARIANTS_TEST_H

#include "test_util.h"

/* test_variants_masks.c's test cases. */
void variants_add_mask_cases(Suite *s);

#endif
