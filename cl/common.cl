/* Shared by every clattn kernel: program.c puts this file first in every program, before the files
 * each path names (masks.cl, then the path's own kernels).
 *
 * Sizes and offsets are ulong: a (B,H,L,S) weight tensor can pass 2^31 elements. */

/* Reproducible arithmetic (-DCLATTN_EXACT=1, cl/exact_math.cl): no contraction anywhere in the program, these
 * shared functions included (a compiler may fuse a·b + c into an fma on one device and not on another). */
#ifdef CLATTN_EXACT
#pragma OPENCL FP_CONTRACT OFF
#endif

/* PREFETCH, a build option of the CPU kernels that ask for rows ahead of their use (0 where not given):
 * CLATTN_PREFETCH_LINE(p) asks for p's 64-byte line — 1 through OpenCL C's own prefetch(), which every
 * implementation compiles (some as nothing), 2 through Clang's __builtin_prefetch, which the host selects only
 * on an implementation it has been seen to work on (PoCL: device_prefetch_mode): rusticl's SPIR-V translator
 * exits on it (the process with it), so no compiler may ever meet it unasked. */
#ifndef PREFETCH
#define PREFETCH 0
#endif
#if PREFETCH == 2
/* (Locality 1, into the outer caches: rows streamed a little ahead of their one use; measured with PoCL on an AMD
 * core, decode at S = 8192, 12-20% faster than the default locality 3, which pulls every line into L1.) */
#define CLATTN_PREFETCH_LINE(p) __builtin_prefetch(p, 0, 1)
#elif PREFETCH == 1
#define CLATTN_PREFETCH_LINE(p) prefetch((__global const uchar *)(p), 64)
#else
#define CLATTN_PREFETCH_LINE(p)
#endif

/* Element offsets, all in ulong: a (B,H,L,S) weight tensor, or a strided view of a large layer, can
 * pass 2^31 elements, where an int index would wrap. tests/test_offsets.c checks these functions on
 * the device against 64-bit host arithmetic. */

/* Row i of head h of batch b in a view with element strides (bs, hs, rs). */
inline ulong clattn_view_offset(ulong b, ulong h, ulong i, ulong bs, ulong hs, ulong rs)
{
    return b * bs + h * hs + i * rs;
}

/* The same in a view that may be ragged: with starts (a ragged batch, sequences of different lengths
 * packed row after row), row i of sequence b is row starts[b] + i of the packed tensor, heads hs apart
 * within a row; without, clattn_view_offset. */
/* Which sequence, K/V head and tile of packed query rows a work-group computes: from a ragged launch's list of
 * its (sequence, tile) pairs (work-group `entry` of dim 0, the K/V head dim 1's id) — work only where a
 * sequence has rows —, else tile `entry` of every (sequence, K/V head) of dim 1. */
inline void clattn_work_of(__global const uint *tiles, ulong entry, ulong kv_heads, ulong *b, ulong *kv_head,
                           ulong *tile)
{
    if (tiles) {
        *b = tiles[2 * entry];
        *tile = tiles[2 * entry + 1];
        *kv_head = get_global_id(1);
    } else {
        *b = get_global_id(1) / kv_heads;
        *kv_head = get_global_id(1) % kv_heads;
        *tile = entry;
    }
}

inline ulong clattn_row_offset(__global const ulong *starts, ulong b, ulong h, ulong i, ulong bs, ulong hs, ulong rs)
{
    return starts ? (starts[b] + i) * rs + h * hs : clattn_view_offset(b, h, i, bs, hs, rs);
}

/* K/V addressing, the one piece every kernel that reads K and V rows uses. A K or V head of sequence b
 * is read at its rows j = 0, 1, … wherever they lie: a dense view (row 0 at b·bs + g·hs, rows rs apart),
 * a ragged batch (starts: sequence b's rows from row starts[b] of the packed tensor, heads hs apart) or a
 * paged pool (block_table: row j is row j % 2^shift of block table[j >> shift] of the sequence's row of
 * the table, blocks bs elements apart; the host checked every id the call can reach). clattn_kv_base
 * and clattn_kv_table give a head's base and its row of the table (NULL: not paged), clattn_kv_row a
 * row's element offset; without a table or starts (constants where the build has neither) they are the
 * dense view's arithmetic and nothing more. An int8 row's scale is entry offset / head size of the
 * scales (one per row, in the rows' order). */
inline ulong clattn_kv_base(ulong b, ulong g, ulong bs, ulong hs, ulong rs, __global const ulong *starts,
                            __global const int *block_table)
{
    return (block_table ? 0 : starts ? starts[b] * rs : b * bs) + g * hs;
}

inline __global const int *clattn_kv_table(__global const int *block_table, ulong table_cols, ulong b)
{
    return block_table ? block_table + b * table_cols : 0;
}

inline ulong clattn_kv_row(ulong head, ulong rs, __global const int *table, uint shift, ulong block_stride, ulong j)
{
    if (!table)
        return head + j * rs;
    return head + (ulong)table[j >> shift] * block_stride + (j & (((ulong)1 << shift) - 1)) * rs;
}

/* Key j's K (V) row of the head a kernel reads — by the names every K/V-reading kernel gives them: k_head (v_head),
 * rows k_rs (v_rs) apart, blocks k_bs (v_bs) apart through `table`, block_shift — and its dequantisation factor:
 * a row's scale (int8, scaled FP8; one per row, in the rows' order: element offset / head size), else 1. */
#define K_ROW_AT(j) clattn_kv_row(k_head, k_rs, table, block_shift, k_bs, (j))
#define V_ROW_AT(j) clattn_kv_row(v_head, v_rs, table, block_shift, v_bs, (j))
#if HAS_K_SCALES
#define K_ROW_SCALE(j) k_scales[K_ROW_AT(j) / dk]
#else
#define K_ROW_SCALE(j) 1.0f
#endif
#if HAS_V_SCALES
#define V_ROW_SCALE(j) v_scales[V_ROW_AT(j) / v_scale_row]
#else
#define V_ROW_SCALE(j) 1.0f
#endif

/* Entry (i, j) of matrix m in a stack of dense (rows, cols) matrices: scores, weights, masks. */
inline ulong clattn_matrix_offset(ulong m, ulong i, ulong j, ulong rows, ulong cols)
{
    return (m * rows + i) * cols + j;
}

/* The end of one softmax row whose running maximum is m and whose sum of exp(score − m) over the visible
 * keys is l, with a sink logit (−inf: none) joining the denominator without a value: returns the factor
 * that turns the row's accumulated Σ exp(score − m)·v into its output, and sets *lse. A row that saw no
 * key (l = 0) has factor 0 and lse = the sink (−inf without one); a NaN in m or l propagates. Shared by
 * the fused and decode kernels, so that they end their rows alike. */
inline float clattn_row_finish(float m, float l, float sink, float *lse)
{
    const bool empty = l == 0.0f;
    float top = m, sum = l, factor = 1.0f;
    if (sink > top) {
        factor = exp(top - sink);
        sum = sum * factor + 1.0f;
        top = sink;
    } else if (sink != -INFINITY) {
        sum += exp(sink - top);
    }
    *lse = empty ? sink : top + log(sum);
    return empty ? 0.0f : factor / sum;
}

/* How a query row's scores q·k·scale are formed without a float overflowing or underflowing on the way
 * when the scores themselves are finite: q is multiplied by *q_factor, a power of two (exact) that
 * brings the row's largest |q| (q_max) into [0.5, 1), and each dot product by the factor returned,
 * scale / *q_factor. Multiplying q by the scale first overflows where q·scale passes FLT_MAX (scale
 * 1e30, q 1e10, k 1e-28: scores 1e12); scaling the dot product overflows where q·k does (scale 1e-30,
 * q and k 1e20: scores 1e10); a q of largest element near 1 leaves neither (the dot product is about as
 * large as k, the factor about scale·q_max). Both factors stay normal floats: where scale·q_max lies
 * beyond float's range, q keeps a larger or smaller share. A scale of 0 zeroes q (every score 0, as
 * documented); a q_max of 0, inf or NaN leaves q as it is (its inf or NaN reaches the scores either way).
 * Shared by the fused, decode and score kernels, so that every path forms its scores alike. */
inline float clattn_score_split(float q_max, float scale, float *q_factor)
{
    if (scale == 0.0f) {
        *q_factor = 0.0f;
        return 1.0f;
    }
    if (!(q_max > 0.0f) || isinf(q_max)) {
        *q_factor = 1.0f;
        return scale;
    }
    int eq, es;
    (void)frexp(q_max, &eq);
    const float ms = frexp(scale, &es); /* scale = ms·2^es, |ms| in [0.5, 1) */
    /* The score factor ms·2^t: t = es + eq ideally (q_factor 2^−eq), kept where ms·2^t is a normal float
     * (t in [−125, 128]) and q_factor = 2^(es − t) one too (es − t in [−126, 127]). */
    const int t = clamp(es + eq, max(-125, es - 127), min(128, es + 126));
    *q_factor = ldexp(1.0f, es - t);
    return ldexp(ms, t);
}

/* Storage types: cl/formats.cl (program.c puts it after this file). */
