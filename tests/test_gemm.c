/*
 * The projection GEMMs and the choice between them, on every device:
 *  - shapes: clattn's own kernel (its default tile and tiles that leave edges in both directions) and
 *    CLBlast, with and without bias, on odd shapes, against the fp64 reference; the profile says which
 *    GEMM ran;
 *  - options.gemm and CLATTN_GEMM: the accepted spellings, and malformed values refused (API) or
 *    ignored with a warning (environment);
 *  - clattn_tune: every candidate measured, the fastest in use and recorded, and a later context on the
 *    same cache folder starting with it; options.gemm overriding the record;
 *  - the record damaged (ignored with a warning), made under another library version (never found) or
 *    rewritten by hand to another valid choice (followed);
 *  - clattn's kernel failing to build (a broken gemm.cl): CLBlast instead, with a warning.
 *
 * Record format (as every cache entry, native byte order): "CLATTNPB", u32 format (1), u32 key length,
 * key text, u64 payload length, u64 FNV-1a-64 of the payload, the payload ("clattn:6x3\n").
 */
#define _GNU_SOURCE /* memmem */
#include "test_util.h"

#include "hash.h" /* the cache's checksums */

#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* A context on device `dev` with these options (NULL fields: defaults), recording kernel times. */
static clattn_context *context_with(size_t dev, const char *gemm, const char *cache_dir, const char *kernel_dir)
{
    clattn_context_options o = CLATTN_CONTEXT_OPTIONS_INIT;
    o.device = tu_dev_spec[dev];
    o.gemm = gemm;
    o.profile = 1;
    if (cache_dir) {
        o.cache = CLATTN_CACHE_ON;
        o.cache_dir = cache_dir;
    }
    o.kernel_dir = kernel_dir;
    clattn_context *ctx = NULL;
    clattn_status st = clattn_context_create_with_options(&ctx, &o);
    TU_ASSERT_OK(st, NULL, "clattn_context_create_with_options");
    return ctx;
}

/* Which GEMM the profile saw since the last read: "clattn", "CLBlast" or NULL (none, or both). */
static const char *gemm_that_ran(clattn_context *ctx)
{
    clattn_profile_entry e[CLATTN_PROFILE_MAX_ENTRIES];
    size_t n = 0;
    clattn_status st = clattn_profile_read(ctx, e, CLATTN_PROFILE_MAX_ENTRIES, &n);
    TU_ASSERT_OK(st, ctx, "clattn_profile_read");
    const char *found = NULL;
    for (size_t i = 0; i < n; i++) {
        const char *which = strcmp(e[i].name, "projection GEMM (clattn)") == 0    ? "clattn"
                            : strcmp(e[i].name, "projection GEMM (CLBlast)") == 0 ? "CLBlast"
                                                                                  : NULL;
        if (which && found)
            return NULL;
        if (which)
            found = which;
    }
    return found;
}

/* The warning of the last projection check_projection ran. */
static char projection_warning[1024];

/* One projection of rows × in · in × out (+ bias) on ctx against the fp64 reference, the inputs and
 * every guard checked; returns which GEMM ran, and keeps the call's warning in projection_warning. */
static const char *check_projection(clattn_context *ctx, size_t rows, size_t in, size_t out, bool bias,
                                    uint64_t seed)
{
    const size_t nx = rows * in, nw = in * out, ny = rows * out;
    float *x = tu_falloc(nx), *w = tu_falloc(nw), *b = tu_falloc(out);
    tu_fill_uniform(x, nx, 1.0f, seed);
    tu_fill_uniform(w, nw, 1.0f, seed + 1);
    tu_fill_uniform(b, out, 1.0f, seed + 2);
    double *ref = tu_dalloc(ny);
    ref_matmul(rows, in, out, x, w, bias ? b : NULL, ref);
    cl_mem mx = tu_dev_alloc(ctx, nx, x), mw = tu_dev_alloc(ctx, nw, w), my = tu_dev_alloc(ctx, ny, NULL);
    cl_mem mb = bias ? tu_dev_alloc(ctx, out, b) : NULL;
    clattn_status st = clattn_projection(ctx, rows, in, out, mx, mw, mb, my);
    TU_ASSERT_OK(st, ctx, "clattn_projection");
    snprintf(projection_warning, sizeof projection_warning, "%s", clattn_last_warning(ctx));
    tu_finish(ctx);
    float *y = tu_dev_read_checked(ctx, my, ny, "y");
    check_close_named("y", y, ref, ny, NULL);
    tu_dev_check_equal(ctx, mx, x, nx, "x");
    tu_dev_check_equal(ctx, mw, w, nw, "w");
    if (mb)
        tu_dev_check_equal(ctx, mb, b, out, "bias");
    return gemm_that_ran(ctx);
}

/* ---------------------------------------------------------------------------------------------- */
/* Every GEMM on odd shapes                                                                        */
/* ---------------------------------------------------------------------------------------------- */

/* "clattn" takes the device's default tile; 1x1 and 5x2 leave row and column edges almost everywhere;
 * 16x8 makes one tile larger than most shapes. */
static const char *const gemms[] = {"clattn", "clattn:1x1", "clattn:5x2", "clattn:16x8", "clblast"};
#define N_GEMMS (sizeof gemms / sizeof gemms[0])

static const size_t shapes[][3] = {
    {1, 1, 1}, {7, 13, 1}, {13, 5, 100}, {61, 72, 257}, {267, 129, 64}, {6, 768, 48}, {100, 3, 31}, {512, 64, 96},
};
#define N_SHAPES (sizeof shapes / sizeof shapes[0])

START_TEST(test_shapes)
{
    const size_t g = TU_CASE(_i), dev = TU_DEVICE(_i);
    clattn_context *ctx = context_with(dev, gemms[g], NULL, NULL);
    /* CLBlast cannot launch where work groups are smaller than 64: clattn's kernel serves, warned. */
    size_t max_wg = 0;
    clGetDeviceInfo(clattn_context_device(ctx), CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof max_wg, &max_wg, NULL);
    const char *expected = strcmp(gemms[g], "clblast") == 0 && max_wg >= 64 ? "CLBlast" : "clattn";
    for (size_t s = 0; s < N_SHAPES; s++)
        for (int bias = 0; bias <= 1; bias++) {
            tu_set_label("GEMM %s, %zu x %zu . %zu x %zu, bias %d, on %s", gemms[g], shapes[s][0], shapes[s][1],
                         shapes[s][1], shapes[s][2], bias, tu_dev_spec[dev]);
            const char *ran = check_projection(ctx, shapes[s][0], shapes[s][1], shapes[s][2], bias, 10 * s + 1);
            ck_assert_msg(ran && strcmp(ran, expected) == 0, "%s: the profile shows %s, expected %s", tu_label(),
                          ran ? ran : "no single GEMM", expected);
        }
    clattn_context_free(ctx);
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* options.gemm and CLATTN_GEMM                                                                    */
/* ---------------------------------------------------------------------------------------------- */

START_TEST(test_option_values)
{
    const size_t dev = TU_DEVICE(_i);
    static const char *const good[] = {"clblast", "clattn", "clattn:6x3", "clattn:1x1", "clattn:16x8", ""};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        tu_set_label("options.gemm \"%s\" on %s", good[i], tu_dev_spec[dev]);
        clattn_context_free(context_with(dev, good[i], NULL, NULL));
    }
    static const char *const bad[] = {"CLBlast", "clattn:", "clattn:0x1", "clattn:17x1", "clattn:6x9", "clattn:6x",
                                      "clattn:6x3 ", "clattn:x3", "clattn:-1x2", "blas", "clattn:6y3"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tu_set_label("options.gemm \"%s\" on %s", bad[i], tu_dev_spec[dev]);
        clattn_context_options o = CLATTN_CONTEXT_OPTIONS_INIT;
        o.device = tu_dev_spec[dev];
        o.gemm = bad[i];
        clattn_context *ctx = NULL;
        clattn_status st = clattn_context_create_with_options(&ctx, &o);
        ck_assert_msg(st == CLATTN_ERROR_INVALID_VALUE && ctx == NULL, "%s: got %s", tu_label(),
                      clattn_status_string(st));
        ck_assert_msg(strstr(clattn_last_error(NULL), "options.gemm") != NULL, "%s: the detail \"%s\" names no option",
                      tu_label(), clattn_last_error(NULL));
    }
    /* The environment: a good value is used, a malformed one ignored with a warning. */
    static const char *const env[] = {"CLATTN_GEMM"};
    tu_env_save(env, 1);
    setenv("CLATTN_GEMM", "clattn:3x1", 1);
    tu_set_label("CLATTN_GEMM=clattn:3x1 on %s", tu_dev_spec[dev]);
    clattn_context *ctx = context_with(dev, NULL, NULL, NULL);
    const char *ran = check_projection(ctx, 10, 9, 40, true, 5);
    ck_assert_msg(ran && strcmp(ran, "clattn") == 0, "%s: ran %s", tu_label(), ran ? ran : "no single GEMM");
    clattn_context_free(ctx);
    setenv("CLATTN_GEMM", "fastest", 1);
    tu_set_label("CLATTN_GEMM=fastest on %s", tu_dev_spec[dev]);
    ctx = context_with(dev, NULL, NULL, NULL);
    ck_assert_msg(strstr(clattn_last_warning(ctx), "CLATTN_GEMM") != NULL, "%s: no warning: \"%s\"", tu_label(),
                  clattn_last_warning(ctx)); /* (the context's creation is its last call yet) */
    check_projection(ctx, 10, 9, 40, true, 6);
    clattn_context_free(ctx);
    tu_env_restore();
}
END_TEST

/* The names in the keys of the two tuning records. */
#define GEMM_RECORD "projection GEMM choice"
#define FUSED_RECORD "fused tile choice"

/* ---------------------------------------------------------------------------------------------- */
/* clattn_tune and its record                                                                      */
/* ---------------------------------------------------------------------------------------------- */

/* The path of the one cache entry whose key names `record` (NULL if none). */
static const char *find_record(const char *dir, const char *record)
{
    static char path[2048];
    const char *found = NULL;
    DIR *d = opendir(dir);
    ck_assert_msg(d != NULL, "cannot open the cache folder %s", dir);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!strstr(e->d_name, ".bin"))
            continue;
        char p[2048];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        size_t len = 0;
        char *data = tu_read_file(p, &len);
        if (data && len > 16 && memmem(data, len, record, strlen(record))) {
            ck_assert_msg(!found, "two records \"%s\" in %s", record, dir);
            snprintf(path, sizeof path, "%s", p);
            found = path;
        }
        free(data);
    }
    closedir(d);
    return found;
}

/* Rewrites the record at `path`: its payload becomes `payload` (with a matching checksum), and
 * `from` in its key becomes `to` (same length), when given. */
static void rewrite_record(const char *path, const char *payload, const char *from, const char *to)
{
    size_t len = 0;
    char *data = tu_read_file(path, &len);
    ck_assert(data && len > 16);
    uint32_t key_len;
    memcpy(&key_len, data + 12, 4);
    ck_assert(16 + (size_t)key_len + 16 <= len);
    char *key = data + 16;
    if (from) {
        char *at = memmem(key, key_len, from, strlen(from));
        ck_assert_msg(at != NULL, "\"%s\" is not in the record's key", from);
        memcpy(at, to, strlen(to));
    }
    const size_t head = 16 + key_len, n = strlen(payload);
    char *out = malloc(head + 16 + n);
    ck_assert(out != NULL);
    memcpy(out, data, head);
    const uint64_t plen = n, sum = hash_fnv1a(HASH_FNV1A_BASIS, payload, n);
    memcpy(out + head, &plen, 8);
    memcpy(out + head + 8, &sum, 8);
    memcpy(out + head + 16, payload, n);
    tu_write_file(path, out, head + 16 + n);
    free(out);
    free(data);
}

/* GEMM records rewritten by hand: another valid choice is followed; a damaged one is ignored with a
 * warning; one made under another library version is never found (no warning). */
static void check_gemm_records(size_t dev, const char *dir)
{
    const char *record = find_record(dir, GEMM_RECORD);
    ck_assert_msg(record != NULL, "%s: no GEMM record", tu_label());
    clattn_context *ctx;
    const bool cpu = (tu_dev[dev].type & CL_DEVICE_TYPE_CPU) && !(tu_dev[dev].type & CL_DEVICE_TYPE_GPU);
    const char *device_default = cpu ? "clattn" : "CLBlast";
    size_t max_wg = 0;
    clGetDeviceInfo(tu_dev[dev].device, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof max_wg, &max_wg, NULL);
    if (max_wg < 64)
        device_default = "clattn";

    static const struct {
        const char *payload, *from, *to;
        const char *what;
        bool warns;
    } cases[] = {
        {"clblast\n", NULL, NULL, "a record naming CLBlast", false},
        {"clattn:2x1\n", NULL, NULL, "a record naming a clattn tile", false},
        {"clattn:99x1\n", NULL, NULL, "a damaged record (a tile out of range)", true},
        {"fastest\n", NULL, NULL, "a damaged record (no GEMM's name)", true},
        {"clblast\n", "clattn " CLATTN_VERSION_STRING, "clattn 0.0.0", "a record of another version", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tu_set_label("%s on %s", cases[i].what, tu_dev_spec[dev]);
        rewrite_record(record, cases[i].payload, cases[i].from, cases[i].to);
        ctx = context_with(dev, NULL, dir, NULL);
        const char *ran = check_projection(ctx, 9, 11, 50, true, 20 + i);
        const char *expected = i == 0 && max_wg >= 64 ? "CLBlast" : i == 1 ? "clattn" : device_default;
        ck_assert_msg(ran && strcmp(ran, expected) == 0, "%s: %s ran, expected %s", tu_label(),
                      ran ? ran : "no single GEMM", expected);
        const bool warned = strstr(projection_warning, "tuning record") != NULL;
        ck_assert_msg(warned == cases[i].warns, "%s: warning \"%s\"", tu_label(), projection_warning);
        clattn_context_free(ctx);
    }
}


/* A fused SDPA on ctx against the fp64 reference; returns the call's warning. */
static const char *check_fused_sdpa(clattn_context *ctx)
{
    static char warning[1024];
    clattn_sdpa_desc d = tu_sdpa_desc(1, 2, 37, 45, 16, 0);
    d.algorithm = CLATTN_ALGORITHM_FUSED;
    float *q = tu_falloc(2 * 37 * 16), *k = tu_falloc(2 * 45 * 16), *v = tu_falloc(2 * 45 * 16);
    float *out = tu_falloc(2 * 37 * 16);
    tu_fill_uniform(q, 2 * 37 * 16, 1.0f, 41);
    tu_fill_uniform(k, 2 * 45 * 16, 1.0f, 42);
    tu_fill_uniform(v, 2 * 45 * 16, 1.0f, 43);
    double *ref = tu_dalloc(2 * 37 * 16);
    ref_sdpa(&d, q, k, v, NULL, ref, NULL, NULL);
    clattn_status st = clattn_sdpa_host(ctx, &d, q, k, v, NULL, out, NULL, NULL);
    TU_ASSERT_OK(st, ctx, "clattn_sdpa_host");
    snprintf(warning, sizeof warning, "%s", clattn_last_warning(ctx));
    check_close_named("out", out, ref, 2 * 37 * 16, NULL);
    return warning;
}

/* The fused tiles' record: followed when rewritten to other valid tiles, ignored with a warning when
 * damaged, not even read when options.tile is set. */
static void check_fused_records(size_t dev, const char *dir)
{
    const char *record = find_record(dir, FUSED_RECORD);
    ck_assert_msg(record != NULL, "%s: no fused tile record", tu_label());
    static const struct {
        const char *payload, *tile, *what;
        bool warns;
    } cases[] = {
        {"16x32x2\n", NULL, "a fused record naming other tiles", false},
        {"0x64\n", NULL, "a damaged fused record", true},
        {"0x64\n", "32x32", "a damaged fused record under options.tile", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tu_set_label("%s on %s", cases[i].what, tu_dev_spec[dev]);
        rewrite_record(record, cases[i].payload, NULL, NULL);
        clattn_context_options o = CLATTN_CONTEXT_OPTIONS_INIT;
        o.device = tu_dev_spec[dev];
        o.cache = CLATTN_CACHE_ON;
        o.cache_dir = dir;
        o.tile = cases[i].tile;
        clattn_context *ctx = NULL;
        clattn_status st = clattn_context_create_with_options(&ctx, &o);
        TU_ASSERT_OK(st, NULL, "clattn_context_create_with_options");
        const bool warned = strstr(check_fused_sdpa(ctx), "tuning record") != NULL;
        ck_assert_msg(warned == cases[i].warns, "%s: warned %d", tu_label(), warned);
        clattn_context_free(ctx);
    }
}

START_TEST(test_tune)
{
    const size_t dev = TU_DEVICE(_i);
    tu_set_label("clattn_tune on %s", tu_dev_spec[dev]);
    const char *dir = tu_scratch_dir("clattn-test-gemm");
    clattn_context *ctx = context_with(dev, NULL, dir, NULL);
    ck_assert_msg(find_record(dir, GEMM_RECORD) == NULL && find_record(dir, FUSED_RECORD) == NULL,
                  "%s: a record before tuning", tu_label());
    clattn_tune_result r;
    memset(&r, 0xff, sizeof r);
    clattn_status st = clattn_tune(ctx, &r);
    TU_ASSERT_OK(st, ctx, "clattn_tune");
    const bool cpu = (tu_dev[dev].type & CL_DEVICE_TYPE_CPU) && !(tu_dev[dev].type & CL_DEVICE_TYPE_GPU);
    ck_assert_msg(r.candidates == (cpu ? 8u + 3u : 6u + 5u), "%s: %u candidates", tu_label(), r.candidates);
    unsigned m, n, rows;
    char extra;
    ck_assert_msg(sscanf(r.fused_tile, "%ux%ux%u%c", &m, &n, &rows, &extra) == 3 && r.fused_gflops > 0 &&
                      r.fused_gflops >= r.fused_default_gflops,
                  "%s: fused tiles \"%s\" at %g GFLOP/s (default %g)", tu_label(), r.fused_tile, r.fused_gflops,
                  r.fused_default_gflops);
    ck_assert_msg(r.gemm_gflops > 0 && r.seconds > 0, "%s: %g GFLOP/s in %g s", tu_label(), r.gemm_gflops, r.seconds);
    ck_assert_msg(r.gemm_gflops == (r.clblast_gflops > r.clattn_gflops ? r.clblast_gflops : r.clattn_gflops),
                  "%s: chose %g GFLOP/s of CLBlast's %g and clattn's %g", tu_label(), r.gemm_gflops, r.clblast_gflops,
                  r.clattn_gflops);
    const bool chose_blas = strcmp(r.gemm, "clblast") == 0;
    ck_assert_msg(chose_blas == (r.clblast_gflops > r.clattn_gflops), "%s: chose %s", tu_label(), r.gemm);
    ck_assert_msg(chose_blas || strncmp(r.gemm, "clattn:", 7) == 0, "%s: chose \"%s\"", tu_label(), r.gemm);
    const char *expected = chose_blas ? "CLBlast" : "clattn";
    gemm_that_ran(ctx); /* the tuning's own runs */
    const char *ran = check_projection(ctx, 33, 17, 70, true, 7);
    ck_assert_msg(ran && strcmp(ran, expected) == 0, "%s: after tuning %s ran, expected %s", tu_label(),
                  ran ? ran : "no single GEMM", expected);
    clattn_context_free(ctx);

    /* A later context on the same cache starts with the choice; options.gemm still overrides it. */
    const char *record = find_record(dir, GEMM_RECORD);
    ck_assert_msg(record != NULL, "%s: no record in %s", tu_label(), dir);
    ctx = context_with(dev, NULL, dir, NULL);
    ran = check_projection(ctx, 33, 17, 70, false, 8);
    ck_assert_msg(ran && strcmp(ran, expected) == 0, "%s: a later context ran %s, expected %s", tu_label(),
                  ran ? ran : "no single GEMM", expected);
    clattn_context_free(ctx);
    size_t max_wg = 0; /* below 64, CLBlast cannot launch: clattn's kernel serves whatever is asked */
    clGetDeviceInfo(tu_dev[dev].device, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof max_wg, &max_wg, NULL);
    if (max_wg >= 64) {
        ctx = context_with(dev, chose_blas ? "clattn" : "clblast", dir, NULL);
        ran = check_projection(ctx, 33, 17, 70, false, 9);
        ck_assert_msg(ran && strcmp(ran, expected) != 0, "%s: options.gemm did not override the record", tu_label());
        clattn_context_free(ctx);
    }
    check_gemm_records(dev, dir);
    check_fused_records(dev, dir);
}
END_TEST

/* clattn's GEMM kernel does not build: CLBlast serves, with a warning (where CLBlast can launch). */
START_TEST(test_broken_kernel)
{
    const size_t dev = TU_DEVICE(_i);
    size_t max_wg = 0;
    clGetDeviceInfo(tu_dev[dev].device, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof max_wg, &max_wg, NULL);
    const char *dir = tu_broken_kernel_dir("gemm.cl");
    for (int forced = 0; forced <= 1; forced++) {
        tu_set_label("a broken gemm.cl, %s, on %s", forced ? "options.gemm clattn" : "the default", tu_dev_spec[dev]);
        clattn_context *ctx = context_with(dev, forced ? "clattn" : NULL, NULL, dir);
        if (max_wg < 64) { /* no other GEMM: the build failure is the caller's */
            float x = 1, w = 2, y = 0;
            cl_mem mx = tu_dev_alloc(ctx, 1, &x), mw = tu_dev_alloc(ctx, 1, &w), my = tu_dev_alloc(ctx, 1, &y);
            clattn_status st = clattn_projection(ctx, 1, 1, 1, mx, mw, NULL, my);
            ck_assert_msg(st == CLATTN_ERROR_BUILD_FAILED, "%s: got %s", tu_label(), clattn_status_string(st));
        } else {
            const char *ran = check_projection(ctx, 21, 19, 40, true, 30);
            ck_assert_msg(ran && strcmp(ran, "CLBlast") == 0, "%s: %s ran", tu_label(), ran ? ran : "no single GEMM");
            ck_assert_msg(strstr(projection_warning, "does not build") != NULL, "%s: warning \"%s\"", tu_label(),
                          projection_warning);
        }
        clattn_context_free(ctx);
    }
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("gemm");
    tu_add_loop(s, "shapes", test_shapes, N_GEMMS * tu_ndev);
    tu_add_loop(s, "option_values", test_option_values, tu_ndev);
    tu_add_loop(s, "tune", test_tune, tu_ndev);
    tu_add_loop(s, "broken_kernel", test_broken_kernel, tu_ndev);
    return s;
}

int main(void) { return tu_main(make_suite); }
