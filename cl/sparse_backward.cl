/* The gradients of top-k sparse attention (clattn_sdpa_sparse_backward), FlashAttention-2's way on the selected
 * pairs only: every weight recomputed from Q, K and the forward's log-sum-exp, then
 *     dS_ij = P_ij·(dO_i·V_j − D_i)·(1 − tanh²(S_ij/c))·scale    (D_i = dO_i·O_i, c the soft-cap, if any),
 *     dQ_i = Σ_j dS_ij·K_j over the keys row i selected (a key selected twice counts twice),
 *     dK_j = Σ_i dS_ij·Q_i and dV_j = Σ_i P_ij·dO_i over the rows (every head of a K/V head's group) that
 *     selected key j — found through key_starts/key_rows, each sequence's keys' lists of rows in ascending order.
 * Each gradient row is written by one work-item, its sum in a fixed order: the same inputs give the same bits, and
 * no atomics. The cost is the selected pairs', not L × S. As in cl/sparse.cl a work-item takes the ROWS query heads
 * of a K/V head together (a K or V row read once for all of them), VEC values a vector. Float32 tensors; build
 * options ROWS, VEC, DK and DV (the head sizes, multiples of VEC). */

#define DKV (DK / VEC)
#define DVV (DV / VEC)

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

/* dQ of query row i of batch b for the ROWS heads of K/V head g, over the keys the row selected; and each head's
 * D_i (for the dK/dV kernel, launched after). */
__kernel void clattn_sparse_backward_dq(CLATTN_PARAMETERS(CLATTN_SPARSE_BACKWARD_PARAMS))
{
    CLATTN_ABSENT(CLATTN_SPARSE_BACKWARD_PARAMS)
    const ulong kv_heads = heads / ROWS, w = get_global_id(0);
    if (w >= batch * q_len * kv_heads)
        return;
    const ulong g = w % kv_heads, bi = w / kv_heads, b = bi / q_len, i = bi % q_len;
    const ulong key_len = key_lengths ? key_lengths[b] : kv_len;
    vec_t qr[ROWS][DKV], dor[ROWS][DVV], acc[ROWS][DKV];
    float lse_r[ROWS], delta_r[ROWS];
    UNROLL for (int r = 0; r < ROWS; r++) {
        const ulong row = (b * heads + g * ROWS + r) * q_len + i;
        vec_t d = (vec_t)0.0f;
        UNROLL for (int c = 0; c < DKV; c++) {
            qr[r][c] = VLOAD(q + row * DK + c * VEC);
            acc[r][c] = (vec_t)0.0f;
        }
        UNROLL for (int c = 0; c < DVV; c++) {
            dor[r][c] = VLOAD(dout + row * DV + c * VEC);
            d = fma(dor[r][c], VLOAD(o + row * DV + c * VEC), d);
        }
        delta_r[r] = HSUM(d);
        delta[row] = delta_r[r];
        lse_r[r] = lse[row];
    }
    __global const int *selected = indices + bi * top_k;
    for (ulong t = 0; t < top_k; t++) {
        const int j = selected[t];
        if (j < 0 || (ulong)j >= key_len)
            continue;
        const ulong kv_row = (b * kv_heads + g) * kv_len + (ulong)j;
        vec_t kc[DKV], qk[ROWS], dp[ROWS];
        UNROLL for (int r = 0; r < ROWS; r++)
            qk[r] = dp[r] = (vec_t)0.0f;
        UNROLL for (int c = 0; c < DKV; c++) {
            kc[c] = VLOAD(k + kv_row * DK + c * VEC);
            UNROLL for (int r = 0; r < ROWS; r++)
                qk[r] = fma(qr[r][c], kc[c], qk[r]);
        }
        UNROLL for (int c = 0; c < DVV; c++) {
            const vec_t vc = VLOAD(v + kv_row * DV + c * VEC);
            UNROLL for (int r = 0; r < ROWS; r++)
                dp[r] = fma(dor[r][c], vc, dp[r]);
        }
        UNROLL for (int r = 0; r < ROWS; r++) {
            float ds;
            if (clattn_sparse_pair(HSUM(qk[r]), HSUM(dp[r]), scale, softcap, lse_r[r], delta_r[r], &ds) == 0.0f)
                continue;
            UNROLL for (int c = 0; c < DKV; c++)
                acc[r][c] = fma((vec_t)ds, kc[c], acc[r][c]);
        }
    }
    UNROLL for (int r = 0; r < ROWS; r++) {
        const ulong row = (b * heads + g * ROWS + r) * q_len + i;
        UNROLL for (int c = 0; c < DKV; c++)
            VSTORE(acc[r][c], grad_q + row * DK + c * VEC);
    }
}

/* dK_j and dV_j of key j of (batch b, K/V head g), over the query rows that selected it (key_rows[key_starts[·]
 * …], a row once for each time it selected j), each with the group's ROWS query heads. */
__kernel void clattn_sparse_backward_dkdv(CLATTN_PARAMETERS(CLATTN_SPARSE_BACKWARD_PARAMS))
{
    CLATTN_ABSENT(CLATTN_SPARSE_BACKWARD_PARAMS)
    const ulong kv_heads = heads / ROWS, w = get_global_id(0);
    if (w >= batch * kv_heads * kv_len)
        return;
    const ulong j = w % kv_len, bg = w / kv_len, b = bg / kv_heads, g = bg % kv_heads, kv_row = bg * kv_len + j;
    vec_t kc[DKV], vc[DVV], dk_acc[DKV], dv_acc[DVV];
    UNROLL for (int c = 0; c < DKV; c++) {
        kc[c] = VLOAD(k + kv_row * DK + c * VEC);
        dk_acc[c] = (vec_t)0.0f;
    }
    UNROLL for (int c = 0; c < DVV; c++) {
        vc[c] = VLOAD(v + kv_row * DV + c * VEC);
        dv_acc[c] = (vec_t)0.0f;
    }
    const ulong first = key_starts[b * (kv_len + 1) + j], last = key_starts[b * (kv_len + 1) + j + 1];
    for (ulong e = first; e < last; e++) {
        const ulong i = key_rows[e];
        UNROLL for (int r = 0; r < ROWS; r++) {
            const ulong row = (b * heads + g * ROWS + r) * q_len + i;
            __global const float *qi = q + row * DK, *doi = dout + row * DV;
            vec_t qk = (vec_t)0.0f, dp = (vec_t)0.0f;
            UNROLL for (int c = 0; c < DKV; c++)
                qk = fma(VLOAD(qi + c * VEC), kc[c], qk);
            UNROLL for (int c = 0; c < DVV; c++)
                dp = fma(VLOAD(doi + c * VEC), vc[c], dp);
            float ds;
            const float weight = clattn_sparse_pair(HSUM(qk), HSUM(dp), scale, softcap, lse[row], delta[row], &ds);
            if (weight == 0.0f)
                continue;
            UNROLL for (int c = 0; c < DVV; c++)
                dv_acc[c] = fma((vec_t)weight, VLOAD(doi + c * VEC), dv_acc[c]);
            UNROLL for (int c = 0; c < DKV; c++)
                dk_acc[c] = fma((vec_t)ds, VLOAD(qi + c * VEC), dk_acc[c]);
        }
    }
    UNROLL for (int c = 0; c < DKV; c++)
        VSTORE(dk_acc[c], grad_k + kv_row * DK + c * VEC);
    UNROLL for (int c = 0; c < DVV; c++)
        VSTORE(dv_acc[c], grad_v + kv_row * DV + c * VEC);
}
