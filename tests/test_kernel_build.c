/*
 * Kernel sources that cannot be read or do not compile, under CLATTN_KERNEL_DIR: a build failure of
 * every program (the call fails with the build log available), of the fused or the decode kernels only
 * (AUTO falls back to the staged path with a warning, the explicit algorithm fails), and a folder
 * without kernel files.
 * Each case saves CLATTN_KERNEL_DIR (and CLATTN_TUNING) and makes a scratch folder; tu_tcase's fixture
 * restores them.
 */
#define _POSIX_C_SOURCE 200809L

#include "test_util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------------------------------------------------------------------------------------- */
/* Kernel sources: unreadable, and failing to compile                                              */
/* ---------------------------------------------------------------------------------------------- */

static const char *const kernel_env[] = {"CLATTN_KERNEL_DIR", "CLATTN_TUNING"};

/* CLATTN_KERNEL_DIR = dir; its previous value is saved, and put back by tu_env_restore() (the test,
 * as soon as its contexts have read it) or else by tu_tcase's fixture. */
static void set_kernel_dir(const char *dir)
{
    tu_env_save(kernel_env, 2);
    ck_assert(setenv("CLATTN_KERNEL_DIR", dir, 1) == 0);
}

/* Query rows of fresh_sdpa_with: 3 (AUTO takes the decode kernels), or more than 8 (the fused one). */
static size_t fresh_q_len = 3;

/* A good small SDPA on a fresh context: returns its status; out stays sentinel on failure; `algorithm` picks
 * the path (AUTO: the decode or fused kernel by fresh_q_len, as no weights are asked for). */
static clattn_status fresh_sdpa_with(clattn_context *ctx, clattn_algorithm algorithm, float **out_host, size_t *no,
                                     double *ref)
{
    enum { MAX_L = 12 };
    ck_assert(fresh_q_len <= MAX_L);
    clattn_sdpa_desc d = tu_sdpa_desc(1, 1, fresh_q_len, 4, 2, 0);
    d.algorithm = algorithm;
    float q[2 * MAX_L], k[8], v[8];
    tu_fill_uniform(q, 2 * fresh_q_len, 1.0f, 1);
    tu_fill_uniform(k, 8, 1.0f, 2);
    tu_fill_uniform(v, 8, 1.0f, 3);
    if (ref)
        ref_sdpa(&d, q, k, v, NULL, ref, NULL, NULL);
    *no = 2 * fresh_q_len;
    *out_host = tu_host_alloc(*no, NULL);
    return clattn_sdpa_host(ctx, &d, q, k, v, NULL, *out_host, NULL, NULL);
}

static clattn_status fresh_sdpa(clattn_context *ctx, float **out_host, size_t *no)
{
    return fresh_sdpa_with(ctx, CLATTN_ALGORITHM_AUTO, out_host, no, NULL);
}

/* Runs fn with the OpenCL compiler's diagnostics (printed to stderr by some runtimes) silenced. */
static clattn_status quietly(clattn_status (*fn)(clattn_context *, clattn_algorithm, float **, size_t *, double *),
                             clattn_context *ctx, clattn_algorithm algorithm, float **out, size_t *no, double *ref)
{
    fflush(stderr);
    int saved_stderr = dup(2);
    int devnull = open("/dev/null", O_WRONLY);
    if (saved_stderr >= 0 && devnull >= 0)
        dup2(devnull, 2);
    clattn_status st = fn(ctx, algorithm, out, no, ref);
    fflush(stderr);
    if (saved_stderr >= 0 && devnull >= 0)
        dup2(saved_stderr, 2);
    if (saved_stderr >= 0)
        close(saved_stderr);
    if (devnull >= 0)
        close(devnull);
    return st;
}

/* common.cl is part of every program: nothing builds, the call fails with the log available. */
START_TEST(test_kernel_build_failure)
{
    size_t dev = (size_t)_i;
    tu_set_label("kernel build failure on %s", tu_dev_spec[dev]);
    const char *dir = tu_broken_kernel_dir("common.cl");
    set_kernel_dir(dir);
    clattn_context *ctx = tu_context_new(tu_dev_spec[dev]);
    float *out;
    size_t no;
    clattn_status st = quietly(fresh_sdpa_with, ctx, CLATTN_ALGORITHM_AUTO, &out, &no, NULL);
    tu_env_restore(); /* CLATTN_KERNEL_DIR as it was */
    const char *log = clattn_build_log(ctx);
    const char *err = clattn_last_error(ctx);
    int ok_status = st == CLATTN_ERROR_BUILD_FAILED;
    int ok_log = log != NULL && log[0] != '\0';
    int ok_err = err != NULL && err[0] != '\0';
    int untouched = tu_host_all_sentinel(out, no);
    char msg[512];
    snprintf(msg, sizeof msg, "status %s, build log %s, last error \"%.200s\"",
             clattn_status_string(st), ok_log ? "non-empty" : "EMPTY", err ? err : "(null)");
    clattn_context_free(ctx);
    ck_assert_msg(ok_status, "%s: expected CLATTN_ERROR_BUILD_FAILED: %s", tu_label(), msg);
    ck_assert_msg(ok_log, "%s: %s", tu_label(), msg);
    ck_assert_msg(ok_err, "%s: %s", tu_label(), msg);
    ck_assert_msg(untouched, "%s: out written by a failing call", tu_label());
}
END_TEST

/* Only a fused kernel (either shape: the tuning chooses which, on every device), or only the decode
 * kernels, fail to build: AUTO falls back to the staged path with a warning and the right answer; asking
 * for that kernel explicitly is an error. */
static const struct {
    const char *file;
    clattn_algorithm algorithm;
    size_t q_len;       /* what makes AUTO choose it */
    const char *tuning; /* CLATTN_TUNING: which shape of the fused kernel (NULL: as it is) */
} kernels[] = {{"flash_attention.cl", CLATTN_ALGORITHM_FUSED, 11, "fused=64x64x4x0x1"},
               {"flash_lanes.cl", CLATTN_ALGORITHM_FUSED, 11, "fused=4x16x2x4x2"},
               {"decode.cl", CLATTN_ALGORITHM_DECODE, 3, NULL}};

START_TEST(test_path_build_failure_falls_back)
{
    const size_t dev = TU_DEVICE(_i), which = TU_CASE(_i);
    tu_set_label("%s build failure on %s", kernels[which].file, tu_dev_spec[dev]);
    const char *dir = tu_broken_kernel_dir(kernels[which].file);
    set_kernel_dir(dir);
    if (kernels[which].tuning)
        ck_assert(setenv("CLATTN_TUNING", kernels[which].tuning, 1) == 0);
    fresh_q_len = kernels[which].q_len;
    clattn_context *ctx = tu_context_new(tu_dev_spec[dev]);
    float *out, *out2;
    size_t no;
    double ref[24];
    clattn_status auto_st = quietly(fresh_sdpa_with, ctx, CLATTN_ALGORITHM_AUTO, &out, &no, ref);
    char warning[512];
    snprintf(warning, sizeof warning, "%s", clattn_last_warning(ctx));
    clattn_status path_st = quietly(fresh_sdpa_with, ctx, kernels[which].algorithm, &out2, &no, NULL);
    tu_env_restore(); /* CLATTN_KERNEL_DIR as it was */
    fresh_q_len = 3;
    int untouched = tu_host_all_sentinel(out2, no);
    clattn_context_free(ctx);
    ck_assert_msg(auto_st == CLATTN_SUCCESS, "%s: AUTO should fall back to the staged path, got %s", tu_label(),
                  clattn_status_string(auto_st));
    ck_assert_msg(warning[0] != '\0', "%s: the fallback left no warning", tu_label());
    check_close_named("out (staged fallback)", out, ref, no, NULL);
    ck_assert_msg(path_st == CLATTN_ERROR_BUILD_FAILED, "%s: explicit algorithm: expected BUILD_FAILED, got %s",
                  tu_label(), clattn_status_string(path_st));
    ck_assert_msg(untouched, "%s: out written by a failing call", tu_label());
}
END_TEST

START_TEST(test_kernel_source_missing)
{
    size_t dev = (size_t)_i;
    tu_set_label("CLATTN_KERNEL_DIR without kernel files on %s", tu_dev_spec[dev]);
    set_kernel_dir(tu_scratch_dir("clattn-test")); /* exists, but empty */
    clattn_context *ctx = NULL;
    clattn_status st = clattn_context_create(&ctx, tu_dev_spec[dev]);
    clattn_status st2 = CLATTN_SUCCESS;
    float *out = NULL;
    size_t no = 0;
    if (st == CLATTN_SUCCESS)
        st2 = fresh_sdpa(ctx, &out, &no);
    tu_env_restore(); /* CLATTN_KERNEL_DIR as it was */
    if (st == CLATTN_SUCCESS) {
        const char *err = clattn_last_error(ctx);
        int ok_err = err && err[0];
        int untouched = tu_host_all_sentinel(out, no);
        clattn_context_free(ctx);
        ck_assert_msg(st2 == CLATTN_ERROR_KERNEL_SOURCE, "%s: first call returned %s", tu_label(),
                      clattn_status_string(st2));
        ck_assert_msg(ok_err, "%s: last_error empty", tu_label());
        ck_assert_msg(untouched, "%s: out written by a failing call", tu_label());
    } else {
        /* reading the sources at context creation is acceptable too */
        ck_assert_msg(st == CLATTN_ERROR_KERNEL_SOURCE, "%s: context_create returned %s",
                      tu_label(), clattn_status_string(st));
        ck_assert_str_ne(clattn_last_error(NULL), "");
    }
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */

static Suite *make_suite(void)
{
    Suite *s = suite_create("kernel_build");
    TCase *tc = tu_tcase("kernel_sources");
    tcase_add_loop_test(tc, test_kernel_build_failure, 0, (int)tu_ndev);
    tcase_add_loop_test(tc, test_path_build_failure_falls_back, 0, (int)(sizeof kernels / sizeof kernels[0] * tu_ndev));
    tcase_add_loop_test(tc, test_kernel_source_missing, 0, (int)tu_ndev);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_main(make_suite); }
