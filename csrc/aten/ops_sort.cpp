// Native sorting and selection: sort (stable, both directions), topk, kthvalue, median,
// nanmedian and mode, all on one bitonic sort of (key, index) pairs per row (see
// kernels/sort.h). The sorted dim moves innermost first (a native contiguous copy).
// float64/complex and dtype combinations the CPU rejects go to the CPU fallback (which
// raises the CPU's error).
#include <ATen/WrapDimUtils.h>
#include <ATen/native/ReduceOpsUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/kthvalue_ops.h>
#include <ATen/ops/median_ops.h>
#include <ATen/ops/mode_ops.h>
#include <ATen/ops/nanmedian_ops.h>
#include <ATen/ops/sort_ops.h>
#include <ATen/ops/topk_ops.h>
#include <torch/library.h>

#include "aten/cpu_fallback.h"
#include "aten/webgpu_tensor.h"
#include "kernels/sort.h"

namespace twgpu::aten {
namespace {

using at::Tensor;

// `self` with `dim` moved innermost and made contiguous, as kernel rows.
struct Rows {
  Tensor in;
  int64_t dim = 0;  // wrapped (0 for a 0-dim self)
  bool scalar = false;
  SortInput input;
  Tensor scratch;  // the sorted (key, index) entries
};

// Sorts the rows of `self` along `dim` (self.numel() > 0).
Rows sort_along(const Tensor& self, int64_t dim, bool descending) {
  Rows r;
  r.scalar = self.dim() == 0;
  r.dim = r.scalar ? 0 : at::maybe_wrap_dim(dim, self.dim());
  r.in = (r.scalar ? self.reshape({1}) : self).movedim(r.dim, -1).contiguous();
  const int64_t n = r.in.size(-1);
  r.scratch = at::empty({static_cast<int64_t>(sort_scratch_words(r.in.numel() / n, n))},
                        r.in.options().dtype(at::kInt));
  TWGPU_TRY
    DeviceRef i = device_ref(r.in);
    r.input.buffer = i.buffer;
    r.input.offset = i.offset;
    r.input.dtype = i.dtype;
    r.input.rows = static_cast<uint64_t>(r.in.numel() / n);
    r.input.n = static_cast<uint64_t>(n);
    RuntimeLock lock;
    sort_rows(lock.ctx(), r.input, descending, device_ref(r.scratch).buffer);
  TWGPU_CATCH
  return r;
}

// The first k sorted entries of every row, in self's layout (dim of size k).
std::pair<Tensor, Tensor> take_sorted(const Rows& r, int64_t k) {
  auto sizes = r.in.sizes().vec();
  sizes.back() = k;
  Tensor values = at::empty(sizes, r.in.options());
  Tensor indices = at::empty(sizes, r.in.options().dtype(at::kLong));
  if (values.numel() > 0) {
    TWGPU_TRY
      DeviceRef v = device_ref(values), x = device_ref(indices);
      RuntimeLock lock;
      sorted_take(lock.ctx(), r.input, device_ref(r.scratch).buffer, static_cast<uint64_t>(k),
                  v.buffer, v.offset, x.buffer, x.offset);
    TWGPU_CATCH
  }
  if (r.scalar) return {values.reshape({}), indices.reshape({})};
  return {values.movedim(-1, r.dim), indices.movedim(-1, r.dim)};
}

// One entry per row, shaped as a reduction of self over the dim.
std::pair<Tensor, Tensor> pick_sorted(const Rows& r, SortedPick pick, int64_t position,
                                      bool keepdim) {
  auto sizes = r.in.sizes().vec();
  sizes.pop_back();
  Tensor values = at::empty(sizes, r.in.options());
  Tensor indices = at::empty(sizes, r.in.options().dtype(at::kLong));
  TWGPU_TRY
    DeviceRef v = device_ref(values), x = device_ref(indices);
    RuntimeLock lock;
    sorted_pick(lock.ctx(), r.input, device_ref(r.scratch).buffer, pick,
                static_cast<uint64_t>(position), v.buffer, v.offset, x.buffer, x.offset);
  TWGPU_CATCH
  if (keepdim && !r.scalar) return {values.unsqueeze(r.dim), indices.unsqueeze(r.dim)};
  return {values, indices};
}

void write_result(Tensor& out, const Tensor& result) {
  at::native::resize_output(out, result.sizes());
  out.copy_(result);
}

// The shape of a reduction of `self` over `dim`.
std::vector<int64_t> reduced_shape(const Tensor& self, int64_t dim, bool keepdim) {
  auto sizes = self.sizes().vec();
  if (self.dim() == 0) return sizes;
  dim = at::maybe_wrap_dim(dim, self.dim());
  if (keepdim) sizes[dim] = 1;
  else sizes.erase(sizes.begin() + dim);
  return sizes;
}

bool native_dtype(const Tensor& self, bool allow_bool) {
  const auto t = self.scalar_type();
  if (any_stored_only({&self}) || !is_native_compute(t) || c10::isComplexType(t)) return false;
  return allow_bool || t != at::kBool;
}

bool outputs_match(const Tensor& self, const Tensor& values, const Tensor& indices) {
  return values.scalar_type() == self.scalar_type() && indices.scalar_type() == at::kLong &&
         values.device() == self.device() && indices.device() == self.device();
}

std::tuple<Tensor&, Tensor&> sort_values_stable(const Tensor& self, std::optional<bool> stable,
                                                int64_t dim, bool descending, Tensor& values,
                                                Tensor& indices) {
  if (!native_dtype(self, true) || !outputs_match(self, values, indices))
    return call_cpu_fallback<at::_ops::sort_values_stable>(self, stable, dim, descending, values,
                                                           indices);
  dim = at::maybe_wrap_dim(dim, self.dim());
  if (self.numel() == 0) {
    at::native::resize_output(values, self.sizes());
    at::native::resize_output(indices, self.sizes());
    return {values, indices};
  }
  Rows r = sort_along(self, dim, descending);
  auto [v, i] = take_sorted(r, r.in.size(-1));
  write_result(values, v);
  write_result(indices, i);
  return {values, indices};
}

std::tuple<Tensor&, Tensor&> topk_values(const Tensor& self, int64_t k, int64_t dim, bool largest,
                                         bool sorted, Tensor& values, Tensor& indices) {
  if (!native_dtype(self, false) || !outputs_match(self, values, indices))
    return call_cpu_fallback<at::_ops::topk_values>(self, k, dim, largest, sorted, values,
                                                    indices);
  dim = at::maybe_wrap_dim(dim, self.dim(), /*wrap_scalar=*/true);
  TORCH_CHECK(k >= 0 && k <= (self.dim() > 0 ? self.size(dim) : 1),
              "selected index k out of range");
  auto sizes = self.sizes().vec();
  if (self.dim() > 0) sizes[dim] = k;
  if (self.numel() == 0 || k == 0) {
    at::native::resize_output(values, sizes);
    at::native::resize_output(indices, sizes);
    return {values, indices};
  }
  Rows r = sort_along(self, dim, largest);
  auto [v, i] = take_sorted(r, k);
  write_result(values, v);
  write_result(indices, i);
  return {values, indices};
}

// Shared by the one-element-per-row ops: shape checks, empty results, then the pick.
void pick_into(const Tensor& self, int64_t dim, bool keepdim, SortedPick pick, int64_t position,
               Tensor& values, Tensor& indices) {
  auto shape = reduced_shape(self, dim, keepdim);
  if (self.numel() == 0) {
    at::native::resize_output(values, shape);
    at::native::resize_output(indices, shape);
    return;
  }
  Rows r = sort_along(self, dim, false);
  auto [v, i] = pick_sorted(r, pick, position, keepdim);
  write_result(values, v);
  write_result(indices, i);
}

std::tuple<Tensor&, Tensor&> kthvalue_values(const Tensor& self, int64_t k, int64_t dim,
                                             bool keepdim, Tensor& values, Tensor& indices) {
  if (!native_dtype(self, false) || !outputs_match(self, values, indices))
    return call_cpu_fallback<at::_ops::kthvalue_values>(self, k, dim, keepdim, values, indices);
  dim = at::maybe_wrap_dim(dim, self.dim(), /*wrap_scalar=*/true);
  at::native::zero_numel_check_dims(self, dim, "kthvalue()");
  const int64_t size = self.dim() > 0 ? self.size(dim) : 1;
  TORCH_CHECK(k >= 1 && k <= size, "kthvalue(): selected number k out of range for dimension ",
              dim);
  pick_into(self, dim, keepdim, SortedPick::Position, k - 1, values, indices);
  return {values, indices};
}

std::tuple<Tensor&, Tensor&> median_dim_values(const Tensor& self, int64_t dim, bool keepdim,
                                               Tensor& values, Tensor& indices) {
  if (!native_dtype(self, false) || !outputs_match(self, values, indices))
    return call_cpu_fallback<at::_ops::median_dim_values>(self, dim, keepdim, values, indices);
  dim = at::maybe_wrap_dim(dim, self.dim(), /*wrap_scalar=*/true);
  at::native::zero_numel_check_dims(self, dim, "median()");
  pick_into(self, dim, keepdim, SortedPick::Median, 0, values, indices);
  return {values, indices};
}

std::tuple<Tensor&, Tensor&> nanmedian_dim_values(const Tensor& self, int64_t dim, bool keepdim,
                                                  Tensor& values, Tensor& indices) {
  if (!native_dtype(self, false) || !outputs_match(self, values, indices))
    return call_cpu_fallback<at::_ops::nanmedian_dim_values>(self, dim, keepdim, values, indices);
  dim = at::maybe_wrap_dim(dim, self.dim(), /*wrap_scalar=*/true);
  at::native::zero_numel_check_dims(self, dim, "nanmedian()");
  pick_into(self, dim, keepdim, SortedPick::NanMedian, 0, values, indices);
  return {values, indices};
}

// median() / nanmedian() over all elements: the value only.
Tensor median_all(const Tensor& self, SortedPick pick) {
  Rows r = sort_along(self.reshape({-1}), 0, false);
  return pick_sorted(r, pick, 0, false).first.reshape({});
}

Tensor median(const Tensor& self) {
  if (!native_dtype(self, false) || self.numel() == 0)
    return call_cpu_fallback<at::_ops::median>(self);
  return median_all(self, SortedPick::Median);
}

Tensor nanmedian(const Tensor& self) {
  if (!native_dtype(self, false) || self.numel() == 0)
    return call_cpu_fallback<at::_ops::nanmedian>(self);
  return median_all(self, SortedPick::NanMedian);
}

std::tuple<Tensor, Tensor> mode(const Tensor& self, int64_t dim, bool keepdim) {
  if (!native_dtype(self, true)) return call_cpu_fallback<at::_ops::mode>(self, dim, keepdim);
  dim = at::maybe_wrap_dim(dim, self.dim(), /*wrap_scalar=*/true);
  at::native::zero_numel_check_dims(self, dim, "mode()");
  Tensor values = at::empty({0}, self.options());
  Tensor indices = at::empty({0}, self.options().dtype(at::kLong));
  pick_into(self, dim, keepdim, SortedPick::Mode, 0, values, indices);
  return {values, indices};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("sort.values_stable", TORCH_FN(sort_values_stable));
  m.impl("topk.values", TORCH_FN(topk_values));
  m.impl("kthvalue.values", TORCH_FN(kthvalue_values));
  m.impl("median.dim_values", TORCH_FN(median_dim_values));
  m.impl("nanmedian.dim_values", TORCH_FN(nanmedian_dim_values));
  m.impl("median", TORCH_FN(median));
  m.impl("nanmedian", TORCH_FN(nanmedian));
  m.impl("mode", TORCH_FN(mode));
}

}  // namespace twgpu::aten
