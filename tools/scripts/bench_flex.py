#!/usr/bin/env python3
"""clattn.flex_attention against the same program written in OpenCL C, and against PyTorch's FlexAttention, on
the same CPU in one run: document masking (8 documents packed in L = S = 4096, causal within each) and a
relative-position bias table with a causal mask (L = S = 4096), H = 8, D = 64, float32, forward and forward +
backward (PyTorch 2.15 has no FlexAttention backward on CPU: forward only there; eager, and torch.compile'd
where it compiles). clattn's calls use its block mask in both forms (clattn.create_block_mask); PyTorch's
FlexAttention its own (create_block_mask). Every case has a warm-up call (compiling kernels and building
block masks there), then the best of several timed calls, the cases alternated; ratios above 1 mean clattn
is faster.

Usage: PYTHONPATH=build/src/python .venv-bench/bin/python tools/scripts/bench_flex.py [--length 4096]
"""
import argparse
import os
import time
import warnings

import torch
from torch.nn.attention import flex_attention as torch_flex

import clattn

warnings.filterwarnings("ignore")
DOCUMENTS = [512, 384, 640, 512, 256, 768, 512, 512]  # (sums to 4096; scaled to --length)
H, D = 8, 64

HAND_DOCUMENT = """bool mask_mod(int b, int h, long q, long k, __global const long *aux0)
{ return aux0[q] == aux0[k] && k <= q; }
"""
HAND_BIAS = """float score_mod(float s, int b, int h, long q, long k, __global const float *aux0)
{ return s + aux0[q - k + LENGTH]; }
float score_mod_grad(float s, int b, int h, long q, long k, __global const float *aux0) { return 1.0f; }
bool mask_mod(int b, int h, long q, long k, __global const float *aux0) { return k <= q; }
"""


def programs(length):
    docs = torch.repeat_interleave(torch.arange(len(DOCUMENTS)),
                                   torch.tensor([n * length // 4096 for n in DOCUMENTS]))
    docs = torch.cat([docs, docs[-1:].repeat(length - len(docs))])
    table = torch.randn(2 * length)

    def document(b, h, q_idx, kv_idx):
        return (docs[q_idx] == docs[kv_idx]) & (q_idx >= kv_idx)

    def bias(score, b, h, q_idx, kv_idx):
        return score + table[q_idx - kv_idx + length]

    def causal(b, h, q_idx, kv_idx):
        return q_idx >= kv_idx

    return {"document": (None, document, HAND_DOCUMENT, {"aux0": docs.to(torch.int64)}),
            "relative bias": (bias, causal, HAND_BIAS.replace("LENGTH", str(length)), {"aux0": table})}


def best(fn, runs):
    fn()
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--length", type=int, default=4096)
    p.add_argument("--runs", type=int, default=3)
    a = p.parse_args()
    torch.set_num_threads(os.cpu_count())
    L = a.length
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, H, L, D, generator=g) for _ in range(3))
    ctx = clattn.default_context()
    print(f"L = S = {L}, H = {H}, D = {D}, float32; {os.cpu_count()} cores; PyTorch {torch.__version__}; "
          f"best of {a.runs} after a warm-up")
    for name, (score_mod, mask_mod, hand, aux) in programs(L).items():
        ours = clattn.create_block_mask(mask_mod, None, None, L, L)
        theirs = torch_flex.create_block_mask(mask_mod, None, None, L, L, device="cpu")
        compiled = torch.compile(torch_flex.flex_attention)
        qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))

        def traced():
            return clattn.flex_attention(q, k, v, score_mod=score_mod, block_mask=ours, context=ctx)

        def written():
            return clattn.scaled_dot_product_attention(q, k, v, mods=hand, aux=aux, context=ctx,
                                                       _block_mask=ours._for)

        def traced_bwd():
            clattn.flex_attention(qg, kg, vg, score_mod=score_mod, block_mask=ours, context=ctx).sum().backward()

        def written_bwd():
            clattn.scaled_dot_product_attention(qg, kg, vg, mods=hand, aux=aux, context=ctx,
                                                _block_mask=ours._for).sum().backward()

        times = {"traced": best(traced, a.runs), "written": best(written, a.runs),
                 "traced fwd+bwd": best(traced_bwd, a.runs), "written fwd+bwd": best(written_bwd, a.runs)}
        try:
            times["torch eager"] = best(lambda: torch_flex.flex_attention(q, k, v, score_mod=score_mod,
                                                                          block_mask=theirs), a.runs)
        except Exception as e:  # (reported, not hidden)
            print(f"  PyTorch eager FlexAttention failed: {type(e).__name__}: {str(e)[:200]}")
        try:
            times["torch compiled"] = best(lambda: compiled(q, k, v, score_mod=score_mod, block_mask=theirs), a.runs)
        except Exception as e:
            print(f"  PyTorch compiled FlexAttention failed: {type(e).__name__}: {str(e)[:200]}")
        print(f"{name}: " + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in times.items()))
        print(f"  traced / written in OpenCL C: forward {times['traced'] / times['written']:.3f}×, "
              f"forward + backward {times['traced fwd+bwd'] / times['written fwd+bwd']:.3f}×")
        for peer in ("torch eager", "torch compiled"):
            if peer in times:
                print(f"  {peer} / clattn traced (forward): {times[peer] / times['traced']:.2f}×")
        print(f"  block mask (empty, partial, full): {ours.counts()}")


if __name__ == "__main__":
    main()
