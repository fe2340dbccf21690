"""Random ops inside torch.compile on webgpu: Inductor's rand / randn / randint64 in
generated WGSL (Philox keyed by seeds the eager generator draws).

Compiled draws are not eager's numbers (as on cuda; fallback_random=True keeps eager's,
test_compile.py), so each test checks what holds for any correct generator: the CPU's
distribution (two-sample Kolmogorov-Smirnov distance against the CPU's own draws), exact
ranges, torch.manual_seed reproducibility, fresh draws per call, and the exact arithmetic
around the draws (dropout's kept values and gradient against the CPU).
"""
import pytest
import torch
import torch.nn.functional as F

import torch_webgpu  # noqa: F401


@pytest.fixture(autouse=True)
def fresh_compile(monkeypatch):
    import torch._inductor.config as inductor_config

    monkeypatch.setattr(inductor_config, "fx_graph_cache", False)
    monkeypatch.setattr(inductor_config, "fallback_random", False)
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def ks_distance(a: torch.Tensor, b: torch.Tensor) -> float:
    """The two-sample Kolmogorov-Smirnov statistic of two 1-D float samples."""
    a, b = a.double().sort().values, b.double().sort().values
    grid = torch.cat([a, b])
    cdf_a = torch.searchsorted(a, grid, right=True).double() / a.numel()
    cdf_b = torch.searchsorted(b, grid, right=True).double() / b.numel()
    return (cdf_a - cdf_b).abs().max().item()


# For 20000 draws each, two samples of one distribution stay under 0.027 with
# probability 1 - 1e-6; the seeds are fixed, so the checks are deterministic.
N = 20000
KS_LIMIT = 0.027


def compiled_draws(fn, seed):
    torch.manual_seed(seed)
    return fn(torch.empty(N, device="webgpu")).cpu()


@pytest.mark.parametrize("kind", ["rand", "randn", "normal", "uniform", "bernoulli", "randint"])
def test_compiled_draws_follow_the_cpus_distribution(kind, no_fallback):
    make = {
        "rand": lambda x: torch.rand_like(x),
        "randn": lambda x: torch.randn_like(x),
        "normal": lambda x: torch.empty_like(x).normal_(2.0, 3.0),
        "uniform": lambda x: torch.empty_like(x).uniform_(-1.0, 5.0),
        "bernoulli": lambda x: torch.bernoulli(torch.full_like(x, 0.3)),
        "randint": lambda x: torch.randint_like(x, 3, 11),
    }[kind]
    fn = torch.compile(make)
    ours = compiled_draws(fn, 1)
    torch.manual_seed(1)
    cpu = make(torch.empty(N))
    assert ours.dtype == cpu.dtype and ours.shape == cpu.shape
    assert ks_distance(ours, cpu) < KS_LIMIT
    # Ranges hold exactly.
    if kind == "rand":
        assert 0.0 <= ours.min().item() and ours.max().item() < 1.0
    if kind == "uniform":
        assert -1.0 <= ours.min().item() and ours.max().item() < 5.0
    if kind == "bernoulli":
        assert set(ours.unique().tolist()) == {0.0, 1.0}
    if kind == "randint":
        assert set(ours.unique().tolist()) == set(float(v) for v in range(3, 11))
    # torch.manual_seed governs the draws; each call draws anew.
    assert torch.equal(compiled_draws(fn, 1), ours)
    assert not torch.equal(compiled_draws(fn, 2), ours)
    torch.manual_seed(1)
    x = torch.empty(N, device="webgpu")
    first, second = fn(x).cpu(), fn(x).cpu()
    assert torch.equal(first, ours) and not torch.equal(first, second)


def test_integer_randint_and_half_type_draws(no_fallback):
    def f(x):
        return (torch.randint(-5, 5, (N,), device=x.device), torch.rand_like(x, dtype=torch.float16),
                torch.randn_like(x, dtype=torch.bfloat16))

    torch.manual_seed(3)
    ints, half, bf16 = torch.compile(f)(torch.empty(N, device="webgpu"))
    assert ints.dtype == torch.int64 and half.dtype == torch.float16 and bf16.dtype == torch.bfloat16
    assert set(ints.cpu().unique().tolist()) == set(range(-5, 5))
    torch.manual_seed(3)
    assert ks_distance(ints.cpu().float(), torch.randint(-5, 5, (N,)).float()) < KS_LIMIT
    assert ks_distance(half.cpu().float(), torch.rand(N)) < KS_LIMIT
    assert ks_distance(bf16.cpu().float(), torch.randn(N)) < KS_LIMIT


def test_draws_fused_with_a_reduction(no_fallback):
    """A draw feeding a row sum in the same graph: the sum is that of the drawn values."""
    def f(x):
        r = torch.rand_like(x) * x
        return r, r.sum(-1)

    x = torch.rand(64, 300) + 0.5
    torch.manual_seed(0)
    r, s = torch.compile(f)(x.to("webgpu"))
    r, s = r.cpu(), s.cpu()
    assert ((r >= 0) & (r < x)).all()
    torch.testing.assert_close(s, r.sum(-1), rtol=1e-5, atol=1e-4)
    assert ks_distance((r / x).flatten(), torch.rand(64 * 300)) < 0.03


@pytest.mark.parametrize("p", [0.25, 0.5])
def test_compiled_dropout_training_step(p, no_fallback):
    """Dropout in training through AOTAutograd: the kept values are the CPU's x / (1 - p),
    about 1 - p of them are kept, and the input's gradient keeps the same positions."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(64, 48)
    x = torch.randn(256, 64)
    lin_dev = torch.nn.Linear(64, 48).to("webgpu")
    lin_dev.load_state_dict(lin.state_dict())

    def step(x):
        return F.dropout(lin_dev(x), p, training=True)

    x_dev = x.to("webgpu").requires_grad_()
    torch.manual_seed(5)
    y = torch.compile(step)(x_dev)
    y.sum().backward()
    y = y.detach().cpu()
    keep = y != 0
    expected = lin(x).detach() / (1 - p)
    torch.testing.assert_close(y[keep], expected[keep], rtol=1e-5, atol=1e-5)
    assert abs(keep.float().mean().item() - (1 - p)) < 0.02
    grad = (keep.float() / (1 - p)) @ lin.weight.detach()
    torch.testing.assert_close(x_dev.grad.cpu(), grad, rtol=1e-5, atol=1e-5)


def test_generator_argument_runs_eagerly_inside_the_graph(no_fallback):
    """An explicit generator is Inductor's fallback (eager draws from it): equal to eager."""
    def f(x, g):
        return torch.rand(x.shape, generator=g, device=x.device) + x

    x = torch.zeros(1000, device="webgpu")
    g = torch.Generator(device="webgpu").manual_seed(7)
    out = torch.compile(f)(x, g)
    g.manual_seed(7)
    assert torch.equal(out.cpu(), (torch.rand(1000, generator=g, device="webgpu") + x).cpu())
