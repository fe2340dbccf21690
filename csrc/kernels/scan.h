// Inclusive scans along contiguous rows: cumulative sum, product, max/min (with the index
// of the element each running extreme came from) and log-sum-exp. Element (r, i) of the
// input sits at `in_offset + r * n + i`; outputs are contiguous rows of the same shape.
#pragma once
#include <webgpu/webgpu.h>

#include <cstdint>

#include "kernels/dtype.h"

namespace twgpu {

class Context;

enum class ScanOp : uint32_t { Sum, Prod, Max, Min, LogSumExp };

struct ScanArgs {
  ScanOp op = ScanOp::Sum;
  DType dtype = DType::Float32;  // input and values (the caller converts the input first)
  uint64_t rows = 0, n = 0;
  WGPUBuffer in = nullptr;
  uint64_t in_offset = 0;
  WGPUBuffer out = nullptr;
  uint64_t out_offset = 0;
  WGPUBuffer indices = nullptr;  // int64, Max/Min only
  uint64_t indices_offset = 0;
};

void scan_rows(Context& ctx, const ScanArgs& a);

}  // namespace twgpu
