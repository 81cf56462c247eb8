/* The backward pass for CPUs, FlashAttention-2's tiles with the keys in the SIMD lanes: the same gradients
 * as cl/backward.cl's per-row kernels (whose comment gives the formulas), the five products of a tile
 * each shaped so that no sum runs across lanes.
 *
 * A work-item owns one chunk of keys of one (batch, K/V head) — `chunk_keys` keys, the whole sequence
 * where there are enough (batch, K/V head) pairs to fill the device — and walks them a tile of KB keys
 * (KVEC vectors of VEC keys) at a time. For each tile it holds K and V transposed (kt[d][keys],
 * vt[d][keys]), K as it lies (kn[key][d]), and the tile's dK and dV accumulators (dkt, dvt), and takes
 * the query rows of the group's heads that see the tile QS at a time:
 *   scores   s[r][keys]  = Σ_d q_rd · kt[d][keys]     (q_rd broadcast, the key vectors of kt)
 *            dp[r][keys] = Σ_d dO_rd · vt[d][keys]
 *   weights  P = exp(s·scale − lse_r), dS = P·(dp − D_r)·scale (masks and score terms key by key where
 *            a row does not see the whole tile plainly: cl/backward.cl's clattn_backward_pair; a block
 *            mask's EMPTY steps skipped, its FULL ones plain when nothing else applies)
 *   dV, dK   dvt[d][keys] += Σ_r dO_rd · P[r][keys], dkt[d][keys] += Σ_r q_rd · dS[r][keys]
 *   dQ       dQ_r[d] += Σ_key dS[r][key] · kn[key][d] (d in the lanes), added to the row in memory.
 * Every factor here is finite (the host sends a call with a non-finite Q, K, V or dO to cl/backward.cl's
 * row kernels: clattn_backward_finite), so a hidden pair's terms — its weight 0 times finite values — are
 * exactly 0, with no test in the vector products.
 * The chunk's work-item is the only one that writes its dQ rows (grad_q itself where there is one chunk,
 * else the chunk's own copy, summed in chunk order by clattn_backward_dq_sum) and its dK, dV rows: every
 * sum has one order, and the gradients the same bits run after run.
 * Build options as cl/backward.cl's, and VEC > 1 (the lanes).
 *
 * Reproducible arithmetic (-DCLATTN_EXACT=1): the same bits as cl/backward.cl's exact row kernels, whatever VEC —
 * each gradient element is one fma chain in their order (dK, dV over the group's heads and rows ascending, a lane a
 * key; dQ over the keys ascending, carried from tile to tile in grad_q itself, so the host runs one chunk), the
 * entries below 2^-40 cut as there (XCUT: K and V staged so; Q and dO arrive so, clattn_backward_cut, once rather than
 * at each of the many reads of a row; P and dS as they are made), so that no sum's step needs a flush, and the
 * weights and dS from the same operations, each step flushed (XFV; clattn_x_exp lane by lane: clattn_x_exp_vec). A
 * hidden pair's zero terms leave a sum's bits as they are (x + 0 = x, and +0 + ±0 = +0), as the row kernels'
 * skipping them does. */

#if VEC > 1
#define KB (2 * VEC)         /* keys per tile */
#define KVEC (KB / VEC)      /* key vectors per tile */
#if VEC >= 16
#define QS 8 /* query rows per step: QS × KVEC score accumulators in registers (32 with AVX-512) */
#else
#define QS 4
#endif
#define DKV (DK / VEC) /* vectors of a dQ row */

#ifdef CLATTN_EXACT
#define XFV(x) select((x), (vec_t)0.0f, fabs(x) < (vec_t)FLT_MIN)
#define XCUTV(x) select((x), (vec_t)0.0f, fabs(x) < (vec_t)0x1p-40f)
#define CLATTN_VCAT(a) CLATTN_CAT(a, VEC)
/* clattn_x_exp (cl/exact_math.cl) lane by lane: the same operations in the same order, so the same bits, its
 * special cases chosen last by select. */
inline vec_t clattn_x_exp_vec(vec_t x)
{
    const uvec_t u = AS_UINT(x);
    x = AS_VEC(select(u, u & 0x80000000u, (u & 0x7f800000u) == 0)); /* a subnormal read as a zero of its sign */
    const vec_t n = rint(x * 1.44269504088896341f);
    vec_t r = fma(-n, (vec_t)0.693359375f, x);
    r = fma(-n, (vec_t)-2.12194440e-4f, r);
    vec_t p = (vec_t)1.9875691500e-4f;
    p = fma(p, r, (vec_t)1.3981999507e-3f);
    p = fma(p, r, (vec_t)8.3334519073e-3f);
    p = fma(p, r, (vec_t)4.1665795894e-2f);
    p = fma(p, r, (vec_t)1.6666665459e-1f);
    p = fma(p, r, (vec_t)5.0000001201e-1f);
    const vec_t r2 = r * r;
    const vec_t y = fma(p, r2, r) + 1.0f;
    const lanes_t e = CLATTN_VCAT(convert_int)(n), e1 = e / 2; /* (garbage in the special lanes, chosen away) */
    vec_t result = y * AS_VEC((e1 + 127) << 23) * AS_VEC((e - e1 + 127) << 23);
    result = select(result, (vec_t)1.0f, fabs(x) < (vec_t)0x1p-26f);
    result = select(result, (vec_t)0.0f, x < (vec_t)-87.33f);
    result = select(result, (vec_t)INFINITY, x > (vec_t)88.72283935546875f);
    return select(result, x, isnan(x));
}
#else
#define XFV(x) (x)
#define XCUTV(x) (x)
#endif

/* grad_q's rows of the (batch, K/V head) of a work-item: its heads' rows are consecutive. */
__kernel void clattn_backward_lanes(CLATTN_PARAMETERS(CLATTN_BACKWARD_LANES_PARAMS))
{
    CLATTN_ABSENT(CLATTN_BACKWARD_LANES_PARAMS)
    const ulong chunk = get_global_id(0), bg = get_global_id(1), kv_heads = heads / group;
    if (bg >= batch * kv_heads || chunk * chunk_keys >= kv_len)
        return;
    const ulong b = bg / kv_heads, g = bg % kv_heads, key_len = key_lengths ? key_lengths[b] : kv_len;
    const ulong rows = batch * heads * q_len, first_row = (b * heads + g * group) * q_len;
    __global float *dq = grad_q + chunk * rows * dk; /* this chunk's dQ (one chunk: grad_q itself) */
    for (ulong e = first_row * dk; e < (first_row + group * q_len) * dk; e++)
        dq[e] = 0.0f;
    const bool score_terms = CLATTN_SCORE_TERMS_ON;
    float tile_key_ids[KB]; /* 0, 1, … KB − 1: a key's place in its tile, lane by lane */
    for (int x = 0; x < KB; x++)
        tile_key_ids[x] = (float)x;

    vec_t kt_v[DK * KVEC], vt_v[DV * KVEC], dkt_v[DK * KVEC], dvt_v[DV * KVEC];
    float kn[KB * DK];
    vec_t s_v[QS * KVEC], dp_v[QS * KVEC];
    float *s = (float *)s_v, *dp = (float *)dp_v;
    const ulong chunk_end = min((chunk + 1) * chunk_keys, kv_len);
    for (ulong j0 = chunk * chunk_keys; j0 < chunk_end; j0 += KB) {
        const ulong tile_keys = min((ulong)KB, chunk_end - j0);
        for (int x = 0; x < KB; x++) {
            const bool in = (ulong)x < tile_keys;
            __global const float *kj = k + (bg * kv_len + j0 + x) * dk, *vj = v + (bg * kv_len + j0 + x) * dv;
            for (int d = 0; d < DK; d++) {
                const float value = in && (ulong)d < dk ? XCUT(kj[d]) : 0.0f;
                ((float *)kt_v)[d * KB + x] = value;
                kn[x * DK + d] = value;
            }
            for (int d = 0; d < DV; d++)
                ((float *)vt_v)[d * KB + x] = in && (ulong)d < dv ? XCUT(vj[d]) : 0.0f;
        }
        for (int e = 0; e < DK * KVEC; e++)
            dkt_v[e] = (vec_t)0.0f;
        for (int e = 0; e < DV * KVEC; e++)
            dvt_v[e] = (vec_t)0.0f;

        for (ulong hh = 0; hh < group && j0 < key_len; hh++) {
            const ulong h = g * group + hh;
            for (ulong i0 = 0; i0 < q_len; i0 += QS) {
                /* The step's rows: their positions, what they see, and whether the only masks are those
                 * ranges (no mask tensor, no score terms; then the weights are formed a vector at a time,
                 * the keys outside each row's range given weight 0). */
                clattn_row_terms terms[QS];
                long pos[QS];
                ulong row[QS], begin[QS], end[QS];
                float lse_r[QS], delta_r[QS];
                bool any_seen = false, rows_finite = true;
                float seen_from[QS], seen_to[QS]; /* the tile's keys [from, to) a row sees, from its first */
                UNROLL for (int r = 0; r < QS; r++) {
                    const ulong i = min(i0 + r, q_len - 1); /* a row past the end: the last, seeing nothing */
                    row[r] = (b * heads + h) * q_len + i;
                    pos[r] = clattn_query_position(causal, offsets, b, i, q_len, kv_len);
                    clattn_visible_range(causal, pos[r], key_len, win_left, win_right, &begin[r], &end[r]);
                    if (i0 + r >= q_len)
                        begin[r] = end[r] = 0;
                    lse_r[r] = XF(lse[row[r]]);
                    delta_r[r] = delta[row[r]];
                    const bool seen = begin[r] < j0 + tile_keys && end[r] > j0;
                    any_seen |= seen && lse_r[r] > -INFINITY;
                    rows_finite &= !seen || lse_r[r] > -INFINITY;
                    seen_from[r] = seen ? (float)(max(begin[r], j0) - j0) : 0.0f;
                    seen_to[r] = seen ? (float)(min(end[r], j0 + tile_keys) - j0) : 0.0f;
                }
                /* A block mask: a step whose blocks are all EMPTY is skipped, as the forward pass skips its
                 * tiles; where they are all FULL mask_mod has nothing to hide, and without other terms the
                 * weights are formed a vector at a time. (The rows' positions grow with i.) */
                const int blocks = any_seen ? CLATTN_BLOCK_SPAN(b, h, h, pos[0], pos[min((ulong)QS, q_len - i0) - 1], j0,
                                                                 tile_keys)
                                            : BLOCK_EMPTY;
                if (blocks == BLOCK_EMPTY)
                    continue;
                const bool vector_weights = rows_finite && mask_layout == MASK_NONE &&
                                            (!score_terms || (blocks == BLOCK_FULL && !CLATTN_VALUE_TERMS_ON));

                /* Scores and dO·V, QS rows × KVEC key vectors a step of d. */
                vec_t qk[QS][KVEC], ov[QS][KVEC];
                UNROLL for (int r = 0; r < QS; r++)
                    UNROLL for (int x = 0; x < KVEC; x++)
                        qk[r][x] = ov[r][x] = (vec_t)0.0f;
                for (ulong d = 0; d < dk; d++)
                    UNROLL for (int r = 0; r < QS; r++) {
                        const vec_t qd = (vec_t)q[row[r] * dk + d];
                        UNROLL for (int x = 0; x < KVEC; x++)
                            qk[r][x] = fma(qd, kt_v[d * KVEC + x], qk[r][x]);
                    }
                for (ulong d = 0; d < dv; d++)
                    UNROLL for (int r = 0; r < QS; r++) {
                        const vec_t od = (vec_t)dout[row[r] * dv + d];
                        UNROLL for (int x = 0; x < KVEC; x++)
                            ov[r][x] = fma(od, vt_v[d * KVEC + x], ov[r][x]);
                    }
                UNROLL for (int r = 0; r < QS; r++)
                    UNROLL for (int x = 0; x < KVEC; x++) {
                        s_v[r * KVEC + x] = qk[r][x];
                        dp_v[r * KVEC + x] = ov[r][x];
                    }

                /* Weights P (in s) and dS (in dp). */
                if (vector_weights) {
                    UNROLL for (int r = 0; r < QS; r++)
                        UNROLL for (int x = 0; x < KVEC; x++) {
                            const vec_t key = VLOAD(tile_key_ids + x * VEC);
                            const float lse_or_0 = lse_r[r] > -INFINITY ? lse_r[r] : 0.0f;
#ifdef CLATTN_EXACT /* (clattn_backward_pair's steps without terms) */
                            const vec_t z = XFV(s_v[r * KVEC + x] * scale);
                            const vec_t p = select((vec_t)0.0f, XCUTV(clattn_x_exp_vec(z - lse_or_0)),
                                                   key >= seen_from[r] && key < seen_to[r]);
                            s_v[r * KVEC + x] = p;
                            dp_v[r * KVEC + x] = XCUTV(XFV(XFV(p * XFV(dp_v[r * KVEC + x] - delta_r[r])) * scale));
#else
                            const vec_t p = select((vec_t)0.0f,
                                                   clattn_exp_weight(fma(s_v[r * KVEC + x], (vec_t)scale, (vec_t)-lse_or_0)),
                                                   key >= seen_from[r] && key < seen_to[r]);
                            s_v[r * KVEC + x] = p;
                            dp_v[r * KVEC + x] = p * (dp_v[r * KVEC + x] - delta_r[r]) * scale;
#endif
                        }
                } else {
                    for (int r = 0; r < QS; r++) {
                        CLATTN_ROW_TERMS(&terms[r], h);
                        const ulong i = row[r] - (b * heads + h) * q_len;
                        CLATTN_ROW_AT(&terms[r], i, pos[r]);
                        for (int x = 0; x < KB; x++) {
                            const ulong j = j0 + x;
                            float ds = 0.0f, weight = 0.0f;
                            if (j >= begin[r] && j < end[r])
                                weight = clattn_backward_pair(
                                    XF(s[r * KB + x] * scale), softcap, &terms[r], (long)j, pos[r],
                                    clattn_additive_mask(mask, mask_type, mask_layout, b, h, heads, i, j, q_len, mask_cols),
                                    lse_r[r], dp[r * KB + x], delta_r[r], scale, &ds);
                            s[r * KB + x] = weight;
                            dp[r * KB + x] = ds;
                        }
                    }
                }

                /* dV and dK: each accumulator vector of the tile once per step, QS rows into it. (Written out
                 * twice on purpose: as one inline function taking the private arrays by pointer, PoCL 3.1
                 * kept them in memory and the whole pass took 1.35x as long.) */
                for (ulong d = 0; d < dv; d++)
                    UNROLL for (int x = 0; x < KVEC; x++) {
                        vec_t acc = dvt_v[d * KVEC + x];
                        UNROLL for (int r = 0; r < QS; r++)
                            acc = fma((vec_t)dout[row[r] * dv + d], s_v[r * KVEC + x], acc);
                        dvt_v[d * KVEC + x] = acc;
                    }
                for (ulong d = 0; d < dk; d++)
                    UNROLL for (int x = 0; x < KVEC; x++) {
                        vec_t acc = dkt_v[d * KVEC + x];
                        UNROLL for (int r = 0; r < QS; r++)
                            acc = fma((vec_t)q[row[r] * dk + d], dp_v[r * KVEC + x], acc);
                        dkt_v[d * KVEC + x] = acc;
                    }

                /* dQ: two rows at a time over the tile's keys, d in the lanes; then into the rows (reproducible: the
                 * rows' chains carried on from grad_q, the one chunk's). */
                for (int r = 0; r < QS; r += 2) {
                    float sums[2][DK];
                    vec_t acc0[DKV], acc1[DKV];
#ifdef CLATTN_EXACT
                    for (int t = 0; t < 2; t++)
                        for (int d = 0; d < DK; d++)
                            sums[t][d] = (ulong)d < dk ? dq[row[r + t] * dk + d] : 0.0f;
                    UNROLL for (int c = 0; c < DKV; c++) {
                        acc0[c] = VLOAD(sums[0] + c * VEC);
                        acc1[c] = VLOAD(sums[1] + c * VEC);
                    }
#else
                    UNROLL for (int c = 0; c < DKV; c++)
                        acc0[c] = acc1[c] = (vec_t)0.0f;
#endif
                    for (int x = 0; x < KB; x++) {
                        const vec_t ds0 = (vec_t)dp[r * KB + x], ds1 = (vec_t)dp[(r + 1) * KB + x];
                        UNROLL for (int c = 0; c < DKV; c++) {
                            const vec_t kv = VLOAD(kn + x * DK + c * VEC);
                            acc0[c] = fma(ds0, kv, acc0[c]);
                            acc1[c] = fma(ds1, kv, acc1[c]);
                        }
                    }
                    UNROLL for (int c = 0; c < DKV; c++) {
                        VSTORE(acc0[c], sums[0] + c * VEC);
                        VSTORE(acc1[c], sums[1] + c * VEC);
                    }
                    for (int t = 0; t < 2; t++)
                        if (i0 + r + t < q_len)
                            for (ulong d = 0; d < dk; d++)
#ifdef CLATTN_EXACT
                                dq[row[r + t] * dk + d] = XF(sums[t][d]); /* (a zero's sign: see backward.cl) */
#else
                                dq[row[r + t] * dk + d] += sums[t][d];
#endif
                }
            }
        }

        /* The tile's dK and dV rows (0 for keys no row sees). */
        for (ulong x = 0; x < tile_keys; x++) {
            __global float *dkj = grad_k + (bg * kv_len + j0 + x) * dk, *dvj = grad_v + (bg * kv_len + j0 + x) * dv;
            for (ulong d = 0; d < dk; d++)
                dkj[d] = XF(((float *)dkt_v)[d * KB + x]);
            for (ulong d = 0; d < dv; d++)
                dvj[d] = XF(((float *)dvt_v)[d * KB + x]);
        }
    }
}
#endif

/* grad_q = Σ_c parts[c], the chunks' dQ in chunk order, element by element. */
__kernel void clattn_backward_dq_sum(CLATTN_PARAMETERS(CLATTN_BACKWARD_DQ_SUM_PARAMS))
{
    CLATTN_ABSENT(CLATTN_BACKWARD_DQ_SUM_PARAMS)
    const ulong e = get_global_id(0);
    if (e >= n)
        return;
    float sum = 0.0f;
    for (ulong c = 0; c < chunks; c++)
        sum += parts[c * n + e];
    grad_q[e] = sum;
}
