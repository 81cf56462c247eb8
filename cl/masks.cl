/* Every mask kind, and the one rule of which keys a query row may see and what its scores become: used
 * by the staged kernels and the fused one alike. To add a mask kind: its constant here and its part of
 * clattn_visible_range (for masks that hide a range of keys) or clattn_score_terms /
 * clattn_additive_mask (for values added to the scores), its arguments in src/masks.c
 * (masks_kernel_args), and its checks and upload beside them. */

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

/* The score of one visible key as the softmax takes it, in ONNX's order: the scaled dot product
 * soft-capped (softcap > 0), then ALiBi's slope·(j − p) and the additive mask entry added. */
inline float clattn_score_terms(float scaled, float softcap, float alibi_slope, long j, long p, float mask)
{
    if (softcap > 0.0f)
        scaled = softcap * tanh(scaled / softcap);
    return scaled + alibi_slope * (float)(j - p) + mask;
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
