/* The decode kernels' parts (cl/decode.cl): their tile geometry (rows along d, or ROWS_T: rows in the
 * lanes), where a tile's K and V rows are read (STAGE: local memory; else in place, prefetched a tile
 * ahead), the dot products, scores and weighted sums of a tile, and the phases of
 * clattn_decode_partial that touch no K or V row (the rows' q into local memory, the tile's weights,
 * the running sums, a row's output). All inlined into the kernel: private arrays are passed by pointer,
 * never structs by value (see clattn_row_terms in cl/masks.cl). */

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
