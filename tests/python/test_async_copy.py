"""Copies to the host with non_blocking=True (as CUDA's into pinned memory): queued without
waiting for the device, their bytes in place once an event recorded after them completes,
the device is synchronized or any blocking read-back happens; and transformers' deferred
stop check, which needs them (torch_webgpu.generation.defer_stop_check)."""
import pytest
import torch

import torch_webgpu  # noqa: F401
import torch_webgpu.generation
from test_e2e_models import e2e_models

DEVICE = "webgpu"


def settled_by_event(dst):
    event = torch.Event(device=torch.device(DEVICE))
    event.record()
    event.synchronize()
    return dst


def settled_by_query(dst):
    event = torch.Event(device=torch.device(DEVICE))
    event.record()
    while not event.query():
        pass
    return dst


def settled_by_synchronize(dst):
    torch.webgpu.synchronize()
    return dst


def settled_by_a_read_back(dst):
    torch.ones(3, device=DEVICE).sum().item()  # a blocking read after the copy
    return dst


SETTLE = [settled_by_event, settled_by_query, settled_by_synchronize, settled_by_a_read_back]


@pytest.mark.parametrize("settle", SETTLE)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.bool, torch.uint8])
def test_values_arrive_by_each_sync_point(settle, dtype):
    src_cpu = (torch.arange(11) * 3 % 7).to(dtype)
    src = src_cpu.to(DEVICE)
    # Offsets not on 4 bytes (one-byte dtypes) and a 0-dim element, as HF's stop flag.
    for piece, expected in [(src, src_cpu), (src[3:10], src_cpu[3:10]), (src[5], src_cpu[5])]:
        dst = torch.zeros(expected.shape, dtype=dtype)
        dst.copy_(piece, non_blocking=True)
        torch.testing.assert_close(settle(dst), expected)


def test_copy_does_not_wait_for_the_device():
    """The bytes come at a sync point, not in copy_ (which only queued the read)."""
    src = torch.full((64,), 7.0, device=DEVICE)
    dst = torch.zeros(64)
    dst.copy_(src * 2, non_blocking=True)
    assert (dst == 0).all()
    torch.webgpu.synchronize()
    assert (dst == 14).all()


def test_strided_source_and_destination():
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    src = base.to(DEVICE)
    dst = torch.zeros(6, 4)
    dst.copy_(src.t(), non_blocking=True)  # strided source: a device copy, then the read
    torch.testing.assert_close(settled_by_event(dst), base.t().contiguous())
    out = torch.zeros(4, 12)[:, ::2]  # strided destination: read, then a host copy
    out.copy_(src, non_blocking=True)
    torch.testing.assert_close(settled_by_synchronize(out), base)


def test_to_cpu_non_blocking_and_empty():
    x = torch.randn(5, 3)
    y = (x.to(DEVICE) + 1).to("cpu", non_blocking=True)
    torch.testing.assert_close(settled_by_synchronize(y), x + 1)
    empty = torch.zeros(0)
    empty.copy_(torch.zeros(0, device=DEVICE), non_blocking=True)
    assert settled_by_event(empty).shape == (0,)


def test_many_reads_in_flight_arrive_in_order():
    src = torch.arange(100, dtype=torch.float32, device=DEVICE)
    dsts = [torch.zeros(10) for _ in range(20)]
    for i, dst in enumerate(dsts):
        dst.copy_(src[i:i + 10] + i, non_blocking=True)
    settled_by_event(dsts[-1])
    for i, dst in enumerate(dsts):
        torch.testing.assert_close(dst, torch.arange(i, i + 10, dtype=torch.float32) + i)


def test_staging_buffers_reused_across_sizes_keep_each_reads_bytes():
    # Finished reads hand their staging buffers to later ones (a buffer at least the size
    # needed): bytes must never leak from an earlier, longer read, and reads over the kept
    # size (1 MiB) take buffers of their own.
    sizes = [1, 3, 1000, 7, 64, 300_000, 2, 70_000, 1]
    for round_ in range(3):
        dsts = []
        for i, n in enumerate(sizes):
            src = torch.full((n,), float(round_ * 100 + i), device=DEVICE)
            dst = torch.empty(n)
            dst.copy_(src, non_blocking=True)
            dsts.append(dst)
        settle = settled_by_event if round_ % 2 else settled_by_a_read_back
        settle(dsts[-1])
        for i, (n, dst) in enumerate(zip(sizes, dsts)):
            torch.testing.assert_close(dst, torch.full((n,), float(round_ * 100 + i)))


def test_refused_inside_graph_capture():
    x = torch.randn(4, device=DEVICE)
    dst = torch.zeros(4)
    with pytest.raises(RuntimeError, match="needs the host during capture"):
        with torch.webgpu.graph(torch.webgpu.WebGPUGraph()):
            dst.copy_(x * 2, non_blocking=True)
    assert not torch.webgpu.is_current_stream_capturing()
    dst.copy_(x * 2, non_blocking=True)
    torch.testing.assert_close(settled_by_synchronize(dst), x.cpu() * 2)


# ---- transformers' deferred stop check ----------------------------------------------------

@pytest.fixture
def deferred():
    from transformers.generation import utils

    if not torch_webgpu.generation.defer_stop_check():
        pytest.fail("this transformers has no DeferredStopCheck")  # (the pinned one has)
    calls = []
    original = utils.DeferredStopCheck.__call__
    utils.DeferredStopCheck.__call__ = lambda self, *a, **k: calls.append(1) or original(self, *a, **k)
    yield calls
    utils.DeferredStopCheck.__call__ = original
    torch_webgpu.generation.defer_stop_check(())


@pytest.mark.parametrize("cache", [None, "static"])
def test_generate_with_deferred_stop_gives_the_cpus_tokens(deferred, cache):
    model = e2e_models.build_model(e2e_models.MODELS["qwen2.5"], tiny=True)
    prompt = e2e_models.prompt_tokens(model.config.vocab_size)
    kwargs = {"cache_implementation": cache} if cache else {}
    expected = e2e_models.greedy(model, prompt, 8, "cpu", timed=False, **kwargs)["tokens"]
    assert not deferred  # (the CPU keeps transformers' own check)
    ours = e2e_models.greedy(model.to(DEVICE), prompt, 8, DEVICE, timed=False, **kwargs)["tokens"]
    assert deferred, "generate did not take the deferred stop check on webgpu"
    assert ours == expected


def test_restoring_transformers_choice():
    from transformers.generation import utils

    assert torch_webgpu.generation.defer_stop_check()
    assert utils.DeferredStopCheck.is_supported(torch.device(DEVICE), None, False, False)
    assert torch_webgpu.generation.defer_stop_check(())
    assert not utils.DeferredStopCheck.is_supported(torch.device(DEVICE), None, False, False)
    assert not utils.DeferredStopCheck.is_supported(torch.device("cpu"), None, False, False)
