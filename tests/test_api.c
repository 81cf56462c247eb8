/*
 * The library's non-numeric promises: status strings and descriptions, version, device selection
 * (null arguments, unknown specs, "P:D" / name / type specs, the CLATTN_DEVICE variable) and
 * contexts wrapping the application's OpenCL objects.
 */
#define _POSIX_C_SOURCE 200809L

#include "test_util.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------- */
/* Status strings, version                                                                         */
/* ---------------------------------------------------------------------------------------------- */

#define ST(x) {x, #x}
static const struct {
    clattn_status s;
    const char *name;
} all_status[] = {
    ST(CLATTN_SUCCESS),
    ST(CLATTN_ERROR_NULL_ARGUMENT),
    ST(CLATTN_ERROR_ZERO_SIZE),
    ST(CLATTN_ERROR_SIZE_OVERFLOW),
    ST(CLATTN_ERROR_BUFFER_TOO_SMALL),
    ST(CLATTN_ERROR_SHAPE_MISMATCH),
    ST(CLATTN_ERROR_INVALID_MASK),
    ST(CLATTN_ERROR_INVALID_VALUE),
    ST(CLATTN_ERROR_EXCEEDS_DEVICE_LIMIT),
    ST(CLATTN_ERROR_NO_PLATFORM),
    ST(CLATTN_ERROR_NO_DEVICE),
    ST(CLATTN_ERROR_DEVICE_NOT_FOUND),
    ST(CLATTN_ERROR_KERNEL_SOURCE),
    ST(CLATTN_ERROR_BUILD_FAILED),
    ST(CLATTN_ERROR_BLAS),
    ST(CLATTN_ERROR_OUT_OF_HOST_MEMORY),
    ST(CLATTN_ERROR_UNSUPPORTED_DEVICE),
    ST(CLATTN_ERROR_COMMUNICATION),
    ST(CLATTN_ERROR_TIMEOUT),
};
#define N_STATUS (sizeof all_status / sizeof all_status[0])

START_TEST(test_status_strings)
{
    for (size_t i = 0; i < N_STATUS; i++) {
        const char *s = clattn_status_string(all_status[i].s);
        ck_assert_msg(s != NULL, "status_string(%d) is NULL", (int)all_status[i].s);
        ck_assert_msg(strcmp(s, "CLATTN_UNKNOWN_STATUS") != 0, "status_string(%s) is unknown",
                      all_status[i].name);
        if (all_status[i].s != CLATTN_SUCCESS) /* 0 may also be spelled CL_SUCCESS */
            ck_assert_msg(strcmp(s, all_status[i].name) == 0, "status_string(%d) = \"%s\", want \"%s\"",
                          (int)all_status[i].s, s, all_status[i].name);
        for (size_t j = 0; j < i; j++)
            ck_assert_msg(strcmp(s, clattn_status_string(all_status[j].s)) != 0,
                          "status_string(%s) == status_string(%s) == \"%s\"", all_status[i].name,
                          all_status[j].name, s);
        const char *d = clattn_status_description(all_status[i].s);
        ck_assert_msg(d != NULL && d[0] != '\0', "status_description(%s) is empty",
                      all_status[i].name);
    }
    static const struct {
        cl_int code;
        const char *name;
    } cl_codes[] = {
        {CL_OUT_OF_RESOURCES, "CL_OUT_OF_RESOURCES"},
        {CL_MEM_OBJECT_ALLOCATION_FAILURE, "CL_MEM_OBJECT_ALLOCATION_FAILURE"},
        {CL_OUT_OF_HOST_MEMORY, "CL_OUT_OF_HOST_MEMORY"},
        {CL_BUILD_PROGRAM_FAILURE, "CL_BUILD_PROGRAM_FAILURE"},
        {CL_INVALID_VALUE, "CL_INVALID_VALUE"},
        {CL_INVALID_BUFFER_SIZE, "CL_INVALID_BUFFER_SIZE"},
        {CL_INVALID_KERNEL_ARGS, "CL_INVALID_KERNEL_ARGS"},
    };
    for (size_t i = 0; i < sizeof cl_codes / sizeof cl_codes[0]; i++) {
        const char *s = clattn_status_string((clattn_status)cl_codes[i].code);
        ck_assert_msg(s != NULL && strcmp(s, cl_codes[i].name) == 0,
                      "status_string(%d) = \"%s\", want \"%s\"", (int)cl_codes[i].code,
                      s ? s : "(null)", cl_codes[i].name);
        const char *d = clattn_status_description((clattn_status)cl_codes[i].code);
        ck_assert_msg(d != NULL && d[0] != '\0', "status_description(%s) is empty",
                      cl_codes[i].name);
    }
    static const int unknown[] = {1, 12345, -2999, -3100, -99999};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        const char *s = clattn_status_string((clattn_status)unknown[i]);
        ck_assert_msg(s != NULL && strcmp(s, "CLATTN_UNKNOWN_STATUS") == 0,
                      "status_string(%d) = \"%s\", want CLATTN_UNKNOWN_STATUS", unknown[i],
                      s ? s : "(null)");
        ck_assert(clattn_status_description((clattn_status)unknown[i]) != NULL);
    }
}
END_TEST

START_TEST(test_version)
{
    ck_assert_uint_eq(clattn_version_number(), CLATTN_VERSION_NUMBER);
    ck_assert_ptr_nonnull(clattn_version_string());
    ck_assert_str_eq(clattn_version_string(), CLATTN_VERSION_STRING);
    clattn_context_free(NULL); /* accepted */
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* Devices                                                                                         */
/* ---------------------------------------------------------------------------------------------- */

static int ci_contains(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (size_t i = 0; hay[i]; i++) {
        size_t k = 0;
        while (k < n && hay[i + k] &&
               tolower((unsigned char)hay[i + k]) == tolower((unsigned char)needle[k]))
            k++;
        if (k == n)
            return 1;
    }
    return n == 0;
}

static void fill_info_sentinel(clattn_device_info *info) { memset(info, 0xA5, sizeof *info); }

static int info_is_sentinel(const clattn_device_info *info)
{
    const unsigned char *p = (const unsigned char *)info;
    for (size_t i = 0; i < sizeof *info; i++)
        if (p[i] != 0xA5)
            return 0;
    return 1;
}


START_TEST(test_device_null_args)
{
    clattn_device_info info;
    clattn_status st = clattn_device_count(NULL);
    ck_assert_msg(st == CLATTN_ERROR_NULL_ARGUMENT, "device_count(NULL): %s", clattn_status_string(st));
    ck_assert_str_ne(clattn_last_error(NULL), "");
    st = clattn_device_get(0, NULL);
    ck_assert_msg(st == CLATTN_ERROR_NULL_ARGUMENT, "device_get(0, NULL): %s", clattn_status_string(st));
    ck_assert_str_ne(clattn_last_error(NULL), "");
    st = clattn_device_select("0:0", NULL);
    ck_assert_msg(st == CLATTN_ERROR_NULL_ARGUMENT, "device_select(\"0:0\", NULL): %s",
                  clattn_status_string(st));
    ck_assert_str_ne(clattn_last_error(NULL), "");

    size_t count = 0;
    ck_assert(clattn_device_count(&count) == CLATTN_SUCCESS);
    fill_info_sentinel(&info);
    st = clattn_device_get(count, &info);
    ck_assert_msg(st != CLATTN_SUCCESS, "device_get(count) succeeded");
    ck_assert_msg(info_is_sentinel(&info), "device_get(count) wrote its output");
    ck_assert_str_ne(clattn_last_error(NULL), "");
    st = clattn_device_get(SIZE_MAX, &info);
    ck_assert_msg(st != CLATTN_SUCCESS, "device_get(SIZE_MAX) succeeded");

    clattn_context *ctx = NULL;
    st = clattn_context_create(NULL, tu_dev_spec[0]);
    ck_assert_msg(st == CLATTN_ERROR_NULL_ARGUMENT, "context_create(NULL, ...): %s",
                  clattn_status_string(st));
    ck_assert_str_ne(clattn_last_error(NULL), "");
    st = clattn_context_create(&ctx, "99:99");
    ck_assert_msg(st == CLATTN_ERROR_DEVICE_NOT_FOUND, "context_create(\"99:99\"): %s",
                  clattn_status_string(st));
    ck_assert_msg(ctx == NULL, "context_create(\"99:99\") produced a context");
    ck_assert_str_ne(clattn_last_error(NULL), "");
}
END_TEST

START_TEST(test_device_not_found)
{
    static const char *const specs[] = {"99:99", "no-such-device-xyz", "0:99", "99:0"};
    const char *spec = specs[_i];
    tu_set_label("device_select(\"%s\")", spec);
    clattn_device_info info;
    fill_info_sentinel(&info);
    clattn_status st = clattn_device_select(spec, &info);
    ck_assert_msg(st == CLATTN_ERROR_DEVICE_NOT_FOUND, "%s: %s", tu_label(), clattn_status_string(st));
    ck_assert_msg(info_is_sentinel(&info), "%s wrote its output", tu_label());
    const char *e = clattn_last_error(NULL);
    ck_assert_msg(e && e[0], "%s: last_error empty", tu_label());
    /* the message lists the devices that do exist */
    ck_assert_msg(strstr(e, tu_dev[0].name) != NULL,
                  "%s: last_error does not list device \"%s\": \"%s\"", tu_label(), tu_dev[0].name, e);
}
END_TEST

START_TEST(test_device_select_specs)
{
    size_t dev = (size_t)_i;
    tu_set_label("device_select for device %s (%s)", tu_dev_spec[dev], tu_dev[dev].name);
    clattn_device_info info;
    memset(&info, 0, sizeof info);
    clattn_status st = clattn_device_select(tu_dev_spec[dev], &info);
    ck_assert_msg(st == CLATTN_SUCCESS, "%s: \"%s\": %s", tu_label(), tu_dev_spec[dev],
                  clattn_last_error(NULL));
    ck_assert_msg(info.device == tu_dev[dev].device && info.platform == tu_dev[dev].platform,
                  "%s: \"P:D\" picked another device", tu_label());
    ck_assert_uint_eq(info.platform_index, tu_dev[dev].platform_index);
    ck_assert_uint_eq(info.device_index, tu_dev[dev].device_index);
    ck_assert_str_eq(info.name, tu_dev[dev].name);

    /* case-insensitive name substring: the first alphanumeric run of ≥ 3 characters, upper-cased */
    char sub[64] = "";
    const char *nm = tu_dev[dev].name;
    for (size_t i = 0; nm[i] && !sub[0];) {
        size_t j = i;
        while (nm[j] && isalnum((unsigned char)nm[j]))
            j++;
        if (j - i >= 3) {
            size_t take = j - i < sizeof sub - 1 ? j - i : sizeof sub - 1;
            for (size_t t = 0; t < take; t++)
                sub[t] = (char)toupper((unsigned char)nm[i + t]);
            sub[take] = '\0';
        }
        i = nm[j] ? j + 1 : j;
    }
    if (sub[0] && strcmp(sub, "CPU") != 0 && strcmp(sub, "GPU") != 0) {
        size_t holders = 0; /* devices whose name holds the substring */
        for (size_t i = 0; i < tu_ndev; i++)
            holders += ci_contains(tu_dev[i].name, sub) != 0;
        memset(&info, 0, sizeof info);
        st = clattn_device_select(sub, &info);
        if (holders == 1) {
            ck_assert_msg(st == CLATTN_SUCCESS, "%s: substring \"%s\": %s", tu_label(), sub,
                          clattn_last_error(NULL));
            ck_assert_msg(ci_contains(info.name, sub), "%s: substring \"%s\" picked \"%s\"", tu_label(),
                          sub, info.name);
        } else { /* several devices fit: ambiguous, never the first of them */
            ck_assert_msg(st == CLATTN_ERROR_DEVICE_NOT_FOUND && strstr(clattn_last_error(NULL), "several"),
                          "%s: substring \"%s\" of %zu devices' names: %s: %s", tu_label(), sub, holders,
                          clattn_status_string(st), clattn_last_error(NULL));
        }
    }

    /* A bare number is not a name part ("1" is in "avx512"): refused with a hint to write P:D. */
    st = clattn_device_select("1", &info);
    ck_assert_msg(st == CLATTN_ERROR_DEVICE_NOT_FOUND && strstr(clattn_last_error(NULL), "bare number"),
                  "%s: spec \"1\": %s: %s", tu_label(), clattn_status_string(st), clattn_last_error(NULL));

    /* type keywords */
    const char *kw = NULL;
    cl_device_type want = 0;
    if (tu_dev[dev].type & CL_DEVICE_TYPE_CPU) {
        kw = "cpu";
        want = CL_DEVICE_TYPE_CPU;
    } else if (tu_dev[dev].type & CL_DEVICE_TYPE_GPU) {
        kw = "gpu";
        want = CL_DEVICE_TYPE_GPU;
    } else if (tu_dev[dev].type & CL_DEVICE_TYPE_ACCELERATOR) {
        kw = "accelerator";
        want = CL_DEVICE_TYPE_ACCELERATOR;
    }
    if (kw) {
        memset(&info, 0, sizeof info);
        st = clattn_device_select(kw, &info);
        ck_assert_msg(st == CLATTN_SUCCESS, "%s: \"%s\": %s", tu_label(), kw, clattn_last_error(NULL));
        ck_assert_msg(info.type & want, "%s: \"%s\" picked a device of type 0x%lx", tu_label(), kw,
                      (unsigned long)info.type);
    }

    /* the context on this device reports it */
    clattn_context *ctx = tu_ctx[dev];
    ck_assert_msg(clattn_context_device(ctx) == tu_dev[dev].device, "%s: context_device", tu_label());
    ck_assert_ptr_nonnull(clattn_context_cl_context(ctx));
    ck_assert_ptr_nonnull(clattn_context_queue(ctx));
    ck_assert_ptr_nonnull(clattn_context_device_name(ctx));
    ck_assert_str_eq(clattn_context_device_name(ctx), tu_dev[dev].name);
    ck_assert_ptr_nonnull(clattn_last_error(ctx));
    ck_assert_ptr_nonnull(clattn_build_log(ctx));
}
END_TEST

/* The CLATTN_DEVICE tests change the environment: tu_tcase's fixture restores it whatever happens. */
static const char *const device_env[] = {"CLATTN_DEVICE"};

START_TEST(test_device_env)
{
    tu_env_save(device_env, 1);
    tu_set_label("CLATTN_DEVICE");
    clattn_device_info info;
    clattn_status st;

    /* default without CLATTN_DEVICE: first GPU, else first device */
    unsetenv("CLATTN_DEVICE");
    size_t first_gpu = SIZE_MAX;
    for (size_t i = 0; i < tu_ndev && first_gpu == SIZE_MAX; i++)
        if (tu_dev[i].type & CL_DEVICE_TYPE_GPU)
            first_gpu = i;
    size_t count = 0;
    ck_assert(clattn_device_count(&count) == CLATTN_SUCCESS);
    if (count == tu_ndev) { /* all devices usable: the indices match */
        size_t want = first_gpu != SIZE_MAX ? first_gpu : 0;
        memset(&info, 0, sizeof info);
        st = clattn_device_select(NULL, &info);
        TU_ASSERT_OK(st, NULL, "select(NULL)");
        ck_assert_msg(info.device == tu_dev[want].device, "select(NULL) picked \"%s\", want \"%s\"",
                      info.name, tu_dev[want].name);
        memset(&info, 0, sizeof info);
        st = clattn_device_select("", &info);
        TU_ASSERT_OK(st, NULL, "select(\"\")");
        ck_assert_msg(info.device == tu_dev[want].device, "select(\"\") picked \"%s\"", info.name);
    }

    /* CLATTN_DEVICE=cpu picks a CPU device (when there is one) */
    int have_cpu = 0;
    for (size_t i = 0; i < tu_ndev; i++)
        if (tu_dev[i].type & CL_DEVICE_TYPE_CPU)
            have_cpu = 1;
    if (have_cpu) {
        setenv("CLATTN_DEVICE", "cpu", 1);
        memset(&info, 0, sizeof info);
        st = clattn_device_select(NULL, &info);
        TU_ASSERT_OK(st, NULL, "=cpu: select(NULL)");
        ck_assert_msg(info.type & CL_DEVICE_TYPE_CPU, "CLATTN_DEVICE=cpu picked \"%s\"", info.name);
        clattn_context *ctx = tu_context_new(NULL);
        cl_device_type type = 0;
        clGetDeviceInfo(clattn_context_device(ctx), CL_DEVICE_TYPE, sizeof type, &type, NULL);
        clattn_context_free(ctx);
        ck_assert_msg(type & CL_DEVICE_TYPE_CPU, "CLATTN_DEVICE=cpu context is not on a CPU");
    }

    /* an unusable value makes the default selection fail */
    setenv("CLATTN_DEVICE", "no-such-device-xyz", 1);
    clattn_context *ctx = NULL;
    st = clattn_context_create(&ctx, NULL);
    ck_assert_msg(st == CLATTN_ERROR_DEVICE_NOT_FOUND,
                  "CLATTN_DEVICE=no-such-device-xyz context_create(NULL): %s",
                  clattn_status_string(st));
    ck_assert_msg(ctx == NULL, "a context was produced");
    ck_assert_str_ne(clattn_last_error(NULL), "");
    st = clattn_context_create(&ctx, "");
    ck_assert_msg(st == CLATTN_ERROR_DEVICE_NOT_FOUND, "CLATTN_DEVICE bad, context_create(\"\"): %s",
                  clattn_status_string(st));
    fill_info_sentinel(&info);
    st = clattn_device_select(NULL, &info);
    ck_assert_msg(st == CLATTN_ERROR_DEVICE_NOT_FOUND, "CLATTN_DEVICE bad, select(NULL): %s",
                  clattn_status_string(st));
    ck_assert(info_is_sentinel(&info));

    /* an explicit spec wins over the variable */
    memset(&info, 0, sizeof info);
    st = clattn_device_select(tu_dev_spec[0], &info);
    TU_ASSERT_OK(st, NULL, "explicit spec with bad CLATTN_DEVICE");
    ck_assert(info.device == tu_dev[0].device);

    tu_env_restore();
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* Contexts from the application's OpenCL objects                                                  */
/* ---------------------------------------------------------------------------------------------- */

START_TEST(test_context_from_cl_null)
{
    size_t dev = (size_t)_i;
    tu_set_label("context_create_from_cl NULL arguments on %s", tu_dev_spec[dev]);
    cl_context c = clattn_context_cl_context(tu_ctx[dev]);
    cl_device_id d = clattn_context_device(tu_ctx[dev]);
    cl_command_queue q = clattn_context_queue(tu_ctx[dev]);
    clattn_context *ctx = NULL;
    clattn_status st = clattn_context_create_from_cl(NULL, c, d, q);
    ck_assert_msg(st == CLATTN_ERROR_NULL_ARGUMENT, "ctx out NULL: %s", clattn_status_string(st));
    ck_assert_str_ne(clattn_last_error(NULL), "");
    st = clattn_context_create_from_cl(&ctx, NULL, d, q);
    ck_assert_msg(st == CLATTN_ERROR_NULL_ARGUMENT, "context NULL: %s", clattn_status_string(st));
    ck_assert_str_ne(clattn_last_error(NULL), "");
    st = clattn_context_create_from_cl(&ctx, c, NULL, q);
    ck_assert_msg(st == CLATTN_ERROR_NULL_ARGUMENT, "device NULL: %s", clattn_status_string(st));
    st = clattn_context_create_from_cl(&ctx, c, d, NULL);
    ck_assert_msg(st == CLATTN_ERROR_NULL_ARGUMENT, "queue NULL: %s", clattn_status_string(st));
    ck_assert(ctx == NULL);
}
END_TEST

START_TEST(test_context_from_cl)
{
    size_t dev = (size_t)_i;
    tu_set_label("context_create_from_cl + sdpa on %s", tu_dev_spec[dev]);
    cl_int err;
    cl_device_id d = tu_dev[dev].device;
    cl_context c = clCreateContext(NULL, 1, &d, NULL, NULL, &err);
    ck_assert_msg(err == CL_SUCCESS, "clCreateContext: %d", (int)err);
    cl_command_queue q = clCreateCommandQueue(c, d, 0, &err);
    ck_assert_msg(err == CL_SUCCESS, "clCreateCommandQueue: %d", (int)err);

    clattn_context *ctx = NULL;
    clattn_status st = clattn_context_create_from_cl(&ctx, c, d, q);
    ck_assert_msg(st == CLATTN_SUCCESS && ctx, "%s: %s", clattn_status_string(st),
                  clattn_last_error(NULL));
    ck_assert(clattn_context_cl_context(ctx) == c);
    ck_assert(clattn_context_device(ctx) == d);
    ck_assert(clattn_context_queue(ctx) == q);

    /* the application releases its references at once: clattn's own keep the objects alive */
    clReleaseCommandQueue(q);
    clReleaseContext(c);

    clattn_masks masks = CLATTN_MASKS_INIT;
    masks.causal = CLATTN_CAUSAL_BOTTOM_RIGHT;
    clattn_sdpa_desc desc = tu_sdpa_desc(2, 3, 7, 61, 8, 0);
    desc.masks = &masks;
    size_t nq = 2 * 3 * 7 * 8, nk = 2 * 3 * 61 * 8, no = nq, np = 2 * 3 * 7 * 61;
    float *hq = tu_falloc(nq), *hk = tu_falloc(nk), *hv = tu_falloc(nk);
    tu_fill_uniform(hq, nq, 1.0f, 21);
    tu_fill_uniform(hk, nk, 1.0f, 22);
    tu_fill_uniform(hv, nk, 1.0f, 23);
    double *ro = tu_dalloc(no), *rp = tu_dalloc(np);
    ref_sdpa(&desc, hq, hk, hv, NULL, ro, rp, NULL);
    cl_mem mq = tu_dev_alloc(ctx, nq, hq), mk = tu_dev_alloc(ctx, nk, hk),
           mv = tu_dev_alloc(ctx, nk, hv), mo = tu_dev_alloc(ctx, no, NULL),
           mp = tu_dev_alloc(ctx, np, NULL);
    st = clattn_sdpa(ctx, &desc, mq, mk, mv, NULL, mo, mp, NULL);
    TU_ASSERT_OK(st, ctx, "sdpa");
    tu_finish(ctx);
    check_close_named("out", tu_dev_read_checked(ctx, mo, no, "out"), ro, no, NULL);
    check_close_named("weights", tu_dev_read_checked(ctx, mp, np, "weights"), rp, np, NULL);
    /* the same call through the host variant */
    float *ho = tu_host_alloc(no, NULL);
    st = clattn_sdpa_host(ctx, &desc, hq, hk, hv, NULL, ho, NULL, NULL);
    TU_ASSERT_OK(st, ctx, "sdpa_host");
    check_close_named("host out", ho, ro, no, NULL);
    tu_release_all(); /* the buffers hold the cl_context too */
    clattn_context_free(ctx);
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */

static Suite *make_suite(void)
{
    Suite *s = suite_create("api");
    TCase *tc = tu_tcase("status_version");
    tcase_add_test(tc, test_status_strings);
    tcase_add_test(tc, test_version);
    suite_add_tcase(s, tc);

    tc = tu_tcase("devices");
    tcase_add_test(tc, test_device_null_args);
    tcase_add_loop_test(tc, test_device_not_found, 0, 4);
    tcase_add_loop_test(tc, test_device_select_specs, 0, (int)tu_ndev);
    tcase_add_test(tc, test_device_env);
    suite_add_tcase(s, tc);

    tc = tu_tcase("context_from_cl");
    tcase_add_loop_test(tc, test_context_from_cl_null, 0, (int)tu_ndev);
    tcase_add_loop_test(tc, test_context_from_cl, 0, (int)tu_ndev);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_main(make_suite); }
