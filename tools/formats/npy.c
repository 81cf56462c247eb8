/* NumPy .npy reader and writer. The reader trusts nothing in the file: every length is checked
 * against the bytes actually present before it is used, and every size computation is
 * overflow-checked, so a hostile or damaged file gives a one-line reason rather than a crash or a
 * huge allocation. Format: https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html */
#define _POSIX_C_SOURCE 200809L /* open, fdopen, fileno, fstat, fsync, getpid */

#include "npy.h"
#include "atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__GNUC__)
#define NPY_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define NPY_PRINTF(fmt, args)
#endif

static const unsigned char npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

/* Large enough for any key or descr this reader accepts; longer strings are rejected, not cut. */
#define NPY_MAX_STRING 32

/* ---------------------------------------------------------------------------------------------- */
/* Small helpers                                                                                   */
/* ---------------------------------------------------------------------------------------------- */

/* Messages quote text from the file (keys, descr, dimensions), which may hold any byte: a newline or a
 * terminal escape would break the one-line message, so every byte outside printable ASCII is written as
 * \xNN, as Python's repr() does. An escape that does not fit whole is left out, not cut. */
static int fail(char *err, size_t err_size, const char *fmt, ...) NPY_PRINTF(3, 4);
static int fail(char *err, size_t err_size, const char *fmt, ...)
{
    if (err && err_size > 0) {
        char raw[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(raw, sizeof raw, fmt, ap);
        va_end(ap);
        size_t n = 0;
        for (const unsigned char *p = (const unsigned char *)raw; *p; p++) {
            if (*p >= 0x20 && *p <= 0x7E) {
                if (n + 1 >= err_size)
                    break;
                err[n++] = (char)*p;
            } else {
                if (n + 4 >= err_size)
                    break;
                n += (size_t)snprintf(err + n, err_size - n, "\\x%02x", *p);
            }
        }
        err[n] = '\0';
    }
    return -1;
}

static bool mul_size(size_t a, size_t b, size_t *out)
{
    if (a != 0 && b > SIZE_MAX / a)
        return false;
    *out = a * b;
    return true;
}

static bool host_is_little_endian(void)
{
    const uint16_t one = 1;
    unsigned char first;
    memcpy(&first, &one, 1);
    return first == 1;
}

const char *npy_dtype_name(npy_dtype dtype)
{
    switch (dtype) {
    case NPY_F4: return "<f4";
    case NPY_F8: return "<f8";
    case NPY_I4: return "<i4";
    case NPY_I8: return "<i8";
    case NPY_B1: return "|b1";
    case NPY_F2: return "<f2";
    case NPY_U2: return "<u2";
    }
    return "?";
}

size_t npy_dtype_size(npy_dtype dtype)
{
    switch (dtype) {
    case NPY_F4: return 4;
    case NPY_F8: return 8;
    case NPY_I4: return 4;
    case NPY_I8: return 8;
    case NPY_B1: return 1;
    case NPY_F2: return 2;
    case NPY_U2: return 2;
    }
    return 0;
}

/* "(2, 3)", "(5,)" or "()": how numpy (and Python) print a shape tuple. */
static void format_shape(char *buf, size_t cap, size_t ndim, const size_t *shape)
{
    size_t used = 0;
    used += (size_t)snprintf(buf, cap, "(");
    for (size_t i = 0; i < ndim && used < cap; i++)
        used += (size_t)snprintf(buf + used, cap - used, i + 1 < ndim ? "%zu, " : "%zu", shape[i]);
    if (used < cap)
        snprintf(buf + used, cap - used, ndim == 1 ? ",)" : ")");
}

/* ---------------------------------------------------------------------------------------------- */
/* Header dict parser                                                                              */
/* ---------------------------------------------------------------------------------------------- */

/* The header is a Python dict literal. This parser accepts exactly the subset numpy writes and Python
 * would evaluate to the same dict: any key order, either quote style, any spacing, trailing commas. */
typedef struct cursor {
    const unsigned char *start, *p, *end;
    char *err;
    size_t err_size;
} cursor;

typedef struct header {
    npy_dtype dtype;
    bool fortran_order;
    size_t ndim;
    size_t shape[NPY_MAX_DIMS];
} header;

static size_t offset(const cursor *c) { return (size_t)(c->p - c->start); }

static bool at(const cursor *c, char ch) { return c->p < c->end && *c->p == (unsigned char)ch; }

static void skip_space(cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\r' || *c->p == '\n'))
        c->p++;
}

static int expect(cursor *c, char ch, const char *context)
{
    skip_space(c);
    if (!at(c, ch)) {
        if (c->p == c->end)
            return fail(c->err, c->err_size, "malformed header: it ends where '%c' %s was expected", ch,
                        context);
        if (*c->p < 0x20 || *c->p > 0x7E) /* keep the message printable */
            return fail(c->err, c->err_size, "malformed header: expected '%c' %s at byte %zu, found byte 0x%02x",
                        ch, context, offset(c), *c->p);
        return fail(c->err, c->err_size, "malformed header: expected '%c' %s at byte %zu, found '%c'", ch,
                    context, offset(c), *c->p);
    }
    c->p++;
    return 0;
}

/* A quoted string; a backslash keeps the next character literally, enough for the plain ASCII
 * strings a valid header can hold. */
static int parse_string(cursor *c, char *out, size_t cap, const char *what)
{
    skip_space(c);
    if (!at(c, '\'') && !at(c, '"'))
        return fail(c->err, c->err_size, "malformed header: expected a quoted %s at byte %zu", what,
                    offset(c));
    const unsigned char quote = *c->p++;
    size_t n = 0;
    while (c->p < c->end && *c->p != quote && *c->p != '\n') {
        if (*c->p == '\\' && c->p + 1 < c->end)
            c->p++;
        /* Python cannot read a NUL byte in source text (so numpy cannot read such a header), and one
         * would end the C string early: 'descr\0x' would pass for 'descr'. */
        if (*c->p == '\0')
            return fail(c->err, c->err_size, "malformed header: NUL byte in a %s at byte %zu", what, offset(c));
        if (n + 1 >= cap)
            return fail(c->err, c->err_size, "malformed header: %s at byte %zu is longer than %zu characters",
                        what, offset(c), cap - 1);
        out[n++] = (char)*c->p++;
    }
    if (c->p == c->end || *c->p != quote)
        return fail(c->err, c->err_size, "malformed header: unterminated string");
    c->p++;
    out[n] = '\0';
    return 0;
}

static int dtype_from_descr(cursor *c, const char *descr, npy_dtype *out)
{
    static const struct {
        const char *code;
        npy_dtype dtype;
    } known[] = {{"f4", NPY_F4}, {"f8", NPY_F8}, {"i4", NPY_I4}, {"i8", NPY_I8},
                 {"b1", NPY_B1}, {"f2", NPY_F2}, {"u2", NPY_U2}};

    const char order = descr[0];
    if (strlen(descr) == 3 && strchr("<=|>", order)) {
        for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
            if (strcmp(descr + 1, known[i].code) != 0)
                continue;
            /* One byte has no byte order; '=' and '|' on the wider types are taken as the
             * little-endian layout every machine this tool runs on uses. */
            if (order == '>' && known[i].dtype != NPY_B1)
                return fail(c->err, c->err_size,
                            "big-endian dtype '%s' is not supported; convert with a.astype('<%s')", descr,
                            known[i].code);
            *out = known[i].dtype;
            return 0;
        }
    }
    return fail(c->err, c->err_size,
                "unsupported dtype '%s' (supported: '<f4', '<f8', '<f2', '<u2' (bfloat16 bits), '<i4', "
                "'<i8', '|b1')",
                descr);
}

static int parse_descr(cursor *c, header *h)
{
    skip_space(c);
    if (at(c, '[') || at(c, '{'))
        return fail(c->err, c->err_size, "structured dtypes are not supported (descr is not a plain string)");
    char descr[NPY_MAX_STRING];
    if (parse_string(c, descr, sizeof descr, "descr"))
        return -1;
    return dtype_from_descr(c, descr, &h->dtype);
}

static int parse_bool(cursor *c, bool *out)
{
    skip_space(c);
    size_t left = (size_t)(c->end - c->p);
    if (left >= 4 && memcmp(c->p, "True", 4) == 0) {
        *out = true;
        c->p += 4;
    } else if (left >= 5 && memcmp(c->p, "False", 5) == 0) {
        *out = false;
        c->p += 5;
    } else {
        return fail(c->err, c->err_size, "malformed header: fortran_order at byte %zu is not True or False",
                    offset(c));
    }
    return 0;
}

/* One dimension: a non-negative Python int. A trailing 'L' (Python 2 long, found in old files) is
 * allowed, as numpy allows it. */
static int parse_dim(cursor *c, size_t *out)
{
    const unsigned char *tok = c->p;
    while (c->p < c->end && !strchr(",) \t\r\n", *c->p))
        c->p++;
    const int tok_len = (int)(c->p - tok > 32 ? 32 : c->p - tok); /* enough to name it in a message */
    if (c->p == tok)
        return fail(c->err, c->err_size, "malformed header: expected a dimension in shape at byte %zu",
                    offset(c));

    const unsigned char *digits = tok, *digits_end = c->p;
    if (*digits == '-')
        digits++;
    if (digits_end > digits && (digits_end[-1] == 'L' || digits_end[-1] == 'l'))
        digits_end--;
    bool all_digits = digits < digits_end;
    for (const unsigned char *q = digits; q < digits_end; q++)
        all_digits = all_digits && *q >= '0' && *q <= '9';
    if (!all_digits)
        return fail(c->err, c->err_size, "dimension '%.*s' in shape is not an integer", tok_len,
                    (const char *)tok);
    if (digits != tok)
        return fail(c->err, c->err_size, "negative dimension %.*s in shape", tok_len, (const char *)tok);

    size_t value = 0;
    for (const unsigned char *q = digits; q < digits_end; q++) {
        const size_t digit = (size_t)(*q - '0');
        if (value > (SIZE_MAX - digit) / 10)
            return fail(c->err, c->err_size, "dimension %.*s in shape is too large", tok_len,
                        (const char *)tok);
        value = value * 10 + digit;
    }
    *out = value;
    return 0;
}

/* A tuple of dimensions. "(3)" is not a tuple in Python (it is the int 3), so it is rejected with a hint. */
static int parse_shape(cursor *c, header *h)
{
    skip_space(c);
    if (!at(c, '('))
        return fail(c->err, c->err_size, "malformed header: shape at byte %zu is not a tuple", offset(c));
    c->p++;
    size_t ndim = 0;
    bool comma_after_last = false;
    for (;;) {
        skip_space(c);
        if (at(c, ')'))
            break;
        size_t dim = 0;
        if (parse_dim(c, &dim))
            return -1;
        if (ndim < NPY_MAX_DIMS)
            h->shape[ndim] = dim;
        ndim++;
        skip_space(c);
        comma_after_last = at(c, ',');
        if (comma_after_last) {
            c->p++;
            continue;
        }
        if (!at(c, ')'))
            return fail(c->err, c->err_size, "malformed header: expected ',' or ')' in shape at byte %zu",
                        offset(c));
    }
    c->p++;
    if (ndim == 1 && !comma_after_last)
        return fail(c->err, c->err_size, "malformed header: shape (%zu) is not a tuple; a 1-D shape is (%zu,)",
                    h->shape[0], h->shape[0]);
    if (ndim > NPY_MAX_DIMS)
        return fail(c->err, c->err_size, "shape has %zu dimensions; at most %d are supported", ndim,
                    NPY_MAX_DIMS);
    h->ndim = ndim;
    return 0;
}

static int parse_header(const unsigned char *text, size_t len, header *h, char *err, size_t err_size)
{
    cursor c = {text, text, text + len, err, err_size};
    bool seen_descr = false, seen_order = false, seen_shape = false;

    if (expect(&c, '{', "at the start of the header dict"))
        return -1;
    for (;;) {
        skip_space(&c);
        if (at(&c, '}'))
            break;
        char key[NPY_MAX_STRING];
        if (parse_string(&c, key, sizeof key, "key") || expect(&c, ':', "after a key"))
            return -1;

        bool *seen;
        int rc;
        if (strcmp(key, "descr") == 0) {
            seen = &seen_descr;
            rc = parse_descr(&c, h);
        } else if (strcmp(key, "fortran_order") == 0) {
            seen = &seen_order;
            rc = parse_bool(&c, &h->fortran_order);
        } else if (strcmp(key, "shape") == 0) {
            seen = &seen_shape;
            rc = parse_shape(&c, h);
        } else {
            return fail(err, err_size, "unexpected key '%s' in header (expected descr, fortran_order, shape)",
                        key);
        }
        if (rc)
            return -1;
        if (*seen)
            return fail(err, err_size, "key '%s' appears twice in the header", key);
        *seen = true;

        skip_space(&c);
        if (at(&c, ','))
            c.p++;
        else if (!at(&c, '}'))
            return expect(&c, '}', "or ',' after a value");
    }
    c.p++;
    skip_space(&c); /* numpy pads with spaces and ends the header with '\n' */
    if (c.p != c.end)
        return fail(err, err_size, "malformed header: unexpected text after the dict at byte %zu", offset(&c));

    if (!seen_descr || !seen_order || !seen_shape)
        return fail(err, err_size, "header has no '%s' key",
                    !seen_descr ? "descr" : !seen_order ? "fortran_order" : "shape");
    if (h->fortran_order)
        return fail(err, err_size, "Fortran-order arrays are not supported; save with np.ascontiguousarray");
    return 0;
}

/* ---------------------------------------------------------------------------------------------- */
/* Reading                                                                                         */
/* ---------------------------------------------------------------------------------------------- */

/* The preamble before the header dict: the magic, the version, and the header's length, 2 bytes in
 * version 1.0 and 4 in 2.0 and 3.0 (both little-endian). v3 differs from v2 only in allowing UTF-8 in
 * the header, which matters only for structured dtypes, not supported here. */
#define NPY_PREAMBLE_MIN 10 /* enough to know the version, hence the preamble's full length */
static size_t preamble_len(unsigned major) { return major == 2 || major == 3 ? 12 : 10; }

/* Check the preamble in buf[0, len) (len may be short of it when the input ends early) and return the
 * preamble's length and the header's. */
static int parse_preamble(const unsigned char *buf, size_t len, size_t *prefix, uint32_t *header_len,
                          char *err, size_t err_size)
{
    if (len < NPY_PREAMBLE_MIN)
        return fail(err, err_size, "file is %zu bytes, too short to be a .npy file", len);
    if (memcmp(buf, npy_magic, sizeof npy_magic) != 0)
        return fail(err, err_size, "not a .npy file (it does not start with \"\\x93NUMPY\")");
    const unsigned major = buf[6], minor = buf[7];
    if (major < 1 || major > 3 || minor != 0)
        return fail(err, err_size, "unsupported .npy format version %u.%u (supported: 1.0, 2.0, 3.0)", major,
                    minor);
    *prefix = preamble_len(major);
    if (len < *prefix)
        return fail(err, err_size, "file is %zu bytes, too short for a version %u.0 .npy header", len, major);
    *header_len = (uint32_t)buf[8] | (uint32_t)buf[9] << 8;
    if (major > 1)
        *header_len |= (uint32_t)buf[10] << 16 | (uint32_t)buf[11] << 24;
    return 0;
}

/* The header must lie inside the input, len bytes long (SIZE_MAX while a stream's length is still
 * unknown), and be of a length a numpy header could have. */
static int check_header_len(uint32_t header_len, size_t prefix, size_t len, char *err, size_t err_size)
{
    if (header_len > len - prefix)
        return fail(err, err_size, "header length %lu exceeds file size %zu", (unsigned long)header_len, len);
    if (header_len > NPY_MAX_HEADER_LEN)
        return fail(err, err_size, "header length %lu is beyond the %u-byte limit; not a numpy header",
                    (unsigned long)header_len, NPY_MAX_HEADER_LEN);
    return 0;
}

/* Parse the header dict and describe the array: everything but the data in *meta, and the data's size. */
static int parse_meta(const unsigned char *text, size_t header_len, npy_array *meta, size_t *data_bytes,
                      char *err, size_t err_size)
{
    header h;
    memset(&h, 0, sizeof h);
    if (parse_header(text, header_len, &h, err, err_size))
        return -1;

    char shape_text[NPY_MAX_DIMS * 22 + 4];
    format_shape(shape_text, sizeof shape_text, h.ndim, h.shape);
    size_t count = 1, bytes;
    for (size_t i = 0; i < h.ndim; i++)
        if (!mul_size(count, h.shape[i], &count))
            return fail(err, err_size, "shape %s has more elements than fit in memory", shape_text);
    if (!mul_size(count, npy_dtype_size(h.dtype), &bytes))
        return fail(err, err_size, "shape %s has more bytes of data than fit in memory", shape_text);

    memset(meta, 0, sizeof *meta);
    meta->dtype = h.dtype;
    meta->ndim = h.ndim;
    memcpy(meta->shape, h.shape, sizeof h.shape);
    meta->count = count;
    *data_bytes = bytes;
    return 0;
}

/* The data ends after `available` of its `bytes` bytes. */
static int truncated(const npy_array *meta, size_t bytes, size_t available, char *err, size_t err_size)
{
    char shape_text[NPY_MAX_DIMS * 22 + 4];
    format_shape(shape_text, sizeof shape_text, meta->ndim, meta->shape);
    return fail(err, err_size, "truncated: shape %s needs %zu bytes of data, file has %zu", shape_text, bytes,
                available);
}

/* Check the whole image and describe it: everything but the data in *meta, plus where the data starts
 * and how long it is. Reads nothing outside buf[0, len). */
static int parse_image(const unsigned char *buf, size_t len, npy_array *meta, size_t *data_offset,
                       size_t *data_bytes, char *err, size_t err_size)
{
    size_t prefix = 0, bytes = 0;
    uint32_t header_len = 0;
    if (parse_preamble(buf, len, &prefix, &header_len, err, err_size) ||
        check_header_len(header_len, prefix, len, err, err_size) ||
        parse_meta(buf + prefix, header_len, meta, &bytes, err, err_size))
        return -1;
    const size_t available = len - prefix - header_len; /* extra bytes after the data are ignored */
    if (bytes > available)
        return truncated(meta, bytes, available, err, err_size);
    *data_offset = prefix + header_len;
    *data_bytes = bytes;
    return 0;
}

/* The data arrives as little-endian bytes; make it host values (and bools exactly 0 or 1). */
static void to_host_order(npy_array *a)
{
    unsigned char *bytes = a->data;
    const size_t size = npy_dtype_size(a->dtype);
    if (a->dtype == NPY_B1) {
        for (size_t i = 0; i < a->count; i++)
            bytes[i] = bytes[i] != 0;
    } else if (!host_is_little_endian()) {
        for (size_t i = 0; i < a->count; i++) {
            unsigned char *item = bytes + i * size;
            for (size_t lo = 0, hi = size - 1; lo < hi; lo++, hi--) {
                const unsigned char t = item[lo];
                item[lo] = item[hi];
                item[hi] = t;
            }
        }
    }
}

int npy_parse(const unsigned char *buf, size_t len, npy_array *out, char *err, size_t err_size)
{
    if (!out)
        return fail(err, err_size, "npy_parse: out is NULL");
    memset(out, 0, sizeof *out);
    if (!buf && len > 0)
        return fail(err, err_size, "npy_parse: buf is NULL");

    npy_array meta;
    size_t data_offset, data_bytes;
    if (parse_image(buf, len, &meta, &data_offset, &data_bytes, err, err_size))
        return -1;
    meta.data = malloc(data_bytes > 0 ? data_bytes : 1);
    if (!meta.data)
        return fail(err, err_size, "out of memory allocating %zu bytes of data", data_bytes);
    memcpy(meta.data, buf + data_offset, data_bytes);
    to_host_order(&meta);
    *out = meta;
    return 0;
}

/* The largest file npy_load reads: 64 GiB, or half the address space on 32-bit hosts. Anything larger
 * is a mistake (a wrong path) rather than an input, and is refused before allocating. */
static size_t max_file_bytes(void)
{
    const uint64_t cap = (uint64_t)64 << 30;
    return (uint64_t)(SIZE_MAX / 2) < cap ? SIZE_MAX / 2 : (size_t)cap;
}

/* Read up to n bytes; *got is fewer only at the end of the input. */
static int read_upto(FILE *f, void *buf, size_t n, size_t *got, char *err, size_t err_size)
{
    *got = n > 0 ? fread(buf, 1, n, f) : 0;
    if (*got < n && ferror(f))
        return fail(err, err_size, "cannot read: %s", strerror(errno));
    return 0;
}

/* Double *buf's capacity, up to `limit` (which the caller has not reached yet). On failure *buf is
 * freed and set to NULL. */
static int grow(unsigned char **buf, size_t *cap, size_t limit, const char *what, char *err, size_t err_size)
{
    const size_t new_cap = *cap > limit / 2 ? limit : *cap * 2;
    unsigned char *grown = realloc(*buf, new_cap);
    if (!grown) {
        free(*buf);
        *buf = NULL;
        return fail(err, err_size, "out of memory reading %s (%zu bytes)", what, new_cap);
    }
    *buf = grown;
    *cap = new_cap;
    return 0;
}

/* A regular file is read whole. Its size is checked against the limit before anything is allocated
 * and sizes the first allocation; the buffer still grows should the file grow meanwhile, or report no
 * size (files under /proc say 0). */
static int load_file(FILE *f, off_t size, npy_array *out, char *err, size_t err_size)
{
    const size_t limit = max_file_bytes();
    if ((uint64_t)size >= limit)
        return fail(err, err_size, "the file is %jd bytes, beyond the %zu-byte limit", (intmax_t)size, limit);
    size_t cap = (size_t)size + 1; /* +1: the short read that finds the end needs no second allocation */
    unsigned char *buf = malloc(cap);
    size_t len = 0, got;
    if (!buf)
        return fail(err, err_size, "out of memory reading the file (%zu bytes)", cap);
    for (;;) {
        if (read_upto(f, buf + len, cap - len, &got, err, err_size)) {
            free(buf);
            return -1;
        }
        len += got;
        if (len < cap)
            break; /* end of file */
        if (cap >= limit) {
            free(buf);
            return fail(err, err_size, "the file is beyond the %zu-byte limit", limit);
        }
        if (grow(&buf, &cap, limit, "the file", err, err_size))
            return -1;
    }

    npy_array meta;
    size_t data_offset, data_bytes;
    if (parse_image(buf, len, &meta, &data_offset, &data_bytes, err, err_size)) {
        free(buf);
        return -1;
    }
    /* Keep the file buffer as the data buffer: slide the data to the front and give back the rest. */
    memmove(buf, buf + data_offset, data_bytes);
    unsigned char *shrunk = realloc(buf, data_bytes > 0 ? data_bytes : 1);
    meta.data = shrunk ? shrunk : buf;
    to_host_order(&meta);
    *out = meta;
    return 0;
}

/* A pipe, FIFO, socket or device has no size to check first and may never end (/dev/zero, a writer
 * that keeps its end open), so it is read only as far as its own header says: the preamble, the header
 * it announces, then exactly the data that header describes. What follows is left unread, and input
 * that is not a .npy file is refused after its preamble (at most 12 bytes). The checks and messages are
 * npy_parse's for the bytes that arrived, except that limits are applied before reading, not after. */
static int load_stream(FILE *f, npy_array *out, char *err, size_t err_size)
{
    setvbuf(f, NULL, _IONBF, 0); /* no read-ahead: stdio takes nothing beyond what is asked for */

    unsigned char pre[12];
    size_t len, more = 0, prefix, got;
    uint32_t header_len = 0;
    if (read_upto(f, pre, NPY_PREAMBLE_MIN, &len, err, err_size) ||
        (len == NPY_PREAMBLE_MIN && read_upto(f, pre + len, preamble_len(pre[6]) - len, &more, err, err_size)) ||
        parse_preamble(pre, len + more, &prefix, &header_len, err, err_size) ||
        check_header_len(header_len, prefix, SIZE_MAX, err, err_size)) /* the length limit only */
        return -1;

    unsigned char *text = malloc(header_len > 0 ? header_len : 1); /* at most NPY_MAX_HEADER_LEN */
    if (!text)
        return fail(err, err_size, "out of memory reading the header (%lu bytes)", (unsigned long)header_len);
    npy_array meta;
    size_t bytes;
    const bool bad = read_upto(f, text, header_len, &got, err, err_size) ||
                     check_header_len(header_len, prefix, prefix + got, err, err_size) ||
                     parse_meta(text, header_len, &meta, &bytes, err, err_size);
    free(text);
    if (bad)
        return -1;
    const size_t limit = max_file_bytes();
    if (bytes > limit - prefix - header_len)
        return fail(err, err_size, "the header describes %zu bytes of data, beyond the %zu-byte limit", bytes,
                    limit);

    /* The buffer grows with the bytes that arrive, not to the size the header claims at once: a header
     * that promises more than the stream holds costs no more memory than the stream does. */
    size_t cap = bytes < (size_t)1 << 16 ? bytes : (size_t)1 << 16, have = 0;
    unsigned char *data = malloc(cap > 0 ? cap : 1);
    if (!data)
        return fail(err, err_size, "out of memory reading the data (%zu bytes)", cap);
    for (;;) {
        if (read_upto(f, data + have, cap - have, &got, err, err_size)) {
            free(data);
            return -1;
        }
        have += got;
        if (have < cap) {
            free(data);
            return truncated(&meta, bytes, have, err, err_size);
        }
        if (have == bytes)
            break;
        if (grow(&data, &cap, bytes, "the data", err, err_size))
            return -1;
    }
    meta.data = data;
    to_host_order(&meta);
    *out = meta;
    return 0;
}

int npy_load(const char *path, npy_array *out, char *err, size_t err_size)
{
    if (!out)
        return fail(err, err_size, "npy_load: out is NULL");
    memset(out, 0, sizeof *out);
    if (!path)
        return fail(err, err_size, "npy_load: path is NULL");

    FILE *f = fopen(path, "rb");
    if (!f)
        return fail(err, err_size, "cannot open: %s", strerror(errno));
    struct stat st;
    int rc;
    if (fstat(fileno(f), &st) != 0)
        rc = fail(err, err_size, "cannot read: %s", strerror(errno));
    else if (S_ISDIR(st.st_mode))
        rc = fail(err, err_size, "cannot read: %s", strerror(EISDIR));
    else if (S_ISREG(st.st_mode))
        rc = load_file(f, st.st_size, out, err, err_size);
    else
        rc = load_stream(f, out, err, err_size);
    fclose(f);
    return rc;
}

void npy_free(npy_array *a)
{
    if (!a)
        return;
    free(a->data);
    memset(a, 0, sizeof *a);
}

/* ---------------------------------------------------------------------------------------------- */
/* Conversions                                                                                     */
/* ---------------------------------------------------------------------------------------------- */

/* Round to the nearest float, as numpy's astype(np.float32) does. A finite double beyond the float
 * range has no defined C conversion, so it is mapped to infinity explicitly: values from FLT_MAX up to
 * half an ulp above it still round to FLT_MAX, beyond that overflow. */
static float double_to_float(double d)
{
    const double overflow = (double)FLT_MAX + ldexp(1.0, FLT_MAX_EXP - FLT_MANT_DIG - 1);
    if (d >= overflow)
        return INFINITY;
    if (d <= -overflow)
        return -INFINITY;
    return (float)d;
}

static int check_convert_args(const npy_array *a, const void *out, const char *fn, char *err,
                              size_t err_size)
{
    if (!a || !out)
        return fail(err, err_size, "%s: NULL argument", fn);
    if (!a->data)
        return fail(err, err_size, "%s: the array has no data (freed, or never loaded)", fn);
    return 0;
}

/* A float's bit pattern and back (memcpy: no aliasing questions). */
static uint32_t float_bits(float f)
{
    uint32_t bits;
    memcpy(&bits, &f, 4);
    return bits;
}

static float bits_float(uint32_t bits)
{
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

float npy_half_to_float(unsigned short h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exponent = (h >> 10) & 0x1Fu, mantissa = h & 0x3FFu;
    if (exponent == 0x1F) /* inf or NaN (the payload kept, shifted into place) */
        return bits_float(sign | 0x7F800000u | (mantissa << 13));
    if (exponent != 0)
        return bits_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
    return bits_float(sign | float_bits((float)mantissa * 0x1p-24f)); /* zero or subnormal: exact in float */
}

unsigned short npy_float_to_half(float f)
{
    const uint32_t bits = float_bits(f);
    const unsigned short sign = (unsigned short)((bits >> 16) & 0x8000u);
    const uint32_t magnitude = bits & 0x7FFFFFFFu;
    if (magnitude > 0x7F800000u) /* NaN: a quiet one, the top of the payload kept */
        return (unsigned short)(sign | 0x7E00u | ((magnitude >> 13) & 0x1FFu));
    if (magnitude >= 0x477FF000u) /* 65520 and up round past 65504: inf (inf included) */
        return (unsigned short)(sign | 0x7C00u);
    if (magnitude < 0x38800000u) { /* below 2^-14: a subnormal half, rounded to nearest even */
        const float scaled = bits_float(magnitude) * 0x1p24f; /* in half's subnormal units; exact */
        unsigned short q = (unsigned short)scaled;
        const float rest = scaled - (float)q;
        if (rest > 0.5f || (rest == 0.5f && (q & 1u)))
            q++;
        return (unsigned short)(sign | q);
    }
    /* Normal: drop 13 mantissa bits, rounding to nearest even (a carry into the exponent is right). */
    const uint32_t rounded = magnitude + 0xFFFu + ((magnitude >> 13) & 1u);
    return (unsigned short)(sign | ((rounded - 0x38000000u) >> 13));
}

float npy_bf16_to_float_value(unsigned short b) { return bits_float((uint32_t)b << 16); }

unsigned short npy_float_to_bf16(float f)
{
    const uint32_t bits = float_bits(f);
    if ((bits & 0x7FFFFFFFu) > 0x7F800000u) /* NaN: quiet, same sign */
        return (unsigned short)((bits >> 16) | 0x0040u);
    return (unsigned short)((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16); /* nearest even; overflow → inf */
}

/* Room for a's elements as floats (at least one byte), or NULL with the reason in err. */
static float *float_result(const npy_array *a, char *err, size_t err_size)
{
    size_t bytes;
    if (!mul_size(a->count, sizeof(float), &bytes)) {
        fail(err, err_size, "%zu floats do not fit in memory", a->count);
        return NULL;
    }
    float *f = malloc(bytes > 0 ? bytes : 1);
    if (!f)
        fail(err, err_size, "out of memory converting %zu elements to float", a->count);
    return f;
}

int npy_bf16_to_float(const npy_array *a, float **out, char *err, size_t err_size)
{
    if (check_convert_args(a, out, "npy_bf16_to_float", err, err_size))
        return -1;
    *out = NULL;
    if (a->dtype != NPY_U2)
        return fail(err, err_size, "expected bfloat16 bit patterns ('<u2'), got '%s'", npy_dtype_name(a->dtype));
    float *f = float_result(a, err, err_size);
    if (!f)
        return -1;
    const uint16_t *src = a->data;
    for (size_t i = 0; i < a->count; i++)
        f[i] = npy_bf16_to_float_value(src[i]);
    *out = f;
    return 0;
}

int npy_to_float(const npy_array *a, float **out, char *err, size_t err_size)
{
    if (check_convert_args(a, out, "npy_to_float", err, err_size))
        return -1;
    *out = NULL;
    if (a->dtype != NPY_F4 && a->dtype != NPY_F8 && a->dtype != NPY_F2)
        return fail(err, err_size, "expected a float array ('<f2', '<f4' or '<f8'), got '%s'",
                    npy_dtype_name(a->dtype));
    float *f = float_result(a, err, err_size);
    if (!f)
        return -1;
    if (a->dtype == NPY_F4) {
        memcpy(f, a->data, a->count * sizeof(float));
    } else if (a->dtype == NPY_F2) {
        const uint16_t *h = a->data;
        for (size_t i = 0; i < a->count; i++)
            f[i] = npy_half_to_float(h[i]);
    } else {
        const double *d = a->data;
        for (size_t i = 0; i < a->count; i++)
            f[i] = double_to_float(d[i]);
    }
    *out = f;
    return 0;
}

int npy_to_int64(const npy_array *a, long long **out, char *err, size_t err_size)
{
    if (check_convert_args(a, out, "npy_to_int64", err, err_size))
        return -1;
    *out = NULL;
    if (a->dtype != NPY_I4 && a->dtype != NPY_I8)
        return fail(err, err_size, "expected an integer array ('<i4' or '<i8'), got '%s'",
                    npy_dtype_name(a->dtype));
    size_t bytes;
    if (!mul_size(a->count, sizeof(long long), &bytes))
        return fail(err, err_size, "%zu integers do not fit in memory", a->count);
    long long *v = malloc(bytes > 0 ? bytes : 1);
    if (!v)
        return fail(err, err_size, "out of memory converting %zu elements to int64", a->count);
    if (a->dtype == NPY_I4) {
        const int32_t *src = a->data;
        for (size_t i = 0; i < a->count; i++)
            v[i] = src[i];
    } else {
        const int64_t *src = a->data;
        for (size_t i = 0; i < a->count; i++)
            v[i] = src[i];
    }
    *out = v;
    return 0;
}

/* ---------------------------------------------------------------------------------------------- */
/* Writing                                                                                         */
/* ---------------------------------------------------------------------------------------------- */

/* numpy's version 1.0 header: the dict, padded with spaces and ended with '\n' so that the data
 * starts at a multiple of 64 bytes. Returns the header length. */
static size_t build_header(char *buf, size_t cap, npy_dtype dtype, size_t ndim, const size_t *shape)
{
    char shape_text[NPY_MAX_DIMS * 22 + 4];
    format_shape(shape_text, sizeof shape_text, ndim, shape);
    size_t len = (size_t)snprintf(buf, cap, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                                  npy_dtype_name(dtype), shape_text);
    const size_t unpadded = sizeof npy_magic + 4 + len + 1;
    const size_t pad = (64 - unpadded % 64) % 64;
    memset(buf + len, ' ', pad);
    len += pad;
    buf[len++] = '\n';
    return len;
}

static bool write_floats_le(FILE *fp, const float *data, size_t count)
{
    if (host_is_little_endian())
        return fwrite(data, sizeof(float), count, fp) == count;
    unsigned char chunk[4096];
    for (size_t done = 0; done < count;) {
        const size_t n = count - done < sizeof chunk / 4 ? count - done : sizeof chunk / 4;
        for (size_t i = 0; i < n; i++) {
            uint32_t bits;
            memcpy(&bits, &data[done + i], 4);
            for (size_t b = 0; b < 4; b++)
                chunk[i * 4 + b] = (unsigned char)(bits >> (8 * b));
        }
        if (fwrite(chunk, 4, n, fp) != n)
            return false;
        done += n;
    }
    return true;
}

/* The floats as 16-bit patterns (half or bfloat16, rounded to nearest even), little-endian. */
static bool write_narrowed_le(FILE *fp, npy_dtype dtype, const float *data, size_t count)
{
    unsigned char chunk[4096];
    for (size_t done = 0; done < count;) {
        const size_t n = count - done < sizeof chunk / 2 ? count - done : sizeof chunk / 2;
        for (size_t i = 0; i < n; i++) {
            const unsigned short v = dtype == NPY_F2 ? npy_float_to_half(data[done + i]) : npy_float_to_bf16(data[done + i]);
            chunk[2 * i] = (unsigned char)(v & 0xFFu);
            chunk[2 * i + 1] = (unsigned char)(v >> 8);
        }
        if (fwrite(chunk, 2, n, fp) != n)
            return false;
        done += n;
    }
    return true;
}

int npy_save_f32(const char *path, const float *data, size_t ndim, const size_t *shape, char *err,
                 size_t err_size)
{
    return npy_save_floats_as(path, NPY_F4, data, ndim, shape, err, err_size);
}

/* The shape's element count and byte size, checked; 0, or -1 with a reason in err. */
static int checked_count(npy_dtype dtype, const float *data, size_t ndim, const size_t *shape, size_t *count,
                         char *err, size_t err_size)
{
    if (dtype != NPY_F4 && dtype != NPY_F2 && dtype != NPY_U2)
        return fail(err, err_size, "cannot save floats as '%s'", npy_dtype_name(dtype));
    if (ndim > NPY_MAX_DIMS)
        return fail(err, err_size, "cannot save %zu dimensions; at most %d are supported", ndim, NPY_MAX_DIMS);
    if (ndim > 0 && !shape)
        return fail(err, err_size, "npy_save_f32: shape is NULL");
    size_t bytes;
    *count = 1;
    for (size_t i = 0; i < ndim; i++)
        if (!mul_size(*count, shape[i], count))
            return fail(err, err_size, "npy_save_f32: the shape's element count overflows");
    if (!mul_size(*count, sizeof(float), &bytes))
        return fail(err, err_size, "npy_save_f32: the data size overflows");
    if (*count > 0 && !data)
        return fail(err, err_size, "npy_save_f32: data is NULL");
    return 0;
}

int npy_write_floats_as(FILE *fp, npy_dtype dtype, const float *data, size_t ndim, const size_t *shape, char *err,
                        size_t err_size)
{
    size_t count = 0;
    if (checked_count(dtype, data, ndim, shape, &count, err, err_size))
        return -1;
    char header[512];
    const size_t header_len = build_header(header, sizeof header, dtype, ndim, shape);
    unsigned char prefix[10];
    memcpy(prefix, npy_magic, sizeof npy_magic);
    prefix[6] = 1; /* version 1.0: the header always fits its 2-byte length */
    prefix[7] = 0;
    prefix[8] = (unsigned char)(header_len & 0xFF);
    prefix[9] = (unsigned char)(header_len >> 8);
    if (fwrite(prefix, 1, sizeof prefix, fp) != sizeof prefix || fwrite(header, 1, header_len, fp) != header_len ||
        (count > 0 && !(dtype == NPY_F4 ? write_floats_le(fp, data, count) : write_narrowed_le(fp, dtype, data, count))))
        return fail(err, err_size, "cannot write: %s", strerror(errno));
    return 0;
}

int npy_save_floats_as(const char *path, npy_dtype dtype, const float *data, size_t ndim, const size_t *shape,
                       char *err, size_t err_size)
{
    size_t count;
    if (!path)
        return fail(err, err_size, "npy_save_f32: path is NULL");
    if (checked_count(dtype, data, ndim, shape, &count, err, err_size)) /* (before a stream is opened) */
        return -1;
    atomic_file t;
    if (atomic_open(&t, path, err, err_size))
        return -1;
    if (npy_write_floats_as(t.fp, dtype, data, ndim, shape, err, err_size)) {
        atomic_abort(&t);
        return -1;
    }
    return atomic_commit(&t, err, err_size);
}
