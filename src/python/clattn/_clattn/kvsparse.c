/* KVCache._attend_sparse: top-k sparse attention over the cache (clattn_sdpa_sparse), each query row over the
 * keys its indices select, dense or paged, with q and out host or device arrays of the cache's float type. */
#include "kvcache.h"

#include <string.h>

clattn_status pykv_read_back(cl_command_queue queue, const py_tensor *t, const cl_mem *m, size_t out_bytes,
                             size_t lse_bytes)
{
    clattn_status st = (clattn_status)clEnqueueReadBuffer(queue, m[1], CL_TRUE, 0, out_bytes, t[1].data, 0, NULL, NULL);
    if (st == CLATTN_SUCCESS && m[2])
        st = (clattn_status)clEnqueueReadBuffer(queue, m[2], CL_TRUE, 0, lse_bytes, t[2].data, 0, NULL, NULL);
    return st;
}

void pykv_release(py_tensor *t, cl_mem *m, int device)
{
    for (int i = 0; i < 3; i++) {
        if (m[i] && !device)
            clReleaseMemObject(m[i]);
        py_tensor_release(&t[i]);
    }
}

/* _attend_sparse(q, out, lse, heads, q_len, bf16, indices, top_k[, scores], **options): indices the
 * B·q_len·top_k positions, row by row (−1: none); or indices None and scores (B, q_len, n) float32, an
 * indexer's, whose top_k highest each row attends to (clattn_topk, in the same call). */
PyObject *pykv_attend_sparse(PyObject *obj, PyObject *args, PyObject *kwargs)
{
    py_kvcache *c = (py_kvcache *)obj;
    py_context *pc = pykv_context(c);
    PyObject *q_obj, *out_obj, *lse_obj, *indices_obj, *scores_obj = Py_None;
    Py_ssize_t H, L, top_k;
    int bf16;
    if (!PyArg_ParseTuple(args, "OOOnnpOn|O:_attend_sparse", &q_obj, &out_obj, &lse_obj, &H, &L, &bf16, &indices_obj,
                          &top_k, &scores_obj))
        return NULL;
    const int select = indices_obj == Py_None; /* (the indices chosen here, from scores) */
    if (H < 1 || L < 1 || top_k < 1 || (size_t)H % c->kv_heads)
        return PyErr_Format(PyExc_ValueError, "attend: %zd query heads over %zu K/V heads, %zd rows of %zd indices", H,
                            c->kv_heads, L, top_k);
    call_options o;
    if (py_options_read(kwargs, c->batch, (size_t)H, &o) != 0)
        return NULL;
    static const char *const names[3] = {"query", "out", "lse"};
    py_tensor t[3] = {{0}}, scores = {0};
    size_t nq, no, nl, ni, n_scores = 0;
    int *indices = NULL;
    int bad = py_product(&ni, c->batch, L, top_k, 1) ||
              (select ? py_tensor_get(scores_obj, "scores", 0, 0, &scores) != 0 ||
                            scores.dtype != CLATTN_FLOAT32 || scores.elems % (c->batch * (size_t)L) != 0
                      : py_ints_from_sequence(indices_obj, "indices", ni, &indices) != 0) ||
              py_tensor_get_any(q_obj, "query", 0, bf16, &t[0]) || py_tensor_get_any(out_obj, "out", 0, bf16, &t[1]) ||
              py_tensor_get_any(lse_obj, "lse", 1, 0, &t[2]) || py_product(&nq, c->batch, H, L, c->qk_dim) ||
              py_product(&no, c->batch, H, L, c->v_dim) || py_product(&nl, c->batch, H, L, 1) ||
              py_tensor_expect(&t[0], "query", nq, 0) || py_tensor_expect(&t[1], "out", no, 0) ||
              py_float_output(&t[2], "lse", nl);
    if (select && !bad) /* (the keys a row scores: what the scores' size gives) */
        n_scores = scores.elems / (c->batch * (size_t)L);
    else if (select && !PyErr_Occurred())
        PyErr_Format(PyExc_TypeError, "scores: a float32 host array (batch %zu, %zd query rows, keys)", c->batch, L);
    const int device = bad ? 0 : py_tensors_on_device(pc, t, 3, names);
    bad = bad || device < 0;
    clattn_status st = CLATTN_SUCCESS;
    cl_mem m[3] = {NULL, NULL, NULL}, im = NULL;
    if (!bad && device) {
        m[0] = t[0].mem, m[1] = t[1].mem, m[2] = t[2].mem;
    } else if (!bad) {
        m[0] = py_upload(pc, t[0].data, nq * t[0].elem_size, &st);
        m[1] = m[0] ? py_upload(pc, NULL, no * t[1].elem_size, &st) : NULL;
        m[2] = m[1] && t[2].capsule ? py_upload(pc, NULL, nl * sizeof(float), &st) : NULL;
    }
    cl_mem sm = NULL; /* (the scores where they are, or uploaded) */
    if (!bad && m[1])
        im = py_upload(pc, indices, ni * sizeof(int), &st);
    if (!bad && im && select)
        sm = py_upload(pc, scores.data, scores.elems * sizeof(float), &st); /* (host scores: py_tensor_get's) */
    char detail[2048] = "";
    if (!bad && im && (sm || !select) && (m[2] || (!t[2].capsule && !t[2].mem))) {
        clattn_sdpa_desc d = pykv_desc(c, (size_t)H, (size_t)L);
        d.q_dtype = t[0].dtype, d.out_dtype = t[1].dtype;
        o.masks.causal = CLATTN_CAUSAL_NONE; /* (the indices are the mask) */
        py_options_apply(&o, &d);
        d.masks = NULL;
        const clattn_paged_cache p = pykv_paged_view(c);
        const cl_command_queue queue = clattn_context_queue(pc->ctx);
        CLATTN_CALL(pc, detail, {
            if (select)
                st = clattn_topk(pc->ctx, c->batch, (size_t)L, n_scores, (size_t)top_k, sm, c->lengths, im);
            if (st == CLATTN_SUCCESS)
                st = c->block_size ? clattn_sdpa_sparse(pc->ctx, &d, (size_t)top_k, im, m[0], NULL, NULL, &p,
                                                        c->lengths, m[1], m[2])
                                   : clattn_sdpa_sparse(pc->ctx, &d, (size_t)top_k, im, m[0], c->k, c->v, NULL,
                                                        c->lengths, m[1], m[2]);
            if (st == CLATTN_SUCCESS && !device)
                st = pykv_read_back(queue, t, m, no * t[1].elem_size, nl * sizeof(float));
        });
    }
    pykv_release(t, m, device);
    if (im)
        clReleaseMemObject(im);
    if (sm)
        clReleaseMemObject(sm);
    py_tensor_release(&scores);
    PyMem_Free(indices);
    py_options_free(&o);
    if (bad)
        return NULL;
    if (st != CLATTN_SUCCESS)
        return pyclattn_raise(st, *detail ? detail : "allocating the call's buffers");
    Py_RETURN_NONE;
}
