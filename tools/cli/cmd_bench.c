/* `clattn bench`: a fixed set of attention cases timed on one device — milliseconds (median of several
 * runs after a warm-up), GFLOP/s, the library's peak extra device memory, and where the time goes: the
 * kernels' own device time (their profiling events, read through clattn_profile_read) against the wall
 * time of the same run, so the rest is host overhead. SDPA cases run both the fused kernel and the
 * staged path, so their ratio comes from the same run. tools/scripts/bench_peer.py adds numpy and
 * PyTorch. */
#define _POSIX_C_SOURCE 200809L
#include "bench_native.h"
#include "bench_stream.h"
#include "cli.h"
#include "cli_masks.h"
#include "ring_model.h"
#include "npy.h"
#include "commands.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* SDPA (dense tensors), an MHA layer, a ragged batch of decode rows (clattn_sdpa_ragged: sequence b holds
 * S_b = 256 + b·(S − 256)/(B − 1) keys), a paged cache (clattn_sdpa_paged, blocks of `block` rows), a
 * projection (clattn_projection with a bias: L rows, model_dim inputs, S outputs), SDPA's backward pass
 * (clattn_sdpa_backward, after one untimed forward for its out and lse); and the serving primitives (issue 40):
 * top-k sparse attention over a dense K/V (clattn_sdpa_sparse, model_dim keys a row), shared-prefix attention
 * (clattn_sdpa_cascade: B sequences of S keys, the first model_dim of them a prefix they share in the paged pool),
 * a mixed batch (clattn_sdpa_paged_ragged: the first model_dim sequences a chunk of L query rows, the others a
 * decode row each, over S keys each; a case named "separate calls" runs the same work a call a sequence). */
typedef enum {
    BENCH_SDPA, BENCH_MHA, BENCH_RAGGED, BENCH_PAGED, BENCH_GEMM, BENCH_BACKWARD, BENCH_SPARSE, BENCH_CASCADE,
    BENCH_MIXED
} bench_kind;
static const char *const bench_kind_names[] = {"sdpa",     "mha",    "ragged",  "paged", "gemm",
                                               "backward", "sparse", "cascade", "mixed"};

typedef struct bench_case {
    const char *name;
    bench_kind kind;
    size_t B, H, L, S, D;
    clattn_causal causal;
    size_t model_dim; /* MHA: d_model (and out_dim with W_O); sparse: keys a row selects; a paged or cascade
                       * case: rows of a prefix every sequence shares; mixed: sequences with a chunk of L rows */
    bool long_context; /* fused only: the staged path would need L×S memory */
    long long window;  /* > 0: a sliding window of this many keys to the left (with causal) */
    size_t kv_heads;   /* SDPA: K/V heads (grouped-query attention); 0: H */
    const char *versus; /* the case whose first path's time this one's is printed against, or NULL */
    size_t block;       /* BENCH_PAGED: rows per block */
    clattn_dtype kv_type; /* SDPA: storage of K and V (an int8 cache has a float scale per row) */
    clattn_dtype qo_type; /* SDPA: storage of Q and the output */
} bench_case;

static const bench_case full_cases[] = {
    {"sdpa L=S=2048 H=8 D=64", BENCH_SDPA, 1, 8, 2048, 2048, 64, CLATTN_CAUSAL_NONE, 0, false, 0, 0, NULL, 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    /* Reproducible arithmetic (issue 41) against the default, the same call. */
    {"sdpa reproducible L=S=2048 H=8 D=64", BENCH_SDPA, 1, 8, 2048, 2048, 64, CLATTN_CAUSAL_NONE, 0, false, 0, 0,
     "sdpa L=S=2048 H=8 D=64", 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"sdpa fp16 Q/K/V/O L=S=2048 H=8 D=64", BENCH_SDPA, 1, 8, 2048, 2048, 64, CLATTN_CAUSAL_NONE, 0, false, 0, 0,
     "sdpa L=S=2048 H=8 D=64", 0, CLATTN_FLOAT16, CLATTN_FLOAT16},
    {"sdpa bf16 Q/K/V/O L=S=2048 H=8 D=64", BENCH_SDPA, 1, 8, 2048, 2048, 64, CLATTN_CAUSAL_NONE, 0, false, 0, 0,
     "sdpa L=S=2048 H=8 D=64", 0, CLATTN_BFLOAT16, CLATTN_BFLOAT16},
    {"sdpa causal L=S=4096 H=8 D=64", BENCH_SDPA, 1, 8, 4096, 4096, 64, CLATTN_CAUSAL_TOP_LEFT, 0, false, 0, 0, NULL, 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    /* The backward pass against the forward of the same shape. */
    {"sdpa backward L=S=2048 H=8 D=64", BENCH_BACKWARD, 1, 8, 2048, 2048, 64, CLATTN_CAUSAL_NONE, 0, false, 0, 0,
     "sdpa L=S=2048 H=8 D=64", 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"sdpa backward causal L=S=4096 H=8 D=64", BENCH_BACKWARD, 1, 8, 4096, 4096, 64, CLATTN_CAUSAL_TOP_LEFT, 0, false, 0,
     0, "sdpa causal L=S=4096 H=8 D=64", 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"sdpa causal L=S=65536 H=8 D=64 (long context)", BENCH_SDPA, 1, 8, 65536, 65536, 64, CLATTN_CAUSAL_TOP_LEFT, 0,
     true, 0, 0, NULL, 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"sdpa causal L=S=16384 H=8 D=64", BENCH_SDPA, 1, 8, 16384, 16384, 64, CLATTN_CAUSAL_TOP_LEFT, 0, true, 0, 0, NULL, 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"sdpa causal L=S=16384 H=8 D=64 window 512", BENCH_SDPA, 1, 8, 16384, 16384, 64, CLATTN_CAUSAL_TOP_LEFT, 0, true,
     512, 0, NULL, 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    /* Programmable attention (bench_mods below): mods against the built-in mask or term they equal. */
    {"sdpa causal L=S=2048 H=8 D=64", BENCH_SDPA, 1, 8, 2048, 2048, 64, CLATTN_CAUSAL_TOP_LEFT, 0, false, 0, 0, NULL, 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"sdpa causal mask_mod L=S=2048 H=8 D=64", BENCH_SDPA, 1, 8, 2048, 2048, 64, CLATTN_CAUSAL_NONE, 0, false, 0, 0,
     "sdpa causal L=S=2048 H=8 D=64", 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"sdpa causal mask_mod + block mask L=S=2048 H=8 D=64", BENCH_SDPA, 1, 8, 2048, 2048, 64, CLATTN_CAUSAL_NONE, 0,
     false, 0, 0, "sdpa causal L=S=2048 H=8 D=64", 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"sdpa alibi L=S=2048 H=8 D=64", BENCH_SDPA, 1, 8, 2048, 2048, 64, CLATTN_CAUSAL_NONE, 0, false, 0, 0, NULL, 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"sdpa alibi score_mod L=S=2048 H=8 D=64", BENCH_SDPA, 1, 8, 2048, 2048, 64, CLATTN_CAUSAL_NONE, 0, false, 0, 0,
     "sdpa alibi L=S=2048 H=8 D=64", 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    /* Document masking: 8 documents of 512 to 1536 positions packed in one sequence (tools/mods/document.cl),
     * with its block mask against without. */
    {"sdpa document mask_mod L=S=8192 H=8 D=64", BENCH_SDPA, 1, 8, 8192, 8192, 64, CLATTN_CAUSAL_NONE, 0, false, 0, 0,
     NULL, 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"sdpa document mask_mod + block mask L=S=8192 H=8 D=64", BENCH_SDPA, 1, 8, 8192, 8192, 64, CLATTN_CAUSAL_NONE, 0,
     false, 0, 0, "sdpa document mask_mod L=S=8192 H=8 D=64", 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    /* The same 8 documents as separate causal sequences, in one ragged call: what the block mask is for. */
    {"ragged 8 documents L=S=512..1536 H=8 D=64 causal", BENCH_RAGGED, 8, 8, 1024, 1024, 64, CLATTN_CAUSAL_BOTTOM_RIGHT,
     0, false, 0, 0, "sdpa document mask_mod + block mask L=S=8192 H=8 D=64", 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"projection GEMM 512x768 . 768x2304 + bias", BENCH_GEMM, 1, 1, 512, 2304, 0, CLATTN_CAUSAL_NONE, 768, false, 0, 0,
     NULL, 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"sdpa B=8 H=12 L=S=512 D=64", BENCH_SDPA, 8, 12, 512, 512, 64, CLATTN_CAUSAL_NONE, 0, false, 0, 0, NULL, 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"sdpa H=12 L=S=512 D=64 (a BERT layer's attention)", BENCH_SDPA, 1, 12, 512, 512, 64, CLATTN_CAUSAL_NONE, 0, false, 0, 0, NULL, 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"BERT-base layer L=512 d=768 H=12", BENCH_MHA, 1, 12, 512, 512, 64, CLATTN_CAUSAL_NONE, 768, false, 0, 0, NULL, 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"decode L=1 S=8192 H=32 D=128", BENCH_SDPA, 1, 32, 1, 8192, 128, CLATTN_CAUSAL_NONE, 0, false, 0, 0, NULL, 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"decode GQA L=1 S=8192 H=32 kv=8 D=128", BENCH_SDPA, 1, 32, 1, 8192, 128, CLATTN_CAUSAL_NONE, 0, false, 0, 8,
     "decode L=1 S=8192 H=32 D=128", 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    /* (16 packed rows a K/V head: the rows in the lanes, cl/decode.cl's ROWS_T, on AVX-512) */
    {"decode reproducible L=1 S=8192 H=32 D=128", BENCH_SDPA, 1, 32, 1, 8192, 128, CLATTN_CAUSAL_NONE, 0, false, 0, 0,
     "decode L=1 S=8192 H=32 D=128", 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"decode reproducible GQA L=1 S=8192 H=32 kv=8 D=128", BENCH_SDPA, 1, 32, 1, 8192, 128, CLATTN_CAUSAL_NONE, 0, false,
     0, 8, "decode GQA L=1 S=8192 H=32 kv=8 D=128", 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"decode GQA L=4 S=8192 H=32 kv=8 D=128", BENCH_SDPA, 1, 32, 4, 8192, 128, CLATTN_CAUSAL_BOTTOM_RIGHT, 0, false, 0, 8,
     "decode GQA L=1 S=8192 H=32 kv=8 D=128", 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"decode L=2 S=8192 H=32 D=128", BENCH_SDPA, 1, 32, 2, 8192, 128, CLATTN_CAUSAL_BOTTOM_RIGHT, 0, false, 0, 0,
     "decode L=1 S=8192 H=32 D=128", 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"decode L=4 S=8192 H=32 D=128", BENCH_SDPA, 1, 32, 4, 8192, 128, CLATTN_CAUSAL_BOTTOM_RIGHT, 0, false, 0, 0,
     "decode L=1 S=8192 H=32 D=128", 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"decode L=8 S=8192 H=32 D=128", BENCH_SDPA, 1, 32, 8, 8192, 128, CLATTN_CAUSAL_BOTTOM_RIGHT, 0, false, 0, 0,
     "decode L=1 S=8192 H=32 D=128", 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"decode paged blocks of 16 L=1 S=8192 H=32 D=128", BENCH_PAGED, 1, 32, 1, 8192, 128, CLATTN_CAUSAL_BOTTOM_RIGHT, 0,
     false, 0, 0, "decode L=1 S=8192 H=32 D=128", 16, CLATTN_FLOAT32, CLATTN_FLOAT32},
    /* Speculative decoding's verification (issue 40): a binary draft tree of 64 tokens, the last of 8192 rows of
     * a paged cache (masks.tree_parents), against one decode step over the same cache. */
    {"decode paged blocks of 16 GQA L=1 S=8192 H=32 kv=8 D=128", BENCH_PAGED, 1, 32, 1, 8192, 128,
     CLATTN_CAUSAL_BOTTOM_RIGHT, 0, false, 0, 8, "decode GQA L=1 S=8192 H=32 kv=8 D=128", 16, CLATTN_FLOAT32,
     CLATTN_FLOAT32},
    {"tree paged blocks of 16 T=64 S=8192 H=32 kv=8 D=128", BENCH_PAGED, 1, 32, 64, 8192, 128,
     CLATTN_CAUSAL_BOTTOM_RIGHT, 0, false, 0, 8, "decode paged blocks of 16 GQA L=1 S=8192 H=32 kv=8 D=128", 16,
     CLATTN_FLOAT32, CLATTN_FLOAT32},
    /* Shared prefixes (issue 40): 64 sequences, one query each, over a prefix of 8192 rows they share in the pool
     * and 256 own rows each — the cascade reads the prefix once, a paged decode call once a sequence. */
    {"decode paged shared prefix 8192 + 256 own B=64 L=1 H=32 kv=8 D=128", BENCH_PAGED, 64, 32, 1, 8448, 128,
     CLATTN_CAUSAL_BOTTOM_RIGHT, 8192, false, 0, 8, NULL, 16, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"cascade shared prefix 8192 + 256 own B=64 L=1 H=32 kv=8 D=128", BENCH_CASCADE, 64, 32, 1, 8448, 128,
     CLATTN_CAUSAL_BOTTOM_RIGHT, 8192, false, 0, 8, "decode paged shared prefix 8192 + 256 own B=64 L=1 H=32 kv=8 D=128",
     16, CLATTN_FLOAT32, CLATTN_FLOAT32},
    /* Top-k sparse attention (DeepSeek's): 2048 of 65536 keys a query, against dense decode over them all. */
    {"decode GQA L=1 S=65536 H=32 kv=8 D=128", BENCH_SDPA, 1, 32, 1, 65536, 128, CLATTN_CAUSAL_NONE, 0, false, 0, 8,
     NULL, 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"sparse top-k 2048 GQA L=1 S=65536 H=32 kv=8 D=128", BENCH_SPARSE, 1, 32, 1, 65536, 128, CLATTN_CAUSAL_NONE, 2048,
     false, 0, 8, "decode GQA L=1 S=65536 H=32 kv=8 D=128", 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    /* A mixed batch: 2 prefill chunks of 256 rows and 6 decode rows of 8 requests in one call, against a call each. */
    {"separate calls paged 2 chunks of 256 + 6 decode rows S=4096 H=32 kv=8 D=128", BENCH_MIXED, 8, 32, 256, 4096,
     128, CLATTN_CAUSAL_BOTTOM_RIGHT, 2, false, 0, 8, NULL, 16, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"mixed paged 2 chunks of 256 + 6 decode rows S=4096 H=32 kv=8 D=128", BENCH_MIXED, 8, 32, 256, 4096, 128,
     CLATTN_CAUSAL_BOTTOM_RIGHT, 2, false, 0, 8, "separate calls paged 2 chunks of 256 + 6 decode rows S=4096 H=32 kv=8 D=128",
     16, CLATTN_FLOAT32, CLATTN_FLOAT32},
    /* MLA (DeepSeek-V2/V3, issue 40): decode over a latent cache — one head of 576 (512 latent + 64 rotary),
     * the values its first 512 — against the expanded form of the same attention, keys of 192 and values of
     * 128 per head (the plain-decode way of the same work), 16 query heads (DeepSeek-V3 over 8 devices). */
    {"MLA expanded paged blocks of 64 bf16 cache B=4 L=1 S=8192 H=16 D=192/128", BENCH_PAGED, 4, 16, 1, 8192, 192,
     CLATTN_CAUSAL_BOTTOM_RIGHT, 0, false, 0, 0, NULL, 64, CLATTN_BFLOAT16, CLATTN_FLOAT32},
    {"MLA latent paged blocks of 64 bf16 cache B=4 L=1 S=8192 H=16 D=576/512", BENCH_PAGED, 4, 16, 1, 8192, 576,
     CLATTN_CAUSAL_BOTTOM_RIGHT, 0, false, 0, 1, "MLA expanded paged blocks of 64 bf16 cache B=4 L=1 S=8192 H=16 D=192/128",
     64, CLATTN_BFLOAT16, CLATTN_FLOAT32},
    {"decode fp16 cache L=1 S=8192 H=32 D=128", BENCH_SDPA, 1, 32, 1, 8192, 128, CLATTN_CAUSAL_NONE, 0, false, 0, 0,
     "decode L=1 S=8192 H=32 D=128", 0, CLATTN_FLOAT16, CLATTN_FLOAT32},
    {"decode bf16 cache L=1 S=8192 H=32 D=128", BENCH_SDPA, 1, 32, 1, 8192, 128, CLATTN_CAUSAL_NONE, 0, false, 0, 0,
     "decode L=1 S=8192 H=32 D=128", 0, CLATTN_BFLOAT16, CLATTN_FLOAT32},
    {"decode int8 cache L=1 S=8192 H=32 D=128", BENCH_SDPA, 1, 32, 1, 8192, 128, CLATTN_CAUSAL_NONE, 0, false, 0, 0,
     "decode L=1 S=8192 H=32 D=128", 0, CLATTN_INT8, CLATTN_FLOAT32},
    /* Quantised caches (issue 38): decode over 32768 keys, 32 query heads over 8 K/V heads, each format
     * against the float16 cache in the same run; speculative L=4 and a paged q4_0 cache against L=1 and
     * contiguous; chunked prefill over a q4_0 cache against float16. */
    {"decode fp16 cache GQA L=1 S=32768 H=32 kv=8 D=128", BENCH_SDPA, 1, 32, 1, 32768, 128, CLATTN_CAUSAL_NONE, 0,
     false, 0, 8, NULL, 0, CLATTN_FLOAT16, CLATTN_FLOAT32},
#define QUANTISED_DECODE(fmt, type)                                                                         \
    {"decode " fmt " cache GQA L=1 S=32768 H=32 kv=8 D=128", BENCH_SDPA, 1, 32, 1, 32768, 128, CLATTN_CAUSAL_NONE, 0, \
     false, 0, 8, "decode fp16 cache GQA L=1 S=32768 H=32 kv=8 D=128", 0, type, CLATTN_FLOAT32}
    QUANTISED_DECODE("int8", CLATTN_INT8), QUANTISED_DECODE("q8_0", CLATTN_Q8_0), QUANTISED_DECODE("u8_g64", CLATTN_U8_G64),
    QUANTISED_DECODE("fp8_e4m3", CLATTN_FP8_E4M3), QUANTISED_DECODE("fp8_e5m2", CLATTN_FP8_E5M2),
    QUANTISED_DECODE("q4_0", CLATTN_Q4_0), QUANTISED_DECODE("u4_g32", CLATTN_U4_G32),
    QUANTISED_DECODE("u4_g128", CLATTN_U4_G128), QUANTISED_DECODE("u4_t32", CLATTN_U4_T32),
    QUANTISED_DECODE("u2_t32", CLATTN_U2_T32),
#undef QUANTISED_DECODE
    {"decode q4_0 cache GQA L=4 S=32768 H=32 kv=8 D=128", BENCH_SDPA, 1, 32, 4, 32768, 128, CLATTN_CAUSAL_BOTTOM_RIGHT,
     0, false, 0, 8, "decode q4_0 cache GQA L=1 S=32768 H=32 kv=8 D=128", 0, CLATTN_Q4_0, CLATTN_FLOAT32},
    {"decode q4_0 paged blocks of 16 GQA L=1 S=32768 H=32 kv=8 D=128", BENCH_PAGED, 1, 32, 1, 32768, 128,
     CLATTN_CAUSAL_BOTTOM_RIGHT, 0, false, 0, 8, "decode q4_0 cache GQA L=1 S=32768 H=32 kv=8 D=128", 16, CLATTN_Q4_0,
     CLATTN_FLOAT32},
    {"prefill fp16 cache L=256 S=4096 H=8 D=64", BENCH_SDPA, 1, 8, 256, 4096, 64, CLATTN_CAUSAL_BOTTOM_RIGHT, 0, false,
     0, 0, NULL, 0, CLATTN_FLOAT16, CLATTN_FLOAT32},
    {"prefill q4_0 cache L=256 S=4096 H=8 D=64", BENCH_SDPA, 1, 8, 256, 4096, 64, CLATTN_CAUSAL_BOTTOM_RIGHT, 0, false,
     0, 0, "prefill fp16 cache L=256 S=4096 H=8 D=64", 0, CLATTN_Q4_0, CLATTN_FLOAT32},
    {"prefill q8_0 cache L=256 S=4096 H=8 D=64", BENCH_SDPA, 1, 8, 256, 4096, 64, CLATTN_CAUSAL_BOTTOM_RIGHT, 0, false,
     0, 0, "prefill fp16 cache L=256 S=4096 H=8 D=64", 0, CLATTN_Q8_0, CLATTN_FLOAT32},
    {"decode one sequence L=1 S=67584 H=8 D=128", BENCH_SDPA, 1, 8, 1, 67584, 128, CLATTN_CAUSAL_NONE, 0, false, 0, 0, NULL, 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"decode ragged B=16 S=256..8192 (67584 keys) H=8 D=128", BENCH_RAGGED, 16, 8, 1, 8192, 128,
     CLATTN_CAUSAL_BOTTOM_RIGHT, 0, false, 0, 0, "decode one sequence L=1 S=67584 H=8 D=128", 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    /* Chunked prefill over a paged cache, and a ragged batch at prefill lengths, each against the same rows
     * as one dense call (the fused kernel through the table or the row starts). */
    {"prefill L=256 S=4096 H=8 D=64", BENCH_SDPA, 1, 8, 256, 4096, 64, CLATTN_CAUSAL_BOTTOM_RIGHT, 0, false, 0, 0, NULL,
     0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"prefill paged blocks of 16 L=256 S=4096 H=8 D=64", BENCH_PAGED, 1, 8, 256, 4096, 64, CLATTN_CAUSAL_BOTTOM_RIGHT, 0,
     false, 0, 0, "prefill L=256 S=4096 H=8 D=64", 16, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"prefill L=1024 S=4096 H=8 D=64", BENCH_SDPA, 1, 8, 1024, 4096, 64, CLATTN_CAUSAL_BOTTOM_RIGHT, 0, false, 0, 0,
     NULL, 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"prefill paged blocks of 16 L=1024 S=4096 H=8 D=64", BENCH_PAGED, 1, 8, 1024, 4096, 64, CLATTN_CAUSAL_BOTTOM_RIGHT,
     0, false, 0, 0, "prefill L=1024 S=4096 H=8 D=64", 16, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"prefill B=4 L=S=512 H=8 D=64", BENCH_SDPA, 4, 8, 512, 512, 64, CLATTN_CAUSAL_BOTTOM_RIGHT, 0, false, 0, 0, NULL, 0,
     CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"prefill ragged B=4 L=S=512 H=8 D=64", BENCH_RAGGED, 4, 8, 512, 512, 64, CLATTN_CAUSAL_BOTTOM_RIGHT, 0, false, 0, 0,
     "prefill B=4 L=S=512 H=8 D=64", 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"tutorial 4 tokens d=8 d_k=4 (latency)", BENCH_MHA, 1, 1, 4, 4, 4, CLATTN_CAUSAL_NONE, 8, false, 0, 0, NULL, 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"tutorial 4 tokens d=8 d_k=4 (latency, host arrays)", BENCH_MHA, 1, 1, 4, 4, 4, CLATTN_CAUSAL_NONE, 8, false, 0, 0,
     "tutorial 4 tokens d=8 d_k=4 (latency)", 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
};

static const bench_case quick_cases[] = {
    {"sdpa L=S=128 H=2 D=32", BENCH_SDPA, 1, 2, 128, 128, 32, CLATTN_CAUSAL_NONE, 0, false, 0, 0, NULL, 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"sdpa causal L=S=192 H=2 D=64", BENCH_SDPA, 1, 2, 192, 192, 64, CLATTN_CAUSAL_TOP_LEFT, 0, false, 0, 0, NULL, 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"sdpa causal mask_mod L=S=192 H=2 D=64", BENCH_SDPA, 1, 2, 192, 192, 64, CLATTN_CAUSAL_NONE, 0, false, 0, 0,
     "sdpa causal L=S=192 H=2 D=64", 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"sdpa backward causal L=S=192 H=2 D=64", BENCH_BACKWARD, 1, 2, 192, 192, 64, CLATTN_CAUSAL_TOP_LEFT, 0, false, 0, 0,
     "sdpa causal L=S=192 H=2 D=64", 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"sdpa reproducible causal L=S=192 H=2 D=64", BENCH_SDPA, 1, 2, 192, 192, 64, CLATTN_CAUSAL_TOP_LEFT, 0, false, 0, 0,
     "sdpa causal L=S=192 H=2 D=64", 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"layer L=64 d=96 H=3", BENCH_MHA, 2, 3, 64, 64, 32, CLATTN_CAUSAL_NONE, 96, false, 0, 0, NULL, 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"projection GEMM 64x96 . 96x288 + bias", BENCH_GEMM, 1, 1, 64, 288, 0, CLATTN_CAUSAL_NONE, 96, false, 0, 0, NULL, 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"decode L=1 S=512 H=4 D=64", BENCH_SDPA, 1, 4, 1, 512, 64, CLATTN_CAUSAL_NONE, 0, false, 0, 0, NULL, 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"decode paged blocks of 16 L=1 S=512 H=4 D=64", BENCH_PAGED, 1, 4, 1, 512, 64, CLATTN_CAUSAL_BOTTOM_RIGHT, 0,
     false, 0, 0, "decode L=1 S=512 H=4 D=64", 16, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"tree paged blocks of 16 T=16 S=512 H=4 D=64", BENCH_PAGED, 1, 4, 16, 512, 64, CLATTN_CAUSAL_BOTTOM_RIGHT, 0,
     false, 0, 0, "decode paged blocks of 16 L=1 S=512 H=4 D=64", 16, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"MLA expanded paged blocks of 64 bf16 cache B=2 L=1 S=512 H=4 D=192/128", BENCH_PAGED, 2, 4, 1, 512, 192,
     CLATTN_CAUSAL_BOTTOM_RIGHT, 0, false, 0, 0, NULL, 64, CLATTN_BFLOAT16, CLATTN_FLOAT32},
    {"MLA latent paged blocks of 64 bf16 cache B=2 L=1 S=512 H=4 D=576/512", BENCH_PAGED, 2, 4, 1, 512, 576,
     CLATTN_CAUSAL_BOTTOM_RIGHT, 0, false, 0, 1, "MLA expanded paged blocks of 64 bf16 cache B=2 L=1 S=512 H=4 D=192/128",
     64, CLATTN_BFLOAT16, CLATTN_FLOAT32},
    {"decode int8 cache L=1 S=512 H=4 D=64", BENCH_SDPA, 1, 4, 1, 512, 64, CLATTN_CAUSAL_NONE, 0, false, 0, 0,
     "decode L=1 S=512 H=4 D=64", 0, CLATTN_INT8, CLATTN_FLOAT16},
    {"decode reproducible L=1 S=512 H=4 D=64", BENCH_SDPA, 1, 4, 1, 512, 64, CLATTN_CAUSAL_NONE, 0, false, 0, 0,
     "decode L=1 S=512 H=4 D=64", 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"decode ragged B=4 S=256..1024 H=2 D=64", BENCH_RAGGED, 4, 2, 1, 1024, 64, CLATTN_CAUSAL_BOTTOM_RIGHT, 0, false,
     0, 0, NULL, 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"decode paged shared prefix 256 + 64 own B=4 L=1 H=4 kv=2 D=64", BENCH_PAGED, 4, 4, 1, 320, 64,
     CLATTN_CAUSAL_BOTTOM_RIGHT, 256, false, 0, 2, NULL, 16, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"cascade shared prefix 256 + 64 own B=4 L=1 H=4 kv=2 D=64", BENCH_CASCADE, 4, 4, 1, 320, 64,
     CLATTN_CAUSAL_BOTTOM_RIGHT, 256, false, 0, 2, "decode paged shared prefix 256 + 64 own B=4 L=1 H=4 kv=2 D=64", 16,
     CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"sparse top-k 64 L=1 S=512 H=4 D=64", BENCH_SPARSE, 1, 4, 1, 512, 64, CLATTN_CAUSAL_NONE, 64, false, 0, 0,
     "decode L=1 S=512 H=4 D=64", 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"separate calls paged 1 chunk of 32 + 2 decode rows S=256 H=4 kv=2 D=64", BENCH_MIXED, 3, 4, 32, 256, 64,
     CLATTN_CAUSAL_BOTTOM_RIGHT, 1, false, 0, 2, NULL, 16, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"mixed paged 1 chunk of 32 + 2 decode rows S=256 H=4 kv=2 D=64", BENCH_MIXED, 3, 4, 32, 256, 64,
     CLATTN_CAUSAL_BOTTOM_RIGHT, 1, false, 0, 2, "separate calls paged 1 chunk of 32 + 2 decode rows S=256 H=4 kv=2 D=64",
     16, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"tutorial 4 tokens d=8 d_k=4 (latency)", BENCH_MHA, 1, 1, 4, 4, 4, CLATTN_CAUSAL_NONE, 8, false, 0, 0, NULL, 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
};

static size_t case_keys(const bench_case *c);

/* MLA's cases, by name: the values are the keys less their 64 rotary columns (the latent form's 512 of 576, the
 * expanded form's 128 of 192), and the latent form has no V (the keys' rows hold it). */
#define MLA_ROPE 64
static bool case_latent(const bench_case *c) { return strstr(c->name, "MLA latent") != NULL; }
static size_t case_v_dim(const bench_case *c) { return strncmp(c->name, "MLA ", 4) == 0 ? c->D - MLA_ROPE : c->D; }

/* The serving cases' shapes: a prefix of model_dim rows every sequence shares in the pool (a paged case's table
 * lists its blocks first in every row; a cascade reads it as its level); a mixed case's query rows a sequence. */
static bool case_shared_prefix(const bench_case *c)
{
    return (c->kind == BENCH_PAGED || c->kind == BENCH_CASCADE) && c->model_dim > 0;
}
static size_t mixed_rows(const bench_case *c, size_t b) { return b < c->model_dim ? c->L : 1; }
static bool case_separate(const bench_case *c) { return c->kind == BENCH_MIXED && strstr(c->name, "separate calls"); }
/* An SDPA case in reproducible arithmetic (desc.arithmetic): one kernel whatever the path, so one path. */
static bool case_reproducible(const bench_case *c) { return c->kind == BENCH_SDPA && strstr(c->name, "reproducible"); }

/* Query-key pairs that are computed: all of them, or the lower triangle for top-left causal masks. */
static double visible_pairs(const bench_case *c)
{
    if (c->causal != CLATTN_CAUSAL_TOP_LEFT)
        return (double)c->L * (double)c->S;
    double pairs = 0;
    for (size_t i = 0; i < c->L; i++) {
        const size_t end = i + 1 < c->S ? i + 1 : c->S; /* keys [begin, end) */
        const size_t begin = c->window > 0 && i > (size_t)c->window ? i - (size_t)c->window : 0;
        pairs += (double)(end - begin);
    }
    return pairs;
}

/* 4·B·H·pairs·D for attention (two matrix products), plus 2·rows·in·out per projection of a layer; the
 * backward pass 2.5 times attention's (five products: Q·Kᵀ, dO·Vᵀ, dV, dK, dQ). */
static double case_flops(const bench_case *c)
{
    if (c->kind == BENCH_GEMM)
        return 2.0 * c->L * c->model_dim * c->S;
    const double dims = (double)(c->D + case_v_dim(c)); /* (Q·Kᵀ and P·V: 2·D_qk + 2·D_v a pair) */
    double f = c->kind == BENCH_RAGGED ? 2.0 * c->H * c->L * (double)case_keys(c) * dims
               : c->kind == BENCH_SPARSE ? 2.0 * c->B * c->H * c->L * (double)c->model_dim * dims
                                         : 2.0 * c->B * c->H * visible_pairs(c) * dims;
    if (c->kind == BENCH_MIXED) { /* (each sequence's rows over its S keys) */
        f = 0;
        for (size_t b = 0; b < c->B; b++)
            f += 2.0 * c->H * (double)mixed_rows(c, b) * (double)c->S * dims;
    }
    if (c->kind == BENCH_BACKWARD)
        f *= 2.5;
    if (c->kind == BENCH_MHA) {
        double rows = (double)c->B * c->L, hd = (double)c->H * c->D;
        f += 2.0 * rows * c->model_dim * hd * 3 + 2.0 * rows * hd * c->model_dim;
    }
    return f;
}

/* Device buffers of one case, filled with uniform noise in [-1, 1]. */
/* The cases that carry programmable attention, by name (the sources are tools/mods/'s causal.cl and
 * alibi.cl), and the built-in ALiBi case they are set against. */
typedef enum { MODS_NONE, MODS_CAUSAL, MODS_ALIBI, MODS_DOCUMENT, BUILTIN_ALIBI } bench_mods;
static const struct {
    const char *name_part;
    bench_mods mods;
} bench_mods_of[] = {{"causal mask_mod", MODS_CAUSAL},
                     {"alibi score_mod", MODS_ALIBI},
                     {"document mask_mod", MODS_DOCUMENT},
                     {"sdpa alibi L", BUILTIN_ALIBI}};
static const char *const bench_mods_source[] = {
    [MODS_CAUSAL] = "bool mask_mod(int b, int h, long q, long k) { return k <= q; }\n",
    [MODS_ALIBI] = "float score_mod(float score, int b, int h, long q, long k, __global const float *slopes)\n"
                   "{ return score + slopes[h] * (float)(k - q); }\n",
    [MODS_DOCUMENT] = "bool mask_mod(int b, int h, long q, long k, __global const int *doc)\n"
                      "{ return doc[q] == doc[k] && k <= q; }\n"};
/* The document case's lengths (they fill its 8192 positions). */
static const size_t bench_documents[8] = {512, 768, 1024, 1280, 896, 1152, 1536, 1024};

static bench_mods case_mods(const bench_case *c)
{
    for (size_t i = 0; i < sizeof bench_mods_of / sizeof bench_mods_of[0]; i++)
        if (strstr(c->name, bench_mods_of[i].name_part))
            return bench_mods_of[i].mods;
    return MODS_NONE;
}

typedef struct case_buffers {
    cl_mem x, q, k, v, out, lse, table, k_scales, v_scales;
    cl_mem grads[4]; /* backward: dO, dQ, dK, dV */
    bool keep_lse;   /* an SDPA run writes lse (the backward's forward, once) */
    clattn_mods *mods;   /* the case's mods, or NULL */
    clattn_block_mask *block_mask; /* its block mask (cases named "+ block mask"), or NULL */
    cl_mem slopes;       /* ALiBi's slopes for alibi.cl, or the document ids */
    float alibi[64];     /* the same on the host, for the built-in ALiBi (H ≤ 64) */
    clattn_mha_weights w;
    size_t starts[2][65]; /* ragged: query and key row starts (B ≤ 64) */
    size_t lengths[64];   /* paged: each sequence's rows (a cascade: its own rows) */
    cl_mem indices;       /* sparse: each query row's selected keys */
    cl_mem own_table;     /* cascade: each sequence's own blocks; prefix_blocks: the shared prefix's, on the host */
    cl_int *prefix_blocks;
    cl_mem tables_one[8]; /* mixed, "separate calls": each sequence's table row, a buffer of its own */
    float *host[6];       /* "(host arrays)" layers: x, W_Q, W_K, W_V, W_O and the output on the host */
    const cli_variants *variants; /* the variant flags for SDPA, backward and layer cases, or NULL */
} case_buffers;

/* Whether a case takes the variant flags (the SDPA-shaped and layer calls). */
static bool case_takes_variants(const bench_case *c)
{
    return c->kind == BENCH_SDPA || c->kind == BENCH_BACKWARD || c->kind == BENCH_MHA;
}

/* A layer case timed through clattn_mha_host on host arrays (the call a Python or host caller makes)
 * rather than clattn_mha on device buffers. */
static bool case_host(const bench_case *c) { return strstr(c->name, "host arrays") != NULL; }

/* Keys of sequence b of a ragged case: spread evenly from 256 to S (decode rows). */
/* Keys of sequence b of a ragged case: spread evenly from 256 to S (decode rows). */
static size_t ragged_keys(const bench_case *c, size_t b)
{
    if (strstr(c->name, "8 documents")) /* the document case's sequences, each its own call's worth */
        return bench_documents[b];
    /* (A ragged prefill, more than 8 query rows each, gives every sequence S keys: the same rows as one
     * dense call of B sequences.) */
    return c->B > 1 && c->L <= 8 ? 256 + b * (c->S - 256) / (c->B - 1) : c->S;
}

/* Keys the case holds: every sequence's (a shared prefix once). */
static size_t case_keys(const bench_case *c)
{
    if (case_shared_prefix(c))
        return c->model_dim + c->B * (c->S - c->model_dim);
    if (c->kind != BENCH_RAGGED)
        return c->B * c->S;
    size_t keys = 0;
    for (size_t b = 0; b < c->B; b++)
        keys += ragged_keys(c, b);
    return keys;
}

/* A quantised format's noise: random bytes, each block's scale (and zero point) a modest half (0.01 and 8),
 * FP8 bytes with their exponent's top bit clear (|x| < 2, never NaN). */
static void quantised_noise(unsigned char *h, size_t n, clattn_dtype type)
{
    const size_t block = clattn_dtype_block(type), bytes = clattn_dtype_bytes(type, n);
    if (block == 1) {
        for (size_t i = 0; i < bytes; i++)
            h[i] &= 0xbf;
        return;
    }
    const size_t block_bytes = clattn_dtype_bytes(type, block);
    const bool zero_point = type != CLATTN_Q8_0 && type != CLATTN_Q4_0;
    for (size_t at = 0; at < bytes; at += block_bytes) {
        const unsigned short s = npy_float_to_half(0.01f), z = npy_float_to_half(8.0f);
        memcpy(h + at, &s, 2);
        if (zero_point)
            memcpy(h + at + 2, &z, 2);
    }
}

/* n elements of uniform noise in [-1, 1] stored as `type` (int8: integers in [-127, 127], whose row
 * scales come from scale_buffer; the block formats and FP8: quantised_noise). */
static cl_mem typed_noise_buffer(clattn_context *ctx, size_t n, clattn_dtype type, uint64_t *seed, cl_int *err)
{
    const size_t size = clattn_dtype_size(type), total = clattn_dtype_bytes(type, n);
    unsigned char *h = malloc(total ? total : 1);
    if (!h) {
        *err = CL_OUT_OF_HOST_MEMORY;
        return NULL;
    }
    const size_t values = size ? n : total; /* a block format: random bytes, then its scales */
    for (size_t i = 0; i < values; i++) {
        *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
        const float x = (float)((double)(*seed >> 11) / 4503599627370496.0 - 1.0);
        unsigned short u;
        switch (type) {
        case CLATTN_FLOAT32: memcpy(h + 4 * i, &x, 4); break;
        case CLATTN_FLOAT16: u = npy_float_to_half(x); memcpy(h + 2 * i, &u, 2); break;
        case CLATTN_BFLOAT16: u = npy_float_to_bf16(x); memcpy(h + 2 * i, &u, 2); break;
        default: h[i] = (unsigned char)(signed char)lrintf(127.0f * x); break;
        }
    }
    if (type > CLATTN_INT8)
        quantised_noise(h, n, type);
    cl_mem m = clCreateBuffer(clattn_context_cl_context(ctx), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, total, h,
                              err);
    free(h);
    return m;
}

static cl_mem noise_buffer(clattn_context *ctx, size_t n, uint64_t *seed, cl_int *err)
{
    return typed_noise_buffer(ctx, n, CLATTN_FLOAT32, seed, err);
}

/* Whether a K/V format is a token format (u4_t32, u2_t32: a head's rows share their bytes). */
static bool token_format(clattn_dtype type) { return clattn_dtype_size(type) == 0 && clattn_dtype_block(type) == 1; }

/* A dense token-format cache (B, kv_heads heads of S rows) holding uniform noise, written as an
 * application writes one: float32 rows through clattn_kv_append (its groups quantised, 31 rows or fewer
 * left in the float16 tail). */
static cl_mem token_cache_buffer(clattn_context *ctx, const bench_case *c, uint64_t *seed, cl_int *err)
{
    const size_t kvh = c->kv_heads ? c->kv_heads : c->H, rows = c->B * kvh * c->S;
    const size_t bytes = c->B * kvh * clattn_dtype_head_bytes(c->kv_type, c->S, c->D);
    const cl_uchar zero = 0;
    cl_mem k = noise_buffer(ctx, rows * c->D, seed, err), v = NULL, cache = NULL;
    if (*err == CL_SUCCESS)
        v = noise_buffer(ctx, rows * c->D, seed, err);
    if (*err == CL_SUCCESS)
        cache = clCreateBuffer(clattn_context_cl_context(ctx), CL_MEM_READ_WRITE, bytes, NULL, err);
    if (*err == CL_SUCCESS) /* (a scratch V cache beside it: only K's bytes are kept) */
        *err = clEnqueueFillBuffer(clattn_context_queue(ctx), cache, &zero, 1, 0, bytes, 0, NULL, NULL);
    cl_mem scratch = *err == CL_SUCCESS ? clCreateBuffer(clattn_context_cl_context(ctx), CL_MEM_READ_WRITE, bytes, NULL,
                                                         err)
                                        : NULL;
    size_t *lengths = calloc(c->B, sizeof *lengths);
    if (*err == CL_SUCCESS && !lengths)
        *err = CL_OUT_OF_HOST_MEMORY;
    if (*err == CL_SUCCESS)
        *err = clEnqueueFillBuffer(clattn_context_queue(ctx), scratch, &zero, 1, 0, bytes, 0, NULL, NULL);
    if (*err == CL_SUCCESS) {
        clattn_sdpa_desc d = CLATTN_SDPA_DESC_INIT;
        d.batch = c->B, d.heads = d.kv_heads = kvh, d.q_len = 1, d.kv_len = c->S, d.qk_dim = c->D;
        d.k_dtype = d.v_dtype = c->kv_type;
        const clattn_status st = clattn_kv_append(ctx, &d, lengths, c->S, k, v, cache, scratch);
        *err = st == CLATTN_SUCCESS ? clFinish(clattn_context_queue(ctx)) : (cl_int)st;
    }
    cl_mem all[3] = {k, v, scratch};
    for (int i = 0; i < 3; i++)
        if (all[i])
            clReleaseMemObject(all[i]);
    free(lengths);
    if (*err != CL_SUCCESS && cache) {
        clReleaseMemObject(cache);
        cache = NULL;
    }
    return cache;
}

/* An int8 cache's scales: one per row, all 1/127 (values in [-1, 1]). */
static cl_mem scale_buffer(clattn_context *ctx, size_t rows, cl_int *err)
{
    float *h = malloc(rows * sizeof *h);
    if (!h) {
        *err = CL_OUT_OF_HOST_MEMORY;
        return NULL;
    }
    for (size_t i = 0; i < rows; i++)
        h[i] = 1.0f / 127.0f;
    cl_mem m = clCreateBuffer(clattn_context_cl_context(ctx), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                              rows * sizeof *h, h, err);
    free(h);
    return m;
}

static void buffers_free(case_buffers *b)
{
    clattn_block_mask_free(b->block_mask);
    clattn_mods_free(b->mods);
    cl_mem all[] = {b->x, b->q, b->k, b->v, b->out, b->lse, b->table, b->k_scales, b->v_scales, b->grads[0],
                    b->grads[1], b->grads[2], b->grads[3],
                    b->w.w_q, b->w.w_k, b->w.w_v, b->w.w_o, b->w.b_q, b->slopes, b->indices, b->own_table,
                    b->tables_one[0], b->tables_one[1], b->tables_one[2], b->tables_one[3], b->tables_one[4],
                    b->tables_one[5], b->tables_one[6], b->tables_one[7]};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i])
            clReleaseMemObject(all[i]);
    for (size_t i = 0; i < sizeof b->host / sizeof b->host[0]; i++)
        free(b->host[i]);
    free(b->prefix_blocks);
    memset(b, 0, sizeof *b);
}

static clattn_status run_once(clattn_context *ctx, const bench_case *c, case_buffers *b, clattn_algorithm algo,
                              size_t l_override);

/* A device buffer holding n ints. */
static cl_mem int_buffer(clattn_context *ctx, const cl_int *ints, size_t n, cl_int *err)
{
    return clCreateBuffer(clattn_context_cl_context(ctx), CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, n * sizeof *ints,
                          (void *)ints, err);
}

/* A paged case's blocks: the pool's physical blocks in a shuffled order (7919 is prime to every power of two);
 * each sequence's table row lists the shared prefix's blocks (if any) then its own. A cascade keeps the prefix's
 * ids on the host and its own rows' table apart; a mixed case's separate calls a table a sequence; a mixed case
 * its query rows' starts. */
static size_t pool_blocks(const bench_case *c)
{
    return case_keys(c) / c->block;
}

static cl_int paged_tables_make(clattn_context *ctx, const bench_case *c, case_buffers *b)
{
    const size_t per = c->S / c->block, prefix = case_shared_prefix(c) ? c->model_dim / c->block : 0,
                 own = per - prefix, pool = pool_blocks(c);
    cl_int *table = malloc(c->B * per * sizeof *table), *own_table = malloc(c->B * own * sizeof *own_table);
    b->prefix_blocks = malloc((prefix ? prefix : 1) * sizeof *b->prefix_blocks);
    cl_int err = table && own_table && b->prefix_blocks ? CL_SUCCESS : CL_OUT_OF_HOST_MEMORY;
    for (size_t s = 0; err == CL_SUCCESS && s < c->B; s++)
        for (size_t i = 0; i < per; i++) {
            const size_t logical = i < prefix ? i : prefix + s * own + (i - prefix);
            table[s * per + i] = (cl_int)((logical * 7919) % pool);
            if (i >= prefix)
                own_table[s * own + i - prefix] = table[s * per + i];
            else
                b->prefix_blocks[i] = table[i];
        }
    if (err == CL_SUCCESS)
        b->table = int_buffer(ctx, table, c->B * per, &err);
    if (err == CL_SUCCESS && c->kind == BENCH_CASCADE)
        b->own_table = int_buffer(ctx, own_table, c->B * own, &err);
    for (size_t s = 0; err == CL_SUCCESS && case_separate(c) && s < c->B && s < 8; s++)
        b->tables_one[s] = int_buffer(ctx, table + s * per, per, &err);
    for (size_t s = 0; s < c->B; s++) {
        b->lengths[s] = c->kind == BENCH_CASCADE ? c->S - c->model_dim : c->S;
        b->starts[0][s + 1] = b->starts[0][s] + (c->kind == BENCH_MIXED ? mixed_rows(c, s) : 0);
    }
    free(table);
    free(own_table);
    return err;
}

/* A sparse case's selections: each query row's model_dim keys, one at random in each of as many equal spans of
 * the S keys — distinct and ascending, as clattn_topk writes them. */
static cl_int sparse_indices_make(clattn_context *ctx, const bench_case *c, case_buffers *b)
{
    const size_t rows = c->B * c->L, k = c->model_dim, span = c->S / k;
    cl_int *idx = malloc(rows * k * sizeof *idx);
    if (!idx)
        return CL_OUT_OF_HOST_MEMORY;
    uint64_t state = 99;
    for (size_t e = 0; e < rows * k; e++) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        idx[e] = (cl_int)((e % k) * span + (size_t)(state >> 33) % span);
    }
    cl_int err;
    b->indices = int_buffer(ctx, idx, rows * k, &err);
    free(idx);
    return err;
}

static cl_int buffers_make(clattn_context *ctx, const bench_case *c, case_buffers *b)
{
    memset(b, 0, sizeof *b);
    b->w = (clattn_mha_weights)CLATTN_MHA_WEIGHTS_INIT;
    uint64_t seed = 1234;
    cl_int err = CL_SUCCESS;
    const size_t bh = c->B * c->H;
    if (c->kind == BENCH_GEMM) {
        b->x = noise_buffer(ctx, c->L * c->model_dim, &seed, &err);
        if (err == CL_SUCCESS) b->w.w_q = noise_buffer(ctx, c->model_dim * c->S, &seed, &err);
        if (err == CL_SUCCESS) b->w.b_q = noise_buffer(ctx, c->S, &seed, &err);
        if (err == CL_SUCCESS) b->out = noise_buffer(ctx, c->L * c->S, &seed, &err);
    } else if (c->kind != BENCH_MHA) {
        /* K/V rows: B·S (a paged pool holds as many, in shuffled blocks), or the ragged sequences'. */
        const size_t kv_rows = case_keys(c) * (c->kv_heads ? c->kv_heads : c->H);
        b->q = typed_noise_buffer(ctx, bh * c->L * c->D, c->qo_type, &seed, &err);
        const bool tokens = token_format(c->kv_type); /* (dense SDPA cases only) */
        if (err == CL_SUCCESS) b->k = tokens ? token_cache_buffer(ctx, c, &seed, &err)
                                             : typed_noise_buffer(ctx, kv_rows * c->D, c->kv_type, &seed, &err);
        if (err == CL_SUCCESS && !case_latent(c))
            b->v = tokens ? token_cache_buffer(ctx, c, &seed, &err)
                          : typed_noise_buffer(ctx, kv_rows * case_v_dim(c), c->kv_type, &seed, &err);
        if (err == CL_SUCCESS) b->out = typed_noise_buffer(ctx, bh * c->L * case_v_dim(c), c->qo_type, &seed, &err);
        if (err == CL_SUCCESS && c->kv_type == CLATTN_INT8) b->k_scales = scale_buffer(ctx, kv_rows, &err);
        if (err == CL_SUCCESS && c->kv_type == CLATTN_INT8) b->v_scales = scale_buffer(ctx, kv_rows, &err);
        if (err == CL_SUCCESS) b->lse = noise_buffer(ctx, bh * c->L, &seed, &err);
        const size_t grad_elems[4] = {bh * c->L * c->D, bh * c->L * c->D, kv_rows * c->D, kv_rows * c->D};
        for (int g = 0; g < 4 && err == CL_SUCCESS && c->kind == BENCH_BACKWARD; g++)
            b->grads[g] = noise_buffer(ctx, grad_elems[g], &seed, &err);
    } else {
        const size_t hd = c->H * c->D, d = c->model_dim;
        b->x = noise_buffer(ctx, c->B * c->L * d, &seed, &err);
        if (err == CL_SUCCESS) b->w.w_q = noise_buffer(ctx, d * hd, &seed, &err);
        if (err == CL_SUCCESS) b->w.w_k = noise_buffer(ctx, d * hd, &seed, &err);
        if (err == CL_SUCCESS) b->w.w_v = noise_buffer(ctx, d * hd, &seed, &err);
        if (err == CL_SUCCESS) b->w.w_o = noise_buffer(ctx, hd * d, &seed, &err);
        if (err == CL_SUCCESS) b->out = noise_buffer(ctx, c->B * c->L * d, &seed, &err);
        const cl_mem from[6] = {b->x, b->w.w_q, b->w.w_k, b->w.w_v, b->w.w_o, b->out};
        const size_t elems[6] = {c->B * c->L * d, d * hd, d * hd, d * hd, hd * d, c->B * c->L * d};
        for (int i = 0; i < 6 && err == CL_SUCCESS && case_host(c); i++) /* the same values on the host */
            err = (b->host[i] = malloc(elems[i] * sizeof(float))) == NULL
                      ? CL_OUT_OF_HOST_MEMORY
                      : clEnqueueReadBuffer(clattn_context_queue(ctx), from[i], CL_TRUE, 0, elems[i] * sizeof(float),
                                            b->host[i], 0, NULL, NULL);
    }
    if (err == CL_SUCCESS && c->kind == BENCH_RAGGED)
        for (size_t i = 0; i < c->B; i++) {
            b->starts[0][i + 1] = b->starts[0][i] + (strstr(c->name, "8 documents") ? bench_documents[i] : c->L);
            b->starts[1][i + 1] = b->starts[1][i] + ragged_keys(c, i);
        }
    if (err == CL_SUCCESS && (c->kind == BENCH_PAGED || c->kind == BENCH_CASCADE || c->kind == BENCH_MIXED))
        err = paged_tables_make(ctx, c, b);
    if (err == CL_SUCCESS && c->kind == BENCH_SPARSE)
        err = sparse_indices_make(ctx, c, b);
    const bench_mods mods = case_mods(c);
    for (size_t h = 0; h < c->H && h < 64; h++) /* Press et al.'s slopes for 8 heads: 2^-(h+1) */
        b->alibi[h] = ldexpf(1.0f, -(int)(h + 1) * 8 / (int)c->H);
    if (err == CL_SUCCESS && mods != MODS_NONE && mods != BUILTIN_ALIBI) {
        clattn_mod_aux aux = {"slopes", CLATTN_AUX_FLOAT, NULL, CLATTN_AUX_BY_HEAD, 0};
        clattn_mods_desc md = CLATTN_MODS_DESC_INIT;
        md.source = bench_mods_source[mods];
        if (mods == MODS_ALIBI) {
            b->slopes = aux.buffer = clCreateBuffer(clattn_context_cl_context(ctx), CL_MEM_READ_ONLY |
                                                    CL_MEM_COPY_HOST_PTR, c->H * sizeof(float), b->alibi, &err);
        } else if (mods == MODS_DOCUMENT) {
            cl_int *ids = malloc(c->S * sizeof *ids);
            for (size_t i = 0, d = 0, end = bench_documents[0]; ids && i < c->S; i++) {
                if (i == end && d + 1 < 8)
                    end += bench_documents[++d];
                ids[i] = (cl_int)d;
            }
            aux = (clattn_mod_aux){"doc", CLATTN_AUX_INT, NULL, CLATTN_AUX_BY_POSITION, 0};
            b->slopes = aux.buffer = ids ? clCreateBuffer(clattn_context_cl_context(ctx), CL_MEM_READ_ONLY |
                                                          CL_MEM_COPY_HOST_PTR, c->S * sizeof *ids, ids, &err) : NULL;
            if (!ids)
                err = CL_OUT_OF_HOST_MEMORY;
            free(ids);
        }
        md.aux = &aux;
        md.aux_count = mods == MODS_CAUSAL ? 0 : 1;
        if (err == CL_SUCCESS && clattn_mods_create(ctx, &md, &b->mods) != CLATTN_SUCCESS)
            err = CL_BUILD_PROGRAM_FAILURE; /* (the library's detail stays on the context) */
        clattn_block_mask_desc bd = CLATTN_BLOCK_MASK_DESC_INIT;
        bd.q_len = c->L, bd.kv_len = c->S, bd.mods = b->mods;
        if (err == CL_SUCCESS && strstr(c->name, "+ block mask") &&
            clattn_block_mask_create(ctx, &bd, &b->block_mask) != CLATTN_SUCCESS)
            err = CL_BUILD_PROGRAM_FAILURE;
    }
    if (err == CL_SUCCESS && c->kind == BENCH_BACKWARD) { /* the forward's out and lse, once */
        bench_case forward = *c;
        forward.kind = BENCH_SDPA;
        b->keep_lse = true;
        if (run_once(ctx, &forward, b, CLATTN_ALGORITHM_FUSED, 0) != CLATTN_SUCCESS)
            err = CL_INVALID_OPERATION; /* (the library's detail stays on the context) */
        b->keep_lse = false;
    }
    if (err != CL_SUCCESS)
        buffers_free(b);
    return err;
}

static clattn_status run_once(clattn_context *ctx, const bench_case *c, case_buffers *b, clattn_algorithm algo,
                              size_t l_override)
{
    if (c->kind == BENCH_GEMM)
        return clattn_projection(ctx, c->L, c->model_dim, c->S, b->x, b->w.w_q, b->w.b_q, b->out);
    clattn_masks masks = CLATTN_MASKS_INIT;
    masks.causal = c->causal;
    const clattn_window window = {c->window, -1};
    if (c->window > 0)
        masks.window = &window;
    if (c->kind == BENCH_RAGGED || c->kind == BENCH_PAGED || c->kind == BENCH_CASCADE || c->kind == BENCH_MIXED) {
        clattn_sdpa_desc d = CLATTN_SDPA_DESC_INIT;
        d.batch = c->B;
        d.heads = c->H;
        d.kv_heads = c->kv_heads;
        d.qk_dim = c->D;
        d.v_dim = case_v_dim(c);
        d.masks = &masks;
        d.q_dtype = d.out_dtype = c->qo_type;
        d.k_dtype = d.v_dtype = c->kv_type;
        d.k_scales = b->k_scales;
        d.v_scales = b->v_scales;
        if (c->kind == BENCH_RAGGED) {
            clattn_ragged r = CLATTN_RAGGED_INIT;
            r.q_starts = b->starts[0];
            r.k_starts = b->starts[1];
            r.layout = CLATTN_RAGGED_HEADS_ROWS; /* each head's keys together, as a decode cache keeps them */
            return clattn_sdpa_ragged(ctx, &d, &r, b->q, b->k, b->v, NULL, b->out, NULL);
        }
        d.q_len = c->L;
        /* A tree case: a binary draft tree over its L queries (token i's parent (i − 1) / 2), the last rows. */
        int parents[64];
        if (strstr(c->name, "tree") && c->B * c->L <= sizeof parents / sizeof parents[0]) {
            for (size_t i = 0; i < c->B * c->L; i++)
                parents[i] = i % c->L == 0 ? -1 : (int)(i % c->L - 1) / 2;
            masks.tree_parents = parents;
        }
        clattn_paged_cache cache = CLATTN_PAGED_CACHE_INIT;
        cache.k_pool = b->k;
        cache.v_pool = b->v;
        cache.blocks = pool_blocks(c);
        cache.block_size = c->block;
        cache.block_table = b->table;
        cache.max_blocks = c->S / c->block;
        if (c->kind == BENCH_CASCADE) { /* one level: the prefix, shared by every sequence; then each one's own */
            static const size_t group_of[64] = {0};
            const size_t prefix_len[1] = {c->model_dim};
            const clattn_cascade_level level = {1, group_of, b->prefix_blocks, c->model_dim / c->block, prefix_len};
            cache.block_table = b->own_table;
            cache.max_blocks = (c->S - c->model_dim) / c->block;
            return clattn_sdpa_cascade(ctx, &d, &cache, &level, 1, b->lengths, b->q, b->out, NULL);
        }
        if (case_separate(c)) { /* a call a sequence, each its own rows */
            clattn_sdpa_desc one = d;
            one.batch = 1;
            clattn_status st = CLATTN_SUCCESS;
            for (size_t s = 0; s < c->B && s < 8 && st == CLATTN_SUCCESS; s++) {
                one.q_len = mixed_rows(c, s);
                cache.block_table = b->tables_one[s];
                st = clattn_sdpa_paged(ctx, &one, &cache, &b->lengths[s], b->q, NULL, b->out, NULL);
            }
            return st;
        }
        if (c->kind == BENCH_MIXED)
            return clattn_sdpa_paged_ragged(ctx, &d, &cache, b->lengths, b->starts[0], b->q, NULL, b->out, NULL);
        return clattn_sdpa_paged(ctx, &d, &cache, b->lengths, b->q, NULL, b->out, NULL);
    }
    if (c->kind == BENCH_SPARSE) {
        clattn_sdpa_desc d = CLATTN_SDPA_DESC_INIT;
        d.batch = c->B, d.heads = c->H, d.kv_heads = c->kv_heads, d.q_len = c->L, d.kv_len = c->S, d.qk_dim = c->D;
        return clattn_sdpa_sparse(ctx, &d, c->model_dim, b->indices, b->q, b->k, b->v, NULL, NULL, b->out, NULL);
    }
    if (c->kind == BENCH_SDPA || c->kind == BENCH_BACKWARD) {
        clattn_sdpa_desc d = CLATTN_SDPA_DESC_INIT;
        d.batch = c->B;
        d.heads = c->H;
        d.kv_heads = c->kv_heads;
        d.q_len = l_override ? l_override : c->L;
        d.kv_len = l_override ? l_override : c->S;
        d.qk_dim = c->D;
        d.masks = &masks;
        d.algorithm = algo;
        d.q_dtype = d.out_dtype = c->qo_type;
        d.k_dtype = d.v_dtype = c->kv_type;
        d.k_scales = b->k_scales;
        d.v_scales = b->v_scales;
        d.mods = b->mods;
        d.block_mask = b->block_mask;
        d.alibi_slopes = case_mods(c) == BUILTIN_ALIBI ? b->alibi : NULL;
        if (b->variants)
            cli_variants_apply(b->variants, &d);
        if (case_reproducible(c))
            d.arithmetic = CLATTN_ARITHMETIC_REPRODUCIBLE;
        if (c->kind == BENCH_BACKWARD)
            return clattn_sdpa_backward(ctx, &d, b->q, b->k, b->v, NULL, b->out, b->lse, b->grads[0], b->grads[1],
                                        b->grads[2], b->grads[3], NULL);
        return clattn_sdpa(ctx, &d, b->q, b->k, b->v, NULL, b->out, NULL, b->keep_lse ? b->lse : NULL);
    }
    clattn_mha_desc d = CLATTN_MHA_DESC_INIT;
    d.batch = c->B;
    d.q_len = c->L;
    d.model_dim = c->model_dim;
    d.heads = c->H;
    d.qk_dim = c->D;
    d.masks = &masks;
    d.algorithm = algo;
    if (b->variants)
        cli_variants_apply_mha(b->variants, &d);
    if (case_host(c)) {
        clattn_mha_host_weights w = CLATTN_MHA_HOST_WEIGHTS_INIT;
        w.w_q = b->host[1], w.w_k = b->host[2], w.w_v = b->host[3], w.w_o = b->host[4];
        return clattn_mha_host(ctx, &d, b->host[0], NULL, &w, NULL, b->host[5], NULL);
    }
    return clattn_mha(ctx, &d, b->x, NULL, &b->w, NULL, b->out, NULL);
}

/* One timed run: its wall time and, from the same run, the kernels' device time per kind. */
typedef struct bench_run {
    double seconds;
    size_t kinds;
    clattn_profile_entry kernels[CLATTN_PROFILE_MAX_ENTRIES];
} bench_run;

static double run_device_ms(const bench_run *r)
{
    double ns = 0;
    for (size_t k = 0; k < r->kinds; k++)
        ns += (double)r->kernels[k].device_ns;
    return ns * 1e-6;
}

static int compare_runs(const void *a, const void *b)
{
    return bench_compare_doubles(&((const bench_run *)a)->seconds, &((const bench_run *)b)->seconds);
}

typedef struct bench_result {
    double ms, device_ms, gflops;
    size_t runs, peak_bytes;
    bench_run median; /* the run of median wall time, whose device time is reported beside it */
} bench_result;

/* One timed run: its wall time, and its kernels' device times from their profiling records (reading
 * them also clears them for the next run). */
static clattn_status time_one_run(clattn_context *ctx, const bench_case *c, case_buffers *b, clattn_algorithm algo,
                                  bench_run *run)
{
    const double t0 = bench_now_seconds();
    clattn_status st = run_once(ctx, c, b, algo, 0);
    if (st == CLATTN_SUCCESS)
        st = clattn_finish(ctx);
    run->seconds = bench_now_seconds() - t0;
    if (st == CLATTN_SUCCESS)
        st = clattn_profile_read(ctx, run->kernels, CLATTN_PROFILE_MAX_ENTRIES, &run->kinds);
    return st;
}

static clattn_status time_case(clattn_context *ctx, const bench_case *c, case_buffers *b, clattn_algorithm algo,
                               bench_result *r)
{
    /* Warm-up: compiles the kernels (on a short sequence for the long-context case, which shares them). */
    clattn_status st = run_once(ctx, c, b, algo, c->long_context ? 256 : 0);
    if (st == CLATTN_SUCCESS)
        st = clattn_finish(ctx);
    size_t kinds;
    clattn_profile_entry warm_up[CLATTN_PROFILE_MAX_ENTRIES];
    if (st == CLATTN_SUCCESS) /* the warm-up's kernels belong to no timed run */
        st = clattn_profile_read(ctx, warm_up, CLATTN_PROFILE_MAX_ENTRIES, &kinds);
    if (st != CLATTN_SUCCESS)
        return st;
    clattn_context_release_temporaries(ctx);
    static bench_run runs[16];
    double total = 0;
    size_t n = 0;
    while (n < 16 && (n < 3 || total < 2.0)) { /* fast cases: up to 16 runs, the median steadier */
        bench_run *run = &runs[n];
        if ((st = time_one_run(ctx, c, b, algo, run)) != CLATTN_SUCCESS)
            return st;
        total += runs[n++].seconds;
        if (run->seconds > 20.0) /* one long-context run says enough */
            break;
    }
    /* Wall and device time of the same run: their difference is that run's host overhead. */
    qsort(runs, n, sizeof runs[0], compare_runs);
    r->median = runs[n / 2];
    r->runs = n;
    r->ms = 1e3 * r->median.seconds;
    r->device_ms = run_device_ms(&r->median);
    r->gflops = case_flops(c) / (r->median.seconds * 1e9);
    r->peak_bytes = clattn_context_temp_peak_bytes(ctx);
    return CLATTN_SUCCESS;
}

/* The path a case's headline time is measured on: decode for a few query rows, else the fused kernel
 * (a projection ignores it). */
static clattn_algorithm first_path(const bench_case *c)
{
    return c->kind != BENCH_GEMM && c->kind != BENCH_MHA && c->L <= 8 ? CLATTN_ALGORITHM_DECODE
                                                                       : CLATTN_ALGORITHM_FUSED;
}

typedef struct versus_result {
    double median, low, high; /* time ratios case/base: the median pair's, and the range */
    size_t pairs;
} versus_result;

/* A case against the case it is set against, their runs alternated — base, case, base, case … — so that
 * a neighbour's load on a shared machine falls on both alike: the median of the pairs' time ratios
 * (at least 9 pairs, up to 41 or 3 s). The base gets a warm-up run of its own (it may not have been
 * timed in this run: --only). */
static clattn_status versus_ratio(clattn_context *ctx, const bench_case *c, case_buffers *b, const bench_case *base,
                                  versus_result *r)
{
    case_buffers bb;
    cl_int err = buffers_make(ctx, base, &bb);
    if (err != CL_SUCCESS)
        return (clattn_status)err;
    bb.variants = case_takes_variants(base) ? b->variants : NULL; /* (the base case with the same variants) */
    double ratios[41], total = 0;
    size_t n = 0;
    static bench_run run_base, run_case; /* (static: the profiling records make them large) */
    clattn_status st = time_one_run(ctx, base, &bb, first_path(base), &run_base); /* the warm-up */
    while (st == CLATTN_SUCCESS && n < 41 && (n < 9 || total < 3.0)) {
        st = time_one_run(ctx, base, &bb, first_path(base), &run_base);
        if (st == CLATTN_SUCCESS)
            st = time_one_run(ctx, c, b, first_path(c), &run_case);
        const double t_base = run_base.seconds, t_case = run_case.seconds;
        ratios[n++] = t_case / (t_base > 1e-9 ? t_base : 1e-9); /* (a clock that did not move: no inf) */
        total += t_base + t_case;
    }
    buffers_free(&bb);
    clattn_context_release_temporaries(ctx);
    if (st != CLATTN_SUCCESS)
        return st;
    qsort(ratios, n, sizeof ratios[0], bench_compare_doubles);
    *r = (versus_result){ratios[n / 2], ratios[0], ratios[n - 1], n};
    return CLATTN_SUCCESS;
}

/* The bytes a decode case reads: its K/V rows in the cache's format, with an int8 cache's scales (MLA's latent
 * form: the keys' rows alone, the values among them). */
static double case_kv_bytes(const bench_case *c)
{
    const double kv_rows = (double)(c->kind == BENCH_RAGGED ? case_keys(c) : c->B * c->S) * /* (rows read) */
                           (c->kv_heads ? c->kv_heads : c->H);
    if (strncmp(c->name, "MLA ", 4) == 0)
        return kv_rows * (double)clattn_dtype_bytes(c->kv_type, c->D) +
               (case_latent(c) ? 0.0 : kv_rows * (double)clattn_dtype_bytes(c->kv_type, case_v_dim(c)));
    if (token_format(c->kv_type)) /* (a head's chunk: its groups and tail) */
        return 2.0 * kv_rows / (double)c->S * (double)clattn_dtype_head_bytes(c->kv_type, c->S, c->D);
    return 2.0 * kv_rows *
           ((double)clattn_dtype_bytes(c->kv_type, c->D) + (c->kv_type == CLATTN_INT8 ? sizeof(float) : 0));
}

/* A bandwidth-bound case against the machine's native read (bench_native.h) of a buffer at least as large
 * as its K/V and at least NATIVE_MIN_BYTES (so that no cache flatters it), their runs alternated like
 * versus_ratio's pairs: the median of the pairs' bandwidth ratios case/native is the fraction of the limit
 * the case reaches, the native read's median the limit; and best against best — the case's fastest run
 * against the native read's fastest pass — the figure that holds on a shared machine whose medians
 * wander. */
#define NATIVE_MIN_BYTES ((size_t)256 << 20)
typedef struct native_result {
    double fraction, low, high, native_gbps;
    double best_fraction, best_native_gbps; /* the case's fastest run against the native read's fastest */
    size_t pairs;
    unsigned threads;
} native_result;

static clattn_status native_fraction(clattn_context *ctx, const bench_case *c, case_buffers *b, bench_native *native,
                                     double kv_bytes, native_result *r)
{
    const double native_bytes = (double)bench_native_bytes(native), per = kv_bytes / native_bytes;
    double ratios[41], natives[41], total = 0, best_run = 1e30;
    size_t n = 0;
    static bench_run run; /* (static: the profiling records make it large) */
    clattn_status st = CLATTN_SUCCESS;
    while (st == CLATTN_SUCCESS && n < 41 && (n < 9 || total < 3.0)) {
        const double t_native = bench_native_pass(native);
        st = time_one_run(ctx, c, b, first_path(c), &run);
        natives[n] = t_native;
        best_run = run.seconds < best_run ? run.seconds : best_run;
        ratios[n++] = per * t_native / (run.seconds > 1e-9 ? run.seconds : 1e-9);
        total += t_native + run.seconds;
    }
    if (st != CLATTN_SUCCESS)
        return st;
    qsort(ratios, n, sizeof ratios[0], bench_compare_doubles);
    qsort(natives, n, sizeof natives[0], bench_compare_doubles);
    *r = (native_result){ratios[n / 2],
                         ratios[0],
                         ratios[n - 1],
                         native_bytes / natives[n / 2] * 1e-9,
                         per * natives[0] / (best_run > 1e-9 ? best_run : 1e-9),
                         native_bytes / natives[0] * 1e-9,
                         n,
                         bench_native_threads(native)};
    return CLATTN_SUCCESS;
}

static const char bench_help[] =
    "usage: clattn bench [--quick] [--skip-long] [--only TEXT] [--json] [--device SPEC]\n"
    "\n"
    "Times a fixed set of cases on one device: SDPA B=1 H=8 L=S=2048 D=64, also in reproducible arithmetic and\n"
    "with Q/K/V/O in float16 and in bfloat16 (each against the default float32 call); the same causal at L=4096;\n"
    "causal L=S=65536 (long context, fused only); causal L=S=16384 without and with a sliding window of\n"
    "512 keys (fused only); the projection GEMM 512x768 . 768x2304 with a bias (the device's GEMM, then\n"
    "CLBlast's); SDPA B=8 H=12 L=S=512 and H=12 L=S=512 alone; a BERT-base layer (L=512, d_model=768, H=12, with\n"
    "projections and W_O); decode (L=1, S=8192, H=32, D=128), also with 8 K/V heads (grouped-query, L=1\n"
    "and 4; L=1 both also in reproducible arithmetic, against the default),\n"
    "with L=2, 4 and 8 query rows (speculative verification), through a paged cache of 16-row blocks\n"
    "and with float16, bfloat16 and int8 caches, each against plain decode (runs alternated: the median\n"
    "of the pairs' time ratios); a binary draft tree of 64 tokens (tree attention, masks.tree_parents)\n"
    "over a paged cache against one paged decode step over it (8 K/V heads); the serving primitives, each\n"
    "against the plain way of the same work: 64 sequences sharing a prefix of 8192 rows (256 own rows each)\n"
    "through clattn_sdpa_cascade against one paged decode call over tables that list the prefix's blocks,\n"
    "top-k sparse attention over 2048 of 65536 keys against dense decode over them all, and a mixed batch\n"
    "(2 prefill chunks of 256 rows and 6 decode rows in one clattn_sdpa_paged_ragged call) against a call a\n"
    "request; a ragged batch of 16 sequences of 256..8192 keys (H=8) against one\n"
    "sequence of as many keys; quantised caches (decode L=1, S=32768, H=32 over 8 K/V heads, D=128, in\n"
    "int8, q8_0, u8_g64, fp8_e4m3, fp8_e5m2, q4_0, u4_g32 and u4_g128 against float16; q4_0 with L=4 and\n"
    "paged against L=1 contiguous; prefill L=256 S=4096 over q4_0 and q8_0 against float16); decode cases\n"
    "print their K/V bandwidth against the machine's native read of at least 256 MiB (one pinned thread\n"
    "per core, huge pages advised; runs alternated: the median of the pairs' ratios, and the case's best\n"
    "run against the native read's best pass) and a read-and-sum kernel's;\n"
    "chunked prefill (L=256 and 1024 over S=4096, H=8, D=64, bottom-right causal) through a paged cache\n"
    "of 16-row blocks and a ragged batch of 4 sequences of L=S=512, each against the same rows as one\n"
    "dense call (alternated); the tutorial's 4-token example, also through clattn_mha_host on host arrays\n"
    "(the call a Python or host caller makes; alternated against the device-buffer call).\n"
    "Per case: median milliseconds after a warm-up, GFLOP/s (4·B·H·L·S·D, only unmasked pairs for\n"
    "causal, plus the projections of a layer), the library's peak extra device memory, and the device\n"
    "time of the same run from the kernels' own profiling events (the rest of its wall time is host\n"
    "overhead; --json adds it per kernel). SDPA cases run both the fused kernel and the staged path.\n"
    "  --quick      small shapes (seconds; a smoke test)\n"
    "  --skip-long  leave out the L=65536 case (minutes on a CPU)\n"
    "  --only TEXT  only the cases whose name contains TEXT (e.g. decode)\n"
    "  --json       one JSON document instead of the table (read by tools/scripts/bench_peer.py)\n"
    "  --device     P:D, cpu, gpu, accelerator or part of a name\n"
    "  --ring-model FILE.svg  after the cases, the ring attention model (docs/multi-device.md, \"Scale on paper\"): this\n"
    "               device's fused causal speed measured (the first 'sdpa causal' case) and plugged into the\n"
    "               time of one call (131072 tokens, H=32, kv=8, D=128) against P ranks and link bandwidths,\n"
    "               printed as a table and drawn as an SVG (--only ring: the model alone)\n"
    "  --ring-gflops X  plug in X GFLOP/s instead of measuring (another device's figure)\n"
    "  --softcap C, --sinks SINKS.npy, --alibi SLOPES.npy|auto, --logit-scale SC.npy, --softmax-double,\n"
    "  --reproducible:\n"
    "               the variant flags of clattn sdpa, applied to every SDPA, backward and layer case (a\n"
    "               file of H values fits the cases of H heads: choose them with --only)\n";

/* A second context on ctx's own device and queue whose projections run CLBlast. */
static clattn_status open_blas_context(clattn_context *ctx, clattn_context **out)
{
    clattn_context_options o = CLATTN_CONTEXT_OPTIONS_INIT;
    o.opencl_context = clattn_context_cl_context(ctx);
    o.opencl_device = clattn_context_device(ctx);
    o.opencl_queue = clattn_context_queue(ctx);
    o.profile = 1;
    o.gemm = "clblast";
    return clattn_context_create_with_options(out, &o);
}

static void print_bytes(char *buf, size_t size, size_t bytes)
{
    if (bytes >= ((size_t)1 << 30))
        snprintf(buf, size, "%.2f GiB", bytes / 1073741824.0);
    else if (bytes >= ((size_t)1 << 20))
        snprintf(buf, size, "%.1f MiB", bytes / 1048576.0);
    else
        snprintf(buf, size, "%zu B", bytes);
}

/* --ring-model: the device's fused causal speed (measured, or given_gflops when positive) in the ring's
 * step-time model, printed and drawn. */
static int ring_model_run(clattn_context *ctx, const bench_case *cases, size_t ncases, const char *svg,
                          double given_gflops)
{
    char source[160];
    snprintf(source, sizeof source, "measured on %.120s", clattn_context_device_name(ctx));
    ring_model m = {1, 32, 8, 128, 131072, true, 0.0, source, 20e-6, 1024, 4,
                    {"10 GbE (1.25 GB/s)", "100 Gb/s InfiniBand (12.5 GB/s)", "PCIe 4.0 x16 (25 GB/s)",
                     "NVLink 4 (450 GB/s)"},
                    {1.25, 12.5, 25.0, 450.0}};
    if (given_gflops > 0) {
        m.gflops = given_gflops;
        m.speed_source = "given by --ring-gflops";
    } else {
        const bench_case *c = NULL;
        for (size_t i = 0; i < ncases && !c; i++)
            if (strstr(cases[i].name, "sdpa causal") && !cases[i].long_context)
                c = &cases[i];
        case_buffers b;
        bench_result res = {0};
        cl_int err = c ? buffers_make(ctx, c, &b) : CL_INVALID_VALUE;
        if (err != CL_SUCCESS)
            return cli_fail_status("bench", ctx, (clattn_status)err, "the ring model's case");
        const clattn_status st = time_case(ctx, c, &b, CLATTN_ALGORITHM_FUSED, &res);
        buffers_free(&b);
        if (st != CLATTN_SUCCESS)
            return cli_fail_status("bench", ctx, st, c->name);
        m.gflops = res.gflops;
    }
    ring_model_print(stdout, &m);
    cli_outputs out = {0};
    FILE *fp = NULL;
    int rc = cli_outputs_add("bench", &out, svg, "(ring attention model)", NULL);
    if (rc == CLI_OK && (rc = cli_outputs_begin("bench", &out, 0, &fp)) == CLI_OK)
        rc = ring_model_svg(fp, &m) != 0 ? cli_fail(CLI_USAGE_ERROR, "bench", "%s: cannot write the model's figure", svg)
                                         : cli_outputs_end("bench", &out, 0);
    if (rc == CLI_OK)
        rc = cli_outputs_commit("bench", &out);
    cli_outputs_discard(&out);
    return rc;
}

int cmd_bench(int argc, char **argv)
{
    bool quick = false, skip_long = false, json = false, help = false;
    const char *device = NULL, *only = NULL, *ring_svg = NULL, *ring_gflops = NULL;
    cli_variants var = {0};
    const cli_option opts[] = {{"quick", &quick, NULL},     {"skip-long", &skip_long, NULL},
                               {"json", &json, NULL},       {"device", NULL, &device},
                               {"only", NULL, &only},       {"ring-model", NULL, &ring_svg},
                               {"ring-gflops", NULL, &ring_gflops}, CLI_VARIANT_OPTIONS(&var)};
    int rc = cli_parse("bench", argc, argv, 2, opts, sizeof opts / sizeof opts[0], &help);
    if (rc != CLI_OK || help) {
        fputs(bench_help, help && rc == CLI_OK ? stdout : stderr);
        return rc;
    }
    if ((rc = cli_variants_parse("bench", &var)) != CLI_OK)
        return rc;
    if (var.kv_heads_text || var.scores_text)
        return cli_fail(CLI_USAGE_ERROR, "bench", "--%s: the cases fix their heads and outputs",
                        var.kv_heads_text ? "kv-heads" : "scores");
    const bool variants = var.softcap_text || var.sinks_path || var.alibi_text || var.logit_scale_path ||
                          var.softmax_double || var.reproducible;
    if (ring_svg && json)
        return cli_fail(CLI_USAGE_ERROR, "bench", "--ring-model prints a table and writes a file: not with --json");
    if (ring_gflops && !ring_svg)
        return cli_fail(CLI_USAGE_ERROR, "bench", "--ring-gflops goes with --ring-model FILE.svg");
    float given_gflops = 0; /* checked before any case runs */
    if (ring_gflops && (rc = cli_parse_float("bench", "ring-gflops", ring_gflops, &given_gflops)) != CLI_OK)
        return rc;
    if (ring_gflops && !(given_gflops > 0))
        return cli_fail(CLI_USAGE_ERROR, "bench", "--ring-gflops: a positive speed");
    /* A profiling context: every kernel's own events give the device time of each run. */
    clattn_context_options options = CLATTN_CONTEXT_OPTIONS_INIT;
    options.device = device;
    options.profile = 1;
    clattn_context *ctx = NULL;
    clattn_status st = clattn_context_create_with_options(&ctx, &options);
    if (st != CLATTN_SUCCESS)
        return cli_fail_status("bench", NULL, st, "opening the device");
    cli_report_warning("bench", ctx);
    cl_int err;

    const bench_case *cases = quick ? quick_cases : full_cases;
    const size_t ncases = quick ? sizeof quick_cases / sizeof quick_cases[0] : sizeof full_cases / sizeof full_cases[0];
    char date[32];
    time_t t = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d", gmtime(&t));
    if (json)
    {
        fputs("{\"device\": ", stdout);
        cli_print_json_string(clattn_context_device_name(ctx));
        printf(", \"date\": \"%s\", \"cases\": [", date);
    }
    else
        printf("clattn bench on %s, %s (float32 arithmetic)\n%-46s %-7s %10s %9s %12s %10s %10s\n", clattn_context_device_name(ctx),
               date, "case", "path", "ms", "GFLOP/s", "extra mem", "device ms", "host ms");
    bool first = true;
    clattn_context *blas_ctx = NULL;
    double previous_fused_ms = 0, stream_bytes = 0, stream_gbps = 0;
    bench_native *native = NULL; /* the native read of the last decode case's bytes */
    double native_bytes = 0;
    for (size_t i = 0; i < ncases && rc == CLI_OK; i++) {
        const bench_case *c = &cases[i];
        if ((skip_long && c->L >= 65536) || (only && !strstr(c->name, only)))
            continue;
        case_buffers b;
        if ((err = buffers_make(ctx, c, &b)) != CL_SUCCESS) {
            rc = cli_fail_status("bench", ctx, (clattn_status)err, c->name);
            break;
        }
        if (variants && case_takes_variants(c)) { /* (its heads' per-head files) */
            cli_variants_free(&var);
            if ((rc = cli_variants_load("bench", &var, c->H)) != CLI_OK) {
                fprintf(stderr, "clattn bench: (in case \"%s\", %zu heads)\n", c->name, c->H);
                buffers_free(&b);
                break;
            }
            b.variants = &var;
        }
        /* Decode cases (few query rows) set the decode path against the fused kernel; ragged batches and
         * paged caches run the path AUTO chooses (decode for few rows, fused for more). */
        const bool gemm = c->kind == BENCH_GEMM;
        const bool serving = c->kind == BENCH_SPARSE || c->kind == BENCH_CASCADE || c->kind == BENCH_MIXED;
        const bool decode = !gemm && !serving && c->kind != BENCH_MHA && c->L <= 8 && !case_reproducible(c);
        const bool decode_only = c->kind == BENCH_RAGGED || c->kind == BENCH_PAGED || serving;
        const clattn_algorithm algos[2] = {first_path(c), decode ? CLATTN_ALGORITHM_FUSED : CLATTN_ALGORITHM_STAGED};
        const size_t nalgos = c->long_context || decode_only || c->kind == BENCH_BACKWARD || case_reproducible(c) ? 1 : 2;
        /* A projection runs the device's GEMM (clattn_tune's choice, else the default), then CLBlast's
         * through a second context on the same queue. */
        if (gemm && !blas_ctx && (st = open_blas_context(ctx, &blas_ctx)) != CLATTN_SUCCESS) {
            rc = cli_fail_status("bench", NULL, st, "a context with options.gemm = clblast");
            buffers_free(&b);
            break;
        }
        bench_result res[2] = {{0}};
        cli_progress *progress = cli_progress_start(c->name);
        for (size_t a = 0; a < nalgos && rc == CLI_OK; a++) {
            clattn_context *run_ctx = gemm && a == 1 ? blas_ctx : ctx;
            st = time_case(run_ctx, c, &b, algos[a], &res[a]);
            if (st != CLATTN_SUCCESS)
                rc = cli_fail_status("bench", run_ctx, st, c->name);
        }
        /* A case set against an earlier one of the same run (decode variants against plain decode, storage
         * types against float32): the two alternated, while this case's buffers are still there. */
        const bench_case *base = NULL;
        for (size_t e = 0; c->versus && e < ncases && !base; e++)
            if (strcmp(cases[e].name, c->versus) == 0)
                base = &cases[e];
        versus_result versus = {0};
        if (base && rc == CLI_OK && (st = versus_ratio(ctx, c, &b, base, &versus)) != CLATTN_SUCCESS) {
            char pair[256];
            snprintf(pair, sizeof pair, "%s, timed against %s", c->name, base->name);
            rc = cli_fail_status("bench", ctx, st, pair);
        }
        /* A decode case against the native read of its K/V bytes, while its buffers are still there. */
        native_result nat = {0};
        const double kv_bytes = decode ? case_kv_bytes(c) : 0;
        const double native_want = kv_bytes > (double)NATIVE_MIN_BYTES ? kv_bytes : (double)NATIVE_MIN_BYTES;
        if (decode && rc == CLI_OK && native_want != native_bytes) {
            bench_native_close(native);
            native_bytes = native_want;
            if (bench_native_open((size_t)native_want, true, &native) != 0)
                native = NULL; /* (then no such line: the read-and-sum kernel's stays) */
        }
        if (decode && rc == CLI_OK && native && (st = native_fraction(ctx, c, &b, native, kv_bytes, &nat)) != CLATTN_SUCCESS)
            rc = cli_fail_status("bench", ctx, st, c->name);
        cli_progress_stop(progress);
        buffers_free(&b);
        for (size_t a = 0; a < nalgos && rc == CLI_OK; a++) {
            const char *path = gemm                                  ? (a ? "clblast" : "gemm")
                               : c->kind == BENCH_BACKWARD           ? "backward"
                               : case_separate(c)                    ? "separate"
                               : case_reproducible(c)                ? "reproducible"
                               : serving                             ? bench_kind_names[c->kind]
                               : algos[a] == CLATTN_ALGORITHM_FUSED  ? "fused"
                               : algos[a] == CLATTN_ALGORITHM_DECODE ? "decode"
                                                                     : "staged";
            if (json) {
                printf("%s\n  {\"name\": \"%s\", \"kind\": \"%s\", \"B\": %zu, \"H\": %zu, \"L\": %zu, \"S\": %zu, "
                       "\"D\": %zu, \"causal\": %s, \"bottom_right\": %s, \"window\": %lld, \"kv_heads\": %zu, \"model_dim\": %zu, \"kv_dtype\": \"%s\", \"qo_dtype\": \"%s\", \"path\": \"%s\", \"ms\": %.4f, "
                       "\"device_ms\": %.4f, \"gflops\": %.3f, \"runs\": %zu, \"peak_bytes\": %zu, \"kernels\": {",
                       first ? "" : ",", c->name, bench_kind_names[c->kind], c->B, c->H, c->L, c->S, c->D,
                       c->causal ? "true" : "false", c->causal == CLATTN_CAUSAL_BOTTOM_RIGHT ? "true" : "false", c->window, c->kv_heads ? c->kv_heads : c->H, c->model_dim,
                       clattn_dtype_name(c->kv_type), clattn_dtype_name(c->qo_type), path, res[a].ms, res[a].device_ms, res[a].gflops,
                       res[a].runs, res[a].peak_bytes);
                for (size_t k = 0; k < res[a].median.kinds; k++) /* the median run's device ms per kernel */
                    printf("%s\"%s\": %.4f", k ? ", " : "", res[a].median.kernels[k].name,
                           (double)res[a].median.kernels[k].device_ns * 1e-6);
                printf("}}");
                first = false;
            } else {
                char mem[32];
                print_bytes(mem, sizeof mem, res[a].peak_bytes);
                printf("%-46s %-7s %10.3f %9.1f %12s %10.3f %10.3f\n", a ? "" : c->name, path, res[a].ms,
                       res[a].gflops, mem, res[a].device_ms, res[a].ms - res[a].device_ms);
            }
        }
        if (!json && rc == CLI_OK && nalgos == 2)
            printf("%-46s %s time: %.2fx\n", "", gemm ? "CLBlast/gemm" : decode ? "fused/decode" : "staged/fused",
                   res[1].ms / res[0].ms);
        /* A windowed case follows the same case without a window: the time a window saves. */
        if (!json && rc == CLI_OK && c->window > 0 && previous_fused_ms > 0)
            printf("%-46s without/with window time: %.2fx\n", "", previous_fused_ms / res[0].ms);
        /* Decode reads its K/V once: its bandwidth against the machine's native read of as many bytes
         * (alternated with it), and the OpenCL read-and-sum kernel's beside it. */
        if (decode && rc == CLI_OK) {
            if (kv_bytes != stream_bytes) {
                stream_bytes = kv_bytes;
                if ((err = bench_stream_gbps(ctx, (size_t)kv_bytes, &stream_gbps)) != CL_SUCCESS)
                    stream_gbps = 0;
            }
            const double kv_gbps = kv_bytes / (res[0].ms * 1e6);
            if (json)
                printf(", {\"name\": \"%s\", \"kind\": \"bandwidth\", \"kv_bytes\": %.0f, \"kv_gbps\": %.3f, "
                       "\"stream_gbps\": %.3f, \"native_gbps\": %.3f, \"native_fraction\": %.4f, "
                       "\"native_low\": %.4f, \"native_high\": %.4f, \"native_pairs\": %zu, \"native_threads\": %u, "
                       "\"best_native_gbps\": %.3f, \"best_fraction\": %.4f}",
                       c->name, kv_bytes, kv_gbps, stream_gbps, nat.native_gbps, nat.fraction, nat.low, nat.high,
                       nat.pairs, nat.threads, nat.best_native_gbps, nat.best_fraction);
            else {
                printf("%-46s K/V read %.1f GB/s; read-and-sum kernel of as many bytes: %.1f GB/s\n", "", kv_gbps,
                       stream_gbps);
                if (nat.pairs)
                    printf("%-46s against the native read (%u pinned threads, %.1f GB/s): %.0f%% of it (runs "
                           "alternated, median of %zu pairs, %.0f%%-%.0f%%)\n",
                           "", nat.threads, nat.native_gbps, 100.0 * nat.fraction, nat.pairs, 100.0 * nat.low,
                           100.0 * nat.high);
                if (nat.pairs)
                    printf("%-46s best against best: %.1f GB/s of K/V against the native read's %.1f GB/s: %.0f%%\n",
                           "", nat.best_fraction * nat.best_native_gbps, nat.best_native_gbps,
                           100.0 * nat.best_fraction);
                printf("%-46s K/V cache %.1f MiB (%s%s)\n", "", kv_bytes / 1048576.0, clattn_dtype_name(c->kv_type),
                       c->kv_type == CLATTN_INT8 ? " and a float scale per row" : "");
                if (case_shared_prefix(c)) /* (the figures above count the rows the call reads) */
                    printf("%-46s (read: the shared prefix once a sequence; held: %.1f MiB)\n", "",
                           kv_bytes * (double)case_keys(c) / (double)(c->B * c->S) / 1048576.0);
            }
        }
        if (base && rc == CLI_OK) {
            if (json)
                printf(", {\"name\": \"%s\", \"kind\": \"versus\", \"versus\": \"%s\", \"time_ratio\": %.4f, "
                       "\"low\": %.4f, \"high\": %.4f, \"pairs\": %zu}", c->name, base->name, versus.median,
                       versus.low, versus.high, versus.pairs);
            else
                printf("%-46s time against \"%s\": %.2fx (%.2fx as fast; runs alternated, median of %zu pairs, "
                       "%.2fx-%.2fx)\n", "", base->name, versus.median, 1.0 / versus.median, versus.pairs,
                       versus.low, versus.high);
        }
        previous_fused_ms = res[0].ms;
        fflush(stdout);
    }
    if (json)
        printf("\n]}\n");
    if (rc == CLI_OK && ring_svg)
        rc = ring_model_run(ctx, cases, ncases, ring_svg, given_gflops);
    bench_native_close(native);
    clattn_context_free(blas_ctx);
    clattn_context_free(ctx);
    cli_variants_free(&var);
    return rc;
}
