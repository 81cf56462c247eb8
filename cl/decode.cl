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
 * cl/decode_tile.cl, before this file, holds what reads a tile's K and V rows. */

/* The phases of clattn_decode_partial that read no K or V row (cl/decode_tile.cl has those that do). */

/* The rows' q, times the power of two of clattn_score_split, into local memory (q_tile: row by row, or
 * ROWS_T element by element with the rows side by side), and each row's share of the scale in
 * score_factor: every work-item reads each row whole for its largest element (a few hundred floats,
 * once), then writes its part. */
__attribute__((always_inline)) inline void clattn_decode_load_q(__global const q_store *q, __global const ulong *q_starts,
                                                                ulong q_bs, ulong q_hs, ulong q_rs, ulong b,
                                                                const ulong *row_h, const ulong *row_i, int rows,
                                                                ulong dk, float scale, ulong lid,
                                                                __local float *q_tile, float *score_factor)
{
    float q_factor[R_MAX];
    for (int r = 0; r < rows; r++) {
        const ulong at = clattn_row_offset(q_starts, b, row_h[r], row_i[r], q_bs, q_hs, q_rs);
        float q_max = 0.0f;
        for (ulong d = 0; d < dk; d++)
            q_max = fmax(q_max, fabs(LOAD_Q(q, at + d)));
        score_factor[r] = clattn_score_split(q_max, scale, &q_factor[r]);
    }
#if ROWS_T
    for (ulong t = 0; t < (ulong)R_PAD * DK; t++) { /* (one work-item) */
        const int r = (int)(t % R_PAD);
        const ulong d = t / R_PAD;
        q_tile[t] = d < dk && r < rows
                        ? LOAD_Q(q, clattn_row_offset(q_starts, b, row_h[r], row_i[r], q_bs, q_hs, q_rs) + d) * q_factor[r]
                        : 0.0f;
    }
#else
    for (ulong t = lid; t < (ulong)rows * DK; t += WG) {
        const int r = (int)(t / DK);
        const ulong d = t % DK;
        q_tile[t] = d < dk ? LOAD_Q(q, clattn_row_offset(q_starts, b, row_h[r], row_i[r], q_bs, q_hs, q_rs) + d) *
                                 q_factor[r]
                           : 0.0f;
    }
#endif
}

/* The tile's weights p = exp(s − m) into p_tile from its scores (s_tile), each row's running maximum m
 * moved to the tile's (alpha: the factor of what came before; a NaN score makes the row NaN, as on the
 * other paths). ROWS_T: VEC rows at a time — the tile's maximum, then each row's update, then the
 * weights and their sums (tile_sum); else each work-item follows every row's maximum (the same values
 * in all of them) and computes the weights VEC keys at a time. */
__attribute__((always_inline)) inline void clattn_decode_weights(__local const float *s_tile, __local float *p_tile,
                                                                 int rows, ulong lid, float *m, float *alpha,
                                                                 float *tile_sum)
{
#if ROWS_T
    float tile_max[R_PAD];
    int tile_nan[R_PAD];
    UNROLL for (int rv = 0; rv < R_PAD / VEC; rv++) {
        vec_t top = (vec_t)-INFINITY;
        lanes_t nan_lanes = (lanes_t)0;
        for (int g = 0; g < TILE; g++) {
            const vec_t sv = VLOAD(s_tile + g * R_PAD + rv * VEC);
            top = fmax(top, sv);
            nan_lanes |= isnan(sv);
        }
        VSTORE(top, tile_max + rv * VEC);
        CLATTN_CAT(vstore, VEC)(nan_lanes, 0, tile_nan + rv * VEC);
    }
    for (int r = 0; r < rows; r++) {
        const float top = tile_nan[r] ? NAN : tile_max[r];
        alpha[r] = 1.0f;
        if (!(top <= m[r])) { /* the maximum grew (or is NaN): what came before is rescaled */
            alpha[r] = exp(m[r] - top);
            m[r] = top;
        }
    }
    UNROLL for (int rv = 0; rv < R_PAD / VEC; rv++) {
        const vec_t mv = VLOAD(m + rv * VEC);
        vec_t sum = (vec_t)0.0f;
        for (int g = 0; g < TILE; g++) {
            const vec_t sv = VLOAD(s_tile + g * R_PAD + rv * VEC);
            const vec_t pv = ZERO_WHERE_MASKED(clattn_exp_weight(sv - mv), sv);
            VSTORE(pv, p_tile + g * R_PAD + rv * VEC);
            sum += pv;
        }
        VSTORE(sum, tile_sum + rv * VEC);
    }
#else
    for (int r = 0; r < rows; r++) {
        vec_t top = (vec_t)-INFINITY;
        bool nan_score = false;
        for (int x = 0; x < TILE; x += VEC) {
            const vec_t sv = VLOAD(s_tile + r * TILE + x);
            top = fmax(top, sv);
            nan_score |= ANY_NAN(sv);
        }
        const float tile_max = nan_score ? NAN : HMAX(top);
        alpha[r] = 1.0f;
        if (!(tile_max <= m[r])) { /* the maximum grew (or is NaN): what came before is rescaled */
            alpha[r] = exp(m[r] - tile_max);
            m[r] = tile_max;
        }
        for (ulong x = lid * VEC; x < TILE; x += WG * VEC) {
            const vec_t sv = VLOAD(s_tile + r * TILE + x);
            VSTORE(ZERO_WHERE_MASKED(clattn_exp_weight(sv - (vec_t)m[r]), sv), p_tile + r * TILE + x);
        }
    }
#endif
}

/* Each row's running sum l after the tile: rescaled by alpha, plus the tile's weights (ROWS_T: their
 * sums, tile_sum, from clattn_decode_weights; else summed here from p_tile). */
__attribute__((always_inline)) inline void clattn_decode_sums(__local const float *p_tile, const float *tile_sum,
                                                              const float *alpha, int rows, float *l)
{
#if ROWS_T
    for (int y = 0; y < rows; y++)
        l[y] = l[y] * alpha[y] + tile_sum[y];
#else
    for (int y = 0; y < rows; y++) {
        vec_t sum = (vec_t)0.0f;
        for (int x = 0; x < TILE; x += VEC)
            sum += VLOAD(p_tile + y * TILE + x);
        l[y] = l[y] * alpha[y] + HSUM(sum);
    }
#endif
}

/* A row's result: its accumulators (this work-item's columns) divided by the sum, sinks counted, into
 * `out` (the row's first element; dv columns), and its log-sum-exp returned. */
__attribute__((always_inline)) inline float clattn_decode_finish_row(const vec_t *acc, float m, float l, float sink,
                                                                     __global float *out, ulong dv, ulong lid)
{
    float row_lse;
    const float inv = clattn_row_finish(m, l, sink, &row_lse);
    for (int c = 0; c < COLS_PER_ITEM; c++) {
        const ulong col = (lid + (ulong)c * WG) * VEC;
        float part[VEC];
        VSTORE(acc[c] * inv, part);
        for (int x = 0; x < VEC; x++)
            if (col + x < dv)
                out[col + x] = part[x];
    }
    return row_lse;
}

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
    /* A split's work-groups: every row group of every (sequence, K/V head), or a ragged launch's list. */
    const ulong row_groups = tiles ? tile_count : (q_len * group + R_MAX - 1) / R_MAX;
    const ulong split = get_group_id(0) / row_groups, kv_heads = heads / group;
    ulong b, kv_head, row_group;
    clattn_work_of(tiles, get_group_id(0) % row_groups, kv_heads, &b, &kv_head, &row_group);
    /* Ragged batches (q_starts): sequence b's queries are rows q_starts[b] … q_starts[b+1]−1, and row
     * groups past them have nothing to do. */
    const ulong packed_rows = (q_starts ? q_starts[b + 1] - q_starts[b] : q_len) * group;
    const ulong first = row_group * R_MAX;
    if (first >= packed_rows)
        return; /* (the whole group: no barrier is skipped by part of it) */
    const int rows = (int)min((ulong)R_MAX, packed_rows - first);
    const ulong key_len = key_lengths ? key_lengths[b] : kv_len;
    const bool score_terms = CLATTN_SCORE_TERMS_ON || mask_layout != MASK_NONE;
    const bool tree_only = CLATTN_TREE_ONLY_TERMS && mask_layout == MASK_NONE; /* (tiles before the trees: plain) */
    /* K/V rows: a dense view, a ragged one (rows from k_starts[b]), or a paged pool read through the
     * sequence's block table (k_bs and v_bs are then the pool's block strides): see K_ROW_AT. */
    __global const int *table = clattn_kv_table(block_table, table_cols, b);
    const ulong k_head = clattn_kv_base(b, kv_head, k_bs, k_hs, k_rs, k_starts, block_table);
    const ulong v_head = clattn_kv_base(b, kv_head, v_bs, v_hs, v_rs, k_starts, block_table);
    /* This work-item's output columns are VEC-wide chunks lid, lid + WG, …: the first `full` of them lie
     * wholly below dv; the next may hold a tail of fewer than VEC (staged rows are zero past dv: whole). */
    int full = 0;
    while (full < COLS_PER_ITEM && (lid + (ulong)full * WG) * VEC + (STAGE ? 1 : VEC) <= dv)
        full++;
    const ulong tail_col = (lid + (ulong)full * WG) * VEC;
    const bool tail = full < COLS_PER_ITEM && tail_col < dv;
    const ulong tail_n = tail ? dv - tail_col : 0;

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
        CLATTN_ROW_AT(&terms[r], row_i[r], pos[r]);
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
        clattn_decode_stage_k(k_stage, DK, k, k_scales, k_head, k_rs, table, block_shift, k_bs, j0,
                              keys, dk, dk, lid);
        clattn_decode_stage_v(v_stage, DV, v, v_scales, v_head, v_rs, table, block_shift, v_bs, j0,
                              keys, dv, v_scale_row, lid);
        barrier(CLK_LOCAL_MEM_FENCE);
#endif
        clattn_decode_scores(CLATTN_DECODE_KV_ARGS, walk_end, lid, q_tile, score_factor, row_begin, row_end, rows,
                             CLATTN_DECODE_TERMS_ARGS, s_tile);
        barrier(CLK_LOCAL_MEM_FENCE);
        float tile_sum[R_PAD]; /* (ROWS_T: the rows' sums of the tile's weights) */
        clattn_decode_weights(s_tile, p_tile, rows, lid, m, alpha, tile_sum);
        barrier(CLK_LOCAL_MEM_FENCE);
        clattn_decode_accumulate(CLATTN_DECODE_KV_ARGS, p_tile, alpha, rows, lid, full, tail, tail_n, acc);
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
