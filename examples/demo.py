"""The main demo: tensors and a small model on the webgpu device, checked against the CPU.

    bash scripts/setup.sh && python3 examples/demo.py
"""
import os
import time

import torch
import torch_webgpu  # noqa: F401  registers the "webgpu" device

# Matmul and the loss still run through the CPU fallback; keep the demo's output clean.
os.environ.setdefault("TORCH_WEBGPU_FALLBACK_WARN", "0")


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


if __name__ == "__main__":
    main()
