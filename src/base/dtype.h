/* Storage types (clattn_dtype): their sizes and names, and how a kernel build names them. */
#ifndef CLATTN_DTYPE_H
#define CLATTN_DTYPE_H

#include "clattn/clattn.h"

#include <stdbool.h>

/* clattn_dtype's values: tables indexed by type have this many entries. */
#define DTYPE_COUNT 4

/* A value inside the enum. */
bool dtype_valid(clattn_dtype dtype);

/* Bytes per element; 0 outside the enum. */
size_t dtype_bytes(clattn_dtype dtype);

/* The storage types of one attention call's tensors: Q, K, V read, O written. */
typedef struct tensor_types {
    clattn_dtype q, k, v, o;
} tensor_types;

/* All four float32: what every kernel was written for, and what their default build means. */
bool tensor_types_all_float(tensor_types t);
bool tensor_types_equal(tensor_types a, tensor_types b);

/* The build options that give a kernel these types (" -DQ_T=1 -DK_T=0 …", a leading space), or "" when
 * all are float32 (so that float programs keep their options, and their cache keys, unchanged). */
void tensor_types_options(tensor_types t, char *buf, size_t size);

#endif
