"""MLA (multi-head latent attention, DeepSeek-V2/V3) from Python: KVCache(latent=True) holds one latent row per token
([c ; k_R], the compressed 512 and the rotary 64), append takes it alone, attend takes the absorbed queries
[W_UKᵀ q_C ; q_R] — against the model's own equations in float64, head by head in the expanded form (k_h = [W_UK c ;
k_R], v_h = W_UV c, scale 1/√(d_nope + d_rope)), the output up-projected by W_UV. Dense and paged caches, float32,
bfloat16 and int8, decode and multi-token prediction (L 2); the refusals."""
import numpy as np
import pytest

import clattn
from conftest import assert_close

B, H, R, DR, DN, DV, ROWS = 2, 16, 512, 64, 128, 128, 150


def model(rng):
    latent = rng.uniform(-1, 1, (B, ROWS, R + DR)).astype(np.float32)
    w_uk = rng.uniform(-1, 1, (H, DN, R)) * np.sqrt(3.0 / R)
    w_uv = rng.uniform(-1, 1, (H, DV, R)) * np.sqrt(3.0 / R)
    return latent, w_uk, w_uv


def expanded(latent, w_uk, w_uv, q_c, q_r, lengths):
    """The model's equations: per head, keys [W_UK c ; k_R] and values W_UV c; the last L rows are the queries'."""
    L = q_c.shape[2]
    out = np.zeros((B, H, L, DV))
    for b in range(B):
        c, k_r = latent[b, :lengths[b], :R].astype(np.float64), latent[b, :lengths[b], R:].astype(np.float64)
        for h in range(H):
            k = np.concatenate([c @ w_uk[h].T, k_r], axis=1)
            v = c @ w_uv[h].T
            s = np.concatenate([q_c[b, h], q_r[b, h]], axis=1) @ k.T / np.sqrt(DN + DR)
            for i in range(L):  # (bottom-right causal: query i sits at row lengths[b] - L + i)
                s[i, lengths[b] - L + i + 1:] = -np.inf
            p = np.exp(s - s.max(axis=1, keepdims=True))
            out[b, h] = (p / p.sum(axis=1, keepdims=True)) @ v
    return out


def stored(latent, dtype):
    """The rows as appended and the values the cache holds (bfloat16: truncated bits; int8: the reference takes
    the rows, the tolerance their rounding)."""
    if dtype == "bfloat16":
        bits = (latent.view(np.uint32) >> 16).astype(np.uint16)
        return bits, (bits.astype(np.uint32) << 16).view(np.float32)
    return latent, latent


@pytest.mark.parametrize("block_size", [None, 16])
@pytest.mark.parametrize("dtype,L", [("float32", 1), ("bfloat16", 2), ("int8", 1)])
def test_against_the_model(ctx, rng, block_size, dtype, L):
    latent, w_uk, w_uv = model(rng)
    rows, values = stored(latent, dtype)
    cache = clattn.KVCache(B, 1, 256, R + DR, v_dim=R, dtype=dtype, block_size=block_size, latent=True, context=ctx)
    cache.append(rows[:, None, :100])  # (two appends: the second lands mid-block)
    cache.append(rows[:, None, 100:])
    assert cache.lengths == (ROWS, ROWS)
    q_c = rng.uniform(-1, 1, (B, H, L, DN))
    q_r = rng.uniform(-1, 1, (B, H, L, DR))
    q = np.concatenate([np.einsum("bhln,hnr->bhlr", q_c, w_uk), q_r], axis=3).astype(np.float32)
    o_latent = cache.attend(q, scale=1 / np.sqrt(DN + DR))
    assert o_latent.shape == (B, H, L, R)
    got = np.einsum("bhlr,hdr->bhld", o_latent.astype(np.float64), w_uv)
    want = expanded(values, w_uk, w_uv, q_c, q_r, cache.lengths)
    if dtype == "int8":  # (each row's values rounded to 1/254 of its largest: a looser bound)
        assert np.max(np.abs(got - want)) < 3e-3  # (measured: 8.5e-4 of outputs up to 0.22)
    else:
        assert_close(got, want)


def test_refusals(ctx, rng):
    latent, _, _ = model(rng)
    cache = clattn.KVCache(B, 1, 256, R + DR, v_dim=R, latent=True, context=ctx)
    with pytest.raises(clattn.ArgumentError, match="key alone"):
        cache.append(latent[:, None], latent[:, None, :, :R])
    with pytest.raises(ValueError, match="v_dim 640 must be below head_dim 576"):
        clattn.KVCache(B, 1, 256, R + DR, v_dim=640, latent=True, context=ctx)
    with pytest.raises(clattn.ArgumentError, match="shared prefixes"):
        clattn.KVCache(B, 1, 256, R + DR, v_dim=R, block_size=16, prefix_capacity=64, latent=True, context=ctx)
    with pytest.raises(clattn.ArgumentError, match="latent=True"):
        clattn.KVCache(B, 1, 256, R + DR, v_dim=R, context=ctx).append(latent[:, None])
    cache.append(latent[:, None])
    assert cache.v_bytes() is None
    with pytest.raises(clattn.ArgumentError, match="through append"):
        cache.load_bytes(cache.k_bytes(), cache.k_bytes())
    q = rng.uniform(-1, 1, (B, H, 1, R + DR)).astype(np.float32)
    with pytest.raises(clattn.Error, match="v"):
        cache.attend(q, indices=np.zeros((B, 1, 4), np.int32))
