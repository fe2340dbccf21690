"""Native upsampling against the CPU: nearest / nearest-exact (1/2/3-d), linear,
bilinear, trilinear and bicubic over scale factors and sizes, align_corners and
recompute_scale_factor, gradients, half dtypes, channels_last, empty batches and errors."""
import pytest
import torch
import torch.nn.functional as F

from conftest import FLOAT_DTYPES, check, make
from nn_helpers import forward_backward

pytestmark = pytest.mark.usefixtures("no_fallback")

MODES = {1: ["nearest", "nearest-exact", "linear"], 2: ["nearest", "nearest-exact", "bilinear", "bicubic"],
         3: ["nearest", "nearest-exact", "trilinear"]}
SHAPES = {1: (2, 3, 7), 2: (2, 3, 5, 6), 3: (1, 2, 3, 4, 5)}
CASES = [(nd, m) for nd in (1, 2, 3) for m in MODES[nd]]


@pytest.mark.parametrize("nd,mode", CASES)
@pytest.mark.parametrize("scale", [2, 0.7, 1.5, 1])
@pytest.mark.parametrize("recompute", [False, True])
def test_scale_factor(nd, mode, scale, recompute):
    x = make(SHAPES[nd], torch.float32)
    aligns = [None] if "nearest" in mode else [False, True]
    for ac in aligns:
        forward_backward(lambda t: F.interpolate(t, scale_factor=scale, mode=mode, align_corners=ac,
                                                 recompute_scale_factor=recompute), x)


@pytest.mark.parametrize("nd,mode", CASES)
@pytest.mark.parametrize("size", [1, 4, 11])
def test_size(nd, mode, size):
    x = make(SHAPES[nd], torch.float32)
    aligns = [None] if "nearest" in mode else [False, True]
    for ac in aligns:
        forward_backward(lambda t: F.interpolate(t, size=(size,) * nd, mode=mode, align_corners=ac), x)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("mode", ["nearest", "bilinear", "bicubic"])
def test_dtypes(dtype, mode):
    x = make((2, 3, 5, 6), dtype)
    tol = {} if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)
    forward_backward(lambda t: F.interpolate(t, scale_factor=1.7, mode=mode), x, tol=tol,
                     grad_tol=dict(rtol=5e-2, atol=5e-2) if dtype != torch.float32 else None)


def test_layouts_and_empty():
    x = make((2, 3, 5, 6), torch.float32)
    forward_backward(lambda t: F.interpolate(t, scale_factor=2, mode="bilinear"),
                     x.to(memory_format=torch.channels_last))
    forward_backward(lambda t: F.interpolate(t, size=(7, 3), mode="nearest"), x.transpose(2, 3))
    check(lambda t: F.interpolate(t, scale_factor=2, mode="bilinear"), torch.zeros(0, 3, 4, 4))
    check(lambda t: F.upsample_nearest(t, scale_factor=3), x)


@pytest.mark.usefixtures("quiet_fallback")
def test_errors(monkeypatch):
    monkeypatch.delenv("TORCH_WEBGPU_DISABLE_CPU_FALLBACK")
    x = make((1, 2, 4, 4), torch.float32)
    assert not check(lambda t: torch.ops.aten.upsample_nearest2d(t, [0, 3]), x)
    assert not check(lambda t: torch.ops.aten.upsample_bilinear2d(t, [3], False), x)
