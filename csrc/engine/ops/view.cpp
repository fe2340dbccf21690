// View and copy ops: view/reshape/_unsafe_view, permute, expand, t, transpose, slice,
// select, unsqueeze, squeeze, alias (strided views: no launch when the program gives the
// output no memory of its own, a copy into it otherwise), clone, _to_copy and cat (copies),
// copy_ (in place, for mutated buffers).
#include <algorithm>

#include "engine/op_registry.h"
#include "engine/ops/pointwise.h"

namespace twgpu::engine {
namespace {

int64_t wrap_dim(OpBuilder& b, int64_t d, int64_t ndim) {
  const int64_t n = std::max<int64_t>(ndim, 1);
  b.check(d >= -n && d < n, "dim " + std::to_string(d) + " out of range for " +
                                std::to_string(ndim) + " dims");
  return d < 0 ? d + n : d;
}

// The op's result, a strided view of its input: becomes the output itself when the
// program gave it no memory, else is copied into the output's memory.
void produce(OpBuilder& b, const DeviceTensor& view) {
  DeviceTensor& out = b.output(0);
  if (out.is_view) {
    b.check(out.shape == view.shape && out.dtype == view.dtype,
            "output is " + out.describe() + ", the view is " + view.describe());
    out.buffer = view.buffer;
    out.offset = view.offset;
    out.strides = view.strides;
    return;
  }
  const DeviceTensor& o = b.checked_output(0, view.shape, view.dtype);
  b.record(copy_launch(view, o));
}

// Strides for viewing (shape, strides) as `target` without a copy, if possible: each run
// of input dims that is contiguous in memory maps onto a run of target dims of equal numel.
bool view_strides(const DeviceTensor& t, const std::vector<int64_t>& target, std::vector<int64_t>& out) {
  out.assign(target.size(), 1);
  if (t.numel() == 0) {
    out = contiguous_strides(target);
    return true;
  }
  int64_t view_d = static_cast<int64_t>(target.size()) - 1;
  int64_t chunk_base_stride = t.dim() ? t.strides.back() : 1;
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    tensor_numel *= t.shape[d];
    if (d == 0 || (t.shape[d - 1] != 1 && t.strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || target[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= target[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return false;
      if (d > 0) {
        chunk_base_stride = t.strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

std::vector<int64_t> infer_size(OpBuilder& b, std::vector<int64_t> shape, uint64_t numel) {
  int64_t infer = -1;
  uint64_t known = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == -1) {
      b.check(infer < 0, "only one dimension can be inferred");
      infer = static_cast<int64_t>(d);
    } else {
      b.check(shape[d] >= 0, "invalid shape dimension " + std::to_string(shape[d]));
      known *= static_cast<uint64_t>(shape[d]);
    }
  }
  if (infer >= 0) {
    b.check(known != 0 && numel % known == 0, "shape is invalid for input of size " + std::to_string(numel));
    shape[infer] = static_cast<int64_t>(numel / known);
    known = numel;
  }
  b.check(known == numel, "shape is invalid for input of size " + std::to_string(numel));
  return shape;
}

void reshape(OpBuilder& b) {
  const DeviceTensor& x = b.tensor(0);
  DeviceTensor v = x;
  v.shape = infer_size(b, b.ints(1), x.numel());
  if (!view_strides(x, v.shape, v.strides)) {
    v = b.contiguous(x);
    v.shape = infer_size(b, b.ints(1), x.numel());
    v.strides = contiguous_strides(v.shape);
  }
  produce(b, v);
}

void permute(OpBuilder& b) {
  const DeviceTensor& x = b.tensor(0);
  const std::vector<int64_t> dims = b.ints(1);
  b.check(static_cast<int64_t>(dims.size()) == x.dim(), "permute needs " + std::to_string(x.dim()) + " dims");
  DeviceTensor v = x;
  std::vector<bool> seen(x.dim(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = wrap_dim(b, dims[i], x.dim());
    b.check(!seen[d], "repeated dim in permute");
    seen[d] = true;
    v.shape[i] = x.shape[d];
    v.strides[i] = x.strides[d];
  }
  produce(b, v);
}

void transpose_dims(OpBuilder& b, int64_t d0, int64_t d1) {
  const DeviceTensor& x = b.tensor(0);
  DeviceTensor v = x;
  if (x.dim() > 0) {
    d0 = wrap_dim(b, d0, x.dim());
    d1 = wrap_dim(b, d1, x.dim());
    std::swap(v.shape[d0], v.shape[d1]);
    std::swap(v.strides[d0], v.strides[d1]);
  }
  produce(b, v);
}

void transpose(OpBuilder& b) { transpose_dims(b, b.integer(1), b.integer(2)); }
void t(OpBuilder& b) {
  b.check(b.tensor(0).dim() <= 2, "t() expects a tensor with <= 2 dims, got " + b.tensor(0).describe());
  transpose_dims(b, 0, b.tensor(0).dim() == 2 ? 1 : 0);
}

void expand(OpBuilder& b) {
  const DeviceTensor& x = b.tensor(0);
  const std::vector<int64_t> size = b.ints(1);
  b.check(size.size() >= x.shape.size(), "expand to fewer dims than " + x.describe());
  DeviceTensor v = x;
  v.shape = size;
  v.strides.assign(size.size(), 0);
  const size_t lead = size.size() - x.shape.size();
  for (size_t d = 0; d < size.size(); ++d) {
    if (d < lead) {
      b.check(size[d] >= 0, "expand: -1 is not allowed in a new leading dim");
      continue;
    }
    const int64_t have = x.shape[d - lead];
    if (size[d] == -1 || size[d] == have) {
      v.shape[d] = have;
      v.strides[d] = x.strides[d - lead];
    } else {
      b.check(have == 1, "expand: size " + std::to_string(size[d]) + " does not match " + x.describe());
    }
  }
  produce(b, v);
}

void slice(OpBuilder& b) {
  const DeviceTensor& x = b.tensor(0);
  b.check(x.dim() > 0, "slice of a 0-dim tensor");
  const int64_t d = wrap_dim(b, b.integer_or(1, 0), x.dim());
  const int64_t size = x.shape[d];
  int64_t start = b.integer_or(2, 0), end = b.integer_or(3, INT64_MAX);
  const int64_t step = b.integer_or(4, 1);
  b.check(step > 0, "slice step must be positive");
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = std::clamp<int64_t>(start, 0, size);
  end = std::clamp<int64_t>(end, start, size);
  DeviceTensor v = x;
  v.offset = x.offset + static_cast<uint64_t>(start * x.strides[d]);
  v.shape[d] = (end - start + step - 1) / step;
  v.strides[d] = x.strides[d] * step;
  produce(b, v);
}

void select(OpBuilder& b) {
  const DeviceTensor& x = b.tensor(0);
  b.check(x.dim() > 0, "select of a 0-dim tensor");
  const int64_t d = wrap_dim(b, b.integer(1), x.dim());
  int64_t i = b.integer(2);
  b.check(i >= -x.shape[d] && i < x.shape[d], "select index " + std::to_string(i) + " out of range for " + x.describe());
  if (i < 0) i += x.shape[d];
  DeviceTensor v = x;
  v.offset = x.offset + static_cast<uint64_t>(i * x.strides[d]);
  v.shape.erase(v.shape.begin() + d);
  v.strides.erase(v.strides.begin() + d);
  produce(b, v);
}

void unsqueeze(OpBuilder& b) {
  const DeviceTensor& x = b.tensor(0);
  const int64_t d = wrap_dim(b, b.integer(1), x.dim() + 1);
  DeviceTensor v = x;
  const int64_t stride = d >= x.dim() ? 1 : x.shape[d] * x.strides[d];
  v.shape.insert(v.shape.begin() + d, 1);
  v.strides.insert(v.strides.begin() + d, stride);
  produce(b, v);
}

void squeeze_dims(OpBuilder& b, std::vector<int64_t> dims) {
  const DeviceTensor& x = b.tensor(0);
  std::vector<bool> drop(x.dim(), false);
  for (int64_t d : dims) {
    if (x.dim() == 0) break;
    d = wrap_dim(b, d, x.dim());
    drop[d] = x.shape[d] == 1;
  }
  DeviceTensor v = x;
  v.shape.clear();
  v.strides.clear();
  for (int64_t d = 0; d < x.dim(); ++d)
    if (!drop[d]) {
      v.shape.push_back(x.shape[d]);
      v.strides.push_back(x.strides[d]);
    }
  produce(b, v);
}

void squeeze(OpBuilder& b) {
  std::vector<int64_t> all(b.tensor(0).dim());
  for (size_t d = 0; d < all.size(); ++d) all[d] = static_cast<int64_t>(d);
  squeeze_dims(b, all);
}
void squeeze_dim(OpBuilder& b) { squeeze_dims(b, b.ints(1)); }
void alias(OpBuilder& b) { produce(b, b.tensor(0)); }

// clone / _to_copy: always a copy into the output's memory (converting the dtype).
void copy_op(OpBuilder& b) {
  const DeviceTensor& x = b.tensor(0);
  const DeviceTensor& out = b.checked_output(0, x.shape, b.output(0).dtype);
  b.record(copy_launch(x, out));
}

void cat(OpBuilder& b) {
  std::vector<const DeviceTensor*> parts;
  for (const DeviceTensor* t : b.tensors(0))
    if (!(t->dim() == 1 && t->shape[0] == 0)) parts.push_back(t);  // legacy empty inputs
  b.check(!parts.empty(), "cat of no non-empty tensors");
  const int64_t nd = parts[0]->dim();
  b.check(nd > 0, "cat of 0-dim tensors");
  const int64_t d = wrap_dim(b, b.integer_or(1, 0), nd);
  std::vector<int64_t> shape = parts[0]->shape;
  shape[d] = 0;
  for (const DeviceTensor* t : parts) {
    bool same = t->dim() == nd;
    for (int64_t k = 0; same && k < nd; ++k) same = k == d || t->shape[k] == parts[0]->shape[k];
    b.check(same, "cat: " + t->describe() + " does not match " + parts[0]->describe() + " outside dim " + std::to_string(d));
    shape[d] += t->shape[d];
  }
  const DeviceTensor& out = b.checked_output(0, shape, b.output(0).dtype);
  int64_t at = 0;
  for (const DeviceTensor* t : parts) {
    DeviceTensor slot = out;
    slot.shape[d] = t->shape[d];
    slot.offset = out.offset + static_cast<uint64_t>(at * out.strides[d]);
    at += t->shape[d];
    b.record(copy_launch(*t, slot));
  }
}

// copy_(self, src, non_blocking): src (broadcast, converted) into self's own memory, in
// place; the output is a view of self. The exporter writes mutated buffers back with it.
void copy_inplace(OpBuilder& b) {
  const DeviceTensor &self = b.written_in_place(), &src = b.tensor(1);
  const std::string msg = "source " + src.describe() + " does not broadcast to " + self.describe();
  b.check(src.dim() <= self.dim(), msg);
  for (int64_t k = 0; k < src.dim(); ++k)
    b.check(src.shape[k] == 1 || src.shape[k] == self.shape[self.dim() - src.dim() + k], msg);
  if (self.numel() > 0) b.record(copy_launch(src, self));
}

}  // namespace

TWGPU_ENGINE_OP("aten::view", reshape);
TWGPU_ENGINE_OP("aten::_unsafe_view", reshape);
TWGPU_ENGINE_OP("aten::reshape", reshape);
TWGPU_ENGINE_OP("aten::permute", permute);
TWGPU_ENGINE_OP("aten::expand", expand);
TWGPU_ENGINE_OP("aten::t", t);
TWGPU_ENGINE_OP("aten::transpose.int", transpose);
TWGPU_ENGINE_OP("aten::slice.Tensor", slice);
TWGPU_ENGINE_OP("aten::select.int", select);
TWGPU_ENGINE_OP("aten::unsqueeze", unsqueeze);
TWGPU_ENGINE_OP("aten::squeeze", squeeze);
TWGPU_ENGINE_OP("aten::squeeze.dim", squeeze_dim);
TWGPU_ENGINE_OP("aten::squeeze.dims", squeeze_dim);
TWGPU_ENGINE_OP("aten::alias", alias);
TWGPU_ENGINE_OP("aten::clone", copy_op);
TWGPU_ENGINE_OP("aten::_to_copy", copy_op);
TWGPU_ENGINE_OP("aten::cat", cat);
TWGPU_ENGINE_OP("aten::copy_", copy_inplace);

}  // namespace twgpu::engine
