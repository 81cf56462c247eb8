/* The backward pass's staged variant (desc.algorithm CLATTN_ALGORITHM_STAGED): the weights P and their
 * gradients dS materialised as (B, H, L, S) matrices, one work-item an element, then the three products
 * over them, one work-item a gradient element — the formulas of cl/backward.cl, in the plainest order:
 * the reference path, and for small shapes a grid with an element per work-item. */

/* P_ij and dS_ij of one (batch·head, query row i, key j). */
__kernel void clattn_backward_staged_weights(CLATTN_PARAMETERS(CLATTN_BACKWARD_STAGED_PARAMS))
{
    CLATTN_ABSENT(CLATTN_BACKWARD_STAGED_PARAMS)
    const ulong j = get_global_id(0), i = get_global_id(1), bh = get_global_id(2), kv_heads = heads / group;
    if (j >= kv_len || i >= q_len || bh >= batch * heads)
        return;
    const ulong b = bh / heads, h = bh % heads, bg = b * kv_heads + h / group, row = bh * q_len + i;
    const ulong key_len = key_lengths ? key_lengths[b] : kv_len;
    const long p = clattn_query_position(causal, offsets, b, i, q_len, kv_len);
    ulong begin, end;
    clattn_visible_range(causal, p, key_len, win_left, win_right, &begin, &end);
    float weight = 0.0f, ds = 0.0f;
    if (j >= begin && j < end) {
        clattn_row_terms terms;
        CLATTN_ROW_TERMS(&terms, h);
        CLATTN_ROW_AT(&terms, i, p);
        float s, dp;
        clattn_backward_dots(q + row * dk, k + (bg * kv_len + j) * dk, dout + row * dv, v + (bg * kv_len + j) * dv,
                             dk, dv, &s, &dp);
        weight = clattn_backward_pair(s * scale, softcap, &terms, (long)j, p,
                                      clattn_additive_mask(mask, mask_type, mask_layout, b, h, heads, i, j, q_len,
                                                           mask_cols),
                                      lse[row], dp, delta[row], scale, &ds);
    }
    probs[row * kv_len + j] = weight;
    dscores[row * kv_len + j] = ds;
}

/* dQ_i[t] = Σ_j dS_ij·K_j[t]. */
__kernel void clattn_backward_staged_dq(CLATTN_PARAMETERS(CLATTN_BACKWARD_STAGED_PARAMS))
{
    CLATTN_ABSENT(CLATTN_BACKWARD_STAGED_PARAMS)
    const ulong t = get_global_id(0), i = get_global_id(1), bh = get_global_id(2), kv_heads = heads / group;
    if (t >= dk || i >= q_len || bh >= batch * heads)
        return;
    const ulong b = bh / heads, bg = b * kv_heads + bh % heads / group, row = bh * q_len + i;
    float sum = 0.0f;
    for (ulong j = 0; j < kv_len; j++)
        if (probs[row * kv_len + j] != 0.0f) /* pairs without weight give nothing (not 0·K, NaN for a NaN K) */
            sum = fma(dscores[row * kv_len + j], k[(bg * kv_len + j) * dk + t], sum);
    grad_q[row * dk + t] = sum;
}

/* dK_j[t] = Σ_{h of the group, i} dS_ij·Q_i[t] and dV_j[t] = Σ P_ij·dO_i[t]. */
__kernel void clattn_backward_staged_dkdv(CLATTN_PARAMETERS(CLATTN_BACKWARD_STAGED_PARAMS))
{
    CLATTN_ABSENT(CLATTN_BACKWARD_STAGED_PARAMS)
    const ulong t = get_global_id(0), j = get_global_id(1), bg = get_global_id(2), kv_heads = heads / group;
    if (t >= max(dk, dv) || j >= kv_len || bg >= batch * kv_heads)
        return;
    const ulong b = bg / kv_heads, g = bg % kv_heads;
    float sum_k = 0.0f, sum_v = 0.0f;
    for (ulong hh = 0; hh < group; hh++) {
        const ulong bh = b * heads + g * group + hh;
        for (ulong i = 0; i < q_len; i++) {
            const ulong row = bh * q_len + i, at = row * kv_len + j;
            if (probs[at] == 0.0f)
                continue; /* no weight, no gradient (not 0·dO, NaN for a NaN dO) */
            if (t < dk)
                sum_k = fma(dscores[at], q[row * dk + t], sum_k);
            if (t < dv)
                sum_v = fma(probs[at], dout[row * dv + t], sum_v);
        }
    }
    if (t < dk)
        grad_k[(bg * kv_len + j) * dk + t] = sum_k;
    if (t < dv)
        grad_v[(bg * kv_len + j) * dv + t] = sum_v;
}
