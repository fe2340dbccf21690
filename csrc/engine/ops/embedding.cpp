// embedding(weight, indices, ...): rows of the weight gathered by index (the indexing
// family's gather; a bad index is reported by the device check on the next read-back).
#include "engine/op_registry.h"
#include "kernels/indexing.h"
#include "runtime/device_checks.h"
#include "runtime/runtime.h"

namespace twgpu::engine {
namespace {

void embedding(OpBuilder& b) {
  const DeviceTensor &w = b.tensor(0), &idx = b.tensor(1);
  b.check(w.dim() == 2, "weight must be 2-D, got " + w.describe());
  b.check(idx.dtype == DType::Int64 || idx.dtype == DType::Int32,
          "indices must be int64 or int32, got " + idx.describe());
  std::vector<int64_t> shape = idx.shape;
  shape.push_back(w.shape[1]);
  const DeviceTensor& out = b.checked_output(0, shape, w.dtype);
  if (out.numel() == 0) return;
  b.check(w.shape[0] > 0, "embedding of an empty weight");
  IndexedLaunch l;
  l.shape = shape;
  l.target = {w.buffer, w.offset, w.dtype, std::vector<int64_t>(shape.size(), 0)};
  l.target.strides.back() = w.strides[1];
  StridedArg index{idx.buffer, idx.offset, idx.dtype, idx.strides};
  index.strides.push_back(0);
  l.indices.push_back({index, w.shape[0], w.strides[0]});
  l.values = {out.buffer, out.offset, out.dtype, out.strides};
  l.wrap_negative = false;
  l.check_code = b.gpu().checks().code_for("index out of bounds in aten::embedding");
  b.record([l](twgpu::Context& ctx) { indexed_gather(ctx, l); });
}

}  // namespace

TWGPU_ENGINE_OP("aten::embedding", embedding);

}  // namespace twgpu::engine
