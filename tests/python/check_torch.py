"""The PyTorch comparisons (meson test python-torch, registered with -Dtorch_tests=true; run by hand: CI
cannot install PyTorch's wheel in its time): clattn.scaled_dot_product_attention on PyTorch CPU tensors
against torch.nn.functional.scaled_dot_product_attention itself, float32 / float16 / bfloat16, GQA,
causal, masks; tensors in, tensors out (no copy of contiguous inputs), views, tensors that require grad;
layers and KV caches on tensors; autograd through clattn's backward pass against PyTorch's."""
import zlib

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import clattn
import reference as ref
from conftest import assert_close

TOL = {torch.float32: (2e-5, 2e-4), torch.float16: (2e-3, 2e-3), torch.bfloat16: (1.6e-2, 1.6e-2)}


def close(got, want, dtype):
    atol, rtol = TOL[dtype]
    torch.testing.assert_close(got.float(), want.float(), atol=atol, rtol=rtol)


CASES = [  # (B, H, KVH, L, S, D); L > S too: PyTorch's is_causal is top-left, so every row sees key 0
    (1, 1, 1, 4, 4, 8), (2, 4, 4, 37, 41, 16), (3, 8, 2, 19, 53, 64), (1, 8, 1, 1, 300, 128), (2, 2, 2, 130, 130, 32),
    (2, 4, 2, 50, 23, 16), (1, 2, 2, 200, 70, 64),
]


def seed(*parts):
    """A seed from the case's description: the same in every process (not hash(), salted per process)."""
    return zlib.crc32(repr(parts).encode("utf-8")) % 2**31


@pytest.mark.parametrize("case", CASES, ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("causal", [False, True])
def test_equals_pytorch(ctx, case, dtype, causal):
    B, H, KVH, L, S, D = case
    g = torch.Generator().manual_seed(seed(case, str(dtype), causal))
    q = torch.rand(B, H, L, D, generator=g, dtype=torch.float32).mul(3).sub(1.5).to(dtype)
    k = torch.rand(B, KVH, S, D, generator=g, dtype=torch.float32).mul(3).sub(1.5).to(dtype)
    v = torch.rand(B, KVH, S, D, generator=g, dtype=torch.float32).sub(0.5).to(dtype)
    ours = clattn.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=KVH != H, context=ctx)
    theirs = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal, enable_gqa=KVH != H)
    assert isinstance(ours, torch.Tensor) and ours.dtype == dtype and ours.shape == (B, H, L, D)
    close(ours, theirs, dtype)
    if dtype != torch.float32:  # and against PyTorch on the same 16-bit tensors
        close(ours, F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=KVH != H).float(), dtype)


@pytest.mark.parametrize("kind", ["bool", "float"])
@pytest.mark.parametrize("shape", [(11, 17), (2, 1, 11, 17), (2, 3, 11, 17), (2, 1, 1, 17), (3, 1, 17)], ids=str)
def test_masks_equal_pytorch(ctx, kind, shape):
    g = torch.Generator().manual_seed(7)
    q, k, v = (torch.rand(2, 3, n, 16, generator=g) for n in (11, 17, 17))
    mask = torch.rand(shape, generator=g) > 0.3 if kind == "bool" else torch.randn(shape, generator=g)
    if kind == "bool":
        mask[..., 0] = True  # (PyTorch gives NaN for a fully masked row; clattn 0)
    close(clattn.scaled_dot_product_attention(q, k, v, attn_mask=mask, context=ctx),
          F.scaled_dot_product_attention(q, k, v, attn_mask=mask), torch.float32)


@pytest.mark.parametrize("case", [(2, 4, 4, 13, 17, 16, False, None), (1, 8, 2, 21, 21, 32, True, None),
                                  (2, 2, 2, 9, 11, 8, False, "bool"), (1, 3, 3, 7, 7, 16, False, "float")], ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_gradients_equal_pytorch(ctx, case, dtype):
    """autograd through clattn (its backward pass) against PyTorch's own SDPA backward."""
    B, H, KVH, L, S, D, causal, mask_kind = case
    g = torch.Generator().manual_seed(11)
    leaves = [torch.rand(B, n, m, D, generator=g).sub(0.5).mul(2).to(dtype).requires_grad_()
              for n, m in ((H, L), (KVH, S), (KVH, S))]
    mask = None
    if mask_kind == "bool":
        mask = torch.rand(L, S, generator=g) > 0.3
        mask[:, 0] = True
    elif mask_kind == "float":
        mask = torch.randn(B, 1, L, S, generator=g)
    dout = torch.rand(B, H, L, D, generator=g).to(dtype)
    ours = clattn.scaled_dot_product_attention(*leaves, attn_mask=mask, is_causal=causal, enable_gqa=KVH != H,
                                               context=ctx)
    assert ours.requires_grad
    ours.backward(dout)
    mine = [t.grad.clone() for t in leaves]
    ref_leaves = [t.detach().float().requires_grad_() for t in leaves]
    theirs = F.scaled_dot_product_attention(*ref_leaves, attn_mask=mask, is_causal=causal, enable_gqa=KVH != H)
    theirs.backward(dout.float())
    close(ours.detach(), theirs.detach(), dtype)
    for name, a, b in zip(("dq", "dk", "dv"), mine, ref_leaves):
        assert a.dtype == dtype and a.shape == b.grad.shape, name
        tol = 2e-4 if dtype == torch.float32 else 3e-2
        torch.testing.assert_close(a.float(), b.grad, atol=tol, rtol=tol, msg=lambda m: f"{name}: {m}")


def test_views_grad_and_no_copy(ctx):
    x = torch.rand(2, 13, 4, 16, requires_grad=True)  # (B, L, H, E) seen as (B, H, L, E)
    q = x.transpose(1, 2)
    assert not q.is_contiguous()
    with torch.no_grad():
        out = clattn.scaled_dot_product_attention(q, q, q, context=ctx)
    close(out, F.scaled_dot_product_attention(q.detach(), q.detach(), q.detach()), torch.float32)
    assert not out.requires_grad  # (no grad wanted: the plain call)
    # A contiguous tensor's memory is read where it lies: DLPack hands the C side torch's own pointer.
    t = torch.rand(1, 2, 5, 8)
    cap = t.__dlpack__()
    assert torch.from_dlpack(cap).data_ptr() == t.data_ptr()


def test_layer_on_tensors(ctx):
    g = torch.Generator().manual_seed(3)
    x = torch.rand(2, 9, 16, generator=g)
    w_q, w_k, w_v, w_o = (torch.rand(16, 16, generator=g) - 0.5 for _ in range(4))
    out = clattn.multi_head_attention(x, w_q, w_k, w_v, w_o, heads=4, is_causal=True, context=ctx)
    assert isinstance(out, torch.Tensor)
    want = ref.mha(x.numpy(), w_q.numpy(), w_k.numpy(), w_v.numpy(), w_o.numpy(), heads=4, causal=True)
    assert_close(out.numpy(), want)


def test_kv_cache_on_tensors(ctx):
    g = torch.Generator().manual_seed(5)
    cache = clattn.KVCache(1, 2, 64, 32, dtype="bfloat16", block_size=16, context=ctx)
    k = torch.rand(1, 2, 20, 32, generator=g).to(torch.bfloat16)
    v = torch.rand(1, 2, 20, 32, generator=g).to(torch.bfloat16)
    cache.append(k, v)
    q = torch.rand(1, 4, 1, 32, generator=g).to(torch.bfloat16)
    out = cache.attend(q)
    want = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), enable_gqa=True)
    assert out.dtype == torch.bfloat16
    close(out, want, torch.bfloat16)


def test_no_silent_missing_gradients(ctx):
    """Issue 36 item 10: a float attn_mask that requires grad, and multi_head_attention on tensors that
    require grad, are refused (RuntimeError naming why) rather than returning without their gradient;
    without grad wanted both run."""
    g = torch.Generator().manual_seed(seed("item 10"))
    q, k, v = (torch.rand(1, 2, n, 8, generator=g, requires_grad=True) for n in (4, 6, 6))
    mask = torch.randn(4, 6, generator=g, requires_grad=True)
    with pytest.raises(RuntimeError, match="attn_mask requires grad"):
        clattn.scaled_dot_product_attention(q, k, v, attn_mask=mask, context=ctx)
    out = clattn.scaled_dot_product_attention(q, k, v, attn_mask=mask.detach(), context=ctx)
    out.sum().backward()
    assert all(t.grad is not None for t in (q, k, v))
    with torch.no_grad():
        close(clattn.scaled_dot_product_attention(q, k, v, attn_mask=mask, context=ctx),
              F.scaled_dot_product_attention(q, k, v, attn_mask=mask), torch.float32)
    x = torch.rand(2, 5, 16, generator=g)
    w = [torch.rand(16, 16, generator=g).requires_grad_() for _ in range(3)]
    with pytest.raises(RuntimeError, match="no gradients"):
        clattn.multi_head_attention(x, *w, heads=4, context=ctx)
    with torch.no_grad():
        out = clattn.multi_head_attention(x, *w, heads=4, context=ctx)
    want = ref.mha(x.numpy(), *(t.detach().numpy() for t in w), heads=4)
    assert_close(out.numpy(), want)


BROADCAST_CASES = [  # (query, key, value shapes, enable_gqa): item 9 against PyTorch itself
    ((4, 3, 8), (4, 4, 6, 8), (4, 4, 6, 8), False), ((2, 4, 3, 8), (2, 1, 6, 8), (2, 1, 6, 8), False),
    ((2, 1, 3, 8), (2, 4, 6, 8), (2, 4, 6, 8), False), ((3, 4, 3, 8), (1, 2, 6, 8), (1, 2, 6, 8), True),
    ((3, 8), (6, 8), (6, 4), False),
]


@pytest.mark.parametrize("case", BROADCAST_CASES, ids=str)
def test_broadcasting_and_its_gradients_equal_pytorch(ctx, case):
    qs, ks, vs, gqa = case
    g = torch.Generator().manual_seed(seed(case))
    ours_in = [torch.rand(s, generator=g).sub(0.5).requires_grad_() for s in (qs, ks, vs)]
    theirs_in = [t.detach().clone().requires_grad_() for t in ours_in]
    ours = clattn.scaled_dot_product_attention(*ours_in, enable_gqa=gqa, context=ctx)
    theirs = F.scaled_dot_product_attention(*theirs_in, enable_gqa=gqa)
    assert ours.shape == theirs.shape
    close(ours.detach(), theirs.detach(), torch.float32)
    dout = torch.rand(theirs.shape, generator=g)
    ours.backward(dout)
    theirs.backward(dout)
    for name, a, b in zip(("dq", "dk", "dv"), ours_in, theirs_in):
        torch.testing.assert_close(a.grad, b.grad, atol=2e-4, rtol=2e-4, msg=lambda m: f"{name}: {m}")


@pytest.mark.parametrize("shapes", [((2, 3, 0, 8), (2, 3, 5, 8), (2, 3, 5, 6)), ((2, 3, 4, 8), (2, 3, 0, 8), (2, 3, 0, 6)),
                                    ((0, 3, 4, 8), (0, 3, 5, 8), (0, 3, 5, 6)), ((2, 3, 4, 0), (2, 3, 5, 0), (2, 3, 5, 6)),
                                    ((2, 3, 4, 8), (2, 3, 5, 8), (2, 3, 5, 0))], ids=str)
@pytest.mark.parametrize("causal", [False, True])
def test_zero_sizes_equal_pytorch(ctx, shapes, causal):
    g = torch.Generator().manual_seed(seed(shapes, causal))
    q, k, v = (torch.rand(s, generator=g) for s in shapes)
    ours = clattn.scaled_dot_product_attention(q, k, v, is_causal=causal, context=ctx)
    theirs = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    assert ours.shape == theirs.shape
    close(ours, theirs, torch.float32)


def test_errors_are_pytorchs(ctx):
    q = torch.rand(1, 2, 4, 8)
    for kwargs in (dict(attn_mask=torch.ones(4, 4, dtype=torch.bool), is_causal=True),):
        with pytest.raises(RuntimeError):
            F.scaled_dot_product_attention(q, q, q, **kwargs)
        with pytest.raises(RuntimeError):
            clattn.scaled_dot_product_attention(q, q, q, context=ctx, **kwargs)
    for args in ((torch.rand(8),) * 3, (q, q.half(), q.half())):
        with pytest.raises(RuntimeError):
            F.scaled_dot_product_attention(*args)
        with pytest.raises(RuntimeError):
            clattn.scaled_dot_product_attention(*args, context=ctx)


@pytest.mark.parametrize("variant", ["upper_left", "lower_right"])
@pytest.mark.parametrize("shape", [(23, 56), (56, 23), (31, 31)])
def test_causal_bias(ctx, variant, shape):
    """PyTorch's CausalBias (torch.nn.attention.bias) as attn_mask is the top-left or bottom-right causal
    mask, as PyTorch's own SDPA reads it: before, its meaningless memory was read as a float mask (NaN or
    garbage; lower-right refused as not broadcasting). With is_causal=True it is refused as PyTorch does."""
    from torch.nn.attention import bias as causal_bias
    L, S = shape
    gen = torch.Generator().manual_seed(L * 100 + S)
    q, k, v = (torch.rand(2, 3, n, 16, generator=gen) for n in (L, S, S))
    mask = getattr(causal_bias, "causal_" + variant)(L, S)
    got = clattn.scaled_dot_product_attention(q, k, v, attn_mask=mask, context=ctx)
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    finite = torch.isfinite(want)  # (PyTorch's rows that see no key are NaN; clattn's are 0, as documented)
    assert bool((got[~finite] == 0).all())
    assert (got[finite] - want[finite]).abs().max().item() < 1e-5
    with pytest.raises(RuntimeError, match="CausalBias should not be used with causal=True"):
        clattn.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=True, context=ctx)


def within_four_tolerances(dtype, results):
    """Each (name, got, float64 reference): got in dtype, within four times dtype's tolerance of the reference."""
    atol, rtol = TOL[dtype]
    for name, got, want in results:
        assert got.dtype == dtype, name
        torch.testing.assert_close(got.double(), want.detach(), atol=atol * 4, rtol=rtol * 4,
                                   msg=lambda m: f"{name}: {m}")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_sinks_gradient(ctx, dtype):
    """Sinks given as a tensor that requires grad (a model's learned sinks): dQ, dK, dV and the sinks' own
    gradient against a float64 autograd of the same attention written densely (the sinks a column of the
    softmax that has no value)."""
    torch.manual_seed(seed("sinks", str(dtype)))
    B, H, KVH, L, S, D = 2, 4, 2, 7, 11, 16
    q, k, v = (torch.randn(*s).to(dtype).requires_grad_() for s in ((B, H, L, D), (B, KVH, S, D), (B, KVH, S, D)))
    sinks = torch.randn(H).to(dtype).requires_grad_()
    out = clattn.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True, sinks=sinks, context=ctx)
    grad = torch.randn(out.shape).to(dtype)
    out.backward(grad)
    q64, k64, v64, s64 = (t.detach().double().requires_grad_() for t in (q, k, v, sinks))
    kr, vr = (t.repeat_interleave(H // KVH, dim=1) for t in (k64, v64))
    scores = (q64 @ kr.transpose(-1, -2) / D ** 0.5).masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(),
                                                                 float("-inf"))
    full = torch.cat([scores, s64.view(1, H, 1, 1).expand(B, H, L, 1)], dim=-1)
    want = torch.softmax(full, dim=-1)[..., :S] @ vr
    want.backward(grad.double())
    within_four_tolerances(dtype, (("out", out, want), ("dq", q.grad, q64.grad), ("dk", k.grad, k64.grad),
                                   ("dv", v.grad, v64.grad), ("dsinks", sinks.grad, s64.grad)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_sparse_attention_gradients(ctx, dtype):
    """clattn.sparse_attention on tensors that require grad (its backward: clattn_sdpa_sparse_backward): out, dQ,
    dK, dV and the learned sinks' gradient against a float64 autograd of the same attention written densely (the
    selection a mask of log(count), a key given twice counting twice), GQA, soft-capping."""
    torch.manual_seed(seed("sparse", str(dtype)))
    B, H, KVH, L, S, D, TOP = 2, 4, 2, 9, 60, 16, 20
    q, k, v = (torch.randn(*s).to(dtype).requires_grad_() for s in ((B, H, L, D), (B, KVH, S, D), (B, KVH, S, D)))
    sinks = torch.randn(H).to(dtype).requires_grad_()
    idx = torch.randint(-1, S, (B, L, TOP))
    idx[:, :, 1] = idx[:, :, 0]
    out = clattn.sparse_attention(q, k, v, idx, sinks=sinks, softcap=3.0, context=ctx)
    grad = torch.randn(out.shape).to(dtype)
    out.backward(grad)
    counts = torch.zeros(B, 1, L, S, dtype=torch.float64)
    counts.scatter_add_(3, idx.clamp(min=0).unsqueeze(1), (idx >= 0).double().unsqueeze(1))
    q64, k64, v64, s64 = (t.detach().double().requires_grad_() for t in (q, k, v, sinks))
    kr, vr = (t.repeat_interleave(H // KVH, dim=1) for t in (k64, v64))
    scores = 3.0 * torch.tanh(q64 @ kr.transpose(-1, -2) / D ** 0.5 / 3.0) + counts.log()
    full = torch.cat([scores, s64.view(1, H, 1, 1).expand(B, H, L, 1)], dim=-1)
    want = torch.softmax(full, dim=-1)[..., :S] @ vr
    want.backward(grad.double())
    within_four_tolerances(dtype, (("out", out, want), ("dq", q.grad, q64.grad), ("dk", k.grad, k64.grad),
                                   ("dv", v.grad, v64.grad), ("dsinks", sinks.grad, s64.grad)))


def test_reproducible_gradients(ctx):
    """reproducible=True through PyTorch's autograd: the forward and clattn_sdpa_backward in reproducible arithmetic —
    the same bits whatever desc.algorithm asks, and within the tolerance of a float64 autograd."""
    torch.manual_seed(seed("reproducible"))
    B, H, KVH, L, S, D = 2, 4, 2, 9, 23, 16
    grads = []
    for algorithm in ("auto", "staged"):
        q, k, v = (torch.randn(*s, generator=torch.Generator().manual_seed(7 + i)).requires_grad_()
                   for i, s in enumerate(((B, H, L, D), (B, KVH, S, D), (B, KVH, S, D))))
        out = clattn.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True, softcap=4.0,
                                                  reproducible=True, algorithm=algorithm, context=ctx)
        out.backward(torch.ones_like(out))
        grads.append((out.detach(), q.grad, k.grad, v.grad))
    assert all(torch.equal(a, b) for a, b in zip(*grads))
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    kr, vr = (t.repeat_interleave(H // KVH, dim=1) for t in (k64, v64))
    scores = 4.0 * torch.tanh(q64 @ kr.transpose(-1, -2) / D ** 0.5 / 4.0)
    scores = scores.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))
    want = torch.softmax(scores, dim=-1) @ vr
    want.backward(torch.ones_like(want))
    within_four_tolerances(torch.float32, (("out", grads[0][0], want), ("dq", grads[0][1], q64.grad),
                                           ("dk", grads[0][2], k64.grad), ("dv", grads[0][3], v64.grad)))
