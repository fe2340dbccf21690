"""Training on the device: tensors, a small MLP and a small transformer language model
trained with AdamW on webgpu next to the CPU, and the list of ops that needed the CPU.

    python3 examples/train_demo.py
"""
import os
import time

import torch
import torch_webgpu  # noqa: F401  registers the "webgpu" device

# Everything below runs natively; should an op fall back to the CPU, the last line says so.
os.environ.setdefault("TORCH_WEBGPU_FALLBACK_WARN", "0")


def transformer_steps(device, steps=4):
    """A small transformer language model (embedding, one encoder layer, head) trained
    for a few AdamW steps from seeded weights; returns the losses."""
    torch.manual_seed(1)
    layer = torch.nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64,
                                             dropout=0.0, batch_first=True)
    model = torch.nn.Sequential(torch.nn.Embedding(50, 32), layer, torch.nn.Linear(32, 50)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    tokens = torch.randint(0, 50, (8, 17), generator=torch.Generator().manual_seed(2)).to(device)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(16, device=device)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        logits = model[2](model[1](model[0](tokens[:, :-1]), src_mask=mask, is_causal=True))
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 50), tokens[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def main():
    props = torch.webgpu.get_device_properties()
    print(f"device: {props.name} ({props.backend} backend, {props.adapter_type})")

    x = torch.tensor([1.0, 2.0, 3.0], device="webgpu") * 2
    print("tensor([1., 2., 3.]) * 2 =", x)

    a = torch.arange(12, dtype=torch.int64).reshape(3, 4)
    big = a + 2**53  # int64 stays exact beyond float precision
    print("int64 beyond 2**53, transposed:", (big.webgpu().t() * 2 - 1).cpu()[0].tolist())

    h = torch.linspace(-3, 3, 7, dtype=torch.float16, device="webgpu")
    print("gelu on float16:", torch.nn.functional.gelu(h).cpu().tolist())

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
    model_gpu = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
    model_gpu.load_state_dict(model.state_dict())
    model_gpu = model_gpu.webgpu()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    opt_gpu = torch.optim.AdamW(model_gpu.parameters(), lr=1e-2)

    inputs = torch.randn(64, 16)
    labels = torch.randint(0, 4, (64,))
    start = time.perf_counter()
    for step in range(5):
        losses = []
        for m, o, xin, y in ((model, opt, inputs, labels),
                             (model_gpu, opt_gpu, inputs.webgpu(), labels.webgpu())):
            o.zero_grad()
            loss = torch.nn.functional.cross_entropy(m(xin), y)
            loss.backward()
            o.step()
            losses.append(loss.item())
        print(f"step {step}: loss cpu {losses[0]:.6f}  webgpu {losses[1]:.6f}")
    torch.webgpu.synchronize()
    diff = max((p.detach() - q.detach().cpu()).abs().max().item()
               for p, q in zip(model.parameters(), model_gpu.parameters()))
    print(f"5 AdamW steps in {time.perf_counter() - start:.2f}s; "
          f"max weight difference vs CPU: {diff:.2e}")
    print(f"memory allocated on device: {torch.webgpu.memory_allocated()} bytes")

    start = time.perf_counter()
    gpu_losses = transformer_steps("webgpu")
    seconds = time.perf_counter() - start
    cpu_losses = transformer_steps("cpu")
    print("transformer LM, 4 AdamW steps (causal attention, layer norm, ReLU feed-forward):")
    for step, (c, g) in enumerate(zip(cpu_losses, gpu_losses)):
        print(f"  step {step}: loss cpu {c:.6f}  webgpu {g:.6f}")
    print(f"  {seconds:.2f}s on webgpu; largest loss difference {max(abs(c - g) for c, g in zip(cpu_losses, gpu_losses)):.2e}")
    fallen_back = torch_webgpu._C.fallback_ops_seen()
    print("ops that ran on the CPU fallback:", ", ".join(sorted(fallen_back)) or "none")


if __name__ == "__main__":
    main()
