"""torch.segment_reduce on the device against the CPU: every reduction, lengths and
offsets, axes, initial values, empty segments, NaN, half dtypes and the CPU's errors."""
import pytest
import torch
import torch_webgpu  # noqa: F401

from conftest import DEVICE, cpu, dev

REDUCTIONS = ["max", "min", "sum", "mean", "prod"]
TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.float16: dict(rtol=0, atol=0),
       torch.bfloat16: dict(rtol=0, atol=0)}


def both(data, reduce, **kw):
    d_kw = {k: dev(v) if isinstance(v, torch.Tensor) else v for k, v in kw.items()}
    actual = torch.segment_reduce(dev(data), reduce, **d_kw)
    expected = torch.segment_reduce(data, reduce, **kw)
    assert actual.device.type == DEVICE and actual.dtype == expected.dtype
    torch.testing.assert_close(cpu(actual), expected, equal_nan=True, **TOL[data.dtype])


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("reduce", REDUCTIONS)
def test_segment_reduce_axis0(dtype, reduce):
    g = torch.Generator().manual_seed(1)
    data = torch.randn(10, 3, 4, generator=g).to(dtype)
    data[4, 1, 2] = float("nan")
    lengths = torch.tensor([1, 3, 0, 6, 0])
    offsets = torch.tensor([0, 1, 4, 4, 10, 10])
    for initial in (None, 1.5):
        both(data, reduce, lengths=lengths, initial=initial)
        both(data, reduce, offsets=offsets, initial=initial)
    # unsafe skips the checks: lengths need not cover the axis.
    both(data, reduce, lengths=torch.tensor([2, 0, 5]), unsafe=True)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("reduce", REDUCTIONS)
def test_segment_reduce_inner_axes(reduce):
    g = torch.Generator().manual_seed(2)
    data = torch.randn(4, 6, 5, generator=g)
    lengths = torch.tensor([[2, 0, 4], [1, 2, 3], [6, 0, 0], [0, 3, 3]])
    both(data, reduce, lengths=lengths, axis=1)
    both(data, reduce, lengths=lengths, axis=-2, initial=-2.0)
    offsets = torch.cat([torch.zeros(4, 1, dtype=torch.long), lengths.cumsum(-1)], -1)
    both(data, reduce, offsets=offsets, axis=1)
    # The last axis, int32 lengths, a non-contiguous input.
    both(data.transpose(0, 1)[:, :, 1:], reduce, lengths=torch.tensor([[1, 3]] * 6 * 4,
                                                                     dtype=torch.int32).view(6, 4, 2),
         axis=2)
    # Empty output.
    both(data, reduce, lengths=torch.zeros(4, 0, dtype=torch.long), axis=1, unsafe=True)


@pytest.mark.usefixtures("quiet_fallback")
def test_segment_reduce_errors_match_cpu():
    data = torch.randn(5, 2)
    for kw in [dict(lengths=torch.tensor([2, 2])),            # does not sum to the axis
               dict(lengths=torch.tensor([6, -1])),           # negative length
               dict(lengths=torch.tensor([5]), axis=1),       # axis is not lengths' last dim
               dict(),                                        # neither lengths nor offsets
               dict(lengths=torch.tensor([5]), indices=torch.tensor([0]))]:
        with pytest.raises(RuntimeError) as expected:
            torch.segment_reduce(data, "sum", **kw)
        with pytest.raises(RuntimeError) as actual:
            torch.segment_reduce(dev(data), "sum", **{k: dev(v) if isinstance(v, torch.Tensor) else v
                                                       for k, v in kw.items()})
        assert str(actual.value).split("\n")[0] == str(expected.value).split("\n")[0]
    with pytest.raises(RuntimeError):
        torch.segment_reduce(dev(data), "median", lengths=dev(torch.tensor([5])))
