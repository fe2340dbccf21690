"""A lifetime-based static memory plan: tensors whose lifetimes do not overlap share a
pool (one device buffer each); tensors are placed greedily, largest first, into the first
pool whose tenants are all dead or not yet born while they live.

This is our own planner; ExecuTorch's is not used: it packs tensors into one arena buffer at
offsets, and WebGPU refuses a dispatch binding one buffer both read-only and writable.
"""

ALIGN = 256  # bytes: pool sizes are rounded up to it


def plan_pools(tensors):
    """tensors: list of (value_id, nbytes, first_op, last_op), ops as chain indices with
    -1 for inputs and len(chain) for outputs (inclusive ranges). Returns (placement,
    pool_sizes) with placement[value_id] = pool id (offset 0)."""
    order = sorted(tensors, key=lambda t: (-t[1], t[0]))
    pools = []  # [size, [(first, last), ...]]
    placement = {}
    for vid, nbytes, first, last in order:
        for pid, (size, spans) in enumerate(pools):
            if all(last < f or first > l for f, l in spans):
                spans.append((first, last))
                pools[pid][0] = max(size, nbytes)
                placement[vid] = pid
                break
        else:
            placement[vid] = len(pools)
            pools.append([nbytes, [(first, last)]])
    sizes = [max(ALIGN, (size + ALIGN - 1) // ALIGN * ALIGN) for size, _ in pools]
    return placement, sizes
