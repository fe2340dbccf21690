"""torch.compile on webgpu: Inductor's WGSL code generator and the WGSL kernel entry.

``torch.compile(model)`` on webgpu tensors uses it after ``import torch_webgpu``
(registration.py says how it plugs in). ``kernel.WGSLKernel`` runs a WGSL kernel directly.
Submodules import Inductor, so they load on first use.
"""
