"""The native reduction and softmax family against the CPU: dims (None, single, several,
negative), keepdim, both kernel shapes (an invocation per output for short reductions, a
workgroup per output for long ones), strided and offset inputs, 0-dim and empty tensors,
dtypes and the CPU's result dtypes, NaN propagation and first-index ties, out=, the CPU's
errors, and gradients through sum/mean/softmax/log_softmax. The CPU fallback is disabled,
so a passing test also proves the ops ran natively."""
import math

import pytest
import torch
import torch.nn.functional as F

from conftest import (DEVICE, FLOAT_DTYPES, INT64_MAX, INT64_MIN, assert_same, check, dev,
                      make)

pytestmark = [
    pytest.mark.usefixtures("no_fallback"),
    # Degenerate var/std cases warn on both devices (checked in test_var_warns_like_the_cpu).
    pytest.mark.filterwarnings("ignore:.*degrees of freedom is <= 0"),
]

INTS = [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8]
ALL = FLOAT_DTYPES + INTS + [torch.bool]
# Sums of a few hundred float32 values: the CPU and the device add in different orders.
LOOSE = {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.float16: dict(rtol=2e-3, atol=1e-2),
         torch.bfloat16: dict(rtol=2e-2, atol=5e-2)}

# (shape, dim) cases: short and long reductions, inner dims, several dims, negative dims.
CASES = [
    ((3, 5, 7), None),
    ((3, 5, 7), 0),
    ((3, 5, 7), -1),
    ((3, 5, 7), (0, 2)),
    ((3, 5, 7), (1, -1)),
    ((4, 700), 1),       # a workgroup per output
    ((600, 3), 0),       # a long reduction over a strided dim
    ((2, 300, 3), (0, 2)),  # reduced dims not one run: permuted first
    ((40, 2100), 0),     # many outputs side by side: an invocation each
]

# name -> (fn(x, dim, keepdim), dtypes)
REDUCTIONS = {
    "sum": (lambda x, d, k: torch.sum(x, d, keepdim=k) if d is not None else torch.sum(x), ALL),
    "mean": (lambda x, d, k: torch.mean(x, d, keepdim=k) if d is not None else torch.mean(x),
             FLOAT_DTYPES),
    "nansum": (lambda x, d, k: torch.nansum(x, d, keepdim=k), FLOAT_DTYPES + [torch.int32]),
    "amax": (lambda x, d, k: torch.amax(x, d if d is not None else (), keepdim=k), ALL),
    "amin": (lambda x, d, k: torch.amin(x, d if d is not None else (), keepdim=k), ALL),
    "logsumexp": (lambda x, d, k: torch.logsumexp(x, d if d is not None else tuple(range(x.dim())),
                                               keepdim=k),
                  FLOAT_DTYPES + [torch.int32]),
    "var": (lambda x, d, k: torch.var(x, d, keepdim=k), FLOAT_DTYPES),
    "std0": (lambda x, d, k: torch.std(x, d, keepdim=k, correction=0), FLOAT_DTYPES),
    "var_mean": (lambda x, d, k: torch.var_mean(x, d, keepdim=k), FLOAT_DTYPES),
    "std_mean": (lambda x, d, k: torch.std_mean(x, d, keepdim=k, correction=2), [torch.float32]),
    "all": (lambda x, d, k: torch.all(x, d, keepdim=k) if d is not None else torch.all(x), ALL),
    "any": (lambda x, d, k: torch.any(x, d, keepdim=k) if d is not None else torch.any(x), ALL),
    "count_nonzero": (lambda x, d, k: torch.count_nonzero(x, d), ALL),
    "norm2": (lambda x, d, k: torch.linalg.vector_norm(x, 2, d, keepdim=k), FLOAT_DTYPES),
    "norm1": (lambda x, d, k: torch.linalg.vector_norm(x, 1, d, keepdim=k), [torch.float32]),
    "norm_inf": (lambda x, d, k: torch.linalg.vector_norm(x, math.inf, d, keepdim=k),
                 [torch.float32, torch.float16]),
    "norm_ninf": (lambda x, d, k: torch.linalg.vector_norm(x, -math.inf, d, keepdim=k),
                  [torch.float32]),
    "norm0": (lambda x, d, k: torch.linalg.vector_norm(x, 0, d, keepdim=k), [torch.float32]),
    "norm3": (lambda x, d, k: torch.linalg.vector_norm(x, 3.5, d, keepdim=k), [torch.float32]),
    "norm_legacy": (lambda x, d, k: torch.norm(x, 2, d, keepdim=k), [torch.float32]),
}

# Single-dim reductions (dim=None means the flattened input where the op allows it).
SINGLE = {
    "prod": (lambda x, d, k: torch.prod(x, d, keepdim=k) if d is not None else torch.prod(x), ALL),
    "max_dim": (lambda x, d, k: tuple(torch.max(x, d, keepdim=k)) if d is not None else torch.max(x),
                ALL),
    "min_dim": (lambda x, d, k: tuple(torch.min(x, d, keepdim=k)) if d is not None else torch.min(x),
                ALL),
    "argmax": (lambda x, d, k: torch.argmax(x, d, keepdim=k), ALL[:-1]),
    "argmin": (lambda x, d, k: torch.argmin(x, d, keepdim=k), ALL[:-1]),
    "aminmax": (lambda x, d, k: tuple(torch.aminmax(x, dim=d, keepdim=k)), ALL[:-1]),
}
SINGLE_CASES = [((3, 5, 7), None), ((3, 5, 7), 1), ((3, 5, 7), -1), ((4, 700), 1), ((600, 3), 0)]


def _input(shape, dtype, name, seed=0):
    if name in ("prod",) and dtype.is_floating_point:
        return make(shape, dtype, seed=seed, low=0.5, high=1.5)
    if name == "prod" and dtype != torch.bool:
        return make(shape, dtype, seed=seed, low=-2, high=2)
    if dtype.is_floating_point:
        return make(shape, dtype, seed=seed, low=-2, high=2)
    return make(shape, dtype, seed=seed)


def _tol(name, dtype):
    if name.startswith("norm3") and dtype == torch.float32:
        return dict(rtol=1e-4, atol=1e-4)
    return LOOSE.get(dtype, {})


@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_reductions(name):
    fn, dtypes = REDUCTIONS[name]
    for dtype in dtypes:
        for shape, dim in CASES:
            if dtype != torch.float32 and shape not in ((3, 5, 7), (4, 700)):
                continue
            x = _input(shape, dtype, name)
            for keepdim in (False, True):
                check(lambda t: fn(t, dim, keepdim), x, tolerances=_tol(name, dtype))


@pytest.mark.parametrize("name", list(SINGLE))
def test_single_dim_reductions(name):
    fn, dtypes = SINGLE[name]
    for dtype in dtypes:
        for shape, dim in SINGLE_CASES:
            if dtype not in (torch.float32, torch.int64) and shape != (3, 5, 7):
                continue
            x = _input(shape, dtype, name)
            for keepdim in (False, True):
                check(lambda t: fn(t, dim, keepdim), x, tolerances=_tol(name, dtype))


def test_result_dtypes_follow_the_cpu():
    for dtype in INTS + [torch.bool]:
        x = make((4, 6), dtype)
        for fn in (torch.sum, torch.prod, torch.nansum, lambda t: torch.sum(t, 1),
                   lambda t: torch.prod(t, 0)):
            check(fn, x, exact=True)
    x = make((4, 6), torch.float32)
    check(lambda t: torch.sum(t, 1, dtype=torch.int64), x, exact=True)
    check(lambda t: torch.sum(t, 1, dtype=torch.float16), x, tolerances=LOOSE[torch.float16])
    check(lambda t: torch.mean(t, 0, dtype=torch.bfloat16), x, tolerances=LOOSE[torch.bfloat16])
    check(lambda t: torch.sum(t.int(), 1, dtype=torch.float32), x)
    # Into a half type the CPU casts every element first (then adds in float).
    y = torch.full((3, 50), 1.0003)
    y[:, ::3] = 2.0007
    for dt in (torch.float16, torch.bfloat16):
        check(lambda t: torch.sum(t, 1, dtype=dt), y, exact=True)
        check(lambda t: torch.prod(t[:, :8], 1, dtype=dt), y, exact=True)
        check(lambda t: torch.mean(t, 1, dtype=dt), y, exact=True)
    check(lambda t: torch.all(t.to(torch.uint8)), x, exact=True)   # uint8 stays uint8
    check(lambda t: torch.any(t.to(torch.uint8), 1), x, exact=True)
    check(lambda t: torch.linalg.vector_norm(t, dtype=torch.float16), x.half(),
          tolerances=LOOSE[torch.float16])
    check(lambda t: torch.logsumexp(t.int(), 1), x)


def test_empty_dim_lists():
    # sum/amax/mean/... over dim=() reduce everything; all/any over dim=() reduce nothing.
    x = make((2, 3), torch.float32)
    x[0, 1] = 0
    for fn in (lambda t: torch.all(t, dim=()), lambda t: torch.any(t, dim=[]),
               lambda t: torch.all(t, dim=(), keepdim=True), lambda t: torch.sum(t, dim=()),
               lambda t: torch.amax(t, dim=()), lambda t: torch.mean(t, dim=[]),
               lambda t: torch.linalg.vector_norm(t, dim=()), lambda t: torch.count_nonzero(t, dim=()),
               lambda t: torch.var(t, dim=()), lambda t: torch.logsumexp(t, dim=(), keepdim=True)):
        check(fn, x, tolerances=LOOSE[torch.float32])


def test_strided_and_offset_inputs():
    base = make((6, 9, 8), torch.float32, low=-2, high=2)
    views = [
        lambda t: t.transpose(0, 2),
        lambda t: t[1:, ::2, 3:],
        lambda t: t.permute(1, 2, 0)[2:],
        lambda t: t[:, 4],
    ]
    for view in views:
        for fn in (lambda t: t.sum(0), lambda t: t.amax((0, -1)), lambda t: t.mean(-1),
                   lambda t: tuple(t.max(1)), lambda t: t.argmin(0), lambda t: t.var(1),
                   lambda t: torch.softmax(t, 0), lambda t: torch.log_softmax(t, -1)):
            check(lambda t: fn(view(t)), base, tolerances=LOOSE[torch.float32])


def test_memory_order_inputs():
    # Transposed and channels-last inputs reduce in memory order (no copy): same results.
    x = make((2, 3, 5, 4), torch.float32, low=-2, high=2)
    cl = lambda t: t.contiguous(memory_format=torch.channels_last)
    for fn in (lambda t: cl(t).mean((2, 3)), lambda t: cl(t).sum(1), lambda t: cl(t).amax((0, 2, 3)),
               lambda t: tuple(cl(t).max(1)), lambda t: cl(t).var((0, 2, 3)), lambda t: cl(t).sum(),
               lambda t: t.transpose(1, 3).sum(-1), lambda t: t.transpose(0, 1).argmax(1),
               lambda t: t.permute(3, 2, 1, 0).sum((0, 3)), lambda t: cl(t)[:, :, 1:].sum(1),
               lambda t: cl(t[:, :1]).sum(2), lambda t: t.permute(3, 2, 1, 0).sum(1)):
        check(fn, x, tolerances=LOOSE[torch.float32])


def test_zero_dim_inputs():
    for dtype in (torch.float32, torch.int64, torch.bool, torch.float16):
        x = make((), dtype)
        for fn in (torch.sum, torch.prod, torch.amax, torch.max, torch.min, torch.argmax,
                   torch.all, torch.any, lambda t: torch.sum(t, 0), lambda t: torch.sum(t, -1, True),
                   lambda t: tuple(torch.max(t, 0)), lambda t: torch.count_nonzero(t),
                   lambda t: tuple(torch.aminmax(t))):
            check(fn, x)
    x = make((), torch.float32)
    for fn in (torch.mean, torch.var, lambda t: torch.logsumexp(t, 0),
               lambda t: torch.softmax(t, 0), lambda t: torch.log_softmax(t, -1),
               torch.linalg.vector_norm):
        check(fn, x)


def test_empty_inputs():
    x = torch.empty(0, 4)
    # Reductions with an identity give it (mean/var: nan); over a non-empty dim: empty.
    for fn in (torch.sum, torch.prod, torch.mean, torch.nansum, torch.all, torch.any,
               torch.count_nonzero, torch.var, torch.linalg.vector_norm,
               lambda t: torch.sum(t, 0), lambda t: torch.sum(t, 1), lambda t: torch.prod(t, 0),
               lambda t: torch.mean(t, 0, keepdim=True), lambda t: torch.amax(t, 1),
               lambda t: tuple(torch.max(t, 1)), lambda t: torch.argmax(t, 1),
               lambda t: torch.logsumexp(t, 0), lambda t: torch.std(t, 0),
               lambda t: torch.softmax(t, 0), lambda t: torch.all(t, 0),
               lambda t: torch.linalg.vector_norm(t, 1, 0)):
        check(fn, x)
    check(lambda t: torch.sum(t, 0), torch.empty(0, 4, dtype=torch.int32), exact=True)
    check(lambda t: torch.prod(t, 0), torch.empty(0, 3, dtype=torch.int64), exact=True)
    # Without an identity the CPU raises.
    for fn in (torch.max, torch.min, torch.argmax, torch.amax, lambda t: torch.amax(t, 0),
               lambda t: torch.max(t, 0), lambda t: torch.argmin(t, 0), torch.aminmax,
               lambda t: torch.aminmax(t, dim=0), lambda t: torch.linalg.vector_norm(t, math.inf)):
        with pytest.raises(Exception) as cpu_error:
            fn(x)
        with pytest.raises(Exception) as dev_error:
            fn(dev(x))
        assert type(dev_error.value) is type(cpu_error.value)
        assert str(dev_error.value).split("\n")[0] == str(cpu_error.value).split("\n")[0]


def test_nan_and_first_index():
    x = torch.tensor([[1.0, 3.0, 3.0, 2.0], [float("nan"), 5.0, float("nan"), 1.0],
                      [-1.0, -1.0, -4.0, -4.0]])
    for fn in (lambda t: tuple(t.max(1)), lambda t: tuple(t.min(1)), lambda t: t.argmax(1),
               lambda t: t.argmin(1), lambda t: t.amax(1), lambda t: t.amin(1), torch.max,
               torch.min, torch.argmax, lambda t: tuple(torch.aminmax(t, dim=1)),
               lambda t: torch.nansum(t, 1), lambda t: torch.sum(t, 1),
               lambda t: torch.softmax(t, 1), lambda t: torch.logsumexp(t, 1),
               lambda t: torch.linalg.vector_norm(t, math.inf, 1),
               lambda t: torch.linalg.vector_norm(t, 0, 1), lambda t: torch.all(t, 1)):
        check(fn, x, exact=True, tolerances=dict(rtol=1e-6, atol=1e-6))
    # Long rows (the workgroup kernel): ties and NaN far apart.
    y = torch.zeros(3, 1000)
    y[0, 10] = y[0, 900] = 7.0
    y[1, 999] = float("nan")
    y[1, 500] = float("nan")
    y[2, :] = -1.0
    for fn in (lambda t: tuple(t.max(1)), lambda t: t.argmin(1), lambda t: t.argmax(1),
               lambda t: t.amax(1)):
        check(fn, y, exact=True)
    inf = torch.tensor([[float("inf"), 1.0], [float("-inf"), float("-inf")]])
    check(lambda t: torch.logsumexp(t, 1), inf)
    check(lambda t: torch.softmax(t, 1), inf)


def test_int64_exact():
    x = torch.tensor([[INT64_MAX, -1, 5], [INT64_MIN, 7, 1], [2**40, 2**41, -(2**33)]])
    for fn in (lambda t: t.sum(1), lambda t: t.amax(1), lambda t: t.amin(0), lambda t: tuple(t.max(1)),
               lambda t: t.argmin(1), torch.max, lambda t: t.prod(0), lambda t: torch.count_nonzero(t, 0)):
        check(fn, x, exact=True)
    big = torch.full((2, 500), 2**35, dtype=torch.int64)
    check(lambda t: t.sum(1), big, exact=True)
    check(lambda t: t.int().sum(), torch.full((1000,), 2**30), exact=True)  # int32 sums to int64


def test_out_variants():
    x = make((4, 6), torch.float32)
    d = dev(x)
    out = torch.empty(0, device=DEVICE)
    torch.sum(d, 1, out=out)
    assert_same(out, torch.sum(x, 1), **LOOSE[torch.float32])
    # A non-contiguous out receives the result through a copy.
    out = torch.zeros(4, 2, device=DEVICE).t()
    torch.amax(d, 1, keepdim=False, out=out[0])
    assert_same(out[0], torch.amax(x, 1))
    values, indices = torch.empty(0, device=DEVICE), torch.empty(0, dtype=torch.long, device=DEVICE)
    torch.max(d, 0, out=(values, indices))
    ev, ei = torch.max(x, 0)
    assert_same(values, ev)
    assert_same(indices, ei)
    out = torch.empty(4, dtype=torch.long, device=DEVICE)
    torch.argmax(d, 1, out=out)
    assert_same(out, torch.argmax(x, 1))
    for fn in (torch.mean, torch.var, torch.std, torch.logsumexp, torch.nansum):
        out = torch.empty(0, device=DEVICE)
        fn(d, 1, out=out)
        assert_same(out, fn(x, 1), **LOOSE[torch.float32])
    out = torch.empty(0, dtype=torch.bool, device=DEVICE)
    torch.all(d > 0, 1, out=out)
    assert_same(out, torch.all(x > 0, 1))
    out = torch.empty(0, device=DEVICE)
    torch.linalg.vector_norm(d, 3, (0, 1), out=out)
    assert_same(out, torch.linalg.vector_norm(x, 3, (0, 1)), rtol=1e-4, atol=1e-4)
    mn, mx = torch.empty(0, device=DEVICE), torch.empty(0, device=DEVICE)
    torch.aminmax(d, dim=0, out=(mn, mx))
    assert_same((mn, mx), tuple(torch.aminmax(x, dim=0)))
    # The out dtype must be the result dtype, as on the CPU.
    with pytest.raises(RuntimeError) as cpu_error:
        torch.amax(x, 1, out=torch.empty(0, dtype=torch.int32))
    with pytest.raises(RuntimeError) as dev_error:
        torch.amax(d, 1, out=torch.empty(0, dtype=torch.int32, device=DEVICE))
    assert str(dev_error.value) == str(cpu_error.value)
    with pytest.raises(RuntimeError, match="Expected out tensor to have dtype"):
        torch.max(d, 0, out=(torch.empty(0, dtype=torch.int32, device=DEVICE), indices))
    # sum(out=) with an int out: ATen's dtype rule (out's dtype is the result dtype).
    out = torch.empty(0, dtype=torch.int64, device=DEVICE)
    xi = make((4, 6), torch.int32)
    torch.sum(dev(xi), 0, out=out)
    assert_same(out, torch.sum(xi, 0), exact=True)


def test_errors_match_the_cpu():
    x = make((3, 4), torch.float32)
    cases = [
        lambda t: torch.sum(t, 2),
        lambda t: torch.sum(t, (0, 0)),
        lambda t: torch.var(t.int()),
        lambda t: torch.std_mean(t.long(), 0),
        lambda t: torch.mean(t.int()),
        lambda t: torch.trace(t[0]),
        lambda t: torch.argmax(t, 5),
        lambda t: torch.count_nonzero(t, (1, 1)),
        lambda t: torch.softmax(t, 3),
        lambda t: torch._softmax(t.half(), 0, True),
        lambda t: torch.logsumexp(t, 0, out=torch.empty(0, dtype=torch.int64, device=t.device)),
        lambda t: torch.linalg.vector_norm(t.int()),
        lambda t: torch._softmax(t.int(), 0, False),
        lambda t: torch._log_softmax(t.long(), 1, False),
        lambda t: torch._softmax_backward_data(t.int(), t.int(), 1, torch.int32),
    ]
    for fn in cases:
        assert check(fn, x) is False  # both raised the same exception type


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_softmax_family(dtype):
    for shape, dim in [((3, 5, 7), -1), ((3, 5, 7), 0), ((3, 5, 7), 1), ((2, 300), 1),
                       ((300, 2), 0), ((4, 1), 1)]:
        x = make(shape, dtype, low=-5, high=5)
        tol = {torch.float32: dict(rtol=1e-5, atol=1e-6)}.get(dtype, LOOSE.get(dtype))
        check(lambda t: torch.softmax(t, dim), x, tolerances=tol)
        check(lambda t: torch.log_softmax(t, dim), x, tolerances=LOOSE[dtype])
        g = make(shape, dtype, seed=1)
        y = torch.softmax(x, dim)
        ly = torch.log_softmax(x, dim)
        check(lambda a, b: torch._softmax_backward_data(a, b, dim, dtype), g, y, tolerances=tol)
        check(lambda a, b: torch._log_softmax_backward_data(a, b, dim, dtype), g, ly,
              tolerances=LOOSE[dtype])
    # softmax(dtype=...) converts first; an out= of the right dtype.
    x = make((3, 4), dtype)
    check(lambda t: torch.softmax(t, 1, dtype=torch.float32), x, tolerances=LOOSE[torch.float32])
    out = torch.empty(0, dtype=dtype, device=DEVICE)
    torch._softmax(dev(x), 0, False, out=out)
    assert_same(out, torch._softmax(x, 0, False), **LOOSE[dtype])


def test_gradients():
    x = make((4, 300), torch.float32, low=-3, high=3)
    w = make((4, 300), torch.float32, seed=3)
    fns = [
        lambda t: t.sum(),
        lambda t: (t.sum(1) ** 2).sum(),
        lambda t: (t.mean(0) * t.mean(0)).sum(),
        lambda t: (torch.softmax(t, 1) * dev_like(w, t)).sum(),
        lambda t: (torch.log_softmax(t, 0) * dev_like(w, t)).sum(),
        lambda t: (t.amax(1) + t.var(0).sum() + torch.logsumexp(t, 1)).sum(),
    ]
    for fn in fns:
        xc = x.clone().requires_grad_()
        xd = dev(x).requires_grad_()
        fn(xc).backward()
        fn(xd).backward()
        assert_same(xd.grad, xc.grad, rtol=1e-4, atol=1e-5)


def dev_like(w, t):
    return w.to(t.device)


def test_trace():
    for dtype in (torch.float32, torch.int32, torch.bool, torch.int64):
        for shape in ((4, 4), (3, 6), (7, 2), (0, 3)):
            check(torch.trace, make(shape, dtype), tolerances=LOOSE.get(dtype))


def test_long_reduction_accuracy():
    # 2^16 elements into one output: the workgroup tree keeps float32 sums close.
    x = make((1, 65536), torch.float32, low=0, high=1)
    check(lambda t: t.sum(), x, tolerances=dict(rtol=1e-5, atol=0))
    check(lambda t: t.mean(1), x, tolerances=dict(rtol=1e-5, atol=0))
    check(lambda t: t.var(), x, tolerances=dict(rtol=1e-4, atol=0))
    check(lambda t: t.half().sum(), x, tolerances=dict(rtol=1e-3, atol=0))


def test_two_stage_reductions():
    # Long runs into few outputs are reduced in chunks first, then the chunks combined.
    x = make((3, 20011), torch.float32, low=-2, high=2)
    x[1, 12345] = 9.5
    x[2, 17] = float("nan")
    fns = [lambda t: t.sum(1), lambda t: t.mean(1), lambda t: t.nansum(1), lambda t: t.amax(1),
           lambda t: t.amin(1), torch.max, lambda t: (t > 1.9).any(1), lambda t: (t > -1.99).all(1),
           lambda t: torch.count_nonzero(t > 0, 1), lambda t: torch.linalg.vector_norm(t, 2, 1),
           lambda t: torch.linalg.vector_norm(t, 1, 1), lambda t: torch.linalg.vector_norm(t, 0, 1),
           lambda t: torch.linalg.vector_norm(t, 2.5, 1), lambda t: torch.linalg.vector_norm(t, math.inf, 1),
           lambda t: torch.linalg.vector_norm(t, -math.inf, 1), lambda t: (1 + t * 1e-5).prod(1),
           lambda t: (t * 100).long().sum(1), lambda t: (t * 100).int().sum(), lambda t: t.half().sum(1),
           lambda t: (t > 0).sum(1), lambda t: tuple(torch.aminmax(t, dim=1)),
           lambda t: tuple(torch.aminmax(t[:2])), lambda t: tuple(torch.aminmax((t * 50).long()))]
    for fn in fns:
        check(fn, x, tolerances=dict(rtol=1e-4, atol=1e-3))


def test_renorm():
    for dtype in FLOAT_DTYPES:
        x = make((4, 5, 3), dtype, low=-3, high=3)
        for p, dim, maxnorm in ((2, 0, 2.0), (1, -1, 5.0), (3.5, 1, 0.5), (2, 2, 100.0)):
            check(lambda t: torch.renorm(t, p, dim, maxnorm), x, tolerances=LOOSE.get(dtype))
    x = make((4, 5), torch.float32)
    check(lambda t: torch.renorm(t, -1, 0, 1.0), x)  # p must be positive: same error
    check(lambda t: torch.renorm(t, 2, 0, -1.0), x)
    out = torch.empty(0, device=DEVICE)
    torch.renorm(dev(x), 2, 1, 1.0, out=out)
    assert_same(out, torch.renorm(x, 2, 1, 1.0))


def test_var_warns_like_the_cpu():
    for fn, name in ((torch.var, "var"), (torch.std, "std"), (torch.var_mean, "var_mean"),
                     (torch.std_mean, "std_mean")):
        with pytest.warns(UserWarning, match=rf"^{name}\(\): degrees of freedom is <= 0"):
            result = fn(torch.ones(1, 3, device=DEVICE), 0)
        expected = fn(torch.ones(1, 3), 0)
        assert_same(result, expected)


def test_equal():
    a = torch.tensor([[1.0, 2.0], [3.0, float("nan")]])
    d = a.to(DEVICE)
    assert torch.equal(d[:, :1], a[:, :1].to(DEVICE)) is True
    assert torch.equal(d, d) is torch.equal(a, a) is False  # NaN is never equal
    assert torch.equal(d[0], torch.tensor([1.0, 3.0]).to(DEVICE)) is False
    assert torch.equal(d, d[:1]) is False  # sizes differ
    assert torch.equal(d[:, :1], torch.tensor([[1], [3]]).to(DEVICE)) is torch.equal(a[:, :1], torch.tensor([[1], [3]]))
    assert torch.equal(torch.empty(0, device=DEVICE), torch.empty(0, device=DEVICE)) is True
    with pytest.raises(RuntimeError, match="different devices"):
        torch.equal(d, a)
