"""Training end to end: an MLP with cross-entropy, backward and AdamW steps on webgpu
matches the same model on the CPU (identical initial weights). Matmul and the loss run
through the CPU fallback for now; the elementwise parts run natively."""
import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from conftest import DEVICE

RTOL = 1e-5
ATOL = 1e-6


def _model(seed):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 5))


def _close(actual, expected, what):
    torch.testing.assert_close(actual.detach().cpu(), expected.detach(), rtol=RTOL, atol=ATOL,
                               msg=lambda m: f"{what}: {m}")


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_mlp_cross_entropy_adamw_matches_cpu(approximate, quiet_fallback):
    cpu_model = _model(0)
    cpu_model[1] = nn.GELU(approximate=approximate)
    dev_model = copy.deepcopy(cpu_model).to(DEVICE)
    for p in dev_model.parameters():
        assert p.device.type == DEVICE
    for pc, pd in zip(cpu_model.parameters(), dev_model.parameters()):
        assert torch.equal(pc.detach(), pd.detach().cpu())

    opt_cpu = torch.optim.AdamW(cpu_model.parameters(), lr=1e-2, weight_decay=0.01)
    opt_dev = torch.optim.AdamW(dev_model.parameters(), lr=1e-2, weight_decay=0.01)

    g = torch.Generator().manual_seed(1)
    for step in range(3):
        x = torch.randn(8, 16, generator=g)
        y = torch.randint(0, 5, (8,), generator=g)

        opt_cpu.zero_grad()
        loss_cpu = F.cross_entropy(cpu_model(x), y)
        loss_cpu.backward()

        opt_dev.zero_grad()
        loss_dev = F.cross_entropy(dev_model(x.to(DEVICE)), y.to(DEVICE))
        assert loss_dev.device.type == DEVICE
        loss_dev.backward()

        _close(loss_dev, loss_cpu, f"loss (step {step})")
        for (name, pc), pd in zip(cpu_model.named_parameters(), dev_model.parameters()):
            assert pd.grad is not None and pd.grad.device.type == DEVICE
            _close(pd.grad, pc.grad, f"grad of {name} (step {step})")

        opt_cpu.step()
        opt_dev.step()
        for (name, pc), pd in zip(cpu_model.named_parameters(), dev_model.parameters()):
            _close(pd, pc, f"{name} after step {step}")

    # Optimizer state lives on the device.
    state = opt_dev.state[next(iter(dev_model.parameters()))]
    assert state["exp_avg"].device.type == DEVICE
    assert state["exp_avg_sq"].device.type == DEVICE


def test_elementwise_autograd_matches_cpu(quiet_fallback):
    # Gradients through the native elementwise ops.
    g = torch.Generator().manual_seed(2)
    x = torch.randn(4, 6, generator=g)
    w = torch.rand(4, 6, generator=g) + 0.5

    def f(a, b):
        h = torch.sigmoid(a) * b + torch.tanh(a - b) + F.silu(a) / b
        h = torch.where(a > 0, h, torch.exp(a) * 0.5) + torch.relu(a) ** 2
        return (h * torch.sqrt(b) - torch.log1p(b)).sum()

    xc, wc = x.clone().requires_grad_(), w.clone().requires_grad_()
    xd, wd = x.to(DEVICE).requires_grad_(), w.to(DEVICE).requires_grad_()
    lc = f(xc, wc)
    ld = f(xd, wd)
    lc.backward()
    ld.backward()
    _close(ld, lc, "value")
    _close(xd.grad, xc.grad, "grad x")
    _close(wd.grad, wc.grad, "grad w")


def test_process_exits_cleanly_after_backward_on_the_device():
    # A backward pass right before exit used to abort the process ~half the time (the
    # autograd device thread dropped Python objects while the interpreter finalized).
    import subprocess
    import sys

    code = ("import torch, torch_webgpu\n"
            "x = torch.randn(4, 4).to('webgpu').requires_grad_()\n"
            "(x * x).sum().backward()\n"
            "assert x.grad is not None\n")
    for _ in range(4):
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env={**__import__("os").environ, "TORCH_WEBGPU_FALLBACK_WARN": "0"})
        assert r.returncode == 0, r.stderr[-2000:]
