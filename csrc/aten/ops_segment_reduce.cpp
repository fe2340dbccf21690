// torch._segment_reduce (max, min, sum, mean, prod over segments given by lengths or
// offsets along an axis), native for float dtypes; the kernel is kernels/segment_reduce.
// Arguments the CPU rejects go to the CPU fallback, which raises its error.
#include <ATen/Dispatch.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/segment_reduce_ops.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/cumsum.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include "aten/cpu_fallback.h"
#include "aten/webgpu_tensor.h"
#include "kernels/segment_reduce.h"

namespace twgpu::aten {
namespace {

using at::Tensor;

std::optional<SegmentReduction> reduction_of(c10::string_view r) {
  if (r == "max") return SegmentReduction::Max;
  if (r == "min") return SegmentReduction::Min;
  if (r == "sum") return SegmentReduction::Sum;
  if (r == "mean") return SegmentReduction::Mean;
  if (r == "prod") return SegmentReduction::Prod;
  return std::nullopt;
}

bool float_dtype(const Tensor& t) {
  return t.scalar_type() == c10::kFloat || t.scalar_type() == c10::kHalf ||
         t.scalar_type() == c10::kBFloat16;
}

// lengths / offsets of shape data.shape[:axis] + [k] (integer, on data's device).
bool index_shape_ok(const Tensor& data, const Tensor& idx, int64_t axis) {
  if (idx.device() != data.device() || c10::isFloatingType(idx.scalar_type()) ||
      idx.scalar_type() == c10::kBool || idx.dim() != axis + 1 || idx.size(axis) < 0)
    return false;
  for (int64_t d = 0; d < axis; ++d)
    if (idx.size(d) != data.size(d)) return false;
  return true;
}

// The CPU's checks of lengths when !unsafe (a read-back, as there): no negative length,
// every row sums to the axis length.
bool lengths_valid(const Tensor& lengths, int64_t axis_len) {
  Tensor host = lengths.to(c10::kLong).cpu().contiguous();
  const int64_t k = host.size(-1), rows = k ? host.numel() / k : 0;
  const int64_t* v = host.const_data_ptr<int64_t>();
  for (int64_t r = 0; r < rows; ++r) {
    int64_t sum = 0;
    for (int64_t j = 0; j < k; ++j) {
      if (v[r * k + j] < 0) return false;
      sum += v[r * k + j];
    }
    if (sum != axis_len) return false;
  }
  return true;
}

Tensor segment_reduce(const Tensor& data, c10::string_view reduce,
                      const std::optional<Tensor>& lengths, const std::optional<Tensor>& indices,
                      const std::optional<Tensor>& offsets, int64_t axis_in, bool unsafe,
                      const std::optional<at::Scalar>& initial) {
  auto fallback = [&] {
    return call_cpu_fallback<at::_ops::segment_reduce>(data, reduce, lengths, indices, offsets,
                                                        axis_in, unsafe, initial);
  };
  auto reduction = reduction_of(reduce);
  if (!reduction || !float_dtype(data) || indices.has_value() || data.dim() == 0 ||
      (lengths.has_value() == offsets.has_value()) || (initial && initial->isComplex()))
    return fallback();
  const int64_t axis = at::maybe_wrap_dim(axis_in, data.dim());
  const Tensor& idx = offsets.has_value() ? *offsets : *lengths;
  if (!index_shape_ok(data, idx, axis)) return fallback();
  const int64_t axis_len = data.size(axis);
  if (lengths.has_value() && !unsafe && !lengths_valid(*lengths, axis_len)) return fallback();
  const int64_t segments = offsets.has_value() ? idx.size(axis) - 1 : idx.size(axis);
  if (segments < 0) return fallback();

  std::vector<int64_t> shape(data.sizes().begin(), data.sizes().end());
  shape[axis] = segments;
  Tensor out = at::empty(shape, data.options());
  if (out.numel() == 0) return out;
  // Offsets as int64 [outer, segments + 1]; from lengths, a leading 0 and their running sum.
  Tensor off;
  if (offsets.has_value()) {
    off = offsets->to(c10::kLong).contiguous();
  } else {
    Tensor len = lengths->to(c10::kLong);
    std::vector<int64_t> zshape(len.sizes().begin(), len.sizes().end());
    zshape.back() = 1;
    off = at::cat({at::zeros(zshape, len.options()), at::cumsum(len, -1)}, -1).contiguous();
  }
  Tensor x = data.contiguous();
  SegmentReduceDesc d;
  DeviceRef xr = device_ref(x), orf = device_ref(off), outr = device_ref(out);
  d.data = xr.buffer;
  d.data_offset = xr.offset;
  d.offsets = orf.buffer;
  d.offsets_offset = orf.offset;
  d.out = outr.buffer;
  d.out_offset = outr.offset;
  d.dtype = xr.dtype;
  d.outer = 1;
  for (int64_t k = 0; k < axis; ++k) d.outer *= static_cast<uint64_t>(data.size(k));
  d.segments = static_cast<uint64_t>(segments);
  d.axis = static_cast<uint64_t>(axis_len);
  d.inner = 1;
  for (int64_t k = axis + 1; k < data.dim(); ++k) d.inner *= static_cast<uint64_t>(data.size(k));
  d.reduction = *reduction;
  if (initial.has_value()) {
    d.has_initial = true;
    // initial.to<scalar_t>(), as the CPU.
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, data.scalar_type(), "segment_reduce",
                                    [&] { d.initial = static_cast<float>(initial->to<scalar_t>()); });
  }
  TWGPU_TRY
  RuntimeLock lock;
  twgpu::segment_reduce(lock.ctx(), d);
  TWGPU_CATCH
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("segment_reduce", TORCH_FN(segment_reduce));
}

}  // namespace twgpu::aten
