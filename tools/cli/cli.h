/* Shared pieces of the clattn command-line tool: exit codes, option parsing, error reporting, device
 * contexts, tensors loaded from .npy files, and progress on a terminal. */
#ifndef CLATTN_CLI_H
#define CLATTN_CLI_H

#include <clattn/clattn.h>
#include "atomic_file.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Exit statuses, the same for every subcommand. */
enum {
    CLI_OK = 0,
    CLI_RUNTIME_ERROR = 1, /* OpenCL or library failure, conformance check failed */
    CLI_USAGE_ERROR = 2,   /* bad flags, bad files, shapes that do not fit together */
    CLI_NO_PLATFORM = 3    /* no OpenCL platform or device at all */
};

/* One command-line option of a subcommand. A flag sets *flag; a valued option stores its text. */
typedef struct cli_option {
    const char *name; /* without the leading "--" */
    bool *flag;       /* for flags, else NULL */
    const char **value;
} cli_option;

/* Parses argv[first..argc) against opts; "--name value" and "--name=value" both work. Prints a usage
 * error naming the flag and returns CLI_USAGE_ERROR, or CLI_OK. "--help" sets *help. */
int cli_parse(const char *command, int argc, char **argv, int first, const cli_option *opts, size_t nopts,
              bool *help);

/* Numbers given on the command line: the whole text must be the number. */
int cli_parse_float(const char *command, const char *flag, const char *text, float *out);
int cli_parse_size(const char *command, const char *flag, const char *text, size_t *out);
/* A whole signed decimal integer ('-' allowed, no '+', no blanks) that fits a long long: true and *out,
 * or false (nothing reported). */
bool cli_integer(const char *text, long long *out);
/* cli_integer, reporting "--FLAG: 'TEXT' is not a whole number" (exit status CLI_USAGE_ERROR). */
int cli_parse_integer(const char *command, const char *flag, const char *text, long long *out);

/* "clattn CMD: message" on stderr; returns status. */
int cli_fail(int status, const char *command, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Reports a failed library call: status name, device, detail and, after a build failure, the
 * build log. Returns CLI_NO_PLATFORM or CLI_RUNTIME_ERROR. */
int cli_fail_status(const char *command, const clattn_context *ctx, clattn_status status, const char *what);

/* Outputs given twice under any name ("--out o.npy --weights ./o.npy", a symbolic or hard link to the
 * same file) are a usage error, reported before anything runs. flags[i] names the option of paths[i];
 * NULL paths are skipped; at most CLI_OUTPUTS_MAX. */
int cli_check_distinct_outputs(const char *command, const char *const *flags, const char *const *paths, size_t n);

/* Prints the library's last warning on ctx to stderr ("clattn CMD: warning: ..."), once: the fused
 * kernel fell back to the staged path, CLBlast to clattn's matmul, a malformed CLATTN_TILE, ... */
void cli_report_warning(const char *command, const clattn_context *ctx);

/* A JSON string literal of s on stdout, quotes and control characters escaped. */
void cli_print_json_string(const char *s);

/* Creates a context for --device SPEC (NULL: the default device), reporting its warnings. On failure
 * reports and returns the exit status. */
int cli_open_context(const char *command, const char *spec, clattn_context **ctx);

/* A tensor read from a .npy file, as floats (f4 or f8 on disk: float32; f2: float16 and u2 with --bf16:
 * bfloat16, both widened exactly) and the storage type it came in. */
typedef struct cli_tensor {
    float *data;
    size_t ndim;
    size_t shape[8];
    size_t count;
    clattn_dtype type; /* CLATTN_FLOAT32 for f4 and f8 */
    void *bits;        /* data in `type`, made by cli_tensor_storage */
} cli_tensor;

/* Loads a tensor whose rank is between min_rank and max_rank. On error prints
 * "clattn CMD: FILE: reason" and returns CLI_USAGE_ERROR. */
int cli_load_tensor(const char *command, const char *path, size_t min_rank, size_t max_rank, cli_tensor *t);
/* The same, where bf16 (--bf16) says that the file must be '<u2' bfloat16 bit patterns (a '<u2' file is
 * refused without it: its bits could be anything). */
int cli_load_tensor_as(const char *command, const char *path, size_t min_rank, size_t max_rank, bool bf16,
                       cli_tensor *t);
/* A K or V file for `--FLAG NAME` (flag NULL: none given): floats as cli_load_tensor_as reads them (rank 2
 * to 4), or, from a '|u1' or '|i1' file, raw bytes — *raw true, the bytes in t->bits (count of them, the
 * last dimension the row's bytes), t->data NULL. Raw bytes without a flag are refused, naming the file. */
int cli_load_kv(const char *command, const char *path, const char *flag, bool bf16, cli_tensor *t, bool *raw);
/* The tensor's elements in its storage type (its floats for float32, else bit patterns re-encoded
 * exactly), owned by t; NULL when out of memory. */
const void *cli_tensor_storage(cli_tensor *t);
/* Re-types t as `type` (float32, float16, bfloat16) where a call expects that type: each value rounded to
 * nearest even into it (widening is exact). A finite value that would round to ±inf is refused: a usage
 * error naming `flag` and the file at `path`. Non-finite values pass as they are. */
int cli_tensor_convert(const char *command, const char *flag, const char *path, cli_tensor *t, clattn_dtype type);
void cli_tensor_free(cli_tensor *t);

/* --out-dtype and the like: "float32", "float16" or "bfloat16"; a usage error naming the flag else. */
int cli_parse_dtype(const char *command, const char *flag, const char *text, clattn_dtype *out);
/* --k-dtype and the like: any storage format's name (clattn_dtype_from_name); a usage error listing them. */
int cli_parse_format(const char *command, const char *flag, const char *text, clattn_dtype *out);
/* n elements of `type` (float32, float16, bfloat16) as new floats; NULL when out of memory. */
float *cli_widen(const void *bits, size_t n, clattn_dtype type);

/* malloc of a*b*c floats; NULL when the product overflows or memory is short. a is the product of
 * dimensions whose tensor already exists in memory, so it cannot overflow itself. */
float *cli_alloc_floats(size_t a, size_t b, size_t c);

/* The output files of one run, all or nothing, written as tools/formats/atomic_file.h says. First every
 * output is added (cli_outputs_add*): its destination checked (a folder, a missing folder, a link to
 * nothing are refused) and, for a regular file or a new one, its temporary created beside it under a
 * random name; then each is written in turn (a device, FIFO or the standard output as it comes, never
 * replaced); only when every one is written are the temporaries renamed into place (cli_outputs_commit),
 * every destination checked again first, and if a rename still fails the ones done are undone (new
 * files removed, files that existed back with their old content). A run that fails anywhere before
 * leaves no file behind and the files at those paths as they were; what went to a device or FIFO
 * cannot be taken back. */
#define CLI_OUTPUTS_MAX 16
typedef struct cli_outputs {
    size_t count;
    const char *path[CLI_OUTPUTS_MAX]; /* as given, for messages */
    char *note[CLI_OUTPUTS_MAX];       /* "(2, 4, 6, 64) float32", printed on commit */
    atomic_file file[CLI_OUTPUTS_MAX];
} cli_outputs;

/* Adds path (its index in *index when not NULL); reports "PATH: reason" and returns CLI_USAGE_ERROR
 * when its destination is refused. */
int cli_outputs_add(const char *command, cli_outputs *out, const char *path, const char *note, size_t *index);
/* The same for a .npy output of this shape in a storage type (float32, float16, bfloat16; any other:
 * its bytes, '|u1'), the note made from them. */
int cli_outputs_add_npy(const char *command, cli_outputs *out, const char *path, size_t ndim, const size_t *shape,
                        clattn_dtype type, size_t *index);
/* Output i's stream to write on (a FIFO waits here for its reader), then done with it; both report. */
int cli_outputs_begin(const char *command, cli_outputs *out, size_t i, FILE **fp);
int cli_outputs_end(const char *command, cli_outputs *out, size_t i);
/* Begin, the .npy (rounded to nearest even into '<f2' or '<u2' for float16 and bfloat16), end. */
int cli_outputs_write_npy(const char *command, cli_outputs *out, size_t i, const float *data, size_t ndim,
                          const size_t *shape, clattn_dtype type);
/* Begin, a '|u1' .npy of these bytes (a quantised cache's, as it lies in memory), end. */
int cli_outputs_write_bytes(const char *command, cli_outputs *out, size_t i, const void *bytes, size_t ndim,
                            const size_t *shape);
/* Renames every staged file into place and prints "wrote PATH NOTE" for each output (on stderr when one
 * of them is the standard output); on failure reports. */
int cli_outputs_commit(const char *command, cli_outputs *out);
/* Gives up what was not committed (temporaries removed) and frees the list; call on every path. */
void cli_outputs_discard(cli_outputs *out);

/* Splits "a,b,c" into labels (UTF-8 passes through). The caller frees with cli_free_labels. */
char **cli_split_labels(const char *text, size_t *count);
void cli_free_labels(char **labels, size_t count);

/* While long work runs, a line on stderr shows the elapsed seconds, when stderr is a terminal and the
 * work takes longer than a second. */
typedef struct cli_progress cli_progress;
cli_progress *cli_progress_start(const char *what);
void cli_progress_stop(cli_progress *p);

#endif
