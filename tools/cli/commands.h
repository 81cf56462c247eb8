/* The subcommands of the clattn tool; each takes the whole argv (argv[1] is its name). */
#ifndef CLATTN_COMMANDS_H
#define CLATTN_COMMANDS_H

#include "cli.h"

#include <stddef.h>

int cmd_devices(int argc, char **argv);
int cmd_sdpa(int argc, char **argv);
int cmd_mha(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_tune(int argc, char **argv);
int cmd_ring(int argc, char **argv); /* built with MPI only (cmd_ring.c) */

/* SVG heatmap of the first batch's heads of weights (B,H,L,S), labelled from --tokens/--key-tokens,
 * written to output i of out (cli.h; begun and ended here). */
int write_heatmap(const char *command, cli_outputs *out, size_t i, const float *weights, size_t B, size_t H, size_t L,
                  size_t S, const char *tokens, const char *key_tokens);

#endif
