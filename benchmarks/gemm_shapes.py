"""Matrix products of several shapes, ours (webgpu) vs CUDA in the same process.

Prints milliseconds per product on each device, TFLOP/s, and CUDA time / our time
(1.0 = as fast as CUDA). float32 on both (CUDA with TF32 off, PyTorch's default for
matmul). TORCH_WEBGPU_GEMM_VARIANT picks our kernel, to compare tile shapes.

    python3 benchmarks/gemm_shapes.py [--scale 1.0]
"""
import argparse
import os

import torch
import torch_webgpu  # noqa: F401

from timing import best_ms

SHAPES = [  # (batch, m, k, n, transpose_b): transpose_b is F.linear's weight layout
    (1, 512, 512, 512, False), (1, 1024, 1024, 1024, False), (1, 2048, 2048, 2048, False),
    (1, 4096, 4096, 4096, False), (1, 1024, 1024, 1024, True), (1, 8192, 1024, 4096, True),
    (32, 256, 64, 256, False), (8, 64, 576, 3136, False),
]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies m, k and n")
    args = parser.parse_args()
    devices = ["webgpu"] + (["cuda"] if torch.cuda.is_available() else [])
    print(f"webgpu: {torch.webgpu.get_device_properties().name}; variant: "
          f"{os.environ.get('TORCH_WEBGPU_GEMM_VARIANT', 'default')}")
    print(f"{'b x m x k x n':24s} {'webgpu ms':>10s} {'TFLOP/s':>8s} {'cuda ms':>9s} {'cuda/ours':>9s}")
    for b, m, k, n, tb in SHAPES:
        m, k, n = (max(1, int(x * args.scale)) for x in (m, k, n))
        ms = {}
        for d in devices:
            a = torch.randn(b, m, k, device=d)
            w = torch.randn(b, n, k, device=d).transpose(1, 2) if tb else torch.randn(b, k, n, device=d)
            ms[d] = best_ms(lambda: torch.bmm(a, w), d)
        tflops = 2 * b * m * k * n / (ms["webgpu"] * 1e-3) / 1e12
        name = f"{b}x{m}x{k}x{n}{' (b^T)' if tb else ''}"
        cuda = f"{ms['cuda']:9.3f} {ms['cuda'] / ms['webgpu']:9.3f}" if "cuda" in ms else ""
        print(f"{name:24s} {ms['webgpu']:10.3f} {tflops:8.2f} {cuda}")


if __name__ == "__main__":
    main()
