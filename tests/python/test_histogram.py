"""torch.histogram on the device against the CPU (bins, ranges, weights, density)."""
import pytest
import torch
import torch_webgpu  # noqa: F401

from conftest import DEVICE, cpu, dev


def both(x, *args, **kwargs):
    d_args = [dev(a) if isinstance(a, torch.Tensor) else a for a in args]
    d_kwargs = {k: dev(v) if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
    actual = torch.histogram(dev(x), *d_args, **d_kwargs)
    expected = torch.histogram(x, *args, **kwargs)
    assert actual.hist.device.type == DEVICE and actual.bin_edges.device.type == DEVICE
    # Edges: linspace in float32 (the CPU's vectorized steps may differ by an ulp).
    torch.testing.assert_close(cpu(actual.bin_edges), expected.bin_edges, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(cpu(actual.hist), expected.hist, rtol=1e-5, atol=1e-5, equal_nan=True)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("shape", [(100,), (4, 5, 6), (0,), (3, 0), ()])
def test_histogram_bin_count(shape):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(shape, generator=g)
    w = torch.rand(shape, generator=g)
    for kw in ({}, {"range": (-1.0, 1.5)}, {"density": True}, {"weight": w},
               {"weight": w, "density": True, "range": (-2.0, 0.5)}):
        both(x, 7, **kw)
    both(x, bins=1)


@pytest.mark.usefixtures("no_fallback")
def test_histogram_bin_edges_and_special_values():
    x = torch.tensor([-3.0, -1.0, -0.5, 0.0, 0.25, 2.0, 2.0, 5.0, float("nan"), float("inf")])
    edges = torch.tensor([-1.0, 0.0, 0.5, 2.0])
    both(x, edges)  # the last edge belongs to the last bin; outside values and NaN count nowhere
    both(x, edges, weight=torch.arange(10.0), density=True)
    both(x, 3, range=(-1.0, 2.0))
    both(torch.full((4,), 2.0), 4)  # one value: the range widens by 0.5 both ways
    # Non-contiguous input with a storage offset.
    y = torch.randn(6, 8, generator=torch.Generator().manual_seed(2))
    both(y[1:, ::2].t(), 5)


@pytest.mark.usefixtures("no_fallback")
def test_histogram_out():
    x = torch.randn(50, generator=torch.Generator().manual_seed(3))
    hist, edges = torch.empty(0, device=DEVICE), torch.empty(0, device=DEVICE)
    torch.histogram(dev(x), 6, out=(hist, edges))
    expected = torch.histogram(x, 6)
    torch.testing.assert_close(cpu(hist), expected.hist)
    torch.testing.assert_close(cpu(edges), expected.bin_edges)


@pytest.mark.usefixtures("quiet_fallback")
def test_histogram_errors_match_cpu():
    for args, kwargs in [((torch.ones(3, dtype=torch.int64), 2), {}),
                         ((torch.ones(3), 2), {"range": (2.0, 1.0)}),
                         ((torch.tensor([1.0, float("nan")]), 2), {}),
                         ((torch.ones(3), 2), {"weight": torch.ones(4)}),
                         ((torch.ones(3), -1), {})]:
        with pytest.raises(RuntimeError) as expected:
            torch.histogram(*args, **kwargs)
        d_args = [dev(a) if isinstance(a, torch.Tensor) else a for a in args]
        d_kwargs = {k: dev(v) if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
        with pytest.raises(RuntimeError) as actual:
            torch.histogram(*d_args, **d_kwargs)
        assert str(actual.value).split("\n")[0] == str(expected.value).split("\n")[0]
