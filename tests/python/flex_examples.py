"""FlexAttention's documented examples (PyTorch's flex_attention docs and the attention-gym examples it points to)
as score_mod / mask_mod functions over captured tensors, for check_flex.py (against PyTorch) and, recorded as
graphs, for test_flex_codegen.py (without PyTorch):

    python tests/python/flex_examples.py record    # rewrites tests/python/data/flex_graphs.json

Each example is made for a shape: make(B, H, L, S) → (score_mod or None, mask_mod or None), the functions
closing over the tensors they read."""
import json
import math
import os
import sys

import torch

LENGTH = 96  # (the largest L and S the examples' tables cover)


def causal(B, H, L, S):
    def mask_mod(b, h, q_idx, kv_idx):
        return q_idx >= kv_idx
    return None, mask_mod


def sliding_window(B, H, L, S, window=12):
    def mask_mod(b, h, q_idx, kv_idx):
        return (q_idx >= kv_idx) & (q_idx - kv_idx <= window)
    return None, mask_mod


def prefix_lm(B, H, L, S):
    prefix_lengths = torch.tensor([5, 17, 9, 30][:B])

    def mask_mod(b, h, q_idx, kv_idx):
        return (kv_idx <= prefix_lengths[b]) | (q_idx >= kv_idx)
    return None, mask_mod


def document(B, H, L, S):
    document_id = torch.zeros(LENGTH, dtype=torch.int32)
    for start in (11, 30, 31, 58, 77):  # (one document of a single position)
        document_id[start:] += 1

    def mask_mod(b, h, q_idx, kv_idx):
        return (document_id[q_idx] == document_id[kv_idx]) & (q_idx >= kv_idx)
    return None, mask_mod


def alibi(B, H, L, S):
    slopes = torch.exp2(-8.0 * torch.arange(1, H + 1) / H)

    def score_mod(score, b, h, q_idx, kv_idx):
        return score + slopes[h] * (kv_idx - q_idx)
    return score_mod, None


def relative_bias(B, H, L, S):
    bias = torch.randn(2 * LENGTH, generator=torch.Generator().manual_seed(3))

    def score_mod(score, b, h, q_idx, kv_idx):
        return score + bias[q_idx - kv_idx + LENGTH]
    return score_mod, None


def soft_cap(B, H, L, S, cap=2.5):
    def score_mod(score, b, h, q_idx, kv_idx):
        return cap * torch.tanh(score / cap)
    return score_mod, None


def t5_bias(B, H, L, S, buckets=32, max_distance=64):
    table = torch.randn(buckets, H, generator=torch.Generator().manual_seed(4)) * 2

    def score_mod(score, b, h, q_idx, kv_idx):
        relative = kv_idx - q_idx  # (T5's bidirectional buckets: half for each sign)
        half = buckets // 2
        bucket = (relative > 0).long() * half
        distance = torch.abs(relative)
        exact = half // 2
        large = exact + (torch.log(distance.float() / exact) / math.log(max_distance / exact)
                         * (half - exact)).long()
        large = torch.clamp(large, max=half - 1)
        bucket = bucket + torch.where(distance < exact, distance, large)
        return score + table[bucket, h]
    return score_mod, None


def paged_index_map(B, H, L, S, page=8):
    """PagedAttention as FlexAttention writes it: keys in physical pages, a mask_mod through the page table
    (here the key positions of each sequence permuted by pages, the mask causal in logical positions)."""
    pages = (S + page - 1) // page
    g = torch.Generator().manual_seed(5)
    logical_page = torch.stack([torch.randperm(pages, generator=g) for _ in range(B)])  # (B, pages)

    def mask_mod(b, h, q_idx, kv_idx):
        logical = logical_page[b, kv_idx // page] * page + kv_idx % page
        return (logical <= q_idx) & (logical < S)
    return None, mask_mod


def soft_cap_causal_alibi(B, H, L, S):
    """Several terms at once: soft-capped scores plus ALiBi, under a causal mask_mod."""
    slopes = torch.linspace(0.05, 0.5, H)

    def score_mod(score, b, h, q_idx, kv_idx):
        return 4.0 * torch.tanh(score / 4.0) - slopes[h] * torch.abs(q_idx - kv_idx).float()

    return score_mod, causal(B, H, L, S)[1]


EXAMPLES = {f.__name__: f for f in (causal, sliding_window, prefix_lm, document, alibi, relative_bias, soft_cap,
                                     t5_bias, paged_index_map, soft_cap_causal_alibi)}
RECORD_SHAPE = (2, 4, 37, 45)  # (B, H, L, S) of the recorded graphs


def record(path):
    """Each example's graphs and captured tensors, as clattn records them, to `path` (JSON)."""
    from clattn import _flex
    out = {}
    for name, make in EXAMPLES.items():
        score_mod, mask_mod = make(*RECORD_SHAPE)
        entry = {"shape": RECORD_SHAPE, "score": None, "mask": None, "tensors": []}
        tensors = []
        if score_mod is not None:
            entry["score"], tensors = _flex._traced(score_mod, _flex._SCORE_INPUTS)
        if mask_mod is not None:
            graph, own = _flex._traced(mask_mod, _flex._MASK_INPUTS)
            entry["mask"], tensors = _flex._merge_tensors(graph, own, tensors)
        entry["tensors"] = [{"kind": _flex._tensor_kind(torch, t), "shape": list(t.shape),
                             "values": t.double().reshape(-1).tolist()} for t in tensors]
        for graph in (entry["score"], entry["mask"]):
            for n in (graph or {}).get("nodes", []):
                n["line"] = n["line"].split(":")[-1]  # (the line only: the file's path is this machine's)
        out[name] = entry
    with open(path, "w", encoding="utf-8") as f:  # (an example a line: the file stays short to read)
        f.write("{\n" + ",\n".join(f"{json.dumps(name)}: {json.dumps(out[name], sort_keys=True)}"
                                    for name in sorted(out)) + "\n}\n")


if __name__ == "__main__" and sys.argv[1:] == ["record"]:
    record(os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "flex_graphs.json"))
