/* A block mask's states from the caller's mask_mod (clattn_block_mask_create): one work-item per block
 * of block_q query positions × block_k keys of one (batch, head) — BLOCK_EMPTY where mask_mod hides every
 * pair, BLOCK_FULL where it shows every one, BLOCK_PARTIAL otherwise. Positions past q_len and keys past
 * kv_len are no pairs. Row by row, each row's keys in a loop with no exit inside, which the compiler
 * vectorises (4.5× the pairs a second of a walk that tested for its end at every pair: 6.6·10⁹ against
 * 1.46·10⁹ on two cores); the walk stops between rows once the block has shown both kinds. */
__kernel void clattn_block_mask_build(CLATTN_PARAMETERS(CLATTN_BLOCK_MASK_BUILD_PARAMS))
{
    CLATTN_ABSENT(CLATTN_BLOCK_MASK_BUILD_PARAMS)
    const ulong kb = get_global_id(0), qb = get_global_id(1), bh = get_global_id(2);
    if (kb >= kblocks || qb >= qblocks || bh >= batch * heads)
        return;
    clattn_row_terms t; /* (only its batch, head and auxiliary tensors: what CLATTN_MOD_ARGS reads) */
    const ulong b = bh / heads;
    clattn_row_terms_of(&t, 0, 0, b, bh % heads, mod_aux0, mod_aux1, mod_aux2, mod_aux3, 0, 0);
    int shown = 0, hidden = 0;
    const long q_end = min((qb + 1) * block_q, q_len), k_begin = kb * block_k, k_end = min((kb + 1) * block_k, kv_len);
    for (long q = qb * block_q; q < q_end && !(shown && hidden); q++) {
        /* A row's keys without an exit inside (the compiler may then evaluate several keys at once); the
         * walk stops between rows once the block has shown both kinds. */
        int row_shown = 0, row_hidden = 0;
        for (long k = k_begin; k < k_end; k++) {
#if CLATTN_MASK_MOD_ON
            const int visible = mask_mod(t.b, t.h, q, k CLATTN_MOD_ARGS(&t)) ? 1 : 0;
#else
            const int visible = 1;
#endif
            row_shown |= visible;
            row_hidden |= visible ^ 1;
        }
        shown |= row_shown;
        hidden |= row_hidden;
    }
    states[(bh * qblocks + qb) * kblocks + kb] = !shown ? BLOCK_EMPTY : hidden ? BLOCK_PARTIAL : BLOCK_FULL;
}
