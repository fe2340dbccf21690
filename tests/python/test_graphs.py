"""torch.webgpu graphs: capture once, replay with new inputs, compare against eager and the CPU."""
import threading

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_webgpu  # noqa: F401
from conftest import DEVICE

ATOL = dict(rtol=1e-4, atol=1e-4)


def capture(fn, *static_inputs, pool=None):
    g = torch.webgpu.WebGPUGraph()
    with torch.webgpu.graph(g, pool=pool):
        out = fn(*static_inputs)
    return g, out


def check_replays(model, shape, steps=3, seed=0):
    """Captures model on a static input, then feeds `steps` new inputs by copy_."""
    torch.manual_seed(seed)
    cpu_model = model.eval()
    dev_model = _copy_to_device(cpu_model)
    static_x = torch.randn(shape).to(DEVICE)
    with torch.no_grad():
        dev_model(static_x)  # warm up: pipelines are built outside capture
        g, static_y = capture(dev_model, static_x)
        assert g.num_dispatches() > 0
        for step in range(steps):
            x = torch.randn(shape) * (step + 1)
            static_x.copy_(x.to(DEVICE))
            g.replay()
            expected_cpu = cpu_model(x)
            expected_eager = dev_model(x.to(DEVICE)).cpu()
            torch.testing.assert_close(static_y.cpu(), expected_eager, **ATOL)
            torch.testing.assert_close(static_y.cpu(), expected_cpu, **ATOL)


def _copy_to_device(module):
    import copy
    return copy.deepcopy(module).to(DEVICE)


def test_mlp_replay_matches_eager_and_cpu(no_fallback):
    mlp = nn.Sequential(nn.Linear(12, 32), nn.GELU(), nn.Linear(32, 32), nn.SiLU(),
                        nn.Linear(32, 5))
    check_replays(mlp, (7, 12))


def test_conv_block_replay(no_fallback):
    block = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                          nn.MaxPool2d(2))
    with torch.no_grad():  # non-trivial running statistics
        block[1].running_mean.uniform_(-0.5, 0.5)
        block[1].running_var.uniform_(0.5, 2.0)
    check_replays(block, (2, 3, 10, 10))


class TinyTransformerBlock(nn.Module):
    def __init__(self, dim=32, heads=4):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


def test_transformer_block_replay(no_fallback):
    check_replays(TinyTransformerBlock(), (2, 6, 32))


# ---- decode step with a static KV cache ----------------------------------------------


class TinyDecoder(nn.Module):
    """Greedy decode of a tiny GQA decoder whose state lives in device tensors."""

    def __init__(self, vocab=40, dim=32, heads=4, kv_heads=2, layers=2, max_len=24):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.max_len = max_len
        self.embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList()
        for _ in range(layers):
            self.layers.append(nn.ModuleDict(dict(
                norm1=nn.LayerNorm(dim), q=nn.Linear(dim, dim),
                kv=nn.Linear(dim, 2 * kv_heads * self.head_dim), o=nn.Linear(dim, dim),
                norm2=nn.LayerNorm(dim), up=nn.Linear(dim, 2 * dim), down=nn.Linear(2 * dim, dim))))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)
        kv_shape = (layers, 1, kv_heads, max_len, self.head_dim)
        self.register_buffer("k_cache", torch.zeros(kv_shape))
        self.register_buffer("v_cache", torch.zeros(kv_shape))

    def step(self, token, pos):
        """token: int64 [1], pos: int64 [1] (device). Writes the next token into `token`."""
        x = self.embed(token).view(1, 1, -1)
        # Positions 0..pos are valid: the mask is computed on the device from pos.
        mask = (torch.arange(self.max_len, device=pos.device) <= pos).view(1, 1, 1, -1)
        for i, layer in enumerate(self.layers):
            h = layer["norm1"](x)
            q = layer["q"](h).view(1, 1, self.heads, self.head_dim).transpose(1, 2)
            k, v = layer["kv"](h).view(1, 1, 2 * self.kv_heads, self.head_dim).transpose(1, 2).chunk(2, 1)
            self.k_cache[i].index_copy_(2, pos, k)
            self.v_cache[i].index_copy_(2, pos, v)
            a = F.scaled_dot_product_attention(q, self.k_cache[i], self.v_cache[i],
                                               attn_mask=mask, enable_gqa=True)
            x = x + layer["o"](a.transpose(1, 2).reshape(1, 1, -1))
            x = x + layer["down"](F.silu(layer["up"](layer["norm2"](x))))
        logits = self.head(self.norm(x)).view(-1)
        token.copy_(logits.argmax().view(1))
        pos.add_(1)


def greedy_eager(model, first, steps, device):
    model = _copy_to_device(model) if device == DEVICE else model
    token = torch.tensor([first], device=device)
    pos = torch.zeros(1, dtype=torch.int64, device=device)
    out = []
    with torch.no_grad():
        for _ in range(steps):
            model.step(token, pos)
            out.append(int(token.item()))
    return out


def test_decode_static_kv_cache_replays_greedy_tokens(no_fallback):
    torch.manual_seed(0)
    model = TinyDecoder().eval()
    steps = 16
    expected_cpu = greedy_eager(model, 3, steps, "cpu")
    expected_eager = greedy_eager(model, 3, steps, DEVICE)
    assert expected_eager == expected_cpu

    dev_model = _copy_to_device(model)
    token = torch.tensor([3], device=DEVICE)
    pos = torch.zeros(1, dtype=torch.int64, device=DEVICE)
    with torch.no_grad():
        g, _ = capture(dev_model.step, token, pos)  # records; runs nothing
        assert int(pos.item()) == 0 and int(token.item()) == 3
        tokens = []
        for _ in range(steps):
            g.replay()
            tokens.append(int(token.item()))
    assert tokens == expected_cpu
    assert int(pos.item()) == steps


# ---- refused during capture ----------------------------------------------------------


def test_item_inside_capture_names_the_op():
    x = torch.randn(5).to(DEVICE)
    g = torch.webgpu.WebGPUGraph()
    with pytest.raises(RuntimeError, match=r"aten::item.*needs the host during capture"):
        with torch.webgpu.graph(g):
            (x * 2).sum().item()
    assert not torch.webgpu.is_current_stream_capturing()
    with pytest.raises(RuntimeError, match="before a capture ended"):
        g.replay()
    torch.testing.assert_close((x * 2).cpu(), x.cpu() * 2)  # eager runs again


def test_cpu_read_inside_capture_raises():
    x = torch.randn(5).to(DEVICE)
    with pytest.raises(RuntimeError, match="needs the host during capture"):
        with torch.webgpu.graph(torch.webgpu.WebGPUGraph()):
            (x + 1).cpu()


def test_fallback_op_inside_capture_raises(quiet_fallback):
    x = torch.rand(4, dtype=torch.float64).to(DEVICE)  # float64 math runs on the CPU
    with pytest.raises(RuntimeError, match=r"op 'aten::exp.*no native webgpu kernel and cannot be captured"):
        with torch.webgpu.graph(torch.webgpu.WebGPUGraph()):
            x.exp()


# ---- random ops: drawn anew at each replay ---------------------------------------------


def _draws(x, gen=None):
    """Random ops of every kernel that draws: fills (uniform, normal, integers, Bernoulli
    with a scalar and with a tensor of probabilities, half types), dropout's fused kernel,
    randperm. (Dropout takes no generator: it draws from the default one.)"""
    dropout = [torch.nn.functional.dropout(x, 0.4, training=True)] if gen is None else []
    return dropout + [
            torch.rand(x.shape, device=DEVICE, generator=gen) + x,
            torch.randn(300, device=DEVICE, dtype=torch.float16, generator=gen),
            torch.randint(-7, 9, (257,), device=DEVICE, generator=gen),
            torch.empty_like(x).bernoulli_(0.3, generator=gen),
            torch.bernoulli(x.sigmoid(), generator=gen),
            torch.randperm(100, device=DEVICE, generator=gen)]


def test_random_ops_draw_anew_at_each_replay_as_eager_code_would():
    """Each replay draws what eager code would from the generator's state at that moment
    (bit for bit), and leaves the generator where eager code would (CUDA graphs' rule)."""
    x = torch.randn(1000).to(DEVICE)
    torch.webgpu.manual_seed(11)
    g = torch.webgpu.WebGPUGraph()
    with torch.webgpu.graph(g):
        outs = _draws(x)
    assert g.num_random_dispatches() == 7
    replays = []
    for _ in range(3):
        state = torch.webgpu.get_rng_state()
        g.replay()
        got = [o.cpu() for o in outs]
        after = torch.webgpu.get_rng_state()
        torch.webgpu.set_rng_state(state)
        expected = [e.cpu() for e in _draws(x)]
        for a, e in zip(got, expected):
            assert torch.equal(a, e)
        assert torch.equal(after, torch.webgpu.get_rng_state())
        replays.append(got)
    for a, b in zip(replays[0], replays[1]):
        assert not torch.equal(a, b)
    torch.webgpu.manual_seed(11)  # seeding between replays restarts the draws
    g.replay()
    first = [o.cpu() for o in outs]
    torch.webgpu.manual_seed(11)
    g.replay()
    assert all(torch.equal(a, o.cpu()) for a, o in zip(first, outs))


def test_random_ops_with_an_explicit_generator_replay_from_it():
    x = torch.randn(1000).to(DEVICE)
    gen = torch.Generator(device=DEVICE).manual_seed(3)
    g = torch.webgpu.WebGPUGraph()
    with torch.webgpu.graph(g):
        outs = _draws(x, gen)
    default_state = torch.webgpu.get_rng_state()
    state = gen.get_state()
    g.replay()
    got = [o.cpu() for o in outs]
    gen.set_state(state)
    assert all(torch.equal(a, e.cpu()) for a, e in zip(got, _draws(x, gen)))
    assert torch.equal(torch.webgpu.get_rng_state(), default_state)


def test_graphed_callable_with_dropout_trains_as_eager_code_would():
    """make_graphed_callables over a module with dropout in training: each call's forward
    and backward replays draw what eager code would from the same generator state."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Dropout(0.3), torch.nn.ReLU(),
                                torch.nn.Linear(32, 4)).to(DEVICE)
    graphed = torch.webgpu.make_graphed_callables(
        model, (torch.randn(8, 16, device=DEVICE, requires_grad=True),))
    outputs = []
    for step in range(3):
        x = torch.randn(8, 16).to(DEVICE)
        state = torch.webgpu.get_rng_state()
        x_graph = x.clone().requires_grad_()
        y = graphed(x_graph)
        y.square().sum().backward()
        grads = [p.grad.cpu().clone() for p in model.parameters()]
        model.zero_grad()
        torch.webgpu.set_rng_state(state)
        x_eager = x.clone().requires_grad_()
        y_eager = model(x_eager)
        y_eager.square().sum().backward()
        assert torch.equal(y.detach().cpu(), y_eager.detach().cpu())
        torch.testing.assert_close(x_graph.grad.cpu(), x_eager.grad.cpu())
        for g, p in zip(grads, model.parameters()):
            torch.testing.assert_close(g, p.grad.cpu())
        model.zero_grad()
        outputs.append(y.detach().cpu())
    assert not torch.equal(outputs[0], outputs[1])


def test_two_generators_or_seeding_inside_a_capture_raise():
    gen = torch.Generator(device=DEVICE).manual_seed(3)
    with pytest.raises(RuntimeError, match="second generator"):
        with torch.webgpu.graph(torch.webgpu.WebGPUGraph()):
            torch.rand(8, device=DEVICE)
            torch.rand(8, device=DEVICE, generator=gen)
    with pytest.raises(RuntimeError, match="seeded or its state set during capture"):
        with torch.webgpu.graph(torch.webgpu.WebGPUGraph()):
            torch.rand(8, device=DEVICE)
            torch.webgpu.manual_seed(5)
            torch.rand(8, device=DEVICE)
    assert not torch.webgpu.is_current_stream_capturing()
    torch.webgpu.manual_seed(5)
    a = torch.rand(8, device=DEVICE).cpu()  # eager draws work after the failed captures
    torch.webgpu.manual_seed(5)
    assert torch.equal(a, torch.rand(8, device=DEVICE).cpu())


def test_nested_capture_raises():
    x = torch.randn(3).to(DEVICE)
    outer = torch.webgpu.WebGPUGraph()
    with torch.webgpu.graph(outer):
        y = x + 1
        with pytest.raises(RuntimeError, match="another graph is capturing"):
            torch.webgpu.WebGPUGraph().capture_begin()
    outer.replay()
    torch.testing.assert_close(y.cpu(), x.cpu() + 1)


def test_capture_on_second_thread_raises():
    x = torch.randn(3).to(DEVICE)
    g = torch.webgpu.WebGPUGraph()
    errors = []

    def other():
        try:
            torch.webgpu.WebGPUGraph().capture_begin()
        except RuntimeError as e:
            errors.append(str(e))

    with torch.webgpu.graph(g):
        y = x * 3
        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert errors and "another graph is capturing" in errors[0]
    g.replay()
    torch.testing.assert_close(y.cpu(), x.cpu() * 3)


def test_replay_after_input_freed_raises():
    x = torch.randn(64).to(DEVICE)
    g, y = capture(lambda t: t * 2 + 1, x)
    g.replay()
    torch.testing.assert_close(y.cpu(), x.cpu() * 2 + 1)
    del x
    torch.randn(64).to(DEVICE)  # may take the freed block
    with pytest.raises(RuntimeError, match="was freed"):
        g.replay()


def test_replay_without_capture_and_double_capture_raise():
    g = torch.webgpu.WebGPUGraph()
    with pytest.raises(RuntimeError, match="before a capture ended"):
        g.replay()
    x = torch.randn(3).to(DEVICE)
    with torch.webgpu.graph(g):
        x.add(1)
    with pytest.raises(RuntimeError, match="already holds a capture"):
        g.capture_begin()
    g.reset()
    with pytest.raises(RuntimeError, match="before a capture ended"):
        g.replay()


# ---- semantics ------------------------------------------------------------------------


def test_capture_does_not_run_and_replay_is_repeatable(no_fallback):
    acc = torch.zeros(4).to(DEVICE)
    one = torch.ones(4).to(DEVICE)
    g = torch.webgpu.WebGPUGraph()
    with torch.webgpu.graph(g):
        acc.add_(one)
    torch.testing.assert_close(acc.cpu(), torch.zeros(4))  # as CUDA: capture only records
    for _ in range(5):
        g.replay()
    torch.testing.assert_close(acc.cpu(), torch.full((4,), 5.0))


def test_uploads_during_capture_are_snapshotted(no_fallback):
    out = torch.zeros(3).to(DEVICE)
    g = torch.webgpu.WebGPUGraph()
    with torch.webgpu.graph(g):
        c = torch.tensor([1.0, 2.0, 3.0], device=DEVICE)  # a host upload
        out.copy_(c * 2)
    out.zero_()
    g.replay()
    torch.testing.assert_close(out.cpu(), torch.tensor([2.0, 4.0, 6.0]))


def test_strided_and_offset_views_replay(no_fallback):
    base = torch.randn(6, 8).to(DEVICE)
    view = base[1:, ::2]  # storage offset and strides
    g, y = capture(lambda t: t.t() * 3 - 1, view)
    for _ in range(2):
        new = torch.randn(6, 8)
        base.copy_(new.to(DEVICE))
        g.replay()
        torch.testing.assert_close(y.cpu(), new[1:, ::2].t() * 3 - 1)


def test_empty_and_zero_dim_tensors(no_fallback):
    e = torch.empty(0, 3).to(DEVICE)
    s = torch.tensor(2.5).to(DEVICE)
    g, (ye, ys) = capture(lambda a, b: (a * 2, b * b + 1), e, s)
    g.replay()
    assert ye.shape == (0, 3)
    torch.testing.assert_close(ys.cpu(), torch.tensor(7.25))


def test_shared_pool_graphs_replay_in_order(no_fallback):
    x = torch.randn(16).to(DEVICE)
    pool = torch.webgpu.graph_pool_handle()
    g1, a = capture(lambda t: t.exp(), x, pool=pool)
    g2, b = capture(lambda t: t * 2, a, pool=pool)
    for _ in range(2):
        new = torch.randn(16)
        x.copy_(new.to(DEVICE))
        g1.replay()
        g2.replay()
        torch.testing.assert_close(b.cpu(), new.exp() * 2, **ATOL)


# ---- memory ---------------------------------------------------------------------------


def test_capture_allocations_stay_out_of_global_pool():
    import gc
    x = torch.randn(1000).to(DEVICE)
    torch.webgpu.synchronize()
    gc.collect()
    baseline = torch.webgpu.memory_allocated()
    g = torch.webgpu.WebGPUGraph()
    with torch.webgpu.graph(g):
        t1 = x * 2  # an intermediate freed during capture
        t2 = t1 + 1
        addresses = {t1.data_ptr(), t2.data_ptr()}
        del t1
        y = t2.sin()
        del t2
    addresses.add(y.data_ptr())
    # Eager allocations of the same size never get a block the graph writes.
    eager = [torch.empty(1000, device=DEVICE) for _ in range(6)]
    assert not addresses & {e.data_ptr() for e in eager}
    g.replay()
    torch.testing.assert_close(y.cpu(), (x.cpu() * 2 + 1).sin(), **ATOL)
    del eager, y
    g.reset()
    gc.collect()
    assert torch.webgpu.memory_allocated() == baseline


# ---- make_graphed_callables ----------------------------------------------------------


def test_make_graphed_callables_mlp_matches_eager_grads(no_fallback):
    torch.manual_seed(0)
    eager = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3)).to(DEVICE)
    graphed_model = _copy_to_device(eager)
    sample = torch.randn(4, 6, device="cpu").to(DEVICE).requires_grad_(True)
    graphed = torch.webgpu.make_graphed_callables(graphed_model, (sample,))
    for step in range(3):
        x_cpu = torch.randn(4, 6)
        xs = [x_cpu.to(DEVICE).requires_grad_(True) for _ in range(2)]
        for p in list(eager.parameters()) + list(graphed.parameters()):
            p.grad = None
        out_e = eager(xs[0])
        out_g = graphed(xs[1])
        torch.testing.assert_close(out_g.cpu(), out_e.cpu(), **ATOL)
        (out_e.square().sum()).backward()
        (out_g.square().sum()).backward()
        torch.testing.assert_close(xs[1].grad.cpu(), xs[0].grad.cpu(), **ATOL)
        for pe, pg in zip(eager.parameters(), graphed.parameters()):
            torch.testing.assert_close(pg.grad.cpu(), pe.grad.cpu(), **ATOL)


def test_replay_runs_no_aten_ops(no_fallback):
    x = torch.randn(32).to(DEVICE)
    g, y = capture(lambda t: (t * 2).relu().sum(), x)
    with torch.autograd.profiler.profile() as prof:
        g.replay()
    assert not [e.name for e in prof.function_events if e.name.startswith("aten::")]
    torch.testing.assert_close(y.cpu(), (x.cpu() * 2).relu().sum(), **ATOL)


def test_replay_while_another_graph_captures_raises():
    x = torch.randn(4).to(DEVICE)
    g1, _ = capture(lambda t: t + 1, x)
    g2 = torch.webgpu.WebGPUGraph()
    with torch.webgpu.graph(g2):
        x * 2
        with pytest.raises(RuntimeError, match="another graph is capturing"):
            g1.replay()


def test_make_graphed_callables_function_with_tuple_output(no_fallback):
    torch.manual_seed(1)
    w = torch.randn(5, 5).to(DEVICE).requires_grad_(True)

    def fn(a, b):
        return (a @ w).tanh(), (a * b).sum(dim=1)

    sample = (torch.randn(3, 5).to(DEVICE).requires_grad_(True),
              torch.randn(3, 5).to(DEVICE).requires_grad_(True))
    graphed = torch.webgpu.make_graphed_callables(fn, sample)
    for _ in range(2):
        a_cpu, b_cpu = torch.randn(3, 5), torch.randn(3, 5)
        a = a_cpu.to(DEVICE).requires_grad_(True)
        b = b_cpu.to(DEVICE).requires_grad_(True)
        ac = a_cpu.clone().requires_grad_(True)
        bc = b_cpu.clone().requires_grad_(True)
        wc = w.detach().cpu().requires_grad_(True)
        out1, out2 = graphed(a, b)
        e1, e2 = (ac @ wc).tanh(), (ac * bc).sum(dim=1)
        torch.testing.assert_close(out1.cpu(), e1.detach(), **ATOL)
        torch.testing.assert_close(out2.cpu(), e2.detach(), **ATOL)
        (out1.sum() + (out2 * out2).sum()).backward()
        (e1.sum() + (e2 * e2).sum()).backward()
        # fn closes over w (not a parameter of a module): only a and b get gradients.
        torch.testing.assert_close(a.grad.cpu(), ac.grad, **ATOL)
        torch.testing.assert_close(b.grad.cpu(), bc.grad, **ATOL)
