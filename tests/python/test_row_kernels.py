"""The row kernels' wide paths against the CPU. Softmax / log_softmax read and write float32
rows whose length and storage offset are multiples of 4 as vec4 (up to 8 per invocation in
registers, longer rows swept twice, short rows several to a workgroup on GPUs); cumulative scans run float32 / int32 rows of up to
4096 elements, 128 rows or more, in one workgroup each with vec4 loads and stores (GPUs);
on GPUs layer norm rows held in registers merge one (count, mean, m2) tree, and float32
rows whose length and offsets are multiples of 4 move x, w, b and y as vec4 (RMS norm
too). Row lengths around
the multiples of 4 and the register limits, storage offsets 0..3 (vec4 alignment),
non-contiguous inputs and other dims, -inf / NaN rows, empty and 0-dim tensors, every
dtype, under both adapter kinds (TORCH_WEBGPU_ADAPTER_KIND) and the spec's default limits
(a fresh process). The CPU fallback is disabled."""
import pytest
import torch
import torch.nn.functional as F
import torch_webgpu

from conftest import FLOAT_DTYPES, assert_same, dev, make, run_python

pytestmark = pytest.mark.usefixtures("no_fallback")

F32 = dict(rtol=1e-5, atol=1e-6)
SCAN_TOL = {torch.float32: dict(rtol=1e-4, atol=1e-3), torch.float16: dict(rtol=2e-3, atol=1e-2),
            torch.bfloat16: dict(rtol=2e-2, atol=5e-2)}


@pytest.fixture(params=["software", "gpu"])
def adapter_kind(request, monkeypatch):
    monkeypatch.setenv("TORCH_WEBGPU_ADAPTER_KIND", request.param)
    return request.param


def compare(fn, x, **tol):
    assert_same(fn(dev(x)), fn(x), **tol)


# 1..7: the scalar kernel but 4 (one vec4 of 8 lanes on GPUs); 128, 132: 8 or 64 lanes per
# row on GPUs (the length classes), 64 on software adapters; 4096: 256 x 4 vec4s; 4099: not a
# multiple of 4 (scalar kernel); 8192, 8196: up to 8 vec4s held; 12000: swept twice.
SOFTMAX_LENGTHS = [1, 3, 4, 5, 7, 128, 132, 4096, 4099, 8192, 8196, 12000]


@pytest.mark.parametrize("n", SOFTMAX_LENGTHS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_softmax_lengths_and_dtypes(adapter_kind, n, dtype):
    x = make((3, n), torch.float32, seed=n, low=-8, high=8).to(dtype)
    # Half outputs: the CPU rounds some intermediates to the half type, we round once.
    tol = F32 if dtype == torch.float32 else SCAN_TOL[dtype]
    for fn in (torch.softmax, torch.log_softmax):
        compare(lambda t: fn(t, -1), x, **tol)


@pytest.mark.parametrize("shape", [(37, 4), (37, 12), (100, 64), (65, 128), (9, 1020), (3, 2048)])
def test_softmax_rows_sharing_a_workgroup(adapter_kind, shape):
    """On GPUs rows of 4..128 share a group of 64 (8 invocations each, up to 4 vec4s
    apiece), longer ones up to 1024 take 64 invocations: row counts that leave the last
    group partly empty, -inf and NaN rows among their neighbours."""
    x = make(shape, torch.float32, seed=shape[1], low=-8, high=8)
    x[1] = float("-inf")
    x[2, -1] = float("nan")
    for fn in (torch.softmax, torch.log_softmax):
        compare(lambda t: fn(t, -1), x, **F32)


@pytest.mark.parametrize("start", [0, 1, 2, 3])
@pytest.mark.parametrize("n", [4, 128, 4096, 8196])
def test_softmax_storage_offsets(adapter_kind, start, n):
    """Views starting at elements 1..3 are not 16-byte aligned: a copy makes them
    contiguous at offset 0, whatever the view's offset."""
    base = make((2 * n + 8,), torch.float32, seed=3, low=-6, high=6)
    for fn in (torch.softmax, torch.log_softmax):
        compare(lambda t: fn(t[start:start + 2 * n].view(2, n), -1), base, **F32)
        compare(lambda t: fn(t[start:start + n], 0), base, **F32)  # one row, 1-D


def test_softmax_non_contiguous_and_other_dims(adapter_kind):
    x = make((6, 4096), torch.float32, seed=4, low=-5, high=5)
    for fn in (torch.softmax, torch.log_softmax):
        compare(lambda t: fn(t[:, ::2], -1), x, **F32)         # strided rows
        compare(lambda t: fn(t[1:5, 4:], -1), x, **F32)        # rows 4092 long, offset 4100
        compare(lambda t: fn(t.t(), 0), x, **F32)              # the dim in memory order
        compare(lambda t: fn(t.view(6, 64, 64), 1), x, **F32)  # a middle dim
        compare(lambda t: fn(t.view(6, 64, 64), 0), x, **F32)


def test_softmax_empty_and_zero_dim(adapter_kind):
    for fn in (torch.softmax, torch.log_softmax):
        compare(lambda t: fn(t, -1), torch.randn(0, 4096))
        compare(lambda t: fn(t, 0), torch.randn(4096, 0))
        compare(lambda t: fn(t, 0), torch.tensor(2.5))
        compare(lambda t: fn(t, -1), torch.tensor([-float("inf")]))


@pytest.mark.parametrize("n", [132, 4096, 8192, 12000])
def test_softmax_infinities_and_nan_in_every_lane(adapter_kind, n):
    """The online (max, sum) pair per invocation rescales its sum when the max grows and
    keeps a NaN: -inf rows, an -inf start, +inf and NaN at each of the four lanes of a vec4,
    a max at the end of the row, large spreads."""
    x = make((10, n), torch.float32, seed=5, low=-8, high=8)
    x[0, : n // 2] = float("-inf")
    x[1] = float("-inf")
    x[2, n // 3] = float("inf")
    for lane in range(4):
        x[3 + lane, 4 * (n // 8) + lane] = float("nan")
    x[7, -1] = 90.0
    x[8] *= 30
    x[9, ::5] = float("-inf")
    for fn in (torch.softmax, torch.log_softmax):
        compare(lambda t: fn(t, -1), x, **F32)


def test_softmax_half_accumulates_in_float(adapter_kind):
    """8192 equal half values: each exp(0) = 1 summed in float (a half sum would round
    past 2048), then 1/8192 exactly."""
    for dtype in (torch.float16, torch.bfloat16):
        x = torch.zeros(2, 8192, dtype=dtype)
        compare(lambda t: torch.softmax(t, -1), x, rtol=0, atol=0)
        compare(lambda t: torch.log_softmax(t, -1), x)


def test_softmax_rows_growing_by_one_reuse_few_pipelines(adapter_kind):
    """A decode's attention rows grow by one element per token: lengths 8..300 (every
    alignment, three length classes of the vec4 kernel, two group sizes of the scalar
    one) compile at most 6 softmax pipelines per adapter kind, not one per doubling
    (each compile cost 40-190 ms per token on an H100). Every length against the CPU."""
    torch.softmax(dev(torch.zeros(2, 7)), -1)  # the device and this kind's kernels up
    before = torch_webgpu._C.dispatch_stats()["pipelines"]
    for n in range(8, 301):
        x = make((12, n), torch.float32, seed=n, low=-8, high=8)
        assert_same(torch.softmax(dev(x), -1), torch.softmax(x, -1), **F32)
    made = torch_webgpu._C.dispatch_stats()["pipelines"] - before
    assert made <= 6, made


# Cumulative scans: 130 rows (the one-workgroup-per-row kernels start at 128) of lengths
# from 64 (groups of 32) to 4096 (256 x 16), lengths that are no multiple of 4 and longer
# rows (the tiled and blocked kernels), fewer rows (the serial and blocked kernels).
SCAN_SHAPES = [(130, 64), (130, 68), (130, 1000), (128, 4096), (130, 4098), (130, 4100),
               (3, 4096), (130, 5)]


@pytest.mark.parametrize("shape", SCAN_SHAPES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.int64, torch.float16,
                                   torch.bfloat16])
def test_scan_rows(adapter_kind, shape, dtype):
    x = make(shape, dtype, seed=6, low=-3, high=3)
    tol = SCAN_TOL.get(dtype, dict(rtol=0, atol=0))
    # int32 keeps its dtype only when asked (the default promotes integers to int64).
    compare(lambda t: t.cumsum(1, dtype=dtype), x, **tol)
    compare(lambda t: torch.cummax(t, 1), x, rtol=0, atol=0)
    compare(lambda t: torch.cummin(t, 1), x, rtol=0, atol=0)
    if dtype.is_floating_point:
        compare(lambda t: torch.logcumsumexp(t, 1), x, **tol)
        compare(lambda t: t.cumprod(1), make(shape, dtype, seed=7, low=0.99, high=1.01),
                rtol=1e-3 if dtype == torch.float32 else 2e-2, atol=1e-4)
    else:
        compare(lambda t: t.cumprod(1, dtype=dtype), make(shape, dtype, seed=7, low=-1, high=2),
                rtol=0, atol=0)


@pytest.mark.parametrize("start", [0, 1, 2, 3])
def test_scan_storage_offsets_and_views(adapter_kind, start):
    base = make((130 * 4096 + 8,), torch.float32, seed=8)
    compare(lambda t: t[start:start + 130 * 4096].view(130, 4096).cumsum(1), base, **SCAN_TOL[torch.float32])
    ints = make((130 * 512 + 8,), torch.int32, seed=9)
    compare(lambda t: t[start:start + 130 * 512].view(130, 512).cumsum(1, dtype=torch.int32), ints,
            rtol=0, atol=0)
    x = make((200, 4096), torch.float32, seed=10)
    compare(lambda t: t[:, ::2].cumsum(1), x, **SCAN_TOL[torch.float32])      # strided rows
    compare(lambda t: t[:130, 4:].cumsum(1), x, **SCAN_TOL[torch.float32])    # offset rows
    compare(lambda t: t[:, :512].t().cumsum(0), x, **SCAN_TOL[torch.float32])  # another dim
    compare(lambda t: t.view(200, 64, 64).cumsum(1), x, **SCAN_TOL[torch.float32])


def test_scan_accuracy_nan_and_empty(adapter_kind):
    # Compensated sums carried between vec4s and chunks (the CPU accumulates in double).
    row = torch.cat([torch.full((1,), 1e8), torch.ones(3000), torch.full((1,), -1e8), torch.ones(1094)])
    compare(lambda t: t.cumsum(1), row.repeat(128, 1), **SCAN_TOL[torch.float32])
    x = make((130, 4096), torch.float32, seed=11)
    for lane in range(4):
        x[lane, 1024 + lane] = float("nan")
    x[5] = float("-inf")
    x[6, 2048:] = float("inf")
    for fn in (lambda t: t.cumsum(1), lambda t: torch.cummax(t, 1), lambda t: torch.cummin(t, 1),
               lambda t: torch.logcumsumexp(t, 1)):
        compare(fn, x, **SCAN_TOL[torch.float32])
    compare(lambda t: t.cumsum(1), torch.randn(0, 4096))
    compare(lambda t: t.cumsum(0), torch.tensor(1.5))
    compare(lambda t: t.cumsum(0, dtype=torch.int32), torch.tensor(7, dtype=torch.int32))


# Layer norm: rows of 1..7 (one invocation busy), held rows (up to 16 elements per
# invocation of groups up to 256 on GPUs, 64 on software adapters), swept rows beyond;
# on GPUs float32 rows of multiples of 4 up to 8192 in vec4s (4099: not a multiple).
NORM_LENGTHS = [1, 3, 4, 5, 7, 64, 1000, 4096, 4099, 8192]


@pytest.mark.parametrize("n", NORM_LENGTHS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_layer_norm_lengths_and_dtypes(adapter_kind, n, dtype):
    x = make((4, n), torch.float32, seed=12).to(dtype)
    w = make((n,), torch.float32, seed=13).to(dtype)
    b = make((n,), torch.float32, seed=14).to(dtype)
    # Half rows of one element: the CPU's (x * rstd - mean * rstd) leaves up to 3e-5 where
    # the exact answer (ours) is 0, at rstd = 316.
    tol = {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.float16: dict(rtol=1e-3, atol=1e-4),
           torch.bfloat16: dict(rtol=1.6e-2, atol=1e-4)}[dtype]
    assert_same(F.layer_norm(dev(x), (n,), dev(w), dev(b)), F.layer_norm(x, (n,), w, b), **tol)
    compare(lambda t: F.layer_norm(t, (n,)), x, **tol)
    mean_rstd = lambda t: torch.native_layer_norm(t, (n,), None, None, 1e-5)[1:]  # noqa: E731
    compare(mean_rstd, x, **tol)
    assert_same(F.rms_norm(dev(x), (n,), dev(w)), F.rms_norm(x, (n,), w), **tol)


@pytest.mark.parametrize("start", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("n", [64, 4096, 8192])
def test_layer_norm_storage_offsets_and_affine(adapter_kind, start, n):
    """On GPUs float32 rows whose length and operands' offsets are multiples of 4 read x, w,
    b and write y as vec4: x, w and b views starting at elements 0..4, weight only, bias
    only (through native_layer_norm) and neither, the statistics too; RMS norm likewise."""
    base = make((3 * n + 8,), torch.float32, seed=17)
    params = make((2 * n + 8,), torch.float32, seed=18)
    x, w, b = base[start:start + 3 * n].view(3, n), params[start:start + n], params[n + start:n + start + n]
    tol = dict(rtol=1e-4, atol=1e-4)
    assert_same(F.layer_norm(dev(x), (n,), dev(w), dev(b)), F.layer_norm(x, (n,), w, b), **tol)
    assert_same(F.layer_norm(dev(x), (n,), dev(w)), F.layer_norm(x, (n,), w), **tol)
    assert_same(torch.native_layer_norm(dev(x), (n,), None, dev(b), 1e-5),
                torch.native_layer_norm(x, (n,), None, b, 1e-5), **tol)
    assert_same(torch.native_layer_norm(dev(x), (n,), None, None, 1e-3),
                torch.native_layer_norm(x, (n,), None, None, 1e-3), **tol)
    # RMS norm shares the kernel (moments about 0, no mean).
    assert_same(F.rms_norm(dev(x), (n,), dev(w)), F.rms_norm(x, (n,), w), **tol)
    assert_same(F.rms_norm(dev(x), (n,), eps=1e-3), F.rms_norm(x, (n,), eps=1e-3), **tol)


def test_layer_norm_offset_rows_and_views(adapter_kind):
    """Rows far from zero (the merged triples keep the deviations' precision), constant
    rows (variance 0), rows in a non-contiguous view and at odd offsets, half input."""
    x = make((6, 4096), torch.float32, seed=15, low=-1, high=1)
    x[0] += 1000.0
    x[1] = 3.0
    x[2, :7] = 1e4
    # Near 1000 a float32 is within 6e-5 (one ulp); over a std of 0.58 that is 1e-4 of
    # the output on either side, so views with the first row allow 1e-3.
    compare(lambda t: F.layer_norm(t, (4096,)), x, rtol=1e-4, atol=1e-3)
    compare(lambda t: F.layer_norm(t[1:], (4096,)), x, rtol=1e-4, atol=1e-4)
    compare(lambda t: torch.native_layer_norm(t, (4096,), None, None, 1e-5)[2], x, rtol=1e-4, atol=1e-4)
    compare(lambda t: F.layer_norm(t[:, 1:], (4095,)), x, rtol=1e-4, atol=1e-3)
    compare(lambda t: F.layer_norm(t.view(6, 64, 64)[:, :, ::2], (64, 32)), x, rtol=1e-4, atol=1e-3)
    h = (make((3, 4096), torch.float32, seed=16) + 200).half()
    compare(lambda t: F.layer_norm(t, (4096,)), h)
    compare(lambda t: F.layer_norm(t, (4096,)), torch.randn(0, 4096))


def test_default_limits_in_a_fresh_process():
    """The spec's default limits (256 invocations, 16 KiB of workgroup memory) on both
    adapter kinds."""
    code = (
        "import os, torch, torch_webgpu, torch.nn.functional as F\n"
        "g = torch.Generator().manual_seed(0)\n"
        "for kind in ('software', 'gpu'):\n"
        "    os.environ['TORCH_WEBGPU_ADAPTER_KIND'] = kind\n"
        "    for n in (4096, 8192, 12000):\n"
        "        x = torch.randn(3, n, generator=g)\n"
        "        for fn in (torch.softmax, torch.log_softmax):\n"
        "            torch.testing.assert_close(fn(x.to('webgpu'), -1).cpu(), fn(x, -1), rtol=1e-5, atol=1e-6)\n"
        "        torch.testing.assert_close(F.layer_norm(x.to('webgpu'), (n,)).cpu(), F.layer_norm(x, (n,)),\n"
        "                                   rtol=1e-4, atol=1e-4)\n"
        "    for dtype in (torch.float32, torch.int32):\n"
        "        x = (torch.randn(130, 4096, generator=g) * 3).to(dtype)\n"
        "        torch.testing.assert_close(x.to('webgpu').cumsum(1, dtype=dtype).cpu(), x.cumsum(1, dtype=dtype),\n"
        "                                   rtol=1e-4, atol=1e-3)\n"
        "        v, i = torch.cummax(x.to('webgpu'), 1)\n"
        "        assert torch.equal(v.cpu(), torch.cummax(x, 1)[0]) and torch.equal(i.cpu(), torch.cummax(x, 1)[1])\n"
        "print('ok')\n")
    r = run_python(code, timeout=300, env={"TORCH_WEBGPU_LIMITS": "default",
                                           "TORCH_WEBGPU_DISABLE_CPU_FALLBACK": "1"})
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-3000:]
