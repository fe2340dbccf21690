"""The native elementwise family against the CPU: every op for every dtype (exceptions
must match the CPU's type where the CPU refuses a dtype), broadcasting, type promotion,
Python scalars, strided and offset inputs, in-place, out=, 0-dim and empty tensors, int64
extremes and special float values. Every test here runs with the CPU fallback disabled,
so a passing test also proves the op ran natively."""
import math
import warnings

import pytest
import torch
import torch.nn.functional as F

from conftest import (DEVICE, INT64_MAX, INT64_MIN, NATIVE_DTYPES, assert_same, check, dev,
                      make)

pytestmark = pytest.mark.usefixtures("no_fallback")

UNARY = {
    "neg": torch.neg,
    "abs": torch.abs,
    "sign": torch.sign,
    "exp": torch.exp,
    "log": torch.log,
    "log1p": torch.log1p,
    "expm1": torch.expm1,
    "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt,
    "sin": torch.sin,
    "cos": torch.cos,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "relu": torch.relu,
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": F.silu,
    "logical_not": torch.logical_not,
    "bitwise_not": torch.bitwise_not,
}

BINARY = {
    "add": torch.add,
    "add_alpha": lambda a, b: torch.add(a, b, alpha=3),
    "add_float_alpha": lambda a, b: torch.add(a, b, alpha=0.5),
    "sub": torch.sub,
    "sub_alpha": lambda a, b: torch.sub(a, b, alpha=2),
    "mul": torch.mul,
    "div": torch.div,
    "div_trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "floor_divide": torch.floor_divide,
    "remainder": torch.remainder,
    "fmod": torch.fmod,
    "pow": torch.pow,
    "maximum": torch.maximum,
    "minimum": torch.minimum,
    "eq": torch.eq,
    "ne": torch.ne,
    "lt": torch.lt,
    "le": torch.le,
    "gt": torch.gt,
    "ge": torch.ge,
    "logical_and": torch.logical_and,
    "logical_or": torch.logical_or,
    "logical_xor": torch.logical_xor,
    "bitwise_and": torch.bitwise_and,
    "bitwise_or": torch.bitwise_or,
    "bitwise_xor": torch.bitwise_xor,
    "lshift": torch.bitwise_left_shift,
    "rshift": torch.bitwise_right_shift,
}

INT_DIVISION = {"div_trunc", "div_floor", "floor_divide", "remainder", "fmod"}


def binary_inputs(name, dtype, shape=(4, 5), seed=0):
    a = make(shape, dtype, seed=seed)
    if name in INT_DIVISION:
        # Integer division by zero raises on the CPU (a GPU cannot): keep divisors nonzero.
        b = make(shape, dtype, seed=seed + 1, exclude_zero=True)
    elif name == "pow":
        if dtype.is_floating_point:
            a = make(shape, dtype, seed=seed, low=-3, high=3)
            b = make(shape, dtype, seed=seed + 1, low=-3, high=3)
            # Integer exponents too, where negative bases have real powers.
            b[::2] = b[::2].round()
        else:
            a = make(shape, dtype, seed=seed, low=-5, high=5)
            b = make(shape, dtype, seed=seed + 1, low=0, high=6)
    elif name in ("lshift", "rshift"):
        b = make(shape, dtype, seed=seed + 1, low=0, high=70)
    else:
        b = make(shape, dtype, seed=seed + 1)
        if dtype != torch.bool:
            b[0] = a[0]  # exact ties for comparisons, maximum and minimum
    return a, b


@pytest.mark.parametrize("dtype", NATIVE_DTYPES, ids=str)
@pytest.mark.parametrize("name", list(UNARY))
def test_unary_all_dtypes(name, dtype):
    fn = UNARY[name]
    x = make((4, 5), dtype, seed=1)
    if dtype.is_floating_point:
        x[0, :4] = torch.tensor([0.0, -0.0, 1e-3, -1e-3])
    check(fn, x)


@pytest.mark.parametrize("dtype", NATIVE_DTYPES, ids=str)
@pytest.mark.parametrize("name", list(BINARY))
def test_binary_all_dtypes(name, dtype):
    a, b = binary_inputs(name, dtype)
    check(BINARY[name], a, b)


@pytest.mark.parametrize("dtype", NATIVE_DTYPES, ids=str)
def test_where_all_dtypes(dtype):
    c = make((4, 5), torch.bool, seed=3)
    a = make((4, 5), dtype, seed=4)
    b = make((4, 5), dtype, seed=5)
    check(torch.where, c, a, b, exact=True)
    check(torch.where, c, a, b[0], exact=True)  # broadcast
    check(lambda c, a: torch.where(c, a, 0), c, a, exact=True)
    check(lambda c, b: torch.where(c, 1, b), c, b, exact=True)
    check(lambda c: torch.where(c, 1.5, -2.0), c, exact=True)
    # 0-dim CPU tensors (not Python numbers) are values too, cast to the result dtype.
    for value in (torch.tensor(3), torch.tensor(-0.7), torch.tensor(True)):
        check(lambda c, a: torch.where(c, a, value), c, a, exact=True)
        check(lambda c, a: torch.where(c, value, a), c, a, exact=True)
    # A uint8 condition is deprecated but accepted (with a warning); other dtypes are refused.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "where received a uint8 condition")
        check(torch.where, a.to(torch.uint8), a, b, exact=True)
    check(torch.where, a.to(torch.int32), a, b)


# ---- shapes, layouts and promotion ----------------------------------------------------

BROADCAST_SHAPES = [((3, 1, 4), (1, 5, 1)), ((4,), (3, 4)), ((), (2, 3)), ((2, 3), ()),
                    ((1,), (5,)), ((0, 3), (1, 3)), ((2, 1, 3, 1), (4, 1, 1))]


@pytest.mark.parametrize("shapes", BROADCAST_SHAPES, ids=str)
@pytest.mark.parametrize("name", ["add", "mul", "div", "maximum", "lt", "logical_xor",
                                  "remainder", "pow"])
def test_broadcasting(name, shapes):
    a = make(shapes[0], torch.float32, seed=1, low=0.5, high=3)
    b = make(shapes[1], torch.float32, seed=2, low=0.5, high=3)
    assert check(BINARY[name], a, b)


def test_broadcast_where():
    c = make((3, 1), torch.bool, seed=1)
    a = make((1, 4), torch.float32, seed=2)
    b = make((), torch.float32, seed=3)
    assert check(torch.where, c, a, b, exact=True)


PROMOTION_CASES = [
    (torch.int32, torch.float32), (torch.int64, torch.float16), (torch.bool, torch.int32),
    (torch.uint8, torch.int8), (torch.int8, torch.int16), (torch.float16, torch.bfloat16),
    (torch.bool, torch.float32), (torch.int64, torch.int32), (torch.uint8, torch.bool),
    (torch.bfloat16, torch.float32), (torch.int16, torch.float16),
]


@pytest.mark.parametrize("dtypes", PROMOTION_CASES, ids=str)
@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "maximum", "eq", "bitwise_or",
                                  "remainder"])
def test_type_promotion(name, dtypes):
    a = make((3, 4), dtypes[0], seed=1, exclude_zero=True)
    b = make((3, 4), dtypes[1], seed=2, exclude_zero=True)
    check(BINARY[name], a, b)
    check(BINARY[name], b, a)


SCALARS = [2, -3, 2.5, True, 0.5, 2**40]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.int32,
                                   torch.uint8, torch.bool], ids=str)
@pytest.mark.parametrize("scalar", SCALARS, ids=str)
def test_python_scalars(dtype, scalar):
    x = make((3, 4), dtype, seed=3, low=1, high=20, exclude_zero=True)
    for fn in (lambda t: t + scalar, lambda t: scalar - t, lambda t: t * scalar,
               lambda t: t / scalar, lambda t: t > scalar, lambda t: t == scalar,
               lambda t: torch.maximum(t, torch.tensor(scalar)), lambda t: t % scalar,
               lambda t: t // scalar, lambda t: torch.pow(t, 2), lambda t: scalar ** t,
               lambda t: torch.where(t > 3, t, scalar), lambda t: t & scalar,
               lambda t: t << 1, lambda t: scalar % t):
        check(fn, x)


def test_int64_plus_python_float():
    x = torch.tensor([1, 2**40, -(2**53) - 1])
    assert check(lambda t: t + 0.5, x)
    assert check(lambda t: t * 1.5, x)
    assert check(lambda t: t / 2, x)
    assert (dev(x) + 0.5).dtype == torch.float32


def test_zero_dim_operands():
    a = make((3, 4), torch.float32, seed=1)
    s = torch.tensor(2.5)
    # A 0-dim CPU tensor is allowed with a webgpu tensor, like a Python scalar.
    assert_same(dev(a) * s, a * s)
    assert_same(s - dev(a), s - a)
    assert_same(torch.where(dev(a) > 0, dev(a), torch.tensor(0.0)), torch.where(a > 0, a, 0.0))
    i = torch.tensor(3)
    assert_same(dev(a) + i, a + i)
    assert_same(dev(a.long()) * i, a.long() * i, exact=True)
    # 0-dim webgpu tensors
    assert check(torch.add, s, a)
    assert check(torch.mul, s, s)
    assert check(torch.neg, s)
    assert check(torch.lt, torch.tensor(3), torch.tensor(2))


def test_empty_tensors():
    for shape in [(0,), (3, 0), (0, 2, 4)]:
        a = make(shape, torch.float32)
        assert check(torch.add, a, a)
        assert check(torch.exp, a)
        assert check(torch.where, make(shape, torch.bool), a, a)
        assert check(torch.add, a, make((1,) * len(shape), torch.float32))


LAYOUTS = {
    "transposed": lambda t: t.t(),
    "step": lambda t: t[:, ::2],
    "offset": lambda t: t[1:, 3:],
    "expanded": lambda t: t[:1].expand(6, 8),
    "flat_offset": lambda t: t.reshape(-1)[7:31].view(4, 6),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.int16,
                                   torch.uint8, torch.bool], ids=str)
def test_strided_and_offset_inputs(layout, dtype):
    view = LAYOUTS[layout]
    a = make((6, 8), dtype, seed=1)
    b = make((6, 8), dtype, seed=2)
    da, db = dev(a), dev(b)
    ops = [torch.mul, torch.maximum, torch.eq, torch.logical_or]
    if dtype != torch.bool:
        ops.append(torch.add)
    for fn in ops:
        assert_same(fn(view(da), view(db)), fn(view(a), view(b)))
        # A strided operand with a contiguous one.
        other = make(tuple(view(a).shape), dtype, seed=7)
        assert_same(fn(view(da), dev(other)), fn(view(a), other))
        assert_same(fn(dev(other), view(da)), fn(other, view(a)))
    assert_same(torch.abs(view(da)) if dtype != torch.bool else torch.logical_not(view(da)),
                torch.abs(view(a)) if dtype != torch.bool else torch.logical_not(view(a)))
    c = make((6, 8), torch.bool, seed=3)
    assert_same(torch.where(view(dev(c)), view(da), view(db)), torch.where(view(c), view(a), view(b)))


ROW_DTYPES = [torch.float32, torch.float16, torch.int32, torch.uint8, torch.bool]


@pytest.mark.parametrize("dtype", ROW_DTYPES, ids=str)
def test_row_slices_in_vec4_words(dtype):
    """Two-dim operands contiguous within rows whose rows start on 16 bytes (cat's slices of
    its output, narrowed rows, a row-broadcast operand) take the vec4-per-row layout (":r"
    in the kernel's name); rows off 16 bytes or of a width that is not a whole number of
    vec4s keep the strided one. Both against the CPU."""
    width = 64  # a whole number of vec4s at every element size
    a, b = make((5, 3 * width), dtype, seed=1), make((5, 3 * width), dtype, seed=2)
    row = make((width,), dtype, seed=3)
    da, db, drow = dev(a), dev(b), dev(row)
    fn = torch.logical_xor if dtype == torch.bool else torch.maximum
    with torch.webgpu.profiler.profile() as prof:
        got = torch.cat([da, db], 1)
        sliced = fn(da[:, width:2 * width], db[:, :width])
        bias = fn(da[:, :width], drow)
    assert_same(got, torch.cat([a, b], 1))
    assert_same(sliced, fn(a[:, width:2 * width], b[:, :width]))
    assert_same(bias, fn(a[:, :width], row))
    assert any(":r|" in r.kernel for r in prof.key_averages()), [r.kernel for r in prof.key_averages()]
    # Off 16 bytes (one element in) and a width that is not whole vec4s: strided, same answers.
    for view in (lambda t: t[:, 1:1 + width], lambda t: t[:, :width - 1]):
        assert_same(fn(view(da), view(db)), fn(view(a), view(b)))
        assert_same(view(da).contiguous(), view(a).contiguous())
    # A wider input into a narrower output (a cast of rows), and an empty row range.
    if dtype == torch.float32:
        assert_same(da[:, :width].to(torch.float16), a[:, :width].to(torch.float16))
    assert_same(fn(da[:0, :width], db[:0, :width]), fn(a[:0, :width], b[:0, :width]))


def test_high_rank_inputs():
    # More dims than one kernel launch takes (8), non-coalescable strides.
    a = make((2,) * 10, torch.float32, seed=1)
    b = make((2,) * 10, torch.float32, seed=2)
    p = list(range(10))[::-1]
    assert check(lambda x, y: x.permute(p) + y[..., ::1].transpose(0, 9), a, b)
    assert check(lambda x, y: torch.where(x > 0, x.permute(p), y), a, b)


# ---- in-place and out= -----------------------------------------------------------------

def test_inplace_ops():
    a = make((4, 6), torch.float32, seed=1)
    b = make((4, 6), torch.float32, seed=2, low=0.5, high=2)
    for name, fn in [("add_", lambda x, y: x.add_(y, alpha=2)), ("sub_", lambda x, y: x.sub_(y)),
                     ("mul_", lambda x, y: x.mul_(y)), ("div_", lambda x, y: x.div_(y)),
                     ("pow_", lambda x, y: x.abs_().pow_(y)), ("clamp_min_", lambda x, y: x.relu_()),
                     ("exp_", lambda x, y: x.exp_()), ("sigmoid_", lambda x, y: x.sigmoid_()),
                     ("neg_", lambda x, y: x.neg_()), ("remainder_", lambda x, y: x.remainder_(y)),
                     ("div_floor_", lambda x, y: x.div_(y, rounding_mode="floor")),
                     ("floor_divide_", lambda x, y: x.floor_divide_(y)),
                     ("maximum", lambda x, y: torch.maximum(x, y, out=x)),
                     ("eq_", lambda x, y: x.eq_(y)), ("lt_", lambda x, y: x.lt_(y))]:
        x, dx = a.clone(), dev(a)
        ptr = dx.data_ptr()
        r = fn(dx, dev(b))
        e = fn(x, b)
        assert r.data_ptr() == ptr, name
        assert_same(dx, x)
        assert_same(r, e)


def test_inplace_strided_and_broadcast():
    base = make((4, 6), torch.float32, seed=1)
    other = make((6,), torch.float32, seed=2)
    d = dev(base)
    d[:, ::2].add_(dev(other[:3]))
    d.t()[1::2].mul_(2)
    d[1:].add_(dev(other))
    e = base.clone()
    e[:, ::2].add_(other[:3])
    e.t()[1::2].mul_(2)
    e[1:].add_(other)
    assert_same(d, e)
    # Self-aliasing in-place: x op= x
    x = make((3, 3), torch.float32, seed=3)
    check(lambda t: t.mul_(t), x)
    check(lambda t: t.add_(t[0]), x)  # reads a row of self while writing it: refused
    # In-place ops that would need a broadcast of self fail like on the CPU.
    check(lambda t, u: t.add_(u), x[0:1], x)
    # Overlapping in-place (input and output share memory) behaves like the CPU.
    check(lambda t: t[1:].add_(t[:-1]), make((5,), torch.float32))


def test_inplace_int_dtypes():
    a = make((3, 4), torch.int32, seed=1)
    check(lambda t: t.add_(5), a)
    check(lambda t: t.mul_(t), a)
    check(lambda t: t.bitwise_xor_(7), a)
    check(lambda t: t.div_(2), a)  # int result of true division: CPU refuses
    check(lambda t: t.div_(2, rounding_mode="floor"), a)
    check(lambda t: t.add_(1.5), a)  # float scalar into int: CPU refuses
    b = make((3, 4), torch.uint8, seed=2)
    check(lambda t: t.sub_(200), b)  # wraps
    check(lambda t: t.mul_(3), make((3, 4), torch.int8, seed=3))  # wraps
    check(lambda t: t.logical_not_(), make((3, 4), torch.int16, seed=4))


def test_out_same_and_other_dtype():
    a = make((3, 4), torch.int32, seed=1)
    b = make((3, 4), torch.int32, seed=2, exclude_zero=True)
    f = make((3, 4), torch.float32, seed=3)
    for out_dtype in (torch.int32, torch.int64, torch.float32, torch.float16, torch.bool):
        out = torch.empty(3, 4, dtype=out_dtype)
        # Allowed casts succeed, the rest raise as on the CPU (e.g. neg into another dtype).
        check(lambda x, y, o: torch.add(x, y, out=o), a, b, out, exact=True)
        check(lambda x, y, o: torch.lt(x, y, out=o), a, b, out, exact=True)
        check(lambda x, o: torch.neg(x, out=o), a, out, exact=True)
        check(lambda x, y, o: torch.mul(x, y, out=o), f, b, out)
        check(lambda x, o: torch.exp(x, out=o), f, out)
        check(lambda x, o: torch.div(x, 3, out=o), f, out)
        check(lambda x, o: torch.where(x > 0, x > 1, x < -1, out=o), f, out)
    r = torch.empty(3, 4, dtype=torch.float16, device=DEVICE)
    assert torch.add(dev(a), dev(b), out=r) is r


def test_out_disallowed_dtype():
    f = make((3, 4), torch.float32, seed=1)
    i = make((3, 4), torch.int64, seed=2)
    for fn in (lambda x, y, o: torch.add(x, y, out=o), lambda x, y, o: torch.mul(x, y, out=o),
               lambda x, y, o: torch.div(x, y, out=o), lambda x, y, o: torch.exp(x, out=o)):
        with pytest.raises(RuntimeError, match="can't be cast to the desired output type"):
            fn(f, f, torch.empty(3, 4, dtype=torch.int64))
        with pytest.raises(RuntimeError, match="can't be cast to the desired output type"):
            fn(dev(f), dev(f), torch.empty(3, 4, dtype=torch.int64, device=DEVICE))
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type"):
        torch.div(dev(i), dev(i), out=torch.empty(3, 4, dtype=torch.int64, device=DEVICE))
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type"):
        torch.add(dev(i), dev(i), out=torch.empty(3, 4, dtype=torch.bool, device=DEVICE))
    check(lambda x, o: torch.where(x > 0, x, x, out=o), f, torch.empty(3, 4, dtype=torch.int64))
    # The device still works afterwards.
    assert_same(dev(f) + 1, f + 1)


def test_out_resize_and_strided():
    a = make((3, 4), torch.float32, seed=1)
    b = make((3, 4), torch.float32, seed=2)
    o = torch.empty(0, device=DEVICE)
    torch.mul(dev(a), dev(b), out=o)
    assert_same(o, a * b)
    big = torch.zeros(3, 8, device=DEVICE)
    torch.add(dev(a), dev(b), out=big[:, 1::2])
    ref = torch.zeros(3, 8)
    torch.add(a, b, out=ref[:, 1::2])
    assert_same(big, ref)
    t = torch.zeros(4, 3, device=DEVICE).t()
    torch.sub(dev(a), dev(b), alpha=0.5, out=t)
    assert_same(t, torch.sub(a, b, alpha=0.5))
    with pytest.warns(UserWarning, match="resized"):
        torch.add(dev(a), dev(b), out=torch.empty(5, device=DEVICE))


# ---- int64 extremes -------------------------------------------------------------------

def test_int64_wrapping():
    x = torch.tensor([INT64_MAX, INT64_MIN, INT64_MAX - 5, -1, 3])
    assert check(lambda t: t * 2, x, exact=True)
    assert check(lambda t: t + t, x, exact=True)
    assert check(lambda t: t + 1, x, exact=True)
    assert check(lambda t: t - 1, x, exact=True)
    assert check(lambda t: -t, x, exact=True)
    assert check(lambda t: t.abs(), x, exact=True)
    assert check(lambda t: t * t, x, exact=True)
    assert check(lambda t: t * (2**33 + 7), x, exact=True)
    assert check(lambda t: torch.add(t, t, alpha=-3), x, exact=True)
    assert check(lambda t: t ** 3, x, exact=True)
    assert check(lambda t: t << 1, x, exact=True)
    assert check(lambda t: t >> 63, x, exact=True)
    assert check(lambda t: t >> 1, x, exact=True)
    assert (dev(x) * 2).cpu()[0].item() == -2


def test_int64_division_of_negatives():
    a = torch.tensor([-7, 7, -7, 7, INT64_MIN, INT64_MAX, -(2**53) - 3, 2**62 + 1, -1, 0, -9])
    b = torch.tensor([2, -2, -2, 2, 3, -10, 7, -(2**31), 5, -4, 3])
    for mode in (None, "trunc", "floor"):
        assert check(lambda x, y: torch.div(x, y, rounding_mode=mode), a, b, exact=mode is not None)
    assert check(torch.remainder, a, b, exact=True)
    assert check(torch.fmod, a, b, exact=True)
    assert check(torch.floor_divide, a, b, exact=True)
    assert check(lambda x: x // 3, a, exact=True)
    assert check(lambda x: x % -3, a, exact=True)
    assert check(lambda x: torch.div(x, -2**33, rounding_mode="floor"), a, exact=True)
    assert torch.div(dev(a), dev(b), rounding_mode="floor").cpu()[0].item() == -4
    assert torch.remainder(dev(a), dev(b)).cpu()[0].item() == 1
    assert check(lambda x: x // -1, torch.tensor([INT64_MIN + 1, 5]), exact=True)


def test_int64_large_compare_exact():
    base = 2**53
    a = torch.tensor([base, base + 1, base + 2, -base - 1, INT64_MAX, INT64_MIN, 2**62])
    b = torch.tensor([base + 1, base + 1, base + 1, -base, INT64_MAX - 1, INT64_MIN + 1, 2**62])
    for fn in (torch.eq, torch.ne, torch.lt, torch.le, torch.gt, torch.ge, torch.maximum,
               torch.minimum):
        assert check(fn, a, b, exact=True)
    # As float64 these are equal; as int64 they are not.
    assert (dev(a) == base + 1).cpu().tolist() == [False, True, False, False, False, False, False]
    assert check(lambda x: x > base + 1, a, exact=True)
    assert check(lambda x: torch.where(x > base, x, INT64_MIN), a, exact=True)
    assert check(lambda x, y: x ^ y, a, b, exact=True)


def test_int64_mixed_with_narrow():
    a = torch.tensor([2**40, -(2**40), 5, -3], dtype=torch.int64)
    b = torch.tensor([100, -100, 127, -128], dtype=torch.int8)
    for fn in (torch.add, torch.mul, torch.sub, torch.maximum, torch.lt, torch.bitwise_and):
        assert check(fn, a, b, exact=True)
        assert check(fn, b, a, exact=True)
    u = torch.tensor([255, 0, 1, 128], dtype=torch.uint8)
    assert check(torch.add, u, b, exact=True)
    assert check(torch.mul, u, torch.tensor([2**33, 1, -1, 3]), exact=True)


# ---- special values ---------------------------------------------------------------------

NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_nan_inf_maximum_minimum(dtype):
    a = torch.tensor([NAN, 1.0, NAN, INF, -INF, 0.0, -0.0, 2.0], dtype=dtype)
    b = torch.tensor([1.0, NAN, NAN, -INF, 5.0, -0.0, 0.0, INF], dtype=dtype)
    for fn in (torch.maximum, torch.minimum, torch.eq, torch.ne, torch.lt, torch.ge, torch.add,
               torch.mul, torch.sub, torch.div, torch.remainder, torch.fmod):
        assert check(fn, a, b)
    assert check(torch.relu, a)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_special_unary(dtype):
    x = torch.tensor([NAN, INF, -INF, 0.0, -0.0, -1.0, -2.5, 1e-7, 88.0, -88.0, 20.0, -20.0,
                      1e4, -1e4], dtype=dtype)
    for name in ("sign", "abs", "neg", "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "tanh",
                 "sigmoid", "relu", "gelu_tanh", "silu", "logical_not", "sin", "cos"):
        assert check(UNARY[name], x)
    # The CPU's vectorized GELU gives nan for +inf (its scalar path gives inf, the limit):
    # compare finite values with the CPU and +inf with the exact answer.
    assert check(F.gelu, x[x.isfinite() | x.isnan() | (x < 0)])
    assert F.gelu(dev(torch.tensor([INF], dtype=dtype))).item() == INF
    # log of negatives is nan, log(0) is -inf, sqrt(-1) is nan.
    r = torch.log(dev(torch.tensor([-1.0, 0.0, 1.0], dtype=dtype))).cpu()
    assert math.isnan(r[0]) and r[1] == -INF and r[2] == 0
    # sign(nan) is 0 in PyTorch ((0 < x) - (x < 0)).
    assert torch.sign(dev(torch.tensor([NAN, -NAN]))).cpu().tolist() == [0.0, 0.0]


def test_pow_special_cases():
    bases = torch.tensor([-2.0, -2.0, -2.0, -0.5, -3.0, 0.0, -0.0, 0.0, -0.0, 1.0, NAN, -1.0, -1.0,
                          2.0, 0.5, INF, -INF, -INF, 1.5])
    exps = torch.tensor([2.0, 3.0, -3.0, -2.0, 0.5, -1.0, -1.0, -2.0, -3.0, NAN, 0.0, INF, -INF,
                         -INF, INF, -0.5, 3.0, 2.0, 40.5])
    check(torch.pow, bases, exps)
    check(lambda b: torch.pow(b, 3), bases)
    check(lambda b: torch.pow(b, -2), bases)
    check(lambda b: torch.pow(b, 0.5), bases)
    check(lambda b: torch.pow(b, 2.5), bases)
    check(lambda e: torch.pow(-2.0, e), exps)
    check(lambda e: torch.pow(2, e), exps)
    # Negative bases with integer exponents are real; with fractional ones, nan.
    r = torch.pow(dev(torch.tensor([-2.0, -2.0, -8.0])), dev(torch.tensor([3.0, -2.0, 1 / 3]))).cpu()
    assert r[0] == -8.0 and r[1] == 0.25 and math.isnan(r[2])
    # Integer powers.
    ib = torch.tensor([-3, -2, -1, 0, 1, 2, 3], dtype=torch.int32)
    check(lambda b: b ** 3, ib, exact=True)
    check(lambda b: b ** 0, ib, exact=True)
    check(torch.pow, ib, torch.tensor([-1, -2, -3, 0, -1, -2, 2], dtype=torch.int32), exact=True)
    # Integers to negative scalar powers are refused, like on the CPU.
    check(lambda b: b ** -1, ib)
    check(lambda b: 2 ** b, ib)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_pow_square_is_exact(dtype):
    """pow(x, 2) runs as x * x (its own kernel, as on the CPU): bit-equal, special values,
    a strided view with an offset, 0-dim and empty tensors."""
    x = torch.cat([torch.tensor([INF, -INF, NAN, -0.0, 0.0, 1e30, -1e-30, 3e38]), torch.randn(300) * 100])
    x = x.to(dtype)
    with torch.webgpu.profiler.profile() as prof:
        got = torch.pow(dev(x), 2).cpu()
    assert any(r.kernel.startswith("ew:pow_square") for r in prof.key_averages())
    torch.testing.assert_close(got, x.pow(2), rtol=0, atol=0, equal_nan=True)
    view = x.view(2, -1)[:, 3::2]
    torch.testing.assert_close(dev(x).view(2, -1)[:, 3::2].pow(2.0).cpu(), view.pow(2.0), rtol=0, atol=0,
                               equal_nan=True)
    for t in (x[5], x[:0]):
        torch.testing.assert_close(dev(t).pow(2).cpu(), t.pow(2), rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.int64], ids=str)
def test_division_signs_and_zeros(dtype):
    a = torch.tensor([7, -7, 7, -7, 0, 5, -5, 1], dtype=dtype)
    b = torch.tensor([2, 2, -2, -2, 3, -3, 3, -1], dtype=dtype)
    for fn in (torch.remainder, torch.fmod, lambda x, y: torch.div(x, y, rounding_mode="floor"),
               lambda x, y: torch.div(x, y, rounding_mode="trunc"), torch.div):
        assert check(fn, a, b)
    if dtype.is_floating_point:
        z = torch.tensor([1.0, -1.0, 0.0, NAN, INF])
        zero = torch.zeros(5)
        for fn in (torch.div, lambda x, y: torch.div(x, y, rounding_mode="floor"),
                   lambda x, y: torch.div(x, y, rounding_mode="trunc"), torch.remainder,
                   torch.fmod):
            assert check(fn, z, zero)
            assert check(fn, z, -zero)
        assert check(torch.remainder, torch.tensor([5.5, -5.5, 0.0, -0.0]), torch.tensor([INF, INF, -2.0, 2.0]))


def test_bitwise_shift_amounts():
    for dtype in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8):
        a = make((16,), dtype, seed=4, low=-100, high=100)
        s = torch.tensor([0, 1, 3, 7, 8, 15, 16, 31, 32, 33, 63, 64, 65, 100, 5, 2], dtype=dtype
                         if dtype != torch.int8 and dtype != torch.uint8 else torch.int64).to(dtype)
        assert check(torch.bitwise_left_shift, a, s, exact=True)
        assert check(torch.bitwise_right_shift, a, s, exact=True)
        assert check(lambda x: x << 2, a, exact=True)
        assert check(lambda x: x >> 2, a, exact=True)


def test_gelu_accuracy_tails():
    x = torch.linspace(-12, 12, 241)
    assert check(F.gelu, x)
    assert check(lambda t: F.gelu(t, approximate="tanh"), x)
    assert check(torch.tanh, x)
    assert check(torch.sigmoid, x)
    assert check(F.silu, x)
    assert check(torch.expm1, torch.linspace(-1e-3, 1e-3, 101))
    assert check(torch.log1p, torch.linspace(-0.5, 1e-3, 101))
    with pytest.raises(RuntimeError, match="approximate"):
        F.gelu(dev(x), approximate="exact")


INT64_EDGE = torch.tensor([0, 1, -1, 7, -7, 2**31, -(2**31), 2**32 + 5, 2**53 + 1, -(2**53) - 1,
                           2**62 + 3, -(2**62), INT64_MAX, INT64_MIN, INT64_MAX - 1,
                           INT64_MIN + 1])


def _int64_pair(name):
    a = INT64_EDGE.clone()
    b = INT64_EDGE.roll(5)
    if name in INT_DIVISION:
        b[b == 0] = 7
        # INT64_MIN / -1 overflows: the CPU traps (SIGFPE), so it is left out.
        b[(a == INT64_MIN) & (b == -1)] = 3
    elif name == "pow":
        b = torch.tensor([0, 1, 2, 3, 63, 64, 5, 1, 2, 3, 0, 1, 2, 62, 1, 2])
    elif name in ("lshift", "rshift"):
        b = torch.tensor([0, 1, 31, 32, 33, 63, 64, 65, 2, 62, 1, 7, 60, 1, 3, 40])
    return a, b


@pytest.mark.parametrize("name", list(BINARY))
def test_int64_edge_values_binary(name):
    a, b = _int64_pair(name)
    check(BINARY[name], a, b)
    if name not in INT_DIVISION | {"pow", "lshift", "rshift"}:
        check(BINARY[name], b, a)


@pytest.mark.parametrize("name", list(UNARY))
def test_int64_edge_values_unary(name):
    check(UNARY[name], INT64_EDGE)


def test_int64_edge_where_and_scalars():
    c = INT64_EDGE > 0
    assert check(torch.where, c, INT64_EDGE, INT64_EDGE.roll(3), exact=True)
    assert check(lambda x: torch.where(x < 0, x, INT64_MAX), INT64_EDGE, exact=True)
    for s in (INT64_MAX, INT64_MIN, 2**53 + 1, -3):
        assert check(lambda x: x + s, INT64_EDGE, exact=True)
        assert check(lambda x: x * s, INT64_EDGE, exact=True)
        assert check(lambda x: x == s, INT64_EDGE, exact=True)
        assert check(lambda x: x < s, INT64_EDGE, exact=True)
        assert check(lambda x: torch.maximum(x, torch.tensor(s)), INT64_EDGE, exact=True)


def test_mixed_dtype_inplace():
    h = make((3, 4), torch.float16, seed=1)
    f = make((3, 4), torch.float32, seed=2)
    i = make((3, 4), torch.int32, seed=3)
    check(lambda x, y: x.add_(y), h, f)
    check(lambda x, y: x.mul_(y), f, i)
    check(lambda x, y: x.add_(y), i, f)  # float into int in place: refused like the CPU
    check(lambda x, y: x.sub_(y, alpha=2), i, i.to(torch.int8))
    check(lambda x, y: x.div_(y), h, i.abs() + 1)
    b = make((3, 4), torch.bool, seed=4)
    check(lambda x, y: x.logical_and_(y), b, i)
    check(lambda x, y: x.mul_(y), b, b)


def test_sin_cos_large_arguments():
    # Argument reduction must stay accurate far from zero (GPU builtins do not).
    big = torch.tensor([257.0, -300.5, 1e4 + 0.25, 105615.0, -1e6, 3.0e7, 2.0**40, -1e20,
                        2.0**62, 3.3e38, -3.4e38, 1e-30, 0.7853981, 1.5707963])
    sweep = torch.linspace(-1e6, 1e6, 4001)
    for x in (big, sweep):
        assert check(torch.sin, x, tolerances=dict(rtol=1e-5, atol=2e-7))
        assert check(torch.cos, x, tolerances=dict(rtol=1e-5, atol=2e-7))
    assert check(torch.sin, big.half().float().half())
    assert check(torch.cos, big.bfloat16())


def device_flushes_subnormals():
    # Some drivers flush float32 subnormals in arithmetic (NVIDIA's Vulkan driver does;
    # WGSL allows it and gives no control over it).
    return (dev(torch.tensor([1e-39])) * 1.0).cpu().item() == 0.0


def test_float_fmod_remainder_floor_div_exact():
    # fmod is exact in IEEE arithmetic (huge quotients, subnormals, infinities, zeros); the
    # device computes it in integer arithmetic, so subnormals survive even where the
    # driver flushes them. remainder and floor division add float arithmetic on top: on a
    # flushing device they are checked on normal numbers only.
    x = torch.tensor([1.5, 3.0, 7.25, 19.0, 1e-40, 3e-39, -2.5, 1e38, 0.1, -0.0, 1e-45, -3e38,
                      INF, NAN])
    scalars = [2**40, 1e-39, 0.1, -3.0, 1e38, 3.3e38, 1e-45, -7e-42, 0.0, INF, -INF, 2.0**-126]
    flushes = device_flushes_subnormals()
    normal = lambda t: t[(t.abs() >= 2.0**-126) | (t == 0) | ~t.isfinite()]
    for s in scalars:
        y = torch.full_like(x, s)
        assert check(torch.fmod, x, y, exact=True)
        assert check(torch.fmod, y, x, exact=True)
        xs = normal(x) if flushes else x
        if flushes and 0 < abs(s) < 2.0**-126:
            continue
        ys = torch.full_like(xs, s)
        for fn in (torch.remainder, lambda a, b: torch.div(a, b, rounding_mode="floor"),
                   torch.floor_divide):
            if flushes:
                # Results that land in the subnormal range are flushed too.
                for a, b in ((xs, ys), (ys, xs)):
                    ref = fn(a, b)
                    is_normal = lambda t: (t.abs() >= 2.0**-126) | (t == 0) | ~t.isfinite()
                    keep = is_normal(ref) & is_normal(a) & is_normal(b)
                    assert check(fn, a[keep], b[keep], exact=True)
            else:
                assert check(fn, xs, ys, exact=True)
                assert check(fn, ys, xs, exact=True)
        assert check(lambda t: t % s, xs, exact=True)
        assert check(lambda t: s % t, xs, exact=True)
    h = torch.tensor([1000.5, -3.25, 65504.0, 6e-8], dtype=torch.float16)
    assert check(torch.fmod, h, torch.tensor([0.1, 7.0, -3.0, 1e-7], dtype=torch.float16), exact=True)


# Ops where the CPU rounds intermediates to the half type, so its result can be one
# half-type ulp off the correctly rounded float32 computation the device does: its
# vectorized path rounds the quotient (or alpha * scalar) before truncating/adding, and
# its scalar path does not (bfloat16 2048 // -3 is -680 or -684 by tensor size); pow with
# exponent 3 multiplies in the half type (bfloat16 (-7.75) ** 3 is -464, not -466).
HALF_ULP_OPS = {"div_trunc", "div_floor", "floor_divide", "add_alpha", "sub_alpha",
                "add_float_alpha", "pow"}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", list(BINARY))
def test_half_scalars_like_cpu(dtype, name):
    # Python scalars with half types: the CPU rounds the scalar to the tensor's dtype for
    # most ops (mul and div read it unrounded); results must agree exactly.
    x = torch.tensor([2048.0, 2.0, -3.0, 1.0, 0.5, -7.75], dtype=dtype)
    fn = BINARY[name]
    exact = name not in HALF_ULP_OPS
    for s in (1.0004, 0.1, 2048.5, -0.0079, 3):
        check(lambda t: fn(t, s), x, exact=exact)
        # A 0-dim CPU tensor as first operand. (Not for logical_*: their output is allocated
        # on the first operand's device, the CPU, by PyTorch itself, on every backend.)
        if name not in ("lshift", "rshift", "bitwise_and", "bitwise_or", "bitwise_xor",
                        "logical_and", "logical_or", "logical_xor"):
            check(lambda t: fn(torch.tensor(s), t), x, exact=exact)


def test_more_elements_than_one_grid_row():
    # Beyond 65535 workgroups of 256 the dispatch grid wraps into a second dimension.
    n = 65535 * 256 + 1001
    x = (torch.arange(n) % 251).to(torch.uint8)
    d = dev(x)
    assert torch.equal((d + 3).cpu(), x + 3)
    assert torch.equal(torch.where(d > 100, d, 0).cpu(), torch.where(x > 100, x, 0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.int64, torch.float16,
                                   torch.uint8, torch.bool], ids=str)
def test_dense_sizes_and_offsets(dtype):
    # Every alignment of a dense operand (vectorized, packed and scalar kernel layouts).
    base_a = make((40,), dtype, seed=1)
    base_b = make((40,), dtype, seed=2)
    for n in (1, 2, 3, 4, 5, 7, 8, 9, 16, 17):
        for off_a, off_b in ((0, 0), (1, 0), (0, 3), (2, 2), (4, 4), (3, 5)):
            a, b = base_a[off_a:off_a + n], base_b[off_b:off_b + n]
            check(torch.logical_xor, a, b, exact=True)
            check(lambda x, y: torch.where(x > y, x, y), a, b, exact=True)
            if dtype != torch.bool:
                check(torch.mul, a, b)
                check(lambda x: x + 1, a)
            # In place into an offset slice of a bigger tensor.
            out_off = (off_a + 1) % 5

            def into_slice(base, y):
                torch.maximum(base[out_off:out_off + n], y, out=base[out_off:out_off + n])
                return base

            assert check(into_slice, base_a, b, exact=True)
