/* The fused kernels' reproducible arithmetic (-DCLATTN_EXACT=1; docs/reproducible.md), shared by
 * cl/flash_attention.cl (the keys in the lanes) and cl/flash_lanes.cl (the rows in the lanes), which form the same
 * bits (cl/exact_weights.cl's scores too): the dot product's order, the cuts that keep subnormals from the hardware,
 * and the staging (or the in-place reading) of K and V rows with the flags of the keys whose small entries need the
 * careful path. */
#ifdef CLATTN_EXACT
#define EXACT_MIN 0x1.000002p-126f /* magnitudes below are cut to 0 (FLT_MIN too: rounding to it may differ) */
#define EXACT_SUM_MIN 0x1p-103f    /* a weighted sum cut below this is a multiple of 2^-126 */
#define EXACT_Q_MIN 0x1p-40f       /* q·2^k entries below are 0 */
#define EXACT_K_FAST 0x1p-40f      /* K entries from here up (or 0) keep a dot product on the grid */
#define EXACT_V_FAST 0x1p-30f      /* V entries from here up (or 0) keep a weighted sum on the grid */
#define EXACT_WEIGHT_MIN 0x1p-50f  /* weights below are 0 */
/* x with magnitudes below `limit` replaced by +0 (NaN and inf kept): a scalar, and lane by lane. */
#define CUT(x, limit) (fabs(x) < (limit) ? 0.0f : (x))
#if VEC == 1
#define VCUT(x, limit) CUT(x, limit)
#else
#define VCUT(x, limit) select((x), (vec_t)0.0f, fabs(x) < (vec_t)(limit))
#endif
#define EXACT(x) CUT(x, EXACT_MIN)
#define VCUT_OUT(x) VCUT(x, EXACT_MIN)

/* The reproducible dot product (docs/reproducible.md): 8 chains of fma, chain l over d = l, l + 8, l + 16 … ascending
 * from +0, added in the fixed tree ((c0 + c4) + (c2 + c6)) + ((c1 + c5) + (c3 + c7)) — the shape in which a key row
 * read 8 entries at a time gives its dot product with no transpose (EXACT_IN_PLACE), and which a tile staged with
 * the keys or the rows in the lanes forms as easily. EXACT_DOT_TREE forms the chains in the tree's leaf order,
 * holding three partial results A, B, C and the chain T: CHAIN(l, X, STEP_CUT) sets X to chain l, and
 * ADD(X, Y, STEP_CUT) X to X + Y, each step's result through STEP_CUT(f, key) (the careful path's cut of a key's
 * partial sums, or EXACT_NO_CUT); the dot product ends in A. */
#define EXACT_DOT_TREE(A, B, C, T, CHAIN, ADD, STEP_CUT)                                                     \
    do {                                                                                                     \
        EXACT_DOT_HALF(0, A, B, T, CHAIN, ADD, STEP_CUT);                                                    \
        EXACT_DOT_HALF(1, B, C, T, CHAIN, ADD, STEP_CUT);                                                    \
        ADD(A, B, STEP_CUT);                                                                                 \
    } while (0)
/* Half of it: X = (chain l + chain l + 4) + (chain l + 2 + chain l + 6), with Y and T beside. */
#define EXACT_DOT_HALF(l, X, Y, T, CHAIN, ADD, STEP_CUT)                                                     \
    do {                                                                                                     \
        CHAIN(l, X, STEP_CUT);                                                                               \
        CHAIN((l) + 4, T, STEP_CUT);                                                                         \
        ADD(X, T, STEP_CUT);                                                                                 \
        CHAIN((l) + 2, Y, STEP_CUT);                                                                         \
        CHAIN((l) + 6, T, STEP_CUT);                                                                         \
        ADD(Y, T, STEP_CUT);                                                                                 \
        ADD(X, Y, STEP_CUT);                                                                                 \
    } while (0)
#define EXACT_NO_CUT(f, key) (f)
/* EXACT_DOT_TREE with KEY_CUT where `careful` (some key has K entries under EXACT_K_FAST), else uncut: the code of
 * each path its own, so the fast one carries no test. */
#define EXACT_DOTS(careful, A, B, C, T, CHAIN, ADD, KEY_CUT)                                                 \
    do {                                                                                                     \
        if (careful)                                                                                         \
            EXACT_DOT_TREE(A, B, C, T, CHAIN, ADD, KEY_CUT);                                                 \
        else                                                                                                 \
            EXACT_DOT_TREE(A, B, C, T, CHAIN, ADD, EXACT_NO_CUT);                                            \
    } while (0)
#define EXACT_DOT_LANES 8 /* the chains of a dot product */

/* The magnitude bits of x less one, as an unsigned integer: 0 becomes the largest, so the smallest of these
 * over some values is that of their smallest nonzero magnitude (a few integer operations a value). */
#define LOW_BITS(x) ((as_uint(x) & 0x7fffffffu) - 1u)
#define LOW_BITS_V(x) ((AS_UINT(x) & 0x7fffffffu) - 1u)

/* The smallest lane of x: halves folded in registers (a store and reload of the lanes stalls on the store). */
inline uint clattn_lowest(uvec_t x)
{
#if VEC == 16
    const uint8 h8 = min(x.lo, x.hi);
    const uint4 h4 = min(h8.lo, h8.hi);
#elif VEC == 8
    const uint4 h4 = min(x.lo, x.hi);
#elif VEC == 4
    const uint4 h4 = x;
#endif
#if VEC >= 4
    const uint2 h2 = min(h4.lo, h4.hi);
    return min(h2.x, h2.y);
#elif VEC == 2
    return min(x.x, x.y);
#else
    return x;
#endif
}

/* small_entries' flags for one staged key from the LOW_BITS of its K and V rows' smallest nonzero entries. */
inline uchar clattn_small_entries(uint k_lowest, uint v_lowest)
{
    return (uchar)((k_lowest < LOW_BITS(EXACT_K_FAST)) | ((v_lowest < LOW_BITS(EXACT_V_FAST)) << 1));
}

/* x[0 … VEC−1] (rows of a VEC×VEC block) transposed in registers: on return x[i] holds lane i of every input row,
 * in order. Halves, quarters … of the rows swapped pairwise (log2 VEC rounds of two-source shuffles): storing
 * lane by lane instead costs a scatter per row. */
#define TRANSPOSE_ROUND(x, y, b, LO, HI)                                                                     \
    for (int i0_ = 0; i0_ < VEC; i0_ += 2 * (b))                                                             \
        for (int i_ = i0_; i_ < i0_ + (b); i_++) {                                                           \
            const vec_t a_ = x[i_], c_ = x[i_ + (b)];                                                        \
            y[i_] = LO(a_, c_);                                                                              \
            y[i_ + (b)] = HI(a_, c_);                                                                        \
        }
#if VEC == 16
#define LO8(a, c) (float16)((a).lo, (c).lo)
#define HI8(a, c) (float16)((a).hi, (c).hi)
#define LO4(a, c) (float16)((a).s0123, (c).s0123, (a).s89ab, (c).s89ab)
#define HI4(a, c) (float16)((a).s4567, (c).s4567, (a).scdef, (c).scdef)
#define LO2(a, c) (float16)((a).s01, (c).s01, (a).s45, (c).s45, (a).s89, (c).s89, (a).scd, (c).scd)
#define HI2(a, c) (float16)((a).s23, (c).s23, (a).s67, (c).s67, (a).sab, (c).sab, (a).sef, (c).sef)
#define LO1(a, c) (float16)((a).s0, (c).s0, (a).s2, (c).s2, (a).s4, (c).s4, (a).s6, (c).s6, (a).s8, (c).s8, (a).sa, (c).sa, (a).sc, (c).sc, (a).se, (c).se)
#define HI1(a, c) (float16)((a).s1, (c).s1, (a).s3, (c).s3, (a).s5, (c).s5, (a).s7, (c).s7, (a).s9, (c).s9, (a).sb, (c).sb, (a).sd, (c).sd, (a).sf, (c).sf)
#elif VEC == 8
#define LO4(a, c) (float8)((a).lo, (c).lo)
#define HI4(a, c) (float8)((a).hi, (c).hi)
#define LO2(a, c) (float8)((a).s01, (c).s01, (a).s45, (c).s45)
#define HI2(a, c) (float8)((a).s23, (c).s23, (a).s67, (c).s67)
#define LO1(a, c) (float8)((a).s0, (c).s0, (a).s2, (c).s2, (a).s4, (c).s4, (a).s6, (c).s6)
#define HI1(a, c) (float8)((a).s1, (c).s1, (a).s3, (c).s3, (a).s5, (c).s5, (a).s7, (c).s7)
#elif VEC == 4
#define LO2(a, c) (float4)((a).lo, (c).lo)
#define HI2(a, c) (float4)((a).hi, (c).hi)
#define LO1(a, c) (float4)((a).s0, (c).s0, (a).s2, (c).s2)
#define HI1(a, c) (float4)((a).s1, (c).s1, (a).s3, (c).s3)
#elif VEC == 2
#define LO1(a, c) (float2)((a).s0, (c).s0)
#define HI1(a, c) (float2)((a).s1, (c).s1)
#endif
#if VEC > 1
inline void clattn_transpose(vec_t *x)
{
    vec_t y[VEC];
#if VEC == 16
    TRANSPOSE_ROUND(x, y, 8, LO8, HI8)
    TRANSPOSE_ROUND(y, x, 4, LO4, HI4)
    TRANSPOSE_ROUND(x, y, 2, LO2, HI2)
    TRANSPOSE_ROUND(y, x, 1, LO1, HI1)
#elif VEC == 8
    TRANSPOSE_ROUND(x, y, 4, LO4, HI4)
    TRANSPOSE_ROUND(y, x, 2, LO2, HI2)
    TRANSPOSE_ROUND(x, y, 1, LO1, HI1)
    for (int i = 0; i < VEC; i++)
        x[i] = y[i];
#elif VEC == 4
    TRANSPOSE_ROUND(x, y, 2, LO2, HI2)
    TRANSPOSE_ROUND(y, x, 1, LO1, HI1)
#else
    TRANSPOSE_ROUND(x, y, 1, LO1, HI1)
    x[0] = y[0];
    x[1] = y[1];
#endif
}
#endif

/* VEC values of K (V) from value i as the staging reads them: VEC-wide for the formats stored value by value, value by
 * value for the block formats (whose loads are products of exactly converted halves and small integers: IEEE
 * arithmetic every device rounds alike). */
#define CLATTN_EXACT_VLOAD(name, T, LOAD1)                                                                   \
    inline vec_t name(__global const T *p, ulong i)                                                          \
    {                                                                                                        \
        float part[VEC];                                                                                     \
        for (int e = 0; e < VEC; e++)                                                                        \
            part[e] = LOAD1(p, i + e);                                                                       \
        return VLOAD(part);                                                                                  \
    }
#if VEC > 1 && K_BLOCK > 1
CLATTN_EXACT_VLOAD(clattn_exact_vload_k, k_store, LOAD_K)
#define VLOAD_K_EXACT(p, i) clattn_exact_vload_k(p, i)
#else
#define VLOAD_K_EXACT(p, i) VLOAD_K(p, i)
#endif
#if VEC > 1 && V_BLOCK > 1
CLATTN_EXACT_VLOAD(clattn_exact_vload_v, v_store, LOAD_V)
#define VLOAD_V_EXACT(p, i) clattn_exact_vload_v(p, i)
#else
#define VLOAD_V_EXACT(p, i) VLOAD_V(p, i)
#endif

/* x = VEC entries d … d+VEC−1 of a K (V) row as staged in reproducible arithmetic: read (0 from dim on: the
 * padding), cut, times the row's scale, cut — where the rows have scales (SCALED: HAS_K_SCALES, HAS_V_SCALES; else
 * the scale is 1 and the product and second cut change nothing, so they are left out). (A statement: no GNU
 * statement expression, which not every OpenCL compiler takes.) */
#define EXACT_ROW_PART(x, LOAD1, VLOAD1, p, row, d, dim, scale, SCALED)                                      \
    do {                                                                                                     \
        if ((ulong)(d) + VEC <= (dim)) {                                                                     \
            x = VLOAD1(p, (row) + (d));                                                                      \
        } else {                                                                                             \
            float part_[VEC];                                                                                \
            for (int e_ = 0; e_ < VEC; e_++)                                                                 \
                part_[e_] = (ulong)((d) + e_) < (dim) ? LOAD1(p, (row) + (d) + e_) : 0.0f;                   \
            x = VLOAD(part_);                                                                                \
        }                                                                                                    \
        x = VCUT(x, EXACT_MIN);                                                                              \
        if (SCALED)                                                                                          \
            x = VCUT(x * (scale), EXACT_MIN);                                                                \
    } while (0)
/* Keys j … j+VEC−1's K rows read VEC entries at a time, cut and scaled (EXACT_ROW_PART), and each VEC × VEC block
 * transposed in registers: USE(x, d) gets, for every d < DK, x holding entry d of every key (lane e key j + e's; 0
 * from dk on and for keys from key_len on); low gets, lane e, LOW_BITS of key j + e's smallest nonzero entry. The
 * keys-in-lanes kernel's staging (USE stores into kt). Reads the kernel's k, dk, key_len and row addressing. */
#define EXACT_K_BLOCKS(j, low, USE)                                                                          \
    do {                                                                                                     \
        ulong k_rows_[VEC], k_dims_[VEC];                                                                    \
        float k_scales_[VEC];                                                                                \
        for (int e_ = 0; e_ < VEC; e_++) {                                                                   \
            const ulong key_ = (j) + e_;                                                                     \
            const bool in_ = key_ < key_len;                                                                 \
            k_rows_[e_] = in_ ? K_ROW_AT(key_) : 0;                                                          \
            k_dims_[e_] = in_ ? dk : 0;                                                                      \
            k_scales_[e_] = in_ ? EXACT(K_ROW_SCALE(key_)) : 0.0f;                                           \
        }                                                                                                    \
        low = (uvec_t)0xffffffffu;                                                                           \
        for (int d_ = 0; d_ < DK; d_ += VEC) {                                                               \
            vec_t block_[VEC];                                                                               \
            UNROLL for (int key_e_ = 0; key_e_ < VEC; key_e_++) /* (not e_: EXACT_ROW_PART's own) */         \
                EXACT_ROW_PART(block_[key_e_], LOAD_K, VLOAD_K_EXACT, k, k_rows_[key_e_], d_, k_dims_[key_e_], \
                               k_scales_[key_e_], HAS_K_SCALES);                                             \
            clattn_transpose(block_);                                                                        \
            UNROLL for (int i_ = 0; i_ < VEC; i_++) {                                                        \
                low = min(low, LOW_BITS_V(block_[i_]));                                                      \
                USE(block_[i_], d_ + i_);                                                                    \
            }                                                                                                \
        }                                                                                                    \
    } while (0)
#if VEC == 8
/* The dot product's tree (EXACT_DOT_TREE) over the lanes of 8 keys' chain vectors at once, key e's dot product in
 * lane e: the lanes l and l + 4 of each, then l and l + 2 of those, then l and l + 1. */
inline float8 clattn_tree_halves(float8 a, float8 b)
{
    return (float8)(a.lo + a.hi, b.lo + b.hi);
}
inline float8 clattn_tree_quarters(float8 x, float8 y)
{
    return (float8)(x.s01, x.s45, y.s01, y.s45) + (float8)(x.s23, x.s67, y.s23, y.s67);
}
inline float8 clattn_dot_trees(float8 c0, float8 c1, float8 c2, float8 c3, float8 c4, float8 c5, float8 c6, float8 c7)
{
    const float8 z = clattn_tree_quarters(clattn_tree_halves(c0, c1), clattn_tree_halves(c2, c3)),
                 w = clattn_tree_quarters(clattn_tree_halves(c4, c5), clattn_tree_halves(c6, c7));
    return (float8)(z.even, w.even) + (float8)(z.odd, w.odd);
}
/* One key's tree on the careful path, each sum cut below FLT_MIN, in lane 0 (the others +0, which the trees of
 * clattn_dot_trees then add exactly: no sum is ever −0). */
inline float8 clattn_careful_tree(float8 c)
{
    const float4 h = c.lo + c.hi;
    const float4 h_cut = select(h, (float4)0.0f, fabs(h) < (float4)EXACT_MIN);
    const float2 q = h_cut.lo + h_cut.hi;
    const float2 q_cut = select(q, (float2)0.0f, fabs(q) < (float2)EXACT_MIN);
    return (float8)(CUT(q_cut.x + q_cut.y, EXACT_MIN), 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f);
}
/* Key `key`'s chain vectors ch[r] for the ROWS rows, its K row read in place (EXACT_IN_PLACE, VEC 8) as the staging
 * reads it (EXACT_ROW_PART): ch[r] lane l is chain l of row r's dot product. Where the row holds an entry under
 * EXACT_K_FAST (not 0), it is read again with every step cut and its tree formed here (clattn_careful_tree). Reads
 * the kernel's k, dk, key_len, q_row and row addressing. */
#define EXACT_KEY_CHAINS(key, ch)                                                                            \
    do {                                                                                                     \
        const bool in_ = (key) < key_len;                                                                    \
        const ulong k_row_ = in_ ? K_ROW_AT(key) : 0, k_dim_ = in_ ? dk : 0;                                 \
        const float ks_ = in_ ? EXACT(K_ROW_SCALE(key)) : 0.0f;                                              \
        uvec_t low_ = (uvec_t)0xffffffffu;                                                                   \
        UNROLL for (int r_ = 0; r_ < ROWS; r_++)                                                             \
            ch[r_] = (vec_t)0.0f;                                                                            \
        for (int d_ = 0; d_ < DK; d_ += VEC) {                                                               \
            vec_t x_;                                                                                        \
            EXACT_ROW_PART(x_, LOAD_K, VLOAD_K_EXACT, k, k_row_, d_, k_dim_, ks_, HAS_K_SCALES);             \
            low_ = min(low_, LOW_BITS_V(x_));                                                                \
            UNROLL for (int r_ = 0; r_ < ROWS; r_++)                                                         \
                ch[r_] = fma(vload8(0, q_row[r_] + d_), x_, ch[r_]);                                         \
        }                                                                                                    \
        if (clattn_lowest(low_) < LOW_BITS(EXACT_K_FAST)) {                                                  \
            UNROLL for (int r_ = 0; r_ < ROWS; r_++)                                                         \
                ch[r_] = (vec_t)0.0f;                                                                        \
            for (int d_ = 0; d_ < DK; d_ += VEC) {                                                           \
                vec_t x_;                                                                                    \
                EXACT_ROW_PART(x_, LOAD_K, VLOAD_K_EXACT, k, k_row_, d_, k_dim_, ks_, HAS_K_SCALES);         \
                UNROLL for (int r_ = 0; r_ < ROWS; r_++)                                                     \
                    ch[r_] = VCUT(fma(vload8(0, q_row[r_] + d_), x_, ch[r_]), EXACT_MIN);                    \
            }                                                                                                \
            UNROLL for (int r_ = 0; r_ < ROWS; r_++)                                                         \
                ch[r_] = clattn_careful_tree(ch[r_]);                                                        \
        }                                                                                                    \
    } while (0)
#endif
/* One V row as EXACT_STAGE_V stages it, in place: x[c] = entries c·VEC … of key j's row (0 past key_len). */
#define EXACT_V_ROW_AT(x, j)                                                                                 \
    do {                                                                                                     \
        const bool vin_ = (j) < key_len;                                                                     \
        const ulong v_row_ = vin_ ? V_ROW_AT(j) : 0, v_dim_ = vin_ ? dv : 0;                                 \
        const float vs_ = vin_ ? EXACT(V_ROW_SCALE(j)) : 0.0f;                                               \
        UNROLL for (int c_ = 0; c_ < DV / VEC; c_++)                                                         \
            EXACT_ROW_PART(x[c_], LOAD_V, VLOAD_V_EXACT, v, v_row_, c_ * VEC, v_dim_, vs_, HAS_V_SCALES);    \
    } while (0)
/* Stage key jj of the tile from key j0 (CPUs, VEC > 1): its K and V rows VEC entries at a time through
 * EXACT_ROW_PART, each part of K handed to STORE_K(x, d, jj) (the keys-in-lanes kernel stores it transposed, the
 * rows-in-lanes one as it lies), V into row jj of vn, the key's flags into v_nonfinite and small_entries. Reads the
 * kernel's k, v, dk, dv, key_len and row addressing. (A statement: no GNU statement expression.) */
#define EXACT_STAGE_KEY(j0, jj, vn, STORE_K)                                                                 \
    do {                                                                                                     \
        const ulong j_ = (j0) + (jj);                                                                        \
        const bool in_ = j_ < key_len;                                                                       \
        const ulong k_row_ = in_ ? K_ROW_AT(j_) : 0, k_dim_ = in_ ? dk : 0;                                  \
        const float ks_ = in_ ? EXACT(K_ROW_SCALE(j_)) : 0.0f;                                               \
        uvec_t k_low_ = (uvec_t)0xffffffffu;                                                                 \
        for (int d_ = 0; d_ < DK; d_ += VEC) {                                                               \
            vec_t x_;                                                                                        \
            EXACT_ROW_PART(x_, LOAD_K, VLOAD_K_EXACT, k, k_row_, d_, k_dim_, ks_, HAS_K_SCALES);             \
            k_low_ = min(k_low_, LOW_BITS_V(x_));                                                            \
            STORE_K(x_, d_, (jj));                                                                           \
        }                                                                                                    \
        EXACT_STAGE_V(j_, jj, vn, clattn_lowest(k_low_));                                                    \
    } while (0)
/* Stage key j = j0 + jj's V row into row jj of vn (VEC > 1), its flags (v_nonfinite, small_entries: k_lowest is
 * the LOW_BITS of its K row's smallest nonzero entry) beside it. */
#define EXACT_STAGE_V(j, jj, vn, k_lowest)                                                                   \
    do {                                                                                                     \
        const bool vin_ = (j) < key_len;                                                                     \
        const ulong v_row_ = vin_ ? V_ROW_AT(j) : 0, v_dim_ = vin_ ? dv : 0;                                 \
        const float vs_ = vin_ ? EXACT(V_ROW_SCALE(j)) : 0.0f;                                               \
        uvec_t v_low_ = (uvec_t)0xffffffffu;                                                                 \
        lanes_t bad_ = 0;                                                                                    \
        for (int d_ = 0; d_ < DV; d_ += VEC) {                                                               \
            vec_t x_;                                                                                        \
            EXACT_ROW_PART(x_, LOAD_V, VLOAD_V_EXACT, v, v_row_, d_, v_dim_, vs_, HAS_V_SCALES);             \
            v_low_ = min(v_low_, LOW_BITS_V(x_));                                                            \
            bad_ |= isfinite(x_) == 0;                                                                       \
            VSTORE(x_, (vn) + (jj) * DV + d_);                                                               \
        }                                                                                                    \
        v_nonfinite[jj] = ANY_LANE(bad_);                                                                    \
        small_entries[jj] = clattn_small_entries((k_lowest), clattn_lowest(v_low_));                         \
    } while (0)
#endif
