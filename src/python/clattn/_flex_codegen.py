"""FlexAttention's score_mod / mask_mod, recorded as a small graph (see _flex_trace), written as OpenCL C for
clattn's mods: score_mod, its derivative score_mod_grad (forward mode, from the graph) and mask_mod.

No PyTorch here: the graph is plain data, so the translation is tested without it (tests/python/test_flex_codegen.py).

A graph is a dict: "inputs" (the function's parameter names, in FlexAttention's order: score, b, h, q_idx, kv_idx
for a score_mod; b, h, q_idx, kv_idx for a mask_mod), "nodes" (in order, each {"name", "op", "args", "line"}: an
argument is {"node": name}, {"input": name}, {"tensor": i} (the i-th captured tensor) or a Python number or
bool, and "line" says where the user's function called it), and "output" (an argument). Captured tensors are
described by the caller: (dtype kind "float" | "int" | "bool", shape) each.
"""
import math

# Values have one of three C types; captured tensors reach the kernel as float, long-compatible ints or uchar.
FLOAT, LONG, BOOL = "float", "long", "bool"


class TranslationError(ValueError):
    """An operation the translator cannot write as OpenCL C, with where the user's function called it."""


# op → (result type rule, C template). Rules: "float" (always float), "same" (the promoted type of the
# arguments), "bool". Unary float functions take their argument as float.
_UNARY_FLOAT = {"tanh": "tanh({0})", "exp": "exp({0})", "log": "log({0})", "sqrt": "sqrt({0})",
                "rsqrt": "rsqrt({0})", "sigmoid": "(1.0f / (1.0f + exp(-({0}))))", "sin": "sin({0})",
                "cos": "cos({0})", "exp2": "exp2({0})", "log2": "log2({0})", "log1p": "log1p({0})",
                "erf": "erf({0})", "atan": "atan({0})"}
_COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_ARITH = {"add": "+", "sub": "-", "mul": "*"}

# d/dx of the unary float functions, in terms of the argument {0} and the result {1}.
_UNARY_GRAD = {"tanh": "(1.0f - {1} * {1})", "exp": "{1}", "log": "(1.0f / ({0}))", "sqrt": "(0.5f / {1})",
               "rsqrt": "(-0.5f * {1} * {1} * {1})", "sigmoid": "({1} * (1.0f - {1}))", "sin": "cos({0})",
               "cos": "(-sin({0}))", "exp2": "({1} * 0.69314718f)", "log2": "(1.44269504f / ({0}))",
               "log1p": "(1.0f / (1.0f + ({0})))", "erf": "(1.12837917f * exp(-({0}) * ({0})))",
               "atan": "(1.0f / (1.0f + ({0}) * ({0})))"}

OPS = sorted(set(_UNARY_FLOAT) | set(_COMPARE) | set(_ARITH) |
             {"truediv", "floordiv", "mod", "neg", "abs", "pow", "and", "or", "xor", "not", "where", "clamp",
              "minimum", "maximum", "sign", "floor", "ceil", "round", "to_float", "to_long", "to_bool", "index"})


def _promote(*types):
    return FLOAT if FLOAT in types else LONG if LONG in types else BOOL


def _literal(value):
    if isinstance(value, bool):
        return "true" if value else "false", BOOL
    if isinstance(value, int):
        if not -2**63 <= value < 2**63:
            raise TranslationError(f"the integer {value} does not fit a 64-bit long")
        return f"{value}L", LONG
    if isinstance(value, float):
        if math.isnan(value):
            return "NAN", FLOAT
        if math.isinf(value):
            return ("INFINITY" if value > 0 else "(-INFINITY)"), FLOAT
        return f"{float(value)!r}f".replace("inf", "INFINITY"), FLOAT
    raise TranslationError(f"a constant of type {type(value).__name__} ({value!r})")


def _cast(expr, have, want):
    if have == want:
        return expr
    if want == BOOL:
        return f"(({expr}) != 0)"
    return f"(({want})({expr}))"


_LIMIT = 2**62  # (integer ranges beyond this are not tracked: no overflow to reason about)


def _value_range(op, ranges, typ):
    """The values an integer node can take, (lo, hi), from its arguments' ranges (None: unknown), or None.
    Exact interval arithmetic on what the graph's integer operations do (Python's // and % included)."""
    if typ == BOOL:
        return 0, 1
    if typ != LONG:
        return None
    a = ranges[0] if ranges else None
    b = ranges[1] if len(ranges) > 1 else None
    r = None
    if op in ("add", "sub", "mul", "minimum", "maximum") and a and b:
        if op == "add":
            r = a[0] + b[0], a[1] + b[1]
        elif op == "sub":
            r = a[0] - b[1], a[1] - b[0]
        elif op == "mul":
            products = [x * y for x in a for y in b]
            r = min(products), max(products)
        else:
            pick = min if op == "minimum" else max
            r = pick(a[0], b[0]), pick(a[1], b[1])
    elif op in ("floordiv", "mod") and a and b and b[0] == b[1] and b[0] > 0:
        c = b[0]
        if op == "floordiv":
            r = a[0] // c, a[1] // c
        else:  # (within one period the remainders rise with a; across one, all of them)
            r = (a[0] % c, a[1] % c) if a[1] - a[0] < c and a[0] % c <= a[1] % c else (0, c - 1)
    elif op == "neg" and a:
        r = -a[1], -a[0]
    elif op == "abs" and a:
        r = a if a[0] >= 0 else (-a[1], -a[0]) if a[1] <= 0 else (0, max(-a[0], a[1]))
    elif op == "clamp" and a:
        lo, hi = (ranges[1] if len(ranges) > 1 else None), (ranges[2] if len(ranges) > 2 else None)
        r = (max(a[0], lo[0]) if lo else a[0], min(a[1], hi[1]) if hi else a[1])
        r = r if r[0] <= r[1] else (r[1], r[1])
    elif op == "where" and len(ranges) == 3 and ranges[1] and ranges[2]:
        r = min(ranges[1][0], ranges[2][0]), max(ranges[1][1], ranges[2][1])
    elif op == "to_long" and a:
        r = a
    return r if r and -_LIMIT < r[0] <= r[1] < _LIMIT else None


class _Writer:
    """Walks a graph once, writing a C statement per node; with `grad`, also each float node's derivative
    with respect to the input named "score". bounds (B, H, L, S), or None: the batches, heads, query positions
    and keys the functions are called for (clattn calls them only inside a call's shape), from which the
    integer values' ranges follow — an index proven inside its tensor is read as it is."""

    def __init__(self, graph, tensors, grad, bounds=None):
        self.tensors, self.grad = tensors, grad
        self.lines, self.values, self.derivs = [], {}, {}
        self.inputs = graph["inputs"]
        # value name (a node's vN, an input's p_N) → its (lo, hi)
        n = len(self.inputs)
        self.ranges = {} if bounds is None else {f"p_{n - 4 + i}": (0, max(int(x), 1) - 1)
                                                 for i, x in enumerate(bounds)}

    def range_of(self, arg):
        """The (lo, hi) of an argument as arg() returns it (a literal's own value), or None."""
        expr, typ, _ = arg
        if typ == BOOL:
            return 0, 1
        if typ == LONG and expr in self.ranges:
            return self.ranges[expr]
        if typ == LONG and expr.endswith("L") and expr[:-1].lstrip("-").isdigit():
            return int(expr[:-1]), int(expr[:-1])
        return None

    def arg(self, a, line):
        """(C expression, type, derivative expression or None) of an argument."""
        if isinstance(a, dict) and "node" in a:
            expr, typ = self.values[a["node"]]
            return expr, typ, self.derivs.get(a["node"])
        if isinstance(a, dict) and "input" in a:
            name = a["input"]
            if name == self.inputs[0] and len(self.inputs) == 5:
                return "score", FLOAT, "1.0f"
            return f"p_{self.inputs.index(name)}", LONG, None
        if isinstance(a, dict) and "tensor" in a:
            raise TranslationError(f"line {line}: a captured tensor used whole (index it with positions)")
        if a is None:
            return None, None, None
        expr, typ = _literal(a)
        return expr, typ, None

    def node(self, n):
        op, line = n["op"], n.get("line", "?")
        if op not in OPS:
            raise TranslationError(f"{line}: the operation {n.get('what', op)} has no OpenCL C translation "
                                   f"(supported: {', '.join(OPS)})")
        rng = None
        if op == "index":
            expr, typ, d = self.index(n, line)
        else:
            args = [self.arg(a, line) for a in n["args"]]
            expr, typ, d = self.apply(op, args, line)
            rng = _value_range(op, [None if a[0] is None else self.range_of(a) for a in args], typ)
        name = f"v{len(self.values)}"
        if rng is not None:
            self.ranges[name] = rng
        self.lines.append(f"    const {'bool' if typ == BOOL else typ} {name} = {expr};")
        self.values[n["name"]] = (name, typ)
        if self.grad and typ == FLOAT and d is not None and d != "0.0f":
            self.lines.append(f"    const float d{name} = {d};")
            self.derivs[n["name"]] = f"d{name}"

    def index(self, n, line):
        t = n["args"][0]
        if not (isinstance(t, dict) and "tensor" in t):
            raise TranslationError(f"{line}: indexing something other than a captured tensor")
        kind, shape = self.tensors[t["tensor"]]
        idx = [self.arg(a, line) for a in n["args"][1:]]
        if len(idx) != len(shape):
            raise TranslationError(f"{line}: a captured tensor of shape {tuple(shape)} indexed by {len(idx)} "
                                   "positions (each of its dimensions needs one: the result must be one value)")
        offset = "0L"
        for (e, typ, d), size in zip(idx, shape):
            if typ == FLOAT:
                raise TranslationError(f"{line}: a captured tensor indexed by a float value")
            # Python's negative indices count from the end; past either end reads the nearest element
            # (the kernel must not read outside the buffer; PyTorch would raise). Where the index's range
            # is proven (the call's bounds), only what it needs: nothing, or the wrap of negative values.
            r = self.range_of((e, typ, d))
            if r is not None and 0 <= r[0] and r[1] < size:
                i = f"({e})"
            elif r is not None and -size <= r[0] and r[1] < size:
                i = f"(({e}) < 0 ? ({e}) + {size}L : (long)({e}))"
            else:
                i = f"clamp(({e}) < 0 ? ({e}) + {size}L : (long)({e}), 0L, {max(size - 1, 0)}L)"
            offset = f"({offset}) * {size}L + {i}" if offset != "0L" else i
        read = f"aux{t['tensor']}[{offset}]"
        if kind == BOOL:
            return f"({read} != 0)", BOOL, None
        return (read, FLOAT, None) if kind == FLOAT else (f"(long){read}", LONG, None)

    def apply(self, op, args, line):
        (a, ta, da), rest = args[0], args[1:]
        if op in _ARITH:
            b, tb, db = rest[0]
            typ = _promote(ta, tb)
            if typ == BOOL:
                typ = LONG
            expr = f"({_cast(a, ta, typ)} {_ARITH[op]} {_cast(b, tb, typ)})"
            d = None
            if typ == FLOAT and (da or db):
                if op == "mul":
                    parts = [f"{da} * {_cast(b, tb, FLOAT)}" if da else None,
                             f"{_cast(a, ta, FLOAT)} * {db}" if db else None]
                    d = " + ".join(p for p in parts if p)
                else:
                    sign = "+" if op == "add" else "-"
                    d = f"({da or '0.0f'} {sign} {db or '0.0f'})"
            return expr, typ, d
        if op == "truediv":
            b, tb, db = rest[0]
            fa, fb = _cast(a, ta, FLOAT), _cast(b, tb, FLOAT)
            d = None
            if da or db:
                d = f"(({da or '0.0f'}) / {fb} - {fa} * ({db or '0.0f'}) / ({fb} * {fb}))"
            return f"({fa} / {fb})", FLOAT, d
        if op in ("floordiv", "mod"):
            b, tb, db = rest[0]
            typ = _promote(ta, tb)
            if typ != FLOAT:
                fn = "clattn_flex_floordiv" if op == "floordiv" else "clattn_flex_mod"
                return f"{fn}({_cast(a, ta, LONG)}, {_cast(b, tb, LONG)})", LONG, None
            fa, fb = _cast(a, ta, FLOAT), _cast(b, tb, FLOAT)
            if op == "floordiv":
                return f"floor({fa} / {fb})", FLOAT, None
            d = None
            if da or db:
                d = f"(({da or '0.0f'}) - floor({fa} / {fb}) * ({db or '0.0f'}))"
            return f"({fa} - floor({fa} / {fb}) * {fb})", FLOAT, d
        if op == "neg":
            return f"(-{_cast(a, ta, LONG if ta == BOOL else ta)})", LONG if ta == BOOL else ta, (f"(-{da})" if da else None)
        if op == "abs":
            d = f"(({a}) > 0.0f ? {da} : ({a}) < 0.0f ? -{da} : 0.0f)" if da else None
            if ta == FLOAT:
                return f"fabs({a})", FLOAT, d
            x = _cast(a, ta, LONG)
            return f"({x} < 0 ? -{x} : {x})", LONG, None  # (OpenCL's abs of a long is a ulong)
        if op == "sign":
            if ta == FLOAT:
                return f"(({a}) > 0.0f ? 1.0f : ({a}) < 0.0f ? -1.0f : 0.0f)", FLOAT, None
            return f"(long)(({a}) > 0) - (long)(({a}) < 0)", LONG, None
        if op in ("floor", "ceil", "round"):
            if ta != FLOAT:
                return a, ta, None
            return (f"rint({a})" if op == "round" else f"{op}({a})"), FLOAT, None
        if op in _UNARY_FLOAT:
            fa = _cast(a, ta, FLOAT)
            expr = _UNARY_FLOAT[op].format(fa)
            d = None
            if da:
                result = f"v{len(self.values)}"  # (this node's own name: its value, already computed)
                d = f"{_UNARY_GRAD[op].format(fa, result)} * {da}"
            return expr, FLOAT, d
        if op == "pow":
            b, tb, db = rest[0]
            if ta != FLOAT and tb != FLOAT:
                raise TranslationError(f"{line}: an integer power (pow of two integers)")
            fa, fb = _cast(a, ta, FLOAT), _cast(b, tb, FLOAT)
            result = f"v{len(self.values)}"
            parts = [f"{fb} * pow({fa}, {fb} - 1.0f) * {da}" if da else None,
                     f"{result} * log({fa}) * {db}" if db else None]
            d = " + ".join(p for p in parts if p) or None
            return f"pow({fa}, {fb})", FLOAT, d
        if op in _COMPARE:
            b, tb, _ = rest[0]
            typ = _promote(ta, tb)
            return f"({_cast(a, ta, typ)} {_COMPARE[op]} {_cast(b, tb, typ)})", BOOL, None
        if op in ("and", "or", "xor"):
            b, tb, _ = rest[0]
            if ta == BOOL and tb == BOOL:
                c = {"and": "&&", "or": "||", "xor": "!="}[op]
                return f"({a} {c} {b})", BOOL, None
            if FLOAT in (ta, tb):
                raise TranslationError(f"{line}: a bitwise operation on a float value")
            c = {"and": "&", "or": "|", "xor": "^"}[op]
            return f"({_cast(a, ta, LONG)} {c} {_cast(b, tb, LONG)})", LONG, None
        if op == "not":
            if ta == FLOAT:
                raise TranslationError(f"{line}: a bitwise not of a float value")
            return (f"(!{a})", BOOL, None) if ta == BOOL else (f"(~{a})", LONG, None)
        if op == "where":
            (b, tb, db), (c, tc, dc) = rest
            typ = _promote(tb, tc)
            d = None
            if typ == FLOAT and (db or dc):
                d = f"({_cast(a, ta, BOOL)} ? {db or '0.0f'} : {dc or '0.0f'})"
            return f"({_cast(a, ta, BOOL)} ? {_cast(b, tb, typ)} : {_cast(c, tc, typ)})", typ, d
        if op == "clamp":
            (lo, tlo, _), (hi, thi, _) = rest
            typ = _promote(ta, *(t for t in (tlo, thi) if t))
            if typ == BOOL:
                typ = LONG
            x, conds = _cast(a, ta, typ), []
            expr = x
            if lo is not None:
                expr = f"max({expr}, {_cast(lo, tlo, typ)})"
                conds.append(f"{x} >= {_cast(lo, tlo, typ)}")
            if hi is not None:
                expr = f"min({expr}, {_cast(hi, thi, typ)})"
                conds.append(f"{x} <= {_cast(hi, thi, typ)}")
            if typ == FLOAT:
                expr = expr.replace("max(", "fmax(").replace("min(", "fmin(")
            d = f"(({' && '.join(conds) or 'true'}) ? {da} : 0.0f)" if da and typ == FLOAT else None
            return expr, typ, d
        if op in ("minimum", "maximum"):
            b, tb, db = rest[0]
            typ = _promote(ta, tb)
            if typ == BOOL:
                typ = LONG
            fa, fb = _cast(a, ta, typ), _cast(b, tb, typ)
            fn = {"minimum": "min", "maximum": "max"}[op]
            if typ == FLOAT:
                # (PyTorch's gradient: to the smaller (larger) argument, half to each where they tie)
                first = "<" if op == "minimum" else ">"
                second = ">" if op == "minimum" else "<"
                d = None
                if da or db:
                    da_, db_ = da or "0.0f", db or "0.0f"
                    d = f"({fa} {first} {fb} ? {da_} : {fa} {second} {fb} ? {db_} : 0.5f * ({da_} + {db_}))"
                return f"f{fn}({fa}, {fb})", FLOAT, d
            return f"{fn}({fa}, {fb})", LONG, None
        if op == "to_float":
            return _cast(a, ta, FLOAT), FLOAT, da if ta == FLOAT else None
        if op == "to_long":
            return (f"(long)trunc({a})" if ta == FLOAT else _cast(a, ta, LONG)), LONG, None
        if op == "to_bool":
            return _cast(a, ta, BOOL), BOOL, None
        raise TranslationError(f"{line}: {op}")  # (OPS lists nothing else)


_HELPERS = """inline long clattn_flex_floordiv(long a, long b)
{
    const long q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
inline long clattn_flex_mod(long a, long b)
{
    const long r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
"""

_C_TYPES = {FLOAT: "float", LONG: "long", BOOL: "uchar"}


def aux_parameters(tensors):
    """The functions' trailing parameters for the captured tensors (kinds: float, long, bool)."""
    return "".join(f", __global const {_C_TYPES[kind]} *aux{i}" for i, (kind, _) in enumerate(tensors))


def _function(graph, tensors, kind, bounds):
    grad = kind == "score_mod_grad"
    w = _Writer(graph, tensors, grad, bounds)
    for n in graph["nodes"]:
        w.node(n)
    expr, typ, d = w.arg(graph["output"], "output")
    if kind == "mask_mod":
        head, result = "bool mask_mod(int b_, int h_, long q_, long k_", _cast(expr, typ, BOOL)
    elif grad:
        head, result = "float score_mod_grad(float score, int b_, int h_, long q_, long k_", d or "0.0f"
        if typ != FLOAT:
            result = "0.0f"
    else:
        head, result = "float score_mod(float score, int b_, int h_, long q_, long k_", _cast(expr, typ, FLOAT)
    n = len(graph["inputs"])
    params = ["(long)b_", "(long)h_", "q_", "k_"]
    body = [f"    const long p_{n - 4 + i} = {p};" for i, p in enumerate(params)]
    # (parameters the function does not read are left to the compiler to drop)
    body += [f"    (void)p_{n - 4 + i};" for i in range(4)] + ["    (void)score;"] * (n == 5)
    return "\n".join([head + aux_parameters(tensors) + ")", "{"] + body + w.lines + [f"    return {result};", "}"])


def source(score_graph, mask_graph, tensors, bounds=None):
    """OpenCL C defining score_mod and score_mod_grad (when score_graph) and mask_mod (when mask_graph),
    every function taking every captured tensor (as aux0, aux1 … in `tensors`' order). bounds: (B, H, L, S)
    the functions will be called inside (an index proven inside its tensor there is read without the
    bounds' guard: the text changes only where a proof does, so calls of other shapes share it mostly), or
    None: every index guarded."""
    parts = [_HELPERS]
    if score_graph is not None:
        parts.append(_function(score_graph, tensors, "score_mod", bounds))
        parts.append(_function(score_graph, tensors, "score_mod_grad", bounds))
    if mask_graph is not None:
        parts.append(_function(mask_graph, tensors, "mask_mod", bounds))
    return "\n".join(parts) + "\n"


def evaluate(graph, inputs, tensors):
    """The graph's value at `inputs` (a dict of numpy arrays, broadcast together) with the captured tensors'
    values `tensors` (numpy arrays), in float64 / int64: the tests' reference."""
    import numpy as np
    vals = {}

    def arg(a):
        if isinstance(a, dict) and "node" in a:
            return vals[a["node"]]
        if isinstance(a, dict) and "input" in a:
            return inputs[a["input"]]
        return a

    unary = {"tanh": np.tanh, "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x),
             "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "sin": np.sin, "cos": np.cos, "exp2": np.exp2,
             "log2": np.log2, "log1p": np.log1p, "atan": np.arctan, "neg": np.negative, "abs": np.abs,
             "sign": np.sign, "floor": np.floor, "ceil": np.ceil, "round": np.round, "not": np.invert,
             "to_float": lambda x: np.asarray(x, np.float64), "to_long": lambda x: np.trunc(x).astype(np.int64),
             "to_bool": lambda x: np.asarray(x) != 0}
    binary = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "truediv": np.true_divide,
              "floordiv": np.floor_divide, "mod": np.remainder, "pow": np.power, "eq": np.equal,
              "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
              "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor, "minimum": np.minimum,
              "maximum": np.maximum}
    for n in graph["nodes"]:
        args = [arg(a) for a in n["args"]]
        with np.errstate(all="ignore"):  # (both sides of a where are computed, as in the kernel)
            vals[n["name"]] = _evaluate_node(np, n["op"], args, n, tensors, unary, binary)
    return arg(graph["output"])


def _evaluate_node(np, op, args, n, tensors, unary, binary):
    """One node's value for evaluate()."""
    if op == "index":
        t = tensors[n["args"][0]["tensor"]]
        idx = tuple(np.clip(np.where(np.asarray(i) < 0, np.asarray(i) + s, i), 0, s - 1)
                    for i, s in zip(args[1:], t.shape))
        return t[idx]
    if op in unary:
        return unary[op](args[0])
    if op in binary:
        return binary[op](args[0], args[1])
    if op == "where":
        return np.where(args[0], args[1], args[2])
    if op == "clamp":
        x = args[0] if args[1] is None else np.maximum(args[0], args[1])
        return x if args[2] is None else np.minimum(x, args[2])
    if op == "erf":
        return np.vectorize(math.erf)(args[0])
    raise TranslationError(op)
