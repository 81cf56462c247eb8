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
 *                       and poisons only the rows that attend to it, as a NaN in a float cache would. */

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
#ifdef O_TOKENS
/* Byte c of each packed row of a completed group, with its channels' scales and zero points, from the
 * group's float16 tail rows (clattn_append_rows below). */
inline void clattn_token_quantise_byte(__global const half *tail, __global uchar *group, ulong dim, ulong c)
{
    const uint bits = CLATTN_CAT(clattn_bits_, O_FMT), per_byte = 8 / bits, tokens = O_TOKENS;
    const float levels = (float)((1u << bits) - 1);
    __global half *scales = (__global half *)(group + 4);
    uchar packed[O_TOKENS];
    for (uint t = 0; t < tokens; t++)
        packed[t] = 0;
    for (uint e = 0; e < per_byte; e++) {
        const ulong d = c * per_byte + e;
        float lo = 0.0f, hi = 0.0f;
        for (uint t = 0; t < tokens; t++) {
            const float x = vload_half(t * dim + d, tail);
            if (isfinite(x)) {
                lo = fmin(lo, x);
                hi = fmax(hi, x);
            }
        }
        const float s = (hi - lo) / levels, inv = s > 0.0f ? 1.0f / s : 0.0f;
        const float z = s > 0.0f ? clamp(rint(-lo * inv), 0.0f, levels) : 0.0f;
        vstore_half_rte(s, d, scales);
        vstore_half_rte(z, dim + d, scales);
        for (uint t = 0; t < tokens; t++) {
            const float x = vload_half(t * dim + d, tail);
            const uint q = isfinite(x) ? (uint)clamp(rint(x * inv) + z, 0.0f, levels) : (uint)z;
            packed[t] |= (uchar)(q << (e * bits));
        }
    }
    for (uint t = 0; t < tokens; t++)
        group[clattn_token_packed_at(dim, bits, t) + c] = packed[t];
}

/* A token-format cache (cl/formats.cl: clattn_load_token) instead: one work-group per head (b·kv_heads +
 * h), its work-item i owning channels i, i + size … of a row and bytes i, i + size … of a packed row (so
 * a device whose work-groups are smaller than a packed row still runs it), walks the head's new rows in order,
 * in step (a barrier after each row's writes, and after each group's quantisation): each row goes to its
 * tail slot as float16 (a finite value beyond half's range saturating to ±65504, NaN as 0x7e00), and a
 * row that completes a group (whose group has room in the chunk) has the group quantised from the tail:
 * per channel over the group's finite values, their range widened to hold 0, scale = range / levels,
 * zero = round(−min / scale), q = round(x / scale) + zero (to nearest even; a non-finite value: zero).
 * Work-item 0 writes the group's mask of rows holding a non-finite value (read from the whole tail, which
 * the barrier has completed) and keeps the chunk's count of complete groups: at the first new row of a
 * chunk it lowers the count to the groups below that row (so a fresh chunk starts at 0, and a cache
 * rolled back to a multiple of `tokens` rows refills its group), and it raises it as each group
 * completes. */
__kernel void clattn_append_rows(CLATTN_PARAMETERS(CLATTN_APPEND_ROWS_PARAMS))
{
    const uint bits = CLATTN_CAT(clattn_bits_, O_FMT), tokens = O_TOKENS;
    const ulong lid = get_local_id(0), size = get_local_size(0), bh = get_group_id(1); /* (a group a head) */
    const ulong row_bytes = dim * bits / 8;
    const ulong b = bh / kv_heads, h = bh % kv_heads, rows_per_chunk = O_CHUNK_ROWS;
    const ulong group_bytes = clattn_token_group_bytes(dim, tokens, bits);
    for (ulong r = 0; r < new_len; r++) {
        const ulong j = lengths[b] + r;
        ulong chunk_id = bh, in_chunk = j;
        if (table) {
            chunk_id = (ulong)table[b * cols + (j >> shift)] * kv_heads + h;
            in_chunk = j & (((ulong)1 << shift) - 1);
        }
        __global uchar *chunk = (__global uchar *)dst + chunk_id * clattn_token_chunk_bytes(rows_per_chunk, dim, tokens, bits);
        __global uint *complete = (__global uint *)chunk;
        if (lid == 0 && (r == 0 || in_chunk == 0))
            *complete = min(*complete, (uint)(in_chunk / tokens));
        __global half *tail = (__global half *)(chunk + clattn_token_tail_at(rows_per_chunk, dim, tokens, bits));
        for (ulong d = lid; d < dim; d += size) {
            const float x = LOAD_Q(rows, (bh * new_len + r) * dim + d);
            const ulong at = (in_chunk % tokens) * dim + d;
            if (isnan(x)) /* (one NaN code on every implementation: 0x7e00) */
                ((__global ushort *)tail)[at] = 0x7e00;
            else
                vstore_half_rte(isfinite(x) ? clamp(x, -65504.0f, 65504.0f) : x, at, tail);
        }
        barrier(CLK_GLOBAL_MEM_FENCE);
        const ulong g = in_chunk / tokens;
        if (in_chunk % tokens != tokens - 1 || g >= rows_per_chunk / tokens)
            continue; /* (uniform in the group: every work-item's row is the same) */
        /* The group of rows g·tokens … in_chunk is complete: quantise it from the tail. */
        __global uchar *group = chunk + 4 + g * group_bytes;
        for (ulong c = lid; c < row_bytes; c += size)
            clattn_token_quantise_byte(tail, group, dim, c);
        if (lid == 0) {
            uint bad = 0;
            for (uint t = 0; t < tokens; t++) {
                bool finite = true;
                for (ulong d = 0; d < dim; d++)
                    finite = finite && isfinite(vload_half(t * dim + d, tail));
                bad |= finite ? 0u : 1u << t;
            }
            *(__global uint *)group = bad;
            *complete = (uint)(g + 1);
        }
        barrier(CLK_GLOBAL_MEM_FENCE); /* (before the next row overwrites a tail slot read here) */
    }
}
#else
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
#endif
