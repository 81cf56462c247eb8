#!/bin/sh
# tests/reference_onnx_check.sh VENV_PYTHON CHECK_SCRIPT [ARGS...]: the fp64 reference that every numeric
# suite compares with (tools/reference) against ONNX's own reference implementation of Attention and a
# numpy one (tools/scripts/check_reference_onnx.py), run with the Python of the test virtual environment
# (.venv-test, where tools/setup.sh installs numpy and onnx from PyPI). Without that environment: a
# failure in CI (CI=true), where setup.sh must have made it, and meson's SKIP (77) elsewhere.
set -u
[ $# -ge 2 ] || { echo "usage: $0 VENV_PYTHON CHECK_SCRIPT [ARGS...]" >&2; exit 2; }
python=$1
shift
if ! "$python" -c 'import numpy, onnx' 2>/dev/null; then
    why="$python cannot import numpy and onnx: run tools/setup.sh (it makes .venv-test and pip-installs them)"
    case "${CI:-}" in
    true | 1) echo "FAIL: $why" >&2; exit 1 ;;
    *) echo "SKIP: $why" >&2; exit 77 ;;
    esac
fi
exec "$python" "$@"
