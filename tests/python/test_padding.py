"""Native reflection and replication padding (1/2/3-d) against the CPU: pad grids incl.
negative pads, unbatched inputs, gradients, half dtypes and the CPU's errors."""
import pytest
import torch
import torch.nn.functional as F

from conftest import FLOAT_DTYPES, check, make
from nn_helpers import forward_backward

pytestmark = pytest.mark.usefixtures("no_fallback")

CASES = [((2, 3, 6), (1, 2)), ((2, 3, 6), (0, 3)), ((2, 3, 6), (5, 5)), ((2, 3, 6), (2, -1)),
         ((3, 5, 6), (1, 2)), ((2, 3, 5, 6), (1, 2, 3, 0)), ((2, 3, 5, 6), (-1, 2, 1, 1)),
         ((3, 4, 5, 6), (1, 2, 3, 0)), ((1, 2, 3, 4, 5), (1, 1, 2, 0, 1, 2)),
         ((2, 3, 4, 5), (2, 2, 1, 1, 1, 1))]


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
@pytest.mark.parametrize("shape,pad", CASES)
def test_pad_modes(mode, shape, pad):
    forward_backward(lambda t: F.pad(t, pad, mode=mode), make(shape, torch.float32))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("mode", ["reflect", "replicate"])
def test_pad_dtypes(dtype, mode):
    x = make((2, 3, 5, 6), dtype)
    forward_backward(lambda t: F.pad(t, (1, 2, 2, 1), mode=mode), x)
    forward_backward(lambda t: F.pad(t, (1, 2), mode=mode), x[:, :, 1].transpose(1, 2))


@pytest.mark.usefixtures("quiet_fallback")
def test_pad_errors(monkeypatch):
    monkeypatch.delenv("TORCH_WEBGPU_DISABLE_CPU_FALLBACK")
    x = make((2, 3, 6), torch.float32)
    assert not check(lambda t: F.pad(t, (6, 0), mode="reflect"), x)
    assert not check(lambda t: F.pad(t, (-4, -3), mode="replicate"), x)
