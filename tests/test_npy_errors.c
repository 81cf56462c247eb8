/*
 * The .npy reader's rejections (bad headers, prefixes, damaged images, every message), its file errors
 * and the temp-and-rename rule of the writer, and streams (FIFOs, devices) read only as far as the header
 * says: the second half of test_npy (npy_test.h).
 */
#define _POSIX_C_SOURCE 200809L /* stat, umask, mkfifo, fork, alarm */
#include "npy_test.h"

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
/* Rejections                                                                                      */
/* ---------------------------------------------------------------------------------------------- */

static const struct {
    const char *header;
    size_t data_len;
    const char *message;
} bad_headers[] = {
    {"{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", 24, "big-endian dtype '>f4'"},
    {"{'descr': '>i8', 'fortran_order': False, 'shape': (3,), }", 24, "big-endian dtype '>i8'"},
    {"{'descr': '|u1', 'fortran_order': False, 'shape': (2, 3), }", 24, "unsupported dtype '|u1'"},
    {"{'descr': '<u4', 'fortran_order': False, 'shape': (2, 3), }", 24, "unsupported dtype '<u4'"},
    {"{'descr': '<c8', 'fortran_order': False, 'shape': (2, 3), }", 48, "unsupported dtype '<c8'"},
    {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", 8, "structured dtypes"},
    {"{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", 24,
     "Fortran-order arrays are not supported; save with np.ascontiguousarray"},
    {"{'descr': '<f4', 'fortran_order': 0, 'shape': (2, 3), }", 24, "not True or False"},
    {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }", 24, "negative dimension -3"},
    {"{'descr': '<f4', 'fortran_order': False, 'shape': (2.5, 3), }", 24, "dimension '2.5' in shape is not an integer"},
    {"{'descr': '<f4', 'fortran_order': False, 'shape': (two, 3), }", 24, "dimension 'two' in shape is not an integer"},
    {"{'descr': '<f4', 'fortran_order': False, 'shape': (6), }", 24, "not a tuple"},
    {"{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3], }", 24, "not a tuple"},
    {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,), }", 24, "too large"},
    {"{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 16), }", 24,
     "more elements than fit in memory"},
    {"{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904,), }", 24,
     "more bytes of data than fit in memory"},
    {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1), }", 4,
     "shape has 9 dimensions; at most 8"},
    {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 20,
     "truncated: shape (2, 3) needs 24 bytes of data, file has 20"},
    {"{'descr': '<f4', 'fortran_order': False, 'shape': (7,), }", 24, "truncated: shape (7,) needs 28 bytes"},
    {"{'fortran_order': False, 'shape': (2, 3), }", 24, "no 'descr' key"},
    {"{'descr': '<f4', 'shape': (2, 3), }", 24, "no 'fortran_order' key"},
    {"{'descr': '<f4', 'fortran_order': False}", 24, "no 'shape' key"},
    {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'extra': 1}", 24, "unexpected key 'extra'"},
    {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}", 24, "'descr' appears twice"},
    {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } x", 24, "unexpected text after the dict"},
    {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), ", 24, "malformed header"},
    {"{'descr' '<f4', 'fortran_order': False, 'shape': (2, 3)}", 24, "expected ':'"},
    {"{'descr': '<f4, 'fortran_order': False, 'shape': (2, 3)}", 24, "unsupported dtype '<f4, '"},
    {"['descr', '<f4']", 24, "expected '{'"},
    {"", 24, "malformed header"},
};

START_TEST(test_bad_header)
{
    unsigned char data[64] = {0};
    expect_rejected(1, bad_headers[_i].header, data, bad_headers[_i].data_len, bad_headers[_i].message);
}
END_TEST

START_TEST(test_header_length_past_end)
{
    /* A 12-byte version 2.0 file claiming a 0xFFFFFFF0-byte header. */
    const unsigned char img[12] = {0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0, 0xF0, 0xFF, 0xFF, 0xFF};
    npy_array a;
    char err[256] = "";
    ck_assert_int_ne(npy_parse(img, sizeof img, &a, err, sizeof err), 0);
    ck_assert_str_eq(err, "header length 4294967280 exceeds file size 12");
    ck_assert_ptr_null(a.data);

    /* Version 1.0, 2-byte length, past the end by one byte. */
    size_t len;
    unsigned char *v1 = make_image(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", NULL, 0, &len);
    ck_assert_int_ne(npy_parse(v1, len - 1, &a, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "exceeds file size") != NULL, "%s", err);
    free(v1);
}
END_TEST

START_TEST(test_absurd_header_length)
{
    /* The header fits in the file but is far longer than any numpy header. */
    const size_t header_len = NPY_MAX_HEADER_LEN + 1;
    char *header = malloc(header_len + 1);
    memset(header, ' ', header_len);
    header[header_len] = '\0';
    size_t len;
    unsigned char *img = make_image(2, header, NULL, 0, &len);
    free(header);
    npy_array a;
    char err[256] = "";
    ck_assert_int_ne(npy_parse(img, len, &a, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "header length 1048577 is beyond") != NULL, "%s", err);
    free(img);
}
END_TEST

START_TEST(test_bad_prefix)
{
    npy_array a;
    char err[256] = "";
    ck_assert_int_ne(npy_parse((const unsigned char *)"\x93NUMPY\x01", 7, &a, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "too short") != NULL, "%s", err);
    ck_assert_int_ne(npy_parse(NULL, 0, &a, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "too short") != NULL, "%s", err);
    ck_assert_int_ne(npy_parse((const unsigned char *)"PK\x03\x04 this is a zip", 20, &a, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "not a .npy file") != NULL, "%s", err);
    ck_assert_int_ne(npy_parse((const unsigned char *)"\x93NUMPY\x04\x00\x00\x00\x00\x00", 12, &a, err, sizeof err),
                     0);
    ck_assert_msg(strstr(err, "unsupported .npy format version 4.0") != NULL, "%s", err);
    ck_assert_int_ne(npy_parse((const unsigned char *)"\x93NUMPY\x01\x01\x00\x00\x00\x00", 12, &a, err, sizeof err),
                     0);
    ck_assert_msg(strstr(err, "version 1.1") != NULL, "%s", err);
    ck_assert_int_ne(npy_parse((const unsigned char *)"\x93NUMPY\x02\x00\x00\x00", 10, &a, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "too short for a version 2.0") != NULL, "%s", err);
}
END_TEST

/* Every prefix of a valid image, and every single-byte change to its header, must be handled without a
 * crash: either parsed or rejected with a message. (Run under a sanitizer to catch overreads.) */
START_TEST(test_damaged_images)
{
    size_t len;
    unsigned char *good = make_image(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }   \n",
                                     six_floats, sizeof six_floats, &len);
    npy_array a;
    char err[256];
    for (size_t cut = 0; cut < len; cut++) {
        unsigned char *copy = malloc(cut + 1); /* exact size, so an overread is a real one */
        memcpy(copy, good, cut);
        err[0] = '\0';
        ck_assert_int_ne(npy_parse(copy, cut, &a, err, sizeof err), 0);
        ck_assert(err[0] != '\0');
        free(copy);
    }
    static const unsigned char values[] = {0, 1, '\'', '"', '(', ')', ',', ':', '{', '}', '-', '9', 0x80, 0xFF};
    for (size_t pos = 6; pos < len - sizeof six_floats; pos++) {
        for (size_t v = 0; v < sizeof values; v++) {
            unsigned char *copy = malloc(len);
            memcpy(copy, good, len);
            copy[pos] = values[v];
            err[0] = '\0';
            if (npy_parse(copy, len, &a, err, sizeof err) == 0)
                npy_free(&a);
            else
                ck_assert_msg(err[0] != '\0', "no message for byte %zu = %u", pos, values[v]);
            free(copy);
        }
    }
    free(good);
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* Files                                                                                           */
/* ---------------------------------------------------------------------------------------------- */

START_TEST(test_load_errors)
{
    char path[128], err[256] = "";
    npy_array a;
    tmp_path(path, sizeof path, "missing.npy");
    ck_assert_int_ne(npy_load(path, &a, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "cannot open: No such file or directory"), "%s", err);

    /* The same messages as npy_parse; the caller names the file. */
    tmp_path(path, sizeof path, "short.npy");
    tu_write_file(path, "\x93NUMPY\x02\x00\xF0\xFF\xFF\xFF", 12);
    ck_assert_int_ne(npy_load(path, &a, err, sizeof err), 0);
    ck_assert_str_eq(err, "header length 4294967280 exceeds file size 12");

    ck_assert_int_ne(npy_load(tmp_dir, &a, err, sizeof err), 0); /* a folder */
    ck_assert_msg(strstr(err, "cannot read: Is a directory") != NULL, "%s", err);

    /* A (sparse) 64 GiB file is refused from its size, before anything is allocated or read. */
    tmp_path(path, sizeof path, "huge.npy");
    if (truncate(path, (off_t)64 << 30) == 0) {
        ck_assert_int_ne(npy_load(path, &a, err, sizeof err), 0);
        ck_assert_msg(strstr(err, "68719476736 bytes, beyond the") != NULL, "%s", err);
    }
}
END_TEST

START_TEST(test_save_into_missing_folder)
{
    char path[128], err[256] = "";
    tmp_path(path, sizeof path, "no-such-folder/out.npy");
    const size_t shape[1] = {6};
    ck_assert_int_ne(npy_save_f32(path, six_floats, 1, shape, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "cannot create a temporary file in its folder: No such file") != NULL, "%s", err);
    ck_assert_uint_eq(tu_dir_count(tmp_dir), 0); /* nothing left behind */
}
END_TEST

START_TEST(test_save_replaces_whole)
{
    char path[128], err[256] = "";
    tmp_path(path, sizeof path, "over.npy");
    float big[1000];
    for (size_t i = 0; i < 1000; i++)
        big[i] = (float)i;
    const size_t big_shape[2] = {10, 100}, small_shape[2] = {2, 3};
    ck_assert_msg(npy_save_f32(path, big, 2, big_shape, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(npy_save_f32(path, six_floats, 2, small_shape, err, sizeof err) == 0, "%s", err);

    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(st.st_size, 128 + sizeof six_floats); /* no tail of the old file */
    const mode_t mask = umask(022);
    umask(mask);
    ck_assert_int_eq(st.st_mode & 0777, 0666 & ~mask); /* ordinary permissions, not mkstemp's 0600 */

    npy_array a;
    ck_assert_msg(npy_load(path, &a, err, sizeof err) == 0, "%s", err);
    check_six_floats(&a);
    npy_free(&a);
    ck_assert_uint_eq(tu_dir_count(tmp_dir), 1); /* no temporary left */
}
END_TEST

START_TEST(test_save_bad_arguments)
{
    char path[128], err[256] = "";
    tmp_path(path, sizeof path, "bad.npy");
    const size_t shape[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1}, huge[3] = {SIZE_MAX, 2, 2};
    ck_assert_int_ne(npy_save_f32(path, six_floats, 9, shape, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "at most 8") != NULL, "%s", err);
    ck_assert_int_ne(npy_save_f32(path, six_floats, 3, huge, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "overflows") != NULL, "%s", err);
    ck_assert_int_ne(npy_save_f32(path, NULL, 1, shape, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "data is NULL") != NULL, "%s", err);
    ck_assert_uint_eq(tu_dir_count(tmp_dir), 0);
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* Streams: FIFOs and devices, read only as far as the header says                                */
/* ---------------------------------------------------------------------------------------------- */

/* Under the tcase's timeout: reading these to their end (the reader before streams were bounded) never
 * finishes, as /dev/zero and a FIFO whose writer stays open have none. */
#define STREAM_TIMEOUT_S 30

static const char six_floats_header[] = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n";

static void make_fifo(char *path, size_t cap)
{
    tmp_path(path, cap, "fifo");
    ck_assert_msg(mkfifo(path, 0600) == 0, "mkfifo %s: %s", path, strerror(errno));
}

/* Load path while a child writes len bytes into it and then closes it, so the reader sees the end of the
 * stream. The bytes fit the pipe at once (one write of at most PIPE_BUF bytes), so the child is done
 * before the reader could close early. The alarm ends the child should no reader come. */
static int load_from_writer(const char *path, const void *bytes, size_t len, npy_array *a, char *err,
                            size_t err_size)
{
    ck_assert_uint_le(len, 512);
    const pid_t pid = fork();
    ck_assert_int_ne(pid, -1);
    if (pid == 0) {
        alarm(STREAM_TIMEOUT_S);
        const int fd = open(path, O_WRONLY); /* waits for the reader */
        _exit(fd >= 0 && write(fd, bytes, len) == (ssize_t)len ? 0 : 1);
    }
    const int rc = npy_load(path, a, err, err_size);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the writer failed (status 0x%x)", status);
    return rc;
}

/* /dev/zero never ends; its first bytes are not a .npy preamble, so it is refused after them. */
START_TEST(test_stream_dev_zero)
{
    npy_array a;
    char err[256] = "";
    ck_assert_int_ne(npy_load("/dev/zero", &a, err, sizeof err), 0);
    ck_assert_str_eq(err, "not a .npy file (it does not start with \"\\x93NUMPY\")");
    ck_assert_ptr_null(a.data);
    ck_assert_int_ne(npy_load("/dev/null", &a, err, sizeof err), 0);
    ck_assert_str_eq(err, "file is 0 bytes, too short to be a .npy file");
}
END_TEST

/* A FIFO whose writer (this process) keeps its end open after the image and more bytes: the load must
 * return the array without waiting for an end that never comes, and leave the bytes after the data
 * unread in the FIFO. */
static const struct {
    unsigned major;
    const char *header;
    size_t data_len, count;
} stream_images[] = {
    {1, six_floats_header, sizeof six_floats, 6},
    {2, six_floats_header, sizeof six_floats, 6},
    {3, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3), }\n", 0, 0},
    {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }\n", 4, 1},
};

START_TEST(test_stream_reads_what_the_header_states)
{
    static const char after[] = "bytes after the data";
    size_t len;
    unsigned char *img = make_image(stream_images[_i].major, stream_images[_i].header, six_floats,
                                    stream_images[_i].data_len, &len);
    char path[128], err[256] = "";
    make_fifo(path, sizeof path);
    /* Open both ends here: a reader first, so that opening the writing end does not wait. */
    const int rd = open(path, O_RDONLY | O_NONBLOCK), wr = open(path, O_WRONLY);
    ck_assert_int_ge(rd, 0);
    ck_assert_int_ge(wr, 0);
    ck_assert_int_eq(write(wr, img, len), (ssize_t)len);
    ck_assert_int_eq(write(wr, after, sizeof after), (ssize_t)sizeof after);
    free(img);

    npy_array a;
    ck_assert_msg(npy_load(path, &a, err, sizeof err) == 0, "%s", err);
    ck_assert_uint_eq(a.count, stream_images[_i].count);
    ck_assert_mem_eq(a.data, six_floats, stream_images[_i].data_len);
    npy_free(&a);

    char rest[64];
    ck_assert_int_eq(read(rd, rest, sizeof rest), (ssize_t)sizeof after);
    ck_assert_str_eq(rest, after);
    close(wr);
    close(rd);
}
END_TEST

/* Every cut of a valid image, through a FIFO whose writer then closes it, gets npy_parse's answer for
 * the same bytes: the same message, or (the whole image) the same array. */
START_TEST(test_stream_cuts)
{
    char path[128];
    make_fifo(path, sizeof path);
    for (unsigned major = 1; major <= 2; major++) {
        size_t len;
        unsigned char *img = make_image(major, six_floats_header, six_floats, sizeof six_floats, &len);
        for (size_t cut = 0; cut <= len; cut++) {
            npy_array want, got;
            char want_err[256] = "", got_err[256] = "";
            const int want_rc = npy_parse(img, cut, &want, want_err, sizeof want_err);
            const int got_rc = load_from_writer(path, img, cut, &got, got_err, sizeof got_err);
            ck_assert_msg(got_rc == want_rc && strcmp(got_err, want_err) == 0,
                          "v%u cut at %zu of %zu: FIFO gave %d \"%s\", npy_parse %d \"%s\"", major, cut, len, got_rc,
                          got_err, want_rc, want_err);
            if (want_rc == 0) {
                check_six_floats(&got);
                npy_free(&got);
                npy_free(&want);
            } else {
                ck_assert_ptr_null(got.data);
            }
        }
        free(img);
    }

    /* The messages named: the data cut short, the header cut short. */
    size_t len;
    unsigned char *img = make_image(1, six_floats_header, six_floats, sizeof six_floats, &len);
    npy_array a;
    char err[256] = "";
    ck_assert_int_ne(load_from_writer(path, img, len - 4, &a, err, sizeof err), 0);
    ck_assert_str_eq(err, "truncated: shape (2, 3) needs 24 bytes of data, file has 20");
    ck_assert_int_ne(load_from_writer(path, img, 40, &a, err, sizeof err), 0);
    ck_assert_str_eq(err, "header length 60 exceeds file size 40");
    free(img);
}
END_TEST

/* A stream's header is believed only within the limits a file's size is held to: a header promising more
 * data than the reader takes, or too long a header, is refused before anything more is read. */
START_TEST(test_stream_absurd_promises)
{
    char path[128];
    make_fifo(path, sizeof path);
    size_t len;
    unsigned char *img =
        make_image(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776,), }\n", six_floats, 8, &len);
    npy_array a;
    char err[256] = "";
    ck_assert_int_ne(load_from_writer(path, img, len, &a, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "the header describes 4398046511104 bytes of data, beyond the") != NULL, "%s", err);
    free(img);

    const unsigned char huge_header[12] = {0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0, 0xF0, 0xFF, 0xFF, 0xFF};
    ck_assert_int_ne(load_from_writer(path, huge_header, sizeof huge_header, &a, err, sizeof err), 0);
    ck_assert_str_eq(err, "header length 4294967280 is beyond the 1048576-byte limit; not a numpy header");
}
END_TEST

void npy_add_error_cases(Suite *s)
{
    TCase *tc = tcase_create("rejections");
    tcase_add_loop_test(tc, test_bad_header, 0, (int)(sizeof bad_headers / sizeof bad_headers[0]));
    tcase_add_test(tc, test_header_length_past_end);
    tcase_add_test(tc, test_absurd_header_length);
    tcase_add_test(tc, test_bad_prefix);
    tcase_add_test(tc, test_damaged_images);
    suite_add_tcase(s, tc);

    tc = tcase_create("files");
    tcase_add_checked_fixture(tc, make_tmp_dir, tu_sys_teardown);
    tcase_add_test(tc, test_load_errors);
    tcase_add_test(tc, test_save_into_missing_folder);
    tcase_add_test(tc, test_save_replaces_whole);
    tcase_add_test(tc, test_save_bad_arguments);
    suite_add_tcase(s, tc);

    tc = tcase_create("streams");
    tcase_add_checked_fixture(tc, make_tmp_dir, tu_sys_teardown);
    tcase_set_timeout(tc, STREAM_TIMEOUT_S);
    tcase_add_test(tc, test_stream_dev_zero);
    tcase_add_loop_test(tc, test_stream_reads_what_the_header_states, 0,
                        (int)(sizeof stream_images / sizeof stream_images[0]));
    tcase_add_test(tc, test_stream_cuts);
    tcase_add_test(tc, test_stream_absurd_promises);
    suite_add_tcase(s, tc);
}
