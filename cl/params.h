/* Every kernel's parameters, declared once. This file is read twice: as OpenCL C (program.c puts it
 * first in every program), where CLATTN_PARAMETERS(list) writes a kernel's parameter list, and as C
 * by the host (src/runtime/params.h), where the same list makes the struct a path fills and the table that
 * binds it (params_bind). A parameter cannot be added to one side only.
 *
 * An entry is X(feature, kind, type, name, absent):
 *   feature  ALL, or the call feature that brings the parameter (CLATTN_FEATURES). A program is built
 *            with -DHAS_<feature>=0 or 1 for every feature its kernels name; where it is 0 the kernel
 *            has no such parameter, and CLATTN_ABSENT(list), at the top of its body, declares `name`
 *            as the constant `absent` instead: the code that reads it stays as it is and the compiler
 *            folds it away (an unused feature costs no argument and no branch).
 *   kind     MEM (a buffer), VIEW (a buffer and its element strides name_bs, name_hs, name_rs),
 *            ULONG, LONG, INT, UINT or FLOAT.
 *   type     the OpenCL C type (the pointer type for MEM and VIEW).
 * Feature names are not macros anywhere (they are pasted onto HAS_). */

/* The features a call may have, each a build option of the kernels that take it: F(name, group). A
 * call with any feature of a group gets the build with the whole group, the parameters it does not use
 * holding neutral values (NULL, −1, 0, a logit scale of NULL: what the kernels' code takes for "none"),
 * so a call without any feature of a group gets a build without its parameters or their branches.
 * Groups trade specialisation for compiles (seconds each on PoCL): the masks and score terms one, the
 * K/V layouts another (measured on PoCL's CPU device: a feature present but neutral costs nothing
 * measurable, 9.75 against 9.88 ms; each feature built on its own made the test suite compile 12 times
 * the programs, past its time limits). OWN: built on its own (storage types decide these). */
#define CLATTN_FEATURES(F)                                                                                   \
    F(CAUSAL, MASKS)      /* a causal mask (top-left or bottom-right) */                                     \
    F(KEY_LENGTHS, MASKS) /* key lengths per batch */                                                        \
    F(OFFSETS, MASKS)     /* query positions per batch */                                                    \
    F(WINDOW, MASKS)      /* a sliding window */                                                             \
    F(MASK, MASKS)        /* an additive or boolean mask tensor */                                           \
    F(SOFTCAP, MASKS)     /* soft-capping c·tanh(s/c) */                                                     \
    F(ALIBI, MASKS)       /* ALiBi slopes per head */                                                        \
    F(LOGIT_SCALE, MASKS) /* a scale per head multiplying the scaled score */                                \
    F(SINKS, MASKS)       /* a sink logit per head in the softmax's denominator */                           \
    F(RAGGED, LAYOUT)     /* sequences packed row after row (row starts) */                                  \
    F(PAGED, LAYOUT)      /* K/V rows in blocks of a pool, through a block table */                          \
    F(MODS, OWN)          /* score_mod, mask_mod: the caller's source (program.c adds it) */                 \
    F(BLOCK_MASK, OWN)    /* a block mask (clattn_block_mask): empty blocks hidden, full ones unmasked */    \
    F(ORIGIN, OWN)        /* a part of a larger call: mods and block masks see its batches and positions */  \
    F(TREE, OWN)          /* tree attention: each query sees only its ancestors among the tree's keys */   \
    F(K_SCALES, OWN)      /* int8 K: a scale per row */                                                      \
    F(V_SCALES, OWN)      /* int8 V: a scale per row */

/* The auxiliary tensors of programmable attention (clattn_mods; unused ones NULL). */
#define CLATTN_MOD_PARAMS(X)                                                                                 \
    X(MODS, MEM, __global const uchar *, mod_aux0, 0)                                                        \
    X(MODS, MEM, __global const uchar *, mod_aux1, 0)                                                        \
    X(MODS, MEM, __global const uchar *, mod_aux2, 0)                                                        \
    X(MODS, MEM, __global const uchar *, mod_aux3, 0)

/* The masks and score terms, in every kernel that makes scores (cl/masks.cl applies them). */
#define CLATTN_MASK_PARAMS(X)                                                                                \
    X(CAUSAL, INT, int, causal, CAUSAL_NONE)                                                                 \
    X(KEY_LENGTHS, MEM, __global const ulong *, key_lengths, 0)                                              \
    X(MASK, MEM, __global const uchar *, mask, 0)                                                            \
    X(MASK, INT, int, mask_layout, MASK_NONE)                                                                \
    X(MASK, INT, int, mask_type, MASK_FLOAT)                                                                 \
    X(MASK, ULONG, ulong, mask_cols, 0)                                                                      \
    X(OFFSETS, MEM, __global const long *, offsets, 0)                                                       \
    X(WINDOW, LONG, long, win_left, -1)                                                                      \
    X(WINDOW, LONG, long, win_right, -1)                                                                     \
    X(SOFTCAP, FLOAT, float, softcap, 0.0f)                                                                  \
    X(ALIBI, MEM, __global const float *, alibi, 0)                                                          \
    X(LOGIT_SCALE, MEM, __global const float *, logit_scale, 0)                                              \
    CLATTN_MOD_PARAMS(X)                                                                                     \
    X(BLOCK_MASK, MEM, __global const uchar *, bm_states, 0) /* (batch, heads, qblocks, kblocks) */          \
    X(BLOCK_MASK, ULONG, ulong, bm_batch, 0)  /* 1: one for every batch */                                   \
    X(BLOCK_MASK, ULONG, ulong, bm_heads, 0)  /* 1: one for every head */                                    \
    X(BLOCK_MASK, ULONG, ulong, bm_qblocks, 0)                                                               \
    X(BLOCK_MASK, ULONG, ulong, bm_kblocks, 0)                                                               \
    X(BLOCK_MASK, ULONG, ulong, bm_block_q, 1)                                                               \
    X(BLOCK_MASK, ULONG, ulong, bm_block_k, 1)                                                               \
    X(ORIGIN, ULONG, ulong, origin_batch, 0)   /* added to b for the mods and the block mask */              \
    X(ORIGIN, LONG, long, origin_position, 0)  /* added to query and key positions likewise */              \
    X(TREE, MEM, __global const uint *, tree_bits, 0) /* (batch, tree_rows, tree_words): ancestors' bits */ \
    X(TREE, ULONG, ulong, tree_rows, 0)  /* rows per batch (L, a ragged batch's longest) */                 \
    X(TREE, ULONG, ulong, tree_words, 0) /* 32-bit words per row */

/* An attention kernel's sizes. */
#define CLATTN_SDPA_SIZES(X)                                                                                 \
    X(ALL, ULONG, ulong, heads, 0)                                                                           \
    X(ALL, ULONG, ulong, group, 0)                                                                           \
    X(ALL, ULONG, ulong, q_len, 0)                                                                           \
    X(ALL, ULONG, ulong, kv_len, 0)                                                                          \
    X(ALL, ULONG, ulong, dk, 0)                                                                              \
    X(ALL, ULONG, ulong, dv, 0)                                                                              \
    X(ALL, FLOAT, float, scale, 0)

/* Where Q/O and K/V rows lie beyond a dense view (cl/common.cl's K/V addressing): a ragged batch's row
 * starts (B+1 each, Q's also O's), or a paged cache's block table (B rows of table_cols ids, blocks of
 * 2^block_shift rows; the K/V views' batch strides are then the pool's block strides). */
#define CLATTN_KV_LAYOUT(X)                                                                                  \
    X(RAGGED, MEM, __global const ulong *, q_starts, 0)                                                      \
    X(RAGGED, MEM, __global const ulong *, k_starts, 0)                                                      \
    X(RAGGED, MEM, __global const uint *, tiles, 0) /* (sequence, tile) of each dim-0 work-group, or NULL */  \
    X(RAGGED, ULONG, ulong, tile_count, 0)                                                                   \
    X(PAGED, MEM, __global const int *, block_table, 0)                                                      \
    X(PAGED, ULONG, ulong, table_cols, 0)                                                                    \
    X(PAGED, UINT, uint, block_shift, 0)

/* int8 K and V: their row scales. */
#define CLATTN_KV_SCALES(X)                                                                                  \
    X(K_SCALES, MEM, __global const float *, k_scales, 0)                                                    \
    X(V_SCALES, MEM, __global const float *, v_scales, 0)                                                    \
    X(V_SCALES, ULONG, ulong, v_scale_row, 1) /* V's elements a scale stands for: Dv, or Dqk (MLA's latent form) */

/* cl/flash_attention.cl */
#define CLATTN_FLASH_PARAMS(X)                                                                               \
    X(ALL, VIEW, __global const q_store *, q, 0)                                                             \
    X(ALL, VIEW, __global const k_store *, k, 0)                                                             \
    X(ALL, VIEW, __global const v_store *, v, 0)                                                             \
    X(ALL, VIEW, __global o_store *, o, 0)                                                                   \
    X(ALL, MEM, __global float *, lse, 0)                                                                    \
    CLATTN_SDPA_SIZES(X)                                                                                     \
    CLATTN_MASK_PARAMS(X)                                                                                    \
    X(SINKS, MEM, __global const float *, sinks, 0)                                                          \
    CLATTN_KV_LAYOUT(X)                                                                                      \
    CLATTN_KV_SCALES(X)

/* cl/exact_weights.cl: reproducible arithmetic's weights output (the fused kernel's, and what to write). */
#define CLATTN_EXACT_WEIGHTS_PARAMS(X)                                                                       \
    CLATTN_FLASH_PARAMS(X)                                                                                   \
    X(ALL, MEM, __global float *, weights, 0)                                                                \
    X(ALL, INT, int, weights_mode, 0)

/* cl/decode.cl: the partial pass (or, with one split, the whole one). */
#define CLATTN_DECODE_PARTIAL_PARAMS(X)                                                                      \
    X(ALL, VIEW, __global const q_store *, q, 0)                                                             \
    X(ALL, VIEW, __global const k_store *, k, 0)                                                             \
    X(ALL, VIEW, __global const v_store *, v, 0)                                                             \
    X(ALL, VIEW, __global float *, o, 0)                                                                     \
    X(ALL, ULONG, ulong, o_split_stride, 0)                                                                  \
    X(ALL, MEM, __global float *, lse, 0)                                                                    \
    X(ALL, ULONG, ulong, lse_split_stride, 0)                                                                \
    CLATTN_SDPA_SIZES(X)                                                                                     \
    X(ALL, ULONG, ulong, slice, 0)                                                                           \
    CLATTN_MASK_PARAMS(X)                                                                                    \
    X(SINKS, MEM, __global const float *, sinks, 0)                                                          \
    CLATTN_KV_LAYOUT(X)                                                                                      \
    X(RAGGED, MEM, __global const ulong *, o_starts, 0) /* O's starts when it is the final output */         \
    CLATTN_KV_SCALES(X)

/* cl/decode.cl: the splits' merge. */
#define CLATTN_DECODE_COMBINE_PARAMS(X)                                                                      \
    X(ALL, MEM, __global const float *, part_out, 0)                                                         \
    X(ALL, MEM, __global const float *, part_lse, 0)                                                         \
    X(ALL, ULONG, ulong, parts, 0)                                                                           \
    X(ALL, ULONG, ulong, rows, 0)                                                                            \
    X(ALL, ULONG, ulong, dv, 0)                                                                              \
    X(ALL, ULONG, ulong, heads, 0)                                                                           \
    X(ALL, ULONG, ulong, q_len, 0)                                                                           \
    X(SINKS, MEM, __global const float *, sinks, 0)                                                          \
    X(ALL, VIEW, __global o_store *, o, 0)                                                                   \
    X(ALL, MEM, __global float *, lse, 0)                                                                    \
    X(RAGGED, MEM, __global const ulong *, o_starts, 0)

/* cl/score.cl: scores of the staged path, and the blocked variant over a transposed K (CPUs). */
#define CLATTN_SCORE_TAIL(X)                                                                                 \
    X(ALL, MEM, __global float *, scores, 0)                                                                 \
    X(ALL, ULONG, ulong, heads, 0)                                                                           \
    X(ALL, ULONG, ulong, group, 0)                                                                           \
    X(ALL, ULONG, ulong, q_len, 0)                                                                           \
    X(ALL, ULONG, ulong, kv_len, 0)                                                                          \
    X(ALL, ULONG, ulong, dim, 0)                                                                             \
    X(ALL, FLOAT, float, scale, 0)                                                                           \
    CLATTN_MASK_PARAMS(X)                                                                                    \
    X(ALL, ULONG, ulong, bh_begin, 0)                                                                        \
    X(ALL, MEM, __global float *, extra, 0)                                                                  \
    X(ALL, INT, int, extra_mode, 0)
#define CLATTN_SCORE_PARAMS(X)                                                                               \
    X(ALL, VIEW, __global const float *, q, 0)                                                               \
    X(ALL, VIEW, __global const float *, k, 0)                                                               \
    CLATTN_SCORE_TAIL(X)
#define CLATTN_SCORE_TILED_PARAMS(X)                                                                         \
    X(ALL, VIEW, __global const float *, q, 0)                                                               \
    X(ALL, MEM, __global const float *, kt, 0)                                                               \
    CLATTN_SCORE_TAIL(X)
#define CLATTN_TRANSPOSE_K_PARAMS(X)                                                                         \
    X(ALL, VIEW, __global const float *, k, 0)                                                               \
    X(ALL, MEM, __global float *, kt, 0)                                                                     \
    X(ALL, ULONG, ulong, batch, 0)                                                                           \
    X(ALL, ULONG, ulong, kv_heads, 0)                                                                        \
    X(ALL, ULONG, ulong, kv_len, 0)                                                                          \
    X(ALL, ULONG, ulong, dim, 0)

/* cl/softmax.cl and cl/softmax_double.cl. The sinks stay an argument (NULL: none) rather than a
 * feature: built without them, PoCL 3.1 compiled the float softmax into slower code (37 ms against 29
 * for 16384 rows of 2048 scores, AVX-512), and the softmax pays for a sink once per row. */
#define CLATTN_SOFTMAX_PARAMS(X)                                                                             \
    X(ALL, MEM, __global const float *, in, 0)                                                               \
    X(ALL, MEM, __global float *, out, 0)                                                                    \
    X(ALL, MEM, __global float *, lse, 0)                                                                    \
    X(ALL, ULONG, ulong, row_base, 0)                                                                        \
    X(ALL, ULONG, ulong, rows, 0)                                                                            \
    X(ALL, ULONG, ulong, cols, 0)                                                                            \
    X(ALL, MEM, __global const float *, sinks, 0) /* (see below) */                                          \
    X(ALL, ULONG, ulong, heads, 0)                                                                           \
    X(ALL, ULONG, ulong, q_len, 0)

/* cl/weighted_sum.cl */
#define CLATTN_WEIGHTED_SUM_PARAMS(X)                                                                        \
    X(ALL, MEM, __global const float *, p, 0)                                                                \
    X(ALL, VIEW, __global const float *, v, 0)                                                               \
    X(ALL, VIEW, __global float *, o, 0)                                                                     \
    X(ALL, ULONG, ulong, heads, 0)                                                                           \
    X(ALL, ULONG, ulong, group, 0)                                                                           \
    X(ALL, ULONG, ulong, q_len, 0)                                                                           \
    X(ALL, ULONG, ulong, kv_len, 0)                                                                          \
    X(ALL, ULONG, ulong, dim, 0)                                                                             \
    X(ALL, ULONG, ulong, bh_begin, 0)

/* cl/sparse.cl: top-k sparse attention, each query row over the keys its indices select (dense K/V, or a paged
 * pool through its table). */
#define CLATTN_SPARSE_PARAMS(X)                                                                              \
    X(ALL, MEM, __global const q_store *, q, 0)                                                              \
    X(ALL, MEM, __global const k_store *, k, 0)                                                              \
    X(ALL, MEM, __global const v_store *, v, 0)                                                              \
    X(ALL, MEM, __global const int *, indices, 0)                                                            \
    X(ALL, MEM, __global o_store *, o, 0)                                                                    \
    X(ALL, MEM, __global float *, lse, 0)                                                                    \
    X(ALL, MEM, __global const float *, sinks, 0)                                                            \
    X(ALL, MEM, __global const ulong *, key_lengths, 0)                                                      \
    X(ALL, MEM, __global const int *, block_table, 0)                                                        \
    X(ALL, ULONG, ulong, table_cols, 0)                                                                      \
    X(ALL, UINT, uint, block_shift, 0)                                                                       \
    X(ALL, ULONG, ulong, batch, 0)                                                                           \
    X(ALL, ULONG, ulong, heads, 0)                                                                           \
    X(ALL, ULONG, ulong, q_len, 0)                                                                           \
    X(ALL, ULONG, ulong, kv_len, 0)                                                                          \
    X(ALL, ULONG, ulong, top_k, 0)                                                                           \
    X(ALL, ULONG, ulong, dk, 0)                                                                              \
    X(ALL, ULONG, ulong, dv, 0)                                                                              \
    X(ALL, FLOAT, float, scale, 0)                                                                           \
    X(ALL, FLOAT, float, softcap, 0.0f)                                                                      \
    X(ALL, ULONG, ulong, splits, 1)  /* > 1: the keys in this many slices, partial rows into part_out/lse */ \
    X(ALL, MEM, __global float *, part_out, 0)                                                               \
    X(ALL, MEM, __global float *, part_lse, 0)

/* cl/sparse.cl's merge of a row's slices (and its sink) into the output. */
#define CLATTN_SPARSE_COMBINE_PARAMS(X)                                                                      \
    X(ALL, MEM, __global const float *, part_out, 0)                                                         \
    X(ALL, MEM, __global const float *, part_lse, 0)                                                         \
    X(ALL, ULONG, ulong, splits, 0)                                                                          \
    X(ALL, ULONG, ulong, rows, 0)                                                                            \
    X(ALL, ULONG, ulong, dv, 0)                                                                              \
    X(ALL, ULONG, ulong, heads, 0)                                                                           \
    X(ALL, ULONG, ulong, q_len, 0)                                                                           \
    X(ALL, MEM, __global const float *, sinks, 0)                                                            \
    X(ALL, MEM, __global o_store *, o, 0)                                                                    \
    X(ALL, MEM, __global float *, lse, 0)

/* cl/merge.cl: two partial results over disjoint keys into one (sinks, when given, in the last). */
#define CLATTN_MERGE_PARAMS(X)                                                                               \
    X(ALL, MEM, __global const q_store *, out_a, 0)                                                          \
    X(ALL, MEM, __global const float *, lse_a, 0)                                                            \
    X(ALL, MEM, __global const k_store *, out_b, 0)                                                          \
    X(ALL, MEM, __global const float *, lse_b, 0)                                                            \
    X(ALL, MEM, __global const float *, sinks, 0)                                                            \
    X(ALL, ULONG, ulong, heads, 0)                                                                           \
    X(ALL, ULONG, ulong, q_len, 0)                                                                           \
    X(ALL, ULONG, ulong, rows, 0)                                                                            \
    X(ALL, ULONG, ulong, dim, 0)                                                                             \
    X(ALL, MEM, __global o_store *, out, 0)                                                                  \
    X(ALL, MEM, __global float *, lse, 0)

/* cl/block_mask.cl: a block mask's states from mask_mod, one work-item a block. */
#define CLATTN_BLOCK_MASK_BUILD_PARAMS(X)                                                                    \
    X(ALL, MEM, __global uchar *, states, 0)                                                                 \
    X(ALL, ULONG, ulong, batch, 0)                                                                           \
    X(ALL, ULONG, ulong, heads, 0)                                                                           \
    X(ALL, ULONG, ulong, q_len, 0)                                                                           \
    X(ALL, ULONG, ulong, kv_len, 0)                                                                          \
    X(ALL, ULONG, ulong, block_q, 0)                                                                         \
    X(ALL, ULONG, ulong, block_k, 0)                                                                         \
    X(ALL, ULONG, ulong, qblocks, 0)                                                                         \
    X(ALL, ULONG, ulong, kblocks, 0)                                                                         \
    CLATTN_MOD_PARAMS(X)

/* cl/backward.cl: the backward pass (clattn_sdpa_backward), float32 tensors in (B,H,L,·) / (B,kv_heads,S,·). */
#define CLATTN_BACKWARD_DELTA_PARAMS(X)                                                                      \
    X(ALL, MEM, __global const float *, o, 0)                                                                \
    X(ALL, MEM, __global const float *, dout, 0)                                                             \
    X(ALL, MEM, __global float *, delta, 0)                                                                  \
    X(ALL, ULONG, ulong, rows, 0)                                                                            \
    X(ALL, ULONG, ulong, dv, 0)
#define CLATTN_BACKWARD_PARAMS(X)                                                                            \
    X(ALL, MEM, __global const float *, q, 0)                                                                \
    X(ALL, MEM, __global const float *, k, 0)                                                                \
    X(ALL, MEM, __global const float *, v, 0)                                                                \
    X(ALL, MEM, __global const float *, dout, 0)                                                             \
    X(ALL, MEM, __global const float *, lse, 0)                                                              \
    X(ALL, MEM, __global const float *, delta, 0)                                                            \
    X(ALL, MEM, __global float *, grad_q, 0) /* the dQ kernel's output */                                    \
    X(ALL, MEM, __global float *, grad_k, 0) /* the dK/dV kernel's outputs */                                \
    X(ALL, MEM, __global float *, grad_v, 0)                                                                 \
    X(ALL, ULONG, ulong, batch, 0)                                                                           \
    CLATTN_SDPA_SIZES(X)                                                                                     \
    CLATTN_MASK_PARAMS(X)
/* cl/backward_lanes.cl: the same with the keys in chunks (grad_q: the chunks' dQ copies where there are more
 * than one), and the sum of those copies. */
#define CLATTN_BACKWARD_LANES_PARAMS(X)                                                                      \
    CLATTN_BACKWARD_PARAMS(X)                                                                                \
    X(ALL, ULONG, ulong, chunk_keys, 0)
/* cl/backward_staged.cl: the same with the (B, H, L, S) weights and their gradients in memory. */
#define CLATTN_BACKWARD_STAGED_PARAMS(X)                                                                     \
    CLATTN_BACKWARD_PARAMS(X)                                                                                \
    X(ALL, MEM, __global float *, probs, 0)                                                                  \
    X(ALL, MEM, __global float *, dscores, 0)
#define CLATTN_BACKWARD_FINITE_PARAMS(X)                                                                     \
    X(ALL, MEM, __global const float *, k, 0)                                                                \
    X(ALL, MEM, __global const float *, v, 0)                                                                \
    X(ALL, MEM, __global const float *, delta, 0)                                                            \
    X(ALL, MEM, __global const float *, lse, 0)                                                              \
    X(ALL, MEM, __global int *, nonfinite, 0)                                                                \
    X(ALL, ULONG, ulong, n_k, 0)                                                                             \
    X(ALL, ULONG, ulong, n_v, 0)                                                                             \
    X(ALL, ULONG, ulong, rows, 0)
#define CLATTN_BACKWARD_DQ_SUM_PARAMS(X)                                                                     \
    X(ALL, MEM, __global const float *, parts, 0)                                                            \
    X(ALL, MEM, __global float *, grad_q, 0)                                                                 \
    X(ALL, ULONG, ulong, n, 0)                                                                               \
    X(ALL, ULONG, ulong, chunks, 0)
#define CLATTN_BACKWARD_CUT_PARAMS(X)                                                                      \
    X(ALL, MEM, __global const float *, src, 0)                                                              \
    X(ALL, MEM, __global float *, dst, 0)                                                                    \
    X(ALL, ULONG, ulong, n, 0)

/* cl/layer_backward.cl: the layer's backward pass's copies between layouts and its column sums. */
#define CLATTN_STRIDED_COPY_PARAMS(X)                                                                        \
    X(ALL, MEM, __global const float *, src, 0)                                                              \
    X(ALL, ULONG, ulong, src_offset, 0)                                                                      \
    X(ALL, MEM, __global float *, dst, 0)                                                                    \
    X(ALL, ULONG, ulong, dst_offset, 0)                                                                      \
    X(ALL, ULONG, ulong, n0, 0)                                                                              \
    X(ALL, ULONG, ulong, n1, 0)                                                                              \
    X(ALL, ULONG, ulong, n2, 0)                                                                              \
    X(ALL, ULONG, ulong, n3, 0)                                                                              \
    X(ALL, ULONG, ulong, s0, 0)                                                                              \
    X(ALL, ULONG, ulong, s1, 0)                                                                              \
    X(ALL, ULONG, ulong, s2, 0)                                                                              \
    X(ALL, ULONG, ulong, s3, 0)                                                                              \
    X(ALL, ULONG, ulong, d0, 0)                                                                              \
    X(ALL, ULONG, ulong, d1, 0)                                                                              \
    X(ALL, ULONG, ulong, d2, 0)                                                                              \
    X(ALL, ULONG, ulong, d3, 0)
#define CLATTN_COLUMN_SUMS_PARAMS(X)                                                                         \
    X(ALL, MEM, __global const float *, src, 0)                                                              \
    X(ALL, ULONG, ulong, ld, 0)                                                                              \
    X(ALL, ULONG, ulong, col0, 0)                                                                            \
    X(ALL, ULONG, ulong, rows, 0)                                                                            \
    X(ALL, ULONG, ulong, cols, 0)                                                                            \
    X(ALL, MEM, __global float *, sums, 0)

/* cl/convert.cl: storage-type conversion, and rows appended to a cache (dense or paged). */
#define CLATTN_CONVERT_PARAMS(X)                                                                             \
    X(ALL, MEM, __global const q_store *, src, 0)                                                            \
    X(ALL, MEM, __global const float *, scales, 0)                                                           \
    X(ALL, ULONG, ulong, row, 0)                                                                             \
    X(ALL, MEM, __global o_store *, dst, 0)                                                                  \
    X(ALL, ULONG, ulong, n, 0)
#define CLATTN_APPEND_ROWS_PARAMS(X)                                                                         \
    X(ALL, MEM, __global const q_store *, rows, 0)                                                           \
    X(ALL, ULONG, ulong, new_len, 0)                                                                         \
    X(ALL, ULONG, ulong, kv_heads, 0)                                                                        \
    X(ALL, ULONG, ulong, dim, 0)                                                                             \
    X(ALL, ULONG, ulong, batch, 0)                                                                           \
    X(ALL, MEM, __global o_store *, dst, 0)                                                                  \
    X(ALL, MEM, __global float *, dst_scales, 0)                                                             \
    X(ALL, ULONG, ulong, capacity, 0)                                                                        \
    X(ALL, MEM, __global const int *, table, 0)                                                              \
    X(ALL, ULONG, ulong, cols, 0)                                                                            \
    X(ALL, UINT, uint, shift, 0)                                                                             \
    X(ALL, MEM, __global const ulong *, lengths, 0)

/* cl/paged.cl: every block id a call can reach, checked. */
#define CLATTN_PAGED_CHECK_PARAMS(X)                                                                         \
    X(ALL, MEM, __global const int *, table, 0)                                                              \
    X(ALL, ULONG, ulong, cols, 0)                                                                            \
    X(ALL, ULONG, ulong, batch, 0)                                                                           \
    X(ALL, MEM, __global const ulong *, lengths, 0)                                                          \
    X(ALL, ULONG, ulong, extra, 0)                                                                           \
    X(ALL, UINT, uint, shift, 0)                                                                             \
    X(ALL, ULONG, ulong, blocks, 0)                                                                          \
    X(ALL, MEM, __global int *, first_bad, 0)

/* cl/sparse_backward.cl: the sparse call's gradients (float32 tensors), dQ and D per query row, then dK and dV
 * per key through key_starts (B × (kv_len + 1)) and key_rows: each key's selecting query rows. */
#define CLATTN_SPARSE_BACKWARD_PARAMS(X)                                                                     \
    X(ALL, MEM, __global const float *, q, 0)                                                                \
    X(ALL, MEM, __global const float *, k, 0)                                                                \
    X(ALL, MEM, __global const float *, v, 0)                                                                \
    X(ALL, MEM, __global const float *, o, 0)                                                                \
    X(ALL, MEM, __global const float *, dout, 0)                                                             \
    X(ALL, MEM, __global const float *, lse, 0)                                                              \
    X(ALL, MEM, __global float *, delta, 0) /* written by the dQ kernel, read by the dK/dV kernel */         \
    X(ALL, MEM, __global const int *, indices, 0)                                                            \
    X(ALL, MEM, __global const ulong *, key_lengths, 0)                                                      \
    X(ALL, MEM, __global const ulong *, key_starts, 0)                                                       \
    X(ALL, MEM, __global const uint *, key_rows, 0)                                                          \
    X(ALL, MEM, __global float *, grad_q, 0)                                                                 \
    X(ALL, MEM, __global float *, grad_k, 0)                                                                 \
    X(ALL, MEM, __global float *, grad_v, 0)                                                                 \
    X(ALL, ULONG, ulong, batch, 0)                                                                           \
    X(ALL, ULONG, ulong, heads, 0)                                                                           \
    X(ALL, ULONG, ulong, q_len, 0)                                                                           \
    X(ALL, ULONG, ulong, kv_len, 0)                                                                          \
    X(ALL, ULONG, ulong, top_k, 0)                                                                           \
    X(ALL, FLOAT, float, scale, 0)                                                                           \
    X(ALL, FLOAT, float, softcap, 0.0f)

/* cl/topk.cl: each row's top_k largest scores' positions. */
#define CLATTN_TOPK_PARAMS(X)                                                                                \
    X(ALL, MEM, __global const float *, scores, 0)                                                           \
    X(ALL, MEM, __global const ulong *, lengths, 0)                                                          \
    X(ALL, MEM, __global int *, indices, 0)                                                                  \
    X(ALL, ULONG, ulong, rows, 0)                                                                            \
    X(ALL, ULONG, ulong, q_len, 0)                                                                           \
    X(ALL, ULONG, ulong, kv_len, 0)                                                                          \
    X(ALL, ULONG, ulong, top_k, 0)

/* cl/gemm.cl and cl/projection.cl */
#define CLATTN_GEMM_PARAMS(X)                                                                                \
    X(ALL, MEM, __global const q_store *, x, 0)                                                              \
    X(ALL, MEM, __global const k_store *, w, 0)                                                              \
    X(ALL, MEM, __global const k_store *, bias, 0)                                                           \
    X(ALL, MEM, __global o_store *, y, 0)                                                                    \
    X(ALL, ULONG, ulong, rows, 0)                                                                            \
    X(ALL, ULONG, ulong, in, 0)                                                                              \
    X(ALL, ULONG, ulong, out, 0)                                                                             \
    X(ALL, ULONG, ulong, seq_len, 0)                                                                         \
    X(ALL, ULONG, ulong, head_dim, 0)
#define CLATTN_ADD_BIAS_PARAMS(X)                                                                            \
    X(ALL, MEM, __global float *, y, 0)                                                                      \
    X(ALL, MEM, __global const float *, bias, 0)                                                             \
    X(ALL, ULONG, ulong, rows, 0)                                                                            \
    X(ALL, ULONG, ulong, cols, 0)
#define CLATTN_CUT_SMALL_PARAMS(X)                                                                           \
    X(ALL, MEM, __global const uint *, src, 0)                                                               \
    X(ALL, MEM, __global uint *, dst, 0)                                                                     \
    X(ALL, ULONG, ulong, n, 0)                                                                               \
    X(ALL, INT, int, bfloat16, 0)

#ifdef __OPENCL_C_VERSION__
/* The kernel side: CLATTN_PARAMETERS(list) is a parameter list, CLATTN_ABSENT(list) the constants that
 * stand for the parameters a build leaves out. */
#define HAS_ALL 1
#define CLATTN_PCAT_(a, b) a##b
#define CLATTN_PCAT(a, b) CLATTN_PCAT_(a, b)
#define CLATTN_IF_1(...) __VA_ARGS__
#define CLATTN_IF_0(...)
#define CLATTN_NOT_1 0
#define CLATTN_NOT_0 1
#define CLATTN_WHEN(feature) CLATTN_PCAT(CLATTN_IF_, CLATTN_PCAT(HAS_, feature))
#define CLATTN_UNLESS(feature) CLATTN_PCAT(CLATTN_IF_, CLATTN_PCAT(CLATTN_NOT_, CLATTN_PCAT(HAS_, feature)))
#define CLATTN_DECLARE_VIEW(type, name) , type name, ulong name##_bs, ulong name##_hs, ulong name##_rs
#define CLATTN_DECLARE_MEM(type, name) , type name
#define CLATTN_DECLARE_ULONG(type, name) , type name
#define CLATTN_DECLARE_LONG(type, name) , type name
#define CLATTN_DECLARE_INT(type, name) , type name
#define CLATTN_DECLARE_UINT(type, name) , type name
#define CLATTN_DECLARE_FLOAT(type, name) , type name
#define CLATTN_DECLARE(feature, kind, type, name, absent) CLATTN_WHEN(feature)(CLATTN_DECLARE_##kind(type, name))
#define CLATTN_DROP_FIRST_(empty, ...) __VA_ARGS__
#define CLATTN_DROP_FIRST(...) CLATTN_DROP_FIRST_(__VA_ARGS__)
#define CLATTN_PARAMETERS(list) CLATTN_DROP_FIRST(list(CLATTN_DECLARE))
#define CLATTN_CONSTANT(feature, kind, type, name, absent) CLATTN_UNLESS(feature)(type const name = absent;)
#define CLATTN_ABSENT(list) list(CLATTN_CONSTANT)
/* An absent parameter is a constant, so a test of it (`mask_layout != MASK_NONE || ...`) is a constant
 * operand of && or ||: meant, and folded; without this Clang-based compilers (PoCL, rusticl, oclgrind)
 * print "1 warning generated." on the application's stderr at each such build. */
#if defined(__clang__)
#pragma clang diagnostic ignored "-Wconstant-logical-operand"
#endif
#endif
