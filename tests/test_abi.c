/*
 * The public API's promises for applications, on every device:
 *  - extensible structs: struct_size checked for every struct the caller passes in (0 and too small
 *    rejected, an older layout read, a newer one accepted only with its unknown bytes zero), and a
 *    rejected call writes nothing;
 *  - the scale: 0 is a real scale (uniform weights), CLATTN_SCALE_DEFAULT is 1/sqrt(Dqk), ±inf rejected;
 *  - statuses that are not enumerators (OpenCL extension codes) are named;
 *  - context options set through the API override the environment, which is read once at creation.
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { B = 2, H = 2, L = 5, S = 7, D = 4 };
#define NQ (B * H * L * D)
#define NK (B * H * S * D)
#define NW (B * H * L * S)

typedef struct sdpa_io {
    float q[NQ], k[NK], v[NK], out[NQ], weights[NW];
} sdpa_io;

static void io_init(sdpa_io *io)
{
    tu_fill_uniform(io->q, NQ, 1.0f, 11);
    tu_fill_uniform(io->k, NK, 1.0f, 12);
    tu_fill_uniform(io->v, NK, 1.0f, 13);
    for (size_t i = 0; i < NQ; i++)
        io->out[i] = tu_sentinel();
    for (size_t i = 0; i < NW; i++)
        io->weights[i] = tu_sentinel();
}

static clattn_sdpa_desc small_desc(void)
{
    return tu_sdpa_desc(B, H, L, S, D, 0);
}

/* The call fails with `want`, names `needle` in its detail, and writes nothing. */
static void expect_rejected(clattn_context *ctx, clattn_status st, clattn_status want, const char *needle,
                            const sdpa_io *io)
{
    ck_assert_msg(st == want, "%s: got %s, want %s (%s)", tu_label(), clattn_status_string(st),
                  clattn_status_string(want), clattn_last_error(ctx));
    ck_assert_msg(strstr(clattn_last_error(ctx), needle) != NULL, "%s: detail \"%s\" does not name \"%s\"", tu_label(),
                  clattn_last_error(ctx), needle);
    if (io) {
        for (size_t i = 0; i < NQ; i++)
            ck_assert_msg(tu_is_sentinel(io->out[i]), "%s: out[%zu] was written", tu_label(), i);
    }
}

/* ---------------------------------------------------------------------------------------------- */
/* struct_size                                                                                     */
/* ---------------------------------------------------------------------------------------------- */

START_TEST(test_sdpa_desc_struct_size)
{
    clattn_context *ctx = tu_ctx[_i];
    tu_set_label("clattn_sdpa_desc.struct_size on %s", tu_dev_spec[_i]);
    static sdpa_io io;
    io_init(&io);
    clattn_sdpa_desc d = small_desc();

    d.struct_size = 0; /* not started from CLATTN_SDPA_DESC_INIT */
    expect_rejected(ctx, clattn_sdpa_host(ctx, &d, io.q, io.k, io.v, NULL, io.out, NULL, NULL),
                    CLATTN_ERROR_INVALID_VALUE, "CLATTN_SDPA_DESC_INIT", &io);
    d.struct_size = sizeof(size_t) + 1; /* smaller than any published layout */
    expect_rejected(ctx, clattn_sdpa_host(ctx, &d, io.q, io.k, io.v, NULL, io.out, NULL, NULL),
                    CLATTN_ERROR_INVALID_VALUE, "struct_size", &io);
    d.struct_size = (size_t)1 << 40; /* garbage: refused without reading the bytes it names */
    expect_rejected(ctx, clattn_sdpa_host(ctx, &d, io.q, io.k, io.v, NULL, io.out, NULL, NULL),
                    CLATTN_ERROR_INVALID_VALUE, "struct_size", &io);
    /* The 0.2.0 layout ended with `softcap` (then `reserved`, 0): what lies past it is never read. */
    d.struct_size = offsetof(clattn_sdpa_desc, softcap) + sizeof(float);
    d.kv_heads = 7; /* would not divide heads */
    TU_ASSERT_OK(clattn_sdpa_host(ctx, &d, io.q, io.k, io.v, NULL, io.out, NULL, NULL), ctx, "a 0.2.0 descriptor");
    io_init(&io);
    d.struct_size = sizeof d;
    d.kv_heads = 0;

    /* A program built against a newer header: a bigger struct whose extra fields are zero works;
     * one that sets an extra field is refused, naming the byte. */
    struct {
        clattn_sdpa_desc d;
        unsigned char newer[24];
    } big;
    memset(&big, 0, sizeof big);
    big.d = small_desc();
    big.d.struct_size = sizeof big;
    clattn_status st = clattn_sdpa_host(ctx, &big.d, io.q, io.k, io.v, NULL, io.out, NULL, NULL);
    TU_ASSERT_OK(st, ctx, "a newer descriptor with its new fields zero");
    io_init(&io);
    big.newer[5] = 1;
    expect_rejected(ctx, clattn_sdpa_host(ctx, &big.d, io.q, io.k, io.v, NULL, io.out, NULL, NULL),
                    CLATTN_ERROR_INVALID_VALUE, "newer header", &io);
}
END_TEST

START_TEST(test_masks_and_weights_struct_size)
{
    clattn_context *ctx = tu_ctx[_i];
    tu_set_label("clattn_masks / clattn_mha_*weights struct_size on %s", tu_dev_spec[_i]);
    static sdpa_io io;
    io_init(&io);
    clattn_sdpa_desc d = small_desc();
    clattn_masks m = CLATTN_MASKS_INIT;
    m.causal = CLATTN_CAUSAL_TOP_LEFT;
    d.masks = &m;
    clattn_status st = clattn_sdpa_host(ctx, &d, io.q, io.k, io.v, NULL, io.out, NULL, NULL);
    TU_ASSERT_OK(st, ctx, "masks from CLATTN_MASKS_INIT");
    io_init(&io);
    m.struct_size = 0;
    expect_rejected(ctx, clattn_sdpa_host(ctx, &d, io.q, io.k, io.v, NULL, io.out, NULL, NULL),
                    CLATTN_ERROR_INVALID_VALUE, "CLATTN_MASKS_INIT", &io);
    m.struct_size = sizeof m;
    m.reserved = 7;
    expect_rejected(ctx, clattn_sdpa_host(ctx, &d, io.q, io.k, io.v, NULL, io.out, NULL, NULL),
                    CLATTN_ERROR_INVALID_VALUE, "reserved", &io);

    /* The layer: descriptor and both weight structs. */
    enum { DM = 6 };
    float x[B * L * DM], wq[DM * H * D], out[B * L * H * D];
    tu_fill_uniform(x, B * L * DM, 1.0f, 21);
    tu_fill_uniform(wq, DM * H * D, 0.5f, 22);
    clattn_mha_desc md = CLATTN_MHA_DESC_INIT;
    md.batch = B;
    md.q_len = L;
    md.model_dim = DM;
    md.heads = H;
    md.qk_dim = D;
    clattn_mha_host_weights hw = CLATTN_MHA_HOST_WEIGHTS_INIT;
    hw.w_q = hw.w_k = hw.w_v = wq;
    st = clattn_mha_host(ctx, &md, x, NULL, &hw, NULL, out, NULL);
    TU_ASSERT_OK(st, ctx, "a layer from the INIT macros");
    hw.struct_size = 0;
    expect_rejected(ctx, clattn_mha_host(ctx, &md, x, NULL, &hw, NULL, out, NULL), CLATTN_ERROR_INVALID_VALUE,
                    "CLATTN_MHA_HOST_WEIGHTS_INIT", NULL);
    hw.struct_size = sizeof hw;
    md.struct_size = 0;
    expect_rejected(ctx, clattn_mha_host(ctx, &md, x, NULL, &hw, NULL, out, NULL), CLATTN_ERROR_INVALID_VALUE,
                    "CLATTN_MHA_DESC_INIT", NULL);
    md.struct_size = sizeof md;
    clattn_mha_weights dw = CLATTN_MHA_WEIGHTS_INIT;
    dw.struct_size = 3;
    cl_mem any = tu_dev_alloc(ctx, B * L * DM, x);
    expect_rejected(ctx, clattn_mha(ctx, &md, any, NULL, &dw, NULL, any, NULL), CLATTN_ERROR_INVALID_VALUE,
                    "CLATTN_MHA_WEIGHTS_INIT", NULL);
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* The scale                                                                                       */
/* ---------------------------------------------------------------------------------------------- */

/* Scale 0: every score is 0, so every weight is 1/S — on the fused and the staged path. */
START_TEST(test_scale_zero_is_uniform)
{
    const size_t dev = TU_DEVICE(_i), algo = TU_CASE(_i);
    clattn_context *ctx = tu_ctx[dev];
    static const clattn_algorithm algos[] = {CLATTN_ALGORITHM_STAGED, CLATTN_ALGORITHM_FUSED};
    tu_set_label("scale 0 (%s) on %s", algo ? "fused" : "staged", tu_dev_spec[dev]);
    static sdpa_io io;
    io_init(&io);
    clattn_sdpa_desc d = small_desc();
    d.scale = 0.0f;
    d.algorithm = algos[algo];
    clattn_status st = clattn_sdpa_host(ctx, &d, io.q, io.k, io.v, NULL, io.out, algo ? NULL : io.weights, NULL);
    TU_ASSERT_OK(st, ctx, "clattn_sdpa_host");
    /* The output is the mean of V's rows. */
    double *ref = tu_dalloc(NQ);
    for (size_t bh = 0; bh < B * H; bh++)
        for (size_t i = 0; i < L; i++)
            for (size_t t = 0; t < D; t++) {
                double sum = 0.0;
                for (size_t j = 0; j < S; j++)
                    sum += io.v[(bh * S + j) * D + t];
                ref[(bh * L + i) * D + t] = sum / S;
            }
    check_close_named("out", io.out, ref, NQ, NULL);
    if (!algo) {
        double *w = tu_dalloc(NW);
        for (size_t i = 0; i < NW; i++)
            w[i] = 1.0 / S;
        check_close_named("weights", io.weights, w, NW, NULL);
    }
}
END_TEST

START_TEST(test_scale_default_and_infinite)
{
    clattn_context *ctx = tu_ctx[_i];
    tu_set_label("scale default / inf on %s", tu_dev_spec[_i]);
    static sdpa_io io, explicit_io;
    io_init(&io);
    io_init(&explicit_io);
    clattn_sdpa_desc d = small_desc();
    ck_assert_msg(isnan(d.scale), "CLATTN_SDPA_DESC_INIT must set scale to CLATTN_SCALE_DEFAULT");
    clattn_status st = clattn_sdpa_host(ctx, &d, io.q, io.k, io.v, NULL, io.out, NULL, NULL);
    TU_ASSERT_OK(st, ctx, "default scale");
    d.scale = 1.0f / sqrtf((float)D);
    st = clattn_sdpa_host(ctx, &d, explicit_io.q, explicit_io.k, explicit_io.v, NULL, explicit_io.out, NULL, NULL);
    TU_ASSERT_OK(st, ctx, "explicit 1/sqrt(D)");
    for (size_t i = 0; i < NQ; i++)
        ck_assert_msg(fabsf(io.out[i] - explicit_io.out[i]) <= 1e-6f, "%s: default and 1/sqrt(D) differ at %zu",
                      tu_label(), i);
    const float infinities[] = {INFINITY, -INFINITY};
    for (size_t n = 0; n < 2; n++) {
        io_init(&io);
        d.scale = infinities[n];
        expect_rejected(ctx, clattn_sdpa_host(ctx, &d, io.q, io.k, io.v, NULL, io.out, NULL, NULL),
                        CLATTN_ERROR_INVALID_VALUE, "scale", &io);
    }
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* Statuses outside the enumerators                                                                */
/* ---------------------------------------------------------------------------------------------- */

START_TEST(test_status_beyond_enumerators)
{
    static const struct {
        int code;
        const char *name;
    } codes[] = {{-1001, "CL_PLATFORM_NOT_FOUND_KHR"}, {-1000, "CL_INVALID_GL_SHAREGROUP_REFERENCE_KHR"},
                 {-72, "CL_MAX_SIZE_RESTRICTION_EXCEEDED"}, {-69, "CL_INVALID_PIPE_SIZE"},
                 {-1057, "CL_DEVICE_PARTITION_FAILED_EXT"}};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        clattn_status st = (clattn_status)codes[i].code; /* in the enum's range by CLATTN_STATUS_RANGE_* */
        ck_assert_str_eq(clattn_status_string(st), codes[i].name);
        ck_assert_msg(strcmp(clattn_status_description(st), "unknown status code") != 0, "%s has no description",
                      codes[i].name);
    }
    ck_assert_str_eq(clattn_status_string((clattn_status)123456), "CLATTN_UNKNOWN_STATUS");
    ck_assert_str_eq(clattn_status_string((clattn_status)(-2147483647 - 1)), "CLATTN_UNKNOWN_STATUS");
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* Context options                                                                                 */
/* ---------------------------------------------------------------------------------------------- */

static const char *const option_env[] = {"CLATTN_CACHE", "XDG_CACHE_HOME", "CLATTN_KERNEL_DIR", "CLATTN_TILE",
                                         "CLATTN_DEVICE"};

/* One small SDPA call on a context made with `opts`. */
static void run_small(clattn_context *ctx)
{
    static sdpa_io io;
    io_init(&io);
    clattn_sdpa_desc d = small_desc();
    clattn_status st = clattn_sdpa_host(ctx, &d, io.q, io.k, io.v, NULL, io.out, NULL, NULL);
    TU_ASSERT_OK(st, ctx, "an SDPA call");
}

static clattn_context *create_with(const clattn_context_options *opts)
{
    clattn_context *ctx = NULL;
    clattn_status st = clattn_context_create_with_options(&ctx, opts);
    TU_ASSERT_OK(st, NULL, "clattn_context_create_with_options");
    return ctx;
}

START_TEST(test_options_cache)
{
    tu_set_label("options.cache and cache_dir on %s", tu_dev_spec[_i]);
    tu_env_save(option_env, sizeof option_env / sizeof option_env[0]);
    const char *env_dir = tu_scratch_dir("clattn-abi-env"), *api_dir = tu_scratch_dir("clattn-abi-api");
    setenv("XDG_CACHE_HOME", env_dir, 1);
    setenv("CLATTN_CACHE", "0", 1);

    /* The API's folder and CLATTN_CACHE_ON win over CLATTN_CACHE=0. */
    clattn_context_options opts = CLATTN_CONTEXT_OPTIONS_INIT;
    opts.device = tu_dev_spec[_i];
    opts.cache = CLATTN_CACHE_ON;
    opts.cache_dir = api_dir;
    clattn_context *ctx = create_with(&opts);
    /* The environment is read once, at creation: changing it afterwards changes nothing. */
    setenv("XDG_CACHE_HOME", "/nonexistent/clattn-never-read", 1);
    run_small(ctx);
    clattn_context_free(ctx);
    ck_assert_msg(tu_dir_count(api_dir) > 0, "%s: nothing was cached in options.cache_dir", tu_label());
    ck_assert_msg(tu_dir_count(env_dir) == 0, "%s: the environment's folder was used", tu_label());

    /* CLATTN_CACHE_OFF: nothing written even with a folder. */
    const char *off_dir = tu_scratch_dir("clattn-abi-off");
    opts.cache = CLATTN_CACHE_OFF;
    opts.cache_dir = off_dir;
    ctx = create_with(&opts);
    run_small(ctx);
    clattn_context_free(ctx);
    ck_assert_msg(tu_dir_count(off_dir) == 0, "%s: CLATTN_CACHE_OFF wrote a cache entry", tu_label());

    /* CLATTN_CACHE takes 0/off/false/no (and 1/on/true/yes); anything else warns and leaves it on. */
    const char *words_dir = tu_scratch_dir("clattn-abi-words");
    setenv("XDG_CACHE_HOME", words_dir, 1);
    clattn_context_options env_only = CLATTN_CONTEXT_OPTIONS_INIT;
    env_only.device = tu_dev_spec[_i];
    setenv("CLATTN_CACHE", "Off", 1);
    ctx = create_with(&env_only);
    run_small(ctx);
    clattn_context_free(ctx);
    ck_assert_msg(tu_dir_count(words_dir) == 0, "%s: CLATTN_CACHE=Off wrote a cache entry", tu_label());
    setenv("CLATTN_CACHE", "maybe", 1);
    ctx = create_with(&env_only);
    ck_assert_msg(strstr(clattn_last_warning(ctx), "CLATTN_CACHE") != NULL, "warning: %s", clattn_last_warning(ctx));
    run_small(ctx);
    clattn_context_free(ctx);
    ck_assert_msg(tu_dir_count(words_dir) > 0, "%s: CLATTN_CACHE=maybe turned the cache off", tu_label());

    /* Bad values are refused with the thread's detail, and no context. */
    opts.cache = (clattn_cache_mode)7;
    ctx = (clattn_context *)&opts; /* must be reset to NULL */
    ck_assert_int_eq(clattn_context_create_with_options(&ctx, &opts), CLATTN_ERROR_INVALID_VALUE);
    ck_assert_ptr_null(ctx);
    ck_assert_msg(strstr(clattn_last_error(NULL), "options.cache") != NULL, "detail: %s", clattn_last_error(NULL));
    opts.cache = CLATTN_CACHE_DEFAULT;
    opts.struct_size = 0;
    ck_assert_int_eq(clattn_context_create_with_options(&ctx, &opts), CLATTN_ERROR_INVALID_VALUE);
    ck_assert_msg(strstr(clattn_last_error(NULL), "CLATTN_CONTEXT_OPTIONS_INIT") != NULL, "detail: %s",
                  clattn_last_error(NULL));
}
END_TEST

START_TEST(test_options_kernel_dir_and_tile)
{
    tu_set_label("options.kernel_dir and tile on %s", tu_dev_spec[_i]);
    tu_env_save(option_env, sizeof option_env / sizeof option_env[0]);
    const char *empty = tu_scratch_dir("clattn-abi-kernels");
    clattn_context_options opts = CLATTN_CONTEXT_OPTIONS_INIT;
    opts.device = tu_dev_spec[_i];
    opts.cache = CLATTN_CACHE_OFF;

    /* A kernel folder without the kernels: the first compile says which file is missing. */
    opts.kernel_dir = empty;
    clattn_context *ctx = create_with(&opts);
    static sdpa_io io;
    io_init(&io);
    clattn_sdpa_desc d = small_desc();
    expect_rejected(ctx, clattn_sdpa_host(ctx, &d, io.q, io.k, io.v, NULL, io.out, NULL, NULL),
                    CLATTN_ERROR_KERNEL_SOURCE, "common.cl", &io);
    clattn_context_free(ctx);

    /* "" means the embedded kernels, whatever CLATTN_KERNEL_DIR says. */
    setenv("CLATTN_KERNEL_DIR", empty, 1);
    opts.kernel_dir = "";
    ctx = create_with(&opts);
    run_small(ctx);
    clattn_context_free(ctx);

    /* A malformed tile through the API is an error; through CLATTN_TILE, a warning. */
    unsetenv("CLATTN_KERNEL_DIR");
    opts.kernel_dir = NULL;
    opts.tile = "8by8";
    ctx = NULL;
    ck_assert_int_eq(clattn_context_create_with_options(&ctx, &opts), CLATTN_ERROR_INVALID_VALUE);
    ck_assert_ptr_null(ctx);
    ck_assert_msg(strstr(clattn_last_error(NULL), "options.tile") != NULL, "detail: %s", clattn_last_error(NULL));
    opts.tile = NULL;
    setenv("CLATTN_TILE", "8by8", 1);
    ctx = create_with(&opts);
    ck_assert_msg(strstr(clattn_last_warning(ctx), "CLATTN_TILE") != NULL, "warning: %s", clattn_last_warning(ctx));
    run_small(ctx);
    clattn_context_free(ctx);
    opts.tile = "8x16x1"; /* the API's tile wins over the environment's */
    ctx = create_with(&opts);
    ck_assert_str_eq(clattn_last_warning(ctx), "");
    run_small(ctx);
    clattn_context_free(ctx);
}
END_TEST

START_TEST(test_options_app_objects)
{
    tu_set_label("options.opencl_* on %s", tu_dev_spec[_i]);
    clattn_context_options opts = CLATTN_CONTEXT_OPTIONS_INIT;
    opts.opencl_context = clattn_context_cl_context(tu_ctx[_i]);
    clattn_context *ctx = NULL;
    ck_assert_int_eq(clattn_context_create_with_options(&ctx, &opts), CLATTN_ERROR_NULL_ARGUMENT);
    ck_assert_ptr_null(ctx);
    ck_assert_msg(strstr(clattn_last_error(NULL), "options.opencl_device") != NULL, "detail: %s",
                  clattn_last_error(NULL));
    opts.opencl_device = clattn_context_device(tu_ctx[_i]);
    opts.opencl_queue = clattn_context_queue(tu_ctx[_i]);
    ctx = create_with(&opts);
    ck_assert_ptr_eq(clattn_context_cl_context(ctx), opts.opencl_context);
    ck_assert_ptr_eq(clattn_context_queue(ctx), opts.opencl_queue);
    run_small(ctx);
    clattn_context_free(ctx);
    ctx = create_with(NULL); /* every default */
    clattn_context_free(ctx);
}
END_TEST

/* clattn_context_options of 0.2.0 ended with `tile`: such a struct is read with profile off; the
 * reserved member that 0.2.1 added after `profile` must be 0; one of 0.3 ends with `reserved`, so a
 * `gemm` beyond its size is never read; one of 0.7 ends with `gemm`, so a `tuning` beyond it neither. */
START_TEST(test_options_layouts)
{
    tu_set_label("clattn_context_options layouts on %s", tu_dev_spec[_i]);
    clattn_context_options opts = CLATTN_CONTEXT_OPTIONS_INIT;
    opts.device = tu_dev_spec[_i];
    opts.profile = 1;
    opts.struct_size = offsetof(clattn_context_options, tile) + sizeof(const char *); /* 0.2.0 */
    clattn_context *ctx = create_with(&opts);
    size_t count = 0;
    ck_assert_msg(clattn_profile_read(ctx, NULL, 0, &count) == CLATTN_ERROR_INVALID_VALUE,
                  "%s: a 0.2.0 options struct turned profiling on (its size excludes `profile`)", tu_label());
    clattn_context_free(ctx);
    opts.struct_size = sizeof opts;
    opts.reserved = 1;
    ctx = NULL;
    ck_assert_int_eq(clattn_context_create_with_options(&ctx, &opts), CLATTN_ERROR_INVALID_VALUE);
    ck_assert_ptr_null(ctx);
    opts.reserved = 0;
    ctx = create_with(&opts);
    TU_ASSERT_OK(clattn_profile_read(ctx, NULL, 0, &count), ctx, "clattn_profile_read on a profiling context");
    clattn_context_free(ctx);
    opts.gemm = "not a GEMM"; /* refused in a 0.4 struct ... */
    ctx = NULL;
    ck_assert_int_eq(clattn_context_create_with_options(&ctx, &opts), CLATTN_ERROR_INVALID_VALUE);
    opts.struct_size = offsetof(clattn_context_options, gemm); /* ... and unread in a 0.3 one */
    clattn_context_free(create_with(&opts));
    opts.gemm = NULL;
    opts.struct_size = sizeof opts;
    opts.tuning = "not=tuning"; /* refused in a 0.8 struct ... */
    ctx = NULL;
    ck_assert_int_eq(clattn_context_create_with_options(&ctx, &opts), CLATTN_ERROR_INVALID_VALUE);
    ck_assert_ptr_null(ctx);
    opts.struct_size = offsetof(clattn_context_options, tuning); /* ... and unread in a 0.7 one */
    clattn_context_free(create_with(&opts));
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("abi");
    tu_add_loop(s, "sdpa_desc_struct_size", test_sdpa_desc_struct_size, tu_ndev);
    tu_add_loop(s, "masks_and_weights_struct_size", test_masks_and_weights_struct_size, tu_ndev);
    tu_add_loop(s, "scale_zero_is_uniform", test_scale_zero_is_uniform, 2 * tu_ndev);
    tu_add_loop(s, "scale_default_and_infinite", test_scale_default_and_infinite, tu_ndev);
    tu_add_loop(s, "status_beyond_enumerators", test_status_beyond_enumerators, 1);
    tu_add_loop(s, "options_cache", test_options_cache, tu_ndev);
    tu_add_loop(s, "options_kernel_dir_and_tile", test_options_kernel_dir_and_tile, tu_ndev);
    tu_add_loop(s, "options_app_objects", test_options_app_objects, tu_ndev);
    tu_add_loop(s, "options_layouts", test_options_layouts, tu_ndev);
    return s;
}

int main(void) { return tu_main(make_suite); }
