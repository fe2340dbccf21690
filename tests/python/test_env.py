"""The TORCH_WEBGPU_* environment variables, each in a fresh process (they are read once)."""
import os
import subprocess
import sys

import pytest

PROBE = """
import json, torch, torch_webgpu
out = {"available": torch.webgpu.is_available()}
if out["available"]:
    p = torch.webgpu.get_device_properties()
    out.update(backend=p.backend, compat=p.compatibility_mode, max_buffer=p.max_buffer_size,
               max_binding=p.max_storage_buffer_binding_size, subgroups=p.subgroups,
               subgroup_sizes=[p.subgroup_min_size, p.subgroup_max_size], subgroup_size=p.subgroup_size)
    y = torch.arange(1000, dtype=torch.float32, device="webgpu").reshape(10, 100)
    out["row_sums_check"] = (y.sum(1).cpu() == torch.arange(1000.0).reshape(10, 100).sum(1)).all().item()
    x = torch.arange(8, dtype=torch.float32, device="webgpu")
    out["sum_check"] = ((x * 2 + 1).cpu() == torch.arange(8) * 2 + 1).all().item()
    for _ in range(5):
        x = x + 1
    torch.webgpu.synchronize()
    out["stats"] = torch_webgpu._C.dispatch_stats()
else:
    try:
        torch.empty(1, device="webgpu")
    except RuntimeError as e:
        out["error"] = str(e)
print("RESULT" + json.dumps(out))
"""


def probe(**env):
    full = dict(os.environ, **env)
    proc = subprocess.run([sys.executable, "-c", PROBE], env=full, capture_output=True,
                          text=True, timeout=120)
    line = [l for l in proc.stdout.splitlines() if l.startswith("RESULT")]
    assert line, proc.stdout + proc.stderr
    import json
    return json.loads(line[0][len("RESULT"):]), proc.stderr


def test_default_device_works():
    out, _ = probe()
    assert out["available"] and out["sum_check"]


def test_backend_forced_to_opengl_or_reported():
    out, _ = probe(TORCH_WEBGPU_BACKEND="opengl")
    if out["available"]:
        assert out["backend"] == "opengl" and out["sum_check"]
    else:
        assert "opengl" in out["error"]


def test_unknown_backend_is_a_clear_error():
    out, _ = probe(TORCH_WEBGPU_BACKEND="bogus")
    assert not out["available"]
    assert "unknown TORCH_WEBGPU_BACKEND='bogus'" in out["error"]


def test_default_limits_are_the_spec_defaults():
    out, _ = probe(TORCH_WEBGPU_LIMITS="default")
    assert out["max_buffer"] == 268435456 and out["max_binding"] == 134217728
    assert out["sum_check"]


def test_compat_mode_is_reported():
    out, _ = probe(TORCH_WEBGPU_COMPAT="1")
    assert out["compat"] is True and out["sum_check"]


def test_force_fallback_adapter_names_the_variable():
    out, _ = probe(TORCH_WEBGPU_FORCE_FALLBACK_ADAPTER="1")
    if not out["available"]:
        assert "TORCH_WEBGPU_FORCE_FALLBACK_ADAPTER=1" in out["error"]
    else:
        assert out["sum_check"]


def test_debug_logs_adapter_and_device():
    out, err = probe(TORCH_WEBGPU_DEBUG="1")
    assert "[torch_webgpu] adapter:" in err and "[torch_webgpu] device:" in err


def test_dump_shaders_writes_wgsl(tmp_path):
    out, _ = probe(TORCH_WEBGPU_DUMP_SHADERS=str(tmp_path))
    files = list(tmp_path.glob("*.wgsl"))
    assert files and any("@compute" in f.read_text() for f in files)


def test_max_batch_bounds_dispatches_per_submit():
    one, _ = probe(TORCH_WEBGPU_MAX_BATCH="1")
    many, _ = probe(TORCH_WEBGPU_MAX_BATCH="256")
    assert one["stats"]["submits"] >= one["stats"]["dispatches"]
    assert many["stats"]["submits"] < one["stats"]["submits"]


@pytest.mark.parametrize("toggles", ["skip_validation,disable_robustness", "-lazy_clear_resource_on_first_use",
                                     "no_such_toggle", "allow_unsafe_apis"])
def test_dawn_toggles_keep_ops_correct(toggles):
    # Turning Dawn's safety nets off (or naming a toggle it lacks) changes speed, never results.
    # Enabled names also go to the instance and adapter (allow_unsafe_apis acts there).
    out, _ = probe(TORCH_WEBGPU_DAWN_TOGGLES=toggles)
    assert out["available"] and out["sum_check"]
    assert out["stats"]["dispatches"] >= 5


GRAPH_PROBE = """
import json, torch, torch_webgpu
x = torch.arange(64, dtype=torch.float32, device="webgpu")
g = torch.webgpu.WebGPUGraph()
torch.webgpu.synchronize()
with torch.webgpu.graph(g):
    y = x
    for _ in range(40):
        y = y * 1.5 - 0.25
x.copy_(torch.arange(64, dtype=torch.float32).flip(0))
g.replay()
z = torch.arange(64, dtype=torch.float32).flip(0)
for _ in range(40):
    z = z * 1.5 - 0.25
print("RESULT" + json.dumps({"close": torch.allclose(y.cpu(), z, rtol=1e-5),
                             "dispatches": g.num_dispatches()}))
"""


@pytest.mark.parametrize("first", ["1", "16", "4096", "0", "many"])
def test_replay_first_batch_keeps_results(first):
    # Any first-submit size (out-of-range values keep the default) replays the same work.
    full = dict(os.environ, TORCH_WEBGPU_REPLAY_FIRST_BATCH=first)
    proc = subprocess.run([sys.executable, "-c", GRAPH_PROBE], env=full, capture_output=True,
                          text=True, timeout=120)
    line = [l for l in proc.stdout.splitlines() if l.startswith("RESULT")]
    assert line, proc.stdout + proc.stderr
    import json
    out = json.loads(line[0][len("RESULT"):])
    assert out["close"] and out["dispatches"] >= 40


def test_subgroups_switch():
    """Kernels assume a subgroup size only where the adapter has subgroups of one size;
    TORCH_WEBGPU_SUBGROUPS=0 turns them off (reductions still right either way)."""
    on, _ = probe()
    assert on["row_sums_check"]
    lo, hi = on["subgroup_sizes"]
    if on["subgroups"] and lo == hi and lo >= 4:
        assert on["subgroup_size"] == lo
    else:
        assert on["subgroup_size"] == 0
    off, _ = probe(TORCH_WEBGPU_SUBGROUPS="0")
    assert off["subgroup_size"] == 0 and off["row_sums_check"]
