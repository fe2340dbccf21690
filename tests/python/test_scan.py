"""Scans (cumsum, cumprod, cummax, cummin, logcumsumexp) on webgpu against the CPU."""
import pytest
import torch

from conftest import FLOAT_DTYPES, INT_DTYPES, assert_same, check, dev, make

SCAN_DTYPES = FLOAT_DTYPES + INT_DTYPES + [torch.bool]


@pytest.mark.parametrize("dtype", SCAN_DTYPES)
@pytest.mark.parametrize("fn", [torch.cumsum, torch.cumprod])
def test_cumsum_cumprod_dtypes(no_fallback, fn, dtype):
    x = make((3, 9), dtype, low=-3, high=3)
    if fn is torch.cumprod and dtype.is_floating_point:
        x = make((3, 9), dtype, low=0.5, high=1.5)
    for dim in (0, 1, -1):
        check(fn, x, dim)


@pytest.mark.parametrize("shape,dim", [((5,), 0), ((2, 3, 4), 1), ((2, 3, 4), -3), ((), 0),
                                       ((0, 3), 1), ((3, 0), 1), ((1, 200), 1)])
def test_cumsum_shapes(no_fallback, shape, dim):
    check(torch.cumsum, make(shape, torch.float32), dim)
    check(torch.cumprod, make(shape, torch.float32, low=0.9, high=1.1), dim)


def test_cumsum_int_promotes_to_int64_and_dtype_arg(no_fallback):
    x = make((4, 6), torch.int8, low=-100, high=100)
    check(torch.cumsum, x, 1)                       # int64 result
    check(torch.cumsum, x, 1, dtype=torch.int16)    # wraps like the CPU
    check(torch.cumsum, make((4, 6), torch.float32), 0, dtype=torch.float16)
    big = torch.tensor([2**40, 2**41, -(2**42), 7], dtype=torch.int64)
    check(torch.cumsum, big, 0)
    check(torch.cumprod, torch.tensor([3, 2**20, 2**20, 5]), 0)


def test_cumsum_float_accuracy_long_row(no_fallback):
    # The CPU accumulates float32 in double: compensated summation keeps us close.
    x = torch.cat([torch.full((1,), 1e8), torch.ones(4000), torch.full((1,), -1e8), torch.ones(10)])
    check(torch.cumsum, x, 0)


def test_cumsum_noncontiguous_out_inplace(no_fallback):
    base = make((6, 8), torch.float32)
    x = base.t()[:, 1:5]  # non-contiguous with an offset
    check(torch.cumsum, x, 0)
    check(torch.cumsum, x, 1)
    out = torch.empty(0)
    actual = torch.cumsum(dev(x), 1, out=dev(out))
    assert_same(actual, torch.cumsum(x, 1))
    y = make((3, 5), torch.float32)
    dy = dev(y)
    dy.cumsum_(1)
    assert_same(dy, y.cumsum(1))
    with pytest.raises(RuntimeError):
        torch.cumsum(dev(y), 0, dtype=torch.float32, out=dev(torch.empty(3, 5, dtype=torch.int64)))
    with pytest.raises(IndexError):
        torch.cumsum(dev(y), 2)


def test_cumsum_nan_inf(no_fallback):
    x = torch.tensor([1.0, float("inf"), 2.0, float("-inf"), 3.0, float("nan"), 4.0])
    check(torch.cumsum, x, 0)
    check(torch.cumprod, x, 0)
    check(torch.cumprod, torch.tensor([2.0, 0.0, float("inf"), 1.0]), 0)


@pytest.mark.parametrize("dtype", SCAN_DTYPES)
@pytest.mark.parametrize("fn", [torch.cummax, torch.cummin])
def test_cummax_cummin(no_fallback, fn, dtype):
    x = make((4, 11), dtype, low=-3, high=3)  # many ties: the later index wins, as on the CPU
    for dim in (0, 1, -2):
        check(fn, x, dim, exact=True)


def test_cummax_nan_and_scalar(no_fallback):
    x = torch.tensor([1.0, 3.0, 3.0, 2.0, float("nan"), 5.0, float("nan"), 1.0])
    check(torch.cummax, x, 0, exact=True)
    check(torch.cummin, x, 0, exact=True)
    check(torch.cummax, torch.tensor(2.5), 0, exact=True)
    check(torch.cummin, torch.zeros(0, 3), 1, exact=True)
    check(torch.cummax, make((5, 6), torch.float32).t(), 1, exact=True)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_logcumsumexp(no_fallback, dtype):
    x = make((3, 10), dtype)
    check(torch.logcumsumexp, x, 1)
    check(torch.logcumsumexp, x, 0)
    special = torch.tensor([float("-inf"), float("-inf"), 0.0, float("inf"), 1.0, float("nan"), 2.0])
    check(torch.logcumsumexp, special.to(dtype), 0)
    check(torch.logcumsumexp, torch.tensor(1.5, dtype=dtype), 0)


def test_logcumsumexp_out_and_int_error(no_fallback):
    x = make((4, 5), torch.float32)
    out = dev(torch.empty(0))
    torch.logcumsumexp(dev(x), 1, out=out)
    assert_same(out, torch.logcumsumexp(x, 1))


def test_logcumsumexp_int_errors_like_cpu():
    check(torch.logcumsumexp, make((4,), torch.int64), 0)


def test_float64_falls_back():
    x = make((3, 4), torch.float64)
    check(torch.cumsum, x, 1)
    check(torch.cummax, x, 0)


def test_scan_gradients():
    x = make((3, 5), torch.float32, low=0.5, high=1.5)
    for fn in (lambda t: t.cumsum(1), lambda t: t.cumprod(1), lambda t: t.cummax(0).values,
               lambda t: t.logcumsumexp(1)):
        xc = x.clone().requires_grad_()
        xd = dev(x).requires_grad_()
        fn(xc).sum().backward()
        fn(xd).sum().backward()
        assert_same(xd.grad, xc.grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.int32])
def test_long_rows_blocked_scan(no_fallback, dtype):
    # Rows of at least 4096 elements scan in blocks (aggregates, carries, rescan).
    x = make((2, 5000), dtype, low=-3, high=3)
    # Half results round once from a float accumulator: one-ulp differences at ties.
    loose = {torch.float32: dict(rtol=1e-4, atol=1e-3), torch.float16: dict(rtol=2e-3, atol=1e-2)}
    check(torch.cumsum, x, 1, tolerances=loose.get(dtype))
    check(torch.cummax, x, 1, exact=True)
    check(torch.cummin, x, 1, exact=True)
    if dtype.is_floating_point:
        check(torch.logcumsumexp, x, 1, tolerances=loose.get(dtype))
        check(torch.cumprod, make((1, 4500), dtype, low=0.999, high=1.001), 1,
              tolerances=dict(rtol=1e-3, atol=1e-4))
    else:
        check(torch.cumprod, make((1, 4500), dtype, low=-1, high=1), 1, exact=True)


def test_long_row_nan_carry(no_fallback):
    x = make((1, 9000), torch.float32)
    x[0, 4100] = float("nan")
    x[0, 7000] = float("nan")
    check(torch.cummax, x, 1, exact=True)
    check(torch.cumsum, x, 1, tolerances=dict(rtol=1e-4, atol=1e-3))


def test_many_long_rows(no_fallback):
    # More rows than the blocked path's threshold but rows longer than one invocation may
    # loop (llvmpipe's 65535-iteration cap): still blocked.
    x = make((65, 33000), torch.int32, low=-3, high=3)
    check(torch.cumsum, x, 1, exact=True)


# Rows of 512..32768 elements, 128 rows or more: on GPUs one workgroup per row scans
# tiles of 256 x 8 elements (4 for 8-byte values or with indices) in workgroup memory;
# software adapters keep one invocation per row. TORCH_WEBGPU_ADAPTER_KIND picks each.
@pytest.mark.parametrize("kind", ["software", "gpu"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.int32, torch.uint8])
@pytest.mark.parametrize("shape", [(128, 512), (130, 2049), (129, 4096)])
def test_tiled_rows(no_fallback, monkeypatch, kind, dtype, shape):
    monkeypatch.setenv("TORCH_WEBGPU_ADAPTER_KIND", kind)
    loose = {torch.float32: dict(rtol=1e-4, atol=1e-3), torch.float16: dict(rtol=2e-3, atol=1e-2)}
    x = make(shape, dtype, low=0 if dtype == torch.uint8 else -3, high=3)
    check(torch.cumsum, x, 1, tolerances=loose.get(dtype))
    check(torch.cummax, x, 1, exact=True)
    check(torch.cummin, x, 1, exact=True)
    if dtype.is_floating_point:
        check(torch.logcumsumexp, x, 1, tolerances=loose.get(dtype))
        check(torch.cumprod, make(shape, dtype, low=0.99, high=1.01), 1,
              tolerances=dict(rtol=1e-3, atol=1e-4))
    else:
        check(torch.cumprod, make(shape, dtype, low=0 if dtype == torch.uint8 else -1, high=2), 1, exact=True)


@pytest.mark.parametrize("kind", ["software", "gpu"])
def test_tiled_rows_accuracy_nan_and_views(no_fallback, monkeypatch, kind):
    monkeypatch.setenv("TORCH_WEBGPU_ADAPTER_KIND", kind)
    # Compensated sums carried across tiles and runs (the CPU accumulates in double).
    row = torch.cat([torch.full((1,), 1e8), torch.ones(3000), torch.full((1,), -1e8), torch.ones(95)])
    check(torch.cumsum, row.repeat(128, 1), 1)
    x = make((140, 3000), torch.float32)
    x[3, 100] = float("nan")
    x[5, 2500] = float("nan")
    x[7, :] = float("-inf")
    check(torch.cummax, x, 1, exact=True)
    check(torch.cummin, x, 1, exact=True)
    check(torch.cumsum, x, 1, tolerances=dict(rtol=1e-4, atol=1e-3))
    check(torch.logcumsumexp, x, 1, tolerances=dict(rtol=1e-4, atol=1e-3))
    base = make((300, 1500), torch.float32)
    check(torch.cumsum, base[5:, 3:], 1, tolerances=dict(rtol=1e-4, atol=1e-3))  # copied view
    check(torch.cumsum, base.t(), 0, tolerances=dict(rtol=1e-4, atol=1e-3))     # rows in memory
    check(torch.cumsum, make((128, 1000), torch.bool), 1, exact=True)


def _dispatches():
    import torch_webgpu
    torch_webgpu._C.synchronize()
    return torch_webgpu._C.dispatch_stats()["dispatches"]


@pytest.mark.parametrize("kind", ["software", "gpu"])
def test_scan_writes_results_in_place_of_a_copy(no_fallback, monkeypatch, kind):
    # A result whose rows lie contiguous along the scanned dim is written by the scan itself:
    # on GPUs a [256, 4096] float32 cumsum is one dispatch (the staging copies doubled the
    # bytes moved).
    monkeypatch.setenv("TORCH_WEBGPU_ADAPTER_KIND", kind)
    x = make((256, 4096), torch.float32)
    dx = dev(x)
    dx.cumsum(-1)
    before = _dispatches()
    got = dx.cumsum(-1)
    if kind == "gpu":
        assert _dispatches() - before == 1
    assert_same(got, x.cumsum(-1), rtol=1e-4, atol=1e-3)
    # out= a separate contiguous tensor, then one that overlaps the input (a shifted view of
    # the same storage: the scan must not read what it wrote), then the input itself.
    out = dev(torch.full((256, 4096), 7.0))
    torch.cumsum(dx, 1, out=out)
    assert_same(out, x.cumsum(1), rtol=1e-4, atol=1e-3)
    base = make((9, 130), torch.float32)
    db = dev(base)
    torch.cumsum(db[1:], 1, out=db[:-1])
    expected = base.clone()
    torch.cumsum(base[1:].clone(), 1, out=expected[:-1])
    assert_same(db, expected)
    dx.cumsum_(1)
    assert_same(dx, x.cumsum(1), rtol=1e-4, atol=1e-3)
    # cummax/cummin: values and indices written directly, and through a staging copy where
    # the out= tensors are non-contiguous or the dim is not the last.
    y = make((130, 600), torch.float32)
    dy = dev(y)
    for dim in (1, 0):
        vals, idx = torch.empty(130, 600, device=dx.device), torch.empty(130, 600, dtype=torch.long, device=dx.device)
        torch.cummax(dy, dim, out=(vals, idx))
        ev, ei = torch.cummax(y, dim)
        assert_same(vals, ev)
        assert_same(idx, ei)
    vals_t = torch.empty(600, 130, device=dx.device).t()
    idx_t = torch.empty(600, 130, dtype=torch.long, device=dx.device).t()
    torch.cummin(dy, 1, out=(vals_t, idx_t))
    ev, ei = torch.cummin(y, 1)
    assert_same(vals_t, ev)
    assert_same(idx_t, ei)
    # A 0-dim input and a float16 input scanned into a float32 result.
    check(torch.cumsum, torch.tensor(2.5), 0)
    check(torch.cumsum, make((130, 520), torch.float16), 1, dtype=torch.float32,
          tolerances=dict(rtol=1e-3, atol=1e-2))
