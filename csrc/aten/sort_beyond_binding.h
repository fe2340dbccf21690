// Sorting, selecting and searching beyond one storage binding. The sort kernels hold a
// whole row (with their scratch) in one binding, so a longer row is split by value into
// buckets that fit, each sorted on its own, joined in order; searches split the sorted
// set and the searched values into pieces (sort_beyond_binding.cpp). Used by ops_sort.cpp
// where its kernels would refuse a tensor.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <tuple>
#include <utility>

#include "kernels/sort.h"

namespace twgpu::aten {

// True when one row of `n` elements, with its sort scratch, exceeds one binding.
bool sort_row_too_long(int64_t n);

// Stable sort of `self` along `dim` (values, int64 indices), for rows of any length.
std::pair<at::Tensor, at::Tensor> sort_long_rows(const at::Tensor& self, int64_t dim,
                                                 bool descending);

// topk along `dim` for rows of any length: the top k of binding-sized chunks, then the
// top k of those candidates.
std::pair<at::Tensor, at::Tensor> topk_long_rows(const at::Tensor& self, int64_t k, int64_t dim,
                                                 bool largest, bool sorted);

// One entry per row (kthvalue's position, median, nanmedian) from the ascending sort, for
// rows of any length; shaped as a reduction over `dim`. Mode is not handled here.
std::pair<at::Tensor, at::Tensor> pick_long_rows(const at::Tensor& self, int64_t dim,
                                                 bool keepdim, SortedPick pick, int64_t position);

// unique / unique_consecutive of the flattened `self` (values, inverse, counts) for more
// elements than one sort holds, composed from ops that split their work.
std::tuple<at::Tensor, at::Tensor, at::Tensor> unique_long(const at::Tensor& self, bool sort,
                                                           bool return_inverse,
                                                           bool return_counts);

// unique(dim=) / unique_consecutive(dim=) of `moved` (the slices along dim 0, as [S, W])
// when it exceeds what the slice kernels bind: slices ordered by stable sorts of their
// columns, last column first (a radix sort over columns), then compared with their
// neighbours. Returns (values [groups, W...], inverse, counts); nullopt when it fits.
std::optional<std::tuple<at::Tensor, at::Tensor, at::Tensor>> unique_slices_in_pieces(
    const at::Tensor& moved, bool sort);

// searchsorted in a 1-D sorted `boundaries` (no sorter) when it or `values` exceeds one
// binding: positions are counts of boundaries before a value, so they add over chunks of
// the boundaries; values go in pieces (each piece's search promotes dtypes as the op
// does). nullopt when everything fits (the kernel's path), before any copy.
std::optional<at::Tensor> search_in_pieces(const at::Tensor& boundaries, const at::Tensor& values,
                                           bool out_int32, bool right);

// isin when the test set or the elements exceed what one sort or search holds: membership
// in the whole set is membership in any chunk of it. nullopt when everything fits.
std::optional<at::Tensor> isin_in_pieces(const at::Tensor& elements, const at::Tensor& test_elements,
                                         bool invert);

}  // namespace twgpu::aten
