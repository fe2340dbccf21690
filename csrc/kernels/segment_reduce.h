// Segmented reductions (torch._segment_reduce): contiguous data viewed as
// [outer, axis, inner]; segment s of row o covers axis positions [offsets[o, s],
// offsets[o, s + 1]). One invocation per output element, reducing in order as the CPU does.
#pragma once
#include <webgpu/webgpu.h>

#include <cstdint>

#include "kernels/dtype.h"

namespace twgpu {

class Context;

enum class SegmentReduction : uint8_t { Max, Min, Sum, Mean, Prod };

struct SegmentReduceDesc {
  WGPUBuffer data = nullptr, offsets = nullptr, out = nullptr;
  uint64_t data_offset = 0, offsets_offset = 0, out_offset = 0;  // elements
  DType dtype = DType::Float32;  // data and out
  uint64_t outer = 0, segments = 0, axis = 0, inner = 0;
  SegmentReduction reduction = SegmentReduction::Sum;
  bool has_initial = false;
  float initial = 0.0f;  // in the data dtype's precision already
};

// offsets: int64 [outer, segments + 1].
void segment_reduce(Context& ctx, const SegmentReduceDesc& d);

}  // namespace twgpu
