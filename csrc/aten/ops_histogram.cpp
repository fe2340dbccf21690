// torch.histogram (bin count or bin edges, weights, density) from native ops: the bin of
// x is upper_bound(edges, x) - 1 (searchsorted, right), the last edge belongs to the last
// bin, values outside [first, last] edge (and NaN) count nowhere. That is the CPU's rule
// (its linear guess is corrected against the same edges), so bins agree exactly; weighted
// sums are added in another order.
#include <ATen/core/Tensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/aminmax.h>
#include <ATen/ops/diff.h>
#include <ATen/ops/div.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/full.h>
#include <ATen/ops/ge.h>
#include <ATen/ops/histogram_ops.h>
#include <ATen/ops/index_add.h>
#include <ATen/ops/le.h>
#include <ATen/ops/linspace.h>
#include <ATen/ops/logical_and.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/searchsorted.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <cmath>

#include "aten/cpu_fallback.h"
#include "aten/webgpu_tensor.h"

namespace twgpu::aten {
namespace {

using at::Tensor;

// float32 only: the CPU implements histogram for float and double (it raises for the
// rest, through the fallback here too).
bool native_float(const Tensor& t) { return t.scalar_type() == c10::kFloat; }

// hist over `edges` (1-D, ascending), as the CPU's histogramdd kernel bins.
Tensor histogram_over(const Tensor& self, const Tensor& edges,
                      const std::optional<Tensor>& weight, bool density) {
  const int64_t bins = edges.numel() - 1;
  Tensor x = self.reshape({-1});
  Tensor first = edges.narrow(0, 0, 1), last = edges.narrow(0, bins, 1);
  Tensor pos = at::sub(at::searchsorted(edges, x, /*out_int32=*/false, /*right=*/true), 1);
  pos = at::where(at::eq(x, last), at::full({}, bins - 1, pos.options()), pos);
  // Outside values (and NaN: both comparisons false) go to an extra bin that is dropped.
  Tensor inside = at::logical_and(at::ge(x, first), at::le(x, last));
  pos = at::where(inside, pos, at::full({}, bins, pos.options()));
  Tensor counts = weight.has_value() ? weight->reshape({-1}) : at::ones_like(x);
  Tensor hist = at::zeros({bins + 1}, self.options()).index_add_(0, pos, counts).narrow(0, 0, bins);
  if (density) {
    // As the CPU: divide by the total first, then by each bin's width.
    hist = at::div(hist, hist.sum());
    hist = at::div(hist, at::diff(edges));
  }
  return hist.contiguous();
}

bool weight_ok(const Tensor& self, const std::optional<Tensor>& weight) {
  return !weight.has_value() ||
         (weight->sizes() == self.sizes() && weight->scalar_type() == self.scalar_type() &&
          weight->device() == self.device());
}

std::tuple<Tensor, Tensor> histogram_bin_ct(const Tensor& self, int64_t bins,
                                            std::optional<at::ArrayRef<double>> range,
                                            const std::optional<Tensor>& weight, bool density) {
  auto fallback = [&] {
    return call_cpu_fallback<at::_ops::histogram_bin_ct>(self, bins, range, weight, density);
  };
  // Unusual input (including everything the CPU rejects) goes to the CPU, which raises.
  if (!native_float(self) || bins <= 0 || !weight_ok(self, weight) ||
      (range.has_value() && range->size() != 2))
    return fallback();
  double lo, hi;
  if (range.has_value()) {
    lo = (*range)[0];
    hi = (*range)[1];
  } else if (self.numel() == 0) {
    lo = 0.0;  // the CPU's range of no values
    hi = 1.0;
  } else {
    auto [mn, mx] = at::aminmax(self);
    lo = mn.item<double>();
    hi = mx.item<double>();
  }
  if (!std::isfinite(lo) || !std::isfinite(hi) || lo > hi) return fallback();
  if (lo == hi) {
    lo -= 0.5;
    hi += 0.5;
  }
  Tensor edges = at::linspace(lo, hi, bins + 1, self.options());
  return {histogram_over(self, edges, weight, density), edges};
}

std::tuple<Tensor, Tensor> histogram_bins_tensor(const Tensor& self, const Tensor& bins,
                                                 const std::optional<Tensor>& weight,
                                                 bool density) {
  if (!native_float(self) || bins.dim() != 1 || bins.numel() < 2 ||
      bins.scalar_type() != self.scalar_type() || bins.device() != self.device() ||
      !weight_ok(self, weight))
    return call_cpu_fallback<at::_ops::histogram_bins_tensor>(self, bins, weight, density);
  Tensor edges = bins.contiguous();
  return {histogram_over(self, edges, weight, density), edges.clone()};
}

void store(Tensor& out, const Tensor& value) {
  at::native::resize_output(out, value.sizes());
  out.copy_(value);
}

std::tuple<Tensor&, Tensor&> histogram_bin_ct_out(const Tensor& self, int64_t bins,
                                                  std::optional<at::ArrayRef<double>> range,
                                                  const std::optional<Tensor>& weight,
                                                  bool density, Tensor& hist, Tensor& edges) {
  if (hist.scalar_type() != self.scalar_type() || edges.scalar_type() != self.scalar_type())
    return call_cpu_fallback<at::_ops::histogram_bin_ct_out>(self, bins, range, weight, density,
                                                             hist, edges);
  auto [h, e] = histogram_bin_ct(self, bins, range, weight, density);
  store(hist, h);
  store(edges, e);
  return {hist, edges};
}

std::tuple<Tensor&, Tensor&> histogram_bins_tensor_out(const Tensor& self, const Tensor& bins,
                                                       const std::optional<Tensor>& weight,
                                                       bool density, Tensor& hist, Tensor& edges) {
  if (hist.scalar_type() != self.scalar_type() || edges.scalar_type() != self.scalar_type())
    return call_cpu_fallback<at::_ops::histogram_bins_tensor_out>(self, bins, weight, density,
                                                                  hist, edges);
  auto [h, e] = histogram_bins_tensor(self, bins, weight, density);
  store(hist, h);
  store(edges, e);
  return {hist, edges};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("histogram.bin_ct", TORCH_FN(histogram_bin_ct));
  m.impl("histogram.bins_tensor", TORCH_FN(histogram_bins_tensor));
  m.impl("histogram.bin_ct_out", TORCH_FN(histogram_bin_ct_out));
  m.impl("histogram.bins_tensor_out", TORCH_FN(histogram_bins_tensor_out));
}

}  // namespace twgpu::aten
