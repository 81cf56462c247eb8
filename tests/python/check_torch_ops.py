"""clattn as a PyTorch operator (meson test python-compile, with -Dtorch_tests=true; by hand like python-torch):
torch.ops.clattn.sdpa's registration checked by torch.library.opcheck (schema, fake implementation, autograd,
AOT dispatch), a small model calling clattn.scaled_dot_product_attention (mods with an auxiliary tensor)
compiled with torch.compile(fullgraph=True) — no graph break — equal to the same model run eagerly, forward and
gradients, and torch.export keeping the call."""
import pytest
import torch

import clattn

clattn.register_torch_ops()

BIAS_MODS = """float score_mod(float s, int b, int h, long q, long k, __global const float *bias)
{ return s + bias[q - k + 128]; }
float score_mod_grad(float s, int b, int h, long q, long k, __global const float *bias) { return 1.0f; }
"""


class Block(torch.nn.Module):
    """A self-attention block whose attention is clattn's, with a relative-position bias as a score_mod."""

    def __init__(self, d=64, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.out = torch.nn.Linear(d, d)
        self.register_buffer("bias", torch.randn(256, generator=torch.Generator().manual_seed(1)))

    def forward(self, x):
        B, L, d = x.shape
        q, k, v = self.qkv(x).view(B, L, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = clattn.scaled_dot_product_attention(q, k, v, is_causal=True, mods=BIAS_MODS, aux={"bias": self.bias})
        return self.out(y.transpose(1, 2).reshape(B, L, d))


@pytest.fixture(autouse=True)
def fresh_compile_state():
    torch._dynamo.reset()
    torch._inductor.config.force_disable_caches = True  # (a cached graph would not exercise the fakes)


def test_opcheck():
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(2, 4, n, 16, generator=g, requires_grad=True) for n in (9, 13, 13))
    mask = torch.rand(9, 13, generator=g) > 0.2
    bias = torch.randn(256, generator=g)
    for args in ((q, k, v, None, True, None, False, None, [], ""),
                 (q, k, v, mask, False, 0.3, False, BIAS_MODS, [bias], "bias")):
        torch.library.opcheck(torch.ops.clattn.sdpa.default, args)


def test_compiled_model_equals_eager():
    torch.manual_seed(0)
    model = Block()
    x = torch.randn(2, 37, 64, requires_grad=True)
    eager = model(x)
    eager.sum().backward()
    gx, gw = x.grad.clone(), model.qkv.weight.grad.clone()
    x.grad = None
    model.zero_grad()
    compiled = torch.compile(model, fullgraph=True)  # (a graph break raises)
    out = compiled(x)
    out.sum().backward()
    torch.testing.assert_close(out, eager, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(x.grad, gx, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(model.qkv.weight.grad, gw, atol=1e-6, rtol=1e-6)


def test_export_keeps_the_call():
    model = Block()
    x = torch.randn(1, 20, 64)
    program = torch.export.export(model, (x,))
    targets = [str(n.target) for n in program.graph.nodes if n.op == "call_function"]
    assert "clattn.sdpa.default" in targets, targets
    torch.testing.assert_close(program.module()(x), model(x), atol=1e-6, rtol=1e-6)


def test_compiled_call_refuses_what_the_operator_cannot_carry():
    @torch.compile(fullgraph=True)
    def windowed(q, k, v):
        return clattn.scaled_dot_product_attention(q, k, v, window=(4, 0))

    q = torch.randn(1, 2, 8, 16)
    with pytest.raises(Exception, match="under torch.compile clattn takes"):
        windowed(q, q, q)
