"""``torch.webgpu.memory``: the device memory API, shaped like ``torch.cuda.memory``.

Tensors live in WebGPU buffers from a caching pool (``csrc/runtime/buffer_pool.h``):
"allocated" counts the buffers live tensors hold (their bucket sizes), "reserved" every
buffer the pool holds, live or cached for reuse. ``empty_cache`` releases the cached ones.
"""
from __future__ import annotations

import collections

import torch

from . import _C

__all__ = [
    "empty_cache",
    "get_per_process_memory_fraction",
    "max_memory_allocated",
    "max_memory_cached",
    "max_memory_reserved",
    "mem_get_info",
    "memory_allocated",
    "memory_cached",
    "memory_reserved",
    "memory_snapshot",
    "memory_stats",
    "memory_summary",
    "reset_accumulated_memory_stats",
    "reset_max_memory_allocated",
    "reset_max_memory_cached",
    "reset_peak_memory_stats",
    "set_per_process_memory_fraction",
]


def _index(device) -> int:
    from .device_module import _index as index

    return index(device)


def memory_stats(device=None) -> dict:
    """The pool's statistics: torch.cuda-style keys (``"allocated_bytes.all.current"``,
    ``"num_ooms"``, ...) as ``torch.accelerator.memory_stats`` gives them, plus the flat
    keys of earlier releases (``"allocated_bytes"``, ``"peak_reserved_bytes"``, ...)."""
    idx = _index(device)
    stats = collections.OrderedDict(_C.memory_stats())
    if _C.is_initialized():  # its num_alloc_retries counts since the last reset: it wins
        stats.update(torch.accelerator.memory_stats(idx))
    return stats


def memory_allocated(device=None) -> int:
    """Bytes held by live tensors (bucket sizes)."""
    return memory_stats(device).get("allocated_bytes", 0)


def max_memory_allocated(device=None) -> int:
    """Peak of ``memory_allocated`` since start or the last ``reset_peak_memory_stats``."""
    return memory_stats(device).get("peak_allocated_bytes", 0)


def memory_reserved(device=None) -> int:
    """Bytes held in device buffers by the pool, live or cached."""
    return memory_stats(device).get("reserved_bytes", 0)


def max_memory_reserved(device=None) -> int:
    """Peak of ``memory_reserved``."""
    return memory_stats(device).get("peak_reserved_bytes", 0)


def memory_cached(device=None) -> int:
    """Old name of :func:`memory_reserved`."""
    return memory_reserved(device)


def max_memory_cached(device=None) -> int:
    """Old name of :func:`max_memory_reserved`."""
    return max_memory_reserved(device)


def reset_peak_memory_stats(device=None) -> None:
    """Resets every peak statistic to the current value."""
    _index(device)
    _C.reset_peak_memory_stats()


def reset_max_memory_allocated(device=None) -> None:
    """Resets the peak of allocated memory (as torch.cuda does: all peaks)."""
    reset_peak_memory_stats(device)


def reset_max_memory_cached(device=None) -> None:
    """Resets the peak of reserved memory (as torch.cuda does: all peaks)."""
    reset_peak_memory_stats(device)


def reset_accumulated_memory_stats(device=None) -> None:
    """Resets the running totals: allocation and free counts and bytes, retries, OOMs."""
    idx = _index(device)
    if _C.is_initialized():
        torch.accelerator.reset_accumulated_memory_stats(idx)


def empty_cache() -> None:
    """Releases cached, unused device buffers to the driver."""
    _C.empty_cache()


def mem_get_info(device=None) -> tuple[int, int]:
    """``(free, total)`` bytes of device memory.

    Where the adapter reports its memory heaps (Dawn's memory-heaps query: Vulkan, D3D,
    Metal adapters), ``total`` is its device-local heaps and ``free`` is total minus what
    this process's pool holds (WebGPU cannot see other processes' use). Where it cannot
    (software adapters such as llvmpipe, Dawn's GL backends), buffers live in system
    memory: ``total`` is the machine's RAM and ``free`` the memory the OS reports as
    available. ``_C.mem_get_info()["source"]`` says which ("adapter" or "system").
    """
    _index(device)
    info = _C.mem_get_info()
    return info["free"], info["total"]


def set_per_process_memory_fraction(fraction, device=None) -> None:
    """Limits this process's device memory to ``fraction`` of ``mem_get_info()[1]``.

    The limit applies to reserved memory (buffers held by the pool, cached ones too): an
    allocation that needs a new buffer past it first releases the cache, then raises
    ``torch.OutOfMemoryError``.
    """
    _index(device)
    if not isinstance(fraction, float):
        raise TypeError("Invalid type for fraction argument, must be `float`")
    if fraction < 0 or fraction > 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    _C.set_memory_fraction(fraction)


def _set_allocator_settings(settings: str) -> None:
    """Sets caching-allocator options, as ``torch.cuda.memory._set_allocator_settings``:
    comma-separated ``key:value`` pairs. The one option:

    ``growth_headroom:F`` (0 to 4; default 0.5, ``TORCH_WEBGPU_ALLOC_GROWTH`` in percent):
    a request that finds no cached buffer but one just below its size (a tensor growing
    step by step, such as a KV cache concatenated per token) gets a buffer larger than its
    size bucket by the fraction ``F``, which then serves the next steps. 0 turns it off.
    """
    for item in filter(None, (p.strip() for p in settings.split(","))):
        key, sep, value = item.partition(":")
        if key.strip() != "growth_headroom" or not sep:
            raise RuntimeError(f"Unrecognized CachingAllocator option: {item}")
        try:
            fraction = float(value)
        except ValueError:
            raise RuntimeError(f"growth_headroom expects a number, got {value!r}") from None
        _C.set_alloc_growth(fraction)


def get_per_process_memory_fraction(device=None) -> float:
    """The fraction set by :func:`set_per_process_memory_fraction` (1.0 if never set)."""
    _index(device)
    return _C.get_memory_fraction()


def _format_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return ""


def memory_snapshot() -> list[dict]:
    """Every buffer the pool holds, in ``torch.cuda.memory_snapshot()``'s format: one
    segment per buffer (a WebGPU buffer holds one allocation, so each segment has one
    block), live ones "active_allocated", cached ones "inactive". Stack frames are not
    recorded (``frames`` is empty)."""
    segments = []
    for s in _C.memory_segments():
        active = s["active"]
        size = s["total_size"]
        block = {
            "address": s["address"],
            "size": size,
            "requested_size": s["requested_size"],
            "state": "active_allocated" if active else "inactive",
            "frames": [],
        }
        segments.append({
            "device": 0,
            "address": s["address"],
            "total_size": size,
            "allocated_size": size if active else 0,
            "active_size": size if active else 0,
            "requested_size": s["requested_size"],
            "stream": 0,
            "segment_type": "large" if size > (1 << 20) else "small",
            "segment_pool_id": (0, 0),
            "is_expandable": False,
            "frames": [],
            "blocks": [block],
        })
    return segments


def memory_summary(device=None, abbreviated: bool = False) -> str:
    """A readable table of the memory statistics, like ``torch.cuda.memory_summary``.

    Rows: allocated, requested and reserved bytes, live allocations and buffers
    (segments); columns: current, peak, and the running totals allocated and freed.
    ``abbreviated`` is accepted for compatibility (the table has no per-pool rows).
    """
    idx = _index(device)
    stats = memory_stats(idx)
    free, total = mem_get_info(idx)
    source = _C.mem_get_info()["source"] if _C.is_initialized() else "system"
    limit = _C.reserve_limit_info()
    from .device_module import get_device_name

    name = get_device_name(idx)

    def get(key):
        return stats.get(key, 0)

    rows = [
        ("Allocated memory", "allocated_bytes.all", _format_bytes),
        ("Requested memory", "requested_bytes.all", _format_bytes),
        ("Reserved memory", "reserved_bytes.all", _format_bytes),
        ("Allocations", "allocation.all", str),
        ("Buffers (segments)", "segment.all", str),
    ]
    width = 86
    rule = "|" + "=" * (width - 2) + "|"
    thin = "|" + "-" * (width - 2) + "|"

    def line(text: str) -> str:
        return "| " + text.ljust(width - 4) + " |"

    limit_text = (
        f"{_format_bytes(limit['limit_bytes'])} ({limit['fraction']:g} of total)"
        if limit["limit_bytes"]
        else "none"
    )
    out = [
        rule,
        line(f"torch.webgpu memory summary, device {idx}: {name}"),
        thin,
        line(f"Device memory: {_format_bytes(total)} total ({source}), {_format_bytes(free)} free"),
        line(f"Per-process limit: {limit_text}"),
        line(f"Allocation retries: {get('num_alloc_retries')}    OOMs: {get('num_ooms')}"),
        thin,
        "| " + " | ".join(
            [f"{'Metric':<22}", f"{'Current':>12}", f"{'Peak':>12}", f"{'Tot. alloc':>12}",
             f"{'Tot. freed':>12}"]) + " |",
        thin,
    ]
    for label, key, fmt in rows:
        cells = [fmt(get(f"{key}.{field}")) for field in ("current", "peak", "allocated", "freed")]
        if key.startswith("requested"):  # the pool keeps no running totals of requests
            cells[2:] = ["-", "-"]
        out.append("| " + " | ".join([f"{label:<22}"] + [f"{c:>12}" for c in cells]) + " |")
    out.append(rule)
    return "\n".join(out) + "\n"
