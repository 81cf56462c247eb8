/* Merging partial attention results: for each query row, an output and its log-sum-exp computed over
 * one set of keys, combined with another over a disjoint set into the result over both,
 *   m = max(lse_a, lse_b, sink),  w_x = exp(lse_x − m),
 *   out = (w_a·out_a + w_b·out_b) / (w_a + w_b + w_sink),  lse = m + log(w_a + w_b + w_sink),
 * where a missing b (NULL) or sink counts as lse −inf. One work-item per row, which reads all of its
 * row before writing it, so `out` and `lse` may be the buffers of a. The parts' storage types are
 * build options: Q_T of a, K_T of b, O_T of out (cl/formats.cl). */
__kernel void clattn_merge(CLATTN_PARAMETERS(CLATTN_MERGE_PARAMS))
{
    const ulong r = get_global_id(0);
    if (r >= rows)
        return;
    const float la = lse_a[r], lb = out_b ? lse_b[r] : -INFINITY;
    const float ls = sinks ? sinks[r / q_len % heads] : -INFINITY;
    float m = fmax(fmax(la, lb), ls);
    if (isnan(la) || isnan(lb))
        m = NAN; /* a NaN part poisons the row (fmax would skip it) */
    const ulong row = r * dim;
    if (m == -INFINITY) { /* no part saw a key and there is no sink: the empty row */
        for (ulong d = 0; d < dim; d++)
            STORE_O(0.0f, out, row + d);
        lse[r] = -INFINITY;
        return;
    }
    /* A part with lse −inf has weight 0 and adds nothing, even if its output is not finite. */
    const float wa = la == -INFINITY ? 0.0f : exp(la - m), wb = lb == -INFINITY ? 0.0f : exp(lb - m);
    const float sum = wa + wb + (ls == -INFINITY ? 0.0f : exp(ls - m));
    for (ulong d = 0; d < dim; d++) {
        float v = wa == 0.0f ? 0.0f : wa * LOAD_Q(out_a, row + d);
        if (wb != 0.0f)
            v = fma(wb, LOAD_K(out_b, row + d), v);
        STORE_O(v / sum, out, row + d);
    }
    lse[r] = m + log(sum);
}
