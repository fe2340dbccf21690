"""Pairwise distances against the CPU: cdist (every p, compute modes, batch broadcasting),
pdist, their gradients, empty and degenerate shapes, non-contiguous inputs, float64 (CPU
fallback) and the CPU's errors."""
import math

import pytest
import torch

from conftest import DEVICE, assert_same, check, dev, make

P_VALUES = [0.0, 1.0, 2.0, 3.0, 0.5, 1.5, 2.5, math.inf]
MODES = ["use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
         "donot_use_mm_for_euclid_dist"]
TOL = dict(rtol=1e-5, atol=1e-5)


def with_ties(x, y):
    """Repeats a row of x in y (zero distances) and one coordinate (zero differences)."""
    y = y.clone()
    y[..., 0, :] = x[..., 0, :]
    y[..., 1, 0] = x[..., 1, 0]
    return y


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("p", P_VALUES)
def test_cdist_forward_and_backward(p):
    x = make((2, 5, 7), torch.float32, seed=1)
    y = with_ties(x, make((2, 6, 7), torch.float32, seed=2))
    mode = "donot_use_mm_for_euclid_dist"
    check(lambda a, b: torch.cdist(a, b, p=p, compute_mode=mode), x, y, tolerances=TOL)
    xc, yc = x.clone().requires_grad_(), y.clone().requires_grad_()
    xd, yd = dev(x).requires_grad_(), dev(y).requires_grad_()
    w = make((2, 5, 6), torch.float32, seed=3)
    (torch.cdist(xc, yc, p=p, compute_mode=mode) * w).sum().backward()
    (torch.cdist(xd, yd, p=p, compute_mode=mode) * dev(w)).sum().backward()
    assert_same(xd.grad, xc.grad, rtol=1e-4, atol=1e-4)
    assert_same(yd.grad, yc.grad, rtol=1e-4, atol=1e-4)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("rows", [(4, 3), (30, 3), (3, 27)])
def test_cdist_compute_modes(mode, rows):
    # p = 2 with more than 25 rows (or mode 1) goes through the matmul form, as on the CPU.
    x = make((rows[0], 6), torch.float32, seed=4)
    y = make((rows[1], 6), torch.float32, seed=5)
    check(lambda a, b: torch.cdist(a, b, compute_mode=mode), x, y, tolerances=TOL)
    check(lambda a, b: torch._cdist_forward(a, b, 2.0, MODES.index(mode)), x, y, tolerances=TOL)
    check(lambda a, b: torch.cdist(a, b, p=1.0, compute_mode=mode), x, y, tolerances=TOL)


@pytest.mark.usefixtures("no_fallback")
def test_cdist_broadcast_noncontiguous_and_empty():
    x = make((3, 1, 4, 5), torch.float32, seed=6)
    y = make((2, 6, 5), torch.float32, seed=7)
    for p in [1.0, 2.0, 3.0, math.inf]:
        check(lambda a, b: torch.cdist(a, b, p=p), x, y, tolerances=TOL)
    xt = make((5, 4), torch.float32, seed=8).t()  # [4, 5], non-contiguous
    ys = make((6, 10), torch.float32, seed=9)[:, ::2]
    check(lambda a, b: torch.cdist(a, b, p=3.0), xt, ys, tolerances=TOL)
    check(lambda a, b: torch.cdist(a[1:], b[2:], p=1.0), xt, ys, tolerances=TOL)
    for sx, sy in [((0, 5), (3, 5)), ((4, 5), (0, 5)), ((4, 0), (3, 0)), ((0, 4, 5), (0, 3, 5)),
                   ((2, 4, 0), (1, 3, 0))]:
        check(lambda a, b: torch.cdist(a, b, p=2.0, compute_mode=MODES[2]),
              make(sx, torch.float32), make(sy, torch.float32))
        check(lambda a, b: torch._cdist_forward(a, b, 1.0, None),
              make(sx, torch.float32), make(sy, torch.float32))


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("p", [1.0, 2.0, 0.5, 3.0, math.inf])
def test_cdist_backward_broadcast(p):
    x = make((3, 1, 4, 5), torch.float32, seed=10).requires_grad_()
    y = make((2, 6, 5), torch.float32, seed=11).requires_grad_()
    xd = dev(x.detach()).requires_grad_()
    yd = dev(y.detach()).requires_grad_()
    torch.cdist(x, y, p=p).sum().backward()
    torch.cdist(xd, yd, p=p).sum().backward()
    assert_same(xd.grad, x.grad, rtol=1e-4, atol=1e-4)
    assert_same(yd.grad, y.grad, rtol=1e-4, atol=1e-4)
    # The raw backward, also on empty operands.
    g = make((3, 2, 4, 6), torch.float32, seed=12)
    d = torch.cdist(x.detach(), y.detach(), p=p)
    check(lambda gg, a, b, dd: torch._cdist_backward(gg, a, b, p, dd), g, x.detach(), y.detach(), d,
          tolerances=dict(rtol=1e-4, atol=1e-4))
    e = torch.zeros(2, 0, 5)
    check(lambda gg, a, b, dd: torch._cdist_backward(gg, a, b, p, dd), torch.zeros(2, 0, 6), e,
          make((2, 6, 5), torch.float32), torch.zeros(2, 0, 6))


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("p", P_VALUES)
def test_pdist_forward_and_backward(p):
    x = make((9, 4), torch.float32, seed=13)
    x[3] = x[1]  # a zero distance
    x[5, 0] = x[2, 0]  # a zero difference
    check(lambda t: torch.nn.functional.pdist(t, p), x, tolerances=TOL)
    xc = x.clone().requires_grad_()
    xd = dev(x).requires_grad_()
    w = make((36,), torch.float32, seed=14)
    (torch.nn.functional.pdist(xc, p) * w).sum().backward()
    (torch.nn.functional.pdist(xd, p) * dev(w)).sum().backward()
    assert_same(xd.grad, xc.grad, rtol=1e-4, atol=1e-4)


@pytest.mark.usefixtures("no_fallback")
def test_pdist_shapes():
    for shape in [(0, 3), (1, 3), (2, 3), (5, 0), (40, 3)]:
        x = make(shape, torch.float32, seed=15)
        check(lambda t: torch.nn.functional.pdist(t, 2.0), x, tolerances=TOL)
        check(lambda t: torch.nn.functional.pdist(t, math.inf), x, tolerances=TOL)
    xt = make((6, 7), torch.float32, seed=16).t()  # pdist makes it contiguous first
    check(lambda t: torch.nn.functional.pdist(t, 1.5), xt, tolerances=TOL)
    x = make((40, 3), torch.float32, seed=17).requires_grad_()
    xd = dev(x.detach()).requires_grad_()
    torch.nn.functional.pdist(x).sum().backward()  # an expanded (stride 0) gradient
    torch.nn.functional.pdist(xd).sum().backward()
    assert_same(xd.grad, x.grad, rtol=1e-4, atol=1e-4)


@pytest.mark.usefixtures("quiet_fallback")
def test_float64_and_errors():
    x = make((4, 5), torch.float64, seed=18)
    y = make((3, 5), torch.float64, seed=19)
    check(lambda a, b: torch.cdist(a, b, p=3.0), x, y)
    check(lambda t: torch.nn.functional.pdist(t, 1.0), x)
    f = make((4, 5), torch.float32)
    check(lambda a: torch.cdist(a, a[0]), f)  # 1-D
    check(lambda a, b: torch.cdist(a, b), f, make((3, 4), torch.float32))  # columns
    check(lambda a: torch.cdist(a, a, p=-1.0), f)
    check(lambda a: torch._cdist_forward(a, a, 2.0, 3), f)
    check(lambda a: torch.cdist(a, a), f.long())
    check(lambda a: torch.cdist(a, a, p=3.0), f.half())
    check(lambda a: torch.nn.functional.pdist(a, -1.0), f)
    check(lambda a: torch.nn.functional.pdist(a), f[0])
    check(lambda a: torch._pdist_forward(a, 2.0), f.t())  # not contiguous
    check(lambda a: torch.nn.functional.pdist(a), f.half())
    assert torch.cdist(dev(f), dev(f)).device.type == DEVICE
