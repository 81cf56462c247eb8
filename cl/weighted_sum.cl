/* Weighted-sum stage: O = P·V for heads [bh_begin, bh_begin + gsize(2)); one work-item per VEC·CHUNKS
 * adjacent outputs of a row (build options: the native width and 4 on CPUs, reading V rows as vectors
 * and each weight once for 4 of them; 1 and 1 on GPUs, one output each).
 * P is (chunk, L, S); V and O are read and written through (batch, head, row) strides, so heads can
 * be written straight into the layer's concatenated (B, L, H·Dv) layout; query head h reads V head
 * h / group (grouped-query attention). */
__kernel void clattn_weighted_sum(CLATTN_PARAMETERS(CLATTN_WEIGHTED_SUM_PARAMS))
{
    const ulong col = get_global_id(0) * VEC * CHUNKS; /* this work-item's columns: col … */
    const ulong i = get_global_id(1);
    const ulong local_bh = get_global_id(2);
    if (col >= dim || i >= q_len)
        return;
    const ulong bh = bh_begin + local_bh;
    const ulong b = bh / heads, h = bh % heads;
    const ulong n = min((ulong)(VEC * CHUNKS), dim - col); /* fewer at the row's end */
    __global const float *prow = p + clattn_matrix_offset(local_bh, i, 0, q_len, kv_len);
    __global const float *vcol = v + clattn_view_offset(b, h / group, 0, v_bs, v_hs, v_rs) + col;
    vec_t acc[CHUNKS];
    UNROLL for (int c = 0; c < CHUNKS; c++)
        acc[c] = (vec_t)0.0f;
    for (ulong j = 0; j < kv_len; j++) {
        const float w = prow[j];
        /* A masked key (weight 0) must not contribute even when its value is inf or NaN. */
        if (w == 0.0f)
            continue;
        __global const float *vr = vcol + j * v_rs;
        if (n == VEC * CHUNKS) { /* whole vectors, unrolled: the accumulators stay in registers */
            UNROLL for (int c = 0; c < CHUNKS; c++)
                acc[c] = fma((vec_t)w, VLOAD(vr + c * VEC), acc[c]);
        } else {
            UNROLL for (int c = 0; c < CHUNKS; c++) {
                float part[VEC];
                for (int x = 0; x < VEC; x++)
                    part[x] = (ulong)(c * VEC + x) < n ? vr[c * VEC + x] : 0.0f;
                acc[c] = fma((vec_t)w, VLOAD(part), acc[c]);
            }
        }
    }
    float out[VEC * CHUNKS];
    UNROLL for (int c = 0; c < CHUNKS; c++)
        VSTORE(acc[c], out + c * VEC);
    __global float *orow = o + clattn_view_offset(b, h, i, o_bs, o_hs, o_rs) + col;
    for (ulong x = 0; x < n; x++)
        orow[x] = out[x];
}
