/* Host reference of the storage formats of src/base/formats.def beyond float32, float16, bfloat16 and
 * int8: each block format's and FP8's bytes written (the algorithm of cl/formats.cl's quantisers, in
 * float as the device does) and read back (in double). Written from the formats' definitions — ggml's
 * block_q8_0 and block_q4_0, the asymmetric groups, the OCP 8-bit floats — not from the kernels. */
#ifndef CLATTN_FORMATS_REF_H
#define CLATTN_FORMATS_REF_H

#include <clattn/clattn.h>

#include <stdbool.h>
#include <stddef.h>

/* A format this file handles: the block formats and FP8. */
bool fref_handles(clattn_dtype type);

/* n values of src (rows of `row` values, row a multiple of the block) into bytes (clattn_dtype_bytes of
 * n); row_scales, for FP8 with scales (NULL: none), receives a scale per row (max |x| / the format's
 * largest value) that the bytes are divided by. */
void fref_quantise(clattn_dtype type, const float *src, size_t n, size_t row, void *bytes, float *row_scales);

/* Value i of the bytes, as float (a row scale not applied). */
float fref_value(clattn_dtype type, const void *bytes, size_t i);

/* The token formats (u4_t32, u2_t32: KIVI's keys, groups of 32 rows per channel), whose bytes are a
 * head's `rows` rows of `dim` values together (a chunk of clattn_dtype_head_bytes). */
bool fref_is_token(clattn_dtype type);
/* n rows of src (their values as the cache's source holds them) appended at row `start` of a chunk, as
 * clattn_kv_append writes them. */
void fref_token_append(clattn_dtype type, unsigned char *chunk, size_t rows, size_t dim, size_t start, const float *src,
                       size_t n);
/* Value (r, d) of a chunk (NaN for a row that held a non-finite value in a complete group). */
double fref_token_value(clattn_dtype type, const unsigned char *chunk, size_t rows, size_t dim, size_t r, size_t d);

/* The float nearest x in IEEE half (to nearest even). */
float fref_half_round(float x);

#endif
