#!/bin/sh
# meson test python (and python-torch): the Python package's pytest suite against the extension built in
# the build folder. $1: the interpreter (a virtual environment's, with numpy and pytest: tools/setup.sh
# makes .venv-test), $2: the build folder holding clattn/ (build/src/python), then pytest's arguments.
set -eu
interpreter=$1 package_dir=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
if [ ! -x "$interpreter" ] || ! "$interpreter" -c 'import numpy, pytest' 2>/dev/null; then
    echo "python suite: $interpreter cannot import numpy and pytest (run tools/setup.sh)" >&2
    exit 1
fi
cd "$here"
PYTHONPATH="$package_dir:$here" exec "$interpreter" -m pytest -q -p no:cacheprovider -W error::pytest.PytestWarning "$@"
