"""torch.export -> program.json + weights.bin (format: docs/ENGINE.md)."""
import json
import math
import operator
import os

import torch

from .memory_plan import plan_pools

PROGRAM_VERSION = 1        # programs without state tensors stay readable by version-1 engines
STATE_PROGRAM_VERSION = 2  # state tensors (mutated buffers): "init" on a pool tensor
WEIGHT_ALIGN = 256  # bytes between constants in weights.bin

_DTYPES = {
    torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16",
    torch.int64: "int64", torch.int32: "int32", torch.int16: "int16", torch.int8: "int8",
    torch.uint8: "uint8", torch.bool: "bool",
}


def dtype_name(dtype):
    if dtype not in _DTYPES:
        raise NotImplementedError(f"torch_webgpu.aot: dtype {dtype} is not supported by the engine")
    return _DTYPES[dtype]


def op_name(target):
    """ATen name as the engine registers it: "aten::add.Tensor", "aten::mm"."""
    schema = target._schema
    overload = schema.overload_name
    return schema.name + ("." + overload if overload else "")


def _is_view_op(target):
    # Ops whose result aliases their first argument (view, permute, expand, slice, ...):
    # the engine makes strided views of them with no memory of their own.
    returns = target._schema.returns
    return len(returns) == 1 and returns[0].alias_info is not None and not returns[0].alias_info.is_write


def _nbytes(shape, dtype):
    return math.prod(shape) * torch.empty((), dtype=dtype).element_size()


class _Builder:
    def __init__(self):
        self.values = []
        self.chain = []
        self.weights = bytearray()
        self.defined = {}   # value id -> chain index that writes it (-1: input)
        self.last_use = {}  # base value id -> last chain index that reads it or a view of it
        self.base = {}      # value id -> value id owning its memory

    def add(self, value):
        self.values.append(value)
        return len(self.values) - 1

    def tensor(self, fake, storage):
        v = {"type": "tensor", "dtype": dtype_name(fake.dtype), "shape": [int(s) for s in fake.shape]}
        v.update(storage)
        vid = self.add(v)
        self.base[vid] = vid
        return vid

    def constant(self, t):
        t = t.detach().to("cpu").contiguous()
        pad = (-len(self.weights)) % WEIGHT_ALIGN
        self.weights += b"\0" * pad
        offset = len(self.weights)
        # Raw bytes of any dtype (numpy has no bfloat16): a flat view as uint8.
        self.weights += t.reshape(-1).view(torch.uint8).numpy().tobytes()
        vid = self.tensor(t, {"constant": {"offset": offset}})
        return vid

    def state(self, t):
        """A mutated buffer: a pool tensor of its own whose first bytes are `t`'s."""
        t = t.detach().to("cpu").contiguous()
        pad = (-len(self.weights)) % WEIGHT_ALIGN
        self.weights += b"\0" * pad
        offset = len(self.weights)
        self.weights += t.reshape(-1).view(torch.uint8).numpy().tobytes()
        return self.tensor(t, {"mem": None, "init": {"offset": offset}})

    def scalar(self, x):
        if x is None or isinstance(x, (torch.device, torch.layout, torch.memory_format)):
            return self.add({"type": "none"})
        if isinstance(x, bool):
            return self.add({"type": "bool", "value": x})
        if isinstance(x, int):
            return self.add({"type": "int", "value": x})
        if isinstance(x, float):
            if math.isinf(x) or math.isnan(x):
                return self.add({"type": "float", "value": "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")})
            return self.add({"type": "float", "value": x})
        if isinstance(x, str):
            return self.add({"type": "string", "value": x})
        if isinstance(x, torch.dtype):
            return self.add({"type": "string", "value": dtype_name(x)})
        if isinstance(x, (list, tuple)) and all(isinstance(e, int) and not isinstance(e, bool) for e in x):
            return self.add({"type": "int_list", "value": list(x)})
        raise NotImplementedError(f"torch_webgpu.aot: argument {x!r} ({type(x).__name__}) cannot be exported")

    def use(self, vid, at):
        b = self.base[vid]
        self.last_use[b] = max(self.last_use.get(b, -1), at)


def program_from_exported(ep):
    """(program dict, weights bytes) for an ExportedProgram in core ATen."""
    b = _Builder()
    node_values = {}  # fx node -> value id, or tuple of ids for multi-output ops
    sig = ep.graph_signature
    # Buffers the program writes (torch.export's BUFFER_MUTATION outputs): buffer name ->
    # the node holding its new value.
    mutated = {spec.target: spec.arg.name for spec in sig.output_specs if spec.kind.name == "BUFFER_MUTATION"}
    constants = {}
    states = {}  # placeholder name -> buffer name
    for spec in sig.input_specs:
        if spec.kind.name == "BUFFER" and spec.target in mutated:
            states[spec.arg.name] = spec.target
            constants[spec.arg.name] = ep.state_dict[spec.target] if spec.target in ep.state_dict else ep.constants[spec.target]
        elif spec.kind.name in ("PARAMETER", "BUFFER"):
            constants[spec.arg.name] = ep.state_dict[spec.target] if spec.target in ep.state_dict else ep.constants[spec.target]
        elif spec.kind.name in ("CONSTANT_TENSOR",):
            constants[spec.arg.name] = ep.constants[spec.target]
    inputs = []
    for node in ep.graph.nodes:
        if node.op != "placeholder":
            continue
        if node.name in states:
            vid = b.state(constants[node.name])
            b.defined[vid] = -1
            node_values[node] = vid
        elif node.name in constants:
            node_values[node] = b.constant(constants[node.name])
        else:
            val = node.meta.get("val")
            if not isinstance(val, torch.Tensor):
                raise NotImplementedError(f"torch_webgpu.aot: input {node.name} is not a tensor")
            vid = b.tensor(val, {"mem": None})
            b.defined[vid] = -1
            inputs.append(vid)
            node_values[node] = vid

    def arg_value(x, at):
        if isinstance(x, torch.fx.Node):
            vid = node_values[x]
            b.use(vid, at)
            return vid
        if (isinstance(x, (list, tuple)) and any(isinstance(e, torch.fx.Node) for e in x)
                and all(e is None or isinstance(e, torch.fx.Node) for e in x)):
            # A tensor list; None items (Tensor?[] of index ops) are none values.
            ids = [b.scalar(None) if e is None else node_values[e] for e in x]
            for e, vid in zip(x, ids):
                if e is not None:
                    b.use(vid, at)
            return b.add({"type": "tensor_list", "items": ids})
        return b.scalar(x)

    # A buffer's new value made by index_put from the buffer alone (nothing else reads the
    # old value) is written in place: aten::index_put_ on the state tensor, output a view of
    # it. Any other new value is copied back into the buffer after the chain (aten::copy_).
    state_node = {n.name: n for n in ep.graph.nodes if n.op == "placeholder" and n.name in states}
    value_of_buffer = {mutated[buf]: state_node[ph] for ph, buf in states.items()}
    in_place = set()
    for node in ep.graph.nodes:
        buf = value_of_buffer.get(node.name)
        if (buf is not None and node.target is torch.ops.aten.index_put.default
                and node.args[0] is buf and set(buf.users) == {node}):
            in_place.add(node.name)

    for node in ep.graph.nodes:
        if node.op != "call_function":
            continue
        if node.target is operator.getitem:
            node_values[node] = node_values[node.args[0]][node.args[1]]
            continue
        if not isinstance(node.target, torch._ops.OpOverload):
            raise NotImplementedError(f"torch_webgpu.aot: {node.target} is not an ATen op")
        if not node.target._schema.returns and op_name(node.target).startswith("aten::_assert"):
            continue  # export-time metadata checks: the program's shapes are static
        at = len(b.chain)
        schema = node.target._schema
        args = []
        for i, a in enumerate(schema.arguments):
            if i < len(node.args):
                x = node.args[i]
            elif a.name in node.kwargs:
                x = node.kwargs[a.name]
            elif a.has_default_value():
                x = a.default_value
            else:
                raise NotImplementedError(f"torch_webgpu.aot: {op_name(node.target)} misses argument {a.name}")
            args.append(arg_value(x, at))
        val = node.meta["val"]
        vals = list(val) if isinstance(val, (tuple, list)) else [val]
        view = _is_view_op(node.target) or node.name in in_place
        outs = []
        for v in vals:
            if not isinstance(v, torch.Tensor):
                raise NotImplementedError(f"torch_webgpu.aot: {op_name(node.target)} returns a non-tensor")
            vid = b.tensor(v, {} if view else {"mem": None})
            if node.target is _SDPA and not v.is_contiguous():
                # The fused op writes in the meta's layout (q's dim order), so the graph's
                # later views of it (transpose, then view) need no copy.
                b.values[vid]["strides"] = list(v.stride())
            if view:
                b.base[vid] = b.base[args[0]]
            b.defined[vid] = at
            b.use(vid, at)
            outs.append(vid)
        node_values[node] = tuple(outs) if isinstance(val, (tuple, list)) else outs[0]
        name = "aten::index_put_" if node.name in in_place else op_name(node.target)
        b.chain.append({"op": name, "args": args, "outputs": outs})

    out_node = next(n for n in ep.graph.nodes if n.op == "output")
    user_outputs = []
    for spec, x in zip(sig.output_specs, out_node.args[0]):
        if spec.kind.name == "BUFFER_MUTATION":
            if x.name in in_place:
                continue
            # Written back after every read of the old value: the chain's last ops.
            at = len(b.chain)
            buf = node_values[value_of_buffer[x.name]]
            src = node_values[x]
            b.use(buf, at)
            b.use(src, at)
            view = b.add({"type": "tensor", "dtype": b.values[buf]["dtype"], "shape": b.values[buf]["shape"]})
            b.base[view] = buf
            b.defined[view] = at
            b.chain.append({"op": "aten::copy_", "args": [buf, src, b.scalar(False)], "outputs": [view]})
        elif spec.kind.name == "USER_OUTPUT":
            user_outputs.append(x)
        else:
            raise NotImplementedError(f"torch_webgpu.aot: output kind {spec.kind.name} is not supported")

    end = len(b.chain)
    outputs = []
    for x in user_outputs:
        if not isinstance(x, torch.fx.Node):
            raise NotImplementedError("torch_webgpu.aot: outputs must be tensors")
        vid = node_values[x]
        b.use(vid, end)
        outputs.append(vid)

    # Pools: every tensor with memory of its own, alive from its definition to the last
    # use of it or of a view of it.
    spans = []
    for vid, v in enumerate(b.values):
        if v.get("type") == "tensor" and "mem" in v and "init" not in v:
            nbytes = _nbytes(v["shape"], _TORCH[v["dtype"]])
            first = b.defined[vid]
            last = max(b.last_use.get(vid, first), first)
            spans.append((vid, (nbytes + 3) // 4 * 4, first, last))
    placement, sizes = plan_pools(spans)
    for vid, pool in placement.items():
        b.values[vid]["mem"] = {"pool": pool, "offset": 0}
    # A state tensor's pool holds only it: what one run leaves is the next run's start.
    state_ids = [vid for vid, v in enumerate(b.values) if v.get("type") == "tensor" and "init" in v]
    for vid in state_ids:
        b.values[vid]["mem"] = {"pool": len(sizes), "offset": 0}
        nbytes = _nbytes(b.values[vid]["shape"], _TORCH[b.values[vid]["dtype"]])
        sizes.append(max(WEIGHT_ALIGN, (nbytes + WEIGHT_ALIGN - 1) // WEIGHT_ALIGN * WEIGHT_ALIGN))
    program = {
        "version": STATE_PROGRAM_VERSION if state_ids else PROGRAM_VERSION,
        "values": b.values,
        "chain": b.chain,
        "inputIds": inputs,
        "outputIds": outputs,
        "memoryPlan": {"pools": [{"id": i, "size": s} for i, s in enumerate(sizes)]},
        "weights": {"file": "weights.bin", "size": len(b.weights)},
    }
    return program, bytes(b.weights)


_TORCH = {v: k for k, v in _DTYPES.items()}


def _check_ops(program):
    try:
        from .. import _C
        known = set(_C._engine.registered_ops())
    except (ImportError, AttributeError):
        return  # no engine in this build: twgpu-run will say what it lacks
    missing = sorted({c["op"] for c in program["chain"]} - known)
    if missing:
        raise NotImplementedError("torch_webgpu.aot: the engine has no kernel for " + ", ".join(missing))


_SDPA = torch.ops.aten.scaled_dot_product_attention.default
_SDPA_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
_SDPA_MAX_HEAD_DIM = 256  # kernels/attention.h kMaxHeadDim
# The fused kernel binds each operand whole; past the spec's default binding size (128 MiB,
# less alignment slack) the decomposition, whose ops split their work, runs everywhere.
_SDPA_MAX_OPERAND_BYTES = 120 << 20


def _sdpa_supported(node):
    """True when the engine's fused SDPA op (engine/ops/attention.cpp) runs this call: the
    cases eager's fused choice takes (ops_attention.cpp: fused_supported)."""
    names = [a.name for a in _SDPA._schema.arguments]
    args = dict(zip(names, node.args))
    args.update(node.kwargs)
    q, k, v = (args[n].meta["val"] for n in ("query", "key", "value"))
    mask = args.get("attn_mask")
    mask = mask.meta["val"] if mask is not None else None
    if args.get("dropout_p", 0.0) != 0.0 or (args.get("is_causal", False) and mask is not None):
        return False
    if q.dtype not in _SDPA_DTYPES or k.dtype != q.dtype or v.dtype != q.dtype:
        return False
    n = q.dim()
    if n not in (3, 4) or k.dim() != n or v.dim() != n:
        return False
    if n == 4 and not (k.shape[0] == v.shape[0] == q.shape[0]):
        return False
    hq, hkv, d, dv, lk = q.shape[-3], k.shape[-3], q.shape[-1], v.shape[-1], k.shape[-2]
    if v.shape[-3] != hkv or k.shape[-1] != d or v.shape[-2] != lk or lk == 0:
        return False
    if hkv != hq and not (args.get("enable_gqa", False) and hkv > 0 and hq % hkv == 0):
        return False
    if not (0 < d <= _SDPA_MAX_HEAD_DIM and 0 < dv <= _SDPA_MAX_HEAD_DIM):
        return False
    out_bytes = q.numel() // max(d, 1) * dv * q.element_size()
    if max([out_bytes] + [t.numel() * t.element_size() for t in (q, k, v, mask) if t is not None]) \
            > _SDPA_MAX_OPERAND_BYTES:
        return False
    if mask is not None:
        if mask.dtype not in (torch.bool, q.dtype):
            return False
        scores = (*q.shape[:-1], lk)
        if mask.dim() > len(scores) or any(
                m not in (1, s) for m, s in zip(reversed(mask.shape), reversed(scores))):
            return False
    return True


def _decomposition_table(ep, fuse_attention=True):
    """Core ATen, but scaled_dot_product_attention kept whole (one fused engine op) when
    the engine runs every SDPA call of the graph; else decomposed like the rest."""
    table = torch.export.default_decompositions()
    sdpa = [n for n in ep.graph.nodes if n.op == "call_function" and n.target is _SDPA]
    if fuse_attention and sdpa and all(_sdpa_supported(n) for n in sdpa):
        table.pop(_SDPA, None)
    return table


def export(model, example_inputs, out_dir, check_ops=True, web_dir=None, fuse_attention=True):
    """Exports `model` called on `example_inputs` (a tuple of CPU tensors) into out_dir
    (program.json, weights.bin); with `web_dir`, also the web bundle (export_web).
    `fuse_attention=False` decomposes scaled_dot_product_attention (for comparisons).
    Returns the program dict."""
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    ep = torch.export.export(model, tuple(example_inputs))
    ep = ep.run_decompositions(_decomposition_table(ep, fuse_attention))
    program, weights = program_from_exported(ep)
    if check_ops:
        _check_ops(program)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "program.json"), "w") as f:
        json.dump(program, f, indent=1)
    with open(os.path.join(out_dir, "weights.bin"), "wb") as f:
        f.write(weights)
    if web_dir is not None:
        export_web(out_dir, web_dir)
    return program


def export_web(program_dir, web_dir):
    """Loads the exported program in program_dir on this device and writes its web bundle
    (web_dir/bundle.json + buffers.bin, docs/ENGINE.md "Web bundle") for web/player.js.
    The WGSL follows this adapter's limits."""
    from .. import engine

    engine.Program.load(os.fspath(program_dir)).emit_web(web_dir)
