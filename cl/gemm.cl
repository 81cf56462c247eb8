/* clattn's own GEMM for projections: Y = X·W (+ bias), X (rows, in), W (in, out), Y (rows, out), all
 * row-major and contiguous.
 *
 * One work-item computes a tile of MR rows × NR = NV·VEC columns, its MR·NV vector accumulators held in
 * registers: per k, NV vectors of W's row k and MR broadcasts of X feed MR·NV multiply-adds, the
 * register blocking of a BLAS micro-kernel. On CPUs VEC is the SIMD width and the tiles are large
 * (PoCL runs a work-item's vector code as written); on GPUs VEC is 1 and a work-item's tile is small.
 * The bias is the accumulators' starting value, so it costs no pass of its own.
 *
 * Y is written either as it is (rows, out), or split into heads: with head_dim > 0, row r = b·seq_len + i
 * and column c = h·head_dim + d land at (b, h, i, d) of a (B, out / head_dim, seq_len, head_dim) tensor —
 * an attention layer's Q, K or V with each head contiguous, in the same pass.
 *
 * Which grid dimension walks the rows is a build option (ROW_DIM): on CPUs dimension 0, so the work-groups
 * one thread takes in turn share a panel of W (in × NR) that stays in its cache while the rows go by;
 * on GPUs dimension 1, so neighbouring work-items read neighbouring columns of W.
 *
 * Storage types (cl/formats.cl): X in Q_T, W and the bias in K_T, Y in O_T (all float by default); the
 * accumulators are floats whatever they are.
 *
 * Reproducible arithmetic (-DCLATTN_EXACT=1; issue 41): each element is already one fma chain over k ascending from
 * its bias, whatever the tile; what is left is a device's flush mode. Entries of X and W below 2^-40 in magnitude
 * count as 0 (they arrive so: cl/projection.cl's clattn_cut_small, a pass over each rather than a test at each of
 * the many reads) and a bias below 2^-103 as 0 (their share of a sum is below float's resolution of any term
 * ≥ 2^-63): every product is then a multiple of 2^-126, and so every partial sum — never subnormal, the same bits
 * flushed or not. Zeros are stored as +0 (a compiler may make fma(a, b, +0) a product, −0 where a·b is).
 *
 * Build options: VEC, MR, NV, ROW_DIM, and the types. */

#ifdef CLATTN_EXACT
#define GEMM_CUT(x, below) (fabs(x) < (below) ? 0.0f : (x))
#define GEMM_ZERO_PLUS(x) select((x), (vec_t)0.0f, (x) == (vec_t)0.0f)
#else
#define GEMM_CUT(x, below) (x)
#define GEMM_ZERO_PLUS(x) (x)
#endif

#define NR (VEC * NV)

/* One tile. `full` (a constant where it is inlined) says whether all NR columns exist: the inner loop
 * then reads W in whole vectors, else lane by lane with zeros past the edge. */
/* Where Y's element (r, c) lives (see above). */
inline ulong gemm_out_offset(ulong r, ulong c, ulong out, ulong seq_len, ulong head_dim)
{
    if (head_dim == 0)
        return r * out + c;
    const ulong b = r / seq_len, i = r % seq_len, h = c / head_dim, d = c % head_dim;
    return ((b * (out / head_dim) + h) * seq_len + i) * head_dim + d;
}

inline void gemm_tile(__global const q_store *x, __global const k_store *w, __global const k_store *bias,
                      __global o_store *y, ulong rows, ulong in, ulong out, ulong seq_len, ulong head_dim, ulong r0,
                      ulong c0, const bool full)
{
    vec_t acc[MR][NV];
    UNROLL for (int u = 0; u < NV; u++) {
        vec_t start = (vec_t)0.0f;
        if (bias) {
            float lane[NR];
            for (int t = 0; t < NR; t++)
                lane[t] = c0 + t < out ? GEMM_CUT(LOAD_K(bias, c0 + t), 0x1p-103f) : 0.0f;
            start = VLOAD(lane + u * VEC);
        }
        UNROLL for (int r = 0; r < MR; r++)
            acc[r][u] = start;
    }
    /* Rows past the end read the last row (in bounds) and are never stored. */
    __global const q_store *xr[MR];
    UNROLL for (int r = 0; r < MR; r++)
        xr[r] = x + min(r0 + r, rows - 1) * in;
    __global const k_store *wk = w + c0;
    for (ulong k = 0; k < in; k++, wk += out) {
        vec_t wv[NV];
        if (full) {
            UNROLL for (int u = 0; u < NV; u++)
                wv[u] = VLOAD_FMT(K_FMT, wk, u * VEC);
        } else {
            float lane[NR];
            for (int t = 0; t < NR; t++)
                lane[t] = c0 + t < out ? LOAD_K(wk, t) : 0.0f;
            UNROLL for (int u = 0; u < NV; u++)
                wv[u] = VLOAD(lane + u * VEC);
        }
        UNROLL for (int r = 0; r < MR; r++) {
            const vec_t xv = (vec_t)LOAD_Q(xr[r], k);
            UNROLL for (int u = 0; u < NV; u++)
                acc[r][u] = fma(xv, wv[u], acc[r][u]);
        }
    }
    UNROLL for (int r = 0; r < MR; r++) {
        if (r0 + r >= rows)
            break;
        UNROLL for (int u = 0; u < NV; u++)
            acc[r][u] = GEMM_ZERO_PLUS(acc[r][u]);
        /* A vector whose columns lie in one head (always, when VEC divides head_dim) is stored whole. */
        UNROLL for (int u = 0; u < NV; u++) {
            const ulong c = c0 + u * VEC;
            if (O_T == 0 && c + VEC <= out && (head_dim == 0 || c % head_dim + VEC <= head_dim)) {
                VSTORE(acc[r][u], (__global float *)y + gemm_out_offset(r0 + r, c, out, seq_len, head_dim));
            } else {
                float lane[VEC];
                VSTORE(acc[r][u], lane);
                for (int t = 0; t < VEC; t++)
                    if (c + t < out)
                        STORE_O(lane[t], y, gemm_out_offset(r0 + r, c + t, out, seq_len, head_dim));
            }
        }
    }
}

__kernel void clattn_gemm(CLATTN_PARAMETERS(CLATTN_GEMM_PARAMS))
{
    const ulong r0 = get_global_id(ROW_DIM) * MR;
    const ulong c0 = get_global_id(1 - ROW_DIM) * NR;
    if (r0 >= rows || c0 >= out)
        return;
    if (c0 + NR <= out)
        gemm_tile(x, w, bias, y, rows, in, out, seq_len, head_dim, r0, c0, true);
    else
        gemm_tile(x, w, bias, y, rows, in, out, seq_len, head_dim, r0, c0, false);
}
