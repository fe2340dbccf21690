"""The ahead-of-time engine from Python (C++ in csrc/engine; docs/ENGINE.md).

    prog = torch_webgpu.engine.Program.load("out_dir")     # program.json + weights.bin
    (y,) = prog.run(x)                                      # numpy arrays or CPU tensors

    ctx = torch_webgpu.engine.Context()
    a = ctx.tensor("float32", [2, 2]).set_data(numpy_array)
    out = ctx.tensor("float32", [2, 2])
    ctx.record_shader("aten::add.Tensor", [a, a, 1.0], [out])
    ctx.submit(); ctx.sync()
    out.get_data()                                          # numpy array
"""
import os

import numpy as np
import torch

from . import _C

__all__ = ["Context", "Program", "Tensor", "registered_ops"]

_NUMPY = {
    "float32": np.float32, "float16": np.float16, "int64": np.int64, "int32": np.int32,
    "int16": np.int16, "int8": np.int8, "uint8": np.uint8, "bool": np.bool_,
}


def _engine():
    if not hasattr(_C, "_engine"):
        raise RuntimeError("torch_webgpu was built without the engine (needs nlohmann-json3-dev)")
    return _C._engine


def registered_ops():
    """ATen op names the engine runs."""
    return list(_engine().registered_ops())


def _dtype_name(dtype):
    if isinstance(dtype, str):
        return dtype
    if isinstance(dtype, torch.dtype):
        return str(dtype).replace("torch.", "")
    return np.dtype(dtype).name


def _as_numpy(data, dtype=None):
    """Contiguous numpy array from bytes, numpy arrays or CPU tensors."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        return np.frombuffer(data, dtype=np.uint8)
    if isinstance(data, torch.Tensor):
        if data.device.type != "cpu":
            data = data.cpu()
        data = data.detach().contiguous()
        if data.dtype == torch.bfloat16:
            return data.view(torch.int16).numpy()
        return data.numpy()
    arr = np.ascontiguousarray(data)
    if dtype is not None and dtype in _NUMPY and arr.dtype != _NUMPY[dtype]:
        raise TypeError(f"expected {dtype} data, got {arr.dtype}")
    return arr


def _raw(arr):
    """The bytes of a contiguous array as a flat uint8 array (any shape, empty included)."""
    return np.ascontiguousarray(arr).reshape(-1).view(np.uint8)


def _to_numpy(dtype, shape, raw):
    if dtype == "bfloat16":
        return torch.frombuffer(bytearray(raw), dtype=torch.bfloat16).reshape(shape)
    return np.frombuffer(raw, dtype=_NUMPY[dtype]).reshape(shape).copy()


class Tensor:
    """A device tensor of a Context."""

    def __init__(self, handle):
        self._t = handle

    @property
    def dtype(self):
        return self._t.dtype

    @property
    def shape(self):
        return tuple(self._t.shape)

    def set_data(self, data):
        """Uploads bytes, a numpy array or a CPU tensor (same dtype and size); returns self."""
        self._t.set_data(_raw(_as_numpy(data, self.dtype)))
        return self

    def get_data(self):
        """The tensor's values as a numpy array (waits for the recorded work)."""
        return _to_numpy(self.dtype, self.shape, self._t.get_data())


class Program:
    """A loaded program (validated, memory planned, weights on the device)."""

    def __init__(self, handle):
        self._p = handle

    @classmethod
    def load(cls, path_or_json, weights=None):
        """A directory with program.json (+ weights.bin), a path to program.json, or
        the JSON text itself with `weights` as bytes or a path."""
        if os.path.isdir(path_or_json):
            return cls(_engine().Program.load_dir(path_or_json))
        if os.path.isfile(path_or_json):
            with open(path_or_json) as f:
                text = f.read()
            if weights is None:
                w = os.path.join(os.path.dirname(path_or_json), "weights.bin")
                weights = w if os.path.exists(w) else b""
        else:
            text = path_or_json
        if isinstance(weights, (str, os.PathLike)):
            with open(weights, "rb") as f:
                weights = f.read()
        return cls(_engine().Program.load(text, bytes(weights or b"")))

    @property
    def input_specs(self):
        return [(d, tuple(s)) for d, s in self._p.input_specs]

    @property
    def output_specs(self):
        return [(d, tuple(s)) for d, s in self._p.output_specs]

    @property
    def launches_per_run(self):
        return self._p.launches_per_run

    def reset_state(self):
        """Puts the state tensors (buffers the program mutates, e.g. a KV cache) back to
        their exported values; runs otherwise carry them over."""
        self._p.reset_state()

    def emit_web(self, out_dir):
        """Writes the web bundle (``out_dir/bundle.json`` + ``buffers.bin``): one run's
        dispatches, copies and writes with the buffers they use, for ``web/player.js``
        (docs/ENGINE.md, "Web bundle")."""
        os.makedirs(out_dir, exist_ok=True)
        self._p.emit_web(os.fspath(out_dir))

    def run(self, *inputs):
        """Runs on numpy arrays or CPU tensors; returns numpy arrays (bfloat16: tensors)."""
        if len(inputs) != len(self.input_specs):
            raise ValueError(f"the program takes {len(self.input_specs)} inputs, got {len(inputs)}")
        return [_to_numpy(d, s, raw) for d, s, raw in self._p.run(_pack(inputs))]


def _pack(inputs):
    packed = []
    for x in inputs:
        arr = _as_numpy(x)
        packed.append((_dtype_name(x.dtype) if isinstance(x, torch.Tensor) else arr.dtype.name,
                       list(arr.shape), _raw(arr)))
    return packed


def run_web_bundle(bundle_dir, *inputs):
    """Replays a web bundle (Program.emit_web) on this device as web/player.js does in a
    browser; returns numpy arrays. On the adapter that wrote it, the outputs equal the
    engine's bit for bit."""
    return [_to_numpy(d, s, raw) for d, s, raw in _engine().run_web_bundle(os.fspath(bundle_dir), _pack(inputs))]


class Context:
    """Records ops and programs over device tensors; submit() sends them, sync() waits."""

    def __init__(self):
        self._c = _engine().Context()
        self._recorded = []  # programs recorded since the last sync stay loaded until it

    def tensor(self, dtype, shape):
        return Tensor(self._c.tensor(_dtype_name(dtype), list(shape)))

    def record_shader(self, op, args, outputs):
        """Records one ATen op (e.g. "aten::add.Tensor") over `args` (tensors of this
        context, numbers, strings, lists or None: every schema argument in order) into
        `outputs` (tensors of the result's shape and dtype)."""
        def unwrap(a):
            if isinstance(a, Tensor):
                return a._t
            if isinstance(a, (list, tuple)) and a and isinstance(a[0], Tensor):
                return [t._t for t in a]
            if isinstance(a, torch.dtype):
                return _dtype_name(a)
            return a
        self._c.record_shader(op, [unwrap(a) for a in args], [t._t for t in outputs])

    def record_program(self, prog, weights=None, tensors=()):
        """Records a program (a Program, or what Program.load takes, with `weights`) over
        `tensors`: its inputs, then its outputs. Returns the Program."""
        if not isinstance(prog, Program):
            prog = Program.load(prog, weights)
        n = len(prog.input_specs)
        tensors = list(tensors)
        self._c.record_program(prog._p, [t._t for t in tensors[:n]], [t._t for t in tensors[n:]])
        self._recorded.append(prog)
        return prog

    def submit(self):
        self._c.submit()

    def sync(self):
        self._c.sync()
        self._recorded.clear()

    @property
    def dispatches(self):
        return self._c.dispatches
