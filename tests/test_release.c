/*
 * A freed context releases everything it held, CLBlast's process-wide cache included: an application's
 * cl_context wrapped by clattn returns to the reference count the application holds, and a loop of
 * create / project / free keeps the process's resident memory flat.
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include "test_util.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { ROWS = 33, IN = 17, OUT = 24 };

/* One projection through CLBlast (the path that fills its cache) on ctx. */
static void project_once(clattn_context *ctx)
{
    static float x[ROWS * IN], w[IN * OUT];
    tu_fill_uniform(x, ROWS * IN, 1.0f, 1);
    tu_fill_uniform(w, IN * OUT, 1.0f, 2);
    cl_mem bx = tu_dev_alloc(ctx, ROWS * IN, x), bw = tu_dev_alloc(ctx, IN * OUT, w);
    cl_mem by = tu_dev_alloc(ctx, ROWS * OUT, NULL);
    clattn_status st = clattn_projection(ctx, ROWS, IN, OUT, bx, bw, NULL, by);
    TU_ASSERT_OK(st, ctx, "clattn_projection");
    tu_finish(ctx);
    tu_release_all(); /* the buffers, before the context goes */
}

START_TEST(test_context_reference_returns)
{
    tu_set_label("reference count of a wrapped cl_context on %s", tu_dev_spec[_i]);
    cl_device_id device = clattn_context_device(tu_ctx[_i]);
    cl_int err;
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)tu_dev[_i].platform, 0};
    cl_context own = clCreateContext(props, 1, &device, NULL, NULL, &err);
    ck_assert_int_eq(err, CL_SUCCESS);
    cl_command_queue queue = clCreateCommandQueue(own, device, 0, &err);
    ck_assert_int_eq(err, CL_SUCCESS);

    clattn_context *ctx = NULL;
    clattn_status st = clattn_context_create_from_cl(&ctx, own, device, queue);
    TU_ASSERT_OK(st, NULL, "clattn_context_create_from_cl");
    project_once(ctx);
    clattn_context_free(ctx);
    clReleaseCommandQueue(queue); /* a queue holds a reference to its context */

    /* A runtime may drop its own internal references (finished commands, released kernels) a moment
     * later, on its own threads: wait up to 5 s for the count to settle. A context kept alive by a
     * cache never gets there (it stayed at 3 before contexts released CLBlast's cache). */
    cl_uint refs = 0;
    for (int waited_ms = 0;; waited_ms += 10) {
        ck_assert_int_eq(clGetContextInfo(own, CL_CONTEXT_REFERENCE_COUNT, sizeof refs, &refs, NULL), CL_SUCCESS);
        if (refs <= 1 || waited_ms >= 5000)
            break;
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    }
    ck_assert_msg(refs == 1, "%s: after clattn_context_free the application's context has %u references, "
                  "want 1 (its own)", tu_label(), refs);
    clReleaseContext(own);
}
END_TEST

static size_t resident_bytes(void)
{
    unsigned long size = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    ck_assert_msg(f != NULL, "/proc/self/statm cannot be read");
    ck_assert_int_eq(fscanf(f, "%lu %lu", &size, &resident), 2);
    fclose(f);
    return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

/* 10 cycles to warm every cache, then 40 more: before contexts released CLBlast's cache, each cycle
 * kept about 1.5 MB (60 MB over 40); allow 16 MB of allocator noise. */
START_TEST(test_create_free_loop_is_flat)
{
    tu_set_label("create/project/free loop on %s", tu_dev_spec[_i]);
    size_t after_warmup = 0;
    for (int cycle = 0; cycle < 50; cycle++) {
        if (cycle == 10)
            after_warmup = resident_bytes();
        clattn_context *ctx = tu_context_new(tu_dev_spec[_i]);
        project_once(ctx);
        clattn_context_free(ctx);
    }
    const size_t end = resident_bytes();
    const double grown_mb = end > after_warmup ? (double)(end - after_warmup) / (1 << 20) : 0.0;
    printf("  %s: resident memory grew %.1f MB over 40 cycles\n", tu_label(), grown_mb);
    ck_assert_msg(grown_mb < 16.0, "%s: resident memory grew %.1f MB over 40 create/free cycles", tu_label(),
                  grown_mb);
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("release");
    tu_add_loop(s, "context_reference_returns", test_context_reference_returns, tu_ndev);
    tu_add_loop(s, "create_free_loop_is_flat", test_create_free_loop_is_flat, tu_ndev);
    return s;
}

int main(void) { return tu_main(make_suite); }
