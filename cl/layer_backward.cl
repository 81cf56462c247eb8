/* The layer's backward pass moves gradients between layouts and sums them over rows (src/api/mha_backward.c):
 * the matrix products themselves are the projection GEMM's. Every element is written by one work-item,
 * every sum taken in row order (deterministic). */

/* dst[i0·d0 + i1·d1 + i2·d2 + i3·d3] = src[i0·s0 + i1·s1 + i2·s2 + i3·s3] over n0 × n1 × n2 × n3 (both
 * from their offsets): a transpose, heads split from rows or merged into them, a block of columns. */
__kernel void clattn_strided_copy(CLATTN_PARAMETERS(CLATTN_STRIDED_COPY_PARAMS))
{
    CLATTN_ABSENT(CLATTN_STRIDED_COPY_PARAMS)
    const ulong i3 = get_global_id(0), i2 = get_global_id(1), i01 = get_global_id(2);
    if (i3 >= n3 || i2 >= n2 || i01 >= n0 * n1)
        return;
    const ulong i0 = i01 / n1, i1 = i01 % n1;
    dst[dst_offset + i0 * d0 + i1 * d1 + i2 * d2 + i3 * d3] = src[src_offset + i0 * s0 + i1 * s1 + i2 * s2 + i3 * s3];
}

/* sums[c] = Σ_r src[r·ld + col0 + c] for c < cols: a bias's gradient (reproducible arithmetic: every value and
 * step flushed from subnormal to +0, so that a device's flush mode changes nothing). */
#ifdef CLATTN_EXACT
#define SUM_FLUSH(x) (fabs(x) < FLT_MIN ? 0.0f : (x))
#else
#define SUM_FLUSH(x) (x)
#endif
__kernel void clattn_column_sums(CLATTN_PARAMETERS(CLATTN_COLUMN_SUMS_PARAMS))
{
    CLATTN_ABSENT(CLATTN_COLUMN_SUMS_PARAMS)
    const ulong c = get_global_id(0);
    if (c >= cols)
        return;
    float sum = 0.0f;
    for (ulong r = 0; r < rows; r++)
        sum = SUM_FLUSH(sum + SUM_FLUSH(src[r * ld + col0 + c]));
    sums[c] = sum;
}
