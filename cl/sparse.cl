/* Top-k sparse attention (clattn_sdpa_sparse; DeepSeek's sparse attention, NSA's selected tokens): query row i of
 * batch b — the ROWS query heads that share K/V head g — attends only to the top_k keys indices[b][i][…]
 * selects (in any order; −1, or a position past the sequence's keys, selects none). One work-group per
 * (b, i, g), WG work-items: the selected keys in chunks of WG, each work-item one key's scores for the ROWS
 * rows (its K row read once for them all), then the work-items by output columns (COLS each) fold the chunk
 * into each row's running maximum, sum and weighted values, reading the chunk's V rows column by column.
 * Build options: ROWS, WG, DK (local room for a Q row), DV (output columns, rounded up) and the storage types.
 * K and V rows are a dense view (B, kv_heads, kv_len, ·) or, with block_table, rows of a paged pool (blocks of
 * 2^block_shift rows, kv_heads heads each). */

#define COLS ((DV + WG - 1) / WG) /* output columns a work-item: lid, lid + WG, … */

/* The row index (within K's and V's rows of their head size) of position j of sequence b, K/V head g. */
inline ulong clattn_sparse_row(__global const int *table, ulong cols, uint shift, ulong kv_heads, ulong kv_len, ulong b,
                               ulong g, ulong j)
{
    if (!table)
        return (b * kv_heads + g) * kv_len + j;
    const ulong block = (ulong)table[b * cols + (j >> shift)];
    return ((block * kv_heads + g) << shift) + (j & (((ulong)1 << shift) - 1));
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void clattn_sparse(CLATTN_PARAMETERS(CLATTN_SPARSE_PARAMS))
{
    __local float q_tile[ROWS * DK];
    __local float s_tile[ROWS * WG];
    __local long key_row[WG]; /* each chunk key's row, −1 for none */
    const ulong lid = get_local_id(0), kv_heads = heads / ROWS;
    const ulong g = get_group_id(1) % kv_heads, bi = get_group_id(1) / kv_heads, b = bi / q_len, i = bi % q_len;
    const ulong key_len = key_lengths ? key_lengths[b] : kv_len;
    for (ulong t = lid; t < ROWS * dk; t += WG) {
        const ulong r = t / dk, d = t % dk;
        q_tile[r * DK + d] = LOAD_Q(q, ((b * heads + g * ROWS + r) * q_len + i) * dk + d) * scale;
    }
    float m[ROWS], l[ROWS], acc[ROWS][COLS];
    for (int r = 0; r < ROWS; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
        for (int c = 0; c < COLS; c++)
            acc[r][c] = 0.0f;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (ulong j0 = 0; j0 < top_k; j0 += WG) {
        long row = -1;
        if (j0 + lid < top_k) {
            const int j = indices[bi * top_k + j0 + lid];
            if (j >= 0 && (ulong)j < key_len)
                row = (long)clattn_sparse_row(block_table, table_cols, block_shift, kv_heads, kv_len, b, g, (ulong)j);
        }
        key_row[lid] = row;
        for (int r = 0; r < ROWS; r++) {
            float s = -INFINITY;
            if (row >= 0) {
                float dot = 0.0f;
                for (ulong d = 0; d < dk; d++)
                    dot = fma(q_tile[r * DK + d], LOAD_K(k, (ulong)row * dk + d), dot);
                s = softcap > 0.0f ? softcap * tanh(dot / softcap) : dot;
            }
            s_tile[r * WG + lid] = s;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int r = 0; r < ROWS; r++) {
            float top = m[r];
            for (int x = 0; x < WG; x++)
                top = fmax(top, s_tile[r * WG + x]);
            if (top == -INFINITY)
                continue; /* (no key yet: nothing to fold) */
            const float alpha = m[r] == -INFINITY ? 0.0f : exp(m[r] - top);
            l[r] *= alpha;
            for (int c = 0; c < COLS; c++)
                acc[r][c] *= alpha;
            m[r] = top;
            for (int x = 0; x < WG; x++) {
                const float s = s_tile[r * WG + x];
                if (s == -INFINITY)
                    continue;
                const float p = exp(s - top);
                l[r] += p;
                const ulong at = (ulong)key_row[x] * dv;
                for (int c = 0; c < COLS; c++) {
                    const ulong col = lid + (ulong)c * WG;
                    if (col < dv)
                        acc[r][c] = fma(p, LOAD_V(v, at + col), acc[r][c]);
                }
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    /* A sink joins each row's denominator; a row that saw no key (and no sink) is zeros with an lse of −inf. */
    for (int r = 0; r < ROWS; r++) {
        const ulong h = g * ROWS + r, out_row = (b * heads + h) * q_len + i;
        float total = l[r], top = m[r];
        if (sinks) {
            const float sink = sinks[h], both = fmax(top, sink);
            total = (top == -INFINITY ? 0.0f : total * exp(top - both)) + exp(sink - both);
            top = both;
        }
        for (int c = 0; c < COLS; c++) {
            const ulong col = lid + (ulong)c * WG;
            if (col < dv)
                STORE_O(total > 0.0f ? acc[r][c] * (sinks && m[r] != -INFINITY ? exp(m[r] - top) : 1.0f) / total : 0.0f,
                        o, out_row * dv + col);
        }
        if (lid == 0 && lse)
            lse[out_row] = total > 0.0f ? top + log(total) : -INFINITY;
    }
}
