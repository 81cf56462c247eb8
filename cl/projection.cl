/* The projection stage's own kernels. CLBlast does the matrix product; clattn_add_bias adds the bias
 * row after it. clattn_matmul is the fallback for devices where CLBlast's kernels cannot launch
 * (work groups smaller than its tuned sizes): one work-item per output, plain and correct anywhere. */
__kernel void clattn_add_bias(__global float *y, __global const float *bias, ulong rows, ulong cols)
{
    const ulong c = get_global_id(0);
    const ulong r = get_global_id(1);
    if (c < cols && r < rows)
        y[r * cols + c] += bias[c];
}

/* Y = X·W (+ bias): X (rows, in), W (in, out), Y (rows, out); bias may be NULL. */
__kernel void clattn_matmul(__global const float *x, __global const float *w, __global const float *bias,
                            __global float *y, ulong rows, ulong in, ulong out)
{
    const ulong c = get_global_id(0);
    const ulong r = get_global_id(1);
    if (c >= out || r >= rows)
        return;
    __global const float *xr = x + r * in;
    float acc = bias ? bias[c] : 0.0f;
    for (ulong k = 0; k < in; k++)
        acc = fma(xr[k], w[k * out + c], acc);
    y[r * out + c] = acc;
}
