"""Ahead-of-time export for the torch_webgpu engine (docs/ENGINE.md).

``export(model, example_inputs, out_dir)`` writes ``program.json`` and ``weights.bin``:
the model's core-ATen graph (``torch.export`` + ``run_decompositions()``), its parameters,
buffers and constants, and a static memory plan. Run the result with
``torch_webgpu.engine.Program`` or the ``twgpu-run`` CLI.
"""
from .exporter import export, program_from_exported
from .memory_plan import plan_pools

__all__ = ["export", "program_from_exported", "plan_pools"]
