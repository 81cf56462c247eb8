#!/usr/bin/env python3
"""ONNX's own conformance cases of the Attention operator, replayed through the `clattn` tool.

Usage:  python tools/scripts/replay_onnx_attention.py [--exe build/tools/clattn] [--device SPEC] [-k TEXT] [-v]

Needs numpy and onnx (`pip install onnx numpy` in a venv; no OpenCL binding): the cases are the node
tests onnx.backend.test.case.node.collect_testcases("Attention") builds (its test_attention_* cases
without their _expanded twins: 93 with onnx 1.23), each with its inputs, its expected outputs and its
tolerances. Every case becomes one `clattn sdpa` run on .npy files in a temporary folder:

  Q, K, V              --q/--k/--v; 3-D inputs with --heads q_num_heads (and --kv-heads kv_num_heads),
                       4-D with --kv-heads when K has fewer heads than Q; float16 as '<f2', bfloat16 as
                       '<u2' bit patterns with --bf16, Y in the same type (--out-dtype)
  attn_mask            --mask, as given (bool, float32, float16; a bfloat16 mask widened to float32,
                       exactly; a rank-1 mask (S,) written as its equivalent (1, S)); a last dimension
                       narrower than the keys stays narrower: the tool pads it as ONNX does
  past_key/past_value  --past-k/--past-v (for 3-D inputs in K's (B, P, N·D) layout), present_key and
                       present_value from --present-k/--present-v
  nonpad_kv_seqlen     --key-lengths, and --offsets nonpad − L where is_causal or a window needs positions
  is_causal            --causal, at --offset P after a past (ONNX's causal mask is offset-aligned)
  left/right_window    --window L,R (the same offsets)
  scale, softcap       --scale, --softcap
  qk_matmul_output     --scores qk|softcapped|masked|softmax:FILE for modes 0–3 (float32, cast to Q's type)
  softmax_precision    FLOAT (1): the tool's default; DOUBLE (11): --softmax-double; others: not expressible

Outputs are compared as ONNX's backend runner compares them (onnx.backend.test.runner's
assert_similar_outputs): same shape and type, np.testing.assert_allclose with the case's rtol and atol
(for bfloat16 rtol at least 2^-6). Prints one line per case and a summary; exits 1 when a case fails.
"""
import argparse
import os
import pathlib
import subprocess
import sys
import tempfile
import warnings

import numpy as np

try:
    import onnx
    from onnx.backend.test.case.node import collect_testcases
except ImportError as e:  # pragma: no cover
    sys.exit(f"replay_onnx_attention: needs onnx (pip install onnx): {e}")

ROOT = pathlib.Path(__file__).resolve().parents[2]
INPUTS = ["Q", "K", "V", "attn_mask", "past_key", "past_value", "nonpad_kv_seqlen"]
OUTPUTS = ["Y", "present_key", "present_value", "qk_matmul_output"]
SCORE_MODES = {0: "qk", 1: "softcapped", 2: "masked", 3: "softmax"}
FLOAT, DOUBLE = onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE


class NotExpressible(Exception):
    """A case that the tool's flags cannot say."""


def is_bf16(a):
    return a.dtype.name == "bfloat16"


def save_tensor(path, a):
    """Q, K, V and the past as the tool reads them: float32/float16 as such, bfloat16 as '<u2' bits."""
    np.save(path, a.view(np.uint16) if is_bf16(a) else a)


def case_io(case):
    """The node's inputs and expected outputs by role (Q, K, …, Y, …), and its attributes."""
    node = case.model.graph.node[0]
    graph_in = [i.name for i in case.model.graph.input]
    graph_out = [o.name for o in case.model.graph.output]
    ins, outs = case.data_sets[0]
    by_name = dict(zip(graph_in, ins))
    inputs = {role: np.asarray(by_name[name]) for role, name in zip(INPUTS, node.input) if name}
    by_name = dict(zip(graph_out, outs))
    expected = {role: np.asarray(by_name[name]) for role, name in zip(OUTPUTS, node.output) if name}
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    return inputs, expected, attrs


def command_line(exe, folder, inputs, expected, attrs, device):
    """The `clattn sdpa` command of a case, with its files written to folder; and how to read back."""
    f = lambda name: str(folder / name)  # noqa: E731
    q, k, v = inputs["Q"], inputs["K"], inputs["V"]
    cmd = [exe, "sdpa", "--q", f("q.npy"), "--k", f("k.npy"), "--v", f("v.npy"), "--out", f("y.npy")]
    for name, a in (("q", q), ("k", k), ("v", v)):
        save_tensor(folder / f"{name}.npy", a)
    if is_bf16(q):
        cmd += ["--bf16", "--out-dtype", "bfloat16"]
    elif q.dtype == np.float16:
        cmd += ["--out-dtype", "float16"]
    packed = q.ndim == 3
    if packed:
        cmd += ["--heads", str(attrs["q_num_heads"]), "--kv-heads", str(attrs["kv_num_heads"])]
    elif k.shape[1] != q.shape[1]:
        cmd += ["--kv-heads", str(k.shape[1])]
    L = q.shape[1] if packed else q.shape[2]
    if "attn_mask" in inputs:
        mask = inputs["attn_mask"]
        if is_bf16(mask):
            mask = mask.astype(np.float32)  # exact
        if mask.ndim == 1:
            mask = mask.reshape(1, -1)
        np.save(folder / "mask.npy", mask)
        cmd += ["--mask", f("mask.npy")]
    past_len = 0
    if "past_key" in inputs:
        for name, a in (("past_k", inputs["past_key"]), ("past_v", inputs["past_value"])):
            if packed:  # (B, N, P, D) → K's layout (B, P, N·D)
                a = a.transpose(0, 2, 1, 3).reshape(a.shape[0], a.shape[2], -1)
            save_tensor(folder / f"{name}.npy", a)
        past_len = inputs["past_key"].shape[2]
        cmd += ["--past-k", f("past_k.npy"), "--past-v", f("past_v.npy")]
    if "present_key" in expected:
        cmd += ["--present-k", f("present_k.npy"), "--present-v", f("present_v.npy")]
    left, right = attrs.get("left_window_size", -1), attrs.get("right_window_size", -1)
    window = left >= 0 or right >= 0
    causal = bool(attrs.get("is_causal", 0))
    if "nonpad_kv_seqlen" in inputs:
        lengths = inputs["nonpad_kv_seqlen"].astype(np.int64)
        np.save(folder / "lengths.npy", lengths)
        cmd += ["--key-lengths", f("lengths.npy")]
        if causal or window:
            np.save(folder / "offsets.npy", lengths - L)
            cmd += ["--offsets", f("offsets.npy")]
    elif past_len and (causal or window):
        cmd += ["--offset", str(past_len)]
    if causal:
        cmd += ["--causal"]
    if window:
        cmd += ["--window", f"{left},{right}"]
    if "scale" in attrs:
        cmd += ["--scale", repr(float(attrs["scale"]))]
    if attrs.get("softcap", 0.0):
        cmd += ["--softcap", repr(float(attrs["softcap"]))]
    if "qk_matmul_output" in expected:
        cmd += ["--scores", f"{SCORE_MODES[attrs.get('qk_matmul_output_mode', 0)]}:{f('qk.npy')}"]
    precision = attrs.get("softmax_precision")
    if precision == DOUBLE:
        cmd += ["--softmax-double"]
    elif precision not in (None, FLOAT):
        raise NotExpressible(f"softmax_precision {onnx.TensorProto.DataType.Name(precision)}")
    if device:
        cmd += ["--device", device]
    return cmd


def read_outputs(folder, inputs, expected):
    """The tool's outputs in ONNX's shapes and types."""
    packed = inputs["Q"].ndim == 3

    def typed(a, like):  # bfloat16 comes back as '<u2' bit patterns
        return a.view(like.dtype) if is_bf16(like) and a.dtype == np.uint16 else a.astype(like.dtype)

    got = {"Y": typed(np.load(folder / "y.npy"), expected["Y"])}
    if "present_key" in expected:
        for role, name in (("present_key", "present_k"), ("present_value", "present_v")):
            a = np.load(folder / f"{name}.npy")
            if packed:  # (B, T, N·D) → (B, N, T, D)
                n = expected[role].shape[1]
                a = a.reshape(a.shape[0], a.shape[1], n, -1).transpose(0, 2, 1, 3)
            got[role] = typed(a, expected[role])
    if "qk_matmul_output" in expected:
        got["qk_matmul_output"] = np.load(folder / "qk.npy").astype(expected["qk_matmul_output"].dtype)
    return got


def compare(got, expected, rtol, atol):
    """onnx.backend.test.runner's assert_similar_outputs, output by output; '' when all agree."""
    for role, ref in expected.items():
        out = got[role]
        try:
            np.testing.assert_array_equal(out.shape, ref.shape, err_msg=f"{role} has incorrect shape")
            np.testing.assert_equal(out.dtype, ref.dtype)
            r = rtol
            if out.dtype.name == "bfloat16":
                r = max(rtol, 2**-6)
                out, ref = out.astype(np.float32), ref.astype(np.float32)
            np.testing.assert_allclose(out, ref, rtol=r, atol=atol)
        except AssertionError as e:
            lines = [line for line in str(e).splitlines() if line.strip()]
            return f"{role}: " + " | ".join(lines[:4])
    return ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--exe", default=str(ROOT / "build" / "tools" / "clattn"))
    ap.add_argument("--device", default=None)
    ap.add_argument("-k", dest="only", default=None, help="only the cases whose name contains this")
    ap.add_argument("-v", action="store_true", help="print each case's command line")
    args = ap.parse_args()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (other operators' exporters warn as they are collected)
        cases = [c for c in collect_testcases("Attention") if not c.name.endswith("_expanded")]
    if args.only:
        cases = [c for c in cases if args.only in c.name]
    passed, failed = [], []
    for case in cases:
        inputs, expected, attrs = case_io(case)
        with tempfile.TemporaryDirectory(prefix="clattn-onnx-") as tmp:
            folder = pathlib.Path(tmp)
            try:
                cmd = command_line(args.exe, folder, inputs, expected, attrs, args.device)
            except NotExpressible as e:
                failed.append((case.name, f"not expressible: {e}"))
                print(f"FAIL {case.name}: not expressible: {e}")
                continue
            if args.v:
                print("  " + " ".join(os.path.relpath(c, tmp) if c.startswith(tmp) else c for c in cmd))
            run = subprocess.run(cmd, capture_output=True, text=True)
            if run.returncode != 0:
                why = f"clattn exited {run.returncode}: {run.stderr.strip().splitlines()[-1] if run.stderr.strip() else ''}"
            else:
                why = compare(read_outputs(folder, inputs, expected), expected, case.rtol, case.atol)
        (failed if why else passed).append((case.name, why))
        print(f"{'FAIL' if why else 'ok  '} {case.name}{': ' + why if why else ''}")
    print(f"{len(passed)} of {len(cases)} ONNX Attention cases pass through the tool (onnx {onnx.__version__})")
    for name, why in failed:
        print(f"  failed: {name}: {why}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
