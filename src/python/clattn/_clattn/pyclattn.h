/* The Python extension module clattn._clattn: C against CPython's limited API (3.9 and later, one abi3
 * build), a thin layer over libclattn's public API. Tensors arrive through DLPack (tensors.c), calls run
 * with the GIL released under their context's lock; the Python package (clattn/__init__.py) gives the
 * PyTorch-shaped signatures, allocates the outputs and checks what Python itself can check. */
#ifndef PYCLATTN_H
#define PYCLATTN_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <clattn/clattn.h>

#include <stdint.h>

/* clattn.Context: one clattn context, its calls serialised by `lock` (clattn contexts are not for two
 * threads at once) while the GIL is released. mods_cache: the package's compiled mods for this context
 * (a dict the package bounds; each Mods holds the Context, so the two make a cycle the garbage collector
 * takes apart: both types are GC-tracked). Weak references are allowed. */
typedef struct py_context {
    PyObject_HEAD
    clattn_context *ctx;
    PyThread_type_lock lock;
    PyObject *mods_cache;
    PyObject *weakrefs;
} py_context;

/* The module's state: its types and exception, looked up from the module object. */
typedef struct module_state {
    PyObject *error;        /* clattn.Error */
    PyObject *context_type; /* clattn._clattn.Context */
    PyObject *mods_type;    /* clattn._clattn.Mods */
    PyObject *kvcache_type; /* clattn._clattn.KVCache */
    PyObject *block_mask_type; /* clattn._clattn.BlockMask */
} module_state;

extern module_state pyclattn_state;

/* Live objects of each type (the leak tests read them through _clattn.live_objects()). */
extern long pyclattn_live_contexts, pyclattn_live_mods, pyclattn_live_caches;

/* Raise clattn.Error for a failed call: "<STATUS>: detail", with .status (the code) and .status_name.
 * Returns NULL. */
PyObject *pyclattn_raise(clattn_status status, const char *detail);

/* The py_context behind a Context argument (TypeError naming `what` otherwise; NULL then). */
py_context *pyclattn_context(PyObject *obj, const char *what);

/* Run under the context's lock with the GIL released: CLATTN_CALL(pc, st = clattn_...(pc->ctx, ...));
 * the detail of a failure is copied into `detail` before the lock goes. */
#define CLATTN_CALL(pc, detail, ...) /* (variadic: a block's own commas stay in it) */                        \
    do {                                                                                                     \
        Py_BEGIN_ALLOW_THREADS PyThread_acquire_lock((pc)->lock, WAIT_LOCK);                                 \
        __VA_ARGS__;                                                                                         \
        snprintf((detail), sizeof(detail), "%s", clattn_last_error((pc)->ctx));                              \
        PyThread_release_lock((pc)->lock);                                                                   \
        Py_END_ALLOW_THREADS                                                                                 \
    } while (0)

/* One tensor: from a DLPack-capable object (numpy ≥ 1.22, PyTorch) its host memory, the capsule holding it
 * alive until py_tensor_release; from a device array (pyopencl, devarrays.c) its buffer `mem` (retained, or
 * a sub-buffer, until py_tensor_release), data NULL. Type and shape either way. */
typedef struct py_tensor {
    PyObject *capsule;
    void *data;
    cl_mem mem;
    int ndim;
    int64_t shape[8];
    clattn_dtype dtype; /* the storage type (bool and integer tensors: see kind) */
    char kind;          /* 'f' a float type clattn stores, 'b' bool, 'i' signed, 'u' unsigned */
    size_t elem_size, elems;
} py_tensor;

/* obj (None when optional: t zeroed, returns 0) into t; bfloat16_bits: a uint16 tensor holds bfloat16
 * bit patterns (numpy's way of carrying them). -1 with a TypeError / ValueError naming `name`. Only
 * C-contiguous tensors in host memory are taken. */
int py_tensor_get(PyObject *obj, const char *name, int optional, int bfloat16_bits, py_tensor *t);
/* py_tensor_get, a device array (pyopencl) taken too: for the calls that read cl_mem buffers. */
int py_tensor_get_any(PyObject *obj, const char *name, int optional, int bfloat16_bits, py_tensor *t);
void py_tensor_release(py_tensor *t);

/* devarrays.c: whether obj is a device array (pyopencl.array.Array's attributes), and it read into t. */
int py_is_device_array(PyObject *obj);
int py_device_tensor_get(PyObject *obj, const char *name, int bfloat16_bits, py_tensor *t);
/* Whether a call's n tensors (those given) live on the device (1) or the host (0); -1 with TypeError when
 * they mix, or ValueError naming one on another OpenCL context than pc's. */
int py_tensors_on_device(py_context *pc, const py_tensor *t, size_t n, const char *const *names);

/* t holds exactly `elems` elements of a float type (or, with allow_bool, bool): else ValueError. */
int py_tensor_expect(const py_tensor *t, const char *name, size_t elems, int allow_bool);

/* A Python sequence of n numbers into a C array (NULL / None: *out NULL, returns 0), or -1 naming `name`. */
int py_floats_from_sequence(PyObject *seq, const char *name, size_t n, float **out);
int py_longs_from_sequence(PyObject *seq, const char *name, size_t n, long long **out);
int py_sizes_from_sequence(PyObject *seq, const char *name, size_t n, size_t **out);
int py_ints_from_sequence(PyObject *seq, const char *name, size_t n, int **out);

/* A call's options, read from its keyword arguments by the call options' table (src/base/call_options.def):
 * each keyword is a row's C field name — scale, softcap, sinks, alibi_slopes, logit_scale, algorithm,
 * weights_output, softmax_precision, causal, key_lengths, query_offsets, window, additive, mask_kv_len —
 * and takes what its kind does (None or a number for scale, a sequence of `heads` numbers for a per-head
 * array, of `batch` integers for key_lengths and query_offsets, (left, right) for window, an integer for
 * an enum). Another keyword is a TypeError. The arrays are owned here until py_options_free. */
typedef struct call_options {
    clattn_sdpa_desc desc; /* the options read (CLATTN_SDPA_DESC_INIT's elsewhere) */
    clattn_masks masks;
    clattn_window window;
    size_t tree_count; /* the values of masks.tree_parents (any number is read; py_options_check_rows checks it) */
    void *owned[8];
    size_t n_owned;
} call_options;

int py_options_read(PyObject *kwargs, size_t batch, size_t heads, call_options *o);
void py_options_free(call_options *o);
/* 0 when the options fit a call of `rows` query rows (a tree's parents: one per row), else -1 with ValueError. */
int py_options_check_rows(const call_options *o, size_t rows);
/* The options read into d (its masks: o's), every row the table lets Python give. */
void py_options_apply(const call_options *o, clattn_sdpa_desc *d);

/* a·b·c·d into *out, or -1 with ValueError when it overflows. */
int py_product(size_t *out, size_t a, size_t b, size_t c, size_t d);

/* A float32 output (lse, weights) of exactly `elems` elements, or None (0); -1 naming it otherwise. */
int py_float_output(const py_tensor *t, const char *name, size_t elems);

/* A new buffer of `bytes` on the context, filled from data (NULL: not filled); NULL with *st set. */
cl_mem py_upload(py_context *pc, const void *data, size_t bytes, clattn_status *st);

/* The functions and types of each file, for the module table (module.c). */
PyObject *py_sdpa(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *py_sdpa_backward(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *py_mha(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *py_merge(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *py_sparse(PyObject *self, PyObject *args, PyObject *kwargs);
extern PyType_Spec pyclattn_mods_spec;
extern PyType_Spec pyclattn_kvcache_spec;

/* A call's mods and the contents of their auxiliary tensors, read before the call (GIL held) and written
 * to the device inside the call's critical section (pyclattn_mods_write, GIL released, the context's
 * lock held), so that no other thread's aux lands between the write and the call. */
typedef struct mods_staged {
    const clattn_mods *mods; /* NULL: no mods */
    const clattn_block_mask *block_mask; /* NULL: none (made from `mods`: a BlockMask) */
    PyObject *owner;         /* the Mods object (borrowed: the caller's argument holds it) */
    size_t naux;             /* 0: nothing to write */
    py_tensor aux[CLATTN_MODS_MAX_AUX];
} mods_staged;

/* obj: None, a Mods, or (Mods, arrays[, BlockMask]) with arrays the new contents of its auxiliary tensors
 * in their order (each of the size the mods were made with; None: no new contents) and a block mask made
 * from those mods. 0, or -1 with TypeError / ValueError. */
int pyclattn_mods_stage(PyObject *obj, py_context *pc, mods_staged *s);
/* Writes the staged contents (blocking); call it with the context's lock held (no GIL needed). */
clattn_status pyclattn_mods_write(const mods_staged *s, py_context *pc);
void pyclattn_mods_release(mods_staged *s);
/* A Mods object's mods and its context (NULL with TypeError for another object). */
const clattn_mods *pyclattn_mods_of(PyObject *obj, py_context **pc);

extern PyType_Spec pyclattn_block_mask_spec;
/* A BlockMask's mask and the Mods it was made from (NULL with TypeError for another object). */
const clattn_block_mask *pyclattn_block_mask_of(PyObject *obj, PyObject **mods);

#endif
