/* Top-k sparse attention (clattn_sdpa_sparse; DeepSeek's sparse attention, NSA's selected tokens): query row i of
 * batch b — the ROWS query heads that share K/V head g — attends only to the top_k keys indices[b][i][…]
 * selects (in any order; −1, or a position past the sequence's keys, selects none). One work-item per (b, i, g)
 * walks its selected keys in order: each K row is read once for the ROWS rows' scores, each V row once for
 * their sums, VEC values a vector, and the rows keep their running maximum, sum and weighted values in
 * registers (the cost is the selected rows' reads; no barrier, no local memory). Build options: ROWS, VEC, DK
 * and DV (the head sizes, multiples of VEC) and the storage types. K and V rows are a dense view
 * (B, kv_heads, kv_len, ·) or, with block_table, rows of a paged pool (blocks of 2^block_shift rows, kv_heads
 * heads each). */

#define DKV (DK / VEC)
#define DVV (DV / VEC)

/* The row index (within K's and V's rows of their head size) of position j of sequence b, K/V head g. */
inline ulong clattn_sparse_row(__global const int *table, ulong cols, uint shift, ulong kv_heads, ulong kv_len, ulong b,
                               ulong g, ulong j)
{
    if (!table)
        return (b * kv_heads + g) * kv_len + j;
    const ulong block = (ulong)table[b * cols + (j >> shift)];
    return ((block * kv_heads + g) << shift) + (j & (((ulong)1 << shift) - 1));
}

__kernel void clattn_sparse(CLATTN_PARAMETERS(CLATTN_SPARSE_PARAMS))
{
    const ulong w = get_global_id(0), kv_heads = heads / ROWS;
    if (w >= batch * q_len * kv_heads)
        return;
    const ulong g = w % kv_heads, bi = w / kv_heads, b = bi / q_len, i = bi % q_len;
    const ulong key_len = key_lengths ? key_lengths[b] : kv_len;
    vec_t qr[ROWS][DKV], acc[ROWS][DVV];
    float m[ROWS], l[ROWS];
    UNROLL for (int r = 0; r < ROWS; r++) {
        const ulong at = ((b * heads + g * ROWS + r) * q_len + i) * DK;
        UNROLL for (int c = 0; c < DKV; c++)
            qr[r][c] = VLOAD_FMT(Q_FMT, q, at + (ulong)c * VEC) * scale;
        UNROLL for (int c = 0; c < DVV; c++)
            acc[r][c] = (vec_t)0.0f;
        m[r] = -INFINITY;
        l[r] = 0.0f;
    }
    for (ulong t = 0; t < top_k; t++) {
        const int j = indices[bi * top_k + t];
        if (j < 0 || (ulong)j >= key_len)
            continue;
        const ulong row = clattn_sparse_row(block_table, table_cols, block_shift, kv_heads, kv_len, b, g, (ulong)j);
        vec_t sum[ROWS];
        UNROLL for (int r = 0; r < ROWS; r++)
            sum[r] = (vec_t)0.0f;
        UNROLL for (int c = 0; c < DKV; c++) {
            const vec_t kc = VLOAD_K(k, row * DK + (ulong)c * VEC);
            UNROLL for (int r = 0; r < ROWS; r++)
                sum[r] = fma(qr[r][c], kc, sum[r]);
        }
        float p[ROWS];
        UNROLL for (int r = 0; r < ROWS; r++) {
            float s = HSUM(sum[r]);
            if (softcap > 0.0f)
                s = softcap * tanh(s / softcap);
            if (s > m[r]) { /* a new maximum: what the row holds is rescaled to it */
                const float alpha = m[r] == -INFINITY ? 0.0f : exp(m[r] - s);
                l[r] *= alpha;
                UNROLL for (int c = 0; c < DVV; c++)
                    acc[r][c] *= alpha;
                m[r] = s;
            }
            p[r] = exp(s - m[r]);
            l[r] += p[r];
        }
        UNROLL for (int c = 0; c < DVV; c++) {
            const vec_t vc = VLOAD_V(v, row * DV + (ulong)c * VEC);
            UNROLL for (int r = 0; r < ROWS; r++)
                acc[r][c] = fma((vec_t)p[r], vc, acc[r][c]);
        }
    }
    /* A sink joins each row's denominator; a row that saw no key (and no sink) is zeros with an lse of −inf. */
    UNROLL for (int r = 0; r < ROWS; r++) {
        const ulong h = g * ROWS + r, out_row = (b * heads + h) * q_len + i;
        float total = l[r], top = m[r], factor = 1.0f;
        if (sinks) {
            const float sink = sinks[h], both = fmax(top, sink);
            factor = top == -INFINITY ? 0.0f : exp(top - both);
            total = total * factor + exp(sink - both);
            top = both;
        }
        const float f = total > 0.0f ? factor / total : 0.0f;
        for (int c = 0; c < DVV; c++) {
            float lanes[VEC];
            VSTORE(acc[r][c] * f, lanes);
            for (int e = 0; e < VEC; e++)
                STORE_O(lanes[e], o, out_row * DV + (ulong)c * VEC + (ulong)e);
        }
        if (lse)
            lse[out_row] = total > 0.0f ? top + log(total) : -INFINITY;
    }
}
