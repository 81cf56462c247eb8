/* Top-k sparse attention (clattn_sdpa_sparse; DeepSeek's sparse attention, NSA's selected tokens): query row i of
 * batch b — the ROWS query heads that share K/V head g — attends only to the top_k keys indices[b][i][…]
 * selects (in any order; −1, or a position past the sequence's keys, selects none). One work-item per (b, i, g)
 * and slice of the selected keys (`splits` of them: many independent walks keep the memory busy, where one
 * walk a row waits on each random row in turn — 4x slower measured) walks its keys in order: each K row is read once for the ROWS rows' scores, each V row once for
 * their sums, VEC values a vector, and the rows keep their running maximum, sum and weighted values in
 * registers (the cost is the selected rows' reads; no barrier, no local memory). Build options: ROWS, VEC, DK
 * and DV (the head sizes, multiples of VEC) and the storage types. K and V rows are a dense view
 * (B, kv_heads, kv_len, ·) or, with block_table, rows of a paged pool (blocks of 2^block_shift rows, kv_heads
 * heads each). */

#define DKV (DK / VEC)
#define DVV (DV / VEC)
/* The rows of the key AHEAD places on are asked for while this one is computed: a walk of random rows
 * otherwise waits on each (PREFETCH, CLATTN_PREFETCH_LINE: cl/common.cl's). */
#define AHEAD 4

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
    const ulong kv_heads = heads / ROWS, rows = batch * q_len * kv_heads;
    const ulong w = get_global_id(0) % rows, split = get_global_id(0) / rows;
    if (split >= splits)
        return;
    const ulong g = w % kv_heads, bi = w / kv_heads, b = bi / q_len, i = bi % q_len;
    const ulong slice = (top_k + splits - 1) / splits, t_begin = split * slice, t_end = min(top_k, t_begin + slice);
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
    for (ulong t = t_begin; t < t_end; t++) {
        if (PREFETCH && t + AHEAD < t_end) {
            const int next = indices[bi * top_k + t + AHEAD];
            if (next >= 0 && (ulong)next < key_len) {
                const ulong n = clattn_sparse_row(block_table, table_cols, block_shift, kv_heads, kv_len, b, g, (ulong)next);
                for (ulong e = 0; e < DK * sizeof(k_store); e += 64)
                    CLATTN_PREFETCH_LINE((__global const uchar *)(k + n * DK) + e);
                for (ulong e = 0; e < DV * sizeof(v_store); e += 64)
                    CLATTN_PREFETCH_LINE((__global const uchar *)(v + n * DV) + e);
            }
        }
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
    /* A slice's rows, normalised, with their log-sum-exps (the combine below merges them); or, in one slice, the
     * output: a sink joins each row's denominator, a row that saw no key (and no sink) is zeros, lse −inf. */
    UNROLL for (int r = 0; r < ROWS; r++) {
        const ulong h = g * ROWS + r, out_row = (b * heads + h) * q_len + i;
        if (splits > 1) {
            const ulong at = split * batch * heads * q_len + out_row;
            const float f = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
            for (int c = 0; c < DVV; c++)
                VSTORE(acc[r][c] * f, part_out + at * DV + (ulong)c * VEC);
            part_lse[at] = l[r] > 0.0f ? m[r] + log(l[r]) : -INFINITY;
            continue;
        }
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

/* Row r's slices merged (work-item (d, r): value d of output row r): each slice weighs exp(its lse − the largest),
 * the sink joins the denominator; no slice with a key and no sink: zeros and lse −inf. */
__kernel void clattn_sparse_combine(CLATTN_PARAMETERS(CLATTN_SPARSE_COMBINE_PARAMS))
{
    const ulong d = get_global_id(0), r = get_global_id(1);
    if (d >= dv || r >= rows)
        return;
    float top = sinks ? sinks[r / q_len % heads] : -INFINITY;
    for (ulong s = 0; s < splits; s++)
        top = fmax(top, part_lse[s * rows + r]);
    float total = 0.0f, sum = 0.0f;
    if (top != -INFINITY) {
        for (ulong s = 0; s < splits; s++) {
            const float lse_s = part_lse[s * rows + r];
            if (lse_s == -INFINITY)
                continue;
            const float w = exp(lse_s - top);
            total += w;
            sum = fma(w, part_out[(s * rows + r) * dv + d], sum);
        }
        if (sinks)
            total += exp(sinks[r / q_len % heads] - top);
    }
    STORE_O(total > 0.0f ? sum / total : 0.0f, o, r * dv + d);
    if (d == 0 && lse)
        lse[r] = total > 0.0f ? top + log(total) : -INFINITY;
}
