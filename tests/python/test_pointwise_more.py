"""Native binary and ternary pointwise ops against the CPU: atan2, copysign, nextafter,
hypot, logaddexp(2), xlogy, xlog1py, fmax/fmin, heaviside, the clamp family, lerp,
addcmul, addcdiv. Extremal values (+-0, +-inf, NaN, subnormals), dtypes and promotion,
broadcasting, Python scalars, in-place, out= and the CPU's errors. The CPU fallback is
disabled in every test."""
import math

import pytest
import torch

from conftest import adapter_flushes_subnormals, ftz, DEVICE, NATIVE_DTYPES, assert_same, check, dev, make

pytestmark = pytest.mark.usefixtures("no_fallback")

BINARY = {
    "atan2": torch.atan2,
    "copysign": torch.copysign,
    "nextafter": torch.nextafter,
    "hypot": torch.hypot,
    "logaddexp": torch.logaddexp,
    "logaddexp2": torch.logaddexp2,
    "xlogy": torch.xlogy,
    "xlog1py": torch.special.xlog1py,
    "fmax": torch.fmax,
    "fmin": torch.fmin,
    "heaviside": torch.heaviside,
    "clamp_min_t": torch.clamp_min,
    "clamp_max_t": torch.clamp_max,
    "lerp_scalar": lambda a, b: torch.lerp(a, b, 0.3),
    "lerp_scalar_big": lambda a, b: torch.lerp(a, b, 0.75),
}

EDGE = [0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.0, 0.5, -2.5, 1e-45, -1e-40, 1e30,
        -3e38, 88.0, 1e-20]


def edge_pairs():
    v = torch.tensor(EDGE)
    a, b = torch.meshgrid(v, v, indexing="ij")
    g = torch.Generator().manual_seed(1)
    ra = torch.randn(200, generator=g) * 4
    rb = torch.randn(200, generator=g) * 4
    return torch.cat([a.flatten(), ra]), torch.cat([b.flatten(), rb])


def assert_float_close(actual, expected, rtol=1e-5, atol=1e-6, zero_sign=True):
    a = actual.cpu()
    assert actual.device.type == DEVICE and a.dtype == expected.dtype
    close = torch.isclose(a, expected, rtol=rtol, atol=atol, equal_nan=True)
    same_sign = (torch.signbit(a) == torch.signbit(expected)) | (expected != 0) | (not zero_sign)
    bad = ~(close & same_sign)
    assert not bad.any(), [(i, a[i].item(), expected[i].item()) for i in bad.nonzero().flatten()[:8]]


@pytest.mark.parametrize("name", list(BINARY))
def test_float32_edges(name):
    a, b = edge_pairs()
    if name == "heaviside":
        b = b.clone()
    a, b = ftz(a), ftz(b)  # subnormal inputs are zeros on adapters that flush them
    # clamp(-0.0, min=+0.0): the CPU keeps the first zero; NVIDIA's compiler turns the
    # comparison into max(), which may give either (CUDA's fmax does too).
    zero_sign = not (name.startswith("clamp") and ftz is not None and adapter_flushes_subnormals())
    assert_float_close(BINARY[name](dev(a), dev(b)), ftz(BINARY[name](a, b)), zero_sign=zero_sign)


def test_nextafter_bits():
    # Subnormal steps and signed zeros, bit for bit.
    a = torch.tensor([0.0, -0.0, 0.0, 1e-45, -1e-45, 1.0, 1.0, 3.4028235e38, 1e-38, -0.0])
    b = torch.tensor([1.0, -1.0, -0.0, 0.0, 0.0, 2.0, 0.0, math.inf, 0.0, 0.0])
    actual = torch.nextafter(dev(a), dev(b)).cpu()
    expected = torch.nextafter(a, b)
    assert torch.equal(actual.view(torch.int32), expected.view(torch.int32))


@pytest.mark.parametrize("dtype", NATIVE_DTYPES, ids=str)
@pytest.mark.parametrize("name", list(BINARY))
def test_binary_dtypes(name, dtype):
    a = make((3, 4), dtype, seed=1)
    b = make((3, 4), dtype, seed=2)
    if dtype.is_floating_point:
        b[0, 0] = a[0, 0]
    check(BINARY[name], a, b)


@pytest.mark.parametrize("name", ["atan2", "hypot", "fmax", "xlogy", "copysign"])
def test_broadcast_promotion_scalars(name):
    fn = BINARY[name]
    check(fn, make((3, 1), torch.float32, seed=3), make((1, 4), torch.float32, seed=4))
    check(fn, make((3, 4), torch.float16, seed=3), make((4,), torch.float32, seed=4))
    check(fn, make((3, 4), torch.int32, seed=3), make((3, 4), torch.float32, seed=4))
    check(fn, make((2, 3), torch.float32, seed=5), torch.tensor(2.0))
    base = make((5, 6), torch.float32, seed=6)
    check(lambda t: fn(t[::2, 1:], t[1::2, :-1]), base)
    check(fn, torch.empty(0, 3), torch.empty(0, 3))


def test_scalar_overloads():
    x = make((6,), torch.float32, seed=7)
    check(lambda t: torch.copysign(t, -1.0), x)
    check(lambda t: torch.xlogy(t, 2.0), x)
    check(lambda t: torch.xlogy(3.0, t.abs()), x)
    check(lambda t: torch.special.xlog1py(t, 0.5), x)


@pytest.mark.parametrize("name", ["atan2", "hypot", "fmin", "copysign", "logaddexp"])
def test_inplace_and_out(name):
    a = make((3, 4), torch.float32, seed=8)
    b = make((3, 4), torch.float32, seed=9)
    check(lambda x, y: getattr(x, name + "_")(y), a, b)
    fn = BINARY[name]
    check(lambda x, y: fn(x, y, out=torch.empty(0, device=x.device)), a, b)


def test_heaviside_dtype_mismatch_raises():
    check(torch.heaviside, make((3,), torch.float32), make((3,), torch.float16))


# ---- clamp ----------------------------------------------------------------------------------

CLAMP_BOUNDS = [(-1.5, 2.0), (None, 0.5), (-0.5, None), (3.0, 1.0), (math.nan, 1.0),
                (0.0, math.nan), (1, 2)]


@pytest.mark.parametrize("dtype", NATIVE_DTYPES, ids=str)
@pytest.mark.parametrize("bounds", CLAMP_BOUNDS, ids=str)
def test_clamp_scalar(dtype, bounds):
    x = make((3, 5), dtype, seed=10)
    if dtype.is_floating_point:
        x[0, :3] = torch.tensor([math.nan, math.inf, -math.inf])
    lo, hi = bounds
    check(lambda t: torch.clamp(t, lo, hi), x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32, torch.int64, torch.uint8], ids=str)
def test_clamp_tensor(dtype):
    x = make((3, 5), dtype, seed=11)
    lo = make((3, 1), dtype, seed=12, low=-50 if not dtype.is_floating_point else -1)
    hi = make((1, 5), dtype, seed=13, low=0, high=60 if not dtype.is_floating_point else 2)
    check(torch.clamp, x, lo, hi)
    check(lambda t, l: torch.clamp(t, min=l), x, lo)
    check(lambda t, h: torch.clamp(t, max=h), x, hi)
    check(torch.clamp_min, x, lo)
    check(torch.clamp_max, x, hi)


def test_clamp_nan_tensor_bounds_and_promotion():
    x = torch.tensor([math.nan, -1.0, 0.0, 2.0, 5.0])
    lo = torch.tensor([0.0, math.nan, 0.0, 0.0, 0.0])
    check(torch.clamp, x, lo, torch.tensor(1.0))
    check(lambda t, l: torch.clamp(t, min=l), x, lo)
    # An integer tensor clamped by a float bound gives floats; in-place must refuse.
    xi = torch.tensor([1, 5, 9])
    check(lambda t: torch.clamp(t, 2.5), xi)
    check(lambda t: t.clamp_(2.5), xi)
    check(lambda t: torch.clamp(t, 2, 4), xi)
    check(lambda t, l: torch.clamp(t, min=l), xi, torch.tensor([2.0, 2.0, 2.0]))
    check(lambda t: torch.clamp(t), x)  # neither bound: the CPU's error
    check(lambda t: t.clamp_(-1, 1), x)
    check(lambda t: torch.clamp(t, -1, 1, out=torch.empty(0, device=t.device)), x)
    check(lambda t: torch.clamp(t.bool(), 0, 1), x)


# ---- lerp, addcmul, addcdiv ------------------------------------------------------------------

@pytest.mark.parametrize("dtype", NATIVE_DTYPES, ids=str)
def test_lerp(dtype):
    a = make((3, 4), dtype, seed=14)
    b = make((3, 4), dtype, seed=15)
    w = make((3, 4), dtype, seed=16, low=-1, high=2)
    check(torch.lerp, a, b, w)
    check(lambda x, y: torch.lerp(x, y, 0.8), a, b)
    check(lambda x, y: torch.lerp(x, y, -0.25), a, b)


def test_lerp_broadcast_errors_inplace():
    a = make((3, 4), torch.float32, seed=17)
    check(torch.lerp, a, make((4,), torch.float32, seed=18), make((3, 1), torch.float32, seed=19))
    check(torch.lerp, a, make((3, 4), torch.float16, seed=18), 0.5)  # dtype mismatch raises
    check(lambda x, y: x.lerp_(y, 0.5), a, make((3, 4), torch.float32, seed=20))
    # A 0-dim CPU weight tensor is accepted.
    check(lambda x, y: torch.lerp(x, y, torch.tensor(0.25)), a, a.flip(1))
    check(lambda x, y: torch.lerp(x, y, 0.5, out=torch.empty(0, device=x.device)), a, a.flip(0))


@pytest.mark.parametrize("dtype", NATIVE_DTYPES, ids=str)
@pytest.mark.parametrize("op", ["addcmul", "addcdiv"])
def test_addcmul_addcdiv(op, dtype):
    fn = getattr(torch, op)
    s = make((3, 4), dtype, seed=21)
    t1 = make((3, 1), dtype, seed=22)
    t2 = make((1, 4), dtype, seed=23, exclude_zero=True)
    check(fn, s, t1, t2)
    check(lambda a, b, c: fn(a, b, c, value=2), s, t1, t2)
    if dtype.is_floating_point:
        check(lambda a, b, c: fn(a, b, c, value=-0.5), s, t1, t2)


def test_addcmul_promotion_inplace_out():
    s = make((3, 4), torch.float32, seed=24)
    t1 = make((3, 4), torch.int32, seed=25)
    t2 = make((3, 4), torch.float16, seed=26)
    check(torch.addcmul, s, t1, t2)
    check(torch.addcdiv, s, t1, t2)
    check(lambda a, b, c: a.addcmul_(b, c, value=3), s, t1, t2)
    check(lambda a, b, c: a.addcdiv_(b, c), s, t2, t2)
    check(lambda a, b, c: torch.addcmul(a, b, c, out=torch.empty(0, device=a.device)), s, t1, t2)
    check(lambda a, b, c: torch.addcdiv(a, b, c), s, t1, t1)  # integer division: raises


def test_gradients(monkeypatch):
    # Some backward formulas use ops of other families (masked_fill): allow the fallback.
    monkeypatch.delenv("TORCH_WEBGPU_DISABLE_CPU_FALLBACK")
    a = make((4,), torch.float32, seed=27)
    b = make((4,), torch.float32, seed=28)
    for fn in (torch.atan2, torch.hypot, torch.logaddexp, lambda x, y: torch.lerp(x, y, 0.3),
               lambda x, y: torch.addcdiv(x, x, y)):
        ac, bc = a.clone().requires_grad_(), b.clone().requires_grad_()
        fn(ac, bc).backward(torch.ones(4))
        ad, bd = dev(a).requires_grad_(), dev(b).requires_grad_()
        fn(ad, bd).backward(torch.ones(4, device=DEVICE))
        assert_same(ad.grad, ac.grad, rtol=1e-4, atol=1e-5)
        assert_same(bd.grad, bc.grad, rtol=1e-4, atol=1e-5)


# ---- orthogonal polynomials ------------------------------------------------------------------

POLYNOMIALS = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
               "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
               "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
               "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
               "laguerre_polynomial_l", "legendre_polynomial_p"]


@pytest.mark.parametrize("name", POLYNOMIALS)
def test_polynomials(name):
    fn = getattr(torch.special, name)
    x = torch.tensor([-1.0, 1.0, 0.0, 0.5, -0.3, 0.99, 1.5, -2.0, 0.25])
    n = torch.tensor([0.0, 1.0, 2.0, 3.0, 5.0, 7.0, 9.0, 12.0, -1.0, -0.5, 2.7, math.nan])
    xs, ns = torch.meshgrid(x, n, indexing="ij")
    assert_same(fn(dev(xs), dev(ns)), fn(xs, ns), rtol=1e-4, atol=1e-4)
    check(lambda t: fn(t, 4), x)  # n as a Python number
    check(fn, x.long(), n.long())  # integer inputs: refused as on the CPU
    check(fn, x.half(), n.half())


RECURRENCE_POLYNOMIALS = ["hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l",
                          "legendre_polynomial_p", "chebyshev_polynomial_t", "chebyshev_polynomial_u",
                          "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w"]


@pytest.mark.parametrize("name", RECURRENCE_POLYNOMIALS)
def test_polynomials_match_the_cpus_fused_recurrence(name):
    # The CPU build contracts each recurrence step's first product and subtraction into an
    # fma: the plain float32 recurrence differs from it in the last bits, the emulated one
    # is bit-identical. (Chebyshev inputs stay off [-1, 1], where large n use trig forms.)
    fn = getattr(torch.special, name)
    g = torch.Generator().manual_seed(5)
    x = torch.rand(3000, generator=g) * 20 - 10
    if "chebyshev" in name:
        x = torch.where(x.abs() < 1.5, x.sign() * 1.5 + x, x)
        if "shifted" in name:
            x = x * 0.5 + 0.5
    n = torch.randint(0, 30, (3000,), generator=g).float()
    x[:2] = torch.tensor([-7.950586795806885, 8.397199630737305])
    n[:2] = torch.tensor([3.6, 8.1])
    got = fn(dev(x), dev(n)).cpu()
    want = fn(x, n)
    assert torch.equal(got.isnan(), want.isnan())
    assert torch.equal(got[~want.isnan()], want[~want.isnan()])


@pytest.mark.parametrize("name", POLYNOMIALS)
def test_polynomial_overflow_and_huge_degrees(name):
    # The CPU runs on past an overflow (inf - inf gives NaN) and converts degrees from 2^63
    # up (and NaN) to a negative int64 (a result of 0).
    fn = getattr(torch.special, name)
    x = torch.tensor([-501.0, 501.0, 13.5, -13.5, 2.0, math.inf, -math.inf, math.nan, 0.5, -501.0])
    n = torch.tensor([501.0, 1001.2, 28.0, 29.0, 1e20, math.inf, 30.0, math.inf, 2.0 ** 63, 2.0 ** 62])
    assert_same(fn(dev(x), dev(n)), fn(x, n), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", [torch.igamma, torch.igammac, torch.special.zeta])
def test_special_cases_in_the_cpus_order(op):
    # A NaN operand is caught by the other operand's special cases first on the CPU.
    nan, inf = math.nan, math.inf
    a = torch.tensor([nan, inf, nan, 0.0, 1.0, nan, inf, -1.0, 2.0, nan, nan, 3.0, 2.0])
    x = torch.tensor([inf, nan, nan, nan, nan, 0.0, inf, nan, -inf, 1.0, -inf, -inf, -2.5])
    assert_same(op(dev(a), dev(x)), op(a, x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", [torch.igamma, torch.igammac])
def test_incomplete_gamma(op):
    a = torch.tensor([0.0, 0.5, 1.0, 2.5, 7.0, 15.0, math.inf, 3.0, -1.0, math.nan, 1.0, 4.0])
    x = torch.tensor([0.5, 0.0, 1.0, 0.3, 12.0, 9.0, 1.0, math.inf, 1.0, 1.0, -1.0, 4.0])
    check(op, a, x, tolerances=dict(rtol=1e-5, atol=1e-6))
    g = torch.Generator().manual_seed(5)
    a2 = torch.rand(200, generator=g) * 10 + 0.05
    x2 = torch.rand(200, generator=g) * 15
    check(op, a2, x2, tolerances=dict(rtol=2e-5, atol=2e-6))
    check(op, a2.half(), x2.half())
