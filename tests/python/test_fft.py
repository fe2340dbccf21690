"""torch.fft on the device against the CPU: r2c/c2c/c2r over lengths made of radix 4, 2,
3, 5, 7 and larger prime passes (a prime length is one direct DFT), dims, norms, batches,
non-contiguous inputs, out=, empty tensors, the Hermitian rules of c2r, conj_physical, complex, polar,
stft/istft, gradients, and the CPU's errors."""
import pytest
import torch
import torch_webgpu  # noqa: F401

from conftest import DEVICE, cpu, dev

TOL = dict(rtol=1e-5, atol=1e-5)
SIZES = [1, 2, 7, 8, 12, 64, 100]
NORMS = [None, "ortho", "forward"]


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


def same(actual, expected, **tol):
    assert actual.device.type == DEVICE
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    torch.testing.assert_close(cpu(actual), expected, **(tol or TOL))


def both(fn, x, *args, rtol=None, atol=None, **kw):
    tol = {} if rtol is None else dict(rtol=rtol, atol=atol)
    same(fn(dev(x), *args, **kw), fn(x, *args, **kw), **tol)


def rand(*shape, complex=False, seed=0):
    g = gen(seed)
    if complex:
        return torch.complex(torch.randn(*shape, generator=g), torch.randn(*shape, generator=g))
    return torch.randn(*shape, generator=g)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("norm", NORMS)
def test_1d_transforms(n, norm):
    x = rand(3, n, seed=n)
    z = rand(3, n, complex=True, seed=n + 1)
    both(torch.fft.fft, z, norm=norm)
    both(torch.fft.ifft, z, norm=norm)
    both(torch.fft.fft, x, norm=norm)   # real input: r2c, full output
    both(torch.fft.ifft, x, norm=norm)  # r2c, then conj
    both(torch.fft.rfft, x, norm=norm)
    both(torch.fft.ihfft, x, norm=norm)
    if n > 1:
        both(torch.fft.irfft, z, norm=norm)
        both(torch.fft.hfft, z, norm=norm)
    # An explicit output length: odd and even, shorter and longer than the input.
    both(torch.fft.irfft, z, n=2 * n + 1, norm=norm)
    both(torch.fft.hfft, z, n=max(1, n - 1), norm=norm)
    both(torch.fft.fft, z, n=n + 3, norm=norm)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("dim", [0, 1, -1, -2])
@pytest.mark.parametrize("norm", NORMS)
def test_dims_and_batches(dim, norm):
    x = rand(8, 5, 12, seed=3)
    z = rand(8, 5, 12, complex=True, seed=4)
    both(torch.fft.fft, z, dim=dim, norm=norm)
    both(torch.fft.rfft, x, dim=dim, norm=norm)
    both(torch.fft.irfft, z, dim=dim, norm=norm)
    both(torch.fft.ihfft, x, dim=dim, norm=norm)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("shape,dims", [((4, 6), None), ((2, 7, 8), None), ((2, 7, 8), (0, 2)),
                                        ((3, 4, 5), (-1, 0)), ((8, 1, 12), (1, 2))])
def test_nd_transforms(shape, dims, norm):
    x = rand(*shape, seed=5)
    z = rand(*shape, complex=True, seed=6)
    for fn, inp in [(torch.fft.fftn, z), (torch.fft.ifftn, z), (torch.fft.rfftn, x),
                    (torch.fft.irfftn, z), (torch.fft.hfftn, z), (torch.fft.ihfftn, x),
                    (torch.fft.fftn, x)]:
        both(fn, inp, dim=dims, norm=norm)
    if len(shape) >= 2:
        both(torch.fft.fft2, z, norm=norm)
        both(torch.fft.rfft2, x, norm=norm)
        both(torch.fft.irfft2, z, s=(shape[-2], 2 * shape[-1] - 1), norm=norm)


@pytest.mark.usefixtures("no_fallback")
def test_large_lengths():
    # Many passes of radices 4, 2, 3, 5, 7, 11, 17 and 241 (a long direct DFT kept
    # accurate by compensated sums), against float64.
    for n in (4096, 2048, 1000, 2310, 4097, 3**7):
        x = rand(2, n, seed=n)
        ref = torch.fft.rfft(x.double())
        got = cpu(torch.fft.rfft(dev(x))).to(torch.complex128)
        torch.testing.assert_close(got, ref, rtol=1e-5, atol=2e-5)


@pytest.mark.usefixtures("no_fallback")
def test_non_contiguous_inputs():
    x = rand(6, 10, seed=7)
    z = rand(6, 10, complex=True, seed=8)
    both(torch.fft.rfft, x.t(), dim=0)
    both(torch.fft.fft, z[:, ::2])
    both(torch.fft.fft2, z.t())
    both(torch.fft.irfft, z[1:, 2:])
    base = rand(40, seed=9)
    same(torch.fft.rfft(dev(base)[3:35]), torch.fft.rfft(base[3:35]))  # storage offset
    both(torch.fft.fftn, z.unsqueeze(1).expand(6, 3, 10))


@pytest.mark.usefixtures("no_fallback")
def test_c2r_ignores_imaginary_parts_of_dc_and_nyquist():
    z = rand(4, 5, complex=True, seed=10)
    z[:, 0] += 1e3j
    z[:, 4] += 1e3j
    both(torch.fft.irfft, z, n=8)   # even: index 4 is the Nyquist term
    both(torch.fft.irfft, z, n=9)   # odd: no Nyquist term, index 4 counts
    both(torch.fft.irfft, z, n=7)   # shorter: the trailing input is dropped
    both(torch.fft.irfftn, z, s=(4, 8))


@pytest.mark.usefixtures("no_fallback")
def test_out_variants():
    x = rand(3, 12, seed=11)
    z = rand(3, 12, complex=True, seed=12)
    for op, inp, args in [(torch.ops.aten._fft_r2c, x, ([1], 1, True)),
                          (torch.ops.aten._fft_r2c, x, ([0, 1], 2, False)),
                          (torch.ops.aten._fft_c2c, z, ([0, 1], 0, True)),
                          (torch.ops.aten._fft_c2c, z, ([1], 2, False)),
                          (torch.ops.aten._fft_c2r, z, ([1], 2, 22)),
                          (torch.ops.aten._fft_c2r, z, ([0, 1], 1, 23)),
                          (torch.ops.aten._fft_c2r, z, ([1], 0, 12))]:
        expected = op(inp, *args)
        out = torch.empty(0, dtype=expected.dtype, device=DEVICE)  # resized
        r = op.out(dev(inp), *args, out=out)
        assert r is out
        same(out, expected)
        out2 = torch.zeros(expected.shape, dtype=expected.dtype, device=DEVICE)
        op.out(dev(inp), *args, out=out2)
        same(out2, expected)
    out = torch.empty(3, 7, dtype=torch.complex64, device=DEVICE)
    torch.fft.rfft(dev(x), out=out)
    same(out, torch.fft.rfft(x))


@pytest.mark.usefixtures("no_fallback")
def test_empty():
    # The CPU (MKL) raises on empty batches; the device returns the empty result whose
    # shape and dtype the meta kernels give.
    for fn, x, kw in [(torch.fft.fft, torch.empty(0, 8, dtype=torch.complex64), {}),
                      (torch.fft.rfft, torch.empty(0, 8), {}),
                      (torch.fft.irfft, torch.empty(3, 0, 5, dtype=torch.complex64), {}),
                      (torch.fft.fft2, torch.empty(0, 4, 6, dtype=torch.complex64), {}),
                      (torch.fft.rfftn, torch.empty(2, 0, 7), {"dim": (0, 2)}),
                      (torch.fft.ifftn, torch.empty(2, 0, 7, dtype=torch.complex64), {"dim": (0, 2)})]:
        got = fn(dev(x), **kw)
        want = fn(x.to("meta"), **kw)
        assert got.device.type == DEVICE and got.shape == want.shape and got.dtype == want.dtype
        assert got.numel() == 0


@pytest.mark.usefixtures("quiet_fallback")
def test_errors_match_cpu():
    for fn, x, kw in [(torch.fft.fft, torch.tensor(1.0 + 0j), {}),
                      (torch.fft.fft, torch.empty(0, dtype=torch.complex64), {}),
                      (torch.fft.rfft, rand(4), {"dim": 1}),
                      (torch.fft.fftn, rand(4, 4, complex=True), {"dim": (0, 0)}),
                      (torch.fft.irfft, rand(1, complex=True), {}),
                      (torch.fft.rfft, rand(4, complex=True), {}),
                      (torch.fft.fft, rand(4), {"norm": "bad"}),
                      (torch.fft.rfft, rand(4).half(), {}),  # no half FFT on the CPU
                      (lambda z, n: torch.ops.aten._fft_c2r(z, [1], 0, n), rand(3, 12, complex=True),
                       {"n": 40})]:
        with pytest.raises(Exception) as cpu_err:
            fn(x, **kw)
        with pytest.raises(type(cpu_err.value)):
            fn(dev(x), **kw)


@pytest.mark.usefixtures("quiet_fallback")
def test_other_dtypes_and_long_lengths_fall_back():
    # float64/complex128 compute on the CPU; so do direct DFTs (prime factors) past the
    # adapter's loop limit (llvmpipe: a prime length past 0.9 * 65535).
    both(torch.fft.fft, rand(3, 12, complex=True).to(torch.complex128))
    both(torch.fft.rfft, rand(3, 12).double())
    x = rand(59999, seed=13)
    same(torch.fft.rfft(dev(x)), torch.fft.rfft(x), rtol=1e-4, atol=1e-3)
    # A length whose prime factors fit runs natively however long it is.
    y = rand(60001, seed=14)  # 29 * 2069
    torch.testing.assert_close(cpu(torch.fft.rfft(dev(y))).to(torch.complex128),
                               torch.fft.rfft(y.double()), rtol=1e-4, atol=1e-3)


@pytest.mark.usefixtures("no_fallback")
def test_conj_physical_complex_polar():
    z = rand(4, 5, complex=True, seed=14)
    same(torch.conj_physical(dev(z)), torch.conj_physical(z), rtol=0, atol=0)
    same(torch.conj_physical(dev(z).t()), torch.conj_physical(z.t()), rtol=0, atol=0)
    same(dev(z).conj().resolve_conj(), z.conj().resolve_conj(), rtol=0, atol=0)
    out = torch.empty(0, dtype=torch.complex64, device=DEVICE)
    torch.conj_physical(dev(z), out=out)
    same(out, z.conj_physical(), rtol=0, atol=0)
    w = dev(z)
    w.conj_physical_()
    same(w, z.conj_physical(), rtol=0, atol=0)
    x = rand(4, 5, seed=15)
    same(torch.conj_physical(dev(x)), x, rtol=0, atol=0)
    a, b = rand(4, 1, seed=16), rand(5, seed=17)
    same(torch.complex(dev(a), dev(b)), torch.complex(a, b), rtol=0, atol=0)  # broadcast
    same(torch.complex(dev(a).t(), dev(a).t()), torch.complex(a.t(), a.t()), rtol=0, atol=0)
    r = a.abs()
    same(torch.polar(dev(r), dev(b)), torch.polar(r, b), rtol=1e-6, atol=1e-6)
    out = torch.empty(0, dtype=torch.complex64, device=DEVICE)
    torch.complex(dev(a), dev(b), out=out)
    same(out, torch.complex(a, b), rtol=0, atol=0)
    same(torch.complex(dev(torch.empty(0)), dev(torch.empty(0))), torch.complex(torch.empty(0), torch.empty(0)))


@pytest.mark.usefixtures("quiet_fallback")
def test_complex_errors_match_cpu():
    a, b = rand(3), rand(3).double()
    with pytest.raises(RuntimeError):
        torch.complex(a, b)
    with pytest.raises(RuntimeError):
        torch.complex(dev(a), dev(b))


@pytest.mark.usefixtures("no_fallback")
def test_stft():
    x = rand(2, 200, seed=18)
    win = torch.hann_window(64)
    kw = dict(n_fft=64, hop_length=16, return_complex=True)
    same(torch.stft(dev(x), window=dev(win), **kw), torch.stft(x, window=win, **kw))


@pytest.mark.usefixtures("quiet_fallback")
def test_istft():
    # istft's overlap-add (unfold_backward) is another family's op.
    x = rand(2, 200, seed=18)
    win = torch.hann_window(64)
    spec = torch.stft(x, window=win, n_fft=64, hop_length=16, return_complex=True)
    same(torch.istft(dev(spec), n_fft=64, hop_length=16, window=dev(win), length=200),
         torch.istft(spec, n_fft=64, hop_length=16, window=win, length=200))


@pytest.mark.usefixtures("quiet_fallback")
@pytest.mark.parametrize("fn", [torch.fft.fft, torch.fft.rfft, torch.fft.ihfft, torch.fft.fft2,
                                torch.fft.irfft, torch.fft.hfft])
def test_gradients(fn):
    complex_in = fn in (torch.fft.irfft, torch.fft.hfft)
    x = rand(3, 8, complex=complex_in, seed=19)
    xd = dev(x).requires_grad_()
    xc = x.clone().requires_grad_()
    yd, yc = fn(xd), fn(xc)
    g = rand(*yc.shape, complex=yc.is_complex(), seed=20)
    yd.backward(dev(g))
    yc.backward(g)
    same(xd.grad, xc.grad)


# ---- output layout -----------------------------------------------------------------------

def _strided_input(shape, complex, layout):
    x = rand(*shape, complex=complex, seed=3)
    if layout == "transposed":  # non-contiguous: the last two dims swapped in memory
        x = x.mT.contiguous().mT
    elif layout == "offset":
        x = rand(2, *shape, complex=complex, seed=3)[1]
    return x


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "offset"])
@pytest.mark.parametrize("fn, complex, kw", [
    (torch.fft.fft, False, dict(dim=1)), (torch.fft.fft, True, dict(dim=0)),
    (torch.fft.ifft, True, dict(dim=-1)), (torch.fft.fft2, True, {}),
    (torch.fft.fftn, True, dict(dim=(2, 0))), (torch.fft.ifftn, True, dict(dim=(0, 1))),
    (torch.fft.rfft, False, dict(dim=1)), (torch.fft.rfft2, False, {}),
    (torch.fft.rfftn, False, dict(dim=(0, 2))), (torch.fft.ihfft, False, dict(dim=0)),
    (torch.fft.ihfft2, False, {}), (torch.fft.irfft, True, dict(dim=1)),
    (torch.fft.irfft2, True, {}), (torch.fft.irfftn, True, dict(dim=(2, 1))),
    (torch.fft.hfft, True, dict(dim=0)), (torch.fft.hfft2, True, {}),
])
def test_output_strides_match_the_cpu(fn, complex, kw, layout):
    """The results carry the CPU's strides (batch dims first, transformed dims in the order
    transformed), which torch.compile checks extern kernel outputs against."""
    x = _strided_input((5, 6, 7), complex, layout)
    actual, expected = fn(dev(x), **kw), fn(x, **kw)
    assert actual.stride() == expected.stride()
    same(actual, expected, rtol=1e-4, atol=1e-4)
