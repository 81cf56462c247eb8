/* Row softmax, one work-item per row, stabilised by the row maximum. A row that is all −inf (every
 * key masked) gives zeros and a log-sum-exp of −inf instead of the 0/0 = NaN of the naive formula.
 * `in` and `out` may be the same buffer. */
__kernel void clattn_softmax(__global const float *in, __global float *out, __global float *lse,
                             ulong lse_offset, ulong rows, ulong cols)
{
    const ulong r = get_global_id(0);
    if (r >= rows)
        return;
    __global const float *x = in + clattn_matrix_offset(0, r, 0, rows, cols);
    __global float *y = out + clattn_matrix_offset(0, r, 0, rows, cols);
    /* The row maximum, NaN as soon as one score is NaN (fmax would skip it, and a row whose only
     * visible score is NaN would pass for fully masked). */
    float m = -INFINITY;
    for (ulong j = 0; j < cols; j++)
        m = isnan(x[j]) || isnan(m) ? NAN : fmax(m, x[j]);
    if (m == -INFINITY) {
        for (ulong j = 0; j < cols; j++)
            y[j] = 0.0f;
        if (lse)
            lse[lse_offset + r] = -INFINITY;
        return;
    }
    float sum = 0.0f;
    for (ulong j = 0; j < cols; j++)
        sum += exp(x[j] - m);
    const float inv = 1.0f / sum;
    for (ulong j = 0; j < cols; j++)
        y[j] = exp(x[j] - m) * inv;
    if (lse)
        lse[lse_offset + r] = m + log(sum);
}
