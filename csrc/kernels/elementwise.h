// The elementwise kernel family: one WGSL generator serves every unary, binary and
// ternary pointwise op, every dtype, any strides and offsets, broadcast (stride 0)
// operands and CPU scalars. The caller (the ATen layer, through TensorIterator) supplies
// the iteration shape and per-operand strides; this file owns the op table, the
// generated source, the uniform layout and the dispatch geometry.
#pragma once
#include <webgpu/webgpu.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/dtype.h"

namespace twgpu {

class Context;

constexpr int kMaxElementwiseDims = 8;
constexpr int kMaxElementwiseOperands = 5;  // output + up to 4 inputs

struct ElementwiseOperand {
  WGPUBuffer buffer = nullptr;  // null for a scalar operand
  uint64_t offset = 0;          // in elements
  DType dtype = DType::Float32;
  int64_t strides[kMaxElementwiseDims] = {};  // in elements, dims ordered fastest first
  bool is_scalar = false;       // value lives in `scalar` (already in the compute type)
  ScalarBits scalar;
};

struct ElementwiseLaunch {
  std::string op;                // a name from elementwise_ops.cpp ("add", "copy", ...)
  Compute compute = Compute::F32;
  int ndim = 0;
  int64_t sizes[kMaxElementwiseDims] = {};  // fastest-moving dim first
  std::vector<ElementwiseOperand> operands;  // [0] is the output
  ScalarBits params[4];          // op parameters (alpha, ...) in the compute type
};

// Returns false when `op` has no expression for `compute` (the caller falls back).
bool elementwise_supports(const std::string& op, Compute compute);
// False for ops that refuse a bool common dtype (abs, pow, remainder, shifts, ...).
bool elementwise_accepts_bool(const std::string& op);
// Records the kernel. Throws Error on a bad launch (unknown op, too many dims, ...).
void launch_elementwise(Context& ctx, const ElementwiseLaunch& launch);

}  // namespace twgpu
