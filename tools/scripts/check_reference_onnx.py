#!/usr/bin/env python3
"""Cross-check of the float64 reference (tools/reference/reference.c) against ONNX's reference
implementation of the Attention operator, onnx.reference.ops.op_attention._compute_attention, and
against a small numpy implementation written here from clattn.h's definitions.

Usage:  .venv-test/bin/python tools/scripts/check_reference_onnx.py [--per-kind N] [--seed S] [--cc CC]
(`meson test -C build reference-onnx` runs it so, with --per-kind 12.)

Needs numpy and onnx (tools/setup.sh pip-installs them into .venv-test at the versions it names) and a C
compiler: reference.c is compiled with a small shim (written to a temporary folder) into a shared
object that ctypes loads. No clattn library, no OpenCL device: only clattn.h's types are needed.

What is compared, case by case (random inputs, float32 values, every sum in float64 on both sides):
  - ref_sdpa's output, weights and lse and ref_score's scores against ONNX, wherever the case can be
    said in ONNX's terms: kv_heads (ONNX repeats each K/V head, [h0, h0, h1, h1, ...]), softcap,
    is_causal (top-left; bottom-right through past_key/past_value holding the first S − L keys),
    nonpad_kv_seqlen (= clattn's key_lengths together with query_offsets = len − L), the sliding
    window (left_window_size / right_window_size, ONNX opset 25), a float attn_mask of (L,S) or
    (B,H,L,S), key lengths that nonpad_kv_seqlen cannot carry folded into attn_mask as −inf
    columns, and ALiBi folded into attn_mask as the additive bias slope[h]·(j − p) it is.
    ONNX's weights are its qk_matmul_output_mode 3 output, its scores mode 2; ONNX has no lse, so
    its lse is log Σ exp of its own mode-2 scores. ONNX has no attention sinks: cases with sinks
    are compared with the numpy implementation only.
  - every case against the numpy implementation (positions, visibility, window as a −inf bias,
    ALiBi as an additive bias, the sink as an extra softmax column whose value row is 0).
Rows whose ONNX output is NaN (older onnx releases give NaN for a fully masked row) are left out of
the ONNX comparison and counted; the installed onnx may give zeros instead. Fully masked rows of the
reference must be exactly zero (output and weights) with lse −inf, or lse = sink with sinks.
Exits 1 when any difference exceeds --tol (default 1e-9).
"""
import argparse
import ctypes
import math
import os
import pathlib
import subprocess
import sys
import tempfile

import numpy as np

try:
    from onnx.reference.ops.op_attention import _compute_attention
except ImportError as e:  # pragma: no cover
    sys.exit(f"check_reference_onnx: needs onnx (pip install onnx): {e}")

ROOT = pathlib.Path(__file__).resolve().parents[2]

SHIM = r"""
#include "reference.h"
#include <math.h>

/* dims: B, H, kv_heads, L, S, Dqk, Dv. ip: causal, additive layout, has window, left, right.
 * fp: scale (NaN: default), softcap. Any pointer may be NULL where clattn allows it. */
void shim_sdpa(const size_t *dims, const long long *ip, const double *fp, const size_t *key_lengths,
               const long long *query_offsets, const float *sinks, const float *alibi, const float *q,
               const float *k, const float *v, const float *mask, double *out, double *weights,
               double *lse, double *scores)
{
    clattn_window win = {ip[3], ip[4]};
    clattn_masks m = CLATTN_MASKS_INIT;
    m.causal = (clattn_causal)ip[0];
    m.additive = (clattn_mask_layout)ip[1];
    m.window = ip[2] ? &win : NULL;
    m.key_lengths = key_lengths;
    m.query_offsets = query_offsets;
    clattn_sdpa_desc d = CLATTN_SDPA_DESC_INIT;
    d.batch = dims[0];
    d.heads = dims[1];
    d.kv_heads = dims[2];
    d.q_len = dims[3];
    d.kv_len = dims[4];
    d.qk_dim = dims[5];
    d.v_dim = dims[6];
    d.scale = (float)fp[0];
    d.softcap = (float)fp[1];
    d.sinks = sinks;
    d.alibi_slopes = alibi;
    d.masks = &m;
    ref_sdpa(&d, q, k, v, mask, out, weights, lse);
    ref_score(&d, q, k, mask, scores);
}
"""

NONE, TL, BR = 0, 1, 2
M0, MLS, MBH = 0, 1, 2


def build_shim(cc):
    tmp = tempfile.mkdtemp(prefix="clattn-refcheck-")
    src = pathlib.Path(tmp) / "shim.c"
    so = pathlib.Path(tmp) / "libref.so"
    src.write_text(SHIM)
    cmd = [cc, "-std=c11", "-O2", "-shared", "-fPIC", "-DCL_TARGET_OPENCL_VERSION=120",
           "-I", str(ROOT / "include"), "-I", str(ROOT / "tools" / "reference"),
           "-I", str(ROOT / "src" / "base"),  # (call_options.h: the table the reference's layer forwards by)
           str(src), str(ROOT / "tools" / "reference" / "reference.c"), "-lm", "-o", str(so)]
    subprocess.run(cmd, check=True)
    lib = ctypes.CDLL(str(so))
    lib.shim_sdpa.restype = None
    lib.shim_sdpa.argtypes = [ctypes.c_void_p] * 15
    return lib, tmp


def ptr(a):
    return None if a is None else a.ctypes.data_as(ctypes.c_void_p)


# ---------------------------------------------------------------------------------------------- #
# Cases                                                                                           #
# ---------------------------------------------------------------------------------------------- #

class Case:
    def __init__(self, kind, B, H, KVH, L, S, D, Dv, scale=None, softcap=0.0, causal=NONE,
                 key_lengths=None, offsets=None, window=None, mask=M0, mask_inf=0.0,
                 mask_big=None, sinks=False, alibi=False):
        self.__dict__.update(locals())
        del self.__dict__["self"]

    def describe(self):
        parts = [f"B{self.B} H{self.H}/{self.KVH} L{self.L} S{self.S} D{self.D}/{self.Dv}"]
        if self.scale is not None:
            parts.append(f"scale {self.scale:g}")
        if self.softcap:
            parts.append(f"softcap {self.softcap:g}")
        if self.causal:
            parts.append(["", "causal TL", "causal BR"][self.causal])
        if self.key_lengths is not None:
            parts.append(f"kl {list(self.key_lengths)}")
        if self.offsets is not None:
            parts.append(f"offsets {list(self.offsets)}")
        if self.window is not None:
            parts.append(f"window {self.window}")
        if self.mask:
            parts.append(["", "mask (L,S)", "mask (B,H,L,S)"][self.mask])
        if self.mask_big is not None:
            parts.append(f"mask rows {self.mask_big:g}")
        if self.sinks:
            parts.append("sinks")
        if self.alibi:
            parts.append("alibi")
        return ", ".join(parts)


def make_cases(per_kind, rng):
    """per_kind random cases of every kind, plus fixed edge cases."""
    cases = []

    def r(lo, hi):
        return int(rng.integers(lo, hi + 1))

    def f32(lo, hi):  # desc.scale and desc.softcap are floats: draw float32 values
        return float(np.float32(rng.uniform(lo, hi)))

    gqa = [(8, 2), (6, 6), (12, 4), (8, 1), (3, 1)]

    def shape(kind, **kw):
        H, KVH = gqa[r(0, len(gqa) - 1)]
        B, L, S = r(1, 3), r(1, 17), r(1, 29)
        D, Dv = r(1, 21), r(1, 13)
        return Case(kind, B, H, KVH, L, S, D, Dv, **kw)

    def lens(B, S):
        return np.array([r(0, S) for _ in range(B)], dtype=np.uint64)

    for _ in range(per_kind):
        cases.append(shape("gqa"))
        cases.append(shape("softcap", softcap=f32(0.5, 5.0)))
        c = shape("causal+nonpad (kl, offsets len-L)", causal=[TL, BR][r(0, 1)])
        c.key_lengths = lens(c.B, c.S)
        c.offsets = c.key_lengths.astype(np.int64) - c.L
        cases.append(c)
        cases.append(shape("causal top-left", causal=TL))
        c = shape("causal bottom-right (past_key)", causal=BR)
        c.S = max(c.S, c.L)
        cases.append(c)
        cases.append(shape("mask (L,S)", mask=MLS, mask_inf=0.2))
        cases.append(shape("mask (B,H,L,S)", mask=MBH, mask_inf=0.2))
        c = shape("key lengths (mask or nonpad)", key_lengths=None)
        c.key_lengths = lens(c.B, c.S)
        cases.append(c)
        c = shape("window", window=(r(-1, 6), r(-1, 6)), causal=[NONE, TL, BR][r(0, 2)])
        cases.append(c)
        c = shape("alibi", alibi=True, causal=[NONE, TL, BR][r(0, 2)])
        cases.append(c)
        c = shape("sinks", sinks=True, causal=[NONE, TL, BR][r(0, 2)])
        cases.append(c)
        # everything at once
        c = shape("combined", softcap=f32(0.5, 5.0), causal=[NONE, TL, BR][r(0, 2)],
                  mask=[MLS, MBH][r(0, 1)], mask_inf=0.15, window=(r(-1, 6), r(-1, 6)),
                  alibi=bool(r(0, 1)), sinks=bool(r(0, 1)), scale=f32(0.1, 2))
        c.key_lengths = lens(c.B, c.S)
        if r(0, 1):
            c.offsets = np.array([r(-c.L - 3, c.S + 3) for _ in range(c.B)], dtype=np.int64)
        cases.append(c)
        c = shape("combined, ONNX-expressible", softcap=f32(0.5, 5.0), causal=TL,
                  mask=[MLS, MBH][r(0, 1)], mask_inf=0.15, window=(r(-1, 6), r(-1, 6)),
                  alibi=bool(r(0, 1)))
        c.key_lengths = lens(c.B, c.S)
        c.offsets = c.key_lengths.astype(np.int64) - c.L
        cases.append(c)

    # fixed edge cases: fully masked rows and positions beyond either end
    cases += [
        Case("fully masked: negative offsets, causal", 2, 8, 2, 13, 29, 21, 7, causal=TL,
             offsets=np.array([-13, -5], dtype=np.int64)),
        Case("fully masked: negative offsets, causal, sinks", 2, 8, 2, 13, 29, 21, 7, causal=BR,
             offsets=np.array([-13, -5], dtype=np.int64), sinks=True),
        Case("fully masked: key length 0", 3, 12, 4, 13, 29, 21, 7,
             key_lengths=np.array([0, 29, 7], dtype=np.uint64)),
        Case("fully masked: key length 0, causal+nonpad", 3, 12, 4, 13, 29, 21, 7, causal=TL,
             key_lengths=np.array([0, 29, 7], dtype=np.uint64),
             offsets=np.array([-13, 16, -6], dtype=np.int64)),
        Case("fully masked: window excludes every key", 2, 3, 1, 13, 29, 21, 7, window=(0, 0),
             offsets=np.array([40, -20], dtype=np.int64)),
        Case("fully masked: window, sinks", 2, 3, 1, 13, 29, 21, 7, window=(3, -1),
             offsets=np.array([40, -20], dtype=np.int64), sinks=True),
        Case("offsets beyond S, causal", 2, 6, 6, 13, 29, 21, 7, causal=TL,
             offsets=np.array([29, 100], dtype=np.int64)),
        Case("window (0,0)", 2, 8, 2, 13, 29, 21, 7, window=(0, 0)),
        Case("window (3,-1)", 2, 8, 2, 13, 29, 21, 7, window=(3, -1), causal=BR),
        Case("window (-1,2)", 2, 12, 4, 13, 29, 21, 7, window=(-1, 2)),
        Case("window (5,5)", 2, 3, 1, 13, 29, 21, 7, window=(5, 5), causal=TL),
        Case("softcap, mask -inf rows", 2, 8, 2, 13, 29, 21, 7, softcap=2.0, mask=MLS,
             mask_inf=0.2, mask_big=-math.inf),
        Case("softcap, mask -1e30 rows", 2, 8, 2, 13, 29, 21, 7, softcap=2.0, mask=MBH,
             mask_inf=0.2, mask_big=-1e30),
        Case("alibi, offsets, causal", 2, 8, 1, 13, 29, 21, 7, alibi=True, causal=TL,
             offsets=np.array([16, 3], dtype=np.int64), key_lengths=np.array([29, 16], dtype=np.uint64)),
    ]
    return cases


def make_data(c, rng):
    f32 = np.float32
    q = rng.uniform(-2, 2, (c.B, c.H, c.L, c.D)).astype(f32)
    k = rng.uniform(-2, 2, (c.B, c.KVH, c.S, c.D)).astype(f32)
    v = rng.uniform(-1, 1, (c.B, c.KVH, c.S, c.Dv)).astype(f32)
    mask = None
    if c.mask:
        shp = (c.L, c.S) if c.mask == MLS else (c.B, c.H, c.L, c.S)
        mask = rng.uniform(-1, 1, shp).astype(f32)
        mask[rng.uniform(0, 1, shp) < c.mask_inf] = -np.inf
        if c.mask_big is not None:
            m2 = mask.reshape(-1, c.L, c.S)
            m2[:, 0, :] = c.mask_big                 # a whole row
            if c.L > 2:
                m2[:, 2, :-1] = c.mask_big           # all but the last key
    sinks = rng.uniform(-2, 2, c.H).astype(f32) if c.sinks else None
    alibi = (2.0 ** -rng.uniform(0, 4, c.H)).astype(f32) if c.alibi else None
    return q, k, v, mask, sinks, alibi


# ---------------------------------------------------------------------------------------------- #
# The three implementations                                                                        #
# ---------------------------------------------------------------------------------------------- #

def run_ref(lib, c, q, k, v, mask, sinks, alibi):
    BH = c.B * c.H
    out = np.zeros((c.B, c.H, c.L, c.Dv))
    w = np.zeros((c.B, c.H, c.L, c.S))
    lse = np.zeros((c.B, c.H, c.L))
    sc = np.zeros((c.B, c.H, c.L, c.S))
    dims = np.array([c.B, c.H, c.KVH, c.L, c.S, c.D, c.Dv], dtype=np.uint64)
    win = c.window or (0, 0)
    ip = np.array([c.causal, c.mask, c.window is not None, win[0], win[1]], dtype=np.int64)
    fp = np.array([math.nan if c.scale is None else c.scale, c.softcap], dtype=np.float64)
    kl = None if c.key_lengths is None else np.ascontiguousarray(c.key_lengths, dtype=np.uint64)
    off = None if c.offsets is None else np.ascontiguousarray(c.offsets, dtype=np.int64)
    lib.shim_sdpa(ptr(dims), ptr(ip), ptr(fp), ptr(kl), ptr(off), ptr(sinks), ptr(alibi), ptr(q),
                  ptr(k), ptr(v), ptr(mask), ptr(out), ptr(w), ptr(lse), ptr(sc))
    assert BH * c.L > 0
    return out, w, lse, sc


def positions(c):
    """p[b, i]: query i of batch b's absolute position."""
    i = np.arange(c.L)[None, :]
    if c.offsets is not None:
        return np.asarray(c.offsets, dtype=np.int64)[:, None] + i
    if c.causal == BR:
        return np.repeat(i + c.S - c.L, c.B, axis=0)
    return np.repeat(i, c.B, axis=0)


def visible(c):
    """(B, 1, L, S) booleans: key j visible to query i by the causal mask, window and key lengths."""
    p = positions(c)[:, None, :, None]
    j = np.arange(c.S)[None, None, None, :]
    vis = np.ones((c.B, 1, c.L, c.S), dtype=bool)
    if c.causal != NONE:
        vis &= j <= p
    if c.window is not None:
        if c.window[0] >= 0:
            vis &= j >= p - c.window[0]
        if c.window[1] >= 0:
            vis &= j <= p + c.window[1]
    if c.key_lengths is not None:
        vis &= j < np.asarray(c.key_lengths, dtype=np.int64)[:, None, None, None]
    return vis


def alibi_bias(c, alibi):
    p = positions(c)[:, None, :, None].astype(np.float64)
    j = np.arange(c.S)[None, None, None, :].astype(np.float64)
    return alibi.astype(np.float64)[None, :, None, None] * (j - p)


def scale_of(c):
    return 1.0 / math.sqrt(c.D) if c.scale is None else float(c.scale)


def run_numpy(c, q, k, v, mask, sinks, alibi):
    """clattn.h's definitions, vectorised: the sink is one more softmax column whose value is 0."""
    rep = c.H // c.KVH
    K = np.repeat(k.astype(np.float64), rep, axis=1)
    V = np.repeat(v.astype(np.float64), rep, axis=1)
    s = scale_of(c) * (q.astype(np.float64) @ np.swapaxes(K, -1, -2))
    if c.softcap > 0:
        s = c.softcap * np.tanh(s / c.softcap)
    bias = np.zeros((c.B, c.H, c.L, c.S))
    if alibi is not None:
        bias = bias + alibi_bias(c, alibi)
    if mask is not None:
        bias = bias + mask.astype(np.float64)
    bias = bias + np.where(visible(c), 0.0, -np.inf)  # causal, window, key lengths: a −inf bias
    s = s + bias
    cols = s
    if sinks is not None:
        sink_col = np.broadcast_to(sinks.astype(np.float64)[None, :, None, None], (c.B, c.H, c.L, 1))
        cols = np.concatenate([s, sink_col], axis=-1)
        V = np.concatenate([V, np.zeros((c.B, c.H, 1, c.Dv))], axis=2)
    m = cols.max(axis=-1, keepdims=True)
    m = np.where(np.isneginf(m), 0.0, m)
    e = np.exp(cols - m)
    tot = e.sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore"):
        lse = (m + np.log(tot))[..., 0]
    wfull = e / np.where(tot == 0, 1.0, tot)
    out = wfull @ V
    return out, wfull[..., : c.S], lse, s


def onnx_form(c, mask, alibi):
    """ONNX arguments saying the same attention, or None (sinks). Returns (kwargs, split) where split
    is the number of leading keys passed as past_key/past_value (bottom-right causal)."""
    if c.sinks:
        return None
    kw = {"scale": scale_of(c), "softcap": c.softcap if c.softcap > 0 else None}
    extra = np.zeros((c.B, c.H, c.L, c.S))
    folded = False
    split = 0
    S_eff = np.full(c.B, c.S, dtype=np.int64) if c.key_lengths is None else \
        np.asarray(c.key_lengths, dtype=np.int64)
    if c.offsets is not None:
        # ONNX: p = nonpad − L + i and keys j ≥ nonpad masked: needs key lengths = clamp(o + L, 0, S)
        nonpad = np.asarray(c.offsets, dtype=np.int64) + c.L
        if not np.array_equal(S_eff, np.clip(nonpad, 0, c.S)):
            return None
        kw["nonpad_kv_seqlen"] = nonpad
        kw["is_causal"] = c.causal != NONE
    else:
        if c.causal == BR and c.S != c.L:
            if c.S < c.L:
                return None
            split = c.S - c.L  # past_key: causal and window offset S − L
        kw["is_causal"] = c.causal != NONE
        if c.key_lengths is not None:
            if c.window is None and c.causal == NONE:
                kw["nonpad_kv_seqlen"] = S_eff.copy()  # offset only moves the window: none here
            else:
                j = np.arange(c.S)[None, None, None, :]
                extra = extra + np.where(j < S_eff[:, None, None, None], 0.0, -np.inf)
                folded = True
    if c.window is not None:
        kw["left_window_size"], kw["right_window_size"] = c.window
    if alibi is not None:
        extra = extra + alibi_bias(c, alibi)
        folded = True
    if folded:
        am = extra + (0.0 if mask is None else mask.astype(np.float64))
    else:
        am = None if mask is None else mask.astype(np.float64)
    kw["attn_mask"] = am
    return kw, split


def run_onnx(c, q, k, v, form):
    kw, split = form
    Q, K, V = (x.astype(np.float64) for x in (q, k, v))
    if split:
        kw = dict(kw, past_key=K[:, :, :split], past_value=V[:, :, :split])
        K, V = K[:, :, split:], V[:, :, split:]
    with np.errstate(all="ignore"):
        out, _, _, scores = _compute_attention(Q, K, V, qk_matmul_output_mode=2, **kw)
        _, _, _, w = _compute_attention(Q, K, V, qk_matmul_output_mode=3, **kw)
        m = scores.max(axis=-1, keepdims=True)
        ms = np.where(np.isneginf(m) | np.isnan(m), 0.0, m)
        lse = (ms + np.log(np.exp(scores - ms).sum(axis=-1, keepdims=True)))[..., 0]
    return out, w, lse, scores


# ---------------------------------------------------------------------------------------------- #
# Comparison                                                                                      #
# ---------------------------------------------------------------------------------------------- #

def diff(a, b, rows_ok):
    """Largest |a − b| over rows_ok (B,H,L); infinities must match exactly (then count 0)."""
    a = a[rows_ok]
    b = b[rows_ok]
    if a.size == 0:
        return 0.0
    same_inf = (np.isinf(a) & (a == b))
    bad_inf = (np.isinf(a) | np.isinf(b)) & ~same_inf
    if np.any(bad_inf) or np.any(np.isnan(a)) or np.any(np.isnan(b)):
        return math.inf
    with np.errstate(invalid="ignore"):
        d = np.abs(np.where(same_inf, 0.0, a - b))
    return float(d.max())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--per-kind", type=int, default=12, help="random cases of each kind")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--cc", default=os.environ.get("CC", "cc"))
    ap.add_argument("--tol", type=float, default=1e-9)
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()

    lib, tmp = build_shim(a.cc)
    rng = np.random.default_rng(a.seed)
    cases = make_cases(a.per_kind, rng)
    import onnx
    print(f"onnx {onnx.__version__}, numpy {np.__version__}; {len(cases)} cases, seed {a.seed}")

    kinds = {}  # kind -> dict of maxima
    failures = []
    masked_rows = nan_rows = onnx_cases = 0
    for n, c in enumerate(cases):
        q, k, v, mask, sinks, alibi = make_data(c, rng)
        ref = run_ref(lib, c, q, k, v, mask, sinks, alibi)
        npy = run_numpy(c, q, k, v, mask, sinks, alibi)
        st = kinds.setdefault(c.kind, {"n": 0, "onnx_n": 0, "onnx": [0.0] * 4, "numpy": [0.0] * 4,
                                       "masked": 0})
        st["n"] += 1
        all_rows = np.ones((c.B, c.H, c.L), dtype=bool)

        # fully masked rows of the reference: exactly zero, lse −inf (or the sink)
        full = np.all(np.isneginf(ref[3]), axis=-1)
        nfull = int(full.sum())
        st["masked"] += nfull
        masked_rows += nfull
        if nfull:
            expect_lse = np.full((c.B, c.H, c.L), -np.inf) if sinks is None else \
                np.broadcast_to(sinks.astype(np.float64)[None, :, None], (c.B, c.H, c.L))
            if not (np.all(ref[0][full] == 0.0) and np.all(ref[1][full] == 0.0) and
                    np.array_equal(ref[2][full], expect_lse[full])):
                failures.append(f"case {n} ({c.kind}: {c.describe()}): a fully masked row is not "
                                f"zero with lse {'sink' if c.sinks else '-inf'}")

        errs = [diff(x, y, all_rows) for x, y in zip(ref, npy)]
        st["numpy"] = [max(p, e) for p, e in zip(st["numpy"], errs)]
        if max(errs) > a.tol:
            failures.append(f"case {n} ({c.kind}: {c.describe()}): vs numpy out/w/lse/scores {errs}")

        form = onnx_form(c, mask, alibi)
        if form is not None:
            onnx_cases += 1
            st["onnx_n"] += 1
            on = run_onnx(c, q, k, v, form)
            ok = ~np.any(np.isnan(on[0]), axis=-1)
            nan_rows += int((~ok).sum())
            errs = [diff(x, y, ok) for x, y in zip(ref, on)]
            st["onnx"] = [max(p, e) for p, e in zip(st["onnx"], errs)]
            if max(errs) > a.tol:
                failures.append(f"case {n} ({c.kind}: {c.describe()}): vs ONNX out/w/lse/scores {errs}")
        if a.verbose:
            print(f"  {n:3d} {c.kind}: {c.describe()}  {'ONNX' if form else 'numpy only'}")

    print(f"\n{'kind':44s} {'cases':>5s} {'onnx':>4s} {'masked':>6s}   max |ref - ONNX| out, weights, lse, scores"
          f"   |   max |ref - numpy| out, weights, lse, scores")
    for kind, st in kinds.items():
        o = "  ".join(f"{e:8.1e}" for e in st["onnx"]) if st["onnx_n"] else " " * 18 + "(no ONNX form)"
        m = "  ".join(f"{e:8.1e}" for e in st["numpy"])
        print(f"{kind:44s} {st['n']:5d} {st['onnx_n']:4d} {st['masked']:6d}   {o}   |   {m}")
    print(f"\n{onnx_cases} of {len(cases)} cases compared with ONNX; {masked_rows} fully masked rows "
          f"(zero output and weights, lse -inf or the sink, checked exactly); "
          f"{nan_rows} rows left out of the ONNX comparison because ONNX gave NaN")
    for f in failures:
        print("FAIL", f)
    try:
        for p in pathlib.Path(tmp).iterdir():
            p.unlink()
        os.rmdir(tmp)
    except OSError:
        pass
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
