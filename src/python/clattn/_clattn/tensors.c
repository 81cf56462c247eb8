/* Tensors in: DLPack (the "dltensor" capsule of __dlpack__(), which numpy ≥ 1.22 and PyTorch give) read
 * without a copy — the memory stays the producer's, held by the capsule until py_tensor_release. The DLPack
 * structs are written here from the specification (dlpack.h's ABI, version 0.x, which every producer's
 * unversioned capsule carries): no header to depend on. */
#include "pyclattn.h"

#include <string.h>

typedef struct dl_device {
    int32_t device_type; /* 1: kDLCPU */
    int32_t device_id;
} dl_device;

typedef struct dl_data_type {
    uint8_t code; /* 0 int, 1 uint, 2 float, 4 bfloat, 6 bool */
    uint8_t bits;
    uint16_t lanes;
} dl_data_type;

typedef struct dl_tensor {
    void *data;
    dl_device device;
    int32_t ndim;
    dl_data_type dtype;
    int64_t *shape;
    int64_t *strides; /* in elements; NULL: compact row-major */
    uint64_t byte_offset;
} dl_tensor;

typedef struct dl_managed_tensor {
    dl_tensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct dl_managed_tensor *self);
} dl_managed_tensor;

enum { DL_INT = 0, DL_UINT = 1, DL_FLOAT = 2, DL_BFLOAT = 4, DL_BOOL = 6, DL_CPU = 1, DL_CUDA_HOST = 3 };

void py_tensor_release(py_tensor *t)
{
    Py_CLEAR(t->capsule); /* (its destructor, the producer's, frees the tensor: we never rename it "used") */
    if (t->mem)
        clReleaseMemObject(t->mem);
    t->mem = NULL;
}

int py_tensor_get_any(PyObject *obj, const char *name, int optional, int bfloat16_bits, py_tensor *t)
{
    if (obj != Py_None && py_is_device_array(obj))
        return py_device_tensor_get(obj, name, bfloat16_bits, t);
    return py_tensor_get(obj, name, optional, bfloat16_bits, t);
}

int py_tensor_get(PyObject *obj, const char *name, int optional, int bfloat16_bits, py_tensor *t)
{
    memset(t, 0, sizeof *t);
    if (obj == Py_None && optional)
        return 0;
    const int has_dlpack = PyObject_HasAttrString(obj, "__dlpack__");
    PyObject *capsule = has_dlpack ? PyObject_CallMethod(obj, "__dlpack__", NULL) : NULL;
    if (!capsule) {
        if (!has_dlpack && py_is_device_array(obj)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "%s: a device array (pyopencl) is not taken here: this call reads host "
                         "arrays (device arrays go to scaled_dot_product_attention, its backward and KVCache)", name);
            return -1;
        }
        if (!has_dlpack) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "%s: expected a numpy array or PyTorch tensor (an object with __dlpack__), "
                         "got %R", name, (PyObject *)Py_TYPE(obj));
            return -1;
        }
        /* It has __dlpack__ and refused (numpy: a non-native byte order, read-only memory): its own reason. */
        PyObject *type, *value, *trace;
        PyErr_Fetch(&type, &value, &trace);
        PyErr_NormalizeException(&type, &value, &trace);
        PyErr_Format(PyExc_TypeError, "%s: its __dlpack__() failed: %S", name, value ? value : Py_None);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(trace);
        return -1;
    }
    dl_managed_tensor *m = PyCapsule_GetPointer(capsule, "dltensor");
    if (!m) {
        Py_DECREF(capsule);
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s: __dlpack__() did not return a \"dltensor\" capsule", name);
        return -1;
    }
    t->capsule = capsule;
    const dl_tensor *d = &m->dl_tensor;
    const char *bad = NULL;
    if (d->device.device_type != DL_CPU && d->device.device_type != DL_CUDA_HOST)
        bad = "is not in host memory (give a CPU tensor)";
    else if (d->dtype.lanes != 1)
        bad = "has vector elements";
    else if (d->ndim < 0 || d->ndim > 8)
        bad = "has more than 8 dimensions";
    if (bad) {
        py_tensor_release(t);
        PyErr_Format(PyExc_ValueError, "%s %s", name, bad);
        return -1;
    }
    t->ndim = d->ndim;
    t->elems = 1;
    int64_t expect = 1; /* the row-major stride of the current dimension */
    int contiguous = 1;
    for (int i = d->ndim - 1; i >= 0; i--) {
        t->shape[i] = d->shape[i];
        if (d->strides && d->shape[i] > 1 && d->strides[i] != expect)
            contiguous = 0;
        expect *= d->shape[i];
    }
    for (int i = 0; i < d->ndim; i++)
        t->elems *= (size_t)d->shape[i];
    const uint8_t code = d->dtype.code, bits = d->dtype.bits;
    t->elem_size = (size_t)(bits + 7) / 8;
    t->kind = 0;
    if (code == DL_FLOAT && bits == 32)
        t->dtype = CLATTN_FLOAT32, t->kind = 'f';
    else if (code == DL_FLOAT && bits == 16)
        t->dtype = CLATTN_FLOAT16, t->kind = 'f';
    else if ((code == DL_BFLOAT && bits == 16) || (code == DL_UINT && bits == 16 && bfloat16_bits))
        t->dtype = CLATTN_BFLOAT16, t->kind = 'f';
    else if (code == DL_BOOL && bits == 8)
        t->kind = 'b';
    else if (code == DL_INT)
        t->kind = 'i';
    else if (code == DL_UINT)
        t->kind = 'u';
    if (!contiguous || !t->kind) {
        py_tensor_release(t);
        if (!contiguous)
            PyErr_Format(PyExc_ValueError, "%s is not contiguous (clattn reads row-major tensors)", name);
        else
            PyErr_Format(PyExc_TypeError, "%s: element type code %d with %d bits is not one clattn takes", name,
                         (int)code, (int)bits);
        return -1;
    }
    t->data = (char *)d->data + d->byte_offset;
    return 0;
}

int py_tensor_expect(const py_tensor *t, const char *name, size_t elems, int allow_bool)
{
    if (t->kind != 'f' && !(allow_bool && t->kind == 'b')) {
        PyErr_Format(PyExc_TypeError, "%s must be float32, float16 or bfloat16%s", name, allow_bool ? " (or bool)" : "");
        return -1;
    }
    if (t->elems != elems) {
        PyErr_Format(PyExc_ValueError, "%s holds %zu elements; the call's shape needs %zu", name, t->elems, elems);
        return -1;
    }
    return 0;
}

/* The common walk of a sequence of n numbers: each item through `take` into out[i]. */
static int sequence_walk(PyObject *seq, const char *name, size_t n, void *out, size_t elem,
                         int (*take)(PyObject *, void *))
{
    PyObject *fast = PySequence_Fast(seq, "");
    if (!fast) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s must be a sequence of %zu numbers", name, n);
        return -1;
    }
    const Py_ssize_t len = PySequence_Size(fast);
    if (len < 0 || (size_t)len != n) {
        Py_DECREF(fast);
        PyErr_Format(PyExc_ValueError, "%s holds %zd values; the call needs %zu", name, len, n);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        PyObject *item = PySequence_GetItem(fast, (Py_ssize_t)i);
        const int bad = !item || take(item, (char *)out + i * elem);
        Py_XDECREF(item);
        if (bad) {
            Py_DECREF(fast);
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "%s[%zu] is not a number of the kind clattn needs", name, i);
            return -1;
        }
    }
    Py_DECREF(fast);
    return 0;
}

static int take_float(PyObject *o, void *out)
{
    *(float *)out = (float)PyFloat_AsDouble(o);
    return PyErr_Occurred() != NULL;
}
static int take_long(PyObject *o, void *out)
{
    *(long long *)out = PyLong_AsLongLong(o);
    return PyErr_Occurred() != NULL;
}
static int take_int(PyObject *o, void *out)
{
    const long v = PyLong_AsLong(o);
    if (v < INT_MIN || v > INT_MAX)
        PyErr_SetString(PyExc_OverflowError, "beyond int");
    *(int *)out = (int)v;
    return PyErr_Occurred() != NULL;
}
static int take_size(PyObject *o, void *out)
{
    *(size_t *)out = PyLong_AsSize_t(o);
    return PyErr_Occurred() != NULL;
}

#define SEQUENCE_READER(fn, type, take)                                                                      \
    int fn(PyObject *seq, const char *name, size_t n, type **out)                                            \
    {                                                                                                        \
        *out = NULL;                                                                                         \
        if (!seq || seq == Py_None)                                                                          \
            return 0;                                                                                        \
        type *values = PyMem_Malloc((n ? n : 1) * sizeof *values);                                           \
        if (!values) {                                                                                       \
            PyErr_NoMemory();                                                                                \
            return -1;                                                                                       \
        }                                                                                                    \
        if (sequence_walk(seq, name, n, values, sizeof *values, take) != 0) {                                \
            PyMem_Free(values);                                                                              \
            return -1;                                                                                       \
        }                                                                                                    \
        *out = values;                                                                                       \
        return 0;                                                                                            \
    }
SEQUENCE_READER(py_floats_from_sequence, float, take_float)
SEQUENCE_READER(py_longs_from_sequence, long long, take_long)
SEQUENCE_READER(py_sizes_from_sequence, size_t, take_size)
SEQUENCE_READER(py_ints_from_sequence, int, take_int)
