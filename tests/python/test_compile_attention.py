"""torch.compile of grouped-query attention written as transformers writes it (repeat_kv
before scaled_dot_product_attention): the webgpu pass (compiler/attention_passes.py) hands
the fused attention the unrepeated key/value heads, against the CPU."""
import pytest
import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

import torch_webgpu  # noqa: F401
from torch_webgpu.compiler.attention_passes import attention_without_repeated_kv
from conftest import assert_same, dev

FUSED = torch.ops.aten._scaled_dot_product_fused_attention_overrideable.default


def repeat_kv(x, group):
    b, h, l, d = x.shape
    return x[:, :, None, :, :].expand(b, h, group, l, d).reshape(b, h * group, l, d)


def gqa(q, k, v, mask):
    return F.scaled_dot_product_attention(q, repeat_kv(k, 7), repeat_kv(v, 7), attn_mask=mask)


def inputs(lq=3, lk=11):
    g = torch.Generator().manual_seed(0)
    q = torch.randn(1, 14, lq, 16, generator=g)
    k, v = torch.randn(1, 2, lk, 16, generator=g), torch.randn(1, 2, lk, 16, generator=g)
    mask = torch.rand(1, 1, lq, lk, generator=g) > 0.3
    mask[..., 0] = True
    return q, k, v, mask


def test_pass_drops_the_repeat():
    q, k, v, mask = (dev(t) for t in inputs())
    gm = make_fx(gqa)(q, k, v, mask)
    assert attention_without_repeated_kv(gm) == 1
    (node,) = [n for n in gm.graph.nodes if n.target == FUSED]
    assert [tuple(a.meta["val"].shape) for a in node.args[:3]] == [(1, 14, 3, 16), (1, 2, 11, 16), (1, 2, 11, 16)]
    assert not any(n.target == torch.ops.aten.expand.default for n in gm.graph.nodes)
    assert_same(gm(q, k, v, mask), gqa(*inputs()), atol=1e-5, rtol=1e-5)


def test_pass_leaves_other_repeats():
    """A repeat along another dim, or groups that do not match the query heads, stay."""
    def other(q, k, v):
        kk = k[:, :, :, None, :].expand(1, 2, 11, 7, 16).reshape(1, 2, 77, 16)
        return F.scaled_dot_product_attention(q, kk, kk)
    q, k, v, _ = (dev(t) for t in inputs())
    gm = make_fx(other)(q[:, :2], k, v)
    assert attention_without_repeated_kv(gm) == 0


@pytest.mark.parametrize("lq,lk", [(1, 11), (5, 5), (3, 40)])
def test_compiled_gqa_matches_cpu(lq, lk, no_fallback):
    torch._dynamo.reset()
    q, k, v, mask = inputs(lq, lk)
    with torch.no_grad():
        got = torch.compile(gqa)(dev(q), dev(k), dev(v), dev(mask))
    assert_same(got, gqa(q, k, v, mask), atol=1e-5, rtol=1e-5)
