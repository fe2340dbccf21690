"""Sorting, selection, searching, unique and histograms on webgpu against the CPU."""
import pytest
import torch

from conftest import FLOAT_DTYPES, INT_DTYPES, assert_same, check, dev, make

SORT_DTYPES = FLOAT_DTYPES + INT_DTYPES + [torch.bool]
NAN = float("nan")
INF = float("inf")


def stable_sort(x, dim=-1, descending=False):
    return torch.sort(x, dim=dim, descending=descending, stable=True)


@pytest.mark.parametrize("dtype", SORT_DTYPES)
@pytest.mark.parametrize("descending", [False, True])
def test_sort_dtypes_with_duplicates(no_fallback, dtype, descending):
    x = make((5, 37), dtype, low=-3, high=3)  # many ties: stable order checked by indices
    for dim in (1, 0, -1):
        check(stable_sort, x, dim, descending, exact=True)


@pytest.mark.parametrize("n", [1, 2, 3, 1024, 1025, 2048, 5000])
def test_sort_lengths(no_fallback, n):
    # Rows beyond one workgroup's memory use the multi-pass network.
    x = make((2, n), torch.float16)  # half precision: ties
    check(stable_sort, x, 1, exact=True)
    check(stable_sort, x, 1, True, exact=True)


def test_sort_special_values(no_fallback):
    x = torch.tensor([3.0, NAN, 1.0, -INF, INF, 0.0, -0.0, NAN, 2.0, -NAN])
    check(stable_sort, x, 0, exact=True)
    check(stable_sort, x, 0, True, exact=True)
    big = torch.tensor([2**62, -(2**62), 5, -1, 2**33, -(2**63), 2**63 - 1], dtype=torch.int64)
    check(stable_sort, big, 0, exact=True)
    check(stable_sort, big, 0, True, exact=True)


def test_sort_shapes_noncontiguous_out(no_fallback):
    check(stable_sort, torch.tensor(4.0), 0, exact=True)
    check(stable_sort, torch.zeros(0, 3), 1, exact=True)
    check(stable_sort, torch.zeros(3, 0), 1, exact=True)
    x = make((7, 9), torch.float32).t()[1:, ::2]
    check(stable_sort, x, 0, exact=True)
    check(stable_sort, x, 1, exact=True)
    check(torch.argsort, x, dim=0, stable=True, exact=True)
    check(torch.msort, x, exact=True)
    values, indices = dev(torch.empty(0)), dev(torch.empty(0, dtype=torch.long))
    torch.sort(dev(x), dim=1, stable=True, out=(values, indices))
    assert_same((values, indices), stable_sort(x, 1), exact=True)
    with pytest.raises(IndexError):
        torch.sort(dev(x), dim=2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32, torch.int64])
def test_topk(no_fallback, dtype):
    x = torch.randperm(60, generator=torch.Generator().manual_seed(1)).reshape(6, 10).to(dtype)
    for k, dim, largest in [(3, 1, True), (3, 1, False), (2, 0, True), (10, -1, False), (0, 1, True)]:
        check(torch.topk, x, k, dim, largest, exact=True)
    check(torch.topk, torch.tensor(2.0).to(dtype), 1, exact=True)


def test_topk_short_rows_match_cpu_ties(no_fallback):
    # Rows up to 128 run the CPU's own selection steps: tied values give the CPU's indices.
    g = torch.Generator().manual_seed(10)
    x = torch.randint(0, 4, (3, 100), generator=g).float()
    x[torch.rand(3, 100, generator=g) < 0.1] = NAN
    for k, largest, sorted_ in [(1, True, True), (5, True, True), (40, False, True), (60, True, False),
                                (100, False, False)]:
        check(torch.topk, x, k, 1, largest, sorted_, exact=True)
        check(torch.topk, x.nan_to_num(2).to(torch.int32), k, 1, largest, sorted_, exact=True)
    check(torch.topk, torch.randint(0, 3, (2, 9, 5), generator=g).to(torch.int64), 3, 1, exact=True)


def test_topk_long_rows(no_fallback):
    x = torch.randperm(3000, generator=torch.Generator().manual_seed(11)).float().reshape(2, 1500)
    check(torch.topk, x, 7, 1, exact=True)
    check(torch.topk, x, 20, 1, False, exact=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32, torch.int64])
@pytest.mark.parametrize("n", [1025, 4097, 9000])
def test_topk_long_rows_selection(no_fallback, dtype, n):
    # Rows longer than one workgroup's chunk and small k: chunks keep their best k, level by
    # level. Ties (many equal values), NaN, -0.0 and infinities must come out exactly as
    # the stable full sort orders them (ties by index, NaN largest).
    g = torch.Generator().manual_seed(n)
    if dtype.is_floating_point:
        x = torch.randint(-8, 8, (3, n), generator=g).to(dtype)
        x[0, torch.randperm(n, generator=g)[:40]] = NAN
        x[1, ::7] = -0.0
        x[2, ::5] = INF
    else:
        x = torch.randint(-8, 8, (3, n), generator=g).to(dtype)
    for k, largest in [(1, True), (50, True), (50, False), (200, False), (n // 2, True), (n, False)]:
        for dim, t in [(1, x), (0, x.t()), (-1, x[:, 1:])]:
            kk = min(k, t.size(dim))
            v, i = torch.topk(dev(t), kk, dim, largest)
            ev, ei = torch.sort(t, dim=dim, descending=largest, stable=True)
            assert_same(v, ev.narrow(dim, 0, kk), exact=True)
            assert torch.equal(i.cpu(), ei.narrow(dim, 0, kk))
    for sorted_ in (True, False):  # sorted=False may return any order: compare sorted values
        v, i = torch.topk(dev(x), 30, 1, True, sorted_)
        assert_same(v.sort(1, descending=True).values, torch.topk(x, 30, 1).values, exact=True)
        assert torch.equal(x.gather(1, i.cpu()).nan_to_num(99), v.cpu().nan_to_num(99))
    check(torch.topk, x, 0, 1, exact=True)


def test_topk_ties_nan_and_errors(no_fallback):
    x = torch.tensor([[1.0, NAN, 2.0, 2.0, 3.0], [5.0, 1.0, 1.0, 0.0, -1.0]])
    v, i = torch.topk(dev(x), 3)
    ev, _ = torch.topk(x, 3)
    assert_same(v, ev)
    assert_same(dev(x.gather(1, i.cpu())), ev)  # tie order may differ: indices must point at the values
    with pytest.raises(RuntimeError, match="k out of range"):
        torch.topk(dev(x), 6)
    with pytest.raises(RuntimeError, match="k out of range"):
        torch.topk(dev(x), -1)
    check(torch.topk, torch.tensor([True, False]), 1)  # the CPU rejects bool


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.uint8])
def test_kthvalue(no_fallback, dtype):
    x = torch.randperm(40, generator=torch.Generator().manual_seed(2)).reshape(5, 8).to(dtype)
    check(torch.kthvalue, x, 3, 1, exact=True)
    check(torch.kthvalue, x, 5, 0, True, exact=True)
    check(torch.kthvalue, torch.tensor(3.0).to(dtype), 1, exact=True)
    with pytest.raises(RuntimeError, match="out of range"):
        torch.kthvalue(dev(x), 9, 1)
    with pytest.raises(IndexError):
        torch.kthvalue(dev(torch.zeros(3, 0)), 1, 1)


@pytest.mark.parametrize("fn", [torch.median, torch.nanmedian])
def test_median(no_fallback, fn):
    x = torch.randperm(42, generator=torch.Generator().manual_seed(3)).reshape(6, 7).float()
    check(fn, x, 1, exact=True)
    check(fn, x, 0, True, exact=True)
    check(fn, x, exact=True)
    check(fn, x.to(torch.int32), 1, exact=True)
    # NaN rows: median returns the first NaN, nanmedian ignores them (all-NaN row: NaN).
    y = torch.tensor([[3.0, 1.0, NAN, 2.0, NAN, 0.5], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]])
    check(fn, y, 1, exact=True)
    check(fn, y, exact=True)
    # All NaN: the value is NaN (the CPU's index there depends on its selection algorithm).
    all_nan = torch.full((2, 6), NAN)
    assert_same(fn(dev(all_nan), 1).values, fn(all_nan, 1).values)
    assert_same(fn(dev(all_nan)), fn(all_nan))
    check(fn, torch.zeros(0, 3), 0, exact=True)
    with pytest.raises(IndexError):
        fn(dev(torch.zeros(3, 0)), 1)


def test_kthvalue_ties_pick_the_cpu_index(no_fallback):
    # kthvalue runs the CPU's quickselect, so tied values report the same index.
    g = torch.Generator().manual_seed(9)
    x = torch.randint(0, 4, (6, 41), generator=g).float()
    x[torch.rand(6, 41, generator=g) < 0.15] = NAN
    for k in (1, 7, 20, 41):
        check(torch.kthvalue, x, k, 1, exact=True)
        check(torch.kthvalue, x.to(torch.float16), k, 1, exact=True)
    check(torch.kthvalue, x.nan_to_num(5).to(torch.int64), 13, 1, exact=True)


def test_median_empty_falls_back_like_cpu():
    check(torch.median, torch.tensor([]))


def test_mode(no_fallback):
    x = torch.tensor([[2, 1, 2, 1, 3, 3], [5, 5, 1, 1, 1, 0], [7, 7, 7, 7, 7, 7]])
    check(torch.mode, x, 1, exact=True)  # ties: the smallest value, its last index
    check(torch.mode, x.float(), 1, True, exact=True)
    check(torch.mode, torch.tensor([True, False, True]), exact=True)
    check(torch.mode, torch.tensor(2.0), exact=True)
    check(torch.mode, torch.zeros(0, 3), 1, exact=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.int32])
def test_searchsorted(no_fallback, dtype):
    bd = torch.tensor([1, 2, 2, 3, 5, 8]).to(dtype)
    v = torch.tensor([[0, 2, 3], [9, 1, 5]]).to(dtype)
    for kw in [{}, {"right": True}, {"side": "right"}, {"out_int32": True}]:
        check(torch.searchsorted, bd, v, exact=True, **kw)
    check(torch.searchsorted, bd, 2, exact=True)
    check(torch.bucketize, v, bd, exact=True)
    check(torch.bucketize, v, bd, right=True, out_int32=True, exact=True)
    check(torch.bucketize, 3, bd, exact=True)


def test_searchsorted_nd_sorter_mixed_and_errors(no_fallback):
    g = torch.Generator().manual_seed(4)
    bd = torch.randn(3, 9, generator=g)
    v = torch.randn(3, 4, generator=g)
    check(torch.searchsorted, bd.sort().values, v, exact=True)
    check(torch.searchsorted, bd, v, sorter=bd.argsort(), exact=True)
    check(torch.searchsorted, bd, v, sorter=bd.argsort(), side="right", exact=True)
    check(torch.searchsorted, torch.tensor([1, 3, 5]), torch.tensor([0.5, 3.0, 9.0]), exact=True)
    check(torch.searchsorted, torch.tensor([1.0, 2.0]), torch.tensor([NAN, INF]), exact=True)
    check(torch.searchsorted, torch.tensor([1.0, 2.0]), torch.zeros(0), exact=True)
    check(torch.searchsorted, torch.zeros(0), torch.tensor([1.0]), exact=True)
    with pytest.raises(RuntimeError, match="sorter index out of range"):
        torch.searchsorted(dev(bd), dev(v), sorter=dev(bd.argsort() + 1))
    with pytest.raises(RuntimeError, match="boundaries tensor should be 1 dimension"):
        torch.searchsorted(dev(bd), dev(torch.zeros(2)))
    with pytest.raises(RuntimeError, match="side can only be"):
        torch.searchsorted(dev(bd), dev(v), side="middle")
    with pytest.raises(RuntimeError, match="must be 1 dimension"):
        torch.bucketize(dev(v), dev(bd))
    out = dev(torch.empty(0, dtype=torch.long))
    torch.searchsorted(dev(bd.sort().values), dev(v), out=out)
    assert_same(out, torch.searchsorted(bd.sort().values, v), exact=True)


def test_isin(no_fallback):
    g = torch.Generator().manual_seed(5)
    x = torch.randint(0, 40, (6, 7), generator=g)
    t = torch.randint(0, 40, (25,), generator=g)
    check(torch.isin, x, t, exact=True)
    check(torch.isin, x, t, invert=True, exact=True)
    check(torch.isin, x.t(), t.reshape(5, 5), exact=True)
    check(torch.isin, torch.tensor([1.0, NAN, 2.0, -0.0]), torch.tensor([NAN, 2.0, 0.0]), exact=True)
    check(torch.isin, torch.tensor([1, 2]), torch.tensor([2.5, 2.0]), exact=True)
    check(torch.isin, x, torch.zeros(0, dtype=torch.long), exact=True)
    check(torch.isin, torch.tensor([True]), torch.tensor([True]))  # the CPU rejects bool
    check(torch.isin, x, 7, exact=True)
    check(torch.isin, x, 7.5, invert=True, exact=True)
    check(torch.isin, 7, t, exact=True)
    check(torch.isin, torch.tensor([1.0, 2.5]), 2.5, exact=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.uint8, torch.bool])
def test_unique(no_fallback, dtype):
    x = make((5, 8), dtype, low=0, high=9)
    for sorted_ in (True, False):
        check(torch.unique, x, sorted=sorted_, return_inverse=True, return_counts=True, exact=True)
    check(torch.unique, x, exact=True)
    check(torch.unique_consecutive, x, return_inverse=True, return_counts=True, exact=True)
    check(torch.unique_consecutive, x.reshape(-1), dim=0, exact=True)


def test_unique_special(no_fallback):
    x = torch.tensor([3.0, NAN, 1.0, NAN, 1.0, 0.0, -0.0])
    check(torch.unique, x, return_inverse=True, return_counts=True, exact=True)
    check(torch.unique_consecutive, torch.tensor([3.0, NAN, NAN, 1.0, 1.0]), return_inverse=True,
          return_counts=True, exact=True)
    check(torch.unique, torch.tensor(3.0), return_inverse=True, return_counts=True, exact=True)
    check(torch.unique, torch.zeros(0, 3), return_inverse=True, return_counts=True, exact=True)


def test_bincount(no_fallback):
    g = torch.Generator().manual_seed(6)
    x = torch.randint(0, 50, (300,), generator=g)
    check(torch.bincount, x, exact=True)
    check(torch.bincount, x.to(torch.uint8), minlength=60, exact=True)
    check(torch.bincount, x.to(torch.int32), weights=torch.rand(300, generator=g), rtol=1e-5, atol=1e-5)
    check(torch.bincount, torch.tensor([], dtype=torch.long), minlength=3, exact=True)
    # Integer/bool weights sum exactly in int64 and give the CPU's float64 result.
    for w in (torch.randint(-5, 5, (300,), generator=g), torch.randint(0, 2, (300,), generator=g).bool(),
              torch.full((300,), 2**40) * torch.randint(-3, 3, (300,), generator=g)):
        check(torch.bincount, x, weights=w, exact=True)


def test_bincount_errors_and_float64_weights():
    check(torch.bincount, torch.tensor([1, -2]))
    check(torch.bincount, torch.tensor([[1, 2]]))
    check(torch.bincount, torch.tensor([1, 2]), minlength=-1)
    check(torch.bincount, torch.tensor([1, 2, 2]), weights=torch.tensor([1.0, 2.0, 3.0]).double())


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_histc(no_fallback, dtype):
    x = (torch.rand(3000, generator=torch.Generator().manual_seed(7)) * 7 - 1).to(dtype)
    check(torch.histc, x, bins=10, min=-0.3, max=5.1, exact=True)
    check(torch.histc, x, bins=13, exact=True)  # the data's own range
    check(torch.histc, x.reshape(30, 100).t(), bins=7, min=0, max=3, exact=True)
    check(torch.histc, torch.tensor([2.0, 2.0, 2.0]).to(dtype), bins=4, exact=True)
    check(torch.histc, torch.tensor([2.0, NAN, 1.0]).to(dtype), bins=4, min=0, max=3, exact=True)
    check(torch.histc, torch.tensor([]).to(dtype), bins=3, exact=True)
    out = dev(torch.empty(0, dtype=dtype))
    torch.histc(dev(x), bins=5, min=0, max=2, out=out)
    assert_same(out, torch.histc(x, bins=5, min=0, max=2), exact=True)


def test_histc_errors():
    check(torch.histc, torch.tensor([1.0, 2.0]), bins=0)
    check(torch.histc, torch.tensor([1.0, 2.0]), bins=3, min=3, max=1)
    check(torch.histc, torch.tensor([1.0, INF]), bins=3)
    check(torch.histc, torch.tensor([1, 2]), bins=3)


def test_sort_family_gradients():
    x = torch.randperm(20, generator=torch.Generator().manual_seed(8)).reshape(4, 5).float()
    for fn in (lambda t: stable_sort(t, 1).values, lambda t: t.topk(2, 1).values,
               lambda t: t.median(1).values, lambda t: t.kthvalue(2, 0).values):
        xc = x.clone().requires_grad_()
        xd = dev(x).requires_grad_()
        (fn(xc) * torch.arange(fn(xc).numel()).reshape(fn(xc).shape)).sum().backward()
        w = dev(torch.arange(fn(xc).numel()).reshape(fn(xc).shape))
        (fn(xd) * w).sum().backward()
        assert_same(xd.grad, xc.grad)


def test_long_rows_stay_within_serial_loop_limits(no_fallback):
    # llvmpipe stops an invocation's loops after 65535 iterations in all: long rows must not
    # be walked by one invocation (kthvalue's quickselect is for short rows only).
    x = torch.arange(3000.0).flip(0)
    for k in (1, 700, 3000):
        assert_same(torch.kthvalue(dev(x), k).values, torch.kthvalue(x, k).values)
    y = torch.arange(1500.0).repeat(2)
    assert_same(torch.mode(dev(y)).values, torch.mode(y).values)
    assert_same(torch.median(dev(y)), torch.median(y))


def test_out_on_another_device_raises():
    a = dev(make((2, 3), torch.float32))
    for fn in (lambda: torch.sort(a, out=(torch.empty(0), torch.empty(0, dtype=torch.long))),
               lambda: torch.topk(a, 2, out=(torch.empty(0), torch.empty(0, dtype=torch.long))),
               lambda: torch.histc(a, out=torch.empty(0)),
               lambda: torch.cumsum(a, 1, out=torch.empty(0))):
        with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
            fn()
