"""Fused scaled_dot_product_attention against the CPU's math SDPA: decode and prefill
shapes, causal (top-left), bool and float masks with broadcasting, grouped-query heads,
strided and offset views, head dims, half types, fully masked rows, empty shapes, the
math path for gradients and sdpa_kernel(MATH), both adapter-class variants and the spec's
default limits."""
import re

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils._python_dispatch import TorchDispatchMode

from conftest import DEVICE, assert_same, dev, make, run_python

FUSED = "aten._scaled_dot_product_fused_attention_overrideable.default"
TOL = {torch.float32: dict(rtol=1e-5, atol=2e-6), torch.float16: dict(rtol=2e-3, atol=2e-3),
       torch.bfloat16: dict(rtol=2e-2, atol=2e-2)}


def ran_math(names):
    """The math path decomposes below the dispatcher: its softmax shows."""
    return FUSED not in names and any("softmax" in n for n in names)


class OpNames(TorchDispatchMode):
    """Records the ATen ops that reach the backend."""

    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(str(func))
        return func(*args, **(kwargs or {}))


@pytest.fixture(params=["software", "gpu", "lanes", "tiles", "blocks"])
def adapter_kind(request, monkeypatch):
    """Both adapter-class variants (software: a query row per invocation for prefill; gpu:
    register blocks over staged query rows and key/value chunks for prefill, rows of keys
    per workgroup for decode, long key ranges split over workgroups), the lanes kernel
    forced for every shape it takes (head dims multiples of 4), and the tiles and blocks
    kernels forced for every shape (decode included; blocks falls back to tiles for head
    dims past 128)."""
    forced = request.param in ("lanes", "tiles", "blocks")
    monkeypatch.setenv("TORCH_WEBGPU_ADAPTER_KIND", "gpu" if forced else request.param)
    if forced:
        monkeypatch.setenv("TORCH_WEBGPU_ATTENTION_VARIANT", request.param)
    yield request.param


def reference(q, k, v, **kw):
    """The CPU's math SDPA (half types: in float32, rounded once, as the kernel computes)."""
    dtype = q.dtype
    if dtype != torch.float32:
        q, k, v = q.float(), k.float(), v.float()
        if kw.get("attn_mask") is not None and kw["attn_mask"].dtype != torch.bool:
            kw = dict(kw, attn_mask=kw["attn_mask"].float())
    with sdpa_kernel(SDPBackend.MATH):
        return F.scaled_dot_product_attention(q, k, v, **kw).to(dtype)


def check_sdpa(q, k, v, fused=True, device_args=None, **kw):
    """Device SDPA (on `device_args` when given: views made on the device) against the
    CPU math path; asserts whether the fused kernel ran (`fused=None`: either may, as for no
    keys, where torch 2.11 calls the fused op and 2.13 makes the zeros itself)."""
    expected = reference(q, k, v, **kw)
    if device_args is None:
        device_args = (dev(q), dev(k), dev(v))
    dkw = {name: dev(x) for name, x in kw.items()}
    with OpNames() as ops:
        actual = F.scaled_dot_product_attention(*device_args, **dkw)
    if fused is not None:
        assert (FUSED in ops.names) == fused, ops.names
    assert_same(actual, expected, **TOL[q.dtype])
    return actual


def check_in_fresh_process(body, env):
    """Runs `body` (after the imports) in a fresh interpreter with `env`, natively."""
    code = ("import torch, torch_webgpu, torch.nn.functional as F\n"
            "from torch.nn.attention import SDPBackend, sdpa_kernel\n"
            "g = torch.Generator().manual_seed(0)\n" + body + "print('ok')\n")
    r = run_python(code, timeout=300, env=dict(env, TORCH_WEBGPU_DISABLE_CPU_FALLBACK="1"))
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-3000:]


def qkv(b, h, hk, lq, lk, d, dv=None, dtype=torch.float32, seed=0):
    dv = d if dv is None else dv
    return (make((b, h, lq, d), dtype, seed, -2, 2), make((b, hk, lk, d), dtype, seed + 1, -2, 2),
            make((b, hk, lk, dv), dtype, seed + 2, -2, 2))


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("lk", [1, 17, 300, 2048])
def test_decode(adapter_kind, lk):
    q, k, v = qkv(2, 4, 4, 1, lk, 64)
    check_sdpa(q, k, v)


@pytest.fixture(params=["software", "gpu", "software-scalar", "gpu-scalar"])
def rows_pv(request, monkeypatch):
    """The rows variant (decode) of both adapter classes, with its p v loop in units of 4
    value columns (the default) or one column (TORCH_WEBGPU_ATTENTION_PV=scalar)."""
    kind, _, pv = request.param.partition("-")
    monkeypatch.setenv("TORCH_WEBGPU_ADAPTER_KIND", kind)
    if pv:
        monkeypatch.setenv("TORCH_WEBGPU_ATTENTION_PV", pv)
    yield request.param


@pytest.mark.usefixtures("no_fallback", "rows_pv")
@pytest.mark.parametrize("lk", [0, 1, 127, 128, 129, 300, 600])
@pytest.mark.parametrize("dv", [64, 7, 30, 200, 256])
def test_decode_value_columns(lk, dv):
    """Qwen2.5's GQA (14 query heads over 2) at one query row: value widths that are not a
    multiple of 4, that spread over every invocation of a chunk, key counts around a
    chunk's (GPUs: 600 splits the keys over 3 workgroups, merged by a second pass)."""
    q, k, v = qkv(1, 14, 2, 1, lk, 64, dv)
    check_sdpa(q, k, v, fused=True if lk > 0 else None, enable_gqa=True)
    if lk == 0:  # the op itself on no keys: zeros, lse -inf
        out, lse = torch.ops.aten._scaled_dot_product_fused_attention_overrideable(
            dev(q), dev(k).repeat_interleave(7, 1), dev(v).repeat_interleave(7, 1))[:2]
        assert_same(out, torch.zeros(1, 14, 1, dv), exact=True)
        assert_same(lse, torch.full((1, 14, 1), float("-inf")), exact=True)


# V as views of a larger tensor: (the tensor the view is cut from, the view).
V_VIEWS = {
    "transposed": (lambda v: v.transpose(-1, -2).contiguous(), lambda t: t.transpose(-1, -2)),
    "offset_aligned": (lambda v: F.pad(v, (8, 0, 3, 0)), lambda t: t[:, :, 3:, 8:]),
    "offset_unaligned": (lambda v: F.pad(v, (1, 7, 3, 0)), lambda t: t[:, :, 3:, 1:-7]),
    "row_stride_unaligned": (lambda v: F.pad(v, (0, 2)), lambda t: t[..., :-2]),
}


@pytest.mark.usefixtures("no_fallback", "rows_pv")
@pytest.mark.parametrize("view", list(V_VIEWS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("lk", [5, 129, 600])
def test_decode_value_views(view, dtype, lk):
    """V rows read 16 bytes at a time only when contiguous and aligned (an aligned offset:
    float32 and half types alike); element by element otherwise."""
    q, k, v = qkv(1, 14, 2, 1, lk, 64, dtype=dtype)
    base, cut = V_VIEWS[view]
    dv_ = cut(dev(base(v)))
    assert torch.equal(dv_.cpu(), v)
    check_sdpa(q, k, v, device_args=(dev(q), dev(k), dv_), enable_gqa=True)
    mask = make((1, lk), dtype, 7, -1, 0)
    check_sdpa(q, k, v, device_args=(dev(q), dev(k), dv_), attn_mask=mask, enable_gqa=True)


@pytest.mark.usefixtures("no_fallback", "rows_pv")
@pytest.mark.parametrize("lk", [50, 129])
def test_decode_infinite_value_in_the_last_key(lk):
    """An infinite value makes its column infinite, not NaN: the p v steps that run past a
    chunk's last key re-read its row and must drop it, not multiply it by 0."""
    q, k, v = qkv(1, 14, 2, 1, lk, 64)
    v[:, :, lk - 1, 3] = float("inf")
    out = check_sdpa(q, k, v, enable_gqa=True)
    assert out[..., 3].cpu().isinf().all() and not out.cpu().isnan().any()


@pytest.mark.usefixtures("no_fallback", "rows_pv")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("dv", [64, 20, 12])
def test_decode_value_columns_half_types(dtype, dv):
    """Half-type values: 8 columns a 16-byte word, an invocation's 4 in one of its halves;
    widths not a multiple of 8 element by element."""
    q, k, v = qkv(2, 4, 2, 1, 129, 64, dv, dtype=dtype)
    check_sdpa(q, k, v, enable_gqa=True)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("dv", [256, 130])
def test_rows_prefill_value_columns_beyond_a_chunk(monkeypatch, dv):
    """The rows variant forced for prefill (4 query rows a workgroup, 32 keys a chunk, a
    value column per invocation): wide value rows give each invocation several columns."""
    monkeypatch.setenv("TORCH_WEBGPU_ADAPTER_KIND", "gpu")
    monkeypatch.setenv("TORCH_WEBGPU_ATTENTION_VARIANT", "rows")
    q, k, v = qkv(1, 4, 2, 20, 70, 64, dv)
    check_sdpa(q, k, v, is_causal=True, enable_gqa=True)


def test_decode_pv_switch_in_a_fresh_process(tmp_path):
    """GPU decode's rows kernel sums p v in vec4 units and q . k four K words a step;
    TORCH_WEBGPU_ATTENTION_PV=scalar builds the column-per-invocation, word-a-step kernel."""
    body = ("q = torch.randn(1, 14, 1, 64, generator=g)\n"
            "k, v = (torch.randn(1, 2, 50, 64, generator=g) for _ in range(2))\n"
            "with sdpa_kernel(SDPBackend.MATH):\n"
            "    ref = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)\n"
            "out = F.scaled_dot_product_attention(q.to('webgpu'), k.to('webgpu'), v.to('webgpu'), enable_gqa=True)\n"
            "torch.testing.assert_close(out.cpu(), ref, rtol=1e-5, atol=2e-6)\n")
    for pv, fin in (("vec4", "vec4<f32>"), ("scalar", "f32")):
        dump = tmp_path / pv
        dump.mkdir()
        check_in_fresh_process(body, {"TORCH_WEBGPU_ADAPTER_KIND": "gpu", "TORCH_WEBGPU_ATTENTION_PV": pv,
                                      "TORCH_WEBGPU_DUMP_SHADERS": str(dump)})
        rows = [f.read_text() for f in dump.glob("attention_rows_*.wgsl")]
        assert len(rows) == 1 and f"var<workgroup> fin: array<{fin}, 128u>;" in rows[0]
        assert ("kword(kw(wi + 3u)" in rows[0]) == (pv == "vec4")


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("lq", [2, 8])
def test_decode_few_rows_over_long_cache(adapter_kind, lq):
    q, k, v = qkv(1, 2, 2, lq, 1000, 32)
    check_sdpa(q, k, v)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("length", [77, 256])
@pytest.mark.parametrize("causal", [False, True])
def test_prefill(adapter_kind, length, causal):
    q, k, v = qkv(1, 2, 2, length, length, 64)
    check_sdpa(q, k, v, is_causal=causal)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("lq,lk", [(5, 9), (9, 5), (1, 6), (40, 3), (70, 45), (33, 100)])
def test_causal_top_left_with_unequal_lengths(adapter_kind, lq, lk):
    q, k, v = qkv(2, 3, 3, lq, lk, 16)
    check_sdpa(q, k, v, is_causal=True)


MASK_SHAPES = {"key_padding": lambda lq, lk: (2, 1, 1, lk), "square": lambda lq, lk: (lq, lk),
               "full": lambda lq, lk: (2, 3, lq, lk)}


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("shape", list(MASK_SHAPES))
@pytest.mark.parametrize("kind", ["bool", "float"])
@pytest.mark.parametrize("lq,lk", [(7, 19), (40, 70)])
def test_masks(adapter_kind, shape, kind, lq, lk):
    q, k, v = qkv(2, 3, 3, lq, lk, 32)
    if kind == "bool":
        mask = make(MASK_SHAPES[shape](lq, lk), torch.bool, seed=5)
        mask[..., 0] = True  # no fully masked row here (see the test below)
    else:
        mask = make(MASK_SHAPES[shape](lq, lk), torch.float32, seed=5, low=-3, high=1)
    check_sdpa(q, k, v, attn_mask=mask)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("kind", ["bool", "float"])
def test_fully_masked_rows_give_zeros(adapter_kind, kind):
    q, k, v = qkv(1, 2, 2, 4, 10, 8)
    keep = torch.ones(4, 10, dtype=torch.bool)
    keep[1] = False
    keep[3, 5:] = False
    mask = keep if kind == "bool" else torch.zeros(4, 10).masked_fill(~keep, float("-inf"))
    out = check_sdpa(q, k, v, attn_mask=mask)
    assert (out[:, :, 1].cpu() == 0).all()


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("lq,lk,causal", [(1, 300, False), (33, 33, True)])
@pytest.mark.parametrize("masked", [False, True])
def test_grouped_query_heads(adapter_kind, lq, lk, causal, masked):
    q, k, v = qkv(1, 14, 2, lq, lk, 64)
    kw = dict(enable_gqa=True, is_causal=causal and not masked)
    if masked:
        kw["attn_mask"] = torch.rand(lq, lk, generator=torch.Generator().manual_seed(3)) > 0.3
        kw["attn_mask"][:, 0] = True
    check_sdpa(q, k, v, **kw)


@pytest.mark.usefixtures("no_fallback")
def test_grouped_heads_without_enable_gqa_raise_like_cpu():
    q, k, v = qkv(1, 4, 2, 3, 5, 8)
    with pytest.raises(RuntimeError):
        F.scaled_dot_product_attention(q, k, v)
    with pytest.raises(RuntimeError):
        F.scaled_dot_product_attention(dev(q), dev(k), dev(v))


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("lq", [5, 37])
def test_transposed_and_offset_views(adapter_kind, lq):
    """HF's layout: (B, L, H, D) projections viewed as (B, H, L, D); K/V a prefix of a
    longer cache (storage offsets and row strides); the output keeps q's dim order."""
    b, h, hk, lk, d = 2, 6, 2, 23, 16
    q_bl = make((b, lq, h, d), torch.float32, 1, -2, 2)
    cache_k = make((b, hk, 40, d), torch.float32, 2, -2, 2)
    cache_v = make((b, hk, 40, d + 8), torch.float32, 3, -2, 2)
    q = q_bl.transpose(1, 2)
    k = cache_k[:, :, 3:3 + lk]
    v = cache_v[:, :, 3:3 + lk, 4:4 + d]
    dq = dev(q_bl).transpose(1, 2)
    dk = dev(cache_k)[:, :, 3:3 + lk]
    dv_ = dev(cache_v)[:, :, 3:3 + lk, 4:4 + d]
    out = check_sdpa(q, k, v, device_args=(dq, dk, dv_), enable_gqa=True)
    # The strides torch's meta function gives (Inductor asserts them): in the torch of
    # this suite, q's dim order, so HF's out.transpose(1, 2).reshape(...) is free.
    meta = torch.ops.aten._scaled_dot_product_fused_attention_overrideable(
        *(t.to("meta") for t in (dq, dk.repeat_interleave(3, 1), dv_.repeat_interleave(3, 1))))[0]
    assert out.stride() == meta.stride()
    if meta.transpose(1, 2).is_contiguous():
        assert out.transpose(1, 2).is_contiguous()


@pytest.mark.usefixtures("no_fallback")
def test_strided_head_dim_and_mask_view(adapter_kind):
    q, k, v = qkv(1, 2, 2, 6, 11, 24)
    mask = make((3, 6, 22), torch.float32, 4)[1, :, ::2]
    dq, dk, dv_ = dev(q)[..., ::2], dev(k)[..., ::2], dev(v).transpose(-1, -2).contiguous().transpose(-1, -2)
    dmask = dev(make((3, 6, 22), torch.float32, 4))[1, :, ::2]
    expected = reference(q[..., ::2], k[..., ::2], v, attn_mask=mask)
    with OpNames() as ops:
        actual = F.scaled_dot_product_attention(dq, dk, dv_, attn_mask=dmask)
    assert FUSED in ops.names
    assert_same(actual, expected, **TOL[torch.float32])


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("d", [1, 8, 64, 80, 128, 256])
@pytest.mark.parametrize("lq", [1, 20])
def test_head_dims(adapter_kind, d, lq):
    q, k, v = qkv(1, 2, 2, lq, 37, d)
    check_sdpa(q, k, v, is_causal=lq > 1)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("d,dv", [(64, 32), (16, 100), (40, 8)])
def test_value_dim_differs(adapter_kind, d, dv):
    q, k, v = qkv(2, 2, 2, 9, 30, d, dv)
    check_sdpa(q, k, v, scale=0.3)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("lq,lk,d", [(1, 300, 64), (24, 24, 64), (37, 50, 20)])
def test_half_types(adapter_kind, dtype, lq, lk, d):
    """Head dims a multiple of 8 read K/V rows 16 bytes at a time; 20 element by element."""
    q, k, v = qkv(1, 4, 2, lq, lk, d, dtype=dtype)
    mask = make((lq, lk), dtype, 7, -1, 0)
    check_sdpa(q, k, v, attn_mask=mask, enable_gqa=True)
    check_sdpa(q, k, v, is_causal=True, enable_gqa=True)


@pytest.mark.usefixtures("no_fallback")
def test_three_dim_inputs(adapter_kind):
    q, k, v = (t[0] for t in qkv(1, 3, 3, 4, 9, 16, 12))
    check_sdpa(q, k, v, is_causal=True)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("shape", [(0, 2, 2, 4, 5, 8, 8), (1, 2, 2, 0, 5, 8, 8), (1, 2, 2, 4, 0, 8, 8),
                                   (1, 0, 0, 4, 5, 8, 8), (1, 2, 2, 3, 4, 0, 8), (1, 2, 2, 3, 4, 8, 0)])
def test_empty_shapes(adapter_kind, shape):
    b, h, hk, lq, lk, d, dv = shape
    q, k, v = qkv(b, h, hk, lq, lk, d, dv)
    expected = reference(q, k, v)
    actual = F.scaled_dot_product_attention(dev(q), dev(k), dev(v))
    assert_same(actual, expected)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("kind", ["bool", "float"])
@pytest.mark.parametrize("lq", [3, 20])
def test_the_fused_op_called_directly(adapter_kind, kind, lq):
    """The composite hands the kernel float masks; a direct call may pass a bool one. Both
    give the math path's output and the logsumexp of the scores (-inf for a masked row)."""
    q, k, v = qkv(2, 2, 2, lq, 300, 16)
    keep = torch.rand(lq, 300, generator=torch.Generator().manual_seed(4)) > 0.2
    keep[2] = False
    mask = keep if kind == "bool" else torch.zeros(lq, 300).masked_fill(~keep, float("-inf"))
    result = torch.ops.aten._scaled_dot_product_fused_attention_overrideable(
        dev(q), dev(k), dev(v), dev(mask).expand(2, 2, lq, 300))
    out, lse = result[:2]
    # The rest as the schema allows without dropout: no sequence offsets, the lengths,
    # zero Philox state, no debug mask.
    assert result[2] is None and result[3] is None and result[8] is None
    assert (result[4], result[5]) == (lq, 300)
    assert result[6].item() == 0 and result[7].item() == 0
    additive = torch.zeros(lq, 300).masked_fill(~keep, float("-inf"))
    scores = (q @ k.transpose(-1, -2)) / 4.0 + additive
    assert_same(lse, torch.logsumexp(scores, -1), rtol=1e-5, atol=1e-5)
    assert_same(out, reference(q, k, v, attn_mask=mask), **TOL[torch.float32])


def test_requires_grad_takes_the_math_path_and_gradients_match():
    q, k, v = qkv(1, 2, 2, 5, 7, 8)
    leaves_cpu = [t.clone().requires_grad_() for t in (q, k, v)]
    leaves_dev = [dev(t).requires_grad_() for t in (q, k, v)]
    w = make((1, 2, 5, 8), torch.float32, 9)
    with sdpa_kernel(SDPBackend.MATH):
        (F.scaled_dot_product_attention(*leaves_cpu, is_causal=True) * w).sum().backward()
    with OpNames() as ops:
        out = F.scaled_dot_product_attention(*leaves_dev, is_causal=True)
    assert ran_math(ops.names), ops.names
    (out * dev(w)).sum().backward()
    for a, e in zip(leaves_dev, leaves_cpu):
        assert_same(a.grad, e.grad, rtol=1e-4, atol=1e-5)
    with torch.no_grad():  # no gradient recorded: fused again
        check_sdpa(*(t.detach() for t in leaves_cpu), device_args=leaves_dev, is_causal=True)


def test_sdpa_kernel_math_forces_math():
    q, k, v = qkv(1, 2, 2, 3, 4, 8)
    with sdpa_kernel(SDPBackend.MATH), OpNames() as ops:
        out = F.scaled_dot_product_attention(dev(q), dev(k), dev(v))
    assert ran_math(ops.names), ops.names
    assert_same(out, reference(q, k, v), **TOL[torch.float32])


def test_dropout_takes_the_math_path():
    q, k, v = qkv(1, 2, 2, 3, 4, 8)
    with OpNames() as ops:
        F.scaled_dot_product_attention(dev(q), dev(k), dev(v), dropout_p=0.5)
    assert ran_math(ops.names), ops.names


def test_spec_default_limits_in_a_fresh_process():
    check_in_fresh_process(
        "import os\n"
        "for kind in ('software', 'gpu', 'tiles', 'blocks'):\n"
        "    os.environ['TORCH_WEBGPU_ADAPTER_KIND'] = 'gpu' if kind in ('tiles', 'blocks') else kind\n"
        "    if kind in ('tiles', 'blocks'): os.environ['TORCH_WEBGPU_ATTENTION_VARIANT'] = kind\n"
        "    for lq, lk, d in ((1, 700, 256), (40, 40, 256), (17, 64, 128), (45, 300, 64)):\n"
        "        q, k, v = (torch.randn(1, 4, n, d, generator=g) for n in (lq, lk, lk))\n"
        "        with sdpa_kernel(SDPBackend.MATH):\n"
        "            ref = F.scaled_dot_product_attention(q, k, v, is_causal=lq > 1)\n"
        "        out = F.scaled_dot_product_attention(q.to('webgpu'), k.to('webgpu'), v.to('webgpu'),\n"
        "                                             is_causal=lq > 1)\n"
        "        torch.testing.assert_close(out.cpu(), ref, rtol=1e-5, atol=2e-6)\n",
        {"TORCH_WEBGPU_LIMITS": "default"})


def test_gpu_prefill_kernels_within_the_default_limits(tmp_path):
    """GPU adapters run prefill (16+ query rows) on the blocks kernel where its tiles fit
    the workgroup storage, else on the tiles kernel, and decode on the rows kernel; under
    the spec's default limits (16 KiB) blocks take only tiny head dims and the tiles'
    chunk of staged keys shrinks as the head dim grows: every workgroup array fits."""
    check_in_fresh_process(
        "for lq, d in ((40, 64), (40, 256), (20, 1), (1, 64)):\n"
        "    q, k, v = (torch.randn(1, 2, n, d, generator=g) for n in (lq, 50, 50))\n"
        "    with sdpa_kernel(SDPBackend.MATH):\n"
        "        ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)\n"
        "    out = F.scaled_dot_product_attention(q.to('webgpu'), k.to('webgpu'), v.to('webgpu'), is_causal=True)\n"
        "    torch.testing.assert_close(out.cpu(), ref, rtol=1e-5, atol=2e-6)\n",
        {"TORCH_WEBGPU_LIMITS": "default", "TORCH_WEBGPU_ADAPTER_KIND": "gpu",
         "TORCH_WEBGPU_DUMP_SHADERS": str(tmp_path)})
    tiles = [f.read_text() for f in tmp_path.glob("attention_tiles_*.wgsl")]
    blocks = [f.read_text() for f in tmp_path.glob("attention_blocks_*.wgsl")]
    assert len(tiles) == 2 and len(blocks) == 1 and list(tmp_path.glob("attention_rows_*.wgsl"))
    for wgsl in tiles + blocks:
        arrays = re.findall(r"var<workgroup> \w+: array<(vec4<f32>|f32), (\d+)u>;", wgsl)
        assert len(arrays) == wgsl.count("var<workgroup>") == (3 if wgsl in tiles else 5)
        assert sum((16 if t == "vec4<f32>" else 4) * int(n) for t, n in arrays) <= 16384


@pytest.mark.usefixtures("no_fallback")
def test_torch_compile_calls_the_fused_kernel():
    """Inductor keeps the fused op as an extern call (its meta layout must match ours)."""
    def block(x, k, v):
        q = x.view(1, 9, 4, 16).transpose(1, 2)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return a.transpose(1, 2).reshape(1, 9, 64) * 2 + 1

    x, k, v = make((1, 9, 64), torch.float32, 1), make((1, 2, 9, 16), torch.float32, 2), \
        make((1, 2, 9, 16), torch.float32, 3)
    with sdpa_kernel(SDPBackend.MATH):
        expected = block(x, k, v)
    compiled = torch.compile(block)
    actual = compiled(dev(x), dev(k), dev(v))
    assert_same(actual, expected, **TOL[torch.float32])
    with OpNames() as ops:
        compiled(dev(x), dev(k), dev(v))
    assert FUSED in ops.names, ops.names


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("case", ["head_dims", "key_lengths", "mask_shape"])
def test_bad_inputs_raise_like_cpu(case):
    q, k, v = qkv(1, 2, 2, 3, 5, 8)
    kw = {}
    if case == "head_dims":
        k = k[..., :6]
    elif case == "key_lengths":
        v = v[:, :, :4]
    else:
        kw["attn_mask"] = torch.zeros(3, 4)
    with pytest.raises(RuntimeError) as cpu_error, sdpa_kernel(SDPBackend.MATH):
        F.scaled_dot_product_attention(q, k, v, **kw)
    with pytest.raises(type(cpu_error.value)):
        F.scaled_dot_product_attention(dev(q), dev(k), dev(v), **{n: dev(x) for n, x in kw.items()})


def test_operands_beyond_one_binding_in_a_fresh_process():
    """K/V inside a cache larger than a binding are bound through windows; a q larger than
    a binding takes the math path."""
    check_in_fresh_process(
        "from torch.profiler import profile\n"
        "cache = torch.randn(1, 1, 4096, 32, generator=g)\n"
        "dcache = cache.to('webgpu')\n"
        "for lq, fused in ((1, True), (40, True), (1200, False)):\n"
        "    q = torch.randn(1, 2, lq, 32, generator=g)\n"
        "    k, v = cache[:, :, 3000:3100], cache[:, :, 3100:3200]\n"
        "    with sdpa_kernel(SDPBackend.MATH):\n"
        "        ref = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)\n"
        "    with profile() as prof:\n"
        "        out = F.scaled_dot_product_attention(q.to('webgpu'), dcache[:, :, 3000:3100],\n"
        "                                             dcache[:, :, 3100:3200], enable_gqa=True)\n"
        "    names = {e.name for e in prof.events()}\n"
        "    assert ('aten::_scaled_dot_product_fused_attention_overrideable' in names) == fused, names\n"
        "    torch.testing.assert_close(out.cpu(), ref, rtol=1e-5, atol=2e-6)\n"
        # The op itself past the limits (as a graph compiled for dynamic shapes calls it).
        "    mask = torch.randn(lq, 100, generator=g).masked_fill(torch.rand(lq, 100, generator=g) < 0.2, -float('inf'))\n"
        "    mask[0] = -float('inf')\n"
        "    out, lse = torch.ops.aten._scaled_dot_product_fused_attention_overrideable(\n"
        "        q.to('webgpu'), dcache[:, :, 3000:3100], dcache[:, :, 3100:3200], mask.to('webgpu').expand(1, 2, lq, 100))[:2]\n"
        "    with sdpa_kernel(SDPBackend.MATH):\n"
        "        ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)\n"
        "    scores = (q @ k.transpose(-1, -2)) / 32 ** 0.5 + mask\n"
        "    torch.testing.assert_close(out.cpu(), ref, rtol=1e-5, atol=2e-6)\n"
        "    torch.testing.assert_close(lse.cpu(), torch.logsumexp(scores, -1), rtol=1e-5, atol=1e-5)\n",
        {"TORCH_WEBGPU_MAX_BINDING_BYTES": "262144"})


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("lq,lk", [(1, 600), (20, 20)])
def test_graph_capture_replays_the_fused_kernel(adapter_kind, lq, lk):
    """A captured call (the GPU variant's key splits and merge pass included) replays on
    new inputs copied into the same tensors."""
    q, k, v = (dev(t) for t in qkv(1, 4, 2, lq, lk, 32))
    run = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=lq > 1, enable_gqa=True)
    run()  # pipelines are built outside capture
    g = torch.webgpu.WebGPUGraph()
    with torch.webgpu.graph(g):
        out = run()
    assert g.num_dispatches() > 0
    for seed in (5, 6):
        new = qkv(1, 4, 2, lq, lk, 32, seed=seed)
        for dst, src in zip((q, k, v), new):
            dst.copy_(dev(src))
        g.replay()
        assert_same(out, reference(*new, is_causal=lq > 1, enable_gqa=True), **TOL[torch.float32])


@pytest.mark.usefixtures("no_fallback")
def test_torch_compile_with_dynamic_shapes():
    """The choice sees symbolic sizes while tracing (comparisons become guards)."""
    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True) * 2

    compiled = torch.compile(f, dynamic=True)
    for length in (5, 9, 13):
        q, k, v = qkv(1, 4, 2, length, length, 16, seed=length)
        with sdpa_kernel(SDPBackend.MATH):
            expected = f(q, k, v)
        with OpNames() as ops:
            actual = compiled(dev(q), dev(k), dev(v))
        assert FUSED in ops.names, ops.names
        assert_same(actual, expected, **TOL[torch.float32])


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("lq,lk", [(1, 300), (20, 20)])
def test_nan_inputs_propagate_like_math(adapter_kind, lq, lk):
    """A NaN in a query row makes that row NaN; a NaN in a key every row seeing it makes
    NaN (the math path's softmax). Keys a row does not see are skipped, as by flash
    kernels (the math path's additive mask would make NaN there too)."""
    q, k, v = qkv(1, 2, 2, lq, lk, 16)
    q[0, 0, lq - 1, 3] = float("nan")
    k[0, 1, 0, 5] = float("nan")
    out = check_sdpa(q, k, v, is_causal=lq > 1)
    assert out.isnan().any()


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("d,dv", [(6, 10), (3, 33), (130, 7)])
def test_odd_head_dims_prefill(adapter_kind, d, dv):
    """Head dims the lanes variant does not take: the rows variant with several query rows
    per workgroup, value columns shared unevenly among a chunk's invocations."""
    q, k, v = qkv(2, 3, 3, 21, 45, d, dv)
    check_sdpa(q, k, v, is_causal=True)
    check_sdpa(q, k, v, attn_mask=make((21, 45), torch.float32, 8, -2, 0))


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("d,dv", [(96, 96), (128, 128), (96, 40), (64, 128)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_blocks_large_head_dims(monkeypatch, tmp_path, d, dv, dtype):
    """The blocks kernel at head dims whose K and V chunks do not both fit beside the
    query rows: V is staged where K was, after the scores (llvmpipe's 32 KiB at 96, 48 KiB
    at 128); past what any layout fits, the tiles kernel. Causal rows over a key split
    (merged by the second pass) and a float mask, against the math path."""
    monkeypatch.setenv("TORCH_WEBGPU_ADAPTER_KIND", "gpu")
    monkeypatch.setenv("TORCH_WEBGPU_ATTENTION_VARIANT", "blocks")
    q, k, v = qkv(1, 4, 2, 40, 600, d, dv, dtype=dtype)
    check_sdpa(q, k, v, is_causal=True, enable_gqa=True)
    q, k, v = qkv(2, 2, 2, 33, 70, d, dv, dtype=dtype, seed=3)
    check_sdpa(q, k, v, attn_mask=make((33, 70), dtype, 9, -2, 0))
