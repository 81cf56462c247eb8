/* Tests of the staged output files of tools/formats/atomic_file.c, which every file the clattn tool
 * writes goes through: temporaries under fresh random names that are never a planted link or file,
 * devices and FIFOs written through and never replaced, folders refused, and a group of files placed
 * all or nothing — a rename that fails after others were done undoes them (new files gone, replaced
 * files back with their old content, nothing left beside them). No OpenCL. Each test runs in its own
 * process (check's fork mode) under a timeout, so a FIFO without its reader cannot hang the suite. */
#define _XOPEN_SOURCE 700 /* mkfifo, mknod, symlink, lstat, readlink, pthreads */

#define TU_NO_OPENCL /* the OpenCL-free part of the test utility */
#include "test_util.h"
#include "atomic_file.h"
#include "npy.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define CASE_TIMEOUT_S 30

static const char *dir; /* this test's scratch folder, removed by tu_sys_teardown */

static void make_dir(void) { dir = tu_scratch_dir("test_atomic_file"); }

/* A path in the scratch folder (tracked: freed after the test). */
static char *at(const char *name)
{
    char *p = tu_track_malloc(strlen(dir) + strlen(name) + 2);
    sprintf(p, "%s/%s", dir, name);
    return p;
}

static char *content(const char *path)
{
    char *c = tu_read_file(path, NULL);
    return c ? tu_track(c) : NULL;
}

static void expect_content(const char *path, const char *want)
{
    const char *got = content(path);
    ck_assert_msg(got && strcmp(got, want) == 0, "%s: expected \"%s\", found %s%s%s", path, want, got ? "\"" : "",
                  got ? got : "nothing", got ? "\"" : "");
}

/* The names in a folder, sorted, joined by spaces. */
static const char *names_in(const char *folder)
{
    DIR *d = opendir(folder);
    ck_assert_msg(d != NULL, "opendir %s: %s", folder, strerror(errno));
    char *names[64];
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 && n < 64)
            names[n++] = tu_track(strdup(e->d_name));
    closedir(d);
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            char *t = names[j];
            names[j] = names[j - 1];
            names[j - 1] = t;
        }
    size_t len = 1;
    for (size_t i = 0; i < n; i++)
        len += strlen(names[i]) + 1;
    char *joined = tu_track_malloc(len);
    for (size_t i = 0; i < n; i++) {
        strcat(joined, i ? " " : "");
        strcat(joined, names[i]);
    }
    return joined;
}

static void write_text(atomic_file *t, const char *text)
{
    ck_assert_ptr_nonnull(t->fp);
    ck_assert_int_eq(fputs(text, t->fp) >= 0, 1);
}

/* Prepare, start, write and finish one file of a group. */
static void stage(atomic_file *t, const char *path, const char *text)
{
    char err[256] = "";
    ck_assert_msg(atomic_prepare(t, path, err, sizeof err) == 0, "%s: %s", path, err);
    ck_assert_msg(atomic_start(t, err, sizeof err) == 0, "%s: %s", path, err);
    write_text(t, text);
    ck_assert_msg(atomic_finish(t, err, sizeof err) == 0, "%s: %s", path, err);
}

/* ---------------------------------------------------------------------------------------------- */
/* Temporary names                                                                                 */
/* ---------------------------------------------------------------------------------------------- */

/* The temporary sits beside the file as NAME.clattn-<12 random characters>.tmp, a regular file made
 * just now, never the same name twice. */
START_TEST(test_temporary_names)
{
    char err[256] = "";
    atomic_file a, b;
    const char *path = at("o.npy");
    ck_assert_msg(atomic_prepare(&a, path, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(atomic_prepare(&b, path, err, sizeof err) == 0, "%s", err);
    const char *prefix = at("o.npy.clattn-");
    for (int i = 0; i < 2; i++) {
        const char *tmp = (i ? &b : &a)->tmp_path;
        ck_assert_msg(strncmp(tmp, prefix, strlen(prefix)) == 0 && strlen(tmp) == strlen(prefix) + 12 + 4 &&
                          strcmp(tmp + strlen(tmp) - 4, ".tmp") == 0,
                      "temporary name %s", tmp);
        struct stat st;
        ck_assert_int_eq(lstat(tmp, &st), 0);
        ck_assert_msg(S_ISREG(st.st_mode) && st.st_size == 0, "%s is not a new regular file", tmp);
    }
    ck_assert_str_ne(a.tmp_path, b.tmp_path);
    atomic_abort(&a);
    atomic_abort(&b);
    ck_assert_str_eq(names_in(dir), "");
}
END_TEST

/* Links and files planted at the names earlier versions used (NAME.clattn-PID.tmp, then the staged
 * file's own NAME.tmp-PID-0) are neither followed nor written, and stay as they were. */
START_TEST(test_planted_names_left_alone)
{
    const char *victim = at("victim.txt"), *path = at("o.npy");
    tu_write_file(victim, "victim", 6);
    char name[64];
    snprintf(name, sizeof name, "o.npy.clattn-%ld.tmp", (long)getpid());
    const char *link1 = at(name);
    ck_assert_int_eq(symlink(victim, link1), 0);
    snprintf(name, sizeof name, "o.npy.tmp-%ld-0", (long)getpid());
    const char *planted = at(name);
    tu_write_file(planted, "planted", 7);

    const float x[3] = {1, 2, 3};
    const size_t shape[1] = {3};
    char err[256] = "";
    ck_assert_msg(npy_save_f32(path, x, 1, shape, err, sizeof err) == 0, "%s", err);
    expect_content(victim, "victim");
    expect_content(planted, "planted");
    struct stat st;
    ck_assert_int_eq(lstat(link1, &st), 0);
    ck_assert(S_ISLNK(st.st_mode));
    ck_assert_int_eq(lstat(path, &st), 0);
    ck_assert_msg(S_ISREG(st.st_mode) && st.st_size == 128 + 12, "o.npy: mode %o, %lld bytes", (unsigned)st.st_mode,
                  (long long)st.st_size);
    ck_assert_uint_eq(tu_dir_count(dir), 4); /* victim, the two planted names, o.npy: no temporary left */
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* Destinations that are not regular files                                                         */
/* ---------------------------------------------------------------------------------------------- */

START_TEST(test_folder_refused)
{
    char err[256] = "";
    atomic_file t;
    const char *sub = at("sub");
    ck_assert_int_eq(mkdir(sub, 0700), 0);
    ck_assert_int_ne(atomic_prepare(&t, sub, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "is a folder") != NULL, "%s", err);
    ck_assert_str_eq(names_in(dir), "sub");
    ck_assert_str_eq(names_in(sub), "");
}
END_TEST

/* A character device (a copy of /dev/null made with mknod where allowed, as root; /dev/null itself
 * through a symbolic link otherwise) is written through and stays a device. */
START_TEST(test_device_written_through)
{
    const char *dev = at("fakenull"), *link = at("null.npy");
    const bool own = mknod(dev, S_IFCHR | 0666, makedev(1, 3)) == 0;
    if (!own)
        ck_assert_int_eq(symlink("/dev/null", link), 0);
    const char *path = own ? dev : link;
    const float x[2] = {1, 2};
    const size_t shape[1] = {2};
    char err[256] = "";
    ck_assert_msg(npy_save_f32(path, x, 1, shape, err, sizeof err) == 0, "%s", err);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_msg(S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3), "%s is no longer the null device", path);
    ck_assert_uint_eq(tu_dir_count(dir), 1); /* no temporary beside it */
}
END_TEST

typedef struct fifo_reader {
    const char *path;
    char got[4096];
    size_t len;
} fifo_reader;

static void *read_fifo(void *arg)
{
    fifo_reader *r = arg;
    const int fd = open(r->path, O_RDONLY); /* waits for the writer (the case's timeout ends a wait forever) */
    if (fd < 0)
        return NULL;
    for (ssize_t n; r->len < sizeof r->got && (n = read(fd, r->got + r->len, sizeof r->got - r->len)) > 0;)
        r->len += (size_t)n;
    close(fd);
    return NULL;
}

/* A FIFO is written through, as it comes, to its reader, and stays a FIFO; its group's staged file is
 * placed beside it as usual. */
START_TEST(test_fifo_written_through)
{
    fifo_reader r = {at("ff"), "", 0};
    ck_assert_int_eq(mkfifo(r.path, 0600), 0);
    pthread_t reader;
    ck_assert_int_eq(pthread_create(&reader, NULL, read_fifo, &r), 0);
    atomic_file group[2];
    stage(&group[0], at("plain.txt"), "beside");
    stage(&group[1], r.path, "through the fifo");
    ck_assert(group[1].stream && !group[1].tmp_path);
    char err[256] = "";
    ck_assert_msg(atomic_commit_all(group, 2, err, sizeof err, NULL) == 0, "%s", err);
    pthread_join(reader, NULL);
    ck_assert_uint_eq(r.len, strlen("through the fifo"));
    ck_assert(memcmp(r.got, "through the fifo", r.len) == 0);
    struct stat st;
    ck_assert_int_eq(lstat(r.path, &st), 0);
    ck_assert(S_ISFIFO(st.st_mode));
    expect_content(at("plain.txt"), "beside");
    ck_assert_str_eq(names_in(dir), "ff plain.txt");
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* Groups: all or nothing                                                                          */
/* ---------------------------------------------------------------------------------------------- */

/* The third file's rename fails after the first two were placed (its folder, with its temporary, went
 * away after the checks would have seen anything): the first, which existed, has its old content back,
 * the second, new, is gone, and nothing is left beside them. */
START_TEST(test_group_undone_when_a_rename_fails)
{
    const char *keep = at("keep"), *gone = at("gone");
    ck_assert_int_eq(mkdir(keep, 0700), 0);
    ck_assert_int_eq(mkdir(gone, 0700), 0);
    const char *old = at("keep/old.npy"), *fresh = at("keep/new.npy"), *lost = at("gone/last.npy");
    tu_write_file(old, "old content", 11);
    ck_assert_int_eq(chmod(old, 0640), 0);
    atomic_file group[3];
    stage(&group[0], old, "new content for old");
    stage(&group[1], fresh, "new file");
    stage(&group[2], lost, "never placed");
    tu_rm_rf(gone);
    char err[256] = "";
    size_t failed = 99;
    ck_assert_int_ne(atomic_commit_all(group, 3, err, sizeof err, &failed), 0);
    ck_assert_uint_eq(failed, 2);
    ck_assert_msg(strstr(err, "cannot rename the finished file into place") != NULL, "%s", err);
    expect_content(old, "old content");
    struct stat st;
    ck_assert_int_eq(stat(old, &st), 0);
    ck_assert_uint_eq(st.st_mode & 0777, 0640);
    ck_assert_str_eq(names_in(keep), "old.npy");
}
END_TEST

/* A destination that became a folder after it was prepared is found before the first rename: nothing
 * is placed at all. */
START_TEST(test_group_checked_before_the_first_rename)
{
    const char *first = at("first.npy"), *second = at("second.npy");
    tu_write_file(first, "first", 5);
    atomic_file group[2];
    stage(&group[0], first, "replaced");
    stage(&group[1], second, "new");
    ck_assert_int_eq(mkdir(second, 0700), 0);
    char err[256] = "";
    size_t failed = 99;
    ck_assert_int_ne(atomic_commit_all(group, 2, err, sizeof err, &failed), 0);
    ck_assert_uint_eq(failed, 1);
    ck_assert_msg(strstr(err, "is a folder") != NULL, "%s", err);
    expect_content(first, "first");
    ck_assert_str_eq(names_in(dir), "first.npy second.npy");
}
END_TEST

/* Placed together: every file there, the replaced one keeping its permissions, no kept copy left. */
START_TEST(test_group_placed)
{
    const char *a = at("a.npy"), *b = at("b.npy");
    tu_write_file(a, "old", 3);
    ck_assert_int_eq(chmod(a, 0604), 0);
    atomic_file group[2];
    stage(&group[0], a, "A");
    stage(&group[1], b, "B");
    char err[256] = "";
    ck_assert_msg(atomic_commit_all(group, 2, err, sizeof err, NULL) == 0, "%s", err);
    expect_content(a, "A");
    expect_content(b, "B");
    struct stat st;
    ck_assert_int_eq(stat(a, &st), 0);
    ck_assert_uint_eq(st.st_mode & 0777, 0604);
    ck_assert_str_eq(names_in(dir), "a.npy b.npy");
}
END_TEST

/* Given up after it was written: the file there keeps its content, the temporary goes. */
START_TEST(test_abort_leaves_the_file)
{
    const char *a = at("a.npy");
    tu_write_file(a, "before", 6);
    atomic_file t;
    stage(&t, a, "after");
    atomic_abort(&t);
    expect_content(a, "before");
    ck_assert_str_eq(names_in(dir), "a.npy");
}
END_TEST

static Suite *atomic_file_suite(void)
{
    Suite *s = suite_create("atomic_file");
    TCase *tc = tcase_create("names");
    tcase_add_checked_fixture(tc, make_dir, tu_sys_teardown);
    tcase_add_test(tc, test_temporary_names);
    tcase_add_test(tc, test_planted_names_left_alone);
    suite_add_tcase(s, tc);

    tc = tcase_create("destinations");
    tcase_add_checked_fixture(tc, make_dir, tu_sys_teardown);
    tcase_set_timeout(tc, CASE_TIMEOUT_S);
    tcase_add_test(tc, test_folder_refused);
    tcase_add_test(tc, test_device_written_through);
    tcase_add_test(tc, test_fifo_written_through);
    suite_add_tcase(s, tc);

    tc = tcase_create("groups");
    tcase_add_checked_fixture(tc, make_dir, tu_sys_teardown);
    tcase_add_test(tc, test_group_undone_when_a_rename_fails);
    tcase_add_test(tc, test_group_checked_before_the_first_rename);
    tcase_add_test(tc, test_group_placed);
    tcase_add_test(tc, test_abort_leaves_the_file);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(atomic_file_suite());
    srunner_run_all(sr, CK_NORMAL);
    const int rc = tu_srunner_exit(sr); /* (no check run is a failure too) */
    srunner_free(sr);
    return rc;
}
