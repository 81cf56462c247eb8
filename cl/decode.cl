/* Decode attention ("flash-decoding", split-K): a few query rows per sequence — the new token, or a
 * handful under speculative verification — against a long cache. The work is reading K and V once,
 * so the keys are split over work-groups as well as the heads:
 *
 *   clattn_decode_partial  work-group (split, row group, batch·K/V head): the packed query rows of all
 *                          the query heads that share the K/V head (grouped-query attention reads each
 *                          K/V row once for the whole group), over keys [split·slice, (split+1)·slice).
 *                          With one split it writes the final rows (sinks included); with several, a
 *                          partial output and log-sum-exp per split, for:
 *   clattn_decode_combine  one work-item per output element: the exact result over all splits (the
 *                          merge of clattn_merge, over a dense stack of parts), sinks counted once.
 *
 * Inside a work-group the keys go in tiles of TILE, staged in local memory on GPUs, read in place (and
 * prefetched a tile ahead) on CPUs. K/V rows come from a dense view, a ragged batch (cumulative row
 * starts per sequence) or a paged pool through a block table (cl/common.cl's K/V addressing). The WG work-items share
 * the tile's scores (each computes whole dot products for some keys, RB rows × KQ keys at a time),
 * every work-item follows each row's running maximum and sum, and each owns some VEC-wide columns of
 * every row's output accumulator. On CPUs WG is 1 and VEC the SIMD width (one work-item streams its
 * slice, vectorised over the head dimension); on GPUs WG spreads the columns over lanes and VEC is 1.
 * Packed row ρ is query ρ / group of query head kv_head·group + ρ % group, as in the fused kernel;
 * R_MAX rows per work-group, more rows take more row groups. Build options: DK and DV (head sizes
 * rounded up to 16), WG, VEC, KQ (keys per step of a work-item's scores), RB (rows per step; 1: no
 * blocking), TILE, R_MAX, STAGE (tiles in local memory), PREFETCH (the next tile prefetched), ROWS_T.
 * cl/decode_tile.cl, before this file, holds the kernels' parts. */

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void clattn_decode_partial(CLATTN_PARAMETERS(CLATTN_DECODE_PARTIAL_PARAMS))
{
    CLATTN_ABSENT(CLATTN_DECODE_PARTIAL_PARAMS)
    __local float q_tile[R_PAD * DK]; /* row by row; ROWS_T: element by element, the rows side by side */
#if STAGE
    __local float k_stage[TILE * DK];
    __local float v_stage[TILE * DV];
#endif
    __local float s_tile[R_PAD * TILE]; /* scores of the tile's keys (at TILE_AT(row, key)) */
    __local float p_tile[R_PAD * TILE]; /* their weights exp(s − m) */

    const ulong lid = get_local_id(0);
    const ulong row_groups = (q_len * group + R_MAX - 1) / R_MAX;
    const ulong row_group = get_group_id(0) % row_groups, split = get_group_id(0) / row_groups;
    const ulong bkv = get_global_id(1), kv_heads = heads / group, b = bkv / kv_heads, kv_head = bkv % kv_heads;
    /* Ragged batches (q_starts): sequence b's queries are rows q_starts[b] … q_starts[b+1]−1, and row
     * groups past them have nothing to do. */
    const ulong packed_rows = (q_starts ? q_starts[b + 1] - q_starts[b] : q_len) * group;
    const ulong first = row_group * R_MAX;
    if (first >= packed_rows)
        return; /* (the whole group: no barrier is skipped by part of it) */
    const int rows = (int)min((ulong)R_MAX, packed_rows - first);
    const ulong key_len = key_lengths ? key_lengths[b] : kv_len;
    const bool score_terms = CLATTN_SCORE_TERMS_ON || mask_layout != MASK_NONE;
    /* K/V rows: a dense view, a ragged one (rows from k_starts[b]), or a paged pool read through the
     * sequence's block table (k_bs and v_bs are then the pool's block strides). */
    __global const int *table = clattn_kv_table(block_table, table_cols, b);
    const ulong k_head = clattn_kv_base(b, kv_head, k_bs, k_hs, k_rs, k_starts, block_table);
    const ulong v_head = clattn_kv_base(b, kv_head, v_bs, v_hs, v_rs, k_starts, block_table);
#define K_ROW_AT(j) clattn_kv_row(k_head, k_rs, table, block_shift, k_bs, (j))
#define V_ROW_AT(j) clattn_kv_row(v_head, v_rs, table, block_shift, v_bs, (j))
#define K_ROW(j) (k + K_ROW_AT(j))
#define V_ROW(j) (v + V_ROW_AT(j))
    /* An int8 row read in place is dequantised by its scale: a visible key's score (q·k_int8·scale) and a
     * value's nonzero weight (p·scale·v_int8) take the factor — never a hidden key's −inf or a weight of
     * 0, which must stay what they are whatever the scale (0, or NaN for a row that held inf or NaN);
     * staged rows have it already. */
#if K_T == 3 && !STAGE
#define K_SCALE(j) k_scales[K_ROW_AT(j) / dk]
#else
#define K_SCALE(j) 1.0f
#endif
#if V_T == 3 && !STAGE
#define V_SCALE(j) v_scales[V_ROW_AT(j) / dv]
#else
#define V_SCALE(j) 1.0f
#endif
    /* This work-item's output columns are VEC-wide chunks lid, lid + WG, …: the first `full` of them lie
     * wholly below dv; the next may hold a tail of fewer than VEC (staged rows are zero past dv: whole). */
    int full = 0;
    while (full < COLS_PER_ITEM && (lid + (ulong)full * WG) * VEC + (STAGE ? 1 : VEC) <= dv)
        full++;
    const ulong tail_col = (lid + (ulong)full * WG) * VEC;
    const bool tail = full < COLS_PER_ITEM && tail_col < dv;
    const ulong tail_n = tail ? dv - tail_col : 0;
#if STAGE
    const ulong kt_rs = DK;
#else
    const ulong kt_rs = k_rs;
#endif

    ulong row_i[R_MAX], row_h[R_MAX], row_begin[R_MAX], row_end[R_MAX];
    long pos[R_MAX];
    float m[R_PAD], l[R_MAX], alpha[R_MAX];
    clattn_row_terms terms[R_MAX];
    float score_factor[R_PAD]; /* a row's dot products times this are its scores (clattn_score_split) */
    for (int r = rows; r < R_PAD; r++) { /* (lanes past the rows, ROWS_T: computed, never read) */
        m[r] = -INFINITY;
        score_factor[r] = 0.0f;
    }
    vec_t acc[R_MAX][COLS_PER_ITEM];
    /* The walk: this split's keys that some row can see. */
    ulong walk_begin = split * slice, walk_end = min(walk_begin + slice, kv_len);
    ulong seen_begin = ULONG_MAX, seen_end = 0;
    for (int r = 0; r < rows; r++) {
        const ulong rho = first + r;
        row_i[r] = rho / group;
        row_h[r] = kv_head * group + rho % group;
        pos[r] = clattn_query_position(causal, offsets, b, row_i[r], q_len, kv_len);
        clattn_visible_range(causal, pos[r], key_len, win_left, win_right, &row_begin[r], &row_end[r]);
        if (row_end[r] > row_begin[r]) {
            seen_begin = min(seen_begin, row_begin[r]);
            seen_end = max(seen_end, row_end[r]);
        }
        m[r] = -INFINITY;
        l[r] = 0.0f;
        CLATTN_ROW_TERMS(&terms[r], row_h[r]);
        CLATTN_ROW_BLOCKS(&terms[r], pos[r]);
        for (int c = 0; c < COLS_PER_ITEM; c++)
            acc[r][c] = (vec_t)0.0f;
    }
    walk_begin = max(walk_begin, seen_begin);
    walk_end = min(walk_end, seen_end);
    /* Each row sees only this split's keys; tiles start at a multiple of KQ (so that KQ keys never
     * straddle two blocks of a paged cache), the keys before walk_begin masked. */
    for (int r = 0; r < rows; r++) {
        row_begin[r] = max(row_begin[r], walk_begin);
        row_end[r] = max(min(row_end[r], walk_end), row_begin[r]);
    }
    walk_begin -= walk_begin % KQ;
    clattn_decode_load_q(q, q_starts, q_bs, q_hs, q_rs, b, row_h, row_i, rows, dk, scale, lid, q_tile, score_factor);
    barrier(CLK_LOCAL_MEM_FENCE);

    for (ulong j0 = walk_begin; j0 < walk_end; j0 += TILE) {
        const ulong keys = min((ulong)TILE, walk_end - j0);
#if STAGE
        clattn_decode_stage_k(k_stage, DK, k, K_T == 3 ? k_scales : NULL, k_head, k_rs, table, block_shift, k_bs, j0,
                              keys, dk, lid);
        clattn_decode_stage_v(v_stage, DV, v, V_T == 3 ? v_scales : NULL, v_head, v_rs, table, block_shift, v_bs, j0,
                              keys, dv, lid);
        barrier(CLK_LOCAL_MEM_FENCE);
#define K_TILE_ROW(jj) (k_stage + (jj) * DK)
#define V_TILE_ROW(jj) (v_stage + (jj) * DV)
#else
/* In place, a row's address is formed for every step of the tile, also past its last key (whose
 * scores are −inf and whose rows are never read): clamped to the last key, so that a paged cache's
 * block table is never read beyond the call's blocks. */
#define K_TILE_ROW(jj) K_ROW(j0 + min((ulong)(jj), keys - 1))
#define V_TILE_ROW(jj) V_ROW(j0 + min((ulong)(jj), keys - 1))
#endif
#if ROWS_T
        for (ulong g = 0; g < TILE; g += KT) {
            const ulong j = j0 + g;
#if PREFETCH
            UNROLL for (int x = 0; x < KT; x++) /* (the next tile's keys: see below) */
                if (j + TILE + x < walk_end)
                    clattn_decode_prefetch_key(K_ROW(j + TILE + x), V_ROW(j + TILE + x), dk, dv);
#endif
            K_TILE_T *k_row[KT];
            float k_scale[KT];
            UNROLL for (int x = 0; x < KT; x++) {
                k_row[x] = K_TILE_ROW(g + x);
#if K_T == 3
                k_scale[x] = g + x < keys ? K_SCALE(j + x) : 1.0f;
#else
                k_scale[x] = 1.0f;
#endif
            }
            vec_t sum[R_PAD / VEC][KT]; /* (each element of K, broadcast, serves every row vector) */
            UNROLL for (int rv = 0; rv < R_PAD / VEC; rv++)
                UNROLL for (int x = 0; x < KT; x++)
                    sum[rv][x] = (vec_t)0.0f;
            for (ulong d = 0; d < dk; d++) {
                float kd[KT];
                UNROLL for (int x = 0; x < KT; x++)
                    kd[x] = KT_LOAD(k_row[x], d);
                UNROLL for (int rv = 0; rv < R_PAD / VEC; rv++) {
                    const vec_t qv = VLOAD(q_tile + d * R_PAD + rv * VEC);
                    UNROLL for (int x = 0; x < KT; x++)
                        sum[rv][x] = fma(qv, (vec_t)kd[x], sum[rv][x]);
                }
            }
            UNROLL for (int rv = 0; rv < R_PAD / VEC; rv++) {
                const vec_t factor = VLOAD(score_factor + rv * VEC);
                UNROLL for (int x = 0; x < KT; x++)
                    VSTORE(sum[rv][x] * k_scale[x] * factor, s_tile + (g + x) * R_PAD + rv * VEC);
            }
        }
        /* Keys a row cannot see, and a partial tile's end, are −inf; the score terms apply to the rest
         * (a tile every row sees whole, without terms, as it is). */
        bool tile_whole = !score_terms && keys == TILE;
        for (int r = 0; r < rows; r++)
            tile_whole = tile_whole && row_begin[r] <= j0 && j0 + TILE <= row_end[r];
        if (!tile_whole)
            for (ulong g = 0; g < TILE; g++)
                for (int r = 0; r < rows; r++) {
                    const ulong j = j0 + g;
                    const float sc = s_tile[TILE_AT(r, g)];
                    s_tile[TILE_AT(r, g)] =
                        g >= keys || j < row_begin[r] || j >= row_end[r] ? -INFINITY
                        : score_terms ? clattn_decode_terms(sc, softcap, &terms[r], j, pos[r], mask, mask_type, mask_layout,
                                                            b, row_h[r], heads, row_i[r], q_len, mask_cols)
                                      : sc;
                }
#else
        /* Scores: KQ keys at a time per work-item, RB rows at a time where every row of the block sees
         * all of them; keys a row cannot see are −inf. */
        for (ulong g = lid * KQ; g < TILE; g += WG * KQ) {
            const ulong j = j0 + g;
#if PREFETCH
            /* The same keys of the next tile are asked for now, a few lines at a time between the
             * arithmetic, so that they arrive while this tile computes (in one burst, the requests
             * would wait for each other). */
            UNROLL for (int x = 0; x < KQ; x++)
                if (j + TILE + x < walk_end)
                    clattn_decode_prefetch_key(K_ROW(j + TILE + x), V_ROW(j + TILE + x), dk, dv);
#endif
            /* (keys past the tile are never read: their scores are −inf, and so stay) */
            float k_scale[KQ];
            UNROLL for (int x = 0; x < KQ; x++)
#if K_T == 3 && !STAGE
                k_scale[x] = g + x < keys ? K_SCALE(j + x) : 1.0f;
#else
                k_scale[x] = 1.0f;
#endif
            int r = 0;
#if RB > 1
            for (; r + RB <= rows; r += RB) {
                bool whole = g + KQ <= keys;
                UNROLL for (int y = 0; y < RB; y++)
                    whole = whole && j >= row_begin[r + y] && j + KQ <= row_end[r + y];
                float s[RB][KQ];
                if (whole)
                    clattn_decode_dots_block(q_tile + r * DK, K_TILE_ROW(g), kt_rs, dk, s);
                UNROLL for (int y = 0; y < RB; y++) {
                    if (whole)
                        UNROLL for (int x = 0; x < KQ; x++)
                            s[y][x] = s[y][x] * k_scale[x] * score_factor[r + y];
                    else
                        clattn_decode_row_scores(q_tile + (r + y) * DK, K_TILE_ROW(g), kt_rs, dk, j, g, keys,
                                                 row_begin[r + y], row_end[r + y], k_scale, score_factor[r + y],
                                                 s[y]);
                    for (int x = 0; x < KQ; x++)
                        s_tile[(r + y) * TILE + g + x] =
                            score_terms ? clattn_decode_terms(s[y][x], softcap, &terms[r + y], j + x, pos[r + y], mask,
                                                              mask_type, mask_layout, b, row_h[r + y], heads,
                                                              row_i[r + y], q_len, mask_cols)
                                        : s[y][x];
                }
            }
#endif
            for (; r < rows; r++) {
                float s[KQ];
                clattn_decode_row_scores(q_tile + r * DK, K_TILE_ROW(g), kt_rs, dk, j, g, keys, row_begin[r], row_end[r],
                                         k_scale, score_factor[r], s);
                for (int x = 0; x < KQ; x++)
                    s_tile[r * TILE + g + x] =
                        score_terms ? clattn_decode_terms(s[x], softcap, &terms[r], j + x, pos[r], mask, mask_type,
                                                          mask_layout, b, row_h[r], heads, row_i[r], q_len, mask_cols)
                                    : s[x];
            }
        }
#endif
        barrier(CLK_LOCAL_MEM_FENCE);
        float tile_sum[R_PAD]; /* (ROWS_T: the rows' sums of the tile's weights) */
        clattn_decode_weights(s_tile, p_tile, rows, lid, m, alpha, tile_sum);
        barrier(CLK_LOCAL_MEM_FENCE);
        /* Weighted sums, the accumulators in registers for the tile: two rows at a time where both
         * weigh a key (each load of V then serves both), else row by row. A weight of 0 — a masked or
         * underflowed key — adds nothing, not even an inf value; a factor that underflowed to 0 drops
         * what came before (never 0·inf). */
#if V_T == 3 && !STAGE
        float v_scale_tile[TILE]; /* the tile's V row scales, read once for all the rows */
        for (ulong jj = 0; jj < keys; jj++)
            v_scale_tile[jj] = V_SCALE(j0 + jj);
#define V_TILE_SCALE(jj) v_scale_tile[jj]
#else
#define V_TILE_SCALE(jj) 1.0f
#endif
        int r = 0;
#if RB > 1
        for (; r + 2 <= rows; r += 2) {
            vec_t a0[COLS_PER_ITEM], a1[COLS_PER_ITEM];
            clattn_decode_rescale(acc[r], alpha[r], a0);
            clattn_decode_rescale(acc[r + 1], alpha[r + 1], a1);
            for (ulong jj = 0; jj < keys; jj++) {
                float p0 = p_tile[TILE_AT(r, jj)], p1 = p_tile[TILE_AT(r + 1, jj)];
                if (p0 == 0.0f && p1 == 0.0f)
                    continue;
                /* (a weight of 0 stays 0: the other row's key may be one it cannot see) */
                p0 = p0 == 0.0f ? 0.0f : p0 * V_TILE_SCALE(jj);
                p1 = p1 == 0.0f ? 0.0f : p1 * V_TILE_SCALE(jj);
                V_TILE_T *v_row = V_TILE_ROW(jj) + lid * VEC;
                if (p0 != 0.0f && p1 != 0.0f && full == COLS_PER_ITEM) {
                    UNROLL for (int c = 0; c < COLS_PER_ITEM; c++) {
                        const vec_t vv = VT_VLOAD(v_row + c * WG * VEC);
                        a0[c] = fma((vec_t)p0, vv, a0[c]);
                        a1[c] = fma((vec_t)p1, vv, a1[c]);
                    }
                } else {
                    clattn_decode_add(a0, p0, v_row, full, tail, tail_n);
                    clattn_decode_add(a1, p1, v_row, full, tail, tail_n);
                }
            }
            UNROLL for (int c = 0; c < COLS_PER_ITEM; c++) {
                acc[r][c] = a0[c];
                acc[r + 1][c] = a1[c];
            }
        }
#endif
        for (; r < rows; r++) {
            vec_t a[COLS_PER_ITEM];
            clattn_decode_rescale(acc[r], alpha[r], a);
            for (ulong jj = 0; jj < keys; jj++)
                if (p_tile[TILE_AT(r, jj)] != 0.0f)
                    clattn_decode_add(a, p_tile[TILE_AT(r, jj)] * V_TILE_SCALE(jj), V_TILE_ROW(jj) + lid * VEC, full,
                                      tail, tail_n);
            UNROLL for (int c = 0; c < COLS_PER_ITEM; c++)
                acc[r][c] = a[c];
        }
        clattn_decode_sums(p_tile, tile_sum, alpha, rows, l);
        barrier(CLK_LOCAL_MEM_FENCE);
    }

    for (int r = 0; r < rows; r++) {
        const ulong i = row_i[r], h = row_h[r];
        const float row_lse =
            clattn_decode_finish_row(acc[r], m[r], l[r], sinks ? sinks[h] : -INFINITY,
                                     o + split * o_split_stride + clattn_row_offset(o_starts, b, h, i, o_bs, o_hs, o_rs),
                                     dv, lid);
        /* lse: (B,H,L), or (rows, H) for ragged batches */
        if (lse && lid == 0)
            lse[split * lse_split_stride + (o_starts ? (o_starts[b] + i) * heads + h
                                                    : clattn_matrix_offset(b * heads + h, 0, i, 1, q_len))] = row_lse;
    }
}

/* The splits' partial rows — outputs (parts, rows, dv) and log-sum-exps (parts, rows), rows = B·H·L —
 * merged into the output view and lse (NULL: not wanted): lse = log Σ_p exp(lse_p) (+ exp(sink)),
 * out = Σ_p exp(lse_p − lse)·out_p. A part that saw no key (lse −inf) adds nothing; a NaN part
 * poisons the row; a row no part saw is zero with lse = the sink (−inf without one). */
__kernel void clattn_decode_combine(CLATTN_PARAMETERS(CLATTN_DECODE_COMBINE_PARAMS))
{
    CLATTN_ABSENT(CLATTN_DECODE_COMBINE_PARAMS)
    const ulong d = get_global_id(0), r = get_global_id(1);
    if (d >= dv || r >= rows)
        return;
    const ulong i = r % q_len, h = r / q_len % heads, b = r / q_len / heads;
    if (o_starts && i >= o_starts[b + 1] - o_starts[b]) /* a ragged sequence's rows end before q_len */
        return;
    const float sink = sinks ? sinks[h] : -INFINITY;
    float top = sink;
    bool nan_part = false;
    for (ulong p = 0; p < parts; p++) {
        const float x = part_lse[p * rows + r];
        top = fmax(top, x);
        nan_part |= isnan(x);
    }
    if (nan_part)
        top = NAN;
    float value = 0.0f, sum = 0.0f;
    if (top != -INFINITY) {
        for (ulong p = 0; p < parts; p++) {
            const float x = part_lse[p * rows + r];
            if (x == -INFINITY)
                continue;
            const float w = exp(x - top);
            sum += w;
            value = fma(w, part_out[(p * rows + r) * dv + d], value);
        }
        if (sink != -INFINITY)
            sum += exp(sink - top);
    }
    STORE_O(top == -INFINITY ? 0.0f : value / sum, o, clattn_row_offset(o_starts, b, h, i, o_bs, o_hs, o_rs) + d);
    if (lse && d == 0)
        lse[o_starts ? (o_starts[b] + i) * heads + h : r] = top == -INFINITY ? -INFINITY : top + log(sum);
}
