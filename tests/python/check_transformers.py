"""clattn as transformers' attention (meson test python-transformers, with -Dtorch_tests=true; by hand: it needs
PyTorch and transformers): tiny random configurations of Llama, Qwen2, Mistral (sliding window), Gemma 2
(soft-capping and sliding windows, which PyTorch's SDPA refuses), BERT (bidirectional, an encoder) and gpt-oss
(attention sinks, their gradients too), attn_implementation="clattn" against the same weights with "eager":
logits within float32 tolerance at every real token with left and right padding, greedy generate() giving the
same tokens through transformers' caches, and the gradients of a training step."""
import copy

import pytest
import torch
import transformers

import clattn
import clattn.transformers

clattn.transformers.register()

COMMON = dict(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=128, initializer_range=0.2)
DECODERS = {
    "llama": lambda: transformers.LlamaConfig(**COMMON),
    "qwen2": lambda: transformers.Qwen2Config(**COMMON),
    "mistral": lambda: transformers.MistralConfig(sliding_window=6, **COMMON),
    "gemma2": lambda: transformers.Gemma2Config(head_dim=16, sliding_window=6, attn_logit_softcapping=2.0,
                                                query_pre_attn_scalar=16, **COMMON),
}
TOL = dict(atol=2e-4, rtol=2e-4)


def pair(config, model_class=transformers.AutoModelForCausalLM):
    """The same weights with "eager" and with "clattn" attention (each model its own copy of the config: a
    model reads its attention implementation from its config at every call)."""
    torch.manual_seed(0)
    eager = model_class.from_config(copy.deepcopy(config), attn_implementation="eager").eval()
    ours = model_class.from_config(copy.deepcopy(config), attn_implementation="clattn").eval()
    ours.load_state_dict(eager.state_dict())
    assert ours.config._attn_implementation == "clattn" and eager.config._attn_implementation == "eager"
    return eager, ours


def batch(padding, length=19, vocab=97):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, vocab, (3, length), generator=g)
    mask = torch.ones_like(ids)
    if padding == "left":
        mask[0, :6], mask[2, :2] = 0, 0
    elif padding == "right":
        mask[0, -6:], mask[2, -2:] = 0, 0
    return ids, mask


@pytest.mark.parametrize("name", sorted(DECODERS))
@pytest.mark.parametrize("padding", ["none", "left", "right"])
def test_decoder_logits(name, padding):
    eager, ours = pair(DECODERS[name]())
    ids, mask = batch(padding)
    with torch.no_grad():
        want, got = eager(ids, attention_mask=mask).logits, ours(ids, attention_mask=mask).logits
    real = mask.bool()
    torch.testing.assert_close(got[real], want[real], **TOL)


@pytest.mark.parametrize("name", sorted(DECODERS))
def test_generate_same_tokens(name):
    eager, ours = pair(DECODERS[name]())
    ids, mask = batch("left")
    want = eager.generate(ids, attention_mask=mask, max_new_tokens=16, do_sample=False)
    got = ours.generate(ids, attention_mask=mask, max_new_tokens=16, do_sample=False)
    assert torch.equal(got, want)


@pytest.mark.parametrize("name", sorted(DECODERS))
def test_training_gradients(name):
    eager, ours = pair(DECODERS[name]())
    ids, mask = batch("right")
    for model in (eager, ours):
        model.train()
        model(ids, attention_mask=mask, labels=ids.masked_fill(mask == 0, -100)).loss.backward()
    for (pname, p), q in zip(eager.named_parameters(), ours.parameters()):
        torch.testing.assert_close(q.grad, p.grad, atol=5e-5, rtol=5e-4, msg=lambda m: f"{pname}: {m}")


@pytest.mark.parametrize("padding", ["none", "right"])
def test_bert(padding):
    config = transformers.BertConfig(vocab_size=97, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=96, initializer_range=0.2, attention_probs_dropout_prob=0.0,
                                     hidden_dropout_prob=0.0)
    eager, ours = pair(config, transformers.AutoModel)
    ids, mask = batch(padding)
    want = eager(ids, attention_mask=mask).last_hidden_state
    got = ours(ids, attention_mask=mask).last_hidden_state
    real = mask.bool()
    torch.testing.assert_close(got[real], want[real], **TOL)
    want.sum().backward()
    got.sum().backward()
    for (pname, p), q in zip(eager.named_parameters(), ours.parameters()):
        if p.grad is not None:
            torch.testing.assert_close(q.grad, p.grad, atol=5e-5, rtol=5e-4, msg=lambda m: f"{pname}: {m}")


def gpt_oss():
    config = transformers.GptOssConfig(vocab_size=97, hidden_size=64, intermediate_size=32, num_hidden_layers=2,
                                       num_attention_heads=4, num_key_value_heads=2, head_dim=16, num_local_experts=4,
                                       num_experts_per_tok=2, sliding_window=6, initializer_range=0.2,
                                       max_position_embeddings=128)
    return pair(config)


def test_gpt_oss_sinks():
    eager, ours = gpt_oss()
    ids, mask = batch("left")
    with torch.no_grad():
        want, got = eager(ids, attention_mask=mask).logits, ours(ids, attention_mask=mask).logits
    torch.testing.assert_close(got[mask.bool()], want[mask.bool()], **TOL)


def test_gpt_oss_training_sinks():
    """A training step of gpt-oss: every gradient, the learned sinks' (self_attn.sinks) among them."""
    eager, ours = gpt_oss()
    ids, mask = batch("right")
    for model in (eager, ours):
        model.train()
        model(ids, attention_mask=mask, labels=ids.masked_fill(mask == 0, -100)).loss.backward()
    names = []
    for (pname, p), q in zip(eager.named_parameters(), ours.parameters()):
        if p.grad is not None:
            names.append(pname)
            torch.testing.assert_close(q.grad, p.grad, atol=5e-5, rtol=5e-4, msg=lambda m: f"{pname}: {m}")
    sinks = [n for n in names if n.endswith("sinks")]
    assert len(sinks) == 2, names  # (each layer's sinks got a gradient, compared above)
