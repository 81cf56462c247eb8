/* Shared by every clattn kernel. The files of cl/ are concatenated into one program in the order
 * program.c lists them, so this file comes first.
 *
 * Sizes and offsets are ulong: a (B,H,L,S) weight tensor can pass 2^31 elements. */

/* Mask kinds, as in clattn.h's clattn_causal and clattn_mask_layout. */
#define CAUSAL_NONE 0
#define CAUSAL_TOP_LEFT 1
#define CAUSAL_BOTTOM_RIGHT 2
#define MASK_NONE 0
#define MASK_L_S 1
#define MASK_B_H_L_S 2

/* Element offsets, all in ulong: a (B,H,L,S) weight tensor, or a strided view of a large layer, can
 * pass 2^31 elements, where an int index would wrap. tests/test_offsets.c checks these functions on
 * the device against 64-bit host arithmetic. */

/* Row i of head h of batch b in a view with element strides (bs, hs, rs). */
inline ulong clattn_view_offset(ulong b, ulong h, ulong i, ulong bs, ulong hs, ulong rs)
{
    return b * bs + h * hs + i * rs;
}

/* Entry (i, j) of matrix m in a stack of dense (rows, cols) matrices: scores, weights, masks. */
inline ulong clattn_matrix_offset(ulong m, ulong i, ulong j, ulong rows, ulong cols)
{
    return (m * rows + i) * cols + j;
}

/* True when key j is hidden from query i by the causal rule or the batch's key length. */
inline bool clattn_key_masked(int causal, ulong i, ulong j, ulong q_len, ulong kv_len, ulong key_len)
{
    if (j >= key_len)
        return true;
    if (causal == CAUSAL_TOP_LEFT)
        return j > i;
    if (causal == CAUSAL_BOTTOM_RIGHT)
        return j + q_len > i + kv_len; /* j > i + S - L without going negative */
    return false;
}

/* The additive mask entry for (batch-head bh, query i, key j), 0 without a mask. */
inline float clattn_additive_mask(__global const float *mask, int layout, ulong bh, ulong i, ulong j,
                                  ulong q_len, ulong kv_len)
{
    if (layout == MASK_L_S)
        return mask[clattn_matrix_offset(0, i, j, q_len, kv_len)];
    if (layout == MASK_B_H_L_S)
        return mask[clattn_matrix_offset(bh, i, j, q_len, kv_len)];
    return 0.0f;
}
