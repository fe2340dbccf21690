#include "engine/ops/pointwise.h"

#include "kernels/elementwise.h"
#include "runtime/error.h"

namespace twgpu::engine {

std::vector<int64_t> broadcast_shapes(const OpBuilder& b, const std::vector<const DeviceTensor*>& ts) {
  std::vector<int64_t> shape;
  for (const DeviceTensor* t : ts) {
    if (t->shape.size() > shape.size()) shape.insert(shape.begin(), t->shape.size() - shape.size(), 1);
    const size_t lead = shape.size() - t->shape.size();
    for (size_t d = 0; d < t->shape.size(); ++d) {
      int64_t& s = shape[lead + d];
      const int64_t v = t->shape[d];
      if (s == v || v == 1) continue;
      if (s == 1) { s = v; continue; }
      std::string list;
      for (const DeviceTensor* u : ts) list += (list.empty() ? "" : ", ") + u->describe();
      b.fail("shapes do not broadcast: " + list);
    }
  }
  return shape;
}

Launch pointwise_launch(const std::string& op, Compute compute, const DeviceTensor& out,
                        const std::vector<PointwiseInput>& inputs, ScalarBits p0, ScalarBits p1,
                        ScalarBits p2) {
  ElementwiseLaunch l;
  l.op = op;
  l.compute = compute;
  l.params[0] = p0;
  l.params[1] = p1;
  l.params[2] = p2;
  if (!elementwise_supports(op, compute))
    fail(ErrorKind::Unsupported, "elementwise op " + op + " has no " + compute_name(compute) + " kernel");
  // Dims of size 1 iterate once: drop them; the rest go fastest first.
  std::vector<int64_t> dims;
  for (int64_t d = out.dim() - 1; d >= 0; --d)
    if (out.shape[d] != 1) dims.push_back(d);
  std::vector<const DeviceTensor*> tensors = {&out};
  for (const PointwiseInput& in : inputs) tensors.push_back(in.tensor);
  std::vector<int64_t> sizes;
  std::vector<std::vector<int64_t>> strides(tensors.size());  // per operand, fastest first
  for (int64_t d : dims) sizes.push_back(out.shape[d]);
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!tensors[i]) continue;
    const DeviceTensor& t = *tensors[i];
    const int64_t lead = out.dim() - t.dim();
    for (int64_t dim : dims) {
      const int64_t d = dim - lead;
      strides[i].push_back((d < 0 || t.shape[d] == 1) ? 0 : t.strides[d]);
    }
  }
  // Coalesce as TensorIterator does: a dim that continues the faster one in every operand
  // joins it, so contiguous operands become one dense dim (the vectorized kernels).
  size_t w = 0;
  for (size_t k = 1; k < sizes.size(); ++k) {
    bool joins = true;
    for (size_t i = 0; i < tensors.size(); ++i)
      if (tensors[i] && strides[i][k] != strides[i][w] * sizes[w]) joins = false;
    if (joins) {
      sizes[w] *= sizes[k];
      continue;
    }
    ++w;
    sizes[w] = sizes[k];
    for (size_t i = 0; i < tensors.size(); ++i)
      if (tensors[i]) strides[i][w] = strides[i][k];
  }
  if (!sizes.empty()) sizes.resize(w + 1);
  if (sizes.size() > static_cast<size_t>(kMaxElementwiseDims))
    fail(ErrorKind::Unsupported, "elementwise op " + op + " over " + std::to_string(sizes.size()) +
                                     " non-trivial dims (at most 8)");
  l.ndim = static_cast<int>(sizes.size());
  for (size_t k = 0; k < sizes.size(); ++k) l.sizes[k] = sizes[k];
  for (size_t i = 0; i < tensors.size(); ++i) {
    ElementwiseOperand o;
    if (tensors[i]) {
      o.buffer = tensors[i]->buffer;
      o.offset = tensors[i]->offset;
      o.dtype = tensors[i]->dtype;
      for (size_t k = 0; k < sizes.size(); ++k) o.strides[k] = strides[i][k];
    } else {
      o.is_scalar = true;
      o.dtype = out.dtype;
      o.scalar = inputs[i - 1].scalar;
    }
    l.operands.push_back(o);
  }
  const bool empty = out.numel() == 0;
  return [l, empty](twgpu::Context& ctx) {
    if (!empty) launch_elementwise(ctx, l);
  };
}

Launch copy_launch(const DeviceTensor& src, const DeviceTensor& dst) {
  return pointwise_launch("copy", compute_type_for(dst.dtype), dst, {{&src, {}}});
}

}  // namespace twgpu::engine
