"""Captured graphs pointed at other tensors (`_Graph.rebind`, what torch.compile's replay
uses when HF generate hands it a new KV cache of a seen shape): the replay then reads and
writes the new tensors, against the same computation on the CPU; moves that do not fit are
refused and leave the graph as it was."""
import gc

import pytest
import torch

import torch_webgpu  # noqa: F401
from conftest import DEVICE


def capture_update(cache, x):
    """A graph that reads `cache` and writes it in place (a KV-cache step) and `out`."""
    g = torch.webgpu.WebGPUGraph()
    torch.webgpu.synchronize()
    with torch.webgpu.graph(g):
        out = cache * 2 + x
        cache.add_(x)
    return g, out


def moves(old, new):
    return [(a.data_ptr(), b.data_ptr()) for a, b in zip(old, new)]


@pytest.mark.parametrize("shape", [(6,), (3, 5), (2, 3, 16, 8), ()])
def test_rebind_to_a_new_tensor_after_the_old_one_is_freed(no_fallback, shape):
    x_cpu = torch.randn(shape)
    x = x_cpu.to(DEVICE)
    old = torch.zeros(shape, device=DEVICE)
    g, out = capture_update(old, x)
    old_address = old.data_ptr()
    del old
    gc.collect()
    new_cpu = torch.randn(shape)
    new = new_cpu.to(DEVICE)
    assert g._graph.rebind([(old_address, new.data_ptr())])
    for _ in range(2):
        g.replay()
        expected = new_cpu * 2 + x_cpu
        new_cpu = new_cpu + x_cpu
        torch.testing.assert_close(out.cpu(), expected)
        torch.testing.assert_close(new.cpu(), new_cpu)


def test_rebind_of_a_permutation_of_freed_blocks(no_fallback):
    """A new cache may get the old one's blocks in another order: the moves apply together."""
    a, b = torch.zeros(64, device=DEVICE), torch.ones(64, device=DEVICE)
    g = torch.webgpu.WebGPUGraph()
    torch.webgpu.synchronize()
    with torch.webgpu.graph(g):
        a.add_(1)
        b.mul_(3)
    addresses = [a.data_ptr(), b.data_ptr()]
    del a, b
    gc.collect()
    c, d = torch.full((64,), 5.0, device=DEVICE), torch.full((64,), 7.0, device=DEVICE)
    assert g._graph.rebind([(addresses[0], c.data_ptr()), (addresses[1], d.data_ptr())])
    g.replay()
    torch.testing.assert_close(c.cpu(), torch.full((64,), 6.0))
    torch.testing.assert_close(d.cpu(), torch.full((64,), 21.0))


def test_identity_rebind_refreshes_a_freed_and_reused_block(no_fallback):
    """The old tensor freed and its block handed to a new one at the same address: replay
    refuses (the tensor was freed), a rebind onto the same address accepts the new tensor."""
    x = torch.ones(32, device=DEVICE)
    old = torch.zeros(32, device=DEVICE)
    g, out = capture_update(old, x)
    address = old.data_ptr()
    del old
    gc.collect()
    candidates = [torch.full((32,), 4.0, device=DEVICE) for _ in range(8)]
    same = [t for t in candidates if t.data_ptr() == address]
    if not same:
        pytest.skip("the pool handed the freed block to no new tensor of this size")
    with pytest.raises(RuntimeError, match="was freed"):
        g.replay()
    assert g._graph.rebind([(address, address)])
    g.replay()
    torch.testing.assert_close(out.cpu(), torch.full((32,), 9.0))
    torch.testing.assert_close(same[0].cpu(), torch.full((32,), 5.0))


def test_refused_moves_leave_the_graph_as_it_was(no_fallback):
    x = torch.ones(16, device=DEVICE)
    old = torch.zeros(16, device=DEVICE)
    g, out = capture_update(old, x)
    new = torch.zeros(16, device=DEVICE)
    # The captured tensor is still alive: it keeps its graph.
    assert not g._graph.rebind(moves([old], [new]))
    address = old.data_ptr()
    del old
    gc.collect()
    other = torch.zeros(17, device=DEVICE)
    refused = [
        [(address, new.data_ptr() + 4)],          # another offset in its buffer
        [(address, torch.zeros(2, device=DEVICE).data_ptr())],  # smaller than the old tensor
        [(address, x.data_ptr())],                # a tensor the graph already reads
        [(address, out.data_ptr())],              # a block of the graph's own pool
        [(x.data_ptr() + (1 << 40), new.data_ptr())],  # no buffer of the graph there
        [(address, new.data_ptr()), (x.data_ptr(), new.data_ptr())],  # two onto one
    ]
    for bad in refused:
        assert not g._graph.rebind(bad), bad
    del other
    # Still bound to nothing alive: replay refuses; a fitting move then works.
    with pytest.raises(RuntimeError, match="was freed"):
        g.replay()
    assert g._graph.rebind([(address, new.data_ptr())])
    g.replay()
    torch.testing.assert_close(out.cpu(), torch.ones(16))
    torch.testing.assert_close(new.cpu(), torch.ones(16))


def test_tensors_the_graph_never_binds_need_no_move(no_fallback):
    x = torch.ones(16, device=DEVICE)
    cache = torch.zeros(16, device=DEVICE)
    g, out = capture_update(cache, x)
    unrelated = torch.zeros(16, device=DEVICE)
    address = unrelated.data_ptr()
    del unrelated
    gc.collect()
    new = torch.zeros(16, device=DEVICE)
    assert g._graph.rebind([(address, new.data_ptr())])
    g.replay()  # still the captured cache
    torch.testing.assert_close(cache.cpu(), torch.ones(16))
    torch.testing.assert_close(new.cpu(), torch.zeros(16))


def test_rebind_needs_a_captured_graph():
    g = torch.webgpu.WebGPUGraph()
    with pytest.raises(RuntimeError, match="needs a captured graph"):
        g._graph.rebind([])
