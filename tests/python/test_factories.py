"""The native creation ops against the CPU: arange, range, linspace, logspace, eye and
tril_indices/triu_indices (and the composites on them), over dtypes, sizes incl. empty,
out= (resized as the CPU does it, with its warnings; non-contiguous and offset views), and
the CPU's errors. Integer arange/range, eye and the index ops are exact; float ranges
compute in float32 on the device (the CPU accumulates float32 ranges in double), so they
are compared with float tolerances; integer linspace is exact too. Tests marked
no_fallback prove the op ran natively; float64/complex, integer logspace and integer
linspace beyond 2**51 use the CPU fallback."""
import warnings

import pytest
import torch

from conftest import DEVICE, FLOAT_DTYPES, INT_DTYPES, assert_same, check, dev

D = DEVICE


def both(fn, exact=False, **kw):
    """fn(device) on the CPU and on webgpu, compared (exceptions matched by type)."""
    check(lambda _: fn(_.device), torch.empty(0), exact=exact, **kw)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_arange_int(dtype):
    for args in [(10,), (-3, 7), (5, -20, -3), (0, 100, 7), (-50, 50, 1)]:
        both(lambda d: torch.arange(*args, dtype=dtype, device=d), exact=True)
    both(lambda d: torch.arange(0, 10, 1.5, dtype=dtype, device=d), exact=True)  # step truncates
    both(lambda d: torch.arange(0, dtype=dtype, device=d), exact=True)


@pytest.mark.usefixtures("no_fallback")
def test_arange_int64_large():
    both(lambda d: torch.arange(2**40, 2**40 + 1000, 3, device=d), exact=True)
    both(lambda d: torch.arange(-(2**50), -(2**50) + 10**6, 997, device=d), exact=True)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_arange_float(dtype):
    for args in [(10,), (0, 1, 0.1), (-2.5, 3.25, 0.25), (5, -5, -0.7), (1, 2, 0.3)]:
        both(lambda d: torch.arange(*args, dtype=dtype, device=d))
    both(lambda d: torch.arange(0, 2000, 1.0, dtype=dtype, device=d), exact=dtype == torch.float32)
    both(lambda d: torch.arange(5, device=d, dtype=dtype, requires_grad=True))


@pytest.mark.usefixtures("no_fallback")
def test_arange_default_dtypes():
    both(lambda d: torch.arange(7, device=d), exact=True)
    both(lambda d: torch.arange(0.5, 3, device=d))
    both(lambda d: torch.arange(1, 4, 0.5, device=d))


@pytest.mark.usefixtures("no_fallback")
def test_arange_out():
    for out_shape in [(5,), (0,), (3, 4), (10,)]:
        out_c = torch.full(out_shape, -1, dtype=torch.int64)
        out_d = torch.full(out_shape, -1, dtype=torch.int64, device=D)
        with warnings.catch_warnings(record=True) as w_c:
            warnings.simplefilter("always")
            torch.arange(0, 10, 2, out=out_c)
        with warnings.catch_warnings(record=True) as w_d:
            warnings.simplefilter("always")
            r = torch.arange(0, 10, 2, out=out_d)
        assert r is out_d
        assert len(w_c) == len(w_d)
        assert_same(out_d, out_c, exact=True)
    # Non-contiguous out and an offset view of a narrow dtype.
    out_d = torch.zeros(5, 2, device=D)[:, 1]
    torch.arange(5.0, out=out_d)
    assert_same(out_d, torch.arange(5.0), exact=True)
    base = torch.full((9,), 7, dtype=torch.int8, device=D)
    torch.arange(3, out=base[1:4])
    assert_same(base, torch.tensor([7, 0, 1, 2, 7, 7, 7, 7, 7], dtype=torch.int8), exact=True)


@pytest.mark.usefixtures("no_fallback")
def test_arange_errors():
    both(lambda d: torch.arange(0, 10, 0, device=d))
    both(lambda d: torch.arange(0, 10, -1, device=d))
    both(lambda d: torch.arange(0, float("inf"), device=d))
    both(lambda d: torch.arange(0, 3, dtype=torch.bool, device=d))
    with pytest.raises(RuntimeError) as e_dev:
        torch.arange(0, 10, -1, device=D)
    with pytest.raises(RuntimeError) as e_cpu:
        torch.arange(0, 10, -1)
    assert str(e_dev.value) == str(e_cpu.value)


@pytest.mark.usefixtures("no_fallback")
def test_range():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.range is deprecated
        both(lambda d: torch.range(0, 10, 2, device=d, dtype=torch.int64), exact=True)
        both(lambda d: torch.range(-1, 1, 0.25, device=d))
        both(lambda d: torch.range(3, -3, -1, device=d, dtype=torch.int32), exact=True)
        both(lambda d: torch.range(0, 10, 0, device=d))
        both(lambda d: torch.range(0, 10, -1, device=d))


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_linspace_float(dtype):
    for start, end, steps in [(0, 1, 5), (-3.5, 7.25, 11), (10, -10, 101), (2, 2, 4),
                              (0, 1, 1), (0, 1, 0), (0, 1, 2), (-1e4, 1e4, 1000)]:
        # The CPU's vectorized loop and the device's float32 arithmetic may round the
        # last bit differently: allow 2 ulp of the largest endpoint.
        atol = 2 * torch.finfo(dtype).eps * max(abs(start), abs(end), 1)
        both(lambda d: torch.linspace(start, end, steps, dtype=dtype, device=d),
             tolerances=dict(atol=atol, rtol=2 * torch.finfo(dtype).eps))
    both(lambda d: torch.linspace(0, 1, -1, dtype=dtype, device=d))


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_logspace_float(dtype):
    for start, end, steps, base in [(0, 3, 7, 10.0), (-2, 2, 9, 2.0), (1, -1, 5, 0.5),
                                    (0, 1, 1, 10.0), (0, 1, 0, 10.0), (-1, 1, 50, 3.0),
                                    (0, 2, 4, 10.0), (0, 4, 4, 3.0)]:  # exponents in double
        both(lambda d: torch.logspace(start, end, steps, base, dtype=dtype, device=d),
             tolerances=dict(rtol=1e-5 if dtype == torch.float32 else None,
                             atol=1e-6 if dtype == torch.float32 else None))


@pytest.mark.usefixtures("no_fallback")
def test_linspace_out():
    out_c, out_d = torch.empty(3), torch.empty(3, device=D)
    torch.linspace(0, 1, 6, out=out_c)
    assert torch.linspace(0, 1, 6, out=out_d) is out_d
    assert_same(out_d, out_c)
    out_d = torch.zeros(6, 2, device=D)[:, 0]
    torch.logspace(0, 1, 6, out=out_d)
    assert_same(out_d, torch.logspace(0, 1, 6))


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_linspace_int(dtype):
    """Exact: the CPU's double arithmetic (step = (end - start) / (steps - 1), one fused
    rounding of start + step * i, truncation) reproduced in integers on the device."""
    info = torch.iinfo(dtype)
    cases = [(0, 10, 7), (-7, 30, 9), (3, -50, 77), (0, 1, 100), (1000, 1005, 7), (-3, 3, 7),
             (5, 5, 4), (0, 3, 4), (7, -7, 15), (0, 1, 2), (2, 9, 1), (2, 9, 0), (-100, 100, 301),
             (0, 2**40, 1001), (-(2**50), 2**50, 999), (44814425786, 974250806941651, 2137),
             (976833738437753, -2568510086, 2884)]
    for start, end, steps in cases:
        if info.min <= start <= info.max and info.min <= end <= info.max:
            both(lambda d: torch.linspace(start, end, steps, dtype=dtype, device=d), exact=True)
    both(lambda d: torch.linspace(0, 5, -1, dtype=dtype, device=d))


def test_ranges_on_the_fallback():
    """float64, complex, integer logspace and huge integer linspace use the CPU fallback."""
    both(lambda d: torch.arange(0, 1, 0.1, dtype=torch.float64, device=d))
    both(lambda d: torch.linspace(0, 1, 7, dtype=torch.float64, device=d))
    both(lambda d: torch.linspace(0, 1 + 2j, 7, device=d))
    both(lambda d: torch.linspace(-(2**60), 2**60, 9, dtype=torch.int64, device=d), exact=True)
    both(lambda d: torch.logspace(0, 4, 5, 2, dtype=torch.int32, device=d), exact=True)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("dtype", FLOAT_DTYPES + INT_DTYPES + [torch.bool, torch.float64,
                                                               torch.complex64])
def test_eye(dtype):
    for args in [(3,), (3, 5), (5, 2), (0,), (0, 3), (1, 1)]:
        both(lambda d: torch.eye(*args, dtype=dtype, device=d), exact=True)


@pytest.mark.usefixtures("no_fallback")
def test_eye_out_and_errors():
    for out in [torch.empty(0), torch.ones(2, 2), torch.ones(3, 4)]:
        out_c, out_d = out.clone(), dev(out)
        torch.eye(3, 4, out=out_c)
        assert torch.eye(3, 4, out=out_d) is out_d
        assert_same(out_d, out_c, exact=True)
    out_d = torch.ones(4, 3, device=D).t()
    torch.eye(3, 4, out=out_d)
    assert_same(out_d, torch.eye(3, 4), exact=True)
    out_d = torch.ones(3, 3, device=D)
    torch.eye(3, out=out_d)
    assert_same(out_d, torch.eye(3), exact=True)
    both(lambda d: torch.eye(-1, device=d))
    both(lambda d: torch.eye(2, -3, device=d))


@pytest.mark.usefixtures("no_fallback")
def test_fill_composites():
    both(lambda d: torch.full((2, 3), 2.5, device=d), exact=True)
    both(lambda d: torch.zeros(3, 0, dtype=torch.int8, device=d), exact=True)
    both(lambda d: torch.ones(4, dtype=torch.bool, device=d), exact=True)
    both(lambda d: torch.full((3,), 7, dtype=torch.int64, device=d), exact=True)
    both(lambda d: torch.zeros(2, 2, dtype=torch.float64, device=d), exact=True)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("fn", [
    lambda d, o: torch.arange(0, 10, 2, out=o),
    lambda d, o: torch.linspace(0, 1, 5, out=o),
    lambda d, o: torch.logspace(0, 1, 5, out=o),
    lambda d, o: torch.eye(3, 2, out=o),
    lambda d, o: torch.narrow_copy(torch.ones(4, 4, device=d), 0, 0, 2, out=o),
], ids=["arange", "linspace", "logspace", "eye", "narrow_copy"])
@pytest.mark.parametrize("out_shape", [(3,), (5, 1), (0,), (3, 2)])
def test_out_resize_like_cpu(fn, out_shape):
    """out= of another size: the same resulting shape and the same warnings as the CPU
    (the 1-D factories keep an out whose element count already matches)."""
    results = []
    for d in ["cpu", D]:
        out = torch.full(out_shape, -1.0, device=d)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            r = fn(d, out)
        assert r is out
        results.append((out, [str(x.message).split(" (Triggered")[0] for x in w]))
    (c, wc), (g, wg) = results
    assert wc == wg
    assert_same(g, c)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("fn", [torch.tril_indices, torch.triu_indices])
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_triangle_indices(fn, dtype):
    for r, c in [(0, 3), (3, 0), (1, 1), (4, 4), (3, 6), (7, 2)]:
        for offset in [-8, -2, -1, 0, 1, 3, 9]:
            both(lambda d: fn(r, c, offset, dtype=dtype, device=d), exact=True)


@pytest.mark.usefixtures("no_fallback")
def test_triangle_indices_errors():
    both(lambda d: torch.tril_indices(-1, 3, device=d))
    both(lambda d: torch.triu_indices(3, -2, device=d))
    both(lambda d: torch.tril_indices(3, 3, dtype=torch.float32, device=d))
    with pytest.raises(RuntimeError) as e_dev:
        torch.tril_indices(-1, 3, device=D)
    with pytest.raises(RuntimeError) as e_cpu:
        torch.tril_indices(-1, 3)
    assert str(e_dev.value) == str(e_cpu.value)
