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
 * blocking), TILE, R_MAX, STAGE (tiles in local memory), PREFETCH (the next tile prefetched). */

#define COLS_PER_ITEM ((DV / VEC + WG - 1) / WG)

/* ROWS_T 1 (CPUs, many packed rows: the host's choice): the scores put the rows in the lanes — each of
 * R_PAD/VEC vectors holds VEC rows' scores of one key, formed over d as q_t[d] (the rows' d-th elements,
 * transposed once) times the key's d-th element — and the tile's scores and weights are stored key by
 * key. A key's scores then cost no horizontal sum (with rows along d, each dot product of a head of
 * 128 ended in a sum of 16 lanes that cost as much as its 8 FMAs), the softmax runs VEC rows at a time,
 * and the bookkeeping per score is shared by VEC rows. KT keys a step keep KT chains of FMAs apart. */
#ifndef ROWS_T
#define ROWS_T 0
#endif
#if ROWS_T && (STAGE || WG != 1)
#error "ROWS_T reads K in place with one work-item a group"
#endif
#if ROWS_T
#define R_PAD ((R_MAX + VEC - 1) / VEC * VEC)
#define KT 8
#define TILE_AT(r, g) ((g) * R_PAD + (r))
#else
#define R_PAD R_MAX
#define TILE_AT(r, g) ((r) * TILE + (g))
#endif

/* PREFETCH 1 asks for a 64-byte line through OpenCL C's own prefetch(), which every implementation
 * compiles (some as nothing); 2 through Clang's __builtin_prefetch, which the host selects only on an
 * implementation it has been seen to work on (PoCL): rusticl's SPIR-V translator exits on it (the
 * process with it), so no compiler may ever meet it unasked. */
#if PREFETCH == 2
#define CLATTN_PREFETCH_LINE(p) __builtin_prefetch(p)
#elif PREFETCH == 1
#define CLATTN_PREFETCH_LINE(p) prefetch((__global const uchar *)(p), 64)
#endif
#if PREFETCH
/* A key's K and V rows, line by line. */
__attribute__((always_inline)) inline void clattn_decode_prefetch_key(__global const k_store *k_row,
                                                                      __global const v_store *v_row, ulong dk, ulong dv)
{
    for (ulong e = 0; e < dk; e += 64 / sizeof(k_store))
        CLATTN_PREFETCH_LINE(k_row + e);
    for (ulong e = 0; e < dv; e += 64 / sizeof(v_store))
        CLATTN_PREFETCH_LINE(v_row + e);
}
#endif

/* Where the kernels read a tile's K and V rows: staged in local memory (STAGE 1: GPUs, where the group
 * copies them with coalesced reads), or in place in global memory (CPUs: a copy would cost a pass of its
 * own, and the rows are prefetched a tile ahead instead). */
/* K and V in place are in their storage types (Q_T … build options, cl/common.cl): KT_* and VT_* read
 * a tile's rows, widened, wherever they are. */
#if STAGE
#define K_TILE_T __local const float
#define V_TILE_T __local const float
#define KT_VLOAD(p) VLOAD(p)
#define VT_VLOAD(p) VLOAD(p)
#define KT_LOAD(p, i) ((p)[i])
#define VT_LOAD(p, i) ((p)[i])
#else
#define K_TILE_T __global const k_store
#define V_TILE_T __global const v_store
#define KT_VLOAD(p) VLOAD_AS(K_T, p)
#define VT_VLOAD(p) VLOAD_AS(V_T, p)
#define KT_LOAD(p, i) LOAD_K(p, i)
#define VT_LOAD(p, i) LOAD_V(p, i)
#endif

/* KQ dot products q · k_x over n elements, key rows k_rs apart (q in local memory): VEC
 * lanes at a time, KQ independent chains that share each load of q, then the rest one by one. Inlined:
 * a call would return the sums through the stack. */
__attribute__((always_inline)) inline void clattn_decode_dots(__local const float *q, K_TILE_T *k, ulong k_rs, ulong n,
                                                              float *s)
{
    vec_t sum[KQ];
    UNROLL for (int x = 0; x < KQ; x++)
        sum[x] = (vec_t)0.0f;
    ulong d = 0;
    for (; d + VEC <= n; d += VEC) {
        const vec_t qv = VLOAD(q + d);
        UNROLL for (int x = 0; x < KQ; x++)
            sum[x] = fma(qv, KT_VLOAD(k + x * k_rs + d), sum[x]);
    }
    UNROLL for (int x = 0; x < KQ; x++) {
        float t = HSUM(sum[x]);
        for (ulong e = d; e < n; e++)
            t = fma(q[e], KT_LOAD(k, x * k_rs + e), t);
        s[x] = t;
    }
}

#if RB > 1
/* RB rows × KQ keys of dot products: each vector of K serves RB rows, each of q KQ keys (the register
 * blocking of a GEMM micro-kernel). */
__attribute__((always_inline)) inline void clattn_decode_dots_block(__local const float *q, K_TILE_T *k, ulong k_rs,
                                                                    ulong n, float s[RB][KQ])
{
    vec_t sum[RB][KQ];
    UNROLL for (int y = 0; y < RB; y++)
        UNROLL for (int x = 0; x < KQ; x++)
            sum[y][x] = (vec_t)0.0f;
    ulong d = 0;
    for (; d + VEC <= n; d += VEC) {
        vec_t kv[KQ];
        UNROLL for (int x = 0; x < KQ; x++)
            kv[x] = KT_VLOAD(k + x * k_rs + d);
        UNROLL for (int y = 0; y < RB; y++) {
            const vec_t qv = VLOAD(q + y * DK + d);
            UNROLL for (int x = 0; x < KQ; x++)
                sum[y][x] = fma(qv, kv[x], sum[y][x]);
        }
    }
    UNROLL for (int y = 0; y < RB; y++)
        UNROLL for (int x = 0; x < KQ; x++) {
            float t = HSUM(sum[y][x]);
            for (ulong e = d; e < n; e++)
                t = fma(q[y * DK + e], KT_LOAD(k, x * k_rs + e), t);
            s[y][x] = t;
        }
}
#endif

/* One row's scores of the tile's keys g … g+KQ−1 (absolute j … j+KQ−1), whose rows lie k_rs apart from
 * k_group: each dot product times its key's int8 scale (k_scale[x]; 1 otherwise) and the row's share of
 * the scale (factor, clattn_score_split), or −inf where the row cannot see the key (outside
 * [begin, end)) or it lies past the tile's `keys`. The factors never meet a hidden key: its scale may be
 * 0 (an all-zero row) or NaN (a row that held inf or NaN), and −inf times either is NaN. */
__attribute__((always_inline)) inline void clattn_decode_row_scores(__local const float *q, K_TILE_T *k_group,
                                                                    ulong k_rs, ulong dk, ulong j, ulong g,
                                                                    ulong keys, ulong begin, ulong end,
                                                                    const float *k_scale, float factor, float *s)
{
    if (j >= begin && j + KQ <= end && g + KQ <= keys) {
        clattn_decode_dots(q, k_group, k_rs, dk, s);
        UNROLL for (int x = 0; x < KQ; x++)
            s[x] = s[x] * k_scale[x] * factor;
        return;
    }
    for (int x = 0; x < KQ; x++) {
        s[x] = -INFINITY;
        if (g + x < keys && j + x >= begin && j + x < end) {
            float one[KQ];
            clattn_decode_dots(q, k_group + x * k_rs, 0, dk, one);
            s[x] = one[0] * k_scale[x] * factor;
        }
    }
}

/* A visible key's score with the soft-cap, ALiBi and the additive mask applied (−inf stays −inf). */
inline float clattn_decode_terms(float s, float softcap, const clattn_row_terms *t, ulong j, long pos, __global const uchar *mask,
                                 int mask_type, int mask_layout, ulong b, ulong h, ulong heads, ulong i, ulong q_len,
                                 ulong mask_cols)
{
    if (s == -INFINITY)
        return s;
    return clattn_score_terms(s, softcap, t, (long)j, pos,
                              clattn_additive_mask(mask, mask_type, mask_layout, b, h, heads, i, j, q_len, mask_cols));
}

/* A row's accumulators for a new tile: rescaled by alpha, or zero when alpha underflowed. */
__attribute__((always_inline)) inline void clattn_decode_rescale(const vec_t *acc, float alpha, vec_t *a)
{
    UNROLL for (int c = 0; c < COLS_PER_ITEM; c++)
        a[c] = alpha == 0.0f ? (vec_t)0.0f : alpha == 1.0f ? acc[c] : acc[c] * alpha;
}

/* The n < VEC elements of a row's last, partial vector column (zeros beyond). */
inline vec_t clattn_decode_load_tail(V_TILE_T *p, ulong n)
{
    float t[VEC];
    for (int x = 0; x < VEC; x++)
        t[x] = (ulong)x < n ? VT_LOAD(p, x) : 0.0f;
    return VLOAD(t);
}

/* a += p · this work-item's columns of a V row of the tile (starting at its first column): `full`
 * whole vectors, then, if `tail`, a last vector of tail_n < VEC columns; nothing for p = 0. */
__attribute__((always_inline)) inline void clattn_decode_add(vec_t *a, float p, V_TILE_T *v_row, int full,
                                                             bool tail, ulong tail_n)
{
    if (p == 0.0f)
        return;
    if (full == COLS_PER_ITEM) {
        UNROLL for (int c = 0; c < COLS_PER_ITEM; c++)
            a[c] = fma((vec_t)p, VT_VLOAD(v_row + c * WG * VEC), a[c]);
        return;
    }
    UNROLL for (int c = 0; c < COLS_PER_ITEM; c++) { /* (constant indices only: a[] stays in registers) */
        if (c < full)
            a[c] = fma((vec_t)p, VT_VLOAD(v_row + c * WG * VEC), a[c]);
        else if (c == full && tail)
            a[c] = fma((vec_t)p, clattn_decode_load_tail(v_row + c * WG * VEC, tail_n), a[c]);
    }
}

#if STAGE
/* Rows j0 … j0+keys−1 of a K/V head (clattn_kv_row's arguments, and `base` the tensor) into local
 * memory, ld floats apart, widened and an int8 row multiplied by its scale (`scales`; NULL: none),
 * zero-filled from n to the next multiple of VEC (so that whole vectors can be read); neighbouring
 * work-items copy neighbouring elements. One function per storage type. */
#define CLATTN_DECODE_STAGE(name, T, LOAD)                                                                  \
    __attribute__((always_inline)) inline void name(__local float *dst, ulong ld, __global const T *base,   \
                                                    __global const float *scales, ulong head, ulong rs,    \
                                                    __global const int *table, uint shift, ulong block_stride, \
                                                    ulong j0, ulong keys, ulong n, ulong lid)              \
    {                                                                                                       \
        const ulong width = (n + VEC - 1) / VEC * VEC;                                                      \
        for (ulong t = lid; t < keys * width; t += WG) {                                                    \
            const ulong jj = t / width, e = t % width;                                                      \
            const ulong row = clattn_kv_row(head, rs, table, shift, block_stride, j0 + jj);                 \
            dst[jj * ld + e] = e < n ? LOAD(base, row + e) * (scales ? scales[row / n] : 1.0f) : 0.0f;     \
        }                                                                                                   \
    }
CLATTN_DECODE_STAGE(clattn_decode_stage_k, k_store, LOAD_K)
CLATTN_DECODE_STAGE(clattn_decode_stage_v, v_store, LOAD_V)
#endif

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
    /* The rows' q, times the power of two of clattn_score_split, into local memory: every work-item
     * reads each row whole for its largest element (a few hundred floats, once), then writes its part. */
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
#if ROWS_T
        /* VEC rows at a time: the tile's maximum (NaN where a score is), then each row's update, then
         * the weights and their sum. */
        float tile_sum[R_PAD], tile_max[R_PAD];
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
        /* Each work-item follows every row's maximum (the same values in all of them); a NaN score
         * makes the row NaN, as on the other paths. The weights are computed VEC keys at a time. */
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
        barrier(CLK_LOCAL_MEM_FENCE);
    }

    for (int r = 0; r < rows; r++) {
        const ulong i = row_i[r], h = row_h[r];
        float row_lse;
        const float inv = clattn_row_finish(m[r], l[r], sinks ? sinks[h] : -INFINITY, &row_lse);
        __global float *out = o + split * o_split_stride + clattn_row_offset(o_starts, b, h, i, o_bs, o_hs, o_rs);
        for (int c = 0; c < COLS_PER_ITEM; c++) {
            const ulong col = (lid + (ulong)c * WG) * VEC;
            float part[VEC];
            VSTORE(acc[r][c] * inv, part);
            for (int x = 0; x < VEC; x++)
                if (col + x < dv)
                    out[col + x] = part[x];
        }
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
