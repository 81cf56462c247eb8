/* Tensors that stay on the device: pyopencl arrays (pyopencl.array.Array, or any object shaped like one)
 * read as the cl_mem they live in. Nothing of pyopencl is imported: an array is known by its attributes —
 * base_data (a pyopencl Buffer, whose int_ptr is the cl_mem), offset (bytes into it), shape, dtype and
 * flags.c_contiguous — so the extension builds and runs without pyopencl. An array starting inside its
 * buffer is read through a sub-buffer (the device's base address alignment applies to its offset). */
#include "pyclattn.h"

#include <string.h>

int py_is_device_array(PyObject *obj)
{
    return PyObject_HasAttrString(obj, "base_data") && PyObject_HasAttrString(obj, "offset") &&
           PyObject_HasAttrString(obj, "queue");
}

/* obj.attr as a C integer (-1 with an exception naming `name` otherwise). */
static int long_attr(PyObject *obj, const char *attr, const char *name, unsigned long long *out)
{
    PyObject *v = PyObject_GetAttrString(obj, attr);
    if (!v)
        return -1;
    *out = PyLong_AsUnsignedLongLong(v);
    Py_DECREF(v);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s: its %s is not an integer", name, attr);
        return -1;
    }
    return 0;
}

/* The element type of a numpy dtype object: kind and itemsize, as py_tensor_get reads DLPack's. */
static int dtype_take(PyObject *dtype, const char *name, int bfloat16_bits, py_tensor *t)
{
    PyObject *kind_obj = PyObject_GetAttrString(dtype, "kind");
    PyObject *native = kind_obj ? PyObject_GetAttrString(dtype, "isnative") : NULL;
    unsigned long long size = 0;
    int bad = !native || long_attr(dtype, "itemsize", name, &size) != 0;
    const Py_UCS4 kind = !bad ? PyUnicode_ReadChar(kind_obj, 0) : (Py_UCS4)-1; /* (the limited API's way) */
    bad = bad || kind == (Py_UCS4)-1;
    if (!bad && PyObject_IsTrue(native) != 1) {
        PyErr_Format(PyExc_TypeError, "%s: its elements are not in the device's byte order", name);
        bad = 1;
    }
    Py_XDECREF(kind_obj);
    Py_XDECREF(native);
    if (bad)
        return -1;
    t->elem_size = (size_t)size;
    if (kind == 'f' && size == 4)
        t->dtype = CLATTN_FLOAT32, t->kind = 'f';
    else if (kind == 'f' && size == 2)
        t->dtype = CLATTN_FLOAT16, t->kind = 'f';
    else if (kind == 'u' && size == 2 && bfloat16_bits)
        t->dtype = CLATTN_BFLOAT16, t->kind = 'f';
    else if (kind == 'b' && size == 1)
        t->kind = 'b';
    else if (kind == 'i' || kind == 'u')
        t->kind = (char)kind;
    else {
        PyErr_Format(PyExc_TypeError, "%s: elements of kind '%c' and %llu bytes are not a type clattn takes", name,
                     (int)kind, size);
        return -1;
    }
    return 0;
}

/* shape (at most 8 dimensions) and C-contiguity. */
static int shape_take(PyObject *obj, const char *name, py_tensor *t)
{
    PyObject *shape = PyObject_GetAttrString(obj, "shape");
    const Py_ssize_t n = shape ? PySequence_Size(shape) : -1;
    int bad = n < 0 || n > 8;
    t->ndim = (int)n;
    t->elems = 1;
    for (Py_ssize_t i = 0; i < n && !bad; i++) {
        PyObject *d = PySequence_GetItem(shape, i);
        t->shape[i] = d ? PyLong_AsLongLong(d) : -1;
        Py_XDECREF(d);
        bad = t->shape[i] < 0;
        t->elems *= (size_t)t->shape[i];
    }
    Py_XDECREF(shape);
    if (bad) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s: its shape is not one clattn reads (at most 8 dimensions)", name);
        return -1;
    }
    PyObject *flags = PyObject_GetAttrString(obj, "flags");
    PyObject *contiguous = flags ? PyObject_GetAttrString(flags, "c_contiguous") : NULL;
    Py_XDECREF(flags);
    const int yes = contiguous ? PyObject_IsTrue(contiguous) : -1;
    Py_XDECREF(contiguous);
    if (yes < 0)
        return -1;
    if (!yes) {
        PyErr_Format(PyExc_ValueError, "%s is not contiguous (clattn reads row-major arrays)", name);
        return -1;
    }
    return 0;
}

int py_device_tensor_get(PyObject *obj, const char *name, int bfloat16_bits, py_tensor *t)
{
    memset(t, 0, sizeof *t);
    unsigned long long offset = 0, handle = 0;
    PyObject *dtype = PyObject_GetAttrString(obj, "dtype");
    int bad = !dtype || dtype_take(dtype, name, bfloat16_bits, t) != 0 || shape_take(obj, name, t) != 0 ||
              long_attr(obj, "offset", name, &offset) != 0;
    Py_XDECREF(dtype);
    if (bad)
        return -1;
    if (t->elems == 0) {
        PyErr_Format(PyExc_ValueError, "%s is empty: a device array holds at least one element here", name);
        return -1;
    }
    PyObject *base = PyObject_GetAttrString(obj, "base_data");
    bad = !base || base == Py_None || long_attr(base, "int_ptr", name, &handle) != 0 || handle == 0;
    Py_XDECREF(base);
    if (bad) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "%s has no OpenCL buffer behind it", name);
        return -1;
    }
    const cl_mem whole = (cl_mem)(uintptr_t)handle;
    const size_t bytes = t->elems * t->elem_size;
    size_t whole_bytes = 0;
    cl_int err = clGetMemObjectInfo(whole, CL_MEM_SIZE, sizeof whole_bytes, &whole_bytes, NULL);
    if (err != CL_SUCCESS || offset > whole_bytes || bytes > whole_bytes - offset) {
        PyErr_Format(PyExc_ValueError, "%s: %zu bytes from offset %llu do not lie inside its buffer (%zu bytes%s)",
                     name, bytes, offset, whole_bytes, err != CL_SUCCESS ? ", unreadable" : "");
        return -1;
    }
    if (offset == 0) {
        err = clRetainMemObject(whole);
        t->mem = whole;
    } else { /* (a view into a larger buffer: the library takes whole cl_mem objects) */
        const cl_buffer_region region = {(size_t)offset, bytes};
        t->mem = clCreateSubBuffer(whole, 0, CL_BUFFER_CREATE_TYPE_REGION, &region, &err);
    }
    if (err != CL_SUCCESS) {
        t->mem = NULL;
        if (err == CL_MISALIGNED_SUB_BUFFER_OFFSET)
            PyErr_Format(PyExc_ValueError, "%s starts %llu bytes into its buffer, which is not a multiple of the "
                         "device's base address alignment: give an array that starts at its buffer's start (a copy)",
                         name, offset);
        else
            pyclattn_raise((clattn_status)err, "reading a device array's buffer");
        return -1;
    }
    return 0;
}

int py_tensors_on_device(py_context *pc, const py_tensor *t, size_t n, const char *const *names)
{
    size_t device = 0, given = 0;
    for (size_t i = 0; i < n; i++)
        if (t[i].capsule || t[i].mem)
            given++, device += t[i].mem != NULL;
    if (device && device != given) {
        PyErr_SetString(PyExc_TypeError, "a call takes host arrays (numpy, PyTorch) or device arrays (pyopencl), "
                                         "not both");
        return -1;
    }
    const cl_context expected = clattn_context_cl_context(pc->ctx);
    for (size_t i = 0; i < n; i++) {
        cl_context own = NULL;
        if (t[i].mem && (clGetMemObjectInfo(t[i].mem, CL_MEM_CONTEXT, sizeof own, &own, NULL) != CL_SUCCESS ||
                         own != expected)) {
            PyErr_Format(PyExc_ValueError, "%s lives on another OpenCL context than the call's clattn.Context "
                         "(make the Context from the arrays' queue: clattn.pyopencl.context(queue))", names[i]);
            return -1;
        }
    }
    return device != 0;
}
