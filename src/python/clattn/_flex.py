"""clattn.flex_attention and clattn.create_block_mask: PyTorch FlexAttention's programs — score_mod and
mask_mod written in Python on tensors — run on clattn. Each function is traced with torch.fx, recorded as a
small graph (operations, arguments, the line of the user's function that called each), and written as
OpenCL C for clattn's mods (_flex_codegen), its derivative included; tensors the functions capture become
the mods' auxiliary tensors. PyTorch is needed only to trace (imported on first use)."""
import inspect
import operator
import os
import weakref

from . import _flex_codegen as _codegen
from ._calls import ArgumentError, _context
from ._flex_codegen import TranslationError

__all__ = ["BlockMask", "TranslationError", "create_block_mask", "flex_attention", "translate"]

# Captured tensors a call may carry (clattn's mods take at most 4 auxiliary tensors).
_MAX_TENSORS = 4


def _torch():
    try:
        import torch
    except ImportError as e:  # (clattn itself never needs PyTorch; tracing a Python function does)
        raise ImportError("clattn.flex_attention traces score_mod / mask_mod with torch.fx: install PyTorch") from e
    return torch


_TABLES = {}


def _op_tables(torch):
    """(torch.fx call targets → operation names, tensor method names → operation names), made once."""
    if not _TABLES:
        _TABLES["tables"] = _make_op_tables(torch)
    return _TABLES["tables"]


def _make_op_tables(torch):
    t = {operator.add: "add", operator.sub: "sub", operator.mul: "mul", operator.truediv: "truediv",
         operator.floordiv: "floordiv", operator.mod: "mod", operator.neg: "neg", operator.pow: "pow",
         operator.abs: "abs", operator.eq: "eq", operator.ne: "ne", operator.lt: "lt", operator.le: "le",
         operator.gt: "gt", operator.ge: "ge", operator.and_: "and", operator.or_: "or", operator.xor: "xor",
         operator.invert: "not", operator.getitem: "index"}
    names = {"add": "add", "sub": "sub", "subtract": "sub", "mul": "mul", "multiply": "mul", "div": "truediv",
             "divide": "truediv", "true_divide": "truediv", "floor_divide": "floordiv", "remainder": "mod",
             "neg": "neg", "negative": "neg", "pow": "pow", "abs": "abs", "eq": "eq", "ne": "ne", "lt": "lt",
             "le": "le", "gt": "gt", "ge": "ge", "logical_and": "and", "bitwise_and": "and", "logical_or": "or",
             "bitwise_or": "or", "logical_xor": "xor", "bitwise_xor": "xor", "logical_not": "not",
             "bitwise_not": "not", "where": "where", "clamp": "clamp", "clip": "clamp", "clamp_min": "clamp_min",
             "clamp_max": "clamp_max", "minimum": "minimum", "maximum": "maximum", "sign": "sign",
             "floor": "floor", "ceil": "ceil", "round": "round", "sigmoid": "sigmoid"}
    names.update({n: n for n in _codegen._UNARY_FLOAT})
    for name, op in names.items():
        fn = getattr(torch, name, None)
        if fn is not None:
            t[fn] = op
    t[torch.nn.functional.sigmoid] = "sigmoid"
    return t, names


_TENSOR_METHODS = {"float": "to_float", "double": "to_float", "half": "to_float", "bfloat16": "to_float",
                   "long": "to_long", "int": "to_long", "short": "to_long", "bool": "to_bool",
                   "__getitem__": "index", "__add__": "add", "__sub__": "sub", "__mul__": "mul",
                   "__truediv__": "truediv", "__floordiv__": "floordiv", "__mod__": "mod", "__neg__": "neg",
                   "__and__": "and", "__or__": "or", "__xor__": "xor", "__invert__": "not"}


def _users_line(filename, lineno):
    """"file:line" for a frame of the user's code, None for PyTorch's, clattn's or the interpreter's."""
    inside = (os.path.dirname(_torch().__file__), os.path.dirname(__file__))
    if filename.startswith(inside) or "<frozen" in filename:
        return None
    return f"{os.path.basename(filename)}:{lineno}"


def _line_of_caller():
    """The innermost frame of the user's code on the stack: the line of their function being traced."""
    frame = inspect.currentframe()
    while frame is not None:
        line = _users_line(frame.f_code.co_filename, frame.f_lineno)
        if line:
            return line
        frame = frame.f_back
    return "?"


def _record(fn, inputs):
    """fn traced by torch.fx: (graph as _flex_codegen takes it, captured tensors in order)."""
    torch = _torch()
    import torch.fx as fx

    class Tracer(fx.Tracer):
        def create_node(self, *args, **kwargs):
            node = super().create_node(*args, **kwargs)
            node.meta["clattn_line"] = _line_of_caller()
            return node

    tracer = Tracer()
    try:
        graph = tracer.trace(fn)
    except Exception as e:  # (Python control flow on traced values, unsupported Python, …)
        raise TranslationError(f"tracing {getattr(fn, '__name__', fn)} with torch.fx failed "
                               f"(at {_line_of_caller_of(e)}): {e}") from e
    root = tracer.root
    functions, methods = _op_tables(torch)
    tensors, tensor_ids, nodes, names = [], {}, [], {}
    # (torch.fx calls a traced function's parameters its "placeholder" nodes)
    parameters = [n.target for n in graph.nodes if n.op == "placeholder"]
    if len(parameters) != len(inputs):
        raise TranslationError(f"{getattr(fn, '__name__', fn)} takes {len(parameters)} arguments; "
                               f"FlexAttention passes {len(inputs)} ({', '.join(inputs)})")

    def tensor_ref(value, line):
        if id(value) not in tensor_ids:
            if len(tensors) == _MAX_TENSORS:
                raise TranslationError(f"{line}: more than {_MAX_TENSORS} captured tensors (clattn's mods take "
                                       f"at most {_MAX_TENSORS} auxiliary tensors)")
            tensor_ids[id(value)] = len(tensors)
            tensors.append(value)
        return {"tensor": tensor_ids[id(value)]}

    def convert(a, line):
        if isinstance(a, fx.Node):
            return names[a.name]
        if isinstance(a, torch.Tensor):
            return tensor_ref(a, line)
        if isinstance(a, (bool, int, float)) or a is None:
            return a
        if isinstance(a, (tuple, list)):
            return [convert(x, line) for x in a]
        if isinstance(a, torch.dtype):
            return a
        raise TranslationError(f"{line}: an argument of type {type(a).__name__} ({a!r})")

    for n in graph.nodes:
        line = n.meta.get("clattn_line", "?")
        if n.op == "placeholder":
            names[n.name] = {"input": inputs[parameters.index(n.target)]}
            continue
        if n.op == "get_attr":
            value = getattr(root, n.target)
            ref = tensor_ref(value, line)
            if value.dim() == 0:  # (a captured scalar tensor is read as a value)
                nodes.append({"name": n.name, "op": "index", "args": [ref], "line": line})
                names[n.name] = {"node": n.name}
            else:
                names[n.name] = ref
            continue
        if n.op == "output":
            out = n.args[0]
            output = convert(out, line)
            if isinstance(output, list):
                raise TranslationError(f"{line}: the function returns {len(output)} values, not one")
            break
        what = (f"torch.{getattr(n.target, '__name__', n.target)}" if n.op == "call_function"
                else f"Tensor.{n.target}" if n.op == "call_method" else f"{n.op} {n.target}")
        args = [convert(a, line) for a in n.args]
        kwargs = {k: convert(v, line) for k, v in n.kwargs.items()}
        op = functions.get(n.target) if n.op == "call_function" else None
        if n.op == "call_method":
            op = _TENSOR_METHODS.get(n.target) or methods.get(n.target)
            if n.target == "to" or n.target == "type":
                op = _cast_op(torch, args[1:] + list(kwargs.values()), line)
                args = args[:1]
                kwargs = {}
        node = _normalise(n.name, op, args, kwargs, line, what)
        nodes.append(node)
        names[n.name] = {"node": n.name}
    return {"inputs": list(inputs), "nodes": nodes, "output": output}, tensors


def _line_of_caller_of(exc):
    """The innermost frame of the user's code in an exception's traceback (where tracing failed)."""
    last, tb = "?", exc.__traceback__
    while tb is not None:
        last = _users_line(tb.tb_frame.f_code.co_filename, tb.tb_lineno) or last
        tb = tb.tb_next
    return last


def _cast_op(torch, args, line):
    dtype = next((a for a in args if isinstance(a, torch.dtype)), None)
    if dtype is None:
        raise TranslationError(f"{line}: Tensor.to / .type without a dtype (a device or another tensor)")
    if dtype == torch.bool:
        return "to_bool"
    return "to_float" if dtype.is_floating_point else "to_long"


def _normalise(name, op, args, kwargs, line, what):
    """One graph node from a traced call: its operation's arguments in _flex_codegen's order."""
    if op is None:
        raise TranslationError(f"{line}: the operation {what} has no OpenCL C translation "
                               f"(supported: {', '.join(_codegen.OPS)})")
    if op == "truediv" and kwargs.get("rounding_mode") is not None:
        mode = kwargs.pop("rounding_mode")
        if mode != "floor":
            raise TranslationError(f"{line}: {what} with rounding_mode={mode!r} (only 'floor' translates)")
        op = "floordiv"
    if op == "index":
        index = args[1] if len(args) > 1 else []
        index = index if isinstance(index, list) else [index]
        if not (isinstance(args[0], dict) and "tensor" in args[0]):
            raise TranslationError(f"{line}: {what} indexes something other than a captured tensor")
        for i in index:
            if not (isinstance(i, dict) or (isinstance(i, int) and not isinstance(i, bool))):
                raise TranslationError(f"{line}: a captured tensor indexed by {i!r} (only positions: no "
                                       "slices, None or Ellipsis)")
        args = [args[0]] + index
    elif op in ("clamp", "clamp_min", "clamp_max"):
        lo = kwargs.pop("min", args[1] if len(args) > 1 and op != "clamp_max" else None)
        hi = kwargs.pop("max", args[2] if len(args) > 2 else args[1] if op == "clamp_max" and len(args) > 1 else None)
        args, op = [args[0], lo, hi], "clamp"
    elif op in ("add", "sub") and "alpha" in kwargs:
        raise TranslationError(f"{line}: {what} with alpha=")
    if kwargs:
        raise TranslationError(f"{line}: {what} with keyword arguments {sorted(kwargs)}")
    for a in args:
        if isinstance(a, list):
            raise TranslationError(f"{line}: {what} with a sequence argument")
    return {"name": name, "op": op, "args": args, "line": line, "what": what}


def _tensor_kind(torch, t):
    if t.dtype == torch.bool:
        return _codegen.BOOL
    return _codegen.FLOAT if t.dtype.is_floating_point else _codegen.LONG


def _aux_array(torch, t):
    """A captured tensor as the kernel reads it: float32, int64 or uint8, contiguous, on the CPU."""
    t = t.detach().to("cpu")
    kind = _tensor_kind(torch, t)
    want = {_codegen.FLOAT: torch.float32, _codegen.LONG: torch.int64, _codegen.BOOL: torch.uint8}[kind]
    return t.to(want).contiguous().reshape(-1) if t.numel() else torch.zeros(1, dtype=want)


_SCORE_INPUTS = ("score", "b", "h", "q_idx", "kv_idx")
_MASK_INPUTS = ("b", "h", "q_idx", "kv_idx")

# Translations per (function, the objects its closure holds): tracing costs milliseconds, and a function
# re-bound to other captured tensors is traced again.
_translations = weakref.WeakKeyDictionary()


def _closure_key(fn):
    cells = getattr(fn, "__closure__", None) or ()
    return tuple(id(c.cell_contents) for c in cells if _cell_filled(c))


def _cell_filled(cell):
    try:
        cell.cell_contents
        return True
    except ValueError:
        return False


def _traced(fn, inputs):
    per_fn = _translations.get(fn) if _weakrefable(fn) else None
    key = (_closure_key(fn), inputs)
    if per_fn is not None and key in per_fn:
        return per_fn[key]
    made = _record(fn, inputs)
    if _weakrefable(fn):
        _translations.setdefault(fn, {})[key] = made
    return made


def _weakrefable(fn):
    try:
        weakref.ref(fn)
        return True
    except TypeError:
        return False


def translate(score_mod=None, mask_mod=None, bounds=None):
    """(source, tensors): the OpenCL C clattn compiles for score_mod (with its derivative score_mod_grad) and
    mask_mod, and the captured tensors its auxiliary tensors aux0 … hold (in that order). bounds: (B, H, L, S)
    of the calls it serves (indices proven inside a tensor there are read unguarded), or None. For reading
    what clattn made of a function; flex_attention calls it."""
    score_graph = mask_graph = None
    tensors = []
    if score_mod is not None:
        score_graph, tensors = _traced(score_mod, _SCORE_INPUTS)
    if mask_mod is not None:
        mask_graph, mask_tensors = _traced(mask_mod, _MASK_INPUTS)
        mask_graph, tensors = _merge_tensors(mask_graph, mask_tensors, tensors)
    torch = _torch()
    kinds = [(_tensor_kind(torch, t), tuple(t.shape)) for t in tensors]
    return _codegen.source(score_graph, mask_graph, kinds, bounds), tensors


def _merge_tensors(graph, own, tensors):
    """graph's tensor references renumbered after `tensors` (a tensor both capture is passed once)."""
    ids = [id(t) for t in tensors]
    tensors = list(tensors)
    renumber = {}
    for i, t in enumerate(own):
        if id(t) not in ids:
            if len(tensors) == _MAX_TENSORS:
                raise TranslationError(f"score_mod and mask_mod capture more than {_MAX_TENSORS} tensors together")
            ids.append(id(t))
            tensors.append(t)
        renumber[i] = ids.index(id(t))

    def fix(a):
        if isinstance(a, dict) and "tensor" in a:
            return {"tensor": renumber[a["tensor"]]}
        return a

    nodes = [dict(n, args=[fix(a) for a in n["args"]]) for n in graph["nodes"]]
    return dict(graph, nodes=nodes, output=fix(graph["output"])), tensors


class BlockMask:
    """clattn's block mask for flex_attention: a mask_mod over Q_LEN query positions × KV_LEN keys, in
    blocks of BLOCK_SIZE — a block no pair of which is visible is skipped, one whose every pair is visible
    calls no mask_mod. Made by create_block_mask; the blocks are evaluated on the device (clattn's
    block-mask builder) the first time the mask is used with each score_mod (they belong to the mods a
    call compiles), from the captured tensors' values then."""

    _KEPT = 4  # (blocks kept for this many score_mods, the least recently used going first)

    def __init__(self, mask_mod, B, H, Q_LEN, KV_LEN, BLOCK_SIZE):
        self.mask_mod, self.shape = mask_mod, (B, H, Q_LEN, KV_LEN)
        self.BLOCK_SIZE = BLOCK_SIZE
        self._blocks = {}  # id(Mods) → (Mods, _clattn.BlockMask)

    @property
    def seq_lengths(self):
        return self.shape[2], self.shape[3]

    def _for(self, made, arrays):
        """The blocks for a call's compiled mods (made, with aux contents `arrays`)."""
        from . import _clattn
        kept = self._blocks.pop(id(made), None)
        if kept is None or kept[0] is not made:
            if arrays is not None:
                made.update(list(arrays))  # (the builder reads the auxiliary tensors' buffers)
            B, H, q_len, kv_len = self.shape
            kept = (made, _clattn.BlockMask(made, B or 0, H or 0, q_len, kv_len, *self.BLOCK_SIZE))
            while len(self._blocks) >= self._KEPT:
                del self._blocks[next(iter(self._blocks))]
        self._blocks[id(made)] = kept
        return kept[1]

    def counts(self):
        """(empty, partial, full) blocks, as evaluated for the score_mod last used with it (None before)."""
        return next(reversed(self._blocks.values()))[1].counts() if self._blocks else None

    def __repr__(self):
        return (f"clattn.BlockMask(shape={self.shape}, BLOCK_SIZE={self.BLOCK_SIZE}, "
                f"mask_mod={getattr(self.mask_mod, '__name__', self.mask_mod)})")


def _block_size(value):
    if isinstance(value, int) and not isinstance(value, bool):
        value = (value, value)
    try:
        q, k = (int(v) for v in value)
    except (TypeError, ValueError):
        raise ArgumentError(f"BLOCK_SIZE: an int or a pair of ints, not {value!r}") from None
    if q < 1 or k < 1:
        raise ArgumentError(f"BLOCK_SIZE: positive, not {value!r}")
    return q, k


def create_block_mask(mask_mod, B, H, Q_LEN, KV_LEN, device=None, BLOCK_SIZE=128, _compile=False):
    """A BlockMask as torch.nn.attention.flex_attention.create_block_mask makes one: mask_mod(b, h, q_idx,
    kv_idx) → bool over B × H × Q_LEN × KV_LEN (B or H None: the same for every batch or head), in blocks of
    BLOCK_SIZE (an int, or (query, key) sizes). device and _compile are accepted for PyTorch's signature."""
    del device, _compile  # (PyTorch's arguments: nothing to do with them here)
    if not callable(mask_mod):
        raise TypeError(f"mask_mod must be a function, not {type(mask_mod).__name__}")
    for name, value in (("Q_LEN", Q_LEN), ("KV_LEN", KV_LEN)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ArgumentError(f"{name}: a positive int, not {value!r}")
    for name, value in (("B", B), ("H", H)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise ArgumentError(f"{name}: a positive int or None, not {value!r}")
    _traced(mask_mod, _MASK_INPUTS)  # (fails here, naming the line, if it cannot translate)
    return BlockMask(mask_mod, B, H, Q_LEN, KV_LEN, _block_size(BLOCK_SIZE))


def _mask_mod_of(block_mask):
    """The mask_mod of a clattn or PyTorch BlockMask (None for PyTorch's no-op mask)."""
    if block_mask is None:
        return None
    mask_mod = getattr(block_mask, "mask_mod", None)
    if mask_mod is None or not callable(mask_mod):
        raise TypeError(f"block_mask must be a BlockMask (clattn's or PyTorch's), not {type(block_mask).__name__}")
    if getattr(mask_mod, "__name__", "") == "noop_mask":
        return None
    return mask_mod


# FlexAttention's kernel options: tuning of its Triton / C++ kernels, none of which changes a result.
_KERNEL_OPTIONS = {"BLOCK_M", "BLOCK_N", "BLOCK_M1", "BLOCK_N1", "BLOCK_M2", "BLOCK_N2", "num_warps", "num_stages",
                   "PRESCALE_QK", "ROWS_GUARANTEED_SAFE", "BLOCKS_ARE_CONTIGUOUS", "WRITE_DQ", "FORCE_USE_FLEX_ATTENTION",
                   "OUTPUT_LOGSUMEXP", "OUTPUT_MAX", "BACKEND", "USE_TMA", "kpack", "matrix_instr_nonkdim",
                   "waves_per_eu", "fwd_BLOCK_M", "fwd_BLOCK_N", "bwd_BLOCK_M1", "bwd_BLOCK_N1", "bwd_BLOCK_M2",
                   "bwd_BLOCK_N2", "SPARSE_Q_BLOCK_SIZE", "SPARSE_KV_BLOCK_SIZE"}


def flex_attention(query, key, value, score_mod=None, block_mask=None, scale=None, enable_gqa=False,
                   return_lse=False, kernel_options=None, *, context=None, timeout=None):
    """torch.nn.attention.flex_attention.flex_attention on clattn: query (B, Hq, L, E), key (B, Hkv, S, E),
    value (B, Hkv, S, Ev); score_mod(score, b, h, q_idx, kv_idx) → the new score, block_mask (clattn's
    create_block_mask, or PyTorch's: its mask_mod is used) hiding the pairs its mask_mod is False for; scale
    (default 1/√E); enable_gqa (Hq a multiple of Hkv). Returns out, or (out, lse) with return_lse (the
    log-sum-exp per query row, natural log, float32; −inf for a row that sees no key, whose out is 0).
    Gradients flow to query, key and value (score_mod's derivative is derived from its graph);
    kernel_options (FlexAttention's tuning of its own kernels) are accepted and have nothing to change."""
    from ._attention import scaled_dot_product_attention
    for k in kernel_options or {}:
        if k not in _KERNEL_OPTIONS:
            raise ArgumentError(f"kernel_options: {k!r} is not one of FlexAttention's kernel options")
    mask_mod = _mask_mod_of(block_mask)
    if score_mod is None and mask_mod is None:
        return scaled_dot_product_attention(query, key, value, scale=scale, enable_gqa=enable_gqa,
                                            return_lse=return_lse, context=context, timeout=timeout)
    # (the shapes the functions are called for: the call's, and a clattn block mask's, which evaluates
    # mask_mod over its own)
    bounds = (query.shape[0], query.shape[1], query.shape[-2], key.shape[-2])
    if isinstance(block_mask, BlockMask):
        bounds = tuple(max(a, b or 1) for a, b in zip(bounds, block_mask.shape))
    source, tensors = translate(score_mod, mask_mod, bounds)
    torch = _torch()
    aux = {f"aux{i}": _aux_array(torch, t) for i, t in enumerate(tensors)}
    # (PyTorch's BlockMask: its mask_mod, evaluated at every pair; clattn's: its blocks too)
    blocks = block_mask._for if isinstance(block_mask, BlockMask) else None
    ctx = _context(context)

    def call(q, k, v, lse=return_lse):
        return scaled_dot_product_attention(q, k, v, scale=scale, enable_gqa=enable_gqa, return_lse=lse, mods=source,
                                            aux=aux, context=ctx, timeout=timeout, _block_mask=blocks)

    learned = [t for t in tensors if t.requires_grad]
    if learned and torch.is_grad_enabled():  # (a learnable table: its gradient too — _flex_learned)
        from ._flex_learned import attention_with_learned
        return attention_with_learned(torch, lambda q, k, v: call(q, k, v, True), query, key, value, score_mod,
                                      mask_mod, learned, scale, enable_gqa, return_lse)
    return call(query, key, value)
