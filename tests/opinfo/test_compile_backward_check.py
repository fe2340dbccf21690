"""The compile mode's backward check really runs Inductor's compiled backward on webgpu,
and compares what that backward computes."""
import contextlib
from unittest import mock

import torch
from torch._dynamo.utils import counters
from torch._inductor.output_code import CompiledFxGraph

from torch_webgpu.testing import opinfo as oi


@contextlib.contextmanager
def compiled_graph_calls(scale_backward=None):
    """Records (is_backward, device types) of each Inductor graph called; with
    scale_backward, multiplies the compiled backward's gradients (a broken backward)."""
    calls = []
    original = CompiledFxGraph.__call__

    def call(self, inputs):
        backward = bool(self.fx_kwargs.get("is_backward"))
        calls.append((backward, set(self.device_types)))
        out = original(self, inputs)
        if backward and scale_backward is not None:
            out = [g * scale_backward if isinstance(g, torch.Tensor) else g for g in out]
        return out

    with mock.patch.object(CompiledFxGraph, "__call__", call):
        yield calls


def _op(name):
    return next(op for op in oi.load_op_db() if op.name == name and not op.variant_test_name)


def test_backward_runs_inductors_compiled_backward_on_webgpu():
    counters.clear()
    with compiled_graph_calls() as calls:
        result = oi.run_op(_op("sin"), torch.float32, oi.COMPILE_MODE, "backward")
    assert result.status == "pass", result.failure_report()
    assert (False, {"webgpu"}) in calls  # the forward graph
    assert (True, {"webgpu"}) in calls  # AOTAutograd's backward graph, compiled by Inductor
    assert not counters["compiled_autograd"]  # not the compiled-autograd path


def test_backward_compares_the_compiled_backwards_gradients():
    with compiled_graph_calls(scale_backward=2.0) as calls:
        result = oi.run_op(_op("sin"), torch.float32, oi.COMPILE_MODE, "backward")
    assert any(backward for backward, _ in calls)
    assert result.status == "fail"
    assert all(s.category == "mismatch" and "grad" in s.detail for s in result.failures)
