/* Row softmax, one work-item per row (VEC lanes at a time inside it), stabilised by the row maximum. A row that is all −inf (every
 * key masked) gives zeros and a log-sum-exp of −inf instead of the 0/0 = NaN of the naive formula.
 * With sinks, row r of the chunk (head (row_base + r) / L mod heads) has one more logit in its
 * denominator, without a weight of its own: the weights then sum to less than 1 and the log-sum-exp
 * includes it (a row with no visible key but a sink: zero weights, log-sum-exp = the sink).
 * `in` and `out` may be the same buffer. */
__kernel void clattn_softmax(CLATTN_PARAMETERS(CLATTN_SOFTMAX_PARAMS))
{
    CLATTN_ABSENT(CLATTN_SOFTMAX_PARAMS)
    const ulong r = get_global_id(0);
    if (r >= rows)
        return;
    __global const float *x = in + clattn_matrix_offset(0, r, 0, rows, cols);
    __global float *y = out + clattn_matrix_offset(0, r, 0, rows, cols);
    const float sink = sinks ? sinks[(row_base + r) / q_len % heads] : -INFINITY;
    /* The row maximum, NaN as soon as one score is NaN (fmax would skip it, and a row whose only
     * visible score is NaN would pass for fully masked). VEC lanes at a time, then the rest. */
    const ulong whole = cols / VEC * VEC;
    vec_t top = (vec_t)-INFINITY;
    bool nan_seen = false;
    for (ulong j = 0; j < whole; j += VEC) {
        const vec_t xv = VLOAD(x + j);
        top = fmax(top, xv);
        nan_seen |= ANY_NAN(xv);
    }
    float m = HMAX(top);
    for (ulong j = whole; j < cols; j++) {
        m = fmax(m, x[j]);
        nan_seen |= isnan(x[j]);
    }
    if (nan_seen)
        m = NAN;
    if (m == -INFINITY) {
        for (ulong j = 0; j < cols; j++)
            y[j] = 0.0f;
        if (lse)
            lse[row_base + r] = sink;
        return;
    }
    m = isnan(m) ? m : fmax(m, sink);
    /* exp(x − m) (clattn_exp_weight: vector arithmetic, no subnormals) written once and summed, then
     * scaled in place (x and y may be one buffer: each element is read before it is written). */
    vec_t lanes = (vec_t)0.0f;
    for (ulong j = 0; j < whole; j += VEC) {
        const vec_t e = clattn_exp_weight(VLOAD(x + j) - (vec_t)m);
        VSTORE(e, y + j);
        lanes += e;
    }
    float sum = (sink == -INFINITY ? 0.0f : clattn_exp_weight1(sink - m)) + HSUM(lanes);
    for (ulong j = whole; j < cols; j++) {
        const float e = clattn_exp_weight1(x[j] - m);
        y[j] = e;
        sum += e;
    }
    const float inv = 1.0f / sum;
    for (ulong j = 0; j < whole; j += VEC)
        VSTORE(VLOAD(y + j) * inv, y + j);
    for (ulong j = whole; j < cols; j++)
        y[j] *= inv;
    if (lse)
        lse[row_base + r] = m + log(sum);
}
