/* Fused attention ("flash" style): O = softmax(Q·Kᵀ·scale + masks)·V in one pass over the keys, with
 * an online softmax, so nothing of size L×S is ever stored.
 *
 * One work-item owns one query row: its scaled q and its output accumulator live in private memory,
 * and the running maximum m and sum l in two floats. A work-group of BLOCK_M rows walks the keys in
 * tiles of BLOCK_N: the tile's K and V rows are staged in local memory by the whole group, then every
 * row scores the tile, rescales its accumulator once per tile, and adds the tile's weighted values.
 * The division by l happens once, at the end.
 *
 * Build options: BLOCK_M, BLOCK_N (tile sizes, chosen per device) and DK, DV (head sizes rounded up
 * to a multiple of 16; the padding is zero and costs no correctness). Causal and key-length masks end
 * the walk at the last tile any row of the group can see, so wholly masked tiles are never computed. */

__kernel __attribute__((reqd_work_group_size(BLOCK_M, 1, 1)))
void clattn_flash_attention(__global const float *q, ulong q_bs, ulong q_hs, ulong q_rs,
                            __global const float *k, ulong k_bs, ulong k_hs, ulong k_rs,
                            __global const float *v, ulong v_bs, ulong v_hs, ulong v_rs,
                            __global float *o, ulong o_bs, ulong o_hs, ulong o_rs, __global float *lse,
                            ulong heads, ulong q_len, ulong kv_len, ulong dk, ulong dv, float scale,
                            int causal, __global const ulong *key_lengths, __global const float *mask,
                            int mask_layout)
{
    __local float k_tile[BLOCK_N * DK];
    __local float v_tile[BLOCK_N * DV];

    const ulong lid = get_local_id(0);
    const ulong first_row = get_group_id(0) * BLOCK_M;
    const ulong i = first_row + lid;
    const ulong bh = get_global_id(1);
    const ulong b = bh / heads, h = bh % heads;
    const bool active = i < q_len;

    __global const float *k_head = k + b * k_bs + h * k_hs;
    __global const float *v_head = v + b * v_bs + h * v_hs;

    float q_row[DK];
    float acc[DV];
    for (int d = 0; d < DK; d++)
        q_row[d] = (active && (ulong)d < dk) ? q[b * q_bs + h * q_hs + i * q_rs + d] * scale : 0.0f;
    for (int d = 0; d < DV; d++)
        acc[d] = 0.0f;
    float m = -INFINITY, l = 0.0f;

    /* Keys past `end` are masked for every row of this group. */
    const ulong key_len = key_lengths ? key_lengths[b] : kv_len;
    const ulong last_row = min(first_row + BLOCK_M, q_len) - 1;
    ulong end = key_len;
    if (causal == CAUSAL_TOP_LEFT)
        end = min(end, last_row + 1);
    else if (causal == CAUSAL_BOTTOM_RIGHT)
        end = last_row + kv_len + 1 > q_len ? min(end, last_row + kv_len + 1 - q_len) : 0;

    for (ulong j0 = 0; j0 < end; j0 += BLOCK_N) {
        for (ulong t = lid; t < BLOCK_N * DK; t += BLOCK_M) {
            const ulong r = t / DK, c = t % DK, j = j0 + r;
            k_tile[t] = (j < kv_len && c < dk) ? k_head[j * k_rs + c] : 0.0f;
        }
        for (ulong t = lid; t < BLOCK_N * DV; t += BLOCK_M) {
            const ulong r = t / DV, c = t % DV, j = j0 + r;
            v_tile[t] = (j < kv_len && c < dv) ? v_head[j * v_rs + c] : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);

        if (active) {
            float s[BLOCK_N];
            float tile_max = -INFINITY;
            for (int jj = 0; jj < BLOCK_N; jj++) {
                float dot = 0.0f;
                for (int d = 0; d < DK; d++)
                    dot = fma(q_row[d], k_tile[jj * DK + d], dot);
                const ulong j = j0 + jj;
                if (j >= end || clattn_key_masked(causal, i, j, q_len, kv_len, key_len))
                    dot = -INFINITY;
                else
                    dot += clattn_additive_mask(mask, mask_layout, bh, i, j, q_len, kv_len);
                s[jj] = dot;
                tile_max = fmax(tile_max, dot);
            }
            const float m_new = fmax(m, tile_max);
            /* While every key seen so far is masked there is nothing to accumulate (and exp(−inf − −inf)
             * would be NaN). */
            if (m_new != -INFINITY) {
                const float alpha = exp(m - m_new);
                l *= alpha;
                for (int jj = 0; jj < BLOCK_N; jj++) {
                    s[jj] = exp(s[jj] - m_new);
                    l += s[jj];
                }
                for (int d = 0; d < DV; d++) {
                    float a = acc[d] * alpha;
                    for (int jj = 0; jj < BLOCK_N; jj++)
                        a = fma(s[jj], v_tile[jj * DV + d], a);
                    acc[d] = a;
                }
                m = m_new;
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }

    if (!active)
        return;
    const float inv = l > 0.0f ? 1.0f / l : 0.0f; /* l = 0: every key masked, the row is zero */
    __global float *out = o + b * o_bs + h * o_hs + i * o_rs;
    for (int d = 0; d < DV; d++)
        if ((ulong)d < dv)
            out[d] = acc[d] * inv;
    if (lse)
        lse[bh * q_len + i] = l > 0.0f ? m + log(l) : -INFINITY;
}
