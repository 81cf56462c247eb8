"""reproducible=True (clattn_arithmetic's CLATTN_ARITHMETIC_REPRODUCIBLE): the same bits whatever the algorithm,
for a row alone and in a batch, as accurate as the default arithmetic against float64; the layer takes it (its
projections too: the same bits on every algorithm); the weights output (since 0.24: the output unchanged, the
same bits on every algorithm)."""
import numpy as np
import pytest

import clattn
import reference as ref
from conftest import assert_close


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_the_same_bits_on_every_algorithm(ctx, rng, dtype):
    q = rng.standard_normal((2, 4, 9, 32)).astype(dtype)
    k, v = rng.standard_normal((2, 2, 2, 40, 32)).astype(dtype)
    runs = [clattn.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True, softcap=3.0,
                                                 reproducible=True, algorithm=a, return_lse=True, context=ctx)
            for a in ("auto", "fused", "staged", "decode")]
    for out, lse in runs[1:]:
        assert np.array_equal(out, runs[0][0]) and np.array_equal(lse, runs[0][1])
    want = ref.sdpa(q, k, v, causal=True, softcap=3.0)
    assert_close(runs[0][0], want[0], dtype)
    assert_close(runs[0][1], want[1], what="lse")


def test_a_row_alone_and_in_a_batch(ctx, rng):
    q = rng.standard_normal((6, 4, 1, 16)).astype(np.float32)
    k, v = rng.standard_normal((2, 6, 4, 100, 16)).astype(np.float32)
    batch = clattn.scaled_dot_product_attention(q, k, v, reproducible=True, context=ctx)
    alone = clattn.scaled_dot_product_attention(q[3:4], k[3:4], v[3:4], reproducible=True, context=ctx)
    assert np.array_equal(batch[3:4], alone)


def test_layer(ctx, rng):
    x = rng.standard_normal((2, 5, 24)).astype(np.float32)
    w = [rng.standard_normal((24, 24)).astype(np.float32) * 0.2 for _ in range(4)]
    outs = [clattn.multi_head_attention(x, *w, heads=3, is_causal=True, reproducible=True, algorithm=a, context=ctx)
            for a in ("auto", "fused", "staged")]
    out = outs[0]
    assert out.shape == (2, 5, 24) and np.all(np.isfinite(out))
    assert all(np.array_equal(o, out) for o in outs[1:])


@pytest.mark.parametrize("mode", ["softmax", "qk", "masked"])
def test_weights(ctx, rng, mode):
    q = rng.standard_normal((1, 2, 9, 8)).astype(np.float32)
    k = rng.standard_normal((1, 2, 12, 8)).astype(np.float32)
    runs = [clattn.scaled_dot_product_attention(q, k, k, is_causal=True, weights=mode, reproducible=True,
                                                 algorithm=a, context=ctx) for a in ("auto", "staged")]
    (out, w), (out2, w2) = runs
    assert np.array_equal(w, w2) and np.array_equal(out, out2) and w.shape == (1, 2, 9, 12)
    assert np.array_equal(out, clattn.scaled_dot_product_attention(q, k, k, is_causal=True, reproducible=True,
                                                                    context=ctx))
    if mode == "softmax":
        assert_close(w, ref.sdpa(q, k, k, causal=True)[2], what="weights")
    elif mode == "qk":
        assert_close(w, np.einsum("bhld,bhsd->bhls", q.astype(np.float64), k) / np.sqrt(8), what="qk")
