"""``torch.webgpu.profiler``: time every kernel dispatch of the webgpu device.

::

    with torch.webgpu.profiler.profile() as prof:
        y = model(x)
    print(prof.table(sort_by="gpu_time", row_limit=10))
    prof.export_chrome_trace("trace.json")   # open in Perfetto or chrome://tracing

Each dispatch is recorded with the ATen op that issued it and its kernel (the pipeline's
cache key); a replayed graph's dispatches (``torch.webgpu`` graphs, ``torch.compile(mode=
"reduce-overhead")``) under the op ``webgpu::graph_replay``. Where the adapter has the ``timestamp-query`` feature the times are GPU
times from timestamp queries around each dispatch; elsewhere (e.g. Mesa's llvmpipe) each
dispatch is submitted alone and its time is the host's wall clock from submit to
completion, which includes submit and wait overhead: the table and trace say which.
Profiling changes how work is batched (one compute pass per dispatch, a wait per batch),
so the profiled region runs slower than it would unprofiled; results are unchanged.
"""
import json
from collections import OrderedDict
from dataclasses import dataclass
from typing import List, Optional

from . import _C

__all__ = ["profile", "DispatchEvent", "HostOpEvent", "KernelStats"]

_SORT_KEYS = {
    "gpu_time": lambda s: -s.total_us,
    "gpu_time_total": lambda s: -s.total_us,
    "mean": lambda s: -s.mean_us,
    "calls": lambda s: -s.calls,
    "op": lambda s: (s.op, s.kernel),
    "kernel": lambda s: (s.kernel, s.op),
}

_TIMING_NOTE = {
    "gpu": "GPU time from timestamp queries",
    "host": "host time (adapter has no timestamp-query): wall clock from submit to completion "
    "of each dispatch, submitted alone",
}


@dataclass(frozen=True)
class DispatchEvent:
    """One kernel dispatch. Times are microseconds from the start of the profile."""

    op: str  # innermost ATen op running when it was recorded ("" when none)
    kernel: str  # pipeline label (its cache key)
    start_us: float
    end_us: float
    batch: int  # index of the submitted batch that carried it

    @property
    def duration_us(self) -> float:
        return self.end_us - self.start_us


@dataclass(frozen=True)
class HostOpEvent:
    """One ATen op (or record_function scope) as the host ran it."""

    name: str
    start_us: float
    end_us: float
    thread: int


@dataclass(frozen=True)
class KernelStats:
    """Dispatches of one kernel issued by one ATen op, summed."""

    op: str
    kernel: str
    calls: int
    total_us: float
    mean_us: float
    share: float  # fraction of the profile's total dispatch time


class profile:
    """Context manager that records every dispatch made inside it.

    ``timing``: ``"auto"`` (GPU timestamps where the adapter has them, host time
    otherwise), ``"gpu"`` (RuntimeError without timestamp-query) or ``"host"``.
    A profile inside another shares the outer one's timing and sees its own dispatches.
    """

    def __init__(self, timing: str = "auto"):
        if timing not in ("auto", "gpu", "host"):
            raise ValueError(f"torch.webgpu.profiler: timing must be 'auto', 'gpu' or 'host', "
                             f"not {timing!r}")
        self._requested = timing
        self._session: Optional[dict] = None
        self.timing: Optional[str] = None  # "gpu" or "host" once entered
        self._events: List[DispatchEvent] = []
        self._host_events: List[HostOpEvent] = []

    def __enter__(self):
        if self._session is not None:
            raise RuntimeError("torch.webgpu.profiler: this profile is already running")
        self._session = dict(_C._profiler_start(self._requested))
        self.timing = self._session["timing"]
        self._events, self._host_events = [], []
        return self

    def __exit__(self, exc_type, exc, tb):
        session, self._session = self._session, None
        try:
            records, host = _C._profiler_stop(session["first_record"], session["first_host_event"])
        except RuntimeError:
            if exc_type is None:
                raise
            return False  # the block's own exception matters more; the session is closed
        origin = session["start_ns"]
        self._events = [
            DispatchEvent(op, kernel, (start - origin) / 1e3, (end - origin) / 1e3, batch)
            for op, kernel, start, end, batch in records
            if end > 0  # a batch whose submit failed has no times
        ]
        self._host_events = [
            HostOpEvent(name, (start - origin) / 1e3, (end - origin) / 1e3, thread)
            for name, start, end, thread in host
        ]
        return False

    # ---- results ------------------------------------------------------------------------

    def events(self) -> List[DispatchEvent]:
        """Every dispatch, in the order recorded."""
        return list(self._events)

    def host_events(self) -> List[HostOpEvent]:
        return list(self._host_events)

    @property
    def total_us(self) -> float:
        """Sum of all dispatch times."""
        return sum(e.duration_us for e in self._events)

    def key_averages(self) -> List[KernelStats]:
        """One row per (ATen op, kernel), largest total time first."""
        groups = OrderedDict()
        for e in self._events:
            groups.setdefault((e.op, e.kernel), []).append(e.duration_us)
        total = self.total_us
        rows = [
            KernelStats(op, kernel, len(times), sum(times), sum(times) / len(times),
                        sum(times) / total if total > 0 else 0.0)
            for (op, kernel), times in groups.items()
        ]
        rows.sort(key=_SORT_KEYS["gpu_time"])
        return rows

    def table(self, sort_by: str = "gpu_time", row_limit: int = 20, kernel_width: int = 60) -> str:
        """A text table: op, kernel, calls, total and mean time, share of the total."""
        if sort_by not in _SORT_KEYS:
            raise ValueError(f"torch.webgpu.profiler: sort_by must be one of "
                             f"{sorted(_SORT_KEYS)}, not {sort_by!r}")
        rows = sorted(self.key_averages(), key=_SORT_KEYS[sort_by])
        if row_limit is not None and row_limit >= 0:
            rows = rows[:row_limit]

        def clip(text, width):
            return text if len(text) <= width else text[: width - 3] + "..."

        op_width = max([len("ATen op")] + [len(r.op or "-") for r in rows])
        head = (f"{'ATen op':<{op_width}}  {'kernel':<{kernel_width}}  {'calls':>6}  "
                f"{'total us':>11}  {'mean us':>10}  {'share':>6}")
        lines = [f"torch.webgpu.profiler: {len(self._events)} dispatches, "
                 f"{_TIMING_NOTE[self.timing or 'host']}", head, "-" * len(head)]
        for r in rows:
            lines.append(f"{clip(r.op or '-', op_width):<{op_width}}  "
                         f"{clip(r.kernel, kernel_width):<{kernel_width}}  {r.calls:>6}  "
                         f"{r.total_us:>11.1f}  {r.mean_us:>10.2f}  {100 * r.share:>5.1f}%")
        lines.append("-" * len(head))
        lines.append(f"total {'GPU' if self.timing == 'gpu' else 'host'} time: "
                     f"{self.total_us:.1f} us")
        return "\n".join(lines)

    def export_chrome_trace(self, path: str) -> None:
        """Writes a Chrome trace (open it in Perfetto or chrome://tracing): one track of
        dispatches on the device, one of ATen ops per host thread."""
        device_pid, host_pid = 1, 0
        track = ("GPU dispatches (timestamp queries)" if self.timing == "gpu"
                 else "dispatches (host time: submit to completion)")
        events = [
            {"ph": "M", "name": "process_name", "pid": host_pid, "args": {"name": "host"}},
            {"ph": "M", "name": "process_name", "pid": device_pid,
             "args": {"name": "webgpu device"}},
            {"ph": "M", "name": "thread_name", "pid": device_pid, "tid": 0,
             "args": {"name": track}},
        ]
        threads = {}
        for h in self._host_events:
            tid = threads.setdefault(h.thread, len(threads))
            events.append({"ph": "X", "cat": "aten_op", "name": h.name, "pid": host_pid,
                           "tid": tid, "ts": h.start_us, "dur": max(h.end_us - h.start_us, 0.0)})
        for thread, tid in threads.items():
            events.append({"ph": "M", "name": "thread_name", "pid": host_pid, "tid": tid,
                           "args": {"name": f"ATen ops (thread {thread})"}})
        for e in self._events:
            events.append({"ph": "X", "cat": "kernel", "name": e.kernel, "pid": device_pid,
                           "tid": 0, "ts": e.start_us, "dur": e.duration_us,
                           "args": {"op": e.op, "batch": e.batch, "timing": self.timing}})
        with open(path, "w") as f:
            json.dump({"traceEvents": events, "displayTimeUnit": "ms",
                       "otherData": {"timing": _TIMING_NOTE[self.timing or "host"]}}, f)
