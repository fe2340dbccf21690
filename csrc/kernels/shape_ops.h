// Shape, copy and creation kernels (no torch): a gather copy that moves raw element bits
// (flip, roll, tril/triu for every dtype, float64 and complex included), value ranges
// (arange/range/linspace/logspace), and the index expansion of repeat_interleave.
#pragma once
#include <webgpu/webgpu.h>

#include <cstdint>
#include <vector>

#include "kernels/dtype.h"

namespace twgpu {

class Context;

// One dim of a gather copy, outermost first: the output extent, the source stride in
// elements (negative for a flipped dim) and a cyclic shift in [0, size) (roll: output
// coordinate c reads source coordinate (c - shift) mod size).
struct GatherDim {
  uint32_t size = 1;
  int32_t stride = 0;
  uint32_t shift = 0;
};

enum class TriangleMask : uint8_t { None, Lower, Upper };  // tril keeps col - row <= k

// Writes a contiguous output of `numel` elements of `elem_size` bytes into `dst` from
// word `dst_word` on: element e (in row-major order over `dims`) takes the source element
// at src_offset + sum(coord'_d * stride_d), or zero bits where the triangle mask drops
// it (over the last two dims). Narrow elements are written as whole words: the words
// covering the output are overwritten entirely (the caller ensures they are its own).
struct GatherCopy {
  WGPUBuffer src = nullptr;
  WGPUBuffer dst = nullptr;
  int64_t src_offset = 0;  // elements, for coordinate 0 of every dim (after flips)
  uint64_t dst_word = 0;
  int elem_size = 4;       // 1, 2, 4, 8 or 16 bytes
  std::vector<GatherDim> dims;
  uint64_t numel = 0;
  TriangleMask mask = TriangleMask::None;
  int64_t diagonal = 0;
};
void launch_gather_copy(Context& ctx, const GatherCopy& g);

// cat of word-aligned inputs into a contiguous output, in one dispatch per
// kCatInputsPerDispatch inputs: output row r (of `rows`, the product of the sizes before
// the cat dim) is input 0's row r, then input 1's, ...; an input's rows are `row_words`
// contiguous 32-bit words each, `row_stride_words` apart (a slice such as x[..., :half]
// as well as a contiguous tensor; any dtype whose rows and offsets are whole words moves
// as raw bits).
constexpr size_t kCatInputsPerDispatch = 7;  // 8 storage bindings by default, one the output
constexpr uint64_t kCatWordsMaxBytes = 4ull << 20;  // larger, not in vec4s: a vec4 copy per input
struct CatInput {
  WGPUBuffer buffer = nullptr;
  uint64_t word_offset = 0;
  uint64_t row_words = 0;
  uint64_t row_stride_words = 0;
};
// Whether launch_cat_words should take these: a GPU adapter, an output of at most
// kCatWordsMaxBytes unless every row and offset (the output's at dst_word too) is whole
// vec4 words, sizes within u32 (TORCH_WEBGPU_CAT_WORDS=0: never; =1: also on software
// adapters).
bool cat_words_fits(Context& ctx, const std::vector<CatInput>& inputs, uint64_t rows, uint64_t dst_word);
void launch_cat_words(Context& ctx, const std::vector<CatInput>& inputs, WGPUBuffer dst,
                      uint64_t dst_word, uint64_t rows);

enum class RangeKind : uint8_t { Affine, Linspace, Logspace, LinspaceInt };

// Fills `numel` contiguous elements of `dtype` from element `dst_offset` on:
// Affine:   start + step * i                              (F32 or exact I64 compute)
// Linspace: i < halfway ? start + step * i : end - step * (steps - 1 - i)      (F32)
// Logspace: base ** linspace(i)                                                (F32)
// LinspaceInt: the CPU's integer linspace, trunc(start + step * i) (or end - step *
//   (steps - 1 - i)) with a double step and one (fused) double rounding, reproduced
//   exactly in integer arithmetic; step = (-1)^step_negative * step_mantissa * 2^step_exp,
//   start/end as int64, |start|, |end| < 2**51.                                 (I64)
struct RangeFill {
  WGPUBuffer dst = nullptr;
  uint64_t dst_offset = 0;
  DType dtype = DType::Float32;
  uint64_t numel = 0;
  RangeKind kind = RangeKind::Affine;
  Compute compute = Compute::F32;
  ScalarBits start, step, end;
  uint64_t halfway = 0, steps = 0;
  float base = 10.f;
  uint64_t step_mantissa = 0;  // LinspaceInt: < 2**53
  int32_t step_exp = 0;
  bool step_negative = false;
};
void launch_range_fill(Context& ctx, const RangeFill& r);

// repeat_interleave: out[j] = the i with ends[i-1] <= j < ends[i], where `ends` holds the
// inclusive running sums of the repeats (n int64 entries) and the output (`total`
// elements of `dtype`, int32 or int64) is contiguous from element 0.
void launch_repeat_index(Context& ctx, WGPUBuffer ends, uint64_t ends_offset, uint32_t n,
                         WGPUBuffer dst, uint64_t total, DType dtype);

// tril_indices/triu_indices: output column j of the (2, total) result is (r, c) for the row
// r with ends[r-1] <= j < ends[r] (`ends`: inclusive running sums of the per-row counts,
// n int64 entries) and c = j - ends[r-1] + first column of row r (0 for the lower
// triangle, clamp(r + offset, 0, cols) for the upper one). `dtype` is int32 or int64.
void launch_triangle_indices(Context& ctx, WGPUBuffer ends, uint32_t n, WGPUBuffer dst,
                             uint64_t total, DType dtype, bool upper, int32_t offset,
                             uint32_t cols);

}  // namespace twgpu
