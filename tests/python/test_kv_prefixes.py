"""Shared prefixes of a paged KVCache (KVCache(prefix_capacity=...), add_prefix, attend(prefixes=...): cascade
attention, clattn_sdpa_cascade): each sequence's keys are its prefix at each level and then its own rows,
checked against the fp64 reference of those keys written out whole and against a plain paged cache holding the
same rows per sequence; a quantised cache; pyopencl arrays; and the refusals."""
import numpy as np
import pytest

import clattn
import reference as ref
from conftest import assert_close

B, KVH, H, D = 3, 2, 4, 16


def rows(rng, n):
    return rng.standard_normal((KVH, n, D)).astype(np.float32), rng.standard_normal((KVH, n, D)).astype(np.float32)


def whole(prefixes, levels, own, b):
    """Sequence b's keys and values written out whole: its prefix at each level, then its own rows."""
    parts = [prefixes[level[b]] for level in levels] + [(own[0][b], own[1][b])]
    return (np.concatenate([k for k, _ in parts], axis=1)[None], np.concatenate([v for _, v in parts], axis=1)[None])


@pytest.mark.parametrize("causal", [True, False])
def test_two_levels_against_the_reference_and_a_plain_cache(ctx, rng, causal):
    cache = clattn.KVCache(B, KVH, 40, D, block_size=8, prefix_capacity=64, context=ctx)
    prefixes = {}
    for n in (21, 9, 13):  # (a prefix for all that ends mid-block; two sub-prefixes)
        k, v = rows(rng, n)
        prefixes[cache.add_prefix(k, v)] = (k, v)
    levels = [[0, 0, 0], [1, 2, 1]]
    own = (rng.standard_normal((B, KVH, 5, D)).astype(np.float32), rng.standard_normal((B, KVH, 5, D)).astype(np.float32))
    cache.append(*own)
    q = rng.standard_normal((B, H, 2, D)).astype(np.float32)
    out, lse = cache.attend(q, prefixes=levels, return_lse=True, is_causal=causal, softcap=3.0)
    for b in range(B):
        k, v = whole(prefixes, levels, own, b)
        offsets = [k.shape[2] - 2] if causal else None
        o, l, _ = ref.sdpa(q[b:b + 1], k, v, causal=causal, offsets=offsets, softcap=3.0)
        assert_close(out[b:b + 1], o)
        assert_close(lse[b:b + 1], l, what="lse")
    # The same rows appended to a plain paged cache, one a sequence (the sequences' lengths differ).
    for b in range(B):
        one = clattn.KVCache(1, KVH, 64, D, block_size=8, context=ctx)
        k, v = whole(prefixes, levels, own, b)
        one.append(k, v)
        assert_close(out[b:b + 1], one.attend(q[b:b + 1], is_causal=causal, softcap=3.0).astype(np.float64))


def test_quantised_cache(ctx, rng):
    """An int8 cache: the prefix rows quantised by the device as an append quantises them; the cascade
    equals attention over the same bytes in a plain cache (within float32 rounding of the merge)."""
    cache = clattn.KVCache(2, KVH, 32, D, dtype="int8", block_size=16, prefix_capacity=32, context=ctx)
    k, v = rows(rng, 19)
    pid = cache.add_prefix(k[None], v[None])  # ((1, kv_heads, n, D) taken too)
    own = (rng.standard_normal((2, KVH, 3, D)).astype(np.float32), rng.standard_normal((2, KVH, 3, D)).astype(np.float32))
    cache.append(*own)
    q = rng.standard_normal((2, H, 1, D)).astype(np.float32)
    out = cache.attend(q, prefixes=[[pid, pid]])
    for b in range(2):
        one = clattn.KVCache(1, KVH, 32, D, dtype="int8", block_size=16, context=ctx)
        one.append(np.concatenate([k, own[0][b]], axis=1)[None], np.concatenate([v, own[1][b]], axis=1)[None])
        np.testing.assert_allclose(out[b:b + 1], one.attend(q[b:b + 1]), atol=2e-6, rtol=2e-5)


def test_device_arrays(ctx, rng):
    cl = pytest.importorskip("pyopencl")  # (in CI a skip counts as a failure)
    cla = pytest.importorskip("pyopencl.array")
    import clattn.pyopencl as cp
    device = next(d for p in cl.get_platforms() for d in p.get_devices() if d.name == ctx.device_name)
    queue = cl.CommandQueue(cl.Context([device]))
    dev = clattn.KVCache(B, KVH, 16, D, block_size=8, prefix_capacity=16, context=cp.context(queue))
    host = clattn.KVCache(B, KVH, 16, D, block_size=8, prefix_capacity=16, context=cp.context(queue))
    k, v = rows(rng, 11)
    own = (rng.standard_normal((B, KVH, 4, D)).astype(np.float32), rng.standard_normal((B, KVH, 4, D)).astype(np.float32))
    q = rng.standard_normal((B, H, 1, D)).astype(np.float32)
    pd = dev.add_prefix(cla.to_device(queue, k), cla.to_device(queue, v))
    dev.append(cla.to_device(queue, own[0]), cla.to_device(queue, own[1]))
    ph = host.add_prefix(k, v)
    host.append(*own)
    out = dev.attend(cla.to_device(queue, q), prefixes=[[pd] * B])
    assert isinstance(out, cla.Array)
    np.testing.assert_array_equal(out.get(), host.attend(q, prefixes=[[ph] * B]))


def test_refusals(ctx, rng):
    k, v = rows(rng, 9)
    q = rng.standard_normal((B, H, 1, D)).astype(np.float32)
    dense = clattn.KVCache(B, KVH, 16, D, context=ctx)
    with pytest.raises(ValueError, match="room for shared prefixes"):
        dense.add_prefix(k, v)
    with pytest.raises(ValueError, match="prefix_capacity"):
        clattn.KVCache(B, KVH, 16, D, prefix_capacity=8, context=ctx)
    cache = clattn.KVCache(B, KVH, 16, D, block_size=8, prefix_capacity=16, context=ctx)
    pid = cache.add_prefix(k, v)  # (2 of the 2 blocks kept)
    with pytest.raises(ValueError, match="do not fit"):
        cache.add_prefix(k[:, :1], v[:, :1])
    cache.append(*(rng.standard_normal((B, KVH, 2, D)).astype(np.float32) for _ in range(2)))
    with pytest.raises(ValueError, match=r"prefixes\[0\]\[1\] = 5 is not a prefix"):
        cache.attend(q, prefixes=[[pid, 5, pid]])
    with pytest.raises(ValueError, match="holds 2 values"):
        cache.attend(q, prefixes=[[pid, pid]])
    with pytest.raises(TypeError, match="float32"):
        cache.attend(q.astype(np.float16), prefixes=[[pid] * B])
    with pytest.raises(clattn.Error, match="alibi"):
        cache.attend(q, prefixes=[[pid] * B], alibi=[0.1] * H)
    with pytest.raises(ValueError, match="0 to 8 levels"):
        cache.attend(q, prefixes=[[pid] * B] * 9)
    with pytest.raises(clattn.Error, match="causal queries"):
        cache.attend(rng.standard_normal((B, H, 3, D)).astype(np.float32), prefixes=[[pid] * B])
    assert_close(cache.attend(q, prefixes=[[pid] * B]), cache.attend(q, prefixes=[[pid] * B]))
