"""The kernels of one LLM decode step, one at a time, as a replayed graph runs them.

Decode at batch 1 is a chain of ~200 small kernels; each one's cost is mostly latency
(a few global-memory round trips, barriers, the gap between dispatches), which neither
bandwidth tables nor the profiler show honestly (timestamp queries around every dispatch
add several microseconds to each). Here each case is captured `--calls` times in a row into
one graph (torch.webgpu graphs; CUDA graphs with --cuda) and the graph is replayed: the
time per call is what the kernel costs inside a replayed decode step, the dispatch gap
included. Shapes are Qwen2.5-0.5B's (hidden 896, 14 query heads over 2 KV heads of 64,
MLP 4864, vocabulary 151936), float32.

    python3 benchmarks/decode_kernels.py [--cuda] [--only rmsnorm,attention] [--calls 64]

A/B switches are read when a case is built: TORCH_WEBGPU_COMPILE_REDUCTION_THREADS
(generated reductions' workgroup), TORCH_WEBGPU_ATTENTION_PV, TORCH_WEBGPU_GEMM_VARIANT.
"""
import argparse
import json
import time

import torch
import torch.nn.functional as F

import torch_webgpu  # noqa: F401
from timing import sync

HIDDEN, HEADS, KV_HEADS, HEAD_DIM, MLP, VOCAB = 896, 14, 2, 64, 4864, 151936


def rms_norm(h, w):
    return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * w


def case_rmsnorm(device, gen):
    """The compiled residual add + RMSNorm of a decoder layer (one generated reduction)."""
    x, r, w = (torch.randn(1, 1, HIDDEN, generator=gen).to(device) for _ in range(3))
    fn = torch.compile(lambda x, r, w: rms_norm(x + r, w), dynamic=False)
    return lambda: fn(x, r, w)


def case_rope(device, gen):
    """The compiled rotary embedding of q and k (pointwise)."""
    q = torch.randn(1, HEADS, 1, HEAD_DIM, generator=gen).to(device)
    k = torch.randn(1, KV_HEADS, 1, HEAD_DIM, generator=gen).to(device)
    cos, sin = (torch.randn(1, 1, 1, HEAD_DIM, generator=gen).to(device) for _ in range(2))

    def rot(t):
        return torch.cat((-t[..., HEAD_DIM // 2:], t[..., :HEAD_DIM // 2]), -1)

    fn = torch.compile(lambda q, k: (q * cos + rot(q) * sin, k * cos + rot(k) * sin), dynamic=False)
    return lambda: fn(q, k)


def attention_case(cache):
    def build(device, gen):
        q = torch.randn(1, HEADS, 1, HEAD_DIM, generator=gen).to(device)
        k, v = (torch.randn(1, KV_HEADS, cache, HEAD_DIM, generator=gen).to(device) for _ in range(2))
        return lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    build.__doc__ = f"Grouped-query SDPA of one query over a {cache}-position cache (eager kernel)."
    return build


def linear_case(k, n):
    def build(device, gen):
        x = torch.randn(1, k, generator=gen).to(device)
        w = (torch.randn(n, k, generator=gen) / k ** 0.5).to(device)
        return lambda: F.linear(x, w)
    build.__doc__ = f"GEMV 1x{k} @ {k}x{n} (eager linear)."
    return build


def case_gated(device, gen):
    """The MLP's silu(x @ w_gate.T) * (x @ w_up.T), 896 -> 2 x 4864: one linear_gated dispatch
    on webgpu (what the compile pass emits); CUDA runs the two linears and the product."""
    x = torch.randn(1, HIDDEN, generator=gen).to(device)
    w_gate, w_up = ((torch.randn(MLP, HIDDEN, generator=gen) / HIDDEN ** 0.5).to(device) for _ in range(2))
    if device == "webgpu":
        return lambda: torch.ops.webgpu.linear_gated(x, w_gate, w_up, None, None, "silu")
    return lambda: F.silu(F.linear(x, w_gate)) * F.linear(x, w_up)


def case_argmax(device, gen):
    """Greedy sampling's argmax over the vocabulary (eager reduction)."""
    logits = torch.randn(1, VOCAB, generator=gen).to(device)
    return lambda: logits.argmax(-1)


def case_add(device, gen):
    """A one-element add: the floor, a dispatch that does nothing."""
    x = torch.ones(1, device=device)
    return lambda: x + 1.0


CASES = {
    "add": case_add,
    "rmsnorm": case_rmsnorm,
    "rope": case_rope,
    "attention64": attention_case(64),
    "attention1024": attention_case(1024),
    "qkv": linear_case(HIDDEN, HIDDEN + 2 * KV_HEADS * HEAD_DIM),
    "o_proj": linear_case(HIDDEN, HIDDEN),
    "gate": linear_case(HIDDEN, MLP),
    "gated": case_gated,
    "down": linear_case(MLP, HIDDEN),
    "lm_head": linear_case(HIDDEN, VOCAB),
    "argmax": case_argmax,
}


def replayed_us(build, device, calls, reps):
    """Microseconds per call of the case inside a replayed graph of `calls` calls."""
    fn = build(device, torch.Generator().manual_seed(0))
    for _ in range(3):  # compiles, warms caches and allocator pools before capture
        fn()
    sync(device)
    g = torch.cuda.CUDAGraph() if device == "cuda" else torch.webgpu.WebGPUGraph()
    with (torch.cuda.graph(g) if device == "cuda" else torch.webgpu.graph(g)):
        for _ in range(calls):
            fn()
    start = time.perf_counter()
    while time.perf_counter() - start < 0.2:  # clocks up
        g.replay()
        sync(device)
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        g.replay()
        sync(device)
        best = min(best, time.perf_counter() - start)
    del g
    return best / calls * 1e6


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cuda", action="store_true", help="also time the same graphs on CUDA")
    parser.add_argument("--only", default="", help="comma-separated case names")
    parser.add_argument("--calls", type=int, default=64)
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args(argv)
    names = [n for n in args.only.split(",") if n] or list(CASES)
    devices = ["webgpu"] + (["cuda"] if args.cuda else [])
    rows = []
    print(f"{'case':<14} {'webgpu us':>10} {'cuda us':>9} {'ratio':>6}  what")
    for name in names:
        row = {"case": name}
        for device in devices:
            try:
                row[device] = replayed_us(CASES[name], device, args.calls, args.reps)
            except Exception as error:  # noqa: BLE001 - a failure is a row
                row[device + "_error"] = f"{type(error).__name__}: {error}"[:200]
            torch._dynamo.reset()
        ours, cuda = row.get("webgpu"), row.get("cuda")
        ratio = f"{cuda / ours:6.2f}" if ours and cuda else ""
        fmt = lambda v: f"{v:.2f}" if v is not None else "-"  # noqa: E731
        what = " ".join(CASES[name].__doc__.split())
        print(f"{name:<14} {fmt(ours):>10} {fmt(cuda):>9} {ratio:>6}  {what}"
              + "".join(f"  [{k}: {v}]" for k, v in row.items() if k.endswith("_error")), flush=True)
        rows.append(row)
    print("ratio: CUDA's time / ours (1.0 = as fast as CUDA graphs)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
