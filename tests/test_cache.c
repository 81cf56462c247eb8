/*
 * The on-disk program cache (src/cache.c), seen from outside: where entries land, what they hold,
 * that they are reused, that damaged or mismatched entries are never trusted, that CLATTN_CACHE=0
 * turns it off, that an unusable cache folder only means "no cache", and that concurrent stores
 * leave exactly one whole entry.
 *
 * Every case points XDG_CACHE_HOME (or HOME) at a fresh mkdtemp folder before it creates its own
 * contexts (the cache location is read when a program is built), runs the fused SDPA on a fixed
 * problem and checks out and log-sum-exp against the fp64 reference. The folders, the environment
 * and the contexts are restored by a fixture, also when a case fails part-way.
 *
 * Entry format (native byte order): "CLATTNPB", u32 format (1), u32 key length, key text,
 * u64 binary length, u64 FNV-1a-64 of the binary, the binary; named <32 hex digits>.bin.
 */
#define _XOPEN_SOURCE 700
#include "test_util.h"

#include "../src/hash.h" /* the cache's checksums */

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------------------------------------------------------------------------------------- */
/* Environment, temporary folders and contexts, restored by the fixtures                          */
/* ---------------------------------------------------------------------------------------------- */

#define MAX_CTX 8
#define CACHE_ENV_COUNT 3

static const char *const saved_names[CACHE_ENV_COUNT] = {"XDG_CACHE_HOME", "HOME", "CLATTN_CACHE"};

static clattn_context *owned[MAX_CTX];

static void cache_setup(void)
{
    tu_env_save(saved_names, CACHE_ENV_COUNT);
    memset(owned, 0, sizeof owned);
}

/* Runs before tu_tcase's teardown (check runs teardowns in reverse), which then removes the scratch
 * folders and restores the environment. */
static void cache_teardown(void)
{
    for (int i = 0; i < MAX_CTX; i++) {
        clattn_context_free(owned[i]);
        owned[i] = NULL;
    }
}

static TCase *cache_tcase(const char *name)
{
    TCase *tc = tu_tcase(name);
    tcase_add_checked_fixture(tc, cache_setup, cache_teardown);
    return tc;
}

/* A fresh empty folder, removed by the fixture. */
static const char *make_tmp_dir(void) { return tu_scratch_dir("clattn-test-cache"); }

/* XDG_CACHE_HOME = a fresh folder, CLATTN_CACHE unset. Returns the folder. */
static const char *fresh_cache_env(void)
{
    const char *dir = make_tmp_dir();
    ck_assert(setenv("XDG_CACHE_HOME", dir, 1) == 0);
    unsetenv("CLATTN_CACHE");
    return dir;
}

static clattn_context *new_ctx(size_t dev)
{
    clattn_context *ctx = tu_context_new(tu_dev_spec[dev]);
    for (int i = 0; i < MAX_CTX; i++)
        if (!owned[i]) {
            owned[i] = ctx;
            return ctx;
        }
    clattn_context_free(ctx);
    ck_abort_msg("too many contexts in one test");
    return NULL;
}

static void free_ctx(clattn_context *ctx)
{
    for (int i = 0; i < MAX_CTX; i++)
        if (owned[i] == ctx)
            owned[i] = NULL;
    clattn_context_free(ctx);
}

/* ---------------------------------------------------------------------------------------------- */
/* The SDPA problem every case runs                                                                */
/* ---------------------------------------------------------------------------------------------- */

#define PB 1
#define PH 2
#define PL 37
#define PS 53
#define PD 24
#define NQ (PB * PH * PL * PD)
#define NK (PB * PH * PS * PD)
#define NO (PB * PH * PL * PD)
#define NL (PB * PH * PL)

typedef struct problem {
    clattn_sdpa_desc d;
    clattn_masks m; /* d.masks points here */
    float *q, *k, *v;
    double *ro, *rl;
} problem;

static problem prob;

static void prepare_problem(void)
{
    memset(&prob, 0, sizeof prob);
    prob.d = tu_sdpa_desc(PB, PH, PL, PS, PD, 0);
    prob.m = (clattn_masks)CLATTN_MASKS_INIT;
    prob.m.causal = CLATTN_CAUSAL_BOTTOM_RIGHT;
    prob.d.masks = &prob.m;
    prob.d.algorithm = CLATTN_ALGORITHM_FUSED;
    prob.q = tu_falloc(NQ);
    prob.k = tu_falloc(NK);
    prob.v = tu_falloc(NK);
    tu_fill_uniform(prob.q, NQ, 1.0f, 101);
    tu_fill_uniform(prob.k, NK, 1.0f, 102);
    tu_fill_uniform(prob.v, NK, 1.0f, 103);
    prob.ro = tu_dalloc(NO);
    prob.rl = tu_dalloc(NL);
    ref_sdpa(&prob.d, prob.q, prob.k, prob.v, NULL, prob.ro, NULL, prob.rl);
}

/* Fused SDPA on ctx, checked against the reference; the outputs (tracked) for bit comparisons. */
static void run_checked(clattn_context *ctx, float **out_o, float **out_l)
{
    float *o = tu_host_alloc(NO, NULL), *l = tu_host_alloc(NL, NULL);
    clattn_status st = clattn_sdpa_host(ctx, &prob.d, prob.q, prob.k, prob.v, NULL, o, NULL, l);
    TU_ASSERT_OK(st, ctx, "clattn_sdpa_host");
    tu_host_check_guard(o, NO, "out");
    tu_host_check_guard(l, NL, "lse");
    check_close_named("out", o, prob.ro, NO, NULL);
    check_close_named("lse", l, prob.rl, NL, NULL);
    if (out_o)
        *out_o = o;
    if (out_l)
        *out_l = l;
}

/* A fresh context on device dev, one checked run, context freed. */
static void fresh_run(size_t dev, float **out_o, float **out_l)
{
    clattn_context *ctx = new_ctx(dev);
    run_checked(ctx, out_o, out_l);
    free_ctx(ctx);
}

/* ---------------------------------------------------------------------------------------------- */
/* Looking at the cache folder                                                                     */
/* ---------------------------------------------------------------------------------------------- */

#define MAX_ENTRIES 16

typedef struct scan {
    int exists;     /* the folder exists */
    size_t n_bin;   /* <32 hex>.bin */
    size_t n_tmp;   /* *.tmp */
    size_t n_other; /* anything else */
    char bin[MAX_ENTRIES][PATH_MAX];
    char other[PATH_MAX]; /* the first "other" name */
} scan;

static int is_entry_name(const char *name)
{
    if (strlen(name) != 36 || strcmp(name + 32, ".bin") != 0)
        return 0;
    for (int i = 0; i < 32; i++)
        if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f')))
            return 0;
    return 1;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static void scan_dir(const char *dir, scan *sc)
{
    memset(sc, 0, sizeof *sc);
    DIR *d = opendir(dir);
    if (!d)
        return;
    sc->exists = 1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (is_entry_name(e->d_name)) {
            if (sc->n_bin < MAX_ENTRIES)
                snprintf(sc->bin[sc->n_bin], PATH_MAX, "%s/%s", dir, e->d_name);
            sc->n_bin++;
        } else if (ends_with(e->d_name, ".tmp")) {
            sc->n_tmp++;
        } else {
            if (sc->n_other == 0)
                snprintf(sc->other, PATH_MAX, "%s", e->d_name);
            sc->n_other++;
        }
    }
    closedir(d);
}

/* $root/clattn (or $root/.cache/clattn for the HOME fallback). */
static void cache_folder(char *out, const char *root, int home)
{
    snprintf(out, PATH_MAX, home ? "%s/.cache/clattn" : "%s/clattn", root);
}

/* The whole file (tracked); fails the test when it cannot be read. */
static unsigned char *read_all(const char *path, size_t *len)
{
    unsigned char *buf = (unsigned char *)tu_read_file(path, len);
    ck_assert_msg(buf != NULL, "%s: cannot read %s: %s", tu_label(), path, strerror(errno));
    return tu_track(buf);
}

/* Layout of a parsed entry. */
typedef struct entry {
    size_t size;
    uint32_t format, key_len;
    size_t key_off;     /* 16 */
    size_t bin_len_off; /* 16 + key_len */
    size_t sum_off;
    size_t bin_off;
    uint64_t bin_len, checksum;
    char *key; /* NUL-terminated copy, tracked */
} entry;

/* Parses buf against the format; on failure writes why and returns 0. */
static int parse_entry(const unsigned char *buf, size_t n, entry *e, char *why, size_t why_size)
{
    memset(e, 0, sizeof *e);
    e->size = n;
    if (n < 16) {
        snprintf(why, why_size, "%zu bytes, shorter than the header", n);
        return 0;
    }
    if (memcmp(buf, "CLATTNPB", 8) != 0) {
        snprintf(why, why_size, "bad magic");
        return 0;
    }
    memcpy(&e->format, buf + 8, 4);
    memcpy(&e->key_len, buf + 12, 4);
    if (e->format != 1) {
        snprintf(why, why_size, "format %u, not 1", e->format);
        return 0;
    }
    e->key_off = 16;
    e->bin_len_off = e->key_off + e->key_len;
    e->sum_off = e->bin_len_off + 8;
    e->bin_off = e->sum_off + 8;
    if (e->key_len == 0 || n < e->bin_off) {
        snprintf(why, why_size, "key length %u does not fit in %zu bytes", e->key_len, n);
        return 0;
    }
    memcpy(&e->bin_len, buf + e->bin_len_off, 8);
    memcpy(&e->checksum, buf + e->sum_off, 8);
    if (e->bin_len == 0 || e->bin_len != n - e->bin_off) {
        snprintf(why, why_size, "binary length %llu, but %zu bytes follow the header",
                 (unsigned long long)e->bin_len, n - e->bin_off);
        return 0;
    }
    if (hash_fnv1a(HASH_FNV1A_BASIS, buf + e->bin_off, (size_t)e->bin_len) != e->checksum) {
        snprintf(why, why_size, "checksum mismatch");
        return 0;
    }
    e->key = tu_track_malloc(e->key_len + 1);
    memcpy(e->key, buf + e->key_off, e->key_len);
    e->key[e->key_len] = '\0';
    if (strlen(e->key) != e->key_len) {
        snprintf(why, why_size, "key text contains a NUL byte");
        return 0;
    }
    return 1;
}

/* Reads and parses the entry at path; fails the test unless it is valid. */
static unsigned char *check_entry_valid(const char *path, entry *e, size_t *len)
{
    unsigned char *buf = read_all(path, len);
    char why[256];
    ck_assert_msg(parse_entry(buf, *len, e, why, sizeof why), "%s: cache entry %s is not valid: %s", tu_label(),
                  path, why);
    return buf;
}

/* Exactly `want` valid entries (want 0: any number ≥ 1), no temporaries, nothing else. */
static void check_folder(const char *folder, size_t want, scan *sc)
{
    scan_dir(folder, sc);
    ck_assert_msg(sc->exists, "%s: the cache folder %s was not created", tu_label(), folder);
    ck_assert_msg(sc->n_tmp == 0, "%s: %zu temporary file(s) left behind in %s", tu_label(), sc->n_tmp, folder);
    ck_assert_msg(sc->n_other == 0, "%s: unexpected file \"%s\" in %s", tu_label(), sc->other, folder);
    if (want)
        ck_assert_msg(sc->n_bin == want, "%s: %zu entries in %s, expected %zu", tu_label(), sc->n_bin, folder, want);
    else
        ck_assert_msg(sc->n_bin >= 1, "%s: no cache entry in %s", tu_label(), folder);
    ck_assert(sc->n_bin <= MAX_ENTRIES);
    for (size_t i = 0; i < sc->n_bin; i++) {
        entry e;
        size_t len;
        check_entry_valid(sc->bin[i], &e, &len);
    }
}

static int same_file_state(const struct stat *a, const struct stat *b)
{
    return a->st_ino == b->st_ino && a->st_size == b->st_size && a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
           a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* The fused path with one head size builds one program: one entry. */
#define PROGRAMS 1

/* ---------------------------------------------------------------------------------------------- */
/* 1. store                                                                                        */
/* ---------------------------------------------------------------------------------------------- */

START_TEST(test_store)
{
    size_t dev = (size_t)_i;
    tu_set_label("store on %s", tu_dev_spec[dev]);
    prepare_problem();
    const char *root = fresh_cache_env();
    char folder[PATH_MAX];
    cache_folder(folder, root, 0);

    clattn_context *ctx = new_ctx(dev);
    run_checked(ctx, NULL, NULL);
    const char *name = clattn_context_device_name(ctx);
    scan sc;
    check_folder(folder, PROGRAMS, &sc);
    entry e;
    size_t len;
    check_entry_valid(sc.bin[0], &e, &len);
    ck_assert_msg(strstr(e.key, name) != NULL, "%s: the key does not name the device \"%s\":\n%s", tu_label(), name,
                  e.key);
    ck_assert_msg(strstr(e.key, CLATTN_VERSION_STRING) != NULL,
                  "%s: the key does not name the library version %s:\n%s", tu_label(), CLATTN_VERSION_STRING, e.key);
    ck_assert_msg(strstr(e.key, clattn_version_string()) != NULL, "%s: the key lacks clattn_version_string()",
                  tu_label());
    free_ctx(ctx);
    /* Freeing the context changes nothing on disk. */
    check_folder(folder, PROGRAMS, &sc);
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* 2. reuse                                                                                        */
/* ---------------------------------------------------------------------------------------------- */

START_TEST(test_reuse)
{
    size_t dev = (size_t)_i;
    tu_set_label("reuse on %s", tu_dev_spec[dev]);
    prepare_problem();
    const char *root = fresh_cache_env();
    char folder[PATH_MAX];
    cache_folder(folder, root, 0);

    float *o1, *l1, *o2, *l2;
    fresh_run(dev, &o1, &l1); /* builds from source and stores */
    scan sc;
    check_folder(folder, PROGRAMS, &sc);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s", sc.bin[0]);
    size_t len1, len2;
    unsigned char *before = read_all(path, &len1);
    struct stat st1, st2;
    ck_assert(stat(path, &st1) == 0);

    tu_set_label("reuse on %s (second context, loads the entry)", tu_dev_spec[dev]);
    fresh_run(dev, &o2, &l2);
    ck_assert_msg(memcmp(o1, o2, NO * sizeof(float)) == 0, "%s: out differs from the first context's", tu_label());
    ck_assert_msg(memcmp(l1, l2, NL * sizeof(float)) == 0, "%s: lse differs from the first context's", tu_label());
    check_folder(folder, PROGRAMS, &sc);
    ck_assert_msg(strcmp(sc.bin[0], path) == 0, "%s: the entry moved from %s to %s", tu_label(), path, sc.bin[0]);
    unsigned char *after = read_all(path, &len2);
    ck_assert_msg(len1 == len2 && memcmp(before, after, len1) == 0, "%s: the entry's content changed", tu_label());
    ck_assert(stat(path, &st2) == 0);
    ck_assert_msg(same_file_state(&st1, &st2),
                  "%s: the entry was rewritten (inode %llu -> %llu, mtime %lld.%09ld -> %lld.%09ld), not loaded",
                  tu_label(), (unsigned long long)st1.st_ino, (unsigned long long)st2.st_ino,
                  (long long)st1.st_mtim.tv_sec, st1.st_mtim.tv_nsec, (long long)st2.st_mtim.tv_sec,
                  st2.st_mtim.tv_nsec);

    /* A third context in the same process, used twice: still the same results. */
    tu_set_label("reuse on %s (third context, two calls)", tu_dev_spec[dev]);
    clattn_context *ctx = new_ctx(dev);
    run_checked(ctx, &o2, &l2);
    run_checked(ctx, &o2, &l2);
    ck_assert_msg(memcmp(o1, o2, NO * sizeof(float)) == 0 && memcmp(l1, l2, NL * sizeof(float)) == 0,
                  "%s: results differ from the first context's", tu_label());
    free_ctx(ctx);
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* 3. damaged entries                                                                              */
/* ---------------------------------------------------------------------------------------------- */

enum {
    DMG_HALF,
    DMG_TEN_BYTES,
    DMG_BINARY_BYTE,
    DMG_KEY_DEVICE,
    DMG_KEY_LAST_CHAR,
    DMG_MAGIC,
    DMG_FORMAT,
    DMG_TRAILING_BYTE,
    DMG_EMPTY,
    DMG_CHECKSUM,
    DMG_BIN_LEN_SHORT,
    DMG_BIN_LEN_LONG,
    DMG_KEY_LEN,
    DMG_HEADER_ONLY,
    DMG_GARBAGE_BINARY, /* whole and self-consistent, but the driver cannot load the binary */
    DMG_COUNT
};

static const char *const damage_names[DMG_COUNT] = {
    "truncated to half",
    "truncated to 10 bytes",
    "one byte of the binary flipped",
    "one character of the device name in the key changed",
    "last character of the key changed",
    "wrong magic",
    "format version 2",
    "one extra trailing byte",
    "empty file",
    "checksum field changed",
    "binary length field one short",
    "binary length field one long",
    "key length field one more (key text one byte longer)",
    "header and key only, no binary",
    "garbage binary with a matching checksum",
};

/* The damaged version of a valid entry (tracked); *out_len its length. */
static unsigned char *damage(const unsigned char *good, size_t len, const entry *e, const char *device_name, int kind,
                             size_t *out_len)
{
    unsigned char *d = tu_track_malloc(len + 64);
    memcpy(d, good, len);
    size_t n = len;
    switch (kind) {
    case DMG_HALF:
        n = len / 2;
        break;
    case DMG_TEN_BYTES:
        n = 10;
        break;
    case DMG_BINARY_BYTE:
        d[e->bin_off + (size_t)e->bin_len / 2] ^= 0x40;
        break;
    case DMG_KEY_DEVICE: {
        char *key = (char *)d + e->key_off;
        char saved = key[e->key_len];
        key[e->key_len] = '\0';
        char *at = strstr(key, device_name);
        key[e->key_len] = saved;
        ck_assert_msg(at != NULL, "the key does not name the device");
        size_t pos = strlen(device_name) / 2;
        at[pos] = at[pos] == 'Q' ? 'R' : 'Q';
        break;
    }
    case DMG_KEY_LAST_CHAR:
        d[e->key_off + e->key_len - 2] ^= 0x01; /* the last character before the final newline */
        break;
    case DMG_MAGIC:
        d[0] = 'X';
        break;
    case DMG_FORMAT: {
        uint32_t f = 2;
        memcpy(d + 8, &f, 4);
        break;
    }
    case DMG_TRAILING_BYTE:
        d[len] = 0;
        n = len + 1;
        break;
    case DMG_EMPTY:
        n = 0;
        break;
    case DMG_CHECKSUM:
        d[e->sum_off] ^= 0x01;
        break;
    case DMG_BIN_LEN_SHORT:
    case DMG_BIN_LEN_LONG: {
        uint64_t b = e->bin_len + (kind == DMG_BIN_LEN_LONG ? 1 : (uint64_t)-1);
        memcpy(d + e->bin_len_off, &b, 8);
        break;
    }
    case DMG_KEY_LEN: {
        /* key length + 1, and one more byte of key text inserted, so the rest still lines up */
        uint32_t k = e->key_len + 1;
        memcpy(d + 12, &k, 4);
        memcpy(d + e->key_off + e->key_len + 1, good + e->key_off + e->key_len, len - (e->key_off + e->key_len));
        d[e->key_off + e->key_len] = '\n';
        n = len + 1;
        break;
    }
    case DMG_HEADER_ONLY:
        n = e->bin_off;
        break;
    case DMG_GARBAGE_BINARY: {
        tu_rng r;
        tu_rng_seed(&r, 77);
        for (size_t i = 0; i < (size_t)e->bin_len; i++)
            d[e->bin_off + i] = (unsigned char)tu_rng_next(&r);
        uint64_t sum = hash_fnv1a(HASH_FNV1A_BASIS, d + e->bin_off, (size_t)e->bin_len);
        memcpy(d + e->sum_off, &sum, 8);
        break;
    }
    default:
        ck_abort_msg("unknown damage kind %d", kind);
    }
    *out_len = n;
    return d;
}

START_TEST(test_damaged)
{
    size_t kind = TU_CASE(_i), dev = TU_DEVICE(_i);
    tu_set_label("damaged entry (%s) on %s: first store", damage_names[kind], tu_dev_spec[dev]);
    prepare_problem();
    const char *root = fresh_cache_env();
    char folder[PATH_MAX];
    cache_folder(folder, root, 0);

    clattn_context *ctx = new_ctx(dev);
    char device_name[256];
    snprintf(device_name, sizeof device_name, "%s", clattn_context_device_name(ctx));
    run_checked(ctx, NULL, NULL);
    free_ctx(ctx);
    scan sc;
    check_folder(folder, PROGRAMS, &sc);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s", sc.bin[0]);
    entry good;
    size_t good_len;
    unsigned char *good_bytes = check_entry_valid(path, &good, &good_len);

    size_t bad_len;
    unsigned char *bad = damage(good_bytes, good_len, &good, device_name, (int)kind, &bad_len);
    {
        entry tmp;
        char why[256];
        ck_assert_msg(!parse_entry(bad, bad_len, &tmp, why, sizeof why) ||
                          kind == DMG_KEY_DEVICE || kind == DMG_KEY_LAST_CHAR || kind == DMG_KEY_LEN ||
                          kind == DMG_GARBAGE_BINARY,
                      "test bug: damage \"%s\" left a valid entry", damage_names[kind]);
    }
    tu_write_file(path, bad, bad_len);

    tu_set_label("damaged entry (%s) on %s: fresh context", damage_names[kind], tu_dev_spec[dev]);
    ctx = new_ctx(dev);
    run_checked(ctx, NULL, NULL);
    ck_assert_msg(clattn_last_error(ctx)[0] == '\0', "%s: clattn_last_error after a successful call: %s", tu_label(),
                  clattn_last_error(ctx));
    free_ctx(ctx);

    /* Rebuilt and rewritten: a whole, valid entry for the same key again. */
    check_folder(folder, PROGRAMS, &sc);
    ck_assert_msg(strcmp(sc.bin[0], path) == 0, "%s: the entry moved from %s to %s", tu_label(), path, sc.bin[0]);
    entry now;
    size_t now_len;
    check_entry_valid(path, &now, &now_len);
    ck_assert_msg(strcmp(now.key, good.key) == 0, "%s: the rewritten entry has another key:\n%s\nvs\n%s", tu_label(),
                  now.key, good.key);

    /* And the rewritten entry serves a third context. */
    tu_set_label("damaged entry (%s) on %s: after the rewrite", damage_names[kind], tu_dev_spec[dev]);
    fresh_run(dev, NULL, NULL);
    check_folder(folder, PROGRAMS, &sc);
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* 4. CLATTN_CACHE=0                                                                               */
/* ---------------------------------------------------------------------------------------------- */

START_TEST(test_disabled)
{
    size_t dev = (size_t)_i;
    tu_set_label("CLATTN_CACHE=0 on %s, empty cache", tu_dev_spec[dev]);
    prepare_problem();
    const char *root = fresh_cache_env();
    ck_assert(setenv("CLATTN_CACHE", "0", 1) == 0);
    float *o1, *l1;
    clattn_context *ctx = new_ctx(dev);
    run_checked(ctx, &o1, &l1);
    run_checked(ctx, NULL, NULL);
    free_ctx(ctx);
    fresh_run(dev, NULL, NULL);
    scan sc;
    scan_dir(root, &sc);
    ck_assert_msg(sc.n_bin + sc.n_tmp + sc.n_other == 0, "%s: CLATTN_CACHE=0 but %s now holds \"%s\"", tu_label(),
                  root, sc.n_other ? sc.other : "entries");

    /* An existing entry is neither read nor rewritten: a damaged one stays as it is. */
    tu_set_label("CLATTN_CACHE=0 on %s, damaged entry present", tu_dev_spec[dev]);
    unsetenv("CLATTN_CACHE");
    fresh_run(dev, NULL, NULL);
    char folder[PATH_MAX];
    cache_folder(folder, root, 0);
    check_folder(folder, PROGRAMS, &sc);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s", sc.bin[0]);
    size_t len;
    unsigned char *bytes = read_all(path, &len);
    tu_write_file(path, bytes, len / 2);
    struct stat st1, st2;
    ck_assert(stat(path, &st1) == 0);
    ck_assert(setenv("CLATTN_CACHE", "0", 1) == 0);
    float *o2, *l2;
    fresh_run(dev, &o2, &l2);
    ck_assert_msg(memcmp(o1, o2, NO * sizeof(float)) == 0 && memcmp(l1, l2, NL * sizeof(float)) == 0,
                  "%s: results differ between two runs without the cache", tu_label());
    ck_assert(stat(path, &st2) == 0);
    ck_assert_msg(same_file_state(&st1, &st2) && (size_t)st2.st_size == len / 2,
                  "%s: CLATTN_CACHE=0 but the damaged entry was rewritten", tu_label());
    scan_dir(folder, &sc);
    ck_assert_msg(sc.n_bin == 1 && sc.n_tmp == 0 && sc.n_other == 0, "%s: CLATTN_CACHE=0 but files appeared in %s",
                  tu_label(), folder);
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* 5. unusable cache folder                                                                        */
/* ---------------------------------------------------------------------------------------------- */

enum { BAD_XDG_IS_FILE, BAD_XDG_PARENT_IS_FILE, BAD_CLATTN_IS_FILE, BAD_COUNT };

static const char *const bad_names[BAD_COUNT] = {
    "XDG_CACHE_HOME is a regular file",
    "XDG_CACHE_HOME's parent is a regular file",
    "$XDG_CACHE_HOME/clattn is a regular file",
};

START_TEST(test_unusable)
{
    size_t kind = TU_CASE(_i), dev = TU_DEVICE(_i);
    tu_set_label("unusable cache folder (%s) on %s", bad_names[kind], tu_dev_spec[dev]);
    prepare_problem();
    const char *tmp = make_tmp_dir();
    unsetenv("CLATTN_CACHE");
    char file[2048], xdg[PATH_MAX];
    snprintf(file, sizeof file, "%s/%s", tmp, kind == BAD_CLATTN_IS_FILE ? "clattn" : "plain-file");
    static const unsigned char content[] = "not a folder\n";
    tu_write_file(file, content, sizeof content - 1);
    if (kind == BAD_XDG_IS_FILE)
        snprintf(xdg, sizeof xdg, "%s", file);
    else if (kind == BAD_XDG_PARENT_IS_FILE)
        snprintf(xdg, sizeof xdg, "%s/sub", file);
    else
        snprintf(xdg, sizeof xdg, "%s", tmp);
    ck_assert(setenv("XDG_CACHE_HOME", xdg, 1) == 0);

    clattn_context *ctx = new_ctx(dev);
    run_checked(ctx, NULL, NULL);
    ck_assert_msg(clattn_last_error(ctx)[0] == '\0', "%s: clattn_last_error: %s", tu_label(), clattn_last_error(ctx));
    run_checked(ctx, NULL, NULL);
    ck_assert_msg(clattn_last_error(ctx)[0] == '\0', "%s: clattn_last_error: %s", tu_label(), clattn_last_error(ctx));
    free_ctx(ctx);
    ck_assert_msg(clattn_last_error(NULL)[0] == '\0', "%s: clattn_last_error(NULL): %s", tu_label(),
                  clattn_last_error(NULL));

    /* The file is untouched and nothing else appeared. */
    size_t len;
    unsigned char *now = read_all(file, &len);
    ck_assert_msg(len == sizeof content - 1 && memcmp(now, content, len) == 0, "%s: %s was modified", tu_label(),
                  file);
    scan sc;
    scan_dir(tmp, &sc);
    ck_assert_msg(sc.n_bin == 0 && sc.n_tmp == 0 && sc.n_other == 1, "%s: files appeared in %s", tu_label(), tmp);
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* 6. concurrent stores                                                                            */
/* ---------------------------------------------------------------------------------------------- */

#define THREADS 4
#define ROUNDS 2

typedef struct worker {
    const char *spec;
    pthread_barrier_t *barrier;
    float *o, *l;
    clattn_status create_st, st;
    char error[512];
} worker;

/* No check assertions here: they must run in the test's own thread. */
static void *worker_main(void *arg)
{
    worker *w = arg;
    clattn_context *ctx = NULL;
    w->create_st = clattn_context_create(&ctx, w->spec);
    if (w->create_st != CLATTN_SUCCESS)
        snprintf(w->error, sizeof w->error, "%s", clattn_last_error(NULL));
    pthread_barrier_wait(w->barrier); /* all threads build and store at once */
    if (w->create_st == CLATTN_SUCCESS) {
        w->st = clattn_sdpa_host(ctx, &prob.d, prob.q, prob.k, prob.v, NULL, w->o, NULL, w->l);
        if (w->st != CLATTN_SUCCESS)
            snprintf(w->error, sizeof w->error, "%s", clattn_last_error(ctx));
        clattn_context_free(ctx);
    }
    return NULL;
}

START_TEST(test_concurrent)
{
    size_t dev = (size_t)_i;
    tu_set_label("concurrent stores on %s: sequential reference", tu_dev_spec[dev]);
    prepare_problem();
    /* How many entries one context leaves (and the PoCL compile cache warmed, so that the threads'
     * builds end close together). */
    const char *ref_root = fresh_cache_env();
    char folder[PATH_MAX];
    cache_folder(folder, ref_root, 0);
    fresh_run(dev, NULL, NULL);
    scan sc;
    check_folder(folder, PROGRAMS, &sc);
    const size_t programs = sc.n_bin;

    for (int round = 0; round < ROUNDS; round++) {
        tu_set_label("concurrent stores on %s: round %d, %d threads", tu_dev_spec[dev], round, THREADS);
        const char *root = fresh_cache_env();
        cache_folder(folder, root, 0);
        pthread_barrier_t barrier;
        ck_assert(pthread_barrier_init(&barrier, NULL, THREADS) == 0);
        worker w[THREADS];
        pthread_t th[THREADS];
        for (int t = 0; t < THREADS; t++) {
            memset(&w[t], 0, sizeof w[t]);
            w[t].spec = tu_dev_spec[dev];
            w[t].barrier = &barrier;
            w[t].o = tu_host_alloc(NO, NULL);
            w[t].l = tu_host_alloc(NL, NULL);
        }
        int started = 0;
        for (int t = 0; t < THREADS; t++)
            if (pthread_create(&th[t], NULL, worker_main, &w[t]) == 0)
                started++;
            else
                break;
        if (started != THREADS) {
            /* The barrier would never open: nothing to join safely. */
            ck_abort_msg("%s: pthread_create failed after %d threads", tu_label(), started);
        }
        for (int t = 0; t < THREADS; t++)
            pthread_join(th[t], NULL);
        pthread_barrier_destroy(&barrier);
        for (int t = 0; t < THREADS; t++) {
            ck_assert_msg(w[t].create_st == CLATTN_SUCCESS, "%s: thread %d: clattn_context_create: %s: %s", tu_label(),
                          t, clattn_status_string(w[t].create_st), w[t].error);
            ck_assert_msg(w[t].st == CLATTN_SUCCESS, "%s: thread %d: clattn_sdpa_host: %s: %s", tu_label(), t,
                          clattn_status_string(w[t].st), w[t].error);
            tu_host_check_guard(w[t].o, NO, "out");
            tu_host_check_guard(w[t].l, NL, "lse");
            check_close_named("out", w[t].o, prob.ro, NO, NULL);
            check_close_named("lse", w[t].l, prob.rl, NL, NULL);
        }
        check_folder(folder, programs, &sc);

        /* What the threads left serves a new context. */
        fresh_run(dev, NULL, NULL);
        check_folder(folder, programs, &sc);
        tu_rm_rf(root);
    }
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* 7. HOME fallback                                                                                */
/* ---------------------------------------------------------------------------------------------- */

START_TEST(test_home)
{
    size_t dev = (size_t)_i;
    prepare_problem();
    unsetenv("CLATTN_CACHE");
    char folder[PATH_MAX];
    scan sc;

    /* XDG_CACHE_HOME unset, then set but empty (the XDG spec: treat as unset). */
    for (int empty = 0; empty < 2; empty++) {
        tu_set_label("HOME fallback on %s, XDG_CACHE_HOME %s", tu_dev_spec[dev], empty ? "empty" : "unset");
        const char *home = make_tmp_dir();
        ck_assert(setenv("HOME", home, 1) == 0);
        if (empty)
            ck_assert(setenv("XDG_CACHE_HOME", "", 1) == 0);
        else
            unsetenv("XDG_CACHE_HOME");
        fresh_run(dev, NULL, NULL);
        cache_folder(folder, home, 1);
        check_folder(folder, PROGRAMS, &sc);
        scan_dir(home, &sc);
        ck_assert_msg(sc.n_bin == 0 && sc.n_tmp == 0 && sc.n_other == 1, "%s: unexpected files in $HOME", tu_label());
        fresh_run(dev, NULL, NULL); /* loads it */
        check_folder(folder, PROGRAMS, &sc);
    }

    /* Neither set: no cache, still correct. */
    tu_set_label("HOME fallback on %s, neither HOME nor XDG_CACHE_HOME set", tu_dev_spec[dev]);
    unsetenv("HOME");
    unsetenv("XDG_CACHE_HOME");
    fresh_run(dev, NULL, NULL);
}
END_TEST

/* What the cache trusts: a private folder and private regular files of this user, nothing else. */
START_TEST(test_trust)
{
    size_t dev = (size_t)_i;
    prepare_problem();
    char folder[PATH_MAX];
    scan sc;
    struct stat st;

    /* The folder clattn creates is private. */
    tu_set_label("cache trust on %s: a new folder", tu_dev_spec[dev]);
    const char *root = fresh_cache_env();
    fresh_run(dev, NULL, NULL);
    cache_folder(folder, root, 0);
    check_folder(folder, PROGRAMS, &sc);
    ck_assert_int_eq(stat(folder, &st), 0);
    ck_assert_msg((st.st_mode & 0777) == 0700, "%s: the folder has mode %o, not 0700", tu_label(),
                  (unsigned)(st.st_mode & 0777));

    /* An entry that is not private, or not ours, or a link, is not loaded: it is rebuilt and replaced
     * by a private file of ours (a trusted entry would be loaded and left as it is). */
    static const char *const tampering[] = {"group-writable", "world-writable", "a symbolic link", "another owner"};
    for (size_t t = 0; t < sizeof tampering / sizeof tampering[0]; t++) {
        tu_set_label("cache trust on %s: an entry that is %s", tu_dev_spec[dev], tampering[t]);
        scan_dir(folder, &sc);
        const char *victim = sc.bin[0];
        if (t == 0 || t == 1) {
            ck_assert_int_eq(chmod(victim, t == 0 ? 0660 : 0606), 0);
        } else if (t == 2) {
            char elsewhere[PATH_MAX];
            snprintf(elsewhere, sizeof elsewhere, "%s/moved.bin", make_tmp_dir());
            ck_assert_int_eq(rename(victim, elsewhere), 0);
            ck_assert_int_eq(symlink(elsewhere, victim), 0);
        } else {
            if (geteuid() != 0) {
                printf("  %s: not root, cannot give the entry another owner: not checked\n", tu_label());
                continue;
            }
            ck_assert_int_eq(chown(victim, 12345, (gid_t)-1), 0);
        }
        fresh_run(dev, NULL, NULL);
        ck_assert_int_eq(lstat(victim, &st), 0);
        ck_assert_msg(S_ISREG(st.st_mode) && st.st_uid == geteuid() && (st.st_mode & 0077) == 0,
                      "%s: the entry was used instead of rebuilt (mode %o, owner %u)", tu_label(),
                      (unsigned)st.st_mode, (unsigned)st.st_uid);
        check_folder(folder, PROGRAMS, &sc);
    }

    /* A folder others can write, or a link, is not used at all, with a warning. */
    static const char *const folders[] = {"writable by other users", "a symbolic link"};
    for (size_t t = 0; t < 2; t++) {
        tu_set_label("cache trust on %s: a folder that is %s", tu_dev_spec[dev], folders[t]);
        root = fresh_cache_env();
        cache_folder(folder, root, 0);
        const char *target = make_tmp_dir(); /* private, but reached through a link */
        if (t == 0) {
            ck_assert_int_eq(mkdir(folder, 0700), 0);
            ck_assert_int_eq(chmod(folder, 0777), 0);
        } else {
            ck_assert_int_eq(symlink(target, folder), 0);
        }
        clattn_context *ctx = new_ctx(dev);
        run_checked(ctx, NULL, NULL);
        ck_assert_msg(strstr(clattn_last_warning(ctx), folders[t]) != NULL, "%s: warning \"%s\"", tu_label(),
                      clattn_last_warning(ctx));
        free_ctx(ctx);
        scan_dir(t == 0 ? folder : target, &sc);
        ck_assert_msg(sc.n_bin == 0 && sc.n_tmp == 0, "%s: %zu entries were written there", tu_label(), sc.n_bin);
    }

    /* A relative XDG_CACHE_HOME is ignored (XDG base-directory specification): $HOME/.cache is used. */
    tu_set_label("cache trust on %s: a relative XDG_CACHE_HOME", tu_dev_spec[dev]);
    const char *home = make_tmp_dir();
    ck_assert(setenv("HOME", home, 1) == 0);
    ck_assert(setenv("XDG_CACHE_HOME", "clattn-relative-cache", 1) == 0);
    fresh_run(dev, NULL, NULL);
    cache_folder(folder, home, 1);
    check_folder(folder, PROGRAMS, &sc);
    ck_assert_msg(access("clattn-relative-cache", F_OK) != 0, "%s: a relative folder was created", tu_label());
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("cache");
    TCase *tc = cache_tcase("store");
    tcase_add_loop_test(tc, test_store, 0, (int)tu_ndev);
    suite_add_tcase(s, tc);
    tc = cache_tcase("reuse");
    tcase_add_loop_test(tc, test_reuse, 0, (int)tu_ndev);
    suite_add_tcase(s, tc);
    tc = cache_tcase("damaged");
    tcase_add_loop_test(tc, test_damaged, 0, (int)(DMG_COUNT * tu_ndev));
    suite_add_tcase(s, tc);
    tc = cache_tcase("disabled");
    tcase_add_loop_test(tc, test_disabled, 0, (int)tu_ndev);
    suite_add_tcase(s, tc);
    tc = cache_tcase("unusable");
    tcase_add_loop_test(tc, test_unusable, 0, (int)(BAD_COUNT * tu_ndev));
    suite_add_tcase(s, tc);
    tc = cache_tcase("concurrent");
    tcase_add_loop_test(tc, test_concurrent, 0, (int)tu_ndev);
    suite_add_tcase(s, tc);
    tc = cache_tcase("home");
    tcase_add_loop_test(tc, test_home, 0, (int)tu_ndev);
    suite_add_tcase(s, tc);
    tc = cache_tcase("trust");
    tcase_add_loop_test(tc, test_trust, 0, (int)tu_ndev);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_main(make_suite); }
