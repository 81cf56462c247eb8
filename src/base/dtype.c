/* Storage types: sizes and names. The kernels take a tensor's type as a build option (-DQ_T=n, …: the
 * enum's value), and cl/common.cl turns it into loads and stores. */
#include "dtype.h"

#include <stdio.h>

static const struct {
    size_t bytes;
    const char *name;
} dtypes[] = {
    [CLATTN_FLOAT32] = {4, "float32"},
    [CLATTN_FLOAT16] = {2, "float16"},
    [CLATTN_BFLOAT16] = {2, "bfloat16"},
    [CLATTN_INT8] = {1, "int8"},
};

bool dtype_valid(clattn_dtype dtype) { return (unsigned)dtype < sizeof dtypes / sizeof dtypes[0]; }

size_t dtype_bytes(clattn_dtype dtype) { return dtype_valid(dtype) ? dtypes[dtype].bytes : 0; }

size_t clattn_dtype_size(clattn_dtype dtype) { return dtype_bytes(dtype); }

const char *clattn_dtype_name(clattn_dtype dtype) { return dtype_valid(dtype) ? dtypes[dtype].name : "unknown"; }

bool tensor_types_all_float(tensor_types t)
{
    return t.q == CLATTN_FLOAT32 && t.k == CLATTN_FLOAT32 && t.v == CLATTN_FLOAT32 && t.o == CLATTN_FLOAT32;
}

bool tensor_types_equal(tensor_types a, tensor_types b)
{
    return a.q == b.q && a.k == b.k && a.v == b.v && a.o == b.o;
}

void tensor_types_options(tensor_types t, char *buf, size_t size)
{
    if (tensor_types_all_float(t))
        snprintf(buf, size, "%s", "");
    else
        snprintf(buf, size, " -DQ_T=%d -DK_T=%d -DV_T=%d -DO_T=%d", (int)t.q, (int)t.k, (int)t.v, (int)t.o);
}
