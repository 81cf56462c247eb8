/*
 * The on-disk program cache (src/runtime/cache.c), seen from outside: where entries land, what they hold,
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
#include "cache_test.h"

#include "hash.h" /* the cache's checksums */

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
const char *make_tmp_dir(void) { return tu_scratch_dir("clattn-test-cache"); }

/* XDG_CACHE_HOME = a fresh folder, CLATTN_CACHE unset. Returns the folder. */
const char *fresh_cache_env(void)
{
    const char *dir = make_tmp_dir();
    ck_assert(setenv("XDG_CACHE_HOME", dir, 1) == 0);
    unsetenv("CLATTN_CACHE");
    return dir;
}

clattn_context *new_ctx(size_t dev)
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

void free_ctx(clattn_context *ctx)
{
    for (int i = 0; i < MAX_CTX; i++)
        if (owned[i] == ctx)
            owned[i] = NULL;
    clattn_context_free(ctx);
}

/* ---------------------------------------------------------------------------------------------- */
/* The SDPA problem every case runs                                                                */
/* ---------------------------------------------------------------------------------------------- */



problem prob;

void prepare_problem(void)
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

const char *fresh_case(char *folder)
{
    prepare_problem();
    const char *root = fresh_cache_env();
    cache_folder(folder, root, 0);
    return root;
}

/* Fused SDPA on ctx, checked against the reference; the outputs (tracked) for bit comparisons. */
void run_checked(clattn_context *ctx, float **out_o, float **out_l)
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
void fresh_run(size_t dev, float **out_o, float **out_l)
{
    clattn_context *ctx = new_ctx(dev);
    run_checked(ctx, out_o, out_l);
    free_ctx(ctx);
}

/* ---------------------------------------------------------------------------------------------- */
/* Looking at the cache folder                                                                     */
/* ---------------------------------------------------------------------------------------------- */


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

void scan_dir(const char *dir, scan *sc)
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
void cache_folder(char *out, const char *root, int home)
{
    snprintf(out, PATH_MAX, home ? "%s/.cache/clattn" : "%s/clattn", root);
}

/* The whole file (tracked); fails the test when it cannot be read. */
unsigned char *read_all(const char *path, size_t *len)
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
void check_folder(const char *folder, size_t want, scan *sc)
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


/* ---------------------------------------------------------------------------------------------- */
/* 1. store                                                                                        */
/* ---------------------------------------------------------------------------------------------- */

START_TEST(test_store)
{
    size_t dev = (size_t)_i;
    tu_set_label("store on %s", tu_dev_spec[dev]);
    char folder[PATH_MAX];
    fresh_case(folder);

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
    char folder[PATH_MAX];
    fresh_case(folder);

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
    char folder[PATH_MAX];
    fresh_case(folder);

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


void cache_add_cases(Suite *s, const cache_case *cases, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        TCase *tc = cache_tcase(cases[i].name);
        tcase_add_loop_test(tc, cases[i].fn, 0, (int)(cases[i].per_device * tu_ndev));
        suite_add_tcase(s, tc);
    }
}

static Suite *make_suite(void)
{
    const cache_case cases[] = {
        {"store", test_store, 1}, {"reuse", test_reuse, 1}, {"damaged", test_damaged, DMG_COUNT},
        {"disabled", test_disabled, 1},
    };
    Suite *s = suite_create("cache");
    cache_add_cases(s, cases, sizeof cases / sizeof cases[0]);
    cache_add_folder_cases(s);
    return s;
}

int main(void) { return tu_main(make_suite); }
