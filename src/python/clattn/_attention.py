"""The attention calls: scaled_dot_product_attention (differentiable on PyTorch tensors), the layer
(multi_head_attention) and the merge of partial results."""
import sys as _sys

from . import _clattn, _device
from ._arrays import (_WEIGHTS, _broadcast_qkv, _call_inputs, _causal_of, _dtype_name, _empty, _expand, _fill, _numpy, _options,
                      _per_head, _prepare_mask, _sdpa_call, _tensor, _with_options, _zeros_like_shape)
from ._calls import ArgumentError, _call, _context, _deadline
from . import _torch_ops
from ._programmable import _mods, _mods_source


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False, *, window=None, softcap=None, sinks=None, alibi=None,
                                 offsets=None, key_lengths=None, logit_scale=None, tree=None, return_lse=False,
                                 reproducible=False,
                                 weights=None,
                                 algorithm="auto", mods=None, aux=None, defines=None, dtype=None, context=None,
                                 timeout=None, _block_mask=None):
    """Attention as ``torch.nn.functional.scaled_dot_product_attention`` computes it, on an OpenCL device.

    query (..., Hq, L, E), key (..., H, S, E), value (..., H, S, Ev) → out (..., Hq, L, Ev), the same
    kind (numpy or PyTorch) and type as query. float32, float16 and bfloat16 (PyTorch's; in numpy uint16
    bit patterns with ``dtype="bfloat16"``).

    attn_mask: bool (True = may attend) or float (added), broadcastable to (..., Hq, L, S). is_causal:
    the top-left causal mask (query i sees keys 0..i). enable_gqa: H divides Hq (query head h reads K/V
    head h // (Hq / H)). dropout_p must be 0.

    clattn's own: window=(left, right) keys each query sees before and after it (None: unbounded);
    softcap (c·tanh(s/c)); sinks (a logit per head in each row's denominator); alibi (a slope per head);
    offsets (each batch's first query position); key_lengths (valid keys per batch); logit_scale (a scale
    per head, a temperature, multiplying the scaled scores before soft-capping); tree (tree attention for
    speculative decoding: each query's parent among the earlier queries, -1 for a root, as an (L,) array for
    every sequence or (..., L); query i at position p finds the tree's token t at key p - i + t and sees, of
    those, only its ancestors and itself — the draft's keys appended last, with offsets or a causal mask
    placing the queries on them); return_lse (also the
    log-sum-exp, float32 (..., Hq, L)); weights ("softmax", "qk", "softcapped" or "masked": also that
    (..., Hq, L, S) float32 matrix, from the staged path, or with reproducible=True the exact one); algorithm ("auto", "fused", "staged",
    "decode"); reproducible (True: the same bits on every OpenCL implementation, tuning and batch —
    clattn_arithmetic's CLATTN_ARITHMETIC_REPRODUCIBLE, docs/reproducible.md; the backward pass too); mods (OpenCL C source, or a .cl file, defining score_mod and/or mask_mod), aux (their
    auxiliary tensors: name → array, or (array, index) with index "query", "key", "position", "head",
    "batch" or "length"), defines ({"NAME": value} compile-time constants); context (a clattn.Context).

    timeout: seconds the call may take (None: no limit); past them it is abandoned and raises
    clattn.CallTimeoutError — OpenCL cannot stop a kernel, so it runs on, holding its context (later calls on
    that context raise clattn.ContextBusyError until it ends; see wait_abandoned). On the main thread a
    KeyboardInterrupt (Ctrl-C) abandons a call with mods, or any call given a timeout (math.inf: no limit, but
    interruptible), the same way.

    Returns out, or a tuple (out, lse), (out, weights) or (out, lse, weights). On PyTorch tensors that
    require grad (and with grad enabled) the result is differentiable: its .backward() runs clattn's
    backward pass (clattn_sdpa_backward; float32 arithmetic) for query, key and value.
    """
    torch = _sys.modules.get("torch")
    if torch is not None and isinstance(query, torch.Tensor) and torch.compiler.is_compiling():
        # (torch.compile: the torch.library operator, whose fake implementation gives the graph its shapes)
        if (dropout_p or window is not None or softcap is not None or sinks is not None or alibi is not None
                or offsets is not None or key_lengths is not None or logit_scale is not None or weights is not None
                or reproducible
                or tree is not None
                or algorithm != "auto" or defines or dtype is not None or timeout is not None or context is not None
                or any(isinstance(a, tuple) for a in (aux or {}).values())):
            raise ArgumentError("under torch.compile clattn takes attn_mask, is_causal, scale, enable_gqa, "
                                "return_lse, mods and aux (tensors by name), on the default context — call it "
                                "eagerly for the others")
        return _torch_ops.compiled_sdpa(torch, query, key, value, attn_mask, is_causal, scale, enable_gqa,
                                        return_lse, None if mods is None else _mods_source(mods), aux)
    if dropout_p:
        raise ArgumentError("dropout_p: clattn computes attention without dropout (give 0.0)")
    deadline = _deadline(timeout)
    causal, attn_mask = _causal_of(attn_mask, is_causal, query, key)
    if is_causal and attn_mask is not None:
        raise ArgumentError("attn_mask and is_causal: give one of them (as PyTorch requires)")
    if dtype not in (None, "bfloat16"):
        raise ArgumentError('dtype: None, or "bfloat16" for numpy uint16 arrays holding bfloat16 bits')
    on_device = _device.is_device_array(query)
    ctx, q, k, v, torch_side = _call_inputs(query, key, value, context)
    qs, ks, vs = q.shape, k.shape, v.shape
    names = (_dtype_name(q, torch_side, dtype == "bfloat16"), _dtype_name(k, torch_side, dtype == "bfloat16"),
             _dtype_name(v, torch_side, dtype == "bfloat16"))
    if len(set(names)) != 1 and set(names) <= {"float32", "float16", "bfloat16"}:  # (others: TypeError below)
        raise ArgumentError(f"query, key and value must have one dtype (as PyTorch requires), not {names[0]}, "
                            f"{names[1]} and {names[2]}")
    lead, batch_shape, heads, kv_heads, targets = _broadcast_qkv(qs, ks, vs, enable_gqa)
    q_len, qk_dim, kv_len, v_dim = qs[-2], qs[-1], ks[-2], vs[-1]
    if targets[0] is not None:  # (a broadcast clattn does not read in place: the expanded copy)
        q = _expand(q, torch_side, targets[0])
    if targets[1] is not None:
        k = _expand(k, torch_side, targets[1])
    if targets[2] is not None:
        v = _expand(v, torch_side, targets[2])
    batch = 1
    for d in batch_shape:
        batch *= d
    mask, layout = _prepare_mask(attn_mask, q.dtype, torch_side, batch_shape, heads, q_len, kv_len)
    weights_output = 0
    if weights is not None:
        if weights not in _WEIGHTS:
            raise ArgumentError(f"weights must be one of {sorted(_WEIGHTS)}, not {weights!r}")
        weights_output = _WEIGHTS[weights]
    opts = _options(scale, causal, window, softcap, sinks, alibi, offsets, key_lengths, layout, 0,
                    algorithm, weights_output, heads, batch, logit_scale, tree, q_len)
    if reproducible:
        opts["arithmetic"] = 1  # (CLATTN_ARITHMETIC_REPRODUCIBLE)
    out_shape = lead + (q_len, v_dim)
    lse_shape, w_shape = lead + (q_len,), lead + (q_len, kv_len)
    compiled = _mods(ctx, mods, aux, defines, deadline, timeout) if mods is not None or aux or defines else None
    if _block_mask is not None and compiled is not None:  # (clattn.flex_attention's: blocks of these mods)
        made, arrays = compiled if isinstance(compiled, tuple) else (compiled, None)
        compiled = (made, arrays, _block_mask(made, arrays))
    # Zero-size dimensions, as PyTorch's math gives them: no query row (B, H or L = 0) or Ev = 0: an empty
    # output; no key (S = 0): the softmax over nothing weighs nothing, out = 0 (lse = -inf); E = 0: every
    # score is 0 (an empty dot product), so q and k are one zero column each (what the masks and variants
    # then make of the scores stays theirs).
    empty_rows = batch * heads * q_len == 0
    no_keys = not empty_rows and kv_len == 0
    if not empty_rows and not no_keys and qk_dim == 0:
        q, k = _zeros_like_shape(q, torch_side, q.shape[:-1] + (1,)), _zeros_like_shape(k, torch_side, k.shape[:-1] + (1,))
        qk_dim = 1
    shape = (batch, heads, kv_heads, q_len, kv_len, qk_dim, v_dim)
    if torch_side and _wants_grad(attn_mask):
        raise ArgumentError("attn_mask requires grad: clattn's backward pass returns the gradients of query, key "
                            "and value but not the mask's (dS), so it would be None; detach the mask "
                            "(attn_mask.detach()) or compute this call with PyTorch's own SDPA")
    # Sinks given as a tensor that requires grad (a model's learned sinks) get their gradient from the backward.
    sinks_grad = sinks if torch_side and _wants_grad(sinks) else None
    if torch_side and _wants_grad(query, key, value, sinks_grad):  # PyTorch's autograd: clattn's backward pass
        if weights is not None or dtype is not None:
            raise ArgumentError("weights= and dtype= are not taken with tensors that require grad")
        if empty_rows or no_keys or v_dim == 0 or q.shape[-1] != query.shape[-1]:
            out = _zero_size_torch(query, key, value, out_shape, no_keys, q, k, ctx, mask, shape, opts, compiled,
                                   targets, timeout)
            lse = _empty(q, True, lse_shape, "float32").fill_(-float("inf") if no_keys else 0.0)
            return (out, lse) if return_lse else out
        call = {"context": ctx, "mask": mask, "shape": shape, "options": opts, "mods": compiled,
                "out_shape": out_shape, "lse_shape": lse_shape, "timeout": timeout, "sinks_grad": sinks_grad is not None}
        qx, kx, vx = (t if target is None else t.expand(target) for t, target in zip((query, key, value), targets))
        out, lse = _autograd_function().apply(qx, kx, vx, sinks_grad, call)
        return (out, lse) if return_lse else out
    out = _empty(q, torch_side, out_shape)
    lse = _empty(q, torch_side, lse_shape, "float32") if return_lse else None
    w = _empty(q, torch_side, w_shape, "float32") if weights is not None else None
    if on_device:  # (work on the arrays' own queues, where not the context's, done before the call)
        _device.before(ctx, (q, k, v, mask, out, lse, w))
    if no_keys:
        _fill(out, 0.0)
        if lse is not None:
            _fill(lse, -float("inf"))
    elif not empty_rows and v_dim == 0 and (lse is not None or w is not None):  # (lse and weights still are)
        v1 = _zeros_like_shape(v, torch_side, v.shape[:-1] + (1,))
        out1 = _empty(q, torch_side, lead + (q_len, 1))
        _call(ctx, _sdpa_call, (ctx, q, k, v1, out1, lse, mask, w, shape[:-1] + (1,), opts, compiled,
                                dtype == "bfloat16"), deadline, timeout, compiled is not None)
    elif not empty_rows and v_dim:
        _call(ctx, _sdpa_call, (ctx, q, k, v, out, lse, mask, w, shape, opts, compiled, dtype == "bfloat16"),
              deadline, timeout, compiled is not None)
    if on_device:  # (the arrays' queues, where not the context's, wait for the call's end)
        _device.after(ctx, (q, k, v, mask, out, lse, w))
    if lse is None and w is None:
        return out
    return (out,) + ((lse,) if lse is not None else ()) + ((w,) if w is not None else ())


def _zero_size_torch(query, key, value, out_shape, no_keys, q, k, ctx, mask, shape, opts, compiled, targets,
                     timeout):
    """The differentiable result of a zero-size call (autograd): empty or zero outputs joined to the inputs
    by a zero product (their gradients: zeros of their shapes); E = 0 runs the call with one zero column
    for q and k (value's gradient is what attention over equal scores gives)."""
    torch = _sys.modules["torch"]
    link = sum((t.sum() * 0 for t in (query, key, value) if t.requires_grad), torch.zeros((), dtype=query.dtype))
    if no_keys or 0 in out_shape:
        return torch.zeros(out_shape, dtype=query.dtype) + link
    call = {"context": ctx, "mask": mask, "shape": shape, "options": opts, "mods": compiled, "out_shape": out_shape,
            "lse_shape": out_shape[:-1], "timeout": timeout}
    vx = value if targets[2] is None else value.expand(targets[2])
    out, _ = _autograd_function().apply(q, k, vx, None, call)
    return out + link


def _wants_grad(*tensors):
    torch = _sys.modules["torch"]
    return torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad for t in tensors)


_function = None


def _autograd_function():
    """A torch.autograd.Function whose forward is clattn's SDPA and whose backward is clattn_sdpa_backward
    (float32 arithmetic: 16-bit tensors are widened for it, their gradients rounded back)."""
    global _function
    if _function is not None:
        return _function
    torch = _sys.modules["torch"]

    class Attention(torch.autograd.Function):
        @staticmethod
        def forward(fctx, query, key, value, sinks, call):  # (sinks: a tensor that requires grad, or None)
            out, lse, saved = _attention_forward(call, query, key, value, _TorchArrays(torch))
            fctx.save_for_backward(*saved)
            fctx.call = call
            fctx.sinks_dtype = None if sinks is None else sinks.dtype
            fctx.mark_non_differentiable(lse)
            return out, lse

        @staticmethod
        def backward(fctx, grad_out, grad_lse):
            dq, dk, dv, dsinks, _ = _attention_backward(fctx.call, fctx.saved_tensors, grad_out, _TorchArrays(torch))
            return dq, dk, dv, None if dsinks is None else dsinks.to(fctx.sinks_dtype), None

    _function = Attention
    return _function


class _TorchArrays:
    """What the autograd wiring needs of an array library, for PyTorch tensors (_NumpyArrays: the same for
    numpy arrays, which the suite runs the wiring with where PyTorch is not installed)."""

    def __init__(self, torch):
        self.torch = torch

    def input(self, t):
        return t.detach().contiguous()

    def empty(self, shape, like=None, float32=False):
        return self.torch.empty(tuple(shape), dtype=self.torch.float32 if float32 else like.dtype)

    def wide(self, t):
        return t.detach().to(self.torch.float32).contiguous()

    def cast(self, t, like):
        return t.to(like.dtype)


class _NumpyArrays:
    def input(self, t):
        return _numpy().ascontiguousarray(t)

    def empty(self, shape, like=None, float32=False):
        np = _numpy()
        return np.empty(tuple(shape), dtype=np.float32 if float32 else like.dtype)

    def wide(self, t):
        return _numpy().ascontiguousarray(t, dtype=_numpy().float32)

    def cast(self, t, like):
        return t.astype(like.dtype)


def _attention_forward(call, query, key, value, arrays):
    """The autograd Function's forward: (out, lse, what it saves for the backward). The output is computed
    and kept in float32 and returned in the query's type: the backward's D = dO·O read from an output
    rounded to 16 bits would carry that rounding into every gradient (issue 36, item 6: twice PyTorch's
    error in bfloat16; from the float32 output, the same as PyTorch's math backend)."""
    q, k, v = arrays.input(query), arrays.input(key), arrays.input(value)
    out = arrays.empty(call["out_shape"], float32=True)
    lse = arrays.empty(call["lse_shape"], float32=True)
    timeout = call.get("timeout")  # (a time limit for each pass: the backward runs later)
    _call(call["context"], _sdpa_call, (call["context"], q, k, v, out, lse, call["mask"], None, call["shape"],
                                        call["options"], call["mods"], False), _deadline(timeout), timeout,
          call["mods"] is not None)
    return arrays.cast(out, q), lse, (q, k, v, out, lse)


def _attention_backward(call, saved, grad_out, arrays):
    """The autograd Function's backward, whole: what it returns, in its order (the gradients of query, key,
    value, of the sinks — float32 (heads,) where call["sinks_grad"], else None — and None for the call).
    clattn_sdpa_backward in float32: 16-bit tensors widened for it, their gradients rounded back."""
    q, k, v, out, lse = saved
    dq, dk, dv = (arrays.empty(q.shape, float32=True), arrays.empty(k.shape, float32=True),
                  arrays.empty(v.shape, float32=True))
    dsinks = arrays.empty((call["shape"][1],), float32=True) if call.get("sinks_grad") else None
    timeout = call.get("timeout")
    _call(call["context"], _with_options(_clattn.sdpa_backward, call["options"]),
          (call["context"], arrays.wide(q), arrays.wide(k), arrays.wide(v), arrays.wide(out), lse,
           arrays.wide(grad_out), dq, dk, dv, call["mask"], call["shape"], call["mods"], dsinks),
          _deadline(timeout), timeout, call["mods"] is not None)
    return arrays.cast(dq, q), arrays.cast(dk, k), arrays.cast(dv, v), dsinks, None


def multi_head_attention(x, w_q, w_k, w_v, w_o=None, b_q=None, b_k=None, b_v=None, b_o=None, *, heads, kv_heads=None,
                         kv=None, qk_dim=None, attn_mask=None, is_causal=False, scale=None, window=None, softcap=None,
                         sinks=None, alibi=None, key_lengths=None, logit_scale=None, algorithm="auto", mods=None,
                         aux=None, defines=None, dtype=None, context=None, timeout=None, reproducible=False):
    """A multi-head attention layer: Q = X·W_Q + b_Q, K = KV·W_K + b_K, V = KV·W_V + b_V (KV = X, or ``kv``
    for cross-attention), per head SDPA, the heads concatenated, then ·W_O + b_O when w_o is given.

    x (B, L, d_model) or (L, d_model); kv (B, S, d_kv); the weights are (in, out) — X·W, the transpose of
    ``torch.nn.Linear.weight`` —: w_q (d_model, heads·Dk), w_k (d_kv, kv_heads·Dk), w_v (d_kv, kv_heads·Dv),
    w_o (heads·Dv, d_out). kv_heads: K/V heads (grouped-query attention; w_k and w_v carry kv_heads
    heads' columns). Masks and options as in scaled_dot_product_attention (attn_mask broadcast to
    (B, heads, L, S)): is_causal, scale, window, softcap, sinks, alibi, key_lengths, logit_scale (a scale per
    head multiplying the scaled scores before soft-capping), algorithm, reproducible (the same bits everywhere, as
    scaled_dot_product_attention's), mods (with aux and defines);
    timeout as in scaled_dot_product_attention. Returns (B, L, d_out), or (B, L, heads·Dv) without w_o, of x's
    kind and type.
    """
    if dtype not in (None, "bfloat16"):
        raise ArgumentError('dtype: None, or "bfloat16" for numpy uint16 arrays holding bfloat16 bits')
    if is_causal and attn_mask is not None:
        raise ArgumentError("attn_mask and is_causal: give one of them")
    deadline = _deadline(timeout)
    ctx = _context(context)
    torch = _sys.modules.get("torch")
    if torch is not None and _wants_grad(x, kv, w_q, w_k, w_v, w_o, b_q, b_k, b_v, b_o, attn_mask):
        raise ArgumentError("multi_head_attention computes no gradients (its result would have no grad_fn): "
                            "run it under torch.no_grad() or on tensors that do not require grad, or build the "
                            "layer from torch's projections and clattn.scaled_dot_product_attention, which is "
                            "differentiable")
    xt, torch_side = _tensor(x, "x")
    squeeze = len(xt.shape) == 2
    if squeeze:
        xt = xt.reshape((1,) + tuple(xt.shape))
    if len(xt.shape) != 3:
        raise ArgumentError(f"x of shape {tuple(xt.shape)}: (B, L, d_model) or (L, d_model)")
    kvt = None
    if kv is not None:
        kvt, _ = _tensor(kv, "kv")
        if len(kvt.shape) == 2:
            kvt = kvt.reshape((1,) + tuple(kvt.shape))
        if len(kvt.shape) != 3 or kvt.shape[0] != xt.shape[0]:
            raise ArgumentError(f"kv of shape {tuple(kvt.shape)}: (B, S, d_kv) with x's B")
    ws = {}
    for name, w in (("w_q", w_q), ("w_k", w_k), ("w_v", w_v), ("w_o", w_o), ("b_q", b_q), ("b_k", b_k),
                    ("b_v", b_v), ("b_o", b_o)):
        ws[name] = None if w is None else _tensor(w, name)[0]
        if ws[name] is not None and len(ws[name].shape) != (2 if name[0] == "w" else 1):
            raise ArgumentError(f"{name} of shape {tuple(ws[name].shape)}: a {'matrix (in, out)' if name[0] == 'w' else 'vector'}")
    if not isinstance(heads, int) or heads < 1:
        raise ArgumentError("heads must be a positive integer")
    kv_heads = heads if kv_heads is None else kv_heads
    B, L, d_model = xt.shape
    S, d_kv = (kvt.shape[1], kvt.shape[2]) if kvt is not None else (L, d_model)
    if ws["w_q"].shape[1] % heads or ws["w_v"].shape[1] % kv_heads:
        raise ArgumentError(f"w_q's {ws['w_q'].shape[1]} columns must divide into {heads} heads and w_v's "
                         f"{ws['w_v'].shape[1]} into {kv_heads}")
    qk_dim = qk_dim or ws["w_q"].shape[1] // heads
    v_dim = ws["w_v"].shape[1] // kv_heads
    d_out = ws["w_o"].shape[1] if ws["w_o"] is not None else 0
    mask, layout = _prepare_mask(attn_mask, xt.dtype, torch_side, (B,), heads, L, S)
    opts = _options(scale, 1 if is_causal else 0, window, softcap, sinks, alibi, None, key_lengths, layout, 0,
                    algorithm, 0, heads, B, logit_scale)
    if reproducible:
        opts["arithmetic"] = 1  # (CLATTN_ARITHMETIC_REPRODUCIBLE)
    out = _empty(xt, torch_side, (B, L, d_out if d_out else heads * v_dim))
    compiled = _mods(ctx, mods, aux, defines, deadline, timeout) if mods is not None or aux or defines else None
    _call(ctx, _with_options(_clattn.mha, opts),
          (ctx, xt, kvt, out, ws["w_q"], ws["b_q"], ws["w_k"], ws["b_k"], ws["w_v"], ws["b_v"], ws["w_o"], ws["b_o"],
           mask, None, (B, L, S, d_model, d_kv, heads, kv_heads, qk_dim, v_dim, d_out), compiled,
           dtype == "bfloat16"), deadline, timeout, compiled is not None)
    return out[0] if squeeze else out


def merge(outputs, lses, *, sinks=None, context=None, timeout=None):
    """Merge partial attention results over disjoint key sets into the result over their union
    (clattn_merge): outputs[p] (..., H, L, Dv) and lses[p] (..., H, L), float32, as scaled_dot_product_attention
    returns them with return_lse=True for each slice of the keys. sinks: a logit per head, counted once;
    timeout as in scaled_dot_product_attention. Returns (out, lse)."""
    deadline = _deadline(timeout)
    ctx = _context(context)
    if not outputs or len(outputs) != len(lses):
        raise ArgumentError("outputs and lses: as many of each, at least one")
    outs = [_tensor(o, f"outputs[{i}]")[0] for i, o in enumerate(outputs)]
    ls = [_tensor(x, f"lses[{i}]")[0] for i, x in enumerate(lses)]
    torch_side = _tensor(outputs[0], "outputs[0]")[1]
    shape = tuple(outs[0].shape)
    if len(shape) < 3 or any(tuple(o.shape) != shape for o in outs) or any(tuple(x.shape) != shape[:-1] for x in ls):
        raise ArgumentError("every output must be (..., H, L, Dv) and every lse (..., H, L), all of one shape")
    heads, q_len, v_dim = shape[-3:]
    batch = 1
    for d in shape[:-3]:
        batch *= d
    out = _empty(outs[0], torch_side, shape, "float32")
    lse = _empty(outs[0], torch_side, shape[:-1], "float32")
    _call(ctx, _clattn.merge, (ctx, outs, ls, out, lse, (batch, heads, q_len, v_dim), _per_head(sinks, "sinks", heads)),
          deadline, timeout)
    return out, lse
