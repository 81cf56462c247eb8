/* Programmable attention for `clattn sdpa` and `clattn mha`: --mods FILE.cl (OpenCL C defining
 * score_mod, mask_mod or both), --aux NAME=FILE.npy[:INDEX] and --define NAME=VALUE (each repeatable, the
 * auxiliary tensors in the functions' argument order). */
#ifndef CLATTN_CLI_MODS_H
#define CLATTN_CLI_MODS_H

#include "cli.h"
#include "npy.h"

#define CLI_MODS_MAX_DEFINES 16

typedef struct cli_mods {
    const char *file; /* --mods */
    bool block_mask;  /* --block-mask: a block mask from --mods' mask_mod */
    const char *block_sparse, *block_size; /* --block-sparse FILE.npy, --block-size Q[,K] */
    const char *aux_text[CLATTN_MODS_MAX_AUX], *defines[CLI_MODS_MAX_DEFINES];
    size_t naux, ndefines;
    /* Filled by cli_mods_make: */
    char *source;
    char names[CLATTN_MODS_MAX_AUX][64];
    npy_array arrays[CLATTN_MODS_MAX_AUX];
    cl_mem buffers[CLATTN_MODS_MAX_AUX];
    clattn_mods *mods; /* NULL without --mods */
    clattn_block_mask *mask; /* NULL without --block-mask or --block-sparse */
} cli_mods;

#define CLI_MODS_OPTIONS(m)                                                                                  \
    {"mods", NULL, &(m)->file}, {"block-mask", &(m)->block_mask, NULL}, {"block-sparse", NULL, &(m)->block_sparse}, \
        {"block-size", NULL, &(m)->block_size}

#define CLI_MODS_HELP                                                                                        \
    "  --mods FILE.cl         programmable attention: OpenCL C defining\n"                                  \
    "                           float score_mod(float score, int b, int h, long q, long k, AUX...)\n"       \
    "                           bool  mask_mod(int b, int h, long q, long k, AUX...)\n"                     \
    "                         or both (q, k absolute positions; see docs/programmable-attention.md;\n" \
    "                         examples in tools/mods/)\n"                                                  \
    "  --aux NAME=FILE.npy[:INDEX]  an auxiliary tensor, the functions' argument NAME, typed from the file\n" \
    "                         (f4/f8: float, f2: half, i4: int, i8: long, b1: uchar); INDEX query, key,\n"  \
    "                         position (both), head or batch has each call check its length, default:\n"  \
    "                         the functions may read the whole array. Repeatable, in argument order\n"     \
    "  --define NAME=VALUE    a compile-time constant (#define NAME VALUE) for the functions; repeatable\n" \
    "  --block-mask           evaluate --mods' mask_mod once over blocks of the call's positions and skip\n"  \
    "                         the blocks it hides wholly (the result is the same, sooner)\n"               \
    "  --block-sparse B.npy   a block-sparse layout instead of a mask_mod: a (QB, KB) array, nonzero where\n"  \
    "                         query block r may see key block c (every pair of it); the others are hidden\n" \
    "  --block-size Q[,K]     positions and keys per block for those two (default 128; K defaults to Q)\n"

/* Takes every --aux and --define (repeatable, unlike other flags) out of argv[first..*argc), so that
 * cli_parse sees the rest. Reports and returns CLI_USAGE_ERROR when one lacks its value or there are too
 * many. */
int cli_mods_take(const char *command, int *argc, char **argv, int first, cli_mods *m);

/* After cli_parse: --aux and --define need --mods. */
int cli_mods_check(const char *command, const cli_mods *m);

/* With --mods: reads the source and arrays, uploads the arrays to ctx, and makes m->mods (reports and
 * returns CLI_USAGE_ERROR for a bad file or a source the library refuses). Without: CLI_OK, mods NULL. */
int cli_mods_make(const char *command, clattn_context *ctx, cli_mods *m);

/* With --block-mask or --block-sparse, after cli_mods_make: m->mask for calls of B batches, H heads, L
 * query rows at the positions `masks` gives them, over S keys. */
int cli_mods_block_mask(const char *command, clattn_context *ctx, cli_mods *m, const clattn_masks *masks, size_t B,
                        size_t H, size_t L, size_t S);

void cli_mods_free(cli_mods *m);

#endif
