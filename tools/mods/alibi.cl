/* ALiBi (Press et al.): a per-head slope times the signed distance k − q added to each score. Aux
 * `slopes`: float, one per query head (CLATTN_AUX_BY_HEAD). Equal to the built-in desc.alibi_slopes when
 * no soft-capping applies (the built-in adds ALiBi after soft-capping, a score_mod runs before it). */
float score_mod(float score, int b, int h, long q, long k, __global const float *slopes)
{
    return score + slopes[h] * (float)(k - q);
}
