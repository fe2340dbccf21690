// Comparisons (eq/ne/lt/le/gt/ge, Tensor and Scalar), logical_not, where, and the fills
// full / full_like / scalar_tensor: what masks (e.g. attention's NaN check) are made of.
#include "engine/op_registry.h"
#include "engine/ops/pointwise.h"

namespace twgpu::engine {
namespace {

// The comparison's compute type: the inputs' common type (a number joins a tensor's).
Compute common_compute(const DeviceTensor& a, const DeviceTensor* other, bool float_scalar) {
  if (is_floating(a.dtype) || (other && is_floating(other->dtype)) || float_scalar) return Compute::F32;
  if (a.dtype == DType::Int64 || (other && other->dtype == DType::Int64)) return Compute::I64;
  return Compute::I32;
}

void compare(OpBuilder& b, const std::string& kernel) {
  const DeviceTensor& a = b.tensor(0);
  const bool tensor_other = b.value(1).kind == ValueKind::Tensor;
  const DeviceTensor* other = tensor_other ? &b.tensor(1) : nullptr;
  const Compute c = common_compute(a, other, !tensor_other && b.value(1).kind == ValueKind::Float);
  std::vector<const DeviceTensor*> ts = {&a};
  if (other) ts.push_back(other);
  const DeviceTensor& out = b.checked_output(0, broadcast_shapes(b, ts), DType::Bool);
  PointwiseInput rhs{other, {}};
  if (!other)
    rhs.scalar = b.value(1).kind == ValueKind::Float ? ScalarBits::from_double(b.real(1), c)
                                                      : ScalarBits::from_int(b.integer(1), c);
  b.record(pointwise_launch(kernel, c, out, {{&a, {}}, rhs}));
}

void logical_not(OpBuilder& b) {
  const DeviceTensor& a = b.tensor(0);
  const DeviceTensor& out = b.checked_output(0, a.shape, b.output(0).dtype);
  b.record(pointwise_launch("logical_not", compute_type_for(a.dtype), out, {{&a, {}}}));
}

void where(OpBuilder& b) {
  const DeviceTensor &cond = b.tensor(0), &x = b.tensor(1), &y = b.tensor(2);
  const DeviceTensor& out = b.checked_output(0, broadcast_shapes(b, {&cond, &x, &y}), b.output(0).dtype);
  b.record(pointwise_launch("where", compute_type_for(out.dtype), out, {{&cond, {}}, {&x, {}}, {&y, {}}}));
}

void fill(OpBuilder& b, size_t value_arg) {
  const DeviceTensor& out = b.checked_output(0, b.output(0).shape, b.output(0).dtype);
  const Compute c = compute_type_for(out.dtype);
  const ValueKind k = b.value(value_arg).kind;
  const ScalarBits v = k == ValueKind::Float ? ScalarBits::from_double(b.real(value_arg), c)
                                             : ScalarBits::from_int(b.integer(value_arg), c);
  b.record(pointwise_launch("fill", c, out, {}, v));
}

void full_like(OpBuilder& b) {
  b.check(b.tensor(0).shape == b.output(0).shape, "output shape differs from the input's");
  fill(b, 1);
}
void full(OpBuilder& b) {
  b.check(b.ints(0) == b.output(0).shape, "output shape differs from the size argument");
  fill(b, 1);
}

// scalar_tensor(value, dtype, ...): a 0-d fill.
void scalar_tensor(OpBuilder& b) {
  b.check(b.output(0).shape.empty(), "output must be 0-d");
  fill(b, 0);
}

void eq(OpBuilder& b) { compare(b, "eq"); }
void ne(OpBuilder& b) { compare(b, "ne"); }
void lt(OpBuilder& b) { compare(b, "lt"); }
void le(OpBuilder& b) { compare(b, "le"); }
void gt(OpBuilder& b) { compare(b, "gt"); }
void ge(OpBuilder& b) { compare(b, "ge"); }

}  // namespace

TWGPU_ENGINE_OP("aten::eq.Tensor", eq);
TWGPU_ENGINE_OP("aten::eq.Scalar", eq);
TWGPU_ENGINE_OP("aten::ne.Tensor", ne);
TWGPU_ENGINE_OP("aten::ne.Scalar", ne);
TWGPU_ENGINE_OP("aten::lt.Tensor", lt);
TWGPU_ENGINE_OP("aten::lt.Scalar", lt);
TWGPU_ENGINE_OP("aten::le.Tensor", le);
TWGPU_ENGINE_OP("aten::le.Scalar", le);
TWGPU_ENGINE_OP("aten::gt.Tensor", gt);
TWGPU_ENGINE_OP("aten::gt.Scalar", gt);
TWGPU_ENGINE_OP("aten::ge.Tensor", ge);
TWGPU_ENGINE_OP("aten::ge.Scalar", ge);
TWGPU_ENGINE_OP("aten::logical_not", logical_not);
TWGPU_ENGINE_OP("aten::where.self", where);
TWGPU_ENGINE_OP("aten::full_like", full_like);
TWGPU_ENGINE_OP("aten::full", full);
TWGPU_ENGINE_OP("aten::scalar_tensor", scalar_tensor);

}  // namespace twgpu::engine
