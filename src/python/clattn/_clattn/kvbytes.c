/* The storage formats as Python sees them (_clattn.formats(), the names a KVCache takes), and a KVCache's
 * buffers as bytes: read back whole (_read) and loaded whole (_load), so that a cache another program wrote
 * — ggml's q8_0 and q4_0 blocks, FP8 bytes — is attended over as it is. Names, blocks and sizes come from
 * the library (clattn_dtype_name, clattn_dtype_block, clattn_dtype_bytes); the two columns it has no
 * function for (row scales, K/V only) from its table of formats (src/base/formats.def), row by row. */
#include "kvcache.h"

#include "formats.def"

#include <string.h>

typedef struct format_rule {
    clattn_dtype type;
    int scales, kv_only, tokens;
} format_rule;

#define FORMAT_RULE(NAME, name, store, bits, block, block_bytes, scales, kv_only, tokens) {CLATTN_##NAME, scales, kv_only, tokens},
static const format_rule rules[] = {CLATTN_FORMATS(FORMAT_RULE)};
#undef FORMAT_RULE
enum { N_FORMATS = sizeof rules / sizeof rules[0] };

static const format_rule *rule_of(clattn_dtype t)
{
    for (size_t i = 0; i < N_FORMATS; i++)
        if (rules[i].type == t)
            return &rules[i];
    return NULL;
}

int pykv_scale_rule(clattn_dtype t)
{
    const format_rule *r = rule_of(t);
    return !r ? 0 : r->scales == ROW_SCALES_REQUIRED ? 1 : r->scales == ROW_SCALES_OPTIONAL ? 2 : 0;
}

int pykv_kv_only(clattn_dtype t)
{
    const format_rule *r = rule_of(t);
    return r && r->kv_only;
}

int pykv_dtype(const char *name, const char *what, clattn_dtype *out)
{
    const int t = clattn_dtype_from_name(name);
    if (t >= 0) {
        *out = (clattn_dtype)t;
        return 0;
    }
    char names[512] = "";
    for (size_t i = 0, used = 0; i < N_FORMATS && used < sizeof names; i++) {
        const int n = snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "", clattn_dtype_name(rules[i].type));
        used += n > 0 ? (size_t)n : 0;
    }
    PyErr_Format(PyExc_ValueError, "%s: '%s' is not a storage format (%s)", what, name, names);
    return -1;
}

PyObject *py_formats(PyObject *self, PyObject *unused)
{
    (void)self, (void)unused;
    static const char *const scales[3] = {"none", "required", "optional"};
    PyObject *all = PyTuple_New(N_FORMATS);
    for (size_t i = 0; all && i < N_FORMATS; i++) {
        const clattn_dtype t = rules[i].type;
        const size_t block = clattn_dtype_block(t);
        PyObject *row = Py_BuildValue("(snnsOn)", clattn_dtype_name(t), (Py_ssize_t)block,
                                      (Py_ssize_t)clattn_dtype_bytes(t, block), scales[pykv_scale_rule(t)],
                                      rules[i].kv_only ? Py_True : Py_False, (Py_ssize_t)rules[i].tokens);
        if (!row || PyTuple_SetItem(all, (Py_ssize_t)i, row) != 0) {
            Py_DECREF(all);
            return NULL;
        }
    }
    return all;
}

/* Buffer `which` (0 K, 1 V, 2 K's scales, 3 V's) and its bytes. */
static cl_mem buffer_of(const py_kvcache *c, int which, size_t *bytes)
{
    const cl_mem mems[4] = {c->k, c->v, c->k_scales, c->v_scales};
    const size_t chunks = c->batch * c->kv_heads * (c->block_size ? c->max_blocks : 1);
    *bytes = which < 2 ? chunks * (which ? c->v_head : c->k_head) : pykv_rows(c) * sizeof(float);
    return mems[which];
}

static PyObject *sizes_tuple(const size_t *v, size_t n)
{
    PyObject *t = PyTuple_New((Py_ssize_t)n);
    for (size_t i = 0; t && i < n; i++) {
        PyObject *x = PyLong_FromSize_t(v[i]);
        if (!x || PyTuple_SetItem(t, (Py_ssize_t)i, x) != 0) {
            Py_DECREF(t);
            return NULL;
        }
    }
    return t;
}

/* _read(which): (a bytearray of buffer `which` whole, or None where the cache has no such buffer; the
 * lengths; the block table as B · max_blocks ids (-1: none), or None for a dense cache) — read in one
 * critical section, so that no append lands between them. */
PyObject *pykv_read(PyObject *obj, PyObject *args)
{
    py_kvcache *c = (py_kvcache *)obj;
    py_context *pc = (py_context *)c->context;
    int which;
    if (!PyArg_ParseTuple(args, "i:_read", &which))
        return NULL;
    if (which < 0 || which > 3)
        return PyErr_Format(PyExc_ValueError, "_read: buffer %d (0 to 3)", which);
    size_t bytes;
    const cl_mem m = buffer_of(c, which, &bytes);
    PyObject *data = m ? PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)bytes) : NULL;
    char *dst = data ? PyByteArray_AsString(data) : NULL;
    size_t *lengths = PyMem_Malloc(c->batch * sizeof *lengths);
    size_t *table = c->block_size ? PyMem_Malloc(c->blocks * sizeof *table) : NULL;
    if ((m && !dst) || !lengths || (c->block_size && !table)) {
        Py_XDECREF(data);
        PyMem_Free(lengths);
        PyMem_Free(table);
        return PyErr_Occurred() ? NULL : PyErr_NoMemory();
    }
    clattn_status st = CLATTN_SUCCESS;
    char detail[2048] = "";
    const cl_command_queue queue = clattn_context_queue(pc->ctx);
    CLATTN_CALL(pc, detail, {
        if (m)
            st = (clattn_status)clEnqueueReadBuffer(queue, m, CL_TRUE, 0, bytes, dst, 0, NULL, NULL);
        memcpy(lengths, c->lengths, c->batch * sizeof *lengths);
        for (size_t i = 0; table && i < c->blocks; i++) /* (-1 as SIZE_MAX: turned back below) */
            table[i] = c->host_table[i] < 0 ? SIZE_MAX : (size_t)c->host_table[i];
    });
    PyObject *result = NULL;
    if (st != CLATTN_SUCCESS) {
        pyclattn_raise(st, "reading the KV cache's buffer back (clEnqueueReadBuffer)");
    } else {
        PyObject *lt = sizes_tuple(lengths, c->batch), *tt = NULL;
        if (lt && table && (tt = PyTuple_New((Py_ssize_t)c->blocks)) != NULL)
            for (size_t i = 0; i < c->blocks; i++) {
                PyObject *x = table[i] == SIZE_MAX ? PyLong_FromLong(-1) : PyLong_FromSize_t(table[i]);
                if (!x || PyTuple_SetItem(tt, (Py_ssize_t)i, x) != 0) {
                    Py_CLEAR(tt);
                    break;
                }
            }
        if (lt && (tt || !table))
            result = Py_BuildValue("(OOO)", data ? data : Py_None, lt, tt ? tt : Py_None);
        Py_XDECREF(lt);
        Py_XDECREF(tt);
    }
    Py_XDECREF(data);
    PyMem_Free(lengths);
    PyMem_Free(table);
    return result;
}

/* One array of _load: exactly `bytes` bytes of uint8 (K, V) or float32 (scales), or None where the cache
 * has no such buffer (and only there). */
static int load_array(PyObject *obj, const char *name, int is_float, size_t bytes, int wanted, py_tensor *t)
{
    if (py_tensor_get(obj, name, 1, 0, t) != 0)
        return -1;
    if (!t->capsule && !wanted)
        return 0;
    if (!t->capsule || !wanted) {
        py_tensor_release(t);
        PyErr_Format(PyExc_ValueError, wanted ? "%s: the cache has row scales: give them"
                                              : "%s: the cache has no row scales (its format takes none, or it was "
                                                "made without scaled=True)", name);
        return -1;
    }
    const int ok = is_float ? (t->kind == 'f' && t->dtype == CLATTN_FLOAT32) : (t->kind == 'u' && t->elem_size == 1);
    if (!ok || t->elems * t->elem_size != bytes) {
        PyErr_Format(ok ? PyExc_ValueError : PyExc_TypeError, "%s: %s of %zu bytes, the cache's buffer (got %zu)", name,
                     is_float ? "float32" : "uint8", bytes, t->elems * t->elem_size);
        py_tensor_release(t);
        return -1;
    }
    return 0;
}

/* _load(k, v, k_scales, v_scales, lengths, table): every buffer whole (the pools of a paged cache), the
 * lengths, and for a paged cache its block table (B · max_blocks ids, -1 for none; every row below a
 * length in a block, no block twice) — written in one critical section; nothing changes when a check
 * fails. */
PyObject *pykv_load(PyObject *obj, PyObject *args)
{
    py_kvcache *c = (py_kvcache *)obj;
    py_context *pc = (py_context *)c->context;
    PyObject *objs[4], *lengths_obj, *table_obj;
    if (!PyArg_ParseTuple(args, "OOOOOO:_load", &objs[0], &objs[1], &objs[2], &objs[3], &lengths_obj, &table_obj))
        return NULL;
    static const char *const names[4] = {"k", "v", "k_scales", "v_scales"};
    py_tensor t[4] = {{0}};
    size_t bytes[4], *lengths = NULL;
    long long *table = NULL;
    cl_mem mems[4];
    int bad = 0;
    for (int i = 0; i < 4 && !bad; i++) {
        mems[i] = buffer_of(c, i, &bytes[i]);
        bad = load_array(objs[i], names[i], i >= 2, bytes[i], mems[i] != NULL, &t[i]);
    }
    bad = bad || py_sizes_from_sequence(lengths_obj, "lengths", c->batch, &lengths) != 0 ||
          (c->block_size && py_longs_from_sequence(table_obj, "table", c->blocks, &table) != 0);
    for (size_t b = 0; !bad && b < c->batch; b++)
        if (lengths[b] > c->capacity) {
            PyErr_Format(PyExc_ValueError, "lengths[%zu] = %zu passes the capacity %zu", b, lengths[b], c->capacity);
            bad = 1;
        }
    size_t next = 0;
    unsigned char *seen = table && !bad ? PyMem_Calloc(c->blocks, 1) : NULL;
    if (table && !bad && !seen)
        bad = (PyErr_NoMemory(), 1);
    for (size_t i = 0; !bad && table && i < c->blocks; i++) { /* ids in the pool, none twice, rows covered */
        const size_t b = i / c->max_blocks, j = i % c->max_blocks;
        const long long id = table[i];
        const char *why = id < -1 || id >= (long long)c->blocks ? "not a block of the pool"
                          : id >= 0 && seen[id]                   ? "a block given twice"
                          : id < 0 && j * c->block_size < lengths[b] ? "rows below the length without a block"
                                                                     : NULL;
        if (why) {
            PyErr_Format(PyExc_ValueError, "table[%zu][%zu] = %lld: %s", b, j, id, why);
            bad = 1;
        } else if (id >= 0) {
            seen[id] = 1;
            next = (size_t)id + 1 > next ? (size_t)id + 1 : next;
        }
    }
    PyMem_Free(seen);
    clattn_status st = CLATTN_SUCCESS;
    char detail[2048] = "";
    if (!bad) {
        const cl_command_queue queue = clattn_context_queue(pc->ctx);
        CLATTN_CALL(pc, detail, {
            for (int i = 0; i < 4 && st == CLATTN_SUCCESS; i++)
                if (mems[i])
                    st = (clattn_status)clEnqueueWriteBuffer(queue, mems[i], CL_TRUE, 0, bytes[i], t[i].data, 0, NULL,
                                                             NULL);
            for (size_t i = 0; table && i < c->blocks; i++)
                c->host_table[i] = (int)table[i];
            if (st == CLATTN_SUCCESS && table)
                st = (clattn_status)clEnqueueWriteBuffer(queue, c->table, CL_TRUE, 0, c->blocks * sizeof(int),
                                                         c->host_table, 0, NULL, NULL);
            if (st == CLATTN_SUCCESS) {
                memcpy(c->lengths, lengths, c->batch * sizeof *lengths);
                c->next_block = next;
            } else { /* (the bytes may be half written: the cache is emptied rather than left to read them) */
                memset(c->lengths, 0, c->batch * sizeof *c->lengths);
                for (size_t i = 0; c->block_size && i < c->blocks; i++)
                    c->host_table[i] = -1;
                c->next_block = 0;
            }
        });
    }
    for (int i = 0; i < 4; i++)
        py_tensor_release(&t[i]);
    PyMem_Free(lengths);
    PyMem_Free(table);
    if (bad)
        return NULL;
    if (st != CLATTN_SUCCESS)
        return pyclattn_raise(st, "writing the KV cache's buffers (clEnqueueWriteBuffer)");
    Py_RETURN_NONE;
}
