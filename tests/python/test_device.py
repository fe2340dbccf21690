"""The webgpu device: registration, torch.webgpu.* (shaped like torch.cuda), the device
guard, torch.accelerator memory APIs, memory statistics and random number generation."""
import gc

import pytest
import torch

import torch_webgpu
from conftest import assert_same, run_python


def test_hello_print():
    x = torch.tensor([1.0, 2.0, 3.0], device="webgpu") * 2
    assert repr(x) == "tensor([2., 4., 6.], device='webgpu:0')"
    assert str(x) == "tensor([2., 4., 6.], device='webgpu:0')"


def test_print_other_dtypes():
    x = torch.tensor([1, -2, 3], device="webgpu")
    assert repr(x) == "tensor([ 1, -2,  3], device='webgpu:0')"
    h = torch.tensor([0.5, 1.5], dtype=torch.float16, device="webgpu")
    assert repr(h) == "tensor([0.5000, 1.5000], device='webgpu:0', dtype=torch.float16)"


def test_tensor_and_module_methods():
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    w = t.webgpu()
    assert w.is_webgpu and not t.is_webgpu
    assert w.device == torch.device("webgpu", 0)
    assert w.device.type == "webgpu"
    assert_same(w, t, exact=True)
    assert torch.equal(w.cpu(), t)

    m = torch.nn.Linear(3, 2)
    ref = [p.detach().clone() for p in m.parameters()]
    out = m.webgpu()
    assert out is m
    for p, r in zip(m.parameters(), ref):
        assert p.is_webgpu
        assert torch.equal(p.cpu(), r)


def test_device_objects_and_guard():
    d = torch.device("webgpu:0")
    assert d.type == "webgpu" and d.index == 0
    x = torch.ones(2, device=d)
    assert x.device == d
    y = torch.ones(2, device="webgpu")
    assert y.device == d  # a bare "webgpu" resolves to the current device, index 0
    with torch.device("webgpu"):
        z = torch.zeros(3)
    assert z.device == d
    assert torch.webgpu.current_device() == 0
    torch.webgpu.set_device(0)
    torch.webgpu.set_device("webgpu:0")
    torch.webgpu.set_device(torch.device("webgpu:0"))


def test_invalid_device_index():
    with pytest.raises(RuntimeError, match="device"):
        torch.ones(2, device="webgpu:1")
    with pytest.raises((RuntimeError, ValueError)):
        torch.webgpu.set_device(1)
    with pytest.raises((RuntimeError, ValueError)):
        torch.webgpu.memory_allocated("webgpu:1")
    with pytest.raises(RuntimeError, match="invalid device"):
        torch.ones(2).to("webgpu:1")
    if torch.accelerator.current_accelerator().type == "webgpu":  # beside CUDA, CUDA's
        with pytest.raises(RuntimeError, match="invalid device"):
            torch.accelerator.set_device_index(1)
        with pytest.raises(RuntimeError, match="invalid device"):
            torch.accelerator.memory_allocated(1)
        torch.accelerator.set_device_index(0)
    # The device still works.
    assert_same(torch.ones(2, device="webgpu") + 1, torch.full((2,), 2.0))


def test_generator_exists(quiet_fallback):
    g = torch.Generator(device="webgpu")
    assert g.device.type == "webgpu"
    g.manual_seed(123)
    assert g.initial_seed() == 123
    a = torch.randn(5, device="webgpu", generator=g)
    g.manual_seed(123)
    b = torch.randn(5, device="webgpu", generator=g)
    assert_same(a, b.cpu(), exact=True)
    # Native random kernels draw from the device's own (Philox) stream: reproducible per
    # seed, but not the CPU generator's numbers.
    c = torch.randn(5, device="webgpu", generator=torch.Generator(device="webgpu").manual_seed(124))
    assert not torch.equal(a.cpu(), c.cpu())


def test_device_module_functions():
    w = torch.webgpu
    assert w is torch_webgpu._device_module
    assert w.is_available() is True
    assert torch_webgpu.is_available() is True
    assert w.device_count() == 1
    assert torch.webgpu.current_device() == 0
    torch.ones(1, device="webgpu")
    assert w.is_initialized() is True
    w.synchronize()
    w.synchronize(0)
    w.synchronize("webgpu:0")
    name = w.get_device_name()
    assert isinstance(name, str) and name
    props = w.get_device_properties()
    assert props.name == name
    assert props.max_buffer_size >= props.max_storage_buffer_binding_size > 0
    assert props.max_compute_invocations_per_workgroup >= 256
    assert w.get_device_properties(0) == props


def test_accelerator_api():
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator() == torch.device("webgpu")
    assert torch.accelerator.device_count() == 1
    assert torch.accelerator.current_device_index() == 0
    torch.accelerator.synchronize()


def _alloc_floats(n):
    return torch.empty(n, dtype=torch.float32, device="webgpu")


def test_memory_stats_move(no_gc):
    torch.webgpu.synchronize()
    torch.webgpu.empty_cache()
    base_alloc = torch.webgpu.memory_allocated()
    base_reserved = torch.webgpu.memory_reserved()
    assert base_reserved >= base_alloc >= 0

    x = _alloc_floats(1 << 18)  # 1 MiB
    after = torch.webgpu.memory_allocated()
    assert after - base_alloc >= x.nbytes
    assert torch.webgpu.memory_reserved() >= after
    assert torch.webgpu.max_memory_allocated() >= after

    del x
    assert torch.webgpu.memory_allocated() == base_alloc
    # The freed buffer stays cached until empty_cache.
    cached = torch.webgpu.memory_reserved()
    assert cached >= base_reserved + (1 << 20)
    torch.webgpu.empty_cache()
    assert torch.webgpu.memory_reserved() == base_reserved

    torch.webgpu.reset_peak_memory_stats()
    assert torch.webgpu.max_memory_allocated() == torch.webgpu.memory_allocated()
    y = _alloc_floats(1 << 16)
    peak = torch.webgpu.max_memory_allocated()
    assert peak >= base_alloc + y.nbytes
    del y
    assert torch.webgpu.max_memory_allocated() == peak  # the peak stays
    torch.webgpu.reset_peak_memory_stats()
    assert torch.webgpu.max_memory_allocated() == torch.webgpu.memory_allocated()


def test_accelerator_memory_api():
    acc = torch.accelerator
    for name in ("memory_allocated", "max_memory_allocated", "memory_reserved",
                 "max_memory_reserved", "memory_stats", "reset_peak_memory_stats",
                 "empty_cache"):
        assert hasattr(acc, name), name
    gc.collect()  # tensors of earlier tests held in reference cycles must not free mid-test
    torch.webgpu.empty_cache()
    base = acc.memory_allocated()
    assert base == torch.webgpu.memory_allocated()
    x = _alloc_floats(1 << 16)
    assert acc.memory_allocated() == torch.webgpu.memory_allocated() >= base + x.nbytes
    assert acc.max_memory_allocated() >= acc.memory_allocated()
    assert acc.memory_reserved() == torch.webgpu.memory_reserved() >= acc.memory_allocated()
    stats = acc.memory_stats()
    assert stats["allocated_bytes.all.current"] == acc.memory_allocated()
    assert stats["reserved_bytes.all.current"] == acc.memory_reserved()
    assert stats["allocation.all.current"] >= 1
    assert stats["allocation.all.peak"] >= stats["allocation.all.current"]
    assert stats["segment.all.peak"] >= stats["segment.all.current"]
    assert stats["requested_bytes.all.current"] <= stats["allocated_bytes.all.current"]
    assert stats["requested_bytes.all.peak"] >= stats["requested_bytes.all.current"]
    del x
    assert acc.memory_allocated() == base
    acc.reset_peak_memory_stats()
    assert acc.max_memory_allocated() == acc.memory_allocated()
    acc.empty_cache()
    assert acc.memory_reserved() == torch.webgpu.memory_reserved()


def test_memory_views_share_storage():
    x = _alloc_floats(4096)
    before = torch.webgpu.memory_allocated()
    v = x[10:20].view(2, 5)
    assert torch.webgpu.memory_allocated() == before
    assert v.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    assert v.data_ptr() == x.data_ptr() + 10 * 4


def test_manual_seed_reproduces(quiet_fallback):
    torch.webgpu.manual_seed(1234)
    a = torch.randn(16, device="webgpu")
    torch.webgpu.manual_seed(1234)
    b = torch.randn(16, device="webgpu")
    assert_same(a, b.cpu(), exact=True)
    torch.webgpu.manual_seed_all(99)
    c = torch.randn(16, device="webgpu")
    assert not torch.equal(a.cpu(), c.cpu())
    torch.webgpu.manual_seed_all(1234)
    assert_same(torch.randn(16, device="webgpu"), a.cpu(), exact=True)
    # torch.manual_seed seeds every device's generator, webgpu included.
    torch.manual_seed(7)
    d = torch.randn(8, device="webgpu")
    torch.manual_seed(7)
    assert_same(torch.randn(8, device="webgpu"), d.cpu(), exact=True)
    assert torch.webgpu.initial_seed() == 7


def test_rng_state_save_restore(quiet_fallback):
    torch.webgpu.manual_seed(5)
    torch.randn(3, device="webgpu")
    state = torch.webgpu.get_rng_state()
    assert isinstance(state, torch.Tensor) and state.dtype == torch.uint8 and state.numel() > 0
    a = torch.randn(10, device="webgpu")
    u = torch.rand(4, device="webgpu")
    torch.webgpu.set_rng_state(state)
    assert_same(torch.randn(10, device="webgpu"), a.cpu(), exact=True)
    assert_same(torch.rand(4, device="webgpu"), u.cpu(), exact=True)
    # Also with a webgpu state tensor, and through the *_all variants.
    states = torch.webgpu.get_rng_state_all()
    b = torch.randn(6, device="webgpu")
    torch.webgpu.set_rng_state_all(states)
    assert_same(torch.randn(6, device="webgpu"), b.cpu(), exact=True)
    torch.webgpu.set_rng_state(states[0].to("webgpu"))
    assert_same(torch.randn(6, device="webgpu"), b.cpu(), exact=True)


def test_fork_rng(quiet_fallback):
    torch.webgpu.manual_seed(3)
    with torch.random.fork_rng(devices=[0], device_type="webgpu"):
        a = torch.randn(4, device="webgpu")
    b = torch.randn(4, device="webgpu")
    assert_same(b, a.cpu(), exact=True)


def test_ops_from_several_threads():
    # Autograd runs backward on its own thread; the GL backends' context must follow.
    import threading

    x = torch.arange(64, dtype=torch.float32)
    d = x.to("webgpu")
    results, errors = {}, []

    def work(i):
        try:
            results[i] = ((d * (i + 1)) + i).cpu()
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for i in range(4):
        assert torch.equal(results[i], x * (i + 1) + i)
    assert torch.equal((d + 1).cpu(), x + 1)  # and the main thread still works


def test_bind_groups_are_cached_per_buffer_set():
    # An op run again on the same tensors (same buffers, windows and uniform arena) reuses
    # its bind group; new output buffers make new ones. dispatch_stats counts the misses.
    from torch_webgpu import _C

    x = torch.randn(64, device="webgpu")
    out = torch.empty(64, device="webgpu")
    torch.add(x, 1.0, out=out)
    before = _C.dispatch_stats()["bind_groups_made"]
    for _ in range(5):
        torch.add(x, 1.0, out=out)
    torch.webgpu.synchronize()
    assert _C.dispatch_stats()["bind_groups_made"] == before
    torch.testing.assert_close(out.cpu(), x.cpu() + 1.0)


def test_eager_flush_after_a_time_submits_open_work():
    # TORCH_WEBGPU_EAGER_FLUSH_US: a batch open for longer than that goes out at the next
    # dispatch. Without it, 20 dispatches with pauses stay in one open batch; with 1 us (every
    # pause longer) each dispatch submits the one before. _set_eager_batches switches it in
    # process; results are the same either way.
    code = (
        "import time, torch, torch_webgpu\n"
        "from torch_webgpu import _C\n"
        "def run():\n"
        "    ys = [torch.zeros(16, device='webgpu')]\n"
        "    ys[0].cpu()\n"
        "    before = _C.dispatch_stats()['submits']\n"
        "    for i in range(20):\n"
        "        ys.append(ys[-1] + 1.0)\n"
        "        time.sleep(0.001)\n"
        "    middle = _C.dispatch_stats()['submits'] - before\n"
        "    assert ys[-1].cpu().tolist() == [20.0] * 16, ys[-1].cpu()\n"
        "    return middle\n"
        "first = run()\n"
        "_C._set_eager_batches(256, 0, 0)\n"
        "second = run()\n"
        "_C._set_eager_batches(256, 0, 1)\n"
        "print(first, second, run())\n")
    result = run_python(code, env={"TORCH_WEBGPU_EAGER_FLUSH_US": "1"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-3:] == ["19", "0", "19"], result.stdout


def test_waits_poll_then_block_with_the_same_results():
    # TORCH_WEBGPU_SPIN_WAIT_US: a wait polls the queue that long, then blocks. CPU adapters
    # (here) default to 0 (their threads run the work); the variable and the in-process
    # switch set it. Read-backs return the same bytes whether a wait ends polling (a long
    # spin), blocking (a 1 us spin, shorter than the work) or blocks at once.
    code = (
        "import torch, torch_webgpu\n"
        "from torch_webgpu import _C\n"
        "first = _C._set_spin_wait_us(5000)\n"
        "a = torch.randn(256, 256, generator=torch.Generator().manual_seed(0))\n"
        "want = (a @ a @ a).sum(0)\n"
        "for spin in (5000, 1, 0):\n"
        "    _C._set_spin_wait_us(spin)\n"
        "    waits = _C.dispatch_stats()['host_waits']\n"
        "    x = a.to('webgpu')\n"
        "    got = (x @ x @ x).sum(0).cpu()\n"
        "    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-2)\n"
        "    torch.webgpu.synchronize()\n"
        "    assert _C.dispatch_stats()['host_waits'] >= waits + 2\n"
        "print(first, _C._set_spin_wait_us(0))\n")
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-2:] == ["0", "0"], result.stdout
    result = run_python(code, env={"TORCH_WEBGPU_SPIN_WAIT_US": "250"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-2:] == ["250", "0"], result.stdout


def test_eager_batches_start_small_after_a_read_back_and_double():
    # After a read-back the GPU is idle: the first submit carries EAGER_FIRST_BATCH
    # dispatches, the next twice as many, up to TORCH_WEBGPU_MAX_BATCH.
    code = (
        "import torch, torch_webgpu\n"
        "from torch_webgpu import _C\n"
        "x = torch.zeros(16, device='webgpu')\n"
        "ys = [x + 1.0]\n"
        "x.cpu()\n"
        "before = _C.dispatch_stats()['submits']\n"
        "for i in range(20):\n"
        "    ys.append(ys[-1] + 1.0)\n"
        "middle = _C.dispatch_stats()['submits'] - before\n"
        "assert ys[-1].cpu().tolist() == [21.0] * 16, ys[-1].cpu()\n"
        "print(middle)\n")
    result = run_python(code, env={"TORCH_WEBGPU_EAGER_FIRST_BATCH": "4"})
    assert result.returncode == 0, result.stderr
    # 20 dispatches: batches of 4 and 8 submitted, 8 still open.
    assert result.stdout.split()[-1] == "2"


def test_sync_debug_mode_reports_host_waits_as_cuda_does():
    """torch.webgpu.set_sync_debug_mode: read-backs (.item(), .cpu(), nonzero) warn or
    raise; synchronize() and non_blocking copies do not; the mode is per process."""
    import warnings

    x = torch.randn(16).to("webgpu")
    assert torch.webgpu.get_sync_debug_mode() == 0
    try:
        torch.webgpu.set_sync_debug_mode("warn")
        assert torch.webgpu.get_sync_debug_mode() == 1
        with warnings.catch_warnings(record=True) as records:
            warnings.simplefilter("always")
            value = (x * 2).sum().item()
            torch.webgpu.synchronize()
            host = torch.empty(16)
            host.copy_(x, non_blocking=True)
            torch.webgpu.synchronize()
        messages = [str(r.message) for r in records if "synchronizing WebGPU" in str(r.message)]
        assert len(messages) == 1
        assert value == pytest.approx(float(x.cpu().sum()) * 2, rel=1e-5)
        assert torch.equal(host, x.cpu())
        torch.webgpu.set_sync_debug_mode("error")
        for op in (lambda: x.cpu(), lambda: x.nonzero(), lambda: x[0].item()):
            with pytest.raises(RuntimeError, match="called a synchronizing WebGPU operation"):
                op()
        with pytest.raises(RuntimeError, match="invalid value of debug_mode"):
            torch.webgpu.set_sync_debug_mode("loud")
        with pytest.raises(RuntimeError, match="invalid value of debug_mode"):
            torch.webgpu.set_sync_debug_mode(3)
    finally:
        torch.webgpu.set_sync_debug_mode("default")
    assert torch.equal(x.cpu(), x.cpu())  # read-backs work again
