/* Fused attention for CPUs with the query rows in the SIMD lanes: the same result as
 * cl/flash_attention.cl (whose comment explains the packed rows, the walk and the masks), each key
 * tile's work shaped as two small GEMMs with the softmax's bookkeeping once per tile.
 *
 * A work-item owns ROWS packed rows, ROWS / VEC vectors of VEC rows: their q transposed (qt[d][row]),
 * their output accumulators likewise (ot[d][row]), their running maxima m and sums l one lane a row.
 * For each tile of BLOCK_N keys, staged in local memory by the group as the rows lie (kn[j][d],
 * vn[j][d], converted to float):
 *   scores  st[j][rows] = Σ_d kn[j][d] · qt[d][rows]: per d, KT broadcast elements of K times the row
 *           vectors of qt, KT × ROWS/VEC multiply-adds with no horizontal sum;
 *   softmax the tile's maximum, the rescaling and the exponentials lane by lane over the tile's
 *           BLOCK_N keys (no per-row reduction across lanes, once per tile rather than per step);
 *   output  ot[d][rows] += Σ_j vn[j][d] · st[j][rows]: per key, DB broadcast elements of V times the
 *           row vectors of weights.
 * Everything a row needs stays in its lane from the first score to the output, so the only
 * horizontal work is none; the private arrays (qt, ot, st: a few KiB each) stay in the core's caches.
 *
 * Build options as cl/flash_attention.cl's (BLOCK_M, BLOCK_N a multiple of KT, VEC > 1, DK, DV, the
 * features), with ROWS a multiple of VEC.
 *
 * Reproducible arithmetic (-DCLATTN_EXACT=1, after cl/exact_tiles.cl): the bits of cl/flash_attention.cl's exact
 * build, each row's arithmetic the same with the rows in the lanes — keys 16 a step from key 0, each score the tree
 * of 8 fma chains over d (EXACT_DOT_TREE, lane by lane, EXACT_KT keys at a time), the step's maximum deciding the
 * rescaling, the weights' sum in 16 lanes of keys (l16) added in the same tree at the end, the weighted sums one fma
 * chain over the keys, and every cut where that kernel makes it (the flagged keys' careful paths included). */

#if VEC < 2
#error "the rows-in-lanes fused kernel puts rows in SIMD lanes: VEC must be at least 2"
#endif
#if ROWS % VEC != 0 || BLOCK_N % 8 != 0
#error "ROWS must be a multiple of VEC and BLOCK_N of 8"
#endif
#define RV (ROWS / VEC) /* row vectors per work-item */
#ifndef CLATTN_EXACT
#define EXACT(x) (x)
#endif
#define KT 8            /* keys per step of the scores */
#define DB 8            /* value columns per step of the output */
#define EXACT_KT 4      /* keys per step of the reproducible scores (whose dot products hold four partial sums) */

/* x of key j's K (V) row as a float: its row's scale applied (cl/common.cl's K_ROW_SCALE), other types as they
 * are (a multiplication by 1 would cost a pass of its own). */
#if HAS_K_SCALES
#define K_SCALED(x, j) ((x) * K_ROW_SCALE(j))
#else
#define K_SCALED(x, j) (x)
#endif
#if HAS_V_SCALES
#define V_SCALED(x, j) ((x) * V_ROW_SCALE(j))
#else
#define V_SCALED(x, j) (x)
#endif

__kernel __attribute__((reqd_work_group_size(BLOCK_M, 1, 1)))
void clattn_flash_lanes(CLATTN_PARAMETERS(CLATTN_FLASH_PARAMS))
{
    CLATTN_ABSENT(CLATTN_FLASH_PARAMS)
    __local float kn[BLOCK_N * DK];
    __local float vn[BLOCK_N * DV];
    __local uchar v_nonfinite[BLOCK_N]; /* as in cl/flash_attention.cl: only such keys need care */
#ifdef CLATTN_EXACT
    __local uchar small_entries[BLOCK_N]; /* as in cl/flash_attention.cl's exact build */
#if BLOCK_N % 16 != 0
#error "reproducible arithmetic takes the keys 16 a step: BLOCK_N must be a multiple of 16"
#endif
#endif

    const ulong lid = get_local_id(0);
    const ulong kv_heads = heads / group;
    ulong b, kv_head, tile;
    clattn_work_of(tiles, get_group_id(0), kv_heads, &b, &kv_head, &tile);
    const ulong packed_rows = (q_starts ? q_starts[b + 1] - q_starts[b] : q_len) * group;
    const ulong group_first = tile * (BLOCK_M * ROWS);
    const ulong first = group_first + lid * ROWS;
    if (group_first >= packed_rows)
        return;
    const ulong key_len = key_lengths ? key_lengths[b] : kv_len;
    const bool score_terms = CLATTN_SCORE_TERMS_ON;

    __global const int *table = clattn_kv_table(block_table, table_cols, b);
    const ulong k_head = clattn_kv_base(b, kv_head, k_bs, k_hs, k_rs, k_starts, block_table);
    const ulong v_head = clattn_kv_base(b, kv_head, v_bs, v_hs, v_rs, k_starts, block_table);

    /* Vectors of rows, so that every vector access is aligned (to float arrays PoCL's compiler stores
     * a vector in four pieces), and each a float view for the row-by-row work. */
    vec_t qt_v[DK * RV];      /* qt[d·ROWS + r]: row r's q (times its power of two) */
    vec_t ot_v[DV * RV];      /* ot[d·ROWS + r]: row r's Σ exp(score − m)·v */
    vec_t st_v[BLOCK_N * RV]; /* st[x·ROWS + r]: row r's score of the tile's key x, then its weight */
    float *qt = (float *)qt_v, *ot = (float *)ot_v, *st = (float *)st_v;
    float score_factor[ROWS];
    vec_t m[RV], l[RV];
#ifdef CLATTN_EXACT
    vec_t l16[16][RV]; /* the weights' sums, key j's in l16[j % 16] (cl/flash_attention.cl's 16 lanes) */
    for (int x = 0; x < 16; x++)
        for (int rv = 0; rv < RV; rv++)
            l16[x][rv] = (vec_t)0.0f;
#endif
    clattn_row_terms terms[ROWS];
    ulong row_i[ROWS], row_h[ROWS];
    long pos[ROWS];
    ulong row_begin[ROWS], row_end[ROWS];
    for (int r = 0; r < ROWS; r++) {
        const ulong rho = first + r;
        const bool active = rho < packed_rows;
        const ulong i = row_i[r] = rho / group, h = row_h[r] = kv_head * group + rho % group;
        const ulong at = active ? clattn_row_offset(q_starts, b, h, i, q_bs, q_hs, q_rs) : 0;
#ifdef CLATTN_EXACT /* (q as cl/flash_attention.cl's exact build forms it: cut, scaled, cut again) */
        float q_max = 0.0f, q_factor;
        for (ulong d = 0; active && d < dk; d++)
            q_max = fmax(q_max, fabs(EXACT(LOAD_Q(q, at + d))));
        score_factor[r] = clattn_score_split(q_max, scale, &q_factor);
        for (int d = 0; d < DK; d++)
            qt[d * ROWS + r] = (active && (ulong)d < dk) ? CUT(EXACT(LOAD_Q(q, at + d)) * q_factor, EXACT_Q_MIN) : 0.0f;
#else
        /* (The row's largest |q| a vector at a time: one element a step is a chain of dependent maxima.) */
        vec_t q_top = (vec_t)0.0f;
        ulong d0 = 0;
        for (; active && d0 + VEC <= dk; d0 += VEC)
            q_top = fmax(q_top, fabs(VLOAD_FMT(Q_FMT, q, at + d0)));
        float q_max = HMAX(q_top), q_factor;
        for (ulong d = d0; d < dk && active; d++)
            q_max = fmax(q_max, fabs(LOAD_Q(q, at + d)));
        score_factor[r] = clattn_score_split(q_max, scale, &q_factor);
        for (int d = 0; d < DK; d++)
            qt[d * ROWS + r] = (active && (ulong)d < dk) ? LOAD_Q(q, at + d) * q_factor : 0.0f;
#endif
        for (int d = 0; d < DV; d++)
            ot[d * ROWS + r] = 0.0f;
        CLATTN_ROW_TERMS(&terms[r], h);
        pos[r] = clattn_query_position(causal, offsets, b, i, q_len, kv_len);
        CLATTN_ROW_AT(&terms[r], row_i[r], pos[r]);
        clattn_visible_range(causal, pos[r], key_len, win_left, win_right, &row_begin[r], &row_end[r]);
        if (!active)
            row_begin[r] = row_end[r] = 0;
    }
    for (int rv = 0; rv < RV; rv++) {
        m[rv] = (vec_t)-INFINITY;
        l[rv] = (vec_t)0.0f;
    }
    /* The work-item's walk spans its rows' visible keys; a tile lies wholly inside every active row's
     * range when it starts at or after the largest begin and ends by the smallest end (both grow with
     * the row: the last and the first active rows). */
    ulong item_begin = ULONG_MAX, item_end = 0, full_begin = 0, full_end = ULONG_MAX;
    long item_p_first = LONG_MAX, item_p_last = LONG_MIN; /* (the block mask's rows) */
    long item_tree_first = LONG_MAX;                      /* (the first key a row's tree may hide) */
    for (int r = 0; r < ROWS; r++)
        if (first + r < packed_rows) {
            item_tree_first = min(item_tree_first, clattn_tree_first(&terms[r]));
            item_begin = min(item_begin, row_begin[r]);
            item_end = max(item_end, row_end[r]);
            full_begin = max(full_begin, row_begin[r]);
            full_end = min(full_end, row_end[r]);
            item_p_first = min(item_p_first, pos[r]);
            item_p_last = max(item_p_last, pos[r]);
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

#ifdef CLATTN_EXACT
    for (ulong j0 = GROUP_NEXT_TILE(group_begin / BLOCK_N * BLOCK_N); j0 < group_end; j0 = GROUP_NEXT_TILE(j0 + BLOCK_N)) {
        /* Whole key rows VEC entries at a time, cut and scaled as cl/flash_attention.cl stages them, with the
         * keys' flags of small entries. */
#define STORE_KN(x, d, jj) VSTORE((x), kn + (jj) * DK + (d))
        for (ulong jj = lid; jj < BLOCK_N; jj += BLOCK_M)
            EXACT_STAGE_KEY(j0, jj, vn, STORE_KN);
        barrier(CLK_LOCAL_MEM_FENCE);
        const int item_blocks = CLATTN_BLOCK_SPAN(b, heads_first, heads_last, item_p_first, item_p_last, j0, BLOCK_N);
        if (j0 < item_end && j0 + BLOCK_N > item_begin && item_blocks != BLOCK_EMPTY)
            for (int sub = 0; sub < BLOCK_N; sub += 16) {
                const ulong j = j0 + sub;
                if (j >= item_end || j + 16 <= item_begin)
                    continue; /* (none of the rows sees the step: it would change nothing) */
                uint small = 0;
                for (int x = 0; x < 16; x++)
                    small |= small_entries[sub + x];
                /* Scores: EXACT_KT keys × RV row vectors at a time, each dot product the tree of 8 chains over d
                 * (EXACT_DOT_TREE); a flagged key's (K entries under EXACT_K_FAST) each step cut, as there. */
                for (int g = 0; g < 16; g += EXACT_KT) {
                    vec_t sum[RV][EXACT_KT], sum_b[RV][EXACT_KT], sum_c[RV][EXACT_KT], sum_t[RV][EXACT_KT];
                    bool cut[EXACT_KT];
                    UNROLL for (int x = 0; x < EXACT_KT; x++)
                        cut[x] = (small_entries[sub + g + x] & 1) != 0;
#define LANES_CHAIN(lane, X, STEP_CUT)                                                                       \
    do {                                                                                                     \
        UNROLL for (int rv_ = 0; rv_ < RV; rv_++)                                                            \
            UNROLL for (int x_ = 0; x_ < EXACT_KT; x_++)                                                     \
                X[rv_][x_] = (vec_t)0.0f;                                                                    \
        for (int d_ = (lane); d_ < DK; d_ += EXACT_DOT_LANES) {                                              \
            float kd_[EXACT_KT];                                                                             \
            UNROLL for (int x_ = 0; x_ < EXACT_KT; x_++)                                                     \
                kd_[x_] = kn[(sub + g + x_) * DK + d_];                                                      \
            UNROLL for (int rv_ = 0; rv_ < RV; rv_++) {                                                      \
                const vec_t qv_ = qt_v[d_ * RV + rv_];                                                       \
                UNROLL for (int x_ = 0; x_ < EXACT_KT; x_++)                                                 \
                    X[rv_][x_] = STEP_CUT(fma(qv_, (vec_t)kd_[x_], X[rv_][x_]), x_);                         \
            }                                                                                                \
        }                                                                                                    \
    } while (0)
#define LANES_ADD(X, Y, STEP_CUT)                                                                            \
    UNROLL for (int rv_ = 0; rv_ < RV; rv_++)                                                                \
        UNROLL for (int x_ = 0; x_ < EXACT_KT; x_++)                                                         \
            X[rv_][x_] = STEP_CUT(X[rv_][x_] + Y[rv_][x_], x_)
#define LANES_KEY_CUT(f, x) (cut[x] ? VCUT((f), EXACT_MIN) : (f))
                    EXACT_DOTS(small & 1, sum, sum_b, sum_c, sum_t, LANES_CHAIN, LANES_ADD, LANES_KEY_CUT);
                    UNROLL for (int rv = 0; rv < RV; rv++) {
                        const vec_t factor = VLOAD(score_factor + rv * VEC);
                        UNROLL for (int x = 0; x < EXACT_KT; x++)
                            st_v[(sub + g + x) * RV + rv] = VCUT(sum[rv][x] * factor, EXACT_MIN);
                    }
                }
                /* Masks and score terms key by key where a row does not see the whole step plainly. */
                for (int r = 0; r < ROWS; r++)
                    if (j + 16 > row_end[r] || j < row_begin[r] || mask_layout != MASK_NONE || score_terms)
                        for (int x = 0; x < 16; x++) {
                            float *at = st + (sub + x) * ROWS + r;
                            *at = j + x >= row_begin[r] && j + x < row_end[r]
                                      ? EXACT(clattn_score_terms(*at, softcap, &terms[r], (long)(j + x), pos[r],
                                                                 EXACT(clattn_additive_mask(mask, mask_type, mask_layout,
                                                                                            b, row_h[r], heads, row_i[r],
                                                                                            j + x, q_len, mask_cols))))
                                      : -INFINITY;
                        }
                bool partial = (small & 2) != 0, step_nonfinite = false;
                for (int x = 0; x < 16; x++)
                    step_nonfinite |= v_nonfinite[sub + x] != 0;
                for (int rv = 0; rv < RV; rv++) {
                    /* The step's maximum (NaN where a score is), the rescaling where it grew, the weights. */
                    vec_t top = (vec_t)-INFINITY;
                    lanes_t nan_lanes = 0;
                    for (int x = 0; x < 16; x++) {
                        const vec_t score = st_v[(sub + x) * RV + rv];
                        top = QMAX(top, score);
                        nan_lanes |= NAN_LANES(score);
                    }
                    const vec_t step_max = select(top, (vec_t)NAN, nan_lanes);
                    const lanes_t kept = (step_max <= m[rv]) | isnan(m[rv]);
                    if (!all(kept)) {
                        const vec_t alpha = clattn_exp_weight(VCUT(m[rv] - step_max, EXACT_MIN));
                        const lanes_t dropped = alpha == (vec_t)0.0f;
                        for (int x = 0; x < 16; x++)
                            l16[x][rv] = select(VCUT(select(l16[x][rv] * alpha, (vec_t)0.0f, dropped), EXACT_MIN),
                                                l16[x][rv], kept);
                        for (int d = 0; d < DV; d++) {
                            vec_t *acc = ot_v + d * RV + rv;
                            *acc = select(VCUT(select(*acc * alpha, (vec_t)0.0f, dropped), EXACT_SUM_MIN), *acc, kept);
                        }
                        m[rv] = select(step_max, m[rv], kept);
                    }
                    const lanes_t unseen = m[rv] == (vec_t)-INFINITY;
                    vec_t smallest = (vec_t)1.0f;
                    for (int x = 0; x < 16; x++) {
                        vec_t *at = st_v + (sub + x) * RV + rv;
                        const vec_t p = select(VCUT(clattn_exp_weight(VCUT(*at - m[rv], EXACT_MIN)), EXACT_WEIGHT_MIN),
                                               (vec_t)0.0f, unseen);
                        l16[x][rv] += p;
                        smallest = fmin(smallest, p);
                        *at = p;
                    }
                    partial |= ANY_ZERO(smallest) && step_nonfinite;
                }
                /* The weighted sums, key by key (careful: a weight of 0 skips its key, and a flagged key's (V entries
                 * under EXACT_V_FAST) sums are cut after it). */
                for (int d0 = 0; d0 < DV; d0 += DB) {
                    vec_t acc[RV][DB];
                    UNROLL for (int rv = 0; rv < RV; rv++)
                        UNROLL for (int c = 0; c < DB; c++)
                            acc[rv][c] = ot_v[(d0 + c) * RV + rv];
                    if (!partial) {
                        for (int x = 0; x < 16; x++) {
                            float vd[DB];
                            UNROLL for (int c = 0; c < DB; c++)
                                vd[c] = vn[(sub + x) * DV + d0 + c];
                            UNROLL for (int rv = 0; rv < RV; rv++) {
                                const vec_t p = st_v[(sub + x) * RV + rv];
                                UNROLL for (int c = 0; c < DB; c++)
                                    acc[rv][c] = fma(p, (vec_t)vd[c], acc[rv][c]);
                            }
                        }
                    } else {
                        for (int x = 0; x < 16; x++) {
                            const bool cut = (small_entries[sub + x] & 2) != 0;
                            UNROLL for (int rv = 0; rv < RV; rv++) {
                                const vec_t p = st_v[(sub + x) * RV + rv];
                                const lanes_t skip = p == (vec_t)0.0f;
                                UNROLL for (int c = 0; c < DB; c++) {
                                    const vec_t f = fma(p, (vec_t)vn[(sub + x) * DV + d0 + c], acc[rv][c]);
                                    acc[rv][c] = select(cut ? VCUT(f, EXACT_SUM_MIN) : f, acc[rv][c], skip);
                                }
                            }
                        }
                    }
                    UNROLL for (int rv = 0; rv < RV; rv++)
                        UNROLL for (int c = 0; c < DB; c++)
                            ot_v[(d0 + c) * RV + rv] = acc[rv][c];
                }
            }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
#else
    for (ulong j0 = GROUP_NEXT_TILE(group_begin / BLOCK_N * BLOCK_N); j0 < group_end; j0 = GROUP_NEXT_TILE(j0 + BLOCK_N)) {
        for (ulong jj = lid; jj < BLOCK_N; jj += BLOCK_M) {
            const ulong j = j0 + jj;
            const bool in = j < key_len;
            const ulong k_row = in ? K_ROW_AT(j) : 0, v_row = in ? V_ROW_AT(j) : 0;
            bool bad = false;
            if (in && dk == DK && dv == DV) { /* whole rows (DK, DV multiples of 16): VEC at a time */
                lanes_t bad_lanes = 0;
                clattn_dequant_row_k(k, k_row, DK, K_ROW_SCALE(j), kn + jj * DK);
                clattn_dequant_row_v(v, v_row, DV, V_ROW_SCALE(j), vn + jj * DV);
                for (int d = 0; d < DV; d += VEC) {
                    const vec_t value = VLOAD(vn + jj * DV + d);
                    bad_lanes |= isnan(value) | isinf(value);
                }
                bad = any(bad_lanes);
            } else {
                for (int d = 0; d < DK; d++)
                    kn[jj * DK + d] = (in && (ulong)d < dk) ? K_SCALED(LOAD_K(k, k_row + d), j) : 0.0f;
                for (int d = 0; d < DV; d++) {
                    const float value = (in && (ulong)d < dv) ? V_SCALED(LOAD_V(v, v_row + d), j) : 0.0f;
                    vn[jj * DV + d] = value;
                    bad |= !isfinite(value);
                }
            }
            v_nonfinite[jj] = bad;
        }
        barrier(CLK_LOCAL_MEM_FENCE);

        /* (An `if` around the work, not `continue`: PoCL 3.1 miscompiles early exits between barriers.) */
        const int item_blocks = CLATTN_BLOCK_SPAN(b, heads_first, heads_last, item_p_first, item_p_last, j0, BLOCK_N);
        if (j0 < item_end && j0 + BLOCK_N > item_begin && item_blocks != BLOCK_EMPTY) {
            /* A tile wholly visible to every row, without a mask tensor or score terms, takes its scores
             * as they are, and their maxima as they are formed — without looking for NaN: a NaN score
             * the maximum passed over still makes its weight NaN, and so the row, unless the row's
             * maximum stays −inf (every other score −inf or NaN), which sends the tile's row vector to
             * a second look. */
            const bool plain = j0 >= full_begin && j0 + BLOCK_N <= full_end && mask_layout == MASK_NONE &&
                               (!score_terms || (item_blocks == BLOCK_FULL && !CLATTN_VALUE_TERMS_ON) ||
                                (CLATTN_TREE_ONLY_TERMS && (long)(j0 + BLOCK_N) <= item_tree_first));
            vec_t top[RV];
            lanes_t nan_lanes[RV];
            UNROLL for (int rv = 0; rv < RV; rv++) {
                top[rv] = (vec_t)-INFINITY;
                nan_lanes[rv] = 0;
            }
            /* Scores: KT keys × RV row vectors a step, each broadcast element of K serving every row
             * vector and each vector of qt every key. */
            for (int g = 0; g < BLOCK_N; g += KT) {
                vec_t sum[RV][KT];
                UNROLL for (int rv = 0; rv < RV; rv++)
                    UNROLL for (int x = 0; x < KT; x++)
                        sum[rv][x] = (vec_t)0.0f;
                for (int d = 0; d < DK; d++) {
                    float kd[KT];
                    UNROLL for (int x = 0; x < KT; x++)
                        kd[x] = kn[(g + x) * DK + d];
                    UNROLL for (int rv = 0; rv < RV; rv++) {
                        const vec_t qv = qt_v[d * RV + rv];
                        UNROLL for (int x = 0; x < KT; x++)
                            sum[rv][x] = fma(qv, (vec_t)kd[x], sum[rv][x]);
                    }
                }
                UNROLL for (int rv = 0; rv < RV; rv++) {
                    const vec_t factor = VLOAD(score_factor + rv * VEC);
                    UNROLL for (int x = 0; x < KT; x++) {
                        const vec_t score = sum[rv][x] * factor;
                        top[rv] = QMAX(top[rv], score);
                        st_v[(g + x) * RV + rv] = score;
                    }
                }
            }
            /* Otherwise masks and score terms, score by score, and the maxima of what they leave. */
            if (!plain) {
                /* Row by row over the keys each row sees: no condition inside the loop, so that what a
                 * row's terms read once (a score_mod's per-head tensor) can be read before it. */
                for (int r = 0; r < ROWS; r++) {
                    const int x_begin = (int)clamp((long)row_begin[r] - (long)j0, 0L, (long)BLOCK_N);
                    const int x_end = (int)clamp((long)row_end[r] - (long)j0, (long)x_begin, (long)BLOCK_N);
                    for (int x = 0; x < x_begin; x++)
                        st[x * ROWS + r] = -INFINITY;
                    for (int x = x_begin; x < x_end; x++) {
                        const ulong j = j0 + x;
                        st[x * ROWS + r] =
                            clattn_score_terms(st[x * ROWS + r], softcap, &terms[r], (long)j, pos[r],
                                               clattn_additive_mask(mask, mask_type, mask_layout, b, row_h[r], heads,
                                                                    row_i[r], j, q_len, mask_cols));
                    }
                    for (int x = x_end; x < BLOCK_N; x++)
                        st[x * ROWS + r] = -INFINITY;
                }
            }
            for (int rv = 0; rv < RV; rv++)
                if (!plain || any(top[rv] == (vec_t)-INFINITY)) {
                    top[rv] = (vec_t)-INFINITY;
                    for (int x = 0; x < BLOCK_N; x++) {
                        const vec_t score = st_v[x * RV + rv];
                        top[rv] = QMAX(top[rv], score);
                        nan_lanes[rv] |= NAN_LANES(score);
                    }
                }
            bool tile_nonfinite = false;
            for (int x = 0; x < BLOCK_N; x++)
                tile_nonfinite |= v_nonfinite[x] != 0;
            /* The online softmax, once per tile and lane by lane: the tile's maximum (a NaN score makes
             * its row NaN, as in cl/flash_attention.cl), rows whose maximum grew rescaled, then the
             * weights in place of the scores. */
            bool zero_weight = false;
            for (int rv = 0; rv < RV; rv++) {
                const vec_t tile_max = select(top[rv], (vec_t)NAN, nan_lanes[rv]);
                /* A NaN maximum stays: a later tile's maximum replacing it would rescale by exp(NaN − m)
                 * and, where that factor drops a row seen as masked, lose the NaN. */
                const lanes_t kept = (tile_max <= m[rv]) | isnan(m[rv]);
                if (!all(kept)) {
                    const vec_t grown = select(tile_max, m[rv], kept);
                    /* (m = −inf and a grown maximum: exp(−inf) = 0, which drops nothing; a NaN maximum
                     * makes the factor NaN, and the row with it.) */
                    const vec_t alpha = select(clattn_exp_weight(m[rv] - grown), (vec_t)1.0f, kept);
                    /* A factor that underflowed to 0 drops what came before outright: an inf value
                     * added so far must not turn into 0·inf = NaN. */
                    const lanes_t dropped = alpha == (vec_t)0.0f;
                    l[rv] = select(l[rv] * alpha, (vec_t)0.0f, dropped);
                    for (int d = 0; d < DV; d++) {
                        vec_t *acc = ot_v + d * RV + rv;
                        *acc = select(*acc * alpha, (vec_t)0.0f, dropped);
                    }
                    m[rv] = grown;
                }
                /* While every key so far is masked (m = −inf) a row has nothing to add; the minimum weight
                 * is wanted only where a value row of the tile holds an inf or NaN (see below). Both
                 * choices are made once for the tile, not per key. */
                const lanes_t unseen = m[rv] == (vec_t)-INFINITY;
                vec_t sum = (vec_t)0.0f, smallest = (vec_t)1.0f;
                if (any(unseen))
                    for (int x = 0; x < BLOCK_N; x++) {
                        vec_t *at = st_v + x * RV + rv;
                        const vec_t p = select(clattn_exp_weight(*at - m[rv]), (vec_t)0.0f, unseen);
                        sum += p;
                        smallest = fmin(smallest, p);
                        *at = p;
                    }
                else if (tile_nonfinite)
                    for (int x = 0; x < BLOCK_N; x++) {
                        vec_t *at = st_v + x * RV + rv;
                        const vec_t p = clattn_exp_weight(*at - m[rv]);
                        sum += p;
                        smallest = fmin(smallest, p);
                        *at = p;
                    }
                else
                    for (int x = 0; x < BLOCK_N; x++) {
                        vec_t *at = st_v + x * RV + rv;
                        *at = clattn_exp_weight(*at - m[rv]);
                        sum += *at;
                    }
                l[rv] += sum;
                zero_weight |= ANY_ZERO(smallest);
            }
            /* Where some weight is 0 and the key's value row holds an inf or NaN, rows of weight 0 skip
             * that key (0·inf would be NaN), as on the staged path; finite rows take the plain path. */
            const bool careful = zero_weight && tile_nonfinite;
            /* Output: DB value columns × RV row vectors a step, over every key of the tile. */
            for (int d0 = 0; d0 < DV; d0 += DB) {
                vec_t acc[RV][DB];
                UNROLL for (int rv = 0; rv < RV; rv++)
                    UNROLL for (int c = 0; c < DB; c++)
                        acc[rv][c] = ot_v[(d0 + c) * RV + rv];
                if (!careful) {
                    for (int x = 0; x < BLOCK_N; x++) {
                        float vd[DB];
                        UNROLL for (int c = 0; c < DB; c++)
                            vd[c] = vn[x * DV + d0 + c];
                        UNROLL for (int rv = 0; rv < RV; rv++) {
                            const vec_t p = st_v[x * RV + rv];
                            UNROLL for (int c = 0; c < DB; c++)
                                acc[rv][c] = fma(p, (vec_t)vd[c], acc[rv][c]);
                        }
                    }
                } else {
                    for (int x = 0; x < BLOCK_N; x++)
                        UNROLL for (int rv = 0; rv < RV; rv++) {
                            const vec_t p = st_v[x * RV + rv];
                            const lanes_t skip = p == (vec_t)0.0f;
                            UNROLL for (int c = 0; c < DB; c++)
                                acc[rv][c] = select(fma(p, (vec_t)vn[x * DV + d0 + c], acc[rv][c]), acc[rv][c],
                                                    skip);
                        }
                }
                UNROLL for (int rv = 0; rv < RV; rv++)
                    UNROLL for (int c = 0; c < DB; c++)
                        ot_v[(d0 + c) * RV + rv] = acc[rv][c];
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
#endif

    float row_m[ROWS], row_l[ROWS];
    for (int rv = 0; rv < RV; rv++) {
#ifdef CLATTN_EXACT /* (the 16 lanes in cl/flash_attention.cl's tree: lane x + w joins lane x, w = 8, 4, 2, 1) */
        for (int w = 8; w > 0; w /= 2)
            for (int x = 0; x < w; x++)
                l16[x][rv] += l16[x + w][rv];
        l[rv] = l16[0][rv];
#endif
        VSTORE(m[rv], row_m + rv * VEC);
        VSTORE(l[rv], row_l + rv * VEC);
    }
    for (int r = 0; r < ROWS; r++) {
        if (first + r >= packed_rows)
            break;
        const ulong i = row_i[r], h = row_h[r];
        float row_lse;
#ifdef CLATTN_EXACT
        const float inv = clattn_x_row_finish(row_m[r], row_l[r], sinks ? sinks[h] : -INFINITY, &row_lse);
#else
        const float inv = clattn_row_finish(row_m[r], row_l[r], sinks ? sinks[h] : -INFINITY, &row_lse);
#endif
        const ulong out = clattn_row_offset(q_starts, b, h, i, o_bs, o_hs, o_rs);
        for (ulong d = 0; d < dv; d++)
            STORE_O(EXACT(ot[d * ROWS + r] * inv), o, out + d);
        if (lse)
            lse[q_starts ? (q_starts[b] + i) * heads + h : clattn_matrix_offset(b * heads + h, 0, i, 1, q_len)] = row_lse;
    }
}
