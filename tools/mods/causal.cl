/* Causal masking as a mask_mod: query position q sees keys 0..q (the built-in CLATTN_CAUSAL_TOP_LEFT;
 * give query offsets for a cache's rows). */
bool mask_mod(int b, int h, long q, long k)
{
    return k <= q;
}
