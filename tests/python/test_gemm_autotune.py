"""GEMM autotuning (csrc/kernels/gemm_autotune.h): per shape, the fastest GEMM variant
timed on a scratch output; results against the CPU, the choice kept per shape, nothing
timed during a graph capture, and torch.compile's max-autotune modes turning it on."""
import pytest
import torch

import torch_webgpu
from conftest import assert_same, dev, make, run_python

_C = torch_webgpu._C


@pytest.fixture
def autotune(monkeypatch):
    monkeypatch.delenv("TORCH_WEBGPU_GEMM_VARIANT", raising=False)
    _C._clear_gemm_autotune()
    before = _C._set_gemm_autotune(True)
    yield
    _C._set_gemm_autotune(before)
    _C._clear_gemm_autotune()


def choices():
    return dict(_C._gemm_autotune_choices())


PRODUCTS = {
    "mm": lambda a, b, c: a @ b,
    "mm, B transposed": lambda a, b, c: a @ b.t().contiguous().t(),
    "addmm": lambda a, b, c: torch.addmm(c, a, b, beta=0.5, alpha=2.0),
    "linear": lambda a, b, c: torch.nn.functional.linear(a, b.t(), c[0]),
    "bmm": lambda a, b, c: torch.bmm(a.expand(3, -1, -1), b.expand(3, -1, -1)),
}


@pytest.mark.parametrize("shape", [(1, 96, 200), (5, 40, 7), (48, 64, 80), (130, 33, 70)])
@pytest.mark.parametrize("name", list(PRODUCTS))
def test_tuned_products_match_the_cpu(name, shape, autotune):
    m, k, n = shape
    a, b, c = make((m, k), torch.float32, seed=1), make((k, n), torch.float32, seed=2), make((m, n), torch.float32, seed=3)
    fn = PRODUCTS[name]
    expected = fn(a, b, c)
    first = fn(dev(a), dev(b), dev(c))
    assert_same(first, expected, atol=1e-4, rtol=1e-4)
    tuned = choices()
    assert tuned  # the shape was timed and its variant kept
    second = fn(dev(a), dev(b), dev(c))
    assert choices() == tuned  # the same shape again: no new timing, the same variant
    assert torch.equal(second.cpu(), first.cpu())


def test_in_place_addmm_and_half_types(autotune):
    """Trials write a scratch output: an in-place product whose output is its C input
    comes out once, as on the CPU."""
    a, b, c = make((20, 33), torch.float32, seed=1), make((33, 24), torch.float32, seed=2), make((20, 24), torch.float32, seed=3)
    out = dev(c)
    out.addmm_(dev(a), dev(b))
    assert_same(out, c.addmm(a, b), atol=1e-4, rtol=1e-4)
    for dtype in (torch.float16, torch.bfloat16):
        x, w = make((6, 64), dtype, seed=4), make((40, 64), dtype, seed=5)
        assert_same(torch.nn.functional.linear(dev(x), dev(w)), torch.nn.functional.linear(x.float(), w.float()).to(dtype))


def test_nothing_is_timed_during_a_capture(autotune):
    x, w = make((9, 31), torch.float32, seed=1), make((31, 17), torch.float32, seed=2)
    static_x = dev(x)
    g = torch.webgpu.WebGPUGraph()
    with torch.webgpu.graph(g):
        out = static_x @ dev(w)
    assert not choices()  # a host wait is refused during capture: the heuristic's variant
    g.replay()
    assert_same(out, x @ w, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("mode", ["max-autotune-no-cudagraphs", "max-autotune"])
def test_max_autotune_compiles_with_tuned_gemms(mode, autotune, no_fallback):
    import torch._inductor.config as inductor_config

    _C._set_gemm_autotune(False)  # the mode turns it on for the compiled graph's calls only
    torch._dynamo.reset()

    def f(x, w1, w2):
        return torch.relu(x @ w1) @ w2

    x, w1, w2 = make((24, 40), torch.float32, seed=1), make((40, 56), torch.float32, seed=2), make((56, 8), torch.float32, seed=3)
    with inductor_config.patch(fx_graph_cache=False):
        compiled = torch.compile(f, mode=mode)
        for _ in range(3):  # warm-up, capture and replay under "max-autotune"
            assert_same(compiled(dev(x), dev(w1), dev(w2)), f(x, w1, w2), atol=1e-4, rtol=1e-4)
    tuned = choices()
    assert any(key.startswith("1x1 24x56x40") for key in tuned), tuned
    assert _C._set_gemm_autotune(False) is False  # off again outside the graph's calls
    torch._dynamo.reset()


def test_environment_variable_turns_it_on():
    result = run_python(
        "import torch, torch_webgpu\n"
        "a = torch.randn(30, 20, device='webgpu'); b = torch.randn(20, 10, device='webgpu')\n"
        "assert torch.allclose((a @ b).cpu(), a.cpu() @ b.cpu(), atol=1e-5)\n"
        "print(len(torch_webgpu._C._gemm_autotune_choices()))\n",
        env={"TORCH_WEBGPU_GEMM_AUTOTUNE": "1"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "1"
