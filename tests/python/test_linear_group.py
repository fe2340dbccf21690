"""torch.ops.webgpu.linear_group (linears sharing their input, side by side: decode's q/k/v
and gate/up) against the CPU, and the compile pass that emits it
(python/torch_webgpu/compiler/horizontal_fusion.py).

GPU adapters run up to 4 rows of x as one GEMV dispatch; software adapters run gemm per
linear. The `path` fixture runs both on any adapter: "gpu" sets
TORCH_WEBGPU_ADAPTER_KIND=gpu (the group kernel for up to 4 rows, tiles beyond),
"software" the other. Cases cross the kernel's edges: K below one lane sweep and odd (half
types then read element by element instead of in pairs), odd widths, strided x and
weights, more linears than fit the stage's storage bindings, empty tensors.
"""
import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_webgpu
from conftest import assert_same, dev, make, run_python

TOL = {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.float16: dict(rtol=2e-3, atol=2e-3),
       torch.bfloat16: dict(rtol=2e-2, atol=2e-2)}
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
linear_group = torch.ops.webgpu.linear_group


@pytest.fixture(params=["gpu", "gpu_scalar", "gpu_lanes32", "gpu_direct_a", "gpu_gated_serial", "software"])
def path(request, monkeypatch):
    """gpu_scalar: the group kernel without its vec4 weight loads (which gpu takes where
    every weight row starts on 16 bytes and K is whole vec4 words: K = 128, 256 here, with
    8 or 16 lanes per column at these K and A staged in workgroup memory); gpu_lanes32:
    the vec4 loads by 32 lanes; gpu_direct_a: A read per word instead of staged;
    gpu_gated_serial: linear_gated's word loads walk gate's weight, then up's (by default
    one loop walks both)."""
    monkeypatch.setenv("TORCH_WEBGPU_ADAPTER_KIND", request.param.split("_")[0])
    if "_" in request.param:
        monkeypatch.setenv("TORCH_WEBGPU_GEMM_VARIANT", "gemv_" + request.param.split("_", 1)[1])
    monkeypatch.setenv("TORCH_WEBGPU_DISABLE_CPU_FALLBACK", "1")
    return request.param


def reference(x, weights, biases):
    """The CPU's linears in float32 math, rounded to the dtype (as ours accumulates)."""
    parts = [F.linear(x.float(), w.float(), None if b is None else b.float())
             for w, b in zip(weights, biases)]
    return torch.cat(parts, -1).to(x.dtype)


def ours(x, weights, biases):
    return linear_group(dev(x), [dev(w) for w in weights], [None if b is None else dev(b) for b in biases])


def dispatches():
    torch_webgpu._C.synchronize()
    return torch_webgpu._C.dispatch_stats()["dispatches"]


def linears(widths, k, dtype, with_bias, seed=10):
    weights = [make((n, k), dtype, seed=seed + i, low=-1, high=1) for i, n in enumerate(widths)]
    biases = [make((n,), dtype, seed=seed + 50 + i, low=-1, high=1) if b else None
              for i, (n, b) in enumerate(zip(widths, with_bias))]
    return weights, biases


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 130), (3, 130), (2, 2, 130), (6, 130), (1, 7), (4, 257), (1, 128),
                                   (3, 256)])
def test_matches_cpu(path, dtype, shape):
    x = make(shape, dtype, seed=1, low=-1, high=1)
    weights, biases = linears((33, 8, 17), shape[-1], dtype, (True, False, True))
    assert_same(ours(x, weights, biases), reference(x, weights, biases), **TOL[dtype])


def strided_operands(dtype, start, k=96, n=40):
    """Views for the GEMV's strides: x with an offset and a row stride, x transposed (column
    stride); a [n, k] weight that is a column slice of a wider matrix (row stride > K, even
    or odd first element), one given transposed (made K-contiguous); a strided bias and a
    bias at an offset (both n long)."""
    big = make((3, 200), dtype, seed=2, low=-1, high=1)
    xs = (big[:, 7:7 + k], make((k, 2), dtype, seed=7, low=-1, high=1).t())
    wide = make((n, 300), dtype, seed=3, low=-1, high=1)
    w_t = make((k, n), dtype, seed=4, low=-1, high=1)
    b_big = make((2 * n + 10,), dtype, seed=5, low=-1, high=1)
    return xs, (wide[:, start:start + k], w_t.t()), (b_big[::2][:n], b_big[1:1 + n])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("start", [0, 1])
def test_strided_views(path, dtype, start):
    xs, (wide, transposed), (b_strided, b_offset) = strided_operands(dtype, start)
    weights = [wide, transposed[:12], make((5, 96), dtype, seed=6, low=-1, high=1)]
    biases = [b_strided, None, b_offset[:5]]
    for x in xs:
        assert_same(ours(x, weights, biases), reference(x, weights, biases), **TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_more_linears_than_bindings(path, dtype, monkeypatch):
    """Five biased linears need 12 storage bindings in one dispatch: the group kernel runs
    as many as fit the stage's limit (llvmpipe's 10: x, 4 weights, 4 biases, out), then the
    rest."""
    x = make((2, 64), dtype, seed=8, low=-1, high=1)
    weights, biases = linears((9, 16, 3, 24, 7), 64, dtype, (True,) * 5)
    before = dispatches()
    out = ours(x, weights, biases)
    if path != "software":
        assert dispatches() - before == 2
    assert_same(out, reference(x, weights, biases), **TOL[dtype])


def test_one_dispatch_for_qkv_and_gate_up(monkeypatch):
    monkeypatch.setenv("TORCH_WEBGPU_ADAPTER_KIND", "gpu")
    x = dev(make((1, 128), torch.float32, seed=9))
    for widths, bias in (((128, 32, 32), True), ((200, 200), False)):
        weights, biases = linears(widths, 128, torch.float32, (bias,) * len(widths))
        weights, biases = [dev(w) for w in weights], [dev(b) if bias else None for b in biases]
        linear_group(x, weights, biases)  # pipelines, allocations
        before = dispatches()
        linear_group(x, weights, biases)
        assert dispatches() - before == 1


@pytest.mark.parametrize("env,expected_dispatches", [({"TORCH_WEBGPU_LIMITS": "default"}, 2),
                                                     ({"TORCH_WEBGPU_MAX_BINDING_BYTES": "65536"}, None)])
def test_limits_in_a_fresh_process(env, expected_dispatches):
    """The spec's default limits (8 storage buffers per stage): a 4-linear biased group
    splits over two dispatches (x, 3 weights, 3 biases, out; then the last). Buffers larger than one binding (a 128 KiB buffer holding
    the weights as views): each linear through gemm's windows."""
    setup = (
        "ws = [big[a:a + n] for a, n in ((0, 20), (20, 7), (100, 7), (297, 33))]\n"
        "bs = [torch.randn(n, generator=g) for n in (20, 7, 7, 33)]\n"
        "ref = torch.cat([F.linear(x, w, b) for w, b in zip(ws, bs)], -1)\n"
        "big = big.to('webgpu')\n"
        "ws_dev = [big[a:a + n] for a, n in ((0, 20), (20, 7), (100, 7), (297, 33))]\n")
    call = "torch.ops.webgpu.linear_group(x.to('webgpu'), ws_dev, [b.to('webgpu') for b in bs])"
    dispatches = dispatches_in_a_fresh_process(setup, call, env)
    if expected_dispatches is not None:
        assert dispatches == expected_dispatches


def dispatches_in_a_fresh_process(setup, call, env):
    """Runs `setup` (seeded `g`, x = 3 x 100 and big = 330 x 100 given, to define `ref`),
    then expression `call`, natively with GPU kernels in a fresh interpreter under `env`;
    checks the result against ref and returns the call's dispatches."""
    code = (
        "import torch, torch_webgpu, torch.nn.functional as F\n"
        "g = torch.Generator().manual_seed(0)\n"
        "x = torch.randn(3, 100, generator=g)\n"
        "big = torch.randn(330, 100, generator=g)\n" + setup +
        "torch.webgpu.synchronize()\n"
        "before = torch_webgpu._C.dispatch_stats()['dispatches']\n"
        "out = " + call + "\n"
        "torch.webgpu.synchronize()\n"
        "print('dispatches', torch_webgpu._C.dispatch_stats()['dispatches'] - before)\n"
        "torch.testing.assert_close(out.cpu(), ref, rtol=1e-4, atol=1e-4)\n"
        "print('ok')\n")
    result = run_python(code, env={**env, "TORCH_WEBGPU_ADAPTER_KIND": "gpu", "TORCH_WEBGPU_DISABLE_CPU_FALLBACK": "1"})
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr[-2000:]
    return int(result.stdout.split("dispatches ")[1].split()[0])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_empty(path, dtype):
    weights, biases = linears((5, 0, 3), 16, dtype, (True, True, False))
    for x in (make((0, 16), dtype), make((2, 0, 16), dtype)):
        assert_same(ours(x, weights, biases), reference(x, weights, biases))
    # K == 0: each linear's columns are its bias, or zeros.
    weights, biases = linears((5, 3), 0, dtype, (True, False))
    x = make((2, 0), dtype)
    assert_same(ours(x, weights, biases), reference(x, weights, biases), exact=True)


def test_cpu_and_meta_are_the_definition():
    x = make((2, 3, 20), torch.float32, seed=11)
    weights, biases = linears((4, 6), 20, torch.float32, (False, True))
    expected = torch.cat([F.linear(x, w, b) for w, b in zip(weights, biases)], -1)
    torch.testing.assert_close(linear_group(x, weights, biases), expected, rtol=0, atol=0)
    meta = linear_group(x.to("meta"), [w.to("meta") for w in weights], [None, biases[1].to("meta")])
    assert meta.shape == (2, 3, 10) and meta.device.type == "meta"


def test_bad_input_raises_like_linear(no_fallback):
    x = make((2, 16), torch.float32)
    w = make((4, 16), torch.float32)

    def raises_like(args_linear, args_group):
        with pytest.raises(Exception) as cpu:
            F.linear(*args_linear)
        with pytest.raises(type(cpu.value)):
            linear_group(*args_group)

    wx = make((4, 15), torch.float32)
    raises_like((x, wx), (dev(x), [dev(w), dev(wx)], [None, None]))  # K differs
    wh = w.half()
    raises_like((x, wh), (dev(x), [dev(w), dev(wh)], [None, None]))  # dtype differs
    raises_like((dev(x), w), (dev(x), [dev(w), w], [None, None]))  # a weight on the CPU
    raises_like((dev(x), dev(w), make((4,), torch.float32)),
                (dev(x), [dev(w)], [make((4,), torch.float32)]))  # a bias on the CPU
    raises_like((dev(make((), torch.float32)), dev(w)), (dev(make((), torch.float32)), [dev(w)], [None]))
    with pytest.raises(RuntimeError, match="one bias"):
        linear_group(dev(x), [dev(w)], [])
    with pytest.raises(RuntimeError, match="shape"):
        linear_group(dev(x), [dev(w)], [dev(make((5,), torch.float32))])


# ---- the compile pass ------------------------------------------------------------------

def test_pass_runs_where_the_group_is_one_dispatch(monkeypatch):
    from torch_webgpu.compiler import horizontal_fusion

    monkeypatch.setenv("TORCH_WEBGPU_ADAPTER_KIND", "gpu")
    torch.empty(1, device="webgpu")  # (the answer is False until the device has started)
    assert horizontal_fusion.enabled()
    monkeypatch.setenv("TORCH_WEBGPU_COMPILE_HFUSE", "0")
    assert not horizontal_fusion.enabled()
    monkeypatch.delenv("TORCH_WEBGPU_COMPILE_HFUSE")
    monkeypatch.setenv("TORCH_WEBGPU_ADAPTER_KIND", "software")  # gemm per linear: nothing saved
    assert not horizontal_fusion.enabled()
    monkeypatch.setenv("TORCH_WEBGPU_GEMM_VARIANT", "gemv")
    assert horizontal_fusion.enabled()


class QwenLikeAttention(nn.Module):
    """q/k/v with biases (grouped heads: k and v narrower), rotary-free attention, o."""

    def __init__(self, hidden=64, heads=4, kv_heads=2):
        super().__init__()
        self.heads, self.kv_heads, self.dim = heads, kv_heads, hidden // heads
        self.q = nn.Linear(hidden, hidden)
        self.k = nn.Linear(hidden, kv_heads * self.dim)
        self.v = nn.Linear(hidden, kv_heads * self.dim)
        self.o = nn.Linear(hidden, hidden, bias=False)

    def forward(self, x, past_k, past_v):
        b, s, _ = x.shape
        q = self.q(x).view(b, s, self.heads, self.dim).transpose(1, 2)
        k = self.k(x).view(b, s, self.kv_heads, self.dim).transpose(1, 2)
        v = self.v(x).view(b, s, self.kv_heads, self.dim).transpose(1, 2)
        k, v = torch.cat([past_k, k], 2), torch.cat([past_v, v], 2)
        a = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        return self.o(a.transpose(1, 2).reshape(b, s, -1))


class GatedMLP(nn.Module):
    def __init__(self, hidden=64, inner=96):
        super().__init__()
        self.gate = nn.Linear(hidden, inner, bias=False)
        self.up = nn.Linear(hidden, inner, bias=False)
        self.down = nn.Linear(inner, hidden, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class DecoderLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn, self.mlp = QwenLikeAttention(), GatedMLP()

    def forward(self, x, past_k, past_v):
        h = x + self.attn(x, past_k, past_v)
        return h + self.mlp(h)


@pytest.fixture
def fresh_compile(monkeypatch):
    import torch._inductor.config as inductor_config

    monkeypatch.setattr(inductor_config, "fx_graph_cache", False)
    monkeypatch.setenv("TORCH_WEBGPU_ADAPTER_KIND", "gpu")  # the group kernel: fewer dispatches
    # Horizontal fusion alone (gated_mlp's pass, tested in test_linear_gated.py, would
    # take the gate/up group further).
    monkeypatch.setenv("TORCH_WEBGPU_COMPILE_GATED", "0")
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def decoder_inputs(tokens):
    return (make((1, tokens, 64), torch.float32, seed=20, low=-1, high=1),
            make((1, 2, 5, 16), torch.float32, seed=21, low=-1, high=1),
            make((1, 2, 5, 16), torch.float32, seed=22, low=-1, high=1))


def compiled_dispatches(model, inputs, monkeypatch, hfuse, mode=None):
    """The compiled model's output and dispatches per call (after warm-up and capture), with
    the horizontal fusion alone (rms_linear, with its residual adds in GEMVs, is
    test_compile_rms_linear.py's)."""
    monkeypatch.setenv("TORCH_WEBGPU_COMPILE_HFUSE", hfuse)
    monkeypatch.setenv("TORCH_WEBGPU_COMPILE_RMS", "0")
    torch._dynamo.reset()
    compiled = torch.compile(copy.deepcopy(model).to("webgpu"), mode=mode)
    args = [dev(a) for a in inputs]
    with torch.no_grad():
        compiled(*args), compiled(*args)
        before = dispatches()
        out = compiled(*args)
        return out, dispatches() - before


@pytest.mark.usefixtures("fresh_compile", "no_fallback")
def test_compiled_decoder_layer_fuses_qkv_and_gate_up(monkeypatch):
    model = DecoderLayer().eval()
    inputs = decoder_inputs(1)
    with torch.no_grad():
        expected = model(*inputs)
    fused, n_fused = compiled_dispatches(model, inputs, monkeypatch, "1")
    plain, n_plain = compiled_dispatches(model, inputs, monkeypatch, "0")
    assert_same(fused, expected, rtol=1e-4, atol=1e-4)
    assert_same(plain, expected, rtol=1e-4, atol=1e-4)
    # q/k/v: 3 dispatches -> 1; gate/up: 2 -> 1.
    assert n_plain - n_fused == 3, (n_plain, n_fused)


@pytest.mark.usefixtures("fresh_compile", "no_fallback")
def test_compiled_prefill_keeps_its_gemms(monkeypatch):
    model = DecoderLayer().eval()
    inputs = decoder_inputs(8)  # 8 rows of x: above the pass's MAX_ROWS
    with torch.no_grad():
        expected = model(*inputs)
    fused, n_fused = compiled_dispatches(model, inputs, monkeypatch, "1")
    _, n_plain = compiled_dispatches(model, inputs, monkeypatch, "0")
    assert_same(fused, expected, rtol=1e-4, atol=1e-4)
    assert n_fused == n_plain


@pytest.mark.usefixtures("fresh_compile", "no_fallback")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_compiled_half_mlp(monkeypatch, dtype):
    model = GatedMLP().to(dtype).eval()
    x = make((1, 1, 64), dtype, seed=23, low=-1, high=1)
    with torch.no_grad():
        expected = model(x)
    out, n_fused = compiled_dispatches(model, (x,), monkeypatch, "1")
    _, n_plain = compiled_dispatches(model, (x,), monkeypatch, "0")
    assert_same(out, expected, rtol=2e-2, atol=2e-2)
    assert n_plain - n_fused == 1


@pytest.mark.usefixtures("fresh_compile", "no_fallback")
def test_reduce_overhead_replays_the_fused_graph(monkeypatch):
    """Replays match the CPU with changing inputs, and the captured graph holds 3 fewer
    dispatches than without the pass."""
    from torch._dynamo.utils import counters
    from torch_webgpu.compiler.graph_replay import GraphReplayer

    captured = []
    capture = GraphReplayer._capture

    def counting_capture(self, inputs):
        result = capture(self, inputs)
        captured.append(result.graph.num_dispatches())
        return result

    monkeypatch.setattr(GraphReplayer, "_capture", counting_capture)
    monkeypatch.setenv("TORCH_WEBGPU_COMPILE_RMS", "0")  # (the horizontal fusion alone)
    model = DecoderLayer().eval()
    for hfuse in ("1", "0"):
        monkeypatch.setenv("TORCH_WEBGPU_COMPILE_HFUSE", hfuse)
        torch._dynamo.reset()
        counters["webgpu"].clear()
        compiled = torch.compile(copy.deepcopy(model).to("webgpu"), mode="reduce-overhead")
        with torch.no_grad():
            for seed in range(4):
                inputs = [make(a.shape, torch.float32, seed=30 + seed * 3 + i, low=-1, high=1)
                          for i, a in enumerate(decoder_inputs(1))]
                assert_same(compiled(*[dev(a) for a in inputs]), model(*inputs), rtol=1e-4, atol=1e-4)
        assert counters["webgpu"]["graph_replays"] == 3
    assert len(captured) == 2 and captured[1] - captured[0] == 3, captured
