"""Eager kernels, ours (webgpu) vs CUDA in the same process: one entry point, one table.

Every row is one op at one shape: our figure, CUDA's (with --cuda and a CUDA device), the
ratio ours / CUDA (1.0 = as fast; higher is better for every unit, host cost included, where
it is CUDA's microseconds over ours) and a "limit" note (what bounds the figure, or which
fallback path our adapter took). Units: GB/s (bytes an ideal kernel must move: inputs read
once, outputs written once), TFLOP/s, us per op, and for HF generate tok/s, ms and MB
(peak device memory); for us, ms and MB the ratio is CUDA's figure over ours.

    python3 benchmarks/run.py [--cuda] [--quick] [--only reductions,gemv] [--match softmax,sum]
                              [--cpu-clock] [--json FILE]

--quick uses small sizes that a software adapter (llvmpipe, ~5 GB/s) runs in minutes.
Sections: bandwidth, reductions, movement, gemv, gemm, conv, attention, pool, sort, host,
models (HF generate with GPT-2, Qwen2.5-0.5B and Llama-3.2-1B built from their configs with
seeded random weights, scripts/e2e_models.py: decode tok/s after a 512-token prompt, the
prompt's prefill latency, peak device memory of the run; --quick: 2-layer versions and a
32-token prompt).
"""
import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
import torch_webgpu  # noqa: F401

from timing import best_ms, empty_cache, kernel_us, phases_us, sync

MB = 1024 * 1024


@dataclass
class Case:
    section: str
    op: str
    shape: str
    setup: Callable  # setup(device) -> fn to time
    amount: float    # bytes (GB/s), flops (TFLOP/s) or ops per call (us)
    unit: str        # "GB/s", "TFLOP/s", "us"; "tok/s", "ms", "MB" for figures measured directly
    limit: str = ""
    figure: Callable = None  # figure(device) -> the value itself (setup unused)


LOWER_IS_BETTER = ("us", "ms", "MB")


def rate(case, ms):
    if case.unit == "GB/s":
        return case.amount / (ms * 1e-3) / 1e9
    if case.unit == "TFLOP/s":
        return case.amount / (ms * 1e-3) / 1e12
    return ms * 1e3 / case.amount  # us per op


def software(caps):
    """llvmpipe, lavapipe, SwiftShader: some kernels take their CPU-friendly variant there."""
    return caps.adapter_type == "CPU" or any(
        n in caps.name for n in ("llvmpipe", "lavapipe", "SwiftShader", "swiftshader"))


def fp32_elems(mb):
    return mb * MB // 4


# ---- sections ------------------------------------------------------------------------------


def bandwidth(sizes, caps):
    out = []
    for mb in sizes:
        n = fp32_elems(mb)
        shape = f"{mb} MB fp32"

        def two(d, n=n):
            return torch.rand(n, device=d), torch.rand(n, device=d)
        out += [
            Case("bandwidth", "add", shape, lambda d, two=two: (lambda a, b: lambda: a + b)(*two(d)),
                 3 * 4 * n, "GB/s"),
            Case("bandwidth", "mul scalar", shape, lambda d, n=n: (lambda a: lambda: a * 3.0)(torch.rand(n, device=d)),
                 2 * 4 * n, "GB/s"),
            Case("bandwidth", "gelu", shape, lambda d, n=n: (lambda a: lambda: F.gelu(a))(torch.rand(n, device=d)),
                 2 * 4 * n, "GB/s"),
            Case("bandwidth", "copy", shape,
                 lambda d, two=two: (lambda a, b: lambda: b.copy_(a))(*two(d)), 2 * 4 * n, "GB/s"),
            Case("bandwidth", "cast f32->f16", shape,
                 lambda d, n=n: (lambda a: lambda: a.to(torch.float16))(torch.rand(n, device=d)),
                 6 * n, "GB/s"),
        ]
    return out


def reductions(sizes, caps):
    # Where the adapter has subgroups of one size, lanes merge by shuffles and only one value
    # per subgroup goes through workgroup memory (TORCH_WEBGPU_SUBGROUPS=0 keeps the trees).
    if getattr(caps, "subgroup_size", 0) and os.environ.get("TORCH_WEBGPU_SUBGROUPS") != "0":
        tree = f"subgroup shuffles ({caps.subgroup_size} lanes)"
    else:
        tree = "workgroup tree" + ("" if caps.subgroups else " (adapter: no subgroups)")
    out = []
    for mb in sizes:
        n = fp32_elems(mb)
        cols = 4096
        rows = n // cols
        flat, mat = f"{mb} MB ({n})", f"{mb} MB ({rows}x{cols})"

        def vec(d, n=n):
            return torch.randn(n, device=d)

        def m(d, rows=rows, cols=cols):
            return torch.randn(rows, cols, device=d)

        def red(section_op, shape, make, fn, out_elems):
            return Case("reductions", section_op, shape, lambda d: (lambda x: lambda: fn(x))(make(d)),
                        4 * (n + out_elems), "GB/s", tree)
        out += [
            red("sum all", flat, vec, lambda x: x.sum(), 1),
            red("mean all", flat, vec, lambda x: x.mean(), 1),
            red("amax all", flat, vec, lambda x: x.amax(), 1),
            red("sum rows (dim=-1)", mat, m, lambda x: x.sum(-1), rows),
            red("amax rows (dim=-1)", mat, m, lambda x: x.amax(-1), rows),
            red("sum cols (dim=0)", mat, m, lambda x: x.sum(0), cols),
            red("mean cols (dim=0)", mat, m, lambda x: x.mean(0), cols),
            red("softmax rows", mat, m, lambda x: torch.softmax(x, -1), n),
            red("log_softmax rows", mat, m, lambda x: torch.log_softmax(x, -1), n),
            red("cumsum rows", mat, m, lambda x: x.cumsum(-1), n),
        ]

        def ln(d, rows=rows, cols=cols):
            x = torch.randn(rows, cols, device=d)
            w, b = torch.randn(cols, device=d), torch.randn(cols, device=d)
            return lambda: F.layer_norm(x, (cols,), w, b)

        def rms(d, rows=rows, cols=cols):
            x = torch.randn(rows, cols, device=d)
            w = torch.randn(cols, device=d)
            return lambda: F.rms_norm(x, (cols,), w)
        out += [Case("reductions", "layer_norm", mat, ln, 4 * 2 * n, "GB/s", tree),
                Case("reductions", "rms_norm", mat, rms, 4 * 2 * n, "GB/s", tree)]
    return out


def movement(scale, caps):
    s = lambda v: max(1, int(v * scale))  # noqa: E731
    out = []
    rows, cols = s(8192), 1024
    shape = f"{rows}x{cols} fp32"

    def cat(d):
        xs = [torch.randn(rows, cols, device=d) for _ in range(4)]
        return lambda: torch.cat(xs, dim=1)

    def index_select(d):
        x = torch.randn(rows, cols, device=d)
        i = torch.randint(0, rows, (rows,), device=d)
        return lambda: x.index_select(0, i)

    def gather(d):
        x = torch.randn(rows, cols, device=d)
        i = torch.randint(0, cols, (rows, cols), device=d)
        return lambda: x.gather(1, i)

    def scatter_add(d):
        x = torch.zeros(rows, cols, device=d)
        i = torch.randint(0, rows, (rows, cols), device=d)
        src = torch.randn(rows, cols, device=d)
        return lambda: x.scatter_add_(0, i, src)

    def embedding(d):
        w = torch.randn(s(151936) if scale >= 1 else 32000, 896, device=d)
        i = torch.randint(0, w.shape[0], (s(4096),), device=d)
        return lambda: F.embedding(i, w)

    def permute(d):
        x = torch.randn(s(64), 128, 32, 32, device=d)
        return lambda: x.permute(0, 2, 3, 1).contiguous()

    def uniform(d):
        x = torch.empty(rows * cols, device=d)
        return lambda: x.uniform_()

    def normal(d):
        x = torch.empty(rows * cols, device=d)
        return lambda: x.normal_()
    e = rows * cols
    out += [
        Case("movement", "cat 4 (dim=1)", f"4x {shape}", cat, 2 * 4 * 4 * e, "GB/s"),
        Case("movement", "index_select rows", shape, index_select, 2 * 4 * e + 8 * rows, "GB/s"),
        Case("movement", "gather (dim=1)", shape, gather, 4 * e * 2 + 8 * e, "GB/s"),
        Case("movement", "scatter_add_ (dim=0)", shape, scatter_add, 4 * e * 3 + 8 * e, "GB/s", "atomics"),
        Case("movement", "embedding", f"{s(4096)} ids x 896", embedding, 2 * 4 * s(4096) * 896, "GB/s"),
        Case("movement", "permute+contiguous", f"{s(64)}x128x32x32", permute, 2 * 4 * s(64) * 128 * 1024, "GB/s"),
        Case("movement", "uniform_", f"{e} fp32", uniform, 4 * e, "GB/s"),
        Case("movement", "normal_", f"{e} fp32", normal, 4 * e, "GB/s"),
    ]
    return out


GEMV_SHAPES = [(896, 4864), (2048, 8192), (3072, 8192), (4096, 11008), (896, 151936)]


def gemv(quick, caps):
    out = []
    shapes = [(896, 4864), (2048, 2048)] if quick else GEMV_SHAPES
    for dt, name in ((torch.float32, "fp32"), (torch.float16, "fp16"), (torch.bfloat16, "bf16")):
        if quick and dt is torch.bfloat16:
            continue
        for k, n in shapes:
            def setup(d, k=k, n=n, dt=dt):
                x = torch.randn(1, k, device=d, dtype=dt)
                w = (torch.randn(n, k, device=d, dtype=dt) * 0.05)
                return lambda: F.linear(x, w)
            size = 2 if dt != torch.float32 else 4
            limit = "" if dt == torch.float32 or caps.shader_f16 else "no shader-f16: f32 math"
            if software(caps) and os.environ.get("TORCH_WEBGPU_GEMM_VARIANT") not in ("gemv", "gemv_scalar"):
                limit = ("software adapter: GEMV walking K; " + limit).rstrip("; ")
            out.append(Case("gemv", f"linear {name}", f"1x{k} @ {k}x{n}{' (LM head)' if n == 151936 else ''}",
                            setup, size * (k * n + k + n), "GB/s", limit))
    # Weights with N contiguous: GPT-2's Conv1D, addmm(bias, x, W [k, n]), at its sizes.
    for k, n in [(768, 2304)] if quick else [(768, 2304), (768, 3072), (3072, 768)]:
        def setup(d, k=k, n=n):
            x, b = torch.randn(1, k, device=d), torch.randn(n, device=d)
            w = torch.randn(k, n, device=d) * 0.05
            return lambda: torch.addmm(b, x, w)
        limit = "software adapter: GEMV off" if software(caps) and not os.environ.get(
            "TORCH_WEBGPU_GEMM_VARIANT", "").startswith("gemv_cols") else ""
        out.append(Case("gemv", "addmm fp32 (W n-contiguous)", f"1x{k} @ {k}x{n}", setup,
                        4 * (k * n + k + 2 * n), "GB/s", limit))
    # Linears sharing x (Qwen2.5-0.5B's q/k/v with biases, its gate/up): one F.linear each,
    # then torch.ops.webgpu.linear_group (what torch.compile fuses them into at decode; on
    # CUDA the same separate linears, which have no grouped kernel there).
    for what, k, widths, bias in (("q/k/v", 896, (896, 128, 128), True), ("gate/up", 896, (4864, 4864), False)):
        for grouped in (False, True):
            def setup(d, k=k, widths=widths, bias=bias, grouped=grouped):
                x = torch.randn(1, k, device=d)
                ws = [torch.randn(n, k, device=d) * 0.05 for n in widths]
                bs = [torch.randn(n, device=d) if bias else None for n in widths]
                if grouped and d == "webgpu":
                    return lambda: torch.ops.webgpu.linear_group(x, ws, bs)
                return lambda: [F.linear(x, w, b) for w, b in zip(ws, bs)]
            limit = "software adapter: gemm per linear" if grouped and software(caps) and os.environ.get(
                "TORCH_WEBGPU_GEMM_VARIANT") != "gemv" and os.environ.get("TORCH_WEBGPU_ADAPTER_KIND") != "gpu" else ""
            out.append(Case("gemv", f"{what} fp32 {'linear_group' if grouped else 'separate linears'}",
                            f"1x{k} @ {k}x{'+'.join(map(str, widths))}", setup,
                            4 * sum(n * k + n for n in widths), "GB/s", limit))
    # The gated MLP's gate/up with its silu product (torch.compile's linear_gated at decode;
    # on CUDA: the two linears and the pointwise product).
    def setup(d, k=896, n=4864):
        x = torch.randn(1, k, device=d)
        w_gate, w_up = (torch.randn(n, k, device=d) * 0.05 for _ in range(2))
        if d == "webgpu":
            return lambda: torch.ops.webgpu.linear_gated(x, w_gate, w_up, None, None, "silu")
        return lambda: F.silu(F.linear(x, w_gate)) * F.linear(x, w_up)
    limit = "software adapter: linears and pointwise" if software(caps) and os.environ.get(
        "TORCH_WEBGPU_GEMM_VARIANT") != "gemv" and os.environ.get("TORCH_WEBGPU_ADAPTER_KIND") != "gpu" else ""
    out.append(Case("gemv", "gate/up fp32 linear_gated (silu)", "1x896 @ 896x4864+4864", setup,
                    4 * (2 * 4864 * 896 + 4864), "GB/s", limit))
    return out


def gemm(quick, caps):
    shapes = [(512, 512, 512), (1024, 1024, 1024)] if quick else \
        [(4096, 4096, 4096), (512, 896, 4864), (2048, 2048, 8192)]
    out = []
    for m, k, n in shapes:
        def setup(d, m=m, k=k, n=n):
            a, b = torch.randn(m, k, device=d), torch.randn(k, n, device=d)
            return lambda: a @ b
        out.append(Case("gemm", "mm fp32", f"{m}x{k} @ {k}x{n}", setup, 2 * m * k * n, "TFLOP/s",
                        "CUDA: TF32 off; ours: no tensor cores" +
                        ("; software adapter: register blocks" if software(caps) else "")))
    # Half types: no shader-f16 on the H100/H200 through this Dawn (float32 arithmetic on
    # unpacked operands), so the target is at least the float32 row's TFLOP/s.
    for dt in (torch.float16, torch.bfloat16):
        m = k = n = 1024 if quick else 4096

        def half_mm(d, dt=dt, m=m, k=k, n=n):
            a, b = torch.randn(m, k, device=d, dtype=dt), torch.randn(k, n, device=d, dtype=dt)
            return lambda: a @ b
        out.append(Case("gemm", f"mm {str(dt)[6:]}", f"{m}x{k} @ {k}x{n}", half_mm, 2 * m * k * n, "TFLOP/s",
                        "" if caps.shader_f16 else "no shader-f16: f32 math"))
    b, m, k, n = 32, 256, 64, 256

    def bmm(d):
        x, y = torch.randn(b, m, k, device=d), torch.randn(b, k, n, device=d)
        return lambda: torch.bmm(x, y)
    rows = 256 if quick else 1024

    def linear_relu(d):
        x, w, bias = (torch.randn(rows, 1024, device=d), torch.randn(1024, 1024, device=d),
                      torch.randn(1024, device=d))
        return lambda: F.relu(F.linear(x, w, bias))
    out += [Case("gemm", "bmm fp32", f"{b}x{m}x{k} @ {b}x{k}x{n}", bmm, 2 * b * m * k * n, "TFLOP/s"),
            Case("gemm", "linear+relu fp32", f"{rows}x1024 @ 1024x1024", linear_relu,
                 2 * rows * 1024 * 1024, "TFLOP/s")]
    # Few rows, long K (MiniLM at batch 1: 32 tokens; small-LLM prefill of a short prompt):
    # too few output tiles to fill a GPU, where split-K applies, and up to 16 rows the GEMV.
    # F.linear, as the models call it.
    for m, k, n in [(32, 384, 384), (32, 384, 1536), (32, 1536, 384), (8, 896, 4864), (16, 896, 4864),
                    (8, 3072, 8192), (64, 896, 896)]:
        def small_linear(d, m=m, k=k, n=n):
            x, w = torch.randn(m, k, device=d), torch.randn(n, k, device=d)
            return lambda: F.linear(x, w)
        out.append(Case("gemm", "linear fp32 (few rows)", f"{m}x{k} @ {k}x{n}", small_linear, 2 * m * k * n,
                        "TFLOP/s", "GPU adapters: GEMV to 16 rows, then split-K tiles"))
    return out


RESNET_CONVS = [  # (batch, cin, hw, cout, kernel, stride)
    (32, 64, 56, 64, 3, 1), (32, 256, 56, 64, 1, 1), (32, 128, 28, 128, 3, 1),
    (32, 512, 7, 512, 3, 1), (32, 3, 224, 64, 7, 2),
]


def conv(quick, caps):
    out = []
    shapes = [(2, 64, 28, 64, 3, 1), (2, 128, 14, 128, 3, 1), (4, 256, 14, 64, 1, 1),
              (2, 3, 56, 16, 7, 2)] if quick else RESNET_CONVS
    for b, cin, hw, cout, ks, st in shapes:
        ho = (hw + 2 * (ks // 2) - ks) // st + 1
        flops = 2 * b * cout * ho * ho * cin * ks * ks
        shape = f"{b}x{cin}x{hw}x{hw} k{ks} s{st} -> {cout}"

        def fwd(d, b=b, cin=cin, hw=hw, cout=cout, ks=ks, st=st):
            x, w = torch.randn(b, cin, hw, hw, device=d), torch.randn(cout, cin, ks, ks, device=d)
            return lambda: F.conv2d(x, w, stride=st, padding=ks // 2)

        def bwd(d, b=b, cin=cin, hw=hw, cout=cout, ks=ks, st=st):
            x = torch.randn(b, cin, hw, hw, device=d, requires_grad=True)
            w = torch.randn(cout, cin, ks, ks, device=d, requires_grad=True)
            y = F.conv2d(x, w, stride=st, padding=ks // 2)
            g = torch.randn_like(y)
            return lambda: torch.autograd.grad(y, (x, w), g, retain_graph=True)
        note = "CUDA: cuDNN in " + ("TF32 (its default)" if torch.backends.cudnn.allow_tf32 else "fp32 (--cudnn-fp32)")
        out += [Case("conv", "conv2d fwd", shape, fwd, flops, "TFLOP/s", note),
                Case("conv", "conv2d bwd (dx, dw)", shape, bwd, 2 * flops, "TFLOP/s", note)]
    return out


def attention(quick, caps):
    out = []
    qwen, llama3b = (14, 2, 64), (24, 8, 128)  # (heads, kv_heads, head dim) of Qwen2.5-0.5B, Llama-3.2-3B
    long = 128 if quick else 512
    # "math": the same call forced onto PyTorch's math decomposition (matmuls and a
    # softmax), what webgpu ran before its fused kernel.
    cases = [("prefill", qwen, long, long, False, False),
             ("prefill GQA 14/2", qwen, long, long, True, False),
             ("prefill GQA math", qwen, long, long, True, True),
             ("prefill GQA 24/8", llama3b, long, long, True, False),
             ("decode", qwen, 1, 256 if quick else 1024, False, False),
             ("decode GQA 14/2", qwen, 1, 256 if quick else 1024, True, False),
             ("decode GQA math", qwen, 1, 256 if quick else 1024, True, True),
             # Qwen2.5-0.5B's decode over a short static cache: latency, not bandwidth
             ("decode GQA short", qwen, 1, 50, True, False)]
    for name, (heads, kv_heads, hd), q_len, kv_len, gqa, math in cases:
        def setup(d, heads=heads, kv_heads=kv_heads, hd=hd, q_len=q_len, kv_len=kv_len, gqa=gqa, math=math):
            q = torch.randn(1, heads, q_len, hd, device=d)
            kvh = kv_heads if gqa else heads
            k = torch.randn(1, kvh, kv_len, hd, device=d)
            v = torch.randn(1, kvh, kv_len, hd, device=d)
            causal = q_len > 1

            def run():
                if not math:
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)
                with sdpa_kernel(SDPBackend.MATH):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)
            return run
        kvh = kv_heads if gqa else heads
        if q_len == 1:  # decode reads the cache: bandwidth
            amount, unit = 4 * (2 * kvh * kv_len * hd + 2 * heads * hd), "GB/s"
        else:
            # two products of 2 * q * kv * d flops per head, halved by the causal mask
            amount, unit = 2 * heads * q_len * kv_len * hd, "TFLOP/s"
        out.append(Case("attention", f"sdpa {name}", f"h{heads} q{q_len} kv{kv_len} d{hd}", setup,
                        amount, unit))
    return out


def pool(scale, caps):
    b = max(1, int(8 * scale))

    def maxp(d):
        x = torch.randn(b, 64, 112, 112, device=d)
        return lambda: F.max_pool2d(x, 3, 2, 1)

    def avgp3(d):
        x = torch.randn(b, 64, 112, 112, device=d)
        return lambda: F.avg_pool2d(x, 3, 2, 1)

    def avgp(d):
        x = torch.randn(b, 2048, 7, 7, device=d)
        return lambda: F.adaptive_avg_pool2d(x, 1)
    e1, e2 = b * 64 * 112 * 112, b * 2048 * 49
    return [Case("pool", "max_pool2d 3/2", f"{b}x64x112x112", maxp, 4 * (e1 + e1 // 4), "GB/s"),
            Case("pool", "avg_pool2d 3/2", f"{b}x64x112x112", avgp3, 4 * (e1 + e1 // 4), "GB/s"),
            Case("pool", "adaptive_avg_pool2d 1", f"{b}x2048x7x7", avgp, 4 * (e2 + b * 2048), "GB/s")]


def sorting(scale, caps):
    rows = max(1, int(256 * scale))

    def srt(d):
        x = torch.randn(rows, 4096, device=d)
        return lambda: x.sort(dim=1)

    def topk(d):
        x = torch.randn(rows, 32000, device=d)
        return lambda: x.topk(50, dim=1)
    return [Case("sort", "sort rows", f"{rows}x4096", srt, 4 * rows * 4096 * 2 + 8 * rows * 4096, "GB/s"),
            Case("sort", "topk 50", f"{rows}x32000", topk, 4 * rows * 32000, "GB/s")]


def host(quick, caps):
    iters = 200 if quick else 2000

    def tiny(d):
        x = torch.ones(16, device=d)

        def run():
            y = x
            for _ in range(iters):
                y = y + 1.0
            return y
        return run

    def repeated(make_fn):
        # Many small ops of one kind in a row, one synchronize: per-op host + dispatch cost.
        def setup(d):
            fn = make_fn(d)

            def run():
                for _ in range(iters):
                    y = fn()
                return y
            return run
        return setup

    def arange(d):
        return lambda: torch.arange(16, device=d)

    def pad(d):
        x = torch.ones(1, 1, 4, 4, device=d)
        return lambda: F.pad(x, (1, 1, 1, 1), mode="reflect")

    # Decode-shaped ops of a GPT-2-sized model (hidden 768, 12 heads, a 1024-long cache):
    # their per-op host cost is what bounds eager decode of small models.
    def decode_layer_norm(d):
        x, w, b = torch.randn(1, 1, 768, device=d), torch.ones(768, device=d), torch.zeros(768, device=d)
        return lambda: F.layer_norm(x, (768,), w, b)

    def decode_addmm(d):
        x, w, b = torch.randn(1, 768, device=d), torch.randn(768, 2304, device=d), torch.randn(2304, device=d)
        return lambda: torch.addmm(b, x, w)

    def decode_sdpa(d):
        q = torch.randn(1, 12, 1, 64, device=d)
        k, v = torch.randn(1, 12, 1024, 64, device=d), torch.randn(1, 12, 1024, 64, device=d)
        return lambda: F.scaled_dot_product_attention(q, k, v)

    def decode_index_copy(d):
        cache, new = torch.zeros(1, 12, 1024, 64, device=d), torch.randn(1, 12, 1, 64, device=d)
        pos = torch.tensor([5], device=d)
        return lambda: cache.index_copy_(2, pos, new)

    # A dynamic KV cache (transformers' default) grows by one position per token: each
    # step's torch.cat makes a tensor of a size not seen before. With the device's cache
    # emptied first (a first generate) every size is a new allocation; run again, the
    # sizes are cached. Per cat, us.
    def growing_cat(fresh):
        steps = 64 if quick else 256

        def figure(d):
            best = float("inf")
            for _ in range(3):
                new = torch.randn(1, 12, 1, 64, device=d)
                cache = torch.randn(1, 12, 8, 64, device=d)
                if fresh:
                    del cache
                    empty_cache(d)
                    cache = torch.randn(1, 12, 8, 64, device=d)
                sync(d)
                start = CLOCK()
                for _ in range(steps):
                    cache = torch.cat([cache, new], dim=2)
                sync(d)
                best = min(best, (CLOCK() - start) / steps * 1e6)
            return best
        return figure

    def mlp_train_step(d):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.GELU(),
                                    torch.nn.Linear(1024, 10)).to(d)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        x = torch.randn(256, 512, device=d)
        y = torch.randint(0, 10, (256,), device=d)

        def step():
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
        return step
    return [Case("host", "tiny add (y + 1.0)", "16 fp32", tiny, iters, "us",
                 "per-op host + dispatch cost (elementwise generator)"),
            Case("host", "tiny arange", "16 fp32", repeated(arange), iters, "us",
                 "per-op cost, kernel frame (named uniforms, typed key)"),
            Case("host", "tiny reflection pad", "1x1x4x4 fp32", repeated(pad), iters, "us",
                 "per-op cost, nn frame"),
            Case("host", "decode layer_norm", "1x1x768 fp32", repeated(decode_layer_norm), iters, "us",
                 "per-op cost of eager decode's ops"),
            Case("host", "decode addmm", "1x768 @ 768x2304 fp32", repeated(decode_addmm), iters, "us"),
            Case("host", "decode sdpa", "1x12x1x64 over 1024 fp32", repeated(decode_sdpa), iters, "us"),
            Case("host", "decode index_copy_", "1x12x1024x64 cache fp32", repeated(decode_index_copy), iters, "us"),
            Case("host", "decode cat, new sizes", "1x12xLx64 + 1 position fp32", None, 1, "us",
                 "allocation of a size not cached (dynamic KV cache, first generate)",
                 figure=growing_cat(True)),
            Case("host", "decode cat, cached", "1x12xLx64 + 1 position fp32", None, 1, "us",
                 figure=growing_cat(False)),
            Case("host", "MLP train step", "256x512-1024-10 AdamW", mlp_train_step, 1, "us")]


def models(quick, caps):
    """HF generate per model and device, run once and read three ways (tok/s, prefill, memory)."""
    prompt_len, new_tokens = (32, 8) if quick else (512, 32)
    runs = {}

    def run(key, device):
        if (key, device) not in runs:
            sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))
            import e2e_models  # transformers: imported only when this section runs

            spec = e2e_models.MODELS[key]
            init = "cuda" if torch.cuda.is_available() else "cpu"
            model = e2e_models.build_model(spec, tiny=quick, init_device=init).to(device)
            prompt = e2e_models.prompt_tokens(model.config.vocab_size, prompt_len)
            memory = torch.webgpu if device == "webgpu" else torch.cuda
            e2e_models.synchronize(device)
            memory.reset_peak_memory_stats()
            result = e2e_models.greedy(model, prompt, new_tokens, device)
            result["peak_mb"] = memory.max_memory_allocated() / MB
            del model
            e2e_models.release(device)
            runs[(key, device)] = result
        return runs[(key, device)]

    cases = []
    for key, label in (("gpt2", "GPT-2"), ("qwen2.5", "Qwen2.5-0.5B"), ("llama-3.2-1b", "Llama-3.2-1B")):
        shape = f"{label}{' (2 layers)' if quick else ''} fp32"
        cases += [
            Case("models", "generate decode", f"{shape}, {prompt_len}+{new_tokens} tokens", None, 1, "tok/s",
                 figure=lambda d, key=key: run(key, d)["tok_s"]),
            Case("models", "generate prefill", f"{shape}, {prompt_len} tokens", None, 1, "ms",
                 figure=lambda d, key=key: run(key, d)["prefill_ms"]),
            Case("models", "generate peak memory", f"{shape}", None, 1, "MB",
                 "weights + KV cache + temporaries", figure=lambda d, key=key: run(key, d)["peak_mb"])]
    return cases


SECTIONS = ["bandwidth", "reductions", "movement", "gemv", "gemm", "conv", "attention", "pool",
            "sort", "host", "models"]


def all_cases(quick, caps):
    sizes = [4, 16] if quick else [64, 256, 1024]
    scale = 0.125 if quick else 1.0
    return {
        "bandwidth": bandwidth(sizes, caps),
        "reductions": reductions(sizes, caps),
        "movement": movement(scale, caps),
        "gemv": gemv(quick, caps),
        "gemm": gemm(quick, caps),
        "conv": conv(quick, caps),
        "attention": attention(quick, caps),
        "pool": pool(scale, caps),
        "sort": sorting(scale, caps),
        "host": host(quick, caps),
        "models": models(quick, caps),
    }


CLOCK = time.perf_counter
def measure(case, device, quick, phases=None, kernels=None):
    """The case's figure on `device`; with a `phases` dict, also its (issue us, drain us)
    per call there (--phases), and with a `kernels` dict the figure its kernels' GPU time
    alone gives (--kernel-times), each stored under `device`."""
    if case.figure is not None:
        return case.figure(device)
    fn = case.setup(device)
    reps, inner = (3, 3) if quick else (5, 10)
    if case.unit == "us":
        reps, inner = 3, 1
    ms = best_ms(fn, device, reps=reps, inner=inner, warmup_s=0.05 if quick else 0.2, clock=CLOCK)
    if phases is not None and case.unit != "us":
        phases[device] = phases_us(fn, device, reps=reps, inner=inner)
    if kernels is not None and case.unit in ("GB/s", "TFLOP/s"):
        us = kernel_us(fn, device, calls=inner)
        kernels[device] = rate(case, us / 1e3) if us else None
    del fn
    sync(device)
    return rate(case, ms)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cuda", action="store_true", help="also run CUDA, print ratios")
    parser.add_argument("--quick", action="store_true", help="small sizes (software adapters)")
    parser.add_argument("--only", default="", help="comma-separated sections: " + ",".join(SECTIONS))
    parser.add_argument("--match", default="", help="comma-separated substrings: only ops containing one")
    parser.add_argument("--cpu-clock", action="store_true",
                        help="time by this process's CPU seconds (software adapters on a busy machine)")
    parser.add_argument("--json", default="", help="write the rows to this file")
    parser.add_argument("--phases", action="store_true",
                        help="also print each device's host time per call to issue it and to drain it "
                             "(the synchronize after a batch), in us")
    parser.add_argument("--kernel-times", action="store_true",
                        help="also print the figure each device's kernels give by their GPU time alone "
                             "(timestamp queries / CUPTI), and its ratio: what the kernels reach "
                             "without the host's issue time and the synchronize")
    parser.add_argument("--spin-wait-us", type=int, default=None,
                        help="how long our waits on the GPU poll before blocking "
                             "(TORCH_WEBGPU_SPIN_WAIT_US; 0: block at once)")
    parser.add_argument("--cudnn-fp32", action="store_true",
                        help="CUDA's convolutions in float32 too (cuDNN's default is TF32)")
    args = parser.parse_args()
    selected = [s for s in args.only.split(",") if s] or SECTIONS
    unknown = set(selected) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)}; known: {','.join(SECTIONS)}")
    use_cuda = args.cuda and torch.cuda.is_available()
    if args.cuda and not use_cuda:
        print("--cuda: no CUDA device here, ratios left out", file=sys.stderr)
    if args.cpu_clock:
        global CLOCK
        CLOCK = time.process_time
    if args.spin_wait_us is not None:
        torch_webgpu._C._set_spin_wait_us(args.spin_wait_us)
    torch.backends.cuda.matmul.allow_tf32 = False
    if args.cudnn_fp32:
        torch.backends.cudnn.allow_tf32 = False
    caps = torch.webgpu.get_device_properties()
    print(f"webgpu: {caps.name} ({caps.backend}; subgroups {caps.subgroups}, shader-f16 "
          f"{caps.shader_f16}); cuda: {torch.cuda.get_device_name() if use_cuda else 'not run'}; "
          f"torch {torch.__version__}; {'quick' if args.quick else 'full'} sizes")
    head = f"{'section':10s} {'op':22s} {'shape':34s} {'ours':>9s} {'cuda':>9s} {'ratio':>6s} {'unit':7s} limit"
    print(head)
    print("-" * len(head))
    rows = []
    phases = {} if args.phases else None  # device -> (issue us, drain us) of the last case
    kernels = {} if args.kernel_times else None  # device -> the case's figure by kernel time
    cases = all_cases(args.quick, caps)
    for section in selected:
        for case in cases[section]:
            if args.match and not any(m in case.op for m in args.match.split(",")):
                continue
            row = {"section": section, "op": case.op, "shape": case.shape, "unit": case.unit,
                   "limit": case.limit, "ours": None, "cuda": None, "ratio": None}
            try:
                row["ours"] = measure(case, "webgpu", args.quick, phases, kernels)
            except Exception as e:  # reported in the table, never hidden
                row["limit"] = f"ours failed: {type(e).__name__}: {str(e).splitlines()[0][:80]}"
            if use_cuda:
                try:
                    row["cuda"] = measure(case, "cuda", args.quick, phases, kernels)
                except Exception as e:
                    row["limit"] += f" cuda failed: {str(e).splitlines()[0][:60]}"
            if row["ours"] and row["cuda"]:
                row["ratio"] = (row["cuda"] / row["ours"] if case.unit in LOWER_IS_BETTER
                                else row["ours"] / row["cuda"])
            fmt = lambda v: f"{v:9.4g}" if v is not None else f"{'-':>9s}"  # noqa: E731
            ratio = f"{row['ratio']:6.2f}" if row["ratio"] is not None else f"{'-':>6s}"
            phase_text = ""
            for dev, name in (("webgpu", "ours"), ("cuda", "cuda")):
                if phases and dev in phases:
                    issue, drain = phases.pop(dev)
                    row[f"{name}_issue_us"], row[f"{name}_drain_us"] = issue, drain
                    phase_text += f" {name} issue/drain {issue:.1f}/{drain:.1f} us"
            if kernels:
                ours_k, cuda_k = kernels.pop("webgpu", None), kernels.pop("cuda", None)
                row["ours_kernels"], row["cuda_kernels"] = ours_k, cuda_k
                if ours_k or cuda_k:
                    phase_text += f" kernels ours/cuda {fmt(ours_k).strip()}/{fmt(cuda_k).strip()}"
                if ours_k is None and not caps.timestamp_query:
                    phase_text += " kernels: no timestamp-query on this adapter"
                if ours_k and cuda_k:
                    row["kernel_ratio"] = (cuda_k / ours_k if case.unit in LOWER_IS_BETTER
                                           else ours_k / cuda_k)
                    phase_text += f" ({row['kernel_ratio']:.2f})"
            print(f"{section:10s} {case.op:22s} {case.shape:34s} {fmt(row['ours'])} {fmt(row['cuda'])} "
                  f"{ratio} {case.unit:7s} {row['limit']}{phase_text}", flush=True)
            rows.append(row)
            torch.webgpu.empty_cache()
    print("ratio: ours / CUDA (1.0 = as fast as CUDA; for us, ms and MB, CUDA's figure over ours)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"adapter": caps.name, "backend": caps.backend, "quick": args.quick,
                       "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
