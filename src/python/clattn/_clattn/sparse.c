/* sparse(...): top-k sparse attention over a dense K/V (clattn_sdpa_sparse) and, given dout, its gradients
 * (clattn_sdpa_sparse_backward) — for clattn.sparse_attention. Host arrays are copied to buffers of the call
 * and the outputs read back; device arrays (pyopencl) are used in place. */
#include "pyclattn.h"

#include <string.h>

enum { Q, K, V, OUT, LSE, DOUT, DQ, DK, DV, IDX, N };
static const char *const names[N] = {"query", "key", "value", "out", "lse", "grad_out", "dq", "dk", "dv", "indices"};

/* sparse(ctx, q, k, v, indices, out, lse, dout, dq, dk, dv, dsinks, shape, **options): shape (B, H, KVH, L, S,
 * Dqk, Dv, top_k); indices int32 (B, L, top_k). Forward: dout, dq, dk, dv and dsinks None; out written, lse
 * (None: not wanted). Backward: out and lse the forward's (read), dq, dk, dv written, dsinks (H float32 on the
 * host) or None. Options: the call-option keywords (scale, softcap, sinks, key_lengths). */
PyObject *py_sparse(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    PyObject *ctx_obj, *obj[N], *dsinks_obj, *shape;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOO:sparse", &ctx_obj, &obj[Q], &obj[K], &obj[V], &obj[IDX], &obj[OUT],
                          &obj[LSE], &obj[DOUT], &obj[DQ], &obj[DK], &obj[DV], &dsinks_obj, &shape))
        return NULL;
    py_context *pc = pyclattn_context(ctx_obj, "context");
    Py_ssize_t B, H, KVH, L, S, D, DV_, TOP;
    if (!pc || !PyArg_ParseTuple(shape, "nnnnnnnn:shape", &B, &H, &KVH, &L, &S, &D, &DV_, &TOP))
        return NULL;
    if (B < 1 || H < 1 || KVH < 1 || L < 1 || S < 1 || D < 1 || DV_ < 1 || TOP < 1)
        return PyErr_Format(PyExc_ValueError, "sparse: every dimension of the call is at least 1");
    const int backward = obj[DOUT] != Py_None;
    call_options o;
    if (py_options_read(kwargs, (size_t)B, (size_t)H, &o) != 0)
        return NULL;
    size_t elems[N];
    int bad = py_product(&elems[Q], B, H, L, D) || py_product(&elems[K], B, KVH, S, D) ||
              py_product(&elems[V], B, KVH, S, DV_) || py_product(&elems[OUT], B, H, L, DV_) ||
              py_product(&elems[LSE], B, H, L, 1) || py_product(&elems[IDX], B, L, TOP, 1);
    elems[DOUT] = elems[OUT], elems[DQ] = elems[Q], elems[DK] = elems[K], elems[DV] = elems[V];
    py_tensor t[N] = {{0}}, dsinks = {0};
    for (int i = 0; i < N && !bad; i++) {
        const int optional = i == LSE ? !backward : i >= DOUT && i <= DV ? !backward : 0;
        bad = py_tensor_get_any(obj[i], names[i], optional, 0, &t[i]) != 0;
        if (!bad && i == IDX && (t[i].kind != 'i' || t[i].elem_size != 4 || t[i].elems != elems[i])) {
            PyErr_Format(PyExc_ValueError, "indices: %zu int32 values (batch, query rows, top_k)", elems[i]);
            bad = 1;
        } else if (!bad && i == LSE) {
            bad = py_float_output(&t[i], names[i], elems[i]);
        } else if (!bad && i != IDX && (t[i].capsule || t[i].mem)) {
            bad = py_tensor_expect(&t[i], names[i], elems[i], 0);
        }
    }
    bad = bad || py_tensor_get(dsinks_obj, "dsinks", 1, 0, &dsinks) || py_float_output(&dsinks, "dsinks", (size_t)H);
    const int device = bad ? 0 : py_tensors_on_device(pc, t, N, names);
    bad = bad || device < 0;
    /* The buffers: the device arrays themselves, or the host arrays' copies (the inputs filled, the outputs not). */
    cl_mem m[N] = {NULL};
    clattn_status st = CLATTN_SUCCESS;
    const int written[N] = {0, 0, 0, !backward, !backward, 0, 1, 1, 1, 0};
    for (int i = 0; i < N && !bad && st == CLATTN_SUCCESS; i++)
        if (t[i].mem)
            m[i] = t[i].mem;
        else if (t[i].capsule)
            m[i] = py_upload(pc, written[i] ? NULL : t[i].data, t[i].elems * t[i].elem_size, &st);
    char detail[2048] = "";
    if (!bad && st == CLATTN_SUCCESS) {
        clattn_sdpa_desc d = CLATTN_SDPA_DESC_INIT;
        d.batch = (size_t)B, d.heads = (size_t)H, d.kv_heads = (size_t)KVH, d.q_len = (size_t)L;
        d.kv_len = (size_t)S, d.qk_dim = (size_t)D, d.v_dim = (size_t)DV_;
        py_options_apply(&o, &d);
        d.q_dtype = t[Q].dtype, d.k_dtype = t[K].dtype, d.v_dtype = t[V].dtype, d.out_dtype = t[OUT].dtype;
        const size_t *lengths = d.masks ? d.masks->key_lengths : NULL; /* (the indices are the mask) */
        d.masks = NULL;
        const cl_command_queue queue = clattn_context_queue(pc->ctx);
        CLATTN_CALL(pc, detail, {
            st = backward ? clattn_sdpa_sparse_backward(pc->ctx, &d, (size_t)TOP, m[IDX], lengths, m[Q], m[K], m[V],
                                                        m[OUT], m[LSE], m[DOUT], m[DQ], m[DK], m[DV], dsinks.data)
                          : clattn_sdpa_sparse(pc->ctx, &d, (size_t)TOP, m[IDX], m[Q], m[K], m[V], NULL, lengths,
                                               m[OUT], m[LSE]);
            for (int i = 0; i < N && st == CLATTN_SUCCESS && !device; i++)
                if (written[i] && m[i])
                    st = (clattn_status)clEnqueueReadBuffer(queue, m[i], CL_TRUE, 0, t[i].elems * t[i].elem_size,
                                                            t[i].data, 0, NULL, NULL);
        });
    }
    for (int i = 0; i < N; i++) {
        if (m[i] && !t[i].mem)
            clReleaseMemObject(m[i]);
        py_tensor_release(&t[i]);
    }
    py_tensor_release(&dsinks);
    py_options_free(&o);
    if (bad)
        return NULL;
    if (st != CLATTN_SUCCESS)
        return pyclattn_raise(st, *detail ? detail : "allocating the call's buffers");
    Py_RETURN_NONE;
}
