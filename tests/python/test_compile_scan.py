"""Scans inside torch.compile on webgpu: cumsum, cumprod, logcumsumexp, cummax and cummin
as generated WGSL (Inductor's ops.scan: one workgroup per row, blocks of the row scanned in
workgroup memory with a running carry; or, on software adapters, one invocation per row
walking it in order), against the CPU.
"""
import pytest
import torch

import torch_webgpu  # noqa: F401

from torch._inductor.utils import run_and_get_code


@pytest.fixture(autouse=True, params=["blocks", "serial"])
def fresh_compile(monkeypatch, request):
    """Every test with both kernel shapes: blocks of the row scanned in workgroup memory
    (GPUs) and one invocation walking each row (software adapters)."""
    import torch._inductor.config as inductor_config

    monkeypatch.setenv("TORCH_WEBGPU_COMPILE_SCAN", request.param)
    monkeypatch.setattr(inductor_config, "fx_graph_cache", False)
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def compiled(fn, *args, dynamic=False):
    """fn compiled on webgpu tensors: (its results on the CPU, the generated code)."""
    out, codes = run_and_get_code(torch.compile(fn, dynamic=dynamic), *[a.to("webgpu") for a in args])
    out = tuple(o.cpu() for o in out) if isinstance(out, (tuple, list)) else out.cpu()
    return out, "\n".join(codes)


def generated_scan(code: str) -> bool:
    """The scan ran as generated WGSL, not as an eager ATen call."""
    calls = [line for line in code.splitlines()
             if "aten." in line and not line.lstrip().startswith("#") and "= torch.ops.aten" not in line]
    return "_combine(" in code and not calls


SCANS = {
    "cumsum": lambda x, d: torch.cumsum(x, d),
    "cumprod": lambda x, d: torch.cumprod(x, d),
    "logcumsumexp": lambda x, d: torch.logcumsumexp(x, d),
    "cummax": lambda x, d: torch.cummax(x, d),
    "cummin": lambda x, d: torch.cummin(x, d),
}


def check(actual, expected, rtol=1e-5, atol=1e-5):
    if isinstance(expected, tuple):  # (values, indices)
        for a, e in zip(actual, expected):
            torch.testing.assert_close(a, e, rtol=rtol, atol=atol, equal_nan=True)
    else:
        torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=True)


# Row lengths around the workgroup (64; 256 on GPUs for few rows): one block, exactly one,
# a partial second one, many blocks.
@pytest.mark.parametrize("op", list(SCANS))
@pytest.mark.parametrize("length", [2, 63, 64, 65, 300, 1100])
def test_scans_along_the_last_dim(op, length, no_fallback):
    torch.manual_seed(length)
    # cumprod of many values under and over 1 stays finite; logcumsumexp takes any.
    x = torch.rand(7, length) * 0.4 + 0.8 if op == "cumprod" else torch.randn(7, length)
    fn = lambda t: SCANS[op](t, -1)  # noqa: E731
    actual, code = compiled(fn, x)
    assert generated_scan(code)
    check(actual, fn(x), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("op", ["cumsum", "cummax", "logcumsumexp"])
@pytest.mark.parametrize("dim", [0, 1, 2])
def test_scans_along_other_dims_and_strided_inputs(op, dim, no_fallback):
    torch.manual_seed(dim)
    x = torch.randn(20, 33, 9)
    fn = lambda t: SCANS[op](t.transpose(0, 2) * 2, dim)  # noqa: E731
    actual, code = compiled(fn, x)
    assert generated_scan(code)
    check(actual, fn(x))


def test_scan_fuses_with_its_pointwise_neighbours(no_fallback):
    torch.manual_seed(1)
    fn = lambda t: (t.exp() * 0.5).cumsum(-1).sin() + 1  # noqa: E731
    x = torch.randn(5, 200)
    actual, code = compiled(fn, x)
    assert generated_scan(code) and code.count(".launch(") == 1
    # (sums near 200 summed in another order: a few float32 ulp, which sin keeps)
    check(actual, fn(x), atol=1e-4)


def test_scan_beside_a_reduction_of_the_same_rows(no_fallback):
    torch.manual_seed(2)
    fn = lambda t: (t.cumsum(-1) / t.abs().sum(-1, keepdim=True), t.amax(-1))  # noqa: E731
    x = torch.randn(9, 150)
    actual, code = compiled(fn, x)
    assert generated_scan(code)
    check(actual, fn(x))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.bool, torch.uint8])
def test_scan_dtypes(dtype, no_fallback):
    torch.manual_seed(3)
    x = (torch.randn(6, 130) * 4).to(dtype) if dtype.is_floating_point or dtype == torch.bool \
        else torch.randint(-50 if dtype != torch.uint8 else 0, 50, (6, 130), dtype=dtype)
    for fn in (lambda t: t.cumsum(-1), lambda t: torch.cummax(t, 1)):
        torch._dynamo.reset()
        actual, code = compiled(fn, x)
        assert generated_scan(code)
        expected = fn(x)
        # (half types accumulate in float32 and round once, as the CPU does)
        check(actual, expected, rtol=0, atol=0)


def test_nan_and_infinity_propagate_as_on_the_cpu(no_fallback):
    torch.manual_seed(4)
    x = torch.randn(4, 100)
    x[0, 10] = float("nan")
    x[1, 70] = float("nan")
    x[2, :] = float("-inf")
    x[3, 5] = float("inf")
    for op in ("cumsum", "cummax", "cummin", "logcumsumexp", "cumprod"):
        torch._dynamo.reset()
        fn = lambda t: SCANS[op](t, -1)  # noqa: E731
        actual, code = compiled(fn, x)
        assert generated_scan(code)
        check(actual, fn(x))


def test_long_rows_and_many_rows(no_fallback):
    # One long row (Inductor marks it a split scan: ours keeps one workgroup per row) and
    # more rows than one grid dimension holds (65535 workgroups).
    torch.manual_seed(5)
    long_row = torch.randn(1, 20000)
    actual, code = compiled(lambda t: t.cumsum(-1), long_row)
    assert generated_scan(code)
    check(actual, long_row.cumsum(-1), rtol=1e-4, atol=1e-3)
    torch._dynamo.reset()
    many = torch.randn(70000, 3)
    actual, code = compiled(lambda t: torch.cummax(t, -1), many)
    assert generated_scan(code)
    check(actual, torch.cummax(many, -1))


def test_empty_and_single_element_scans(no_fallback):
    torch.manual_seed(6)
    for shape, dim in (((0, 5), 1), ((5, 0), 1), ((4, 1), 1), ((3, 4), 0)):
        torch._dynamo.reset()
        x = torch.randn(shape)
        fn = lambda t: (t.cumsum(dim), *torch.cummin(t, dim))  # noqa: E731
        actual, _ = compiled(fn, x)
        check(actual, fn(x))


def test_dynamic_shapes(no_fallback):
    torch.manual_seed(7)
    fn = torch.compile(lambda t: t.cumsum(-1) * 2, dynamic=True)
    for length in (10, 97, 300):
        x = torch.randn(3, length)
        torch.testing.assert_close(fn(x.to("webgpu")).cpu(), x.cumsum(-1) * 2, rtol=1e-5, atol=1e-4)


def test_int64_sums_past_32_bits_raise():
    x = torch.full((2, 100), 2**30, dtype=torch.int64)
    fn = torch.compile(lambda t: t.cumsum(-1))
    with pytest.raises(RuntimeError, match="beyond 32 bits"):
        fn(x.to("webgpu")).cpu()
    # The device keeps working afterwards.
    small = torch.arange(10).reshape(2, 5)
    torch.testing.assert_close(fn(small.to("webgpu")).cpu(), small.cumsum(-1))
    # Products that fit, in rows shorter than the workgroup: the invocations past the
    # row's end (which hold its last value) must not overflow on their own.
    torch._dynamo.reset()
    prod = torch.compile(lambda t: t.cumprod(-1))
    x = torch.full((2, 4), 200, dtype=torch.int64)
    torch.testing.assert_close(prod(x.to("webgpu")).cpu(), x.cumprod(-1))


def test_training_step_through_a_scan(no_fallback):
    torch.manual_seed(0)
    w = torch.randn(64, 64, requires_grad=True)

    def loss(weight, x):
        return (torch.cumsum(x @ weight, dim=1).tanh() * torch.logcumsumexp(x, 1)).sum()

    x = torch.randn(16, 64)
    wg = w.detach().to("webgpu").requires_grad_()
    out = torch.compile(loss)(wg, x.to("webgpu"))
    out.backward()
    ref = loss(w, x)
    ref.backward()
    torch.testing.assert_close(out.cpu(), ref.detach(), rtol=1e-4, atol=1e-3)
    torch.testing.assert_close(wg.grad.cpu(), w.grad, rtol=1e-4, atol=1e-3)


def test_the_scan_kernel_shape_follows_the_setting(monkeypatch):
    x = torch.randn(4, 100)
    for mode, grid in (("serial", "grid='invocations'"), ("blocks", "grid='groups'")):
        monkeypatch.setenv("TORCH_WEBGPU_COMPILE_SCAN", mode)
        torch._dynamo.reset()
        actual, code = compiled(lambda t: t.cumsum(-1), x)
        assert generated_scan(code) and grid in code
        check(actual, x.cumsum(-1))
    monkeypatch.setenv("TORCH_WEBGPU_COMPILE_SCAN", "fast")
    torch._dynamo.reset()
    with pytest.raises(Exception, match="'serial' or 'blocks' expected"):
        compiled(lambda t: t.cumsum(-1), x)
