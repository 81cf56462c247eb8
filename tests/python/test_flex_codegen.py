"""FlexAttention programs without PyTorch: the graphs clattn recorded from FlexAttention's documented examples
(tests/python/flex_examples.py, recorded into data/flex_graphs.json) written as OpenCL C by clattn's translator,
run through clattn.scaled_dot_product_attention on numpy arrays and held against a float64 reference that
evaluates the same graphs with numpy; hand-made graphs for the integer semantics (Python's floor division
and remainder), the derivative's source, and the refusals (an operation with no translation names it and
the line). check_flex.py holds the same examples against PyTorch's flex_attention."""
import json
import os

import numpy as np
import pytest

import clattn
from clattn import _flex_codegen as codegen
from conftest import assert_close

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "flex_graphs.json"), encoding="utf-8") as f:
    RECORDED = json.load(f)

AUX_DTYPES = {"float": np.float32, "long": np.int64, "bool": np.uint8}


def tensors_of(entry):
    """The captured tensors: (kinds for the translator, numpy values for the reference, arrays for the call)."""
    kinds, values, arrays = [], [], {}
    for i, t in enumerate(entry["tensors"]):
        v = np.array(t["values"], dtype=np.float64).reshape(t["shape"])
        if t["kind"] != "float":
            v = v.astype(np.int64)
        kinds.append((t["kind"], tuple(t["shape"])))
        values.append(v)
        arrays[f"aux{i}"] = v.astype(AUX_DTYPES[t["kind"]]).reshape(-1)
    return kinds, values, arrays


def reference(q, k, v, scale, score_graph, mask_graph, values):
    """float64 attention with the graphs evaluated over every (b, h, q_idx, kv_idx): (out, lse)."""
    B, H, L, _ = q.shape
    S = k.shape[2]
    idx = {"b": np.arange(B).reshape(B, 1, 1, 1), "h": np.arange(H).reshape(1, H, 1, 1),
           "q_idx": np.arange(L).reshape(1, 1, L, 1), "kv_idx": np.arange(S).reshape(1, 1, 1, S)}
    s = np.einsum("bhld,bhsd->bhls", q, k) * scale
    if score_graph:
        s = np.broadcast_to(codegen.evaluate(score_graph, dict(idx, score=s), values), s.shape).astype(np.float64)
    if mask_graph:
        visible = np.broadcast_to(codegen.evaluate(mask_graph, idx, values), s.shape)
        s = np.where(visible, s, -np.inf)
    top = np.max(s, axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    p = np.exp(s - top)
    total = p.sum(-1, keepdims=True)
    out = np.einsum("bhls,bhsd->bhld", np.divide(p, total, out=np.zeros_like(p), where=total > 0), v)
    with np.errstate(divide="ignore"):
        lse = np.log(total[..., 0]) + top[..., 0]
    return out, lse


def run(ctx, source, arrays, shape, seed, scale=None):
    B, H, L, S = shape
    rng = np.random.default_rng(seed)
    q, k, v = (rng.uniform(-1.5, 1.5, (B, H, n, 16)).astype(np.float32) for n in (L, S, S))
    out, lse = clattn.scaled_dot_product_attention(q, k, v, scale=scale, return_lse=True, mods=source,
                                                   aux=arrays or None, context=ctx)
    return (q.astype(np.float64), k.astype(np.float64), v.astype(np.float64)), out, lse


@pytest.mark.parametrize("bounded", [False, True])
@pytest.mark.parametrize("name", sorted(RECORDED))
def test_recorded_example(ctx, name, bounded):
    """Each example translated without bounds (every index guarded) and with the call's (indices proven
    inside their tensors read unguarded, as flex_attention translates them)."""
    entry = RECORDED[name]
    kinds, values, arrays = tensors_of(entry)
    source = codegen.source(entry["score"], entry["mask"], kinds, tuple(entry["shape"]) if bounded else None)
    assert ("float score_mod_grad(" in source) == (entry["score"] is not None)
    (q, k, v), out, lse = run(ctx, source, arrays, tuple(entry["shape"]), len(name))
    ref_out, ref_lse = reference(q, k, v, 0.25, entry["score"], entry["mask"], values)
    assert_close(out, ref_out)
    assert np.array_equal(np.isfinite(lse), np.isfinite(ref_lse)), "rows that see no key differ"
    finite = np.isfinite(ref_lse)
    assert_close(lse[finite], ref_lse[finite], what="lse")


def graph(inputs, nodes, output):
    return {"inputs": list(inputs), "nodes": [dict(n, line=str(i + 10)) for i, n in enumerate(nodes)], "output": output}


MASK_INPUTS = ("b", "h", "q_idx", "kv_idx")
SCORE_INPUTS = ("score",) + MASK_INPUTS


def test_integer_floor_division_and_remainder(ctx):
    """(q − kv) // 5 and (q − kv) % 5 as Python computes them for negative values (C's / and % truncate):
    a key is visible where (q − kv) // 5 is even and (q − kv) % 5 < 3."""
    d = {"node": "d"}
    nodes = [{"name": "d", "op": "sub", "args": [{"input": "q_idx"}, {"input": "kv_idx"}]},
             {"name": "f", "op": "floordiv", "args": [d, 5]},
             {"name": "m", "op": "mod", "args": [d, 5]},
             {"name": "fm", "op": "mod", "args": [{"node": "f"}, 2]},
             {"name": "even", "op": "eq", "args": [{"node": "fm"}, 0]},
             {"name": "low", "op": "lt", "args": [{"node": "m"}, 3]},
             {"name": "both", "op": "and", "args": [{"node": "even"}, {"node": "low"}]}]
    mask = graph(MASK_INPUTS, nodes, {"node": "both"})
    shape = (1, 2, 23, 31)
    (q, k, v), out, lse = run(ctx, codegen.source(None, mask, []), {}, shape, 7)
    ref_out, _ = reference(q, k, v, 0.25, None, mask, [])
    assert_close(out, ref_out)
    # (the reference itself: numpy's // and % are Python's)
    for d in range(-12, 13):
        want = (d // 5) % 2 == 0 and d % 5 < 3
        assert bool(codegen.evaluate(mask, {"q_idx": np.array(d), "kv_idx": np.array(0)}, [])) == want


def test_score_terms_mixing_types(ctx):
    """Integer positions, a float captured table read at a negative index (Python's: from the end), a bool
    turned into a float, where, clamp, minimum and pow: every value type meeting the others."""
    nodes = [{"name": "d", "op": "sub", "args": [{"input": "kv_idx"}, {"input": "q_idx"}]},
             {"name": "t", "op": "index", "args": [{"tensor": 0}, {"node": "d"}]},
             {"name": "gt", "op": "gt", "args": [{"input": "score"}, 0.0]},
             {"name": "gf", "op": "to_float", "args": [{"node": "gt"}]},
             {"name": "c", "op": "clamp", "args": [{"node": "d"}, -3, None]},
             {"name": "m", "op": "minimum", "args": [{"node": "c"}, {"input": "h"}]},
             {"name": "p", "op": "pow", "args": [{"input": "score"}, 2]},
             {"name": "w", "op": "where", "args": [{"node": "gt"}, {"node": "p"}, {"node": "t"}]},
             {"name": "s1", "op": "mul", "args": [{"node": "m"}, 0.125]},
             {"name": "s2", "op": "add", "args": [{"node": "w"}, {"node": "s1"}]},
             {"name": "s3", "op": "add", "args": [{"node": "s2"}, {"node": "gf"}]}]
    score = graph(SCORE_INPUTS, nodes, {"node": "s3"})
    table = np.linspace(-1.0, 1.0, 40)
    kinds = [("float", (40,))]
    shape = (2, 3, 17, 29)
    (q, k, v), out, lse = run(ctx, codegen.source(score, None, kinds), {"aux0": table.astype(np.float32)}, shape, 11)
    ref_out, ref_lse = reference(q, k, v, 0.25, score, None, [table])
    assert_close(out, ref_out)
    assert_close(lse, ref_lse, what="lse")


def test_derivative_source():
    """score_mod_grad follows the chain rule through the graph: d/ds of 3·tanh(s/3)·s is written from the
    tanh's value (1 − t²) and the product rule, and a term without the score contributes nothing."""
    nodes = [{"name": "a", "op": "truediv", "args": [{"input": "score"}, 3.0]},
             {"name": "t", "op": "tanh", "args": [{"node": "a"}]},
             {"name": "c", "op": "mul", "args": [3.0, {"node": "t"}]},
             {"name": "p", "op": "mul", "args": [{"node": "c"}, {"input": "score"}]},
             {"name": "h2", "op": "mul", "args": [{"input": "h"}, 2]},
             {"name": "o", "op": "add", "args": [{"node": "p"}, {"node": "h2"}]}]
    src = codegen.source(graph(SCORE_INPUTS, nodes, {"node": "o"}), None, [])
    grad = src[src.index("float score_mod_grad("):]
    assert "(1.0f - v1 * v1)" in grad  # (tanh's derivative from its value)
    assert "dv4" not in grad  # (h · 2 has no derivative with respect to the score)
    # d/ds at s: tanh(s/3)·s + s·(1 − tanh²(s/3)); checked through a clattn call in check_flex.py


@pytest.mark.parametrize("bad, message", [
    ({"name": "x", "op": "cumsum", "args": [{"input": "score"}], "what": "torch.cumsum"}, "torch.cumsum"),
    ({"name": "x", "op": "index", "args": [{"tensor": 0}, {"input": "h"}]}, "indexed by 1 positions"),
    ({"name": "x", "op": "and", "args": [{"input": "score"}, 1]}, "bitwise operation on a float"),
])
def test_refusals_name_the_operation_and_line(bad, message):
    g = graph(SCORE_INPUTS, [bad], {"node": "x"})
    with pytest.raises(clattn.TranslationError) as e:
        codegen.source(g, None, [("float", (4, 4))])
    assert message in str(e.value) and "10" in str(e.value)


def test_index_guards_follow_the_proven_ranges():
    """An index is read unguarded where the call's bounds prove it inside its tensor, with only the wrap of
    negative values where it can be negative but no less than −size, and fully guarded otherwise."""
    L, S = 37, 53

    def read(expr_nodes, size, bounds):
        nodes = expr_nodes + [{"name": "t", "op": "index", "args": [{"tensor": 0}, {"node": "i"}]},
                              {"name": "o", "op": "add", "args": [{"input": "score"}, {"node": "t"}]}]
        src = codegen.source(graph(SCORE_INPUTS, nodes, {"node": "o"}), None, [("float", (size,))], bounds)
        body = src[src.index("float score_mod("):src.index("float score_mod_grad(")]
        return "clamp(" in body, "< 0 ?" in body

    relative = [{"name": "d", "op": "sub", "args": [{"input": "q_idx"}, {"input": "kv_idx"}]},
                {"name": "i", "op": "add", "args": [{"node": "d"}, S - 1]}]  # (0 … L + S − 2)
    assert read(relative, L + S - 1, (1, 1, L, S)) == (False, False)
    assert read(relative, L + S - 1, None) == (True, True)
    assert read(relative, L + S - 1, (1, 1, L, S + 1)) == (False, True)  # (−1 possible: the wrap)
    assert read(relative, L + S - 1, (1, 1, L + 1, S)) == (True, True)  # (past the end possible)
    negative = [{"name": "i", "op": "sub", "args": [{"input": "kv_idx"}, {"input": "q_idx"}]}]  # (−(L−1) … S−1)
    assert read(negative, S, (1, 1, L, S)) == (False, True)
    buckets = [{"name": "d", "op": "sub", "args": [{"input": "q_idx"}, {"input": "kv_idx"}]},
               {"name": "i", "op": "mod", "args": [{"node": "d"}, 7]}]  # (Python's %: 0 … 6)
    assert read(buckets, 7, (1, 1, L, S)) == (False, False)
    assert read(buckets, 6, (1, 1, L, S)) == (True, True)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "minimum", "maximum", "floordiv", "mod", "neg", "abs"])
def test_value_ranges_are_exact(op):
    """The interval arithmetic behind the unguarded reads, against every value of small ranges (Python's
    integer semantics): the range it gives holds every result and is no wider than they are."""
    rng = np.random.default_rng(len(op))
    fn = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b, "minimum": min,
          "maximum": max, "floordiv": lambda a, b: a // b, "mod": lambda a, b: a % b, "neg": lambda a, b: -a,
          "abs": lambda a, b: abs(a)}[op]
    for _ in range(40):
        lo = int(rng.integers(-20, 20))
        a = (lo, lo + int(rng.integers(0, 15)))
        if op in ("floordiv", "mod"):
            c = int(rng.integers(1, 9))
            b = (c, c)
        else:
            lo = int(rng.integers(-20, 20))
            b = (lo, lo + int(rng.integers(0, 15)))
        got = codegen._value_range(op, [a, b], codegen.LONG)
        values = [fn(x, y) for x in range(a[0], a[1] + 1) for y in range(b[0], b[1] + 1)]
        assert got == (min(values), max(values)), (op, a, b, got)
