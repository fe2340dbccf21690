"""Streams and events of torch.webgpu (shaped like torch.cuda's) and the generic
torch.Stream / torch.Event / torch.accelerator stream API on the webgpu device.

WebGPU has one in-order queue: streams are labels, and work on any stream runs after all
earlier work. Results of multi-stream programs are compared against the same program on
the CPU; event timing against the host clock."""
import threading
import time

import pytest
import torch

import torch_webgpu  # noqa: F401
from conftest import assert_same


@pytest.fixture(autouse=True)
def _default_stream_after():
    yield
    torch.webgpu.set_stream(torch.webgpu.default_stream())


def _cpu_stream():
    # A stream object of another device (CPU), built from its fields.
    return torch.Stream(stream_id=0, device_index=0, device_type=0)


def _busy_work(n=384, reps=6):
    """Enough kernels to take a visible time on any adapter; returns the result."""
    a = torch.linspace(-1, 1, n * n, device="webgpu").reshape(n, n)
    x = a
    for _ in range(reps):
        x = torch.tanh(x @ a)
    return x


def test_stream_types_and_identity():
    s1, s2 = torch.webgpu.Stream(), torch.webgpu.Stream(priority=-1)
    for s in (s1, s2):
        assert isinstance(s, torch.Stream)
        assert s.device == torch.device("webgpu", 0)
    assert s1 != s2 and s1.stream_id != s2.stream_id
    d = torch.webgpu.default_stream()
    assert isinstance(d, torch.webgpu.Stream)
    assert d.stream_id == 0
    assert torch.webgpu.current_stream() == d
    assert torch.webgpu.Stream("webgpu:0").device == torch.device("webgpu", 0)
    assert "torch.webgpu.Stream" in repr(s1)


def test_set_stream_and_context_manager():
    s1, s2 = torch.webgpu.Stream(), torch.webgpu.Stream()
    with torch.webgpu.stream(s1) as entered:
        assert entered is s1
        assert torch.webgpu.current_stream() == s1
        # The generic API sees the same thread-local current stream.
        assert torch.accelerator.current_stream().stream_id == s1.stream_id
        with torch.webgpu.stream(s2):
            assert torch.webgpu.current_stream() == s2
        assert torch.webgpu.current_stream() == s1
        with torch.webgpu.stream(None):  # a no-op, as in torch.cuda
            assert torch.webgpu.current_stream() == s1
    assert torch.webgpu.current_stream() == torch.webgpu.default_stream()
    torch.webgpu.set_stream(s2)
    assert torch.webgpu.current_stream() == s2
    torch.accelerator.set_stream(s1)
    assert torch.webgpu.current_stream() == s1


def test_current_stream_is_per_thread():
    s = torch.webgpu.Stream()
    torch.webgpu.set_stream(s)
    seen = []
    t = threading.Thread(target=lambda: seen.append(torch.webgpu.current_stream().stream_id))
    t.start()
    t.join()
    assert seen == [0]
    assert torch.webgpu.current_stream() == s


def test_work_on_several_streams_runs_in_program_order():
    # In-place updates that alternate between streams: any reordering changes the result.
    s1, s2 = torch.webgpu.Stream(), torch.webgpu.Stream()
    x_cpu = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    x = x_cpu.to("webgpu")
    for i in range(8):
        stream = s1 if i % 2 == 0 else s2
        with torch.webgpu.stream(stream):
            x.mul_(1.5).add_(i)
            x_cpu.mul_(1.5).add_(i)
    assert_same(x, x_cpu)

    # The producer / consumer pattern of CUDA code: wait_stream and wait_event.
    a_cpu = torch.linspace(-2, 2, 64).reshape(8, 8)
    a = a_cpu.to("webgpu")
    with torch.webgpu.stream(s1):
        y = a @ a + 1
    s2.wait_stream(s1)
    with torch.webgpu.stream(s2):
        z = (y * 2).sum(dim=0)
    ev = s2.record_event()
    assert isinstance(ev, torch.webgpu.Event)
    torch.webgpu.default_stream().wait_event(ev)
    assert_same(z, ((a_cpu @ a_cpu + 1) * 2).sum(dim=0))


def test_event_query_and_synchronize():
    e = torch.webgpu.Event()
    assert e.query()  # never recorded: nothing to wait for (as CUDA)
    e.synchronize()
    x = _busy_work()
    e.record()
    state = e.query()  # non-blocking: either answer is right here
    assert isinstance(state, bool)
    e.synchronize()
    assert e.query()
    # query() does not wait: with work in flight it answers without finishing it.
    x2 = _busy_work(reps=12)
    e.record()
    t0 = time.perf_counter()
    e.query()
    t_query = time.perf_counter() - t0
    t0 = time.perf_counter()
    e.synchronize()
    t_sync = time.perf_counter() - t0
    assert e.query()
    assert t_query < 0.05 or t_query < t_sync
    ref = torch.linspace(-1, 1, 384 * 384).reshape(384, 384)
    r = ref
    for _ in range(6):
        r = torch.tanh(r @ ref)
    assert_same(x, r, rtol=1e-3, atol=1e-4)  # six chained 384-term float32 matmuls
    assert x2.shape == (384, 384)


def test_stream_query_and_synchronize():
    s = torch.webgpu.Stream()
    with torch.webgpu.stream(s):
        y = _busy_work()
    s.synchronize()
    assert s.query()
    assert torch.webgpu.default_stream().query()  # same queue: finished too
    assert y.isfinite().all().item()


def test_queue_reads_idle_after_a_wait():
    # Once the host has waited (synchronize, a read-back), the queue is known idle: queries
    # answer True at once, and an event recorded then is complete when recorded (CUDA too).
    y = _busy_work()
    torch.webgpu.synchronize()
    assert torch.webgpu.default_stream().query()
    assert torch.webgpu.current_stream().query()
    e = torch.webgpu.Event()
    e.record()
    assert e.query()
    z = (y + 1).sum()
    assert z.item() == pytest.approx(float((y.cpu() + 1).sum()), rel=1e-5)
    assert torch.webgpu.default_stream().query()
    assert torch.webgpu.Stream().query()


def test_elapsed_time_of_an_empty_stretch():
    start = torch.webgpu.Event(enable_timing=True)
    end = torch.webgpu.Event(enable_timing=True)
    torch.webgpu.synchronize()
    start.record()
    end.record()
    ms = start.elapsed_time(end)
    assert 0 <= ms < 50, ms


def test_elapsed_time_against_host_clock():
    start = torch.webgpu.Event(enable_timing=True)
    end = torch.webgpu.Event(enable_timing=True)
    torch.webgpu.synchronize()
    t0 = time.perf_counter()
    start.record()
    y = _busy_work(reps=8)
    t_end = time.perf_counter()
    end.record()
    end.synchronize()
    t1 = time.perf_counter()
    host_ms = (t1 - t0) * 1000
    ms = start.elapsed_time(end)
    assert isinstance(ms, float)
    assert 0 < ms <= host_ms + 0.5, (ms, host_ms)
    # The GPU's work ends inside end.record() (llvmpipe submits synchronously) or inside
    # end.synchronize() (asynchronous queues): the events span at least that stretch.
    assert ms >= 0.5 * (t1 - t_end) * 1000, (ms, host_ms)
    assert y.isfinite().all().item()
    # The reverse order gives the negated value, as on CUDA.
    assert end.elapsed_time(start) == pytest.approx(-ms)


def test_elapsed_time_errors():
    plain_a, plain_b = torch.webgpu.Event(), torch.webgpu.Event()
    plain_a.record()
    plain_b.record()
    plain_b.synchronize()
    with pytest.raises(RuntimeError, match="enable_timing=True"):
        plain_a.elapsed_time(plain_b)
    timed_a, timed_b = torch.webgpu.Event(enable_timing=True), torch.webgpu.Event(enable_timing=True)
    with pytest.raises(RuntimeError, match="recorded"):
        timed_a.elapsed_time(timed_b)
    timed_a.record()
    with pytest.raises(RuntimeError, match="recorded"):
        timed_a.elapsed_time(timed_b)
    timed_b.record()
    timed_b.synchronize()
    assert timed_a.elapsed_time(timed_b) >= 0


def test_generic_torch_stream_and_event():
    s = torch.Stream(device="webgpu")
    assert s.device.type == "webgpu"
    a_cpu = torch.arange(10, dtype=torch.float32)
    a = a_cpu.to("webgpu")
    start = torch.Event(device="webgpu", enable_timing=True)
    end = torch.Event(device="webgpu", enable_timing=True)
    with s:  # torch.Stream's own context manager goes through the device guard
        assert torch.webgpu.current_stream().stream_id == s.stream_id
        start.record(s)
        b = (a * 3).cumsum(0)
        end.record(s)
    assert torch.webgpu.current_stream().stream_id == 0
    end.synchronize()
    assert end.query() and s.query()
    assert start.elapsed_time(end) >= 0
    s.synchronize()
    assert_same(b, (a_cpu * 3).cumsum(0))
    # A torch.Event waited on by a torch.webgpu.Stream and the reverse.
    w = torch.webgpu.Stream()
    w.wait_event(end)
    torch.webgpu.Event().wait(s)
    ev = s.record_event()  # a plain torch.Event, recorded through torch.Stream
    assert type(ev) is torch.Event and ev.device == torch.device("webgpu", 0)
    assert ev.event_id != 0
    ev.synchronize()
    assert ev.query()
    # torch.accelerator's stream API.
    torch.accelerator.set_stream(s)
    assert torch.accelerator.current_stream() == s
    torch.accelerator.synchronize()
    torch.accelerator.set_stream(torch.webgpu.default_stream())


def test_streams_and_events_of_other_devices_are_refused():
    cpu_stream = _cpu_stream()
    with pytest.raises(RuntimeError, match="webgpu"):
        torch.webgpu.set_stream(cpu_stream)
    with pytest.raises(RuntimeError, match="webgpu"):
        torch.webgpu.stream(cpu_stream)
    with pytest.raises(RuntimeError):
        torch.webgpu.Event().record(cpu_stream)
    recorded = torch.webgpu.Event(enable_timing=True)
    recorded.record()
    with pytest.raises(RuntimeError):
        recorded.wait(cpu_stream)  # (an unrecorded event waits for nothing, as on CUDA)
    with pytest.raises(TypeError):
        recorded.elapsed_time(cpu_stream)
    with pytest.raises(TypeError):
        torch.webgpu.set_stream("not a stream")
    with pytest.raises(ValueError):
        torch.webgpu.current_stream("cpu")
    with pytest.raises(ValueError):
        torch.webgpu.Stream(device="webgpu:1")
    assert torch.webgpu.current_stream().stream_id == 0  # nothing was changed
