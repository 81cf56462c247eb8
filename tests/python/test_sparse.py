"""Top-k sparse attention from Python (KVCache.attend(indices=...): clattn_sdpa_sparse): each query row over the
keys its indices select, dense and paged caches, float32 and float16, with sinks, against the fp64 reference given
the same selection as a bool mask; and the refusals."""
import numpy as np
import pytest

import clattn
import reference as ref
from conftest import assert_close

B, KVH, H, D, ROWS, L, K = 2, 2, 4, 16, 90, 3, 20


def selection(rng, lengths):
    """(B, L, K) positions: distinct, shuffled, with -1 padding and some past a sequence's rows."""
    idx = np.empty((B, L, K), np.int32)
    for b in range(B):
        for i in range(L):
            row = rng.permutation(ROWS)[:K].astype(np.int32)
            row[::7] = -1
            idx[b, i] = row
    return idx


def as_mask(idx, lengths, keys):
    mask = np.zeros((B, 1, L, keys), bool)
    for b in range(B):
        for i in range(L):
            for j in idx[b, i]:
                if 0 <= j < lengths[b]:
                    mask[b, 0, i, j] = True
    return mask


@pytest.mark.parametrize("block_size", [None, 16])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_against_the_reference(ctx, rng, block_size, dtype):
    cache = clattn.KVCache(B, KVH, 128, D, block_size=block_size, dtype=dtype, context=ctx)
    k, v = rng.standard_normal((2, B, KVH, ROWS, D)).astype(dtype)
    cache.append(k, v)
    idx = selection(rng, cache.lengths)
    q = rng.standard_normal((B, H, L, D)).astype(dtype)
    sinks = [0.5, -1.0, 0.0, 1.5]
    out, lse = cache.attend(q, indices=idx, sinks=sinks, return_lse=True)
    want = ref.sdpa(q, k, v, mask=as_mask(idx, cache.lengths, ROWS), sinks=sinks)
    assert_close(out, want[0], dtype)
    assert_close(lse, want[1], what="lse")


def test_refusals(ctx, rng):
    cache = clattn.KVCache(B, KVH, 128, D, context=ctx)
    cache.append(*rng.standard_normal((2, B, KVH, ROWS, D)).astype(np.float32))
    q = rng.standard_normal((B, H, L, D)).astype(np.float32)
    with pytest.raises(clattn.ArgumentError, match="indices"):
        cache.attend(q, indices=np.zeros((B, L), np.int32))
    quantised = clattn.KVCache(B, KVH, 128, D, dtype="int8", context=ctx)
    quantised.append(*rng.standard_normal((2, B, KVH, ROWS, D)).astype(np.float32))
    with pytest.raises(clattn.Error, match="k_dtype"):
        quantised.attend(q, indices=np.zeros((B, L, 4), np.int32))


@pytest.mark.parametrize("block_size", [None, 16])
def test_selection_in_the_call(ctx, rng, block_size):
    """attend(scores=, top_k=): the top_k highest of each row's scores (clattn_topk) — the same as the indices a
    numpy selection gives (ties to the lower position; -inf never chosen), bit for bit."""
    cache = clattn.KVCache(B, KVH, 128, D, block_size=block_size, context=ctx)
    cache.append(*rng.standard_normal((2, B, KVH, ROWS, D)).astype(np.float32))
    q = rng.standard_normal((B, H, L, D)).astype(np.float32)
    scores = np.round(rng.standard_normal((B, L, 100)) * 2).astype(np.float32)  # (ties)
    scores[0, 1, ::3] = -np.inf
    got = cache.attend(q, scores=scores, top_k=K)
    idx = np.full((B, L, K), -1, np.int32)
    for b in range(B):
        for i in range(L):
            row = scores[b, i, :cache.lengths[b]]
            order = [j for j in np.lexsort((np.arange(row.size), -row)) if row[j] != -np.inf][:K]
            idx[b, i, :len(order)] = np.sort(order)
    assert np.array_equal(got, cache.attend(q, indices=idx))
    with pytest.raises(clattn.ArgumentError, match="scores and top_k"):
        cache.attend(q, scores=scores)
    with pytest.raises(clattn.Error, match="lengths"):
        cache.attend(q, scores=np.ascontiguousarray(scores[:, :, :50]), top_k=K)


# clattn.sparse_attention: the call over a dense K/V (clattn_sdpa_sparse) and its gradients
# (clattn_sdpa_sparse_backward), against the fp64 reference given the selection as an additive mask —
# log(count) where a row selects a key count times, -inf where it does not.
S, TOP = 70, 24


def dense_selection(rng, lengths):
    """(B, L, TOP) positions with -1 padding, positions past a sequence's length, repeats, and a row (1, L-1) that
    selects nothing it can see; and the mask (B, 1, L, S) they make."""
    idx = rng.integers(0, S, (B, L, TOP)).astype(np.int32)
    idx[:, :, ::5] = -1
    idx[:, :, 3] = idx[:, :, 2]
    idx[0, 0, 7] = S + 3
    idx[1, L - 1] = lengths[1] + np.arange(TOP) % 4
    counts = np.zeros((B, 1, L, S))
    for b in range(B):
        for i in range(L):
            for j in idx[b, i]:
                if 0 <= j < lengths[b]:
                    counts[b, 0, i, j] += 1
    with np.errstate(divide="ignore"):
        return idx, np.log(counts)


def reference_gradients(q, k, v, mask, dout, scale, softcap, sinks):
    """The fp64 gradients of ref.sdpa with the mask: dq, dk, dv (a K/V head's summed over its group), dsinks."""
    q, k, v, dout = (np.asarray(t, np.float64) for t in (q, k, v, dout))
    out, lse, p = ref.sdpa(q, k, v, mask=mask, scale=scale, softcap=softcap, sinks=sinks)
    group = q.shape[1] // k.shape[1]
    kk, vv = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    delta = (dout * out).sum(-1, keepdims=True)
    ds = p * (np.einsum("bhld,bhsd->bhls", dout, vv) - delta)
    if softcap:
        ds = ds * (1 - np.tanh(np.einsum("bhld,bhsd->bhls", q, kk) * scale / softcap) ** 2)
    fold = lambda g: g.reshape(g.shape[0], -1, group, *g.shape[2:]).sum(2)  # noqa: E731 (a group's heads summed)
    dq = scale * np.einsum("bhls,bhsd->bhld", ds, kk)
    dk = fold(scale * np.einsum("bhls,bhld->bhsd", ds, q))
    dv = fold(np.einsum("bhls,bhld->bhsd", p, dout))
    dsinks = None if sinks is None else -(np.exp(np.asarray(sinks)[None, :, None] - lse) * delta[..., 0]).sum((0, 2))
    return out, lse, dq, dk, dv, dsinks


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("variant", ["plain", "sinks and softcap"])
def test_sparse_attention_and_its_gradients(ctx, rng, dtype, variant):
    lengths = [S, 51]
    q = rng.standard_normal((B, H, L, D)).astype(dtype)
    k, v = rng.standard_normal((2, B, KVH, S, D)).astype(dtype)
    idx, mask = dense_selection(rng, lengths)
    sinks, softcap, scale = ([0.5, -1.0, 0.0, 1.5], 2.0, 0.3) if variant != "plain" else (None, None, D ** -0.5)
    opts = dict(sinks=sinks, softcap=softcap, scale=scale if variant != "plain" else None)
    out, lse = clattn.sparse_attention(q, k, v, idx, key_lengths=lengths, return_lse=True, context=ctx, **opts)
    dout = rng.standard_normal(out.shape).astype(np.float32)
    want = reference_gradients(q, k, v, mask, dout, scale, softcap, sinks)
    assert_close(out, want[0], dtype)
    assert_close(lse, want[1], what="lse")
    assert np.all(out[1, :, L - 1] == 0) and (sinks or np.all(lse[1, :, L - 1] == -np.inf))  # (a row of nothing)
    # The backward (what sparse_attention's autograd runs on PyTorch tensors), on numpy arrays: the forward's
    # output in float32 (as the autograd keeps it), the gradients in the inputs' type.
    out32 = np.empty(out.shape, np.float32)
    shape = (B, H, KVH, L, S, D, D, TOP)
    options = {"key_lengths": lengths, **({"sinks": sinks, "softcap": softcap, "scale": scale} if sinks else {})}
    clattn._clattn.sparse(ctx, q, k, v, idx, out32, lse, None, None, None, None, None, shape, **options)
    dq, dk, dv = np.empty_like(q), np.empty_like(k), np.empty_like(v)
    dsinks = np.empty(H, np.float32) if sinks else None
    clattn._clattn.sparse(ctx, q, k, v, idx, out32, lse, dout, dq, dk, dv, dsinks, shape, **options)
    # (float32 sums over up to TOP pairs a row and up to L·H pairs a key; 16-bit gradients: their rounding)
    for name, got, exact in (("dq", dq, want[2]), ("dk", dk, want[3]), ("dv", dv, want[4])):
        assert_close(got, exact, dtype, what=name)
    assert np.all(dq[1, :, L - 1] == 0) and np.all(dk[1, :, 51:] == 0)
    if sinks:
        assert_close(dsinks, want[5], what="dsinks")


def test_sparse_attention_refusals(ctx, rng):
    q = rng.standard_normal((B, H, L, D)).astype(np.float32)
    k = rng.standard_normal((B, KVH, S, D)).astype(np.float32)
    idx = np.zeros((B, L, 4), np.int32)
    with pytest.raises(clattn.ArgumentError, match="indices"):
        clattn.sparse_attention(q, k, k, idx[:, :2], context=ctx)
    with pytest.raises(clattn.ArgumentError, match="one dtype"):
        clattn.sparse_attention(q, k.astype(np.float16), k, idx, context=ctx)
    with pytest.raises(clattn.ArgumentError, match="dividing"):
        clattn.sparse_attention(q[:, :3], k, k, idx, context=ctx)
    with pytest.raises(clattn.Error, match="lengths"):
        clattn.sparse_attention(q, k, k, idx, key_lengths=[S + 1, 1], context=ctx)
