"""The caching pool's rounding and reuse, with exact byte counts (as CUDA's allocator tests
count its 512-byte blocks), and the peak memory of an HF generate run against the ideal:
the peak of live storage bytes of the same run on the CPU."""
import importlib.util
from pathlib import Path

import pytest
import torch

import torch_webgpu

KiB, MiB = 1 << 10, 1 << 20

# Request -> buffer: 512-byte blocks, 8 steps per octave below 1 MiB, 32 above.
ROUNDING = [
    (1, 512), (512, 512), (513, 1024), (1000, 1024), (4096, 4096), (4097, 4608),
    (100_000, 106_496), (MiB - 1, MiB), (MiB, MiB), (MiB + 1, MiB + 32 * KiB),
    (17_432_576, 17_825_792),  # Qwen2.5's 896 x 4864 fp32 MLP weight: 17 MiB
]


def _allocated_for(nbytes):
    # No cached buffers: a miss would take one up to an eighth larger (earlier tests in
    # the same worker leave some behind).
    torch.webgpu.empty_cache()
    before = torch.webgpu.memory_allocated()
    x = torch.empty(nbytes, dtype=torch.uint8, device="webgpu")
    grown = torch.webgpu.memory_allocated() - before
    segment = next(s for s in torch.webgpu.memory_snapshot()
                   if s["address"] == x.untyped_storage().data_ptr())
    return grown, segment


@pytest.mark.parametrize("nbytes,expected", ROUNDING)
def test_allocation_is_rounded_like_the_pool_says(no_gc, nbytes, expected):
    grown, segment = _allocated_for(nbytes)
    assert grown == expected
    assert segment["total_size"] == segment["allocated_size"] == expected
    assert segment["requested_size"] == nbytes


def test_zero_bytes_take_no_block(no_gc):
    before = torch.webgpu.memory_allocated()
    x = torch.empty(0, device="webgpu")
    y = torch.empty((3, 0), device="webgpu")[:, :0]
    assert torch.webgpu.memory_allocated() == before
    assert x.numel() == y.numel() == 0


def test_scalar_takes_one_block(no_gc):
    before = torch.webgpu.memory_allocated()
    x = torch.tensor(2.5, device="webgpu")
    assert x.dim() == 0
    assert torch.webgpu.memory_allocated() - before == 512


def test_growing_tensor_reuses_its_predecessors_buffer(no_gc):
    # A KV cache grows by one token per step (torch.cat into a new tensor): the next
    # step's request falls in the bucket the step before freed, so no buffer is created.
    torch.webgpu.empty_cache()
    cache = torch.zeros(2, 64, 200, device="webgpu")  # 102,400 bytes: bucket 106,496
    step = torch.ones(2, 64, 1, device="webgpu")
    cache = torch.cat([cache, step], dim=-1)  # the first grown one needs a new buffer
    made = torch.webgpu.memory_stats()["segment.all.allocated"]
    reserved = torch.webgpu.memory_reserved()
    for _ in range(6):  # 102,912 .. 105,472 bytes: all in bucket 106,496
        cache = torch.cat([cache, step], dim=-1)
    assert torch.webgpu.memory_stats()["segment.all.allocated"] == made
    assert torch.webgpu.memory_reserved() == reserved
    assert torch.equal(cache.cpu()[:, :, 200:], torch.ones(2, 64, 7))


def test_cached_buffer_an_eighth_larger_is_reused_and_counted_whole(no_gc):
    torch.webgpu.empty_cache()
    before = torch.webgpu.memory_allocated()
    x = torch.empty(17_825_792, dtype=torch.uint8, device="webgpu")  # 17 MiB: its own bucket
    del x
    made = torch.webgpu.memory_stats()["segment.all.allocated"]
    # 16,000,000 bytes: bucket 16,252,928; the cached 17 MiB buffer is within an eighth.
    y = torch.empty(16_000_000, dtype=torch.uint8, device="webgpu")
    assert torch.webgpu.memory_stats()["segment.all.allocated"] == made
    assert torch.webgpu.memory_allocated() - before == 17_825_792
    del y
    # 15,000,000 bytes: bucket 15,204,352, more than an eighth below 17 MiB: a new buffer.
    z = torch.empty(15_000_000, dtype=torch.uint8, device="webgpu")
    assert torch.webgpu.memory_stats()["segment.all.allocated"] == made + 1
    assert torch.webgpu.memory_allocated() - before == 15_204_352
    z.fill_(7)
    assert int(z[-1].item()) == 7
    del z
    torch.webgpu.empty_cache()


def test_views_and_strides_count_their_storage_once(no_gc):
    before = torch.webgpu.memory_allocated()
    base = torch.arange(3000, dtype=torch.float32, device="webgpu")  # 12,000 bytes
    views = [base[7:], base.view(30, 100).t(), base[::3], base.as_strided((10, 10), (1, 50), 5)]
    assert torch.webgpu.memory_allocated() - before == 12_288
    assert torch.equal(views[1].cpu(), torch.arange(3000.0).view(30, 100).t())
    copy = views[1].contiguous()  # a new storage of the same 12,000 bytes
    assert torch.webgpu.memory_allocated() - before == 2 * 12_288
    del copy, views, base
    assert torch.webgpu.memory_allocated() == before


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int64,
                                   torch.int32, torch.int8, torch.uint8, torch.bool])
def test_rounding_is_by_bytes_for_every_dtype(no_gc, dtype):
    n = 1001  # 1001, 2002, 4004 or 8008 bytes: 2, 4, 8 or 16 blocks of 512
    expected = {1: 1024, 2: 2048, 4: 4096, 8: 8192}[torch.empty(0, dtype=dtype).element_size()]
    before = torch.webgpu.memory_allocated()
    x = torch.zeros(n, dtype=dtype, device="webgpu")
    assert torch.webgpu.memory_allocated() - before == expected
    assert torch.equal(x.cpu(), torch.zeros(n, dtype=dtype))


# ---- Peak memory of HF generate against the CPU-tracked ideal ----

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "generate_memory.py"


def _script():
    spec = importlib.util.spec_from_file_location("generate_memory", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generate_peak_is_within_a_tenth_of_the_ideal(no_gc):
    # Qwen2.5's widths (896 hidden, 4864 MLP, 2 KV heads) at one layer and a 20,000-token
    # vocabulary: odd sizes that four buckets per octave rounded up by 22%.
    pytest.importorskip("transformers")
    gm = _script()
    model = gm.build("qwen2.5", layers=1, vocab_size=20_000)
    prompt = gm.e2e_models.prompt_tokens(model.config.vocab_size, 64)
    ideal, cpu_tokens = gm.cpu_ideal(model, prompt, 4)
    peaks, tokens = gm.webgpu_peaks(model, prompt, 4)
    assert tokens == cpu_tokens
    # No webgpu-only temporaries at the peak: the live tensors' exact bytes match the CPU's.
    assert peaks["requested"] <= 1.01 * ideal, (peaks, ideal)
    assert peaks["allocated"] <= 1.1 * ideal, (peaks, ideal)


def test_free_buffers_are_handed_out_by_address_so_bind_groups_repeat(no_gc):
    # The same ops each step, their temporaries freed in an order that changes from step
    # to step (as Python's reference drops do): which free buffer an allocation gets must
    # depend only on which are free, so from the second step on every kernel finds the
    # bind group it made before (a stack of freed buffers handed them out permuted).
    x = torch.arange(64, dtype=torch.float32).reshape(8, 8)
    dx = x.to("webgpu")
    made = []
    outs = []
    for step in range(8):
        before = torch_webgpu._C.dispatch_stats()["bind_groups_made"]
        t1 = dx + 1
        t2 = dx * 2
        t3 = t1 - t2
        t4 = t3.relu()
        out = t4 * 3 + t1
        if step % 2:
            del t1, t2, t3, t4
        else:
            del t4, t2, t3, t1
        outs.append(out)
        del out
        outs.pop().cpu()  # read back, then freed: the steps stay alike
        made.append(torch_webgpu._C.dispatch_stats()["bind_groups_made"] - before)
    assert made[2:] == [0] * 6, made
    expected = ((x + 1) - x * 2).relu() * 3 + (x + 1)
    result = ((dx + 1) - dx * 2).relu() * 3 + (dx + 1)
    assert torch.equal(result.cpu(), expected)


def _grow_caches(steps, layers=6):
    # A dynamic KV cache: each layer's K grows by one position per step through torch.cat.
    cpu = [torch.randn(1, 12, 8, 64) for _ in range(layers)]
    step = torch.randn(1, 12, 1, 64)
    dev, dstep = [c.to("webgpu") for c in cpu], step.to("webgpu")
    torch.webgpu.empty_cache()
    made = torch.webgpu.memory_stats()["segment.all.allocated"]
    for _ in range(steps):
        cpu = [torch.cat([c, step], dim=2) for c in cpu]
        dev = [torch.cat([c, dstep], dim=2) for c in dev]
    made = torch.webgpu.memory_stats()["segment.all.allocated"] - made
    for c, d in zip(cpu, dev):
        assert torch.equal(d.cpu(), c)
    held = sum(s["total_size"] for s in torch.webgpu.memory_snapshot()
               if s["active_size"] and s["requested_size"] == dev[0].nbytes)
    return made, held, dev[0].nbytes * layers


@pytest.mark.parametrize("headroom", [0.5, 1.0])
def test_growing_caches_get_headroom_and_make_fewer_buffers(no_gc, headroom):
    # Without headroom each cache outgrows its bucket every 1-3 steps here (8 steps per
    # octave), a new buffer (and new bind groups) each time; with it, every few steps.
    before = torch_webgpu._C.set_alloc_growth(0.0)  # (whatever the environment set)
    try:
        torch.webgpu.memory._set_allocator_settings("growth_headroom:0")
        plain, plain_held, live = _grow_caches(32)
        torch.webgpu.memory._set_allocator_settings(f"growth_headroom:{headroom}")
        roomy, roomy_held, _ = _grow_caches(32)
    finally:
        torch_webgpu._C.set_alloc_growth(before)
    assert roomy * 2 <= plain, (roomy, plain)
    # The live caches hold at most the headroom more than their buckets would.
    assert plain_held >= live
    assert roomy_held <= (1 + headroom) * 1.13 * live, (roomy_held, live)


def test_allocator_settings_reject_unknown_options():
    with pytest.raises(RuntimeError, match="Unrecognized CachingAllocator option"):
        torch.webgpu.memory._set_allocator_settings("expandable_segments:True")
    with pytest.raises(RuntimeError, match="expects a number"):
        torch.webgpu.memory._set_allocator_settings("growth_headroom:lots")
    with pytest.raises(ValueError, match="between 0 and 4"):
        torch.webgpu.memory._set_allocator_settings("growth_headroom:-1")
    before = torch_webgpu._C.set_alloc_growth(0.0)
    torch.webgpu.memory._set_allocator_settings(f"growth_headroom:{before}")  # still works after
    assert torch_webgpu._C.set_alloc_growth(before) == before
    assert torch.equal(torch.ones(3, device="webgpu").cpu(), torch.ones(3))
