"""ExecuTorch .pte -> program.json + weights.bin (docs/ENGINE.md, "From an ExecuTorch .pte").

The .pte is read with ExecuTorch's own deserializer (PyPI `executorch`, installed with
--no-deps next to our torch by scripts/setup.sh). Its lifetimes are kept, its arena
offsets are not (see _replan): tensors are re-placed one per pool at a time. Its
out-variant kernel calls (`aten::add.out(self, other, alpha, out)`) become the functional
ops the engine registers (`aten::add.Tensor`, the out tensors as outputs); `*_copy` ops
become the view ops that copy into their output's memory. Tensors that ExecuTorch aliases
with no instruction (views folded into the plan) become `aten::view` of the tensor that
last wrote those bytes. Only portable (non-delegated), statically shaped programs convert.
"""
import json
import os

import torch

from .exporter import PROGRAM_VERSION, WEIGHT_ALIGN, _check_ops
from .memory_plan import plan_pools

# ExecuTorch's ScalarType enum (c10's numbering).
_SCALAR_TYPES = {0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16",
                 6: "float32", 11: "bool", 15: "bfloat16"}
_ELEMENT_SIZE = {"uint8": 1, "int8": 1, "int16": 2, "int32": 4, "int64": 8, "float16": 2,
                 "float32": 4, "bool": 1, "bfloat16": 2}


class PteError(ValueError):
    """A .pte this converter cannot read or convert; the message says what and where."""


def _deserialize(data):
    try:
        from executorch.exir._serialize._program import deserialize_pte_binary
    except ImportError as e:
        raise ImportError("convert_pte needs PyPI executorch: `pip install --no-deps executorch==1.5.1 "
                          "ruamel.yaml==0.19.1 flatbuffers==25.12.19 tabulate==0.10.0` "
                          "(or `bash scripts/setup.sh`)") from e
    if len(data) < 8 or data[4:6] != b"ET":
        raise PteError(f"not an ExecuTorch .pte (file identifier {bytes(data[4:8])!r}, expected b'ET..')")
    try:
        return deserialize_pte_binary(bytes(data)).program
    except Exception as e:  # the flatbuffer reader raises anything on a damaged file
        raise PteError(f"cannot read the .pte (truncated or damaged?): {type(e).__name__}: {e}") from e


def _functional(name, overload):
    """(engine op name, schema of the out variant, its out argument names) for an ExecuTorch
    operator such as ("aten::add", "out")."""
    ns, _, op = name.partition("::")
    try:
        out_op = getattr(getattr(getattr(torch.ops, ns), op), overload or "default")
    except AttributeError:
        raise PteError(f"operator {name}.{overload} is not an op this torch knows")
    schema = out_op._schema
    outs = [a.name for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write]
    ins = [a for a in schema.arguments if a.name not in outs]
    if not outs:
        raise PteError(f"operator {name}.{overload} is not an out variant")
    packet = getattr(getattr(torch.ops, ns), op)
    key = [(a.name, str(a.type)) for a in ins]
    for ov in packet.overloads():
        s = getattr(packet, ov)._schema
        if s.is_mutable or ov == overload:
            continue
        if [(a.name, str(a.type)) for a in s.arguments] == key:
            fname = s.name + ("." + ov if ov != "default" else "")
            return fname, schema, outs
    raise PteError(f"operator {name}.{overload} has no functional form with the same arguments")


def _replan(values, chain, inputs, outputs):
    """Pools for the converted chain: ExecuTorch's lifetimes (each tensor from the call that
    writes it to the last read of it or of a view of it), one tensor per pool at a time.
    ExecuTorch's arena offsets cannot be kept: its tensors share one buffer, and WebGPU
    refuses a dispatch that binds one buffer both read-only and writable."""
    base = {}
    defined = {t: -1 for t in inputs}
    last = {}
    for at, c in enumerate(chain):
        for a in c["args"]:
            items = values[a]["items"] if values[a].get("type") == "tensor_list" else [a]
            for x in items:
                if values[x].get("type") == "tensor":
                    b = base.get(x, x)
                    last[b] = max(last.get(b, -1), at)
        for o in c["outputs"]:
            if "mem" not in values[o]:
                base[o] = base.get(c["args"][0], c["args"][0])
            defined.setdefault(o, at)
    for o in outputs:
        b = base.get(o, o)
        last[b] = len(chain)
    spans = []
    for t, v in enumerate(values):
        if v.get("type") == "tensor" and "mem" in v and t in defined:
            nbytes = _ELEMENT_SIZE[v["dtype"]]
            for d in v["shape"]:
                nbytes *= d
            spans.append((t, (nbytes + 3) // 4 * 4, defined[t], max(last.get(t, defined[t]), defined[t])))
    placement, sizes = plan_pools(spans)
    for t, pool in placement.items():
        values[t]["mem"] = {"pool": pool, "offset": 0}
    for t, v in enumerate(values):
        if v.get("type") == "tensor" and "mem" in v and t not in defined:
            values[t] = {"type": "none"}  # a folded view's bytes, read through its aten::view
    return [{"id": i, "size": s} for i, s in enumerate(sizes)]


def _registered_ops():
    try:
        from .. import _C
        return _C._engine.registered_ops()
    except (ImportError, AttributeError):
        return []


def convert_pte(path, out_dir, check_ops=True):
    """Converts the ExecuTorch program at `path` (.pte, from `to_edge(...).to_executorch()`)
    into out_dir (program.json + weights.bin). Returns the program dict."""
    with open(path, "rb") as f:
        data = f.read()
    program = _deserialize(data)
    if len(program.execution_plan) != 1:
        raise PteError(f"the .pte has {len(program.execution_plan)} execution plans; one (forward) is supported")
    plan = program.execution_plan[0]
    if plan.delegates:
        raise PteError("the .pte holds delegated (backend) calls; only portable ops convert")
    if len(plan.chains) != 1:
        raise PteError(f"the plan has {len(plan.chains)} chains; one is supported")
    et_values = plan.values
    values, weights = [], bytearray()
    vid = {}          # ExecuTorch value index -> our value id (tensors and scalars)
    memory = {}       # our tensor id -> (pool, offset, nbytes)

    def add(v):
        values.append(v)
        return len(values) - 1

    def tensor_value(i, view=False):
        t = et_values[i].val
        if type(t).__name__ != "Tensor":
            raise PteError(f"values[{i}] is a {type(t).__name__}, a tensor is needed")
        dtype = _SCALAR_TYPES.get(int(t.scalar_type))
        if dtype is None:
            raise PteError(f"values[{i}]: scalar type {t.scalar_type} is not supported")
        if list(t.dim_order) != list(range(len(t.sizes))):
            raise PteError(f"values[{i}]: dim order {list(t.dim_order)} (not contiguous) is not supported")
        if int(t.shape_dynamism) != 0:
            raise PteError(f"values[{i}]: dynamic shapes are not supported")
        shape = [int(s) for s in t.sizes]
        nbytes = _ELEMENT_SIZE[dtype]
        for s in shape:
            nbytes *= s
        v = {"type": "tensor", "dtype": dtype, "shape": shape}
        if view:
            return add(v)
        if t.allocation_info is not None:
            a = t.allocation_info
            offset = int(a.memory_offset_low) + (int(a.memory_offset_high) << 32)
            v["mem"] = {"pool": int(a.memory_id), "offset": offset}
            out = add(v)
            memory[out] = (int(a.memory_id), offset, nbytes)
            return out
        if t.data_buffer_idx > 0:
            if t.data_buffer_idx >= len(program.constant_buffer):
                raise PteError(f"values[{i}]: constant buffer {t.data_buffer_idx} is missing")
            raw = program.constant_buffer[t.data_buffer_idx].storage
            if len(raw) < nbytes:
                raise PteError(f"values[{i}]: constant buffer {t.data_buffer_idx} holds {len(raw)} bytes, "
                               f"{dtype}{shape} needs {nbytes}")
            weights.extend(b"\0" * ((-len(weights)) % WEIGHT_ALIGN))
            v["constant"] = {"offset": len(weights)}
            weights.extend(raw[:nbytes])
            return add(v)
        raise PteError(f"values[{i}]: a tensor with neither memory nor constant data is not supported")

    def value(i, schema_type=None):
        if i in vid:
            return vid[i]
        if not 0 <= i < len(et_values):
            raise PteError(f"value index {i} is out of range ({len(et_values)} values)")
        e = et_values[i].val
        kind = type(e).__name__
        if kind == "Tensor":
            out = tensor_value(i)
        elif kind == "Int":
            if schema_type is not None and "ScalarType" in schema_type:
                name = _SCALAR_TYPES.get(int(e.int_val))
                if name is None:
                    raise PteError(f"values[{i}]: dtype {e.int_val} is not supported")
                return add({"type": "string", "value": name})
            if schema_type is not None and any(k in schema_type for k in ("Layout", "Device", "MemoryFormat")):
                return add({"type": "none"})
            out = add({"type": "int", "value": int(e.int_val)})
        elif kind == "Double":
            x = float(e.double_val)
            out = add({"type": "float", "value": x if x == x and abs(x) != float("inf") else
                       ("nan" if x != x else ("inf" if x > 0 else "-inf"))})
        elif kind == "Bool":
            out = add({"type": "bool", "value": bool(e.bool_val)})
        elif kind == "String":
            out = add({"type": "string", "value": e.string_val})
        elif kind == "Null":
            out = add({"type": "none"})
        elif kind == "IntList":
            out = add({"type": "int_list", "value": [int(et_values[k].val.int_val) for k in e.items]})
        else:
            raise PteError(f"values[{i}]: {kind} values are not supported")
        vid[i] = out
        return out

    known = set(_registered_ops())
    chain = []
    defined = set()   # our tensor ids written so far (inputs, constants, op outputs)
    last_writer = {}  # (pool, offset) -> our tensor id that last wrote there

    def read(i, schema_type=None):
        if 0 <= i < len(et_values) and type(et_values[i].val).__name__ in ("TensorList", "OptionalTensorList"):
            items = [add({"type": "none"}) if k < 0 else read(k) for k in et_values[i].val.items]
            return add({"type": "tensor_list", "items": items})
        out = value(i, schema_type)
        v = values[out]
        if v.get("type") == "tensor" and "mem" in v and out not in defined:
            # ExecuTorch folded a view into the plan: these bytes are another tensor's.
            pool, offset, _ = memory[out]
            src = last_writer.get((pool, offset))
            if src is None:
                raise PteError(f"values[{i}] is read before anything writes it")
            alias = add({"type": "tensor", "dtype": v["dtype"], "shape": v["shape"]})
            chain.append({"op": "aten::view", "args": [src, add({"type": "int_list", "value": v["shape"]})],
                          "outputs": [alias]})
            vid[i] = alias
            defined.add(alias)
            return alias
        return out

    inputs = []
    for i in plan.inputs:
        t = value(i)
        if "mem" not in values[t]:
            raise PteError(f"input values[{i}] is not memory planned")
        inputs.append(t)
        defined.add(t)
        pool, offset, _ = memory[t]
        last_writer[(pool, offset)] = t
    for k, ins in enumerate(plan.chains[0].instructions):
        call = ins.instr_args
        if type(call).__name__ != "KernelCall":
            raise PteError(f"instruction {k}: {type(call).__name__} is not supported (only kernel calls)")
        if not 0 <= call.op_index < len(plan.operators):
            raise PteError(f"instruction {k}: operator index {call.op_index} is out of range")
        op = plan.operators[call.op_index]
        where = f"instruction {k} ({op.name}.{op.overload})"
        if op.name == "executorch_prim::et_view":
            src, size = read(call.args[0]), value(call.args[1])
            out = tensor_value(call.args[2], view=True)
            chain.append({"op": "aten::view", "args": [src, size], "outputs": [out]})
            vid[call.args[2]] = out
            defined.add(out)
            continue
        fname, schema, out_names = _functional(op.name, op.overload)
        n_in = len(schema.arguments) - len(out_names)
        if len(call.args) < len(schema.arguments):
            raise PteError(f"{where}: {len(call.args)} arguments, the schema has {len(schema.arguments)}")
        in_types = [str(a.type) for a in schema.arguments if a.name not in out_names]
        args = [read(call.args[j], in_types[j]) for j in range(n_in)]
        outs = [value(call.args[j]) for j in range(n_in, len(schema.arguments))]
        for o in outs:
            if "mem" not in values[o]:
                raise PteError(f"{where}: output is not memory planned")
            defined.add(o)
            pool, offset, _ = memory[o]
            last_writer[(pool, offset)] = o
        # *_copy ops (permute_copy, view_copy, ...) are the engine's view ops, which copy
        # into an output that has memory.
        base, dot, ov = fname.partition(".")
        if base.endswith("_copy") and fname not in known and base[:-5] + dot + ov in known:
            fname = base[:-5] + dot + ov
        chain.append({"op": fname, "args": args, "outputs": outs})
    outputs = [read(i) for i in plan.outputs]
    pools = _replan(values, chain, inputs, outputs)
    prog = {
        "version": PROGRAM_VERSION,
        "values": values,
        "chain": chain,
        "inputIds": inputs,
        "outputIds": outputs,
        "memoryPlan": {"pools": pools},
        "weights": {"file": "weights.bin", "size": len(weights)},
        "source": {"format": "executorch .pte",
                   "arenaBytes": [int(x) for x in plan.non_const_buffer_sizes]},
    }
    if check_ops:
        _check_ops(prog)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "program.json"), "w") as f:
        json.dump(prog, f, indent=1)
    with open(os.path.join(out_dir, "weights.bin"), "wb") as f:
        f.write(weights)
    return prog
