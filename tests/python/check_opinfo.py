"""PyTorch's own OpInfo samples for nn.functional.scaled_dot_product_attention through clattn's drop-in
function (meson test python-opinfo, registered with -Dtorch_tests=true like check_torch.py; run by hand:
CI cannot install PyTorch's wheel in its time). Issue 36, "Done when": the samples that need no dropout,
float64 or torch.compile pass.

The samples are the OpInfo's sample_inputs on CPU for float32, bfloat16 and float16, drawn under fixed
seeds (several draws), as given (contiguous) and as OpInfo's own noncontiguous() transform makes them
(every element interleaved with a NaN that a wrong stride would read), without and with requires_grad.
Each runs through torch.nn.functional.scaled_dot_product_attention and clattn.scaled_dot_product_attention;
both are measured against a float64 autograd reference (PyTorch's documented definition, written out here)
on the same rounded inputs, output and the gradients of query, key and value (upstream gradient: a fixed
random tensor of the sample's dtype). clattn passes a sample where each of its errors is at most
max(1.5 x PyTorch's error on the same sample, a floor of a few units of the dtype's rounding of the
largest reference value): no worse than PyTorch's own arithmetic, up to a small factor.

A float attn_mask that requires grad (OpInfo's mask sample with requires_grad) is refused by clattn with
a RuntimeError naming why (it has no dS); that is counted as an expected refusal, separately, and only
there; the same sample then runs with the mask detached, comparing the gradients of query, key and value.
The per-dtype counts and worst error ratios are printed at the end of the module."""
import math
import zlib

import pytest
import torch
import torch.nn.functional as F

# torch.testing._internal.common_utils imports expecttest, a test dependency PyTorch's CPU wheel does not
# bring: this optional suite needs it installed beside PyTorch (pip install expecttest).
import expecttest  # noqa: E402,F401

from torch.testing._internal.common_methods_invocations import op_db  # noqa: E402

import clattn  # noqa: E402

OP_NAME = "nn.functional.scaled_dot_product_attention"
DTYPES = [torch.float32, torch.bfloat16, torch.float16]
SEEDS = [0, 1, 2, 3, 4]
RATIO = 1.5  # clattn's error may be this many times PyTorch's own on the same sample
FLOOR_ULPS = 2  # ... or this many units of rounding (eps) of the largest reference value, whichever is more

STATS = {}  # dtype name -> counters and worst ratios, printed at the end of the module


def opinfo():
    ops = [op for op in op_db if op.name == OP_NAME and op.variant_test_name == ""]
    assert len(ops) == 1, f"op_db has {len(ops)} OpInfos named {OP_NAME}"
    return ops[0]


def seed(*parts):
    """A seed from the case's description: the same in every process (not hash(), salted per process)."""
    return zlib.crc32(repr(parts).encode("utf-8")) % 2**31


def reference(q, k, v, attn_mask=None, is_causal=False, scale=None, enable_gqa=False):
    """PyTorch's documented definition of SDPA, in the inputs' type (float64 here), differentiable; and the
    largest finite |scaled score| (the rounding floor's condition number)."""
    L, S = q.shape[-2], k.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    if enable_gqa and k.dim() >= 3 and q.shape[-3] != k.shape[-3]:
        k = k.repeat_interleave(q.shape[-3] // k.shape[-3], dim=-3)
        v = v.repeat_interleave(q.shape[-3] // v.shape[-3], dim=-3)
    scores = q @ k.transpose(-2, -1) * scale
    if is_causal:
        visible = torch.ones(L, S, dtype=torch.bool).tril()
        scores = scores.masked_fill(~visible, -math.inf)
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, -math.inf)
        else:
            scores = scores + attn_mask
    finite = scores.detach()[torch.isfinite(scores.detach())]
    return torch.softmax(scores, dim=-1) @ v, (finite.abs().max().item() if finite.numel() else 0.0)


def describe(sample):
    shapes = [tuple(t.shape) for t in (sample.input, *sample.args)]
    kw = {k: (tuple(v.shape) if torch.is_tensor(v) else v) for k, v in sample.kwargs.items()}
    return f"{shapes} {kw}"


def max_err(got, want):
    """max |got - want| in float64, inf where got is non-finite and want is not."""
    got, want = got.double(), want.double()
    if got.shape != want.shape:
        return math.inf
    if got.numel() == 0:
        return 0.0
    bad = ~torch.isfinite(got) & torch.isfinite(want)
    if bad.any():
        return math.inf
    return torch.nan_to_num((got - want).abs(), nan=0.0).max().item()


def stats(dtype):
    return STATS.setdefault(str(dtype).replace("torch.", ""), {
        "tests": 0, "samples compared": 0, "skipped (dropout)": 0, "mask-requires-grad refusals": 0,
        "worst clattn/bound": 0.0, "worst clattn/floor": 0.0, "worst clattn/torch out": 0.0, "worst clattn/torch grad": 0.0,
        "worst abs err out": 0.0, "worst abs err grad": 0.0})


class _Summary:
    """A plugin printing STATS in pytest's terminal summary (output of fixtures is captured)."""

    @staticmethod
    def pytest_terminal_summary(terminalreporter):
        terminalreporter.write_line(f"OpInfo {OP_NAME} through clattn.scaled_dot_product_attention (bound: max("
                                    f"{RATIO} x torch's error, {FLOOR_ULPS} x max|ref| x max(eps, eps_float32 x "
                                    f"max|score|))):")
        for name, s in sorted(STATS.items()):
            terminalreporter.write_line(f"  {name}: " + ", ".join(
                f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in s.items()))


@pytest.fixture(scope="module", autouse=True)
def summary(request):
    if not request.config.pluginmanager.has_plugin("clattn-opinfo-summary"):
        request.config.pluginmanager.register(_Summary(), "clattn-opinfo-summary")
    yield


def floor(want, dtype, max_score):
    """What rounding alone allows: FLOOR_ULPS units of max|want| in the dtype's precision, or in float32's
    (the arithmetic's, for every dtype) times the largest |score|: a score s is held in float32, rounded
    by up to eps/2·|s|, and exp turns that absolute error into a relative one of each weight (and so of
    the output and gradients: the OpInfo's inputs in [-9, 9] give scores up to ~200)."""
    scale = want.abs().max().item() if want.numel() else 0.0
    return FLOOR_ULPS * scale * max(torch.finfo(dtype).eps, torch.finfo(torch.float32).eps * max(1.0, max_score))


def compare(name, ours, theirs, want, dtype, st, failures, grad, max_score):
    """clattn's (ours) and PyTorch's (theirs) error against want (float64); records and checks the bound."""
    e_ours, e_theirs = max_err(ours, want), max_err(theirs, want)
    bound = max(RATIO * e_theirs, floor(want, dtype, max_score))
    ratio = e_ours / bound if bound > 0 else (0.0 if e_ours == 0 else math.inf)
    st["worst clattn/bound"] = max(st["worst clattn/bound"], ratio)
    st["worst clattn/floor"] = max(st["worst clattn/floor"], e_ours / max(floor(want, dtype, max_score), 1e-300))
    if e_theirs > 0:
        key = "worst clattn/torch grad" if grad else "worst clattn/torch out"
        st[key] = max(st[key], e_ours / e_theirs)
    key = "worst abs err grad" if grad else "worst abs err out"
    st[key] = max(st[key], e_ours)
    if not ratio <= 1.0:
        failures.append(f"{name}: clattn's error {e_ours:.3g}, PyTorch's {e_theirs:.3g}, bound {bound:.3g}")


def run_sample(ctx, sample, dtype, requires_grad, st, failures, label, dout_seed, detach_mask=False):
    q, k, v = sample.input, *sample.args
    kwargs = dict(sample.kwargs)
    kwargs.pop("dropout_p", None)  # (0.0 here: the samples that need dropout are skipped by the caller)
    mask = kwargs.get("attn_mask")
    if detach_mask and mask is not None:
        kwargs["attn_mask"] = mask = mask.detach()
    leaves = [t for t in (q, k, v) if t.requires_grad]
    g = torch.Generator().manual_seed(dout_seed)  # (the same for a sample's contiguous and noncontiguous runs)

    # The float64 reference on the same rounded inputs (the mask's grad is taken too, and not compared).
    ref_in = [t.detach().double().requires_grad_(requires_grad) for t in (q, k, v)]
    ref_kwargs = dict(kwargs)
    if mask is not None and mask.dtype != torch.bool:
        ref_kwargs["attn_mask"] = mask.detach().double()
    want, max_score = reference(*ref_in, **ref_kwargs)

    theirs = F.scaled_dot_product_attention(q, k, v, **kwargs)
    try:
        ours = clattn.scaled_dot_product_attention(q, k, v, context=ctx, **kwargs)
    except RuntimeError as e:
        if requires_grad and mask is not None and mask.requires_grad and "attn_mask requires grad" in str(e):
            st["mask-requires-grad refusals"] += 1
            return run_sample(ctx, sample, dtype, requires_grad, st, failures, label + " (mask detached)",
                              dout_seed, detach_mask=True)
        failures.append(f"{label}: clattn raised {type(e).__name__}: {e}")
        return
    if requires_grad and mask is not None and mask.requires_grad:
        failures.append(f"{label}: a float attn_mask that requires grad was not refused")
    st["samples compared"] += 1
    if not isinstance(ours, torch.Tensor) or ours.dtype != theirs.dtype or ours.shape != theirs.shape:
        failures.append(f"{label}: clattn returned {type(ours).__name__} {getattr(ours, 'dtype', None)} "
                        f"{tuple(getattr(ours, 'shape', ()))}, PyTorch {theirs.dtype} {tuple(theirs.shape)}")
        return
    if ours.requires_grad != theirs.requires_grad:
        failures.append(f"{label}: requires_grad {ours.requires_grad}, PyTorch's {theirs.requires_grad}")
        return
    compare(f"{label} out", ours.detach(), theirs.detach(), want.detach(), dtype, st, failures, grad=False,
            max_score=max_score)
    if not requires_grad:
        return
    dout = torch.rand(theirs.shape, generator=g).sub(0.5).mul(2).to(dtype)
    theirs_grads = torch.autograd.grad(theirs, leaves, dout)
    ours_grads = torch.autograd.grad(ours, leaves, dout)
    want_grads = torch.autograd.grad(want, ref_in, dout.double())
    for name, a, b, w in zip(("dq", "dk", "dv"), ours_grads, theirs_grads, want_grads):
        if a.dtype != b.dtype or a.shape != b.shape:
            failures.append(f"{label} {name}: clattn's {a.dtype} {tuple(a.shape)}, PyTorch's {b.dtype} "
                            f"{tuple(b.shape)}")
            continue
        compare(f"{label} {name}", a, b, w, dtype, st, failures, grad=True, max_score=max_score)


@pytest.mark.parametrize("layout", ["contiguous", "noncontiguous"])
@pytest.mark.parametrize("requires_grad", [False, True], ids=["forward", "grad"])
@pytest.mark.parametrize("draw", SEEDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_opinfo_samples(ctx, dtype, draw, requires_grad, layout):
    op = opinfo()
    assert dtype in op.supported_dtypes("cpu")
    st = stats(dtype)
    st["tests"] += 1
    torch.manual_seed(seed(OP_NAME, str(dtype), draw, requires_grad))  # (make_tensor draws from it)
    failures, compared = [], 0
    for i, sample in enumerate(op.sample_inputs("cpu", dtype, requires_grad=requires_grad)):
        if sample.kwargs.get("dropout_p", 0.0) != 0.0:
            st["skipped (dropout)"] += 1
            continue
        if layout == "noncontiguous":
            sample = sample.noncontiguous()
        label = f"{dtype} draw {draw} sample {i} {layout} {describe(sample)}"
        run_sample(ctx, sample, dtype, requires_grad, st, failures, label, seed(str(dtype), draw, i))
        compared += 1
    assert compared >= 10, f"only {compared} samples without dropout (the OpInfo gave fewer than expected)"
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures)
