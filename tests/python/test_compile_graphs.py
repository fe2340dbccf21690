"""torch.compile(mode="reduce-overhead") on webgpu replays the compiled graph through a
torch.webgpu graph (python/torch_webgpu/compiler/graph_replay.py), against eager on the CPU.

The counters ``torch._dynamo.utils.counters["webgpu"]`` (graph_captures, graph_replays,
graph_fallbacks) show which path each call took.
"""
import copy
import warnings

import pytest
import torch
import torch.nn as nn

import torch_webgpu  # noqa: F401
from conftest import assert_same, dev
from test_graphs import TinyTransformerBlock


@pytest.fixture(autouse=True)
def fresh_compile(monkeypatch):
    """Each test compiles afresh and counts its own captures and replays."""
    import torch._inductor.config as inductor_config
    from torch._dynamo.utils import counters

    monkeypatch.setattr(inductor_config, "fx_graph_cache", False)
    torch._dynamo.reset()
    counters["webgpu"].clear()
    yield
    torch._dynamo.reset()


def counts():
    from torch._dynamo.utils import counters

    stats = counters["webgpu"]
    return stats["graph_captures"], stats["graph_replays"], stats["graph_fallbacks"]


def replays_match_eager(model, shape, calls=5, **tolerances):
    torch.manual_seed(0)
    ours = torch.compile(copy.deepcopy(model).to("webgpu"), mode="reduce-overhead")
    with torch.no_grad():
        for _ in range(calls):
            x = torch.randn(shape)
            assert_same(ours(dev(x)), model(x), **tolerances)


def test_mlp_replays_with_changing_inputs(no_fallback):
    model = nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 8)).eval()
    replays_match_eager(model, (4, 16), calls=5)
    # First call warms up, the second captures and replays, the rest replay.
    assert counts() == (1, 4, 0)


def test_transformer_block_replays_with_changing_inputs(no_fallback):
    replays_match_eager(TinyTransformerBlock().eval(), (2, 8, 32), calls=4, atol=1e-4, rtol=1e-4)
    assert counts() == (1, 3, 0)


def test_replay_runs_no_aten_ops(no_fallback):
    """A replay submits the recorded dispatches: the profiler sees no ATen op but the
    copy of the input into its static tensor (no addmm, relu, ...)."""
    model = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 16)).to("webgpu")
    ours = torch.compile(model, mode="reduce-overhead")
    x = torch.randn(3, 16, device="webgpu")
    with torch.no_grad():
        ours(x), ours(x)  # warm-up, capture
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            out = ours(x)
    names = {e.name for e in prof.events()}
    aten = {n for n in names if n.startswith("aten::")}
    assert aten <= {"aten::copy_", "aten::_copy_from"}, sorted(aten)
    assert counts()[1] == 2
    assert_same(out, model.cpu()(x.cpu()))


def test_an_output_overwritten_by_the_next_replay_raises_when_read(no_fallback):
    """As with CUDA graph trees: a replay's output is graph memory that the next replay
    overwrites; reading the old one then raises (never the new values in silence), a clone
    taken before stays, and the device keeps working."""
    ours = torch.compile(lambda x: x * 2 + 1, mode="reduce-overhead")
    a, b, c = (torch.full((5,), float(v)) for v in (1, 2, 3))
    ours(dev(a)), ours(dev(a))
    first = ours(dev(b))
    kept = first.clone()
    view = first[1:]
    second = ours(dev(c))
    for read in (first.cpu, lambda: first + 1, first.sum, lambda: print(first), view.cpu,
                 lambda: torch.cat([second, first])):
        with pytest.raises(RuntimeError, match="overwritten by a subsequent run"):
            read()
    assert first.shape == (5,) and first.dtype == torch.float32  # metadata stays readable
    assert_same(kept, b * 2 + 1)
    assert_same(second, c * 2 + 1)
    assert_same(ours(dev(a)), a * 2 + 1)
    with pytest.raises(RuntimeError, match="overwritten"):
        second.cpu()
    assert counts() == (1, 4, 0)


def test_a_state_loop_feeds_each_output_back(no_fallback):
    """h = f(h): the last replay's output is the next call's input, copied in before that
    replay overwrites it (an RNN-style state loop, as on cuda)."""
    ours = torch.compile(lambda h: torch.tanh(h * 0.9) + 0.1, mode="reduce-overhead")
    h = torch.linspace(-2, 2, 8)
    state = dev(h)
    for _ in range(6):
        h = torch.tanh(h * 0.9) + 0.1
        state = ours(state)
    assert_same(state, h)
    assert counts() == (1, 5, 0)  # a warm-up, then a capture and a replay in each call


def test_outputs_of_different_graphs_stay_valid(no_fallback):
    """Only a replay of the same graph overwrites an output: two compiled functions (or two
    shapes of one) keep each other's outputs, and a graph taken over by a new shape is not
    replayed over the old one's outputs."""
    double = torch.compile(lambda x: x * 2, mode="reduce-overhead", dynamic=False)
    x, y = torch.arange(4.0), torch.arange(6.0)
    for _ in range(3):
        small, large = double(dev(x)), double(dev(y))
    assert_same(small, x * 2)
    assert_same(large, y * 2)


def test_training_forwards_before_their_backwards_run_without_overwriting(no_fallback):
    """Two forwards, then both backwards (losses of two batches summed late): the second
    forward must not overwrite the tensors the first one saved for its backward. It runs
    without replay (with a warning), the gradients equal the CPU's, and the replays resume
    once the backwards ran."""
    torch.manual_seed(0)
    model = mlp()
    ours = copy.deepcopy(model).to("webgpu")
    compiled = torch.compile(lambda m, x: m(x).square().mean(), mode="reduce-overhead")
    batches = [torch.randn(8, 16) for _ in range(2)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for step in range(6):
            together = step >= 2  # after a warm-up and a capture, alternated with replays
            model.zero_grad()
            ours.zero_grad()
            for x in batches:
                model(x).square().mean().backward()
            if together:
                first, second = (compiled(ours, dev(x)) for x in batches)
                second.backward()
                first.backward()
            else:
                for x in batches:
                    compiled(ours, dev(x)).backward()
            for a, e in zip(ours.parameters(), model.parameters()):
                torch.testing.assert_close(a.grad.cpu(), e.grad, rtol=1e-4, atol=1e-5)
    from torch._dynamo.utils import counters

    assert counters["webgpu"]["graph_pending_backward_runs"] == 4
    assert sum("before the backward of its previous call" in str(w.message) for w in caught) == 1
    assert counts()[2] == 0 and counts()[1] > 8


def test_gradients_from_autograd_grad_outlive_the_next_replay(no_fallback):
    """torch.autograd.grad returns the backward graph's outputs themselves (no .grad to copy
    them into): each step's gradients must keep their values after later replays."""
    torch.manual_seed(0)
    model = mlp()
    ours = copy.deepcopy(model).to("webgpu")
    compiled = torch.compile(lambda m, x: m(x).square().mean(), mode="reduce-overhead")
    batches = [torch.randn(8, 16) for _ in range(5)]
    kept = [torch.autograd.grad(compiled(ours, dev(x)), list(ours.parameters())) for x in batches]
    for x, grads in zip(batches, kept):
        expected = torch.autograd.grad(model(x).square().mean(), list(model.parameters()))
        for a, e in zip(grads, expected):
            torch.testing.assert_close(a.cpu(), e, rtol=1e-4, atol=1e-5)
    captures, replays, fallbacks = counts()
    assert (captures, fallbacks) == (2, 0) and replays == 2 * 4


def test_mark_step_begin_lets_a_training_forward_replay(no_fallback):
    """torch.compiler.cudagraph_mark_step_begin() declares the previous step's outputs
    dead, as on cuda: the next forward replays although no backward ran (an evaluation
    loss with gradients on), and the dead outputs raise when read."""
    torch.manual_seed(0)
    model = mlp()
    ours = copy.deepcopy(model).to("webgpu")
    compiled = torch.compile(lambda m, x: m(x).square().mean(), mode="reduce-overhead")
    x = torch.randn(8, 16)
    losses = []
    for _ in range(5):
        torch.compiler.cudagraph_mark_step_begin()
        losses.append(compiled(ours, dev(x)))
    from torch._dynamo.utils import counters

    assert counters["webgpu"]["graph_pending_backward_runs"] == 0
    assert losses[-1].item() == pytest.approx(model(x).square().mean().item(), rel=1e-5)
    with pytest.raises(RuntimeError, match="overwritten by a subsequent run"):
        losses[-2].item()


def test_new_shape_captures_a_new_graph(no_fallback):
    ours = torch.compile(lambda x: torch.softmax(x, -1) * x.sum(), mode="reduce-overhead",
                         dynamic=False)
    for shape in [(3, 7), (3, 7), (3, 7), (5, 2), (5, 2), (5, 2), (3, 7)]:
        x = torch.randn(shape)
        assert_same(ours(dev(x)), torch.softmax(x, -1) * x.sum())
    assert counts() == (2, 5, 0)


def test_mutated_input_is_written_back(no_fallback):
    """An input copied into a static tensor and mutated by the graph gets its new value."""

    def accumulate(total, x):
        total.add_(x * x)
        return total.sum()

    ours = torch.compile(accumulate, mode="reduce-overhead")
    total_cpu, total = torch.zeros(6), dev(torch.zeros(6))
    for step in range(4):
        x = torch.randn(6) + step
        assert_same(ours(total, dev(x)), accumulate(total_cpu, x))
        assert_same(total, total_cpu)


def test_mutated_inputs_are_used_in_place_across_caches(no_fallback):
    """Plain tensors the graph mutates (HF StaticCache's key/value tensors, which transformers
    does not always mark static) are written in place, never copied; a new cache of the same
    shape (generate makes one per call), once the old one is freed, takes the old cache's
    graph over (rebind: no capture, no warm-up), so old caches' buffers are not held."""

    def step(keys, values, position, k, v):
        keys.index_copy_(0, position, k)
        values.index_copy_(0, position, v)
        return (keys * values).sum(0)

    ours = torch.compile(step, mode="reduce-overhead", dynamic=False)
    with torch.no_grad():
        for cache in range(4):
            cpu = [torch.zeros(5, 3), torch.zeros(5, 3)]
            gpu = [dev(t) for t in cpu]
            for position in range(3):
                p, k, v = torch.tensor([position]), torch.randn(1, 3), torch.randn(1, 3)
                assert_same(ours(*gpu, dev(p), dev(k), dev(v)), step(*cpu, p, k, v))
            assert_same(gpu[0], cpu[0])
            assert_same(gpu[1], cpu[1])
    # Cache 0: warm-up, capture, replay; each later cache: rebind, replay, replay, replay.
    assert counts() == (1, 11, 0)
    from torch._dynamo.utils import counters
    assert counters["webgpu"]["graph_rebinds"] == 3
    # The replayed graph holds the two index_copy_ kernels and the product's, no copies of
    # the caches (two in and two back per call before).
    assert counters["webgpu"]["graph_replayed_dispatches"] <= 11 * 3


def test_view_of_a_mutated_cache_follows_each_new_cache(no_fallback):
    """An output that is a view of a tensor used in place shows the tensor of this call,
    whether the graph was rebound or captured for it."""

    def step(keys, position, k):
        keys.index_copy_(0, position, k)
        return keys[1:], keys.sum(0)

    ours = torch.compile(step, mode="reduce-overhead", dynamic=False)
    with torch.no_grad():
        for cache in range(4):
            cpu = torch.zeros(4, 3)
            gpu = dev(cpu)
            for position in range(3):
                p, k = torch.tensor([position]), torch.randn(1, 3)
                view, total = ours(gpu, dev(p), dev(k))
                view_cpu, total_cpu = step(cpu, p, k)
                assert_same(view, view_cpu)
                assert_same(total, total_cpu)
            assert_same(gpu, cpu)


def test_caches_alive_together_keep_a_graph_each(no_fallback):
    """Two caches used in turn, both alive: each keeps its own captured graph (a rebind
    would move the graph back and forth); results stay eager's."""

    def step(keys, position, k):
        keys.index_copy_(0, position, k)
        return keys.sum(0)

    ours = torch.compile(step, mode="reduce-overhead", dynamic=False)
    cpu = [torch.zeros(4, 3), torch.zeros(4, 3)]
    gpu = [dev(t) for t in cpu]
    with torch.no_grad():
        for call in range(8):
            which, position = call % 2, torch.tensor([call // 2])
            k = torch.randn(1, 3)
            assert_same(ours(gpu[which], dev(position), dev(k)), step(cpu[which], position, k))
    assert_same(gpu[0], cpu[0])
    assert_same(gpu[1], cpu[1])
    from torch._dynamo.utils import counters
    assert counts()[0] == 2 and counters["webgpu"]["graph_rebinds"] == 0


def test_static_buffer_mutated_in_place(no_fallback):
    """A module buffer (a static input, as HF StaticCache's tensors) is used in place."""

    class Cache(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("values", torch.zeros(4, 3))

        def forward(self, position, x):
            self.values.index_copy_(0, position, x)
            return self.values.sum(0)

    model = Cache()
    ours = torch.compile(copy.deepcopy(model).to("webgpu"), mode="reduce-overhead")
    with torch.no_grad():
        for step in range(4):
            position, x = torch.tensor([step]), torch.randn(1, 3)
            assert_same(ours(dev(position), dev(x)), model(position, x))
    assert_same(ours.values, model.values)


def test_uncapturable_graph_falls_back_with_a_warning():
    """float64 computes on the CPU (a fallback op): capture is refused, the graph runs
    without replay after one warning, and the results stay right."""

    def fn(x):
        return (x.double() * 3).sin().float() + 1

    ours = torch.compile(fn, mode="reduce-overhead")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(4):
            x = torch.randn(5)
            assert_same(ours(dev(x)), fn(x))
    refused = [w for w in caught if "without graph replay" in str(w.message)]
    assert len(refused) == 1
    assert counts() == (0, 0, 1)


def train_both(make_model, steps=6, micro_batches=1, compile_step=False, dropout_free=True):
    """`steps` AdamW steps of make_model() on the CPU and, with the loss compiled under
    reduce-overhead, on webgpu; each step accumulates `micro_batches` backward passes
    before its update. Returns the losses and the final parameters of both."""
    torch.manual_seed(0)
    model = make_model()
    ours = copy.deepcopy(model).to("webgpu")
    opt_cpu = torch.optim.AdamW(model.parameters(), lr=1e-2)
    # (capturable: the step count lives on the device, so the compiled update computes on
    # webgpu only and can replay, as on cuda)
    opt_ours = torch.optim.AdamW(ours.parameters(), lr=1e-2, capturable=compile_step)
    loss_fn = lambda m, x, y: ((m(x) - y) ** 2).mean()  # noqa: E731
    compiled = torch.compile(loss_fn, mode="reduce-overhead")
    update = torch.compile(opt_ours.step, mode="reduce-overhead") if compile_step else opt_ours.step
    losses = []
    for _ in range(steps):
        for _ in range(micro_batches):
            x, y = torch.randn(8, 16), torch.randn(8, 4)
            expected = loss_fn(model, x, y)
            expected.backward()
            loss = compiled(ours, dev(x), dev(y))
            loss.backward()
            losses.append((loss.item(), expected.item()))
        opt_cpu.step()
        opt_cpu.zero_grad()
        update()
        opt_ours.zero_grad()
    return losses, list(model.parameters()), list(ours.parameters())


def mlp():
    return nn.Sequential(nn.Linear(16, 32), nn.LayerNorm(32), nn.GELU(), nn.Linear(32, 4))


@pytest.mark.parametrize("micro_batches", [1, 2])
def test_training_graphs_replay(micro_batches, no_fallback):
    """The forward and the backward of a training step are captured once each and replayed
    (as CUDA graph trees do for training): losses and parameters after six AdamW steps equal
    the CPU's, with gradients accumulated over micro-batches too (a replay overwrites its
    static gradient outputs: the accumulated .grad must not be one of them)."""
    losses, expected, actual = train_both(mlp, micro_batches=micro_batches)
    for loss, reference in losses:
        assert loss == pytest.approx(reference, rel=1e-5, abs=1e-6)
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a.detach().cpu(), e.detach(), rtol=1e-4, atol=1e-5)
    steps = 6 * micro_batches
    # Forward and backward: a warm-up each, then a capture each, then replays.
    assert counts() == (2, 2 * (steps - 1), 0)


def test_training_with_a_compiled_capturable_optimizer_step_replays(no_fallback):
    losses, expected, actual = train_both(mlp, compile_step=True)
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a.detach().cpu(), e.detach(), rtol=1e-4, atol=1e-5)
    captures, replays, fallbacks = counts()
    assert captures == 3 and fallbacks == 0 and replays >= 2 * 5 + 3


def test_training_graphs_with_dropout_replay_fresh_masks(no_fallback):
    """Each replayed forward draws a new mask and the replayed backward uses that step's
    mask: the input gradient is 2 / (1 - p) exactly where the output kept a value."""
    def f(x):
        return torch.nn.functional.dropout(x * 2, 0.25, training=True)

    compiled = torch.compile(lambda x: f(x).sum(), mode="reduce-overhead")
    fwd = torch.compile(f, mode="reduce-overhead")
    torch.manual_seed(0)
    masks = []
    for _ in range(5):
        x = dev(torch.randn(256, 32)).requires_grad_()
        out = fwd(x)
        out.backward(torch.ones_like(out))
        keep = (out != 0).cpu()
        torch.testing.assert_close(x.grad.cpu(), keep.float() * (2 / 0.75))
        torch.testing.assert_close(out.detach().cpu()[keep], (x.detach().cpu() * 2 / 0.75)[keep])
        masks.append(keep)
        y = dev(torch.randn(64)).requires_grad_()
        compiled(y).backward()
        assert y.grad is not None
    assert all(not torch.equal(a, b) for i, a in enumerate(masks) for b in masks[i + 1:])
    captures, replays, fallbacks = counts()
    assert fallbacks == 0 and captures == 4 and replays > 0


CACHED_RUN = """
import copy, torch, torch_webgpu
from torch._dynamo.utils import counters
model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
ours = torch.compile(copy.deepcopy(model).to("webgpu"), mode="reduce-overhead")
with torch.no_grad():
    for _ in range(3):
        x = torch.randn(2, 8)
        out = ours(x.to("webgpu")).cpu()
        assert torch.allclose(out, model(x), atol=1e-6), (out, x)
print(counters["webgpu"]["graph_replays"], counters["inductor"]["fxgraph_cache_hit"])
"""


def test_graphs_loaded_from_inductor_caches_replay(tmp_path):
    """A second process loads the compiled graph from Inductor's caches (AOTAutograd's
    cache hit passes post_compile no is_inference) and still replays."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(tmp_path),
               TORCH_WEBGPU_DISABLE_CPU_FALLBACK="1")
    runs = [subprocess.run([sys.executable, "-c", CACHED_RUN], env=env, capture_output=True,
                           text=True, timeout=300) for _ in range(2)]
    for run in runs:
        assert run.returncode == 0, run.stderr[-2000:]
    (replays, _), (cached_replays, hits) = (run.stdout.split()[-2:] for run in runs)
    assert (replays, cached_replays, hits) == ("2", "2", "1")


def test_random_ops_replay_with_fresh_draws(no_fallback):
    """Dropout in a reduce-overhead graph: captured (no fallback), and every replay draws
    anew, keeping the CPU's x * 2 / (1 - p) where it keeps a value, as cuda graphs do."""
    def f(x):
        return torch.nn.functional.dropout(x * 2, 0.25, training=True)

    x = torch.randn(512, 64)
    ours = torch.compile(f, mode="reduce-overhead")
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a refused capture warns
        outs = [ours(dev(x)).cpu() for _ in range(4)]
    assert counts() == (1, 3, 0)
    for i, out in enumerate(outs):
        keep = out != 0
        torch.testing.assert_close(out[keep], (x * 2 / 0.75)[keep])
        assert abs(keep.float().mean().item() - 0.75) < 0.02
        assert all(not torch.equal(out, other) for other in outs[i + 1:])
