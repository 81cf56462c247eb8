/* The gradients of top-k sparse attention (clattn_sdpa_sparse_backward), FlashAttention-2's way on the selected
 * pairs only: every weight recomputed from Q, K and the forward's log-sum-exp, then
 *     dS_ij = P_ij·(dO_i·V_j − D_i)·(1 − tanh²(S_ij/c))·scale    (D_i = dO_i·O_i, c the soft-cap, if any),
 *     dQ_i = Σ_j dS_ij·K_j over the keys row i selected (a key selected twice counts twice),
 *     dK_j = Σ_i dS_ij·Q_i and dV_j = Σ_i P_ij·dO_i over the rows (every head of a K/V head's group) that
 *     selected key j — found through key_starts/key_rows, each sequence's keys' lists of rows in ascending order.
 * Each gradient row is written by one work-item, its sum in a fixed order: the same inputs give the same bits, and
 * no atomics. The cost is the selected pairs', not L × S. Float32 tensors; build options DK and DV, the head sizes
 * rounded up (private accumulators). */

/* What a selected pair gives: its weight P (0: none, and no gradient — a NaN or inf elsewhere reaches only the
 * pairs that carry weight, as in cl/backward.cl) and dS, from the pair's two dot products. */
inline float clattn_sparse_pair(float qk, float dp, float scale, float softcap, float lse_i, float delta_i, float *ds)
{
    float s = qk * scale, dz_ds = 1.0f;
    if (softcap > 0.0f) {
        const float th = tanh(s / softcap);
        s = softcap * th;
        dz_ds = 1.0f - th * th;
    }
    const float weight = lse_i == -INFINITY ? 0.0f : exp(s - lse_i);
    *ds = weight == 0.0f ? 0.0f : weight * (dp - delta_i) * dz_ds * scale;
    return weight;
}

/* x·y over n floats. */
inline float clattn_sparse_dot(__global const float *x, __global const float *y, ulong n)
{
    float sum = 0.0f;
    for (ulong t = 0; t < n; t++)
        sum = fma(x[t], y[t], sum);
    return sum;
}

/* dQ_i of query row (b, h, i) over the keys it selected, and its D_i (for the dK/dV kernel, launched after). */
__kernel void clattn_sparse_backward_dq(CLATTN_PARAMETERS(CLATTN_SPARSE_BACKWARD_PARAMS))
{
    CLATTN_ABSENT(CLATTN_SPARSE_BACKWARD_PARAMS)
    const ulong i = get_global_id(0), bh = get_global_id(1);
    if (i >= q_len || bh >= batch * heads)
        return;
    const ulong b = bh / heads, g = bh % heads / group, row = bh * q_len + i;
    const ulong key_len = key_lengths ? key_lengths[b] : kv_len;
    __global const float *qi = q + row * dk, *doi = dout + row * dv;
    const float delta_i = clattn_sparse_dot(doi, o + row * dv, dv), lse_i = lse[row];
    delta[row] = delta_i;
    float acc[DK];
    for (int t = 0; t < DK; t++)
        acc[t] = 0.0f;
    __global const int *selected = indices + (b * q_len + i) * top_k;
    for (ulong t = 0; t < top_k; t++) {
        const int j = selected[t];
        if (j < 0 || (ulong)j >= key_len)
            continue;
        const ulong kv_row = (b * (heads / group) + g) * kv_len + (ulong)j;
        __global const float *kj = k + kv_row * dk;
        float ds;
        const float weight = clattn_sparse_pair(clattn_sparse_dot(qi, kj, dk),
                                                clattn_sparse_dot(doi, v + kv_row * dv, dv), scale, softcap, lse_i,
                                                delta_i, &ds);
        if (weight == 0.0f)
            continue;
        for (ulong e = 0; e < dk; e++)
            acc[e] = fma(ds, kj[e], acc[e]);
    }
    for (ulong e = 0; e < dk; e++)
        grad_q[row * dk + e] = acc[e];
}

/* dK_j and dV_j of key j of (batch b, K/V head g), over the query rows that selected it (key_rows[key_starts[·]
 * …], a row once for each time it selected j), each with the group's query heads. */
__kernel void clattn_sparse_backward_dkdv(CLATTN_PARAMETERS(CLATTN_SPARSE_BACKWARD_PARAMS))
{
    CLATTN_ABSENT(CLATTN_SPARSE_BACKWARD_PARAMS)
    const ulong j = get_global_id(0), bg = get_global_id(1), kv_heads = heads / group;
    if (j >= kv_len || bg >= batch * kv_heads)
        return;
    const ulong b = bg / kv_heads, g = bg % kv_heads, kv_row = bg * kv_len + j;
    __global const float *kj = k + kv_row * dk, *vj = v + kv_row * dv;
    float dk_acc[DK], dv_acc[DV];
    for (int t = 0; t < DK; t++)
        dk_acc[t] = 0.0f;
    for (int t = 0; t < DV; t++)
        dv_acc[t] = 0.0f;
    const ulong first = key_starts[b * (kv_len + 1) + j], last = key_starts[b * (kv_len + 1) + j + 1];
    for (ulong e = first; e < last; e++) {
        const ulong i = key_rows[e];
        for (ulong hh = 0; hh < group; hh++) {
            const ulong row = (b * heads + g * group + hh) * q_len + i;
            __global const float *qi = q + row * dk, *doi = dout + row * dv;
            float ds;
            const float weight = clattn_sparse_pair(clattn_sparse_dot(qi, kj, dk), clattn_sparse_dot(doi, vj, dv),
                                                    scale, softcap, lse[row], delta[row], &ds);
            if (weight == 0.0f)
                continue;
            for (ulong t = 0; t < dv; t++)
                dv_acc[t] = fma(weight, doi[t], dv_acc[t]);
            for (ulong t = 0; t < dk; t++)
                dk_acc[t] = fma(ds, qi[t], dk_acc[t]);
        }
    }
    for (ulong t = 0; t < dk; t++)
        grad_k[kv_row * dk + t] = dk_acc[t];
    for (ulong t = 0; t < dv; t++)
        grad_v[kv_row * dv + t] = dv_acc[t];
}
