"""The package's other calls against the fp64 reference: the tutorial's worked example, layers
(multi_head_attention), merges of partial results, KV caches (dense and paged) and programmable attention
(mods, their auxiliary tensors and defines)."""
import os

import numpy as np
import pytest

import clattn
import reference as ref
from conftest import assert_close

# The first tutorial (../shared/seeds): "我 爱 人工 智能" as four 8-dimensional vectors, W_Q, W_K, W_V drawn
# as np.random.seed(42); randn(8, 4) * 0.1 three times; its printed weights, to four decimals.
TUTORIAL_X = np.array([[0.8, 0.1, 0.3, 0.2, 0.5, 0.1, 0.0, 0.4], [0.1, 0.9, 0.2, 0.1, 0.3, 0.6, 0.2, 0.1],
                       [0.3, 0.2, 0.8, 0.4, 0.1, 0.2, 0.5, 0.3], [0.1, 0.1, 0.3, 0.9, 0.2, 0.1, 0.4, 0.6]])
TUTORIAL_WEIGHTS = np.array([[0.2480, 0.2509, 0.2499, 0.2512], [0.2513, 0.2499, 0.2498, 0.2490],
                             [0.2484, 0.2506, 0.2495, 0.2515], [0.2479, 0.2516, 0.2485, 0.2520]])


def tutorial_weights():
    np.random.seed(42)
    return [(np.random.randn(8, 4) * 0.1).astype(np.float32) for _ in range(3)]


def test_tutorial_example(ctx):
    w_q, w_k, w_v = tutorial_weights()
    x = TUTORIAL_X.astype(np.float32)
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    out, weights = clattn.scaled_dot_product_attention(q[None], k[None], v[None], weights="softmax", context=ctx)
    assert np.all(np.abs(weights[0] - TUTORIAL_WEIGHTS) <= 0.5e-4 + 1e-7)  # (the table: four decimals)
    layer = clattn.multi_head_attention(x, w_q, w_k, w_v, heads=1, context=ctx)
    assert_close(layer, ref.mha(x[None], w_q, w_k, w_v, heads=1)[0])
    assert_close(out[0], layer)


LAYERS = {
    "self, W_O and biases": dict(B=2, L=13, dm=24, H=4, KVH=4, dk=6, dout=20, cross=False, bias=True),
    "GQA 4/2, causal": dict(B=1, L=21, dm=16, H=4, KVH=2, dk=8, dout=0, cross=False, bias=False, is_causal=True),
    "cross-attention S 17, bool mask": dict(B=2, L=9, dm=16, H=2, KVH=2, dk=8, dout=16, cross=True, bias=True,
                                            mask=True),
}


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_multi_head_attention(ctx, rng, name):
    c = dict(LAYERS[name])
    B, L, dm, H, KVH, dk, dout = (c.pop(x) for x in ("B", "L", "dm", "H", "KVH", "dk", "dout"))
    cross, bias, mask = c.pop("cross"), c.pop("bias"), c.pop("mask", False)
    S, dkv = (17, 12) if cross else (L, dm)
    f = lambda *shape: rng.uniform(-0.5, 0.5, size=shape).astype(np.float32)  # noqa: E731
    x, kv = f(B, L, dm), f(B, S, dkv) if cross else None
    w = dict(w_q=f(dm, H * dk), w_k=f(dkv, KVH * dk), w_v=f(dkv, KVH * dk), w_o=f(H * dk, dout) if dout else None)
    if bias:
        w.update(b_q=f(H * dk), b_k=f(KVH * dk), b_v=f(KVH * dk), b_o=f(dout) if dout else None)
    if mask:
        c["attn_mask"] = rng.uniform(size=(L, S)) > 0.25
    out = clattn.multi_head_attention(x, heads=H, kv_heads=KVH, kv=kv, context=ctx, **w, **c)
    rc = dict(c)
    rc["causal"] = rc.pop("is_causal", False)
    rc["mask"] = rc.pop("attn_mask", None)
    assert_close(out, ref.mha(x, heads=H, kv_heads=KVH, kv=kv, **w, **rc))


def test_merge(ctx, rng):
    q = rng.uniform(-1, 1, size=(2, 3, 7, 16)).astype(np.float32)
    k = rng.uniform(-1, 1, size=(2, 3, 40, 16)).astype(np.float32)
    v = rng.uniform(-1, 1, size=(2, 3, 40, 8)).astype(np.float32)
    sinks = [0.5, -0.5, 1.0]
    parts = [clattn.scaled_dot_product_attention(q, k[:, :, a:b], v[:, :, a:b], return_lse=True, context=ctx)
             for a, b in ((0, 11), (11, 29), (29, 40))]
    out, lse = clattn.merge([p[0] for p in parts], [p[1] for p in parts], sinks=sinks, context=ctx)
    ro, rl, _ = ref.sdpa(q, k, v, sinks=sinks)
    assert_close(out, ro)
    assert_close(lse, rl, what="lse")


@pytest.mark.parametrize("block_size", [None, 16])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_kv_cache(ctx, rng, block_size, dtype):
    B, H, KVH, D, cap = 2, 4, 2, 32, 70
    np_dtype = np.float32 if dtype == "float32" else np.float16
    cache = clattn.KVCache(B, KVH, cap, D, dtype=dtype, block_size=block_size, context=ctx)
    ks, vs = [], []
    for step, n in enumerate((23, 1, 1, 9)):  # a prefill, two decode steps, a chunk
        k = rng.uniform(-1, 1, size=(B, KVH, n, D)).astype(np_dtype)
        v = rng.uniform(-1, 1, size=(B, KVH, n, D)).astype(np_dtype)
        cache.append(k, v)
        ks.append(k), vs.append(v)
        q = rng.uniform(-1, 1, size=(B, H, n, D)).astype(np_dtype)
        out, lse = cache.attend(q, return_lse=True)
        kk, vv = np.concatenate(ks, axis=2), np.concatenate(vs, axis=2)
        total = kk.shape[2]
        ro, rl, _ = ref.sdpa(q.astype(np.float32), kk.astype(np.float32), vv.astype(np.float32), causal=True,
                             offsets=[total - n] * B)
        assert cache.lengths == (total,) * B
        assert out.dtype == np_dtype
        assert_close(out, ro, dtype, what=f"step {step} out")
        assert_close(lse, rl, "float32" if dtype == "float32" else "float16", what=f"step {step} lse")
    if block_size:
        assert cache.blocks_used == B * ((total + block_size - 1) // block_size)
    with pytest.raises(ValueError, match="capacity"):
        cache.append(np.zeros((B, KVH, cap, D), np_dtype), np.zeros((B, KVH, cap, D), np_dtype))
    cache.reset()
    assert cache.lengths == (0,) * B


MODS_DOCUMENT = "bool mask_mod(int b, int h, long q, long k, __global const int *doc) { return doc[q] == doc[k] && k <= q; }\n"


def test_mods_document_masking(ctx, rng):
    L = 45
    doc = np.repeat(np.arange(6, dtype=np.int32), [3, 11, 1, 8, 15, 7])
    q = rng.uniform(-1, 1, size=(1, 2, L, 16)).astype(np.float32)
    out = clattn.scaled_dot_product_attention(q, q, q, mods=MODS_DOCUMENT, aux={"doc": (doc, "position")},
                                              context=ctx)
    mask = (doc[:, None] == doc[None, :]) & (np.arange(L)[None, :] <= np.arange(L)[:, None])
    ro, _, _ = ref.sdpa(q, q, q, mask=mask)
    assert_close(out, ro)
    # New document ids in the same tensor shape: the compiled mods are reused, the ids written again.
    doc2 = np.repeat(np.arange(3, dtype=np.int32), [20, 20, 5])
    out2 = clattn.scaled_dot_product_attention(q, q, q, mods=MODS_DOCUMENT, aux={"doc": (doc2, "position")},
                                               context=ctx)
    mask2 = (doc2[:, None] == doc2[None, :]) & (np.arange(L)[None, :] <= np.arange(L)[:, None])
    assert_close(out2, ref.sdpa(q, q, q, mask=mask2)[0])
    # A tensor too short for the call's positions: the library refuses it, naming it.
    with pytest.raises(clattn.Error, match="doc") as info:
        clattn.scaled_dot_product_attention(q, q, q, mods=MODS_DOCUMENT, aux={"doc": (doc[:20], "position")},
                                            context=ctx)
    assert info.value.status_name == "CLATTN_ERROR_BUFFER_TOO_SMALL"


def test_mods_example_files_and_defines(ctx, rng):
    folder = os.environ["CLATTN_MODS_DIR"]
    q = rng.uniform(-1, 1, size=(2, 2, 19, 8)).astype(np.float32)
    window = clattn.scaled_dot_product_attention(q, q, q, mods=os.path.join(folder, "sliding_window.cl"),
                                                 defines={"WINDOW": 4}, context=ctx)
    assert_close(window, clattn.scaled_dot_product_attention(q, q, q, is_causal=True, window=(4, None), context=ctx))
    slopes = np.array([-0.25, -0.5], dtype=np.float32)
    alibi = clattn.scaled_dot_product_attention(q, q, q, mods=os.path.join(folder, "alibi.cl"),
                                                aux={"slopes": (slopes, "head")}, context=ctx)
    assert_close(alibi, ref.sdpa(q, q, q, alibi=slopes)[0])


def test_mods_compile_error(ctx):
    with pytest.raises(clattn.Error) as info:
        clattn.scaled_dot_product_attention(np.zeros((1, 1, 2, 4), np.float32), np.zeros((1, 1, 2, 4), np.float32),
                                            np.zeros((1, 1, 2, 4), np.float32),
                                            mods="float score_mod(float s, int b, int h, long q, long k) {\n  return s +;\n}\n",
                                            context=ctx)
    assert info.value.status_name == "CLATTN_ERROR_BUILD_FAILED" and "mods:2" in str(info.value)


def test_backward_extension_against_numpy(ctx, rng):
    """The extension's sdpa_backward (what PyTorch's autograd calls; check_torch.py runs that path) against
    the gradients in numpy fp64: dV = Pᵀ·dO, dS = P∘(dO·Vᵀ − rowsum(dO∘O))·scale, dQ = dS·K, dK = dSᵀ·Q."""
    B, H, L, S, D = 2, 3, 7, 11, 8
    q, k, v, dout = (rng.uniform(-1, 1, size=(B, H, n, D)).astype(np.float32) for n in (L, S, S, L))
    out, lse = clattn.scaled_dot_product_attention(q, k, v, is_causal=True, return_lse=True, context=ctx)
    dq, dk, dv = np.empty_like(q), np.empty_like(k), np.empty_like(v)
    clattn._clattn.sdpa_backward(ctx, q, k, v, out, lse, dout, dq, dk, dv, None, (B, H, H, L, S, D, D), None,
                                 causal=1)
    o64, _, p = ref.sdpa(q, k, v, causal=True)
    d64 = dout.astype(np.float64)
    scale = 1 / np.sqrt(D)
    ds = p * (d64 @ v.astype(np.float64).transpose(0, 1, 3, 2) - (d64 * o64).sum(-1, keepdims=True)) * scale
    assert_close(dv, p.transpose(0, 1, 3, 2) @ d64, what="dv")
    assert_close(dq, ds @ k.astype(np.float64), what="dq")
    assert_close(dk, ds.transpose(0, 1, 3, 2) @ q.astype(np.float64), what="dk")


def test_mods_path_is_decided_by_the_file(ctx, rng, tmp_path):
    """Issue 36 item 14: a path whose folder names hold "mask_mod" or "score_mod" is still a path, and a
    pathlib.Path is taken; a path that does not exist is refused naming it (not compiled as source)."""
    folder = tmp_path / "mask_mod_and_score_mod"
    folder.mkdir()
    path = folder / "causal.cl"
    path.write_text("bool mask_mod(int b, int h, long q, long k) { return k <= q; }\n")
    q = rng.uniform(-1, 1, size=(1, 2, 9, 8)).astype(np.float32)
    want = ref.sdpa(q, q, q, causal=True)[0]
    assert_close(clattn.scaled_dot_product_attention(q, q, q, mods=str(path), context=ctx), want)
    assert_close(clattn.scaled_dot_product_attention(q, q, q, mods=path, context=ctx), want)
    with pytest.raises(FileNotFoundError, match="missing_mask_mod.cl"):
        clattn.scaled_dot_product_attention(q, q, q, mods=folder / "missing_mask_mod.cl", context=ctx)
    with pytest.raises(FileNotFoundError, match="missing_mask_mod.cl"):
        clattn.scaled_dot_product_attention(q, q, q, mods=str(folder / "missing_mask_mod.cl"), context=ctx)


@pytest.mark.parametrize("value", ["2\\", "2 \\ "])
def test_mods_define_that_would_reach_the_next_line_is_refused(ctx, value):
    """Issue 36 item 14: a define's value ending in a backslash (before trailing blanks too: compilers take
    backslash-blanks-newline as a continuation) continues its #define onto the next line of the generated
    source: refused, naming it. (A newline in a value the library refuses itself.)"""
    q = np.ones((1, 1, 3, 4), np.float32)
    source = "bool mask_mod(int b, int h, long q, long k) { return k <= q + WINDOW; }\n"
    with pytest.raises(ValueError, match="WINDOW"):
        clattn.scaled_dot_product_attention(q, q, q, mods=source, defines={"WINDOW": value}, context=ctx)


def test_mods_cache_lets_contexts_go_and_stays_bounded(ctx, rng, monkeypatch):
    """Issue 36 item 12: the compiled mods must not keep a deleted Context alive, and a context's cache
    must not grow with every new aux shape."""
    import gc
    import weakref

    q = rng.uniform(-1, 1, size=(1, 1, 6, 8)).astype(np.float32)
    before = clattn._clattn.live_objects()
    for _ in range(3):
        other = clattn.Context(ctx.device_name)
        clattn.scaled_dot_product_attention(q, q, q, mods=MODS_DOCUMENT, aux={"doc": (np.zeros(6, np.int32), "position")},
                                            context=other)
        gone = weakref.ref(other)
        del other
        gc.collect()
        assert gone() is None, "a Context used with mods= outlived every reference to it"
    assert clattn._clattn.live_objects() == before
    monkeypatch.setattr(clattn._programmable, "_MODS_PER_CONTEXT", 3)
    scale_mod = "float score_mod(float s, int b, int h, long q, long k, __global const float *w) { return s * w[0]; }\n"
    for n in range(1, 7):  # a new aux shape each time: a new compiled mods each time
        w = np.full(n, 0.5, np.float32)
        out = clattn.scaled_dot_product_attention(q, q, q, mods=scale_mod, aux={"w": w}, context=ctx)
        assert_close(out, ref.sdpa(q, q, q, scale=0.5 / np.sqrt(8))[0])
        assert len(ctx._mods_cache) <= 3
    assert clattn._clattn.live_objects()["mods"] - before["mods"] <= 3


def test_mods_aux_of_two_threads_on_one_context(ctx, rng):
    """Issue 36 item 2: two threads calling one Context with the same mods and different aux tensors: each
    call must see its own aux (the write of the aux and the call are one critical section)."""
    import threading

    L = 24
    q = rng.uniform(-1, 1, size=(1, 2, L, 8)).astype(np.float32)
    docs = [np.repeat(np.arange(4, dtype=np.int32), 6), np.repeat(np.arange(2, dtype=np.int32), 12)]
    wants = []
    for doc in docs:
        mask = (doc[:, None] == doc[None, :]) & (np.arange(L)[None, :] <= np.arange(L)[:, None])
        wants.append(ref.sdpa(q, q, q, mask=mask)[0])
    clattn.scaled_dot_product_attention(q, q, q, mods=MODS_DOCUMENT, aux={"doc": (docs[0], "position")}, context=ctx)
    wrong = [0, 0]
    errors = []

    def run(i):
        try:
            for _ in range(100):
                out = clattn.scaled_dot_product_attention(q, q, q, mods=MODS_DOCUMENT,
                                                          aux={"doc": (docs[i], "position")}, context=ctx)
                if not np.allclose(out, wants[i], atol=2e-5, rtol=2e-4):
                    wrong[i] += 1
        except Exception as e:  # (reported below: an exception in a thread would pass silently)
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert wrong == [0, 0], f"calls that saw the other thread's aux: {wrong} of 100 each"


@pytest.mark.parametrize("block_size", [None, 16])
def test_kv_cache_appends_from_threads(ctx, block_size):
    """Issue 36 item 3: appends from several threads to one cache are atomic: every row lands once, where
    the lengths say, and attend reads them all (K = 0: every row weighs the same, so out is V's mean)."""
    import threading

    B, KVH, D, threads_n, appends = 2, 2, 8, 4, 24
    cap = threads_n * appends + 5
    cache = clattn.KVCache(B, KVH, cap, D, block_size=block_size, context=ctx)
    errors = []

    def run(i):
        try:
            k = np.zeros((B, KVH, 1, D), np.float32)
            v = np.full((B, KVH, 1, D), float(i + 1), np.float32)
            for _ in range(appends):
                cache.append(k, v)
        except Exception as e:  # (reported below)
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(threads_n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    total = threads_n * appends
    assert cache.lengths == (total,) * B
    if block_size:
        assert cache.blocks_used == B * ((total + block_size - 1) // block_size)
    q = np.ones((B, KVH, 1, D), np.float32)
    out = cache.attend(q, is_causal=False)
    want = sum(range(1, threads_n + 1)) * appends / total
    assert np.allclose(out, want, rtol=1e-5), f"attend gave {out.min()}..{out.max()}, V's mean is {want}"
    # A full cache refuses the next append whole, from any thread: nothing written, the lengths kept.
    with pytest.raises(ValueError, match="capacity"):
        cache.append(np.zeros((B, KVH, 6, D), np.float32), np.zeros((B, KVH, 6, D), np.float32))
    assert cache.lengths == (total,) * B


def test_autograd_16_bit_gradients_from_a_float32_output(ctx, rng):
    """Issue 36 item 6: float16 inputs through the autograd wiring: each gradient within half a float16 ulp
    of the fp64 gradient of the same (rounded) inputs, plus a few float32 ulps of the largest — what
    rounding the float32 gradient allows. With the forward's output kept in float16 for the backward's
    D = dO·O, that rounding reached every gradient and this failed (dq: 0.11, 305 times its bound)."""
    B, H, L, S, E = 2, 3, 17, 23, 16
    q, k, v, dout = (rng.uniform(-9, 9, size=(B, H, n, E)).astype(np.float16) for n in (L, S, S, L))
    opts = clattn._options(None, 0, None, None, None, None, None, None, 0, 0, "auto", 0, H, B)
    call = {"context": ctx, "mask": None, "shape": (B, H, H, L, S, E, E), "options": opts, "mods": None,
            "out_shape": (B, H, L, E), "lse_shape": (B, H, L)}
    arrays = clattn._NumpyArrays()
    out, lse, saved = clattn._attention_forward(call, q, k, v, arrays)
    assert out.dtype == np.float16
    grads = clattn._attention_backward(call, saved, dout, arrays)
    o64, _, p = ref.sdpa(q, k, v)
    d64 = dout.astype(np.float64)
    ds = p * (d64 @ v.astype(np.float64).transpose(0, 1, 3, 2) - (d64 * o64).sum(-1, keepdims=True)) / np.sqrt(E)
    want = (ds @ k.astype(np.float64), ds.transpose(0, 1, 3, 2) @ q.astype(np.float64),
            p.transpose(0, 1, 3, 2) @ d64)
    for name, got, w in zip(("dq", "dk", "dv"), grads[:3], want):
        assert got.dtype == np.float16
        half_ulp = np.spacing(np.abs(w).astype(np.float16)).astype(np.float64) / 2
        bound = half_ulp + 16 * 2.0**-23 * (np.abs(w).max() + np.abs(w))
        err = np.abs(got.astype(np.float64) - w)
        assert (err <= bound).all(), f"{name}: worst error {err.max():.4g}, {(err / bound).max():.3g} of the bound"


@pytest.mark.parametrize("causal", [False, True])
def test_autograd_wiring_without_torch(ctx, rng, causal):
    """Issue 36 item 18: the autograd Function's forward and backward, whole, run on numpy arrays (the same
    code PyTorch's autograd calls, with _NumpyArrays in place of _TorchArrays) against the fp64 gradients.
    dq, dk and dv have three different shapes (GQA, Dv != E), so a swap of any two fails."""
    B, H, KVH, L, S, E, Ev = 2, 4, 2, 5, 7, 8, 6
    q = rng.uniform(-1, 1, size=(B, H, L, E)).astype(np.float32)
    k = rng.uniform(-1, 1, size=(B, KVH, S, E)).astype(np.float32)
    v = rng.uniform(-1, 1, size=(B, KVH, S, Ev)).astype(np.float32)
    dout = rng.uniform(-1, 1, size=(B, H, L, Ev)).astype(np.float32)
    opts = clattn._options(None, 1 if causal else 0, None, None, None, None, None, None, 0, 0, "auto", 0, H, B)
    call = {"context": ctx, "mask": None, "shape": (B, H, KVH, L, S, E, Ev), "options": opts, "mods": None,
            "out_shape": (B, H, L, Ev), "lse_shape": (B, H, L)}
    arrays = clattn._NumpyArrays()
    out, lse, saved = clattn._attention_forward(call, q, k, v, arrays)
    grads = clattn._attention_backward(call, saved, dout, arrays)
    assert len(grads) == 5 and grads[3] is None and grads[4] is None
    o64, l64, p = ref.sdpa(q, k, v, causal=causal)
    assert_close(out, o64)
    assert_close(lse, l64, what="lse")
    g = KVH and H // KVH
    d64 = dout.astype(np.float64)
    vr = np.repeat(v.astype(np.float64), g, axis=1)
    kr = np.repeat(k.astype(np.float64), g, axis=1)
    ds = p * (d64 @ vr.transpose(0, 1, 3, 2) - (d64 * o64).sum(-1, keepdims=True)) / np.sqrt(E)
    per_head = lambda x: x.reshape(B, KVH, g, S, -1).sum(axis=2)  # noqa: E731  (GQA: summed over the group)
    want = (ds @ kr, per_head(ds.transpose(0, 1, 3, 2) @ q.astype(np.float64)),
            per_head(p.transpose(0, 1, 3, 2) @ d64))
    for name, got, w in zip(("dq", "dk", "dv"), grads[:3], want):
        assert got.shape == w.shape, f"{name}: shape {got.shape}, expected {w.shape}"
        assert_close(got, w, what=name)


@pytest.mark.parametrize("causal", [False, True])
def test_autograd_sinks_gradient_without_torch(ctx, rng, causal):
    """Learned sinks (a logit per head in each row's denominator, gpt-oss's): the autograd wiring asks for
    their gradient (call["sinks_grad"]) and gets dsink_h = −Σ_rows P_sink·D over the batch and the rows,
    P_sink = exp(sink_h − lse) and D = dO·O, against fp64; the other gradients as without sinks."""
    B, H, KVH, L, S, E = 2, 4, 2, 6, 9, 8
    q = rng.uniform(-1, 1, size=(B, H, L, E)).astype(np.float32)
    k = rng.uniform(-1, 1, size=(B, KVH, S, E)).astype(np.float32)
    v = rng.uniform(-1, 1, size=(B, KVH, S, E)).astype(np.float32)
    dout = rng.uniform(-1, 1, size=(B, H, L, E)).astype(np.float32)
    sinks = [0.5, -1.0, 1.5, 0.0]
    opts = clattn._options(None, 1 if causal else 0, None, None, sinks, None, None, None, 0, 0, "auto", 0, H, B)
    call = {"context": ctx, "mask": None, "shape": (B, H, KVH, L, S, E, E), "options": opts, "mods": None,
            "out_shape": (B, H, L, E), "lse_shape": (B, H, L), "sinks_grad": True}
    arrays = clattn._NumpyArrays()
    out, lse, saved = clattn._attention_forward(call, q, k, v, arrays)
    grads = clattn._attention_backward(call, saved, dout, arrays)
    o64, l64, _ = ref.sdpa(q, k, v, causal=causal, sinks=sinks)
    assert_close(out, o64)
    d = (dout.astype(np.float64) * o64).sum(-1)
    p_sink = np.exp(np.asarray(sinks)[None, :, None] - l64)
    want = -(p_sink * d).sum(axis=(0, 2))
    assert grads[3].shape == (H,) and grads[3].dtype == np.float32
    assert_close(grads[3], want, what="dsinks")
    assert np.abs(want).min() > 1e-3  # (every head's gradient is far from 0: a missing one fails)
