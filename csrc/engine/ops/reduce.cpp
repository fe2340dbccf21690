// mean.dim / sum.dim_IntList / any.dim(s) / linalg_vector_norm over a run of adjacent dims
// (the reduce family over [outer, reduce, inner]). Reductions over dims that are not adjacent are refused at load.
#include <algorithm>
#include <cmath>

#include "engine/op_registry.h"
#include "kernels/reduce.h"

namespace twgpu::engine {
namespace {

bool norm_kind(ReduceKind k) {
  return k == ReduceKind::Norm2 || k == ReduceKind::Norm1 || k == ReduceKind::NormInf ||
         k == ReduceKind::NormNegInf || k == ReduceKind::Norm0 || k == ReduceKind::NormP;
}

// dims at argument `dims_arg`, keepdim right after it (sum, mean, any, vector_norm agree).
void reduce_dims(OpBuilder& b, ReduceKind kind, size_t dims_arg = 1, float norm_p = 0.f) {
  const DeviceTensor x = b.contiguous(b.tensor(0));
  std::vector<int64_t> dims = b.is_none(dims_arg) ? std::vector<int64_t>{} : b.ints(dims_arg);
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
  const bool keepdim = b.boolean_or(dims_arg + 1, false);
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
  if (kind == ReduceKind::Mean || norm_kind(kind))
    b.check(is_floating(out.dtype), "needs a floating output, got " + out.describe());
  ReduceSpec spec;
  spec.kind = kind;
  spec.in = x.dtype;
  spec.out = out.dtype;
  // any compares in the input's type; sums accumulate in the result's.
  spec.acc = compute_type_for(kind == ReduceKind::Any ? x.dtype : out.dtype);
  if (norm_kind(kind)) spec.acc = Compute::F32;
  const float param = kind == ReduceKind::Mean ? static_cast<float>(shape.reduce) : norm_p;
  ReduceBuffers bufs{x.buffer, x.offset, out.buffer, out.offset};
  if (out.numel() == 0) return;
  b.record([spec, shape, bufs, param](twgpu::Context& ctx) { launch_reduce(ctx, spec, shape, bufs, param); });
}

// linalg_vector_norm(self, ord, dim, keepdim, dtype): ord picks the kernel as eager does.
void vector_norm(OpBuilder& b) {
  b.check(b.is_none(4), "a dtype argument is not supported by the engine");
  b.check(is_floating(b.tensor(0).dtype), "needs a floating input, got " + b.tensor(0).describe());
  const double ord = b.real_or(1, 2.0);
  if (ord == 2.0) return reduce_dims(b, ReduceKind::Norm2, 2);
  if (ord == 1.0) return reduce_dims(b, ReduceKind::Norm1, 2);
  if (ord == 0.0) return reduce_dims(b, ReduceKind::Norm0, 2);
  if (std::isinf(ord)) return reduce_dims(b, ord > 0 ? ReduceKind::NormInf : ReduceKind::NormNegInf, 2);
  reduce_dims(b, ReduceKind::NormP, 2, static_cast<float>(ord));
}

void mean(OpBuilder& b) { reduce_dims(b, ReduceKind::Mean); }
void sum(OpBuilder& b) { reduce_dims(b, ReduceKind::Sum); }
void any(OpBuilder& b) { reduce_dims(b, ReduceKind::Any); }

}  // namespace

TWGPU_ENGINE_OP("aten::mean.dim", mean);
TWGPU_ENGINE_OP("aten::sum.dim_IntList", sum);
TWGPU_ENGINE_OP("aten::any.dim", any);
TWGPU_ENGINE_OP("aten::any.dims", any);
TWGPU_ENGINE_OP("aten::linalg_vector_norm", vector_norm);

}  // namespace twgpu::engine
