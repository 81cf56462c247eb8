/* The weights output of reproducible arithmetic (-DCLATTN_EXACT=1, after cl/exact_tiles.cl; docs/reproducible.md):
 * one work-item a (key j, query row i, batch·head) pair, its score formed as the fused kernels form it —
 *   q times a power of two (clattn_score_split) and cut below 2^-40, K's row cut and scaled as the staging cuts
 *   it, the tree of 8 fma chains over d (EXACT_DOT_TREE; a key with K entries under EXACT_K_FAST cut at each step,
 *   as on the careful path), times the scale's rest and cut, then the score terms and masks —
 * so the scores are the ones the output was computed from, and then the point weights_mode names
 * (clattn_weights_output, WEIGHTS_* of cl/masks.cl): Q·Kᵀ·scale of every key, after soft-capping, what the
 * softmax takes (−inf where hidden), or the weight exp(z − lse) of the row's log-sum-exp `lse` (the forward's:
 * its sinks included), 0 where hidden; cl/exact_math.cl's exp, every value cut below FLT_MIN. Dense calls
 * (the weights output is clattn_sdpa's). Build options: DK (Dqk rounded up; the kernel reads dk of it). */
__kernel void clattn_exact_weights(CLATTN_PARAMETERS(CLATTN_EXACT_WEIGHTS_PARAMS))
{
    CLATTN_ABSENT(CLATTN_EXACT_WEIGHTS_PARAMS)
    const ulong j = get_global_id(0), i = get_global_id(1), bh = get_global_id(2);
    if (j >= kv_len || i >= q_len)
        return;
    const ulong b = bh / heads, h = bh % heads, kv_head = h / group;
    const ulong key_len = key_lengths ? key_lengths[b] : kv_len;
    __global const int *table = clattn_kv_table(block_table, table_cols, b);
    const ulong k_head = clattn_kv_base(b, kv_head, k_bs, k_hs, k_rs, k_starts, block_table);

    /* q as the fused kernels hold it (their q_row): cut, times a power of two, cut below 2^-40. */
    const ulong q_at = clattn_row_offset(q_starts, b, h, i, q_bs, q_hs, q_rs);
    float q_max = 0.0f, q_factor;
    for (ulong d = 0; d < dk; d++)
        q_max = fmax(q_max, fabs(EXACT(LOAD_Q(q, q_at + d))));
    const float factor = clattn_score_split(q_max, scale, &q_factor);
    /* Key j's K row as the staging cuts it (EXACT_ROW_PART, value by value: the same values), and whether it
     * holds an entry under EXACT_K_FAST (its partial sums then cut at each step). Every key's, hidden or not (the
     * first two modes show them all). */
    const ulong k_row = K_ROW_AT(j);
    const float ks = EXACT(K_ROW_SCALE(j));
    uint k_lowest = 0xffffffffu;
    for (ulong d = 0; d < dk; d++)
        k_lowest = min(k_lowest, LOW_BITS(CUT(EXACT(LOAD_K(k, k_row + d)) * ks, EXACT_MIN)));
    const bool careful = k_lowest < LOW_BITS(EXACT_K_FAST);
    /* The dot product's tree of 8 chains (EXACT_DOT_TREE), each step cut where careful. */
#define WEIGHTS_CHAIN(lane, X, STEP_CUT)                                                                     \
    do {                                                                                                     \
        X = 0.0f;                                                                                            \
        for (ulong d = (lane); d < dk; d += EXACT_DOT_LANES) {                                               \
            const float qd = CUT(EXACT(LOAD_Q(q, q_at + d)) * q_factor, EXACT_Q_MIN);                        \
            X = STEP_CUT(fma(qd, CUT(EXACT(LOAD_K(k, k_row + d)) * ks, EXACT_MIN), X), 0);                   \
        }                                                                                                    \
    } while (0)
#define WEIGHTS_ADD(X, Y, STEP_CUT) X = STEP_CUT(X + Y, 0)
#define WEIGHTS_KEY_CUT(f, unused) CUT(f, EXACT_MIN)
    float s, s_b, s_c, s_t;
    EXACT_DOTS(careful, s, s_b, s_c, s_t, WEIGHTS_CHAIN, WEIGHTS_ADD, WEIGHTS_KEY_CUT);
    s = EXACT(s * factor);

    clattn_row_terms terms;
    CLATTN_ROW_TERMS(&terms, h);
    const long p = clattn_query_position(causal, offsets, b, i, q_len, kv_len);
    CLATTN_ROW_AT(&terms, i, p);
    ulong begin, end;
    clattn_visible_range(causal, p, key_len, win_left, win_right, &begin, &end);
    const float z = j >= begin && j < end
                        ? EXACT(clattn_score_terms(s, softcap, &terms, (long)j, p,
                                                   EXACT(clattn_additive_mask(mask, mask_type, mask_layout, b, h, heads,
                                                                              i, j, q_len, mask_cols))))
                        : -INFINITY;
    float value;
    if (weights_mode == WEIGHTS_QK) {
        value = s;
    } else if (weights_mode == WEIGHTS_SOFTCAPPED) {
        value = EXACT(clattn_capped_score(s, softcap, &terms, (long)j, p));
    } else if (weights_mode == WEIGHTS_MASKED) {
        value = z;
    } else {
        const float row_lse = lse[clattn_matrix_offset(bh, 0, i, 1, q_len)];
        value = z == -INFINITY || row_lse == -INFINITY ? 0.0f : clattn_x_flush(clattn_x_exp(z - row_lse));
    }
    weights[clattn_matrix_offset(bh, i, j, q_len, kv_len)] = value;
}
