"""The GEMV kernel for weights with N contiguous (x @ W with W [k, n]: GPT-2's Conv1D, a
`torch.addmm(bias, x, W)`, at decode) against the CPU. GPUs take it by default for up to 4
rows of A (splitting K when its column groups are too few); software adapters only with
TORCH_WEBGPU_GEMM_VARIANT=gemv_cols (no split, lanes per column run chosen by shape),
gemv_cols_split (at least two slices of K, then a pass that adds them), gemv_cols_scalar (no
vec4 words of four float32 columns, which the others read where N is a multiple of 4 and
rows start on 16 bytes) or gemv_cols_lanes2 / gemv_cols_lanes32 (the fewest and the most
lanes per run: subgroup shuffles cover several runs, or runs span subgroups), which the
tests set. Cases cross its edges: K below one
sweep of the warps, K not a multiple of the unrolled step, N not a multiple of 32, weight
views with a row stride wider than N and an odd start, strided x, batches, special values."""
import pytest
import torch
import torch.nn.functional as F

import test_gemv as gemv_cases
from conftest import assert_same, dev, make

TOL = {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.float16: dict(rtol=2e-3, atol=2e-3),
       torch.bfloat16: dict(rtol=2e-2, atol=2e-2)}
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


@pytest.fixture(autouse=True, params=["gemv_cols", "gemv_cols_split", "gemv_cols_scalar",
                                                  "gemv_cols_lanes2", "gemv_cols_lanes32"])
def variant(request, monkeypatch):
    monkeypatch.setenv("TORCH_WEBGPU_GEMM_VARIANT", request.param)
    monkeypatch.setenv("TORCH_WEBGPU_DISABLE_CPU_FALLBACK", "1")
    return request.param


def reference(fn, *args, **kwargs):
    """The CPU's result in float32 math, rounded to the dtype (as ours accumulates)."""
    dtype = args[0].dtype
    return fn(*[a.float() if isinstance(a, torch.Tensor) else a for a in args], **kwargs).to(dtype)


def test_the_variant_runs(variant):
    x, w = make((1, 300), torch.float32, seed=1), make((300, 40), torch.float32, seed=2)
    with torch.webgpu.profiler.profile() as prof:
        got = dev(x) @ dev(w)
    kernels = {r.kernel for r in prof.key_averages()}
    assert any(k.startswith("gemm:gemv_cols") for k in kernels), kernels
    assert any(k.startswith("gemm:splitk_sum") for k in kernels) == (variant == "gemv_cols_split"), kernels
    assert_same(got, x @ w, **TOL[torch.float32])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,k,n", [(1, 2, 1), (1, 7, 3), (1, 31, 33), (1, 64, 32), (1, 129, 17),
                                   (1, 768, 2304), (2, 1000, 65), (3, 257, 12), (4, 513, 96)])
def test_matmul_shapes(dtype, m, k, n):
    x = make((m, k), dtype, seed=1, low=-1, high=1)
    w = make((k, n), dtype, seed=2, low=-1, high=1)
    assert_same(dev(x) @ dev(w), reference(torch.matmul, x, w), **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_conv1d_addmm(dtype):
    """GPT-2's Conv1D: addmm(bias, x, W), and addmm's alpha and beta."""
    x = make((1, 384), dtype, seed=3, low=-1, high=1)
    w = make((384, 100), dtype, seed=4, low=-1, high=1)
    b = make((100,), dtype, seed=5, low=-1, high=1)
    assert_same(torch.addmm(dev(b), dev(x), dev(w)), reference(torch.addmm, b, x, w), **TOL[dtype])
    got = torch.addmm(dev(b), dev(x), dev(w), alpha=0.5, beta=2.0)
    assert_same(got, reference(torch.addmm, b, x, w, alpha=0.5, beta=2.0), **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("start", [0, 1])
def test_views(dtype, start):
    """A weight that is a column block of a wider matrix (row stride > N) starting at an even
    or odd element, and a strided x (a column of a transposed matrix)."""
    big = make((300, 90), dtype, seed=7, low=-1, high=1)
    w = big[:, start:start + 70]
    xt = make((300, 3), dtype, seed=8, low=-1, high=1)
    x = xt.t()[1:2]  # (1, 300), K stride 3
    want = reference(torch.matmul, x, w)
    assert_same(dev(x) @ dev(big)[:, start:start + 70], want, **TOL[dtype])
    assert_same(dev(xt).t()[1:2] @ dev(w), want, **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_batched_and_broadcast(dtype):
    """bmm/matmul with one row per matrix: batch strides, a broadcast (stride 0) weight."""
    a = make((3, 1, 130), dtype, seed=15, low=-1, high=1)
    w = make((3, 130, 24), dtype, seed=16, low=-1, high=1)
    assert_same(torch.bmm(dev(a), dev(w)), reference(torch.bmm, a, w), **TOL[dtype])
    w1 = make((130, 24), dtype, seed=17, low=-1, high=1)
    got = torch.matmul(dev(a).unsqueeze(0).expand(2, 3, 1, 130), dev(w1))
    want = torch.matmul(a.float().unsqueeze(0).expand(2, 3, 1, 130), w1.float()).to(dtype)
    assert_same(got, want, **TOL[dtype])


def test_special_values():
    """test_gemv's nan, +-inf and inf * 0, the weight stored [k, n] (N contiguous)."""
    gemv_cases.test_special_values(lambda x, w: dev(x) @ dev(w.t().contiguous()))


def test_empty_and_gradients():
    assert_same(dev(torch.randn(1, 10)) @ dev(torch.randn(10, 0)), torch.empty(1, 0))
    x = make((1, 150), torch.float32, seed=13).requires_grad_()
    w = make((150, 20), torch.float32, seed=14).requires_grad_()
    xd, wd = dev(x.detach()).requires_grad_(), dev(w.detach()).requires_grad_()
    (x @ w).sum().backward()
    (xd @ wd).sum().backward()
    assert_same(xd.grad, x.grad, **TOL[torch.float32])
    assert_same(wd.grad, w.grad, **TOL[torch.float32])
