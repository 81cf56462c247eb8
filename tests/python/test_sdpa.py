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
    # Windows over several 64-key tiles (issue 36 item 17): no tile is wholly visible to a work-item's rows.
    "tiles: window (8, 0)": dict(window=(8, 0), shape=(150, 200)),
    "tiles: window (8, 4)": dict(window=(8, 4), shape=(200, 200)),
    "tiles: causal window (8, 4), key lengths": dict(is_causal=True, window=(8, 4), key_lengths=[190, 131],
                                                     shape=(150, 200)),
}


@pytest.mark.parametrize("name", sorted(VARIANTS))
@pytest.mark.parametrize("algorithm", ["fused", "staged"])
def test_variants(ctx, rng, name, algorithm):
    kwargs = dict(VARIANTS[name])
    L, S = kwargs.pop("shape", (13, 25))
    q, _ = make(rng, (2, 4, L, 16))
    k, _ = make(rng, (2, 2, S, 16))
    v, _ = make(rng, (2, 2, S, 16))
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


BROADCASTS = {  # Issue 36 item 9: (query, key, value shapes, enable_gqa) that PyTorch broadcasts
    "3-D query, 4-D K/V": ((4, 3, 8), (4, 4, 6, 8), (4, 4, 6, 8), False),
    "one K/V head, 4 query heads": ((2, 4, 3, 8), (2, 1, 6, 8), (2, 1, 6, 5), False),
    "one query head, 4 K/V heads": ((2, 1, 3, 8), (2, 4, 6, 8), (2, 4, 6, 8), False),
    "K/V batch 1": ((3, 4, 3, 8), (1, 4, 6, 8), (1, 4, 6, 8), False),
    "K one head, V four": ((2, 4, 3, 8), (2, 1, 6, 8), (2, 4, 6, 8), False),
    "GQA with a broadcast batch": ((3, 4, 3, 8), (1, 2, 6, 8), (1, 2, 6, 8), True),
    "2-D": ((3, 8), (6, 8), (6, 4), False),
    "5-D query, 3-D K/V": ((2, 3, 2, 5, 8), (2, 7, 8), (2, 7, 8), False),
}


def broadcast_reference(q, k, v, enable_gqa, **kwargs):
    """PyTorch's broadcast in numpy: the leading dimensions broadcast, GQA's heads repeated."""
    lead_q, lead_k = q.shape[:-2], k.shape[:-2]
    n = max(len(lead_q), len(lead_k), len(v.shape) - 2)
    pad = lambda x: x.reshape((1,) * (n + 2 - x.ndim) + x.shape)  # noqa: E731
    q, k, v = pad(q), pad(k), pad(v)
    if n == 0:
        q, k, v = q[None, None], k[None, None], v[None, None]
        return ref.sdpa(q, k, v, **kwargs)[0][0, 0]
    if enable_gqa and k.shape[-3] not in (1, q.shape[-3]):
        k = np.repeat(k, q.shape[-3] // k.shape[-3], axis=-3)
        v = np.repeat(v, q.shape[-3] // v.shape[-3], axis=-3)
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    q, k, v = (np.broadcast_to(x, lead + x.shape[-2:]) for x in (q, k, v))
    flat = lambda x: x.reshape((-1,) + x.shape[-3:]) if x.ndim > 3 else x[None]  # noqa: E731
    out = ref.sdpa(flat(q), flat(k), flat(v), **kwargs)[0]
    return out.reshape(lead + out.shape[-2:])


@pytest.mark.parametrize("name", sorted(BROADCASTS))
def test_broadcasting_as_pytorch(ctx, rng, name):
    qs, ks, vs, gqa = BROADCASTS[name]
    q, k, v = (make(rng, s)[0] for s in (qs, ks, vs))
    out = clattn.scaled_dot_product_attention(q, k, v, enable_gqa=gqa, context=ctx)
    assert_close(out, broadcast_reference(q, k, v, gqa))
    causal = clattn.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa, context=ctx)
    assert_close(causal, broadcast_reference(q, k, v, gqa, causal=True))


def test_heads_that_do_not_broadcast_are_refused(ctx):
    q, k = np.ones((1, 4, 3, 8), np.float32), np.ones((1, 2, 6, 8), np.float32)
    with pytest.raises(RuntimeError, match="enable_gqa"):
        clattn.scaled_dot_product_attention(q, k, k, context=ctx)
    with pytest.raises(RuntimeError, match="broadcast"):
        clattn.scaled_dot_product_attention(q, np.ones((1, 3, 6, 8), np.float32), np.ones((1, 3, 6, 8), np.float32),
                                            enable_gqa=True, context=ctx)


ZERO_SIZES = {  # Issue 36 item 7: (query, key, value shapes) with a zero-size dimension, what PyTorch gives
    "L = 0": ((2, 3, 0, 8), (2, 3, 5, 8), (2, 3, 5, 6)),
    "S = 0": ((2, 3, 4, 8), (2, 3, 0, 8), (2, 3, 0, 6)),
    "B = 0": ((0, 3, 4, 8), (0, 3, 5, 8), (0, 3, 5, 6)),
    "H = 0": ((2, 0, 4, 8), (2, 0, 5, 8), (2, 0, 5, 6)),
    "E = 0": ((2, 3, 4, 0), (2, 3, 5, 0), (2, 3, 5, 6)),
    "Ev = 0": ((2, 3, 4, 8), (2, 3, 5, 8), (2, 3, 5, 0)),
}


@pytest.mark.parametrize("name", sorted(ZERO_SIZES))
@pytest.mark.parametrize("causal", [False, True])
def test_zero_size_dimensions(ctx, rng, name, causal):
    """PyTorch's math: an empty output without query rows or with Ev = 0; zeros for S = 0 (a softmax over
    no keys weighs nothing: lse -inf); E = 0: every score 0, so each row averages the values it sees."""
    qs, ks, vs = ZERO_SIZES[name]
    q, k, v = (rng.uniform(-1, 1, size=s).astype(np.float32) for s in (qs, ks, vs))
    out, lse = clattn.scaled_dot_product_attention(q, k, v, is_causal=causal, return_lse=True, context=ctx)
    assert out.shape == qs[:-1] + vs[-1:] and out.dtype == np.float32 and lse.shape == qs[:-1]
    if out.size and ks[-2] == 0:
        assert np.all(out == 0) and np.all(np.isneginf(lse))
    elif out.size or lse.size:
        want, want_lse, _ = ref.sdpa(q.reshape((-1,) + qs[1:]), k, v, causal=causal) if qs[-1] else \
            ref.sdpa(np.zeros(qs[:-1] + (1,)), np.zeros(ks[:-1] + (1,)), v, causal=causal, scale=1.0)
        assert_close(out, want)
        assert_close(lse, want_lse, what="lse")
