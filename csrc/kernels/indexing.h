// Indexing kernels (gather/scatter family, advanced indexing, masks, compaction): WGSL
// over a strided iteration space. One invocation per element of the iteration shape
// computes an element offset into the *target* (the indexed tensor) from its coordinates
// and from the values of up to kIndexMaxTensors index tensors, and an offset into the
// *values* side (the gathered output, or the scattered source). Index values outside
// [-bound, bound) (or [0, bound) without wrap) are skipped and reported through the
// device error word (runtime/device_checks.h).
#pragma once
#include <webgpu/webgpu.h>

#include <cstdint>
#include <vector>

#include "kernels/dtype.h"

namespace twgpu {

class Context;

constexpr int kIndexMaxDims = 8;
constexpr int kIndexMaxTensors = 4;

// A tensor seen through the iteration shape: element offset of its first element and one
// stride (in elements, >= 0) per iteration dim.
struct StridedArg {
  WGPUBuffer buffer = nullptr;
  uint64_t offset = 0;
  DType dtype = DType::Float32;
  std::vector<int64_t> strides;
};

// An index tensor (Int64 or Int32) seen through the iteration shape; its value selects a
// position along a target dim of size `bound` and stride `target_stride`.
struct IndexArg {
  StridedArg index;
  int64_t bound = 0;
  int64_t target_stride = 0;
};

enum class IndexCombine : uint8_t { Assign, Add, Mul, Max, Min };

struct IndexedLaunch {
  std::vector<int64_t> shape;  // the iteration shape (at most kIndexMaxDims dims)
  StridedArg target;           // strides: 0 along dims an index replaces
  std::vector<IndexArg> indices;
  StridedArg values;           // same dtype as target; unused when use_scalar
  bool use_scalar = false;     // scatter: write `scalar_words` (the dtype's storage bits)
  uint32_t scalar_words[4] = {0, 0, 0, 0};
  bool has_mask = false;       // elements whose mask (bool/uint8) is false are skipped
  StridedArg mask;
  bool wrap_negative = true;   // -bound <= i < 0 means i + bound
  uint32_t check_code = 0;     // DeviceChecks code reported for a bad index
};

// values[v] = target[t] for every element (bit moves: every dtype). `values` must be a
// buffer no other operand uses.
void indexed_gather(Context& ctx, const IndexedLaunch& l);
// target[t] = combine(target[t], value). Duplicates combine atomically (compare-and-swap
// on the containing word); Assign to duplicates keeps one of the writers. Reductions need
// a computable dtype of at most 4 bytes, or Int64 with Add.
void indexed_scatter(Context& ctx, const IndexedLaunch& l, IndexCombine combine);
// Int64 amax/amin (no 64-bit atomics in WGSL), deterministic in three passes over the
// contributions' words: the high words' maximum (as ordered keys), then the low words'
// maximum among contributions whose high word won. The target must be contiguous with
// `numel` elements (l.target.strides say how the iteration dims map onto it).
void indexed_scatter_extreme_i64(Context& ctx, const IndexedLaunch& l, bool is_max, uint64_t numel);
// True when indexed_scatter handles `combine` on `dtype`.
bool indexed_scatter_supports(DType dtype, IndexCombine combine);

// Compaction: positions[i] = number of nonzero flags before element i (row-major over
// `flags`' shape, read through its strides; any dtype of at most 8 bytes), and
// positions[n] = the total. `positions` holds n + 1 u32 words.
void exclusive_scan_nonzero(Context& ctx, const std::vector<int64_t>& shape, const StridedArg& flags,
                            WGPUBuffer positions);
// For every element i with a nonzero flag: out[positions[i] * ndim + d] = coordinate d of i
// (int64), i.e. nonzero()'s rows; rows from `max_rows` on are not written (nonzero_static).
void nonzero_coordinates(Context& ctx, const std::vector<int64_t>& shape, const StridedArg& flags,
                         WGPUBuffer positions, WGPUBuffer out, uint32_t max_rows = 0xFFFFFFFFu);
// masked_select: out[positions[i]] = values[i] where the flag is set (bit moves).
// masked_scatter: values[i] = source[positions[i]] where the flag is set (`values` then is
// the written operand and `out` the contiguous source).
void compact_values(Context& ctx, const std::vector<int64_t>& shape, const StridedArg& flags,
                    WGPUBuffer positions, const StridedArg& values, WGPUBuffer out, uint64_t out_offset,
                    bool expand);

}  // namespace twgpu
