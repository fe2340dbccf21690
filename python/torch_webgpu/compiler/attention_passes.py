"""Grouped-query attention without repeated keys and values: a post-grad graph pass.

Transformers repeats each key/value head for its group of query heads (``repeat_kv``:
unsqueeze, expand, a contiguous clone and a reshape) before ``scaled_dot_product_attention``
on every device but CUDA, XPU and the CPU. Compiled, that is two copies of a layer's whole
KV cache (grown by the group size, 7x for Qwen2.5) per layer and token, each its own
dispatch. Our fused attention reads grouped K/V heads itself (query head h uses K/V head
h // group), so the pass hands it the unrepeated tensors. The copies die with their last
user; Inductor drops them.
"""
from __future__ import annotations

import torch

_VIEWS = ("_unsafe_view", "view", "reshape")


def _target(node, *names) -> bool:
    """Whether `node` calls one of the aten ops `names` (any overload)."""
    packet = getattr(getattr(node, "target", None), "overloadpacket", None)
    return (isinstance(node, torch.fx.Node) and node.op == "call_function"
            and any(packet is getattr(torch.ops.aten, n) for n in names))


def _shape(node):
    val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return tuple(val.shape) if isinstance(val, torch.Tensor) else None


def _unrepeated(node):
    """(source, group) when `node` is repeat_kv(source, group): [b, h, l, d] from
    source [b, h // group, l, d] with each head repeated `group` times in a row."""
    out = _shape(node)
    if out is None or len(out) != 4 or not _target(node, *_VIEWS):
        return None
    inner = node.args[0]
    if _target(inner, "clone"):
        inner = inner.args[0]
    if not _target(inner, "expand"):
        return None
    expanded = _shape(inner)
    unsqueezed = inner.args[0]
    # unsqueeze(source, 2), possibly behind full slices ([:, :, None, :, :]).
    while _target(unsqueezed, "slice") and _shape(unsqueezed) == _shape(unsqueezed.args[0]):
        unsqueezed = unsqueezed.args[0]
    if not _target(unsqueezed, "unsqueeze") or unsqueezed.args[1] not in (2, -3):
        return None
    source = unsqueezed.args[0]
    while _target(source, "slice") and _shape(source) == _shape(source.args[0]):
        source = source.args[0]
    src = _shape(source)
    if src is None or len(src) != 4 or expanded is None or len(expanded) != 5:
        return None
    b, h, l, d = src
    group = expanded[2]
    if expanded != (b, h, group, l, d) or out != (b, h * group, l, d):
        return None
    return source, group


def attention_without_repeated_kv(gm: torch.fx.GraphModule) -> int:
    """Feeds webgpu's fused attention the unrepeated key/value heads; returns how many
    attention calls changed."""
    changed = 0
    for node in gm.graph.nodes:
        if not _target(node, "_scaled_dot_product_fused_attention_overrideable"):
            continue
        q, k, v = node.args[:3]
        found_k, found_v = _unrepeated(k), _unrepeated(v)
        q_shape = _shape(q)
        if found_k is None or found_v is None or q_shape is None or len(q_shape) != 4:
            continue
        (k_src, group_k), (v_src, group_v) = found_k, found_v
        if group_k != group_v or q_shape[1] != _shape(k_src)[1] * group_k:
            continue
        node.args = (q, k_src, v_src, *node.args[3:])
        changed += 1
    if changed:
        gm.graph.eliminate_dead_code()
        gm.graph.lint()
        gm.recompile()
    return changed
