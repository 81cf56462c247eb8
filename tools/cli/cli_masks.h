/* The mask flags shared by `clattn sdpa` and `clattn mha`: --causal, --causal-bottom-right,
 * --mask M.npy (float additive, or bool where True = may attend) and --key-lengths LEN.npy. */
#ifndef CLATTN_CLI_MASKS_H
#define CLATTN_CLI_MASKS_H

#include "cli.h"

typedef struct cli_masks {
    bool causal, causal_bottom_right;
    const char *mask_path, *lengths_path;
    /* Filled by cli_masks_load: */
    clattn_masks masks;
    float *mask;     /* (L,S) or (B,H,L,S) as masks.additive says; NULL without --mask */
    size_t *lengths; /* B entries; NULL without --key-lengths */
} cli_masks;

#define CLI_MASK_OPTIONS(m)                                                                                  \
    {"causal", &(m)->causal, NULL}, {"causal-bottom-right", &(m)->causal_bottom_right, NULL},               \
        {"mask", NULL, &(m)->mask_path}, {"key-lengths", NULL, &(m)->lengths_path}

#define CLI_MASK_HELP                                                                                        \
    "  --causal               query i sees keys 0..i (PyTorch's is_causal)\n"                                \
    "  --causal-bottom-right  query i sees keys 0..i+S-L (decoding with a KV cache)\n"                       \
    "  --mask M.npy           additive float mask (-inf allowed), or boolean mask where True means\n"        \
    "                         'may attend' (as PyTorch's scaled_dot_product_attention; note that\n"         \
    "                         nn.MultiheadAttention's masks use the opposite meaning). Shape (L,S),\n"      \
    "                         (H,L,S) or (B,H,L,S); dimensions of 1 broadcast.\n"                           \
    "  --key-lengths LEN.npy  integer array (B,): keys j >= LEN[b] are masked in batch b\n"

/* Reads the mask files for shape (B,H,L,S) and fills m->masks. Reports and returns CLI_USAGE_ERROR
 * on a bad file or shape. */
int cli_masks_load(const char *command, cli_masks *m, size_t B, size_t H, size_t L, size_t S);
void cli_masks_free(cli_masks *m);

#endif
