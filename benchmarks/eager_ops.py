"""Eager-op benchmark through PyTorch: ours (webgpu) vs CUDA on the same machine.

Reports, in one run: the per-op cost of a tiny op (y = x + 1.0 on 16 elements, many in a
row, one synchronize) and of two tiny ops on the shared kernel frame (arange(16), a 4x4
reflection pad), the host cost of those three alone (recording, nothing submitted), and
the bandwidth of large elementwise ops (add, mul with a broadcast scalar, div, copy with
dtype conversion), 20 ops per synchronize. Prints a table: webgpu | cuda | ratio.

    python3 benchmarks/eager_ops.py [--mb 64] [--iters 2000]
"""
import argparse
import time

import torch
import torch_webgpu  # noqa: F401


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()
    else:
        torch.webgpu.synchronize()


def best_time(fn, device, reps=5, inner=1):
    fn()
    sync(device)
    best = float("inf")
    for _ in range(reps):
        sync(device)
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        sync(device)
        best = min(best, (time.perf_counter() - start) / inner)
    return best


def tiny_op_us(device, iters):
    x = torch.ones(16, device=device)

    def run():
        y = x
        for _ in range(iters):
            y = y + 1.0
        return y

    return best_time(run, device) / iters * 1e6


def tiny_frame_op_us(device, iters, op):
    """Per-op cost of small ops on the shared kernel frame (KernelLaunch), not elementwise:
    arange (named uniforms, typed key) and reflection pad (the nn frame)."""
    x = torch.ones(1, 1, 4, 4, device=device)
    if op == "arange":
        fn = lambda: torch.arange(16, device=device)  # noqa: E731
    else:
        fn = lambda: torch.nn.functional.pad(x, (1, 1, 1, 1), mode="reflect")  # noqa: E731

    def run():
        for _ in range(iters):
            y = fn()
        return y

    return best_time(run, device) / iters * 1e6


def host_us(device, op, ops=200, reps=30):
    """Host cost per op, recording only: `ops` ops (fewer than a batch, so nothing is
    submitted inside the timed loop) timed without synchronizing; the device runs them
    afterwards, untimed. On webgpu this is ATen + our layer + recording; on CUDA, launch."""
    x = torch.ones(16, device=device)
    x4 = torch.ones(1, 1, 4, 4, device=device)
    fn = {
        "add": lambda: x + 1.0,
        "arange": lambda: torch.arange(16, device=device),
        "pad": lambda: torch.nn.functional.pad(x4, (1, 1, 1, 1), mode="reflect"),
    }[op]
    fn()
    sync(device)
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        for _ in range(ops):
            fn()
        best = min(best, time.perf_counter() - start)
        sync(device)
    return best / ops * 1e6


def bandwidth_gbs(device, mb, op):
    n = mb * 1024 * 1024 // 4
    a = torch.rand(n, device=device)
    b = torch.rand(n, device=device)
    if op == "add":
        fn, traffic = (lambda: a + b), 3 * 4 * n
    elif op == "mul_scalar":
        fn, traffic = (lambda: a * 3.0), 2 * 4 * n
    elif op == "div":
        fn, traffic = (lambda: a / b), 3 * 4 * n
    else:  # copy with conversion to float16
        fn, traffic = (lambda: a.to(torch.float16)), 4 * n + 2 * n
    return traffic / best_time(fn, device, inner=20) / 1e9


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=64, help="MiB per operand for bandwidth")
    parser.add_argument("--iters", type=int, default=2000)
    args = parser.parse_args()
    devices = ["webgpu"] + (["cuda"] if torch.cuda.is_available() else [])
    props = torch.webgpu.get_device_properties()
    print(f"webgpu: {props.name} ({props.backend}); cuda: "
          f"{torch.cuda.get_device_name() if 'cuda' in devices else 'not available'}")
    rows = [("tiny op (us/op, lower is better)", lambda d: tiny_op_us(d, args.iters), False)]
    for op in ("arange", "pad"):
        rows.append((f"tiny {op} (us/op, kernel frame)",
                     lambda d, op=op: tiny_frame_op_us(d, args.iters, op), False))
    for op in ("add", "arange", "pad"):
        rows.append((f"host {op} (us/op, recording only)", lambda d, op=op: host_us(d, op), False))
    for op in ("add", "mul_scalar", "div", "copy_f32_to_f16"):
        rows.append((f"{op} {args.mb} MiB (GB/s)", lambda d, op=op: bandwidth_gbs(d, args.mb, op), True))
    print(f"{'measure':38s} {'webgpu':>10s} {'cuda':>10s} {'ratio':>8s}")
    for name, fn, higher_better in rows:
        ours = fn("webgpu")
        ref = fn("cuda") if "cuda" in devices else float("nan")
        ratio = ours / ref if higher_better else ref / ours
        print(f"{name:38s} {ours:10.2f} {ref:10.2f} {ratio:8.3f}")
    print("ratio: webgpu as a fraction of CUDA's speed (1.0 = as fast)")


if __name__ == "__main__":
    main()
