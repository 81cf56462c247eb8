/* Float vectors of VEC lanes (a build option: 1, 2, 4, 8 or 16) and their horizontal reductions, for
 * kernels that vectorise inside a work-item: on CPUs VEC is the native SIMD width (PoCL runs a
 * work-item's vector code as written), on GPUs 1 (their lanes are the work-items). Used by the fused
 * and the decode kernels. */

/* Loops over rows and vector columns are short and fixed: unrolled, their accumulators stay in
 * registers instead of memory (PoCL's compiler leaves such loops rolled, and the arrays on the stack,
 * unless asked). */
#define UNROLL _Pragma("unroll")

#if VEC == 16
typedef float16 vec_t;
#define AS_VEC(i) as_float16(i)
#define AS_INT(x) as_int16(x)
#define VLOAD(p) vload16(0, (p))
#define VSTORE(v, p) vstore16((v), 0, (p))
#define HMAX(x) hmax8(fmax((x).lo, (x).hi))
#define HMAX_QUIET(x) qmax8(QMAX((x).lo, (x).hi))
#define HSUM(x) hsum8((x).lo + (x).hi)
typedef int16 lanes_t;
#define ANY_NAN(x) any(isnan(x))
#define ANY_ZERO(x) any((x) == 0.0f)
#elif VEC == 8
typedef float8 vec_t;
#define AS_VEC(i) as_float8(i)
#define AS_INT(x) as_int8(x)
#define VLOAD(p) vload8(0, (p))
#define VSTORE(v, p) vstore8((v), 0, (p))
#define HMAX(x) hmax8(x)
#define HMAX_QUIET(x) qmax8(x)
#define HSUM(x) hsum8(x)
typedef int8 lanes_t;
#define ANY_NAN(x) any(isnan(x))
#define ANY_ZERO(x) any((x) == 0.0f)
#elif VEC == 4
typedef float4 vec_t;
#define AS_VEC(i) as_float4(i)
#define AS_INT(x) as_int4(x)
#define VLOAD(p) vload4(0, (p))
#define VSTORE(v, p) vstore4((v), 0, (p))
#define HMAX(x) hmax4(x)
#define HMAX_QUIET(x) qmax4(x)
#define HSUM(x) hsum4(x)
typedef int4 lanes_t;
#define ANY_NAN(x) any(isnan(x))
#define ANY_ZERO(x) any((x) == 0.0f)
#elif VEC == 2
typedef float2 vec_t;
#define AS_VEC(i) as_float2(i)
#define AS_INT(x) as_int2(x)
#define VLOAD(p) vload2(0, (p))
#define VSTORE(v, p) vstore2((v), 0, (p))
#define HMAX(x) fmax((x).s0, (x).s1)
#define HMAX_QUIET(x) QMAX((x).s0, (x).s1)
#define HSUM(x) ((x).s0 + (x).s1)
typedef int2 lanes_t;
#define ANY_NAN(x) any(isnan(x))
#define ANY_ZERO(x) any((x) == 0.0f)
#elif VEC == 1
typedef float vec_t;
#define VLOAD(p) (*(p))
#define VSTORE(v, p) (*(p) = (v))
#define HMAX(x) (x)
#define HMAX_QUIET(x) (x)
#define HSUM(x) (x)
typedef int lanes_t;
#define ANY_NAN(x) isnan(x) /* the scalar isnan is 1, not −1: any() would miss it */
#define ANY_ZERO(x) ((x) == 0.0f)
#else
#error "VEC must be 1, 2, 4, 8 or 16"
#endif

/* The larger of a and b, lane by lane, for values known to hold no NaN: one compare-and-select (a
 * single max instruction), where fmax must also handle NaN (three on AVX-512). */
#define QMAX(a, b) ((a) > (b) ? (a) : (b))
/* NaN lanes as a lane mask (every bit set), to be OR-ed over many vectors and tested once. */
#if VEC == 1
#define NAN_LANES(x) (isnan(x) ? -1 : 0)
#define ANY_LANE(m) ((m) != 0)
#else
#define NAN_LANES(x) isnan(x)
#define ANY_LANE(m) any(m)
#endif

inline float qmax4(float4 x) { return QMAX(QMAX(x.s0, x.s1), QMAX(x.s2, x.s3)); }
inline float qmax8(float8 x) { return qmax4(QMAX(x.lo, x.hi)); }
inline float hmax4(float4 x) { return fmax(fmax(x.s0, x.s1), fmax(x.s2, x.s3)); }
inline float hmax8(float8 x) { return hmax4(fmax(x.lo, x.hi)); }
inline float hsum4(float4 x) { return (x.s0 + x.s1) + (x.s2 + x.s3); }
inline float hsum8(float8 x) { return hsum4(x.lo + x.hi); }

/* Softmax weights exp(x) for x ≤ 0 (a score minus its row's maximum), −inf (a masked key: 0) or NaN
 * (NaN), lane by lane in vector arithmetic: PoCL's exp works a lane at a time (a third of the fused
 * kernel's time went there). Cephes' single-precision method: x = n·ln2 + r with |r| ≤ ln2/2 (n rounded
 * by adding 1.5·2^23, ln2 in two parts so that r is exact), a degree-6 polynomial for e^r, and 2^n
 * built in the exponent bits. Within 2 ulp of exp for x in [−87, 0]; below −87 (true values under
 * 1.7e-38) exactly 0, so no weight is ever subnormal (multiply-adds with subnormals are many times
 * slower on x86 CPUs, and against a row sum of at least 1 such weights are below float's resolution):
 * the last step chooses the 0, whatever the arithmetic made of such an x (−inf included), so x needs no
 * clamp on the way in (one instruction in about twenty of a weight). Not for x > 0. */
#define CLATTN_EXP_WEIGHT(name, T, AS_T, AS_I)                                                        \
    inline T name(T x)                                                                                 \
    {                                                                                                  \
        const T shifted = fma(x, (T)1.44269504088896341f, (T)12582912.0f);                             \
        const T n = shifted - 12582912.0f;                                                             \
        T r = fma(n, (T)-0.693359375f, x); /* the NaN of x carries on through r */                    \
        r = fma(n, (T)2.12194440e-4f, r);                                                              \
        T p = (T)1.9875691500e-4f;                                                                     \
        p = fma(p, r, (T)1.3981999507e-3f);                                                            \
        p = fma(p, r, (T)8.3334519073e-3f);                                                            \
        p = fma(p, r, (T)4.1665795894e-2f);                                                            \
        p = fma(p, r, (T)1.6666665459e-1f);                                                            \
        p = fma(p, r, (T)5.0000001201e-1f);                                                            \
        p = fma(p * r, r, r) + 1.0f;                                                                   \
        /* n sits in the low mantissa bits of `shifted`: its bits minus those of 1.5·2^23 */          \
        const T e = p * AS_T((AS_I(shifted) - (0x4b400000 - 127)) << 23);                              \
        return x < (T)-87.0f ? (T)0.0f : e;                                                            \
    }

/* The scalar one for row tails and single values; the VEC-wide one (the same where VEC is 1). */
CLATTN_EXP_WEIGHT(clattn_exp_weight1, float, as_float, as_int)
#if VEC == 1
#define clattn_exp_weight clattn_exp_weight1
#else
CLATTN_EXP_WEIGHT(clattn_exp_weight, vec_t, AS_VEC, AS_INT)
#endif

/* p where the score s is −inf (a masked key), 0 there, lane by lane: a masked key's weight is exactly 0
 * even when the row's maximum is NaN (exp(−inf − NaN) would be NaN). */
#if VEC == 1
#define ZERO_WHERE_MASKED(p, s) ((s) == -INFINITY ? 0.0f : (p))
#else
#define ZERO_WHERE_MASKED(p, s) select((p), (vec_t)0.0f, (s) == (vec_t)-INFINITY)
#endif

/* VEC values of storage format F (cl/formats.cl) from value i of p, widened to vec_t: i is a multiple of
 * VEC (so a block format's VEC values lie in one block, whose scale is read once). Half through the
 * core vload_halfN, bfloat16 shifted into a float's upper bits, int8 and the FP8 formats without their
 * row scale (the caller's). */
#define VLOAD_FMT(F, p, i) CLATTN_CAT(clattn_vload_, F)(p, i)
#define VLOAD_K(p, i) VLOAD_FMT(K_FMT, p, i)
#define VLOAD_V(p, i) VLOAD_FMT(V_FMT, p, i)
#define clattn_vload_float32(p, i) VLOAD((p) + (i))
#if VEC == 1
#define clattn_vload_float16(p, i) vload_half((i), (p))
#define clattn_vload_bfloat16(p, i) clattn_load_bfloat16(p, i)
#define clattn_vload_int8(p, i) clattn_load_int8(p, i)
#define clattn_vload_q8_0(p, i) clattn_load_q8_0(p, i)
#define clattn_vload_q4_0(p, i) clattn_load_q4_0(p, i)
#define CLATTN_GROUP_VLOADS(N)                                                                             \
    inline float clattn_vload_u8_g##N(__global const uchar *p, ulong i) { return clattn_load_u8_g##N(p, i); } \
    inline float clattn_vload_u4_g##N(__global const uchar *p, ulong i) { return clattn_load_u4_g##N(p, i); }
#else
#define CLATTN_VCONVERT(x) CLATTN_CAT(convert_float, VEC)(x)
#define CLATTN_VLOADN(p) CLATTN_CAT(vload, VEC)(0, (p))
#define clattn_vload_float16(p, i) CLATTN_CAT(vload_half, VEC)(0, (p) + (i))
#define clattn_vload_bfloat16(p, i) AS_VEC(CLATTN_CAT(convert_uint, VEC)(CLATTN_VLOADN((p) + (i))) << 16)
#define clattn_vload_int8(p, i) CLATTN_VCONVERT(CLATTN_VLOADN((p) + (i)))
inline vec_t clattn_vload_q8_0(__global const uchar *p, ulong i)
{
    __global const uchar *b = p + (i >> 5) * 34;
    return CLATTN_VCONVERT(CLATTN_VLOADN((__global const char *)b + 2 + (i & 31))) * CLATTN_HALF_AT(b, 0);
}
inline vec_t clattn_vload_q4_0(__global const uchar *p, ulong i)
{
    __global const uchar *b = p + (i >> 5) * 18;
    const uint j = (uint)(i & 31);
    const CLATTN_CAT(uchar, VEC) q = (CLATTN_VLOADN(b + 2 + (j & 15)) >> (uchar)((j >> 4) * 4)) & (uchar)15;
    return (CLATTN_VCONVERT(q) - 8.0f) * CLATTN_HALF_AT(b, 0);
}
/* VEC 4-bit values from VEC / 2 bytes, low nibble first: each byte's two nibbles become a ushort's two
 * bytes, which (little-endian, as every device clattn runs on) are the values in order. */
#if VEC == 2
#define CLATTN_NIBBLES(b) as_uchar2((ushort)(((b)[0] & 15) | (((b)[0] >> 4) << 8)))
#else
#define CLATTN_HALF_VEC CLATTN_CAT(ushort, CLATTN_HVEC)
#if VEC == 4
#define CLATTN_HVEC 2
#elif VEC == 8
#define CLATTN_HVEC 4
#else
#define CLATTN_HVEC 8
#endif
#define CLATTN_NIBBLES(b)                                                                                  \
    CLATTN_CAT(as_uchar, VEC)                                                                              \
    (CLATTN_CAT(convert_ushort, CLATTN_HVEC)(CLATTN_CAT(vload, CLATTN_HVEC)(0, (b)) & (uchar)15) |          \
     (CLATTN_CAT(convert_ushort, CLATTN_HVEC)(CLATTN_CAT(vload, CLATTN_HVEC)(0, (b)) >> (uchar)4) << (ushort)8))
#endif
#define CLATTN_GROUP_VLOADS(N)                                                                             \
    inline vec_t clattn_vload_u8_g##N(__global const uchar *p, ulong i)                                   \
    {                                                                                                      \
        __global const uchar *b = p + (i / N) * (N + 4);                                                   \
        return (CLATTN_VCONVERT(CLATTN_VLOADN(b + 4 + i % N)) - CLATTN_HALF_AT(b, 2)) * CLATTN_HALF_AT(b, 0); \
    }                                                                                                      \
    inline vec_t clattn_vload_u4_g##N(__global const uchar *p, ulong i)                                   \
    {                                                                                                      \
        __global const uchar *b = p + (i / N) * (N / 2 + 4);                                               \
        return (CLATTN_VCONVERT(CLATTN_NIBBLES(b + 4 + (i % N) / 2)) - CLATTN_HALF_AT(b, 2)) * CLATTN_HALF_AT(b, 0); \
    }
#endif
CLATTN_GROUP_VLOADS(32)
CLATTN_GROUP_VLOADS(64)
CLATTN_GROUP_VLOADS(128)
/* The FP8 formats value by value (their decoding is integer arithmetic on each byte). */
#define CLATTN_FP8_VLOAD(name)                                                                             \
    inline vec_t clattn_vload_##name(__global const uchar *p, ulong i)                                    \
    {                                                                                                      \
        float t[VEC];                                                                                      \
        for (int x = 0; x < VEC; x++)                                                                      \
            t[x] = clattn_load_##name(p, i + x);                                                           \
        return VLOAD(t);                                                                                   \
    }
CLATTN_FP8_VLOAD(fp8_e4m3)
CLATTN_FP8_VLOAD(fp8_e5m2)
