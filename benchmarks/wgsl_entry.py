"""Host cost of one WGSL kernel-entry call (compiler/kernel.py) against eager torch.add.

Both record one tiny dispatch (16 elements) per call; many calls per synchronize, so the
figure is the host time per call (Python, argument checks, recording). Prints a table:
entry variant | us per call | eager add | ratio (target: at most 1.5).

    python3 benchmarks/wgsl_entry.py [--calls 2000]
"""
import argparse
import os
import sys

import torch
import torch_webgpu  # noqa: F401
from torch_webgpu.compiler.kernel import TensorArg, WGSLKernel

sys.path.insert(0, os.path.dirname(__file__))
from timing import best_ms  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    a = torch.rand(16, device="webgpu")
    b = torch.rand(16, device="webgpu")
    out = torch.empty(16, device="webgpu")
    add = WGSLKernel("store_out(idx, load_a(idx) + load_b(idx));",
                     [TensorArg("a", torch.float32), TensorArg("b", torch.float32),
                      TensorArg("out", torch.float32, "read_write")])
    add(a, b, out, grid=16)
    torch.testing.assert_close(out.cpu(), (a + b).cpu())

    n = args.calls
    tensors, no_uniforms = (a, b, out), ()

    def entry_call():
        for _ in range(n):
            add(a, b, out, grid=16)

    def entry_launch():  # the path generated code takes
        for _ in range(n):
            add.launch(tensors, no_uniforms, 16)

    def eager_add_out():
        for _ in range(n):
            torch.add(a, b, out=out)

    def eager_add():
        for _ in range(n):
            torch.add(a, b)

    ref = best_ms(eager_add_out, "webgpu", inner=1) * 1e3 / n
    ref_alloc = best_ms(eager_add, "webgpu", inner=1) * 1e3 / n
    print(f"{'variant':<28}{'us/call':>10}{'eager add(out=)':>18}{'ratio':>8}")
    for name, fn in (("WGSLKernel.__call__", entry_call), ("WGSLKernel.launch", entry_launch)):
        us = best_ms(fn, "webgpu", inner=1) * 1e3 / n
        print(f"{name:<28}{us:>10.2f}{ref:>18.2f}{us / ref:>8.2f}")
    print(f"{'(eager torch.add allocating)':<28}{ref_alloc:>10.2f}")


if __name__ == "__main__":
    main()
