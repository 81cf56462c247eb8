/* The bias pass of projections done by CLBlast (clattn's own GEMM in gemm.cl starts from the bias
 * instead). */
__kernel void clattn_add_bias(CLATTN_PARAMETERS(CLATTN_ADD_BIAS_PARAMS))
{
    const ulong c = get_global_id(0);
    const ulong r = get_global_id(1);
    if (c < cols && r < rows)
        y[r * cols + c] += bias[c];
}
