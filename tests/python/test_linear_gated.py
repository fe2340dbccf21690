"""torch.ops.webgpu.linear_gated (a gated MLP's act(x @ w_gate.T + b_gate) * (x @ w_up.T +
b_up) in one GEMV dispatch) against the CPU, and the compile pass that emits it
(python/torch_webgpu/compiler/gated_mlp.py).

The `path` fixture runs both of the op's paths on any adapter: "gpu" (the gated kernel for
up to 4 rows, linears and pointwise ops beyond) and "software" (linears and pointwise ops).
The compiled cases set TORCH_WEBGPU_COMPILE_GATED themselves (fresh_compile turns it off).
Cases cross the kernel's edges: K below one lane sweep and odd (half types then read
element by element instead of in pairs), odd widths, strided x and weights, empty tensors.
"""
import importlib.util
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from conftest import assert_same, dev, make
# linear_group's tolerances, operand views and dispatch count; its fixtures: `path` (both
# of the op's paths on any adapter) and `fresh_compile` (GPU kernels, no graph cache).
from test_linear_group import (DTYPES, TOL, dispatches, dispatches_in_a_fresh_process,  # noqa: F401
                               fresh_compile, path, strided_operands)

ACTS = {"silu": F.silu, "gelu": F.gelu, "gelu_tanh": lambda t: F.gelu(t, approximate="tanh")}
linear_gated = torch.ops.webgpu.linear_gated


def reference(x, w_gate, w_up, b_gate, b_up, act):
    """The CPU's float32 math rounded once to the dtype (as ours accumulates and stores)."""
    f = lambda t: None if t is None else t.float()  # noqa: E731
    gate, up = F.linear(f(x), f(w_gate), f(b_gate)), F.linear(f(x), f(w_up), f(b_up))
    return (ACTS[act](gate) * up).to(x.dtype)


def ours(x, w_gate, w_up, b_gate, b_up, act):
    return linear_gated(dev(x), dev(w_gate), dev(w_up), dev(b_gate), dev(b_up), act)


def pair(n, k, dtype, bias, seed=10):
    w_gate, w_up = (make((n, k), dtype, seed=seed + i, low=-1, high=1) for i in range(2))
    b_gate, b_up = ((make((n,), dtype, seed=seed + 50 + i, low=-1, high=1) if b else None)
                    for i, b in enumerate(bias))
    return w_gate, w_up, b_gate, b_up


@pytest.mark.parametrize("act", list(ACTS))
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,n,bias", [((1, 130), 33, (False, False)), ((2, 130), 8, (True, False)),
                                          ((3, 7), 17, (False, True)), ((2, 2, 257), 40, (True, True)),
                                          ((6, 130), 9, (True, True)), ((1, 128), 33, (False, False)),
                                          ((3, 256), 16, (True, False)), ((2, 256), 24, (False, True)),
                                          ((1, 1056), 12, (True, True))])
def test_matches_cpu(path, act, dtype, shape, n, bias):
    """Rows 1-4 (and 6: past the kernel's rows), K odd or not a multiple of 4/8, odd N; K of
    whole words with either bias, and long enough for the unrolled walk and its remainder."""
    x = make(shape, dtype, seed=1, low=-1, high=1)
    args = pair(n, shape[-1], dtype, bias)
    assert_same(ours(x, *args, act), reference(x, *args, act), **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("start", [0, 1])
def test_strided_views(path, dtype, start):
    xs, weights, (b_strided, b_offset) = strided_operands(dtype, start)
    for biases in ((None, b_strided), (b_offset, None)):
        for x in xs:
            args = (*weights, *biases)
            assert_same(ours(x, *args, "silu"), reference(x, *args, "silu"), **TOL[dtype])


def test_one_dispatch(monkeypatch):
    monkeypatch.setenv("TORCH_WEBGPU_ADAPTER_KIND", "gpu")
    x = dev(make((2, 128), torch.float32, seed=9))
    for bias in ((False, False), (True, True)):
        args = [dev(t) for t in pair(200, 128, torch.float32, bias)]
        linear_gated(x, *args, "silu")  # pipelines, allocations
        before = dispatches()
        linear_gated(x, *args, "silu")
        assert dispatches() - before == 1


@pytest.mark.parametrize("env", [{"TORCH_WEBGPU_LIMITS": "default"}, {"TORCH_WEBGPU_MAX_BINDING_BYTES": "65536"}])
def test_limits_in_a_fresh_process(env):
    """The spec's default limits (8 storage buffers per stage: x, 2 weights, 2 biases, out
    fit) keep the one dispatch; buffers larger than one binding (a 128 KiB buffer holding
    the weights as views) take linears through gemm's windows."""
    setup = (
        "bs = [torch.randn(33, generator=g) for _ in range(2)]\n"
        "ref = F.silu(F.linear(x, big[0:33], bs[0])) * F.linear(x, big[297:330], bs[1])\n"
        "big = big.to('webgpu')\n")
    call = "torch.ops.webgpu.linear_gated(x.to('webgpu'), big[0:33], big[297:330], *[b.to('webgpu') for b in bs], 'silu')"
    dispatches = dispatches_in_a_fresh_process(setup, call, env)
    if "TORCH_WEBGPU_LIMITS" in env:
        assert dispatches == 1


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_empty(path, dtype):
    args = pair(5, 16, dtype, (True, False))
    for x in (make((0, 16), dtype), make((2, 0, 16), dtype)):
        assert_same(ours(x, *args, "silu"), reference(x, *args, "silu"))
    assert_same(ours(make((2, 16), dtype), *pair(0, 16, dtype, (False, False)), "gelu"),
                reference(make((2, 16), dtype), *pair(0, 16, dtype, (False, False)), "gelu"))
    # K == 0: the products are zero, the biases remain.
    x = make((2, 0), dtype)
    args = pair(5, 0, dtype, (True, True))
    assert_same(ours(x, *args, "gelu_tanh"), reference(x, *args, "gelu_tanh"), **TOL[dtype])


def test_zero_dim_x_raises_like_linear(no_fallback):
    w = make((4, 16), torch.float32)
    with pytest.raises(RuntimeError):
        F.linear(make((), torch.float32), w)
    with pytest.raises(RuntimeError):
        linear_gated(dev(make((), torch.float32)), dev(w), dev(w), None, None, "silu")


def test_cpu_and_meta_are_the_definition():
    x = make((2, 3, 20), torch.float32, seed=11)
    args = pair(6, 20, torch.float32, (False, True))
    expected = F.gelu(F.linear(x, args[0])) * F.linear(x, args[1], args[3])
    torch.testing.assert_close(linear_gated(x, *args, "gelu"), expected, rtol=0, atol=0)
    meta = linear_gated(x.to("meta"), *[None if t is None else t.to("meta") for t in args], "silu")
    assert meta.shape == (2, 3, 6) and meta.device.type == "meta"


def test_bad_input_raises(no_fallback):
    x = dev(make((2, 16), torch.float32))
    w = dev(make((4, 16), torch.float32))
    bad = {
        "K differs": (x, w, dev(make((4, 15), torch.float32)), None, None, "silu"),
        "widths differ": (x, w, dev(make((5, 16), torch.float32)), None, None, "silu"),
        "dtype differs": (x, w, dev(make((4, 16), torch.float16)), None, None, "silu"),
        "bias shape": (x, w, w, dev(make((5,), torch.float32)), None, "silu"),
        "bias dtype": (x, w, w, None, dev(make((4,), torch.float16)), "silu"),
        "weight on the CPU": (x, w, make((4, 16), torch.float32), None, None, "silu"),
        "3-D weight": (x, w, dev(make((1, 4, 16), torch.float32)), None, None, "silu"),
        "unknown act": (x, w, w, None, None, "tanh"),
    }
    for what, args in bad.items():
        with pytest.raises(RuntimeError):
            linear_gated(*args)
            pytest.fail(what)


# ---- the compile pass ------------------------------------------------------------------

@pytest.mark.parametrize("env,on", [({}, True), ({"TORCH_WEBGPU_COMPILE_GATED": "0"}, False),
                                     ({"TORCH_WEBGPU_COMPILE_HFUSE": "0"}, False),
                                     ({"TORCH_WEBGPU_ADAPTER_KIND": "software"}, False)])
def test_pass_runs_with_horizontal_fusion(monkeypatch, env, on):
    """Where horizontal fusion runs (GPU adapters, HFUSE not 0), unless GATED=0."""
    from torch_webgpu.compiler import gated_mlp

    monkeypatch.setenv("TORCH_WEBGPU_ADAPTER_KIND", "gpu")
    monkeypatch.delenv("TORCH_WEBGPU_COMPILE_HFUSE", raising=False)
    monkeypatch.delenv("TORCH_WEBGPU_COMPILE_GATED", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    torch.empty(1, device="webgpu")  # (the answer is False until the device has started)
    assert gated_mlp.enabled() == on


class GatedMLP(nn.Module):
    def __init__(self, act, hidden=64, inner=96, bias=False, extra_use=False):
        super().__init__()
        self.act, self.extra_use = act, extra_use
        self.gate = nn.Linear(hidden, inner, bias=bias)
        self.up = nn.Linear(hidden, inner, bias=bias)
        self.down = nn.Linear(inner, hidden, bias=False)

    def forward(self, x):
        gate = self.gate(x)
        if self.act == "silu_by_hand":  # x * sigmoid(x), as some models write it
            activated = gate * torch.sigmoid(gate)
        elif self.act == "relu":  # not one the compile pass matches
            activated = F.relu(gate)
        else:
            activated = ACTS[self.act](gate)
        out = self.down(activated * self.up(x))
        return out + gate.sum() if self.extra_use else out


def compiled_run(model, x, monkeypatch, gated):
    """The compiled model's output, dispatches per call and linear_gated nodes made."""
    from torch_webgpu.compiler import gated_mlp

    made = []
    fuse = gated_mlp.fuse_gated
    monkeypatch.setattr(gated_mlp, "fuse_gated", lambda gm: made.append(fuse(gm)) or made[-1])
    monkeypatch.setenv("TORCH_WEBGPU_COMPILE_GATED", gated)
    torch._dynamo.reset()
    compiled = torch.compile(model.to("webgpu"))
    with torch.no_grad():
        compiled(dev(x)), compiled(dev(x))
        before = dispatches()
        out = compiled(dev(x))
        return out, dispatches() - before, sum(made)


@pytest.mark.usefixtures("fresh_compile", "no_fallback")
@pytest.mark.parametrize("act,dtype,bias", [("silu", torch.float32, False), ("silu_by_hand", torch.float32, True),
                                            ("gelu", torch.float16, False), ("gelu_tanh", torch.bfloat16, True)])
def test_compiled_mlp_is_one_dispatch_fewer(monkeypatch, act, dtype, bias):
    model = GatedMLP(act, bias=bias).to(dtype).eval()
    x = make((1, 1, 64), dtype, seed=23, low=-1, high=1)
    with torch.no_grad():
        expected = model(x)
    out, n_gated, made = compiled_run(model, x, monkeypatch, "1")
    _, n_plain, _ = compiled_run(model, x, monkeypatch, "0")
    assert made == 1
    assert_same(out, expected, **TOL[dtype])
    assert n_plain - n_gated == 1, (n_plain, n_gated)


@pytest.mark.usefixtures("fresh_compile", "no_fallback")
@pytest.mark.parametrize("act,extra_use", [("relu", False), ("silu", True)])
def test_compiled_pass_leaves_other_graphs(monkeypatch, act, extra_use):
    """An activation the pass does not match, or the gate read elsewhere too: left as it was."""
    model = GatedMLP(act, extra_use=extra_use).eval()
    x = make((1, 1, 64), torch.float32, seed=24, low=-1, high=1)
    with torch.no_grad():
        expected = model(x)
    out, _, made = compiled_run(model, x, monkeypatch, "1")
    assert made == 0
    assert_same(out, expected, rtol=1e-4, atol=1e-4)


def _e2e_models():
    script = Path(__file__).resolve().parents[2] / "scripts" / "e2e_models.py"
    spec = importlib.util.spec_from_file_location("e2e_models", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.usefixtures("fresh_compile", "no_fallback")
@pytest.mark.parametrize("key", ["qwen2.5", "llama-3.2-1b"])
def test_compiled_tiny_decode(monkeypatch, key):
    """A tiny model's compiled decode (reduce-overhead replays): the CPU's greedy tokens,
    and one dispatch fewer per layer than without the pass (combo kernels off: they would
    fold the pointwise kernel the pass removes into a neighbour's dispatch anyway)."""
    from test_compile_rms_linear import tiny_decode_per_token

    monkeypatch.setenv("TORCH_WEBGPU_COMPILE_COMBO", "0")
    per_token = tiny_decode_per_token(monkeypatch, key, "TORCH_WEBGPU_COMPILE_GATED")
    assert per_token["0"] - per_token["1"] == _e2e_models().TINY_LAYERS, per_token
