/* Score stage: the scores of heads [bh_begin, bh_begin + gsize(2)) as the softmax takes them
 * (Q·Kᵀ·scale, soft-capped, plus ALiBi and the masks; hidden keys −inf). One work-item per KEYS scores
 * of a row, its dot products VEC lanes wide (build options: 4 and the native width on CPUs, 1 and 1 on
 * GPUs). Q and
 * K are read through (batch, head, row) strides so that both SDPA's (B,H,L,D) and the layer's (B,L,H·D)
 * layouts work without a transpose; query head h reads K head h / group (grouped-query attention).
 * Scores are (chunk, L, S). The scale is split between q and the dot products as clattn_score_split says,
 * as on the fused and decode paths. When `extra` is given it also receives, at (B, H, L, S), the scores at the
 * point `extra_mode` names (clattn_weights_output: Q·Kᵀ·scale of every key, after soft-capping, or
 * what the softmax takes). */
__kernel void clattn_score(CLATTN_PARAMETERS(CLATTN_SCORE_PARAMS))
{
    CLATTN_ABSENT(CLATTN_SCORE_PARAMS)
    const ulong j0 = get_global_id(0) * KEYS; /* this work-item's keys: j0 … j0+KEYS−1 */
    const ulong i = get_global_id(1);
    const ulong local_bh = get_global_id(2);
    if (j0 >= kv_len || i >= q_len)
        return;
    const ulong bh = bh_begin + local_bh;
    const ulong b = bh / heads, h = bh % heads;
    const ulong key_len = key_lengths ? key_lengths[b] : kv_len;
    const long p = clattn_query_position(causal, offsets, b, i, q_len, kv_len);
    ulong begin, end;
    clattn_visible_range(causal, p, key_len, win_left, win_right, &begin, &end);
    __global const float *qrow = q + clattn_view_offset(b, h, i, q_bs, q_hs, q_rs);
    __global const float *k_head = k + clattn_view_offset(b, h / group, 0, k_bs, k_hs, k_rs);
    /* q times a power of two, each dot product times the scale's rest (clattn_score_split) */
    vec_t top = (vec_t)0.0f;
    ulong qd = 0;
    for (; qd + VEC <= dim; qd += VEC)
        top = fmax(top, fabs(VLOAD(qrow + qd)));
    float q_max = HMAX(top), q_factor;
    for (; qd < dim; qd++)
        q_max = fmax(q_max, fabs(qrow[qd]));
    const float factor = clattn_score_split(q_max, scale, &q_factor);
    /* The dot products of the work-item's keys (inside the buffer; wasted for hidden keys unless the
     * raw scores of extra modes 1 and 2 want them): KEYS chains VEC lanes wide that share each load of q,
     * unrolled so that they stay in registers, then the rest of the head one element at a time. */
    float dot[KEYS];
    vec_t lanes[KEYS];
    const int keys = (int)min((ulong)KEYS, kv_len - j0);
    UNROLL for (int x = 0; x < KEYS; x++)
        lanes[x] = (vec_t)0.0f;
    ulong d = 0;
    if (keys == KEYS) {
        for (; d + VEC <= dim; d += VEC) {
            const vec_t qv = VLOAD(qrow + d) * q_factor;
            UNROLL for (int x = 0; x < KEYS; x++)
                lanes[x] = fma(qv, VLOAD(k_head + (j0 + x) * k_rs + d), lanes[x]);
        }
    } else { /* the last keys of the row */
        for (; d + VEC <= dim; d += VEC) {
            const vec_t qv = VLOAD(qrow + d) * q_factor;
            for (int x = 0; x < keys; x++)
                lanes[x] = fma(qv, VLOAD(k_head + (j0 + x) * k_rs + d), lanes[x]);
        }
    }
    UNROLL for (int x = 0; x < KEYS; x++) {
        float acc = HSUM(lanes[x]);
        for (ulong e = d; x < keys && e < dim; e++)
            acc = fma(qrow[e] * q_factor, k_head[(j0 + x) * k_rs + e], acc);
        dot[x] = acc * factor;
    }
    clattn_row_terms terms;
    CLATTN_ROW_TERMS(&terms, h);
    CLATTN_ROW_AT(&terms, i, p);
    for (int x = 0; x < KEYS; x++) {
        const ulong j = j0 + x;
        if (j >= kv_len)
            break;
        const bool visible = j >= begin && j < end;
        const float value = visible ? clattn_score_terms(dot[x], softcap, &terms, (long)j, p,
                                                         clattn_additive_mask(mask, mask_type, mask_layout, b, h,
                                                                              heads, i, j, q_len, mask_cols))
                                    : -INFINITY;
        scores[clattn_matrix_offset(local_bh, i, j, q_len, kv_len)] = value;
        if (extra)
            extra[clattn_matrix_offset(bh, i, j, q_len, kv_len)] =
                extra_mode == WEIGHTS_QK ? dot[x]
                : extra_mode == WEIGHTS_SOFTCAPPED ? clattn_capped_score(dot[x], softcap, &terms, (long)j, p)
                                                   : value;
    }
}

#if VEC > 1
/* The CPU shape of the score stage, blocked like a GEMM: K of every (batch, K/V head) first transposed
 * (clattn_transpose_k: kt[(b·kv_heads + g)·dim + d][j] = K[b, g, j, d]), then one work-item per tile of
 * SR rows × SN = SV·VEC keys, its SR·SV vector accumulators in registers: per d, SV vectors of K's
 * column d and SR broadcasts of Q feed SR·SV multiply-adds (clattn_gemm's micro-kernel). Row tiles run
 * along dimension 0, so the work-groups a thread takes in turn reuse one panel of kt (dim × SN floats)
 * from its cache. Scores and the extra output are the same as clattn_score's. */
__kernel void clattn_transpose_k(CLATTN_PARAMETERS(CLATTN_TRANSPOSE_K_PARAMS))
{
    const ulong j = get_global_id(0), bg = get_global_id(1);
    if (j >= kv_len || bg >= batch * kv_heads)
        return;
    __global const float *row = k + clattn_view_offset(bg / kv_heads, bg % kv_heads, j, k_bs, k_hs, k_rs);
    __global float *column = kt + bg * dim * kv_len + j;
    for (ulong d = 0; d < dim; d++)
        column[d * kv_len] = row[d];
}

#define SN (SV * VEC)

__kernel void clattn_score_tiled(CLATTN_PARAMETERS(CLATTN_SCORE_TILED_PARAMS))
{
    CLATTN_ABSENT(CLATTN_SCORE_TILED_PARAMS)
    const ulong i0 = get_global_id(0) * SR, j0 = get_global_id(1) * SN, local_bh = get_global_id(2);
    if (i0 >= q_len || j0 >= kv_len)
        return;
    const ulong bh = bh_begin + local_bh, b = bh / heads, h = bh % heads;
    __global const float *kt_head = kt + (b * (heads / group) + h / group) * dim * kv_len + j0;
    /* Rows past the end read the last row (in bounds) and are never stored. */
    __global const float *qr[SR];
    UNROLL for (int r = 0; r < SR; r++)
        qr[r] = q + clattn_view_offset(b, h, min(i0 + r, q_len - 1), q_bs, q_hs, q_rs);
    /* The dot products as they are, then scaled: exactly the scores of clattn_score_split's split (its q
     * factor is a power of two) unless a dot product overflowed — then, for this tile only, again with q
     * times that power of two. Under a scale above 2^64 always so: products below float's normal range
     * would matter there. (A multiply per element of q in the loop costs the blocked kernel a third of
     * its time; a tile's test costs nothing.) */
    float q_factor[SR], factor[SR];
    UNROLL for (int r = 0; r < SR; r++) {
        q_factor[r] = 1.0f;
        factor[r] = scale;
    }
    vec_t acc[SR][SV];
    const bool full = j0 + SN <= kv_len;
    for (int pass = fabs(scale) > 0x1p64f ? 1 : 0; pass < 2; pass++) {
        if (pass == 1)
            UNROLL for (int r = 0; r < SR; r++) {
                vec_t top = (vec_t)0.0f;
                ulong d = 0;
                for (; d + VEC <= dim; d += VEC)
                    top = fmax(top, fabs(VLOAD(qr[r] + d)));
                float q_max = HMAX(top);
                for (; d < dim; d++)
                    q_max = fmax(q_max, fabs(qr[r][d]));
                factor[r] = clattn_score_split(q_max, scale, &q_factor[r]);
            }
        UNROLL for (int r = 0; r < SR; r++)
            UNROLL for (int u = 0; u < SV; u++)
                acc[r][u] = (vec_t)0.0f;
        for (ulong d = 0; d < dim; d++) {
            vec_t kv[SV];
            if (full) {
                UNROLL for (int u = 0; u < SV; u++)
                    kv[u] = VLOAD(kt_head + d * kv_len + u * VEC);
            } else {
                float lane[SN];
                for (int t = 0; t < SN; t++)
                    lane[t] = j0 + t < kv_len ? kt_head[d * kv_len + t] : 0.0f;
                UNROLL for (int u = 0; u < SV; u++)
                    kv[u] = VLOAD(lane + u * VEC);
            }
            if (pass == 0) {
                UNROLL for (int r = 0; r < SR; r++)
                    UNROLL for (int u = 0; u < SV; u++)
                        acc[r][u] = fma((vec_t)qr[r][d], kv[u], acc[r][u]);
            } else {
                UNROLL for (int r = 0; r < SR; r++) {
                    const vec_t qv = (vec_t)(qr[r][d] * q_factor[r]);
                    UNROLL for (int u = 0; u < SV; u++)
                        acc[r][u] = fma(qv, kv[u], acc[r][u]);
                }
            }
        }
        if (pass == 1)
            break;
        lanes_t overflow = 0;
        UNROLL for (int r = 0; r < SR; r++)
            UNROLL for (int u = 0; u < SV; u++)
                overflow |= NAN_LANES(acc[r][u] - acc[r][u]); /* (inf − inf and NaN are NaN) */
        if (!ANY_LANE(overflow))
            break;
    }
    const ulong key_len = key_lengths ? key_lengths[b] : kv_len;
    /* Nothing but the scale where every key of the tile is visible and no term or mask applies. */
    const bool plain = full && !CLATTN_SCORE_TERMS_ON && mask_layout == MASK_NONE && !extra;
    clattn_row_terms terms;
    CLATTN_ROW_TERMS(&terms, h);
    for (int r = 0; r < SR; r++) {
        const ulong i = i0 + r;
        if (i >= q_len)
            break;
        const long p = clattn_query_position(causal, offsets, b, i, q_len, kv_len);
        CLATTN_ROW_AT(&terms, i, p);
        ulong begin, end;
        clattn_visible_range(causal, p, key_len, win_left, win_right, &begin, &end);
        __global float *out = scores + clattn_matrix_offset(local_bh, i, j0, q_len, kv_len);
        if (plain && j0 >= begin && j0 + SN <= end) {
            UNROLL for (int u = 0; u < SV; u++)
                VSTORE(acc[r][u] * factor[r], out + u * VEC);
            continue;
        }
        float dot[SN];
        UNROLL for (int u = 0; u < SV; u++)
            VSTORE(acc[r][u] * factor[r], dot + u * VEC);
        for (int t = 0; t < SN && j0 + t < kv_len; t++) {
            const ulong j = j0 + t;
            const bool visible = j >= begin && j < end;
            const float value = visible ? clattn_score_terms(dot[t], softcap, &terms, (long)j, p,
                                                             clattn_additive_mask(mask, mask_type, mask_layout, b, h,
                                                                                  heads, i, j, q_len, mask_cols))
                                        : -INFINITY;
            out[t] = value;
            if (extra)
                extra[clattn_matrix_offset(bh, i, j, q_len, kv_len)] =
                    extra_mode == WEIGHTS_QK ? dot[t]
                    : extra_mode == WEIGHTS_SOFTCAPPED ? clattn_capped_score(dot[t], softcap, &terms, (long)j, p)
                                                       : value;
        }
    }
}
#endif
