/* Appending rows to a token-format cache (cl/formats.cl: clattn_load_token), in two launches with no
 * barrier and no work-item reading what another writes in the same launch:
 *
 *   1. clattn_append_token_groups quantises every group this append completes from its rows' float16
 *      values — rows appended earlier from the chunk's tail, new rows from `rows` (rounded to float16
 *      exactly as the tail holds them) — a work-item a packed byte of the group, one more for its mask;
 *   2. clattn_append_token_tail then writes each new row to its tail slot where no later new row takes
 *      that slot (what a row-by-row append would leave there), and each chunk's count of complete groups.
 *
 * (A first version walked the rows in one work-group a head, in step, with barriers; Mesa's rusticl on
 * llvmpipe lost rows of it, and it was serial in the rows.) Head h of sequence b (work-items' last index
 * b·kv_heads + h) takes its new rows from `rows` (B, kv_heads, new_len, dim) into rows lengths[b] … :
 * dense (table NULL: chunk b·kv_heads + h) or paged (row j in block table[b·cols + (j >> shift)], a chunk
 * a block and head). A group is quantised per channel over its finite values: their range widened to
 * hold 0, scale = range / levels, zero = round(−min / scale), q = round(x / scale) + zero (to nearest
 * even; a non-finite value: zero); its mask flags the rows holding a non-finite value. A finite value
 * beyond half's range saturates to ±65504; NaN is stored as 0x7e00 (one code on every implementation). */

#define TOKEN_BITS CLATTN_CAT(clattn_bits_, O_FMT)
#define TOKEN_ROW_BYTES (O_DIM * TOKEN_BITS / 8)

/* The chunk holding row j of head bh (= b·kv_heads + h), and j's row within it. */
inline __global uchar *clattn_append_chunk(__global o_store *dst, __global const int *table, ulong cols, uint shift,
                                           ulong kv_heads, ulong bh, ulong j, ulong *in_chunk)
{
    ulong chunk_id = bh;
    *in_chunk = j;
    if (table) {
        chunk_id = (ulong)table[bh / kv_heads * cols + (j >> shift)] * kv_heads + bh % kv_heads;
        *in_chunk = j & (((ulong)1 << shift) - 1);
    }
    return (__global uchar *)dst + chunk_id * clattn_token_chunk_bytes(O_CHUNK_ROWS, O_DIM, O_TOKENS, TOKEN_BITS);
}

inline __global half *clattn_append_tail(__global uchar *chunk)
{
    return (__global half *)(chunk + clattn_token_tail_at(O_CHUNK_ROWS, O_DIM, O_TOKENS, TOKEN_BITS));
}

/* A new value as its tail slot holds it: float16, finite values saturated. */
inline float clattn_token_staged(float x)
{
    if (!isfinite(x))
        return x;
    ushort bits[1]; /* (a half may not be declared without cl_khr_fp16; a pointer to one may) */
    vstore_half_rte(clamp(x, -65504.0f, 65504.0f), 0, (half *)bits);
    return vload_half(0, (const half *)bits);
}

/* Channel d of row t of the group whose first row is `first_row` (rows below `start` from the tail). */
inline float clattn_group_value(__global const half *tail, __global const q_store *rows, ulong bh, ulong new_len,
                                ulong start, ulong first_row, uint t, ulong d)
{
    const ulong j = first_row + t;
    return j < start ? vload_half(t * O_DIM + d, tail)
                     : clattn_token_staged(LOAD_Q(rows, (bh * new_len + (j - start)) * O_DIM + d));
}

/* Work-item (c, k, bh): the k-th group from the one holding row lengths[b], if this append completes it
 * and the chunk has room for it (a chunk's last rows past its groups stay in the tail): its packed byte c
 * of every row with those channels' scales and zero points, or (c = the row's bytes) its mask. */
__kernel void clattn_append_token_groups(CLATTN_PARAMETERS(CLATTN_APPEND_ROWS_PARAMS))
{
    const ulong c = get_global_id(0), k = get_global_id(1), bh = get_global_id(2);
    if (c > TOKEN_ROW_BYTES || bh >= batch * kv_heads || new_len == 0)
        return;
    const ulong start = lengths[bh / kv_heads], first_row = (start / O_TOKENS + k) * O_TOKENS;
    if (first_row + O_TOKENS > start + new_len)
        return;
    ulong in_chunk;
    __global uchar *chunk = clattn_append_chunk(dst, table, cols, shift, kv_heads, bh, first_row, &in_chunk);
    if (in_chunk / O_TOKENS >= O_CHUNK_ROWS / O_TOKENS)
        return;
    __global const half *tail = clattn_append_tail(chunk);
    __global uchar *group = chunk + 4 + in_chunk / O_TOKENS * clattn_token_group_bytes(O_DIM, O_TOKENS, TOKEN_BITS);
    if (c == TOKEN_ROW_BYTES) {
        uint bad = 0;
        for (uint t = 0; t < O_TOKENS; t++) {
            bool finite = true;
            for (ulong d = 0; d < O_DIM; d++)
                finite = finite && isfinite(clattn_group_value(tail, rows, bh, new_len, start, first_row, t, d));
            bad |= finite ? 0u : 1u << t;
        }
        *(__global uint *)group = bad;
        return;
    }
    const uint per_byte = 8 / TOKEN_BITS;
    const float levels = (float)((1u << TOKEN_BITS) - 1);
    __global half *scales = (__global half *)(group + 4);
    uchar packed[O_TOKENS];
    for (uint t = 0; t < O_TOKENS; t++)
        packed[t] = 0;
    for (uint e = 0; e < per_byte; e++) {
        const ulong d = c * per_byte + e;
        float lo = 0.0f, hi = 0.0f;
        for (uint t = 0; t < O_TOKENS; t++) {
            const float x = clattn_group_value(tail, rows, bh, new_len, start, first_row, t, d);
            if (isfinite(x)) {
                lo = fmin(lo, x);
                hi = fmax(hi, x);
            }
        }
        const float s = (hi - lo) / levels, inv = s > 0.0f ? 1.0f / s : 0.0f;
        const float z = s > 0.0f ? clamp(rint(-lo * inv), 0.0f, levels) : 0.0f;
        vstore_half_rte(s, d, scales);
        vstore_half_rte(z, O_DIM + d, scales);
        for (uint t = 0; t < O_TOKENS; t++) {
            const float x = clattn_group_value(tail, rows, bh, new_len, start, first_row, t, d);
            const uint q = isfinite(x) ? (uint)clamp(rint(x * inv) + z, 0.0f, levels) : (uint)z;
            packed[t] |= (uchar)(q << (e * TOKEN_BITS));
        }
    }
    for (uint t = 0; t < O_TOKENS; t++)
        group[clattn_token_packed_at(O_DIM, TOKEN_BITS, t) + c] = packed[t];
}

/* Work-item (d, r, bh): channel d of new row r into its tail slot, unless a later new row (O_TOKENS on,
 * in the same chunk) takes the slot; the last new row of a chunk (channel 0) sets the chunk's count of
 * complete groups — those below it, so a cache rolled back to a group's start refills that group. */
__kernel void clattn_append_token_tail(CLATTN_PARAMETERS(CLATTN_APPEND_ROWS_PARAMS))
{
    const ulong d = get_global_id(0), r = get_global_id(1), bh = get_global_id(2);
    if (d >= O_DIM || r >= new_len || bh >= batch * kv_heads)
        return;
    ulong in_chunk;
    __global uchar *chunk =
        clattn_append_chunk(dst, table, cols, shift, kv_heads, bh, lengths[bh / kv_heads] + r, &in_chunk);
    const bool last_in_chunk = r + 1 == new_len || in_chunk + 1 == O_CHUNK_ROWS;
    if (d == 0 && last_in_chunk)
        *(__global uint *)chunk = (uint)min((in_chunk + 1) / O_TOKENS, (ulong)(O_CHUNK_ROWS / O_TOKENS));
    if (r + O_TOKENS < new_len && in_chunk + O_TOKENS < O_CHUNK_ROWS)
        return;
    const float x = LOAD_Q(rows, (bh * new_len + r) * O_DIM + d);
    __global half *tail = clattn_append_tail(chunk);
    const ulong at = in_chunk % O_TOKENS * O_DIM + d;
    if (isnan(x))
        ((__global ushort *)tail)[at] = 0x7e00;
    else
        vstore_half_rte(clattn_token_staged(x), at, tail);
}
