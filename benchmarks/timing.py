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


def phases_us(fn, device, reps=5, inner=10):
    """Microseconds per call of fn spent (issue) returning from the calls and (drain) in the
    synchronize after them, from the batch of `inner` calls with the smallest sum of the two.
    CUDA starts each kernel when it is issued, so its drain is what the GPU still had to do;
    a device that submits its recorded work later shows the GPU's whole time in the drain."""
    fn()
    sync(device)
    best = (float("inf"), 0.0, 0.0)
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        t1 = time.perf_counter()
        sync(device)
        t2 = time.perf_counter()
        if t2 - t0 < best[0]:
            best = (t2 - t0, (t1 - t0) / inner * 1e6, (t2 - t1) / inner * 1e6)
    return best[1], best[2]


def kernel_us(fn, device, calls=10):
    """GPU time of the kernels (and device copies) one call of fn runs, us: the mean over
    `calls` calls, from timestamp queries (ours: torch.webgpu.profiler, each dispatch in a
    pass of its own) or CUPTI (torch.profiler). Without the host's issue time and the
    synchronize, so beside the wall-clock figure it says whether a row is bound by its
    kernels or by what surrounds them. None where the adapter has no timestamp queries."""
    fn()
    sync(device)
    if device == "webgpu":
        from torch_webgpu import profiler
        if not torch.webgpu.get_device_properties().timestamp_query:
            return None
        with profiler.profile("gpu") as p:
            for _ in range(calls):
                fn()
            sync(device)
        return sum(e.duration_us for e in p.events()) / calls
    with cuda_kernel_profile() as p:
        for _ in range(calls):
            fn()
        sync(device)
    return sum(cuda_kernel_times(p).values()) / calls


def cuda_kernel_profile():
    """torch.profiler over CUDA's device activity (kernels, copies, fills)."""
    from torch.profiler import ProfilerActivity, profile
    # acc_events: torch 2.11's profiler otherwise drops the events when the block ends.
    return profile(activities=[ProfilerActivity.CUDA], acc_events=True)


def cuda_device_events(prof):
    """The device-side events (kernels, copies, fills) of a finished cuda_kernel_profile().
    With torch_webgpu imported, torch.profiler files CUDA's kernels under PrivateUse1 (its
    kineto layer does so for any renamed PrivateUse1 backend): every event not on the CPU
    counts."""
    return [e for e in prof.events() if e.device_type != torch.autograd.DeviceType.CPU]


def cuda_kernel_times(prof):
    """{kernel name: total us on the device} of a finished cuda_kernel_profile()."""
    out = {}
    for e in cuda_device_events(prof):
        out[e.name] = out.get(e.name, 0.0) + e.time_range.elapsed_us()
    return out
