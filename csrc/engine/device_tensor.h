// A program tensor on the device: a strided view into a buffer, the shape the kernel
// library's torch-free operands are made from.
#pragma once
#include <webgpu/webgpu.h>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/program.h"
#include "kernels/dtype.h"

namespace twgpu::engine {

struct DeviceTensor {
  WGPUBuffer buffer = nullptr;
  uint64_t offset = 0;  // elements from the buffer's start
  DType dtype = DType::Float32;
  std::vector<int64_t> shape, strides;  // strides in elements
  bool is_view = false;  // its storage is decided by the view op that defines it

  int64_t dim() const { return static_cast<int64_t>(shape.size()); }
  uint64_t numel() const { return numel_of(shape); }
  uint64_t nbytes() const { return numel() * static_cast<uint64_t>(element_size(dtype)); }
  bool is_contiguous() const {
    if (numel() == 0) return true;  // no elements: any strides (a 0 inside the shape) will do
    int64_t expected = 1;
    for (int64_t d = dim() - 1; d >= 0; --d) {
      if (shape[d] != 1 && strides[d] != expected) return false;
      expected *= shape[d];
    }
    return true;
  }
  std::string describe() const { return shape_text(dtype, shape); }
};

}  // namespace twgpu::engine
