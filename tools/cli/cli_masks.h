/* The attention flags shared by `clattn sdpa` and `clattn mha`.
 *
 * Masks: --causal, --causal-bottom-right, --mask M.npy (float additive, or bool where True = may
 * attend), --key-lengths LEN.npy, --offset N / --offsets OFF.npy (query positions), --window L,R and
 * --tree PARENTS.npy (tree attention).
 * Variants: --kv-heads N, --softcap C, --sinks SINKS.npy and --alibi SLOPES.npy|auto. */
#ifndef CLATTN_CLI_MASKS_H
#define CLATTN_CLI_MASKS_H

#include "cli.h"

typedef struct cli_masks {
    bool causal, causal_bottom_right;
    const char *mask_path, *lengths_path, *offset_text, *offsets_path, *window_text, *tree_path;
    /* Filled by cli_masks_load: */
    clattn_masks masks;     /* points into this struct (window), so the struct must not move */
    float *mask;            /* (L,C) or (B,H,L,C) as masks.additive says; NULL without --mask */
    size_t mask_cols;       /* its last dimension C: S, or fewer (masks.mask_kv_len, the rest masked) */
    size_t *lengths;        /* B entries; NULL without --key-lengths */
    long long *offsets;     /* B entries; NULL without --offset or --offsets */
    clattn_window window;   /* masks.window points here with --window */
    int *tree;              /* B·L parents; NULL without --tree */
} cli_masks;

#define CLI_MASK_OPTIONS(m)                                                                                  \
    {"causal", &(m)->causal, NULL}, {"causal-bottom-right", &(m)->causal_bottom_right, NULL},               \
        {"mask", NULL, &(m)->mask_path}, {"key-lengths", NULL, &(m)->lengths_path},                         \
        {"offset", NULL, &(m)->offset_text}, {"offsets", NULL, &(m)->offsets_path},                         \
        {"window", NULL, &(m)->window_text}, {"tree", NULL, &(m)->tree_path}

#define CLI_MASK_HELP                                                                                        \
    "  --causal               query i sees keys 0..i (PyTorch's is_causal)\n"                                \
    "  --causal-bottom-right  query i sees keys 0..i+S-L (decoding with a KV cache)\n"                       \
    "  --mask M.npy           additive float mask (-inf allowed), or boolean mask where True means\n"        \
    "                         'may attend' (as PyTorch's scaled_dot_product_attention; note that\n"         \
    "                         nn.MultiheadAttention's masks use the opposite meaning). Shape (L,S),\n"      \
    "                         (H,L,S) or (B,H,L,S); dimensions of 1 broadcast. The last dimension may\n"    \
    "                         be narrower than S, as ONNX allows: the keys past it are masked.\n"          \
    "  --key-lengths LEN.npy  integer array (B,): keys j >= LEN[b] are masked in batch b\n"                  \
    "  --offset N             query i sits at key position p = N + i in every batch (may be negative);\n"   \
    "                         causal masks show keys j <= p, --window and --alibi measure from p.\n"        \
    "                         Default: p = i, or i + S - L with --causal-bottom-right\n"                    \
    "  --offsets OFF.npy      integer array (B,): one such offset per batch (instead of --offset)\n"       \
    "  --window L,R           sliding window: query at p sees keys p-L..p+R; -1 leaves a side unbounded\n"    \
    "  --tree PARENTS.npy     integer array (B,L) or (L,): tree attention (speculative decoding's draft\n"   \
    "                         trees): each query's parent among the earlier queries, -1 for a root. The\n"  \
    "                         L queries' own keys are consecutive, query i at position p finding token\n"  \
    "                         t's at p-i+t (place them with --causal-bottom-right or --offsets): of\n"    \
    "                         those, each query sees only its ancestors' and its own\n"

/* Reads the mask files and values for shape (B,H,L,S) and fills m->masks. Reports and returns
 * CLI_USAGE_ERROR on a bad file, value or shape. */
int cli_masks_load(const char *command, cli_masks *m, size_t B, size_t H, size_t L, size_t S);
void cli_masks_free(cli_masks *m);

/* --FLAG's file (PATH): H finite floats, into *values (the caller frees them). Reports and returns
 * CLI_USAGE_ERROR on a bad file, shape or value. */
int cli_load_per_head(const char *command, const char *flag, const char *path, size_t H, float **values);

/* The variant flags, one set for `clattn sdpa`, `mha`, `ring` and `bench` (src/base/call_options.def's rows with a `cli`
 * flag; tools/scripts/check_options.py finds each in every subcommand's --help that the table names). */
typedef struct cli_variants {
    const char *kv_heads_text, *softcap_text, *sinks_path, *alibi_text, *scores_text, *logit_scale_path;
    bool softmax_double; /* --softmax-double: desc.softmax_precision = CLATTN_SOFTMAX_DOUBLE */
    bool reproducible;   /* --reproducible: desc.arithmetic = CLATTN_ARITHMETIC_REPRODUCIBLE */
    /* Filled by cli_variants_parse: */
    size_t kv_heads; /* 0 without --kv-heads (then K/V have the query heads) */
    float softcap;   /* 0: off */
    clattn_weights_output scores_mode; /* --scores MODE:FILE: which scores FILE gets */
    const char *scores_path;           /* its FILE, or NULL */
    /* Filled by cli_variants_load: H entries each, or NULL without the flag. */
    float *sinks, *alibi, *logit_scale;
} cli_variants;

#define CLI_VARIANT_OPTIONS(v)                                                                               \
    {"kv-heads", NULL, &(v)->kv_heads_text}, {"softcap", NULL, &(v)->softcap_text},                         \
        {"sinks", NULL, &(v)->sinks_path}, {"alibi", NULL, &(v)->alibi_text}, {"scores", NULL, &(v)->scores_text}, \
        {"softmax-double", &(v)->softmax_double, NULL}, {"logit-scale", NULL, &(v)->logit_scale_path},      \
        {"reproducible", &(v)->reproducible, NULL}

#define CLI_VARIANT_HELP                                                                                     \
    "  --logit-scale SC.npy   float array (H,): a scale per head (a temperature) multiplying the scaled\n"   \
    "                         scores before soft-capping\n"                                                \
    "  --softcap C            soft-cap the scaled scores: C·tanh(s/C) (Gemma 2; C >= 0, 0: off)\n"          \
    "  --sinks SINKS.npy      float array (H,): one attention-sink logit per head, in each row's\n"          \
    "                         softmax denominator without a value (gpt-oss): weights sum to < 1\n"           \
    "  --alibi SLOPES.npy     float array (H,): ALiBi slopes; slope[h]·(j - p) is added to the score of\n"   \
    "                         key j for the query at position p\n"                                          \
    "  --alibi auto           the standard slopes of Press et al. for H heads: 2^(-8(h+1)/H) when H is a\n" \
    "                         power of two; else those of the power of two n below H, then every other\n" \
    "                         slope of 2n heads (2^(-4(2k+1)/n)) for the remaining H - n (write ./auto\n" \
    "                         for a file named auto)\n"                                                  \
    "  --scores MODE:FILE     write the scores (B,H,L,S) at one of ONNX's qk_matmul_output_mode points:\n" \
    "                         qk (Q·Kᵀ·scale, every key), softcapped, masked (with ALiBi and the masks,\n" \
    "                         -inf where hidden: what the softmax takes) or softmax (the weights);\n"     \
    "                         instead of --weights, without --heatmap\n"                                   \
    "  --softmax-double       the softmax in double precision (ONNX's softmax_precision = DOUBLE): the\n"  \
    "                         scores stay float32, their max, exponentials, sum and normalisation are\n"  \
    "                         double, the weights rounded to float32 once; runs the staged path (in\n"  \
    "                         float-float arithmetic on a device without cl_khr_fp64)\n"                  \
    "  --reproducible         reproducible arithmetic: the same bits on every OpenCL implementation,\n"   \
    "                         tuning and batch (docs/reproducible.md; the forward pass only)\n"

/* Parses --kv-heads and --softcap (before any file is read). Reports and returns CLI_USAGE_ERROR. */
int cli_variants_parse(const char *command, cli_variants *v);
/* Checks --kv-heads against H query heads and reads --sinks, --alibi and --logit-scale (H values each). */
int cli_variants_load(const char *command, cli_variants *v, size_t H);
/* The variants given into a descriptor (after cli_variants_load): softcap, sinks, ALiBi slopes, logit scales,
 * what the weights output holds and the softmax's precision, each where its flag was given (the rest stay
 * the descriptor's); a layer's through call_options_sdpa_to_mha. */
void cli_variants_apply(const cli_variants *v, clattn_sdpa_desc *d);
void cli_variants_apply_mha(const cli_variants *v, clattn_mha_desc *d);
void cli_variants_free(cli_variants *v);

#endif
