"""Checks torch.webgpu.profiler's GPU-timestamp path on a GPU with `timestamp-query`
(NVIDIA H200 through Dawn's Vulkan backend). Prints PASS/FAIL lines and the figures.

    PYTHONPATH=python python3 scripts/h200/check_profiler.py
    (--host: a dry run of the same steps in host timing with small sizes, for llvmpipe)

1. The device has timestamp-query and profile() picks GPU timing.
2. A GPU-bound region (large matmuls and pointwise ops): every dispatch has a positive
   GPU time, and the GPU times sum to about the wall time of the synchronized region
   (the region waits between batches while profiling, so GPU idle is small).
3. Timestamps are not quantized to 65.536 us (Dawn's default unless its toggle is off):
   small kernels show times that are not multiples of 65536 ns.
4. Results equal the unprofiled run's; the Chrome trace loads as JSON.
5. torch.profiler with ProfilerActivity.PrivateUse1 lists the kernels (Kineto plugin).
"""
import json
import sys
import tempfile
import time

import torch

import torch_webgpu

failures = 0


def report(ok, what, detail=""):
    global failures
    failures += 0 if ok else 1
    print(f"{'PASS' if ok else 'FAIL'}: {what}" + (f" ({detail})" if detail else ""), flush=True)


def main(host):
    props = torch.webgpu.get_device_properties()
    print(f"adapter: {props.name} ({props.backend}), timestamp_query={props.timestamp_query}")
    timing = "host" if host else "gpu"
    if not host:
        report(props.timestamp_query, "adapter has timestamp-query")
        if not props.timestamp_query:
            return

    n = 256 if host else 4096
    g = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, generator=g).to("webgpu")
    b = torch.randn(n, n, generator=g).to("webgpu")

    def region():
        c = torch.mm(a, b)
        for _ in range(3):
            c = torch.mm(torch.relu(c) * 1e-3, b)
        return torch.softmax(c, dim=-1)

    plain = region()  # warm-up: pipelines built, memory pooled
    torch.webgpu.synchronize()

    with torch.webgpu.profiler.profile(timing=timing) as prof:
        start = time.perf_counter()
        out = region()
        torch.webgpu.synchronize()
        wall_us = (time.perf_counter() - start) * 1e6
    report(prof.timing == timing, f"profile() uses {timing} timing", prof.timing)
    print(prof.table(sort_by="gpu_time", row_limit=15))

    events = prof.events()
    report(len(events) > 0 and all(e.duration_us > 0 for e in events),
           f"every dispatch has a positive {timing} time", f"{len(events)} dispatches")
    ratio = prof.total_us / wall_us
    report((0.7 if not host else 0.1) <= ratio <= 1.02, "dispatch times sum to about the region's wall time",
           f"{timing} {prof.total_us:.0f} us, wall {wall_us:.0f} us, ratio {ratio:.3f}")
    mm_us = sum(r.total_us for r in prof.key_averages() if r.op == "aten::mm")
    flops = 4 * 2 * n ** 3
    print(f"aten::mm {timing} time {mm_us:.0f} us -> {flops / mm_us / 1e6:.1f} TFLOP/s")
    ordered = all(x.end_us <= y.start_us + 1.0 for x, y in zip(events, events[1:]))
    report(ordered, "dispatch intervals follow each other on the GPU track")

    if not host:
        x = torch.randn(1000, generator=g).to("webgpu")
        with torch.webgpu.profiler.profile() as small:
            for _ in range(200):
                x = x * 1.0001
        ns = [round(e.duration_us * 1000) for e in small.events()]
        quantized = all(t % 65536 == 0 for t in ns)
        report(not quantized, "timestamps are not quantized to 65.536 us",
               f"median small-kernel time {sorted(ns)[len(ns) // 2]} ns")

    report(torch.equal(out.cpu(), plain.cpu()), "profiled results equal unprofiled results")
    with tempfile.NamedTemporaryFile("w+", suffix=".json") as f:
        prof.export_chrome_trace(f.name)
        trace = json.load(open(f.name))
    kernels = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
    report(len(kernels) == len(events), "Chrome trace holds every dispatch", f.name)

    # torch.profiler with ProfilerActivity.PrivateUse1 (the Kineto plugin, where built).
    from torch.profiler import ProfilerActivity
    plugin = torch_webgpu._C._profiler_kineto_plugin
    print(f"Kineto plugin built: {plugin}")
    with torch.profiler.profile(activities=[ProfilerActivity.CPU,
                                            ProfilerActivity.PrivateUse1]) as tprof:
        region()
        torch.webgpu.synchronize()
    rows = [e for e in tprof.key_averages() if e.key.startswith("gemm")]
    print(tprof.key_averages().table(sort_by="self_device_time_total", row_limit=8))
    if plugin:
        report(len(rows) > 0 and all(e.self_device_time_total > 0 for e in rows),
               "torch.profiler lists the GEMM kernels with device time",
               f"{sum(e.self_device_time_total for e in rows):.0f} us")
    else:
        report(rows == [], "torch.profiler without the plugin lists no kernels (plugin not built "
               "for this torch)")


if __name__ == "__main__":
    main(host="--host" in sys.argv)
    print("ALL PASS" if failures == 0 else f"{failures} FAILED")
    sys.exit(1 if failures else 0)
