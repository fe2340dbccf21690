// Tensors larger than one storage binding. A buffer may be as large as maxBufferSize,
// but one binding sees at most maxStorageBufferBindingSize bytes. A launch whose tensors
// each touch few enough bytes binds, for every buffer larger than a binding, the window
// over the bytes it touches (start rounded down to minStorageBufferOffsetAlignment) and
// rebases the tensor's element offset to the window; a family whose work touches more
// splits it into pieces that fit (elementwise by blocks of the iteration space,
// reductions and softmax by outer rows or reduced chunks, gemm by row blocks of M).
//
// While no buffer exceeds a binding (BufferPool::has_oversized()), nothing here runs.
#pragma once
#include <webgpu/webgpu.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runtime/pipeline_cache.h"

namespace twgpu {

class Context;

// Elements [first, end) of a tensor view.
struct ElementRange {
  uint64_t first = 0, end = 0;
};

// The elements a strided view touches: offset + sum(i_d * strides[d]), i_d < sizes[d].
// Empty for an empty view.
ElementRange strided_range(uint64_t offset, const int64_t* sizes, const int64_t* strides,
                           int ndim);

// Bytes a window may span for planning: the binding limit less the slack its start's
// alignment and its end's rounding may add.
uint64_t window_budget(Context& ctx);

// True when `buffer` is larger than one binding (so it must be bound through a window).
bool needs_window(Context& ctx, WGPUBuffer buffer);

// The window over bytes [first_byte, end_byte) of `buffer`; throws Error(Unsupported)
// naming `op` when it spans more than one binding.
BufferWindow window_over(Context& ctx, WGPUBuffer buffer, uint64_t first_byte,
                         uint64_t end_byte, const std::string& op);

// Pieces of `rows` rows, each touching `row_bytes` bytes of a tensor: rows per piece so
// that a piece fits one window (at least 1). Throws naming `op` when one row does not.
uint64_t rows_per_window(Context& ctx, uint64_t rows, uint64_t row_bytes,
                         const std::string& op);

// An operand of an N-d iteration space, for block planning: its element offset and one
// stride per dim.
struct BlockOperand {
  uint64_t offset = 0;
  const int64_t* strides = nullptr;
  int element_bytes = 4;
};

// Block extents (one per dim of `sizes`) such that over every block each operand touches
// at most one window's bytes: the dim reaching farthest in the widest operand shrinks
// first. Extents of `fastest_dim` stay multiples of 64 where they can (dense pieces keep
// their vector layouts). Throws naming `op` when even single elements do not fit.
std::vector<int64_t> plan_blocks(Context& ctx, const int64_t* sizes, int ndim,
                                 const std::vector<BlockOperand>& operands, int fastest_dim,
                                 const std::string& op);
// Calls fn(origin, extents) for every block of `block` tiling `sizes`.
void for_each_block(const int64_t* sizes, int ndim, const std::vector<int64_t>& block,
                    const std::function<void(const int64_t*, const int64_t*)>& fn);

// Error for a launch that binds a buffer larger than one binding without splitting.
[[noreturn]] void fail_too_large(Context& ctx, const std::string& op, uint64_t bytes);

}  // namespace twgpu
