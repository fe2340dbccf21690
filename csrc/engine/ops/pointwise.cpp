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
  if (dims.size() > static_cast<size_t>(kMaxElementwiseDims))
    fail(ErrorKind::Unsupported, "elementwise op " + op + " over " + std::to_string(dims.size()) +
                                     " non-trivial dims (at most 8)");
  l.ndim = static_cast<int>(dims.size());
  for (size_t k = 0; k < dims.size(); ++k) l.sizes[k] = out.shape[dims[k]];
  auto operand = [&](const DeviceTensor& t) {
    ElementwiseOperand o;
    o.buffer = t.buffer;
    o.offset = t.offset;
    o.dtype = t.dtype;
    const int64_t lead = out.dim() - t.dim();
    for (size_t k = 0; k < dims.size(); ++k) {
      const int64_t d = dims[k] - lead;
      o.strides[k] = (d < 0 || t.shape[d] == 1) ? 0 : t.strides[d];
    }
    return o;
  };
  l.operands.push_back(operand(out));
  for (const PointwiseInput& in : inputs) {
    if (in.tensor) {
      l.operands.push_back(operand(*in.tensor));
    } else {
      ElementwiseOperand o;
      o.is_scalar = true;
      o.dtype = out.dtype;
      o.scalar = in.scalar;
      l.operands.push_back(o);
    }
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
