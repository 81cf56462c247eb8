"""The fp64 reference of the Python suite: attention as clattn defines it (docs/variants.md),
in numpy float64, from float32 copies of the inputs."""
import numpy as np


def bf16_to_f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(x):
    """Round to nearest even into bfloat16 bit patterns (uint16)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def sdpa(q, k, v, mask=None, causal=False, scale=None, window=None, softcap=None, sinks=None, alibi=None,
         offsets=None, key_lengths=None, logit_scale=None):
    """q (B, H, L, D), k (B, KVH, S, D), v (B, KVH, S, Dv) (leading dims flattened by the caller); mask
    broadcastable to (B, H, L, S), bool (True = may attend) or float (added). Returns out (B, H, L, Dv),
    lse (B, H, L)."""
    q, k, v = (np.asarray(t, dtype=np.float64) for t in (q, k, v))
    B, H, L, D = q.shape
    KVH, S = k.shape[1], k.shape[2]
    k = np.repeat(k, H // KVH, axis=1)
    v = np.repeat(v, H // KVH, axis=1)
    s = np.einsum("bhld,bhsd->bhls", q, k) * (1.0 / np.sqrt(D) if scale is None else scale)
    if logit_scale is not None:
        s = s * np.asarray(logit_scale, dtype=np.float64)[None, :, None, None]
    if softcap:
        s = softcap * np.tanh(s / softcap)
    pos = np.arange(L)[None, :] + (np.zeros((B, 1)) if offsets is None else np.asarray(offsets)[:, None])  # (B, L)
    j = np.arange(S)
    if alibi is not None:
        s = s + np.asarray(alibi, dtype=np.float64)[None, :, None, None] * (j[None, None, None, :] - pos[:, None, :, None])
    visible = np.ones((B, 1, L, S), dtype=bool)
    if key_lengths is not None:
        visible &= j[None, None, None, :] < np.asarray(key_lengths)[:, None, None, None]
    if causal:
        visible &= j[None, None, None, :] <= pos[:, None, :, None]
    if window is not None:
        left, right = window
        if left is not None and left >= 0:
            visible &= j[None, None, None, :] >= pos[:, None, :, None] - left
        if right is not None and right >= 0:
            visible &= j[None, None, None, :] <= pos[:, None, :, None] + right
    if mask is not None:
        m = np.asarray(mask)
        if m.dtype == bool:
            visible = visible & np.broadcast_to(m, (B, H, L, S))
        else:
            s = s + np.broadcast_to(m.astype(np.float64), (B, H, L, S))
    s = np.where(np.broadcast_to(visible, s.shape), s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    if sinks is not None:
        m = np.maximum(m, np.asarray(sinks, dtype=np.float64)[None, :, None, None])
    m_safe = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - m_safe)
    total = e.sum(axis=-1, keepdims=True)
    if sinks is not None:
        total = total + np.exp(np.asarray(sinks, dtype=np.float64)[None, :, None, None] - m_safe)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(total > 0, e / total, 0.0)
        lse = np.where(total[..., 0] > 0, m_safe[..., 0] + np.log(total[..., 0]), -np.inf)
    return np.einsum("bhls,bhsd->bhld", p, v), lse, p


def mha(x, w_q, w_k, w_v, w_o=None, b_q=None, b_k=None, b_v=None, b_o=None, heads=1, kv_heads=None, kv=None,
        **kwargs):
    x = np.asarray(x, dtype=np.float64)
    kv = x if kv is None else np.asarray(kv, dtype=np.float64)
    kv_heads = kv_heads or heads
    B, L, _ = x.shape
    S = kv.shape[1]

    def proj(t, w, b):
        y = t @ np.asarray(w, dtype=np.float64)
        return y + np.asarray(b, dtype=np.float64) if b is not None else y

    q = proj(x, w_q, b_q).reshape(B, L, heads, -1).transpose(0, 2, 1, 3)
    k = proj(kv, w_k, b_k).reshape(B, S, kv_heads, -1).transpose(0, 2, 1, 3)
    v = proj(kv, w_v, b_v).reshape(B, S, kv_heads, -1).transpose(0, 2, 1, 3)
    o, _, _ = sdpa(q, k, v, **kwargs)
    o = o.transpose(0, 2, 1, 3).reshape(B, L, -1)
    return proj(o, w_o, b_o) if w_o is not None else o
