"""Streams and events of ``torch.webgpu``, shaped like ``torch.cuda``'s.

WebGPU gives a device one queue, and it runs all work in submission order. A
``torch.webgpu.Stream`` is therefore a label: work issued on any stream runs after all
work issued earlier on any stream. ``wait_stream`` and ``wait_event`` are satisfied by
that order and cost nothing; code written for CUDA streams runs unchanged and correct,
without overlap between streams. An ``Event`` records a position in the queue: ``query``
says (without blocking) whether the GPU has finished everything before it, and
``synchronize`` waits for it.
"""
from __future__ import annotations

import torch

from . import _C

_WEBGPU = "webgpu"


def _device_index(device) -> None:
    """Accepts None, 0, "webgpu", "webgpu:0" or torch.device("webgpu", 0)."""
    from .device_module import _index

    _index(device)


def _check_stream(stream, api: str) -> None:
    if not isinstance(stream, torch.Stream):
        raise TypeError(f"{api}: expected a torch.Stream, got {type(stream).__name__}")
    if stream.device.type != _WEBGPU:
        raise RuntimeError(
            f"{api}: expected a stream of the webgpu device, got one of {stream.device}"
        )


class Stream(torch.Stream):
    r"""A WebGPU stream (a subclass of :class:`torch.Stream` for device ``"webgpu"``).

    All streams share the device's one in-order queue (see the module docstring), so
    work on a stream is ordered after all earlier work on every stream. ``priority`` is
    accepted for compatibility and has no effect.
    """

    def __new__(cls, device=None, priority=0, **kwargs):
        if "stream_id" in kwargs:  # an existing stream, by id (as torch.cuda.Stream takes)
            return super().__new__(cls, **kwargs)
        _device_index(device)
        return super().__new__(cls, device=_WEBGPU, priority=priority)

    def wait_event(self, event: torch.Event) -> None:
        """Makes later work on this stream wait for ``event`` (already so by queue order)."""
        event.wait(self)

    def wait_stream(self, stream: torch.Stream) -> None:
        """Makes later work on this stream wait for the work issued so far on ``stream``."""
        self.wait_event(stream.record_event())

    def record_event(self, event: torch.Event | None = None) -> torch.Event:
        """Records ``event`` (a new :class:`Event` if None) at this point of the stream."""
        if event is None:
            event = Event()
        event.record(self)
        return event

    def __repr__(self) -> str:
        return f"torch.webgpu.Stream(device={self.device} stream_id={self.stream_id})"


class Event(torch.Event):
    r"""A WebGPU event (a subclass of :class:`torch.Event` for device ``"webgpu"``).

    ``record`` marks the current end of the device's queue, after flushing the dispatches
    recorded so far. ``query`` never blocks; ``synchronize`` waits until the GPU has
    finished everything before the mark.

    Timing: ``elapsed_time`` measures **host** time, not GPU timestamps. An event's time
    is the host's steady clock at the moment the runtime first sees its queue position
    finished; the runtime looks whenever an event is recorded, queried or synchronized,
    and an event recorded on an idle queue is finished at once. So ``elapsed_time`` of
    ``start.record(); work; end.record(); end.synchronize()`` is the host time from the
    start mark to the end of the work (including the host's time to issue it), an upper
    bound of the GPU's time. An event first looked at long after its work ended (say a
    ``time.sleep`` before ``end.synchronize()``) carries that delay. As on CUDA, both
    events must be created with ``enable_timing=True``, recorded and finished, else
    ``RuntimeError``. (GPU timestamps, where the adapter has ``timestamp-query``, are
    left to the profiler's runtime pieces.)
    """

    def __new__(cls, enable_timing=False, blocking=False, interprocess=False):
        return super().__new__(cls, device=_WEBGPU, enable_timing=enable_timing)

    def record(self, stream: torch.Stream | None = None) -> None:
        """Records the event on ``stream`` (the current stream if None)."""
        if stream is None:
            stream = current_stream()
        super().record(stream)

    def wait(self, stream: torch.Stream | None = None) -> None:
        """Makes later work on ``stream`` wait for this event (already so by queue order)."""
        if stream is None:
            stream = current_stream()
        super().wait(stream)

    def elapsed_time(self, end_event: torch.Event) -> float:
        """Milliseconds of host time between this event and ``end_event`` (see the class)."""
        if not isinstance(end_event, torch.Event):
            raise TypeError(f"elapsed_time: expected a torch.Event, got {type(end_event).__name__}")
        if end_event.device.type != _WEBGPU:
            raise RuntimeError(
                f"elapsed_time: both events must be on the webgpu device, got {end_event.device}"
            )
        return _C.event_elapsed_time(self.event_id, end_event.event_id)

    def __repr__(self) -> str:
        state = "recorded" if self.event_id else "uninitialized"
        return f"torch.webgpu.Event({state})"


def _wrap(packed) -> Stream:
    stream_id, device_index, device_type = packed
    return Stream(stream_id=stream_id, device_index=device_index, device_type=device_type)


def current_stream(device=None) -> Stream:
    """The calling thread's current stream (the default stream unless one was set)."""
    _device_index(device)
    return _wrap(_C.current_stream())


def default_stream(device=None) -> Stream:
    """The default stream."""
    _device_index(device)
    return _wrap(_C.default_stream())


def set_stream(stream: torch.Stream | None) -> None:
    """Makes ``stream`` the calling thread's current stream (no-op for None)."""
    if stream is None:
        return
    _check_stream(stream, "torch.webgpu.set_stream")
    _C.exchange_stream_id(stream.stream_id)


class StreamContext:
    """Context manager that makes a stream current and restores the previous one."""

    def __init__(self, stream: torch.Stream | None):
        if stream is not None:
            _check_stream(stream, "torch.webgpu.stream")
        self.stream = stream
        self.prev_stream = None

    def __enter__(self):
        if self.stream is not None:
            self.prev_stream = current_stream()
            set_stream(self.stream)
        return self.stream

    def __exit__(self, *exc):
        if self.stream is not None:
            set_stream(self.prev_stream)
        return False


def stream(stream: torch.Stream | None) -> StreamContext:
    """``with torch.webgpu.stream(s):`` runs the block with ``s`` as the current stream."""
    return StreamContext(stream)
