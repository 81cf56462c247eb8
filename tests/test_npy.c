/* Tests of the .npy reader and writer (tools/npy.c): round trips, hand-made images of every header
 * version and spelling, conversions; and (test_npy_errors.c) every rejection with its message, the
 * temp-and-rename rule and streams. npy_test.h holds what the two share. */
#define _POSIX_C_SOURCE 200809L /* stat, umask, mkfifo, fork, alarm */

#include "npy_test.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---------------------------------------------------------------------------------------------- */
/* Helpers                                                                                         */
/* ---------------------------------------------------------------------------------------------- */

const char *tmp_dir; /* this test's scratch folder, removed by tu_sys_teardown */

void make_tmp_dir(void) { tmp_dir = tu_scratch_dir("test_npy"); }

void tmp_path(char *buf, size_t cap, const char *name) { snprintf(buf, cap, "%s/%s", tmp_dir, name); }

/* A .npy image with the given version and header text (used verbatim: no padding added), followed by
 * data_len bytes of data. */
unsigned char *make_image(unsigned major, const char *header, const void *data, size_t data_len,
                                 size_t *len)
{
    const size_t header_len = strlen(header), prefix = major == 1 ? 10 : 12;
    *len = prefix + header_len + data_len;
    unsigned char *img = malloc(*len + 1);
    ck_assert_ptr_nonnull(img);
    memcpy(img, "\x93NUMPY", 6);
    img[6] = (unsigned char)major;
    img[7] = 0;
    for (size_t i = 0; i < prefix - 8; i++)
        img[8 + i] = (unsigned char)(header_len >> (8 * i));
    memcpy(img + prefix, header, header_len);
    if (data_len > 0)
        memcpy(img + prefix + header_len, data, data_len);
    return img;
}

const float six_floats[6] = {1.5f, -2.0f, 0.25f, 3.0f, 1e-3f, -7.75f};

void check_six_floats(const npy_array *a)
{
    ck_assert_int_eq(a->dtype, NPY_F4);
    ck_assert_uint_eq(a->ndim, 2);
    ck_assert_uint_eq(a->shape[0], 2);
    ck_assert_uint_eq(a->shape[1], 3);
    ck_assert_uint_eq(a->count, 6);
    ck_assert_mem_eq(a->data, six_floats, sizeof six_floats);
}

/* Parse an image made from header and data and expect failure with `expected` in the message. */
void expect_rejected(unsigned major, const char *header, const void *data, size_t data_len,
                            const char *expected)
{
    size_t len;
    unsigned char *img = make_image(major, header, data, data_len, &len);
    npy_array a;
    char err[256] = "";
    const int rc = npy_parse(img, len, &a, err, sizeof err);
    free(img);
    ck_assert_msg(rc != 0, "header %s was accepted", header);
    ck_assert_ptr_null(a.data);
    ck_assert_msg(strstr(err, expected) != NULL, "header %s: message \"%s\" lacks \"%s\"", header, err,
                  expected);
}

/* ---------------------------------------------------------------------------------------------- */
/* Round trips                                                                                     */
/* ---------------------------------------------------------------------------------------------- */

static const struct {
    size_t ndim;
    size_t shape[4];
} round_trip_shapes[] = {
    {0, {0}}, {1, {1}}, {1, {7}}, {2, {2, 3}}, {3, {2, 3, 4}}, {4, {2, 1, 3, 5}}, {1, {0}}, {3, {3, 0, 2}},
};

START_TEST(test_round_trip)
{
    const size_t ndim = round_trip_shapes[_i].ndim;
    const size_t *shape = round_trip_shapes[_i].shape;
    size_t count = 1;
    for (size_t d = 0; d < ndim; d++)
        count *= shape[d];
    float *data = malloc((count + 1) * sizeof *data);
    for (size_t i = 0; i < count; i++)
        data[i] = (float)i * 0.5f - 3.0f;

    char path[128], err[256] = "";
    tmp_path(path, sizeof path, "round.npy");
    ck_assert_msg(npy_save_f32(path, data, ndim, shape, err, sizeof err) == 0, "%s", err);

    npy_array a;
    ck_assert_msg(npy_load(path, &a, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(a.dtype, NPY_F4);
    ck_assert_uint_eq(a.ndim, ndim);
    for (size_t d = 0; d < ndim; d++)
        ck_assert_uint_eq(a.shape[d], shape[d]);
    ck_assert_uint_eq(a.count, count);
    ck_assert_ptr_nonnull(a.data);
    if (count > 0)
        ck_assert_mem_eq(a.data, data, count * sizeof *data);

    float *f;
    ck_assert_msg(npy_to_float(&a, &f, err, sizeof err) == 0, "%s", err);
    if (count > 0)
        ck_assert_mem_eq(f, data, count * sizeof *data);
    free(f);
    npy_free(&a);
    ck_assert_ptr_null(a.data);
    npy_free(&a); /* a second free is harmless */
    free(data);
}
END_TEST

/* The file is laid out as numpy writes it: v1.0, the dict, space padding, '\n', data at a multiple of 64. */
START_TEST(test_save_layout)
{
    char path[128], err[256] = "";
    tmp_path(path, sizeof path, "layout.npy");
    const size_t shape[2] = {2, 3};
    ck_assert_msg(npy_save_f32(path, six_floats, 2, shape, err, sizeof err) == 0, "%s", err);

    size_t len;
    const unsigned char *img = (unsigned char *)tu_read_file(path, &len);
    ck_assert_ptr_nonnull(img);
    tu_track((void *)img);

    ck_assert_mem_eq(img, "\x93NUMPY\x01\x00", 8);
    const size_t header_len = img[8] | (size_t)img[9] << 8;
    ck_assert_uint_eq((10 + header_len) % 64, 0);
    ck_assert_uint_eq(len, 10 + header_len + sizeof six_floats);
    const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    ck_assert_mem_eq(img + 10, dict, strlen(dict));
    for (size_t i = 10 + strlen(dict); i < 10 + header_len - 1; i++)
        ck_assert_int_eq(img[i], ' ');
    ck_assert_int_eq(img[10 + header_len - 1], '\n');
    ck_assert_mem_eq(img + 10 + header_len, six_floats, sizeof six_floats); /* little-endian host */
}
END_TEST

START_TEST(test_scalar_and_1d_headers)
{
    const float one = 4.5f;
    npy_array a;
    char err[256] = "";
    size_t len;

    unsigned char *img = make_image(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }\n", &one, 4, &len);
    ck_assert_msg(npy_parse(img, len, &a, err, sizeof err) == 0, "%s", err);
    ck_assert_uint_eq(a.ndim, 0);
    ck_assert_uint_eq(a.count, 1);
    ck_assert_float_eq(*(float *)a.data, 4.5f);
    npy_free(&a);
    free(img);

    img = make_image(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }\n", six_floats, 24, &len);
    ck_assert_msg(npy_parse(img, len, &a, err, sizeof err) == 0, "%s", err);
    ck_assert_uint_eq(a.ndim, 1);
    ck_assert_uint_eq(a.shape[0], 6);
    ck_assert_uint_eq(a.count, 6);
    npy_free(&a);
    free(img);
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* Hand-made images                                                                                */
/* ---------------------------------------------------------------------------------------------- */

START_TEST(test_versions)
{
    const char *header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }      \n";
    for (unsigned major = 1; major <= 3; major++) {
        size_t len;
        unsigned char *img = make_image(major, header, six_floats, sizeof six_floats, &len);
        npy_array a;
        char err[256] = "";
        ck_assert_msg(npy_parse(img, len, &a, err, sizeof err) == 0, "version %u: %s", major, err);
        check_six_floats(&a);
        npy_free(&a);
        free(img);
    }
}
END_TEST

/* Spellings Python evaluates to the same dict, all for a (2, 3) float32 array. */
static const char *const header_variants[] = {
    "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n",
    "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2, 3)}",
    "{'shape': (2, 3), 'descr': '<f4', 'fortran_order': False}",
    "{'fortran_order':False,'shape':(2,3),'descr':'<f4',}",
    "  {  'descr'  :  '<f4'  ,\t'fortran_order' : False , 'shape' : ( 2 , 3 , ) , }   \n",
    "{'descr': \"<f4\", 'shape': (2L, 3L), 'fortran_order': False}",
    "{'descr': '=f4', 'fortran_order': False, 'shape': (2, 3)}",
    "{'descr': '|f4', 'fortran_order': False, 'shape': (2, 3)}",
};

START_TEST(test_header_variants)
{
    size_t len;
    unsigned char *img = make_image(1, header_variants[_i], six_floats, sizeof six_floats, &len);
    npy_array a;
    char err[256] = "";
    ck_assert_msg(npy_parse(img, len, &a, err, sizeof err) == 0, "%s: %s", header_variants[_i], err);
    check_six_floats(&a);
    npy_free(&a);
    free(img);
}
END_TEST

/* numpy never writes bytes after the data; they are accepted and ignored. */
START_TEST(test_trailing_bytes_ignored)
{
    unsigned char data[sizeof six_floats + 7];
    memcpy(data, six_floats, sizeof six_floats);
    memset(data + sizeof six_floats, 0xAB, 7);
    size_t len;
    unsigned char *img = make_image(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n", data,
                                    sizeof data, &len);
    npy_array a;
    char err[256] = "";
    ck_assert_msg(npy_parse(img, len, &a, err, sizeof err) == 0, "%s", err);
    check_six_floats(&a);
    npy_free(&a);
    free(img);
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* Types and conversions                                                                           */
/* ---------------------------------------------------------------------------------------------- */

START_TEST(test_f8_to_float)
{
    /* The last two: just below the half-way point above FLT_MAX (rounds down to FLT_MAX), and exactly on
     * it (ties to even, which is infinity) - numpy gives the same. */
    const double d[6] = {0.1, -1.0 / 3.0, 1e300, -1e300, 3.40282356e38, 3.4028235677973366e38};
    size_t len;
    unsigned char *img = make_image(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (6,), }\n", d,
                                    sizeof d, &len);
    npy_array a;
    char err[256] = "";
    ck_assert_msg(npy_parse(img, len, &a, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(a.dtype, NPY_F8);
    ck_assert_mem_eq(a.data, d, sizeof d);

    float *f;
    ck_assert_msg(npy_to_float(&a, &f, err, sizeof err) == 0, "%s", err);
    ck_assert(f[0] == 0.1f); /* rounded to nearest, as numpy's astype(float32) */
    ck_assert(f[1] == (float)(-1.0 / 3.0));
    ck_assert(isinf(f[2]) && f[2] > 0);
    ck_assert(isinf(f[3]) && f[3] < 0);
    ck_assert(f[4] == FLT_MAX);
    ck_assert(isinf(f[5]) && f[5] > 0);
    free(f);

    long long *v;
    ck_assert_int_ne(npy_to_int64(&a, &v, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "'<f8'") != NULL, "%s", err);
    npy_free(&a);
    free(img);
}
END_TEST

/* Every finite half value in increasing order, for the nearest-even reference below. */
static double half_values[63488];
static size_t half_count;

static void list_half_values(void)
{
    half_count = 0;
    for (int sign = -1; sign <= 1; sign += 2)
        for (unsigned h = 0; h < 0x7C00u; h++) {
            const unsigned bits = sign < 0 ? (0x7BFFu - h) | 0x8000u : h; /* negatives from the largest down */
            if (sign > 0 && h == 0)
                continue; /* +0 once (as -0 came last among the negatives) */
            half_values[half_count++] = npy_half_to_float((unsigned short)bits);
        }
}

/* The half nearest to x by exhaustive search (ties to the even pattern), or ±inf past 65520. */
static float half_reference(float x)
{
    if (fabs((double)x) >= 65520.0)
        return x > 0 ? INFINITY : -INFINITY;
    size_t lo = 0, hi = half_count - 1;
    while (hi - lo > 1) {
        const size_t mid = (lo + hi) / 2;
        if (half_values[mid] <= x)
            lo = mid;
        else
            hi = mid;
    }
    const double dl = fabs((double)x - half_values[lo]), dh = fabs(half_values[hi] - (double)x);
    if (dl != dh)
        return (float)(dl < dh ? half_values[lo] : half_values[hi]);
    const unsigned short hl = npy_float_to_half((float)half_values[lo]);
    return (float)((hl & 1u) == 0 ? half_values[lo] : half_values[hi]);
}

/* Half and bfloat16: every bit pattern survives widening and narrowing again (NaN stays NaN); random
 * floats narrow to the nearest half (ties to even) found by exhaustive search; the edges (65504, the
 * overflow point, subnormals, ties) and bfloat16's rounding by hand. */
START_TEST(test_half_and_bf16_conversions)
{
    for (unsigned bits = 0; bits <= 0xFFFFu; bits++) {
        const float h = npy_half_to_float((unsigned short)bits), b = npy_bf16_to_float_value((unsigned short)bits);
        if (isnan(h))
            ck_assert_msg(isnan(npy_half_to_float(npy_float_to_half(h))), "half NaN %04x lost", bits);
        else
            ck_assert_msg(npy_float_to_half(h) == bits, "half %04x -> %g -> %04x", bits, (double)h,
                          npy_float_to_half(h));
        if (isnan(b))
            ck_assert_msg(isnan(npy_bf16_to_float_value(npy_float_to_bf16(b))), "bf16 NaN %04x lost", bits);
        else
            ck_assert_msg(npy_float_to_bf16(b) == bits, "bf16 %04x -> %g -> %04x", bits, (double)b,
                          npy_float_to_bf16(b));
    }
    list_half_values();
    tu_rng r;
    tu_rng_seed(&r, 77);
    for (int i = 0; i < 200000; i++) {
        /* magnitudes from 2^-30 to 2^17: subnormal halves, normal ones and overflow */
        const float x = (float)((tu_rng_unit(&r) < 0.5 ? -1 : 1) * ldexp(1.0 + tu_rng_unit(&r), (int)(tu_rng_unit(&r) * 48) - 31));
        const float got = npy_half_to_float(npy_float_to_half(x)), want = half_reference(x);
        ck_assert_msg(got == want, "half of %.9g: %.9g, nearest even is %.9g", (double)x, (double)got, (double)want);
    }
    static const struct { float x, half; } edges[] = {
        {65504.0f, 65504.0f}, {65519.99f, 65504.0f}, {65520.0f, INFINITY}, {-65520.0f, -INFINITY},
        {0x1p-24f, 0x1p-24f}, {0x1p-25f, 0.0f}, {0x1.8p-24f, 0x1p-23f}, {0x1.4p-24f, 0x1p-24f},
        {1.0f + 0x1p-11f, 1.0f}, {1.0f + 0x1.8p-10f, 1.0f + 0x1p-9f}, {0x1.ffcp-15f, 0x1p-14f} /* a tie at the top of the subnormals: up, to the even 2^-14 */,
        {INFINITY, INFINITY}, {-0.0f, -0.0f},
    };
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
        const float got = npy_half_to_float(npy_float_to_half(edges[i].x));
        ck_assert_msg(got == edges[i].half && signbit(got) == signbit(edges[i].half), "half of %a: %a, want %a",
                      (double)edges[i].x, (double)got, (double)edges[i].half);
    }
    ck_assert(isnan(npy_half_to_float(npy_float_to_half(NAN))));
    /* bfloat16: the top 16 bits, rounded to nearest even */
    ck_assert_uint_eq(npy_float_to_bf16(1.0f), 0x3F80u);
    ck_assert_uint_eq(npy_float_to_bf16(1.0f + 0x1p-8f), 0x3F80u);           /* tie: even stays */
    ck_assert_uint_eq(npy_float_to_bf16(1.0f + 0x1.8p-7f), 0x3F82u);         /* tie: odd rounds up */
    ck_assert_uint_eq(npy_float_to_bf16(1.0f + 0x1.02p-8f), 0x3F81u);        /* past the tie */
    ck_assert_uint_eq(npy_float_to_bf16(FLT_MAX), 0x7F80u);                  /* overflows to inf */
    ck_assert_uint_eq(npy_float_to_bf16(-INFINITY), 0xFF80u);
    ck_assert(isnan(npy_bf16_to_float_value(npy_float_to_bf16(-NAN))));
}
END_TEST

/* '<f2' and '<u2' files: read as their bit patterns, widened by npy_to_float / npy_bf16_to_float, and
 * written by npy_save_floats_as (rounded), each refusing the other's type. */
START_TEST(test_half_files)
{
    const float values[6] = {1.0f, -2.5f, 65504.0f, 1e6f, 0x1p-24f, 0.1f};
    const size_t shape[2] = {2, 3};
    char path[512], err[256] = "";
    for (int bf = 0; bf <= 1; bf++) {
        tmp_path(path, sizeof path, bf ? "b.npy" : "h.npy");
        ck_assert_msg(npy_save_floats_as(path, bf ? NPY_U2 : NPY_F2, values, 2, shape, err, sizeof err) == 0, "%s", err);
        npy_array a;
        ck_assert_msg(npy_load(path, &a, err, sizeof err) == 0, "%s", err);
        ck_assert_int_eq(a.dtype, bf ? NPY_U2 : NPY_F2);
        ck_assert_uint_eq(a.count, 6);
        float *f = NULL;
        ck_assert_msg((bf ? npy_bf16_to_float(&a, &f, err, sizeof err) : npy_to_float(&a, &f, err, sizeof err)) == 0,
                      "%s", err);
        for (int i = 0; i < 6; i++) {
            const float want = bf ? npy_bf16_to_float_value(npy_float_to_bf16(values[i]))
                                  : npy_half_to_float(npy_float_to_half(values[i]));
            ck_assert_msg(f[i] == want, "%s element %d: %g, want %g", bf ? "bf16" : "half", i, (double)f[i], (double)want);
        }
        ck_assert(bf || isinf(f[3])); /* 1e6 is beyond half's range */
        free(f);
        f = NULL;
        ck_assert_int_ne(bf ? npy_to_float(&a, &f, err, sizeof err) : npy_bf16_to_float(&a, &f, err, sizeof err), 0);
        ck_assert_msg(strstr(err, bf ? "'<u2'" : "'<f2'") != NULL, "%s", err);
        npy_free(&a);
    }
    ck_assert_int_ne(npy_save_floats_as(path, NPY_I4, values, 2, shape, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "'<i4'") != NULL, "%s", err);
}
END_TEST

START_TEST(test_int_to_int64)
{
    const int32_t i4[4] = {0, -1, 2147483647, -2147483647 - 1};
    const int64_t i8[3] = {(int64_t)1 << 40, -5, INT64_MIN};
    size_t len;
    npy_array a;
    char err[256] = "";
    long long *v;

    unsigned char *img = make_image(2, "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 2), }\n", i4,
                                    sizeof i4, &len);
    ck_assert_msg(npy_parse(img, len, &a, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(a.dtype, NPY_I4);
    ck_assert_msg(npy_to_int64(&a, &v, err, sizeof err) == 0, "%s", err);
    for (size_t i = 0; i < 4; i++)
        ck_assert(v[i] == i4[i]);
    free(v);
    float *f;
    ck_assert_int_ne(npy_to_float(&a, &f, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "'<i4'") != NULL, "%s", err);
    npy_free(&a);
    free(img);

    img = make_image(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }\n", i8, sizeof i8, &len);
    ck_assert_msg(npy_parse(img, len, &a, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(a.dtype, NPY_I8);
    ck_assert_msg(npy_to_int64(&a, &v, err, sizeof err) == 0, "%s", err);
    for (size_t i = 0; i < 3; i++)
        ck_assert(v[i] == i8[i]);
    free(v);
    npy_free(&a);
    free(img);
}
END_TEST

START_TEST(test_bool)
{
    const unsigned char b[6] = {0, 1, 1, 0, 2, 255};
    size_t len;
    unsigned char *img = make_image(3, "{'descr': '|b1', 'fortran_order': False, 'shape': (2, 3), }\n", b,
                                    sizeof b, &len);
    npy_array a;
    char err[256] = "";
    ck_assert_msg(npy_parse(img, len, &a, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(a.dtype, NPY_B1);
    ck_assert_uint_eq(a.count, 6);
    const unsigned char expect[6] = {0, 1, 1, 0, 1, 1}; /* any non-zero byte is True */
    ck_assert_mem_eq(a.data, expect, 6);
    float *f;
    ck_assert_int_ne(npy_to_float(&a, &f, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "'|b1'") != NULL, "%s", err);
    npy_free(&a);
    free(img);
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */

static Suite *npy_suite(void)
{
    Suite *s = suite_create("npy");

    TCase *tc = tcase_create("round_trip");
    tcase_add_checked_fixture(tc, make_tmp_dir, tu_sys_teardown);
    tcase_add_loop_test(tc, test_round_trip, 0, (int)(sizeof round_trip_shapes / sizeof round_trip_shapes[0]));
    tcase_add_test(tc, test_save_layout);
    tcase_add_test(tc, test_scalar_and_1d_headers);
    tcase_add_test(tc, test_half_files);
    suite_add_tcase(s, tc);

    tc = tcase_create("headers");
    tcase_add_test(tc, test_versions);
    tcase_add_loop_test(tc, test_header_variants, 0, (int)(sizeof header_variants / sizeof header_variants[0]));
    tcase_add_test(tc, test_trailing_bytes_ignored);
    suite_add_tcase(s, tc);

    tc = tcase_create("types");
    tcase_add_test(tc, test_f8_to_float);
    tcase_add_test(tc, test_half_and_bf16_conversions);
    tcase_add_test(tc, test_int_to_int64);
    tcase_add_test(tc, test_bool);
    suite_add_tcase(s, tc);

    npy_add_error_cases(s);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(npy_suite());
    srunner_run_all(sr, CK_NORMAL);
    const int rc = tu_srunner_exit(sr);
    srunner_free(sr);
    return rc;
}
