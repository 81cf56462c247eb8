#!/usr/bin/env python3
"""Peers for `clattn bench`: the same cases with numpy (and PyTorch when installed) on the same CPU,
timed in the same run, and the ratio peer-time / clattn-time per case.

Usage:  python3 tools/scripts/bench_peer.py [--clattn build/tools/clattn] [--skip-long] [--quick] [--device SPEC]

numpy runs the tutorials' formula, softmax stabilised by the row maximum:
    s = q @ k.T * scale (+ causal mask) ; p = exp(s - max) / sum ; o = p @ v
It must be linked to an optimised, multi-threaded BLAS: the script prints which BLAS and how many threads
it uses and refuses to report ratios against the reference BLAS (Debian's numpy falls back to it unless
libopenblas0-pthread is installed). Some machines set OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE for old
OpenBLAS builds; they slow a current one, so benchmark with
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python3 tools/scripts/bench_peer.py
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np


def blas_info():
    """(name, threads, detail) of the BLAS numpy calls, or exits when it cannot be identified."""
    try:
        from threadpoolctl import threadpool_info
        for pool in threadpool_info():
            if pool.get("user_api") == "blas":
                detail = "%s %s (%s), core type %s" % (pool.get("internal_api"), pool.get("version"),
                                                       os.path.basename(pool.get("filepath", "?")),
                                                       pool.get("architecture", "?"))
                return pool.get("internal_api", "?"), pool.get("num_threads", 0), detail
    except ImportError:
        pass
    try:
        cfg = np.show_config(mode="dicts")
        blas = cfg["Build Dependencies"]["blas"]
        threads = int(os.environ.get("OPENBLAS_NUM_THREADS", os.cpu_count() or 1))
        return blas.get("name", "?"), threads, "%s %s (from numpy's build config)" % (blas.get("name"), blas.get("version"))
    except Exception:  # noqa: BLE001 - old numpy without mode="dicts"
        return "unknown", 0, "could not identify numpy's BLAS (pip install threadpoolctl)"


def timed(fn, min_runs=3, budget=2.0, max_runs=7):
    fn()  # warm-up
    times = []
    while len(times) < min_runs or (sum(times) < budget and len(times) < max_runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
        if times[-1] > 20:
            break
    return statistics.median(times)


def sdpa_numpy(q, k, v, causal):
    scale = np.float32(1.0 / np.sqrt(q.shape[-1]))
    s = np.matmul(q, k.swapaxes(-1, -2))
    s *= scale
    if causal:
        L, S = s.shape[-2:]
        s[..., np.triu(np.ones((L, S), dtype=bool), 1)] = -np.inf
    s -= s.max(axis=-1, keepdims=True)
    np.exp(s, out=s)
    s /= s.sum(axis=-1, keepdims=True)
    return np.matmul(s, v)


def numpy_case(case, rng):
    B, H, L, S, D = (case[x] for x in ("B", "H", "L", "S", "D"))
    if case["kind"] == "sdpa":
        q = rng.standard_normal((B, H, L, D), dtype=np.float32)
        k = rng.standard_normal((B, H, S, D), dtype=np.float32)
        v = rng.standard_normal((B, H, S, D), dtype=np.float32)
        return lambda: sdpa_numpy(q, k, v, case["causal"])
    d = case["model_dim"]
    x = rng.standard_normal((B, L, d), dtype=np.float32)
    wq, wk, wv = (rng.standard_normal((d, H * D), dtype=np.float32) for _ in range(3))
    wo = rng.standard_normal((H * D, d), dtype=np.float32)

    def layer():
        heads = lambda t: t.reshape(B, L, H, D).transpose(0, 2, 1, 3)  # noqa: E731
        o = sdpa_numpy(heads(x @ wq), heads(x @ wk), heads(x @ wv), case["causal"])
        return o.transpose(0, 2, 1, 3).reshape(B, L, H * D) @ wo
    return layer


def torch_case(case):
    try:
        import torch
    except ImportError:
        return None
    B, H, L, S, D = (case[x] for x in ("B", "H", "L", "S", "D"))
    if case["kind"] != "sdpa":
        return None
    q, k, v = torch.randn(B, H, L, D), torch.randn(B, H, S, D), torch.randn(B, H, S, D)
    f = torch.nn.functional.scaled_dot_product_attention
    return lambda: f(q, k, v, is_causal=case["causal"])


def first_call_seconds(clattn, device):
    """Wall time of a fresh `clattn sdpa` process on the tutorial-sized 4-token case (caches warm)."""
    with tempfile.TemporaryDirectory() as tmp:
        rng = np.random.default_rng(0)
        for name in "qkv":
            np.save(os.path.join(tmp, name + ".npy"), rng.standard_normal((4, 4), dtype=np.float32))
        cmd = [clattn, "sdpa"] + sum((["--" + n, os.path.join(tmp, n + ".npy")] for n in "qkv"), [])
        cmd += ["--out", os.path.join(tmp, "o.npy")] + (["--device", device] if device else [])
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)  # warms the program caches
        best = float("inf")
        for _ in range(5):
            t = time.perf_counter()
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            best = min(best, time.perf_counter() - t)
        return best


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clattn", default=os.path.join(os.path.dirname(__file__), "..", "build", "tools", "clattn"))
    ap.add_argument("--skip-long", action="store_true", help="leave out the L=65536 case")
    ap.add_argument("--quick", action="store_true", help="the small smoke-test cases")
    ap.add_argument("--device", help="device spec for clattn")
    args = ap.parse_args()

    name, threads, detail = blas_info()
    print("numpy %s, BLAS: %s, %s thread(s); CPU cores: %d" % (np.__version__, detail, threads, os.cpu_count()))
    if name in ("unknown", "blas", "reference") or "netlib" in detail.lower() or "libblas" in detail.lower():
        sys.exit("refusing to compare: numpy is not linked to an optimised BLAS (install libopenblas0-pthread "
                 "or numpy's wheel, and threadpoolctl to identify it)")

    cmd = [args.clattn, "bench", "--json"] + (["--skip-long"] if args.skip_long else []) + \
          (["--quick"] if args.quick else []) + (["--device", args.device] if args.device else [])
    print("running:", " ".join(cmd), flush=True)
    bench = json.loads(subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout)

    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((2048, 2048), dtype=np.float32) for _ in range(2))
    mm_gflops = 2 * 2048 ** 3 / timed(lambda: a @ b) / 1e9

    cases = {}
    for row in bench["cases"]:
        cases.setdefault(row["name"], {"case": row})[row["path"]] = row
    print("\nclattn on %s vs. numpy on the same CPU, %s (fp32; ratio = peer time / clattn fused time)"
          % (bench["device"], bench["date"]))
    header = "%-46s %11s %11s %11s %8s %11s %8s" % ("case", "fused ms", "staged ms", "numpy ms", "numpy/",
                                                     "torch ms", "torch/")
    print(header)
    best_gflops = 0.0
    for title, entry in cases.items():
        case, fused, staged = entry["case"], entry.get("fused"), entry.get("staged")
        best_gflops = max(best_gflops, fused["gflops"] if fused and case["kind"] == "sdpa" else 0)
        L, S = case["L"], case["S"]
        if case["B"] * case["H"] * L * S * 4 > 8 << 30:
            np_ms, np_note = None, "n/a: numpy needs the %.0f GiB L×S scores" % (case["B"] * case["H"] * L * S * 4 / 2**30)
        else:
            np_ms, np_note = 1e3 * timed(numpy_case(case, rng)), ""
        tc = torch_case(case) if np_ms is not None else None
        torch_ms = 1e3 * timed(tc) if tc else None
        fmt = lambda x: "%11.3f" % x if x is not None else "%11s" % "-"  # noqa: E731
        ratio = lambda x: "%7.2fx" % (x / fused["ms"]) if x is not None else "%8s" % "-"  # noqa: E731
        print("%-46s %s %s %s %s %s %s %s" % (title, fmt(fused["ms"]), fmt(staged["ms"] if staged else None),
                                              fmt(np_ms), ratio(np_ms), fmt(torch_ms), ratio(torch_ms), np_note))
    print("\nnumpy a @ b (2048×2048 float32): %.1f GFLOP/s; clattn's best fused SDPA: %.1f GFLOP/s = %.0f%% of it"
          % (mm_gflops, best_gflops, 100 * best_gflops / mm_gflops))
    print("fresh process, first SDPA call on 4 tokens incl. context creation (caches warm): %.3f s"
          % first_call_seconds(args.clattn, args.device))


if __name__ == "__main__":
    main()
