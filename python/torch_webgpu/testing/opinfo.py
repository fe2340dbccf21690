"""PyTorch's OpInfo database as the reference test suite of the ``webgpu`` device.

For one OpInfo entry, one dtype, one mode and one check this module runs every sample
input the entry generates on the webgpu device and on the CPU and compares the results.
The pytest harness (``tests/opinfo``) and the report
(``python -m torch_webgpu.testing.opinfo_report``) both call :func:`run_op`.

Modes:

- ``fallback`` (mode A): ops without a native kernel go through the CPU fallback. Every
  sample also records which ops went through the fallback (``_C.fallback_ops_seen``),
  so a passing sample is either *native* or *fallback-only*.
- ``native`` (mode B): ``TORCH_WEBGPU_DISABLE_CPU_FALLBACK=1`` while the device runs, so
  any op without a native kernel raises ``NotImplementedError``.
- ``compile``: the device side runs the op through ``torch.compile`` (Inductor's WGSL
  generator; static shapes, Dynamo reset per op, the CPU fallback allowed) and must match
  eager on the CPU; its backward check differentiates the compiled function (AOTAutograd
  compiles the backward graph with Inductor too). Not among the default ``MODES``: it has
  its own expected-failure file (``tests/opinfo/expected_failures_compile.txt``) and is
  selected with ``--opinfo-modes=compile``.

Checks:

- ``forward``: ``op.sample_inputs('cpu', dtype, requires_grad=False)``; the outputs
  (after the sample's ``output_process_fn_grad``, as PyTorch's ``test_compare_cpu`` does)
  must match the CPU's: same types and structure, tensors on the webgpu device with the
  CPU's dtype and shape and values within the dtype's tolerance (``assert_close``,
  ``equal_nan=True``). Where the CPU raises, the device must raise the same exception type.
- ``backward`` (float32, ``op.supports_autograd``):
  ``op.sample_inputs('cpu', float32, requires_grad=True)``; the gradients of the sum of
  the float outputs that require grad with respect to every input that requires grad
  (``torch.autograd.grad`` with all-ones output gradients) must match the CPU's.

Each sample is copied to the device with its exact layout (sizes, strides, storage offset,
and aliasing between the sample's tensors); the CPU reference runs on a CPU copy of the
same sample. Random ops see the same seed on both sides (``torch.manual_seed`` seeds the
webgpu generator, whose CPU twin is the CPU's mt19937), so fallback results compare; ops
with native random kernels draw from the device's own Philox stream, so for those
(``RANDOM_OUTPUT_OPS``, and the dropout samples of ``RANDOM_OUTPUT_SAMPLES``) only types,
dtypes, shapes and devices are compared.

Guards: a sample with a tensor of more than ``MAX_NUMEL`` elements is skipped; a sample
that runs longer than ``SAMPLE_BUDGET_S`` is interrupted (where Python regains control)
and fails as a timeout; after ``OP_BUDGET_S`` seconds the remaining samples of the op are
skipped and the op fails as a timeout. A hang inside C++ cannot be interrupted here: the
pytest harness adds a hard per-test limit that exits the worker process, the report runs
ops in worker processes it can kill.
"""
from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
import re
import signal
import threading
import time
import unittest
from typing import Iterable, Optional

import torch

DEVICE = "webgpu"

# The dtypes the device computes on (float64/complex compute on the CPU by design).
DTYPES = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "int64": torch.int64,
    "int32": torch.int32,
    "int16": torch.int16,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "bool": torch.bool,
}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}

MODES = ("fallback", "native")
COMPILE_MODE = "compile"
ALL_MODES = MODES + (COMPILE_MODE,)
CHECKS = ("forward", "backward")

# (rtol, atol) by the dtype of the compared result. float32: a little looser than
# assert_close's default (1.3e-6, 1e-5) since GPU transcendental functions are a few ulp
# off the CPU's; half types as PyTorch's own test precisions (test_ops' test_compare_cpu
# itself uses 1e-3 for everything). Integers and bool: exact.
TOLERANCES = {
    torch.float32: (1e-5, 1e-5),
    torch.float16: (1e-3, 1e-3),
    torch.bfloat16: (1.6e-2, 1e-2),
    torch.float64: (1e-7, 1e-7),
    torch.complex64: (1e-5, 1e-5),
    torch.complex128: (1e-7, 1e-7),
}
# Gradients go through more ops (and reductions): ten times looser.
GRAD_TOLERANCE_SCALE = 10.0


def _env_number(name, default, kind=float):
    value = os.environ.get(name)
    return kind(value) if value else default


MAX_NUMEL = _env_number("TORCH_WEBGPU_OPINFO_MAX_NUMEL", 1 << 20, int)
SAMPLE_BUDGET_S = _env_number("TORCH_WEBGPU_OPINFO_SAMPLE_BUDGET", 30.0)
OP_BUDGET_S = _env_number("TORCH_WEBGPU_OPINFO_OP_BUDGET", 180.0)

# Ops whose outputs are uninitialized memory: only their types, dtypes, shapes and devices
# are compared.
UNINITIALIZED_OUTPUT_OPS = {"empty", "empty_like", "empty_strided", "empty_permuted",
                            "new_empty", "new_empty_strided"}

# Ops whose outputs are random draws: native kernels use the device's Philox stream, not the
# CPU's mt19937, so only their types, dtypes, shapes and devices are compared.
RANDOM_OUTPUT_OPS = {"bernoulli", "normal", "uniform", "randint", "randn", "rand", "randperm",
                     "multinomial", "nn.functional.dropout", "nn.functional.dropout2d",
                     "nn.functional.dropout3d", "nn.functional.alpha_dropout",
                     "nn.functional.feature_alpha_dropout", "exponential", "geometric",
                     "log_normal", "cauchy", "rand_like", "randn_like", "randint_like",
                     "nn.functional.rrelu",
                     # (their pooling regions come from random samples drawn on the device)
                     "nn.functional.fractional_max_pool2d", "nn.functional.fractional_max_pool3d"}



def _attention_dropout(sample, position: int) -> bool:
    p = sample.kwargs.get("dropout_p", sample.args[position] if len(sample.args) > position else 0)
    return bool(p) and sample.kwargs.get("training", True)


# Ops whose outputs are random draws for some samples only: attention with dropout (its
# mask comes from the device's Philox stream), compared like RANDOM_OUTPUT_OPS there.
RANDOM_OUTPUT_SAMPLES = {
    # sdpa(query, key, value, attn_mask=None, dropout_p=0.0, ...): sample.args = key, value, ...
    "nn.functional.scaled_dot_product_attention": lambda s: _attention_dropout(s, 3),
    # multi_head_attention_forward(query, key, value, embed_dim, num_heads, in_proj_weight,
    # in_proj_bias, bias_k, bias_v, add_zero_attn, dropout_p, ..., training=True)
    "nn.functional.multi_head_attention_forward": lambda s: _attention_dropout(s, 9),
}


def random_output(op, sample) -> bool:
    """True when `sample` of `op` draws random numbers into its output."""
    if op.name in RANDOM_OUTPUT_OPS:
        return True
    rule = RANDOM_OUTPUT_SAMPLES.get(op.name)
    return bool(rule and rule(sample))


# Ops whose samples carry integer tensors in `args` that PyTorch requires on the CPU (the
# samples are made the same way on CUDA): those stay on the CPU.
CPU_INDEX_ARG_OPS = {"tensor_split"}

# Causes of failures that were investigated by hand (the harness cannot tell them), by op
# id; appended to the generated reason. Keep each to one short sentence.
KNOWN_CAUSES = {
    "div.trunc_rounding": "the CPU's vectorized half kernel truncates the quotient rounded to "
                          "half (139 for -8.4765625/-0.0610046), its scalar path and webgpu the "
                          "exact one (138)",
    "div.floor_rounding": "the CPU's vectorized half kernel rounds the quotient to half before "
                          "flooring; its scalar path and webgpu floor the exact one",
    "floor_divide": "the CPU's vectorized half kernel rounds the quotient to half before "
                    "flooring; its scalar path and webgpu floor the exact one",
    "addr": "composite math_addr on the device rounds mul/outer/add to half separately",
    "native_layer_norm": "device runs the composite math_native_layer_norm (batch_norm based; "
                         "float32 mean/rstd for half inputs)",
    "nn.functional.layer_norm": "device runs the composite math_native_layer_norm",
    "native_group_norm": "device runs the composite math_group_norm (var_mean, half rounding)",
    "nn.functional.group_norm": "device runs the composite math_group_norm (var_mean, half rounding)",
    "nn.functional.scaled_dot_product_attention": "device runs its fused kernel (inference) or the "
                                                  "math SDPA decomposition (gradients, dropout), the "
                                                  "CPU its flash kernel: float32 sums differ by "
                                                  "about 1e-5",
    "nn.functional.multi_head_attention_forward": "device runs the math SDPA decomposition, the "
                                                  "CPU its flash kernel (online softmax): float32 "
                                                  "sums differ by about 1e-5",
    "nn.functional.conv_transpose3d": "the CPU computes a GEMM into a column buffer of the input "
                                      "dtype, then col2vol adds the columns: another summation "
                                      "order and intermediate rounding",
}
# The same for the compile mode (torch.compile's own behaviour, not our kernels').
_EMPTY_WELFORD = "Inductor folds the Welford reduction of an empty tensor to mean 0 (eager: NaN)"
COMPILE_KNOWN_CAUSES = {
    "addr": "Inductor's addr decomposition multiplies NaN/inf inputs by beta = alpha = 0; "
            "eager skips them",
    "var_mean": _EMPTY_WELFORD, "var_mean.unbiased": _EMPTY_WELFORD,
    "std_mean": _EMPTY_WELFORD, "std_mean.unbiased": _EMPTY_WELFORD,
}
# Gradients through torch.compile: causes in Inductor's own backward lowerings (the same
# gradients come out of torch.compile on the CPU).
_CEIL_MODE_AVG_POOL = ("Inductor's avg_pool backward divides a ceil_mode window that ends past the "
                       "input by the full window, eager by its clipped size (torch.compile on the "
                       "CPU gives the same gradient)")
# Kernels past the storage-binding limit: fusions are capped by WebGPUScheduling.can_fuse,
# but one lowered node (a pointwise cat, a decomposition's inlined pointwise chain) reading
# more buffers is not split.
_TOO_MANY_BINDINGS = ("a generated kernel binds 11 or 12 storage buffers, past the 10 a WebGPU "
                      "shader stage may have on this adapter")
COMPILE_BACKWARD_KNOWN_CAUSES = {
    "nn.functional.avg_pool1d": _CEIL_MODE_AVG_POOL,
    "nn.functional.avg_pool3d": _CEIL_MODE_AVG_POOL,
    "native_group_norm": _TOO_MANY_BINDINGS,
    "nn.functional.interpolate.trilinear": _TOO_MANY_BINDINGS,
    "ormqr": _TOO_MANY_BINDINGS,
    "grid_sampler_2d": _TOO_MANY_BINDINGS,
    "linalg.householder_product": _TOO_MANY_BINDINGS,
    "masked.cumprod": "our WGSL generator compares two bools with '>' in its backward kernel "
                      "(WGSL has no such overload)",
    "linalg.norm.subgradients_at_zero": "the same samples fail the eager backward check "
                                        "(expected_failures.txt): the norm's subgradient at 0",
    "nn.functional.grid_sample": _TOO_MANY_BINDINGS,
    "nn.functional.embedding_bag": "with include_last_offset, PyTorch's meta kernel of "
                                   "_embedding_bag gives offset2bag and bag_size other shapes "
                                   "than its CPU kernel (which ours matches); Inductor asserts "
                                   "the meta's",
    "nn.functional.avg_pool2d": "Inductor's avg_pool2d_backward lowering asserts two paddings; "
                                "these samples pass one, which eager accepts",
}
for _cast in ("byte", "char", "short", "int"):
    KNOWN_CAUSES[_cast] = ("float to int32 is undefined out of range: x86 gives INT_MIN (then "
                           "wraps to 0), WGSL saturates to 2147483520 (wraps to 128/-128)")
# The test of PyTorch's test_ops.py whose skips, expected failures and tolerance
# overrides describe "compare this device with the CPU".
_OPINFO_TEST = ("TestCommon", "test_compare_cpu")


# ---- the database ---------------------------------------------------------------------


def load_op_db() -> list:
    """PyTorch's ``op_db`` (imports ``torch.testing._internal``, which needs expecttest)."""
    try:
        from torch.testing._internal.common_methods_invocations import op_db
    except ModuleNotFoundError as e:  # pragma: no cover - environment problem
        if e.name == "expecttest":
            raise ModuleNotFoundError(
                "torch.testing._internal needs the 'expecttest' package: pip install expecttest"
            ) from e
        raise
    # op_db is a large, long-lived object graph: keep the cycle collector off it, so the
    # collections between ops stay cheap.
    gc.freeze()
    return op_db


def op_id(op) -> str:
    """``name`` or ``name.variant_test_name``: unique over op_db."""
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def op_variant(op) -> str:
    return op.variant_test_name or "-"


def select_ops(names: Optional[Iterable[str]] = None) -> list:
    """OpInfo entries by op id or by name (a name selects all its variants)."""
    db = load_op_db()
    if not names:
        return list(db)
    wanted = [n.strip() for n in names if n.strip()]
    chosen, unknown = [], []
    for name in wanted:
        hits = [op for op in db if op_id(op) == name] or [op for op in db if op.name == name]
        if not hits:
            unknown.append(name)
        chosen.extend(op for op in hits if op not in chosen)
    if unknown:
        raise ValueError(f"no OpInfo entry named {', '.join(unknown)}")
    return chosen


def op_dtypes(op, dtypes: Optional[Iterable[torch.dtype]] = None) -> list:
    """The dtypes of ``dtypes`` (default: all of DTYPES) that ``op`` supports on the CPU."""
    supported = op.supported_dtypes("cpu")
    return [d for d in (dtypes or DTYPES.values()) if d in supported]


def checks_for(op, dtype) -> list:
    return ["forward", "backward"] if (op.supports_autograd and dtype == torch.float32) else ["forward"]


# Ops whose CPU reference itself changes from one x86 host to another: tolerances wide
# enough for every host, so the suite's outcome does not depend on the machine it runs on.
HOST_DEPENDENT_TOLERANCES = {
    # The CPU's flash-attention kernel (online softmax) sums float32 in vector-width
    # chunks: about 1e-5 apart between AVX2 and AVX-512 hosts (and from our math SDPA).
    ("nn.functional.scaled_dot_product_attention", torch.float32): (1e-4, 3e-5),
    # Half transposed convolutions: where the CPU has AVX512-FP16, PyTorch runs them
    # through oneDNN (float32 sums); elsewhere through a half column buffer that our
    # col2im reproduces to the bit. Two ulps of the largest sums cover both.
    **{(f"nn.functional.conv_transpose{d}d", torch.float16): (1e-2, 0.5) for d in (1, 2, 3)},
}


def opinfo_notes(op, dtype) -> tuple[dict, Optional[str]]:
    """What OpInfo itself says about comparing this op with the CPU: tolerance overrides
    ({dtype: (rtol, atol)}) and the reason of a skip or expected failure, if any, plus our
    HOST_DEPENDENT_TOLERANCES."""
    overrides, note = {}, None
    if (op.name, dtype) in HOST_DEPENDENT_TOLERANCES:
        overrides[dtype] = HOST_DEPENDENT_TOLERANCES[(op.name, dtype)]
    # (OpInfo merges its `skips` into `decorators`.)
    for info in getattr(op, "decorators", ()) or ():
        if not hasattr(info, "is_active"):
            continue
        try:
            active = info.is_active(*_OPINFO_TEST, "cpu", dtype, {})
        except Exception:  # noqa: BLE001 - an active_if we cannot evaluate
            active = False
        # Decorations of test_compare_cpu (on the CPU or every device), not of every test.
        if not active or info.test_name is None:
            continue
        for decorator in info.decorators:
            d = getattr(decorator, "d", None)
            if isinstance(d, dict):  # toleranceOverride
                for dt, t in d.items():
                    overrides[dt] = (t.rtol, t.atol)
                continue
            if decorator is unittest.expectedFailure:
                note = note or "OpInfo expects test_compare_cpu to fail"
                continue

            def probe():
                pass

            try:
                decorated = decorator(probe)
            except Exception:  # noqa: BLE001
                continue
            why = getattr(decorated, "__unittest_skip_why__", None)
            if why:
                note = note or f"OpInfo skips test_compare_cpu: {why}"
    return overrides, note


# ---- results --------------------------------------------------------------------------


@dataclasses.dataclass
class SampleResult:
    index: int
    status: str  # "pass", "fail" or "skip"
    category: str = ""  # fail: no-native, mismatch, crash, cpu-error, timeout; skip: why
    detail: str = ""
    fallback_ops: tuple = ()
    seconds: float = 0.0
    summary: str = ""  # the sample (shapes, dtypes, args), for failure messages

    @property
    def native(self) -> bool:
        return self.status == "pass" and not self.fallback_ops


@dataclasses.dataclass
class OpResult:
    op: str
    name: str
    variant: str
    dtype: str
    mode: str
    check: str
    samples: list = dataclasses.field(default_factory=list)
    error: str = ""  # the op as a whole failed (sample generation, process crash, hang)
    note: str = ""  # what OpInfo says about comparing this op with the CPU
    seconds: float = 0.0

    @property
    def key(self) -> tuple:
        return (self.name, self.variant, self.dtype, self.mode, self.check)

    def count(self, what: str) -> int:
        if what == "native":
            return sum(1 for s in self.samples if s.native)
        if what == "fallback":
            return sum(1 for s in self.samples if s.status == "pass" and s.fallback_ops)
        return sum(1 for s in self.samples if s.status == what)

    @property
    def status(self) -> str:
        if self.error or self.count("fail"):
            return "fail"
        if self.count("pass") == 0:
            return "skip"
        return "pass"

    @property
    def failures(self) -> list:
        return [s for s in self.samples if s.status == "fail"]

    def reason(self, limit: int = 300) -> str:
        """A one-line, honest summary of why this op fails (for expected_failures.txt)."""
        if self.error:
            text = self.error
        else:
            fails = self.failures
            if not fails:
                return ""
            # Ops without a native kernel: one group listing them, most frequent first.
            missing = {}
            groups = {}
            for s in fails:
                if s.category == "no-native":
                    missing[s.detail] = missing.get(s.detail, 0) + 1
                    groups.setdefault("no native kernel (fallback)", []).append(s)
                else:
                    groups.setdefault(_group_key(s), []).append(s)
            parts = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[1][0].index))
            texts = []
            for key, members in parts[:2]:
                text = key if key == "no native kernel (fallback)" else _reason_text(members[0])
                if text.startswith("no native kernel"):
                    names = sorted(missing, key=lambda n: (-missing[n], n))
                    text += ": " + ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
                texts.append(text)
            ran = sum(1 for s in self.samples if s.status != "skip")
            text = "; ".join(texts)
            if len(parts) > 2:
                text += f"; +{len(parts) - 2} more"
            text += f" [{len(fails)}/{ran} samples]"
        # A cause found by hand explains failures other than a missing kernel.
        causes = KNOWN_CAUSES
        if self.mode == COMPILE_MODE:
            causes = (COMPILE_BACKWARD_KNOWN_CAUSES if self.check == "backward"
                      else COMPILE_KNOWN_CAUSES)
        if self.op in causes and (self.error or any(
                s.category != "no-native" for s in self.failures)):
            text += f"; cause: {causes[self.op]}"
        if self.note:
            text += f" ({self.note})"
        text = " ".join(text.split())
        return text if len(text) <= limit else text[: limit - 3] + "..."

    def failure_report(self, max_samples: int = 5) -> str:
        lines = [f"{self.op} {self.dtype} {self.mode} {self.check}: {self.reason(limit=10_000)}"]
        for s in self.failures[:max_samples]:
            lines.append(f"  sample {s.index} [{s.category}] {s.summary}")
            lines.extend("    " + l for l in s.detail.splitlines()[:12])
            if s.fallback_ops:
                lines.append("    fallback ops: " + ", ".join(s.fallback_ops))
        return "\n".join(lines)

    def to_json(self) -> dict:
        d = dataclasses.asdict(self)
        return d

    @classmethod
    def from_json(cls, d: dict) -> "OpResult":
        d = dict(d)
        d["samples"] = [SampleResult(**{**s, "fallback_ops": tuple(s["fallback_ops"])})
                        for s in d.get("samples", [])]
        return cls(**d)


def _group_key(s: SampleResult) -> str:
    """Failures with one cause share a key (mismatch details differ from sample to sample)."""
    if s.category in ("mismatch", "cpu-error", "timeout"):
        return f"{s.category} {bool(s.fallback_ops)}"
    return f"{s.category} {bool(s.fallback_ops)} {s.detail[:60]}"


def _reason_text(s: SampleResult) -> str:
    ops = ", ".join(s.fallback_ops[:4]) + (", ..." if len(s.fallback_ops) > 4 else "")
    if s.category == "no-native":
        return f"no native kernel (fallback): {s.detail}"
    if s.category == "mismatch":
        where = f"CPU fallback mismatch ({ops})" if s.fallback_ops else "native mismatch"
        return f"{where}: {s.detail.splitlines()[0] if s.detail else ''}"
    if s.category == "crash":
        via = f" (via fallback {ops})" if s.fallback_ops else ""
        return f"sample crashes{via}: {s.detail.splitlines()[0] if s.detail else ''}"
    if s.category == "timeout":
        return f"timeout: {s.detail}"
    return f"{s.category}: {s.detail.splitlines()[0] if s.detail else ''}"


# ---- running a sample -----------------------------------------------------------------


class SampleTimeout(BaseException):
    """Raised by the per-sample alarm (a BaseException, so ops' `except Exception`
    cannot swallow it)."""


class Mismatch(AssertionError):
    pass


@contextlib.contextmanager
def time_limit(seconds: float):
    """Interrupts the block with SampleTimeout after `seconds` (main thread only; the
    interrupt lands when Python regains control)."""
    if seconds <= 0 or threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_alarm(signum, frame):
        raise SampleTimeout()

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def device_mode(mode: str):
    """The environment of the device run: fallback (A) or native-only (B), quiet."""
    names = ("TORCH_WEBGPU_DISABLE_CPU_FALLBACK", "TORCH_WEBGPU_FALLBACK_WARN")
    saved = {n: os.environ.get(n) for n in names}
    os.environ["TORCH_WEBGPU_DISABLE_CPU_FALLBACK"] = "1" if mode == "native" else "0"
    os.environ["TORCH_WEBGPU_FALLBACK_WARN"] = "0"
    try:
        yield
    finally:
        for n, v in saved.items():
            if v is None:
                os.environ.pop(n, None)
            else:
                os.environ[n] = v


def _replicate(t: torch.Tensor, device: str, memo: dict) -> torch.Tensor:
    """A copy of `t` on `device` with t's exact layout; tensors of the sample that share a
    storage share one on the copy too (memo)."""
    requires_grad = t.requires_grad
    t = t.detach()
    simple = (t.layout != torch.strided or t.is_conj() or t.is_neg() or t.is_quantized
              or t.numel() == 0)
    if not simple:
        storage = t.untyped_storage()
        size = t.element_size()
        if storage.nbytes() % size or storage.nbytes() // size > 4 * MAX_NUMEL:
            simple = True
    if simple:
        r = t.to(device, copy=True)
    else:
        key = (storage.data_ptr(), t.dtype)
        flat = memo.get(key)
        if flat is None:
            flat = t.as_strided((storage.nbytes() // size,), (1,), 0).to(device, copy=True)
            memo[key] = flat
        r = flat.as_strided(t.shape, t.stride(), t.storage_offset())
    if requires_grad:
        r.requires_grad_(True)
    return r


def _map_sample(sample, device: str, cpu_index_args: bool = False):
    """The sample with every tensor copied to `device` (and devices named `device`), and
    whether it had any tensor or device to move. cpu_index_args: integer tensors in args
    stay on the CPU."""
    memo = {}
    moved = []

    def f(x, cpu_ints=False):
        if isinstance(x, torch.Tensor):
            moved.append(True)
            if cpu_ints and not (x.is_floating_point() or x.is_complex()):
                return _replicate(x, "cpu", {})
            return _replicate(x, device, memo)
        if isinstance(x, torch.device):
            moved.append(True)
            return torch.device(device) if x.type == "cpu" else x
        if isinstance(x, str) and x == "cpu":
            moved.append(True)
            return device
        if isinstance(x, torch.Generator):
            g = torch.Generator(device if device == "cpu" else DEVICE)
            g.set_state(x.get_state())
            return g
        if isinstance(x, list):
            return [f(v, cpu_ints) for v in x]
        if isinstance(x, tuple):
            items = [f(v, cpu_ints) for v in x]
            return type(x)(*items) if hasattr(x, "_fields") else tuple(items)
        if isinstance(x, dict):
            return {k: f(v, cpu_ints) for k, v in x.items()}
        return x

    from torch.testing._internal.opinfo.core import SampleInput

    mapped = SampleInput(f(sample.input), args=f(sample.args, cpu_index_args),
                         kwargs=f(sample.kwargs), output_process_fn_grad=sample.output_process_fn_grad,
                         broadcasts_input=sample.broadcasts_input, name=sample.name)
    return mapped, bool(moved)


def _tensors(x) -> list:
    from torch.utils._pytree import tree_flatten

    return [t for t in tree_flatten(x)[0] if isinstance(t, torch.Tensor)]


def sample_numel(sample) -> int:
    """The largest number of elements (or of storage elements) of the sample's tensors."""
    most = 0
    for t in _tensors([sample.input, sample.args, sample.kwargs]):
        most = max(most, t.numel())
        if t.layout == torch.strided and t.element_size():
            most = max(most, t.untyped_storage().nbytes() // t.element_size())
    return most


def _to_cpu(x, path="output"):
    """The device result with every tensor moved to the CPU; a tensor that is not on the
    device is a mismatch."""
    if isinstance(x, torch.Tensor):
        if x.device.type != DEVICE:
            raise Mismatch(f"{path} is on {x.device}, expected {DEVICE}")
        return x.detach().cpu()
    if isinstance(x, torch.device):
        return torch.device("cpu") if x.type == DEVICE else x
    if isinstance(x, list):
        return [_to_cpu(v, f"{path}[{i}]") for i, v in enumerate(x)]
    if isinstance(x, tuple):
        items = [_to_cpu(v, f"{path}[{i}]") for i, v in enumerate(x)]
        return type(x)(*items) if hasattr(x, "_fields") else tuple(items)
    if isinstance(x, dict):
        return {k: _to_cpu(v, f"{path}[{k!r}]") for k, v in x.items()}
    return x


_CLOSE_RE = {
    "count": re.compile(r"Mismatched elements: (\d+) / (\d+)"),
    "abs": re.compile(r"Greatest absolute difference: (\S+) at index (\([^)]*\)|\S+)"),
    "rel": re.compile(r"Greatest relative difference: (\S+)"),
}


def _short_close_message(message: str) -> str:
    count = _CLOSE_RE["count"].search(message)
    absd = _CLOSE_RE["abs"].search(message)
    reld = _CLOSE_RE["rel"].search(message)
    scalars = re.search(r"Expected (.*) but got (.*?)\.?\n", message + "\n")
    if not count and scalars:
        return f"got {scalars.group(2)}, expected {scalars.group(1)}"
    if not count:
        return " ".join(message.split())[:300]
    text = f"{count.group(1)}/{count.group(2)} elements differ"
    if absd:
        text += f", max abs diff {absd.group(1)} at {absd.group(2)}"
    if reld:
        text += f", max rel diff {reld.group(1)}"
    return text


def _tolerance(dtype, sample_dtype, overrides, scale):
    rtol, atol = TOLERANCES.get(dtype, (0.0, 0.0))
    if dtype in overrides:
        o_rtol, o_atol = overrides[dtype]
        rtol, atol = max(rtol, o_rtol), max(atol, o_atol)
    if rtol or atol:
        rtol, atol = rtol * scale, atol * scale
    return rtol, atol


def compare(actual, expected, *, sample_dtype=torch.float32, overrides=None, scale=1.0,
            path="output", values=True):
    """Raises Mismatch where the (CPU copy of the) device result differs from the CPU's
    (values=False: in types, dtypes and shapes only)."""
    overrides = overrides or {}
    more = dict(sample_dtype=sample_dtype, overrides=overrides, scale=scale, values=values)
    if isinstance(expected, torch.Tensor):
        if not isinstance(actual, torch.Tensor):
            raise Mismatch(f"{path}: expected a Tensor, got {type(actual).__name__}")
        if actual.dtype != expected.dtype:
            raise Mismatch(f"{path}: dtype {actual.dtype}, expected {expected.dtype}")
        if actual.shape != expected.shape:
            raise Mismatch(f"{path}: shape {tuple(actual.shape)}, expected {tuple(expected.shape)}")
        if actual.layout != expected.layout:
            raise Mismatch(f"{path}: layout {actual.layout}, expected {expected.layout}")
        if not values:
            return
        rtol, atol = _tolerance(expected.dtype, sample_dtype, overrides, scale)
        try:
            torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=True,
                                       check_device=False, check_stride=False)
        except AssertionError as e:
            raise Mismatch(f"{path}: {_short_close_message(str(e))}") from None
        return
    if isinstance(expected, (list, tuple)):
        if not isinstance(actual, (list, tuple)):
            raise Mismatch(f"{path}: expected a {type(expected).__name__}, got {type(actual).__name__}")
        if len(actual) != len(expected):
            raise Mismatch(f"{path}: length {len(actual)}, expected {len(expected)}")
        for i, (a, e) in enumerate(zip(actual, expected)):
            compare(a, e, path=f"{path}[{i}]", **more)
        return
    if isinstance(expected, dict):
        if not isinstance(actual, dict) or set(actual) != set(expected):
            raise Mismatch(f"{path}: keys differ")
        for k in expected:
            compare(actual[k], expected[k], path=f"{path}[{k!r}]", **more)
        return
    if isinstance(expected, (int, float, complex)) and not isinstance(expected, bool):
        if not isinstance(actual, (int, float, complex)) or isinstance(actual, bool):
            raise Mismatch(f"{path}: expected {type(expected).__name__} {expected!r}, got {actual!r}")
        if isinstance(expected, int) and isinstance(actual, int):
            if actual != expected:
                raise Mismatch(f"{path}: {actual!r}, expected {expected!r}")
            return
        rtol, atol = _tolerance(sample_dtype if sample_dtype.is_floating_point else torch.float32,
                                sample_dtype, overrides, scale)
        try:
            torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=True,
                                       check_dtype=False)
        except AssertionError:
            raise Mismatch(f"{path}: {actual!r}, expected {expected!r}") from None
        return
    try:
        same = actual is expected or bool(actual == expected)
    except Exception:  # noqa: BLE001 - objects that do not compare
        same = False
    if not same:
        raise Mismatch(f"{path}: {actual!r}, expected {expected!r}")


def _fallback_ops_seen() -> tuple:
    import torch_webgpu

    return tuple(sorted(torch_webgpu._C.fallback_ops_seen()))


def _reset_fallback_ops_seen():
    import torch_webgpu

    torch_webgpu._C.reset_fallback_ops_seen()


_NOT_NATIVE_RE = re.compile(r"The operator '([^']+)' is not implemented natively for the WebGPU "
                            r"device, and the CPU fallback is disabled")


def _error_text(e: BaseException) -> str:
    """The exception's type and the first sentence of its message."""
    message = str(e).strip()
    first = message.splitlines()[0] if message else ""
    cut = first.find(". ", 60)
    if cut > 0:
        first = first[: cut + 1]
    if len(first) > 140:
        first = first[:137] + "..."
    return f"{type(e).__name__}: {first}"


def _call(op, sample):
    return sample.output_process_fn_grad(op(sample.input, *sample.args, **sample.kwargs))


def _call_compiled(op, sample):
    """The sample through torch.compile (static shapes; graph breaks run eagerly, as they
    would for a user). A fresh Dynamo per sample: each sample compiles anew anyway, and
    Dynamo's recompile limits (per function and accumulated) never come into play; a
    recompile past them would raise rather than silently run eager code."""
    import torch._dynamo

    torch._dynamo.reset()

    def program(x, *args, **kwargs):
        return op(x, *args, **kwargs)

    compiled = torch.compile(program, backend="inductor", dynamic=False)
    return sample.output_process_fn_grad(compiled(sample.input, *sample.args, **sample.kwargs))


@contextlib.contextmanager
def compile_settings():
    """Dynamo and Inductor settings of the compile mode: no FX graph cache (kernels are
    generated each time), no silent fall back to eager."""
    import torch._dynamo
    import torch._inductor.config as inductor_config

    saved = (torch._dynamo.config.recompile_limit, torch._dynamo.config.fail_on_recompile_limit_hit,
             inductor_config.fx_graph_cache)
    torch._dynamo.reset()
    torch._dynamo.config.recompile_limit = 1000
    torch._dynamo.config.fail_on_recompile_limit_hit = True
    inductor_config.fx_graph_cache = False
    try:
        yield
    finally:
        torch._dynamo.reset()
        (torch._dynamo.config.recompile_limit, torch._dynamo.config.fail_on_recompile_limit_hit,
         inductor_config.fx_graph_cache) = saved


def _differentiable_outputs(out) -> list:
    """Indices (in the flattened output) of float tensors that require grad."""
    from torch.utils._pytree import tree_flatten

    leaves = tree_flatten(out)[0]
    return [i for i, t in enumerate(leaves)
            if isinstance(t, torch.Tensor) and t.requires_grad
            and (t.dtype.is_floating_point or t.dtype.is_complex)]


def _grad_inputs(sample) -> list:
    return [t for t in _tensors([sample.input, sample.args, sample.kwargs]) if t.requires_grad]


def _backward(op, sample, reference_indices=None, call=_call):
    """Outputs, then the gradients of the sum of the differentiable outputs w.r.t. the
    sample's inputs that require grad (None where unused). `call` runs the forward: with
    _call_compiled, AOTAutograd compiles the backward graph with Inductor too, and
    autograd.grad runs that compiled backward."""
    from torch.utils._pytree import tree_flatten

    out = call(op, sample)
    leaves = tree_flatten(out)[0]
    indices = _differentiable_outputs(out) if reference_indices is None else reference_indices
    outs = []
    for i in indices:
        t = leaves[i] if i < len(leaves) else None
        if not isinstance(t, torch.Tensor) or not t.requires_grad:
            raise Mismatch(f"output leaf {i} does not require grad on the device")
        outs.append(t)
    inputs = _grad_inputs(sample)
    if not outs or not inputs:
        return indices, []
    grads = torch.autograd.grad(outs, inputs, grad_outputs=[torch.ones_like(o) for o in outs],
                                allow_unused=True)
    return indices, list(grads)


def run_sample(op, sample, index: int, dtype, mode: str, check: str, *,
               overrides=None, seed: int = 0, budget: float = None) -> SampleResult:
    """Runs one sample on the CPU and on the device (in `mode`) and compares."""
    budget = SAMPLE_BUDGET_S if budget is None else budget
    result = SampleResult(index=index, status="pass")
    try:
        result.summary = sample.summary()[:400]
    except Exception:  # noqa: BLE001
        result.summary = "?"
    numel = sample_numel(sample)
    if numel > MAX_NUMEL:
        result.status, result.category = "skip", "too-large"
        result.detail = f"{numel} elements > {MAX_NUMEL}"
        return result
    start = time.perf_counter()
    scale = GRAD_TOLERANCE_SCALE if check == "backward" else 1.0
    expected = cpu_error = actual = device_error = None
    indices = None
    try:
        with time_limit(budget):
            # The CPU reference, on a CPU copy of the sample.
            cpu_sample, on_device = _map_sample(sample, "cpu")
            if not on_device:
                result.status, result.category = "skip", "no-device"
                result.detail = "the sample has no tensor and no device to put on webgpu"
                return result
            torch.manual_seed(seed)
            try:
                if check == "backward":
                    indices, expected = _backward(op, cpu_sample)
                else:
                    expected = _call(op, cpu_sample)
            except Exception as e:  # noqa: BLE001
                cpu_error = e
            del cpu_sample
            with device_mode(mode):
                _reset_fallback_ops_seen()
                try:
                    dev_sample, _ = _map_sample(sample, DEVICE, op.name in CPU_INDEX_ARG_OPS)
                    torch.manual_seed(seed)
                    call = _call_compiled if mode == COMPILE_MODE else _call
                    if check == "backward" and cpu_error is None:
                        _, out = _backward(op, dev_sample, indices, call)
                    else:
                        out = call(op, dev_sample)
                    actual = _to_cpu(out)
                    del out, dev_sample
                except Exception as e:  # noqa: BLE001 - Mismatch from _to_cpu, or the op's error
                    device_error = e
                result.fallback_ops = _fallback_ops_seen()
    except SampleTimeout:
        result.status, result.category = "fail", "timeout"
        result.detail = f"sample took more than {budget:g} s"
        result.seconds = time.perf_counter() - start
        return result
    result.seconds = time.perf_counter() - start

    if isinstance(device_error, Mismatch):
        result.status, result.category, result.detail = "fail", "mismatch", str(device_error)
    elif cpu_error is not None and device_error is not None:
        if type(cpu_error) is not type(device_error):
            missing = _NOT_NATIVE_RE.search(str(device_error))
            if missing:
                result.status, result.category, result.detail = "fail", "no-native", missing.group(1)
            else:
                result.status, result.category = "fail", "crash"
                result.detail = (f"{_error_text(device_error)} (the CPU raises "
                                 f"{_error_text(cpu_error)})")
    elif device_error is not None:
        missing = _NOT_NATIVE_RE.search(str(device_error))
        if missing:
            result.status, result.category, result.detail = "fail", "no-native", missing.group(1)
        else:
            result.status, result.category, result.detail = "fail", "crash", _error_text(device_error)
    elif cpu_error is not None:
        result.status, result.category = "fail", "cpu-error"
        result.detail = f"the CPU raises {_error_text(cpu_error)}, the device does not"
    else:
        try:
            compare(actual, expected, sample_dtype=dtype, overrides=overrides, scale=scale,
                    path="grad" if check == "backward" else "output",
                    values=not (op.name in UNINITIALIZED_OUTPUT_OPS or random_output(op, sample)))
        except Mismatch as e:
            result.status, result.category, result.detail = "fail", "mismatch", str(e)
    return result


def run_op(op, dtype, mode: str = "fallback", check: str = "forward", *,
           sample_budget: float = None, op_budget: float = None,
           inputs: str = "sample") -> OpResult:
    """Runs every sample of `op` in `dtype` (mode: fallback|native, check:
    forward|backward) and returns the per-sample results. inputs="reference" takes
    OpInfo's reference_inputs (a superset of sample_inputs: extremal values, more shapes,
    as test_compare_cpu does) instead of sample_inputs."""
    assert mode in ALL_MODES and check in CHECKS, (mode, check)
    op_budget = OP_BUDGET_S if op_budget is None else op_budget
    overrides, note = opinfo_notes(op, dtype)
    result = OpResult(op=op_id(op), name=op.name, variant=op_variant(op),
                      dtype=DTYPE_NAMES.get(dtype, str(dtype).replace("torch.", "")),
                      mode=mode, check=check, note=note or "")
    if check == "backward" and not (op.supports_autograd and dtype.is_floating_point):
        return result
    start = time.perf_counter()
    settings = compile_settings() if mode == COMPILE_MODE else contextlib.nullcontext()
    with settings:
        try:
            generate = op.reference_inputs if inputs == "reference" else op.sample_inputs
            samples = generate("cpu", dtype, requires_grad=(check == "backward"))
            index = 0
            while True:
                try:
                    with time_limit(sample_budget or SAMPLE_BUDGET_S):
                        sample = next(samples, None)
                except SampleTimeout:
                    result.error = "sample generation timed out"
                    break
                if sample is None:
                    break
                if time.perf_counter() - start > op_budget:
                    result.samples.append(SampleResult(index, "fail", "timeout",
                                                       f"op budget of {op_budget:g} s exhausted"))
                    break
                result.samples.append(run_sample(op, sample, index, dtype, mode, check,
                                                 overrides=overrides, seed=1000 + index,
                                                 budget=sample_budget))
                del sample
                index += 1
        except Exception as e:  # noqa: BLE001 - the generator itself failed
            result.error = f"sample generation fails: {_error_text(e)}"
    result.seconds = time.perf_counter() - start
    return result


def release_memory():
    """Returns the device's cached buffers (between ops; keeps long runs modest)."""
    gc.collect()
    try:
        import torch_webgpu

        torch_webgpu._C.empty_cache()
    except Exception:  # noqa: BLE001
        pass


def all_cases(ops=None, dtypes=None, modes=MODES, checks=CHECKS):
    """(op, dtype, mode, check) for every op, supported dtype, mode and applicable check."""
    for op in (ops if ops is not None else load_op_db()):
        for dtype in op_dtypes(op, dtypes):
            for check in checks_for(op, dtype):
                if check not in checks:
                    continue
                for mode in modes:
                    yield op, dtype, mode, check


# ---- the expected-failures file -------------------------------------------------------

# Reasons of expected failures whose tests are not run at all (they take the process down).
NOT_RUN_PREFIXES = ("hangs", "crashes the process")
# Reasons starting so mark a test whose CPU reference depends on the host's CPU (a half-type
# result that the CPU's own kernels round differently on different instruction sets): it
# may fail (an expected failure) or pass (not a strict one) on a given machine.
HOST_DEPENDENT_PREFIX = "host-dependent"
# TORCH_WEBGPU_OPINFO_RUN_CRASHERS=1 runs them anyway (to see whether they still crash).
RUN_CRASHERS = os.environ.get("TORCH_WEBGPU_OPINFO_RUN_CRASHERS", "") not in ("", "0")

EXPECTED_HEADER = """\
# OpInfo tests of the webgpu device that are expected to fail (tests/opinfo).
# One line per test: op  variant  dtype  mode  check  reason
#   variant: OpInfo's variant_test_name, '-' for none
#   mode:    fallback (CPU fallback allowed) | native (TORCH_WEBGPU_DISABLE_CPU_FALLBACK=1)
#   check:   forward | backward (gradients, float32 only)
# A listed test that passes fails the run (strict xfail): delete its line. Regenerate with
#   pytest tests/opinfo -n 2 --opinfo-record=FILE; python tests/opinfo/update_expected_failures.py FILE
# Reasons starting 'hangs' or 'crashes the process' make the test skip instead of run
# (TORCH_WEBGPU_OPINFO_RUN_CRASHERS=1 runs them anyway).
# Reasons starting 'host-dependent' may pass or fail: the CPU reference varies by host CPU.
"""


def read_expected_failures(path) -> dict:
    """{(op, variant, dtype, mode, check): reason}"""
    entries = {}
    if not os.path.exists(path):
        return entries
    with open(path) as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split(None, 5)
            if len(parts) < 5:
                raise ValueError(f"{path}:{number}: expected 'op variant dtype mode check reason'")
            key = tuple(parts[:5])
            if key[3] not in ALL_MODES or key[4] not in CHECKS:
                raise ValueError(f"{path}:{number}: bad mode or check in {line!r}")
            if key in entries:
                raise ValueError(f"{path}:{number}: duplicate entry {' '.join(key)}")
            entries[key] = parts[5] if len(parts) > 5 else ""
    return entries


COMPILE_EXPECTED_HEADER = """\
# OpInfo samples through torch.compile on webgpu that are expected to fail (tests/opinfo,
# --opinfo-modes=compile: each sample compiled with Inductor's WGSL generator vs eager on
# the CPU). One line per test: op  variant  dtype  compile  forward|backward  reason
# (backward: the gradients through AOTAutograd's backward compiled by Inductor).
# A listed test that passes fails the run (strict xfail): delete its line. Regenerate with
#   pytest tests/opinfo -n 2 --opinfo-modes=compile --opinfo-dtypes=float32 \\
#     --opinfo-checks=forward,backward --opinfo-record=FILE
#   python tests/opinfo/update_expected_failures.py FILE
# 'not run yet': no full run has recorded the test (gates.py counts it as failing and does
# not enforce its gate while any is listed).
"""


def write_expected_failures(path, entries: dict, header: str = EXPECTED_HEADER):
    order = {n: i for i, n in enumerate(DTYPES)}
    keys = sorted(entries, key=lambda k: (k[0], k[1], order.get(k[2], 99), k[2],
                                          CHECKS.index(k[4]), ALL_MODES.index(k[3])))
    # Aligned columns, but a long op or variant name overflows rather than widening all.
    caps = (32, 14, 8, 8, 8)
    widths = [min(caps[i], max([len(k[i]) for k in keys] + [1])) for i in range(5)]
    with open(path, "w") as f:
        f.write(header)
        for k in keys:
            f.write("  ".join(k[i].ljust(widths[i]) for i in range(5)) + "  " + entries[k] + "\n")
