"""Probe: does CUDA reduce-overhead generate crash with or without torch_webgpu imported?
    python3 scripts/h200/cuda_compile_probe.py [--webgpu]"""
import sys
import time

import torch
import transformers

if "--webgpu" in sys.argv:
    import torch_webgpu  # noqa: F401
    torch.webgpu.synchronize()

torch.manual_seed(0)
config = transformers.Qwen2Config(hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                                  num_attention_heads=14, num_key_value_heads=2,
                                  vocab_size=151936, max_position_embeddings=4096,
                                  tie_word_embeddings=True)
model = transformers.Qwen2ForCausalLM(config).to("cuda").eval()
model.forward = torch.compile(model.forward, mode="reduce-overhead")
ids = torch.randint(0, 1000, (1, 16), device="cuda")
for i in range(3):
    t = time.perf_counter()
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=32,
                             min_new_tokens=32, do_sample=False, eos_token_id=None,
                             pad_token_id=0, cache_implementation="static")
    torch.cuda.synchronize()
    print(f"run {i}: {32 / (time.perf_counter() - t):.1f} tok/s (incl. prefill)", flush=True)
print("ok", out[0, -8:].tolist())
