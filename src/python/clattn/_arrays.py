"""The tensors a call takes and what it is told: arrays (numpy or PyTorch) as the extension reads them,
the options as its keywords (src/base/call_options.def's C fields), masks and broadcast shapes."""
import sys as _sys

from . import _clattn, _device
from ._calls import ArgumentError, _context

_ALGORITHMS = {"auto": 0, "fused": 1, "staged": 2, "decode": 3}
_WEIGHTS = {"softmax": 0, "qk": 1, "softcapped": 2, "masked": 3}
_DTYPES = {"float32": 0, "float16": 1, "bfloat16": 2}
# clattn_mask_layout
_MASK_L_S, _MASK_B_H_L_S, _MASK_B_1_L_S, _MASK_1_H_L_S, _MASK_B_1_1_S = 1, 2, 3, 4, 5


def _numpy():
    np = _sys.modules.get("numpy")
    if np is None:
        import numpy as np
    return np


def _tensor(x, name):
    """x as the C side reads it (C-contiguous, on the host; a device array as it is) and whether it is a
    PyTorch tensor."""
    if _device.is_device_array(x):
        return x, False
    torch = _sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        if x.device.type != "cpu":
            raise ArgumentError(f"{name} is on {x.device}: clattn reads CPU tensors (its devices are OpenCL's)")
        if x.requires_grad:
            x = x.detach()
        return (x if x.is_contiguous() else x.contiguous()), True
    np = _numpy()
    a = x if type(x) is np.ndarray else np.asarray(x)  # (the buffer protocol, without a copy)
    if not a.dtype.isnative:  # (DLPack carries native byte order only: ">f4" is converted to float32)
        a = a.astype(a.dtype.newbyteorder("="))
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)
    if not a.flags.writeable:  # (numpy's DLPack export refuses read-only arrays)
        a = a.copy()
    return a, False


def _call_inputs(query, key, value, context):
    """A call's context (the arrays' own for device arrays), query, key and value as the C side reads them, and
    whether they are PyTorch tensors; TypeError where they are not all of one kind."""
    ctx = _device.call_context(context, query) if _device.is_device_array(query) else _context(context)
    q, torch_side = _tensor(query, "query")
    k, k_torch = _tensor(key, "key")
    v, v_torch = _tensor(value, "value")
    if k_torch != torch_side or v_torch != torch_side:
        raise TypeError("query, key and value must all be numpy arrays, all PyTorch tensors or all pyopencl arrays")
    return ctx, q, k, v, torch_side


def _dtype_name(x, torch_side, bfloat16):
    if torch_side:
        return str(x.dtype).replace("torch.", "")
    name = x.dtype.name
    if bfloat16 and name == "uint16":
        return "bfloat16"
    return name


def _empty(like, torch_side, shape, dtype=None):
    """An output array of the input's kind: like's dtype, or float32 (dtype "float32")."""
    if _device.is_device_array(like):
        return _device.empty(like, shape, dtype)
    if torch_side:
        torch = _sys.modules["torch"]
        return torch.empty(shape, dtype=torch.float32 if dtype == "float32" else like.dtype)
    np = _numpy()
    return np.empty(shape, dtype=np.float32 if dtype == "float32" else like.dtype)


def _sequence(values, name, count, kind=float, per="the call needs"):
    """None, or `count` numbers of `kind` (a sequence or an array) as a list."""
    if values is None:
        return None
    try:
        values = [kind(v) for v in (values.tolist() if hasattr(values, "tolist") else values)]
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a sequence of {count} {'numbers' if kind is float else 'integers'}") \
            from None
    if len(values) != count:
        raise ArgumentError(f"{name} holds {len(values)} values; {per} {count}")
    return values


def _tree(tree, batch, q_len):
    """A draft tree's parents — (L,) for every sequence, or one row of L per sequence ((..., L), the call's
    batch dimensions before it) — as the B·L integers of masks.tree_parents, or None."""
    if tree is None:
        return None
    flat = tree.tolist() if hasattr(tree, "tolist") else list(tree)
    while flat and isinstance(flat[0], (list, tuple)):
        flat = [p for row in flat for p in row]
    if len(flat) == q_len:
        return _sequence(flat, "tree", q_len, int) * batch
    return _sequence(flat, "tree", batch * q_len, int, f"one parent per query ({q_len}) or per query row:")


def _per_head(values, name, count):
    return _sequence(values, name, count)


def _per_batch(values, name, count, kind):
    return _sequence(values, name, count, kind, "the call's sequences number")


def _options(scale, causal, window, softcap, sinks, alibi, offsets, key_lengths, mask_layout, mask_cols,
             algorithm, weights_output, heads, batch, logit_scale=None, tree=None, q_len=0):
    """The keyword arguments the C side takes (attention.c's py_options_read: the C fields of
    src/base/call_options.def), those given only."""
    opts = {}
    if scale is not None:
        opts["scale"] = float(scale)
    if window is not None:
        if isinstance(window, int):
            window = (window, 0)
        try:
            left, right = window
            opts["window"] = (-1 if left is None else int(left), -1 if right is None else int(right))
        except (TypeError, ValueError):
            raise TypeError("window must be (left, right): keys before and after each query (None: unbounded)") \
                from None
    try:
        opts["algorithm"] = _ALGORITHMS[algorithm]
    except KeyError:
        raise ArgumentError(f"algorithm must be one of {sorted(_ALGORITHMS)}, not {algorithm!r}") from None
    if softcap:
        opts["softcap"] = float(softcap)
    for name, values in (("sinks", _per_head(sinks, "sinks", heads)), ("alibi_slopes", _per_head(alibi, "alibi", heads)),
                         ("logit_scale", _per_head(logit_scale, "logit_scale", heads)),
                         ("query_offsets", _per_batch(offsets, "offsets", batch, int)),
                         ("key_lengths", _per_batch(key_lengths, "key_lengths", batch, int)),
                         ("tree_parents", _tree(tree, batch, q_len))):
        if values is not None:
            opts[name] = values
    for name, value in (("causal", causal), ("additive", mask_layout), ("mask_kv_len", mask_cols),
                        ("weights_output", weights_output)):
        if value:
            opts[name] = value
    return opts


def _sdpa_call(ctx, q, k, v, out, lse, mask, w, shape, opts, mods, bf16):
    """_clattn.sdpa with the options as keywords."""
    return _clattn.sdpa(ctx, q, k, v, out, lse, mask, w, shape, mods, bf16, **opts)


def _with_options(fn, opts):
    """fn with the options as keywords (for _call, which passes positional arguments)."""
    return lambda *args: fn(*args, **opts)


def _mask_layout(mask_shape, batch_shape, heads, q_len, kv_len):
    """The clattn mask layout that reads a mask of mask_shape, broadcast as PyTorch broadcasts it to
    (*batch_shape, heads, q_len, kv_len) — or None when only an expanded copy will do."""
    target = tuple(batch_shape) + (heads, q_len, kv_len)
    if len(mask_shape) > len(target):
        raise ArgumentError(f"attn_mask of shape {tuple(mask_shape)} has more dimensions than the scores "
                         f"{target}")
    shape = (1,) * (len(target) - len(mask_shape)) + tuple(mask_shape)
    for have, want in zip(shape, target):
        if have not in (1, want):
            raise ArgumentError(f"attn_mask of shape {tuple(mask_shape)} does not broadcast to the scores' {target}")
    nb = len(batch_shape)
    b_full = shape[:nb] == tuple(batch_shape)
    b_one = all(d == 1 for d in shape[:nb])
    h, l, s = shape[nb:]
    if s != kv_len:
        return None
    if l == q_len and (h == heads or heads == 1) and b_full:
        return _MASK_B_H_L_S
    if l == q_len and h == 1 and b_one:
        return _MASK_L_S
    if l == q_len and h == 1 and b_full:
        return _MASK_B_1_L_S
    if l == q_len and h == heads and b_one:
        return _MASK_1_H_L_S
    if l == 1 and (h == 1 or heads == 1) and b_full:
        return _MASK_B_1_1_S
    return None


def _prepare_mask(attn_mask, query_dtype, torch_side, batch_shape, heads, q_len, kv_len):
    if attn_mask is None:
        return None, 0
    mask, mask_torch = _tensor(attn_mask, "attn_mask")
    layout = _mask_layout(tuple(mask.shape), batch_shape, heads, q_len, kv_len)
    if layout is None and _device.is_device_array(mask):
        _device.refuse_copy("attn_mask", f"its shape {tuple(mask.shape)}")
    if layout is None:  # a broadcast clattn does not read in place: the full (…, H, L, S) copy
        target = tuple(batch_shape) + (heads, q_len, kv_len)
        if mask_torch:
            mask = mask.expand(target).contiguous()
        else:
            np = _numpy()
            mask = np.ascontiguousarray(np.broadcast_to(mask, target))
        layout = _MASK_B_H_L_S
    return mask, layout


def _causal_of(attn_mask, is_causal, query, key):
    """(clattn's causal kind, the mask left to read) for a call's attn_mask and is_causal. PyTorch's
    CausalBias (torch.nn.attention.bias.causal_upper_left / causal_lower_right) is a tensor subclass whose
    memory means nothing (PyTorch dispatches on it): it becomes the built-in top-left or bottom-right causal
    mask. Any other tensor subclass that overrides __torch_function__ is refused rather than read."""
    torch = _sys.modules.get("torch")
    if attn_mask is None or torch is None or not isinstance(attn_mask, torch.Tensor):
        return (1 if is_causal else 0), attn_mask
    bias = _sys.modules.get("torch.nn.attention.bias")
    if bias is not None and isinstance(attn_mask, bias.CausalBias):
        if is_causal:
            raise ArgumentError("CausalBias should not be used with causal=True (as PyTorch requires)")
        q_len, kv_len = query.shape[-2], key.shape[-2]
        if (attn_mask.seq_len_q, attn_mask.seq_len_kv) != (q_len, kv_len):
            raise ArgumentError(f"attn_mask: a CausalBias for L={attn_mask.seq_len_q}, S={attn_mask.seq_len_kv} "
                                f"given to a call of L={q_len}, S={kv_len}")
        lower_right = attn_mask.variant == bias.CausalVariant.LOWER_RIGHT
        return (2 if lower_right else 1), None
    plain = (torch.Tensor.__torch_function__, torch._C._disabled_torch_function_impl)
    if getattr(type(attn_mask).__torch_function__, "__func__", type(attn_mask).__torch_function__) not in [
            getattr(f, "__func__", f) for f in plain]:
        raise ArgumentError(f"attn_mask is a {type(attn_mask).__name__}, a tensor subclass with its own "
                            "__torch_function__: its memory may not hold the mask it stands for; pass a plain "
                            "tensor")
    return (1 if is_causal else 0), attn_mask


def _broadcast_qkv(qs, ks, vs, enable_gqa):
    """The shapes of a call as PyTorch broadcasts them: query (..., L, E), key (..., S, E), value (..., S, Ev),
    their leading dimensions broadcast (NumPy's rules), the last of them the heads; K/V of one head serve
    every query head (read in place, as kv_heads = 1), with enable_gqa K/V heads that divide the query's.
    Returns (the output's leading dims, the batch dims, heads, kv_heads, (q, k, v) targets: the full shape
    to expand each to, None where it is read as it is)."""
    if len(qs) < 2 or len(ks) < 2 or len(vs) < 2:
        raise ArgumentError(f"query {tuple(qs)}, key {tuple(ks)} and value {tuple(vs)}: at least 2 dimensions "
                            "each (..., L, E), as PyTorch requires")
    if ks[-1] != qs[-1] or vs[-2] != ks[-2]:
        raise ArgumentError(f"query {tuple(qs)}, key {tuple(ks)} and value {tuple(vs)} do not agree")
    n = max(len(qs), len(ks), len(vs)) - 2
    ql, kl, vl = _padded(qs, n), _padded(ks, n), _padded(vs, n)
    if n == 0:
        return (), (), 1, 1, (None, None, None)
    try:
        batch_shape = _broadcast_shapes(ql[:-1], kl[:-1], vl[:-1])
    except ValueError:
        raise ArgumentError(f"the batch dimensions of query {tuple(qs)}, key {tuple(ks)} and value {tuple(vs)} "
                            "do not broadcast") from None
    qh, kh, vh = ql[-1], kl[-1], vl[-1]
    if kh != vh and 1 not in (kh, vh):
        raise ArgumentError(f"key {tuple(ks)} and value {tuple(vs)}: their heads differ")
    kvh = max(kh, vh)
    if qh == 1 and kvh > 1:  # (one query head against several K/V heads: PyTorch broadcasts the query)
        qh = kvh
    if kvh == qh or kvh == 1:
        kv_heads = kvh
    elif enable_gqa and kvh and qh % kvh == 0:
        kv_heads = kvh
    elif kvh and qh % kvh == 0:
        raise ArgumentError(f"key has {kvh} heads and query {qh}: pass enable_gqa=True")
    else:
        raise ArgumentError(f"key has {kvh} heads and query {qh}: they do not broadcast (nor divide, for GQA)")
    lead = batch_shape + (qh,)
    targets = (batch_shape + (qh,) + tuple(qs[-2:]), batch_shape + (kv_heads,) + tuple(ks[-2:]),
               batch_shape + (kv_heads,) + tuple(vs[-2:]))
    targets = (None if targets[0] == tuple(qs) else targets[0], None if targets[1] == tuple(ks) else targets[1],
               None if targets[2] == tuple(vs) else targets[2])
    return lead, batch_shape, qh, kv_heads, targets


# (Plain loops in what every call runs: generator expressions here left ~100 KiB that tracemalloc counts
# in test_no_leak_over_10000_calls, CPython 3.11's caches of them.)
def _padded(shape, n):
    """shape's leading dimensions (all but the last two), with 1s before them up to n."""
    lead = tuple(shape[:-2])
    return (1,) * (n - len(lead)) + lead


def _broadcast_shapes(a, b, c):
    """NumPy's broadcast of three shapes of one length (ValueError when they do not broadcast)."""
    out = []
    for i in range(len(a)):
        want = 1
        for d in (a[i], b[i], c[i]):
            if d != 1:
                if want != 1 and d != want:
                    raise ValueError("shapes do not broadcast")
                want = d
        out.append(want)
    return tuple(out)


def _expand(x, torch_side, shape):
    """x broadcast to shape, as a contiguous copy."""
    if _device.is_device_array(x):
        _device.refuse_copy(f"an array of shape {tuple(x.shape)}", f"its broadcast to {tuple(shape)}")
    if torch_side:
        return x.expand(shape).contiguous()
    np = _numpy()
    return np.ascontiguousarray(np.broadcast_to(x, shape))


def _zeros_like_shape(x, torch_side, shape):
    if _device.is_device_array(x):
        return _device.zeros(x, shape)
    if torch_side:
        return _sys.modules["torch"].zeros(shape, dtype=x.dtype)
    return _numpy().zeros(shape, dtype=x.dtype)


def _fill(x, value):
    if hasattr(x, "fill_"):
        x.fill_(value)
    else:
        x.fill(value)
