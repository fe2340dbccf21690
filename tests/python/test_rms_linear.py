"""torch.ops.webgpu.rms_linear (a decoder layer's residual add + RMSNorm and the linears
after it: h = x + residual; out = linear_group(RMSNorm(h), weights, biases), or
linear_gated's act(gate) * up with `act`) against a float64 reference written out here.

The `path` fixture (test_linear_group's) runs both of the op's paths on any adapter: "gpu"
(float32, up to 4 rows, K of whole vec4 words that fits workgroup memory: one GEMV
dispatch that normalizes A's row while staging it) and the composite (the add, the norm
and the linears as their own ops) everywhere else: software adapters, gpu_scalar and
gpu_direct_a (A not staged), 6 rows, K = 130, half types, too many bindings. Cases cross
those edges; each also checks h.
"""
import pytest
import torch

from conftest import assert_same, dev, make
# linear_group's tolerances, operand views and dispatch count; its fixture `path` (both of
# the op's paths on any adapter).
from test_linear_group import TOL, dispatches, dispatches_in_a_fresh_process, path, strided_operands  # noqa: F401
from test_linear_gated import ACTS

rms_linear = torch.ops.webgpu.rms_linear
EPS = 1e-6


def reference(x, residual, norm_weight, eps, weights, biases, act):
    """(out, h): h added in x's dtype (one rounding, as ours), the norm and the linears in
    float64, out rounded once to x's dtype."""
    h = x + residual if residual is not None else x.clone()
    d = h.double()
    normed = d * torch.rsqrt(d.pow(2).mean(-1, keepdim=True) + eps) * norm_weight.double()
    parts = [normed @ w.double().t() + (0 if b is None else b.double()) for w, b in zip(weights, biases)]
    out = torch.cat(parts, -1) if act == "" else ACTS[act](parts[0]) * parts[1]
    return out.to(x.dtype), h


def ours(x, residual, norm_weight, eps, weights, biases, act):
    return rms_linear(dev(x), dev(residual), dev(norm_weight), eps, [dev(w) for w in weights],
                      [dev(b) for b in biases], act)


def operands(shape, widths, with_bias, residual=True, dtype=torch.float32, seed=10):
    """x (and residual) of `shape`, a norm weight, weights scaled by 1/sqrt(K) (outputs near
    1 at any K, so one tolerance fits) and biases."""
    k = shape[-1]
    x = make(shape, dtype, seed=seed, low=-1, high=1)
    r = make(shape, dtype, seed=seed + 1, low=-1, high=1) if residual else None
    nw = make((k,), dtype, seed=seed + 2, low=0.5, high=1.5)
    scale = max(k, 1) ** -0.5
    weights = [make((n, k), dtype, seed=seed + 3 + i, low=-2 * scale, high=2 * scale) for i, n in enumerate(widths)]
    biases = [make((n,), dtype, seed=seed + 50 + i, low=-1, high=1) if b else None
              for i, (n, b) in enumerate(zip(widths, with_bias))]
    return x, r, nw, weights, biases


def one_dispatch(path, x, r, weights, biases):
    """Whether the op is one dispatch on every adapter (True: float32, 1-4 rows, K of whole
    words whose row fits the spec's 16 KiB of workgroup memory, bindings within its 8), on
    none (False: the paths that never stage A, half types, 5+ rows, K not whole words, no
    rows or columns), or depends on the adapter's limits (None)."""
    k, widths = x.shape[-1], [w.shape[0] for w in weights if w.shape[0]]
    rows = x.numel() // k if k else 0
    if (path not in ("gpu", "gpu_lanes32", "gpu_gated_serial") or x.dtype != torch.float32 or k % 4 or
            not 0 < rows <= 4 or not widths):
        return False
    # x, the norm weight, h, out; a linear of no columns is left out with its bias.
    bindings = 4 + (r is not None) + len(widths) + sum(b is not None for w, b in zip(weights, biases) if w.shape[0])
    return True if bindings <= 8 and k * 4 + 256 * 4 <= 16384 else None


def check(x, r, nw, weights, biases, act, tol=TOL[torch.float32], path=None, eps=EPS):
    """ours against the reference, out within `tol`, h exact; with `path`, also that it
    took one dispatch exactly where one_dispatch says it must (and more where it can't)."""
    args = (dev(x), dev(r), dev(nw), eps, [dev(w) for w in weights], [dev(b) for b in biases], act)
    before = dispatches()
    out, h = rms_linear(*args)
    taken = dispatches() - before
    expected, expected_h = reference(x, r, nw, eps, weights, biases, act)
    assert_same(out, expected, **tol)
    assert_same(h, expected_h, exact=True)
    fused = None if path is None else one_dispatch(path, x, r, weights, biases)
    assert fused is None or (taken == 1) == fused, (path, fused, taken)
    return out, h


# (shape, widths, biases, residual): 1-4 linears; rows 1-4, 6 (past the kernel's rows),
# batch dims and 1-D x; K of whole words (staged: 64, 128, 896, 4096 on llvmpipe's 32 KiB
# of workgroup memory), K = 130 (not whole words: composite); four biased linears with a
# residual need 13 bindings (llvmpipe has 10: composite).
GROUP = [((1, 64), (33,), (True,), True), ((2, 128), (24, 8), (False, True), False),
         ((3, 896), (32, 8, 8), (True, False, True), True), ((4, 64), (9, 16, 3, 5), (False,) * 4, True),
         ((1, 3, 128), (9, 16, 3, 5), (True,) * 4, True), ((6, 128), (33, 8), (True, True), True),
         ((1, 130), (33, 8), (True, False), True), ((2, 2, 130), (5,), (False,), False),
         ((896,), (16, 8), (False, True), True), ((2, 4096), (8,), (True,), True)]


@pytest.mark.parametrize("shape,widths,bias,residual", GROUP)
def test_group_matches_reference(path, shape, widths, bias, residual):
    check(*operands(shape, widths, bias, residual), "", path=path)


# (act, shape, n, biases, residual)
GATED = [("silu", (1, 896), 24, (False, False), True), ("silu", (6, 64), 9, (True, True), True),
         ("gelu", (4, 128), 17, (True, False), False), ("gelu", (1, 2, 130), 8, (False, True), True),
         ("gelu_tanh", (3, 64), 40, (True, True), True), ("gelu_tanh", (2, 1024), 8, (False, False), False)]


@pytest.mark.parametrize("act,shape,n,bias,residual", GATED)
def test_gated_matches_reference(path, act, shape, n, bias, residual):
    check(*operands(shape, (n, n), bias, residual), act, path=path)


@pytest.mark.parametrize("eps", [0.0, 1e-3, 0.5])
def test_eps(path, eps):
    """Rows of small values, where eps weighs in the scale (and none: eps 0)."""
    x, r, nw, weights, biases = operands((3, 128), (16, 8), (True, False))
    check(x * 0.01, r * 0.02, nw, weights, biases, "", path=path, eps=eps)
    check(x * 0.01, None, nw, weights[:1] * 2, biases[:1] * 2, "gelu_tanh", path=path, eps=eps)


def test_cpu_and_meta_are_the_definition():
    """The CPU composite (the definition the other devices' results are held to) against
    the hand-written reference; meta gives the shapes."""
    for act, widths, bias in (("", (4, 6, 3), (False, True, True)), ("silu", (5, 5), (True, False)),
                              ("gelu", (5, 5), (False, False)), ("gelu_tanh", (5, 5), (True, True))):
        for residual in (True, False):
            x, r, nw, weights, biases = operands((2, 3, 20), widths, bias, residual, seed=11)
            out, h = rms_linear(x, r, nw, EPS, weights, biases, act)
            expected, expected_h = reference(x, r, nw, EPS, weights, biases, act)
            torch.testing.assert_close(out, expected, **TOL[torch.float32])
            torch.testing.assert_close(h, expected_h, rtol=0, atol=0)
    meta = [None if t is None else t.to("meta") for t in (x, r, nw)]
    out, h = rms_linear(*meta, EPS, [w.to("meta") for w in weights], [None] * 2, "silu")
    assert out.shape == (2, 3, 5) and h.shape == (2, 3, 20) and out.device.type == "meta"


@pytest.mark.parametrize("start", [0, 1])
def test_strided_views(path, start):
    """x with an offset and row stride, x transposed; residual likewise (one a view of x's
    own buffer); norm weights strided, at an offset, broadcast (stride 0); weights a column
    slice of a wider matrix (row start even or odd) and one transposed; strided biases."""
    xs, (wide, transposed), (b_strided, b_offset) = strided_operands(torch.float32, start)
    k = 96
    big = make((3, 300), torch.float32, seed=12, low=-1, high=1)
    rs = (big[:, 150:150 + k], make((k, 2), torch.float32, seed=13, low=-1, high=1).t(), None)
    nw_big = make((2 * k + 3,), torch.float32, seed=14, low=0.5, high=1.5)
    nws = (nw_big[3::2], nw_big[5:5 + k], torch.full((1,), 1.25).expand(k))
    group = ([wide, transposed[:12], make((5, k), torch.float32, seed=6, low=-1, high=1)], [b_strided, None, None])
    gated = ([wide, transposed], [None, b_offset])
    for (x, r), nw in zip(((xs[0], rs[0]), (xs[1], rs[1]), (xs[0], rs[2]), (xs[1], rs[0][1:])), nws + nws[:1]):
        check(x, r, nw, *group, "")
        check(x, r, nw, *gated, "gelu")
    # The residual a view of x's storage: both read from one buffer.
    check(big[:2, 7:7 + k], big[1:, 100:100 + k], nws[0], *group, "")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_types(path, dtype):
    """Half types take the composite (ops in the dtype, rounded at each): close to the
    float64 reference; h, one rounded add, exact."""
    tol = {torch.float16: dict(rtol=1e-2, atol=1e-2), torch.bfloat16: dict(rtol=6e-2, atol=6e-2)}[dtype]
    check(*operands((2, 128), (16, 8), (True, False), True, dtype), "", tol=tol, path=path)
    check(*operands((1, 3, 64), (8, 8), (False, True), False, dtype), "silu", tol=tol, path=path)
    # A half-type residual or norm weight beside float32 x: h is x + residual as PyTorch
    # promotes it, out float32 (composed).
    x, r, nw, weights, biases = operands((2, 64), (8,), (True,), True)
    out, h = ours(x, r.to(dtype), nw, EPS, weights, biases, "")
    assert_same(h, x + r.to(dtype), exact=True)
    assert_same(out, reference(x, r.to(dtype), nw, EPS, weights, biases, "")[0], **TOL[torch.float32])
    out, h = ours(x, r, nw.to(dtype), EPS, weights, biases, "")
    assert_same(h, x + r, exact=True)
    assert_same(out, reference(x, r, nw.to(dtype), EPS, weights, biases, "")[0], **TOL[torch.float32])


def test_h_is_the_sum_in_a_new_tensor(path):
    x, r, nw, weights, biases = operands((2, 64), (8, 8), (False, False))
    xd, rd = dev(x), dev(r)
    for residual in (rd, None):
        _, h = rms_linear(xd, residual, dev(nw), EPS, [dev(w) for w in weights], biases, "silu")
        assert_same(h, x + r if residual is not None else x, exact=True)
        assert h.untyped_storage().data_ptr() not in (xd.untyped_storage().data_ptr(), rd.untyped_storage().data_ptr())
        h.fill_(7.0)  # written through h: x and the residual keep their values
        assert_same(xd, x, exact=True)
        assert_same(rd, r, exact=True)


@pytest.mark.parametrize("k", [128, 896])
def test_one_dispatch(monkeypatch, k):
    """q/k/v with biases (no residual: 10 bindings, llvmpipe's limit), three linears with a
    residual, and gate/up with biases and a residual: each one dispatch."""
    monkeypatch.setenv("TORCH_WEBGPU_ADAPTER_KIND", "gpu")
    monkeypatch.setenv("TORCH_WEBGPU_DISABLE_CPU_FALLBACK", "1")
    for widths, bias, residual, act in (((64, 16, 16), (True,) * 3, False, ""),
                                        ((64, 16, 16), (False,) * 3, True, ""),
                                        ((48, 48), (True, True), True, "silu")):
        x, r, nw, weights, biases = operands((1, k), widths, bias, residual, seed=k)
        args = (dev(x), dev(r), dev(nw), EPS, [dev(w) for w in weights], [dev(b) for b in biases], act)
        rms_linear(*args)  # pipelines, allocations
        before = dispatches()
        out, h = rms_linear(*args)
        assert dispatches() - before == 1, (widths, residual, act)
        expected, expected_h = reference(x, r, nw, EPS, weights, biases, act)
        assert_same(out, expected, **TOL[torch.float32])
        assert_same(h, expected_h, exact=True)


@pytest.mark.parametrize("k,expected_dispatches", [(100, 1), (3800, None), (4096, None)])
def test_default_limits_in_a_fresh_process(k, expected_dispatches):
    """The spec's default limits: 16 KiB of workgroup memory stages K = 100 (one dispatch:
    x, residual, norm weight, h, a weight, a bias and out in 8 storage buffers) but not
    K = 4096 (16 KiB + the reduction's 1 KiB), nor K = 3800 (the row fits beside the sums,
    not beside the norm's tree too: it failed to build): composed from eager ops, same
    answer."""
    setup = (
        f"x = torch.randn(3, {k}, generator=g)\n"
        f"r = torch.randn(3, {k}, generator=g)\n"
        f"nw = torch.rand({k}, generator=g) + 0.5\n"
        f"w = torch.randn(12, {k}, generator=g) / {k ** 0.5}\n"
        "b = torch.randn(12, generator=g)\n"
        "h = (x + r).double()\n"
        "normed = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * nw.double()\n"
        "ref = F.linear(normed, w.double(), b.double())\n"
        "ref = ref.float()\n")
    call = ("torch.ops.webgpu.rms_linear(x.to('webgpu'), r.to('webgpu'), nw.to('webgpu'), 1e-6, "
            "[w.to('webgpu')], [b.to('webgpu')], '')[0]")
    dispatches = dispatches_in_a_fresh_process(setup, call, {"TORCH_WEBGPU_LIMITS": "default"})
    if expected_dispatches is not None:
        assert dispatches == expected_dispatches
    else:
        assert dispatches > 1


def test_empty(path):
    """No rows (out and h empty), no columns (h still computed), K == 0 (the biases)."""
    x, r, nw, weights, biases = operands((0, 64), (5, 3), (True, False))
    check(x, r, nw, weights, biases, "", path=path)
    x, r, nw, weights, biases = operands((2, 0, 64), (5, 5), (True, False))
    check(x, r, nw, weights, biases, "silu", path=path)
    x, r, nw, weights, biases = operands((2, 64), (0,), (True,))
    check(x, r, nw, weights, biases, "", path=path)
    x, r, nw, weights, biases = operands((3, 64), (4, 0, 2), (False, True, True))
    check(x, r, nw, weights, biases, "", path=path)
    x, r, nw, weights, biases = operands((2, 64), (0, 0), (False, False), residual=False)
    check(x, r, nw, weights, biases, "gelu", path=path)
    x, r, nw, weights, biases = operands((2, 0), (5, 3), (True, False))
    out, h = check(x, r, nw, weights, biases, "", path=path)
    assert_same(out, torch.cat([biases[0].expand(2, 5), torch.zeros(2, 3)], -1), exact=True)


def test_bad_input_raises(no_fallback):
    x, r, nw, weights, biases = (dev(t) for t in operands((2, 16), (4, 4), (False, False)))
    weights = [dev(w) for w in weights]
    bad = [
        ("norm_weight must be \\[16\\]", (x, r, nw[:15], weights, [None, None], "")),
        ("norm_weight must be \\[16\\]", (x, r, nw.view(1, 16), weights, [None, None], "")),
        ("residual must be shaped as x", (x, r[:1], nw, weights, [None, None], "")),
        ("residual must be shaped as x", (x, r.view(2, 1, 16), nw, weights, [None, None], "")),
        ("act takes one weight \\(act\\(linear\\)\\) or two", (x, r, nw, weights * 2, [None] * 4, "gelu")),
        ("act must be 'silu', 'gelu', 'gelu_tanh' or 'relu'", (x, r, nw, weights, [None, None], "tanh")),
        ("x must have a last dimension", (x[0, 0], None, nw[:1], [w[:, :1] for w in weights], [None, None], "")),
    ]
    for message, (x_, r_, nw_, weights_, biases_, act) in bad:
        for device in ("webgpu", "cpu"):
            move = (lambda t: None if t is None else t.to(device))
            with pytest.raises(RuntimeError, match=message):
                rms_linear(move(x_), move(r_), move(nw_), EPS, [move(w) for w in weights_], biases_, act)
    # The process keeps working.
    check(*operands((2, 16), (4, 4), (False, False)), "silu")
