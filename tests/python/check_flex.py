"""clattn.flex_attention against PyTorch (meson test python-flex, with -Dtorch_tests=true; run by hand like
python-torch): FlexAttention's documented examples (flex_examples.py) — outputs and LSE equal
torch.nn.attention.flex_attention on the CPU, and gradients of Q, K and V equal a float64 autograd of the same
program written densely (PyTorch 2.15 has no FlexAttention backward on CPU) — in float32, float16 and bfloat16,
with clattn's and PyTorch's block masks and without; grouped-query heads; the refusals (an operation with no
translation, Python control flow on traced values) naming the operation and the line; the translation cache."""
import warnings

import pytest
import torch
from torch.nn.attention import flex_attention as torch_flex

import clattn
from flex_examples import EXAMPLES

warnings.filterwarnings("ignore", message=".*flex_attention called without torch.compile.*")
warnings.filterwarnings("ignore", message=".*return_lse is deprecated.*")

B, H, L, S, E = 2, 4, 37, 45, 16
TOL = {torch.float32: (2e-5, 2e-4), torch.float16: (2e-3, 4e-3), torch.bfloat16: (1.6e-2, 1.6e-2)}
# Gradients: float32's tolerance over the sums of L or S products; 16-bit ones round their inputs and outputs.
GRAD_TOL = {torch.float32: (5e-5, 5e-4), torch.float16: (5e-3, 1e-2), torch.bfloat16: (4e-2, 4e-2)}


def inputs(dtype, seed, kv_heads=H, requires_grad=False):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, L, E, generator=g)
    k, v = (torch.randn(B, kv_heads, S, E, generator=g) for _ in range(2))
    return [t.to(dtype).requires_grad_(requires_grad) for t in (q, k, v)]


def dense(q, k, v, score_mod, mask_mod, enable_gqa=False):
    """The same program written densely (float64 autograd's reference)."""
    if enable_gqa:
        k, v = (t.repeat_interleave(q.shape[1] // t.shape[1], dim=1) for t in (k, v))
    s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    b, h = torch.arange(B).view(B, 1, 1, 1), torch.arange(H).view(1, H, 1, 1)
    qi, ki = torch.arange(L).view(1, 1, L, 1), torch.arange(S).view(1, 1, 1, S)
    if score_mod is not None:
        s = score_mod(s, b, h, qi, ki)
    if mask_mod is not None:
        s = s.masked_fill(~mask_mod(b, h, qi, ki), float("-inf"))
    return torch.softmax(s, -1).nan_to_num(0.0) @ v


def torch_flex_attention(*args, **kwargs):
    """PyTorch's flex_attention, its compile caches reset first: its eager path traces the call with Dynamo,
    which, on a second example's call, turned a captured Python float into a symbolic one it then refused."""
    torch._dynamo.reset()
    return torch_flex.flex_attention(*args, **kwargs)


def close(got, want, tol, what):
    atol, rtol = tol
    torch.testing.assert_close(got.double(), want.double(), atol=atol, rtol=rtol, msg=lambda m: f"{what}: {m}")


# (an example with a mask_mod runs with clattn's block mask and with PyTorch's; one without, with neither)
EXAMPLE_MASKS = [(name, blocks) for name in sorted(EXAMPLES)
                 for blocks in (("clattn", "torch") if EXAMPLES[name](B, H, L, S)[1] else ("none",))]


@pytest.mark.parametrize("name, blocks", EXAMPLE_MASKS, ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_example_equals_flex_attention(ctx, name, blocks, dtype):
    score_mod, mask_mod = EXAMPLES[name](B, H, L, S)
    q, k, v = inputs(dtype, len(name))
    block_mask = None
    if blocks == "clattn":
        block_mask = clattn.create_block_mask(mask_mod, B, None, L, S, BLOCK_SIZE=16)
    elif blocks == "torch":
        block_mask = torch_flex.create_block_mask(mask_mod, B, None, L, S, device="cpu", BLOCK_SIZE=16)
    out, lse = clattn.flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask, return_lse=True,
                                     context=ctx)
    torch_mask = torch_flex.create_block_mask(mask_mod, B, None, L, S, device="cpu") if mask_mod else None
    want, want_lse = torch_flex_attention(q.float(), k.float(), v.float(), score_mod=score_mod,
                                               block_mask=torch_mask, return_lse=True)
    assert out.dtype == dtype and out.shape == (B, H, L, E) and lse.dtype == torch.float32
    close(out, want, TOL[dtype], "out")
    assert torch.equal(torch.isfinite(lse), torch.isfinite(want_lse)), "rows that see no key differ"
    finite = torch.isfinite(want_lse)
    close(lse[finite], want_lse[finite], TOL[dtype], "lse")


@pytest.mark.parametrize("name", sorted(EXAMPLES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_example_gradients(ctx, name, dtype):
    score_mod, mask_mod = EXAMPLES[name](B, H, L, S)
    q, k, v = inputs(dtype, 100 + len(name), requires_grad=True)
    block_mask = clattn.create_block_mask(mask_mod, B, None, L, S, BLOCK_SIZE=16) if mask_mod else None
    out = clattn.flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask, context=ctx)
    grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(9)).to(dtype)
    out.backward(grad)
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    dense(q64, k64, v64, score_mod, mask_mod).backward(grad.double())
    for got, want, what in ((q.grad, q64.grad, "dq"), (k.grad, k64.grad, "dk"), (v.grad, v64.grad, "dv")):
        assert got.dtype == dtype
        close(got, want, GRAD_TOL[dtype], what)


def test_grouped_query_heads(ctx):
    score_mod, mask_mod = EXAMPLES["soft_cap_causal_alibi"](B, H, L, S)
    q, k, v = inputs(torch.float32, 5, kv_heads=2, requires_grad=True)
    block_mask = clattn.create_block_mask(mask_mod, B, None, L, S)
    out, lse = clattn.flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask, enable_gqa=True,
                                     return_lse=True, context=ctx)
    torch_mask = torch_flex.create_block_mask(mask_mod, B, None, L, S, device="cpu")
    want, want_lse = torch_flex_attention(q.detach(), k.detach(), v.detach(), score_mod=score_mod,
                                               block_mask=torch_mask, enable_gqa=True, return_lse=True)
    close(out, want, TOL[torch.float32], "out")
    close(lse, want_lse, TOL[torch.float32], "lse")
    out.sum().backward()
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    dense(q64, k64, v64, score_mod, mask_mod, enable_gqa=True).sum().backward()
    close(k.grad, k64.grad, GRAD_TOL[torch.float32], "dk")


def test_scale_and_kernel_options(ctx):
    q, k, v = inputs(torch.float32, 6)
    score_mod = EXAMPLES["relative_bias"](B, H, L, S)[0]
    out = clattn.flex_attention(q, k, v, score_mod=score_mod, scale=0.1, kernel_options={"BLOCK_M": 64},
                                context=ctx)
    close(out, torch_flex_attention(q, k, v, score_mod=score_mod, scale=0.1), TOL[torch.float32], "out")
    with pytest.raises(clattn.ArgumentError, match="FlexAttention's kernel options"):
        clattn.flex_attention(q, k, v, kernel_options={"NOT_AN_OPTION": 1}, context=ctx)


def test_refusals_name_the_operation_and_the_line(ctx):
    q, k, v = inputs(torch.float32, 7)

    def cumulative(score, b, h, q_idx, kv_idx):
        return torch.cumsum(score, 0)  # (line named below)

    with pytest.raises(clattn.TranslationError) as e:
        clattn.flex_attention(q, k, v, score_mod=cumulative, context=ctx)
    line = cumulative.__code__.co_firstlineno + 1
    assert "cumsum" in str(e.value) and f"check_flex.py:{line}" in str(e.value), str(e.value)

    def branching(score, b, h, q_idx, kv_idx):
        if score > 0:
            return score
        return -score

    with pytest.raises(clattn.TranslationError, match="check_flex.py"):
        clattn.flex_attention(q, k, v, score_mod=branching, context=ctx)


def test_translation_cache():
    from clattn import _flex
    table = torch.randn(2 * L)

    def score_mod(score, b, h, q_idx, kv_idx):
        return score + table[q_idx - kv_idx + L]

    first = _flex._traced(score_mod, _flex._SCORE_INPUTS)
    assert _flex._traced(score_mod, _flex._SCORE_INPUTS) is first  # (traced once)
    table = torch.randn(3 * L)  # (the closure re-bound to another tensor: traced again)  # noqa: F841
    source, tensors = _flex.translate(score_mod)
    assert tensors[0] is table and "111L" in source  # (its length in the index's wrap and clamp)


@pytest.mark.parametrize("name", ["relative_bias", "t5_bias"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_learned_captured_tensor_gradients(ctx, name, dtype):
    """A captured table that requires grad (FlexAttention's learnable relative-position bias): its gradient,
    and Q's, K's and V's, against a float64 autograd of the dense program, under a causal block mask."""
    score_mod, _ = EXAMPLES[name](B, H, L, S)
    table = next(c.cell_contents for c in score_mod.__closure__ if isinstance(c.cell_contents, torch.Tensor))
    table.requires_grad_()
    mask_mod = EXAMPLES["causal"](B, H, L, S)[1]
    q, k, v = inputs(dtype, 10 + len(name), requires_grad=True)
    block_mask = clattn.create_block_mask(mask_mod, None, None, L, S, BLOCK_SIZE=16)
    out, lse = clattn.flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask, return_lse=True,
                                     context=ctx)
    grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(11)).to(dtype)
    out.backward(grad)
    got_table = table.grad.clone()
    table.grad = None
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    with torch.no_grad():
        table.data = table.data.double()
    dense(q64, k64, v64, score_mod, mask_mod).backward(grad.double())
    tol = GRAD_TOL[dtype]
    close(got_table, table.grad, tol, "d table")
    for got, want, what in ((q.grad, q64.grad, "dq"), (k.grad, k64.grad, "dk"), (v.grad, v64.grad, "dv")):
        close(got, want, tol, what)
    assert float(table.grad.abs().max()) > 1e-3  # (the table matters to the loss)
