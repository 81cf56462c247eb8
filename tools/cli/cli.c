/* Option parsing, error reporting, contexts, .npy tensors and progress for the clattn tool. */
#define _XOPEN_SOURCE 700 /* realpath */
#include "cli.h"
#include "npy.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int cli_fail(int status, const char *command, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "clattn %s: ", command);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return status;
}

int cli_parse(const char *command, int argc, char **argv, int first, const cli_option *opts, size_t nopts,
              bool *help)
{
    *help = false;
    bool seen[64] = {false}; /* options given so far: a repeated one is an error, not "the last wins" */
    if (nopts > sizeof seen / sizeof seen[0])
        return cli_fail(CLI_USAGE_ERROR, command, "internal: too many options");
    for (int i = first; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            *help = true;
            continue;
        }
        if (strncmp(arg, "--", 2) != 0)
            return cli_fail(CLI_USAGE_ERROR, command, "unexpected argument '%s' (see --help)", arg);
        const char *name = arg + 2;
        const char *eq = strchr(name, '=');
        size_t name_len = eq ? (size_t)(eq - name) : strlen(name);
        const cli_option *opt = NULL;
        for (size_t k = 0; k < nopts; k++)
            if (strlen(opts[k].name) == name_len && strncmp(opts[k].name, name, name_len) == 0)
                opt = &opts[k];
        if (!opt)
            return cli_fail(CLI_USAGE_ERROR, command, "unknown option '--%.*s' (see --help)", (int)name_len, name);
        if (seen[opt - opts])
            return cli_fail(CLI_USAGE_ERROR, command, "option '--%s' is given twice", opt->name);
        seen[opt - opts] = true;
        if (opt->flag) {
            if (eq)
                return cli_fail(CLI_USAGE_ERROR, command, "option '--%s' takes no value", opt->name);
            *opt->flag = true;
        } else if (eq) {
            *opt->value = eq + 1;
        } else if (i + 1 < argc) {
            /* "--out --causal" is a forgotten value, not a file named --causal (--out=--causal is). */
            if (strncmp(argv[i + 1], "--", 2) == 0)
                return cli_fail(CLI_USAGE_ERROR, command,
                                "option '--%s' needs a value, not the option '%s' (write --%s=%s for such a value)",
                                opt->name, argv[i + 1], opt->name, argv[i + 1]);
            *opt->value = argv[++i];
        } else {
            return cli_fail(CLI_USAGE_ERROR, command, "option '--%s' needs a value", opt->name);
        }
    }
    return CLI_OK;
}

int cli_parse_float(const char *command, const char *flag, const char *text, float *out)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    /* strtod skips blanks and takes '+': a number here is written plainly ('-' for negatives). */
    if (end == text || *end != '\0' || errno == ERANGE || !isfinite(v) || !isfinite((float)v) ||
        isspace((unsigned char)text[0]) || text[0] == '+')
        return cli_fail(CLI_USAGE_ERROR, command, "--%s: '%s' is not a finite float32 number", flag, text);
    *out = (float)v;
    return CLI_OK;
}

int cli_parse_size(const char *command, const char *flag, const char *text, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (end == text || *end != '\0' || errno == ERANGE || text[0] == '-' || text[0] == '+' ||
        isspace((unsigned char)text[0]) || v == 0 ||
        v > (unsigned long long)SIZE_MAX)
        return cli_fail(CLI_USAGE_ERROR, command, "--%s: '%s' is not a positive whole number", flag, text);
    *out = (size_t)v;
    return CLI_OK;
}

bool cli_integer(const char *text, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (end == text || *end != '\0' || errno == ERANGE || text[0] == '+' || isspace((unsigned char)text[0]))
        return false;
    *out = v;
    return true;
}

int cli_parse_integer(const char *command, const char *flag, const char *text, long long *out)
{
    if (!cli_integer(text, out))
        return cli_fail(CLI_USAGE_ERROR, command, "--%s: '%s' is not a whole number", flag, text);
    return CLI_OK;
}

/* The file a path names: the real path of the file when it exists, else of its folder plus its name
 * (so that "o.npy", "./o.npy" and a link to it are one file). NULL when the folder does not exist. */
static char *canonical_output(const char *path)
{
    char *real = realpath(path, NULL);
    if (real)
        return real;
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, (size_t)(slash - path) + (slash == path)) : strdup(".");
    char *real_dir = dir ? realpath(dir, NULL) : NULL;
    free(dir);
    if (!real_dir)
        return NULL;
    const char *base = slash ? slash + 1 : path;
    char *joined = malloc(strlen(real_dir) + strlen(base) + 2);
    if (joined)
        sprintf(joined, "%s/%s", real_dir, base);
    free(real_dir);
    return joined;
}

int cli_check_distinct_outputs(const char *command, const char *const *flags, const char *const *paths, size_t n)
{
    char *canon[CLI_OUTPUTS_MAX] = {0};
    struct stat st[CLI_OUTPUTS_MAX];
    bool exists[CLI_OUTPUTS_MAX] = {0};
    int rc = CLI_OK;
    if (n > CLI_OUTPUTS_MAX)
        return cli_fail(CLI_USAGE_ERROR, command, "internal: too many outputs");
    for (size_t i = 0; i < n && rc == CLI_OK; i++) {
        if (!paths[i])
            continue;
        canon[i] = canonical_output(paths[i]);
        exists[i] = stat(paths[i], &st[i]) == 0; /* (two hard links: one file under two names) */
        for (size_t j = 0; j < i && rc == CLI_OK; j++)
            if (paths[j] && (strcmp(paths[i], paths[j]) == 0 ||
                             (canon[i] && canon[j] && strcmp(canon[i], canon[j]) == 0) ||
                             (exists[i] && exists[j] && st[i].st_dev == st[j].st_dev && st[i].st_ino == st[j].st_ino)))
                rc = cli_fail(CLI_USAGE_ERROR, command, "--%s and --%s name the same file (%s)", flags[j], flags[i],
                              paths[i]);
    }
    for (size_t i = 0; i < n; i++)
        free(canon[i]);
    return rc;
}

int cli_fail_status(const char *command, const clattn_context *ctx, clattn_status status, const char *what)
{
    if (ctx)
        fprintf(stderr, "clattn %s: %s failed on %s: %s: %s\n", command, what, clattn_context_device_name(ctx),
                clattn_status_string(status), clattn_last_error(ctx));
    else
        fprintf(stderr, "clattn %s: %s failed: %s: %s\n", command, what, clattn_status_string(status),
                clattn_last_error(NULL));
    if (status == CLATTN_ERROR_BUILD_FAILED && ctx)
        fprintf(stderr, "--- build log ---\n%s\n--- end of build log ---\n", clattn_build_log(ctx));
    if (status == CLATTN_ERROR_NO_PLATFORM || status == CLATTN_ERROR_NO_DEVICE)
        return CLI_NO_PLATFORM;
    if (status == CLATTN_ERROR_DEVICE_NOT_FOUND)
        return CLI_USAGE_ERROR; /* a --device or CLATTN_DEVICE value that names no device */
    return CLI_RUNTIME_ERROR;
}

void cli_report_warning(const char *command, const clattn_context *ctx)
{
    static char last[1024]; /* calls that raise the same warning again (a fallback) print it once */
    const char *w = clattn_last_warning(ctx);
    if (!w[0] || strncmp(w, last, sizeof last - 1) == 0)
        return;
    snprintf(last, sizeof last, "%s", w);
    fprintf(stderr, "clattn %s: warning: %s\n", command, w);
}

int cli_open_context(const char *command, const char *spec, clattn_context **ctx)
{
    clattn_status st = clattn_context_create(ctx, spec);
    if (st != CLATTN_SUCCESS)
        return cli_fail_status(command, NULL, st, "opening a device");
    cli_report_warning(command, *ctx);
    return CLI_OK;
}

int cli_load_tensor(const char *command, const char *path, size_t min_rank, size_t max_rank, cli_tensor *t)
{
    return cli_load_tensor_as(command, path, min_rank, max_rank, false, t);
}

/* t from a loaded array (freed here), as cli_load_tensor_as says. */
static int tensor_from_array(const char *command, const char *path, npy_array *a, size_t min_rank, size_t max_rank,
                             bool bf16, cli_tensor *t)
{
    char err[512];
    int rc = CLI_OK;
    if (a->ndim < min_rank || a->ndim > max_rank) {
        rc = cli_fail(CLI_USAGE_ERROR, command, "%s: has %zu dimensions, expected %zu to %zu", path, a->ndim,
                      min_rank, max_rank);
    } else if (a->count == 0) {
        rc = cli_fail(CLI_USAGE_ERROR, command, "%s: is empty (a dimension is 0)", path);
    } else if (bf16 && a->dtype != NPY_U2) {
        rc = cli_fail(CLI_USAGE_ERROR, command, "--bf16: %s is not '<u2' (bfloat16 bit patterns)", path);
    } else if (!bf16 && a->dtype == NPY_U2) {
        rc = cli_fail(CLI_USAGE_ERROR, command, "%s: '<u2' is read as bfloat16 bit patterns only with --bf16", path);
    } else if ((bf16 ? npy_bf16_to_float(a, &t->data, err, sizeof err)
                     : npy_to_float(a, &t->data, err, sizeof err)) != 0) {
        rc = cli_fail(CLI_USAGE_ERROR, command, "%s: %s", path, err);
    } else {
        t->type = bf16 ? CLATTN_BFLOAT16 : a->dtype == NPY_F2 ? CLATTN_FLOAT16 : CLATTN_FLOAT32;
        t->ndim = a->ndim;
        memcpy(t->shape, a->shape, sizeof t->shape);
        t->count = a->count;
    }
    npy_free(a);
    return rc;
}

int cli_load_tensor_as(const char *command, const char *path, size_t min_rank, size_t max_rank, bool bf16,
                       cli_tensor *t)
{
    memset(t, 0, sizeof *t);
    npy_array a;
    char err[512];
    if (npy_load(path, &a, err, sizeof err) != 0)
        return cli_fail(CLI_USAGE_ERROR, command, "%s: %s", path, err);
    return tensor_from_array(command, path, &a, min_rank, max_rank, bf16, t);
}

/* The whole file at path in memory (a stream read to its end; one that does not start as a .npy file is
 * refused after its first 6 bytes). */
static int read_whole(const char *command, const char *path, unsigned char **buf, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return cli_fail(CLI_USAGE_ERROR, command, "%s: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    unsigned char *b = malloc(cap);
    int rc = b ? CLI_OK : cli_fail(CLI_RUNTIME_ERROR, command, "%s: out of host memory", path);
    while (rc == CLI_OK) {
        if (n == cap) {
            unsigned char *more = cap <= SIZE_MAX / 2 ? realloc(b, cap * 2) : NULL;
            if (!more) {
                rc = cli_fail(CLI_RUNTIME_ERROR, command, "%s: out of host memory", path);
                break;
            }
            b = more, cap *= 2;
        }
        const size_t got = fread(b + n, 1, n < 6 ? 6 - n : cap - n, fp);
        n += got;
        if (n >= 6 && memcmp(b, "\x93NUMPY", 6) != 0)
            rc = cli_fail(CLI_USAGE_ERROR, command, "%s: not a .npy file (no \\x93NUMPY magic)", path);
        if (got == 0) {
            if (ferror(fp))
                rc = cli_fail(CLI_USAGE_ERROR, command, "%s: %s", path, strerror(errno));
            break;
        }
    }
    fclose(fp);
    if (rc != CLI_OK) {
        free(b);
        return rc;
    }
    *buf = b, *len = n;
    return CLI_OK;
}

int cli_load_kv(const char *command, const char *path, const char *flag, bool bf16, cli_tensor *t, bool *raw)
{
    memset(t, 0, sizeof *t);
    *raw = false;
    unsigned char *buf = NULL;
    size_t len = 0;
    int rc = read_whole(command, path, &buf, &len);
    if (rc != CLI_OK)
        return rc;
    /* The header (after the magic, the version and its length's 2 or 4 bytes): a descr of one-byte integers
     * marks raw bytes; they pass the .npy reader's checks as '|b1' (same length), the data taken as it lies. */
    const size_t prefix = len >= 8 && buf[6] >= 2 ? 12 : 10;
    size_t header = 0;
    for (size_t i = prefix - 1; len >= prefix && i >= 8; i--)
        header = header << 8 | buf[i];
    char *descr = NULL;
    if (len >= prefix && header <= len - prefix) {
        for (size_t i = prefix; i + 14 <= prefix + header && !descr; i++)
            if (memcmp(buf + i, "'descr'", 7) == 0) {
                size_t j = i + 7;
                while (j < prefix + header && (buf[j] == ' ' || buf[j] == ':'))
                    j++;
                if (j + 5 <= prefix + header && buf[j] == '\'' && buf[j + 4] == '\'' && buf[j + 1] &&
                    strchr("|<>=", buf[j + 1]) &&
                    (buf[j + 2] == 'u' || buf[j + 2] == 'i') && buf[j + 3] == '1')
                    descr = (char *)buf + j + 2;
            }
    }
    npy_array a;
    char err[512];
    if (descr) {
        const char was = descr[0];
        descr[0] = 'b';
        if (npy_parse(buf, len, &a, err, sizeof err) != 0) {
            descr[0] = was;
            rc = cli_fail(CLI_USAGE_ERROR, command, "%s: %s", path, err);
        } else if (!flag) {
            rc = cli_fail(CLI_USAGE_ERROR, command, "%s: raw bytes ('|%c1') need a format to be read in (see --help: "
                          "--k-dtype, --v-dtype)", path, was);
        } else if (a.ndim < 2 || a.ndim > 4 || a.count == 0) {
            rc = cli_fail(CLI_USAGE_ERROR, command, "%s: raw bytes for --%s take (B, N, S, row bytes), (N, S, row "
                          "bytes) or (S, row bytes), not %zu dimensions%s", path, flag, a.ndim, a.count ? "" : " (empty)");
        } else if (!(t->bits = malloc(a.count))) {
            rc = cli_fail(CLI_RUNTIME_ERROR, command, "%s: out of host memory", path);
        } else { /* the data ends the file's image as npy_parse found it: after the header */
            memcpy(t->bits, buf + prefix + header, a.count);
            t->ndim = a.ndim;
            memcpy(t->shape, a.shape, sizeof t->shape);
            t->count = a.count;
            *raw = true;
        }
        npy_free(&a); /* (cleared by a failed parse) */
    } else if (npy_parse(buf, len, &a, err, sizeof err) != 0) {
        rc = cli_fail(CLI_USAGE_ERROR, command, "%s: %s", path, err);
    } else {
        rc = tensor_from_array(command, path, &a, 2, 4, bf16, t);
    }
    free(buf);
    return rc;
}

const void *cli_tensor_storage(cli_tensor *t)
{
    if (t->type == CLATTN_FLOAT32 || t->bits)
        return t->type == CLATTN_FLOAT32 ? (const void *)t->data : t->bits;
    unsigned short *bits = malloc(t->count * sizeof *bits + 1);
    for (size_t i = 0; bits && i < t->count; i++) /* exact: the floats were widened from these types */
        bits[i] = t->type == CLATTN_FLOAT16 ? npy_float_to_half(t->data[i]) : npy_float_to_bf16(t->data[i]);
    return t->bits = bits;
}

int cli_tensor_convert(const char *command, const char *flag, const char *path, cli_tensor *t, clattn_dtype type)
{
    if (t->type == type)
        return CLI_OK;
    for (size_t i = 0; i < t->count; i++) {
        const float x = t->data[i];
        const float r = type == CLATTN_FLOAT32   ? x
                        : type == CLATTN_FLOAT16 ? npy_half_to_float(npy_float_to_half(x))
                                                 : npy_bf16_to_float_value(npy_float_to_bf16(x));
        if (isfinite(x) && !isfinite(r))
            return cli_fail(CLI_USAGE_ERROR, command,
                            "--%s %s: element %zu (%g) does not fit %s, the type this array is used in (see "
                            "--out-dtype): scale it down or choose a wider type",
                            flag, path, i, (double)x, clattn_dtype_name(type));
        t->data[i] = r;
    }
    free(t->bits); /* (bit patterns of the old type) */
    t->bits = NULL;
    t->type = type;
    return CLI_OK;
}

int cli_parse_dtype(const char *command, const char *flag, const char *text, clattn_dtype *out)
{
    static const clattn_dtype types[] = {CLATTN_FLOAT32, CLATTN_FLOAT16, CLATTN_BFLOAT16};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (strcmp(text, clattn_dtype_name(types[i])) == 0) {
            *out = types[i];
            return CLI_OK;
        }
    return cli_fail(CLI_USAGE_ERROR, command, "--%s: '%s' is not float32, float16 or bfloat16", flag, text);
}

int cli_parse_format(const char *command, const char *flag, const char *text, clattn_dtype *out)
{
    const int t = clattn_dtype_from_name(text);
    if (t >= 0) {
        *out = (clattn_dtype)t;
        return CLI_OK;
    }
    char names[512] = "";
    size_t used = 0;
    for (int i = 0; strcmp(clattn_dtype_name((clattn_dtype)i), "unknown") != 0 && used < sizeof names; i++) {
        const int n = snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "", clattn_dtype_name((clattn_dtype)i));
        used += n > 0 ? (size_t)n : 0;
    }
    return cli_fail(CLI_USAGE_ERROR, command, "--%s: '%s' is not a storage format (%s)", flag, text, names);
}

float *cli_widen(const void *bits, size_t n, clattn_dtype type)
{
    float *out = malloc(n * sizeof *out + 1);
    for (size_t i = 0; out && i < n; i++)
        out[i] = type == CLATTN_FLOAT32    ? ((const float *)bits)[i]
                 : type == CLATTN_FLOAT16 ? npy_half_to_float(((const unsigned short *)bits)[i])
                                          : npy_bf16_to_float_value(((const unsigned short *)bits)[i]);
    return out;
}

void cli_tensor_free(cli_tensor *t)
{
    free(t->bits);
    free(t->data);
    memset(t, 0, sizeof *t);
}

float *cli_alloc_floats(size_t a, size_t b, size_t c)
{
    if (b && a > SIZE_MAX / b)
        return NULL;
    size_t n = a * b;
    if (c && n > SIZE_MAX / c / sizeof(float))
        return NULL;
    return malloc(n * c * sizeof(float) + 1);
}

int cli_outputs_add(const char *command, cli_outputs *out, const char *path, const char *note, size_t *index)
{
    char err[512];
    if (out->count == CLI_OUTPUTS_MAX)
        return cli_fail(CLI_RUNTIME_ERROR, command, "internal: more than %d outputs", CLI_OUTPUTS_MAX);
    char *copy = strdup(note ? note : "");
    if (!copy)
        return cli_fail(CLI_RUNTIME_ERROR, command, "%s: out of memory", path);
    if (atomic_prepare(&out->file[out->count], path, err, sizeof err) != 0) {
        free(copy);
        return cli_fail(CLI_USAGE_ERROR, command, "%s: %s", path, err);
    }
    out->path[out->count] = path;
    out->note[out->count] = copy;
    if (index)
        *index = out->count;
    out->count++;
    return CLI_OK;
}

int cli_outputs_add_npy(const char *command, cli_outputs *out, const char *path, size_t ndim, const size_t *shape,
                        clattn_dtype type, size_t *index)
{
    char note[128];
    size_t used = (size_t)snprintf(note, sizeof note, "(");
    for (size_t d = 0; d < ndim && used < sizeof note; d++)
        used += (size_t)snprintf(note + used, sizeof note - used, "%s%zu", d ? ", " : "", shape[d]);
    if (used < sizeof note)
        snprintf(note + used, sizeof note - used, "%s) %s%s", ndim == 1 ? "," : "",
                 type == CLATTN_BFLOAT16 ? "bfloat16 ('<u2')" : clattn_dtype_name(type),
                 type > CLATTN_BFLOAT16 ? " bytes ('|u1')" : "");
    return cli_outputs_add(command, out, path, note, index);
}

int cli_outputs_begin(const char *command, cli_outputs *out, size_t i, FILE **fp)
{
    char err[512];
    if (atomic_start(&out->file[i], err, sizeof err) != 0)
        return cli_fail(CLI_USAGE_ERROR, command, "%s: %s", out->path[i], err);
    *fp = out->file[i].fp;
    return CLI_OK;
}

int cli_outputs_end(const char *command, cli_outputs *out, size_t i)
{
    char err[512];
    if (atomic_finish(&out->file[i], err, sizeof err) != 0)
        return cli_fail(CLI_USAGE_ERROR, command, "%s: %s", out->path[i], err);
    return CLI_OK;
}

int cli_outputs_write_npy(const char *command, cli_outputs *out, size_t i, const float *data, size_t ndim,
                          const size_t *shape, clattn_dtype type)
{
    char err[512];
    FILE *fp = NULL;
    int rc = cli_outputs_begin(command, out, i, &fp);
    if (rc != CLI_OK)
        return rc;
    const npy_dtype as = type == CLATTN_FLOAT16 ? NPY_F2 : type == CLATTN_BFLOAT16 ? NPY_U2 : NPY_F4;
    if (npy_write_floats_as(fp, as, data, ndim, shape, err, sizeof err) != 0)
        return cli_fail(CLI_USAGE_ERROR, command, "%s: %s", out->path[i], err);
    return cli_outputs_end(command, out, i);
}

int cli_outputs_write_bytes(const char *command, cli_outputs *out, size_t i, const void *bytes, size_t ndim,
                            const size_t *shape)
{
    FILE *fp = NULL;
    int rc = cli_outputs_begin(command, out, i, &fp);
    if (rc != CLI_OK)
        return rc;
    char dict[256];
    size_t used = (size_t)snprintf(dict, sizeof dict, "{'descr': '|u1', 'fortran_order': False, 'shape': (");
    size_t count = 1;
    for (size_t d = 0; d < ndim && used < sizeof dict; d++) {
        used += (size_t)snprintf(dict + used, sizeof dict - used, "%zu%s", shape[d], ndim == 1 || d + 1 < ndim ? ", " : "");
        count *= shape[d];
    }
    if (used < sizeof dict)
        used += (size_t)snprintf(dict + used, sizeof dict - used, "), }");
    const size_t total = (10 + used + 1 + 63) / 64 * 64; /* (numpy's: the data starts at a multiple of 64) */
    const size_t header = total - 10;
    const unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(header & 0xff),
                                   (unsigned char)(header >> 8)};
    bool ok = used < sizeof dict && fwrite(pre, 1, 10, fp) == 10 && fwrite(dict, 1, used, fp) == used;
    for (size_t k = used; ok && k + 1 < header; k++)
        ok = fputc(' ', fp) != EOF;
    ok = ok && fputc('\n', fp) != EOF && fwrite(bytes, 1, count, fp) == count;
    if (!ok)
        return cli_fail(CLI_USAGE_ERROR, command, "%s: %s", out->path[i], strerror(errno));
    return cli_outputs_end(command, out, i);
}

int cli_outputs_commit(const char *command, cli_outputs *out)
{
    /* The messages keep out of an output written to the standard output. */
    FILE *say = stdout;
    for (size_t i = 0; i < out->count; i++)
        if (out->file[i].is_stdout)
            say = stderr;
    char err[512];
    size_t failed;
    if (atomic_commit_all(out->file, out->count, err, sizeof err, &failed) != 0)
        return cli_fail(CLI_USAGE_ERROR, command, "%s: %s", out->path[failed], err);
    for (size_t i = 0; i < out->count; i++)
        fprintf(say, "wrote %s %s\n", out->path[i], out->note[i]);
    return CLI_OK;
}

void cli_outputs_discard(cli_outputs *out)
{
    for (size_t i = 0; i < out->count; i++) {
        atomic_abort(&out->file[i]); /* (nothing left to do after a commit) */
        free(out->note[i]);
    }
    memset(out, 0, sizeof *out);
}

char **cli_split_labels(const char *text, size_t *count)
{
    size_t n = 1;
    for (const char *p = text; *p; p++)
        n += *p == ',';
    char **labels = calloc(n, sizeof *labels);
    if (!labels)
        return NULL;
    const char *start = text;
    for (size_t i = 0; i < n; i++) {
        const char *end = strchr(start, ',');
        size_t len = end ? (size_t)(end - start) : strlen(start);
        labels[i] = malloc(len + 1);
        if (!labels[i]) {
            cli_free_labels(labels, i);
            return NULL;
        }
        memcpy(labels[i], start, len);
        labels[i][len] = '\0';
        start = end ? end + 1 : start + len;
    }
    *count = n;
    return labels;
}

void cli_free_labels(char **labels, size_t count)
{
    if (!labels)
        return;
    for (size_t i = 0; i < count; i++)
        free(labels[i]);
    free(labels);
}

/* ---- progress ---- */

struct cli_progress {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t done_cond;
    bool done, shown;
    const char *what;
};

static void *progress_main(void *arg)
{
    cli_progress *p = arg;
    struct timespec start, deadline;
    clock_gettime(CLOCK_REALTIME, &start);
    pthread_mutex_lock(&p->lock);
    for (long seconds = 1; !p->done; seconds++) {
        deadline = start;
        deadline.tv_sec += seconds;
        while (!p->done && pthread_cond_timedwait(&p->done_cond, &p->lock, &deadline) == 0)
            ;
        if (!p->done) {
            fprintf(stderr, "\r%s… %ld s", p->what, seconds);
            fflush(stderr);
            p->shown = true;
        }
    }
    if (p->shown)
        fprintf(stderr, "\r\033[K");
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

cli_progress *cli_progress_start(const char *what)
{
    if (!isatty(STDERR_FILENO))
        return NULL;
    cli_progress *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->what = what;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->done_cond, NULL);
    if (pthread_create(&p->thread, NULL, progress_main, p) != 0) {
        pthread_cond_destroy(&p->done_cond);
        pthread_mutex_destroy(&p->lock);
        free(p);
        return NULL;
    }
    return p;
}

void cli_progress_stop(cli_progress *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->done = true;
    pthread_cond_signal(&p->done_cond);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->thread, NULL);
    pthread_cond_destroy(&p->done_cond);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

void cli_print_json_string(const char *s)
{
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            printf("\\%c", *p);
        else if (*p < 0x20)
            printf("\\u%04x", *p);
        else
            putchar(*p);
    }
    putchar('"');
}
