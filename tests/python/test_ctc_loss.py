"""Native CTC loss against the CPU with the CPU fallback disabled: losses and gradients of
the log-probabilities for several shapes, padded (int64 and int32) and concatenated
targets, lengths given as lists and as tensors, every reduction, a blank index other than
0, input lengths shorter than the sequence, empty targets, impossible alignments with and
without zero_infinity, unbatched input, long targets (more extended labels than a
workgroup has invocations, and, on llvmpipe, more time steps than one dispatch may loop
over), the raw `_ctc_loss` ops, and errors."""
import pytest
import torch
import torch.nn.functional as F

from conftest import DEVICE, assert_same

pytestmark = pytest.mark.usefixtures("no_fallback")

LOSS_TOL = dict(rtol=1e-4, atol=1e-5)
GRAD_TOL = dict(rtol=1e-4, atol=2e-5)


def gen(seed):
    return torch.Generator().manual_seed(seed)


def sample(T, B, C, S, blank=0, seed=0, full_inputs=False):
    """log_probs [T, B, C], padded targets [B, S] avoiding `blank`, and lengths (input
    lengths up to T, target lengths up to S, some 0)."""
    g = gen(seed)
    log_probs = torch.randn(T, B, C, generator=g).log_softmax(2)
    labels = torch.randint(1, C, (B, S), generator=g)
    targets = (labels + blank) % C  # never the blank
    input_lengths = [T] * B if full_inputs else torch.randint(max(1, T // 2), T + 1, (B,), generator=g).tolist()
    input_lengths[0] = T
    target_lengths = torch.randint(0, S + 1, (B,), generator=g).tolist()
    target_lengths[0] = S
    return log_probs, targets, input_lengths, target_lengths


def concatenated(targets, target_lengths):
    return torch.cat([targets[b, :n] for b, n in enumerate(target_lengths)])


def compare(log_probs, targets, input_lengths, target_lengths, seed=3, loss_tol=None,
            grad_tol=None, reference=torch.float32, **kwargs):
    """F.ctc_loss on the CPU (computed in `reference`) and on webgpu (lengths as lists or
    tensors as given): the loss and the gradient of log_probs under a random weighting of
    the loss."""
    lc = log_probs.detach().to(reference, copy=True).requires_grad_(True)
    ld = log_probs.detach().to(DEVICE).requires_grad_(True)
    to_dev = lambda x: x.to(DEVICE) if isinstance(x, torch.Tensor) else x  # noqa: E731
    want = F.ctc_loss(lc, targets, input_lengths, target_lengths, **kwargs)
    got = F.ctc_loss(ld, to_dev(targets), to_dev(input_lengths), to_dev(target_lengths), **kwargs)
    assert_same(got.detach(), want.detach().float(), **(loss_tol or LOSS_TOL))
    w = torch.rand(want.shape, generator=gen(seed)) + 0.5
    (want * w.to(reference)).sum().backward()
    (got * w.to(DEVICE)).sum().backward()
    assert_same(ld.grad, lc.grad.float(), **(grad_tol or GRAD_TOL))
    return got


SHAPES = [(1, 1, 2, 1), (8, 3, 5, 3), (20, 4, 10, 6), (50, 2, 30, 20), (12, 5, 4, 5)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("form", ["padded", "padded_int32", "concatenated"])
def test_ctc_loss(shape, reduction, form):
    lp, targets, il, tl = sample(*shape, seed=sum(shape))
    if form == "concatenated":
        targets = concatenated(targets, tl)
    elif form == "padded_int32":
        targets = targets.int()
    compare(lp, targets, il, tl, reduction=reduction)


@pytest.mark.parametrize("blank", [2, 4])
@pytest.mark.parametrize("form", ["padded", "concatenated"])
def test_blank_index_and_tensor_lengths(blank, form):
    lp, targets, il, tl = sample(15, 3, 5, 4, blank=blank, seed=blank)
    if form == "concatenated":
        targets = concatenated(targets, tl)
    compare(lp, targets, torch.tensor(il), torch.tensor(tl), blank=blank, reduction="none")
    compare(lp, targets, il, tl, blank=blank, reduction="mean")


def test_repeated_labels_and_empty_targets():
    lp = torch.randn(10, 4, 3, generator=gen(1)).log_softmax(2)
    targets = torch.tensor([[1, 1, 1, 2], [2, 2, 1, 1], [1, 2, 1, 2], [1, 1, 1, 1]])
    compare(lp, targets, [10, 9, 4, 7], [4, 4, 0, 3], reduction="none")
    compare(lp, targets, [10, 9, 4, 7], [0, 0, 0, 0], reduction="sum")


@pytest.mark.parametrize("zero_infinity", [False, True])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_impossible_alignments(zero_infinity, reduction):
    # Sample 0: 3 labels in 2 steps; sample 1: "1 1" needs a blank between (3 steps) in 2;
    # sample 2 is possible; sample 3 has no input steps but a target.
    lp = torch.randn(6, 4, 4, generator=gen(2)).log_softmax(2)
    targets = torch.tensor([[1, 2, 3], [1, 1, 0], [3, 1, 0], [2, 0, 0]])
    got = compare(lp, targets, [2, 2, 6, 0], [3, 2, 2, 1], reduction=reduction,
                  zero_infinity=zero_infinity)
    if reduction == "none":
        assert torch.isinf(got[0]).item() != zero_infinity


@pytest.mark.parametrize("form", ["padded", "concatenated"])
def test_long_targets(form):
    # 2 * 1000 + 1 extended labels (a workgroup strides over them) and 2200 steps: 32
    # positions per invocation per step, past llvmpipe's 65535 loop iterations for one
    # dispatch, so the recurrence runs in several (one dispatch gives wrong results).
    lp, targets, _, _ = sample(2200, 2, 6, 1000, seed=9)
    il, tl = [2200, 2000], [1000, 700]
    if form == "concatenated":
        targets = concatenated(targets, tl)
    # Rounding adds up over 2200 steps (the CPU's float32 result is 1e-3 off its float64
    # one here): compared with the CPU in float64.
    compare(lp, targets, il, tl, reduction="sum", reference=torch.float64,
            loss_tol=dict(rtol=1e-5, atol=1e-3), grad_tol=dict(rtol=1e-3, atol=1e-3))


def test_unbatched():
    lp = torch.randn(7, 5, generator=gen(4)).log_softmax(1)
    compare(lp, torch.tensor([1, 3, 3]), [7], [3])
    compare(lp, torch.tensor([1, 3]), torch.tensor(6), torch.tensor(2), reduction="sum")


def test_raw_ops():
    lp, targets, il, tl = sample(9, 3, 6, 4, seed=5)
    nll, log_alpha = torch.ops.aten._ctc_loss(lp.to(DEVICE), targets.to(DEVICE), il, tl, 0, False)
    enll, ealpha = torch.ops.aten._ctc_loss(lp, targets, il, tl, 0, False)
    assert_same(nll, enll, **LOSS_TOL)
    assert log_alpha.shape == ealpha.shape
    # log_alpha is defined up to each sample's lengths (the CPU leaves the rest unset).
    for b in range(3):
        valid = ealpha[b, :il[b], :2 * tl[b] + 1]
        assert_same(log_alpha[b, :il[b], :2 * tl[b] + 1], valid, **LOSS_TOL)
    grad = torch.rand(3, generator=gen(6))
    for zero_infinity in (False, True):
        got = torch.ops.aten._ctc_loss_backward(grad.to(DEVICE), lp.to(DEVICE), targets.to(DEVICE),
                                                il, tl, nll, log_alpha, 0, zero_infinity)
        want = torch.ops.aten._ctc_loss_backward(grad, lp, targets, il, tl, enll, ealpha, 0,
                                                 zero_infinity)
        assert_same(got, want, **GRAD_TOL)
    got = torch.ops.aten._ctc_loss.Tensor(lp.to(DEVICE), targets.to(DEVICE), torch.tensor(il),
                                          torch.tensor(tl), 0, False)
    assert_same(got[0], enll, **LOSS_TOL)


def test_non_contiguous_log_probs():
    # [B, T, C] data transposed to [T, B, C]: a strided view.
    base = torch.randn(3, 11, 5, generator=gen(7)).log_softmax(2)
    lp = base.transpose(0, 1)
    assert not lp.is_contiguous()
    targets = torch.tensor([[1, 2, 3, 4], [4, 4, 2, 0], [1, 0, 0, 0]])
    il, tl = [11, 8, 5], [4, 3, 1]
    lc = lp.clone().requires_grad_(True)
    bd = base.to(DEVICE).requires_grad_(True)
    want = F.ctc_loss(lc, targets, il, tl, reduction="sum")
    got = F.ctc_loss(bd.transpose(0, 1), targets.to(DEVICE), il, tl, reduction="sum")
    assert_same(got.detach(), want.detach(), **LOSS_TOL)
    want.backward()
    got.backward()
    assert_same(bd.grad.transpose(0, 1), lc.grad, **GRAD_TOL)


def test_target_out_of_range_raises():
    lp = torch.randn(6, 2, 4, generator=gen(8)).log_softmax(2).to(DEVICE)
    for bad in ([[1, 4], [1, 2]], [[1, 2], [-1, 2]]):
        with pytest.raises(RuntimeError, match="target index out of range in aten::ctc_loss"):
            F.ctc_loss(lp, torch.tensor(bad, device=DEVICE), [6, 6], [2, 2]).cpu()
    # Padding past a target length is not a label: any value is fine there.
    targets = torch.tensor([[1, 2], [3, -7]])
    compare(lp.cpu(), targets, [6, 6], [2, 1], reduction="none")


def test_bad_arguments_raise_like_cpu():
    lp, targets, _, _ = sample(6, 2, 4, 2, seed=1)
    cases = [
        lambda d: F.ctc_loss(lp.to(d), targets.to(d), [7, 6], [2, 2]),
        lambda d: F.ctc_loss(lp.to(d), targets.to(d), [-1, 6], [2, 2]),
        lambda d: F.ctc_loss(lp.to(d), targets.to(d), [6, 6], [-1, 2]),
        lambda d: F.ctc_loss(lp.to(d), targets.to(d), [6, 6], [3, 2]),
        lambda d: F.ctc_loss(lp.to(d), targets.to(d), [6, 6], [2, 2], blank=4),
        lambda d: F.ctc_loss(lp.to(d), targets.to(d), [6], [2, 2]),
        lambda d: F.ctc_loss(lp.to(d)[:, :0], targets[:0].to(d), [], []),
    ]
    for case in cases:
        with pytest.raises(RuntimeError) as cpu_err:
            case("cpu")
        with pytest.raises(RuntimeError) as dev_err:
            case(DEVICE)
        assert str(cpu_err.value).split(" (while")[0].split("\n")[0] in str(dev_err.value)
