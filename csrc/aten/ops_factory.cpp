// Creation ops, native: arange, range, linspace, logspace (a range kernel), eye
// (zero_ + a fill of the diagonal view) and tril_indices/triu_indices. Each first runs the op on an empty meta tensor:
// ATen's own checks and the output size; out= is resized as the CPU kernels do it.
//
// Values: integer arange/range are exact (int64 arithmetic), and so is integer linspace
// (the CPU's double arithmetic reproduced in integers); float ranges compute in f32 (the
// CPU accumulates float32 arange in double, so the last bit can differ, as on CUDA).
// float64/complex, integer logspace (a double pow) and integer linspace beyond 2**51 go to
// the CPU fallback.
#include <ATen/AccumulateType.h>
#include <ATen/Dispatch.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/arange_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/eye.h>
#include <ATen/ops/linspace.h>
#include <ATen/ops/linspace_ops.h>
#include <ATen/ops/logspace.h>
#include <ATen/ops/logspace_ops.h>
#include <ATen/ops/range.h>
#include <ATen/ops/range_ops.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "aten/cpu_fallback.h"
#include "aten/webgpu_tensor.h"
#include "kernels/shape_ops.h"

namespace twgpu::aten {
namespace {

// An empty meta tensor of out's dtype: running the op on it raises the CPU's errors and
// gives the result's size, without the resize warnings of the meta kernels.
at::Tensor meta_out(const at::Tensor& out) {
  return at::empty({0}, out.options().device(c10::kMeta));
}

// The element count of arange / range as the CPU's kernels compute it (in the output's
// accumulation type), or nullopt when the CPU would raise: the caller then runs the meta
// function (PyTorch's Python one, slow) for its error. The common case stays in C++.
std::optional<int64_t> range_count(const c10::Scalar& start, const c10::Scalar& end,
                                   const c10::Scalar& step, c10::ScalarType t, bool inclusive) {
  std::optional<int64_t> count;
  AT_DISPATCH_ALL_TYPES_AND2(at::kHalf, at::kBFloat16, t, "range_count", [&] {
    using acc_t = at::acc_type<scalar_t, false>;
    const acc_t xstart = start.to<acc_t>(), xend = end.to<acc_t>(), xstep = step.to<acc_t>();
    if (!(xstep > 0 || xstep < 0)) return;
    if (!std::isfinite(static_cast<double>(xstart)) || !std::isfinite(static_cast<double>(xend))) return;
    if (!((xstep > 0 && xend >= xstart) || (xstep < 0 && xend <= xstart))) return;
    double size_d;
    if (inclusive) {
      size_d = static_cast<double>(static_cast<int64_t>(((xend - xstart) / xstep) + 1));
    } else if constexpr (std::is_same_v<scalar_t, int64_t>) {
      const int64_t sgn = (xstep > 0) - (xstep < 0);
      size_d = static_cast<double>((xend - xstart + xstep - sgn) / xstep);  // integer division
    } else {
      size_d = std::ceil(static_cast<double>(end.to<double>() - start.to<double>()) / step.to<double>());
    }
    if (!(size_d >= 0 && size_d <= static_cast<double>(std::numeric_limits<int64_t>::max()))) return;
    count = static_cast<int64_t>(size_d);
  });
  return count;
}

// The CPU's 1-D factories resize `out` only when its element count differs (an out of the
// right count keeps its shape); arange warns when it resizes a non-empty out.
void resize_1d(at::Tensor& out, int64_t n, bool warn) {
  if (out.numel() == n) return;
  if (warn && out.numel() > 0) {
    TORCH_WARN("The number of elements in the out tensor of shape ", out.sizes(), " is ",
               out.numel(), " which does not match the computed number of elements ", n,
               ". Note that this may occur as a result of rounding error. "
               "The out tensor will be resized to a tensor of shape (", n, ",).");
  }
  out.resize_({n});
}

// Runs `r` into out (1-D), through a contiguous temporary when out is not contiguous.
void fill_range(const at::Tensor& out, RangeFill r) {
  if (out.numel() == 0) return;
  if (!out.is_contiguous()) {
    at::Tensor tmp = at::empty(out.sizes(), out.options());
    fill_range(tmp, r);
    out.copy_(tmp);
    return;
  }
  DeviceRef d = device_ref(out);
  r.dst = d.buffer;
  r.dst_offset = d.offset;
  r.dtype = d.dtype;
  r.numel = static_cast<uint64_t>(out.numel());
  TWGPU_TRY
  RuntimeLock lock;
  launch_range_fill(lock.ctx(), r);
  TWGPU_CATCH
}

// start + step * i, as the CPU's arange and range compute it (int64 for integer dtypes).
void fill_affine(const at::Tensor& out, const c10::Scalar& start, const c10::Scalar& step) {
  RangeFill r;
  r.kind = RangeKind::Affine;
  if (c10::isIntegralType(out.scalar_type(), /*includeBool=*/true)) {
    r.compute = Compute::I64;
    r.start = ScalarBits::from_i64(start.to<int64_t>());
    r.step = ScalarBits::from_i64(step.to<int64_t>());
  } else {
    r.compute = Compute::F32;
    r.start = ScalarBits::from_f32(static_cast<float>(start.to<double>()));
    r.step = ScalarBits::from_f32(static_cast<float>(step.to<double>()));
  }
  fill_range(out, r);
}

at::Tensor& arange_out(const c10::Scalar& start, const c10::Scalar& end, const c10::Scalar& step,
                       at::Tensor& out) {
  if (!is_native_compute(out.scalar_type()))
    return call_cpu_fallback<at::_ops::arange_start_out>(start, end, step, out);
  TORCH_CHECK_NOT_IMPLEMENTED(out.scalar_type() != at::kBool,
                              "\"arange_webgpu\" not implemented for 'Bool'");
  std::optional<int64_t> n = range_count(start, end, step, out.scalar_type(), false);
  if (!n) {
    at::Tensor twin = meta_out(out);
    at::arange_out(twin, start, end, step);
    n = twin.numel();
  }
  resize_1d(out, *n, /*warn=*/true);
  fill_affine(out, start, step);
  return out;
}

at::Tensor& range_out(const c10::Scalar& start, const c10::Scalar& end, const c10::Scalar& step,
                      at::Tensor& out) {
  if (!is_native_compute(out.scalar_type()))
    return call_cpu_fallback<at::_ops::range_out>(start, end, step, out);
  TORCH_CHECK_NOT_IMPLEMENTED(out.scalar_type() != at::kBool,
                              "\"range_webgpu\" not implemented for 'Bool'");
  std::optional<int64_t> n = range_count(start, end, step, out.scalar_type(), true);
  if (!n) {
    at::Tensor twin = meta_out(out);
    at::range_out(twin, start, end, step);
    n = twin.numel();
  }
  resize_1d(out, *n, /*warn=*/false);
  fill_affine(out, start, step);
  return out;
}

bool is_half_or_float(c10::ScalarType t) {
  return t == at::kFloat || t == at::kHalf || t == at::kBFloat16;
}

// start, end and step of linspace/logspace as the CPU computes them in the output's type.
void linear_endpoints(RangeFill& r, c10::ScalarType t, const c10::Scalar& start,
                      const c10::Scalar& end, int64_t steps) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, t, "linspace_webgpu", [&] {
    scalar_t s = start.to<scalar_t>(), e = end.to<scalar_t>();
    // linspace divides in the output's type, logspace in double.
    float step = r.kind == RangeKind::Logspace
                     ? static_cast<float>(static_cast<double>(e - s) / (steps - 1))
                     : static_cast<float>((e - s) / static_cast<scalar_t>(steps - 1));
    r.start = ScalarBits::from_f32(static_cast<float>(s));
    r.end = ScalarBits::from_f32(static_cast<float>(e));
    r.step = ScalarBits::from_f32(step);
  });
  r.compute = Compute::F32;
  r.steps = static_cast<uint64_t>(steps);
  r.halfway = static_cast<uint64_t>(steps / 2);
}

// The CPU's integer linspace: start and end in the output's type, the step in double.
// False when the values are too large for the exact device emulation.
bool integer_linspace(RangeFill& r, c10::ScalarType t, const c10::Scalar& start,
                      const c10::Scalar& end, int64_t steps) {
  int64_t s = 0, e = 0;
  AT_DISPATCH_INTEGRAL_TYPES(t, "linspace_webgpu", [&] {
    s = static_cast<int64_t>(start.to<scalar_t>());
    e = static_cast<int64_t>(end.to<scalar_t>());
  });
  constexpr int64_t kLimit = int64_t{1} << 51;
  if (std::abs(s) >= kLimit || std::abs(e) >= kLimit || steps > UINT32_MAX) return false;
  double step = (static_cast<double>(e) - static_cast<double>(s)) / (steps - 1);
  int exp = 0;
  double m = std::frexp(std::abs(step), &exp);  // |step| = m * 2^exp, m in [0.5, 1)
  r.kind = RangeKind::LinspaceInt;
  r.compute = Compute::I64;
  r.start = ScalarBits::from_i64(s);
  r.end = ScalarBits::from_i64(e);
  r.step_mantissa = static_cast<uint64_t>(std::ldexp(m, 53));
  r.step_exp = exp - 53;
  r.step_negative = step < 0;
  r.steps = static_cast<uint64_t>(steps);
  r.halfway = static_cast<uint64_t>(steps / 2);
  return true;
}

at::Tensor& linspace_out(const c10::Scalar& start, const c10::Scalar& end, int64_t steps,
                         at::Tensor& out) {
  const c10::ScalarType t = out.scalar_type();
  if (c10::isIntegralType(t, /*includeBool=*/false) && !start.isComplex() && !end.isComplex()) {
    RangeFill r;
    if (steps <= 1 || integer_linspace(r, t, start, end, steps)) {
      if (steps < 0) {  // the meta function raises the CPU's error
        at::Tensor twin = meta_out(out);
        at::linspace_out(twin, start, end, steps);
      }
      resize_1d(out, steps, /*warn=*/false);
      if (steps == 1) out.fill_(start);
      if (steps > 1) fill_range(out, r);
      return out;
    }
  }
  if (!is_half_or_float(t) || start.isComplex() || end.isComplex())
    return call_cpu_fallback<at::_ops::linspace_out>(start, end, steps, out);
  if (steps < 0) {
    at::Tensor twin = meta_out(out);
    at::linspace_out(twin, start, end, steps);
  }
  resize_1d(out, steps, /*warn=*/false);
  if (steps == 1) {
    out.fill_(start);
  } else if (steps > 1) {
    RangeFill r;
    r.kind = RangeKind::Linspace;
    linear_endpoints(r, out.scalar_type(), start, end, steps);
    fill_range(out, r);
  }
  return out;
}

at::Tensor& logspace_out(const c10::Scalar& start, const c10::Scalar& end, int64_t steps,
                         double base, at::Tensor& out) {
  if (!is_half_or_float(out.scalar_type()) || start.isComplex() || end.isComplex())
    return call_cpu_fallback<at::_ops::logspace_out>(start, end, steps, base, out);
  if (steps < 0) {
    at::Tensor twin = meta_out(out);
    at::logspace_out(twin, start, end, steps, base);
  }
  resize_1d(out, steps, /*warn=*/false);
  if (steps == 1) {
    out.fill_(std::pow(base, start.to<double>()));
  } else if (steps > 1) {
    RangeFill r;
    r.kind = RangeKind::Logspace;
    r.base = static_cast<float>(base);
    linear_endpoints(r, out.scalar_type(), start, end, steps);
    fill_range(out, r);
  }
  return out;
}

// tril_indices/triu_indices: per-row counts on the host (O(rows)), the (2, N) index
// expansion on the device.
at::Tensor triangle_indices(const char* name, bool upper, int64_t row, int64_t col,
                            int64_t offset, std::optional<c10::ScalarType> dtype_opt,
                            std::optional<c10::Layout> layout_opt,
                            std::optional<c10::Device> device_opt) {
  c10::ScalarType dtype = dtype_opt.value_or(at::kLong);
  TORCH_CHECK_NOT_IMPLEMENTED(dtype == at::kLong || dtype == at::kInt, "\"", name,
                              "\" not implemented for '", c10::toString(dtype), "'");
  TORCH_CHECK(row >= 0, "row must be non-negative, got", row);
  TORCH_CHECK(col >= 0, "col must be non-negative, got", col);
  if (layout_opt.has_value()) {
    TORCH_CHECK(*layout_opt == at::kStrided, "only support layout=torch.strided, got",
                *layout_opt);
  }
  auto options = at::TensorOptions().dtype(dtype).device(device_opt.value_or(
      c10::Device(kDeviceType, 0)));
  // Rows past the last non-empty one add nothing: the counts shrink (tril: grow) monotonically.
  std::vector<int64_t> ends;
  int64_t total = 0;
  for (int64_t r = 0; r < row; ++r) {
    int64_t n = upper ? col - std::clamp<int64_t>(r + offset, 0, col)
                      : std::clamp<int64_t>(r + offset + 1, 0, col);
    if (upper && n == 0) break;
    total += n;
    ends.push_back(total);
    if (!upper && n == col && total > 0) {
      // Every later row is full: finish the running sums arithmetically.
      for (int64_t t = r + 1; t < row; ++t) ends.push_back(total += col);
      break;
    }
  }
  at::Tensor out = at::empty({2, total}, options);
  if (total == 0) return out;
  TORCH_CHECK(total <= UINT32_MAX && row <= INT32_MAX && col <= INT32_MAX,
              "torch_webgpu: ", name, " output too large");
  at::Tensor host = at::empty({static_cast<int64_t>(ends.size())}, at::kLong);
  std::copy(ends.begin(), ends.end(), host.mutable_data_ptr<int64_t>());
  at::Tensor dev_ends = host.to(out.device());
  DeviceRef e = device_ref(dev_ends), o = device_ref(out);
  TORCH_INTERNAL_ASSERT(e.offset == 0 && o.offset == 0);
  int32_t off = static_cast<int32_t>(std::clamp<int64_t>(offset, -row - 1, col + 1));
  TWGPU_TRY
  RuntimeLock lock;
  launch_triangle_indices(lock.ctx(), e.buffer, static_cast<uint32_t>(ends.size()), o.buffer,
                          static_cast<uint64_t>(total), o.dtype, upper, off,
                          static_cast<uint32_t>(col));
  TWGPU_CATCH
  return out;
}

at::Tensor tril_indices(int64_t row, int64_t col, int64_t offset,
                        std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
                        std::optional<c10::Device> device, std::optional<bool> pin_memory) {
  return triangle_indices("tril_indices", false, row, col, offset, dtype, layout, device);
}

at::Tensor triu_indices(int64_t row, int64_t col, int64_t offset,
                        std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
                        std::optional<c10::Device> device, std::optional<bool> pin_memory) {
  return triangle_indices("triu_indices", true, row, col, offset, dtype, layout, device);
}

at::Tensor& eye_fill(at::Tensor& out) {
  out.zero_();
  if (out.numel() > 0) out.diagonal().fill_(1);
  return out;
}

at::Tensor& eye_m_out(c10::SymInt n, c10::SymInt m, at::Tensor& out) {
  at::Tensor twin = meta_out(out);
  at::eye_out(twin, n.expect_int(), m.expect_int());
  out.resize_({n.expect_int(), m.expect_int()});
  return eye_fill(out);
}

at::Tensor& eye_out(c10::SymInt n, at::Tensor& out) {
  at::Tensor twin = meta_out(out);
  at::eye_out(twin, n.expect_int());
  out.resize_({n.expect_int(), n.expect_int()});
  return eye_fill(out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("arange.start_out", TORCH_FN(arange_out));
  m.impl("range.out", TORCH_FN(range_out));
  m.impl("linspace.out", TORCH_FN(linspace_out));
  m.impl("logspace.out", TORCH_FN(logspace_out));
  m.impl("eye.m_out", TORCH_FN(eye_m_out));
  m.impl("eye.out", TORCH_FN(eye_out));
  m.impl("tril_indices", TORCH_FN(tril_indices));
  m.impl("triu_indices", TORCH_FN(triu_indices));
}

}  // namespace twgpu::aten
