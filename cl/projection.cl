/* The projections' passes besides clattn's GEMM (cl/gemm.cl): the bias of a product CLBlast made (clattn's own GEMM
 * starts from the bias instead), and the reproducible GEMM's inputs with their small entries cut. */
__kernel void clattn_add_bias(CLATTN_PARAMETERS(CLATTN_ADD_BIAS_PARAMS))
{
    const ulong c = get_global_id(0);
    const ulong r = get_global_id(1);
    if (c < cols && r < rows)
        y[r * cols + c] += bias[c];
}

/* dst = src with every entry below 2^-40 in magnitude made +0 (cl/gemm.cl's reproducible arithmetic: then every
 * product of two entries is a multiple of 2^-126), the rest copied bit for bit; n entries of float32 (bfloat16 0), or
 * of bfloat16 (the same rule on a float's upper half). A work-item a 32-bit word: one float, or two bfloat16. */
__kernel void clattn_cut_small(CLATTN_PARAMETERS(CLATTN_CUT_SMALL_PARAMS))
{
    const ulong w = get_global_id(0);
    if (w >= (bfloat16 ? (n + 1) / 2 : n))
        return;
    const uint x = src[w];
    if (!bfloat16) {
        dst[w] = (x & 0x7fffffffu) < 0x2b800000u ? 0u : x; /* (0x2b800000: 2^-40) */
        return;
    }
    const uint lo = x & 0xffffu, hi = x >> 16;
    dst[w] = ((lo & 0x7fffu) < 0x2b80u ? 0u : lo) | ((hi & 0x7fffu) < 0x2b80u ? 0u : hi) << 16;
}
