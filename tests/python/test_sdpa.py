"""clattn.scaled_dot_product_attention against the fp64 reference: shapes (odd, GQA, cross lengths, extra
batch dimensions), masks of every broadcast (bool and float, in place or expanded), every variant, the
three storage types, both paths and the optional outputs."""
import numpy as np
import pytest

import clattn
import reference as ref
from conftest import assert_close

SHAPES = [  # (batch dims, H, KVH, L, S, D, Dv)
    ((1,), 1, 1, 4, 4, 8, 8),
    ((2,), 4, 4, 37, 41, 16, 16),
    ((3,), 6, 2, 19, 53, 24, 8),
    ((), 3, 3, 7, 13, 32, 32),
    ((2, 2), 2, 1, 9, 9, 12, 20),
    ((1,), 8, 8, 1, 301, 64, 64),
    ((1,), 2, 2, 130, 130, 64, 64),
]


def make(rng, shape, dtype="float32"):
    x = rng.uniform(-1.5, 1.5, size=shape).astype(np.float32)
    if dtype == "float16":
        x = x.astype(np.float16)
        return x, x.astype(np.float32)
    if dtype == "bfloat16":
        bits = ref.f32_to_bf16(x)
        return bits, ref.bf16_to_f32(bits)
    return x, x


def flat(x, lead):
    """(…, H, L, E) with the batch dimensions folded into one."""
    return np.asarray(x).reshape((int(np.prod(lead)) if lead else 1,) + tuple(np.asarray(x).shape[len(lead):]))


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s[0] + s[1:])))
@pytest.mark.parametrize("causal", [False, True])
def test_shapes(ctx, rng, shape, causal):
    lead, H, KVH, L, S, D, Dv = shape
    q, qf = make(rng, lead + (H, L, D))
    k, kf = make(rng, lead + (KVH, S, D))
    v, vf = make(rng, lead + (KVH, S, Dv))
    out, lse = clattn.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=KVH != H, return_lse=True,
                                                   context=ctx)
    assert out.shape == lead + (H, L, Dv) and out.dtype == np.float32 and lse.shape == lead + (H, L)
    ro, rl, _ = ref.sdpa(flat(qf, lead), flat(kf, lead), flat(vf, lead), causal=causal)
    assert_close(flat(out, lead), ro)
    assert_close(flat(lse, lead), rl, what="lse")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("algorithm", ["fused", "staged", "decode"])
def test_storage_types(ctx, rng, dtype, algorithm):
    L = 3 if algorithm == "decode" else 29
    q, qf = make(rng, (2, 4, L, 32), dtype)
    k, kf = make(rng, (2, 2, 45, 32), dtype)
    v, vf = make(rng, (2, 2, 45, 32), dtype)
    out = clattn.scaled_dot_product_attention(q, k, v, enable_gqa=True, algorithm=algorithm,
                                              dtype="bfloat16" if dtype == "bfloat16" else None, context=ctx)
    assert out.dtype == q.dtype
    got = ref.bf16_to_f32(out) if dtype == "bfloat16" else out
    ro, _, _ = ref.sdpa(qf, kf, vf)
    assert_close(got, ro, dtype)


MASKS = [  # (mask shape given (B=2, H=3, L=11, S=17), kind)
    ((11, 17), "bool"), ((11, 17), "float"), ((2, 1, 11, 17), "bool"), ((2, 3, 11, 17), "float"),
    ((1, 3, 11, 17), "float"), ((2, 1, 1, 17), "bool"), ((17,), "bool"), ((3, 1, 17), "float"),
    ((1, 1, 11, 17), "bool"), ((2, 3, 11, 1), "float"),
]


@pytest.mark.parametrize("mask_shape,kind", MASKS, ids=lambda m: str(m))
def test_masks(ctx, rng, mask_shape, kind):
    q, _ = make(rng, (2, 3, 11, 16))
    k, _ = make(rng, (2, 3, 17, 16))
    v, _ = make(rng, (2, 3, 17, 16))
    if kind == "bool":
        mask = rng.uniform(size=mask_shape) > 0.3
    else:
        mask = rng.normal(size=mask_shape).astype(np.float32)
        mask[rng.uniform(size=mask_shape) < 0.2] = -np.inf
    out = clattn.scaled_dot_product_attention(q, k, v, attn_mask=mask, context=ctx)
    ro, _, _ = ref.sdpa(q, k, v, mask=mask)
    assert_close(out, ro)


def test_fully_masked_rows_give_zero(ctx, rng):
    q, _ = make(rng, (1, 2, 5, 8))
    k, _ = make(rng, (1, 2, 6, 8))
    mask = np.ones((5, 6), dtype=bool)
    mask[2] = False
    out, lse = clattn.scaled_dot_product_attention(q, k, k, attn_mask=mask, return_lse=True, context=ctx)
    assert np.all(out[:, :, 2] == 0) and np.all(np.isneginf(lse[:, :, 2])) and np.all(np.isfinite(out))


VARIANTS = {
    "window": dict(window=(3, 1)),
    "causal window": dict(is_causal=True, window=(4, None)),
    "softcap": dict(softcap=2.0),
    "sinks": dict(sinks=[0.5, -1.0, 2.0, 0.0]),
    "alibi": dict(alibi=[-0.5, -0.25, -0.125, -0.0625]),
    "offsets": dict(is_causal=True, offsets=[10, 3]),
    "key lengths": dict(key_lengths=[20, 7]),
    "scale": dict(scale=0.3),
    "everything": dict(is_causal=True, window=(9, None), softcap=3.0, sinks=[0.1, 0.2, 0.3, 0.4],
                       alibi=[-0.1, -0.2, -0.3, -0.4], offsets=[12, 5], key_lengths=[25, 19], scale=0.2),
}


@pytest.mark.parametrize("name", sorted(VARIANTS))
@pytest.mark.parametrize("algorithm", ["fused", "staged"])
def test_variants(ctx, rng, name, algorithm):
    kwargs = VARIANTS[name]
    q, _ = make(rng, (2, 4, 13, 16))
    k, _ = make(rng, (2, 2, 25, 16))
    v, _ = make(rng, (2, 2, 25, 16))
    out, lse = clattn.scaled_dot_product_attention(q, k, v, enable_gqa=True, return_lse=True, algorithm=algorithm,
                                                   context=ctx, **kwargs)
    rk = dict(kwargs)
    rk["causal"] = rk.pop("is_causal", False)
    ro, rl, _ = ref.sdpa(q, k, v, **rk)
    assert_close(out, ro)
    assert_close(lse, rl, what="lse")


def test_weights(ctx, rng):
    q, _ = make(rng, (1, 2, 9, 8))
    k, _ = make(rng, (1, 2, 12, 8))
    out, w = clattn.scaled_dot_product_attention(q, k, k, is_causal=True, weights="softmax", context=ctx)
    _, _, rp = ref.sdpa(q, k, k, causal=True)
    assert w.shape == (1, 2, 9, 12) and w.dtype == np.float32
    assert_close(w, rp, what="weights")
    out2, lse, w2 = clattn.scaled_dot_product_attention(q, k, k, weights="qk", return_lse=True, context=ctx)
    assert_close(w2, np.einsum("bhld,bhsd->bhls", q.astype(np.float64), k) / np.sqrt(8), what="qk")


def test_non_contiguous_inputs_are_copied(ctx, rng):
    base, _ = make(rng, (2, 13, 3, 16))  # (B, L, H, E): PyTorch's usual view before .transpose(1, 2)
    q = base.transpose(0, 2, 1, 3)
    assert not q.flags.c_contiguous
    out = clattn.scaled_dot_product_attention(q, q, q, context=ctx)
    ro, _, _ = ref.sdpa(q, q, q)
    assert_close(out, ro)
