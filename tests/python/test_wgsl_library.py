"""The WGSL library embedded in the extension is byte for byte csrc/kernels/wgsl/*.wgsl."""
import pathlib

import torch_webgpu

WGSL_DIR = pathlib.Path(__file__).resolve().parents[2] / "csrc" / "kernels" / "wgsl"


def test_embedded_library_equals_source_files():
    embedded = torch_webgpu._C._wgsl_library()
    on_disk = {p.stem: p.read_text() for p in WGSL_DIR.glob("*.wgsl")}
    assert sorted(embedded) == sorted(on_disk)
    for name, text in on_disk.items():
        assert embedded[name] == text, f"{name}.wgsl differs from the embedded copy: rebuild"


def test_library_order_puts_dependencies_first():
    # Kernels include files in this order; special and complex build on elementary.
    names = list(torch_webgpu._C._wgsl_library())
    assert names[:3] == ["float", "int64", "math"]
    assert names.index("elementary") < names.index("special")
    assert names.index("elementary") < names.index("complex")


def test_every_library_function_is_defined_once():
    # One flat namespace: a duplicated `fn name(` across files would fail every kernel.
    import re

    seen = {}
    for name, text in torch_webgpu._C._wgsl_library().items():
        for fn in re.findall(r"^fn (\w+)\(", text, re.M):
            assert fn not in seen, f"fn {fn} defined in {seen[fn]}.wgsl and {name}.wgsl"
            seen[fn] = name
    assert "i64_div_floor" in seen and "c64_mul" in seen and "pow_f32" in seen
