"""Native embedding bags against the CPU: F.embedding_bag / nn.EmbeddingBag in modes sum
(with per_sample_weights), mean and max, with offsets or 2-d inputs, include_last_offset,
padding_idx, empty bags, int32/int64/mixed index types, half dtypes, the auxiliary outputs
of _embedding_bag / _embedding_bag_forward_only, gradients w.r.t. the weight and the
per-sample weights, and bad indices/offsets (device check)."""
import pytest
import torch
import torch.nn.functional as F

from conftest import DEVICE, FLOAT_DTYPES, assert_same, make
from nn_helpers import forward_backward

MODES = ["sum", "mean", "max"]
GRAD_TOL = dict(rtol=1e-5, atol=1e-5)
INDICES = torch.tensor([1, 2, 4, 5, 4, 3, 2, 0, 7, 7])
OFFSETS = torch.tensor([0, 2, 2, 5, 9])


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("padding_idx", [None, 2, 7])
@pytest.mark.parametrize("mode", MODES)
def test_offsets(mode, padding_idx):
    w = make((8, 5), torch.float32)
    forward_backward(lambda a, i, o: F.embedding_bag(i, a, o, mode=mode, padding_idx=padding_idx),
                     w, INDICES, OFFSETS, grad_tol=GRAD_TOL)
    # include_last_offset: the last offset ends the last bag.
    last = torch.cat([OFFSETS, torch.tensor([INDICES.numel()])])
    forward_backward(lambda a, i, o: F.embedding_bag(i, a, o, mode=mode, padding_idx=padding_idx,
                                                     include_last_offset=True),
                     w, INDICES, last, grad_tol=GRAD_TOL)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("mode", MODES)
def test_two_d_input(mode):
    w = make((6, 4), torch.float32)
    idx = torch.tensor([[0, 2, 5], [1, 1, 4], [3, 3, 3]])
    forward_backward(lambda a, i: F.embedding_bag(i, a, mode=mode), w, idx, grad_tol=GRAD_TOL)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("padding_idx", [None, 4])
def test_per_sample_weights(padding_idx):
    w = make((8, 5), torch.float32)
    psw = make(INDICES.shape, torch.float32, seed=3)
    forward_backward(lambda a, i, o, p: F.embedding_bag(i, a, o, mode="sum", per_sample_weights=p,
                                                        padding_idx=padding_idx),
                     w, INDICES, OFFSETS, psw, grad_tol=GRAD_TOL)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("itype,otype", [(torch.int32, torch.int32), (torch.int32, torch.int64),
                                         (torch.int64, torch.int32)])
def test_index_types_and_aux_outputs(itype, otype):
    w = make((8, 3), torch.float32)
    idx, off = INDICES.to(itype), OFFSETS.to(otype)
    for op in (torch.ops.aten._embedding_bag, torch.ops.aten._embedding_bag_forward_only):
        for mode in range(3):
            for pad in (-1, 2):
                for ilo in (False, True):
                    psws = [None, make(idx.shape, torch.float32, seed=4)] if mode == 0 else [None]
                    for psw in psws:
                        args = (False, mode, False, psw, ilo, pad)
                        got = op(w.to(DEVICE), idx.to(DEVICE), off.to(DEVICE), *args[:3],
                                 None if psw is None else psw.to(DEVICE), ilo, pad)
                        want = op(w, idx, off, *args)
                        assert_same(got[0], want[0])
                        assert_same(got[1], want[1], exact=True)
                        assert_same(got[2], want[2], exact=True)
                        if mode == 2:  # (the CPU leaves max_indices unset otherwise)
                            assert_same(got[3], want[3], exact=True)
                        else:
                            assert got[3].shape == want[3].shape and got[3].dtype == want[3].dtype


@pytest.mark.usefixtures("no_fallback")
def test_empty_bags_and_lists():
    w = make((5, 3), torch.float32)
    for mode in MODES:
        forward_backward(lambda a, i, o: F.embedding_bag(i, a, o, mode=mode),
                         w, torch.tensor([], dtype=torch.long), torch.tensor([0, 0, 0]), grad_tol=GRAD_TOL)
        forward_backward(lambda a, i, o: F.embedding_bag(i, a, o, mode=mode),
                         w, torch.tensor([3, 1]), torch.tensor([0, 0, 2, 2]), grad_tol=GRAD_TOL)
        # A bag of padding only.
        forward_backward(lambda a, i, o: F.embedding_bag(i, a, o, mode=mode, padding_idx=1),
                         w, torch.tensor([1, 1, 3]), torch.tensor([0, 2]), grad_tol=GRAD_TOL)


@pytest.mark.usefixtures("no_fallback")
def test_max_ties_and_non_contiguous_weight():
    w = torch.tensor([[1.0, 2.0], [1.0, 5.0], [0.5, 5.0], [-1.0, -2.0]])
    forward_backward(lambda a, i, o: F.embedding_bag(i, a, o, mode="max"),
                     w, torch.tensor([0, 1, 2, 3]), torch.tensor([0, 3]), grad_tol=GRAD_TOL)
    wt = make((4, 7), torch.float32).t()  # (7, 4), non-contiguous
    for mode in MODES:
        forward_backward(lambda a, i, o: F.embedding_bag(i, a, o, mode=mode),
                         wt, torch.tensor([6, 0, 2, 2, 5]), torch.tensor([0, 1, 4]), grad_tol=GRAD_TOL)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("dtype", FLOAT_DTYPES[1:])
def test_half_dtypes(dtype):
    w = make((8, 6), dtype)
    psw = make(INDICES.shape, dtype, seed=5)
    tol = dict(rtol=2e-2, atol=2e-2)
    for mode in MODES:
        forward_backward(lambda a, i, o: F.embedding_bag(i, a, o, mode=mode, padding_idx=3),
                         w, INDICES, OFFSETS, tol=tol, grad_tol=tol)
    forward_backward(lambda a, i, o, p: F.embedding_bag(i, a, o, per_sample_weights=p, mode="sum"),
                     w, INDICES, OFFSETS, psw, tol=tol, grad_tol=tol)


@pytest.mark.usefixtures("no_fallback")
def test_module():
    torch.manual_seed(0)
    bag = torch.nn.EmbeddingBag(10, 4, mode="mean")
    dbag = torch.nn.EmbeddingBag(10, 4, mode="mean").to(DEVICE)
    dbag.load_state_dict(bag.state_dict())
    idx, off = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9]), torch.tensor([0, 4])
    y, yd = bag(idx, off), dbag(idx.to(DEVICE), off.to(DEVICE))
    assert_same(yd.detach(), y.detach())
    y.sum().backward()
    yd.sum().backward()
    assert_same(dbag.weight.grad, bag.weight.grad, **GRAD_TOL)


def test_bad_indices_and_offsets_raise():
    w = make((5, 3), torch.float32).to(DEVICE)
    cases = [(torch.tensor([0, 5]), torch.tensor([0, 1])), (torch.tensor([0, -1]), torch.tensor([0, 1])),
             (torch.tensor([0, 1]), torch.tensor([1, 1])), (torch.tensor([0, 1]), torch.tensor([0, 3])),
             (torch.tensor([0, 1, 2]), torch.tensor([0, 2, 1]))]
    for idx, off in cases:
        with pytest.raises(RuntimeError, match="aten::embedding_bag"):
            F.embedding_bag(idx.to(DEVICE), w, off.to(DEVICE)).cpu()
    # The device keeps working.
    idx, off = torch.tensor([0, 4, 2]), torch.tensor([0, 1])
    assert_same(F.embedding_bag(idx.to(DEVICE), w, off.to(DEVICE)), F.embedding_bag(idx, w.cpu(), off))


def test_argument_errors_match_cpu():
    w = make((5, 3), torch.float32)
    cases = [
        lambda d: F.embedding_bag(torch.tensor([0, 1], device=d), w.to(d), torch.tensor([0], device=d),
                                  mode="mean", per_sample_weights=torch.ones(2, device=d)),
        lambda d: F.embedding_bag(torch.tensor([0, 1], device=d), w.to(d), torch.tensor([0], device=d),
                                  per_sample_weights=torch.ones(3, device=d)),
        lambda d: F.embedding_bag(torch.tensor([0.0, 1.0], device=d), w.to(d), torch.tensor([0], device=d)),
    ]
    for case in cases:
        with pytest.raises((RuntimeError, ValueError)) as cpu_err:
            case("cpu")
        with pytest.raises(type(cpu_err.value)) as dev_err:
            case(DEVICE)
        assert str(cpu_err.value).split("\n")[0] in str(dev_err.value)
