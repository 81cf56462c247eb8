"""clattn: scaled dot-product and multi-head attention on any OpenCL device.

A Python face for the clattn C library (its extension module, ``clattn._clattn``, is C against CPython's
limited API). numpy arrays and PyTorch CPU tensors go in (DLPack, no copy) and the same kind comes out:

    >>> import numpy as np, clattn
    >>> q = k = v = np.random.rand(1, 8, 128, 64).astype(np.float32)
    >>> out = clattn.scaled_dot_product_attention(q, k, v, is_causal=True)

``scaled_dot_product_attention`` takes PyTorch's signature where the two overlap. Failures of the library
raise ``clattn.Error`` (``.status``, ``.status_name`` and the library's detail; a RuntimeError); what
Python can check itself raises ``TypeError``, or ``clattn.ArgumentError`` (a ValueError and a RuntimeError,
as PyTorch raises RuntimeError for the same arguments) naming the argument.
"""
import _thread
import os as _os
import sys as _sys
import threading as _threading
import time as _time

from . import _clattn
from ._clattn import Context, Error

__all__ = ["ArgumentError", "CallTimeoutError", "Context", "ContextBusyError", "Error", "KVCache", "devices",
           "default_context", "merge", "multi_head_attention", "scaled_dot_product_attention", "set_default_context",
           "wait_abandoned"]
__version__ = _clattn.library_version()

_ALGORITHMS = {"auto": 0, "fused": 1, "staged": 2, "decode": 3}
_WEIGHTS = {"softmax": 0, "qk": 1, "softcapped": 2, "masked": 3}
_DTYPES = {"float32": 0, "float16": 1, "bfloat16": 2}
_AUX_INDEX = {"length": 0, "query": 1, "key": 2, "position": 3, "head": 4, "batch": 5}
# clattn_mask_layout
_MASK_L_S, _MASK_B_H_L_S, _MASK_B_1_L_S, _MASK_1_H_L_S, _MASK_B_1_1_S = 1, 2, 3, 4, 5



class ArgumentError(ValueError, RuntimeError):
    """An argument the package refuses before the library runs (a shape, a mask with is_causal, mixed
    types): a ValueError, and a RuntimeError as PyTorch's scaled_dot_product_attention raises for the same
    arguments, so that the drop-in function raises what PyTorch raises."""



class CallTimeoutError(Error, TimeoutError):
    """A call ran past its ``timeout=`` and was abandoned (a clattn.Error and a TimeoutError; .status is
    CLATTN_ERROR_TIMEOUT). OpenCL cannot stop a running kernel: the call goes on until its kernel ends, its
    context stays locked until then (later calls on it raise ContextBusyError) and its results are dropped."""


class ContextBusyError(Error):
    """A call on a Context that still runs a call abandoned earlier (by its timeout= or by a
    KeyboardInterrupt): the context stays locked until that call's kernel ends, so the call is refused at once
    rather than left waiting. Other contexts are unaffected; wait_abandoned(context) waits for the end."""


# ---- Calls on a worker thread ------------------------------------------------------------------------------
#
# The C calls release the GIL but block their thread until the device is done, and a kernel cannot be stopped:
# a mods function that never returns would hold the calling thread for ever, and the main thread would not
# see Ctrl-C (Python runs its signal handlers between bytecodes, never inside a C call). So a call with a
# timeout, and on the main thread (where KeyboardInterrupt is raised) a call that may not end (one with mods,
# or compiling them), runs on a worker thread (kept and reused) while the caller waits on a lock in slices
# of _SLICE seconds — a wait Python interrupts to run signal handlers. Other calls run inline: the library's
# own kernels end, and the hand-over costs thread wake-ups (measured on a busy 2-core machine: 12 µs for the
# hand-over alone, a tiny SDPA call's best time 92 → 138 µs), against the 30 µs the package's whole layer
# takes. On a timeout or an exception while it waits (KeyboardInterrupt), the caller abandons the call: the
# worker keeps the call's arrays alive until it ends, the call's context is marked (ContextBusyError for
# later calls until it ends), and the caller's exception propagates.

_SLICE = 0.05
_MAIN_THREAD = _threading.main_thread().ident
_idle_workers = []      # workers waiting for a call (a list: append and pop are atomic under the GIL)
_abandoned_calls = {}   # Context → its abandoned _Job list, while one of them runs
_get_ident, _allocate_lock, _monotonic = _thread.get_ident, _thread.allocate_lock, _time.monotonic


class _Job:
    __slots__ = ("fn", "args", "context", "done", "result", "error", "finished", "abandoned", "abandoned_at",
                 "why")

    def __init__(self, context, fn, args):
        self.fn, self.args, self.context = fn, args, context
        self.done = _allocate_lock()
        self.done.acquire()
        self.result = self.error = None
        self.finished = self.abandoned = False


class _Worker:
    """A daemon thread that runs one call at a time (_call hands it over with .job and .go)."""
    __slots__ = ("go", "job")

    def __init__(self):
        self.go = _allocate_lock()
        self.go.acquire()
        self.job = None
        _threading.Thread(target=self._loop, name="clattn call", daemon=True).start()

    def _loop(self):
        go = self.go
        while True:
            go.acquire()
            job, self.job = self.job, None
            try:
                job.result = job.fn(*job.args)
            except BaseException as e:  # (handed to the caller, without this thread's frames)
                job.error = e.with_traceback(None)
            job.fn = job.args = None
            job.finished = True  # (before done: whoever holds done sees the job finished)
            job.done.release()
            if job.abandoned:
                job.result = job.error = None
                _forget(job.context)
            job = None
            _idle_workers.append(self)


def _forget(context):
    """Drop a context's entry in _abandoned_calls once each of its abandoned calls has finished."""
    jobs = _abandoned_calls.get(context)
    if jobs is not None and all(j.finished for j in jobs):
        _abandoned_calls.pop(context, None)


def _refuse_if_busy(context):
    jobs = _abandoned_calls.get(context)
    if jobs is None:
        return
    running = [j for j in jobs if not j.finished]
    if not running:
        _forget(context)
        return
    j = running[0]
    ago = _monotonic() - j.abandoned_at
    e = ContextBusyError(f"this context still runs a call abandoned {ago:.1f} s ago ({j.why}): "
                         "OpenCL cannot stop a running kernel, so the context stays locked until that call ends. "
                         "Use another clattn.Context, or clattn.wait_abandoned(context) to wait for the end")
    e.status = e.status_name = None
    raise e


def _abandon(job, why):
    job.why = why
    job.abandoned_at = _monotonic()
    job.abandoned = True  # (before the check: the worker, finishing now, sees one or the other)
    if not job.finished:
        _abandoned_calls.setdefault(job.context, []).append(job)


def _deadline(timeout):
    """timeout= (seconds, None: none) as a deadline on the monotonic clock, or None."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(f"timeout must be a number of seconds or None, not {type(timeout).__name__}")
    if not timeout > 0:  # (NaN too)
        raise ArgumentError(f"timeout must be positive (seconds) or None, not {timeout!r}")
    return _monotonic() + timeout  # (math.inf: no limit, but a call Ctrl-C can abandon)


def _call(context, fn, args, deadline=None, timeout=None, may_hang=False):
    """fn(*args): a C call on `context`. With a deadline, or on the main thread when it may not end
    (may_hang: mods), on a worker while this thread waits interruptibly up to the deadline (timeout: the
    seconds it was made from, for the message); else inline."""
    if _abandoned_calls:
        _refuse_if_busy(context)
    if deadline is None and not (may_hang and _get_ident() == _MAIN_THREAD):
        return fn(*args)
    try:
        worker = _idle_workers.pop()
    except IndexError:
        worker = _Worker()
    job = _Job(context, fn, args)
    done = job.done
    worker.job = job
    worker.go.release()
    try:
        if deadline is None:
            while not done.acquire(True, _SLICE):
                pass
        else:
            while not done.acquire(True, max(0.0, min(_SLICE, deadline - _monotonic()))):
                if _monotonic() >= deadline:
                    if done.acquire(False):  # (it ended just now: its results, not a timeout)
                        break
                    e = CallTimeoutError(f"the call ran past its timeout of {timeout:g} s and was abandoned: it runs "
                                         "on until its kernel ends (OpenCL cannot stop a kernel), its results are "
                                         "dropped, and its context stays locked until then (later calls on it "
                                         "raise clattn.ContextBusyError; other contexts are unaffected)")
                    e.status, e.status_name = -3017, "CLATTN_ERROR_TIMEOUT"
                    raise e
    except BaseException as e:  # (the timeout, or KeyboardInterrupt while it waited)
        if not job.finished:
            _abandon(job, f"timeout={timeout:g} s" if isinstance(e, CallTimeoutError) else type(e).__name__)
        raise
    error, job.error = job.error, None
    if error is not None:
        raise error
    return job.result


def wait_abandoned(context=None, timeout=None):
    """Wait until every call abandoned on `context` (the default context when None) has ended — by its
    timeout= or by a KeyboardInterrupt while it waited — and the context takes calls again. timeout: seconds
    at most (None: no limit). Returns True when none runs, False when the timeout came first. The wait can
    be interrupted (Ctrl-C)."""
    context = _context(context)
    deadline = _deadline(timeout)
    while True:
        jobs = _abandoned_calls.get(context)
        if jobs is None or all(j.finished for j in jobs):
            _forget(context)
            return True
        if deadline is not None and _monotonic() >= deadline:
            return False
        _time.sleep(0.01)


def _after_fork_in_child():
    _idle_workers.clear()  # (their threads did not come along; the abandoned calls' contexts stay marked)


if hasattr(_os, "register_at_fork"):
    _os.register_at_fork(after_in_child=_after_fork_in_child)

_default_context = None


def default_context():
    """The Context the calls use when given none: made on first use, on the device that
    ``Context()`` picks (CLATTN_DEVICE, else the first GPU, else the first device)."""
    global _default_context
    if _default_context is None:
        _default_context = Context()
    return _default_context


def set_default_context(context):
    """Make `context` (a clattn.Context) the one every call uses when given none; None: back to the one
    made on first use."""
    global _default_context
    if context is not None and not isinstance(context, Context):
        raise TypeError(f"context must be a clattn.Context, not {type(context).__name__}")
    _default_context = context


def _context(context):
    if context is None:
        return _default_context if _default_context is not None else default_context()
    if not isinstance(context, Context):
        raise TypeError(f"context must be a clattn.Context, not {type(context).__name__}")
    return context


def devices():
    """Every OpenCL device, as ``clattn devices`` lists them: dicts of spec ("P:D", what ``Context(device=)``
    takes), name, vendor, platform and type."""
    return _clattn.devices()


# ---- Tensors ------------------------------------------------------------------------------------------

def _numpy():
    np = _sys.modules.get("numpy")
    if np is None:
        import numpy as np
    return np


def _tensor(x, name):
    """x as the C side reads it (C-contiguous, on the host) and whether it is a PyTorch tensor."""
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


def _dtype_name(x, torch_side, bfloat16):
    if torch_side:
        return str(x.dtype).replace("torch.", "")
    name = x.dtype.name
    if bfloat16 and name == "uint16":
        return "bfloat16"
    return name


def _empty(like, torch_side, shape, dtype=None):
    """An output array of the input's kind: like's dtype, or float32 (dtype "float32")."""
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


def _per_head(values, name, count):
    return _sequence(values, name, count)


def _per_batch(values, name, count, kind):
    return _sequence(values, name, count, kind, "the call's sequences number")


def _options(scale, causal, window, softcap, sinks, alibi, offsets, key_lengths, mask_layout, mask_cols,
             algorithm, weights_output, heads, batch, logit_scale=None):
    """The keyword arguments the C side takes (attention.c's py_options_read: the C fields of
    src/call_options.def), those given only."""
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
                         ("key_lengths", _per_batch(key_lengths, "key_lengths", batch, int))):
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
    if layout is None:  # a broadcast clattn does not read in place: the full (…, H, L, S) copy
        target = tuple(batch_shape) + (heads, q_len, kv_len)
        if mask_torch:
            mask = mask.expand(target).contiguous()
        else:
            np = _numpy()
            mask = np.ascontiguousarray(np.broadcast_to(mask, target))
        layout = _MASK_B_H_L_S
    return mask, layout


# ---- Programmable attention ---------------------------------------------------------------------------

# Compiled mods per context, at most this many (the least recently used go first): the cache lives on the
# Context (Context._mods_cache), so a Context no one else holds is collected with its mods.
_MODS_PER_CONTEXT = 16


def _mods_source(source):
    """mods= as source text: a path (str or os.PathLike) names a file when one is there; a str that names no
    file is source text, unless it looks like a path (one line ending in .cl), which is refused."""
    if isinstance(source, _os.PathLike):
        path = _os.fspath(source)
    elif isinstance(source, str):
        if "\n" not in source and _os.path.isfile(source):
            path = source
        elif "\n" not in source and source.strip().endswith(".cl"):
            raise FileNotFoundError(f"mods: no file {source!r} (a .cl file's path, or the source text itself)")
        else:
            return source
    else:
        raise TypeError("mods must be OpenCL C source text or the path of a .cl file holding it (str or "
                        f"pathlib.Path), not {type(source).__name__}")
    if isinstance(path, bytes):
        path = _os.fsdecode(path)
    if not _os.path.isfile(path):
        raise FileNotFoundError(f"mods: no file {path!r}")
    with open(path, encoding="utf-8") as f:
        return f.read()


def _mods(context, source, aux, defines, deadline=None, timeout=None):
    """The compiled mods for (source, aux's names, types and indexes, defines) on a context — made once
    (compiling takes seconds on PoCL) — and the aux arrays each call writes into them: (Mods, arrays) as the
    C calls take it, or the Mods alone without aux."""
    if source is None:
        if aux or defines:
            raise ArgumentError("aux and defines belong to mods: give mods= too")
        return None
    source = _mods_source(source)
    entries, arrays = [], []
    for name, value in (aux or {}).items():
        index, length = "length", 0
        if isinstance(value, tuple):
            value, index = value
        array, _ = _tensor(value, f"aux[{name!r}]")
        if index not in _AUX_INDEX:
            raise ArgumentError(f"aux[{name!r}]: the index must be one of {sorted(_AUX_INDEX)}, not {index!r}")
        if index == "length":
            length = int(array.numel() if hasattr(array, "numel") else array.size)
        entries.append((name, array, _AUX_INDEX[index], length))
        arrays.append(array)
    if isinstance(defines, dict):
        defines = [f"{k}={v}" if v is not None else str(k) for k, v in defines.items()]
    defines = tuple(defines or ())
    for d in defines:
        if isinstance(d, str) and d.rstrip(" \t").endswith("\\"):
            # (the generated "#define NAME VALUE" line would continue onto the next line of the source)
            raise ArgumentError(f"defines: {d!r} ends in a backslash, which would join the next line of the "
                             "generated source to its #define")
    key = (source, defines, tuple((n, str(a.dtype), i, length, tuple(a.shape)) for n, a, i, length in entries))
    cache = context._mods_cache
    made = cache.pop(key, None)
    if made is None:
        made = _call(context, _clattn.Mods, (context, source, entries, list(defines)), deadline, timeout, True)
        while len(cache) >= max(1, _MODS_PER_CONTEXT):
            del cache[next(iter(cache))]
    cache[key] = made  # (the most recently used last)
    # The call writes the aux tensors itself, in its critical section (another thread's call with other aux
    # cannot land between the write and the call); the backward pass writes them again.
    return (made, tuple(arrays)) if arrays else made


# ---- Attention ----------------------------------------------------------------------------------------

def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False, *, window=None, softcap=None, sinks=None, alibi=None,
                                 offsets=None, key_lengths=None, logit_scale=None, return_lse=False, weights=None,
                                 algorithm="auto", mods=None, aux=None, defines=None, dtype=None, context=None,
                                 timeout=None):
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
    per head, a temperature, multiplying the scaled scores before soft-capping); return_lse (also the
    log-sum-exp, float32 (..., Hq, L)); weights ("softmax", "qk", "softcapped" or "masked": also that
    (..., Hq, L, S) float32 matrix, from the staged path); algorithm ("auto", "fused", "staged",
    "decode"); mods (OpenCL C source, or a .cl file, defining score_mod and/or mask_mod), aux (their
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
    if dropout_p:
        raise ArgumentError("dropout_p: clattn computes attention without dropout (give 0.0)")
    deadline = _deadline(timeout)
    causal, attn_mask = _causal_of(attn_mask, is_causal, query, key)
    if is_causal and attn_mask is not None:
        raise ArgumentError("attn_mask and is_causal: give one of them (as PyTorch requires)")
    if dtype not in (None, "bfloat16"):
        raise ArgumentError('dtype: None, or "bfloat16" for numpy uint16 arrays holding bfloat16 bits')
    ctx = _context(context)
    q, torch_side = _tensor(query, "query")
    k, k_torch = _tensor(key, "key")
    v, v_torch = _tensor(value, "value")
    if k_torch != torch_side or v_torch != torch_side:
        raise TypeError("query, key and value must all be numpy arrays or all PyTorch tensors")
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
                    algorithm, weights_output, heads, batch, logit_scale)
    out_shape = lead + (q_len, v_dim)
    lse_shape, w_shape = lead + (q_len,), lead + (q_len, kv_len)
    compiled = _mods(ctx, mods, aux, defines, deadline, timeout) if mods is not None or aux or defines else None
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
    if torch_side and _wants_grad(query, key, value):  # PyTorch's autograd: clattn's backward pass
        if weights is not None or dtype is not None:
            raise ArgumentError("weights= and dtype= are not taken with tensors that require grad")
        if empty_rows or no_keys or v_dim == 0 or q.shape[-1] != query.shape[-1]:
            out = _zero_size_torch(query, key, value, out_shape, no_keys, q, k, ctx, mask, shape, opts, compiled,
                                   targets, timeout)
            lse = _empty(q, True, lse_shape, "float32").fill_(-float("inf") if no_keys else 0.0)
            return (out, lse) if return_lse else out
        call = {"context": ctx, "mask": mask, "shape": shape, "options": opts, "mods": compiled,
                "out_shape": out_shape, "lse_shape": lse_shape, "timeout": timeout}
        qx, kx, vx = (t if target is None else t.expand(target) for t, target in zip((query, key, value), targets))
        out, lse = _autograd_function().apply(qx, kx, vx, call)
        return (out, lse) if return_lse else out
    out = _empty(q, torch_side, out_shape)
    lse = _empty(q, torch_side, lse_shape, "float32") if return_lse else None
    w = _empty(q, torch_side, w_shape, "float32") if weights is not None else None
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
    if lse is None and w is None:
        return out
    return (out,) + ((lse,) if lse is not None else ()) + ((w,) if w is not None else ())


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
    if torch_side:
        return x.expand(shape).contiguous()
    np = _numpy()
    return np.ascontiguousarray(np.broadcast_to(x, shape))


def _zeros_like_shape(x, torch_side, shape):
    if torch_side:
        return _sys.modules["torch"].zeros(shape, dtype=x.dtype)
    return _numpy().zeros(shape, dtype=x.dtype)


def _fill(x, value):
    if hasattr(x, "fill_"):
        x.fill_(value)
    else:
        x.fill(value)


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
    out, _ = _autograd_function().apply(q, k, vx, call)
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
        def forward(fctx, query, key, value, call):
            out, lse, saved = _attention_forward(call, query, key, value, _TorchArrays(torch))
            fctx.save_for_backward(*saved)
            fctx.call = call
            fctx.mark_non_differentiable(lse)
            return out, lse

        @staticmethod
        def backward(fctx, grad_out, grad_lse):
            return _attention_backward(fctx.call, fctx.saved_tensors, grad_out, _TorchArrays(torch))

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
    value, and None for the call). clattn_sdpa_backward in float32: 16-bit tensors widened for it, their
    gradients rounded back."""
    q, k, v, out, lse = saved
    dq, dk, dv = (arrays.empty(q.shape, float32=True), arrays.empty(k.shape, float32=True),
                  arrays.empty(v.shape, float32=True))
    timeout = call.get("timeout")
    _call(call["context"], _with_options(_clattn.sdpa_backward, call["options"]),
          (call["context"], arrays.wide(q), arrays.wide(k), arrays.wide(v), arrays.wide(out), lse,
           arrays.wide(grad_out), dq, dk, dv, call["mask"], call["shape"], call["mods"]),
          _deadline(timeout), timeout, call["mods"] is not None)
    return arrays.cast(dq, q), arrays.cast(dk, k), arrays.cast(dv, v), None


def multi_head_attention(x, w_q, w_k, w_v, w_o=None, b_q=None, b_k=None, b_v=None, b_o=None, *, heads, kv_heads=None,
                         kv=None, qk_dim=None, attn_mask=None, is_causal=False, scale=None, window=None, softcap=None,
                         sinks=None, alibi=None, key_lengths=None, logit_scale=None, algorithm="auto", mods=None,
                         aux=None, defines=None, dtype=None, context=None, timeout=None):
    """A multi-head attention layer: Q = X·W_Q + b_Q, K = KV·W_K + b_K, V = KV·W_V + b_V (KV = X, or ``kv``
    for cross-attention), per head SDPA, the heads concatenated, then ·W_O + b_O when w_o is given.

    x (B, L, d_model) or (L, d_model); kv (B, S, d_kv); the weights are (in, out) — X·W, the transpose of
    ``torch.nn.Linear.weight`` —: w_q (d_model, heads·Dk), w_k (d_kv, kv_heads·Dk), w_v (d_kv, kv_heads·Dv),
    w_o (heads·Dv, d_out). kv_heads: K/V heads (grouped-query attention; w_k and w_v carry kv_heads
    heads' columns). Masks and options as in scaled_dot_product_attention (attn_mask broadcast to
    (B, heads, L, S)): is_causal, scale, window, softcap, sinks, alibi, key_lengths, logit_scale (a scale per
    head multiplying the scaled scores before soft-capping), algorithm, mods (with aux and defines);
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


class KVCache:
    """A KV cache for decoding, kept on the device: ``append`` new keys and values, ``attend`` queries over
    every row held; the lengths are kept here.

    KVCache(batch, kv_heads, capacity, head_dim, v_dim=None, dtype="float32", block_size=None, context=None):
    capacity rows per sequence; dtype "float32", "float16" or "bfloat16" (the tensors appended must have
    it: in numpy, bfloat16 as uint16 bits); block_size None for a dense cache, else a power of two from 8 to
    256 for a paged one (a pool of blocks handed to each sequence as it grows, as vLLM keeps them).
    """

    def __init__(self, batch, kv_heads, capacity, head_dim, v_dim=None, dtype="float32", block_size=None,
                 context=None):
        if dtype not in _DTYPES:
            raise ArgumentError(f"dtype must be one of {sorted(_DTYPES)}, not {dtype!r}")
        self.context = _context(context)
        self.batch, self.kv_heads, self.capacity = batch, kv_heads, capacity
        self.head_dim, self.v_dim, self.dtype = head_dim, v_dim or head_dim, dtype
        self.block_size = block_size
        self._cache = _clattn.KVCache(self.context, batch, kv_heads, capacity, head_dim, self.v_dim, _DTYPES[dtype],
                                      block_size or 0)

    @property
    def lengths(self):
        """The rows each sequence holds (a tuple of batch integers)."""
        return _call(self.context, getattr, (self._cache, "lengths"))

    @property
    def blocks_used(self):
        """Paged caches: the pool's blocks handed to sequences so far."""
        return _call(self.context, getattr, (self._cache, "blocks_used"))

    def reset(self):
        """Empty every sequence."""
        _call(self.context, self._cache.reset, ())

    def append(self, key, value):
        """Append n rows to every sequence: key (batch, kv_heads, n, head_dim), value (…, v_dim)."""
        k, _ = _tensor(key, "key")
        v, _ = _tensor(value, "value")
        if len(k.shape) != 4 or len(v.shape) != 4 or k.shape[2] != v.shape[2]:
            raise ArgumentError(f"key {tuple(k.shape)} and value {tuple(v.shape)}: (batch, kv_heads, n, D), the same n")
        _call(self.context, self._cache.append, (k, v, int(k.shape[2]), self.dtype == "bfloat16"))

    def attend(self, query, *, is_causal=True, scale=None, window=None, softcap=None, sinks=None, alibi=None,
               logit_scale=None, return_lse=False, algorithm="auto"):
        """Attention of query (batch, heads, L, head_dim) over each sequence's rows: with is_causal (the
        default) the L queries are the last L rows appended (query i sees its rows up to itself); the
        options as in scaled_dot_product_attention. Returns out (batch, heads, L, v_dim) of query's kind
        and type, or (out, lse)."""
        q, torch_side = _tensor(query, "query")
        if len(q.shape) != 4 or q.shape[0] != self.batch or q.shape[3] != self.head_dim:
            raise ArgumentError(f"query {tuple(q.shape)}: ({self.batch}, heads, L, {self.head_dim})")
        heads, q_len = int(q.shape[1]), int(q.shape[2])
        opts = _options(scale, 1 if is_causal else 0, window, softcap, sinks, alibi, None, None, 0, 0, algorithm, 0,
                        heads, self.batch, logit_scale)
        out = _empty(q, torch_side, (self.batch, heads, q_len, self.v_dim))
        lse = _empty(q, torch_side, (self.batch, heads, q_len), "float32") if return_lse else None
        _call(self.context, _with_options(self._cache.attend, opts), (q, out, lse, heads, q_len,
                                                                      self.dtype == "bfloat16"))
        return (out, lse) if return_lse else out
