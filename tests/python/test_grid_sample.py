"""Native grid sampling against the CPU: F.grid_sample / grid_sampler_2d (bilinear,
nearest, bicubic) and grid_sampler_3d (trilinear, nearest) over every padding mode and
both corner alignments, with grids reaching outside [-1, 1]; input and grid gradients
(output_mask honoured), half dtypes (the CPU rounds every step in half precision: the
forward matches it), non-contiguous operands, empty batches/channels, and the CPU's
argument errors."""
import pytest
import torch
import torch.nn.functional as F

from conftest import DEVICE, FLOAT_DTYPES, assert_same, make
from nn_helpers import forward_backward

PADDINGS = ["zeros", "border", "reflection"]
GRAD_TOL = dict(rtol=1e-4, atol=1e-4)


def grid(shape, seed, spread=1.3):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(shape, generator=g) * 2 - 1) * spread


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("padding", PADDINGS)
@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
def test_grid_sample_2d(mode, padding, align):
    x = make((2, 3, 5, 7), torch.float32)
    gr = grid((2, 4, 6, 2), seed=1)
    forward_backward(lambda a, b: F.grid_sample(a, b, mode=mode, padding_mode=padding, align_corners=align),
                     x, gr, grad_tol=GRAD_TOL)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("padding", PADDINGS)
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
def test_grid_sample_3d(mode, padding, align):
    x = make((2, 2, 4, 5, 3), torch.float32)
    gr = grid((2, 3, 2, 4, 3), seed=2)
    forward_backward(lambda a, b: F.grid_sample(a, b, mode=mode, padding_mode=padding, align_corners=align),
                     x, gr, grad_tol=GRAD_TOL)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("align", [False, True])
def test_far_outside_and_unit_sizes(align):
    # Coordinates many spans away (several reflections), and size-1 spatial dims.
    x = make((1, 2, 1, 4), torch.float32)
    gr = grid((1, 3, 5, 2), seed=3, spread=9.0)
    for padding in PADDINGS:
        for mode in ["bilinear", "nearest", "bicubic"]:
            forward_backward(lambda a, b: F.grid_sample(a, b, mode=mode, padding_mode=padding,
                                                        align_corners=align), x, gr, grad_tol=GRAD_TOL)
    x3 = make((1, 1, 1, 1, 3), torch.float32)
    gr3 = grid((1, 2, 2, 2, 3), seed=4, spread=5.0)
    for padding in PADDINGS:
        forward_backward(lambda a, b: F.grid_sample(a, b, padding_mode=padding, align_corners=align),
                         x3, gr3, grad_tol=GRAD_TOL)


def half_case(x, gr, rel, **kw):
    """Forward equal to the CPU's (which rounds each step in the half type); gradients
    (accumulated in f32 here, in the half type on the CPU) within `rel` of the largest."""
    xc, gc = x.clone().requires_grad_(True), gr.clone().requires_grad_(True)
    xd, gd = x.to(DEVICE).requires_grad_(True), gr.to(DEVICE).requires_grad_(True)
    y, yd = F.grid_sample(xc, gc, **kw), F.grid_sample(xd, gd, **kw)
    assert_same(yd.detach(), y.detach())
    up = torch.randn(y.shape, generator=torch.Generator().manual_seed(0)).to(x.dtype)
    y.backward(up)
    yd.backward(up.to(DEVICE))
    for d, c in ((xd.grad, xc.grad), (gd.grad, gc.grad)):
        assert d.dtype == c.dtype and d.shape == c.shape
        err = (d.cpu().float() - c.float()).abs().max().item()
        assert err <= rel * max(c.float().abs().max().item(), 1.0), (kw, err)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("dtype", FLOAT_DTYPES[1:])
def test_half_dtypes(dtype):
    x = make((2, 3, 5, 6), dtype)
    gr = grid((2, 3, 4, 2), seed=5).to(dtype)
    x3 = make((1, 2, 3, 4, 5), dtype)
    gr3 = grid((1, 2, 3, 2, 3), seed=6).to(dtype)
    rel = 0.01 if dtype == torch.float16 else 0.05
    for padding in PADDINGS:
        for align in [False, True]:
            for mode in ["bilinear", "nearest", "bicubic"]:
                half_case(x, gr, rel, mode=mode, padding_mode=padding, align_corners=align)
            for mode in ["bilinear", "nearest"]:
                half_case(x3, gr3, rel, mode=mode, padding_mode=padding, align_corners=align)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("nd", [2, 3])
def test_backward_output_mask(nd):
    shape = (2, 3, 4, 5) if nd == 2 else (2, 3, 4, 5, 3)
    x = make(shape, torch.float32)
    gr = grid((2, 3, 4, nd) if nd == 2 else (2, 2, 3, 4, 3), seed=7)
    go = make((2, 3) + tuple(gr.shape[1:-1]), torch.float32, seed=8)
    op = torch.ops.aten.grid_sampler_2d_backward if nd == 2 else torch.ops.aten.grid_sampler_3d_backward
    for mask in ([True, True], [False, True], [True, False]):
        for padding in range(3):
            gi, gg = op(go.to(DEVICE), x.to(DEVICE), gr.to(DEVICE), 0, padding, False, mask)
            egi, egg = op(go, x, gr, 0, padding, False, mask)
            assert (gi is None) == (egi is None)
            if egi is not None:
                assert_same(gi, egi, **GRAD_TOL)
            assert_same(gg, egg, **GRAD_TOL)
    # Only the grid needs a gradient.
    xd, gd = x.to(DEVICE), gr.to(DEVICE).requires_grad_(True)
    (F.grid_sample(xd, gd, align_corners=False) * go.to(DEVICE)).sum().backward()
    gc = gr.clone().requires_grad_(True)
    (F.grid_sample(x, gc, align_corners=False) * go).sum().backward()
    assert_same(gd.grad, gc.grad, **GRAD_TOL)


@pytest.mark.usefixtures("no_fallback")
def test_non_contiguous_inputs():
    x = make((2, 6, 5, 8), torch.float32)[:, ::2, :, 1::2]
    gr = grid((2, 7, 3, 2), seed=9).transpose(1, 2)
    assert not x.is_contiguous() and not gr.is_contiguous()
    for mode in ["bilinear", "nearest", "bicubic"]:
        forward_backward(lambda a, b: F.grid_sample(a, b, mode=mode, align_corners=True), x, gr,
                         grad_tol=GRAD_TOL)


@pytest.mark.usefixtures("no_fallback")
def test_empty_batch_and_channels():
    for xs, gs in [((0, 2, 3, 3), (0, 2, 2, 2)), ((2, 0, 3, 3), (2, 2, 2, 2)),
                   ((1, 2, 3, 3), (1, 0, 2, 2)), ((1, 2, 2, 3, 3), (1, 2, 0, 2, 3))]:
        x = torch.randn(xs, device=DEVICE, requires_grad=True)
        g = torch.randn(gs, device=DEVICE, requires_grad=True)
        y = F.grid_sample(x, g, align_corners=False)
        assert y.shape == F.grid_sample(torch.randn(xs), torch.randn(gs), align_corners=False).shape
        gx, gg = torch.autograd.grad(y.sum(), (x, g))
        assert gx.shape == xs and gg.shape == gs
        assert gx.cpu().abs().sum() == 0 and gg.cpu().abs().sum() == 0


def test_errors_match_cpu():
    cases = [
        lambda d: F.grid_sample(torch.zeros(1, 1, 3, 3, device=d), torch.zeros(2, 2, 2, 2, device=d), align_corners=False),
        lambda d: F.grid_sample(torch.zeros(1, 1, 3, 3, device=d), torch.zeros(1, 2, 2, 3, device=d), align_corners=False),
        lambda d: F.grid_sample(torch.zeros(1, 1, 0, 3, device=d), torch.zeros(1, 2, 2, 2, device=d), align_corners=False),
        lambda d: torch.grid_sampler_3d(torch.zeros(1, 1, 2, 3, 3, device=d),
                                        torch.zeros(1, 2, 2, 2, 3, device=d), 2, 0, False),
        lambda d: torch.grid_sampler_2d(torch.zeros(1, 1, 3, 3, 3, device=d),
                                        torch.zeros(1, 2, 2, 2, 3, device=d), 0, 0, False),
    ]
    for case in cases:
        with pytest.raises(RuntimeError) as cpu_err:
            case("cpu")
        with pytest.raises(RuntimeError) as dev_err:
            case(DEVICE)
        assert str(cpu_err.value).split("\n")[0] == str(dev_err.value).split("\n")[0]


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("align", [False, True])
def test_special_coordinates(align):
    # NaN, infinite and huge grid values: no out-of-bounds reads, the CPU's 2-d results.
    x = make((1, 2, 3, 4), torch.float32)
    inf, nan = float("inf"), float("nan")
    gr = torch.tensor([[[[nan, 0.2], [inf, -inf], [1e38, -1e38], [0.3, 0.1], [-1.0, 1.0], [1.0, -1.0]]]])
    for mode in ["bilinear", "nearest", "bicubic"]:
        for padding in PADDINGS:
            y = F.grid_sample(x.to(DEVICE), gr.to(DEVICE), mode=mode, padding_mode=padding, align_corners=align)
            assert_same(y, F.grid_sample(x, gr, mode=mode, padding_mode=padding, align_corners=align))
