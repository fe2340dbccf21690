"""webgpu next to CUDA in one process: copies both ways, and CUDA autograd, streams and
torch.accelerator still CUDA's after `import torch_webgpu`. Runs where CUDA is present
(the H200 runs: scripts/h200/run_tests.sh); CPU-only machines cover the redirection itself
in test_serialization.py::test_keep_cuda_accelerator_mechanism."""
import copy

import pytest
import torch

import torch_webgpu  # noqa: F401

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_copy_webgpu_to_cuda_and_back(dtype):
    cpu = (torch.randn(33, 17) * 100).to(dtype)
    w = cpu.to("webgpu")
    c = w.to("cuda")
    assert c.device.type == "cuda" and c.dtype == dtype
    assert torch.equal(c.cpu(), cpu)
    back = c.to("webgpu")
    assert back.device.type == "webgpu" and torch.equal(back.cpu(), cpu)


def test_copy_strided_and_converting():
    cpu = torch.randn(8, 10)
    w = cpu.to("webgpu")[1:7, ::3].t()
    c = torch.empty(4, 6, device="cuda", dtype=torch.float16)
    c.copy_(w)
    torch.testing.assert_close(c.cpu(), cpu[1:7, ::3].t().half(), rtol=0, atol=0)
    w2 = torch.zeros(10, 8, device="webgpu").t()
    w2.copy_(cpu.cuda())
    torch.testing.assert_close(w2.cpu(), cpu, rtol=0, atol=0)
    c_nb = w.to("cuda", non_blocking=True)
    torch.cuda.synchronize()
    torch.testing.assert_close(c_nb.cpu(), cpu[1:7, ::3].t(), rtol=0, atol=0)


def test_accelerator_stays_cuda():
    assert torch.accelerator.current_accelerator().type == "cuda"
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        y = torch.ones(4, device="cuda") * 3
    s.synchronize()
    assert torch.accelerator.current_stream().device.type == "cuda"
    assert y.sum().item() == 12


def test_cuda_training_with_torch_webgpu_imported():
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    model_cuda = copy.deepcopy(ref).cuda()
    model_cpu = copy.deepcopy(ref).cpu()
    model_gpu = copy.deepcopy(ref).to("webgpu")
    x = torch.randn(64, 16)
    t = torch.randn(64, 4)
    losses = {}
    for name, m, dev in (("cuda", model_cuda, "cuda"), ("cpu", model_cpu, "cpu"),
                         ("webgpu", model_gpu, "webgpu")):
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        hist = []
        for _ in range(5):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(m(x.to(dev)), t.to(dev))
            loss.backward()
            opt.step()
            hist.append(loss.item())
        losses[name] = hist
    torch.testing.assert_close(torch.tensor(losses["cuda"]), torch.tensor(losses["cpu"]),
                               rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(torch.tensor(losses["webgpu"]), torch.tensor(losses["cpu"]),
                               rtol=1e-4, atol=1e-5)


def test_compile_on_cuda_after_compiling_on_webgpu():
    """Inductor's cuda wrapper code still compiles once webgpu has registered its own."""
    fn = lambda x: (x.sin() + 1).relu().sum(-1)  # noqa: E731
    x = torch.randn(8, 33)
    torch.testing.assert_close(torch.compile(fn)(x.to("webgpu")).cpu(), fn(x), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(torch.compile(fn, mode="reduce-overhead")(x.cuda()).cpu(), fn(x),
                               atol=1e-5, rtol=1e-5)
