"""Graph replays on the submit thread (runtime/submit_worker.h): a replay returns before its
dispatches are encoded, so every later queue operation must wait for it. Eager work, host
uploads, read-backs, events, freed tensors and graph teardown right after a replay must see
the same results as with the replay run inline. The thread is opt-in
(TORCH_WEBGPU_ASYNC_REPLAY=1) and never used on Dawn's GL backends; CI runs these tests with it
on Vulkan (SwiftShader), and without it, where they check the inline path the same way."""
import os

import torch

import torch_webgpu  # noqa: F401
from conftest import DEVICE, run_python


def _async_replays():
    return torch_webgpu._C.dispatch_stats().get("async_replays", 0)


def _chain(x, w, n=24):
    # Many small dispatches, so a replay is still being encoded when replay() returns.
    y = x
    for i in range(n):
        y = torch.tanh(y @ w) * (1.0 + 0.01 * i) + x
    return y


def _capture(fn, *args):
    fn(*args)  # pipelines are built outside capture
    g = torch.webgpu.WebGPUGraph()
    with torch.webgpu.graph(g):
        out = fn(*args)
    return g, out


def test_property_says_where_replays_run():
    props = torch.webgpu.get_device_properties()
    gl = props.backend in ("opengl", "opengles")
    wanted = os.environ.get("TORCH_WEBGPU_ASYNC_REPLAY", "0") not in ("", "0", "false", "no")
    assert props.async_submits == (wanted and not gl)


def test_eager_work_and_uploads_right_after_replay_see_its_results(no_fallback):
    torch.manual_seed(0)
    w_cpu = torch.randn(32, 32) / 6
    x = torch.zeros(8, 32, device=DEVICE)
    w = w_cpu.to(DEVICE)
    g, out = _capture(_chain, x, w)
    before = _async_replays()
    x_cpu = torch.randn(8, 32)
    x.copy_(x_cpu.to(DEVICE))
    for step in range(6):
        g.replay()
        # Recorded right after replay() returned: must run after the replay's dispatches.
        feedback = out * 0.5
        # A host upload into the graph's input (a queue write) while the replay may still be
        # on the submit thread: it must land after the replay read the old input.
        expected = _chain(x_cpu, w_cpu)
        x_cpu = torch.randn(8, 32)
        x.copy_(x_cpu)
        torch.testing.assert_close(feedback.cpu(), expected * 0.5, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(out.cpu(), expected, rtol=1e-4, atol=1e-4)
    if torch.webgpu.get_device_properties().async_submits:
        assert _async_replays() - before == 6
    else:
        assert _async_replays() == 0


def test_non_blocking_reads_and_events_after_replay(no_fallback):
    torch.manual_seed(1)
    w_cpu = torch.randn(16, 16) / 4
    x_cpu = torch.randn(4, 16)
    x, w = x_cpu.to(DEVICE), w_cpu.to(DEVICE)
    g, out = _capture(_chain, x, w)
    expected = _chain(x_cpu, w_cpu)
    for _ in range(3):
        g.replay()
        host = torch.empty(4, 16)
        host.copy_(out, non_blocking=True)
        done = torch.webgpu.Event()
        done.record()
        done.synchronize()
        assert done.query()
        torch.testing.assert_close(host, expected, rtol=1e-4, atol=1e-4)
    # An event recorded right after a replay is not complete before the replay ran.
    g.replay()
    after = torch.webgpu.Event()
    after.record()
    after.synchronize()
    torch.testing.assert_close(out.cpu(), expected, rtol=1e-4, atol=1e-4)


def test_freed_tensors_and_graph_teardown_right_after_replay(no_fallback):
    torch.manual_seed(2)
    w_cpu = torch.randn(32, 32) / 6
    x_cpu = torch.randn(8, 32)
    x, w = x_cpu.to(DEVICE), w_cpu.to(DEVICE)
    expected = _chain(x_cpu, w_cpu)
    for _ in range(3):
        g, out = _capture(_chain, x, w)
        g.replay()
        result = out.clone()  # recorded after the replay
        # Eager scratch freed and its memory reused at once, while the replay may still be
        # on the submit thread.
        scratch = torch.full((8, 32), 7.0, device=DEVICE)
        del scratch
        reuse = torch.full((8, 32), 3.0, device=DEVICE)
        del g, out  # the graph goes while its replay may still be queued
        torch.testing.assert_close(result.cpu(), expected, rtol=1e-4, atol=1e-4)
        assert bool((reuse.cpu() == 3.0).all())
    torch.webgpu.synchronize()


def test_replays_inline_unless_asked():
    code = (
        "import torch, torch_webgpu\n"
        "x = torch.ones(4, 4, device='webgpu'); y = x * 2 + 1\n"
        "g = torch.webgpu.WebGPUGraph()\n"
        "with torch.webgpu.graph(g):\n"
        "    y = x * 2 + 1\n"
        "x.copy_(torch.full((4, 4), 3.0)); g.replay()\n"
        "assert bool((y.cpu() == 7).all())\n"
        "assert not torch.webgpu.get_device_properties().async_submits\n"
        "assert torch_webgpu._C.dispatch_stats()['async_replays'] == 0\n"
        "print('ok')\n")
    result = run_python(code, env={"TORCH_WEBGPU_ASYNC_REPLAY": "0"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("ok")
