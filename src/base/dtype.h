/* Storage types (clattn_dtype): the table made from src/base/formats.def — names, sizes, blocks and
 * rules — and how a kernel build names them. */
#ifndef CLATTN_DTYPE_H
#define CLATTN_DTYPE_H

#include "clattn/clattn.h"
#include "formats.def"

#include <stdbool.h>
#include <stddef.h>

/* clattn_dtype's values: tables indexed by type have this many entries. */
#define DTYPE_COUNT 16

/* One format's row of formats.def. */
typedef struct dtype_format {
    const char *name;  /* "q4_0" */
    const char *store; /* the OpenCL C type a kernel's pointer has */
    unsigned bits, block, block_bytes;
    int scales; /* ROW_SCALES_NONE, _REQUIRED or _OPTIONAL */
    bool kv_only;
    unsigned tokens; /* rows of a group along tokens (a token format), else 0 */
} dtype_format;

/* A value inside the enum. */
bool dtype_valid(clattn_dtype dtype);

/* Its row of the table; NULL outside the enum. */
const dtype_format *dtype_format_of(clattn_dtype dtype);

/* Bytes per element; 0 outside the enum and for block formats (see dtype_span_bytes). */
size_t dtype_bytes(clattn_dtype dtype);

/* Values per block (1: stored value by value). */
size_t dtype_block(clattn_dtype dtype);

/* Bytes of n values (n a multiple of the block): false where n is not, or the bytes overflow, and for
 * a token format (whose values have bytes only as a head's rows together: dtype_head_bytes). */
bool dtype_span_bytes(clattn_dtype dtype, size_t n, size_t *bytes);

/* A token format (formats.def's `tokens`): its groups run along a head's rows. */
bool dtype_is_token(clattn_dtype dtype);

/* Bytes of one head's `rows` rows of `dim` values in any format (a token format's chunk: its header, room
 * for rows / tokens groups and a tail of `tokens` float16 rows); false where the format cannot hold
 * rows of dim values (a block format's dim not whole blocks, a token format's dim not a multiple of 4)
 * or the bytes overflow. */
bool dtype_head_bytes(clattn_dtype dtype, size_t rows, size_t dim, size_t *bytes);

/* Bytes of `heads` such heads (a tensor: batch · kv_heads, or a pool: blocks · kv_heads). */
bool dtype_tensor_bytes(clattn_dtype dtype, size_t heads, size_t rows, size_t dim, size_t *bytes);

/* Only K and V may have it (int8 and the quantised formats). */
bool dtype_kv_only(clattn_dtype dtype);

/* A token-format tensor's chunks: the rows of each (the tensor's rows per head, or a paged block's) and
 * the values of a row, which its loads need. */
typedef struct chunk_shape {
    size_t rows, dim;
} chunk_shape;

/* The storage types of one attention call's tensors: Q, K, V read, O written (or whatever plays their
 * parts: a conversion's source and destination), and the chunks of those in a token format (zero, and
 * ignored, for the others). */
typedef struct tensor_types {
    clattn_dtype q, k, v, o;
    chunk_shape q_chunk, k_chunk, v_chunk, o_chunk;
} tensor_types;

/* All four float32: what every kernel was written for, and what their default build means. */
bool tensor_types_all_float(tensor_types t);

/* The build options that give a kernel these types (" -DQ_T=1 -DQ_FMT=float16 -DQ_STORE=half …", a
 * leading space), or "" when all are float32 (so that float programs keep their options, and their
 * cache keys, unchanged). */
void tensor_types_options(tensor_types t, char *buf, size_t size);
/* Room for them. */
#define TYPES_OPTIONS_MAX 768

#endif
