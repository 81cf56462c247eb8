"""A mixed batch from Python: KVCache.append(counts=...) (each sequence keeps its own number of the new rows) and
KVCache.attend(query_lengths=...) (each sequence's own number of queries, packed: clattn_sdpa_paged_ragged) — a
prefill chunk, a decode row and a draft tree in one call — against the fp64 reference of each sequence alone; and
the refusals."""
import numpy as np
import pytest

import clattn
import reference as ref
from conftest import assert_close

B, KVH, H, D, PAST = 3, 2, 4, 16, 20
COUNTS = [7, 1, 5]                  # a chunk, a decode row, a draft of 5
DRAFT = [-1, 0, 0, 1, 2]


def filled(ctx, rng, dtype="float32"):
    cache = clattn.KVCache(B, KVH, 128, D, block_size=16, dtype=dtype, context=ctx)
    past = rng.standard_normal((2, B, KVH, PAST, D)).astype(np.float32)
    cache.append(*past)
    new = rng.standard_normal((2, B, KVH, max(COUNTS), D)).astype(np.float32)
    cache.append(*new, counts=COUNTS)
    return cache, past, new


def expected(q, past, new, tree):
    """Each sequence alone: its rows so far, its queries the last of them, causal (and its tree)."""
    outs, lses, start = [], [], 0
    for b, n in enumerate(COUNTS):
        k = np.concatenate([past[0][b], new[0][b][:, :n]], 1)[None]
        v = np.concatenate([past[1][b], new[1][b][:, :n]], 1)[None]
        mask = np.ones((n, PAST + n), bool)
        for i in range(n):
            mask[i, PAST + i + 1:] = False
            if tree is not None:
                mask[i, PAST:] = False
                a = i
                while a >= 0:
                    mask[i, PAST + a] = True
                    a = tree[start + a]
        r = ref.sdpa(q[start:start + n].transpose(1, 0, 2)[None], k, v, mask=mask)
        outs.append(r[0][0].transpose(1, 0, 2))
        lses.append(r[1][0].T)
        start += n
    return np.concatenate(outs), np.concatenate(lses)


@pytest.mark.parametrize("with_tree", [False, True])
def test_one_call_against_each_sequence_alone(ctx, rng, with_tree):
    cache, past, new = filled(ctx, rng)
    assert cache.lengths == tuple(PAST + n for n in COUNTS)
    q = rng.standard_normal((sum(COUNTS), H, D)).astype(np.float32)
    tree = [i - 1 for i in range(COUNTS[0])] + [-1] + DRAFT if with_tree else None  # (a chain: the chunk, causal)
    out, lse = cache.attend(q, query_lengths=COUNTS, tree=tree, return_lse=True)
    want_out, want_lse = expected(q, past, new, tree)
    assert_close(out, want_out)
    assert_close(lse, want_lse, what="lse")


def test_decode_kernels_and_a_quantised_cache(ctx, rng):
    cache, past, new = filled(ctx, rng, dtype="int8")
    q = rng.standard_normal((sum(COUNTS), H, D)).astype(np.float32)
    out = cache.attend(q, query_lengths=COUNTS, algorithm="decode")
    start = 0  # (each sequence alone, in a cache of its own holding the same rows)
    for b, n in enumerate(COUNTS):
        one = clattn.KVCache(1, KVH, 128, D, block_size=16, dtype="int8", context=ctx)
        one.append(past[0][b:b + 1], past[1][b:b + 1])
        one.append(new[0][b:b + 1, :, :n], new[1][b:b + 1, :, :n])
        alone = one.attend(q[start:start + n].transpose(1, 0, 2)[None])
        assert_close(out[start:start + n], alone[0].transpose(1, 0, 2))
        start += n


def test_refusals(ctx, rng):
    cache, _, _ = filled(ctx, rng)
    q = rng.standard_normal((sum(COUNTS), H, D)).astype(np.float32)
    with pytest.raises(clattn.ArgumentError, match="query_lengths"):
        cache.attend(q[:-1], query_lengths=COUNTS)
    with pytest.raises(clattn.ArgumentError, match="prefixes"):
        cache.attend(q, query_lengths=COUNTS, prefixes=[[0] * B])
    with pytest.raises(ValueError, match="counts\\[1\\] = 9"):
        cache.append(*rng.standard_normal((2, B, KVH, 2, D)).astype(np.float32), counts=[1, 9, 0])
    dense = clattn.KVCache(B, KVH, 64, D, context=ctx)
    dense.append(*rng.standard_normal((2, B, KVH, 8, D)).astype(np.float32))
    with pytest.raises(ValueError, match="paged"):
        dense.attend(q, query_lengths=COUNTS)
    grouped = clattn.KVCache(B, KVH, 64, D, block_size=32, dtype="u4_t32", context=ctx)
    with pytest.raises(ValueError, match="u4_t32"):
        grouped.append(*rng.standard_normal((2, B, KVH, 2, D)).astype(np.float32), counts=[1, 2, 0])
