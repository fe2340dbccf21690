"""Graph replay vs eager on the webgpu device (and, with --cuda, CUDA eager vs CUDA graphs).

1. Host cost per dispatch: a chain of 200 small elementwise ops, issued eagerly (ATen
   dispatch + kernel launch + recording, submitted at the synchronize) vs one replay() of
   the captured chain (encoding + submit). Reports microseconds per op: eager issue time,
   the replay() call (and its encoding part without the driver's submit, which on GL
   backends runs the work), and each end to end.
2. Decode step of a decoder at Qwen2.5-0.5B sizes (24 layers, hidden 896, 14 heads / 2 KV
   heads, MLP 4864, vocab 151936; seeded random weights, RMSNorm, rotary embeddings, a
   static KV cache written with index_copy_ at a device-held position, GQA attention
   over the masked cache): tokens per second eager vs replayed, and whether both produce
   the same greedy tokens.

    python3 benchmarks/graph_replay.py [--layers 24] [--tokens 32] [--dtype float32] [--cuda]
"""
import argparse
import time

import torch
import torch.nn.functional as F

import torch_webgpu  # noqa: F401
from timing import sync


# ---- 1. host cost per dispatch --------------------------------------------------------


def chain(x, n):
    y = x
    for i in range(n):
        y = y * 1.0001 if i % 2 else y + 1.0
    return y


def chain_costs(device, n_ops=200, reps=20):
    x = torch.ones(256, device=device)
    chain(x, n_ops)
    sync(device)
    # Eager: host time to issue, then end to end.
    host, total = float("inf"), float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        chain(x, n_ops)
        issued = time.perf_counter()
        sync(device)
        host = min(host, issued - start)
        total = min(total, time.perf_counter() - start)
    g = _new_graph(device)
    with _graph_ctx(device, g):
        out = chain(x, n_ops)
    g.replay()
    sync(device)
    r_host, r_total, r_encode = float("inf"), float("inf"), float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        g.replay()
        issued = time.perf_counter()
        sync(device)
        r_host = min(r_host, issued - start)
        r_total = min(r_total, time.perf_counter() - start)
        if device == "webgpu":  # replay's own time less the driver's submit
            all_us, submit_us = g._graph.last_replay_us()
            r_encode = min(r_encode, (all_us - submit_us) * 1e-6)
    torch.testing.assert_close(out.cpu(), chain(x, n_ops).cpu())
    us = 1e6 / n_ops
    return dict(eager_host=host * us, eager_total=total * us, replay_host=r_host * us,
                replay_encode=r_encode * us, replay_total=r_total * us)


def _new_graph(device):
    return torch.cuda.CUDAGraph() if device == "cuda" else torch.webgpu.WebGPUGraph()


def _graph_ctx(device, g):
    return torch.cuda.graph(g) if device == "cuda" else torch.webgpu.graph(g)


# ---- 2. decode step -------------------------------------------------------------------


class Decoder:
    """A Qwen2-shaped decoder as plain tensors; step() is capture-safe (no host reads)."""

    def __init__(self, device, dtype, layers, hidden, heads, kv_heads, mlp, vocab, max_len,
                 seed=0, fused_norm=False):
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, hidden // heads
        if fused_norm:  # F.rms_norm: one kernel on webgpu and on cuda, six as HF writes it
            self.rms_norm = lambda x, weight, eps=1e-6: F.rms_norm(x, x.shape[-1:], weight, eps)
        self.max_len = max_len
        gen = torch.Generator().manual_seed(seed)

        def w(*shape, scale=0.02):  # seeded on the CPU: every device gets the same weights
            return (torch.randn(*shape, generator=gen) * scale).to(device=device, dtype=dtype)

        kv = kv_heads * self.head_dim
        self.embed = w(vocab, hidden)
        self.layers = [dict(
            norm1=torch.ones(hidden, device=device, dtype=dtype),
            q=w(hidden, hidden), q_bias=w(hidden), k=w(kv, hidden), k_bias=w(kv),
            v=w(kv, hidden), v_bias=w(kv), o=w(hidden, hidden),
            norm2=torch.ones(hidden, device=device, dtype=dtype),
            gate=w(mlp, hidden), up=w(mlp, hidden), down=w(hidden, mlp)) for _ in range(layers)]
        self.norm = torch.ones(hidden, device=device, dtype=dtype)
        shape = (layers, 1, kv_heads, max_len, self.head_dim)
        self.k_cache = torch.zeros(shape, device=device, dtype=dtype)
        self.v_cache = torch.zeros(shape, device=device, dtype=dtype)
        inv = 1.0 / (1e6 ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))
        angles = torch.outer(torch.arange(max_len).float(), inv)
        angles = torch.cat([angles, angles], dim=-1)
        self.cos = angles.cos().to(device=device, dtype=dtype)
        self.sin = angles.sin().to(device=device, dtype=dtype)
        self.positions = torch.arange(max_len, device=device)

    @staticmethod
    def rms_norm(x, weight, eps=1e-6):
        return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps).to(x.dtype) * weight

    def rope(self, x, cos, sin):
        half = self.head_dim // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * cos + rotated * sin

    def step(self, token, pos):
        """token, pos: int64 [1] device tensors; writes the greedy next token, bumps pos."""
        x = self.embed.index_select(0, token).view(1, 1, -1)
        cos = self.cos.index_select(0, pos).view(1, 1, 1, -1)
        sin = self.sin.index_select(0, pos).view(1, 1, 1, -1)
        mask = (self.positions <= pos).view(1, 1, 1, -1)
        for i, L in enumerate(self.layers):
            h = self.rms_norm(x, L["norm1"])
            q = F.linear(h, L["q"], L["q_bias"]).view(1, 1, self.heads, -1).transpose(1, 2)
            k = F.linear(h, L["k"], L["k_bias"]).view(1, 1, self.kv_heads, -1).transpose(1, 2)
            v = F.linear(h, L["v"], L["v_bias"]).view(1, 1, self.kv_heads, -1).transpose(1, 2)
            q, k = self.rope(q, cos, sin), self.rope(k, cos, sin)
            self.k_cache[i].index_copy_(2, pos, k)
            self.v_cache[i].index_copy_(2, pos, v)
            a = F.scaled_dot_product_attention(q, self.k_cache[i], self.v_cache[i],
                                               attn_mask=mask, enable_gqa=True)
            x = x + F.linear(a.transpose(1, 2).reshape(1, 1, -1), L["o"])
            h = self.rms_norm(x, L["norm2"])
            x = x + F.linear(F.silu(F.linear(h, L["gate"])) * F.linear(h, L["up"]), L["down"])
        logits = F.linear(self.rms_norm(x, self.norm), self.embed).view(-1)
        token.copy_(logits.argmax().view(1))
        pos.add_(1)


def decode(device, args):
    dtype = getattr(torch, args.dtype)
    model = Decoder(device, dtype, args.layers, 896, 14, 2, 4864, args.vocab,
                    args.tokens + 8, fused_norm=args.norm == "fused")
    token = torch.tensor([1], device=device)
    pos = torch.zeros(1, dtype=torch.int64, device=device)

    def restart():
        token.fill_(1)
        pos.zero_()

    with torch.no_grad():
        model.step(token, pos)  # warm up (pipelines, caches)
        restart()
        sync(device)
        start = time.perf_counter()
        eager_tokens = []
        for _ in range(args.tokens):
            model.step(token, pos)
            eager_tokens.append(int(token.item()))
        eager_s = time.perf_counter() - start

        restart()
        g = _new_graph(device)
        with _graph_ctx(device, g):
            model.step(token, pos)
        restart()
        sync(device)
        start = time.perf_counter()
        graph_tokens = []
        for _ in range(args.tokens):
            g.replay()
            graph_tokens.append(int(token.item()))
        graph_s = time.perf_counter() - start
    dispatches = g.num_dispatches() if device == "webgpu" else None
    return dict(eager=args.tokens / eager_s, graph=args.tokens / graph_s,
                same=eager_tokens == graph_tokens, dispatches=dispatches,
                tokens=graph_tokens[:8])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--layers", type=int, default=24)
    p.add_argument("--vocab", type=int, default=151936)
    p.add_argument("--tokens", type=int, default=32)
    p.add_argument("--dtype", default="float32")
    p.add_argument("--norm", choices=["hf", "fused"], default="hf",
                   help="RMSNorm as HF's Qwen2 writes it (six ops) or F.rms_norm (one kernel)")
    p.add_argument("--cuda", action="store_true")
    p.add_argument("--skip-decode", action="store_true")
    args = p.parse_args()
    devices = ["webgpu"] + (["cuda"] if args.cuda else [])
    print(f"adapter: {torch.webgpu.get_device_name()}")
    for device in devices:
        c = chain_costs(device)
        encode = (f" (encoding {c['replay_encode']:.2f}, the rest in the driver's submit)"
                  if device == "webgpu" else "")
        print(f"[{device}] 200-op chain, us/op: eager issue {c['eager_host']:.2f}, "
              f"eager end-to-end {c['eager_total']:.2f} | replay() call {c['replay_host']:.2f}"
              f"{encode}, replay end-to-end {c['replay_total']:.2f}")
    if args.skip_decode:
        return
    for device in devices:
        d = decode(device, args)
        extra = f", {d['dispatches']} dispatches/token" if d["dispatches"] else ""
        print(f"[{device}] decode ({args.layers} layers, vocab {args.vocab}, {args.dtype}, "
              f"norm {args.norm}"
              f"{extra}): eager {d['eager']:.2f} tok/s, graph {d['graph']:.2f} tok/s, "
              f"speedup {d['graph'] / d['eager']:.2f}x, same tokens: "
              f"{'PASS' if d['same'] else 'FAIL'} {d['tokens']}")


if __name__ == "__main__":
    main()
