"""clattn's attention as PyTorch operators (torch.library): torch.ops.clattn.sdpa and torch.ops.clattn.sdpa_backward,
with fake (meta) implementations, so that torch.compile(fullgraph=True) keeps a model's clattn call in its graph
with no break, and torch.export keeps the call. clattn.scaled_dot_product_attention calls the operator itself
while torch.compile traces (torch.compiler.is_compiling()); eagerly it runs as before.

Registered on first use (register()); PyTorch is never needed to import clattn."""
import sys

_registered = False

# The operators' schema: PyTorch SDPA's arguments clattn takes, and programmable attention (mods source text,
# its auxiliary tensors and their names, comma-separated).
_SDPA = ("sdpa(Tensor query, Tensor key, Tensor value, Tensor? attn_mask, bool is_causal, float? scale, "
         "bool enable_gqa, str? mods, Tensor[] aux, str aux_names) -> (Tensor, Tensor)")


def _sdpa_call(query, key, value, attn_mask, is_causal, scale, enable_gqa, mods, aux, aux_names):
    from ._attention import scaled_dot_product_attention
    return scaled_dot_product_attention(query, key, value, attn_mask=attn_mask, is_causal=is_causal, scale=scale,
                                        enable_gqa=enable_gqa, return_lse=True, mods=mods,
                                        aux=dict(zip(aux_names.split(","), aux)) if aux else None)


def _out_shapes(torch, query, key, value):
    lead = torch.broadcast_shapes(query.shape[:-3], key.shape[:-3], value.shape[:-3])
    rows = tuple(lead) + tuple(query.shape[-3:-1])
    return rows + (value.shape[-1],), rows


def register():
    """Define torch.ops.clattn.sdpa (and its backward) once; returns the forward operator."""
    global _registered
    torch = sys.modules.get("torch") or __import__("torch")
    if _registered:
        return torch.ops.clattn.sdpa
    lib = torch.library.Library("clattn", "FRAGMENT")
    lib.define(_SDPA)
    lib.define("sdpa_backward(Tensor grad_out, Tensor query, Tensor key, Tensor value, Tensor? attn_mask, "
               "bool is_causal, float? scale, bool enable_gqa, str? mods, Tensor[] aux, str aux_names) "
               "-> (Tensor, Tensor, Tensor)")

    def sdpa_cpu(query, key, value, attn_mask, is_causal, scale, enable_gqa, mods, aux, aux_names):
        with torch.no_grad():
            out, lse = _sdpa_call(query, key, value, attn_mask, is_causal, scale, enable_gqa, mods, aux, aux_names)
        return out.contiguous(), lse.contiguous()

    def sdpa_fake(query, key, value, attn_mask, is_causal, scale, enable_gqa, mods, aux, aux_names):
        out_shape, lse_shape = _out_shapes(torch, query, key, value)
        return query.new_empty(out_shape), query.new_empty(lse_shape, dtype=torch.float32)

    def backward_cpu(grad_out, query, key, value, attn_mask, is_causal, scale, enable_gqa, mods, aux, aux_names):
        # (the forward again, through clattn's autograd Function, then its backward: the operator keeps no
        # state between the two calls)
        with torch.enable_grad():
            q, k, v = (t.detach().requires_grad_() for t in (query, key, value))
            out, _ = _sdpa_call(q, k, v, attn_mask, is_causal, scale, enable_gqa, mods, aux, aux_names)
            return tuple(g.contiguous() for g in torch.autograd.grad(out, (q, k, v), grad_out))

    def backward_fake(grad_out, query, key, value, *rest):
        return query.new_empty(query.shape), key.new_empty(key.shape), value.new_empty(value.shape)

    lib.impl("sdpa", sdpa_cpu, "CPU")
    lib.impl("sdpa_backward", backward_cpu, "CPU")
    torch.library.register_fake("clattn::sdpa", sdpa_fake, lib=lib)
    torch.library.register_fake("clattn::sdpa_backward", backward_fake, lib=lib)

    def setup_context(ctx, inputs, output):
        query, key, value, attn_mask, is_causal, scale, enable_gqa, mods, aux, aux_names = inputs
        ctx.has_mask, ctx.args = attn_mask is not None, (is_causal, scale, enable_gqa, mods)
        ctx.aux_names = aux_names
        # (the backward returns one entry per input, in the inputs' own structure: None for all but q, k, v)
        ctx.no_gradients = tuple([None] * len(x) if isinstance(x, (list, tuple)) else None for x in inputs[3:])
        ctx.save_for_backward(query, key, value, *([attn_mask] if ctx.has_mask else []), *aux)

    def backward(ctx, grad_out, grad_lse):
        query, key, value, *rest = ctx.saved_tensors
        attn_mask = rest.pop(0) if ctx.has_mask else None
        dq, dk, dv = torch.ops.clattn.sdpa_backward(grad_out.contiguous(), query, key, value, attn_mask, *ctx.args,
                                                    rest, ctx.aux_names)
        return (dq, dk, dv) + ctx.no_gradients

    torch.library.register_autograd("clattn::sdpa", backward, setup_context=setup_context, lib=lib)
    _registered = lib  # (the Library object must live as long as the operators)
    return torch.ops.clattn.sdpa


def registered():
    return bool(_registered)


def compiled_sdpa(torch, query, key, value, attn_mask, is_causal, scale, enable_gqa, return_lse, mods, aux):
    """scaled_dot_product_attention while torch.compile traces: the operator (aux a dict name → tensor)."""
    if not _registered:
        register()  # (better done before compiling: clattn.register_torch_ops(); done here it may break the graph)
    names = list(aux or {})
    out, lse = torch.ops.clattn.sdpa(query, key, value, attn_mask, is_causal, scale, enable_gqa, mods,
                                     [aux[n] for n in names], ",".join(names))
    return (out, lse) if return_lse else out
