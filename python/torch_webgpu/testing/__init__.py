"""Testing helpers for torch_webgpu.

- :mod:`torch_webgpu.testing.opinfo`: runs PyTorch's OpInfo database (``op_db``) on the
  ``webgpu`` device against the CPU; shared by ``tests/opinfo`` and the report.
- ``python -m torch_webgpu.testing.opinfo_report``: the OpInfo coverage report.

Both need ``expecttest`` (``torch.testing._internal`` imports it): ``pip install expecttest``.
"""
