/* Top-k selection (DeepSeek's sparse attention: the keys an indexer scored highest, for clattn_sdpa_sparse):
 * each row of scores (B, L, S) gives the positions of its top_k largest scores among the first lengths[b] keys,
 * in ascending order, into indices (B, L, top_k), −1 after them where fewer keys can be chosen. NaN and −inf
 * scores are never chosen; ties at the threshold go to the lower positions — so the selection is one exact
 * set, the same on every device.
 *
 * One work-item a row: a radix select over the scores' order-preserving 32-bit keys, 8 bits a pass (a
 * histogram of the keys that still match the prefix, its bins walked from the top until top_k are reached),
 * then one pass writing the positions above the threshold and the first of those equal to it. */

/* A float's key: larger floats, larger keys (the sign bit flipped for positives, every bit for negatives);
 * −0 as +0 (equal scores: a tie); NaN 0. −inf's key is CLATTN_TOPK_NEG_INF_KEY: keys at or below it are never
 * chosen. (Bits, not float comparisons: a device that flushes subnormals ranks them as every other does.) */
#define CLATTN_TOPK_NEG_INF_KEY 0x007fffffu
inline uint clattn_topk_key(float x)
{
    const uint u = as_uint(x) == 0x80000000u ? 0u : as_uint(x);
    return isnan(x) ? 0u : (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__kernel void clattn_topk(CLATTN_PARAMETERS(CLATTN_TOPK_PARAMS))
{
    const ulong row = get_global_id(0);
    if (row >= rows)
        return;
    const ulong len = lengths ? min(lengths[row / q_len], kv_len) : kv_len;
    __global const float *s = scores + row * kv_len;
    __global int *out = indices + row * top_k;
    /* The threshold's key, found 8 bits at a time; `wanted`: how many of the keys equal to it to take. */
    uint prefix = 0, mask = 0;
    ulong wanted = top_k, valid = 0;
    for (ulong j = 0; j < len; j++)
        valid += clattn_topk_key(s[j]) > CLATTN_TOPK_NEG_INF_KEY;
    if (valid > top_k) {
        for (int shift = 24; shift >= 0; shift -= 8) {
            uint hist[256];
            for (int d = 0; d < 256; d++)
                hist[d] = 0;
            for (ulong j = 0; j < len; j++) {
                const uint key = clattn_topk_key(s[j]);
                if (key > CLATTN_TOPK_NEG_INF_KEY && (key & mask) == prefix)
                    hist[(key >> shift) & 255u]++;
            }
            int d = 255;
            while (hist[d] < wanted) /* (the bins above the threshold's hold fewer than wanted) */
                wanted -= hist[d--];
            prefix |= (uint)d << shift;
            mask |= 255u << shift;
        }
    } else {
        prefix = CLATTN_TOPK_NEG_INF_KEY; /* every valid key: those above −inf's */
        wanted = 0;
    }
    ulong n = 0;
    for (ulong j = 0; j < len && n < top_k; j++) {
        const uint key = clattn_topk_key(s[j]);
        if (key > prefix || (key == prefix && wanted > 0 && key > CLATTN_TOPK_NEG_INF_KEY)) {
            if (key == prefix)
                wanted--;
            out[n++] = (int)j;
        }
    }
    for (; n < top_k; n++)
        out[n] = -1;
}
