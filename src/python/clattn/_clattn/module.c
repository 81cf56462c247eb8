/* clattn._clattn: the module, clattn.Error, clattn.Context, the device list and the live-object counts.
 * The attention calls are in attention.c, mods in mods.c, KV caches in kvcache.c. */
#include "kvcache.h"

#include <structmember.h> /* (PyMemberDef's T_PYSSIZET and READONLY: not in Python.h's limited API) */
#include <string.h>

module_state pyclattn_state;
long pyclattn_live_contexts, pyclattn_live_mods, pyclattn_live_caches;

PyObject *pyclattn_raise(clattn_status status, const char *detail)
{
    PyObject *exc = PyObject_CallFunction(pyclattn_state.error, "s", detail && *detail ? detail
                                                                                       : clattn_status_description(status));
    if (!exc)
        return NULL;
    PyObject *code = PyLong_FromLong((long)status), *name = PyUnicode_FromString(clattn_status_string(status));
    if (code && name && PyObject_SetAttrString(exc, "status", code) == 0 &&
        PyObject_SetAttrString(exc, "status_name", name) == 0)
        PyErr_SetObject(pyclattn_state.error, exc);
    Py_XDECREF(code);
    Py_XDECREF(name);
    Py_DECREF(exc);
    return NULL;
}

/* ---- Context ----------------------------------------------------------------------------------- */

static PyObject *context_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"device", "_cl_handles", NULL};
    const char *spec = NULL;
    PyObject *handles = NULL; /* (cl_context, cl_device_id, cl_command_queue) as integers: an application's own */
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|z$O:Context", keywords, &spec, &handles))
        return NULL;
    unsigned long long h[3] = {0};
    if (handles && handles != Py_None &&
        (spec || !PyArg_ParseTuple(handles, "KKK:_cl_handles", &h[0], &h[1], &h[2]) || !h[0] || !h[1] || !h[2])) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "Context: a device spec or OpenCL handles (none of them NULL), not both");
        return NULL;
    }
    clattn_context *ctx = NULL;
    clattn_status st;
    Py_BEGIN_ALLOW_THREADS /* (finding the device and measuring nothing: but drivers may take a while) */
    st = h[0] ? clattn_context_create_from_cl(&ctx, (cl_context)(uintptr_t)h[0], (cl_device_id)(uintptr_t)h[1],
                                              (cl_command_queue)(uintptr_t)h[2])
              : clattn_context_create(&ctx, spec);
    Py_END_ALLOW_THREADS
    if (st != CLATTN_SUCCESS)
        return pyclattn_raise(st, clattn_last_error(NULL));
    allocfunc alloc = (allocfunc)PyType_GetSlot(type, Py_tp_alloc);
    py_context *self = (py_context *)alloc(type, 0);
    PyThread_type_lock lock = self ? PyThread_allocate_lock() : NULL;
    if (!self || !lock) {
        clattn_context_free(ctx);
        Py_XDECREF(self);
        return PyErr_NoMemory();
    }
    self->ctx = ctx;
    self->lock = lock;
    pyclattn_live_contexts++;
    return (PyObject *)self;
}

static int context_traverse(PyObject *obj, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(obj)); /* (a heap type's instances hold their type) */
    Py_VISIT(((py_context *)obj)->mods_cache);
    return 0;
}

static int context_clear(PyObject *obj)
{
    Py_CLEAR(((py_context *)obj)->mods_cache); /* (the mods release the context: the cycle is broken) */
    return 0;
}

static void context_dealloc(PyObject *obj)
{
    py_context *self = (py_context *)obj;
    PyTypeObject *type = Py_TYPE(obj);
    PyObject_GC_UnTrack(obj);
    if (self->weakrefs)
        PyObject_ClearWeakRefs(obj);
    Py_CLEAR(self->mods_cache); /* (empty of mods here: each held the context) */
    if (self->ctx) {
        clattn_context_free(self->ctx);
        pyclattn_live_contexts--;
    }
    if (self->lock)
        PyThread_free_lock(self->lock);
    freefunc tp_free = (freefunc)PyType_GetSlot(type, Py_tp_free);
    tp_free(obj);
    Py_DECREF(type);
}

static PyObject *context_device_name(PyObject *obj, void *closure)
{
    (void)closure;
    return PyUnicode_FromString(clattn_context_device_name(((py_context *)obj)->ctx));
}

static PyObject *context_cl_handles(PyObject *obj, void *closure)
{
    (void)closure;
    const clattn_context *ctx = ((py_context *)obj)->ctx;
    return Py_BuildValue("(KKK)", (unsigned long long)(uintptr_t)clattn_context_cl_context(ctx),
                         (unsigned long long)(uintptr_t)clattn_context_device(ctx),
                         (unsigned long long)(uintptr_t)clattn_context_queue(ctx));
}

static PyObject *context_repr(PyObject *obj)
{
    return PyUnicode_FromFormat("clattn.Context(device_name=%R)", context_device_name(obj, NULL));
}

static PyObject *context_finish(PyObject *obj, PyObject *unused)
{
    (void)unused;
    py_context *pc = (py_context *)obj;
    clattn_status st;
    char detail[1024];
    CLATTN_CALL(pc, detail, st = clattn_finish(pc->ctx));
    if (st != CLATTN_SUCCESS)
        return pyclattn_raise(st, detail);
    Py_RETURN_NONE;
}

static PyObject *context_mods_cache(PyObject *obj, void *closure)
{
    (void)closure;
    py_context *self = (py_context *)obj;
    if (!self->mods_cache && !(self->mods_cache = PyDict_New()))
        return NULL;
    Py_INCREF(self->mods_cache);
    return self->mods_cache;
}

static PyMemberDef context_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(py_context, weakrefs), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef context_getset[] = {
    {"device_name", context_device_name, NULL, "The OpenCL device's name.", NULL},
    {"_cl_handles", context_cl_handles, NULL,
     "(cl_context, cl_device_id, cl_command_queue) as integers, the context's own (for clattn.pyopencl).", NULL},
    {"_mods_cache", context_mods_cache, NULL, "The package's compiled mods for this context (clattn._mods).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef context_methods[] = {
    {"finish", context_finish, METH_NOARGS, "Block until the context's queued work is done."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot context_slots[] = {
    {Py_tp_new, context_new},
    {Py_tp_dealloc, context_dealloc},
    {Py_tp_traverse, context_traverse},
    {Py_tp_clear, context_clear},
    {Py_tp_members, context_members},
    {Py_tp_getset, context_getset},
    {Py_tp_methods, context_methods},
    {Py_tp_repr, context_repr},
    {Py_tp_doc, "Context(device=None): a clattn context on one OpenCL device.\n\n"
                "device: a device spec as `clattn devices` lists them (\"0:1\", \"cpu\", \"gpu\", part of a name);\n"
                "None: the CLATTN_DEVICE environment variable, else the first GPU, else the first device.\n"
                "(A context on an application's own OpenCL queue: clattn.pyopencl.context(queue).)"},
    {0, NULL},
};

static PyType_Spec context_spec = {"clattn._clattn.Context", sizeof(py_context), 0,
                                   Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, context_slots};

py_context *pyclattn_context(PyObject *obj, const char *what)
{
    if (!PyObject_TypeCheck(obj, (PyTypeObject *)pyclattn_state.context_type)) {
        PyErr_Format(PyExc_TypeError, "%s must be a clattn.Context, not %R", what, (PyObject *)Py_TYPE(obj));
        return NULL;
    }
    return (py_context *)obj;
}

/* ---- Module functions -------------------------------------------------------------------------- */

static PyObject *py_devices(PyObject *self, PyObject *unused)
{
    (void)self, (void)unused;
    size_t n = 0;
    clattn_status st = clattn_device_count(&n);
    if (st != CLATTN_SUCCESS && st != CLATTN_ERROR_NO_PLATFORM && st != CLATTN_ERROR_NO_DEVICE)
        return pyclattn_raise(st, clattn_last_error(NULL));
    PyObject *list = PyList_New(0);
    for (size_t i = 0; list && i < n; i++) {
        clattn_device_info info;
        if ((st = clattn_device_get(i, &info)) != CLATTN_SUCCESS) {
            Py_DECREF(list);
            return pyclattn_raise(st, clattn_last_error(NULL));
        }
        const char *type = info.type & CL_DEVICE_TYPE_GPU           ? "gpu"
                           : info.type & CL_DEVICE_TYPE_CPU         ? "cpu"
                           : info.type & CL_DEVICE_TYPE_ACCELERATOR ? "accelerator"
                                                                    : "other";
        PyObject *d = Py_BuildValue("{s:N,s:s,s:s,s:s,s:s}", "spec",
                                    PyUnicode_FromFormat("%u:%u", info.platform_index, info.device_index), "name",
                                    info.name, "vendor", info.vendor, "platform", info.platform_name, "type", type);
        if (!d || PyList_Append(list, d) != 0) {
            Py_XDECREF(d);
            Py_DECREF(list);
            return NULL;
        }
        Py_DECREF(d);
    }
    return list;
}

static PyObject *py_live_objects(PyObject *self, PyObject *unused)
{
    (void)self, (void)unused;
    return Py_BuildValue("{s:l,s:l,s:l}", "contexts", pyclattn_live_contexts, "mods", pyclattn_live_mods, "kv_caches",
                         pyclattn_live_caches);
}

static PyObject *py_version(PyObject *self, PyObject *unused)
{
    (void)self, (void)unused;
    return PyUnicode_FromString(clattn_version_string());
}

static PyMethodDef module_methods[] = {
    {"devices", py_devices, METH_NOARGS, "Every OpenCL device: a list of dicts (spec, name, vendor, platform, type)."},
    {"live_objects", py_live_objects, METH_NOARGS, "Live contexts, mods and KV caches (for leak checks)."},
    {"library_version", py_version, METH_NOARGS, "The version of the clattn library built in."},
    {"formats", py_formats, METH_NOARGS,
     "Every storage format: ((name, block, block_bytes, row_scales, kv_only), ...), row_scales \"none\", "
     "\"required\" or \"optional\"."},
    {"sdpa", (PyCFunction)(void (*)(void))py_sdpa, METH_VARARGS | METH_KEYWORDS, "Scaled dot-py_product attention (see clattn.scaled_dot_product_attention)."},
    {"sdpa_backward", (PyCFunction)(void (*)(void))py_sdpa_backward, METH_VARARGS | METH_KEYWORDS,
     "The gradients of sdpa (clattn_sdpa_backward_host; float32)."},
    {"mha", (PyCFunction)(void (*)(void))py_mha, METH_VARARGS | METH_KEYWORDS, "A multi-head attention layer (see clattn.multi_head_attention)."},
    {"merge", (PyCFunction)(void (*)(void))py_merge, METH_VARARGS | METH_KEYWORDS, "Merge partial results (see clattn.merge)."},
    {"sparse", (PyCFunction)(void (*)(void))py_sparse, METH_VARARGS | METH_KEYWORDS,
     "Top-k sparse attention and its gradients (see clattn.sparse_attention)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_clattn",
                                        "clattn's C extension: attention on any OpenCL device (see the clattn package).",
                                        -1, module_methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__clattn(void)
{
    PyObject *m = PyModule_Create(&module_def);
    if (!m)
        return NULL;
    pyclattn_state.error = PyErr_NewExceptionWithDoc(
        "clattn.Error",
        "A call of the clattn library failed: .status (the code), .status_name, and the message. A RuntimeError, "
        "as PyTorch's failures are.",
        PyExc_RuntimeError, NULL);
    pyclattn_state.context_type = PyType_FromSpec(&context_spec);
    pyclattn_state.mods_type = PyType_FromSpec(&pyclattn_mods_spec);
    pyclattn_state.kvcache_type = PyType_FromSpec(&pyclattn_kvcache_spec);
    pyclattn_state.block_mask_type = PyType_FromSpec(&pyclattn_block_mask_spec);
    const struct {
        const char *name;
        PyObject *obj;
    } exported[] = {{"Error", pyclattn_state.error},
                    {"Context", pyclattn_state.context_type},
                    {"Mods", pyclattn_state.mods_type},
                    {"KVCache", pyclattn_state.kvcache_type},
                    {"BlockMask", pyclattn_state.block_mask_type}};
    for (size_t i = 0; i < sizeof exported / sizeof exported[0]; i++) {
        if (!exported[i].obj) {
            Py_DECREF(m);
            return NULL;
        }
        Py_INCREF(exported[i].obj); /* (the state keeps its own reference) */
        if (PyModule_AddObject(m, exported[i].name, exported[i].obj) != 0) {
            Py_DECREF(exported[i].obj);
            Py_DECREF(m);
            return NULL;
        }
    }
    return m;
}
