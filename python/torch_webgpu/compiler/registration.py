"""Plugs the webgpu device into torch.compile: Dynamo's device interface, Inductor's code
generator and wrapper, and the device op overrides of the generated wrapper code.

Nothing here runs at ``import torch_webgpu`` (Dynamo and Inductor take seconds to import):
Inductor asks ``torch.webgpu`` for its ``Scheduling`` / ``PythonWrapperCodegen`` the first
time it compiles for the PrivateUse1 device (``init_backend_registration``), and
device_module's ``__getattr__`` calls ``register()`` then.
"""
from __future__ import annotations

import functools
import inspect

import torch


class _InductorDeviceProperties:
    """torch.webgpu's device properties plus the figures Inductor's heuristics read.
    WebGPU reports no compute-unit count: 16 is a guess that only steers how Inductor
    splits large reductions."""

    multi_processor_count = 16
    max_threads_per_block = 256
    warp_size = 32

    def __init__(self, props):
        self._props = props

    def __getattr__(self, name):
        return getattr(self._props, name)


def _device_interface():
    from torch._dynamo.device_interface import DeviceInterface

    webgpu = torch.webgpu

    class WebGPUInterface(DeviceInterface):
        device = webgpu.device
        Event = webgpu.Event
        Stream = webgpu.Stream

        class Worker:
            @staticmethod
            def set_device(device: int) -> None:
                webgpu.set_device(device)

            @staticmethod
            def current_device() -> int:
                return 0

            @staticmethod
            def get_device_properties(device=None):
                return _InductorDeviceProperties(webgpu.get_device_properties(device))

        current_device = staticmethod(webgpu.current_device)
        set_device = staticmethod(webgpu.set_device)
        device_count = staticmethod(webgpu.device_count)
        is_available = staticmethod(webgpu.is_available)
        synchronize = staticmethod(webgpu.synchronize)
        @staticmethod
        def get_device_properties(device=None):
            return _InductorDeviceProperties(webgpu.get_device_properties(device))
        current_stream = staticmethod(webgpu.current_stream)
        set_stream = staticmethod(webgpu.set_stream)

        @staticmethod
        def get_raw_stream(device_index: int) -> int:
            return 0

        @staticmethod
        def get_compute_capability(device=None) -> str:
            return "webgpu"

        @staticmethod
        def is_bf16_supported(including_emulation: bool = False) -> bool:
            return True

        @classmethod
        def is_dtype_supported(cls, dtype: torch.dtype, including_emulation: bool = False) -> bool:
            # float64 and complex live on the device but compute on the CPU.
            return dtype not in (torch.float64, torch.complex64, torch.complex128)

        @staticmethod
        def memory_allocated(device=None) -> int:
            return webgpu.memory_allocated(device)

    return WebGPUInterface


def _device_op_overrides():
    from torch._inductor.codegen.common import DeviceOpOverrides

    class WebGPUDeviceOpOverrides(DeviceOpOverrides):
        def import_get_raw_stream_as(self, name: str) -> str:
            return f"def {name}(index): return 0"

        def set_device(self, device_idx: int) -> str:
            return "pass  # one webgpu device"

        def synchronize(self) -> str:
            return "torch.webgpu.synchronize()"

        def device_guard(self, device_idx: int) -> str:
            return "torch._ops.contextlib.nullcontext()"

    return WebGPUDeviceOpOverrides()


def _wrapper_codegen():
    from torch._inductor.codegen.wrapper import PythonWrapperCodegen

    class WebGPUPythonWrapperCodegen(PythonWrapperCodegen):
        """Python wrapper whose generated module can define WGSLKernel objects."""

        @staticmethod
        def create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
            if is_subgraph:  # subgraphs use their parent's header (and its imports)
                return PythonWrapperCodegen.create(
                    is_subgraph, subgraph_name, parent_wrapper, partition_signatures)
            return WebGPUPythonWrapperCodegen()

        def write_header(self) -> None:
            super().write_header()
            self.imports.writeline(
                "from torch_webgpu.compiler.kernel import WGSLKernel, TensorArg")

    return WebGPUPythonWrapperCodegen


def _device_pass():
    """Our backend's post-grad graph pass (Inductor applies it only to graphs with webgpu
    tensors): grouped-query attention without repeated K/V (attention_passes.py), the
    horizontal fusion of decode's linears (horizontal_fusion.py), of a gated MLP's
    gate/up with its activation (gated_mlp.py) and of a residual add + RMSNorm into the
    linears after it (rms_linear.py). Its uuid()
    is the version of our code generator and the pass's switch: Inductor puts backend
    passes' uuids into its FX graph cache key, so a new torch_webgpu (Python generator or
    WGSL library in _C) or a flipped TORCH_WEBGPU_COMPILE_HFUSE / _GATED / _COMBO / _SCAN /
    _REDUCTION_THREADS (or a software adapter after a GPU: scans differ) never reuses
    stale graphs."""
    import hashlib
    import os

    from torch._inductor.custom_graph_pass import CustomGraphModulePass

    from .. import _C

    here = os.path.dirname(__file__)
    digest = hashlib.sha256()
    for name in sorted(os.listdir(here)):
        if name.endswith(".py"):
            with open(os.path.join(here, name), "rb") as f:
                digest.update(f.read())
    library = os.stat(_C.__file__)
    digest.update(f"{library.st_size}:{library.st_mtime_ns}".encode())
    version = digest.hexdigest()

    from . import attention_passes, combo_kernels, gated_mlp, horizontal_fusion, rms_linear, wgsl_codegen

    class WebGPUDevicePass(CustomGraphModulePass):
        def __call__(self, gm) -> None:
            attention_passes.attention_without_repeated_kv(gm)
            if horizontal_fusion.enabled():
                horizontal_fusion.fuse_linears(gm)
            if gated_mlp.enabled():
                gated_mlp.fuse_gated(gm)  # (over the groups fuse_linears made)
            if rms_linear.enabled():
                rms_linear.fuse_rms_linears(gm)  # (over both passes' linears)

        def uuid(self):
            return (f"{version}:hfuse={int(horizontal_fusion.enabled())}"
                    f":gated={int(gated_mlp.enabled())}:rms={int(rms_linear.enabled())}"
                    f":combo={int(combo_kernels.enabled())}"
                    f":serial_scans={int(wgsl_codegen.serial_scans())}"
                    f":threads={os.environ.get('TORCH_WEBGPU_COMPILE_REDUCTION_THREADS', '')}")

    return WebGPUDevicePass()


# Dtypes generated kernels cannot compute: they live on the device and compute on the CPU.
EAGER_ONLY_DTYPES = (torch.float64, torch.complex64, torch.complex128)
# Inductor ops the WGSL generator lacks that stand for no aten op (random draws are
# Inductor's own; the rest map to aten.NAME or aten.special_NAME).
_NOT_ATEN = {"partial_accumulate", "rand", "rand_eager", "randint64", "randn"}


def _fallback_ops() -> set:
    """Aten op packets whose lowering needs an Inductor op with no WGSL."""
    from .wgsl_codegen import MISSING_OPS

    aten = torch.ops.aten
    packets = set()
    for name in MISSING_OPS - _NOT_ATEN:
        for candidate in (name, f"special_{name}"):
            if hasattr(aten, candidate):
                packets.add(getattr(aten, candidate))
    return packets


def _install_fallbacks() -> None:
    """Nodes the WGSL generator cannot compute run as extern (eager ATen) calls: Inductor
    asks ``fallback_node_due_to_unsupported_type`` (as it does for complex tensors) before
    lowering each aten node; ours adds webgpu nodes that read or write float64 / complex,
    and aten ops whose lowering needs an Inductor op with no WGSL (frexp, Bessel functions,
    ...). Eager computes them (float64 on the CPU, by design), never a wrong answer."""
    import torch._inductor.graph as inductor_graph
    import torch._inductor.pattern_matcher as pattern_matcher
    from torch.utils import _pytree as pytree

    original = inductor_graph.fallback_node_due_to_unsupported_type
    if getattr(original, "webgpu", False):
        return
    packets = _fallback_ops()

    def fake_tensors(node):
        values = [node.meta.get("val")] + [a.meta.get("val") for a in node.all_input_nodes]
        return [t for t in pytree.tree_leaves(values) if isinstance(t, torch.Tensor)]

    def fallback_node_due_to_unsupported_type(node, allow_cpu_inputs=True):
        if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload):
            tensors = fake_tensors(node)
            if any(t.device.type == "webgpu" for t in tensors):
                if node.target.overloadpacket in packets:
                    return True
                if any(t.dtype in EAGER_ONLY_DTYPES for t in tensors):
                    return True
        return original(node, allow_cpu_inputs)

    fallback_node_due_to_unsupported_type.webgpu = True
    inductor_graph.fallback_node_due_to_unsupported_type = fallback_node_due_to_unsupported_type
    pattern_matcher.fallback_node_due_to_unsupported_type = fallback_node_due_to_unsupported_type


class _NoCppWrapper:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("torch_webgpu: cpp_wrapper (AOTInductor) is not supported "
                                  "on webgpu; use the default Python wrapper")

    @staticmethod
    def create(*args, **kwargs):
        _NoCppWrapper()


@functools.cache
def register() -> dict:
    """Registers everything once; returns the hooks Inductor asks torch.webgpu for."""
    from torch._dynamo.device_interface import register_interface_for_device
    from torch._inductor.codegen.common import (
        get_device_op_overrides,
        register_backend_for_device,
        register_device_op_overrides,
    )

    from .wgsl_codegen import WebGPUScheduling

    register_interface_for_device("webgpu", _device_interface())
    register_interface_for_device("webgpu:0", _device_interface())
    # Inductor fills its table of device op overrides (cuda, xpu, mps, ...) on first use,
    # and torch 2.11 skips that when the table already holds an entry: registering ours
    # first left `cuda` graphs with the CPU's (`with pass:` in their wrapper code, a
    # SyntaxError). A first lookup fills it before ours goes in.
    get_device_op_overrides("cpu")
    register_device_op_overrides("webgpu", _device_op_overrides())
    wrapper = _wrapper_codegen()
    extra = {}
    if "device_custom_pass" in inspect.signature(register_backend_for_device).parameters:
        extra["device_custom_pass"] = _device_pass()
    register_backend_for_device("webgpu", WebGPUScheduling, wrapper, _NoCppWrapper, **extra)
    _install_fallbacks()
    from .binding_budget import install as install_binding_budget
    from .combo_kernels import install as install_combo_kernels
    from .graph_replay import install as install_graph_replay

    install_graph_replay()
    install_combo_kernels()
    install_binding_budget()
    return {
        "Scheduling": WebGPUScheduling,
        "PythonWrapperCodegen": wrapper,
        "CppWrapperCodegen": _NoCppWrapper,
        "WrapperFxCodegen": None,
    }
