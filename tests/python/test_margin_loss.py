"""Native margin losses against the CPU: multi_margin_loss (p 1 and 2, margins, class
weights) and multilabel_margin_loss (targets ended by -1, repeated targets), every
reduction, 0-d/1-d/2-d and empty inputs, non-contiguous inputs, out=, gradients (incl.
the explicit backward ops), half dtypes (the CPU has no half kernel: compared with the
float32 CPU result of the same rounded inputs), and errors (targets out of range raise
through the device check, bad shapes and p raise the CPU's errors)."""
import pytest
import torch
import torch.nn.functional as F

from conftest import DEVICE, FLOAT_DTYPES, assert_same, make
from nn_helpers import forward_backward

REDUCTIONS = ["none", "mean", "sum"]
HALF_TOL = {torch.float16: dict(rtol=2e-3, atol=2e-3), torch.bfloat16: dict(rtol=2e-2, atol=2e-2)}


def targets(shape, classes, seed, low=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(low, classes, shape, generator=g)


def half_check(fn, x, *rest, dtype):
    """fn on webgpu in `dtype` against fn on the CPU in float32 of the same values, with
    the gradient w.r.t. x."""
    xr = x.to(dtype)
    xc = xr.float().requires_grad_(True)
    xd = xr.to(DEVICE).requires_grad_(True)
    rest_d = [r.to(DEVICE) if isinstance(r, torch.Tensor) else r for r in rest]
    rest_c = [r.to(dtype).float() if isinstance(r, torch.Tensor) and r.is_floating_point() else r
              for r in rest]
    rest_d = [r.to(dtype) if isinstance(r, torch.Tensor) and r.is_floating_point() else r
              for r in rest_d]
    yc, yd = fn(xc, *rest_c), fn(xd, *rest_d)
    assert yd.dtype == dtype
    assert_same(yd.detach(), yc.detach().to(dtype), **HALF_TOL[dtype])
    up = torch.randn(yc.shape, generator=torch.Generator().manual_seed(5))
    yc.backward(up)
    yd.backward(up.to(dtype).to(DEVICE))
    assert_same(xd.grad, xc.grad.to(dtype), **HALF_TOL[dtype])


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("shape,tshape", [((), ()), ((7,), ()), ((7,), (1,)), ((6, 9), (6,)),
                                          ((1, 3), (1,))])
def test_multi_margin(shape, tshape, p, reduction):
    classes = shape[-1] if shape else 1
    x, t = make(shape, torch.float32), targets(tshape, classes, seed=1)
    w = make((classes,), torch.float32, seed=2, low=0, high=2)
    for margin in [1.0, 0.3, -2.5]:
        forward_backward(lambda a, b: F.multi_margin_loss(a, b, p=p, margin=margin, reduction=reduction),
                         x, t)
    forward_backward(lambda a, b, c: F.multi_margin_loss(a, b, p=p, weight=c, reduction=reduction),
                     x, t, w, frozen=(2,))


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", [(), (6,), (5, 8), (1, 1)])
def test_multilabel_margin(shape, reduction):
    classes = shape[-1] if shape else 1
    x = make(shape, torch.float32)
    for seed in range(3):
        t = targets(shape, classes, seed=seed, low=-1)
        forward_backward(lambda a, b: F.multilabel_margin_loss(a, b, reduction=reduction), x, t)
    # Repeated targets, and a row whose targets fill it (no -1).
    if len(shape) == 2 and classes >= 3:
        t = targets(shape, classes, seed=7)
        t[0, :3] = torch.tensor([2, 2, -1])
        forward_backward(lambda a, b: F.multilabel_margin_loss(a, b, reduction=reduction), x, t)


@pytest.mark.usefixtures("no_fallback")
def test_multilabel_forward_is_target():
    x = make((4, 6), torch.float32)
    t = torch.tensor([[3, 0, -1, 5, 1, 1], [5, 5, 5, 5, 5, 5], [-1, 2, 3, 4, 0, 1], [0, 1, 2, 3, 4, 5]])
    for r in range(3):
        out, is_t = torch.ops.aten.multilabel_margin_loss_forward(x.to(DEVICE), t.to(DEVICE), r)
        eout, eis_t = torch.ops.aten.multilabel_margin_loss_forward(x, t, r)
        assert_same(out, eout)
        assert_same(is_t, eis_t, exact=True)
        go = make(eout.shape, torch.float32, seed=3)
        gi = torch.ops.aten.multilabel_margin_loss_backward(go.to(DEVICE), x.to(DEVICE), t.to(DEVICE), r,
                                                            is_t)
        assert_same(gi, torch.ops.aten.multilabel_margin_loss_backward(go, x, t, r, eis_t),
                    rtol=1e-5, atol=1e-6)


@pytest.mark.usefixtures("no_fallback")
def test_non_contiguous_and_out():
    base = make((9, 12), torch.float32)
    x = base[::2, 1::2]  # (5, 6), strided
    t = targets((10,), 6, seed=3)[::2]
    forward_backward(lambda a, b: F.multi_margin_loss(a, b, p=2, reduction="none"), x, t)
    tl = targets((5, 12), 6, seed=4, low=-1)[:, ::2]
    forward_backward(lambda a, b: F.multilabel_margin_loss(a, b, reduction="sum"), x, tl)
    out = torch.empty(3, device=DEVICE)
    r = torch.ops.aten.multi_margin_loss.out(x.to(DEVICE), t.to(DEVICE), 1, 1.0, None, 1, out=out)
    assert r.data_ptr() == out.data_ptr()
    assert_same(out, F.multi_margin_loss(x, t))
    gi = torch.empty(0, device=DEVICE)
    go = torch.tensor(0.7)
    torch.ops.aten.multi_margin_loss_backward.grad_input(go.to(DEVICE), x.to(DEVICE), t.to(DEVICE),
                                                         2, 0.5, None, 2, grad_input=gi)
    assert_same(gi, torch.ops.aten.multi_margin_loss_backward(go, x, t, 2, 0.5, None, 2))
    o2, m2 = torch.empty(0, device=DEVICE), torch.empty(0, device=DEVICE)
    torch.ops.aten.multilabel_margin_loss_forward.output(x.to(DEVICE), tl.to(DEVICE), 0, output=o2,
                                                         is_target=m2)
    eo, em = torch.ops.aten.multilabel_margin_loss_forward(x, tl, 0)
    assert_same(o2, eo)
    assert_same(m2, em, exact=True)
    gi2 = torch.empty(0, device=DEVICE)
    go2 = make((5,), torch.float32, seed=9)
    torch.ops.aten.multilabel_margin_loss_backward.grad_input(go2.to(DEVICE), x.to(DEVICE), tl.to(DEVICE),
                                                              0, m2, grad_input=gi2)
    assert_same(gi2, torch.ops.aten.multilabel_margin_loss_backward(go2, x, tl, 0, em))


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("dtype", FLOAT_DTYPES[1:])
def test_half_dtypes(dtype):
    x = make((4, 7), torch.float32)
    t = targets((4,), 7, seed=1)
    w = make((7,), torch.float32, seed=2, low=0, high=2)
    for r in REDUCTIONS:
        half_check(lambda a, b: F.multi_margin_loss(a, b, p=2, margin=0.5, reduction=r), x, t,
                   dtype=dtype)
        half_check(lambda a, b, c: F.multi_margin_loss(a, b, weight=c, reduction=r), x, t, w,
                   dtype=dtype)
        tl = targets((4, 7), 7, seed=3, low=-1)
        half_check(lambda a, b: F.multilabel_margin_loss(a, b, reduction=r), x, tl, dtype=dtype)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_empty_batch(reduction):
    x = torch.zeros(0, 4, device=DEVICE, requires_grad=True)
    y = F.multi_margin_loss(x, torch.zeros(0, dtype=torch.long, device=DEVICE), reduction=reduction)
    y2 = F.multilabel_margin_loss(x, torch.zeros(0, 4, dtype=torch.long, device=DEVICE),
                                  reduction=reduction)
    for out in (y, y2):
        assert out.shape == ((0,) if reduction == "none" else ())
        if reduction == "sum":
            assert out.item() == 0
        (g,) = torch.autograd.grad(out.sum(), x)
        assert g.shape == (0, 4)


def test_target_out_of_range_raises():
    x = make((3, 4), torch.float32).to(DEVICE)
    for bad in ([0, 4, 1], [0, -1, 1]):
        with pytest.raises(RuntimeError, match="target out of range"):
            F.multi_margin_loss(x, torch.tensor(bad, device=DEVICE)).cpu()
    with pytest.raises(RuntimeError, match="target out of range"):
        F.multilabel_margin_loss(x, torch.tensor([[0, 1, -2, 0]] * 3, device=DEVICE)).cpu()
    with pytest.raises(RuntimeError, match="target out of range"):
        F.multilabel_margin_loss(x, torch.tensor([[0, 4, -1, 0]] * 3, device=DEVICE)).cpu()
    # The device keeps working after a failed check.
    t = torch.tensor([0, 3, 1])
    assert_same(F.multi_margin_loss(x, t.to(DEVICE)), F.multi_margin_loss(x.cpu(), t))


def test_bad_arguments_raise_like_cpu():
    x, t = make((3, 4), torch.float32), torch.tensor([0, 1, 2])
    cases = [
        lambda d: torch.ops.aten.multi_margin_loss(x.to(d), t.to(d), 3),
        lambda d: F.multi_margin_loss(x.to(d), t[:2].to(d)),
        lambda d: F.multi_margin_loss(x.to(d), t.to(d), weight=torch.ones(3, device=d)),
        lambda d: F.multi_margin_loss(torch.zeros(3, 0, device=d), t.to(d)),
        lambda d: F.multilabel_margin_loss(x.to(d), t.to(d)),
        lambda d: F.multilabel_margin_loss(x.to(d), torch.zeros(3, 2, dtype=torch.long, device=d)),
    ]
    for case in cases:
        with pytest.raises(RuntimeError) as cpu_err:
            case("cpu")
        with pytest.raises(RuntimeError) as dev_err:
            case(DEVICE)
        assert str(cpu_err.value).split("\n")[0] in str(dev_err.value)
