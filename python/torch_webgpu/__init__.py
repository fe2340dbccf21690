"""PyTorch on WebGPU.

``import torch_webgpu`` registers the ``webgpu`` device (PyTorch's PrivateUse1 backend)
and the ``torch.webgpu`` module, which mirrors ``torch.cuda``::

    import torch, torch_webgpu
    x = torch.tensor([1.0, 2.0, 3.0], device="webgpu") * 2
"""
import torch

from . import _C  # noqa: F401  (loading it registers the device's kernels with PyTorch)
from . import device_module as _device_module

__all__ = ["is_available", "device_count", "synchronize"]

torch.utils.rename_privateuse1_backend("webgpu")
torch._register_device_module("webgpu", _device_module)
torch.utils.generate_methods_for_privateuse1_backend(
    for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
)

is_available = _device_module.is_available
device_count = _device_module.device_count
synchronize = _device_module.synchronize


def _install_printing():
    # Printing formats values with dozens of small ops; format a CPU copy instead, the way
    # PyTorch itself does for XLA and other lazy devices. The device suffix stays.
    import torch._tensor_str as tensor_str

    original = tensor_str._tensor_str

    def _tensor_str(self, indent):
        if self.device.type == "webgpu":
            self = self.cpu()
        return original(self, indent)

    tensor_str._tensor_str = _tensor_str


_install_printing()


def _run_backward_on_calling_thread():
    # PyTorch's autograd engine runs device work on one thread per device. When Python
    # exits right after a backward pass, that thread may still be dropping the finished
    # graph task, whose saved thread-local state holds Python objects: decref'ing them
    # while the interpreter finalizes kills the thread inside a destructor and aborts the
    # process ("terminate called without an active exception"). Running backward on the
    # calling thread removes the race (and keeps Dawn's GL context on one thread).
    # TORCH_WEBGPU_AUTOGRAD_THREADS=1 keeps PyTorch's default.
    import os

    if os.environ.get("TORCH_WEBGPU_AUTOGRAD_THREADS", "0") != "1":
        torch._C._set_multithreading_enabled(False)


_run_backward_on_calling_thread()
