// constant_pad_nd: what F.pad(mode="constant") becomes in core ATen (EfficientNet's
// TensorFlow-style "same" padding). A fill of the output with the value, then a strided
// copy of the input into the interior; negative pads crop the input instead.
#include <algorithm>

#include "engine/op_registry.h"
#include "engine/ops/pointwise.h"

namespace twgpu::engine {
namespace {

void constant_pad_nd(OpBuilder& b) {
  const DeviceTensor& x = b.tensor(0);
  const std::vector<int64_t> pad = b.ints(1);
  const int64_t nd = x.dim();
  b.check(pad.size() % 2 == 0, "pad must have an even number of entries, got " + std::to_string(pad.size()));
  b.check(static_cast<int64_t>(pad.size()) <= 2 * nd,
          "pad has " + std::to_string(pad.size()) + " entries, " + x.describe() + " has " +
              std::to_string(nd) + " dims");
  std::vector<int64_t> shape = x.shape;
  DeviceTensor src = x;
  std::vector<int64_t> lead(nd, 0);  // elements of padding before the input, per dim
  for (size_t i = 0; i < pad.size() / 2; ++i) {
    const int64_t d = nd - 1 - static_cast<int64_t>(i);
    const int64_t lo = pad[2 * i], hi = pad[2 * i + 1];
    shape[d] = x.shape[d] + lo + hi;
    b.check(shape[d] >= 0, "padding " + x.describe() + " by (" + std::to_string(lo) + ", " +
                               std::to_string(hi) + ") in dim " + std::to_string(d) +
                               " leaves a negative size");
    // Negative pads crop: the input's window shrinks from that side.
    const int64_t crop_lo = std::max<int64_t>(-lo, 0), crop_hi = std::max<int64_t>(-hi, 0);
    src.shape[d] = std::max<int64_t>(x.shape[d] - crop_lo - crop_hi, 0);
    if (src.shape[d] > 0) src.offset += static_cast<uint64_t>(crop_lo * x.strides[d]);
    lead[d] = std::max<int64_t>(lo, 0);
  }
  const DeviceTensor& out = b.checked_output(0, shape, x.dtype);
  const Compute c = compute_type_for(out.dtype);
  const bool real = b.num_args() > 2 && b.value(2).kind == ValueKind::Float;
  const ScalarBits v = real ? ScalarBits::from_double(b.real(2), c)
                            : ScalarBits::from_int(b.integer_or(2, 0), c);
  b.record(pointwise_launch("fill", c, out, {}, v));
  if (src.numel() == 0) return;
  DeviceTensor dst = out;
  dst.shape = src.shape;
  for (int64_t d = 0; d < nd; ++d) dst.offset += static_cast<uint64_t>(lead[d] * out.strides[d]);
  b.record(copy_launch(src, dst));
}

}  // namespace

TWGPU_ENGINE_OP("aten::constant_pad_nd", constant_pad_nd);

}  // namespace twgpu::engine
