#!/bin/sh
# tests/two_implementations.sh POCL_ICD RUSTICL_ICD TEST_PROGRAM [CASE]: a check suite (its tcase CASE alone, when
# given) with PoCL's and Mesa rusticl's (llvmpipe) devices both visible, so that one call can span two OpenCL
# implementations (a device group: tests/test_reproducible.c's "group").
set -eu
[ $# -ge 3 ] || { echo "usage: $0 POCL_ICD RUSTICL_ICD TEST_PROGRAM [CASE]" >&2; exit 2; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/clattn-two.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/vendors"
cp "$1" "$tmp/vendors/pocl.icd"
cp "$2" "$tmp/vendors/rusticl.icd"
export OCL_ICD_VENDORS="$tmp/vendors" RUSTICL_ENABLE=llvmpipe CLATTN_REQUIRE_DEVICE=1 CLATTN_CACHE=0
[ $# -lt 4 ] || export CK_RUN_CASE="$4"
"$3"
