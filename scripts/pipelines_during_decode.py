"""Which kernels compile a new pipeline while HF `generate` decodes (dynamic KV cache):
a compile in the middle of a generation costs 30-190 ms on NVIDIA's driver, so kernel
variants must not be chosen by a length that grows by one per token.

Runs each architecture of scripts/e2e_models.py (seeded weights; `--tiny` for small
configs), warms up with a 4-token generate, then generates `--tokens` more and prints, per
step that compiled one, the sequence length and the kernels (by TORCH_WEBGPU_DUMP_SHADERS'
files). Set TORCH_WEBGPU_ADAPTER_KIND=gpu on a software adapter to choose kernels as a GPU
would:
    TORCH_WEBGPU_ADAPTER_KIND=gpu python3 scripts/pipelines_during_decode.py --tiny --tokens 300
"""
import argparse
import os
import sys
import tempfile

import torch
import transformers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_models  # noqa: E402


class NewShaders(transformers.StoppingCriteria):
    """Asked after every token: notes the shader files written since the previous one."""

    def __init__(self, folder):
        self.folder = folder
        self.seen = set(os.listdir(folder))
        self.events = []

    def __call__(self, input_ids, scores, **kwargs):
        now = set(os.listdir(self.folder))
        new, self.seen = now - self.seen, now
        if new:  # file names end in a counter: the kernel's name is the rest
            self.events.append((input_ids.shape[1], sorted(f.rsplit("_", 1)[0] for f in new)))
        return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(e2e_models.MODELS))
    parser.add_argument("--tokens", type=int, default=120)
    parser.add_argument("--tiny", action="store_true")
    args = parser.parse_args(argv)
    folder = os.environ.get("TORCH_WEBGPU_DUMP_SHADERS")
    if not folder:  # the runtime reads it once, at start: set it before the device starts
        folder = tempfile.mkdtemp(prefix="shaders_")
        os.environ["TORCH_WEBGPU_DUMP_SHADERS"] = folder
    for key in args.models.split(","):
        model = e2e_models.build_model(e2e_models.MODELS[key], tiny=args.tiny).to("webgpu")
        prompt = e2e_models.prompt_tokens(model.config.vocab_size).to("webgpu")
        e2e_models._generate(model, prompt, 4)
        watch = NewShaders(folder)
        e2e_models._generate(model, prompt, args.tokens, watch)
        print(f"{key}: {watch.events or 'no new pipelines'}", flush=True)
        del model
        torch.webgpu.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
