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
