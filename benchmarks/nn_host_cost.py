"""Host cost per call of a few nn ops on small tensors (the nn kernel frame's per-launch
work: uniforms, key, pipeline lookup), in microseconds. Usage:
    PYTHONPATH=python python3 benchmarks/nn_host_cost.py [--calls 2000]
Several builds in one run: PYTHONPATH=a python3 ...; PYTHONPATH=b python3 ... alternately."""
import argparse
import time

import torch
import torch.nn.functional as F
import torch_webgpu  # noqa: F401


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    dev = "webgpu"
    x = torch.randn(4, 8, 16, device=dev)
    img = torch.randn(1, 4, 16, 16, device=dev)
    w = torch.randn(16, device=dev)
    b = torch.randn(16, device=dev)
    ops = {
        "layer_norm": lambda: F.layer_norm(x, (16,), w, b),
        "max_pool2d": lambda: F.max_pool2d(img, 2),
        "pad_reflect": lambda: F.pad(img, (1, 1, 1, 1), mode="reflect"),
        "group_norm": lambda: F.group_norm(img, 2),
    }
    for name, fn in ops.items():
        for _ in range(50):
            fn()
        torch.webgpu.synchronize()
        best = float("inf")
        for _ in range(args.reps):
            start = time.process_time()
            for _ in range(args.calls):
                fn()
            torch.webgpu.synchronize()
            best = min(best, (time.process_time() - start) / args.calls)
        print(f"{name:12s} {best * 1e6:8.1f} us/call")


if __name__ == "__main__":
    main()
