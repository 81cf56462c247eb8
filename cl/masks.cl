/* Every mask kind and score term, and the one rule of which keys a query row may see and what its
 * scores become: used by every kernel that makes scores (staged, fused, decode). Their parameters are
 * CLATTN_MASK_PARAMS of cl/params.h, which every such kernel takes; the functions here read them by
 * name, so a kernel never names a term. To add a mask kind or a score term: its parameter (and its
 * feature) in cl/params.h, its part here (clattn_visible_range for masks that hide a range of keys,
 * clattn_row_terms and clattn_score_terms for what changes a score), and its checks and upload in
 * src/attention/masks.c. */

/* Mask kinds, as in clattn.h's clattn_causal and clattn_mask_layout. */
#define CAUSAL_NONE 0
#define CAUSAL_TOP_LEFT 1
#define CAUSAL_BOTTOM_RIGHT 2
#define MASK_NONE 0
#define MASK_L_S 1
#define MASK_B_H_L_S 2
#define MASK_B_1_L_S 3
#define MASK_1_H_L_S 4
#define MASK_B_1_1_S 5
#define MASK_FLOAT 0
#define MASK_BOOL 1
#define MASK_FLOAT16 2
#define MASK_BFLOAT16 3
/* clattn_weights_output: which scores the staged path's extra output holds. */
#define WEIGHTS_QK 1
#define WEIGHTS_SOFTCAPPED 2
#define WEIGHTS_MASKED 3

/* The absolute key position of query row i of batch b: the caller's offset plus i when offsets are
 * given, else i + S − L for a bottom-right causal mask, else i. Causal masks, windows and ALiBi all
 * measure from it. */
inline long clattn_query_position(int causal, __global const long *offsets, ulong b, ulong i, ulong q_len,
                                  ulong kv_len)
{
    if (offsets)
        return offsets[b] + (long)i;
    if (causal == CAUSAL_BOTTOM_RIGHT)
        return (long)i + (long)kv_len - (long)q_len;
    return (long)i;
}

/* Keys [*begin, *end) are visible to the query at position p: below the batch's key length, at most p
 * under a causal mask, within [p − left, p + right] under a window (−1: that side unbounded). Both
 * bounds only grow with p, which lets the fused kernel bound a whole group's walk by its first and
 * last rows. (Host checks keep |offsets| and window sizes under 2^61: no sum here overflows.) */
inline void clattn_visible_range(int causal, long p, ulong key_len, long win_left, long win_right, ulong *begin,
                                 ulong *end)
{
    long lo = 0, hi = (long)key_len; /* [lo, hi) */
    if (causal != CAUSAL_NONE)
        hi = min(hi, p + 1);
    if (win_right >= 0)
        hi = min(hi, p + win_right + 1);
    if (win_left >= 0)
        lo = max(lo, p - win_left);
    hi = max(hi, (long)0);
    *begin = (ulong)min(lo, hi);
    *end = (ulong)hi;
}

/* Keys [*begin, *end) hold every key that one of queries first … last (in order) of batch b may see:
 * the first's begin and the last's end, as both bounds grow with the position. A fused work-group walks
 * these keys. */
inline void clattn_rows_range(int causal, __global const long *offsets, ulong b, ulong first, ulong last, ulong q_len,
                              ulong kv_len, ulong key_len, long win_left, long win_right, ulong *begin, ulong *end)
{
    ulong unused;
    clattn_visible_range(causal, clattn_query_position(causal, offsets, b, first, q_len, kv_len), key_len, win_left,
                         win_right, begin, &unused);
    clattn_visible_range(causal, clattn_query_position(causal, offsets, b, last, q_len, kv_len), key_len, win_left,
                         win_right, &unused, end);
}

/* Programmable attention: a build with feature MODS has the caller's source before this file (see
 * src/attention/mods.c: it defines score_mod and/or mask_mod, CLATTN_SCORE_MOD and CLATTN_MASK_MOD (1 or 0), and
 * CLATTN_MOD_ARGS(t), the auxiliary tensors of row terms t as the functions' trailing arguments). */
#if defined(HAS_MODS) && HAS_MODS
#define CLATTN_MODS_ON 1
#else
#define CLATTN_MODS_ON 0
#endif
#if CLATTN_MODS_ON && CLATTN_SCORE_MOD
#define CLATTN_SCORE_MOD_ON 1
#else
#define CLATTN_SCORE_MOD_ON 0
#endif
#if CLATTN_MODS_ON && CLATTN_MASK_MOD
#define CLATTN_MASK_MOD_ON 1
#else
#define CLATTN_MASK_MOD_ON 0
#endif
/* A block mask (clattn_block_mask, src/attention/block_mask.c): per (batch, head, block of query positions, block
 * of keys) whether no pair is visible (EMPTY: −inf, whole tiles skipped), every pair (FULL: mask_mod not
 * called) or some (PARTIAL). bm_batch (bm_heads) 1: one for every batch (head). */
#if defined(HAS_BLOCK_MASK) && HAS_BLOCK_MASK
#define CLATTN_BLOCK_MASK_ON 1
#else
#define CLATTN_BLOCK_MASK_ON 0
#endif
/* Tree attention (clattn_masks.tree_parents): each row's ancestors among the tree's tokens, as bits. */
#if defined(HAS_TREE) && HAS_TREE
#define CLATTN_TREE_ON 1
#else
#define CLATTN_TREE_ON 0
#endif
#define BLOCK_EMPTY 0
#define BLOCK_PARTIAL 1
#define BLOCK_FULL 2
/* What a span of blocks holds: all EMPTY, all FULL, or anything else (MIXED). */
#define BLOCKS_MIXED 3

/* What the score terms need of a query row's head, made once per row (CLATTN_ROW_TERMS(&t, h) inside a
 * kernel, from its parameters and its batch index b): ALiBi's slope (0 without), the logit scale (1
 * without), and with mods the row's batch, head and the auxiliary tensors. Filled and read through
 * pointers: returned or passed by value, a struct makes Clang's inliner emit
 * llvm.experimental.noalias.scope.decl, which oclgrind's LLVM cannot run. */
typedef struct clattn_row_terms {
    float slope, logit_scale;
#if CLATTN_MODS_ON || CLATTN_BLOCK_MASK_ON
    int b, h; /* b: the batch of the whole call (origin_batch added) */
    long p0;  /* origin_position: a part's positions plus p0 are the whole call's */
#endif
#if CLATTN_MODS_ON
    __global const uchar *aux[4];
#endif
#if CLATTN_BLOCK_MASK_ON
    __global const uchar *blocks; /* this row's (batch, head) plane of the block states */
    ulong kblocks, block_k;
#endif
#if CLATTN_TREE_ON
    __global const uint *tree;   /* this row's bits: token t of its tree is an ancestor (or itself) */
    long tree_first, tree_end;   /* the positions of its tree's keys: [tree_first, tree_end) */
#endif
} clattn_row_terms;

inline void clattn_row_terms_of(clattn_row_terms *t, __global const float *alibi, __global const float *logit_scale,
                                ulong b, ulong h, __global const uchar *aux0, __global const uchar *aux1,
                                __global const uchar *aux2, __global const uchar *aux3, ulong origin_batch,
                                long origin_position)
{
    t->slope = alibi ? alibi[h] : 0.0f;
    t->logit_scale = logit_scale ? logit_scale[h] : 1.0f;
#if CLATTN_MODS_ON || CLATTN_BLOCK_MASK_ON
    t->b = (int)(b + origin_batch);
    t->h = (int)h;
    t->p0 = origin_position;
#endif
#if CLATTN_MODS_ON
    t->aux[0] = aux0;
    t->aux[1] = aux1;
    t->aux[2] = aux2;
    t->aux[3] = aux3;
#endif
}

/* The block states of query position p's row of blocks, for row terms t (bm_* the kernel's parameters). */
inline void clattn_row_blocks_of(clattn_row_terms *t, __global const uchar *states, ulong bm_batch, ulong bm_heads,
                                 ulong qblocks, ulong kblocks, ulong block_q, ulong block_k, long p)
{
#if CLATTN_BLOCK_MASK_ON
    const ulong bb = bm_batch == 1 ? 0 : (ulong)t->b, hh = bm_heads == 1 ? 0 : (ulong)t->h;
    p += t->p0;
    const ulong qb = min((ulong)max(p, (long)0) / block_q, qblocks - 1); /* (the host checked the positions) */
    t->blocks = states + ((bb * bm_heads + hh) * qblocks + qb) * kblocks;
    t->kblocks = kblocks;
    t->block_k = block_k;
#endif
}
/* The tree's bits of query row i (of batch b) at position p, for row terms t. */
inline void clattn_row_tree_of(clattn_row_terms *t, __global const uint *bits, ulong rows, ulong words, ulong b,
                               ulong i, long p)
{
#if CLATTN_TREE_ON
    t->tree = bits + (b * rows + min(i, rows - 1)) * words; /* (rows past a ragged sequence's: never read) */
    t->tree_first = p - (long)i;
    t->tree_end = t->tree_first + (long)rows;
#endif
}
#define CLATTN_ROW_TERMS(t, h)                                                                                \
    clattn_row_terms_of((t), alibi, logit_scale, b, (h), mod_aux0, mod_aux1, mod_aux2, mod_aux3, origin_batch,     \
                        origin_position)
/* After CLATTN_ROW_TERMS, once the row's index i in its batch and its position p are known. */
#define CLATTN_ROW_AT(t, i, p)                                                                                \
    do {                                                                                                      \
        clattn_row_blocks_of((t), bm_states, bm_batch, bm_heads, bm_qblocks, bm_kblocks, bm_block_q, bm_block_k, \
                             (p));                                                                            \
        clattn_row_tree_of((t), tree_bits, tree_rows, tree_words, b, (i), (p));                               \
    } while (0)

/* What the blocks of keys [j0, j0 + n) hold for the query positions p_first … p_last of heads h_first …
 * h_last of batch b: BLOCK_EMPTY or BLOCK_FULL where every one of them is, else BLOCKS_MIXED (always, without
 * a block mask). Where a span is EMPTY a fused kernel skips the tile. */
inline int clattn_block_span(__global const uchar *states, ulong bm_batch, ulong bm_heads, ulong qblocks,
                             ulong kblocks, ulong block_q, ulong block_k, ulong origin_batch, long origin_position,
                             ulong b, ulong h_first, ulong h_last, long p_first, long p_last, ulong j0, ulong n)
{
#if CLATTN_BLOCK_MASK_ON
    const ulong bb = bm_batch == 1 ? 0 : b + origin_batch;
    p_first += origin_position, p_last += origin_position, j0 += (ulong)origin_position;
    const ulong q0 = min((ulong)max(p_first, (long)0) / block_q, qblocks - 1);
    const ulong q1 = min((ulong)max(p_last, (long)0) / block_q, qblocks - 1);
    const ulong k0 = min(j0 / block_k, kblocks - 1), k1 = min((j0 + n - 1) / block_k, kblocks - 1);
    if (bm_heads == 1)
        h_first = h_last = 0;
    bool any_empty = false, any_other = false, all_full = true;
    for (ulong h = h_first; h <= h_last; h++)
        for (ulong qb = q0; qb <= q1; qb++)
            for (ulong kb = k0; kb <= k1; kb++) {
                const uchar st = states[((bb * bm_heads + h) * qblocks + qb) * kblocks + kb];
                any_empty |= st == BLOCK_EMPTY;
                any_other |= st != BLOCK_EMPTY;
                all_full &= st == BLOCK_FULL;
            }
    return !any_other ? BLOCK_EMPTY : all_full ? BLOCK_FULL : BLOCKS_MIXED;
#else
    return BLOCKS_MIXED;
#endif
}
#define CLATTN_BLOCK_SPAN(b, h_first, h_last, p_first, p_last, j0, n)                                         \
    clattn_block_span(bm_states, bm_batch, bm_heads, bm_qblocks, bm_kblocks, bm_block_q, bm_block_k,             \
                      origin_batch, origin_position, (b), (h_first), (h_last), (p_first), (p_last), (j0), (n))

/* The first tile of n keys from j0 on (stepping by n, up to end) whose blocks are not all EMPTY for the
 * query positions p_first … p_last of the heads h_first … h_last of batch b (j0 itself without a block
 * mask): a fused work-group's walk steps from one such tile to the next, every work-item alike. */
inline ulong clattn_next_seen_tile(__global const uchar *states, ulong bm_batch, ulong bm_heads, ulong qblocks,
                                   ulong kblocks, ulong block_q, ulong block_k, ulong origin_batch,
                                   long origin_position, ulong b, ulong h_first, ulong h_last, long p_first,
                                   long p_last, ulong j0, ulong end, ulong n)
{
#if CLATTN_BLOCK_MASK_ON
    while (j0 < end && clattn_block_span(states, bm_batch, bm_heads, qblocks, kblocks, block_q, block_k, origin_batch,
                                         origin_position, b, h_first, h_last, p_first, p_last, j0, n) == BLOCK_EMPTY)
        j0 += n;
#endif
    return j0;
}
#define CLATTN_NEXT_SEEN_TILE(b, h_first, h_last, p_first, p_last, j0, end, n)                                \
    clattn_next_seen_tile(bm_states, bm_batch, bm_heads, bm_qblocks, bm_kblocks, bm_block_q, bm_block_k,         \
                          origin_batch, origin_position, (b), (h_first), (h_last), (p_first), (p_last), (j0), (end), \
                          (n))

/* Whether a call has score terms (inside a kernel: a constant false where the build has none): the
 * kernels then take their per-key path. Mods and block masks count as terms: they may hide any key. */
#define CLATTN_SCORE_TERMS_ON                                                                                 \
    (softcap > 0.0f || alibi || logit_scale || CLATTN_SCORE_MOD_ON || CLATTN_MASK_MOD_ON || CLATTN_BLOCK_MASK_ON ||  \
     CLATTN_TREE_ON)
/* Whether the tree is the call's only score term (no mask tensor asked here): a tile that lies wholly before
 * every row's tree (clattn_tree_first) then takes a kernel's path without terms, as the cache's keys of a
 * draft's verification do. */
#define CLATTN_TREE_ONLY_TERMS                                                                                \
    (CLATTN_TREE_ON && !(softcap > 0.0f || alibi || logit_scale || CLATTN_SCORE_MOD_ON || CLATTN_MASK_MOD_ON ||   \
                         CLATTN_BLOCK_MASK_ON))
/* The first key t's tree may hide (LONG_MAX without a tree). */
inline long clattn_tree_first(const clattn_row_terms *t)
{
#if CLATTN_TREE_ON
    return t->tree_first;
#else
    (void)t;
    return LONG_MAX;
#endif
}
/* The same but for mask_mod and the block mask: the terms that still apply in a tile whose blocks are all
 * FULL (a fused kernel then takes such a tile's scores as they are, where this is false). */
#define CLATTN_VALUE_TERMS_ON (softcap > 0.0f || alibi || logit_scale || CLATTN_SCORE_MOD_ON || CLATTN_TREE_ON)

/* The scaled dot product of key j for the query at position p with the terms that come before the
 * masks (clattn_weights_output's SOFTCAPPED scores): score_mod, times the head's logit scale, then
 * soft-capped where softcap > 0. */
/* Soft-capping c·tanh(s/c): the built-in tanh and division, or (a reproducible build: cl/exact_math.cl defines it
 * first) the exactly rounded ones. */
#ifndef CLATTN_SOFTCAP_OF
#define CLATTN_SOFTCAP_OF(s, c) ((c) * tanh((s) / (c)))
#endif
inline float clattn_capped_score(float scaled, float softcap, const clattn_row_terms *t, long j, long p)
{
#if CLATTN_SCORE_MOD_ON
    scaled = score_mod(scaled, t->b, t->h, p + t->p0, j + t->p0 CLATTN_MOD_ARGS(t));
#endif
    scaled *= t->logit_scale;
    if (softcap > 0.0f)
        scaled = CLATTN_SOFTCAP_OF(scaled, softcap);
    return scaled;
}

/* Whether the block mask hides key j from t's row wholly (its block EMPTY): the pair needs no score. */
inline bool clattn_block_hides(const clattn_row_terms *t, long j)
{
#if CLATTN_BLOCK_MASK_ON
    return t->blocks[min((ulong)(j + t->p0) / t->block_k, t->kblocks - 1)] == BLOCK_EMPTY;
#else
    (void)t, (void)j;
    return false;
#endif
}

/* The score of one key the built-in masks leave visible, as the softmax takes it: −inf where mask_mod
 * hides it, else in ONNX's order the capped score (clattn_capped_score), then ALiBi's slope·(j − p) and
 * the additive mask entry added. */
inline float clattn_score_terms(float scaled, float softcap, const clattn_row_terms *t, long j, long p, float mask)
{
#if CLATTN_BLOCK_MASK_ON
    const uchar block = t->blocks[min((ulong)(j + t->p0) / t->block_k, t->kblocks - 1)];
    if (block == BLOCK_EMPTY)
        return -INFINITY;
#else
    const uchar block = BLOCK_PARTIAL;
#endif
#if CLATTN_TREE_ON
    if (j >= t->tree_first && j < t->tree_end &&
        !((t->tree[(j - t->tree_first) >> 5] >> ((j - t->tree_first) & 31)) & 1u))
        return -INFINITY; /* a token of the tree that is not an ancestor */
#endif
#if CLATTN_MASK_MOD_ON
    if (block != BLOCK_FULL && !mask_mod(t->b, t->h, p + t->p0, j + t->p0 CLATTN_MOD_ARGS(t)))
        return -INFINITY;
#endif
    (void)block;
    return clattn_capped_score(scaled, softcap, t, j, p) + t->slope * (float)(j - p) + mask;
}

/* What the mask adds to the score of (batch b, head h, query i, key j): its float entry, or 0 / −inf
 * for a bool entry that allows / forbids; 0 without a mask. The mask is read where it lies, in its
 * own broadcast shape with `cols` keys per row; keys from `cols` on are masked. */
inline float clattn_additive_mask(__global const uchar *mask, int type, int layout, ulong b, ulong h, ulong heads,
                                  ulong i, ulong j, ulong q_len, ulong cols)
{
    if (layout == MASK_NONE)
        return 0.0f;
    if (j >= cols)
        return -INFINITY;
    ulong matrix = 0, rows = q_len; /* which (rows, cols) matrix of the mask, and its rows */
    if (layout == MASK_B_H_L_S)
        matrix = b * heads + h;
    else if (layout == MASK_B_1_L_S)
        matrix = b;
    else if (layout == MASK_1_H_L_S)
        matrix = h;
    else if (layout == MASK_B_1_1_S)
        matrix = b, rows = 1, i = 0;
    const ulong at = clattn_matrix_offset(matrix, i, j, rows, cols);
    if (type == MASK_BOOL)
        return mask[at] ? 0.0f : -INFINITY;
    if (type == MASK_FLOAT16)
        return vload_half(at, (__global const half *)mask);
    if (type == MASK_BFLOAT16)
        return as_float((uint)((__global const ushort *)mask)[at] << 16);
    return ((__global const float *)mask)[at];
}
