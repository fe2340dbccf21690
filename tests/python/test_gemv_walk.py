"""The software adapters' GEMV (gemm:gemv_walk: an invocation walks K for eight
neighbouring columns, the weight read as vec4 words of 4 float32 or 8 half-type values)
against the CPU. Software adapters take it by default for products of 1 to 3 rows whose
weight has K contiguous, rows on 16 bytes and at least 16 columns (register blocks from 4
rows); TORCH_WEBGPU_GEMM_VARIANT=gemv_walk forces it for any eligible product (most tests
here). Cases cross its edges: K not a multiple of a word (the scalar tail), fewer columns
than one invocation's eight or one workgroup's 64, weight views with a wider row stride and
an offset, strided A, batches with a broadcast weight, a bias and alpha/beta, special
values, and weights it cannot read as vec4 (other variants then)."""
import pytest
import torch
import torch.nn.functional as F

import test_gemv as gemv_cases
from conftest import assert_same, dev, make

TOL = {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.float16: dict(rtol=2e-3, atol=2e-3),
       torch.bfloat16: dict(rtol=2e-2, atol=2e-2)}
DTYPES = list(TOL)


def gemm_kernels(fn):
    """The GEMM kernels `fn` dispatches, and its result on the CPU."""
    with torch.webgpu.profiler.profile() as prof:
        out = fn().cpu()
    return {r.kernel for r in prof.key_averages() if r.kernel.startswith("gemm:")}, out


@pytest.fixture
def forced(monkeypatch):
    monkeypatch.setenv("TORCH_WEBGPU_GEMM_VARIANT", "gemv_walk")
    monkeypatch.setenv("TORCH_WEBGPU_DISABLE_CPU_FALLBACK", "1")


def check(fn, want, kernel="gemm:gemv_walk"):
    kernels, got = gemm_kernels(fn)
    assert kernels == {kernel}, kernels
    torch.testing.assert_close(got, want, **TOL[want.dtype])


@pytest.mark.usefixtures("forced")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,k,n", [(1, 8, 1), (1, 8, 3), (1, 64, 8), (1, 576, 192), (1, 1536, 65),
                                   (2, 256, 130), (3, 104, 17), (15, 40, 200), (1, 8, 1000)])
def test_linear_shapes(dtype, m, k, n):
    x = make((m, k), dtype, seed=1, low=-1, high=1)
    w = make((n, k), dtype, seed=2, low=-1, high=1)
    check(lambda: F.linear(dev(x), dev(w)), gemv_cases.reference(F.linear, x, w))


@pytest.mark.usefixtures("forced")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k", [9, 130, 299])
@pytest.mark.parametrize("start", [0, 8, 16])
def test_weight_views_and_k_tail(dtype, k, start):
    """A weight that is a column slice of a wider matrix (row stride 520 > K, K not a
    multiple of a word: the scalar tail) at an aligned offset, and A strided along K."""
    big = make((40, 520), dtype, seed=3, low=-1, high=1)
    xt = make((k, 3), dtype, seed=4, low=-1, high=1)
    x, w = xt.t()[1:2], big[:, start:start + k]  # x: K stride 3
    check(lambda: F.linear(dev(xt).t()[1:2], dev(big)[:, start:start + k]), gemv_cases.reference(F.linear, x, w))
    # Every other row of the weight (row stride 1040) and a transposed A row.
    check(lambda: F.linear(dev(x), dev(big)[::2, start:start + k]), gemv_cases.reference(F.linear, x, w[::2]))


@pytest.mark.usefixtures("forced")
@pytest.mark.parametrize("dtype", DTYPES)
def test_bias_alpha_beta(dtype):
    x = make((2, 1, 304), dtype, seed=5, low=-1, high=1)
    w = make((50, 304), dtype, seed=6, low=-1, high=1)
    b = make((50,), dtype, seed=7, low=-1, high=1)
    check(lambda: F.linear(dev(x), dev(w), dev(b)), gemv_cases.reference(F.linear, x, w, b))
    c = make((1, 50), dtype, seed=8, low=-1, high=1)
    check(lambda: torch.addmm(dev(c), dev(x[0]), dev(w).t(), alpha=0.5, beta=2.0),
          torch.addmm(c.float(), x[0].float(), w.float().t(), alpha=0.5, beta=2.0).to(dtype))


@pytest.mark.usefixtures("forced")
@pytest.mark.parametrize("dtype", DTYPES)
def test_batched_and_broadcast(dtype):
    """bmm with batch strides; matmul with a weight broadcast over two batch dims (stride 0)."""
    a = make((3, 2, 136), dtype, seed=9, low=-1, high=1)
    w = make((3, 24, 136), dtype, seed=10, low=-1, high=1)
    check(lambda: torch.bmm(dev(a), dev(w).transpose(1, 2)), gemv_cases.reference(torch.bmm, a, w.transpose(1, 2)))
    w1 = make((24, 136), dtype, seed=11, low=-1, high=1)
    check(lambda: torch.matmul(dev(a).unsqueeze(0).expand(2, 3, 2, 136), dev(w1).t()),
          gemv_cases.reference(torch.matmul, a.unsqueeze(0).expand(2, 3, 2, 136), w1.t()))


@pytest.mark.usefixtures("forced")
def test_mv_and_vector_matmul():
    w = make((70, 332), torch.float32, seed=12)
    v = make((332,), torch.float32, seed=13)
    check(lambda: torch.mv(dev(w), dev(v)), torch.mv(w, v))
    check(lambda: dev(v) @ dev(w).t(), v @ w.t())


@pytest.mark.usefixtures("forced")
def test_special_values():
    """test_gemv's nan, +-inf and inf * 0 through this kernel."""
    with torch.webgpu.profiler.profile() as prof:
        gemv_cases.test_special_values()
    assert {r.kernel for r in prof.key_averages() if r.kernel.startswith("gemm:")} == {"gemm:gemv_walk"}


@pytest.mark.usefixtures("forced")
def test_ineligible_weights_take_other_variants():
    """Rows off 16 bytes (float32 at odd offsets, half types at 8-byte ones), K below a word,
    empty products: other variants, still right."""
    for dtype, start in ((torch.float32, 1), (torch.float16, 4), (torch.bfloat16, 4)):
        big = make((40, 521), dtype, seed=16, low=-1, high=1)
        x = make((1, 300), dtype, seed=17, low=-1, high=1)
        kernels, got = gemm_kernels(lambda: F.linear(dev(x), dev(big)[:, start:start + 300]))
        assert "gemm:gemv_walk" not in kernels
        torch.testing.assert_close(got, gemv_cases.reference(F.linear, x, big[:, start:start + 300]), **TOL[dtype])
    x3, w3 = make((1, 3), torch.float32, seed=18), make((20, 3), torch.float32, seed=19)
    assert_same(F.linear(dev(x3), dev(w3)), F.linear(x3, w3), **TOL[torch.float32])
    assert_same(F.linear(dev(torch.ones(1, 8)), dev(torch.ones(0, 8))), torch.ones(1, 0))
    assert_same(F.linear(dev(torch.ones(0, 8)), dev(torch.ones(5, 8))), torch.ones(0, 5))


def test_selected_by_default_on_software_adapters(monkeypatch):
    """Software adapters take it for decode's linears (up to 3 rows); from 4 rows register
    blocks; GPU adapters keep their GEMV."""
    monkeypatch.delenv("TORCH_WEBGPU_GEMM_VARIANT", raising=False)
    monkeypatch.setenv("TORCH_WEBGPU_DISABLE_CPU_FALLBACK", "1")
    x, w = make((1, 1, 576), torch.float32, seed=22), make((192, 576), torch.float32, seed=23)
    monkeypatch.setenv("TORCH_WEBGPU_ADAPTER_KIND", "software")
    check(lambda: F.linear(dev(x), dev(w)), F.linear(x, w))
    x3 = make((3, 576), torch.float32, seed=25)
    check(lambda: F.linear(dev(x3), dev(w)), F.linear(x3, w))
    xh, wh = x.to(torch.float16), w.to(torch.float16)
    check(lambda: F.linear(dev(xh), dev(wh)), gemv_cases.reference(F.linear, xh, wh))
    for rows in (4, 7, 16):
        xr = make((rows, 576), torch.float32, seed=24)
        check(lambda: F.linear(dev(xr), dev(w)), F.linear(xr, w), kernel="gemm:block")
    monkeypatch.setenv("TORCH_WEBGPU_ADAPTER_KIND", "gpu")
    check(lambda: F.linear(dev(x), dev(w)), F.linear(x, w), kernel="gemm:gemv")
