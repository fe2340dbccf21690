"""Dtypes on the device: exact round trips for every dtype, int64 beyond 2**53 and at its
extremes, dtype-converting copies (CPU and device-to-device), and float64 / complex64
which live on the device but compute through the CPU fallback."""
import warnings

import pytest
import torch

from conftest import (ALL_DTYPES, DEVICE, INT64_MAX, INT64_MIN, NATIVE_DTYPES, assert_same,
                      fallback_warnings, make)

INT64_SPECIAL = [0, 1, -1, 2**53, 2**53 + 1, -(2**53) - 1, 2**62 + 12345, -(2**62) - 7,
                 2**32, 2**32 - 1, -(2**32), 2**31, -(2**31) - 1, INT64_MAX, INT64_MIN,
                 INT64_MAX - 1, INT64_MIN + 1]


def special_values(dtype):
    """Boundary values of each dtype, as a CPU tensor."""
    if dtype == torch.bool:
        return torch.tensor([True, False, True, True, False])
    if dtype == torch.int64:
        return torch.tensor(INT64_SPECIAL, dtype=torch.int64)
    if dtype.is_complex:
        return torch.tensor([1 + 2j, -3.5 - 0.25j, float("inf") + 0j, complex(0, float("nan"))],
                            dtype=dtype)
    if dtype.is_floating_point:
        info = torch.finfo(dtype)
        return torch.tensor([0.0, -0.0, 1.0, -2.5, info.max, info.min, info.tiny, info.eps,
                             float("inf"), float("-inf"), float("nan"), 1 / 3],
                            dtype=dtype)
    info = torch.iinfo(dtype)
    return torch.tensor([0, 1, info.max, info.min, info.max - 1, info.min + 1, 7], dtype=dtype)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("n", [1, 3, 5, 8, 13])
def test_round_trip_exact(dtype, n):
    x = make((n,), dtype, seed=n)
    d = x.to(DEVICE)
    assert d.dtype == dtype and d.device.type == DEVICE
    back = d.cpu()
    assert back.dtype == dtype
    assert torch.equal(back.view(torch.uint8) if dtype != torch.bool else back,
                       x.view(torch.uint8) if dtype != torch.bool else x)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_round_trip_special_values(dtype):
    x = special_values(dtype)
    back = x.to(DEVICE).cpu()
    # Bit-exact (signed zeros and NaN payloads included).
    if dtype == torch.bool:
        assert torch.equal(back, x)
    else:
        assert torch.equal(back.view(torch.uint8), x.view(torch.uint8))


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_device_to_device_copy_exact(dtype):
    x = special_values(dtype)
    d = x.to(DEVICE)
    c = d.clone()
    e = torch.empty_like(d)
    e.copy_(d)
    for t in (c, e):
        assert t.device.type == DEVICE
        if dtype == torch.bool:
            assert torch.equal(t.cpu(), x)
        else:
            assert torch.equal(t.cpu().view(torch.uint8), x.view(torch.uint8))
    # Non-contiguous source, device to device.
    y = make((4, 6), dtype, seed=2)
    yd = y.to(DEVICE)
    assert_same(yd.t().contiguous(), y.t().contiguous(), exact=True)
    assert_same(yd[:, ::2].clone(), y[:, ::2].clone(), exact=True)


def test_int64_extremes_survive_native_ops(no_fallback):
    x = torch.tensor(INT64_SPECIAL, dtype=torch.int64)
    d = x.to(DEVICE)
    xr = x.flip(0)
    dr = xr.to(DEVICE)
    assert_same(d.clone(), x, exact=True)
    assert_same(d[1:].contiguous(), x[1:], exact=True)
    assert_same(d.view(-1, 1).expand(-1, 2).contiguous(), x.view(-1, 1).expand(-1, 2).contiguous(),
                exact=True)
    assert_same(d + 0, x + 0, exact=True)
    assert_same(d * 1, x * 1, exact=True)
    assert_same(d - 1, x - 1, exact=True)  # INT64_MIN - 1 wraps
    assert_same(d + 1, x + 1, exact=True)  # INT64_MAX + 1 wraps
    assert_same(-d, -x, exact=True)
    assert_same(d.abs(), x.abs(), exact=True)
    assert_same(torch.where(d > 0, d, -d), torch.where(x > 0, x, -x), exact=True)
    assert_same(torch.maximum(d, dr), torch.maximum(x, xr), exact=True)
    assert_same(torch.minimum(d, dr), torch.minimum(x, xr), exact=True)
    assert_same(d == dr, x == xr, exact=True)
    assert_same(d < dr, x < xr, exact=True)
    assert_same(d >= dr, x >= xr, exact=True)
    assert_same(d ^ dr, x ^ xr, exact=True)
    assert_same(d & dr, x & xr, exact=True)
    assert_same(d | dr, x | xr, exact=True)
    assert_same(~d, ~x, exact=True)
    assert_same(d * dr, x * xr, exact=True)
    assert_same(d + dr, x + xr, exact=True)
    assert_same(d - dr, x - xr, exact=True)
    assert_same(d.to(torch.int32), x.to(torch.int32), exact=True)
    assert_same(d.fill_(INT64_MIN), torch.full_like(x, INT64_MIN), exact=True)
    assert d[0].item() == INT64_MIN
    d2 = x.to(DEVICE)
    for i, v in enumerate(INT64_SPECIAL):
        assert d2[i].item() == v


def test_int64_beyond_2_53_item_and_scalar_ops(no_fallback):
    big = 2**53 + 1
    d = torch.tensor([big, big + 2], device=DEVICE)
    assert d[0].item() == big
    assert (d + 1).cpu().tolist() == [big + 1, big + 3]
    assert (d == big).cpu().tolist() == [True, False]
    assert (d > big).cpu().tolist() == [False, True]
    full = torch.full((3,), INT64_MAX, dtype=torch.int64, device=DEVICE)
    assert full.cpu().tolist() == [INT64_MAX] * 3
    z = torch.zeros(3, dtype=torch.int64, device=DEVICE)
    z.fill_(INT64_MIN + 5)
    assert z.cpu().tolist() == [INT64_MIN + 5] * 3


# ---- dtype-converting copies ----------------------------------------------------------

CONVERSION_SOURCES = {
    torch.float32: torch.tensor([0.0, 0.5, -0.5, 1.7, -1.7, 2.5, -3.99, 100.25, 255.9, -128.0,
                                 65504.0, 70000.0, 1e-8]),
    torch.float16: torch.tensor([0.0, 0.5, -0.5, 1.7, -1.7, 2.5, -3.99, 100.25, 255.9, -128.0,
                                 65504.0], dtype=torch.float16),
    torch.bfloat16: torch.tensor([0.0, 0.5, -0.5, 1.7, -1.7, 2.5, -3.99, 100.25, -128.0],
                                 dtype=torch.bfloat16),
    torch.int64: torch.tensor([0, 1, -1, 127, -128, 255, 256, 32767, -32769, 65504, 2**31,
                               -(2**31) - 1, 2**53 + 1, 2**40 + 3, INT64_MAX, INT64_MIN]),
    torch.int32: torch.tensor([0, 1, -1, 127, -128, 255, 256, 32767, -32769, 2**31 - 1, -(2**31)],
                              dtype=torch.int32),
    torch.int16: torch.tensor([0, 1, -1, 127, -128, 255, 256, 32767, -32768], dtype=torch.int16),
    torch.int8: torch.tensor([0, 1, -1, 127, -128, 5], dtype=torch.int8),
    torch.uint8: torch.tensor([0, 1, 127, 128, 255, 5], dtype=torch.uint8),
    torch.bool: torch.tensor([True, False, False, True]),
}


def _safe_source(src, dst_dtype):
    """Drops values whose conversion is undefined behaviour in C++ (float out of the
    integer range), where the CPU's answer is platform-specific. (float -> uint8 is
    defined by c10 as a cast through int64, so negatives stay.)"""
    if src.dtype.is_floating_point and not dst_dtype.is_floating_point and dst_dtype != torch.bool:
        info = torch.iinfo(dst_dtype if dst_dtype != torch.uint8 else torch.int64)
        keep = (src.double() > float(info.min) - 1) & (src.double() < float(info.max) + 1)
        return src[keep]
    return src


@pytest.mark.parametrize("src_dtype", list(CONVERSION_SOURCES), ids=str)
@pytest.mark.parametrize("dst_dtype", NATIVE_DTYPES, ids=str)
def test_converting_copies(src_dtype, dst_dtype, no_fallback):
    src = _safe_source(CONVERSION_SOURCES[src_dtype], dst_dtype)
    expected = src.to(dst_dtype)
    # CPU -> webgpu with conversion.
    assert_same(src.to(DEVICE, dst_dtype), expected, exact=True)
    # webgpu -> webgpu with conversion.
    d = src.to(DEVICE)
    assert_same(d.to(dst_dtype), expected, exact=True)
    # webgpu -> CPU with conversion (copy_ into a CPU tensor of another dtype).
    out = torch.empty(src.shape, dtype=dst_dtype)
    out.copy_(d)
    assert torch.equal(out, expected)


def test_float_to_bool_half_is_true(no_fallback):
    x = torch.tensor([0.0, 0.5, -0.25, 1e-30, -0.0, float("nan"), float("inf")])
    assert_same(x.to(DEVICE).bool(), x.bool(), exact=True)
    assert x.to(DEVICE).bool().cpu().tolist() == [False, True, True, True, False, True, True]
    h = x.half()
    assert_same(h.to(DEVICE).bool(), h.bool(), exact=True)


def test_float_to_int_truncates(no_fallback):
    x = torch.tensor([1.9, -1.9, 2.5, -2.5, 0.99, -0.99])
    assert x.to(DEVICE).to(torch.int64).cpu().tolist() == [1, -1, 2, -2, 0, 0]
    assert x.to(DEVICE).to(torch.int32).cpu().tolist() == [1, -1, 2, -2, 0, 0]
    assert x.to(DEVICE).to(torch.int8).cpu().tolist() == [1, -1, 2, -2, 0, 0]


def test_int64_to_float16(no_fallback):
    x = torch.tensor([0, 1, -1, 2049, 65504, 65519, -65504, 100000, 2**53 + 1, INT64_MIN])
    assert_same(x.to(DEVICE).half(), x.half(), exact=True)
    assert_same(x.to(DEVICE).bfloat16(), x.bfloat16(), exact=True)
    assert_same(x.to(DEVICE).float(), x.float(), exact=True)


def test_int64_to_float32_rounding(no_fallback):
    # Round to nearest even at and around the float32 precision limit.
    vals = [2**24 + 1, 2**24 + 3, 2**25 + 2, 2**25 + 6, 2**53 + 1, 2**62 + 2**38, -(2**24) - 1,
            2**63 - 1, -(2**63), 2**40 + 2**16 + 1]
    x = torch.tensor(vals)
    assert_same(x.to(DEVICE).float(), x.float(), exact=True)


def test_float_special_conversions(no_fallback):
    x = torch.tensor([float("inf"), float("-inf"), float("nan"), 1e30, -1e-40, 65520.0, 65519.0,
                      3.4e38])
    assert_same(x.to(DEVICE).half(), x.half(), exact=True)
    assert_same(x.to(DEVICE).bfloat16(), x.bfloat16(), exact=True)
    assert_same(x.to(DEVICE).half().float(), x.half().float(), exact=True)
    assert_same(x.to(DEVICE).bfloat16().float(), x.bfloat16().float(), exact=True)


# ---- float64: stored on the device, computed on the CPU ----------------------------------
# (complex64 arithmetic is native: tests/python/test_complex.py)

@pytest.mark.parametrize("dtype", [torch.float64], ids=str)
def test_stored_dtypes_compute_via_fallback(dtype, fresh_fallback_warnings):
    a = make((3, 4), dtype, seed=1)
    b = make((3, 4), dtype, seed=2, exclude_zero=True)
    da, db = a.to(DEVICE), b.to(DEVICE)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        s = da + db
        p = da * db
        q = da / db
        e = torch.exp(da)
    assert fallback_warnings(rec), "expected a CPU fallback warning"
    assert_same(s, a + b)
    assert_same(p, a * b)
    assert_same(q, a / b)
    assert_same(e, torch.exp(a))


def test_float64_ops_warn_and_are_exact(fresh_fallback_warnings):
    a = torch.tensor([1.0 + 2**-40, 2.0, -3.0], dtype=torch.float64)
    da = a.to(DEVICE)
    with pytest.warns(UserWarning, match="not implemented natively"):
        r = da * 3
    assert_same(r, a * 3, exact=True)
    with pytest.warns(UserWarning, match="aten::sum"):
        assert_same(da.sum(), a.sum(), exact=True)


def test_float64_conversions_to_native(quiet_fallback):
    a = torch.tensor([1.5, -2.25, 3.0, 1e10], dtype=torch.float64)
    da = a.to(DEVICE)
    assert_same(da.float(), a.float(), exact=True)
    assert_same(da.to(torch.int64), a.to(torch.int64), exact=True)
    assert_same(da.float().double(), a.float().double(), exact=True)
    c = torch.tensor([1 + 2j, -0.5j], dtype=torch.complex64)
    dc = c.to(DEVICE)
    assert_same(dc.real, c.real, exact=True)
    assert_same(dc.imag, c.imag, exact=True)
    assert_same(torch.view_as_real(dc), torch.view_as_real(c), exact=True)
    assert_same(dc.abs(), c.abs())


@pytest.mark.parametrize("stored", [torch.float64, torch.complex64], ids=str)
@pytest.mark.parametrize("native", [torch.float32, torch.float16, torch.int64, torch.int8,
                                    torch.bool], ids=str)
def test_converting_copies_with_stored_dtypes(stored, native, quiet_fallback):
    src = CONVERSION_SOURCES[native]
    if native == torch.int64 and stored == torch.complex64:
        src = src[:-2]  # keep within what both CPU paths round the same way
    wide = src.to(stored)
    # native -> stored, on the device and from the CPU
    assert_same(src.to(DEVICE).to(stored), wide, exact=True)
    assert_same(src.to(DEVICE, stored), wide, exact=True)
    # stored -> native (complex -> real drops the imaginary part with a warning on the CPU)
    real = wide.real if stored.is_complex else wide
    expected = _safe_source(real, native).to(native)
    got = _safe_source(real, native).to(DEVICE).to(native)
    assert_same(got, expected, exact=True)
    # copy_ between device tensors of different dtypes, into a strided destination
    dst = torch.zeros(len(src) * 2, dtype=stored, device=DEVICE)
    dst[::2].copy_(src.to(DEVICE))
    ref = torch.zeros(len(src) * 2, dtype=stored)
    ref[::2].copy_(src)
    assert_same(dst, ref, exact=True)


def test_half_subnormals_convert(no_fallback):
    h = torch.tensor([6e-8, 1e-7, 3e-5, 6.1e-5, -6e-8, 65504, 1e-9], dtype=torch.float16)
    assert_same(h.to(DEVICE).float(), h.float(), exact=True)
    f = torch.tensor([6e-8, 1e-7, 3e-5, 6.1e-5, -6e-8, 2.98e-8, 2.99e-8, 1e-9, 8.9e-8])
    assert_same(f.to(DEVICE).half(), f.half(), exact=True)
    b = torch.tensor([1e-39, -1e-40, 1e-45, 3.4e38, 3.3895e38, 3.39e38])
    assert_same(b.to(DEVICE).bfloat16(), b.bfloat16(), exact=True)
    ties = torch.tensor([1.0 + 2**-11, 1.0 + 3 * 2**-11, 2049.0, 2051.0, 65520.0, 65519.0])
    assert_same(ties.to(DEVICE).half(), ties.half(), exact=True)
    bt = torch.tensor([1.0 + 2**-8, 1.0 + 3 * 2**-8, 257.0, 259.0])
    assert_same(bt.to(DEVICE).bfloat16(), bt.bfloat16(), exact=True)


# ---- neg and conj views ----------------------------------------------------------------
# Their stored values are the negation / conjugate of what they hold; every copy direction
# must see the logical values (a neg view's copy used to recurse without end).

@pytest.mark.parametrize("direction", ["to_cpu", "to_device", "device_to_device"])
@pytest.mark.parametrize("src_flag,dst_flag", [("neg", None), (None, "neg"), ("neg", "neg"),
                                                ("conj", None), (None, "conj"), ("conj", "conj")])
def test_copy_resolves_neg_and_conj_views(direction, src_flag, dst_flag):
    dtype = torch.complex64 if "conj" in (src_flag, dst_flag) else torch.float32
    base = torch.randn(2, 3, dtype=dtype)
    want = base.clone()

    def flagged(t, flag):
        if flag == "neg":
            return t._neg_view()
        if flag == "conj":
            return t.conj()
        return t

    src_dev = direction in ("to_cpu", "device_to_device")
    dst_dev = direction in ("to_device", "device_to_device")
    # A flagged source holds `want` logically: store the inverse transform underneath.
    stored = want.neg() if src_flag == "neg" else want.conj() if src_flag == "conj" else want
    src = flagged(stored.to(DEVICE) if src_dev else stored, src_flag)
    dst_base = torch.zeros(2, 3, dtype=dtype, device=DEVICE if dst_dev else "cpu")
    dst = flagged(dst_base, dst_flag)
    dst.copy_(src)
    got = dst.cpu().resolve_conj().resolve_neg()
    torch.testing.assert_close(got, want)
    assert dst.is_neg() == (dst_flag == "neg") and dst.is_conj() == (dst_flag == "conj")


def test_neg_view_to_cpu_and_ops():
    x = torch.arange(6.0).reshape(2, 3)
    y = x.to(DEVICE)._neg_view()
    torch.testing.assert_close(y.cpu().resolve_neg(), -x)
    torch.testing.assert_close((y + 1).cpu(), -x + 1)
