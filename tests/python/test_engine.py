"""The AOT engine (docs/ENGINE.md): programs exported by torch_webgpu.aot and run by the
C++ engine, through the Python API and the twgpu-run CLI, against PyTorch on the CPU and,
where the engine must equal eager to the bit, against eager webgpu."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.nn as nn

import torch_webgpu
from torch_webgpu import _C

if not hasattr(_C, "_engine"):
    pytest.skip("torch_webgpu built without the engine (nlohmann-json3-dev missing)", allow_module_level=True)

from torch_webgpu import aot, engine  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def twgpu_run():
    path = os.environ.get("TWGPU_RUN", os.path.join(REPO, "build", "twgpu-run"))
    assert os.path.exists(path), f"twgpu-run not found at {path} (build it, or set TWGPU_RUN)"
    return path


def export_and_load(model, inputs, tmp_path):
    aot.export(model, inputs, str(tmp_path))
    return engine.Program.load(str(tmp_path))


def run_engine(model, inputs, tmp_path):
    prog = export_and_load(model, inputs, tmp_path)
    # numpy arrays, or tensors for bfloat16 (numpy has none)
    return [y if isinstance(y, torch.Tensor) else torch.from_numpy(y) for y in prog.run(*inputs)]


def eager_webgpu(model, inputs):
    with torch.no_grad():
        out = model.to("webgpu")(*[x.to("webgpu") for x in inputs])
    return out.cpu()


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 16), nn.GELU(), nn.Linear(16, 4)).eval()


def cnn():
    torch.manual_seed(0)
    m = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=2), nn.BatchNorm2d(8), nn.SiLU(),
        nn.AvgPool2d(2), nn.Flatten(), nn.Linear(8 * 2 * 2, 10)).eval()
    with torch.no_grad():
        for bn in (m[1], m[5]):
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-0.5, 0.5)
    return m


@pytest.mark.usefixtures("no_fallback")
def test_mlp_matches_cpu_and_eager(tmp_path):
    x = torch.randn(5, 8)
    (y,) = run_engine(mlp(), (x,), tmp_path)
    with torch.no_grad():
        torch.testing.assert_close(y, mlp()(x), rtol=1e-5, atol=1e-6)
    assert torch.equal(y, eager_webgpu(mlp(), (x,))), "engine and eager differ in bits"


@pytest.mark.usefixtures("no_fallback")
def test_cnn_matches_cpu_and_eager(tmp_path):
    x = torch.randn(2, 3, 16, 16)
    prog = export_and_load(cnn(), (x,), tmp_path)
    ops = {c["op"] for c in json.load(open(tmp_path / "program.json"))["chain"]}
    assert {"aten::convolution", "aten::_native_batch_norm_legit_no_training", "aten::relu",
            "aten::max_pool2d_with_indices", "aten::avg_pool2d", "aten::addmm"} <= ops
    (y,) = [torch.from_numpy(a) for a in prog.run(x)]
    with torch.no_grad():
        torch.testing.assert_close(y, cnn()(x), rtol=1e-5, atol=1e-5)
    assert torch.equal(y, eager_webgpu(cnn(), (x,)))
    # A second run on other data reuses the loaded program.
    x2 = torch.randn(2, 3, 16, 16)
    (y2,) = prog.run(x2)
    with torch.no_grad():
        torch.testing.assert_close(torch.from_numpy(y2), cnn()(x2), rtol=1e-5, atol=1e-5)


def test_transformer_encoder_layer_matches_cpu(tmp_path):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True).eval()
    x = torch.randn(2, 7, 32)
    (y,) = run_engine(layer, (x,), tmp_path)
    with torch.no_grad():
        # The CPU's eval fast path (_transformer_encoder_layer_fwd) sums in another order.
        torch.testing.assert_close(y, layer(x), rtol=1e-4, atol=1e-5)


class TinyLM(nn.Module):
    """Embedding, layer norm, attention-like softmax, cat, slicing: the rest of the op set."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.emb = nn.Embedding(50, 16)
        self.norm = nn.LayerNorm(16)
        self.proj = nn.Linear(16, 16)

    def forward(self, ids):
        h = self.norm(self.emb(ids))                       # [B, T, 16]
        scores = torch.softmax(h @ h.transpose(1, 2) / 4.0, dim=-1)
        ctx = torch.bmm(scores, h)
        both = torch.cat([ctx, h[:, :, :8]], dim=-1)       # [B, T, 24]
        pooled = both.mean(dim=1)                          # [B, 24]
        return torch.tanh(self.proj(torch.sigmoid(ctx))) + pooled[:, None, :16] - both[:, :, 8:].sub(1.0)


def test_embedding_norm_softmax_cat_model(tmp_path):
    ids = torch.randint(0, 50, (3, 6))
    (y,) = run_engine(TinyLM().eval(), (ids,), tmp_path)
    with torch.no_grad():
        torch.testing.assert_close(y, TinyLM().eval()(ids), rtol=1e-5, atol=1e-5)


class Views(nn.Module):
    def forward(self, x):  # x: [4, 6, 5]
        a = x.permute(2, 0, 1).reshape(5, 24)               # copy: view of a permuted tensor
        b = x.transpose(0, 1)[1:5:2].select(2, 3)           # strided view, no copy
        c = b.unsqueeze(0).expand(3, 2, 4).contiguous()
        d = torch.cat([c.flatten(), a.t()[:, 1]])           # [24 + 24]
        e = x[:, 1:3].reshape(4, 10)                         # a view of a sliced tensor
        return d * 2.0, a[::2].clone(), e + 1.0


def test_views_and_copies_are_exact(tmp_path):
    x = torch.randn(4, 6, 5)
    got = run_engine(Views(), (x,), tmp_path)
    program = json.load(open(tmp_path / "program.json"))
    views = [c for c in program["chain"] if "mem" not in program["values"][c["outputs"][0]]]
    assert len(views) >= 8  # strided views, no memory of their own
    for g, e in zip(got, Views()(x)):
        assert torch.equal(g, e)


class Dtypes(nn.Module):
    def forward(self, i, j, h):
        s = i + j * 3 - 7                                  # int64
        mask = s > 0                                       # bool
        w = torch.where(mask, h, h * 0.5)                  # float16
        return s, mask, w, (i.to(torch.float32) / 4.0)


def test_dtypes_int64_bool_float16(tmp_path):
    i = torch.randint(-2**40, 2**40, (3, 4))
    j = torch.randint(-100, 100, (4,))
    h = torch.randn(3, 4).to(torch.float16)
    got = run_engine(Dtypes(), (i, j, h), tmp_path)
    for g, e in zip(got, Dtypes()(i, j, h)):
        assert g.dtype == e.dtype
        torch.testing.assert_close(g, e, rtol=0, atol=0)


class Reductions(nn.Module):
    def forward(self, x):
        return (x * 3.0).mean(dim=(0, 1)), x.sum(dim=-1, keepdim=True)


def test_zero_dim_result_and_empty_batch(tmp_path):
    x = torch.randn(3, 5)
    m, s = run_engine(Reductions(), (x,), tmp_path / "red")
    em, es = Reductions()(x)
    assert m.shape == () and s.shape == (3, 1)
    torch.testing.assert_close(m, em)
    torch.testing.assert_close(s, es)
    empty = torch.randn(0, 8)
    (y,) = run_engine(mlp(), (empty,), tmp_path / "empty")
    assert y.shape == (0, 4)


def encoder():
    torch.manual_seed(0)
    return nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True).eval()


CLI_MODELS = {"mlp": (mlp, (5, 8)), "cnn": (cnn, (2, 3, 16, 16)), "encoder": (encoder, (2, 7, 32))}


@pytest.mark.parametrize("name", sorted(CLI_MODELS))
def test_cli_runs_exported_models(name, tmp_path):
    make, shape = CLI_MODELS[name]
    x = torch.randn(shape)
    aot.export(make(), (x,), str(tmp_path))
    np.save(tmp_path / "x.npy", x.numpy())
    r = subprocess.run([twgpu_run(), str(tmp_path), "--input", str(tmp_path / "x.npy"),
                        "--output", str(tmp_path / "y.npy"), "--repeat", "3"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "dispatches per run" in r.stdout and "submits per run 1.0" in r.stdout, r.stdout
    y = torch.from_numpy(np.load(tmp_path / "y.npy"))
    with torch.no_grad():
        torch.testing.assert_close(y, make()(x), rtol=1e-4, atol=1e-5)
    (py,) = engine.Program.load(str(tmp_path)).run(x)
    assert torch.equal(y, torch.from_numpy(py)), "the CLI and the Python API differ"
    # Wrong input shape: a clear error and a failing exit status, no crash.
    bad = np.zeros((1,) + tuple(shape), np.float32)
    np.save(tmp_path / "bad.npy", bad)
    r = subprocess.run([twgpu_run(), str(tmp_path), "--input", str(tmp_path / "bad.npy")],
                       capture_output=True, text=True, timeout=300)
    expected = f"input 0: expected float32{list(shape)}, got float32{list(bad.shape)}"
    assert r.returncode == 1 and expected in r.stderr, r.stderr


def test_aot_cli_exports(tmp_path):
    (tmp_path / "models_for_cli.py").write_text(
        "import torch\n"
        "def make():\n"
        "    torch.manual_seed(1)\n"
        "    return torch.nn.Sequential(torch.nn.Linear(6, 3), torch.nn.Tanh()).eval()\n")
    out = tmp_path / "prog"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(REPO, "python"), str(tmp_path)]))
    r = subprocess.run([sys.executable, "-m", "torch_webgpu.aot", "export", "models_for_cli:make",
                        "--input-shape", "2,6", "--out", str(out)], capture_output=True, text=True,
                       cwd=tmp_path, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    x = torch.randn(2, 6)
    (y,) = engine.Program.load(str(out)).run(x)
    torch.manual_seed(1)
    ref = torch.nn.Sequential(torch.nn.Linear(6, 3), torch.nn.Tanh())(x)
    torch.testing.assert_close(torch.from_numpy(y), ref.detach(), rtol=1e-5, atol=1e-6)


SEED = {
    "version": 1,
    "values": [
        {"type": "tensor", "dtype": "float32", "shape": [2, 2], "mem": {"pool": 0, "offset": 0}},
        {"type": "tensor", "dtype": "float32", "shape": [2, 2], "mem": {"pool": 1, "offset": 0}},
        {"type": "tensor", "dtype": "float32", "shape": [2, 2], "mem": {"pool": 2, "offset": 0}},
        {"type": "float", "value": 1.5},
        {"type": "tensor", "dtype": "float32", "shape": [2, 2], "mem": {"pool": 3, "offset": 0}},
        {"type": "tensor", "dtype": "float32", "shape": [2, 2], "mem": {"pool": 0, "offset": 0}},
    ],
    "chain": [{"op": "aten::add.Tensor", "args": [0, 1, 3], "outputs": [4]},
              {"op": "aten::mm", "args": [4, 2], "outputs": [5]}],
    "inputIds": [0, 1, 2],
    "outputIds": [5],
    "memoryPlan": {"pools": [{"id": i, "size": 16} for i in range(4)]},
}
SEED_IN = [np.array([[1, 2], [3, 4]], np.float32), np.array([[2, 4], [6, 8]], np.float32),
           np.array([[4, 8], [12, 16]], np.float32)]


def test_seed_program_and_context_api():
    prog = engine.Program.load(json.dumps(SEED), b"")
    (y,) = prog.run(*SEED_IN)
    assert y.tolist() == [[112, 160], [240, 352]]
    ctx = engine.Context()
    a = ctx.tensor("float32", [2, 2]).set_data(SEED_IN[0])
    b = ctx.tensor(torch.float32, [2, 2]).set_data(torch.from_numpy(SEED_IN[1]))
    c = ctx.tensor(np.float32, [2, 2]).set_data(SEED_IN[2].tobytes())
    s, p, out = (ctx.tensor("float32", [2, 2]) for _ in range(3))
    before = ctx.dispatches
    ctx.record_shader("aten::add.Tensor", [a, b, 1.5], [s])
    ctx.record_shader("aten::mm", [s, c], [p])
    ctx.record_program(json.dumps(SEED), b"", [a, b, c, out])
    ctx.submit()
    ctx.sync()
    assert ctx.dispatches - before == 2 + 3 + 2 + 1  # 2 shaders; 3 input copies, 2 ops, 1 output copy
    expected = (SEED_IN[0] + 1.5 * SEED_IN[1]) @ SEED_IN[2]
    assert np.array_equal(s.get_data(), SEED_IN[0] + 1.5 * SEED_IN[1])
    assert np.array_equal(p.get_data(), expected) and np.array_equal(out.get_data(), expected)
    ints = ctx.tensor("int64", [3]).set_data(np.array([5, -7, 2**40], np.int64))
    r = ctx.tensor("int64", [3])
    ctx.record_shader("aten::mul.Scalar", [ints, 3], [r])
    assert r.get_data().tolist() == [15, -21, 3 * 2**40]


def test_loader_and_run_errors():
    bad = json.loads(json.dumps(SEED))
    bad["chain"][1]["op"] = "aten::frobnicate"
    with pytest.raises(ValueError, match=r"chain\[1\].*aten::frobnicate"):
        engine.Program.load(json.dumps(bad), b"")
    overlap = json.loads(json.dumps(SEED))
    overlap["values"][4]["mem"]["pool"] = 0
    with pytest.raises(ValueError, match="values 0 and 4 share bytes of pool 0"):
        engine.Program.load(json.dumps(overlap), b"")
    with pytest.raises(ValueError, match="not valid JSON"):
        engine.Program.load(json.dumps(SEED)[:-5], b"")
    prog = engine.Program.load(json.dumps(SEED), b"")
    with pytest.raises(ValueError, match=r"input 1: expected float32\[2, 2\], got float32\[4\]"):
        prog.run(SEED_IN[0], SEED_IN[1].reshape(4), SEED_IN[2])
    with pytest.raises(ValueError, match="got int32"):
        prog.run(SEED_IN[0], SEED_IN[1].astype(np.int32), SEED_IN[2])
    with pytest.raises(ValueError, match="takes 3 inputs"):
        prog.run(SEED_IN[0])
    ctx = engine.Context()
    with pytest.raises(ValueError, match="holds 16 bytes, got 12"):
        ctx.tensor("float32", [2, 2]).set_data(np.zeros(3, np.float32))
    t = ctx.tensor("float32", [2, 3])
    with pytest.raises(ValueError, match="cannot be multiplied"):
        ctx.record_shader("aten::mm", [t, t], [ctx.tensor("float32", [2, 3])])


def test_export_reports_ops_the_engine_lacks(tmp_path):
    class Cumsum(nn.Module):
        def forward(self, x):
            return torch.cumsum(x, 0)
    with pytest.raises(NotImplementedError, match="aten::cumsum"):
        aot.export(Cumsum(), (torch.randn(4),), str(tmp_path))


def test_memory_plan_shares_pools(tmp_path):
    deep = nn.Sequential(*[m for _ in range(6) for m in (nn.Linear(16, 16), nn.ReLU())]).eval()
    program = aot.export(deep, (torch.randn(4, 16),), str(tmp_path))
    owned = [v for v in program["values"] if v["type"] == "tensor" and "mem" in v]
    assert len(program["memoryPlan"]["pools"]) <= 3 < len(owned)
    x = torch.randn(4, 16)
    (y,) = engine.Program.load(str(tmp_path)).run(x)
    with torch.no_grad():
        torch.testing.assert_close(torch.from_numpy(y), deep(x), rtol=1e-5, atol=1e-6)


def test_planner_keeps_overlapping_lifetimes_apart():
    from torch_webgpu.aot import plan_pools
    placement, sizes = plan_pools([(0, 100, -1, 1), (1, 300, 0, 2), (2, 50, 2, 3), (3, 200, 3, 4)])
    assert placement[0] != placement[1] and placement[1] != placement[2]
    assert placement[3] == placement[1]  # born after 1 died: reuses its pool
    assert placement[2] == placement[0]
    assert all(s % 256 == 0 for s in sizes) and len(sizes) == 2


class Fn(nn.Module):
    def __init__(self, fn, *params):
        super().__init__()
        self.fn = fn
        self.params = nn.ParameterList([nn.Parameter(p, requires_grad=False) for p in params])

    def forward(self, *xs):
        return self.fn(*xs, *self.params)


F = torch.nn.functional
OP_CASES = {
    # name: (fn, inputs, parameters) -- inputs are often strided views inside fn.
    "softmax_dim0_transposed": (lambda x: torch.softmax(x.t(), 0), [(6, 5)], []),
    "log_softmax_last": (lambda x: torch.log_softmax(x[:, 1:], -1), [(4, 9)], []),
    "layer_norm_strided": (lambda x, w, b: F.layer_norm(x[:, ::2], (4,), w, b, 1e-5), [(3, 8)], [(4,), (4,)]),
    "layer_norm_no_affine": (lambda x: F.layer_norm(x, (2, 5)), [(3, 2, 5)], []),
    "gelu_tanh_silu_sigmoid": (lambda x: F.gelu(x.t(), approximate="tanh") + F.silu(x.t()) * torch.sigmoid(x.t()), [(4, 6)], []),
    "div_modes": (lambda x, y: (torch.div(x, y, rounding_mode="floor"), torch.div(x, y, rounding_mode="trunc"), x / y), [(5, 3), (3,)], []),
    "bmm_transposed": (lambda a, b: torch.bmm(a, b.transpose(1, 2)), [(2, 3, 4), (2, 5, 4)], []),
    "addmm_beta_alpha": (lambda a, b, c: torch.addmm(c, a, b.t(), beta=0.5, alpha=2.0), [(3, 4), (5, 4)], [(5,)]),
    "linear_3d_noncontiguous": (lambda x, w, b: F.linear(x.transpose(0, 1), w, b), [(4, 2, 6)], [(3, 6), (3,)]),
    "conv1d_dilated": (lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=2, dilation=2), [(2, 4, 17)], [(6, 4, 3), (6,)]),
    "conv2d_pointwise_nobias": (lambda x, w: F.conv2d(x, w), [(2, 4, 5, 5)], [(3, 4, 1, 1)]),
    "conv2d_strided_input": (lambda x, w, b: F.conv2d(x.permute(0, 3, 1, 2), w, b, padding=1, groups=2), [(1, 6, 6, 4)], [(4, 2, 3, 3), (4,)]),
    "conv3d": (lambda x, w: F.conv3d(x, w, stride=(1, 2, 1)), [(1, 2, 4, 5, 4)], [(3, 2, 2, 2, 2)]),
    "max_pool_dilated_ceil": (lambda x: F.max_pool2d(x, 3, 2, 1, dilation=2, ceil_mode=True), [(2, 3, 9, 8)], []),
    "max_pool_3d_input_strided": (lambda x: F.max_pool2d(x.transpose(1, 2), 2), [(3, 8, 6)], []),
    "avg_pool_ceil_exclude_pad": (lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False), [(2, 3, 8, 7)], []),
    "avg_pool_divisor": (lambda x: F.avg_pool2d(x, 2, divisor_override=3), [(1, 2, 6, 6)], []),
    "mean_middle_dims_keepdim": (lambda x: x.mean(dim=(1, 2), keepdim=True), [(2, 3, 4, 5)], []),
    # constant_pad_nd: padding (EfficientNet's "same"), a value, cropping by negative pads
    "pad_same_and_crop": (lambda x: (F.pad(x, (0, 1, 1, 2)), F.pad(x.transpose(2, 3), (1, 1), value=-2.5),
                                     F.pad(x, (-1, 2, 0, -3))), [(2, 3, 5, 6)], []),
}


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("name", sorted(OP_CASES))
def test_ops_match_cpu_and_eager(name, tmp_path):
    fn, shapes, params = OP_CASES[name]
    torch.manual_seed(0)
    xs = tuple(torch.randn(s) for s in shapes)
    model = Fn(fn, *[torch.randn(s) for s in params]).eval()
    got = run_engine(model, xs, tmp_path)
    with torch.no_grad():
        want = model(*xs)
        want = list(want) if isinstance(want, tuple) else [want]
        eager = model.to("webgpu")(*[x.to("webgpu") for x in xs])
        eager = [e.cpu() for e in (eager if isinstance(eager, tuple) else [eager])]
    for g, w, e in zip(got, want, eager):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)
        assert torch.equal(g, e), f"{name}: engine and eager differ by {(g - e).abs().max()}"


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_mlp(dtype, tmp_path):
    model = mlp().to(dtype)
    x = torch.randn(5, 8).to(dtype)
    (y,) = run_engine(model, (x,), tmp_path)
    assert y.dtype == dtype
    with torch.no_grad():
        torch.testing.assert_close(y, model(x), rtol=5e-2, atol=5e-2)
        assert torch.equal(y, eager_webgpu(model, (x,)))


class PassThrough(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.w = nn.Parameter(torch.randn(3, 2))

    def forward(self, x):
        return x, x.t(), self.w, x * 2, x[1]


def test_outputs_that_are_inputs_views_or_parameters(tmp_path):
    x = torch.randn(2, 3)
    model = PassThrough()
    got = run_engine(model, (x,), tmp_path)
    for g, e in zip(got, model(x)):
        assert torch.equal(g, e.detach())


def test_unsupported_input_dtype_is_named():
    prog = engine.Program.load(json.dumps(SEED), b"")
    with pytest.raises(ValueError, match='unsupported dtype "float64"'):
        prog.run(SEED_IN[0].astype(np.float64), SEED_IN[1], SEED_IN[2])
    bad = json.loads(json.dumps(SEED))
    bad["values"][2]["dtype"] = "complex64"
    with pytest.raises(ValueError, match=r'values\[2\]\.dtype: unsupported dtype "complex64"'):
        engine.Program.load(json.dumps(bad), b"")


MATH_CASES = {
    "exp_log_sqrt_rsqrt": (lambda x: x.exp() + (x.abs() + 1).log() + x.abs().sqrt() - (x.abs() + 0.5).rsqrt(), [(3, 5)]),
    "neg_abs_erf_sin_cos": (lambda x: -x.t().abs() + torch.erf(x.t()) * x.t().sin() / (2 + x.t().cos()), [(4, 6)]),
    "reciprocal_floor_ceil_round": (lambda x: (x + 3).reciprocal() + x.floor() + (x * 2).ceil() - x.round(), [(2, 7)]),
    "clamp_pow": (lambda x: torch.clamp(x, -0.5, 0.7) + x.clamp(min=0.1) + x.pow(2) + x.abs().pow(0.5) + x.abs().pow(1.7), [(3, 4)]),
    "maximum_minimum_pow_tensor": (lambda x, y: torch.maximum(x, y) - torch.minimum(x, y[0]) + x.abs().pow(y.abs()), [(3, 4), (3, 4)]),
    "activations_with_parameters": (lambda x: F.leaky_relu(x, 0.2) + F.elu(x, 0.7) + F.relu6(x * 4) + F.hardswish(x) + F.hardsigmoid(x), [(4, 5)]),
    "adaptive_avg_pool": (lambda x: F.adaptive_avg_pool2d(x, (3, 2)) + F.adaptive_avg_pool2d(x, 1).sum(), [(2, 3, 7, 5)]),
}


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("name", sorted(MATH_CASES))
def test_math_ops_match_cpu_and_eager(name, tmp_path):
    fn, shapes = MATH_CASES[name]
    torch.manual_seed(0)
    xs = tuple(torch.randn(s) for s in shapes)
    model = Fn(fn).eval()
    (got,) = run_engine(model, xs, tmp_path)
    with torch.no_grad():
        torch.testing.assert_close(got, model(*xs), rtol=1e-5, atol=1e-5)
        eager = model.to("webgpu")(*[x.to("webgpu") for x in xs]).cpu()
    assert torch.equal(got, eager), f"{name}: engine and eager differ by {(got - eager).abs().max()}"


class ResidualNet(nn.Module):
    """A ResNet-style network: residual blocks with a strided downsample, ReLU6, adaptive pool."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU6())
        self.block = nn.Sequential(nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(16),
                                   nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16))
        self.down = nn.Sequential(nn.Conv2d(8, 16, 1, stride=2, bias=False), nn.BatchNorm2d(16))
        self.head = nn.Linear(16, 5)
        with torch.no_grad():
            for bn in self.modules():
                if isinstance(bn, nn.BatchNorm2d):
                    bn.running_mean.uniform_(-0.3, 0.3)
                    bn.running_var.uniform_(0.5, 1.5)

    def forward(self, x):
        h = self.stem(x)
        h = torch.relu(self.block(h) + self.down(h))
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(h, 1), 1))


@pytest.mark.usefixtures("no_fallback")
def test_residual_network_matches_cpu_and_eager(tmp_path):
    x = torch.randn(2, 3, 12, 12)
    model = ResidualNet().eval()
    (y,) = run_engine(model, (x,), tmp_path)
    with torch.no_grad():
        torch.testing.assert_close(y, model(x), rtol=1e-5, atol=1e-5)
    assert torch.equal(y, eager_webgpu(model, (x,)))


def _index_inputs():
    g = torch.Generator().manual_seed(0)
    return {
        "x45": torch.randn(4, 5, generator=g),
        "i43": torch.randint(0, 5, (4, 3), generator=g),
        "i25": torch.randint(0, 4, (2, 5), generator=g),
        "x562": torch.randn(5, 6, 2, generator=g),
        "i31": torch.randint(-5, 5, (3, 1), generator=g),
        "i14": torch.randint(-6, 6, (1, 4), generator=g),
        "i23": torch.randint(0, 5, (2, 3), generator=g).to(torch.int32),
        "x36": torch.randn(3, 6, generator=g),
        "p3": torch.tensor([3, 0, 4]),
    }


def _index_put(x, p):
    y = x.clone()
    y[:, p] = x[:, :3] * 2                             # index_put with a none index
    z = x.clone()
    z.index_put_((p,), x[:1], accumulate=True)         # accumulate, values broadcast
    return y, z, x[:, p], x[p, :, 1:]


INDEX_CASES = {
    # name: (fn, input names): the engine ops MiniLM's graph needs (gather, index.Tensor,
    # arange, bitwise/logical ops, scalar_tensor, linalg_vector_norm), vs the CPU and eager.
    "gather": (lambda x, i, j: (torch.gather(x, 1, i), torch.gather(x.t(), 1, j.t()), torch.gather(x, 0, j)),
               ["x45", "i43", "i25"]),
    "index_tensor": (lambda x, i, j, k: (x[i, j], x[k], x.transpose(0, 1)[j.t()]), ["x562", "i31", "i14", "i23"]),
    "index_put_and_none_indices": (_index_put, ["x562", "p3"]),
    "arange": (lambda x: (x * torch.arange(0.5, 3.5, 0.5, device=x.device) + torch.arange(6, device=x.device),
                          torch.arange(-3, 9, 4, device=x.device), torch.arange(5, dtype=torch.int32, device=x.device)),
               ["x36"]),
    "bitwise_logical": (lambda x, y: (((x > 0) & (y > 0)) | ((x < -1) ^ (y < -1)), torch.logical_and(x, y > 0),
                                      torch.logical_or(x > 1, y[0] < 0), torch.logical_xor(x, y),
                                      (torch.arange(18, device=x.device).view(3, 6) & 5) | 8 ^ torch.arange(6, device=x.device)),
                        ["x36", "x36"]),
    "scalar_tensor_where": (lambda x: torch.where(x > 0, x, float("-inf")) + torch.where(x < 1, 0.0, x), ["x36"]),
    "vector_norm": (lambda x: (F.normalize(x, dim=-1), torch.linalg.vector_norm(x, ord=3, dim=(0, 1)),
                               x.norm(dim=1, keepdim=True), torch.linalg.vector_norm(x, float("inf"), dim=0),
                               torch.linalg.vector_norm(x, 1)), ["x36"]),
}


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("name", sorted(INDEX_CASES))
def test_index_mask_norm_ops_match_cpu_and_eager(name, tmp_path):
    fn, names = INDEX_CASES[name]
    xs = tuple(_index_inputs()[n] for n in names)
    model = Fn(fn).eval()
    got = run_engine(model, xs, tmp_path)
    with torch.no_grad():
        want = model(*xs)
        want = list(want) if isinstance(want, tuple) else [want]
        eager = model.to("webgpu")(*[x.to("webgpu") for x in xs])
        eager = [e.cpu() for e in (eager if isinstance(eager, tuple) else [eager])]
    assert len(got) == len(want)
    for g, w, e in zip(got, want, eager):
        assert g.dtype == w.dtype and g.shape == w.shape
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6)
        assert torch.equal(g, e), f"{name}: engine and eager differ"


class Attention(nn.Module):
    """F.scaled_dot_product_attention over HF-style (B, L, H, D) projections, transposed in."""

    def __init__(self, **kw):
        super().__init__()
        self.kw = kw

    def forward(self, q, k, v, *mask):
        out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                             *mask, **self.kw)
        return out.transpose(1, 2).reshape(q.shape[0], q.shape[1], -1)


def _sdpa_inputs(hkv=4, lq=5, lk=7, dtype=torch.float32):
    torch.manual_seed(0)
    return (torch.randn(2, lq, 4, 8, dtype=dtype), torch.randn(2, lk, hkv, 8, dtype=dtype),
            torch.randn(2, lk, hkv, 8, dtype=dtype))


SDPA_CASES = {
    # name: (module kwargs, inputs (q, k, v, mask...))
    "float_mask": ({}, _sdpa_inputs() + (torch.randn(2, 1, 5, 7),)),
    "bool_mask": ({}, _sdpa_inputs() + (torch.rand(1, 4, 5, 7) > 0.3,)),
    "padding_mask_scale": ({"scale": 0.3}, _sdpa_inputs() + (torch.randn(2, 1, 1, 7),)),
    "causal": ({"is_causal": True}, _sdpa_inputs(lk=5)),
    "gqa": ({"enable_gqa": True}, _sdpa_inputs(hkv=2)),
    "half": ({}, _sdpa_inputs(dtype=torch.float16) + (torch.randn(2, 1, 5, 7).half(),)),
    "bfloat16": ({"is_causal": True}, _sdpa_inputs(lk=5, dtype=torch.bfloat16)),
    # Kernel variants: 4 query rows per workgroup / lanes (Lq >= 16); keys split (decode, many keys).
    "prefill": ({}, _sdpa_inputs(lq=20, lk=24) + (torch.randn(2, 1, 1, 24),)),
    "decode_many_keys": ({"enable_gqa": True}, _sdpa_inputs(hkv=2, lq=1, lk=300)),
}


@pytest.mark.parametrize("name", sorted(SDPA_CASES))
def test_sdpa_is_one_fused_op_equal_to_eager(name, tmp_path):
    kw, inputs = SDPA_CASES[name]
    model = Attention(**kw)
    (y,) = run_engine(model, inputs, tmp_path)
    program = json.load(open(tmp_path / "program.json"))
    ops = [c["op"] for c in program["chain"]]
    assert ops.count("aten::scaled_dot_product_attention") == 1, ops
    assert "aten::bmm" not in ops and "aten::_softmax" not in ops, ops
    # Written in q's dim order (the meta's layout): the transpose back and the reshape are
    # views, so the run is the one attention launch.
    (sdpa,) = [c for c in program["chain"] if c["op"] == "aten::scaled_dot_product_attention"]
    lq = inputs[0].shape[1]
    if lq > 1:
        assert program["values"][sdpa["outputs"][0]]["strides"] == [lq * 32, 8, 32, 1]
    assert engine.Program.load(str(tmp_path)).launches_per_run == 1
    # The eager fused kernel, same variant: the same bits.
    assert torch.equal(y, eager_webgpu(model, inputs)), name
    with torch.no_grad():
        want = model(*[x.float() for x in inputs[:3]], *[m if m.dtype == torch.bool else m.float()
                                                         for m in inputs[3:]])
    tol = {torch.float16: dict(rtol=2e-3, atol=2e-3), torch.bfloat16: dict(rtol=2e-2, atol=2e-2)}.get(
        inputs[0].dtype, dict(rtol=1e-4, atol=1e-5))
    torch.testing.assert_close(y.float(), want, **tol)


class DirectAttention(nn.Module):
    def __init__(self, queries=None):
        super().__init__()
        self.queries = queries

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q[..., :self.queries, :], k, v)


@pytest.mark.parametrize("shapes,queries", [(((3, 5, 8), (3, 6, 8), (3, 6, 4)), None),  # 3-D, Dv != D
                                            (((1, 2, 3, 8), (1, 2, 6, 8), (1, 2, 6, 8)), 0)],  # no queries
                         ids=["3d", "empty"])
def test_sdpa_3d_and_empty_equal_eager(shapes, queries, tmp_path):
    torch.manual_seed(0)
    inputs = tuple(torch.randn(s) for s in shapes)
    model = DirectAttention(queries)
    (y,) = run_engine(model, inputs, tmp_path)
    ops = [c["op"] for c in json.load(open(tmp_path / "program.json"))["chain"]]
    assert "aten::scaled_dot_product_attention" in ops and "aten::_softmax" not in ops, ops
    assert torch.equal(y, eager_webgpu(model, inputs))
    with torch.no_grad():
        want = model(*inputs)
    assert y.shape == want.shape
    torch.testing.assert_close(y, want, rtol=1e-4, atol=1e-5)


def test_sdpa_the_engine_cannot_run_is_decomposed(tmp_path):
    # Head dim 300 is past the fused kernel's 256: exported as matmul + softmax, still right.
    model = Attention()
    torch.manual_seed(0)
    inputs = (torch.randn(1, 3, 2, 300), torch.randn(1, 4, 2, 300), torch.randn(1, 4, 2, 300))
    (y,) = run_engine(model, inputs, tmp_path)
    ops = {c["op"] for c in json.load(open(tmp_path / "program.json"))["chain"]}
    assert "aten::scaled_dot_product_attention" not in ops and "aten::_softmax" in ops, ops
    with torch.no_grad():
        torch.testing.assert_close(y, model(*inputs), rtol=1e-4, atol=1e-5)


def test_sdpa_past_one_binding_is_decomposed(tmp_path):
    # q of 128 MiB: past the spec's default binding size, so exported decomposed (export only).
    inputs = (torch.zeros(1, 4096, 128, 64), torch.zeros(1, 8, 128, 64), torch.zeros(1, 8, 128, 64))
    program = aot.export(Attention(), inputs, str(tmp_path))
    ops = {c["op"] for c in program["chain"]}
    assert "aten::scaled_dot_product_attention" not in ops and "aten::_softmax" in ops, ops


def test_sdpa_load_names_the_op_for_unsupported_arguments(tmp_path):
    inputs = _sdpa_inputs() + (torch.randn(2, 1, 5, 7),)
    aot.export(Attention(), inputs, str(tmp_path))
    program = json.load(open(tmp_path / "program.json"))
    (i,) = [i for i, c in enumerate(program["chain"]) if c["op"] == "aten::scaled_dot_product_attention"]
    weights = open(tmp_path / "weights.bin", "rb").read()
    dropout = program["chain"][i]["args"][4]
    program["values"][dropout] = {"type": "float", "value": 0.1}
    with pytest.raises(ValueError, match=rf"chain\[{i}\] aten::scaled_dot_product_attention: dropout_p must be 0"):
        engine.Program.load(json.dumps(program), weights)
    program["values"][dropout] = {"type": "float", "value": 0.0}
    program["values"][program["chain"][i]["args"][5]] = {"type": "bool", "value": True}
    with pytest.raises(ValueError, match=r"aten::scaled_dot_product_attention: is_causal with an explicit attn_mask"):
        engine.Program.load(json.dumps(program), weights)


def test_minilm_sentence_embeddings_match_cpu(tmp_path):
    """all-MiniLM-L6-v2 (real weights) exported and run by the engine, twice on one load."""
    from torch_webgpu.testing import packaged_weights

    model, tokenizer = packaged_weights.load_minilm()
    embedder = packaged_weights.SentenceEmbedder(model).eval()

    def batch(sentences):
        b = tokenizer(sentences, padding="max_length", max_length=16, truncation=True, return_tensors="pt")
        return b["input_ids"], b["attention_mask"]

    first = batch(["The capital of France is Paris.", "A quick brown fox jumps over the lazy dog.",
                   "Graphics processors run compute shaders.", "Short."])
    prog = export_and_load(embedder, first, tmp_path)
    ops = {c["op"] for c in json.load(open(tmp_path / "program.json"))["chain"]}
    assert {"aten::gather", "aten::index.Tensor", "aten::linalg_vector_norm", "aten::bitwise_and.Tensor"} <= ops
    # Attention (float padding mask) is one fused op per layer, not matmul/softmax/...:
    # 226 launches per run decomposed, 112 fused.
    chain = [c["op"] for c in json.load(open(tmp_path / "program.json"))["chain"]]
    assert chain.count("aten::scaled_dot_product_attention") == 6 and "aten::_softmax" not in chain
    assert prog.launches_per_run <= 112, prog.launches_per_run
    second = batch(["Engines run exported programs.", "Paris is in France.", "Dogs are lazy.", "Hi."])
    for ids, mask in (first, second):
        (y,) = prog.run(ids, mask)
        with torch.no_grad():
            want = embedder(ids, mask)
        y = torch.from_numpy(y)
        assert y.shape == (4, 384)
        assert (F.cosine_similarity(y, want, dim=-1) >= 0.9999).all()
        torch.testing.assert_close(y, want, rtol=1e-4, atol=1e-5)


def test_llama_decode_with_kv_cache_state_matches_cpu(tmp_path):
    """A tiny Llama's one-token decode step whose KV cache is module buffers written in
    place: exported as state tensors, run token by token (the cache stays on the device
    between runs), greedy tokens equal to transformers' generate on the CPU."""
    from torch_webgpu.testing.llama_decode import LlamaDecodeStep, greedy_tokens_hf, tiny_llama

    model = tiny_llama()
    prompt, steps, max_len = [5, 17, 42], 16, 32
    expected = greedy_tokens_hf(model, prompt, steps)
    program = aot.export(LlamaDecodeStep(model, max_len).eval(), (torch.tensor([[0]]), torch.tensor([0])),
                         str(tmp_path))
    assert program["version"] == 2
    states = [v for v in program["values"] if v.get("type") == "tensor" and "init" in v]
    assert len(states) == 4 and all(v["shape"] == [1, 2, max_len, 16] for v in states)
    ops = [c["op"] for c in program["chain"]]
    assert ops.count("aten::index_put_") == 4 and "aten::copy_" not in ops  # written in place
    prog = engine.Program.load(str(tmp_path))
    reference = LlamaDecodeStep(model, max_len).eval()  # the same step on the CPU

    def decode():
        tokens, first_logits = [], None
        for pos in range(len(prompt) + steps - 1):
            tok = prompt[pos] if pos < len(prompt) else tokens[-1]
            args = (torch.tensor([[tok]]), torch.tensor([pos]))
            (logits,) = prog.run(*args)
            logits = torch.from_numpy(logits)
            first_logits = logits if first_logits is None else first_logits
            with torch.no_grad():
                torch.testing.assert_close(logits, reference(*args), rtol=1e-4, atol=1e-5)
            if pos >= len(prompt) - 1:
                tokens.append(int(logits.argmax()))
        return tokens, first_logits

    tokens, first = decode()
    assert tokens == expected
    # reset_state puts the zero cache back: the same prompt decodes the same way.
    prog.reset_state()
    reference = LlamaDecodeStep(model, max_len).eval()
    tokens2, first2 = decode()
    assert tokens2 == expected and torch.equal(first, first2)


class Accumulator(nn.Module):
    """A buffer whose new value is not an index_put: written back by aten::copy_."""

    def __init__(self):
        super().__init__()
        self.register_buffer("total", torch.full((3,), 0.5))

    def forward(self, x):
        self.total.add_(x.sum(0))
        return x * self.total


def test_mutated_buffer_written_back_by_copy(tmp_path):
    program = aot.export(Accumulator(), (torch.zeros(2, 3),), str(tmp_path))
    assert program["chain"][-1]["op"] == "aten::copy_" and program["version"] == 2
    prog = engine.Program.load(str(tmp_path))
    cpu = Accumulator()
    for i in range(3):
        x = torch.randn(2, 3)
        (y,) = prog.run(x)
        torch.testing.assert_close(torch.from_numpy(y), cpu(x), rtol=1e-6, atol=1e-6)


def test_state_tensor_loader_errors(tmp_path):
    aot.export(Accumulator(), (torch.zeros(2, 3),), str(tmp_path))
    text = (tmp_path / "program.json").read_text()
    weights = (tmp_path / "weights.bin").read_bytes()
    p = json.loads(text)
    state = next(i for i, v in enumerate(p["values"]) if "init" in v)
    old = dict(p, version=1)
    with pytest.raises(ValueError, match=rf"value {state}: state tensors .* need program version 2"):
        engine.Program.load(json.dumps(old), weights)
    shared = json.loads(text)
    other = next(i for i, v in enumerate(shared["values"]) if "mem" in v and "init" not in v)
    shared["values"][other]["mem"]["pool"] = shared["values"][state]["mem"]["pool"]
    with pytest.raises(ValueError, match="a state tensor's pool holds nothing else"):
        engine.Program.load(json.dumps(shared), weights)
    past = json.loads(text)
    past["values"][state]["init"] = {"offset": len(weights)}
    with pytest.raises(ValueError, match="starts from bytes past the end of weights.bin"):
        engine.Program.load(json.dumps(past), weights)
    bad = json.loads(text)
    bad["values"][state]["init"] = {"offset": 2}
    with pytest.raises(ValueError, match="init.offset is not a multiple of 4"):
        engine.Program.load(json.dumps(bad), weights)
    with pytest.raises(ValueError, match="state tensors"):
        engine.Program.load(str(tmp_path)).emit_web(str(tmp_path / "web"))


def _pte(model, inputs, path):
    from executorch.exir import to_edge

    et = to_edge(torch.export.export(model, inputs)).to_executorch()
    path.write_bytes(et.buffer)
    return path


def test_executorch_pte_converted_and_run(tmp_path):
    """A .pte made by ExecuTorch (to_edge, to_executorch) converted with its own
    deserializer, through the Python API and the CLI, run vs the CPU."""
    torch.manual_seed(0)
    x = torch.randn(2, 3, 16, 16)
    pte = _pte(cnn(), (x,), tmp_path / "cnn.pte")
    program = aot.convert_pte(str(pte), str(tmp_path / "cnn"))
    ops = {c["op"] for c in program["chain"]}
    assert {"aten::convolution", "aten::max_pool2d_with_indices", "aten::addmm"} <= ops
    (y,) = engine.Program.load(str(tmp_path / "cnn")).run(x)
    with torch.no_grad():
        torch.testing.assert_close(torch.from_numpy(y), cnn()(x), rtol=1e-5, atol=1e-5)
    # The CLI, on the MLP.
    xm = torch.randn(5, 8)
    pte = _pte(mlp(), (xm,), tmp_path / "mlp.pte")
    subprocess.run([sys.executable, "-m", "torch_webgpu.aot", "convert", str(pte), "--out", str(tmp_path / "mlp")],
                   check=True, env=dict(os.environ, PYTHONPATH=os.path.join(REPO, "python")), capture_output=True)
    (ym,) = engine.Program.load(str(tmp_path / "mlp")).run(xm)
    with torch.no_grad():
        torch.testing.assert_close(torch.from_numpy(ym), mlp()(xm), rtol=1e-5, atol=1e-6)


def test_bad_pte_is_a_clear_error(tmp_path):
    pte = _pte(mlp(), (torch.randn(5, 8),), tmp_path / "mlp.pte")
    data = pte.read_bytes()
    (tmp_path / "short.pte").write_bytes(data[: len(data) // 3])
    (tmp_path / "json.pte").write_bytes(b'{"version": 1}')
    with pytest.raises(aot.PteError, match="cannot read the .pte"):
        aot.convert_pte(str(tmp_path / "short.pte"), str(tmp_path / "out"))
    with pytest.raises(aot.PteError, match="not an ExecuTorch .pte"):
        aot.convert_pte(str(tmp_path / "json.pte"), str(tmp_path / "out"))
    # Every single-byte corruption of the flatbuffer either converts or fails with PteError
    # (or the engine's ValueError at load): never a crash.
    g = torch.Generator().manual_seed(0)
    for k in torch.randint(8, len(data), (40,), generator=g).tolist():
        bad = bytearray(data)
        bad[k] ^= 0xFF
        (tmp_path / "bad.pte").write_bytes(bytes(bad))
        try:
            aot.convert_pte(str(tmp_path / "bad.pte"), str(tmp_path / "bad"))
            engine.Program.load(str(tmp_path / "bad"))
        except (aot.PteError, ValueError, NotImplementedError):
            pass


# Convolutions the engine runs through eager's forward (kernels/convolution.h): each case
# (weight shape, conv kwargs) on inputs of batch 1 and 4; channels and positions >= 16 so
# that GPU-class adapters take the implicit GEMM, software ones im2col.
CONV_ZOO_SCRIPT = r'''
import sys, torch, torch.nn.functional as F
import torch_webgpu
from torch_webgpu import aot, engine
conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
cases = [
    ((16, 4, 3, 3), (10, 12), dict(stride=2, padding=1)),
    ((16, 4, 3, 3), (9, 11), dict(padding=2, dilation=2)),
    ((32, 8, 3, 3), (8, 8), dict(padding=1, groups=2)),
    ((24, 1, 3, 3), (9, 9), dict(padding=1, groups=24)),  # depthwise
    ((24, 16, 1, 1), (6, 7), {}),                          # 1x1 as a GEMM
    ((16, 3, 5), (40,), dict(stride=3, padding=2)),
    ((16, 2, 2, 3, 3), (5, 6, 6), dict(stride=(1, 2, 1), padding=1)),
]
class Conv(torch.nn.Module):
    def __init__(self, w, b, kw):
        super().__init__()
        self.w = torch.nn.Parameter(w, requires_grad=False)
        self.b = None if b is None else torch.nn.Parameter(b, requires_grad=False)
        self.kw = kw
    def forward(self, x):
        return conv[self.w.dim() - 2](x, self.w, self.b, **self.kw)
torch.manual_seed(0)
for i, (ws, spatial, kw) in enumerate(cases):
    for bias in (False, True):
        for n in (1, 4):
            w = torch.randn(ws)
            cin = ws[1] * kw.get("groups", 1)
            m = Conv(w, torch.randn(ws[0]) if bias else None, kw).eval()
            x = torch.randn(n, cin, *spatial)
            d = f"{sys.argv[1]}/c{i}_{bias}_{n}"
            aot.export(m, (x,), d)
            (got,) = engine.Program.load(d).run(x)
            got = torch.from_numpy(got)
            with torch.no_grad():
                want = m(x)
                eager = m.to("webgpu")(x.to("webgpu")).cpu()
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
            assert torch.equal(got, eager), f"case {i} bias={bias} n={n}: engine and eager differ by {(got - eager).abs().max()}"
print("ok", len(cases) * 4)
'''


@pytest.mark.parametrize("adapter", ["gpu", "software"])
def test_convolutions_equal_eager_on_each_adapter_class(adapter, tmp_path):
    env = dict(os.environ, TORCH_WEBGPU_ADAPTER_KIND=adapter, TORCH_WEBGPU_DISABLE_CPU_FALLBACK="1")
    r = subprocess.run([sys.executable, "-c", CONV_ZOO_SCRIPT, str(tmp_path)], env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "ok 28" in r.stdout, r.stdout + r.stderr


@pytest.mark.usefixtures("no_fallback")
def test_splitk_gemm_matches_eager(monkeypatch, tmp_path):
    """On a GPU adapter few-row products with a long K take split-K; the engine calls the
    same kernels with the same selection, so its results equal eager's bit for bit."""
    monkeypatch.setenv("TORCH_WEBGPU_ADAPTER_KIND", "gpu")
    monkeypatch.delenv("TORCH_WEBGPU_GEMM_VARIANT", raising=False)
    torch.manual_seed(0)
    model = Fn(lambda x, w, b, m: (F.linear(x, w, b), torch.bmm(x, m.transpose(1, 2))),
               torch.randn(40, 384), torch.randn(40), torch.randn(2, 36, 384)).eval()
    xs = (torch.randn(2, 20, 384),)
    with torch.webgpu.profiler.profile() as prof:
        eager = [e.cpu() for e in model.to("webgpu")(xs[0].to("webgpu"))]
    assert "gemm:splitk_sum" in {r.kernel for r in prof.key_averages()}
    got = run_engine(model.cpu(), xs, tmp_path)
    with torch.no_grad():
        want = model.cpu()(*xs)
    for g, w, e in zip(got, want, eager):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-3)
        assert torch.equal(g, e), f"engine and eager differ by {(g - e).abs().max()}"
