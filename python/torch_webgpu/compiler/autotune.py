"""torch.compile's max-autotune modes on webgpu: the compiled graph's matrix products
(extern calls of our eager GEMM) run with GEMM autotuning on, which times the GEMM variants
per shape the first time a shape comes and keeps the fastest (csrc/kernels/gemm_autotune.h;
TORCH_WEBGPU_GEMM_AUTOTUNE=1 turns it on for eager code too). Inductor's own autotuning
benchmarks Triton templates and CUDA events, neither of which webgpu has."""
from __future__ import annotations

from .. import _C


class GemmAutotuned:
    """A compiled graph's callable that runs with GEMM autotuning on."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, args):
        before = _C._set_gemm_autotune(True)
        try:
            return self.fn(args)
        finally:
            _C._set_gemm_autotune(before)


def wants_autotune(compiled_graph) -> bool:
    from torch._inductor import config

    devices = set(compiled_graph.device_types) - {"meta"}
    return ("webgpu" in devices and compiled_graph.current_callable is not None
            and bool(config.max_autotune or config.max_autotune_gemm))
