#!/usr/bin/env python3
"""tests/data/ggml_blocks.h: llama.cpp's own q8_0 and q4_0 bytes of a fixed set of float32 rows, for
tests/test_ggml_blocks.c (CLATTN_Q8_0 / CLATTN_Q4_0 must read ggml's blocks as they are, and write them
as ggml does, ties apart).

A maintainer's script, run by hand and in no test or CI job (the header it writes is committed, so that
CI needs no gguf). It needs numpy and llama.cpp's Python package gguf, whose gguf.quants holds numpy
versions of ggml's quantize_row_q8_0_ref / quantize_row_q4_0_ref and their dequantisation; it first
checks those against a transliteration of ggml-quants.c's C loops below (float32 scalars, in C's
order), so that the header holds what ggml's C writes:

    .venv-bench/bin/pip install gguf
    .venv-bench/bin/python tools/scripts/make_ggml_fixture.py [--out tests/data/ggml_blocks.h]

The rows (ROWS × D = 4 × 64, two blocks each) hold: plain normal values; a block with a large outlier
and an all-zero block; a q8_0 block whose every value lies exactly halfway between two steps (d = 1/8:
x·id = k + ½, where ggml's roundf rounds away from zero and clattn to even) and a q4_0 block of exact
and near halves (d = 1, id = 1: x + 8.5 is whole, or rounds to whole in float); tiny values (fp16
subnormal scales) and a block whose largest magnitude comes twice with opposite signs (q4_0 keeps the
first).
"""
import argparse
import math
import os
import sys
from importlib.metadata import version

import numpy as np

try:
    from gguf.quants import Q4_0, Q8_0
except ImportError:  # pragma: no cover
    sys.exit("make_ggml_fixture.py needs llama.cpp's gguf package: pip install gguf")

ROWS, D, BLOCK = 4, 64, 32
SEED = 38


def rows():
    rng = np.random.default_rng(SEED)
    f = np.float32
    x = np.zeros((ROWS, D), dtype=f)
    # row 0: plain values
    x[0] = rng.standard_normal(D).astype(f)
    # row 1: a block with a large outlier, then an all-zero block (+0.0 only: ggml's C starts its q4_0
    # maximum at +0.0, numpy at the first value)
    x[1, :32] = (0.5 * rng.standard_normal(32)).astype(f)
    x[1, 5] = f(-37.25)
    # row 2, block 0: q8_0 ties. max |x| = 15.875 = 127/8, so d = 1/8 and id = 8 exactly: x = (k + ½)/8
    k = rng.integers(-126, 126, size=32)
    x[2, :32] = ((k + 0.5) / 8).astype(f)
    x[2, 0] = f(15.875)
    x[2, 9] = f(-15.875)
    x[2, 17] = f(0.0625)   # ½: ggml 1, even 0
    x[2, 18] = f(-0.0625)  # −½: ggml −1, even 0
    x[2, 30] = f(0.3)      # no tie
    # row 2, block 1: q4_0 ties. The first largest magnitude is −8, so d = 1 and id = 1: x + 8.5 is whole
    # for x = k + ½, and rounds to whole in float for x a hair off a half.
    x[2, 32:] = (np.arange(32) % 16 - 7.5).astype(f)  # −7.5 … 7.5, twice
    x[2, 32] = f(-8.0)
    x[2, 40] = np.nextafter(f(0.5), f(0))             # 0.49999997: + 8.5 rounds to 9
    x[2, 41] = np.nextafter(f(-1.5), f(-2))           # −1.5000001: + 8.5 rounds to 7
    x[2, 42] = np.nextafter(f(2.5), f(3))             # 2.5000002
    x[2, 43] = f(0.25)
    # row 3, block 0: tiny values (the fp16 scales are subnormal: d < 2^-14)
    x[3, :32] = (1e-4 * rng.standard_normal(32)).astype(f)
    # row 3, block 1: +3 and later −3, the largest magnitude twice; q4_0 keeps the first (+3: d = −0.375)
    x[3, 32:] = np.clip(0.8 * rng.standard_normal(32), -2.9, 2.9).astype(f)
    x[3, 35] = f(3.0)
    x[3, 52] = f(-3.0)
    return x


def fp16_bytes(d):
    return bytes(np.array([d], dtype=np.float32).astype(np.float16).view(np.uint8))


def c_q8_0(block):
    """ggml-quants.c's quantize_row_q8_0_ref for one block, in float32 scalars."""
    f = np.float32
    amax = f(0)
    for v in block:
        amax = max(amax, abs(f(v)))
    d = f(amax / f(127))
    idv = f(f(1) / d) if d else f(0)
    qs = []
    for v in block:
        x0 = f(f(v) * idv)
        r = math.floor(abs(float(x0)) + 0.5)  # roundf: halves away from zero (exact in double)
        qs.append((-r if x0 < 0 else r) & 0xFF)
    return fp16_bytes(d) + bytes(qs), idv


def c_q4_0(block):
    """ggml-quants.c's quantize_row_q4_0_ref for one block, in float32 scalars."""
    f = np.float32
    amax, mx = f(0), f(0)
    for v in block:
        if amax < abs(f(v)):
            amax, mx = abs(f(v)), f(v)
    d = f(mx / f(-8))
    idv = f(f(1) / d) if d else f(0)
    q = [min(15, int(np.trunc(f(f(f(v) * idv) + f(8.5))))) for v in block]
    return fp16_bytes(d) + bytes(q[j] | (q[j + 16] << 4) for j in range(16)), idv


def c_array(kind, name, values, per_line, fmt):
    out = [f"static const {kind} {name}[{len(values)}] = {{"]
    for i in range(0, len(values), per_line):
        out.append("    " + ", ".join(fmt(v) for v in values[i:i + per_line]) + ",")
    out.append("};")
    return out


def hexf(v):
    v = float(v)  # exact: C11 hexadecimal floats, mantissa trimmed ("0x1.8p-1f")
    if v == 0:
        return "-0.0f" if math.copysign(1, v) < 0 else "0.0f"
    mant, exp = v.hex().split("p")
    mant = mant.rstrip("0").rstrip(".")
    return f"{mant}p{exp}f"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "..", "..", "tests", "data", "ggml_blocks.h"))
    args = ap.parse_args()

    x = rows()
    q8 = Q8_0.quantize(x)  # (ROWS, D / 32 · 34) bytes
    q4 = Q4_0.quantize(x)
    deq8 = Q8_0.dequantize(q8)
    deq4 = Q4_0.dequantize(q4)
    assert q8.dtype == np.uint8 and q8.shape == (ROWS, D // BLOCK * 34)
    assert q4.dtype == np.uint8 and q4.shape == (ROWS, D // BLOCK * 18)
    assert deq8.dtype == np.float32 and deq4.dtype == np.float32

    # gguf.quants against ggml's C loops, block by block, and ggml's x·id (what each quant rounds)
    blocks = x.reshape(-1, BLOCK)
    t8, t4 = np.zeros_like(blocks), np.zeros_like(blocks)
    for i, b in enumerate(blocks):
        c8, id8 = c_q8_0(b)
        c4, id4 = c_q4_0(b)
        assert c8 == bytes(q8.reshape(-1, 34)[i]), f"q8_0 block {i}: gguf.quants differs from ggml's C"
        assert c4 == bytes(q4.reshape(-1, 18)[i]), f"q4_0 block {i}: gguf.quants differs from ggml's C"
        t8[i] = b * id8
        t4[i] = b * id4
    # the dequantised values are exact products (≤ 8 bits × fp16's 11): ggml's dequantize_row_* in C
    for q, deq, size, sub in ((q8, deq8, 34, 0), (q4, deq4, 18, 8)):
        qb = q.reshape(-1, size)
        dd = qb[:, :2].copy().view(np.float16).astype(np.float64)
        if size == 34:
            qq = qb[:, 2:].view(np.int8).astype(np.float64)
        else:
            qq = np.concatenate([qb[:, 2:] & 15, qb[:, 2:] >> 4], axis=1).astype(np.float64) - sub
        assert np.array_equal((dd * qq).reshape(ROWS, D), deq.astype(np.float64))
    ties8 = int(np.sum(t8 - np.floor(t8) == 0.5))
    ties4 = int(np.sum(t4 - np.floor(t4) == 0.5))

    lines = [
        "/* GENERATED by tools/scripts/make_ggml_fixture.py: do not edit. Regenerate with",
        " *     .venv-bench/bin/pip install gguf",
        " *     .venv-bench/bin/python tools/scripts/make_ggml_fixture.py",
        f" * (gguf {version('gguf')}, numpy "
        f"{np.__version__}, seed {SEED}). llama.cpp's q8_0 and q4_0 blocks of {ROWS} float32 rows of",
        f" * {D} values ({D // BLOCK} blocks a row, rows one after another), as gguf.quants writes them — "
        "checked by",
        " * the script against ggml-quants.c's quantize_row_q8_0_ref / quantize_row_q4_0_ref — with ggml's",
        " * dequantised values and, per value, the x·id that ggml rounds (x times its block's 1/d, float32):",
        f" * {ties8} of q8_0's and {ties4} of q4_0's lie exactly on a half. */",
        "#ifndef CLATTN_TESTS_GGML_BLOCKS_H",
        "#define CLATTN_TESTS_GGML_BLOCKS_H",
        "",
        f"#define GGML_ROWS {ROWS}",
        f"#define GGML_D {D}",
        "",
        "/* The source rows (row 0 plain; 1 an outlier, then zeros; 2 q8_0 ties, then q4_0 ties; 3 tiny, then ±3). */",
    ]
    lines += c_array("float", "ggml_src", x.ravel(), 4, hexf)
    lines += ["", "/* ggml's bytes: block_q8_0 (fp16 d, 32 int8) and block_q4_0 (fp16 d, 16 bytes of nibbles). */"]
    lines += c_array("unsigned char", "ggml_q8_0", q8.ravel(), 17, lambda v: f"0x{int(v):02x}")
    lines += c_array("unsigned char", "ggml_q4_0", q4.ravel(), 18, lambda v: f"0x{int(v):02x}")
    lines += ["", "/* ggml's dequantised values (q·d, (q − 8)·d). */"]
    lines += c_array("float", "ggml_q8_0_values", deq8.ravel(), 4, hexf)
    lines += c_array("float", "ggml_q4_0_values", deq4.ravel(), 4, hexf)
    lines += ["", "/* x·id per value, as ggml computes it before rounding (q8_0: roundf; q4_0: (int)(x·id + 8.5f)). */"]
    lines += c_array("float", "ggml_q8_0_t", t8.ravel(), 4, hexf)
    lines += c_array("float", "ggml_q4_0_t", t4.ravel(), 4, hexf)
    lines += ["", "#endif", ""]
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines))
    print(f"wrote {args.out}: q8_0 ties {ties8}, q4_0 ties {ties4}")


if __name__ == "__main__":
    main()
