// add / sub / mul / div, Tensor and Scalar forms, with broadcasting and the program's
// output dtype as the result type (the exporter recorded torch's type promotion).
#include "engine/op_registry.h"
#include "engine/ops/pointwise.h"

namespace twgpu::engine {
namespace {

// A tensor argument, or a number converted to the compute type.
PointwiseInput operand(OpBuilder& b, size_t i, Compute c) {
  if (b.value(i).kind == ValueKind::Tensor) return {&b.tensor(i), {}};
  if (b.value(i).kind == ValueKind::Int || b.value(i).kind == ValueKind::Bool)
    return {nullptr, ScalarBits::from_int(b.integer(i), c)};
  return {nullptr, ScalarBits::from_double(b.real(i), c)};
}

ScalarBits number(OpBuilder& b, size_t i, double dflt, Compute c) {
  if (b.is_none(i)) return ScalarBits::from_double(dflt, c);
  const ValueKind k = b.value(i).kind;
  if (k == ValueKind::Int || k == ValueKind::Bool) return ScalarBits::from_int(b.integer(i), c);
  return ScalarBits::from_double(b.real(i), c);
}

void binary(OpBuilder& b, const std::string& kernel, bool has_alpha) {
  const DeviceTensor& self = b.tensor(0);
  std::vector<const DeviceTensor*> ts = {&self};
  if (b.value(1).kind == ValueKind::Tensor) ts.push_back(&b.tensor(1));
  const DType out_dtype = b.output(0).dtype;
  const Compute c = kernel == "div_true" ? Compute::F32 : compute_type_for(out_dtype);
  if (kernel == "div_true" && !is_floating(out_dtype))
    b.fail("true division needs a floating output, got " + b.output(0).describe());
  const DeviceTensor& out = b.checked_output(0, broadcast_shapes(b, ts), out_dtype);
  ScalarBits alpha = has_alpha ? number(b, 2, 1.0, c) : ScalarBits{};
  b.record(pointwise_launch(kernel, c, out, {operand(b, 0, c), operand(b, 1, c)}, alpha));
}

void div_mode(OpBuilder& b) {
  const std::string mode = b.string_or(2, "");
  if (mode.empty()) return binary(b, "div_true", false);
  if (mode == "trunc") return binary(b, "div_trunc", false);
  if (mode == "floor") return binary(b, "div_floor", false);
  b.fail("rounding_mode must be \"trunc\", \"floor\" or none, got \"" + mode + "\"");
}

void add(OpBuilder& b) { binary(b, "add", true); }
void sub(OpBuilder& b) { binary(b, "sub", true); }
void mul(OpBuilder& b) { binary(b, "mul", false); }
void div(OpBuilder& b) { binary(b, "div_true", false); }

}  // namespace

TWGPU_ENGINE_OP("aten::add.Tensor", add);
TWGPU_ENGINE_OP("aten::add.Scalar", add);
TWGPU_ENGINE_OP("aten::sub.Tensor", sub);
TWGPU_ENGINE_OP("aten::sub.Scalar", sub);
TWGPU_ENGINE_OP("aten::mul.Tensor", mul);
TWGPU_ENGINE_OP("aten::mul.Scalar", mul);
TWGPU_ENGINE_OP("aten::div.Tensor", div);
TWGPU_ENGINE_OP("aten::div.Scalar", div);
TWGPU_ENGINE_OP("aten::div.Tensor_mode", div_mode);
TWGPU_ENGINE_OP("aten::div.Scalar_mode", div_mode);

}  // namespace twgpu::engine
