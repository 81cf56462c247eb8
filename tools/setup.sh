#!/bin/sh
# Installs the Debian packages clattn needs (when missing; as root, or through sudo), then configures
# and builds into build/. Safe to run again: it only installs what is missing and rebuilds what changed.
set -eu
cd "$(dirname "$0")/.." || exit 1

packages="gcc libc6-dev python3 python3-venv python3-dev pkg-config meson ninja-build ocl-icd-opencl-dev opencl-headers libclblast-dev check pocl-opencl-icd mesa-opencl-icd cmake g++ oclgrind libopenmpi-dev openmpi-bin"
missing=""
for p in $packages; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
    echo "setup: installing$missing" >&2
    $sudo apt-get update -qq
    # shellcheck disable=SC2086 # the package list is meant to split into words
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >&2
fi

# The reference check (meson test reference-onnx) needs numpy and onnx, which Debian does not package
# (onnx), and the Python package's suite (meson test python) numpy, pytest and pyopencl (its device-array
# tests; Debian's python3-pyopencl is for the system's Python, not a virtual environment's): a virtual
# environment .venv-test in the repository gets them from PyPI, at versions known to work (onnx 1.20.1's
# Attention cannot broadcast a key-length mask over the batch). Offline, outside CI, a failure here only
# warns: those tests then fail saying so; in CI (CI=true) it stops the setup.
test_venv=.venv-test
numpy_version=2.3.5 onnx_version=1.23.2 pytest_version=9.2.0 pyopencl_version=2026.1.4
if ! "$test_venv/bin/python" -c 'import numpy, onnx, pytest, pyopencl, sys
sys.exit([numpy.__version__, onnx.__version__, pytest.__version__, pyopencl.VERSION_TEXT] != sys.argv[1:])' \
        "$numpy_version" "$onnx_version" "$pytest_version" "$pyopencl_version" 2>/dev/null; then
    echo "setup: pip-installing numpy $numpy_version, onnx $onnx_version, pytest $pytest_version and pyopencl" \
        "$pyopencl_version into $test_venv" >&2
    if ! { python3 -m venv "$test_venv" >&2 &&
        "$test_venv/bin/pip" install -q --disable-pip-version-check "numpy==$numpy_version" "onnx==$onnx_version" \
            "pytest==$pytest_version" "pyopencl==$pyopencl_version" >&2; }; then
        case "${CI:-}" in
        true | 1) echo "setup: $test_venv could not be made (CI=true: the reference check and the Python suite must run)" >&2; exit 1 ;;
        *) echo "setup: warning: $test_venv could not be made: meson test reference-onnx will skip, python fail" >&2 ;;
        esac
    fi
fi

[ -f build/build.ninja ] || meson setup build >&2
meson compile -C build >&2
