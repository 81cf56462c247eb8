"""clattn: scaled dot-product and multi-head attention on any OpenCL device.

A Python face for the clattn C library (its extension module, ``clattn._clattn``, is C against CPython's
limited API). numpy arrays and PyTorch CPU tensors go in (DLPack, no copy) and the same kind comes out:

    >>> import numpy as np, clattn
    >>> q = k = v = np.random.rand(1, 8, 128, 64).astype(np.float32)
    >>> out = clattn.scaled_dot_product_attention(q, k, v, is_causal=True)

``scaled_dot_product_attention`` takes PyTorch's signature where the two overlap. Failures of the library
raise ``clattn.Error`` (``.status``, ``.status_name`` and the library's detail; a RuntimeError); what
Python can check itself raises ``TypeError``, or ``clattn.ArgumentError`` (a ValueError and a RuntimeError,
as PyTorch raises RuntimeError for the same arguments) naming the argument.
"""
import sys as _sys

from . import _clattn, _torch_ops
from ._arrays import _options
from ._attention import (_attention_backward, _attention_forward, _NumpyArrays, merge, multi_head_attention,
                         scaled_dot_product_attention)
from ._calls import (ArgumentError, CallTimeoutError, Context, ContextBusyError, Error, default_context, devices,
                     set_default_context, wait_abandoned)
from ._flex import BlockMask, TranslationError, create_block_mask, flex_attention
from ._kvcache import Format, KVCache, formats
from ._sparse import sparse_attention

__all__ = ["ArgumentError", "BlockMask", "CallTimeoutError", "Context", "ContextBusyError", "Error", "Format", "KVCache",
           "TranslationError", "create_block_mask", "devices", "default_context", "flex_attention", "formats", "merge",
           "multi_head_attention", "register_torch_ops", "scaled_dot_product_attention", "set_default_context",
           "sparse_attention", "wait_abandoned"]
__version__ = _clattn.library_version()

# torch.ops.clattn.sdpa for torch.compile and torch.export: defined now when PyTorch is already imported, else
# by register_torch_ops() (before compiling a model; clattn never imports PyTorch itself)
register_torch_ops = _torch_ops.register
if "torch" in _sys.modules:
    register_torch_ops()
