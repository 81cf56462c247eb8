/* Row softmax in double precision (desc.softmax_precision = CLATTN_SOFTMAX_DOUBLE, ONNX's
 * softmax_precision = DOUBLE): the float32 scores are widened (exactly), and the row maximum, the
 * exponentials, their sum, the normalisation and the log-sum-exp run in double; each weight and the
 * log-sum-exp are rounded to float32 once, at the end. The same contract as clattn_softmax otherwise
 * (softmax.cl): a row whose every score is −inf gives zeros and a log-sum-exp of −inf (the sink with
 * sinks), a NaN score makes the row NaN, `in` and `out` may be one buffer. Built only for devices with
 * cl_khr_fp64, in a program of its own. One work-item per row: the exponentials are computed twice (for
 * the sum, then for the weights) rather than kept, since the output buffer holds floats only. */
#pragma OPENCL EXTENSION cl_khr_fp64 : enable

__kernel void clattn_softmax_double(CLATTN_PARAMETERS(CLATTN_SOFTMAX_PARAMS))
{
    CLATTN_ABSENT(CLATTN_SOFTMAX_PARAMS)
    const ulong r = get_global_id(0);
    if (r >= rows)
        return;
    __global const float *x = in + clattn_matrix_offset(0, r, 0, rows, cols);
    __global float *y = out + clattn_matrix_offset(0, r, 0, rows, cols);
    const double sink = sinks ? (double)sinks[(row_base + r) / q_len % heads] : -INFINITY;
    /* The row maximum, NaN as soon as one score is NaN (fmax would skip it). */
    double m = -INFINITY;
    bool nan_seen = false;
    for (ulong j = 0; j < cols; j++) {
        const double v = x[j];
        m = fmax(m, v);
        nan_seen |= isnan(v);
    }
    if (nan_seen)
        m = NAN;
    if (m == -INFINITY) {
        for (ulong j = 0; j < cols; j++)
            y[j] = 0.0f;
        if (lse)
            lse[row_base + r] = (float)sink;
        return;
    }
    m = isnan(m) ? m : fmax(m, sink);
    double sum = sink == -INFINITY ? 0.0 : exp(sink - m);
    for (ulong j = 0; j < cols; j++)
        sum += exp((double)x[j] - m);
    /* Each element is read before it is written: in place works. */
    for (ulong j = 0; j < cols; j++)
        y[j] = (float)(exp((double)x[j] - m) / sum);
    if (lse)
        lse[row_base + r] = (float)(m + log(sum));
}
