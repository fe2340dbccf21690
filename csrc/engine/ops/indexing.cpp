// gather(self, dim, index) and index.Tensor(self, indices) with index tensors for the
// leading dims (the indexing family's gather; a bad index is reported by the device check
// on the next read-back, as in eager).
#include "engine/op_registry.h"
#include "engine/ops/pointwise.h"
#include "kernels/indexing.h"
#include "runtime/device_checks.h"
#include "runtime/runtime.h"

namespace twgpu::engine {
namespace {

void check_index_dtype(OpBuilder& b, const DeviceTensor& idx) {
  b.check(idx.dtype == DType::Int64 || idx.dtype == DType::Int32,
          "indices must be int64 or int32, got " + idx.describe());
}

void gather(OpBuilder& b) {
  const DeviceTensor &self = b.tensor(0), &idx = b.tensor(2);
  check_index_dtype(b, idx);
  const int64_t rank = std::max<int64_t>(self.dim(), 1);
  int64_t dim = b.integer(1);
  b.check(dim >= -rank && dim < rank, "dim " + std::to_string(dim) + " out of range for " + self.describe());
  if (dim < 0) dim += rank;
  b.check(idx.dim() == self.dim(), "index " + idx.describe() + " must have the rank of " + self.describe());
  b.check(idx.dim() <= kIndexMaxDims, "more than 8 dims");
  for (int64_t d = 0; d < idx.dim(); ++d)
    b.check(d == dim || idx.shape[d] <= self.shape[d],
            "index " + idx.describe() + " is larger than " + self.describe() + " in dim " + std::to_string(d));
  const DeviceTensor& out = b.checked_output(0, idx.shape, self.dtype);
  if (out.numel() == 0) return;
  b.check(self.dim() == 0 || self.shape[dim] > 0, "gather from an empty dim");
  IndexedLaunch l;
  l.shape = idx.shape;
  l.target = {self.buffer, self.offset, self.dtype, self.strides};
  if (self.dim() > 0) l.target.strides[dim] = 0;
  l.indices.push_back({{idx.buffer, idx.offset, idx.dtype, idx.strides},
                       self.dim() > 0 ? self.shape[dim] : 1, self.dim() > 0 ? self.strides[dim] : 0});
  l.values = {out.buffer, out.offset, out.dtype, out.strides};
  l.wrap_negative = false;  // eager's gather refuses negative indices
  l.check_code = b.gpu().checks().code_for("index out of bounds in aten::gather");
  b.record([l](twgpu::Context& ctx) { indexed_gather(ctx, l); });
}

// self[i0, i1, ..., ik-1]: the index tensors broadcast to B; the result is B + self's
// remaining dims.
void index_tensor(OpBuilder& b) {
  const DeviceTensor& self = b.tensor(0);
  const std::vector<const DeviceTensor*> idx = b.tensors(1);
  b.check(!idx.empty() && static_cast<int64_t>(idx.size()) <= self.dim(),
          "needs 1 to " + std::to_string(self.dim()) + " index tensors for " + self.describe());
  b.check(static_cast<int>(idx.size()) <= kIndexMaxTensors, "more than 4 index tensors");
  for (const DeviceTensor* t : idx) check_index_dtype(b, *t);
  const std::vector<int64_t> bshape = broadcast_shapes(b, idx);
  std::vector<int64_t> shape = bshape;
  for (int64_t d = static_cast<int64_t>(idx.size()); d < self.dim(); ++d) shape.push_back(self.shape[d]);
  b.check(static_cast<int64_t>(shape.size()) <= kIndexMaxDims, "the result has more than 8 dims");
  const DeviceTensor& out = b.checked_output(0, shape, self.dtype);
  if (out.numel() == 0) return;
  const size_t nb = bshape.size();
  IndexedLaunch l;
  l.shape = shape;
  l.target = {self.buffer, self.offset, self.dtype, std::vector<int64_t>(shape.size(), 0)};
  for (size_t d = nb; d < shape.size(); ++d) l.target.strides[d] = self.strides[idx.size() + d - nb];
  for (size_t i = 0; i < idx.size(); ++i) {
    const DeviceTensor& t = *idx[i];
    b.check(self.shape[i] > 0, "indexing an empty dim");
    StridedArg s{t.buffer, t.offset, t.dtype, std::vector<int64_t>(shape.size(), 0)};
    // Right-aligned onto B; broadcast dims read stride 0.
    for (int64_t d = 0; d < t.dim(); ++d)
      if (t.shape[d] != 1) s.strides[nb - t.dim() + d] = t.strides[d];
    l.indices.push_back({s, self.shape[i], self.strides[i]});
  }
  l.values = {out.buffer, out.offset, out.dtype, out.strides};
  l.wrap_negative = true;
  l.check_code = b.gpu().checks().code_for("index out of bounds in aten::index");
  b.record([l](twgpu::Context& ctx) { indexed_gather(ctx, l); });
}

}  // namespace

TWGPU_ENGINE_OP("aten::gather", gather);
TWGPU_ENGINE_OP("aten::index.Tensor", index_tensor);

}  // namespace twgpu::engine
