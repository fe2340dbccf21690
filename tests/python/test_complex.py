"""complex64 arithmetic on the device against the CPU: pointwise ops over contiguous,
transposed, offset, stepped, 0-dim and empty inputs, broadcasting, float32 -> complex64
promotion, Python complex scalars, in-place and out= forms, special values (inf, nan,
zeros, huge and tiny magnitudes), fills and copies, lerp, sum/mean, mm/bmm, view_as_real /
view_as_complex, autograd (hfft's gradient included) and a spectral filter that trains.

Every test but the error checks runs with TORCH_WEBGPU_DISABLE_CPU_FALLBACK=1, so an op
that is not native raises instead of passing through the CPU."""
import warnings

import pytest
import torch
import torch_webgpu  # noqa: F401

from conftest import DEVICE, cpu

INF, NAN = float("inf"), float("nan")


def make(shape, seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    re = torch.randn(shape, generator=g) * scale
    im = torch.randn(shape, generator=g) * scale
    return torch.complex(re, im)


def same(actual, expected, **kw):
    """assert_close with its default complex64 tolerances, on the device's result."""
    assert actual.device.type == DEVICE, actual.device
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    torch.testing.assert_close(cpu(actual), expected, equal_nan=True, **kw)


# Views of a (6, 8) base, applied alike on the CPU and on the device.
LAYOUTS = {
    "contiguous": lambda t: t,
    "transposed": lambda t: t.t(),
    "offset": lambda t: t[1:, 3:],
    "step": lambda t: t[::2],
    "zero_dim": lambda t: t[2, 5],
    "empty": lambda t: t[:0],
}


def views(seed=0, scale=1.0):
    base = make((6, 8), seed, scale)
    on_dev = base.to(DEVICE)
    return [(name, view(base), view(on_dev)) for name, view in LAYOUTS.items()]


nonzero = lambda x: x + (x.abs() < 0.1) * 0.5  # noqa: E731  keep poles away

UNARY = {
    "neg": torch.neg,
    "conj_physical": torch.conj_physical,
    "abs": torch.abs,
    "angle": torch.angle,
    "sgn": torch.sgn,
    "exp": torch.exp,
    "log": lambda x: torch.log(nonzero(x)),
    "log1p": torch.log1p,
    "expm1": torch.expm1,
    "sqrt": torch.sqrt,
    "rsqrt": lambda x: torch.rsqrt(nonzero(x)),
    "reciprocal": lambda x: torch.reciprocal(nonzero(x)),
    "square": torch.square,
    "sin": torch.sin,
    "cos": torch.cos,
    "tan": torch.tan,
    "sinh": torch.sinh,
    "cosh": torch.cosh,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "isnan": torch.isnan,
    "isinf": torch.isinf,
    "isfinite": torch.isfinite,
    "logical_not": torch.logical_not,
    "real": lambda x: torch.real(x) * 1,
    "imag": lambda x: torch.imag(x) * 1,
}


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("name", list(UNARY))
def test_unary_over_layouts(name):
    fn = UNARY[name]
    for layout, x, dx in views(seed=1):
        same(fn(dx), fn(x), msg=lambda m: f"{name} {layout}: {m}")


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "sin", "tanh", "sigmoid", "reciprocal",
                                  "neg", "sgn", "expm1", "log1p", "rsqrt", "cos", "tan"])
def test_unary_in_place_and_out(name):
    x = nonzero(make((5, 7), 2))
    fn = getattr(torch, name)
    # in place on a stepped view of a larger tensor: the rows between stay untouched
    big = make((10, 7), 3)
    big[::2] = x
    dbig = big.to(DEVICE)
    getattr(dbig[::2], name + "_")()
    getattr(big[::2], name + "_")()
    same(dbig, big)
    out = torch.empty(5, 7, dtype=torch.complex64, device=DEVICE)
    r = fn(x.to(DEVICE), out=out)
    assert r is out
    same(out, fn(x))


@pytest.mark.usefixtures("no_fallback")
def test_abs_and_angle_out_forms():
    x = make((4, 5), 4)
    dx = x.to(DEVICE)
    for fn in (torch.abs, torch.angle):
        out = torch.empty(0, device=DEVICE)
        fn(dx, out=out)
        same(out, fn(x))
        cout = torch.empty(4, 5, dtype=torch.complex64, device=DEVICE)
        fn(dx, out=cout)
        same(cout, fn(x, out=torch.empty(4, 5, dtype=torch.complex64)))
    # in-place abs would keep the dtype: refused, as on the CPU
    with pytest.raises(RuntimeError, match="In-place abs is not supported for complex"):
        dx.clone().abs_()


BINARY = {
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "div": torch.div,
    "add_alpha": lambda a, b: torch.add(a, b, alpha=2 - 1j),
    "sub_alpha": lambda a, b: torch.sub(a, b, alpha=0.5),
    "pow": lambda a, b: torch.pow(nonzero(a), b * 0.5),
    "eq": torch.eq,
    "ne": torch.ne,
    "logical_and": torch.logical_and,
    "logical_or": torch.logical_or,
}


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("name", list(BINARY))
def test_binary_over_layouts(name):
    fn = BINARY[name]
    second = views(seed=2)
    for (layout, a, da), (_, b, db) in zip(views(seed=1), second):
        same(fn(da, db), fn(a, b), msg=lambda m: f"{name} {layout}: {m}")
    # equal elements compare equal
    a = make((3, 4), 5)
    same(fn(a.to(DEVICE), a.to(DEVICE)), fn(a, a))


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("name", list(BINARY))
def test_binary_broadcast_promotion_and_scalars(name):
    fn = BINARY[name]
    a = make((6, 8), 1)
    da = a.to(DEVICE)
    cases = [
        ("row", make((8,), 2)),
        ("column", make((6, 1), 3)),
        ("zero_dim_device", make((), 4)),
        ("float32", torch.randn(6, 8, generator=torch.Generator().manual_seed(5))),
        ("float32_row", torch.randn(8, generator=torch.Generator().manual_seed(6))),
        ("int64", torch.arange(8) - 3),
    ]
    for what, b in cases:
        db = b.to(DEVICE)
        same(fn(da, db), fn(a, b), msg=lambda m: f"{name} complex op {what}: {m}")
        same(fn(db, da), fn(b, a), msg=lambda m: f"{name} {what} op complex: {m}")
    # Python numbers (logical ops take them as 0-dim CPU tensors)
    scalar = (lambda v: torch.tensor(v)) if name.startswith("logical") else (lambda v: v)
    for s in (1.5 - 2j, 3, -0.25, 2j):
        same(fn(da, scalar(s)), fn(a, scalar(s)), msg=lambda m: f"{name} scalar {s}: {m}")
    # a float32 tensor and a Python complex scalar give complex64
    f = torch.randn(6, 8, generator=torch.Generator().manual_seed(7))
    same(fn(f.to(DEVICE), scalar(0.5 + 1j)), fn(f, scalar(0.5 + 1j)))


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("name", ["add", "sub", "mul", "div"])
def test_binary_in_place_and_out(name):
    a, b = make((6, 8), 1), make((8,), 2)
    da, db = a.to(DEVICE), b.to(DEVICE)
    same(getattr(da.clone(), name + "_")(db), getattr(a.clone(), name + "_")(b))
    same(getattr(da.clone(), name + "_")(1 - 3j), getattr(a.clone(), name + "_")(1 - 3j))
    # in place on a transposed view
    t, dt = a.clone(), da.clone()
    getattr(dt.t(), name + "_")(db[:6])
    getattr(t.t(), name + "_")(b[:6])
    same(dt, t)
    # a complex tensor updated by a float32 one
    f = torch.randn(6, 8, generator=torch.Generator().manual_seed(3))
    same(getattr(da.clone(), name + "_")(f.to(DEVICE)), getattr(a.clone(), name + "_")(f))
    out = torch.empty(6, 8, dtype=torch.complex64, device=DEVICE)
    assert getattr(torch, name)(da, db, out=out) is out
    same(out, getattr(torch, name)(a, b))


@pytest.mark.usefixtures("no_fallback")
def test_operators_and_reverse_scalars():
    a = nonzero(make((4, 6), 8))
    da = a.to(DEVICE)
    for fn in (lambda x: 2 - x, lambda x: (1 + 1j) / x, lambda x: 3j * x, lambda x: -x,
               lambda x: x - 1j, lambda x: 1j + x, lambda x: x / 2, lambda x: x == 1j,
               lambda x: x != x, lambda x: x * x.conj()):
        same(fn(da), fn(a))


@pytest.mark.usefixtures("no_fallback")
def test_pow_forms():
    a = nonzero(make((5, 6), 9))
    b = make((5, 6), 10) * 0.5
    f = torch.rand(5, 6, generator=torch.Generator().manual_seed(11)) + 0.5
    da, db, df = a.to(DEVICE), b.to(DEVICE), f.to(DEVICE)
    same(torch.pow(da, db), torch.pow(a, b))          # complex ** complex
    same(torch.pow(da, df), torch.pow(a, f))          # complex ** real
    same(torch.pow(df, db), torch.pow(f, b))          # real ** complex
    for e in (0, 1, 2, 3, 0.5, -0.5, -1, -2, 2.5, 1 + 1j, -0.5j):
        same(da ** e, a ** e, msg=lambda m: f"x ** {e}: {m}")
    for base in (2, 0.5, 1j, 1 - 1j):
        same(base ** db, base ** b, msg=lambda m: f"{base} ** x: {m}")
    same(da.t() ** db.t(), a.t() ** b.t())
    same(da.clone().pow_(2), a.clone().pow_(2))
    same(da.clone().pow_(db), a.clone().pow_(b))


@pytest.mark.usefixtures("no_fallback")
def test_special_values():
    parts = [0.0, -0.0, 1.0, -2.5, INF, -INF, NAN, 1e30, -3e-30, 1e-37]  # normal floats: GPUs may flush subnormals
    re = torch.tensor(parts).repeat_interleave(len(parts))
    im = torch.tensor(parts).repeat(len(parts))
    z = torch.complex(re, im)
    dz = z.to(DEVICE)
    for name in ("abs", "angle", "isnan", "isinf", "isfinite", "neg", "conj_physical", "sgn"):
        fn = getattr(torch, name)
        same(fn(dz), fn(z), msg=lambda m: f"{name}: {m}")
    # Where the CPU is consistent between its vector and scalar paths: finite magnitudes
    # from tiny to huge.
    finite = torch.complex(torch.tensor([1e30, -3e-30, 1e-20, 2.0, 0.0, -1e25, 7e-25, 1.0]),
                           torch.tensor([-2e30, 5e-30, 3e-20, 0.0, 4e-30, 1e24, -1e-25, 1e-30]))
    df = finite.to(DEVICE)
    for name in ("abs", "log", "sqrt", "reciprocal"):
        fn = getattr(torch, name)
        same(fn(df), fn(finite), msg=lambda m: f"{name}: {m}")
    same(df / df.flip(0), finite / finite.flip(0))
    same(df * df.flip(0) * 1e-30, finite * finite.flip(0) * 1e-30)
    # abs and log of huge values do not overflow, of tiny ones do not underflow (tiny but
    # normal: GPUs may flush subnormal inputs to zero, as the NVIDIA H200 does)
    big = torch.tensor([3e38 + 3e38j, 2e-38 + 2e-38j], dtype=torch.complex64)
    same(big.to(DEVICE).abs(), big.abs())
    same(torch.log(big.to(DEVICE)), torch.log(big))


@pytest.mark.usefixtures("no_fallback")
def test_where_fill_zero_and_full():
    a, b = make((6, 8), 1), make((6, 8), 2)
    cond = a.real > 0
    same(torch.where(cond.to(DEVICE), a.to(DEVICE), b.to(DEVICE)), torch.where(cond, a, b))
    same(torch.where(cond.to(DEVICE), a.to(DEVICE), 1j), torch.where(cond, a, 1j))
    f = torch.randn(6, 8, generator=torch.Generator().manual_seed(4))
    same(torch.where(cond.to(DEVICE), a.to(DEVICE), f.to(DEVICE)), torch.where(cond, a, f))
    x, dx = a.clone(), a.to(DEVICE)
    dx[::2].fill_(2 - 3j)
    x[::2].fill_(2 - 3j)
    same(dx, x)
    dx.t()[1:].fill_(4)
    x.t()[1:].fill_(4)
    same(dx, x)
    same(dx.zero_(), x.zero_())
    same(torch.full((3, 2), 1 - 1j, device=DEVICE), torch.full((3, 2), 1 - 1j))
    same(torch.zeros(4, dtype=torch.complex64, device=DEVICE), torch.zeros(4, dtype=torch.complex64))
    same(torch.ones(2, 3, dtype=torch.complex64, device=DEVICE), torch.ones(2, 3, dtype=torch.complex64))


@pytest.mark.usefixtures("no_fallback")
def test_copies_between_dtypes_and_views():
    a = make((6, 8), 1)
    da = a.to(DEVICE)
    f = torch.randn(6, 8, generator=torch.Generator().manual_seed(2))
    same(f.to(DEVICE).to(torch.complex64), f.to(torch.complex64))
    i = torch.arange(-5, 5)
    same(i.to(DEVICE).to(torch.complex64), i.to(torch.complex64))
    same(torch.tensor([True, False]).to(DEVICE).to(torch.complex64),
         torch.tensor([True, False]).to(torch.complex64))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # complex -> real discards the imaginary part
        same(da.to(torch.float32), a.to(torch.float32))
        same(da.to(torch.float16), a.to(torch.float16))
        same(da.to(torch.bool), a.to(torch.bool))
    # between strided complex views
    dst = torch.zeros(8, 4, dtype=torch.complex64)
    ddst = dst.to(DEVICE)
    dst[::2].copy_(a[1:5].t()[::2])
    ddst[::2].copy_(da[1:5].t()[::2])
    same(ddst, dst)
    same(da.t().contiguous(), a.t().contiguous())
    same(da[:, 1::3].clone(), a[:, 1::3].clone())
    # a float32 source into a complex view
    ddst[1::2, :].copy_(f[:4, :4].to(DEVICE))
    dst[1::2, :].copy_(f[:4, :4])
    same(ddst, dst)


@pytest.mark.usefixtures("no_fallback")
def test_view_as_real_and_complex():
    a = make((4, 5), 1)
    da = a.to(DEVICE)
    r, dr = torch.view_as_real(a.clone()), torch.view_as_real(da.clone())
    same(dr * 2, r * 2)
    f = torch.randn(3, 4, 2, generator=torch.Generator().manual_seed(2))
    same(torch.view_as_complex(f.to(DEVICE)) * da[:3, :4], torch.view_as_complex(f) * a[:3, :4])
    # writing through the real view changes the complex tensor
    x, dx = a.clone(), da.clone()
    torch.view_as_real(dx)[..., 1].mul_(-1)
    torch.view_as_real(x)[..., 1].mul_(-1)
    same(dx, x)
    same(dx.real * dx.imag, x.real * x.imag)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_sum_and_mean(reduce):
    a = make((5, 6, 7), 1)
    da = a.to(DEVICE)
    fn = getattr(torch, reduce)
    same(fn(da), fn(a))
    for dims in (0, 1, -1, (0, 2), (0, 1, 2)):
        for keepdim in (False, True):
            same(fn(da, dims, keepdim=keepdim), fn(a, dims, keepdim=keepdim))
    same(fn(da.transpose(0, 2)[1:, ::2], 1), fn(a.transpose(0, 2)[1:, ::2], 1))
    same(fn(da.conj(), 0), fn(a.conj(), 0))
    same(fn(da[0, 0, 0]), fn(a[0, 0, 0]))
    if reduce == "sum":
        same(fn(da[:0], 0), fn(a[:0], 0))
    out = torch.empty(0, dtype=torch.complex64, device=DEVICE)
    fn(da, 1, out=out)
    same(out, fn(a, 1))


@pytest.mark.usefixtures("no_fallback")
def test_mm_bmm_matmul():
    a, b = make((5, 7), 1), make((7, 3), 2)
    same(torch.mm(a.to(DEVICE), b.to(DEVICE)), torch.mm(a, b))
    same(a.to(DEVICE).t().conj() @ a.to(DEVICE)[:, :4], a.t().conj() @ a[:, :4])
    x, y = make((3, 4, 6), 3), make((3, 6, 2), 4)
    same(torch.bmm(x.to(DEVICE), y.to(DEVICE)), torch.bmm(x, y))
    same(torch.matmul(x.to(DEVICE), y.to(DEVICE).conj()), torch.matmul(x, y.conj()))
    out = torch.empty(5, 3, dtype=torch.complex64, device=DEVICE)
    torch.mm(a.to(DEVICE), b.to(DEVICE), out=out)
    same(out, torch.mm(a, b))


@pytest.mark.usefixtures("no_fallback")
def test_addcmul_addcdiv():
    s, t1, t2 = make((4, 5), 1), make((4, 5), 2), nonzero(make((5,), 3))
    ds, d1, d2 = s.to(DEVICE), t1.to(DEVICE), t2.to(DEVICE)
    for value in (1, 0.5, 2 - 1j):
        same(torch.addcmul(ds, d1, d2, value=value), torch.addcmul(s, t1, t2, value=value))
        same(torch.addcdiv(ds, d1, d2, value=value), torch.addcdiv(s, t1, t2, value=value))


@pytest.mark.usefixtures("no_fallback")
def test_lerp():
    s, e, w = make((4, 5), 1), make((4, 5), 2), make((5,), 3) * 0.5
    ds, de = s.to(DEVICE), e.to(DEVICE)
    for weight in (0.3, 0.7, 0.2 + 0.5j, -1j):  # both sides of |w| = 1/2
        same(torch.lerp(ds, de, weight), torch.lerp(s, e, weight))
    same(torch.lerp(ds, de, w.expand(4, 5).to(DEVICE)), torch.lerp(s, e, w.expand(4, 5)))
    same(torch.lerp(ds.t(), de.t(), torch.tensor(0.6 - 0.1j)), torch.lerp(s.t(), e.t(), torch.tensor(0.6 - 0.1j)))
    same(ds.clone().lerp_(de, 0.25), s.clone().lerp_(e, 0.25))


@pytest.mark.usefixtures("no_fallback")
def test_autograd_through_complex_ops():
    x, y = make((4, 6), 1), make((4, 6), 2)

    def run(device):
        a = x.to(device).requires_grad_()
        b = y.to(device).requires_grad_()
        loss = (a * b).abs().sum() + (a / (b + 3)).exp().real.sum() + (a.conj() * b).angle().sum()
        loss.backward()
        return loss.detach(), a.grad, b.grad

    for got, want in zip(run(DEVICE), run("cpu")):
        same(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.usefixtures("no_fallback")
def test_hfft_gradient_stays_on_device():
    x = make((3, 9), 4)

    def run(device):
        a = x.to(device).requires_grad_()
        y = torch.fft.hfft(a, n=16)
        (y * y).sum().backward()
        return y.detach(), a.grad

    for got, want in zip(run(DEVICE), run("cpu")):
        same(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.usefixtures("no_fallback")
def test_spectral_filter_trains_natively():
    """y = irfft(rfft(x) * w): a complex weight per frequency, trained by SGD to low-pass."""
    n = 32
    g = torch.Generator().manual_seed(0)
    x = torch.randn(8, n, generator=g)
    keep = (torch.arange(n // 2 + 1) < 5).to(torch.complex64)
    target = torch.fft.irfft(torch.fft.rfft(x) * keep, n)
    w0 = make((n // 2 + 1,), 5) * 0.1 + 1

    def train(device):
        w = torch.nn.Parameter(w0.to(device))
        opt = torch.optim.SGD([w], lr=0.5, momentum=0.5, foreach=False)
        xs, ts = x.to(device), target.to(device)
        losses = []
        for _ in range(5):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(torch.fft.irfft(torch.fft.rfft(xs) * w, n), ts)
            loss.backward()
            opt.step()
            losses.append(loss.detach())
        return torch.stack(losses), w.detach()

    (dl, dw), (cl, cw) = train(DEVICE), train("cpu")
    same(dl, cl, rtol=1e-4, atol=1e-5)
    same(dw, cw, rtol=1e-4, atol=1e-5)
    assert cl[-1] < cl[0] * 0.5


def test_unsupported_complex_ops_raise_as_on_cpu(quiet_fallback):
    """Ops the CPU refuses for complex refuse here too (the same exception type)."""
    a = make((3,), 1)
    da = a.to(DEVICE)
    for fn in (torch.sign, lambda t: t < t, lambda t: torch.div(t, t, rounding_mode="floor"),
               lambda t: torch.clamp(t, 0, 1)):
        with pytest.raises(RuntimeError) as cpu_err:
            fn(a)
        with pytest.raises(type(cpu_err.value)):
            fn(da)
