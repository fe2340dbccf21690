"""Where a 512-token HF prefill's GPU time goes on webgpu (torch.webgpu.profiler with
timestamp queries), beside the wall time of the same forward on webgpu and CUDA.

    PYTHONPATH=python python3 scripts/h200/prefill_profile.py [--models gpt2,llama-3.2-1b]
"""
import argparse
import os
import sys
import time

import torch

import torch_webgpu  # noqa: F401

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import e2e_models  # noqa: E402


def forward_ms(model, ids, device, reps=5):
    with torch.no_grad():
        model(ids)
        e2e_models.synchronize(device)
        best = float("inf")
        for _ in range(reps):
            start = time.perf_counter()
            model(ids)
            e2e_models.synchronize(device)
            best = min(best, time.perf_counter() - start)
    return best * 1e3


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="gpt2,llama-3.2-1b")
    parser.add_argument("--tokens", type=int, default=512)
    args = parser.parse_args()
    for key in args.models.split(","):
        spec = e2e_models.MODELS[key]
        cpu_model = e2e_models.build_model(spec, init_device="cuda" if torch.cuda.is_available() else "cpu")
        ids = e2e_models.prompt_tokens(cpu_model.config.vocab_size, args.tokens)
        times = {}
        for device in (["webgpu", "cuda"] if torch.cuda.is_available() else ["webgpu"]):
            model = cpu_model.to(device)
            times[device] = forward_ms(model, ids.to(device), device)
            if device == "webgpu":
                with torch.no_grad(), torch.webgpu.profiler.profile() as prof:
                    model(ids.to(device))
                    torch.webgpu.synchronize()
                table = prof.table(sort_by="gpu_time", row_limit=12)
        print(f"== {key}: {args.tokens}-token forward, ms: " + ", ".join(f"{d} {t:.2f}" for d, t in times.items()))
        print(table)


if __name__ == "__main__":
    main()
