/* The decode kernels' tiles (cl/decode.cl): their geometry (rows along d, or ROWS_T: rows in the lanes),
 * where a tile's K and V rows are read (STAGE: local memory; else in place, prefetched a tile ahead), and
 * what reads them: the dot products, a tile's scores and its weighted sums. All inlined into the kernel:
 * private arrays are passed by pointer, never structs by value (see clattn_row_terms in cl/masks.cl). */

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

/* (PREFETCH and CLATTN_PREFETCH_LINE: cl/common.cl's.) */
#if PREFETCH
/* A key's K and V rows, line by line. */
__attribute__((always_inline)) inline void clattn_decode_prefetch_key(__global const uchar *k_row,
                                                                      __global const uchar *v_row, ulong dk, ulong dv)
{
    for (ulong e = 0; e < dk / K_BLOCK * K_BLOCK_BYTES; e += 64)
        CLATTN_PREFETCH_LINE(k_row + e);
    for (ulong e = 0; e < dv / V_BLOCK * V_BLOCK_BYTES; e += 64)
        CLATTN_PREFETCH_LINE(v_row + e);
}
#endif

/* Where the kernels read a tile's K and V rows: staged in local memory (STAGE 1: GPUs, where the group
 * copies them with coalesced reads), or in place in global memory (CPUs: a copy would cost a pass of its
 * own, and the rows are prefetched a tile ahead instead). */
/* K and V in place are in their storage formats (K_FMT, V_FMT: cl/formats.cl): KT_* and VT_* read value
 * i of a tile's rows (base p: K_TILE_BASE), widened, wherever they are. Rows are addressed by their first
 * value's index, never by a pointer, since a block format's values have no address of their own. */
#if STAGE
#define K_TILE_T __local const float
#define V_TILE_T __local const float
#define KT_VLOAD(p, i) VLOAD((p) + (i))
#define VT_VLOAD(p, i) VLOAD((p) + (i))
#define KT_LOAD(p, i) ((p)[i])
#define VT_LOAD(p, i) ((p)[i])
#else
#define K_TILE_T __global const k_store
#define V_TILE_T __global const v_store
#define KT_VLOAD(p, i) VLOAD_K(p, i)
#define VT_VLOAD(p, i) VLOAD_V(p, i)
#define KT_LOAD(p, i) LOAD_K(p, i)
#define VT_LOAD(p, i) LOAD_V(p, i)
#endif

/* A tile's K and V rows, by the names the kernel and its parts (CLATTN_DECODE_KV_PARAMS) give them: K/V
 * head k_head (v_head) of k (v), rows k_rs apart, through the sequence's block table when paged
 * (clattn_kv_row); key j's row at K_ROW(j); the tile's first key j0 and its count `keys`, its jj-th row
 * at K_TILE_ROW(jj) (k_stage when STAGE). */
/* (K_ROW_AT, V_ROW_AT: cl/common.cl's.) The first byte of key j's K (V) row (prefetches). */
#define K_ROW_BYTES(j) ((__global const uchar *)k + K_ROW_AT(j) / K_BLOCK * K_BLOCK_BYTES)
#define V_ROW_BYTES(j) ((__global const uchar *)v + V_ROW_AT(j) / V_BLOCK * V_BLOCK_BYTES)
/* A scaled row (int8, FP8 with scales) read in place is dequantised by its scale: a visible key's score (q·k_int8·scale) and a
 * value's nonzero weight (p·scale·v_int8) take the factor — never a hidden key's −inf or a weight of
 * 0, which must stay what they are whatever the scale (0, or NaN for a row that held inf or NaN);
 * staged rows have it already. */
#if HAS_K_SCALES && !STAGE
#define K_SCALE(j) k_scales[K_ROW_AT(j) / dk]
#else
#define K_SCALE(j) 1.0f
#endif
#if HAS_V_SCALES && !STAGE
#define V_SCALE(j) v_scales[V_ROW_AT(j) / v_scale_row]
#else
#define V_SCALE(j) 1.0f
#endif
#if STAGE
#define K_TILE_BASE k_stage
#define V_TILE_BASE v_stage
#define K_TILE_ROW(jj) ((jj) * DK)
#define V_TILE_ROW(jj) ((jj) * DV)
#else
#define K_TILE_BASE k
#define V_TILE_BASE v
/* In place, a row's address is formed for every step of the tile, also past its last key (whose
 * scores are −inf and whose rows are never read): clamped to the last key, so that a paged cache's
 * block table is never read beyond the call's blocks. */
#define K_TILE_ROW(jj) K_ROW_AT(j0 + min((ulong)(jj), keys - 1))
#define V_TILE_ROW(jj) V_ROW_AT(j0 + min((ulong)(jj), keys - 1))
#endif

/* The names above as the parameters of the parts that read K or V rows, and the kernel's arguments. */
#if STAGE
#define CLATTN_DECODE_STAGED(...) , __VA_ARGS__
#else
#define CLATTN_DECODE_STAGED(...)
#endif
#define CLATTN_DECODE_KV_PARAMS                                                                               \
    __global const k_store *k, __global const v_store *v, __global const float *k_scales,                    \
        __global const float *v_scales, __global const int *table, uint block_shift, ulong k_head, ulong k_rs,  \
        ulong k_bs, ulong v_head, ulong v_rs, ulong v_bs, ulong dk, ulong dv, ulong v_scale_row, ulong j0,      \
        ulong keys CLATTN_DECODE_STAGED(__local const float *k_stage, __local const float *v_stage)
#define CLATTN_DECODE_KV_ARGS                                                                                 \
    k, v, k_scales, v_scales, table, block_shift, k_head, k_rs, k_bs, v_head, v_rs, v_bs, dk, dv, v_scale_row, \
        j0, keys CLATTN_DECODE_STAGED(k_stage, v_stage)
/* What the score terms of a tile's rows read (clattn_decode_terms), the same way. */
#define CLATTN_DECODE_TERMS_PARAMS                                                                            \
    bool score_terms, bool tree_only, float softcap, const clattn_row_terms *terms, const long *pos,               \
        __global const uchar *mask,                                                                           \
        int mask_type, int mask_layout, ulong b, const ulong *row_h, ulong heads, const ulong *row_i,          \
        ulong q_len, ulong mask_cols
#define CLATTN_DECODE_TERMS_ARGS                                                                              \
    score_terms, tree_only, softcap, terms, pos, mask, mask_type, mask_layout, b, row_h, heads, row_i, q_len,     \
        mask_cols

/* KQ dot products q · k_x over n elements, key rows k_rs apart from value `at` of k (q in local memory): VEC
 * lanes at a time, KQ independent chains that share each load of q, then the rest one by one. Inlined:
 * a call would return the sums through the stack. */
__attribute__((always_inline)) inline void clattn_decode_dots(__local const float *q, K_TILE_T *k, ulong at, ulong k_rs,
                                                              ulong n, float *s)
{
    vec_t sum[KQ];
    UNROLL for (int x = 0; x < KQ; x++)
        sum[x] = (vec_t)0.0f;
    ulong d = 0;
    for (; d + VEC <= n; d += VEC) {
        const vec_t qv = VLOAD(q + d);
        UNROLL for (int x = 0; x < KQ; x++)
            sum[x] = fma(qv, KT_VLOAD(k, at + x * k_rs + d), sum[x]);
    }
    UNROLL for (int x = 0; x < KQ; x++) {
        float t = HSUM(sum[x]);
        for (ulong e = d; e < n; e++)
            t = fma(q[e], KT_LOAD(k, at + x * k_rs + e), t);
        s[x] = t;
    }
}

#if RB > 1
/* RB rows × KQ keys of dot products: each vector of K serves RB rows, each of q KQ keys (the register
 * blocking of a GEMM micro-kernel). */
__attribute__((always_inline)) inline void clattn_decode_dots_block(__local const float *q, K_TILE_T *k, ulong at,
                                                                    ulong k_rs, ulong n, float s[RB][KQ])
{
    vec_t sum[RB][KQ];
    UNROLL for (int y = 0; y < RB; y++)
        UNROLL for (int x = 0; x < KQ; x++)
            sum[y][x] = (vec_t)0.0f;
    ulong d = 0;
    for (; d + VEC <= n; d += VEC) {
        vec_t kv[KQ];
        UNROLL for (int x = 0; x < KQ; x++)
            kv[x] = KT_VLOAD(k, at + x * k_rs + d);
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
                t = fma(q[y * DK + e], KT_LOAD(k, at + x * k_rs + e), t);
            s[y][x] = t;
        }
}
#endif

/* One row's scores of the tile's keys g … g+KQ−1 (absolute j … j+KQ−1), whose rows lie k_rs apart from
 * value `at` of k: each dot product times its key's int8 scale (k_scale[x]; 1 otherwise) and the row's share of
 * the scale (factor, clattn_score_split), or −inf where the row cannot see the key (outside
 * [begin, end)) or it lies past the tile's `keys`. The factors never meet a hidden key: its scale may be
 * 0 (an all-zero row) or NaN (a row that held inf or NaN), and −inf times either is NaN. */
__attribute__((always_inline)) inline void clattn_decode_row_scores(__local const float *q, K_TILE_T *k, ulong at,
                                                                    ulong k_rs, ulong dk, ulong j, ulong g,
                                                                    ulong keys, ulong begin, ulong end,
                                                                    const float *k_scale, float factor, float *s)
{
    if (j >= begin && j + KQ <= end && g + KQ <= keys) {
        clattn_decode_dots(q, k, at, k_rs, dk, s);
        UNROLL for (int x = 0; x < KQ; x++)
            s[x] = s[x] * k_scale[x] * factor;
        return;
    }
    for (int x = 0; x < KQ; x++) {
        s[x] = -INFINITY;
        if (g + x < keys && j + x >= begin && j + x < end) {
            float one[KQ];
            clattn_decode_dots(q, k, at + x * k_rs, 0, dk, one);
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

/* The n < VEC elements of a row's last, partial vector column from value `at` of p (zeros beyond). */
inline vec_t clattn_decode_load_tail(V_TILE_T *p, ulong at, ulong n)
{
    float t[VEC];
    for (int x = 0; x < VEC; x++)
        t[x] = (ulong)x < n ? VT_LOAD(p, at + x) : 0.0f;
    return VLOAD(t);
}

/* a += p · this work-item's columns of a V row of the tile (from value `at` of v, its first column): `full`
 * whole vectors, then, if `tail`, a last vector of tail_n < VEC columns; nothing for p = 0. */
__attribute__((always_inline)) inline void clattn_decode_add(vec_t *a, float p, V_TILE_T *v, ulong at, int full,
                                                             bool tail, ulong tail_n)
{
    if (p == 0.0f)
        return;
    if (full == COLS_PER_ITEM) {
        UNROLL for (int c = 0; c < COLS_PER_ITEM; c++)
            a[c] = fma((vec_t)p, VT_VLOAD(v, at + c * WG * VEC), a[c]);
        return;
    }
    UNROLL for (int c = 0; c < COLS_PER_ITEM; c++) { /* (constant indices only: a[] stays in registers) */
        if (c < full)
            a[c] = fma((vec_t)p, VT_VLOAD(v, at + c * WG * VEC), a[c]);
        else if (c == full && tail)
            a[c] = fma((vec_t)p, clattn_decode_load_tail(v, at + c * WG * VEC, tail_n), a[c]);
    }
}

#if STAGE
/* Rows j0 … j0+keys−1 of a K/V head (clattn_kv_row's arguments, and `base` the tensor) into local
 * memory, ld floats apart, widened and an int8 row multiplied by its scale (`scales`; NULL: none),
 * zero-filled from n to the next multiple of VEC (so that whole vectors can be read); neighbouring
 * work-items copy neighbouring elements. One function per storage type. */
#define CLATTN_DECODE_STAGE(name, T, LOAD, DEQUANT_ROW)                                                     \
    __attribute__((always_inline)) inline void name(__local float *dst, ulong ld, __global const T *base,   \
                                                    __global const float *scales, ulong head, ulong rs,    \
                                                    __global const int *table, uint shift, ulong block_stride, \
                                                    ulong j0, ulong keys, ulong n, ulong scale_row, ulong lid) \
    {                                                                                                       \
        const ulong width = (n + VEC - 1) / VEC * VEC;                                                      \
        if (WG == 1 && width == n) { /* one work-item (a CPU's staged shape): row by row, VEC at a time */  \
            for (ulong jj = 0; jj < keys; jj++) {                                                           \
                const ulong row = clattn_kv_row(head, rs, table, shift, block_stride, j0 + jj);             \
                DEQUANT_ROW(base, row, n, scales ? scales[row / scale_row] : 1.0f, dst + jj * ld);          \
            }                                                                                               \
            return;                                                                                         \
        }                                                                                                   \
        for (ulong t = lid; t < keys * width; t += WG) {                                                    \
            const ulong jj = t / width, e = t % width;                                                      \
            const ulong row = clattn_kv_row(head, rs, table, shift, block_stride, j0 + jj);                 \
            dst[jj * ld + e] = e < n ? LOAD(base, row + e) * (scales ? scales[row / scale_row] : 1.0f) : 0.0f; \
        }                                                                                                   \
    }
CLATTN_DECODE_STAGE(clattn_decode_stage_k, k_store, LOAD_K, clattn_dequant_row_k)
CLATTN_DECODE_STAGE(clattn_decode_stage_v, v_store, LOAD_V, clattn_dequant_row_v)
#endif

/* The tile's scores into s_tile (at TILE_AT(row, key)): the dot products of the rows' q (q_tile) with
 * the tile's K rows, times each row's score_factor and an int8 key's scale, the score terms applied, and
 * −inf for the keys a row cannot see (outside [row_begin, row_end)) or past the tile. With PREFETCH the
 * next tile's rows (below walk_end) are asked for meanwhile. */
__attribute__((always_inline)) inline void clattn_decode_scores(CLATTN_DECODE_KV_PARAMS, ulong walk_end, ulong lid,
                                                                __local const float *q_tile,
                                                                const float *score_factor, const ulong *row_begin,
                                                                const ulong *row_end, int rows,
                                                                CLATTN_DECODE_TERMS_PARAMS, __local float *s_tile)
{
#if STAGE
    const ulong kt_rs = DK;
#else
    const ulong kt_rs = k_rs;
#endif
#if ROWS_T
    for (ulong g = 0; g < TILE; g += KT) {
        const ulong j = j0 + g;
#if PREFETCH
        UNROLL for (int x = 0; x < KT; x++) /* (the next tile's keys: see below) */
            if (j + TILE + x < walk_end)
                clattn_decode_prefetch_key(K_ROW_BYTES(j + TILE + x), V_ROW_BYTES(j + TILE + x), dk, dv);
#endif
        ulong k_row[KT];
        float k_scale[KT];
        UNROLL for (int x = 0; x < KT; x++) {
            k_row[x] = K_TILE_ROW(g + x);
#if HAS_K_SCALES
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
                kd[x] = KT_LOAD(k, k_row[x] + d);
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
     * (a tile every row sees whole, without terms or before every row's tree when that is the only one, as it
     * is). */
    bool tile_whole = keys == TILE;
    for (int r = 0; r < rows; r++)
        tile_whole = tile_whole && row_begin[r] <= j0 && j0 + TILE <= row_end[r] &&
                     (!score_terms || (tree_only && (long)(j0 + TILE) <= clattn_tree_first(&terms[r])));
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
                clattn_decode_prefetch_key(K_ROW_BYTES(j + TILE + x), V_ROW_BYTES(j + TILE + x), dk, dv);
#endif
        /* (keys past the tile are never read: their scores are −inf, and so stay) */
        float k_scale[KQ];
        UNROLL for (int x = 0; x < KQ; x++)
#if HAS_K_SCALES && !STAGE
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
                clattn_decode_dots_block(q_tile + r * DK, K_TILE_BASE, K_TILE_ROW(g), kt_rs, dk, s);
            UNROLL for (int y = 0; y < RB; y++) {
                if (whole)
                    UNROLL for (int x = 0; x < KQ; x++)
                        s[y][x] = s[y][x] * k_scale[x] * score_factor[r + y];
                else
                    clattn_decode_row_scores(q_tile + (r + y) * DK, K_TILE_BASE, K_TILE_ROW(g), kt_rs, dk, j, g, keys,
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
            clattn_decode_row_scores(q_tile + r * DK, K_TILE_BASE, K_TILE_ROW(g), kt_rs, dk, j, g, keys, row_begin[r],
                                     row_end[r],
                                     k_scale, score_factor[r], s);
            for (int x = 0; x < KQ; x++)
                s_tile[r * TILE + g + x] =
                    score_terms ? clattn_decode_terms(s[x], softcap, &terms[r], j + x, pos[r], mask, mask_type,
                                                      mask_layout, b, row_h[r], heads, row_i[r], q_len, mask_cols)
                                : s[x];
        }
    }
#endif
}

/* The tile's weighted sums into the rows' accumulators (this work-item's columns: `full` whole vectors,
 * then a tail of tail_n), rescaled first by alpha: the accumulators in registers for the tile, two rows
 * at a time where both weigh a key (each load of V then serves both), else row by row. A weight of 0 —
 * a masked or underflowed key — adds nothing, not even an inf value; a factor that underflowed to 0
 * drops what came before (never 0·inf). */
__attribute__((always_inline)) inline void clattn_decode_accumulate(CLATTN_DECODE_KV_PARAMS,
                                                                    __local const float *p_tile, const float *alpha,
                                                                    int rows, ulong lid, int full, bool tail,
                                                                    ulong tail_n, vec_t (*acc)[COLS_PER_ITEM])
{
#if HAS_V_SCALES && !STAGE
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
            const ulong v_at = V_TILE_ROW(jj) + lid * VEC;
            if (p0 != 0.0f && p1 != 0.0f && full == COLS_PER_ITEM) {
                UNROLL for (int c = 0; c < COLS_PER_ITEM; c++) {
                    const vec_t vv = VT_VLOAD(V_TILE_BASE, v_at + c * WG * VEC);
                    a0[c] = fma((vec_t)p0, vv, a0[c]);
                    a1[c] = fma((vec_t)p1, vv, a1[c]);
                }
            } else {
                clattn_decode_add(a0, p0, V_TILE_BASE, v_at, full, tail, tail_n);
                clattn_decode_add(a1, p1, V_TILE_BASE, v_at, full, tail, tail_n);
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
                clattn_decode_add(a, p_tile[TILE_AT(r, jj)] * V_TILE_SCALE(jj), V_TILE_BASE, V_TILE_ROW(jj) + lid * VEC, full,
                                  tail, tail_n);
        UNROLL for (int c = 0; c < COLS_PER_ITEM; c++)
            acc[r][c] = a[c];
    }
}
