"""KVCache in the token formats (u4_t32, u2_t32: KIVI's keys, a scale and zero point per channel over groups
of 32 rows, the unfinished group in float16): rows appended in steps that fill groups and leave a tail, the
chunks read back with k_bytes() and dequantised here in numpy from the layout docs/kv-formats.md gives (not
from the kernels), attention against the fp64 reference on the dequantised cache; dense and paged; refusals."""
import numpy as np
import pytest

import clattn
import reference as ref

TOKENS = 32


def _half(raw):
    return np.ascontiguousarray(raw).view("<f2").astype(np.float64)


def chunk_values(fmt, chunk, rows, dim):
    """One chunk's (rows, dim) values: a uint32 count of complete groups; rows // 32 groups of (a uint32 mask
    of rows that held a non-finite value, dim fp16 scales, dim fp16 zero points, 32 rows of packed values, low
    bits first); a tail of 32 float16 rows holding the rows past the complete groups at row % 32."""
    bits = 4 if fmt == "u4_t32" else 2
    per_byte, row_bytes = 8 // bits, dim * bits // 8
    group_bytes = 4 + dim * 4 + TOKENS * row_bytes
    complete = min(int(chunk[:4].view("<u4")[0]), rows // TOKENS)
    tail = _half(chunk[4 + rows // TOKENS * group_bytes:][:TOKENS * dim * 2]).reshape(TOKENS, dim)
    out = np.empty((rows, dim))
    for r in range(rows):
        g = r // TOKENS
        if g >= complete:
            out[r] = tail[r % TOKENS]
            continue
        group = chunk[4 + g * group_bytes:][:group_bytes]
        s, z = _half(group[4:4 + dim * 2]), _half(group[4 + dim * 2:4 + dim * 4])
        packed = group[4 + dim * 4 + (r % TOKENS) * row_bytes:][:row_bytes]
        q = (packed[np.arange(dim) // per_byte] >> ((np.arange(dim) % per_byte) * bits)) & ((1 << bits) - 1)
        bad = (int(group[:4].view("<u4")[0]) >> (r % TOKENS)) & 1
        out[r] = np.nan if bad else (q - z) * s
    return out


def cache_values(cache, which, upto, table_of=None):
    """K (0) or V (1) as float64 (B, KVH, upto, dim), read from the cache's chunks."""
    fmt, dim = (cache.k_dtype, cache.head_dim) if which == 0 else (cache.v_dtype, cache.v_dim)
    raw = cache.k_bytes() if which == 0 else cache.v_bytes()
    B, KVH = cache.batch, cache.kv_heads
    out = np.zeros((B, KVH, upto, dim))
    if cache.block_size is None:
        for b in range(B):
            for h in range(KVH):
                out[b, h] = chunk_values(fmt, raw[b, h], cache.capacity, dim)[:upto]
        return out
    bs = cache.block_size  # blocks are handed out in order, sequence after sequence, step after step
    for b in range(B):
        for j in range(-(-upto // bs)):
            for h in range(KVH):
                rows = chunk_values(fmt, raw[table_of(b, j), h], bs, dim)
                n = min(bs, upto - j * bs)
                out[b, h, j * bs:j * bs + n] = rows[:n]
    return out


@pytest.mark.parametrize("k_fmt,v_fmt,D,block_size", [
    ("u2_t32", "u4_g32", 64, None), ("u4_t32", "u2_t32", 20, None), ("u4_t32", "float16", 32, 32)])
def test_kv_tokens_append_attend(ctx, rng, k_fmt, v_fmt, D, block_size):
    B, KVH, H, cap = 2, 2, 4, 100
    cache = clattn.KVCache(B, KVH, cap, D, block_size=block_size, context=ctx, k_dtype=k_fmt, v_dtype=v_fmt)
    assert cache.k_row_bytes == 0 and clattn.formats()[k_fmt].tokens == TOKENS
    blocks = []  # (b, j) in the order the cache hands blocks out
    ks, vs, total = [], [], 0
    for n in (5, 30, 40, 24):  # a few rows, across a group's end, groups at once; 99 in all (3 in the tail)
        k = rng.uniform(-1, 1, size=(B, KVH, n, D)).astype(np.float32)
        k[..., 3] *= 8  # an outlier channel
        v = rng.uniform(-1, 1, size=(B, KVH, n, D)).astype(np.float32)
        cache.append(k, v)
        for b in range(B if block_size else 0):
            for j in range(total // block_size, -(-(total + n) // block_size)):
                if (b, j) not in blocks:
                    blocks.append((b, j))
        ks.append(k), vs.append(v)
        total += n
        table_of = (lambda b, j: blocks.index((b, j))) if block_size else None
        kk = cache_values(cache, 0, total, table_of)
        want = np.concatenate(ks, 2).astype(np.float64)
        # the quantisation stays within a step of its group's range (the tail: float16's rounding)
        step = (want.max() - min(want.min(), 0)) / (15 if k_fmt == "u4_t32" else 3)
        assert np.all(np.abs(kk - want) <= step), f"K {k_fmt}: {np.abs(kk - want).max()} off"
        vv = (cache_values(cache, 1, total, table_of) if clattn.formats()[v_fmt].tokens
              else ref_values(cache, total, v_fmt))
        q = rng.uniform(-1, 1, size=(B, H, 3, D)).astype(np.float32)
        out, lse = cache.attend(q, return_lse=True)
        ro, rl, _ = ref.sdpa(q, kk, vv, causal=True, offsets=[total - 3] * B)
        np.testing.assert_allclose(out, ro, atol=2e-5, rtol=1e-4)
        np.testing.assert_allclose(lse, rl, atol=2e-5, rtol=1e-4)


def ref_values(cache, upto, fmt):
    """A V of a per-row format, through test_kv_formats' dequantiser."""
    import test_kv_formats as per_row
    vs = cache.v_scales()
    return per_row.dequantise(fmt, cache.v_bytes()[:, :, :upto], cache.v_dim, None if vs is None else vs[:, :, :upto])


def test_kv_tokens_refusals(ctx):
    with pytest.raises(ValueError, match="multiple of"):
        clattn.KVCache(1, 1, 64, 18, context=ctx, dtype="u2_t32")
    with pytest.raises(clattn.Error, match="no whole group"):
        cache = clattn.KVCache(1, 1, 64, 16, block_size=16, context=ctx, dtype="u4_t32")
        cache.append(np.zeros((1, 1, 1, 16), np.float32), np.zeros((1, 1, 1, 16), np.float32))
    cache = clattn.KVCache(1, 1, 64, 16, context=ctx, dtype="u4_t32")
    with pytest.raises(clattn.ArgumentError, match="chunks"):
        cache.load_bytes(np.zeros((1, 1, 4, 8), np.uint8), np.zeros((1, 1, 4, 8), np.uint8))
    with pytest.raises(clattn.ArgumentError, match="chunks"):
        clattn.KVCache.from_bytes(np.zeros((1, 1, 4, 8), np.uint8), np.zeros((1, 1, 4, 8), np.uint8), dtype="u2_t32")
