"""torch.compile on webgpu: Inductor's WGSL kernels against PyTorch eager on the CPU.

Each test compiles a function (or module), runs it on webgpu copies of CPU inputs and
compares with the uncompiled function on the CPU. TORCH_WEBGPU_DISABLE_CPU_FALLBACK=1
(the no_fallback fixture) proves every op of the compiled graph ran natively: generated
WGSL kernels or our eager ATen kernels (extern calls such as mm).
"""
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_webgpu
from conftest import assert_same, dev, make

from torch_webgpu.compiler.kernel import TensorArg, WGSLKernel


@pytest.fixture(autouse=True)
def fresh_compile(monkeypatch):
    """Each test generates its own kernels: no Dynamo cache, no FX graph cache."""
    import torch._inductor.config as inductor_config

    monkeypatch.setattr(inductor_config, "fx_graph_cache", False)
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def compiled_matches(fn, *args, tolerances=None, **compile_kwargs):
    expected = fn(*args)
    actual = torch.compile(fn, **compile_kwargs)(*[dev(a) for a in args])
    assert_same(actual, expected, **(tolerances or {}))


def dispatches():
    torch_webgpu._C.synchronize()
    return torch_webgpu._C.dispatch_stats()["dispatches"]


# ---- the kernel entry ------------------------------------------------------------------

def test_wgsl_kernel_views_offsets_and_uniforms(no_fallback):
    kernel = WGSLKernel(
        "store_out(idx, sin_f32(load_a(idx * stride)) * alpha + f32(load_b(idx % 3u)));",
        [TensorArg("a", torch.float32), TensorArg("b", torch.int32),
         TensorArg("out", torch.float32, "read_write")],
        [("alpha", "f32"), ("stride", "u32")])
    a, b = make((10, 4), torch.float32), make((3,), torch.int32)
    out = torch.zeros(20, device="webgpu")
    kernel(dev(a)[:, 1], dev(b), out[5:15], grid=10, alpha=2.0, stride=4)
    expected = torch.zeros(20)
    expected[5:15] = a[:, 1].sin() * 2 + b.repeat(4)[:10]
    assert_same(out, expected)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.int8, torch.bool, torch.int64])
def test_wgsl_kernel_narrow_and_wide_dtypes(dtype, no_fallback):
    # Load and store through the library's packed helpers; odd offsets share words.
    body = "store_out(idx, load_a(idx));" if dtype != torch.int64 else \
        "store_out(idx, i64_add(load_a(idx), i64_from_i32(1)));"
    kernel = WGSLKernel(body, [TensorArg("a", dtype), TensorArg("out", dtype, "read_write")])
    a = make((9,), dtype)
    out = torch.zeros(12, dtype=dtype, device="webgpu")
    kernel(dev(a)[1:], out[3:11], grid=8)
    expected = torch.zeros(12, dtype=dtype)
    expected[3:11] = a[1:] + 1 if dtype == torch.int64 else a[1:]
    assert_same(out, expected, exact=True)


def test_wgsl_kernel_atomic_add(no_fallback):
    kernel = WGSLKernel("atomic_add_out(idx % 3u, load_a(idx));",
                        [TensorArg("a", torch.float32), TensorArg("out", torch.float32, "read_write_atomic")])
    a = make((64,), torch.float32)
    out = torch.zeros(4, device="webgpu")
    kernel(dev(a), out[1:], grid=64)
    expected = torch.zeros(4)
    expected[1:] = torch.stack([a[i::3].sum() for i in range(3)])
    assert_same(out, expected, atol=1e-5, rtol=1e-5)
    with pytest.raises(TypeError, match="atomic adds"):
        WGSLKernel("", [TensorArg("o", torch.float16, "read_write_atomic")])


def test_wgsl_kernel_compiles_once():
    body = "store_o(idx, f32(idx));"
    k1 = WGSLKernel(body, [TensorArg("o", torch.float32, "read_write")])
    k2 = WGSLKernel(body, [TensorArg("o", torch.float32, "read_write")])
    assert k1.handle == k2.handle
    out = torch.empty(5, device="webgpu")
    k1(out, grid=5)
    pipelines = torch_webgpu._C.dispatch_stats()["pipelines"]
    k2(out, grid=5)
    assert torch_webgpu._C.dispatch_stats()["pipelines"] == pipelines
    assert_same(out, torch.arange(5, dtype=torch.float32))


def test_wgsl_kernel_errors():
    bad = WGSLKernel("let x = undefined_function(1);", [TensorArg("o", torch.float32, "read_write")])
    out = torch.empty(4, device="webgpu")
    with pytest.raises(RuntimeError, match="undefined_function"):
        bad(out, grid=4)
    good = WGSLKernel("store_o(idx, 1.0);", [TensorArg("o", torch.float32, "read_write")])
    with pytest.raises(TypeError, match="float32"):
        good(torch.empty(4, dtype=torch.int32, device="webgpu"), grid=4)
    with pytest.raises(ValueError, match="not on the webgpu device"):
        torch_webgpu._C._wgsl_launch(good.handle, [torch.empty(4).data_ptr()], [], 4)
    with pytest.raises(TypeError, match="missing uniform"):
        WGSLKernel("store_o(idx, v);", [TensorArg("o", torch.float32, "read_write")],
                   [("v", "f32")])(out, grid=4)
    with pytest.raises(ValueError, match="read_write"):
        WGSLKernel("", [TensorArg("o", torch.float32, "write")])
    # An empty tensor binds a placeholder buffer; a zero grid dispatches nothing.
    good(torch.empty(0, device="webgpu"), grid=0)


# ---- pointwise -------------------------------------------------------------------------

def test_issue_example(no_fallback):
    compiled_matches(lambda x: (x.sin() + 1).relu().sum(-1), make((8, 33), torch.float32))


def test_pointwise_chain_is_one_dispatch(no_fallback):
    fn = lambda x: ((x.sin() * 2 - x.exp()).tanh().sigmoid() / 3 + F.gelu(x)) * F.silu(x)
    x = dev(make((64, 50), torch.float32))
    compiled = torch.compile(fn)
    compiled(x)  # compile
    before = dispatches()
    out = compiled(x)
    fused = dispatches() - before
    before = dispatches()
    fn(x)
    eager = dispatches() - before
    assert fused == 1 and eager >= 8, (fused, eager)
    assert_same(out, fn(x.cpu()))


def test_broadcasting(no_fallback):
    compiled_matches(lambda x, y, z: x * y + z.cos() - y,
                     make((6, 1, 40), torch.float32), make((40,), torch.float32, seed=1),
                     make((5, 1), torch.float32, seed=2))


def test_strided_and_permuted_inputs(no_fallback):
    x = dev(make((10, 12), torch.float32))
    fn = lambda a: (a * 2).exp().sum(-1)
    compiled = torch.compile(fn)
    for view in (x[::2, 1::3], x.t(), x[3:, 5:].t()):
        assert_same(compiled(view), fn(view.cpu()))
    compiled_matches(lambda a: a.permute(2, 0, 1) + 1, make((3, 4, 5), torch.float32))


def test_int_and_bool(no_fallback):
    a = make((6, 40), torch.int32)
    compiled_matches(lambda a: (a * 3 - 7) // 4 + a % 5, a)
    compiled_matches(lambda a: (a > 0) & (a < 20) | (a == -3), a)
    compiled_matches(lambda a: torch.where(a > 3, a, -a).to(torch.int8), a)


def test_bool_maximum_and_minimum(no_fallback):
    """max/min of bools are or/and (WGSL's max and min take no bools)."""
    a, b = make((5, 7), torch.bool), make((5, 7), torch.bool, seed=1)
    compiled_matches(lambda a, b: (torch.maximum(a, b), torch.minimum(a, b)), a, b)
    compiled_matches(lambda a, b: torch.maximum(a, b).amax(1) | torch.minimum(a, b).amin(0)[:5], a, b)
    # max/min with indices reduce by argmax/argmin over bools (true beats false; ties: the
    # first index), as masked.cumprod's backward does
    x = torch.tensor([0, 2, 1, 1, 3, 1])
    compiled_matches(lambda x: (*torch.max(x == 1, 0), *torch.min(x == 1, 0)), x)


def test_fusions_keep_within_the_binding_limit(no_fallback):
    """Bicubic grid_sample lowers to eight values of one loop, horizontally fusable: a kernel
    of all eight with its two inputs and the device error word would bind 11 buffers, over
    the default limit of 10."""
    torch.manual_seed(0)
    x, grid = make((2, 3, 5, 6), torch.float32), torch.rand(2, 4, 3, 2) * 2.2 - 1.1
    compiled_matches(lambda x, g: F.grid_sample(x, g, mode="bicubic", align_corners=False),
                     x, grid, tolerances=dict(atol=1e-5, rtol=1e-5))
    many = [make((4, 9), torch.float32, seed=i) for i in range(12)]
    compiled_matches(lambda *t: tuple(v.sin() * i for i, v in enumerate(t)) + (sum(t),), *many,
                     tolerances=dict(atol=1e-5, rtol=1e-5))


def test_half_types(no_fallback):
    x = make((6, 40), torch.float32)
    # Inductor keeps half intermediates in float32 (as on CUDA): x * 3 is not rounded to
    # half before sin, so the result may differ from eager by sin's change over half an ulp.
    compiled_matches(lambda x: (x.half() * 3).sin().float(), x, tolerances=dict(atol=1e-2, rtol=0))
    compiled_matches(lambda x: x.bfloat16() + 1, x)
    compiled_matches(lambda x: torch.sigmoid(x) * 2, x.half())


def test_padding_and_cat(no_fallback):
    x = make((6, 40), torch.float32)
    compiled_matches(lambda x: F.pad(x, (1, 2)) * 2, x)
    compiled_matches(lambda x: torch.cat([x.sin(), x.cos()], 1), x)


def test_split_views_backward(no_fallback):
    # The gradient of split views is a cat whose index math has offset modular terms.
    def fn(qkv):
        q, k, v = (y.view(2, 7, 4, 8).transpose(1, 2) for y in qkv.split(32, -1))
        return q * 2 + k.sin() * v

    x = make((2, 7, 96), torch.float32)
    xd = dev(x).requires_grad_()
    x.requires_grad_()
    fn(x).square().mean().backward()
    torch.compile(fn)(xd).square().mean().backward()
    assert_same(xd.grad, x.grad)


def test_gather_embedding_and_index(no_fallback):
    w = make((10, 6), torch.float32)
    idx = torch.tensor([[1, 9, 0], [3, 3, 2]])
    compiled_matches(lambda i, w: F.embedding(i, w) * 2, idx, w)
    compiled_matches(lambda i, w: w[i[0]] + 1, idx, w)
    compiled_matches(lambda i, w: torch.gather(w, 1, i % 6).sin(), idx, w)


def test_embedding_into_layer_norm(no_fallback):
    # Gathered rows feeding a reduction: the gather's index entries live in the row loop.
    def fn(ids, wte, wpe, w, b):
        return F.layer_norm(F.embedding(ids, wte) + wpe[:12], (64,), w, b)

    args = (torch.randint(0, 50, (2, 12), generator=torch.Generator().manual_seed(0)),
            make((50, 64), torch.float32), make((16, 64), torch.float32, seed=1),
            make((64,), torch.float32, seed=2), make((64,), torch.float32, seed=3))
    compiled_matches(fn, *args, tolerances=dict(atol=1e-4, rtol=1e-4))


def test_embedding_backward_scatter_adds(no_fallback):
    # Repeated ids: their gradient rows add up through atomic adds into one buffer.
    ids = torch.tensor([[1, 3, 1], [3, 3, 0]])
    w = make((5, 4), torch.float32)
    wd = dev(w).requires_grad_()
    w.requires_grad_()
    fn = lambda i, w: (F.embedding(i, w) * 2).sin().sum()
    fn(ids, w).backward()
    torch.compile(fn)(dev(ids), wd).backward()
    assert_same(wd.grad, w.grad, atol=1e-5, rtol=1e-5)
    compiled_matches(lambda i, x: torch.zeros(5, dtype=torch.int32, device=x.device).index_put(
        (i.flatten(),), x, accumulate=True), ids, make((6,), torch.int32))


def test_index_out_of_bounds_raises():
    compiled = torch.compile(lambda i, w: F.embedding(i, w) * 2)
    w = dev(make((10, 6), torch.float32))
    with pytest.raises(RuntimeError, match="index out of bounds"):
        compiled(dev(torch.tensor([1, 10])), w).cpu()
    # The device keeps working after the report.
    assert_same(compiled(dev(torch.tensor([1, 9])), w), F.embedding(torch.tensor([1, 9]), w.cpu()) * 2)


def test_int64_beyond_32_bits_raises():
    compiled = torch.compile(lambda a: a * 2 + 1)
    assert_same(compiled(dev(torch.tensor([-5, 2**30 - 1]))), torch.tensor([-9, 2**31 - 1]))
    with pytest.raises(RuntimeError, match="beyond 32 bits"):
        compiled(dev(torch.tensor([1, 2**40]))).cpu()


def test_int64_overflow_in_arithmetic_raises():
    # Values that fit in 32 bits whose results do not: a device check, never a wrapped value.
    big = dev(torch.tensor([2**30, 3], dtype=torch.int64))
    for fn in (lambda a: a * 4, lambda a: a + a + a, lambda a: -a - a - a,
               lambda a: a.sum() * 3, lambda a: (a * a).abs()):
        with pytest.raises(RuntimeError, match="beyond 32 bits"):
            torch.compile(fn)(big).cpu()
    # In range: exact, and the int32 sum of int32 values widens to int64 as on the CPU.
    small = torch.tensor([[-7, 2**20], [5, -(2**21)]], dtype=torch.int32)
    for fn in (lambda a: (a.to(torch.int64) * 3 - 1).abs(), lambda a: a.sum(1), lambda a: -a.sum()):
        torch._dynamo.reset()
        assert_same(torch.compile(fn)(dev(small)), fn(small))
    # A constant beyond 32 bits cannot compute in i32: a clear error at compile time.
    with pytest.raises(Exception, match="needs more than 32 bits"):
        torch.compile(lambda a: a + 2**40)(dev(torch.tensor([1, 2])))


def test_ops_from_the_eager_table(no_fallback):
    x, y = make((5, 7), torch.float32, low=0.5), make((5, 7), torch.float32, seed=1)
    compiled_matches(lambda x, y: (torch.atan2(x, y), torch.hypot(x, y), torch.special.i0(x),
                                   torch.copysign(x, y)), x, y)


def test_op_the_generator_lacks_runs_eagerly():
    # No WGSL for bessel_j0 / frexp: Inductor runs those nodes as eager ATen calls and fuses
    # the rest (found by the OpInfo compile mode: frexp raised).
    x = make((4, 5), torch.float32)
    compiled_matches(lambda a: torch.special.bessel_j0(a * 2) + 1, x)
    compiled_matches(lambda a: torch.frexp(a.exp()), x)


def test_float64_nodes_run_eagerly():
    # Generated kernels cannot compute float64: its nodes run as eager calls (which
    # compute float64 on the CPU), float32 nodes around them still fuse.
    x = make((3, 4), torch.float32)
    compiled_matches(lambda a: ((a.double() * 3).sin().float() + 1, a.double().sum(0)), x)


def test_empty_and_zero_dim(no_fallback):
    fn = lambda a: a.sin() + 1
    compiled_matches(fn, torch.empty(0, 3))
    compiled_matches(fn, torch.tensor(0.5))
    compiled_matches(lambda a: a.sum(-1), torch.empty(4, 0))


def test_dynamic_shapes(no_fallback):
    fn = lambda a: torch.softmax(a * 2, -1)
    compiled = torch.compile(fn, dynamic=True)
    for n in (3, 7, 300):
        x = make((n, n + 1), torch.float32, seed=n)
        assert_same(compiled(dev(x)), fn(x))


# ---- reductions ------------------------------------------------------------------------

@pytest.mark.parametrize("dim", [-1, 0, None])
def test_reductions(dim, no_fallback):
    x = make((6, 40), torch.float32)
    if dim is None:
        fn = lambda x: (x.sum(), x.amax(), x.amin(), x.prod() * 0 + x.mean())
    else:
        fn = lambda x: (x.sum(dim), x.amax(dim), x.amin(dim), x.mean(dim), x.var(dim),
                        x.argmax(dim), x.argmin(dim))
    compiled_matches(fn, x, tolerances=dict(atol=1e-4, rtol=1e-4))


def test_reductions_longer_than_a_workgroup(no_fallback):
    x = make((3, 5000), torch.float32)
    compiled_matches(lambda x: (x.sum(-1), x.amax(-1), x.var(-1), x.argmax(-1)), x,
                     tolerances=dict(atol=1e-3, rtol=1e-4))
    compiled_matches(lambda x: x.sum(), make((200000,), torch.float32),
                     tolerances=dict(atol=1e-2, rtol=1e-4))


def test_reduction_nan_and_int(no_fallback):
    x = make((4, 10), torch.float32)
    x[1, 3] = math.nan
    compiled_matches(lambda x: (x.amax(-1), x.argmax(-1), x.argmin(-1)), x)
    compiled_matches(lambda a: (a.sum(-1), a.amax(0), a.argmin(-1)), make((5, 7), torch.int32))


def test_softmax_and_layer_norm_fuse(no_fallback):
    x = make((16, 96), torch.float32)
    compiled_matches(lambda x: torch.softmax(x, -1), x)
    compiled_matches(lambda x: torch.log_softmax(x, 0), x)
    w, b = make((96,), torch.float32, seed=1), make((96,), torch.float32, seed=2)
    fn = lambda x, w, b: F.layer_norm(x, (96,), w, b)
    compiled_matches(fn, x, w, b, tolerances=dict(atol=1e-4, rtol=1e-4))
    compiled = torch.compile(torch.softmax)
    xd = dev(x)
    compiled(xd, -1)
    before = dispatches()
    compiled(xd, -1)
    assert dispatches() - before == 1


# ---- models ----------------------------------------------------------------------------

def _twin(module):
    device_module = type(module)(*module.init_args).to("webgpu")
    device_module.load_state_dict(module.state_dict())
    return device_module


class MLP(nn.Module):
    def __init__(self, d_in=16, d_hidden=32, d_out=8):
        super().__init__()
        self.init_args = (d_in, d_hidden, d_out)
        self.net = nn.Sequential(nn.Linear(d_in, d_hidden), nn.GELU(), nn.Linear(d_hidden, d_out))

    def forward(self, x):
        return self.net(x)


class Block(nn.Module):
    """A pre-norm transformer block: attention (explicit and through SDPA) and an MLP."""

    def __init__(self, d=32, heads=4):
        super().__init__()
        self.init_args = (d, heads)
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = MLP(d, 4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, -1)
        q, k, v = (y.view(b, t, self.heads, d // self.heads).transpose(1, 2) for y in (q, k, v))
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(d // self.heads)
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        attn = torch.softmax(scores.masked_fill(~mask, float("-inf")), -1) @ v
        x = x + self.proj(attn.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


def _train_step_matches(module, x, atol):
    device_module = _twin(module)
    out = module(x)
    out.square().mean().backward()
    compiled = torch.compile(device_module)
    device_out = compiled(dev(x))
    device_out.square().mean().backward()
    assert_same(device_out, out, atol=atol, rtol=atol)
    for p, q in zip(module.parameters(), device_module.parameters()):
        assert_same(q.grad, p.grad, atol=atol, rtol=atol)


def test_mlp_forward_backward(no_fallback):
    torch.manual_seed(0)
    _train_step_matches(MLP(), make((5, 16), torch.float32), atol=1e-4)


def test_transformer_block_forward_backward(no_fallback):
    torch.manual_seed(0)
    _train_step_matches(Block(), make((2, 7, 32), torch.float32, low=-1, high=1), atol=2e-4)


@pytest.mark.parametrize("optimizer", ["AdamW", "Adam", "SGD"])
def test_compiled_optimizer_step(optimizer, no_fallback):
    """torch.compile(opt.step): the step count lives in a 0-dim CPU tensor, which the
    generated kernels take as a uniform (as Inductor passes it to Triton on cuda)."""
    import copy

    torch.manual_seed(0)
    model = MLP()
    device_model = copy.deepcopy(model).to("webgpu")
    cls = getattr(torch.optim, optimizer)
    kwargs = {"lr": 0.1, "momentum": 0.9} if optimizer == "SGD" else {"lr": 1e-2, "weight_decay": 0.1}
    opt, device_opt = cls(model.parameters(), **kwargs), cls(device_model.parameters(), **kwargs)
    step = torch.compile(device_opt.step)
    for i in range(3):
        x = make((5, 16), torch.float32, seed=i)
        model(x).square().mean().backward()
        device_model(dev(x)).square().mean().backward()
        opt.step()
        step()
        opt.zero_grad()
        device_opt.zero_grad()
    for p, q in zip(model.parameters(), device_model.parameters()):
        assert_same(q.detach(), p.detach(), atol=1e-5, rtol=1e-5)


def test_python_scalars_wrapped_as_cpu_tensors(no_fallback):
    """dynamic=True turns Python floats into 0-dim CPU float64 tensors: read as uniforms."""
    f = torch.compile(lambda x, s, k: (x * s + s) * k, dynamic=True)
    x = make((7,), torch.float32)
    for s, k in ((2.5, 3), (-0.5, 4)):
        assert_same(f(dev(x), s, k), (x * s + s) * k)


def test_webgpu_backend_callable(no_fallback):
    from torch_webgpu.compiler.webgpu_compiler import webgpu_backend

    compiled_matches(lambda x: torch.softmax(x, -1) * 2, make((4, 9), torch.float32),
                     backend=webgpu_backend)


def test_op_without_lowering_runs_eager():
    # Inductor has no lowering for sort here: it calls our eager kernel (a fallback kernel)
    # between generated kernels and the results stay correct.
    compiled_matches(lambda x: torch.sort(x.sin(), -1).values * 2, make((5, 17), torch.float32))


def test_cpu_compile_still_works():
    x = make((4, 9), torch.float32)
    torch.testing.assert_close(torch.compile(lambda x: x.sin().sum(-1))(x), x.sin().sum(-1))


def test_hf_llama_forward(no_fallback):
    # A small Llama (random weights, transformers' own modules: RMSNorm, rotary embeddings,
    # grouped-query attention through SDPA, SiLU MLP) compiled whole.
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=128,
                         num_attention_heads=4, num_key_value_heads=2, vocab_size=500)
    model = LlamaForCausalLM(config).eval()
    ids = torch.randint(0, 500, (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = model(ids).logits
        actual = torch.compile(model.to("webgpu"))(dev(ids)).logits
    assert_same(actual, expected, atol=1e-4, rtol=1e-4)


# ---- found by the compile fuzzer (torch_webgpu.testing.compile_fuzz) -------------------

def test_fuzz_masked_int64_load_past_a_view(no_fallback):
    # cat's masked loads read past the end of a view: an int64 beyond 32 bits sitting there
    # (in the same storage) tripped the 32-bit check although the value is never used.
    base = dev(torch.tensor([-2, -1, 0, 1, 2, 2**40]))
    b = dev(torch.tensor([3]))
    fn = lambda a, b: torch.cat([a, b])
    assert_same(torch.compile(fn)(base[:5], b), fn(base[:5].cpu(), b.cpu()), exact=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32])
def test_fuzz_argmax_of_negative_rows_shorter_than_the_workgroup(dtype, no_fallback):
    # Threads past the row's end hold the placeholder (0, "no index"): it must not beat
    # negative values in the tree combine.
    x = -make((4, 3), dtype, low=1, high=5)
    compiled_matches(lambda x: (x.argmax(-1), x.argmin(0), x.argmax()), x)


def test_fuzz_dynamic_shapes_symbolic_products_are_parenthesized(no_fallback):
    # With dynamic shapes a numel is a product of sizes: `linear % ks1*ks2` computed
    # (linear % ks1) * ks2 in WGSL.
    fn = lambda a, b: (a.unsqueeze(-1) ^ b, a.unsqueeze(-1).float() * b.float().sin())
    a = make((2, 5), torch.bool)
    b = make((2, 5, 3), torch.bool, seed=1)[..., 1::2]
    compiled = torch.compile(fn, dynamic=True)
    assert_same(compiled(dev(a), dev(b)), fn(a, b))
    a, b = make((3, 7), torch.bool, seed=2), make((3, 7, 1), torch.bool, seed=3)
    assert_same(compiled(dev(a), dev(b)), fn(a, b))


def test_fuzz_float_op_of_a_float_and_an_index(no_fallback):
    # avg_pool without padded elements divides a float sum by a count computed from
    # indices (i32): div_f32(f32, i32) did not compile (found by the OpInfo compile mode).
    x = make((1, 3, 9), torch.float32)
    compiled_matches(lambda x: F.avg_pool1d(x, 3, stride=1, padding=1, ceil_mode=True,
                                            count_include_pad=False), x)


def test_fuzz_mutated_input_read_and_written_by_one_kernel(no_fallback):
    # batch_norm in training updates its running stats in place: one kernel reads and
    # writes the same buffer through two arguments, which WebGPU refuses to bind
    # (found by the OpInfo compile mode).
    x = make((4, 3, 5), torch.float32)
    fn = lambda x, m, v: F.batch_norm(x, m, v, training=True, momentum=0.3)
    mean, var = torch.zeros(3), torch.ones(3)
    dmean, dvar = dev(mean), dev(var)
    assert_same(torch.compile(fn)(dev(x), dmean, dvar), fn(x, mean, var), atol=1e-5, rtol=1e-5)
    assert_same(dmean, mean)
    assert_same(dvar, var)


def test_fuzz_eager_expressions_with_host_parameters_run_eagerly():
    # polygamma's and zeta's eager expressions read host parameters (n, a runtime zero)
    # that generated kernels lack: 'p0' did not compile (found by the OpInfo compile mode).
    x = make((5, 5), torch.float32, low=0.5, high=3)
    compiled_matches(lambda x: (torch.polygamma(2, x) * 2, torch.special.zeta(x + 1, x)), x,
                     tolerances=dict(rtol=1e-4, atol=1e-4))


# ---- random-number state inside compiled functions ----------------------------------------

def test_rng_state_functions_under_no_dispatch_in_compiled_code():
    """OpInfo's freeze_rng_state calls torch.webgpu.get/set_rng_state under no_dispatch()
    inside the compiled function: Dynamo must call them eagerly (as torch.cuda's), and the
    state they restore must be the one saved."""
    from torch.testing._internal.common_utils import freeze_rng_state

    def f(x):
        with freeze_rng_state():
            torch.manual_seed(5)
            y = torch.bernoulli(x)
        return y * 2

    x = torch.full((256,), 0.5, device="webgpu")
    torch.webgpu.manual_seed(17)
    before = torch.webgpu.get_rng_state()
    out = torch.compile(f)(x)
    assert torch.equal(torch.webgpu.get_rng_state(), before)  # freeze_rng_state restored it
    assert set(out.cpu().unique().tolist()) <= {0.0, 2.0}
    torch.manual_seed(5)
    assert torch.equal(out.cpu(), torch.bernoulli(x).cpu() * 2)  # the seed set inside counted


def test_manual_seed_and_rng_state_inside_compiled_function(monkeypatch):
    """torch.webgpu.manual_seed / get_rng_state / set_rng_state in user code under
    torch.compile: a graph break, then eager calls, so draws match eager draws exactly
    (Inductor's fallback_random: its draws are eager ATen ones)."""
    import torch._inductor.config as inductor_config

    monkeypatch.setattr(inductor_config, "fallback_random", True)

    def f(x):
        torch.webgpu.manual_seed(3)
        a = torch.rand_like(x) + x
        state = torch.webgpu.get_rng_state()
        b = torch.rand_like(x)
        torch.webgpu.set_rng_state(state)
        return a, b, torch.rand_like(x)

    x = torch.arange(300, dtype=torch.float32, device="webgpu")
    compiled = torch.compile(f)
    a, b, c = compiled(x)
    a2, _, _ = compiled(x)
    torch.webgpu.manual_seed(3)
    expected_a = torch.rand_like(x) + x
    expected_b = torch.rand_like(x)
    assert torch.equal(a.cpu(), expected_a.cpu()) and torch.equal(a2.cpu(), a.cpu())
    assert torch.equal(b.cpu(), expected_b.cpu()) and torch.equal(c.cpu(), b.cpu())
    assert not torch.equal(b.cpu(), (a - x).cpu())
    with pytest.raises(ValueError):
        torch.webgpu.get_rng_state("webgpu:1")
    with pytest.raises(TypeError):
        torch.webgpu.get_rng_state(1.5)


# ---- tensors sharing a buffer ------------------------------------------------------------

def test_wgsl_kernel_views_of_one_buffer_share_a_binding(no_fallback):
    """WebGPU refuses one buffer in two bindings of a dispatch when either is writable:
    views of one buffer (Inductor writes a concatenation's slices so) share one binding."""
    kernel = WGSLKernel(
        "let v = load_a(idx); store_lo(idx * 3u, v); store_hi(idx * 3u, v * v + f32(load_c(idx)));",
        [TensorArg("a", torch.float32), TensorArg("lo", torch.float32, "read_write"),
         TensorArg("hi", torch.float32, "read_write"), TensorArg("c", torch.int8)],
        [])
    a = make((5,), torch.float32)
    c = make((5,), torch.int8)
    out = torch.zeros(20, device="webgpu")
    kernel(dev(a), out[1:], out[3:], dev(c), grid=5)
    expected = torch.zeros(20)
    expected[1:16:3] = a
    expected[3:18:3] = a * a + c.float()
    assert_same(out, expected)
    # An input and the output on one buffer (in place), narrow dtypes (atomic stores).
    inc = WGSLKernel("store_y(idx, load_x(idx) + 1);",
                     [TensorArg("x", torch.int8), TensorArg("y", torch.int8, "read_write")], [])
    x = make((9,), torch.int8, low=-50, high=50)
    y = dev(x)
    inc(y[1:], y[1:], grid=8)
    expected = x.clone()
    expected[1:] += 1
    assert_same(y, expected, exact=True)


def test_compiled_cdist_writes_a_concatenation_through_two_views(no_fallback):
    x1, x2 = make((1, 1), torch.float32), make((5, 1), torch.float32, seed=1)
    compiled_matches(lambda a, b: torch.cdist(a, b, 2.0, "use_mm_for_euclid_dist"), x1, x2)
    torch.webgpu.synchronize()  # a refused bind group reports at the submit


def test_compiled_matrix_rank_decomposes_through_functionalization():
    """Our matrix_rank kernel sits at the autograd key: functionalization still decomposes
    this CompositeImplicitAutograd op (a backend-key kernel left FakeTensor's decomposition
    unfunctionalized, a `copy_` Inductor refused). Eager and compiled agree with the CPU."""
    a = make((4, 5, 6), torch.float32)
    a[0] = 0
    a[1, :, 3:] = a[1, :, :3]
    compiled_matches(lambda t: torch.linalg.matrix_rank(t), a)
    compiled_matches(lambda t: torch.linalg.matrix_rank(t, atol=0.5, hermitian=False), a)
    compiled_matches(lambda t: torch.linalg.matrix_rank(t), make((0, 0), torch.float32))
    assert torch.equal(torch.linalg.matrix_rank(dev(a)).cpu(), torch.linalg.matrix_rank(a))


def test_other_devices_keep_their_inductor_op_overrides():
    """Registering webgpu with Inductor leaves cuda's and the CPU's wrapper snippets as they
    were (torch 2.11 gave cuda graphs the CPU's `pass` guard when ours came first)."""
    from torch._inductor.codegen.common import get_device_op_overrides

    from torch_webgpu.compiler.registration import register

    register()
    assert "cuda" in get_device_op_overrides("cuda").device_guard(0)
    assert "nullcontext" in get_device_op_overrides("webgpu").device_guard(0)


def test_generated_kernels_are_named_in_profiles():
    """Profiles name a generated kernel after its fused FX ops (Inductor's kernel name)."""
    f = torch.compile(lambda x: (x.sin() + 1).relu().sum(-1))
    x = torch.randn(8, 16)
    f(x.to("webgpu"))
    with torch.webgpu.profiler.profile() as prof:
        out = f(x.to("webgpu"))
    kernels = [r.kernel for r in prof.key_averages()]
    assert any(k.startswith("wgsl:wgsl_fused_") and "sin" in k for k in kernels), kernels
    torch.testing.assert_close(out.cpu(), (x.sin() + 1).relu().sum(-1))


@pytest.mark.parametrize("kind,rows,threads", [("gpu", 1, 256), ("gpu", 3, 256), ("gpu", 512, 64),
                                               ("software", 1, 64)])
def test_reduction_workgroup_follows_the_row_count(kind, rows, threads, monkeypatch, no_fallback):
    """GPUs reduce few rows (decode's norms) with wide workgroups, many rows with 64 invocations;
    software adapters keep 64. Each shape's results still match the CPU: sums, Welford, argmax."""
    from torch._inductor.utils import run_and_get_code

    monkeypatch.setenv("TORCH_WEBGPU_ADAPTER_KIND", kind)
    x, r, w = (make(shape, torch.float32, seed=i) for i, shape in enumerate([(rows, 900), (rows, 900), (900,)]))

    def rms_norm(x, r, w):
        h = x + r
        return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * w

    cases = [(rms_norm, (x, r, w)), (lambda x: torch.var_mean(x, -1), (x,)),
             (lambda x: x.argmax(-1), (x,)), (lambda x: (x * 2).sum(-1), (x,))]
    for fn, args in cases:
        torch._dynamo.reset()
        actual, (code, *_) = run_and_get_code(torch.compile(fn), *[dev(a) for a in args])
        assert f"workgroup={threads}," in code
        assert_same(actual, fn(*args), rtol=1e-4, atol=1e-4)  # 900-term float32 sums
    # Rows shorter than the workgroup take a power of two that covers them.
    torch._dynamo.reset()
    short = make((rows, 40), torch.float32)
    actual, (code, *_) = run_and_get_code(torch.compile(lambda x: x.sum(-1)), dev(short))
    assert f"workgroup={min(threads, 64)}," in code
    assert_same(actual, short.sum(-1))


def test_reduction_threads_override_is_checked(monkeypatch):
    monkeypatch.setenv("TORCH_WEBGPU_COMPILE_REDUCTION_THREADS", "100")
    with pytest.raises(Exception, match="power of two"):
        torch.compile(lambda x: x.sum(-1))(dev(make((2, 8), torch.float32)))
