#!/bin/sh
# tests/oclgrind_suite.sh OCLGRIND_ICD_LIBRARY TEST_PROGRAM: a check suite run on oclgrind's simulated
# device alone, with its checks on (accesses out of bounds, data races, API misuse): any message oclgrind
# logs fails the run, as does a failed check. For the suites whose kernels oclgrind_check.sh's
# `clattn devices --check` does not reach (programmable attention's: the caller's functions compiled in).
set -eu
[ $# -eq 2 ] || { echo "usage: $0 OCLGRIND_ICD_LIBRARY TEST_PROGRAM" >&2; exit 2; }
[ -f "$1" ] || { echo "oclgrind: $1 not found: install Debian's oclgrind package (tools/setup.sh does)" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/clattn-oclgrind-suite.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/vendors"
echo "$1" >"$tmp/vendors/oclgrind.icd"
export OCL_ICD_VENDORS="$tmp/vendors" OCLGRIND_DATA_RACES=1 OCLGRIND_CHECK_API=1 CLATTN_CACHE=0
export CLATTN_REQUIRE_DEVICE=1 OCLGRIND_LOG="$tmp/oclgrind.log"
fail=0
"$2" || fail=1
if [ -s "$tmp/oclgrind.log" ]; then
    echo "oclgrind reported:"
    head -c 20000 "$tmp/oclgrind.log"
    fail=1
else
    echo "oclgrind: no error reported"
fi
exit "$fail"
