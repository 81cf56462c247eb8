/* Every mask kind and score term, and the one rule of which keys a query row may see and what its
 * scores become: used by every kernel that makes scores (staged, fused, decode). Their parameters are
 * CLATTN_MASK_PARAMS of cl/params.h, which every such kernel takes; the functions here read them by
 * name, so a kernel never names a term. To add a mask kind or a score term: its parameter (and its
 * feature) in cl/params.h, its part here (clattn_visible_range for masks that hide a range of keys,
 * clattn_row_terms and clattn_score_terms for what changes a score), and its checks and upload in
 * src/masks.c. */

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
 * src/mods.c: it defines score_mod and/or mask_mod, CLATTN_SCORE_MOD and CLATTN_MASK_MOD (1 or 0), and
 * CLATTN_MOD_ARGS(t), the auxiliary tensors of row terms t as the functions' trailing arguments). */
#if defined(HAS_MODS) && HAS_MODS
#define CLATTN_MODS_ON 1
#else
#define CLATTN_MODS_ON 0
#endif

/* What the score terms need of a query row's head, made once per row (CLATTN_ROW_TERMS(&t, h) inside a
 * kernel, from its parameters and its batch index b): ALiBi's slope (0 without), the logit scale (1
 * without), and with mods the row's batch, head and the auxiliary tensors. Filled and read through
 * pointers: returned or passed by value, a struct makes Clang's inliner emit
 * llvm.experimental.noalias.scope.decl, which oclgrind's LLVM cannot run. */
typedef struct clattn_row_terms {
    float slope, logit_scale;
#if CLATTN_MODS_ON
    int b, h;
    __global const uchar *aux[4];
#endif
} clattn_row_terms;

inline void clattn_row_terms_of(clattn_row_terms *t, __global const float *alibi, __global const float *logit_scale,
                                ulong b, ulong h, __global const uchar *aux0, __global const uchar *aux1,
                                __global const uchar *aux2, __global const uchar *aux3)
{
    t->slope = alibi ? alibi[h] : 0.0f;
    t->logit_scale = logit_scale ? logit_scale[h] : 1.0f;
#if CLATTN_MODS_ON
    t->b = (int)b;
    t->h = (int)h;
    t->aux[0] = aux0;
    t->aux[1] = aux1;
    t->aux[2] = aux2;
    t->aux[3] = aux3;
#endif
}
#define CLATTN_ROW_TERMS(t, h)                                                                                \
    clattn_row_terms_of((t), alibi, logit_scale, b, (h), mod_aux0, mod_aux1, mod_aux2, mod_aux3)

/* Whether a call has score terms (inside a kernel: a constant false where the build has none): the
 * kernels then take their per-key path. Mods count as terms: mask_mod may hide any key. */
#define CLATTN_SCORE_TERMS_ON (softcap > 0.0f || alibi || logit_scale || CLATTN_MODS_ON)

/* The scaled dot product of key j for the query at position p with the terms that come before the
 * masks (clattn_weights_output's SOFTCAPPED scores): score_mod, times the head's logit scale, then
 * soft-capped where softcap > 0. */
inline float clattn_capped_score(float scaled, float softcap, const clattn_row_terms *t, long j, long p)
{
#if CLATTN_MODS_ON && CLATTN_SCORE_MOD
    scaled = score_mod(scaled, t->b, t->h, p, j CLATTN_MOD_ARGS(t));
#endif
    scaled *= t->logit_scale;
    if (softcap > 0.0f)
        scaled = softcap * tanh(scaled / softcap);
    return scaled;
}

/* The score of one key the built-in masks leave visible, as the softmax takes it: −inf where mask_mod
 * hides it, else in ONNX's order the capped score (clattn_capped_score), then ALiBi's slope·(j − p) and
 * the additive mask entry added. */
inline float clattn_score_terms(float scaled, float softcap, const clattn_row_terms *t, long j, long p, float mask)
{
#if CLATTN_MODS_ON && CLATTN_MASK_MOD
    if (!mask_mod(t->b, t->h, p, j CLATTN_MOD_ARGS(t)))
        return -INFINITY;
#endif
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
