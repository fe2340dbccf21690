"""Shared helpers of the nn test files (norm, pool, upsample, loss): forward and
gradient comparisons of a function on the CPU and on webgpu."""
import torch

from conftest import DEVICE, assert_same

GRAD_TOL = {
    torch.float32: dict(rtol=1e-4, atol=1e-5),
    torch.float16: dict(rtol=1e-2, atol=1e-2),
    torch.bfloat16: dict(rtol=5e-2, atol=5e-2),
}


def forward_backward(fn, *inputs, grad=True, tol=None, grad_tol=None, seed=0, frozen=()):
    """Runs fn on CPU and webgpu copies of the inputs (float tensors get gradients when
    `grad`), compares outputs, then backpropagates the same random upstream gradient and
    compares the input gradients (inputs at positions in `frozen` get none). Returns the
    device outputs."""
    def prep(t, device, i):
        if not isinstance(t, torch.Tensor):
            return t
        t = t.detach().clone().to(device)
        if grad and t.is_floating_point() and i not in frozen:
            t.requires_grad_(True)
        return t

    cin = [prep(t, "cpu", i) for i, t in enumerate(inputs)]
    din = [prep(t, DEVICE, i) for i, t in enumerate(inputs)]
    cout = fn(*cin)
    dout = fn(*din)
    couts = cout if isinstance(cout, (tuple, list)) else (cout,)
    douts = dout if isinstance(dout, (tuple, list)) else (dout,)
    for d, c in zip(douts, couts):
        if isinstance(c, torch.Tensor):
            assert_same(d.detach(), c.detach(), **(tol or {}))
    if not grad:
        return dout
    g = torch.Generator().manual_seed(seed)
    c0 = couts[0]
    up = torch.randn(c0.shape, generator=g, dtype=torch.float32).to(c0.dtype)
    c0.backward(up)
    douts[0].backward(up.to(DEVICE))
    for d, c in zip(din, cin):
        if isinstance(c, torch.Tensor) and c.requires_grad:
            assert (d.grad is None) == (c.grad is None)
            if c.grad is not None:
                assert_same(d.grad, c.grad, **(grad_tol or GRAD_TOL.get(c.dtype, {})))
    return dout
