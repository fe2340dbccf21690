"""Native losses against the CPU: MSE, smooth L1, Huber, binary cross-entropy (weights)
and nll_loss / nll_loss2d (class weights, ignore_index, unbatched), cross_entropy through
them, every reduction, gradients, half dtypes, empty inputs and the CPU's errors (targets
out of range, BCE inputs outside [0, 1])."""
import pytest
import torch
import torch.nn.functional as F

from conftest import FLOAT_DTYPES, check, make
from nn_helpers import forward_backward

REDUCTIONS = ["none", "mean", "sum"]


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_pointwise_losses(reduction, dtype):
    x, t = make((4, 5), dtype), make((4, 5), dtype, seed=1)
    tol = {} if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)
    forward_backward(lambda a, b: F.mse_loss(a, b, reduction=reduction), x, t, tol=tol)
    for beta in [0.5, 1.0, 3.0]:
        forward_backward(lambda a, b: F.smooth_l1_loss(a, b, reduction=reduction, beta=beta), x, t,
                         tol=tol)
    forward_backward(lambda a, b: F.huber_loss(a, b, reduction=reduction, delta=0.7), x, t, tol=tol)
    p, q = make((4, 5), dtype, low=0.01, high=0.99), make((4, 5), dtype, seed=2, low=0, high=1)
    w = make((5,), dtype, seed=3, low=0, high=1)
    # (The target's gradient needs logit, another family's op.)
    forward_backward(lambda a, b: F.binary_cross_entropy(a, b, reduction=reduction), p, q, tol=tol,
                     frozen=(1,))
    forward_backward(lambda a, b, c: F.binary_cross_entropy(a, b, weight=c, reduction=reduction),
                     p, q, w, tol=tol, frozen=(1, 2))


@pytest.mark.usefixtures("no_fallback")
def test_pointwise_loss_special_cases():
    p = torch.tensor([0.0, 1.0, 0.5, 1e-30])
    q = torch.tensor([0.0, 1.0, 1.0, 1.0])
    check(lambda a, b: F.binary_cross_entropy(a, b, reduction="none"), p, q)
    check(lambda a, b: F.mse_loss(a, b, reduction="sum"), torch.zeros(0), torch.zeros(0))
    check(lambda a, b: F.mse_loss(a, b), make((4, 5), torch.float32), make((4, 5), torch.float32).t().t())
    check(lambda a, b: torch.ops.aten.mse_loss.out(a, b, 1, out=torch.empty(3, device=a.device)),
          make((4, 5), torch.float32), make((4, 5), torch.float32, seed=1))


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_nll_loss(reduction, dtype):
    lp = make((6, 5), dtype)
    tol = {} if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)
    tg = torch.tensor([0, 4, 2, -100, 1, 3])
    cw = make((5,), dtype, seed=1, low=0.1, high=1)
    forward_backward(lambda a, b: F.nll_loss(a, b, reduction=reduction), lp, tg, tol=tol)
    forward_backward(lambda a, b, c: F.nll_loss(a, b, weight=c, reduction=reduction), lp, tg, cw,
                     tol=tol, frozen=(2,))
    forward_backward(lambda a, b: F.nll_loss(a, b, reduction=reduction, ignore_index=2), lp,
                     torch.tensor([0, 4, 2, 2, 1, 3]), tol=tol)
    forward_backward(lambda a, b: F.nll_loss(a, b, reduction=reduction), lp[0], torch.tensor(3), tol=tol)
    lp4, tg4 = make((2, 3, 4, 5), dtype), torch.randint(0, 3, (2, 4, 5), generator=torch.Generator().manual_seed(0))
    forward_backward(lambda a, b, c: F.nll_loss(a, b, weight=c, reduction=reduction), lp4, tg4,
                     cw[:3], tol=tol, frozen=(2,))


@pytest.mark.usefixtures("no_fallback")
def test_nll_loss_all_ignored_and_empty():
    lp = make((3, 4), torch.float32)
    check(lambda a, b: F.nll_loss(a, b), lp, torch.full((3,), -100))
    check(lambda a, b: F.nll_loss(a, b, reduction="sum"), torch.zeros(0, 4), torch.zeros(0, dtype=torch.long))


@pytest.mark.usefixtures("quiet_fallback")
def test_cross_entropy():
    x = make((6, 5), torch.float32)
    tg = torch.tensor([0, 4, 2, 1, 1, 3])
    for reduction in REDUCTIONS:
        forward_backward(lambda a, b: F.cross_entropy(a, b, reduction=reduction), x, tg)
    forward_backward(lambda a, b: F.cross_entropy(a, b), make((2, 3, 4, 4), torch.float32),
                     torch.randint(0, 3, (2, 4, 4), generator=torch.Generator().manual_seed(1)))


@pytest.mark.usefixtures("quiet_fallback")
def test_loss_errors():
    assert not check(lambda a, b: F.nll_loss(a, b), make((3, 4), torch.float32), torch.tensor([0, 5, 1]))
    assert not check(lambda a, b: F.nll_loss(a, b), make((3, 4), torch.float32), torch.tensor([0, -3, 1]))
    assert not check(lambda a, b: F.binary_cross_entropy(a, b), torch.tensor([0.5, 1.5]),
                     torch.tensor([0.0, 1.0]))
    assert not check(lambda a, b: F.nll_loss(a, b), make((3, 4), torch.float32), torch.tensor([0, 1]))
    assert not check(lambda a, b: F.huber_loss(a, b, delta=0.0), make((3,), torch.float32),
                     make((3,), torch.float32))
