"""The package's plumbing: devices and contexts, DLPack in and out, the GIL released during a call, no
leak over 10,000 calls, and bad input refused naming the argument (nothing written)."""
import subprocess
import sys
import threading
import time
import tracemalloc

import numpy as np
import pytest

import clattn
import reference as ref
from conftest import assert_close


def test_devices_and_context(ctx):
    found = clattn.devices()
    assert found and all({"spec", "name", "vendor", "platform", "type"} <= set(d) for d in found)
    assert ctx.device_name in {d["name"] for d in found}
    other = clattn.Context(found[0]["spec"])
    assert other.device_name == found[0]["name"] and "clattn.Context" in repr(other)
    other.finish()
    with pytest.raises(clattn.Error) as info:
        clattn.Context("no-such-device-anywhere")
    assert info.value.status_name == "CLATTN_ERROR_DEVICE_NOT_FOUND" and info.value.status == -3010
    assert clattn.default_context() is clattn.default_context()
    clattn.set_default_context(other)  # (usable as the default: calls without context= then run there)
    assert clattn.default_context() is other
    clattn.set_default_context(None)
    assert clattn.default_context() is not other
    with pytest.raises(TypeError, match="context"):
        clattn.set_default_context("cpu")
    assert clattn.__version__.count(".") == 2


def test_python_m_clattn_devices():
    run = subprocess.run([sys.executable, "-m", "clattn", "devices"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "device(s)" in run.stdout and clattn.devices()[0]["name"] in run.stdout


class OnlyDLPack:
    """An array that offers nothing but DLPack (as a third library's tensor would)."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, stream=None):
        return self.a.__dlpack__()

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


def test_dlpack_round_trip(ctx, rng):
    q = rng.uniform(-1, 1, size=(1, 2, 5, 8)).astype(np.float32)
    out = clattn.scaled_dot_product_attention(q, q, q, context=ctx)
    # In through DLPack alone (the package hands such objects to the C side unchanged) ...
    via = clattn._clattn
    o2 = np.empty_like(out)
    via.sdpa(ctx, OnlyDLPack(q), OnlyDLPack(q), OnlyDLPack(q), OnlyDLPack(o2), None, None, None, (1, 2, 2, 5, 5, 8, 8),
             None, False)
    assert np.array_equal(o2, out)
    # ... and out: the result is an ordinary array that numpy takes back through DLPack without a copy.
    back = np.from_dlpack(out)
    assert back.ctypes.data == out.ctypes.data and np.array_equal(back, out)
    # The buffer protocol: a memoryview of float32 goes in too.
    mv = memoryview(q.copy())
    assert np.array_equal(clattn.scaled_dot_product_attention(mv, mv, mv, context=ctx), out)


def test_gil_is_released(ctx, rng):
    """A long call on one thread leaves the interpreter to the others meanwhile."""
    q = rng.uniform(-1, 1, size=(1, 8, 1024, 64)).astype(np.float32)
    done = threading.Event()
    took = []

    def work():
        t0 = time.perf_counter()
        clattn.scaled_dot_product_attention(q, q, q, algorithm="fused", context=ctx)
        took.append(time.perf_counter() - t0)
        done.set()

    clattn.scaled_dot_product_attention(q[:, :, :64], q[:, :, :64], q[:, :, :64], context=ctx)  # (compiled)
    worker = threading.Thread(target=work)
    ticks = 0
    worker.start()
    while not done.is_set():
        ticks += 1
        time.sleep(0.0005)
    worker.join()
    # Held, the GIL would let this loop run only between the call's bytecodes: a handful of ticks at most.
    assert took[0] > 0.01 and ticks >= 5, f"the main thread ran {ticks} times during a {took[0]:.3f} s call"


def test_two_contexts_overlap_on_threads(ctx, rng):
    q = rng.uniform(-1, 1, size=(1, 4, 33, 16)).astype(np.float32)
    want = clattn.scaled_dot_product_attention(q, q, q, is_causal=True, context=ctx)
    contexts = [clattn.Context(ctx.device_name), clattn.Context(ctx.device_name)]
    results = [None, None]

    def run(i):
        for _ in range(20):
            results[i] = clattn.scaled_dot_product_attention(q, q, q, is_causal=True, context=contexts[i])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(np.array_equal(r, want) for r in results)


def test_no_leak_over_10000_calls(ctx, rng):
    q = rng.uniform(-1, 1, size=(1, 1, 4, 8)).astype(np.float32)
    mask = np.tril(np.ones((4, 4), dtype=bool))
    before = clattn._clattn.live_objects()

    def burst(n):
        for _ in range(n):
            clattn.scaled_dot_product_attention(q, q, q, attn_mask=mask, return_lse=True, sinks=[0.5], context=ctx)
            try:  # (a failing call too; not pytest.raises, which keeps what it caught)
                clattn.scaled_dot_product_attention(q, q, q[:, :, :3], context=ctx)
            except ValueError:
                pass
            else:
                raise AssertionError("a bad call passed")

    burst(200)  # (warm: caches, interned objects)
    tracemalloc.start()
    first = tracemalloc.take_snapshot()
    burst(10000)
    grown = sum(s.size_diff for s in tracemalloc.take_snapshot().compare_to(first, "filename"))
    tracemalloc.stop()
    assert grown < 16 * 1024, f"Python memory grew by {grown} bytes over 10,000 calls"
    cache = clattn.KVCache(1, 1, 8, 8, context=ctx)
    assert clattn._clattn.live_objects()["kv_caches"] == before["kv_caches"] + 1
    del cache
    assert clattn._clattn.live_objects() == before


BAD = [  # (what to change, the exception, text it names)
    (dict(dropout_p=0.1), ValueError, "dropout_p"),
    (dict(is_causal=True, attn_mask=np.ones((4, 6), bool)), ValueError, "is_causal"),
    (dict(key=np.zeros((1, 2, 6, 7), np.float32)), ValueError, "do not agree"),
    (dict(query=np.zeros((1, 4, 4, 8), np.float32), key=np.zeros((1, 2, 6, 8), np.float32),
          value=np.zeros((1, 2, 6, 8), np.float32)), ValueError, "enable_gqa"),  # (one K/V head broadcasts)
    (dict(attn_mask=np.ones((5, 6), bool)), ValueError, "attn_mask"),
    (dict(algorithm="fastest"), ValueError, "algorithm"),
    (dict(weights="probabilities"), ValueError, "weights"),
    (dict(sinks=[1.0]), ValueError, "sinks"),
    (dict(offsets=["x"]), TypeError, "offsets"),
    (dict(window="wide"), TypeError, "window"),
    (dict(query=np.zeros((1, 2, 4, 8), np.int32)), TypeError, "query"),
    (dict(query=[["a"]]), (TypeError, ValueError), None),
    (dict(context="cpu"), TypeError, "context"),
    (dict(aux={"x": np.zeros(3, np.float32)}), ValueError, "mods"),
    (dict(dtype="float8"), ValueError, "dtype"),
]


@pytest.mark.parametrize("change,exc,text", BAD, ids=[b[2] or "strings" for b in BAD])
def test_bad_input(ctx, change, exc, text):
    args = dict(query=np.ones((1, 2, 4, 8), np.float32), key=np.ones((1, 2, 6, 8), np.float32),
                value=np.ones((1, 2, 6, 8), np.float32), context=ctx)
    args.update(change)
    with pytest.raises(exc, match=text):
        clattn.scaled_dot_product_attention(**args)


def test_library_refusals_raise_clattn_error(ctx):
    q = np.ones((1, 1, 4, 8), np.float32)
    with pytest.raises(clattn.Error) as info:
        clattn.scaled_dot_product_attention(q, q, q, scale=float("inf"), context=ctx)
    assert info.value.status_name == "CLATTN_ERROR_INVALID_VALUE" and "scale" in str(info.value)
    with pytest.raises(clattn.Error) as info:
        clattn.scaled_dot_product_attention(q, q, q, key_lengths=[9], context=ctx)
    assert "key_lengths" in str(info.value)
    # The C side checks sizes itself too: a wrong output size is refused before the library runs.
    out = np.full((1, 1, 4, 7), 7.0, np.float32)
    with pytest.raises(ValueError, match="out holds 28 elements"):
        clattn._clattn.sdpa(ctx, q, q, q, out, None, None, None, (1, 1, 1, 4, 4, 8, 8), None, False)
    assert np.all(out == 7.0)


def test_errors_keep_outputs_of_kv_cache(ctx):
    cache = clattn.KVCache(1, 1, 4, 8, context=ctx)
    with pytest.raises(ValueError, match="fewer than"):
        cache.attend(np.ones((1, 1, 2, 8), np.float32))
    with pytest.raises(TypeError, match="float32"):
        cache.append(np.ones((1, 1, 2, 8), np.float16), np.ones((1, 1, 2, 8), np.float16))
    assert cache.lengths == (0,)


def test_merge_refusals_release_the_callers_arrays(ctx, rng):
    """Issue 36 item 11: a part the C side refuses (float16, not float32) must not keep the caller's array."""
    good = rng.uniform(-1, 1, size=(1, 2, 3, 4)).astype(np.float32)
    lse = np.zeros((1, 2, 3), np.float32)
    bad_out = good.astype(np.float16)
    bad_lse = lse.astype(np.float16)
    for outputs, lses, held in (([good, bad_out], [lse, lse], bad_out), ([good, good], [lse, bad_lse], bad_lse)):
        before = sys.getrefcount(held)
        for _ in range(100):
            try:
                clattn.merge(outputs, lses, context=ctx)
            except TypeError:
                pass
            else:
                raise AssertionError("a float16 part was taken")
        assert sys.getrefcount(held) == before, f"refcount {before} -> {sys.getrefcount(held)} over 100 refusals"


def test_seeds_are_the_same_in_every_process():
    """Issue 36 item 20: the rng fixture's seed must not depend on the process (PYTHONHASHSEED)."""
    import os

    here = os.path.dirname(os.path.abspath(__file__))
    seeds = set()
    for salt in ("1", "2", "3"):
        run = subprocess.run([sys.executable, "-c", "import conftest; print(conftest.seed_for('test_shapes[1x1x1]'))"],
                             capture_output=True, text=True, timeout=120, cwd=here,
                             env=dict(os.environ, PYTHONHASHSEED=salt))
        assert run.returncode == 0, run.stderr
        seeds.add(run.stdout.strip())
    assert len(seeds) == 1, f"seeds differ between processes: {seeds}"


def test_big_endian_arrays_are_converted(ctx, rng):
    """Issue 36 item 14: numpy's non-native byte order (">f4" here) cannot travel through DLPack: such arrays
    are converted (the values are what count), and an object whose __dlpack__ fails is refused with its
    own reason, not as "not an array"."""
    q = rng.uniform(-1, 1, size=(1, 2, 5, 8)).astype(np.float32)
    want = clattn.scaled_dot_product_attention(q, q, q, context=ctx)
    big = q.astype(">f4")
    got = clattn.scaled_dot_product_attention(big, big, big, context=ctx)
    assert got.dtype == np.float32 and np.array_equal(got, want)

    class Broken:
        def __dlpack__(self, stream=None):
            raise BufferError("the producer's own reason")

    with pytest.raises(TypeError, match="the producer's own reason"):
        clattn._clattn.sdpa(ctx, Broken(), q, q, np.empty_like(q), None, None, None, (1, 2, 2, 5, 5, 8, 8), None,
                            False)


RUNTIME_ERRORS = {  # Issue 36 item 8: what PyTorch's scaled_dot_product_attention raises RuntimeError for
    "mask and is_causal": dict(attn_mask=np.ones((4, 6), bool), is_causal=True),
    "1-D query": dict(query=np.ones(8, np.float32), key=np.ones(8, np.float32), value=np.ones(8, np.float32)),
    "float32 query, float16 K/V": dict(key=np.ones((1, 2, 6, 8), np.float16), value=np.ones((1, 2, 6, 8), np.float16)),
    "float16 query, float32 K/V": dict(query=np.ones((1, 2, 4, 8), np.float16)),
    "float16 V only": dict(value=np.ones((1, 2, 6, 8), np.float16)),
    "scale inf (the library's refusal)": dict(scale=float("inf")),
}


@pytest.mark.parametrize("name", sorted(RUNTIME_ERRORS))
def test_pytorch_runtime_errors(ctx, name):
    args = dict(query=np.ones((1, 2, 4, 8), np.float32), key=np.ones((1, 2, 6, 8), np.float32),
                value=np.ones((1, 2, 6, 8), np.float32), context=ctx)
    args.update(RUNTIME_ERRORS[name])
    with pytest.raises(RuntimeError) as info:
        clattn.scaled_dot_product_attention(**args)
    # (and still what clattn raised before: a ValueError naming the argument, or clattn.Error)
    assert isinstance(info.value, (ValueError, clattn.Error))
    if "dtype" in name or "K/V" in name or "V only" in name:
        assert "dtype" in str(info.value)
