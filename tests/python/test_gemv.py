"""The GEMV kernel (matrix-vector products whose weight has K contiguous: F.linear at decode)
against the CPU. GPUs take it by default for up to 4 rows of A (16 where its weight rows start
on 16 bytes: several rows to a workgroup); software adapters only with
TORCH_WEBGPU_GEMM_VARIANT=gemv, which every test here sets (so any row count runs it). Cases
cross its edges: K below one lane sweep, K not a multiple of the 4 x 32 unrolled step, odd K
and odd weight offsets (half types then read element by element instead of in pairs or
16-byte words), row
strides wider than K, a bias (beta term), batches, special values."""
import pytest
import torch
import torch.nn.functional as F

from conftest import assert_same, dev, make

TOL = {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.float16: dict(rtol=2e-3, atol=2e-3),
       torch.bfloat16: dict(rtol=2e-2, atol=2e-2)}
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


@pytest.fixture(autouse=True, params=["gemv", "gemv_scalar", "gemv_lanes32", "gemv_direct_a"])
def gemv_variant(monkeypatch, request):
    """gemv reads weights whose rows start on 16 bytes as vec4 words (most cases here) by
    8, 16 or 32 lanes per column as K's word count and the output count ask, with A
    staged in workgroup memory; gemv_lanes32 always by 32; gemv_direct_a reads A per word
    instead; gemv_scalar element by element (or in pairs): every loop runs every case."""
    monkeypatch.setenv("TORCH_WEBGPU_GEMM_VARIANT", request.param)
    monkeypatch.setenv("TORCH_WEBGPU_DISABLE_CPU_FALLBACK", "1")


def reference(fn, *args):
    """The CPU's result in float32 math, rounded to the dtype (as ours accumulates)."""
    dtype = args[0].dtype
    return fn(*[a.float() if isinstance(a, torch.Tensor) else a for a in args]).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,k,n", [(1, 2, 1), (1, 7, 3), (1, 31, 9), (1, 32, 8), (1, 129, 17),
                                   (1, 384, 40), (1, 450, 33), (2, 896, 65), (3, 257, 12),
                                   (4, 1000, 7), (6, 64, 10)])
def test_linear_shapes(dtype, m, k, n):
    x = make((m, k), dtype, seed=1, low=-1, high=1)
    w = make((n, k), dtype, seed=2, low=-1, high=1)
    assert_same(F.linear(dev(x), dev(w)), reference(F.linear, x, w), **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_linear_bias_and_batch(dtype):
    x = make((2, 1, 300), dtype, seed=3, low=-1, high=1)
    w = make((50, 300), dtype, seed=4, low=-1, high=1)
    b = make((50,), dtype, seed=5, low=-1, high=1)
    assert_same(F.linear(dev(x), dev(w), dev(b)), reference(F.linear, x, w, b), **TOL[dtype])
    # addmm with alpha and beta goes through the same epilogue.
    c = make((1, 50), dtype, seed=6, low=-1, high=1)
    got = torch.addmm(dev(c), dev(x[0]), dev(w).t(), alpha=0.5, beta=2.0)
    want = torch.addmm(c.float(), x[0].float(), w.float().t(), alpha=0.5, beta=2.0).to(dtype)
    assert_same(got, want, **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("start", [0, 1])
def test_weight_views(dtype, start):
    """A weight that is a column slice of a wider matrix (row stride > K) starting at an
    even or odd element, and a strided x (a column of a transposed matrix)."""
    big = make((40, 520), dtype, seed=7, low=-1, high=1)
    w = big[:, start:start + 300]
    xt = make((300, 3), dtype, seed=8, low=-1, high=1)
    x = xt.t()[1:2]  # (1, 300) with stride 1 across rows of xt: K stride 3
    assert_same(F.linear(dev(x), dev(big)[:, start:start + 300]), reference(F.linear, x, w), **TOL[dtype])
    assert_same(F.linear(dev(xt).t()[1:2], dev(w)), reference(F.linear, x, w), **TOL[dtype])


def test_mv_and_vector_matmul():
    w = make((70, 333), torch.float32, seed=9)
    v = make((333,), torch.float32, seed=10)
    assert_same(torch.mv(dev(w), dev(v)), torch.mv(w, v), **TOL[torch.float32])
    assert_same(dev(v) @ dev(w).t(), v @ w.t(), **TOL[torch.float32])


def test_special_values(product=lambda x, w: F.linear(dev(x), dev(w))):
    """nan, +-inf and inf * 0 in a weight [n, k]; `product(x, w)` computes x @ w.t() on
    webgpu (other GEMV tests pass their own layout of w)."""
    x = make((1, 200), torch.float32, seed=11)
    w = make((6, 200), torch.float32, seed=12)
    w[1, 5], w[2, 199], w[3, 0] = float("nan"), float("inf"), float("-inf")
    x[0, 7] = 0.0
    w[4, 7] = float("inf")  # inf * 0 -> nan in output 4 only
    got, want = product(x, w).cpu(), F.linear(x, w)
    assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got.isinf(), want.isinf())
    finite = want.isfinite()
    torch.testing.assert_close(got[finite], want[finite], **TOL[torch.float32])


def test_empty():
    x, w = torch.randn(1, 0), torch.randn(5, 0)
    assert_same(F.linear(dev(x), dev(w)), F.linear(x, w))
    x, w = torch.randn(1, 10), torch.randn(0, 10)
    assert_same(F.linear(dev(x), dev(w)), F.linear(x, w))


def test_gradients():
    x = make((1, 150), torch.float32, seed=13).requires_grad_()
    w = make((20, 150), torch.float32, seed=14).requires_grad_()
    xd, wd = dev(x.detach()).requires_grad_(), dev(w.detach()).requires_grad_()
    F.linear(x, w).sum().backward()
    F.linear(xd, wd).sum().backward()
    assert_same(xd.grad, x.grad, **TOL[torch.float32])
    assert_same(wd.grad, w.grad, **TOL[torch.float32])


@pytest.mark.parametrize("dtype", DTYPES)
def test_batched_and_broadcast(dtype):
    """bmm/matmul with one row per matrix: batch strides, a broadcast (stride 0) weight."""
    a = make((3, 1, 130), dtype, seed=15, low=-1, high=1)
    w = make((3, 24, 130), dtype, seed=16, low=-1, high=1)
    got = torch.bmm(dev(a), dev(w).transpose(1, 2))
    assert_same(got, torch.bmm(a.float(), w.float().transpose(1, 2)).to(dtype), **TOL[dtype])
    w1 = make((24, 130), dtype, seed=17, low=-1, high=1)
    got = torch.matmul(dev(a).unsqueeze(0).expand(2, 3, 1, 130), dev(w1).t())
    want = torch.matmul(a.float().unsqueeze(0).expand(2, 3, 1, 130), w1.float().t()).to(dtype)
    assert_same(got, want, **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lanes", ["gemv", "gemv_lanes8", "gemv_lanes16", "gemv_lanes32", "gemv_lanes8_direct_a",
                                   "gemv_lanes32_direct_a"])
@pytest.mark.parametrize("m,k,n,start", [(1, 1000, 33, 0), (4, 2056, 7, 8), (3, 135, 5, 16), (2, 24, 9, 0),
                                         (1, 4100, 3, 8)])
def test_row_lanes(monkeypatch, dtype, lanes, m, k, n, start):
    """The vec4-word GEMV by 8, 16 or 32 lanes per column (gemv: as K's word count asks),
    A staged in chunks of 2048 elements (K = 4100: three) or read per word (gemv_direct_a):
    K not a multiple of a word (the tail) or of the lanes' unrolled step, fewer words than
    lanes, odd N, a weight view with row stride 4200 > K at an offset on 16 bytes, 1-4
    rows of a strided x, and a bias."""
    monkeypatch.setenv("TORCH_WEBGPU_GEMM_VARIANT", lanes)
    big = make((n, 4200), dtype, seed=21, low=-1, high=1)
    w = big[:, start:start + k]
    xt = make((k, m * 2), dtype, seed=22, low=-1, high=1)
    x = xt.t()[::2]  # (m, k): K stride 2m, row stride 2
    b = make((n,), dtype, seed=23, low=-1, high=1)
    with torch.webgpu.profiler.profile() as prof:
        got = F.linear(dev(xt).t()[::2], dev(big)[:, start:start + k], dev(b))
        got.cpu()
    assert {r.kernel for r in prof.key_averages() if r.kernel.startswith("gemm:")} == {"gemm:gemv"}
    assert_same(got, reference(F.linear, x, w, b), **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("variant", ["gemv", "gemv_row_each"])
@pytest.mark.parametrize("m,k,n,start", [(2, 1000, 33, 0), (3, 520, 17, 8), (5, 2056, 9, 0), (8, 270, 40, 16),
                                         (16, 1003, 65, 8)])
def test_row_blocks(monkeypatch, dtype, variant, m, k, n, start):
    """Up to 16 rows of A (a short prompt's prefill) through the vec4-word GEMV with 2, 4 or
    8 rows to a workgroup, each weight word dotted with every row staged beside it (gemv), or
    a workgroup per row (gemv_row_each): row counts that leave a block part empty (3, 5),
    two blocks (16), K over several staged chunks (256 elements a row with 8 rows) and past
    its last whole word, a strided x, a weight view at an offset, a bias, a batch."""
    monkeypatch.setenv("TORCH_WEBGPU_GEMM_VARIANT", variant)
    big = make((n, 4200), dtype, seed=31, low=-1, high=1)
    w = big[:, start:start + k]
    xt = make((k, m * 2), dtype, seed=32, low=-1, high=1)
    b = make((n,), dtype, seed=33, low=-1, high=1)
    with torch.webgpu.profiler.profile() as prof:
        got = F.linear(dev(xt).t()[::2], dev(big)[:, start:start + k], dev(b))
        got.cpu()
    assert {r.kernel for r in prof.key_averages() if r.kernel.startswith("gemm:")} == {"gemm:gemv"}
    assert_same(got, reference(F.linear, xt.t()[::2], w, b), **TOL[dtype])
    x3 = make((3, m, k), dtype, seed=34, low=-1, high=1)
    assert_same(F.linear(dev(x3), dev(w)), reference(F.linear, x3, w), **TOL[dtype])


@pytest.mark.parametrize("m", [1, 4, 8, 16, 17])
def test_gpus_take_the_gemv_up_to_16_rows(monkeypatch, m):
    """On a GPU (forced here) the heuristic sends up to 16 rows over 16-byte weight rows to
    the GEMV and more rows to the tiles (split-K here)."""
    monkeypatch.delenv("TORCH_WEBGPU_GEMM_VARIANT")
    monkeypatch.setenv("TORCH_WEBGPU_ADAPTER_KIND", "gpu")
    x = make((m, 512), torch.float32, seed=35, low=-1, high=1)
    w = make((300, 512), torch.float32, seed=36, low=-1, high=1)
    with torch.webgpu.profiler.profile() as prof:
        got = F.linear(dev(x), dev(w))
        got.cpu()
    kernels = {r.kernel for r in prof.key_averages() if r.kernel.startswith("gemm:")}
    assert kernels == {"gemm:gemv"} if m <= 16 else "gemm:tiled" in kernels, kernels
    assert_same(got, reference(F.linear, x, w), **TOL[torch.float32])
