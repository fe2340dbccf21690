"""Inductor's WGSL code generator: one compute shader per fused node group.

Four parts, one job each:
- ``WGSLExprPrinter``: index arithmetic (sympy) as WGSL i32 expressions.
- ``WebGPUOverrides``: Inductor's pointwise ops as WGSL expressions, taken from the eager
  pointwise table (``_C._wgsl_pointwise_expression``) wherever eager has the op, so a
  compiled graph computes what eager computes.
- ``WebGPUKernel``: loads, stores, reductions, scans and the kernel's frame. Pointwise
  kernels run one invocation per element; reduction kernels one workgroup per output row,
  each thread looping over a slice of the row, then a tree combine in workgroup memory;
  scan kernels scan each block of the row in a workgroup with a running carry (GPUs), or
  give each row to one invocation that walks it (software adapters).
- ``WebGPUScheduling``: Inductor's SIMD scheduling with this kernel, kernels defined in the
  wrapper as ``WGSLKernel`` objects (compiler/kernel.py) and called with ``launch``.

Values live in WGSL registers as f32 (float32/float16/bfloat16: half types compute in f32
as eager does), i32 (int32 and narrower, int64: see below) or bool. Limits of this first
slice: int64 values compute in i32 inside generated kernels: loads of values beyond 32 bits,
and int64 additions, subtractions, products, negations and sums that leave 32 bits, raise
through a device check (at the next read-back), never a wrong value; float64
and complex are refused; sorts and templates are not generated (they run as eager
ATen ops through Inductor's fallback path). Random ops draw Philox numbers keyed by seeds
the eager generator draws (``WebGPUOverrides.rand``).
"""
from __future__ import annotations

import functools
import itertools
import math
import os
import re
import textwrap
from typing import Any

import sympy
import torch
from torch._inductor.codegen.common import (
    BackendFeature,
    DeferredLine,
    IndentedBuffer,
    OpOverrides,
    SizeArg,
    TensorArg,
)
from torch._inductor.codegen.simd import SIMDKernel, SIMDScheduling
from torch._inductor import config
from torch._inductor.utils import get_fused_kernel_name, get_kernel_metadata
from torch._inductor.virtualized import V
from torch.utils._sympy.printers import ExprPrinter
from torch.utils._ordered_set import OrderedSet
from torch.utils._sympy.symbol import SymT, free_symbol_is_type

from .. import _C

OUT_OF_BOUNDS = "index out of bounds in a torch.compile kernel (gather, embedding, indexing)"
INT64_RANGE = ("an int64 value beyond 32 bits reached a torch.compile kernel (generated "
               "kernels compute int64 in 32 bits); run this function eagerly")
# Threads per workgroup. Reductions: one workgroup per row, 64 threads as eager's row
# reductions use (power of two: tree combine); pointwise: 256 or the adapter's limit.
REDUCTION_WORKGROUP = 64
POINTWISE_WORKGROUP = 256
# Serial scans (software adapters): one row per invocation, 64 rows per workgroup.
SERIAL_SCAN_WORKGROUP = 64
# A GPU reduction over few rows (decode's norms: one) has one workgroup per row and each
# invocation walks its slice of the row serially, a global-memory round trip per step: with
# 64 invocations an 896-wide RMSNorm took 24 us on an H100. Below FEW_ROWS rows the
# workgroup widens so the walk is a step or a few (software adapters keep 64: there a
# workgroup is one core and each barrier of a wider tree costs).
# TORCH_WEBGPU_COMPILE_REDUCTION_THREADS=n forces n (A/B measurements).
FEW_ROWS = 512
FEW_ROWS_WORKGROUP = 256


# ---------------------------------------------------------------------------- types

def register_type(dtype: torch.dtype) -> str:
    """WGSL type a value of `dtype` has in a generated kernel."""
    if dtype in (torch.float32, torch.float16, torch.bfloat16):
        return "f32"
    if dtype == torch.bool:
        return "bool"
    if dtype in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8):
        return "i32"
    raise NotImplementedError(f"torch_webgpu compile: generated kernels cannot compute {dtype}")


def convert(expr: str, src: torch.dtype | None, dst: torch.dtype) -> str:
    """`expr` (a value of `src`) converted to `dst` the way the CPU converts."""
    if src == torch.float64:  # a 0-dim CPU tensor's value (a Python float): an f32 uniform
        src = torch.float32
    dst_type = register_type(dst)
    src_type = register_type(src) if src is not None else dst_type
    if src_type == "bool":
        if dst_type == "bool":
            return expr
        return f"select({'0.0' if dst_type == 'f32' else '0'}, {'1.0' if dst_type == 'f32' else '1'}, {expr})"
    if dst_type == "bool":
        return f"f32_truthy({expr})" if src_type == "f32" else f"({expr} != 0)"
    value = expr if src_type == dst_type else f"{dst_type}({expr})"
    # Narrow types round (floats) or wrap (integers) as a store to them would.
    if dst == torch.float16 and src != torch.float16:
        return f"f16_bits_to_f32(f32_to_f16_bits({value}))"
    if dst == torch.bfloat16 and src != torch.bfloat16:
        return f"bf16_bits_to_f32(f32_to_bf16_bits({value}))"
    if dst == torch.int8 and src != torch.int8:
        return f"(({value} << 24u) >> 24u)"
    if dst == torch.int16 and src not in (torch.int8, torch.int16):
        return f"(({value} << 16u) >> 16u)"
    if dst == torch.uint8 and src not in (torch.uint8, torch.bool):
        return f"({value} & 255)"
    return value


def constant_expr(value: Any, dtype: torch.dtype) -> str:
    t = register_type(dtype)
    if t == "bool":
        return "true" if value else "false"
    if t == "f32":
        value = float(value)
        if math.isnan(value):
            return "f32_nan()"
        if math.isinf(value):
            return "f32_inf()" if value > 0 else "-f32_inf()"
        if dtype != torch.float32:
            return convert(f"f32({value!r})", torch.float32, dtype)
        return f"f32({value!r})"
    value = int(value)
    if not -(2**31) <= value < 2**31:
        # Sentinels int64 min/max (masked argmax/argmin paddings, clamps) saturate; any
        # other constant beyond 32 bits would compute wrongly in i32.
        if value not in (2**63 - 1, -(2**63)):
            raise NotImplementedError(
                f"torch_webgpu compile: the integer constant {value} needs more than 32 bits, "
                "which generated kernels do not compute; run this function eagerly")
        value = max(min(value, 2**31 - 1), -(2**31))
    return f"i32({value})" if value >= 0 else f"i32({value + 1}) - 1" if value == -(2**31) else f"i32({value})"


def dtype_of(value: Any) -> torch.dtype | None:
    return getattr(value, "dtype", None)


# ----------------------------------------------------------------------- printer

class WGSLExprPrinter(ExprPrinter):
    """Index expressions as WGSL i32 arithmetic (indices are small enough for i32)."""

    def _print_Integer(self, expr: sympy.Expr) -> str:
        value = int(expr)
        if not -(2**31) <= value < 2**31:
            raise NotImplementedError("torch_webgpu compile: index beyond int32")
        return str(value)

    def _print_FloorDiv(self, expr: sympy.Expr) -> str:
        x, div = expr.args
        return f"div_floor_i32({self._print(x)}, {self._print(div)})"

    def _print_ModularIndexing(self, expr: sympy.Expr) -> str:
        # Inductor guarantees a non-negative x here, where / and % are floor division.
        # Symbolic divisors print as products (ks0*ks1): parenthesized, as / and % bind
        # as tightly as * in WGSL.
        x, div, mod = expr.args
        x_str = f"({self._print(x)})"
        if div != 1:
            x_str = f"({x_str} / ({self._print(div)}))"
        return f"({x_str} % ({self._print(mod)}))"

    def _print_PythonMod(self, expr: sympy.Expr) -> str:
        return f"mod_floor_i32({self._print(expr.args[0])}, {self._print(expr.args[1])})"

    _print_Mod = _print_PythonMod

    def _print_CleanDiv(self, expr: sympy.Expr) -> str:
        return f"(({self._print(expr.args[0])}) / ({self._print(expr.args[1])}))"

    def _print_min_max(self, expr: sympy.Expr, fn: str) -> str:
        args = [self._print(a) for a in expr.args]
        result = args[0]
        for a in args[1:]:
            result = f"{fn}({result}, {a})"
        return result

    def _print_Min(self, expr: sympy.Expr) -> str:
        return self._print_min_max(expr, "min")

    def _print_Max(self, expr: sympy.Expr) -> str:
        return self._print_min_max(expr, "max")

    def _print_Abs(self, expr: sympy.Expr) -> str:
        return f"abs({self._print(expr.args[0])})"

    def _print_Where(self, expr: sympy.Expr) -> str:
        c, a, b = (self._print(x) for x in expr.args)
        return f"select({b}, {a}, {c})"

    def _print_PowByNatural(self, expr: sympy.Expr) -> str:
        base, exp = expr.args
        if not isinstance(exp, sympy.Integer) or int(exp) < 0:
            raise NotImplementedError("torch_webgpu compile: symbolic power in an index")
        base_str = self._print(base)
        return "(" + " * ".join([base_str] * int(exp)) + ")" if int(exp) else "1"

    _print_Pow = _print_PowByNatural

    def _print_And(self, expr: sympy.Expr) -> str:
        return " && ".join(f"({self._print(a)})" for a in expr.args)

    def _print_Or(self, expr: sympy.Expr) -> str:
        return " || ".join(f"({self._print(a)})" for a in expr.args)

    def _print_ToFloat(self, expr: sympy.Expr) -> str:
        return f"f32({self._print(expr.args[0])})"

    def _print_Float(self, expr: sympy.Expr) -> str:
        return f"f32({float(expr)!r})"

    def _print_Identity(self, expr: sympy.Expr) -> str:
        return f"({self._print(expr.args[0])})"


# --------------------------------------------------------------------- overrides

def _eager(name: str, *args: Any) -> str:
    """The eager pointwise table's expression for `name` on `args` (first arg's dtype)."""
    found = _C._wgsl_pointwise_expression(name)
    if found is None:
        raise NotImplementedError(f"torch_webgpu compile: no WGSL for '{name}'")
    f32_expr, i32_expr, libraries = found
    types = [register_type(dtype_of(a) or torch.float32) for a in args]
    floating = types[0] == "f32" or (f32_expr is not None and "f32" in types)
    expr = f32_expr if floating else i32_expr
    if expr is None:
        raise NotImplementedError(f"torch_webgpu compile: '{name}' on {dtype_of(args[0])}")
    for lib in libraries:
        V.kernel.libraries.add(lib)
    # Mixed operands (a float and an index, as avg_pool's divisor) compute in f32.
    args = [convert(str(a), dtype_of(a), torch.float32) if floating and t != "f32" else a
            for a, t in zip(args, types)]
    values = dict(zip("abc", (f"({a})" for a in args)))
    return re.sub(r"\b[abc]\b", lambda m: values[m.group(0)], expr)


# int64 arithmetic in i32 with overflow checks: WGSL's i32 wraps, so each helper tests the
# wrapped result and reports through the device error word (CHECK is replaced by the call).
_INT64_HELPERS = {
    "add": ("fn i64c_add(a: i32, b: i32) -> i32 {\n  let r = a + b;\n"
            "  if (((a ^ r) & (b ^ r)) < 0) { CHECK }\n  return r;\n}"),
    "sub": ("fn i64c_sub(a: i32, b: i32) -> i32 {\n  let r = a - b;\n"
            "  if (((a ^ b) & (a ^ r)) < 0) { CHECK }\n  return r;\n}"),
    "mul": ("fn i64c_mul(a: i32, b: i32) -> i32 {\n  let r = a * b;\n"
            "  if (a != 0 && (r / a != b || (a == -1 && b == i32(-2147483647) - 1))) { CHECK }\n"
            "  return r;\n}"),
    "neg": ("fn i64c_neg(a: i32) -> i32 {\n"
            "  if (a == i32(-2147483647) - 1) { CHECK }\n  return -a;\n}"),
}


def is_int64(*values) -> bool:
    return any(dtype_of(v) == torch.int64 for v in values)


def int64_checked(op: str, *args) -> str:
    """A call of the overflow-checked int64 helper `op` (declared once per kernel)."""
    kernel = V.kernel
    name = f"i64c_{op}"
    kernel._declare_once(name, lambda: _INT64_HELPERS[op].replace(
        "CHECK", f"check_failed({kernel._check(INT64_RANGE)}u);"))
    return f"{name}({', '.join(str(a) for a in args)})"


class WebGPUOverrides(OpOverrides):
    """Inductor ops as WGSL; math from the eager table (see _eager)."""

    @staticmethod
    def to_dtype(x, dtype: torch.dtype, src_dtype: torch.dtype | None = None,
                 use_compute_types: bool = True) -> str:
        return convert(str(x), src_dtype or dtype_of(x), dtype)

    @staticmethod
    def to_dtype_bitcast(x, dtype: torch.dtype, src_dtype: torch.dtype) -> str:
        if register_type(dtype) == register_type(src_dtype) or {dtype, src_dtype} <= {torch.float32, torch.int32}:
            return f"bitcast<{register_type(dtype)}>({x})"
        raise NotImplementedError("torch_webgpu compile: bitcast between widths")

    @staticmethod
    def constant(value, dtype: torch.dtype) -> str:
        return constant_expr(value, dtype)

    @staticmethod
    def index_expr(expr: sympy.Expr, dtype: torch.dtype) -> str:
        index = V.kernel.index_to_str(V.kernel.prepare_indexing(expr))
        return convert(f"i32({index})", torch.int32, dtype)

    @staticmethod
    def value_expr(expr: sympy.Expr, dtype: torch.dtype) -> str:
        # An integer value (not an index) Inductor computed symbolically: same arithmetic.
        return WebGPUOverrides.index_expr(expr, dtype)

    @staticmethod
    def masked(mask, body, other) -> str:
        # The body runs unconditionally and `select` keeps its value only where the mask
        # holds; its loads read index 0 where the mask fails (see load: an int64 load past
        # the end would trip the 32-bit check on another tensor's bytes).
        with V.kernel.mask_loads(mask, other):
            result = body()
        dtype = dtype_of(result) or torch.float32
        other_expr = constant_expr(other, dtype)
        return V.kernel.cse.generate(
            V.kernel.compute, f"select({other_expr}, {result}, {mask})", dtype=dtype)

    @staticmethod
    def where(c, a, b) -> str:
        return f"select({b}, {a}, {c})"

    @staticmethod
    def mul(a, b) -> str:
        if dtype_of(a) == torch.bool:
            return f"({a} && {b})"
        if is_int64(a, b):
            return int64_checked("mul", a, b)
        return f"({a} * {b})"

    @staticmethod
    def add(a, b) -> str:
        return int64_checked("add", a, b) if is_int64(a, b) else f"({a} + {b})"

    @staticmethod
    def sub(a, b) -> str:
        return int64_checked("sub", a, b) if is_int64(a, b) else f"({a} - {b})"

    @staticmethod
    def neg(a) -> str:
        return int64_checked("neg", a) if is_int64(a) else f"(-{a})"

    @staticmethod
    def square(a) -> str:
        return int64_checked("mul", a, a) if is_int64(a) else f"({a} * {a})"

    @staticmethod
    def abs(a) -> str:
        if is_int64(a):
            return f"select({a}, {int64_checked('neg', a)}, {a} < 0)"
        return _eager("abs", a)

    @staticmethod
    def logical_not(a) -> str:
        return f"(!{convert(str(a), dtype_of(a), torch.bool)})"

    @staticmethod
    def bitwise_xor(a, b) -> str:
        return f"({a} ^ {b})" if dtype_of(a) != torch.bool else f"({a} != {b})"

    @staticmethod
    def bitwise_not(a) -> str:
        return f"(~{a})" if dtype_of(a) != torch.bool else f"(!{a})"

    # Random draws. Inductor's replace_random pass gives each random op one seed of a
    # seeds tensor the eager generator fills (so torch.manual_seed governs them) and each
    # element its offset; the draws are Philox blocks of the library's random.wgsl keyed
    # by the full 64-bit seed (not eager's stream: compiled and eager draws differ, as on
    # cuda; Inductor's fallback_random=True keeps eager's).
    @staticmethod
    def load_seed(name: str, offset) -> str:
        return V.kernel.load_seed(name, offset)

    @staticmethod
    def rand(seed, offset) -> str:
        V.kernel.libraries.add("random")
        return f"rng_rand({seed}, {offset})"

    @staticmethod
    def randn(seed, offset) -> str:
        V.kernel.libraries.add("random")
        return f"rng_randn({seed}, {offset})"

    @staticmethod
    def randint64(seed, offset, low, high) -> str:
        V.kernel.libraries.add("random")
        return f"rng_randint({seed}, {offset}, {low}, {high})"


# Inductor op -> eager table op, for ops whose expressions carry over one to one.
_EAGER_OPS = {
    "exp": "exp", "log": "log", "log1p": "log1p", "expm1": "expm1",
    "sqrt": "sqrt", "rsqrt": "rsqrt", "sin": "sin", "cos": "cos", "tan": "tan",
    "asin": "asin", "acos": "acos", "atan": "atan", "sinh": "sinh", "cosh": "cosh",
    "tanh": "tanh", "asinh": "asinh", "acosh": "acosh", "atanh": "atanh", "exp2": "exp2",
    "log2": "log2", "log10": "log10", "sigmoid": "sigmoid", "erf": "erf", "erfc": "erfc",
    "erfinv": "erfinv", "lgamma": "lgamma", "digamma": "digamma", "floor": "floor",
    "ceil": "ceil", "trunc": "trunc", "round": "round", "sign": "sign", "pow": "pow",
    "frac": "frac",
    "bitwise_left_shift": "bitwise_left_shift", "bitwise_right_shift": "bitwise_right_shift",
    "truediv": "div_true", "div": "div_true", "floordiv": "div_floor", "truncdiv": "div_trunc",
    "mod": "fmod", "fmod": "fmod", "remainder": "remainder", "reciprocal": "reciprocal",
    "relu": "relu",
}
# Inductor op -> WGSL template of its operand x.
_UNARY_OPS = {
    "identity": "{x}",
    "isnan": "is_nan({x})", "isinf": "is_inf({x})",
    "signbit": "((bitcast<u32>({x}) & 0x80000000u) != 0u)",  # exact for -0.0 and NaN signs
}
# Inductor op -> WGSL infix operator (same meaning on f32, i32 and bool operands).
_INFIX_OPS = {
    "bitwise_and": "&", "bitwise_or": "|",
    "logical_and": "&&", "logical_or": "||", "logical_xor": "!=",
}
# Comparisons give bool; floats compare through the library's NaN-exact functions.
_COMPARISONS = {
    "eq": ("==", "f32_eq"), "ne": ("!=", "f32_ne"), "lt": ("<", "f32_lt"),
    "le": ("<=", "f32_le"), "gt": (">", "f32_gt"), "ge": (">=", "f32_ge"),
}


def _compare(a, b, op: str, fn: str) -> str:
    kind = register_type(dtype_of(a) or torch.float32)
    if kind == "f32":
        return f"{fn}({a}, {b})"
    if kind == "bool" and op not in ("==", "!="):
        return f"(select(0, 1, {a}) {op} select(0, 1, {b}))"
    return f"({a} {op} {b})"


def _make_eager_override(table_name: str):
    def override(*args) -> str:
        return _eager(table_name, *args)
    return staticmethod(override)


def _make_unary_override(template: str):
    def override(x) -> str:
        return template.format(x=x)
    return staticmethod(override)


def _make_infix_override(op: str):
    def override(a, b) -> str:
        return f"({a} {op} {b})"
    return staticmethod(override)


def _make_comparison_override(op: str, fn: str):
    def override(a, b) -> str:
        return _compare(a, b, op, fn)
    return staticmethod(override)


for _name, _table_name in _EAGER_OPS.items():
    setattr(WebGPUOverrides, _name, _make_eager_override(_table_name))


def _make_bool_aware_override(table_name: str, bool_op: str):
    """max/min of two bools is their or/and: WGSL's max and min take no bools."""
    def override(a, b) -> str:
        if dtype_of(a) == torch.bool and dtype_of(b) == torch.bool:
            return f"({a} {bool_op} {b})"
        return _eager(table_name, a, b)
    return staticmethod(override)


WebGPUOverrides.maximum = _make_bool_aware_override("maximum", "||")
WebGPUOverrides.minimum = _make_bool_aware_override("minimum", "&&")
def _map_remaining_eager_ops() -> None:
    """Every other Inductor op the eager table knows by the same name (atan2, hypot, i0,
    copysign, ...) computes with the eager expression too."""
    from torch._inductor.ops_handler import OpsHandler

    for name in dir(OpsHandler):
        if name.startswith("_") or name in WebGPUOverrides.__dict__:
            continue
        found = _C._wgsl_pointwise_expression(name)
        if found is not None and not any(e and re.search(r"\bp\d\b", e) for e in found[:2]):
            setattr(WebGPUOverrides, name, _make_eager_override(name))
        elif found is not None:
            # Its eager expression takes host parameters (polygamma's n, zeta's runtime
            # zero) that a generated kernel does not have: eager computes it.
            setattr(WebGPUOverrides, name, _make_missing_override(name))
        elif getattr(OpOverrides, name, None) is getattr(OpsHandler, name):
            setattr(WebGPUOverrides, name, _make_missing_override(name))


MISSING_OPS: set[str] = set()  # Inductor ops with no WGSL (registration falls back on them)


def _make_missing_override(name: str):
    MISSING_OPS.add(name)
    def override(*args, **kwargs) -> str:
        raise NotImplementedError(
            f"torch_webgpu compile: the WGSL generator has no '{name}' yet; run this "
            "function eagerly (torch.compiler.disable) or report it")
    return staticmethod(override)


for _name, _template in _UNARY_OPS.items():
    setattr(WebGPUOverrides, _name, _make_unary_override(_template))
for _name, _op in _INFIX_OPS.items():
    setattr(WebGPUOverrides, _name, _make_infix_override(_op))
for _name, (_op, _fn) in _COMPARISONS.items():
    setattr(WebGPUOverrides, _name, _make_comparison_override(_op, _fn))
_map_remaining_eager_ops()


# ---------------------------------------------------------------------- kernel

_SUM_LIKE = {"sum": ("{a} + {b}", "0"), "prod": ("{a} * {b}", "1"), "xor_sum": ("{a} ^ {b}", "0")}


class WebGPUKernel(SIMDKernel):
    overrides = WebGPUOverrides  # type: ignore[assignment]
    suffix = ";"
    newvar_prefix = "let "
    sexpr = WGSLExprPrinter().doprint
    kexpr = sexpr

    def __init__(self, tiling: dict[str, sympy.Expr], **kwargs: Any) -> None:
        super().__init__(tiling, **kwargs)
        self.libraries: set[str] = set()
        self.declarations = IndentedBuffer()  # module scope: workgroup arrays, helpers
        self.post_loop = IndentedBuffer()     # after a reduction loop: the tree combines
        self.loop_entries = IndentedBuffer()  # reduction index entries, first in the loop
        self.acc_ids = itertools.count()
        self.check_messages: list[str] = []  # device checks, in check_failed(k) order
        self.seed_values: set[str] = set()  # int64 seeds held whole as vec2<u32> (load_seed)
        self.atomic_outputs: set[str] = set()  # kernel args stored with atomic adds
        # Workgroup reductions the C++ side writes for the adapter: (fn, type, fields, merge,
        # identity, float_sum, symmetric), see WGSLKernel.
        self.group_reductions: list[tuple] = []
        self.group_scans: list[tuple] = []  # (fn, type, fields, merge): see WGSLKernel(scans=)
        # Short rows take a smaller workgroup (a power of two, for the tree combine).
        tree = self.reduction_tree
        limit = max_workgroup_invocations()
        self.workgroup = min(POINTWISE_WORKGROUP, limit)
        if tree is not None and self.serial_scan:
            self.workgroup = min(SERIAL_SCAN_WORKGROUP, limit)
        elif tree is not None:
            self.workgroup = min(_reduction_workgroup(self._outer_trees()), limit)
            if isinstance(tree.numel, (int, sympy.Integer)):
                self.workgroup = min(self.workgroup, max(16, 1 << max(int(tree.numel) - 1, 1).bit_length()))
        if len([t for t in self.range_trees if t.is_reduction]) > 1:
            raise NotImplementedError("torch_webgpu compile: tiled reductions")

    def dtype_to_str(self, dtype: torch.dtype) -> str:
        return register_type(dtype)

    # Every reduction loops over its row (no persistent or cooperative variants).
    def should_use_persistent_reduction(self) -> bool:
        return False

    def should_use_cooperative_reduction(self) -> bool:
        return False

    @property
    def reduction_tree(self):
        """The row tree of a reduction kernel (pointwise kernels have one of numel 1)."""
        if not self.features.is_reduction():
            return None
        return next((t for t in self.range_trees if t.is_reduction), None)

    # --------------------------------------------------------------- loads/stores
    def load(self, name: str, index: sympy.Expr):
        var = self.args.input(name)
        if V.graph.is_unspec_arg(name):
            # A 0-dim CPU tensor (an optimizer's step count, a Python scalar Dynamo
            # wrapped): its value comes in as a uniform, read as `var` (kernel_source).
            dtype = V.graph.get_dtype(name)
            value = f"({var} != 0)" if dtype == torch.bool else var
            value_dtype = torch.float32 if dtype.is_floating_point else dtype
            register_type(value_dtype)  # (refuses complex)
            return self.cse.generate(self.loads, value, dtype=value_dtype)
        index = self.prepare_indexing(index)
        # An index computed from loaded values (gather, embedding) is defined in compute.
        indirect = free_symbol_is_type(index, SymT.TMP)
        dtype = V.graph.get_dtype(name)
        register_type(dtype)
        index_str = self.index_to_str(index)
        mask = self._load_mask
        if mask is not None:  # inside ops.masked: the mask is a value of the compute code
            index_str = f"select(0, {index_str}, {mask})"
            indirect = True
        line = f"load_{var}(u32({index_str}))"
        if dtype == torch.int64:
            line = f"i64_narrow({line})"  # raises at the next read-back past 32 bits
            self._declare_once("i64_narrow", lambda: (
                "fn i64_narrow(v: vec2<u32>) -> i32 {\n"
                f"  if (v.y != select(0u, 0xffffffffu, bitcast<i32>(v.x) < 0)) {{ check_failed({self._check(INT64_RANGE)}u); }}\n"
                "  return bitcast<i32>(v.x);\n}"))
        elif dtype == torch.bool:
            line = f"({line} != 0)"
        value_dtype = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
        return self.cse.generate(self.compute if indirect else self.loads, line, dtype=value_dtype)

    def load_seed(self, name: str, offset) -> Any:
        """Seed `offset` of the graph's seeds tensor as its two words (vec2<u32>), for the
        random ops only: a seed is a full int64, past what an i32 register holds."""
        var = self.args.input(name)
        index = self.index_to_str(self.prepare_indexing(sympy.Integer(offset)))
        seed = self.cse.generate(self.compute, f"load_{var}(u32({index}))", dtype=torch.int64)
        self.seed_values.add(str(seed))
        return seed

    def check_bounds(self, expr: sympy.Expr, size: sympy.Expr, lower: bool, upper: bool) -> None:
        # A bad index reports through the device error word (raised at the next read-back,
        # as eager gather/embedding do); its load stays inside the buffer (WebGPU clamps).
        if not (lower or upper):
            return
        index, bound = self.index_to_str(expr), self.index_to_str(size)
        tests = ([f"({index}) < 0"] if lower else []) + ([f"({index}) >= ({bound})"] if upper else [])
        self.compute.writeline(
            f"if ({' || '.join(tests)}) {{ check_failed({self._check(OUT_OF_BOUNDS)}u); }}")

    def _check(self, message: str) -> int:
        """The index k of `check_failed(k)` for a device check with this message."""
        if message not in self.check_messages:
            self.check_messages.append(message)
        return self.check_messages.index(message)

    def _store_line(self, name: str, index: sympy.Expr, value) -> str:
        var = self.args.output(name)
        index = self.prepare_indexing(index)
        dtype = V.graph.get_dtype(name)
        v = convert(str(value), dtype_of(value), dtype)
        if dtype == torch.int64 and str(value) not in self.seed_values:
            v = f"i64_from_i32({v})"
        elif dtype == torch.bool:
            v = f"select(0, 1, {v})"
        return f"store_{var}(u32({self.index_to_str(index)}), {v});"

    def store(self, name: str, index: sympy.Expr, value, mode=None) -> None:
        if mode not in (None, "atomic_add"):
            raise NotImplementedError(f"torch_webgpu compile: store mode {mode}")
        line = self._store_line(name, index, value)
        if mode == "atomic_add":  # scatter adds (embedding backward, index_put accumulate)
            dtype = V.graph.get_dtype(name)
            if dtype not in (torch.float32, torch.int32):
                raise NotImplementedError(f"torch_webgpu compile: atomic adds into {dtype}")
            self.atomic_outputs.add(self.args.output(name))
            line = line.replace("store_", "atomic_add_", 1)
        if self.inside_reduction:
            if self.is_scan:  # (past the row's end invocations hold the last position)
                line = f"if (row_in) {{ {line} }}"
            self.compute.writeline(DeferredLine(name, line))
        else:
            # Outside the row loop of a reduction kernel every thread holds the value:
            # one stores it.
            guard = f"if ({self.row_leader}) {{ " if self.reduction_tree is not None else ""
            self.stores.writeline(DeferredLine(name, guard + line + (" }" if guard else "")))

    def store_reduction(self, name: str, index: sympy.Expr, value) -> None:
        line = self._store_line(name, index, value)
        self.stores.writeline(DeferredLine(name, f"if ({self.row_leader}) {{ {line} }}"))

    # --------------------------------------------------------------- reductions
    def reduction(self, dtype, src_dtype, reduction_type, value):
        cache_key = (src_dtype, reduction_type, value)
        if cache_key in self.cse.reduction_cache:
            return self.cse.reduction_cache[cache_key]
        result = self._reduction(dtype, src_dtype, reduction_type, value)
        self.cse.reduction_cache[cache_key] = result
        return result

    def _shared(self, wtype: str) -> str:
        name = f"shared{next(self.acc_ids)}"
        self.declarations.writeline(f"var<workgroup> {name}: array<{wtype}, {self.workgroup}>;")
        return name

    def _tree(self, body: list[str]) -> None:
        """A tree combine over the workgroup; `body` combines slot `lid` with `lid + s`."""
        self.post_loop.writeline("workgroupBarrier();")
        self.post_loop.writeline(f"for (var s = {self.workgroup // 2}u; s > 0u; s = s >> 1u) {{")
        with self.post_loop.indent():
            self.post_loop.writeline("if (lid < s) {")
            with self.post_loop.indent():
                self.post_loop.writelines(body)
            self.post_loop.writeline("}")
            self.post_loop.writeline("workgroupBarrier();")
        self.post_loop.writeline("}")

    def _group_reduce(self, wtype: str, combine: str, init: str, float_sum: bool = False,
                      fields: str = "", symmetric: bool = True) -> str:
        """The name of a function (v, lid) -> v merging v over the workgroup with `combine`
        ("{a} + {b}"), which the C++ side writes for the adapter at compile time (subgroup
        shuffles, or a workgroup tree), so the generated code is the same everywhere.
        Struct types name their `fields` (shuffled one by one)."""
        fn = f"group_reduce{next(self.acc_ids)}"
        self.declarations.writeline(
            f"fn {fn}_merge(a: {wtype}, b: {wtype}) -> {wtype} {{ return {combine.format(a='a', b='b')}; }}")
        self.group_reductions.append((fn, wtype, fields, f"{fn}_merge", init, float_sum, symmetric))
        return fn

    def _result(self, expr: str, dtype: torch.dtype):
        return self.cse.generate(self.post_loop, expr, dtype=dtype)

    def _reduction(self, dtype, src_dtype, reduction_type, value):
        n = next(self.acc_ids)
        acc = f"acc{n}"
        if reduction_type in ("welford_reduce", "welford_combine"):
            return self._welford(acc, reduction_type, value)
        wtype = register_type(dtype)
        value = convert(str(value), dtype_of(value), dtype) if reduction_type not in ("argmax", "argmin") else str(value)
        if reduction_type in _SUM_LIKE or reduction_type in ("max", "min", "any"):
            if reduction_type in _SUM_LIKE:
                combine, init = _SUM_LIKE[reduction_type]
                init = constant_expr(int(init), dtype)
                if reduction_type == "sum" and wtype == "bool":
                    combine = "{a} || {b}"
                elif dtype == torch.int64 and reduction_type in ("sum", "prod"):
                    op = "add" if reduction_type == "sum" else "mul"
                    combine = int64_checked(op, "{a}", "{b}")
            elif reduction_type == "any":
                combine, init = "{a} || {b}", constant_expr(False, dtype)
            else:
                is_max = reduction_type == "max"
                if wtype == "f32":
                    combine = ("maximum_f32({a}, {b})" if is_max else "minimum_f32({a}, {b})")
                    init = "-f32_inf()" if is_max else "f32_inf()"
                elif wtype == "i32":
                    combine = "max({a}, {b})" if is_max else "min({a}, {b})"
                    init = "i32(-2147483647) - 1" if is_max else "i32(2147483647)"
                else:
                    combine = "{a} || {b}" if is_max else "{a} && {b}"
                    init = "false" if is_max else "true"
            self.indexing_code.writeline(f"var {acc}: {wtype} = {init};")
            self._accumulate([f"{acc} = {combine.format(a=acc, b=value)};"])
            if wtype in ("f32", "i32"):  # subgroup shuffles take these (not bool, not int64)
                fn = self._group_reduce(wtype, combine, init, float_sum=(wtype == "f32" and reduction_type == "sum"))
                return self._result(f"{fn}({acc}, lid)", dtype)
            shared = self._shared(wtype)
            self.post_loop.writeline(f"{shared}[lid] = {acc};")
            self._tree([f"{shared}[lid] = {combine.format(a=f'{shared}[lid]', b=f'{shared}[lid + s]')};"])
            return self._result(f"{shared}[0]", dtype)
        if reduction_type in ("argmax", "argmin"):
            vtype = register_type(src_dtype)
            better = self._arg_better(reduction_type, vtype)
            rindex = f"{self.reduction_tree.prefix}index"
            zero = {"f32": "0.0", "i32": "0", "bool": "false"}[vtype]
            self.indexing_code.writeline(f"var {acc}_v: {vtype} = {zero};")  # index max: empty
            self.indexing_code.writeline(f"var {acc}_i: i32 = i32(2147483647);")
            self._accumulate([f"if ({better}({value}, {rindex}, {acc}_v, {acc}_i)) {{ {acc}_v = {value}; {acc}_i = {rindex}; }}"])
            if vtype != "bool":  # (subgroup shuffles take no bools)
                pair, merge = f"ArgPair_{vtype}", f"{better}_pair"
                self._declare_once(pair, f"struct {pair} {{ v: {vtype}, i: i32 }}")
                self._declare_once(merge, f"fn {merge}(a: {pair}, b: {pair}) -> {pair} {{\n"
                                          f"  if ({better}(b.v, b.i, a.v, a.i)) {{ return b; }}\n  return a;\n}}")
                fn = self._group_reduce(pair, f"{merge}({{a}}, {{b}})", f"{pair}({zero}, i32(2147483647))",
                                        fields="v,i")
                best = self._result(f"{fn}({pair}({acc}_v, {acc}_i), lid)", dtype)
                return self._result(f"{best}.i", dtype)
            sv, si = self._shared(vtype), self._shared("i32")
            self.post_loop.writeline(f"{sv}[lid] = {acc}_v;")
            self.post_loop.writeline(f"{si}[lid] = {acc}_i;")
            self._tree([f"if ({better}({sv}[lid + s], {si}[lid + s], {sv}[lid], {si}[lid])) {{ "
                        f"{sv}[lid] = {sv}[lid + s]; {si}[lid] = {si}[lid + s]; }}"])
            return self._result(f"{si}[0]", dtype)
        raise NotImplementedError(f"torch_webgpu compile: reduction {reduction_type}")

    def _accumulate(self, lines: list[str]) -> None:
        """A reduction's per-element update, in the row loop. In a scan kernel every
        invocation runs the loop body (past the row's end at the last position): only
        those inside the row count."""
        if self.is_scan:
            self.compute.writeline("if (row_in) {")
            with self.compute.indent():
                self.compute.writelines(lines)
            self.compute.writeline("}")
        else:
            self.compute.writelines(lines)

    # --------------------------------------------------------------- scans
    @property
    def is_scan(self) -> bool:
        """Does a node of this kernel scan its rows (cumsum, cumprod, logcumsumexp, cummax)?
        Decided from the node schedule, before any code: the row loop's shape depends on it."""
        if not hasattr(self, "_is_scan"):
            from torch._inductor import ir

            self._is_scan = self.reduction_tree is not None and any(
                isinstance(getattr(getattr(n, "node", None), "data", None), ir.Scan)
                for n in self.features.node_schedule)
        return self._is_scan

    @property
    def serial_scan(self) -> bool:
        """A scan kernel with one invocation per row, walking it in order (no workgroup
        memory, no barriers): software adapters, where a workgroup is one CPU thread and
        every barrier costs a switch of all its invocations (the block scan ran 5-20x
        slower than our eager scans on llvmpipe). TORCH_WEBGPU_COMPILE_SCAN=serial|blocks
        forces either."""
        return self.is_scan and serial_scans()

    @property
    def row_leader(self) -> str:
        """The condition under which one invocation stores a row's value."""
        return "row_active" if self.serial_scan else "lid == 0u && row_active"

    def scan(self, dtypes, combine_fn, values):
        """An inclusive scan along the row: each block of `workgroup` positions is scanned
        by a function the C++ side writes for the adapter (``WGSLKernel(scans=...)``:
        subgroup shuffles and one value per subgroup in workgroup memory, or a
        Hillis-Steele tree), earlier operand first, so operators need not commute; then the
        running carry of the blocks before is combined in front. Invocations past the row's
        end are the block's last slots, marked not live: a merge into them keeps them as
        they are (no combine, so no spurious overflow checks), no slot inside the row reads
        them, and the carry takes the row's last slot. Barriers need uniform control flow,
        hence `is_scan`'s loop."""
        assert self.is_scan and self.inside_reduction
        tree = self.reduction_tree
        name = f"scan{next(self.acc_ids)}"
        # Half types scan in float32, rounded once when stored (as the CPU's accumulation).
        dtypes = [torch.float32 if d in (torch.float16, torch.bfloat16) else d for d in dtypes]
        types = [register_type(d) for d in dtypes]
        fields = [f"v{k}" for k in range(len(dtypes))]
        combine = self._scan_combine(name, dtypes, types, fields, combine_fn)
        wg, base = self.workgroup, f"{tree.prefix}base"
        for k, wtype in enumerate(types):
            self.indexing_code.writeline(f"var {name}_carry{k}: {wtype};")
        inputs = [convert(str(v), dtype_of(v), d) for v, d in zip(values, dtypes)]
        if self.serial_scan:
            return self._serial_scan(name, dtypes, inputs, combine, base)
        rnumel = self.sexpr(self.rename_indexing(tree.numel))
        n = range(len(dtypes))
        # The shuffled struct: bools travel as u32 (subgroup shuffles take no bools).
        slot_types = ["u32" if t == "bool" else t for t in types]
        unpack = [f"(x.v{k} != 0u)" if t == "bool" else f"x.v{k}" for k, t in enumerate(types)]
        pack = [f"select(0u, 1u, c.v{k})" if t == "bool" else f"c.v{k}" for k, t in enumerate(types)]
        slot = f"{name}_slot"
        self.declarations.splice(
            f"struct {slot} {{ {', '.join(f'v{k}: {t}' for k, t in zip(n, slot_types))}, live: u32 }}\n"
            f"fn {name}_merge(a: {slot}, b: {slot}) -> {slot} {{\n"
            f"  if (b.live == 0u) {{ return b; }}\n"
            f"  let c = {combine}({', '.join(u.replace('x.', 'a.') for u in unpack)}, "
            f"{', '.join(u.replace('x.', 'b.') for u in unpack)});\n"
            f"  return {slot}({', '.join(pack)}, 1u);\n}}\n"
            f"var<workgroup> {name}_total: {slot};")
        self.group_scans.append((f"{name}_group", slot, ",".join([*(f"v{k}" for k in n), "live"]),
                                 f"{name}_merge"))
        c = self.compute
        inputs = [f"select(0u, 1u, {x})" if t == "bool" else x for x, t in zip(inputs, types)]
        c.writeline(f"let {name}_s = {name}_group({slot}({', '.join(inputs)}, select(0u, 1u, row_in)), lid);")
        c.writeline(f"if (lid == u32(min({wg}, ({rnumel}) - {base})) - 1u) {{ {name}_total = {name}_s; }}")
        c.writeline("workgroupBarrier();")
        c.writeline(f"let {name}_t = {name}_total;")
        c.writeline("workgroupBarrier();  // (the next block writes the total again)")

        def unpacked(var: str) -> list[str]:
            return [u.replace("x.", f"{var}.") for u in unpack]

        def carries() -> list[str]:
            return [f"{name}_carry{k}" for k in n]

        c.writelines([f"var {name}_r{k} = {r};" for k, r in zip(n, unpacked(f"{name}_s"))])
        c.writeline(f"if ({base} > 0) {{")
        with c.indent():
            c.writeline(f"if (row_in) {{ let {name}_c = {combine}({', '.join(carries() + [f'{name}_r{k}' for k in n])});")
            c.writelines([f"  {name}_r{k} = {name}_c.v{k};" for k in n])
            c.writeline("}")
            c.writeline(f"let {name}_d = {combine}({', '.join(carries() + unpacked(f'{name}_t'))});")
            c.writelines([f"{name}_carry{k} = {name}_d.v{k};" for k in n])
        c.writeline("} else {")
        c.writelines([f"  {name}_carry{k} = {t};" for k, t in zip(n, unpacked(f"{name}_t"))])
        c.writeline("}")
        return tuple(self.cse.generate(c, f"{name}_r{k}", dtype=d) for k, d in enumerate(dtypes))

    def _serial_scan(self, name, dtypes, inputs, combine, base):
        """The running value of a row walked in order by its one invocation."""
        c = self.compute
        n = range(len(dtypes))
        c.writelines([f"let {name}_v{k} = {x};" for k, x in zip(n, inputs)])
        carries = ", ".join(f"{name}_carry{k}" for k in n)
        news = ", ".join(f"{name}_v{k}" for k in n)
        c.writeline(f"if ({base} == 0) {{")
        c.writelines([f"  {name}_carry{k} = {name}_v{k};" for k in n])
        c.writeline(f"}} else {{ let {name}_c = {combine}({carries}, {news});")
        c.writelines([f"  {name}_carry{k} = {name}_c.v{k};" for k in n])
        c.writeline("}")
        return tuple(self.cse.generate(c, f"{name}_carry{k}", dtype=d) for k, d in enumerate(dtypes))

    def _scan_combine(self, name: str, dtypes, types, fields, combine_fn) -> str:
        """`combine_fn` (Inductor ops over two tuples) as a WGSL function of both tuples'
        values returning a struct of the combined ones."""
        saved, self.compute = self.compute, IndentedBuffer()
        try:
            a = tuple(self.cse.namedvar(f"{name}_a{k}", dtype=d) for k, d in enumerate(dtypes))
            b = tuple(self.cse.namedvar(f"{name}_b{k}", dtype=d) for k, d in enumerate(dtypes))
            out = combine_fn(a, b)
            body = self.compute
        finally:
            self.compute = saved
        params = ", ".join(f"{v}: {t}" for v, t in zip((*map(str, a), *map(str, b)), types + types))
        results = ", ".join(convert(str(v), dtype_of(v), d) for v, d in zip(out, dtypes))
        text = IndentedBuffer()
        text.writeline(f"struct {name}_values {{ {', '.join(f'{f}: {t}' for f, t in zip(fields, types))} }}")
        text.writeline(f"fn {name}_combine({params}) -> {name}_values {{")
        with text.indent():
            text.splice(body)
            text.writeline(f"return {name}_values({results});")
        text.writeline("}")
        self.declarations.splice(text)
        return f"{name}_combine"

    def _arg_better(self, reduction_type: str, vtype: str) -> str:
        """A WGSL function: does (v, i) beat the current (av, ai)? NaN beats numbers (as on
        the CPU); ties go to the lower index; index i32 max marks "nothing yet" (a thread
        that saw no element never wins the tree combine, whatever its placeholder value)."""
        name = f"{reduction_type}_better_{vtype}"
        if name in self.helper_names:
            return name
        cmp = ">" if reduction_type == "argmax" else "<"
        if vtype == "f32":
            test = (f"if (i == 2147483647) {{ return false; }}\n"
                    f"  if (ai == 2147483647) {{ return true; }}\n"
                    f"  if (is_nan(av)) {{ return is_nan(v) && i < ai; }}\n"
                    f"  if (is_nan(v)) {{ return true; }}\n"
                    f"  return v {cmp} av || (v == av && i < ai);")
        else:
            # WGSL orders no bools: true > false is v && !av.
            beats = ((f"(v && !av)" if cmp == ">" else f"(!v && av)") if vtype == "bool"
                     else f"v {cmp} av")
            test = (f"if (i == 2147483647) {{ return false; }}\n"
                    f"  if (ai == 2147483647) {{ return true; }}\n"
                    f"  return {beats} || (v == av && i < ai);")
        self._declare_once(name, f"fn {name}(v: {vtype}, i: i32, av: {vtype}, ai: i32) -> bool {{\n  {test}\n}}")
        return name

    @property
    def helper_names(self) -> set[str]:
        if not hasattr(self, "_helper_names"):
            self._helper_names: set[str] = set()
        return self._helper_names

    def _declare_once(self, name: str, text) -> None:
        """Adds a helper's WGSL (a string, or a callable for text that allocates check slots)
        to the kernel's declarations the first time `name` is asked for."""
        if name not in self.helper_names:
            self.helper_names.add(name)
            self.declarations.splice(text() if callable(text) else text)

    def _welford(self, acc: str, reduction_type: str, value):
        # Per thread: Welford's running (mean, m2, weight); then the tree merges pairs with
        # Chan's formula.
        for part in ("mean", "m2", "weight"):
            self.indexing_code.writeline(f"var {acc}_{part}: f32 = 0.0;")
        if reduction_type == "welford_reduce":
            self._accumulate([
                f"{acc}_weight = {acc}_weight + 1.0;",
                f"{{ let delta = {value} - {acc}_mean;",
                f"  {acc}_mean = {acc}_mean + delta / {acc}_weight;",
                f"  {acc}_m2 = {acc}_m2 + delta * ({value} - {acc}_mean); }}",
            ])
        else:
            mean, m2, weight = value
            self._accumulate([f"welford_merge(&{acc}_mean, &{acc}_m2, &{acc}_weight, {mean}, {m2}, {weight});"])
        self._declare_once(
            "welford_merge",
            "fn welford_merge(mean: ptr<function, f32>, m2: ptr<function, f32>,\n"
            "                 weight: ptr<function, f32>, mean_b: f32, m2_b: f32, weight_b: f32) {\n"
            "  let w = *weight + weight_b;\n"
            "  if (w == 0.0) { return; }\n"
            "  let delta = mean_b - *mean;\n"
            "  let fraction = weight_b / w;\n"
            "  *m2 = *m2 + m2_b + delta * delta * (*weight) * fraction;\n"
            "  *mean = *mean + delta * fraction;\n"
            "  *weight = w;\n"
            "}")
        self._declare_once(
            "Welford",
            "struct Welford { mean: f32, m2: f32, weight: f32 }\n"
            "fn welford_pair(a: Welford, b: Welford) -> Welford {\n"
            "  var mean = a.mean; var m2 = a.m2; var weight = a.weight;\n"
            "  welford_merge(&mean, &m2, &weight, b.mean, b.m2, b.weight);\n"
            "  return Welford(mean, m2, weight);\n}")
        # Chan's merge depends on the order of its operands: the lanes of a subgroup take
        # the first one's result.
        fn = self._group_reduce("Welford", "welford_pair({a}, {b})", "Welford(0.0, 0.0, 0.0)",
                                fields="mean,m2,weight", symmetric=False)
        total = self._result(f"{fn}(Welford({acc}_mean, {acc}_m2, {acc}_weight), lid)", torch.float32)
        return tuple(self._result(f"{total}.{p}", torch.float32) for p in ("mean", "m2", "weight"))

    # --------------------------------------------------------------- indexing
    def codegen_iteration_ranges_entry(self, entry) -> None:
        line = f"let {entry.name} = {self.sexpr(self.rename_indexing(entry.expr))};"
        # Entries of the reduction dimension change every loop step: they open the loop body
        # (a buffer of their own: Inductor may swap `loads` out while indexing).
        (self.loop_entries if entry.is_reduction else self.indexing_code).writeline(line)

    def codegen_body(self) -> None:
        """Flushes pending loads/compute/stores: inside a row loop when in a reduction."""
        tree = self.reduction_tree
        if tree is not None and self.inside_reduction and (self.loads or self.compute):
            prefix = tree.prefix
            rnumel = self.sexpr(self.rename_indexing(tree.numel))
            step = 1 if self.serial_scan else self.workgroup
            self.body.writeline(
                f"for (var {prefix}base = 0; {prefix}base < {rnumel}; {prefix}base = {prefix}base + {step}) {{")
            with self.body.indent():
                guarded = False
                if self.serial_scan:
                    self.body.writeline(f"let {tree.name} = {prefix}base;")
                    self.body.writeline("let row_in = row_active;")
                elif self.is_scan:
                    # Uniform control flow for the scan's barriers: every invocation runs
                    # the body, those past the row's end at its last position.
                    self.body.writeline(f"let row_in = {prefix}base + i32(lid) < {rnumel} && row_active;")
                    self.body.writeline(f"let {tree.name} = min({prefix}base + i32(lid), {rnumel} - 1);")
                else:
                    guarded = True
                    self.body.writeline(f"let {tree.name} = {prefix}base + i32(lid);")
                    self.body.writeline(f"if ({tree.name} < {rnumel} && row_active) {{")
                    self.body.do_indent()
                self.body.splice(self.loop_entries)
                self.body.splice(self.loads)
                self.body.splice(self.compute)
                if guarded:
                    self.body.do_unindent()
                    self.body.writeline("}")
            self.body.writeline("}")
            # Values computed in the loop are out of scope now; reduction results stay.
            keep = [v for item in self.cse.reduction_cache.values()
                    for v in (item if isinstance(item, tuple) else (item,))]
            self.cse.invalidate(_ordered(keep))
            for node in self.range_tree_nodes.values():
                if node.is_reduction:
                    node.cache_clear()
        else:
            self.body.splice(self.loads)
            self.body.splice(self.compute)
        self.body.splice(self.post_loop)
        self.body.splice(self.stores)
        self.loop_entries.clear()
        self.loads.clear()
        self.compute.clear()
        self.post_loop.clear()
        self.stores.clear()

    # --------------------------------------------------------------- frame
    def _outer_trees(self):
        return [t for t in self.range_trees if not t.is_reduction]

    def main_code(self) -> str:
        """The kernel's part of main: its indices from `idx` (or `group`), loads, compute
        and stores, after a comment naming its FX nodes."""
        self.codegen_body()
        reduction = self.reduction_tree is not None
        code = IndentedBuffer()
        # The linear id (one per element, or one per row) splits into the outer trees, the
        # x tree varying fastest.
        trees = sorted(self._outer_trees(), key=lambda t: t.prefix != "x")
        # (a symbolic numel prints as a product: parenthesized)
        numels = [f"({self.sexpr(self.rename_indexing(t.numel))})" for t in trees]
        total = " * ".join(numels) or "1"
        if self.serial_scan:
            # One invocation per row (the frame returns past the grid's last invocation).
            code.writeline(f"let row_active = i32(idx) < {total};")
            code.writeline("let linear = i32(idx);")
        elif reduction and self.is_scan:
            # Workgroups past the last row (a grid split in two dimensions) read the last
            # row: a scan's invocations all run its body, and no load may leave its tensor.
            code.writeline(f"let row_active = i32(group) < {total};")
            code.writeline(f"let linear = min(i32(group), {total} - 1);")
        else:
            code.writeline(f"let linear = i32({'group' if reduction else 'idx'});")
            if reduction:
                code.writeline(f"let row_active = linear < {total};")
        rest = "linear"
        for tree, numel in zip(trees, numels):
            code.writeline(f"let {tree.name} = {rest} % {numel};")
            rest = f"({rest} / {numel})"
        code.splice(self.indexing_code)
        code.splice(self.body)
        origins = sorted({o.name for n in self.features.node_schedule
                          if hasattr(n, "node") and n.node is not None
                          for o in getattr(n.node, "origins", ())})
        comment = f"// from FX nodes: {', '.join(origins)}\n" if origins else ""
        return comment + code.getvalue()

    def grid_count(self) -> sympy.Expr:
        """Invocations (pointwise) or workgroups (reductions) of one launch."""
        count = sympy.Integer(1)
        for tree in self._outer_trees():
            count = count * tree.numel
        return count

    def codegen_kernel(self, name: str | None = None) -> str:
        grid = "groups" if self.reduction_tree is not None and not self.serial_scan else "invocations"
        return kernel_source(self, self.main_code(), grid)

    def call_kernel(self, name: str, node: Any = None, deallocate_ws: bool = True) -> None:
        write_launch(name, self.args, self.grid_count())


def aliased_inputs(args) -> dict:
    """{in_ptr: out_ptr} for buffers a kernel reads and writes through two arguments
    (a mutated graph input, as batch_norm's running stats): WebGPU refuses a buffer
    bound twice when one binding is writable, so such loads read the output binding."""
    outputs = args.output_buffers
    return {inner: outputs[buf] for buf, inner in args.input_buffers.items()
            if isinstance(outputs.get(buf), str) and outputs[buf].startswith("out_ptr")}


def kernel_source(kernel, text: str, grid: str) -> str:
    """The WGSLKernel(...) expression of a kernel whose main is `text`. `kernel` gives the
    arguments (``args``) and what its code gathered: ``atomic_outputs``, ``libraries``,
    ``declarations``, ``check_messages``, ``workgroup`` (a WebGPUKernel or a combo)."""
    _, _, precompile_args, _ = kernel.args.python_argdefs()
    aliased = aliased_inputs(kernel.args)
    tensors, uniforms = [], []
    for arg in precompile_args:
        if isinstance(arg, TensorArg) and arg.name in aliased:
            continue
        if isinstance(arg, TensorArg) and V.graph.is_unspec_arg(arg.buffer):
            uniforms.append(f"({arg.name!r}, {cpu_scalar_type(arg.dtype)!r})")
        elif isinstance(arg, TensorArg):
            access = "read" if arg.name.startswith("in_ptr") else "read_write"
            if arg.name in kernel.atomic_outputs:
                access = "read_write_atomic"
            tensors.append(f"TensorArg({arg.name!r}, {arg.dtype}, {access!r})")
        elif isinstance(arg, SizeArg):
            uniforms.append(f"({arg.name!r}, 'i32')")
        else:
            raise NotImplementedError(f"torch_webgpu compile: kernel argument {arg}")
    for inner, output in aliased.items():
        text = re.sub(rf"\bload_{inner}\(", f"load_{output}(", text)
    body = textwrap.indent(text, "  ")
    return (
        "WGSLKernel('''\n" + body + "''',\n"
        f"    [{', '.join(tensors)}],\n"
        f"    [{', '.join(uniforms)}],\n"
        f"    grid={grid!r}, workgroup={kernel.workgroup},\n"
        f"    libraries={sorted(kernel.libraries)!r},\n"
        f"    declarations='''\n{kernel.declarations.getvalue()}''',\n"
        f"    checks={kernel.check_messages!r},\n"
        f"    reductions={list(kernel.group_reductions)!r},\n"
        f"    scans={list(getattr(kernel, 'group_scans', ()))!r})"
    )


def cpu_scalar_type(dtype: torch.dtype) -> str:
    """The uniform type a 0-dim CPU tensor's value takes in a kernel."""
    return "f32" if dtype.is_floating_point else "i32"


def write_launch(name: str, args, count: sympy.Expr) -> None:
    """The wrapper's call of kernel `name` over `count` invocations (or workgroups). 0-dim
    CPU tensors pass their values as uniforms (``.item()``), as Inductor does for cuda."""
    wrapper = V.graph.wrapper_code
    _, call_args, precompile_args, _ = args.python_argdefs()
    aliased = aliased_inputs(args)

    def scalar(a):
        return isinstance(a, TensorArg) and V.graph.is_unspec_arg(a.buffer)

    tensors = [c for c, a in zip(call_args, precompile_args)
               if isinstance(a, TensorArg) and a.name not in aliased and not scalar(a)]
    sizes = [f"{c}.item()" if scalar(a) else str(c) for c, a in zip(call_args, precompile_args)
             if isinstance(a, SizeArg) or (scalar(a) and a.name not in aliased)]
    count_str = wrapper.codegen_python_sizevar(V.graph.sizevars.simplify(count))
    wrapper.writeline(
        f"{name}.launch(({''.join(t + ', ' for t in tensors)}), "
        f"({''.join(s + ', ' for s in sizes)}), {count_str})")


def _ordered(values):
    return OrderedSet(values)


@functools.cache
def max_kernel_buffers() -> int:
    """Storage bindings one kernel may have (the adapter's per-stage limit)."""
    return torch.webgpu.get_device_properties().max_storage_buffers_per_shader_stage


def _reduction_workgroup(outer_trees) -> int:
    """Invocations of a reduction's workgroup (before the cap by its row length)."""
    forced = os.environ.get("TORCH_WEBGPU_COMPILE_REDUCTION_THREADS")
    if forced:
        if not forced.isdigit() or int(forced) < 1 or int(forced) & (int(forced) - 1):
            raise ValueError(f"TORCH_WEBGPU_COMPILE_REDUCTION_THREADS={forced!r}: a power of two expected")
        return int(forced)
    rows = sympy.Mul(*[t.numel for t in outer_trees])
    if rows.is_number and int(rows) < FEW_ROWS and not _C._software_adapter():
        return FEW_ROWS_WORKGROUP
    return REDUCTION_WORKGROUP


@functools.cache
def max_workgroup_invocations() -> int:
    return torch.webgpu.get_device_properties().max_compute_invocations_per_workgroup


def serial_scans() -> bool:
    """Whether scan kernels walk each row in one invocation (WebGPUKernel.serial_scan)."""
    forced = os.environ.get("TORCH_WEBGPU_COMPILE_SCAN", "")
    if forced not in ("", "serial", "blocks"):
        raise ValueError(f"TORCH_WEBGPU_COMPILE_SCAN={forced!r}: 'serial' or 'blocks' expected")
    return forced == "serial" if forced else bool(_C._software_adapter())


def _scans_and_reductions(*groups) -> tuple[bool, bool]:
    """Whether the scheduler nodes hold a scan, and a reduction other than a scan."""
    from torch._inductor import ir

    scan = reduction = False
    for group in groups:
        for node in group.get_nodes():
            if isinstance(getattr(getattr(node, "node", None), "data", None), ir.Scan):
                scan = True
            elif node.is_reduction():
                reduction = True
    return scan, reduction


def fits(buffers: set[str]) -> bool:
    """One kernel may bind these buffers, keeping a binding for the device error word (a
    kernel with bounds checks binds it; whether one will is not known when fusing)."""
    return len(buffers) + 1 <= max_kernel_buffers()


def buffers_of(*nodes) -> set[str]:
    """Buffers a fused kernel of `nodes` may bind (an upper bound: buffers that stay
    inside the kernel are counted too)."""
    names: set[str] = set()
    for group in nodes:
        for node in group.get_nodes():
            names.update(dep.name for dep in node.read_writes.reads | node.read_writes.writes)
    return names


class WebGPUScheduling(SIMDScheduling):
    kernel_type = WebGPUKernel  # type: ignore[assignment]
    # Scans (cumsum, cumprod, logcumsumexp; cummax/cummin carry their indices: a tuple).
    backend_features = OrderedSet([BackendFeature.SCAN, BackendFeature.TUPLE_REDUCTION])

    @classmethod
    def get_backend_features(cls, device) -> OrderedSet:
        return cls.backend_features

    def can_fuse(self, node1, node2) -> bool:
        # WebGPU caps the storage buffers of one shader stage (8 to 10 on common adapters).
        if not fits(buffers_of(node1, node2)):
            return False
        # A serial scan's invocation owns a whole row: a workgroup reduction has no place in it.
        if serial_scans() and all(_scans_and_reductions(node1, node2)):
            return False
        return super().can_fuse(node1, node2)

    can_fuse_vertical = can_fuse
    can_fuse_horizontal = can_fuse

    def codegen_combo_kernel(self, combo_kernel_node) -> None:
        from .combo_kernels import codegen

        codegen(self, combo_kernel_node)

    def define_kernel(self, src_code: str, node_schedule, kernel, kind: str = "") -> str:
        wrapper = V.graph.wrapper_code
        if src_code in wrapper.src_to_kernel:
            return wrapper.src_to_kernel[src_code]
        fused = get_fused_kernel_name(node_schedule, config.triton.descriptive_names)
        name = f"wgsl_{kind + '_' if kind else ''}{fused}_{wrapper.next_kernel_suffix()}"
        wrapper.src_to_kernel[src_code] = name
        origins, detailed_origins = get_kernel_metadata(node_schedule, wrapper)
        # The name goes into the kernel too: profiles show it (src_code ends the call).
        named = src_code[:src_code.rindex(")")] + f", name={name!r})"
        wrapper.define_kernel(name, named, f"{origins}\n{detailed_origins}", gpu=False)
        return name
