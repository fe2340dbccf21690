"""``webgpu_backend``: a torch.compile backend that means Inductor on webgpu.

``torch.compile(model, backend=webgpu_backend)`` is the same as the default backend for
webgpu tensors; naming it makes sure the WGSL code generator is registered first.
"""
from __future__ import annotations

from .registration import register


def webgpu_backend(gm, example_inputs, **kwargs):
    register()
    from torch._inductor.compile_fx import compile_fx

    return compile_fx(gm, example_inputs, **kwargs)
