"""Combo kernels (compiler/combo_kernels.py): independent generated pointwise kernels of a
webgpu graph run as one dispatch, with the results of the separate kernels (bit for bit)
and of PyTorch on the CPU. TORCH_WEBGPU_COMPILE_COMBO=0 gives the separate kernels."""
import pytest
import torch

from conftest import dev, make, run_python
from test_compile import dispatches, fresh_compile  # noqa: F401 (autouse: fresh kernels)
from test_e2e_models import e2e_models


def run_compiled(fn, args, monkeypatch, combo=True, **compile_kwargs):
    """fn compiled with combos on or off, run on webgpu copies of `args` (CPU tensors):
    (outputs on the CPU, the webgpu inputs after the call on the CPU, dispatches of the
    second call, made on fresh copies)."""
    monkeypatch.setenv("TORCH_WEBGPU_COMPILE_COMBO", "1" if combo else "0")
    torch._dynamo.reset()
    compiled = torch.compile(fn, **compile_kwargs)
    compiled(*[dev(a.clone()) for a in args])  # compiles
    inputs = [dev(a.clone()) for a in args]
    before = dispatches()
    out = compiled(*inputs)
    count = dispatches() - before
    out = tuple(o.cpu() for o in (out if isinstance(out, tuple) else (out,)))
    return out, [t.cpu() for t in inputs], count


def check(fn, args, monkeypatch, dispatches_with_combo, **compile_kwargs):
    """Combos give the separate kernels' bits, the CPU's values, in fewer dispatches."""
    expected_inputs = [a.clone() for a in args]
    expected = fn(*expected_inputs)
    expected = expected if isinstance(expected, tuple) else (expected,)
    out, inputs, count = run_compiled(fn, args, monkeypatch, **compile_kwargs)
    separate, separate_inputs, separate_count = run_compiled(fn, args, monkeypatch, combo=False,
                                                             **compile_kwargs)
    assert count == dispatches_with_combo, (count, separate_count)
    assert separate_count > count
    for a, b in zip(out + tuple(inputs), separate + tuple(separate_inputs)):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert torch.equal(a, b) or (a.is_floating_point() and torch.equal(a.isnan(), b.isnan())
                                     and torch.equal(a.nan_to_num(), b.nan_to_num()))
    for a, e in zip(out, expected):
        torch.testing.assert_close(a, e, atol=1e-5, rtol=1e-5)
    for a, e in zip(inputs, expected_inputs):  # (a GPU may fuse k * cos + k' * sin: not bits)
        torch.testing.assert_close(a, e, atol=1e-5, rtol=1e-5)


# ---- programs of independent outputs ---------------------------------------------------

def two_floats(a, b):
    return a.sin() * 2, (b + 1).exp()


def mixed_dtypes(a, b, c, d):
    # f16, int64, bool and 0-dim outputs, from transposed / offset views
    return ((a.t() * 3).to(torch.float16), c * 2 - 1, b[1:] > 0.5, d.sqrt(),
            torch.where(c > 0, c, -c))


def static_cache_step(k_cache, v_cache, counter, pos, qkv, cos, sin):
    """What HF's StaticCache and rope run between the qkv GEMV and attention: each
    independent of the others (9 buffers: one combo on adapters binding 10)."""
    q, k, v = qkv[:4], qkv[4:6], qkv[6:]
    k_cache.index_copy_(1, pos, k * cos + k.flip(-1) * sin)
    v_cache.index_copy_(1, pos, v)
    q_rot = q * cos - q.flip(-1) * sin
    mask = torch.arange(k_cache.shape[1], device=pos.device) <= pos
    counter.add_(1)
    return q_rot, mask


PROGRAMS = {
    "two_floats": (two_floats, lambda: [make((5, 7), torch.float32),
                                         make((13,), torch.float32, seed=1)]),
    "mixed_dtypes": (mixed_dtypes, lambda: [make((6, 4), torch.float32),
                                            make((9,), torch.float32, seed=1),
                                            make((3, 5), torch.int64, seed=2),
                                            torch.tensor(2.25)]),
    "static_cache_step": (static_cache_step, lambda: [
        torch.zeros(2, 10, 8), torch.zeros(2, 10, 8), torch.tensor(3, dtype=torch.int64),
        torch.tensor([3]), make((8, 1, 8), torch.float32), make((1, 8), torch.float32, seed=3),
        make((1, 8), torch.float32, seed=4)]),
}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_independent_kernels_are_one_dispatch(name, monkeypatch, no_fallback):
    fn, args = PROGRAMS[name]
    check(fn, args(), monkeypatch, dispatches_with_combo=1)


def test_empty_and_zero_dim_sub_kernels(monkeypatch, no_fallback):
    """An empty output is an empty range of the combo; a 0-dim one a range of one."""
    def fn(a, b, c):
        return a + 1, b * 2, c.neg()
    check(fn, [torch.empty(0, 3), make((4,), torch.float32), torch.tensor(1.5)], monkeypatch,
          dispatches_with_combo=1)


def test_all_sub_kernels_empty(monkeypatch, no_fallback):
    def fn(a, b):
        return a + 1, b * 2
    out, _, count = run_compiled(fn, [torch.empty(0), torch.empty(2, 0)], monkeypatch)
    assert count == 0 and out[0].shape == (0,) and out[1].shape == (2, 0)


def test_dependent_kernels_stay_apart(monkeypatch, no_fallback):
    """A kernel that reads another's result (through a reduction) waits for it."""
    def fn(a, b):
        s = a.sum()
        return (b * s).sin(), a.cos()
    args = [make((64,), torch.float32), make((16,), torch.float32, seed=1)]
    out, _, _ = run_compiled(fn, args, monkeypatch)
    for got, want in zip(out, fn(*args)):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_dynamic_shapes(monkeypatch, no_fallback):
    """Symbolic sizes: the ranges' ends are uniform expressions, one kernel for all sizes."""
    def fn(a, b):
        return a.sin() + 1, (b * 3).to(torch.int64)
    for n, m in [(5, 7), (9, 3), (33, 64)]:
        check(fn, [make((n, 3), torch.float32), make((m,), torch.float32, seed=1)],
              monkeypatch, dispatches_with_combo=1, dynamic=True)


def test_foreach_lists(monkeypatch, no_fallback):
    """torch._foreach_* lists (ForeachKernelSchedulerNode) run as combos too, split where
    their buffers exceed one kernel's bindings (5 adds of 3 buffers each)."""
    def fn(xs, ys):
        return tuple(torch._foreach_add(xs, ys))
    sizes = (3, 17, 300, 1, 64)
    args = [make((n,), torch.float32, seed=n) for n in sizes] + \
        [make((n,), torch.float32, seed=10 + n) for n in sizes]
    def split(*tensors):
        return fn(list(tensors[:5]), list(tensors[5:]))
    check(split, args, monkeypatch, dispatches_with_combo=2)


def test_kernel_source_names_each_sub_kernel(monkeypatch):
    """Readable WGSL: one comment per sub-kernel with its FX nodes; profiles name it."""
    from torch._inductor.utils import run_and_get_code

    monkeypatch.setenv("TORCH_WEBGPU_COMPILE_COMBO", "1")
    a, b = make((5, 7), torch.float32), make((13,), torch.float32, seed=1)
    compiled = torch.compile(two_floats)
    _, (code,) = run_and_get_code(compiled, dev(a), dev(b))
    assert "wgsl_combo_" in code and code.count("// from FX nodes:") == 2, code
    with torch.webgpu.profiler.profile() as prof:
        compiled(dev(a), dev(b))
    kernels = [r.kernel for r in prof.key_averages()]
    assert any(k.startswith("wgsl:wgsl_combo_") for k in kernels), kernels


LIMITS_RUN = """
import torch, torch_webgpu
from torch_webgpu.compiler.wgsl_codegen import max_kernel_buffers
assert max_kernel_buffers() == 8, max_kernel_buffers()
def fn(*xs):
    return tuple(x * (i + 2) for i, x in enumerate(xs))
xs = [torch.randn(5 + i) for i in range(7)]
f = torch.compile(fn)
f(*[x.to("webgpu") for x in xs])
torch_webgpu._C.synchronize()
before = torch_webgpu._C.dispatch_stats()["dispatches"]
out = f(*[x.to("webgpu") for x in xs])
torch_webgpu._C.synchronize()
print(torch_webgpu._C.dispatch_stats()["dispatches"] - before)
for o, x, i in zip(out, xs, range(7)):
    assert torch.equal(o.cpu(), x * (i + 2))
"""


def test_default_limits_split_combos():
    """Under the spec's default of 8 storage buffers, 7 kernels of 2 buffers each become
    combos of at most 3 (6 buffers and the error word's binding)."""
    run = run_python(LIMITS_RUN, timeout=300, env=dict(
        TORCH_WEBGPU_LIMITS="default", TORCH_WEBGPU_DISABLE_CPU_FALLBACK="1",
        TORCHINDUCTOR_FX_GRAPH_CACHE="0"))
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split()[-1] == "3", run.stdout


# ---- a tiny decoder's decode step ------------------------------------------------------

def decode(model, prompt, steps, device):
    """Greedy tokens of `steps` decode forwards after the prefill (HF's static cache), and
    the dispatches per decode forward on webgpu."""
    import transformers

    cache = transformers.StaticCache(config=model.config, max_cache_len=prompt.shape[1] + steps + 1)
    length = prompt.shape[1]
    with torch.no_grad():
        out = model(input_ids=prompt.to(device), past_key_values=cache, use_cache=True,
                    cache_position=torch.arange(length, device=device))
        ids = out.logits[:, -1:].argmax(-1)
        tokens, before = [], dispatches() if device == "webgpu" else 0
        for i in range(steps):
            position = torch.tensor([length + i], device=device)
            out = model(input_ids=ids, past_key_values=cache, use_cache=True,
                        cache_position=position, position_ids=position[None])
            ids = out.logits[:, -1:].argmax(-1)
            tokens.append(ids.item())
        count = (dispatches() - before) / steps if device == "webgpu" else 0
    return tokens, count


@pytest.mark.parametrize("key", ["qwen2.5", "llama-3.2-1b"])
def test_tiny_decoder_decode(key, monkeypatch, no_fallback):
    """The compiled decode step gives the CPU's greedy tokens in fewer dispatches."""
    import copy

    model = e2e_models.build_model(e2e_models.MODELS[key], tiny=True)
    prompt = e2e_models.prompt_tokens(model.config.vocab_size)
    cpu_tokens, _ = decode(model, prompt, 6, "cpu")
    assert len(set(cpu_tokens)) > 1, cpu_tokens
    counts = {}
    for combo in (True, False):
        monkeypatch.setenv("TORCH_WEBGPU_COMPILE_COMBO", "1" if combo else "0")
        torch._dynamo.reset()
        ours = torch.compile(copy.deepcopy(model).to("webgpu"))
        tokens, counts[combo] = decode(ours, prompt, 6, "webgpu")
        assert tokens == cpu_tokens, (combo, tokens, cpu_tokens)
    assert counts[True] < counts[False], counts


def test_too_many_bindings_fall_back_to_separate_kernels(monkeypatch, no_fallback):
    """Grouping estimates the bindings; where a combo's actual arguments exceed the
    adapter's limit, codegen generates its sub-kernels separately (still correct)."""
    from torch_webgpu.compiler import combo_kernels
    from torch_webgpu.compiler.wgsl_codegen import max_kernel_buffers

    monkeypatch.setattr(combo_kernels, "bound_buffers", lambda node: set())
    count = max_kernel_buffers() // 2 + 1  # kernels of 2 buffers each: one too many

    def fn(*xs):
        return tuple(x * (i + 2) for i, x in enumerate(xs))
    args = [make((5 + i,), torch.float32, seed=i) for i in range(count)]
    out, _, dispatched = run_compiled(fn, args, monkeypatch)
    assert dispatched == count
    for got, want in zip(out, fn(*args)):
        assert torch.equal(got, want)


def test_groups_never_form_a_cycle(monkeypatch, no_fallback):
    """Bicubic grid sampling with border padding schedules many pointwise kernels whose
    first-fit grouping once made two groups need each other (A, X | Y, Z with X after Y and
    Z after A): Inductor then failed with a cycle in memory planning."""
    x = make((2, 3, 5, 20), torch.float32)
    grid = make((2, 13, 10, 2), torch.float32, seed=1, low=-1.2, high=1.2)

    def fn(x, grid):
        return torch.grid_sampler_2d(x, grid, 2, 1, True)  # bicubic, border, align_corners
    out, _, _ = run_compiled(fn, [x, grid], monkeypatch)
    separate, _, _ = run_compiled(fn, [x, grid], monkeypatch, combo=False)
    assert torch.equal(out[0], separate[0])
    torch.testing.assert_close(out[0], fn(x, grid), atol=1e-5, rtol=1e-5)
