"""torch.ops.webgpu.create_buffer / write_buffer: raw device buffers as torch operators."""
import pytest
import torch

import torch_webgpu  # noqa: F401


def test_create_buffer_is_uint8_device_tensor():
    b = torch.ops.webgpu.create_buffer(40)
    assert b.device.type == "webgpu" and b.dtype == torch.uint8 and b.shape == (40,)
    assert torch.ops.webgpu.create_buffer(0).numel() == 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.uint8])
def test_write_buffer_copies_bytes(dtype):
    src = (torch.randn(3, 5) * 50).to(dtype)
    b = torch.ops.webgpu.create_buffer(src.nbytes)
    torch.ops.webgpu.write_buffer(b, src)
    assert bytes(b.cpu().numpy()) == bytes(src.contiguous().view(torch.uint8).numpy())
    # Any dtype and shape with the same byte count: the bytes are reinterpreted.
    typed = torch.empty(3, 5, dtype=dtype, device="webgpu")
    torch.ops.webgpu.write_buffer(typed, src.t().contiguous().t())  # non-contiguous data
    assert torch.equal(typed.cpu(), src)
    view = b.view(dtype).view(3, 5)
    assert torch.equal(view.cpu(), src)


def test_write_buffer_bad_input():
    b = torch.ops.webgpu.create_buffer(8)
    with pytest.raises(RuntimeError, match="bytes"):
        torch.ops.webgpu.write_buffer(b, torch.zeros(3))
    with pytest.raises(RuntimeError, match="CPU tensor"):
        torch.ops.webgpu.write_buffer(b, torch.zeros(2, device="webgpu"))
    with pytest.raises(RuntimeError, match="contiguous"):
        torch.ops.webgpu.write_buffer(torch.zeros(4, 4, device="webgpu").t(), torch.zeros(4, 4))
    with pytest.raises(ValueError, match="non-negative"):
        torch.ops.webgpu.create_buffer(-1)
    torch.ops.webgpu.write_buffer(b, torch.arange(2, dtype=torch.int32))  # still usable
    assert b.view(torch.int32).cpu().tolist() == [0, 1]
