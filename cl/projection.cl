/* Adds a bias row to every row of a (rows, cols) matrix, after the CLBlast GEMM of a projection. */
__kernel void clattn_add_bias(__global float *y, __global const float *bias, ulong rows, ulong cols)
{
    const ulong c = get_global_id(0);
    const ulong r = get_global_id(1);
    if (c < cols && r < rows)
        y[r * cols + c] += bias[c];
}
