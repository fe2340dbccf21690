"""Keeps every generated kernel within the adapter's storage-binding limit.

Inductor inlines pointwise producers into their consumers, so one lowered node can read
many buffers (bicubic grid_sample's sum of eight weighted taps, group_norm's backward): a
kernel reading 10 buffers and writing one does not fit the 10 storage bindings a WebGPU
shader stage may have. Inductor realizes a node only after it has read too much, which
does not shrink that node. Before a webgpu node is lowered, we therefore realize its
inlined inputs, largest first, until the buffers it would read leave room for its output
and the device error word. Fusion (``WebGPUScheduling.can_fuse``) keeps the same limit.
"""
from __future__ import annotations

import functools

import torch
from torch._inductor import ir
from torch._inductor.graph import GraphLowering

from .wgsl_codegen import max_kernel_buffers


def _storage(value):
    """The StorageBox under a TensorBox and its views, or None."""
    data = getattr(value, "data", None)
    while isinstance(data, ir.BaseView):
        data = data.data
    return data if isinstance(data, ir.StorageBox) else None


def _reads(value) -> tuple[set[str], ir.StorageBox | None]:
    """Buffers reading `value` costs a consumer, and its StorageBox when that is an inlined
    pointwise computation (what realizing would turn into one read)."""
    box = _storage(value)
    if box is not None and isinstance(box.data, ir.Pointwise):  # (realized: a ComputedBuffer)
        return set(box.data.inner_fn_opcount().read_buffers), box
    try:
        return {value.get_name()}, None
    except Exception:  # (constants, scalars, unnamed views: no binding of their own)
        return set(), None


def _on_webgpu(node: torch.fx.Node) -> bool:
    value = node.meta.get("val")
    return isinstance(value, torch.Tensor) and value.device.type == "webgpu"


def _fit_inputs(graph: GraphLowering, node: torch.fx.Node) -> None:
    budget = max_kernel_buffers() - 2  # its output and the device error word
    inputs = [_reads(graph.env[a]) for a in node.all_input_nodes if a in graph.env]
    while len(set().union(*(reads for reads, _ in inputs))) > budget:
        inlined = [(len(reads), i) for i, (reads, box) in enumerate(inputs) if box is not None]
        if not inlined:
            return  # realized inputs only: nothing to shrink here
        _, i = max(inlined)
        box = inputs[i][1]
        box.realize()
        inputs[i] = ({box.get_name()}, None)


def install() -> None:
    """Wraps ``GraphLowering.run_node`` once (webgpu nodes only; other devices unchanged)."""
    original = GraphLowering.run_node
    if getattr(original, "webgpu", False):
        return

    @functools.wraps(original)
    def run_node(self, n):
        if n.op == "call_function" and _on_webgpu(n):
            _fit_inputs(self, n)
        return original(self, n)

    run_node.webgpu = True
    GraphLowering.run_node = run_node
