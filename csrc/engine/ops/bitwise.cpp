// bitwise_and/or/xor (Tensor, Scalar) on integers and bools, and logical_and/or/xor on any
// dtype: attention masks are combined with them.
#include "engine/op_registry.h"
#include "engine/ops/pointwise.h"

namespace twgpu::engine {
namespace {

PointwiseInput operand(OpBuilder& b, size_t i, Compute c) {
  if (b.value(i).kind == ValueKind::Tensor) return {&b.tensor(i), {}};
  b.check(b.value(i).kind != ValueKind::Float, "needs an integer or bool scalar");
  return {nullptr, ScalarBits::from_int(b.integer(i), c)};
}

std::vector<const DeviceTensor*> tensor_args(OpBuilder& b) {
  std::vector<const DeviceTensor*> ts = {&b.tensor(0)};
  if (b.value(1).kind == ValueKind::Tensor) ts.push_back(&b.tensor(1));
  return ts;
}

void bitwise(OpBuilder& b, const char* kernel) {
  const DType out_dtype = b.output(0).dtype;
  b.check(!is_floating(out_dtype), std::string(kernel) + " needs integer or bool tensors, got " +
                                       b.output(0).describe());
  for (const DeviceTensor* t : tensor_args(b))
    b.check(!is_floating(t->dtype), std::string(kernel) + " needs integer or bool tensors, got " + t->describe());
  const DeviceTensor& out = b.checked_output(0, broadcast_shapes(b, tensor_args(b)), out_dtype);
  const Compute c = compute_type_for(out_dtype);
  b.record(pointwise_launch(kernel, c, out, {operand(b, 0, c), operand(b, 1, c)}));
}

// Truth values compare in the inputs' common type (a float's -0.0 and NaN as eager does).
void logical(OpBuilder& b, const char* kernel) {
  const DeviceTensor &x = b.tensor(0), &y = b.tensor(1);
  Compute c = Compute::I32;
  if (is_floating(x.dtype) || is_floating(y.dtype)) c = Compute::F32;
  else if (x.dtype == DType::Int64 || y.dtype == DType::Int64) c = Compute::I64;
  const DeviceTensor& out = b.checked_output(0, broadcast_shapes(b, {&x, &y}), b.output(0).dtype);
  b.record(pointwise_launch(kernel, c, out, {{&x, {}}, {&y, {}}}));
}

void bitwise_and(OpBuilder& b) { bitwise(b, "bitwise_and"); }
void bitwise_or(OpBuilder& b) { bitwise(b, "bitwise_or"); }
void bitwise_xor(OpBuilder& b) { bitwise(b, "bitwise_xor"); }
void logical_and(OpBuilder& b) { logical(b, "logical_and"); }
void logical_or(OpBuilder& b) { logical(b, "logical_or"); }
void logical_xor(OpBuilder& b) { logical(b, "logical_xor"); }

}  // namespace

TWGPU_ENGINE_OP("aten::bitwise_and.Tensor", bitwise_and);
TWGPU_ENGINE_OP("aten::bitwise_and.Scalar", bitwise_and);
TWGPU_ENGINE_OP("aten::bitwise_or.Tensor", bitwise_or);
TWGPU_ENGINE_OP("aten::bitwise_or.Scalar", bitwise_or);
TWGPU_ENGINE_OP("aten::bitwise_xor.Tensor", bitwise_xor);
TWGPU_ENGINE_OP("aten::bitwise_xor.Scalar", bitwise_xor);
TWGPU_ENGINE_OP("aten::logical_and", logical_and);
TWGPU_ENGINE_OP("aten::logical_or", logical_or);
TWGPU_ENGINE_OP("aten::logical_xor", logical_xor);

}  // namespace twgpu::engine
