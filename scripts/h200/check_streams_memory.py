"""H200 check for torch.webgpu streams, events and the memory API (Vulkan adapter).

Run from the repository root with PYTHONPATH=python. Prints PASS/FAIL lines and numbers:
- mem_get_info reads the adapter's memory heaps (source "adapter", total near the
  H200's 141 GB; nvidia-smi's figure printed for comparison when available);
- query() does not block while GPU work is in flight;
- elapsed_time of a large matmul loop against the host clock;
- set_per_process_memory_fraction refuses an allocation past the limit.
"""
import os
import subprocess
import time

import torch

import torch_webgpu


def report(name, ok, detail=""):
    print(f"{'PASS' if ok else 'FAIL'} {name} {detail}")


def main():
    torch.webgpu.init()
    print("adapter:", torch.webgpu.get_device_name())
    info = torch_webgpu._C.mem_get_info()
    free, total = torch.webgpu.mem_get_info()
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=memory.total,memory.used",
                              "--format=csv,noheader,nounits"], capture_output=True,
                             text=True, timeout=20).stdout.strip()
    except Exception as e:  # noqa: BLE001
        smi = f"unavailable ({e})"
    print(f"mem_get_info: free={free} total={total} source={info['source']} nvidia-smi(MiB)={smi}")
    report("mem_get_info from adapter heaps", info["source"] == "adapter"
           and 100e9 < total < 200e9, f"total={total / 1e9:.1f} GB")

    n = int(os.environ.get("CHECK_N", "4096"))  # smaller for a smoke run on llvmpipe
    a = torch.randn(n, n, device="webgpu")
    torch.webgpu.synchronize()
    start, end = torch.webgpu.Event(enable_timing=True), torch.webgpu.Event(enable_timing=True)
    t0 = time.perf_counter()
    start.record()
    x = a
    for _ in range(20):
        x = x @ a
        x = x / x.abs().amax()
    end.record()
    t_issue = time.perf_counter()
    q0 = time.perf_counter()
    done_early = end.query()
    q_ms = (time.perf_counter() - q0) * 1000
    end.synchronize()
    host_ms = (time.perf_counter() - t0) * 1000
    ms = start.elapsed_time(end)
    flops = 20 * 2 * n**3
    print(f"elapsed_time={ms:.2f} ms host={host_ms:.2f} ms issue={1000 * (t_issue - t0):.2f} ms "
          f"query={q_ms:.3f} ms (done={done_early}) -> {flops / ms / 1e9:.1f} TFLOP/s by event")
    report("query does not block", q_ms < 5 and not done_early)
    report("elapsed_time plausible", 0 < ms <= host_ms + 0.5 and ms >= 0.5 * host_ms)

    torch.webgpu.synchronize()
    report("stream idle after synchronize", torch.webgpu.default_stream().query())
    idle = torch.webgpu.Event()
    idle.record()
    report("event recorded on an idle queue is complete", idle.query())
    # GPU timestamps: a short stretch of small kernels still measures above zero.
    v = torch.randn(1 << 20, device="webgpu")
    torch.webgpu.synchronize()
    start.record()
    for _ in range(50):
        v = v + 1
    end.record()
    ms = start.elapsed_time(end)
    report("elapsed_time of 50 small kernels from GPU timestamps", 0 < ms < 50, f"{ms:.4f} ms")
    print("memory_snapshot segments:", len(torch.webgpu.memory_snapshot()))

    s1, s2 = torch.webgpu.Stream(), torch.webgpu.Stream()
    y_cpu = torch.arange(1000, dtype=torch.float32)
    y = y_cpu.to("webgpu")
    for i in range(10):
        with torch.webgpu.stream(s1 if i % 2 else s2):
            y.mul_(1.01).add_(i)
            y_cpu.mul_(1.01).add_(i)
    report("multi-stream order", torch.allclose(y.cpu(), y_cpu, rtol=1e-5))

    torch.webgpu.empty_cache()
    reserved = torch.webgpu.memory_reserved()
    torch.webgpu.set_per_process_memory_fraction((reserved + (64 << 20)) / total)
    try:
        torch.empty(32 << 20, device="webgpu")  # 128 MiB
        report("fraction enforced", False, "no error")
    except torch.OutOfMemoryError as e:
        report("fraction enforced", "set_per_process_memory_fraction" in str(e))
    torch.webgpu.set_per_process_memory_fraction(1.0)
    print(torch.webgpu.memory_summary())


if __name__ == "__main__":
    main()
