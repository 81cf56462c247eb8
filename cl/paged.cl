/* A paged KV cache's two helpers: the check of the block ids a call can reach (before anything reads
 * or writes through them), and the append of new K/V rows through the block table. Sequence b's row j
 * is row j % 2^shift of block table[b·cols + (j >> shift)]; a block holds kv_heads heads of 2^shift rows
 * of `dim` floats. */

/* Work-item (c, b): sequence b needs blocks 0 … ⌈(lengths[b] + extra) / 2^shift⌉ − 1; a needed id outside
 * [0, blocks) records its table index (the smallest one wins). */
__kernel void clattn_paged_check(__global const int *table, ulong cols, ulong batch, __global const ulong *lengths,
                                 ulong extra, uint shift, ulong blocks, __global int *first_bad)
{
    const ulong c = get_global_id(0), b = get_global_id(1);
    if (b >= batch || c >= cols)
        return;
    const ulong needed = (lengths[b] + extra + ((ulong)1 << shift) - 1) >> shift;
    if (c >= needed)
        return;
    const int id = table[b * cols + c];
    if (id < 0 || (ulong)id >= blocks)
        atomic_min(first_bad, (int)(b * cols + c)); /* the host keeps B·cols below 2^31 */
}

/* Work-item (d, r, b·kv_heads + h): element d of new row r of head h of sequence b, from `rows`
 * (B, kv_heads, new_len, dim) into the pool at row lengths[b] + r. */
__kernel void clattn_paged_append(__global const float *rows, ulong new_len, ulong kv_heads, ulong dim,
                                  ulong batch, __global float *pool, __global const int *table, ulong cols,
                                  uint shift, __global const ulong *lengths)
{
    const ulong d = get_global_id(0), r = get_global_id(1), bh = get_global_id(2);
    if (d >= dim || r >= new_len || bh >= batch * kv_heads)
        return;
    const ulong b = bh / kv_heads, h = bh % kv_heads, j = lengths[b] + r;
    const ulong block = (ulong)table[b * cols + (j >> shift)];
    const ulong row = ((block * kv_heads + h) << shift) + (j & (((ulong)1 << shift) - 1));
    pool[row * dim + d] = rows[(bh * new_len + r) * dim + d];
}
