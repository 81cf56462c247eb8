/* Reading and writing NumPy .npy files (format versions 1.0, 2.0 and 3.0), so that the command-line
 * tool can take its inputs from, and hand its results back to, Python.
 *
 * Supported element types: '<f2', '<f4', '<f8', '<i4', '<i8', '<u2' (also written '=' or '|' instead of
 * '<') and '|b1'. '<u2' is how bfloat16 arrays travel (numpy has no bfloat16): their bit patterns. Arrays must be C-ordered. Bytes after the data are accepted and ignored: numpy never writes
 * them, but they do no harm and rejecting them would only make hand-made or padded files fail.
 *
 * Error messages are one line and do not name the file: callers prefix the path themselves. */
#ifndef CLATTN_TOOLS_NPY_H
#define CLATTN_TOOLS_NPY_H

#include <stddef.h>
#include <stdio.h>

/* '<f4' '<f8' '<i4' '<i8' '|b1' '<f2' '<u2' */
typedef enum npy_dtype { NPY_F4, NPY_F8, NPY_I4, NPY_I8, NPY_B1, NPY_F2, NPY_U2 } npy_dtype;

#define NPY_MAX_DIMS 8
#define NPY_MAX_HEADER_LEN (1u << 20) /* numpy's own headers are < 200 bytes; anything this long is not one */

/* A loaded array. data holds count elements in host byte order, C order:
 * float (NPY_F4), double (NPY_F8), int32_t (NPY_I4), int64_t (NPY_I8), unsigned char 0/1 (NPY_B1) or
 * uint16_t (NPY_F2: IEEE half bit patterns; NPY_U2).
 * data is never NULL after a successful load, even when count is 0. A 0-d array has ndim 0, count 1. */
typedef struct npy_array {
    npy_dtype dtype;
    size_t ndim;
    size_t shape[NPY_MAX_DIMS];
    size_t count;
    void *data;
} npy_array;

/* Parse a whole .npy image in memory. 0 on success; on failure non-zero, *out cleared, and a one-line
 * reason in err (e.g. "header length 4294967280 exceeds file size 12"). Never reads past len and never
 * allocates more than the data size, which is checked against len before allocating. */
int npy_parse(const unsigned char *buf, size_t len, npy_array *out, char *err, size_t err_size);

/* Read the file at path and parse it as npy_parse does. A regular file is read whole and its data
 * moved into place inside the file buffer, so peak memory is about one file size. Anything else (a pipe,
 * FIFO, socket or device such as /dev/stdin or /dev/zero) is read only as far as its header says: the
 * preamble, the header, then exactly the data it describes, leaving what follows unread; a stream that
 * does not start as a .npy file is refused after at most 12 bytes. */
int npy_load(const char *path, npy_array *out, char *err, size_t err_size);

/* Release the data of a loaded array and clear it; safe on a cleared or already freed array. */
void npy_free(npy_array *a);

/* Converted copies, allocated with malloc (free with free), never NULL on success even for 0 elements.
 * npy_to_float takes f2, f4 or f8 (f2 exactly, f8 rounded to the nearest float); npy_bf16_to_float
 * takes u2 read as bfloat16 bit patterns (exactly); npy_to_int64 takes i4 or i8. Other types fail with
 * a message naming them; a bool mask is turned into an additive mask by the caller. */
int npy_to_float(const npy_array *a, float **out, char *err, size_t err_size);
int npy_bf16_to_float(const npy_array *a, float **out, char *err, size_t err_size);
int npy_to_int64(const npy_array *a, long long **out, char *err, size_t err_size);

/* Write count = product(shape) floats as a C-ordered '<f4' array (version 1.0 header, data starting at a
 * multiple of 64 bytes, as numpy writes). ndim 0 writes a scalar. Written as atomic_file.h says: a
 * regular file (or a new one) under a temporary name in the same folder, renamed over path, so no
 * half-written file is ever visible at path and on failure path is left as it was; a device, FIFO or the
 * standard output written through. */
int npy_save_f32(const char *path, const float *data, size_t ndim, const size_t *shape, char *err,
                 size_t err_size);
/* The same with the floats rounded to the nearest even of `dtype`: NPY_F4 (as npy_save_f32), NPY_F2
 * ('<f2', IEEE half: beyond its range ±inf, NaN stays NaN) or NPY_U2 (bfloat16 bit patterns as '<u2').
 * Other dtypes fail. */
int npy_save_floats_as(const char *path, npy_dtype dtype, const float *data, size_t ndim, const size_t *shape,
                       char *err, size_t err_size);
/* The same .npy bytes written to fp as they come (the caller opened it and closes it). */
int npy_write_floats_as(FILE *fp, npy_dtype dtype, const float *data, size_t ndim, const size_t *shape, char *err,
                        size_t err_size);

/* IEEE half and bfloat16 from and to float: widening is exact; narrowing rounds to nearest even,
 * overflows to ±inf and keeps NaN a (quiet) NaN of the same sign. */
float npy_half_to_float(unsigned short h);
unsigned short npy_float_to_half(float f);
float npy_bf16_to_float_value(unsigned short b);
unsigned short npy_float_to_bf16(float f);

/* "<f4", "<f8", "<i4", "<i8", "|b1", "<f2" or "<u2"; the size in bytes of one element. */
const char *npy_dtype_name(npy_dtype dtype);
size_t npy_dtype_size(npy_dtype dtype);

#endif
