"""Ahead-of-time export for the torch_webgpu engine (docs/ENGINE.md).

``export(model, example_inputs, out_dir)`` writes ``program.json`` and ``weights.bin``:
the model's core-ATen graph (``torch.export`` + ``run_decompositions()``), its parameters,
buffers and constants, and a static memory plan. Run the result with
``torch_webgpu.engine.Program`` or the ``twgpu-run`` CLI. ``export_web(dir, web_dir)``
(or ``export(..., web_dir=...)``) writes the web bundle that ``web/player.js`` runs in a
browser. ``convert_pte(path, out_dir)`` converts an ExecuTorch ``.pte`` (portable ops) into
the same format.
"""
from .exporter import export, export_web, program_from_exported
from .memory_plan import plan_pools
from .pte import PteError, convert_pte

__all__ = ["export", "export_web", "program_from_exported", "plan_pools", "convert_pte", "PteError"]
