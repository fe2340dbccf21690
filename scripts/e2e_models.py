#!/usr/bin/env python3
"""Real language-model architectures generating text on webgpu, checked token by token
against the CPU.

Each model is built from its transformers config class with the published checkpoint's
hyperparameters (written below; nothing is downloaded) and seeded random weights. Greedy
`model.generate` runs on the CPU and on webgpu (and on CUDA with --cuda) from the same
prompt tokens; the table says how many tokens agree and the decode speed per device.

    python3 scripts/e2e_models.py --tiny                      # every architecture, small
    python3 scripts/e2e_models.py --models gpt2,qwen2.5 --dtype bfloat16 --tokens 16
    python3 scripts/e2e_models.py --cuda --json e2e.json      # full size, next to CUDA

Every op must run natively: the CPU fallback is disabled (an op without a kernel raises).
Exit status 1 when a float32 run's tokens differ from the CPU's or a model fails.
"""
import argparse
import copy
import dataclasses
import json
import os
import statistics
import sys
import traceback
import time

if __name__ == "__main__":
    # Before torch_webgpu loads: any op without a native kernel must raise, not fall back.
    # (Importers, e.g. the tests, set it themselves for as long as they need it.)
    os.environ["TORCH_WEBGPU_DISABLE_CPU_FALLBACK"] = "1"
# Nothing may reach a model hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
import transformers  # noqa: E402

import torch_webgpu  # noqa: E402,F401  registers the "webgpu" device

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
PROMPT_LENGTH = 8


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    key: str
    checkpoint: str      # the published checkpoint whose hyperparameters these are
    config_class: str    # a transformers config class; the model comes from AutoModelForCausalLM
    config: dict         # the checkpoint's hyperparameters (config.json field names)


# What Llama 3.2 1B and 3B share.
LLAMA_32 = dict(
    vocab_size=128256, max_position_embeddings=131072, intermediate_size=8192,
    num_key_value_heads=8, rope_theta=500000.0, rms_norm_eps=1e-5, hidden_act="silu",
    rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                  "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
    bos_token_id=128000, eos_token_id=128001, tie_word_embeddings=True)

SPECS = [
    ModelSpec("gpt2", "openai-community/gpt2", "GPT2Config", dict(
        vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12,
        activation_function="gelu_new", layer_norm_epsilon=1e-5, tie_word_embeddings=True)),
    ModelSpec("gpt-neo", "EleutherAI/gpt-neo-125m", "GPTNeoConfig", dict(
        vocab_size=50257, max_position_embeddings=2048, hidden_size=768, num_layers=12,
        num_heads=12, attention_types=[[["global", "local"], 6]], window_size=256,
        activation_function="gelu_new", layer_norm_epsilon=1e-5, tie_word_embeddings=True)),
    ModelSpec("opt", "facebook/opt-125m", "OPTConfig", dict(
        vocab_size=50272, max_position_embeddings=2048, hidden_size=768, num_hidden_layers=12,
        num_attention_heads=12, ffn_dim=3072, word_embed_proj_dim=768,
        do_layer_norm_before=True, activation_function="relu", enable_bias=True,
        pad_token_id=1, bos_token_id=2, eos_token_id=2, tie_word_embeddings=True)),
    ModelSpec("pythia", "EleutherAI/pythia-160m", "GPTNeoXConfig", dict(
        vocab_size=50304, max_position_embeddings=2048, hidden_size=768, num_hidden_layers=12,
        num_attention_heads=12, intermediate_size=3072, rotary_pct=0.25, rotary_emb_base=10000,
        use_parallel_residual=True, hidden_act="gelu", layer_norm_eps=1e-5,
        bos_token_id=0, eos_token_id=0, tie_word_embeddings=False)),
    ModelSpec("bloom", "bigscience/bloom-560m", "BloomConfig", dict(
        vocab_size=250880, hidden_size=1024, n_layer=24, n_head=16, layer_norm_epsilon=1e-5,
        apply_residual_connection_post_layernorm=False, bos_token_id=1, eos_token_id=2,
        pad_token_id=3, tie_word_embeddings=True)),
    ModelSpec("llama-3.2-1b", "meta-llama/Llama-3.2-1B", "LlamaConfig", dict(
        LLAMA_32, hidden_size=2048, num_hidden_layers=16, num_attention_heads=32, head_dim=64)),
    ModelSpec("llama-3.2-3b", "meta-llama/Llama-3.2-3B", "LlamaConfig", dict(
        LLAMA_32, hidden_size=3072, num_hidden_layers=28, num_attention_heads=24, head_dim=128)),
    ModelSpec("smollm2", "HuggingFaceTB/SmolLM2-135M", "LlamaConfig", dict(
        vocab_size=49152, max_position_embeddings=8192, hidden_size=576, intermediate_size=1536,
        num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3,
        rope_theta=100000.0, rms_norm_eps=1e-5, hidden_act="silu", bos_token_id=0,
        eos_token_id=0, tie_word_embeddings=True)),
    ModelSpec("qwen1.5", "Qwen/Qwen1.5-0.5B", "Qwen2Config", dict(
        vocab_size=151936, max_position_embeddings=32768, hidden_size=1024,
        intermediate_size=2816, num_hidden_layers=24, num_attention_heads=16,
        num_key_value_heads=16, rope_theta=1000000.0, rms_norm_eps=1e-6, hidden_act="silu",
        bos_token_id=151643, eos_token_id=151643, tie_word_embeddings=False)),
    ModelSpec("qwen2.5", "Qwen/Qwen2.5-0.5B", "Qwen2Config", dict(
        vocab_size=151936, max_position_embeddings=32768, hidden_size=896,
        intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
        num_key_value_heads=2, rope_theta=1000000.0, rms_norm_eps=1e-6, hidden_act="silu",
        bos_token_id=151643, eos_token_id=151643, tie_word_embeddings=True)),
    ModelSpec("qwen3", "Qwen/Qwen3-0.6B", "Qwen3Config", dict(
        vocab_size=151936, max_position_embeddings=40960, hidden_size=1024,
        intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
        num_key_value_heads=8, head_dim=128, rope_theta=1000000.0, rms_norm_eps=1e-6,
        attention_bias=False, hidden_act="silu", bos_token_id=151643, eos_token_id=151645,
        tie_word_embeddings=True)),
    ModelSpec("phi-1.5", "microsoft/phi-1_5", "PhiConfig", dict(
        vocab_size=51200, max_position_embeddings=2048, hidden_size=2048,
        intermediate_size=8192, num_hidden_layers=24, num_attention_heads=32,
        num_key_value_heads=32, partial_rotary_factor=0.5, rope_theta=10000.0,
        hidden_act="gelu_new", layer_norm_eps=1e-5, qk_layernorm=False,
        bos_token_id=None, eos_token_id=None, tie_word_embeddings=False)),
    ModelSpec("stablelm-2", "stabilityai/stablelm-2-1_6b", "StableLmConfig", dict(
        vocab_size=100352, max_position_embeddings=4096, hidden_size=2048,
        intermediate_size=5632, num_hidden_layers=24, num_attention_heads=32,
        num_key_value_heads=32, partial_rotary_factor=0.25, rope_theta=10000.0,
        use_qkv_bias=True, qk_layernorm=False, use_parallel_residual=False,
        hidden_act="silu", layer_norm_eps=1e-5, bos_token_id=100257, eos_token_id=100257,
        tie_word_embeddings=False)),
    ModelSpec("olmo-2", "allenai/OLMo-2-0425-1B", "Olmo2Config", dict(
        vocab_size=100352, max_position_embeddings=4096, hidden_size=2048,
        intermediate_size=8192, num_hidden_layers=16, num_attention_heads=16,
        num_key_value_heads=16, rope_theta=500000.0, rms_norm_eps=1e-6, hidden_act="silu",
        attention_bias=False, pad_token_id=100277, eos_token_id=100257,
        tie_word_embeddings=False)),
    ModelSpec("granite-3.3", "ibm-granite/granite-3.3-2b-instruct", "GraniteConfig", dict(
        vocab_size=49159, max_position_embeddings=131072, hidden_size=2048,
        intermediate_size=8192, num_hidden_layers=40, num_attention_heads=32,
        num_key_value_heads=8, rope_theta=10000000.0, rms_norm_eps=1e-5, hidden_act="silu",
        embedding_multiplier=12.0, logits_scaling=8.0, residual_multiplier=0.22,
        attention_multiplier=0.015625, attention_bias=False, mlp_bias=False,
        bos_token_id=0, eos_token_id=0, pad_token_id=0, tie_word_embeddings=True)),
    ModelSpec("danube-3", "h2oai/h2o-danube3-500m-chat", "LlamaConfig", dict(
        vocab_size=32000, max_position_embeddings=8192, hidden_size=1536,
        intermediate_size=4096, num_hidden_layers=16, num_attention_heads=16,
        num_key_value_heads=8, rope_theta=100000.0, rms_norm_eps=1e-5, hidden_act="silu",
        bos_token_id=1, eos_token_id=2, tie_word_embeddings=False)),
]
MODELS = {spec.key: spec for spec in SPECS}

# Config fields by role: the classes name the same thing differently.
HIDDEN = ("hidden_size", "n_embd")
LAYERS = ("num_hidden_layers", "n_layer", "num_layers")
HEADS = ("num_attention_heads", "n_head", "num_heads")
INTERMEDIATE = ("intermediate_size", "ffn_dim")
TOKEN_IDS = ("bos_token_id", "eos_token_id", "pad_token_id")

TINY_HIDDEN, TINY_LAYERS, TINY_HEADS, TINY_VOCAB = 64, 2, 4, 1000
# Weights ~ N(0, (INIT_GAIN / sqrt(hidden))^2). The checkpoints' 0.02 makes a random model
# repeat one token for ever (its embeddings outweigh the layers), which would hide wrong
# numbers; at this gain the tokens vary, and float64 on the CPU picks the same ones.
INIT_GAIN = 4.0


def _field(config, names):
    return next((name for name in names if name in config), None)


def tiny_config(config):
    """The same architecture at 2 layers, hidden 64, vocab 1000: keeps what makes it itself
    (grouped KV heads, a head dim that differs from hidden/heads, partial rotary, local
    attention, the MLP's width ratio, biases, multipliers, tied embeddings)."""
    tiny = dict(config)
    hidden_key, heads_key = _field(config, HIDDEN), _field(config, HEADS)
    hidden, heads = config[hidden_key], config[heads_key]
    tiny[hidden_key] = TINY_HIDDEN
    tiny[_field(config, LAYERS)] = TINY_LAYERS
    tiny[heads_key] = TINY_HEADS
    tiny["vocab_size"] = TINY_VOCAB
    kv_heads = config.get("num_key_value_heads")
    if kv_heads is not None:
        tiny["num_key_value_heads"] = TINY_HEADS if kv_heads == heads else TINY_HEADS // 2
    if config.get("head_dim") is not None:
        # Qwen3's heads are wider than hidden/heads; keep that, or keep them equal.
        wider = config["head_dim"] * heads != hidden
        tiny["head_dim"] = TINY_HIDDEN // TINY_HEADS * (2 if wider else 1)
    inter_key = _field(config, INTERMEDIATE)
    if inter_key is not None:
        tiny[inter_key] = max(8, round(TINY_HIDDEN * config[inter_key] / hidden / 8) * 8)
    if "word_embed_proj_dim" in config:
        tiny["word_embed_proj_dim"] = TINY_HIDDEN
    if "attention_types" in config:  # GPT-Neo: alternate global and local layers
        tiny["attention_types"] = [[["global", "local"], TINY_LAYERS // 2]]
        tiny["window_size"] = 8  # shorter than prompt + tokens, so the window bites
    for name in TOKEN_IDS:  # ids of the full vocabulary (or a class default) do not fit
        if tiny.get(name) is None or tiny[name] >= TINY_VOCAB:
            tiny[name] = None
    return tiny


def build_model(spec, tiny=False, dtype=torch.float32, seed=0, init_device="cpu"):
    """The architecture on the CPU with seeded random weights, in eval mode. The weights
    are drawn on `init_device` (CUDA draws a 3B model's in seconds, the CPU in minutes),
    then moved to the CPU: every device compared gets the same weights either way."""
    config_class = getattr(transformers, spec.config_class)
    # A deep copy: config classes may rewrite nested dicts (rope_scaling) in place.
    fields = copy.deepcopy(tiny_config(spec.config) if tiny else spec.config)
    std = INIT_GAIN / fields[_field(fields, HIDDEN)] ** 0.5
    config = config_class(**fields)
    for name in ("initializer_range", "init_std"):  # OPT calls it init_std
        if hasattr(config, name):
            setattr(config, name, std)
    torch.manual_seed(seed)
    with torch.device(init_device):
        model = transformers.AutoModelForCausalLM.from_config(config)
    return model.to("cpu", dtype).eval()


def prompt_tokens(vocab_size, length=PROMPT_LENGTH, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab_size, (1, length), generator=generator)


def synchronize(device):
    if device == "webgpu":
        torch.webgpu.synchronize()
    elif device == "cuda":
        torch.cuda.synchronize()


class StepClock(transformers.StoppingCriteria):
    """Times each generation step: generate asks it after every new token (never stops).
    `wait=False` reads the clock without waiting for the device (for a generate that keeps
    the host a step ahead: torch_webgpu.generation.defer_stop_check)."""

    def __init__(self, device, wait=True):
        self.device, self.wait = device, wait
        self.times = []

    def __call__(self, input_ids, scores, **kwargs):
        if self.wait:
            synchronize(self.device)
        self.times.append(time.perf_counter())
        return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)


def _generate(model, prompt, new_tokens, clock=None, **generate_kwargs):
    # No end-of-sequence stop: every run makes exactly new_tokens tokens.
    criteria = transformers.StoppingCriteriaList([clock] if clock else [])
    # With a static cache transformers compiles the forward itself on cuda (xpu, tpu; not
    # webgpu): an eager model stays eager, or "CUDA eager" would be CUDA compiled. A model
    # from compiled() keeps transformers' behaviour.
    generate_kwargs.setdefault("disable_compile", not getattr(model, "_e2e_compiled", False))
    with torch.no_grad():
        out = model.generate(prompt, attention_mask=torch.ones_like(prompt),
                             max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                             do_sample=False, eos_token_id=None, pad_token_id=0,
                             stopping_criteria=criteria, **generate_kwargs)
    return out[0, prompt.shape[1]:].tolist()


def greedy(model, prompt, new_tokens, device, timed=True, clock_waits=True, before_timed=None,
           **generate_kwargs):
    """Greedy tokens from `model` (on `device`) and, when timed, the prefill time
    (prompt to first token) and the decode speed (the tokens after the first), after a short
    warm-up run (pipelines, caches; for a compiled model, its compilation). `clock_waits=False`:
    the step clock does not synchronize (decode then ends when generate has returned its
    tokens to the host), so a generate that runs ahead of the device is not held back.
    `before_timed()` is called between the warm-up and the timed run (to read counters)."""
    prompt = prompt.to(device)
    if not timed:
        return {"tokens": _generate(model, prompt, new_tokens, **generate_kwargs)}
    start = time.perf_counter()
    # A static cache is sized by the run's length: the warm-up (compilation) uses the same.
    warmup_tokens = new_tokens if "cache_implementation" in generate_kwargs else min(new_tokens, 4)
    _generate(model, prompt, warmup_tokens, **generate_kwargs)
    synchronize(device)
    warmup_s = time.perf_counter() - start
    if before_timed is not None:
        before_timed()
    clock = StepClock(device, wait=clock_waits)
    start = time.perf_counter()
    result = {"tokens": _generate(model, prompt, new_tokens, clock, **generate_kwargs),
              "warmup_s": warmup_s}
    end = clock.times[-1] if clock_waits else time.perf_counter()  # (the tokens are on the host)
    result["prefill_ms"] = (clock.times[0] - start) * 1e3
    if new_tokens > 1:
        result["tok_s"] = (new_tokens - 1) / (end - clock.times[0])
        # Per decode step (the clock's intervals; host time where it does not wait): the
        # first step apart (a compiled graph's rebind to a new cache lands there), the
        # median of the rest.
        steps = [b - a for a, b in zip(clock.times, clock.times[1:])]
        result["first_step_ms"] = steps[0] * 1e3
        result["step_ms"] = [round(s * 1e3, 3) for s in steps]  # every step (--json): spikes vs a steady rate
        if len(steps) > 1:
            result["median_step_ms"] = statistics.median(steps[1:]) * 1e3
    return result


def first_mismatch(tokens, reference):
    return next((i for i, (a, b) in enumerate(zip(tokens, reference)) if a != b), None)


def release(device):
    if device == "webgpu":
        torch.webgpu.empty_cache()
    elif device == "cuda":
        torch.cuda.empty_cache()


def compiled(model, mode):
    """`model` whose forward is compiled by torch.compile (Inductor; on webgpu our WGSL
    generator), to be run with a static KV cache (fixed shapes: one graph per phase).

    On CUDA with CUDA graphs (reduce-overhead) the prefill runs eagerly, as transformers'
    own compiled generate does: the static cache allocates its tensors in the first forward,
    and CUDA graph trees would own them as a graph's outputs, which the decode graphs then
    overwrite ("accessing tensor output of CUDAGraphs that has been overwritten"). Our graph
    replay keeps such buffers where they are, so webgpu compiles both phases."""
    forward = torch.compile(model.forward, mode=None if mode == "default" else mode, dynamic=False)
    if mode == "reduce-overhead" and next(model.parameters()).device.type == "cuda":
        eager = model.forward

        def decode_compiled(*args, **kwargs):
            ids = kwargs.get("input_ids")
            ids = kwargs.get("inputs_embeds") if ids is None else ids
            return eager(*args, **kwargs) if ids is not None and ids.shape[1] > 1 else forward(*args, **kwargs)
        model.forward = decode_compiled
    else:
        model.forward = forward
    model._e2e_compiled = True
    return model


def compare(key, tiny=False, dtype=torch.float32, tokens=32, devices=("webgpu",), timed=True,
            init_device="cpu", compile_mode=None):
    """Runs one architecture on the CPU and on `devices` (and, with compile_mode, each
    device again compiled, as "<device> compiled"); returns a result row."""
    spec = MODELS[key]
    model = build_model(spec, tiny=tiny, dtype=dtype, init_device=init_device)
    params = sum(p.numel() for p in model.parameters())
    prompt = prompt_tokens(model.config.vocab_size)
    row = {"model": key, "checkpoint": spec.checkpoint, "params": params,
           "dtype": str(dtype).replace("torch.", ""), "tiny": tiny, "tokens": tokens,
           "devices": {}}
    cpu = greedy(model, prompt, tokens, "cpu", timed)
    row["devices"]["cpu"] = cpu
    for device in devices:
        # A copy, so the CPU model stays as it was (moving a model back reads it all back).
        device_model = copy.deepcopy(model).to(device)
        run = greedy(device_model, prompt, tokens, device, timed)
        del device_model
        release(device)
        run["matched"] = sum(a == b for a, b in zip(run["tokens"], cpu["tokens"]))
        run["first_mismatch"] = first_mismatch(run["tokens"], cpu["tokens"])
        row["devices"][device] = run
    # Compiled runs use a static KV cache; the CPU's tokens with the same cache are their
    # reference (GPT-Neo's local attention gives other tokens with a static cache on the
    # CPU itself).
    static_cpu = greedy(model, prompt, tokens, "cpu", timed=False,
                        cache_implementation="static")["tokens"] if compile_mode else None
    for device in devices if compile_mode else ():
        device_model = compiled(copy.deepcopy(model).to(device), compile_mode)
        run = greedy(device_model, prompt, tokens, device, timed, cache_implementation="static")
        del device_model
        torch._dynamo.reset()  # the next model compiles afresh (Dynamo's recompile limit)
        release(device)
        run["matched"] = sum(a == b for a, b in zip(run["tokens"], static_cpu))
        run["first_mismatch"] = first_mismatch(run["tokens"], static_cpu)
        row["devices"][f"{device} compiled"] = run
    return row


def _format_table(rows, devices):
    head = ["model", "params", "dtype", "webgpu match", "1st mismatch", "webgpu prefill ms"]
    head += [f"tok/s {d}" for d in ["cpu"] + list(devices)]
    head += [f"{d} match" for d in devices if d != "webgpu"]
    lines = []
    for row in rows:
        if "error" in row:
            lines.append([row["model"], "-", row.get("dtype", "-"), "ERROR", row["error"][:60]])
            continue
        runs = row["devices"]
        ours = runs["webgpu"]
        mismatch = ours["first_mismatch"]
        line = [row["model"], f"{row['params'] / 1e6:.1f}M", row["dtype"],
                f"{ours['matched']}/{row['tokens']}", "-" if mismatch is None else str(mismatch),
                f"{ours['prefill_ms']:.0f}" if "prefill_ms" in ours else "-"]
        line += [f"{runs[d]['tok_s']:.2f}" if "tok_s" in runs.get(d, {}) else "-"
                 for d in ["cpu"] + list(devices)]
        for d in devices:
            if d != "webgpu":
                line.append(f"{runs[d]['matched']}/{row['tokens']}" if d in runs else "-")
        lines.append(line)
    widths = [max(len(str(x)) for x in col) for col in zip(head, *[l + [""] * (len(head) - len(l)) for l in lines])]
    fmt = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths))  # noqa: E731
    return "\n".join([fmt(head), fmt(["-" * w for w in widths])] + [fmt(l) for l in lines] + _slow_steps(rows))


def _slow_steps(rows):
    """Decode steps that took over twice the run's median (a pipeline compiled mid-generation,
    a collection): listed under the table, since one such step can halve a short run's tok/s."""
    out = []
    for row in rows:
        for device, run in row.get("devices", {}).items():
            steps = run.get("step_ms") or []
            if len(steps) < 3:
                continue
            median = statistics.median(steps)
            slow = [f"{i}: {ms:.0f} ms" for i, ms in enumerate(steps) if ms > 2 * median]
            if slow:
                out.append(f"  {row['model']} {device}: steps over twice the median ({median:.1f} ms): "
                           + ", ".join(slow))
    return out


def main(argv=None):
    from tqdm import tqdm

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", action="store_true",
                        help="2 layers, hidden 64, vocab 1000 (each architecture's structure kept)")
    parser.add_argument("--dtype", choices=list(DTYPES), default="float32")
    parser.add_argument("--tokens", type=int, default=32, help="new tokens per run (default 32)")
    parser.add_argument("--models", default=",".join(MODELS),
                        help="comma-separated subset of: " + ", ".join(MODELS))
    parser.add_argument("--cuda", action="store_true", help="also run on CUDA when present")
    parser.add_argument("--json", metavar="PATH", help="write the results as JSON")
    parser.add_argument("--compile", nargs="?", const="default", choices=["default", "reduce-overhead"],
                        help="also run each device with torch.compile'd forward and a static KV cache "
                             "(tok/s after compilation; its tokens checked against the CPU's with the "
                             "same static cache)")
    parser.add_argument("--init-device", default="cpu", choices=["cpu", "cuda"],
                        help="where the seeded random weights are drawn (cuda: much faster "
                             "for billion-parameter models; the weights differ from cpu's)")
    args = parser.parse_args(argv)

    keys = [k.strip() for k in args.models.split(",") if k.strip()]
    unknown = [k for k in keys if k not in MODELS]
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(MODELS)}")
    if args.tokens < 1:
        parser.error("--tokens must be at least 1")
    devices = ["webgpu"]
    if args.cuda:
        if torch.cuda.is_available():
            devices.append("cuda")
        else:
            print("--cuda: no CUDA device here; running without it", file=sys.stderr)

    dtype = DTYPES[args.dtype]
    rows = []
    failed = False
    for key in (bar := tqdm(keys, desc="models", unit="model")):
        bar.set_postfix_str(key)
        try:
            row = compare(key, tiny=args.tiny, dtype=dtype, tokens=args.tokens, devices=devices,
                          init_device=args.init_device, compile_mode=args.compile)
            for name in ("webgpu", "webgpu compiled"):
                if dtype == torch.float32 and name in row["devices"] and \
                        row["devices"][name]["first_mismatch"] is not None:
                    failed = True
        except Exception as error:  # noqa: BLE001 - report it in the table, keep going
            row = {"model": key, "dtype": args.dtype, "error": f"{type(error).__name__}: {error}"}
            failed = True
            tqdm.write(f"{key}: {row['error']}")
            traceback.print_exc()
        rows.append(row)

    props = torch.webgpu.get_device_properties()
    print(f"\nwebgpu: {props.name} ({props.backend}); torch {torch.__version__}, "
          f"transformers {transformers.__version__}; {'tiny' if args.tiny else 'full size'}, "
          f"{args.tokens} new tokens, prompt {PROMPT_LENGTH} tokens; tok/s = decode only")
    shown = devices + [f"{d} compiled" for d in devices] if args.compile else devices
    print(_format_table(rows, shown))
    if args.json:
        meta = {"webgpu_device": props.name, "backend": props.backend,
                "torch": torch.__version__, "transformers": transformers.__version__,
                "tiny": args.tiny, "dtype": args.dtype, "tokens": args.tokens,
                "prompt_length": PROMPT_LENGTH, "devices": ["cpu"] + shown, "compile": args.compile}
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "results": rows}, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
