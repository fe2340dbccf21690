#include "kernels/scan.h"

#include <string>

#include "kernels/kernel_program.h"
#include "runtime/runtime.h"

namespace twgpu {
namespace {

const char* op_name(ScanOp op) {
  switch (op) {
    case ScanOp::Sum: return "sum";
    case ScanOp::Prod: return "prod";
    case ScanOp::Max: return "max";
    case ScanOp::Min: return "min";
    case ScanOp::LogSumExp: return "logsumexp";
  }
  return "?";
}

// `fn combine(acc, x) -> T` for the integer and float ops without indices.
std::string combine_function(ScanOp op, Compute c) {
  const std::string T = c == Compute::F32 ? "f32" : c == Compute::I32 ? "i32" : "vec2<u32>";
  std::string body;
  if (op == ScanOp::Prod) {
    body = c == Compute::I64 ? "i64_mul(a, x)" : "a * x";
  } else if (op == ScanOp::Sum) {
    body = c == Compute::I64 ? "i64_add(a, x)" : "a + x";
  } else if (op == ScanOp::LogSumExp) {
    // The CPU's log-add-exp: NaN propagates, equal infinities stay as they are.
    return "fn combine(a: f32, x: f32) -> f32 {\n"
           "  if (is_nan(a) || is_nan(x)) { return f32_nan(); }\n"
           "  let lo = min(a, x);\n"
           "  let hi = max(a, x);\n"
           "  if (lo != hi || is_finite(lo)) { return hi + log1p_f32(exp(lo - hi)); }\n"
           "  return a;\n"
           "}\n";
  }
  return "fn combine(a: " + T + ", x: " + T + ") -> " + T + " { return " + body + "; }\n";
}

// True when x replaces the running extreme `a` (ties move to the later index; a NaN wins
// and stays, later NaNs take its place), as the CPU's cummax/cummin do.
std::string replaces_function(ScanOp op, Compute c) {
  const bool is_max = op == ScanOp::Max;
  if (c == Compute::F32)
    return std::string("fn replaces(a: f32, x: f32) -> bool { return is_nan(x) || (!is_nan(a) && ") +
           (is_max ? "x >= a" : "x <= a") + "); }\n";
  if (c == Compute::I32)
    return std::string("fn replaces(a: i32, x: i32) -> bool { return ") +
           (is_max ? "x >= a" : "x <= a") + "; }\n";
  return std::string("fn replaces(a: vec2<u32>, x: vec2<u32>) -> bool { return ") +
         (is_max ? "!i64_lt(x, a)" : "!i64_lt(a, x)") + "; }\n";
}

}  // namespace

void scan_rows(Context& ctx, const ScanArgs& a) {
  if (a.rows == 0 || a.n == 0) return;
  if (a.in_offset + a.rows * a.n >= (1ull << 32) || a.out_offset + a.rows * a.n >= (1ull << 32))
    fail(ErrorKind::Unsupported, "torch_webgpu: scan over too many elements");
  const Compute c = compute_type_for(a.dtype);
  const bool with_indices = a.op == ScanOp::Max || a.op == ScanOp::Min;
  KernelLaunch l;
  l.key = std::string("scan:") + op_name(a.op) + ":" + dtype_name(a.dtype);
  l.buffers = {{a.in, Access::Read, false}, {a.out, Access::ReadWrite, is_subword(a.dtype)}};
  if (with_indices) l.buffers.push_back({a.indices, Access::ReadWrite, false});
  l.uniforms = {0, 0, 0, 0, static_cast<uint32_t>(a.in_offset), static_cast<uint32_t>(a.out_offset),
                static_cast<uint32_t>(a.indices_offset), static_cast<uint32_t>(a.n)};
  l.count = a.rows;
  l.workgroup = 64;
  const ScanOp op = a.op;
  const DType dtype = a.dtype;
  l.body = [&l, op, dtype, c, with_indices] {
    std::string s = kernel_load("load_in", l.buffers, 0, dtype) +
                    kernel_store("store_out", l.buffers, 1, dtype, c);
    if (with_indices) {
      s += kernel_store("store_index", l.buffers, 2, DType::Int64, Compute::I64) +
           replaces_function(op, c);
    } else if (!(op == ScanOp::Sum && c == Compute::F32)) {
      s += combine_function(op, c);
    }
    s += kernel_main(Grid::Invocations, 64) +
         "  let n = uw(7u);\n"
         "  let src = uw(4u) + idx * n;\n"
         "  let dst = uw(5u) + idx * n;\n"
         "  var acc = load_in(src);\n"
         "  store_out(dst, acc);\n";
    if (with_indices) {
      s += "  let dst_index = uw(6u) + idx * n;\n"
           "  var at = 0u;\n"
           "  store_index(dst_index, vec2<u32>(0u));\n"
           "  for (var i = 1u; i < n; i = i + 1u) {\n"
           "    let x = load_in(src + i);\n"
           "    if (replaces(acc, x)) { acc = x; at = i; }\n"
           "    store_out(dst + i, acc);\n"
           "    store_index(dst_index + i, vec2<u32>(at, 0u));\n"
           "  }\n";
    } else if (op == ScanOp::Sum && c == Compute::F32) {
      // Compensated (Neumaier) summation: the CPU accumulates floats in double.
      s += "  var comp = 0.0;\n"
           "  for (var i = 1u; i < n; i = i + 1u) {\n"
           "    let x = load_in(src + i);\n"
           "    let t = acc + x;\n"
           "    if (is_finite(t)) {\n"
           "      if (abs(acc) >= abs(x)) { comp = comp + ((acc - t) + x); }\n"
           "      else { comp = comp + ((x - t) + acc); }\n"
           "    }\n"
           "    acc = t;\n"
           "    store_out(dst + i, select(acc, acc + comp, is_finite(acc)));\n"
           "  }\n";
    } else {
      s += "  for (var i = 1u; i < n; i = i + 1u) {\n"
           "    acc = combine(acc, load_in(src + i));\n"
           "    store_out(dst + i, acc);\n"
           "  }\n";
    }
    return s + "}\n";
  };
  launch_kernel(ctx, l);
}

}  // namespace twgpu
