/*
 * Resource limits, run with PoCL limited to 1 GiB of device memory (POCL_MEMORY_LIMIT=1, set by
 * meson; max allocation then 256 MiB): requests that cannot fit fail with their own status before
 * allocating anything, score matrices larger than one allocation are worked through in chunks (holding
 * at least one head's scores and at most one allocation), and a context that hit a limit stays usable.
 *
 * PoCL does not refuse allocations beyond POCL_MEMORY_LIMIT (it only lowers the sizes it reports), so a
 * device filled by the caller never makes a staged call's temporary fail there. Built with the
 * failure-injection hooks (-Dfault_injection=true, as CI's sanitizer build is), the allocation of the
 * score temporary is made to fail instead, and the failure must be reported.
 */
#include "test_util.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#if CLATTN_TEST_FAULT_HOOKS
/* Test-only hooks of the library (src/base/fault.c). */
void clattn__fault_arm(unsigned long n);
unsigned long clattn__fault_points(void);
#endif

static cl_ulong device_ulong(size_t dev, cl_device_info what)
{
    cl_ulong v = 0;
    clGetDeviceInfo(tu_dev[dev].device, what, sizeof v, &v, NULL);
    return v;
}

/* A small correct call: the context works. */
static void assert_context_usable(clattn_context *ctx)
{
    clattn_masks m = CLATTN_MASKS_INIT;
    m.causal = CLATTN_CAUSAL_TOP_LEFT;
    clattn_sdpa_desc d = tu_sdpa_desc(1, 2, 9, 11, 5, 0);
    d.masks = &m;
    float q[2 * 9 * 5], k[2 * 11 * 5], v[2 * 11 * 5], out[2 * 9 * 5];
    double ref[2 * 9 * 5];
    tu_fill_uniform(q, 90, 1.0f, 1);
    tu_fill_uniform(k, 110, 1.0f, 2);
    tu_fill_uniform(v, 110, 1.0f, 3);
    ref_sdpa(&d, q, k, v, NULL, ref, NULL, NULL);
    clattn_status st = clattn_sdpa_host(ctx, &d, q, k, v, NULL, out, NULL, NULL);
    TU_ASSERT_OK(st, ctx, "the context is not usable after the limit");
    check_close_named("out after the limit", out, ref, 90, NULL);
}

/* Each tensor fits one allocation, all of them together do not fit the device: refused up front,
 * without touching the (small, dummy) host arrays. */
/* meson runs this suite with POCL_MEMORY_LIMIT=1: on PoCL's devices the small memory the test needs
 * must be in effect (a failure, not a quiet pass, when it is not). Other platforms ignore that
 * variable: there the case says so and does not run. */
static bool limit_applies(size_t dev, bool small_enough)
{
    if (strstr(tu_dev[dev].platform_name, "Portable Computing Language")) {
        ck_assert_msg(small_enough, "%s: POCL_MEMORY_LIMIT=1 is not in effect (meson test sets it)", tu_label());
        return true;
    }
    if (!small_enough)
        printf("note: %s: device memory too large for this case (POCL_MEMORY_LIMIT applies to PoCL only): "
               "not run\n", tu_label());
    return small_enough;
}

START_TEST(test_total_memory)
{
    const size_t dev = (size_t)_i;
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("tensors larger than device memory together on %s", tu_dev_spec[dev]);
    const cl_ulong global = device_ulong(dev, CL_DEVICE_GLOBAL_MEM_SIZE);
    const cl_ulong max_alloc = device_ulong(dev, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
    /* q, k, v, out and an (L,S) mask of n floats each, n·4 ≤ max_alloc, 5·n·4 > global */
    size_t side = 1;
    while ((side + 1) * (side + 1) * 4 <= max_alloc)
        side++;
    if (!limit_applies(dev, (cl_ulong)5 * side * side * 4 > global))
        return;
    clattn_masks m = CLATTN_MASKS_INIT;
    m.additive = CLATTN_MASK_L_S;
    clattn_sdpa_desc d = tu_sdpa_desc(1, 1, side, side, side, 0);
    d.masks = &m;
    float *dummy = tu_host_alloc(16, NULL), *out = tu_host_alloc(16, NULL);
    clattn_status st = clattn_sdpa_host(ctx, &d, dummy, dummy, dummy, dummy, out, NULL, NULL);
    ck_assert_msg(st == CLATTN_ERROR_EXCEEDS_DEVICE_LIMIT, "%s: expected EXCEEDS_DEVICE_LIMIT, got %s: %s",
                  tu_label(), clattn_status_string(st), clattn_last_error(ctx));
    ck_assert_msg(tu_host_all_sentinel(out, 16), "%s: output touched", tu_label());
    assert_context_usable(ctx);
}
END_TEST

/* Staged path without weights, scores of all heads (512 MiB) larger than one allocation (256 MiB):
 * worked through in chunks of heads, with the right answer. */
START_TEST(test_score_chunks)
{
    const size_t dev = (size_t)_i;
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("staged scores beyond one allocation, in chunks, on %s", tu_dev_spec[dev]);
    enum { H = 8, L = 4096, S = 4096, D = 2 };
    clattn_masks m = CLATTN_MASKS_INIT;
    m.causal = CLATTN_CAUSAL_BOTTOM_RIGHT;
    clattn_sdpa_desc d = tu_sdpa_desc(1, H, L, S, D, 0);
    d.masks = &m;
    d.algorithm = CLATTN_ALGORITHM_STAGED;
    const size_t nq = (size_t)H * L * D, nk = (size_t)H * S * D;
    float *q = tu_falloc(nq), *k = tu_falloc(nk), *v = tu_falloc(nk), *out = tu_host_alloc(nq, NULL);
    float *lse = tu_host_alloc((size_t)H * L, NULL);
    double *ref = tu_dalloc(nq), *ref_lse = tu_dalloc((size_t)H * L);
    tu_fill_uniform(q, nq, 1.0f, 11);
    tu_fill_uniform(k, nk, 1.0f, 12);
    tu_fill_uniform(v, nk, 1.0f, 13);
    ref_sdpa(&d, q, k, v, NULL, ref, NULL, ref_lse);
    clattn_context_release_temporaries(ctx); /* the peak below is this call's */
    clattn_status st = clattn_sdpa_host(ctx, &d, q, k, v, NULL, out, NULL, lse);
    TU_ASSERT_OK(st, ctx, "clattn_sdpa_host");
    tu_host_check_guard(out, nq, "out");
    check_close_named("out", out, ref, nq, NULL);
    check_close_named("lse", lse, ref_lse, (size_t)H * L, NULL);
    /* One head's scores (64 MiB) at a time would do, and the staged path cannot do with less: the softmax
     * reads a whole row of scores that the score kernel wrote to a temporary. The chunk must stay within
     * one allocation. */
    const size_t peak = clattn_context_temp_peak_bytes(ctx), head_scores = (size_t)L * S * sizeof(float);
    ck_assert_msg(peak >= head_scores, "%s: temporaries of %zu bytes reported, less than one head's scores (%zu)",
                  tu_label(), peak, head_scores);
    ck_assert_msg(peak <= device_ulong(dev, CL_DEVICE_MAX_MEM_ALLOC_SIZE),
                  "%s: temporaries of %zu bytes exceed one allocation", tu_label(), peak);
    clattn_context_release_temporaries(ctx);
}
END_TEST

/* A staged call whose score temporary cannot be allocated: the call fails with the OpenCL status and a
 * detail naming that temporary, writes no output, and the same call then succeeds on the same context.
 * With the failure-injection hooks the allocation is made to fail (the points of the call are walked
 * until the one allocating the scores); without them the caller's own buffers fill the device first,
 * which fails the allocation only on runtimes that enforce their memory size (not PoCL: there the call
 * succeeds, and its answer is checked). */
START_TEST(test_allocation_failure_is_reported)
{
    const size_t dev = (size_t)_i;
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("the score temporary not allocated on %s", tu_dev_spec[dev]);
    enum { H = 4, L = 2048, S = 2048, D = 2 };
    clattn_sdpa_desc d = tu_sdpa_desc(1, H, L, S, D, 0);
    d.algorithm = CLATTN_ALGORITHM_STAGED;
    const size_t nq = (size_t)H * L * D;
    float *q = tu_falloc(nq), *out = tu_host_alloc(nq, NULL);
    double *ref = tu_dalloc(nq);
    tu_fill_uniform(q, nq, 1.0f, 21);
    ref_sdpa(&d, q, q, q, NULL, ref, NULL, NULL);
    clattn_status st = CLATTN_SUCCESS;
    char detail[512] = "";
#if CLATTN_TEST_FAULT_HOOKS
    /* The call's points, counted on a run without failure; then each in turn until the scores' one. */
    clattn_context_release_temporaries(ctx);
    clattn__fault_arm(0);
    TU_ASSERT_OK(clattn_sdpa_host(ctx, &d, q, q, q, NULL, out, NULL, NULL), ctx, "the call without a failure");
    const unsigned long points = clattn__fault_points();
    for (size_t i = 0; i < nq + TU_GUARD; i++)
        out[i] = tu_sentinel();
    for (unsigned long n = 1; n <= points && !strstr(detail, "temporary scores"); n++) {
        clattn_context_release_temporaries(ctx); /* every call allocates its temporaries again */
        clattn__fault_arm(n);
        st = clattn_sdpa_host(ctx, &d, q, q, q, NULL, out, NULL, NULL);
        clattn__fault_arm(0);
        snprintf(detail, sizeof detail, "%s", clattn_last_error(ctx));
        ck_assert_msg(st != CLATTN_SUCCESS, "%s: point %lu of %lu made to fail, the call succeeded", tu_label(), n,
                      points);
        ck_assert_msg(tu_host_all_sentinel(out, nq), "%s: output written by a call failing at point %lu", tu_label(),
                      n);
    }
    ck_assert_msg(strstr(detail, "temporary scores") != NULL,
                  "%s: none of the call's %lu failure points failed the score temporary's allocation (last: %s)",
                  tu_label(), points, detail);
    ck_assert_msg(st == (clattn_status)CL_MEM_OBJECT_ALLOCATION_FAILURE,
                  "%s: the scores' allocation failed, the call returned %s: %s", tu_label(), clattn_status_string(st),
                  detail);
    printf("allocation failure reported: %s: %s\n", clattn_status_string(st), detail);
#else
    const cl_ulong max_alloc = device_ulong(dev, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
    const cl_ulong global = device_ulong(dev, CL_DEVICE_GLOBAL_MEM_SIZE);
    if (!limit_applies(dev, global <= ((cl_ulong)2 << 30)))
        return;
    cl_mem filler[8] = {0};
    size_t nfill = 0;
    cl_int err = CL_SUCCESS;
    while (nfill < 8 && (cl_ulong)(nfill + 1) * max_alloc <= global - max_alloc / 2) {
        filler[nfill] = clCreateBuffer(clattn_context_cl_context(ctx), CL_MEM_READ_WRITE, max_alloc, NULL, &err);
        if (err != CL_SUCCESS)
            break;
        /* touch it, so that lazy runtimes really hold the memory */
        const float zero = 0.0f;
        clEnqueueFillBuffer(clattn_context_queue(ctx), filler[nfill], &zero, sizeof zero, 0, max_alloc, 0, NULL, NULL);
        nfill++;
    }
    clFinish(clattn_context_queue(ctx));
    clattn_context_release_temporaries(ctx);
    st = clattn_sdpa_host(ctx, &d, q, q, q, NULL, out, NULL, NULL);
    snprintf(detail, sizeof detail, "%s", clattn_last_error(ctx));
    for (size_t i = 0; i < nfill; i++)
        clReleaseMemObject(filler[i]);
    if (st == CLATTN_SUCCESS) {
        printf("note: %s: the call found room (this runtime does not enforce its memory size); the failure is "
               "forced in the -Dfault_injection=true build\n", tu_label());
        check_close_named("out", out, ref, nq, NULL);
    } else {
        ck_assert_msg(detail[0] != '\0', "%s: %s without a detail", tu_label(), clattn_status_string(st));
        ck_assert_msg(tu_host_all_sentinel(out, nq), "%s: output written by a failed call", tu_label());
        printf("allocation failure reported: %s: %s\n", clattn_status_string(st), detail);
    }
#endif
    /* The context is usable: the same call again, with the right answer. */
    st = clattn_sdpa_host(ctx, &d, q, q, q, NULL, out, NULL, NULL);
    TU_ASSERT_OK(st, ctx, "the same call after the failure");
    check_close_named("out after the failure", out, ref, nq, NULL);
    assert_context_usable(ctx);
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("limits");
    TCase *tc = tu_tcase("limits");
    tcase_add_loop_test(tc, test_total_memory, 0, (int)tu_ndev);
    tcase_add_loop_test(tc, test_score_chunks, 0, (int)tu_ndev);
    tcase_add_loop_test(tc, test_allocation_failure_is_reported, 0, (int)tu_ndev);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_main(make_suite); }
