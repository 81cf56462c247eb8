/* On-disk cache of compiled program binaries, so that a fresh process skips the (slow) OpenCL C
 * compile, and of small tuning records stored the same way. An entry is keyed by everything that can change the binary — kernel source (by SHA-256),
 * build options, platform and its version, device, driver and library version — and carries that key
 * and a checksum of the binary, both checked on load: a stale, truncated or damaged entry is rebuilt
 * from source, never trusted. Entries are written under a temporary name and renamed, so a concurrent
 * process never reads half a file. Every failure here only means "no cache".
 *
 * What is trusted: a cached binary is code the device runs, so only files that no other user can
 * have written are loaded. The folder must be a real folder (not a symbolic link) owned by this user
 * and writable by nobody else (made 0700 when clattn creates it); an entry must be a regular file (not
 * followed through a link) owned by this user, writable by nobody else, and exactly as long as its
 * header says. Anything else is ignored, and an unsafe folder is not used at all (with a warning). */
#define _POSIX_C_SOURCE 200809L
#include "cache.h"

#include "context.h"
#include "error.h"
#include "hash.h"
#include "sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char cache_magic[8] = {'C', 'L', 'A', 'T', 'T', 'N', 'P', 'B'};
#define CACHE_FORMAT 1u
#define CACHE_MAX_BINARY ((uint64_t)512 << 20)

/* Written by this user only: owned by it and writable by neither group nor others. */
static bool owned_and_private(const struct stat *st)
{
    return st->st_uid == geteuid() && (st->st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

/* The folder of entries, or NULL when the cache is off, no folder is known (context options) or the
 * folder is not safe to load code from (then with a warning). A folder that does not exist yet is
 * fine: cache_store creates it privately. */
static const char *cache_dir(clattn_context *ctx)
{
    const char *dir = ctx->options.cache_enabled ? ctx->options.cache_dir : NULL;
    struct stat st;
    if (!dir || lstat(dir, &st) != 0)
        return dir;
    if (S_ISDIR(st.st_mode) && owned_and_private(&st))
        return dir;
    set_warning(ctx, "the program cache folder %.1024s is %s; the cache is not used", dir,
                S_ISLNK(st.st_mode)   ? "a symbolic link"
                : !S_ISDIR(st.st_mode) ? "not a folder"
                : st.st_uid != geteuid() ? "owned by another user"
                                        : "writable by other users");
    return NULL;
}

/* The key text names everything the binary depends on; its hash names the file. */
static char *make_key(clattn_context *ctx, const char *source, const char *options)
{
    char digest[65];
    sha256_hex(source, strlen(source), digest);
    const device_caps *c = &ctx->caps;
    size_t size = strlen(options) + strlen(c->name) + strlen(c->platform) + strlen(c->platform_version) +
                  strlen(c->driver) + 256;
    char *key = malloc(size);
    if (key)
        snprintf(key, size,
                 "clattn %s\nplatform %s\nplatform-version %s\ndevice %s\ndriver %s\noptions %s\nsource sha256 %s %zu\n",
                 CLATTN_VERSION_STRING, c->platform, c->platform_version, c->name, c->driver, options, digest,
                 strlen(source));
    return key;
}

static bool entry_path(clattn_context *ctx, const char *key, char *out, size_t size)
{
    const char *dir = cache_dir(ctx);
    if (!dir)
        return false;
    uint64_t a = hash_fnv1a(HASH_FNV1A_BASIS, key, strlen(key));
    uint64_t b = hash_fnv1a(0x84222325cbf29ce4ull, key, strlen(key));
    int n = snprintf(out, size, "%s/%016llx%016llx.bin", dir, (unsigned long long)a, (unsigned long long)b);
    return n > 0 && (size_t)n < size;
}

static bool read_exact(FILE *f, void *buf, size_t n) { return fread(buf, 1, n, f) == n; }

/* The payload of the entry stored under `key` (malloc'd, *len bytes), or NULL: missing, unsafe, stale
 * (another key in the file) or damaged (wrong length or checksum). */
static unsigned char *entry_read(clattn_context *ctx, const char *key, size_t *len)
{
    char path[4200];
    if (!entry_path(ctx, key, path, sizeof path))
        return NULL;
    /* Not through a symbolic link; only a private regular file of this user. */
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    FILE *f = NULL;
    if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || !owned_and_private(&st) ||
                    (f = fdopen(fd, "rb")) == NULL))
        close(fd);
    unsigned char *payload = NULL;
    char magic[8];
    uint32_t format, key_len;
    uint64_t payload_len, checksum;
    char *stored_key = NULL;
    if (!f || !read_exact(f, magic, 8) || memcmp(magic, cache_magic, 8) != 0 || !read_exact(f, &format, 4) ||
        format != CACHE_FORMAT || !read_exact(f, &key_len, 4) || key_len != strlen(key))
        goto done;
    stored_key = malloc(key_len);
    if (!stored_key || !read_exact(f, stored_key, key_len) || memcmp(stored_key, key, key_len) != 0 ||
        !read_exact(f, &payload_len, 8) || !read_exact(f, &checksum, 8) || payload_len == 0 ||
        payload_len > CACHE_MAX_BINARY || (uint64_t)st.st_size != 8 + 4 + 4 + (uint64_t)key_len + 8 + 8 + payload_len)
        goto done; /* the file's size is checked before anything is allocated for the payload */
    payload = malloc((size_t)payload_len);
    if (payload && (!read_exact(f, payload, (size_t)payload_len) || fgetc(f) != EOF ||
                    hash_fnv1a(HASH_FNV1A_BASIS, payload, (size_t)payload_len) != checksum)) {
        free(payload);
        payload = NULL;
    }
    if (payload)
        *len = (size_t)payload_len;
done:
    if (f)
        fclose(f);
    free(stored_key);
    return payload;
}

/* mkdir -p for the cache folder; the folders it creates are private (0700). */
static bool make_dirs(const char *path)
{
    char buf[4096];
    size_t n = strlen(path);
    if (n >= sizeof buf)
        return false;
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] == '/' || buf[i] == '\0') {
            char c = buf[i];
            buf[i] = '\0';
            if (mkdir(buf, 0700) != 0 && errno != EEXIST)
                return false;
            buf[i] = c;
        }
    }
    return true;
}

/* Store `payload` under `key`; failures (read-only or full disk) are ignored. */
static void entry_write(clattn_context *ctx, const char *key, const void *payload, size_t len)
{
    const char *dir = cache_dir(ctx);
    char path[4200], tmp[4300];
    if (!dir || !make_dirs(dir) || !entry_path(ctx, key, path, sizeof path))
        return;
    /* Unique per process and per call, so that threads and processes storing the same entry at once
     * each write their own temporary; the last rename wins, and every rename installs a whole file. */
    static atomic_uint counter;
    snprintf(tmp, sizeof tmp, "%s.%ld.%u.tmp", path, (long)getpid(), atomic_fetch_add(&counter, 1u));
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!f) {
        if (fd >= 0)
            close(fd);
        return;
    }
    uint32_t format = CACHE_FORMAT, key_len = (uint32_t)strlen(key);
    uint64_t payload_len = len, checksum = hash_fnv1a(HASH_FNV1A_BASIS, payload, len);
    bool ok = fwrite(cache_magic, 1, 8, f) == 8 && fwrite(&format, 4, 1, f) == 1 && fwrite(&key_len, 4, 1, f) == 1 &&
              fwrite(key, 1, key_len, f) == key_len && fwrite(&payload_len, 8, 1, f) == 1 &&
              fwrite(&checksum, 8, 1, f) == 1 && fwrite(payload, 1, len, f) == len && fflush(f) == 0;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0)
        remove(tmp); /* a full or read-only disk: carry on without the cache */
}

/* The payload stored for (source, options) on this device, or NULL (see entry_read). */
static unsigned char *keyed_read(clattn_context *ctx, const char *source, const char *options, size_t *len)
{
    if (!cache_dir(ctx))
        return NULL;
    char *key = make_key(ctx, source, options);
    unsigned char *payload = key ? entry_read(ctx, key, len) : NULL;
    free(key);
    return payload;
}

cl_program cache_load(clattn_context *ctx, const char *source, const char *options)
{
    size_t len = 0;
    unsigned char *binary = keyed_read(ctx, source, options, &len);
    if (!binary)
        return NULL;
    cl_int err, binary_status;
    const unsigned char *bin = binary;
    cl_program program = clCreateProgramWithBinary(ctx->context, 1, &ctx->device, &len, &bin, &binary_status, &err);
    free(binary);
    if (err != CL_SUCCESS || binary_status != CL_SUCCESS) {
        if (err == CL_SUCCESS)
            clReleaseProgram(program);
        return NULL;
    }
    if (clBuildProgram(program, 1, &ctx->device, options, NULL, NULL) != CL_SUCCESS) {
        clReleaseProgram(program); /* a binary the driver no longer accepts: rebuild from source */
        return NULL;
    }
    return program;
}

void cache_store(clattn_context *ctx, const char *source, const char *options, cl_program program)
{
    if (!cache_dir(ctx))
        return;
    size_t len = 0;
    if (clGetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, sizeof len, &len, NULL) != CL_SUCCESS || len == 0 ||
        len > CACHE_MAX_BINARY)
        return;
    unsigned char *binary = malloc(len);
    char *key = make_key(ctx, source, options);
    if (binary && key && clGetProgramInfo(program, CL_PROGRAM_BINARIES, sizeof binary, &binary, NULL) == CL_SUCCESS)
        entry_write(ctx, key, binary, len);
    free(binary);
    free(key);
}

/* A record is keyed like a program whose source and options are its name: by device, driver and
 * library version, so a record made under another of them is never found; the name stays readable
 * in the entry's key. */
char *cache_record_load(clattn_context *ctx, const char *name)
{
    size_t len = 0;
    unsigned char *data = keyed_read(ctx, name, name, &len);
    char *text = data ? realloc(data, len + 1) : NULL;
    if (!text) {
        free(data);
        return NULL;
    }
    text[len] = '\0';
    if (strlen(text) != len) { /* a NUL inside: not a record clattn wrote */
        free(text);
        return NULL;
    }
    if (len > 0 && text[len - 1] == '\n') /* records are one line */
        text[len - 1] = '\0';
    return text;
}

void cache_record_store(clattn_context *ctx, const char *name, const char *text)
{
    if (!cache_dir(ctx))
        return;
    char *key = make_key(ctx, name, name);
    if (key && text[0])
        entry_write(ctx, key, text, strlen(text));
    free(key);
}
