"""complex64 arithmetic on a real GPU (H200, Vulkan): every native complex op against the
CPU, the special values whose handling depends on the driver (NaN compares, subnormal
flushing, fused multiply-adds), and the bandwidth of a complex mul next to a float32 one.

Run from the repository root after building: PYTHONPATH=python python3 scripts/h200/check_complex.py
Prints one PASS/FAIL line per check and a table of GB/s."""
import os
import time

os.environ["TORCH_WEBGPU_DISABLE_CPU_FALLBACK"] = "1"

import torch  # noqa: E402
import torch_webgpu  # noqa: E402,F401

DEV = "webgpu"
failures = 0


def check(name, got, want, **kw):
    global failures
    try:
        torch.testing.assert_close(got.cpu(), want, equal_nan=True, **kw)
        print(f"PASS {name}")
    except Exception as e:  # noqa: BLE001  report every failure, keep going
        failures += 1
        print(f"FAIL {name}: {str(e).splitlines()[0:4]}")


def make(shape, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.complex(torch.randn(shape, generator=g), torch.randn(shape, generator=g))


a, b = make((257, 129), 1), make((257, 129), 2)
da, db = a.to(DEV), b.to(DEV)
UNARY = ["neg", "conj_physical", "abs", "angle", "sgn", "exp", "log", "log1p", "expm1", "sqrt",
         "rsqrt", "reciprocal", "square", "sin", "cos", "tan", "sinh", "cosh", "tanh", "sigmoid",
         "isnan", "isinf", "isfinite"]
for name in UNARY:
    fn = getattr(torch, name)
    check(name, fn(da), fn(a))
    check(name + " transposed", fn(da.t()), fn(a.t()))
for name in ["add", "sub", "mul", "div", "pow", "eq", "ne"]:
    fn = getattr(torch, name)
    # exp(b log a) in float32 is within ~1e-6 relative; the CPU's cpowf rounds once from double
    kw = dict(rtol=1e-5, atol=1e-5) if name == "pow" else {}
    check(name, fn(da, db), fn(a, b), **kw)
    check(name + " broadcast", fn(da, db[0]), fn(a, b[0]), **kw)
    check(name + " scalar", fn(da, 0.5 - 2j), fn(a, 0.5 - 2j), **kw)
for e in (2, 3, 0.5, -1, -2, 2.5):
    check(f"pow {e}", da ** e, a ** e)

parts = [0.0, -0.0, 1.0, -2.5, float("inf"), -float("inf"), float("nan"), 1e30, -3e-30, 1e-37]  # normal floats: GPUs may flush subnormals
re = torch.tensor(parts).repeat_interleave(len(parts))
im = torch.tensor(parts).repeat(len(parts))
z = torch.complex(re, im)
for name in ["abs", "angle", "isnan", "isinf", "isfinite", "sgn"]:
    fn = getattr(torch, name)
    check(f"special {name}", fn(z.to(DEV)), fn(z))
check("special eq", z.to(DEV) == z.to(DEV), z == z)
big = torch.tensor([3e38 + 3e38j, 1e-40 + 1e-40j], dtype=torch.complex64)
check("abs no overflow", big.to(DEV).abs(), big.abs())

check("sum dims", da.sum(0), a.sum(0), rtol=1e-4, atol=1e-4)
check("mean", da.mean(), a.mean(), rtol=1e-4, atol=1e-4)
check("mm", da[:64] @ db[:64].t(), a[:64] @ b[:64].t(), rtol=1e-4, atol=1e-4)

x = make((3, 9), 4)


def hfft_grad(device):
    t = x.to(device).requires_grad_()
    y = torch.fft.hfft(t, n=16)
    (y * y).sum().backward()
    return t.grad


check("hfft gradient", hfft_grad(DEV), hfft_grad("cpu"), rtol=1e-4, atol=1e-4)


def bandwidth(fn, nbytes, reps=20):
    fn()
    torch.webgpu.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    torch.webgpu.synchronize()
    return nbytes * reps / (time.perf_counter() - t0) / 1e9


n = int(os.environ.get("COMPLEX_BENCH_N", 1 << 25))  # 32M complex64: 256 MiB per tensor
ca = torch.complex(torch.randn(n, device=DEV), torch.randn(n, device=DEV))
cb = torch.complex(torch.randn(n, device=DEV), torch.randn(n, device=DEV))
fa, fb = torch.view_as_real(ca).flatten(), torch.view_as_real(cb).flatten()
print(f"{'op':<26}{'GB/s':>10}")
print(f"{'complex64 mul':<26}{bandwidth(lambda: ca * cb, 3 * 8 * n):>10.1f}")
print(f"{'float32 mul (same bytes)':<26}{bandwidth(lambda: fa * fb, 3 * 8 * n):>10.1f}")
print(f"{'complex64 abs':<26}{bandwidth(lambda: ca.abs(), 12 * n):>10.1f}")
print("ALL PASS" if failures == 0 else f"{failures} FAILURES")
