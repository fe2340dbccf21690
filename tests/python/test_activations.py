"""Native activations and their backward kernels against the CPU: forward values over
extremal inputs and dtypes, in-place and out= variants, parameters, the CPU's errors, and
gradients (which run the native *_backward kernels). The CPU fallback is disabled."""
import math

import pytest
import torch
import torch.nn.functional as F

from conftest import DEVICE, NATIVE_DTYPES, assert_same, check, dev, make

pytestmark = pytest.mark.usefixtures("no_fallback")

ACTIVATIONS = {
    "elu": F.elu,
    "elu_alpha": lambda x: F.elu(x, alpha=0.5),
    "selu": F.selu,
    "celu": lambda x: F.celu(x, alpha=1.5),
    "leaky_relu": F.leaky_relu,
    "leaky_relu_slope": lambda x: F.leaky_relu(x, 0.2),
    "hardtanh": F.hardtanh,
    "hardtanh_range": lambda x: F.hardtanh(x, -0.5, 2.0),
    "relu6": F.relu6,
    "hardsigmoid": F.hardsigmoid,
    "hardswish": F.hardswish,
    "mish": F.mish,
    "softplus": F.softplus,
    "softplus_beta": lambda x: F.softplus(x, beta=2.0, threshold=5.0),
    "softshrink": F.softshrink,
    "hardshrink": lambda x: F.hardshrink(x, 0.7),
    "threshold": lambda x: F.threshold(x, 0.5, -2.0),
    "logsigmoid": F.logsigmoid,
    "relu": F.relu,
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": F.silu,
    "glu": F.glu,
    "prelu": lambda x: F.prelu(x, torch.tensor([0.25], device=x.device)),
}

EDGE = [0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.0, 3.0, -3.0, 0.5, -0.5, 20.0,
        -20.0, 1e-3, -1e-3, 1e-30, 50.0, -50.0, 100.0, -100.0, 2.9999, -2.9999, 0.7, -0.7]


def edge_input():
    g = torch.Generator().manual_seed(0)
    return torch.cat([torch.tensor(EDGE), torch.randn(200, generator=g) * 4])


@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_float32_edges(name):
    x = edge_input()
    if name == "gelu":
        # The CPU's vectorized GELU gives NaN at +inf (its scalar path the limit, inf, which
        # the device gives too: test_elementwise checks it).
        x = x[x != math.inf]
    fn = ACTIVATIONS[name]
    assert_same(fn(dev(x)), fn(x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", NATIVE_DTYPES, ids=str)
@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_dtypes(name, dtype):
    x = make((4, 6), dtype, seed=1)
    check(ACTIVATIONS[name], x)


@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_gradients(name):
    fn = ACTIVATIONS[name]
    x = edge_input()
    x = x[torch.isfinite(x)][:120]
    # Kinks of hardtanh, threshold, shrink: the CPU and the device take the same branch.
    xc = x.clone().requires_grad_()
    g = torch.randn(fn(xc).shape, generator=torch.Generator().manual_seed(2))
    fn(xc).backward(g)
    xd = dev(x).requires_grad_()
    fn(xd).backward(dev(g))
    assert_same(xd.grad, xc.grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", ["elu", "gelu", "gelu_tanh", "silu", "mish", "softplus",
                                  "hardswish", "logsigmoid", "sigmoid", "tanh", "relu"])
def test_half_gradients(name, dtype):
    fn = ACTIVATIONS[name]
    x = make((30,), dtype, seed=3)
    xc = x.clone().requires_grad_()
    fn(xc).backward(torch.ones_like(xc))
    xd = dev(x).requires_grad_()
    fn(xd).backward(torch.ones_like(xd))
    assert_same(xd.grad, xc.grad, rtol=2e-2, atol=1e-2)


INPLACE = {
    "elu": lambda t: F.elu(t, inplace=True),
    "leaky_relu": lambda t: F.leaky_relu(t, 0.1, inplace=True),
    "hardtanh": lambda t: F.hardtanh(t, inplace=True),
    "relu6": lambda t: F.relu6(t, inplace=True),
    "hardsigmoid": lambda t: F.hardsigmoid(t, inplace=True),
    "hardswish": lambda t: F.hardswish(t, inplace=True),
    "mish": lambda t: F.mish(t, inplace=True),
    "threshold": lambda t: F.threshold(t, 0.1, 20.0, inplace=True),
    "celu": lambda t: F.celu(t, inplace=True),
    "selu": lambda t: F.selu(t, inplace=True),
}


@pytest.mark.parametrize("name", list(INPLACE))
def test_inplace(name):
    base = make((5, 6), torch.float32, seed=4)
    check(INPLACE[name], base)
    # A non-contiguous view updated in place.
    check(lambda t: (INPLACE[name](t[:, ::2]), t)[1], base)


def test_out_variants():
    x = make((3, 4), torch.float32, seed=5)
    for op in (torch._C._nn.elu, torch._C._nn.hardsigmoid, torch._C._nn.softplus,
               torch._C._nn.hardswish, torch._C._nn.mish, torch._C._nn.log_sigmoid):
        check(lambda t: op(t, out=torch.empty(0, device=t.device)), x)
    check(lambda t: torch._C._nn.hardtanh(t, -1.0, 1.0, out=torch.empty(0, device=t.device)), x)
    check(lambda t: torch._C._nn.leaky_relu(t, 0.3, out=torch.empty(0, device=t.device)), x)


def test_errors():
    x = make((3, 4), torch.float32, seed=6)
    check(lambda t: F.softshrink(t, -1.0), x)
    check(lambda t: F.hardtanh(t.bool()), x)
    check(lambda t: F.glu(t, dim=0), make((3, 4), torch.float32))
    check(lambda t: F.glu(t[0, 0]), x)
    check(lambda t: F.gelu(t, approximate="bad"), x)


def test_glu_dims_and_backward():
    x = make((4, 6, 2), torch.float32, seed=7)
    for dim in (0, 1, -1):
        check(lambda t: F.glu(t, dim), x)


def test_relu_backward_is_threshold_backward():
    x = torch.tensor([-1.0, 0.0, 2.0, -0.0, 3.0])
    xc = x.clone().requires_grad_()
    torch.relu(xc).backward(torch.ones(5))
    xd = dev(x).requires_grad_()
    torch.relu(xd).backward(torch.ones(5, device=DEVICE))
    assert_same(xd.grad, xc.grad, exact=True)


def test_backward_ops_directly():
    g = make((3, 4), torch.float32, seed=8)
    x = make((3, 4), torch.float32, seed=9)
    y = torch.sigmoid(x)
    check(torch.ops.aten.sigmoid_backward, g, y)
    check(torch.ops.aten.tanh_backward, g, torch.tanh(x))
    check(torch.ops.aten.threshold_backward, g, x, 0.5)
    check(lambda a, b: torch.ops.aten.threshold_backward(a.int(), b.int(), 1), g * 10, x * 10)
    check(lambda a, b: torch.ops.aten.gelu_backward(a, b, approximate="tanh"), g, x)
    check(lambda a, b: torch.ops.aten.elu_backward(a, 1.0, 1.0, 1.0, True, b), g, F.elu(x))
    check(lambda a, b: torch.ops.aten.elu_backward(a, -1.0, 1.0, 1.0, True, b), g, x)  # error
    check(lambda a, b: torch.ops.aten.leaky_relu_backward(a, b, -0.1, True), g, x)  # error
    check(lambda a, b: torch.ops.aten.hardtanh_backward(a, b, -0.5, 0.5), g, x)
    check(lambda a, b: torch.ops.aten.softplus_backward(a, b, 1.0, 20.0), g, x)
