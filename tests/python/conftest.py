"""Shared fixtures and helpers for the torch_webgpu Python suite.

Every test compares the webgpu device against PyTorch on the CPU (or an exact answer).
Helpers here build deterministic inputs per dtype, move them to the device, and compare
results with dtype-appropriate tolerances.
"""
import gc
import os
import subprocess
import sys

import pytest
import torch

import torch_webgpu

DEVICE = "webgpu"

# Dtypes the device computes on natively.
FLOAT_DTYPES = [torch.float32, torch.float16, torch.bfloat16]
INT_DTYPES = [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8]
NATIVE_DTYPES = FLOAT_DTYPES + INT_DTYPES + [torch.bool]
# Stored on the device, computed on the CPU (fallback).
STORED_DTYPES = [torch.float64, torch.complex64]
ALL_DTYPES = NATIVE_DTYPES + STORED_DTYPES

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

# Tolerances for device results against the CPU. float32 transcendental functions on
# GPUs are a few ulp off the CPU's; half types compute in float32 and round once.
TOLERANCES = {
    torch.float32: dict(rtol=1e-5, atol=1e-6),
    torch.float16: dict(rtol=1e-3, atol=1e-5),
    torch.bfloat16: dict(rtol=1.6e-2, atol=1e-5),
    torch.float64: dict(rtol=1e-7, atol=1e-7),
    torch.complex64: dict(rtol=1e-5, atol=1e-6),
}


def tol(dtype):
    """assert_close tolerances for a result of `dtype` (exact for integers and bool)."""
    return TOLERANCES.get(dtype, dict(rtol=0, atol=0))


def dev(t):
    """A webgpu copy of CPU tensor `t` (non-tensors are returned unchanged)."""
    if isinstance(t, torch.Tensor):
        return t.to(DEVICE)
    return t


def cpu(t):
    if isinstance(t, torch.Tensor):
        return t.cpu()
    if isinstance(t, (tuple, list)):
        return type(t)(cpu(x) for x in t)
    return t


def assert_same(actual, expected, exact=False, **kw):
    """Compares a webgpu result with the CPU reference: device, dtype, shape, values."""
    if isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert_same(a, e, exact=exact, **kw)
        return
    if not isinstance(expected, torch.Tensor):
        assert actual == expected or (actual != actual and expected != expected), (actual, expected)
        return
    assert isinstance(actual, torch.Tensor), type(actual)
    assert actual.device.type == DEVICE, actual.device
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    options = dict(rtol=0, atol=0) if exact else tol(expected.dtype)
    options.update(kw)
    torch.testing.assert_close(actual.cpu(), expected, equal_nan=True, **options)


def make(shape, dtype, seed=0, low=None, high=None, exclude_zero=False):
    """A deterministic CPU tensor of `dtype` with values spread over a sensible range."""
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        if exclude_zero:
            return torch.ones(shape, dtype=torch.bool)
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_floating_point or dtype.is_complex:
        lo = -4.0 if low is None else low
        hi = 4.0 if high is None else high
        real = torch.rand(shape, generator=g, dtype=torch.float64) * (hi - lo) + lo
        if dtype.is_complex:
            imag = torch.rand(shape, generator=g, dtype=torch.float64) * (hi - lo) + lo
            t = torch.complex(real, imag).to(dtype)
        else:
            t = real.to(dtype)
        if exclude_zero:
            t = torch.where(t == 0, torch.ones_like(t), t)
        return t
    info = torch.iinfo(dtype)
    lo = max(info.min, -100 if low is None else low)
    hi = min(info.max, 100 if high is None else high)
    t = torch.randint(lo, hi + 1, shape, generator=g, dtype=torch.int64).to(dtype)
    if exclude_zero:
        t = torch.where(t == 0, torch.ones_like(t), t)
    return t


def _clone(t):
    return t.clone() if isinstance(t, torch.Tensor) else t


def run_both(fn, *args, **kwargs):
    """Runs fn on (copies of) the CPU args and on webgpu copies. Returns (device_result,
    cpu_result), or checks both raise the same exception type and returns (None, None).
    The copies are taken first, so in-place functions see the same inputs on both."""
    dargs = [dev(a) for a in args]
    dkwargs = {k: dev(v) for k, v in kwargs.items()}
    cargs = [_clone(a) for a in args]
    ckwargs = {k: _clone(v) for k, v in kwargs.items()}
    try:
        expected = fn(*cargs, **ckwargs)
    except Exception as cpu_error:  # noqa: BLE001 - the device must raise the same type
        with pytest.raises(Exception) as info:
            fn(*dargs, **dkwargs)
        # The same type exactly (NotImplementedError is a RuntimeError subclass, but a
        # disabled fallback must not pass for the CPU's "not implemented for dtype").
        assert type(info.value) is type(cpu_error), (
            f"CPU raised {type(cpu_error).__name__}: {cpu_error}; "
            f"webgpu raised {type(info.value).__name__}: {info.value}")
        return None, None
    actual = fn(*dargs, **dkwargs)
    return actual, expected


def check(fn, *args, exact=False, tolerances=None, **kwargs):
    """Runs fn on the CPU and on webgpu and compares; matches exceptions by type."""
    actual, expected = run_both(fn, *args, **kwargs)
    if expected is None and actual is None:
        return False
    assert_same(actual, expected, exact=exact, **(tolerances or {}))
    return True


@pytest.fixture
def no_fallback(monkeypatch):
    """Ops inside the test must run natively: the CPU fallback raises instead."""
    monkeypatch.setenv("TORCH_WEBGPU_DISABLE_CPU_FALLBACK", "1")
    yield


@pytest.fixture
def quiet_fallback(monkeypatch):
    monkeypatch.setenv("TORCH_WEBGPU_FALLBACK_WARN", "0")
    yield


@pytest.fixture
def fresh_fallback_warnings(monkeypatch):
    """Forget which ops already warned, so this test sees each op's first warning."""
    monkeypatch.delenv("TORCH_WEBGPU_FALLBACK_WARN", raising=False)
    monkeypatch.delenv("TORCH_WEBGPU_DISABLE_CPU_FALLBACK", raising=False)
    torch_webgpu._C.reset_fallback_ops_seen()
    yield
    torch_webgpu._C.reset_fallback_ops_seen()


def fallback_warnings(records):
    return [str(r.message) for r in records if "not implemented natively for the WebGPU" in str(r.message)]


def run_python(code, timeout=120, env=None):
    """Runs `code` in a fresh interpreter (for process-fatal scenarios)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=timeout, env=full_env)


_FLUSHES_SUBNORMALS = None


def adapter_flushes_subnormals():
    """True when the adapter flushes float32 subnormals in arithmetic (NVIDIA's Vulkan
    driver does; WGSL allows it and gives no control)."""
    global _FLUSHES_SUBNORMALS
    if _FLUSHES_SUBNORMALS is None:
        product = torch.tensor([-1e-40], device=DEVICE) * torch.tensor([1.5], device=DEVICE)
        _FLUSHES_SUBNORMALS = bool(product.cpu().item() == 0)
    return _FLUSHES_SUBNORMALS


def ftz(t):
    """`t` as a flushing adapter sees it: float subnormals become zeros of their sign (the
    identity on adapters that keep subnormals). For inputs and expected outputs of tests
    that probe subnormal values."""
    if not adapter_flushes_subnormals() or not t.is_floating_point():
        return t
    sub = (t.abs() < torch.finfo(t.dtype).tiny) & (t != 0)
    return torch.where(sub, torch.copysign(torch.zeros_like(t), t), t)


@pytest.fixture
def no_gc():
    """Holds the garbage collector for a test that counts device memory: tensors of
    earlier tests held in reference cycles must not be freed in the middle of it."""
    gc.collect()
    gc.disable()
    yield
    gc.enable()
