// mean.dim / sum.dim_IntList / any.dim(s) over a run of adjacent dims (the reduce family over
// [outer, reduce, inner]). Reductions over dims that are not adjacent are refused at load.
#include <algorithm>

#include "engine/op_registry.h"
#include "kernels/reduce.h"

namespace twgpu::engine {
namespace {

void reduce_dims(OpBuilder& b, ReduceKind kind) {
  const DeviceTensor x = b.contiguous(b.tensor(0));
  std::vector<int64_t> dims = b.is_none(1) ? std::vector<int64_t>{} : b.ints(1);
  if (dims.empty())
    for (int64_t d = 0; d < x.dim(); ++d) dims.push_back(d);
  for (int64_t& d : dims) {
    b.check(d >= -std::max<int64_t>(x.dim(), 1) && d < std::max<int64_t>(x.dim(), 1),
            "dim " + std::to_string(d) + " out of range for " + x.describe());
    if (d < 0) d += std::max<int64_t>(x.dim(), 1);
  }
  std::sort(dims.begin(), dims.end());
  dims.erase(std::unique(dims.begin(), dims.end()), dims.end());
  if (x.dim() == 0) dims.clear();
  for (size_t i = 1; i < dims.size(); ++i)
    b.check(dims[i] == dims[i - 1] + 1, "reduces over dims that are not adjacent (not supported by the engine yet)");
  const bool keepdim = b.boolean_or(2, false);
  ReduceShape shape;
  std::vector<int64_t> out_shape;
  for (int64_t d = 0; d < x.dim(); ++d) {
    const bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (reduced) shape.reduce *= x.shape[d];
    else if (dims.empty() || d < dims.front()) shape.outer *= x.shape[d];
    else shape.inner *= x.shape[d];
    if (!reduced) out_shape.push_back(x.shape[d]);
    else if (keepdim) out_shape.push_back(1);
  }
  const DeviceTensor& out = b.checked_output(0, out_shape, b.output(0).dtype);
  if (kind == ReduceKind::Mean)
    b.check(is_floating(out.dtype), "mean needs a floating output, got " + out.describe());
  ReduceSpec spec;
  spec.kind = kind;
  spec.in = x.dtype;
  spec.out = out.dtype;
  // any compares in the input's type; sums accumulate in the result's.
  spec.acc = compute_type_for(kind == ReduceKind::Any ? x.dtype : out.dtype);
  const float param = kind == ReduceKind::Mean ? static_cast<float>(shape.reduce) : 0.f;
  ReduceBuffers bufs{x.buffer, x.offset, out.buffer, out.offset};
  if (out.numel() == 0) return;
  b.record([spec, shape, bufs, param](twgpu::Context& ctx) { launch_reduce(ctx, spec, shape, bufs, param); });
}

void mean(OpBuilder& b) { reduce_dims(b, ReduceKind::Mean); }
void sum(OpBuilder& b) { reduce_dims(b, ReduceKind::Sum); }
void any(OpBuilder& b) { reduce_dims(b, ReduceKind::Any); }

}  // namespace

TWGPU_ENGINE_OP("aten::mean.dim", mean);
TWGPU_ENGINE_OP("aten::sum.dim_IntList", sum);
TWGPU_ENGINE_OP("aten::any.dim", any);
TWGPU_ENGINE_OP("aten::any.dims", any);

}  // namespace twgpu::engine
