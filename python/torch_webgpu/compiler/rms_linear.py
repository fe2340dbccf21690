"""A decoder layer's residual add and RMSNorm folded into the projections after it: a
post-grad graph pass, run after horizontal fusion and the gated-MLP pass, that turns

    h = a + b;  normed = w * (h * rsqrt(mean(h^2, -1, keepdim) + eps));  linear_group(normed)

(or ``linear_gated(normed)``) into ``torch.ops.webgpu.rms_linear(a, b, w, eps, ...)``, which
returns the projections and h. At decode the norm was a kernel of its own (one workgroup
over a short row, all latency) between two GEMVs; the GEMV already stages its row of A in
workgroup memory, where normalizing it costs a few loads and one barrier tree. That is one
dispatch less per norm.

First, at decode (one row), a residual add after a GEMV (o_proj's, down_proj's) becomes
that GEMV's bias (`addmm`): one kernel less where the add stood alone, and the norm after
it then reads a finished h, so its rms_linear needs no residual binding. That is what lets
Qwen2's q/k/v with biases fold too (10 storage bindings, the adapter's limit; 11 with the
residual add).

Float32 only (half-type norms round between their steps, which the kernel does not copy);
rows of A must fit in the GEMV's workgroup memory. ``TORCH_WEBGPU_COMPILE_RMS=0`` turns the
pass off.
"""
from __future__ import annotations

import operator
import os

import torch

from . import gated_mlp, horizontal_fusion

aten = torch.ops.aten
# The group kernel's workgroup (linear_group_threads): its `part` shares workgroup memory
# with the staged row.
_GEMV_THREADS = 256


def enabled() -> bool:
    """Where horizontal fusion runs (the group kernel is what stages and normalizes A),
    unless TORCH_WEBGPU_COMPILE_RMS=0."""
    return horizontal_fusion.enabled() and os.environ.get("TORCH_WEBGPU_COMPILE_RMS", "1") != "0"


def _call(node, *targets):
    return isinstance(node, torch.fx.Node) and node.op == "call_function" and node.target in targets


def _single_user(node):
    return len(node.users) == 1


def _operands(mul, known):
    """The operand of a two-operand mul other than `known`, or None."""
    if not _call(mul, aten.mul.Tensor) or mul.kwargs or len(mul.args) != 2 or list(mul.args).count(known) != 1:
        return None
    return mul.args[1] if mul.args[0] is known else mul.args[0]


def _under_reshape(x):
    """(the node under `x`'s one reshape, [that reshape]) or (x, []); (None, None) where
    the reshape has other users."""
    if not _call(x, aten.reshape.default, aten.view.default):
        return x, []
    return (x.args[0], [x]) if _single_user(x) else (None, None)


def _norm(x):
    """(h, norm weight, eps, the norm's nodes, users first) where `x` (the linears' input,
    through one reshape) is w * (h * rsqrt(mean(h^2, -1, keepdim) + eps)) over float32 h,
    each step used only by the next; else None."""
    x, chain = _under_reshape(x)
    if x is None:
        return None
    if not _call(x, aten.mul.Tensor) or not _single_user(x) or len(x.args) != 2:
        return None
    for scaled, w in (x.args, reversed(x.args)):
        if not _call(scaled, aten.mul.Tensor) or not _single_user(scaled) or len(scaled.args) != 2:
            continue
        for h, rsqrt in (scaled.args, reversed(scaled.args)):
            if not (_call(rsqrt, aten.rsqrt.default) and _single_user(rsqrt)):
                continue
            shifted = rsqrt.args[0]
            if not (_call(shifted, aten.add.Tensor) and _single_user(shifted) and len(shifted.args) == 2
                    and isinstance(shifted.args[1], float) and not shifted.kwargs):
                continue
            mean = shifted.args[0]
            if not (_call(mean, aten.mean.dim) and _single_user(mean) and len(mean.args) == 3
                    and mean.args[2] is True and not mean.kwargs):
                continue
            square = mean.args[0]
            if not (_call(square, aten.pow.Tensor_Scalar) and _single_user(square)
                    and square.args == (h, 2)):
                continue
            if not isinstance(h, torch.fx.Node) or not isinstance(w, torch.fx.Node):
                continue
            hv, wv = h.meta.get("val"), w.meta.get("val")
            if not isinstance(hv, torch.Tensor) or not isinstance(wv, torch.Tensor) or hv.dim() < 1:
                continue
            if list(mean.args[1]) not in ([-1], [hv.dim() - 1]) or wv.shape != hv.shape[-1:]:
                continue
            if hv.dtype != torch.float32 or wv.dtype != torch.float32 or wv.device != hv.device:
                continue
            return h, w, shifted.args[1], [*chain, x, scaled, rsqrt, shifted, mean, square]
    return None


def _layer_norm(x):
    """(h, norm weight, norm bias or None, eps, the norm's nodes, users first) where `x`
    (the linears' input, through one reshape) is LayerNorm as Inductor decomposes it:
    var, mean = var_mean(h, [-1], correction=0, keepdim=True); (h - mean) * rsqrt(var +
    eps) * w (+ b), over float32 h, each step used only by the next; else None."""
    x, chain = _under_reshape(x)
    if x is None:
        return None
    bias = None
    if _call(x, aten.add.Tensor) and _single_user(x) and len(x.args) == 2 and not x.kwargs:
        for scaled, b in (x.args, reversed(x.args)):
            if _call(scaled, aten.mul.Tensor) and isinstance(b, torch.fx.Node):
                chain.append(x)
                x, bias = scaled, b
                break
        else:
            return None
    if not _call(x, aten.mul.Tensor) or not _single_user(x) or len(x.args) != 2:
        return None
    for normed, w in (x.args, reversed(x.args)):
        if not (_call(normed, aten.mul.Tensor) and _single_user(normed) and len(normed.args) == 2):
            continue
        for centered, rsqrt in (normed.args, reversed(normed.args)):
            if not (_call(rsqrt, aten.rsqrt.default) and _single_user(rsqrt)
                    and _call(centered, aten.sub.Tensor) and _single_user(centered) and len(centered.args) == 2):
                continue
            shifted = rsqrt.args[0]
            if not (_call(shifted, aten.add.Tensor) and _single_user(shifted) and len(shifted.args) == 2
                    and isinstance(shifted.args[1], float) and not shifted.kwargs):
                continue
            var, (h, mean) = shifted.args[0], centered.args
            if not (_call(var, operator.getitem) and _call(mean, operator.getitem) and _single_user(var)
                    and _single_user(mean) and var.args[1] == 0 and mean.args[1] == 1
                    and var.args[0] is mean.args[0]):
                continue
            stats = var.args[0]
            if not (_call(stats, aten.var_mean.correction) and len(stats.users) == 2 and stats.args[0] is h
                    and stats.kwargs == {"correction": 0, "keepdim": True}):
                continue
            if not isinstance(w, torch.fx.Node):
                continue
            hv, wv = h.meta.get("val"), w.meta.get("val")
            bv = None if bias is None else bias.meta.get("val")
            if not isinstance(hv, torch.Tensor) or not isinstance(wv, torch.Tensor) or hv.dim() < 1:
                continue
            if list(stats.args[1]) not in ([-1], [hv.dim() - 1]) or wv.shape != hv.shape[-1:]:
                continue
            if bias is not None and (not isinstance(bv, torch.Tensor) or bv.shape != hv.shape[-1:]
                                     or bv.dtype != torch.float32 or bv.device != hv.device):
                continue
            if hv.dtype != torch.float32 or wv.dtype != torch.float32 or wv.device != hv.device:
                continue
            return h, w, bias, shifted.args[1], [*chain, x, normed, rsqrt, shifted, var, centered, mean, stats]
    return None


def _residual(h):
    """(a, b) where h = a + b of two same-shaped float32 tensors (no alpha), else (h, None)."""
    if (_call(h, aten.add.Tensor) and len(h.args) == 2 and not h.kwargs
            and all(isinstance(t, torch.fx.Node) and isinstance(t.meta.get("val"), torch.Tensor)
                    for t in h.args)
            and h.args[0].meta["val"].shape == h.args[1].meta["val"].shape == h.meta["val"].shape
            and h.args[0].meta["val"].dtype == h.args[1].meta["val"].dtype == torch.float32):
        return h.args[0], h.args[1]
    return h, None


def _reshaped(graph, terms, h, before):
    """The terms of a sum, each reshaped as `h` (inserted before `before`)."""
    shape = list(h.meta["val"].shape)
    out = []
    for t in terms:
        with graph.inserting_before(before):
            node = graph.call_function(aten.reshape.default, (t, shape))
        with t.meta["val"].fake_mode:
            node.meta["val"] = aten.reshape.default(t.meta["val"], shape)
        out.append(node)
    return out


def _gemv_rows(node):
    """The (1, N) product `node` is, through one reshape: mm / addmm of one row."""
    if _call(node, aten.reshape.default, aten.view.default):
        node = node.args[0]
    if not _call(node, aten.mm.default, aten.addmm.default) or node.kwargs:
        return None
    val = node.meta.get("val")
    return node if isinstance(val, torch.Tensor) and val.dim() == 2 and val.shape[0] == 1 else None


def _residuals_into_gemvs(graph) -> None:
    """`r + reshape(x @ W^T)` over one float32 row becomes `reshape(addmm(r, x, W^T))`: the
    residual add of o_proj / down_proj rides in the GEMV as its bias (one rounding either
    way), so the norm after it reads a finished h and rms_linear needs no residual binding
    (q/k/v with biases then fit)."""
    for add in [n for n in graph.nodes if _call(n, aten.add.Tensor)]:
        a, b = _residual(add)
        if b is None:
            continue
        for residual, product in ((a, b), (b, a)):
            mm = _gemv_rows(product)
            if mm is None or mm.target != aten.mm.default or not _single_user(mm) or not _single_user(product):
                continue
            fake_mode = add.meta["val"].fake_mode
            shape = list(add.meta["val"].shape)
            n = mm.meta["val"].shape[1]
            with graph.inserting_before(add):
                bias = graph.call_function(aten.reshape.default, (residual, [n]))
                fused = graph.call_function(aten.addmm.default, (bias, *mm.args))
                out = graph.call_function(aten.reshape.default, (fused, shape))
                with fake_mode:
                    bias.meta["val"] = aten.reshape.default(residual.meta["val"], [n])
                    fused.meta["val"] = aten.addmm.default(bias.meta["val"], *(t.meta["val"] for t in mm.args))
                    out.meta["val"] = aten.reshape.default(fused.meta["val"], shape)
            add.replace_all_uses_with(out)
            graph.erase_node(add)
            if product is not mm:
                graph.erase_node(product)
            graph.erase_node(mm)
            break


def _fits(k, weights, biases, residual, norm_bias, n_contiguous) -> bool:
    """One dispatch: the storage bindings (A, residual, norm weight and bias, h, the
    weights, their biases, out; an N-contiguous weight is bound twice, as elements and as
    vec4 words) within the stage's limit, A's row staged beside the workgroup's sums (vec4
    sums over N-contiguous weights)."""
    props = torch.webgpu.get_device_properties()
    bindings = (4 + (residual is not None) + (norm_bias is not None) + len(weights) + n_contiguous
                + sum(b is not None for b in biases))
    # (Beside the row, a float per invocation for each tree: the sums and the norm's; a vec4
    # for an N-contiguous weight's sums.)
    scratch = _GEMV_THREADS * (16 + 4 if n_contiguous else 3 * 4)
    return (bindings <= props.max_storage_buffers_per_shader_stage and isinstance(k, int) and k % 4 == 0
            and k * 4 + scratch <= props.max_compute_workgroup_storage_size)


def _n_contiguous_linear(node):
    """(x, W, bias or None) of a decode row's `addmm(b, x, W)` / `mm(x, W)` whose weight
    is a float32 graph value [k, n] with N contiguous (GPT-2's Conv1D), else None."""
    if _call(node, aten.addmm.default) and len(node.args) == 3 and not node.kwargs:
        bias, x, w = node.args
    elif _call(node, aten.mm.default) and not node.kwargs:
        (x, w), bias = node.args, None
    else:
        return None
    if not (horizontal_fusion._graph_value(w) and isinstance(x, torch.fx.Node)):
        return None
    xv, wv = x.meta.get("val"), w.meta.get("val")
    if not (isinstance(xv, torch.Tensor) and isinstance(wv, torch.Tensor) and xv.dim() == 2 and wv.dim() == 2
            and wv.stride(1) == 1 and wv.shape[1] != 1 and wv.dtype == xv.dtype == torch.float32
            and wv.device == xv.device and isinstance(xv.shape[0], int)
            and xv.shape[0] <= horizontal_fusion.MAX_ROWS):
        return None
    if bias is not None:
        bv = bias.meta.get("val") if horizontal_fusion._graph_value(bias) else None
        if not (isinstance(bv, torch.Tensor) and bv.shape == wv.shape[1:] and bv.dtype == torch.float32):
            return None
    return x, w, bias


def _linears(node):
    """(x, weights, biases, act, n_contiguous) of a node the norm may fold into:
    linear_group, linear_gated, or one linear (a decode row's mm / addmm with K-contiguous
    weights, OPT's fc1 after its LayerNorm, or with N-contiguous weights [k, n], GPT-2's,
    then n_contiguous: the fold passes them transposed) except an LM head (past
    MAX_SINGLE_WIDTH columns it keeps the plain GEMV, tuned for that width); else None."""
    if _call(node, torch.ops.webgpu.linear_gated.default):
        x, w_gate, w_up, b_gate, b_up, act = node.args
        return x, [w_gate, w_up], [b_gate, b_up], act, False
    if _call(node, torch.ops.webgpu.linear_group.default):
        x, weights, biases = node.args
        return x, list(weights), list(biases), "", False
    found = horizontal_fusion._linear(node)
    if found is not None and found[1].meta["val"].shape[0] <= MAX_SINGLE_WIDTH:
        x, w, b = found
        return x, [w], [b], "", False
    found = _n_contiguous_linear(node)
    if found is not None and found[1].meta["val"].shape[1] <= MAX_SINGLE_WIDTH:
        x, w, b = found
        return x, [w], [b], "", True
    return None


# The activations a folded single linear applies to its outputs (the op's `act`).
SINGLE_ACTS = {**gated_mlp.ACTS, "relu": torch.nn.functional.relu}


def _activation_after(linear):
    """(act name, the node computing act(linear's output), the nodes between, users first)
    where pointwise nodes after `linear` (through one reshape) compute one of SINGLE_ACTS
    of it and nothing else reads them; else None. (Evaluated on sample values, as the
    gated-MLP pass names gate activations: decompositions write gelu-tanh as mul, pow and
    tanh nodes.)"""
    start = linear
    if len(start.users) == 1 and _call(next(iter(start.users)), aten.reshape.default, aten.view.default):
        start = next(iter(start.users))
    # The pointwise nodes computed from start alone, in graph order.
    found = {start: True}
    node = start.next
    while node.op != "output":
        args = [a for a in node.args if isinstance(a, torch.fx.Node)]
        if (node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload)
                and torch.Tag.pointwise in node.target.tags and not node.kwargs and args
                and all(a in found for a in args)
                and not any(isinstance(a, (list, tuple, dict)) for a in node.args)):
            found[node] = True
        node = node.next
    nodes = list(found)[1:]
    for i, candidate in enumerate(nodes):
        inputs, stack = set(), [candidate]
        while stack:  # the nodes the candidate reads, back to start
            for a in stack.pop().args:
                if isinstance(a, torch.fx.Node) and a is not start and a not in inputs:
                    inputs.add(a)
                    stack.append(a)
        inner = [n for n in nodes[:i] if n in inputs]
        if any(user is not candidate and user not in inputs for n in [start, *inner] for user in n.users):
            continue
        act = gated_mlp._act_name(start, inner + [candidate], candidate, SINGLE_ACTS)
        if act is not None:
            return act, candidate, [*reversed(inner), *([start] if start is not linear else [])]
    return None


# The widest single linear the norm folds into (LM heads are wider: 32k-256k columns).
MAX_SINGLE_WIDTH = 16384


def fuse_rms_linears(gm: torch.fx.GraphModule) -> int:
    """Replaces each linear_group / linear_gated / single linear whose input is the RMSNorm
    or LayerNorm of a residual sum by one rms_linear or layer_norm_linear; returns how many."""
    graph = gm.graph
    _residuals_into_gemvs(graph)
    order = {node: i for i, node in enumerate(graph.nodes)}
    fused = 0
    for linear in list(graph.nodes):
        found = _linears(linear)
        if found is None:
            continue
        x, weights, biases, act, n_contiguous = found
        rms = _norm(x)
        if rms is not None:
            h, norm_weight, eps, chain = rms
            norm_bias = None
        else:
            layer = _layer_norm(x)
            if layer is None:
                continue
            h, norm_weight, norm_bias, eps, chain = layer
        a, b = _residual(h)
        # OPT flattens h = a + b to rows before its norm: the sum through that reshape.
        summed = h.args[0] if b is None and _call(h, aten.reshape.default, aten.view.default) else None
        if summed is not None and _single_user(summed) and _residual(summed)[1] is not None:
            a, b = _residual(summed)  # (reshaped as h below, once the fold is sure)
        else:
            summed = None
        k = h.meta["val"].shape[-1]
        # Without a residual add, only an h a GEMV made (its residual add inside) saves a
        # dispatch: from a generated kernel (the first layer's embedding) the norm fused
        # into that kernel.
        if (b is None and _gemv_rows(h) is None) or not _fits(k, weights, biases, b, norm_bias, n_contiguous):
            continue
        # h's other readers (the next residual add) take the op's h: they must come after.
        if b is not None and any(order[user] < order[linear] for user in h.users if user not in chain):
            continue
        if rms is not None:
            op, norm_args = torch.ops.webgpu.rms_linear.default, (norm_weight,)
        else:
            op, norm_args = torch.ops.webgpu.layer_norm_linear.default, (norm_weight, norm_bias)
        if summed is not None:
            a, b = _reshaped(graph, (a, b), h, linear)
        # One linear's activation rides along (OPT's relu, GPT-2's gelu-tanh).
        activation = _activation_after(linear) if len(weights) == 1 and not act else None
        if activation is not None:
            act = activation[0]
        if n_contiguous:  # the op takes weights as F.linear does: [n, k]
            with graph.inserting_before(linear):
                transposed = graph.call_function(aten.permute.default, (weights[0], [1, 0]))
            with weights[0].meta["val"].fake_mode:
                transposed.meta["val"] = aten.permute.default(weights[0].meta["val"], [1, 0])
            weights = [transposed]
        fake_mode = h.meta["val"].fake_mode
        with graph.inserting_before(linear):
            node = graph.call_function(op, (a, b, *norm_args, eps, list(weights), list(biases), act))
            with fake_mode:
                node.meta["val"] = op(
                    a.meta["val"], None if b is None else b.meta["val"],
                    *(None if t is None else t.meta["val"] for t in norm_args), eps,
                    [w.meta["val"] for w in weights], [None if t is None else t.meta["val"] for t in biases],
                    act)
            outs = []
            for i in range(2):
                item = graph.call_function(operator.getitem, (node, i))
                item.meta["val"] = node.meta["val"][i]
                outs.append(item)
            replaced = linear if activation is None else activation[1]
            shape = list(replaced.meta["val"].shape)
            result = graph.call_function(aten.reshape.default, (outs[0], shape))
            with fake_mode:
                result.meta["val"] = aten.reshape.default(outs[0].meta["val"], shape)
        replaced.replace_all_uses_with(result)
        if activation is not None:
            graph.erase_node(replaced)
            for dead in activation[2]:
                graph.erase_node(dead)
        # (A single linear's transposed weight goes with it.)
        operands = [t for t in linear.args if isinstance(t, torch.fx.Node) and t not in chain]
        graph.erase_node(linear)
        for dead in chain:
            graph.erase_node(dead)
        for dead in operands:
            if not dead.users and dead.op == "call_function":
                graph.erase_node(dead)
        if b is not None:  # (without one, h is the GEMV's output and stays)
            h.replace_all_uses_with(outs[1])
            graph.erase_node(h)
            if summed is not None:
                graph.erase_node(summed)
        order = {n: i for i, n in enumerate(graph.nodes)}
        fused += 1
    if fused:
        graph.lint()
        gm.recompile()
    return fused
