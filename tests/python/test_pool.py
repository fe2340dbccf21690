"""Native pooling against the CPU: max (with indices) and average pooling in 1/2/3-d over
a grid of kernel/stride/padding/dilation/ceil_mode, count_include_pad and
divisor_override, adaptive average and max pooling, gradients, half dtypes, NaN,
channels_last and strided inputs, empty batches and the CPU's errors."""
import itertools

import pytest
import torch
import torch.nn.functional as F

from conftest import FLOAT_DTYPES, check, make
from nn_helpers import forward_backward

pytestmark = pytest.mark.usefixtures("no_fallback")

HALF_TOL = {torch.float32: {}, torch.float16: dict(rtol=1e-2, atol=1e-2),
            torch.bfloat16: dict(rtol=5e-2, atol=5e-2)}

GRID = list(itertools.product([2, 3], [1, 2], [0, 1], [1, 2], [False, True]))


@pytest.mark.parametrize("k,s,p,d,ceil", GRID)
def test_max_pool2d_grid(k, s, p, d, ceil):
    x = make((2, 3, 9, 8), torch.float32)
    forward_backward(lambda t: F.max_pool2d(t, k, s, p, d, ceil_mode=ceil, return_indices=True), x)


@pytest.mark.parametrize("k,s,p,ceil,cip", list(itertools.product([2, 3], [1, 2], [0, 1],
                                                                  [False, True], [False, True])))
def test_avg_pool2d_grid(k, s, p, ceil, cip):
    x = make((2, 3, 9, 8), torch.float32)
    forward_backward(lambda t: F.avg_pool2d(t, k, s, p, ceil_mode=ceil, count_include_pad=cip), x)


def test_avg_pool2d_divisor_override_and_rect_kernel():
    x = make((2, 3, 9, 8), torch.float32)
    forward_backward(lambda t: F.avg_pool2d(t, 3, 2, 1, divisor_override=5), x)
    forward_backward(lambda t: F.avg_pool2d(t, (2, 3), (1, 2), (1, 0)), x)
    forward_backward(lambda t: F.max_pool2d(t, (3, 2), (2, 1), (1, 0), (1, 2)), x)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_pool_dtypes(dtype):
    x = make((2, 3, 7, 6), dtype)
    tol = HALF_TOL[dtype]
    forward_backward(lambda t: F.max_pool2d(t, 3, 2, 1), x, tol=tol)
    forward_backward(lambda t: F.avg_pool2d(t, 3, 2, 1), x, tol=tol)
    forward_backward(lambda t: F.adaptive_avg_pool2d(t, (3, 4)), x, tol=tol)
    forward_backward(lambda t: F.adaptive_max_pool2d(t, (3, 4)), x, tol=tol)


def test_pool_1d_and_3d():
    x1 = make((2, 3, 11), torch.float32)
    forward_backward(lambda t: F.max_pool1d(t, 3, 2, 1), x1)
    forward_backward(lambda t: F.avg_pool1d(t, 3, 2, 1, ceil_mode=True), x1)
    forward_backward(lambda t: F.adaptive_max_pool1d(t, 4), x1)
    x3 = make((2, 2, 5, 6, 7), torch.float32)
    forward_backward(lambda t: F.max_pool3d(t, 2, 2, 1, return_indices=True), x3)
    forward_backward(lambda t: F.max_pool3d(t, 3, 1, 1, dilation=2), x3)
    forward_backward(lambda t: F.avg_pool3d(t, 3, 2, 1, count_include_pad=False), x3)
    forward_backward(lambda t: F.avg_pool3d(t, 2, divisor_override=3), x3)
    forward_backward(lambda t: F.adaptive_avg_pool3d(t, (2, 3, 4)), x3)
    forward_backward(lambda t: F.adaptive_max_pool3d(t, (3, 2, 5), return_indices=True), x3)


@pytest.mark.parametrize("size", [(3, 4), (5, 7), (9, 8), (12, 11), (1, 3)])
def test_adaptive_pool2d(size):
    x = make((2, 3, 9, 8), torch.float32)
    forward_backward(lambda t: F.adaptive_avg_pool2d(t, size), x)
    forward_backward(lambda t: F.adaptive_max_pool2d(t, size, return_indices=True), x)


def test_max_pool_nan_and_unbatched():
    x = make((3, 6, 6), torch.float32)
    x[0, 1, 1] = float("nan")
    x[1, 2, 2] = float("-inf")
    check(lambda t: F.max_pool2d(t, 3, 1, 1, return_indices=True), x)
    check(lambda t: F.adaptive_max_pool2d(t, 2, return_indices=True), x)


def test_pool_layouts_and_empty_batch():
    x = make((2, 3, 8, 8), torch.float32)
    forward_backward(lambda t: F.max_pool2d(t, 2), x.to(memory_format=torch.channels_last))
    forward_backward(lambda t: F.avg_pool2d(t, 2), x[:, :, ::2])
    forward_backward(lambda t: F.avg_pool2d(t, 3, 1, 1), x.transpose(2, 3))
    check(lambda t: F.max_pool2d(t, 2), torch.zeros(0, 3, 4, 4))
    check(lambda t: F.avg_pool2d(t, 2), torch.zeros(0, 3, 4, 4))


def test_pool_out_variant():
    x = make((2, 3, 8, 8), torch.float32)
    check(lambda t: torch.ops.aten.avg_pool2d.out(t, [2, 2], [2, 2], [0, 0], False, True, None,
                                                  out=torch.empty(0, device=t.device)), x)


@pytest.mark.usefixtures("quiet_fallback")
def test_pool_errors(monkeypatch):
    monkeypatch.delenv("TORCH_WEBGPU_DISABLE_CPU_FALLBACK")
    x = make((1, 2, 4, 4), torch.float32)
    assert not check(lambda t: F.max_pool2d(t, 3, 1, 2), x)       # pad > kernel / 2
    assert not check(lambda t: F.avg_pool2d(t, 6), x)             # output too small
    assert not check(lambda t: F.max_pool2d(t, 2, 0), x)          # zero stride
    assert not check(lambda t: F.avg_pool2d(t, 2, divisor_override=0), x)
    assert not check(lambda t: F.adaptive_avg_pool2d(t, (1, 2, 3)), x)


@pytest.mark.parametrize("k,d,p,s", [((2, 3), (1, 1), (0, 0), (1, 1)), ((3, 3), (2, 1), (1, 2), (2, 1)),
                                     ((1, 2), (1, 2), (0, 1), (3, 2))])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_unfold_fold(k, d, p, s, dtype):
    x = make((2, 3, 7, 8), dtype)
    tol = HALF_TOL[dtype]
    forward_backward(lambda t: F.unfold(t, k, d, p, s), x, tol=tol, grad_tol=tol or None)
    forward_backward(lambda t: F.unfold(t, k, d, p, s), x[0], tol=tol, grad_tol=tol or None)
    cols = F.unfold(x.float(), k, d, p, s).to(dtype)
    forward_backward(lambda t: F.fold(t, (7, 8), k, d, p, s), cols, tol=tol, grad_tol=tol or None)


@pytest.mark.usefixtures("quiet_fallback")
def test_unfold_fold_errors(monkeypatch):
    monkeypatch.delenv("TORCH_WEBGPU_DISABLE_CPU_FALLBACK")
    x = make((1, 2, 4, 4), torch.float32)
    assert not check(lambda t: F.unfold(t, 5), x)
    assert not check(lambda t: F.fold(t, (4, 4), 2), make((1, 7, 9), torch.float32))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_max_unpool(dtype):
    x = make((2, 3, 8, 6), dtype)
    y, idx = F.max_pool2d(x, 2, return_indices=True)
    check(lambda a, i: F.max_unpool2d(a, i, 2), y, idx)
    check(lambda a, i: F.max_unpool2d(a, i, 2, output_size=(9, 7)), y, idx)
    check(lambda a, i: F.max_unpool2d(a, i, 2), y[0], idx[0])
    x3 = make((1, 2, 4, 6, 4), dtype)
    y3, idx3 = F.max_pool3d(x3, 2, return_indices=True)
    check(lambda a, i: F.max_unpool3d(a, i, 2), y3, idx3)


@pytest.mark.parametrize("groups", [1, 2, 3, 6])
def test_channel_shuffle(groups):
    x = make((2, 6, 3, 4), torch.float32)
    check(lambda t: F.channel_shuffle(t, groups), x)
    check(lambda t: F.channel_shuffle(t, groups), x.to(memory_format=torch.channels_last))
    check(lambda t: F.channel_shuffle(t, groups), x[:, :, 0])


@pytest.mark.usefixtures("quiet_fallback")
def test_unpool_shuffle_errors(monkeypatch):
    monkeypatch.delenv("TORCH_WEBGPU_DISABLE_CPU_FALLBACK")
    y = make((1, 2, 2, 2), torch.float32)
    assert not check(lambda a, i: F.max_unpool2d(a, i, 2), y, torch.full((1, 2, 2, 2), 99))
    assert not check(lambda t: F.channel_shuffle(t, 4), make((2, 6, 3), torch.float32))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("shape,k,out", [((2, 3, 9, 13), (2, 3), (4, 5)), ((3, 9, 13), (3, 2), (7, 6)),
                                         ((1, 1, 8, 8), (2, 1), (7, 8)),
                                         ((2, 2, 7, 9, 13), (2, 2, 3), (3, 4, 5)),
                                         ((2, 7, 9, 13), (1, 2, 3), (6, 7, 10))])
def test_fractional_max_pool(dtype, shape, k, out):
    # Given samples fix the windows: values, indices and gradients equal the CPU's (the
    # window starts are computed in the samples' dtype, rounding as the CPU does).
    nd = len(k)
    batch = shape[0] if len(shape) == nd + 2 else 1
    x = make(shape, dtype, seed=7)
    x.view(-1)[5] = float("nan")
    u = torch.rand(batch, shape[-nd - 1], nd, generator=torch.Generator().manual_seed(8)).to(dtype)
    fn = F.fractional_max_pool2d if nd == 2 else F.fractional_max_pool3d
    forward_backward(lambda t, s: fn(t, k, output_size=out, return_indices=True, _random_samples=s),
                     x, u, frozen=(1,), tol=HALF_TOL[dtype], grad_tol=HALF_TOL[dtype])


def test_fractional_max_pool_random_and_errors(monkeypatch):
    # Without samples, F draws them on the device: shapes and a valid max per window.
    x = make((2, 3, 10, 10), torch.float32, seed=9)
    y, idx = F.fractional_max_pool2d(x.to("webgpu"), 3, output_ratio=(0.5, 0.5), return_indices=True)
    assert y.shape == (2, 3, 5, 5) and idx.dtype == torch.int64
    assert torch.equal(x.view(2, 3, -1).gather(2, idx.cpu().view(2, 3, -1)).view(2, 3, 5, 5), y.cpu())
    monkeypatch.delenv("TORCH_WEBGPU_DISABLE_CPU_FALLBACK")
    u = torch.rand(1, 1, 2)
    assert not check(lambda t: torch.ops.aten.fractional_max_pool2d(t, (2, 1), (8, 8), u),
                     make((1, 1, 8, 8), torch.float32))  # pool too large for the input
    assert not check(lambda t: torch.ops.aten.fractional_max_pool3d(t, (2, 1, 1), (7, 7, 7), torch.rand(1, 1, 3)),
                     make((1, 1, 8, 8, 8), torch.float32))


def test_large_and_dilated_windows_match_the_cpu():
    # Windows wider than the grid's (7x7 = 49 taps, dilated 5x5, 4x4x2 in 3-d), with
    # padding, dilation and ceil_mode reaching past the edges.
    x = make((2, 3, 13, 12), torch.float32)
    forward_backward(lambda t: F.max_pool2d(t, 7, 2, 3, ceil_mode=True, return_indices=True), x)
    forward_backward(lambda t: F.avg_pool2d(t, 7, 3, 3, count_include_pad=False), x)
    forward_backward(lambda t: F.max_pool2d(t, (5, 5), 1, 2, dilation=(1, 2)), x)
    x3 = make((1, 2, 6, 7, 5), torch.float32)
    forward_backward(lambda t: F.max_pool3d(t, (4, 4, 2), 2, (2, 1, 1), return_indices=True), x3)
    forward_backward(lambda t: F.avg_pool3d(t, (4, 4, 2), 1, 1, ceil_mode=True), x3)
    forward_backward(lambda t: F.avg_pool3d(t, 3, 1, 1, divisor_override=7), x3)
