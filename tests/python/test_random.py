"""Random ops on the device: the Philox stream itself, reproducibility and generator state,
statistical checks of every distribution (moments, Kolmogorov-Smirnov tests against the
CDF, frequencies), ranges and dtypes, randperm / multinomial / dropout, non-contiguous
and empty targets, and the errors the CPU raises.

Device numbers are reproducible per seed but are not the CPU's stream, so results are
checked against distributions, not against CPU values."""
import math

import pytest
import torch

import torch_webgpu
from conftest import DEVICE, FLOAT_DTYPES, INT_DTYPES, assert_same

scipy_stats = pytest.importorskip("scipy.stats")

N = 200_000
M32 = 0xFFFFFFFF


def philox4x32_10(ctr, key):
    """Reference Philox-4x32-10 (Salmon et al., SC11), on Python integers."""
    c, k = list(ctr), list(key)
    for r in range(10):
        if r:
            k = [(k[0] + 0x9E3779B9) & M32, (k[1] + 0xBB67AE85) & M32]
        p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
        c = [((p1 >> 32) ^ c[1] ^ k[0]) & M32, p1 & M32, ((p0 >> 32) ^ c[3] ^ k[1]) & M32, p0 & M32]
    return c


def ks_pvalue(sample, cdf, *args):
    # A frozen distribution: scipy releases differ in how `args` reach a named cdf.
    return scipy_stats.kstest(sample.double().numpy(), getattr(scipy_stats, cdf)(*args).cdf).pvalue


@pytest.fixture(autouse=True)
def _seed():
    torch.webgpu.manual_seed(2024)
    yield


def native_only():
    """Asserts (at exit) that no op of the block went through the CPU fallback."""

    class Guard:
        def __enter__(self):
            torch_webgpu._C.reset_fallback_ops_seen()

        def __exit__(self, *exc):
            if exc[0] is None:
                assert torch_webgpu._C.fallback_ops_seen() == []

    return Guard()


# ---- the stream and the generator -----------------------------------------------------


def test_reference_philox_matches_published_vectors():
    assert philox4x32_10([0, 0, 0, 0], [0, 0]) == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]
    assert philox4x32_10([M32] * 4, [M32, M32]) == [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]


def test_device_stream_is_philox_at_the_generator_offset():
    seed = 0x123456789ABCDEF0
    torch.webgpu.manual_seed(seed)
    key = [seed & M32, seed >> 32]
    with native_only():
        a = torch.empty(64, dtype=torch.int64, device=DEVICE).random_(-(2**63), None).cpu()
        b = torch.empty(8, dtype=torch.int64, device=DEVICE).random_(-(2**63), None).cpu()
    # 64-bit values: element i of a fill takes word pair i % 2 of block offset + i // 2.
    def want(ctr, i):
        r = philox4x32_10([ctr & M32, ctr >> 32, 0, 0], key)
        return r[2 * (i % 2)] | (r[2 * (i % 2) + 1] << 32)

    for offset, t in ((0, a), (32, b)):
        for i, v in enumerate(t.tolist()):
            assert v & 0xFFFFFFFFFFFFFFFF == want(offset + i // 2, i), i
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    c = torch.empty(72, dtype=torch.int64, device=DEVICE).random_(-(2**63), None, generator=g)
    assert g.get_offset() == 36 and torch.equal(c.cpu(), torch.cat([a, b]))
    # The 64-bit counter carries into its high word.
    g.set_offset(2**32 - 1)
    d = torch.empty(4, dtype=torch.int64, device=DEVICE).random_(-(2**63), None, generator=g).cpu()
    for i, v in enumerate(d.tolist()):
        assert v & 0xFFFFFFFFFFFFFFFF == want(2**32 - 1 + i // 2, i), i
    # Floats: element i takes word i % 4 of block offset + i // 4 (24 bits of it).
    g.manual_seed(seed)
    u = torch.rand(10, device=DEVICE, generator=g).cpu()
    assert g.get_offset() == 3
    for i, v in enumerate(u.tolist()):
        word = philox4x32_10([i // 4, 0, 0, 0], key)[i % 4]
        assert v == (word >> 8) * 2.0**-24, i


def test_same_seed_same_numbers_and_offsets_advance():
    ops = [
        lambda: torch.rand(1000, device=DEVICE),
        lambda: torch.randn(1000, device=DEVICE, dtype=torch.float16),
        lambda: torch.randint(-5, 5, (1000,), device=DEVICE),
        lambda: torch.empty(1000, device=DEVICE).exponential_(),
        lambda: torch.bernoulli(torch.full((1000,), 0.3, device=DEVICE)),
        lambda: torch.randperm(100, device=DEVICE),
        lambda: torch.multinomial(torch.ones(50, device=DEVICE), 20),
        lambda: torch.multinomial(torch.ones(50, device=DEVICE), 20, replacement=True),
    ]
    for op in ops:
        torch.webgpu.manual_seed(7)
        first, second = op().cpu(), op().cpu()
        torch.webgpu.manual_seed(7)
        again = op().cpu()
        assert torch.equal(first, again)
        assert not torch.equal(first, second)
        torch.manual_seed(7)  # seeds the webgpu generator too
        assert torch.equal(op().cpu(), first)


def test_generator_argument_and_state():
    g = torch.Generator(device=DEVICE)
    g.manual_seed(11)
    assert g.initial_seed() == 11
    a = torch.rand(100, device=DEVICE, generator=g)
    assert g.get_offset() == 25  # four numbers per Philox block
    state = g.get_state()
    b = torch.randn(100, device=DEVICE, generator=g)
    g.set_state(state)
    assert_same(torch.randn(100, device=DEVICE, generator=g), b.cpu(), exact=True)
    # The explicit generator does not touch the default one.
    torch.webgpu.manual_seed(11)
    assert_same(torch.rand(100, device=DEVICE), a.cpu(), exact=True)
    g2 = torch.Generator(device=DEVICE).manual_seed(12)
    assert not torch.equal(torch.rand(100, device=DEVICE, generator=g2).cpu(), a.cpu())
    # Offsets can be set like CUDA's.
    g.manual_seed(11)
    g.set_offset(12)
    assert_same(torch.rand(52, device=DEVICE, generator=g), a[48:].cpu(), exact=True)
    with pytest.raises(RuntimeError):
        torch.rand(3, device=DEVICE, generator=torch.Generator())


def test_default_state_save_restore_and_initial_seed():
    torch.webgpu.manual_seed(99)
    assert torch.webgpu.initial_seed() == 99
    torch.rand(10, device=DEVICE)
    state = torch.webgpu.get_rng_state()
    a, b = torch.randn(33, device=DEVICE).cpu(), torch.rand(5, device=DEVICE, dtype=torch.float64).cpu()
    torch.webgpu.set_rng_state(state)
    assert torch.equal(torch.randn(33, device=DEVICE).cpu(), a)
    # float64 runs through the CPU fallback, on the CPU twin: also restored.
    assert torch.equal(torch.rand(5, device=DEVICE, dtype=torch.float64).cpu(), b)
    with pytest.raises(RuntimeError):
        torch.webgpu.set_rng_state(torch.zeros(7, dtype=torch.uint8))


# ---- continuous distributions ----------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_uniform(dtype):
    with native_only():
        x = torch.empty(N, device=DEVICE, dtype=dtype).uniform_(-2, 3)
    c = x.cpu()
    assert x.dtype == dtype
    assert c.min() >= -2 and c.max() < 3
    c = c.double()
    assert abs(c.mean() - 0.5) < 0.02 and abs(c.var() - 25 / 12) < 0.03
    if dtype == torch.float32:
        assert ks_pvalue(c, "uniform", -2, 5) > 1e-3
    # Narrow dtypes round near `to` but never reach it.
    y = torch.empty(N, device=DEVICE, dtype=dtype).uniform_(0, 1).cpu()
    assert y.max() < 1 and y.min() >= 0
    # from == to gives that value.
    assert_same(torch.empty(5, device=DEVICE, dtype=dtype).uniform_(1.5, 1.5), torch.full((5,), 1.5, dtype=dtype))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_normal(dtype):
    with native_only():
        x = torch.empty(N, device=DEVICE, dtype=dtype).normal_(1.5, 2.0)
        r = torch.randn(N, device=DEVICE, dtype=dtype)
    c = x.cpu().double()
    assert abs(c.mean() - 1.5) < 0.02 and abs(c.std() - 2.0) < 0.02
    rc = r.cpu().double()
    assert abs(rc.mean()) < 0.01 and abs(rc.std() - 1) < 0.01
    if dtype == torch.float32:
        assert ks_pvalue(c, "norm", 1.5, 2.0) > 1e-3
        assert ks_pvalue(rc, "norm") > 1e-3


def test_normal_tensor_parameters():
    torch_webgpu._C.reset_fallback_ops_seen()
    mean = torch.tensor([-10.0, 0.0, 10.0], device=DEVICE).repeat(20000)
    std = torch.tensor([1.0, 2.0, 0.5], device=DEVICE).repeat(20000)
    for got, m, s in (
        (torch.normal(mean, 1.0), [-10, 0, 10], [1, 1, 1]),
        (torch.normal(0.0, std), [0, 0, 0], [1, 2, 0.5]),
        (torch.normal(mean, std), [-10, 0, 10], [1, 2, 0.5]),
    ):
        assert got.device.type == DEVICE and got.shape == mean.shape
        g = got.cpu().view(-1, 3).double()
        assert torch.allclose(g.mean(0), torch.tensor(m).double(), atol=0.05)
        assert torch.allclose(g.std(0), torch.tensor(s).double(), rtol=0.03)
    out = torch.empty(0, device=DEVICE)
    torch.normal(mean, std, out=out)
    assert out.shape == mean.shape and abs(out.cpu().view(-1, 3).mean(0)[2] - 10) < 0.05
    out = torch.empty(mean.shape, device=DEVICE)
    torch.normal(mean, 2.0, out=out)
    assert abs(out.cpu().view(-1, 3).mean(0)[0] + 10) < 0.05
    with pytest.raises(RuntimeError, match="must match the size"):  # as on the CPU
        torch.normal(mean, 2.0, out=torch.empty(0, device=DEVICE))
    out = torch.empty(0, device=DEVICE)
    torch.normal(3.0, std, out=out)
    assert abs(out.cpu().mean() - 3) < 0.05
    # Broadcasting of mean and std, and normal(float, float, size).
    b = torch.normal(torch.zeros(4, 1, device=DEVICE), torch.ones(1, 5, device=DEVICE))
    assert b.shape == (4, 5)
    s = torch.normal(2.0, 3.0, size=(1000,), device=DEVICE)
    assert s.device.type == DEVICE and s.shape == (1000,)
    assert torch_webgpu._C.fallback_ops_seen() == []
    with pytest.raises(RuntimeError, match="std >= 0.0"):
        torch.normal(mean, -1.0)
    with pytest.raises(RuntimeError, match="std >= 0.0"):
        torch.empty(3, device=DEVICE).normal_(0, -1)
    for bad in (-1.0, float("nan")):
        with pytest.raises(RuntimeError, match="all elements of std >= 0.0"):
            torch.normal(mean, torch.tensor([1.0, bad, 1.0], device=DEVICE).repeat(20000))
        with pytest.raises(RuntimeError, match="all elements of std >= 0.0"):
            torch.normal(1.0, torch.tensor([bad], device=DEVICE))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_exponential(dtype):
    with native_only():
        x = torch.empty(N, device=DEVICE, dtype=dtype).exponential_(2.0)
    c = x.cpu().double()
    assert c.min() > 0
    assert abs(c.mean() - 0.5) < 0.01 and abs(c.std() - 0.5) < 0.015
    if dtype == torch.float32:
        assert ks_pvalue(c, "expon", 0, 0.5) > 1e-3
    with pytest.raises(RuntimeError, match="lambda > 0.0"):
        torch.empty(3, device=DEVICE).exponential_(0)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES + [torch.int64, torch.int32, torch.uint8])
def test_geometric(dtype):
    with native_only():
        x = torch.empty(N, device=DEVICE, dtype=dtype).geometric_(0.3)
    c = x.cpu().double()
    assert x.dtype == dtype and c.min() >= 1
    assert abs(c.mean() - 1 / 0.3) < 0.05
    for k in (1, 2, 5):  # P(X = k) = (1 - p)^(k - 1) p
        assert abs((c == k).double().mean() - 0.7 ** (k - 1) * 0.3) < 0.005
    with pytest.raises(RuntimeError, match=r"p to be in \(0, 1\)"):
        torch.empty(3, device=DEVICE).geometric_(1.0)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_log_normal(dtype):
    with native_only():
        x = torch.empty(N, device=DEVICE, dtype=dtype).log_normal_(0.5, 0.4)
    c = x.cpu().double()
    assert c.min() > 0
    logc = c.log()
    assert abs(logc.mean() - 0.5) < 0.02 and abs(logc.std() - 0.4) < 0.02
    if dtype == torch.float32:
        assert ks_pvalue(c, "lognorm", 0.4, 0, math.exp(0.5)) > 1e-3
    with pytest.raises(RuntimeError, match="std > 0.0"):
        torch.empty(3, device=DEVICE).log_normal_(0, 0)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_cauchy(dtype):
    with native_only():
        x = torch.empty(N, device=DEVICE, dtype=dtype).cauchy_(1.0, 2.0)
    c = x.cpu().double()
    assert abs(c.median() - 1.0) < 0.05
    q = torch.quantile(c[:100000], torch.tensor([0.25, 0.75]).double())
    assert abs(q[0] + 1.0) < 0.1 and abs(q[1] - 3.0) < 0.1
    if dtype == torch.float32:
        assert ks_pvalue(c, "cauchy", 1.0, 2.0) > 1e-3
    with pytest.raises(RuntimeError, match="sigma > 0.0"):
        torch.empty(3, device=DEVICE).cauchy_(0, -1)
    with pytest.raises(RuntimeError, match="continuous probability distribution"):
        torch.empty(3, device=DEVICE, dtype=torch.int64).cauchy_()


def test_uniform_errors():
    with pytest.raises(RuntimeError, match=r"\[from, to\) range"):
        torch.empty(3, device=DEVICE).uniform_(2, 1)
    with pytest.raises(RuntimeError, match="out of bounds"):
        torch.empty(3, device=DEVICE, dtype=torch.float16).uniform_(0, 1e6)
    with pytest.raises(NotImplementedError):
        torch.empty(3, device=DEVICE, dtype=torch.int64).uniform_()


# ---- bernoulli -------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOAT_DTYPES + [torch.int64, torch.int32, torch.int8, torch.uint8, torch.bool])
def test_bernoulli_scalar(dtype):
    with native_only():
        x = torch.empty(N, device=DEVICE, dtype=dtype).bernoulli_(0.3)
    c = x.cpu()
    assert x.dtype == dtype
    assert set(c.double().unique().tolist()) <= {0.0, 1.0}
    assert abs(c.double().mean() - 0.3) < 0.005
    assert torch.empty(100, device=DEVICE, dtype=dtype).bernoulli_(0).cpu().double().sum() == 0
    assert torch.empty(100, device=DEVICE, dtype=dtype).bernoulli_(1).cpu().double().sum() == 100
    # torch.bernoulli(x, p) (bernoulli.p) is a composite on bernoulli_.float.
    y = torch.bernoulli(torch.empty(1000, device=DEVICE, dtype=dtype), 0.5)
    assert y.dtype == dtype and y.shape == (1000,)


@pytest.mark.parametrize("p_dtype", FLOAT_DTYPES)
def test_bernoulli_tensor(p_dtype):
    p = torch.tensor([0.0, 0.1, 0.5, 0.9, 1.0], dtype=p_dtype).repeat(40000).view(-1, 5)
    with native_only():
        x = torch.bernoulli(p.to(DEVICE))
    assert x.dtype == p_dtype and x.shape == p.shape
    freq = x.cpu().double().mean(0)
    assert torch.allclose(freq, p[0].double(), atol=0.006)
    assert freq[0] == 0 and freq[4] == 1
    # In-place with a broadcast probability tensor, into integer and bool targets.
    for dtype in (torch.float32, torch.int64, torch.bool):
        t = torch.empty(50000, 3, device=DEVICE, dtype=dtype)
        t.bernoulli_(torch.tensor([0.2, 0.5, 0.8], device=DEVICE, dtype=p_dtype))
        f = t.cpu().double().mean(0)
        assert torch.allclose(f, torch.tensor([0.2, 0.5, 0.8]).double(), atol=0.01)
    # out=
    out = torch.empty(0, device=DEVICE)
    torch.bernoulli(torch.full((10,), 1.0, device=DEVICE), out=out)
    assert_same(out, torch.ones(10))


def test_bernoulli_errors(monkeypatch):
    with pytest.raises(RuntimeError, match=r"p to be in \[0, 1\]"):
        torch.empty(3, device=DEVICE).bernoulli_(1.5)
    # A tensor of probabilities is checked on the device, as CUDA's device-side assert: the
    # error comes at the next read-back (at once with TORCH_WEBGPU_SYNC_CHECKS=1), and the
    # process keeps working.
    with pytest.raises(RuntimeError, match="p_in >= 0"):
        torch.bernoulli(torch.tensor([0.5, 1.5], device=DEVICE)).cpu()
    with pytest.raises(RuntimeError, match="p_in >= 0"):
        torch.empty(2, device=DEVICE).bernoulli_(torch.tensor([-0.1, 0.5], device=DEVICE)).sum().item()
    with pytest.raises(RuntimeError, match="p_in >= 0"):
        torch.bernoulli(torch.tensor([float("nan")], device=DEVICE)).cpu()
    monkeypatch.setenv("TORCH_WEBGPU_SYNC_CHECKS", "1")
    with pytest.raises(RuntimeError, match="p_in >= 0"):
        torch.bernoulli(torch.tensor([0.5, 1.5], device=DEVICE))
    monkeypatch.delenv("TORCH_WEBGPU_SYNC_CHECKS")
    assert torch.bernoulli(torch.tensor([0.0, 1.0], device=DEVICE)).cpu().tolist() == [0.0, 1.0]


# ---- random_ / randint -----------------------------------------------------------------


def test_random_full_int_ranges():
    limits = {
        torch.int64: (0, 2**63 - 1), torch.int32: (0, 2**31 - 1), torch.int16: (0, 2**15 - 1),
        torch.int8: (0, 127), torch.uint8: (0, 255), torch.bool: (0, 1),
        torch.float32: (0, 2**24), torch.float16: (0, 2**11), torch.bfloat16: (0, 2**8),
    }
    with native_only():
        for dtype, (lo, hi) in limits.items():
            x = torch.empty(20000, device=DEVICE, dtype=dtype).random_().cpu()
            assert x.dtype == dtype
            v = x.long() if dtype != torch.int64 else x
            assert v.min() >= lo and v.max() <= hi
            # Values spread over the range.
            assert abs(v.double().mean() / (hi / 2) - 1) < 0.05


@pytest.mark.parametrize("dtype", INT_DTYPES + FLOAT_DTYPES)
def test_random_from_to(dtype):
    lo, hi = (-5, 7) if dtype != torch.uint8 else (3, 15)
    with native_only():
        x = torch.empty(N, device=DEVICE, dtype=dtype).random_(lo, hi).cpu()
        y = torch.empty(1000, device=DEVICE, dtype=dtype).random_(10).cpu()
    assert x.min() == lo and x.max() == hi - 1
    counts = torch.bincount((x.long() - lo).view(-1), minlength=hi - lo).double()
    assert torch.allclose(counts / N, torch.full((hi - lo,), 1 / (hi - lo)).double(), atol=0.005)
    assert y.min() >= 0 and y.max() <= 9
    if dtype.is_floating_point:
        assert torch.equal(x, x.round())


def test_random_int64_wide_ranges():
    with native_only():
        a = torch.empty(N, device=DEVICE, dtype=torch.int64).random_(-(2**62), 2**62).cpu()
        b = torch.empty(N, device=DEVICE, dtype=torch.int64).random_(-(2**63), None).cpu()
        c = torch.empty(N, device=DEVICE, dtype=torch.int64).random_(2**40, 2**40 + 3 * 2**32).cpu()
        d = torch.empty(N, device=DEVICE, dtype=torch.int64).random_(-(2**63) + 1, 2**63 - 1).cpu()
    assert a.min() >= -(2**62) and a.max() < 2**62
    assert a.min() < -(2**61) and a.max() > 2**61 and abs(a.double().mean()) < 2**62 * 0.01
    assert b.min() < -(2**62) and b.max() > 2**62
    assert c.min() >= 2**40 and c.max() < 2**40 + 3 * 2**32
    assert abs((c - 2**40).double().mean() / (3 * 2**32) - 0.5) < 0.01
    assert d.min() > -(2**63) and d.max() < 2**63 - 1 and (d < 0).double().mean() > 0.45


def test_random_errors():
    with pytest.raises(RuntimeError, match="expects 'from' to be less than 'to'"):
        torch.empty(3, device=DEVICE, dtype=torch.int64).random_(5, 5)
    with pytest.raises(RuntimeError, match="out of bounds"):
        torch.empty(3, device=DEVICE, dtype=torch.int8).random_(0, 1000)
    with pytest.raises(RuntimeError, match="out of bounds"):
        torch.empty(3, device=DEVICE, dtype=torch.uint8).random_(-1, 10)


def test_randint_and_like_composites():
    with native_only():
        r = torch.randint(3, 9, (100, 10), device=DEVICE)
        r32 = torch.randint(100, (1000,), device=DEVICE, dtype=torch.int32)
        rl = torch.randint_like(r32, 5, 10)
        ul = torch.rand_like(torch.empty(5, 4, device=DEVICE, dtype=torch.bfloat16))
        nl = torch.randn_like(torch.empty(5, 4, device=DEVICE, dtype=torch.float16))
    assert r.dtype == torch.int64 and r.shape == (100, 10)
    assert r.cpu().min() >= 3 and r.cpu().max() <= 8
    assert r32.dtype == torch.int32 and r32.cpu().max() < 100
    assert rl.dtype == torch.int32 and rl.cpu().min() >= 5 and rl.cpu().max() < 10
    assert ul.dtype == torch.bfloat16 and ul.shape == (5, 4) and ul.device.type == DEVICE
    assert nl.dtype == torch.float16 and nl.shape == (5, 4)


# ---- randperm --------------------------------------------------------------------------


@pytest.mark.parametrize("n", [0, 1, 2, 3, 10, 1000, 4097])
def test_randperm_is_a_permutation(n):
    with native_only():
        p = torch.randperm(n, device=DEVICE)
    assert p.dtype == torch.int64 and p.shape == (n,) and p.device.type == DEVICE
    assert torch.equal(p.cpu().sort().values, torch.arange(n))
    if n >= 1000:
        assert not torch.equal(p.cpu(), torch.arange(n))


@pytest.mark.parametrize("dtype", [torch.int32, torch.int16, torch.uint8, torch.float32, torch.float16, torch.bfloat16])
def test_randperm_dtypes(dtype):
    p = torch.randperm(200, device=DEVICE, dtype=dtype)
    assert p.dtype == dtype
    assert torch.equal(p.cpu().long().sort().values, torch.arange(200))


def test_randperm_uniformity_and_out():
    counts = torch.zeros(4, 4)
    for _ in range(400):
        p = torch.randperm(4, device=DEVICE).cpu()
        counts[torch.arange(4), p] += 1
    assert (counts - 100).abs().max() < 40  # every value lands everywhere about as often
    out = torch.empty(5, 2, device=DEVICE, dtype=torch.int64)[:, 0]  # non-contiguous out
    torch.randperm(5, out=out)
    assert torch.equal(out.cpu().sort().values, torch.arange(5))
    with pytest.raises(RuntimeError):
        torch.randperm(300, device=DEVICE, dtype=torch.int8)
    with pytest.raises(RuntimeError, match="2049"):
        torch.randperm(3000, device=DEVICE, dtype=torch.float16)


# ---- multinomial -----------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_multinomial_with_replacement(dtype):
    probs = torch.tensor([0.1, 0.0, 0.4, 0.2, 0.3], dtype=dtype)
    with native_only():
        s = torch.multinomial(probs.to(DEVICE) * 7, 100000, replacement=True)
    assert s.dtype == torch.int64 and s.shape == (100000,)
    freq = torch.bincount(s.cpu(), minlength=5).double() / 100000
    assert freq[1] == 0
    assert torch.allclose(freq, probs.double() / probs.double().sum(), atol=0.01)
    # Rows are independent distributions.
    rows = torch.tensor([[1.0, 0, 0], [0, 0, 1.0], [1, 1, 1.0]], device=DEVICE, dtype=dtype)
    s2 = torch.multinomial(rows, 3000, replacement=True).cpu()
    assert (s2[0] == 0).all() and (s2[1] == 2).all()
    assert torch.allclose(torch.bincount(s2[2], minlength=3).double() / 3000, torch.full((3,), 1 / 3).double(), atol=0.04)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_multinomial_without_replacement(dtype):
    probs = torch.tensor([[0.5, 0.25, 0.125, 0.125, 0.0]], dtype=dtype).repeat(4000, 1)
    with native_only():
        s = torch.multinomial(probs.to(DEVICE), 4).cpu()
    assert s.shape == (4000, 4)
    assert all(len(set(row)) == 4 for row in s.tolist())  # no repeats
    assert (s != 4).all()  # zero probability categories come only after the others
    # First draw follows p; the first two draws of (0.5, 0.25, ...) are {0, 1} with
    # probability 0.5 * 0.5 + 0.25 * 0.5 / 0.75 ... check the first column frequencies.
    first = torch.bincount(s[:, 0], minlength=5).double() / 4000
    assert torch.allclose(first, probs[0].double(), atol=0.03)
    # Sequential sampling: P(second = 0) = sum_j p_j * p_0 / (1 - p_j) over j != 0.
    second_is_0 = 0.25 * 0.5 / 0.75 + 2 * 0.125 * 0.5 / 0.875
    assert abs((s[:, 1] == 0).double().mean() - second_is_0) < 0.03
    # Asking for every category gives a permutation; one sample per row works.
    perm = torch.multinomial(torch.ones(3, 10, device=DEVICE, dtype=dtype), 10).cpu()
    assert all(sorted(r) == list(range(10)) for r in perm.tolist())
    one = torch.multinomial(torch.tensor([0.0, 1.0, 0.0], device=DEVICE, dtype=dtype), 1)
    assert one.cpu().tolist() == [1]
    out = torch.empty(0, device=DEVICE, dtype=torch.int64)
    torch.multinomial(torch.ones(3, 5, device=DEVICE), 2, out=out)
    assert out.shape == (3, 2)
    # With zeros and more samples than positive categories, zero categories fill the rest.
    z = torch.multinomial(torch.tensor([1.0, 0, 0, 1.0], device=DEVICE), 3).cpu().tolist()
    assert len(set(z)) == 3 and set(z[:2]) == {0, 3}


def test_multinomial_errors():
    d = DEVICE
    with pytest.raises(RuntimeError, match="element < 0"):
        torch.multinomial(torch.tensor([1.0, -1.0], device=d), 1)
    with pytest.raises(RuntimeError, match="element < 0"):
        torch.multinomial(torch.tensor([1.0, float("inf")], device=d), 1)
    with pytest.raises(RuntimeError, match="entry < 0"):
        torch.multinomial(torch.tensor([1.0, -1.0], device=d), 2, True)
    with pytest.raises(RuntimeError, match="infinity or NaN"):
        torch.multinomial(torch.tensor([1.0, float("inf")], device=d), 2, True)
    with pytest.raises(RuntimeError, match="sum of probabilities <= 0"):
        torch.multinomial(torch.tensor([[1.0, 1.0], [0.0, 0.0]], device=d), 2, True)
    with pytest.raises(RuntimeError, match="sum of probabilities <= 0"):
        torch.multinomial(torch.zeros(3, device=d), 2)
    with pytest.raises(RuntimeError, match="without replacement"):
        torch.multinomial(torch.ones(2, device=d), 3)
    with pytest.raises(RuntimeError, match="n_sample <= 0"):
        torch.multinomial(torch.ones(2, device=d), 0)
    with pytest.raises(RuntimeError, match="1 or 2 dim"):
        torch.multinomial(torch.ones(2, 2, 2, device=d), 1)
    with pytest.raises(RuntimeError, match="floating-point"):
        torch.multinomial(torch.ones(2, device=d, dtype=torch.int64), 1)


# ---- dropout ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_native_dropout(dtype):
    x = torch.randn(100000, device=DEVICE, dtype=dtype)
    with native_only():
        out, mask = torch.native_dropout(x, 0.25, True)
    assert mask.dtype == torch.bool and out.dtype == dtype
    m, o, xc = mask.cpu(), out.cpu(), x.cpu()
    assert abs(m.double().mean() - 0.75) < 0.005
    scale = 1 / 0.75
    assert_same(out, torch.where(m, (xc.float() * scale).to(dtype), torch.zeros((), dtype=dtype)))
    # Eval mode keeps everything.
    out_eval, mask_eval = torch.native_dropout(x, 0.25, False)
    assert_same(out_eval, xc, exact=True)
    assert mask_eval.cpu().all()
    # p = 1 drops everything.
    out1, mask1 = torch.native_dropout(x, 1.0, True)
    assert not mask1.cpu().any() and (out1.cpu() == 0).all()


def test_native_dropout_matches_cpu_arithmetic_and_layouts():
    scale = 1 / 0.6
    x = torch.tensor([float("inf"), float("-inf"), float("nan"), -2.0, 3.0]).repeat(400)
    for xd in (x.to(DEVICE), torch.randn(40, 30, device=DEVICE).t(), torch.randn(60, device=DEVICE)[::3]):
        with native_only():
            out, mask = torch.native_dropout(xd, 0.4, True)
        assert out.shape == xd.shape and mask.shape == xd.shape and mask.dtype == torch.bool
        assert_same(out, xd.cpu().mul(mask.cpu()).mul_(scale))
        assert 0.3 < mask.cpu().double().mean() < 0.9
    with pytest.raises(RuntimeError, match="can't be cast"):  # as on the CPU
        torch.native_dropout(torch.ones(10, device=DEVICE, dtype=torch.int32), 0.4, True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("n", [1, 3, 6, 4099])
def test_native_dropout_mask_is_the_philox_stream(dtype, n):
    # Element i is kept when word i % 4 of block i // 4 (24 bits) is below keep; the
    # outputs go as whole words (one 16-byte store for float32), the last block's up to n.
    key = [5, 0]
    keep = torch.tensor(0.7).item()  # the kernel compares in float32
    for start in (0, 1, 3):
        x = torch.randn(n + 4, dtype=dtype)
        torch.webgpu.manual_seed(5)
        with native_only():
            out, mask = torch.native_dropout(x.to(DEVICE)[start:start + n], 0.3, True)
        want = torch.tensor([(philox4x32_10([i // 4, 0, 0, 0], key)[i % 4] >> 8) * 2.0**-24 < keep
                             for i in range(n)])
        assert torch.equal(mask.cpu(), want)
        xs = x[start:start + n]
        assert_same(out, torch.where(want, (xs.float() * (1 / 0.7)).to(dtype), torch.zeros((), dtype=dtype)))


def test_dropout_functional_and_backward():
    x = torch.randn(2000, 10, device=DEVICE, requires_grad=True)
    y = torch.nn.functional.dropout(x, 0.5, training=True)
    y.sum().backward()
    kept = y.detach().cpu() != 0
    assert abs(kept.double().mean() - 0.5) < 0.02
    g = x.grad.cpu()
    assert torch.equal(g[kept], torch.full((int(kept.sum()),), 2.0))
    assert (g[~kept] == 0).all()
    grad = torch.ones(10, device=DEVICE)
    mask = torch.tensor([True, False] * 5, device=DEVICE)
    assert_same(torch.ops.aten.native_dropout_backward(grad, mask, 3.0), torch.tensor([3.0, 0.0] * 5))
    e = torch.nn.functional.dropout(torch.ones(3, device=DEVICE), 0.5, training=False)
    assert_same(e, torch.ones(3), exact=True)


# ---- targets: non-contiguous, empty, float64 ---------------------------------------------


def test_non_contiguous_targets():
    base = torch.zeros(100, 50, device=DEVICE)
    view = base[:, ::2]
    with native_only():
        view.uniform_(1, 2)
    b = base.cpu()
    assert (b[:, ::2] >= 1).all() and (b[:, ::2] < 2).all()
    assert (b[:, 1::2] == 0).all()
    t = torch.zeros(300, 200, device=DEVICE).t()  # dense but transposed
    t.normal_()
    assert abs(t.cpu().std() - 1) < 0.02
    off = torch.zeros(1000, device=DEVICE, dtype=torch.float16)
    off[10:900:3].bernoulli_(1.0)
    o = off.cpu()
    assert o[10:900:3].eq(1).all() and o.sum() == len(range(10, 900, 3))
    ints = torch.zeros(20, 20, device=DEVICE, dtype=torch.int8)
    ints[::2, 1::3].random_(1, 5)
    i = ints.cpu()
    assert (i[::2, 1::3] >= 1).all() and (i[1::2] == 0).all()
    bt = torch.zeros(64, 8, device=DEVICE)[:, 2]
    bt.bernoulli_(torch.full((64,), 1.0, device=DEVICE))
    assert (bt.cpu() == 1).all()


def test_overlapping_targets_raise_as_on_cpu():
    for op in (lambda t: t.uniform_(), lambda t: t.normal_(), lambda t: t.bernoulli_(0.5),
               lambda t: t.random_(0, 3)):
        with pytest.raises(RuntimeError, match="single memory location"):
            op(torch.empty(3).expand(4, 3))
        with pytest.raises(RuntimeError, match="single memory location"):
            op(torch.empty(3, device=DEVICE).expand(4, 3))


def test_empty_targets():
    with native_only():
        for op in (
            lambda t: t.uniform_(), lambda t: t.normal_(), lambda t: t.bernoulli_(0.5),
            lambda t: t.random_(0, 3), lambda t: t.exponential_(), lambda t: t.geometric_(0.5),
            lambda t: t.log_normal_(), lambda t: t.cauchy_(),
        ):
            t = torch.empty(0, 3, device=DEVICE)
            assert op(t).shape == (0, 3)
        assert torch.rand(0, device=DEVICE).shape == (0,)
        assert torch.bernoulli(torch.empty(0, device=DEVICE)).shape == (0,)
        assert torch.multinomial(torch.ones(0, 3, device=DEVICE), 2).shape == (0, 2)
        out, mask = torch.native_dropout(torch.empty(0, device=DEVICE), 0.5, True)
        assert out.shape == (0,) and mask.shape == (0,)


def test_float64_goes_through_the_fallback():
    torch.webgpu.manual_seed(3)
    x = torch.empty(1000, device=DEVICE, dtype=torch.float64).uniform_(0, 2)
    assert x.dtype == torch.float64 and 0 <= x.cpu().min() and x.cpu().max() < 2
    torch.webgpu.manual_seed(3)
    assert torch.equal(torch.empty(1000, device=DEVICE, dtype=torch.float64).uniform_(0, 2).cpu(), x.cpu())
    p = torch.randperm(50, device=DEVICE, dtype=torch.float64)
    assert torch.equal(p.cpu().sort().values, torch.arange(50, dtype=torch.float64))


# ---- rrelu ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_rrelu_with_noise(dtype):
    x = torch.linspace(-3, 3, 60001, dtype=dtype)
    xd = x.to(DEVICE)
    noise = torch.empty(x.shape, device=DEVICE, dtype=dtype)
    with native_only():
        y = torch.ops.aten.rrelu_with_noise(xd, noise, 0.1, 0.3, True)
    yc, nc = y.cpu(), noise.cpu()
    assert y.dtype == dtype
    neg = x <= 0
    assert (nc[~neg] == 1).all() and (yc[~neg] == x[~neg]).all()
    slopes = nc[neg].double()
    assert slopes.min() >= 0.1 - 1e-3 and slopes.max() <= 0.3 + 1e-3
    assert abs(slopes.mean() - 0.2) < 0.005
    assert_same(y, (x.float() * nc.float()).to(dtype))
    # In place, and evaluation mode (the mean slope) as on the CPU.
    z = xd.clone()
    torch.ops.aten.rrelu_with_noise_(z, noise, 0.1, 0.3, True)
    assert ((z.cpu() < 0) == (x < 0)).all()
    assert_same(torch.nn.functional.rrelu(xd, 0.1, 0.3, training=False),
                torch.nn.functional.rrelu(x, 0.1, 0.3, training=False))
    with pytest.raises(RuntimeError, match="noise tensor shape must match"):
        torch.ops.aten.rrelu_with_noise(xd, torch.empty(3, device=DEVICE, dtype=dtype), 0.1, 0.3, True)


def test_rrelu_gradient():
    x = torch.randn(1000, device=DEVICE, requires_grad=True)
    y = torch.nn.functional.rrelu(x, 0.1, 0.3, training=True)
    y.sum().backward()
    g, xc, yc = x.grad.cpu(), x.detach().cpu(), y.detach().cpu()
    pos = xc > 0
    assert (g[pos] == 1).all()
    torch.testing.assert_close(g[~pos], yc[~pos] / xc[~pos])


FILLS = ["uniform_", "normal_", "exponential_", "log_normal_", "cauchy_"]
ALIGNMENT_CASES = [(f, d) for f in FILLS for d in (torch.float32, torch.float16, torch.bfloat16)] + [
    ("bernoulli_", d) for d in (torch.float32, torch.float16, torch.bool, torch.uint8, torch.int8,
                                torch.int16, torch.int32)]


@pytest.mark.parametrize("n", [1, 3, 4, 5, 11, 4099])
@pytest.mark.parametrize("fill,dtype", ALIGNMENT_CASES)
def test_fills_at_any_alignment_draw_the_same_stream(fill, dtype, n):
    # A target on a boundary of 4 elements takes each Philox block's four results with
    # whole-word stores (one 16-byte store for 4-byte dtypes), others a store per element:
    # element i must draw word i % 4 of block i // 4 either way, whatever n % 4 is, and
    # the elements around the target (sharing its first and last words) stay untouched.
    def draw(t):
        torch.webgpu.manual_seed(11)
        with native_only():
            getattr(t, fill)()
        return t.cpu()

    zeros = lambda k: torch.zeros(k, dtype=dtype)  # noqa: E731
    aligned = draw(torch.empty(n, dtype=dtype, device=DEVICE))
    for start in (1, 2, 3, 4):
        base = torch.zeros(n + 8, dtype=dtype, device=DEVICE)
        assert torch.equal(draw(base[start:start + n]), aligned)
        rest = base.cpu()
        assert torch.equal(rest[:start], zeros(start)) and torch.equal(rest[start + n:], zeros(8 - start))
    strided = torch.zeros(2 * n, dtype=dtype, device=DEVICE)
    assert torch.equal(draw(strided[::2]), aligned)
    assert torch.equal(strided.cpu()[1::2], zeros(n))
    if fill == "uniform_" and dtype == torch.float32:
        key = [11, 0]
        want = [(philox4x32_10([i // 4, 0, 0, 0], key)[i % 4] >> 8) * 2.0**-24 for i in range(n)]
        assert aligned.tolist() == want
