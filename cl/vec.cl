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
typedef uint16 uvec_t;
#define AS_UINT(x) as_uint16(x)
#define VLOAD_FLAGS(p) convert_int16(vload16(0, (p))) /* VEC bytes as ints */
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
typedef uint8 uvec_t;
#define AS_UINT(x) as_uint8(x)
#define VLOAD_FLAGS(p) convert_int8(vload8(0, (p))) /* VEC bytes as ints */
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
typedef uint4 uvec_t;
#define AS_UINT(x) as_uint4(x)
#define VLOAD_FLAGS(p) convert_int4(vload4(0, (p))) /* VEC bytes as ints */
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
typedef uint2 uvec_t;
#define AS_UINT(x) as_uint2(x)
#define VLOAD_FLAGS(p) convert_int2(vload2(0, (p))) /* VEC bytes as ints */
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
typedef uint uvec_t;
#define AS_UINT(x) as_uint(x)
#define VLOAD_FLAGS(p) ((int)*(p))
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

/* VEC values of a storage format F stored value by value (cl/formats.cl) from value i of p, widened to
 * vec_t: half through the core vload_halfN, bfloat16 shifted into a float's upper bits, int8 and the FP8
 * formats without their row scale (the caller's). The block formats are read a row at a time
 * (clattn_dequant_row_k below: every tile that holds them is staged). */
#define VLOAD_FMT(F, p, i) CLATTN_CAT(clattn_vload_, F)(p, i)
#define VLOAD_K(p, i) VLOAD_FMT(K_FMT, p, i)
#define VLOAD_V(p, i) VLOAD_FMT(V_FMT, p, i)
#define clattn_vload_float32(p, i) VLOAD((p) + (i))
#if VEC == 1
#define clattn_vload_float16(p, i) vload_half((i), (p))
#define clattn_vload_bfloat16(p, i) clattn_load_bfloat16(p, i)
#define clattn_vload_int8(p, i) clattn_load_int8(p, i)
#else
#define CLATTN_VCONVERT(x) CLATTN_CAT(convert_float, VEC)(x)
#define CLATTN_VLOADN(p) CLATTN_CAT(vload, VEC)(0, (p))
#define clattn_vload_float16(p, i) CLATTN_CAT(vload_half, VEC)(0, (p) + (i))
#define clattn_vload_bfloat16(p, i) AS_VEC(CLATTN_CAT(convert_uint, VEC)(CLATTN_VLOADN((p) + (i))) << 16)
#define clattn_vload_int8(p, i) CLATTN_VCONVERT(CLATTN_VLOADN((p) + (i)))
/* VEC 4-bit values from VEC / 2 bytes, low nibble first, as floats: the low and the high nibbles widened
 * apart, then interleaved by one shuffle. */
#if VEC == 2
#define CLATTN_NIBBLES_F(b) ((float2)((float)((b)[0] & 15), (float)((b)[0] >> 4)))
#else
#if VEC == 4
#define CLATTN_HVEC 2
#define CLATTN_INTERLEAVE ((uint4)(0, 2, 1, 3))
#elif VEC == 8
#define CLATTN_HVEC 4
#define CLATTN_INTERLEAVE ((uint8)(0, 4, 1, 5, 2, 6, 3, 7))
#else
#define CLATTN_HVEC 8
#define CLATTN_INTERLEAVE ((uint16)(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15))
#endif
#define CLATTN_NIBBLES_F(b)                                                                                \
    shuffle2(CLATTN_CAT(convert_float, CLATTN_HVEC)(CLATTN_CAT(vload, CLATTN_HVEC)(0, (b)) & (uchar)15),   \
             CLATTN_CAT(convert_float, CLATTN_HVEC)(CLATTN_CAT(vload, CLATTN_HVEC)(0, (b)) >> (uchar)4),   \
             CLATTN_INTERLEAVE)
#endif
#endif
/* The FP8 formats VEC values at a time through half, which holds every FP8 value exactly: an E5M2 byte is
 * a half's upper byte (inf and NaN included), an E4M3 byte's exponent and mantissa bits shifted into a
 * half's are its value · 2^−8 (subnormals too), the all-ones magnitude its NaN. The halves are widened by
 * the core vload_halfN, which CPUs do in one instruction. Only in the programs that read them
 * (CLATTN_FMT_<name>, from the build's options): Mesa's SPIR-V translator (rusticl, LLVM 15) crashes
 * on these functions' private halves when it erases them unused. With VEC 1 (GPU shapes) a value at a
 * time by cl/formats.cl's integer decoding. */
#if VEC == 1
#define clattn_vload_fp8_e4m3(p, i) clattn_load_fp8_e4m3(p, i)
#define clattn_vload_fp8_e5m2(p, i) clattn_load_fp8_e5m2(p, i)
#elif defined(CLATTN_FMT_fp8_e4m3) || defined(CLATTN_FMT_fp8_e5m2)
#define CLATTN_VUSHORT CLATTN_CAT(ushort, VEC)
#define CLATTN_TO_VUSHORT(x) CLATTN_CAT(convert_ushort, VEC)(x)
#define CLATTN_VBYTES(p) CLATTN_CAT(vload, VEC)(0, (p))
#define CLATTN_HALVES(h) CLATTN_CAT(vload_half, VEC)(0, (const half *)&(h))
#define CLATTN_TO_VINT(x) CLATTN_CAT(convert_int, VEC)(x)
inline vec_t clattn_vload_fp8_e5m2(__global const uchar *p, ulong i)
{
    const CLATTN_VUSHORT h = CLATTN_TO_VUSHORT(CLATTN_VBYTES(p + i)) << (ushort)8;
    return CLATTN_HALVES(h);
}
inline vec_t clattn_vload_fp8_e4m3(__global const uchar *p, ulong i)
{
    const CLATTN_VUSHORT b = CLATTN_TO_VUSHORT(CLATTN_VBYTES(p + i)), mag = b & (ushort)0x7f;
    const CLATTN_VUSHORT h = ((b & (ushort)0x80) << (ushort)8) | (mag << (ushort)7);
    const vec_t x = CLATTN_HALVES(h) * 256.0f;
    return select(x, (vec_t)NAN, CLATTN_TO_VINT(mag == (ushort)0x7f));
}
#endif

/* A block format's block b (its first byte) in three parts, so that a whole row is dequantised with one
 * decoding of each block's header: its scale, its zero point (values are (raw − zero) · scale: q4_0's
 * offset of 8 is its zero point) and VEC raw values from value j of the block (j a multiple of VEC). */
#define clattn_block_scale_q8_0(b) CLATTN_HALF_AT(b, 0)
#define clattn_block_zero_q8_0(b) 0.0f
#define clattn_block_scale_q4_0(b) CLATTN_HALF_AT(b, 0)
#define clattn_block_zero_q4_0(b) 8.0f
#if VEC == 1
#define clattn_block_raw_q8_0(b, j) ((float)as_char((b)[2 + (j)]))
#define clattn_block_raw_q4_0(b, j) ((float)(((b)[2 + ((j) & 15)] >> (((j) >> 4) * 4)) & 15))
#define CLATTN_BLOCK_RAW_U(b, j, N, bits)                                                                  \
    ((bits) == 8 ? (float)(b)[4 + (j)] : (float)(((b)[4 + (j) / 2] >> (((j) & 1) * 4)) & 15))
#else
#define clattn_block_raw_q8_0(b, j) CLATTN_VCONVERT(CLATTN_VLOADN((__global const char *)(b) + 2 + (j)))
#define clattn_block_raw_q4_0(b, j)                                                                        \
    CLATTN_VCONVERT((CLATTN_VLOADN((b) + 2 + ((j) & 15)) >> (uchar)(((j) >> 4) * 4)) & (uchar)15)
#define CLATTN_BLOCK_RAW_U(b, j, N, bits)                                                                  \
    ((bits) == 8 ? CLATTN_VCONVERT(CLATTN_VLOADN((b) + 4 + (j))) : CLATTN_NIBBLES_F((b) + 4 + (j) / 2))
#endif
#define CLATTN_GROUP_PARTS(N)                                                                              \
    inline float clattn_block_scale_u8_g##N(__global const uchar *b) { return CLATTN_HALF_AT(b, 0); }      \
    inline float clattn_block_zero_u8_g##N(__global const uchar *b) { return CLATTN_HALF_AT(b, 2); }       \
    inline float clattn_block_scale_u4_g##N(__global const uchar *b) { return CLATTN_HALF_AT(b, 0); }      \
    inline float clattn_block_zero_u4_g##N(__global const uchar *b) { return CLATTN_HALF_AT(b, 2); }       \
    inline vec_t clattn_block_raw_u8_g##N(__global const uchar *b, uint j) { return CLATTN_BLOCK_RAW_U(b, j, N, 8); } \
    inline vec_t clattn_block_raw_u4_g##N(__global const uchar *b, uint j) { return CLATTN_BLOCK_RAW_U(b, j, N, 4); }
CLATTN_GROUP_PARTS(32)
CLATTN_GROUP_PARTS(64)
CLATTN_GROUP_PARTS(128)

/* A K (V) row's n values from value `at` of p into dst as floats, times `scale` (its row scale, or 1):
 * block by block, each block's header decoded once, VEC values a step (n a multiple of VEC and of the
 * block); a format stored value by value VEC values a step, then one by one. The rows a tile stages
 * (cl/decode_tile.cl, cl/flash_lanes.cl) come through here. */
#define CLATTN_DEQUANT_BLOCKS(name, T, F, BLOCK, BLOCK_BYTES)                                              \
    __attribute__((always_inline)) inline void name(__global const T *p, ulong at, ulong n, float scale,   \
                                                    __local float *dst)                                    \
    {                                                                                                      \
        __global const uchar *b = (__global const uchar *)p + at / BLOCK * BLOCK_BYTES;                     \
        for (ulong e0 = 0; e0 < n; e0 += BLOCK, b += BLOCK_BYTES) {                                        \
            const float s = CLATTN_CAT(clattn_block_scale_, F)(b) * scale;                                 \
            const float off = -CLATTN_CAT(clattn_block_zero_, F)(b) * s;                                   \
            UNROLL for (uint j = 0; j < BLOCK; j += VEC)                                                   \
                VSTORE(fma(CLATTN_CAT(clattn_block_raw_, F)(b, j), (vec_t)s, (vec_t)off), dst + e0 + j);   \
        }                                                                                                  \
    }
#define CLATTN_DEQUANT_VALUES(name, T, F)                                                                  \
    __attribute__((always_inline)) inline void name(__global const T *p, ulong at, ulong n, float scale,   \
                                                    __local float *dst)                                    \
    {                                                                                                      \
        ulong e = 0;                                                                                       \
        for (; e + VEC <= n; e += VEC)                                                                     \
            VSTORE(VLOAD_FMT(F, p, at + e) * scale, dst + e);                                              \
        for (; e < n; e++)                                                                                 \
            dst[e] = CLATTN_CAT(clattn_load_, F)(p, at + e) * scale;                                       \
    }
/* VEC packed values of a token format's row from value e (a multiple of VEC): 4-bit ones by the nibble
 * shuffle above where VEC > 1, 2-bit ones by CLATTN_CRUMBS_F below where VEC ≥ 4, else lane by lane with
 * constant shifts from the vector's first byte (VEC · bits a whole number of bytes; else from each
 * value's own byte). */
__attribute__((always_inline)) inline vec_t clattn_token_lanes(__global const uchar *raw, ulong e, uint bits)
{
    float q[VEC];
    if (VEC * bits % 8 == 0) { /* (the lanes' bytes and shifts are constants) */
        __global const uchar *b = raw + e * bits / 8;
        UNROLL for (uint l = 0; l < VEC; l++)
            q[l] = (float)((b[l * bits / 8] >> ((l * bits) % 8)) & ((1u << bits) - 1));
    } else {
        UNROLL for (uint l = 0; l < VEC; l++)
            q[l] = (float)((raw[(e + l) * bits / 8] >> (((e + l) * bits) % 8)) & ((1u << bits) - 1));
    }
    return VLOAD(q);
}
/* VEC 2-bit values from VEC / 4 bytes, value 4t + k in bits 2k of byte t: each byte repeated 4 times by
 * one shuffle, then shifted lane by lane. */
#if VEC == 4
#define CLATTN_CRUMBS_F(b) convert_float4(((uchar4)((b)[0]) >> (uchar4)(0, 2, 4, 6)) & (uchar)3)
#elif VEC == 8
#define CLATTN_CRUMBS_F(b)                                                                                 \
    convert_float8((shuffle(vload2(0, (b)), (uchar8)(0, 0, 0, 0, 1, 1, 1, 1)) >> (uchar8)(0, 2, 4, 6, 0, 2, 4, 6)) & \
                   (uchar)3)
#elif VEC == 16
#define CLATTN_CRUMBS_F(b)                                                                                 \
    convert_float16((shuffle(vload4(0, (b)), (uchar16)(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3)) >>    \
                     (uchar16)(0, 2, 4, 6, 0, 2, 4, 6, 0, 2, 4, 6, 0, 2, 4, 6)) & (uchar)3)
#endif
#if VEC >= 4
#define CLATTN_TOKEN_RAW(raw, e, BITS) ((BITS) == 4 ? CLATTN_NIBBLES_F((raw) + (e) / 2) : CLATTN_CRUMBS_F((raw) + (e) / 4))
#elif VEC > 1
#define CLATTN_TOKEN_RAW(raw, e, BITS) ((BITS) == 4 ? CLATTN_NIBBLES_F((raw) + (e) / 2) : clattn_token_lanes(raw, e, BITS))
#else
#define CLATTN_TOKEN_RAW(raw, e, BITS) clattn_token_lanes(raw, e, BITS)
#endif

/* A token format's row (cl/formats.cl: clattn_load_token): its chunk's header read once, then VEC
 * channels a step — their scales and zero points by vload_halfN, the packed values unpacked lane by lane
 * — or, in the tail, VEC float16 values; a row that held a non-finite value is NaN throughout. */
#define CLATTN_DEQUANT_TOKENS(name, T, BITS, ROWS, DIM, TOKENS)                                            \
    __attribute__((always_inline)) inline void name(__global const T *p, ulong at, ulong n, float scale,   \
                                                    __local float *dst)                                    \
    {                                                                                                      \
        const ulong per_chunk = (ulong)(ROWS) * (DIM), r = at % per_chunk / (DIM);                         \
        __global const uchar *chunk =                                                                      \
            (__global const uchar *)p + at / per_chunk * clattn_token_chunk_bytes(ROWS, DIM, TOKENS, BITS); \
        __global const half *tail;                                                                         \
        __global const uchar *group = clattn_token_row(chunk, r, ROWS, DIM, TOKENS, BITS, &tail);          \
        const ulong t = r % (TOKENS);                                                                      \
        ulong e = 0;                                                                                       \
        if (!group) {                                                                                      \
            for (; e + VEC <= n; e += VEC)                                                                 \
                VSTORE(clattn_vload_float16(tail, e) * scale, dst + e);                                             \
            for (; e < n; e++)                                                                             \
                dst[e] = vload_half(e, tail) * scale;                                                      \
            return;                                                                                        \
        }                                                                                                  \
        if ((*(__global const uint *)group >> t) & 1) {                                                    \
            for (; e < n; e++)                                                                             \
                dst[e] = NAN;                                                                              \
            return;                                                                                        \
        }                                                                                                  \
        __global const half *scales = (__global const half *)(group + 4);                                  \
        __global const uchar *raw = group + clattn_token_packed_at(DIM, BITS, t);                          \
        for (; e + VEC <= n; e += VEC) {                                                                   \
            const vec_t s = clattn_vload_float16(scales, e) * scale;                                       \
            const vec_t z = clattn_vload_float16(scales, (DIM) + e);                                       \
            VSTORE((CLATTN_TOKEN_RAW(raw, e, BITS) - z) * s, dst + e);                                     \
        }                                                                                                  \
        for (; e < n; e++)                                                                                 \
            dst[e] = ((float)clattn_token_raw(group, DIM, TOKENS, BITS, t, e) - vload_half((DIM) + e, scales)) * \
                     vload_half(e, scales) * scale;                                                        \
    }
#if defined(K_TOKENS)
CLATTN_DEQUANT_TOKENS(clattn_dequant_row_k, k_store, CLATTN_CAT(clattn_bits_, K_FMT), K_CHUNK_ROWS, K_DIM, K_TOKENS)
#elif K_BLOCK > 1
CLATTN_DEQUANT_BLOCKS(clattn_dequant_row_k, k_store, K_FMT, K_BLOCK, K_BLOCK_BYTES)
#else
CLATTN_DEQUANT_VALUES(clattn_dequant_row_k, k_store, K_FMT)
#endif
#if defined(V_TOKENS)
CLATTN_DEQUANT_TOKENS(clattn_dequant_row_v, v_store, CLATTN_CAT(clattn_bits_, V_FMT), V_CHUNK_ROWS, V_DIM, V_TOKENS)
#elif V_BLOCK > 1
CLATTN_DEQUANT_BLOCKS(clattn_dequant_row_v, v_store, V_FMT, V_BLOCK, V_BLOCK_BYTES)
#else
CLATTN_DEQUANT_VALUES(clattn_dequant_row_v, v_store, V_FMT)
#endif
