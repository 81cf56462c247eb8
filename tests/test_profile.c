/*
 * Kernel profiling (options.profile, clattn_profile_read): every kind of kernel a call runs is
 * reported with its launches and device time, the log starts afresh after each read, host time
 * between calls is never counted as device time, and bad use gets its status without writing.
 */
#define _POSIX_C_SOURCE 200809L
#include "test_util.h"

#include <string.h>
#include <time.h>

typedef struct profile {
    size_t count;
    clattn_profile_entry e[CLATTN_PROFILE_MAX_ENTRIES];
} profile;

static profile read_profile(clattn_context *ctx)
{
    profile p;
    memset(&p, 0, sizeof p);
    clattn_status st = clattn_profile_read(ctx, p.e, CLATTN_PROFILE_MAX_ENTRIES, &p.count);
    TU_ASSERT_OK(st, ctx, "clattn_profile_read");
    return p;
}

static const clattn_profile_entry *find(const profile *p, const char *name)
{
    for (size_t i = 0; i < p->count; i++)
        if (strcmp(p->e[i].name, name) == 0)
            return &p->e[i];
    return NULL;
}

static cl_ulong total_ns(const profile *p)
{
    cl_ulong ns = 0;
    for (size_t i = 0; i < p->count; i++)
        ns += p->e[i].device_ns;
    return ns;
}

/* Each entry named, each kind once, each with a launch and some device time. */
static void check_entries(const profile *p, const char *what)
{
    for (size_t i = 0; i < p->count; i++) {
        ck_assert_msg(p->e[i].name && p->e[i].name[0], "%s: %s: entry %zu has no name", tu_label(), what, i);
        ck_assert_msg(p->e[i].launches > 0, "%s: %s: \"%s\" with no launch", tu_label(), what, p->e[i].name);
        ck_assert_msg(p->e[i].device_ns > 0, "%s: %s: \"%s\" ran in 0 ns", tu_label(), what, p->e[i].name);
        for (size_t j = 0; j < i; j++)
            ck_assert_msg(strcmp(p->e[i].name, p->e[j].name) != 0, "%s: %s: \"%s\" twice", tu_label(), what,
                          p->e[i].name);
    }
}

enum { B = 2, H = 3, L = 13, S = 29, D = 16, DM = 24 };

static void run_sdpa(clattn_context *ctx, clattn_algorithm alg, int weights)
{
    static float q[B * H * L * D], k[B * H * S * D], o[B * H * L * D], w[B * H * L * S];
    tu_fill_uniform(q, B * H * L * D, 1.0f, 1);
    tu_fill_uniform(k, B * H * S * D, 1.0f, 2);
    clattn_sdpa_desc d = tu_sdpa_desc(B, H, L, S, D, 0);
    d.algorithm = alg;
    TU_ASSERT_OK(clattn_sdpa_host(ctx, &d, q, k, k, NULL, o, weights ? w : NULL, NULL), ctx, "clattn_sdpa_host");
}

static void run_layer(clattn_context *ctx)
{
    static float x[B * L * DM], w[DM * DM], bias[DM], y[B * L * DM];
    tu_fill_uniform(x, B * L * DM, 1.0f, 3);
    tu_fill_uniform(w, DM * DM, 0.2f, 4);
    tu_fill_uniform(bias, DM, 0.2f, 5);
    clattn_mha_desc md = CLATTN_MHA_DESC_INIT;
    md.batch = B;
    md.q_len = L;
    md.model_dim = DM;
    md.heads = H;
    md.qk_dim = DM / H;
    md.algorithm = CLATTN_ALGORITHM_FUSED;
    clattn_mha_host_weights hw = CLATTN_MHA_HOST_WEIGHTS_INIT;
    hw.w_q = hw.w_k = hw.w_v = hw.w_o = w;
    hw.b_q = bias;
    TU_ASSERT_OK(clattn_mha_host(ctx, &md, x, NULL, &hw, NULL, y, NULL), ctx, "clattn_mha_host");
}

/* Each path reports its own kernels, one launch per call for the fused kernel; reading resets. */
START_TEST(test_kernels_per_path)
{
    const size_t dev = TU_DEVICE(_i);
    tu_set_label("profile on %s", tu_dev_spec[dev]);
    clattn_context *ctx = tu_context_new_profiling(dev);

    run_sdpa(ctx, CLATTN_ALGORITHM_FUSED, 0);
    run_sdpa(ctx, CLATTN_ALGORITHM_FUSED, 0);
    profile p = read_profile(ctx);
    check_entries(&p, "two fused calls");
    const clattn_profile_entry *fused = find(&p, "fused attention");
    ck_assert_msg(fused != NULL, "%s: two fused calls report no \"fused attention\"", tu_label());
    ck_assert_msg(fused->launches == 2, "%s: two fused calls: %llu launches", tu_label(),
                  (unsigned long long)fused->launches);

    ck_assert_msg(read_profile(ctx).count == 0, "%s: a second read without a call is not empty", tu_label());

    run_sdpa(ctx, CLATTN_ALGORITHM_STAGED, 1);
    p = read_profile(ctx);
    check_entries(&p, "a staged call");
    static const char *const staged[] = {"score", "softmax", "weighted-sum"};
    for (size_t i = 0; i < 3; i++)
        ck_assert_msg(find(&p, staged[i]) != NULL, "%s: a staged call reports no \"%s\"", tu_label(), staged[i]);
    ck_assert_msg(find(&p, "fused attention") == NULL, "%s: the fused kernel is counted again after a read",
                  tu_label());

    run_layer(ctx);
    p = read_profile(ctx);
    check_entries(&p, "a layer");
    /* clattn's GEMM kernel or CLBlast's, whichever the device uses (test_gemm checks which) */
    const clattn_profile_entry *gemm = find(&p, "projection GEMM (clattn)");
    if (!gemm)
        gemm = find(&p, "projection GEMM (CLBlast)");
    ck_assert_msg(gemm != NULL, "%s: a layer reports no projection", tu_label());
    ck_assert_msg(gemm->launches == 4, "%s: a layer with W_O: %llu projections, expected 4", tu_label(),
                  (unsigned long long)gemm->launches);
    clattn_context_free(ctx);
}
END_TEST

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Host time between calls is not device time: two calls 200 ms apart report at most the wall time
 * of the two calls themselves (the kernels run inside them), never the pause. An accounting check,
 * not a speed check: it holds however slow the machine is. */
START_TEST(test_host_pause_not_counted)
{
    const size_t dev = TU_DEVICE(_i);
    tu_set_label("profile, a pause between calls, on %s", tu_dev_spec[dev]);
    clattn_context *ctx = tu_context_new_profiling(dev);
    run_sdpa(ctx, CLATTN_ALGORITHM_FUSED, 0); /* builds the kernel */
    (void)read_profile(ctx);
    double inside = 0;
    for (int call = 0; call < 2; call++) {
        double t0 = now_seconds();
        run_sdpa(ctx, CLATTN_ALGORITHM_FUSED, 0);
        TU_ASSERT_OK(clattn_finish(ctx), ctx, "clattn_finish");
        inside += now_seconds() - t0;
        if (call == 0) {
            struct timespec pause = {0, 200 * 1000 * 1000};
            nanosleep(&pause, NULL);
        }
    }
    profile p = read_profile(ctx);
    const double device = (double)total_ns(&p) * 1e-9;
    ck_assert_msg(device > 0 && device <= inside + 1e-3,
                  "%s: %.6f s of device time for calls that took %.6f s (a 0.2 s pause between them)", tu_label(),
                  device, inside);
    clattn_context_free(ctx);
}
END_TEST

/* Bad use: its status, *count 0 or the size needed, and nothing reset. */
START_TEST(test_bad_use)
{
    const size_t dev = TU_DEVICE(_i);
    tu_set_label("profile misuse on %s", tu_dev_spec[dev]);
    size_t count = 99;
    clattn_profile_entry e[CLATTN_PROFILE_MAX_ENTRIES];

    ck_assert_int_eq(clattn_profile_read(NULL, e, CLATTN_PROFILE_MAX_ENTRIES, &count), CLATTN_ERROR_NULL_ARGUMENT);
    /* a context without options.profile */
    ck_assert_int_eq(clattn_profile_read(tu_ctx[dev], e, CLATTN_PROFILE_MAX_ENTRIES, &count),
                     CLATTN_ERROR_INVALID_VALUE);
    ck_assert_uint_eq(count, 0);
    ck_assert_msg(strstr(clattn_last_error(tu_ctx[dev]), "options.profile") != NULL, "detail: %s",
                  clattn_last_error(tu_ctx[dev]));

    clattn_context *ctx = tu_context_new_profiling(dev);
    ck_assert_int_eq(clattn_profile_read(ctx, e, CLATTN_PROFILE_MAX_ENTRIES, NULL), CLATTN_ERROR_NULL_ARGUMENT);
    ck_assert_int_eq(clattn_profile_read(ctx, NULL, 2, &count), CLATTN_ERROR_NULL_ARGUMENT);
    run_sdpa(ctx, CLATTN_ALGORITHM_STAGED, 1); /* three kinds */
    memset(e, 0, sizeof e);
    ck_assert_int_eq(clattn_profile_read(ctx, e, 2, &count), CLATTN_ERROR_BUFFER_TOO_SMALL);
    ck_assert_uint_eq(count, 3);
    ck_assert_msg(e[0].name == NULL && e[1].name == NULL, "entries written by a failed read");
    profile p = read_profile(ctx); /* nothing was reset */
    ck_assert_uint_eq(p.count, 3);
    clattn_context_free(ctx);

    /* an application's queue without CL_QUEUE_PROFILING_ENABLE cannot profile */
    cl_int err;
    cl_context cl = clCreateContext(NULL, 1, &tu_dev[dev].device, NULL, NULL, &err);
    ck_assert_int_eq(err, CL_SUCCESS);
    cl_command_queue queue = clCreateCommandQueue(cl, tu_dev[dev].device, 0, &err);
    ck_assert_int_eq(err, CL_SUCCESS);
    clattn_context_options o = CLATTN_CONTEXT_OPTIONS_INIT;
    o.opencl_context = cl;
    o.opencl_device = tu_dev[dev].device;
    o.opencl_queue = queue;
    o.profile = 1;
    ctx = (clattn_context *)&count; /* must be set to NULL on failure */
    ck_assert_int_eq(clattn_context_create_with_options(&ctx, &o), CLATTN_ERROR_INVALID_VALUE);
    ck_assert_ptr_null(ctx);
    ck_assert_msg(strstr(clattn_last_error(NULL), "CL_QUEUE_PROFILING_ENABLE") != NULL, "detail: %s",
                  clattn_last_error(NULL));
    clReleaseCommandQueue(queue);
    clReleaseContext(cl);
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("profile");
    tu_add_loop(s, "kernels_per_path", test_kernels_per_path, tu_ndev);
    tu_add_loop(s, "host_pause_not_counted", test_host_pause_not_counted, tu_ndev);
    tu_add_loop(s, "bad_use", test_bad_use, tu_ndev);
    return s;
}

int main(void) { return tu_main(make_suite); }
