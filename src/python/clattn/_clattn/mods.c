/* clattn._clattn.Mods: programmable attention's score_mod / mask_mod (clattn_mods_create) with their
 * auxiliary tensors copied to the context's device; update() writes new contents into them, so that a
 * call's changing tensors (document ids per batch of sequences) do not rebuild anything. */
#include "pyclattn.h"

#include <string.h>

typedef struct py_mods {
    PyObject_HEAD
    PyObject *context; /* the py_context, kept alive */
    clattn_mods *mods;
    size_t naux;
    cl_mem buffers[CLATTN_MODS_MAX_AUX];
    size_t bytes[CLATTN_MODS_MAX_AUX];
} py_mods;

/* The auxiliary type of a tensor's elements (-1: none fits). */
static int aux_type_of(const py_tensor *t)
{
    if (t->kind == 'f')
        return t->dtype == CLATTN_FLOAT32 ? CLATTN_AUX_FLOAT : t->dtype == CLATTN_FLOAT16 ? CLATTN_AUX_HALF : -1;
    if (t->kind == 'b')
        return CLATTN_AUX_UCHAR;
    static const int signed_types[9] = {-1, CLATTN_AUX_CHAR, CLATTN_AUX_SHORT, -1, CLATTN_AUX_INT, -1, -1, -1, CLATTN_AUX_LONG};
    static const int unsigned_types[9] = {-1, CLATTN_AUX_UCHAR, CLATTN_AUX_USHORT, -1, CLATTN_AUX_UINT, -1, -1, -1,
                                          CLATTN_AUX_ULONG};
    return t->elem_size > 8 ? -1 : t->kind == 'i' ? signed_types[t->elem_size] : unsigned_types[t->elem_size];
}

static void release_buffers(py_mods *self)
{
    for (size_t i = 0; i < CLATTN_MODS_MAX_AUX; i++)
        if (self->buffers[i]) {
            clReleaseMemObject(self->buffers[i]);
            self->buffers[i] = NULL;
        }
}

/* Mods(context, source, aux, defines): aux a sequence of (name, array, index, length) with index a
 * clattn_aux_index and length its bound (BY_LENGTH) or 0; defines a sequence of "NAME=VALUE". */
static PyObject *mods_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    (void)kwargs;
    PyObject *ctx_obj, *aux_obj, *defines_obj;
    const char *source;
    if (!PyArg_ParseTuple(args, "OsOO:Mods", &ctx_obj, &source, &aux_obj, &defines_obj))
        return NULL;
    py_context *pc = pyclattn_context(ctx_obj, "context");
    if (!pc)
        return NULL;
    const Py_ssize_t naux = PySequence_Size(aux_obj), ndefines = PySequence_Size(defines_obj);
    if (naux < 0 || ndefines < 0 || naux > CLATTN_MODS_MAX_AUX || ndefines > 64) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "aux: at most %d tensors, defines: at most 64", CLATTN_MODS_MAX_AUX);
        return NULL;
    }
    allocfunc alloc = (allocfunc)PyType_GetSlot(type, Py_tp_alloc);
    py_mods *self = (py_mods *)alloc(type, 0);
    if (!self)
        return NULL;
    Py_INCREF(ctx_obj);
    self->context = ctx_obj;
    PyObject *names[CLATTN_MODS_MAX_AUX] = {NULL}, *define_strs[64] = {NULL};
    clattn_mod_aux aux[CLATTN_MODS_MAX_AUX];
    const char *defines[64];
    int bad = 0;
    for (Py_ssize_t i = 0; i < naux && !bad; i++) {
        PyObject *item = PySequence_GetItem(aux_obj, i), *array;
        const char *name;
        int index;
        Py_ssize_t length;
        py_tensor t;
        bad = !item || !PyArg_ParseTuple(item, "sOin:aux entry", &name, &array, &index, &length) ||
              py_tensor_get(array, "aux tensor", 0, 0, &t) != 0;
        if (!bad) {
            const int type_code = aux_type_of(&t);
            cl_int err = CL_SUCCESS;
            if (type_code < 0) {
                PyErr_Format(PyExc_TypeError, "aux \"%s\": float32, float16 or an integer type", name);
                bad = 1;
            } else {
                self->bytes[i] = t.elems * t.elem_size;
                self->buffers[i] = clCreateBuffer(clattn_context_cl_context(pc->ctx), CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                                                  self->bytes[i] ? self->bytes[i] : 1, t.data, &err);
                if (err != CL_SUCCESS) {
                    pyclattn_raise((clattn_status)err, "clCreateBuffer for an auxiliary tensor failed");
                    bad = 1;
                }
            }
            aux[i] = (clattn_mod_aux){name, (clattn_aux_type)(type_code < 0 ? 0 : type_code), self->buffers[i],
                                      (clattn_aux_index)index, (size_t)(length < 0 ? 0 : length)};
            py_tensor_release(&t);
            names[i] = item; /* (keeps `name` alive until the mods are made) */
            item = NULL;
        }
        Py_XDECREF(item);
    }
    for (Py_ssize_t i = 0; i < ndefines && !bad; i++) {
        PyObject *item = PySequence_GetItem(defines_obj, i);
        define_strs[i] = item ? PyUnicode_AsUTF8String(item) : NULL; /* (bytes: the 3.9 limited API's way) */
        Py_XDECREF(item);
        defines[i] = define_strs[i] ? PyBytes_AsString(define_strs[i]) : NULL;
        bad = !defines[i];
    }
    if (!bad) {
        clattn_mods_desc md = CLATTN_MODS_DESC_INIT;
        md.source = source;
        md.defines = defines;
        md.define_count = (size_t)ndefines;
        md.aux = aux;
        md.aux_count = (size_t)naux;
        self->naux = (size_t)naux;
        clattn_status st;
        char detail[4096];
        CLATTN_CALL(pc, detail, st = clattn_mods_create(pc->ctx, &md, &self->mods)); /* (compiles: seconds) */
        if (st != CLATTN_SUCCESS) {
            pyclattn_raise(st, detail);
            bad = 1;
        }
    }
    for (size_t i = 0; i < CLATTN_MODS_MAX_AUX; i++)
        Py_XDECREF(names[i]);
    for (size_t i = 0; i < 64; i++)
        Py_XDECREF(define_strs[i]);
    if (bad) {
        Py_DECREF(self);
        return NULL;
    }
    pyclattn_live_mods++;
    return (PyObject *)self;
}

static int mods_traverse(PyObject *obj, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(obj));
    Py_VISIT(((py_mods *)obj)->context);
    return 0;
}

static void mods_dealloc(PyObject *obj)
{
    py_mods *self = (py_mods *)obj;
    PyTypeObject *type = Py_TYPE(obj);
    PyObject_GC_UnTrack(obj);
    if (self->mods) {
        /* Under the context's lock: another thread may be running a call on the context (a cache
         * evicting these mods is any call's doing). The calls that read these mods have completed. */
        py_context *pc = (py_context *)self->context;
        char detail[8];
        clattn_status st;
        CLATTN_CALL(pc, detail, {
            st = clattn_finish(pc->ctx);
            clattn_mods_free(self->mods);
        });
        (void)st; /* (a failed finish has nothing to tell a dealloc's caller: the mods are freed anyway) */
        pyclattn_live_mods--;
    }
    release_buffers(self);
    Py_XDECREF(self->context);
    freefunc tp_free = (freefunc)PyType_GetSlot(type, Py_tp_free);
    tp_free(obj);
    Py_DECREF(type);
}

/* update(arrays): new contents for the auxiliary tensors, in their order, each of its first size. */
static PyObject *mods_update(PyObject *obj, PyObject *arrays)
{
    py_mods *self = (py_mods *)obj;
    py_context *pc = (py_context *)self->context;
    const Py_ssize_t n = PySequence_Size(arrays);
    if (n < 0 || (size_t)n != self->naux) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "update: %zu auxiliary tensors expected", self->naux);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_GetItem(arrays, i);
        py_tensor t;
        if (!item || py_tensor_get(item, "aux tensor", 0, 0, &t) != 0) {
            Py_XDECREF(item);
            return NULL;
        }
        Py_DECREF(item);
        if (t.elems * t.elem_size != self->bytes[i]) {
            py_tensor_release(&t);
            PyErr_Format(PyExc_ValueError, "aux tensor %zd holds %zu bytes, not the %zu it was made with", i,
                         t.elems * t.elem_size, self->bytes[i]);
            return NULL;
        }
        cl_int err;
        char detail[8];
        CLATTN_CALL(pc, detail,
                    err = clEnqueueWriteBuffer(clattn_context_queue(pc->ctx), self->buffers[i], CL_TRUE, 0,
                                               self->bytes[i], t.data, 0, NULL, NULL));
        py_tensor_release(&t);
        if (err != CL_SUCCESS)
            return pyclattn_raise((clattn_status)err, "writing an auxiliary tensor failed");
    }
    Py_RETURN_NONE;
}

static PyMethodDef mods_methods[] = {
    {"update", mods_update, METH_O, "update(arrays): new contents for the auxiliary tensors (same sizes)."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot mods_slots[] = {
    {Py_tp_new, mods_new},
    {Py_tp_dealloc, mods_dealloc},
    {Py_tp_traverse, mods_traverse},
    {Py_tp_methods, mods_methods},
    {Py_tp_doc, "Mods(context, source, aux, defines): score_mod / mask_mod compiled for a context "
                "(clattn.mods() makes and caches them)."},
    {0, NULL},
};

PyType_Spec pyclattn_mods_spec = {"clattn._clattn.Mods", sizeof(py_mods), 0, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
                                  mods_slots};

void pyclattn_mods_release(mods_staged *s)
{
    for (size_t i = 0; i < CLATTN_MODS_MAX_AUX; i++)
        py_tensor_release(&s->aux[i]);
    memset(s, 0, sizeof *s);
}

const clattn_mods *pyclattn_mods_of(PyObject *obj, py_context **pc)
{
    if (!PyObject_TypeCheck(obj, (PyTypeObject *)pyclattn_state.mods_type)) {
        PyErr_Format(PyExc_TypeError, "mods must be clattn mods, not %R", (PyObject *)Py_TYPE(obj));
        return NULL;
    }
    *pc = (py_context *)((py_mods *)obj)->context;
    return ((py_mods *)obj)->mods;
}

int pyclattn_mods_stage(PyObject *obj, py_context *pc, mods_staged *s)
{
    memset(s, 0, sizeof *s);
    if (obj == Py_None)
        return 0;
    PyObject *arrays = NULL, *block_mask = NULL;
    if (PyTuple_Check(obj)) {
        PyObject *mods_obj;
        if (!PyArg_ParseTuple(obj, "OO|O:mods", &mods_obj, &arrays, &block_mask))
            return -1;
        obj = mods_obj;
    }
    if (block_mask && block_mask != Py_None) {
        PyObject *made_from;
        if (!(s->block_mask = pyclattn_block_mask_of(block_mask, &made_from)))
            return -1;
        if (made_from != obj) {
            PyErr_SetString(PyExc_ValueError, "the block mask was made from other mods than the call's");
            return -1;
        }
    }
    if (!PyObject_TypeCheck(obj, (PyTypeObject *)pyclattn_state.mods_type)) {
        PyErr_Format(PyExc_TypeError, "mods must be clattn mods, not %R", (PyObject *)Py_TYPE(obj));
        return -1;
    }
    const py_mods *m = (const py_mods *)obj;
    if (m->context != (PyObject *)pc) {
        PyErr_SetString(PyExc_ValueError, "mods were made for another clattn.Context");
        return -1;
    }
    s->mods = m->mods;
    s->owner = obj;
    if (!arrays || arrays == Py_None)
        return 0;
    const Py_ssize_t n = PySequence_Size(arrays);
    if (n < 0 || (size_t)n != m->naux) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "mods: %zu auxiliary tensors expected", m->naux);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_GetItem(arrays, i);
        const int bad = !item || py_tensor_get(item, "aux tensor", 0, 0, &s->aux[i]) != 0;
        Py_XDECREF(item);
        if (!bad && s->aux[i].elems * s->aux[i].elem_size != m->bytes[i])
            PyErr_Format(PyExc_ValueError, "aux tensor %zd holds %zu bytes, not the %zu it was made with", i,
                         s->aux[i].elems * s->aux[i].elem_size, m->bytes[i]);
        if (bad || PyErr_Occurred()) {
            pyclattn_mods_release(s);
            return -1;
        }
    }
    s->naux = (size_t)n;
    return 0;
}

clattn_status pyclattn_mods_write(const mods_staged *s, py_context *pc)
{
    const py_mods *m = (const py_mods *)s->owner;
    for (size_t i = 0; i < s->naux; i++) {
        if (!m->bytes[i])
            continue;
        const cl_int err = clEnqueueWriteBuffer(clattn_context_queue(pc->ctx), m->buffers[i], CL_TRUE, 0, m->bytes[i],
                                                s->aux[i].data, 0, NULL, NULL);
        if (err != CL_SUCCESS)
            return (clattn_status)err;
    }
    return CLATTN_SUCCESS;
}
