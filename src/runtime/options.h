/* A context's configuration, resolved once when the context is created: what the program set through
 * clattn_context_options, else the environment (CLATTN_CACHE, XDG_CACHE_HOME/HOME, CLATTN_KERNEL_DIR,
 * CLATTN_TILE, CLATTN_GEMM, CLATTN_TUNING, CLATTN_SOFTMAX_DOUBLE), else the defaults. Nothing below reads the environment after this. */
#ifndef CLATTN_OPTIONS_H
#define CLATTN_OPTIONS_H

#include "clattn/clattn.h"

#include <stdbool.h>
#include <stddef.h>

/* Which GEMM the projections use (options.gemm, a tuning record or the device's default). */
typedef enum { GEMM_DEFAULT = 0, GEMM_CLATTN, GEMM_CLBLAST } gemm_impl;
typedef struct gemm_choice {
    gemm_impl impl;
    unsigned rows, vectors; /* clattn's tile: rows × vectors of VEC columns; 0: the device's default */
} gemm_choice;

/* Plain decimal numbers joined by 'x' ("64x64x4"), at most `max` of them, into out: how many, or 0 when
 * `text` is not such a list. */
size_t options_parse_numbers(const char *text, unsigned long *out, size_t max);

/* The fused kernel's tile: "MxN" or "MxNxR", plain decimal numbers within 1 ≤ M ≤ 1024, 1 ≤ N ≤ 256,
 * 1 ≤ R ≤ 8 (*rows 0 when R is not given). */
bool options_parse_tile(const char *text, unsigned *m, unsigned *n, unsigned *rows);

/* "clblast", "clattn" or "clattn:RxV" (1 ≤ R ≤ 16, 1 ≤ V ≤ 8), exactly. */
bool options_parse_gemm(const char *text, gemm_choice *out);
/* The spelling options_parse_gemm reads back. */
void options_format_gemm(const gemm_choice *choice, char *out, size_t size);

typedef struct context_options {
    bool cache_enabled;
    char *cache_dir;  /* the folder of cache entries; NULL when none is known (no XDG_CACHE_HOME/HOME) */
    char *kernel_dir; /* a folder of .cl files that replace the embedded ones, or NULL */
    bool tile_set;    /* a tile override: rows per group, keys per tile, rows per work-item (0: default) */
    unsigned tile_m, tile_n, tile_rows;
    gemm_choice gemm; /* impl GEMM_DEFAULT: not set (a tuning record or the device decides) */
    char *tuning;     /* options.tuning, else CLATTN_TUNING: read by tuning_options_resolve; NULL: unset */
    bool tuning_from_env;
    bool softmax_float_float; /* CLATTN_SOFTMAX_DOUBLE=float-float: the double softmax emulated everywhere */
    bool reproducible;        /* CLATTN_REPRODUCIBLE=1: every call's arithmetic CLATTN_ARITHMETIC_REPRODUCIBLE */
} context_options;

/* Fill `out` from `api` (may be NULL: all defaults) and the environment. A malformed value set through
 * the API is CLATTN_ERROR_INVALID_VALUE; one from the environment is ignored with a warning on ctx. */
clattn_status options_resolve(clattn_context *ctx, const clattn_context_options *api, context_options *out);
void options_free(context_options *options);

/* The environment variable `name`, read the way the library reads all of them (secure_getenv where it
 * exists), or NULL when unset. */
const char *options_env(const char *name);

#endif
