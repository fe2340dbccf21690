// Native scans: cumsum, cumprod, cummax/cummin (through their helpers) and logcumsumexp.
// The scanned dim moves innermost (a native contiguous copy); one invocation walks each row.
// float64/complex and dtypes the kernels do not take go to the CPU fallback.
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_cummax_helper_ops.h>
#include <ATen/ops/_cummin_helper_ops.h>
#include <ATen/ops/_logcumsumexp_ops.h>
#include <ATen/ops/cumprod_ops.h>
#include <ATen/ops/cumsum_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/logaddexp.h>
#include <ATen/ops/where.h>
#include <torch/library.h>

#include "aten/cpu_fallback.h"
#include "aten/webgpu_tensor.h"
#include "kernels/binding_window.h"
#include "kernels/scan.h"
#include "runtime/runtime.h"

namespace twgpu::aten {
namespace {

using at::Tensor;

// out= tensors must live where the input does (the message is the one CUDA gives).
void check_out_device(const Tensor& self, const Tensor& out) {
  TORCH_CHECK(out.device() == self.device(),
              "Expected all tensors to be on the same device, but found at least two devices, ",
              self.device(), " and ", out.device(), "!");
}

// Scans the contiguous rows of `in` into `values` (and `indices` when defined), both
// contiguous and sized like it.
void scan_contiguous(ScanOp op, const Tensor& in, const Tensor& values, const Tensor& indices) {
  const int64_t n = in.size(-1);
  TWGPU_TRY
    DeviceRef i = device_ref(in), o = device_ref(values);
    ScanArgs a;
    a.op = op;
    a.dtype = i.dtype;
    a.rows = static_cast<uint64_t>(in.numel() / n);
    a.n = static_cast<uint64_t>(n);
    a.in = i.buffer;
    a.in_offset = i.offset;
    a.out = o.buffer;
    a.out_offset = o.offset;
    if (indices.defined()) {
      DeviceRef x = device_ref(indices);
      a.indices = x.buffer;
      a.indices_offset = x.offset;
    }
    RuntimeLock lock;
    scan_rows(lock.ctx(), a);
  TWGPU_CATCH
}

// Scans `src` (already in the result dtype) along `dim` into `values` (and `indices`),
// both sized like src.
void run_scan(ScanOp op, const Tensor& src, int64_t dim, const Tensor& values,
              const Tensor* indices) {
  if (src.numel() == 0) return;
  Tensor in = src.dim() == 0 ? src.reshape({1}) : src;
  dim = src.dim() == 0 ? 0 : at::maybe_wrap_dim(dim, src.dim());
  in = in.movedim(dim, -1).contiguous();
  // Results whose rows already lie contiguous along the scanned dim take the kernel's
  // output directly (no staging tensor and copy: the copy moved as many bytes as the scan).
  auto direct = [&](const Tensor& t) {
    return t.dim() > 0 && dim == t.dim() - 1 && t.is_contiguous() && t.sizes() == in.sizes() &&
           !t.storage().is_alias_of(in.storage());
  };
  const bool into_results = direct(values) && (!indices || direct(*indices));
  Tensor out_values = into_results ? values : at::empty(in.sizes(), in.options());
  Tensor out_indices;
  if (indices) out_indices = into_results ? *indices : at::empty(in.sizes(), in.options().dtype(at::kLong));
  const int64_t n = in.size(-1);
  const int64_t fit = static_cast<int64_t>(window_budget(Context::get()) / in.element_size());
  if (n > fit / (indices ? 2 : 1)) {
    // Rows longer than one storage binding holds: chunks of columns, each scanned alone and
    // then combined with the running state the previous chunk ended on.
    const int64_t step = indices ? fit / 2 : fit;
    for (int64_t c0 = 0; c0 < n; c0 += step) {
      const int64_t len = std::min(step, n - c0);
      Tensor piece = in.narrow(-1, c0, len).contiguous();
      Tensor scanned = at::empty(piece.sizes(), piece.options());
      Tensor pos = indices ? at::empty(piece.sizes(), piece.options().dtype(at::kLong)) : Tensor();
      scan_contiguous(op, piece, scanned, pos);
      if (indices) pos.add_(c0);
      if (c0 > 0) {
        Tensor carry = out_values.narrow(-1, c0 - 1, 1);
        if (op == ScanOp::Sum) scanned.add_(carry);
        if (op == ScanOp::Prod) scanned.mul_(carry);
        if (op == ScanOp::LogSumExp) scanned = at::logaddexp(scanned, carry);
        if (indices) {
          // The chunk's running extreme wins over the carry where the kernel's `replaces`
          // would have let it: a NaN always, else not below (max) / above (min) a non-NaN.
          Tensor beats = op == ScanOp::Max ? scanned.ge(carry) : scanned.le(carry);
          Tensor wins = at::isnan(scanned).logical_or(at::isnan(carry).logical_not().logical_and(beats));
          scanned = at::where(wins, scanned, carry);
          pos = at::where(wins, pos, out_indices.narrow(-1, c0 - 1, 1));
        }
      }
      out_values.narrow(-1, c0, len).copy_(scanned);
      if (indices) out_indices.narrow(-1, c0, len).copy_(pos);
    }
  } else {
    scan_contiguous(op, in, out_values, out_indices);
  }
  if (into_results) return;
  auto back = [&](const Tensor& t) {
    return src.dim() == 0 ? t.reshape({}) : t.movedim(-1, dim);
  };
  values.copy_(back(out_values));
  if (indices) indices->copy_(back(out_indices));
}

bool native_scan_dtype(at::ScalarType t, bool float_only) {
  if (!is_native_compute(t) || c10::isComplexType(t)) return false;
  if (float_only) return at::isFloatingType(t);
  return true;
}

Tensor& cum_op_out(ScanOp op, const Tensor& self, int64_t dim,
                   std::optional<at::ScalarType> dtype, Tensor& out) {
  at::maybe_wrap_dim(dim, self.dim());
  const at::ScalarType out_dtype = dtype.value_or(out.scalar_type());
  TORCH_CHECK(out.scalar_type() == out_dtype, "Expected out tensor to have dtype ", out_dtype,
              ", but got ", out.scalar_type(), " instead");
  at::native::resize_output(out, self.sizes());
  if (self.numel() == 0) return out;
  Tensor src = self.to(out_dtype);
  // A fresh result only where `out` shares memory with `self` (in-place cumsum_): the
  // kernel must not read what it has written. Otherwise the scan writes `out` itself.
  if (!out.storage().is_alias_of(self.storage())) {
    run_scan(op, src, dim, out, nullptr);
    return out;
  }
  Tensor result = at::empty(self.sizes(), self.options().dtype(out_dtype));
  run_scan(op, src, dim, result, nullptr);
  out.copy_(result);
  return out;
}

bool scan_falls_back(const Tensor& self, const Tensor& out) {
  return any_stored_only({&self, &out}) || !native_scan_dtype(self.scalar_type(), false) ||
         !native_scan_dtype(out.scalar_type(), false) || out.scalar_type() == at::kBool;
}

Tensor& cumsum_out(const Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype,
                   Tensor& out) {
  check_out_device(self, out);
  if (scan_falls_back(self, out) || (dtype && !native_scan_dtype(*dtype, false)))
    return call_cpu_fallback<at::_ops::cumsum_out>(self, dim, dtype, out);
  return cum_op_out(ScanOp::Sum, self, dim, dtype, out);
}

Tensor& cumprod_out(const Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype,
                    Tensor& out) {
  check_out_device(self, out);
  if (scan_falls_back(self, out) || (dtype && !native_scan_dtype(*dtype, false)))
    return call_cpu_fallback<at::_ops::cumprod_out>(self, dim, dtype, out);
  return cum_op_out(ScanOp::Prod, self, dim, dtype, out);
}

void cummax_helper(const Tensor& self, Tensor& values, Tensor& indices, int64_t dim) {
  if (any_stored_only({&self, &values}) || !native_scan_dtype(self.scalar_type(), false) ||
      values.scalar_type() != self.scalar_type() || indices.scalar_type() != at::kLong)
    return call_cpu_fallback<at::_ops::_cummax_helper>(self, values, indices, dim);
  run_scan(ScanOp::Max, self, dim, values, &indices);
}

void cummin_helper(const Tensor& self, Tensor& values, Tensor& indices, int64_t dim) {
  if (any_stored_only({&self, &values}) || !native_scan_dtype(self.scalar_type(), false) ||
      values.scalar_type() != self.scalar_type() || indices.scalar_type() != at::kLong)
    return call_cpu_fallback<at::_ops::_cummin_helper>(self, values, indices, dim);
  run_scan(ScanOp::Min, self, dim, values, &indices);
}

Tensor logcumsumexp_fn(const Tensor& self, int64_t dim) {
  if (any_stored_only({&self}) || !native_scan_dtype(self.scalar_type(), true))
    return call_cpu_fallback<at::_ops::_logcumsumexp>(self, dim);
  at::maybe_wrap_dim(dim, self.dim());
  Tensor result = at::empty(self.sizes(), self.options());
  run_scan(ScanOp::LogSumExp, self, dim, result, nullptr);
  return result;
}

Tensor& logcumsumexp_out(const Tensor& self, int64_t dim, Tensor& out) {
  check_out_device(self, out);
  if (any_stored_only({&self, &out}) || !native_scan_dtype(self.scalar_type(), true) ||
      out.scalar_type() != self.scalar_type())
    return call_cpu_fallback<at::_ops::_logcumsumexp_out>(self, dim, out);
  Tensor result = logcumsumexp_fn(self, dim);
  at::native::resize_output(out, result.sizes());
  out.copy_(result);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("cumsum.out", TORCH_FN(cumsum_out));
  m.impl("cumprod.out", TORCH_FN(cumprod_out));
  m.impl("_cummax_helper", TORCH_FN(cummax_helper));
  m.impl("_cummin_helper", TORCH_FN(cummin_helper));
  m.impl("_logcumsumexp", TORCH_FN(logcumsumexp_fn));
  m.impl("_logcumsumexp.out", TORCH_FN(logcumsumexp_out));
}

}  // namespace twgpu::aten
