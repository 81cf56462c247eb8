/* Storage types: the table of formats.def, and the names a kernel build gives them. The kernels take a
 * tensor's format as build options (-DK_T=n -DK_FMT=name -DK_STORE=type) and cl/formats.cl turns the
 * name into its loads and stores. */
#include "dtype.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define FORMAT_ROW(NAME, name, store, bits, block, block_bytes, scales, kv_only, tokens)                     \
    [CLATTN_##NAME] = {#name, #store, bits, block, block_bytes, scales, kv_only, tokens},
static const dtype_format formats[] = {CLATTN_FORMATS(FORMAT_ROW)};
#undef FORMAT_ROW

/* The enum and the table agree: every row names a value, in order, and there is no value without one. */
#define FORMAT_COUNT(NAME, ...) +1
_Static_assert(0 CLATTN_FORMATS(FORMAT_COUNT) == DTYPE_COUNT, "formats.def and DTYPE_COUNT disagree");
#undef FORMAT_COUNT
_Static_assert(sizeof formats / sizeof formats[0] == DTYPE_COUNT, "a clattn_dtype value has no row in formats.def");

bool dtype_valid(clattn_dtype dtype) { return (unsigned)dtype < DTYPE_COUNT; }

const dtype_format *dtype_format_of(clattn_dtype dtype) { return dtype_valid(dtype) ? &formats[dtype] : NULL; }

size_t dtype_bytes(clattn_dtype dtype)
{
    return dtype_valid(dtype) && formats[dtype].block == 1 ? formats[dtype].block_bytes : 0;
}

size_t dtype_block(clattn_dtype dtype) { return dtype_valid(dtype) ? formats[dtype].block : 0; }

bool dtype_span_bytes(clattn_dtype dtype, size_t n, size_t *bytes)
{
    if (!dtype_valid(dtype) || dtype_is_token(dtype) || n % formats[dtype].block != 0)
        return false;
    const size_t blocks = n / formats[dtype].block, per = formats[dtype].block_bytes;
    if (blocks > SIZE_MAX / per)
        return false;
    *bytes = blocks * per;
    return true;
}

bool dtype_is_token(clattn_dtype dtype) { return dtype_valid(dtype) && formats[dtype].tokens > 0; }

/* A token format's chunk: a uint32 count of complete groups, rows / tokens groups of (per channel an fp16
 * scale and an fp16 zero point, then `tokens` rows of packed values), a tail of `tokens` float16 rows. */
static bool token_head_bytes(const dtype_format *f, size_t rows, size_t dim, size_t *bytes)
{
    if (dim % 4 != 0 || dim > SIZE_MAX / 64 / f->tokens)
        return false;
    const size_t group = 4 + dim * 4 + (size_t)f->tokens * dim * f->bits / 8, tail = (size_t)f->tokens * dim * 2;
    const size_t groups = rows / f->tokens;
    if (groups > (SIZE_MAX - 4 - tail) / group)
        return false;
    *bytes = 4 + groups * group + tail;
    return true;
}

bool dtype_head_bytes(clattn_dtype dtype, size_t rows, size_t dim, size_t *bytes)
{
    size_t row;
    if (dtype_is_token(dtype))
        return token_head_bytes(&formats[dtype], rows, dim, bytes);
    if (!dtype_span_bytes(dtype, dim, &row) || (row > 0 && rows > SIZE_MAX / row))
        return false;
    *bytes = rows * row;
    return true;
}

bool dtype_tensor_bytes(clattn_dtype dtype, size_t heads, size_t rows, size_t dim, size_t *bytes)
{
    size_t head;
    if (!dtype_head_bytes(dtype, rows, dim, &head) || (head > 0 && heads > SIZE_MAX / head))
        return false;
    *bytes = heads * head;
    return true;
}

bool dtype_kv_only(clattn_dtype dtype) { return dtype_valid(dtype) && formats[dtype].kv_only; }

size_t clattn_dtype_size(clattn_dtype dtype) { return dtype_bytes(dtype); }

size_t clattn_dtype_block(clattn_dtype dtype) { return dtype_block(dtype); }

size_t clattn_dtype_bytes(clattn_dtype dtype, size_t count)
{
    size_t bytes = 0;
    return dtype_span_bytes(dtype, count, &bytes) ? bytes : 0;
}

size_t clattn_dtype_head_bytes(clattn_dtype dtype, size_t rows, size_t dim)
{
    size_t bytes = 0;
    return dtype_head_bytes(dtype, rows, dim, &bytes) ? bytes : 0;
}

const char *clattn_dtype_name(clattn_dtype dtype) { return dtype_valid(dtype) ? formats[dtype].name : "unknown"; }

int clattn_dtype_from_name(const char *name)
{
    for (int i = 0; name && i < DTYPE_COUNT; i++)
        if (strcmp(name, formats[i].name) == 0)
            return i;
    return -1;
}

bool tensor_types_all_float(tensor_types t)
{
    return t.q == CLATTN_FLOAT32 && t.k == CLATTN_FLOAT32 && t.v == CLATTN_FLOAT32 && t.o == CLATTN_FLOAT32;
}

void tensor_types_options(tensor_types t, char *buf, size_t size)
{
    if (tensor_types_all_float(t)) {
        snprintf(buf, size, "%s", "");
        return;
    }
    const struct {
        char tensor;
        clattn_dtype type;
        chunk_shape chunk;
    } all[] = {{'Q', t.q, t.q_chunk}, {'K', t.k, t.k_chunk}, {'V', t.v, t.v_chunk}, {'O', t.o, t.o_chunk}};
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < 4 && used < size; i++) {
        const dtype_format *f = dtype_format_of(all[i].type);
        const dtype_format *g = f ? f : dtype_format_of(CLATTN_FLOAT32);
        const char c = all[i].tensor;
        int n = snprintf(buf + used, size - used,
                         " -D%c_T=%d -D%c_FMT=%s -D%c_STORE=%s -D%c_BLOCK=%u -D%c_BLOCK_BYTES=%u -D%c_SCALE_RULE=%d"
                         " -DCLATTN_FMT_%s=1",
                         c, (int)all[i].type, c, g->name, c, g->store, c, g->block, c, g->block_bytes, c, g->scales,
                         g->name);
        used += n > 0 ? (size_t)n : 0;
        if (g->tokens && used < size) { /* (its loads find a row's chunk from a value's index) */
            n = snprintf(buf + used, size - used, " -D%c_TOKENS=%u -D%c_CHUNK_ROWS=%zu -D%c_DIM=%zu", c, g->tokens,
                         c, all[i].chunk.rows, c, all[i].chunk.dim);
            used += n > 0 ? (size_t)n : 0;
        }
    }
}
