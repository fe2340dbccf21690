"""Every architecture of scripts/e2e_models.py, tiny (2 layers, hidden 64, vocab 1000, the
structure kept), generates the same greedy tokens on webgpu as on the CPU, natively."""
import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "e2e_models.py"
_spec = importlib.util.spec_from_file_location("e2e_models", SCRIPT)
e2e_models = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(e2e_models)

TOKENS = 16


@pytest.mark.parametrize("key", list(e2e_models.MODELS))
def test_tiny_model_generates_cpu_tokens(key, no_fallback):
    row = e2e_models.compare(key, tiny=True, tokens=TOKENS, timed=False)
    cpu_tokens = row["devices"]["cpu"]["tokens"]
    ours = row["devices"]["webgpu"]
    assert len(cpu_tokens) == TOKENS
    # A model that repeats one token would hide wrong numbers: the weights' gain prevents it.
    assert len(set(cpu_tokens)) > 1, cpu_tokens
    assert ours["tokens"] == cpu_tokens, f"first mismatch at {ours['first_mismatch']}"
    assert ours["matched"] == TOKENS


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
@pytest.mark.parametrize("key", ["llama-3.2-1b", "gpt2"])
def test_compiled_static_cache_generate_gives_cpu_tokens(key, mode, no_fallback):
    """--compile: torch.compile'd forward (our WGSL generator) with HF's static KV cache;
    reduce-overhead replays the decode step through a torch.webgpu graph."""
    from torch._dynamo.utils import counters

    counters["webgpu"].clear()
    row = e2e_models.compare(key, tiny=True, tokens=8, timed=True, compile_mode=mode)
    ours = row["devices"]["webgpu compiled"]
    # Against the CPU's tokens with the same static cache (for these two architectures the
    # same as the dynamic cache's).
    assert ours["matched"] == 8 and ours["first_mismatch"] is None, ours
    assert ours["tokens"] == row["devices"]["cpu"]["tokens"]
    assert ours["tok_s"] > 0
    if mode == "reduce-overhead":
        assert counters["webgpu"]["graph_replays"] >= 8, dict(counters["webgpu"])
        assert counters["webgpu"]["graph_fallbacks"] == 0


def test_repeated_compiled_generate_rebinds_instead_of_capturing(no_fallback):
    """Each HF generate makes a new StaticCache: from the third call on (the first call's
    cache stays referenced by its compilation) the decode graph is not captured again, and
    every call still gives the CPU's tokens. The pool hands the new cache the freed one's
    buffers (lowest address first), so the graph usually replays as it is; where the cache
    lands elsewhere it is pointed at the new one (rebind: test_compile_graphs.py covers
    that path on its own)."""
    import copy

    import torch
    from torch._dynamo.utils import counters

    spec = e2e_models.MODELS["qwen2.5"]
    model = e2e_models.build_model(spec, tiny=True)
    prompt = e2e_models.prompt_tokens(model.config.vocab_size)
    cpu = e2e_models.greedy(model, prompt, 6, "cpu", timed=False, cache_implementation="static")
    ours = e2e_models.compiled(copy.deepcopy(model).to("webgpu"), "reduce-overhead")
    torch._dynamo.reset()
    counters["webgpu"].clear()
    captures = []
    for _ in range(4):
        run = e2e_models.greedy(ours, prompt, 6, "webgpu", timed=False, cache_implementation="static")
        assert run["tokens"] == cpu["tokens"]
        captures.append(counters["webgpu"]["graph_captures"])
    torch._dynamo.reset()
    assert captures[3] == captures[1], captures  # calls 3 and 4: no capture
    assert counters["webgpu"]["graph_replays"] >= 3 * 5  # calls 2-4: every decode step replayed
    assert counters["webgpu"]["graph_fallbacks"] == 0


def test_tiny_keeps_the_architecture():
    """The tiny configs keep grouped KV heads, wide heads and local attention."""
    tiny = {key: e2e_models.tiny_config(spec.config) for key, spec in e2e_models.MODELS.items()}
    assert tiny["qwen2.5"]["num_key_value_heads"] < tiny["qwen2.5"]["num_attention_heads"]
    assert tiny["qwen1.5"]["num_key_value_heads"] == tiny["qwen1.5"]["num_attention_heads"]
    assert tiny["qwen3"]["head_dim"] * tiny["qwen3"]["num_attention_heads"] > tiny["qwen3"]["hidden_size"]
    assert tiny["gpt-neo"]["attention_types"] == [[["global", "local"], 1]]
    for key, config in tiny.items():
        assert config["vocab_size"] == e2e_models.TINY_VOCAB, key
        assert all(config.get(name) is None or config[name] < e2e_models.TINY_VOCAB
                   for name in e2e_models.TOKEN_IDS), key


def test_script_table_json_and_exit_status(tmp_path, capsys, no_fallback):
    out = tmp_path / "e2e.json"
    status = e2e_models.main(["--tiny", "--models", "gpt2", "--tokens", "4", "--json", str(out)])
    assert status == 0
    printed = capsys.readouterr().out
    assert "gpt2" in printed and "4/4" in printed
    result = json.loads(out.read_text())
    row = result["results"][0]
    assert result["meta"]["tiny"] and row["model"] == "gpt2"
    assert row["devices"]["webgpu"]["tokens"] == row["devices"]["cpu"]["tokens"]
    assert row["devices"]["webgpu"]["tok_s"] > 0 and row["devices"]["webgpu"]["prefill_ms"] > 0


def test_script_rejects_unknown_models():
    with pytest.raises(SystemExit):
        e2e_models.main(["--tiny", "--models", "gpt2,not-a-model"])


def test_slow_steps_are_listed_under_the_table():
    """A step over twice its run's median (a pipeline compiled mid-generation) is named with
    its index under the table; flat runs and runs too short for a median add nothing."""
    rows = [{"model": "m", "devices": {"webgpu": {"step_ms": [5.0, 5.2, 4.9, 40.0, 5.1]},
                                       "cuda": {"step_ms": [3.0, 3.1, 2.9, 3.0]},
                                       "cpu": {"step_ms": [1.0, 9.0]}}}]
    lines = e2e_models._slow_steps(rows)
    assert lines == ["  m webgpu: steps over twice the median (5.1 ms): 3: 40 ms"]
