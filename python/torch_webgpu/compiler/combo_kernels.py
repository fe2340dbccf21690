"""Combo kernels: independent small generated kernels in one dispatch.

A decode step runs per layer several tiny pointwise kernels that do not depend on each
other (rope of q and of k, the K/V cache writes, the attention mask, the cache counters'
``+= 1``); on a GPU each dispatch costs microseconds whatever its size. Inductor can group
such kernels ("combo kernels", ``ForeachKernelSchedulerNode``) but generates them for
Triton only; this module gives our backend its own:

- ``group_nodes``: which webgpu pointwise kernels go together: an antichain of the
  dependency graph (no member reaches another, so one dispatch can stand for all of
  them), at most ``MAX_SUBKERNELS``, whose buffers fit one shader stage's storage
  bindings. Inductor's combo pass (``Scheduler.create_combo_kernel_nodes``, with its
  peak-memory gate) turns each group into one scheduler node.
- ``codegen``: one WGSL kernel whose invocations split into consecutive ranges, one per
  sub-kernel; each range runs that sub-kernel's own body (the code a separate kernel would
  run, so results are the same bits) with ``idx`` rebased to its range.

``install`` turns Inductor's combo pass on for graphs with webgpu tensors (only for them:
the switch is Inductor's global config); ``TORCH_WEBGPU_COMPILE_COMBO=0`` turns it off.
"""
from __future__ import annotations

import functools
import os

import sympy
from torch._inductor import config
from torch._inductor.codegen.common import IndentedBuffer, KernelArgs, TensorArg
from torch._inductor.codegen.simd_kernel_features import SIMDKernelFeatures
from torch._inductor.virtualized import V

from .wgsl_codegen import aliased_inputs, fits, kernel_source, max_kernel_buffers, write_launch

# Sub-kernels per combo: enough for a decoder layer's small kernels; more grows the
# kernel's branch chain for little gain.
MAX_SUBKERNELS = 8


def enabled() -> bool:
    return os.environ.get("TORCH_WEBGPU_COMPILE_COMBO", "1") != "0"


def bound_buffers(node) -> set[str]:
    """The buffers a kernel of `node` binds: mutated buffers by their real name (an
    in-place update's output is its input's buffer), without the intermediates its fused
    operations produce and consume themselves. An estimate for grouping; codegen checks
    the kernel's actual arguments."""
    scheduler = node.scheduler
    ops = node.get_operation_names()
    local = {buf.get_name() for buf in node.get_outputs()
             if all(user.get_name() in ops for user in buf.users)}
    names = set()
    for dep in node.read_writes.reads | node.read_writes.writes:
        real = scheduler.mutation_real_name.get(dep.name, dep.name)
        if dep.name not in local or real != dep.name:
            names.add(real)
    return names


# ------------------------------------------------------------------- grouping

def _combinable(node) -> bool:
    from torch._inductor.scheduler import FusedSchedulerNode, SchedulerNode

    device = node.get_device()
    return (isinstance(node, (SchedulerNode, FusedSchedulerNode)) and not node.is_foreach()
            and device is not None and device.type == "webgpu"
            and not node.is_reduction() and not node.is_template())


def group_nodes(scheduler) -> list[list]:
    """Groups of independent webgpu pointwise kernels, first fit in schedule order.

    A group runs as one dispatch, so the groups must stay a DAG: with A, X in one group and
    Y, Z in another, X needing Y and Z needing A is a cycle although no member needs
    another of its own group. Each group keeps the groups it depends on (transitively);
    a node joins a group only if nothing it depends on depends on that group."""
    groups: list[tuple[list, set, set]] = []  # (members, their operation names, buffers)
    group_of: dict[str, int] = {}  # operation name -> its group
    depends: list[set[int]] = []  # group -> the groups it depends on, transitively
    for node in scheduler.nodes:
        if not _combinable(node):
            continue
        buffers = bound_buffers(node)
        direct = {group_of[a] for a in node.ancestors if a in group_of}
        needs = direct.union(*(depends[g] for g in direct))
        for index, (members, names, group_buffers) in enumerate(groups):
            if (len(members) < MAX_SUBKERNELS and index not in needs
                    and fits(group_buffers | buffers)):
                break
        else:
            index = len(groups)
            groups.append(([], set(), set()))
            depends.append(set())
        members, names, group_buffers = groups[index]
        members.append(node)
        names.update(node.get_operation_names())
        group_buffers.update(buffers)
        group_of.update((name, index) for name in node.get_operation_names())
        for g, above in enumerate(depends):  # the group and all that depend on it
            if g == index or index in above:
                above |= needs
    return [members for members, _, _ in groups if len(members) > 1]


def install() -> None:
    """Wraps ``Scheduler._init`` once: graphs with webgpu tensors schedule with Inductor's
    combo pass on, grouped by ``group_nodes``."""
    from torch._inductor.scheduler import ForeachKernelSchedulerNode, Scheduler

    original = Scheduler._init
    if getattr(original, "webgpu", False):
        return

    @functools.wraps(original)
    def _init(self, nodes) -> None:
        if not (enabled() and "webgpu" in V.graph.device_types):
            return original(self, nodes)
        algorithm = ForeachKernelSchedulerNode.group_algorithm_for_combo_kernels
        ForeachKernelSchedulerNode.group_algorithm_for_combo_kernels = group_nodes
        try:
            with config.patch(combo_kernels=True, combo_kernels_pointwise_only=True,
                              benchmark_combo_kernel=False):
                original(self, nodes)
        finally:
            ForeachKernelSchedulerNode.group_algorithm_for_combo_kernels = algorithm

    _init.webgpu = True
    Scheduler._init = _init


# -------------------------------------------------------------------- codegen

class ComboKernel:
    """What the sub-kernels of one combo share: their arguments (each buffer bound once)
    and the module-scope code their bodies gathered (helpers, libraries, device checks)."""

    def __init__(self) -> None:
        self.args = KernelArgs()
        self.libraries: set[str] = set()
        self.declarations = IndentedBuffer()
        self.check_messages: list[str] = []
        self.atomic_outputs: set[str] = set()
        self.helper_names: set[str] = set()
        self.group_reductions: list[tuple] = []
        self.workgroup = 0

    def adopt(self, sub) -> None:
        sub.args = self.args
        sub.libraries = self.libraries
        sub.declarations = self.declarations
        sub.check_messages = self.check_messages
        sub.atomic_outputs = self.atomic_outputs
        sub.group_reductions = self.group_reductions
        sub._helper_names = self.helper_names
        self.workgroup = sub.workgroup  # pointwise kernels all take the same

    def main_code(self, subs) -> tuple[str, sympy.Expr]:
        """The combo's main and its invocation count: sub-kernel k runs where
        ``ends[k-1] <= idx < ends[k]``, with `idx` rebased to 0."""
        code = IndentedBuffer()
        code.writeline(f"// combo of {len(subs)} independent kernels, each over its own "
                       "range of invocations")
        start, start_str = sympy.Integer(0), "0u"
        for k, sub in enumerate(subs):
            with V.set_kernel_handler(sub):
                count = sub.grid_count()
                end = start + count
                end_str = f"u32({sub.sexpr(sub.rename_indexing(end))})"
                text = sub.main_code()
            if k == 0:
                code.writeline(f"if (idx < {end_str}) {{")
            elif k < len(subs) - 1:
                code.writeline(f"}} else if (idx < {end_str}) {{")
            else:  # the frame returns past the last range's end
                code.writeline("} else {")
            with code.indent():
                if k:
                    code.writeline(f"let idx = idx - {start_str};")
                code.splice(text)
            start, start_str = end, end_str
        code.writeline("}")
        return code.getvalue(), start


def _coalescing(node):
    """The node's memory-coalescing analysis: a method from torch 2.13, a module function in
    tiling_utils before (2.11 on the H200)."""
    method = getattr(node, "get_coalesce_analysis", None)
    if method is not None:
        return method()
    from torch._inductor import tiling_utils

    analyze = getattr(tiling_utils, "analyze_memory_coalescing", None) or getattr(
        tiling_utils, "_analyze_memory_coalescing", None)
    return analyze(node) if analyze is not None else None


def _plan(scheduling, node):
    """The features a separate kernel of `node` would have (as SIMDScheduling.codegen_node
    builds them), or None when all its operations were removed."""
    import torch._inductor.scheduler as scheduler

    nodes = [n for n in node.get_nodes() if n.get_name() not in scheduling.scheduler.removed_ops]
    if not nodes:
        return None
    coalesce_analysis = None
    if config.triton.coalesce_tiling_analysis:
        if len(nodes) != len(node.get_nodes()):
            node = scheduler.FusedSchedulerNode(scheduling.scheduler, nodes)
        coalesce_analysis = _coalescing(node)
    _, (numel, rnumel) = max(nodes, key=lambda n: int(n.is_reduction())).group
    schedule = scheduling.generate_node_schedule(nodes, numel, rnumel)
    return SIMDKernelFeatures(schedule, numel, rnumel, coalesce_analysis)


def _chunks(nodes) -> list[list]:
    """`nodes` in runs that one kernel can hold: pointwise, up to MAX_SUBKERNELS, their
    buffers within the binding limit (a reduction, or a node that fits nowhere, alone)."""
    chunks: list[tuple[list, set]] = []
    for node in nodes:
        buffers = bound_buffers(node)
        last = chunks[-1] if chunks else None
        if (last is not None and not node.is_reduction() and len(last[0]) < MAX_SUBKERNELS
                and not last[0][0].is_reduction() and fits(last[1] | buffers)):
            last[0].append(node)
            last[1].update(buffers)
        else:
            chunks.append(([node], set(buffers)))
    return [members for members, _ in chunks]


def _bindings(combo: ComboKernel) -> int:
    """Storage bindings the combo's kernel takes (its tensors and the error word)."""
    _, _, precompile_args, _ = combo.args.python_argdefs()
    aliased = aliased_inputs(combo.args)
    tensors = [a for a in precompile_args if isinstance(a, TensorArg) and a.name not in aliased]
    return len(tensors) + (1 if combo.check_messages else 0)


def _combo(scheduling, plans):
    """The combo of these sub-kernels, its sub-kernels' code generated, or None when its
    bindings exceed the adapter's limit (nothing is marked run then)."""
    combo = ComboKernel()
    subs = []
    for features in plans:
        tiling, scores = scheduling.get_tiling_and_scores(
            features.node_schedule, features.numel, features.reduction_numel,
            features.coalesce_analysis)
        (sub,) = scheduling.create_kernel_choices(
            features, [tiling], {"features": features, "tiling_scores": scores})
        combo.adopt(sub)
        scheduling.codegen_node_schedule_with_kernel(features.node_schedule, sub)
        subs.append(sub)
    if _bindings(combo) > max_kernel_buffers():
        return None
    for sub, features in zip(subs, plans):  # the rest of SIMDScheduling.process_kernel
        with V.set_kernel_handler(sub):
            for node in features.scheduler_nodes():
                node.mark_run()
        V.graph.removed_buffers |= sub.removed_buffers
        V.graph.inplaced_to_remove |= sub.inplaced_to_remove
    return combo, subs


def codegen(scheduling, combo_node) -> None:
    """Code for a ForeachKernelSchedulerNode (our groups, or torch._foreach_* lists)."""
    # The buffers whose last use is this node are freed after all its kernels: a separate
    # kernel's codegen frees what is pending (codegen_node_schedule), so none is pending then.
    scheduler = scheduling.scheduler
    pending, scheduler.buffer_names_to_free = scheduler.buffer_names_to_free, type(
        scheduler.buffer_names_to_free)()
    for chunk in _chunks(combo_node.get_subkernel_nodes()):
        plans = [p for p in (_plan(scheduling, node) for node in chunk) if p is not None]
        made = _combo(scheduling, plans) if len(plans) > 1 else None
        if made is None:
            for node in chunk:
                scheduling.codegen_node(node)
            continue
        combo, subs = made
        text, count = combo.main_code(subs)
        schedule = [n for features in plans for n in features.scheduler_nodes()]
        name = scheduling.define_kernel(kernel_source(combo, text, "invocations"), schedule,
                                        combo, kind="combo")
        scheduling.codegen_comment(schedule, name)
        write_launch(name, combo.args, count)
    scheduler.buffer_names_to_free |= pending
    scheduling.free_buffers_in_scheduler()
