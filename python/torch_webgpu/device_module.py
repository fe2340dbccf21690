"""``torch.webgpu``: the device module, shaped like ``torch.cuda``."""
from dataclasses import dataclass

import torch

from . import _C

_DEVICE_COUNT_ERROR = "torch.webgpu: invalid device {!r}; there is one WebGPU device (index 0)"


def _index(device) -> int:
    if device is None:
        return 0
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, int):
        idx = device
    elif isinstance(device, torch.device):
        if device.type != "webgpu":
            raise ValueError(f"Expected a webgpu device, but got: {device}")
        idx = device.index if device.index is not None else 0
    else:
        raise TypeError(f"Invalid device argument {device!r}")
    if idx != 0:
        raise ValueError(_DEVICE_COUNT_ERROR.format(device))
    return idx


def is_available() -> bool:
    """True when a WebGPU adapter and device can be created."""
    return _C.is_available()


def is_initialized() -> bool:
    return _C.is_initialized()


def init() -> None:
    _C.init()


def _is_in_bad_fork() -> bool:
    return False


def device_count() -> int:
    return 1 if _C.is_available() else 0


def current_device() -> int:
    return 0


def set_device(device) -> None:
    _index(device)


def synchronize(device=None) -> None:
    """Waits until every kernel recorded so far has finished."""
    _index(device)
    _C.synchronize()


@dataclass(frozen=True)
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
    timestamp_query: bool
    max_buffer_size: int
    max_storage_buffer_binding_size: int
    max_storage_buffers_per_shader_stage: int
    max_compute_workgroup_storage_size: int
    max_compute_invocations_per_workgroup: int
    max_compute_workgroups_per_dimension: int


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


def manual_seed(seed: int) -> None:
    _C.manual_seed(int(seed) & 0xFFFF_FFFF_FFFF_FFFF)


def manual_seed_all(seed: int) -> None:
    manual_seed(seed)


def seed() -> None:
    _C.seed()


def seed_all() -> None:
    seed()


def initial_seed() -> int:
    return _C.initial_seed()


def get_rng_state(device="webgpu") -> torch.Tensor:
    _index(device)
    return torch.frombuffer(bytearray(_C.get_rng_state()), dtype=torch.uint8)


def get_rng_state_all() -> list:
    return [get_rng_state()]


def set_rng_state(new_state: torch.Tensor, device="webgpu") -> None:
    _index(device)
    _C.set_rng_state(new_state.detach().cpu().contiguous().to(torch.uint8).numpy().tobytes())


def set_rng_state_all(new_states) -> None:
    for state in new_states:
        set_rng_state(state)
