/* Shared by every clattn kernel: program.c puts this file first in every program, before the files
 * each path names (masks.cl, then the path's own kernels).
 *
 * Sizes and offsets are ulong: a (B,H,L,S) weight tensor can pass 2^31 elements. */

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
inline ulong clattn_row_offset(__global const ulong *starts, ulong b, ulong h, ulong i, ulong bs, ulong hs, ulong rs)
{
    return starts ? (starts[b] + i) * rs + h * hs : clattn_view_offset(b, h, i, bs, hs, rs);
}

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
