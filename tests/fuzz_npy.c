/* Fuzz target for the .npy reader (tools/npy.c), and the runner that replays a corpus without a fuzzer.
 *
 * LLVMFuzzerTestOneInput parses the input with npy_parse and checks what comes back:
 *  - a rejection leaves the array cleared and gives a non-empty, NUL-terminated, one-line, printable
 *    message;
 *  - a success has ndim <= NPY_MAX_DIMS, a known dtype, count == product(shape), non-NULL data, a data
 *    block that lies inside the input right after the header, and data equal to those input bytes (bools
 *    as exactly 0 or 1); the header holds no NUL byte (Python, hence numpy, cannot read one);
 *  - npy_to_float and npy_to_int64 succeed exactly for the dtypes they take, with the right values;
 *  - npy_load of the same bytes written to a file agrees with npy_parse (result, message, array); the
 *    fuzzer checks this for accepted inputs, the replay runner for every file.
 * A violated invariant calls abort(), which the fuzzer reports as a crash.
 *
 * Memory bound: when the executable is linked with -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc
 * (meson defines NPY_FUZZ_WRAP_ALLOC then), every allocation request is checked while the reader runs.
 * npy_parse and npy_load may not request more than the input's size plus NPY_FUZZ_SLACK bytes in one
 * allocation (npy_parse: in all its allocations together), a conversion no more than its result's size.
 *
 * Built with -DNPY_FUZZ_LIBFUZZER (meson -Dfuzzing=true, clang), libFuzzer supplies main(). Otherwise
 * main() replays files: each argument is a file or a folder of files (default: $NPY_FUZZ_CORPUS), every
 * file runs under an alarm, and a file named ok-* must parse while one named bad-* must be rejected.
 * Exit status 0 when every file passed. */
#define _POSIX_C_SOURCE 200809L /* alarm, sigaction, mkstemp, ftruncate, pwrite, opendir */

#include "npy.h"

#include <dirent.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* What npy_parse/npy_load may allocate beyond the input's size. */
#define NPY_FUZZ_SLACK ((size_t)64 << 10)

/* The replay runner's per-file limit; a parse of a file this small takes microseconds. */
#define NPY_FUZZ_SECONDS_PER_FILE 10

static const char *current_input; /* the file being replayed, for messages; NULL under libFuzzer */

static void violation(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2), noreturn))
#endif
    ;

/* ---------------------------------------------------------------------------------------------- */
/* Allocation accounting                                                                           */
/* ---------------------------------------------------------------------------------------------- */

/* One phase at a time (a call into npy.c): its name, the limit on one request and on their sum, and what
 * it asked for. Thread-local so that a fuzzer's helper threads are never counted. */
typedef struct alloc_phase {
    const char *name;
    bool on;
    size_t limit_one, limit_total;
    size_t largest, total, calls;
} alloc_phase;

static _Thread_local alloc_phase phase;

#if defined(NPY_FUZZ_WRAP_ALLOC) && NPY_FUZZ_WRAP_ALLOC
void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t size);

static void account(size_t bytes)
{
    if (!phase.on)
        return;
    phase.calls++;
    if (bytes > phase.largest)
        phase.largest = bytes;
    phase.total = bytes > SIZE_MAX - phase.total ? SIZE_MAX : phase.total + bytes;
    if (bytes > phase.limit_one || phase.total > phase.limit_total) {
        phase.on = false; /* the report below may allocate */
        violation("%s asked for %zu bytes (%zu in %zu requests); the limit is %zu in one request, %zu in all",
                  phase.name, bytes, phase.total, phase.calls, phase.limit_one, phase.limit_total);
    }
}

void *__wrap_malloc(size_t size)
{
    account(size);
    return __real_malloc(size);
}

void *__wrap_calloc(size_t n, size_t size)
{
    account(size != 0 && n > SIZE_MAX / size ? SIZE_MAX : n * size);
    return __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t size)
{
    account(size);
    return __real_realloc(p, size);
}

#define NPY_FUZZ_ACCOUNTING true
#else
#define NPY_FUZZ_ACCOUNTING false
#endif

static void phase_begin(const char *name, size_t limit_one, size_t limit_total)
{
    phase = (alloc_phase){.name = name, .on = true, .limit_one = limit_one, .limit_total = limit_total};
}

static void phase_end(void) { phase.on = false; }

/* ---------------------------------------------------------------------------------------------- */
/* Invariants                                                                                      */
/* ---------------------------------------------------------------------------------------------- */

static void violation(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fuzz_npy: invariant violated: ");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, current_input ? " (input %s)\n" : "\n", current_input);
    fflush(stderr);
    abort();
}

static bool is_cleared(const npy_array *a)
{
    static const npy_array zero;
    return a->dtype == zero.dtype && a->ndim == 0 && a->count == 0 && a->data == NULL &&
           memcmp(a->shape, zero.shape, sizeof zero.shape) == 0;
}

/* err was filled with 0x5A before the call: the message must end inside it and be one printable line. */
static void check_message(const char *fn, const char *err, size_t err_size)
{
    const char *end = memchr(err, '\0', err_size);
    if (!end)
        violation("%s: the message is not NUL-terminated within %zu bytes", fn, err_size);
    if (end == err)
        violation("%s failed with an empty message", fn);
    for (const char *p = err; p < end; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7E)
            violation("%s: byte 0x%02x at %zu of the message is not printable ASCII: \"%s\"", fn,
                      (unsigned char)*p, (size_t)(p - err), err);
}

/* Where the data starts according to the prefix; only called once npy_parse accepted the input. */
static size_t data_offset_of(const uint8_t *data, size_t size, size_t *header_start, size_t *header_len)
{
    if (size < 10 || data[6] < 1 || data[6] > 3)
        violation("npy_parse accepted a %zu-byte input with version byte %u", size, size > 6 ? data[6] : 0u);
    const size_t prefix = data[6] == 1 ? 10 : 12;
    if (size < prefix)
        violation("npy_parse accepted a %zu-byte input shorter than its prefix", size);
    size_t hlen = (size_t)data[8] | (size_t)data[9] << 8;
    if (prefix == 12)
        hlen |= (size_t)data[10] << 16 | (size_t)data[11] << 24;
    if (hlen > size - prefix)
        violation("npy_parse accepted a header of %zu bytes in a %zu-byte input", hlen, size);
    *header_start = prefix;
    *header_len = hlen;
    return prefix + hlen;
}

static void check_array(const npy_array *a, const uint8_t *data, size_t size)
{
    if (a->ndim > NPY_MAX_DIMS)
        violation("ndim %zu > %d", a->ndim, NPY_MAX_DIMS);
    if (a->dtype != NPY_F4 && a->dtype != NPY_F8 && a->dtype != NPY_I4 && a->dtype != NPY_I8 &&
        a->dtype != NPY_B1 && a->dtype != NPY_F2 && a->dtype != NPY_U2)
        violation("unknown dtype %d", (int)a->dtype);
    if (!a->data)
        violation("data is NULL after a successful parse");
    size_t product = 1;
    bool zero = false;
    for (size_t i = 0; i < a->ndim; i++)
        zero = zero || a->shape[i] == 0;
    for (size_t i = 0; i < a->ndim && !zero; i++) {
        if (a->shape[i] != 0 && product > SIZE_MAX / a->shape[i])
            violation("accepted a shape whose product overflows size_t");
        product *= a->shape[i];
    }
    if (zero)
        product = 0;
    if (a->count != product)
        violation("count %zu != product of shape %zu", a->count, product);
    for (size_t i = a->ndim; i < NPY_MAX_DIMS; i++)
        if (a->shape[i] != 0)
            violation("shape[%zu] = %zu beyond ndim %zu", i, a->shape[i], a->ndim);

    const size_t esize = npy_dtype_size(a->dtype);
    if (a->count > SIZE_MAX / esize)
        violation("count %zu of %zu-byte elements overflows size_t", a->count, esize);
    const size_t bytes = a->count * esize;
    size_t header_start, header_len;
    const size_t offset = data_offset_of(data, size, &header_start, &header_len);
    if (bytes > size - offset)
        violation("%zu bytes of data do not fit in the %zu bytes after the header", bytes, size - offset);
    if (memchr(data + header_start, '\0', header_len))
        violation("accepted a header that holds a NUL byte");

    const unsigned char *got = a->data, *src = data + offset;
    if (a->dtype == NPY_B1) {
        for (size_t i = 0; i < bytes; i++)
            if (got[i] != (src[i] != 0))
                violation("bool %zu is %u, input byte 0x%02x", i, got[i], src[i]);
    } else {
        const uint16_t one = 1;
        unsigned char first;
        memcpy(&first, &one, 1);
        if (first == 1 && bytes > 0 && memcmp(got, src, bytes) != 0)
            violation("the data differs from the input bytes after the header");
    }
}

/* What a conversion may allocate: its result, at least 1 byte (it never returns NULL). */
static size_t result_bytes(size_t count, size_t size)
{
    if (count > SIZE_MAX / size)
        violation("a converted copy of %zu elements would overflow size_t", count);
    return count > 0 ? count * size : 1;
}

static void check_conversions(const npy_array *a)
{
    char err[256];
    float *f = (float *)&f; /* not NULL, to see that a failure clears it */
    const bool is_float = a->dtype == NPY_F4 || a->dtype == NPY_F8 || a->dtype == NPY_F2;
    memset(err, 0x5A, sizeof err);
    phase_begin("npy_to_float", result_bytes(a->count, sizeof(float)), SIZE_MAX);
    const int frc = npy_to_float(a, &f, err, sizeof err);
    phase_end();
    if (frc != 0) {
        if (is_float)
            violation("npy_to_float rejected a %s array: %.200s", npy_dtype_name(a->dtype), err);
        if (f)
            violation("npy_to_float failed but left *out set");
        check_message("npy_to_float", err, sizeof err);
    } else {
        if (!is_float)
            violation("npy_to_float accepted a %s array", npy_dtype_name(a->dtype));
        if (!f)
            violation("npy_to_float returned NULL");
        for (size_t i = 0; i < a->count; i++) {
            if (a->dtype == NPY_F4) {
                if (memcmp(&f[i], (const float *)a->data + i, sizeof(float)) != 0)
                    violation("npy_to_float changed f4 element %zu", i);
                continue;
            }
            if (a->dtype == NPY_F2) { /* widening is exact: narrowing back gives the same bits */
                const uint16_t h = ((const uint16_t *)a->data)[i];
                if (isnan(f[i]) ? (h & 0x7C00u) != 0x7C00u || (h & 0x3FFu) == 0 : npy_float_to_half(f[i]) != h)
                    violation("npy_to_float turned f2 element %zu = 0x%04x into %.9g", i, h, (double)f[i]);
                continue;
            }
            const double d = ((const double *)a->data)[i];
            const bool ok = isnan(d)                   ? isnan(f[i])
                            : fabs(d) <= (double)FLT_MAX ? f[i] == (float)d
                            : d > 0                      ? f[i] == FLT_MAX || f[i] == INFINITY
                                                         : f[i] == -FLT_MAX || f[i] == -INFINITY;
            if (!ok)
                violation("npy_to_float turned f8 element %zu = %.17g into %.9g", i, d, (double)f[i]);
        }
        free(f);
    }

    long long *v = (long long *)&v;
    const bool is_int = a->dtype == NPY_I4 || a->dtype == NPY_I8;
    memset(err, 0x5A, sizeof err);
    phase_begin("npy_to_int64", result_bytes(a->count, sizeof(long long)), SIZE_MAX);
    const int irc = npy_to_int64(a, &v, err, sizeof err);
    phase_end();
    if (irc != 0) {
        if (is_int)
            violation("npy_to_int64 rejected a %s array: %.200s", npy_dtype_name(a->dtype), err);
        if (v)
            violation("npy_to_int64 failed but left *out set");
        check_message("npy_to_int64", err, sizeof err);
    } else {
        if (!is_int)
            violation("npy_to_int64 accepted a %s array", npy_dtype_name(a->dtype));
        if (!v)
            violation("npy_to_int64 returned NULL");
        for (size_t i = 0; i < a->count; i++) {
            const long long want =
                a->dtype == NPY_I4 ? ((const int32_t *)a->data)[i] : ((const int64_t *)a->data)[i];
            if (v[i] != want)
                violation("npy_to_int64 turned element %zu = %lld into %lld", i, want, v[i]);
        }
        free(v);
    }
}

/* ---------------------------------------------------------------------------------------------- */
/* npy_load on the same bytes                                                                      */
/* ---------------------------------------------------------------------------------------------- */

/* One scratch file per process, rewritten for every input. On Linux it is unlinked at once and reopened
 * through /proc/self/fd, so a crash leaves nothing behind; elsewhere it is removed at exit. */
static int scratch_fd = -1;
/* npy_load differs from npy_parse only in reading the file and in what it does after a successful parse,
 * so the fuzzer (at several thousand inputs a second, most of them rejected) checks it on accepted inputs
 * only; the replay runner checks every file. */
static bool load_every_input;
static char scratch_path[4096];
static bool scratch_failed;

static void remove_scratch(void) { unlink(scratch_path); }

static bool scratch_open(void)
{
    if (scratch_fd >= 0 || scratch_failed)
        return scratch_fd >= 0;
    const char *dir = getenv("TMPDIR");
    snprintf(scratch_path, sizeof scratch_path, "%s/fuzz_npy-XXXXXX", dir && *dir ? dir : "/tmp");
    scratch_fd = mkstemp(scratch_path);
    if (scratch_fd < 0) {
        fprintf(stderr, "fuzz_npy: cannot create a scratch file in %s; npy_load is not checked\n",
                dir && *dir ? dir : "/tmp");
        scratch_failed = true;
        return false;
    }
    char proc_path[64];
    snprintf(proc_path, sizeof proc_path, "/proc/self/fd/%d", scratch_fd);
    const int probe = open(proc_path, O_RDONLY);
    if (probe >= 0) {
        close(probe);
        unlink(scratch_path);
        snprintf(scratch_path, sizeof scratch_path, "%s", proc_path);
    } else {
        atexit(remove_scratch);
    }
    return true;
}

static void check_load(const uint8_t *data, size_t size, int parse_rc, const npy_array *parsed,
                       const char *parse_err)
{
    if (!scratch_open())
        return;
    if (ftruncate(scratch_fd, 0) != 0 || (size > 0 && pwrite(scratch_fd, data, size, 0) != (ssize_t)size)) {
        perror("fuzz_npy: writing the scratch file");
        abort(); /* not the reader's fault, but nothing below would mean anything */
    }
    npy_array a;
    char err[256];
    memset(&a, 0x5A, sizeof a);
    memset(err, 0x5A, sizeof err);
    phase_begin("npy_load", size + NPY_FUZZ_SLACK, SIZE_MAX);
    const int rc = npy_load(scratch_path, &a, err, sizeof err);
    phase_end();
    if ((rc == 0) != (parse_rc == 0))
        violation("npy_load %s what npy_parse %s (%.200s)", rc == 0 ? "accepted" : "rejected",
                  parse_rc == 0 ? "accepted" : "rejected", rc == 0 ? parse_err : err);
    if (rc != 0) {
        if (!is_cleared(&a))
            violation("npy_load failed without clearing the array");
        check_message("npy_load", err, sizeof err);
        if (strcmp(err, parse_err) != 0)
            violation("npy_load says \"%.200s\", npy_parse \"%.200s\"", err, parse_err);
        return;
    }
    if (a.dtype != parsed->dtype || a.ndim != parsed->ndim || a.count != parsed->count ||
        memcmp(a.shape, parsed->shape, sizeof a.shape) != 0)
        violation("npy_load and npy_parse describe the array differently");
    if (!a.data)
        violation("npy_load returned NULL data");
    if (a.count > 0 && memcmp(a.data, parsed->data, a.count * npy_dtype_size(a.dtype)) != 0)
        violation("npy_load and npy_parse return different data");
    npy_free(&a);
    if (!is_cleared(&a))
        violation("npy_free did not clear the array");
}

/* ---------------------------------------------------------------------------------------------- */
/* The target                                                                                      */
/* ---------------------------------------------------------------------------------------------- */

/* Everything above for one input; the result of npy_parse, and its message in err. */
static int fuzz_one(const uint8_t *data, size_t size, char *err, size_t err_size)
{
    npy_array a;
    memset(&a, 0x5A, sizeof a); /* npy_parse must clear it whatever it held */
    memset(err, 0x5A, err_size);
    const size_t limit = size > SIZE_MAX - NPY_FUZZ_SLACK ? SIZE_MAX : size + NPY_FUZZ_SLACK;
    phase_begin("npy_parse", limit, limit);
    const int rc = npy_parse(data, size, &a, err, err_size);
    phase_end();
    if (rc != 0) {
        if (!is_cleared(&a))
            violation("npy_parse failed without clearing the array");
        check_message("npy_parse", err, err_size);
    } else {
        check_array(&a, data, size);
        check_conversions(&a);
    }
    if (rc == 0 || load_every_input)
        check_load(data, size, rc, &a, err);
    npy_free(&a);
    if (!is_cleared(&a))
        violation("npy_free did not clear the array");
    npy_free(&a); /* twice is allowed */
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    fuzz_one(data, size, err, sizeof err);
    return 0;
}

/* ---------------------------------------------------------------------------------------------- */
/* Replay without a fuzzer                                                                         */
/* ---------------------------------------------------------------------------------------------- */

#if !(defined(NPY_FUZZ_LIBFUZZER) && NPY_FUZZ_LIBFUZZER)

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "fuzz_npy: an input ran past the time limit: ";
    ssize_t ignored = write(STDERR_FILENO, msg, sizeof msg - 1);
    if (current_input)
        ignored = write(STDERR_FILENO, current_input, strlen(current_input));
    ignored = write(STDERR_FILENO, "\n", 1);
    (void)ignored;
    _exit(1);
}

static bool has_prefix(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

static bool has_suffix(const char *s, const char *suffix)
{
    const size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

typedef struct totals {
    size_t files, parsed, rejected, failures, largest_parse_alloc;
} totals;

static unsigned char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    unsigned char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap)
            break;
        unsigned char *grown = realloc(buf, cap * 2);
        if (!grown) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = grown;
        cap *= 2;
    }
    const bool bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

static void replay_file(const char *path, totals *t)
{
    const char *slash = strrchr(path, '/');
    const char *name = slash ? slash + 1 : path;
    size_t len = 0;
    unsigned char *buf = read_file(path, &len);
    if (!buf) {
        fprintf(stderr, "FAIL %s: cannot read it\n", path);
        t->failures++;
        return;
    }
    char err[256];
    current_input = path;
    alarm(NPY_FUZZ_SECONDS_PER_FILE);
    const int rc = fuzz_one(buf, len, err, sizeof err);
    alarm(0);
    /* fuzz_one ended with npy_load and the conversions; run the parse alone once more for its figures */
    npy_array a;
    phase_begin("npy_parse", len + NPY_FUZZ_SLACK, len + NPY_FUZZ_SLACK);
    const int again = npy_parse(buf, len, &a, NULL, 0);
    phase_end();
    current_input = NULL;
    if (again != rc) {
        fprintf(stderr, "FAIL %s: npy_parse gave %d, then %d on the same bytes\n", name, rc, again);
        t->failures++;
    }
    if (phase.largest > t->largest_parse_alloc)
        t->largest_parse_alloc = phase.largest;
    t->files++;
    if (rc == 0) {
        t->parsed++;
        printf("parsed   %-56s %s, %zu-d, %zu elements (%zu bytes); allocated %zu\n", name,
               npy_dtype_name(a.dtype), a.ndim, a.count, len, phase.largest);
        npy_free(&a);
    } else {
        t->rejected++;
        printf("rejected %-56s %s\n", name, err);
    }
    if (has_prefix(name, "ok-") && rc != 0) {
        fprintf(stderr, "FAIL %s: a file named ok-* must parse, but: %s\n", name, err);
        t->failures++;
    }
    if (has_prefix(name, "bad-") && rc == 0) {
        fprintf(stderr, "FAIL %s: a file named bad-* must be rejected, but it parsed\n", name);
        t->failures++;
    }
    free(buf);
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every regular file of dir whose name does not start with '.', except libFuzzer dictionaries, in name
 * order. */
static void replay_dir(const char *dir, totals *t)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "FAIL %s: cannot open the folder\n", dir);
        t->failures++;
        return;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || has_suffix(e->d_name, ".dict"))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **grown = realloc(names, cap * sizeof *names);
            if (!grown)
                abort();
            names = grown;
        }
        const size_t len = strlen(dir) + 1 + strlen(e->d_name) + 1;
        names[n] = malloc(len);
        if (!names[n])
            abort();
        snprintf(names[n], len, "%s/%s", dir, e->d_name);
        n++;
    }
    closedir(d);
    if (n > 0)
        qsort(names, n, sizeof *names, compare_names);
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (stat(names[i], &st) == 0 && S_ISREG(st.st_mode))
            replay_file(names[i], t);
        free(names[i]);
    }
    free(names);
}

/* The accounting must see npy_parse's allocation, or the bound would pass without being checked. */
static bool accounting_works(void)
{
    static const char header[] = "{'descr': '<i4', 'fortran_order': False, 'shape': (1,), }\n";
    unsigned char image[10 + sizeof header - 1 + 4] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, sizeof header - 1, 0};
    memcpy(image + 10, header, sizeof header - 1);
    image[sizeof image - 4] = 1;
    npy_array a;
    phase_begin("npy_parse", SIZE_MAX, SIZE_MAX);
    const int rc = npy_parse(image, sizeof image, &a, NULL, 0);
    phase_end();
    if (rc != 0) {
        fprintf(stderr, "fuzz_npy: the built-in sample image was rejected\n");
        return false;
    }
    npy_free(&a);
    return phase.calls > 0 && phase.largest >= 4;
}

int main(int argc, char **argv)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    setvbuf(stdout, NULL, _IOLBF, 0);

    load_every_input = true;
    const bool accounting = NPY_FUZZ_ACCOUNTING;
    if (accounting && !accounting_works()) {
        fprintf(stderr, "fuzz_npy: the malloc wrappers are linked but npy_parse's allocation was not seen\n");
        return 1;
    }
    if (!accounting)
        printf("note: built without -Wl,--wrap=malloc: the allocation bound is not checked\n");

    totals t = {0};
    const char *env = getenv("NPY_FUZZ_CORPUS");
    if (argc < 2 && !(env && *env)) {
        fprintf(stderr, "usage: %s FILE_OR_FOLDER... (or set NPY_FUZZ_CORPUS)\n", argv[0]);
        return 2;
    }
    for (int i = 1; i < argc || (argc < 2 && i == 1); i++) {
        const char *arg = argc < 2 ? env : argv[i];
        struct stat st;
        if (stat(arg, &st) != 0) {
            fprintf(stderr, "FAIL %s: no such file or folder\n", arg);
            t.failures++;
        } else if (S_ISDIR(st.st_mode)) {
            replay_dir(arg, &t);
        } else {
            replay_file(arg, &t);
        }
    }
    if (t.files == 0) {
        fprintf(stderr, "FAIL: no input files found\n");
        return 1;
    }
    printf("%zu files: %zu parsed, %zu rejected; largest allocation in npy_parse %zu bytes%s; %zu failures\n",
           t.files, t.parsed, t.rejected, t.largest_parse_alloc, accounting ? "" : " (not checked)", t.failures);
    return t.failures == 0 ? 0 : 1;
}

#endif
