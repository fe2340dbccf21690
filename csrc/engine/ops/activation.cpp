// Pointwise activations: relu, gelu (exact and tanh), silu, sigmoid, tanh.
#include "engine/op_registry.h"
#include "engine/ops/pointwise.h"

namespace twgpu::engine {
namespace {

void unary(OpBuilder& b, const std::string& kernel) {
  const DeviceTensor& x = b.tensor(0);
  const Compute c = compute_type_for(x.dtype);
  if (kernel != "relu" && c != Compute::F32) b.fail("needs a floating input, got " + x.describe());
  const DeviceTensor& out = b.checked_output(0, x.shape, x.dtype);
  b.record(pointwise_launch(kernel, c, out, {{&x, {}}}));
}

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

}  // namespace twgpu::engine
