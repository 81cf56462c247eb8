/*
 * What the two halves of test_npy share (test_npy.c: round trips, headers, conversions, and these
 * helpers; test_npy_errors.c: rejections, file errors, streams).
 */
#ifndef CLATTN_NPY_TEST_H
#define CLATTN_NPY_TEST_H

#define TU_NO_OPENCL /* the OpenCL-free part of the test utility */
#include "test_util.h"
#include "npy.h"

#include <check.h>
#include <stddef.h>

extern const char *tmp_dir; /* this test's scratch folder, removed by tu_sys_teardown */
/* The fixture's setup: a new tmp_dir. */
void make_tmp_dir(void);
void tmp_path(char *buf, size_t cap, const char *name);

/* A .npy image with the given version and header text (used verbatim: no padding added), followed by
 * data_len bytes of data. */
unsigned char *make_image(unsigned major, const char *header, const void *data, size_t data_len, size_t *len);

/* A (2, 3) float32 array and its check. */
extern const float six_floats[6];
void check_six_floats(const npy_array *a);

/* Parse an image made from header and data and expect failure with `expected` in the message. */
void expect_rejected(unsigned major, const char *header, const void *data, size_t data_len, const char *expected);

/* test_npy_errors.c's test cases: rejections, files, streams. */
void npy_add_error_cases(Suite *s);

#endif
