/* A paged KV cache's check of the block ids a call can reach (before anything reads or writes through
 * them; appends through the table are cl/convert.cl's clattn_append_rows). Sequence b's row j is row
 * j % 2^shift of block table[b·cols + (j >> shift)]. */

/* Work-item (c, b): sequence b needs blocks 0 … ⌈(lengths[b] + extra) / 2^shift⌉ − 1; a needed id outside
 * [0, blocks) records its table index (the smallest one wins). */
__kernel void clattn_paged_check(CLATTN_PARAMETERS(CLATTN_PAGED_CHECK_PARAMS))
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
