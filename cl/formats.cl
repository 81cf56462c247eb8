/* Storage formats (src/base/formats.def): each tensor a kernel reads or writes has one, given by the
 * build as Q_FMT, K_FMT, V_FMT (read) and O_FMT (written) — its name — with Q_STORE … (the C type a
 * pointer to it has), Q_BLOCK … (values per block), Q_BLOCK_BYTES … (a block's bytes) and Q_SCALE_RULE … (its
 * row-scale rule: 0 none, 1 required, 2 optional). Arithmetic is float32 whatever the storage.
 * This file holds, under each format's name, the code that reads a value as float (clattn_load_<name>)
 * and that writes one (clattn_store_<name>, element formats) or a block (clattn_quantise_<name>);
 * cl/vec.cl has the VEC-wide loads (clattn_vload_<name>, the formats stored value by value) and the block
 * formats' parts that dequantise a whole row (clattn_block_scale_/zero_/raw_<name>).
 *
 * Values are addressed by their index in the tensor's values (as if it held floats): the value i of a
 * block format lies in block i / block, whose bytes start at (i / block) · block_bytes. A row's blocks
 * run along the head dimension, so a row of D values (D a multiple of the block) starts at the block
 * row · D / block, and every offset a kernel forms — heads, rows, pages — stays a value index.
 *
 * Half goes through OpenCL 1.2's core vload_half / vstore_half_rte, which need no cl_khr_fp16 (a
 * `half *` may point at storage on every device); bfloat16 is a float's upper 16 bits; the FP8 formats
 * are decoded with integer arithmetic. int8 (and FP8 with scales) is read as its value, the row's float
 * scale applied by the kernel (HAS_K_SCALES: value = q·scale). */
#ifndef Q_T
#define Q_T 0
#define Q_FMT float32
#define Q_STORE float
#define Q_BLOCK 1
#define Q_BLOCK_BYTES 4
#define Q_SCALE_RULE 0
#endif
#ifndef K_T
#define K_T 0
#define K_FMT float32
#define K_STORE float
#define K_BLOCK 1
#define K_BLOCK_BYTES 4
#define K_SCALE_RULE 0
#endif
#ifndef V_T
#define V_T 0
#define V_FMT float32
#define V_STORE float
#define V_BLOCK 1
#define V_BLOCK_BYTES 4
#define V_SCALE_RULE 0
#endif
#ifndef O_T
#define O_T 0
#define O_FMT float32
#define O_STORE float
#define O_BLOCK 1
#define O_BLOCK_BYTES 4
#define O_SCALE_RULE 0
#endif
#define CLATTN_CAT_(a, b) a##b
#define CLATTN_CAT(a, b) CLATTN_CAT_(a, b)

typedef Q_STORE q_store;
typedef K_STORE k_store;
typedef V_STORE v_store;
typedef O_STORE o_store;

/* Value i of p as a float (an int8 or scaled FP8 row's scale not applied). A token format's value also
 * needs its tensor's chunks (Q_CHUNK_ROWS …, Q_DIM …: its rows per head and values per row). */
#ifdef Q_TOKENS
#define LOAD_Q(p, i) clattn_load_token(p, i, Q_CHUNK_ROWS, Q_DIM, Q_TOKENS, CLATTN_CAT(clattn_bits_, Q_FMT))
#else
#define LOAD_Q(p, i) CLATTN_CAT(clattn_load_, Q_FMT)(p, i)
#endif
#ifdef K_TOKENS
#define LOAD_K(p, i) clattn_load_token(p, i, K_CHUNK_ROWS, K_DIM, K_TOKENS, CLATTN_CAT(clattn_bits_, K_FMT))
#else
#define LOAD_K(p, i) CLATTN_CAT(clattn_load_, K_FMT)(p, i)
#endif
#ifdef V_TOKENS
#define LOAD_V(p, i) clattn_load_token(p, i, V_CHUNK_ROWS, V_DIM, V_TOKENS, CLATTN_CAT(clattn_bits_, V_FMT))
#else
#define LOAD_V(p, i) CLATTN_CAT(clattn_load_, V_FMT)(p, i)
#endif
/* x stored as value i of an output (float formats only), rounded to nearest even. */
#define STORE_O(x, p, i) CLATTN_CAT(clattn_store_, O_FMT)(x, p, i)

/* ---- Formats stored value by value ------------------------------------------------------------- */

#define clattn_load_float32(p, i) ((p)[i])
#define clattn_load_float16(p, i) vload_half((i), (p))
#define clattn_load_bfloat16(p, i) as_float((uint)(p)[i] << 16)
#define clattn_load_int8(p, i) ((float)(p)[i])

/* A float rounded to nearest even into bfloat16 (NaN stays a quiet NaN of the same sign). */
inline ushort clattn_float_to_bf16(float x)
{
    const uint u = as_uint(x);
    if (isnan(x))
        return (ushort)((u >> 16) | 0x40);
    return (ushort)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

#define clattn_store_float32(x, p, i) ((p)[i] = (x))
#define clattn_store_float16(x, p, i) vstore_half_rte((x), (i), (p))
#define clattn_store_bfloat16(x, p, i) ((p)[i] = clattn_float_to_bf16(x))
#define clattn_store_int8(x, p, i) ((p)[i] = convert_char_sat_rte(x))

/* OCP 8-bit floats. A byte's value: E4M3 (bias 7; exponent 15 with mantissa 7 is NaN, there is no
 * infinity) and E5M2 (bias 15, IEEE-like: exponent 31 is inf or NaN). */
inline float clattn_fp8_value(uint byte, uint mbits, uint bias, bool ieee_top)
{
    const uint e = (byte & 0x7f) >> mbits, m = byte & ((1u << mbits) - 1), top = 0x7fu >> mbits;
    float mag;
    if (e == 0)
        mag = ldexp((float)m, 1 - (int)bias - (int)mbits); /* subnormal */
    else if (ieee_top && e == top)
        mag = m ? NAN : INFINITY;
    else if (!ieee_top && e == top && m == (1u << mbits) - 1)
        mag = NAN;
    else
        mag = as_float(((e + 127 - bias) << 23) | (m << (23 - mbits)));
    return byte & 0x80 ? -mag : mag;
}
#define clattn_load_fp8_e4m3(p, i) clattn_fp8_value((p)[i], 3, 7, false)
#define clattn_load_fp8_e5m2(p, i) clattn_fp8_value((p)[i], 2, 15, true)

/* x rounded to nearest even into an 8-bit float with mbits mantissa bits; a finite x beyond the largest
 * value (max) saturates to ±max, as FP8 KV caches do (a scale per row keeps values in range); inf is
 * inf where the format has it (E5M2), NaN in E4M3; NaN stays NaN. */
inline uchar clattn_fp8_code(float x, uint mbits, uint bias, bool ieee_top, float max)
{
    const uint sign = signbit(x) ? 0x80u : 0u;
    const uint top = 0x7fu >> mbits; /* the largest exponent field */
    const float a = fabs(x);
    if (isnan(x) || (isinf(x) && !ieee_top))
        return (uchar)(sign | (ieee_top ? (top << mbits) | 1u : 0x7fu)); /* NaN */
    if (isinf(x))
        return (uchar)(sign | (top << mbits));
    if (a >= max) /* ±max: E4M3's 0x7e, E5M2's 0x7b */
        return (uchar)(sign | (ieee_top ? ((top - 1) << mbits) | ((1u << mbits) - 1) : 0x7eu));
    if (a == 0.0f)
        return (uchar)sign;
    int e;
    frexp(a, &e);
    e -= 1; /* a = 1.f · 2^e */
    const int emin = 1 - (int)bias;
    if (e < emin) /* subnormal, counted in 2^(emin − mbits); rounding up may reach the first normal's code */
        return (uchar)(sign | (uint)rint(ldexp(a, (int)mbits - emin)));
    uint m = (uint)rint(ldexp(a, (int)mbits - e)); /* in [2^mbits, 2^(mbits+1)]: below max, never past it */
    if (m == (2u << mbits)) {
        m = 1u << mbits;
        e++;
    }
    return (uchar)(sign | ((uint)(e + (int)bias) << mbits) | (m - (1u << mbits)));
}
#define clattn_store_fp8_e4m3(x, p, i) ((p)[i] = clattn_fp8_code((x), 3, 7, false, 448.0f))
#define clattn_store_fp8_e5m2(x, p, i) ((p)[i] = clattn_fp8_code((x), 2, 15, true, 57344.0f))

/* The largest value a row scale maps a row's largest magnitude to (int8 and the scaled FP8 rows). */
#define clattn_row_max_int8 127.0f
#define clattn_row_max_fp8_e4m3 448.0f
#define clattn_row_max_fp8_e5m2 57344.0f

/* ---- Block formats -------------------------------------------------------------------------------- */

/* The fp16 at byte `at` of block b (block_bytes are even, so it is aligned). */
#define CLATTN_HALF_AT(b, at) vload_half(0, (__global const half *)((b) + (at)))

/* llama.cpp's q8_0 (ggml's block_q8_0): fp16 d, then 32 int8 q; value = q · d. */
inline float clattn_load_q8_0(__global const uchar *p, ulong i)
{
    __global const uchar *b = p + (i >> 5) * 34;
    return CLATTN_HALF_AT(b, 0) * (float)as_char(b[2 + (i & 31)]);
}

/* llama.cpp's q4_0 (block_q4_0): fp16 d, then 16 bytes; value j < 16 is byte j's low nibble, value
 * j ≥ 16 byte j − 16's high nibble; value = (q − 8) · d. */
inline float clattn_load_q4_0(__global const uchar *p, ulong i)
{
    __global const uchar *b = p + (i >> 5) * 18;
    const uint j = (uint)(i & 31), q = (b[2 + (j & 15)] >> ((j >> 4) * 4)) & 15;
    return CLATTN_HALF_AT(b, 0) * (float)((int)q - 8);
}

/* Asymmetric groups of N (OpenVINO's u8/u4 KV compression): fp16 scale s, fp16 zero point z, then the
 * values, u8 a byte each or u4 two a byte (value 2t in byte t's low nibble, 2t+1 in its high one);
 * value = (q − z) · s. */
#define CLATTN_GROUP_LOADS(N)                                                                              \
    inline float clattn_load_u8_g##N(__global const uchar *p, ulong i)                                    \
    {                                                                                                      \
        __global const uchar *b = p + (i / N) * (N + 4);                                                   \
        return ((float)b[4 + i % N] - CLATTN_HALF_AT(b, 2)) * CLATTN_HALF_AT(b, 0);                        \
    }                                                                                                      \
    inline float clattn_load_u4_g##N(__global const uchar *p, ulong i)                                    \
    {                                                                                                      \
        __global const uchar *b = p + (i / N) * (N / 2 + 4);                                               \
        const uint q = (b[4 + (i % N) / 2] >> ((i & 1) * 4)) & 15;                                         \
        return ((float)q - CLATTN_HALF_AT(b, 2)) * CLATTN_HALF_AT(b, 0);                                   \
    }
CLATTN_GROUP_LOADS(32)
CLATTN_GROUP_LOADS(64)
CLATTN_GROUP_LOADS(128)

/* Quantising one block of x (appends). Rounding is to nearest even; a block holding NaN or ±inf gets a
 * NaN scale and zero values, so it reads back as NaN in its own row only; a scale beyond half's range
 * saturates to 65504 (the values beyond it then saturate too). */
inline float clattn_block_scale(float x, bool finite)
{
    return finite ? fmin(x, 65504.0f) : NAN;
}

/* q8_0 as ggml writes it: d = max |x| / 127, q = x / d (ggml rounds halves away from zero: the only
 * difference, at exact ties). */
inline void clattn_quantise_q8_0(const float *x, __global uchar *b)
{
    float top = 0.0f;
    bool finite = true;
    for (int j = 0; j < 32; j++) {
        finite = finite && isfinite(x[j]);
        top = fmax(top, fabs(x[j]));
    }
    const float d = clattn_block_scale(top / 127.0f, finite), inv = finite && d > 0.0f ? 1.0f / d : 0.0f;
    vstore_half_rte(d, 0, (__global half *)b);
    for (int j = 0; j < 32; j++)
        b[2 + j] = as_uchar(convert_char_sat_rte(x[j] * inv));
}

/* q4_0 as ggml writes it: d = −m / 8 with m the value of largest magnitude (its sign kept, so that it is
 * exact at q = 0), q = x / d + 8 clamped to [0, 15]. */
inline void clattn_quantise_q4_0(const float *x, __global uchar *b)
{
    float m = 0.0f;
    bool finite = true;
    for (int j = 0; j < 32; j++) {
        finite = finite && isfinite(x[j]);
        if (fabs(x[j]) > fabs(m))
            m = x[j];
    }
    const float d = finite ? copysign(fmin(fabs(m) / 8.0f, 65504.0f), -m) : NAN;
    const float inv = finite && d != 0.0f ? 1.0f / d : 0.0f;
    vstore_half_rte(d, 0, (__global half *)b);
    for (int j = 0; j < 16; j++) {
        const uint lo = (uint)clamp(rint(x[j] * inv) + 8.0f, 0.0f, 15.0f);
        const uint hi = (uint)clamp(rint(x[j + 16] * inv) + 8.0f, 0.0f, 15.0f);
        b[2 + j] = (uchar)(lo | (hi << 4));
    }
}

/* An asymmetric group of n values into `levels` + 1 steps: the range [min, max] widened to hold 0 (so
 * that 0 and a constant group are exact), s = (max − min) / levels, z = round(−min / s), q = round(x / s)
 * + z clamped to [0, levels]. The quantised values go to q[]. */
inline void clattn_quantise_group(const float *x, int n, float levels, __global uchar *b, uchar *q)
{
    float lo = 0.0f, hi = 0.0f;
    bool finite = true;
    for (int j = 0; j < n; j++) {
        finite = finite && isfinite(x[j]);
        lo = fmin(lo, x[j]);
        hi = fmax(hi, x[j]);
    }
    const float s = clattn_block_scale((hi - lo) / levels, finite);
    const float inv = finite && s > 0.0f ? 1.0f / s : 0.0f;
    const float z = finite && s > 0.0f ? clamp(rint(-lo * inv), 0.0f, levels) : 0.0f;
    vstore_half_rte(s, 0, (__global half *)b);
    vstore_half_rte(z, 0, (__global half *)(b + 2));
    for (int j = 0; j < n; j++)
        q[j] = (uchar)clamp(rint(x[j] * inv) + z, 0.0f, levels);
}
#define CLATTN_GROUP_QUANTISE(N)                                                                           \
    inline void clattn_quantise_u8_g##N(const float *x, __global uchar *b)                                \
    {                                                                                                      \
        uchar q[N];                                                                                        \
        clattn_quantise_group(x, N, 255.0f, b, q);                                                         \
        for (int j = 0; j < N; j++)                                                                        \
            b[4 + j] = q[j];                                                                               \
    }                                                                                                      \
    inline void clattn_quantise_u4_g##N(const float *x, __global uchar *b)                                \
    {                                                                                                      \
        uchar q[N];                                                                                        \
        clattn_quantise_group(x, N, 15.0f, b, q);                                                          \
        for (int t = 0; t < N / 2; t++)                                                                    \
            b[4 + t] = (uchar)(q[2 * t] | (q[2 * t + 1] << 4));                                            \
    }
CLATTN_GROUP_QUANTISE(32)
CLATTN_GROUP_QUANTISE(64)
CLATTN_GROUP_QUANTISE(128)

/* ---- Token formats (KIVI's keys) ------------------------------------------------------------------ */

/* A head's rows (`rows` rows of `dim` values) are one chunk: a uint32 count of complete groups; room for
 * rows / tokens groups, each a uint32 mask of its rows that held a non-finite value (they read as NaN),
 * per channel an fp16 scale, per channel an fp16 zero point, then its `tokens` rows of packed values
 * (channel d of a row in bits (d % (8 / bits)) · bits of byte d / (8 / bits): low bits first); then a
 * tail of `tokens` float16 rows, where row r past the complete groups is at slot r % tokens. A value is
 * (q − zero) · scale. */
#define clattn_bits_u4_t32 4
#define clattn_bits_u2_t32 2
inline ulong clattn_token_group_bytes(ulong dim, uint tokens, uint bits) { return 4 + dim * 4 + tokens * dim * bits / 8; }
/* Offsets: a group's packed row t (from the group's first byte), a chunk's tail (from the chunk's). */
inline ulong clattn_token_packed_at(ulong dim, uint bits, ulong t) { return 4 + dim * 4 + t * (dim * bits / 8); }
inline ulong clattn_token_tail_at(ulong rows, ulong dim, uint tokens, uint bits)
{
    return 4 + rows / tokens * clattn_token_group_bytes(dim, tokens, bits);
}
inline ulong clattn_token_chunk_bytes(ulong rows, ulong dim, uint tokens, uint bits)
{
    return clattn_token_tail_at(rows, dim, tokens, bits) + (ulong)tokens * dim * 2;
}

/* Where row r of a chunk lies: its group's first byte, or NULL for a row in the tail (whose float16 row
 * then starts at *tail). */
inline __global const uchar *clattn_token_row(__global const uchar *chunk, ulong r, ulong rows, ulong dim,
                                              uint tokens, uint bits, __global const half **tail)
{
    const ulong group_bytes = clattn_token_group_bytes(dim, tokens, bits);
    const ulong g = r / tokens; /* (the count bounded by the chunk's room: a stray header reads in bounds) */
    if (g < min((ulong)*(__global const uint *)chunk, rows / tokens))
        return chunk + 4 + g * group_bytes;
    *tail = (__global const half *)(chunk + clattn_token_tail_at(rows, dim, tokens, bits)) + (r % tokens) * dim;
    return 0;
}

/* Channel d of row slot t of a group, raw. */
inline uint clattn_token_raw(__global const uchar *group, ulong dim, uint tokens, uint bits, ulong t, ulong d)
{
    const uint per_byte = 8 / bits;
    const uchar byte = group[clattn_token_packed_at(dim, bits, t) + d / per_byte];
    return (byte >> ((d % per_byte) * bits)) & ((1u << bits) - 1);
}

inline float clattn_load_token(__global const uchar *p, ulong i, ulong rows, ulong dim, uint tokens, uint bits)
{
    const ulong per_chunk = rows * dim, r = i % per_chunk / dim, d = i % dim;
    __global const uchar *chunk = p + i / per_chunk * clattn_token_chunk_bytes(rows, dim, tokens, bits);
    __global const half *tail;
    __global const uchar *group = clattn_token_row(chunk, r, rows, dim, tokens, bits, &tail);
    if (!group)
        return vload_half(d, tail);
    const ulong t = r % tokens;
    if ((*(__global const uint *)group >> t) & 1)
        return NAN;
    __global const half *scales = (__global const half *)(group + 4);
    return ((float)clattn_token_raw(group, dim, tokens, bits, t, d) - vload_half(dim + d, scales)) *
           vload_half(d, scales);
}
