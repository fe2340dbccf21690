"""torch.webgpu.memory (shaped like torch.cuda.memory): mem_get_info, memory_summary, the
per-process memory fraction, the cached/max aliases and resets, compared with
memory_stats, torch.accelerator and the operating system."""
import os

import pytest
import torch

import torch_webgpu  # noqa: F401

MiB = 1 << 20


@pytest.fixture
def no_limit_after():
    yield
    torch.webgpu.set_per_process_memory_fraction(1.0)


def test_memory_submodule_is_reexported():
    import torch.webgpu.memory as mem

    assert mem is torch.webgpu.memory
    for name in mem.__all__:
        assert getattr(torch.webgpu, name) is getattr(mem, name), name


def test_mem_get_info():
    torch.webgpu.init()
    free, total = torch.webgpu.mem_get_info()
    assert 0 < free <= total
    info = torch_webgpu._C.mem_get_info()
    assert info["source"] in ("adapter", "system")
    if info["source"] == "system":
        assert total == os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGESIZE")
    else:
        assert free == total - torch.webgpu.memory_reserved()
    acc_free, acc_total = torch.accelerator.get_memory_info()
    assert acc_total == total
    assert 0 < acc_free <= acc_total


def test_stats_aliases_and_accelerator_agree(no_gc):
    x = torch.ones(3 * MiB // 4, device="webgpu")  # 3 MiB
    stats = torch.webgpu.memory_stats()
    assert stats["allocated_bytes.all.current"] == torch.webgpu.memory_allocated()
    assert stats["reserved_bytes.all.current"] == torch.webgpu.memory_reserved()
    assert stats["allocated_bytes.all.peak"] == torch.webgpu.max_memory_allocated()
    assert torch.webgpu.memory_cached() == torch.webgpu.memory_reserved()
    assert torch.webgpu.max_memory_cached() == torch.webgpu.max_memory_reserved()
    assert torch.accelerator.memory_allocated() == torch.webgpu.memory_allocated()
    assert torch.accelerator.memory_reserved() == torch.webgpu.memory_reserved()
    assert torch.webgpu.memory_allocated() >= x.numel() * 4
    del x


def test_reset_max_and_accumulated(no_gc):
    keep = torch.ones(1000, device="webgpu")
    live = torch.webgpu.memory_stats()
    torch.webgpu.reset_accumulated_memory_stats()
    stats = torch.webgpu.memory_stats()
    # Live counts are not running totals: a reset leaves them as they were.
    for key in ("allocation.all.current", "segment.all.current", "allocated_bytes.all.current"):
        assert stats[key] == live[key] >= 1, key
    for key in ("allocation.all.allocated", "allocation.all.freed",
                "allocated_bytes.all.allocated", "allocated_bytes.all.freed", "num_ooms"):
        assert stats[key] == 0, key
    before = torch.webgpu.memory_allocated()
    x = torch.empty(5 * MiB // 4, device="webgpu")  # 5 MiB: its own bucket
    grown = torch.webgpu.memory_allocated() - before
    assert grown >= x.numel() * 4
    stats = torch.webgpu.memory_stats()
    assert stats["allocation.all.allocated"] == 1
    assert stats["allocated_bytes.all.allocated"] == grown
    del x
    stats = torch.webgpu.memory_stats()
    assert stats["allocation.all.freed"] == 1
    assert stats["allocated_bytes.all.freed"] == grown
    assert torch.webgpu.max_memory_allocated() >= before + grown
    torch.webgpu.reset_max_memory_allocated()
    assert torch.webgpu.max_memory_allocated() == torch.webgpu.memory_allocated()
    torch.webgpu.reset_max_memory_cached()
    assert torch.webgpu.max_memory_reserved() == torch.webgpu.memory_reserved()
    assert keep.sum().item() == 1000


def test_memory_summary_table():
    x = torch.ones(1 << 18, device="webgpu")  # 1 MiB
    text = torch.webgpu.memory_summary()
    assert "torch.webgpu memory summary" in text
    lines = text.splitlines()
    assert len({len(line) for line in lines}) == 1  # a rectangular table
    row = next(line for line in lines if line.startswith("| Allocated memory"))
    current = torch.webgpu.memory_allocated()
    cell = row.split("|")[2].strip()
    value, unit = cell.split()
    scale = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[unit]
    assert float(value) * scale == pytest.approx(current, rel=0.01)
    count_row = next(line for line in lines if line.startswith("| Allocations"))
    assert int(count_row.split("|")[2]) == torch.webgpu.memory_stats()["allocation.all.current"]
    del x


def test_memory_fraction_is_enforced(no_limit_after):
    assert torch.webgpu.get_per_process_memory_fraction() == 1.0
    torch.webgpu.empty_cache()
    _, total = torch.webgpu.mem_get_info()
    reserved = torch.webgpu.memory_reserved()
    fraction = (reserved + 8 * MiB) / total
    torch.webgpu.set_per_process_memory_fraction(fraction)
    assert torch.webgpu.get_per_process_memory_fraction() == fraction
    ooms = torch.webgpu.memory_stats()["num_ooms"]
    small = torch.ones(MiB, device="webgpu")  # 4 MiB: fits
    assert small.sum().item() == MiB
    with pytest.raises(torch.OutOfMemoryError, match="set_per_process_memory_fraction"):
        torch.empty(2 * MiB, device="webgpu")  # 8 MiB more: past the limit
    assert torch.webgpu.memory_stats()["num_ooms"] == ooms + 1
    # Cached buffers count, and are given back before refusing: free the small tensor,
    # then an allocation that fits only without the cached buffer succeeds.
    del small
    assert torch.webgpu.memory_reserved() >= reserved + 4 * MiB
    big = torch.zeros(7 * MiB // 4, device="webgpu")  # 7 MiB
    assert torch.webgpu.memory_reserved() <= reserved + 8 * MiB
    assert big.sum().item() == 0
    del big
    torch.webgpu.set_per_process_memory_fraction(1.0)
    ok = torch.empty(2 * MiB, device="webgpu")
    assert ok.numel() == 2 * MiB


def test_memory_fraction_bad_arguments():
    with pytest.raises(TypeError):
        torch.webgpu.set_per_process_memory_fraction(1)
    with pytest.raises(ValueError):
        torch.webgpu.set_per_process_memory_fraction(1.5)
    with pytest.raises(ValueError):
        torch.webgpu.set_per_process_memory_fraction(-0.1)
    with pytest.raises(ValueError):
        torch.webgpu.mem_get_info("cpu")
    assert torch.webgpu.get_per_process_memory_fraction() == 1.0


def test_memory_snapshot_lists_live_and_cached_buffers(no_gc):
    torch.webgpu.empty_cache()
    x = torch.empty(1000, device="webgpu")  # 4000 bytes requested
    y = torch.empty(3, 5, device="webgpu")
    addr_x = x.untyped_storage().data_ptr()
    snap = torch.webgpu.memory_snapshot()
    by_addr = {s["address"]: s for s in snap}
    seg = by_addr[addr_x]
    assert seg["requested_size"] == 4000 and seg["total_size"] >= 4000
    assert seg["blocks"][0]["state"] == "active_allocated"
    assert seg["allocated_size"] == seg["total_size"]
    assert by_addr[y.untyped_storage().data_ptr()]["requested_size"] == 60
    # The pool's statistics and the snapshot agree.
    assert sum(s["allocated_size"] for s in snap) == torch.webgpu.memory_allocated()
    assert sum(s["total_size"] for s in snap) == torch.webgpu.memory_reserved()
    del x
    snap = torch.webgpu.memory_snapshot()
    cached = [s for s in snap if s["address"] == addr_x]
    assert cached and cached[0]["blocks"][0]["state"] == "inactive"
    assert cached[0]["allocated_size"] == 0
    torch.webgpu.empty_cache()
    assert addr_x not in {s["address"] for s in torch.webgpu.memory_snapshot()}
    del y
