"""``torch.webgpu``: the device module, shaped like ``torch.cuda``."""
import dataclasses

import torch

from . import _C
from . import profiler  # noqa: F401  (torch.webgpu.profiler)


# The index a device argument names (None, int, str or torch.device); raises unless 0.
_index = _C._device_index


def is_available() -> bool:
    """True when a WebGPU adapter and device can be created."""
    return _C.is_available()


def is_initialized() -> bool:
    return _C.is_initialized()


def init() -> None:
    _C.init()


# torch calls this before every factory function and `.to()` that names webgpu until it has
# returned once; without it, each such call imported this module again and asked it for the
# attribute (an AttributeError through __getattr__ every time).
_lazy_init = init


def _is_in_bad_fork() -> bool:
    return False


def device_count() -> int:
    return 1 if _C.is_available() else 0


def current_device() -> int:
    return 0


def set_device(device) -> None:
    _index(device)


class device:
    """Context manager that selects a webgpu device, as ``torch.cuda.device``.

    There is one WebGPU device (index 0), so this only checks its argument; PyTorch's
    storage copies and ``torch.load(map_location=...)`` enter it.
    """

    def __init__(self, device):
        self.idx = -1 if device is None else _index(device)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class device_of(device):
    """Context manager that selects the device of a webgpu tensor (a no-op for others)."""

    def __init__(self, obj):
        super().__init__(obj.get_device() if obj.device.type == "webgpu" else None)


class _utils:
    @staticmethod
    def _get_device_index(device, optional=False, allow_cpu=False) -> int:
        """The device index of ``device`` (``torch.load`` validates locations with it)."""
        if device is None and optional:
            return current_device()
        if allow_cpu and isinstance(device, (str, torch.device)) and torch.device(device).type == "cpu":
            return -1
        return _index(device)


def synchronize(device=None) -> None:
    """Waits until every kernel recorded so far has finished."""
    _index(device)
    _C.synchronize()


def set_sync_debug_mode(debug_mode) -> None:
    """As ``torch.cuda.set_sync_debug_mode``: "default" (0) says nothing, "warn" (1) warns
    and "error" (2) raises when an op makes the host wait for the device to read data back
    (``.item()``, ``.cpu()``, printing, ``nonzero``); ``synchronize()`` and non-blocking
    copies are not reported."""
    if isinstance(debug_mode, str):
        modes = {"default": 0, "warn": 1, "error": 2}
        if debug_mode not in modes:
            raise RuntimeError("invalid value of debug_mode, expected one of `default`, `warn`, `error`")
        debug_mode = modes[debug_mode]
    _C._set_sync_debug_mode(int(debug_mode))


def get_sync_debug_mode() -> int:
    """The mode ``set_sync_debug_mode`` set: 0 default, 1 warn, 2 error."""
    return _C._get_sync_debug_mode()


@dataclasses.dataclass(frozen=True)
class WebGPUDeviceProperties:
    name: str
    vendor: str
    architecture: str
    driver: str
    backend: str
    adapter_type: str
    compatibility_mode: bool
    shader_f16: bool
    subgroups: bool
    # The adapter's subgroup sizes, and the one reduction kernels assume (0: they combine
    # through workgroup memory: no subgroups, sizes that vary, TORCH_WEBGPU_SUBGROUPS=0).
    subgroup_min_size: int
    subgroup_max_size: int
    subgroup_size: int
    timestamp_query: bool
    max_buffer_size: int
    max_storage_buffer_binding_size: int
    max_storage_buffers_per_shader_stage: int
    max_compute_workgroup_storage_size: int
    max_compute_invocations_per_workgroup: int
    max_compute_workgroups_per_dimension: int
    # Graph replays encode and submit on a thread of their own while Python goes on
    # (TORCH_WEBGPU_ASYNC_REPLAY=1; never on Dawn's GL backends).
    async_submits: bool = False


def get_device_properties(device=None) -> WebGPUDeviceProperties:
    _index(device)
    return WebGPUDeviceProperties(**_C.device_properties())


def get_device_name(device=None) -> str:
    return get_device_properties(device).name


def get_device_capability(device=None):
    _index(device)
    return (0, 0)


# ---- memory (torch.webgpu.memory) and streams ---------------------------------------

import sys  # noqa: E402

from . import memory, streams  # noqa: E402

# `import torch.webgpu.memory` works as `import torch.cuda.memory` does.
sys.modules["torch.webgpu.memory"] = memory
sys.modules["torch.webgpu.streams"] = streams
from .memory import (  # noqa: E402,F401
    empty_cache,
    get_per_process_memory_fraction,
    max_memory_allocated,
    max_memory_cached,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_cached,
    memory_reserved,
    memory_stats,
    memory_snapshot,
    memory_summary,
    reset_accumulated_memory_stats,
    reset_max_memory_allocated,
    reset_max_memory_cached,
    reset_peak_memory_stats,
    set_per_process_memory_fraction,
)
from .streams import (  # noqa: E402,F401
    Event,
    Stream,
    StreamContext,
    current_stream,
    default_stream,
    set_stream,
    stream,
)


# ---- random numbers -------------------------------------------------------------------


# C functions (csrc/aten/python_random.cpp): inside torch.compile, Dynamo graph-breaks on
# them and calls them eagerly, as its rules make it do for torch.cuda's.
manual_seed = _C.manual_seed
manual_seed_all = _C.manual_seed
seed = _C.seed
seed_all = _C.seed
initial_seed = _C.initial_seed
get_rng_state = _C.get_rng_state
set_rng_state = _C.set_rng_state


def get_rng_state_all() -> list:
    return [get_rng_state()]


def set_rng_state_all(new_states) -> None:
    for state in new_states:
        set_rng_state(state)


# ---- mixed precision ------------------------------------------------------------------

from . import amp  # noqa: E402  (torch.webgpu.amp, like torch.cuda.amp)


def get_amp_supported_dtype() -> list:
    """The dtypes torch.autocast("webgpu", dtype=...) accepts (asked by torch.autocast)."""
    return [torch.float16, torch.bfloat16]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """True: bfloat16 tensors are stored natively and computed in float32 on every adapter
    (as float16 is without shader-f16), so no adapter lacks it."""
    return is_available()


# ---- graphs (torch.webgpu.graphs, like torch.cuda.graphs) -----------------------------

from . import graphs  # noqa: E402

sys.modules["torch.webgpu.graphs"] = graphs
from .graphs import (  # noqa: E402,F401
    WebGPUGraph,
    graph,
    graph_pool_handle,
    is_current_stream_capturing,
    make_graphed_callables,
)


# ---- torch.compile --------------------------------------------------------------------

_INDUCTOR_HOOKS = ("Scheduling", "PythonWrapperCodegen", "CppWrapperCodegen", "WrapperFxCodegen")


def __getattr__(name: str):
    # Inductor asks the PrivateUse1 device module for its code generator the first time it
    # compiles for webgpu; importing Inductor only then keeps `import torch_webgpu` fast.
    if name in _INDUCTOR_HOOKS:
        from .compiler.registration import register

        return register()[name]
    raise AttributeError(f"module 'torch.webgpu' has no attribute '{name}'")
