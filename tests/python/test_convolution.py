"""Convolutions on the webgpu device against the CPU: conv1d/2d/3d and their transposed
forms with stride, padding, dilation, groups and output_padding, forward and every
gradient (input, weight, bias), float32/float16/bfloat16 natively, the other dtypes
through the CPU path, non-contiguous inputs, nn modules and the error cases."""
import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from conftest import DEVICE, assert_same, dev, make

TOL = {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.float16: dict(rtol=1e-2, atol=1e-2),
       torch.bfloat16: dict(rtol=5e-2, atol=5e-2), torch.float64: dict(rtol=1e-10, atol=1e-10)}

# (name, fn, input shape, weight shape, bias?, kwargs)
CASES = [
    ("conv1d", F.conv1d, (2, 3, 11), (5, 3, 3), True, dict(stride=2, padding=1)),
    ("conv1d_dil_groups", F.conv1d, (1, 4, 9), (6, 2, 2), False, dict(dilation=3, groups=2)),
    ("conv2d", F.conv2d, (2, 3, 7, 8), (4, 3, 3, 3), True, {}),
    ("conv2d_mixed", F.conv2d, (2, 4, 9, 8), (6, 4, 3, 2), True,
     dict(stride=(2, 1), padding=(1, 2), dilation=(2, 1))),
    ("conv2d_groups", F.conv2d, (2, 4, 6, 6), (6, 2, 3, 3), True, dict(groups=2, padding=1)),
    ("conv2d_depthwise", F.conv2d, (2, 4, 7, 7), (4, 1, 3, 3), False, dict(groups=4, padding=2, dilation=2)),
    ("conv2d_1x1", F.conv2d, (2, 4, 5, 5), (6, 2, 1, 1), True, dict(groups=2)),
    ("conv2d_1x1_stride", F.conv2d, (1, 3, 6, 5), (2, 3, 1, 1), False, dict(stride=2)),
    ("conv2d_same", F.conv2d, (1, 2, 6, 7), (3, 2, 3, 4), True, dict(padding="same")),
    ("conv2d_unbatched", F.conv2d, (3, 6, 6), (2, 3, 3, 3), True, {}),
    ("conv3d", F.conv3d, (1, 2, 4, 5, 6), (3, 2, 3, 3, 3), True, dict(padding=1)),
    ("conv3d_stride", F.conv3d, (2, 2, 5, 4, 5), (2, 1, 2, 2, 3), False, dict(stride=(2, 1, 2), groups=2)),
    ("conv_t1d", F.conv_transpose1d, (2, 4, 5), (4, 2, 3), False, dict(stride=3)),
    ("conv_t2d", F.conv_transpose2d, (2, 4, 5, 5), (4, 3, 3, 3), True, dict(stride=2, padding=1, output_padding=1)),
    ("conv_t2d_groups", F.conv_transpose2d, (2, 4, 5, 4), (4, 3, 3, 2), True,
     dict(stride=(2, 3), padding=(0, 1), dilation=2, groups=2)),
    ("conv_t2d_1x1", F.conv_transpose2d, (1, 4, 3, 3), (4, 2, 1, 1), True, {}),
    ("conv_t3d", F.conv_transpose3d, (1, 2, 3, 3, 3), (2, 3, 3, 3, 3), True, dict(stride=2, padding=1)),
]


def run_case(fn, ishape, wshape, bias, kwargs, dtype, grad, transform=lambda t: t, tol=None):
    tol = tol or TOL[dtype]
    x = make(ishape, dtype, seed=1, low=-1, high=1)
    w = make(wshape, dtype, seed=2, low=-1, high=1)
    b_channels = wshape[0] if fn not in (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d) \
        else wshape[1] * kwargs.get("groups", 1)
    b = make((b_channels,), dtype, seed=3, low=-1, high=1) if bias else None
    cpu_args = [t.detach().clone().requires_grad_(grad) if t is not None else None for t in (x, w, b)]
    dev_args = [dev(t.detach()).requires_grad_(grad) if t is not None else None for t in (x, w, b)]
    expected = fn(transform(cpu_args[0]), cpu_args[1], cpu_args[2], **kwargs)
    actual = fn(transform(dev_args[0]), dev_args[1], dev_args[2], **kwargs)
    assert_same(actual.detach(), expected.detach(), **tol)
    if grad:
        g = make(tuple(expected.shape), dtype, seed=4, low=-1, high=1)
        expected.backward(g)
        actual.backward(dev(g))
        for c, d in zip(cpu_args, dev_args):
            if c is not None:
                assert d.grad is not None and d.grad.device.type == DEVICE
                assert_same(d.grad, c.grad, **tol)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("name,fn,ishape,wshape,bias,kwargs", CASES, ids=[c[0] for c in CASES])
def test_conv_float32_forward_and_gradients(name, fn, ishape, wshape, bias, kwargs):
    # Bias gradients reduce through the device's channel sum, the rest through GEMMs.
    run_case(fn, ishape, wshape, bias, kwargs, torch.float32, grad=True)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name,fn,ishape,wshape,bias,kwargs", CASES[::3], ids=[c[0] for c in CASES[::3]])
def test_conv_half(name, fn, ishape, wshape, bias, kwargs, dtype):
    run_case(fn, ishape, wshape, bias, kwargs, dtype, grad=True)


@pytest.mark.parametrize("name,fn,ishape,wshape,bias,kwargs", CASES[::4], ids=[c[0] for c in CASES[::4]])
def test_conv_float64_on_cpu_path(name, fn, ishape, wshape, bias, kwargs, no_fallback):
    # float64 is computed on the CPU inside the convolution kernel itself (not the generic
    # fallback, which cannot run a convolution), so it works with the fallback disabled.
    run_case(fn, ishape, wshape, bias, kwargs, torch.float64, grad=True)


@pytest.mark.usefixtures("no_fallback")
def test_conv_non_contiguous_input():
    run_case(F.conv2d, (2, 3, 8, 7), (4, 3, 3, 3), True, dict(padding=1), torch.float32, grad=True,
             transform=lambda t: t.transpose(2, 3))
    run_case(F.conv1d, (2, 3, 12), (4, 3, 3), True, {}, torch.float32, grad=True,
             transform=lambda t: t[:, :, ::2])


@pytest.mark.usefixtures("no_fallback")
def test_conv_weight_views():
    x = make((2, 3, 6, 6), torch.float32, seed=1)
    wbase = make((3, 4, 3, 3), torch.float32, seed=2)
    w = wbase.transpose(0, 1)  # (4, 3, 3, 3), non-contiguous
    assert_same(F.conv2d(dev(x), dev(w), padding=1), F.conv2d(x, w, padding=1), **TOL[torch.float32])


@pytest.mark.usefixtures("no_fallback")
def test_conv_larger_than_a_tile():
    run_case(F.conv2d, (3, 16, 12, 12), (40, 16, 3, 3), True, dict(padding=1), torch.float32, grad=True)


# Batches with at least 64 outputs per image: the weight gradient sums one GEMM per image
# (1x1: straight from x, no columns) unless cy > L with many tiles (then one GEMM over the
# batch); 1x1 forward and input gradient are GEMMs over x / gy themselves.
BATCHED = [
    ("1x1", F.conv2d, (4, 16, 9, 9), (8, 16, 1, 1), True, {}),
    ("1x1_groups", F.conv2d, (3, 8, 10, 10), (6, 4, 1, 1), True, dict(groups=2)),
    ("1x1_conv1d", F.conv1d, (5, 6, 70), (4, 6, 1), False, {}),
    ("1x1_transposed", F.conv_transpose2d, (3, 8, 9, 9), (8, 4, 1, 1), True, {}),
    ("3x3_stride", F.conv2d, (3, 4, 17, 17), (6, 4, 3, 3), True, dict(stride=2, padding=1)),
    ("3x3_groups_dil", F.conv2d, (2, 6, 12, 12), (6, 2, 3, 3), False, dict(groups=3, dilation=2, padding=1)),
    ("conv1d", F.conv1d, (3, 4, 100), (5, 4, 3), True, {}),
    ("conv3d", F.conv3d, (2, 2, 4, 5, 6), (3, 2, 3, 3, 3), True, dict(padding=1)),
    ("conv_t2d", F.conv_transpose2d, (2, 4, 6, 6), (4, 3, 3, 3), True, dict(stride=2, padding=1)),
    ("one_gemm_over_batch", F.conv2d, (2, 128, 8, 8), (128, 128, 3, 3), False, dict(padding=1)),
]


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("name,fn,ishape,wshape,bias,kwargs", BATCHED, ids=[c[0] for c in BATCHED])
def test_conv_batched_gemm_paths(name, fn, ishape, wshape, bias, kwargs):
    # cy > L and many tiles: one GEMM over the batch, 1152 products per output summed in
    # another order than the CPU's.
    tol = dict(rtol=1e-4, atol=1e-3) if name == "one_gemm_over_batch" else None
    run_case(fn, ishape, wshape, bias, kwargs, torch.float32, grad=True, tol=tol)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name,fn,ishape,wshape,bias,kwargs", BATCHED[:5:2], ids=[c[0] for c in BATCHED[:5:2]])
def test_conv_batched_gemm_paths_half(name, fn, ishape, wshape, bias, kwargs, dtype):
    run_case(fn, ishape, wshape, bias, kwargs, dtype, grad=True)


IMPLICIT = [c for c in CASES if c[0] in ("conv1d", "conv2d_mixed", "conv2d_groups", "conv2d_depthwise",
                                        "conv3d_stride", "conv_t2d", "conv_t3d")] + BATCHED[4:] + [
    # Unit strides: the input gradient (a transposed convolution's forward) is a convolution
    # with the flipped weight; not when output_padding breaks the size relation.
    ("conv_t2d_s1", F.conv_transpose2d, (2, 4, 5, 6), (4, 6, 3, 3), True, dict(padding=1, groups=2)),
    ("conv_t2d_s1_outpad", F.conv_transpose2d, (2, 4, 5, 5), (4, 3, 3, 3), True,
     dict(padding=1, dilation=2, output_padding=1)),
    ("conv3d_pad_past_span", F.conv3d, (1, 2, 5, 6, 7), (3, 2, 2, 3, 1), False, dict(padding=(1, 2, 1))),
]


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("variant", ["tiled", "tiled_medium", "tiled_large", "tiled_large_scalar"])
@pytest.mark.parametrize("name,fn,ishape,wshape,bias,kwargs", IMPLICIT, ids=[c[0] for c in IMPLICIT])
def test_conv_implicit_gemm(name, fn, ishape, wshape, bias, kwargs, variant, monkeypatch):
    # GEMMs of shared-memory tiles (GPUs; forced here) gather their B tiles from x: the
    # forward's (taps along K; a transposed convolution's input gradient is that forward)
    # and the per-image weight gradient's (output positions along K); float32 tiles hold
    # vec4 words but for "_scalar" variants.
    monkeypatch.setenv("TORCH_WEBGPU_GEMM_VARIANT", variant)
    monkeypatch.setenv("TORCH_WEBGPU_CONV_IMPLICIT", "1")  # also products under 16 rows
    tol = dict(rtol=1e-4, atol=1e-3) if name == "one_gemm_over_batch" else None
    run_case(fn, ishape, wshape, bias, kwargs, torch.float32, grad=True, tol=tol)
    if name in ("conv2d_groups", "3x3_stride"):
        for dtype in (torch.float16, torch.bfloat16):
            run_case(fn, ishape, wshape, bias, kwargs, dtype, grad=True)
    if name == "3x3_stride":
        run_case(fn, ishape, wshape, bias, kwargs, torch.float32, grad=True,
                 transform=lambda t: t.contiguous(memory_format=torch.channels_last))


@pytest.mark.usefixtures("no_fallback")
def test_conv_implicit_gemm_by_default_with_tiles(monkeypatch):
    # With tiles (as on GPUs) products of 16+ rows and columns gather without being forced:
    # forward, per-image weight gradient and the unit-stride input gradient (no col2im).
    monkeypatch.setenv("TORCH_WEBGPU_GEMM_VARIANT", "tiled")
    monkeypatch.delenv("TORCH_WEBGPU_CONV_IMPLICIT", raising=False)
    with torch.webgpu.profiler.profile() as prof:
        run_case(F.conv2d, (3, 16, 12, 12), (24, 16, 3, 3), True, dict(padding=1), torch.float32, grad=True)
    kernels = {r.kernel for r in prof.key_averages()}
    assert "conv:gather_taps" in kernels, kernels
    assert not any(k.startswith(("conv:im2col", "conv:col2im")) for k in kernels), kernels
    assert {"gemm:tiled:gather_taps", "gemm:tiled:gather_positions"} <= kernels, kernels


@pytest.mark.usefixtures("no_fallback")
def test_conv_1x1_non_contiguous_input():
    run_case(F.conv2d, (4, 16, 9, 9), (8, 16, 1, 1), True, {}, torch.float32, grad=True,
             transform=lambda t: t.contiguous(memory_format=torch.channels_last))
    run_case(F.conv2d, (3, 16, 9, 18), (8, 8, 1, 1), False, {}, torch.float32, grad=True,
             transform=lambda t: t[:, ::2, :, 1::2])


@pytest.mark.usefixtures("quiet_fallback")
def test_nn_modules_train_step():
    # The Linear layer's bias gradient needs a sum (another family): fallback allowed.
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, stride=2, groups=2),
                          nn.ConvTranspose2d(8, 4, 3, stride=2, output_padding=1), nn.Flatten(),
                          nn.LazyLinear(5))
    x = make((2, 3, 9, 9), torch.float32, seed=1)
    model(x)  # materialise the lazy layer
    dmodel = copy.deepcopy(model).to(DEVICE)
    out, dout = model(x), dmodel(dev(x))
    assert_same(dout.detach(), out.detach(), **TOL[torch.float32])
    loss, dloss = out.sum(), dout.sum()
    loss.backward()
    dloss.backward()
    for p, dp in zip(model.parameters(), dmodel.parameters()):
        assert_same(dp.grad, p.grad, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_conv_integer_dtypes_like_cpu(dtype):
    x, w = make((1, 2, 5, 5), dtype), make((3, 2, 3, 3), dtype, seed=1)
    try:
        expected = F.conv2d(x, w)
    except Exception as e:  # noqa: BLE001 - the device must refuse the same way
        with pytest.raises(type(e)):
            F.conv2d(dev(x), dev(w))
        return
    assert_same(F.conv2d(dev(x), dev(w)), expected)


def test_conv_errors():
    x, w = torch.randn(1, 3, 5, 5), torch.randn(4, 2, 3, 3)
    for fn, args, kw in [
        (F.conv2d, (x, w), {}),                                       # channel mismatch
        (F.conv2d, (x, torch.randn(4, 3, 7, 7)), {}),                 # kernel bigger than input
        (F.conv2d, (x, torch.randn(4, 3, 3, 3)), dict(stride=0)),     # bad stride
        (F.conv2d, (x, torch.randn(4, 3, 3, 3).half()), {}),          # dtype mismatch
        (F.conv2d, (x, torch.randn(4, 3, 3, 3)), dict(groups=2)),     # groups
        (F.conv_transpose2d, (x, torch.randn(4, 3, 3, 3)), {}),       # transposed channels
    ]:
        with pytest.raises(Exception) as cpu_info:
            fn(*args, **kw)
        with pytest.raises(Exception) as dev_info:
            fn(*[dev(a) for a in args], **kw)
        assert type(dev_info.value) is type(cpu_info.value)


def test_conv_empty_batch_and_channels():
    for x, w in [(torch.randn(0, 3, 5, 5), torch.randn(4, 3, 3, 3)),
                 (torch.randn(2, 3, 5, 5), torch.randn(0, 3, 3, 3))]:
        try:
            expected = F.conv2d(x, w)
        except Exception as e:  # noqa: BLE001
            with pytest.raises(type(e)):
                F.conv2d(dev(x), dev(w))
            continue
        assert_same(F.conv2d(dev(x), dev(w)), expected)


@pytest.mark.usefixtures("no_fallback")
def test_conv_implicit_gemm_split_k_on_gpus(monkeypatch):
    # GPU heuristics: a convolution with few output tiles and a long K (channels x taps)
    # splits K in its implicit GEMMs (forward and weight gradient) as a plain GEMM does.
    monkeypatch.setenv("TORCH_WEBGPU_ADAPTER_KIND", "gpu")
    monkeypatch.delenv("TORCH_WEBGPU_GEMM_VARIANT", raising=False)
    monkeypatch.delenv("TORCH_WEBGPU_CONV_IMPLICIT", raising=False)
    with torch.webgpu.profiler.profile() as prof:
        run_case(F.conv2d, (2, 32, 7, 7), (24, 32, 3, 3), True, dict(padding=1), torch.float32, grad=True)
    kernels = {r.kernel for r in prof.key_averages()}
    assert {"gemm:tiled:gather_taps", "gemm:splitk_sum"} <= kernels, kernels
