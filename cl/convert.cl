/* Storage-type conversions (cl/common.cl's Q_T is the source type, O_T the destination's):
 *
 *   clattn_convert      element by element: a whole tensor widened to float for a path that computes on
 *                       floats (the staged path, merges), or a float result rounded into its type;
 *   clattn_append_rows  new K or V rows written into a cache — dense (B, kv_heads, capacity, D) or paged
 *                       through a block table — converted into the cache's type, and quantised when it
 *                       is int8: symmetric, one scale per row, scale = max |x| / 127, q = round(x / scale)
 *                       (to nearest even, saturated). A row holding NaN or ±inf gets a NaN scale, so
 *                       that it reads back as NaN (int8 has no such values) and poisons only the rows
 *                       that attend to it, as a NaN in a float cache would. */

/* Work-item i: element i of n; an int8 source's value is multiplied by the scale of its row (`row`
 * elements per row). */
__kernel void clattn_convert(CLATTN_PARAMETERS(CLATTN_CONVERT_PARAMS))
{
    const ulong i = get_global_id(0);
    if (i >= n)
        return;
    float x = LOAD_Q(src, i);
#if Q_T == 3
    x *= scales[i / row];
#endif
#if O_T != 3 /* (int8 is never a whole-tensor destination) */
    STORE_O(x, dst, i);
#endif
}

/* Work-item (r, b·kv_heads + h): new row r of head h of sequence b, from `rows` (B, kv_heads, new_len,
 * dim) into the cache at row lengths[b] + r of that head: dense (table NULL) at head row (b·kv_heads + h)
 * ·capacity, or, through sequence b's row of the block table, row j % 2^shift of block table[j >> shift]
 * (each block holding kv_heads heads of 2^shift rows). An int8 cache's scale goes to the same row
 * index of dst_scales. */
__kernel void clattn_append_rows(CLATTN_PARAMETERS(CLATTN_APPEND_ROWS_PARAMS))
{
    const ulong r = get_global_id(0), bh = get_global_id(1);
    if (r >= new_len || bh >= batch * kv_heads)
        return;
    const ulong b = bh / kv_heads, h = bh % kv_heads, j = lengths[b] + r;
    ulong row;
    if (table) {
        const ulong block = (ulong)table[b * cols + (j >> shift)];
        row = ((block * kv_heads + h) << shift) + (j & (((ulong)1 << shift) - 1));
    } else {
        row = bh * capacity + j;
    }
    const ulong from = (bh * new_len + r) * dim, to = row * dim;
#if O_T == 3
    float top = 0.0f;
    bool finite = true;
    for (ulong d = 0; d < dim; d++) {
        const float x = LOAD_Q(rows, from + d);
        finite = finite && isfinite(x);
        top = fmax(top, fabs(x));
    }
    const float scale = finite ? top / 127.0f : NAN;
    const float inv = finite && top > 0.0f ? 127.0f / top : 0.0f;
    for (ulong d = 0; d < dim; d++)
        dst[to + d] = convert_char_sat_rte(LOAD_Q(rows, from + d) * inv);
    dst_scales[row] = scale;
#else
    for (ulong d = 0; d < dim; d++)
        STORE_O(LOAD_Q(rows, from + d), dst, to + d);
#endif
}
