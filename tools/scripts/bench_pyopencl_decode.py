#!/usr/bin/env python3
"""What the Python package adds to a decode step on arrays that stay on the device: the same loop written in
C (build/tools/decode_loop: clattn_kv_append + clattn_sdpa on cl_mem buffers, clFinish) and in Python
(clattn.KVCache on a pyopencl queue: cache.append(k, v) and cache.attend(q) on pyopencl arrays, then
queue.finish()), one row a step over a dense float32 cache, on the same OpenCL device, the two alternated
several rounds. Each round reports the 10th percentile and the median of a step's wall time and of its
enqueue time (the step until its calls return, before the wait: the host's own work, which the device's
runs beside), the first tenth of the steps left out (compiling, allocating); the overhead is Python's minus
C's, each taken as the best round's (the machine's noise only ever adds time).

Usage: PYTHONPATH=build/src/python .venv-bench/bin/python tools/scripts/bench_pyopencl_decode.py
       [--steps 400] [--batch 1] [--heads 32] [--kv-heads 8] [--dim 64] [--prefill 512] [--rounds 4]
"""
import argparse
import os
import subprocess
import time

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

import clattn
import clattn.pyopencl

HERE = os.path.dirname(os.path.abspath(__file__))


def python_loop(a, queue):
    cache = clattn.KVCache(a.batch, a.kv_heads, a.prefill + a.steps, a.dim,
                           context=clattn.pyopencl.context(queue))
    rows = np.random.default_rng(0).standard_normal((a.batch, a.kv_heads, a.prefill, a.dim), dtype=np.float32)
    cache.append(cla.to_device(queue, rows), cla.to_device(queue, rows))
    k1 = cla.to_device(queue, rows[:, :, :1].copy())
    v1 = cla.to_device(queue, rows[:, :, 1:2].copy())
    q = cla.to_device(queue, np.ones((a.batch, a.heads, 1, a.dim), np.float32))
    out = cla.empty(queue, (a.batch, a.heads, 1, a.dim), np.float32)  # (the C loop's is made once too)
    times, enqueue = [], []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        cache.append(k1, v1)
        cache.attend(q, out=out)
        t1 = time.perf_counter()
        queue.finish()
        times.append((time.perf_counter() - t0) * 1e6)
        enqueue.append((t1 - t0) * 1e6)
    return summary(times[a.steps // 10:]) + summary(enqueue[a.steps // 10:])


def summary(times):
    times = sorted(times)
    return times[len(times) // 10], times[len(times) // 2]


def c_loop(a, exe):
    line = subprocess.run([exe, str(a.steps), str(a.batch), str(a.heads), str(a.kv_heads), str(a.dim),
                           str(a.prefill), a.device or ""], check=True, capture_output=True, text=True).stdout
    words = line.split()
    return float(words[3]), float(words[5]), float(words[7]), float(words[9])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, default in (("steps", 400), ("batch", 1), ("heads", 32), ("kv-heads", 8), ("dim", 64),
                          ("prefill", 512), ("rounds", 4)):
        p.add_argument("--" + name, type=int, default=default)
    p.add_argument("--device", default=None, help="a device spec as `clattn devices` lists them")
    p.add_argument("--exe", default=os.path.join(HERE, "..", "..", "build", "tools", "decode_loop"))
    a = p.parse_args()
    device = clattn.Context(a.device).device_name
    cl_device = next(d for pl in cl.get_platforms() for d in pl.get_devices() if d.name == device)
    queue = cl.CommandQueue(cl.Context([cl_device]))
    print(f"device: {device}; B={a.batch} H={a.heads} kv_heads={a.kv_heads} D={a.dim}, cache {a.prefill} rows "
          f"+ 1 a step, {a.steps} steps, float32")
    best_c, best_py = [float("inf")] * 4, [float("inf")] * 4
    for r in range(a.rounds):
        c = c_loop(a, a.exe)
        py = python_loop(a, queue)
        best_c = [min(x, y) for x, y in zip(best_c, c)]
        best_py = [min(x, y) for x, y in zip(best_py, py)]
        print(f"round {r + 1}: step p10/median: C {c[0]:.1f}/{c[1]:.1f} µs, Python {py[0]:.1f}/{py[1]:.1f} µs; "
              f"enqueue p10/median: C {c[2]:.1f}/{c[3]:.1f} µs, Python {py[2]:.1f}/{py[3]:.1f} µs")
    print(f"best rounds: a step p10 C {best_c[0]:.1f} µs, Python {best_py[0]:.1f} µs ({best_py[0] - best_c[0]:+.1f}); "
          f"median {best_c[1]:.1f} / {best_py[1]:.1f} µs ({best_py[1] - best_c[1]:+.1f}); enqueue p10 "
          f"{best_c[2]:.1f} / {best_py[2]:.1f} µs ({best_py[2] - best_c[2]:+.1f}), median {best_c[3]:.1f} / "
          f"{best_py[3]:.1f} µs ({best_py[3] - best_c[3]:+.1f})")


if __name__ == "__main__":
    main()
