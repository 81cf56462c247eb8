/* clattn._clattn.KVCache: a decoding cache on the device, dense (clattn_kv_append, clattn_sdpa over the
 * valid prefix) or paged (a pool of blocks handed to sequences as they grow, clattn_kv_append_paged and
 * clattn_sdpa_paged) — the lengths kept here. New rows and queries come from the host; the cache stays on
 * the device between calls, K and V each in any storage format (a quantised one is written by the
 * library's quantising append); kvbytes.c reads its bytes back and loads them. */
#include "kvcache.h"

#include <stdlib.h>
#include <string.h>

py_context *pykv_context(py_kvcache *c) { return (py_context *)c->context; }

static void cache_release(py_kvcache *c)
{
    cl_mem *mems[5] = {&c->k, &c->v, &c->k_scales, &c->v_scales, &c->table};
    for (int i = 0; i < 5; i++)
        if (*mems[i]) {
            clReleaseMemObject(*mems[i]);
            *mems[i] = NULL;
        }
    PyMem_Free(c->lengths);
    PyMem_Free(c->host_table);
    c->lengths = NULL;
    c->host_table = NULL;
}

size_t pykv_rows(const py_kvcache *c)
{
    return c->batch * c->kv_heads * (c->block_size ? c->max_blocks * c->block_size : c->capacity);
}

/* KVCache(context, batch, kv_heads, capacity, qk_dim, v_dim, k_dtype, v_dtype, block_size, scaled[,
 * prefix_rows, latent]): the types by name, block_size 0 for a dense cache, else a power of two from 8 to 256
 * (a paged one); scaled: a float32 scale per row for the formats that take one optionally (FP8); int8 always
 * has them; latent: MLA's latent cache (no V buffer: the library reads the values from K's rows). */
static PyObject *kvcache_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    (void)kwargs;
    PyObject *ctx_obj;
    Py_ssize_t B, KVH, cap, D, DV, bs, prefix_rows = 0;
    const char *k_name, *v_name;
    int scaled, latent = 0;
    clattn_dtype kt, vt;
    if (!PyArg_ParseTuple(args, "Onnnnnssnp|np:KVCache", &ctx_obj, &B, &KVH, &cap, &D, &DV, &k_name, &v_name, &bs,
                          &scaled, &prefix_rows, &latent))
        return NULL;
    if (latent && (DV >= D || strcmp(k_name, v_name) != 0))
        return PyErr_Format(PyExc_ValueError, "latent=True: one cache holds keys and values, so v_dim %zd must be "
                            "below head_dim %zd and k_dtype and v_dtype one type", DV, D);
    if (prefix_rows < 0 || (prefix_rows && !bs)) {
        PyErr_SetString(PyExc_ValueError, "prefix_capacity: rows for shared prefixes, in a paged cache (block_size)");
        return NULL;
    }
    py_context *pc = pyclattn_context(ctx_obj, "context");
    if (!pc || pykv_dtype(k_name, "k_dtype", &kt) != 0 || pykv_dtype(v_name, "v_dtype", &vt) != 0)
        return NULL;
    if (B < 1 || KVH < 1 || cap < 1 || D < 1 || DV < 1 || bs < 0) {
        PyErr_SetString(PyExc_ValueError, "batch, kv_heads, capacity and the head sizes must be at least 1");
        return NULL;
    }
    const clattn_dtype types[2] = {kt, vt};
    const Py_ssize_t dims[2] = {D, DV};
    for (int i = 0; i < 2; i++)
        if (clattn_dtype_head_bytes(types[i], 1, (size_t)dims[i]) == 0)
            return PyErr_Format(PyExc_ValueError, "%s %zd is not a multiple of %s's %s of %zu", i ? "v_dim" : "head_dim",
                                dims[i], clattn_dtype_name(types[i]),
                                clattn_dtype_block(types[i]) > 1 ? "block" : "packing (channels)",
                                clattn_dtype_block(types[i]) > 1 ? clattn_dtype_block(types[i]) : 4);
    if (scaled && pykv_scale_rule(kt) != 2 && pykv_scale_rule(vt) != 2)
        return PyErr_Format(PyExc_ValueError, "scaled=True: neither %s nor %s takes optional row scales (the FP8 "
                            "formats do; int8 always has them)", k_name, v_name);
    allocfunc alloc = (allocfunc)PyType_GetSlot(type, Py_tp_alloc);
    py_kvcache *c = (py_kvcache *)alloc(type, 0);
    if (!c)
        return NULL;
    Py_INCREF(ctx_obj);
    c->context = ctx_obj;
    c->batch = (size_t)B, c->kv_heads = (size_t)KVH, c->capacity = (size_t)cap;
    c->qk_dim = (size_t)D, c->v_dim = (size_t)DV, c->block_size = (size_t)bs;
    c->k_dtype = kt, c->v_dtype = vt;
    c->latent = latent;
    c->k_row = clattn_dtype_bytes(kt, c->qk_dim), c->v_row = clattn_dtype_bytes(vt, c->v_dim);
    c->lengths = PyMem_Calloc((size_t)B, sizeof *c->lengths);
    size_t rows = c->capacity, chunks = 1, kb, vb, sb; /* chunks: a sequence's heads' (a token format's) */
    if (bs) { /* every sequence may grow to the capacity: a pool of B · max_blocks blocks */
        c->max_blocks = (c->capacity + c->block_size - 1) / c->block_size;
        c->blocks = c->batch * c->max_blocks;
        c->prefix_blocks = ((size_t)prefix_rows + c->block_size - 1) / c->block_size;
        c->prefix_next = c->blocks;
        rows = c->max_blocks * c->block_size;
        chunks = c->max_blocks;
        c->host_table = PyMem_Malloc(c->blocks * sizeof *c->host_table);
    }
    c->k_head = clattn_dtype_head_bytes(kt, bs ? c->block_size : c->capacity, c->qk_dim);
    c->v_head = clattn_dtype_head_bytes(vt, bs ? c->block_size : c->capacity, c->v_dim);
    /* (a pool's buffers hold its shared-prefix blocks after the sequences') */
    const size_t extra = c->prefix_blocks, all = (size_t)B * chunks + extra;
    if (!c->lengths || (bs && !c->host_table) || !c->k_head || !c->v_head ||
        py_product(&kb, all, KVH, c->k_head, 1) || py_product(&vb, all, KVH, c->v_head, 1) ||
        py_product(&sb, (size_t)B * rows + extra * c->block_size, KVH, sizeof(float), 1)) {
        Py_DECREF(c);
        return PyErr_Occurred() ? NULL : PyErr_NoMemory();
    }
    for (size_t i = 0; bs && i < c->blocks; i++)
        c->host_table[i] = -1;
    const int k_scaled = pykv_scale_rule(kt) == 1 || (scaled && pykv_scale_rule(kt) == 2);
    const int v_scaled = pykv_scale_rule(vt) == 1 || (scaled && pykv_scale_rule(vt) == 2);
    /* Zeros everywhere (a row never written reads as 0, its bytes as zeros), copied in as the buffers are
     * made: nothing is queued, so a context still busy with an abandoned call does not hold this up. */
    size_t largest = kb > vb ? kb : vb;
    largest = largest > sb ? largest : sb;
    void *zeros = calloc(1, largest);
    clattn_status st = zeros ? CLATTN_SUCCESS : CLATTN_ERROR_OUT_OF_HOST_MEMORY;
    if (zeros)
        c->k = py_upload(pc, zeros, kb, &st);
    if (c->k && !latent)
        c->v = py_upload(pc, zeros, vb, &st);
    if (st == CLATTN_SUCCESS && k_scaled)
        c->k_scales = py_upload(pc, zeros, sb, &st);
    if (st == CLATTN_SUCCESS && v_scaled && !latent) /* (latent: K's scales serve, pykv_desc) */
        c->v_scales = py_upload(pc, zeros, sb, &st);
    if (st == CLATTN_SUCCESS && bs)
        c->table = py_upload(pc, NULL, c->blocks * sizeof(int), &st);
    free(zeros);
    if (st != CLATTN_SUCCESS) {
        Py_DECREF(c);
        return pyclattn_raise(st, "allocating the KV cache's buffers");
    }
    pyclattn_live_caches++;
    c->counted = 1;
    return (PyObject *)c;
}

static void kvcache_dealloc(PyObject *obj)
{
    py_kvcache *c = (py_kvcache *)obj;
    PyTypeObject *type = Py_TYPE(obj);
    if (c->counted)
        pyclattn_live_caches--;
    cache_release(c);
    Py_XDECREF(c->context);
    freefunc tp_free = (freefunc)PyType_GetSlot(type, Py_tp_free);
    tp_free(obj);
    Py_DECREF(type);
}

clattn_paged_cache pykv_paged_view(const py_kvcache *c)
{
    clattn_paged_cache p = CLATTN_PAGED_CACHE_INIT;
    p.k_pool = c->k, p.v_pool = c->v, p.blocks = c->blocks + c->prefix_blocks, p.block_size = c->block_size;
    p.block_table = c->table, p.max_blocks = c->max_blocks;
    return p;
}

clattn_sdpa_desc pykv_desc(const py_kvcache *c, size_t heads, size_t q_len)
{
    clattn_sdpa_desc d = CLATTN_SDPA_DESC_INIT;
    d.batch = c->batch, d.heads = heads, d.kv_heads = c->kv_heads, d.q_len = q_len;
    d.kv_len = c->block_size ? c->max_blocks * c->block_size : c->capacity;
    d.qk_dim = c->qk_dim, d.v_dim = c->v_dim;
    d.k_dtype = c->k_dtype, d.v_dtype = c->v_dtype;
    d.k_scales = c->k_scales, d.v_scales = c->latent ? c->k_scales : c->v_scales;
    return d;
}

/* append(k, v): n new rows per sequence, k (B, kv_heads, n, qk_dim) and v (…, v_dim), both of one float type:
 * the cache's own where K and V share a float type, else any (the library converts and quantises them). */
static PyObject *kvcache_append(PyObject *obj, PyObject *args)
{
    py_kvcache *c = (py_kvcache *)obj;
    py_context *pc = pykv_context(c);
    PyObject *k_obj, *v_obj, *counts_obj = Py_None;
    Py_ssize_t n;
    int bf16;
    if (!PyArg_ParseTuple(args, "OOnp|O:append", &k_obj, &v_obj, &n, &bf16, &counts_obj))
        return NULL;
    /* counts: each sequence keeps its first counts[b] of the n rows (a mixed batch's appends). The n rows go in
     * whole — those past a sequence's count land past its length, where its next append writes — so a format
     * that quantises groups of rows together (a token format) cannot take them. */
    size_t *counts = NULL;
    if (counts_obj != Py_None) {
        const int token = (clattn_dtype_size(c->k_dtype) == 0 && clattn_dtype_block(c->k_dtype) == 1) ||
                          (clattn_dtype_size(c->v_dtype) == 0 && clattn_dtype_block(c->v_dtype) == 1);
        if (token)
            return PyErr_Format(PyExc_ValueError, "append: counts= needs a cache whose rows are quantised one by one "
                                "(%s groups rows)", clattn_dtype_name(clattn_dtype_size(c->k_dtype) ? c->v_dtype : c->k_dtype));
        if (py_sizes_from_sequence(counts_obj, "counts", c->batch, &counts) != 0)
            return NULL;
        for (size_t b = 0; b < c->batch; b++)
            if (counts[b] > (size_t)n) {
                PyMem_Free(counts);
                return PyErr_Format(PyExc_ValueError, "append: counts[%zu] = %zu passes the %zd rows given", b,
                                    counts[b], n);
            }
    }
    py_tensor k, v;
    size_t nk, nv;
    /* A cache of one float type takes rows of that type (copied); any other, rows of any float type. */
    const int same_float = c->k_dtype == c->v_dtype && !pykv_kv_only(c->k_dtype);
    static const char *const names[2] = {"k", "v"};
    py_tensor kv[2] = {{0}};
    if (n < 1 || py_tensor_get_any(k_obj, "k", 0, bf16, &kv[0]) != 0) {
        PyMem_Free(counts);
        return n < 1 ? (PyErr_SetString(PyExc_ValueError, "append: no rows"), NULL) : NULL;
    }
    /* (a latent cache: the key rows alone, which hold the values) */
    if (c->latent && v_obj != Py_None)
        PyErr_SetString(PyExc_TypeError, "append: a latent cache (MLA) takes its rows as key alone: value must be "
                                         "None");
    const int read = c->latent ? v_obj == Py_None && py_tensors_on_device(pc, kv, 1, names) >= 0
                               : py_tensor_get_any(v_obj, "v", 0, bf16, &kv[1]) == 0 &&
                                     py_tensors_on_device(pc, kv, 2, names) >= 0;
    k = kv[0], v = kv[1];
    if (!read || py_product(&nk, c->batch, c->kv_heads, n, c->qk_dim) ||
        py_product(&nv, c->batch, c->kv_heads, n, c->v_dim) || py_tensor_expect(&k, "k", nk, 0) ||
        (!c->latent && (py_tensor_expect(&v, "v", nv, 0) || k.dtype != v.dtype)) ||
        (same_float && k.dtype != c->k_dtype)) {
        if (!PyErr_Occurred() && same_float)
            PyErr_Format(PyExc_TypeError, "k and v must be %s, the cache's type", clattn_dtype_name(c->k_dtype));
        else if (!PyErr_Occurred())
            PyErr_Format(PyExc_TypeError, "k and v must have one type (float32, float16 or bfloat16), not %s and %s",
                         clattn_dtype_name(k.dtype), clattn_dtype_name(v.dtype));
        py_tensor_release(&k);
        py_tensor_release(&v);
        PyMem_Free(counts);
        return NULL;
    }
    clattn_status st = CLATTN_SUCCESS;
    /* Device arrays are read where they are; host rows go up in buffers of their own (no wait: see below). */
    cl_mem kn = k.mem ? k.mem : py_upload(pc, k.data, nk * k.elem_size, &st);
    cl_mem vn = !kn || c->latent ? NULL : v.mem ? v.mem : py_upload(pc, v.data, nv * v.elem_size, &st);
    char detail[2048] = "";
    size_t over = SIZE_MAX, held = 0; /* a sequence the rows would overflow, and its length */
    if (kn && (vn || c->latent)) {
        /* One critical section, under the context's lock: the capacity check, the blocks handed out, the
         * rows written at the lengths read here and the lengths bumped. Another thread's append or attend
         * on the cache (or any call on its context) runs wholly before or after. */
        CLATTN_CALL(pc, detail, {
            for (size_t b = 0; b < c->batch && over == SIZE_MAX; b++)
                if (c->lengths[b] + (size_t)n > c->capacity)
                    over = b, held = c->lengths[b];
            if (over == SIZE_MAX) {
                const size_t first_new = c->next_block;
                int table_changed = 0;
                for (size_t b = 0; c->block_size && b < c->batch; b++) /* blocks for the new rows, from the pool */
                    for (size_t j = c->lengths[b] / c->block_size; j <= (c->lengths[b] + (size_t)n - 1) / c->block_size;
                         j++)
                        if (c->host_table[b * c->max_blocks + j] < 0) {
                            c->host_table[b * c->max_blocks + j] = (int)c->next_block++;
                            table_changed = 1;
                        }
                clattn_sdpa_desc d = pykv_desc(c, c->kv_heads, 0);
                d.q_dtype = k.dtype; /* (the new rows' type) */
                const clattn_paged_cache p = pykv_paged_view(c);
                if (table_changed)
                    st = (clattn_status)clEnqueueWriteBuffer(clattn_context_queue(pc->ctx), c->table, CL_TRUE, 0,
                                                             c->blocks * sizeof(int), c->host_table, 0, NULL, NULL);
                if (st == CLATTN_SUCCESS)
                    st = c->block_size ? clattn_kv_append_paged(pc->ctx, &d, &p, c->lengths, (size_t)n, kn, vn)
                                       : clattn_kv_append(pc->ctx, &d, c->lengths, (size_t)n, kn, vn, c->k, c->v);
                /* No wait for the rows to land: the context's queue runs in order, so the next attend (or
                 * read of the bytes) sees them, and the new rows' buffers, released below, live until the
                 * copy is done. A step saves a host synchronisation (about 45 µs of 230 at S = 512 on PoCL:
                 * the p10 of append + attend, 300 steps, C, alternated). */
                if (st == CLATTN_SUCCESS) {
                    for (size_t b = 0; b < c->batch; b++)
                        c->lengths[b] += counts ? counts[b] : (size_t)n;
                } else { /* the blocks of this append go back to the pool (the lengths never reach them) */
                    for (size_t i = 0; c->block_size && i < c->blocks; i++)
                        if (c->host_table[i] >= (int)first_new)
                            c->host_table[i] = -1;
                    c->next_block = first_new;
                }
            }
        });
    }
    if (kn && !k.mem)
        clReleaseMemObject(kn);
    if (vn && !v.mem)
        clReleaseMemObject(vn);
    py_tensor_release(&k);
    py_tensor_release(&v);
    PyMem_Free(counts);
    if (over != SIZE_MAX)
        return PyErr_Format(PyExc_ValueError, "append: sequence %zu holds %zu rows; %zd more pass the capacity %zu",
                            over, held, n, c->capacity);
    if (st != CLATTN_SUCCESS)
        return pyclattn_raise(st, *detail ? detail : "uploading the new rows");
    Py_RETURN_NONE;
}

/* attend(q, out, lse, heads, q_len, bf16[, counts], **options): the q_len queries of each sequence, the last
 * q_len rows of its cache (or, without a causal mask in options, any queries) against its valid rows. With
 * counts (a paged cache), sequence b has counts[b] queries, packed (rows, heads, ·) as in clattn_sdpa_paged_ragged
 * (q_len: the longest). */
static PyObject *kvcache_attend(PyObject *obj, PyObject *args, PyObject *kwargs)
{
    py_kvcache *c = (py_kvcache *)obj;
    py_context *pc = pykv_context(c);
    PyObject *q_obj, *out_obj, *lse_obj, *counts_obj = Py_None;
    Py_ssize_t H, L;
    int bf16;
    if (!PyArg_ParseTuple(args, "OOOnnp|O:attend", &q_obj, &out_obj, &lse_obj, &H, &L, &bf16, &counts_obj))
        return NULL;
    if (H < 1 || L < 1 || (size_t)H % c->kv_heads)
        return PyErr_Format(PyExc_ValueError, "attend: %zd query heads over %zu K/V heads", H, c->kv_heads);
    if (counts_obj != Py_None && !c->block_size)
        return PyErr_Format(PyExc_ValueError, "attend: query_lengths needs a paged cache (block_size)");
    call_options o;
    if (py_options_read(kwargs, c->batch, (size_t)H, &o) != 0)
        return NULL;
    size_t *counts = NULL, *starts = NULL, rows = c->batch * (size_t)L; /* (counts: the packed rows) */
    if (counts_obj != Py_None) {
        if (py_sizes_from_sequence(counts_obj, "query_lengths", c->batch, &counts) != 0 ||
            !(starts = PyMem_Malloc((c->batch + 1) * sizeof *starts))) {
            if (counts && !PyErr_Occurred())
                PyErr_NoMemory();
            PyMem_Free(counts);
            py_options_free(&o);
            return NULL;
        }
        starts[0] = 0;
        for (size_t b = 0; b < c->batch; b++)
            starts[b + 1] = starts[b] + counts[b];
        rows = starts[c->batch];
        PyMem_Free(counts);
    }
    py_tensor q, out = {0}, lse = {0};
    size_t nq, no, nl;
    static const char *const names[3] = {"query", "out", "lse"};
    int bad = py_tensor_get_any(q_obj, "query", 0, bf16, &q) || py_tensor_get_any(out_obj, "out", 0, bf16, &out) ||
              py_tensor_get_any(lse_obj, "lse", 1, 0, &lse) || py_product(&nq, rows, H, c->qk_dim, 1) ||
              py_product(&no, rows, H, c->v_dim, 1) || py_product(&nl, rows, H, 1, 1) ||
              py_tensor_expect(&q, "query", nq, 0) || py_tensor_expect(&out, "out", no, 0) || py_float_output(&lse, "lse", nl) ||
              py_options_check_rows(&o, rows);
    const py_tensor given[3] = {q, out, lse};
    const int device = bad ? 0 : py_tensors_on_device(pc, given, 3, names);
    bad = bad || device < 0;
    long long *offsets = NULL;
    if (!bad && o.masks.causal != CLATTN_CAUSAL_NONE && !c->block_size) {
        /* Dense: the queries are the last L rows of each sequence (offsets, filled from the lengths inside
         * the call's critical section), top-left from there. */
        offsets = PyMem_Malloc(c->batch * sizeof *offsets);
        if (!offsets) {
            PyErr_NoMemory();
            bad = 1;
        }
        o.masks.causal = CLATTN_CAUSAL_TOP_LEFT;
        o.masks.query_offsets = offsets;
    } else if (o.masks.causal != CLATTN_CAUSAL_NONE) {
        o.masks.causal = CLATTN_CAUSAL_BOTTOM_RIGHT; /* paged: each sequence's last query at its last key */
    }
    if (!bad && !c->block_size)
        o.masks.key_lengths = c->lengths;
    clattn_status st = CLATTN_SUCCESS;
    char detail[2048] = "";
    size_t short_b = SIZE_MAX, short_len = 0; /* a sequence holding fewer rows than the queries */
    cl_mem qm = NULL, om = NULL, lm = NULL;
    if (!bad && device) { /* (read and written where they are: nothing goes through the host) */
        qm = q.mem, om = out.mem, lm = lse.mem;
    } else if (!bad) {
        qm = py_upload(pc, q.data, nq * q.elem_size, &st);
        om = qm ? py_upload(pc, NULL, no * out.elem_size, &st) : NULL;
        lm = om && lse.capsule ? py_upload(pc, NULL, nl * sizeof(float), &st) : NULL;
    }
    if (!bad && om && (lm || (!lse.capsule && !lse.mem))) {
        clattn_sdpa_desc d = pykv_desc(c, (size_t)H, (size_t)L);
        d.q_dtype = q.dtype, d.out_dtype = out.dtype;
        py_options_apply(&o, &d);
        const clattn_paged_cache p = pykv_paged_view(c);
        const cl_command_queue queue = clattn_context_queue(pc->ctx);
        CLATTN_CALL(pc, detail, {
            /* The lengths as this critical section sees them (an append on another thread runs wholly
             * before or after). */
            for (size_t b = 0; b < c->batch && short_b == SIZE_MAX; b++)
                if (c->lengths[b] < (starts ? starts[b + 1] - starts[b] : (size_t)L))
                    short_b = b, short_len = c->lengths[b];
            for (size_t b = 0; offsets && b < c->batch && short_b == SIZE_MAX; b++)
                offsets[b] = (long long)(c->lengths[b] - (size_t)L);
            if (short_b != SIZE_MAX)
                ;
            else if (starts)
                st = clattn_sdpa_paged_ragged(pc->ctx, &d, &p, c->lengths, starts, qm, NULL, om, lm);
            else
                st = c->block_size ? clattn_sdpa_paged(pc->ctx, &d, &p, c->lengths, qm, NULL, om, lm)
                                   : clattn_sdpa(pc->ctx, &d, qm, c->k, c->v, NULL, om, NULL, lm);
            if (st == CLATTN_SUCCESS && short_b == SIZE_MAX && !device)
                st = (clattn_status)clEnqueueReadBuffer(queue, om, CL_TRUE, 0, no * out.elem_size, out.data, 0, NULL,
                                                        NULL);
            if (st == CLATTN_SUCCESS && short_b == SIZE_MAX && lm && !device)
                st = (clattn_status)clEnqueueReadBuffer(queue, lm, CL_TRUE, 0, nl * sizeof(float), lse.data, 0,
                                                        NULL, NULL);
        });
    }
    cl_mem mems[3] = {qm, om, lm};
    for (int i = 0; i < 3 && !device; i++) /* (the device arrays' buffers: released with them) */
        if (mems[i])
            clReleaseMemObject(mems[i]);
    PyMem_Free(offsets);
    PyMem_Free(starts);
    py_options_free(&o);
    py_tensor_release(&q);
    py_tensor_release(&out);
    py_tensor_release(&lse);
    if (bad)
        return NULL;
    if (short_b != SIZE_MAX)
        return PyErr_Format(PyExc_ValueError, "attend: sequence %zu holds %zu rows, fewer than its queries (append "
                            "their keys and values first)", short_b, short_len);
    if (st != CLATTN_SUCCESS)
        return pyclattn_raise(st, *detail ? detail : "allocating the call's buffers");
    Py_RETURN_NONE;
}

static PyObject *kvcache_lengths(PyObject *obj, void *closure)
{
    (void)closure;
    py_kvcache *c = (py_kvcache *)obj;
    py_context *pc = pykv_context(c);
    size_t *copy = PyMem_Malloc(c->batch * sizeof *copy);
    if (!copy)
        return PyErr_NoMemory();
    char detail[8];
    CLATTN_CALL(pc, detail, memcpy(copy, c->lengths, c->batch * sizeof *copy)); /* (not half an append's) */
    PyObject *t = PyTuple_New((Py_ssize_t)c->batch);
    for (size_t b = 0; t && b < c->batch; b++) {
        PyObject *n = PyLong_FromSize_t(copy[b]);
        if (!n || PyTuple_SetItem(t, (Py_ssize_t)b, n) != 0) {
            Py_DECREF(t);
            t = NULL;
        }
    }
    PyMem_Free(copy);
    return t;
}

static PyObject *kvcache_blocks_used(PyObject *obj, void *closure)
{
    (void)closure;
    py_kvcache *c = (py_kvcache *)obj;
    py_context *pc = pykv_context(c);
    size_t used;
    char detail[8];
    CLATTN_CALL(pc, detail, used = c->next_block);
    return PyLong_FromSize_t(used);
}

static PyObject *kvcache_reset(PyObject *obj, PyObject *unused)
{
    (void)unused;
    py_kvcache *c = (py_kvcache *)obj;
    py_context *pc = pykv_context(c);
    char detail[8];
    CLATTN_CALL(pc, detail, { /* (not in the middle of another thread's append or attend) */
        memset(c->lengths, 0, c->batch * sizeof *c->lengths);
        for (size_t i = 0; c->block_size && i < c->blocks; i++)
            c->host_table[i] = -1;
        c->next_block = 0; /* (the pool's blocks are handed out again from the first) */
    });
    Py_RETURN_NONE;
}

/* The cache's buffers as integers (cl_mem; 0 where there is none): k, v, k_scales, v_scales, block table, and
 * the pool's blocks (paged; 0 dense). */
static PyObject *kvcache_buffers(PyObject *obj, void *closure)
{
    (void)closure;
    const py_kvcache *c = (py_kvcache *)obj;
    return Py_BuildValue("(KKKKKn)", (unsigned long long)(uintptr_t)c->k, (unsigned long long)(uintptr_t)c->v,
                         (unsigned long long)(uintptr_t)c->k_scales, (unsigned long long)(uintptr_t)c->v_scales,
                         (unsigned long long)(uintptr_t)c->table,
                         (Py_ssize_t)(c->block_size ? c->blocks + c->prefix_blocks : 0));
}

static PyGetSetDef kvcache_getset[] = {
    {"_buffers", kvcache_buffers, NULL,
     "(k, v, k_scales, v_scales, table) cl_mem handles as integers (0: none), and the pool's blocks.", NULL},
    {"lengths", kvcache_lengths, NULL, "The rows each sequence holds (a tuple).", NULL},
    {"blocks_used", kvcache_blocks_used, NULL, "Paged: the pool's blocks handed to sequences so far.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef kvcache_methods[] = {
    {"append", kvcache_append, METH_VARARGS, "append(k, v, n, bfloat16): n new rows per sequence."},
    {"attend", (PyCFunction)(void (*)(void))kvcache_attend, METH_VARARGS | METH_KEYWORDS,
     "attend(q, out, lse, heads, q_len, bfloat16, **options)."},
    {"reset", kvcache_reset, METH_NOARGS, "Empty every sequence (the buffers and the shared prefixes stay)."},
    {"_add_prefix", pykv_add_prefix, METH_VARARGS, "_add_prefix(k, v, bfloat16): a shared prefix's rows in; its id."},
    {"_attend_sparse", (PyCFunction)(void (*)(void))pykv_attend_sparse, METH_VARARGS | METH_KEYWORDS,
     "_attend_sparse(q, out, lse, heads, q_len, bfloat16, indices, top_k, **options): top-k sparse attention."},
    {"_attend_prefixes", (PyCFunction)(void (*)(void))pykv_attend_prefixes, METH_VARARGS | METH_KEYWORDS,
     "_attend_prefixes(q, out, lse, heads, q_len, bfloat16, levels, **options): cascade attention."},
    {"_read", pykv_read, METH_VARARGS, "_read(which): (the bytes of buffer `which`, lengths, table or None)."},
    {"_load", pykv_load, METH_VARARGS, "_load(k, v, k_scales, v_scales, lengths, table): whole buffers in."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot kvcache_slots[] = {
    {Py_tp_new, kvcache_new},
    {Py_tp_dealloc, kvcache_dealloc},
    {Py_tp_methods, kvcache_methods},
    {Py_tp_getset, kvcache_getset},
    {Py_tp_doc, "The C side of clattn.KVCache (see there)."},
    {0, NULL},
};

PyType_Spec pyclattn_kvcache_spec = {"clattn._clattn.KVCache", sizeof(py_kvcache), 0, Py_TPFLAGS_DEFAULT,
                                     kvcache_slots};
