"""KV caches for decoding, kept on the device, in any of clattn's storage formats."""
from collections import namedtuple as _namedtuple

from . import _clattn, _device
from ._arrays import _empty, _numpy, _options, _sequence, _tensor, _with_options
from ._calls import ArgumentError, _call, _context

Format = _namedtuple("Format", "name block block_bytes row_scales kv_only tokens")
DeviceArrays = _namedtuple("DeviceArrays", "k v k_scales v_scales block_table")
DeviceArrays.__doc__ = """A KVCache's storage as pyopencl arrays (KVCache.device_arrays): k and v, the row scales (None
where the formats keep none) and a paged cache's block table (None dense)."""
Format.__doc__ = """A storage format: its name; values per block (1 for the formats stored value by value) and
bytes per block (a row of D values takes D / block blocks); row_scales "none", "required" (int8: a float32 scale
per row beside the bytes) or "optional" (FP8: with scaled=True); kv_only: only K and V (caches) may have it;
tokens: 0, or the rows of a group along tokens (u4_t32, u2_t32: KIVI's keys, whose bytes are a head's rows
together — a chunk — and never a row's: block_bytes 0)."""
_FORMATS = {f[0]: Format(*f) for f in _clattn.formats()}  # (the library's table, in its order)


def formats():
    """Every storage format of the library by name (a dict of Format): what ``KVCache(dtype=...)`` takes."""
    return dict(_FORMATS)


def _format(name, what):
    try:
        return _FORMATS[name]
    except (KeyError, TypeError):
        raise ArgumentError(f"{what} must be one of {list(_FORMATS)}, not {name!r}") from None


def _bytes_array(x, what):
    """x (numpy or PyTorch, uint8 or int8) as a C-contiguous numpy uint8 array."""
    np = _numpy()
    if hasattr(x, "numpy") and not isinstance(x, np.ndarray):  # a PyTorch tensor
        x = x.detach().cpu().numpy()
    a = np.asarray(x)
    if a.dtype not in (np.uint8, np.int8):
        raise ArgumentError(f"{what}: raw bytes as uint8 (or int8), not {a.dtype}")
    return np.ascontiguousarray(a).view(np.uint8)


class KVCache:
    """A KV cache for decoding, kept on the device: ``append`` new keys and values, ``attend`` queries over
    every row held; the lengths are kept here.

    KVCache(batch, kv_heads, capacity, head_dim, v_dim=None, dtype="float32", block_size=None, context=None, *,
    k_dtype=None, v_dtype=None, scaled=False, latent=False): capacity rows per sequence; dtype any name of formats() —
    "float32", "float16", "bfloat16", "int8", ggml's "q8_0" and "q4_0", the asymmetric groups "u8_g32" …
    "u4_g128", "fp8_e4m3", "fp8_e5m2", KIVI's per-channel "u4_t32" and "u2_t32" (paged blocks of 32 rows or
    more) — for K and V, or k_dtype and v_dtype each its own (the head sizes a multiple of the format's block,
    of 4 for u4_t32/u2_t32). A float32, float16 or bfloat16 cache takes rows of its type (in numpy,
    bfloat16 as uint16 bits); any other takes float32, float16 or bfloat16 rows and the device quantises them.
    int8 keeps a float32 scale per row beside its bytes; FP8 does with scaled=True. block_size None for a dense
    cache, else a power of two from 8 to 256 for a paged one (a pool of blocks handed to each sequence as it
    grows, as vLLM keeps them). k_bytes()/v_bytes() read the bytes back, load_bytes()/from_bytes() write them.
    latent=True: MLA's latent cache (DeepSeek-V2/V3, the absorbed form) — one buffer of head_dim per row (the
    compressed 512 and the rotary 64), the values its first v_dim columns, read once for both: append(rows) takes
    the latent rows alone, attend(q) the absorbed queries (kv_heads 1, scale 1/√192 for DeepSeek's sizes); a
    float32, float16, bfloat16 or int8 cache; no shared prefixes, top-k indices or raw bytes.
    """

    def __init__(self, batch, kv_heads, capacity, head_dim, v_dim=None, dtype="float32", block_size=None,
                 context=None, *, k_dtype=None, v_dtype=None, scaled=False, prefix_capacity=0, latent=False):
        kf = _format(dtype if k_dtype is None else k_dtype, "dtype" if k_dtype is None else "k_dtype")
        vf = _format(dtype if v_dtype is None else v_dtype, "dtype" if v_dtype is None else "v_dtype")
        self.context = _context(context)
        self.batch, self.kv_heads, self.capacity = batch, kv_heads, capacity
        self.head_dim, self.v_dim = head_dim, v_dim or head_dim
        self.k_dtype, self.v_dtype = kf.name, vf.name
        self.dtype = kf.name if kf.name == vf.name else None  # (None: K and V differ)
        self.block_size, self.scaled = block_size, bool(scaled)
        self.prefix_capacity, self.latent = prefix_capacity, bool(latent)
        if self.latent and prefix_capacity:
            raise ArgumentError("latent=True: a latent cache keeps no shared prefixes (prefix_capacity 0)")
        self._cache = _clattn.KVCache(self.context, batch, kv_heads, capacity, head_dim, self.v_dim, kf.name, vf.name,
                                      block_size or 0, self.scaled, prefix_capacity, self.latent)
        self.k_row_bytes = head_dim // kf.block * kf.block_bytes  # (0 for a token format: chunks, not rows)
        self.v_row_bytes = self.v_dim // vf.block * vf.block_bytes
        self._tokens = (kf.tokens, vf.tokens)
        self._has_scales = tuple(f.row_scales == "required" or (self.scaled and f.row_scales == "optional")
                                 for f in (kf, vf))
        # numpy uint16 arrays are bfloat16 bits except for a float32 or float16 cache (which takes its own type)
        self._bf16 = not (kf.name == vf.name and not kf.kv_only) or kf.name == "bfloat16"

    @property
    def lengths(self):
        """The rows each sequence holds (a tuple of batch integers)."""
        return _call(self.context, getattr, (self._cache, "lengths"))

    @property
    def blocks_used(self):
        """Paged caches: the pool's blocks handed to sequences so far."""
        return _call(self.context, getattr, (self._cache, "blocks_used"))

    def reset(self):
        """Empty every sequence."""
        _call(self.context, self._cache.reset, ())

    def append(self, key, value=None, counts=None):
        """Append n rows to every sequence: key (batch, kv_heads, n, head_dim), value (…, v_dim); a latent
        cache's rows are key's alone (value None). counts: each sequence's rows of the n to keep (a mixed batch:
        a prefill chunk here, one decode row there; the rest are padding, written past the sequence's length
        where its next append writes); not for the token formats, which quantise groups of rows together."""
        if self.latent or value is None:
            return self._append_latent(key, value, counts)
        k, _ = _tensor(key, "key")
        v, _ = _tensor(value, "value")
        if len(k.shape) != 4 or len(v.shape) != 4 or k.shape[2] != v.shape[2]:
            raise ArgumentError(f"key {tuple(k.shape)} and value {tuple(v.shape)}: (batch, kv_heads, n, D), the same n")
        on_device = _device.is_device_array(k)
        if on_device:
            _device.before(self.context, (k, v))
        extra = () if counts is None else ([int(c) for c in counts],)
        _call(self.context, self._cache.append, (k, v, int(k.shape[2]), self._bf16) + extra)
        if on_device:  # (the rows are copied later, in the context's queue order)
            _device.after(self.context, (k, v))

    def _append_latent(self, key, value, counts):
        """append() of a latent cache: the key rows hold the values too."""
        if not self.latent or value is not None:
            raise ArgumentError("append: value None is for a latent cache (latent=True), which takes key alone"
                                if not self.latent else "append: a latent cache (MLA) takes key alone: value None")
        k, _ = _tensor(key, "key")
        if len(k.shape) != 4:
            raise ArgumentError(f"key {tuple(k.shape)}: (batch, kv_heads, n, head_dim)")
        on_device = _device.is_device_array(k)
        if on_device:
            _device.before(self.context, (k,))
        extra = () if counts is None else ([int(c) for c in counts],)
        _call(self.context, self._cache.append, (k, None, int(k.shape[2]), self._bf16) + extra)
        if on_device:
            _device.after(self.context, (k,))

    def _attend_mixed(self, query, counts, is_causal, scale, window, softcap, sinks, alibi, logit_scale, tree,
                      return_lse, algorithm, out, prefixes):
        """attend() with query_lengths: each sequence's own number of queries, packed (rows, heads, head_dim)."""
        if prefixes is not None:
            raise ArgumentError("attend: query_lengths and prefixes do not go together")
        q, torch_side = _tensor(query, "query")
        rows = sum(counts)
        if len(counts) != self.batch or len(q.shape) != 3 or q.shape[0] != rows or q.shape[2] != self.head_dim:
            raise ArgumentError(f"query {tuple(q.shape)} with query_lengths {counts}: ({rows}, heads, {self.head_dim}),"
                                f" the rows of the {self.batch} sequences packed")
        heads, longest = int(q.shape[1]), max(counts + [1])
        opts = _options(scale, 1 if is_causal else 0, window, softcap, sinks, alibi, None, None, 0, 0, algorithm, 0,
                        heads, self.batch, logit_scale)
        if tree is not None:
            opts["tree_parents"] = _sequence(tree, "tree", rows, int, "one parent per packed query row:")
        if out is None:
            out = _empty(q, torch_side, (rows, heads, self.v_dim))
        elif tuple(out.shape) != (rows, heads, self.v_dim) or out.dtype != q.dtype:
            raise ArgumentError(f"out {tuple(out.shape)} {out.dtype}: ({rows}, {heads}, {self.v_dim}) {q.dtype}")
        lse = _empty(q, torch_side, (rows, heads), "float32") if return_lse else None
        on_device = _device.is_device_array(q)
        if on_device:
            _device.before(self.context, (q, out, lse))
        _call(self.context, _with_options(self._cache.attend, opts),
              (q, out, lse, heads, longest, self._bf16, counts))
        if on_device:
            _device.after(self.context, (q, out, lse))
        return (out, lse) if return_lse else out

    def add_prefix(self, key, value):
        """Rows that several sequences share (a system prompt, a few-shot block), written once into the room
        kept by prefix_capacity: key (kv_heads, n, head_dim) or (1, kv_heads, n, head_dim), value (…, v_dim).
        Returns the prefix's id, for attend(prefixes=...). Prefixes stay until the cache goes (reset() keeps
        them)."""
        k, _ = _tensor(key, "key")
        v, _ = _tensor(value, "value")
        ks, vs = tuple(k.shape), tuple(v.shape)
        ks, vs = (ks[1:], vs[1:]) if len(ks) == 4 and len(vs) == 4 and ks[0] == vs[0] == 1 else (ks, vs)
        if len(ks) != 3 or len(vs) != 3 or ks[1] != vs[1]:
            raise ArgumentError(f"key {tuple(k.shape)} and value {tuple(v.shape)}: (kv_heads, n, D), the same n")
        on_device = _device.is_device_array(k)
        if on_device:
            _device.before(self.context, (k, v))
        made = _call(self.context, self._cache._add_prefix, (k, v, int(ks[1]), self._bf16))
        if on_device:
            _device.after(self.context, (k, v))
        return made

    def attend(self, query, *, is_causal=True, scale=None, window=None, softcap=None, sinks=None, alibi=None,
               logit_scale=None, tree=None, return_lse=False, algorithm="auto", out=None, prefixes=None,
               query_lengths=None, indices=None, scores=None, top_k=None):
        """Attention of query (batch, heads, L, head_dim) over each sequence's rows: with is_causal (the
        default) the L queries are the last L rows appended (query i sees its rows up to itself); the
        options as in scaled_dot_product_attention. Returns out (batch, heads, L, v_dim) of query's kind
        and type, or (out, lse). out: an array of that shape, kind and type to write instead (a decode loop
        then allocates nothing a step). prefixes: shared prefixes before each sequence's own rows (cascade
        attention, clattn_sdpa_cascade: each read once for all the sequences that share it) — a list of
        levels, each `batch` ids of add_prefix (level 0 for all, then sub-prefixes…); float32 queries; with
        is_causal the queries are each sequence's last L own rows and see all of their prefixes; window,
        alibi and algorithm are not taken then. tree: a draft tree over the L queries (speculative decoding's
        verification): each query's parent among them, -1 for a root, (L,) or (batch, L); the draft's rows
        appended last, each query sees the earlier rows and, of the draft's, only its ancestors' and its own.
        query_lengths: a mixed batch in one call (a paged cache; clattn_sdpa_paged_ragged) — sequence b has
        query_lengths[b] queries, the last rows it holds, packed: query (rows, heads, head_dim) → out (rows,
        heads, v_dim), lse (rows, heads); a tree then has a parent per packed row. indices: top-k sparse
        attention (clattn_sdpa_sparse; DeepSeek's sparse attention) — an integer array (batch, L, k) of the
        positions each query row attends to (any order, -1 for none; is_causal, window and alibi are not taken:
        the indices are the mask), caches of float32, float16 or bfloat16. scores and top_k: the indices chosen in
        the call (clattn_topk) — scores a float32 array (batch, L, n) (an indexer's, n at least every sequence's
        rows), each query row attending to the top_k highest of its sequence's rows (ties to the lower position;
        -inf and NaN never chosen)."""
        if query_lengths is not None:
            return self._attend_mixed(query, [int(n) for n in query_lengths], is_causal, scale, window, softcap,
                                      sinks, alibi, logit_scale, tree, return_lse, algorithm, out, prefixes)
        q, torch_side = _tensor(query, "query")
        if len(q.shape) != 4 or q.shape[0] != self.batch or q.shape[3] != self.head_dim:
            raise ArgumentError(f"query {tuple(q.shape)}: ({self.batch}, heads, L, {self.head_dim})")
        heads, q_len = int(q.shape[1]), int(q.shape[2])
        opts = _options(scale, 1 if is_causal else 0, window, softcap, sinks, alibi, None, None, 0, 0, algorithm, 0,
                        heads, self.batch, logit_scale, tree, q_len)
        if out is None:
            out = _empty(q, torch_side, (self.batch, heads, q_len, self.v_dim))
        elif tuple(out.shape) != (self.batch, heads, q_len, self.v_dim) or out.dtype != q.dtype:
            raise ArgumentError(f"out {tuple(out.shape)} {out.dtype}: ({self.batch}, {heads}, {q_len}, {self.v_dim}) "
                                f"{q.dtype}, as the call's result")
        lse = _empty(q, torch_side, (self.batch, heads, q_len), "float32") if return_lse else None
        on_device = _device.is_device_array(q)
        if on_device:
            _device.before(self.context, (q, out, lse))
        if scores is not None or top_k is not None:
            if indices is not None or scores is None or top_k is None or int(top_k) < 1:
                raise ArgumentError("attend: scores and top_k (at least 1) together, without indices: the top_k "
                                    "highest of each row's scores chosen in the call")
            opts.pop("algorithm", None)
            opts.pop("causal", None)
            _call(self.context, _with_options(self._cache._attend_sparse, opts),
                  (q, out, lse, heads, q_len, self._bf16, None, int(top_k), scores))
        elif indices is not None:
            flat = indices.reshape(-1).tolist() if hasattr(indices, "reshape") else [int(j) for r in indices for j in r]
            shape = tuple(getattr(indices, "shape", ()))
            if len(shape) != 3 or shape[:2] != (self.batch, q_len) or shape[2] < 1:
                raise ArgumentError(f"indices {shape}: ({self.batch}, {q_len}, k), the positions each query row "
                                    f"attends to")
            opts.pop("algorithm", None)
            opts.pop("causal", None)
            _call(self.context, _with_options(self._cache._attend_sparse, opts),
                  (q, out, lse, heads, q_len, self._bf16, flat, int(shape[2])))
        elif prefixes is not None:
            opts.pop("algorithm", None)
            levels = [list(level) for level in prefixes]
            _call(self.context, _with_options(self._cache._attend_prefixes, opts),
                  (q, out, lse, heads, q_len, self._bf16, levels))
        else:
            _call(self.context, _with_options(self._cache.attend, opts), (q, out, lse, heads, q_len, self._bf16))
        if on_device:
            _device.after(self.context, (q, out, lse))
        return (out, lse) if return_lse else out

    def device_arrays(self, queue=None):
        """The cache's own buffers as pyopencl arrays on `queue` (None: the context's queue), no copy: what
        is written through them is what attend reads. k and v are (batch, kv_heads, capacity, D) of the
        cache's type for float32 and float16 (bfloat16 as uint16 bits), raw bytes (…, row bytes) uint8 for
        the other formats (a token format's: (batch, kv_heads, chunk bytes)); a paged cache's are its pools,
        (blocks, kv_heads, block_size, …), with its block table (batch, max_blocks) int32. The lengths stay
        the cache's (append's): rows written through these arrays count only below them. Returns a
        DeviceArrays (k, v, k_scales, v_scales, block_table). Needs pyopencl."""
        import pyopencl as cl
        import pyopencl.array as cl_array

        queue = _device.queue_of(self.context) if queue is None else queue
        k, v, k_scales, v_scales, table, blocks = self._cache._buffers
        lead = (self.batch, self.kv_heads, self.capacity) if self.block_size is None else \
            (blocks, self.kv_heads, self.block_size)

        def view(handle, shape, dtype):
            if not handle:
                return None
            data = cl.Buffer.from_int_ptr(handle, retain=True)
            if shape is None:  # (a token format's chunks: whatever each head's share of the buffer is)
                shape = lead[:2] + (data.size // (lead[0] * lead[1]),)
            elif shape[-1] == -1:  # (the block table: its columns, from its size)
                shape = (shape[0], data.size // 4 // shape[0])
            return cl_array.Array(queue, shape, dtype, data=data)

        def rows(which, dim, row_bytes):
            f = _FORMATS[(self.k_dtype, self.v_dtype)[which]]
            if f.tokens:
                return None, "uint8"
            if not f.kv_only:  # (the formats stored value by value)
                return lead + (dim,), {"bfloat16": "uint16"}.get(f.name, f.name)
            return lead + (row_bytes,), "uint8"

        return DeviceArrays(view(k, *rows(0, self.head_dim, self.k_row_bytes)),
                            view(v, *rows(1, self.v_dim, self.v_row_bytes)),
                            view(k_scales, lead, "float32"), view(v_scales, lead, "float32"),
                            None if self.block_size is None else view(table, (self.batch, -1), "int32"))

    # ---- The bytes as they lie on the device ----

    def _read(self, which, row_shape, dtype):
        """Buffer `which` as numpy (batch, kv_heads, capacity, *row_shape), a paged pool's rows put back in each
        sequence's order through its block table (rows without a block: zeros); None where there is none."""
        data, _, table = _call(self.context, self._cache._read, (which,))
        if data is None:
            return None
        np = _numpy()
        a = np.frombuffer(data, dtype=dtype)
        if which < 2 and self._tokens[which]:  # a token format's chunks as they lie: per head, or per block's head
            return a.reshape((-1, self.kv_heads, a.size // (self.batch * self.kv_heads if self.block_size is None
                                                            else len(table) * self.kv_heads)))
        if self.block_size is None:
            return a.reshape((self.batch, self.kv_heads, self.capacity) + row_shape)
        bs = self.block_size
        pool = a.reshape((-1, self.kv_heads, bs) + row_shape)
        max_blocks = len(table) // self.batch
        out = np.zeros((self.batch, self.kv_heads, max_blocks * bs) + row_shape, dtype)
        for b in range(self.batch):
            for j, block in enumerate(table[b * max_blocks:(b + 1) * max_blocks]):
                if block >= 0:
                    out[b, :, j * bs:(j + 1) * bs] = pool[block]
        return np.ascontiguousarray(out[:, :, :self.capacity])

    def k_bytes(self):
        """K's bytes as the device holds them: numpy uint8 (batch, kv_heads, capacity, k_row_bytes), each row
        its format's blocks in order (for q4_0, ggml's block_q4_0s); rows never written are zeros. A token
        format's (u4_t32, u2_t32) are its chunks: (batch, kv_heads, chunk bytes), or a paged pool's (blocks,
        kv_heads, chunk bytes) in the pool's order (docs/kv-formats.md has the layout)."""
        return self._read(0, (self.k_row_bytes,), "uint8")

    def v_bytes(self):
        """V's bytes: numpy uint8 (batch, kv_heads, capacity, v_row_bytes)."""
        return self._read(1, (self.v_row_bytes,), "uint8")

    def k_scales(self):
        """K's row scales (int8, FP8 made with scaled=True): numpy float32 (batch, kv_heads, capacity); else None."""
        return self._read(2, (), "float32")

    def v_scales(self):
        """V's row scales: numpy float32 (batch, kv_heads, capacity), or None."""
        return self._read(3, (), "float32")

    def load_bytes(self, k, v, lengths=None, *, k_scales=None, v_scales=None):
        """Replace the cache's contents with raw bytes: k uint8 (batch, kv_heads, rows, k_row_bytes) and v
        (…, v_row_bytes) as k_bytes() gives them (rows up to the capacity), the row scales float32 (batch,
        kv_heads, rows) where the cache has them, and each sequence's length (default: rows; each at most rows).
        The bytes are taken as they are (a block's scale and values, whatever wrote them)."""
        np = _numpy()
        if self.latent:
            raise ArgumentError("load_bytes: a latent cache (MLA) takes its rows through append")
        if any(self._tokens):
            raise ArgumentError("load_bytes: a token format's bytes (u4_t32, u2_t32) are chunks, not rows: " +
                                "append the rows instead")
        arrays = [_bytes_array(k, "k"), _bytes_array(v, "v")]
        rows = arrays[0].shape[2] if arrays[0].ndim == 4 else -1
        for i, (name, row_bytes) in enumerate((("k", self.k_row_bytes), ("v", self.v_row_bytes))):
            want = (self.batch, self.kv_heads, rows, row_bytes)
            if arrays[i].shape != want or not 0 < rows <= self.capacity:
                raise ArgumentError(f"{name} {arrays[i].shape}: (batch, kv_heads, rows, row bytes) = (" +
                                    f"{self.batch}, {self.kv_heads}, rows ≤ {self.capacity}, {row_bytes}), " +
                                    "the rows of k and v the same")
        for i, (name, scales) in enumerate((("k_scales", k_scales), ("v_scales", v_scales))):
            fmt = self.k_dtype if i == 0 else self.v_dtype
            if scales is None and self._has_scales[i]:
                raise ArgumentError(f"{name}: the cache's {fmt} rows have a float32 scale each: give them")
            if scales is not None and not self._has_scales[i]:
                raise ArgumentError(f"{name}: the cache's {fmt} rows have no scales" +
                                    (" (make it with scaled=True)" if _FORMATS[fmt].row_scales == "optional" else ""))
            if scales is not None:
                s = np.ascontiguousarray(np.asarray(scales.detach().cpu().numpy() if hasattr(scales, "detach")
                                                    else scales), dtype=np.float32)
                if s.shape != (self.batch, self.kv_heads, rows):
                    raise ArgumentError(f"{name} {s.shape}: ({self.batch}, {self.kv_heads}, {rows}), k's rows")
                arrays.append(s[..., None])
            else:
                arrays.append(None)
        if lengths is None:
            lengths = [rows] * self.batch
        lengths = [int(n) for n in lengths]
        if len(lengths) != self.batch or not all(0 <= n <= rows for n in lengths):
            raise ArgumentError(f"lengths {lengths}: {self.batch} values from 0 to the {rows} rows given")
        table = None
        if self.block_size is None:
            images = []
            for a in arrays:
                img = None if a is None else np.zeros(a.shape[:2] + (self.capacity,) + a.shape[3:], a.dtype)
                if a is not None:
                    img[:, :, :rows] = a
                images.append(img)
        else:  # blocks handed out in order, sequence after sequence, as appends from empty would
            bs = self.block_size
            max_blocks = -(-self.capacity // bs)
            table, ids = [-1] * (self.batch * max_blocks), []
            for b in range(self.batch):
                for j in range(-(-lengths[b] // bs)):
                    table[b * max_blocks + j] = len(ids)
                    ids.append((b, j))
            images = []
            for a in arrays:
                if a is None:
                    images.append(None)
                    continue
                padded = np.zeros(a.shape[:2] + (max_blocks * bs,) + a.shape[3:], a.dtype)
                padded[:, :, :rows] = a
                pool = np.zeros((self.batch * max_blocks, self.kv_heads, bs) + a.shape[3:], a.dtype)
                for block, (b, j) in enumerate(ids):
                    pool[block] = padded[b, :, j * bs:(j + 1) * bs]
                images.append(pool)
        _call(self.context, self._cache._load, tuple(images) + (lengths, table))

    @classmethod
    def from_bytes(cls, k, v, lengths=None, *, dtype=None, k_dtype=None, v_dtype=None, k_scales=None, v_scales=None,
                   capacity=None, block_size=None, context=None):
        """A cache holding raw bytes another program wrote (ggml's q8_0/q4_0 blocks, FP8 bytes, …): k uint8
        (batch, kv_heads, rows, k_row_bytes) and v (…, v_row_bytes) in dtype (or k_dtype and v_dtype), the head
        sizes read from the row bytes; the row scales where the format has them (FP8: given, the cache is made
        with scaled=True); capacity (default: rows) and block_size as KVCache's; lengths as load_bytes'."""
        if dtype is None and (k_dtype is None or v_dtype is None):
            raise ArgumentError("from_bytes: give dtype, or k_dtype and v_dtype")
        kf = _format(dtype if k_dtype is None else k_dtype, "dtype" if k_dtype is None else "k_dtype")
        vf = _format(dtype if v_dtype is None else v_dtype, "dtype" if v_dtype is None else "v_dtype")
        if kf.tokens or vf.tokens:
            raise ArgumentError("from_bytes: a token format's bytes (u4_t32, u2_t32) are chunks, not rows: " +
                                "append the rows instead")
        ka, va = _bytes_array(k, "k"), _bytes_array(v, "v")
        dims = []
        for name, a, f in (("k", ka, kf), ("v", va, vf)):
            if a.ndim != 4 or a.shape[3] == 0 or a.shape[3] % f.block_bytes:
                raise ArgumentError(f"{name} {a.shape}: (batch, kv_heads, rows, row bytes), the row whole {f.name} "
                                    f"blocks of {f.block_bytes} bytes")
            dims.append(a.shape[3] // f.block_bytes * f.block)
        scaled = any(s is not None and f.row_scales == "optional" for s, f in ((k_scales, kf), (v_scales, vf)))
        cache = cls(ka.shape[0], ka.shape[1], capacity or ka.shape[2], dims[0], dims[1], block_size=block_size,
                    context=context, k_dtype=kf.name, v_dtype=vf.name, scaled=scaled)
        cache.load_bytes(ka, va, lengths, k_scales=k_scales, v_scales=v_scales)
        return cache
