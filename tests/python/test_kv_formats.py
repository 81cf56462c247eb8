"""KVCache in every storage format of the library (clattn.formats(): float32, float16, bfloat16, int8, ggml's
q8_0 and q4_0, the asymmetric u8/u4 groups, FP8 E4M3 and E5M2): rows appended and quantised on the device,
the raw bytes read back and dequantised here in numpy (from the formats' definitions, not from the kernels),
attention against the fp64 reference on the dequantised cache; raw bytes written by another program (random
valid blocks) loaded as they are; dense and paged, K and V of different formats, odd shapes, refusals."""
import numpy as np
import pytest

import clattn
import reference as ref

FORMATS = [name for name, f in clattn.formats().items() if not f.tokens]  # (tokens: test_kv_tokens.py)
FLOATS = ("float32", "float16", "bfloat16")


# ---- numpy dequantiser: each format's bytes as float64 ----------------------------------------------------

def _half(b):
    """fp16 from the two bytes of the last axis (little-endian)."""
    return np.ascontiguousarray(b).view("<f2")[..., 0].astype(np.float64)


def _fp8_table(mbits, bias, ieee_top):
    codes = np.arange(256)
    e, m = (codes & 0x7F) >> mbits, codes & ((1 << mbits) - 1)
    top = 0x7F >> mbits
    mag = np.where(e == 0, m * 2.0 ** (1 - bias - mbits), (1 + m / 2.0 ** mbits) * 2.0 ** (e - bias))
    if ieee_top:
        mag = np.where(e == top, np.where(m == 0, np.inf, np.nan), mag)
    else:
        mag = np.where((e == top) & (m == (1 << mbits) - 1), np.nan, mag)
    return np.where(codes & 0x80, -mag, mag)


FP8 = {"fp8_e4m3": _fp8_table(3, 7, False), "fp8_e5m2": _fp8_table(2, 15, True)}


def dequantise(fmt, raw, dim, scales=None):
    """raw uint8 (..., row_bytes) in format fmt → float64 (..., dim); scales (...) multiply each row."""
    raw = np.ascontiguousarray(raw)
    lead = raw.shape[:-1]
    if fmt == "float32":
        x = raw.view("<f4").astype(np.float64)
    elif fmt == "float16":
        x = raw.view("<f2").astype(np.float64)
    elif fmt == "bfloat16":
        x = ref.bf16_to_f32(raw.view("<u2")).astype(np.float64)
    elif fmt == "int8":
        x = raw.view(np.int8).astype(np.float64)
    elif fmt in FP8:
        x = FP8[fmt][raw]
    elif fmt in ("q8_0", "q4_0"):
        b = raw.reshape(lead + (dim // 32, 34 if fmt == "q8_0" else 18))
        d = _half(b[..., 0:2])[..., None]
        if fmt == "q8_0":
            q = b[..., 2:].view(np.int8).astype(np.float64)
        else:  # value j < 16: byte j's low nibble; j >= 16: byte j - 16's high nibble
            q = np.concatenate([b[..., 2:] & 15, b[..., 2:] >> 4], axis=-1).astype(np.float64) - 8
        x = (q * d).reshape(lead + (dim,))
    else:  # u8_gN / u4_gN: fp16 s, fp16 z, then the values (u4: value 2t in byte t's low nibble, 2t+1 high)
        n = int(fmt.split("_g")[1])
        b = raw.reshape(lead + (dim // n, (n if fmt.startswith("u8") else n // 2) + 4))
        s, z = _half(b[..., 0:2])[..., None], _half(b[..., 2:4])[..., None]
        v = b[..., 4:]
        q = v if fmt.startswith("u8") else np.stack([v & 15, v >> 4], axis=-1).reshape(v.shape[:-1] + (n,))
        x = ((q.astype(np.float64) - z) * s).reshape(lead + (dim,))
    return x if scales is None else x * np.asarray(scales, np.float64)[..., None]


def quantisation_bound(fmt, x, scales):
    """How far a value the device quantised may be from x (float64, (..., dim)): half a step of the format at
    that value, with margin for the fp16 rounding of a block's scale."""
    if fmt == "float32":
        return np.zeros_like(x)
    if fmt in ("float16", "bfloat16"):
        return np.abs(x) * 2.0 ** -(11 if fmt == "float16" else 8) + 1e-7
    if fmt == "int8":
        return 0.51 * scales[..., None] + 0 * x
    if fmt in FP8:
        m = 3 if fmt == "fp8_e4m3" else 2
        step = 2.0 ** (-9 if m == 3 else -16)  # (unscaled subnormals)
        s = 1.0 if scales is None else scales[..., None]
        return np.abs(x) * 2.0 ** -(m + 1) + step * s
    n = 32 if fmt in ("q8_0", "q4_0") else int(fmt.split("_g")[1])
    blocks = x.reshape(x.shape[:-1] + (x.shape[-1] // n, n))
    if fmt in ("q8_0", "q4_0"):
        top = np.abs(blocks).max(axis=-1, keepdims=True)
        step = top / (127 if fmt == "q8_0" else 8)
    else:
        lo, hi = np.minimum(blocks.min(axis=-1, keepdims=True), 0), np.maximum(blocks.max(axis=-1, keepdims=True), 0)
        step = (hi - lo) / (255 if fmt.startswith("u8") else 15)
    # half a step, one more at a clamped end (q4_0's +8, a zero point rounded), fp16 rounding of the scale
    return np.broadcast_to(1.1 * step + 1e-6, blocks.shape).reshape(x.shape)


def block_of(fmt):
    return clattn.formats()[fmt].block


def head_dim_for(fmt, wide=False):
    return max(block_of(fmt), 128 if wide else 32)


def new_rows(rng, fmt, shape):
    """Rows to append to a cache of fmt: its own type for the float formats, float32 otherwise."""
    x = rng.uniform(-1, 1, size=shape).astype(np.float32)
    if fmt == "float16":
        return x.astype(np.float16), x.astype(np.float16).astype(np.float64)
    if fmt == "bfloat16":
        bits = ref.f32_to_bf16(x)
        return bits, ref.bf16_to_f32(bits).astype(np.float64)
    return x, x.astype(np.float64)


def check_close(got, want, what, atol=1e-5, rtol=1e-5):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    err = np.abs(got - want) / (atol + rtol * np.abs(want))
    assert np.all(np.isfinite(got)) and err.max() <= 1, f"{what}: {err.max():.3g} x the tolerance"


def cache_values(cache, upto):
    """The cache's K and V as the device holds them, dequantised: float64 (B, KVH, upto, D)."""
    ks, vs = cache.k_scales(), cache.v_scales()
    k = dequantise(cache.k_dtype, cache.k_bytes()[:, :, :upto], cache.head_dim, None if ks is None else ks[:, :, :upto])
    v = dequantise(cache.v_dtype, cache.v_bytes()[:, :, :upto], cache.v_dim, None if vs is None else vs[:, :, :upto])
    return k, v


# The shapes are shared between the tests (batch 2, 3 K/V heads, 6 query heads, L = 4 on the decode kernels,
# one head size per format) so that they share their kernel builds: PoCL compiles one per format, head size,
# path and feature set, seconds each on a cold cache.
L_DECODE, L_PREFILL = 4, 12


def run_steps(ctx, rng, k_fmt, v_fmt, D, Dv, block_size=None, scaled=False, steps=(L_PREFILL, L_DECODE), attend=(1,),
              B=2, KVH=3, H=6):
    """Appends `steps` rows (a prefill, then a chunk), checking after each the bytes (their values near the
    rows appended) and, after the steps numbered in `attend`, attention over them against fp64 (queries of the
    step's length: L_PREFILL on the fused kernel, L_DECODE on the decode kernels). Returns the cache."""
    cache = clattn.KVCache(B, KVH, 40, D, Dv, block_size=block_size, context=ctx, k_dtype=k_fmt, v_dtype=v_fmt,
                           scaled=scaled)
    assert (cache.k_row_bytes, cache.v_row_bytes) == (clattn.formats()[k_fmt].block_bytes * D // block_of(k_fmt),
                                                      clattn.formats()[v_fmt].block_bytes * Dv // block_of(v_fmt))
    floats = k_fmt in FLOATS and k_fmt == v_fmt
    ks, vs = [], []
    for step, n in enumerate(steps):
        fmt = k_fmt if floats else "float32"
        k, k64 = new_rows(rng, fmt, (B, KVH, n, D))
        v, v64 = new_rows(rng, fmt, (B, KVH, n, Dv))
        cache.append(k, v)
        ks.append(k64), vs.append(v64)
        total = sum(x.shape[2] for x in ks)
        kk, vv = cache_values(cache, total)
        for name, fmt_, got, want, sc in (("K", k_fmt, kk, np.concatenate(ks, 2), cache.k_scales()),
                                          ("V", v_fmt, vv, np.concatenate(vs, 2), cache.v_scales())):
            bound = quantisation_bound(fmt_, want, None if sc is None else sc[:, :, :total].astype(np.float64))
            assert np.all(np.abs(got - want) <= bound), f"{name} {fmt_}: quantised too far ({np.abs(got - want).max()})"
        if step not in attend:
            continue
        q = rng.uniform(-1, 1, size=(B, H, n, D)).astype(np.float32)
        out, lse = cache.attend(q, return_lse=True)
        ro, rl, _ = ref.sdpa(q, kk, vv, causal=True, offsets=[total - n] * B)
        check_close(out, ro, f"{k_fmt}/{v_fmt} out after {total} rows")
        check_close(lse, rl, f"{k_fmt}/{v_fmt} lse after {total} rows")
    return cache


def test_kv_formats_table():
    """The library's table, as the package gives it: every name, its block and bytes as the formats define."""
    f = clattn.formats()
    assert FORMATS[:4] == ["float32", "float16", "bfloat16", "int8"] and len(FORMATS) == 14
    assert (f["q8_0"].block, f["q8_0"].block_bytes, f["q4_0"].block, f["q4_0"].block_bytes) == (32, 34, 32, 18)
    for n in (32, 64, 128):
        assert f[f"u8_g{n}"][1:3] == (n, n + 4) and f[f"u4_g{n}"][1:3] == (n, n // 2 + 4)
    assert [name for name in FORMATS if f[name].row_scales != "none"] == ["int8", "fp8_e4m3", "fp8_e5m2"]
    assert f["int8"].row_scales == "required" and f["fp8_e4m3"].row_scales == "optional"
    assert [name for name in FORMATS if not f[name].kv_only] == list(FLOATS)
    for name in FORMATS:  # every format has a dequantiser here
        dequantise(name, np.zeros((2, f[name].block_bytes * 128 // f[name].block), np.uint8), 128)


@pytest.mark.parametrize("fmt", FORMATS)
def test_kv_formats_append_bytes_attend(ctx, rng, fmt):
    run_steps(ctx, rng, fmt, fmt, head_dim_for(fmt), head_dim_for(fmt))


@pytest.mark.parametrize("fmt", ["q4_0", "int8"])
def test_kv_formats_prefill(ctx, rng, fmt):
    """The fused kernel (more than 8 query rows) over a quantised cache, after each append."""
    run_steps(ctx, rng, fmt, fmt, head_dim_for(fmt), head_dim_for(fmt), attend=(0, 1))


@pytest.mark.parametrize("fmt", ["fp8_e4m3", "fp8_e5m2"])
def test_kv_formats_fp8_scaled(ctx, rng, fmt):
    cache = run_steps(ctx, rng, fmt, fmt, 32, 32, scaled=True)
    ks = cache.k_scales()
    assert ks.shape == (2, 3, 40) and np.all(ks[:, :, :16] > 0) and np.all(ks[:, :, 16:] == 0)


PAGED = ["int8", "q8_0", "q4_0", "u4_g32", "fp8_e4m3"]


@pytest.mark.parametrize("fmt", PAGED)
def test_kv_formats_paged_as_dense(ctx, rng, fmt):
    """A paged cache holds the same bytes as a dense one given the same rows (read back in sequence order)."""
    D = head_dim_for(fmt)
    dense = clattn.KVCache(2, 3, 40, D, dtype=fmt, context=ctx)
    paged = clattn.KVCache(2, 3, 40, D, dtype=fmt, block_size=8, context=ctx)
    for n in (13, 1, 5):
        k, _ = new_rows(rng, fmt, (2, 3, n, D))
        v, _ = new_rows(rng, fmt, (2, 3, n, D))
        dense.append(k, v)
        paged.append(k, v)
    assert paged.blocks_used == 2 * 3
    assert np.array_equal(dense.k_bytes()[:, :, :19], paged.k_bytes()[:, :, :19])
    assert np.array_equal(dense.v_bytes()[:, :, :19], paged.v_bytes()[:, :, :19])
    assert not paged.k_bytes()[:, :, 24:].any()  # (rows without a block read as zeros)
    q = rng.uniform(-1, 1, size=(2, 6, L_DECODE, D)).astype(np.float32)
    kk, vv = cache_values(paged, 19)
    ro, _, _ = ref.sdpa(q, kk, vv, causal=True, offsets=[19 - L_DECODE] * 2)
    check_close(paged.attend(q), ro, f"paged {fmt}")
    check_close(dense.attend(q), ro, f"dense {fmt}")


@pytest.mark.parametrize("k_fmt,v_fmt,D,Dv,block_size", [
    ("q4_0", "fp8_e5m2", 64, 32, None), ("float16", "u4_g32", 32, 96, 8), ("u8_g128", "int8", 128, 64, None)])
def test_kv_formats_k_and_v_differ(ctx, rng, k_fmt, v_fmt, D, Dv, block_size):
    cache = run_steps(ctx, rng, k_fmt, v_fmt, D, Dv, block_size=block_size, attend=(0, 1))
    assert cache.dtype is None and (cache.k_dtype, cache.v_dtype) == (k_fmt, v_fmt)


@pytest.mark.parametrize("fmt", ["q8_0", "u4_g32", "fp8_e5m2"])
def test_kv_formats_rows_of_any_float_type(ctx, rng, fmt):
    """float16 and bfloat16 rows (numpy uint16 bits) are quantised as the float32 rows of their values are."""
    x = rng.uniform(-1, 1, size=(2, 3, 5, 32)).astype(np.float16)
    bits = ref.f32_to_bf16(x.astype(np.float32))  # (float16 values that bfloat16 holds too, or near them)
    widened = {"float16": x.astype(np.float32), "bfloat16": ref.bf16_to_f32(bits)}
    for name, rows in (("float16", x), ("bfloat16", bits)):
        typed = clattn.KVCache(2, 3, 8, 32, dtype=fmt, context=ctx)
        typed.append(rows, rows)
        wide = clattn.KVCache(2, 3, 8, 32, dtype=fmt, context=ctx)
        wide.append(widened[name], widened[name])
        assert np.array_equal(typed.k_bytes(), wide.k_bytes()), f"{name} rows into {fmt}"
        assert np.array_equal(typed.v_bytes(), wide.v_bytes())


def random_bytes(rng, fmt, lead, dim):
    """Valid bytes of fmt as another program could write them (random scales, zero points and values; no NaN
    or infinity), and row scales where the format has them."""
    f = clattn.formats()[fmt]
    n_blocks = dim // f.block
    scales = rng.uniform(0.002, 0.02, size=lead).astype(np.float32) if f.row_scales != "none" else None
    if fmt in FLOATS:
        x = rng.uniform(-1, 1, size=lead + (dim,)).astype(np.float32)
        bits = x if fmt == "float32" else x.astype(np.float16) if fmt == "float16" else ref.f32_to_bf16(x)
        return np.ascontiguousarray(bits).view(np.uint8).reshape(lead + (-1,)), None
    if fmt == "int8":
        return rng.integers(-127, 128, size=lead + (dim,), dtype=np.int8).view(np.uint8), scales
    if fmt in FP8:  # exponents kept small (|x| ≤ 4 before the scale)
        codes = np.arange(256)
        ok = ((codes & 0x7F) >> (3 if fmt == "fp8_e4m3" else 2)) <= (9 if fmt == "fp8_e4m3" else 17)
        return rng.choice(codes[ok], size=lead + (dim,)).astype(np.uint8), scales * 100
    blocks = rng.integers(0, 256, size=lead + (n_blocks, f.block_bytes), dtype=np.uint8)
    blocks[..., 0:2] = rng.uniform(0.001, 0.03, size=lead + (n_blocks, 1)).astype("<f2").view(np.uint8)
    if fmt.startswith("u"):  # a zero point inside the values' range
        levels = 255 if fmt.startswith("u8") else 15
        blocks[..., 2:4] = rng.integers(0, levels + 1, size=lead + (n_blocks, 1)).astype("<f2").view(np.uint8)
    return blocks.reshape(lead + (-1,)), None


@pytest.mark.parametrize("fmt,block_size", [(f, None) for f in FORMATS] + [(f, 8) for f in PAGED])
def test_kv_formats_load_raw_bytes(ctx, rng, fmt, block_size):
    """Bytes written elsewhere (a ggml cache's blocks) are read as they are: loaded, read back unchanged,
    attended over as their dequantised values."""
    B, KVH, H, S, D = 2, 3, 6, 37, head_dim_for(fmt)
    Dv = D
    kb, ksc = random_bytes(rng, fmt, (B, KVH, S), D)
    vb, vsc = random_bytes(rng, fmt, (B, KVH, S), Dv)
    lengths = [37, 21]
    cache = clattn.KVCache.from_bytes(kb, vb, lengths, dtype=fmt, k_scales=ksc, v_scales=vsc, capacity=50,
                                      block_size=block_size, context=ctx)
    assert (cache.head_dim, cache.v_dim, cache.capacity, cache.lengths) == (D, Dv, 50, tuple(lengths))
    back = cache.k_bytes()
    for b in range(B):  # (a paged cache holds the rows of each length; a dense one all it was given)
        n = S if block_size is None else lengths[b]
        assert np.array_equal(back[b, :, :n], kb[b, :, :n]), f"sequence {b}: K's bytes changed"
        assert np.array_equal(cache.v_bytes()[b, :, :n], vb[b, :, :n])
    if ksc is not None:
        assert np.array_equal(cache.k_scales()[:, :, :S][:, :, :21], ksc[:, :, :21])
    q = rng.uniform(-1, 1, size=(B, H, L_DECODE, D)).astype(np.float32)
    kk, vv = dequantise(fmt, kb, D, ksc), dequantise(fmt, vb, Dv, vsc)
    out = cache.attend(q)
    ro, _, _ = ref.sdpa(q, kk, vv, causal=True, offsets=[n - L_DECODE for n in lengths], key_lengths=lengths)
    check_close(out, ro, f"{fmt} from raw bytes")
    cache.append(*(new_rows(rng, fmt, (B, KVH, 2, d))[0] for d in (D, Dv)))  # and it grows on from there
    assert cache.lengths == (39, 23)


@pytest.mark.parametrize("fmt", ["q4_0", "int8", "fp8_e4m3"])
def test_kv_formats_round_trip(ctx, rng, fmt):
    """k_bytes() and load_bytes(): a cache's bytes into another cache (dense to paged) give the same results."""
    D = head_dim_for(fmt)
    first = clattn.KVCache(2, 3, 30, D, dtype=fmt, scaled=fmt.startswith("fp8"), context=ctx)
    first.append(rng.uniform(-1, 1, (2, 3, 17, D)).astype(np.float32), rng.uniform(-1, 1, (2, 3, 17, D)).astype(np.float32))
    kb, vb, ks, vs = first.k_bytes(), first.v_bytes(), first.k_scales(), first.v_scales()
    second = clattn.KVCache(2, 3, 30, D, dtype=fmt, scaled=fmt.startswith("fp8"), block_size=8, context=ctx)
    first17 = [None if a is None else a[:, :, :17] for a in (kb, vb, ks, vs)]
    second.load_bytes(first17[0], first17[1], k_scales=first17[2], v_scales=first17[3])
    assert second.lengths == (17, 17) and second.blocks_used == 2 * 3
    assert np.array_equal(second.k_bytes()[:, :, :17], kb[:, :, :17])
    if vs is not None:
        assert np.array_equal(second.v_scales()[:, :, :17], vs[:, :, :17])
    q = rng.uniform(-1, 1, (2, 6, L_DECODE, D)).astype(np.float32)
    check_close(second.attend(q), first.attend(q), f"{fmt}: paged copy against the dense cache", 1e-6, 1e-6)
    third = clattn.KVCache(2, 3, 30, D, dtype=fmt, scaled=fmt.startswith("fp8"), context=ctx)
    third.load_bytes(kb, vb, [17, 17], k_scales=ks, v_scales=vs)
    assert np.array_equal(third.attend(q), first.attend(q))  # the same buffers: the same results, bit for bit


def test_kv_formats_refusals(ctx, rng):
    with pytest.raises(clattn.ArgumentError, match="q4_0.*q5_1"):
        clattn.KVCache(1, 1, 8, 32, dtype="q5_1", context=ctx)
    with pytest.raises(clattn.ArgumentError, match="v_dtype"):
        clattn.KVCache(1, 1, 8, 32, k_dtype="q4_0", v_dtype="float64", context=ctx)
    with pytest.raises(ValueError, match="head_dim 48 is not a multiple of q4_0's block of 32"):
        clattn.KVCache(1, 1, 8, 48, dtype="q4_0", context=ctx)
    with pytest.raises(ValueError, match="v_dim 64 is not a multiple of u8_g128"):
        clattn.KVCache(1, 1, 8, 32, 64, k_dtype="float32", v_dtype="u8_g128", context=ctx)
    with pytest.raises(ValueError, match="scaled=True"):
        clattn.KVCache(1, 1, 8, 32, dtype="q8_0", scaled=True, context=ctx)
    cache = clattn.KVCache(1, 2, 8, 32, dtype="int8", context=ctx)
    x = np.zeros((1, 2, 3, 32), np.float32)
    with pytest.raises(TypeError, match="one type"):
        cache.append(x, x.astype(np.float16))
    with pytest.raises(TypeError, match="float32, float16 or bfloat16"):
        cache.append(x.astype(np.int32), x.astype(np.int32))
    raw = np.zeros((1, 2, 3, 32), np.uint8)
    with pytest.raises(clattn.ArgumentError, match="k_scales.*give them"):
        cache.load_bytes(raw, raw)
    with pytest.raises(clattn.ArgumentError, match="rows ≤ 8"):
        cache.load_bytes(np.zeros((1, 2, 9, 32), np.uint8), raw, k_scales=np.ones((1, 2, 9)))
    with pytest.raises(clattn.ArgumentError, match="row bytes"):
        cache.load_bytes(np.zeros((1, 2, 3, 33), np.uint8), raw)
    with pytest.raises(clattn.ArgumentError, match="uint8"):
        cache.load_bytes(raw.astype(np.float32), raw)
    with pytest.raises(clattn.ArgumentError, match="lengths"):
        cache.load_bytes(raw, raw, [4], k_scales=np.ones((1, 2, 3)), v_scales=np.ones((1, 2, 3)))
    with pytest.raises(clattn.ArgumentError, match="no scales"):
        clattn.KVCache(1, 2, 8, 32, dtype="q8_0", context=ctx).load_bytes(
            np.zeros((1, 2, 3, 34), np.uint8), np.zeros((1, 2, 3, 34), np.uint8), k_scales=np.ones((1, 2, 3)))
    with pytest.raises(clattn.ArgumentError, match="scaled=True"):
        clattn.KVCache(1, 2, 8, 32, dtype="fp8_e4m3", context=ctx).load_bytes(raw, raw, k_scales=np.ones((1, 2, 3)))
    with pytest.raises(clattn.ArgumentError, match="whole q4_0 blocks of 18"):
        clattn.KVCache.from_bytes(np.zeros((1, 1, 2, 20), np.uint8), np.zeros((1, 1, 2, 18), np.uint8), dtype="q4_0",
                                  context=ctx)
    assert cache.lengths == (0,)  # (nothing refused changed the cache)
    # A refusal of the library itself: its status and its detail.
    paged = clattn.KVCache(1, 2, 8, 32, dtype="q4_0", block_size=12, context=ctx)
    with pytest.raises(clattn.Error, match="block_size") as info:
        paged.append(x, x)
    assert info.value.status_name == "CLATTN_ERROR_INVALID_VALUE" and paged.lengths == (0,)
