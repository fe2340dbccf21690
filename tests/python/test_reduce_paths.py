"""The reduction kernels' size-dependent paths against the CPU: one stage with four
accumulators per invocation (lengths not a multiple of the 4-way step), two stages for few
long rows and for long column reductions (chunks of >= 64 rows), softmax rows held in
registers (up to 16 per invocation of groups of 64..256) or swept three times beyond, each
at the sizes that cross the thresholds, with offset (misaligned) and non-contiguous inputs,
integer dtypes (exact), empty and 0-dim tensors. The CPU fallback is disabled."""
import pytest
import torch

from conftest import assert_same, dev, make

pytestmark = pytest.mark.usefixtures("no_fallback")

LOOSE = {torch.float32: dict(rtol=1e-4, atol=1e-3), torch.float16: dict(rtol=2e-3, atol=1e-2),
         torch.bfloat16: dict(rtol=2e-2, atol=5e-2)}


def compare(fn, x, **tol):
    assert_same(fn(dev(x)), fn(x), **tol)


# (shape, dim): few long rows (two stages over chunks of 4096), one long run, rows just
# below/above the split, long columns (two stages over chunks of rows), columns too few
# elements to split, a 4-way step remainder in each.
SHAPES = [((3, 70001), 1), ((1, 16385), 1), ((2, 16383), 1), ((65537,), 0), ((1100, 1000), 0),
          ((2049, 513), 0), ((3, 1030, 7), 1), ((1023, 5), 0), ((5000, 3), 0)]


@pytest.mark.parametrize("shape,dim", SHAPES)
@pytest.mark.parametrize("op", ["sum", "mean", "amax", "amin", "prod_abs_small"])
def test_float_paths(shape, dim, op):
    x = make(shape, torch.float32, seed=3, low=-1, high=1)
    fns = {"sum": lambda t: t.sum(dim), "mean": lambda t: t.mean(dim),
           "amax": lambda t: t.amax(dim), "amin": lambda t: t.amin(dim),
           # values near 1 so the product stays finite over long runs
           "prod_abs_small": lambda t: (1.0 + t * 1e-4).prod(dim)}
    compare(fns[op], x, **LOOSE[torch.float32])


@pytest.mark.parametrize("shape,dim", SHAPES[:6])
def test_index_and_statistic_paths(shape, dim):
    """argmax (three dispatches over chunks), var (one stage) and nansum/norm/count on the
    same sizes."""
    x = make(shape, torch.float32, seed=4, low=-1, high=1)
    x.view(-1)[7] = float("nan")
    compare(lambda t: t.nansum(dim), x, **LOOSE[torch.float32])
    compare(lambda t: torch.linalg.vector_norm(t.nan_to_num(), 2, dim), x, **LOOSE[torch.float32])
    compare(lambda t: torch.count_nonzero(t > 0.5, dim), x)
    y = make(shape, torch.float32, seed=5)
    compare(lambda t: t.argmax(dim), y)
    compare(lambda t: t.var(dim), y, **LOOSE[torch.float32])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32, torch.int64, torch.uint8])
@pytest.mark.parametrize("shape,dim", [((1, 151936), -1), ((3, 70001), 1), ((65537,), 0),
                                       ((40000, 3), 0), ((2, 20000, 2), 1)])
def test_arg_reductions_over_chunks(dtype, shape, dim):
    """Few long runs: each chunk's best, the best chunk, its index gathered. Ties across
    chunks and NaNs (the first occurrence wins, as on the CPU), max/min with values, keepdim,
    a whole-tensor argmax."""
    low, high = (0, 7) if dtype == torch.uint8 else (-7, 7)
    x = make(shape, dtype, seed=12, low=low, high=high)  # few distinct values: ties everywhere
    for op in ("argmax", "argmin"):
        compare(lambda t: getattr(t, op)(dim), x)
        compare(lambda t: getattr(t, op)(dim, keepdim=True), x)
    compare(lambda t: t.argmax(), x)
    for op in ("max", "min"):
        compare(lambda t: tuple(getattr(t, op)(dim)), x)
    if dtype.is_floating_point:
        y = x.clone()
        row = y.movedim(dim, -1)[(0,) * (y.dim() - 1)]
        row[9000 % row.numel()] = float("nan")   # the first NaN of the run wins
        row[-5] = float("nan")
        row[3] = float("inf")
        for op in ("argmax", "argmin"):
            compare(lambda t: getattr(t, op)(dim), y)
        compare(lambda t: tuple(t.max(dim)), y)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.int16, torch.uint8])
@pytest.mark.parametrize("shape,dim", [((3, 70001), 1), ((1100, 1000), 0), ((65537,), 0)])
def test_integer_sums_exact(dtype, shape, dim):
    x = make(shape, dtype, seed=6, low=0 if dtype == torch.uint8 else -50, high=50)
    compare(lambda t: t.sum(dim), x)
    compare(lambda t: t.amax(dim), x)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_paths(dtype):
    x = make((1100, 1000), dtype, seed=7, low=-1, high=1)
    compare(lambda t: t.sum(0), x, **LOOSE[dtype])
    compare(lambda t: t.float().sum(1), x, **LOOSE[torch.float32])
    compare(lambda t: t.sum(), x, rtol=2e-2, atol=2.0)


def test_bool_paths():
    x = make((1100, 1000), torch.float32, seed=8) > 2.5
    compare(lambda t: t.any(0), x)
    compare(lambda t: t.all(1), ~x)
    compare(lambda t: t.any(), x.view(-1)[1:])


@pytest.mark.parametrize("start", [1, 3])
def test_offset_and_strided_views(start):
    """Storage offsets that break any 16-byte alignment, a transposed input (reduced in
    memory order), a stepped slice (copied)."""
    base = make((1101, 1000), torch.float32, seed=9, low=-1, high=1)
    compare(lambda t: t.view(-1)[start:start + 200000].sum(), base, **LOOSE[torch.float32])
    compare(lambda t: t[start:].sum(0), base, **LOOSE[torch.float32])
    compare(lambda t: t.t().sum(1), base, **LOOSE[torch.float32])
    compare(lambda t: t[::3, 1::2].sum(0), base, **LOOSE[torch.float32])
    compare(lambda t: t[:, start:].amax(1), base)


def test_empty_and_zero_dim():
    for x in (torch.randn(0, 1000), torch.randn(1000, 0), torch.tensor(2.5)):
        compare(lambda t: t.sum(), x)
        compare(lambda t: t.sum(-1), x)
    compare(lambda t: t.amax(0), torch.randn(1000, 0))


# Softmax rows: 127 (one invocation per row), 128 and 1024 (groups of 64), 1025 and 4096
# (groups of 128 and 256, all in registers), 4097 and 9000 (sweeps over memory).
@pytest.mark.parametrize("n", [127, 128, 1024, 1025, 4096, 4097, 9000])
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_row_lengths(n, op):
    x = make((3, n), torch.float32, seed=10, low=-8, high=8)
    fn = getattr(torch, op)
    compare(lambda t: fn(t, -1), x, rtol=1e-5, atol=1e-6)
    # Backward of the same rows.
    xc, xd = x.clone().requires_grad_(), dev(x).requires_grad_()
    g = make((3, n), torch.float32, seed=11)
    fn(xc, -1).backward(g)
    fn(xd, -1).backward(dev(g))
    assert_same(xd.grad, xc.grad, rtol=1e-4, atol=1e-5)


def test_softmax_views_and_half():
    base = make((5, 3001), torch.float32, seed=12, low=-4, high=4)
    compare(lambda t: torch.softmax(t[1:, 1:], -1), base, rtol=1e-5, atol=1e-6)
    compare(lambda t: torch.softmax(t.t(), 0), base, rtol=1e-5, atol=1e-6)
    h = base.half()
    compare(lambda t: torch.softmax(t, -1), h, **LOOSE[torch.float16])
    compare(lambda t: torch.softmax(t, -1), torch.randn(0, 2000))


# The workgroup kernel shares a group among several outputs: 32 invocations per output for
# runs up to 2048 elements, 64 up to 4096, 128 up to 8192, then the whole group. Software
# adapters use groups of 64 (up to 2 outputs each), GPUs 256 (up to 8): both selections run
# here through TORCH_WEBGPU_ADAPTER_KIND. Row counts that leave the last group partly empty.
@pytest.fixture(params=["software", "gpu"])
def adapter_kind(request, monkeypatch):
    monkeypatch.setenv("TORCH_WEBGPU_ADAPTER_KIND", request.param)
    return request.param


LANE_SHAPES = [(13, 300), (9, 2048), (7, 3000), (5, 4097), (3, 9000), (2, 16383)]


@pytest.mark.parametrize("shape", LANE_SHAPES)
def test_outputs_per_group_float(adapter_kind, shape):
    x = make(shape, torch.float32, seed=20, low=-2, high=2)
    for fn in (lambda t: t.sum(1), lambda t: t.mean(1), lambda t: t.amax(1), lambda t: t.amin(1),
               lambda t: t.var(1), lambda t: t.logsumexp(1), lambda t: t.argmax(1),
               lambda t: t.aminmax(dim=1), lambda t: torch.linalg.vector_norm(t, 2, 1),
               lambda t: (1.0 + t * 1e-4).prod(1), lambda t: t[:, 1:].sum(1)):
        compare(fn, x, **LOOSE[torch.float32])


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8, torch.float16])
@pytest.mark.parametrize("shape", [(13, 300), (5, 4097)])
def test_outputs_per_group_dtypes(adapter_kind, dtype, shape):
    x = make(shape, dtype, seed=21, low=0 if dtype == torch.uint8 else -50, high=50)
    tol = LOOSE.get(dtype, {})
    compare(lambda t: t.sum(1), x, **tol)
    compare(lambda t: t.amax(1), x)
    compare(lambda t: t.amin(1), x)
    compare(lambda t: (t > 0).all(1), x)
    compare(lambda t: torch.count_nonzero(t, 1), x)


@pytest.mark.parametrize("shape,dim", [((13, 300), 1), ((5, 4097), 1), ((70001,), 0), ((1100, 1000), 0)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_amax_amin_nan_and_infinities(adapter_kind, shape, dim, dtype):
    """Float max / min pick by one NaN-sticky select: a NaN anywhere in a run (first, last,
    between infinities) gives NaN; infinities and all -inf runs do not."""
    x = make(shape, torch.float32, seed=22, low=-1, high=1)
    flat = x.view(-1)
    flat[0] = float("nan")
    flat[-1] = float("nan")
    flat[flat.numel() // 2] = float("inf")
    flat[flat.numel() // 3] = float("-inf")
    if x.dim() == 2:
        x[2] = float("-inf")
        x[3, ::2] = float("inf")
        x[4, 5] = float("nan")
    x = x.to(dtype)
    for fn in (lambda t: t.amax(dim), lambda t: t.amin(dim), lambda t: t.amax(), lambda t: t.amin(),
               lambda t: t.nan_to_num(nan=0.0).amax(dim), lambda t: t.nan_to_num(nan=0.0).amin()):
        compare(fn, x)


def test_softmax_partial_rows_of_minus_infinity(adapter_kind):
    """The row's (max, sum) merge from each invocation's own pair: invocations that saw only
    -inf add nothing; all -inf rows, +inf and NaN give NaN as on the CPU."""
    for n in (127, 1000, 4096, 9000):
        x = make((6, n), torch.float32, seed=23, low=-8, high=8)
        x[0, : n // 2] = float("-inf")
        x[1] = float("-inf")
        x[2, n // 3] = float("inf")
        x[3, n - 1] = float("nan")
        x[4, ::7] = float("-inf")
        x[5] *= 20
        for fn in (torch.softmax, torch.log_softmax):
            compare(lambda t: fn(t, -1), x, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("start", [0, 1, 2, 3])
@pytest.mark.parametrize("shape", [(13, 300), (5, 4097), (3, 9001), (2, 16383)])
def test_vec4_loads_with_offsets(adapter_kind, start, shape):
    """Contiguous float32 / int32 runs read their aligned body as vec4<u32> through a second
    binding and up to three elements on each side one at a time: storage offsets 0..3 and
    row lengths that are not multiples of 4 move both ends; argmax checks each index."""
    n = shape[0] * shape[1]
    for dtype in (torch.float32, torch.int32):
        base = make((n + 8,), dtype, seed=24, low=-50, high=50)
        x = base[start:start + n].view(shape)
        tol = LOOSE[torch.float32] if dtype == torch.float32 else {}
        compare(lambda t: t[start:start + n].view(shape).sum(1), base, **tol)
        compare(lambda t: t[start:start + n].view(shape).amax(1), base)
        compare(lambda t: t[start:start + n].view(shape).argmax(1), base)
        compare(lambda t: t[start:start + n].view(shape).argmin(1), base)
        compare(lambda t: t[start:start + n].sum(), base, **tol)
        assert x.storage_offset() == start
    f = make((n + 8,), torch.float32, seed=25, low=-1, high=1)
    for fn in (lambda t: t.var(1), lambda t: t.logsumexp(1), lambda t: t.mean(1),
               lambda t: t.aminmax(dim=1), lambda t: torch.linalg.vector_norm(t, 2, 1)):
        compare(lambda t: fn(t[start:start + n].view(shape)), f, **LOOSE[torch.float32])


def test_few_outputs_over_growing_lengths_reuse_one_kernel(adapter_kind):
    """A decode step reduces a mask or a flag whose length grows by one per token: lengths
    2..255 with one or a few outputs (all, any, sum, argmax) keep one kernel each, instead
    of switching to the workgroup kernel at 32 (a pipeline compiled mid-generation, 40-60
    ms on an H100). Every length against the CPU."""
    import torch_webgpu

    def ops(t):
        return (t.bool().all(-1), t.bool().any(-1), t.sum(-1), t.argmax(-1))

    # This kind's kernels up (the float-to-bool cast has a vec4 variant for rows of 4k).
    for fn_input in (torch.ones(1, 2, dtype=torch.int64), torch.ones(4, 2), torch.ones(4, 4)):
        for got, want in zip(ops(dev(fn_input)), ops(fn_input)):
            assert_same(got, want)
    before = torch_webgpu._C.dispatch_stats()["pipelines"]
    for n in range(2, 256):
        mask = torch.ones(1, n, dtype=torch.int64)
        mask[0, n // 3] = n % 2
        rows = make((4, n), torch.float32, seed=n, low=-3, high=3)
        for x in (mask, rows):
            for got, want in zip(ops(dev(x)), ops(x)):
                assert_same(got, want, **LOOSE.get(x.dtype, {}))
    assert torch_webgpu._C.dispatch_stats()["pipelines"] == before
