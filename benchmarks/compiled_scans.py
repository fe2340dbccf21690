"""Scans through torch.compile (generated WGSL, `WebGPUKernel.scan`) against our eager scan
kernels, and both against CUDA's (eager ATen, and Inductor's Triton scans) on the same GPU.

GB/s counts one read of the input and one write of each output (float32). Rows: op, shape,
then GB/s for webgpu eager, webgpu compiled, cuda eager, cuda compiled, and
compiled webgpu / compiled cuda.

    python3 benchmarks/compiled_scans.py [--cuda] [--quick]
"""
import argparse

import torch

import torch_webgpu  # noqa: F401
from timing import best_ms

OPS = {
    "cumsum": (lambda x: torch.cumsum(x, -1), 1),
    "cumsum fused (x*2).cumsum().relu()": (lambda x: torch.cumsum(x * 2, -1).relu(), 1),
    "cummax (values, indices)": (lambda x: torch.cummax(x, -1), 3),  # int64 indices: 2 words
    "logcumsumexp": (lambda x: torch.logcumsumexp(x, -1), 1),
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cuda", action="store_true")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    shapes = [(64, 1024), (256, 4096)] if args.quick else [(4096, 4096), (16384, 4096), (8, 65536), (65536, 256)]
    devices = ["webgpu"] + (["cuda"] if args.cuda else [])
    print(f"{'op':36} {'shape':>12} " + " ".join(f"{d + ' ' + m:>16}" for d in devices for m in ("eager", "compiled"))
          + ("  compiled ours/cuda" if args.cuda else ""))
    for name, (fn, out_words) in OPS.items():
        for rows, length in shapes:
            gbs = {}
            for device in devices:
                torch._dynamo.reset()
                x = torch.randn(rows, length, device=device)
                nbytes = x.numel() * 4 * (1 + out_words)
                compiled = torch.compile(fn)
                for mode, f in (("eager", fn), ("compiled", compiled)):
                    try:
                        ms = best_ms(lambda: f(x), device, reps=3, inner=10)
                        gbs[device, mode] = nbytes / ms / 1e6
                    except Exception as error:  # a failure is a row, never a crash
                        print(f"  {device} {mode}: {type(error).__name__}: {str(error)[:120]}")
                        gbs[device, mode] = float("nan")
            ratio = (f"  {gbs['webgpu', 'compiled'] / gbs['cuda', 'compiled']:.2f}" if args.cuda else "")
            print(f"{name:36} {f'{rows}x{length}':>12} "
                  + " ".join(f"{gbs[d, m]:16.1f}" for d in devices for m in ("eager", "compiled"))
                  + ratio, flush=True)


if __name__ == "__main__":
    main()
