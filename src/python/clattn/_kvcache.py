"""KV caches for decoding, kept on the device."""
from . import _clattn
from ._arrays import _DTYPES, _empty, _options, _tensor, _with_options
from ._calls import ArgumentError, _call, _context


class KVCache:
    """A KV cache for decoding, kept on the device: ``append`` new keys and values, ``attend`` queries over
    every row held; the lengths are kept here.

    KVCache(batch, kv_heads, capacity, head_dim, v_dim=None, dtype="float32", block_size=None, context=None):
    capacity rows per sequence; dtype "float32", "float16" or "bfloat16" (the tensors appended must have
    it: in numpy, bfloat16 as uint16 bits); block_size None for a dense cache, else a power of two from 8 to
    256 for a paged one (a pool of blocks handed to each sequence as it grows, as vLLM keeps them).
    """

    def __init__(self, batch, kv_heads, capacity, head_dim, v_dim=None, dtype="float32", block_size=None,
                 context=None):
        if dtype not in _DTYPES:
            raise ArgumentError(f"dtype must be one of {sorted(_DTYPES)}, not {dtype!r}")
        self.context = _context(context)
        self.batch, self.kv_heads, self.capacity = batch, kv_heads, capacity
        self.head_dim, self.v_dim, self.dtype = head_dim, v_dim or head_dim, dtype
        self.block_size = block_size
        self._cache = _clattn.KVCache(self.context, batch, kv_heads, capacity, head_dim, self.v_dim, _DTYPES[dtype],
                                      block_size or 0)

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

    def append(self, key, value):
        """Append n rows to every sequence: key (batch, kv_heads, n, head_dim), value (…, v_dim)."""
        k, _ = _tensor(key, "key")
        v, _ = _tensor(value, "value")
        if len(k.shape) != 4 or len(v.shape) != 4 or k.shape[2] != v.shape[2]:
            raise ArgumentError(f"key {tuple(k.shape)} and value {tuple(v.shape)}: (batch, kv_heads, n, D), the same n")
        _call(self.context, self._cache.append, (k, v, int(k.shape[2]), self.dtype == "bfloat16"))

    def attend(self, query, *, is_causal=True, scale=None, window=None, softcap=None, sinks=None, alibi=None,
               logit_scale=None, return_lse=False, algorithm="auto"):
        """Attention of query (batch, heads, L, head_dim) over each sequence's rows: with is_causal (the
        default) the L queries are the last L rows appended (query i sees its rows up to itself); the
        options as in scaled_dot_product_attention. Returns out (batch, heads, L, v_dim) of query's kind
        and type, or (out, lse)."""
        q, torch_side = _tensor(query, "query")
        if len(q.shape) != 4 or q.shape[0] != self.batch or q.shape[3] != self.head_dim:
            raise ArgumentError(f"query {tuple(q.shape)}: ({self.batch}, heads, L, {self.head_dim})")
        heads, q_len = int(q.shape[1]), int(q.shape[2])
        opts = _options(scale, 1 if is_causal else 0, window, softcap, sinks, alibi, None, None, 0, 0, algorithm, 0,
                        heads, self.batch, logit_scale)
        out = _empty(q, torch_side, (self.batch, heads, q_len, self.v_dim))
        lse = _empty(q, torch_side, (self.batch, heads, q_len), "float32") if return_lse else None
        _call(self.context, _with_options(self._cache.attend, opts), (q, out, lse, heads, q_len,
                                                                      self.dtype == "bfloat16"))
        return (out, lse) if return_lse else out
