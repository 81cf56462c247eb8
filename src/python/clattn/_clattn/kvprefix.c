/* clattn._clattn.KVCache's shared prefixes: rows that several sequences of a paged cache share (a system
 * prompt, a few-shot block) written once into blocks of the pool kept for them (prefix_capacity), and
 * attention over a prefix per level plus each sequence's own rows (clattn_sdpa_cascade: each prefix read
 * once for all the sequences that share it). */
#include "kvcache.h"

#include <stdlib.h>
#include <string.h>

/* _add_prefix(k, v, rows, bf16): k (kv_heads, rows, qk_dim), v (…, v_dim) of a float type (the cache's own
 * where K and V share one), into the next free prefix blocks; returns the prefix's id. */
PyObject *pykv_add_prefix(PyObject *obj, PyObject *args)
{
    py_kvcache *c = (py_kvcache *)obj;
    py_context *pc = pykv_context(c);
    PyObject *k_obj, *v_obj;
    Py_ssize_t n;
    int bf16;
    if (!PyArg_ParseTuple(args, "OOnp:_add_prefix", &k_obj, &v_obj, &n, &bf16))
        return NULL;
    if (!c->block_size || c->prefix_blocks == 0)
        return PyErr_Format(PyExc_ValueError, "add_prefix: the cache keeps no room for shared prefixes (make it "
                            "paged, with prefix_capacity=rows)");
    if (n < 1)
        return PyErr_Format(PyExc_ValueError, "add_prefix: no rows");
    static const char *const names[2] = {"k", "v"};
    py_tensor kv[2] = {{0}};
    size_t nk, nv;
    const int same_float = c->k_dtype == c->v_dtype && !pykv_kv_only(c->k_dtype);
    int bad = py_tensor_get_any(k_obj, "k", 0, bf16, &kv[0]) || py_tensor_get_any(v_obj, "v", 0, bf16, &kv[1]) ||
              py_tensors_on_device(pc, kv, 2, names) < 0 || py_product(&nk, c->kv_heads, (size_t)n, c->qk_dim, 1) ||
              py_product(&nv, c->kv_heads, (size_t)n, c->v_dim, 1) || py_tensor_expect(&kv[0], "k", nk, 0) ||
              py_tensor_expect(&kv[1], "v", nv, 0);
    if (!bad && (kv[0].dtype != kv[1].dtype || (same_float && kv[0].dtype != c->k_dtype))) {
        PyErr_Format(PyExc_TypeError, "k and v must have one type%s%s", same_float ? ", the cache's: " : "",
                     same_float ? clattn_dtype_name(c->k_dtype) : "");
        bad = 1;
    }
    const size_t blocks = ((size_t)n + c->block_size - 1) / c->block_size;
    clattn_status st = CLATTN_SUCCESS;
    cl_mem kn = NULL, vn = NULL, table = NULL;
    if (!bad) {
        kn = kv[0].mem ? kv[0].mem : py_upload(pc, kv[0].data, nk * kv[0].elem_size, &st);
        vn = !kn ? NULL : kv[1].mem ? kv[1].mem : py_upload(pc, kv[1].data, nv * kv[1].elem_size, &st);
        table = vn ? py_upload(pc, NULL, blocks * sizeof(int), &st) : NULL;
    }
    char detail[2048] = "";
    Py_ssize_t id = -1;
    int full = 0;
    if (table) {
        CLATTN_CALL(pc, detail, {
            full = c->n_prefixes == PYKV_MAX_PREFIXES || c->prefix_next + blocks > c->blocks + c->prefix_blocks;
            int *ids = full ? NULL : malloc(blocks * sizeof *ids);
            for (size_t j = 0; ids && j < blocks; j++)
                ids[j] = (int)(c->prefix_next + j);
            st = full ? CLATTN_SUCCESS : !ids ? CLATTN_ERROR_OUT_OF_HOST_MEMORY
                 : (clattn_status)clEnqueueWriteBuffer(clattn_context_queue(pc->ctx), table, CL_TRUE, 0,
                                                       blocks * sizeof(int), ids, 0, NULL, NULL);
            free(ids);
            if (!full && st == CLATTN_SUCCESS) {
                clattn_sdpa_desc d = pykv_desc(c, c->kv_heads, 0);
                d.batch = 1, d.q_dtype = kv[0].dtype; /* (one "sequence": the prefix, through its own table) */
                clattn_paged_cache p = pykv_paged_view(c);
                p.block_table = table, p.max_blocks = blocks;
                const size_t empty = 0;
                st = clattn_kv_append_paged(pc->ctx, &d, &p, &empty, (size_t)n, kn, vn);
            }
            if (!full && st == CLATTN_SUCCESS) {
                id = (Py_ssize_t)c->n_prefixes; /* (its fields before the count that makes it visible) */
                c->prefix_first[id] = c->prefix_next, c->prefix_len[id] = (size_t)n;
                c->prefix_next += blocks;
                c->n_prefixes++;
            }
        });
    }
    if (kn && !kv[0].mem)
        clReleaseMemObject(kn);
    if (vn && !kv[1].mem)
        clReleaseMemObject(vn);
    if (table)
        clReleaseMemObject(table);
    py_tensor_release(&kv[0]);
    py_tensor_release(&kv[1]);
    if (bad)
        return NULL;
    if (full)
        return PyErr_Format(PyExc_ValueError, "add_prefix: %zd rows do not fit the room left for prefixes (%zu of %zu "
                            "blocks of %zu rows used, %zu prefixes of %d)", n, c->prefix_next - c->blocks,
                            c->prefix_blocks, c->block_size, c->n_prefixes, PYKV_MAX_PREFIXES);
    if (st != CLATTN_SUCCESS)
        return pyclattn_raise(st, *detail ? detail : "writing a prefix's rows");
    return PyLong_FromSsize_t(id);
}

/* One level's fields for clattn_sdpa_cascade from a sequence of batch prefix ids: every prefix is a group
 * (a group no sequence reads is skipped), group_of the ids, each prefix's blocks from its first. Arrays
 * owned by the caller (PyMem_Free). */
static int level_of(const py_kvcache *c, PyObject *ids, size_t level, clattn_cascade_level *out)
{
    memset(out, 0, sizeof *out);
    char name[32];
    snprintf(name, sizeof name, "prefixes[%zu]", level);
    size_t *group_of = NULL;
    if (py_sizes_from_sequence(ids, name, c->batch, &group_of) != 0)
        return -1;
    size_t max_blocks = 1;
    for (size_t g = 0; g < c->n_prefixes; g++) {
        const size_t nb = (c->prefix_len[g] + c->block_size - 1) / c->block_size;
        max_blocks = nb > max_blocks ? nb : max_blocks;
    }
    for (size_t b = 0; b < c->batch; b++)
        if (group_of[b] >= c->n_prefixes) {
            PyErr_Format(PyExc_ValueError, "%s[%zu] = %zu is not a prefix of this cache (%zu added)", name, b,
                         group_of[b], c->n_prefixes);
            PyMem_Free(group_of);
            return -1;
        }
    cl_int *blocks = PyMem_Calloc(c->n_prefixes * max_blocks, sizeof *blocks);
    if (!blocks) {
        PyMem_Free(group_of);
        PyErr_NoMemory();
        return -1;
    }
    for (size_t g = 0; g < c->n_prefixes; g++)
        for (size_t j = 0; j * c->block_size < c->prefix_len[g]; j++)
            blocks[g * max_blocks + j] = (cl_int)(c->prefix_first[g] + j);
    *out = (clattn_cascade_level){c->n_prefixes, group_of, blocks, max_blocks, c->prefix_len};
    return 0;
}

/* _attend_prefixes(q, out, lse, heads, q_len, bf16, levels, **options): float32 queries, each sequence's keys
 * its prefix at each level (levels: a sequence of per-level sequences of batch prefix ids) then its own rows. */
PyObject *pykv_attend_prefixes(PyObject *obj, PyObject *args, PyObject *kwargs)
{
    py_kvcache *c = (py_kvcache *)obj;
    py_context *pc = pykv_context(c);
    PyObject *q_obj, *out_obj, *lse_obj, *levels_obj;
    Py_ssize_t H, L;
    int bf16;
    if (!PyArg_ParseTuple(args, "OOOnnpO:_attend_prefixes", &q_obj, &out_obj, &lse_obj, &H, &L, &bf16, &levels_obj))
        return NULL;
    const Py_ssize_t n_levels = PySequence_Size(levels_obj);
    if (n_levels < 0 || n_levels > 8 || H < 1 || L < 1 || (size_t)H % c->kv_heads || !c->block_size) {
        PyErr_Clear();
        return PyErr_Format(PyExc_ValueError, "attend: prefixes needs a paged cache, 0 to 8 levels of prefix ids, and "
                            "query heads a multiple of the K/V heads");
    }
    call_options o;
    if (py_options_read(kwargs, c->batch, (size_t)H, &o) != 0)
        return NULL;
    clattn_cascade_level levels[8];
    memset(levels, 0, sizeof levels);
    static const char *const names[3] = {"query", "out", "lse"};
    py_tensor t[3] = {{0}};
    size_t nq, no, nl;
    int bad = 0;
    for (Py_ssize_t l = 0; l < n_levels && !bad; l++) {
        PyObject *ids = PySequence_GetItem(levels_obj, l);
        bad = !ids || level_of(c, ids, (size_t)l, &levels[l]) != 0;
        Py_XDECREF(ids);
    }
    bad = bad || py_tensor_get_any(q_obj, "query", 0, bf16, &t[0]) || py_tensor_get_any(out_obj, "out", 0, bf16, &t[1]) ||
          py_tensor_get_any(lse_obj, "lse", 1, 0, &t[2]) || py_product(&nq, c->batch, H, L, c->qk_dim) ||
          py_product(&no, c->batch, H, L, c->v_dim) || py_product(&nl, c->batch, H, L, 1) ||
          py_float_output(&t[0], "query", nq) || py_float_output(&t[1], "out", no) || py_float_output(&t[2], "lse", nl);
    const int device = bad ? 0 : py_tensors_on_device(pc, t, 3, names);
    bad = bad || device < 0;
    clattn_status st = CLATTN_SUCCESS;
    cl_mem m[3] = {NULL, NULL, NULL};
    if (!bad && device) {
        m[0] = t[0].mem, m[1] = t[1].mem, m[2] = t[2].mem;
    } else if (!bad) {
        m[0] = py_upload(pc, t[0].data, nq * sizeof(float), &st);
        m[1] = m[0] ? py_upload(pc, NULL, no * sizeof(float), &st) : NULL;
        m[2] = m[1] && t[2].capsule ? py_upload(pc, NULL, nl * sizeof(float), &st) : NULL;
    }
    char detail[2048] = "";
    if (!bad && m[1] && (m[2] || (!t[2].capsule && !t[2].mem))) {
        if (o.masks.causal != CLATTN_CAUSAL_NONE)
            o.masks.causal = CLATTN_CAUSAL_BOTTOM_RIGHT; /* (the queries: each sequence's last L own rows) */
        clattn_sdpa_desc d = pykv_desc(c, (size_t)H, (size_t)L);
        py_options_apply(&o, &d);
        d.kv_len = 0;
        const clattn_paged_cache p = pykv_paged_view(c);
        const cl_command_queue queue = clattn_context_queue(pc->ctx);
        CLATTN_CALL(pc, detail, {
            st = clattn_sdpa_cascade(pc->ctx, &d, &p, levels, (size_t)n_levels, c->lengths, m[0], m[1], m[2]);
            if (st == CLATTN_SUCCESS && !device)
                st = pykv_read_back(queue, t, m, no * sizeof(float), nl * sizeof(float));
        });
    }
    pykv_release(t, m, device);
    for (Py_ssize_t l = 0; l < n_levels; l++) {
        PyMem_Free((void *)levels[l].group_of);
        PyMem_Free((void *)levels[l].blocks);
    }
    py_options_free(&o);
    if (bad)
        return NULL;
    if (st != CLATTN_SUCCESS)
        return pyclattn_raise(st, *detail ? detail : "allocating the call's buffers");
    Py_RETURN_NONE;
}
