/* Elementary functions that every conforming OpenCL implementation computes to the same bits (issue 41's
 * reproducible arithmetic): built only from operations IEEE 754 rounds exactly and OpenCL's full profile
 * requires so — +, −, ×, fma, rint, comparisons, integer arithmetic on the bits — never from the built-in
 * exp, log, tanh or division (whose results may differ by an ulp or more between implementations), and with
 * contraction off (a compiler may not fuse a·b + c into an fma on one device and not another). A value below
 * FLT_MIN is never produced: each function returns 0 (or the nearest normal) where the true result would be
 * subnormal, so a device that flushes subnormals gets the same bits as one that keeps them. The same
 * algorithms in C (tools/reference/exact_math.c) give the same bits on the host: tests/test_exact_math.c holds
 * every device to them. Constants and polynomials: Cephes' single-precision expf, logf and tanhf. */
#pragma OPENCL FP_CONTRACT OFF

/* Soft-capping c·tanh(s/c) in this arithmetic, for cl/masks.cl (which otherwise uses the built-ins). */
#define CLATTN_SOFTCAP_OF(s, c) ((c) * clattn_x_tanh((s) * clattn_x_recip(c)))

/* x with a subnormal value replaced by a zero of its sign. */
inline float clattn_x_flush(float x)
{
    const uint u = as_uint(x);
    return (u & 0x7f800000u) == 0 ? as_float(u & 0x80000000u) : x;
}

/* e^x, within 2 ulp; 0 below −87.33 (where e^x comes within 1% of FLT_MIN: every result returned is normal),
 * +inf above 88.72284, NaN for NaN. */
inline float clattn_x_exp(float x)
{
    x = clattn_x_flush(x); /* (a subnormal x is read as the zero a flushing device would read) */
    if (isnan(x))
        return x;
    if (x > 88.72283935546875f)
        return INFINITY;
    if (x < -87.33f)
        return 0.0f;
    if (fabs(x) < 0x1p-26f) /* (e^x rounds to 1; and r·r below would be subnormal) */
        return 1.0f;
    /* x = n·ln 2 + r, |r| ≤ ln 2 / 2: ln 2 in two parts, the first with few enough bits that n·C1 is exact. */
    const float n = rint(x * 1.44269504088896341f);
    float r = fma(-n, 0.693359375f, x);
    r = fma(-n, -2.12194440e-4f, r);
    float p = 1.9875691500e-4f;
    p = fma(p, r, 1.3981999507e-3f);
    p = fma(p, r, 8.3334519073e-3f);
    p = fma(p, r, 4.1665795894e-2f);
    p = fma(p, r, 1.6666665459e-1f);
    p = fma(p, r, 5.0000001201e-1f);
    const float r2 = r * r;
    const float y = fma(p, r2, r) + 1.0f;
    /* y·2^n in two exact steps (2^n alone may not be a float at n = 128 or −127); the result stays normal. */
    const int e = (int)n, e1 = e / 2;
    return y * as_float((uint)(e1 + 127) << 23) * as_float((uint)(e - e1 + 127) << 23);
}

/* ln x, within 2 ulp, for x ≥ FLT_MIN; −inf for 0 and subnormals (read as 0), NaN below 0 and for NaN. */
inline float clattn_x_log(float x)
{
    if (isnan(x) || x < 0.0f)
        return NAN;
    if (x == INFINITY)
        return x;
    if ((as_uint(x) & 0x7f800000u) == 0)
        return -INFINITY;
    /* x = m·2^e with m in [√½, √2): f = m − 1 is exact (Sterbenz). */
    int e = (int)((as_uint(x) >> 23) & 0xffu) - 127;
    float m = as_float((as_uint(x) & 0x007fffffu) | 0x3f800000u);
    if (m > 1.41421356237f) {
        m = m * 0.5f;
        e = e + 1;
    }
    const float f = m - 1.0f, z = f * f, fe = (float)e;
    float p = 7.0376836292e-2f;
    p = fma(p, f, -1.1514610310e-1f);
    p = fma(p, f, 1.1676998740e-1f);
    p = fma(p, f, -1.2420140846e-1f);
    p = fma(p, f, 1.4249322787e-1f);
    p = fma(p, f, -1.6668057665e-1f);
    p = fma(p, f, 2.0000714765e-1f);
    p = fma(p, f, -2.4999993993e-1f);
    p = fma(p, f, 3.3333331174e-1f);
    float y = p * f * z;
    y = fma(fe, -2.12194440e-4f, y);
    y = fma(z, -0.5f, y);
    return fma(fe, 0.693359375f, f + y);
}

/* 1/x within 1 ulp for |x| in [2^-126, 2^126]: a first guess from the bits, then Newton steps
 * y ← y + y·(1 − x·y), each an fma pair. ±0 and subnormals give ±inf, larger magnitudes (±inf too) ±0. */
inline float clattn_x_recip(float x)
{
    if (isnan(x))
        return x;
    if ((as_uint(x) & 0x7f800000u) == 0)
        return copysign(INFINITY, x);
    const float a = fabs(x);
    if (a > 0x1p126f) /* (1/x subnormal, or x infinite) */
        return copysign(0.0f, x);
    const float s = a >= 0x1p125f ? 0.25f : 1.0f, as = a * s; /* (else the first guess would be subnormal) */
    float y = as_float(0x7ef311c3u - as_uint(as)); /* (within 13% of 1/a) */
    for (int i = 0; i < 4; i++)
        y = fma(y, fma(-as, y, 1.0f), y);
    return copysign(y * s, x);
}

/* tanh x, within 3 ulp: x itself below 2^-12 in magnitude, an odd polynomial below 0.625, 1 − 2/(e^{2|x|} + 1)
 * above, ±1 beyond 9. */
inline float clattn_x_tanh(float x)
{
    x = clattn_x_flush(x);
    if (isnan(x))
        return x;
    const float a = fabs(x);
    if (a < 0x1p-12f) /* (tanh x rounds to x; ±0 keeps its sign) */
        return x;
    if (a > 9.0f)
        return copysign(1.0f, x);
    if (a < 0.625f) {
        const float z = x * x;
        float p = -5.70498872745e-3f;
        p = fma(p, z, 2.06390887954e-2f);
        p = fma(p, z, -5.37397155531e-2f);
        p = fma(p, z, 1.33314422036e-1f);
        p = fma(p, z, -3.33332819422e-1f);
        return fma(p * z, x, x);
    }
    const float t = 1.0f - 2.0f * clattn_x_recip(clattn_x_exp(2.0f * a) + 1.0f);
    return copysign(t, x);
}

/* A softmax row's end in this arithmetic (cl/common.cl's clattn_row_finish with the functions above): m the row's
 * largest score, l its sum of weights, sink a logit without a value (−inf: none). Returns the factor of the
 * weighted sum (0 for a row that saw nothing) and sets *lse. */
inline float clattn_x_row_finish(float m, float l, float sink, float *lse)
{
    const bool empty = l == 0.0f;
    float top = m, sum = l, factor = 1.0f;
    if (sink > top) {
        factor = clattn_x_exp(top - sink);
        sum = clattn_x_flush(sum * factor) + 1.0f;
        top = sink;
    } else if (sink != -INFINITY) {
        sum = sum + clattn_x_exp(sink - top);
    }
    *lse = empty ? sink : clattn_x_flush(top + clattn_x_log(sum));
    return empty ? 0.0f : clattn_x_flush(factor * clattn_x_recip(sum));
}
