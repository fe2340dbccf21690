"""Peak device memory of an HF generate run on webgpu against the ideal: the peak of live
tensor storage bytes of the same run on the CPU, each storage counted once at its exact
size (what an allocator with no rounding and no extra temporaries would need).

    PYTHONPATH=python python3 scripts/generate_memory.py --model qwen2.5 --layers 2 --prompt 128

Prints the CPU ideal, then webgpu's max_memory_allocated (rounded block sizes, what
torch.cuda.max_memory_allocated reports on CUDA), its requested-bytes peak (the same live
tensors at exact size) and max_memory_reserved, in MiB, and their ratios to the ideal.
"""
import argparse
import copy
import os
import sys
import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_models  # noqa: E402

MiB = 1 << 20


class LiveStorageBytes(TorchDispatchMode):
    """Tracks the bytes of live storages made by ops run under it (plus any registered with
    track()), each storage once at its current size, and their peak."""

    def __init__(self):
        super().__init__()
        self.live = 0
        self.peak = 0
        self._counted = {}  # id(storage) -> [bytes counted]; entries leave when it dies

    def track(self, tensor):
        storage = tensor.untyped_storage()
        nbytes = storage.nbytes()
        record = self._counted.get(id(storage))
        if record is None:
            record = self._counted[id(storage)] = [0]
            weakref.finalize(storage, self._release, id(storage), record)
        self.live += nbytes - record[0]  # a resize_ counts its growth
        record[0] = nbytes
        self.peak = max(self.peak, self.live)

    def _release(self, key, record):
        self.live -= record[0]
        self._counted.pop(key, None)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                self.track(t)
        return out


def build(key, layers, **overrides):
    """The model's real widths and vocabulary with seeded weights, at `layers` layers (0:
    its own count), with any config fields in `overrides` replaced."""
    spec = copy.deepcopy(e2e_models.MODELS[key])
    if layers:
        spec.config[e2e_models._field(spec.config, e2e_models.LAYERS)] = layers
    spec.config.update(overrides)
    return e2e_models.build_model(spec)


def cpu_ideal(model, prompt, new_tokens):
    """Peak live storage bytes of generate on the CPU, weights included."""
    tracker = LiveStorageBytes()
    for t in list(model.parameters()) + list(model.buffers()):
        tracker.track(t)
    with tracker:
        tokens = e2e_models.greedy(model, prompt, new_tokens, "cpu", timed=False)["tokens"]
    return tracker.peak, tokens


def webgpu_peaks(model, prompt, new_tokens):
    model = model.to("webgpu")
    torch.webgpu.synchronize()
    torch.webgpu.reset_peak_memory_stats()
    tokens = e2e_models.greedy(model, prompt, new_tokens, "webgpu", timed=False)["tokens"]
    stats = torch.webgpu.memory_stats()
    return {"allocated": stats["allocated_bytes.all.peak"],
            "requested": stats["requested_bytes.all.peak"],
            "reserved": stats["reserved_bytes.all.peak"]}, tokens


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen2.5", choices=sorted(e2e_models.MODELS))
    parser.add_argument("--layers", type=int, default=2, help="0: the model's own count")
    parser.add_argument("--prompt", type=int, default=128)
    parser.add_argument("--tokens", type=int, default=8)
    args = parser.parse_args(argv)
    model = build(args.model, args.layers)
    prompt = e2e_models.prompt_tokens(model.config.vocab_size, args.prompt)
    ideal, cpu_tokens = cpu_ideal(model, prompt, args.tokens)
    peaks, tokens = webgpu_peaks(model, prompt, args.tokens)
    print(f"{args.model}, {args.layers or 'all'} layers, prompt {args.prompt} + {args.tokens} tokens"
          f" (tokens {'match' if tokens == cpu_tokens else 'DIFFER'})")
    print(f"  CPU ideal (live storage bytes) {ideal / MiB:9.1f} MiB")
    for name, value in peaks.items():
        print(f"  webgpu peak {name:<18} {value / MiB:9.1f} MiB  {value / ideal:.3f}x ideal")


if __name__ == "__main__":
    main()
