"""Kernels read their uniforms by name: no numbered uniform words left in the kernel
sources, and a WGSL kernel's uniform names are checked (reserved or undeclared names fail
with a clear error, types take part in the kernel's identity)."""
import pathlib
import re

import pytest
import torch

from torch_webgpu.compiler.kernel import TensorArg, WGSLKernel

ROOT = pathlib.Path(__file__).resolve().parents[2]
# `uw(<digit>`: a frame or family word by number; pu/pf/pi: the nn frame's old numbered
# parameters (not as the tail of another name such as clampi).
NUMBERED = re.compile(r"\buw\(\s*\d|(?<![A-Za-z0-9_])p[ufi]\(")


def kernel_sources():
    return sorted((ROOT / "csrc" / "kernels").glob("*.cpp")) + [ROOT / "csrc" / "aten" / "python_wgsl.cpp"]


def test_no_numbered_uniforms_in_kernel_sources():
    sources = kernel_sources()
    assert len(sources) > 20
    found = []
    for path in sources:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if NUMBERED.search(line):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not found, "numbered uniforms left:\n" + "\n".join(found)


def test_the_scan_finds_numbered_reads():
    for line in ['"  let n = uw(4u);"', '"let x = pu(3u);"', "pf(0u) * v", "+ pi(7u + j)"]:
        assert NUMBERED.search(line), line
    for line in ["clampi(i, 0u)", "u.pitch", "frame_count()", "u_sizes(d)"]:
        assert not NUMBERED.search(line), line


def test_wgsl_kernel_reading_an_undeclared_uniform_fails_by_name():
    kernel = WGSLKernel("store_o(idx, f32(n) + u.missing);",
                        [TensorArg("o", torch.float32, "read_write")], [("n", "u32")])
    out = torch.empty(4, device="webgpu")
    with pytest.raises(RuntimeError, match="reads uniform u.missing that it does not declare"):
        kernel(out, grid=4, n=1)


@pytest.mark.parametrize("name", ["u", "frame", "tensor_offsets", "check_codes", "2x", "a.b", ""])
def test_wgsl_kernel_refuses_reserved_and_invalid_uniform_names(name):
    with pytest.raises(ValueError, match="uniform name"):
        WGSLKernel("store_o(idx, 1.0);", [TensorArg("o", torch.float32, "read_write")], [(name, "u32")])


def test_wgsl_kernel_refuses_a_repeated_uniform_name():
    with pytest.raises(ValueError, match="repeated"):
        WGSLKernel("store_o(idx, 1.0);", [TensorArg("o", torch.float32, "read_write")],
                   [("n", "u32"), ("n", "f32")])


def test_wgsl_kernel_uniform_types_are_part_of_its_identity():
    body = "store_o(idx, f32(v));"
    as_int = WGSLKernel(body, [TensorArg("o", torch.float32, "read_write")], [("v", "i32")])
    as_float = WGSLKernel(body, [TensorArg("o", torch.float32, "read_write")], [("v", "f32")])
    assert as_int.handle != as_float.handle
    out = torch.empty(3, device="webgpu")
    as_int(out, grid=3, v=-5)
    assert out.cpu().tolist() == [-5.0] * 3
    as_float(out, grid=3, v=2.5)
    assert out.cpu().tolist() == [2.5] * 3
    assert "let v = u.v;" in as_float.source
