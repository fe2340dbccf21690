"""On the H200: the AOT engine (docs/ENGINE.md) on Vulkan. Exports an MLP, a CNN and a
transformer encoder layer, runs them through torch_webgpu.engine and twgpu-run, and
compares with the CPU, with eager webgpu (bit-equal expected for the MLP and CNN) and with
CUDA. Prints PASS/FAIL lines and per-run times (engine run = upload + record + one submit +
read-back; eager = forward + synchronize). Run from the repository root after
`source scripts/h200/build.sh` (the engine needs nlohmann-json3-dev's headers there:
carry its .deb in .gl/). Usage: python3 scripts/h200/check_engine.py [build-gpu]"""
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn as nn

import torch_webgpu
from torch_webgpu import _C

failures = 0
BUILD = sys.argv[1] if len(sys.argv) > 1 else "build-gpu"


def report(name, ok, detail=""):
    global failures
    failures += not ok
    print(f"{'PASS' if ok else 'FAIL'} {name} {detail}")


def timed(fn, n=30):
    fn()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n * 1e3


def models():
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024)).eval()
    cnn = nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.AvgPool2d(2),
        nn.Flatten(), nn.Linear(64 * 16 * 16, 10)).eval()
    enc = nn.TransformerEncoderLayer(256, 8, 1024, dropout=0.0, batch_first=True).eval()
    return [("mlp", mlp, torch.randn(16, 1024), True), ("cnn", cnn, torch.randn(8, 3, 64, 64), True),
            ("encoder", enc, torch.randn(4, 64, 256), False)]


def main():
    if not hasattr(_C, "_engine"):
        report("engine built", False, "(torch_webgpu._C has no _engine: nlohmann-json3-dev missing at build)")
        return 1
    from torch_webgpu import aot, engine
    print("adapter:", torch.webgpu.get_device_name(), "| torch", torch.__version__)
    for name, model, x, bit_equal in models():
        d = tempfile.mkdtemp(prefix=f"engine_{name}_")
        aot.export(model, (x,), d)
        prog = engine.Program.load(d)
        (y,) = prog.run(x)
        y = torch.from_numpy(y)
        with torch.no_grad():
            ref = model(x)
            report(f"{name} engine vs CPU", torch.allclose(y, ref, rtol=1e-4, atol=1e-4),
                   f"max abs diff {(y - ref).abs().max().item():.3g}")
            wm = model.to("webgpu")
            xw = x.to("webgpu")
            eager = wm(xw).cpu()
            if bit_equal:
                report(f"{name} engine == eager webgpu", torch.equal(y, eager),
                       f"max abs diff {(y - eager).abs().max().item():.3g}")
            t_engine = timed(lambda: prog.run(x))
            t_eager = timed(lambda: (wm(xw), torch.webgpu.synchronize()))
            t_eager_rt = timed(lambda: wm(x.to("webgpu")).cpu())
            line = f"{name}: engine run {t_engine:.3f} ms | eager webgpu fwd+sync {t_eager:.3f} ms | eager with copies {t_eager_rt:.3f} ms"
            if torch.cuda.is_available():
                mc, xc = model.to("cuda"), x.to("cuda")
                yc = mc(xc).cpu()
                report(f"{name} engine vs CUDA", torch.allclose(y, yc, rtol=1e-3, atol=1e-3),
                       f"max abs diff {(y - yc).abs().max().item():.3g}")
                line += f" | cuda fwd+sync {timed(lambda: (mc(xc), torch.cuda.synchronize())):.3f} ms"
            model.to("cpu")
            print(line, f"| launches per run {prog.launches_per_run}")
        exe = os.path.join(BUILD, "twgpu-run")
        if os.path.exists(exe):
            np.save(os.path.join(d, "x.npy"), x.numpy())
            r = subprocess.run([exe, d, "--input", os.path.join(d, "x.npy"), "--output",
                                os.path.join(d, "y.npy"), "--repeat", "50"], capture_output=True, text=True)
            ok = r.returncode == 0 and torch.equal(torch.from_numpy(np.load(os.path.join(d, "y.npy"))), y)
            m = re.search(r"per run ([\d.]+) ms\s+dispatches per run ([\d.]+)\s+submits per run ([\d.]+)", r.stdout)
            report(f"{name} twgpu-run equals the Python engine", ok,
                   (f"per run {m.group(1)} ms, {m.group(2)} dispatches, {m.group(3)} submits" if m else r.stderr[-300:]))
        else:
            report(f"{name} twgpu-run present", False, f"({exe} missing)")
    print("ALL PASS" if failures == 0 else f"{failures} FAILED")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
