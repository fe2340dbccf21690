"""The native indexing family against the CPU: gather/scatter (every reduction,
include_self), index_select/add/copy/fill/reduce, take/put, advanced indexing and
index_put (accumulate), masked_fill/select/scatter, nonzero(_static), embedding backward;
negative dims, non-contiguous operands, empty and 0-dim tensors, out= and in-place,
gradients, and bad indices: raised at once with PyTorch's message when the index is on
the CPU, and by the device-side check at the next synchronization otherwise (or at once
with TORCH_WEBGPU_SYNC_CHECKS=1), after which the process keeps working. Tests run with
the CPU fallback disabled, so passing also proves the ops ran natively."""
import warnings

import pytest
import torch
import torch.nn.functional as F

import torch_webgpu
from conftest import DEVICE, assert_same, check, dev, make, run_python

pytestmark = pytest.mark.usefixtures("no_fallback")

VALUE_DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32,
                torch.int16, torch.int8, torch.uint8, torch.bool]
# Bit-moving ops also take the stored-only dtypes natively.
MOVE_DTYPES = VALUE_DTYPES + [torch.float64, torch.complex64, torch.complex128]
REDUCE_DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int8, torch.uint8]


def rand_index(shape, bound, seed=0, dtype=torch.int64):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, bound, shape, generator=g).to(dtype)


def noncontig(t):
    """The same values through a non-contiguous view with a storage offset."""
    if t.dim() == 0:
        return t
    rev = tuple(reversed(range(t.dim())))
    big = torch.zeros((t.shape[-1] + 1,) + tuple(t.shape[:-1])[::-1], dtype=t.dtype)
    v = big[1:].permute(*rev)
    v.copy_(t)
    assert not v.is_contiguous() or t.numel() <= 1
    return v


# ---- gather / index_select / take -----------------------------------------------------

@pytest.mark.parametrize("dtype", MOVE_DTYPES)
def test_index_select_dtypes(dtype):
    x = make((4, 5), dtype)
    check(lambda x, i: x.index_select(1, i), x, torch.tensor([4, 0, 2, 2]), exact=True)


@pytest.mark.parametrize("dim", [0, 1, -1, -2])
@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32])
def test_index_select_dims(dim, index_dtype):
    x = make((3, 4, 5), torch.float32)
    i = rand_index((6,), x.shape[dim], dtype=index_dtype)
    check(lambda x, i: torch.index_select(x, dim, i), x, i, exact=True)
    check(lambda x, i: torch.index_select(x, dim, i), noncontig(x), noncontig(i.view(2, 3)).reshape(-1)[:5], exact=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.int64, torch.float16])
@pytest.mark.parametrize("row", [4, 8, 6, 2])
def test_index_select_whole_rows(dtype, row):
    # Rows gathered whole move 16 bytes per invocation when their length allows it.
    x = make((9, 3, row), dtype)
    i = rand_index((7,), 9)
    check(lambda x, i: x.index_select(0, i), x, i, exact=True)
    check(lambda x, i: x.index_select(1, i), x, rand_index((5,), 3), exact=True)
    check(lambda x, i: x[i], x[:, 1], i, exact=True)  # rows with an offset and a row stride
    check(lambda w, i: torch.nn.functional.embedding(i, w), x[:, 0], i.view(7, 1), exact=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.int64, torch.float16])
@pytest.mark.parametrize("start", [0, 1, 2, 4])
def test_index_select_rows_at_any_alignment(dtype, start):
    # Rows whose every offset is a multiple of 16 bytes move as one vec4 per invocation;
    # a storage offset (or row stride) off that grid takes the element-wise run.
    base = make((11 * 20 + 4,), dtype)
    x = base[start:start + 11 * 20].view(11, 20)
    i = rand_index((9,), 11, seed=start)
    check(lambda x, i: x.index_select(0, i), x, i, exact=True)
    check(lambda x, i: x.index_select(0, i), x, noncontig(i.view(3, 3)).reshape(-1), exact=True)
    check(lambda w, i: F.embedding(i, w), x, i.view(3, 3), exact=True)
    # Rows 20 apart, of 1, 2 and 4 parts (an invocation per vec4 word of each part).
    for cols in (4, 8, 16):
        check(lambda x, i: x.index_select(0, i), x[:, :cols], i, exact=True)
        check(lambda x, i: x.index_select(1, i), x[:, :cols].t(), i, exact=True)
    check(lambda x, i: x.index_select(0, i), x, i[:0], exact=True)
    out = dev(torch.zeros(9, 40, dtype=dtype))[:, ::2]  # a non-contiguous destination
    torch.index_select(dev(x), 0, dev(i), out=out)
    assert_same(out, x.index_select(0, i), exact=True)
    with pytest.raises(IndexError, match="index out of range in self"):  # as the CPU, for a CPU index
        dev(x).index_select(0, torch.tensor([0, 11]))


def test_index_select_vec4_rows_check_device_indices():
    x = dev(torch.arange(64.0).view(8, 8))
    for bad in (8, -9):
        y = x.index_select(0, dev(torch.tensor([1, bad])))
        with pytest.raises(RuntimeError, match="index out of bounds in aten::index_select"):
            torch_webgpu.synchronize()
        torch_webgpu.synchronize()
        assert y.shape == (2, 8)
    assert_same(x.index_select(0, dev(torch.tensor([7, 0]))), torch.arange(64.0).view(8, 8)[[7, 0]], exact=True)


def test_index_select_edge_cases():
    x = make((3, 4), torch.float32)
    check(lambda x, i: x.index_select(0, i), x, torch.tensor([], dtype=torch.long), exact=True)
    check(lambda x, i: x.index_select(0, i), make((), torch.float32), torch.tensor([0]), exact=True)
    check(lambda x, i: x.index_select(0, i), make((), torch.float32), torch.tensor(0), exact=True)
    check(lambda x, i: x.index_select(1, i), x, torch.tensor(2), exact=True)
    out = dev(torch.empty(7, 4))
    torch.index_select(dev(x), 0, dev(torch.tensor([2, 0])), out=out)
    assert_same(out, x[[2, 0]], exact=True)
    # Bad arguments raise like the CPU.
    check(lambda x, i: x.index_select(0, i), x, torch.tensor([[0]]))
    check(lambda x, i: x.index_select(0, i), x, torch.tensor([0.0]))
    check(lambda x, i: x.index_select(2, i), x, torch.tensor([0]))


@pytest.mark.parametrize("dtype", MOVE_DTYPES)
def test_gather_dtypes(dtype):
    x = make((4, 5), dtype)
    check(lambda x, i: x.gather(0, i), x, rand_index((3, 5), 4), exact=True)


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_gather_dims_and_layouts(dim):
    x = make((3, 4, 5), torch.float32)
    shape = [2, 3, 4]
    i = rand_index(shape, x.shape[dim], seed=dim + 5)
    check(lambda x, i: torch.gather(x, dim, i), x, i, exact=True)
    check(lambda x, i: torch.gather(x, dim, i), noncontig(x), noncontig(i), exact=True)
    out = dev(torch.empty(0))
    torch.gather(dev(x), dim, dev(i), out=out)
    assert_same(out, torch.gather(x, dim, i), exact=True)
    check(lambda x, i: torch.take_along_dim(x, i, dim), x, i, exact=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.float16, torch.int64])
@pytest.mark.parametrize("cols", [4, 8, 12, 16, 7])
def test_gather_innermost_dim_by_lanes(dtype, cols):
    # An index per element along the innermost dim: 4 elements per invocation when the
    # row length allows it (vec4 stores for 4-byte values on a 16-byte grid), rows of 2 or
    # 4k such groups split in 2 or 4 parts.
    x = make((6, 9), dtype)
    i = rand_index((6, cols), 9, seed=cols)
    check(lambda x, i: x.gather(1, i), x, i, exact=True)
    check(lambda x, i: x.gather(-1, i), noncontig(x), i, exact=True)
    check(lambda x, i: x.gather(1, i), x, noncontig(i), exact=True)
    check(lambda x, i: x.gather(1, i[:, :0]), x, i, exact=True)
    check(lambda x, i: x.take(i), x, i, exact=True)
    out = dev(torch.zeros(6, 2 * cols, dtype=dtype))[:, 1::2]  # non-contiguous destination
    torch.gather(dev(x), 1, dev(i), out=out)
    assert_same(out, x.gather(1, i), exact=True)
    big = dev(torch.zeros(6 * cols + 1, dtype=dtype))
    torch.gather(dev(x), 1, dev(i), out=big[1:].view(6, cols))  # values off the 16-byte grid
    assert_same(big[1:].view(6, cols), x.gather(1, i), exact=True)
    with pytest.raises(RuntimeError, match="out of bounds"):  # a CPU index: checked at once
        dev(x).gather(1, torch.full((6, cols), 9))
    for lane in range(cols):  # a bad device index in any lane of any part
        bad = i.clone()
        bad[2, lane] = 9 if lane % 2 else -1
        dev(x).gather(1, dev(bad))
        with pytest.raises(RuntimeError, match="index out of bounds in aten::gather"):
            torch_webgpu.synchronize()
        torch_webgpu.synchronize()


def test_gather_edge_cases():
    check(lambda x, i: x.gather(0, i), make((), torch.float32), torch.tensor(0), exact=True)
    check(lambda x, i: x.gather(1, i), make((3, 4), torch.float32), torch.zeros(3, 0, dtype=torch.long), exact=True)
    check(lambda x, i: x.gather(0, i), make((3, 4), torch.float32), torch.zeros(5, 1, dtype=torch.long))  # size error
    check(lambda x, i: x.gather(0, i), make((3, 4), torch.float32), torch.zeros(2, 2, dtype=torch.int32))  # dtype error


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.uint8, torch.float64])
def test_take(dtype):
    x = make((3, 4), dtype)
    i = torch.tensor([[0, -1], [11, -12], [5, 5]])
    check(lambda x, i: torch.take(x, i), x, i, exact=True)
    check(lambda x, i: torch.take(x, i), noncontig(x), i, exact=True)
    check(lambda x, i: torch.take(x, i), x, torch.tensor([], dtype=torch.long), exact=True)


# ---- scatter family ----------------------------------------------------------------

@pytest.mark.parametrize("dtype", MOVE_DTYPES)
def test_scatter_src_and_value(dtype):
    x = make((4, 5), dtype)
    src = make((2, 5), dtype, seed=3)
    i = torch.stack([torch.randperm(4, generator=torch.Generator().manual_seed(k))[:2] for k in range(5)], 1)
    check(lambda x, i, s: x.scatter(0, i, s), x, i, src, exact=True)
    check(lambda x, i: x.scatter(0, i, 1), x, i, exact=True)
    check(lambda x, i, s: x.clone().scatter_(0, i, s), x, i, src, exact=True)


@pytest.mark.parametrize("dtype", REDUCE_DTYPES + [torch.int64])
def test_scatter_add(dtype):
    x = make((4, 5), dtype)
    i = rand_index((6, 5), 4, seed=1)  # duplicates
    src = make((6, 5), dtype, seed=2, low=0 if dtype == torch.uint8 else None)
    check(lambda x, i, s: x.scatter_add(0, i, s), x, i, src)
    check(lambda x, i, s: x.scatter_add(-1, i.t()[:, :3], s.t()[:, :3]), x, i, src)
    check(lambda x, i, s: x.scatter(0, i, s, reduce="add"), x, i, src)


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", REDUCE_DTYPES)
def test_scatter_reduce(reduce, include_self, dtype):
    x = make((5, 3), dtype, low=1 if dtype.is_floating_point else None, high=2 if dtype.is_floating_point else None)
    if reduce == "prod" and not dtype.is_floating_point:
        x = make((5, 3), dtype, low=0, high=3)
    i = rand_index((4, 3), 5, seed=7)
    src = make((4, 3), dtype, seed=8, low=1 if reduce == "prod" else None, high=2 if reduce == "prod" else None)
    check(lambda x, i, s: x.scatter_reduce(0, i, s, reduce, include_self=include_self), x, i, src)


def test_scatter_reduce_layouts_and_out():
    x = make((3, 6), torch.float32)
    i = rand_index((3, 4), 6, seed=2)
    src = make((3, 5), torch.float32, seed=4)
    check(lambda x, i, s: x.scatter_reduce(1, i, s, "amax"), noncontig(x), noncontig(i), noncontig(src))
    check(lambda x, i, s: x.scatter(1, i, s, reduce="multiply"), x, i, src)
    out = dev(torch.empty(3, 6))
    torch.scatter_reduce(dev(x), 1, dev(i), dev(src), "sum", out=out)
    assert_same(out, torch.scatter_reduce(x, 1, i, src, "sum"))
    check(lambda x, i, s: x.scatter_add(0, i, s), make((), torch.float32), torch.tensor(0), make((), torch.float32))
    check(lambda x, i, s: x.scatter_add(0, i, s), x, torch.zeros(0, 6, dtype=torch.long), src)
    check(lambda x, i, s: x.scatter_add(0, i, s), x, torch.zeros(5, 6, dtype=torch.long), src)  # size error


def test_scatter_float_nan_propagates():
    x = torch.tensor([1.0, 2.0, 3.0])
    src = torch.tensor([float("nan"), 5.0, 0.0])
    i = torch.tensor([0, 1, 1])
    check(lambda x, i, s: x.scatter_reduce(0, i, s, "amax"), x, i, src)
    check(lambda x, i, s: x.scatter_reduce(0, i, s, "amin", include_self=False), x, i, src)


# ---- index_add / copy / fill / reduce, put ------------------------------------------

@pytest.mark.parametrize("dtype", REDUCE_DTYPES + [torch.int64, torch.bool])
def test_index_add(dtype):
    x = make((5, 4), dtype)
    src = make((3, 4), dtype, seed=1)
    i = torch.tensor([0, 3, 0])
    check(lambda x, i, s: x.index_add(0, i, s), x, i, src)
    if dtype != torch.bool:
        check(lambda x, i, s: x.index_add(-1, i, s, alpha=2), make((5, 4), dtype), torch.tensor([1, 1, 3]),
              noncontig(make((5, 3), dtype, seed=2)))


def test_index_add_layouts():
    x = make((3, 4, 5), torch.float32)
    src = make((3, 2, 5), torch.float32, seed=1)
    check(lambda x, i, s: x.index_add(1, i, s), noncontig(x), torch.tensor([3, 3], dtype=torch.int32), noncontig(src))
    check(lambda x, i, s: x.clone().index_add_(1, i, s, alpha=-1.5), x, torch.tensor([0, 2]), src)
    check(lambda x, i, s: x.index_add(0, i, s), make((), torch.float32), torch.tensor([0]), make((), torch.float32))


@pytest.mark.parametrize("dtype", MOVE_DTYPES)
def test_index_copy_and_fill(dtype):
    x = make((4, 3), dtype)
    src = make((2, 3), dtype, seed=1)
    check(lambda x, i, s: x.index_copy(0, i, s), x, torch.tensor([3, 1]), src, exact=True)
    check(lambda x, i, s: x.clone().index_copy_(-1, i, s), x, torch.tensor([2, 0]), noncontig(make((4, 2), dtype, seed=2)),
          exact=True)
    value = 1 if not dtype.is_complex else 1 - 2j
    check(lambda x, i: x.index_fill(1, i, value), x, torch.tensor([0, -1]), exact=True)
    check(lambda x, i: x.clone().index_fill_(0, i, torch.tensor(0)), x, torch.tensor([2]), exact=True)


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int32])
def test_index_reduce(reduce, include_self, dtype):
    x = make((4, 3), dtype, low=1, high=3)
    src = make((5, 3), dtype, seed=1, low=1, high=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(lambda x, i, s: x.index_reduce(0, i, s, reduce, include_self=include_self),
              x, torch.tensor([0, 2, 0, 3, 0]), src)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.int16, torch.float64])
def test_put(dtype):
    x = make((3, 4), dtype)
    i = torch.tensor([0, -1, 5])
    src = make((3,), dtype, seed=1)
    check(lambda x, i, s: x.put(i, s), x, i, src, exact=True)
    check(lambda x, i, s: x.clone().t().put_(i, s), x, i, src, exact=True)
    if dtype != torch.float64:
        check(lambda x, i, s: x.put(i, s, accumulate=True), x, torch.tensor([1, 1, -12]), src)


# ---- advanced indexing ----------------------------------------------------------------

@pytest.mark.parametrize("dtype", MOVE_DTYPES)
def test_getitem(dtype):
    x = make((4, 5, 3), dtype)
    i = torch.tensor([[0, 3], [-1, 1]])
    j = torch.tensor([2, 0])
    check(lambda x, i: x[i], x, i, exact=True)
    check(lambda x, i, j: x[i, j], x, i, j, exact=True)
    check(lambda x, i, j: x[i, :, j], x, i, j, exact=True)  # non-adjacent: index dims first
    check(lambda x, j: x[1:, j, ::2], x, j, exact=True)
    check(lambda x, m: x[m], x, (x.real > 0) if x.is_complex() else x.bool(), exact=True)
    check(lambda x, m: x[m], x, torch.tensor([True, False, True, True]), exact=True)


def test_getitem_edge_cases():
    x = make((4, 5), torch.float32)
    check(lambda x, i: x[i], noncontig(x), noncontig(torch.tensor([[0, 3], [2, 2]])), exact=True)
    check(lambda x, i: x[i], x, torch.tensor([], dtype=torch.long), exact=True)
    check(lambda x, i: x[:, i], x, torch.tensor(2), exact=True)
    check(lambda x, i: x[i], x, torch.tensor([1, 2], dtype=torch.int32), exact=True)
    check(lambda x, i, j: x[i, j], x, torch.tensor([0, 1]), torch.tensor([0, 1, 2]))  # broadcast error
    check(lambda x, i: x[i], x, torch.tensor([True, False]))  # mask shape error
    # CPU index tensors with a device tensor: checked at once with PyTorch's message.
    with pytest.raises(IndexError, match="out of bounds for dimension 0 with size 4"):
        dev(x)[torch.tensor([4])]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.int8, torch.bool])
@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put(dtype, accumulate):
    x = make((4, 5), dtype)
    v = make((2, 5), dtype, seed=1)
    i = torch.tensor([3, 1]) if not accumulate else torch.tensor([3, 3])
    check(lambda x, i, v: x.index_put((i,), v, accumulate=accumulate), x, i, v)
    check(lambda x, i, v: x.index_put((None, i), v[0, :2], accumulate=accumulate), x, torch.tensor([4, 0]), v)
    check(lambda x, i, v: x.clone().index_put_((i, i), v[0, 0], accumulate=accumulate), x, torch.tensor([2, 0]), v)
    m = make((4, 5), torch.bool, seed=3)
    check(lambda x, m, v: x.index_put((m,), v[0, 0], accumulate=accumulate), x, m, v)


def test_setitem_and_accumulate_duplicates():
    x = make((6, 3), torch.float32)
    i = rand_index((50,), 6, seed=9)
    v = make((50, 3), torch.float32, seed=10)
    # Float sums over duplicates in any order: tolerance, not bit equality.
    check(lambda x, i, v: x.index_put((i,), v, accumulate=True), x, i, v, tolerances=dict(rtol=1e-5, atol=1e-5))
    d = dev(x)
    d[dev(torch.tensor([0, 2]))] = 7.0
    d[1:3, dev(torch.tensor([2]))] = dev(torch.tensor([[1.5], [2.5]]))
    e = x.clone()
    e[torch.tensor([0, 2])] = 7.0
    e[1:3, torch.tensor([2])] = torch.tensor([[1.5], [2.5]])
    assert_same(d, e, exact=True)
    check(lambda x, i, v: x.index_put((i,), v), x, i, make((3,), torch.float64))  # dtype mismatch


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_accumulate_in_index_order(dtype):
    # The CPU adds a destination's values one by one in index order, rounding each sum to
    # the half type: ours must give the same bits, run after run (atomics would not).
    x = make((5, 5, 5), dtype)
    i0, i1, i2 = rand_index((10, 1, 1), 5, 1), rand_index((1, 9, 1), 5, 2), rand_index((1, 1, 11), 5, 3)
    v = make((10, 9, 11), dtype, seed=4) * 8
    for _ in range(3):
        check(lambda x, a, b, c, v: x.index_put((a, b, c), v, accumulate=True), x, i0, i1, i2, v, exact=True)
    xt = make((7, 6), dtype).t()  # non-contiguous target, negative indices
    i = rand_index((200,), 6, 5) - 3
    w = make((200, 7), dtype, seed=6) * 8
    check(lambda x, i, w: x.clone().index_put_((i,), w, accumulate=True), xt, i, w, exact=True)
    check(lambda x, i, w: x.index_put((None, i), w.t(), accumulate=True), xt.t(), i, w, exact=True)
    j = rand_index((300,), 30, 7) - 15
    check(lambda x, j, w: x.clone().put_(j, w, accumulate=True), xt, j, make((300,), dtype, seed=8), exact=True)
    with pytest.raises(IndexError):
        dev(x).index_put_((torch.tensor([5]),), dev(v[0, 0, 0]), accumulate=True)
    assert_same(dev(x).index_put_((torch.tensor([1]),), dev(v[0, 0, 0]), accumulate=True),
                x.clone().index_put_((torch.tensor([1]),), v[0, 0, 0], accumulate=True), exact=True)


# ---- masks and compaction -------------------------------------------------------------

@pytest.mark.parametrize("dtype", MOVE_DTYPES)
def test_masked_fill(dtype):
    x = make((3, 4), dtype)
    m = make((3, 4), torch.bool, seed=1)
    value = 1 if not dtype.is_complex else 0.5 + 1j
    check(lambda x, m: x.masked_fill(m, value), x, m, exact=True)
    check(lambda x, m: x.masked_fill(m, torch.tensor(value)), x, m[0], exact=True)  # broadcast mask
    check(lambda x, m: x.clone().t().masked_fill_(m.t(), 0), x, m, exact=True)


@pytest.mark.parametrize("dtype", MOVE_DTYPES)
def test_masked_select_and_scatter(dtype):
    x = make((3, 4), dtype)
    m = make((3, 4), torch.bool, seed=1)
    check(lambda x, m: x.masked_select(m), x, m, exact=True)
    check(lambda x, m: x.masked_select(m), noncontig(x), m[1], exact=True)
    check(lambda x, m: torch.masked_select(x, m), make((), dtype), torch.tensor(True), exact=True)
    src = make((12,), dtype, seed=2)
    check(lambda x, m, s: x.masked_scatter(m, s), x, m, src, exact=True)
    check(lambda x, m, s: x.clone().t().masked_scatter_(m.t(), s.view(3, 4)), x, m, src, exact=True)
    check(lambda x, m, s: x.masked_scatter(m, s), x, torch.ones(3, 4, dtype=torch.bool), src[:5])  # too few


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.uint8, torch.bool, torch.float64])
def test_nonzero(dtype):
    x = make((5, 70), dtype, low=-1, high=1) * (make((5, 70), torch.bool, seed=3) if dtype != torch.bool else True)
    check(lambda x: torch.nonzero(x), x, exact=True)
    check(lambda x: torch.nonzero(x), noncontig(x), exact=True)
    check(lambda x: torch.nonzero(x, as_tuple=True), x, exact=True)
    check(lambda x: torch.nonzero(x), make((3, 0), dtype), exact=True)
    check(lambda x: torch.nonzero(x), torch.ones((), dtype=dtype), exact=True)
    check(lambda x: torch.nonzero_static(x, size=7, fill_value=-5), x[:2, :4], exact=True)
    check(lambda x: torch.nonzero_static(x, size=400), x, exact=True)
    check(lambda x: torch.nonzero_static(x, size=3), x, exact=True)  # truncated
    check(lambda x: torch.nonzero_static(x, size=0), x, exact=True)
    check(lambda x: torch.nonzero_static(x, size=2, fill_value=9), torch.ones((), dtype=dtype), exact=True)
    out = dev(torch.empty(0, dtype=torch.long))
    torch.nonzero(dev(x), out=out)
    assert_same(out, torch.nonzero(x), exact=True)
    # Layouts: nonzero's is the CPU's, (1, count); nonzero_static's is the meta function's
    # (and CUDA's), column-major too, which torch.compile checks (the CPU's is row-major).
    assert torch.nonzero(dev(x)).stride() == torch.nonzero(x).stride()
    for size in (0, 3, 400):
        assert torch.nonzero_static(dev(x), size=size).stride() == (1, size)
    assert torch.nonzero_static(dev(x[0, 0]), size=4).stride() == (1, 4)


def test_nonzero_many_blocks():
    x = make((3, 50001), torch.bool, seed=5)
    check(lambda x: x.nonzero(), x, exact=True)
    check(lambda x: x.float().masked_select(x), x, exact=True)


# ---- embedding and autograd -----------------------------------------------------------

def test_embedding_and_backward():
    w = make((7, 3), torch.float32)
    i = torch.tensor([[1, 2, 1], [6, 0, 2]])
    check(lambda w, i: F.embedding(i, w, padding_idx=2), w, i)
    g = make((2, 3, 3), torch.float32, seed=1)
    check(lambda g, i: torch.ops.aten.embedding_dense_backward(g, i, 7, 2, False), g, i)
    check(lambda g, i: torch.ops.aten.embedding_dense_backward(g, i, 7, -1, False), g, i)
    check(lambda g, i: torch.ops.aten.embedding_dense_backward(g, i, 7, 6, True), g, i)


@pytest.mark.parametrize("op", ["gather", "index_select", "masked_fill", "index_put", "getitem", "scatter_add"])
def test_gradients(op, monkeypatch):
    # Backward formulas also reach other families' ops (sum for broadcast values).
    monkeypatch.delenv("TORCH_WEBGPU_DISABLE_CPU_FALLBACK")
    x = make((4, 5), torch.float32)
    i = torch.tensor([[0, 3, 1, 1, 2]])
    m = make((4, 5), torch.bool, seed=2)
    fns = {
        "gather": lambda x, i, m: x.gather(0, i.expand(3, 5)),
        "index_select": lambda x, i, m: x.index_select(1, i[0]),
        "masked_fill": lambda x, i, m: x.masked_fill(m, 0.5),
        "index_put": lambda x, i, m: x.index_put((i[0],), torch.ones(5, device=x.device) * x[0, 0], accumulate=True),
        "getitem": lambda x, i, m: x[i[0], 1:] * 2 + x[m][:1],
        "scatter_add": lambda x, i, m: torch.zeros(4, 5, device=x.device).scatter_add(0, i, x[:1]),
    }
    results = []
    for device in ("cpu", DEVICE):
        xd = x.detach().clone().to(device).requires_grad_()
        y = fns[op](xd, i.to(device), m.to(device))
        y.backward(torch.linspace(-1, 1, y.numel(), device="cpu").view(y.shape).to(device))
        results.append((y.detach(), xd.grad))
    assert_same(results[1][0], results[0][0])
    assert_same(results[1][1], results[0][1])


# ---- bad indices --------------------------------------------------------------------

def assert_still_works():
    x = dev(torch.arange(12.0).view(3, 4))
    assert_same(x.index_select(0, dev(torch.tensor([2, 0]))), torch.arange(12.0).view(3, 4)[[2, 0]], exact=True)


@pytest.mark.parametrize("case", ["index_select", "gather", "scatter", "scatter_add", "index_fill", "take", "put",
                                  "getitem", "index_put"])
def test_cpu_side_index_errors_match_cpu(case):
    """CPU index tensors are checked before the kernel: the CPU's exception and message."""
    x = torch.zeros(3, 4)
    bad = torch.tensor([5])
    fns = {
        "index_select": lambda x, i: x.index_select(0, i),
        "gather": lambda x, i: x.gather(0, i.view(1, 1)),
        "scatter": lambda x, i: x.scatter(0, i.view(1, 1), 1.0),
        "scatter_add": lambda x, i: x.scatter_add(0, i.view(1, 1), torch.ones(1, 1, device=x.device)),
        "index_fill": lambda x, i: x.index_fill(0, i, 1.0),
        "take": lambda x, i: x.take(i * 3),
        "put": lambda x, i: x.put(i * 3, torch.ones(1, device=x.device)),
        "getitem": lambda x, i: x[i],
        "index_put": lambda x, i: x.index_put((i,), torch.tensor(1.0, device=x.device)),
    }
    with pytest.raises(Exception) as expected:
        fns[case](x, bad)
    with pytest.raises(type(expected.value)) as actual:
        fns[case](dev(x), bad)
    assert str(actual.value).split("\n")[0] == str(expected.value).split("\n")[0]
    assert_still_works()


@pytest.mark.parametrize("case", ["index_select", "gather", "scatter", "scatter_reduce", "index_add", "take",
                                  "put", "getitem", "index_put", "negative"])
def test_device_side_index_errors(case):
    """Device index tensors: nothing outside a buffer is touched, and the error names the
    op at the next synchronization; afterwards the process keeps working."""
    x = dev(torch.zeros(3, 4))
    bad = dev(torch.tensor([7]))
    fns = {
        "index_select": lambda: x.index_select(0, bad),
        "gather": lambda: x.gather(1, bad.view(1, 1)),
        "scatter": lambda: x.clone().scatter_(0, bad.view(1, 1), 1.0),
        "scatter_reduce": lambda: x.scatter_reduce(0, bad.view(1, 1), x[:1, :1], "amax"),
        "index_add": lambda: x.index_add(0, bad, x[:1]),
        "take": lambda: x.take(bad * 2),
        "put": lambda: x.clone().put_(bad * 2, x[0, :1]),
        "getitem": lambda: x[bad],
        "index_put": lambda: x.clone().index_put_((bad,), x[0], accumulate=True),
        "negative": lambda: x.gather(0, -bad.view(1, 1)),
    }
    name = {"scatter": "scatter", "negative": "gather", "getitem": "index"}.get(case, case)
    result = fns[case]()
    with pytest.raises(RuntimeError, match=f"index out of bounds in aten::{name}"):
        torch_webgpu.synchronize()
    torch_webgpu.synchronize()  # reset: raises once
    assert result.device.type == DEVICE
    assert_still_works()


def test_device_side_error_raises_at_item():
    x = dev(torch.ones(3))
    y = x.index_select(0, dev(torch.tensor([3])))
    with pytest.raises(RuntimeError, match="index out of bounds in aten::index_select"):
        y[0].item()
    assert x[1].item() == 1.0


def test_sync_checks_env_raises_in_the_op(monkeypatch):
    monkeypatch.setenv("TORCH_WEBGPU_SYNC_CHECKS", "1")
    x = dev(torch.zeros(3, 4))
    with pytest.raises(RuntimeError, match="index out of bounds in aten::gather"):
        x.gather(0, dev(torch.tensor([[3]])))
    assert_still_works()


def test_sync_checks_env_subprocess():
    code = ("import torch, torch_webgpu\n"
            "x = torch.zeros(3, device='webgpu')\n"
            "try:\n"
            "    x.index_select(0, torch.tensor([9], device='webgpu'))\n"
            "    print('no raise')\n"
            "except RuntimeError as e:\n"
            "    print('raised' if 'aten::index_select' in str(e) else e)\n")
    r = run_python(code, env={"TORCH_WEBGPU_SYNC_CHECKS": "1"})
    assert r.stdout.strip().endswith("raised"), r.stdout + r.stderr


def test_embedding_max_norm(monkeypatch):
    # The row norms come from the reduction family (CPU fallback until it lands).
    monkeypatch.delenv("TORCH_WEBGPU_DISABLE_CPU_FALLBACK")
    w = make((7, 3), torch.float32)
    i = torch.tensor([[1, 2, 1], [6, 0, 2]])
    wd = dev(w)
    out = F.embedding(dev(i), wd, max_norm=1.5)
    expected = F.embedding(i, w, max_norm=1.5)
    assert_same(out, expected)
    assert_same(wd, w)  # renormalized in place, each named row once
    check(lambda w, i: torch.embedding_renorm_(w, i, 1.0, 2.0), w[0], i)  # 1-D weight: error


def test_source_on_another_device_raises():
    x = dev(torch.zeros(3))
    with pytest.raises(RuntimeError, match="same device"):
        x.scatter(0, dev(torch.tensor([0])), torch.ones(1))
    with pytest.raises(RuntimeError, match="same device"):
        x.put_(dev(torch.tensor([0])), torch.ones(1))


def test_many_dims_fall_back_cleanly(monkeypatch):
    monkeypatch.delenv("TORCH_WEBGPU_DISABLE_CPU_FALLBACK")
    x = make((2,) * 9, torch.float32)
    i = rand_index((2,) * 9, 2, seed=3)
    check(lambda x, i: x.gather(3, i), x, i, exact=True)
    check(lambda x: x.nonzero(), x.gt(0), exact=True)


@pytest.mark.parametrize("reduce", ["sum", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_int64_wide_values(reduce, include_self):
    """64-bit values whose high words tie (amax/amin decide on the low words)."""
    g = torch.Generator().manual_seed(4)
    x = torch.randint(-2**62, 2**62, (6, 5), generator=g)
    x[1] = -3
    src = torch.randint(-2**62, 2**62, (40, 5), generator=g)
    src[:10] = src[:10] % 1000 - 500
    if reduce in ("sum", "mean"):
        x, src = x // 64, src // 64  # no overflow
    i = torch.randint(0, 6, (40, 5), generator=g)
    check(lambda x, i, s: x.scatter_reduce(0, i, s, reduce, include_self=include_self), x, i, src, exact=True)
    check(lambda x, i, s: x.t().scatter_reduce(1, i.t(), s.t(), reduce, include_self=include_self), x, i, src,
          exact=True)


def test_operands_sharing_a_buffer():
    """Masks, indices and sources that are the tensor being written (or views of it)."""
    b = make((3, 4), torch.bool, seed=6)
    check(lambda b: b.clone().masked_fill_(b.clone(), False), b, exact=True)
    check(lambda b: (lambda c: c.masked_fill_(c, False))(b.clone()), b, exact=True)
    check(lambda b: (lambda c: c.masked_scatter_(c, ~c))(b.clone()), b, exact=True)
    x = torch.tensor([[2, 0, 1], [1, 1, 0], [0, 2, 2]])
    check(lambda x: (lambda c: c.scatter_(0, c, c))(x.clone()), x, exact=True)
    check(lambda x: (lambda c: c.index_put_((c[0],), c[1], accumulate=True))(x.clone()), x, exact=True)
    expected = torch.nonzero(b)
    out = dev(torch.zeros(2 + expected.numel(), dtype=torch.long))
    view = out[2:].view(expected.shape)  # an offset out=
    torch.nonzero(dev(b), out=view)
    assert_same(view, expected, exact=True)
