/* Host reference of the block and FP8 formats (formats_ref.h). */
#include "formats_ref.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

bool fref_handles(clattn_dtype type) { return type >= CLATTN_Q8_0 && type <= CLATTN_FP8_E5M2; }

/* ---- IEEE half, by its definition ---- */

static float half_value(uint16_t h)
{
    const int e = (h >> 10) & 31, m = h & 1023;
    const float mag = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf(1024.0f + m, e - 25);
    return h & 0x8000 ? -mag : mag;
}

/* x to half, to nearest even (the search over the 63488 finite codes is slow but plainly right: the
 * nearest code wins, a tie goes to the even one). */
static uint16_t half_code(float x)
{
    if (isnan(x))
        return 0x7e00;
    const uint16_t sign = signbit(x) ? 0x8000 : 0;
    const float a = fabsf(x);
    if (a >= 65520.0f) /* past the midpoint of 65504 and 65536 */
        return sign | 0x7c00;
    /* binary search for the largest code whose value ≤ a */
    unsigned lo = 0, hi = 0x7bff;
    while (lo < hi) {
        const unsigned mid = (lo + hi + 1) / 2;
        if (half_value((uint16_t)mid) <= a)
            lo = mid;
        else
            hi = mid - 1;
    }
    unsigned code = lo;
    if (code < 0x7bff) {
        const double below = half_value((uint16_t)code), above = half_value((uint16_t)(code + 1));
        const double d0 = a - below, d1 = above - a;
        if (d1 < d0 || (d1 == d0 && (code & 1)))
            code++;
    }
    return sign | (uint16_t)code;
}

float fref_half_round(float x) { return half_value(half_code(x)); }

static float half_at(const unsigned char *p) { return half_value((uint16_t)(p[0] | p[1] << 8)); }

static void half_put(unsigned char *p, float x)
{
    const uint16_t h = half_code(x);
    p[0] = (unsigned char)(h & 255);
    p[1] = (unsigned char)(h >> 8);
}

/* ---- OCP 8-bit floats, by their definition: every code's value, and the nearest code (ties to even) ---- */

typedef struct fp8 {
    int mbits, bias;
    bool ieee; /* E5M2: the top exponent is inf/NaN; E4M3: only S.1111.111 is NaN */
    float max;
} fp8;
static const fp8 E4M3 = {3, 7, false, 448.0f}, E5M2 = {2, 15, true, 57344.0f};

static float fp8_value(fp8 f, unsigned byte)
{
    const int e = (byte & 0x7f) >> f.mbits, m = byte & ((1 << f.mbits) - 1), top = 0x7f >> f.mbits;
    float mag;
    if (f.ieee && e == top)
        mag = m ? NAN : INFINITY;
    else if (!f.ieee && e == top && m == (1 << f.mbits) - 1)
        mag = NAN;
    else if (e == 0)
        mag = ldexpf((float)m, 1 - f.bias - f.mbits);
    else
        mag = ldexpf((float)((1 << f.mbits) + m), e - f.bias - f.mbits);
    return byte & 0x80 ? -mag : mag;
}

/* Finite values beyond ±max saturate; inf is inf in E5M2 and NaN in E4M3. */
static unsigned char fp8_code(fp8 f, float x)
{
    const unsigned sign = signbit(x) ? 0x80 : 0;
    if (isnan(x) || (isinf(x) && !f.ieee))
        return (unsigned char)(sign | (f.ieee ? 0x7d : 0x7f));
    if (isinf(x))
        return (unsigned char)(sign | 0x7c);
    const float a = fabsf(x);
    unsigned best = 0;
    for (unsigned c = 1; c < 0x80; c++) {
        const float v = fp8_value(f, c);
        if (!isfinite(v))
            continue;
        const double dc = fabs((double)v - a), db = fabs((double)fp8_value(f, best) - a);
        if (dc < db || (dc == db && (c & 1) == 0 && (best & 1)))
            best = c;
    }
    return (unsigned char)(sign | best);
}

static fp8 fp8_of(clattn_dtype t) { return t == CLATTN_FP8_E4M3 ? E4M3 : E5M2; }

/* ---- Block formats ---- */

static size_t group_of(clattn_dtype t)
{
    switch (t) {
    case CLATTN_U8_G64: case CLATTN_U4_G64: return 64;
    case CLATTN_U8_G128: case CLATTN_U4_G128: return 128;
    default: return 32;
    }
}
static bool is_u4(clattn_dtype t) { return t == CLATTN_U4_G32 || t == CLATTN_U4_G64 || t == CLATTN_U4_G128; }

static bool all_finite(const float *x, size_t n)
{
    for (size_t j = 0; j < n; j++)
        if (!isfinite(x[j]))
            return false;
    return true;
}

/* q rounded to nearest even and clamped. */
static float round_clamp(float q, float lo, float hi) { return fminf(fmaxf(rintf(q), lo), hi); }

static void quantise_q8_0(const float *x, unsigned char *b)
{
    float top = 0.0f;
    for (int j = 0; j < 32; j++)
        top = fmaxf(top, fabsf(x[j]));
    const bool finite = all_finite(x, 32);
    const float d = finite ? fminf(top / 127.0f, 65504.0f) : NAN, inv = finite && d > 0.0f ? 1.0f / d : 0.0f;
    half_put(b, d);
    for (int j = 0; j < 32; j++)
        b[2 + j] = (unsigned char)(signed char)round_clamp(x[j] * inv, -128.0f, 127.0f);
}

static void quantise_q4_0(const float *x, unsigned char *b)
{
    float m = 0.0f;
    for (int j = 0; j < 32; j++)
        if (fabsf(x[j]) > fabsf(m))
            m = x[j];
    const bool finite = all_finite(x, 32);
    const float d = finite ? copysignf(fminf(fabsf(m) / 8.0f, 65504.0f), -m) : NAN;
    const float inv = finite && d != 0.0f ? 1.0f / d : 0.0f;
    half_put(b, d);
    for (int j = 0; j < 16; j++) {
        const unsigned lo = (unsigned)(round_clamp(x[j] * inv, -8.0f, 7.0f) + 8.0f);
        const unsigned hi = (unsigned)(round_clamp(x[j + 16] * inv, -8.0f, 7.0f) + 8.0f);
        b[2 + j] = (unsigned char)(lo | hi << 4);
    }
}

static void quantise_group(clattn_dtype t, const float *x, unsigned char *b)
{
    const size_t n = group_of(t);
    const float levels = is_u4(t) ? 15.0f : 255.0f;
    float lo = 0.0f, hi = 0.0f;
    for (size_t j = 0; j < n; j++) {
        lo = fminf(lo, x[j]);
        hi = fmaxf(hi, x[j]);
    }
    const bool finite = all_finite(x, n);
    const float s = finite ? fminf((hi - lo) / levels, 65504.0f) : NAN;
    const float inv = finite && s > 0.0f ? 1.0f / s : 0.0f;
    const float z = finite && s > 0.0f ? round_clamp(-lo * inv, 0.0f, levels) : 0.0f;
    half_put(b, s);
    half_put(b + 2, z);
    for (size_t j = 0; j < n; j++) {
        const unsigned q = (unsigned)fminf(fmaxf(rintf(x[j] * inv) + z, 0.0f), levels);
        if (!is_u4(t))
            b[4 + j] = (unsigned char)q;
        else if (j % 2 == 0)
            b[4 + j / 2] = (unsigned char)q;
        else
            b[4 + j / 2] |= (unsigned char)(q << 4);
    }
}

void fref_quantise(clattn_dtype type, const float *src, size_t n, size_t row, void *bytes, float *row_scales)
{
    unsigned char *out = bytes;
    if (type == CLATTN_FP8_E4M3 || type == CLATTN_FP8_E5M2) {
        const fp8 f = fp8_of(type);
        for (size_t r = 0; r < n / row; r++) {
            float inv = 1.0f;
            if (row_scales) {
                float top = 0.0f;
                for (size_t d = 0; d < row; d++)
                    top = fmaxf(top, fabsf(src[r * row + d]));
                const bool finite = all_finite(src + r * row, row);
                row_scales[r] = finite ? top / f.max : NAN;
                inv = finite && top > 0.0f ? f.max / top : 0.0f;
            }
            for (size_t d = 0; d < row; d++)
                out[r * row + d] = fp8_code(f, src[r * row + d] * inv);
        }
        return;
    }
    const size_t block = clattn_dtype_block(type), block_bytes = clattn_dtype_bytes(type, block);
    for (size_t k = 0; k < n / block; k++) {
        const float *x = src + k * block;
        unsigned char *b = out + k * block_bytes;
        if (type == CLATTN_Q8_0)
            quantise_q8_0(x, b);
        else if (type == CLATTN_Q4_0)
            quantise_q4_0(x, b);
        else
            quantise_group(type, x, b);
    }
}

float fref_value(clattn_dtype type, const void *bytes, size_t i)
{
    const unsigned char *p = bytes;
    if (type == CLATTN_FP8_E4M3 || type == CLATTN_FP8_E5M2)
        return fp8_value(fp8_of(type), p[i]);
    const size_t block = clattn_dtype_block(type), block_bytes = clattn_dtype_bytes(type, block);
    const unsigned char *b = p + i / block * block_bytes;
    const size_t j = i % block;
    if (type == CLATTN_Q8_0)
        return (float)((double)half_at(b) * (signed char)b[2 + j]);
    if (type == CLATTN_Q4_0) {
        const int q = j < 16 ? b[2 + j] & 15 : b[2 + j - 16] >> 4;
        return (float)((double)half_at(b) * (q - 8));
    }
    const int q = is_u4(type) ? (b[4 + j / 2] >> (j % 2 ? 4 : 0)) & 15 : b[4 + j];
    return (float)(((double)q - half_at(b + 2)) * half_at(b));
}

/* ---- Token formats (KIVI's keys), by their layout (docs/kv-formats.md) ---- */

bool fref_is_token(clattn_dtype type) { return type == CLATTN_U4_T32 || type == CLATTN_U2_T32; }

static unsigned token_bits(clattn_dtype t) { return t == CLATTN_U4_T32 ? 4 : 2; }
#define TOKENS 32

static size_t token_group_bytes(clattn_dtype t, size_t dim) { return 4 + dim * 4 + TOKENS * dim * token_bits(t) / 8; }
static size_t token_tail_at(clattn_dtype t, size_t rows, size_t dim) { return 4 + rows / TOKENS * token_group_bytes(t, dim); }
static uint32_t u32_at(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static void u32_put(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* Group g of a chunk from its tail: per channel the finite values' range widened to hold 0, scale =
 * range / levels, zero = round(−min / scale), q = round(x / scale) + zero (a non-finite value: zero),
 * and the mask of rows holding any non-finite value. */
static void token_quantise(clattn_dtype t, unsigned char *chunk, size_t rows, size_t dim, size_t g)
{
    const unsigned bits = token_bits(t), per_byte = 8 / bits;
    const float levels = (float)((1u << bits) - 1);
    const unsigned char *tail = chunk + token_tail_at(t, rows, dim);
    unsigned char *group = chunk + 4 + g * token_group_bytes(t, dim), *raw = group + 4 + dim * 4;
    memset(raw, 0, TOKENS * dim / per_byte);
    uint32_t bad = 0;
    for (size_t d = 0; d < dim; d++) {
        float lo = 0.0f, hi = 0.0f;
        for (size_t r = 0; r < TOKENS; r++) {
            const float x = half_at(tail + (r * dim + d) * 2);
            if (isfinite(x)) {
                lo = fminf(lo, x);
                hi = fmaxf(hi, x);
            } else {
                bad |= 1u << r;
            }
        }
        const float s = (hi - lo) / levels, inv = s > 0.0f ? 1.0f / s : 0.0f;
        const float z = s > 0.0f ? round_clamp(-lo * inv, 0.0f, levels) : 0.0f;
        half_put(group + 4 + d * 2, s);
        half_put(group + 4 + (dim + d) * 2, z);
        for (size_t r = 0; r < TOKENS; r++) {
            const float x = half_at(tail + (r * dim + d) * 2);
            const unsigned q = isfinite(x) ? (unsigned)round_clamp(rintf(x * inv) + z, 0.0f, levels) : (unsigned)z;
            raw[r * (dim / per_byte) + d / per_byte] |= (unsigned char)(q << (d % per_byte * bits));
        }
    }
    u32_put(group, bad);
}

void fref_token_append(clattn_dtype type, unsigned char *chunk, size_t rows, size_t dim, size_t start, const float *src,
                       size_t n)
{
    unsigned char *tail = chunk + token_tail_at(type, rows, dim);
    const uint32_t complete = u32_at(chunk), below = (uint32_t)(start / TOKENS);
    u32_put(chunk, complete < below ? complete : below);
    for (size_t i = 0; i < n; i++) {
        const size_t r = start + i;
        for (size_t d = 0; d < dim; d++) {
            const float x = src[i * dim + d];
            half_put(tail + ((r % TOKENS) * dim + d) * 2, isfinite(x) ? fminf(fmaxf(x, -65504.0f), 65504.0f) : x);
        }
        if (r % TOKENS == TOKENS - 1 && r / TOKENS < rows / TOKENS) {
            token_quantise(type, chunk, rows, dim, r / TOKENS);
            u32_put(chunk, (uint32_t)(r / TOKENS + 1));
        }
    }
}

double fref_token_value(clattn_dtype type, const unsigned char *chunk, size_t rows, size_t dim, size_t r, size_t d)
{
    const unsigned bits = token_bits(type), per_byte = 8 / bits;
    if (r / TOKENS >= u32_at(chunk) || r / TOKENS >= rows / TOKENS)
        return half_at(chunk + token_tail_at(type, rows, dim) + ((r % TOKENS) * dim + d) * 2);
    const unsigned char *group = chunk + 4 + r / TOKENS * token_group_bytes(type, dim);
    const size_t t = r % TOKENS;
    if ((u32_at(group) >> t) & 1)
        return NAN;
    const unsigned q = (group[4 + dim * 4 + t * (dim / per_byte) + d / per_byte] >> (d % per_byte * bits)) &
                       ((1u << bits) - 1);
    return ((double)q - half_at(group + 4 + (dim + d) * 2)) * half_at(group + 4 + d * 2);
}
