// Sorting and searching beyond one binding (see sort_beyond_binding.h). A row is split by value: the
// distinct values of a sorted sample are splitters, and each element goes to the open
// interval between two splitters or to a splitter's own "equal" bucket. Buckets are
// gathered in index order (nonzero + index_select, which split their work), so equal
// elements keep their order and a stable sort of each bucket is a stable sort of the row.
// An equal bucket needs no sort; an open bucket still too long is split again. Every step
// is an op that already handles tensors beyond one binding.
#include "aten/sort_beyond_binding.h"

#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/cumsum.h>
#include <ATen/ops/div.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/full.h>
#include <ATen/ops/gt.h>
#include <ATen/ops/isin.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/lt.h>
#include <ATen/ops/ne.h>
#include <ATen/ops/nonzero.h>
#include <ATen/ops/searchsorted.h>
#include <ATen/ops/sort.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/topk.h>
#include <ATen/ops/unique_consecutive.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <vector>

#include "kernels/binding_window.h"
#include "runtime/runtime.h"

namespace twgpu::aten {
namespace {

using at::Tensor;
using Sorted = std::pair<Tensor, Tensor>;

// Bytes one row of n elements needs in a binding: its sort scratch or its int64 indices.
uint64_t sort_row_bytes(uint64_t n) {
  return std::max<uint64_t>(sort_scratch_words(1, n) * 4, n * 8);
}

// The longest row the sort kernels take in one binding.
int64_t longest_sortable_row() {
  const uint64_t budget = window_budget(Context::get());
  uint64_t fits = 1, too_long = budget / 8 + 1;
  while (too_long - fits > 1) {
    const uint64_t mid = fits + (too_long - fits) / 2;
    (sort_row_bytes(mid) <= budget ? fits : too_long) = mid;
  }
  return static_cast<int64_t>(fits);
}

// The sort kernels bind whole buffers: a view into a larger one is copied out first.
Tensor own_buffer(const Tensor& t) {
  return t.storage().nbytes() > window_budget(Context::get()) ? t.clone() : t;
}

constexpr int kMaxSplits = 32;

// Stable sort of the 1-D `x` (values, int64 indices into x).
Sorted sort_row(const Tensor& x, bool descending, int depth) {
  const int64_t n = x.numel(), fits = longest_sortable_row();
  if (n <= fits) {
    auto [v, i] = at::sort(own_buffer(x), /*stable=*/true, 0, descending);
    return {v, i};
  }
  TORCH_CHECK(depth < kMaxSplits, "torch_webgpu: sorting a row of ", n,
              " elements: its values did not split into buckets that fit one storage binding");
  const bool floating = at::isFloatingType(x.scalar_type());
  // Aim buckets at half of what fits, so that a sample's error rarely needs a second split.
  const int64_t buckets = (n + fits / 2 - 1) / (fits / 2);
  const int64_t stride = std::max<int64_t>(1, n / std::max<int64_t>(buckets * 64, 4096));
  Tensor sample = x.slice(0, 0, n, stride).contiguous();
  if (floating) sample = sample.masked_select(at::isnan(sample).logical_not());
  Tensor splitters = at::empty({0}, x.options());
  if (sample.numel() > 0) {
    Tensor ordered = std::get<0>(at::sort(sample));
    std::vector<int64_t> quantiles;
    for (int64_t b = 1; b < buckets; ++b) quantiles.push_back(b * ordered.numel() / buckets);
    Tensor at_quantiles = at::tensor(quantiles, x.options().dtype(at::kLong).device(at::kCPU));
    splitters = std::get<0>(at::unique_consecutive(ordered.index_select(0, at_quantiles.to(x.device()))));
  }
  // Buckets in ascending order: below splitter 0, equal to it, between 0 and 1, ...,
  // above the last, then NaN (the largest value, as on the CPU). A bucket is (j, equal):
  // the open interval below splitter j (j == count: above the last), or splitter j itself.
  const int64_t count = splitters.numel();
  std::vector<std::pair<int64_t, bool>> buckets_in_order;
  for (int64_t j = 0; j <= count; ++j) {
    buckets_in_order.emplace_back(j, false);
    if (j < count) buckets_in_order.emplace_back(j, true);
  }
  if (floating) buckets_in_order.emplace_back(-1, true);
  if (descending) std::reverse(buckets_in_order.begin(), buckets_in_order.end());
  auto mask_of = [&](int64_t j, bool equal) {  // made one at a time: each is n bytes
    if (j < 0) return at::isnan(x);
    if (equal) return at::eq(x, splitters.select(0, j));
    Tensor below = j < count ? at::lt(x, splitters.select(0, j)) : Tensor();
    Tensor above = j > 0 ? at::gt(x, splitters.select(0, j - 1)) : Tensor();
    if (below.defined() && above.defined()) return below.logical_and_(above);
    if (below.defined()) return below;
    if (above.defined()) return above;
    return at::eq(x, x);  // no splitters (the sample was all NaN): every number
  };
  std::vector<Tensor> values, indices;
  for (const auto& [j, equal] : buckets_in_order) {
    Tensor where = at::nonzero(mask_of(j, equal)).squeeze(1);
    if (where.numel() == 0) continue;
    Tensor bucket = x.index_select(0, where);
    if (!equal) {  // equal values (and NaNs) keep their index order: already stable
      auto [v, order] = sort_row(bucket, descending, depth + 1);
      bucket = v;
      where = where.index_select(0, order);
    }
    values.push_back(bucket);
    indices.push_back(where);
  }
  if (values.size() == 1) return {values[0], indices[0]};
  return {at::cat(values), at::cat(indices)};
}

// The top k of the 1-D `x` (values, int64 indices into x).
Sorted topk_row(const Tensor& x, int64_t k, bool largest, bool sorted) {
  const int64_t n = x.numel(), fits = longest_sortable_row();
  if (n <= fits) {
    auto [v, i] = at::topk(own_buffer(x), k, 0, largest, sorted);
    return {v, i};
  }
  if (k > fits / 2) {
    auto [v, i] = sort_row(x, largest, 0);
    return {v.narrow(0, 0, k), i.narrow(0, 0, k)};
  }
  const int64_t chunks = n / fits;
  Tensor head = x.narrow(0, 0, chunks * fits).view({chunks, fits});
  auto [head_v, head_i] = at::topk(chunks == 1 ? head.clone() : head, k, 1, largest, true);
  head_i.add_(at::arange(chunks, head_i.options()).mul_(fits).unsqueeze(1));
  std::vector<Tensor> cand_v{head_v.reshape({-1})}, cand_i{head_i.reshape({-1})};
  if (n > chunks * fits) {
    const int64_t rest = n - chunks * fits;
    auto [v, i] = at::topk(x.narrow(0, chunks * fits, rest).clone(), std::min(k, rest), 0,
                           largest, true);
    cand_v.push_back(v);
    cand_i.push_back(i.add_(chunks * fits));
  }
  Tensor candidates = at::cat(cand_i);
  auto [v, i] = topk_row(at::cat(cand_v), k, largest, sorted);
  return {v, candidates.index_select(0, i)};
}

// `row_op` on every row of `self` along `dim`, stacked back into self's layout.
template <typename RowOp>
Sorted over_rows(const Tensor& self, int64_t dim, RowOp row_op) {
  const bool scalar = self.dim() == 0;
  dim = scalar ? 0 : at::maybe_wrap_dim(dim, self.dim());
  Tensor in = (scalar ? self.reshape({1}) : self).movedim(dim, -1);
  const int64_t n = in.size(-1), rows = in.numel() / n;
  Tensor flat = in.reshape({rows, n});
  std::vector<Tensor> vs, is;
  for (int64_t r = 0; r < rows; ++r) {
    auto [v, i] = row_op(flat.select(0, r));
    vs.push_back(v);
    is.push_back(i);
  }
  auto sizes = in.sizes().vec();
  sizes.back() = vs[0].size(0);
  Tensor v = (rows == 1 ? vs[0] : at::stack(vs)).reshape(sizes);
  Tensor i = (rows == 1 ? is[0] : at::stack(is)).reshape(sizes);
  if (scalar) return {v.reshape({}), i.reshape({})};
  return {v.movedim(-1, dim), i.movedim(-1, dim)};
}

}  // namespace

bool sort_row_too_long(int64_t n) {
  return sort_row_bytes(static_cast<uint64_t>(n)) > window_budget(Context::get());
}

Sorted sort_long_rows(const Tensor& self, int64_t dim, bool descending) {
  return over_rows(self, dim, [&](const Tensor& row) { return sort_row(row, descending, 0); });
}

Sorted topk_long_rows(const Tensor& self, int64_t k, int64_t dim, bool largest, bool sorted) {
  return over_rows(self, dim, [&](const Tensor& row) { return topk_row(row, k, largest, sorted); });
}

Sorted pick_long_rows(const Tensor& self, int64_t dim, bool keepdim, SortedPick pick,
                      int64_t position) {
  TORCH_CHECK(pick != SortedPick::Mode, "torch_webgpu: mode of rows longer than one binding");
  const bool scalar = self.dim() == 0;
  dim = scalar ? 0 : at::maybe_wrap_dim(dim, self.dim());
  auto [sorted_v, sorted_i] = sort_long_rows(self, dim, false);
  Tensor v = scalar ? sorted_v.reshape({1}) : sorted_v.movedim(dim, -1);
  Tensor i = scalar ? sorted_i.reshape({1}) : sorted_i.movedim(dim, -1);
  const int64_t n = v.size(-1);
  auto row_shape = v.sizes().vec();
  row_shape.back() = 1;
  const auto long_opts = v.options().dtype(at::kLong);
  Tensor at_pos = at::full(row_shape, position, long_opts);
  if (pick != SortedPick::Position) {
    // NaNs sort last: median takes the first of them, nanmedian the lower median before.
    Tensor nans = at::isFloatingType(v.scalar_type())
                      ? at::isnan(v).sum(-1, /*keepdim=*/true)
                      : at::zeros(row_shape, long_opts);
    Tensor numbers = at::full(row_shape, n, long_opts).sub_(nans);
    Tensor lower_median = at::div(numbers.sub(1), 2, "floor");
    at_pos = pick == SortedPick::Median
                 ? at::where(nans.gt(0), numbers, lower_median)
                 : at::where(numbers.gt(0), lower_median, at::zeros(row_shape, long_opts));
  }
  Tensor value = v.gather(-1, at_pos), index = i.gather(-1, at_pos);
  if (scalar) return {value.reshape({}), index.reshape({})};
  if (keepdim) return {value.movedim(-1, dim), index.movedim(-1, dim)};
  return {value.squeeze(-1), index.squeeze(-1)};
}

std::tuple<Tensor, Tensor, Tensor> unique_long(const Tensor& self, bool sort,
                                               bool return_inverse, bool return_counts) {
  Tensor flat = self.reshape({-1});
  const int64_t n = flat.numel();
  Tensor ordered = flat, order;
  if (sort) std::tie(ordered, order) = sort_long_rows(flat, 0, false);
  // Where a run of equal values starts (NaN equals nothing: each is a value of its own,
  // as on the CPU).
  Tensor starts = at::empty({n}, self.options().dtype(at::kBool));
  starts.narrow(0, 0, 1).fill_(true);
  starts.narrow(0, 1, n - 1).copy_(at::ne(ordered.narrow(0, 1, n - 1), ordered.narrow(0, 0, n - 1)));
  const auto long_opts = self.options().dtype(at::kLong);
  Tensor values = ordered.masked_select(starts);
  Tensor inverse = at::empty({0}, long_opts), counts = at::empty({0}, long_opts);
  if (return_inverse) {
    Tensor group = at::cumsum(starts, 0).sub_(1);
    inverse = (sort ? at::empty({n}, long_opts).scatter_(0, order, group) : group)
                  .reshape(self.sizes());
  }
  if (return_counts) {
    Tensor first = at::nonzero(starts).squeeze(1);
    const int64_t groups = first.numel();
    Tensor next = at::cat({first.narrow(0, 1, groups - 1), at::full({1}, n, long_opts)});
    counts = next.sub_(first);
  }
  return {values, inverse, counts};
}

std::optional<std::tuple<Tensor, Tensor, Tensor>> unique_slices_in_pieces(const Tensor& moved,
                                                                          bool sort) {
  const int64_t slices = moved.size(0);
  const uint64_t budget = window_budget(Context::get());
  if (static_cast<uint64_t>(moved.numel() * moved.element_size()) <= budget &&
      static_cast<uint64_t>(sort_padded_length(slices)) * 16 <= budget)
    return std::nullopt;
  Tensor rows = moved.reshape({slices, -1});
  const int64_t width = rows.size(1);
  const auto long_opts = moved.options().dtype(at::kLong);
  Tensor order = at::arange(slices, long_opts);
  for (int64_t j = sort ? width - 1 : -1; j >= 0; --j) {
    Tensor keys = rows.select(1, j).index_select(0, order);
    order = order.index_select(0, sort_long_rows(keys, 0, false).second);
  }
  Tensor ordered = sort ? rows.index_select(0, order) : rows;
  Tensor starts = at::empty({slices}, moved.options().dtype(at::kBool));
  starts.narrow(0, 0, 1).fill_(true);
  if (slices > 1)
    starts.narrow(0, 1, slices - 1)
        .copy_(at::ne(ordered.narrow(0, 1, slices - 1), ordered.narrow(0, 0, slices - 1)).any(1));
  Tensor first = at::nonzero(starts).squeeze(1);
  const int64_t groups = first.numel();
  auto sizes = moved.sizes().vec();
  sizes[0] = groups;
  Tensor values = ordered.index_select(0, first).reshape(sizes);
  Tensor group = at::cumsum(starts, 0).sub_(1);
  Tensor inverse = sort ? at::empty({slices}, long_opts).scatter_(0, order, group) : group;
  Tensor next = at::cat({first.narrow(0, 1, groups - 1), at::full({1}, slices, long_opts)});
  return std::make_tuple(values, inverse, next.sub_(first));
}

std::optional<Tensor> search_in_pieces(const Tensor& boundaries, const Tensor& values,
                                       bool out_int32, bool right) {
  // Pieces of at most a binding of int64 (the widest element either side holds).
  const int64_t piece = static_cast<int64_t>(window_budget(Context::get()) / 8);
  const int64_t m = boundaries.numel(), n = values.numel();
  if (boundaries.dim() != 1 || (m <= piece && n <= piece)) return std::nullopt;
  Tensor flat = values.reshape({-1});
  Tensor out = at::zeros({n}, values.options().dtype(out_int32 ? at::kInt : at::kLong));
  for (int64_t b = 0; b < std::max<int64_t>(m, 1); b += piece) {
    Tensor chunk = boundaries.narrow(0, b, std::min(piece, m - b)).clone();
    for (int64_t v = 0; v < n; v += piece) {
      const int64_t len = std::min(piece, n - v);
      out.narrow(0, v, len).add_(at::searchsorted(chunk, flat.narrow(0, v, len).clone(), out_int32, right));
    }
  }
  return out.reshape(values.sizes());
}

std::optional<Tensor> isin_in_pieces(const Tensor& elements, const Tensor& test_elements,
                                     bool invert) {
  const int64_t chunk = longest_sortable_row();
  const int64_t piece = static_cast<int64_t>(window_budget(Context::get()) / 8);
  const int64_t m = test_elements.numel(), n = elements.numel();
  if (m <= chunk && n <= piece) return std::nullopt;
  Tensor tests = test_elements.reshape({-1}), flat = elements.reshape({-1});
  Tensor out = at::full({n}, invert, elements.options().dtype(at::kBool));
  for (int64_t t = 0; t < m; t += chunk) {
    Tensor part = tests.narrow(0, t, std::min(chunk, m - t)).clone();
    for (int64_t e = 0; e < n; e += piece) {
      const int64_t len = std::min(piece, n - e);
      Tensor found = at::isin(flat.narrow(0, e, len).clone(), part, false, invert);
      Tensor slot = out.narrow(0, e, len);
      if (invert) slot.logical_and_(found);  // in no chunk
      else slot.logical_or_(found);          // in some chunk
    }
  }
  return out.reshape(elements.sizes());
}

}  // namespace twgpu::aten
