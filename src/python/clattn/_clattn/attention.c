/* The attention calls of clattn._clattn: sdpa (clattn_sdpa_host), mha (clattn_mha_host) and merge
 * (clattn_merge). Each reads its tensors (tensors.c), checks their sizes against the shape it is given —
 * the one thing the library cannot check of host pointers —, fills the descriptor and runs the call
 * with the GIL released; the library checks everything else and its detail becomes clattn.Error's. */
#include "pyclattn.h"
#include "call_options.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void py_options_free(call_options *o)
{
    for (size_t i = 0; i < o->n_owned; i++)
        PyMem_Free(o->owned[i]);
    memset(o, 0, sizeof *o);
}

/* Which kinds of call_options.def a keyword gives (1) and which the shape, tensors or mods do (0). */
#define PY_READABLE_OPT_SCALE 1
#define PY_READABLE_OPT_CAP 1
#define PY_READABLE_OPT_PER_HEAD 1
#define PY_READABLE_OPT_ENUM 1
#define PY_READABLE_OPT_LENGTHS 1
#define PY_READABLE_OPT_OFFSETS 1
#define PY_READABLE_OPT_WINDOW 1
#define PY_READABLE_OPT_SIZE 1
#define PY_READABLE_OPT_TREE 1
#define PY_READABLE_OPT_DIM 0
#define PY_READABLE_OPT_DIM0 0
#define PY_READABLE_OPT_KV_HEADS 0
#define PY_READABLE_OPT_RESERVED 0
#define PY_READABLE_OPT_DTYPE 0
#define PY_READABLE_OPT_BUFFER 0
#define PY_READABLE_OPT_MASKS 0
#define PY_READABLE_OPT_MODS 0
#define PY_READABLE_OPT_BLOCK_MASK 0
#define PY_READABLE_OPT_ORIGIN 0
#define PY_CAT_(a, b) a##b
#define PY_CAT(a, b) PY_CAT_(a, b)
#define PY_IF_0(...)
#define PY_IF_1(...) __VA_ARGS__
#define PY_IF_READABLE(kind, ...) PY_CAT(PY_IF_, PY_READABLE_##kind)(__VA_ARGS__)

/* The keywords: every row of a readable kind. */
static const char *const keywords[] = {
#define CLATTN_OPTION(name, kind, ...) PY_IF_READABLE(kind, #name, )
#define CLATTN_MASKS_OPTION CLATTN_OPTION
#include "call_options.def"
#undef CLATTN_OPTION
#undef CLATTN_MASKS_OPTION
    NULL};

static int own(call_options *o, void *p)
{
    if (p && o->n_owned < sizeof o->owned / sizeof o->owned[0])
        o->owned[o->n_owned++] = p;
    else if (p) {
        PyMem_Free(p);
        PyErr_SetString(PyExc_RuntimeError, "clattn: too many option arrays");
        return -1;
    }
    return 0;
}

static int read_float(PyObject *v, const char *name, float *out)
{
    const double d = PyFloat_AsDouble(v);
    if (d == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s must be a number", name);
        return -1;
    }
    *out = (float)d;
    return 0;
}

static int read_long(PyObject *v, const char *name, long long *out)
{
    *out = PyLong_AsLongLong(v);
    if (*out == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s must be an integer", name);
        return -1;
    }
    return 0;
}

/* A tree's parents: as many as given (the call's rows are not known yet: py_options_check_rows). */
static int read_tree(PyObject *v, const char *name, call_options *o, const int **f)
{
    const Py_ssize_t n = PyObject_Length(v);
    if (n < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s must be a sequence of parents", name);
        return -1;
    }
    int *ints = NULL;
    if (py_ints_from_sequence(v, name, (size_t)n, &ints) != 0 || own(o, ints) != 0)
        return -1;
    o->tree_count = (size_t)n;
    *f = ints;
    return 0;
}

int py_options_check_rows(const call_options *o, size_t rows)
{
    if (o->masks.tree_parents && o->tree_count != rows) {
        PyErr_Format(PyExc_ValueError, "tree holds %zu parents; the call has %zu query rows", o->tree_count, rows);
        return -1;
    }
    return 0;
}

/* Each readable kind's reading of keyword value v (not None unless said) into field f. */
#define PY_READ_OPT_SCALE(v, name, f)                                                                            \
    (v == Py_None ? ((f) = CLATTN_SCALE_DEFAULT, 0) : read_float(v, name, &(f)))
#define PY_READ_OPT_CAP(v, name, f) (v == Py_None ? 0 : read_float(v, name, &(f)))
#define PY_READ_OPT_ENUM(v, name, f) (read_long(v, name, &n) ? -1 : ((f) = n, 0))
#define PY_READ_OPT_SIZE(v, name, f)                                                                             \
    (read_long(v, name, &n) ? -1 : n < 0 ? (PyErr_Format(PyExc_ValueError, "%s is negative", name), -1)         \
                                         : ((f) = (size_t)n, 0))
#define PY_READ_OPT_PER_HEAD(v, name, f)                                                                         \
    (py_floats_from_sequence(v, name, heads, &floats) || own(o, floats) ? -1 : ((f) = floats, 0))
#define PY_READ_OPT_LENGTHS(v, name, f)                                                                          \
    (py_sizes_from_sequence(v, name, batch, &sizes) || own(o, sizes) ? -1 : ((f) = sizes, 0))
#define PY_READ_OPT_OFFSETS(v, name, f)                                                                          \
    (py_longs_from_sequence(v, name, batch, &longs) || own(o, longs) ? -1 : ((f) = longs, 0))
#define PY_READ_OPT_TREE(v, name, f) (v == Py_None ? 0 : read_tree(v, name, o, &(f)))
#define PY_READ_OPT_WINDOW(v, name, f)                                                                           \
    (v == Py_None ? 0                                                                                            \
                  : !PyArg_ParseTuple(v, "LL:window", &o->window.left, &o->window.right) ? -1                    \
                                                                                         : ((f) = &o->window, 0))

int py_options_read(PyObject *kwargs, size_t batch, size_t heads, call_options *o)
{
    memset(o, 0, sizeof *o);
    o->desc = (clattn_sdpa_desc)CLATTN_SDPA_DESC_INIT;
    o->masks = (clattn_masks)CLATTN_MASKS_INIT;
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (kwargs && PyDict_Next(kwargs, &pos, &key, &value)) {
        size_t i = 0;
        while (PyUnicode_Check(key) && keywords[i] && PyUnicode_CompareWithASCIIString(key, keywords[i]) != 0)
            i++;
        if (!PyUnicode_Check(key) || !keywords[i]) {
            PyErr_Format(PyExc_TypeError, "an attention call takes no option %R", key);
            return -1;
        }
    }
    long long n = 0;
    float *floats = NULL;
    size_t *sizes = NULL;
    long long *longs = NULL;
    PyObject *v;
    int bad = 0;
#define CLATTN_OPTION(name, kind, ...)                                                                           \
    PY_IF_READABLE(kind, if (!bad && kwargs && (v = PyDict_GetItemString(kwargs, #name)) != NULL)                \
                             bad = PY_READ_##kind(v, #name, o->desc.name);)
#define CLATTN_MASKS_OPTION(name, kind, ...)                                                                     \
    PY_IF_READABLE(kind, if (!bad && kwargs && (v = PyDict_GetItemString(kwargs, #name)) != NULL)                \
                             bad = PY_READ_##kind(v, #name, o->masks.name);)
#include "call_options.def"
#undef CLATTN_OPTION
#undef CLATTN_MASKS_OPTION
    (void)n;
    if (bad) {
        py_options_free(o);
        return -1;
    }
    return 0;
}

void py_options_apply(const call_options *o, clattn_sdpa_desc *d)
{
#define CLATTN_OPTION(name, kind, ...) PY_IF_READABLE(kind, d->name = o->desc.name;)
#include "call_options.def"
#undef CLATTN_OPTION
    d->masks = &o->masks;
}

/* a·b·c·d with overflow refused (ValueError). */
int py_product(size_t *out, size_t a, size_t b, size_t c, size_t d)
{
    const size_t f[4] = {a, b, c, d};
    size_t p = 1;
    for (int i = 0; i < 4; i++) {
        if (f[i] && p > SIZE_MAX / f[i]) {
            PyErr_SetString(PyExc_ValueError, "the call's shape overflows a size_t");
            return -1;
        }
        p *= f[i];
    }
    *out = p;
    return 0;
}

/* The additive mask's elements for its layout (cols: its last dimension), and its type into masks. */
static int mask_take(const py_tensor *m, call_options *o, size_t batch, size_t heads, size_t q_len, size_t kv_len)
{
    if (!m->capsule && !m->mem)
        return 0;
    const size_t cols = o->masks.mask_kv_len ? o->masks.mask_kv_len : kv_len;
    size_t elems = 0;
    int bad = 0;
    switch (o->masks.additive) {
    case CLATTN_MASK_L_S: bad = py_product(&elems, q_len, cols, 1, 1); break;
    case CLATTN_MASK_B_H_L_S: bad = py_product(&elems, batch, heads, q_len, cols); break;
    case CLATTN_MASK_B_1_L_S: bad = py_product(&elems, batch, q_len, cols, 1); break;
    case CLATTN_MASK_1_H_L_S: bad = py_product(&elems, heads, q_len, cols, 1); break;
    case CLATTN_MASK_B_1_1_S: bad = py_product(&elems, batch, cols, 1, 1); break;
    default: PyErr_Format(PyExc_ValueError, "mask layout %d is not one clattn reads", (int)o->masks.additive); return -1;
    }
    if (bad || py_tensor_expect(m, "attn_mask", elems, 1))
        return -1;
    o->masks.mask_type = m->kind == 'b'                  ? CLATTN_MASK_BOOL
                         : m->dtype == CLATTN_FLOAT16    ? CLATTN_MASK_FLOAT16
                         : m->dtype == CLATTN_BFLOAT16   ? CLATTN_MASK_BFLOAT16
                                                         : CLATTN_MASK_FLOAT;
    return 0;
}

/* A float32 output (lse, weights) of exactly `elems` elements, or None. */
int py_float_output(const py_tensor *t, const char *name, size_t elems)
{
    if (!t->capsule && !t->mem)
        return 0;
    if (t->kind != 'f' || t->dtype != CLATTN_FLOAT32) {
        PyErr_Format(PyExc_TypeError, "%s must be float32", name);
        return -1;
    }
    return py_tensor_expect(t, name, elems, 0);
}

static void release_all(py_tensor *t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        py_tensor_release(&t[i]);
}

/* What sdpa and mha start with: the call's mods and options, then its n tensors (optional[i]: None
 * allowed; device arrays too where *on_device is not NULL, which then says whether they are). 0, or -1 with
 * a Python exception and nothing held. */
static int call_begin(py_context *pc, PyObject *mods_obj, PyObject *kwargs, size_t batch, size_t heads, int n,
                      PyObject *const *obj, const char *const *names, const int *optional, int bf16, py_tensor *t,
                      call_options *o, mods_staged *mods, int *on_device)
{
    memset(t, 0, (size_t)n * sizeof *t);
    if (pyclattn_mods_stage(mods_obj, pc, mods) != 0)
        return -1;
    if (py_options_read(kwargs, batch, heads, o) != 0) {
        pyclattn_mods_release(mods);
        return -1;
    }
    int bad = 0;
    for (int i = 0; i < n && !bad; i++)
        bad = (on_device ? py_tensor_get_any : py_tensor_get)(obj[i], names[i], optional[i], bf16, &t[i]) != 0;
    if (!bad && on_device)
        bad = (*on_device = py_tensors_on_device(pc, t, (size_t)n, names)) < 0;
    if (bad) {
        release_all(t, (size_t)n);
        py_options_free(o);
        pyclattn_mods_release(mods);
        return -1;
    }
    return 0;
}

/* What every call ends with, failed or not: its tensors, mods' staged aux and options released, then
 * clattn.Error with the library's detail, or None (st: the call's status; CLATTN_SUCCESS with a Python
 * error set on a check). */
static PyObject *call_end(py_tensor *t, size_t n, call_options *o, mods_staged *mods, clattn_status st,
                          const char *detail)
{
    release_all(t, n);
    py_options_free(o);
    pyclattn_mods_release(mods);
    if (PyErr_Occurred())
        return NULL;
    if (st != CLATTN_SUCCESS)
        return pyclattn_raise(st, detail);
    Py_RETURN_NONE;
}

/* The SDPA descriptor of a call's shape (B, H, kv_heads, L, S, Dqk, Dv), options, mods and block mask. */
static clattn_sdpa_desc sdpa_desc_of(const Py_ssize_t *dims, const call_options *o, const mods_staged *mods)
{
    clattn_sdpa_desc d = CLATTN_SDPA_DESC_INIT;
    d.batch = (size_t)dims[0], d.heads = (size_t)dims[1], d.kv_heads = (size_t)dims[2];
    d.q_len = (size_t)dims[3], d.kv_len = (size_t)dims[4], d.qk_dim = (size_t)dims[5], d.v_dim = (size_t)dims[6];
    py_options_apply(o, &d);
    d.mods = mods->mods;
    d.block_mask = mods->block_mask;
    return d;
}

PyObject *py_sdpa(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    PyObject *ctx_obj, *obj[7], *shape, *mods_obj;
    int bf16 = 0;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOp:sdpa", &ctx_obj, &obj[0], &obj[1], &obj[2], &obj[3], &obj[4], &obj[5],
                          &obj[6], &shape, &mods_obj, &bf16))
        return NULL;
    py_context *pc = pyclattn_context(ctx_obj, "context");
    Py_ssize_t B, H, KVH, L, S, D, DV;
    if (!pc || !PyArg_ParseTuple(shape, "nnnnnnn:shape", &B, &H, &KVH, &L, &S, &D, &DV))
        return NULL;
    if (B < 0 || H < 0 || KVH < 0 || L < 0 || S < 0 || D < 0 || DV < 0) {
        PyErr_SetString(PyExc_ValueError, "a dimension of the call is negative");
        return NULL;
    }
    static const char *const names[7] = {"query", "key", "value", "out", "lse", "attn_mask", "weights"};
    static const int optional[7] = {0, 0, 0, 0, 1, 1, 1};
    py_tensor t[7];
    call_options o;
    mods_staged mods;
    int device = 0;
    if (call_begin(pc, mods_obj, kwargs, (size_t)B, (size_t)H, 7, obj, names, optional, bf16, t, &o, &mods, &device) != 0)
        return NULL;
    size_t nq, nk, nv, no, nl, nw;
    const int bad = py_product(&nq, B, H, L, D) || py_product(&nk, B, KVH, S, D) || py_product(&nv, B, KVH, S, DV) ||
                    py_product(&no, B, H, L, DV) || py_product(&nl, B, H, L, 1) || py_product(&nw, B, H, L, S) ||
                    py_tensor_expect(&t[0], "query", nq, 0) || py_tensor_expect(&t[1], "key", nk, 0) ||
                    py_tensor_expect(&t[2], "value", nv, 0) || py_tensor_expect(&t[3], "out", no, 0) ||
                    py_float_output(&t[4], "lse", nl) || py_float_output(&t[6], "weights", nw) ||
                    mask_take(&t[5], &o, B, H, L, S) || py_options_check_rows(&o, (size_t)B * (size_t)L);
    if (bad)
        return call_end(t, 7, &o, &mods, CLATTN_SUCCESS, NULL);
    const Py_ssize_t dims[7] = {B, H, KVH, L, S, D, DV};
    clattn_sdpa_desc d = sdpa_desc_of(dims, &o, &mods);
    d.q_dtype = t[0].dtype, d.k_dtype = t[1].dtype, d.v_dtype = t[2].dtype, d.out_dtype = t[3].dtype;
    clattn_status st;
    char detail[2048];
    CLATTN_CALL(pc, detail, {
        st = pyclattn_mods_write(&mods, pc); /* (the aux and the call: one critical section) */
        if (st == CLATTN_SUCCESS && device) /* (enqueued on the context's queue: no wait) */
            st = clattn_sdpa(pc->ctx, &d, t[0].mem, t[1].mem, t[2].mem, t[5].mem, t[3].mem, t[6].mem, t[4].mem);
        else if (st == CLATTN_SUCCESS)
            st = clattn_sdpa_host(pc->ctx, &d, t[0].data, t[1].data, t[2].data, t[5].data, t[3].data,
                                  (float *)t[6].data, (float *)t[4].data);
    });
    return call_end(t, 7, &o, &mods, st, detail);
}

PyObject *py_sdpa_backward(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    enum { Q, K, V, OUT, LSE, DOUT, DQ, DK, DV, MASK, N };
    static const char *const names[N] = {"query", "key", "value", "out", "lse", "grad_out", "dq", "dk", "dv",
                                         "attn_mask"};
    static const int optional[N] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    PyObject *ctx_obj, *obj[N], *shape, *mods_obj, *dsinks_obj = Py_None;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOO|O:sdpa_backward", &ctx_obj, &obj[Q], &obj[K], &obj[V], &obj[OUT],
                          &obj[LSE], &obj[DOUT], &obj[DQ], &obj[DK], &obj[DV], &obj[MASK], &shape, &mods_obj,
                          &dsinks_obj))
        return NULL;
    py_context *pc = pyclattn_context(ctx_obj, "context");
    Py_ssize_t B, H, KVH, L, S, D, DV_;
    if (!pc || !PyArg_ParseTuple(shape, "nnnnnnn:shape", &B, &H, &KVH, &L, &S, &D, &DV_))
        return NULL;
    if (B < 0 || H < 0 || KVH < 0 || L < 0 || S < 0 || D < 0 || DV_ < 0) {
        PyErr_SetString(PyExc_ValueError, "a dimension of the call is negative");
        return NULL;
    }
    py_tensor t[N];
    call_options o;
    mods_staged mods;
    int device = 0;
    if (call_begin(pc, mods_obj, kwargs, (size_t)B, (size_t)H, N, obj, names, optional, 0, t, &o, &mods, &device) != 0)
        return NULL;
    size_t nq, nk, nv, no, nl;
    int bad = py_product(&nq, B, H, L, D) || py_product(&nk, B, KVH, S, D) || py_product(&nv, B, KVH, S, DV_) ||
              py_product(&no, B, H, L, DV_) || py_product(&nl, B, H, L, 1);
    const size_t elems[9] = {nq, nk, nv, no, nl, no, nq, nk, nv};
    for (int i = 0; i < 9 && !bad; i++) /* (the backward pass takes float32 tensors) */
        bad = py_float_output(&t[i], names[i], elems[i]);
    bad = bad || mask_take(&t[MASK], &o, B, H, L, S) || py_options_check_rows(&o, (size_t)B * (size_t)L);
    /* The sinks' gradient (heads floats, on the host for either kind of call), when asked for. */
    py_tensor dsinks = {0};
    bad = bad || py_tensor_get(dsinks_obj, "dsinks", 1, 0, &dsinks) || py_float_output(&dsinks, "dsinks", (size_t)H);
    if (bad) {
        py_tensor_release(&dsinks);
        return call_end(t, N, &o, &mods, CLATTN_SUCCESS, NULL);
    }
    const Py_ssize_t dims[7] = {B, H, KVH, L, S, D, DV_};
    const clattn_sdpa_desc d = sdpa_desc_of(dims, &o, &mods);
    clattn_status st;
    char detail[2048];
    CLATTN_CALL(pc, detail, {
        st = pyclattn_mods_write(&mods, pc);
        if (st == CLATTN_SUCCESS && device)
            st = clattn_sdpa_backward(pc->ctx, &d, t[Q].mem, t[K].mem, t[V].mem, t[MASK].mem, t[OUT].mem, t[LSE].mem,
                                      t[DOUT].mem, t[DQ].mem, t[DK].mem, t[DV].mem, dsinks.data);
        else if (st == CLATTN_SUCCESS)
            st = clattn_sdpa_backward_host(pc->ctx, &d, t[Q].data, t[K].data, t[V].data, t[MASK].data, t[OUT].data,
                                           t[LSE].data, t[DOUT].data, t[DQ].data, t[DK].data, t[DV].data, dsinks.data);
    });
    py_tensor_release(&dsinks);
    return call_end(t, N, &o, &mods, st, detail);
}

PyObject *py_mha(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    /* x, kv, out, w_q, b_q, w_k, b_k, w_v, b_v, w_o, b_o, mask, weights */
    enum { X, KV, OUT, WQ, BQ, WK, BK, WV, BV, WO, BO, MASK, WEIGHTS, N };
    static const char *const names[N] = {"x", "kv", "out", "w_q", "b_q", "w_k", "b_k", "w_v", "b_v", "w_o", "b_o",
                                         "attn_mask", "weights"};
    PyObject *ctx_obj, *obj[N], *shape, *mods_obj;
    int bf16 = 0;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOOOOOp:mha", &ctx_obj, &obj[X], &obj[KV], &obj[OUT], &obj[WQ], &obj[BQ],
                          &obj[WK], &obj[BK], &obj[WV], &obj[BV], &obj[WO], &obj[BO], &obj[MASK], &obj[WEIGHTS], &shape,
                          &mods_obj, &bf16))
        return NULL;
    py_context *pc = pyclattn_context(ctx_obj, "context");
    Py_ssize_t B, L, S, DM, DKV, H, KVH, DK, DV, DOUT;
    if (!pc || !PyArg_ParseTuple(shape, "nnnnnnnnnn:shape", &B, &L, &S, &DM, &DKV, &H, &KVH, &DK, &DV, &DOUT))
        return NULL;
    if (B < 0 || L < 0 || S < 0 || DM < 0 || DKV < 0 || H < 0 || KVH < 0 || DK < 0 || DV < 0 || DOUT < 0) {
        PyErr_SetString(PyExc_ValueError, "a dimension of the layer is negative");
        return NULL;
    }
    int optional[N];
    for (int i = 0; i < N; i++)
        optional[i] = i != X && i != OUT && i != WQ && i != WK && i != WV;
    py_tensor t[N];
    call_options o;
    mods_staged mods;
    if (call_begin(pc, mods_obj, kwargs, (size_t)B, (size_t)H, N, obj, names, optional, bf16, t, &o, &mods, NULL) != 0)
        return NULL;
    const size_t hk = (size_t)H * DK, hv = (size_t)H * DV, kk = (size_t)KVH * DK, kvv = (size_t)KVH * DV;
    const int wo = t[WO].capsule != NULL;
    size_t n[N] = {0};
    int bad = py_product(&n[X], B, L, DM, 1) || py_product(&n[KV], B, S, DKV, 1) ||
              py_product(&n[OUT], B, L, wo ? (size_t)DOUT : hv, 1) || py_product(&n[WQ], DM, hk, 1, 1) ||
              py_product(&n[WK], DKV, kk, 1, 1) || py_product(&n[WV], DKV, kvv, 1, 1) || py_product(&n[WO], hv, DOUT, 1, 1) ||
              py_product(&n[WEIGHTS], B, H, L, S);
    n[BQ] = hk, n[BK] = kk, n[BV] = kvv, n[BO] = (size_t)DOUT;
    for (int i = 0; i < N && !bad; i++)
        if (i != MASK && i != WEIGHTS && t[i].capsule)
            bad = py_tensor_expect(&t[i], names[i], n[i], 0);
    bad = bad || py_float_output(&t[WEIGHTS], "weights", n[WEIGHTS]) || mask_take(&t[MASK], &o, B, H, L, S) ||
          py_options_check_rows(&o, (size_t)B * (size_t)L);
    for (int i = BQ; i <= BO && !bad; i++) /* (the weights share one type, as the library takes them) */
        if (t[i].capsule && t[i].dtype != t[WQ].dtype) {
            PyErr_Format(PyExc_TypeError, "%s is %s but w_q is %s: the weights and biases share one type", names[i],
                         clattn_dtype_name(t[i].dtype), clattn_dtype_name(t[WQ].dtype));
            bad = 1;
        }
    if (!bad && t[KV].capsule && t[KV].dtype != t[X].dtype) {
        PyErr_SetString(PyExc_TypeError, "kv must have x's type");
        bad = 1;
    }
    if (bad)
        return call_end(t, N, &o, &mods, CLATTN_SUCCESS, NULL);
    clattn_mha_desc d = CLATTN_MHA_DESC_INIT;
    clattn_sdpa_desc options = CLATTN_SDPA_DESC_INIT;
    py_options_apply(&o, &options);
    call_options_sdpa_to_mha(&d, &options); /* the options, by the table (the shape follows) */
    d.batch = (size_t)B, d.q_len = (size_t)L, d.kv_len = t[KV].capsule ? (size_t)S : 0;
    d.model_dim = (size_t)DM, d.kv_dim = t[KV].capsule ? (size_t)DKV : 0;
    d.heads = (size_t)H, d.kv_heads = (size_t)KVH, d.qk_dim = (size_t)DK, d.v_dim = (size_t)DV;
    d.out_dim = (size_t)DOUT;
    d.x_dtype = t[X].dtype, d.weight_dtype = t[WQ].dtype, d.out_dtype = t[OUT].dtype;
    d.mods = mods.mods;
    d.block_mask = mods.block_mask;
    clattn_mha_host_weights w = CLATTN_MHA_HOST_WEIGHTS_INIT;
    w.w_q = t[WQ].data, w.b_q = t[BQ].data, w.w_k = t[WK].data, w.b_k = t[BK].data;
    w.w_v = t[WV].data, w.b_v = t[BV].data, w.w_o = t[WO].data, w.b_o = t[BO].data;
    clattn_status st;
    char detail[2048];
    CLATTN_CALL(pc, detail, {
        st = pyclattn_mods_write(&mods, pc);
        if (st == CLATTN_SUCCESS)
            st = clattn_mha_host(pc->ctx, &d, t[X].data, t[KV].data, &w, t[MASK].data, t[OUT].data,
                                 (float *)t[WEIGHTS].data);
    });
    return call_end(t, N, &o, &mods, st, detail);
}

cl_mem py_upload(py_context *pc, const void *data, size_t bytes, clattn_status *st)
{
    cl_int err;
    cl_mem m = clCreateBuffer(clattn_context_cl_context(pc->ctx), CL_MEM_READ_WRITE | (data ? CL_MEM_COPY_HOST_PTR : 0),
                              bytes, (void *)data, &err);
    *st = (clattn_status)err;
    return err == CL_SUCCESS ? m : NULL;
}

PyObject *py_merge(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    (void)kwargs;
    PyObject *ctx_obj, *outs_obj, *lses_obj, *out_obj, *lse_obj, *shape, *sinks_obj;
    if (!PyArg_ParseTuple(args, "OOOOOOO:merge", &ctx_obj, &outs_obj, &lses_obj, &out_obj, &lse_obj, &shape, &sinks_obj))
        return NULL;
    py_context *pc = pyclattn_context(ctx_obj, "context");
    Py_ssize_t B, H, L, DV;
    if (!pc || !PyArg_ParseTuple(shape, "nnnn:shape", &B, &H, &L, &DV))
        return NULL;
    const Py_ssize_t parts = PySequence_Size(outs_obj);
    if (parts < 1 || parts > 64 || PySequence_Size(lses_obj) != parts) {
        PyErr_Clear();
        PyErr_SetString(PyExc_ValueError, "outputs and lses: 1 to 64 parts, as many of each");
        return NULL;
    }
    size_t no, nl;
    if (B < 0 || H < 0 || L < 0 || DV < 0 || py_product(&no, B, H, L, DV) || py_product(&nl, B, H, L, 1)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "a dimension is negative");
        return NULL;
    }
    float *sinks = NULL;
    if (py_floats_from_sequence(sinks_obj, "sinks", (size_t)H, &sinks) != 0)
        return NULL;
    py_tensor out = {0}, lse = {0}, part = {0};
    cl_mem mems[2 * 64 + 2] = {NULL};
    clattn_status st = CLATTN_SUCCESS;
    int bad = py_tensor_get(out_obj, "out", 0, 0, &out) || py_float_output(&out, "out", no);
    bad = bad || py_tensor_get(lse_obj, "lse", 0, 0, &lse) || py_float_output(&lse, "lse", nl);
    for (Py_ssize_t p = 0; p < parts && !bad && st == CLATTN_SUCCESS; p++)
        for (int which = 0; which < 2 && !bad && st == CLATTN_SUCCESS; which++) {
            PyObject *item = PySequence_GetItem(which ? lses_obj : outs_obj, p);
            char name[32];
            snprintf(name, sizeof name, "%s[%zd]", which ? "lses" : "outputs", p);
            bad = !item || py_tensor_get(item, name, 0, 0, &part) || py_float_output(&part, name, which ? nl : no);
            Py_XDECREF(item);
            if (!bad)
                mems[2 * p + which] = py_upload(pc, part.data, (which ? nl : no) * sizeof(float), &st);
            py_tensor_release(&part); /* (refused or uploaded: the caller's array is not kept either way) */
        }
    if (!bad && st == CLATTN_SUCCESS)
        mems[2 * parts] = py_upload(pc, NULL, no * sizeof(float), &st);
    if (!bad && st == CLATTN_SUCCESS)
        mems[2 * parts + 1] = py_upload(pc, NULL, nl * sizeof(float), &st);
    char detail[2048] = "";
    if (!bad && st == CLATTN_SUCCESS) {
        cl_mem outs[64], lses[64];
        for (Py_ssize_t p = 0; p < parts; p++)
            outs[p] = mems[2 * p], lses[p] = mems[2 * p + 1];
        clattn_sdpa_desc d = CLATTN_SDPA_DESC_INIT;
        d.batch = (size_t)B, d.heads = (size_t)H, d.q_len = (size_t)L, d.qk_dim = d.v_dim = (size_t)DV;
        d.sinks = sinks;
        const cl_command_queue queue = clattn_context_queue(pc->ctx);
        CLATTN_CALL(pc, detail, {
            st = clattn_merge(pc->ctx, &d, (size_t)parts, outs, lses, mems[2 * parts], mems[2 * parts + 1]);
            if (st == CLATTN_SUCCESS)
                st = (clattn_status)clEnqueueReadBuffer(queue, mems[2 * parts], CL_TRUE, 0, no * sizeof(float),
                                                        out.data, 0, NULL, NULL);
            if (st == CLATTN_SUCCESS)
                st = (clattn_status)clEnqueueReadBuffer(queue, mems[2 * parts + 1], CL_TRUE, 0, nl * sizeof(float),
                                                        lse.data, 0, NULL, NULL);
        });
    }
    for (size_t i = 0; i < sizeof mems / sizeof mems[0]; i++)
        if (mems[i])
            clReleaseMemObject(mems[i]);
    py_tensor_release(&out);
    py_tensor_release(&lse);
    PyMem_Free(sinks);
    if (bad)
        return NULL;
    if (st != CLATTN_SUCCESS)
        return pyclattn_raise(st, *detail ? detail : "allocating the merge's buffers");
    Py_RETURN_NONE;
}
