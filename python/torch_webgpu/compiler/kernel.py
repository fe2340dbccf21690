"""WGSLKernel: a WGSL compute kernel run on webgpu tensors through our kernel frame.

The kernel is compiled together with the WGSL library the eager kernels use (math prelude,
dtype load/store functions), so its arithmetic matches eager. See csrc/aten/python_wgsl.cpp
for what the WGSL body can call: ``load_NAME(i)``, ``store_NAME(i, v)``, the uniforms as
``let``s, and ``idx`` (grid "invocations") or ``group``/``lid`` (grid "groups"). With
``checks`` (messages), ``check_failed(k)`` reports check k: the next read-back raises its
message as a RuntimeError, as eager indexing kernels report a bad index.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from .. import _C

_DTYPE_NAMES = {
    torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16",
    torch.int64: "int64", torch.int32: "int32", torch.int16: "int16", torch.int8: "int8",
    torch.uint8: "uint8", torch.bool: "bool",
}


@dataclass(frozen=True)
class TensorArg:
    name: str
    dtype: torch.dtype
    access: str = "read"  # or "read_write"


class WGSLKernel:
    """Compiles once (per process and source); each call records one dispatch.

    ``WGSLKernel(body, tensors=[TensorArg(...)], uniforms=[("n", "i32")], grid="invocations",
    workgroup=64)(*tensors, grid=count, n=...)``; ``name`` labels its dispatches in profiles.
    ``reductions``: ``(fn, type, fields, merge, identity, float_sum, symmetric)`` entries, each
    a WGSL function ``fn(v, lid)`` merging v over the whole workgroup (grid "groups") that the
    body may call, made for this adapter (subgroup operations where it has them, else a
    workgroup tree); ``merge`` names a function (a, b) -> type the declarations define,
    ``fields`` a struct type's fields ("mean,m2,weight"; "" for scalars), ``symmetric`` that
    merge(a, b) and merge(b, a) are the same bits (see csrc/kernels/group_reduce.h).
    ``scans``: ``(fn, type, fields, merge)`` entries, each a WGSL function ``fn(v, lid)``
    returning the inclusive scan of v over the workgroup in invocation order (subgroup
    shuffles where the subgroups tile the workgroup, else a workgroup-memory tree).
    """

    def __init__(self, body: str, tensors: Sequence[TensorArg],
                 uniforms: Sequence[tuple[str, str]] = (), *, grid: str = "invocations",
                 workgroup: int = 64, libraries: Sequence[str] = (), declarations: str = "",
                 checks: Sequence[str] = (), name: str = "",
                 reductions: Sequence[tuple[str, str, str, str, str, bool, bool]] = (),
                 scans: Sequence[tuple[str, str, str, str]] = ()):
        for t in tensors:
            if t.dtype not in _DTYPE_NAMES:
                raise TypeError(f"WGSLKernel: tensor '{t.name}' has dtype {t.dtype}, which "
                                "WGSL kernels cannot compute on")
        self.tensors = tuple(tensors)
        self.uniform_names = tuple(name for name, _ in uniforms)
        self._dtypes = tuple(t.dtype for t in tensors)
        self.handle = _C._wgsl_compile(
            body, [t.name for t in tensors], [t.access for t in tensors],
            [_DTYPE_NAMES[t.dtype] for t in tensors], list(uniforms), grid, workgroup,
            list(libraries), declarations, list(checks), name, list(reductions), list(scans))

    @property
    def source(self) -> str:
        """The full WGSL this kernel compiles to (header and library included)."""
        return _C._wgsl_source(self.handle)

    def __call__(self, *tensors: torch.Tensor, grid: int, **uniforms) -> None:
        if len(tensors) != len(self._dtypes):
            raise TypeError(f"WGSLKernel takes {len(self._dtypes)} tensors, got {len(tensors)}")
        for t, dtype in zip(tensors, self._dtypes):
            if t.dtype != dtype:
                raise TypeError(f"WGSLKernel: expected a {dtype} tensor, got {t.dtype}")
        try:
            values = [uniforms[name] for name in self.uniform_names]
        except KeyError as e:
            raise TypeError(f"WGSLKernel: missing uniform {e}") from None
        _C._wgsl_launch(self.handle, [t.data_ptr() for t in tensors], values, grid)

    def launch(self, tensors: Sequence[torch.Tensor], uniforms: Sequence, grid: int) -> None:
        """The unchecked fast path for generated code: tensors and uniforms in order."""
        _C._wgsl_launch(self.handle, [t.data_ptr() for t in tensors], uniforms, grid)
