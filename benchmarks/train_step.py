"""Training steps, eager and through torch.compile, on webgpu beside CUDA on the same GPU.

One step: forward, loss, backward, AdamW update (the update compiled too where the step
is; modes eager, compiled, reduce-overhead: forward, backward and update replayed as graphs), for models with dropout in training mode (compiled random draws) and an optimizer
whose step count is a CPU tensor (compiled CPU scalars):
- mlp: 3 linears 1024 wide with GELU and dropout, batch 256;
- block: a transformer encoder layer (d 256, 8 heads, FFN 1024, dropout 0.1), 16 x 128 tokens;
- gpt2: HF GPT-2 of 4 layers, d 256, 8 heads, vocabulary 8192, 8 x 128 tokens (seeded
  random weights), causal LM loss.
Prints ms per step (best of --reps batches of --inner steps), the first step's seconds
(compile included) and its loss (same weights and data on both devices; the dropout masks
differ, so the losses agree only roughly).

    python3 benchmarks/train_step.py [--cuda] [--models mlp,block,gpt2] [--modes ...] [--quick]
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_webgpu  # noqa: F401
from torch._dynamo.utils import counters
from timing import best_ms, sync


def build(name, device, quick):
    torch.manual_seed(0)
    if name == "mlp":
        width, batch = (128, 32) if quick else (1024, 256)
        model = nn.Sequential(nn.Linear(width, width), nn.GELU(), nn.Dropout(0.1),
                              nn.Linear(width, width), nn.GELU(), nn.Dropout(0.1), nn.Linear(width, 10))
        x, y = torch.randn(batch, width), torch.randint(0, 10, (batch,))

        def loss_fn(m, x, y):
            return F.cross_entropy(m(x), y)
    elif name == "block":
        d, tokens = (64, 16) if quick else (256, 128)
        model = nn.TransformerEncoderLayer(d, 8, 4 * d, dropout=0.1, batch_first=True)
        x, y = torch.randn(4 if quick else 16, tokens, d), torch.randn(4 if quick else 16, tokens, d)

        def loss_fn(m, x, y):
            return F.mse_loss(m(x), y)
    else:
        from transformers import GPT2Config, GPT2LMHeadModel

        layers, d, vocab, tokens = (2, 64, 512, 32) if quick else (4, 256, 8192, 128)
        config = GPT2Config(n_layer=layers, n_embd=d, n_head=8, vocab_size=vocab, n_positions=tokens,
                            bos_token_id=0, eos_token_id=0)
        model = GPT2LMHeadModel(config)
        x = torch.randint(0, vocab, (2 if quick else 8, tokens))
        y = x

        def loss_fn(m, x, y):
            return m(x, labels=y).loss
    return model.to(device).train(), x.to(device), y.to(device), loss_fn


MODES = ("eager", "compiled", "reduce-overhead")


def step_fn(name, device, quick, mode):
    model, x, y, loss_fn = build(name, device, quick)
    # reduce-overhead: the step count on the device (capturable), so the compiled update
    # computes on the GPU alone and replays as a graph, as CUDA graphs need too.
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, capturable=mode == "reduce-overhead")
    if mode == "eager":
        forward, update = loss_fn, opt.step
    else:
        kwargs = {"mode": mode} if mode != "compiled" else {}
        forward, update = torch.compile(loss_fn, **kwargs), torch.compile(opt.step, **kwargs)
    last = {}

    def step():
        if mode == "reduce-overhead":  # (cuda's graph trees: a new step, outputs may go)
            torch.compiler.cudagraph_mark_step_begin()
        loss = forward(model, x, y)
        loss.backward()
        update()
        opt.zero_grad(set_to_none=True)
        if "loss" not in last:  # (replayed outputs are overwritten by the next step)
            last["loss"] = loss.item()
    return step, last


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cuda", action="store_true")
    parser.add_argument("--models", default="mlp,block,gpt2")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--inner", type=int, default=5)
    parser.add_argument("--modes", default=",".join(MODES))
    args = parser.parse_args()
    devices = ["webgpu"] + (["cuda"] if args.cuda else [])
    print(f"adapter: {torch.webgpu.get_device_name()}" + (f" | cuda: {torch.cuda.get_device_name()}" if args.cuda else ""))
    print(f"{'model':6} {'mode':15} " + " ".join(f"{d + ' ms':>12} {d + ' 1st s':>12} {d + ' loss':>11}" for d in devices)
          + ("  webgpu/cuda" if args.cuda else ""))
    for name in args.models.split(","):
        for mode in args.modes.split(","):
            row, times, replays = [], {}, ""
            for device in devices:
                torch._dynamo.reset()
                step, last = step_fn(name, device, args.quick, mode)
                start = time.perf_counter()
                step()
                sync(device)
                first = time.perf_counter() - start
                first_loss = last["loss"]
                ms = best_ms(step, device, reps=args.reps, inner=args.inner, warmup_s=0.5)
                times[device] = ms
                if device == "webgpu" and mode == "reduce-overhead":
                    stats = counters["webgpu"]
                    replays = (f"  (webgpu: {stats['graph_replays']} replays, "
                               f"{stats['graph_fallbacks']} graphs without)")
                    stats.clear()
                row.append(f"{ms:12.2f} {first:12.1f} {first_loss:11.4f}")
            ratio = f"  {times['cuda'] / times['webgpu']:.2f}x" if args.cuda else ""
            print(f"{name:6} {mode:15} " + " ".join(row) + ratio + replays, flush=True)


if __name__ == "__main__":
    main()
