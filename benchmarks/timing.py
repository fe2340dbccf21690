"""Timing shared by the benchmarks that compare the webgpu device with CUDA."""
import time

import torch


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()
    else:
        torch.webgpu.synchronize()


def empty_cache(device):
    """Gives the device's cached allocations back (the next ones are new)."""
    if device == "cuda":
        torch.cuda.empty_cache()
    else:
        torch.webgpu.empty_cache()


def best_ms(fn, device, reps=5, inner=10, warmup_s=0.2, clock=time.perf_counter):
    """Milliseconds per call of fn on device: the best of `reps` batches of `inner` calls,
    each ended by a synchronize, after `warmup_s` seconds of calls (a GPU idle a moment ago
    runs at low clocks; short bursts would measure the ramp-up, on either device).
    clock=time.process_time counts this process's CPU seconds instead of wall time: on a
    software adapter (whose threads run in this process) that is the kernels' work, which
    other load on a shared machine does not inflate."""
    start = time.perf_counter()
    while time.perf_counter() - start < warmup_s:
        fn()
        sync(device)
    best = float("inf")
    for _ in range(reps):
        start = clock()
        for _ in range(inner):
            fn()
        sync(device)
        best = min(best, (clock() - start) / inner)
    return best * 1e3
