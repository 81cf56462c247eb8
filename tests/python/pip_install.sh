#!/bin/sh
# meson test python-pip-install: `pip install .` of this source tree into a fresh virtual environment
# (meson-python and meson from PyPI build the extension with the library in it), then what the README's
# Python section runs: python -m clattn devices and its tutorial example (the README's own block). $1: the source tree, $2: a
# scratch folder.
set -eu
source_dir=$1 scratch=$2
rm -rf "$scratch"
python3 -m venv "$scratch/venv"
"$scratch/venv/bin/pip" install -q --disable-pip-version-check numpy "$source_dir"
cd "$scratch" # (not the source tree: the installed package must be the one imported)
"$scratch/venv/bin/python" -m clattn devices
"$scratch/venv/bin/python" - "$source_dir/README.md" <<'PY'
import re
import sys

import numpy as np

# The README's Python example, as written there (the block after its marker), then its result checked.
text = open(sys.argv[1], encoding="utf-8").read()
block = re.search(r"<!-- readme-python-example -->\n```python\n(.*?)```", text, re.S).group(1)
scope = {}
exec(compile(block, "README.md (Python example)", "exec"), scope)
tutorial_row0 = [0.2480, 0.2509, 0.2499, 0.2512]
assert np.all(np.abs(scope["weights"][0, 0, 0] - tutorial_row0) <= 0.5e-4 + 1e-7), scope["weights"]
import clattn
import clattn._clattn as ext
assert ext.__file__.endswith(".abi3.so") and "site-packages" in ext.__file__, ext.__file__
print("installed:", clattn.__file__, ext.__file__.rsplit("/", 1)[-1])
PY
rm -rf "$scratch"
