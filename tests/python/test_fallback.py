"""The boxed CPU fallback for ops without a native kernel: correct results (functional,
in-place, out=, view-returning), one warning per op, TORCH_WEBGPU_FALLBACK_WARN=0 and
TORCH_WEBGPU_DISABLE_CPU_FALLBACK=1."""
import warnings

import pytest
import torch

import torch_webgpu
from conftest import DEVICE, assert_same, fallback_warnings, make


def _record(fn):
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        result = fn()
    return result, fallback_warnings(rec)


# Calls with no native kernel: float64 math (the device only stores float64), the general
# eigenproblem, a float64 FFT.
def test_fallback_ops_work_and_warn_once(fresh_fallback_warnings):
    x = make((4, 4), torch.float32, seed=1)
    sym = x + x.T
    dx, dsym = x.to(DEVICE), sym.to(DEVICE)

    r, w = _record(lambda: torch.cos(dx.double()))
    assert_same(r, torch.cos(x.double()))
    assert len(w) == 1 and "aten::cos.out" in w[0] and "CPU" in w[0]
    r, w = _record(lambda: torch.cos(dx.double()[1:]))
    assert_same(r, torch.cos(x.double()[1:]))
    assert w == []  # warned once for this op already

    r, w = _record(lambda: torch.linalg.eigvals(dsym))
    assert_same(r, torch.linalg.eigvals(sym))
    # (torch 2.11 reaches linalg_eig, later versions _linalg_eigvals)
    assert len(w) == 1 and ("aten::_linalg_eigvals" in w[0] or "aten::linalg_eig" in w[0])

    r, w = _record(lambda: torch.fft.rfft(dx.double()))  # float64 FFTs run on the CPU
    assert_same(r, torch.fft.rfft(x.double()))
    assert len(w) == 1 and "aten::_fft_r2c" in w[0]
    seen = torch_webgpu._C.fallback_ops_seen()
    for ops in (("aten::cos",), ("aten::_linalg_eigvals", "aten::linalg_eig"), ("aten::_fft_r2c",)):
        assert any(name.split(".")[0] in ops for name in seen), (ops, seen)


def test_pytest_warns_first_call(fresh_fallback_warnings):
    x = make((6,), torch.float64, seed=3).to(DEVICE)
    with pytest.warns(UserWarning, match=r"aten::cumprod.*not implemented natively"):
        r = torch.cumprod(x, 0)
    assert_same(r, torch.cumprod(x.cpu(), 0))


def test_warn_env_zero_silences(fresh_fallback_warnings, monkeypatch):
    monkeypatch.setenv("TORCH_WEBGPU_FALLBACK_WARN", "0")
    x = make((3, 3), torch.float64, seed=4)
    r, w = _record(lambda: torch.cumsum(x.to(DEVICE), 0))
    assert w == []
    assert_same(r, torch.cumsum(x, 0))


def test_disable_fallback_raises(fresh_fallback_warnings, monkeypatch):
    monkeypatch.setenv("TORCH_WEBGPU_DISABLE_CPU_FALLBACK", "1")
    x = make((3, 3), torch.float32, seed=4).to(DEVICE)
    # float64 only lives on the device; its math runs on the CPU. The message names the op
    # and the tensors that reached the fallback.
    with pytest.raises(NotImplementedError,
                       match=r"aten::exp.out.*tensor arguments: Double\[3, 3\] webgpu"):
        torch.exp(x.double())
    with pytest.raises(NotImplementedError, match="TORCH_WEBGPU_DISABLE_CPU_FALLBACK"):
        torch.linalg.eigvals(x)
    # Native ops keep working, and re-enabling brings the fallback back.
    assert_same(x + 1, x.cpu() + 1)
    assert_same(x @ x, x.cpu() @ x.cpu())
    monkeypatch.setenv("TORCH_WEBGPU_DISABLE_CPU_FALLBACK", "0")
    with pytest.warns(UserWarning, match="aten::exp.out"):
        assert_same(torch.exp(x.double()), torch.exp(x.cpu().double()))


@pytest.mark.parametrize("op", [torch.mul, torch.maximum, torch.sub])
def test_float64_device_scalar_operand_stays_native(monkeypatch, op):
    # A 0-dim float64 tensor on the device with float32 tensors computes in float32, as on
    # the CPU: its value travels as a kernel parameter, no fallback needed.
    monkeypatch.setenv("TORCH_WEBGPU_DISABLE_CPU_FALLBACK", "1")
    x = make((4, 3), torch.float32, seed=5)
    s = torch.tensor(1.0 / 3.0, dtype=torch.float64)
    assert_same(op(x.to(DEVICE), s.to(DEVICE)), op(x, s))
    assert_same(op(s.to(DEVICE), x.to(DEVICE)), op(s, x))
    cond = x > 0
    assert_same(torch.where(cond.to(DEVICE), x.to(DEVICE), s.to(DEVICE)), torch.where(cond, x, s))


# float64 computes on the CPU (stored-only on the device): these run through the fallback.
def test_fallback_inplace(quiet_fallback):
    x = make((3, 4), torch.float64, seed=5)
    d = x.to(DEVICE)
    ptr = d.data_ptr()
    r = d.clamp_(-1.0, 1.0)
    assert r is d and d.data_ptr() == ptr
    assert_same(d, x.clamp(-1.0, 1.0))
    # In place on a non-contiguous view writes through to the base.
    base = make((4, 6), torch.float64, seed=6)
    db = base.to(DEVICE)
    db[:, ::2].cumsum_(1)
    ref = base.clone()
    ref[:, ::2].cumsum_(1)
    assert_same(db, ref)
    # Random in-place ops draw from the webgpu generator (seeded).
    torch.webgpu.manual_seed(11)
    e = torch.empty(8, dtype=torch.float64, device=DEVICE).exponential_()
    torch.webgpu.manual_seed(11)
    e2 = torch.empty(8, dtype=torch.float64, device=DEVICE).exponential_()
    assert_same(e, e2.cpu(), exact=True)
    assert (e.cpu() > 0).all()


def test_fallback_out(quiet_fallback):
    x = make((3, 4), torch.float64, seed=7)
    d = x.to(DEVICE)
    o = torch.empty(3, 4, dtype=torch.float64, device=DEVICE)
    r = torch.cumsum(d, 0, out=o)
    assert r is o
    assert_same(o, torch.cumsum(x, 0))
    # out= of the wrong size is resized like on the CPU.
    o2 = torch.empty(0, dtype=torch.float64, device=DEVICE)
    torch.cumsum(d, 1, out=o2)
    assert_same(o2, torch.cumsum(x, 1))
    # out= into a strided view of a bigger tensor.
    big = torch.zeros(3, 8, dtype=torch.float64, device=DEVICE)
    torch.cumsum(d, 1, out=big[:, ::2])
    ref = torch.zeros(3, 8, dtype=torch.float64)
    torch.cumsum(x, 1, out=ref[:, ::2])
    assert_same(big, ref)
    # Multiple outputs.
    vals = torch.empty(0, dtype=torch.float64, device=DEVICE)
    idx = torch.empty(0, dtype=torch.int64, device=DEVICE)
    torch.sort(d, 1, out=(vals, idx))
    ev, ei = torch.sort(x, 1)
    assert_same(vals, ev, exact=True)
    assert_same(idx, ei, exact=True)


def test_fallback_view_results(quiet_fallback):
    x = make((4, 6), torch.float64, seed=8)
    d = x.to(DEVICE)
    # Ops that return views must alias the device storage (views are native).
    for fn in (lambda t: t.t(), lambda t: t.unfold(1, 2, 2), lambda t: t.diagonal(),
               lambda t: t.narrow(0, 1, 2), lambda t: t.as_strided((2, 2), (1, 6), 1),
               lambda t: t.unsqueeze(0).expand(3, 4, 6)):
        v = fn(d)
        assert v.untyped_storage().data_ptr() == d.untyped_storage().data_ptr()
        assert_same(v, fn(x), exact=True)
    # A fallback op on a view input gives the right values.
    v = d.t()[1:]
    assert_same(torch.cumsum(v, 0), torch.cumsum(x.t()[1:], 0))
    # Fallback ops returning a tuple of tensors.
    vals, idx = torch.max(d, dim=1)
    ev, ei = torch.max(x, dim=1)
    assert_same(vals, ev, exact=True)
    assert_same(idx, ei, exact=True)


def test_fallback_integer_and_bool(quiet_fallback):
    x = torch.tensor([[3, -1, 2**40], [5, 2**53 + 1, -7]])
    d = x.to(DEVICE)
    assert_same(torch.cumsum(d, 1), torch.cumsum(x, 1), exact=True)
    assert_same(d.sum(), x.sum(), exact=True)
    assert_same(torch.sort(d, 1).values, torch.sort(x, 1).values, exact=True)
    b = x > 0
    assert_same(b.to(DEVICE).any(1), b.any(1), exact=True)
    assert_same(b.to(DEVICE).nonzero(), b.nonzero(), exact=True)


def test_fallback_random_ops_seeded(quiet_fallback):
    torch.webgpu.manual_seed(2024)
    a = torch.rand(10, device=DEVICE)
    b = torch.randint(0, 10, (10,), device=DEVICE)
    p = torch.randperm(10, device=DEVICE)
    torch.webgpu.manual_seed(2024)
    assert_same(torch.rand(10, device=DEVICE), a.cpu(), exact=True)
    assert_same(torch.randint(0, 10, (10,), device=DEVICE), b.cpu(), exact=True)
    assert_same(torch.randperm(10, device=DEVICE), p.cpu(), exact=True)
    assert sorted(p.cpu().tolist()) == list(range(10))
