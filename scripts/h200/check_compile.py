"""torch.compile on a real GPU (H200, Dawn/Vulkan, torch 2.11): what llvmpipe and torch 2.13
cannot show.

- the Inductor hooks of torch 2.11 (registration, WGSL codegen) on tests/python/test_compile.py;
- compiled vs eager timings on the GPU: a pointwise chain, softmax and layer_norm rows at
  64 MB, and a transformer block forward (ms per call, ratio);
- the kernel entry's host cost per call against eager torch.add (benchmarks/wgsl_entry.py).
Prints PASS/FAIL lines and numbers. Run from the repository root:
  PYTHONPATH=python python3 scripts/h200/check_compile.py
"""
import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import torch_webgpu  # noqa: E402,F401
from timing import best_ms  # noqa: E402

failures = 0


def report(name, ok, detail=""):
    global failures
    failures += not ok
    print(f"{'PASS' if ok else 'FAIL'} {name} {detail}", flush=True)


def main():
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "test_compile.py"],
                           cwd=os.path.join(ROOT, "tests", "python"), env=env,
                           capture_output=True, text=True)
    report("tests/python/test_compile.py", tests.returncode == 0,
           tests.stdout.strip().splitlines()[-1] if tests.stdout.strip() else tests.stderr[-2000:])
    if tests.returncode:
        print(tests.stdout[-6000:])

    rows = 64 * 2**20 // 4 // 1024
    x = torch.randn(rows, 1024, device="webgpu")
    w, b = torch.randn(1024, device="webgpu"), torch.randn(1024, device="webgpu")
    from test_compile import Block

    block = Block(256, 8).to("webgpu").eval()
    tokens = torch.randn(8, 128, 256, device="webgpu")
    cases = {
        "pointwise chain (64 MB)": (lambda x: ((x.sin() * 2 + 1).relu() * x).sigmoid(), (x,)),
        "softmax rows (64 MB)": (lambda x: torch.softmax(x, -1), (x,)),
        "layer_norm rows (64 MB)": (lambda x: F.layer_norm(x, (1024,), w, b), (x,)),
        "transformer block fwd": (block, (tokens,)),
    }
    print(f"{'case':<28}{'eager ms':>10}{'compiled ms':>13}{'speedup':>9}")
    with torch.no_grad():
        for name, (fn, args) in cases.items():
            compiled = torch.compile(fn)
            ok = torch.allclose(compiled(*args).cpu(), fn(*args).cpu(), atol=1e-3, rtol=1e-3)
            eager = best_ms(lambda: fn(*args), "webgpu")
            comp = best_ms(lambda: compiled(*args), "webgpu")
            print(f"{name:<28}{eager:>10.3f}{comp:>13.3f}{eager / comp:>9.2f}")
            report(f"compiled matches eager: {name}", ok)

    # A GPT-2 training step (random weights) compiled whole, against the CPU.
    import copy

    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=256, n_head=8, vocab_size=1000,
                                       resid_pdrop=0, embd_pdrop=0, attn_pdrop=0))
    device_model = copy.deepcopy(model).to("webgpu")
    ids = torch.randint(0, 1000, (4, 64))
    model(ids, labels=ids).loss.backward()
    torch.compile(device_model)(ids.to("webgpu"), labels=ids.to("webgpu")).loss.backward()
    worst = max((p.grad - q.grad.cpu()).abs().max().item()
                for p, q in zip(model.parameters(), device_model.parameters()))
    report("GPT-2 training step compiled: grads match the CPU", worst < 1e-4, f"worst {worst:.3g}")

    bench = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "wgsl_entry.py")],
                           env=env, capture_output=True, text=True)
    print(bench.stdout, bench.stderr[-2000:])
    ratios = [float(line.split()[-1]) for line in bench.stdout.splitlines()
              if line.startswith("WGSLKernel")]
    report("kernel entry host cost <= 1.5x eager add", bool(ratios) and max(ratios) <= 1.5,
           f"ratios {ratios}")
    print(f"{failures} failure(s)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
