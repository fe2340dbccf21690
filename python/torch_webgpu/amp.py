"""``torch.webgpu.amp``: the device-specific mixed-precision names ``torch.cuda.amp`` has,
kept for code written against them. New code should use ``torch.autocast("webgpu", ...)``
and ``torch.amp.GradScaler("webgpu")``; these aliases say so with a FutureWarning, as
PyTorch's CUDA ones do."""
import functools
import warnings

import torch

__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd"]


def _deprecated(old: str, new: str) -> None:
    warnings.warn(f"`{old}` is deprecated. Please use `{new}` instead.", FutureWarning,
                  stacklevel=3)


class autocast(torch.amp.autocast_mode.autocast):
    """``torch.autocast("webgpu", ...)`` under its old per-device name (float16 by default)."""

    def __init__(self, enabled: bool = True, dtype: torch.dtype = torch.float16,
                 cache_enabled: bool = True):
        _deprecated("torch.webgpu.amp.autocast(args...)",
                    "torch.amp.autocast('webgpu', args...)")
        super().__init__("webgpu", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


class GradScaler(torch.amp.GradScaler):
    """``torch.amp.GradScaler("webgpu", ...)`` under its old per-device name."""

    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000,
                 enabled: bool = True) -> None:
        _deprecated("torch.webgpu.amp.GradScaler(args...)",
                    "torch.amp.GradScaler('webgpu', args...)")
        super().__init__("webgpu", init_scale=init_scale, growth_factor=growth_factor,
                         backoff_factor=backoff_factor, growth_interval=growth_interval,
                         enabled=enabled)


def custom_fwd(fwd=None, *, cast_inputs=None):
    """``torch.amp.custom_fwd(..., device_type="webgpu")``."""
    _deprecated("torch.webgpu.amp.custom_fwd(args...)",
                "torch.amp.custom_fwd(args..., device_type='webgpu')")
    return functools.partial(torch.amp.custom_fwd, device_type="webgpu")(
        fwd=fwd, cast_inputs=cast_inputs)


def custom_bwd(bwd):
    """``torch.amp.custom_bwd(..., device_type="webgpu")``."""
    _deprecated("torch.webgpu.amp.custom_bwd(args...)",
                "torch.amp.custom_bwd(args..., device_type='webgpu')")
    return functools.partial(torch.amp.custom_bwd, device_type="webgpu")(bwd)
