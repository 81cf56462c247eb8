/* Storage-format conversions (cl/formats.cl: Q_FMT is the source's, O_FMT the destination's):
 *
 *   clattn_convert      element by element: a whole tensor widened to float for a path that computes on
 *                       floats (the staged path, merges), or a float result rounded into its type;
 *   clattn_append_rows  new K or V rows written into a cache — dense (B, kv_heads, capacity, D) or paged
 *                       through a block table — converted into the cache's format: a block format block by
 *                       block (clattn_quantise_<format>); a format with row scales (int8, FP8 when the
 *                       cache has scales) symmetric, one scale per row, scale = max |x| / the format's
 *                       largest value (127, 448, 57344), q = x / scale rounded to nearest even. A row
 *                       (block) holding NaN or ±inf gets a NaN scale, so that it reads back as NaN
 *                       and poisons only the rows that attend to it, as a NaN in a float cache would.
 *                       (Token formats append by cl/append_tokens.cl.) */

/* Work-item i: element i of n; a source with scales has its value multiplied by the scale of its row
 * (`row` elements per row). */
__kernel void clattn_convert(CLATTN_PARAMETERS(CLATTN_CONVERT_PARAMS))
{
    const ulong i = get_global_id(0);
    if (i >= n)
        return;
    float x = LOAD_Q(src, i);
    if (scales)
        x *= scales[i / row];
#if O_BLOCK == 1 && O_SCALE_RULE == 0 && !defined(O_TOKENS) /* (a quantised format is never a whole-tensor destination) */
    STORE_O(x, dst, i);
#endif
}

/* Work-item (r, b·kv_heads + h): new row r of head h of sequence b, from `rows` (B, kv_heads, new_len,
 * dim) into the cache at row lengths[b] + r of that head: dense (table NULL) at head row (b·kv_heads + h)
 * ·capacity, or, through sequence b's row of the block table, row j % 2^shift of block table[j >> shift]
 * (each block holding kv_heads heads of 2^shift rows). A row's scale goes to the same row index of
 * dst_scales. */
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
#if O_BLOCK > 1
    float x[O_BLOCK];
    for (ulong d0 = 0; d0 < dim; d0 += O_BLOCK) {
        for (int e = 0; e < O_BLOCK; e++)
            x[e] = LOAD_Q(rows, from + d0 + e);
        CLATTN_CAT(clattn_quantise_, O_FMT)(x, (__global uchar *)dst + (to + d0) / O_BLOCK * O_BLOCK_BYTES);
    }
#else
#if O_SCALE_RULE
    if (dst_scales) {
        float top = 0.0f;
        bool finite = true;
        for (ulong d = 0; d < dim; d++) {
            const float x = LOAD_Q(rows, from + d);
            finite = finite && isfinite(x);
            top = fmax(top, fabs(x));
        }
        const float largest = CLATTN_CAT(clattn_row_max_, O_FMT);
        const float scale = finite ? top / largest : NAN;
        const float inv = finite && top > 0.0f ? largest / top : 0.0f;
        for (ulong d = 0; d < dim; d++)
            STORE_O(LOAD_Q(rows, from + d) * inv, dst, to + d);
        dst_scales[row] = scale;
        return;
    }
#endif
    for (ulong d = 0; d < dim; d++)
        STORE_O(LOAD_Q(rows, from + d), dst, to + d);
#endif
}
