"""Profiles one forward of a benchmarks/engine.py case on webgpu (GPU time per kernel with
timestamp queries where the adapter has them) at the given batches:
    PYTHONPATH=python python3 scripts/h200/profile_case.py minilm 1 32
"""
import importlib.util
import os
import sys
import time

import torch
import torch_webgpu  # noqa: F401

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("engine_bench", os.path.join(HERE, "..", "..", "benchmarks", "engine.py"))
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)

name = sys.argv[1]
for batch in map(int, sys.argv[2:]):
    model, inputs, note = bench.CASES[name](batch)
    model = model.to("webgpu")
    inputs = [t.to("webgpu") for t in inputs]
    with torch.no_grad():
        for _ in range(2):
            model(*inputs)
        torch.webgpu.synchronize()
        t = time.perf_counter()
        model(*inputs)
        torch.webgpu.synchronize()
        print(f"\n{name} batch {batch} ({note}): {1e3 * (time.perf_counter() - t):.2f} ms")
        with torch.webgpu.profiler.profile() as prof:
            model(*inputs)
            torch.webgpu.synchronize()
    print(prof.table(sort_by="gpu_time", row_limit=12))
