#!/usr/bin/env python3
"""Peers for `clattn bench`: the same cases with numpy and PyTorch on the same CPU, and the ratio
peer-time / clattn-time per case (clattn's first path: the fused kernel, or the decode kernels for the
decode cases; ragged batches and paged caches have no peer and are set against clattn's own rows).

Usage:  .venv-bench/bin/python tools/scripts/bench_peer.py [--clattn build/tools/clattn] [--skip-long]
                                                           [--quick] [--only TEXT] [--device SPEC]

The peers need numpy, threadpoolctl and PyTorch 2.x from pip in a virtual environment (Debian's
python3-torch is 1.13, which is refused, and Debian's numpy may use the reference BLAS):
    python3 -m venv .venv-bench
    .venv-bench/bin/pip install numpy threadpoolctl torch --index-url https://download.pytorch.org/whl/cpu \\
        --extra-index-url https://pypi.org/simple
or, where that index cannot be reached, `.venv-bench/bin/pip install numpy threadpoolctl torch` (PyPI's
torch brings CUDA libraries along, several GiB, and runs on the CPU all the same).

Fairness: each peer times each case in a process of its own (this script run with --peer), so no other
library's threads spin beside it; both use every core; set-up (inputs, weights, masks) is not timed;
a warm-up run, then the median of several runs.
numpy runs the tutorials' formula, softmax stabilised by the row maximum:
    s = q @ k.T * scale (+ causal -inf bias) ; p = exp(s - max) / sum ; o = p @ v
It must be linked to an optimised, multi-threaded BLAS: the script refuses to report ratios against the
reference BLAS. Some machines set OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE for old OpenBLAS builds; they
slow a current one, so benchmark with
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv-bench/bin/python tools/scripts/bench_peer.py
PyTorch runs torch.nn.functional.scaled_dot_product_attention for SDPA cases and, for layers,
torch.nn.MultiheadAttention (no bias, like clattn's layer) under torch.inference_mode().
Then clattn's own Python package (build/src/python, else an installed one) runs the float32 SDPA and layer
cases on numpy arrays, against the C bench's call on device buffers: the package's whole cost above the
C call (argument checks, output allocation, host arrays in and out). Short calls are timed in batches.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

MEMORY_LIMIT = 8 << 30  # bytes of L×S scores a peer may materialise


class Skip(Exception):
    """A peer cannot run (this case); the message says why."""


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


def score_bytes(case):
    return case["B"] * case["H"] * case["L"] * case["S"] * 4


# ---- numpy peer (runs in its own process) ----

def numpy_info():
    """numpy's version and the BLAS it calls; Skip when that BLAS is missing or the reference one."""
    import numpy as np
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        raise Skip("cannot identify numpy's BLAS: pip install threadpoolctl")
    for pool in threadpool_info():
        if pool.get("user_api") == "blas":
            blas = "%s %s (%s), core type %s" % (pool.get("internal_api"), pool.get("version"),
                                                 os.path.basename(pool.get("filepath", "?")),
                                                 pool.get("architecture", "?"))
            if pool.get("internal_api") not in ("openblas", "mkl", "blis"):
                raise Skip("numpy's BLAS is %s, not an optimised one (install numpy's wheel)" % blas)
            return {"version": np.__version__, "blas": blas, "threads": pool.get("num_threads", 0)}
    raise Skip("numpy calls no BLAS that threadpoolctl knows")


def sdpa_numpy(q, k, v, bias):
    import numpy as np
    scale = np.float32(1.0 / np.sqrt(q.shape[-1]))
    s = np.matmul(q, k.swapaxes(-1, -2))
    s *= scale
    if bias is not None:
        s += bias  # 0 / -inf, broadcast over batch and heads: cheaper than boolean indexing
    s -= s.max(axis=-1, keepdims=True)
    np.exp(s, out=s)
    s /= s.sum(axis=-1, keepdims=True)
    return np.matmul(s, v)


def numpy_case(case):
    """The function that numpy times for the case, its inputs made here, outside the timing."""
    import numpy as np
    rng = np.random.default_rng(0)
    noise = lambda *shape: rng.standard_normal(shape, dtype=np.float32)  # noqa: E731
    if case["kind"] == "matmul":
        a, b = noise(case["N"], case["N"]), noise(case["N"], case["N"])
        return lambda: a @ b
    if case["kind"] == "gemm":  # clattn_projection: rows L, model_dim inputs, S outputs, a bias
        x, w, bias = noise(case["L"], case["model_dim"]), noise(case["model_dim"], case["S"]), noise(case["S"])
        return lambda: x @ w + bias
    if case["kind"] in ("ragged", "paged"):
        raise Skip("no %s peer: compare clattn with its own dense row" % case["kind"])
    if case["kind"] == "backward":
        raise Skip("numpy has no gradients")
    if case.get("window"):
        raise Skip("no windowed peer: compare clattn with its own unwindowed row")
    if score_bytes(case) >= MEMORY_LIMIT:
        raise Skip("numpy needs the %.0f GiB L×S scores" % (score_bytes(case) / 2**30))
    B, H, L, S, D = (case[x] for x in "BHLSD")
    bias = None
    if case["causal"]:  # top-left: query i sees keys 0..i; bottom-right: keys 0..i+S-L
        shift = S - L if case.get("bottom_right") else 0
        bias = np.where(np.triu(np.ones((L, S), dtype=bool), 1 + shift), np.float32(-np.inf), np.float32(0))
    if case["kind"] == "sdpa":
        # numpy has no grouped-query attention: K/V repeated per query head, before the timing.
        kv, rep = case.get("kv_heads", H), H // case.get("kv_heads", H)
        q = noise(B, H, L, D)
        k, v = (np.repeat(noise(B, kv, S, D), rep, axis=1) for _ in range(2))
        return lambda: sdpa_numpy(q, k, v, bias)
    d = case["model_dim"]
    x = noise(B, L, d)
    wq, wk, wv, wo = noise(d, H * D), noise(d, H * D), noise(d, H * D), noise(H * D, d)
    heads = lambda t: t.reshape(B, L, H, D).transpose(0, 2, 1, 3)  # noqa: E731

    def layer():
        o = sdpa_numpy(heads(x @ wq), heads(x @ wk), heads(x @ wv), bias)
        return o.transpose(0, 2, 1, 3).reshape(B, L, H * D) @ wo
    return layer


# ---- PyTorch peer (runs in its own process) ----

def torch_module():
    """torch, 2.x only, set to use every core."""
    try:
        import torch
    except ImportError:
        raise Skip("PyTorch is not installed in %s (see the top of this script)" % sys.executable)
    if int(torch.__version__.split(".")[0]) < 2:
        raise Skip("PyTorch %s is too old: install 2.x with pip (see the top of this script)" % torch.__version__)
    torch.set_num_threads(os.cpu_count() or 1)
    return torch


def torch_info():
    torch = torch_module()
    return {"version": torch.__version__, "threads": torch.get_num_threads()}


def torch_case(case):
    torch = torch_module()
    if case["kind"] == "matmul":
        raise Skip("numpy only")
    if case["kind"] == "gemm":
        x, w, bias = torch.randn(case["L"], case["model_dim"]), torch.randn(case["model_dim"], case["S"]), \
            torch.randn(case["S"])

        def addmm():
            with torch.inference_mode():
                return torch.addmm(bias, x, w)
        return addmm
    if case["kind"] in ("ragged", "paged"):
        raise Skip("no %s peer" % case["kind"])
    if case.get("window"):
        raise Skip("no windowed peer")
    torch.manual_seed(0)
    B, H, L, S, D = (case[x] for x in "BHLSD")
    F = torch.nn.functional
    if case["kind"] == "backward":  # SDPA's backward alone: the forward's graph made once, outside the timing
        q, k, v = (torch.randn(B, H, n, D, requires_grad=True) for n in (L, S, S))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=case["causal"])
        grad_out = torch.randn_like(out)
        return lambda: torch.autograd.grad(out, (q, k, v), grad_out, retain_graph=True)  # noqa: E731
    if case["kind"] == "sdpa":
        kv = case.get("kv_heads", H)
        q, k, v = torch.randn(B, H, L, D), torch.randn(B, kv, S, D), torch.randn(B, kv, S, D)
        gqa = {"enable_gqa": True} if kv != H else {}  # PyTorch >= 2.5
        if case["causal"] and case.get("bottom_right") and L != S:  # is_causal is top-left: a mask instead
            mask = torch.ones(L, S, dtype=torch.bool).tril(S - L)
            call = lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask, **gqa)  # noqa: E731
        else:
            call = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=case["causal"], **gqa)  # noqa: E731
        if score_bytes(case) >= MEMORY_LIMIT:
            # Only the flash kernel avoids L×S memory: an error from it beats torch's math fallback swapping.
            from torch.nn.attention import SDPBackend, sdpa_kernel

            def flash_only():
                with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                    return call()
            return flash_only
        return call
    d = case["model_dim"]
    x = torch.randn(B, L, d)
    note = ""
    if H * D == d:
        mha = torch.nn.MultiheadAttention(d, H, bias=False, batch_first=True).eval()
        mask = torch.nn.Transformer.generate_square_subsequent_mask(L) if case["causal"] else None
        # need_weights=False: no averaged attention weights, the SDPA path
        layer = lambda: mha(x, x, x, need_weights=False, attn_mask=mask, is_causal=case["causal"])[0]  # noqa: E731
    else:  # MultiheadAttention's heads split d_model; clattn's may be narrower: the same steps, spelled out
        note = "torch: linear + SDPA, as MultiheadAttention needs H·D = d_model"
        wq, wk, wv, wo = torch.randn(H * D, d), torch.randn(H * D, d), torch.randn(H * D, d), torch.randn(d, H * D)
        heads = lambda t: t.view(B, L, H, D).transpose(1, 2)  # noqa: E731

        def layer():
            o = F.scaled_dot_product_attention(heads(F.linear(x, wq)), heads(F.linear(x, wk)), heads(F.linear(x, wv)),
                                               is_causal=case["causal"])
            return F.linear(o.transpose(1, 2).reshape(B, L, H * D), wo)

    def run():
        with torch.inference_mode():
            return layer()
    run.note = note  # shown beside the time
    return run


# ---- clattn's own Python package (runs in its own process, as the peers do) ----

def python_module():
    """The clattn package: the one built in build/src/python, else an installed one."""
    built = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "src", "python")
    sys.path.insert(0, os.path.abspath(built))
    try:
        import clattn
    except ImportError as e:
        raise Skip("the Python package is not built (meson compile -C build) nor installed: %s" % e)
    return clattn


def python_info():
    clattn = python_module()
    return {"version": clattn.__version__, "file": clattn.__file__}


def python_case(case):
    """clattn.scaled_dot_product_attention / multi_head_attention on numpy arrays: the C bench's case and
    first path through the package (arguments checked, outputs allocated, host arrays in and out)."""
    clattn = python_module()
    import numpy as np
    if case["kind"] not in ("sdpa", "mha") or case.get("window") or "float32" not in (case.get("qo_dtype"), None) \
            or case.get("kv_dtype", "float32") != "float32":
        raise Skip("float32 SDPA and layers only")
    ctx = clattn.Context(case.get("device"))
    rng = np.random.default_rng(0)
    noise = lambda *shape: rng.standard_normal(shape, dtype=np.float32)  # noqa: E731
    B, H, L, S, D = (case[x] for x in "BHLSD")
    if case["kind"] == "sdpa":
        kv = case.get("kv_heads", H)
        q, k, v = noise(B, H, L, D), noise(B, kv, S, D), noise(B, kv, S, D)
        offsets = [S - L] * B if case["causal"] and case.get("bottom_right") else None
        call = lambda: clattn.scaled_dot_product_attention(  # noqa: E731
            q, k, v, is_causal=case["causal"], enable_gqa=kv != H, offsets=offsets, algorithm=case["path"], context=ctx)
    else:
        d = case["model_dim"]
        x, wq, wk, wv, wo = noise(B, L, d), noise(d, H * D), noise(d, H * D), noise(d, H * D), noise(H * D, d)
        call = lambda: clattn.multi_head_attention(x, wq, wk, wv, wo, heads=H, is_causal=case["causal"],  # noqa: E731
                                                   context=ctx)
    call()
    t = time.perf_counter()
    call()
    once = time.perf_counter() - t
    repeat = max(1, min(2000, int(0.02 / max(once, 1e-7))))  # (short calls: a batch of them per timed run)
    if repeat == 1:
        return call

    def batch():
        for _ in range(repeat):
            call()
    batch.per_call = repeat
    return batch


PEERS = {"numpy": (numpy_info, numpy_case), "torch": (torch_info, torch_case), "python": (python_info, python_case)}


def peer_main(name, case_json):
    """--peer mode: one JSON line, the peer's info or the case's median ms, or why it was skipped."""
    info, setup = PEERS[name]
    try:
        if case_json is None:
            result = info()
        else:
            fn = setup(json.loads(case_json))
            result = {"ms": 1e3 * timed(fn) / getattr(fn, "per_call", 1), "note": getattr(fn, "note", "")}
    except Skip as e:
        result = {"skip": str(e)}
    print(json.dumps(result))


# ---- the driver ----

def run_peer(name, case=None):
    """Runs the peer in a fresh process (so no other library's threads share the cores) and reads its line."""
    cmd = [sys.executable, os.path.abspath(__file__), "--peer", name]
    if case is not None:
        cmd += ["--case-json", json.dumps(case)]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    if p.returncode != 0:
        return {"skip": "%s peer failed (exit status %d)" % (name, p.returncode)}
    return json.loads(p.stdout.splitlines()[-1])


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def sdpa_process_seconds(clattn, device, tmp, shape, runs):
    """Best wall time of fresh `clattn sdpa` processes on random q, k, v of `shape` written to tmp (caches warmed
    by one untimed run first), and the paths of its files."""
    import numpy as np
    rng = np.random.default_rng(0)
    paths = {n: os.path.join(tmp, n + ".npy") for n in "qkvo"}
    for n in "qkv":
        np.save(paths[n], rng.standard_normal(shape, dtype=np.float32))
    cmd = [clattn, "sdpa"] + sum((["--" + n, paths[n]] for n in "qkv"), []) + ["--out", paths["o"]]
    cmd += ["--device", device] if device else []
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    best = float("inf")
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        best = min(best, time.perf_counter() - t)
    return best, paths


def first_call_seconds(clattn, device):
    """Wall time of a fresh `clattn sdpa` process on the tutorial-sized 4-token case (caches warm)."""
    with tempfile.TemporaryDirectory() as tmp:
        return sdpa_process_seconds(clattn, device, tmp, (4, 4), 5)[0]


def one_shot_seconds(clattn, device):
    """A fresh `clattn sdpa` process at L = S = 2048, H = 8, D = 64 (caches warm), against the warm in-process
    fused time plus the file I/O of its inputs and output (numpy's np.load of q, k, v and np.save of the output
    in this process, which the tool does alike): returns (one-shot s, I/O s)."""
    import numpy as np
    with tempfile.TemporaryDirectory() as tmp:
        best, paths = sdpa_process_seconds(clattn, device, tmp, (1, 8, 2048, 64), 3)
        io = float("inf")
        for _ in range(3):
            t = time.perf_counter()
            out = sum(np.load(paths[n]) for n in "qkv")
            np.save(paths["o"], out)
            io = min(io, time.perf_counter() - t)
        return best, io


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clattn", default=os.path.join(os.path.dirname(__file__), "..", "..", "build", "tools", "clattn"))
    ap.add_argument("--skip-long", action="store_true", help="leave out the L=65536 case")
    ap.add_argument("--quick", action="store_true", help="the small smoke-test cases")
    ap.add_argument("--device", help="device spec for clattn")
    ap.add_argument("--only", help="only the cases whose name contains this text (e.g. decode)")
    ap.add_argument("--peer", choices=sorted(PEERS), help=argparse.SUPPRESS)  # internal: one peer, one case
    ap.add_argument("--case-json", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.peer:
        return peer_main(args.peer, args.case_json)

    print("CPU: %s, %d cores" % (cpu_model(), os.cpu_count()))
    np_info = run_peer("numpy")
    if "skip" in np_info:
        sys.exit("refusing to compare: " + np_info["skip"])
    print("numpy %(version)s, BLAS: %(blas)s, %(threads)d thread(s)" % np_info)
    torch_info = run_peer("torch")
    use_torch = "skip" not in torch_info
    print("PyTorch %(version)s, %(threads)d thread(s)" % torch_info if use_torch else
          "PyTorch left out: " + torch_info["skip"])

    cmd = [args.clattn, "bench", "--json"] + (["--skip-long"] if args.skip_long else []) + \
          (["--quick"] if args.quick else []) + (["--device", args.device] if args.device else []) + \
          (["--only", args.only] if args.only else [])
    print("running:", " ".join(cmd), flush=True)
    bench = json.loads(subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout)

    # name -> {"case": row, path: row}; the first path of a case (decode or fused) is the one compared
    cases, bandwidth = {}, {}
    for row in bench["cases"]:
        if row["kind"] == "bandwidth":
            bandwidth[row["name"]] = row
            continue
        if row["kind"] == "versus":  # a case against another of clattn's (printed by clattn bench itself)
            continue
        entry = cases.setdefault(row["name"], {"case": row, "paths": []})
        entry[row["path"]] = row
        entry["paths"].append(row["path"])
    print("\nclattn on %s vs. peers on the CPU, %s (fp32; ms = wall median; dev = its device time; other = the"
          " case's second path; ratio = peer ms / clattn ms)" % (bench["device"], bench["date"]))
    print("%-46s %-7s %10s %10s %10s %10s %8s %10s %8s" % ("case", "path", "ms", "dev", "other ms", "numpy ms",
                                                           "numpy/", "torch ms", "torch/"))
    fmt = lambda x: "%10.3f" % x if x else "%10s" % "-"  # noqa: E731
    best_gflops = 0.0
    for title, entry in cases.items():
        case, paths = entry["case"], entry["paths"]
        main_row, other = entry[paths[0]], entry[paths[1]] if len(paths) > 1 else None
        if case["kind"] == "sdpa" and paths[0] == "fused":
            best_gflops = max(best_gflops, main_row["gflops"])
        results = [run_peer("numpy", case)] + ([run_peer("torch", case)] if use_torch else [{"skip": ""}])
        cells, notes = [], []
        for r in results:
            ms = r.get("ms")
            cells += [fmt(ms), "%7.2fx" % (ms / main_row["ms"]) if ms else "%8s" % "-"]
            notes += [r[k] for k in ("skip", "note") if r.get(k)]
        if title in bandwidth:
            bw = bandwidth[title]
            notes.append("K/V %.1f GB/s; %.0f%% of the native read (%.1f GB/s, alternated); read-and-sum kernel %.1f GB/s" % (
                bw["kv_gbps"], 100 * bw.get("native_fraction", 0), bw.get("native_gbps", 0), bw["stream_gbps"]))
        line = "%-46s %-7s %s %s %s %s  %s" % (title[:46], paths[0], fmt(main_row["ms"]), fmt(main_row.get("device_ms")),
                                               fmt(other["ms"] if other else None), " ".join(cells), "; ".join(notes))
        print(line.rstrip(), flush=True)
    python_info = run_peer("python")
    if "skip" in python_info:
        print("\nPython package left out: " + python_info["skip"])
    else:
        print("\nclattn's Python package %(version)s (%(file)s), numpy arrays in and out, against the C bench's "
              "call on device buffers (same case, same path):" % python_info)
        for title, entry in cases.items():
            case = dict(entry["case"], path=entry["paths"][0], device=args.device)
            if case["kind"] not in ("sdpa", "mha"):
                continue
            r = run_peer("python", case)
            if r.get("ms"):
                c_ms = entry[entry["paths"][0]]["ms"]
                print("  %-46s %-7s python %10.3f ms, C %10.3f ms: %.3fx, %+.1f us" % (
                    title[:46], entry["paths"][0], r["ms"], c_ms, r["ms"] / c_ms, 1e3 * (r["ms"] - c_ms)), flush=True)
    mm = run_peer("numpy", {"kind": "matmul", "N": 2048})
    mm_gflops = 2 * 2048 ** 3 / (mm["ms"] * 1e-3) / 1e9
    print("\nnumpy a @ b (2048×2048 float32): %.1f GFLOP/s; clattn's best fused SDPA: %.1f GFLOP/s = %.0f%% of it"
          % (mm_gflops, best_gflops, 100 * best_gflops / mm_gflops))
    print("fresh process, first SDPA call on 4 tokens incl. context creation (caches warm): %.3f s"
          % first_call_seconds(args.clattn, args.device))
    warm = cases.get("sdpa L=S=2048 H=8 D=64", {}).get("fused")
    if warm:
        one_shot, io = one_shot_seconds(args.clattn, args.device)
        print("one-shot `clattn sdpa` at L=S=2048 H=8 D=64: %.3f s = %.2fx (warm in-process fused %.3f s + file I/O "
              "%.3f s)" % (one_shot, one_shot / (warm["ms"] * 1e-3 + io), warm["ms"] * 1e-3, io))
    for title, entry in cases.items():
        if entry["case"]["kind"] == "backward":
            print("%s: clattn %.1f GFLOP/s (2.5x the forward's multiply-adds) = %.0f%% of numpy's a @ b"
                  % (title, entry["backward"]["gflops"], 100 * entry["backward"]["gflops"] / mm_gflops))
        if entry["case"]["kind"] == "gemm":
            r = run_peer("numpy", entry["case"])
            if r.get("ms"):
                ratio = r["ms"] / entry["gemm"]["ms"]
                print("%s: clattn %.1f GFLOP/s = %.0f%% of numpy's (x @ w + bias) %.1f GFLOP/s"
                      % (title, entry["gemm"]["gflops"], 100 * ratio, entry["gemm"]["gflops"] / ratio))


if __name__ == "__main__":
    main()
