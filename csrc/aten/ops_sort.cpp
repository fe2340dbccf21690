// Native sorting, selection, searching and counting: sort (stable, both directions), topk,
// kthvalue, median, nanmedian, mode, searchsorted/bucketize, isin, unique (flat, along a
// dim, consecutive), bincount and histc, on the kernels of kernels/sort.h. The dim
// worked on moves innermost first (a native contiguous copy). Ties resolve as on the CPU
// where the CPU's order is specified (stable sort, median) and, for short rows, where it
// follows the CPU's selection algorithm (topk, kthvalue). float64/complex and dtype
// combinations the CPU rejects go to the CPU fallback (which raises the CPU's error).
#include <ATen/WrapDimUtils.h>
#include <ATen/native/BucketizationUtils.h>
#include <ATen/native/ReduceOpsUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_unique2_ops.h>
#include <ATen/ops/bincount_ops.h>
#include <ATen/ops/bucketize_ops.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/histc_ops.h>
#include <ATen/ops/isin_ops.h>
#include <ATen/ops/kthvalue.h>
#include <ATen/ops/kthvalue_ops.h>
#include <ATen/ops/median.h>
#include <ATen/ops/median_ops.h>
#include <ATen/ops/mode.h>
#include <ATen/ops/mode_ops.h>
#include <ATen/ops/nanmedian.h>
#include <ATen/ops/nanmedian_ops.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/searchsorted_ops.h>
#include <ATen/ops/sort.h>
#include <ATen/ops/sort_ops.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/topk.h>
#include <ATen/ops/topk_ops.h>
#include <ATen/ops/unique_consecutive_ops.h>
#include <ATen/ops/unique_dim_ops.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <array>
#include <cmath>
#include <cstring>
#include <functional>

#include "aten/cpu_fallback.h"
#include "aten/sort_beyond_binding.h"
#include "aten/webgpu_tensor.h"
#include "kernels/binding_window.h"
#include "kernels/scan.h"
#include "kernels/sort.h"
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

// `self` with `dim` moved innermost and made contiguous, as kernel rows.
struct Rows {
  Tensor in;
  int64_t dim = 0;  // wrapped (0 for a 0-dim self)
  bool scalar = false;
  SortInput input;
  Tensor scratch;  // the sorted (key, index) entries
};

// The kernels' view of `in`'s rows along its last dim (`in` contiguous, numel > 0).
SortInput rows_of(const Tensor& in) {
  DeviceRef r = device_ref(in);
  SortInput si;
  si.buffer = r.buffer;
  si.offset = r.offset;
  si.dtype = r.dtype;
  si.n = static_cast<uint64_t>(in.size(-1));
  si.rows = static_cast<uint64_t>(in.numel()) / si.n;
  return si;
}

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
    r.input = rows_of(r.in);
    RuntimeLock lock;
    sort_rows(lock.ctx(), r.input, descending, device_ref(r.scratch).buffer);
  TWGPU_CATCH
  return r;
}

// `self` sorted along `dim` (self.numel() > 0): values and indices in self's layout.
std::pair<Tensor, Tensor> sorted_along(const Tensor& self, int64_t dim, bool descending) {
  const bool scalar = self.dim() == 0;
  dim = scalar ? 0 : at::maybe_wrap_dim(dim, self.dim());
  Tensor in = (scalar ? self.reshape({1}) : self).movedim(dim, -1).contiguous();
  Tensor values = at::empty(in.sizes(), in.options());
  Tensor indices = at::empty(in.sizes(), in.options().dtype(at::kLong));
  const int64_t n = in.size(-1);
  Tensor scratch = at::empty({static_cast<int64_t>(sort_scratch_words(in.numel() / n, n))},
                             in.options().dtype(at::kInt));
  TWGPU_TRY
    DeviceRef v = device_ref(values), x = device_ref(indices);
    RuntimeLock lock;
    sort_take(lock.ctx(), rows_of(in), descending, device_ref(scratch).buffer,
              static_cast<uint64_t>(n), v.buffer, v.offset, x.buffer, x.offset);
  TWGPU_CATCH
  if (scalar) return {values.reshape({}), indices.reshape({})};
  return {values.movedim(-1, dim), indices.movedim(-1, dim)};
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

// Ops that treat each row along `dim` alone: when the rows' data and sort scratch exceed
// one storage binding, runs `op` over pieces of the rows ([rows, n] views, reducing along
// -1 into [rows, k]) and joins the pieces, shaped as the op's result (`reduces`: the dim
// is dropped unless keepdim). False when one piece holds everything, or when a single row
// is larger than a binding (the kernels then refuse it, naming themselves).
bool over_row_pieces(const Tensor& self, int64_t dim, bool reduces, bool keepdim,
                     const std::function<std::pair<Tensor, Tensor>(const Tensor&)>& op,
                     Tensor& values, Tensor& indices) {
  if (self.dim() == 0) return false;
  const int64_t n = self.size(dim), rows = self.numel() / n;
  const uint64_t per_row = std::max<uint64_t>(sort_scratch_words(1, n) * 4, uint64_t(n) * 8);
  const uint64_t budget = window_budget(Context::get());
  if (rows < 2 || per_row * rows <= budget || per_row > budget) return false;
  const int64_t step = static_cast<int64_t>(budget / per_row);
  Tensor in = self.movedim(dim, -1).reshape({rows, n});
  std::vector<Tensor> vs, is;
  for (int64_t lo = 0; lo < rows; lo += step) {
    // A buffer of its own: the sort kernels bind whole buffers.
    auto [v, i] = op(in.narrow(0, lo, std::min(step, rows - lo)).clone());
    vs.push_back(v);
    is.push_back(i);
  }
  auto lead = self.movedim(dim, -1).sizes().vec();
  lead.back() = vs[0].size(-1);
  Tensor v = at::cat(vs).reshape(lead).movedim(-1, dim);
  Tensor i = at::cat(is).reshape(lead).movedim(-1, dim);
  if (reduces && !keepdim) {
    v = v.squeeze(dim);
    i = i.squeeze(dim);
  }
  write_result(values, v);
  write_result(indices, i);
  return true;
}

// True when a row of `self` along `dim` is too long for the sort kernels' one binding
// (sort_beyond_binding.h splits such rows by value).
bool row_too_long(const Tensor& self, int64_t dim) {
  return self.dim() > 0 && sort_row_too_long(self.size(at::maybe_wrap_dim(dim, self.dim())));
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
  check_out_device(self, values);
  check_out_device(self, indices);
  if (!native_dtype(self, true) || !outputs_match(self, values, indices))
    return call_cpu_fallback<at::_ops::sort_values_stable>(self, stable, dim, descending, values,
                                                           indices);
  dim = at::maybe_wrap_dim(dim, self.dim());
  if (self.numel() == 0) {
    at::native::resize_output(values, self.sizes());
    at::native::resize_output(indices, self.sizes());
    return {values, indices};
  }
  auto sort_piece = [&](const Tensor& p) {
    auto [v, i] = at::sort(p, stable, -1, descending);
    return std::make_pair(v, i);
  };
  if (over_row_pieces(self, dim, false, false, sort_piece, values, indices)) return {values, indices};
  auto sorted_rows = [&] {
    if (row_too_long(self, dim)) return sort_long_rows(self, dim, descending);
    return sorted_along(self, dim, descending);
  };
  auto [v, i] = sorted_rows();
  write_result(values, v);
  write_result(indices, i);
  return {values, indices};
}

std::tuple<Tensor&, Tensor&> topk_values(const Tensor& self, int64_t k, int64_t dim, bool largest,
                                         bool sorted, Tensor& values, Tensor& indices) {
  check_out_device(self, values);
  check_out_device(self, indices);
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
  auto topk_piece = [&](const Tensor& p) {
    auto [v, i] = at::topk(p, k, -1, largest, sorted);
    return std::make_pair(v, i);
  };
  if (over_row_pieces(self, dim, false, false, topk_piece, values, indices)) return {values, indices};
  if (row_too_long(self, dim)) {
    auto [v, i] = topk_long_rows(self, k, dim, largest, sorted);
    write_result(values, v);
    write_result(indices, i);
    return {values, indices};
  }
  const int64_t length = self.dim() > 0 ? self.size(dim) : 1;
  // Short rows: the CPU's own selection steps, so ties report the CPU's indices. Longer
  // rows: topk_rows (a chunked selection for small k, a full sort otherwise).
  const bool serial = length <= static_cast<int64_t>(kTopkSerialMaxLength);
  const bool scalar = self.dim() == 0;
  Tensor in = (scalar ? self.reshape({1}) : self).movedim(scalar ? 0 : dim, -1).contiguous();
  auto out_sizes = in.sizes().vec();
  out_sizes.back() = k;
  Tensor v = at::empty(out_sizes, in.options());
  Tensor x = at::empty(out_sizes, in.options().dtype(at::kLong));
  const uint64_t rows = static_cast<uint64_t>(in.numel() / length);
  const uint64_t words = serial ? rows * length * 3 : sort_scratch_words(rows, length);
  Tensor scratch = at::empty({static_cast<int64_t>(words)}, in.options().dtype(at::kInt));
  TWGPU_TRY
    DeviceRef vr = device_ref(v), xr = device_ref(x);
    const SortInput si = rows_of(in);
    RuntimeLock lock;
    if (serial)
      topk_small_rows(lock.ctx(), si, static_cast<uint64_t>(k), largest, sorted,
                      device_ref(scratch).buffer, vr.buffer, vr.offset, xr.buffer, xr.offset);
    else
      topk_rows(lock.ctx(), si, static_cast<uint64_t>(k), largest, device_ref(scratch).buffer,
                vr.buffer, vr.offset, xr.buffer, xr.offset);
  TWGPU_CATCH
  write_result(values, scalar ? v.reshape({}) : v.movedim(-1, dim));
  write_result(indices, scalar ? x.reshape({}) : x.movedim(-1, dim));
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
  auto pick_piece = [&](const Tensor& p) {
    std::tuple<Tensor, Tensor> t;
    switch (pick) {
      case SortedPick::Position: t = at::kthvalue(p, position + 1, -1, true); break;
      case SortedPick::Median: t = at::median(p, -1, true); break;
      case SortedPick::NanMedian: t = at::nanmedian(p, -1, true); break;
      case SortedPick::Mode: t = at::mode(p, -1, true); break;
    }
    return std::make_pair(std::get<0>(t), std::get<1>(t));
  };
  if (self.dim() > 0 && over_row_pieces(self, dim, true, keepdim, pick_piece, values, indices)) return;
  auto [v, i] = row_too_long(self, dim) && pick != SortedPick::Mode
                    ? pick_long_rows(self, dim, keepdim, pick, position)
                    : pick_sorted(sort_along(self, dim, false), pick, position, keepdim);
  write_result(values, v);
  write_result(indices, i);
}

std::tuple<Tensor&, Tensor&> kthvalue_values(const Tensor& self, int64_t k, int64_t dim,
                                             bool keepdim, Tensor& values, Tensor& indices) {
  check_out_device(self, values);
  check_out_device(self, indices);
  if (!native_dtype(self, false) || !outputs_match(self, values, indices))
    return call_cpu_fallback<at::_ops::kthvalue_values>(self, k, dim, keepdim, values, indices);
  dim = at::maybe_wrap_dim(dim, self.dim(), /*wrap_scalar=*/true);
  at::native::zero_numel_check_dims(self, dim, "kthvalue()");
  const int64_t size = self.dim() > 0 ? self.size(dim) : 1;
  TORCH_CHECK(k >= 1 && k <= size, "kthvalue(): selected number k out of range for dimension ",
              dim);
  auto shape = reduced_shape(self, dim, keepdim);
  if (self.numel() == 0) {
    at::native::resize_output(values, shape);
    at::native::resize_output(indices, shape);
    return {values, indices};
  }
  auto kth_piece = [&](const Tensor& p) {
    auto [v, i] = at::kthvalue(p, k, -1, true);
    return std::make_pair(v, i);
  };
  if (over_row_pieces(self, dim, true, keepdim, kth_piece, values, indices)) return {values, indices};
  if (size > static_cast<int64_t>(kQuickselectMaxLength)) {
    // Long rows: the sorted order (the value is the CPU's; among equal values the index
    // may differ).
    pick_into(self, dim, keepdim, SortedPick::Position, k - 1, values, indices);
    return {values, indices};
  }
  // The CPU's quickselect, so that ties pick the same index.
  const bool scalar = self.dim() == 0;
  Tensor in = (scalar ? self.reshape({1}) : self).movedim(scalar ? 0 : dim, -1).contiguous();
  auto row_sizes = in.sizes().vec();
  row_sizes.pop_back();
  Tensor v = at::empty(row_sizes, in.options());
  Tensor x = at::empty(row_sizes, in.options().dtype(at::kLong));
  Tensor scratch = at::empty({in.numel() * 3}, in.options().dtype(at::kInt));
  TWGPU_TRY
    DeviceRef vr = device_ref(v), xr = device_ref(x);
    const SortInput si = rows_of(in);
    RuntimeLock lock;
    quickselect_rows(lock.ctx(), si, static_cast<uint64_t>(k - 1), device_ref(scratch).buffer,
                     vr.buffer, vr.offset, xr.buffer, xr.offset);
  TWGPU_CATCH
  if (keepdim && !scalar) {
    v = v.unsqueeze(dim);
    x = x.unsqueeze(dim);
  }
  write_result(values, v);
  write_result(indices, x);
  return {values, indices};
}

std::tuple<Tensor&, Tensor&> median_dim_values(const Tensor& self, int64_t dim, bool keepdim,
                                               Tensor& values, Tensor& indices) {
  check_out_device(self, values);
  check_out_device(self, indices);
  if (!native_dtype(self, false) || !outputs_match(self, values, indices))
    return call_cpu_fallback<at::_ops::median_dim_values>(self, dim, keepdim, values, indices);
  dim = at::maybe_wrap_dim(dim, self.dim(), /*wrap_scalar=*/true);
  at::native::zero_numel_check_dims(self, dim, "median()");
  pick_into(self, dim, keepdim, SortedPick::Median, 0, values, indices);
  return {values, indices};
}

std::tuple<Tensor&, Tensor&> nanmedian_dim_values(const Tensor& self, int64_t dim, bool keepdim,
                                                  Tensor& values, Tensor& indices) {
  check_out_device(self, values);
  check_out_device(self, indices);
  if (!native_dtype(self, false) || !outputs_match(self, values, indices))
    return call_cpu_fallback<at::_ops::nanmedian_dim_values>(self, dim, keepdim, values, indices);
  dim = at::maybe_wrap_dim(dim, self.dim(), /*wrap_scalar=*/true);
  at::native::zero_numel_check_dims(self, dim, "nanmedian()");
  pick_into(self, dim, keepdim, SortedPick::NanMedian, 0, values, indices);
  return {values, indices};
}

// median() / nanmedian() over all elements: the value only.
Tensor median_all(const Tensor& self, SortedPick pick) {
  if (sort_row_too_long(self.numel())) return pick_long_rows(self.reshape({-1}), 0, false, pick, 0).first.reshape({});
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
  // Rows longer than one invocation may walk go to the CPU (see kMaxSerialLoop).
  const int64_t wrapped = at::maybe_wrap_dim(dim, self.dim(), /*wrap_scalar=*/true);
  const int64_t length = self.dim() > 0 ? self.size(wrapped) : 1;
  if (!native_dtype(self, true) || length > static_cast<int64_t>(kMaxSerialLoop))
    return call_cpu_fallback<at::_ops::mode>(self, dim, keepdim);
  dim = at::maybe_wrap_dim(dim, self.dim(), /*wrap_scalar=*/true);
  at::native::zero_numel_check_dims(self, dim, "mode()");
  Tensor values = at::empty({0}, self.options());
  Tensor indices = at::empty({0}, self.options().dtype(at::kLong));
  pick_into(self, dim, keepdim, SortedPick::Mode, 0, values, indices);
  return {values, indices};
}


// ---- Searching: searchsorted, bucketize, isin ----

// A Python number searched in `boundaries`: a device 0-dim tensor already in the dtype the
// number promotes to with them (a float64 scalar tensor would send the op to the CPU).
Tensor search_scalar_tensor(const at::Scalar& value, const Tensor& boundaries) {
  Tensor wrapped = at::native::searchsorted_scalar_tensor(value, c10::Device(c10::kCPU));
  const auto common = at::result_type(boundaries, wrapped);
  return at::empty({}, boundaries.options().dtype(common)).fill_(value);
}

SortInput row_input(const Tensor& contiguous_row) {
  DeviceRef r = device_ref(contiguous_row);
  SortInput in;
  in.buffer = r.buffer;
  in.offset = r.offset;
  in.dtype = r.dtype;
  in.rows = 1;
  in.n = static_cast<uint64_t>(contiguous_row.numel());
  return in;
}

// The value range of a contiguous tensor as order keys (see value_range): reads 4 words back.
std::array<uint32_t, 4> read_range(const Tensor& t) {
  Tensor range = at::tensor({-1, 0, 0, 0}, at::TensorOptions().dtype(at::kInt)).to(t.device());
  TWGPU_TRY
    RuntimeLock lock;
    value_range(lock.ctx(), row_input(t), device_ref(range).buffer);
  TWGPU_CATCH
  Tensor host = range.cpu();
  std::array<uint32_t, 4> w;
  for (int i = 0; i < 4; ++i) w[i] = static_cast<uint32_t>(host.data_ptr<int32_t>()[i]);
  return w;
}

// Minimum and maximum of an integer tensor, when both fit in int32 (else nullopt).
std::optional<std::pair<int64_t, int64_t>> int_range(const Tensor& t) {
  auto w = read_range(t);
  if (t.scalar_type() == at::kLong) {
    // Keys are the high words: 0x80000000 means high word 0 (0 <= v < 2^32).
    if (w[0] != 0x80000000u || w[1] != 0x80000000u || w[2] > 0x7fffffffu) {
      if (w[0] < 0x80000000u) return std::make_pair<int64_t, int64_t>(-1, 0);  // negative
      return std::nullopt;
    }
    return std::make_pair<int64_t, int64_t>(0, static_cast<int64_t>(w[2]));
  }
  auto decode = [](uint32_t k) { return static_cast<int64_t>(static_cast<int32_t>(k ^ 0x80000000u)); };
  return std::make_pair(decode(w[0]), decode(w[1]));
}

float decode_float_key(uint32_t k) {
  uint32_t b = (k & 0x80000000u) ? (k & 0x7fffffffu) : ~k;
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

bool searchable_dtype(at::ScalarType t) {
  return is_native_compute(t) && !c10::isComplexType(t) && t != at::kBool;
}

Tensor& searchsorted_out(const Tensor& boundaries, const Tensor& self, bool out_int32, bool right,
                         std::optional<c10::string_view> side,
                         const std::optional<Tensor>& sorter_opt, Tensor& result) {
  const Tensor sorter = sorter_opt.has_value() ? *sorter_opt : Tensor();
  const auto common = at::result_type(boundaries, self);
  if (any_stored_only({&boundaries, &self}) || !searchable_dtype(common) ||
      !searchable_dtype(boundaries.scalar_type()) || !searchable_dtype(self.scalar_type()) ||
      boundaries.device() != self.device() || result.device() != self.device())
    return call_cpu_fallback<at::_ops::searchsorted_Tensor_out>(boundaries, self, out_int32, right,
                                                                side, sorter_opt, result);
  // ATen's checks, except the sorter's range (checked below without a CPU round trip).
  at::native::searchsorted_pre_check(boundaries, self, result, out_int32, right, side, Tensor());
  check_out_device(self, result);
  if (sorter.defined()) {
    TORCH_CHECK(sorter.device() == boundaries.device(), "torch.searchsorted(): sorter and boundary tensors should ",
                "have same device type, but got sorter tensor device type ", sorter.device(),
                " and input value tensor device type ", boundaries.device());
    TORCH_CHECK(sorter.sizes() == boundaries.sizes(), "torch.searchsorted(): boundary and sorter must have the same "
                "size, but got boundary tensor ", boundaries.sizes(), "and got sorter tensor ", sorter.sizes());
    TORCH_CHECK(sorter.scalar_type() == at::kLong, "torch.searchsorted(): sorter must be a tensor of long ",
                "dtype but got dtype ", sorter.scalar_type());
  }
  at::native::resize_output(result, self.sizes());
  const bool is_right = side.has_value() ? *side == "right" : right;
  Tensor sorted_rows = boundaries.to(common).contiguous();
  Tensor sorter_rows = sorter.defined() ? sorter.contiguous() : Tensor();
  if (sorter_rows.defined() && sorter_rows.numel() > 0) {
    auto range = int_range(sorter_rows);
    TORCH_CHECK(range && range->first >= 0 && range->second < sorter.sizes().back(),
                "torch.searchsorted(): sorter index out of range");
  }
  if (self.numel() == 0) return result;
  if (!sorter.defined()) {
    if (auto pieces = search_in_pieces(boundaries, self, out_int32, is_right)) {
      result.copy_(*pieces);
      return result;
    }
  }
  const int64_t m = boundaries.size(-1);
  Tensor values = self.to(common).contiguous();
  Tensor out = at::empty(self.sizes(), self.options().dtype(out_int32 ? at::kInt : at::kLong));
  if (m == 0) {
    out.zero_();
  } else {
    TWGPU_TRY
      DeviceRef b = device_ref(sorted_rows), v = device_ref(values), o = device_ref(out);
      SearchArgs a;
      a.boundaries = b.buffer;
      a.boundaries_offset = b.offset;
      a.dtype = b.dtype;
      a.m = static_cast<uint64_t>(m);
      if (sorter_rows.defined()) {
        DeviceRef s = device_ref(sorter_rows);
        a.sorter = s.buffer;
        a.sorter_offset = s.offset;
      }
      a.values = v.buffer;
      a.values_offset = v.offset;
      a.count = static_cast<uint64_t>(values.numel());
      a.per_row = boundaries.dim() == 1 ? a.count : static_cast<uint64_t>(self.size(-1));
      a.right = is_right;
      a.out = o.buffer;
      a.out_offset = o.offset;
      a.out_dtype = o.dtype;
      RuntimeLock lock;
      search_sorted(lock.ctx(), a);
    TWGPU_CATCH
  }
  result.copy_(out);
  return result;
}

Tensor searchsorted_fn(const Tensor& boundaries, const Tensor& self, bool out_int32, bool right,
                    std::optional<c10::string_view> side, const std::optional<Tensor>& sorter) {
  Tensor result = at::empty({0}, self.options().dtype(out_int32 ? at::kInt : at::kLong));
  searchsorted_out(boundaries, self, out_int32, right, side, sorter, result);
  return result;
}

Tensor searchsorted_scalar(const Tensor& boundaries, const at::Scalar& self, bool out_int32,
                           bool right, std::optional<c10::string_view> side,
                           const std::optional<Tensor>& sorter) {
  return searchsorted_fn(boundaries, search_scalar_tensor(self, boundaries),
                      out_int32, right, side, sorter);
}

Tensor& searchsorted_scalar_out(const Tensor& boundaries, const at::Scalar& self, bool out_int32,
                                bool right, std::optional<c10::string_view> side,
                                const std::optional<Tensor>& sorter, Tensor& result) {
  return searchsorted_out(boundaries, search_scalar_tensor(self, boundaries),
                          out_int32, right, side, sorter, result);
}

Tensor& bucketize_out(const Tensor& self, const Tensor& boundaries, bool out_int32, bool right,
                      Tensor& result) {
  TORCH_CHECK(boundaries.dim() == 1, "boundaries tensor must be 1 dimension, but got dim(",
              boundaries.dim(), ")");
  return searchsorted_out(boundaries, self, out_int32, right, std::nullopt, std::nullopt, result);
}

Tensor bucketize_fn(const Tensor& self, const Tensor& boundaries, bool out_int32, bool right) {
  Tensor result = at::empty({0}, self.options().dtype(out_int32 ? at::kInt : at::kLong));
  return bucketize_out(self, boundaries, out_int32, right, result);
}

Tensor bucketize_scalar(const at::Scalar& self, const Tensor& boundaries, bool out_int32, bool right) {
  return bucketize_fn(search_scalar_tensor(self, boundaries), boundaries,
                   out_int32, right);
}

Tensor& isin_out(const Tensor& elements, const Tensor& test_elements, bool assume_unique,
                 bool invert, Tensor& out) {
  check_out_device(elements, out);
  const auto common = at::result_type(elements, test_elements);
  if (any_stored_only({&elements, &test_elements}) || !searchable_dtype(common) ||
      !searchable_dtype(elements.scalar_type()) || !searchable_dtype(test_elements.scalar_type()) ||
      out.scalar_type() != at::kBool)
    return call_cpu_fallback<at::_ops::isin_Tensor_Tensor_out>(elements, test_elements,
                                                               assume_unique, invert, out);
  at::native::resize_output(out, elements.sizes());
  if (elements.numel() == 0) return out;
  if (test_elements.numel() == 0) {
    out.fill_(invert);
    return out;
  }
  if (auto pieces = isin_in_pieces(elements, test_elements, invert)) {
    out.copy_(*pieces);
    return out;
  }
  // Sort the test set once, then binary-search every element in it.
  Tensor sorted = sorted_along(test_elements.to(common).reshape({-1}), 0, false).first.contiguous();
  Tensor values = elements.to(common).contiguous();
  Tensor result = at::empty(elements.sizes(), elements.options().dtype(at::kBool));
  TWGPU_TRY
    DeviceRef b = device_ref(sorted), v = device_ref(values), o = device_ref(result);
    SearchArgs a;
    a.boundaries = b.buffer;
    a.boundaries_offset = b.offset;
    a.dtype = b.dtype;
    a.m = static_cast<uint64_t>(sorted.numel());
    a.values = v.buffer;
    a.values_offset = v.offset;
    a.count = static_cast<uint64_t>(values.numel());
    a.per_row = a.count;
    a.membership = true;
    a.invert = invert;
    a.out = o.buffer;
    a.out_offset = o.offset;
    a.out_dtype = DType::Bool;
    RuntimeLock lock;
    search_sorted(lock.ctx(), a);
  TWGPU_CATCH
  out.copy_(result);
  return out;
}

Tensor& isin_tensor_scalar_out(const Tensor& elements, const at::Scalar& test_element,
                               bool assume_unique, bool invert, Tensor& out) {
  if (test_element.isBoolean() || test_element.isComplex() || !searchable_dtype(elements.scalar_type()))
    return call_cpu_fallback<at::_ops::isin_Tensor_Scalar_out>(elements, test_element,
                                                                assume_unique, invert, out);
  return isin_out(elements, search_scalar_tensor(test_element, elements), assume_unique, invert, out);
}

Tensor& isin_scalar_tensor_out(const at::Scalar& element, const Tensor& test_elements,
                               bool assume_unique, bool invert, Tensor& out) {
  if (element.isBoolean() || element.isComplex() || !searchable_dtype(test_elements.scalar_type()))
    return call_cpu_fallback<at::_ops::isin_Scalar_Tensor_out>(element, test_elements,
                                                                assume_unique, invert, out);
  return isin_out(search_scalar_tensor(element, test_elements), test_elements, assume_unique, invert, out);
}

// ---- unique ----

// Unique values of `self` flattened: sorted (or consecutive runs when !sort), with the
// inverse map and counts. The number of groups needs one read-back, as on CUDA.
std::tuple<Tensor, Tensor, Tensor> unique_impl(const Tensor& self, bool sort, bool return_inverse,
                                               bool return_counts) {
  const auto long_opts = self.options().dtype(at::kLong);
  if (self.numel() == 0) {
    return {at::empty({0}, self.options()),
            return_inverse ? at::empty(self.sizes(), long_opts) : at::empty({0}, long_opts),
            at::empty({0}, long_opts)};
  }
  if (sort_row_too_long(self.numel())) return unique_long(self, sort, return_inverse, return_counts);
  Tensor flat = self.reshape({-1}).contiguous();
  const int64_t n = flat.numel();
  Rows r;
  if (sort) r = sort_along(flat, 0, false);
  Tensor first = at::empty({n}, self.options().dtype(at::kInt));
  Tensor group = at::empty({n}, self.options().dtype(at::kInt));
  TWGPU_TRY
    SortInput in = row_input(flat);
    WGPUBuffer scratch = sort ? device_ref(r.scratch).buffer : nullptr;
    DeviceRef f = device_ref(first), g = device_ref(group);
    RuntimeLock lock;
    unique_flags(lock.ctx(), in, scratch, f.buffer);
    ScanArgs s;
    s.op = ScanOp::Sum;
    s.dtype = DType::Int32;
    s.rows = 1;
    s.n = static_cast<uint64_t>(n);
    s.in = f.buffer;
    s.in_offset = f.offset;
    s.out = g.buffer;
    s.out_offset = g.offset;
    scan_rows(lock.ctx(), s);
  TWGPU_CATCH
  const int64_t groups = group.select(0, n - 1).item<int32_t>();
  Tensor values = at::empty({groups}, self.options());
  Tensor inverse = return_inverse ? at::empty(self.sizes(), long_opts) : at::empty({0}, long_opts);
  Tensor counts = at::empty({return_counts ? groups : 0}, long_opts);
  Tensor start = return_counts ? at::empty({groups}, self.options().dtype(at::kInt)) : Tensor();
  TWGPU_TRY
    SortInput in = row_input(flat);
    WGPUBuffer scratch = sort ? device_ref(r.scratch).buffer : nullptr;
    DeviceRef v = device_ref(values);
    DeviceRef inv = return_inverse ? device_ref(inverse) : DeviceRef{};
    WGPUBuffer start_buffer = return_counts ? device_ref(start).buffer : nullptr;
    RuntimeLock lock;
    unique_scatter(lock.ctx(), in, scratch, device_ref(first).buffer, device_ref(group).buffer,
                   v.buffer, v.offset, inv.buffer, inv.offset, start_buffer);
    if (return_counts) {
      DeviceRef c = device_ref(counts);
      unique_counts(lock.ctx(), start_buffer, static_cast<uint64_t>(groups),
                    static_cast<uint64_t>(n), c.buffer, c.offset);
    }
  TWGPU_CATCH
  return {values, inverse, counts};
}

bool unique_native(const Tensor& self) {
  return native_dtype(self, true);
}

std::tuple<Tensor, Tensor, Tensor> unique2(const Tensor& self, bool sorted, bool return_inverse,
                                           bool return_counts) {
  if (!unique_native(self))
    return call_cpu_fallback<at::_ops::_unique2>(self, sorted, return_inverse, return_counts);
  // The CPU returns sorted values either way.
  return unique_impl(self, true, return_inverse, return_counts);
}

// Unique slices of `self` along `dim` (sorted lexicographically, or consecutive runs).
// Like the CPU, always returns the inverse (size(dim)) and counts.
std::tuple<Tensor, Tensor, Tensor> unique_dim_impl(const Tensor& self, int64_t dim, bool sort) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  const auto long_opts = self.options().dtype(at::kLong);
  if (self.numel() == 0) {
    TORCH_CHECK(self.size(dim) == 0,
                "There are 0 sized dimensions, and they aren't selected, so unique cannot be applied");
    return {at::empty(self.sizes(), self.options()), at::empty({0}, long_opts),
            at::empty({0}, long_opts)};
  }
  Tensor moved = self.movedim(dim, 0).contiguous();
  if (auto pieces = unique_slices_in_pieces(moved, sort)) {
    auto& [values, inverse, counts] = *pieces;
    return {values.movedim(0, dim), inverse, counts};
  }
  const int64_t slices = moved.size(0);
  const int64_t width = moved.numel() / slices;
  const auto int_opts = self.options().dtype(at::kInt);
  Tensor order = sort ? at::empty({static_cast<int64_t>(sort_padded_length(slices))}, int_opts) : Tensor();
  Tensor first = at::empty({slices}, int_opts);
  Tensor group = at::empty({slices}, int_opts);
  SortInput in;
  TWGPU_TRY
    DeviceRef m = device_ref(moved);
    in.buffer = m.buffer;
    in.offset = m.offset;
    in.dtype = m.dtype;
    in.rows = static_cast<uint64_t>(slices);
    in.n = static_cast<uint64_t>(width);
    DeviceRef f = device_ref(first), g = device_ref(group);
    WGPUBuffer order_buffer = sort ? device_ref(order).buffer : nullptr;
    RuntimeLock lock;
    if (sort) sort_slices(lock.ctx(), in, order_buffer);
    slice_flags(lock.ctx(), in, order_buffer, f.buffer);
    ScanArgs s;
    s.op = ScanOp::Sum;
    s.dtype = DType::Int32;
    s.rows = 1;
    s.n = static_cast<uint64_t>(slices);
    s.in = f.buffer;
    s.in_offset = f.offset;
    s.out = g.buffer;
    s.out_offset = g.offset;
    scan_rows(lock.ctx(), s);
  TWGPU_CATCH
  const int64_t groups = group.select(0, slices - 1).item<int32_t>();
  auto sizes = moved.sizes().vec();
  sizes[0] = groups;
  Tensor values = at::empty(sizes, self.options());
  Tensor inverse = at::empty({slices}, long_opts);
  Tensor counts = at::empty({groups}, long_opts);
  Tensor start = at::empty({groups}, int_opts);
  TWGPU_TRY
    DeviceRef v = device_ref(values), inv = device_ref(inverse), c = device_ref(counts);
    WGPUBuffer order_buffer = sort ? device_ref(order).buffer : nullptr;
    WGPUBuffer start_buffer = device_ref(start).buffer;
    RuntimeLock lock;
    slice_scatter(lock.ctx(), in, order_buffer, device_ref(first).buffer, device_ref(group).buffer,
                  v.buffer, v.offset, inv.buffer, inv.offset, start_buffer);
    unique_counts(lock.ctx(), start_buffer, static_cast<uint64_t>(groups),
                  static_cast<uint64_t>(slices), c.buffer, c.offset);
  TWGPU_CATCH
  return {values.movedim(0, dim), inverse, counts};
}

// Slices wider than one invocation may walk (see kMaxSerialLoop) go to the CPU.
bool slices_too_wide(const Tensor& self, int64_t dim) {
  if (self.dim() == 0 || self.numel() == 0) return false;
  dim = at::maybe_wrap_dim(dim, self.dim());
  return self.numel() / self.size(dim) > static_cast<int64_t>(kMaxSerialLoop);
}

std::tuple<Tensor, Tensor, Tensor> unique_dim(const Tensor& self, int64_t dim, bool sorted,
                                              bool return_inverse, bool return_counts) {
  if (!unique_native(self) || self.dim() == 0 || slices_too_wide(self, dim))
    return call_cpu_fallback<at::_ops::unique_dim>(self, dim, sorted, return_inverse, return_counts);
  return unique_dim_impl(self, dim, true);
}

std::tuple<Tensor, Tensor, Tensor> unique_consecutive(const Tensor& self, bool return_inverse,
                                                      bool return_counts,
                                                      std::optional<int64_t> dim) {
  if (!unique_native(self) || (dim.has_value() && (self.dim() == 0 || slices_too_wide(self, *dim))))
    return call_cpu_fallback<at::_ops::unique_consecutive>(self, return_inverse, return_counts, dim);
  if (dim.has_value()) return unique_dim_impl(self, *dim, false);
  return unique_impl(self, false, return_inverse, return_counts);
}

// ---- histograms ----

Tensor bincount_fn(const Tensor& self, const std::optional<Tensor>& weights_opt, int64_t minlength) {
  const Tensor weights = weights_opt.has_value() ? *weights_opt : Tensor();
  const bool weighted = weights.defined();
  auto fallback = [&] { return call_cpu_fallback<at::_ops::bincount>(self, weights_opt, minlength); };
  const auto t = self.scalar_type();
  // float32 weights sum in float32 (as on the CPU); integer/bool weights sum exactly in
  // int64 and convert to the CPU's float64 result. Other weights sum in float64: CPU.
  const bool float_weights = weighted && weights.scalar_type() == at::kFloat;
  const bool int_weights = weighted && at::isIntegralType(weights.scalar_type(), /*includeBool=*/true);
  if (!at::isIntegralType(t, /*includeBool=*/false) || self.dim() != 1 || minlength < 0 ||
      (weighted && ((!float_weights && !int_weights) || weights.dim() != 1 ||
                    weights.size(0) != self.size(0) || weights.device() != self.device())))
    return fallback();  // the CPU raises the matching error, or computes in float64
  const auto out_opts = !weighted ? self.options().dtype(at::kLong)
                                  : weights.options().dtype(float_weights ? at::kFloat : at::kDouble);
  if (self.numel() == 0) return at::zeros({minlength}, out_opts);
  Tensor in = self.contiguous();
  auto range = int_range(in);
  if (!range || range->first < 0) return fallback();
  const int64_t bins = std::max(range->second + 1, minlength);
  Tensor counts = at::zeros({bins}, self.options().dtype(float_weights ? at::kFloat
                                                     : int_weights  ? at::kLong
                                                                    : at::kInt));
  Tensor w = weighted ? weights.contiguous() : Tensor();
  TWGPU_TRY
    HistogramArgs a;
    a.in = row_input(in);
    a.bins = static_cast<uint32_t>(bins);
    DeviceRef c = device_ref(counts);
    a.counts = c.buffer;
    a.counts_offset = c.offset;
    if (weighted) {
      DeviceRef wr = device_ref(w);
      a.weights = wr.buffer;
      a.weights_offset = wr.offset;
      a.weights_dtype = wr.dtype;
    }
    RuntimeLock lock;
    histogram(lock.ctx(), a);
  TWGPU_CATCH
  return counts.to(out_opts.dtype());
}

Tensor& histc_out(const Tensor& self, int64_t bins, const at::Scalar& min, const at::Scalar& max,
                  Tensor& out) {
  check_out_device(self, out);
  auto fallback = [&]() -> Tensor& { return call_cpu_fallback<at::_ops::histc_out>(self, bins, min, max, out); };
  if (!native_dtype(self, false) || !at::isFloatingType(self.scalar_type()) ||
      out.scalar_type() != self.scalar_type() || out.device() != self.device() || bins <= 0)
    return fallback();
  float lo = min.toFloat(), hi = max.toFloat();
  if (!(lo <= hi) || !std::isfinite(lo) || !std::isfinite(hi)) return fallback();  // CPU errors
  Tensor in = self.contiguous();
  if (lo == hi && in.numel() > 0) {
    auto w = read_range(in);
    lo = decode_float_key(w[0]);
    hi = decode_float_key(w[1]);
    if (!std::isfinite(lo) || !std::isfinite(hi)) return fallback();
  }
  if (lo == hi) {
    lo -= 1;
    hi += 1;
  }
  // The range in the input's type (the CPU bins in it).
  if (self.scalar_type() == at::kHalf) {
    lo = static_cast<float>(c10::Half(lo));
    hi = static_cast<float>(c10::Half(hi));
  } else if (self.scalar_type() == at::kBFloat16) {
    lo = static_cast<float>(c10::BFloat16(lo));
    hi = static_cast<float>(c10::BFloat16(hi));
  }
  Tensor counts = at::zeros({bins}, self.options().dtype(at::kInt));
  TWGPU_TRY
    HistogramArgs a;
    a.in = row_input(in);
    a.bins = static_cast<uint32_t>(bins);
    a.lo = lo;
    a.hi = hi;
    DeviceRef c = device_ref(counts);
    a.counts = c.buffer;
    a.counts_offset = c.offset;
    RuntimeLock lock;
    histogram(lock.ctx(), a);
  TWGPU_CATCH
  at::native::resize_output(out, {bins});
  out.copy_(counts);
  return out;
}

Tensor histc_fn(const Tensor& self, int64_t bins, const at::Scalar& min, const at::Scalar& max) {
  Tensor out = at::empty({0}, self.options());
  return histc_out(self, bins, min, max, out);
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
  m.impl("searchsorted.Tensor", TORCH_FN(searchsorted_fn));
  m.impl("searchsorted.Tensor_out", TORCH_FN(searchsorted_out));
  m.impl("searchsorted.Scalar", TORCH_FN(searchsorted_scalar));
  m.impl("searchsorted.Scalar_out", TORCH_FN(searchsorted_scalar_out));
  m.impl("bucketize.Tensor", TORCH_FN(bucketize_fn));
  m.impl("bucketize.Tensor_out", TORCH_FN(bucketize_out));
  m.impl("bucketize.Scalar", TORCH_FN(bucketize_scalar));
  m.impl("isin.Tensor_Tensor_out", TORCH_FN(isin_out));
  m.impl("isin.Tensor_Scalar_out", TORCH_FN(isin_tensor_scalar_out));
  m.impl("isin.Scalar_Tensor_out", TORCH_FN(isin_scalar_tensor_out));
  m.impl("_unique2", TORCH_FN(unique2));
  m.impl("unique_consecutive", TORCH_FN(unique_consecutive));
  m.impl("unique_dim", TORCH_FN(unique_dim));
  m.impl("bincount", TORCH_FN(bincount_fn));
  m.impl("histc", TORCH_FN(histc_fn));
  m.impl("histc.out", TORCH_FN(histc_out));
}

}  // namespace twgpu::aten
