"""On the H200 (torch with CUDA): the native webgpu recurrent cells and CTC loss against
CUDA's own kernels, including what only CUDA defines (the fused cells' workspace layout).
Prints PASS/FAIL lines and the largest differences. Run from the repository root with
PYTHONPATH=python after building."""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_webgpu  # noqa: F401

# cuDNN's recurrent layers use TF32 by default; compare against full float32.
torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False

failures = 0


def report(name, got, want, rtol=1e-4, atol=1e-5):
    global failures
    got, want = got.detach().cpu().float(), want.detach().cpu().float()
    ok = got.shape == want.shape and torch.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    diff = (got - want).abs().nan_to_num(0).max().item() if got.shape == want.shape and got.numel() else 0.0
    failures += not ok
    print(f"{'PASS' if ok else 'FAIL'} {name}: max abs diff {diff:.3g}")


def main():
    if not torch.cuda.is_available():
        print("FAIL no CUDA device")
        return 1
    g = torch.Generator().manual_seed(0)
    B, H = 5, 7
    for bias in (True, False):
        ins = [torch.randn(B, 4 * H, generator=g), torch.randn(B, 4 * H, generator=g),
               torch.randn(B, H, generator=g)]
        ins += [torch.randn(4 * H, generator=g), torch.randn(4 * H, generator=g)] if bias else [None, None]
        on = lambda d: [t.to(d) if t is not None else None for t in ins]  # noqa: E731
        wc, ww = torch.ops.aten._thnn_fused_lstm_cell(*on("cuda")), torch.ops.aten._thnn_fused_lstm_cell(*on("webgpu"))
        for name, a, b in zip(("hy", "cy", "workspace"), ww, wc):
            report(f"lstm_cell bias={bias} {name}", a, b)
        ghy, gcy = torch.randn(B, H, generator=g), torch.randn(B, H, generator=g)
        bc = torch.ops.aten._thnn_fused_lstm_cell_backward_impl(ghy.cuda(), gcy.cuda(), ins[2].cuda(), wc[1], wc[2], bias)
        bw = torch.ops.aten._thnn_fused_lstm_cell_backward_impl(ghy.to("webgpu"), gcy.to("webgpu"), ins[2].to("webgpu"), ww[1], ww[2], bias)
        for name, a, b in zip(("grad_gates", "grad_cx", "grad_bias"), bw, bc):
            if b is not None:
                report(f"lstm_cell_backward bias={bias} {name}", a, b)

        gins = [torch.randn(B, 3 * H, generator=g), torch.randn(B, 3 * H, generator=g),
                torch.randn(B, H, generator=g)]
        gins += [torch.randn(3 * H, generator=g), torch.randn(3 * H, generator=g)] if bias else [None, None]
        gon = lambda d: [t.to(d) if t is not None else None for t in gins]  # noqa: E731
        gc, gw = torch.ops.aten._thnn_fused_gru_cell(*gon("cuda")), torch.ops.aten._thnn_fused_gru_cell(*gon("webgpu"))
        report(f"gru_cell bias={bias} hy", gw[0], gc[0])
        # The GRU workspace is private to our forward/backward pair (its backward below
        # matches CUDA's); its layout need not equal CUDA's.
        same = gw[1].shape == gc[1].shape and torch.allclose(gw[1].cpu(), gc[1].cpu(), atol=1e-5)
        print(f"INFO gru_cell bias={bias} workspace layout equals CUDA's: {same}")
        bc = torch.ops.aten._thnn_fused_gru_cell_backward(ghy.cuda(), gc[1], bias)
        bw = torch.ops.aten._thnn_fused_gru_cell_backward(ghy.to("webgpu"), gw[1], bias)
        for name, a, b in zip(("grad_input_gates", "grad_hidden_gates", "grad_hx", "grad_ib", "grad_hb"), bw, bc):
            if b is not None:
                report(f"gru_cell_backward bias={bias} {name}", a, b)

    for mode in ("LSTM", "GRU"):
        torch.manual_seed(0)
        m = getattr(nn, mode)(8, 16, num_layers=2, bidirectional=True)
        x = torch.randn(30, 4, 8, generator=g)
        outs = {}
        for d in ("cuda", "webgpu"):
            md = m.to(d)
            xd = x.to(d).requires_grad_(True)
            y, _ = md(xd)
            y.square().sum().backward()
            outs[d] = (y, xd.grad, [p.grad.clone() for p in md.parameters()])
            md.zero_grad()
        report(f"nn.{mode} output", outs["webgpu"][0], outs["cuda"][0])
        report(f"nn.{mode} input grad", outs["webgpu"][1], outs["cuda"][1], rtol=1e-3, atol=1e-4)
        for i, (a, b) in enumerate(zip(outs["webgpu"][2], outs["cuda"][2])):
            report(f"nn.{mode} param {i} grad", a, b, rtol=1e-3, atol=1e-4)

    T, B, C, S = 200, 8, 40, 60
    lp = torch.randn(T, B, C, generator=g).log_softmax(2)
    targets = torch.randint(1, C, (B, S), generator=g)
    il = torch.randint(150, T + 1, (B,), generator=g)
    tl = torch.randint(1, S + 1, (B,), generator=g)
    res = {}
    for d in ("cuda", "webgpu"):
        x = lp.to(d).requires_grad_(True)
        loss = F.ctc_loss(x, targets.to(d), il.to(d), tl.to(d), reduction="sum", zero_infinity=True)
        loss.backward()
        res[d] = (loss, x.grad)
    report("ctc_loss value", res["webgpu"][0], res["cuda"][0], rtol=1e-4, atol=1e-3)
    report("ctc_loss grad", res["webgpu"][1], res["cuda"][1], rtol=1e-3, atol=1e-4)
    print("FAILURES", failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
