/* clattn._clattn.BlockMask: a block mask (clattn_block_mask_create) evaluated from a Mods object's mask_mod
 * on the device, for calls that carry those same mods (clattn.create_block_mask's blocks, made on first use
 * with each score_mod). */
#include "pyclattn.h"

typedef struct py_block_mask {
    PyObject_HEAD
    PyObject *mods; /* the Mods it was made from (kept alive: calls must carry them) */
    clattn_block_mask *mask;
} py_block_mask;

/* BlockMask(mods, batch, heads, q_len, kv_len, block_q, block_k): batch or heads 0 for the same blocks in
 * every batch or head. The mods' auxiliary tensors must hold the values to evaluate (Mods.update). */
static PyObject *block_mask_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    (void)kwargs;
    PyObject *mods_obj;
    Py_ssize_t sizes[6];
    if (!PyArg_ParseTuple(args, "Onnnnnn:BlockMask", &mods_obj, &sizes[0], &sizes[1], &sizes[2], &sizes[3],
                          &sizes[4], &sizes[5]))
        return NULL;
    py_context *pc;
    const clattn_mods *mods = pyclattn_mods_of(mods_obj, &pc);
    if (!mods)
        return NULL;
    for (int i = 0; i < 6; i++)
        if (sizes[i] < 0) {
            PyErr_SetString(PyExc_ValueError, "BlockMask: sizes must not be negative");
            return NULL;
        }
    allocfunc alloc = (allocfunc)PyType_GetSlot(type, Py_tp_alloc);
    py_block_mask *self = (py_block_mask *)alloc(type, 0);
    if (!self)
        return NULL;
    Py_INCREF(mods_obj);
    self->mods = mods_obj;
    clattn_block_mask_desc bd = CLATTN_BLOCK_MASK_DESC_INIT;
    bd.batch = (size_t)sizes[0], bd.heads = (size_t)sizes[1], bd.q_len = (size_t)sizes[2];
    bd.kv_len = (size_t)sizes[3], bd.block_q = (size_t)sizes[4], bd.block_k = (size_t)sizes[5];
    bd.mods = mods;
    clattn_status st;
    char detail[4096];
    CLATTN_CALL(pc, detail, st = clattn_block_mask_create(pc->ctx, &bd, &self->mask));
    if (st != CLATTN_SUCCESS) {
        Py_DECREF(self);
        return pyclattn_raise(st, detail);
    }
    return (PyObject *)self;
}

static int block_mask_traverse(PyObject *obj, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(obj));
    Py_VISIT(((py_block_mask *)obj)->mods);
    return 0;
}

static void block_mask_dealloc(PyObject *obj)
{
    py_block_mask *self = (py_block_mask *)obj;
    PyTypeObject *type = Py_TYPE(obj);
    PyObject_GC_UnTrack(obj);
    if (self->mask) {
        /* Under the context's lock, after the calls that read it (as Mods' dealloc). */
        py_context *pc;
        (void)pyclattn_mods_of(self->mods, &pc);
        char detail[8];
        clattn_status st;
        CLATTN_CALL(pc, detail, {
            st = clattn_finish(pc->ctx);
            clattn_block_mask_free(self->mask);
        });
        (void)st; /* (nothing to tell a dealloc's caller: the mask is freed anyway) */
    }
    Py_XDECREF(self->mods);
    freefunc tp_free = (freefunc)PyType_GetSlot(type, Py_tp_free);
    tp_free(obj);
    Py_DECREF(type);
}

/* counts(): (empty, partial, full) blocks over every batch and head the mask holds. */
static PyObject *block_mask_counts(PyObject *obj, PyObject *unused)
{
    (void)unused;
    size_t counts[3];
    const clattn_status st = clattn_block_mask_counts(((py_block_mask *)obj)->mask, counts);
    if (st != CLATTN_SUCCESS)
        return pyclattn_raise(st, "clattn_block_mask_counts failed");
    return Py_BuildValue("(nnn)", (Py_ssize_t)counts[0], (Py_ssize_t)counts[1], (Py_ssize_t)counts[2]);
}

static PyMethodDef block_mask_methods[] = {
    {"counts", block_mask_counts, METH_NOARGS, "counts(): (empty, partial, full) blocks."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot block_mask_slots[] = {
    {Py_tp_new, block_mask_new},
    {Py_tp_dealloc, block_mask_dealloc},
    {Py_tp_traverse, block_mask_traverse},
    {Py_tp_methods, block_mask_methods},
    {Py_tp_doc, "BlockMask(mods, batch, heads, q_len, kv_len, block_q, block_k): mods' mask_mod evaluated over "
                "blocks (clattn.create_block_mask makes them)."},
    {0, NULL},
};

PyType_Spec pyclattn_block_mask_spec = {"clattn._clattn.BlockMask", sizeof(py_block_mask), 0,
                                        Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, block_mask_slots};

const clattn_block_mask *pyclattn_block_mask_of(PyObject *obj, PyObject **mods)
{
    if (!PyObject_TypeCheck(obj, (PyTypeObject *)pyclattn_state.block_mask_type)) {
        PyErr_Format(PyExc_TypeError, "block_mask must be a clattn._clattn.BlockMask, not %R", (PyObject *)Py_TYPE(obj));
        return NULL;
    }
    *mods = ((py_block_mask *)obj)->mods;
    return ((py_block_mask *)obj)->mask;
}
