"""The call options' table (src/base/call_options.def, issue 37) from Python: logit_scale reaches
scaled_dot_product_attention, multi_head_attention and KVCache.attend (each against the fp64 reference),
and the extension takes the options as keywords — the table's C field names —, refusing any other. The
walk of the table over the Python signatures and docstrings is tools/scripts/check_options.py's."""
import numpy as np
import pytest

import clattn
import reference as ref
from clattn import _clattn
from conftest import assert_close

SCALES = [2.0, -0.75, 0.0, 1.25]


def test_sdpa_logit_scale(ctx, rng):
    q = rng.uniform(-1, 1, size=(2, 4, 9, 16)).astype(np.float32)
    k = rng.uniform(-1, 1, size=(2, 2, 13, 16)).astype(np.float32)
    v = rng.uniform(-1, 1, size=(2, 2, 13, 8)).astype(np.float32)
    out, lse = clattn.scaled_dot_product_attention(q, k, v, enable_gqa=True, softcap=3.0, is_causal=True,
                                                   logit_scale=SCALES, return_lse=True, context=ctx)
    want, want_lse, _ = ref.sdpa(q, k, v, causal=True, softcap=3.0, logit_scale=SCALES)
    assert_close(out, want)
    assert_close(lse, want_lse, what="lse")
    plain = clattn.scaled_dot_product_attention(q, k, v, enable_gqa=True, softcap=3.0, is_causal=True, context=ctx)
    assert np.abs(plain - want).max() > 1e-3  # (the scales matter)


@pytest.mark.parametrize("cross", [False, True])
def test_layer_logit_scale(ctx, rng, cross):
    B, L, S, dm, dkv, H, KVH, dk = 2, 7, 11, 16, 12, 4, 2, 4
    f = lambda *shape: rng.uniform(-0.6, 0.6, size=shape).astype(np.float32)  # noqa: E731
    x, kv = f(B, L, dm), (f(B, S, dkv) if cross else None)
    d_in = dkv if cross else dm
    w = dict(w_q=f(dm, H * dk), w_k=f(d_in, KVH * dk), w_v=f(d_in, KVH * dk), w_o=f(H * dk, dm))
    out = clattn.multi_head_attention(x, heads=H, kv_heads=KVH, kv=kv, logit_scale=SCALES, softcap=2.0,
                                      context=ctx, **w)
    assert_close(out, ref.mha(x, heads=H, kv_heads=KVH, kv=kv, logit_scale=SCALES, softcap=2.0, **w))
    plain = clattn.multi_head_attention(x, heads=H, kv_heads=KVH, kv=kv, softcap=2.0, context=ctx, **w)
    assert np.abs(plain - out).max() > 1e-4


def test_kvcache_logit_scale(ctx, rng):
    cache = clattn.KVCache(1, 2, 32, 8, context=ctx)
    k = rng.uniform(-1, 1, size=(1, 2, 10, 8)).astype(np.float32)
    v = rng.uniform(-1, 1, size=(1, 2, 10, 8)).astype(np.float32)
    cache.append(k, v)
    q = rng.uniform(-1, 1, size=(1, 4, 1, 8)).astype(np.float32)
    out = cache.attend(q, logit_scale=SCALES)
    want, _, _ = ref.sdpa(q, k, v, causal=True, offsets=[9], logit_scale=SCALES)
    assert_close(out, want)


def test_wrong_length_refused(ctx, rng):
    q = rng.uniform(-1, 1, size=(1, 4, 3, 8)).astype(np.float32)
    with pytest.raises(clattn.ArgumentError, match="logit_scale"):
        clattn.scaled_dot_product_attention(q, q, q, logit_scale=[1.0, 2.0], context=ctx)
    with pytest.raises(clattn.Error, match="logit_scale"):
        clattn.scaled_dot_product_attention(q, q, q, logit_scale=[1.0, float("nan"), 1.0, 1.0], context=ctx)


def test_extension_takes_keywords(ctx, rng):
    q = rng.uniform(-1, 1, size=(1, 2, 3, 4)).astype(np.float32)
    out = np.empty_like(q)
    shape = (1, 2, 2, 3, 3, 4, 4)
    _clattn.sdpa(ctx, q, q, q, out, None, None, None, shape, None, False, scale=0.5, logit_scale=[1.0, 2.0])
    want, _, _ = ref.sdpa(q, q, q, scale=0.5, logit_scale=[1.0, 2.0])
    assert_close(out, want)
    with pytest.raises(TypeError, match="no option 'alibi'"):  # (the Python name; the extension's is alibi_slopes)
        _clattn.sdpa(ctx, q, q, q, out, None, None, None, shape, None, False, alibi=[1.0, 2.0])
    with pytest.raises(TypeError):  # (no positional options tuple any more)
        _clattn.sdpa(ctx, q, q, q, out, None, None, None, shape, (None,) * 12, None, False)
