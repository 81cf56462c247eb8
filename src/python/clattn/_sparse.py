"""clattn.sparse_attention: top-k sparse attention over a dense K/V (DeepSeek's sparse attention, NSA's selected
tokens), differentiable on PyTorch tensors (clattn_sdpa_sparse and clattn_sdpa_sparse_backward)."""
import sys as _sys

from . import _clattn, _device
from ._arrays import _call_inputs, _dtype_name, _empty, _numpy, _options, _with_options
from ._calls import ArgumentError, _call


def sparse_attention(query, key, value, indices, *, scale=None, softcap=None, sinks=None, key_lengths=None,
                     return_lse=False, context=None):
    """Each query row attends only to the keys its indices select.

    query (B, Hq, L, E), key (B, H, S, E), value (B, H, S, Ev), H dividing Hq (a K/V head serves Hq / H query
    heads); indices (B, L, k) integers: the positions query row i of batch b attends to (every head of it), in
    any order — a negative value, or a position at or past the sequence's keys, selects nothing; a position given
    twice counts twice. float32, float16 or bfloat16 (one type for query, key and value); numpy arrays, PyTorch
    CPU tensors or pyopencl arrays (then indices is an int32 pyopencl array too). The cost is the selected keys'.

    scale (default 1/sqrt(E)); softcap (c·tanh(s/c)); sinks (a logit per query head in each row's denominator);
    key_lengths (B,): the keys each sequence holds; return_lse: also the log-sum-exp, float32 (B, Hq, L) (−inf
    for a row that selects nothing: its output is 0); context: a clattn.Context.

    On PyTorch tensors that require grad the result is differentiable: its backward runs
    clattn_sdpa_sparse_backward (float32 arithmetic; a 16-bit call's forward keeps its output in float32 for it)
    for query, key, value, and sinks when they are a tensor that requires grad.
    """
    on_device = _device.is_device_array(query)
    ctx, q, k, v, torch_side = _call_inputs(query, key, value, context)
    if len(q.shape) != 4 or len(k.shape) != 4 or len(v.shape) != 4:
        raise ArgumentError(f"query {tuple(q.shape)}, key {tuple(k.shape)}, value {tuple(v.shape)}: each (batch, "
                            "heads, rows, head size)")
    (batch, heads, q_len, qk_dim), (kv_len, v_dim) = q.shape, v.shape[2:]
    kv_heads = k.shape[1]
    if (k.shape[0], k.shape[3]) != (batch, qk_dim) or tuple(v.shape[:3]) != tuple(k.shape[:3]) or heads % kv_heads:
        raise ArgumentError(f"query {tuple(q.shape)}, key {tuple(k.shape)}, value {tuple(v.shape)}: key and value "
                            "(batch, H, S, ·) with query's batch and head size, H dividing query's heads")
    names = {_dtype_name(x, torch_side, False) for x in (q, k, v)}
    if len(names) != 1:
        raise ArgumentError(f"query, key and value must have one dtype, not {sorted(names)}")
    idx = _indices(indices, torch_side, on_device)
    if tuple(idx.shape[:2]) != (batch, q_len) or len(idx.shape) != 3 or idx.shape[2] < 1:
        raise ArgumentError(f"indices {tuple(idx.shape)}: ({batch}, {q_len}, k), the positions each query row "
                            "attends to")
    call = {"context": ctx, "indices": idx, "options": _options(scale, 0, None, softcap, sinks, None, None,
                                                                 key_lengths, 0, 0, "auto", 0, heads, batch),
            "shape": (batch, heads, kv_heads, q_len, kv_len, qk_dim, v_dim, idx.shape[2])}
    torch = _sys.modules.get("torch")
    sinks_grad = sinks if torch_side and _wants_grad(torch, sinks) else None
    if torch_side and _wants_grad(torch, query, key, value, sinks_grad):
        call["sinks_grad"] = sinks_grad is not None
        out, lse = _autograd_function(torch).apply(query, key, value, sinks_grad, call)
        return (out, lse) if return_lse else out
    out = _empty(q, torch_side, (batch, heads, q_len, v_dim))
    lse = _empty(q, torch_side, (batch, heads, q_len), "float32") if return_lse else None
    _run(call, q, k, v, out, lse)
    return (out, lse) if return_lse else out


def _indices(indices, torch_side, on_device):
    """The indices as int32, C-contiguous, of the inputs' kind."""
    if on_device:
        if not _device.is_device_array(indices) or str(indices.dtype) != "int32":
            raise TypeError("indices: an int32 pyopencl array, with pyopencl query, key and value")
        return indices
    if torch_side:
        torch = _sys.modules["torch"]
        return (indices if isinstance(indices, torch.Tensor) else torch.as_tensor(indices)).detach().to(
            torch.int32).contiguous()
    np = _numpy()
    return np.ascontiguousarray(indices, dtype=np.int32)


def _run(call, q, k, v, out, lse, dout=None, dq=None, dk=None, dv=None, dsinks=None):
    """The C call (forward, or with dout the backward), on the arrays' queues where they are device arrays."""
    ctx, idx = call["context"], call["indices"]
    arrays = (q, k, v, idx, out, lse, dout, dq, dk, dv)
    device = _device.is_device_array(q)
    if device:
        _device.before(ctx, arrays)
    _call(ctx, _with_options(_clattn.sparse, call["options"]),
          (ctx, q, k, v, idx, out, lse, dout, dq, dk, dv, dsinks, call["shape"]))
    if device:
        _device.after(ctx, arrays)


def _wants_grad(torch, *tensors):
    return torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad for t in tensors)


_function = None


def _autograd_function(torch):
    """A torch.autograd.Function: the forward through clattn_sdpa_sparse (its output kept in float32 for the
    backward), the backward through clattn_sdpa_sparse_backward."""
    global _function
    if _function is not None:
        return _function

    class SparseAttention(torch.autograd.Function):
        @staticmethod
        def forward(fctx, query, key, value, sinks, call):  # (sinks: a tensor that requires grad, or None)
            q, k, v = (t.detach().contiguous() for t in (query, key, value))
            batch, heads, _, q_len, _, _, v_dim, _ = call["shape"]
            out = torch.empty((batch, heads, q_len, v_dim), dtype=torch.float32)
            lse = torch.empty((batch, heads, q_len), dtype=torch.float32)
            _run(call, q, k, v, out, lse)
            fctx.save_for_backward(q, k, v, out, lse)
            fctx.call = call
            fctx.sinks_dtype = None if sinks is None else sinks.dtype
            fctx.mark_non_differentiable(lse)
            return out.to(query.dtype), lse

        @staticmethod
        def backward(fctx, grad_out, grad_lse):
            q, k, v, out, lse = (t.detach() for t in fctx.saved_tensors)  # (out may be the result itself)
            dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
            dsinks = torch.empty((q.shape[1],), dtype=torch.float32) if fctx.call["sinks_grad"] else None
            _run(fctx.call, q, k, v, out, lse, grad_out.detach().to(torch.float32).contiguous(), dq, dk, dv, dsinks)
            return dq, dk, dv, None if dsinks is None else dsinks.to(fctx.sinks_dtype), None

    _function = SparseAttention
    return _function
