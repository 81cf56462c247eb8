/* Fused attention ("flash" style): O = softmax(Q·Kᵀ·scale + masks)·V in one pass over the keys, with
 * an online softmax, so nothing of size L×S is ever stored.
 *
 * One work-item owns ROWS adjacent query rows: their q (times a power of two; the scale's rest
 * multiplies each dot product: clattn_score_split) and output accumulators live in private memory,
 * their running maxima m and sums l in floats. A work-group of BLOCK_M work-items walks the keys in
 * tiles of BLOCK_N, staged in local memory by the whole group: K transposed (kt[d][j]) and V as it is
 * (vt[j][d]). Each row then takes the tile VEC keys at a time:
 *   s = Σ_d q[d]·kt[d][j..j+VEC)         VEC-wide multiply-adds, no horizontal sums;
 *   acc[d..d+VEC) += p_j · vt[j][d..]     VEC-wide again, for each key j.
 * Every vector loaded from the tile serves all ROWS rows of the work-item. VEC is the device's native
 * float vector width and ROWS 4 on CPUs, whose SIMD lanes and registers this fills within one
 * work-item; both are 1 on GPUs, where the lanes are the work-items themselves. An accumulator is
 * rescaled only when its row maximum grows, and divided by l once, at the end.
 *
 * Build options: BLOCK_M, BLOCK_N (a multiple of VEC·KV), VEC, KV (vectors of keys per step), ROWS,
 * DK, DV (head sizes rounded up to a multiple of 16; the padding is zero), and the call's features
 * (cl/params.h). K/V rows come through cl/common.cl's addressing (dense, ragged or paged: a chunked
 * prefill over a paged cache runs here), Q/O rows of a ragged batch from its row starts. Keys a row cannot see — causal masks and key lengths —
 * end the work-item's walk at its last row's limit, and tiles no row of the group can see are never
 * loaded.
 *
 * Reproducible arithmetic (-DCLATTN_EXACT=1, issue 41; docs/reproducible.md) is this kernel with a row's
 * arithmetic fixed whatever the tiles: each row takes the keys 16 a step from key 0 on (STEP = 16: a step's
 * maximum decides the rescaling), every sum in one order (dot products the tree of 8 chains over d of
 * cl/exact_tiles.cl's EXACT_DOT_TREE, the weighted sum over the keys ascending, the weights' sum in 16 lanes, key
 * j in lane j mod 16, added in a fixed tree at the end),
 * the exponential clattn_exp_weight under FP_CONTRACT OFF and the row's end in cl/exact_math.cl's functions.
 * Skipped keys, steps and tiles add exactly nothing (a weight of 0 leaves every sum as it was), so where the
 * tiles begin changes no bit. Subnormals never reach the hardware, so a device that flushes them computes what
 * one that keeps them does: every value read is cut to 0 at or below FLT_MIN, and the sums are kept on the grid
 * of 2^-126 — q·2^k entries under 2^-40 and weights under 2^-50 are 0, so where every K entry of a step is 0 or
 * at least 2^-40 and every V entry 0 or at least 2^-30 each product is a multiple of 2^-126, and so is every
 * sum: none is subnormal. A step whose K (or V) holds a smaller entry takes its sums with each step's result
 * cut below 2^-126 (the weighted sum: below 2^-103, which leaves it on the grid again). A reproducible decode on a
 * CPU (-DEXACT_IN_PLACE=1: one work-item, at most 4 rows) stages nothing: each step reads its keys' K and V rows where
 * they lie (cl/exact_tiles.cl's EXACT_KEY_CHAINS and EXACT_V_ROW_AT) into the same sums, the same bits. */

/* Keys per step of a row's walk: KV vectors of VEC. */
#define STEP (VEC * KV)

#ifdef CLATTN_EXACT
#if STEP != 16
#error "reproducible arithmetic takes the keys 16 a step: VEC·KV must be 16"
#endif
#define L_LANES KV /* the weights' sums, a lane per key of the step */
#else
#define EXACT(x) (x)
#define VCUT_OUT(x) (x)
#define L_LANES 1
#endif

/* (K and V rows: cl/common.cl's K_ROW_AT and K_ROW_SCALE; the scale is applied as the tile is staged, so the rest
 * of the kernel sees floats.) */

#ifndef EXACT_IN_PLACE
#define EXACT_IN_PLACE 0
#endif
#if EXACT_IN_PLACE && !(defined(CLATTN_EXACT) && VEC == 8)
#error "EXACT_IN_PLACE is the reproducible build's CPU decode"
#endif
/* The reproducible CPU build (PREFETCH) asks for key `ahead`'s K and V lines, if the walk reaches it. */
#if PREFETCH
#define EXACT_PREFETCH_KEY(ahead)                                                                            \
    do {                                                                                                     \
        const ulong a_ = (ahead);                                                                            \
        if (a_ < group_end && a_ < key_len) {                                                                \
            __global const uchar *k_line_ = (__global const uchar *)k + K_ROW_AT(a_) / K_BLOCK * K_BLOCK_BYTES, \
                                 *v_line_ = (__global const uchar *)v + V_ROW_AT(a_) / V_BLOCK * V_BLOCK_BYTES; \
            for (ulong x_ = 0; x_ < dk / K_BLOCK * K_BLOCK_BYTES; x_ += 64)                                  \
                CLATTN_PREFETCH_LINE(k_line_ + x_);                                                          \
            for (ulong x_ = 0; x_ < dv / V_BLOCK * V_BLOCK_BYTES; x_ += 64)                                  \
                CLATTN_PREFETCH_LINE(v_line_ + x_);                                                          \
        }                                                                                                    \
    } while (0)
#else
#define EXACT_PREFETCH_KEY(ahead) ((void)0)
#endif

__kernel __attribute__((reqd_work_group_size(BLOCK_M, 1, 1)))
void clattn_flash_attention(CLATTN_PARAMETERS(CLATTN_FLASH_PARAMS))
{
    CLATTN_ABSENT(CLATTN_FLASH_PARAMS)
    /* (Read in place, a reproducible decode stages nothing.) */
    __local float kt[EXACT_IN_PLACE ? 1 : DK * BLOCK_N];
    __local float vt[EXACT_IN_PLACE ? 1 : BLOCK_N * DV];
    /* Per key of the tile: does its value row hold an inf or NaN? Only then must a weight of 0 skip it
     * (0·inf = NaN); finite rows take the vector path whatever their weights. */
    __local uchar v_nonfinite[BLOCK_N];
#ifdef CLATTN_EXACT
    /* Per key of the tile: 1 where its K row holds an entry under EXACT_K_FAST (not 0), 2 where its V row one
     * under EXACT_V_FAST: a step with such a key cuts its sums step by step. */
    __local uchar small_entries[BLOCK_N];
#endif

    /* Grouped-query attention: a work-group serves one K/V head, and its rows are those of the
     * `group` query heads that share it, packed query by query — packed row ρ is query ρ / group of
     * query head kv_head·group + ρ % group — so each K/V tile in local memory serves every query head
     * of the group, and visibility still only grows with ρ. Without grouping, ρ is the query. */
    const ulong lid = get_local_id(0);
    const ulong kv_heads = heads / group;
    ulong b, kv_head, tile;
    clattn_work_of(tiles, get_group_id(0), kv_heads, &b, &kv_head, &tile);
    /* A ragged batch's sequence b has q_starts[b+1] − q_starts[b] query rows (q_len is the longest). */
    const ulong packed_rows = (q_starts ? q_starts[b + 1] - q_starts[b] : q_len) * group;
    const ulong group_first = tile * (BLOCK_M * ROWS);
    const ulong first = group_first + lid * ROWS; /* this work-item's packed rows: first .. first+ROWS-1 */
    if (group_first >= packed_rows)
        return; /* (a short sequence of a ragged batch: the whole group, so no barrier is skipped by part of it) */
    const ulong key_len = key_lengths ? key_lengths[b] : kv_len;
    /* Softcap and ALiBi change every score: such calls take the per-key path of each step. */
    const bool score_terms = CLATTN_SCORE_TERMS_ON;

    /* K/V rows through cl/common.cl's addressing: a dense view, a ragged batch or a paged pool. */
    __global const int *table = clattn_kv_table(block_table, table_cols, b);
    const ulong k_head = clattn_kv_base(b, kv_head, k_bs, k_hs, k_rs, k_starts, block_table);
    const ulong v_head = clattn_kv_base(b, kv_head, v_bs, v_hs, v_rs, k_starts, block_table);

    float q_row[ROWS][DK];
    vec_t acc[ROWS][DV / VEC];
    float m[ROWS];
    clattn_row_terms terms[ROWS];
    float score_factor[ROWS]; /* a row's dot products times this are its scores (clattn_score_split) */
    vec_t l[ROWS][L_LANES]; /* the rows' sums of weights, lane by lane: added up once, at the end */
    ulong row_i[ROWS], row_h[ROWS];      /* each packed row's query and query head */
    long pos[ROWS];                       /* the rows' absolute positions */
    ulong row_begin[ROWS], row_end[ROWS]; /* keys [row_begin, row_end) are visible; none past the rows */
    for (int r = 0; r < ROWS; r++) {
        const ulong rho = first + r;
        const bool active = rho < packed_rows;
        const ulong i = row_i[r] = rho / group, h = row_h[r] = kv_head * group + rho % group;
        float q_max = 0.0f, q_factor;
        for (int d = 0; d < DK; d++) {
            q_row[r][d] = (active && (ulong)d < dk)
                              ? EXACT(LOAD_Q(q, clattn_row_offset(q_starts, b, h, i, q_bs, q_hs, q_rs) + d))
                              : 0.0f;
            q_max = fmax(q_max, fabs(q_row[r][d]));
        }
        score_factor[r] = clattn_score_split(q_max, scale, &q_factor);
        for (int d = 0; d < DK; d++) {
            q_row[r][d] *= q_factor;
#ifdef CLATTN_EXACT
            q_row[r][d] = CUT(q_row[r][d], EXACT_Q_MIN);
#endif
        }
        for (int c = 0; c < DV / VEC; c++)
            acc[r][c] = (vec_t)0.0f;
        m[r] = -INFINITY;
        for (int u = 0; u < L_LANES; u++)
            l[r][u] = (vec_t)0.0f;
        CLATTN_ROW_TERMS(&terms[r], h);
        pos[r] = clattn_query_position(causal, offsets, b, i, q_len, kv_len);
        CLATTN_ROW_AT(&terms[r], row_i[r], pos[r]);
        clattn_visible_range(causal, pos[r], key_len, win_left, win_right, &row_begin[r], &row_end[r]);
        if (!active)
            row_begin[r] = row_end[r] = 0;
    }
    /* Both bounds only grow with ρ: the first and last rows decide where the work-item and the group
     * walk (so a window costs work in proportion to the keys it shows, not to S). */
    ulong item_begin = ULONG_MAX, item_end = 0;
    for (int r = 0; r < ROWS; r++)
        if (row_end[r] > row_begin[r]) {
            item_begin = min(item_begin, row_begin[r]);
            item_end = max(item_end, row_end[r]);
        }
    const ulong group_last = min(group_first + BLOCK_M * ROWS, packed_rows) - 1;
    ulong group_begin, group_end;
    clattn_rows_range(causal, offsets, b, group_first / group, group_last / group, q_len, kv_len, key_len, win_left,
                      win_right, &group_begin, &group_end);
    /* With a block mask the walk steps over the tiles whose blocks are empty for every row of the group
     * (its heads are the K/V head's group; its positions those of its first and last rows). */
    const ulong heads_first = kv_head * group, heads_last = heads_first + group - 1;
    const long group_p_first = clattn_query_position(causal, offsets, b, group_first / group, q_len, kv_len),
               group_p_last = clattn_query_position(causal, offsets, b, group_last / group, q_len, kv_len);
#define GROUP_NEXT_TILE(j)                                                                                   \
    CLATTN_NEXT_SEEN_TILE(b, heads_first, heads_last, group_p_first, group_p_last, (j), group_end, BLOCK_N)

    for (ulong j0 = GROUP_NEXT_TILE(group_begin / BLOCK_N * BLOCK_N); j0 < group_end; j0 = GROUP_NEXT_TILE(j0 + BLOCK_N)) {
#if EXACT_IN_PLACE
        /* (Nothing staged: each step reads its keys' rows in place.) */
#elif defined(CLATTN_EXACT) && VEC > 1
        /* CPU, reproducible arithmetic: each work-item stages VEC keys at a time, their K rows VEC entries at a time,
         * cut and scaled (EXACT_ROW_PART) and transposed in registers into kt, finding their smallest nonzero
         * entries (small_entries) on the way; then their V rows as they lie. */
        for (ulong g0 = lid * VEC; g0 < BLOCK_N; g0 += BLOCK_M * VEC) {
            uvec_t k_low; /* lane e: key g0 + e's */
#define STAGE_KT(x, d) VSTORE((x), kt + (d) * BLOCK_N + g0)
            EXACT_K_BLOCKS(j0 + g0, k_low, STAGE_KT);
#undef STAGE_KT
            uint k_lowest[VEC];
            VSTORE(k_low, k_lowest);
            for (int e = 0; e < VEC; e++) {
                /* (The next tile's key in this one's place asked for, key by key between the stagings: a decode's
                 * walk of one row otherwise waits on memory at every tile; a burst of a whole tile's lines at
                 * once would stall on the core's outstanding misses instead.) */
                EXACT_PREFETCH_KEY(j0 + BLOCK_N + g0 + e);
                EXACT_STAGE_V(j0 + g0 + e, g0 + e, vt, k_lowest[e]);
            }
        }
#elif VEC > 1
        /* CPU: each work-item copies whole key rows, contiguous reads the compiler vectorises. */
        for (ulong jj = lid; jj < BLOCK_N; jj += BLOCK_M) {
            const ulong j = j0 + jj;
            const bool in = j < key_len; /* (keys from key_len on are hidden: a ragged or paged row may end there) */
            const ulong k_row = in ? K_ROW_AT(j) : 0, v_row = in ? V_ROW_AT(j) : 0;
            const float ks = in ? K_ROW_SCALE(j) : 0.0f, vs = in ? V_ROW_SCALE(j) : 0.0f;
            for (int d = 0; d < DK; d++)
                kt[d * BLOCK_N + jj] = (in && (ulong)d < dk) ? LOAD_K(k, k_row + d) * ks : 0.0f;
            bool bad = false;
            for (int d = 0; d < DV; d++) {
                const float value = (in && (ulong)d < dv) ? LOAD_V(v, v_row + d) * vs : 0.0f;
                vt[jj * DV + d] = value;
                bad |= !isfinite(value);
            }
            v_nonfinite[jj] = bad;
        }
#else
        /* GPU: neighbouring work-items copy neighbouring elements, so global reads coalesce. */
        for (ulong t = lid; t < BLOCK_N * DK; t += BLOCK_M) {
            const ulong jj = t / DK, d = t % DK, j = j0 + jj;
            kt[d * BLOCK_N + jj] =
                (j < key_len && d < dk) ? EXACT(EXACT(LOAD_K(k, K_ROW_AT(j) + d)) * EXACT(K_ROW_SCALE(j))) : 0.0f;
        }
        for (ulong t = lid; t < BLOCK_N * DV; t += BLOCK_M) {
            const ulong jj = t / DV, d = t % DV, j = j0 + jj;
            vt[t] = (j < key_len && d < dv) ? EXACT(EXACT(LOAD_V(v, V_ROW_AT(j) + d)) * EXACT(V_ROW_SCALE(j))) : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (ulong jj = lid; jj < BLOCK_N; jj += BLOCK_M) {
            bool bad = false;
            for (int d = 0; d < DV; d++)
                bad |= !isfinite(vt[jj * DV + d]);
            v_nonfinite[jj] = bad;
#ifdef CLATTN_EXACT
            uint k_low = 0xffffffffu, v_low = 0xffffffffu; /* (VEC is 1 here) */
            for (int d = 0; d < DK; d++)
                k_low = min(k_low, LOW_BITS(kt[d * BLOCK_N + jj]));
            for (int d = 0; d < DV; d++)
                v_low = min(v_low, LOW_BITS(vt[jj * DV + d]));
            small_entries[jj] = clattn_small_entries(k_low, v_low);
#endif
        }
#endif
        barrier(CLK_LOCAL_MEM_FENCE);

        for (int sub = 0; sub < BLOCK_N; sub += STEP) {
            const ulong j = j0 + sub;
            /* None of this work-item's rows sees these keys. (`continue`, not `break`: PoCL 3.1
             * miscompiles an early exit from this loop between barriers.) */
            if (j >= item_end || j + STEP <= item_begin)
                continue;
            /* Scores of ROWS rows × STEP keys: per d, KV vector loads and ROWS broadcasts feed
             * ROWS·KV multiply-adds, the register blocking of a GEMM micro-kernel. */
            vec_t s[ROWS][KV];
            UNROLL for (int r = 0; r < ROWS; r++)
                UNROLL for (int u = 0; u < KV; u++)
                    s[r][u] = (vec_t)0.0f;
#if EXACT_IN_PLACE
            /* K read in place, key by key, 8 entries at a time: lane l of a row's chain vector is the dot product's
             * chain l (EXACT_DOT_TREE), and the tree adds the lanes of 8 keys at once (clattn_dot_trees); no
             * transpose. A key with K entries under EXACT_K_FAST (rarely) is read again the careful way. */
            UNROLL for (int u = 0; u < KV; u++) {
                vec_t chains[VEC][ROWS];
                for (int e = 0; e < VEC; e++)
                    EXACT_KEY_CHAINS(j + u * VEC + e, chains[e]);
                UNROLL for (int r = 0; r < ROWS; r++)
                    s[r][u] = clattn_dot_trees(chains[0][r], chains[1][r], chains[2][r], chains[3][r], chains[4][r],
                                               chains[5][r], chains[6][r], chains[7][r]);
            }
#else
#ifdef CLATTN_EXACT
            const uint4 flags = as_uint4(vload16(0, small_entries + sub)); /* (see small_entries) */
            const uint small_bits = flags.x | flags.y | flags.z | flags.w;
            const uint small = (small_bits & 0x01010101u ? 1u : 0u) | (small_bits & 0x02020202u ? 2u : 0u);
            /* The dot products' tree of 8 chains over d (EXACT_DOT_TREE); where a key has K entries under
             * EXACT_K_FAST, its partial dot products cut at each step. */
            lanes_t cut_keys[KV];
            UNROLL for (int u = 0; u < KV; u++)
                cut_keys[u] = (small & 1) ? (VLOAD_FLAGS(small_entries + sub + u * VEC) & 1) != 0 : (lanes_t)0;
            vec_t s_b[ROWS][KV], s_c[ROWS][KV], s_t[ROWS][KV];
#define TILE_CHAIN(lane, X, STEP_CUT)                                                                        \
    do {                                                                                                     \
        UNROLL for (int r_ = 0; r_ < ROWS; r_++)                                                             \
            UNROLL for (int u_ = 0; u_ < KV; u_++)                                                           \
                X[r_][u_] = (vec_t)0.0f;                                                                     \
        for (int d_ = (lane); d_ < DK; d_ += EXACT_DOT_LANES)                                                \
            UNROLL for (int r_ = 0; r_ < ROWS; r_++)                                                         \
                UNROLL for (int u_ = 0; u_ < KV; u_++)                                                       \
                    X[r_][u_] = STEP_CUT(                                                                    \
                        fma((vec_t)q_row[r_][d_], VLOAD(kt + d_ * BLOCK_N + sub + u_ * VEC), X[r_][u_]), u_);\
    } while (0)
#define TILE_ADD(X, Y, STEP_CUT)                                                                             \
    UNROLL for (int r_ = 0; r_ < ROWS; r_++)                                                                 \
        UNROLL for (int u_ = 0; u_ < KV; u_++)                                                               \
            X[r_][u_] = STEP_CUT(X[r_][u_] + Y[r_][u_], u_)
#define TILE_KEY_CUT(f, u) select((f), (vec_t)0.0f, (fabs(f) < (vec_t)EXACT_MIN) & cut_keys[u])
            EXACT_DOTS(small & 1, s, s_b, s_c, s_t, TILE_CHAIN, TILE_ADD, TILE_KEY_CUT);
#else
            for (int d = 0; d < DK; d++) {
                vec_t kv[KV];
                UNROLL for (int u = 0; u < KV; u++)
                    kv[u] = VLOAD(kt + d * BLOCK_N + sub + u * VEC);
                UNROLL for (int r = 0; r < ROWS; r++)
                    UNROLL for (int u = 0; u < KV; u++)
                        s[r][u] = fma((vec_t)q_row[r][d], kv[u], s[r][u]);
            }
#endif
#endif
            UNROLL for (int r = 0; r < ROWS; r++)
                UNROLL for (int u = 0; u < KV; u++) {
                    s[r][u] *= score_factor[r];
#ifdef CLATTN_EXACT
                    s[r][u] = VCUT(s[r][u], EXACT_MIN);
#endif
                }
            float pj[ROWS][STEP];
            float block_max[ROWS];
            lanes_t nan_lanes = 0;
            UNROLL for (int r = 0; r < ROWS; r++) {
                if (j + STEP > row_end[r] || j < row_begin[r] || mask_layout != MASK_NONE || score_terms) {
                    float lane[STEP];
                    UNROLL for (int u = 0; u < KV; u++)
                        VSTORE(s[r][u], lane + u * VEC);
                    for (int x = 0; x < STEP; x++)
                        lane[x] = j + x >= row_begin[r] && j + x < row_end[r]
                                      ? EXACT(clattn_score_terms(lane[x], softcap, &terms[r], (long)(j + x), pos[r],
                                                                 EXACT(clattn_additive_mask(mask, mask_type, mask_layout,
                                                                                            b, row_h[r], heads, row_i[r],
                                                                                            j + x, q_len, mask_cols))))
                                      : -INFINITY;
                    UNROLL for (int u = 0; u < KV; u++)
                        s[r][u] = VLOAD(lane + u * VEC);
                }
                /* Maxima without NaN handling (one instruction per vector); NaN lanes are collected on
                 * the side and tested once per step. */
                vec_t top = s[r][0];
                nan_lanes |= NAN_LANES(s[r][0]);
                UNROLL for (int u = 1; u < KV; u++) {
                    top = QMAX(top, s[r][u]);
                    nan_lanes |= NAN_LANES(s[r][u]);
                }
                block_max[r] = HMAX_QUIET(top);
            }
            /* A NaN score makes its row NaN (a maximum that skipped it would leave a row whose only
             * visible score is NaN looking fully masked). Rare: found row by row only when present. */
            if (ANY_LANE(nan_lanes))
                UNROLL for (int r = 0; r < ROWS; r++) {
                    lanes_t row_nan = 0;
                    UNROLL for (int u = 0; u < KV; u++)
                        row_nan |= NAN_LANES(s[r][u]);
                    if (ANY_LANE(row_nan))
                        block_max[r] = NAN;
                }
            bool grew = false;
            UNROLL for (int r = 0; r < ROWS; r++)
                grew |= !(block_max[r] <= m[r] || isnan(m[r]));
            /* Rescale only rows whose running maximum grew (or turned NaN): after the first tiles,
             * rarely any, and one test skips them all. */
            if (grew) {
                UNROLL for (int r = 0; r < ROWS; r++) {
                    if (block_max[r] <= m[r] || isnan(m[r]))
                        continue; /* (a NaN maximum stays: replaced, a factor of 0 could drop it) */
#ifdef CLATTN_EXACT
                    const float alpha = clattn_exp_weight1(EXACT(m[r] - block_max[r]));
#else
                    const float alpha = exp(m[r] - block_max[r]);
#endif
                    /* A factor that underflowed to 0 drops what came before, as the staged path drops
                     * a weight of 0: an inf value added so far must not turn into 0·inf = NaN. */
                    UNROLL for (int u = 0; u < L_LANES; u++)
                        l[r][u] = alpha == 0.0f ? (vec_t)0.0f : l[r][u] * alpha;
                    UNROLL for (int c = 0; c < DV / VEC; c++)
                        acc[r][c] = alpha == 0.0f ? (vec_t)0.0f : acc[r][c] * alpha;
#ifdef CLATTN_EXACT
                    UNROLL for (int u = 0; u < L_LANES; u++)
                        l[r][u] = VCUT(l[r][u], EXACT_MIN);
                    UNROLL for (int c = 0; c < DV / VEC; c++)
                        acc[r][c] = VCUT(acc[r][c], EXACT_SUM_MIN);
#endif
                    m[r] = block_max[r];
                }
            }
            /* The weights of every row and key of the step, with no branch between them, so their
             * exponentials interleave (none subnormal: see clattn_exp_weight). While every key so far
             * is masked (m = −inf) a row has nothing to add. */
            vec_t smallest = (vec_t)1.0f;
            UNROLL for (int r = 0; r < ROWS; r++) {
                UNROLL for (int u = 0; u < KV; u++) {
#ifdef CLATTN_EXACT
                    const vec_t p = m[r] == -INFINITY ? (vec_t)0.0f
                                                      : VCUT(clattn_exp_weight(VCUT(s[r][u] - m[r], EXACT_MIN)),
                                                             EXACT_WEIGHT_MIN);
#else
                    const vec_t p = m[r] == -INFINITY ? (vec_t)0.0f : clattn_exp_weight(s[r][u] - m[r]);
#endif
                    l[r][u % L_LANES] += p;
                    smallest = fmin(smallest, p);
                    VSTORE(p, pj[r] + u * VEC);
                }
            }
            const bool zero_weight = ANY_ZERO(smallest);
#if EXACT_IN_PLACE
            /* V read in place, key by key ascending (a steady stream the core's prefetcher follows: lines asked for
             * ahead made it slower, src/attention/fused.c). The flags a staging would have found come on the way:
             * where they ask for the careful path (a V entry under EXACT_V_FAST; an inf or NaN where some weight is
             * 0) — rarely — the step is taken again that way from the sums before it, as the staged tile's partial
             * path takes it. */
            vec_t acc_before[ROWS][DV / VEC];
            UNROLL for (int r = 0; r < ROWS; r++)
                UNROLL for (int c = 0; c < DV / VEC; c++)
                    acc_before[r][c] = acc[r][c];
            uvec_t v_low = (uvec_t)0xffffffffu;
            lanes_t v_bad = 0;
            for (int x = 0; x < STEP; x++) {
                vec_t vv[DV / VEC];
                EXACT_V_ROW_AT(vv, j + x);
                UNROLL for (int c = 0; c < DV / VEC; c++) {
                    v_low = min(v_low, LOW_BITS_V(vv[c]));
                    v_bad |= isfinite(vv[c]) == 0;
                    UNROLL for (int r = 0; r < ROWS; r++)
                        acc[r][c] = fma((vec_t)pj[r][x], vv[c], acc[r][c]);
                }
            }
            if (clattn_lowest(v_low) < LOW_BITS(EXACT_V_FAST) || (zero_weight && ANY_LANE(v_bad))) {
                UNROLL for (int r = 0; r < ROWS; r++)
                    UNROLL for (int c = 0; c < DV / VEC; c++)
                        acc[r][c] = acc_before[r][c];
                for (int x = 0; x < STEP; x++) {
                    float any = 0.0f;
                    UNROLL for (int r = 0; r < ROWS; r++)
                        any += pj[r][x];
                    if (any == 0.0f)
                        continue;
                    vec_t vv[DV / VEC];
                    EXACT_V_ROW_AT(vv, j + x);
                    uvec_t key_low = (uvec_t)0xffffffffu;
                    UNROLL for (int c = 0; c < DV / VEC; c++)
                        key_low = min(key_low, LOW_BITS_V(vv[c]));
                    const bool key_small = clattn_lowest(key_low) < LOW_BITS(EXACT_V_FAST);
                    UNROLL for (int c = 0; c < DV / VEC; c++)
                        UNROLL for (int r = 0; r < ROWS; r++)
                            if (pj[r][x] != 0.0f) {
                                const vec_t f = fma((vec_t)pj[r][x], vv[c], acc[r][c]);
                                acc[r][c] = key_small ? VCUT(f, EXACT_SUM_MIN) : f;
                            }
                }
            }
#else
            /* Where some key of the step has weight 0 for some row — masked (its score is −inf), or so
             * far below the row maximum that exp underflowed — and its value row holds an inf or NaN,
             * the rows skip such keys one by one: the value adds nothing (0·inf would be NaN), as on
             * the staged path. With finite values 0·v adds nothing anyway, so the vector path serves. */
            bool partial = false;
            if (zero_weight)
                for (int x = 0; x < STEP; x++)
                    partial |= v_nonfinite[sub + x] != 0;
#ifdef CLATTN_EXACT
            /* V entries under EXACT_V_FAST in the step: the careful path, the weighted sums cut after each such key
             * (skipping a weight of 0 there changes no bit: it would add +0 to a sum that is never −0). */
            partial |= (small & 2) != 0;
#define V_SMALL_CUT(x, key) ((small_entries[key] & 2) ? VCUT((x), EXACT_SUM_MIN) : (x))
#else
#define V_SMALL_CUT(x, key) (x)
#endif
            for (int x = 0; x < STEP; x++) {
                __local const float *vrow = vt + (sub + x) * DV;
                if (partial) {
                    /* Rows for which the key is masked (weight exactly 0) skip it, so that an inf or
                     * NaN value never reaches them as 0·inf = NaN. */
                    float any = 0.0f;
                    UNROLL for (int r = 0; r < ROWS; r++)
                        any += pj[r][x];
                    if (any == 0.0f)
                        continue;
                    UNROLL for (int c = 0; c < DV / VEC; c++) {
                        const vec_t vv = VLOAD(vrow + c * VEC);
                        UNROLL for (int r = 0; r < ROWS; r++)
                            if (pj[r][x] != 0.0f)
                                acc[r][c] = V_SMALL_CUT(fma((vec_t)pj[r][x], vv, acc[r][c]), sub + x);
                    }
                } else {
                    UNROLL for (int c = 0; c < DV / VEC; c++) {
                        const vec_t vv = VLOAD(vrow + c * VEC);
                        UNROLL for (int r = 0; r < ROWS; r++)
                            acc[r][c] = fma((vec_t)pj[r][x], vv, acc[r][c]);
                    }
                }
            }
#endif
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }

    for (int r = 0; r < ROWS; r++) {
        if (first + r >= packed_rows)
            break;
        const ulong i = row_i[r], h = row_h[r];
        /* A sink joins the denominator as one more logit without a value. */
        float row_lse;
#ifdef CLATTN_EXACT
        /* The 16 lanes of the weights' sum in a fixed tree: lane x + w joins lane x, w = 8, 4, 2, 1. */
        float lanes[STEP];
        for (int u = 0; u < KV; u++)
            VSTORE(l[r][u], lanes + u * VEC);
        for (int w = STEP / 2; w > 0; w /= 2)
            for (int x = 0; x < w; x++)
                lanes[x] += lanes[x + w];
        const float inv = clattn_x_row_finish(m[r], lanes[0], sinks ? sinks[h] : -INFINITY, &row_lse);
#else
        const float inv = clattn_row_finish(m[r], HSUM(l[r][0]), sinks ? sinks[h] : -INFINITY, &row_lse);
#endif
        const ulong out = clattn_row_offset(q_starts, b, h, i, o_bs, o_hs, o_rs);
        float row[DV];
        for (int c = 0; c < DV / VEC; c++)
            VSTORE(VCUT_OUT(acc[r][c] * inv), row + c * VEC);
        for (int d = 0; d < DV; d++)
            if ((ulong)d < dv)
                STORE_O(row[d], o, out + d);
        if (lse) /* (B, H, L), or (rows, H) for a ragged batch */
            lse[q_starts ? (q_starts[b] + i) * heads + h : clattn_matrix_offset(b * heads + h, 0, i, 1, q_len)] = row_lse;
    }
}
