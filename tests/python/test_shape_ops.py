"""The native shape and copy family against the CPU: cat (and the composites on it: stack,
hstack, ...), flip, roll, tril/triu, narrow_copy, repeat_interleave, and the copies built
from views (permute + contiguous at any rank, unfold, as_strided, diag/diagonal/repeat).
Every dtype the CPU takes, float64 and complex included (these ops only move bits), dims
incl. negative, empty and 0-dim inputs, non-contiguous and offset inputs, out= and
in-place, gradients, and the CPU's errors. Every test runs with the CPU fallback disabled,
so a passing test also proves the op ran natively."""
import warnings

import pytest
import torch
import torch.nn.functional as F

from conftest import DEVICE, NATIVE_DTYPES, assert_same, check, dev, make

pytestmark = pytest.mark.usefixtures("no_fallback")

BIT_DTYPES = NATIVE_DTYPES + [torch.float64, torch.complex64, torch.complex128]


def strided(t):
    """A non-contiguous view of `t` with a storage offset (same values as t)."""
    big = torch.zeros((2,) + tuple(t.shape) + (2,), dtype=t.dtype)
    big[1, ..., 1] = t
    return big[1, ..., 1]


def dstrided(t):
    """The same non-contiguous, offset view built on the device."""
    big = torch.zeros((2,) + tuple(t.shape) + (2,), dtype=t.dtype, device=DEVICE)
    big[1, ..., 1] = dev(t)
    return big[1, ..., 1]


def same_error(fn, *args):
    """fn raises on the CPU and on webgpu with the same type and message."""
    with pytest.raises(Exception) as e_cpu:
        fn(*args)
    with pytest.raises(Exception) as e_dev:
        fn(*[dev(a) for a in args])
    assert type(e_dev.value) is type(e_cpu.value)
    assert str(e_dev.value).split("\n")[0] == str(e_cpu.value).split("\n")[0]


# ---- cat --------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", BIT_DTYPES)
def test_cat_dtypes(dtype):
    a, b = make((2, 3, 4), dtype, seed=1), make((2, 5, 4), dtype, seed=2)
    check(lambda x, y: torch.cat([x, y], 1), a, b, exact=True)
    check(lambda x, y: torch.cat([x, y, x], -2), a, b, exact=True)


@pytest.mark.parametrize("dim", [0, 1, 2, -1, -3])
def test_cat_dims_and_layouts(dim):
    a = make((3, 4, 5), torch.float32, seed=3)
    # Non-contiguous and offset inputs, mixed with contiguous ones.
    actual = torch.cat([dstrided(a), dev(a).transpose(0, 1).contiguous().transpose(0, 1), dev(a)], dim)
    assert_same(actual, torch.cat([a, a, a], dim), exact=True)


def test_cat_empty_inputs():
    a = make((2, 3), torch.float32)
    check(lambda x: torch.cat([x, torch.empty(0, device=x.device), x]), a, exact=True)
    check(lambda x: torch.cat([torch.empty(0, device=x.device), x], 1), a, exact=True)
    check(lambda x: torch.cat([x[:, :0], x[:, :0]], 1), a, exact=True)
    check(lambda x: torch.cat([x[:0], x]), a, exact=True)
    check(lambda x: torch.cat([torch.empty(0, device=x.device), torch.empty(0, device=x.device)]), a,
          exact=True)


@pytest.mark.parametrize("pair", [(torch.int64, torch.float32), (torch.float16, torch.float32),
                                  (torch.bool, torch.int32), (torch.uint8, torch.int8),
                                  (torch.float32, torch.float64), (torch.bfloat16, torch.float16),
                                  (torch.float32, torch.complex64)])
def test_cat_type_promotion(pair):
    a, b = make((2, 3), pair[0], seed=4), make((4, 3), pair[1], seed=5)
    check(lambda x, y: torch.cat([x, y]), a, b, exact=True)


def test_cat_out():
    a, b = make((2, 3), torch.float32, seed=6), make((1, 3), torch.float32, seed=7)
    # Right size, wrong size (resized with the CPU's warning), castable other dtype.
    for out_shape, out_dtype in [((3, 3), torch.float32), ((7,), torch.float32),
                                 ((0,), torch.float64), ((3, 3), torch.complex64)]:
        out_c = torch.empty(out_shape, dtype=out_dtype)
        out_d = torch.empty(out_shape, dtype=out_dtype, device=DEVICE)
        with warnings.catch_warnings(record=True) as w_c:
            warnings.simplefilter("always")
            torch.cat([a, b], out=out_c)
        with warnings.catch_warnings(record=True) as w_d:
            warnings.simplefilter("always")
            r = torch.cat([dev(a), dev(b)], out=out_d)
        assert r is out_d
        assert len(w_c) == len(w_d)
        assert_same(out_d, out_c, exact=True)
    # Non-contiguous out keeps its strides.
    out_d = torch.empty(3, 3, device=DEVICE).t()
    torch.cat([dev(a), dev(b)], out=out_d)
    assert out_d.stride() == (1, 3)
    assert_same(out_d, torch.cat([a, b]), exact=True)


def test_cat_errors():
    a = make((2, 3), torch.float32)
    check(lambda x: torch.cat([]), a)
    check(lambda x: torch.cat([x, x.view(3, 2)]), a)
    check(lambda x: torch.cat([x, x[0]]), a)
    check(lambda x: torch.cat([x, x], 2), a)
    check(lambda x: torch.cat([x[0, 0], x[0, 0]]), a)
    check(lambda x: torch.cat([x, x], out=torch.empty(4, 3, dtype=torch.int64, device=x.device)), a)
    # The output may not overlap an input.
    with pytest.raises(RuntimeError, match="unsupported operation"):
        x = dev(torch.zeros(4, 3))
        torch.cat([x[:2], x[2:]], out=x)
    # Messages match the CPU's.
    for fn in [lambda x: torch.cat([x, x.view(3, 2)]), lambda x: torch.cat([]),
               lambda x: torch.cat([x, x[0]])]:
        with pytest.raises(Exception) as e_cpu:
            fn(a)
        with pytest.raises(Exception) as e_dev:
            fn(dev(a))
        assert str(e_cpu.value) == str(e_dev.value)


@pytest.fixture
def gpu_kernels(monkeypatch):
    """The GPU adapters' variants (read per call), also on a software adapter."""
    monkeypatch.setenv("TORCH_WEBGPU_ADAPTER_KIND", "gpu")


def _dispatches():
    import torch_webgpu
    return torch_webgpu._C.dispatch_stats()["dispatches"]


@pytest.mark.parametrize("count", [2, 3, 7, 8, 15])
@pytest.mark.parametrize("dim", [0, 1, 2])
def test_cat_many_inputs_in_one_kernel_per_seven(count, dim, gpu_kernels):
    # Contiguous inputs of one dtype whose rows are whole words: one dispatch per seven
    # inputs (eight storage bindings), sizes differing along the cat dim (GPU adapters;
    # software ones keep a vec4 copy per input).
    shapes = []
    for i in range(count):
        shape = [3, 4, 6]
        shape[dim] = 1 + (i * 5) % 4
        shapes.append(shape)
    ins = [make(tuple(sh), torch.float32, seed=20 + i) for i, sh in enumerate(shapes)]
    dins = [dev(t) for t in ins]
    before = _dispatches()
    out = torch.cat(dins, dim)
    assert _dispatches() - before == (count + 6) // 7
    assert_same(out, torch.cat(ins, dim), exact=True)


@pytest.mark.parametrize("env,expected", [({"TORCH_WEBGPU_ADAPTER_KIND": "gpu"}, 1),
                                          ({"TORCH_WEBGPU_ADAPTER_KIND": "gpu", "TORCH_WEBGPU_CAT_WORDS": "0"}, 2),
                                          ({"TORCH_WEBGPU_ADAPTER_KIND": "software"}, 2),
                                          ({"TORCH_WEBGPU_ADAPTER_KIND": "software", "TORCH_WEBGPU_CAT_WORDS": "1"}, 1)])
def test_cat_words_switch(env, expected, monkeypatch):
    # The kernel on GPU adapters, the copies on software ones; TORCH_WEBGPU_CAT_WORDS
    # overrides either way (for A/Bs). Same result every way.
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    a, b = make((1, 2, 5, 8), torch.float32, seed=50), make((1, 2, 1, 8), torch.float32, seed=51)
    da, db = dev(a), dev(b)
    before = _dispatches()
    out = torch.cat([da, db], 2)
    assert _dispatches() - before == expected
    assert_same(out, torch.cat([a, b], 2), exact=True)


@pytest.mark.parametrize("dtype", BIT_DTYPES)
def test_cat_words_every_dtype(dtype, gpu_kernels):
    # Rows of whole words for every element size (a 2-byte row of 2 elements, a bool row
    # of 4), a decode-style growing cache, and rows that are not whole words (copy path).
    per_word = max(1, 4 // torch.empty(0, dtype=dtype).element_size())
    a, b = make((2, 3, per_word), dtype, seed=30), make((2, 1, per_word), dtype, seed=31)
    check(lambda x, y: torch.cat([x, y], 1), a, b, exact=True)
    c, d = make((1, 2, 5, 8), dtype, seed=32), make((1, 2, 1, 8), dtype, seed=33)
    check(lambda x, y: torch.cat([x, y], 2), c, d, exact=True)
    e, f = make((3, 3), dtype, seed=34), make((3, 1), dtype, seed=35)
    check(lambda x, y: torch.cat([x, y], 1), e, f, exact=True)


def test_cat_words_takes_sliced_rows_in_one_kernel(gpu_kernels):
    # Inputs whose rows are contiguous blocks a stride apart (rotary embeddings'
    # cat((-x[..., h:], x[..., :h]), -1), slices of the middle dims, broadcast rows of
    # stride 0) move in one dispatch; rows that are not one block (a column slice of a
    # transposed tensor) take the copies. Same bits either way.
    x = make((1, 14, 1, 64), torch.float32, seed=60)
    dx = dev(x)
    before = _dispatches()
    got = torch.cat([dx[..., 32:], dx[..., :32]], -1)
    assert _dispatches() - before == 1
    assert_same(got, torch.cat([x[..., 32:], x[..., :32]], -1), exact=True)
    y = make((3, 5, 6, 8), torch.float16, seed=61)
    dy = dev(y)
    for dim, parts in ((1, [dy[:, 1:3], dy[:, :2]]), (2, [dy[:, :, 2:4], dy[:, :, 1:2], dy[:, :, 5:]]),
                       (3, [dy[..., 2:6], dy[..., :2]]), (3, [dy[1:, :, :, 4:], dy[1:, :, :, :2]])):
        before = _dispatches()
        got = torch.cat(parts, dim)
        assert _dispatches() - before == 1, [p.stride() for p in parts]
        assert_same(got, torch.cat([p.cpu() for p in parts], dim), exact=True)
    row = dev(make((1, 8), torch.float32, seed=62)).expand(4, 8)
    other = dev(make((4, 2), torch.float32, seed=63))
    assert_same(torch.cat([row, other], 1), torch.cat([row.cpu(), other.cpu()], 1), exact=True)
    t = dev(make((8, 6), torch.float32, seed=64)).t()  # rows of stride 1 elements: copies
    before = _dispatches()
    got = torch.cat([t[:, :2], t[:, 3:]], 1)
    assert _dispatches() - before == 2
    assert_same(got, torch.cat([t.cpu()[:, :2], t.cpu()[:, 3:]], 1), exact=True)


@pytest.mark.parametrize("cols,offset,expected", [(1100, 0, 1), (1101, 0, 3), (1100, 1, 3)])
def test_large_cats_move_vec4s_in_one_kernel(cols, offset, expected, gpu_kernels):
    # Outputs past 4 MiB take the kernel where every row and offset is whole vec4 words (one
    # dispatch, 16 bytes per invocation); otherwise a copy per input (here three inputs).
    base = make((1024 * cols + offset,), torch.float32, seed=70)
    a = base[offset:].view(1024, cols)
    b, c = make((1024, 4), torch.float32, seed=71), make((1024, cols), torch.float32, seed=72)
    da, db, dc = dev(base)[offset:].view(1024, cols), dev(b), dev(c)
    before = _dispatches()
    got = torch.cat([da, db, dc], 1)
    assert _dispatches() - before == expected
    assert_same(got, torch.cat([a, b, c], 1), exact=True)


def test_cat_words_offsets_and_out_views(gpu_kernels):
    # Inputs at word offsets within larger storages, the same input twice, and out= a view
    # of a larger tensor (written at its offset, neighbours kept).
    base = make((10, 8), torch.float32, seed=40)
    db = dev(base)
    x, y = db[2:5], db[7:9]
    assert_same(torch.cat([x, y, x]), torch.cat([base[2:5], base[7:9], base[2:5]]), exact=True)
    big = torch.zeros(12, 8)
    dbig = dev(big)
    torch.cat([x, y], out=dbig[3:8])
    big[3:8] = torch.cat([base[2:5], base[7:9]])
    assert_same(dbig, big, exact=True)
    # An out= that shares a buffer with an input (no overlap) takes the copy path.
    shared = dev(torch.zeros(20, 8))
    shared[:3] = x
    shared[3:5] = y
    torch.cat([shared[:3], shared[3:5]], out=shared[10:15])
    assert_same(shared[10:15], torch.cat([base[2:5], base[7:9]]), exact=True)


def test_cat_words_larger_than_a_binding():
    # With the binding limit lowered, inputs and output bound through windows (or the copy
    # path where a window cannot hold them) still give the CPU's result.
    from conftest import run_python
    code = (
        "import torch, torch_webgpu\n"
        "a = torch.arange(3 * 4096, dtype=torch.float32).reshape(3, 4096)\n"
        "b = -torch.arange(2 * 4096, dtype=torch.float32).reshape(2, 4096)\n"
        "for dim, (x, y) in ((0, (a, b)), (1, (a.T.contiguous(), b.T.contiguous()))):\n"
        "    r = torch.cat([x.to('webgpu'), y.to('webgpu'), x.to('webgpu')], dim).cpu()\n"
        "    assert torch.equal(r, torch.cat([x, y, x], dim)), dim\n"
        "# inputs inside storages larger than a binding: bound through windows\n"
        "big = torch.arange(64 * 1024, dtype=torch.float32)\n"
        "d = big.to('webgpu')\n"
        "x, y = d[40000:41536].view(3, 512), d[60000:61024].view(2, 512)\n"
        "import torch_webgpu\n"
        "n = torch_webgpu._C.dispatch_stats()['dispatches']\n"
        "r = torch.cat([x, y, x])\n"
        "assert torch_webgpu._C.dispatch_stats()['dispatches'] - n == 1\n"
        "cx, cy = big[40000:41536].view(3, 512), big[60000:61024].view(2, 512)\n"
        "assert torch.equal(r.cpu(), torch.cat([cx, cy, cx]))\n"
        "print('ok')\n")
    result = run_python(code, env={"TORCH_WEBGPU_MAX_BINDING_BYTES": "65536", "TORCH_WEBGPU_ADAPTER_KIND": "gpu"})
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr[-2000:]


@pytest.mark.parametrize("fn", [torch.stack, torch.hstack, torch.vstack, torch.dstack,
                                torch.column_stack, lambda ts: torch.stack(ts, -1)])
def test_cat_composites(fn):
    a, b = make((3, 4), torch.float32, seed=8), make((3, 4), torch.float32, seed=9)
    check(lambda x, y: fn([x, y]), a, b, exact=True)


def test_cat_grad():
    a = make((2, 3), torch.float32, seed=10).requires_grad_()
    b = make((2, 5), torch.float32, seed=11).requires_grad_()
    da, db = dev(a.detach()).requires_grad_(), dev(b.detach()).requires_grad_()
    g = make((2, 8), torch.float32, seed=12)
    torch.cat([a, b], 1).backward(g)
    torch.cat([da, db], 1).backward(dev(g))
    assert_same(da.grad, a.grad, exact=True)
    assert_same(db.grad, b.grad, exact=True)


# ---- flip, roll ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", BIT_DTYPES)
def test_flip_dtypes(dtype):
    a = make((3, 4, 5), dtype, seed=13)
    for dims in [(0,), (1,), (2,), (0, 2), (-1, -2), (0, 1, 2), ()]:
        check(lambda x: torch.flip(x, dims), a, exact=True)
    check(lambda x: torch.flip(x, (1,)), a[:, :, :3], exact=True)  # odd narrow widths


def test_flip_layouts_and_shapes():
    a = make((4, 5, 6), torch.float32, seed=14)
    assert_same(torch.flip(dstrided(a), (0, 2)), torch.flip(strided(a), (0, 2)), exact=True)
    assert_same(torch.flip(dev(a).transpose(0, 2), (1,)), torch.flip(a.transpose(0, 2), (1,)),
                exact=True)
    cl = make((2, 3, 4, 5), torch.float32).to(memory_format=torch.channels_last)
    r = torch.flip(dev(cl), (1, 3))
    assert r.is_contiguous(memory_format=torch.channels_last)
    assert_same(r, torch.flip(cl, (1, 3)), exact=True)
    check(lambda x: torch.flip(x, (0,)), torch.tensor(3.5), exact=True)
    check(lambda x: torch.flip(x, (1,)), torch.zeros(3, 0), exact=True)
    check(lambda x: torch.fliplr(x), a, exact=True)
    check(lambda x: torch.flipud(x), a, exact=True)
    for k in [1, 2, 3, -1]:
        check(lambda x: torch.rot90(x, k, (0, 2)), a, exact=True)


def test_flip_roll_errors():
    a = make((2, 3), torch.float32)
    for fn in [lambda x: torch.flip(x, (0, 0)), lambda x: torch.flip(x, (2,)),
               lambda x: torch.flip(x, (0, -2)), lambda x: torch.roll(x, (1, 2), (0,)),
               lambda x: torch.roll(x, 1, 2), lambda x: torch.roll(x, (), ()),
               lambda x: torch.roll(x, (1, 2)), lambda x: torch.roll(x[0, 0], 1, 1),
               lambda x: torch.tril(x[0]), lambda x: torch.triu(x[0, 0], 1),
               lambda x: torch.narrow_copy(x, 2, 0, 1), lambda x: torch.narrow_copy(x, 1, 4, 1),
               lambda x: torch.narrow_copy(x, 1, 1, 3), lambda x: torch.narrow_copy(x[0, 0], 0, 0, 1),
               lambda x: torch.narrow_copy(x, 0, 0, 1, out=torch.empty(0, dtype=torch.int64, device=x.device)),
               lambda x: torch.repeat_interleave(x.long()),
               lambda x: torch.repeat_interleave(x[0].long() - 2)]:
        same_error(fn, a)


@pytest.mark.parametrize("dtype", BIT_DTYPES)
def test_roll_dtypes(dtype):
    a = make((3, 4, 5), dtype, seed=15)
    check(lambda x: torch.roll(x, 2, 1), a, exact=True)
    check(lambda x: torch.roll(x, (-1, 7), (0, 2)), a, exact=True)
    check(lambda x: torch.roll(x, 5), a, exact=True)


def test_roll_cases():
    a = make((4, 6), torch.float32, seed=16)
    for shifts, dims in [(0, 0), (13, 1), (-13, -1), ((1, 2), (0, 0)), ((3, -2), (1, 0)),
                         (-7, None), (100, None)]:
        fn = (lambda x: torch.roll(x, shifts)) if dims is None else (lambda x: torch.roll(x, shifts, dims))
        check(fn, a, exact=True)
    assert_same(torch.roll(dstrided(a), (1, 2), (0, 1)), torch.roll(a, (1, 2), (0, 1)), exact=True)
    assert_same(torch.roll(dstrided(a), 3), torch.roll(a, 3), exact=True)
    check(lambda x: torch.roll(x, 1), torch.tensor(2.0), exact=True)
    check(lambda x: torch.roll(x, 1, 0), torch.zeros(0, 3), exact=True)
    check(lambda x: torch.roll(x, (1, 2), (0,)), a)  # shifts and dims must align
    check(lambda x: torch.roll(x, 1, 2), a)


# ---- tril, triu --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", BIT_DTYPES)
@pytest.mark.parametrize("op", [torch.tril, torch.triu])
def test_tril_triu_dtypes(op, dtype):
    a = make((2, 5, 7), dtype, seed=17)
    for k in [0, 1, -1, 3, -4, 10, -10]:
        check(lambda x: op(x, k), a, exact=True)


@pytest.mark.parametrize("op", ["tril", "triu"])
def test_tril_triu_variants(op):
    fn = getattr(torch, op)
    a = make((6, 4), torch.float32, seed=18)
    check(lambda x: fn(x, 1), a, exact=True)
    check(lambda x: fn(x, -1), a.t(), exact=True)
    assert_same(fn(dstrided(a), 2), fn(strided(a), 2), exact=True)
    check(lambda x: fn(x), torch.zeros(0, 3), exact=True)
    check(lambda x: fn(x), torch.zeros(2, 3, 0), exact=True)
    check(lambda x: fn(x, 2**40), a, exact=True)
    check(lambda x: fn(x, -(2**40)), a, exact=True)
    # In-place: contiguous, non-contiguous, and a view with an offset.
    check(lambda x: getattr(x, op + "_")(1), a, exact=True)
    check(lambda x: getattr(x.t(), op + "_")(1), a, exact=True)

    def on_view(x):
        getattr(x[1:, 1:], op + "_")(0)
        return x
    check(on_view, a, exact=True)
    # out=: resized and a different layout.
    for out in [torch.empty(0), torch.empty(4, 6).t()]:
        out_d = dev(out.clone()).t() if out.dim() == 2 else dev(out.clone())
        out_c = out.clone().t() if out.dim() == 2 else out.clone()
        fn(a, 1, out=out_c.t() if out.dim() == 2 else out_c)
        r = fn(dev(a), 1, out=out_d.t() if out.dim() == 2 else out_d)
        assert_same(r, fn(a, 1), exact=True)
    # Narrow dtypes: an odd number of elements in a view whose neighbours must survive.
    b = make((3, 3), torch.int8, seed=19)
    check(lambda x: (getattr(x[:, :3], op + "_")(0), x)[1], torch.cat([b, b], 1), exact=True)
    check(lambda x: fn(x), a[0])  # 1-D: the CPU's error
    check(lambda x: fn(x, out=torch.empty(6, 4, dtype=torch.int64, device=x.device)), a)


@pytest.mark.parametrize("op", [torch.tril, torch.triu])
def test_tril_triu_grad(op):
    a = make((4, 4), torch.float32, seed=20).requires_grad_()
    da = dev(a.detach()).requires_grad_()
    g = make((4, 4), torch.float32, seed=21)
    op(a, 1).backward(g)
    op(da, 1).backward(dev(g))
    assert_same(da.grad, a.grad, exact=True)


@pytest.mark.parametrize("fn", [lambda x: torch.flip(x, (0, 1)), lambda x: torch.roll(x, (1, -1), (0, 1)),
                                lambda x: torch.roll(x, 2), lambda x: torch.rot90(x)])
def test_flip_roll_grad(fn):
    a = make((3, 4), torch.float32, seed=22).requires_grad_()
    da = dev(a.detach()).requires_grad_()
    g = make(fn(a).shape, torch.float32, seed=23)
    fn(a).backward(g)
    fn(da).backward(dev(g))
    assert_same(da.grad, a.grad, exact=True)


# ---- narrow_copy, repeat_interleave ------------------------------------------------------


def test_narrow_copy():
    a = make((4, 5), torch.float32, seed=24)
    check(lambda x: torch.narrow_copy(x, 1, 1, 3), a, exact=True)
    check(lambda x: torch.narrow_copy(x, 0, -2, 2), a, exact=True)
    check(lambda x: torch.narrow_copy(x, -1, 0, 5), a.t(), exact=True)
    out_c, out_d = torch.empty(0), torch.empty(0, device=DEVICE)
    torch.narrow_copy(a, 1, 2, 2, out=out_c)
    assert torch.narrow_copy(dev(a), 1, 2, 2, out=out_d) is out_d
    assert_same(out_d, out_c, exact=True)
    check(lambda x: torch.narrow_copy(x, 1, 4, 3), a)
    check(lambda x: torch.narrow_copy(x, 2, 0, 1), a)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_repeat_interleave_tensor(dtype):
    r = torch.tensor([2, 0, 3, 1], dtype=dtype)
    check(torch.repeat_interleave, r, exact=True)
    check(lambda x: torch.repeat_interleave(x, output_size=6), r, exact=True)
    check(torch.repeat_interleave, torch.zeros(0, dtype=dtype), exact=True)
    check(torch.repeat_interleave, torch.zeros(3, dtype=dtype), exact=True)
    check(torch.repeat_interleave, torch.arange(40, dtype=dtype) % 7, exact=True)
    check(torch.repeat_interleave, torch.tensor([1, -1], dtype=dtype))
    check(torch.repeat_interleave, torch.ones(2, 2, dtype=dtype))
    check(torch.repeat_interleave, torch.ones(2))


# ---- copies through views ----------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.bool,
                                   torch.float64, torch.complex64])
def test_permute_contiguous_any_rank(dtype):
    shape = (2, 1, 3, 2, 1, 2, 3, 2, 1, 2, 2)  # 11 dims
    a = make(shape, dtype, seed=25)
    perm = (10, 3, 0, 7, 5, 1, 9, 2, 8, 6, 4)
    check(lambda x: x.permute(perm).contiguous(), a, exact=True)
    check(lambda x: x.permute(perm).clone(), a, exact=True)


def test_unfold_and_as_strided_copies():
    a = make((5, 7), torch.float32, seed=26)
    check(lambda x: x.unfold(1, 3, 2).contiguous(), a, exact=True)
    check(lambda x: x.unfold(0, 2, 1).unfold(1, 2, 3).clone(), a, exact=True)
    check(lambda x: torch.as_strided(x, (3, 3), (6, 2), 3).contiguous(), a, exact=True)
    check(lambda x: torch.as_strided_copy(x, (4, 2), (1, 7), 1), a, exact=True)
    check(lambda x: torch.unfold_copy(x, 1, 2, 2), a, exact=True)


def test_view_ops_and_composites():
    a = make((4, 6), torch.float32, seed=27)
    check(lambda x: torch.split(x, 4, 1), a, exact=True)
    check(lambda x: torch.split(x, [1, 3], 0), a, exact=True)
    check(lambda x: torch.chunk(x, 3, 1), a, exact=True)
    check(lambda x: torch.unbind(x, 1), a, exact=True)
    check(lambda x: torch.diag(x, 1), a, exact=True)
    check(lambda x: torch.diag(x[0], -2), a, exact=True)
    check(lambda x: torch.diag_embed(x, 1), a, exact=True)
    check(lambda x: torch.diagonal_copy(x, -1), a, exact=True)
    check(lambda x: x.repeat(2, 1, 3), a, exact=True)
    check(lambda x: torch.tile(x, (2,)), a, exact=True)
    check(lambda x: torch.block_diag(x, x[:2]), a, exact=True)
    check(lambda x: F.pad(x, (1, 2, 0, 3), value=1.5), a, exact=True)
    check(lambda x: F.pad(x, (-1, 2)), a, exact=True)
