#!/usr/bin/env python3
"""Programmable attention against PyTorch on the same CPU: the document-masking case of `clattn bench`
(8 documents of 512..1536 positions packed in L = S = 8192, H = 8, D = 64, causal within each document)
and its causal mask_mod case (L = S = 2048), each with clattn's block mask, against
  - PyTorch SDPA with the equivalent dense boolean mask (torch.nn.functional.scaled_dot_product_attention),
  - PyTorch FlexAttention (torch.nn.attention.flex_attention under torch.compile, with create_block_mask),
    where it runs here (it compiles C++ kernels for the CPU at run time; what happened is printed if not).
Each peer runs in a process of its own, on every core, its inputs, masks and compilation outside the
timing (a warm-up call first), the median of several runs; clattn's figures come from `clattn bench
--json` in the same run. Ratios above 1 mean clattn is faster.

Usage:  .venv-bench/bin/python tools/scripts/bench_mods_peer.py [--clattn build/tools/clattn] [--device SPEC]
(the virtual environment of tools/scripts/bench_peer.py: numpy, threadpoolctl and PyTorch 2.x from pip).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

DOCUMENTS = [512, 768, 1024, 1280, 896, 1152, 1536, 1024]  # as tools/cli/cmd_bench.c's bench_documents
CASES = {
    "document": {"clattn": "sdpa document mask_mod + block mask L=S=8192 H=8 D=64", "L": 8192},
    "causal": {"clattn": "sdpa causal mask_mod + block mask L=S=2048 H=8 D=64", "L": 2048},
}
H, D = 8, 64


def timed(fn, min_runs=3, budget=3.0, max_runs=7):
    fn()  # warm-up (FlexAttention compiles here)
    times = []
    while len(times) < min_runs or (sum(times) < budget and len(times) < max_runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def peer(kind, case):
    """One peer on one case, in this process: its median seconds, or raises with why it cannot run."""
    import torch
    torch.manual_seed(0)
    L = CASES[case]["L"]
    q, k, v = (torch.randn(1, H, L, D) for _ in range(3))
    pos = torch.arange(L)
    if case == "document":
        doc = torch.repeat_interleave(torch.arange(len(DOCUMENTS)), torch.tensor(DOCUMENTS))
    else:
        doc = torch.zeros(L, dtype=torch.long)
    if kind == "sdpa":
        mask = (doc[:, None] == doc[None, :]) & (pos[None, :] <= pos[:, None])
        with torch.inference_mode():
            return timed(lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    def mask_mod(b, h, q_idx, kv_idx):
        return (doc[q_idx] == doc[kv_idx]) & (kv_idx <= q_idx)

    block_mask = create_block_mask(mask_mod, None, None, L, L, device="cpu")
    flex = torch.compile(flex_attention)
    with torch.inference_mode():
        return timed(lambda: flex(q, k, v, block_mask=block_mask))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--clattn", default=os.path.join(os.path.dirname(__file__), "..", "..", "build", "tools", "clattn"))
    ap.add_argument("--device", help="device spec for clattn")
    ap.add_argument("--peer", help=argparse.SUPPRESS)  # internal: KIND:CASE in its own process
    args = ap.parse_args()
    if args.peer:
        kind, case = args.peer.split(":")
        try:
            print(json.dumps({"seconds": peer(kind, case)}))
        except Exception as e:  # noqa: BLE001 (any failure of a peer is reported, not fatal)
            print(json.dumps({"error": "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")}))
        return
    import torch
    print("PyTorch %s, %d thread(s)" % (torch.__version__, torch.get_num_threads()))
    cmd = [args.clattn, "bench", "--json", "--only", "mask_mod + block mask"] + (["--device", args.device] if args.device else [])
    bench = json.loads(subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout)
    rows = {r["name"]: r for r in bench["cases"] if r.get("path") == "fused"}
    print("%-10s %12s %14s %8s %14s %8s" % ("case", "clattn ms", "SDPA+mask ms", "ratio", "FlexAttn ms", "ratio"))
    for case, spec in CASES.items():
        ms = rows[spec["clattn"]]["ms"]
        line = "%-10s %12.2f" % (case, ms)
        for kind in ("sdpa", "flex"):
            out = subprocess.run([sys.executable, __file__, "--peer", "%s:%s" % (kind, case)], stdout=subprocess.PIPE,
                                 text=True).stdout.strip().splitlines()
            res = json.loads(out[-1]) if out else {"error": "no output"}
            if "seconds" in res:
                line += " %14.2f %7.2fx" % (res["seconds"] * 1e3, res["seconds"] * 1e3 / ms)
            else:
                line += "  %s: %s" % (kind, res["error"])
        print(line)


if __name__ == "__main__":
    main()
