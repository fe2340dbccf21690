"""Bad input raises PyTorch's exceptions (with PyTorch's messages where PyTorch has one),
and the device keeps working afterwards: mixed devices, unsupported dtypes, impossible
shapes, allocations beyond the device, and a lost device (in a subprocess)."""
import textwrap

import pytest
import torch

import torch_webgpu
from conftest import DEVICE, assert_same, make, run_python


def _still_works():
    x = torch.arange(6, dtype=torch.float32)
    assert_same(x.to(DEVICE) * 2 + 1, x * 2 + 1)
    assert torch.ones(3, device=DEVICE).add(1)[2].item() == 2.0


def _cpu_message(fn):
    with pytest.raises(Exception) as info:
        fn()
    return type(info.value), str(info.value)


def test_mixed_devices(no_fallback):
    a = torch.ones(3, device=DEVICE)
    b = torch.ones(3)
    for fn in (lambda: a + b, lambda: b + a, lambda: a * b, lambda: torch.maximum(a, b),
               lambda: torch.where(a > 0, a, b), lambda: a.add_(b), lambda: a == b,
               lambda: torch.add(a, a, out=torch.empty(3))):
        with pytest.raises(RuntimeError, match=r"(?i)device") as info:
            fn()
        assert "cpu" in str(info.value) and "webgpu" in str(info.value), str(info.value)
    # 0-dim CPU tensors mix with webgpu tensors like Python scalars.
    s = torch.tensor(2.0)
    assert_same(a + s, torch.full((3,), 3.0))
    assert_same(s * a, torch.full((3,), 2.0))
    assert_same(a.add_(s), torch.full((3,), 3.0))
    _still_works()


def test_mixed_devices_fallback_op(quiet_fallback):
    a = torch.ones(2, 3, device=DEVICE)
    for fn in (lambda: torch.mm(a, torch.ones(3, 2)), lambda: torch.mm(torch.ones(4, 2), a),
               lambda: torch.cat([a, torch.ones(2, 3)]), lambda: torch.cumsum(a, 0, out=torch.empty(2, 3)),
               lambda: torch.addmm(torch.ones(2, 2), a, a.t())):
        with pytest.raises(RuntimeError, match=r"Expected all tensors to be on the same device") as info:
            fn()
        assert "webgpu:0" in str(info.value) and "cpu" in str(info.value)
    # Index tensors may live on the CPU (as on CUDA), and 0-dim CPU tensors pass.
    x = torch.arange(10.0).to(DEVICE)
    assert_same(x[torch.tensor([1, 3])], torch.tensor([1.0, 3.0]))
    assert_same(torch.mm(a, torch.ones(3, 2, device=DEVICE)), torch.full((2, 2), 3.0))
    assert_same(torch.lerp(a, a * 3, torch.tensor(0.5)), torch.full((2, 3), 2.0))
    _still_works()


UNSUPPORTED = [torch.float8_e4m3fn, torch.float8_e5m2, torch.uint16, torch.uint32,
               torch.complex32]


@pytest.mark.parametrize("dtype", UNSUPPORTED, ids=str)
@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")
def test_unsupported_dtype(dtype):
    with pytest.raises((TypeError, RuntimeError, NotImplementedError)) as info:
        torch.empty(4, dtype=dtype, device=DEVICE)
    msg = str(info.value).lower()
    assert "webgpu" in msg and ("dtype" in msg or "not supported" in msg), msg
    with pytest.raises((TypeError, RuntimeError, NotImplementedError)) as info:
        torch.zeros(4).to(dtype).to(DEVICE)
    assert "webgpu" in str(info.value).lower()
    with pytest.raises((TypeError, RuntimeError, NotImplementedError)) as info:
        torch.zeros(4, device=DEVICE).to(dtype)
    assert "webgpu" in str(info.value).lower()
    _still_works()


@pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor")
def test_quantized_dtype():
    q = torch.quantize_per_tensor(torch.tensor([0.5, 1.0]), 0.1, 0, torch.qint8)
    for fn in (lambda: q.to(DEVICE), lambda: torch.empty(2, dtype=torch.qint8, device=DEVICE),
               lambda: torch._empty_affine_quantized([2], scale=0.1, zero_point=0,
                                                     dtype=torch.quint8, device=DEVICE)):
        with pytest.raises((TypeError, RuntimeError, NotImplementedError)) as info:
            fn()
        msg = str(info.value)
        assert "quantized" in msg.lower() and "WebGPU" in msg, msg
    _still_works()


def test_impossible_shapes(no_fallback):
    x = make((2, 3), torch.float32)
    d = x.to(DEVICE)
    cases = [
        lambda t: t.view(4, 4),
        lambda t: t.view(-1, 4),
        lambda t: t.t().view(6),
        lambda t: t.reshape(5),
        lambda t: t + t.reshape(3, 2),
        lambda t: t * t[:, :2],
        lambda t: torch.where(t > 0, t, t.reshape(3, 2)),
        lambda t: t.expand(3, 3),
        lambda t: t.as_strided((3, 3), (3, 1), 10**9),
        lambda t: t.add_(t.reshape(6, 1)),
        lambda t: t.permute(0, 0),
        lambda t: t.select(0, 5),
        lambda t: t.narrow(1, 2, 5),
    ]
    for fn in cases:
        cpu_type, cpu_msg = _cpu_message(lambda: fn(x.clone()))
        with pytest.raises(Exception) as info:
            fn(d.clone())
        assert type(info.value) is cpu_type, (cpu_msg, str(info.value))
        assert str(info.value) == cpu_msg, (cpu_msg, str(info.value))
    _still_works()


def test_bad_arguments(no_fallback):
    d = torch.ones(3, device=DEVICE)
    for fn in (lambda t: torch.div(t, t, rounding_mode="round"),
               lambda t: torch.nn.functional.gelu(t, approximate="fast"),
               lambda t: t.bool() - t.bool(),
               lambda t: -t.bool(),
               lambda t: torch.add(t.long(), t.long(), alpha=0.5),
               lambda t: t.fill_(torch.ones(2)),
               lambda t: t.long() ** -1,
               lambda t: t.item()):
        cpu_type, cpu_msg = _cpu_message(lambda: fn(torch.ones(3)))
        with pytest.raises(Exception) as info:
            fn(d.clone())
        assert type(info.value) is cpu_type, (cpu_msg, str(info.value))
    _still_works()


def test_allocation_beyond_device():
    torch.webgpu.synchronize()
    before = torch.webgpu.memory_allocated()
    with pytest.raises(torch.OutOfMemoryError, match="(?i)out of memory"):
        torch.empty(2**40, device=DEVICE)
    limit = torch.webgpu.get_device_properties().max_buffer_size
    with pytest.raises(torch.OutOfMemoryError, match="maxBufferSize"):
        torch.empty(limit + 1024, dtype=torch.uint8, device=DEVICE)
    with pytest.raises(torch.OutOfMemoryError):
        torch.empty(limit // 4 + 1, dtype=torch.float32, device=DEVICE)
    with pytest.raises(torch.OutOfMemoryError):
        torch.ones(2**38, dtype=torch.int64, device=DEVICE)
    with pytest.raises(torch.OutOfMemoryError):
        torch.zeros(4).to(DEVICE).resize_(2**40)
    assert torch.webgpu.memory_allocated() == before
    # The next allocations work.
    _still_works()
    y = torch.empty(1 << 20, dtype=torch.uint8, device=DEVICE)
    assert y.numel() == 1 << 20
    del y
    assert torch.webgpu.memory_allocated() == before


def test_oom_is_runtime_error_subclass():
    # Code catching RuntimeError (as for CUDA) keeps working.
    with pytest.raises(RuntimeError):
        torch.empty(2**41, device=DEVICE)
    _still_works()


def test_device_loss_in_subprocess():
    code = textwrap.dedent("""
        import sys, time
        import torch, torch_webgpu
        x = torch.ones(4, device="webgpu") * 2
        assert x.cpu().tolist() == [2.0] * 4
        torch_webgpu._C._simulate_device_loss()
        results = []
        for name, fn in [
            ("op", lambda: (x + 1).cpu()),
            ("alloc", lambda: torch.empty(16, device="webgpu")),
            ("copy", lambda: torch.ones(3).to("webgpu").cpu()),
            ("sync", lambda: torch.webgpu.synchronize()),
            ("item", lambda: x[0].item()),
        ]:
            start = time.monotonic()
            try:
                fn()
                results.append(f"{name}:noerror")
            except RuntimeError as e:
                results.append(f"{name}:RuntimeError:{'lost' in str(e)}")
            except Exception as e:
                results.append(f"{name}:{type(e).__name__}")
            assert time.monotonic() - start < 30, name
        # CPU work is unaffected.
        assert (torch.ones(2) + 1).tolist() == [2.0, 2.0]
        print("RESULTS", ";".join(results))
    """)
    proc = run_python(code, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [l for l in proc.stdout.splitlines() if l.startswith("RESULTS")][0]
    results = dict(item.split(":", 1) for item in line.split()[1].split(";"))
    for name in ("op", "alloc", "copy", "sync", "item"):
        assert results[name] == "RuntimeError:True", (name, results)


def test_errors_do_not_poison_batches(no_fallback):
    # An error raised between recorded kernels leaves earlier and later work intact.
    a = torch.arange(8, dtype=torch.float32).to(DEVICE)
    b = a * 2
    with pytest.raises(RuntimeError):
        b + torch.ones(3, device=DEVICE)
    with pytest.raises(NotImplementedError):
        b.bool() << b.bool()
    c = b + 1
    assert_same(c, torch.arange(8, dtype=torch.float32) * 2 + 1)
    assert torch_webgpu._C.is_available()
