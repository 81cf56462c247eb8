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
#define VLOAD(p) vload16(0, (p))
#define VSTORE(v, p) vstore16((v), 0, (p))
#define HMAX(x) hmax8(fmax((x).lo, (x).hi))
#define HSUM(x) hsum8((x).lo + (x).hi)
#define ANY_NAN(x) any(isnan(x))
#define ANY_ZERO(x) any((x) == 0.0f)
#elif VEC == 8
typedef float8 vec_t;
#define VLOAD(p) vload8(0, (p))
#define VSTORE(v, p) vstore8((v), 0, (p))
#define HMAX(x) hmax8(x)
#define HSUM(x) hsum8(x)
#define ANY_NAN(x) any(isnan(x))
#define ANY_ZERO(x) any((x) == 0.0f)
#elif VEC == 4
typedef float4 vec_t;
#define VLOAD(p) vload4(0, (p))
#define VSTORE(v, p) vstore4((v), 0, (p))
#define HMAX(x) hmax4(x)
#define HSUM(x) hsum4(x)
#define ANY_NAN(x) any(isnan(x))
#define ANY_ZERO(x) any((x) == 0.0f)
#elif VEC == 2
typedef float2 vec_t;
#define VLOAD(p) vload2(0, (p))
#define VSTORE(v, p) vstore2((v), 0, (p))
#define HMAX(x) fmax((x).s0, (x).s1)
#define HSUM(x) ((x).s0 + (x).s1)
#define ANY_NAN(x) any(isnan(x))
#define ANY_ZERO(x) any((x) == 0.0f)
#elif VEC == 1
typedef float vec_t;
#define VLOAD(p) (*(p))
#define VSTORE(v, p) (*(p) = (v))
#define HMAX(x) (x)
#define HSUM(x) (x)
#define ANY_NAN(x) isnan(x) /* the scalar isnan is 1, not −1: any() would miss it */
#define ANY_ZERO(x) ((x) == 0.0f)
#else
#error "VEC must be 1, 2, 4, 8 or 16"
#endif

inline float hmax4(float4 x) { return fmax(fmax(x.s0, x.s1), fmax(x.s2, x.s3)); }
inline float hmax8(float8 x) { return hmax4(fmax(x.lo, x.hi)); }
inline float hsum4(float4 x) { return (x.s0 + x.s1) + (x.s2 + x.s3); }
inline float hsum8(float8 x) { return hsum4(x.lo + x.hi); }

/* x with its subnormal (and −subnormal) lanes set to 0: weights that small cost far more than they add. */
#if VEC == 1
#define FLUSH_SUBNORMAL(x) (fabs(x) < FLT_MIN ? 0.0f : (x))
#else
#define FLUSH_SUBNORMAL(x) select((x), (vec_t)0.0f, fabs(x) < (vec_t)FLT_MIN)
#endif

/* p where the score s is −inf (a masked key), 0 there, lane by lane: a masked key's weight is exactly 0
 * even when the row's maximum is NaN (exp(−inf − NaN) would be NaN). */
#if VEC == 1
#define ZERO_WHERE_MASKED(p, s) ((s) == -INFINITY ? 0.0f : (p))
#else
#define ZERO_WHERE_MASKED(p, s) select((p), (vec_t)0.0f, (s) == (vec_t)-INFINITY)
#endif
