/* Reproducible attention (desc.arithmetic = CLATTN_ARITHMETIC_REPRODUCIBLE; issue 41): the same bits on every
 * conforming OpenCL implementation, tuning and batch. One work-item computes one query row (packed row ρ of a
 * (batch, K/V head): query ρ / group of query head kv_head·group + ρ % group, as the fused kernel packs them) and
 * nothing else, so a row never depends on its neighbours, the work-group size or the launch:
 *   s_j   = (Σ_d q_d·k_jd, d ascending, each step an fma) · factor      (q and factor: clattn_score_split)
 *   z_j   = the score's terms (cl/masks.cl: logit scale, soft-capping through clattn_x_tanh, ALiBi, masks)
 *   keys j ascending over the visible range, an online softmax: where z_j passes the maximum m, what the row
 *   holds is rescaled by clattn_x_exp(m − z_j); p_j = clattn_x_exp(z_j − m); l += p_j; acc_d = fma(p_j, v_jd, acc_d)
 *   out_d = acc_d · factor · clattn_x_recip(l'), lse = m' + clattn_x_log(l')   (l', m': with the sink)
 * Every value read (Q, K, V, a mask's entry) and every sum's step is flushed from subnormal to zero
 * (clattn_x_flush), so a device's flush mode changes nothing; contraction is off for the whole program
 * (cl/exact_math.cl comes first). Parameters: the fused kernel's (cl/params.h, CLATTN_FLASH_PARAMS; `tiles` is
 * NULL); dim 1 of the launch is the (batch, K/V head) pairs, exactly; build options DK and DV, the head sizes. */

/* (K and V rows: cl/common.cl's K_ROW_AT and K_ROW_SCALE.) */

__kernel void clattn_reproducible(CLATTN_PARAMETERS(CLATTN_FLASH_PARAMS))
{
    CLATTN_ABSENT(CLATTN_FLASH_PARAMS)
    const ulong kv_heads = heads / group, rho = get_global_id(0), bg = get_global_id(1); /* (dim 1: exact) */
    const ulong b = bg / kv_heads, kv_head = bg % kv_heads;
    const ulong packed_rows = (q_starts ? q_starts[b + 1] - q_starts[b] : q_len) * group;
    if (rho >= packed_rows)
        return;
    const ulong i = rho / group, h = kv_head * group + rho % group;
    const ulong key_len = key_lengths ? key_lengths[b] : kv_len;
    __global const int *table = clattn_kv_table(block_table, table_cols, b);
    const ulong k_head = clattn_kv_base(b, kv_head, k_bs, k_hs, k_rs, k_starts, block_table);
    const ulong v_head = clattn_kv_base(b, kv_head, v_bs, v_hs, v_rs, k_starts, block_table);

    /* (q is read again for each key: each read gives the same value.) */
    float acc[DV];
    float q_max = 0.0f, q_factor;
    const ulong q_at = clattn_row_offset(q_starts, b, h, i, q_bs, q_hs, q_rs);
    for (int d = 0; d < DK; d++)
        q_max = fmax(q_max, fabs(clattn_x_flush(LOAD_Q(q, q_at + d))));
    const float score_factor = clattn_score_split(q_max, scale, &q_factor);
#define Q_AT(d) clattn_x_flush(clattn_x_flush(LOAD_Q(q, q_at + (d))) * q_factor)
    for (int d = 0; d < DV; d++)
        acc[d] = 0.0f;
    clattn_row_terms terms;
    CLATTN_ROW_TERMS(&terms, h);
    const long p = clattn_query_position(causal, offsets, b, i, q_len, kv_len);
    CLATTN_ROW_AT(&terms, i, p);
    ulong begin, end;
    clattn_visible_range(causal, p, key_len, win_left, win_right, &begin, &end);

    float m = -INFINITY, l = 0.0f;
    for (ulong j = begin; j < end; j++) {
        if (clattn_block_hides(&terms, (long)j))
            continue;
        const ulong k_row = K_ROW_AT(j), v_row = V_ROW_AT(j);
        const float ks = K_ROW_SCALE(j), vs = V_ROW_SCALE(j);
        float dot = 0.0f;
        for (int d = 0; d < DK; d++)
            dot = clattn_x_flush(fma(Q_AT(d), clattn_x_flush(LOAD_K(k, k_row + d) * ks), dot));
        const float mask_entry = clattn_x_flush(
            clattn_additive_mask(mask, mask_type, mask_layout, b, h, heads, i, j, q_len, mask_cols));
        const float z = clattn_x_flush(clattn_score_terms(clattn_x_flush(dot * score_factor), softcap, &terms,
                                                          (long)j, p, mask_entry));
        if (z == -INFINITY)
            continue;
        if (z > m) { /* a new maximum: what the row holds is rescaled to it (from −inf: by 0) */
            const float alpha = clattn_x_exp(m - z);
            l = clattn_x_flush(l * alpha);
            for (int d = 0; d < DV; d++)
                acc[d] = clattn_x_flush(acc[d] * alpha);
            m = z;
        }
        const float w = clattn_x_exp(z - m); /* (NaN for a NaN score: the row becomes NaN, as on every path) */
        l = clattn_x_flush(l + w);
        for (int d = 0; d < DV; d++)
            acc[d] = clattn_x_flush(fma(w, clattn_x_flush(LOAD_V(v, v_row + d) * vs), acc[d]));
    }

    /* The row's end, clattn_row_finish's arithmetic with the exact functions: the sink joins the denominator. */
    const float sink = sinks ? sinks[h] : -INFINITY;
    const bool empty = l == 0.0f;
    float top = m, sum = l, factor = 1.0f;
    if (sink > top) {
        factor = clattn_x_exp(top - sink);
        sum = clattn_x_flush(sum * factor) + 1.0f;
        top = sink;
    } else if (sink != -INFINITY) {
        sum = sum + clattn_x_exp(sink - top);
    }
    const float inv = empty ? 0.0f : clattn_x_flush(factor * clattn_x_recip(sum));
    const ulong o_at = clattn_row_offset(q_starts, b, h, i, o_bs, o_hs, o_rs);
    for (int d = 0; d < DV; d++)
        STORE_O(clattn_x_flush(acc[d] * inv), o, o_at + d);
    if (lse)
        lse[q_starts ? (q_starts[b] + i) * heads + h : clattn_matrix_offset(b * heads + h, 0, i, 1, q_len)] =
            empty ? sink : clattn_x_flush(top + clattn_x_log(sum));
}
