"""Gradients into the tensors a score_mod captures (a learnable bias table, as FlexAttention gives them).

clattn's backward pass returns the gradients of query, key and value; a captured tensor's gradient needs, for
every visible pair, the gradient with respect to the modified score, dS'ᵢⱼ = Pᵢⱼ·(dPᵢⱼ − Dᵢ) (P = exp(s' − lse),
dP = dO·Vⱼ, Dᵢ = dOᵢ·Oᵢ), pushed back through score_mod's own graph to the tensor. Here that is done densely
with PyTorch's autograd on score_mod applied to all (B, H, L, S) scores at once: O(B·H·L·S) memory and time
for this part, taken only when a captured tensor requires grad (the forward and the other gradients stay
clattn's). PyTorch sums the contributions of each index in a fixed order on the CPU."""


def attention_with_learned(torch, call, query, key, value, score_mod, mask_mod, learned, scale, enable_gqa,
                           return_lse):
    """call(q, k, v) → (out, lse) through clattn (its own autograd for q, k, v); the result also carries the
    gradients of `learned` (captured tensors that require grad)."""

    class Learned(torch.autograd.Function):
        @staticmethod
        def forward(fctx, q, k, v, *tensors):
            with torch.no_grad():
                out, lse = call(q, k, v)
            fctx.save_for_backward(q, k, v, out, lse)
            fctx.mark_non_differentiable(lse)
            return out, lse

        @staticmethod
        def backward(fctx, grad_out, grad_lse):
            q, k, v, out, lse = fctx.saved_tensors
            with torch.enable_grad():
                qg, kg, vg = (t.detach().requires_grad_(t.requires_grad) for t in (q, k, v))
                wanted = [t for t in (qg, kg, vg) if t.requires_grad]
                grads = iter(torch.autograd.grad(call(qg, kg, vg)[0], wanted, grad_out) if wanted else ())
                dqkv = [next(grads) if t.requires_grad else None for t in (qg, kg, vg)]
                dlearned = _captured_gradients(torch, q, k, v, out, lse, grad_out, score_mod, mask_mod, learned,
                                               scale, enable_gqa)
            return (*dqkv, *dlearned)

    out, lse = Learned.apply(query, key, value, *learned)
    return (out, lse) if return_lse else out


def _captured_gradients(torch, q, k, v, out, lse, grad_out, score_mod, mask_mod, learned, scale, enable_gqa):
    B, H, L, E = q.shape
    S = k.shape[-2]
    k, v = k.detach().float(), v.detach().float()
    if enable_gqa and k.shape[1] != H:
        k, v = (t.repeat_interleave(H // t.shape[1], dim=1) for t in (k, v))
    scores = q.detach().float() @ k.transpose(-1, -2) * (scale if scale is not None else E ** -0.5)
    b, h = torch.arange(B).view(B, 1, 1, 1), torch.arange(H).view(1, H, 1, 1)
    qi, ki = torch.arange(L).view(1, 1, L, 1), torch.arange(S).view(1, 1, 1, S)
    modified = score_mod(scores, b, h, qi, ki).expand(B, H, L, S)
    visible = torch.isfinite(lse)[..., None].expand(B, H, L, S)
    if mask_mod is not None:
        visible = visible & mask_mod(b, h, qi, ki).expand(B, H, L, S)
    with torch.no_grad():
        p = torch.where(visible, torch.exp(modified - torch.where(torch.isfinite(lse), lse, 0.0)[..., None]), 0.0)
        d_out = grad_out.float()
        dp = d_out @ v.transpose(-1, -2)
        d_row = (d_out * out.float()).sum(-1, keepdim=True)
        d_scores = p * (dp - d_row)
    grads = torch.autograd.grad(modified, learned, d_scores, allow_unused=True)
    return [torch.zeros_like(t) if g is None else g.to(t.dtype) for g, t in zip(grads, learned)]
