/* A block mask's states from the caller's mask_mod (clattn_block_mask_create): one work-item per block
 * of block_q query positions × block_k keys of one (batch, head) — BLOCK_EMPTY where mask_mod hides every
 * pair, BLOCK_FULL where it shows every one, BLOCK_PARTIAL otherwise. Positions past q_len and keys past
 * kv_len are no pairs. The walk stops as soon as the block has shown both kinds. */
__kernel void clattn_block_mask_build(CLATTN_PARAMETERS(CLATTN_BLOCK_MASK_BUILD_PARAMS))
{
    CLATTN_ABSENT(CLATTN_BLOCK_MASK_BUILD_PARAMS)
    const ulong kb = get_global_id(0), qb = get_global_id(1), bh = get_global_id(2);
    if (kb >= kblocks || qb >= qblocks || bh >= batch * heads)
        return;
    clattn_row_terms t; /* (only its batch, head and auxiliary tensors: what CLATTN_MOD_ARGS reads) */
    const ulong b = bh / heads;
    clattn_row_terms_of(&t, 0, 0, b, bh % heads, mod_aux0, mod_aux1, mod_aux2, mod_aux3, 0, 0);
    bool shown = false, hidden = false;
    const ulong q_end = min((qb + 1) * block_q, q_len), k_end = min((kb + 1) * block_k, kv_len);
    for (ulong q = qb * block_q; q < q_end && !(shown && hidden); q++)
        for (ulong k = kb * block_k; k < k_end && !(shown && hidden); k++) {
#if CLATTN_MASK_MOD_ON
            const bool visible = mask_mod(t.b, t.h, (long)q, (long)k CLATTN_MOD_ARGS(&t));
#else
            const bool visible = true;
#endif
            shown |= visible;
            hidden |= !visible;
        }
    states[(bh * qblocks + qb) * kblocks + kb] = !shown ? BLOCK_EMPTY : hidden ? BLOCK_PARTIAL : BLOCK_FULL;
}
