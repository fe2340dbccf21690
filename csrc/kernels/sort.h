// Sorting and selection along rows: a stable bitonic sort of (key, original index) pairs,
// and kernels that read the sorted pairs back as values + int64 indices (sort, topk) or as
// one element per row (kthvalue, median, nanmedian, mode); topk of long rows selects each
// chunk's best k level by level instead of sorting whole rows.
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

// Mesa's llvmpipe ends every loop of an invocation once 65535 iterations have run in all
// (silently): kernels that walk a row in one invocation take rows up to this length.
constexpr uint64_t kMaxSerialLoop = 32768;

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

// Sorts every row and writes its first k entries: values[r * k + i] = input[r, idx],
// indices[r * k + i] = idx (offsets in elements; values in the input's dtype, int64
// indices). Rows that fit one workgroup's chunk are sorted and written in one dispatch;
// longer ones go through `scratch` (sort_scratch_words words) as sort_rows leaves it.
void sort_take(Context& ctx, const SortInput& in, bool descending, WGPUBuffer scratch,
               uint64_t k, WGPUBuffer values, uint64_t values_offset, WGPUBuffer indices,
               uint64_t indices_offset);

// topk: values and int64 indices of the first k entries of every row sorted ascending
// (descending when `largest`), exactly sort_take's result (ties by index,
// NaN largest). For k well below a row, without sorting whole rows: each pass sorts chunks
// of a row in workgroup memory and keeps the first k of each, until one chunk is left.
// `scratch`: sort_scratch_words(rows, n) words.
void topk_rows(Context& ctx, const SortInput& in, uint64_t k, bool largest, WGPUBuffer scratch,
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

// Binary search of values in sorted rows (searchsorted, bucketize, isin). Boundaries are
// contiguous rows of m elements; value i searches row i / per_row. With a sorter (int64,
// row-relative positions) row entry j is boundaries[row, sorter[row, j]].
struct SearchArgs {
  WGPUBuffer boundaries = nullptr;
  uint64_t boundaries_offset = 0;
  DType dtype = DType::Float32;  // of boundaries and values
  uint64_t m = 0;                // row length (> 0)
  WGPUBuffer sorter = nullptr;   // optional
  uint64_t sorter_offset = 0;
  WGPUBuffer values = nullptr;
  uint64_t values_offset = 0;
  uint64_t count = 0;
  uint64_t per_row = 0;
  bool right = false;
  // Membership (isin): out (bool) is whether the value equals an entry of its row; the
  // rows are sorted ascending with NaNs last, as sort_rows orders them.
  bool membership = false;
  bool invert = false;
  WGPUBuffer out = nullptr;
  uint64_t out_offset = 0;
  DType out_dtype = DType::Int64;  // Int64 or Int32 positions; Bool for membership
};
void search_sorted(Context& ctx, const SearchArgs& a);

// Unique elements of one row in sorted order (`scratch` from sort_rows) or, without
// scratch, of consecutive runs. `first` (int32, n) receives 1 where a new group starts.
void unique_flags(Context& ctx, const SortInput& in, WGPUBuffer scratch, WGPUBuffer first);
// From `group` (int32, n: the inclusive scan of `first`) write, for each group g < U,
// values[g] (input dtype), start[g] (int32; optional), and inverse[original position] = g
// (int64; optional).
void unique_scatter(Context& ctx, const SortInput& in, WGPUBuffer scratch, WGPUBuffer first,
                    WGPUBuffer group, WGPUBuffer values, uint64_t values_offset,
                    WGPUBuffer inverse, uint64_t inverse_offset, WGPUBuffer start);
// counts[g] (int64) = start[g + 1] - start[g] (n for the last group).
void unique_counts(Context& ctx, WGPUBuffer start, uint64_t groups, uint64_t n,
                   WGPUBuffer counts, uint64_t counts_offset);

// Order keys of a row's extremes into `range` (4 words the caller initialises to
// {0xffffffff, 0, 0, 0}): words 0/1 = atomic min/max of the high key word (sort_key's
// mapping); for int64, word 2 = the max low word of the values whose high word is 0.
void value_range(Context& ctx, const SortInput& in, WGPUBuffer range);

// Histogram counts: for int inputs (bincount) bin = value; for floats (histc) bin =
// (x - lo) / (hi - lo) * bins, elements outside [lo, hi] skipped. `counts` is a u32 array
// (no weights), f32 bits (float32 weights, added with compare-exchange) or int64 pairs
// (integer/bool weights, exact: the low word's carry goes into the high word).
struct HistogramArgs {
  SortInput in;  // one row of n elements
  uint32_t bins = 0;
  float lo = 0, hi = 0;           // histc range
  WGPUBuffer weights = nullptr;  // optional (bincount)
  uint64_t weights_offset = 0;
  DType weights_dtype = DType::Float32;
  WGPUBuffer counts = nullptr;
  uint64_t counts_offset = 0;
};
void histogram(Context& ctx, const HistogramArgs& a);


// unique along a dim: `in` holds S = in.rows slices of R = in.n elements each (contiguous).
// Sorts slice numbers lexicographically by content (ties by number) into `order` (one u32
// per slice, padded to sort_padded_length(S) entries).
void sort_slices(Context& ctx, const SortInput& in, WGPUBuffer order);
// first[i] (int32) = 1 where slice at(i) differs from slice at(i - 1) (elementwise ==, so
// NaN never matches), at(i) = order[i] or i when order is null.
void slice_flags(Context& ctx, const SortInput& in, WGPUBuffer order, WGPUBuffer first);
// For each group g: values slice g = the group's first slice, start[g] = its position;
// inverse[at(i)] = group of i (int64).
void slice_scatter(Context& ctx, const SortInput& in, WGPUBuffer order, WGPUBuffer first,
                   WGPUBuffer group, WGPUBuffer values, uint64_t values_offset,
                   WGPUBuffer inverse, uint64_t inverse_offset, WGPUBuffer start);


// kthvalue as the CPU selects it (rows up to kQuickselectMaxLength: its worst case loops
// about n^2 / 2 times) (median-of-three quickselect on (value, index) pairs, NaN
// largest), so ties resolve to the same index: one invocation per row, working in
// `scratch` (3 words per element, rows * n). Writes one value + int64 index per row.
constexpr uint64_t kQuickselectMaxLength = 192;
void quickselect_rows(Context& ctx, const SortInput& in, uint64_t k, WGPUBuffer scratch,
                      WGPUBuffer values, uint64_t values_offset, WGPUBuffer indices,
                      uint64_t indices_offset);


// topk of short rows (up to kTopkSerialMaxLength) exactly as the CPU computes it: partial
// sort when k * 64 <= n, else nth-element then a sort of the first k - 1, with the same
// introsort/introselect steps as the CPU's standard library, so tied values report the
// CPU's indices and order. One invocation per row, in `scratch` (3 words per element).
constexpr uint64_t kTopkSerialMaxLength = 128;
void topk_small_rows(Context& ctx, const SortInput& in, uint64_t k, bool largest, bool sorted,
                     WGPUBuffer scratch, WGPUBuffer values, uint64_t values_offset,
                     WGPUBuffer indices, uint64_t indices_offset);

}  // namespace twgpu
