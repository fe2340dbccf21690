"""Where HF generate's host time goes, Python and native frames together: py-spy
(`--native`, PyPI `py-spy`, carried to the lent machine as `.tools/py-spy`) attached to this
process while compiled (or eager) generates run after their warm-up, one profile per device.

    python3 scripts/h200/pyspy_generate.py --model gpt2 --devices webgpu,cuda --out DIR
    python3 scripts/h200/stacks.py DIR/webgpu.txt      # what the samples say
"""
import argparse
import copy
import ctypes
import os
import signal
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import e2e_models  # noqa: E402
import torch_webgpu  # noqa: E402,F401
import torch_webgpu.generation  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="gpt2", choices=list(e2e_models.MODELS))
    parser.add_argument("--devices", default="webgpu,cuda")
    parser.add_argument("--mode", default="reduce-overhead")
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--pyspy", default=".tools/py-spy")
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--init-device", default="cuda")
    parser.add_argument("--out", default=os.environ.get("OUT", "/tmp"))
    args = parser.parse_args()
    torch_webgpu.generation.defer_stop_check(("webgpu", "cuda"))
    # py-spy is our child; Yama's ptrace_scope 1 lets a child trace its parent only if asked.
    ctypes.CDLL(None).prctl(0x59616D61, ctypes.c_ulong(-1 & 0xFFFFFFFFFFFFFFFF), 0, 0, 0)
    model = e2e_models.build_model(e2e_models.MODELS[args.model], tiny=args.tiny, init_device=args.init_device)
    prompt = e2e_models.prompt_tokens(model.config.vocab_size)
    for device in args.devices.split(","):
        m = copy.deepcopy(model).to(device)
        if args.mode != "eager":
            m = e2e_models.compiled(m, args.mode)
        for _ in range(2):  # compile, capture, warm caches
            e2e_models.greedy(m, prompt, args.tokens, device, timed=False, cache_implementation="static")
        e2e_models.synchronize(device)
        path = os.path.join(args.out, f"{device}.txt")
        spy = subprocess.Popen([args.pyspy, "record", "--native", "-r", str(args.rate), "-f", "raw",
                                "-o", path, "--pid", str(os.getpid())],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(2.0)  # attached
        start = time.perf_counter()
        for _ in range(args.runs):
            e2e_models.greedy(m, prompt, args.tokens, device, timed=False, cache_implementation="static")
        e2e_models.synchronize(device)
        seconds = time.perf_counter() - start
        time.sleep(0.5)
        spy.send_signal(signal.SIGINT)
        err = spy.communicate(timeout=120)[1].decode(errors="replace").strip().splitlines()
        print(f"{device}: {args.runs} generates of {args.tokens} tokens in {seconds:.2f} s "
              f"({args.runs * args.tokens / seconds:.1f} tok/s under the profiler); py-spy: {err[-2:]}",
              flush=True)
        del m
        torch._dynamo.reset()
        e2e_models.release(device)


if __name__ == "__main__":
    main()
