// arange (end / start, end / start, end, step): start + step * i, exact in int64 for
// integer dtypes, as eager's factory computes it (kernels/shape_ops.h's range fill).
#include <cmath>

#include "engine/op_registry.h"
#include "kernels/shape_ops.h"

namespace twgpu::engine {
namespace {

bool integral_value(const OpBuilder& b, size_t i) {
  const ValueKind k = b.value(i).kind;
  return k == ValueKind::Int || k == ValueKind::Bool;
}

void arange_from(OpBuilder& b, size_t start_arg, size_t end_arg, size_t step_arg) {
  const DeviceTensor& o = b.output(0);
  b.check(o.dtype != DType::Bool, "arange of bool is not supported");
  const double start = start_arg == SIZE_MAX ? 0.0 : b.real(start_arg);
  const double end = b.real(end_arg);
  const double step = step_arg == SIZE_MAX ? 1.0 : b.real(step_arg);
  b.check(step != 0.0 && std::isfinite(start) && std::isfinite(end) && std::isfinite(step),
          "needs finite bounds and a nonzero step");
  const double count = std::ceil((end - start) / step);
  const int64_t n = count > 0 ? static_cast<int64_t>(count) : 0;
  const DeviceTensor& out = b.checked_output(0, {n}, o.dtype);
  RangeFill r;
  r.dst = out.buffer;
  r.dst_offset = out.offset;
  r.dtype = out.dtype;
  r.numel = out.numel();
  r.kind = RangeKind::Affine;
  if (!is_floating(out.dtype)) {
    b.check((start_arg == SIZE_MAX || integral_value(b, start_arg)) &&
                (step_arg == SIZE_MAX || integral_value(b, step_arg)),
            "an integer arange needs integer start and step");
    r.compute = Compute::I64;
    r.start = ScalarBits::from_i64(start_arg == SIZE_MAX ? 0 : b.integer(start_arg));
    r.step = ScalarBits::from_i64(step_arg == SIZE_MAX ? 1 : b.integer(step_arg));
  } else {
    r.compute = Compute::F32;
    r.start = ScalarBits::from_f32(static_cast<float>(start));
    r.step = ScalarBits::from_f32(static_cast<float>(step));
  }
  if (r.numel == 0) return;
  b.record([r](twgpu::Context& ctx) { launch_range_fill(ctx, r); });
}

void arange(OpBuilder& b) { arange_from(b, SIZE_MAX, 0, SIZE_MAX); }
void arange_start(OpBuilder& b) { arange_from(b, 0, 1, SIZE_MAX); }
void arange_start_step(OpBuilder& b) { arange_from(b, 0, 1, 2); }

}  // namespace

TWGPU_ENGINE_OP("aten::arange", arange);
TWGPU_ENGINE_OP("aten::arange.start", arange_start);
TWGPU_ENGINE_OP("aten::arange.start_step", arange_start_step);

}  // namespace twgpu::engine
