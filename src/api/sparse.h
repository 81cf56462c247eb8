/* What the sparse call and its backward pass share (sparse.c). */
#ifndef CLATTN_SPARSE_H
#define CLATTN_SPARSE_H

#include "paged.h"
#include "validate.h"

/* A sparse call's shape, options, top_k, indices buffer and lengths checked (api names the call in messages);
 * with a cache, its facts in *p (NULL cache: dense, p untouched). */
clattn_status sparse_call_check(clattn_context *ctx, const char *api, const clattn_sdpa_desc *desc, size_t top_k,
                                cl_mem indices, const clattn_paged_cache *cache, cl_mem k, cl_mem v,
                                const size_t *lengths, sdpa_shape *s, paged_shape *p);

/* The vector width of the sparse kernels: the decode kernels' on this device, halved until it divides both head
 * sizes (a row is read VEC values at a time, and must end on a vector). */
clattn_status sparse_vector_width(clattn_context *ctx, const sdpa_shape *s, unsigned *vec);

#endif
