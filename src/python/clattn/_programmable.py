"""Programmable attention from Python: mods= as source text or a .cl file, compiled once per context."""
import os as _os

from . import _clattn
from ._arrays import _tensor
from ._calls import ArgumentError, _call

_AUX_INDEX = {"length": 0, "query": 1, "key": 2, "position": 3, "head": 4, "batch": 5}

# Compiled mods per context, at most this many (the least recently used go first): the cache lives on the
# Context (Context._mods_cache), so a Context no one else holds is collected with its mods.
_MODS_PER_CONTEXT = 16


def _mods_source(source):
    """mods= as source text: a path (str or os.PathLike) names a file when one is there; a str that names no
    file is source text, unless it looks like a path (one line ending in .cl), which is refused."""
    if isinstance(source, _os.PathLike):
        path = _os.fspath(source)
    elif isinstance(source, str):
        if "\n" not in source and _os.path.isfile(source):
            path = source
        elif "\n" not in source and source.strip().endswith(".cl"):
            raise FileNotFoundError(f"mods: no file {source!r} (a .cl file's path, or the source text itself)")
        else:
            return source
    else:
        raise TypeError("mods must be OpenCL C source text or the path of a .cl file holding it (str or "
                        f"pathlib.Path), not {type(source).__name__}")
    if isinstance(path, bytes):
        path = _os.fsdecode(path)
    if not _os.path.isfile(path):
        raise FileNotFoundError(f"mods: no file {path!r}")
    with open(path, encoding="utf-8") as f:
        return f.read()


def _mods(context, source, aux, defines, deadline=None, timeout=None):
    """The compiled mods for (source, aux's names, types and indexes, defines) on a context — made once
    (compiling takes seconds on PoCL) — and the aux arrays each call writes into them: (Mods, arrays) as the
    C calls take it, or the Mods alone without aux."""
    if source is None:
        if aux or defines:
            raise ArgumentError("aux and defines belong to mods: give mods= too")
        return None
    source = _mods_source(source)
    entries, arrays = [], []
    for name, value in (aux or {}).items():
        index, length = "length", 0
        if isinstance(value, tuple):
            value, index = value
        array, _ = _tensor(value, f"aux[{name!r}]")
        if index not in _AUX_INDEX:
            raise ArgumentError(f"aux[{name!r}]: the index must be one of {sorted(_AUX_INDEX)}, not {index!r}")
        if index == "length":
            length = int(array.numel() if hasattr(array, "numel") else array.size)
        entries.append((name, array, _AUX_INDEX[index], length))
        arrays.append(array)
    if isinstance(defines, dict):
        defines = [f"{k}={v}" if v is not None else str(k) for k, v in defines.items()]
    defines = tuple(defines or ())
    for d in defines:
        if isinstance(d, str) and d.rstrip(" \t").endswith("\\"):
            # (the generated "#define NAME VALUE" line would continue onto the next line of the source)
            raise ArgumentError(f"defines: {d!r} ends in a backslash, which would join the next line of the "
                             "generated source to its #define")
    key = (source, defines, tuple((n, str(a.dtype), i, length, tuple(a.shape)) for n, a, i, length in entries))
    cache = context._mods_cache
    made = cache.pop(key, None)
    if made is None:
        made = _call(context, _clattn.Mods, (context, source, entries, list(defines)), deadline, timeout, True)
        while len(cache) >= max(1, _MODS_PER_CONTEXT):
            del cache[next(iter(cache))]
    cache[key] = made  # (the most recently used last)
    # The call writes the aux tensors itself, in its critical section (another thread's call with other aux
    # cannot land between the write and the call); the backward pass writes them again.
    return (made, tuple(arrays)) if arrays else made
