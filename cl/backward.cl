/* The backward pass (clattn_sdpa_backward), FlashAttention-2's way without its tiles: every weight
 * recomputed from Q, K and the forward's log-sum-exp (no L×S matrix), D_i = dO_i·O_i first, then dK and dV
 * accumulated per key and dQ per query row — each gradient row written by one work-item, its sum in a
 * fixed order (deterministic: no atomics). The scores are formed as the forward forms them (cl/masks.cl:
 * masks, windows, key lengths, ALiBi, soft-capping, logit scales, mask_mod, block masks), and
 *     dZ_ij = P_ij·(dO_i·V_j − D_i),   dS_ij = dZ_ij · ls·(1 − tanh²(S_ij·ls/c)) · scale
 * (ls the head's logit scale, c the soft-cap; S_ij the scaled score — with a score_mod, its value there,
 * and dS times score_mod_grad(S_ij), its derivative), dQ_i = Σ_j dS_ij·K_j,
 * dK_j = Σ_i dS_ij·Q_i, dV_j = Σ_i P_ij·dO_i, a K/V head's over all the query heads of its group.
 * Build options: DK and DV, the head sizes rounded up (private accumulators).
 *
 * Reproducible arithmetic (-DCLATTN_EXACT=1: these row kernels, or cl/backward_lanes.cl's with the same bits, whose
 * sums have one order whatever the launch): the exponential and tanh are cl/exact_math.cl's, and every step's result
 * is flushed from subnormal to +0 (XF), so that a device's flush mode changes nothing — and zeros are +0 whatever
 * their sign (Mesa's compiler makes fma(a, b, +0) a product, −0 where a is 0 and b negative: the sign of a zero is
 * not kept). Entries of Q, K, V, O and dO, weights P and dS below 2^-40 in magnitude count as 0 (XCUT; their
 * products would add less than 2^-40 of the gradients' scale): every other one is a multiple of 2^-63, so every
 * product of two and every sum of such products a multiple of 2^-126 — never subnormal — and the sums' steps need
 * no flush (a vector kernel then runs at nearly its default speed; here XF stays, changing nothing). */
#ifdef CLATTN_EXACT
#define XF(x) (fabs(x) < FLT_MIN ? 0.0f : (x))
#define XCUT(x) (fabs(x) < 0x1p-40f ? 0.0f : (x))
#define BACKWARD_EXP(x) clattn_x_exp(x)
#else
#define XF(x) (x)
#define XCUT(x) (x)
#define BACKWARD_EXP(x) exp(x)
#endif

/* D_r = Σ_t dO_rt·O_rt for every row r of (B, H, L). */
__kernel void clattn_backward_delta(CLATTN_PARAMETERS(CLATTN_BACKWARD_DELTA_PARAMS))
{
    CLATTN_ABSENT(CLATTN_BACKWARD_DELTA_PARAMS)
    const ulong r = get_global_id(0);
    if (r >= rows)
        return;
    float sum = 0.0f;
    for (ulong t = 0; t < dv; t++)
        sum = XF(fma(XCUT(dout[r * dv + t]), XCUT(o[r * dv + t]), sum));
    delta[r] = sum;
}

/* dst = src with its entries below 2^-40 made +0 (XCUT; a copy in the default build): Q and dO for the exact lanes
 * kernel, which then reads them as they are. */
__kernel void clattn_backward_cut(CLATTN_PARAMETERS(CLATTN_BACKWARD_CUT_PARAMS))
{
    CLATTN_ABSENT(CLATTN_BACKWARD_CUT_PARAMS)
    const ulong e = get_global_id(0);
    if (e < n)
        dst[e] = XCUT(src[e]);
}

/* Whether everything the lanes kernel multiplies is finite: K and V (n_kv elements each, a work-item an
 * element) and every row's D (finite exactly when dO and O are) and lse (NaN or +inf where Q is not
 * finite; −inf, a row that sees nothing, is fine). Any other value sets *nonfinite (the host then takes
 * the row kernels, which skip the pairs without weight one by one). */
__kernel void clattn_backward_finite(CLATTN_PARAMETERS(CLATTN_BACKWARD_FINITE_PARAMS))
{
    CLATTN_ABSENT(CLATTN_BACKWARD_FINITE_PARAMS)
    const ulong e = get_global_id(0);
    bool bad = false;
    if (e < n_k)
        bad = !isfinite(k[e]);
    if (e < n_v)
        bad |= !isfinite(v[e]);
    if (e < rows)
        bad |= !isfinite(delta[e]) || isnan(lse[e]) || lse[e] == INFINITY;
    if (bad)
        atomic_or(nonfinite, 1);
}

/* What one (query row, key) pair gives the gradients: its weight P (0 where hidden) and dS (see above),
 * from the scaled score s of the row's terms t at position p against key j. A pair whose weight is 0
 * (hidden, or too small to count) gives no gradient at all — every kernel skips it, as the reference
 * does — so a non-finite dO, Q, K or V reaches only the gradients of the pairs that carry weight. */
inline float clattn_backward_pair(float s, float softcap, const clattn_row_terms *t, long j, long p, float mask,
                                  float lse_i, float dp, float delta_i, float scale, float *ds)
{
    const float z = XF(clattn_score_terms(s, softcap, t, j, p, XF(mask)));
    if (z == -INFINITY || lse_i == -INFINITY) {
        *ds = 0.0f;
        return 0.0f;
    }
    const float weight = XCUT(BACKWARD_EXP(z - lse_i));
    if (weight == 0.0f) { /* too small to count: no gradient (not 0·(dp − D), NaN for a non-finite dO) */
        *ds = 0.0f;
        return 0.0f;
    }
    float modded = s, dz_ds = t->logit_scale;
#if CLATTN_SCORE_MOD_ON && CLATTN_SCORE_MOD_GRAD
    dz_ds = XF(dz_ds * score_mod_grad(s, t->b, t->h, p + t->p0, j + t->p0 CLATTN_MOD_ARGS(t)));
    modded = score_mod(s, t->b, t->h, p + t->p0, j + t->p0 CLATTN_MOD_ARGS(t));
#endif
    if (softcap > 0.0f) {
#ifdef CLATTN_EXACT
        const float th = clattn_x_tanh(XF(XF(modded * t->logit_scale) * clattn_x_recip(softcap)));
#else
        const float th = tanh(modded * t->logit_scale / softcap);
#endif
        dz_ds = XF(dz_ds * XF(1.0f - XF(th * th)));
    }
    *ds = XCUT(XF(XF(XF(weight * XF(dp - delta_i)) * dz_ds) * scale));
    return weight;
}

/* q_i·k_j and dO_i·v_j, the two dot products of a pair. */
inline void clattn_backward_dots(__global const float *qi, __global const float *kj, __global const float *doi,
                                 __global const float *vj, ulong dk, ulong dv, float *s, float *dp)
{
    float qk = 0.0f, ov = 0.0f;
    for (ulong t = 0; t < dk; t++)
        qk = XF(fma(XCUT(qi[t]), XCUT(kj[t]), qk));
    for (ulong t = 0; t < dv; t++)
        ov = XF(fma(XCUT(doi[t]), XCUT(vj[t]), ov));
    *s = qk, *dp = ov;
}

/* dK_j and dV_j of one key row j of one (batch, K/V head): over the query rows of the group's heads that
 * see it. */
__kernel void clattn_backward_dkdv(CLATTN_PARAMETERS(CLATTN_BACKWARD_PARAMS))
{
    CLATTN_ABSENT(CLATTN_BACKWARD_PARAMS)
    const ulong j = get_global_id(0), bg = get_global_id(1), kv_heads = heads / group;
    if (j >= kv_len || bg >= batch * kv_heads)
        return;
    const ulong b = bg / kv_heads, g = bg % kv_heads, key_len = key_lengths ? key_lengths[b] : kv_len;
    __global const float *kj = k + (bg * kv_len + j) * dk, *vj = v + (bg * kv_len + j) * dv;
    float dk_acc[DK], dv_acc[DV];
    for (int t = 0; t < DK; t++)
        dk_acc[t] = 0.0f;
    for (int t = 0; t < DV; t++)
        dv_acc[t] = 0.0f;
    for (ulong hh = 0; hh < group && j < key_len; hh++) {
        const ulong h = g * group + hh;
        clattn_row_terms terms;
        CLATTN_ROW_TERMS(&terms, h);
        for (ulong i = 0; i < q_len; i++) {
            const long p = clattn_query_position(causal, offsets, b, i, q_len, kv_len);
            ulong begin, end;
            clattn_visible_range(causal, p, key_len, win_left, win_right, &begin, &end);
            if (j < begin || j >= end)
                continue;
            CLATTN_ROW_AT(&terms, i, p);
            if (clattn_block_hides(&terms, (long)j)) /* (no weight: the dot products are not formed) */
                continue;
            const ulong row = (b * heads + h) * q_len + i;
            __global const float *qi = q + row * dk, *doi = dout + row * dv;
            float s, dp, ds;
            clattn_backward_dots(qi, kj, doi, vj, dk, dv, &s, &dp);
            const float weight = clattn_backward_pair(
                XF(s * scale), softcap, &terms, (long)j, p,
                clattn_additive_mask(mask, mask_type, mask_layout, b, h, heads, i, j, q_len, mask_cols), XF(lse[row]), dp,
                delta[row], scale, &ds);
            if (weight == 0.0f)
                continue;
            for (ulong t = 0; t < dv; t++)
                dv_acc[t] = XF(fma(weight, XCUT(doi[t]), dv_acc[t]));
            for (ulong t = 0; t < dk; t++)
                dk_acc[t] = XF(fma(ds, XCUT(qi[t]), dk_acc[t]));
        }
    }
    for (ulong t = 0; t < dk; t++)
        grad_k[(bg * kv_len + j) * dk + t] = dk_acc[t];
    for (ulong t = 0; t < dv; t++)
        grad_v[(bg * kv_len + j) * dv + t] = dv_acc[t];
}

/* dQ_i of one query row (b, h, i): over the keys it sees. */
__kernel void clattn_backward_dq(CLATTN_PARAMETERS(CLATTN_BACKWARD_PARAMS))
{
    CLATTN_ABSENT(CLATTN_BACKWARD_PARAMS)
    const ulong i = get_global_id(0), bh = get_global_id(1), kv_heads = heads / group;
    if (i >= q_len || bh >= batch * heads)
        return;
    const ulong b = bh / heads, h = bh % heads, bg = b * kv_heads + h / group, row = bh * q_len + i;
    const ulong key_len = key_lengths ? key_lengths[b] : kv_len;
    const long p = clattn_query_position(causal, offsets, b, i, q_len, kv_len);
    ulong begin, end;
    clattn_visible_range(causal, p, key_len, win_left, win_right, &begin, &end);
    clattn_row_terms terms;
    CLATTN_ROW_TERMS(&terms, h);
    CLATTN_ROW_AT(&terms, i, p);
    __global const float *qi = q + row * dk, *doi = dout + row * dv;
    const float lse_i = XF(lse[row]), delta_i = delta[row];
    float dq_acc[DK];
    for (int t = 0; t < DK; t++)
        dq_acc[t] = 0.0f;
    for (ulong j = begin; j < end; j++) {
        if (clattn_block_hides(&terms, (long)j))
            continue;
        __global const float *kj = k + (bg * kv_len + j) * dk, *vj = v + (bg * kv_len + j) * dv;
        float s, dp, ds;
        clattn_backward_dots(qi, kj, doi, vj, dk, dv, &s, &dp);
        const float weight = clattn_backward_pair(
            XF(s * scale), softcap, &terms, (long)j, p,
            clattn_additive_mask(mask, mask_type, mask_layout, b, h, heads, i, j, q_len, mask_cols), lse_i, dp,
            delta_i, scale, &ds);
        if (weight == 0.0f)
            continue;
        for (ulong t = 0; t < dk; t++)
            dq_acc[t] = XF(fma(ds, XCUT(kj[t]), dq_acc[t]));
    }
    for (ulong t = 0; t < dk; t++)
        grad_q[row * dk + t] = dq_acc[t];
}
