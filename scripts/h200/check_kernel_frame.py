"""The kernel frame's named uniforms and typed keys on a real GPU (H200, Dawn/Vulkan): the
families converted to them (shape ranges, scans, linalg, the nn frame, embedding_bag and
margin-loss checks, grad scaling) against the CPU with the CPU fallback disabled, the
uniform struct layout (arrays as array<vec4<u32>>, scalars after the frame's vec4) read
back exactly, and the per-op host cost of small frame ops.

Run from the repository root after building:
  PYTHONPATH=python python3 scripts/h200/check_kernel_frame.py
  (and ./build/twgpu_tests --gtest_filter='KernelUniforms*:KernelProgram*')
Prints one PASS/FAIL line per check, then us/op figures."""
import os
import time

os.environ["TORCH_WEBGPU_DISABLE_CPU_FALLBACK"] = "1"

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import torch_webgpu  # noqa: E402,F401

DEV = "webgpu"
failures = 0


def check(name, fn, **kw):
    """fn(device) on webgpu and on the CPU; outputs compared with assert_close."""
    global failures
    try:
        got, want = fn(DEV), fn("cpu")
        got = got if isinstance(got, (tuple, list)) else (got,)
        want = want if isinstance(want, (tuple, list)) else (want,)
        for g, w in zip(got, want):
            torch.testing.assert_close(g.cpu(), w, equal_nan=True, **kw)
        print(f"PASS {name}")
    except Exception as e:  # noqa: BLE001  report every failure, keep going
        failures += 1
        print(f"FAIL {name}: {str(e).splitlines()[0:4]}")


def rand(shape, seed, device, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g).to(dtype).to(device)


# shape_ops: range fills (named f32/i32/u32-array uniforms), triangle and repeat indices.
check("arange f32", lambda d: torch.arange(-3.5, 1000.0, 0.25, device=d))
check("arange int64", lambda d: torch.arange(-2**40, 2**40, 2**31 + 7, device=d))
check("linspace f16", lambda d: torch.linspace(-1, 7, 1001, device=d, dtype=torch.float16))
check("linspace int64", lambda d: torch.linspace(-10**12, 10**12, 999, device=d,
                                                 dtype=torch.int64))
check("linspace int32 exact", lambda d: torch.linspace(-7, 1000, 333, device=d, dtype=torch.int32))
check("logspace", lambda d: torch.logspace(-2, 3, 77, base=3.0, device=d))
check("triu_indices", lambda d: torch.triu_indices(70, 50, offset=-3, device=d))
check("tril_indices", lambda d: torch.tril_indices(50, 70, offset=5, device=d))
check("repeat_interleave", lambda d: torch.repeat_interleave((torch.arange(100) % 7).to(d)))

# scan: one-pass rows and the blocked three-phase scan, with indices.
check("cumsum rows", lambda d: torch.cumsum(rand((300, 200), 1, d), 1), rtol=1e-4, atol=1e-4)
check("cumsum blocked", lambda d: torch.cumsum(rand((3, 40000), 2, d), 1), rtol=1e-4, atol=1e-3)
check("cummax blocked", lambda d: torch.cummax(rand((2, 5000), 3, d), 1))
check("cumprod strided", lambda d: torch.cumprod(rand((64, 33), 4, d).t()[3:] * 0.1 + 1, 0),
      rtol=1e-4, atol=1e-5)

# linalg: u_dims / u_offsets.
spd = lambda d: (lambda a: a @ a.mT + 16 * torch.eye(16, device=d))(rand((4, 16, 16), 5, d))  # noqa: E731
check("cholesky", lambda d: torch.linalg.cholesky(spd(d)), rtol=1e-4, atol=1e-4)
check("solve", lambda d: torch.linalg.solve(spd(d), rand((4, 16, 3), 15, d)), rtol=1e-4, atol=1e-4)
check("lu_factor", lambda d: torch.linalg.lu_factor(rand((3, 30, 30), 6, d)), rtol=1e-4, atol=1e-4)
check("slogdet", lambda d: torch.linalg.slogdet(spd(d)), rtol=1e-4, atol=1e-3)
check("qr", lambda d: torch.linalg.qr(rand((2, 20, 12), 16, d)), rtol=1e-4, atol=1e-4)

# the nn frame: offsets / extra / params arrays.
check("constant pad", lambda d: F.pad(rand((2, 3, 17, 19), 7, d)[:, 1:], (2, 3, 1, 4), value=1.5))
check("reflect pad", lambda d: F.pad(rand((2, 3, 17, 19), 8, d), (2, 3, 1, 4), mode="reflect"))
check("avg_pool2d", lambda d: F.avg_pool2d(rand((2, 3, 33, 31), 9, d), 3, 2, 1), rtol=1e-5, atol=1e-5)
check("layer_norm rows", lambda d: F.layer_norm(rand((64, 513), 10, d), (513,)), rtol=1e-4, atol=1e-4)
check("upsample bilinear", lambda d: F.interpolate(rand((1, 2, 9, 13), 11, d), scale_factor=2.5,
                                                   mode="bilinear"), rtol=1e-5, atol=1e-5)
check("embedding_bag mean", lambda d: F.embedding_bag(
    torch.arange(12).to(d) % 10, rand((10, 6), 12, d), torch.tensor([0, 3, 3, 7]).to(d),
    mode="mean"), rtol=1e-5, atol=1e-6)
check("multi_margin_loss", lambda d: F.multi_margin_loss(
    rand((20, 9), 13, d), (torch.arange(20) % 9).to(d)), rtol=1e-5, atol=1e-6)

# Device checks (named index_code / limit uniforms) raise the CUDA-style error.
for name, fn in [
    ("embedding_bag bad index", lambda: F.embedding_bag(
        torch.tensor([0, 11]).to(DEV), torch.zeros(10, 4, device=DEV), torch.tensor([0]).to(DEV))),
    ("multi_margin bad target", lambda: F.multi_margin_loss(
        torch.zeros(3, 4, device=DEV), torch.tensor([0, 9, 1]).to(DEV))),
]:
    try:
        fn()
        torch.webgpu.synchronize()
        failures += 1
        print(f"FAIL {name}: no error")
    except (IndexError, RuntimeError) as e:
        print(f"PASS {name}: {type(e).__name__}")

# grad scaling: unscale (u32 arrays sizes/strides) and the scale update (vec4 factors).
def scaler_step(d):
    g = rand((37, 21), 14, d).t()
    found = torch.zeros(1, device=d)
    torch._amp_foreach_non_finite_check_and_unscale_([g], found, torch.full((1,), 0.125, device=d))
    scale = torch.full((1,), 65536.0, device=d)
    tracker = torch.zeros(1, dtype=torch.int32, device=d)
    for _ in range(5):
        torch._amp_update_scale_(scale, tracker, found, 2.0, 0.5, 2)
    return g, found, scale, tracker


check("grad scaling", scaler_step)


def per_op_us(fn, iters=2000):
    fn()
    torch.webgpu.synchronize()
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    torch.webgpu.synchronize()
    return (time.perf_counter() - start) / iters * 1e6


x = torch.ones(1, 1, 4, 4, device=DEV)
y = torch.ones(16, device=DEV)
print(f"us/op  x + 1.0 (elementwise frame): {per_op_us(lambda: y + 1.0):.2f}")
print(f"us/op  arange(16) (named uniforms, typed key): "
      f"{per_op_us(lambda: torch.arange(16, device=DEV)):.2f}")
print(f"us/op  reflect pad 4x4 (nn frame): "
      f"{per_op_us(lambda: F.pad(x, (1, 1, 1, 1), mode='reflect')):.2f}")
print(f"us/op  cumsum 16 (scan, named): {per_op_us(lambda: torch.cumsum(y, 0)):.2f}")
print("ALL PASS" if failures == 0 else f"{failures} FAILED")
