"""Mixed precision on a real GPU (H200, Dawn/Vulkan): checks what llvmpipe cannot show.

- the scale update's exact rounding (integer arithmetic: float(double(scale) * factor)),
  over long random growth/backoff sequences;
- unscale / inf detection exactly as the CPU's, for float32/float16/bfloat16 grads;
- autocast output dtypes, and an MLP + conv net trained 20 steps under
  autocast(float16) + GradScaler with the CPU fallback disabled, against the CPU.
Prints PASS/FAIL lines and timings. Run from the repository root:
  PYTHONPATH=python python3 scripts/h200/check_amp.py
"""
import copy
import os
import sys
import time

os.environ["TORCH_WEBGPU_DISABLE_CPU_FALLBACK"] = "1"
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "python"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import torch_webgpu  # noqa: E402,F401

DEV = "webgpu"
failures = 0


def report(name, ok, detail=""):
    global failures
    failures += not ok
    print(f"{'PASS' if ok else 'FAIL'} {name} {detail}", flush=True)


def update_sequence(device, found, growth, backoff, interval, init):
    scale = torch.tensor(init, device=device)
    tracker = torch.tensor(0, dtype=torch.int32, device=device)
    out = []
    for f in found:
        torch._amp_update_scale_(scale, tracker, torch.tensor(f, device=device), growth, backoff,
                                 interval)
        out.append((scale.item(), tracker.item()))
    return out


g = torch.Generator().manual_seed(7)
found = [float(v) for v in (torch.rand(200, generator=g) < 0.2)]
for growth, backoff, interval in [(2.0, 0.5, 3), (1.1, 0.9, 2), (3.7, 0.3, 1), (1.0001, 0.9999, 1)]:
    for init in [65536.0, 1.0 / 3.0, 3.0e38, 1e-30]:
        d = update_sequence(DEV, found, growth, backoff, interval, init)
        c = update_sequence("cpu", found, growth, backoff, interval, init)
        bad = sum(a != b for a, b in zip(d, c))
        report(f"update_scale growth={growth} backoff={backoff} init={init:g}", bad == 0,
               f"({bad} of {len(c)} steps differ)")

for dtype in [torch.float32, torch.float16, torch.bfloat16]:
    for inv in [1.0, 0.125, 1.0 / 3.0, 2.0**-20]:
        grads = [torch.randn(100003, generator=g).mul(300).to(dtype),
                 torch.randn(64, 33, generator=g).to(dtype).t()]
        grads[0][77777] = float("inf")
        cpu = [t.clone() for t in grads]
        cf = torch.tensor(0.0)
        torch._amp_foreach_non_finite_check_and_unscale_(cpu, cf, torch.tensor(inv))
        dev = [t.to(DEV) for t in grads]
        df = torch.tensor(0.0, device=DEV)
        torch._amp_foreach_non_finite_check_and_unscale_(dev, df, torch.tensor(inv, device=DEV))
        same = all(torch.equal(a.cpu(), b) for a, b in zip(dev, cpu)) and df.item() == cf.item()
        report(f"unscale {dtype} inv={inv:g}", same)

a, b = torch.randn(64, 64, device=DEV), torch.randn(64, 64, device=DEV)
with torch.autocast(DEV):
    mm, sm = a @ b, torch.softmax(a @ b, 1)
report("autocast dtypes", mm.dtype == torch.float16 and sm.dtype == torch.float32)

# Unsupported dtype: ours warns and disables (PyTorch's rule for non-CUDA backends);
# print what CUDA does on this machine for comparison.
import warnings  # noqa: E402

for device in [DEV] + (["cuda"] if torch.cuda.is_available() else []):
    x = torch.randn(8, 8, device=device)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with torch.autocast(device, dtype=torch.float64):
                out = f"{(x @ x).dtype}"
        except Exception as e:  # noqa: BLE001
            out = f"{type(e).__name__}: {e}"
    msgs = [str(w.message).splitlines()[0] for w in caught]
    print(f"INFO autocast({device!r}, float64): result {out}; warnings {msgs}")
    if device == DEV:
        report("autocast float64 warns and disables", out == "torch.float32" and len(msgs) == 1)

import test_amp as T  # noqa: E402

for kind in ["mlp", "convnet"]:
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    if kind == "mlp":
        model = T._Mlp()
        batches = [(torch.randn(16, 16, generator=gen), torch.randint(0, 5, (16,), generator=gen))
                   for _ in range(4)]
        opt = lambda p: torch.optim.AdamW(p, lr=1e-2)  # noqa: E731
    else:
        model = T._ConvNet()
        batches = [(torch.randn(4, 3, 8, 8, generator=gen), torch.randint(0, 4, (4,), generator=gen))
                   for _ in range(4)]
        opt = lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9)  # noqa: E731
    args = (batches, opt, 20, 2.0**24, 2.0**-4, 100)
    t0 = time.perf_counter()
    dm, dl, ds = T._train(copy.deepcopy(model), DEV, *args)
    dt = time.perf_counter() - t0
    cm, cl, cs = T._train(copy.deepcopy(model), "cpu", *args)
    worst = max(abs(x - y) for x, y in zip(dl, cl))
    report(f"train {kind} scales", ds == cs, f"{ds[:3]}...")
    report(f"train {kind} losses", worst < 2e-2 * max(cl), f"max |dloss| {worst:.2e}, "
           f"final {dl[-1]:.4f} vs cpu {cl[-1]:.4f}, {dt / 20 * 1e3:.1f} ms/step")

print("ALL PASS" if failures == 0 else f"{failures} FAILED")
