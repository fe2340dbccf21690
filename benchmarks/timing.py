"""Timing shared by the benchmarks that compare the webgpu device with CUDA."""
import time

import torch


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()
    else:
        torch.webgpu.synchronize()


def best_ms(fn, device, reps=5, inner=10, warmup_s=0.2):
    """Milliseconds per call of fn on device: the best of `reps` batches of `inner` calls,
    each ended by a synchronize, after `warmup_s` seconds of calls (a GPU idle a moment ago
    runs at low clocks; short bursts would measure the ramp-up, on either device)."""
    start = time.perf_counter()
    while time.perf_counter() - start < warmup_s:
        fn()
        sync(device)
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        sync(device)
        best = min(best, (time.perf_counter() - start) / inner)
    return best * 1e3
