// Pointwise activations: relu, gelu (exact and tanh), silu, sigmoid, tanh, and with
// parameters leaky_relu, elu, hardtanh (parameters as eager passes them, in float32).
#include "engine/op_registry.h"
#include "engine/ops/pointwise.h"

namespace twgpu::engine {
namespace {

void unary(OpBuilder& b, const std::string& kernel, ScalarBits p0 = {}, ScalarBits p1 = {},
           ScalarBits p2 = {}) {
  const DeviceTensor& x = b.tensor(0);
  const Compute c = compute_type_for(x.dtype);
  if (kernel != "relu" && c != Compute::F32) b.fail("needs a floating input, got " + x.describe());
  const DeviceTensor& out = b.checked_output(0, x.shape, x.dtype);
  b.record(pointwise_launch(kernel, c, out, {{&x, {}}}, p0, p1, p2));
}

ScalarBits f32(double v) { return ScalarBits::from_f32(static_cast<float>(v)); }

void leaky_relu(OpBuilder& b) { unary(b, "leaky_relu", f32(b.real_or(1, 0.01))); }
void elu(OpBuilder& b) {
  const double alpha = b.real_or(1, 1.0), scale = b.real_or(2, 1.0), input_scale = b.real_or(3, 1.0);
  unary(b, "elu", f32(alpha * scale), f32(scale), f32(input_scale));
}
// hardtanh is eager's clamp(min, max).
void hardtanh(OpBuilder& b) { unary(b, "clamp_s", f32(b.real_or(1, -1.0)), f32(b.real_or(2, 1.0))); }

void relu(OpBuilder& b) { unary(b, "relu"); }
void silu(OpBuilder& b) { unary(b, "silu"); }
void sigmoid(OpBuilder& b) { unary(b, "sigmoid"); }
void tanh_op(OpBuilder& b) { unary(b, "tanh"); }
void gelu(OpBuilder& b) {
  const std::string approximate = b.string_or(1, "none");
  if (approximate != "none" && approximate != "tanh")
    b.fail("approximate must be \"none\" or \"tanh\", got \"" + approximate + "\"");
  unary(b, approximate == "tanh" ? "gelu_tanh" : "gelu");
}

}  // namespace

TWGPU_ENGINE_OP("aten::relu", relu);
TWGPU_ENGINE_OP("aten::gelu", gelu);
TWGPU_ENGINE_OP("aten::silu", silu);
TWGPU_ENGINE_OP("aten::sigmoid", sigmoid);
TWGPU_ENGINE_OP("aten::tanh", tanh_op);
TWGPU_ENGINE_OP("aten::leaky_relu", leaky_relu);
TWGPU_ENGINE_OP("aten::elu", elu);
TWGPU_ENGINE_OP("aten::hardtanh", hardtanh);

}  // namespace twgpu::engine
