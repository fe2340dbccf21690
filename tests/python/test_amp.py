"""Mixed precision on webgpu: torch.autocast("webgpu") casts ops by CUDA's policy lists,
and torch.amp.GradScaler("webgpu") runs on native unscale / scale-update kernels.

Each policy category is checked for its output dtype (what CUDA's autocast gives) and its
values (the CPU running the same op on inputs cast the same way). The scaler's two ops are
compared with the CPU's kernels exactly. Two small models train 20 steps under
autocast(float16) + GradScaler with the CPU fallback disabled and track the CPU's run."""
import copy
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_webgpu  # noqa: F401
from conftest import DEVICE, assert_same, make, tol

LOW_DTYPES = [torch.float16, torch.bfloat16]


def _on_device(args):
    return [a.to(DEVICE) if isinstance(a, torch.Tensor) else a for a in args]


def _cast(args, dtype):
    return [a.to(dtype) if isinstance(a, torch.Tensor) and a.is_floating_point() else a
            for a in args]


def _autocast_result(fn, args, dtype):
    with torch.autocast(DEVICE, dtype=dtype):
        return fn(*_on_device(args))


# ---- lower_precision_fp: matrix products and convolutions run in the autocast dtype ----

def _mat(*shape, seed):
    return make(shape, torch.float32, seed=seed, low=-1, high=1)


LOWER_PRECISION_CASES = {
    "mm": (torch.mm, lambda: [_mat(5, 7, seed=1), _mat(7, 3, seed=2)]),
    "mv": (torch.mv, lambda: [_mat(5, 7, seed=1), _mat(7, seed=2)]),
    "bmm": (torch.bmm, lambda: [_mat(2, 5, 7, seed=1), _mat(2, 7, 3, seed=2)]),
    "matmul": (torch.matmul, lambda: [_mat(2, 5, 7, seed=1), _mat(7, 3, seed=2)]),
    "linear": (F.linear, lambda: [_mat(4, 7, seed=1), _mat(3, 7, seed=2), _mat(3, seed=3)]),
    "addmm": (torch.addmm, lambda: [_mat(5, 3, seed=0), _mat(5, 7, seed=1), _mat(7, 3, seed=2)]),
    "addmv": (torch.addmv, lambda: [_mat(5, seed=0), _mat(5, 7, seed=1), _mat(7, seed=2)]),
    "addr": (torch.addr, lambda: [_mat(5, 3, seed=0), _mat(5, seed=1), _mat(3, seed=2)]),
    "baddbmm": (torch.baddbmm,
                lambda: [_mat(2, 5, 3, seed=0), _mat(2, 5, 7, seed=1), _mat(2, 7, 3, seed=2)]),
    "addbmm": (torch.addbmm,
               lambda: [_mat(5, 3, seed=0), _mat(2, 5, 7, seed=1), _mat(2, 7, 3, seed=2)]),
    "einsum": (lambda a, b: torch.einsum("ij,jk->ik", a, b),
               lambda: [_mat(5, 7, seed=1), _mat(7, 3, seed=2)]),
    "conv1d": (F.conv1d, lambda: [_mat(2, 3, 9, seed=1), _mat(4, 3, 3, seed=2), _mat(4, seed=3)]),
    "conv2d": (lambda x, w, b: F.conv2d(x, w, b, padding=1),
               lambda: [_mat(2, 3, 6, 5, seed=1), _mat(4, 3, 3, 3, seed=2), _mat(4, seed=3)]),
    "conv_transpose2d": (lambda x, w: F.conv_transpose2d(x, w, stride=2),
                         lambda: [_mat(1, 3, 4, 4, seed=1), _mat(3, 2, 3, 3, seed=2)]),
    "prelu": (F.prelu, lambda: [_mat(2, 3, 4, seed=1), _mat(3, seed=2)]),
    "sdpa": (F.scaled_dot_product_attention,
             lambda: [_mat(1, 2, 4, 8, seed=1), _mat(1, 2, 4, 8, seed=2), _mat(1, 2, 4, 8, seed=3)]),
}


@pytest.mark.parametrize("dtype", LOW_DTYPES)
@pytest.mark.parametrize("name", sorted(LOWER_PRECISION_CASES))
def test_lower_precision_ops_run_in_autocast_dtype(name, dtype, no_fallback):
    fn, make_args = LOWER_PRECISION_CASES[name]
    args = make_args()
    actual = _autocast_result(fn, args, dtype)
    # CUDA's rule: float32 inputs are cast to the autocast dtype, the op runs there.
    expected = fn(*_cast(args, dtype))
    assert expected.dtype == dtype
    # Half types compute in float32 here and round once; the CPU may round partial sums.
    assert_same(actual, expected, **({"rtol": 2e-3, "atol": 2e-3} if dtype == torch.float16
                                     else {"rtol": 2e-2, "atol": 1e-2}))


@pytest.mark.parametrize("dtype", LOW_DTYPES)
def test_lower_precision_matches_cpu_autocast(dtype, no_fallback):
    # Where the CPU's autocast list agrees with CUDA's (mm, linear, conv2d), the CPU under
    # its own autocast is the reference.
    x, w, b = _mat(4, 7, seed=1), _mat(3, 7, seed=2), _mat(3, seed=3)
    img, k = _mat(1, 2, 5, 5, seed=4), _mat(3, 2, 3, 3, seed=5)
    with torch.autocast("cpu", dtype=dtype):
        expected = [F.linear(x, w, b), x @ w.t(), F.conv2d(img, k)]
    actual = [_autocast_result(F.linear, [x, w, b], dtype),
              _autocast_result(lambda p, q: p @ q.t(), [x, w], dtype),
              _autocast_result(F.conv2d, [img, k], dtype)]
    for a, e in zip(actual, expected):
        assert e.dtype == dtype
        assert_same(a, e, **({"rtol": 2e-3, "atol": 2e-3} if dtype == torch.float16
                             else {"rtol": 2e-2, "atol": 1e-2}))


# ---- fp32: functions, norms and losses run in float32 whatever their input dtype ----

def _pos(*shape, seed):
    return make(shape, torch.float32, seed=seed, low=0.1, high=2)


def _targets(n, classes, seed):
    return torch.randint(0, classes, (n,), generator=torch.Generator().manual_seed(seed))


FP32_CASES = {
    "exp": (torch.exp, lambda: [_mat(4, 5, seed=1)]),
    "log": (torch.log, lambda: [_pos(4, 5, seed=1)]),
    "log1p": (torch.log1p, lambda: [_pos(4, 5, seed=1)]),
    "pow": (lambda x: torch.pow(x, 3), lambda: [_mat(4, 5, seed=1)]),
    "pow_tensor": (torch.pow, lambda: [_pos(4, 5, seed=1), _mat(4, 5, seed=2)]),
    "reciprocal": (torch.reciprocal, lambda: [_pos(4, 5, seed=1)]),
    "rsqrt": (torch.rsqrt, lambda: [_pos(4, 5, seed=1)]),
    "softplus": (F.softplus, lambda: [_mat(4, 5, seed=1)]),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (6,), w, b),
                   lambda: [_mat(3, 6, seed=1), _mat(6, seed=2), _mat(6, seed=3)]),
    "group_norm": (lambda x: F.group_norm(x, 2), lambda: [_mat(2, 4, 3, seed=1)]),
    "rms_norm": (lambda x: F.rms_norm(x, (6,)), lambda: [_mat(3, 6, seed=1)]),
    "mse_loss": (F.mse_loss, lambda: [_mat(4, 5, seed=1), _mat(4, 5, seed=2)]),
    "l1_loss": (F.l1_loss, lambda: [_mat(4, 5, seed=1), _mat(4, 5, seed=2)]),
    "smooth_l1_loss": (F.smooth_l1_loss, lambda: [_mat(4, 5, seed=1), _mat(4, 5, seed=2)]),
    "bce_with_logits": (F.binary_cross_entropy_with_logits,
                        lambda: [_mat(4, 5, seed=1), make((4, 5), torch.float32, seed=2,
                                                         low=0, high=1)]),
    "nll_loss": (F.nll_loss, lambda: [_mat(6, 4, seed=1), _targets(6, 4, seed=2)]),
    # cross_entropy is composite: log_softmax with dtype=input's dtype (kept, as the
    # caller chose it), then nll_loss in float32. CUDA does the same.
    "cross_entropy": (F.cross_entropy, lambda: [_mat(6, 4, seed=1), _targets(6, 4, seed=2)],
                      lambda x, y: F.nll_loss(torch.log_softmax(x, 1).float(), y)),
    "kl_div": (lambda x, y: F.kl_div(x, y, reduction="batchmean"),
               lambda: [_mat(4, 5, seed=1), _pos(4, 5, seed=2)]),
    "cosine_similarity": (F.cosine_similarity, lambda: [_mat(4, 5, seed=1), _mat(4, 5, seed=2)]),
    "logsumexp": (lambda x: torch.logsumexp(x, 1), lambda: [_mat(4, 5, seed=1)]),
    "cdist": (torch.cdist, lambda: [_mat(4, 3, seed=1), _mat(5, 3, seed=2)]),
    "upsample_bilinear": (lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"),
                          lambda: [_mat(1, 2, 3, 3, seed=1)]),
    # fp32_set_opt_dtype: reductions and softmax accumulate in float32.
    "softmax": (lambda x: torch.softmax(x, 1), lambda: [_mat(4, 5, seed=1)]),
    "log_softmax": (lambda x: torch.log_softmax(x, 1), lambda: [_mat(4, 5, seed=1)]),
    "sum": (torch.sum, lambda: [_mat(4, 5, seed=1)]),
    "sum_dim": (lambda x: torch.sum(x, 1), lambda: [_mat(4, 5, seed=1)]),
    "prod": (lambda x: torch.prod(x, 1), lambda: [_pos(4, 5, seed=1)]),
    "cumsum": (lambda x: torch.cumsum(x, 1), lambda: [_mat(4, 5, seed=1)]),
    "cumprod": (lambda x: torch.cumprod(x, 1), lambda: [_pos(4, 5, seed=1)]),
    "vector_norm": (torch.linalg.vector_norm, lambda: [_mat(4, 5, seed=1)]),
    # fp32_append_dtype: norm goes to its overload with a dtype.
    "norm": (torch.norm, lambda: [_mat(4, 5, seed=1)]),
    "norm_dim": (lambda x: torch.norm(x, 2, 1), lambda: [_mat(4, 5, seed=1)]),
}


@pytest.mark.parametrize("dtype", LOW_DTYPES)
@pytest.mark.parametrize("name", sorted(FP32_CASES))
def test_fp32_ops_run_in_float32(name, dtype, no_fallback):
    fn, make_args, *reference = FP32_CASES[name]
    # Inputs arrive in the low dtype (an earlier matmul's output); the op widens them.
    low_args = _cast(make_args(), dtype)
    actual = _autocast_result(fn, low_args, dtype)
    assert actual.dtype == torch.float32, actual.dtype
    if reference:
        # An intermediate stays in the low dtype: its roundings may differ by an ulp.
        assert_same(actual, reference[0](*low_args), **tol(dtype))
    else:
        assert_same(actual, fn(*_cast(low_args, torch.float32)), rtol=2e-5, atol=2e-5)


def test_fp32_set_opt_dtype_keeps_an_explicit_dtype(no_fallback):
    x = _mat(4, 5, seed=1).half()
    with torch.autocast(DEVICE, dtype=torch.float16):
        s = torch.softmax(x.to(DEVICE), 1, dtype=torch.float16)
        total = torch.sum(x.to(DEVICE), dtype=torch.float16)
        ints = torch.sum(torch.arange(6, device=DEVICE))
    assert s.dtype == torch.float16 and total.dtype == torch.float16
    assert ints.dtype == torch.int64  # non-float tensors are never cast
    assert_same(s, torch.softmax(x.float(), 1, dtype=torch.float16))
    assert_same(total, torch.sum(x.float(), dtype=torch.float16))
    assert ints.item() == 15


# ---- promote: ops mixing tensors run in the widest floating dtype among them ----

PROMOTE_CASES = {
    "addcmul": (lambda a, b, c: torch.addcmul(a, b, c, value=0.5), 3),
    "addcdiv": (lambda a, b, c: torch.addcdiv(a, b, c.abs() + 1, value=0.5), 3),
    "atan2": (torch.atan2, 2),
    "dot": (lambda a, b: torch.dot(a.flatten(), b.flatten()), 2),
    "cross": (lambda a, b: torch.cross(a[:, :3], b[:, :3], dim=1), 2),
    "index_put": (lambda a, v: a.index_put((torch.tensor([0, 2], device=a.device),),
                                           v[:2]), 2),
    "scatter_add": (lambda a, s: a.scatter_add(0, torch.zeros_like(a, dtype=torch.int64), s), 2),
}


@pytest.mark.parametrize("dtype", LOW_DTYPES)
@pytest.mark.parametrize("name", sorted(PROMOTE_CASES))
def test_promote_ops_run_in_widest_dtype(name, dtype, no_fallback):
    fn, arity = PROMOTE_CASES[name]
    args = [_mat(4, 5, seed=k) for k in range(arity)]
    # The first operand in the low dtype, the others in float32: the op runs in float32.
    mixed = [args[0].to(dtype)] + args[1:]
    actual = _autocast_result(fn, mixed, dtype)
    assert actual.dtype == torch.float32
    assert_same(actual, fn(*_cast(mixed, torch.float32)), rtol=2e-5, atol=2e-5)
    # All in the low dtype: it stays there.
    low = _cast(args, dtype)
    actual = _autocast_result(fn, low, dtype)
    assert actual.dtype == dtype
    # scatter_add's duplicate indices sum in another order on GPUs (atomics), and the CPU
    # rounds every partial sum to the low dtype: a few low-dtype ulps apart.
    loose = dict(rtol=1e-2, atol=1e-3) if name == "scatter_add" else {}
    assert_same(actual, fn(*low), **loose)


@pytest.mark.parametrize("dtype", LOW_DTYPES)
def test_unlisted_ops_pass_through(dtype, no_fallback):
    x, y = _mat(4, 5, seed=1), _mat(4, 5, seed=2)
    with torch.autocast(DEVICE, dtype=dtype):
        xd, yd = x.to(DEVICE), y.to(DEVICE)
        relu = torch.relu(xd.to(dtype))
        mixed = xd.to(dtype) + yd  # ordinary promotion: float32
        cat = torch.cat([xd.to(dtype), yd])  # not in CUDA's list: cat promotes by itself
        plain = xd * yd  # float32 stays float32
    assert relu.dtype == dtype and mixed.dtype == torch.float32
    assert cat.dtype == torch.float32 and plain.dtype == torch.float32
    assert_same(relu, torch.relu(x.to(dtype)), exact=True)
    assert_same(mixed, x.to(dtype) + y)
    assert_same(cat, torch.cat([x.to(dtype).float(), y]), exact=True)


def test_autocast_disabled_region_and_nesting(no_fallback):
    a, b = _mat(4, 5, seed=1).to(DEVICE), _mat(5, 3, seed=2).to(DEVICE)
    with torch.autocast(DEVICE):
        assert (a @ b).dtype == torch.float16  # the default dtype: float16, as CUDA
        with torch.autocast(DEVICE, enabled=False):
            assert (a @ b).dtype == torch.float32
        with torch.autocast(DEVICE, dtype=torch.bfloat16):
            assert (a @ b).dtype == torch.bfloat16
        assert (a @ b).dtype == torch.float16
    assert (a @ b).dtype == torch.float32
    # The CPU's autocast does not touch webgpu tensors, and ours not CPU ones.
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert (a @ b).dtype == torch.float32
    with torch.autocast(DEVICE):
        assert (a.cpu() @ b.cpu()).dtype == torch.float32


def test_default_dtype_and_device_module():
    assert torch.get_autocast_dtype(DEVICE) == torch.float16
    assert torch._C._is_autocast_available(DEVICE)
    assert torch.webgpu.get_amp_supported_dtype() == [torch.float16, torch.bfloat16]
    assert torch.webgpu.is_bf16_supported() is True
    assert torch.webgpu.is_bf16_supported(including_emulation=False) is True


def test_unsupported_dtype_warns_and_disables():
    # As for CPU and other non-CUDA backends: a warning, and autocast stays off.
    a, b = _mat(4, 5, seed=1).to(DEVICE), _mat(5, 3, seed=2).to(DEVICE)
    with pytest.warns(UserWarning, match="In webgpu autocast, but the target dtype is not "
                                         "supported. Disabling autocast"):
        ctx = torch.autocast(DEVICE, dtype=torch.float64)
    with ctx:
        assert not torch.is_autocast_enabled(DEVICE)
        assert (a @ b).dtype == torch.float32


def test_binary_cross_entropy_is_refused_under_autocast():
    p = torch.rand(4, device=DEVICE)
    t = torch.rand(4, device=DEVICE)
    with torch.autocast(DEVICE):
        with pytest.raises(RuntimeError, match="unsafe to autocast"):
            F.binary_cross_entropy(p, t)
    # Outside autocast it runs.
    assert_same(F.binary_cross_entropy(p, t), F.binary_cross_entropy(p.cpu(), t.cpu()))


def test_deprecated_aliases():
    a, b = _mat(4, 5, seed=1).to(DEVICE), _mat(5, 3, seed=2).to(DEVICE)
    with pytest.warns(FutureWarning, match=r"torch.amp.autocast\('webgpu'"):
        ctx = torch.webgpu.amp.autocast(dtype=torch.bfloat16)
    with ctx:
        assert (a @ b).dtype == torch.bfloat16
    with pytest.warns(FutureWarning, match=r"torch.amp.GradScaler\('webgpu'"):
        scaler = torch.webgpu.amp.GradScaler(init_scale=8.0)
    assert isinstance(scaler, torch.amp.GradScaler) and scaler._device == DEVICE
    assert scaler.get_scale() == 8.0


def test_autocast_backward_grads_are_float32(no_fallback):
    # Weights stay float32 (autocast casts copies); their grads come back float32.
    lin = nn.Linear(6, 3).to(DEVICE)
    x = _mat(4, 6, seed=1).to(DEVICE)
    with torch.autocast(DEVICE):
        y = lin(x)
        loss = y.float().square().mean()
    assert y.dtype == torch.float16
    loss.backward()
    assert lin.weight.grad.dtype == torch.float32 and lin.bias.grad.dtype == torch.float32
    ref = nn.Linear(6, 3)
    ref.load_state_dict({k: v.cpu() for k, v in lin.state_dict().items()})
    xc = x.cpu()
    yc = F.linear(xc.half(), ref.weight.half(), ref.bias.half())
    yc.float().square().mean().backward()
    assert_same(lin.weight.grad, ref.weight.grad, rtol=2e-3, atol=2e-3)
    assert_same(lin.bias.grad, ref.bias.grad, rtol=2e-3, atol=2e-3)


# ---- GradScaler's device ops against the CPU's ----

def _unscale_both(grads, inv_scale, found_inf=0.0, dev_grads=None):
    """Runs the unscale op on CPU copies and on device copies (or the given device views);
    returns (device grads, device found_inf, cpu grads, cpu found_inf)."""
    cpu_grads = [g.clone() for g in grads]
    cpu_found = torch.tensor(found_inf)
    torch._amp_foreach_non_finite_check_and_unscale_(cpu_grads, cpu_found,
                                                     torch.tensor(inv_scale))
    if dev_grads is None:
        dev_grads = [g.to(DEVICE) for g in grads]
    dev_found = torch.tensor(found_inf, device=DEVICE)
    torch._amp_foreach_non_finite_check_and_unscale_(
        dev_grads, dev_found, torch.tensor(inv_scale, device=DEVICE))
    return dev_grads, dev_found, cpu_grads, cpu_found


@pytest.mark.parametrize("inv_scale", [1.0, 0.25, 1.0 / 3.0, 2.0**-20])
@pytest.mark.parametrize("poison", [None, "inf", "-inf", "nan"])
def test_unscale_matches_cpu(inv_scale, poison, no_fallback):
    grads = [make((7, 5), torch.float32, seed=1, low=-1e3, high=1e3),
             make((33,), torch.float16, seed=2, low=-100, high=100),
             make((4, 3, 2), torch.bfloat16, seed=3, low=-100, high=100),
             make((), torch.float32, seed=4)]
    if poison is not None:
        grads[1][17] = float(poison)  # one bad element in one gradient flags the step
    d, dfound, c, cfound = _unscale_both(grads, inv_scale)
    for a, e in zip(d, c):
        assert_same(a, e, exact=True)
    assert_same(dfound, cfound, exact=True)
    assert dfound.item() == (0.0 if poison is None else 1.0)


@pytest.mark.parametrize("dtype", LOW_DTYPES + [torch.float32])
def test_unscale_poison_in_each_dtype_and_position(dtype, no_fallback):
    for pos in [0, 1, 64, 129]:  # word halves and workgroup boundaries
        g = make((130,), dtype, seed=pos, low=-10, high=10)
        g[pos] = float("nan")
        d, dfound, c, cfound = _unscale_both([g], 0.5)
        assert_same(d[0], c[0], exact=True)
        assert dfound.item() == 1.0 and cfound.item() == 1.0


def test_unscale_found_inf_is_never_cleared(no_fallback):
    d, dfound, c, cfound = _unscale_both([make((5,), torch.float32, seed=1)], 0.5,
                                         found_inf=1.0)
    assert dfound.item() == 1.0 and cfound.item() == 1.0
    assert_same(d[0], c[0], exact=True)


def test_unscale_noncontiguous_grads(no_fallback):
    base32 = make((6, 8), torch.float32, seed=1, low=-50, high=50)
    base16 = make((5, 9, 4), torch.float16, seed=2, low=-50, high=50)
    base_bf = make((10, 6), torch.bfloat16, seed=3, low=-50, high=50)
    base16[4, 8, 3] = float("inf")  # outside the views below: must not be seen
    dev32, dev16, dev_bf = base32.to(DEVICE), base16.to(DEVICE), base_bf.to(DEVICE)
    views = [lambda t: t.t(), lambda t: t[1:4, ::2, 1], lambda t: t[::3, 1:]]
    cpu_views = [v(t) for v, t in zip(views, [base32, base16, base_bf])]
    dev_views = [v(t) for v, t in zip(views, [dev32, dev16, dev_bf])]
    assert not any(v.is_contiguous() for v in dev_views)
    cpu_found = torch.tensor(0.0)
    torch._amp_foreach_non_finite_check_and_unscale_(cpu_views, cpu_found, torch.tensor(0.125))
    dev_found = torch.tensor(0.0, device=DEVICE)
    torch._amp_foreach_non_finite_check_and_unscale_(dev_views, dev_found,
                                                     torch.tensor(0.125, device=DEVICE))
    # The whole bases: unscaled inside the views, untouched outside.
    for d, c in [(dev32, base32), (dev16, base16), (dev_bf, base_bf)]:
        assert_same(d, c, exact=True)
    assert dev_found.item() == 0.0 and cpu_found.item() == 0.0


def test_unscale_many_dims_and_storage_offset(no_fallback):
    # Nine dims that cannot merge (every other element of each): more than the kernel
    # indexes, so it goes through a dense copy.
    base = make((2,) * 9 + (2,), torch.float16, seed=5, low=-8, high=8)
    view_cpu = base[..., 1]
    dev_base = base.to(DEVICE)
    view_dev = dev_base[..., 1]
    assert view_dev.storage_offset() == 1
    cpu_found = torch.tensor(0.0)
    torch._amp_foreach_non_finite_check_and_unscale_([view_cpu], cpu_found, torch.tensor(0.5))
    dev_found = torch.tensor(0.0, device=DEVICE)
    torch._amp_foreach_non_finite_check_and_unscale_([view_dev], dev_found,
                                                     torch.tensor(0.5, device=DEVICE))
    assert_same(dev_base, base, exact=True)


def test_unscale_empty_inputs(no_fallback):
    found = torch.tensor(0.0, device=DEVICE)
    inv = torch.tensor(0.5, device=DEVICE)
    torch._amp_foreach_non_finite_check_and_unscale_([], found, inv)
    empty = torch.empty(0, 3, device=DEVICE, dtype=torch.float16)
    torch._amp_foreach_non_finite_check_and_unscale_([empty], found, inv)
    assert found.item() == 0.0 and empty.shape == (0, 3)


def test_unscale_scalars_sharing_storage(no_fallback):
    # inv_scale as a view of the gradient's own storage: read from its own copy.
    g = torch.tensor([4.0, 8.0, 0.5], device=DEVICE)
    found = torch.tensor(0.0, device=DEVICE)
    torch._amp_foreach_non_finite_check_and_unscale_([g[:2]], found, g[2])
    c = torch.tensor([4.0, 8.0, 0.5])
    cf = torch.tensor(0.0)
    torch._amp_foreach_non_finite_check_and_unscale_([c[:2]], cf, c[2])
    assert_same(g, c, exact=True)


def _raises_like_cpu(fn, cpu_args, dev_args):
    with pytest.raises(Exception) as cpu_error:
        fn(*cpu_args)
    with pytest.raises(Exception) as dev_error:
        fn(*dev_args)
    assert type(dev_error.value) is type(cpu_error.value), (cpu_error.value, dev_error.value)
    return str(cpu_error.value), str(dev_error.value)


def test_unscale_bad_arguments(no_fallback):
    op = torch._amp_foreach_non_finite_check_and_unscale_
    g = torch.ones(3)
    cases = [
        ([g.int()], torch.tensor(0.0), torch.tensor(1.0)),  # integer gradient
        ([g], torch.tensor(0.0, dtype=torch.float64), torch.tensor(1.0)),
        ([g], torch.tensor(0.0), torch.tensor(1.0).half()),
        ([g], torch.zeros(2), torch.tensor(1.0)),
        ([g], torch.tensor(0.0), torch.ones(2)),
    ]
    for grads, found, inv in cases:
        cpu_msg, dev_msg = _raises_like_cpu(
            op, (grads, found, inv), ([t.to(DEVICE) for t in grads], found.to(DEVICE),
                                      inv.to(DEVICE)))
        if "1-element" in cpu_msg or "float tensor" in cpu_msg:
            assert cpu_msg == dev_msg
    # Mixed devices.
    with pytest.raises(RuntimeError):
        op([torch.ones(3)], torch.tensor(0.0, device=DEVICE), torch.tensor(1.0, device=DEVICE))


def test_unscale_float64_grads_use_the_cpu(monkeypatch):
    # float64 is stored, not computed, on this device: with the fallback allowed the CPU
    # does it (and matches); with it disabled that is an error, as for every float64 op.
    monkeypatch.setenv("TORCH_WEBGPU_FALLBACK_WARN", "0")
    g = make((4,), torch.float64, seed=1)
    g[2] = float("inf")
    d, dfound, c, cfound = _unscale_both([g], 0.5)
    assert_same(d[0], c[0], exact=True)
    assert dfound.item() == 1.0 == cfound.item()
    monkeypatch.setenv("TORCH_WEBGPU_DISABLE_CPU_FALLBACK", "1")
    with pytest.raises(NotImplementedError, match="TORCH_WEBGPU_DISABLE_CPU_FALLBACK"):
        _unscale_both([g], 0.5)


def _update_sequence(device, found_sequence, growth, backoff, interval, init_scale):
    scale = torch.tensor(init_scale, device=device)
    tracker = torch.tensor(0, dtype=torch.int32, device=device)
    history = []
    for found in found_sequence:
        torch._amp_update_scale_(scale, tracker, torch.tensor(found, device=device), growth,
                                 backoff, interval)
        history.append((scale.item(), tracker.item()))
    return history


@pytest.mark.parametrize("growth,backoff,interval", [(2.0, 0.5, 3), (2.0, 0.5, 1),
                                                     (1.5, 0.75, 2), (1.1, 0.9, 2),
                                                     (3.7, 0.3, 1), (2.0, 0.5, 0)])
def test_update_scale_sequence_matches_cpu(growth, backoff, interval, no_fallback):
    g = torch.Generator().manual_seed(7)
    found = [float(v) for v in (torch.rand(40, generator=g) < 0.2)]
    found[5] = float("nan")  # NaN counts as found (any nonzero)
    found[6] = -0.0  # negative zero does not
    for init in [65536.0, 1.0 / 3.0, 3.0e38]:  # the last one overflows when it grows
        dev = _update_sequence(DEVICE, found, growth, backoff, interval, init)
        cpu = _update_sequence("cpu", found, growth, backoff, interval, init)
        assert dev == cpu


def _random_float32(rng):
    """A float32 of any magnitude: subnormal, near the top of the range, or in between."""
    kind = rng.random()
    if kind < 0.1:
        bits = int(rng.integers(1, 0x7FFFFF))
    elif kind < 0.2:
        bits = int(rng.integers(0x7E000000, 0x7F7FFFFF))
    else:
        bits = int(rng.integers(0x00800000, 0x7F7FFFFF))
    value = torch.tensor(bits, dtype=torch.int32).view(torch.float32).item()
    return -value if rng.random() < 0.3 else value


def test_update_scale_rounds_like_the_cpu(no_fallback):
    # The CPU rounds float(scale) * double(factor) to double, then to float: both roundings
    # (ties to even, subnormal results, overflow) must agree bit for bit, for any factor.
    import numpy as np
    rng = np.random.default_rng(3)
    factors = [1.1, 0.9, 1 / 3, 0.1, 1e-40, 1e300, -1.5, 0.0, float("inf"), 2.0**-149,
               1.0000000001] + [float(v) for v in rng.uniform(0, 4, 20)]
    for k in range(240):
        s = _random_float32(rng)
        f = factors[k % len(factors)]
        for found in [0.0, 1.0]:
            dev = torch.tensor(s, device=DEVICE)
            cpu = torch.tensor(s)
            for scale in (dev, cpu):
                torch._amp_update_scale_(scale, torch.zeros((), dtype=torch.int32,
                                                            device=scale.device),
                                         torch.tensor(found, device=scale.device), f, f, 1)
            assert_same(dev, cpu, exact=True)
            assert torch.equal(dev.cpu().view(torch.int32), cpu.view(torch.int32)), (s, f)


def test_update_scale_bad_arguments(no_fallback):
    op = torch._amp_update_scale_
    s, t, f = torch.tensor(4.0), torch.tensor(0, dtype=torch.int32), torch.tensor(0.0)
    for args in [(s.double(), t, f), (s, t.long(), f), (s, t, f.double()),
                 (torch.ones(2), t, f), (s, torch.zeros(2, dtype=torch.int32), f),
                 (s, t, torch.zeros(2))]:
        cpu_msg, dev_msg = _raises_like_cpu(
            lambda *a: op(*[x.clone() for x in a], 2.0, 0.5, 3), args,
            [x.to(DEVICE) for x in args])
        assert cpu_msg == dev_msg


# ---- training under autocast + GradScaler, natively, tracking the CPU ----
#
# Reference: the same model on the CPU under torch.autocast("cpu", float16) with
# torch.amp.GradScaler("cpu") (the CPU's own kernels for the scaler ops). The two autocast
# policies agree on the matmuls and convolutions (float16) and on the losses (float32) but
# not everywhere: CUDA's list, ours, computes layer_norm and log_softmax in float32 where
# the CPU's leaves them in float16. So the runs differ by float16 roundings of some
# intermediates (~1e-3 relative) that accumulate over steps: losses are compared with
# rtol 2e-2 and parameters with atol 2e-2, while the scale sequence (inf/NaN detection,
# growth and backoff) must be identical.

class _Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.norm = nn.LayerNorm(32)
        self.fc2 = nn.Linear(32, 5)

    def forward(self, x):
        return self.fc2(F.gelu(self.norm(self.fc1(x))))


class _ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 8, 3, stride=2)
        self.fc = nn.Linear(8 * 2 * 2, 4)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(x, 2)
        x = F.relu(self.conv2(F.pad(x, (1, 1, 1, 1))))
        return self.fc(x.flatten(1))


def _train(model, device, batches, optimizer_cls, steps, init_scale, backoff, interval,
           clip=None):
    model = model.to(device)
    opt = optimizer_cls(model.parameters())
    scaler = torch.amp.GradScaler(device, init_scale=init_scale, backoff_factor=backoff,
                                  growth_interval=interval)
    losses, scales = [], []
    for step in range(steps):
        x, y = batches[step % len(batches)]
        x, y = x.to(device), y.to(device)
        opt.zero_grad()
        with torch.autocast(device, dtype=torch.float16):
            logits = model(x)
            loss = F.cross_entropy(logits, y)
        assert logits.dtype == torch.float16 and loss.dtype == torch.float32
        scaler.scale(loss).backward()
        if clip is not None:  # the usual pattern: unscale, then clip the true gradients
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        scaler.step(opt)
        scaler.update()
        losses.append(loss.item())
        scales.append(scaler.get_scale())
    return model, losses, scales


@pytest.mark.parametrize("kind", ["mlp", "convnet"])
def test_training_with_autocast_and_grad_scaler_tracks_cpu(kind, no_fallback):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    if kind == "mlp":
        model = _Mlp()
        batches = [(torch.randn(16, 16, generator=g), torch.randint(0, 5, (16,), generator=g))
                   for _ in range(4)]
        optimizer_cls = lambda p: torch.optim.AdamW(p, lr=1e-2)  # noqa: E731  (foreach)
        clip = 1.0
    else:
        model = _ConvNet()
        batches = [(torch.randn(4, 3, 8, 8, generator=g), torch.randint(0, 4, (4,), generator=g))
                   for _ in range(4)]
        optimizer_cls = lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9)  # noqa: E731
        clip = None
    cpu_model = copy.deepcopy(model)
    # A scale so large that the float16 gradients overflow at first: the scaler must skip
    # those steps and back off (by 16x, to land clear of the overflow threshold, which
    # is near 2**17 for these models: a scale at the threshold would make the skip
    # decision hinge on float16 roundings where the two policies differ). No growth
    # within the run; the scale-update test covers growth.
    init_scale, backoff, interval = 2.0**24, 2.0**-4, 100
    args = (batches, optimizer_cls, 20, init_scale, backoff, interval, clip)
    dev_model, dev_losses, dev_scales = _train(model, DEVICE, *args)
    cpu_model, cpu_losses, cpu_scales = _train(cpu_model, "cpu", *args)
    assert dev_scales == cpu_scales
    assert dev_scales[:2] == [2.0**20, 2.0**16]  # two steps overflowed and were skipped
    torch.testing.assert_close(torch.tensor(dev_losses), torch.tensor(cpu_losses), rtol=2e-2,
                               atol=1e-3)
    assert dev_losses[-1] < dev_losses[0]
    for (name, pd), pc in zip(dev_model.named_parameters(), cpu_model.parameters()):
        assert pd.dtype == torch.float32
        torch.testing.assert_close(pd.detach().cpu(), pc.detach(), rtol=0, atol=2e-2,
                                   msg=lambda m: f"{kind} {name}: {m}")
