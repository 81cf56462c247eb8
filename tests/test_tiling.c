/*
 * The fused kernel is correct for every tile choice. CLATTN_TILE=MxN[xR] (rows per work-group, keys
 * per local-memory tile, rows per work-item) is read when a context compiles its fused variant, so
 * each case sets it, points XDG_CACHE_HOME at a fresh folder and creates its own context, then runs
 * CLATTN_ALGORITHM_FUSED SDPA (out and log-sum-exp, cl_mem API with guard regions) on shapes that are
 * multiples of nothing, with causal masks, key lengths (one of them 0) and additive masks with −inf,
 * against the fp64 reference.
 *
 * The tiles actually compiled are read back from the program cache's key text (it holds the build
 * options, "-DBLOCK_M=… -DBLOCK_N=… -DVEC=… -DROWS=…"): an override that is silently ignored would
 * otherwise pass as the defaults. M, N and R are each compared with the request (N may only be raised
 * to VEC, or lowered where the device's local memory cannot hold it); a key without these options fails.
 *
 * Invalid CLATTN_TILE values: the call succeeds with the default tiles and clattn_last_warning says
 * why. Run with --small-work-group (meson registers it with POCL_MAX_WORK_GROUP_SIZE=8, which PoCL
 * reads when the platform initialises) the program checks instead that tiles larger than the device's
 * work-group limit are clamped to it.
 *
 * Every distinct tile × padded head size is a kernel compile (seconds on PoCL): the shapes of group 1
 * share padded head sizes 32/16, those of group 2 80/80, and only a few tiles run group 2.
 */
#define _XOPEN_SOURCE 700
#include "test_util.h"

#include <dirent.h>
#include <stdbool.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define INF TU_MASKF_INF
#define ROWINF TU_MASKF_ROWINF
#define KL0 TU_KL_NONE
#define KLV TU_KL_VARIED
#define KLZ TU_KL_ZERO

typedef struct {
    int group; /* 1: padded head sizes 32/16; 2: 80/80 */
    size_t B, H, L, S, D, Dv;
    float scale;
    clattn_causal causal;
    int kl;
    clattn_mask_layout add;
    int addf;
} shape;

static const shape shapes[] = {
    /* ragged everything: bottom-right causal (L < S), a batch with key length 0, (L,S) mask with −inf */
    {1, 2, 3, 61, 127, 21, 7, SD, BR, KLZ, MLS, INF},
    /* one query row over many keys; head sizes exactly the padded ones */
    {1, 1, 1, 1, 267, 32, 16, SD, NONE, KL0, M0, 0},
    /* few keys, many rows, top-left causal: rows i < S see i+1 keys, the rest all S (or their key
     * length); (B,H,L,S) mask with −inf and whole −inf rows */
    {1, 2, 2, 130, 5, 17, 9, SD, TL, KLV, MBH, INF | ROWINF},
    /* many key tiles, key lengths ending mid-tile, a custom scale */
    {1, 3, 1, 97, 300, 20, 16, 0.3f, NONE, KLV, M0, 0},
    /* bottom-right causal with S < L: the first L−S rows see no key at all */
    {1, 1, 2, 45, 19, 25, 3, SD, BR, KL0, MLS, 0},
    /* group 2: larger heads */
    {2, 1, 1, 1, 267, 72, 72, SD, NONE, KL0, M0, 0},
    {2, 2, 2, 45, 70, 72, 65, SD, BR, KLV, MLS, INF},
};
#define N_SHAPES (sizeof shapes / sizeof shapes[0])

typedef struct {
    const char *tile; /* CLATTN_TILE, or with `lanes` CLATTN_TUNING's fused values */
    unsigned m, n, r; /* as requested */
    int groups;       /* bit 0: group 1, bit 1: group 2 */
    bool lanes;       /* the rows in the lanes (cl/flash_lanes.cl): r vectors of VEC rows a work-item */
} tile_case;

/* What each one exercises on a CPU device with 16-wide native vectors (PoCL here), where the key tile
 * must hold whole vectors: VEC is halved until it divides N (N is raised to VEC when smaller). */
static const tile_case tiles[] = {
    {"1x1x1", 1, 1, 1, 1, false},       /* one row per group and item; N raised to 8, VEC 8 */
    {"3x9x1", 3, 9, 1, 1, false},       /* N 9: VEC 1, the scalar (GPU-style) tile copy and walk */
    {"9x18x5", 9, 18, 5, 1, false},     /* N 18: VEC 2; 5 rows per item */
    {"5x12x8", 5, 12, 8, 1, false},     /* N 12: VEC 4; the most rows per item */
    {"7x48x3", 7, 48, 3, 3, false},     /* VEC 16, two key vectors per step; both head-size groups */
    {"100x16x1", 100, 16, 1, 1, false}, /* a group larger than most shapes' L, odd group size */
    {"2x256x2", 2, 256, 2, 3, false},   /* the largest key tile (more than any S), both groups */
    {"64x64x4", 64, 64, 4, 1, false},   /* larger groups than the CPU defaults */
    {"1x16x8", 1, 16, 8, 2, false},     /* 8 rows of 80-float q and accumulators per item */
    /* The rows in the lanes, through CLATTN_TUNING="fused=M x N x R x VEC x 2" (N a multiple of 8 and of
     * VEC; ROWS = R·VEC): */
    {"1x8x1x0x2", 1, 8, 1, 1, true},     /* N 8: VEC 8 (halved from 16 to divide N), 8 rows an item */
    {"3x24x3x4x2", 3, 24, 3, 1, true},   /* VEC 4, three row vectors, three work-items */
    {"5x40x1x2x2", 5, 40, 1, 1, true},   /* VEC 2: the narrowest lanes */
    {"16x64x2x0x2", 16, 64, 2, 3, true}, /* the CPU default; both head-size groups */
    {"2x256x8x0x2", 2, 256, 8, 2, true}, /* the largest tile and the most row vectors, heads of 80 */
};
#define N_TILES (sizeof tiles / sizeof tiles[0])

/* ---------------------------------------------------------------------------------------------- */
/* Environment, folders and contexts, restored by the fixtures                                    */
/* ---------------------------------------------------------------------------------------------- */

#define N_ENV 4
static const char *const env_names[N_ENV] = {"CLATTN_TILE", "XDG_CACHE_HOME", "CLATTN_CACHE", "CLATTN_TUNING"};
static const char *tmp_dir; /* the test's program cache: a scratch folder */
static clattn_context *owned_ctx;

static void tiling_setup(void)
{
    tu_env_save(env_names, N_ENV);
    tmp_dir = NULL;
    owned_ctx = NULL;
}

/* Runs before tu_tcase's teardown (check runs teardowns in reverse), which then removes the scratch
 * folder and restores the environment. */
static void tiling_teardown(void)
{
    clattn_context_free(owned_ctx);
    owned_ctx = NULL;
    tmp_dir = NULL;
}

static TCase *tiling_tcase(const char *name)
{
    TCase *tc = tu_tcase(name);
    tcase_add_checked_fixture(tc, tiling_setup, tiling_teardown);
    return tc;
}

/* A fresh, empty program cache for this test: every variant is compiled (and stored) here. */
static void fresh_cache(void)
{
    tmp_dir = tu_scratch_dir("clattn-test-tiling");
    ck_assert(setenv("XDG_CACHE_HOME", tmp_dir, 1) == 0);
    unsetenv("CLATTN_CACHE");
}

/* CLATTN_TILE = tile (NULL: unset), then a new context. */
static clattn_context *context_with_tile(size_t dev, const char *tile)
{
    unsetenv("CLATTN_TUNING");
    if (tile)
        ck_assert(setenv("CLATTN_TILE", tile, 1) == 0);
    else
        unsetenv("CLATTN_TILE");
    clattn_context_free(owned_ctx);
    owned_ctx = NULL;
    owned_ctx = tu_context_new(tu_dev_spec[dev]);
    return owned_ctx;
}

/* ---------------------------------------------------------------------------------------------- */
/* Tiles read back from the cache keys                                                             */
/* ---------------------------------------------------------------------------------------------- */

typedef struct built {
    unsigned m, n, vec, rows, dk, dv;
    unsigned lanes; /* 1: built with -DLANES=1 (cl/flash_lanes.cl); unsigned, so memcmp sees no padding */
} built;

#define MAX_BUILT 16

/* The value of " -DNAME=<unsigned>" in the key's options line. */
static int option(const char *key, const char *name, unsigned *value)
{
    const char *line = strstr(key, "\noptions ");
    if (!line)
        return 0;
    const char *end = strchr(line + 1, '\n');
    char pattern[64];
    snprintf(pattern, sizeof pattern, " -D%s=", name);
    const char *at = strstr(line, pattern);
    return at && (!end || at < end) && sscanf(at + strlen(pattern), "%u", value) == 1;
}

/* The fused variants stored in the test's cache folder, one per tile and head sizes (since 0.7 a call's
 * features are build options too: programs that differ only in them are one variant here); -1 when the
 * keys do not carry the options. */
static int read_built(built *out, size_t max)
{
    char folder[PATH_MAX];
    snprintf(folder, sizeof folder, "%s/clattn", tmp_dir);
    DIR *d = opendir(folder);
    if (!d)
        return -1;
    int count = 0, unparsed = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".bin") != 0)
            continue;
        char path[PATH_MAX + 256];
        snprintf(path, sizeof path, "%s/%s", folder, e->d_name);
        FILE *f = fopen(path, "rb");
        if (!f)
            continue;
        unsigned char head[16];
        uint32_t key_len = 0;
        char *key = NULL;
        if (fread(head, 1, 16, f) == 16 && memcmp(head, "CLATTNPB", 8) == 0) {
            memcpy(&key_len, head + 12, 4);
            if (key_len > 0 && key_len < (1u << 20)) {
                key = malloc(key_len + 1);
                if (key && fread(key, 1, key_len, f) == key_len)
                    key[key_len] = '\0';
                else {
                    free(key);
                    key = NULL;
                }
            }
        }
        fclose(f);
        built b;
        if (key && option(key, "BLOCK_M", &b.m) && option(key, "BLOCK_N", &b.n) && option(key, "VEC", &b.vec) &&
            option(key, "ROWS", &b.rows) && option(key, "DK", &b.dk) && option(key, "DV", &b.dv)) {
            b.lanes = 0;
            (void)option(key, "LANES", &b.lanes);
            bool seen = false;
            for (int i = 0; i < count && (size_t)i < max; i++)
                seen |= memcmp(&out[i], &b, sizeof b) == 0;
            if (!seen && (size_t)count < max)
                out[count] = b;
            count += !seen;
        } else {
            unparsed++;
        }
        free(key);
    }
    closedir(d);
    return count == 0 && unparsed > 0 ? -1 : count;
}

/* Local memory of a key tile of n keys as src/attention/fused.c counts it: K and V rows of the padded head sizes,
 * a flag per key and 64 bytes for the flags' alignment. */
static unsigned long long tile_local_bytes(unsigned n, unsigned dk, unsigned dv)
{
    return (unsigned long long)n * ((dk + dv) * sizeof(float) + 1) + 64;
}

static unsigned long long device_local_memory(void)
{
    cl_ulong local = 0;
    cl_int err = clGetDeviceInfo(clattn_context_device(owned_ctx), CL_DEVICE_LOCAL_MEM_SIZE, sizeof local, &local,
                                 NULL);
    ck_assert_msg(err == CL_SUCCESS, "clGetDeviceInfo(CL_DEVICE_LOCAL_MEM_SIZE): %d", (int)err);
    return local;
}

/* Every fused variant compiled in this test has rows-per-group m, keys-per-tile n and rows-per-item r
 * (0: any; with `lanes`, r vectors of VEC rows, and the rows-in-lanes kernel; without, the other) and
 * m ≤ max_m; reports them. Returns the count found. The key tile N is kept as asked when
 * it fits the device's local memory, raised to VEC when smaller (a tile holds whole vectors), and halved
 * only when it does not fit — then to a tile that fits. */
static int check_built(unsigned want_m, unsigned want_n, unsigned want_r, bool lanes, size_t max_m,
                       size_t want_count)
{
    built b[MAX_BUILT];
    int n = read_built(b, MAX_BUILT);
    /* The check must not pass by default: the cache keys carry the build options, so a variant stored
     * without them (or no entry at all) is a failure, not a reason to skip. */
    ck_assert_msg(n >= 0 && !(n == 0 && want_count > 0),
                  "%s: the program cache holds no fused variant with tile options: the tiles actually compiled "
                  "cannot be checked", tu_label());
    ck_assert_msg((size_t)n == want_count, "%s: %d fused variants compiled, expected %zu", tu_label(), n,
                  want_count);
    for (int i = 0; i < n && i < MAX_BUILT; i++) {
        printf("  %s: compiled BLOCK_M=%u BLOCK_N=%u VEC=%u ROWS=%u DK=%u DV=%u%s\n", tu_label(), b[i].m, b[i].n,
               b[i].vec, b[i].rows, b[i].dk, b[i].dv, b[i].lanes ? " LANES=1" : "");
        if (want_m)
            ck_assert_msg((b[i].lanes == 1) == lanes, "%s: the %s kernel compiled", tu_label(),
                          b[i].lanes ? "rows-in-lanes" : "rows-along-d");
        ck_assert_msg(b[i].m >= 1 && b[i].m <= max_m, "%s: BLOCK_M=%u, device limit %zu", tu_label(), b[i].m,
                      max_m);
        if (want_m)
            ck_assert_msg(b[i].m == want_m, "%s: BLOCK_M=%u compiled, CLATTN_TILE asked for %u", tu_label(), b[i].m,
                          want_m);
        if (want_n) {
            const unsigned long long local = device_local_memory();
            if (tile_local_bytes(want_n, b[i].dk, b[i].dv) <= local) {
                const unsigned expect = want_n > b[i].vec ? want_n : b[i].vec;
                ck_assert_msg(b[i].n == expect,
                              "%s: BLOCK_N=%u compiled (VEC=%u), CLATTN_TILE asked for %u, which fits the device's "
                              "%llu bytes of local memory", tu_label(), b[i].n, b[i].vec, want_n, local);
            } else {
                ck_assert_msg(b[i].n < want_n && tile_local_bytes(b[i].n, b[i].dk, b[i].dv) <= local,
                              "%s: BLOCK_N=%u compiled, CLATTN_TILE asked for %u, which does not fit the device's "
                              "%llu bytes of local memory: a smaller tile that fits was expected", tu_label(), b[i].n,
                              want_n, local);
            }
        }
        if (want_r)
            ck_assert_msg(b[i].rows == want_r * (lanes ? b[i].vec : 1),
                          "%s: ROWS=%u compiled (VEC=%u), the tile asked for %u%s", tu_label(), b[i].rows, b[i].vec,
                          want_r, lanes ? " vectors of rows" : "");
        ck_assert_msg(b[i].vec >= 1 && b[i].n % b[i].vec == 0, "%s: BLOCK_N=%u is not a multiple of VEC=%u",
                      tu_label(), b[i].n, b[i].vec);
    }
    return n;
}

/* ---------------------------------------------------------------------------------------------- */
/* One SDPA on a shape, checked                                                                    */
/* ---------------------------------------------------------------------------------------------- */

static void run_shape(clattn_context *ctx, size_t si, const char *tile, size_t dev)
{
    const shape *c = &shapes[si];
    tu_set_label("CLATTN_TILE=%s shape %zu (B %zu H %zu L %zu S %zu Dqk %zu Dv %zu causal %d kl %d additive %d/%d) "
                 "on %s",
                 tile ? tile : "(unset)", si, c->B, c->H, c->L, c->S, c->D, c->Dv, (int)c->causal, c->kl,
                 (int)c->add, c->addf, tu_dev_spec[dev]);
    clattn_sdpa_desc d = tu_sdpa_desc(c->B, c->H, c->L, c->S, c->D, c->Dv);
    size_t kl[8];
    d.scale = c->scale;
    clattn_masks masks = CLATTN_MASKS_INIT;
    masks.causal = c->causal;
    masks.key_lengths = tu_make_key_lengths(c->kl, c->B, c->S, kl);
    masks.additive = c->add;
    d.masks = &masks;
    d.algorithm = CLATTN_ALGORITHM_FUSED;
    const size_t BH = c->B * c->H, nq = BH * c->L * c->D, nk = BH * c->S * c->D, nv = BH * c->S * c->Dv,
                 no = BH * c->L * c->Dv, nl = BH * c->L;
    float *q = tu_falloc(nq), *k = tu_falloc(nk), *v = tu_falloc(nv), *mask = NULL;
    size_t nm = 0;
    tu_fill_uniform(q, nq, 1.0f, 1000 + 10 * si);
    tu_fill_uniform(k, nk, 1.0f, 1001 + 10 * si);
    tu_fill_uniform(v, nv, 1.0f, 1002 + 10 * si);
    if (c->add != M0)
        mask = tu_make_mask(c->add, c->B, c->H, c->L, c->S, c->addf, 1003 + 10 * si, &nm);
    double *ro = tu_dalloc(no), *rl = tu_dalloc(nl);
    ref_sdpa(&d, q, k, v, mask, ro, NULL, rl);

    cl_mem mq = tu_dev_alloc(ctx, nq, q), mk = tu_dev_alloc(ctx, nk, k), mv = tu_dev_alloc(ctx, nv, v);
    cl_mem mm = mask ? tu_dev_alloc(ctx, nm, mask) : NULL;
    cl_mem mo = tu_dev_alloc(ctx, no, NULL), ml = tu_dev_alloc(ctx, nl, NULL);
    clattn_status st = clattn_sdpa(ctx, &d, mq, mk, mv, mm, mo, NULL, ml);
    TU_ASSERT_OK(st, ctx, "clattn_sdpa");
    tu_finish(ctx);
    check_close_named("out", tu_dev_read_checked(ctx, mo, no, "out"), ro, no, NULL);
    check_close_named("lse", tu_dev_read_checked(ctx, ml, nl, "lse"), rl, nl, NULL);
    tu_dev_check_equal(ctx, mq, q, nq, "q");
    tu_dev_check_equal(ctx, mk, k, nk, "k");
    tu_dev_check_equal(ctx, mv, v, nv, "v");
    if (mm)
        tu_dev_check_equal(ctx, mm, mask, nm, "mask");
}

static size_t device_max_work_group(clattn_context *ctx)
{
    size_t max = 0;
    cl_int err = clGetDeviceInfo(clattn_context_device(ctx), CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof max, &max, NULL);
    ck_assert_msg(err == CL_SUCCESS, "clGetDeviceInfo(CL_DEVICE_MAX_WORK_GROUP_SIZE): %d", (int)err);
    return max;
}

/* ---------------------------------------------------------------------------------------------- */
/* Valid tiles                                                                                     */
/* ---------------------------------------------------------------------------------------------- */

START_TEST(test_tile)
{
    size_t ti = TU_CASE(_i), dev = TU_DEVICE(_i);
    const tile_case *t = &tiles[ti];
    fresh_cache();
    clattn_context *ctx;
    if (t->lanes) {
        char tuning[64];
        snprintf(tuning, sizeof tuning, "fused=%s", t->tile);
        ctx = context_with_tile(dev, NULL);
        ck_assert(setenv("CLATTN_TUNING", tuning, 1) == 0);
        clattn_context_free(owned_ctx);
        ctx = owned_ctx = tu_context_new(tu_dev_spec[dev]);
    } else {
        ctx = context_with_tile(dev, t->tile);
    }
    const size_t max_wg = device_max_work_group(ctx);
    size_t groups = 0;
    for (size_t si = 0; si < N_SHAPES; si++) {
        if (!(t->groups & (1 << (shapes[si].group - 1))))
            continue;
        run_shape(ctx, si, t->tile, dev);
        ck_assert_msg(clattn_last_warning(ctx)[0] == '\0', "%s: a valid CLATTN_TILE gave the warning \"%s\"",
                      tu_label(), clattn_last_warning(ctx));
    }
    for (int g = 0; g < 2; g++)
        groups += (t->groups >> g) & 1;
    tu_set_label("CLATTN_TILE=%s on %s", t->tile, tu_dev_spec[dev]);
    /* M is kept unless the device cannot launch it; N unless local memory is short; R is always kept. */
    check_built(t->m <= max_wg ? t->m : 0, t->n, t->r, t->lanes, max_wg, groups);
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* Invalid values: defaults and a warning                                                          */
/* ---------------------------------------------------------------------------------------------- */

static const char *const invalid_tiles[] = {
    "abc",      "0x16",   "16x0",      "16x16x9", "16x16x0", "2000x16", "16x257", "-1x16",
    "16",       "16x",    "16x16x",    "16x16x4x2", "x16",   "16x16y",  "16x16x4y", "1025x1",
};
#define N_INVALID (sizeof invalid_tiles / sizeof invalid_tiles[0])

START_TEST(test_invalid)
{
    size_t dev = (size_t)_i;
    const size_t si = 0; /* group 1 */
    fresh_cache();

    /* The defaults (CLATTN_TILE unset, then empty): no warning, one variant compiled. */
    clattn_context *ctx = context_with_tile(dev, NULL);
    run_shape(ctx, si, NULL, dev);
    ck_assert_msg(clattn_last_warning(ctx)[0] == '\0', "%s: warning without CLATTN_TILE: \"%s\"", tu_label(),
                  clattn_last_warning(ctx));
    built defaults[MAX_BUILT];
    const int have_defaults = read_built(defaults, MAX_BUILT) == 1;
    ctx = context_with_tile(dev, "");
    run_shape(ctx, si, "\"\"", dev);
    ck_assert_msg(clattn_last_warning(ctx)[0] == '\0', "%s: warning with an empty CLATTN_TILE: \"%s\"", tu_label(),
                  clattn_last_warning(ctx));

    int failures = 0;
    char first_failure[1024] = "";
    for (size_t i = 0; i < N_INVALID; i++) {
        ctx = context_with_tile(dev, invalid_tiles[i]);
        /* The environment is read when the context is made: its warning is there until the first call. */
        char w[1024];
        snprintf(w, sizeof w, "%s", clattn_last_warning(ctx));
        run_shape(ctx, si, invalid_tiles[i], dev); /* succeeds, correct results */
        /* ... and only until then: the call's own warnings start empty (a warning is not stale news). */
        ck_assert_msg(strstr(clattn_last_warning(ctx), "CLATTN_TILE") == NULL,
                      "CLATTN_TILE=\"%s\": the context's warning outlived the next call: \"%s\"", invalid_tiles[i],
                      clattn_last_warning(ctx));
        /* The defaults ran: the cache still holds the one variant the defaults compiled. */
        built b[MAX_BUILT];
        const int n = read_built(b, MAX_BUILT);
        const int defaults_kept = !have_defaults || (n == 1 && memcmp(&b[0], &defaults[0], sizeof b[0]) == 0);
        const int warned = w[0] != '\0' && strstr(w, "CLATTN_TILE") != NULL;
        printf("  CLATTN_TILE=\"%s\": warning \"%s\"%s\n", invalid_tiles[i], w,
               defaults_kept ? "" : "; the defaults were NOT used");
        if ((!warned || !defaults_kept) && failures++ == 0)
            snprintf(first_failure, sizeof first_failure, "%s: %s%s", tu_label(),
                     warned ? "" : "no warning naming CLATTN_TILE",
                     defaults_kept ? "" : (warned ? "other tiles than the defaults were compiled"
                                                  : " and other tiles than the defaults were compiled"));
        if (n > 1) { /* start the next value from the defaults' entry alone */
            tu_rm_rf(tmp_dir);
            ck_assert(mkdir(tmp_dir, 0700) == 0);
            ctx = context_with_tile(dev, NULL);
            run_shape(ctx, si, NULL, dev);
        }
    }
    ck_assert_msg(failures == 0, "%d of %zu invalid CLATTN_TILE values were not rejected with a warning; first: %s",
                  failures, N_INVALID, first_failure);
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* Tiles above the device's work-group limit (run with --small-work-group)                         */
/* ---------------------------------------------------------------------------------------------- */

static const char *const big_tiles[] = {NULL /* the defaults */, "1024x16", "100x16x2", "1024x16x1"};
#define N_BIG (sizeof big_tiles / sizeof big_tiles[0])

START_TEST(test_work_group_limit)
{
    size_t ti = TU_CASE(_i), dev = TU_DEVICE(_i);
    const char *tile = big_tiles[ti];
    fresh_cache();
    clattn_context *ctx = context_with_tile(dev, tile);
    const size_t max_wg = device_max_work_group(ctx);
    if (ti == 0)
        printf("device %s: CL_DEVICE_MAX_WORK_GROUP_SIZE %zu%s\n", tu_dev_spec[dev], max_wg,
               max_wg >= 1024 ? " (POCL_MAX_WORK_GROUP_SIZE not in effect: the limit is not exercised)" : "");
    run_shape(ctx, 0, tile, dev);
    run_shape(ctx, 2, tile, dev);
    if (clattn_last_warning(ctx)[0])
        printf("  %s: warning \"%s\"\n", tu_label(), clattn_last_warning(ctx));
    tu_set_label("CLATTN_TILE=%s on %s (max work-group %zu)", tile ? tile : "(unset)", tu_dev_spec[dev], max_wg);
    check_built(0, 0, 0, false, max_wg, 1);
}
END_TEST

static int small_work_group = 0;

static Suite *make_suite(void)
{
    Suite *s = suite_create("tiling");
    TCase *tc;
    if (small_work_group) {
        tc = tiling_tcase("work_group_limit");
        tcase_add_loop_test(tc, test_work_group_limit, 0, (int)(N_BIG * tu_ndev));
        suite_add_tcase(s, tc);
        return s;
    }
    tc = tiling_tcase("tiles");
    tcase_add_loop_test(tc, test_tile, 0, (int)(N_TILES * tu_ndev));
    suite_add_tcase(s, tc);
    tc = tiling_tcase("invalid");
    tcase_add_loop_test(tc, test_invalid, 0, (int)tu_ndev);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--small-work-group") == 0) {
            small_work_group = 1;
        } else {
            fprintf(stderr, "usage: %s [--small-work-group]\n", argv[0]);
            return 2;
        }
    }
    return tu_main(make_suite);
}
