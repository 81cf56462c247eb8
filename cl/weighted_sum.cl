/* Weighted-sum stage: O = P·V for heads [bh_begin, bh_begin + gsize(2)); one work-item per output.
 * P is (chunk, L, S); V and O are read and written through (batch, head, row) strides, so heads can
 * be written straight into the layer's concatenated (B, L, H·Dv) layout; query head h reads V head
 * h / group (grouped-query attention). */
__kernel void clattn_weighted_sum(__global const float *p, __global const float *v, ulong v_bs, ulong v_hs,
                                  ulong v_rs, __global float *o, ulong o_bs, ulong o_hs, ulong o_rs,
                                  ulong heads, ulong group, ulong q_len, ulong kv_len, ulong dim, ulong bh_begin)
{
    const ulong d = get_global_id(0);
    const ulong i = get_global_id(1);
    const ulong local_bh = get_global_id(2);
    if (d >= dim || i >= q_len)
        return;
    const ulong bh = bh_begin + local_bh;
    const ulong b = bh / heads, h = bh % heads;
    __global const float *prow = p + clattn_matrix_offset(local_bh, i, 0, q_len, kv_len);
    __global const float *vcol = v + clattn_view_offset(b, h / group, 0, v_bs, v_hs, v_rs) + d;
    float acc = 0.0f;
    for (ulong j = 0; j < kv_len; j++) {
        const float w = prow[j];
        /* A masked key (weight 0) must not contribute even when its value is inf or NaN. */
        if (w != 0.0f)
            acc = fma(w, vcol[j * v_rs], acc);
    }
    o[clattn_view_offset(b, h, i, o_bs, o_hs, o_rs) + d] = acc;
}
