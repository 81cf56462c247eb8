#!/bin/sh
# tests/oclgrind_check.sh CLATTN_EXE OCLGRIND_ICD_LIBRARY: every kernel of every path on a second OpenCL
# implementation, oclgrind's simulated device, with its checks on (memory accesses out of bounds,
# data races, API misuse). Any message oclgrind logs fails the test, as does a wrong result.
#   1. `clattn devices --check`: staged, fused and decode paths on odd shapes with causal, key-length and
#      additive masks and every variant, then float16, bfloat16 and int8 storage (typed loads and
#      stores, the append's rounding and quantisation), against the fp64 reference;
#      oclgrind is device class gpu (src/runtime/device.h), so these are the kernels' GPU shapes;
#   2. the same in the CPU shapes (CLATTN_TUNING: class cpu, VEC 8 as on AVX2 machines): the fused
#      kernel with the rows in the lanes (cl/flash_lanes.cl), the decode kernels' in-place walk with
#      prefetching (where a paged cache's block table was once read past the call's blocks), the blocked
#      scores; then the fused kernel's other CPU shape, rows along d (rows per work-item, key vectors);
#   3. the first with work groups limited to 8 items (the fused kernel's tiles shrink to fit);
#   4. `clattn demo` there too: clattn's own matmul (CLBlast cannot launch on such a device) and the
#      staged kernels on tiny work groups, against the tutorial's printed weights.
# PART (optional, default all) runs one of them alone: gpu-shapes (1), cpu-shapes and cpu-rows-along-d
# (2), small-work-groups (3 and 4). Meson runs each part as a test of its own, so that each keeps a wide
# margin under its time limit on a machine that other work keeps busy.
set -eu
[ $# -eq 2 ] || [ $# -eq 3 ] || { echo "usage: $0 CLATTN_EXE OCLGRIND_ICD_LIBRARY [PART]" >&2; exit 2; }
exe=$1 part=${3:-all}
case $part in
all | gpu-shapes | cpu-shapes | cpu-rows-along-d | small-work-groups) ;;
*) echo "$0: unknown part $part" >&2; exit 2 ;;
esac
want() { [ "$part" = all ] || [ "$part" = "$1" ]; }
[ -f "$2" ] || { echo "oclgrind: $2 not found: install Debian's oclgrind package (tools/setup.sh does)" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/clattn-oclgrind.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/vendors"
echo "$2" >"$tmp/vendors/oclgrind.icd"
# Only oclgrind's platform (a vendor folder holding its one ICD file), with its checks on; clattn's
# program cache off, so that oclgrind builds every kernel itself.
export OCL_ICD_VENDORS="$tmp/vendors"
export OCLGRIND_DATA_RACES=1 OCLGRIND_CHECK_API=1 CLATTN_CACHE=0

fail=0
run() { # name, then the command's extra environment and arguments
    name=$1
    shift
    log="$tmp/$name.log"
    if ! env OCLGRIND_LOG="$log" "$@" >"$tmp/$name.out" 2>&1; then
        echo "oclgrind: $name: FAILED (exit status)"; cat "$tmp/$name.out"; fail=1
    fi
    if ! grep -q "Oclgrind Simulator" "$tmp/$name.out"; then
        echo "oclgrind: $name: did not run on the Oclgrind Simulator"; cat "$tmp/$name.out"; fail=1
    fi
    if [ -s "$log" ]; then
        echo "oclgrind: $name: oclgrind reported:"; cat "$log"; fail=1
    else
        echo "oclgrind: $name: no error reported"
    fi
}

if want gpu-shapes; then
    run devices-check "$exe" devices --check
    grep -q "^PASS" "$tmp/devices-check.out" || { echo "oclgrind: devices --check did not pass"; fail=1; }
    grep "^PASS\|^FAIL" "$tmp/devices-check.out" || true
fi
if want cpu-shapes; then
    run devices-check-cpu-shapes CLATTN_TUNING="class=cpu,fused=4x64x2x8x2,decode=4x16x32x1x8x4,staged=4x4x6x0x8" \
        "$exe" devices --check
    grep -q "^PASS" "$tmp/devices-check-cpu-shapes.out" || { echo "oclgrind: devices --check (CPU shapes) did not pass"; fail=1; }
fi
if want cpu-rows-along-d; then
    run devices-check-cpu-rows-along-d CLATTN_TUNING="class=cpu,fused=64x64x4x8x1,decode=4x16x32x1x8x4,staged=4x4x6x0x8" \
        "$exe" devices --check
    grep -q "^PASS" "$tmp/devices-check-cpu-rows-along-d.out" ||
        { echo "oclgrind: devices --check (CPU shapes, rows along d) did not pass"; fail=1; }
fi
if want small-work-groups; then
    run devices-check-small-work-groups OCLGRIND_MAX_WGSIZE=8 "$exe" devices --check
    grep -q "^PASS" "$tmp/devices-check-small-work-groups.out" || { echo "oclgrind: devices --check (8) did not pass"; fail=1; }
    run demo-small-work-groups OCLGRIND_MAX_WGSIZE=8 "$exe" demo
    # The tutorial's printed weights, to all four decimals (rows 我 and 智能).
    for row in "0.2480  0.2509  0.2499  0.2512" "0.2479  0.2516  0.2485  0.2520"; do
        grep -q "$row" "$tmp/demo-small-work-groups.out" || { echo "oclgrind: demo: weights row $row missing"; fail=1; }
    done
fi
exit "$fail"
