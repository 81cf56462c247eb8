"""Arrays that stay on the device: pyopencl arrays in and out of scaled_dot_product_attention, its backward and
KVCache, Contexts made from pyopencl's queue (and the reverse), the order of work between queues, and the
refusals (host and device arrays mixed, another OpenCL context, misaligned views, copies the call would need).
Device results are checked against the fp64 reference and against the same call on numpy arrays (the same
kernels: equal bits)."""
import numpy as np
import pytest

import clattn
import reference
from conftest import assert_close

cl = pytest.importorskip("pyopencl")  # (in CI a skip counts as a failure: tools/setup.sh installs pyopencl)
cla = pytest.importorskip("pyopencl.array")
import clattn.pyopencl as cp  # noqa: E402


@pytest.fixture(scope="module")
def queue(ctx):
    """A pyopencl queue on the suite's device (CLATTN_TEST_DEVICE's, through its name)."""
    name = ctx.device_name
    device = next(d for p in cl.get_platforms() for d in p.get_devices() if d.name == name)
    return cl.CommandQueue(cl.Context([device]))


def up(queue, a):
    return cla.to_device(queue, np.ascontiguousarray(a))


def test_context_from_queue_and_back(queue):
    c = cp.context(queue)
    assert c is cp.context(queue), "one Context a queue"
    assert c._cl_handles == (queue.context.int_ptr, queue.device.int_ptr, queue.int_ptr)
    assert cp.queue(c).int_ptr == queue.int_ptr and cp.cl_context(c).int_ptr == queue.context.int_ptr
    own = clattn.Context()  # (the reverse of a Context clattn made: its own queue as pyopencl's)
    q = cp.queue(own)
    assert q.int_ptr == own._cl_handles[2] and q.device.name == own.device_name
    with pytest.raises(TypeError):
        cp.context("not a queue")
    ooo = cl.CommandQueue(queue.context, properties=cl.command_queue_properties.OUT_OF_ORDER_EXEC_MODE_ENABLE) \
        if queue.device.queue_properties & cl.command_queue_properties.OUT_OF_ORDER_EXEC_MODE_ENABLE else None
    if ooo is not None:
        with pytest.raises(clattn.ArgumentError, match="out of order"):
            cp.context(ooo)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_sdpa_on_device_arrays(queue, rng, dtype):
    B, H, KVH, L, S, D, DV = 2, 6, 3, 37, 53, 24, 40
    q = rng.standard_normal((B, H, L, D)).astype(np.float32)
    k = rng.standard_normal((B, KVH, S, D)).astype(np.float32)
    v = rng.standard_normal((B, KVH, S, DV)).astype(np.float32)
    mask = rng.random((B, 1, L, S)) < 0.8
    host = [reference.f32_to_bf16(a) if dtype == "bfloat16" else a.astype(dtype) for a in (q, k, v)]
    bits = "bfloat16" if dtype == "bfloat16" else None
    want_out, want_lse = clattn.scaled_dot_product_attention(*host, attn_mask=mask, enable_gqa=True, return_lse=True,
                                                             dtype=bits, context=cp.context(queue))
    dq, dk, dv = (up(queue, a) for a in host)
    out, lse = clattn.scaled_dot_product_attention(dq, dk, dv, attn_mask=up(queue, mask), enable_gqa=True,
                                                   return_lse=True, dtype=bits)
    assert isinstance(out, cla.Array) and isinstance(lse, cla.Array) and out.queue is queue
    assert out.shape == (B, H, L, DV) and out.dtype == host[0].dtype and lse.dtype == np.float32
    np.testing.assert_array_equal(out.get(), want_out)  # (the same kernels as the host arrays' call)
    np.testing.assert_array_equal(lse.get(), want_lse)
    got = reference.bf16_to_f32(out.get()) if dtype == "bfloat16" else out.get()
    ref_in = [reference.bf16_to_f32(a) if dtype == "bfloat16" else a.astype(np.float32) for a in host]
    ref_out, ref_lse, _ = reference.sdpa(*ref_in, mask=mask)
    assert_close(got, ref_out, dtype)
    assert_close(lse.get(), ref_lse, "float32", "lse")


def test_sdpa_device_options_and_outputs(queue, rng):
    """Causal, an additive float mask (1, H, L, S), sinks, softcap, the weights, an odd head size."""
    B, H, L, S, D = 1, 3, 19, 29, 13
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in ((B, H, L, D), (B, H, S, D), (B, H, S, D)))
    bias = rng.standard_normal((1, H, L, S)).astype(np.float32)
    kw = dict(softcap=5.0, sinks=[0.5, -1.0, 0.25], weights="softmax")
    want = clattn.scaled_dot_product_attention(q, k, v, attn_mask=bias, context=cp.context(queue), **kw)
    got = clattn.scaled_dot_product_attention(up(queue, q), up(queue, k), up(queue, v), attn_mask=up(queue, bias),
                                              **kw)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.get(), w)
    causal = clattn.scaled_dot_product_attention(up(queue, q), up(queue, k), up(queue, v), is_causal=True)
    assert_close(causal.get(), reference.sdpa(q, k, v, causal=True)[0])


def test_sdpa_device_zero_sizes(queue, rng):
    q = up(queue, rng.standard_normal((1, 2, 3, 4)).astype(np.float32))
    none = cla.empty(queue, (1, 2, 0, 4), np.float32)
    out, lse = clattn.scaled_dot_product_attention(q, none, cla.empty(queue, (1, 2, 0, 5), np.float32),
                                                   return_lse=True)
    assert isinstance(out, cla.Array) and out.shape == (1, 2, 3, 5)
    assert np.all(out.get() == 0) and np.all(np.isneginf(lse.get()))


def test_views_into_larger_buffers(queue, rng):
    """An array starting inside its buffer is read through a sub-buffer: at the device's alignment it is
    taken, elsewhere refused with the reason."""
    align = queue.device.mem_base_addr_align // 8  # (bits → bytes)
    D = 16
    rows = max(1, align // (4 * D))  # (rows of D floats making one alignment unit)
    big = rng.standard_normal((3 * rows + 2 * 8, D)).astype(np.float32)
    d_big = up(queue, big)
    view = d_big[rows:rows + 8].reshape(1, 1, 8, D)  # (starts align bytes in)
    assert view.offset % align == 0
    want = clattn.scaled_dot_product_attention(big[rows:rows + 8].reshape(1, 1, 8, D), big[:8].reshape(1, 1, 8, D),
                                               big[:8].reshape(1, 1, 8, D), context=cp.context(queue))
    got = clattn.scaled_dot_product_attention(view, d_big[:8].reshape(1, 1, 8, D), d_big[:8].reshape(1, 1, 8, D))
    np.testing.assert_array_equal(got.get(), want)
    if align > 4:
        odd = d_big[1:9].reshape(1, 1, 8, D)  # (D·4 bytes in: not a multiple of the alignment when it is larger)
        if odd.offset % align:
            with pytest.raises(ValueError, match="alignment"):
                clattn.scaled_dot_product_attention(odd, odd, odd)


def test_refusals(queue, rng, ctx):
    q = rng.standard_normal((1, 2, 4, 8)).astype(np.float32)
    dq = up(queue, q)
    with pytest.raises(TypeError, match="not both"):
        clattn.scaled_dot_product_attention(dq, q, q)
    other = cl.CommandQueue(cl.Context([queue.device]))  # (another OpenCL context on the same device)
    with pytest.raises(ValueError, match="another OpenCL context"):
        clattn.scaled_dot_product_attention(dq, up(other, q), up(other, q))
    with pytest.raises(ValueError, match="another OpenCL context"):
        clattn.scaled_dot_product_attention(dq, dq, dq, context=ctx)
    square = up(queue, rng.standard_normal((1, 2, 8, 8)).astype(np.float32))
    with pytest.raises(ValueError, match="not contiguous"):
        clattn.scaled_dot_product_attention(square, square.transpose((0, 1, 3, 2)), square)
    with pytest.raises(clattn.ArgumentError, match="expanded copy"):  # (a broadcast of the query's batch)
        clattn.scaled_dot_product_attention(dq, up(queue, rng.standard_normal((3, 2, 4, 8)).astype(np.float32)), dq)
    with pytest.raises(TypeError, match="not taken here"):  # (the layer reads host arrays only)
        clattn.multi_head_attention(up(queue, q[0]), np.eye(8, dtype=np.float32), np.eye(8, dtype=np.float32),
                                    np.eye(8, dtype=np.float32), heads=1, context=cp.context(queue))
    with pytest.raises(TypeError, match="type clattn takes"):
        clattn.scaled_dot_product_attention(*(up(queue, q.astype(np.float64)),) * 3)


def test_order_across_queues(queue, rng):
    """Inputs written by pyopencl on another queue of the same context, the output read there: the call
    waits for that queue's work, and pyopencl's operations on the output wait for the call."""
    other = cl.CommandQueue(queue.context)
    a = rng.standard_normal((2, 4, 64, 32)).astype(np.float32)
    dq = up(other, a)
    dk = up(other, a)
    dq *= 2.0  # (queued on `other`, not waited for)
    out = clattn.scaled_dot_product_attention(dq, dk, dk, is_causal=True, context=cp.context(queue))
    assert out.queue is other  # (made beside the query)
    for arr in (dq, dk, out):  # (inputs and output carry the call's end, an event of the context's queue)
        assert any(e.command_queue.int_ptr == queue.int_ptr for e in arr.events)
    doubled = (out * 3.0).get()  # (pyopencl on `other`: waits for the call's event)
    assert_close(doubled, 3.0 * reference.sdpa(2.0 * a, a, a, causal=True)[0])
    # One queue: pyopencl's work and clattn's in queue order, nothing waited for in between.
    dq = up(queue, a)
    dq *= 0.5
    out = clattn.scaled_dot_product_attention(dq, up(queue, a), up(queue, a))
    out += 1.0
    assert_close(out.get(), reference.sdpa(0.5 * a, a, a)[0] + 1.0)


def test_backward_on_device_arrays(queue, rng):
    """_clattn.sdpa_backward (what autograd calls) on device arrays: the gradients equal the host arrays'."""
    B, H, L, S, D = 1, 2, 11, 17, 8
    ctx = cp.context(queue)
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in ((B, H, L, D), (B, H, S, D), (B, H, S, D)))
    out, lse = clattn.scaled_dot_product_attention(q, k, v, is_causal=True, return_lse=True, context=ctx)
    dout = rng.standard_normal(out.shape).astype(np.float32)
    shape = (B, H, H, L, S, D, D)
    host = [np.empty_like(a) for a in (q, k, v)]
    clattn._clattn.sdpa_backward(ctx, q, k, v, out, lse, dout, *host, None, shape, None, causal=1)
    dev = [cla.empty(queue, a.shape, np.float32) for a in (q, k, v)]
    clattn._clattn.sdpa_backward(ctx, *(up(queue, a) for a in (q, k, v, out, lse, dout)), *dev, None, shape, None,
                                 causal=1)
    for h, d in zip(host, dev):
        np.testing.assert_array_equal(d.get(), h)
    assert np.abs(host[0]).max() > 0


def test_sparse_attention_on_device_arrays(queue, rng):
    """clattn.sparse_attention on device arrays (int32 indices too): the output and lse equal the host arrays'; its
    backward (_clattn.sparse with dout) gives the host's gradients."""
    ctx = cp.context(queue)
    q = rng.standard_normal((1, 4, 3, 16)).astype(np.float32)
    k, v = rng.standard_normal((2, 1, 2, 50, 16)).astype(np.float32)
    idx = rng.integers(-1, 50, (1, 3, 8)).astype(np.int32)
    out, lse = clattn.sparse_attention(q, k, v, idx, return_lse=True, context=ctx)
    d_out, d_lse = clattn.sparse_attention(*(up(queue, a) for a in (q, k, v, idx)), return_lse=True, context=ctx)
    np.testing.assert_array_equal(d_out.get(), out)
    np.testing.assert_array_equal(d_lse.get(), lse)
    dout = rng.standard_normal(out.shape).astype(np.float32)
    shape = (1, 4, 2, 3, 50, 16, 16, 8)
    host = [np.empty_like(a) for a in (q, k, v)]
    clattn._clattn.sparse(ctx, q, k, v, idx, out, lse, dout, *host, None, shape)
    dev = [cla.empty(queue, a.shape, np.float32) for a in (q, k, v)]
    clattn._clattn.sparse(ctx, *(up(queue, a) for a in (q, k, v, idx, out, lse, dout)), *dev, None, shape)
    for h, d in zip(host, dev):
        np.testing.assert_array_equal(d.get(), h)
    with pytest.raises(TypeError, match="int32 pyopencl array"):
        clattn.sparse_attention(*(up(queue, a) for a in (q, k, v)), idx, context=ctx)


@pytest.mark.parametrize("block_size", [None, 16])
def test_kvcache_decode_on_device(queue, rng, block_size):
    """A decode loop on device arrays: append rows, attend one query a step into a reused output; the same
    results as the host arrays' cache and the reference."""
    B, KVH, H, D, steps, prefill = 2, 2, 4, 16, 5, 23
    ctx = cp.context(queue)
    dev = clattn.KVCache(B, KVH, 40, D, block_size=block_size, context=ctx)
    host = clattn.KVCache(B, KVH, 40, D, block_size=block_size, context=ctx)
    k = rng.standard_normal((B, KVH, prefill + steps, D)).astype(np.float32)
    v = rng.standard_normal((B, KVH, prefill + steps, D)).astype(np.float32)
    q = rng.standard_normal((steps, B, H, 1, D)).astype(np.float32)
    dev.append(up(queue, k[:, :, :prefill]), up(queue, v[:, :, :prefill]))
    host.append(k[:, :, :prefill], v[:, :, :prefill])
    out = cla.empty(queue, (B, H, 1, D), np.float32)
    for t in range(steps):
        row = slice(prefill + t, prefill + t + 1)
        dev.append(up(queue, k[:, :, row]), up(queue, v[:, :, row]))
        host.append(np.ascontiguousarray(k[:, :, row]), np.ascontiguousarray(v[:, :, row]))
        assert dev.attend(up(queue, q[t]), out=out) is out
        want = host.attend(q[t])
        np.testing.assert_array_equal(out.get(), want)
        assert_close(out.get(), reference.sdpa(q[t], k[:, :, :row.stop], v[:, :, :row.stop])[0])
    out, lse = dev.attend(up(queue, q[0]), return_lse=True, is_causal=False)
    want, want_lse = host.attend(q[0], return_lse=True, is_causal=False)
    np.testing.assert_array_equal(out.get(), want)
    np.testing.assert_array_equal(lse.get(), want_lse)
    with pytest.raises(clattn.ArgumentError, match="out"):
        dev.attend(up(queue, q[0]), out=cla.empty(queue, (B, H, 2, D), np.float32))


def test_kvcache_device_arrays(queue, rng):
    """KVCache.device_arrays: the cache's own buffers, no copy — what was appended is there, and what is
    written through them is what attend reads."""
    B, KVH, D, n = 1, 2, 8, 6
    cache = clattn.KVCache(B, KVH, 16, D, context=cp.context(queue))
    k = rng.standard_normal((B, KVH, n, D)).astype(np.float32)
    v = rng.standard_normal((B, KVH, n, D)).astype(np.float32)
    cache.append(k, v)
    arrays = cache.device_arrays()
    assert arrays.k.shape == (B, KVH, 16, D) and arrays.k.dtype == np.float32 and arrays.block_table is None
    np.testing.assert_array_equal(arrays.k.get()[:, :, :n], k)
    np.testing.assert_array_equal(arrays.v.get()[:, :, :n], v)
    v2 = -v
    arrays.v.set(np.concatenate([v2, np.zeros((B, KVH, 16 - n, D), np.float32)], axis=2))
    q = rng.standard_normal((B, KVH, 1, D)).astype(np.float32)
    assert_close(cache.attend(q), reference.sdpa(q, k, v2)[0])
    # A quantised, paged cache: its pools as bytes (those k_bytes() puts back in order), its scales and table.
    paged = clattn.KVCache(B, KVH, 64, 32, dtype="int8", block_size=16, context=cp.context(queue))
    paged.append(rng.standard_normal((B, KVH, 20, 32)).astype(np.float32),
                 rng.standard_normal((B, KVH, 20, 32)).astype(np.float32))
    arrays = paged.device_arrays(queue)
    table = arrays.block_table.get()
    assert table.shape[0] == B and list(table[0, :2]) == [0, 1] and arrays.k.dtype == np.uint8
    pool = arrays.k.get()  # (blocks, kv_heads, block_size, 32 bytes)
    ordered = np.concatenate([pool[table[0, 0]], pool[table[0, 1]]], axis=1)[:, :20]
    np.testing.assert_array_equal(ordered, paged.k_bytes()[0, :, :20])
    np.testing.assert_array_equal(np.concatenate([arrays.k_scales.get()[table[0, j]] for j in range(2)], axis=1)[:, :20],
                                  paged.k_scales()[0, :, :20])
