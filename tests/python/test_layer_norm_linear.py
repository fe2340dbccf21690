"""torch.ops.webgpu.layer_norm_linear (a decoder layer's residual add + LayerNorm and the
linears after it: h = x + residual; out = linear_group(F.layer_norm(h, norm_weight,
norm_bias, eps), weights, biases), or linear_gated's act(gate) * up with `act`) against a
float64 reference written out here. It shares rms_linear's kernel (test_rms_linear.py: the
operand views, half types and limits it covers hold here too); these cases cross what
LayerNorm adds: the mean subtracted, the norm's bias (strided, absent), one more binding.
"""
import pytest
import torch
import torch.nn.functional as F

from conftest import assert_same, dev, make
from test_linear_group import TOL, dispatches
from test_linear_gated import ACTS
from test_rms_linear import operands

layer_norm_linear = torch.ops.webgpu.layer_norm_linear
EPS = 1e-5


@pytest.fixture(params=["gpu", "gpu_direct_a", "software"])
def path(request, monkeypatch):
    """test_linear_group's paths that matter here (rms_linear's tests cross the others
    with the same kernel): the GEMV that stages and normalizes A, the one that does not
    stage it (composed), the software adapter's (composed)."""
    kind, _, variant = request.param.partition("_")
    monkeypatch.setenv("TORCH_WEBGPU_ADAPTER_KIND", kind)
    if variant:
        monkeypatch.setenv("TORCH_WEBGPU_GEMM_VARIANT", "gemv_" + variant)
    monkeypatch.setenv("TORCH_WEBGPU_DISABLE_CPU_FALLBACK", "1")
    return request.param


def reference(x, residual, nw, nb, eps, weights, biases, act):
    """(out, h): h added in x's dtype (one rounding, as ours), the norm and the linears in
    float64, out rounded once to x's dtype."""
    h = x + residual if residual is not None else x.clone()
    normed = F.layer_norm(h.double(), h.shape[-1:], nw.double(), None if nb is None else nb.double(), eps)
    parts = [normed @ w.double().t() + (0 if b is None else b.double()) for w, b in zip(weights, biases)]
    out = torch.cat(parts, -1) if act == "" else ACTS[act](parts[0]) * parts[1]
    return out.to(x.dtype), h


def one_dispatch(path, x, r, nb, weights, biases):
    """As test_rms_linear's: True where every adapter takes one dispatch (float32, 1-4 rows,
    K of whole words staged within the spec's 16 KiB, bindings within its 8), False where
    none does, None where the adapter's limits decide."""
    k, widths = x.shape[-1], [w.shape[0] for w in weights if w.shape[0]]
    rows = x.numel() // k if k else 0
    if (path not in ("gpu", "gpu_lanes32", "gpu_gated_serial") or x.dtype != torch.float32 or k % 4 or
            not 0 < rows <= 4 or not widths):
        return False
    bindings = (4 + (r is not None) + (nb is not None) + len(widths)
                + sum(b is not None for w, b in zip(weights, biases) if w.shape[0]))
    return True if bindings <= 8 and k * 4 + 256 * 4 <= 16384 else None


def check(x, r, nw, nb, weights, biases, act, tol=TOL[torch.float32], path=None, eps=EPS):
    args = (dev(x), dev(r), dev(nw), dev(nb), eps, [dev(w) for w in weights], [dev(b) for b in biases], act)
    before = dispatches()
    out, h = layer_norm_linear(*args)
    taken = dispatches() - before
    expected, expected_h = reference(x, r, nw, nb, eps, weights, biases, act)
    assert_same(out, expected, **tol)
    assert_same(h, expected_h, exact=True)
    fused = None if path is None else one_dispatch(path, x, r, nb, weights, biases)
    assert fused is None or (taken == 1) == fused, (path, fused, taken)
    return out, h


def norm_bias(k, seed=60):
    return make((k,), torch.float32, seed=seed, low=-1, high=1)


# (shape, widths, biases, residual, norm bias, act): q/k/v-like groups, a single linear
# (OPT's fc1), gated pairs; rows 1-4 and 6 (composite), K = 130 (not whole words: composite),
# rows offset from zero mean (the mean subtracted matters).
CASES = [((1, 64), (33,), (True,), True, True, ""), ((2, 128), (24, 8), (False, True), False, True, ""),
         ((3, 896), (32, 8, 8), (False,) * 3, True, False, ""), ((1, 3, 128), (9, 16), (True, True), True, True, ""),
         ((6, 128), (33,), (True,), True, True, ""), ((1, 130), (33, 8), (True, False), True, True, ""),
         ((1, 896), (24, 24), (False, False), True, True, "silu"), ((4, 128), (17, 17), (True, False), False, True, "gelu"),
         ((2, 64), (40, 40), (True, True), True, False, "gelu_tanh")]


@pytest.mark.parametrize("shape,widths,bias,residual,with_nb,act", CASES)
def test_matches_reference(path, shape, widths, bias, residual, with_nb, act):
    x, r, nw, weights, biases = operands(shape, widths, bias, residual)
    check(x + 3.0, r, nw, norm_bias(shape[-1]) if with_nb else None, weights, biases, act, path=path)


@pytest.mark.parametrize("eps", [0.0, 0.5])
def test_eps_and_constant_rows(path, eps):
    """Small deviations from a mean (eps weighs in; the two-pass variance keeps them)
    and a constant row (variance 0: the bias alone, with eps > 0)."""
    x, r, nw, weights, biases = operands((3, 128), (16, 8), (True, False))
    check(x * 0.01 + 1.0, r * 0.02, nw, norm_bias(128), weights, biases, "", path=path, eps=eps)
    if eps:
        check(torch.full((2, 64), 5.0), None, nw[:64], norm_bias(64), [w[:, :64] for w in weights], biases, "",
              path=path, eps=eps)


def test_strided_norm_weight_and_bias(path):
    x, r, nw, weights, biases = operands((2, 96), (12, 5), (True, False))
    big = make((3 * 96 + 5,), torch.float32, seed=61, low=-1, high=1)
    for nb in (big[5::3], big[1:97], torch.full((1,), 0.75).expand(96)):
        check(x, r, nw.flip(0), nb, weights, biases, "", path=path)


def test_cpu_and_meta_are_the_definition():
    for act, widths in (("", (4, 6)), ("silu", (5, 5))):
        x, r, nw, weights, biases = operands((2, 3, 20), widths, (True, False), True, seed=11)
        for nb in (norm_bias(20), None):
            out, h = layer_norm_linear(x, r, nw, nb, EPS, weights, biases, act)
            expected, expected_h = reference(x, r, nw, nb, EPS, weights, biases, act)
            torch.testing.assert_close(out, expected, **TOL[torch.float32])
            torch.testing.assert_close(h, expected_h, rtol=0, atol=0)
    meta = [t.to("meta") for t in (x, r, nw)]
    out, h = layer_norm_linear(*meta, None, EPS, [w.to("meta") for w in weights], [None] * 2, "silu")
    assert out.shape == (2, 3, 5) and h.shape == (2, 3, 20) and out.device.type == "meta"


def test_empty(path):
    x, r, nw, weights, biases = operands((0, 64), (5, 3), (True, False))
    check(x, r, nw, norm_bias(64), weights, biases, "", path=path)
    x, r, nw, weights, biases = operands((2, 64), (0,), (True,))
    check(x, r, nw, norm_bias(64), weights, biases, "", path=path)


def test_bad_input_raises(no_fallback):
    x, r, nw, weights, biases = operands((2, 16), (4, 4), (False, False))
    nb = norm_bias(16)
    bad = [("norm_bias must be \\[16\\]", nb[:15]), ("norm_bias must be \\[16\\]", nb.view(1, 16))]
    for message, nb_ in bad:
        for device in ("webgpu", "cpu"):
            with pytest.raises(RuntimeError, match=f"layer_norm_linear: {message}"):
                layer_norm_linear(x.to(device), r.to(device), nw.to(device), nb_.to(device), EPS,
                                  [w.to(device) for w in weights], biases, "")
    check(x, r, nw, nb, weights, biases, "silu")


# N-contiguous weights (GPT-2's Conv1D: W [k, n], passed as W.t()): one linear takes the GEMV
# over such weights, which normalizes A itself (gemm_normed). (rows, k, n, W's row stride
# (None: n), bias, residual, norm bias, rms): vec4 words of four columns (n, stride and
# offset multiples of 4) and element loads (n = 30, stride 37); rows 1-4 and 6
# (composite); K = 130 (not whole words: composite).
N_CONTIGUOUS = [(1, 768, 64, None, True, True, True, False), (2, 128, 30, 37, True, False, True, False),
                (4, 64, 96, 100, False, True, False, False), (1, 256, 64, None, True, True, None, True),
                (6, 64, 32, None, True, True, True, False), (1, 130, 16, None, True, True, True, False)]


@pytest.mark.parametrize("rows,k,n,ldw,bias,residual,with_nb,rms", N_CONTIGUOUS)
def test_n_contiguous_weights(path, rows, k, n, ldw, bias, residual, with_nb, rms):
    x, r, nw, _, biases = operands((rows, k), (n,), (bias,), residual)
    wide = make((k, ldw or n), torch.float32, seed=62, low=-2 * k ** -0.5, high=2 * k ** -0.5)
    w = wide[:, :n]
    nb = norm_bias(k) if with_nb else None
    args = (dev(x), dev(r), dev(nw)) + ((None,) if rms else (dev(nb),)) + (EPS, [dev(wide)[:, :n].t()], [dev(biases[0])], "")
    before = dispatches()
    out, h = (torch.ops.webgpu.rms_linear(*args[:3], *args[4:]) if rms else layer_norm_linear(*args))
    taken = dispatches() - before
    hh = x + r if residual else x
    d = hh.double()
    normed = (d * torch.rsqrt(d.pow(2).mean(-1, keepdim=True) + EPS) * nw.double() if rms else
              F.layer_norm(d, (k,), nw.double(), None if nb is None else nb.double(), EPS))
    expected = normed @ w.double() + (0 if biases[0] is None else biases[0].double())
    assert_same(out, expected.float(), **TOL[torch.float32])
    assert_same(h, hh, exact=True)
    # (The paths that force a linear_group variant leave GPT-2's GEMV: composed.)
    one = path == "gpu" and rows <= 4 and k % 4 == 0
    assert (taken == 1) == one, (path, taken)


@pytest.mark.parametrize("act", ["relu", "gelu_tanh", "silu"])
@pytest.mark.parametrize("n_contiguous", [False, True])
def test_one_linear_with_act(path, act, n_contiguous):
    """act over one linear's outputs (OPT's fc1 and relu, GPT-2's c_fc and gelu): the
    K-contiguous weight through the group kernel, the N-contiguous one through GPT-2's
    GEMV, one dispatch where gpu takes them."""
    x, r, nw, (w,), (b,) = operands((2, 128), (24,), (True,), True)
    nb = norm_bias(128)
    weight = dev(w.t().contiguous()).t() if n_contiguous else dev(w)
    before = dispatches()
    out, h = layer_norm_linear(dev(x), dev(r), dev(nw), dev(nb), EPS, [weight], [dev(b)], act)
    taken = dispatches() - before
    linear, expected_h = reference(x, r, nw, nb, EPS, [w], [b], "")
    expected = {"relu": F.relu, "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"), "silu": F.silu}[act](
        linear.double())
    assert_same(out, expected.float(), **TOL[torch.float32])
    assert_same(h, expected_h, exact=True)
    one = path == "gpu" or (path in ("gpu_lanes32", "gpu_gated_serial") and not n_contiguous)
    assert (taken == 1) == one, (path, taken)
    # The CPU's composite: the definition.
    cpu, _ = layer_norm_linear(x, r, nw, nb, EPS, [w], [b], act)
    torch.testing.assert_close(cpu, expected.float(), **TOL[torch.float32])
