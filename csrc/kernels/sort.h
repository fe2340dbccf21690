// Sorting and selection along rows: a stable bitonic sort of (key, original index) pairs,
// and kernels that read the sorted pairs back as values + int64 indices (sort, topk) or as
// one element per row (kthvalue, median, nanmedian, mode).
//
// Rows are contiguous: element (r, i) of the input sits at `offset + r * n + i`. Keys are
// order-preserving u32 pairs: floats sort NaN as the largest value and -0 equal to +0 (as
// the CPU's comparisons do); descending order complements the key, so ties keep their
// original order either way.
#pragma once
#include <webgpu/webgpu.h>

#include <cstdint>

#include "kernels/dtype.h"

namespace twgpu {

class Context;

struct SortInput {
  WGPUBuffer buffer = nullptr;
  uint64_t offset = 0;  // elements
  DType dtype = DType::Float32;
  uint64_t rows = 0;
  uint64_t n = 0;  // row length (> 0)
};

// Row length padded to the power of two the network sorts.
uint64_t sort_padded_length(uint64_t n);
// Words of scratch sort_rows needs (three u32 per padded element).
uint64_t sort_scratch_words(uint64_t rows, uint64_t n);

// Sorts every row into `scratch` (sort_scratch_words words): entry (r, i) holds the i-th
// element of row r in order, as its key and its index within the row.
void sort_rows(Context& ctx, const SortInput& in, bool descending, WGPUBuffer scratch);

// values[r * k + i] = input[r, idx], indices[r * k + i] = idx for the first k sorted
// entries of each row. Offsets in elements; values have the
// input's dtype, indices are int64.
void sorted_take(Context& ctx, const SortInput& in, WGPUBuffer scratch, uint64_t k,
                 WGPUBuffer values, uint64_t values_offset, WGPUBuffer indices,
                 uint64_t indices_offset);

enum class SortedPick : uint32_t {
  Position = 0,   // the entry at `position` (kthvalue: ascending sort, k - 1)
  Median = 1,     // lower median; the first NaN of the row when it has one
  NanMedian = 2,  // lower median of the non-NaN entries (the first entry when all are NaN)
  Mode = 3,       // most frequent value (smallest on ties), its last index
};
// One value + int64 index per row from rows sorted ascending.
void sorted_pick(Context& ctx, const SortInput& in, WGPUBuffer scratch, SortedPick pick,
                 uint64_t position, WGPUBuffer values, uint64_t values_offset,
                 WGPUBuffer indices, uint64_t indices_offset);

}  // namespace twgpu
