"""The engine's web bundle (docs/ENGINE.md, "Web bundle") run by web/player.js in a real
browser: Debian's chromium driven by Playwright, WebGPU on SwiftShader. Each model is
exported, written out as a bundle and run in the page; outputs are compared with PyTorch
on the CPU and with the Python engine. Damaged bundles and bad inputs must reject the
player's promise with a message naming what is wrong."""
import base64
import functools
import http.server
import json
import os
import shutil
import threading

import numpy as np
import pytest
import torch
import torch.nn as nn

from torch_webgpu import _C

if not hasattr(_C, "_engine"):
    pytest.skip("torch_webgpu built without the engine (nlohmann-json3-dev missing)", allow_module_level=True)

from playwright.sync_api import sync_playwright  # noqa: E402

from torch_webgpu import aot, engine  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHROMIUM = "/usr/bin/chromium"
# WebGPU on the CPU: SwiftShader's Vulkan (DESIGN.md, "Environment facts").
CHROMIUM_ARGS = ["--enable-unsafe-webgpu", "--enable-features=Vulkan", "--use-vulkan=swiftshader",
                 "--use-webgpu-adapter=swiftshader", "--no-sandbox",
                 # The demo page's camera button: a generated test pattern, no permission prompt.
                 "--use-fake-device-for-media-stream", "--use-fake-ui-for-media-stream"]

HARNESS = """<!doctype html><meta charset="utf-8"><script type="module">
import * as player from "./player.js";
const b64 = (bytes) => { let s = ""; for (const x of bytes) s += String.fromCharCode(x); return btoa(s); };
const unb64 = (s) => Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
const ARRAYS = {float32: Float32Array, float16: Uint16Array, bfloat16: Uint16Array, int64: BigInt64Array,
                int32: Int32Array, int16: Int16Array, int8: Int8Array, uint8: Uint8Array, bool: Uint8Array};
// Loads the bundle at url and runs it on inputs ([dtype, base64 bytes]); returns the
// outputs' bytes, or the error's name and message.
// With viaDevice, the player gets a default device instead of the adapter.
window.runBundle = async (url, inputs, viaDevice) => {
  try {
    const adapter = await navigator.gpu.requestAdapter();
    if (!adapter) return {error: "no WebGPU adapter", name: "none"};
    const b = await player.loadBundle(viaDevice ? await adapter.requestDevice() : adapter, url);
    const outs = await b.run(inputs.map(([dtype, data]) => new ARRAYS[dtype](unb64(data).buffer)));
    b.destroy();
    return {outputs: outs.map((o) => b64(new Uint8Array(o.buffer, o.byteOffset, o.byteLength)))};
  } catch (e) {
    return {error: e.message, name: e.name};
  }
};
window.harnessReady = true;
</script>"""


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A local http server over a folder holding player.js, the harness page and bundles."""
    root = tmp_path_factory.mktemp("site")
    shutil.copy(os.path.join(REPO, "web", "player.js"), root / "player.js")
    (root / "harness.html").write_text(HARNESS)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    thread.join()


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture(scope="module")
def page(site, browser):
    """The harness page (window.runBundle), shared by the tests of a worker."""
    _, url = site
    pg = browser.new_page()
    pg.goto(url + "/harness.html")
    pg.wait_for_function("window.harnessReady === true")
    yield pg
    pg.close()


def run_in_browser(page, name, inputs, via_device=False):
    arrays = [np.ascontiguousarray(x.numpy() if isinstance(x, torch.Tensor) else x) for x in inputs]
    payload = [[a.dtype.name if a.dtype != np.bool_ else "bool", base64.b64encode(a.tobytes()).decode()]
               for a in arrays]
    return page.evaluate("([url, inputs, dev]) => window.runBundle(url, inputs, dev)", [name, payload, via_device])


def export_bundle(site, name, model, inputs):
    """Exports model to a program dir and its web bundle under the site; returns the
    loaded engine program."""
    root, _ = site
    prog_dir = root / (name + "_program")
    aot.export(model, inputs, str(prog_dir), web_dir=str(root / name))
    return engine.Program.load(str(prog_dir))


def outputs_of(result, prog):
    assert "error" not in result, f"{result.get('name')}: {result.get('error')}"
    outs = []
    for (dtype, shape), data in zip(prog.output_specs, result["outputs"]):
        outs.append(np.frombuffer(base64.b64decode(data), dtype=np.dtype(dtype)).reshape(shape))
    assert len(outs) == len(prog.output_specs)
    return outs


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 16), nn.GELU(), nn.Linear(16, 8)).eval()


def cnn():
    torch.manual_seed(0)
    m = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8), nn.SiLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10)).eval()
    with torch.no_grad():
        for bn in (m[1], m[5]):
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-0.5, 0.5)
    return m


def encoder_layer():
    torch.manual_seed(0)
    return nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True).eval()


# (name, model factory, input, tolerance vs the CPU): the CPU's encoder fast path sums in
# another order, as in test_engine.py.
MODELS = [
    ("mlp", mlp, lambda: torch.randn(4, 16), 1e-5),
    ("cnn", cnn, lambda: torch.randn(2, 3, 16, 16), 1e-5),
    ("encoder", encoder_layer, lambda: torch.randn(2, 7, 32), 1e-4),
]


@pytest.mark.parametrize("name,factory,make_input,tol", MODELS, ids=[m[0] for m in MODELS])
def test_bundle_in_browser_matches_cpu_and_engine(name, factory, make_input, tol, site, page):
    torch.manual_seed(1)
    x = make_input()
    prog = export_bundle(site, name, factory(), (x,))
    (got,) = outputs_of(run_in_browser(page, name, [x]), prog)
    with torch.no_grad():
        expected = factory()(x)
    torch.testing.assert_close(torch.from_numpy(got.copy()), expected, rtol=tol, atol=tol)
    (ours,) = prog.run(x)
    # Another adapter (SwiftShader, not llvmpipe): the same kernels, within float32 rounding.
    np.testing.assert_allclose(got, ours, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name,factory,make_input,tol", MODELS, ids=[m[0] for m in MODELS])
def test_bundle_replays_the_engine_bit_for_bit(name, factory, make_input, tol, site):
    """On the adapter that wrote it, the bundle alone (engine.run_web_bundle: the player's
    steps through our runtime) gives the engine's outputs to the bit."""
    root, _ = site
    torch.manual_seed(2)
    x = make_input()
    prog = export_bundle(site, name + "_exact", factory(), (x,))
    (ours,) = prog.run(x)
    (replayed,) = engine.run_web_bundle(root / (name + "_exact"), x)
    assert replayed.dtype == ours.dtype and replayed.shape == ours.shape
    assert np.array_equal(replayed.view(np.uint32), ours.view(np.uint32))


def test_replay_errors_are_value_errors(site):
    name = damaged(site, "bad_replay", edit_bin=lambda b: b[:-64])
    root, _ = site
    with pytest.raises(ValueError, match="buffers.bin has"):
        engine.run_web_bundle(root / name, torch.randn(4, 16))
    name = damaged(site, "bad_replay_json", edit_json=lambda t: t[:100])
    with pytest.raises(ValueError, match="not valid JSON"):
        engine.run_web_bundle(root / name, torch.randn(4, 16))
    with pytest.raises(ValueError, match="needs 256 bytes"):
        engine.run_web_bundle(root / "mlp", torch.randn(4, 15))


def test_bundle_contents(site):
    """The bundle lists what one engine run does, and its buffers hold the weights."""
    root, _ = site
    model = mlp()
    x = torch.randn(4, 16)
    prog = export_bundle(site, "mlp_contents", model, (x,))
    m = json.loads((root / "mlp_contents" / "bundle.json").read_text())
    assert m["format"] == "torch-webgpu-web-bundle" and m["version"] == 1
    dispatches = [s for s in m["steps"] if s["kind"] == "dispatch"]
    assert len(dispatches) >= prog.launches_per_run  # a launch records one dispatch or more
    bin_bytes = (root / "mlp_contents" / "buffers.bin").read_bytes()
    assert len(bin_bytes) == m["bin"]["size"]
    weights = (root / "mlp_contents_program" / "weights.bin").read_bytes()
    constants = [b for b in m["buffers"] if b["role"] == "weights" and "content" in b]
    assert any(bin_bytes[b["content"]["offset"]:b["content"]["offset"] + len(weights)] == weights
               for b in constants), "the weights are not in buffers.bin"
    assert [(i["dtype"], tuple(i["shape"])) for i in m["inputs"]] == prog.input_specs
    assert [(o["dtype"], tuple(o["shape"])) for o in m["outputs"]] == prog.output_specs
    assert all(s["wgsl"] and s["entryPoint"] == "main" for s in m["shaders"])


def test_two_inputs_and_two_outputs_in_order(site, page):
    class Two(nn.Module):
        def forward(self, a, b):
            return a @ b, torch.relu(a - 1.0)

    a, b = torch.randn(3, 5), torch.randn(5, 2)
    prog = export_bundle(site, "two", Two(), (a, b))
    mm, r = outputs_of(run_in_browser(page, "two", [a, b]), prog)
    torch.testing.assert_close(torch.from_numpy(mm.copy()), a @ b, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(torch.from_numpy(r.copy()), torch.relu(a - 1.0), rtol=0, atol=0)


class Dtypes(nn.Module):
    def forward(self, i, h):
        mask = h > 0                                       # bool (3 bytes a row: padding)
        return i * 3 - 7, mask, torch.where(mask, h, h * 0.5), i.to(torch.float32) / 4.0


def test_int64_bool_float16_inputs_and_outputs(site, page):
    i = torch.randint(-2**40, 2**40, (3, 3))
    h = torch.randn(3, 3).to(torch.float16)
    prog = export_bundle(site, "dtypes", Dtypes(), (i, h))
    got = outputs_of(run_in_browser(page, "dtypes", [i, h]), prog)
    for g, e, ours in zip(got, Dtypes()(i, h), prog.run(i, h)):
        assert torch.from_numpy(g.copy()).dtype == e.dtype
        torch.testing.assert_close(torch.from_numpy(g.copy()), e, rtol=0, atol=0)
        assert np.array_equal(g, ours)


class Passthrough(nn.Module):
    """Outputs that are an input, a parameter, views (copied) and an empty tensor."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.arange(3.0), requires_grad=False)

    def forward(self, x, empty):
        return x, self.w, x.t(), empty * 2, x[1:, :2]


def test_outputs_that_are_inputs_parameters_views_or_empty(site, page):
    x, empty = torch.randn(3, 4), torch.randn(0, 5)
    model = Passthrough()
    prog = export_bundle(site, "passthrough", model, (x, empty))
    got = outputs_of(run_in_browser(page, "passthrough", [x, empty]), prog)
    for g, e in zip(got, model(x, empty)):
        assert g.shape == tuple(e.shape)
        assert np.array_equal(g, e.detach().numpy())


def damaged(site, name, edit_json=None, edit_bin=None):
    """A copy of the mlp bundle with bundle.json / buffers.bin changed."""
    root, _ = site
    src, dst = root / "mlp", root / name
    if not (src / "bundle.json").exists():
        export_bundle(site, "mlp", mlp(), (torch.randn(4, 16),))
    dst.mkdir(exist_ok=True)
    text, data = (src / "bundle.json").read_text(), (src / "buffers.bin").read_bytes()
    (dst / "bundle.json").write_text(edit_json(text) if edit_json else text)
    (dst / "buffers.bin").write_bytes(edit_bin(data) if edit_bin else data)
    return name


def with_field(text, key, value):
    m = json.loads(text)
    m[key] = value
    return json.dumps(m)


@pytest.mark.parametrize("case,expected", [
    ("truncated_json", "is not valid JSON"),
    ("truncated_bin", "buffers.bin has"),
    ("wrong_version", "bundle version 99 is not supported"),
    ("bad_buffer_id", "buffer 9999 does not exist"),
    ("missing", "HTTP 404"),
    ("needs_more_than_the_adapter", "the adapter's maxStorageBuffersPerShaderStage is"),
    ("bad_wgsl", "does not compile"),
])
def test_bad_bundles_reject_with_a_message(case, expected, site, page):
    edits = {
        "truncated_json": dict(edit_json=lambda t: t[: len(t) // 2]),
        "truncated_bin": dict(edit_bin=lambda b: b[: len(b) - 64]),
        "wrong_version": dict(edit_json=lambda t: with_field(t, "version", 99)),
        "needs_more_than_the_adapter": dict(edit_json=lambda t: with_field(
            t, "limits", {**json.loads(t)["limits"], "maxStorageBuffersPerShaderStage": 1000})),
        "bad_wgsl": dict(edit_json=lambda t: with_field(
            t, "shaders", [{**sh, "wgsl": sh["wgsl"] + "\nfn broken( {"} for sh in json.loads(t)["shaders"]])),
        "bad_buffer_id": dict(edit_json=lambda t: json.dumps(
            {**json.loads(t), "inputs": [{**json.loads(t)["inputs"][0], "buffer": 9999}]})),
    }
    name = damaged(site, "bad_" + case, **edits[case]) if case in edits else "no_such_bundle"
    result = run_in_browser(page, name, [torch.randn(4, 16)])
    assert result.get("name") == ("BundleError"), result
    assert expected in result["error"], result["error"]


def test_a_device_given_to_the_player(site, page):
    """loadBundle(device, url): a default device runs a bundle within its limits and is
    refused, naming the limit, when the bundle needs more."""
    x = torch.randn(4, 16)
    prog = export_bundle(site, "mlp_device", mlp(), (x,))
    (got,) = outputs_of(run_in_browser(page, "mlp_device", [x], via_device=True), prog)
    np.testing.assert_allclose(got, prog.run(x)[0], rtol=1e-5, atol=1e-6)
    name = damaged(site, "bad_device", edit_json=lambda t: with_field(
        t, "limits", {**json.loads(t)["limits"], "maxStorageBuffersPerShaderStage": 9}))
    result = run_in_browser(page, name, [x], via_device=True)
    assert result.get("name") == "BundleError", result
    assert "the device's maxStorageBuffersPerShaderStage is 8, the bundle needs 9" in result["error"]


@pytest.mark.parametrize("bad_input,expected", [
    (torch.randn(4, 15), "needs 256 bytes (64 elements), got 240"),
    (torch.randint(0, 5, (4, 16), dtype=torch.int32), "expected a Float32Array for float32[4, 16], got Int32Array"),
])
def test_wrong_inputs_reject_with_a_message(bad_input, expected, site, page):
    name = damaged(site, "mlp_inputs")
    result = run_in_browser(page, name, [bad_input])
    assert result.get("name") == "BundleError", result
    assert expected in result["error"], result["error"]
    assert "the program takes 1 inputs, got 0" in run_in_browser(page, name, [])["error"]


def test_demo_page_classifies_and_compares_sentences_like_the_cpu(site, browser):
    """examples/web: EfficientNet-Lite0 (real ImageNet weights) as a bundle; the page's
    self-check runs the saved input and must give the engine's and the CPU's top-5. MiniLM
    (real weights) as a bundle: the page's own WordPiece tokenizer must give transformers'
    ids, and its sentence similarities the CPU's."""
    import importlib.util

    root, url = site
    demo = root / "demo"
    (demo / "web").mkdir(parents=True)
    shutil.copy(os.path.join(REPO, "web", "player.js"), demo / "web" / "player.js")
    shutil.copytree(os.path.join(REPO, "examples", "web"), demo / "examples" / "web",
                    ignore=shutil.ignore_patterns("efficientnet", "minilm", "__pycache__"))
    spec = importlib.util.spec_from_file_location("make_bundle", os.path.join(REPO, "examples", "web", "make_bundle.py"))
    make_bundle = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_bundle)
    make_bundle.make(str(demo / "examples" / "web" / "efficientnet"))
    make_bundle.make_minilm(str(demo / "examples" / "web" / "minilm"))
    page = browser.new_page()
    page.goto(url + "/demo/examples/web/")
    page.wait_for_function("window.demoReady === true || document.getElementById('status').className === 'bad'",
                           timeout=120_000)
    assert page.evaluate("window.demoReady === true"), page.inner_text("#status")
    check = page.evaluate("window.demo.selfCheck()")
    assert check["top5"] == check["engineTop5"] == check["cpuTop5"], check
    assert check["maxDiff"] < 1e-3, check
    # A camera frame (chromium's generated test pattern): the page's input through the CPU.
    camera = page.evaluate("window.demo.classifyCamera()")
    from torch_webgpu.testing.packaged_weights import load_efficientnet_lite0
    with torch.no_grad():
        cpu_logits = load_efficientnet_lite0()(torch.tensor(camera["input"]).reshape(1, 3, 224, 224))[0]
    assert torch.tensor(camera["input"]).std() > 0.05  # a picture, not a blank frame
    torch.testing.assert_close(torch.tensor(camera["logits"]), cpu_logits, rtol=1e-3, atol=1e-3)
    assert page.evaluate("window.demo.minilmReady"), page.inner_text("#similarity-status")
    pairs = page.evaluate("window.demo.minilmCheck()")
    assert len(pairs) == 3
    for pair in pairs:
        assert pair["idsEqual"], (pair["ids"], pair["expectedIds"])
        assert abs(pair["similarity"] - pair["cpuSimilarity"]) < 1e-4, pair
        assert abs(pair["similarity"] - pair["engineSimilarity"]) < 1e-5, pair
    assert pairs[0]["cpuSimilarity"] > pairs[1]["cpuSimilarity"]  # related sentences score higher
    page.close()


def test_clis_write_the_same_bundle(site, tmp_path):
    """twgpu-run --emit-web and python -m torch_webgpu.aot web write what emit_web writes."""
    import subprocess
    import sys

    root, _ = site
    export_bundle(site, "cli_ref", mlp(), (torch.randn(4, 16),))
    prog_dir = root / "cli_ref_program"
    twgpu_run = os.environ.get("TWGPU_RUN", os.path.join(REPO, "build", "twgpu-run"))
    assert os.path.exists(twgpu_run), f"twgpu-run not found at {twgpu_run} (build it, or set TWGPU_RUN)"
    subprocess.run([twgpu_run, str(prog_dir), "--emit-web", str(tmp_path / "native")], check=True,
                   capture_output=True)
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
    subprocess.run([sys.executable, "-m", "torch_webgpu.aot", "web", str(prog_dir), str(tmp_path / "py")],
                   check=True, capture_output=True, env=env)
    for out in ("native", "py"):
        for f in ("bundle.json", "buffers.bin"):
            assert (tmp_path / out / f).read_bytes() == (root / "cli_ref" / f).read_bytes(), (out, f)


def test_a_program_without_dispatches(site, page):
    """An identity program: no step but the output read-back."""

    class Identity(nn.Module):
        def forward(self, x):
            return x

    x = torch.randn(5)
    prog = export_bundle(site, "identity", Identity(), (x,))
    manifest = json.loads((site[0] / "identity" / "bundle.json").read_text())
    assert not [s for s in manifest["steps"] if s["kind"] == "dispatch"]
    (got,) = outputs_of(run_in_browser(page, "identity", [x]), prog)
    assert np.array_equal(got, x.numpy())
