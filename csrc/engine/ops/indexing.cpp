// gather(self, dim, index), index.Tensor(self, indices) and index_put(_) (indices may hold
// none; the given ones must be adjacent): the indexing family's gather and scatter. A bad
// index is reported by the device check on the next read-back, as in eager.
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

// The iteration space of self[indices] (None entries keep their dim): the index tensors
// broadcast to B, which replaces the indexed dims in place (they must be adjacent, the
// case torch also keeps in place).
struct IndexSpace {
  std::vector<int64_t> shape;  // the result of self[indices]
  StridedArg target;
  std::vector<IndexArg> indices;
};

IndexSpace index_space(OpBuilder& b, const DeviceTensor& self, const std::vector<const DeviceTensor*>& idx) {
  b.check(static_cast<int64_t>(idx.size()) <= self.dim(),
          std::to_string(idx.size()) + " indices for " + self.describe());
  std::vector<const DeviceTensor*> given;
  int64_t first = -1, last = -1;
  for (size_t d = 0; d < idx.size(); ++d)
    if (idx[d]) {
      if (first < 0) first = static_cast<int64_t>(d);
      b.check(last < 0 || last == static_cast<int64_t>(d) - 1,
              "index tensors separated by none are not supported by the engine");
      last = static_cast<int64_t>(d);
      check_index_dtype(b, *idx[d]);
      given.push_back(idx[d]);
    }
  b.check(!given.empty(), "needs at least one index tensor");
  b.check(static_cast<int>(given.size()) <= kIndexMaxTensors, "more than 4 index tensors");
  const std::vector<int64_t> bshape = broadcast_shapes(b, given);
  const int64_t nb = static_cast<int64_t>(bshape.size());
  IndexSpace s;
  for (int64_t d = 0; d < first; ++d) s.shape.push_back(self.shape[d]);
  s.shape.insert(s.shape.end(), bshape.begin(), bshape.end());
  for (int64_t d = last + 1; d < self.dim(); ++d) s.shape.push_back(self.shape[d]);
  b.check(static_cast<int64_t>(s.shape.size()) <= kIndexMaxDims, "the iteration space has more than 8 dims");
  s.target = {self.buffer, self.offset, self.dtype, std::vector<int64_t>(s.shape.size(), 0)};
  for (int64_t d = 0; d < first; ++d) s.target.strides[d] = self.strides[d];
  for (int64_t d = last + 1; d < self.dim(); ++d) s.target.strides[d - (last + 1 - first) + nb] = self.strides[d];
  for (int64_t d = first; d <= last; ++d) {
    const DeviceTensor& t = *idx[d];
    b.check(self.shape[d] > 0, "indexing an empty dim");
    StridedArg a{t.buffer, t.offset, t.dtype, std::vector<int64_t>(s.shape.size(), 0)};
    // Right-aligned onto B; broadcast dims read stride 0.
    for (int64_t k = 0; k < t.dim(); ++k)
      if (t.shape[k] != 1) a.strides[first + nb - t.dim() + k] = t.strides[k];
    s.indices.push_back({a, self.shape[d], self.strides[d]});
  }
  return s;
}

void index_tensor(OpBuilder& b) {
  const DeviceTensor& self = b.tensor(0);
  IndexSpace s = index_space(b, self, b.optional_tensors(1));
  const DeviceTensor& out = b.checked_output(0, s.shape, self.dtype);
  if (out.numel() == 0) return;
  IndexedLaunch l;
  l.shape = s.shape;
  l.target = s.target;
  l.indices = s.indices;
  l.values = {out.buffer, out.offset, out.dtype, out.strides};
  l.wrap_negative = true;
  l.check_code = b.gpu().checks().code_for("index out of bounds in aten::index");
  b.record([l](twgpu::Context& ctx) { indexed_gather(ctx, l); });
}

// index_put(self, indices, values, accumulate) into `target` (self's own memory for the
// in-place form, a copy of self for the functional one).
void put_into(OpBuilder& b, const DeviceTensor& target) {
  const DeviceTensor& values = b.tensor(2);
  b.check(values.dtype == target.dtype, "values " + values.describe() + " must have the dtype of " + target.describe());
  IndexSpace s = index_space(b, target, b.optional_tensors(1));
  // values broadcast onto the iteration space.
  b.check(values.dim() <= static_cast<int64_t>(s.shape.size()),
          "values " + values.describe() + " do not broadcast to the indexed shape");
  StridedArg v{values.buffer, values.offset, values.dtype, std::vector<int64_t>(s.shape.size(), 0)};
  const int64_t lead = static_cast<int64_t>(s.shape.size()) - values.dim();
  for (int64_t k = 0; k < values.dim(); ++k) {
    b.check(values.shape[k] == 1 || values.shape[k] == s.shape[lead + k],
            "values " + values.describe() + " do not broadcast to the indexed shape");
    if (values.shape[k] != 1) v.strides[lead + k] = values.strides[k];
  }
  const IndexCombine combine = b.boolean_or(3, false) ? IndexCombine::Add : IndexCombine::Assign;
  b.check(indexed_scatter_supports(target.dtype, combine), "accumulate is not supported for " + target.describe());
  if (numel_of(s.shape) == 0) return;
  IndexedLaunch l;
  l.shape = s.shape;
  l.target = s.target;
  l.indices = s.indices;
  l.values = v;
  l.wrap_negative = true;
  l.check_code = b.gpu().checks().code_for("index out of bounds in aten::index_put");
  b.record([l, combine](twgpu::Context& ctx) { indexed_scatter(ctx, l, combine); });
}

void index_put(OpBuilder& b) {
  const DeviceTensor& self = b.tensor(0);
  const DeviceTensor& out = b.checked_output(0, self.shape, self.dtype);
  if (out.numel() > 0) b.record(copy_launch(self, out));
  put_into(b, out);
}

// The in-place form writes a state tensor (a mutated buffer, docs/ENGINE.md); its output
// is a view of it.
void index_put_inplace(OpBuilder& b) {
  const DeviceTensor& self = b.written_in_place();
  put_into(b, self);
}

}  // namespace

TWGPU_ENGINE_OP("aten::gather", gather);
TWGPU_ENGINE_OP("aten::index.Tensor", index_tensor);
TWGPU_ENGINE_OP("aten::index_put", index_put);
TWGPU_ENGINE_OP("aten::index_put_", index_put_inplace);

}  // namespace twgpu::engine
