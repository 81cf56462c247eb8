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

/* Entry (i, j) of matrix m in a stack of dense (rows, cols) matrices: scores, weights, masks. */
inline ulong clattn_matrix_offset(ulong m, ulong i, ulong j, ulong rows, ulong cols)
{
    return (m * rows + i) * cols + j;
}
