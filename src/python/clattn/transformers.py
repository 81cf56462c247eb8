"""clattn as Hugging Face transformers' attention: after clattn.transformers.register(),
from_pretrained(..., attn_implementation="clattn") (or model.set_attn_implementation("clattn")) runs every
attention layer of transformers' own model code through clattn.scaled_dot_product_attention — grouped-query
heads, padding masks (transformers' boolean masks, as for its "sdpa"), sliding windows (inside those masks),
soft-capping (Gemma 2, which PyTorch's SDPA refuses), attention sinks (gpt-oss, trained too), relative
position biases given as position_bias, generate() with transformers' caches, and training (gradients through
clattn's backward pass). Needs transformers (and PyTorch); clattn itself never imports them."""
from ._attention import scaled_dot_product_attention
from ._calls import ArgumentError

NAME = "clattn"


def attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None, is_causal=None,
                      softcap=None, position_bias=None, s_aux=None, **kwargs):
    """transformers' attention function: query (B, H, L, D), key and value (B, KVH, S, D), attention_mask
    None, boolean (True: attend) or additive, broadcast to (B, 1 or H, L, S) → ((B, L, H, D) output, None)."""
    if dropout and module.training:
        raise ArgumentError(f"attention dropout ({dropout}) in training: clattn has no dropout; set the model's "
                            "attention_dropout to 0 or call model.eval()")
    q_len = query.shape[2]
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    causal = bool(q_len > 1 and attention_mask is None and causal)  # (transformers' rule for its "sdpa")
    if position_bias is not None:
        from transformers.integrations.sdpa_attention import create_position_bias_mask
        attention_mask = create_position_bias_mask(position_bias, attention_mask, causal, query, key)
        causal = False
    # s_aux: gpt-oss's learned sinks, a logit per head in the softmax's denominator (their gradient from
    # clattn's backward pass when they require it)
    out = scaled_dot_product_attention(query, key, value, attn_mask=attention_mask, is_causal=causal, scale=scaling,
                                       enable_gqa=query.shape[1] != key.shape[1], softcap=softcap or None,
                                       sinks=s_aux)
    return out.transpose(1, 2).contiguous(), None


def register(name=NAME):
    """Make attn_implementation=name ("clattn") select clattn in transformers, with transformers' "sdpa" masks."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask
    AttentionInterface.register(name, attention_forward)
    ALL_MASK_ATTENTION_FUNCTIONS.register(name, sdpa_mask)
    return name
