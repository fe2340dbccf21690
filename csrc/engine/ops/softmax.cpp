// softmax / _softmax / log_softmax along one dim (the reduce family's row kernels).
#include "engine/op_registry.h"
#include "kernels/reduce.h"

namespace twgpu::engine {
namespace {

void softmax_kind(OpBuilder& b, SoftmaxKind kind) {
  const DeviceTensor& in = b.tensor(0);
  b.check(is_floating(in.dtype), "needs a floating input, got " + in.describe());
  const DeviceTensor x = b.contiguous(in);
  const DeviceTensor& out = b.checked_output(0, x.shape, b.output(0).dtype);
  ReduceShape shape;
  if (x.dim() > 0) {
    int64_t dim = b.integer(1);
    b.check(dim >= -x.dim() && dim < x.dim(), "dim " + std::to_string(dim) + " out of range");
    if (dim < 0) dim += x.dim();
    for (int64_t d = 0; d < dim; ++d) shape.outer *= x.shape[d];
    shape.reduce = x.shape[dim];
    for (int64_t d = dim + 1; d < x.dim(); ++d) shape.inner *= x.shape[d];
  }
  SoftmaxSpec spec;
  spec.kind = kind;
  spec.in = x.dtype;
  spec.out = out.dtype;
  SoftmaxBuffers bufs{x.buffer, x.offset, nullptr, 0, out.buffer, out.offset};
  if (out.numel() == 0) return;
  b.record([spec, shape, bufs](twgpu::Context& ctx) { launch_softmax(ctx, spec, shape, bufs); });
}

void softmax(OpBuilder& b) { softmax_kind(b, SoftmaxKind::Softmax); }
void log_softmax(OpBuilder& b) { softmax_kind(b, SoftmaxKind::LogSoftmax); }

}  // namespace

TWGPU_ENGINE_OP("aten::_softmax", softmax);
TWGPU_ENGINE_OP("aten::softmax.int", softmax);
TWGPU_ENGINE_OP("aten::_log_softmax", log_softmax);
TWGPU_ENGINE_OP("aten::log_softmax.int", log_softmax);

}  // namespace twgpu::engine
