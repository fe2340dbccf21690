"""Matrix products of several shapes, ours (webgpu) vs CUDA in the same process.

Prints milliseconds per product on each device, TFLOP/s, and CUDA time / our time
(1.0 = as fast as CUDA). float32 on both (CUDA with TF32 off, PyTorch's default for
matmul). TORCH_WEBGPU_GEMM_VARIANT picks our kernel, to compare tile shapes; --configs
alternates several in one process (the variables are read at each product), one column
each: `default`, a TORCH_WEBGPU_GEMM_VARIANT value (`scalar_tiles`, `tiled_large`...), or a
TORCH_WEBGPU_GEMM_TILE shape (`128x128x16:16x16`).

    python3 benchmarks/gemm_shapes.py [--scale 1.0] [--configs default,scalar_tiles,...]
"""
import argparse
import contextlib
import os

import torch
import torch_webgpu  # noqa: F401

from timing import best_ms

SHAPES = [  # (batch, m, k, n, transpose_b): transpose_b is F.linear's weight layout
    (1, 512, 512, 512, False), (1, 1024, 1024, 1024, False), (1, 2048, 2048, 2048, False),
    (1, 4096, 4096, 4096, False), (1, 1024, 1024, 1024, True), (1, 8192, 1024, 4096, True),
    (32, 256, 64, 256, False), (8, 64, 576, 3136, False), (1, 512, 896, 4864, True), (1, 2048, 2048, 8192, False),
]


@contextlib.contextmanager
def config(name):
    """TORCH_WEBGPU_GEMM_VARIANT or _TILE set for `name` (see the module's doc)."""
    key = "TORCH_WEBGPU_GEMM_TILE" if ":" in name else "TORCH_WEBGPU_GEMM_VARIANT"
    old = os.environ.get(key)
    if name != "default":
        os.environ[key] = name
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = old


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies m, k and n")
    parser.add_argument("--configs", default="default", help="comma-separated; see the module's doc")
    args = parser.parse_args()
    configs = args.configs.split(",")
    cuda = torch.cuda.is_available()
    print(f"webgpu: {torch.webgpu.get_device_properties().name}; variant: "
          f"{os.environ.get('TORCH_WEBGPU_GEMM_VARIANT', 'default')}")
    print(f"{'b x m x k x n':24s} " + " ".join(f"{c + ' TF/s':>22s}" for c in configs) +
          (f" {'cuda TF/s':>10s} {'best/cuda':>9s}" if cuda else ""))
    for b, m, k, n, tb in SHAPES:
        m, k, n = (max(1, int(x * args.scale)) for x in (m, k, n))
        flop = 2 * b * m * k * n
        tf = []
        a = torch.randn(b, m, k, device="webgpu")
        w = torch.randn(b, n, k, device="webgpu").transpose(1, 2) if tb else torch.randn(b, k, n, device="webgpu")
        for c in configs:
            with config(c):
                tf.append(flop / (best_ms(lambda: torch.bmm(a, w), "webgpu") * 1e-3) / 1e12)
        line = f"{b}x{m}x{k}x{n}{' (b^T)' if tb else '':6s}"
        line = f"{line:24s} " + " ".join(f"{t:22.2f}" for t in tf)
        if cuda:
            a, w = a.cpu().cuda(), w.cpu().cuda()
            ct = flop / (best_ms(lambda: torch.bmm(a, w), "cuda") * 1e-3) / 1e12
            line += f" {ct:10.2f} {max(tf) / ct:9.2f}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
