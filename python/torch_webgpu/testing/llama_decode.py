"""A one-token decode step of a transformers Llama whose KV cache lives in module buffers
updated in place (index_copy_): what torch.export records as buffer mutations and the AOT
engine runs token by token (docs/ENGINE.md, "Mutated buffers").

The step reuses the model's own modules (embedding, RMSNorms, projections, rotary
embedding, MLP, head); only the cache and the attention over it are written here, so the
exported graph holds no transformers cache object.
"""
import torch
import torch.nn.functional as F


def tiny_llama(seed=0, vocab=128, hidden=64, layers=2, heads=4, kv_heads=2, intermediate=128, init=0.1):
    """A small LlamaForCausalLM with seeded random weights (transformers' LlamaConfig).
    `init`: the weights' std (transformers' 0.02 makes greedy decoding of a random model
    repeat two tokens; 0.1 gives varied ones)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=intermediate,
                      num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
                      max_position_embeddings=256, tie_word_embeddings=False,
                      initializer_range=init, bos_token_id=None, eos_token_id=None, pad_token_id=None)
    model = LlamaForCausalLM(cfg).eval()
    model.generation_config.eos_token_id = None  # no token ends a greedy run early
    return model


def _rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class LlamaDecodeStep(torch.nn.Module):
    """forward(token [1, 1] int64, position [1] int64) -> logits [1, vocab]; writes the
    token's keys and values into the cache buffers at `position` (static cache of
    `max_len` positions, batch 1)."""

    def __init__(self, model, max_len):
        super().__init__()
        cfg = model.config
        self.model = model
        self.heads = cfg.num_attention_heads
        self.kv_heads = cfg.num_key_value_heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        self.max_len = max_len
        for i in range(cfg.num_hidden_layers):
            shape = (1, self.kv_heads, max_len, self.head_dim)
            self.register_buffer(f"k_cache_{i}", torch.zeros(shape))
            self.register_buffer(f"v_cache_{i}", torch.zeros(shape))

    def forward(self, token, position):
        inner = self.model.model
        h = inner.embed_tokens(token)                                  # [1, 1, hidden]
        cos, sin = inner.rotary_emb(h, position.view(1, 1))            # [1, 1, head_dim]
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        # Positions past `position` are masked out of the attention.
        visible = torch.arange(self.max_len, device=token.device) <= position
        mask = torch.where(visible, 0.0, float("-inf")).view(1, 1, 1, self.max_len)
        group = self.heads // self.kv_heads
        for i, layer in enumerate(inner.layers):
            attn = layer.self_attn
            x = layer.input_layernorm(h)
            q = attn.q_proj(x).view(1, 1, self.heads, self.head_dim).transpose(1, 2)
            k = attn.k_proj(x).view(1, 1, self.kv_heads, self.head_dim).transpose(1, 2)
            v = attn.v_proj(x).view(1, 1, self.kv_heads, self.head_dim).transpose(1, 2)
            q = q * cos + _rotate_half(q) * sin
            k = k * cos + _rotate_half(k) * sin
            k_cache, v_cache = getattr(self, f"k_cache_{i}"), getattr(self, f"v_cache_{i}")
            k_cache.index_copy_(2, position, k)
            v_cache.index_copy_(2, position, v)
            keys = k_cache.repeat_interleave(group, dim=1)
            values = v_cache.repeat_interleave(group, dim=1)
            o = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)
            h = h + attn.o_proj(o.transpose(1, 2).reshape(1, 1, -1))
            h = h + layer.mlp(layer.post_attention_layernorm(h))
        return self.model.lm_head(inner.norm(h))[:, -1]


def greedy_tokens_hf(model, prompt, steps):
    """The CPU reference: transformers' own generate (its forward and dynamic cache), greedy,
    with no end-of-sequence token (tiny_llama has none)."""
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt]), max_new_tokens=steps, do_sample=False, pad_token_id=0)
    return out[0, len(prompt):].tolist()
