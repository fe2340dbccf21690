"""Pickling, deepcopy, torch.save / torch.load of webgpu tensors, modules and optimizers."""
import copy
import io
import os
import pickle
import subprocess
import sys
import textwrap

import pytest
import torch

import torch_webgpu  # noqa: F401

DEV = "webgpu"


def _samples():
    g = torch.Generator().manual_seed(0)
    base = torch.randn(4, 6, generator=g)
    return {
        "float32": base,
        "float16": base.half(),
        "bfloat16": base.bfloat16(),
        "int64": (base * 1e6).long() * 4096,  # beyond 2**32: both words survive
        "bool": base > 0,
        "uint8": (base * 10).to(torch.uint8),
        "empty": torch.empty(0, 3),
        "scalar": torch.tensor(3.5),
    }


@pytest.mark.parametrize("name", list(_samples()))
def test_pickle_round_trip(name):
    cpu = _samples()[name]
    x = cpu.to(DEV)
    y = pickle.loads(pickle.dumps(x))
    assert y.device.type == DEV and y.dtype == cpu.dtype and y.shape == cpu.shape
    torch.testing.assert_close(y.cpu(), cpu, rtol=0, atol=0)


def test_pickle_view_keeps_offset_and_strides():
    cpu = torch.arange(48.0).reshape(6, 8)
    view = cpu.to(DEV)[1:5, ::2].t()
    y = pickle.loads(pickle.dumps(view))
    assert y.stride() == view.stride() and y.storage_offset() == view.storage_offset()
    torch.testing.assert_close(y.cpu(), cpu[1:5, ::2].t(), rtol=0, atol=0)


def test_save_keeps_views_sharing_storage():
    x = torch.arange(10.0, device=DEV)
    buf = io.BytesIO()
    torch.save((x, x[2:5]), buf)
    buf.seek(0)
    a, b = torch.load(buf)
    a[3] = 100.0  # b shares a's storage after loading, as on the CPU and CUDA
    assert b.cpu().tolist() == [2.0, 100.0, 4.0]


def test_deepcopy_tensor_module_optimizer():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.ReLU(), torch.nn.Linear(7, 2)).to(DEV)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    x = torch.randn(3, 5)
    model(x.to(DEV)).sum().backward()
    opt.step()

    model2 = copy.deepcopy(model)
    opt2 = torch.optim.Adam(model2.parameters(), lr=0.01)
    opt2.load_state_dict(copy.deepcopy(opt.state_dict()))
    for p, q in zip(model.parameters(), model2.parameters()):
        assert q.device.type == DEV and q.data_ptr() != p.data_ptr()
        torch.testing.assert_close(q.cpu(), p.cpu(), rtol=0, atol=0)
    state = opt2.state_dict()["state"][0]
    assert state["exp_avg"].device.type == DEV
    torch.testing.assert_close(state["exp_avg"].cpu(), opt.state_dict()["state"][0]["exp_avg"].cpu())
    # The copies train on independently and identically.
    for m, o in ((model, opt), (model2, opt2)):
        o.zero_grad()
        m(x.to(DEV)).sum().backward()
        o.step()
    for p, q in zip(model.parameters(), model2.parameters()):
        torch.testing.assert_close(q.cpu(), p.cpu(), rtol=0, atol=0)


@pytest.mark.parametrize("legacy", [False, True])
@pytest.mark.parametrize(
    "map_location",
    [None, "webgpu", "webgpu:0", torch.device("webgpu"), "callable", "dict"],
    ids=["none", "str", "str0", "device", "callable", "dict"],
)
def test_save_load_to_webgpu(map_location, legacy):
    cpu = torch.randn(3, 4)
    buf = io.BytesIO()
    source = cpu.to(DEV) if map_location is None else cpu
    torch.save({"w": source, "n": 3}, buf, _use_new_zipfile_serialization=not legacy)
    buf.seek(0)
    if map_location == "callable":
        map_location = lambda storage, loc: storage.webgpu()  # noqa: E731
    elif map_location == "dict":
        map_location = {"cpu": "webgpu:0"}
    loaded = torch.load(buf, map_location=map_location)
    assert loaded["n"] == 3 and loaded["w"].device.type == DEV
    torch.testing.assert_close(loaded["w"].cpu(), cpu, rtol=0, atol=0)


def test_load_webgpu_checkpoint_on_cpu():
    cpu = torch.randn(5, 2)
    buf = io.BytesIO()
    torch.save({"w": cpu.to(DEV)}, buf)
    buf.seek(0)
    loaded = torch.load(buf, map_location="cpu")
    assert loaded["w"].device.type == "cpu"
    torch.testing.assert_close(loaded["w"], cpu, rtol=0, atol=0)


def test_load_webgpu_checkpoint_in_process_without_torch_webgpu(tmp_path):
    path = tmp_path / "ckpt.pt"
    cpu = torch.randn(4, 4)
    torch.save({"w": cpu.to(DEV)}, path)
    torch.save(cpu, tmp_path / "ref.pt")
    code = textwrap.dedent(f"""
        import torch, sys
        assert "torch_webgpu" not in sys.modules
        w = torch.load({str(path)!r}, map_location="cpu")["w"]
        ref = torch.load({str(tmp_path / 'ref.pt')!r})
        assert w.device.type == "cpu" and torch.equal(w, ref)
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr


def test_load_without_adapter_names_map_location(tmp_path):
    path = tmp_path / "ckpt.pt"
    torch.save(torch.ones(2, device=DEV), path)
    code = textwrap.dedent(f"""
        import torch, torch_webgpu
        torch.webgpu.is_available = lambda: False  # as on a machine without an adapter
        try:
            torch.load({str(path)!r})
        except RuntimeError as e:
            print("raised", "map_location" in str(e))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "raised True" in out.stdout, out.stdout + out.stderr


class Tied(torch.nn.Module):
    """An embedding and an output layer sharing one weight, as language models do."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(11, 6)
        self.head = torch.nn.Linear(6, 11, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, ids):
        return self.head(self.emb(ids))


def test_state_dict_round_trip_with_tied_weights():
    torch.manual_seed(0)
    model = Tied().to(DEV)
    buf = io.BytesIO()
    torch.save(model, buf)
    buf.seek(0)
    whole = torch.load(buf, weights_only=False)
    assert whole.head.weight is whole.emb.weight and whole.emb.weight.device.type == DEV

    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    buf.seek(0)
    sd = torch.load(buf)
    assert sd["emb.weight"].data_ptr() == sd["head.weight"].data_ptr()  # saved once, shared
    fresh = Tied().to(DEV)
    fresh.load_state_dict(sd)
    assert fresh.head.weight is fresh.emb.weight
    ids = torch.tensor([[1, 4, 9]])
    torch.testing.assert_close(fresh(ids.to(DEV)).cpu(), model.cpu()(ids), rtol=1e-5, atol=1e-6)


def test_untyped_storage_round_trip_through_raw_pointer():
    # torch.save reads storages through at::from_blob on their data pointer.
    x = torch.arange(7, dtype=torch.int32, device=DEV)
    s = x[2:].untyped_storage()
    assert s.cpu().tolist() == x.untyped_storage().cpu().tolist()
    buf = io.BytesIO()
    torch.save(s, buf)
    buf.seek(0)
    y = torch.load(buf)
    assert y.device.type == DEV and bytes(y.cpu()) == bytes(x.cpu().untyped_storage())


@pytest.mark.skipif(os.environ.get("TORCH_WEBGPU_ACCELERATOR") == "webgpu", reason="opt-out set")
def test_keep_cuda_accelerator_mechanism():
    # On machines with CUDA, import keeps CUDA torch's accelerator by redirecting libtorch's
    # calls. Here (no CUDA) force the same redirection in a child and check both sides.
    code = textwrap.dedent("""
        import torch, torch_webgpu
        n = torch_webgpu._C._keep_cuda_as_accelerator()
        assert n > 0, n
        assert torch.accelerator.current_accelerator().type == "cuda"
        import copy
        torch.manual_seed(0)
        m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
        md = copy.deepcopy(m).to("webgpu")
        x = torch.randn(16, 4)
        grads = []
        for model, xx in ((m, x), (md, x.to("webgpu"))):
            h = model(xx)
            # h feeds two consumers, so autograd accumulates into one input buffer.
            loss = torch.nn.functional.mse_loss(h * 2 - h, xx.sum(1, keepdim=True))
            loss.backward()
            grads.append([p.grad.cpu() for p in model.parameters()])
        for a, b in zip(*grads):
            torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)
        print("ok", n)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "ok" in out.stdout, out.stdout + out.stderr


def test_module_to_keeps_tied_weights_and_trains_like_cpu():
    torch.manual_seed(0)
    ref = Tied()
    model = copy.deepcopy(ref).to(DEV)
    assert model.head.weight is model.emb.weight  # moved in place, as to("cuda") does
    assert len(list(model.parameters())) == 1
    ids = torch.tensor([[1, 4, 9, 2]])
    for m, i in ((ref, ids), (model, ids.to(DEV))):
        opt = torch.optim.SGD(m.parameters(), lr=0.5)
        for _ in range(3):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(m(i)[0], i[0]).backward()
            opt.step()
    torch.testing.assert_close(model.emb.weight.cpu(), ref.emb.weight, rtol=1e-5, atol=1e-6)
    back = model.cpu()
    assert back.head.weight is back.emb.weight and back.emb.weight.device.type == "cpu"
