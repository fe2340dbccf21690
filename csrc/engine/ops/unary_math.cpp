// Pointwise math from the elementwise table (exp, log, sqrt, rsqrt, neg, abs, erf, ...),
// clamp with scalar bounds, pow with a scalar or tensor exponent, maximum / minimum.
#include "engine/op_registry.h"
#include "engine/ops/pointwise.h"
#include "kernels/elementwise.h"

namespace twgpu::engine {
namespace {

// One kernel of the elementwise table over one input, in the input's compute type.
template <const char* Kernel>
void unary(OpBuilder& b) {
  const DeviceTensor& x = b.tensor(0);
  const DeviceTensor& out = b.checked_output(0, x.shape, b.output(0).dtype);
  const Compute c = compute_type_for(out.dtype);
  b.check(elementwise_supports(Kernel, c), std::string("no ") + compute_name(c) + " kernel for " + x.describe());
  b.record(pointwise_launch(Kernel, c, out, {{&x, {}}}));
}

ScalarBits bound(OpBuilder& b, size_t i, Compute c) {
  return b.value(i).kind == ValueKind::Float ? ScalarBits::from_double(b.real(i), c)
                                             : ScalarBits::from_int(b.integer(i), c);
}

void clamp(OpBuilder& b) {
  const DeviceTensor& x = b.tensor(0);
  const DeviceTensor& out = b.checked_output(0, x.shape, b.output(0).dtype);
  b.check(out.dtype == x.dtype, "clamp with a result dtype other than the input's is not supported yet");
  const Compute c = compute_type_for(out.dtype);
  const bool lo = !b.is_none(1), hi = !b.is_none(2);
  b.check(lo || hi, "at least one of min and max must not be None");
  if (lo && hi) b.record(pointwise_launch("clamp_s", c, out, {{&x, {}}}, bound(b, 1, c), bound(b, 2, c)));
  else b.record(pointwise_launch(lo ? "clamp_min_s" : "clamp_max_s", c, out, {{&x, {}}}, bound(b, lo ? 1 : 2, c)));
}

// pow: as eager, exponents 0.5 and -0.5 of a float base take sqrt / rsqrt.
void pow_op(OpBuilder& b) {
  const DeviceTensor& x = b.tensor(0);
  const bool tensor_exp = b.value(1).kind == ValueKind::Tensor;
  std::vector<const DeviceTensor*> ts = {&x};
  if (tensor_exp) ts.push_back(&b.tensor(1));
  const DeviceTensor& out = b.checked_output(0, broadcast_shapes(b, ts), b.output(0).dtype);
  const Compute c = compute_type_for(out.dtype);
  if (tensor_exp) return b.record(pointwise_launch("pow", c, out, {{&x, {}}, {&b.tensor(1), {}}}));
  const bool float_exp = b.value(1).kind == ValueKind::Float;
  const double e = b.real(1);
  b.check(!(c != Compute::F32 && !float_exp && e < 0), "Integers to negative integer powers are not allowed.");
  const char* kernel = "pow";
  if (c == Compute::F32 && e == 0.5) kernel = "pow_sqrt";
  if (c == Compute::F32 && e == -0.5) kernel = "pow_rsqrt";
  b.record(pointwise_launch(kernel, c, out, {{&x, {}}, {nullptr, bound(b, 1, c)}}));
}

template <const char* Kernel>
void binary_tensor(OpBuilder& b) {
  const DeviceTensor &x = b.tensor(0), &y = b.tensor(1);
  const DeviceTensor& out = b.checked_output(0, broadcast_shapes(b, {&x, &y}), b.output(0).dtype);
  b.record(pointwise_launch(Kernel, compute_type_for(out.dtype), out, {{&x, {}}, {&y, {}}}));
}

constexpr char kExp[] = "exp", kLog[] = "log", kSqrt[] = "sqrt", kRsqrt[] = "rsqrt", kNeg[] = "neg",
               kAbs[] = "abs", kErf[] = "erf", kSin[] = "sin", kCos[] = "cos",
               kReciprocal[] = "reciprocal", kFloor[] = "floor", kCeil[] = "ceil",
               kTrunc[] = "trunc", kRound[] = "round", kLog1p[] = "log1p", kExpm1[] = "expm1",
               kMaximum[] = "maximum", kMinimum[] = "minimum";

}  // namespace

TWGPU_ENGINE_OP("aten::exp", unary<kExp>);
TWGPU_ENGINE_OP("aten::log", unary<kLog>);
TWGPU_ENGINE_OP("aten::log1p", unary<kLog1p>);
TWGPU_ENGINE_OP("aten::expm1", unary<kExpm1>);
TWGPU_ENGINE_OP("aten::sqrt", unary<kSqrt>);
TWGPU_ENGINE_OP("aten::rsqrt", unary<kRsqrt>);
TWGPU_ENGINE_OP("aten::neg", unary<kNeg>);
TWGPU_ENGINE_OP("aten::abs", unary<kAbs>);
TWGPU_ENGINE_OP("aten::erf", unary<kErf>);
TWGPU_ENGINE_OP("aten::sin", unary<kSin>);
TWGPU_ENGINE_OP("aten::cos", unary<kCos>);
TWGPU_ENGINE_OP("aten::reciprocal", unary<kReciprocal>);
TWGPU_ENGINE_OP("aten::floor", unary<kFloor>);
TWGPU_ENGINE_OP("aten::ceil", unary<kCeil>);
TWGPU_ENGINE_OP("aten::trunc", unary<kTrunc>);
TWGPU_ENGINE_OP("aten::round", unary<kRound>);
TWGPU_ENGINE_OP("aten::clamp", clamp);
TWGPU_ENGINE_OP("aten::pow.Tensor_Scalar", pow_op);
TWGPU_ENGINE_OP("aten::pow.Tensor_Tensor", pow_op);
TWGPU_ENGINE_OP("aten::maximum", binary_tensor<kMaximum>);
TWGPU_ENGINE_OP("aten::minimum", binary_tensor<kMinimum>);

}  // namespace twgpu::engine
