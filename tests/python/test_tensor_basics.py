"""Tensor basics: allocation, views, resize_/set_, copies in every direction for every
dtype from and into non-contiguous, broadcast and offset tensors, fill_/zero_, item(),
contiguous(), 0-dim and empty tensors, and sub-word copies that must not clobber
neighbouring elements."""
import pytest
import torch

from conftest import ALL_DTYPES, DEVICE, NATIVE_DTYPES, assert_same, check, make

NARROW_DTYPES = [torch.uint8, torch.int8, torch.bool, torch.int16, torch.float16, torch.bfloat16]


# ---- allocation and views ----------------------------------------------------------------

@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_empty_and_empty_strided(dtype, no_fallback):
    e = torch.empty(2, 3, dtype=dtype, device=DEVICE)
    assert e.shape == (2, 3) and e.dtype == dtype and e.device.type == DEVICE
    assert e.is_contiguous() and e.stride() == (3, 1)
    s = torch.empty_strided((2, 3), (1, 2), dtype=dtype, device=DEVICE)
    assert s.stride() == (1, 2) and s.shape == (2, 3)
    assert s.untyped_storage().nbytes() >= 6 * s.element_size()
    x = make((2, 3), dtype)
    s.copy_(x)
    assert_same(s, x, exact=True)
    cl = torch.empty((2, 3, 4, 5), dtype=dtype, device=DEVICE, memory_format=torch.channels_last)
    assert cl.is_contiguous(memory_format=torch.channels_last)
    z = torch.empty(0, 4, dtype=dtype, device=DEVICE)
    assert z.numel() == 0 and z.shape == (0, 4)


def test_as_strided_view_reshape(no_fallback):
    x = torch.arange(24, dtype=torch.float32)
    d = x.to(DEVICE)
    for args in [((2, 3), (3, 1), 0), ((3, 2), (1, 3), 2), ((4,), (5,), 1), ((2, 2), (0, 1), 5)]:
        assert_same(d.as_strided(*args), x.as_strided(*args), exact=True)
    v = d.view(4, 6)
    assert v.data_ptr() == d.data_ptr()
    assert_same(v, x.view(4, 6), exact=True)
    assert_same(d.view(2, -1, 3), x.view(2, -1, 3), exact=True)
    assert_same(d.reshape(6, 4), x.reshape(6, 4), exact=True)
    # reshape of a non-viewable layout copies.
    t = d.view(4, 6).t()
    r = t.reshape(24)
    assert_same(r, x.view(4, 6).t().reshape(24), exact=True)
    assert_same(d.view(4, 6)[1:3, ::2].reshape(-1), x.view(4, 6)[1:3, ::2].reshape(-1), exact=True)
    # Views alias: writing through one shows in the other.
    v[0, 0] = 100.0
    assert d[0].item() == 100.0
    d.view(4, 6)[:, 1].fill_(-1.0)
    expected = x.clone()
    expected[0] = 100.0
    expected.view(4, 6)[:, 1] = -1.0
    assert_same(d, expected, exact=True)
    # view(dtype)
    i = d.view(torch.int32)
    assert_same(i, expected.view(torch.int32), exact=True)
    u = d.view(torch.uint8)
    assert_same(u, expected.view(torch.uint8), exact=True)


def test_more_views(no_fallback):
    x = make((3, 4, 5), torch.float32)
    d = x.to(DEVICE)
    assert_same(d.permute(2, 0, 1), x.permute(2, 0, 1), exact=True)
    assert_same(d.transpose(0, 2).contiguous(), x.transpose(0, 2).contiguous(), exact=True)
    assert_same(d.unsqueeze(1).squeeze(1), x, exact=True)
    assert_same(d.narrow(1, 1, 2), x.narrow(1, 1, 2), exact=True)
    assert_same(d.select(2, 3), x.select(2, 3), exact=True)
    assert_same(d.unfold(2, 2, 1), x.unfold(2, 2, 1), exact=True)
    assert_same(d.expand(2, 3, 4, 5), x.expand(2, 3, 4, 5), exact=True)
    assert_same(d.flatten(), x.flatten(), exact=True)
    assert_same(d.unbind(0)[1], x.unbind(0)[1], exact=True)
    assert_same(d.chunk(2, 2)[1], x.chunk(2, 2)[1], exact=True)
    assert_same(d.split(3, 2)[1], x.split(3, 2)[1], exact=True)
    assert_same(d.diagonal(dim1=1, dim2=2), x.diagonal(dim1=1, dim2=2), exact=True)
    assert_same(d[1, ..., None], x[1, ..., None], exact=True)
    c = torch.complex(x, -x)
    dc = c.to(DEVICE)
    assert_same(torch.view_as_real(dc), torch.view_as_real(c), exact=True)
    assert_same(torch.view_as_complex(torch.view_as_real(dc)), c, exact=True)


def test_resize(no_fallback):
    x = torch.arange(6, dtype=torch.float32)
    d = x.to(DEVICE)
    d.resize_(2, 3)
    assert d.shape == (2, 3)
    assert_same(d, x.view(2, 3), exact=True)
    d.resize_(4, 5)  # grows the storage, keeps the prefix
    assert d.shape == (4, 5)
    assert_same(d.reshape(-1)[:6], x, exact=True)
    d.resize_(2)
    assert_same(d, x[:2], exact=True)
    for dtype in NARROW_DTYPES + [torch.int64]:
        y = make((5,), dtype)
        dy = y.to(DEVICE)
        dy.resize_(37)
        assert_same(dy[:5], y, exact=True)
    e = torch.empty(0, device=DEVICE)
    e.resize_(3, 3)
    e.fill_(2.0)
    assert_same(e, torch.full((3, 3), 2.0), exact=True)
    # Untyped storage resize.
    s = torch.arange(4, dtype=torch.float32).to(DEVICE)
    st = s.untyped_storage()
    st.resize_(64)
    assert st.nbytes() == 64
    assert_same(s, torch.arange(4, dtype=torch.float32), exact=True)


def test_set_(no_fallback):
    x = torch.arange(12, dtype=torch.float32)
    d = x.to(DEVICE)
    t = torch.empty(0, device=DEVICE)
    t.set_(d)
    assert t.data_ptr() == d.data_ptr()
    assert_same(t, x, exact=True)
    u = torch.empty(0, device=DEVICE)
    u.set_(d.untyped_storage(), 2, (2, 3), (3, 1))
    assert_same(u, x[2:8].view(2, 3), exact=True)
    w = torch.empty(0, device=DEVICE)
    w.set_(d.untyped_storage())
    assert_same(w, x, exact=True)
    u.set_()
    assert u.numel() == 0
    # A set_ beyond the storage grows it.
    small = torch.ones(2, device=DEVICE)
    big = torch.empty(0, device=DEVICE)
    big.set_(small.untyped_storage(), 0, (8,), (1,))
    assert big.shape == (8,)
    assert big[:2].cpu().tolist() == [1.0, 1.0]
    # Mixing devices is rejected.
    with pytest.raises(RuntimeError):
        torch.empty(0, device=DEVICE).set_(torch.ones(3))


# ---- copies --------------------------------------------------------------------------

def _sources(x):
    """Non-contiguous, broadcast and offset variants of CPU tensor x (shape (4, 6))."""
    return {
        "contiguous": lambda t: t,
        "transposed": lambda t: t.t(),
        "step": lambda t: t[:, ::2],
        "step_rows": lambda t: t[::3, 1::2],
        "offset": lambda t: t[1:, 2:],
        "offset_flat": lambda t: t.reshape(-1)[5:17],
        "expand": lambda t: t[1:2, :].expand(3, 6),
        "expand_col": lambda t: t[:, 1:2].expand(4, 5),
        "scalar_expand": lambda t: t[2, 3].expand(2, 2),
        "permuted_step": lambda t: t.permute(1, 0)[1::2],
    }


SOURCES = list(_sources(None))


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("kind", SOURCES)
def test_copy_from_layouts(dtype, kind, quiet_fallback):
    x = make((4, 6), dtype, seed=3)
    view = _sources(x)[kind]
    d = x.to(DEVICE)
    # CPU (non-contiguous) -> webgpu
    assert_same(view(x).to(DEVICE), view(x), exact=True)
    # webgpu (non-contiguous) -> CPU
    assert torch.equal(view(d).cpu(), view(x))
    # webgpu (non-contiguous) -> webgpu
    assert_same(view(d).clone(), view(x).clone(), exact=True)
    assert_same(view(d).contiguous(), view(x).contiguous(), exact=True)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_copy_into_noncontiguous(dtype, quiet_fallback):
    base = make((4, 6), dtype, seed=5)
    src = make((3, 4), dtype, seed=6)
    for make_dst in (lambda t: t.t()[1::2], lambda t: t[:, 2:4].t()):
        rows = make_dst(base).shape[0]
        expected = base.clone()
        make_dst(expected).copy_(src[:rows])
        # CPU -> webgpu strided destination
        d = base.to(DEVICE)
        make_dst(d).copy_(src[:rows])
        assert_same(d, expected, exact=True)
        # webgpu (transposed source) -> webgpu strided destination
        d = base.to(DEVICE)
        transposed_src = src.t().contiguous().to(DEVICE).t()
        assert not transposed_src.is_contiguous()
        make_dst(d).copy_(transposed_src[:rows])
        assert_same(d, expected, exact=True)
    # webgpu -> CPU strided destination
    out = base.clone()
    out.t()[::2].copy_(src.to(DEVICE))
    ref = base.clone()
    ref.t()[::2].copy_(src)
    assert torch.equal(out, ref)
    # Broadcasting copy_: a row into every row, a 0-dim tensor everywhere.
    d = base.to(DEVICE)
    d.copy_(base[0].to(DEVICE))
    assert_same(d, base[0].expand(4, 6), exact=True)
    d.copy_(src[0, 0].to(DEVICE))
    assert_same(d, src[0, 0].expand(4, 6), exact=True)
    d.copy_(src[1, 1])  # from a CPU 0-dim tensor
    assert_same(d, src[1, 1].expand(4, 6), exact=True)


@pytest.mark.parametrize("src_dtype", NATIVE_DTYPES, ids=str)
@pytest.mark.parametrize("dst_dtype", [torch.float32, torch.int64, torch.uint8, torch.float16,
                                       torch.bool], ids=str)
def test_converting_copy_into_strided_dst(src_dtype, dst_dtype, no_fallback):
    src = make((3, 4), src_dtype, seed=9, low=0, high=50)
    base = make((4, 6), dst_dtype, seed=10, low=0, high=50)
    expected = base.clone()
    expected[:, 1:].t()[::2, :3].copy_(src.t()[:3])
    d = base.to(DEVICE)
    d[:, 1:].t()[::2, :3].copy_(src.to(DEVICE).t()[:3])
    assert_same(d, expected, exact=True)
    d2 = base.to(DEVICE)
    d2[:, 1:].t()[::2, :3].copy_(src.t()[:3])  # from the CPU
    assert_same(d2, expected, exact=True)


@pytest.mark.parametrize("dtype", NARROW_DTYPES, ids=str)
def test_unaligned_narrow_copies_keep_neighbours(dtype, no_fallback):
    base = make((11,), dtype, seed=1)
    patch = make((3,), dtype, seed=2)
    # Make sure the patch differs from what is there.
    if dtype == torch.bool:
        base = torch.tensor([True, False] * 5 + [True])
        patch = ~base[1:4]
    for lo in range(0, 6):
        expected = base.clone()
        expected[lo:lo + 3] = patch
        # CPU -> webgpu, into an unaligned slice
        d = base.to(DEVICE)
        d[lo:lo + 3] = patch
        assert_same(d, expected, exact=True)
        # webgpu -> webgpu into an unaligned slice
        d = base.to(DEVICE)
        d[lo:lo + 3].copy_(patch.to(DEVICE))
        assert_same(d, expected, exact=True)
        # webgpu (unaligned view) -> CPU
        assert torch.equal(base.to(DEVICE)[lo:lo + 3].cpu(), base[lo:lo + 3])
        # fill_ into an unaligned slice
        d = base.to(DEVICE)
        d[lo:lo + 3].fill_(patch[0].item())
        e = base.clone()
        e[lo:lo + 3].fill_(patch[0].item())
        assert_same(d, e, exact=True)
        # an elementwise op writing an unaligned slice
        d = base.to(DEVICE)
        if dtype != torch.bool:
            d[lo:lo + 3].mul_(1)
            assert_same(d, base, exact=True)
            torch.add(base.to(DEVICE)[lo:lo + 3], 0, out=d[lo + 1:lo + 4])
            e = base.clone()
            e[lo + 1:lo + 4] = base[lo:lo + 3]
            assert_same(d, e, exact=True)


def test_many_small_writes_race_free(no_fallback):
    # Adjacent sub-word elements written by different invocations of one dispatch.
    for dtype in (torch.uint8, torch.int16, torch.float16, torch.bool):
        x = make((1031,), dtype, seed=4)
        d = x.to(DEVICE)
        y = make((1031,), dtype, seed=8)
        d[1::2] = y[1::2].to(DEVICE)
        expected = x.clone()
        expected[1::2] = y[1::2]
        assert_same(d, expected, exact=True)


def _stats():
    import torch_webgpu
    return torch_webgpu._C.dispatch_stats()


@pytest.mark.parametrize("nbytes", [4, 64, 4096, 4100, 65536])
def test_uploads_between_kernels_keep_program_order(nbytes, no_fallback):
    # Host -> device copies made while kernels are recorded and not yet submitted: small
    # ones ride in the uniform arena as recorded copies, larger ones submit first. Either
    # way each kernel sees the bytes its program position gives it.
    n = nbytes // 4
    cpu_a, cpu_b = make((n,), torch.float32, seed=1), make((n,), torch.float32, seed=2)
    x = cpu_a.to(DEVICE)
    y = x * 2                      # reads x's first contents
    x.copy_(cpu_b)                 # upload over x
    z = x + y                      # sees the upload
    x.copy_(cpu_a * 3)
    w = x - z
    assert_same(y, cpu_a * 2, exact=True)
    assert_same(z, cpu_b + cpu_a * 2, exact=True)
    assert_same(w, cpu_a * 3 - (cpu_b + cpu_a * 2), exact=True)


def test_small_uploads_do_not_submit_and_reuse_freed_buffers_safely(no_fallback):
    # A freed tensor's buffer handed to a tensor made from host data while a recorded
    # kernel still reads the old contents: the upload must land after that kernel.
    cpu = make((16,), torch.float32, seed=3)
    results = []
    base = _stats()["submits"]
    for i in range(40):
        x = (cpu + i).to(DEVICE) if i == 0 else torch.tensor((cpu + i).tolist(), device=DEVICE)
        results.append(x * 1.5)
        del x  # its buffer is free again; the next torch.tensor may take it
    # 40 uploads between 40 recorded kernels: far fewer submits than uploads.
    assert _stats()["submits"] - base < 10
    for i, r in enumerate(results):
        assert_same(r, (cpu + i) * 1.5, exact=True)


def test_many_small_uploads_past_the_arena(no_fallback):
    # More small uploads in one batch than the uniform arena holds: the batch is submitted
    # and the rest continue, still in order.
    cpu = make((1024,), torch.float32, seed=5)  # 4 KiB each
    acc = torch.zeros(1024, device=DEVICE)
    x = torch.empty(1024, device=DEVICE)
    for i in range(64):
        x.copy_(cpu + i)
        acc += x
    assert_same(acc, sum((cpu + i for i in range(64)), torch.zeros(1024)), atol=1e-3, rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.bool, torch.uint8, torch.int8, torch.float16, torch.bfloat16])
def test_sub_word_scalar_upload_needs_no_read_back(dtype, no_fallback):
    # A tensor that fills its whole storage has no neighbours to keep: its upload pads the
    # word instead of reading it back (a host wait). A slice of a larger storage still
    # merges with its neighbours (test_unaligned_narrow_copies_keep_neighbours).
    pending = torch.ones(8, device=DEVICE) * 2  # recorded work a read-back would wait for
    waits = _stats()["host_waits"]
    value = torch.tensor(1, dtype=dtype) if dtype != torch.bool else torch.tensor(True)
    t = value.to(DEVICE)
    two = torch.tensor([value.item()] * 3, dtype=dtype, device=DEVICE)
    assert _stats()["host_waits"] == waits
    assert_same(t, value, exact=True)
    assert_same(two, torch.tensor([value.item()] * 3, dtype=dtype), exact=True)
    assert_same(pending, torch.full((8,), 2.0), exact=True)


# ---- fill_, zero_, item, contiguous, 0-dim and empty ------------------------------------

FILL_VALUES = {
    torch.float32: [1.5, -0.0, float("inf"), float("nan"), 3],
    torch.float16: [1.5, 65504.0, -2, float("-inf")],
    torch.bfloat16: [1.5, 3.0e38, -7],
    torch.int64: [2**62 + 1, -(2**63), 2**63 - 1, -5],
    torch.int32: [2**31 - 1, -(2**31), 7],
    torch.int16: [32767, -32768, 300],
    torch.int8: [127, -128, -3],
    torch.uint8: [255, 0, 17],
    torch.bool: [True, False, 1, 0],
    torch.float64: [1.0 + 2**-40, -3.25],
    torch.complex64: [1 + 2j, -0.5],
}


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_fill_zero_item(dtype, quiet_fallback):
    for value in FILL_VALUES[dtype]:
        d = torch.empty(7, dtype=dtype, device=DEVICE)
        d.fill_(value)
        expected = torch.empty(7, dtype=dtype).fill_(value)
        assert_same(d, expected, exact=True)
        item = d[3].item()
        exp_item = expected[3].item()
        assert item == exp_item or (item != item and exp_item != exp_item)
        assert type(item) is type(exp_item)
        # fill_ with a 0-dim tensor value, on the device and from the CPU
        t = torch.empty(7, dtype=dtype, device=DEVICE)
        t.fill_(torch.tensor(value, dtype=dtype))
        assert_same(t, expected, exact=True)
        t.fill_(torch.tensor(value, dtype=dtype, device=DEVICE))
        assert_same(t, expected, exact=True)
    z = make((3, 5), dtype).to(DEVICE)
    z[:, 1::2].zero_()
    ref = make((3, 5), dtype)
    ref[:, 1::2].zero_()
    assert_same(z, ref, exact=True)
    z.zero_()
    assert_same(z, torch.zeros(3, 5, dtype=dtype), exact=True)
    assert_same(torch.zeros(2, 2, dtype=dtype, device=DEVICE), torch.zeros(2, 2, dtype=dtype), exact=True)
    assert_same(torch.ones(2, 2, dtype=dtype, device=DEVICE), torch.ones(2, 2, dtype=dtype), exact=True)
    assert_same(torch.full((3,), FILL_VALUES[dtype][0], dtype=dtype, device=DEVICE),
                torch.full((3,), FILL_VALUES[dtype][0], dtype=dtype), exact=True)


@pytest.mark.parametrize("dtype", NATIVE_DTYPES, ids=str)
def test_fill_native(dtype, no_fallback):
    d = torch.empty(5, dtype=dtype, device=DEVICE).fill_(FILL_VALUES[dtype][0])
    assert_same(d, torch.empty(5, dtype=dtype).fill_(FILL_VALUES[dtype][0]), exact=True)
    d.zero_()
    assert_same(d, torch.zeros(5, dtype=dtype), exact=True)


def test_fill_float_into_int_truncates(no_fallback):
    d = torch.empty(3, dtype=torch.int32, device=DEVICE).fill_(2.7)
    assert d.cpu().tolist() == torch.empty(3, dtype=torch.int32).fill_(2.7).tolist()
    b = torch.empty(3, dtype=torch.bool, device=DEVICE).fill_(0.5)
    assert b.cpu().tolist() == [True] * 3


def test_item_python_types(no_fallback):
    assert torch.tensor(3.5, device=DEVICE).item() == 3.5
    assert torch.tensor(2**62 + 3, device=DEVICE).item() == 2**62 + 3
    assert torch.tensor(True, device=DEVICE).item() is True
    assert torch.tensor([1, 2, 3], device=DEVICE)[1].item() == 2
    assert float(torch.tensor(1.25, device=DEVICE)) == 1.25
    assert int(torch.tensor(-7, device=DEVICE)) == -7
    assert bool(torch.tensor(0.0, device=DEVICE)) is False
    assert torch.tensor([1.5, 2.5], device=DEVICE).tolist() == [1.5, 2.5]
    with pytest.raises(RuntimeError):
        torch.ones(2, device=DEVICE).item()


@pytest.mark.parametrize("dtype", NATIVE_DTYPES, ids=str)
def test_contiguous(dtype, no_fallback):
    x = make((3, 4, 5), dtype, seed=12)
    d = x.to(DEVICE)
    assert d.contiguous() is d
    p = d.permute(2, 0, 1)
    assert not p.is_contiguous()
    c = p.contiguous()
    assert c.is_contiguous()
    assert_same(c, x.permute(2, 0, 1).contiguous(), exact=True)
    cl = d.unsqueeze(0).contiguous(memory_format=torch.channels_last)
    assert cl.is_contiguous(memory_format=torch.channels_last)
    assert_same(cl, x.unsqueeze(0).contiguous(memory_format=torch.channels_last), exact=True)
    assert cl.stride() == x.unsqueeze(0).contiguous(memory_format=torch.channels_last).stride()


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_zero_dim_and_empty(dtype, quiet_fallback):
    s = make((), dtype, seed=1)
    d = s.to(DEVICE)
    assert d.dim() == 0 and d.shape == ()
    assert_same(d, s, exact=True)
    assert_same(d.clone(), s, exact=True)
    assert d.item() == s.item() or s.item() != s.item()
    assert_same(d.expand(2, 3).contiguous(), s.expand(2, 3).contiguous(), exact=True)
    assert_same(d.view(1), s.view(1), exact=True)
    e = torch.empty(0, dtype=dtype)
    de = e.to(DEVICE)
    assert de.numel() == 0
    assert_same(de.clone(), e, exact=True)
    assert de.cpu().shape == (0,)
    assert_same(torch.empty(2, 0, 3, dtype=dtype, device=DEVICE).fill_(1),
                torch.empty(2, 0, 3, dtype=dtype).fill_(1), exact=True)
    de.copy_(e)
    assert_same(de.view(0, 5), e.view(0, 5), exact=True)


def test_large_copy_roundtrip(no_fallback):
    x = torch.randn(300_001, generator=torch.Generator().manual_seed(0))
    d = x.to(DEVICE)
    assert_same(d, x, exact=True)
    assert_same(d[1::3].contiguous(), x[1::3].contiguous(), exact=True)
    h = x.half()
    assert_same(h.to(DEVICE)[7:100001], h[7:100001], exact=True)


def test_overlapping_copies_match_cpu(no_fallback):
    x = torch.arange(9.0).reshape(3, 3)
    check(lambda t: t.copy_(t.t()), x)  # refused: partial overlap
    check(lambda t: t.view(-1)[1:].copy_(t.view(-1)[:-1]), x)
    check(lambda t: t.copy_(t), x)  # a full overlap is a no-op
    check(lambda t: t[0].expand(3, 3).copy_(t), x)  # refused: overlapping destination
    check(lambda t: t[0].expand(3, 3).copy_(torch.ones(3, 3)), x)
    check(lambda t: t.clone()[:, 0].expand(2, 3).clone(), x, exact=True)
