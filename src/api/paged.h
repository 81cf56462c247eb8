/* Paged KV caches: the checks every call through a block table makes (paged.c), shared with the entry points
 * that read a paged pool their own way (sparse.c). */
#ifndef CLATTN_PAGED_H
#define CLATTN_PAGED_H

#include "validate.h"

/* A paged call's checked facts. */
typedef struct paged_shape {
    clattn_paged_cache cache;
    unsigned shift;       /* log2(block_size) */
    size_t capacity;      /* max_blocks · block_size: the rows a table row reaches */
    size_t k_pool_elems, v_pool_elems;
} paged_shape;

/* The cache's fields against the shape s (batch, kv_heads, head sizes, storage types), without touching the
 * device: read by the struct_size rule into p. */
clattn_status paged_cache_check(clattn_context *ctx, const clattn_paged_cache *given, const sdpa_shape *s,
                                paged_shape *p);

/* A pool without v_pool is MLA's latent form (latent_resolve): the values are the first v_dim columns of k_pool's
 * rows. Sets s->v_in_k then; call before paged_cache_check. */
clattn_status paged_latent_resolve(clattn_context *ctx, const clattn_paged_cache *cache, sdpa_shape *s,
                                   const char *who);

/* lengths[b] + extra must stay within the table's reach. */
clattn_status paged_lengths_check(clattn_context *ctx, const size_t *lengths, size_t batch, size_t extra,
                                  const paged_shape *p);

/* Upload the lengths into *lengths_buf, and check on the device every block id that rows [0, lengths[b] + extra)
 * of each sequence reach; the verdict is read back (a blocking read) before anything else runs. */
clattn_status paged_ids_check(clattn_context *ctx, const paged_shape *p, size_t batch, const size_t *lengths,
                              size_t extra, cl_mem *lengths_buf);

#endif
