"""Where a replayed decode step's time goes, ours against CUDA graphs on the same GPU.

For benchmarks/graph_replay.py's Qwen2.5-0.5B-sized decode step (and its 200-op chain of
tiny elementwise ops), captured once per device: the replay's wall time per token (no
profiler), then one replay under a profiler (ours: torch.webgpu.profiler with timestamp
queries, each dispatch in a pass of its own; CUDA: torch.profiler's kernel times, of the
eager step where the profiler sees no kernel inside the graph's replay), summed
per kernel family. Wall time minus the kernels' sum is what the GPU spent between kernels
(launch, barriers) plus the host's part that did not overlap.

    PYTHONPATH=python python3 scripts/h200/replay_profile.py [--layers 24] [--dtype float32]
        [--spy .tools/py-spy --out DIR]    (also py-spy's native stacks of replays of the step
                                           on webgpu: DIR/replay_spy.txt, for stacks.py)
"""
import argparse
import collections
import ctypes
import os
import signal
import subprocess
import sys
import time

import torch

import torch_webgpu  # noqa: F401
from torch_webgpu import profiler as webgpu_profiler

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "benchmarks"))
from graph_replay import Decoder, _graph_ctx, _new_graph, chain  # noqa: E402
from timing import cuda_device_events, cuda_kernel_profile, sync  # noqa: E402


def family(label):
    return label.split("|")[0]


def kernel_times(device, run):
    """{family: [calls, total us]} of the kernels run() launches on device."""
    out = collections.defaultdict(lambda: [0, 0.0])
    if device == "webgpu":
        with webgpu_profiler.profile("auto") as p:
            run()
            sync(device)
        for e in p.events():
            f = out[family(e.kernel)]
            f[0] += 1
            f[1] += e.duration_us
        return out
    with cuda_kernel_profile() as p:  # (keeps its events: torch 2.11 dropped them before)
        run()
        sync(device)
    for e in cuda_device_events(p):
        f = out[e.name[:60]]
        f[0] += 1
        f[1] += e.time_range.elapsed_us()
    return out


def report(title, wall_us, times, per):
    total = sum(t for _, t in times.values())
    calls = sum(c for c, _ in times.values())
    print(f"\n{title}: wall {wall_us:.1f} us per {per}, kernels {calls} summing {total:.1f} us "
          f"({total / max(calls, 1):.2f} us each), wall - kernels {wall_us - total:.1f} us "
          f"({(wall_us - total) / max(calls, 1):.2f} us per kernel)")
    for name, (c, t) in sorted(times.items(), key=lambda kv: -kv[1][1])[:20]:
        print(f"  {name:60s} {c:5d} {t:9.1f} us {t / c:7.2f} us each")


def step_profile(device, args):
    dtype = getattr(torch, args.dtype)
    model = Decoder(device, dtype, args.layers, 896, 14, 2, 4864, args.vocab, args.tokens + 8,
                    fused_norm=args.norm == "fused")
    token = torch.tensor([1], device=device)
    pos = torch.zeros(1, dtype=torch.int64, device=device)
    with torch.no_grad():
        model.step(token, pos)
        token.fill_(1)
        pos.zero_()
        g = _new_graph(device)
        with _graph_ctx(device, g):
            model.step(token, pos)
        best = float("inf")
        for _ in range(3):
            token.fill_(1)
            pos.zero_()
            sync(device)
            start = time.perf_counter()
            for _ in range(args.tokens):
                g.replay()
                int(token.item())
            best = min(best, (time.perf_counter() - start) / args.tokens * 1e6)
        token.fill_(1)
        pos.zero_()
        sync(device)
        times = kernel_times(device, g.replay)
        if not times:  # torch.profiler sees no kernel inside a CUDA graph: time eager's
            times = kernel_times(device, lambda: model.step(token, pos))
        if device == "webgpu" and args.spy:
            spy_replays(g, token, pos, args)
    report(f"[{device}] decode step replayed ({args.layers} layers, {args.dtype}; "
           f"{1e6 / best:.1f} tok/s)", best, times, "token")


def spy_replays(g, token, pos, args):
    """py-spy's native stacks (Python and C++ frames) while the step replays for a few
    seconds, written to args.out/replay_spy.txt."""
    # py-spy is our child; Yama's ptrace_scope 1 lets a child trace its parent only if asked.
    ctypes.CDLL(None).prctl(0x59616D61, ctypes.c_ulong(-1 & 0xFFFFFFFFFFFFFFFF), 0, 0, 0)
    path = os.path.join(args.out, "replay_spy.txt")
    spy = subprocess.Popen([args.spy, "record", "--native", "-r", "1000", "-f", "raw", "-o", path,
                            "--pid", str(os.getpid())], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(2.0)  # attached
    start, replays = time.perf_counter(), 0
    while time.perf_counter() - start < args.spy_seconds:
        if replays % args.tokens == 0:
            token.fill_(1)
            pos.zero_()
        g.replay()
        int(token.item())
        replays += 1
    seconds = time.perf_counter() - start
    spy.send_signal(signal.SIGINT)
    err = spy.communicate(timeout=120)[1].decode(errors="replace").strip().splitlines()
    print(f"py-spy: {replays} replays in {seconds:.2f} s ({replays / seconds:.1f} tok/s under the "
          f"profiler) -> {path}; {err[-1:] if err else ''}")


def chain_profile(device, n_ops=200):
    x = torch.ones(256, device=device)
    chain(x, n_ops)
    g = _new_graph(device)
    with _graph_ctx(device, g):
        chain(x, n_ops)
    best = float("inf")
    for _ in range(20):
        sync(device)
        start = time.perf_counter()
        g.replay()
        sync(device)
        best = min(best, (time.perf_counter() - start) * 1e6)
    report(f"[{device}] {n_ops}-op chain replayed", best, kernel_times(device, g.replay), "replay")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--layers", type=int, default=24)
    p.add_argument("--vocab", type=int, default=151936)
    p.add_argument("--tokens", type=int, default=16)
    p.add_argument("--dtype", default="float32")
    p.add_argument("--norm", choices=["hf", "fused"], default="hf")
    p.add_argument("--skip-chain", action="store_true")
    p.add_argument("--spy", default="", help="py-spy's path: sample replays of the step on webgpu")
    p.add_argument("--spy-seconds", type=float, default=5.0)
    p.add_argument("--out", default=os.environ.get("OUT", "/tmp"))
    args = p.parse_args()
    devices = ["webgpu"] + (["cuda"] if torch.cuda.is_available() else [])
    print(f"adapter: {torch.webgpu.get_device_name()}")
    for device in devices:
        if not args.skip_chain:
            chain_profile(device)
        step_profile(device, args)


if __name__ == "__main__":
    main()
