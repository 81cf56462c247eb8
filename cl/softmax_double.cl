/* Row softmax in double precision (desc.softmax_precision = CLATTN_SOFTMAX_DOUBLE, ONNX's
 * softmax_precision = DOUBLE): the float32 scores are widened (exactly), and the row maximum, the
 * exponentials, their sum, the normalisation and the log-sum-exp run in double; each weight and the
 * log-sum-exp are rounded to float32 once, at the end. The same contract as clattn_softmax otherwise
 * (softmax.cl): a row whose every score is −inf gives zeros and a log-sum-exp of −inf (the sink with
 * sinks), a NaN score makes the row NaN, `in` and `out` may be one buffer. A program of its own, in two
 * builds of this one text: with cl_khr_fp64 the arithmetic below is double's (SM_FLOAT_FLOAT 0); on a
 * device without it (SM_FLOAT_FLOAT 1: -DSM_FLOAT_FLOAT=1) every double quantity is a float-float pair
 * hi + lo (about 48 significant bits: error-free sums and products, the products through fma), exp and
 * log are evaluated in that arithmetic (below), and each result agrees with the fp64 build's to within
 * rounding to float32 — the same bits but where the exact value lies within about 2^-44 of its size
 * from a float32 rounding boundary. One work-item per row: the exponentials are computed twice (for the
 * sum, then for the weights) rather than kept, since the output buffer holds floats only. */
#ifndef SM_FLOAT_FLOAT
#define SM_FLOAT_FLOAT 0
#endif

#if !SM_FLOAT_FLOAT
#pragma OPENCL EXTENSION cl_khr_fp64 : enable

/* The fp64 build: the sum of the exponentials is a double. */
typedef double sm_acc;
#define SM_ZERO 0.0

/* exp(x − m), x ≤ m (both float, so x − m is exact in double). */
static double sm_exp(float x, float m) { return exp((double)x - (double)m); }
static double sm_add(double a, double b) { return a + b; }
/* The weight exp(x − m) / sum, rounded to float32 once. */
static float sm_weight(float x, float m, double sum) { return (float)(sm_exp(x, m) / sum); }
/* The log-sum-exp m + log(sum), rounded to float32 once. */
static float sm_lse(float m, double sum) { return (float)((double)m + log(sum)); }

#else
/* The float-float build. No contraction of a·b + c into fma behind the code's back: the error-free
 * transformations below are exact only as written. */
#pragma OPENCL FP_CONTRACT OFF

/* A float-float number: .x the float nearest the value, .y the rest (|y| ≤ half a unit of x's last
 * place once normalised). */
typedef float2 sm_acc;
#define SM_ZERO ((float2)(0.0f, 0.0f))

/* a + b exactly, as a pair (Knuth's two-sum: any a, b). */
static float2 ff_two_sum(float a, float b)
{
    const float s = a + b, bb = s - a;
    return (float2)(s, (a - (s - bb)) + (b - bb));
}

/* a + b exactly where |a| ≥ |b| or a is 0 (Dekker's fast two-sum). */
static float2 ff_fast_two_sum(float a, float b)
{
    const float s = a + b;
    return (float2)(s, b - (s - a));
}

/* a·b exactly (fma gives the product's rounding error). */
static float2 ff_two_prod(float a, float b)
{
    const float p = a * b;
    return (float2)(p, fma(a, b, -p));
}

/* a + b, relative error about 2^-46 even under cancellation (the "accurate" sum: both halves added). */
static float2 ff_add(float2 a, float2 b)
{
    float2 s = ff_two_sum(a.x, b.x);
    const float2 t = ff_two_sum(a.y, b.y);
    s.y += t.x;
    s = ff_fast_two_sum(s.x, s.y);
    s.y += t.y;
    return ff_fast_two_sum(s.x, s.y);
}

static float2 ff_mul(float2 a, float2 b)
{
    float2 p = ff_two_prod(a.x, b.x);
    p.y += a.x * b.y + a.y * b.x;
    return ff_fast_two_sum(p.x, p.y);
}

static float2 ff_mul_float(float2 a, float b)
{
    float2 p = ff_two_prod(a.x, b);
    p.y += a.y * b;
    return ff_fast_two_sum(p.x, p.y);
}

/* a / b (b ≠ 0): three quotient digits, each from the remainder left by the previous ones, so that
 * float division's own error (OpenCL allows 2.5 units in the last place) is corrected. */
static float2 ff_div(float2 a, float2 b)
{
    const float q1 = a.x / b.x;
    float2 r = ff_add(a, -ff_mul_float(b, q1));
    const float q2 = r.x / b.x;
    r = ff_add(r, -ff_mul_float(b, q2));
    const float q3 = r.x / b.x;
    return ff_add(ff_fast_two_sum(q1, q2), (float2)(q3, 0.0f));
}

/* ln 2 in three floats (the rest is 3e-24), 1/ln 2 in one, 1/n! for the series. */
#define FF_LN2_0 0x1.62e430p-1f
#define FF_LN2_1 -0x1.05c610p-29f
#define FF_LN2_2 -0x1.950d88p-54f
#define FF_INV_LN2 0x1.715476p+0f

/* exp(d) = 2^k · p for d = d.x + d.y ≤ about 88, p in about [0.7, 1.42] to a relative 2^-46; p is 0
 * (and k 0) where d.x < −150, below which every use here rounds to 0 or vanishes against a sum ≥ 1.
 * d = k·ln 2 + r, |r| ≤ ln(2)/2, with k·ln 2 subtracted exactly enough (k ≤ 2^8, ln 2 to 2^-78); then
 * the Taylor series of exp(r) to r^12/12! (the rest is below 2^-52), the terms from r^8 on in float. */
static float2 ff_exp_split(float2 d, int *k)
{
    *k = 0;
    if (!(d.x >= -150.0f))
        return SM_ZERO;
    const float kf = rint(d.x * FF_INV_LN2);
    *k = (int)kf;
    float2 r = ff_add(d, -ff_two_prod(kf, FF_LN2_0));
    r = ff_add(r, -ff_two_prod(kf, FF_LN2_1));
    r = ff_add(r, (float2)(-kf * FF_LN2_2, 0.0f));
    float t = 0x1.1eed8ep-29f;          /* 1/12! */
    t = t * r.x + 0x1.ae6456p-26f;      /* 1/11! */
    t = t * r.x + 0x1.27e4fcp-22f;      /* 1/10! */
    t = t * r.x + 0x1.71de3ap-19f;      /* 1/9! */
    t = t * r.x + 0x1.a01a02p-16f;      /* 1/8! */
    float2 p = (float2)(t, 0.0f);
    p = ff_add(ff_mul(p, r), (float2)(0x1.a01a02p-13f, -0x1.7f97fap-39f)); /* 1/7! */
    p = ff_add(ff_mul(p, r), (float2)(0x1.6c16c2p-10f, -0x1.27d27ep-35f)); /* 1/6! */
    p = ff_add(ff_mul(p, r), (float2)(0x1.111112p-7f, -0x1.dddddep-32f));  /* 1/5! */
    p = ff_add(ff_mul(p, r), (float2)(0x1.555556p-5f, -0x1.555556p-30f));  /* 1/4! */
    p = ff_add(ff_mul(p, r), (float2)(0x1.555556p-3f, -0x1.555556p-28f));  /* 1/3! */
    p = ff_add(ff_mul(p, r), (float2)(0.5f, 0.0f));
    p = ff_add(ff_mul(p, r), (float2)(1.0f, 0.0f));
    return ff_add(ff_mul(p, r), (float2)(1.0f, 0.0f));
}

static float2 ff_ldexp(float2 a, int k) { return (float2)(ldexp(a.x, k), ldexp(a.y, k)); }

/* exp(x − m), x ≤ m: x − m exactly as a pair, then its exponential. */
static float2 sm_exp(float x, float m)
{
    int k;
    const float2 p = ff_exp_split(ff_two_sum(x, -m), &k);
    return ff_ldexp(p, k);
}

static float2 sm_add(float2 a, float2 b) { return ff_add(a, b); }

/* 2^k·q rounded to float32 once. Where the result is normal, q.x is q rounded and the scaling is exact;
 * below FLT_MIN (a subnormal result, a multiple of 2^-149) q·2^(k+149) is rounded to an integer with
 * both halves of q, then scaled exactly (a device that flushes subnormals gives 0). */
static float ff_round_scaled(float2 q, int k)
{
    const float y = ldexp(q.x, k);
    if (fabs(y) >= FLT_MIN || q.x == 0.0f)
        return y;
    const float u = ldexp(q.x, k + 149), n = rint(u), rest = (u - n) + ldexp(q.y, k + 149);
    return ldexp(n + (rest > 0.5f ? 1.0f : rest < -0.5f ? -1.0f : 0.0f), -149);
}

/* exp(x − m) / sum rounded once: the quotient of the mantissa p in [0.7, 1.42] (sum ≥ 1), then 2^k. */
static float sm_weight(float x, float m, float2 sum)
{
    int k;
    const float2 p = ff_exp_split(ff_two_sum(x, -m), &k);
    return ff_round_scaled(ff_div(p, sum), k);
}

/* m + log(sum), sum ≥ 1, rounded once: y0 = log(sum.x) in float (a few units of 2^-24 of it off), then
 * log(sum) = y0 + log(t), t = sum·exp(−y0) = 1 + u with |u| < 2^-16, log(1 + u) = u − u²/2 + u³/3. */
static float sm_lse(float m, float2 sum)
{
    const float y0 = log(sum.x);
    int k;
    const float2 e = ff_exp_split((float2)(-y0, 0.0f), &k);
    const float2 u = ff_add(ff_ldexp(ff_mul(sum, e), k), (float2)(-1.0f, 0.0f));
    const float u2 = u.x * u.x;
    const float2 l = ff_add(u, (float2)(u2 * u.x / 3.0f - 0.5f * u2, 0.0f));
    return ff_add((float2)(m, 0.0f), ff_add((float2)(y0, 0.0f), l)).x;
}
#endif

__kernel void clattn_softmax_double(CLATTN_PARAMETERS(CLATTN_SOFTMAX_PARAMS))
{
    CLATTN_ABSENT(CLATTN_SOFTMAX_PARAMS)
    const ulong r = get_global_id(0);
    if (r >= rows)
        return;
    __global const float *x = in + clattn_matrix_offset(0, r, 0, rows, cols);
    __global float *y = out + clattn_matrix_offset(0, r, 0, rows, cols);
    const float sink = sinks ? sinks[(row_base + r) / q_len % heads] : -INFINITY;
    /* The row maximum (a float: the maximum of floats, exact in either build), NaN as soon as one
     * score is NaN (fmax would skip it). */
    float m = -INFINITY;
    bool nan_seen = false;
    for (ulong j = 0; j < cols; j++) {
        const float v = x[j];
        m = fmax(m, v);
        nan_seen |= isnan(v);
    }
    if (!nan_seen && m == -INFINITY) {
        for (ulong j = 0; j < cols; j++)
            y[j] = 0.0f;
        if (lse)
            lse[row_base + r] = sink;
        return;
    }
    m = fmax(m, sink);
    /* A NaN score or sink, or a +inf maximum (inf − inf): in double the sum is NaN, and so is every
     * weight and the log-sum-exp. */
    if (nan_seen || isnan(sink) || m == INFINITY) {
        for (ulong j = 0; j < cols; j++)
            y[j] = NAN;
        if (lse)
            lse[row_base + r] = NAN;
        return;
    }
    /* From here m is finite and some term is exp(0) = 1: the sum is at least 1. */
    sm_acc sum = sink == -INFINITY ? SM_ZERO : sm_exp(sink, m);
    for (ulong j = 0; j < cols; j++)
        sum = sm_add(sum, sm_exp(x[j], m));
    /* Each element is read before it is written: in place works. */
    for (ulong j = 0; j < cols; j++)
        y[j] = sm_weight(x[j], m, sum);
    if (lse)
        lse[row_base + r] = sm_lse(m, sum);
}
