"""The native matrix-product family against the CPU: mm, bmm, addmm, baddbmm, addbmm,
mv/addmv, dot/vdot and the composites on top of them (matmul, linear, einsum, inner,
outer, tensordot), over dtypes, shapes off the kernel's tile sizes, empty shapes,
transposed/sliced/offset/broadcast operands, out= and in-place forms, error messages and
gradients. Tests marked with the `no_fallback` fixture prove the op ran natively."""
import pytest
import torch
import torch.nn.functional as F

from conftest import DEVICE, assert_same, check, dev, make, run_python

GEMM_DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32,
               torch.int16, torch.int8, torch.uint8]
# Float products of longer rows differ from the CPU's summation order by rounding only.
LOOSE = {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.float16: dict(rtol=2e-3, atol=2e-3),
         torch.bfloat16: dict(rtol=2e-2, atol=2e-2)}


def small(shape, dtype, seed=0):
    """Inputs whose products stay exact in the integer dtypes' ranges (wrapping is tested
    separately) and well-conditioned in the float ones."""
    if dtype.is_floating_point:
        return make(shape, dtype, seed=seed, low=-2, high=2)
    return make(shape, dtype, seed=seed, low=-3 if dtype != torch.uint8 else 0, high=3)


def close(fn, *args, **kw):
    actual, expected = fn(*[dev(a) for a in args], **kw), fn(*args, **kw)
    dtype = expected.dtype
    assert_same(actual, expected, **LOOSE.get(dtype, dict(rtol=0, atol=0)))


def same_error(fn, *args):
    """The device raises the CPU's exception type with the CPU's message."""
    with pytest.raises(Exception) as cpu_info:
        fn(*args)
    with pytest.raises(Exception) as dev_info:
        fn(*[dev(a) for a in args])
    assert type(dev_info.value) is type(cpu_info.value)
    assert str(dev_info.value).split("\n")[0] == str(cpu_info.value).split("\n")[0]


# ---- mm ----------------------------------------------------------------------------------

MM_SHAPES = [(2, 3, 4), (1, 1, 1), (1, 7, 1), (1, 300, 1), (3, 5, 1), (1, 5, 40), (33, 17, 40),
             (17, 300, 3), (64, 64, 65), (5, 0, 3), (0, 4, 3), (3, 4, 0)]


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("m,k,n", MM_SHAPES)
def test_mm_shapes(m, k, n):
    close(torch.mm, small((m, k), torch.float32), small((k, n), torch.float32, seed=1))


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("dtype", GEMM_DTYPES)
@pytest.mark.parametrize("m,k,n", [(13, 9, 20), (40, 33, 35), (2, 300, 2)])
def test_mm_dtypes(dtype, m, k, n):
    close(torch.mm, small((m, k), dtype), small((k, n), dtype, seed=1))


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8])
def test_mm_integer_wraps_like_cpu(dtype):
    info = torch.iinfo(dtype)
    hi = min(info.max, 2**62)
    lo = max(info.min, -(2**62))
    a = make((20, 37), dtype, low=lo, high=hi)
    b = make((37, 18), dtype, seed=1, low=lo, high=hi)
    close(torch.mm, a, b)


@pytest.mark.usefixtures("no_fallback")
def test_mm_strided_operands():
    base_a = small((50, 40), torch.float32)
    base_b = small((60, 70), torch.float32, seed=1)
    cases = [
        (base_a.t(), base_b[:50, :30]),                 # transposed A
        (base_a[3:20, 5:], base_b.t()[:35, 7:40]),      # offsets, transposed B
        (base_a[::2, ::3], base_b[:14, ::2]),           # steps
        (base_a[1:2], base_b[:40, 1:2]),                # single row / column
        (base_a[:, 2].expand(5, 50)[:, :40], base_b[:40, :9]),  # stride-0 rows
    ]
    for a, b in cases:
        assert torch.mm(dev(a), dev(b)).shape == (a.shape[0], b.shape[1])
        close(torch.mm, a, b)


@pytest.mark.usefixtures("no_fallback")
def test_mm_half_strided():
    base = small((30, 31), torch.float16)
    close(torch.mm, base[1:, 1:].t(), base[1:, 3:20])


@pytest.mark.usefixtures("no_fallback")
def test_mm_out():
    a, b = small((9, 7), torch.float32), small((7, 11), torch.float32, seed=1)
    out = dev(torch.full((9, 11), 5.0))
    r = torch.mm(dev(a), dev(b), out=out)
    assert r.data_ptr() == out.data_ptr()
    assert_same(out, a @ b, **LOOSE[torch.float32])
    # Resized from empty; non-contiguous out; out viewing a bigger buffer.
    out = dev(torch.empty(0))
    torch.mm(dev(a), dev(b), out=out)
    assert_same(out, a @ b, **LOOSE[torch.float32])
    big = dev(torch.zeros(11, 9))
    torch.mm(dev(a), dev(b), out=big.t())
    assert_same(big.t(), a @ b, **LOOSE[torch.float32])
    # out aliasing an input.
    sq = small((8, 8), torch.float32)
    d = dev(sq)
    torch.mm(d, d, out=d)
    assert_same(d, sq @ sq, **LOOSE[torch.float32])


def test_mm_errors():
    same_error(torch.mm, torch.randn(2, 3), torch.randn(4, 5))
    same_error(torch.mm, torch.randn(3), torch.randn(3, 5))
    same_error(torch.mm, torch.randn(2, 3), torch.randn(3))
    same_error(torch.mm, torch.randn(2, 3), torch.randn(3, 2, dtype=torch.float16))
    same_error(lambda a, b, o: torch.mm(a, b, out=o), torch.randn(2, 3), torch.randn(3, 2),
               torch.empty(0, dtype=torch.int32))
    # The CPU refuses bool.
    check(torch.mm, torch.ones(2, 3, dtype=torch.bool), torch.ones(3, 2, dtype=torch.bool))


def test_mm_float64_through_fallback(quiet_fallback):
    close(torch.mm, torch.randn(5, 6, dtype=torch.float64), torch.randn(6, 4, dtype=torch.float64))


# ---- bmm / baddbmm / addbmm -----------------------------------------------------------------

@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.int8])
@pytest.mark.parametrize("b,m,k,n", [(3, 5, 7, 4), (2, 33, 17, 40), (1, 1, 1, 1), (0, 3, 4, 5),
                                     (2, 0, 4, 5), (2, 3, 0, 5)])
def test_bmm(dtype, b, m, k, n):
    close(torch.bmm, small((b, m, k), dtype), small((b, k, n), dtype, seed=1))


@pytest.mark.usefixtures("no_fallback")
def test_bmm_broadcast_and_transposed():
    a = small((1, 20, 30), torch.float32).expand(4, 20, 30)   # batch stride 0
    b = small((4, 18, 30), torch.float32, seed=1).transpose(1, 2)
    close(torch.bmm, a, b)
    close(torch.bmm, small((30, 4, 20), torch.float32).permute(1, 2, 0), b)


def test_bmm_errors():
    same_error(torch.bmm, torch.randn(2, 2, 3), torch.randn(2, 4, 2))
    same_error(torch.bmm, torch.randn(2, 2, 3), torch.randn(3, 3, 2))
    same_error(torch.bmm, torch.randn(2, 3), torch.randn(3, 3, 2))
    same_error(torch.bmm, torch.randn(2, 2, 3), torch.randn(2, 3, 2, dtype=torch.float16))


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32])
def test_baddbmm(dtype):
    b1, b2 = small((3, 20, 9), dtype), small((3, 9, 17), dtype, seed=1)
    for self_shape in [(3, 20, 17), (20, 1), (17,), ()]:
        c = small(self_shape, dtype, seed=2)
        close(torch.baddbmm, c, b1, b2)
        close(lambda c, x, y: torch.baddbmm(c, x, y, beta=2, alpha=3), c, b1, b2)
    out = dev(torch.empty(0, dtype=dtype))
    torch.baddbmm(dev(c), dev(b1), dev(b2), out=out)
    assert_same(out, torch.baddbmm(c, b1, b2), **LOOSE.get(dtype, dict(rtol=0, atol=0)))
    same_error(torch.baddbmm, torch.randn(3, 2, 2), torch.randn(2, 2, 3), torch.randn(2, 3, 2))


@pytest.mark.usefixtures("no_fallback")
def test_baddbmm_inplace():
    c, b1, b2 = small((2, 5, 6), torch.float32), small((2, 5, 4), torch.float32), small((2, 4, 6), torch.float32)
    d = dev(c)
    d.baddbmm_(dev(b1), dev(b2), alpha=0.5)
    assert_same(d, c.clone().baddbmm_(b1, b2, alpha=0.5), **LOOSE[torch.float32])


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64])
def test_addbmm(dtype):
    b1, b2 = small((4, 20, 9), dtype), small((4, 9, 17), dtype, seed=1)
    for self_shape in [(20, 17), (17,), (20, 1)]:
        close(lambda c, x, y: torch.addbmm(c, x, y, beta=2, alpha=3),
              small(self_shape, dtype, seed=2), b1, b2)
    c = small((20, 17), dtype, seed=2)
    d = dev(c)
    d.addbmm_(dev(b1), dev(b2))
    assert_same(d, c.clone().addbmm_(b1, b2), **LOOSE.get(dtype, dict(rtol=0, atol=0)))
    out = dev(torch.empty(3, dtype=dtype))
    torch.addbmm(dev(c), dev(b1), dev(b2), out=out)
    assert_same(out, torch.addbmm(c, b1, b2), **LOOSE.get(dtype, dict(rtol=0, atol=0)))
    # No batches: beta * self.
    close(lambda c, x, y: torch.addbmm(c, x, y, beta=2), c, b1[:0], b2[:0])


def test_addbmm_errors():
    same_error(torch.addbmm, torch.randn(2, 2), torch.randn(2, 2, 3), torch.randn(3, 3, 2))
    same_error(torch.addbmm, torch.randn(2, 2), torch.randn(2, 2, 3), torch.randn(2, 4, 2))
    same_error(torch.addbmm, torch.randn(2, 2), torch.randn(2, 3), torch.randn(2, 3, 2))
    same_error(torch.addbmm, torch.randn(3, 3), torch.randn(2, 2, 3), torch.randn(2, 3, 2))
    same_error(torch.addbmm, torch.randn(2, 2), torch.randn(3), torch.randn(2, 3, 2))


def test_addbmm_inplace_broadcast_self(quiet_fallback):
    # The CPU resizes a broadcast self in place.
    c, b1, b2 = torch.randn(2), torch.randn(3, 2, 4), torch.randn(3, 4, 2)
    d = dev(c)
    d.addbmm_(dev(b1), dev(b2))
    assert_same(d, c.clone().addbmm_(b1, b2), **LOOSE[torch.float32])


# ---- addmm --------------------------------------------------------------------------------

@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("dtype", GEMM_DTYPES)
def test_addmm(dtype):
    a, b = small((19, 9), dtype), small((9, 33), dtype, seed=1)
    for self_shape in [(19, 33), (33,), (19, 1), ()]:
        close(torch.addmm, small(self_shape, dtype, seed=2), a, b)
    close(lambda c, x, y: torch.addmm(c, x, y, beta=2, alpha=3), small((33,), dtype, seed=2), a, b)


@pytest.mark.usefixtures("no_fallback")
def test_addmm_scalars():
    a, b = small((6, 5), torch.float32), small((5, 7), torch.float32, seed=1)
    c = torch.full((6, 7), float("nan"))
    # beta == 0 ignores self, NaN included.
    close(lambda c, x, y: torch.addmm(c, x, y, beta=0), c, a, b)
    close(lambda c, x, y: torch.addmm(c, x, y, beta=0.25, alpha=-1.5), small((6, 7), torch.float32), a, b)
    ia, ib, ic = small((6, 5), torch.int32), small((5, 7), torch.int32, seed=1), small((6, 7), torch.int32)
    # Float multipliers convert to the integer dtype (0.5 -> 0) as on the CPU.
    close(lambda c, x, y: torch.addmm(c, x, y, beta=0.5, alpha=2.7), ic, ia, ib)
    # k == 0: beta * self.
    close(lambda c, x, y: torch.addmm(c, x, y, beta=3), small((6, 7), torch.float32), a[:, :0], b[:0])


@pytest.mark.usefixtures("no_fallback")
def test_addmm_inplace_and_out():
    a, b, c = small((6, 5), torch.float32), small((5, 7), torch.float32, seed=1), small((6, 7), torch.float32)
    d = dev(c)
    d.addmm_(dev(a), dev(b), beta=0.5)
    assert_same(d, c.clone().addmm_(a, b, beta=0.5), **LOOSE[torch.float32])
    out = dev(torch.empty(2, 2))
    torch.addmm(dev(c), dev(a), dev(b), out=out)
    assert_same(out, torch.addmm(c, a, b), **LOOSE[torch.float32])


def test_addmm_errors():
    same_error(torch.addmm, torch.randn(3, 3), torch.randn(2, 3), torch.randn(3, 2))
    same_error(torch.addmm, torch.randn(2, 2, dtype=torch.float16), torch.randn(2, 3), torch.randn(3, 2))
    same_error(torch.addmm, torch.randn(2, 2), torch.randn(2, 3), torch.randn(4, 2))
    same_error(lambda c, a, b: c.addmm_(a, b), torch.randn(2), torch.randn(2, 3), torch.randn(3, 2))
    same_error(torch.addmm, torch.randn(2, 2), torch.randn(2, 3, dtype=torch.float16), torch.randn(3, 2))
    same_error(torch.addmm, torch.randn(2, 2), torch.randn(2, 3), torch.randn(3, 2, dtype=torch.float16))


# ---- mv / addmv / dot / vdot -------------------------------------------------------------------

@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.uint8])
@pytest.mark.parametrize("m,k", [(5, 7), (1, 1), (3, 500), (40, 3), (0, 4), (4, 0)])
def test_mv_addmv(dtype, m, k):
    mat, vec = small((m, k), dtype), small((k,), dtype, seed=1)
    close(torch.mv, mat, vec)
    close(lambda c, x, y: torch.addmv(c, x, y, beta=2, alpha=3), small((m,), dtype, seed=2), mat, vec)
    close(torch.addmv, small((1,), dtype, seed=2), mat, vec)


@pytest.mark.usefixtures("no_fallback")
def test_mv_strided():
    base = small((30, 40), torch.float32)
    close(torch.mv, base.t()[3:, ::2], base[::2, 5][:15])
    close(torch.mv, base[2:9], base[0])


def test_mv_errors():
    same_error(torch.mv, torch.randn(2, 3), torch.randn(4))
    same_error(torch.mv, torch.randn(2, 3, 4), torch.randn(4))
    same_error(torch.mv, torch.randn(2, 3), torch.randn(3, dtype=torch.float16))
    same_error(torch.addmv, torch.randn(3), torch.randn(2, 3), torch.randn(3))


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("dtype", GEMM_DTYPES)
@pytest.mark.parametrize("n", [0, 1, 7, 1000])
def test_dot_vdot(dtype, n):
    a, b = small((n,), dtype), small((n,), dtype, seed=1)
    close(torch.dot, a, b)
    close(torch.vdot, a, b)
    base = small((3 * n + 2,), dtype, seed=3)
    close(torch.dot, base[2::3], base[:n])


def test_dot_errors():
    same_error(torch.dot, torch.randn(3), torch.randn(4))
    same_error(torch.dot, torch.randn(3, 1), torch.randn(3))
    same_error(torch.dot, torch.randn(3), torch.randn(3, dtype=torch.float16))
    same_error(torch.vdot, torch.randn(3), torch.randn(4))
    check(torch.dot, torch.ones(3, dtype=torch.bool), torch.ones(3, dtype=torch.bool))


# ---- composites --------------------------------------------------------------------------------

@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("sa,sb", [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((5, 20, 30), (30, 18)),
                                   ((2, 1, 20, 30), (3, 30, 18)), ((4, 7, 3), (4, 3, 9)),
                                   ((7,), (2, 7, 5))])
def test_matmul(sa, sb):
    close(torch.matmul, small(sa, torch.float32), small(sb, torch.float32, seed=1))


@pytest.mark.usefixtures("no_fallback")
def test_linear_einsum_inner_outer():
    x, w, bias = small((4, 5, 30), torch.float32), small((18, 30), torch.float32, seed=1), small((18,), torch.float32, seed=2)
    close(F.linear, x, w, bias)
    close(F.linear, x[0], w)
    close(lambda a, b: torch.einsum("bij,bjk->bik", a, b), small((3, 4, 5), torch.float32),
          small((3, 5, 6), torch.float32, seed=1))
    close(torch.inner, small((4, 5), torch.float32), small((3, 5), torch.float32, seed=1))
    close(torch.outer, small((4,), torch.float32), small((3,), torch.float32, seed=1))
    close(lambda a, b: torch.tensordot(a, b, dims=([1, 2], [0, 1])), small((3, 4, 5), torch.float32),
          small((4, 5, 6), torch.float32, seed=1))


# ---- autograd ------------------------------------------------------------------------------------

@pytest.mark.usefixtures("quiet_fallback")
@pytest.mark.parametrize("op", ["mm", "bmm", "addmm", "matmul", "linear"])
def test_gradients(op):
    shapes = {"mm": [(6, 5), (5, 7)], "bmm": [(2, 6, 5), (2, 5, 7)], "addmm": [(7,), (6, 5), (5, 7)],
              "matmul": [(2, 6, 5), (5, 7)], "linear": [(3, 6, 5), (7, 5), (7,)]}[op]
    fn = {"mm": torch.mm, "bmm": torch.bmm, "addmm": torch.addmm, "matmul": torch.matmul,
          "linear": F.linear}[op]
    cpu_in = [small(s, torch.float32, seed=i).requires_grad_() for i, s in enumerate(shapes)]
    dev_in = [dev(t.detach()).requires_grad_() for t in cpu_in]
    expected, actual = fn(*cpu_in), fn(*dev_in)
    grad = small(tuple(expected.shape), torch.float32, seed=9)
    expected.backward(grad)
    actual.backward(dev(grad))
    assert_same(actual.detach(), expected.detach(), **LOOSE[torch.float32])
    for c, d in zip(cpu_in, dev_in):
        assert d.grad.device.type == DEVICE
        assert_same(d.grad, c.grad, **LOOSE[torch.float32])


# ---- addr ------------------------------------------------------------------------------------

@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("dtype", GEMM_DTYPES + [torch.bool])
def test_addr(dtype):
    gen = small if dtype != torch.bool else make
    v1, v2 = gen((5,), dtype), gen((7,), dtype, seed=1)
    if dtype.is_floating_point:
        scal = dict(beta=0.6, alpha=0.2)
    elif dtype == torch.bool:
        scal = dict(beta=True, alpha=True)
    else:
        scal = dict(beta=2, alpha=3)
    for self_shape in [(5, 7), (7,), (5, 1), ()]:
        c = gen(self_shape, dtype, seed=2)
        # float16/bfloat16 round after every product and sum, as the CPU kernel does.
        check(torch.addr, c, v1, v2, exact=not dtype.is_floating_point, **scal)
        check(torch.addr, c, v1, v2, exact=not dtype.is_floating_point)
    ignored = torch.full((5, 7), float("nan"), dtype=dtype) if dtype.is_floating_point else gen((5, 7), dtype, seed=3)
    check(lambda c, a, b: torch.addr(c, a, b, beta=0), ignored, v1, v2, exact=not dtype.is_floating_point)


@pytest.mark.usefixtures("no_fallback")
def test_addr_views_inplace_out():
    base = small((20,), torch.float32)
    c = small((4, 6), torch.float32, seed=1)
    check(torch.addr, c.t(), base[::3][:6], base[1:5])
    d = dev(c)
    d.addr_(dev(base[:4]), dev(base[4:10]), alpha=2)
    assert_same(d, c.clone().addr_(base[:4], base[4:10], alpha=2))
    out = dev(torch.empty(0))
    torch.addr(dev(c), dev(base[:4]), dev(base[4:10]), out=out)
    assert_same(out, torch.addr(c, base[:4], base[4:10]))
    check(torch.addr, c[:0], base[:0], base[4:10])


def test_addr_errors(quiet_fallback):
    same_error(torch.addr, torch.randn(2, 3), torch.randn(2, 1), torch.randn(3))
    same_error(torch.addr, torch.randn(2, 3), torch.randn(2), torch.randn(3, 1))
    same_error(torch.addr, torch.randn(3, 3), torch.randn(2), torch.randn(3))
    ints = [torch.ones(2, 3, dtype=torch.int32), torch.ones(2, dtype=torch.int32), torch.ones(3, dtype=torch.int32)]
    same_error(lambda *a: torch.addr(*a, alpha=0.5), *ints)
    # Mixed dtypes promote (computed on the CPU).
    check(torch.addr, torch.randn(2, 3), torch.randn(2).half(), torch.randn(3))


def bmm_in_subprocess(variant, dtypes, shapes, extra=""):
    """bmm over (b, m, k, n, a transposed, b transposed) shapes and dtypes against the CPU,
    in a process whose TORCH_WEBGPU_GEMM_VARIANT forces `variant` (read per launch)."""
    code = (
        "import torch, torch_webgpu\n"
        f"for dt in ({', '.join('torch.' + d for d in dtypes)},):\n"
        f"    for (b, m, k, n, ta, tb) in {shapes!r}:\n"
        "        a = torch.randint(-3, 4, (b, k, m) if ta else (b, m, k)).to(dt)\n"
        "        a = a.transpose(1, 2) if ta else a\n"
        "        c = torch.randint(-3, 4, (b, n, k) if tb else (b, k, n)).to(dt)\n"
        "        c = c.transpose(1, 2) if tb else c\n"
        "        r = torch.bmm(a.to('webgpu'), c.to('webgpu')).cpu()\n"
        "        assert torch.equal(r, torch.bmm(a, c)), (dt, b, m, k, n, ta, tb)\n"
        + extra + "print('ok')\n")
    result = run_python(code, env={"TORCH_WEBGPU_GEMM_VARIANT": variant,
                                    "TORCH_WEBGPU_DISABLE_CPU_FALLBACK": "1"})
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr[-2000:]


@pytest.mark.parametrize("variant", ["reduce", "per_out"])
def test_small_product_variants(variant):
    """Few outputs over a long K: a workgroup tree per output (GPUs) or one invocation per
    two output columns, one running sum each in k order (software adapters); both against the
    CPU, with K odd, transposed and batched operands, integer and half types."""
    bmm_in_subprocess(variant, ["float32", "float16", "int64"],
                      ((1, 1, 577, 33, 0, 1), (2, 3, 258, 5, 1, 0), (1, 1, 1000, 1, 0, 0),
                       (3, 2, 3, 7, 1, 1), (1, 4, 0, 3, 0, 0)),
                      extra="torch.manual_seed(0)\n"
                            "x, w = torch.randn(1, 576), torch.randn(1536, 576)\n"
                            # (sums of 576 products in another order: an absolute bound scaled by K)
                            "torch.testing.assert_close(torch.nn.functional.linear(x.to('webgpu'), "
                            "w.to('webgpu')).cpu(), torch.nn.functional.linear(x, w), rtol=1e-4, atol=6e-4)\n")


@pytest.mark.parametrize("variant", ["tiled", "tiled_medium", "tiled_large", "tiled_scalar", "tiled_large_scalar"])
def test_shared_memory_tiles_variant(variant):
    """Software adapters default to register blocks; the shared-memory tiled kernels (the
    GPU path: 32x32 tiles, 64x64 and 128x128 tiles for larger float32 products) must agree with
    the CPU too, for every operand layout (their tile loads follow the unit stride)."""
    bmm_in_subprocess(variant, ["float32", "float16", "int64", "int8"],
                      ((1, 33, 17, 40, 0, 1), (2, 64, 70, 31, 1, 0), (3, 16, 0, 16, 0, 0),
                       (2, 130, 20, 129, 1, 1), (1, 128, 9, 136, 0, 0)))


def test_vec4_tiles_equal_scalar_tiles_bit_for_bit():
    """Float32 tiles hold runs of four rows and columns per invocation (vec4 shared words);
    every output still sums its products in k order, so for every tile shape (the defaults,
    shapes set by TORCH_WEBGPU_GEMM_TILE, unrolled or not), operand layout, offset view,
    addmm's C with alpha/beta and split-K, the result equals the scalar tiles' of the same
    variant bit for bit,
    and both are close to the CPU. A tile the kernel cannot hold raises ValueError."""
    code = """
import os, torch, torch_webgpu
def run(variant, tile=None):
    os.environ['TORCH_WEBGPU_GEMM_VARIANT'] = variant
    os.environ.pop('TORCH_WEBGPU_GEMM_TILE', None)
    if tile: os.environ['TORCH_WEBGPU_GEMM_TILE'] = tile
    out = []
    for (b, m, k, n, ta, tb) in [(1, 33, 17, 40, 0, 1), (2, 130, 70, 129, 1, 0), (1, 200, 9, 260, 1, 1), (3, 16, 0, 16, 0, 0)]:
        g = torch.Generator().manual_seed(m * n + k)
        a = torch.randn(b, k + 1, m, generator=g)[:, 1:].transpose(1, 2) if ta else torch.randn(b, m, k + 1, generator=g)[..., 1:]
        w = torch.randn(b, n, k, generator=g).transpose(1, 2) if tb else torch.randn(b, k, n, generator=g)
        r = torch.bmm(a.to('webgpu'), w.to('webgpu')).cpu()
        torch.testing.assert_close(r, torch.bmm(a, w), rtol=1e-4, atol=1e-4)
        out.append(r)
    torch.manual_seed(0)
    c, x, y = torch.randn(150, 90), torch.randn(150, 300), torch.randn(300, 90)
    r = torch.addmm(c.to('webgpu'), x.to('webgpu'), y.to('webgpu'), beta=0.5, alpha=2.0).cpu()
    torch.testing.assert_close(r, torch.addmm(c, x, y, beta=0.5, alpha=2.0), rtol=1e-4, atol=1e-3)
    return out + [r]
# (The 32x32 tiles split K where tiles are few, the same slices whatever TORCH_WEBGPU_GEMM_TILE says.)
base = {v: run(v + '_scalar') for v in ('tiled', 'tiled_medium', 'tiled_large')}
for variant, tile in [('tiled', None), ('tiled_medium', None), ('tiled_large', None),
                      ('tiled_large', '128x128x8:16x16:r'), ('tiled', '64x64x8:8x8:u'), ('tiled', '128x64x8:8x16')]:
    got = run(variant, tile)
    assert all(torch.equal(p, q) for p, q in zip(got, base[variant])), (variant, tile)
os.environ['TORCH_WEBGPU_GEMM_VARIANT'] = 'tiled'
for bad in ['3x3', '128x128x8:16x16:z', '128x128x8:32x32', '4096x4096x64:16x16', '256x64x4:8x8']:
    os.environ['TORCH_WEBGPU_GEMM_TILE'] = bad
    try:
        torch.mm(torch.ones(40, 40, device='webgpu'), torch.ones(40, 40, device='webgpu'))
        raise AssertionError(bad)
    except ValueError as e:
        assert 'TORCH_WEBGPU_GEMM_TILE' in str(e), e
os.environ.pop('TORCH_WEBGPU_GEMM_TILE')
assert torch.equal(torch.mm(torch.ones(40, 40, device='webgpu'), torch.ones(40, 40, device='webgpu')).cpu(), torch.full((40, 40), 40.0))
print('ok')
"""
    result = run_python(code, env={"TORCH_WEBGPU_DISABLE_CPU_FALLBACK": "1"})
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr[-2000:]


def test_half_type_tile_loads_equal_scalar_tiles_bit_for_bit():
    """float16/bfloat16 operands (two elements per u32 word) in the vec4 tiles: contiguous,
    transposed, odd K, odd offsets and ragged edges give the scalar tiles' results bit for
    bit, close to the CPU's float32 product."""
    code = """
import os, torch, torch_webgpu
for dt in (torch.float16, torch.bfloat16):
    for (m, k, n, ta, tb, off) in [(300, 256, 260, 0, 0, 0), (130, 71, 129, 0, 0, 1), (200, 64, 160, 1, 1, 0),
                                   (257, 130, 255, 1, 0, 1), (65, 2, 67, 0, 1, 1)]:
        g = torch.Generator().manual_seed(m + k)
        base = torch.randn(m * k + off, generator=g).to(dt)
        a = base[off:].view(k, m).t() if ta else base[off:].view(m, k)
        b = torch.randn(n, k, generator=g).to(dt).t() if tb else torch.randn(k, n, generator=g).to(dt)
        got = {}
        for v in ('tiled', 'tiled_medium', 'tiled_medium_scalar'):
            os.environ['TORCH_WEBGPU_GEMM_VARIANT'] = v
            got[v] = (a.to('webgpu') @ b.to('webgpu')).cpu()
        assert torch.equal(got['tiled_medium'], got['tiled_medium_scalar']), (dt, m, k, n)
        tol = 2e-2 if dt == torch.float16 else 1e-1
        for r in got.values():
            torch.testing.assert_close(r.float(), (a.float() @ b.float()).to(dt).float(), rtol=tol, atol=tol * 4)
print('ok')
"""
    result = run_python(code, env={"TORCH_WEBGPU_DISABLE_CPU_FALLBACK": "1", "TORCH_WEBGPU_ADAPTER_KIND": "gpu"})
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr[-2000:]


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("m,k,n", [(3, 4, 5), (40, 33, 37)])
def test_mm_special_values(m, k, n):
    a, b = small((m, k), torch.float32), small((k, n), torch.float32, seed=1)
    a[0, 0], a[1, 2], b[3, 1] = float("inf"), float("nan"), float("-inf")
    b[0, 2] = 0.0  # inf * 0 -> nan in that output only
    actual, expected = torch.mm(dev(a), dev(b)).cpu(), torch.mm(a, b)
    assert torch.equal(actual.isnan(), expected.isnan())
    assert torch.equal(actual.isinf(), expected.isinf())
    finite = expected.isfinite()
    torch.testing.assert_close(actual[finite], expected[finite], rtol=1e-4, atol=1e-4)


def test_mixed_devices_raise():
    a = torch.ones(2, 3, device=DEVICE)
    for fn in (lambda: torch.mm(a, torch.ones(3, 2)), lambda: torch.mm(torch.ones(4, 2), a),
               lambda: torch.bmm(a[None], torch.ones(1, 3, 2)), lambda: torch.addmm(torch.ones(2, 2), a, a.t()),
               lambda: torch.dot(a[0], torch.ones(3)), lambda: torch.mv(a, torch.ones(3))):
        with pytest.raises(RuntimeError, match=r"Expected all tensors to be on the same device") as info:
            fn()
        assert "webgpu:0" in str(info.value) and "cpu" in str(info.value)


# ---- split-K (products whose output tiles are too few to fill a GPU) ------------------------

def gemm_kernels(fn):
    """The GEMM kernels `fn` dispatches."""
    with torch.webgpu.profiler.profile() as prof:
        fn()
    return {r.kernel for r in prof.key_averages() if r.kernel.startswith("gemm:")}


@pytest.fixture
def splitk(monkeypatch):
    monkeypatch.setenv("TORCH_WEBGPU_GEMM_VARIANT", "splitk")
    monkeypatch.setenv("TORCH_WEBGPU_DISABLE_CPU_FALLBACK", "1")


# (m, k, n): K a multiple of the slice, K not one, K below one slice (64) and below a tile
# step (16), M and N off the 32x32 tile, M below 16 (prefill of a few tokens).
SPLITK_SHAPES = [(32, 384, 40), (20, 100, 37), (17, 40, 33), (33, 5, 18), (8, 300, 48), (1, 2, 1)]


@pytest.mark.usefixtures("splitk")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("m,k,n", SPLITK_SHAPES)
def test_splitk_mm_addmm(dtype, m, k, n):
    a, b, c = small((m, k), dtype), small((k, n), dtype, seed=1), small((m, n), dtype, seed=2)
    assert gemm_kernels(lambda: torch.mm(dev(a), dev(b))) == {"gemm:tiled", "gemm:splitk_sum"}
    close(torch.mm, a, b)
    close(torch.addmm, c, a, b, beta=0.5, alpha=-1.5)
    close(torch.addmm, c[0], a, b)  # bias broadcast over rows
    # Transposed operands read in place.
    close(lambda x, y: torch.mm(x.t(), y.t()), a.t().contiguous(), b.t().contiguous())


@pytest.mark.usefixtures("splitk")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_splitk_strided_offset_batched(dtype):
    big_a, big_b = small((3, 40, 250), dtype), small((3, 260, 70), dtype, seed=1)
    # Storage offsets and strides in every dimension (columns of A every 2nd element).
    a, b = big_a[1:, 3:25, 10:210:2], big_b[:2, 5:105, 7:45]
    close(torch.bmm, a, b)
    close(lambda x, y: torch.bmm(x.transpose(1, 2), y), a.transpose(1, 2).contiguous(), b)
    c = small((2, 1, 38), dtype, seed=3)
    close(torch.baddbmm, c, a, b, beta=2.0, alpha=0.5)
    x, w, bias = small((2, 9, 300), dtype), small((48, 300), dtype, seed=4), small((48,), dtype, seed=5)
    close(F.linear, x, w, bias)


@pytest.mark.usefixtures("splitk")
def test_splitk_empty_and_k0():
    a, b, c = torch.ones(20, 0), torch.ones(0, 18), small((20, 18), torch.float32)
    close(torch.mm, a, b)  # zeros
    close(torch.addmm, c, a, b, beta=0.5)  # beta * C
    close(torch.mm, torch.ones(0, 300), torch.ones(300, 18))
    close(torch.bmm, torch.ones(0, 20, 300), torch.ones(0, 300, 18))


def test_splitk_selected_by_shape_on_gpus():
    """With a GPU adapter's heuristics under the spec's default limits, MiniLM's linears (32
    tokens) take split-K and a product with enough tiles keeps the plain tiles; software
    adapters keep their register blocks."""
    code = (
        "import torch, torch.nn.functional as F, torch_webgpu\n"
        "torch.manual_seed(0)\n"
        "def kernels(m, k, n):\n"
        "    a, w = torch.randn(m, k), torch.randn(n, k)\n"
        "    with torch.webgpu.profiler.profile() as prof:\n"
        "        r = F.linear(a.to('webgpu'), w.to('webgpu')).cpu()\n"
        "    torch.testing.assert_close(r, F.linear(a, w), rtol=1e-4, atol=1e-6 * k)\n"
        "    return sorted(x.kernel for x in prof.key_averages() if x.kernel.startswith('gemm:'))\n"
        "print(kernels(32, 384, 384), kernels(32, 1536, 384), kernels(512, 64, 512))\n")
    gpu = run_python(code, env={"TORCH_WEBGPU_ADAPTER_KIND": "gpu", "TORCH_WEBGPU_LIMITS": "default",
                                "TORCH_WEBGPU_DISABLE_CPU_FALLBACK": "1", "TORCH_WEBGPU_GEMM_VARIANT": ""})
    assert gpu.returncode == 0, gpu.stderr[-2000:]
    split = "['gemm:splitk_sum', 'gemm:tiled']"
    assert gpu.stdout.strip() == f"{split} {split} ['gemm:tiled']", gpu.stdout
    soft = run_python(code, env={"TORCH_WEBGPU_ADAPTER_KIND": "software", "TORCH_WEBGPU_GEMM_VARIANT": ""})
    assert soft.returncode == 0, soft.stderr[-2000:]
    assert soft.stdout.strip() == "['gemm:block'] ['gemm:block'] ['gemm:block']", soft.stdout


@pytest.mark.parametrize("m", [5, 8, 15])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_few_rows_on_gpus(m, dtype, monkeypatch):
    """A short prompt's prefill (5-15 rows) on GPU adapters, against the CPU: F.linear with
    a bias runs the row-blocked GEMV where the weight's rows start on 16 bytes (300 float32s)
    and the tiled GEMM with split-K where they do not (300 halves); a plain product over an
    N-contiguous B takes the tiles."""
    monkeypatch.setenv("TORCH_WEBGPU_ADAPTER_KIND", "gpu")
    monkeypatch.setenv("TORCH_WEBGPU_DISABLE_CPU_FALLBACK", "1")
    g = torch.Generator().manual_seed(m)
    x = torch.randn(1, m, 300, generator=g).to(dtype)
    w, b = torch.randn(70, 300, generator=g).to(dtype), torch.randn(70, generator=g).to(dtype)
    with torch.webgpu.profiler.profile() as prof:
        got = F.linear(x.to("webgpu"), w.to("webgpu"), b.to("webgpu"))
    want = "gemm:gemv" if dtype == torch.float32 else "gemm:tiled"
    assert any(r.kernel.startswith(want) for r in prof.key_averages())
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else dict(rtol=2e-3, atol=2e-3)
    torch.testing.assert_close(got.cpu(), F.linear(x.float(), w.float(), b.float()).to(dtype), **tol)
    a, c = torch.randn(m, 130, generator=g), torch.randn(130, 50, generator=g)
    torch.testing.assert_close((a.to("webgpu") @ c.to("webgpu")).cpu(), a @ c, rtol=1e-4, atol=1e-4)
