"""The gated MLP's gate/up half as one op: a post-grad graph pass, run after horizontal
fusion (horizontal_fusion.py), that turns ``act(gate) * up`` over the two slices of a
two-weight ``linear_group`` into ``torch.ops.webgpu.linear_gated`` (one GEMV dispatch that
writes only the product: no pointwise kernel after it, half the output).

Decompositions leave the activation as pointwise nodes whose form varies with the
dtype and version (silu as ``x / (1 + exp(-x))``, gelu's erf or tanh formula, casts to
float32 and back), so the pass does not match node patterns: it takes the pointwise nodes
between the gate's slice and the product, evaluates them in float64 on sample values (casts
kept in float64) and names the activation they compute, if any of ``ACTS``.
``TORCH_WEBGPU_COMPILE_GATED=0`` turns the pass off (horizontal fusion stays).
"""
from __future__ import annotations

import os

import torch

from . import horizontal_fusion

# The activations linear_gated computes, by its `act` name (F.gelu's erf form is "gelu").
ACTS = {
    "silu": torch.nn.functional.silu,
    "gelu": torch.nn.functional.gelu,
    "gelu_tanh": lambda t: torch.nn.functional.gelu(t, approximate="tanh"),
}
# Sample values: silu and both gelus differ by more than 1e-4 somewhere in this range.
_PROBE = torch.linspace(-8.0, 8.0, 161, dtype=torch.float64)


def enabled() -> bool:
    """Where horizontal fusion runs (its linear_group is what the pass rewrites; so
    TORCH_WEBGPU_COMPILE_HFUSE=0 turns both off), unless TORCH_WEBGPU_COMPILE_GATED=0
    (measuring the pass alone)."""
    return horizontal_fusion.enabled() and os.environ.get("TORCH_WEBGPU_COMPILE_GATED", "1") != "0"


def _reshape_of(node):
    """(source, True) for a reshape / view node, else (node, False)."""
    if node.op == "call_function" and node.target in (torch.ops.aten.reshape.default, torch.ops.aten.view.default):
        return node.args[0], True
    return node, False


def _only_user(node):
    return next(iter(node.users)) if len(node.users) == 1 else None


def _through_reshape(node):
    """The node a slice feeds: itself, or the one reshape using it (returned with it)."""
    user = _only_user(node)
    if user is not None and _reshape_of(user)[1]:
        return user
    return node


def _activation_nodes(gate, product, up):
    """The pointwise nodes computing `product`'s other operand from `gate` alone (in graph
    order), or None where anything else reads or feeds them."""
    if product.target != torch.ops.aten.mul.Tensor or product.kwargs or len(product.args) != 2:
        return None
    if list(product.args).count(up) != 1:
        return None
    activated = product.args[1] if product.args[0] is up else product.args[0]
    if not isinstance(activated, torch.fx.Node) or activated is gate:
        return None
    found, stack = {}, [activated]
    while stack:
        node = stack.pop()
        if node is gate or node in found:
            continue
        if (node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload)
                or torch.Tag.pointwise not in node.target.tags or node.kwargs):
            return None
        found[node] = True
        for arg in node.args:
            if isinstance(arg, torch.fx.Node):
                stack.append(arg)
            elif isinstance(arg, (list, tuple, dict)):
                return None
    for node in [gate, *found]:
        if any(user is not product and user not in found for user in node.users):
            return None
    order = {node: i for i, node in enumerate(gate.graph.nodes)}
    return sorted(found, key=order.__getitem__)


def _act_name(gate, nodes, activated, acts=ACTS):
    """Which of `acts` the nodes compute from `gate` (evaluated on _PROBE in float64), or
    None."""
    values = {gate: _PROBE}
    try:
        for node in nodes:
            if node.target == torch.ops.prims.convert_element_type.default:
                values[node] = values[node.args[0]]
                continue
            args = [values[a] if isinstance(a, torch.fx.Node) else a for a in node.args]
            values[node] = node.target(*args)
    except Exception:  # an op that does not take float64 or these shapes: not ours to match
        return None
    result = values[activated]
    for name, act in acts.items():
        if (isinstance(result, torch.Tensor) and result.shape == _PROBE.shape
                and torch.allclose(result, act(_PROBE), rtol=1e-9, atol=1e-9)):
            return name
    return None


def _match(group):
    """(product node, act name, nodes to erase) where `group` (a linear_group node) is the
    gate/up pair of a gated MLP, else None."""
    x, weights, biases = group.args
    if len(weights) != 2 or len(group.users) != 2:
        return None
    n = weights[0].meta["val"].shape[0]
    if weights[1].meta["val"].shape[0] != n:
        return None
    slices = {}
    for piece in group.users:
        if (piece.target != torch.ops.aten.slice.Tensor or len(piece.args) != 4 or piece.kwargs
                or piece.args[1] not in (1, -1)):
            return None
        slices[tuple(piece.args[2:])] = piece
    if set(slices) != {(0, n), (n, 2 * n)}:
        return None
    gate, up = _through_reshape(slices[(0, n)]), _through_reshape(slices[(n, 2 * n)])
    product = _only_user(up)
    if product is None or gate.meta["val"].shape != up.meta["val"].shape:
        return None
    nodes = _activation_nodes(gate, product, up)
    if nodes is None:
        return None
    act = _act_name(gate, nodes, product.args[1] if product.args[0] is up else product.args[0])
    if act is None or product.meta["val"].dtype != x.meta["val"].dtype:
        return None
    dead = [*reversed(nodes), up, gate, slices[(0, n)], slices[(n, 2 * n)], group]
    return product, act, list(dict.fromkeys(dead))


def fuse_gated(gm: torch.fx.GraphModule) -> int:
    """Replaces each gate/up linear_group whose slices feed only act(gate) * up by one
    linear_gated (reshaped to the product's shape); returns how many."""
    graph = gm.graph
    fused = 0
    for group in [n for n in graph.nodes if n.target == torch.ops.webgpu.linear_group.default]:
        found = _match(group)
        if found is None:
            continue
        product, act, dead = found
        x, weights, biases = group.args
        fake_mode = x.meta["val"].fake_mode
        with graph.inserting_before(product):
            gated = graph.call_function(torch.ops.webgpu.linear_gated.default, (x, *weights, *biases, act))
            with fake_mode:
                gated.meta["val"] = torch.ops.webgpu.linear_gated.default(
                    x.meta["val"], *[w.meta["val"] for w in weights],
                    *[None if b is None else b.meta["val"] for b in biases], act)
            result = gated
            shape = list(product.meta["val"].shape)
            if list(gated.meta["val"].shape) != shape:
                result = graph.call_function(torch.ops.aten.reshape.default, (gated, shape))
                with fake_mode:
                    result.meta["val"] = torch.ops.aten.reshape.default(gated.meta["val"], shape)
        product.replace_all_uses_with(result)
        graph.erase_node(product)
        for node in dead:
            graph.erase_node(node)
        fused += 1
    if fused:
        graph.lint()
        gm.recompile()
    return fused
