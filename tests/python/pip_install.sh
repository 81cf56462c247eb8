#!/bin/sh
# meson test python-pip-install: `pip install .` of this source tree into a fresh virtual environment
# (meson-python and meson from PyPI build the extension with the library in it), then what the README's
# Python section runs: python -m clattn devices and the tutorial's example. $1: the source tree, $2: a
# scratch folder.
set -eu
source_dir=$1 scratch=$2
rm -rf "$scratch"
python3 -m venv "$scratch/venv"
"$scratch/venv/bin/pip" install -q --disable-pip-version-check numpy "$source_dir"
cd "$scratch" # (not the source tree: the installed package must be the one imported)
"$scratch/venv/bin/python" -m clattn devices
"$scratch/venv/bin/python" - <<'PY'
import numpy as np
import clattn

x = np.array([[0.8, 0.1, 0.3, 0.2, 0.5, 0.1, 0.0, 0.4], [0.1, 0.9, 0.2, 0.1, 0.3, 0.6, 0.2, 0.1],
              [0.3, 0.2, 0.8, 0.4, 0.1, 0.2, 0.5, 0.3], [0.1, 0.1, 0.3, 0.9, 0.2, 0.1, 0.4, 0.6]], np.float32)
np.random.seed(42)
w_q, w_k, w_v = (np.random.randn(8, 4).astype(np.float32) * 0.1 for _ in range(3))
q, k, v = x @ w_q, x @ w_k, x @ w_v
out, weights = clattn.scaled_dot_product_attention(q[None], k[None], v[None], weights="softmax")
assert abs(weights[0, 0, 0] - 0.2480) < 1e-4, weights
import clattn._clattn as ext
assert ext.__file__.endswith(".abi3.so") and "site-packages" in ext.__file__, ext.__file__
print("installed:", clattn.__file__, ext.__file__.rsplit("/", 1)[-1])
print(np.round(weights[0], 4))
PY
rm -rf "$scratch"
