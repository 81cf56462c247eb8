/* clattn._clattn.KVCache's object, shared by kvcache.c (making it, appends, attention) and kvbytes.c (its
 * storage formats, and the raw bytes of its buffers read back and loaded). */
#ifndef PYCLATTN_KVCACHE_H
#define PYCLATTN_KVCACHE_H

#include "pyclattn.h"

#define PYKV_MAX_PREFIXES 64

/* A cache: K and V each in a storage format of src/base/formats.def (K and V may differ), rows of
 * k_row / v_row bytes (clattn_dtype_bytes of the head size), a float32 scale per row beside them where
 * the format asks for one (int8) or the cache was made with them (FP8, scaled=True). */
typedef struct py_kvcache {
    PyObject_HEAD
    PyObject *context;
    size_t batch, kv_heads, capacity, qk_dim, v_dim, block_size; /* block_size 0: dense */
    clattn_dtype k_dtype, v_dtype;
    size_t k_row, v_row;    /* bytes of one K (V) row (0 for a token format: see k_head) */
    size_t k_head, v_head;  /* bytes of one head's rows: a dense head's capacity, or a paged block's */
    size_t *lengths;
    cl_mem k, v;            /* dense: (B, kv_heads, capacity, ·); paged: the pools (blocks, kv_heads, block_size, ·) */
    cl_mem k_scales, v_scales; /* NULL, or one float per row of k (v) */
    cl_mem table;           /* paged: (B, max_blocks) block ids */
    size_t max_blocks, blocks, next_block; /* blocks: the sequences' (B · max_blocks), handed out from 0 */
    int *host_table;        /* paged: the table on the host (-1: none yet) */
    /* Shared prefixes (paged; kvprefix.c): prefix_blocks more blocks after the sequences', handed out from
     * `blocks` on, and each prefix's first block and rows. */
    size_t prefix_blocks, prefix_next, n_prefixes;
    size_t prefix_first[PYKV_MAX_PREFIXES], prefix_len[PYKV_MAX_PREFIXES];
    int latent;             /* MLA's latent form: no V; the values are the first v_dim columns of K's rows */
    int counted;            /* made whole: counted in pyclattn_live_caches */
} py_kvcache;

/* Rows of each of the cache's buffers: B · kv_heads · capacity dense, blocks · kv_heads · block_size paged
 * (the sequences' blocks: a pool's shared-prefix blocks come after them). */
size_t pykv_rows(const py_kvcache *c);

/* The cache's context; its pool as clattn_paged_cache (every block, the prefixes' too); the descriptor of
 * a call with `heads` query heads of q_len rows over it. */
py_context *pykv_context(py_kvcache *c);
clattn_paged_cache pykv_paged_view(const py_kvcache *c);
clattn_sdpa_desc pykv_desc(const py_kvcache *c, size_t heads, size_t q_len);

/* The methods of kvprefix.c: _add_prefix(k, v, bf16) → its id, and _attend_prefixes(q, out, lse, heads,
 * q_len, bf16, levels, **options). */
PyObject *pykv_add_prefix(PyObject *obj, PyObject *args);
PyObject *pykv_attend_prefixes(PyObject *obj, PyObject *args, PyObject *kwargs);
/* kvsparse.c: _attend_sparse(q, out, lse, heads, q_len, bf16, indices, top_k, **options). */
PyObject *pykv_attend_sparse(PyObject *obj, PyObject *args, PyObject *kwargs);
/* The calls on (q, out, lse) t[0..2] that ran on buffers m[0..2] (the arrays' own on the device, else uploads):
 * their results read back into the host arrays (inside the call's critical section; lse when m[2]), then the
 * uploads and the tensors released. */
clattn_status pykv_read_back(cl_command_queue queue, const py_tensor *t, const cl_mem *m, size_t out_bytes,
                             size_t lse_bytes);
void pykv_release(py_tensor *t, cl_mem *m, int device);

/* The type of a format's name (a ValueError naming `what` and listing every name for an unknown one). */
int pykv_dtype(const char *name, const char *what, clattn_dtype *out);
/* 1 when a format takes a row scale always (int8), 2 when optionally (FP8), 0 when never. */
int pykv_scale_rule(clattn_dtype t);
/* 1 for the formats only K and V may have. */
int pykv_kv_only(clattn_dtype t);

/* The methods of kvbytes.c: _read(which) and _load(k, v, k_scales, v_scales, lengths, table). */
PyObject *pykv_read(PyObject *obj, PyObject *args);
PyObject *pykv_load(PyObject *obj, PyObject *args);
/* _clattn.formats(): every storage format, ((name, block, block_bytes, row_scales, kv_only), …). */
PyObject *py_formats(PyObject *self, PyObject *unused);

#endif
