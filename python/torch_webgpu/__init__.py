"""PyTorch on WebGPU.

``import torch_webgpu`` registers the ``webgpu`` device (PyTorch's PrivateUse1 backend)
and the ``torch.webgpu`` module, which mirrors ``torch.cuda``::

    import torch, torch_webgpu
    x = torch.tensor([1.0, 2.0, 3.0], device="webgpu") * 2
"""
import os

import torch

from . import _C  # noqa: F401  (loading it registers the device's kernels with PyTorch)
from . import device_module as _device_module

__all__ = ["is_available", "device_count", "synchronize"]

torch.utils.rename_privateuse1_backend("webgpu")
torch._register_device_module("webgpu", _device_module)
torch.utils.generate_methods_for_privateuse1_backend(
    for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
)


def _keep_cuda_accelerator():
    # Registering a PrivateUse1 backend makes it torch's one accelerator, which breaks CUDA
    # autograd in the same process (pytorch#161129). Where CUDA is usable, CUDA stays the
    # accelerator (csrc/aten/cuda_coexistence.cpp says how); webgpu needs no stream syncing.
    if os.environ.get("TORCH_WEBGPU_ACCELERATOR", "").lower() == "webgpu":
        return
    if torch.backends.cuda.is_built() and torch.cuda.is_available():
        _C._keep_cuda_as_accelerator()


_keep_cuda_accelerator()


def _match_attention_meta_layout():
    # Inductor asserts the strides that torch's meta function gives the fused attention's
    # output: q's dim order in newer releases, contiguous in older ones. Ours follow it.
    try:
        q = torch.empty(1, 3, 2, 4, device="meta").transpose(1, 2)
        kv = torch.empty(1, 2, 5, 4, device="meta")
        out = torch.ops.aten._scaled_dot_product_fused_attention_overrideable(q, kv, kv)[0]
    except Exception:  # noqa: BLE001 - no meta function: keep q's order
        return
    _C._sdpa_output_follows_query(out.stride() == q.stride())


_match_attention_meta_layout()

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


def _settle_autograd_at_exit():
    # PyTorch's autograd engine runs device work on a thread of its own, which drops a
    # finished graph task a moment after backward() returns. The task's saved thread-local
    # state holds Python objects: if the interpreter is already finalizing when that
    # thread decrefs them, the thread is killed inside a destructor and the process aborts
    # ("terminate called without an active exception"). A script that exits right after
    # backward() hits that window about half the time. At exit (before finalization) give
    # the thread a moment when the device was used. (Running backward on the calling
    # thread instead would close the race, but PyTorch's engine then breaks CUDA backward
    # in the same process.)
    import atexit
    import time

    def settle():
        if _C.is_initialized():
            time.sleep(0.05)

    atexit.register(settle)


_settle_autograd_at_exit()
