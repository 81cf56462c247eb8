"""Tree attention from Python (speculative decoding's draft trees: scaled_dot_product_attention(tree=...),
KVCache.attend(tree=...)): against the fp64 reference given the same visibility as an explicit mask (built here by
walking the parents), against the same call through a bool mask, dense and paged caches, one tree for the batch
or one per sequence, and the refusals."""
import numpy as np
import pytest

import clattn
import reference as ref
from conftest import assert_close

B, H, KVH, D = 2, 4, 2, 16
TREES = np.array([[-1, 0, 0, 1, 1, 2, 5, -1, 7, 3, 9],   # (two roots, branches)
                  [-1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9]])   # (a chain: the draft as one sequence)


def tree_mask(parents, first, n, keys):
    """(n, keys) bool: query i sees the keys before the draft's `first`, and of the draft's n only its ancestors'."""
    mask = np.ones((n, keys), bool)
    for i in range(n):
        mask[i, first:first + n] = False
        a = i
        while a >= 0:
            mask[i, first + a] = True
            a = parents[a]
    return mask


def data(rng, cache, n=TREES.shape[1]):
    s = cache + n
    return (rng.standard_normal((B, H, n, D)).astype(np.float32), rng.standard_normal((B, KVH, s, D)).astype(np.float32),
            rng.standard_normal((B, KVH, s, D)).astype(np.float32))


@pytest.mark.parametrize("algorithm", ["auto", "fused", "staged", "decode"])
def test_sdpa_against_the_reference_and_a_bool_mask(ctx, rng, algorithm):
    cache = 23
    q, k, v = data(rng, cache)
    mask = np.stack([tree_mask(t, cache, TREES.shape[1], k.shape[2]) for t in TREES])[:, None]
    expected = ref.sdpa(q, k, v, mask=mask)[0]
    out = clattn.scaled_dot_product_attention(q, k, v, enable_gqa=True, tree=TREES, offsets=[cache] * B,
                                              algorithm=algorithm, context=ctx)
    assert_close(out, expected)
    masked = clattn.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True, algorithm=algorithm,
                                                 context=ctx)
    assert_close(out, masked)


def test_one_tree_for_every_sequence(ctx, rng):
    cache = 6
    q, k, v = data(rng, cache)
    mask = tree_mask(TREES[0], cache, TREES.shape[1], k.shape[2])
    out = clattn.scaled_dot_product_attention(q, k, v, enable_gqa=True, tree=TREES[0], offsets=[cache] * B, context=ctx)
    assert_close(out, ref.sdpa(q, k, v, mask=mask)[0])


@pytest.mark.parametrize("block_size", [None, 8])
def test_kvcache_attend_after_appending_the_draft(ctx, rng, block_size):
    """The verification step of speculative decoding: the draft's rows appended, then one call for its tokens."""
    cache = clattn.KVCache(B, KVH, 64, D, block_size=block_size, context=ctx)
    past_k, past_v = rng.standard_normal((2, B, KVH, 30, D)).astype(np.float32)
    cache.append(past_k, past_v)
    q, k, v = data(rng, 0)
    cache.append(k, v)
    out = cache.attend(q, tree=TREES)
    keys, values = np.concatenate([past_k, k], 2), np.concatenate([past_v, v], 2)
    mask = np.stack([tree_mask(t, 30, TREES.shape[1], keys.shape[2]) for t in TREES])[:, None]
    assert_close(out, ref.sdpa(q, keys, values, mask=mask)[0])


def test_refusals(ctx, rng):
    q, k, v = data(rng, 4)
    with pytest.raises(clattn.ArgumentError, match="tree holds 5 values; one parent per query"):
        clattn.scaled_dot_product_attention(q, k, v, enable_gqa=True, tree=[-1, 0, 1, 2, 3], offsets=[4] * B,
                                            context=ctx)
    bad = TREES.copy()
    bad[1, 6] = 6  # (its own parent)
    with pytest.raises(clattn.Error, match=r"tree_parents\[17\] = 6"):
        clattn.scaled_dot_product_attention(q, k, v, enable_gqa=True, tree=bad, offsets=[4] * B, context=ctx)
