/* Every mask kind, and the one rule of which keys a query row may see: used by the staged kernels and
 * the fused one alike. To add a mask kind: its constant here and its part of clattn_visible_end (for
 * masks that hide a range of keys) or clattn_additive_mask (for values added to the scores), its
 * arguments in src/masks.c (masks_kernel_args), and its checks and upload beside them. */

/* Mask kinds, as in clattn.h's clattn_causal and clattn_mask_layout. */
#define CAUSAL_NONE 0
#define CAUSAL_TOP_LEFT 1
#define CAUSAL_BOTTOM_RIGHT 2
#define MASK_NONE 0
#define MASK_L_S 1
#define MASK_B_H_L_S 2

/* Keys [0, end) are visible to query row i; keys from `end` on are hidden by the causal rule or the
 * batch's key length. Visibility only grows with i, which lets the fused kernel bound a whole group's
 * walk by its last row. */
inline ulong clattn_visible_end(int causal, ulong i, ulong q_len, ulong kv_len, ulong key_len)
{
    ulong end = key_len;
    if (causal == CAUSAL_TOP_LEFT)
        end = min(end, i + 1);
    else if (causal == CAUSAL_BOTTOM_RIGHT) /* key j visible iff j <= i + S - L, without going negative */
        end = i + kv_len + 1 > q_len ? min(end, i + kv_len + 1 - q_len) : 0;
    return end;
}

/* True when key j is hidden from query row i. */
inline bool clattn_key_masked(int causal, ulong i, ulong j, ulong q_len, ulong kv_len, ulong key_len)
{
    return j >= clattn_visible_end(causal, i, q_len, kv_len, key_len);
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
