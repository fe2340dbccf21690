"""The compile pass that folds a residual add + RMSNorm into the linears after it
(python/torch_webgpu/compiler/rms_linear.py, emitting torch.ops.webgpu.rms_linear): compiled
decoder blocks against the CPU, one dispatch fewer per folded norm, and the graphs it must
leave alone. (The op itself: test_rms_linear.py.)"""
import copy
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from conftest import assert_same, dev, make
from test_e2e_models import e2e_models
from test_linear_group import dispatches, fresh_compile  # noqa: F401  (fixture)


class RMSNorm(nn.Module):
    """As HF's Llama/Qwen2 write it (float32: their casts vanish)."""

    def __init__(self, hidden, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(hidden) + 0.5)
        self.eps = eps

    def forward(self, h):
        return self.weight * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps))


class Block(nn.Module):
    """A decoder layer's shape: h = x + r, norm -> q/k/v, h2 = h + o(...), norm -> gated MLP."""

    def __init__(self, hidden=64, inner=96, qkv_bias=False, early_read=False, h_from_gemv=False):
        super().__init__()
        self.early_read = early_read
        # h_from_gemv: x goes through a projection first (the previous layer's down_proj),
        # whose GEMV then takes the residual add as its bias.
        self.pre = nn.Linear(hidden, hidden, bias=False) if h_from_gemv else None
        self.norm1, self.norm2 = RMSNorm(hidden), RMSNorm(hidden)
        self.q, self.k, self.v = (nn.Linear(hidden, n, bias=qkv_bias) for n in (64, 32, 32))
        self.o = nn.Linear(64, hidden, bias=False)
        self.gate, self.up = (nn.Linear(hidden, inner, bias=False) for _ in range(2))
        self.down = nn.Linear(inner, hidden, bias=False)

    def forward(self, x, r):
        h = (self.pre(x) if self.pre is not None else x) + r
        n = self.norm1(h)
        q, k, v = self.q(n), self.k(n), self.v(n)
        h2 = h + self.o(q * torch.cat([k, v], -1).sigmoid())
        n2 = self.norm2(h2)
        out = h2 + self.down(F.silu(self.gate(n2)) * self.up(n2))
        # early_read: h is also returned (summed) beside the output: that reader takes
        # rms_linear's h.
        return (out, h.sum(-1)) if self.early_read else out


def compiled_run(model, inputs, monkeypatch, rms):
    """The compiled model's output, dispatches per call and rms_linear nodes made."""
    from torch_webgpu.compiler import rms_linear

    made = []
    fuse = rms_linear.fuse_rms_linears
    monkeypatch.setattr(rms_linear, "fuse_rms_linears", lambda gm: made.append(fuse(gm)) or made[-1])
    monkeypatch.setenv("TORCH_WEBGPU_COMPILE_RMS", rms)
    torch._dynamo.reset()
    compiled = torch.compile(copy.deepcopy(model).to("webgpu"))
    args = [dev(a) for a in inputs]
    with torch.no_grad():
        compiled(*args), compiled(*args)
        before = dispatches()
        out = compiled(*args)
        return out, dispatches() - before, sum(made)


def block_inputs(rows=1, hidden=64, dtype=torch.float32):
    return (make((1, rows, hidden), dtype, seed=30, low=-1, high=1),
            make((1, rows, hidden), dtype, seed=31, low=-1, high=1))


@pytest.mark.parametrize("env,on", [({}, True), ({"TORCH_WEBGPU_COMPILE_RMS": "0"}, False),
                                     ({"TORCH_WEBGPU_COMPILE_HFUSE": "0"}, False),
                                     ({"TORCH_WEBGPU_ADAPTER_KIND": "software"}, False)])
def test_pass_runs_with_horizontal_fusion(monkeypatch, env, on):
    from torch_webgpu.compiler import rms_linear

    monkeypatch.setenv("TORCH_WEBGPU_ADAPTER_KIND", "gpu")
    for name in ("TORCH_WEBGPU_COMPILE_HFUSE", "TORCH_WEBGPU_COMPILE_RMS"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    torch.empty(1, device="webgpu")
    assert rms_linear.enabled() == on


@pytest.mark.usefixtures("fresh_compile", "no_fallback")
@pytest.mark.parametrize("rows,qkv_bias,early_read,h_from_gemv,folds,saved", [
    # q/k/v and gate/up (fresh_compile keeps gate/up a linear_group); o's and down's residual
    # adds ride in their GEMVs (the last add was a kernel of its own).
    (1, False, False, False, 2, 3),
    # A few rows (no GEMV, no residual in the GEMVs); h also summed, which Inductor had fused
    # into the first norm's kernel and now takes a kernel of its own.
    (3, False, True, False, 2, 1),
    # q/k/v with biases: with the residual add and h, 11 bindings, above the adapter's 10...
    (1, True, False, False, 1, 2),
    # ... but 10 when h comes from a GEMV that added the residual.
    (1, True, False, True, 2, 3),
])
def test_compiled_block_folds_its_norms(monkeypatch, rows, qkv_bias, early_read, h_from_gemv, folds, saved):
    model = Block(qkv_bias=qkv_bias, early_read=early_read, h_from_gemv=h_from_gemv).eval()
    check_folds(model, rows, monkeypatch, folds, saved)


def check_folds(model, rows, monkeypatch, folds, saved):
    """The model compiled with the pass and without: both equal the CPU's outputs, the pass
    made `folds` nodes and `saved` dispatches fewer per call."""
    inputs = block_inputs(rows)
    with torch.no_grad():
        expected = model(*inputs)
    out, n_folded, made = compiled_run(model, inputs, monkeypatch, "1")
    plain, n_plain, _ = compiled_run(model, inputs, monkeypatch, "0")
    assert made == folds
    for ours, theirs, reference in zip(*(t if isinstance(t, tuple) else (t,) for t in (out, plain, expected))):
        assert_same(ours, reference, rtol=1e-4, atol=1e-4)
        assert_same(theirs, reference, rtol=1e-4, atol=1e-4)
    assert n_plain - n_folded == saved, (n_plain, n_folded)


@pytest.mark.usefixtures("fresh_compile", "no_fallback")
@pytest.mark.parametrize("case", ["float16", "rows_past_gemv", "no_residual", "norm_read_twice"])
def test_compiled_pass_leaves_other_graphs(monkeypatch, case):
    """Half types (their norms round between steps), more rows than the GEMV takes, a norm
    of a value that is no residual sum, a normalized value read by more than the linears."""

    class Plain(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = RMSNorm(64)
            self.q, self.k = nn.Linear(64, 32, bias=False), nn.Linear(64, 32, bias=False)

        def forward(self, x, r):
            n = self.norm(x if case == "no_residual" else x + r)
            out = self.q(n) * self.k(n)
            return out + n[..., :32] if case == "norm_read_twice" else out

    dtype = torch.float16 if case == "float16" else torch.float32
    model = Plain().to(dtype).eval()
    inputs = block_inputs(rows=8 if case == "rows_past_gemv" else 1, dtype=dtype)
    with torch.no_grad():
        expected = model(*inputs)
    out, _, made = compiled_run(model, inputs, monkeypatch, "1")
    assert made == 0
    tol = 2e-3 if dtype == torch.float16 else 1e-4
    assert_same(out, expected, rtol=tol, atol=tol)


def tiny_decode_per_token(monkeypatch, model, env):
    """{value: webgpu dispatches per replayed token} of the tiny `model`'s compiled decode
    (reduce-overhead, 8 tokens) with environment variable `env` set to "1", then "0";
    each run's greedy tokens equal the CPU's (with the same static cache)."""
    from torch._dynamo.utils import counters

    per_token = {}
    for value in ("1", "0"):
        monkeypatch.setenv(env, value)
        torch._dynamo.reset()
        counters["webgpu"].clear()
        row = e2e_models.compare(model, tiny=True, tokens=8, compile_mode="reduce-overhead")
        ours = row["devices"]["webgpu compiled"]
        assert ours["matched"] == 8 and ours["first_mismatch"] is None, (env, value, ours)
        assert counters["webgpu"]["graph_replays"] > 0
        per_token[value] = counters["webgpu"]["graph_replayed_dispatches"] / counters["webgpu"]["graph_replays"]
    return per_token


@pytest.mark.usefixtures("fresh_compile", "no_fallback")
def test_compiled_tiny_llama_decode(monkeypatch):
    """A tiny Llama's compiled decode (reduce-overhead replays): the CPU's greedy tokens, and
    two dispatches fewer per layer but the first (its input norm reads the embedding, which
    the norm's own kernel had fused)."""
    monkeypatch.setenv("TORCH_WEBGPU_COMPILE_GATED", "1")
    per_token = tiny_decode_per_token(monkeypatch, "llama-3.2-1b", "TORCH_WEBGPU_COMPILE_RMS")
    assert per_token["0"] - per_token["1"] == 2 * e2e_models.TINY_LAYERS - 1, per_token


class LayerNormBlock(nn.Module):
    """OPT's decoder layer shape, LayerNorms: h = x + r, norm -> q/k/v, h2 = h + o(...),
    norm -> fc1 -> relu -> fc2."""

    def __init__(self, hidden=64, inner=96, biases=False, norm_bias=True):
        super().__init__()
        self.norm1 = nn.LayerNorm(hidden, bias=norm_bias)
        self.norm2 = nn.LayerNorm(hidden, bias=norm_bias)
        self.q, self.k, self.v = (nn.Linear(hidden, n, bias=biases) for n in (64, 32, 32))
        self.o = nn.Linear(64, hidden, bias=biases)
        self.fc1, self.fc2 = nn.Linear(hidden, inner), nn.Linear(inner, hidden)
        with torch.no_grad():  # not the identity (LayerNorm's defaults)
            for norm in (self.norm1, self.norm2):
                norm.weight.uniform_(0.5, 1.5)
                if norm_bias:
                    norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x, r):
        h = x + r
        n = self.norm1(h)
        h2 = h + self.o(self.q(n) * torch.cat([self.k(n), self.v(n)], -1).sigmoid())
        return h2 + self.fc2(torch.relu(self.fc1(self.norm2(h2))))


@pytest.mark.usefixtures("fresh_compile", "no_fallback")
@pytest.mark.parametrize("rows,biases,norm_bias,folds,saved", [
    # Both norms: q/k/v as a group (x + r rides in as the residual), fc1 alone with its
    # relu (o's residual add in its GEMV: h2 comes from it; that add and the norm were one
    # kernel).
    (1, False, True, 2, 3),
    # LayerNorms without bias.
    (1, False, False, 2, 3),
    # Biased q/k/v with the norm's bias and residual: 12 bindings, past the adapter's 10;
    # fc1 folds with the residual add (o has a bias: the add stays for the fold to take).
    (1, True, True, 1, 2),
    # A few rows: no residual in the GEMVs, the norm still folds into both.
    (3, False, True, 2, 3),
])
def test_compiled_block_folds_its_layer_norms(monkeypatch, rows, biases, norm_bias, folds, saved):
    torch.manual_seed(0)
    check_folds(LayerNormBlock(biases=biases, norm_bias=norm_bias).eval(), rows, monkeypatch, folds, saved)


@pytest.mark.usefixtures("fresh_compile", "no_fallback")
@pytest.mark.parametrize("model,saved", [("opt", 3), ("gpt2", 5)])
def test_compiled_tiny_layer_norm_decode(monkeypatch, model, saved):
    """Tiny OPT and GPT-2 compiled decode (2 layers; LayerNorms: OPT's biased q/k/v stay
    apart, its fc1 folds with its relu; GPT-2's Conv1D weights have N contiguous, both norms
    fold, c_fc with its gelu): the CPU's greedy tokens, and `saved` dispatches fewer per
    token with the pass (an activation that shared a combo kernel with other work saves
    none)."""
    per_token = tiny_decode_per_token(monkeypatch, model, "TORCH_WEBGPU_COMPILE_RMS")
    assert per_token["0"] - per_token["1"] == saved, per_token


@pytest.mark.usefixtures("fresh_compile", "no_fallback")
@pytest.mark.parametrize("case", ["pre_activation_read", "not_an_activation", "gelu_erf"])
def test_folded_linear_takes_only_its_activation(monkeypatch, case):
    """fc1's activation rides in the fold only where nothing else reads fc1's output or the
    activation's steps, and the pointwise chain computes one of the acts; the result
    equals the CPU's either way."""

    class Mlp(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = nn.LayerNorm(64)
            self.fc1, self.fc2 = nn.Linear(64, 96), nn.Linear(96, 64)

        def forward(self, x, r):
            u = self.fc1(self.norm(x + r))
            if case == "pre_activation_read":
                return self.fc2(torch.relu(u)) + u[..., :64]
            if case == "not_an_activation":
                return self.fc2(torch.tanh(u) * 2.0)
            return self.fc2(F.gelu(u))

    torch.manual_seed(0)
    model = Mlp().eval()
    inputs = block_inputs(1)
    with torch.no_grad():
        expected = model(*inputs)
    out, n_folded, made = compiled_run(model, inputs, monkeypatch, "1")
    assert made == 1
    assert_same(out, expected, rtol=1e-4, atol=1e-4)
    # fc1 + norm, (the activation), fc2 (+ the residual add: its own kernel with pre_activation_read).
    assert n_folded == {"pre_activation_read": 4, "not_an_activation": 3, "gelu_erf": 2}[case], n_folded
