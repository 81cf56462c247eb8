#!/bin/sh
# tests/rusticl_check.sh CLATTN_EXE RUSTICL_ICD: the tool's conformance run on Mesa's rusticl (llvmpipe,
# RUSTICL_ENABLE=llvmpipe and OCL_ICD_VENDORS=RUSTICL_ICD set by meson): `clattn devices --check` (staged,
# fused and decode paths, every mask kind and variant, float16, bfloat16 and int8 storage, against the
# fp64 reference) and the demo (clattn's GEMM or CLBlast, the staged kernels) against the tutorial's
# printed weights. It fails unless it ran on rusticl's llvmpipe device.
set -eu
[ $# -eq 2 ] || { echo "usage: $0 CLATTN_EXE RUSTICL_ICD" >&2; exit 2; }
exe=$1
[ -f "$2" ] || { echo "rusticl: $2 not found: install Debian's mesa-opencl-icd (tools/setup.sh does)" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/clattn-rusticl.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

fail=0
"$exe" devices >"$tmp/devices.out" 2>&1 || fail=1
cat "$tmp/devices.out"
grep -q "Platform 0: rusticl" "$tmp/devices.out" && grep -q "llvmpipe" "$tmp/devices.out" ||
    { echo "rusticl: the device is not rusticl's llvmpipe"; fail=1; }
"$exe" devices --check >"$tmp/check.out" 2>&1 || fail=1
grep -v "^MESA: warning" "$tmp/check.out" || true
grep -q "^PASS.*llvmpipe" "$tmp/check.out" || { echo "rusticl: devices --check did not pass"; fail=1; }
"$exe" demo >"$tmp/demo.out" 2>&1 || { cat "$tmp/demo.out"; fail=1; }
# The tutorial's printed weights, to all four decimals (rows 我 and 智能).
for row in "0.2480  0.2509  0.2499  0.2512" "0.2479  0.2516  0.2485  0.2520"; do
    grep -q "$row" "$tmp/demo.out" || { echo "rusticl: demo: weights row $row missing"; fail=1; }
done
[ "$fail" -eq 0 ] && echo "rusticl: devices --check and demo passed"
exit "$fail"
