"""torch.webgpu.profiler: every dispatch is recorded with the ATen op that issued it, its
kernel and a time; the table, the key averages and the Chrome trace agree with the
records; profiling leaves results unchanged and the device usable, also after errors.
On llvmpipe (no timestamp-query) the times are host times, and everything says so."""
import json
import textwrap

import pytest
import torch
import torch.nn.functional as F

import torch_webgpu
from conftest import DEVICE, assert_same, make, run_python

profiler = torch.webgpu.profiler


def _has_timestamps():
    return torch.webgpu.get_device_properties().timestamp_query


def _dispatches():
    return torch_webgpu._C.dispatch_stats()["dispatches"]


def _workload(a, b, w, bias, c):
    """mm, addmm (linear with bias), softmax and three adds."""
    y = torch.mm(a, b)
    z = F.linear(y, w, bias)
    s = torch.softmax(z, dim=-1)
    for _ in range(3):
        s = s + c
    return s


def _inputs():
    return (make((8, 16), torch.float32, seed=1), make((16, 12), torch.float32, seed=2),
            make((5, 12), torch.float32, seed=3), make((5,), torch.float32, seed=4),
            make((8, 5), torch.float32, seed=5))


def _ops(prof):
    return {e.op for e in prof.events()}


def test_records_ops_kernels_and_counts(no_fallback):
    args = _inputs()
    dargs = [t.to(DEVICE) for t in args]
    torch.webgpu.synchronize()
    before = _dispatches()
    with profiler.profile() as prof:
        out = _workload(*dargs)
    issued = _dispatches() - before
    assert_same(out, _workload(*args))

    events = prof.events()
    assert len(events) == issued > 0  # every dispatch of the block, nothing else
    assert {"aten::mm", "aten::addmm", "aten::_softmax", "aten::add"} <= _ops(prof), _ops(prof)
    for e in events:
        assert e.kernel and e.duration_us > 0 and e.start_us >= 0, e
    # Each add is one elementwise dispatch: three calls, one kernel.
    add_rows = [r for r in prof.key_averages() if r.op == "aten::add"]
    assert len(add_rows) == 1 and add_rows[0].calls == 3, add_rows
    rows = prof.key_averages()
    assert sum(r.calls for r in rows) == len(events)
    assert sum(r.total_us for r in rows) == pytest.approx(prof.total_us)
    assert sum(r.share for r in rows) == pytest.approx(1.0)
    for r in rows:
        assert r.mean_us == pytest.approx(r.total_us / r.calls)
    assert rows == sorted(rows, key=lambda r: -r.total_us)


def test_timing_mode_is_stated():
    x = torch.ones(64, device=DEVICE)
    with profiler.profile() as prof:
        (x * 3).sum()
    expected = "gpu" if _has_timestamps() else "host"
    assert prof.timing == expected
    text = prof.table()
    assert ("GPU time from timestamp queries" in text) == (expected == "gpu")
    assert ("host time" in text) == (expected == "host")


def test_host_timing_everywhere():
    """Host times are intervals inside the profiled block that do not overlap (each
    dispatch is submitted and waited for alone)."""
    x = make((256,), torch.float32).to(DEVICE)
    torch.webgpu.synchronize()
    with profiler.profile(timing="host") as prof:
        y = x
        for _ in range(5):
            y = torch.exp(y * 0.1)
    assert prof.timing == "host"
    events = prof.events()
    assert len(events) == 10
    assert [e.op for e in events] == ["aten::mul", "aten::exp"] * 5
    for prev, nxt in zip(events, events[1:]):
        assert prev.end_us <= nxt.start_us
    ops = {h.name: h for h in prof.host_events()}
    assert "aten::exp" in ops and "aten::mul" in ops
    last = max(h.end_us for h in prof.host_events())
    assert events[-1].end_us <= last + 1e3  # the last dispatch ends with (or just after) its op
    assert_same(y, torch.exp(torch.exp(torch.exp(torch.exp(torch.exp(x.cpu() * 0.1) * 0.1) * 0.1)
                                       * 0.1) * 0.1))


def test_gpu_timing_request():
    x = torch.ones(16, device=DEVICE)
    if _has_timestamps():
        with profiler.profile(timing="gpu") as prof:
            x + 1
        assert prof.timing == "gpu" and len(prof.events()) == 1
        assert prof.events()[0].duration_us > 0
    else:
        with pytest.raises(RuntimeError, match="timestamp-query"):
            with profiler.profile(timing="gpu"):
                x + 1
        assert not torch_webgpu._C._profiler_active()
    with pytest.raises(ValueError, match="timing"):
        profiler.profile(timing="cuda")


def test_table_rows():
    a = make((4, 6), torch.float32).to(DEVICE)
    with profiler.profile() as prof:
        b = torch.softmax(a, dim=1) + a
        torch.mm(b, b.t())
    text = prof.table(sort_by="gpu_time", row_limit=50, kernel_width=400)
    for r in prof.key_averages():
        line = next(l for l in text.splitlines() if r.kernel in l and l.startswith(r.op))
        fields = line.split()
        assert int(fields[-4]) == r.calls
        assert float(fields[-3]) == pytest.approx(r.total_us, abs=0.06)
        assert fields[-1] == f"{100 * r.share:.1f}%"
    assert "aten::_softmax" in text and "aten::mm" in text and "aten::add" in text
    limited = prof.table(row_limit=1).splitlines()
    assert len(limited) == 6  # title, header, rule, one row, rule, total
    by_calls = prof.table(sort_by="calls", kernel_width=400)
    assert by_calls.index(prof.key_averages()[0].kernel) > 0
    with pytest.raises(ValueError, match="sort_by"):
        prof.table(sort_by="flops")


def test_chrome_trace(tmp_path):
    a = make((32, 32), torch.float32).to(DEVICE)
    with profiler.profile() as prof:
        torch.relu(torch.mm(a, a) - 1)
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    events = trace["traceEvents"]
    kernels = [e for e in events if e["ph"] == "X" and e.get("cat") == "kernel"]
    host_ops = [e for e in events if e["ph"] == "X" and e.get("cat") == "aten_op"]
    assert len(kernels) == len(prof.events())
    assert {e["args"]["op"] for e in kernels} == _ops(prof)
    assert len({(e["pid"], e["tid"]) for e in kernels}) == 1  # one device track
    assert {"aten::mm", "aten::relu", "aten::sub"} <= {e["name"] for e in host_ops}
    assert {(e["pid"]) for e in host_ops}.isdisjoint({e["pid"] for e in kernels})
    for e in kernels + host_ops:
        assert isinstance(e["ts"], (int, float)) and isinstance(e["dur"], (int, float))
        assert e["ts"] >= 0 and e["dur"] >= 0
    assert all(e["dur"] > 0 for e in kernels)
    names = [e for e in events if e["ph"] == "M" and e["name"] == "thread_name"]
    device_track = next(e for e in names if e["pid"] == kernels[0]["pid"])
    stated = "timestamp" if prof.timing == "gpu" else "host time"
    assert stated in device_track["args"]["name"] and stated in trace["otherData"]["timing"]


def test_nested_profiles():
    x = make((100,), torch.float32).to(DEVICE)
    with profiler.profile() as outer:
        y = x * 2
        with profiler.profile() as inner:
            z = y - 1
        w = z.abs()
    assert [e.op for e in inner.events()] == ["aten::sub"]
    assert [e.op for e in outer.events()] == ["aten::mul", "aten::sub", "aten::abs"]
    assert inner.timing == outer.timing
    assert not torch_webgpu._C._profiler_active()
    assert_same(w, (x.cpu() * 2 - 1).abs())
    running = profiler.profile()
    with running:
        with pytest.raises(RuntimeError, match="already running"):
            running.__enter__()


def test_profile_without_device_work(tmp_path):
    with profiler.profile() as prof:
        torch.ones(3) + 1  # CPU only
    assert prof.events() == [] and prof.total_us == 0 and prof.key_averages() == []
    assert "0 dispatches" in prof.table()
    prof.export_chrome_trace(str(tmp_path / "empty.json"))
    trace = json.loads((tmp_path / "empty.json").read_text())
    assert not [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
    with profiler.profile() as idle:
        pass
    assert idle.events() == []


def test_results_match_unprofiled_and_cpu(no_fallback):
    args = _inputs()
    dargs = [t.to(DEVICE) for t in args]
    plain = _workload(*dargs)
    with profiler.profile():
        profiled = _workload(*dargs)
    with profiler.profile(timing="host"):
        hosted = _workload(*dargs)
    expected = _workload(*args)
    assert_same(plain, expected)
    assert_same(profiled, plain.cpu(), exact=True)
    assert_same(hosted, plain.cpu(), exact=True)


def test_backward_ops_are_named():
    """Autograd runs backward on its own thread: the op names still reach the records."""
    a = make((6, 4), torch.float32).to(DEVICE).requires_grad_()
    b = make((4, 3), torch.float32, seed=1).to(DEVICE).requires_grad_()
    with profiler.profile() as prof:
        torch.mm(a, b).sum().backward()
    ops = [e.op for e in prof.events()]
    assert ops.count("aten::mm") >= 3, ops  # forward and the two gradients
    assert all(ops), ops
    ca, cb = a.detach().cpu().requires_grad_(), b.detach().cpu().requires_grad_()
    torch.mm(ca, cb).sum().backward()
    assert_same(a.grad, ca.grad)
    assert_same(b.grad, cb.grad)


def test_exception_inside_block_turns_profiler_off():
    x = torch.ones(4, device=DEVICE)
    with pytest.raises(ValueError, match="inside"):
        with profiler.profile():
            x + 1
            raise ValueError("inside the block")
    assert not torch_webgpu._C._profiler_active()
    m = torch.ones(2, 3, device=DEVICE)
    with pytest.raises(RuntimeError, match="shapes cannot be multiplied"):
        with profiler.profile() as prof:
            y = x * 5
            torch.mm(m, m)
    assert not torch_webgpu._C._profiler_active()
    assert [e.op for e in prof.events()] == ["aten::mul"]
    assert_same(y, torch.full((4,), 5.0))
    assert_same(x * 2 + 1, torch.full((4,), 3.0))


def test_batching_returns_after_profiling():
    """Profiling off: dispatches batch again into one submit (the profiler costs nothing)."""
    x = torch.ones(8, device=DEVICE)
    with profiler.profile():
        x + 1
    torch.webgpu.synchronize()
    stats = torch_webgpu._C.dispatch_stats()
    y = x
    for _ in range(20):
        y = y + 1
    torch.webgpu.synchronize()
    after = torch_webgpu._C.dispatch_stats()
    assert after["dispatches"] - stats["dispatches"] == 20
    assert after["submits"] - stats["submits"] <= 2
    assert_same(y, torch.full((8,), 21.0))


def test_device_loss_inside_block_leaves_profiler_off():
    code = textwrap.dedent("""
        import torch, torch_webgpu
        x = torch.ones(4, device="webgpu")
        try:
            with torch.webgpu.profiler.profile():
                y = x + 1
                torch_webgpu._C._simulate_device_loss()
                (y * 2).cpu()
        except RuntimeError as e:
            print("raised:", "lost" in str(e))
        print("active:", torch_webgpu._C._profiler_active())
    """)
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert "raised: True" in result.stdout and "active: False" in result.stdout, result.stdout


def test_torch_profiler_shows_kernels(tmp_path):
    """torch.profiler with ProfilerActivity.PrivateUse1 lists our kernels with device time
    (where the Kineto plugin was built: torch wheels with PyTorch's PrivateUse1 profiler
    registry); a CPU-only profile leaves the device profiler alone."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    a = make((16, 16), torch.float32).to(DEVICE)
    with torch_profile(activities=[ProfilerActivity.CPU]) as cpu_only:
        assert not torch_webgpu._C._profiler_active()
        (a * 2).cpu()
    assert any(e.key == "aten::mul" for e in cpu_only.key_averages())

    with torch_profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        out = torch.softmax(a @ a, dim=0) + 1
        out.cpu()
    assert not torch_webgpu._C._profiler_active()
    assert_same(out, torch.softmax(a.cpu() @ a.cpu(), dim=0) + 1)
    rows = {e.key: e for e in prof.key_averages()}
    assert "aten::mm" in rows and "aten::_softmax" in rows
    kernel_rows = [e for key, e in rows.items() if key.startswith(("gemm", "softmax", "ew:add"))]
    if not torch_webgpu._C._profiler_kineto_plugin:
        assert kernel_rows == []
        return
    assert len(kernel_rows) == 3, sorted(rows)
    for e in kernel_rows:
        assert e.count == 1 and e.self_device_time_total > 0, e
    path = tmp_path / "torch_trace.json"
    prof.export_chrome_trace(str(path))
    kernels = [e for e in json.loads(path.read_text())["traceEvents"] if e.get("cat") == "kernel"]
    assert sorted(e["args"]["aten_op"] for e in kernels) == ["aten::_softmax", "aten::add",
                                                             "aten::mm"]
    assert all(e["dur"] > 0 for e in kernels)


def test_graph_replays_are_profiled(no_fallback):
    """A replayed graph's dispatches are timed like eager ones (one record each, under
    webgpu::graph_replay, with the captured kernels' names), and its results are unchanged."""
    args = _inputs()
    dargs = [t.to(DEVICE) for t in args]
    _workload(*dargs)  # warm-up: pipelines exist before the capture
    g = torch.webgpu.WebGPUGraph()
    with torch.webgpu.graph(g):
        out = _workload(*dargs)
    g.replay()
    torch.webgpu.synchronize()
    first = out.cpu()
    with profiler.profile() as prof:
        g.replay()
        torch.webgpu.synchronize()
    events = prof.events()
    assert len(events) == g.num_dispatches() > 0
    assert {e.op for e in events} == {"webgpu::graph_replay"}
    for e in events:
        assert e.kernel and e.duration_us > 0, e
    assert_same(out, first, exact=True)
    assert_same(out, _workload(*args))
    g.replay()  # and unprofiled again afterwards
    torch.webgpu.synchronize()
    assert_same(out, first, exact=True)
