"""The compile fuzzer in CI: random programs compiled on webgpu must match eager on the CPU.

Each test runs a block of seeds of torch_webgpu.testing.compile_fuzz (random chains of
pointwise ops, reductions, views, indexing, casts, matmul and normalizations over random
shapes, layouts and dtypes) and fails with the source of every program that mismatched or
raised. TORCH_WEBGPU_FUZZ_SEED shifts the seeds (default 0), to explore in a local run.
"""
import faulthandler
import os

import pytest

from torch_webgpu.testing import compile_fuzz

SEEDS_PER_BLOCK = 25
BLOCKS = 12  # 300 programs with static shapes: about a minute with -n 2
DYNAMIC_BLOCKS = 2  # and 50 with dynamic=True (symbolic sizes in the kernels)
FIRST_SEED = int(os.environ.get("TORCH_WEBGPU_FUZZ_SEED", "0"))
DYNAMIC_SEED = 5000  # other programs than the static blocks'


@pytest.mark.parametrize("block", [("static", b) for b in range(BLOCKS)]
                         + [("dynamic", b) for b in range(DYNAMIC_BLOCKS)],
                         ids=lambda b: f"{b[0]}{b[1]}")
def test_compiled_programs_match_eager(block):
    shapes, index = block
    start = FIRST_SEED + index * SEEDS_PER_BLOCK + (DYNAMIC_SEED if shapes == "dynamic" else 0)
    # A hang inside C++ cannot be interrupted: past this limit the worker exits.
    faulthandler.dump_traceback_later(600, exit=True)
    try:
        failed = compile_fuzz.failures(range(start, start + SEEDS_PER_BLOCK),
                                       dynamic=True if shapes == "dynamic" else None)
    finally:
        faulthandler.cancel_dump_traceback_later()
    report = "\n".join(f"seed {o.seed}: {o.status}: {o.detail}\n{o.source}" for o in failed)
    assert not failed, f"{len(failed)} of {SEEDS_PER_BLOCK} programs failed:\n{report}"


def test_generator_is_deterministic():
    # A seed names one program (failure reports are reproducible from the seed alone).
    a, b = compile_fuzz.generate(1234), compile_fuzz.generate(1234)
    assert a.source == b.source and a.inputs == b.inputs
    x, y = a.make_inputs(), b.make_inputs()
    assert all(s.stride() == t.stride() and s.equal(t) for s, t in zip(x, y))


def test_generator_covers_the_op_families():
    # Over a few hundred seeds every family the fuzzer claims appears.
    sources = "\n".join(compile_fuzz.generate(s).source for s in range(300))
    for needle in ("torch.sum(", "torch.mean(", "torch.amax(", "torch.argmax(", "torch.var(",
                   "keepdim=True", ".permute(", ".transpose(", ".expand(", "torch.gather(",
                   "torch.index_select(", "[:, x", "torch.where(", ".masked_fill(",
                   ".to(torch.", " @ ", "torch.softmax(", "F.layer_norm(", "torch.cat("):
        assert needle in sources, needle
    specs = [s for seed in range(300) for s in compile_fuzz.generate(seed).inputs]
    assert {s.dtype for s in specs} >= set(compile_fuzz.DTYPES)
    assert {s.layout for s in specs} == {"contiguous", "permuted", "sliced", "expanded"}
    assert any(0 in s.shape for s in specs) and any(s.shape == () for s in specs)
