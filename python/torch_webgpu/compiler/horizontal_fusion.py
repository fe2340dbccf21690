"""Horizontal fusion of decode-time linears: a post-grad graph pass that turns linears
sharing their input (attention's q/k/v, a gated MLP's gate/up) into one
``torch.ops.webgpu.linear_group`` (one GEMV dispatch on GPUs) and slices of its output.

At decode every linear is a matrix-vector product whose cost on a GPU is mostly the
dispatch itself, so fewer dispatches per token is what pays. Only products with few rows
(``MAX_ROWS``) are fused: prefill's GEMMs keep their tiled kernels. The pass runs as our
backend's device pass (registration.py), which Inductor applies only to graphs with webgpu
tensors, where the group is one dispatch (GPU adapters); ``TORCH_WEBGPU_COMPILE_HFUSE=0``
turns it off.
"""
from __future__ import annotations

import os

import torch

# Rows of x (batch x tokens) up to which linears are fused (decode, small batches).
MAX_ROWS = 4
_FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def enabled() -> bool:
    """Unless turned off, where linear_group is one dispatch (GPU adapters; software ones
    run it as a gemm per linear, which saves nothing)."""
    from .. import _C

    return os.environ.get("TORCH_WEBGPU_COMPILE_HFUSE", "1") != "0" and _C._linear_group_fuses()


def _graph_value(node) -> bool:
    """A parameter or input (placeholder) or a constant (get_attr): defined before every
    computation, so the fused node may go anywhere."""
    return isinstance(node, torch.fx.Node) and node.op in ("placeholder", "get_attr")


def _weight(transposed):
    """W where `transposed` is W.t() / W.permute(1, 0) of a graph value with K contiguous."""
    aten = torch.ops.aten
    if not isinstance(transposed, torch.fx.Node) or transposed.op != "call_function":
        return None
    if transposed.target == aten.permute.default:
        if list(transposed.args[1]) not in ([1, 0], [-1, 0], [1, -2], [-1, -2]):
            return None
    elif transposed.target != aten.t.default:
        return None
    w = transposed.args[0]
    val = w.meta.get("val") if _graph_value(w) else None
    if not isinstance(val, torch.Tensor) or val.dim() != 2 or val.stride(1) != 1:
        return None
    return w


def _input_key(x):
    """Nodes computing the same value of x: reshapes of one node to one shape count as one
    (Inductor's decompositions give each linear its own)."""
    if x.op == "call_function" and x.target in (torch.ops.aten.reshape.default, torch.ops.aten.view.default):
        return (x.args[0], tuple(x.args[1]))
    return (x, None)


def _linear(node):
    """(x, weight, bias or None) of an mm / addmm computing x @ W.t() (+ b) that may be
    fused, else None."""
    aten = torch.ops.aten
    if node.op != "call_function":
        return None
    if node.target == aten.mm.default and not node.kwargs:
        bias, (x, transposed) = None, node.args
    elif node.target == aten.addmm.default and len(node.args) == 3 and all(
            node.kwargs.get(s, 1) == 1 for s in ("beta", "alpha")) and set(node.kwargs) <= {"beta", "alpha"}:
        bias, x, transposed = node.args
    else:
        return None
    w = _weight(transposed)
    xv = x.meta.get("val") if isinstance(x, torch.fx.Node) else None
    if w is None or not isinstance(xv, torch.Tensor) or xv.dim() != 2:
        return None
    rows, k = xv.shape
    wv = w.meta["val"]
    if (xv.device.type != "webgpu" or xv.dtype not in _FLOAT_DTYPES or wv.dtype != xv.dtype
            or wv.device != xv.device or not isinstance(rows, int) or rows > MAX_ROWS
            or not isinstance(k, int) or k == 0 or not isinstance(wv.shape[0], int)):
        return None
    if bias is not None:
        bv = bias.meta.get("val") if _graph_value(bias) else None
        if (not isinstance(bv, torch.Tensor) or bv.dim() != 1 or bv.shape[0] != wv.shape[0]
                or bv.dtype != xv.dtype or bv.device != xv.device):
            return None
    return x, w, bias


def fuse_linears(gm: torch.fx.GraphModule) -> int:
    """Replaces each set of >= 2 fusable linears sharing their input by one linear_group and
    slices of it; returns how many linears were fused."""
    graph = gm.graph
    groups: dict = {}
    for node in graph.nodes:
        found = _linear(node)
        if found is not None:
            x = found[0]
            groups.setdefault((_input_key(x), x.meta["val"].dtype), []).append((node, *found))
    fused = 0
    for members in groups.values():
        if len(members) < 2:
            continue
        first = members[0][0]  # graph order: every member's x is a copy of first's
        x = members[0][1]
        weights = [w for _, _, w, _ in members]
        biases = [b for _, _, _, b in members]
        xv = x.meta["val"]
        fake_mode = xv.fake_mode
        with graph.inserting_before(first):
            group = graph.call_function(torch.ops.webgpu.linear_group.default, (x, weights, biases))
            with fake_mode:
                group.meta["val"] = torch.ops.webgpu.linear_group.default(
                    xv, [w.meta["val"] for w in weights],
                    [None if b is None else b.meta["val"] for b in biases])
            col = 0
            for node, _, w, _ in members:
                n = w.meta["val"].shape[0]
                piece = graph.call_function(torch.ops.aten.slice.Tensor, (group, 1, col, col + n))
                with fake_mode:
                    piece.meta["val"] = torch.ops.aten.slice.Tensor(group.meta["val"], 1, col, col + n)
                col += n
                node.replace_all_uses_with(piece)
        # (After the insertions, which go before `first`.)
        for node, *_ in members:
            transposed, operand = node.args[-1], node.args[-2]
            graph.erase_node(node)
            for dead in (transposed, operand):
                if isinstance(dead, torch.fx.Node) and not dead.users and dead.op == "call_function":
                    graph.erase_node(dead)
        fused += len(members)
    if fused:
        graph.lint()
        gm.recompile()
    return fused
